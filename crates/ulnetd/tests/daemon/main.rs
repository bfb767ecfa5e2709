//! Integration tests of `ulnetd`: the process (start, ready line, signals, refusals),
//! `ulnetctl` against a live daemon, and the control handler over live nodes in this
//! process. One binary, one module per area.
//!
//! No timing or size assertions: timeouts only turn a hang into a failure; the start-up
//! time and idle RSS are printed (`cargo test -p ulnetd -- --nocapture`).

// Helpers outside #[test] functions unwrap too: a failure is the test failing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod cli;
mod config;
mod demo;
mod dist;
mod faults;
mod legacy2yaml;
mod lifecycle;
mod live;
mod metrics;
mod modprobe;
mod operations;
mod peers;
mod policies;
mod promtext;
mod routing;
mod selftest;
mod support;
mod tcp;

use std::time::Duration;

/// Generous bound on any single wait; only reached if something hangs.
pub const HANG_GUARD: Duration = Duration::from_secs(60);
