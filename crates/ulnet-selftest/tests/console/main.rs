//! The console library driving selftest services over the in-process mem LND.
//!
//! No timing assertions: timeouts only turn a hang into a failure.

// Helpers outside #[test] functions unwrap too: a failure is the test failing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod bad_input;
mod cli;
mod common;
mod lifecycle;
mod script;
mod tcp;
mod wire;
