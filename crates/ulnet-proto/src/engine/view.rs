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
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::engine::call::CallState;
use crate::engine::cpt::Partitions;
use crate::engine::md::Mds;
use crate::engine::me::Mes;
use crate::engine::msg::Messages;
use crate::engine::ni::NiShares;
use crate::engine::node::{Engine, Limits};
use crate::engine::node_part::NodePart;
use crate::engine::outputs::Outputs;
use crate::engine::partition::{Partition, PartitionShares};
use crate::engine::peer::PeerNis;
#[cfg(test)]
use crate::engine::plan::CallScope;
use crate::engine::portal::MatchTables;
use crate::engine::routes::RouterPools;
use crate::engine::shares::Shares;
use crate::engine::slab::KeyPartitions;
use crate::engine::stats::GlobalStats;
use crate::engine::tracker::Trackers;

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

/// How a view reaches the node part: to change it ([`NodeMut`]: a call planned on the whole
/// node, or the engine's own single-threaded calls) or only to read it ([`NodeShared`]: a
/// call planned on partitions, whose other calls may read the node part at the same time).
pub(crate) trait NodeAccess: Sized {
    type Ref<'a>: Deref<Target = NodePart>;

    /// The view as one that may change the node part, when it is one.
    fn whole<'v, 'a>(view: &'v mut View<'a, Exclusive, Self>) -> Option<&'v mut Flow<'a>>;
}

/// The node part, to change.
#[derive(Debug)]
pub(crate) enum NodeMut {}

/// The node part, to read.
#[derive(Debug)]
pub(crate) enum NodeShared {}

impl NodeAccess for NodeMut {
    type Ref<'a> = &'a mut NodePart;

    #[inline(always)]
    fn whole<'v, 'a>(view: &'v mut View<'a, Exclusive, Self>) -> Option<&'v mut Flow<'a>> {
        Some(view)
    }
}

impl NodeAccess for NodeShared {
    type Ref<'a> = &'a NodePart;

    #[inline(always)]
    fn whole<'v, 'a>(_: &'v mut View<'a, Exclusive, Self>) -> Option<&'v mut Flow<'a>> {
        None
    }
}

/// A view of an engine's parts (the fields of [`Engine`], which say what each holds); the
/// parts kept per partition are reached through the shares of the partitions the view holds.
pub(crate) struct View<'a, A: Access, N: NodeAccess> {
    pub(super) interface_cookie: u64,
    pub(super) pid: u32,
    pub(super) limits: &'a Limits,
    pub(super) partitions: Partitions,
    pub(super) call: A::Ref<'a, CallState>,
    pub(super) node: N::Ref<'a>,
    pub(super) ni_shares: Shares<'a, A, NiShares>,
    pub(super) match_tables: Shares<'a, A, MatchTables>,
    pub(super) mes: Shares<'a, A, Mes>,
    pub(super) mds: Shares<'a, A, Mds>,
    pub(super) msgs: Shares<'a, A, Messages>,
    pub(super) trackers: Shares<'a, A, Trackers>,
    pub(super) router_pools: Shares<'a, A, RouterPools>,
    pub(super) outputs: Shares<'a, A, Outputs>,
    pub(super) stats: Shares<'a, A, GlobalStats>,
    pub(super) peer_nis: Shares<'a, A, PeerNis>,
}

/// A view that may change what it reaches: what every flow runs on.
pub(crate) type Flow<'a> = View<'a, Exclusive, NodeMut>;

/// A view that changes the partitions it holds and only reads the node part: what a call
/// planned on partitions runs on. The message path's flows run on either kind of view
/// (`View<Exclusive, N>`) and reach what changes the node part through
/// [`View::on_node`], which a call planned on partitions never needs.
pub(crate) type PartFlow<'a> = View<'a, Exclusive, NodeShared>;

/// A view that only reads.
pub(crate) type Look<'a> = View<'a, Shared, NodeShared>;

