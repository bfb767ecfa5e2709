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
use crate::engine::ni::Nis;
use crate::engine::node::{Engine, Limits};
use crate::engine::outputs::Outputs;
use crate::engine::peer::PeerTable;
use crate::engine::ping::{Discoveries, PingTarget, Pings, PushTarget};
use crate::engine::policies::UdspRules;
use crate::engine::portal::Portals;
use crate::engine::recovery::RecoveryQueues;
use crate::engine::routes::Routes;
use crate::engine::stats::PartitionCounters;
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

/// A view of an engine's parts (the fields of [`Engine`], which say what each holds).
pub(crate) struct View<'a, A: Access> {
    pub(super) interface_cookie: u64,
    pub(super) pid: u32,
    pub(super) limits: Limits,
    pub(super) partitions: Partitions,
    pub(super) tunables: A::Ref<'a, Tunables>,
    pub(super) call: A::Ref<'a, CallState>,
    pub(super) nis: A::Ref<'a, Nis>,
    pub(super) peers: A::Ref<'a, PeerTable>,
    pub(super) portals: A::Ref<'a, Portals>,
    pub(super) mes: A::Ref<'a, Mes>,
    pub(super) mds: A::Ref<'a, Mds>,
    pub(super) msgs: A::Ref<'a, Messages>,
    pub(super) trackers: A::Ref<'a, Trackers>,
    pub(super) ping_target: A::Ref<'a, PingTarget>,
    pub(super) push_target: A::Ref<'a, PushTarget>,
    pub(super) pings: A::Ref<'a, Pings>,
    pub(super) discoveries: A::Ref<'a, Discoveries>,
    pub(super) recovery: A::Ref<'a, RecoveryQueues>,
    pub(super) failover: A::Ref<'a, Failover>,
    pub(super) faults: A::Ref<'a, Faults>,
    pub(super) routes: A::Ref<'a, Routes>,
    pub(super) policies: A::Ref<'a, UdspRules>,
    pub(super) outputs: A::Ref<'a, Outputs>,
    pub(super) stats: A::Ref<'a, PartitionCounters>,
    #[cfg(test)]
    pub(super) audit: A::Ref<'a, crate::engine::audit::PartitionAudit>,
    pub(super) violation: A::Ref<'a, Option<String>>,
}

/// A view that may change what it reaches: what every flow runs on.
pub(crate) type Flow<'a> = View<'a, Exclusive>;

/// A view that only reads.
pub(crate) type Look<'a> = View<'a, Shared>;

impl Engine {
    /// A view of every part, to change.
    pub(super) fn flow(&mut self) -> Flow<'_> {
        View {
            interface_cookie: self.interface_cookie,
            pid: self.pid,
            limits: self.limits,
            partitions: self.partitions,
            tunables: &mut self.tunables,
            call: self.calls.get_or_first_mut(0),
            nis: &mut self.nis,
            peers: &mut self.peers,
            portals: &mut self.portals,
            mes: &mut self.mes,
            mds: &mut self.mds,
            msgs: &mut self.msgs,
            trackers: &mut self.trackers,
            ping_target: &mut self.ping_target,
            push_target: &mut self.push_target,
            pings: &mut self.pings,
            discoveries: &mut self.discoveries,
            recovery: &mut self.recovery,
            failover: &mut self.failover,
            faults: &mut self.faults,
            routes: &mut self.routes,
            policies: &mut self.policies,
            outputs: &mut self.outputs,
            stats: &mut self.stats,
            #[cfg(test)]
            audit: &mut self.audit,
            violation: &mut self.violation,
        }
    }

    /// A view of every part, to read.
    pub(super) fn look(&self) -> Look<'_> {
        View {
            interface_cookie: self.interface_cookie,
            pid: self.pid,
            limits: self.limits,
            partitions: self.partitions,
            tunables: &self.tunables,
            call: self.calls.first(),
            nis: &self.nis,
            peers: &self.peers,
            portals: &self.portals,
            mes: &self.mes,
            mds: &self.mds,
            msgs: &self.msgs,
            trackers: &self.trackers,
            ping_target: &self.ping_target,
            push_target: &self.push_target,
            pings: &self.pings,
            discoveries: &self.discoveries,
            recovery: &self.recovery,
            failover: &self.failover,
            faults: &self.faults,
            routes: &self.routes,
            policies: &self.policies,
            outputs: &self.outputs,
            stats: &self.stats,
            #[cfg(test)]
            audit: &self.audit,
            violation: &self.violation,
        }
    }
}
