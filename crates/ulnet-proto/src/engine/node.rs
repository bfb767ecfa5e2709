//! The engine: LNet's message engine as an I/O-free state machine, and the orchestration of
//! its parts.
//!
//! [`Engine`] holds its state as owned parts, each a struct with private fields and methods
//! that take `&mut self` and explicit arguments, defined in the file named after it; no part
//! imports this file (decision 0012). What every partition's calls read is one `NodePart`
//! (`node_part.rs`) holding these:
//!
//! * `ni.rs` `Nis`: local NIs, their nets and the round-robin counter.
//! * `peer.rs` `PeerTable`: peers and where their peer NIs live, peer NI creation and reclaim;
//!   the peer NIs themselves (credits, health, statistics) are their owning partition's
//!   (`PeerNis`).
//! * `portal.rs` `Portals`: the portals and their match tables.
//! * `ping.rs` `Pings`, `Discoveries`, the ping and push targets: ping, push and discovery state.
//! * `recovery.rs` `RecoveryQueues`: the monitor thread's recovery queues and next pass.
//! * `watch.rs` `Failover`: fast failover's held copy bytes and delivery log (its watch
//!   queue is kept per partition with the peer NIs, `PeerNis`).
//! * `faults.rs` `Faults`: drop and delay rules (`lnetctl fault`), the messages delay rules
//!   hold, and their random generator; consulted by `recv` on arrival and here when the
//!   driver takes a transmit.
//! * `routes.rs` `Routes`: the route table, the routing state and the router buffer pools.
//! * `policies.rs` `UdspRules`: the UDSP rules (`lnetctl udsp`), stamped onto the nets, NIs,
//!   peer nets and peer NIs whose priorities and preferred lists `select` reads.
//! * `cpt.rs` `Partitions`: the CPU partition count and the NID-to-CPT hash; each NI keeps its
//!   CPT list and its NI-wide tx credit count (`tx_queues.rs`), and every transmit carries
//!   its CPT (decision 0026).
//! * `partition.rs` `Partition`, one per CPU partition: what that partition's calls change.
//!   Its messages (`msg.rs` `Messages`, each within `Limits::messages`), MDs and MEs (`md.rs`
//!   `Mds`, `me.rs` `Mes`), response tracker deadlines (`tracker.rs` `Trackers`), counters,
//!   its share of what the `poll_*` calls drain (`outputs.rs` `Outputs`: transmits, resumes,
//!   events, completions, path resets), the state of a call entering on it (`call.rs`
//!   `CallState`), and each local NI's traffic counts and tx credit queue (`ni.rs`
//!   `NiShares`).
//!
//! What spans parts runs on a view of them (`view.rs`): `impl Flow` for what changes state,
//! `impl View` for what only reads, here (the call protocol, allocation, trackers, the work
//! loop) or in the file of the flow it belongs to: `send`, `select`, `recv`, `finalize` (the
//! message lifecycle), `reserved` (portal 0: targets and pings), `discovery`, `monitor`
//! (recovery passes), `failover`, `config`, `routing` (route choice, forwarding, the router
//! checker). The message path's flows are `impl View<Exclusive, N>`: they run on a `Flow`
//! or on a `PartFlow` that only reads the node part. `Engine` owns the parts, each
//! partition's behind its own lock; a call through `&mut self` builds a view of all of them,
//! and `partition_call.rs` makes message-path calls through `&self` on the partitions their
//! plan names (decision 0029).

#[cfg(test)]
use crate::engine::shares::Keyed;
use crate::engine::shares::Shares;
use crate::engine::view::{Access, Exclusive, Flow, Look, NodeAccess, View, lock, part_mut};
use std::collections::VecDeque;
use std::sync::Mutex;

use crate::addr::Nid;
use crate::engine::call::Work;
use crate::engine::cpt::Partitions;
use crate::engine::dedupe::RESEND_COOKIE_FLAG;
use crate::engine::error::{
    ConfigError, DriverError, InitiateError, MdAttachError, MdBindError, MdError, MeAttachError,
    MeUnlinkError, NiRemoveError, PortalError, Rejected,
};
use crate::engine::event::{Event, EventKind, EventStatus, EventTemplate};
use crate::engine::faults::{DelayRule, DropRule, FaultRuleError, FaultStats, Faults, Held};
use crate::engine::health::HealthStatus;
use crate::engine::md::{
    MAX_COOKIE_INDEX, Md, MdHandle, MdOptions, MdOwner, MdSpec, Mds, Tracker, UnlinkMode,
};
use crate::engine::me::{InsertPosition, Me, MeHandle, ProcessId};
use crate::engine::memory::{LentPayload, MAX_MD_LENGTH, Memory, PinnedBytes, Slices, SlicesMut};
use crate::engine::msg::{Message, Messages, Phase, RxId, TxId};
use crate::engine::ni::{LndKind, Ni, NiConfig, NiId, Nis};
use crate::engine::node_part::NodePart;
pub use crate::engine::outputs::{RecvAction, Resume, Transmit};
use crate::engine::partition::Partition;
use crate::engine::peer::{PeerNiId, PeerNis, PeerTable, PeerTableFull};
use crate::engine::per_partition::PerPartition;
use crate::engine::ping::{Discoveries, PingTarget, Pings, PushTarget};
#[cfg(test)]
use crate::engine::plan::CallScope;
use crate::engine::policies::UdspRules;
use crate::engine::portal::{MatchTableStats, Portals};
use crate::engine::recovery::RecoveryQueues;
use crate::engine::routes::Routes;
use crate::engine::slab::{Key, KeyPartitions, KeyState};
use crate::engine::stats::{CreditStats, GlobalStats, NiStats, PeerNiStats};
use crate::engine::tunables::Tunables;
use crate::engine::tx_queues::PoolMut;
use crate::engine::watch::Failover;
use crate::time::Time;
use crate::wire::header::{Body, Header, LNET_MTU, WireHandle};

/// Most messages alive at once in one partition (sends, receives, delayed PUTs). Lustre
/// allocates without a limit (counting `msgs_alloc` per CPT); we bound each partition and
/// refuse new work (`-ENOMEM`) beyond.
pub const MAX_MESSAGES: usize = 1 << 16;
/// Most of the user's MDs alive at once in one partition.
pub const MAX_MDS: usize = 1 << 20;
/// Most of the user's MEs alive at once in one partition.
pub const MAX_MES: usize = 1 << 20;
/// Most peer NIs the node remembers.
pub const MAX_PEER_NIS: usize = 1 << 18;
/// Most undelivered events in one partition's queue (each MD's events wait in its own
/// partition's); beyond it new events are dropped and counted (EQ overflow).
pub const MAX_PENDING_EVENTS: usize = 1 << 16;
/// Most PUTs delayed on one lazy portal; beyond it they are dropped.
pub const LAZY_QUEUE_LIMIT: usize = 4096;

/// Most local NIs besides loopback (`lnet_interfaces_max` default).
pub const MAX_NIS: usize = 4096;

/// The bounds of one node's tables and queues.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub messages: usize,
    pub mds: usize,
    pub mes: usize,
    pub peer_nis: usize,
    pub events: usize,
    pub lazy_queue: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            messages: MAX_MESSAGES,
            mds: MAX_MDS,
            mes: MAX_MES,
            peer_nis: MAX_PEER_NIS,
            events: MAX_PENDING_EVENTS,
            lazy_queue: LAZY_QUEUE_LIMIT,
        }
    }
}

/// How to build an [`Engine`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EngineConfig {
    /// The value put in every wire handle's interface cookie; Lustre uses its start time in ns
    /// so responses meant for a previous incarnation are recognised as stale.
    pub interface_cookie: u64,
    /// This node's pid (`LNET_PID_LUSTRE` = 12345 to talk to kernels).
    pub pid: u32,
    pub tunables: Tunables,
    /// Network NIs; `0@lo` is always present as NI 0 and is not listed here.
    pub nis: Vec<NiConfig>,
    pub limits: Limits,
    /// The node's CPU partitions (libcfs's table; one by default).
    pub partitions: Partitions,
}

impl EngineConfig {
    pub fn new(interface_cookie: u64, pid: u32, nis: Vec<NiConfig>) -> Self {
        Self {
            interface_cookie,
            pid,
            tunables: Tunables::default(),
            nis,
            limits: Limits::default(),
            partitions: Partitions::default(),
        }
    }
}

/// `LNetPut` arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PutRequest {
    /// A bound MD whose whole contents are sent.
    pub md: MdHandle,
    pub ack: bool,
    pub target: ProcessId,
    pub portal: u32,
    pub match_bits: u64,
    pub remote_offset: u32,
    pub hdr_data: u64,
    /// Send from this local NID; `None` lets the core choose (`LNET_NID_ANY`).
    pub source: Option<Nid>,
}

/// `LNetGet` arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GetRequest {
    /// A bound MD that receives the REPLY; its length is the requested length.
    pub md: MdHandle,
    pub target: ProcessId,
    pub portal: u32,
    pub match_bits: u64,
    pub remote_offset: u32,
    pub source: Option<Nid>,
}

/// One LNet node's message engine, with no I/O.
///
/// `Engine` owns, through its parts, the portal table, MEs, MDs (and their memory), peers, credits
/// and every message in flight. It never reads a clock, touches a socket or spawns a thread: a
/// driver feeds it inputs and carries out its outputs.
///
/// # Call protocol
///
/// * Every `handle_*` call and every API call that can make progress (`put`, `get`, `ping`,
///   `discover`, `md_attach`, `md_unlink`, `clear_lazy_portal`, `add_ni`, `remove_ni`, the
///   configuration calls `peer_add`, `peer_del`, `set_*`) takes `now`. `now` must never go
///   backwards; an earlier value is treated as the latest one seen.
/// * After any such call the driver drains the outputs, in any order:
///   * [`poll_transmit`](Self::poll_transmit) until `None`: for each [`Transmit`], write the
///     header and the payload slices from [`tx_payload`](Self::tx_payload), then report
///     [`handle_send_done`](Self::handle_send_done) with a [`HealthStatus`] exactly once.
///   * [`poll_resume`](Self::poll_resume) until `None`: delayed receives that can proceed.
///   * [`poll_event`](Self::poll_event) until `None`: user events.
///   * [`poll_timeout`](Self::poll_timeout): the next instant at which to call
///     [`handle_timeout`](Self::handle_timeout) (recompute after every call).
///   * [`poll_completion`](Self::poll_completion) until `None`: finished pings and
///     discoveries.
/// * Receiving: once a message header is decoded, call [`handle_header`](Self::handle_header)
///   with the NI and the connection's peer NID. The [`RecvAction`] says where the payload goes.
///   For `Deliver`, read the bytes into [`rx_segments_mut`](Self::rx_segments_mut) (or
///   [`rx_write`](Self::rx_write)) and call [`handle_recv_done`](Self::handle_recv_done) exactly
///   once, with `HealthStatus::Ok` or the failure.
/// * Loopback (`0@lo` and our own NIDs) never reaches the driver: it completes inside the call.
/// * Portal 0 belongs to LNet: the node serves its ping buffer there and takes discovery pushes
///   (it is lazy). Before the first PUT or GET to a peer, the message waits while the peer is
///   pinged (discovery, docs/protocol/semantics.md §6); the driver sees only ordinary transmits.
/// * Multi-rail (docs/protocol/semantics.md §3, §4): the core picks the local NI and the peer NI of every
///   message; [`Transmit::ni`] and [`Transmit::next_hop`] say which. Recovery pings of an
///   unhealthy local NI are addressed to that NI's own NID and go through the driver (the kernel's
///   socklnd connects to itself for them): the driver must deliver a transmit whose `next_hop` is
///   one of its own NIDs, received on the NI owning that NID. The driver reports link state with
///   [`set_ni_fatal`](Self::set_ni_fatal) (netlink link down or up, address removed) and may
///   give each NI's NUMA distance with [`set_ni_numa_distance`](Self::set_ni_numa_distance).
///   Recovery pings and fast failover's progress checks run from
///   [`handle_timeout`](Self::handle_timeout) at the instants [`poll_timeout`](Self::poll_timeout)
///   names.
/// * Nothing a peer sends can panic the node or grow it beyond its [`Limits`]; a driver that
///   breaks the protocol gets a [`DriverError`].
///
/// # Example
///
/// A PUT with ACK to ourselves through `0@lo`, which completes inside the call:
///
/// ```
/// use ulnet_proto::addr::Nid;
/// use ulnet_proto::engine::*;
/// use ulnet_proto::time::Time;
///
/// let mut node = Engine::new(EngineConfig::new(1, LNET_PID_LUSTRE, Vec::new())).unwrap();
/// let now = Time::ZERO;
/// let me = node
///     .me_attach(4, ProcessId::ANY, 0x11, 0, UnlinkMode::Unlink, InsertPosition::After)
///     .unwrap();
/// let sink = MdSpec::new(Memory::new(vec![0; 5])).options(MdOptions::OP_PUT);
/// let target = node.md_attach(now, me, sink.threshold(Threshold::Count(1)), UnlinkMode::Unlink).unwrap();
/// let source = MdSpec::new(Memory::new(b"hello".to_vec())).threshold(Threshold::Count(2));
/// let md = node.md_bind(source, UnlinkMode::Unlink).unwrap();
/// let request = PutRequest {
///     md,
///     ack: true,
///     target: ProcessId::new(Nid::LO_0, LNET_PID_LUSTRE),
///     portal: 4,
///     match_bits: 0x11,
///     remote_offset: 0,
///     hdr_data: 0,
///     source: None,
/// };
/// node.put(now, &request).unwrap();
/// let events: Vec<Event> = std::iter::from_fn(|| node.poll_event()).collect();
/// let kinds: Vec<EventKind> = events.iter().map(|event| event.kind).collect();
/// assert_eq!(kinds, [EventKind::Put, EventKind::Send, EventKind::Ack]);
/// assert_eq!(events[0].md, target);
/// assert_eq!(events[0].memory.as_ref().map(Memory::to_vec), Some(b"hello".to_vec()));
/// assert!(node.poll_transmit().is_none());
/// ```
#[derive(Debug)]
pub struct Engine {
    // Identity and configuration, read by every flow.
    pub(super) interface_cookie: u64,
    pub(super) pid: u32,
    pub(super) limits: Limits,
    pub(super) partitions: Partitions,
    /// What every partition's calls read (`node_part.rs`).
    pub(super) node: NodePart,
    /// The state each partition's calls change, by partition.
    /// Each partition's part behind its own lock: a runtime may run calls planned on
    /// different partitions at once (`&self`); a call through `&mut self` takes none.
    pub(super) parts: PerPartition<Mutex<Partition>>,
}

