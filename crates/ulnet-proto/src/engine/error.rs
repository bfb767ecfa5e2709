//! Error types: one small enum per operation, one named variant per kind of bad input.

use crate::addr::Nid;
use crate::engine::memory::Memory;
use crate::engine::tunables::TunablesError;

/// Building a [`Memory`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MemoryError {
    /// More than `LNET_MAX_IOV` (256) segments.
    #[error("{0} segments, at most 256 allowed")]
    TooManySegments(usize),
}

/// Creating a node.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error(transparent)]
    Tunables(#[from] TunablesError),
    #[error("NID {0:?} is configured twice")]
    DuplicateNid(Nid),
    /// `0@lo` is always NI 0; it cannot be configured.
    #[error("the loopback NID is implicit and cannot be configured")]
    LoopbackConfigured,
    /// A configured NI must use a network LND, not `Lo`.
    #[error("NI {0:?} uses the loopback LND")]
    LoopbackLnd(Nid),
    #[error("more NIs than a node supports")]
    TooManyNis,
    #[error("NI {nid:?}: {error}")]
    Cpt { nid: Nid, error: crate::engine::cpt::CptError },
}

/// `LNetMEAttach`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MeAttachError {
    #[error("portal {0} out of range (64 portals)")]
    BadPortal(u32),
    /// Lustre's `-EPERM`: the portal's match type (unique or wildcard) is already fixed the other way.
    #[error("portal {0} has the other match type (unique vs wildcard)")]
    MatchTypeMismatch(u32),
    #[error("too many match entries")]
    TooManyEntries,
    /// `InsertPosition::Local` names a partition the node does not have.
    #[error("CPU partition {cpt} out of range ({count} partitions)")]
    BadCpt { cpt: u32, count: u32 },
}

/// Unlinking an ME that has no MD.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MeUnlinkError {
    #[error("unknown ME handle")]
    UnknownMe,
    #[error("ME already unlinked")]
    UnlinkedMe,
    /// An ME with an MD goes away with its MD.
    #[error("ME has an MD attached; unlink the MD")]
    MdAttached,
}

/// `LNetMDAttach`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MdAttachError {
    #[error("unknown ME handle")]
    UnknownMe,
    #[error("ME already unlinked")]
    UnlinkedMe,
    #[error("ME already has an MD")]
    MeBusy,
    /// A passive MD needs at least one of OP_PUT and OP_GET.
    #[error("MD allows neither PUT nor GET")]
    NoOperation,
    #[error("MD length {0} exceeds 2^32 - 1")]
    TooLong(usize),
    #[error("max_size {max_size} exceeds MD length {length}")]
    MaxSizeOutOfRange { max_size: u32, length: usize },
    #[error("both TRACK_RESPONSE and NO_TRACK_RESPONSE")]
    ConflictingTracking,
    #[error("too many MDs")]
    TooManyMds,
}

/// `LNetMDBind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MdBindError {
    /// OP_PUT / OP_GET are for attached MDs only.
    #[error("OP_PUT/OP_GET are not allowed on a bound MD")]
    OperationFlags,
    /// A bound MD is at most `LNET_MTU` (1 MiB).
    #[error("bound MD length {0} exceeds LNET_MTU")]
    TooLong(usize),
    #[error("max_size {max_size} exceeds MD length {length}")]
    MaxSizeOutOfRange { max_size: u32, length: usize },
    #[error("both TRACK_RESPONSE and NO_TRACK_RESPONSE")]
    ConflictingTracking,
    #[error("too many MDs")]
    TooManyMds,
    /// [`MdSpec::cpt`](crate::engine::MdSpec::cpt) names a partition the node does not have.
    #[error("CPU partition {cpt} out of range ({count} partitions)")]
    BadCpt { cpt: u32, count: u32 },
}

/// An MD creation that failed, with the memory handed back.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{error}")]
pub struct Rejected<E: std::error::Error + 'static> {
    #[source]
    pub error: E,
    pub memory: Memory,
}

