//! Calls made through `&self` on the partitions their plan names, the node part shared:
//! what lets a runtime run message-path calls of different partitions at once (decision 0029,
//! step 5). Each call locks its own partition, plans, and while the plan names partitions it
//! does not hold, releases them and locks all it names in partition order, then plans again
//! (lib-move.c `lnet_send()`: `lnet_net_unlock(cpt); lnet_net_lock(cpt2); goto again`). A
//! plan that needs the whole node, and any call on a node of one partition (whose plans
//! name partition 0 whatever the call changes), is not made: the caller makes it through
//! `&mut self`, under its own exclusive lock.

use std::collections::VecDeque;
use std::sync::MutexGuard;

use crate::addr::Nid;
use crate::engine::call::CallState;
use crate::engine::error::{DriverError, InitiateError};
use crate::engine::error::{
    MdAttachError, MdBindError, MdError, MeAttachError, MeUnlinkError, Rejected,
};
use crate::engine::event::Event;
use crate::engine::health::HealthStatus;
use crate::engine::md::{MdHandle, MdSpec, UnlinkMode};
use crate::engine::me::{InsertPosition, MeHandle, ProcessId};
use crate::engine::memory::{LentPayload, PinnedBytes, Slices};
use crate::engine::msg::{RxId, TxId};
use crate::engine::ni::NiId;
use crate::engine::node::{Engine, GetRequest, PutRequest};
use crate::engine::outputs::{Outputs, PathReset, Pending, RecvAction, Resume, Transmit};
use crate::engine::partition::{Partition, PartitionShares};
use crate::engine::ping::PingCompletion;
use crate::engine::plan::CallScope;
use crate::engine::shares::Shares;
use crate::engine::slab::{Key, KeyPartitions};
use crate::engine::view::{Exclusive, PartFlow, View, lock};
use crate::time::Time;
use crate::wire::header::Header;

impl Engine {
    /// [`handle_header`](Self::handle_header) on the partitions its plan names; `None`
    /// (nothing done) when it needs the whole node.
    pub fn try_handle_header(
        &self,
        now: Time,
        ni: NiId,
        from: Nid,
        header: &Header,
    ) -> Option<RecvAction> {
        let home = self.cpt_of_nid(&from, ni);
        self.on_partitions(
            home,
            |look| look.plan_header(ni, from, header),
            |flow| flow.handle_header(now, ni, from, header),
        )
    }

    /// [`handle_recv_done`](Self::handle_recv_done) on the partitions its plan names;
    /// `None` (nothing done) when it needs the whole node.
    pub fn try_handle_recv_done(
        &self,
        now: Time,
        rx: RxId,
        status: HealthStatus,
    ) -> Option<Result<(), DriverError>> {
        self.on_partitions(
            self.home_of(rx.0)?,
            |look| look.plan_recv_done(rx, status),
            |flow| flow.handle_recv_done(now, rx, status),
        )
    }

    /// [`handle_send_done`](Self::handle_send_done) on the partitions its plan names;
    /// `None` (nothing done) when it needs the whole node.
    pub fn try_handle_send_done(
        &self,
        now: Time,
        tx: TxId,
        status: HealthStatus,
    ) -> Option<Result<(), DriverError>> {
        self.on_partitions(
            self.home_of(tx.0)?,
            |look| look.plan_send_done(tx, status),
            |flow| flow.handle_send_done(now, tx, status),
        )
    }

    /// [`put`](Self::put) on the partitions its plan names; `None` (nothing done) when it
    /// needs the whole node.
    pub fn try_put(&self, now: Time, request: &PutRequest) -> Option<Result<(), InitiateError>> {
        self.on_partitions(
            self.home_of(request.md.key()?)?,
            |look| look.plan_initiate(request.md, request.target),
            |flow| flow.put(now, request),
        )
    }

    /// [`get`](Self::get) on the partitions its plan names; `None` (nothing done) when it
    /// needs the whole node.
    pub fn try_get(&self, now: Time, request: &GetRequest) -> Option<Result<(), InitiateError>> {
        self.on_partitions(
            self.home_of(request.md.key()?)?,
            |look| look.plan_initiate(request.md, request.target),
            |flow| flow.get(now, request),
        )
    }

    /// Partition `cpt`'s next transmit, taken holding the partitions its message's plan
    /// names: `Some(None)` when partition `cpt` has none waiting, `None` (nothing taken) when
    /// the next needs the whole node.
    pub fn try_poll_transmit(&self, cpt: u32) -> Option<Option<Transmit>> {
        loop {
            let taken = self.on_partitions(
                cpt,
                |look| match look.outputs.share(cpt).and_then(Outputs::front_transmit) {
                    Some(key) => look.plan_message(key),
                    None => CallScope::one(cpt),
                },
                |flow| flow.poll_transmit_of(cpt),
            )?;
            match taken {
                // Its message was no longer to be sent: the next one.
                Some(None) => continue,
                taken => return Some(taken.flatten()),
            }
        }
    }