impl Engine {
    /// Builds a node with `0@lo` as NI 0 followed by the configured NIs.
    pub fn new(config: EngineConfig) -> Result<Self, ConfigError> {
        config.tunables.validate()?;
        if config.nis.len() > MAX_NIS {
            return Err(ConfigError::TooManyNis);
        }
        let mut nis = Nis::new();
        for ni in &config.nis {
            if ni.nid == Nid::LO_0 {
                return Err(ConfigError::LoopbackConfigured);
            }
            if ni.lnd == LndKind::Lo {
                return Err(ConfigError::LoopbackLnd(ni.nid));
            }
            if nis.iter().any(|existing| existing.nid == ni.nid) {
                return Err(ConfigError::DuplicateNid(ni.nid));
            }
            let cpts = config
                .partitions
                .bind(ni.cpts)
                .map_err(|error| ConfigError::Cpt { nid: ni.nid, error })?;
            let count = config.partitions.count();
            nis.push(Ni::from_config(&NiConfig { cpts, ..*ni }, config.partitions), count)
                .ok_or(ConfigError::TooManyNis)?;
        }
        let mut limits = config.limits;
        // Each partition's slots must fit the cookie bits its partition bits leave, and one
        // partition may hold them all.
        let key_partitions = KeyPartitions::new(config.partitions.count());
        let most = key_partitions.max_slot(MAX_COOKIE_INDEX) as usize;
        limits.mds = limits.mds.min(most);
        limits.mes = limits.mes.min(most);
        let parts = PerPartition::from_fn(config.partitions.count(), |cpt| {
            Mutex::new(Partition::new(cpt, key_partitions, &nis))
        });
        let mut node = Self {
            // Copies made by fast failover set the top bit (failover.rs).
            interface_cookie: config.interface_cookie & !RESEND_COOKIE_FLAG,
            pid: config.pid,
            limits,
            partitions: config.partitions,
            node: NodePart {
                tunables: config.tunables,
                nis,
                peers: PeerTable::new(config.partitions),
                portals: Portals::new(config.partitions.count()),
                ping_target: PingTarget::default(),
                push_target: PushTarget::default(),
                pings: Pings::default(),
                discoveries: Discoveries::default(),
                recovery: RecoveryQueues::default(),
                failover: Failover::default(),
                // Fault rules draw from their own generator: deterministic per node.
                faults: Faults::new(config.interface_cookie),
                routes: Routes::new(config.interface_cookie.rotate_left(17)),
                policies: UdspRules::default(),
                #[cfg(test)]
                audit: Default::default(),
                violation: std::sync::OnceLock::new(),
            },
            parts,
        };
        let mut flow = node.flow();
        flow.setup_reserved_portal();
        flow.run_work();
        Ok(node)
    }

    pub fn tunables(&self) -> &Tunables {
        &self.node.tunables
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// All NIs, loopback first (removed ones left out).
    pub fn ni_ids(&self) -> impl Iterator<Item = NiId> + '_ {
        self.node.nis.live_ids()
    }

