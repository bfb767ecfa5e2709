//! The socklnd connection protocol (the TCP LND), with no I/O: the handshake of each connection,
//! the framing of an established one, zero-copy cookies, keepalives, and the per-peer set of
//! typed connections. A driver only moves bytes: it writes what these machines hand out, feeds
//! them what it reads, reads payload straight into MD memory when told to, and calls
//! `handle_timeout` at `poll_timeout`.
//!
//! Time is the engine's [`Time`](crate::time::Time), an instant since an epoch the driver
//! picks, and spans are [`std::time::Duration`]; `now` must never go backwards.
//!
//! - [`handshake`]: connector and acceptor state machines up to an established connection.
//! - [`conn`]: one established connection's receive and transmit framing.
//! - [`zc`]: zero-copy request and ACK cookies.
//! - [`peer_conns`]: a peer's connections: which to dial, which carries a message, retries,
//!   reconnect backoff, keepalives, a rebooted peer.
//! - [`tunables`]: the socklnd tunables and their defaults.
//! - [`fuzzing`]: entry points that drive the machines from arbitrary bytes.
//!
//! lustre: lnet/klnds/socklnd/ (socklnd.c, socklnd_cb.c, socklnd_proto.c), lnet/lnet/acceptor.c.

pub mod conn;
pub mod fuzzing;
pub mod handshake;
pub mod peer_conns;
pub mod tunables;
pub mod zc;

/// Names one connection within a peer's set; assigned by [`peer_conns::PeerConns`] (or by the
/// driver for a standalone [`conn::Conn`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(pub u32);

/// The caller's name for a message it queued; handed back when the message is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MessageToken(pub u64);