    /// Partition `cpt`'s next delayed receive that may proceed, as
    /// [`try_poll_transmit`](Self::try_poll_transmit).
    pub fn try_poll_resume(&self, cpt: u32) -> Option<Option<Resume>> {
        self.on_partitions(
            cpt,
            |look| match look.outputs.share(cpt).and_then(Outputs::front_resume) {
                Some(key) => look.plan_message(key),
                None => CallScope::one(cpt),
            },
            |flow| flow.poll_resume_of(cpt),
        )
    }

    /// Moves the events waiting in partition `cpt` (those of its MDs, in order) to the end of
    /// `into`, holding that partition alone; returns whether there were any.
    pub fn take_events_of(&self, cpt: u32, into: &mut VecDeque<Event>) -> bool {
        self.parts.get(cpt).is_some_and(|part| lock(part).shares.outputs.take_events(into))
    }

    /// What waits in partition `cpt`'s outputs, holding that partition alone: what a
    /// runtime checks before draining it.
    pub fn pending_outputs(&self, cpt: u32) -> Pending {
        self.parts.get(cpt).map(|part| lock(part).shares.outputs.pending()).unwrap_or_default()
    }

    /// Partition `cpt`'s next finished ping or discovery, holding that partition alone.
    pub fn poll_completion_of(&self, cpt: u32) -> Option<PingCompletion> {
        lock(self.parts.get(cpt)?).shares.outputs.pop_completion()
    }

    /// Partition `cpt`'s next path reset, holding that partition alone.
    pub fn poll_path_reset_of(&self, cpt: u32) -> Option<PathReset> {
        lock(self.parts.get(cpt)?).shares.outputs.pop_path_reset()
    }

    /// [`rx_write`](Self::rx_write) on the partitions the receive's plan names; `None`
    /// (nothing written) when it needs the whole node.
    pub fn try_rx_write(
        &self,
        rx: RxId,
        offset: u32,
        bytes: &[u8],
    ) -> Option<Result<(), DriverError>> {
        self.on_partitions(
            self.home_of(rx.0)?,
            |look| look.plan_message(rx.0),
            |flow| flow.rx_write(rx, offset, bytes),
        )
    }

    /// [`rx_lend`](Self::rx_lend) on the partitions the receive's plan names; `None`
    /// (nothing lent) when it needs the whole node.
    pub fn try_rx_lend(&self, rx: RxId) -> Option<Result<Option<LentPayload>, DriverError>> {
        self.on_partitions(
            self.home_of(rx.0)?,
            |look| look.plan_message(rx.0),
            |flow| flow.rx_lend(rx),
        )
    }

    /// [`rx_give_back`](Self::rx_give_back) on the partitions the receive's plan names;
    /// `Err` with the memory, untouched, when it needs the whole node.
    pub fn try_rx_give_back(
        &self,
        rx: RxId,
        lent: LentPayload,
    ) -> Result<Result<(), DriverError>, LentPayload> {
        self.on_partitions_with(
            self.home_of(rx.0),
            |look| look.plan_message(rx.0),
            lent,
            |flow, lent| flow.rx_give_back(rx, lent),
        )
    }

    /// [`tx_payload_pinned`](Self::tx_payload_pinned) on the partitions the transmit's plan
    /// names; `None` when it needs the whole node.
    pub fn try_tx_payload_pinned(
        &self,
        tx: TxId,
    ) -> Option<Result<Option<PinnedBytes>, DriverError>> {
        self.on_partitions(
            self.home_of(tx.0)?,
            |look| look.plan_message(tx.0),
            |flow| flow.tx_payload_pinned(tx),
        )
    }

    /// [`md_bind`](Self::md_bind) on the partition `spec` names (partition 0 if none),
    /// holding it alone; `Err` with the spec, untouched, on a node of one partition.
    pub fn try_md_bind(
        &self,
        spec: MdSpec,
        unlink: UnlinkMode,
    ) -> Result<Result<MdHandle, Rejected<MdBindError>>, MdSpec> {
        let home = spec.cpt.unwrap_or(0);
        self.on_partitions_with(
            Some(home),
            |_| CallScope::one(home),
            spec,
            |flow, spec| flow.md_bind(spec, unlink),
        )
    }