    /// The drop rules, newest first, with their counters.
    pub fn fault_drop_rules(&self) -> impl Iterator<Item = (DropRule, FaultStats)> + '_ {
        self.node.faults.drop_rules()
    }

    /// The delay rules, newest first, with their counters.
    pub fn fault_delay_rules(&self) -> impl Iterator<Item = (DelayRule, FaultStats)> + '_ {
        self.node.faults.delay_rules()
    }

    /// Every peer NI, in creation order (deleted ones left out).
    pub fn peer_nis(&self) -> impl Iterator<Item = PeerNiStats> + '_ {
        let ids = self.node.peers.ids();
        let stats: Vec<PeerNiStats> =
            self.with_look(|look| ids.filter_map(|(id, _)| look.peer_ni_stats_by_id(id)).collect());
        stats.into_iter()
    }

    /// The transmits handed to the driver ([`poll_transmit`](Self::poll_transmit)) and not
    /// completed yet, with their NI, in slab order: what a driver fails when it stops or
    /// retires an NI.
    pub fn transmits_in_lnd(&self) -> impl Iterator<Item = (TxId, NiId)> + '_ {
        let found: Vec<(TxId, NiId)> = self.with_look(|look| {
            let messages = look.msgs.iter();
            messages
                .filter(|(_, m)| m.tx && m.phase == Phase::InLnd)
                .map(|(key, m)| (TxId(key), m.ni))
                .collect()
        });
        found.into_iter()
    }

    /// The MDs of initiator messages (PUT/GET) whose SEND event is still to come.
    pub fn pending_sends(&self) -> impl Iterator<Item = MdHandle> + '_ {
        let found: Vec<MdHandle> = self.with_look(|look| {
            let md_of = |key| look.mds.get(key);
            look.msgs
                .iter()
                .filter(|(_, m)| m.event == Some(EventKind::Send))
                .filter_map(|(_, m)| m.md.and_then(md_of).map(|md| md.handle))
                .collect()
        });
        found.into_iter()
    }

    /// The user's live MDs that have a [`handler`](MdSpec::handler) (not 0), in slab order:
    /// what a runtime unlinks at shutdown so that their UNLINK events hand the memory back.
    pub fn handled_mds(&self) -> impl Iterator<Item = MdHandle> + '_ {
        let found: Vec<MdHandle> = self.with_look(|look| {
            look.mds
                .iter()
                .filter(|(_, md)| md.owner == MdOwner::User && !md.zombie && md.handler != 0)
                .map(|(_, md)| md.handle)
                .collect()
        });
        found.into_iter()
    }

    /// The crossings the audit recorded so far, without ending the current call.
    #[cfg(test)]
    pub(crate) fn partition_crossings(&self) -> Vec<crate::engine::audit::Crossing> {
        self.node.audit.borrow().crossings().to_vec()
    }

    /// The plans the audit found settled otherwise from their call's partition (see
    /// `View::settle_plan`).
    #[cfg(test)]
    pub(crate) fn partition_unsettled(&self) -> Vec<crate::engine::audit::Unsettled> {
        self.node.audit.borrow().unsettled().to_vec()
    }

    pub fn interface_cookie(&self) -> u64 {
        self.interface_cookie
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The latest `now` seen.
    pub fn now(&self) -> Time {
        self.parts.iter().map(|part| lock(part).call.now).max().unwrap_or(Time::ZERO)
    }

    pub fn ni_nid(&self, ni: NiId) -> Option<Nid> {
        self.node.nis.get(ni).map(|ni| ni.nid)
    }

    pub fn ni_for_nid(&self, nid: Nid) -> Option<NiId> {
        self.node.nis.for_nid(nid)
    }

    /// Adds a network NI (`lnetctl net add`): the ping buffer is rebuilt with a new sequence
    /// number and pushed to the multi-rail peers that need it.
    /// lustre: api-ni.c `lnet_dyn_add_ni()`, `lnet_ping_target_update()`.
    pub fn add_ni(&mut self, now: Time, config: NiConfig) -> Result<NiId, ConfigError> {
        self.flow().add_ni(now, config)
    }

    /// Sets the LND timeout of every NI of `lnd` (`lnetctl net set --lnd-timeout`, socklnd's
    /// `sock_timeout`): what a transmission's deadline is built from from the next send on
    /// (`None`: the global `lnd_timeout`, as socklnd's 0 means). Returns how many NIs changed.
    /// lustre: socklnd.h `ksocknal_timeout()`, lib-move.c `lnet_msg_deadline()`.
    pub fn set_lnd_timeout(&mut self, lnd: LndKind, timeout: Option<std::time::Duration>) -> usize {
        self.flow().set_lnd_timeout(lnd, timeout)
    }

    /// The LND timeout `ni` was given (by its configuration or
    /// [`set_lnd_timeout`](Self::set_lnd_timeout)); `None` where it follows the global
    /// `lnd_timeout`.
    /// The node's CPU partitions.
    pub fn partitions(&self) -> Partitions {
        self.partitions
    }

    /// The CPTs `ni` covers, as `net show` prints them (all of them when unbound).
    pub fn ni_cpts(&self, ni: NiId) -> Option<Vec<u32>> {
        self.with_look(|look| look.ni_cpts(ni))
    }

    /// `lnet_cpt_of_nid(nid, ni)`: the partition that serialises traffic between `ni` and the
    /// peer NID `nid`, both ways (a transmit's [`Transmit::cpt`], and the receive CPT of a
    /// message from `nid` on `ni`). An unknown NI hashes over all partitions, as the kernel
    /// does without one. lustre: api-ni.c `lnet_cpt_of_nid_locked()`.
    pub fn cpt_of_nid(&self, nid: &Nid, ni: NiId) -> u32 {
        // The node part alone: every receive on partitions asks, and locks no partition.
        match self.node.nis.get(ni) {
            Some(n) => self.partitions.cpt_of_nid_for(nid, &n.cpts),
            None => self.partitions.cpt_of_nid(nid, None),
        }
    }

    /// `lnet_nid2cpt(nid, NULL)`: `nid`'s partition with no NI given, through the CPT set of
    /// its net when that net is local and bound to some partitions only, else over all of them
    /// (what lnet_selftest places a test's RPCs by). lustre: api-ni.c
    /// `lnet_cpt_of_nid_locked()`.
    pub fn cpt_of_nid_without_ni(&self, nid: &Nid) -> u32 {
        self.node.nis.cpt_of_nid_any(&self.partitions, nid)
    }

    pub fn ni_lnd_timeout(&self, ni: NiId) -> Option<std::time::Duration> {
        self.with_look(|look| look.ni_lnd_timeout(ni))
    }

    /// Removes a network NI (`lnetctl net del`): it is no longer selected, advertised or
    /// received on (its `NiId` is never reused), and the ping buffer is rebuilt. The driver
    /// closes its connections, failing what it still has queued on them.
    /// lustre: api-ni.c `lnet_dyn_del_ni()`.
    pub fn remove_ni(&mut self, now: Time, ni: NiId) -> Result<(), NiRemoveError> {
        self.flow().remove_ni(now, ni)
    }

    // ---------------------------------------------------------------- portals, MEs, MDs

    /// `LNetMEAttach`: a match entry on `portal`, in the match table `position` and the
    /// portal's match type choose ([`InsertPosition`]).
    /// lustre: lnet/lnet/lib-me.c `LNetMEAttach()`, lib-ptl.c `lnet_ptl_match_type()`,
    /// `lnet_mt_of_attach()`.
    pub fn me_attach(
        &mut self,
        portal: u32,
        match_id: ProcessId,
        match_bits: u64,
        ignore_bits: u64,
        unlink: UnlinkMode,
        position: InsertPosition,
    ) -> Result<MeHandle, MeAttachError> {
        self.flow().me_attach(portal, match_id, match_bits, ignore_bits, unlink, position)
    }

    /// Removes an ME that has no MD (an ME with an MD goes away with it).
    pub fn me_unlink(&mut self, me: MeHandle) -> Result<(), MeUnlinkError> {
        self.flow().me_unlink(me)
    }

    /// `LNetMDAttach`: a passive MD on `me`. Delayed PUTs on a lazy portal are matched against
    /// it at once, in arrival order. On failure the ME is unlinked too (as Lustre does) and the
    /// memory comes back in the error.
    /// lustre: lnet/lnet/lib-md.c `LNetMDAttach()`, lib-ptl.c `lnet_ptl_attach_md()`.
    pub fn md_attach(
        &mut self,
        now: Time,
        me: MeHandle,
        spec: MdSpec,
        unlink: UnlinkMode,
    ) -> Result<MdHandle, Rejected<MdAttachError>> {
        self.flow().md_attach(now, me, spec, unlink)
    }

    /// `LNetMDBind`: a free-floating MD to initiate PUTs and GETs with.
    /// lustre: lnet/lnet/lib-md.c `LNetMDBind()`.
    pub fn md_bind(
        &mut self,
        spec: MdSpec,
        unlink: UnlinkMode,
    ) -> Result<MdHandle, Rejected<MdBindError>> {
        self.flow().md_bind(spec, unlink)
    }

    /// `LNetMDUnlink`. An idle MD is freed now and an UNLINK event (carrying its memory) is
    /// queued; a busy one is marked and its last in-flight event carries `unlinked`. Either way
    /// the handle stops resolving immediately.
    /// lustre: lnet/lnet/lib-md.c `LNetMDUnlink()`.
    pub fn md_unlink(&mut self, now: Time, md: MdHandle) -> Result<(), MdError> {
        self.flow().md_unlink(now, md)
    }

    /// The CPU partition a live MD was made on, as its cookie says (the kernel's
    /// `lnet_cpt_of_cookie()`).
    pub fn md_partition(&self, md: MdHandle) -> Result<u32, MdError> {
        self.with_look(|look| look.md_partition(md))
    }

    /// The messages alive in each partition, in partition order: a send lives in its MD's
    /// partition, a receive in the one its previous hop's NID hashes to on its NI.
    pub fn messages_by_partition(&self) -> Vec<usize> {
        self.with_look(|look| look.messages_by_partition())
    }

    /// The MDs alive in each partition, LNet's own included, in partition order.
    pub fn mds_by_partition(&self) -> Vec<usize> {
        self.with_look(|look| look.mds_by_partition())
    }

    /// The memory of a live MD (e.g. to read PUT data after a PUT event).
    pub fn md_memory(&mut self, md: MdHandle) -> Result<&Memory, MdError> {
        self.flow().into_look().md_memory(md)
    }

    /// Mutable access to a live MD's memory (e.g. to refill a send buffer between PUTs).
    pub fn md_memory_mut(&mut self, md: MdHandle) -> Result<&mut Memory, MdError> {
        self.flow().md_memory_mut(md)
    }

    /// The match tables of `portal`, by partition: their MEs and what matched there (one
    /// table with one partition). `None` for a portal out of range.
    pub fn portal_tables(&self, portal: u32) -> Option<Vec<MatchTableStats>> {
        self.with_look(|look| look.portal_tables(portal))
    }

    /// `LNetSetLazyPortal`.
    pub fn set_lazy_portal(&mut self, portal: u32) -> Result<(), PortalError> {
        self.flow().set_lazy_portal(portal)
    }

    /// `LNetClearLazyPortal`: the portal stops delaying and every delayed PUT is dropped.
    /// lustre: lnet/lnet/lib-ptl.c `lnet_clear_lazy_portal()`.
    pub fn clear_lazy_portal(&mut self, now: Time, portal: u32) -> Result<(), PortalError> {
        self.flow().clear_lazy_portal(now, portal)
    }

    // ---------------------------------------------------------------- initiating

    /// `LNetPut`: sends the whole bound MD. Fails only for a bad MD or a full message table;
    /// every other failure is reported in the SEND event.
    /// lustre: lnet/lnet/lib-move.c `LNetPut()`.
    pub fn put(&mut self, now: Time, request: &PutRequest) -> Result<(), InitiateError> {
        self.flow().put(now, request)
    }

    /// `LNetGet`: asks for the bound MD's length; the REPLY lands at offset 0.
    /// lustre: lnet/lnet/lib-move.c `LNetGet()`.
    pub fn get(&mut self, now: Time, request: &GetRequest) -> Result<(), InitiateError> {
        self.flow().get(now, request)
    }

    // ---------------------------------------------------------------- driver: receive

    /// A message header arrived on `ni` from the peer NID `from` (the connection's remote
    /// NID). Returns where its payload goes.
    /// lustre: lnet/lnet/lib-move.c `lnet_parse()`.
    pub fn handle_header(&mut self, now: Time, ni: NiId, from: Nid, header: &Header) -> RecvAction {
        self.flow().handle_header(now, ni, from, header)
    }

    /// Mutable slices of MD memory for a `Deliver` receive, covering exactly its `length`.
    pub fn rx_segments_mut(&mut self, rx: RxId) -> Result<SlicesMut<'_>, DriverError> {
        self.flow().rx_segments_mut(rx)
    }

    /// Writes payload bytes at `offset` within a `Deliver` receive.
    pub fn rx_write(&mut self, rx: RxId, offset: u32, bytes: &[u8]) -> Result<(), DriverError> {
        self.flow().rx_write(rx, offset, bytes)
    }

    /// Lends a `Deliver` receive's destination to the driver, to fill without the core lock:
    /// a router buffer, or the MD's memory when nothing else can touch it until it comes back
    /// (this receive is the MD's only message and the MD can match nothing more). `None` when
    /// the MD may still be used: the driver then fills it through [`Engine::rx_segments_mut`].
    /// What is lent must come back ([`Engine::rx_give_back`]) before the receive completes;
    /// meanwhile the MD's memory reads as [`MdError::MemoryLent`].
    pub fn rx_lend(&mut self, rx: RxId) -> Result<Option<LentPayload>, DriverError> {
        self.flow().rx_lend(rx)
    }

    /// Takes back what [`Engine::rx_lend`] lent for `rx`.
    pub fn rx_give_back(&mut self, rx: RxId, lent: LentPayload) -> Result<(), DriverError> {
        self.flow().rx_give_back(rx, lent)
    }

    /// The payload of a `Deliver` receive is in (or failed: `status` says how).
    pub fn handle_recv_done(
        &mut self,
        now: Time,
        rx: RxId,
        status: HealthStatus,
    ) -> Result<(), DriverError> {
        self.flow().handle_recv_done(now, rx, status)
    }

    /// The next delayed receive that can proceed.
    pub fn poll_resume(&mut self) -> Option<Resume> {
        // Most polls find nothing: they need no view.
        if !self.parts.iter_mut().any(|part| part_mut(part).shares.outputs.has_resumes()) {
            return None;
        }
        self.flow().poll_resume()
    }

    // ---------------------------------------------------------------- driver: send

    /// The next message to send.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        if !self.parts.iter_mut().any(|part| part_mut(part).shares.outputs.has_transmits()) {
            return None;
        }
        self.flow().poll_transmit()
    }

    /// The payload of a transmit, as slices of MD memory (for a vectored write).
    pub fn tx_payload(&mut self, tx: TxId) -> Result<Slices<'_>, DriverError> {
        self.flow().into_look().tx_payload(tx)
    }

    /// A transmit's payload as bytes the driver may hold while it writes them without the
    /// core lock ([`Memory::pin`]): `None` when the payload is not one buffer (memory of
    /// several segments) or is empty.
    pub fn tx_payload_pinned(&mut self, tx: TxId) -> Result<Option<PinnedBytes>, DriverError> {
        self.flow().tx_payload_pinned(tx)
    }

    /// The driver finished (or failed) a transmit; `status` is the LND's health status.
    /// lustre: lnet/lnet/lib-msg.c `lnet_finalize()` called by the LND.
    pub fn handle_send_done(
        &mut self,
        now: Time,
        tx: TxId,
        status: HealthStatus,
    ) -> Result<(), DriverError> {
        self.flow().handle_send_done(now, tx, status)
    }

    /// The LND's connection to `peer` on `ni` came up or went down (`lnet_notify`). The LND
    /// fails its own queued transmits; this only records the peer NI's state.
    pub fn handle_connection(
        &mut self,
        now: Time,
        ni: NiId,
        peer: Nid,
        up: bool,
    ) -> Result<(), DriverError> {
        self.flow().handle_connection(now, ni, peer, up)
    }

    // ---------------------------------------------------------------- events and timers

    pub fn poll_event(&mut self) -> Option<Event> {
        self.outputs().pop_event()
    }

    /// Moves every waiting event, oldest first, to the end of `into`: what repeated
    /// [`poll_event`](Self::poll_event) calls would return, without moving each event (an empty
    /// `into` trades buffers with the node). Returns whether there were any.
    pub fn take_events(&mut self, into: &mut VecDeque<Event>) -> bool {
        self.outputs().take_events(into)
    }

    /// When [`handle_timeout`](Self::handle_timeout) next has work (response tracker expiry,
    /// a ping's timeout, a recovery ping, a fast-failover check).
    pub fn poll_timeout(&self) -> Option<Time> {
        let (mut tracker, mut watch) = (None, None);
        for part in self.parts.iter() {
            let part = lock(part);
            let front = part.shares.trackers.front().map(|(deadline, _)| deadline);
            tracker = tracker.into_iter().chain(front).min();
            watch = watch.into_iter().chain(part.shares.peer_nis.watch_deadline()).min();
        }
        let watch = watch.map(|at| at.max(self.now()));
        let routes = &self.node.routes;
        [
            tracker,
            self.node.pings.deadline(),
            self.node.recovery.deadline(),
            watch,
            self.node.faults.deadline(),
            routes.next_check,
            crate::engine::routing::router_staleness_deadline(
                routes,
                &self.node.tunables,
                &self.node.nis,
            ),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Expires response trackers whose deadline has passed: each MD is unlinked as by
    /// `LNetMDUnlink`, the response-timeout counter goes up, and the peer NI the request went
    /// to takes a remote failure. The deadline is checked exactly (Lustre scans every
    /// transaction_timeout / 2, so it fires within 150-225 s by default; we fire at 150 s).
    /// Then fast failover's progress checks and the due recovery pings run.
    /// lustre: lnet/lnet/lib-move.c `lnet_finalize_expired_responses()`.
    pub fn handle_timeout(&mut self, now: Time) {
        self.flow().handle_timeout(now)
    }

    // ---------------------------------------------------------------- fault injection

    /// Adds a drop rule (`lnetctl fault drop add`), checked as the kernel checks it; it
    /// goes first in the list.
    /// lustre: lnet/lnet/net_fault.c `lnet_drop_rule_add()`.
    pub fn fault_drop_add(&mut self, now: Time, rule: DropRule) -> Result<(), FaultRuleError> {
        self.flow().fault_drop_add(now, rule)
    }

    /// Deletes the drop rules with this source and destination ([`Nid::ANY`]: any); returns
    /// how many went. lustre: net_fault.c `lnet_drop_rule_del()`.
    pub fn fault_drop_del(&mut self, source: Nid, destination: Nid) -> usize {
        self.flow().fault_drop_del(source, destination)
    }

    /// Zeroes the drop rules' counters and restarts their windows.
    /// lustre: net_fault.c `lnet_drop_rule_reset()`.
    pub fn fault_drop_reset(&mut self, now: Time) {
        self.flow().fault_drop_reset(now)
    }

    /// Adds a delay rule (`lnetctl fault delay add`).
    /// lustre: net_fault.c `lnet_delay_rule_add()`.
    pub fn fault_delay_add(&mut self, now: Time, rule: DelayRule) -> Result<(), FaultRuleError> {
        self.flow().fault_delay_add(now, rule)
    }

    /// Deletes delay rules as [`fault_drop_del`](Self::fault_drop_del) does; what they held
    /// goes on at once (receives resume, transmits leave). Returns how many rules went.
    /// lustre: net_fault.c `lnet_delay_rule_del()`, `delayed_msg_process()`.
    pub fn fault_delay_del(&mut self, now: Time, source: Nid, destination: Nid) -> usize {
        self.flow().fault_delay_del(now, source, destination)
    }

    /// lustre: net_fault.c `lnet_delay_rule_reset()`.
    pub fn fault_delay_reset(&mut self, now: Time) {
        self.flow().fault_delay_reset(now)
    }

    /// Messages delay rules hold now.
    pub fn fault_held_count(&self) -> usize {
        self.with_look(|look| look.fault_held_count())
    }

    // ---------------------------------------------------------------- statistics

    /// The node's counters (`stats show`): every partition's summed.
    pub fn stats(&self) -> GlobalStats {
        self.with_look(|look| look.stats())
    }

    /// NIDs discovery refused to attach so far (`GlobalStats::discovery_nids_refused`),
    /// cheaper than [`stats`](Self::stats) for a driver that checks it after every call.
    pub fn discovery_nids_refused(&self) -> u64 {
        // A driver asks after every drain: each partition's one counter, without a view.
        let counts =
            self.parts.iter().map(|part| lock(part).shares.counters.discovery_nids_refused);
        counts.sum()
    }

    /// Each partition's counters, in partition order: a message counts in the partition of
    /// the call that handles it (a receive in its previous hop's, a send's completion in its
    /// MD's), messages and trackers alive in their own.
    pub fn stats_by_partition(&self) -> Vec<GlobalStats> {
        self.with_look(|look| look.stats_by_partition())
    }

    pub fn ni_stats(&self, ni: NiId) -> Option<NiStats> {
        self.with_look(|look| look.ni_stats(ni))
    }

    pub fn peer_ni_stats(&self, nid: Nid) -> Option<PeerNiStats> {
        self.with_look(|look| look.peer_ni_stats(nid))
    }

    /// Messages alive now (sends, receives, delayed PUTs).
    pub fn message_count(&self) -> usize {
        self.with_look(|look| look.message_count())
    }

    /// Messages parked on lazy portals (and loopback sends held for them).
    pub fn delayed_message_count(&self) -> usize {
        self.with_look(|look| look.delayed_message_count())
    }

    /// The user's MDs (LNet's own are not counted).
    pub fn md_count(&self) -> usize {
        self.with_look(|look| look.md_count())
    }

    /// The user's MEs (LNet's own are not counted).
    pub fn me_count(&self) -> usize {
        self.with_look(|look| look.me_count())
    }

    /// Checks the node's internal invariants: credits conserved, MD reference counts equal to
    /// the messages attached, queues within bounds, messages in coherent states, and no
    /// internal inconsistency seen. Linear in the node's size; meant for tests and fuzzing.
    pub fn check_invariants(&self) -> Result<(), String> {
        if let Some(violation) = self.node.violation.get() {
            return Err(violation.clone());
        }
        self.with_look(|look| {
            // The checker reads everything: what it reaches is not the call's (the audit).
            #[cfg(test)]
            let (saved_peers, saved_parts) = {
                let cells = look.mds.iter_shares().map(|(_, share)| share.slab().touched());
                let cells = cells.chain(look.mes.iter_shares().map(|(_, s)| s.slab().touched()));
                let cells = cells.chain(look.msgs.iter_shares().map(|(_, s)| s.slab().touched()));
                let cells =
                    cells.chain(look.peer_nis.iter_shares().map(|(_, s)| s.slab().touched()));
                let saved: Vec<_> = cells.map(|cell| (cell, cell.get())).collect();
                (self.node.peers.touched().get(), saved)
            };
            let checked = crate::engine::invariants::check(look);
            #[cfg(test)]
            {
                self.node.peers.touched().set(saved_peers);
                saved_parts.into_iter().for_each(|(cell, touched)| cell.set(touched));
            }
            checked
        })
    }

    /// What the partition audit found since it was last read: the message-path calls that
    /// reached a partition their plan did not name, and how wide the plans were.
    #[cfg(test)]
    pub(crate) fn partition_audit(&mut self) -> crate::engine::audit::AuditReport {
        self.flow().partition_audit()
    }
}

impl<A: Access, N: NodeAccess> View<'_, A, N> {
    /// Whether partition `cpt` has room for another message (`Limits::messages` bounds each
    /// partition, as the kernel counts `msgs_alloc` per CPT).
    pub(super) fn message_room(&self, cpt: u32) -> bool {
        self.msgs.share(cpt).is_some_and(|msgs| msgs.len() < self.limits.messages)
    }

    /// Whether partition `cpt` has room for another of the user's MDs.
    fn md_room(&self, cpt: u32) -> bool {
        self.mds.share(cpt).is_some_and(|mds| mds.user_count() < self.limits.mds)
    }

    pub(crate) fn ni_nid(&self, ni: NiId) -> Option<Nid> {
        self.node.nis.get(ni).map(|ni| ni.nid)
    }

    pub(crate) fn ni_for_nid(&self, nid: Nid) -> Option<NiId> {
        self.node.nis.for_nid(nid)
    }

    /// See [`Engine::ni_cpts`].
    pub(crate) fn ni_cpts(&self, ni: NiId) -> Option<Vec<u32>> {
        self.node.nis.get(ni).map(|n| self.partitions.covered(&n.cpts))
    }

    /// See [`Engine::cpt_of_nid`].
    pub(crate) fn cpt_of_nid(&self, nid: &Nid, ni: NiId) -> u32 {
        match self.node.nis.get(ni) {
            Some(n) => self.partitions.cpt_of_nid_for(nid, &n.cpts),
            None => self.partitions.cpt_of_nid(nid, None),
        }
    }

    pub(crate) fn ni_lnd_timeout(&self, ni: NiId) -> Option<std::time::Duration> {
        self.node.nis.get(ni).filter(|ni| !ni.removed)?.lnd_timeout
    }

    /// See [`Engine::md_partition`].
    pub(crate) fn md_partition(&self, md: MdHandle) -> Result<u32, MdError> {
        let key = self.live_md(md)?;
        self.mds.partition_of(key).ok_or(MdError::UnknownMd)
    }

    /// See [`Engine::messages_by_partition`].
    pub(crate) fn messages_by_partition(&self) -> Vec<usize> {
        self.msgs.count_by_partition()
    }

    /// See [`Engine::mds_by_partition`].
    pub(crate) fn mds_by_partition(&self) -> Vec<usize> {
        self.mds.count_by_partition()
    }

    /// See [`Engine::portal_tables`].
    pub(crate) fn portal_tables(&self, portal: u32) -> Option<Vec<MatchTableStats>> {
        self.node.portals.get(portal as usize).map(|portal| portal.table_stats(&self.match_tables))
    }

    /// See [`Engine::fault_held_count`].
    pub(crate) fn fault_held_count(&self) -> usize {
        self.node.faults.held_count()
    }

    /// See [`Engine::stats`].
    pub(crate) fn stats(&self) -> GlobalStats {
        self.stats.sum()
    }

    /// See [`Engine::stats_by_partition`].
    pub(crate) fn stats_by_partition(&self) -> Vec<GlobalStats> {
        self.stats.iter_shares().map(|(_, counters)| *counters).collect()
    }

    pub(crate) fn ni_stats(&self, id: NiId) -> Option<NiStats> {
        let ni = self.node.nis.get(id).filter(|ni| !ni.removed)?;
        Some(NiStats {
            nid: ni.nid,
            lnd: ni.lnd,
            up: ni.lnd == LndKind::Lo || ni.ping_status() == crate::wire::ping::LNET_NI_STATUS_UP,
            statistics: self.ni_shares.stats(id),
            health: crate::engine::stats::NiHealthStats {
                fatal_error: ni.fatal_error,
                health_value: ni.health.value(),
                ping_count: u64::from(ni.recovery.ping_count),
                next_ping: if ni.recovery.queued {
                    ni.recovery.next_ping.as_nanos() / 1_000_000_000
                } else {
                    0
                },
                ..ni.health_stats
            },
            tunables: ni.tunables,
            tx_credits: ni
                .credits
                .as_ref()
                .map(|queues| queues.totals(self.ni_shares.pools(id).map(|(_, pool)| pool))),
            tx_queues: crate::engine::tx_queues::per_cpt(self.ni_shares.pools(id)),
            priority: ni.priority,
            numa_distance: ni.numa_distance.seen_from(0),
            dev_cpt: ni.dev_cpt,
            latency: self.ni_shares.latency(id),
        })
    }

    pub(crate) fn peer_ni_stats(&self, nid: Nid) -> Option<PeerNiStats> {
        let id = self.node.peers.find(nid)?;
        self.peer_ni_stats_by_id(id)
    }

    /// See [`Engine::message_count`].
    pub(crate) fn message_count(&self) -> usize {
        self.msgs.len()
    }

    /// See [`Engine::delayed_message_count`].
    pub(crate) fn delayed_message_count(&self) -> usize {
        self.msgs
            .iter()
            .filter(|(_, m)| matches!(m.phase, Phase::Delayed | Phase::LoHeld | Phase::FaultHeld))
            .count()
    }

    /// See [`Engine::md_count`].
    pub(crate) fn md_count(&self) -> usize {
        self.mds.user_count()
    }

    /// See [`Engine::me_count`].
    pub(crate) fn me_count(&self) -> usize {
        self.mes.user_count()
    }

    /// Resolves a user's ME handle; LNet's own MEs are invisible.
    fn me_key(&self, me: MeHandle) -> Result<Key, KeyState> {
        let key = me.key().ok_or(KeyState::Unknown)?;
        match self.mes.state(key) {
            KeyState::Live if self.mes.get(key).is_some_and(|me| me.internal) => {
                Err(KeyState::Unknown)
            }
            KeyState::Live => Ok(key),
            state => Err(state),
        }
    }

    /// Resolves a handle the user holds: unlinked (zombie) MDs no longer resolve.
    pub(super) fn live_md(&self, md: MdHandle) -> Result<Key, MdError> {
        let key = md.key().ok_or(MdError::UnknownMd)?;
        match self.mds.state(key) {
            KeyState::Live if self.mds.get(key).is_some_and(|md| md.owner != MdOwner::User) => {
                Err(MdError::UnknownMd)
            }
            KeyState::Live if self.mds.get(key).is_some_and(|md| md.zombie) => {
                Err(MdError::UnlinkedMd)
            }
            KeyState::Live => Ok(key),
            KeyState::Removed => Err(MdError::UnlinkedMd),
            KeyState::Unknown => Err(MdError::UnknownMd),
        }
    }

    /// Fails a call that needs a receive's destination while the driver holds it.
    fn not_lent(&self, rx: RxId) -> Result<(), DriverError> {
        match self.msgs.get(rx.0) {
            Some(message) if message.payload_lent => Err(DriverError::PayloadLent),
            _ => Ok(()),
        }
    }

    fn receiving(&self, rx: RxId) -> Result<(Key, u32, u32), DriverError> {
        let message = self.msgs.get(rx.0).ok_or(DriverError::UnknownRx)?;
        if message.tx || message.phase != Phase::Receiving {
            return Err(DriverError::WrongState);
        }
        let md = message.md.ok_or(DriverError::WrongState)?;
        Ok((md, message.md_offset, message.length))
    }

    fn peer_ni_stats_by_id(&self, id: crate::engine::peer::PeerNiId) -> Option<PeerNiStats> {
        let peer_ni = self.node.peers.ni(&self.peer_nis, id).filter(|ni| !ni.deleted)?;
        let peer = self.node.peers.peer_of(id)?;
        let pool = &peer_ni.credits;
        Some(PeerNiStats {
            nid: peer_ni.nid,
            primary_nid: peer.primary_nid,
            multi_rail: peer.multi_rail(),
            tx_credits: CreditStats { max: pool.max(), available: pool.value(), min: pool.min() },
            tx_q_num_of_buf: peer_ni.queued_bytes,
            rtr_credits: match &peer_ni.router_credits {
                Some(router) => {
                    CreditStats { max: router.max(), available: router.value(), min: router.min() }
                }
                None => CreditStats { max: pool.max(), available: pool.max(), min: pool.max() },
            },
            statistics: peer_ni.stats,
            health: crate::engine::stats::PeerNiHealthStats {
                health_value: peer_ni.health.value(),
                ping_count: u64::from(peer_ni.recovery.ping_count),
                next_ping: if peer_ni.recovery.queued {
                    peer_ni.recovery.next_ping.as_nanos() / 1_000_000_000
                } else {
                    0
                },
                ..peer_ni.health_stats
            },
            status: peer_ni.status,
            priority: peer_ni.priority,
            preferred: peer_ni.preferred.first(),
            latency: peer_ni.latency.snapshot(),
            srtt: std::time::Duration::from_nanos(peer_ni.watch.srtt_ns),
        })
    }
}

