//! Directory layouts (DNE): see the crate documentation.