    /// [`me_attach`](Self::me_attach) on the partition whose match table takes the ME;
    /// `None` (nothing attached) when it needs the whole node.
    #[allow(clippy::too_many_arguments)]
    pub fn try_me_attach(
        &self,
        portal: u32,
        match_id: ProcessId,
        match_bits: u64,
        ignore_bits: u64,
        unlink: UnlinkMode,
        position: InsertPosition,
    ) -> Option<Result<MeHandle, MeAttachError>> {
        // The node part alone (the portal's match type): no partition is locked for it.
        let table = self.node.portals.get(portal as usize)?;
        let me = crate::engine::node::me_of(portal, match_id);
        let home = table.table_of_attach(&me, position, |nid| {
            self.node.nis.cpt_of_nid_any(&self.partitions, nid)
        });
        self.on_partitions(
            home,
            |look| look.plan_me_attach(portal, match_id, position),
            |flow| flow.me_attach(portal, match_id, match_bits, ignore_bits, unlink, position),
        )
    }

    /// [`me_unlink`](Self::me_unlink) on the ME's partition; `None` (nothing unlinked) when
    /// it needs the whole node.
    pub fn try_me_unlink(&self, me: MeHandle) -> Option<Result<(), MeUnlinkError>> {
        let key = me.key()?;
        self.on_partitions(self.home_of(key)?, |look| look.plan_me(key), |flow| flow.me_unlink(me))
    }

    /// [`md_attach`](Self::md_attach) on the ME's partition; `Err` with the spec,
    /// untouched, when it needs the whole node.
    pub fn try_md_attach(
        &self,
        now: Time,
        me: MeHandle,
        spec: MdSpec,
        unlink: UnlinkMode,
    ) -> Result<Result<MdHandle, Rejected<MdAttachError>>, MdSpec> {
        let key = me.key();
        self.on_partitions_with(
            key.and_then(|key| self.home_of(key)),
            |look| key.map_or(CallScope::Node, |key| look.plan_me(key)),
            spec,
            |flow, spec| flow.md_attach(now, me, spec, unlink),
        )
    }

    /// [`md_unlink`](Self::md_unlink) on the MD's partition (and the one of the peer NI its
    /// tracker awaits); `None` (nothing unlinked) when it needs the whole node.
    pub fn try_md_unlink(&self, now: Time, md: MdHandle) -> Option<Result<(), MdError>> {
        self.on_partitions(
            self.home_of(md.key()?)?,
            |look| look.plan_unlink(md),
            |flow| flow.md_unlink(now, md),
        )
    }

    /// Reads a transmit's payload (`tx_payload`) with `read`, holding the partitions the
    /// message's plan names: what a driver copies a small payload out with. `None` when it
    /// needs the whole node.
    pub fn with_tx_payload<R>(
        &self,
        tx: TxId,
        read: impl FnOnce(Slices<'_>) -> R,
    ) -> Option<Result<R, DriverError>> {
        self.on_partitions(
            self.home_of(tx.0)?,
            |look| look.plan_message(tx.0),
            |flow| match flow.narrowed(u64::MAX) {
                Some(look) => look.tx_payload(tx).map(read),
                None => Err(DriverError::UnknownTx),
            },
        )
    }

    /// The partition a key names, on a node of several.
    fn home_of(&self, key: Key) -> Option<u32> {
        KeyPartitions::new(self.partitions.count()).of(key)
    }

    /// Makes `call` on the partitions `plan` settles on from partition `home` (see the
    /// module documentation): `None`, with nothing changed, when the plan needs the whole
    /// node.
    fn on_partitions<R>(
        &self,
        home: u32,
        plan: impl Fn(&PartFlow<'_>) -> CallScope,
        call: impl FnOnce(&mut PartFlow<'_>) -> R,
    ) -> Option<R> {
        self.on_partitions_with(Some(home), plan, (), |flow, ()| call(flow)).ok()
    }

    /// [`on_partitions`](Self::on_partitions) for a call that takes `value` (memory the
    /// caller owns): `Err(value)`, untouched, when the call is not made. The call runs on the
    /// view its settled plan was made on.
    fn on_partitions_with<T, R>(
        &self,
        home: Option<u32>,
        plan: impl Fn(&PartFlow<'_>) -> CallScope,
        value: T,
        call: impl FnOnce(&mut PartFlow<'_>, T) -> R,
    ) -> Result<R, T> {
        let count = self.partitions.count();
        let Some(home) = home.filter(|home| count > 1 && *home < count.min(u64::BITS)) else {
            return Err(value);
        };
        // The audit ends the call before this one with everything held, as `&mut self` calls
        // end theirs when the next one starts.
        #[cfg(test)]
        {
            let all = if count >= u64::BITS { u64::MAX } else { (1 << count) - 1 };
            let mut guards = self.lock_partitions(all);
            if let Some(mut flow) = self.part_flow(0, &mut guards) {
                flow.close_audited_call();
            }
        }
        let mut held = 1u64 << home;
        loop {
            let mut guards = self.lock_partitions(held);
            let Some(mut flow) = self.part_flow(home, &mut guards) else {
                return Err(value);
            };
            // Planned on the view the call runs on: plans only read.
            match plan(&flow) {
                CallScope::Node => return Err(value),
                CallScope::Partitions(mask) if mask & !held != 0 => held |= mask,
                CallScope::Partitions(_) => {
                    let result = call(&mut flow, value);
                    // The call ends here, with every partition it reached still held.
                    #[cfg(test)]
                    {
                        self.node.audit.borrow_mut().made_on_partitions();
                        flow.close_audited_call();
                    }
                    return Ok(result);
                }
            }
        }
    }

    /// The partitions of `held` (one bit each), locked in partition order.
    fn lock_partitions(&self, held: u64) -> Guards<'_> {
        (0..self.partitions.count().min(u64::BITS))
            .filter(|cpt| held & 1 << cpt != 0)
            .filter_map(|cpt| Some((cpt, lock(self.parts.get(cpt)?))))
            .collect()
    }

    /// The view of a call entering on partition `home` that holds the partitions of
    /// `guards` (`home` among them) and reads the node part.
    fn part_flow<'g>(&'g self, home: u32, guards: &'g mut Guards<'_>) -> Option<PartFlow<'g>> {
        let partitions = KeyPartitions::new(self.partitions.count());
        let mut call: Option<&'g mut CallState> = None;
        let mut held = Held::default();
        for (cpt, guard) in guards.iter_mut() {
            let Partition { call: state, shares } = &mut **guard;
            if *cpt == home {
                call = Some(state);
            }
            held.add(partitions, *cpt, shares);
        }
        let Held {
            ni_shares: Some(ni_shares),
            match_tables: Some(match_tables),
            mes: Some(mes),
            mds: Some(mds),
            msgs: Some(msgs),
            trackers: Some(trackers),
            router_pools: Some(router_pools),
            outputs: Some(outputs),
            stats: Some(stats),
            peer_nis: Some(peer_nis),
        } = held
        else {
            return None;
        };
        Some(View {
            interface_cookie: self.interface_cookie,
            pid: self.pid,
            limits: &self.limits,
            partitions: self.partitions,
            call: call?,
            node: &self.node,
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
        })
    }
}

/// The partitions a call holds, locked, each with its number, in partition order.
type Guards<'e> = smallvec::SmallVec<[(u32, MutexGuard<'e, Partition>); 2]>;

