//! File layouts: see the crate documentation.
