//! ulnet: LNet, the Lustre network layer, in userspace. This crate is the runtime that drives
//! the I/O-free core ([`ulnet_proto`], re-exported as [`proto`]) for real, and the public Rust
//! API, which mirrors LNet's: match entries and memory descriptors on portals, PUT and GET with
//! ACK and REPLY, events, lazy portals, statistics.
//!
//! ```
//! use std::time::Duration;
//! use ulnet::*;
//!
//! // A node with only the loopback NI `0@lo`: no network needed.
//! let node = Node::loopback().unwrap();
//! let inbox = node.event_queue(64);
//! // Accept one PUT of up to 1 KiB on portal 9 with match bits 0xbeef.
//! let buffer = MdSpec::new(Memory::new(vec![0; 1024]))
//!     .options(MdOptions::OP_PUT)
//!     .threshold(Threshold::Count(1));
//! node.post(9, 0xbeef, buffer, &inbox).unwrap();
//! // PUT to ourselves and wait for the ACK.
//! let me = ProcessId::new(Nid::LO_0, node.pid());
//! let done = node
//!     .put_and_wait_ack(me, 9, 0xbeef, Memory::new(b"ping".to_vec()), Duration::from_secs(10))
//!     .unwrap();
//! assert_eq!(done.event.mlength, 4);
//! // The target's PUT event is the MD's last (threshold 1): it hands the buffer back.
//! let put = inbox.recv_timeout(Duration::from_secs(10)).unwrap();
//! assert_eq!(put.kind, EventKind::Put);
//! assert!(put.unlinked);
//! assert_eq!(&put.memory.unwrap().to_vec()[..4], b"ping");
//! ```
//!
//! # Threading model
//!
//! * A [`Node`] owns the core behind one read-write lock and one I/O thread per CPU partition,
//!   each running a tokio current-thread runtime, pinned to its partition's CPUs when given them
//!   ([`NodeBuilder::partition_cpus`], [`NodeBuilder::io_cpu`]). A TCP connection runs on the
//!   thread of the partition its peer's NID hashes to. With several partitions the message path
//!   takes the lock shared and locks only the partitions a call needs; a call that needs the
//!   whole node takes it exclusively (decision 0029).
//! * API calls run on the caller's thread: lock, call the core with `now` from a monotonic
//!   clock, carry out its outputs (events to their [`EventQueue`], transmits to the NI's LND),
//!   unlock. Loopback (`0@lo`) completes entirely inside the call.
//! * Socket writes are batched: what one call (or one I/O turn) produces goes out in one
//!   vectored write per connection. A call that follows another within 200 us with no wait in
//!   between is a stream: its output is held back until the thread waits for anything of the
//!   node (an event queue found empty, a ping), or 1 ms at most, so back-to-back sends share a
//!   system call while a lone request still leaves at once.
//! * The I/O threads own LND I/O; partition 0's also the timers. One is woken only when an
//!   LND needs it (a
//!   cross-CPU wake-up costs about 30 us on small virtual machines); a waiter can spin before it
//!   parks ([`NodeBuilder::spin`], off by default: see [`DEFAULT_SPIN`] for why). Details, lock
//!   order and shutdown order are in the source documentation of the `driver` modules.
//!
//! # LNDs
//!
//! * loopback, inside the core;
//! * mem: nodes in one process over a [`MemFabric`] with the core's link model;
//! * tcp (socklnd): real sockets, byte-compatible with the kernel's `ksocklnd`
//!   ([`NodeBuilder::tcp_ni`]; counters in [`Node::tcp_stats`]).
//!
//! # Events
//!
//! Events go to the [`EventQueue`] named when an MD is attached or bound; read them blocking
//! ([`EventQueue::recv_timeout`]) or async ([`EventQueue::next`], or as a `Stream`). The event
//! that reports an MD unlinked hands its memory back. A queue made with
//! [`Node::event_queue_with_handler`] also has a handler, called on the thread that produced its
//! events (Lustre's `md.handler`), so a service answers without waking a thread of its own.

mod admin;
mod calls;
mod clock;
mod driver;
mod error;
mod event_queue;
mod faults;
mod link_speed;
mod link_watch;
mod lnd;
mod log_limit;
mod ni_live;
mod node;
pub mod numa;
mod policies;
mod routing;
mod transfer;

pub use ulnet_proto as proto;

pub use admin::AdminError;
pub use calls::Calls;
pub use error::{
    BuildError, DiscoverError, InitiateError, MdAttachError, MdBindError, MdError, MeAttachError,
    MeUnlinkError, PingError, PortalError, PostError, RecvError, SetTunablesError, ShutDown,
    TransferError,
};
pub use event_queue::{EventHandler, EventQueue, MAX_EVENT_QUEUE_CAPACITY};
pub use link_speed::link_speed_mbps;
pub use lnd::mem::{FabricError, FabricStats, MAX_FABRIC_ENDPOINTS, MemFabric};
pub use lnd::tcp::{
    COPY_MAX_PAYLOAD, MAX_HANDSHAKES, MAX_HANDSHAKES_PER_SOURCE, OUTBOX_MAX_BYTES, TcpConnection,
    TcpStats,
};
pub use ni_live::{AddNiError, NI_DRAIN_TIME, RemoveNiError};
pub use node::{
    DEFAULT_SPIN, MAX_SPIN, Node, NodeBuilder, NodeStats, PING_REPLY_POLL, RuntimeStats,
};
pub use transfer::Transferred;
pub use ulnet_proto::addr::{LNET_PID_ANY, LNET_PID_LUSTRE, Net, Nid, ProcessId};
pub use ulnet_proto::engine::tunables::TunablesError;
pub use ulnet_proto::engine::{
    BufferClass, BufferCounts, BufferPoolStats, RouteConfig, RouteError, RouteInfo, RoutingError,
    RoutingState,
};
pub use ulnet_proto::engine::{DelayRule, DropRule, FaultMatch, FaultRuleError, FaultStats};
pub use ulnet_proto::engine::{
    Event, EventKind, EventStatus, GetRequest, GlobalStats, HealthStatus, InsertPosition, Limits,
    LndKind, MatchTableStats, MdHandle, MdOptions, MdSpec, MeHandle, Memory, NetTunables, NiConfig,
    NiStats, PeerNiStats, PortalRotor, PutRequest, Rejected, ResponseTracking, Threshold, Tunables,
    UnlinkMode,
};
pub use ulnet_proto::engine::{
    UdspAction, UdspAddError, UdspConstructInfo, UdspNotFound, UdspRule, UdspRuleKind,
};
pub use ulnet_proto::link_model::LinkConfig;
pub use ulnet_proto::socklnd::tunables::{AcceptPolicy, ConnsPerPeer, SocklndTunables};

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn handles_are_send_and_sync() {
        assert_send_sync::<Node>();
        assert_send_sync::<EventQueue>();
        assert_send_sync::<MemFabric>();
        assert_send_sync::<Event>();
    }
}