/// The view of every part of `$engine`, each reached through `$($ref)+`, on partition 0's
/// call state; the same construction for both kinds of view.
macro_rules! whole_view {
    ($engine:expr, $first:expr, $rest:expr, $($ref:tt)+) => {{
        let key_partitions = KeyPartitions::new($engine.partitions.count());
        let (first, rest) = ($first, $rest);
        let Partition { call, shares } = first;
        // Partition 0's shares go straight into the view (the only ones with one
        // partition); the others are added after.
        let PartitionShares {
            mes,
            mds,
            msgs,
            trackers,
            counters,
            outputs,
            nis,
            portals,
            router_pools,
            peer_nis,
        } = shares;
        let mut ni_shares = Shares::one(key_partitions, 0, nis);
        let mut match_tables = Shares::one(key_partitions, 0, portals);
        let mut mes = Shares::one(key_partitions, 0, mes);
        let mut mds = Shares::one(key_partitions, 0, mds);
        let mut msgs = Shares::one(key_partitions, 0, msgs);
        let mut trackers = Shares::one(key_partitions, 0, trackers);
        let mut router_pools = Shares::one(key_partitions, 0, router_pools);
        let mut outputs = Shares::one(key_partitions, 0, outputs);
        let mut stats = Shares::one(key_partitions, 0, counters);
        let mut peer_nis = Shares::one(key_partitions, 0, peer_nis);
        for (cpt, part) in (1u32..).zip(rest) {
            let shares = $($ref)+ part.shares;
            ni_shares.hold(cpt, $($ref)+ shares.nis);
            match_tables.hold(cpt, $($ref)+ shares.portals);
            mes.hold(cpt, $($ref)+ shares.mes);
            mds.hold(cpt, $($ref)+ shares.mds);
            msgs.hold(cpt, $($ref)+ shares.msgs);
            trackers.hold(cpt, $($ref)+ shares.trackers);
            router_pools.hold(cpt, $($ref)+ shares.router_pools);
            outputs.hold(cpt, $($ref)+ shares.outputs);
            stats.hold(cpt, $($ref)+ shares.counters);
            peer_nis.hold(cpt, $($ref)+ shares.peer_nis);
        }
        // Built in place as the result: a view is made for every call, and copying one
        // showed in the engine's benchmark.
        View {
            interface_cookie: $engine.interface_cookie,
            pid: $engine.pid,
            limits: &$engine.limits,
            partitions: $engine.partitions,
            call,
            node: $($ref)+ $engine.node,
            ni_shares,
            match_tables,
            mes,
            mds,
            msgs,
            trackers,
            router_pools,
            outputs,
            stats,
            peer_nis,
        }
    }};
}

impl<A: Access, N: NodeAccess> View<'_, A, N> {
    /// What a call holding only the partitions of `held` (one bit each) would see, to read;
    /// `None` when the view holds none of them.
    pub(crate) fn narrowed(&self, held: u64) -> Option<Look<'_>> {
        Some(View {
            interface_cookie: self.interface_cookie,
            pid: self.pid,
            limits: self.limits,
            partitions: self.partitions,
            call: &*self.call,
            node: &*self.node,
            ni_shares: self.ni_shares.narrow(held)?,
            match_tables: self.match_tables.narrow(held)?,
            mes: self.mes.narrow(held)?,
            mds: self.mds.narrow(held)?,
            msgs: self.msgs.narrow(held)?,
            trackers: self.trackers.narrow(held)?,
            router_pools: self.router_pools.narrow(held)?,
            outputs: self.outputs.narrow(held)?,
            stats: self.stats.narrow(held)?,
            peer_nis: self.peer_nis.narrow(held)?,
        })
    }

    /// The plan a call entering on partition `home` settles on when it plans holding `home`
    /// alone and, while the plan names partitions it does not hold, takes those too and
    /// plans again (lib-move.c `lnet_send()`: `lnet_net_unlock(cpt); lnet_net_lock(cpt2);
    /// goto again`). A plan reads only partitions it names, so once it names none it does
    /// not hold, it is the plan the whole engine would make; the engine's tests hold every
    /// audited call to that (`audit.rs`). `Engine::on_partitions` settles the same way,
    /// locking as it goes.
    #[cfg(test)]
    pub(crate) fn settle_plan(
        &self,
        home: u32,
        plan: impl Fn(&Look<'_>) -> CallScope,
    ) -> CallScope {
        let Some(mut held) = 1u64.checked_shl(home) else {
            return CallScope::Node;
        };
        loop {
            let Some(look) = self.narrowed(held) else {
                return CallScope::Node;
            };
            match plan(&look) {
                CallScope::Partitions(mask) if mask & !held != 0 => held |= mask,
                settled => return settled,
            }
        }
    }
}

