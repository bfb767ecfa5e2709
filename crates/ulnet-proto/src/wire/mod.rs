//! Byte-exact LNet wire formats: each a checked view over bytes plus a validated representation
//! with `parse` and `emit`. Layouts: docs/protocol/wire.md.

pub mod acceptor;
mod cursor;
pub use cursor::ByteOrder;
pub mod header;
pub mod hello;
pub mod ksock;
pub mod ping;
pub mod selftest;
pub mod stream;