impl<N: NodeAccess> View<'_, Exclusive, N> {
    /// Hands message `key` to the driver. A call must hold the message's partition (its
    /// plan names it); one that does not is a bug, recorded rather than lost silently.
    pub(super) fn queue_transmit(&mut self, key: Key) {
        if !self.outputs.push_transmit(key) {
            self.record_violation(|| format!("transmit {key:?} queued outside the call's plan"));
        }
    }

    /// Tells the driver what to do with delayed receive `resume.rx` (as [`Self::queue_transmit`]).
    pub(super) fn queue_resume(&mut self, resume: Resume) {
        if !self.outputs.push_resume(resume) {
            self.record_violation(|| format!("resume {resume:?} queued outside the call's plan"));
        }
    }

    /// NI `ni`'s tx credit queue of partition `cpt` (`ni_tx_queues[cpt]`), charging the
    /// NI-wide count too; `None` for loopback, which takes no credits.
    pub(super) fn credit_pool_mut(&mut self, ni: NiId, cpt: u32) -> Option<PoolMut<'_>> {
        let queues = self.node.nis.get(ni)?.credits.as_ref()?;
        let pool = self.ni_shares.pool_mut(ni, cpt)?;
        Some(queues.charge(pool))
    }

    /// See [`Engine::put`].
    pub(crate) fn put(&mut self, now: Time, request: &PutRequest) -> Result<(), InitiateError> {
        self.advance(now);
        let md_key = self.initiator_md(request.md, request.source)?;
        self.enter_partition(self.mds.partition_of(md_key));
        #[cfg(test)]
        self.audit_plan(|look| look.plan_initiate(request.md, request.target));
        let (length, track) = self.md_send_profile(md_key, request.ack, false);
        let ack_wmd = if request.ack {
            WireHandle { interface_cookie: self.interface_cookie, object_cookie: request.md.0 }
        } else {
            WireHandle::NONE
        };
        let header = Header {
            dest_nid: request.target.nid,
            src_nid: Nid::ANY,
            dest_pid: request.target.pid,
            src_pid: self.pid,
            payload_length: length,
            body: Body::Put {
                ack_wmd,
                match_bits: request.match_bits,
                hdr_data: request.hdr_data,
                ptl_index: request.portal,
                offset: request.remote_offset,
            },
        };
        let template = EventTemplate {
            initiator: ProcessId::new(Nid::ANY, self.pid),
            target: request.target,
            portal: request.portal,
            match_bits: request.match_bits,
            rlength: length,
            mlength: length,
            offset: 0,
            hdr_data: request.hdr_data,
            ..EventTemplate::EMPTY
        };
        let result = self.initiate(md_key, header, template, length, track, request.source, false);
        self.run_work();
        result
    }

    /// See [`Engine::get`].
    pub(crate) fn get(&mut self, now: Time, request: &GetRequest) -> Result<(), InitiateError> {
        self.advance(now);
        let md_key = self.initiator_md(request.md, request.source)?;
        self.enter_partition(self.mds.partition_of(md_key));
        #[cfg(test)]
        self.audit_plan(|look| look.plan_initiate(request.md, request.target));
        let (length, track) = self.md_send_profile(md_key, false, true);
        let header = Header {
            dest_nid: request.target.nid,
            src_nid: Nid::ANY,
            dest_pid: request.target.pid,
            src_pid: self.pid,
            payload_length: 0,
            body: Body::Get {
                return_wmd: WireHandle {
                    interface_cookie: self.interface_cookie,
                    object_cookie: request.md.0,
                },
                match_bits: request.match_bits,
                ptl_index: request.portal,
                src_offset: request.remote_offset,
                sink_length: length,
            },
        };
        let template = EventTemplate {
            initiator: ProcessId::new(Nid::ANY, self.pid),
            target: request.target,
            portal: request.portal,
            match_bits: request.match_bits,
            rlength: length,
            mlength: 0,
            offset: request.remote_offset,
            ..EventTemplate::EMPTY
        };
        let result = self.initiate(md_key, header, template, 0, track, request.source, false);
        self.run_work();
        result
    }

    /// The peer NI of `nid`, made (with its peer) when new: a node-wide change, which the
    /// plans give the node.
    pub(super) fn peer_ni_or_create(
        &mut self,
        nid: Nid,
        credits: u32,
    ) -> Result<PeerNiId, PeerTableFull> {
        if let Some(id) = self.node.peers.find(nid) {
            return Ok(id);
        }
        let made = self.on_node("a new peer", |flow| flow.create_peer_ni(nid, credits));
        made.unwrap_or(Err(PeerTableFull))
    }

    /// See [`Engine::md_bind`].
    pub(crate) fn md_bind(
        &mut self,
        spec: MdSpec,
        unlink: UnlinkMode,
    ) -> Result<MdHandle, Rejected<MdBindError>> {
        #[cfg(test)]
        self.audit_node_call();
        let error = if spec.options.intersects(MdOptions::OP_PUT | MdOptions::OP_GET) {
            Some(MdBindError::OperationFlags)
        } else if spec.memory.len() > LNET_MTU as usize {
            Some(MdBindError::TooLong(spec.memory.len()))
        } else if spec.options.contains(MdOptions::MAX_SIZE)
            && spec.max_size as usize > spec.memory.len()
        {
            Some(MdBindError::MaxSizeOutOfRange {
                max_size: spec.max_size,
                length: spec.memory.len(),
            })
        } else if conflicting_tracking(spec.options) {
            Some(MdBindError::ConflictingTracking)
        } else if let Some(cpt) = spec.cpt.filter(|cpt| *cpt >= self.partitions.count()) {
            Some(MdBindError::BadCpt { cpt, count: self.partitions.count() })
        } else if !self.md_room(spec.cpt.unwrap_or(0)) {
            Some(MdBindError::TooManyMds)
        } else {
            None
        };
        if let Some(error) = error {
            return Err(Rejected { error, memory: spec.memory });
        }
        match self.insert_md(spec, unlink, None, MdOwner::User) {
            Some(key) => Ok(MdHandle::from_key(key)),
            None => Err(Rejected { error: MdBindError::TooManyMds, memory: Memory::empty() }),
        }
    }

    /// See [`Engine::me_attach`].
    pub(crate) fn me_attach(
        &mut self,
        portal: u32,
        match_id: ProcessId,
        match_bits: u64,
        ignore_bits: u64,
        unlink: UnlinkMode,
        position: InsertPosition,
    ) -> Result<MeHandle, MeAttachError> {
        #[cfg(test)]
        self.audit_node_call();
        let Some(table) = self.node.portals.get(portal as usize) else {
            return Err(MeAttachError::BadPortal(portal));
        };
        let untyped = table.match_type.is_none();
        let home = table.table_of_attach(&me_of(portal, match_id), position, |nid| {
            self.node.nis.cpt_of_nid_any(&self.partitions, nid)
        });
        self.enter_partition(Some(home));
        #[cfg(test)]
        self.audit_plan(|look| look.plan_me_attach(portal, match_id, position));
        if let InsertPosition::Local { cpt } = position {
            let count = self.partitions.count();
            if cpt >= count {
                return Err(MeAttachError::BadCpt { cpt, count });
            }
        }
        let mut me = Me {
            portal,
            match_id,
            match_bits,
            ignore_bits,
            unlink,
            md: None,
            internal: false,
            cpt: 0,
        };
        if untyped {
            // The portal's first ME fixes its match type: the node's.
            self.on_node("a portal's match type", |flow| {
                if let Some(table) = flow.node.portals.get_mut(portal as usize) {
                    table.accepts(&me);
                }
            });
        }
        let Some(table) = self.node.portals.get(portal as usize) else {
            return Err(MeAttachError::BadPortal(portal));
        };
        if !table.matches_type(&me) {
            return Err(MeAttachError::MatchTypeMismatch(portal));
        }
        me.cpt = table.table_of_attach(&me, position, |nid| {
            self.node.nis.cpt_of_nid_any(&self.partitions, nid)
        });
        if self.mes.share(me.cpt).is_none_or(|mes| mes.user_count() >= self.limits.mes) {
            return Err(MeAttachError::TooManyEntries);
        }
        let key = self.mes.insert(me.clone()).ok_or(MeAttachError::TooManyEntries)?;
        table.insert(&mut self.match_tables, key, &me, position);
        Ok(MeHandle::from_key(key))
    }

    /// See [`Engine::me_unlink`].
    pub(crate) fn me_unlink(&mut self, me: MeHandle) -> Result<(), MeUnlinkError> {
        #[cfg(test)]
        self.audit_node_call();
        let key = self.me_key(me).map_err(|state| match state {
            KeyState::Removed => MeUnlinkError::UnlinkedMe,
            _ => MeUnlinkError::UnknownMe,
        })?;
        self.enter_partition(self.mes.partition_of(key));
        #[cfg(test)]
        self.audit_plan(|look| look.plan_me(key));
        if self.mes.get(key).is_some_and(|me| me.md.is_some()) {
            return Err(MeUnlinkError::MdAttached);
        }
        self.remove_me(key);
        Ok(())
    }

    /// See [`Engine::md_attach`].
    pub(crate) fn md_attach(
        &mut self,
        now: Time,
        me: MeHandle,
        spec: MdSpec,
        unlink: UnlinkMode,
    ) -> Result<MdHandle, Rejected<MdAttachError>> {
        self.advance(now);
        if let Some(key) = me.key() {
            self.enter_partition(self.mes.partition_of(key));
            #[cfg(test)]
            self.audit_plan(|look| look.plan_me(key));
        }
        let me_key = match self.me_key(me) {
            Ok(key) => key,
            Err(KeyState::Removed) => {
                return Err(Rejected { error: MdAttachError::UnlinkedMe, memory: spec.memory });
            }
            Err(_) => {
                return Err(Rejected { error: MdAttachError::UnknownMe, memory: spec.memory });
            }
        };
        if self.mes.get(me_key).is_some_and(|me| me.md.is_some()) {
            return Err(Rejected { error: MdAttachError::MeBusy, memory: spec.memory });
        }
        let error = if !spec.options.intersects(MdOptions::OP_PUT | MdOptions::OP_GET) {
            Some(MdAttachError::NoOperation)
        } else if spec.memory.len() > MAX_MD_LENGTH {
            Some(MdAttachError::TooLong(spec.memory.len()))
        } else if spec.options.contains(MdOptions::MAX_SIZE)
            && spec.max_size as usize > spec.memory.len()
        {
            Some(MdAttachError::MaxSizeOutOfRange {
                max_size: spec.max_size,
                length: spec.memory.len(),
            })
        } else if conflicting_tracking(spec.options) {
            Some(MdAttachError::ConflictingTracking)
        } else if !self.md_room(self.mes.partition_of(me_key).unwrap_or(0)) {
            Some(MdAttachError::TooManyMds)
        } else {
            None
        };
        if let Some(error) = error {
            self.remove_me(me_key);
            return Err(Rejected { error, memory: spec.memory });
        }
        let Some(md_key) = self.insert_md(spec, unlink, Some(me_key), MdOwner::User) else {
            // insert_md only fails when the slab is full, which the limit check excludes;
            // the memory is lost in that impossible case.
            self.remove_me(me_key);
            return Err(Rejected { error: MdAttachError::TooManyMds, memory: Memory::empty() });
        };
        if let Some(me) = self.mes.get_mut(me_key) {
            me.md = Some(md_key);
        }
        let portal = self.mes.get(me_key).and_then(|me| self.node.portals.get(me.portal as usize));
        if portal.is_some_and(|portal| !portal.delayed().is_empty()) {
            self.on_node("a lazy portal's delayed list", |flow| flow.match_delayed(me_key, md_key));
        }
        self.run_work();
        Ok(MdHandle::from_key(md_key))
    }

    /// See [`Engine::md_unlink`].
    pub(crate) fn md_unlink(&mut self, now: Time, md: MdHandle) -> Result<(), MdError> {
        self.advance(now);
        let key = self.live_md(md)?;
        self.enter_partition(self.mds.partition_of(key));
        #[cfg(test)]
        self.audit_plan(|look| look.plan_unlink(md));
        self.abort_md(key);
        self.run_work();
        Ok(())
    }

    /// See [`Engine::handle_header`].
    pub(crate) fn handle_header(
        &mut self,
        now: Time,
        ni: NiId,
        from: Nid,
        header: &Header,
    ) -> RecvAction {
        self.advance(now);
        if self.partitions.count() > 1 {
            self.enter_partition(Some(self.cpt_of_nid(&from, ni)));
            #[cfg(test)]
            self.audit_plan(|look| look.plan_header(ni, from, header));
        }
        let action = self.parse(ni, from, header, None);
        self.run_work();
        action
    }

    /// See [`Engine::rx_write`].
    pub(crate) fn rx_write(
        &mut self,
        rx: RxId,
        offset: u32,
        bytes: &[u8],
    ) -> Result<(), DriverError> {
        self.not_lent(rx)?;
        if let Some(message) = self.msgs.get_mut(rx.0).filter(|m| m.router_buffer.is_some()) {
            if message.tx || message.phase != Phase::Receiving {
                return Err(DriverError::WrongState);
            }
            if u64::from(offset) + bytes.len() as u64 > u64::from(message.length) {
                return Err(DriverError::OutOfRange);
            }
            let buffer = message.router_buffer.as_mut().ok_or(DriverError::WrongState)?;
            return match buffer.write_at(offset as usize, bytes) {
                true => Ok(()),
                false => Err(DriverError::OutOfRange),
            };
        }
        let (md_key, start, length) = self.receiving(rx)?;
        if u64::from(offset) + bytes.len() as u64 > u64::from(length) {
            return Err(DriverError::OutOfRange);
        }
        let md = self.mds.get_mut(md_key).ok_or(DriverError::UnknownRx)?;
        if md.memory.write_at(start as usize + offset as usize, bytes) {
            Ok(())
        } else {
            Err(DriverError::OutOfRange)
        }
    }

    /// See [`Engine::rx_lend`].
    pub(crate) fn rx_lend(&mut self, rx: RxId) -> Result<Option<LentPayload>, DriverError> {
        let message = self.msgs.get_mut(rx.0).ok_or(DriverError::UnknownRx)?;
        if message.tx || message.phase != Phase::Receiving || message.lo_peer.is_some() {
            return Err(DriverError::WrongState);
        }
        if message.payload_lent {
            return Err(DriverError::PayloadLent);
        }
        let length = message.length as usize;
        if let Some(buffer) = &mut message.router_buffer {
            message.payload_lent = true;
            return Ok(Some(LentPayload { memory: std::mem::take(buffer), start: 0, length }));
        }
        let key = message.md.ok_or(DriverError::WrongState)?;
        let start = message.md_offset as usize;
        let md = self.mds.get_mut(key).ok_or(DriverError::UnknownRx)?;
        if md.refcount != 1 || !(md.exhausted() || md.zombie) || md.lent {
            return Ok(None);
        }
        md.lent = true;
        message.payload_lent = true;
        Ok(Some(LentPayload { memory: std::mem::take(&mut md.memory), start, length }))
    }

    /// See [`Engine::rx_give_back`].
    pub(crate) fn rx_give_back(&mut self, rx: RxId, lent: LentPayload) -> Result<(), DriverError> {
        let message = self.msgs.get_mut(rx.0).ok_or(DriverError::UnknownRx)?;
        if message.tx || !message.payload_lent {
            return Err(DriverError::WrongState);
        }
        message.payload_lent = false;
        if let Some(buffer) = &mut message.router_buffer {
            *buffer = lent.memory;
            return Ok(());
        }
        let key = message.md.ok_or(DriverError::WrongState)?;
        let md = self.mds.get_mut(key).ok_or(DriverError::UnknownRx)?;
        md.memory = lent.memory;
        md.lent = false;
        Ok(())
    }

    /// See [`Engine::handle_recv_done`].
    pub(crate) fn handle_recv_done(
        &mut self,
        now: Time,
        rx: RxId,
        status: HealthStatus,
    ) -> Result<(), DriverError> {
        self.advance(now);
        self.not_lent(rx)?;
        self.enter_partition(self.msgs.partition_of(rx.0));
        #[cfg(test)]
        self.audit_plan(|look| look.plan_recv_done(rx, status));
        let message = self.msgs.get(rx.0).ok_or(DriverError::UnknownRx)?;
        if message.tx || message.phase != Phase::Receiving || message.lo_peer.is_some() {
            return Err(DriverError::WrongState);
        }
        let event_status = if status.is_ok() { EventStatus::Ok } else { EventStatus::Io };
        self.finalize_rx(rx.0, status, event_status);
        self.run_work();
        Ok(())
    }

    /// See [`Engine::poll_resume`].
    pub(crate) fn poll_resume(&mut self) -> Option<Resume> {
        let resume = self.outputs.pop_resume();
        // As a transmit: the receive's partition takes it (the audit).
        #[cfg(test)]
        if let Some(resume) = resume {
            self.audit_drain(resume.rx.0);
        }
        resume
    }

    /// See [`Engine::poll_transmit`].
    pub(crate) fn poll_transmit(&mut self) -> Option<Transmit> {
        while let Some(key) = self.outputs.pop_transmit() {
            if let Some(transmit) = self.take_transmit(key) {
                return Some(transmit);
            }
        }
        None
    }

    /// Partition `cpt`'s next transmit, taken from its queue: `None` when the queue is
    /// empty, `Some(None)` when the message it named was no longer to be sent.
    pub(crate) fn poll_transmit_of(&mut self, cpt: u32) -> Option<Option<Transmit>> {
        let key = self.outputs.pop_transmit_of(cpt)?;
        Some(self.take_transmit(key))
    }

    /// Partition `cpt`'s next resume.
    pub(crate) fn poll_resume_of(&mut self, cpt: u32) -> Option<Resume> {
        let resume = self.outputs.pop_resume_of(cpt);
        #[cfg(test)]
        if let Some(resume) = resume {
            self.audit_drain(resume.rx.0);
        }
        resume
    }

    /// The transmit of message `key`, taken out of the outputs: `None` when it is no longer
    /// to be sent (failed meanwhile, or held by a delay rule, or failed by a drop rule).
    fn take_transmit(&mut self, key: Key) -> Option<Transmit> {
        // A partition drains its own outputs: taking a transmit is audited as a call on
        // the message's partition, whichever call queued it.
        #[cfg(test)]
        self.audit_drain(key);
        let message = self.msgs.get_mut(key)?;
        if message.phase != Phase::TxReady {
            return None;
        }
        // lustre: lib-move.c lnet_post_send_locked() asks the delay rules once credits
        // are taken; a released message goes straight on (net_fault.c
        // delayed_msg_process()).
        let released = std::mem::take(&mut message.fault_released);
        if !released && self.node.faults.has_delay_rules() {
            let header = message.header;
            let now = self.call.now;
            let delayed = self
                .on_node("a delay rule", |flow| flow.node.faults.delay(&header, key, true, now));
            if delayed == Some(true) {
                return None;
            }
        }
        let message = self.msgs.get_mut(key)?;
        message.phase = Phase::InLnd;
        message.lnd_at = Some(self.call.now);
        let next_hop = message
            .peer_ni
            .and_then(|id| self.node.peers.ni(&self.peer_nis, id))
            .map_or(message.header.dest_nid, |p| p.nid);
        let (ni, header) = (message.ni, message.header);
        let transmit =
            Transmit { tx: TxId(key), ni, next_hop, cpt: self.cpt_of_nid(&next_hop, ni), header };
        let message = self.msgs.get(key)?;
        let (peer_ni, ni) = (message.peer_ni, message.ni);
        if self.failover_enabled() {
            self.note_departure(key, ni, peer_ni);
        }
        // lustre: socklnd_cb.c ksocknal_process_transmit() asks lib-msg.c
        // lnet_send_error_simulation() first: a health rule fails the transmit as the LND
        // would, and the failure takes the path a real one of that kind takes.
        if self.node.faults.has_drop_rules() {
            let now = self.call.now;
            let failed = self.on_node("a drop rule", |flow| {
                flow.node.faults.fail_on_send(&transmit.header, now)
            });
            if let Some(status) = failed.flatten() {
                let _ = self.handle_send_done(self.call.now, transmit.tx, status);
                return None;
            }
        }
        Some(transmit)
    }

    /// Fast failover's bookkeeping when the driver takes a transmit: the LND progress clock of
    /// its peer NI, and when and through which NI a tracked request left (the first departure
    /// opens the copy window; the last NI is the one a lost link strands it on).
    fn note_departure(&mut self, key: Key, ni: NiId, peer_ni: Option<PeerNiId>) {
        let now = self.call.now;
        if let Some(md) = self.tracked_md_of(key) {
            if let Some(tracker) = self.mds.get_mut(md).and_then(|md| md.tracker.as_mut()) {
                tracker.sent_at.get_or_insert(now);
                tracker.sent_ni = Some(ni);
            }
        }
        if let Some(peer_ni) = peer_ni {
            self.watch_lnd_start(peer_ni, ni);
        }
    }

    /// See [`Engine::tx_payload_pinned`].
    pub(crate) fn tx_payload_pinned(
        &mut self,
        tx: TxId,
    ) -> Result<Option<PinnedBytes>, DriverError> {
        let message = self.msgs.get_mut(tx.0).ok_or(DriverError::UnknownTx)?;
        if !message.tx || !matches!(message.phase, Phase::TxReady | Phase::InLnd) {
            return Err(DriverError::WrongState);
        }
        let length = message.length as usize;
        if length == 0 {
            return Ok(None);
        }
        if let Some(orphan) = &mut message.orphan {
            return Ok(orphan.pin(0, length));
        }
        if let Some(buffer) = &mut message.router_buffer {
            return Ok(buffer.pin(0, length));
        }
        let offset = message.md_offset as usize;
        let md = message.md.and_then(|key| self.mds.get_mut(key)).ok_or(DriverError::UnknownTx)?;
        Ok(md.memory.pin(offset, length))
    }

    /// See [`Engine::handle_send_done`].
    pub(crate) fn handle_send_done(
        &mut self,
        now: Time,
        tx: TxId,
        status: HealthStatus,
    ) -> Result<(), DriverError> {
        self.advance(now);
        self.enter_partition(self.msgs.partition_of(tx.0));
        #[cfg(test)]
        self.audit_plan(|look| look.plan_send_done(tx, status));
        let message = self.msgs.get(tx.0).ok_or(DriverError::UnknownTx)?;
        if !message.tx || message.phase != Phase::InLnd {
            return Err(DriverError::WrongState);
        }
        let event_status = if status.is_ok() {
            EventStatus::Ok
        } else if status.is_timeout() {
            EventStatus::TimedOut
        } else {
            EventStatus::Io
        };
        if let Some(peer_ni) = message.peer_ni.filter(|_| self.failover_enabled()) {
            let took = message.lnd_at.map(|at| self.call.now.saturating_duration_since(at));
            self.watch_lnd_done(peer_ni, message.ni, took.filter(|_| status.is_ok()));
        }
        self.finalize_tx(tx.0, status, event_status, false);
        self.run_work();
        Ok(())
    }

    // ---------------------------------------------------------------- events and timers

    /// Sends held transmits on and resumes held receives where they stopped.
    /// lustre: net_fault.c `delayed_msg_process()`.
    fn release_held_faults(&mut self, released: Vec<Held>) {
        for held in released {
            let Some(message) = self.msgs.get_mut(held.key) else {
                continue;
            };
            if held.tx {
                if message.tx && message.phase == Phase::TxReady {
                    message.fault_released = true;
                    self.queue_transmit(held.key);
                }
            } else if !message.tx && message.phase == Phase::FaultHeld {
                message.phase = Phase::Receiving;
                self.resume_fault_held(held.key);
            }
        }
    }
    /// Counts in the partition the call runs on (which the call always holds).
    #[inline]
    pub(super) fn count(&mut self, count: impl FnOnce(&mut GlobalStats)) {
        if let Some(counters) = self.stats.share_mut(self.call.cpt) {
            count(counters);
        }
    }

    // ---------------------------------------------------------------- helpers

    /// Starts a call at `now`, on partition 0 until the call names its own
    /// ([`enter_partition`](Self::enter_partition)).
    #[cfg_attr(test, track_caller)]
    pub(super) fn advance(&mut self, now: Time) {
        #[cfg(test)]
        {
            self.close_audited_call();
            self.node.audit.borrow_mut().open(std::panic::Location::caller());
        }
        self.call.now = (self.call.now).max(now);
        self.call.cpt = 0;
    }

    /// The current call runs on partition `cpt` (where it counts): a message's home
    /// partition, or the one a receive's previous hop hashes to.
    pub(super) fn enter_partition(&mut self, cpt: Option<u32>) {
        self.call.cpt = cpt.unwrap_or(0);
        #[cfg(test)]
        self.node.audit.borrow_mut().enter(self.call.cpt);
    }

    /// Ends the partition audit's current call: what it reached of the partitioned state
    /// (its drain included, as the runtime drains under the same lock) is checked against the
    /// partition it named.
    #[cfg(test)]
    pub(super) fn close_audited_call(&mut self) {
        let touched = self.mds.take_touched()
            | self.mes.take_touched()
            | self.msgs.take_touched()
            | self.node.peers.touched().take()
            | self.peer_nis.take_touched()
            | self.node.nis.touched().take()
            | self.ni_shares.take_touched()
            | self.node.portals.take_touched()
            | self.match_tables.take_touched()
            | self.trackers.take_touched();
        self.node.audit.borrow_mut().close(self.call.cpt, touched);
    }

    /// Starts a call that names no partition (the audit does not check it): what an API
    /// call that takes no time does, so its work is not counted to the call before.
    #[cfg(test)]
    #[track_caller]
    fn audit_node_call(&mut self) {
        self.close_audited_call();
        self.node.audit.borrow_mut().open(std::panic::Location::caller());
    }

    /// Starts an audited call that takes message `key` out of the outputs.
    #[cfg(test)]
    #[track_caller]
    fn audit_drain(&mut self, key: Key) {
        self.close_audited_call();
        self.node.audit.borrow_mut().open(std::panic::Location::caller());
        self.enter_partition(self.msgs.partition_of(key));
        self.audit_plan(|look| look.plan_message(key));
    }

    /// Gives the audit the current call's plan, made by `plan` on the whole engine and
    /// settled from the call's partition (`View::settle_plan`).
    #[cfg(test)]
    fn audit_plan(&mut self, plan: impl Fn(&Look<'_>) -> CallScope) {
        let whole = self.narrowed(u64::MAX).map_or(CallScope::Node, |look| plan(&look));
        let settled = self.settle_plan(self.call.cpt, plan);
        self.node.audit.borrow_mut().plan_settled(whole, settled);
    }

    /// See [`Engine::partition_audit`].
    #[cfg(test)]
    pub(crate) fn partition_audit(&mut self) -> crate::engine::audit::AuditReport {
        self.close_audited_call();
        self.node.audit.borrow_mut().take()
    }

    pub(super) fn record_violation(&mut self, what: impl FnOnce() -> String) {
        if self.node.violation.get().is_none() {
            let _ = self.node.violation.set(what());
        }
    }

    pub(super) fn insert_md(
        &mut self,
        spec: MdSpec,
        unlink: UnlinkMode,
        me: Option<Key>,
        owner: MdOwner,
    ) -> Option<Key> {
        let length = u32::try_from(spec.memory.len()).ok()?;
        // lustre: lib-md.c `LNetMDAttach()` allocates in the ME's partition
        // (`lnet_cpt_of_cookie(meh)`), `LNetMDBind()` in the caller's.
        let cpt = match me {
            Some(me) => self.mes.get(me)?.cpt,
            None => spec.cpt.unwrap_or(0),
        };
        let md = Md {
            handle: MdHandle(0),
            memory: spec.memory,
            length,
            offset: 0,
            max_size: spec.max_size,
            threshold: spec.threshold,
            options: spec.options,
            user_ptr: spec.user_ptr,
            events: spec.events,
            handler: spec.handler,
            refcount: 0,
            me,
            auto_unlink: unlink == UnlinkMode::Unlink,
            zombie: false,
            lent: false,
            aborted: false,
            tracker: None,
            owner,
        };
        self.mds.insert(cpt, md)
    }

    pub(super) fn remove_me(&mut self, key: Key) {
        if let Some(me) = self.mes.remove(key) {
            if let Some(portal) = self.node.portals.get(me.portal as usize) {
                portal.remove(&mut self.match_tables, key, &me);
            }
        }
    }

    /// Files `message` in partition `cpt`, its home ([`Messages`]).
    pub(super) fn alloc_message(&mut self, cpt: u32, message: Message) -> Option<Key> {
        let key = self.msgs.alloc(cpt, message, self.limits.messages)?;
        self.count_messages(key);
        Some(key)
    }

    /// Updates the messages-alive gauges of `key`'s partition (lustre: lib-msg.c
    /// `lnet_msg_commit()`, `lnet_msg_decommit()`, per CPT).
    fn count_messages(&mut self, key: Key) {
        let Some(cpt) = self.msgs.partition_of(key) else {
            return;
        };
        let alive = self.msgs.share(cpt).map_or(0, Messages::len) as u64;
        if let Some(counters) = self.stats.share_mut(cpt) {
            counters.msgs_alloc = alive;
            counters.msgs_max = counters.msgs_max.max(alive);
        }
    }

    /// [`free_message`](Self::free_message) when the message itself is no longer needed.
    pub(super) fn discard_message(&mut self, key: Key) {
        if !self.msgs.discard(key) {
            self.record_violation(|| format!("message {key:?} finalized twice"));
        }
        self.count_messages(key);
    }

    pub(super) fn free_message(&mut self, key: Key) -> Option<Message> {
        let message = self.msgs.free(key);
        if message.is_none() {
            self.record_violation(|| format!("message {key:?} finalized twice"));
        }
        self.count_messages(key);
        message
    }

    /// `lnet_attach_rsp_tracker`: (re)arm the MD's tracker at now + transaction_timeout; a
    /// re-used MD keeps its start time and next hop. True when the tracker is new.
    pub(super) fn attach_tracker(&mut self, md_key: Key) -> bool {
        let (now, deadline) =
            (self.call.now, self.call.now + self.node.tunables.transaction_timeout);
        let cpt = self.mds.partition_of(md_key).unwrap_or(0);
        let Some(md) = self.mds.get_mut(md_key) else {
            return false;
        };
        let fresh = md.tracker.is_none();
        match md.tracker.as_mut() {
            // The queue already holds this exact entry (it leaves the queue only when the
            // tracker expires or is re-armed): a re-used MD sending again at the same instant
            // must not add duplicates that compaction would count as live.
            Some(tracker) if tracker.deadline == deadline => return false,
            Some(tracker) => {
                tracker.deadline = deadline;
                self.trackers.mark_stale(md_key);
            }
            None => {
                self.trackers.attached(md_key);
                if let Some(counters) = self.stats.share_mut(cpt) {
                    counters.rst_alloc = counters.rst_alloc.saturating_add(1);
                }
                md.tracker = Some(Tracker {
                    deadline,
                    next_hop: None,
                    started: now,
                    sent_at: None,
                    sent_ni: None,
                    awaiting: None,
                    request: None,
                });
            }
        }
        self.trackers.push(deadline, md_key);
        self.compact_trackers(md_key);
        fresh
    }

    /// Moves a tracker's deadline (a recovery probe's shorter timeout).
    pub(super) fn rearm_tracker(&mut self, md_key: Key, deadline: Time) {
        let Some(tracker) = self.mds.get_mut(md_key).and_then(|md| md.tracker.as_mut()) else {
            return;
        };
        if tracker.deadline == deadline {
            return;
        }
        tracker.deadline = deadline;
        self.trackers.push(deadline, md_key);
        self.compact_trackers(md_key);
    }

    fn compact_trackers(&mut self, md_key: Key) {
        let mds = &self.mds;
        self.trackers.maybe_compact(md_key, |deadline, key| {
            mds.get(key)
                .and_then(|md| md.tracker.as_ref())
                .is_some_and(|tracker| tracker.deadline == deadline)
        });
    }

    /// `lnet_detach_rsp_tracker`; the request it awaited is no longer awaited.
    pub(super) fn detach_tracker(&mut self, md_key: Key) {
        let Some(md) = self.mds.get_mut(md_key) else {
            return;
        };
        self.trackers.mark_stale(md_key);
        let Some(tracker) = md.tracker.take() else {
            return;
        };
        self.trackers.detached(md_key, tracker.request);
        let cpt = self.mds.partition_of(md_key).unwrap_or(0);
        if let Some(counters) = self.stats.share_mut(cpt) {
            counters.rst_alloc = counters.rst_alloc.saturating_sub(1);
        }
        if let Some((peer_ni, via)) = tracker.awaiting {
            self.watch_await_end(peer_ni, via, None);
        }
        self.compact_trackers(md_key);
    }

    /// Queues a user event (dropped and counted when the queue is full); returns it in place.
    #[inline]
    pub(super) fn push_event(&mut self, event: Event) -> Option<&mut Event> {
        let pushed = self.outputs.push_event(event, self.limits.events);
        if pushed.is_none() {
            if let Some(counters) = self.stats.share_mut(self.call.cpt) {
                counters.events_dropped += 1;
            }
        }
        pushed
    }

    /// Drains deferred work until none is left: message work first, then events of LNet's
    /// own MDs, then the push target, then one discovery step (the kernel's discovery
    /// thread). Every item finishes a bounded amount of work; a discovery step either waits
    /// for an event, completes, or moves the peer's state forward (soft ping failures are
    /// bounded), so this terminates.
    pub(super) fn run_work(&mut self) {
        loop {
            if let Some(work) = self.call.work.pop_front() {
                match work {
                    Work::Lo(key) => self.lo_send(key),
                    Work::Post(key) => self.resume_post(key),
                    Work::Resend(key) => self.resend(key),
                    Work::LoDeliver(key) => self.lo_deliver(key),
                    Work::Release(key) => {
                        self.on_node("a message discovery held", |flow| flow.release_held(key));
                    }
                    Work::RoutedRecv(key) => self.resume_routed_recv(key),
                }
                continue;
            }
            if let Some(event) = self.call.internal_events.pop_front() {
                self.on_node("an event of LNet's own MD", |flow| flow.handle_internal_event(event));
                continue;
            }
            let node = &self.node;
            if !node.push_target.wants_post() && !node.discoveries.has_requests() {
                break;
            }
            let more = self.on_node("the push target or discovery", |flow| {
                if flow.service_push_target() {
                    return true;
                }
                match flow.next_discovery_request() {
                    Some(peer) => {
                        flow.discovery_step(peer);
                        true
                    }
                    None => false,
                }
            });
            if more != Some(true) {
                break;
            }
        }
        self.prune_trackers();
    }

    /// Pops detached trackers off the front of the heaps this call made stale, so
    /// `poll_timeout` names a live deadline.
    fn prune_trackers(&mut self) {
        for cpt in self.trackers.take_stale() {
            while let Some((deadline, key)) = self.trackers.front_in(cpt) {
                let live = self
                    .mds
                    .get(key)
                    .and_then(|md| md.tracker.as_ref())
                    .is_some_and(|tracker| tracker.deadline == deadline);
                if live {
                    break;
                }
                self.trackers.pop_front_in(cpt);
            }
        }
    }
}