/// The shares of the partitions a call holds, gathered one partition at a time.
#[derive(Default)]
struct Held<'g> {
    ni_shares: Option<Shares<'g, Exclusive, crate::engine::ni::NiShares>>,
    match_tables: Option<Shares<'g, Exclusive, crate::engine::portal::MatchTables>>,
    mes: Option<Shares<'g, Exclusive, crate::engine::me::Mes>>,
    mds: Option<Shares<'g, Exclusive, crate::engine::md::Mds>>,
    msgs: Option<Shares<'g, Exclusive, crate::engine::msg::Messages>>,
    trackers: Option<Shares<'g, Exclusive, crate::engine::tracker::Trackers>>,
    router_pools: Option<Shares<'g, Exclusive, crate::engine::routes::RouterPools>>,
    outputs: Option<Shares<'g, Exclusive, crate::engine::outputs::Outputs>>,
    stats: Option<Shares<'g, Exclusive, crate::engine::stats::GlobalStats>>,
    peer_nis: Option<Shares<'g, Exclusive, crate::engine::peer::PeerNis>>,
}

impl<'g> Held<'g> {
    fn add(&mut self, partitions: KeyPartitions, cpt: u32, shares: &'g mut PartitionShares) {
        let PartitionShares {
            msgs,
            mds,
            mes,
            trackers,
            counters,
            outputs,
            nis,
            portals,
            router_pools,
            peer_nis,
        } = shares;
        hold(&mut self.ni_shares, partitions, cpt, nis);
        hold(&mut self.match_tables, partitions, cpt, portals);
        hold(&mut self.mes, partitions, cpt, mes);
        hold(&mut self.mds, partitions, cpt, mds);
        hold(&mut self.msgs, partitions, cpt, msgs);
        hold(&mut self.trackers, partitions, cpt, trackers);
        hold(&mut self.router_pools, partitions, cpt, router_pools);
        hold(&mut self.outputs, partitions, cpt, outputs);
        hold(&mut self.stats, partitions, cpt, counters);
        hold(&mut self.peer_nis, partitions, cpt, peer_nis);
    }
}

fn hold<'g, P>(
    shares: &mut Option<Shares<'g, Exclusive, P>>,
    partitions: KeyPartitions,
    cpt: u32,
    share: &'g mut P,
) {
    match shares {
        Some(shares) => shares.hold(cpt, share),
        None => *shares = Some(Shares::one(partitions, cpt, share)),
    }
}
