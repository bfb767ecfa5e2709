//! The runtime's errors: one small enum per operation. Each wraps the core's error for that
//! operation (re-exported under [`crate::proto`]) and adds what only a runtime can say (the node
//! is shut down, the event queue belongs to another node, the thread could not start).

use std::io;

use ulnet_proto::addr::Nid;
use ulnet_proto::engine as core;
use ulnet_proto::engine::tunables::TunablesError;
use ulnet_proto::engine::{EventKind, EventStatus};

/// Building a [`Node`](crate::Node).
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The core refused the configuration (duplicate NID, bad tunables, ...).
    #[error(transparent)]
    Config(#[from] core::ConfigError),
    /// Another live node already has this NID on the same [`MemFabric`](crate::MemFabric).
    #[error("NID {0} is already attached to this fabric")]
    FabricNidTaken(Nid),
    /// The fabric has had `MAX_FABRIC_ENDPOINTS` attachments.
    #[error("the fabric has no room for another NI")]
    FabricFull,
    /// A TCP NI needs an IP NID (`a.b.c.d@tcpN` or an IPv6 address).
    #[error("NI {0}: a TCP NI needs an IP address NID")]
    TcpNotIp(Nid),
    /// The TCP NI's listener could not be bound (address not local, port in use, no
    /// privilege for a port below 1024...), or the node's listener on its address and port
    /// has other acceptor settings (`accept`, `accept_timeout`, `accept_backlog`).
    #[error("NI {nid}: cannot listen on port {port}: {source}")]
    TcpListen {
        nid: Nid,
        port: u16,
        #[source]
        source: io::Error,
    },
    /// `io_cpu` names a CPU beyond what an affinity mask can hold.
    #[error("CPU {0} is out of range for an affinity mask")]
    CpuOutOfRange(usize),
    /// `sched_setaffinity` failed for the I/O thread.
    #[error("pinning the I/O thread to CPU {cpu}: {source}")]
    Pin {
        cpu: usize,
        #[source]
        source: io::Error,
    },
    /// The I/O thread could not be spawned.
    #[error("spawning the I/O thread: {0}")]
    Thread(#[source] io::Error),
    /// The tokio runtime could not be built.
    #[error("building the I/O runtime: {0}")]
    Runtime(#[source] io::Error),
    /// The I/O thread exited before reporting that it started.
    #[error("the I/O thread exited during start-up")]
    ThreadExited,
}

/// The node was shut down; it takes no more calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the node is shut down")]
pub struct ShutDown;

/// [`Node::me_attach`](crate::Node::me_attach).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MeAttachError {
    #[error(transparent)]
    Core(#[from] core::MeAttachError),
    #[error("the node is shut down")]
    ShutDown,
}

/// [`Node::me_unlink`](crate::Node::me_unlink).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MeUnlinkError {
    #[error(transparent)]
    Core(#[from] core::MeUnlinkError),
    #[error("the node is shut down")]
    ShutDown,
}

/// [`Node::md_attach`](crate::Node::md_attach), inside a [`Rejected`](crate::Rejected) that
/// hands the memory back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MdAttachError {
    #[error(transparent)]
    Core(#[from] core::MdAttachError),
    /// The event queue was created by another node.
    #[error("the event queue belongs to another node")]
    ForeignEventQueue,
    #[error("the node is shut down")]
    ShutDown,
}

/// [`Node::md_bind`](crate::Node::md_bind), inside a [`Rejected`](crate::Rejected) that hands
/// the memory back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MdBindError {
    #[error(transparent)]
    Core(#[from] core::MdBindError),
    /// The event queue was created by another node.
    #[error("the event queue belongs to another node")]
    ForeignEventQueue,
    #[error("the node is shut down")]
    ShutDown,
}

/// Naming a live MD: [`Node::md_unlink`](crate::Node::md_unlink) and the memory accessors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MdError {
    #[error(transparent)]
    Core(#[from] core::MdError),
    #[error("the node is shut down")]
    ShutDown,
}

/// [`Node::put`](crate::Node::put) and [`Node::get`](crate::Node::get).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InitiateError {
    #[error(transparent)]
    Core(#[from] core::InitiateError),
    #[error("the node is shut down")]
    ShutDown,
}

/// [`Node::ping`](crate::Node::ping).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PingError {
    #[error(transparent)]
    Start(#[from] core::PingStartError),
    /// The ping ran and failed: no reply in time, a send failure, or a bad buffer.
    #[error("ping failed: {0}")]
    Failed(core::PingFailure),
    #[error("the node is shut down")]
    ShutDown,
}

/// [`Node::discover`](crate::Node::discover).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DiscoverError {
    #[error(transparent)]
    Start(#[from] core::DiscoverError),
    /// Discovery ran and failed with this status (what held messages failed with).
    #[error("discovery failed: {0:?}")]
    Failed(core::EventStatus),
    #[error("the node is shut down")]
    ShutDown,
}

/// Setting or clearing a lazy portal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PortalError {
    #[error(transparent)]
    Core(#[from] core::PortalError),
    #[error("the node is shut down")]
    ShutDown,
}

/// [`Node::set_tunables`](crate::Node::set_tunables).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SetTunablesError {
    /// Lustre's checks refused the values (e.g. `transaction_timeout` not above
    /// `retry_count`).
    #[error(transparent)]
    Invalid(#[from] TunablesError),
    #[error("the node is shut down")]
    ShutDown,
}

/// Waiting on an [`EventQueue`](crate::EventQueue).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RecvError {
    /// `try_recv`: no event waiting now.
    #[error("no event waiting")]
    Empty,
    /// Nothing arrived before the timeout.
    #[error("no event before the timeout")]
    Timeout,
    /// The node shut down and every event it queued has been taken.
    #[error("the event queue is closed")]
    Closed,
}

/// The convenience transfers ([`Node::put_and_wait_ack`](crate::Node::put_and_wait_ack),
/// [`Node::get_into`](crate::Node::get_into) and their async forms).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TransferError {
    #[error("binding the MD: {0}")]
    Bind(MdBindError),
    #[error("starting the operation: {0}")]
    Initiate(InitiateError),
    /// An event reported a failure: the SEND (the request never left) or the response.
    #[error("{kind:?} event failed with {status:?}")]
    Failed { kind: EventKind, status: EventStatus },
    /// The MD was unlinked before the ACK or REPLY came (its response tracker expired).
    #[error("no {0:?} before the MD was unlinked")]
    NoResponse(EventKind),
    /// The caller's timeout passed; the MD has been unlinked.
    #[error("timed out waiting for the {0:?}")]
    TimedOut(EventKind),
    #[error("the node is shut down")]
    ShutDown,
}

/// [`Node::post`](crate::Node::post), inside a [`Rejected`](crate::Rejected) that hands the
/// memory back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PostError {
    #[error("attaching the ME: {0}")]
    MeAttach(MeAttachError),
    /// The ME was unlinked again, as Lustre does.
    #[error("attaching the MD: {0}")]
    MdAttach(MdAttachError),
}