impl Flow<'_> {
    /// See [`Engine::add_ni`].
    pub(crate) fn add_ni(&mut self, now: Time, config: NiConfig) -> Result<NiId, ConfigError> {
        self.advance(now);
        if config.nid == Nid::LO_0 {
            return Err(ConfigError::LoopbackConfigured);
        }
        if config.lnd == LndKind::Lo {
            return Err(ConfigError::LoopbackLnd(config.nid));
        }
        if self.ni_for_nid(config.nid).is_some() {
            return Err(ConfigError::DuplicateNid(config.nid));
        }
        let cpts = self
            .partitions
            .bind(config.cpts)
            .map_err(|error| ConfigError::Cpt { nid: config.nid, error })?;
        let config = NiConfig { cpts, ..config };
        // Removed NIs keep their slot, so the bound counts them too.
        if self.node.nis.len() > MAX_NIS {
            return Err(ConfigError::TooManyNis);
        }
        let ni = Ni::from_config(&config, self.partitions);
        self.ni_shares.push_ni(ni.credits.as_ref());
        let count = self.partitions.count();
        let id = self.node.nis.push(ni, count).ok_or(ConfigError::TooManyNis)?;
        self.node.nis.touch_net(config.nid.net(), self.call.now);
        self.apply_policies_on_new_ni(config.nid.net());
        self.refresh_router_deadline();
        self.install_ping_target();
        self.run_work();
        Ok(id)
    }

    /// See [`Engine::set_lnd_timeout`].
    pub(crate) fn set_lnd_timeout(
        &mut self,
        lnd: LndKind,
        timeout: Option<std::time::Duration>,
    ) -> usize {
        let mut changed = 0;
        for index in 0..self.node.nis.len() {
            let id = NiId(index as u16);
            if let Some(ni) = self.node.nis.get_mut(id).filter(|ni| ni.lnd == lnd && !ni.removed) {
                ni.lnd_timeout = timeout;
                changed += 1;
            }
        }
        changed
    }

    /// See [`Engine::remove_ni`].
    pub(crate) fn remove_ni(&mut self, now: Time, ni: NiId) -> Result<(), NiRemoveError> {
        self.advance(now);
        if ni == NiId::LOOPBACK {
            return Err(NiRemoveError::Loopback);
        }
        let entry = self.node.nis.get(ni).ok_or(NiRemoveError::UnknownNi)?;
        if entry.removed {
            return Err(NiRemoveError::AlreadyRemoved);
        }
        let count = self.partitions.count();
        self.node.nis.remove(ni, count);
        self.cancel_recovery(crate::engine::recovery::RecoveryTarget::Local(ni));
        // Messages waiting for its credits go elsewhere (or fail selection).
        self.requeue_waiting_on(ni, true);
        self.install_ping_target();
        self.run_work();
        Ok(())
    }

    /// See [`Engine::set_lazy_portal`].
    pub(crate) fn set_lazy_portal(&mut self, portal: u32) -> Result<(), PortalError> {
        let table =
            self.node.portals.get_mut(portal as usize).ok_or(PortalError::BadPortal(portal))?;
        table.lazy = true;
        Ok(())
    }

    /// See [`Engine::clear_lazy_portal`].
    pub(crate) fn clear_lazy_portal(&mut self, now: Time, portal: u32) -> Result<(), PortalError> {
        self.advance(now);
        let table =
            self.node.portals.get_mut(portal as usize).ok_or(PortalError::BadPortal(portal))?;
        table.lazy = false;
        let delayed = std::mem::take(table.delayed_mut());
        for key in delayed {
            self.drop_delayed(key);
        }
        self.run_work();
        Ok(())
    }

    /// See [`Engine::handle_connection`].
    pub(crate) fn handle_connection(
        &mut self,
        now: Time,
        ni: NiId,
        peer: Nid,
        up: bool,
    ) -> Result<(), DriverError> {
        self.advance(now);
        let ni = self.node.nis.get(ni).ok_or(DriverError::UnknownNi)?;
        let credits = ni.tunables.peer_credits;
        if let Ok(id) = self.peer_ni_or_create(peer, credits) {
            let gateway =
                self.node.peers.owner(id).is_some_and(|peer| self.peer_is_router(peer, None));
            if let Some(peer_ni) = self.node.peers.ni_mut(&mut self.peer_nis, id) {
                peer_ni.alive = up;
                if up {
                    peer_ni.last_alive = Some(self.call.now);
                }
                // lustre: router.c lnet_notify() records the LND's verdict as the peer NI's
                // status, which is what gateway liveness reads (`auto_down`); ulnet keeps it to
                // gateways, whose routes it decides.
                if gateway {
                    peer_ni.status = if up {
                        crate::wire::ping::LNET_NI_STATUS_UP
                    } else {
                        crate::wire::ping::LNET_NI_STATUS_DOWN
                    };
                }
            }
        }
        Ok(())
    }

    /// See [`Engine::handle_timeout`].
    pub(crate) fn handle_timeout(&mut self, now: Time) {
        self.advance(now);
        while let Some((deadline, md_key)) = self.trackers.front() {
            if deadline > self.call.now {
                break;
            }
            self.trackers.pop_front();
            let Some(md) = self.mds.get(md_key) else {
                continue;
            };
            let Some(next_hop) = md
                .tracker
                .as_ref()
                .filter(|tracker| tracker.deadline == deadline)
                .map(|tracker| tracker.next_hop)
            else {
                continue;
            };
            self.detach_tracker(md_key);
            self.count(|counters| counters.response_timeout_count += 1);
            if let Some(peer_ni) = next_hop {
                self.remote_failure(peer_ni);
            }
            self.abort_md(md_key);
        }
        self.expire_pings();
        self.release_due_faults();
        self.run_watch();
        self.run_recovery();
        self.run_router_checker();
        self.run_work();
    }

    /// See [`Engine::fault_drop_add`].
    pub(crate) fn fault_drop_add(
        &mut self,
        now: Time,
        rule: DropRule,
    ) -> Result<(), FaultRuleError> {
        self.advance(now);
        self.node.faults.add_drop(rule, self.call.now)
    }

    /// See [`Engine::fault_drop_del`].
    pub(crate) fn fault_drop_del(&mut self, source: Nid, destination: Nid) -> usize {
        self.node.faults.delete_drops(source, destination)
    }

    /// See [`Engine::fault_drop_reset`].
    pub(crate) fn fault_drop_reset(&mut self, now: Time) {
        self.advance(now);
        self.node.faults.reset_drops(self.call.now);
    }

    /// See [`Engine::fault_delay_add`].
    pub(crate) fn fault_delay_add(
        &mut self,
        now: Time,
        rule: DelayRule,
    ) -> Result<(), FaultRuleError> {
        self.advance(now);
        self.node.faults.add_delay(rule, self.call.now)
    }

    /// See [`Engine::fault_delay_del`].
    pub(crate) fn fault_delay_del(&mut self, now: Time, source: Nid, destination: Nid) -> usize {
        self.advance(now);
        let mut released = Vec::new();
        let removed = self.node.faults.delete_delays(source, destination, &mut released);
        self.release_held_faults(released);
        self.run_work();
        removed
    }

    /// See [`Engine::fault_delay_reset`].
    pub(crate) fn fault_delay_reset(&mut self, now: Time) {
        self.advance(now);
        self.node.faults.reset_delays(self.call.now);
    }

    /// Releases what delay rules hold that is due.
    fn release_due_faults(&mut self) {
        let mut released = Vec::new();
        self.node.faults.take_due(self.call.now, &mut released);
        self.release_held_faults(released);
    }

    /// The peer NI for `nid`, created (with its own peer) if new.
    fn create_peer_ni(&mut self, nid: Nid, credits: u32) -> Result<PeerNiId, PeerTableFull> {
        // Deleted slots are reclaimed first when the table is full.
        self.make_peer_ni_room();
        let limit = self.limits.peer_nis;
        let id = self.node.peers.find_or_create(&mut self.peer_nis, nid, credits, limit)?;
        // A new peer with a new peer net (peer.c lnet_peer_attach_peer_ni()).
        self.apply_policies_on_attached(id, true);
        Ok(id)
    }

    /// Reclaims deleted peer NI slots if the table is full.
    pub(super) fn make_peer_ni_room(&mut self) {
        let (msgs, mds, peer_nis) = (&self.msgs, &self.mds, &self.peer_nis);
        let referenced = |id| peer_ni_referenced(msgs, mds, peer_nis, id);
        self.node.peers.make_room(&self.peer_nis, self.limits.peer_nis, referenced);
    }

    /// Reclaims the slots of deleted peer NIs nothing refers to any more (an admin-path scan
    /// over messages and trackers).
    pub(super) fn reclaim_peer_nis(&mut self) {
        let (msgs, mds, peer_nis) = (&self.msgs, &self.mds, &self.peer_nis);
        self.node
            .peers
            .reclaim_unused(&self.peer_nis, |id| peer_ni_referenced(msgs, mds, peer_nis, id));
    }
}