/// Looking up an MD by handle (`md_memory`, `md_unlink`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MdError {
    #[error("unknown MD handle")]
    UnknownMd,
    /// The MD was unlinked; its handle no longer resolves.
    #[error("MD already unlinked")]
    UnlinkedMd,
    /// The MD's memory is being filled by a receive in progress (lent to the driver).
    #[error("MD memory is being filled by a receive")]
    MemoryLent,
}

/// `LNetPut` / `LNetGet` (Lustre: `-ENOENT` for the MD kinds, `-ENOMEM`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InitiateError {
    #[error("unknown MD handle")]
    UnknownMd,
    #[error("MD already unlinked")]
    UnlinkedMd,
    /// Threshold 0: the MD accepts no more operations.
    #[error("MD is inactive (threshold exhausted)")]
    InactiveMd,
    /// Passive MDs (attached to an ME) cannot initiate.
    #[error("MD is attached to an ME")]
    AttachedMd,
    /// The source NID is not one of ours.
    #[error("source NID {0:?} is not local")]
    NotLocalSource(Nid),
    #[error("too many messages in flight")]
    TooManyMessages,
}

/// Setting or clearing a lazy portal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PortalError {
    #[error("portal {0} out of range (64 portals)")]
    BadPortal(u32),
}

/// A driver call that names a transmit or receive the core does not have in that state:
/// a driver bug, reported instead of panicking.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DriverError {
    #[error("unknown transmit id")]
    UnknownTx,
    #[error("unknown receive id")]
    UnknownRx,
    /// The message exists but is not waiting for this call (e.g. a second completion).
    #[error("message is not in a state that expects this call")]
    WrongState,
    #[error("write beyond the receive's matched length")]
    OutOfRange,
    #[error("unknown NI")]
    UnknownNi,
    /// The receive's destination is lent to the driver and must be given back first.
    #[error("the receive's payload is lent to the driver")]
    PayloadLent,
}

/// Why a received header was refused; the LND closes the connection (Lustre's `-EPROTO`).
/// lustre: lnet/lnet/lib-move.c `lnet_parse()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// HELLO (4) is only valid inside a socklnd V1 handshake.
    #[error("HELLO message outside a handshake")]
    HelloMessage,
    #[error("{0}-byte payload on a GET or ACK")]
    PayloadOnBodiless(u32),
    #[error("payload {0} exceeds LNET_MTU")]
    PayloadTooLong(u32),
    /// Destination on the receiving NI's own net but not its NID.
    #[error("message for {0:?} should have been sent direct")]
    ShouldHaveBeenDirect(Nid),
    /// Destination is another of our NIDs, on a different net.
    #[error("message for our NID {0:?} arrived on the wrong net")]
    WrongLocalNi(Nid),
    #[error("message arrived on an unknown NI")]
    UnknownNi,
}

/// [`Engine::ping`](crate::engine::Engine::ping).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PingStartError {
    /// Lustre's `-EINVAL`: `LNET_NID_ANY` cannot be pinged.
    #[error("cannot ping LNET_NID_ANY")]
    AnyNid,
    #[error("source NID {0:?} is not local")]
    NotLocalSource(Nid),
    #[error("too many pings in flight")]
    TooManyPings,
    #[error("too many messages in flight")]
    TooManyMessages,
}

/// [`Engine::discover`](crate::engine::Engine::discover).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DiscoverError {
    /// Lustre's `-EINVAL`.
    #[error("cannot discover LNET_NID_ANY")]
    AnyNid,
    /// `0@lo` and our own NIDs are not peers.
    #[error("NID {0:?} is local")]
    LocalNid(Nid),
    #[error("the peer table is full")]
    TooManyPeers,
    #[error("too many discoveries waited on")]
    TooManyDiscoveries,
}

/// [`Engine::remove_ni`](crate::engine::Engine::remove_ni).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NiRemoveError {
    #[error("unknown NI")]
    UnknownNi,
    /// `0@lo` is always present.
    #[error("the loopback NI cannot be removed")]
    Loopback,
    #[error("NI already removed")]
    AlreadyRemoved,
}
