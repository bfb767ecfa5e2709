//! The node's part: what every partition's calls read and only calls planned on the whole node
//! change (decision 0029): the local NIs and their nets, peers (the peer NIs are their owning
//! partitions'), portals, the targets, pings and
//! discovery, recovery, fast failover's watch, fault rules, routes and UDSP. A view reaches it
//! through one reference.

use crate::engine::faults::Faults;
use crate::engine::ni::Nis;
use crate::engine::peer::PeerTable;
use crate::engine::ping::{Discoveries, PingTarget, Pings, PushTarget};
use crate::engine::policies::UdspRules;
use crate::engine::portal::Portals;
use crate::engine::recovery::RecoveryQueues;
use crate::engine::routes::Routes;
use crate::engine::tunables::Tunables;
use crate::engine::watch::Failover;

/// See the module documentation; each field is the part its type's file describes.
#[derive(Debug)]
pub(crate) struct NodePart {
    pub(crate) tunables: Tunables,
    pub(crate) nis: Nis,
    pub(crate) peers: PeerTable,
    pub(crate) portals: Portals,
    pub(crate) ping_target: PingTarget,
    pub(crate) push_target: PushTarget,
    pub(crate) pings: Pings,
    pub(crate) discoveries: Discoveries,
    pub(crate) recovery: RecoveryQueues,
    pub(crate) failover: Failover,
    pub(crate) faults: Faults,
    pub(crate) routes: Routes,
    pub(crate) policies: UdspRules,
    #[cfg(test)]
    /// Behind a cell: calls planned on partitions report to it through a shared view.
    pub(crate) audit: std::cell::RefCell<crate::engine::audit::PartitionAudit>,
    /// The first internal inconsistency seen (a bug); reported by `check_invariants`. Set
    /// through a shared reference, so that a call planned on partitions can report one.
    pub(crate) violation: std::sync::OnceLock<String>,
}