/// The calls that lend the caller a part's memory for as long as the view lives.
impl<'a> Flow<'a> {
    /// See [`Engine::md_memory_mut`].
    pub(crate) fn md_memory_mut(self, md: MdHandle) -> Result<&'a mut Memory, MdError> {
        let key = self.live_md(md)?;
        let md = self.mds.into_mut(key).ok_or(MdError::UnknownMd)?;
        if md.lent {
            return Err(MdError::MemoryLent);
        }
        Ok(&mut md.memory)
    }

    /// See [`Engine::rx_segments_mut`].
    pub(crate) fn rx_segments_mut(self, rx: RxId) -> Result<SlicesMut<'a>, DriverError> {
        self.not_lent(rx)?;
        let routed = self.msgs.get(rx.0).is_some_and(|m| m.router_buffer.is_some());
        if routed {
            return self.router_buffer_mut(rx);
        }
        let (md_key, offset, length) = self.receiving(rx)?;
        let md = self.mds.into_mut(md_key).ok_or(DriverError::UnknownRx)?;
        Ok(md.memory.slices_mut(offset as usize, length as usize))
    }

    /// The router buffer a forwarded message is being received into, if it is one.
    fn router_buffer_mut(self, rx: RxId) -> Result<SlicesMut<'a>, DriverError> {
        let message = self.msgs.into_mut(rx.0).ok_or(DriverError::UnknownRx)?;
        if message.tx || message.phase != Phase::Receiving {
            return Err(DriverError::WrongState);
        }
        let length = message.length as usize;
        let buffer = message.router_buffer.as_mut().ok_or(DriverError::WrongState)?;
        Ok(buffer.slices_mut(0, length))
    }
}

