//! What a call runs on: a view of the engine's parts, each reached through a reference.
//!
//! Every flow (sending, receiving, finalizing, discovery, routing, the timers) is a method of
//! [`Flow`], a view that may change what it reaches; what only reads is a method of [`View`]
//! for either kind, so a plan (`plan.rs`) and the flow it plans read through the same code.
//! [`Engine`] owns the parts and builds a view for each call ([`Engine::flow`],
//! [`Engine::look`]). A view is what lets the parts live apart: a runtime that keeps the node
//! part and each partition part behind their own locks builds the view a call's plan needs
//! from the guards it holds (decision 0029, step 5).

use std::ops::Deref;

use crate::engine::call::CallState;
use crate::engine::cpt::Partitions;
use crate::engine::faults::Faults;
use crate::engine::md::Mds;
use crate::engine::me::Mes;
use crate::engine::msg::Messages;
use crate::engine::ni::{NiShares, Nis};
use crate::engine::node::{Engine, Limits};
use crate::engine::outputs::Outputs;
use crate::engine::partition::{Partition, PartitionShares};
use crate::engine::peer::PeerTable;
use crate::engine::ping::{Discoveries, PingTarget, Pings, PushTarget};
use crate::engine::policies::UdspRules;
use crate::engine::portal::{MatchTables, Portals};
use crate::engine::recovery::RecoveryQueues;
use crate::engine::routes::{RouterPools, Routes};
use crate::engine::shares::Shares;
use crate::engine::slab::KeyPartitions;
use crate::engine::stats::GlobalStats;
use crate::engine::tracker::Trackers;
use crate::engine::tunables::Tunables;
use crate::engine::watch::Failover;

/// How a view reaches the parts: shared ([`Shared`]) or exclusive ([`Exclusive`]).
pub(crate) trait Access {
    type Ref<'a, T: 'a>: Deref<Target = T>;
}

/// A view that only reads.
#[derive(Debug)]
pub(crate) enum Shared {}

/// A view that may change what it reaches.
#[derive(Debug)]
pub(crate) enum Exclusive {}

impl Access for Shared {
    type Ref<'a, T: 'a> = &'a T;
}

impl Access for Exclusive {
    type Ref<'a, T: 'a> = &'a mut T;
}

/// A view of an engine's parts (the fields of [`Engine`], which say what each holds); the
/// parts kept per partition are reached through the shares of the partitions the view holds.
pub(crate) struct View<'a, A: Access> {
    pub(super) interface_cookie: u64,
    pub(super) pid: u32,
    pub(super) limits: Limits,
    pub(super) partitions: Partitions,
    pub(super) tunables: A::Ref<'a, Tunables>,
    pub(super) call: A::Ref<'a, CallState>,
    pub(super) nis: A::Ref<'a, Nis>,
    pub(super) ni_shares: Shares<'a, A, NiShares>,
    pub(super) peers: A::Ref<'a, PeerTable>,
    pub(super) portals: A::Ref<'a, Portals>,
    pub(super) match_tables: Shares<'a, A, MatchTables>,
    pub(super) mes: Shares<'a, A, Mes>,
    pub(super) mds: Shares<'a, A, Mds>,
    pub(super) msgs: Shares<'a, A, Messages>,
    pub(super) trackers: Shares<'a, A, Trackers>,
    pub(super) ping_target: A::Ref<'a, PingTarget>,
    pub(super) push_target: A::Ref<'a, PushTarget>,
    pub(super) pings: A::Ref<'a, Pings>,
    pub(super) discoveries: A::Ref<'a, Discoveries>,
    pub(super) recovery: A::Ref<'a, RecoveryQueues>,
    pub(super) failover: A::Ref<'a, Failover>,
    pub(super) faults: A::Ref<'a, Faults>,
    pub(super) routes: A::Ref<'a, Routes>,
    pub(super) router_pools: Shares<'a, A, RouterPools>,
    pub(super) policies: A::Ref<'a, UdspRules>,
    pub(super) outputs: Shares<'a, A, Outputs>,
    pub(super) stats: Shares<'a, A, GlobalStats>,
    #[cfg(test)]
    pub(super) audit: A::Ref<'a, crate::engine::audit::PartitionAudit>,
    pub(super) violation: A::Ref<'a, Option<String>>,
}

/// A view that may change what it reaches: what every flow runs on.
pub(crate) type Flow<'a> = View<'a, Exclusive>;

/// A view that only reads.
pub(crate) type Look<'a> = View<'a, Shared>;

/// The view of every part of `$engine`, each reached through `$($ref)+`, on partition 0's
/// call state; the same construction for both kinds of view.
macro_rules! whole_view {
    ($engine:expr, $split:ident, $($ref:tt)+) => {{
        let key_partitions = KeyPartitions::new($engine.partitions.count());
        let mut mes = Shares::new(key_partitions);
        let mut mds = Shares::new(key_partitions);
        let mut msgs = Shares::new(key_partitions);
        let mut trackers = Shares::new(key_partitions);
        let mut stats = Shares::new(key_partitions);
        let mut outputs = Shares::new(key_partitions);
        let mut ni_shares = Shares::new(key_partitions);
        let mut match_tables = Shares::new(key_partitions);
        let mut router_pools = Shares::new(key_partitions);
        let (first, rest) = $engine.parts.$split();
        let Partition { call, shares } = first;
        let all = std::iter::once(shares).chain(rest.map(|part| $($ref)+ part.shares));
        for (cpt, shares) in (0u32..).zip(all) {
            let PartitionShares {
                mes: part_mes,
                mds: part_mds,
                msgs: part_msgs,
                trackers: part_trackers,
                counters: part_counters,
                outputs: part_outputs,
                nis: part_nis,
                portals: part_portals,
                router_pools: part_router_pools,
            } = shares;
            mes.hold(cpt, part_mes);
            mds.hold(cpt, part_mds);
            msgs.hold(cpt, part_msgs);
            trackers.hold(cpt, part_trackers);
            stats.hold(cpt, part_counters);
            outputs.hold(cpt, part_outputs);
            ni_shares.hold(cpt, part_nis);
            match_tables.hold(cpt, part_portals);
            router_pools.hold(cpt, part_router_pools);
        }
        View {
            interface_cookie: $engine.interface_cookie,
            pid: $engine.pid,
            limits: $engine.limits,
            partitions: $engine.partitions,
            tunables: $($ref)+ $engine.tunables,
            call,
            nis: $($ref)+ $engine.nis,
            ni_shares,
            peers: $($ref)+ $engine.peers,
            portals: $($ref)+ $engine.portals,
            match_tables,
            mes,
            mds,
            msgs,
            trackers,
            ping_target: $($ref)+ $engine.ping_target,
            push_target: $($ref)+ $engine.push_target,
            pings: $($ref)+ $engine.pings,
            discoveries: $($ref)+ $engine.discoveries,
            recovery: $($ref)+ $engine.recovery,
            failover: $($ref)+ $engine.failover,
            faults: $($ref)+ $engine.faults,
            routes: $($ref)+ $engine.routes,
            router_pools,
            policies: $($ref)+ $engine.policies,
            outputs,
            stats,
            #[cfg(test)]
            audit: $($ref)+ $engine.audit,
            violation: $($ref)+ $engine.violation,
        }
    }};
}

impl Engine {
    /// A view of every part, to change; calls run on partition 0's call state.
    pub(super) fn flow(&mut self) -> Flow<'_> {
        whole_view!(self, split_first_mut, &mut)
    }

    /// A view of every part, to read.
    pub(super) fn look(&self) -> Look<'_> {
        whole_view!(self, split_first, &)
    }
}
