//! LNet's message engine: portals, MEs, MDs, messages, credits, health and timeouts, as an
//! I/O-free state machine ([`Engine`]).
//!
//! Map: [`node`] holds [`Engine`], the public API and the driver call protocol, and lists the
//! parts the state is split into (decision 0012). Parts, each owning its state: [`ni`] local
//! NIs and nets, [`peer`] peers and peer NIs, [`portal`], [`me`], [`md`] and [`memory`] the
//! Portals objects (lib-ptl.c, lib-me.c, lib-md.c), [`msg`] the message table, `tracker`
//! response trackers, [`ping`] ping, push and discovery state, `recovery` the recovery queues,
//! `watch` fast failover's state, [`faults`] drop and delay rules, [`routes`] routes and router buffers, [`policies`] UDSP rules, [`cpt`] CPU partitions and the NID-to-CPT hash, [`tx_queues`] an NI's tx credits per partition, `dedupe` the target's delivery log, `outputs` the driver's
//! queues; [`credits`], [`health`],
//! [`latency`], [`tunables`], [`event`], [`stats`] and [`slab`] are their building blocks.
//! Flows, each an `impl Engine` over the parts: `send`, `select`, `recv` and `finalize` the
//! message lifecycle and multi-rail path selection (lib-move.c, lib-msg.c), `reserved` LNet's
//! use of portal 0 (targets, pings), [`discovery`] dynamic discovery (peer.c), `monitor` the
//! recovery passes, `failover` fast failover (beyond Lustre), `routing` route choice, forwarding and the router checker (router.c), [`config`] configured peers and
//! interface state. [`testing`] is the deterministic harness and fuzz driver.

#[cfg(test)]
mod audit;
mod call;
pub mod config;
pub mod cpt;
pub mod credits;
mod dedupe;
pub mod discovery;
pub mod error;
pub mod event;
mod failover;
pub mod faults;
mod finalize;
pub mod health;
mod invariants;
pub mod latency;
pub mod md;
pub mod me;
pub mod memory;
mod monitor;
pub mod msg;
pub mod ni;
pub mod node;
mod node_part;
mod outputs;
mod partition;
mod partition_call;
pub mod peer;
mod per_partition;
pub mod ping;
pub mod plan;
pub mod policies;
pub mod portal;
mod recovery;
mod recv;
mod reserved;
pub mod routes;
mod routing;
mod select;
mod send;
mod shares;
pub mod slab;
mod stamp;
pub mod stats;
pub mod testing;
mod tracker;
pub mod tunables;
pub mod tx_queues;
mod view;
mod watch;

pub use config::{MAX_NIDS_PER_PEER, NiSetError, PeerAddError, PeerDelError, PeerSetError};
pub use dedupe::MAX_DELIVERY_RECORDS;
pub use dedupe::{DEDUPE_WINDOW, RESEND_COOKIE_FLAG};
pub use discovery::{DiscoveryId, DiscoveryResult, MAX_DISCOVERIES, MAX_DISCOVERY_PENDING};
pub use error::{
    ConfigError, DiscoverError, DriverError, InitiateError, MdAttachError, MdBindError, MdError,
    MeAttachError, MeUnlinkError, MemoryError, NiRemoveError, ParseError, PingStartError,
    PortalError, Rejected,
};
pub use event::{Event, EventKind, EventStatus};
pub use failover::COPY_WINDOW;
pub use faults::{
    DelayRule, DropRule, FaultMatch, FaultRuleError, FaultStats, MAX_FAULT_HELD, MAX_FAULT_RULES,
};
pub use health::{HealthStatus, MAX_HEALTH};
pub use latency::{LATENCY_BUCKETS, LatencyHistogram, LatencyStats};
pub use md::{MdHandle, MdOptions, MdSpec, Threshold, UnlinkMode};
pub use me::{InsertPosition, LNET_PID_ANY, LNET_PID_LUSTRE, MeHandle, ProcessId};
pub use memory::{IntoSegments, LentPayload, MAX_SEGMENTS, Memory, PinnedBytes, Slices, SlicesMut};
pub use msg::{RxId, TxId};
pub use ni::{CptsJoin, LndKind, MAX_SELECTION_PRIORITY, NiConfig, NiId};
pub use node::{
    Engine, EngineConfig, GetRequest, Limits, PutRequest, RecvAction, Resume, Transmit,
};
pub use outputs::{MAX_PATH_RESETS, PathReset, Pending};
pub use peer::{PeerInfo, PeerNiInfo, PeerState};
pub use ping::{
    MAX_PINGS, PingCompletion, PingFailure, PingId, PingReply, PingResult, RefusedNid,
    RefusedReason,
};
pub use policies::{
    MAX_SHOWN_PREFERRED, MAX_UDSP_RULES, UdspAction, UdspAddError, UdspConstructInfo, UdspNotFound,
    UdspRule, UdspRuleKind, UdspRules, UdspSpecError,
};
pub use portal::{MAX_PORTALS, MatchTableStats, RESERVED_PORTAL};
pub use routes::{
    BufferClass, BufferCounts, BufferPoolStats, MAX_HOPS, MAX_ROUTES, RouteConfig, RouteError,
    RouteInfo, RoutingState,
};
pub use routing::RoutingError;
pub use stats::{
    CreditStats, ElementStats, GlobalStats, MsgTypeCounts, NiHealthStats, NiStats,
    PeerNiHealthStats, PeerNiStats,
};
pub use tunables::{
    DEFAULT_BLACKHOLE_TIMEOUT, NetTunables, PortalRotor, ResponseTracking, Tunables,
};
pub use tx_queues::{CptCredits, tq_credits};
pub use watch::MAX_FAILOVER_BYTES;
