//! The LNet protocol core: everything LNet does, with no I/O.
//!
//! This crate never touches a socket, a thread, the clock or a global random generator. Drivers
//! feed it bytes and events with `now` as an argument and collect what it wants sent.
//! See ARCHITECTURE.md for the map.

pub mod addr;
pub mod engine;
pub mod link_model;
pub mod rng;
pub mod socklnd;
pub mod time;
pub mod wire;