/// The calls that lend the caller a part's memory to read for as long as the view lives.
impl<'a> Look<'a> {
    /// See [`Engine::md_memory`].
    pub(crate) fn md_memory(self, md: MdHandle) -> Result<&'a Memory, MdError> {
        let key = self.live_md(md)?;
        let md = self.mds.get_for_view(key).ok_or(MdError::UnknownMd)?;
        if md.lent {
            return Err(MdError::MemoryLent);
        }
        Ok(&md.memory)
    }

    /// See [`Engine::tx_payload`].
    pub(crate) fn tx_payload(self, tx: TxId) -> Result<Slices<'a>, DriverError> {
        let message = self.msgs.get_for_view(tx.0).ok_or(DriverError::UnknownTx)?;
        if !message.tx || !matches!(message.phase, Phase::TxReady | Phase::InLnd) {
            return Err(DriverError::WrongState);
        }
        if let Some(orphan) = &message.orphan {
            return Ok(orphan.slices(0, message.length as usize));
        }
        if let Some(buffer) = &message.router_buffer {
            return Ok(buffer.slices(0, message.length as usize));
        }
        let empty = (message.md.is_none() || message.length == 0).then(|| EMPTY.slices(0, 0));
        if let Some(slices) = empty {
            return Ok(slices);
        }
        let md = message.md.and_then(|key| self.mds.get_for_view(key));
        let md = md.ok_or(DriverError::UnknownTx)?;
        Ok(md.memory.slices(message.md_offset as usize, message.length as usize))
    }
}