impl<'a, N: NodeAccess> View<'a, Exclusive, N> {
    /// Runs `change` on this view as one that may change the node part. A call planned on
    /// partitions cannot: its plan missed `what`, a bug, recorded as a violation (`None`).
    #[inline(always)]
    pub(crate) fn on_node<R>(
        &mut self,
        what: &'static str,
        change: impl FnOnce(&mut Flow<'a>) -> R,
    ) -> Option<R> {
        // A call the audit holds to a plan of partitions must not change the node part.
        #[cfg(test)]
        self.node.audit.borrow_mut().reach_node(what);
        match N::whole(self) {
            Some(flow) => Some(change(flow)),
            None => {
                let _ = self
                    .node
                    .violation
                    .set(format!("a call planned on partitions reached the node part: {what}"));
                None
            }
        }
    }
}

impl<'a> Flow<'a> {
    /// This view, to read for as long as its borrow lasts.
    pub(crate) fn into_look(self) -> Look<'a> {
        View {
            interface_cookie: self.interface_cookie,
            pid: self.pid,
            limits: self.limits,
            partitions: self.partitions,
            call: self.call,
            node: self.node,
            ni_shares: self.ni_shares.into_shared(),
            match_tables: self.match_tables.into_shared(),
            mes: self.mes.into_shared(),
            mds: self.mds.into_shared(),
            msgs: self.msgs.into_shared(),
            trackers: self.trackers.into_shared(),
            router_pools: self.router_pools.into_shared(),
            outputs: self.outputs.into_shared(),
            stats: self.stats.into_shared(),
            peer_nis: self.peer_nis.into_shared(),
        }
    }
}

/// A partition's part, locked: partitions are locked in partition order, after the node
/// part, and the engine never panics holding one, so a poisoned lock is taken as it is.
pub(super) fn lock(part: &Mutex<Partition>) -> MutexGuard<'_, Partition> {
    part.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A partition's part, through the engine's exclusive borrow: no locking.
#[inline(always)]
pub(super) fn part_mut(part: &mut Mutex<Partition>) -> &mut Partition {
    part.get_mut().unwrap_or_else(PoisonError::into_inner)
}

impl Engine {
    /// A view of every part, to change; calls run on partition 0's call state.
    #[inline(always)]
    pub(super) fn flow(&mut self) -> Flow<'_> {
        let (first, rest) = self.parts.split_first_mut();
        whole_view!(self, part_mut(first), rest.map(part_mut), &mut)
    }

    /// The driver's queues of every partition, without the rest of a view (what most polls
    /// need).
    pub(super) fn outputs(&mut self) -> Shares<'_, Exclusive, Outputs> {
        let key_partitions = KeyPartitions::new(self.partitions.count());
        let (first, rest) = self.parts.split_first_mut();
        let mut outputs = Shares::one(key_partitions, 0, &mut part_mut(first).shares.outputs);
        for (cpt, part) in (1u32..).zip(rest) {
            outputs.hold(cpt, &mut part_mut(part).shares.outputs);
        }
        outputs
    }

    /// Runs `read` on a view of every part, to read, with every partition locked in turn
    /// (a runtime's partition calls may be running on other threads).
    pub(super) fn with_look<R>(&self, read: impl FnOnce(&Look<'_>) -> R) -> R {
        let (first, rest) = self.parts.split_first();
        let first = lock(first);
        let rest: Vec<MutexGuard<'_, Partition>> = rest.map(lock).collect();
        let look = whole_view!(self, &*first, rest.iter().map(|guard| &**guard), &);
        read(&look)
    }
}

/// A runtime shares the engine between the threads of its partitions (`Engine::on_partitions`
/// through `&self`). The audit's counters (tests only) are plain cells, so this holds outside
/// tests.
#[cfg(not(test))]
const _: () = {
    const fn shared_between_threads<T: Send + Sync>() {}
    shared_between_threads::<Engine>();
};
