//! Byte-exact LNet wire formats: each a checked view over bytes plus a validated representation
//! with `parse` and `emit`. See wire.md in the shared reference for layouts.

pub mod header;
pub mod ping;
pub mod selftest;