/// Backing for empty payload iterators.
static EMPTY: Memory = Memory::EMPTY;

fn conflicting_tracking(options: MdOptions) -> bool {
    options.contains(MdOptions::TRACK_RESPONSE) && options.contains(MdOptions::NO_TRACK_RESPONSE)
}

/// An ME for the match type `portal` would take it as (what `table_of_attach` reads).
pub(crate) fn me_of(portal: u32, match_id: ProcessId) -> Me {
    Me {
        portal,
        match_id,
        match_bits: 0,
        ignore_bits: 0,
        unlink: UnlinkMode::Retain,
        md: None,
        internal: false,
        cpt: 0,
    }
}

/// Whether a message, a tracker or a fast failover watch still names peer NI `id`.
fn peer_ni_referenced(
    msgs: &Shares<'_, Exclusive, Messages>,
    mds: &Shares<'_, Exclusive, Mds>,
    peer_nis: &Shares<'_, Exclusive, PeerNis>,
    id: PeerNiId,
) -> bool {
    msgs.iter().any(|(_, m)| m.peer_ni == Some(id))
        || mds.iter().any(|(_, md)| {
            md.tracker
                .as_ref()
                .is_some_and(|t| t.next_hop == Some(id) || t.awaiting.is_some_and(|a| a.0 == id))
        })
        || peer_nis.watches(id)
}
