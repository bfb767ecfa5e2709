//! The send path: initiating a PUT or GET, selection (in `select.rs`), commit, credits, resend,
//! and the loopback LND.
//!
//! lustre: lnet/lnet/lib-move.c (`LNetPut`, `LNetGet`, `lnet_send`, `lnet_select_pathway`,
//! `lnet_handle_lo_send`, `lnet_post_send_locked`, `lnet_return_tx_credits_locked`,
//! `lnet_resend_pending_msgs`), lnet/lnet/lo.c (`lolnd_send`, `lolnd_recv`),
//! docs/protocol/semantics.md §2.3, §2.4, §3, §4.4, §11.

use crate::engine::view::{Access, Exclusive, NodeAccess, View};
use std::time::Duration;

use crate::addr::Nid;
use crate::engine::call::Work;
use crate::engine::error::{InitiateError, MdError};
use crate::engine::event::{EventKind, EventStatus, EventTemplate};
use crate::engine::health::HealthStatus;
use crate::engine::md::{MdHandle, MdOptions, TrackedRequest};
use crate::engine::memory::copy_between;
use crate::engine::msg::{Credit, Message, Phase};
use crate::engine::ni::{LndKind, NiId};
use crate::engine::node::RecvAction;
use crate::engine::select::{Path, SelectError};
use crate::engine::slab::Key;
use crate::wire::header::Header;

/// Bytes the peer NI's queue is charged per message on top of its payload (`lpni_txqnob`
/// counts the 72-byte classic header).
const HEADER_CHARGE: u32 = 72;

impl<A: Access, N: NodeAccess> View<'_, A, N> {
    /// The MD whose response tracker a message serves: an initiator's PUT or GET, or a
    /// fast-failover copy of one.
    pub(super) fn tracked_md_of(&self, key: Key) -> Option<Key> {
        let message = self.msgs.get(key)?;
        message.md.filter(|_| message.event == Some(EventKind::Send)).or(message.tracked_md)
    }

    /// Why [`post_send`](Self::post_send) would fail message `key` instead of posting it.
    /// lustre: lnet_check_message_drop(): routers ignore deadlines (they cannot know the
    /// upper layers' timeouts) but drop what goes to a peer NI that is not UP.
    pub(super) fn post_drop(
        &self,
        key: Key,
        message: &Message,
    ) -> Option<(HealthStatus, EventStatus)> {
        if !message.routing && self.call.now > message.deadline {
            return Some((HealthStatus::NetworkTimeout, EventStatus::TimedOut));
        }
        if message.routing && self.routed_peer_dead(key) {
            return Some((HealthStatus::RemoteDropped, EventStatus::HostUnreachable));
        }
        if message.md.and_then(|md| self.mds.get(md)).is_some_and(|md| md.aborted) {
            return Some((HealthStatus::LocalAborted, EventStatus::Canceled));
        }
        None
    }

    /// The per-transmission deadline span (docs/protocol/semantics.md §4.4): with an LND timeout,
    /// `lnd_timeout * (retry_count + 1) + 1 s`, else the transaction timeout.
    /// lustre: lib-move.c `lnet_msg_commit()` / `lnet_get_lnd_timeout()`.
    pub(super) fn transmission_timeout(&self, ni: NiId) -> Duration {
        let Some(local) = self.node.nis.get(ni) else {
            return self.node.tunables.transaction_timeout;
        };
        if local.lnd == LndKind::Lo {
            return self.node.tunables.transaction_timeout;
        }
        let lnd_timeout = local.lnd_timeout.unwrap_or_else(|| self.node.tunables.lnd_timeout());
        if lnd_timeout.is_zero() {
            return self.node.tunables.transaction_timeout;
        }
        lnd_timeout * (self.node.tunables.effective_retry_count() + 1) + Duration::from_secs(1)
    }

    // ------------------------------------------------------------ initiating

    /// Checks an MD for `LNetPut`/`LNetGet` (`-ENOENT` cases) and the source NID.
    pub(super) fn initiator_md(
        &self,
        md: MdHandle,
        source: Option<Nid>,
    ) -> Result<Key, InitiateError> {
        let key = self.live_md(md).map_err(|error| match error {
            MdError::UnknownMd => InitiateError::UnknownMd,
            MdError::UnlinkedMd => InitiateError::UnlinkedMd,
            // Only a used-up or unlinked MD is lent.
            MdError::MemoryLent => InitiateError::InactiveMd,
        })?;
        let md = self.mds.get(key).ok_or(InitiateError::UnknownMd)?;
        if md.me.is_some() {
            return Err(InitiateError::AttachedMd);
        }
        if md.threshold.is_zero() {
            return Err(InitiateError::InactiveMd);
        }
        if let Some(nid) = source.filter(|nid| !nid.is_any()) {
            if self.ni_for_nid(nid).is_none() {
                return Err(InitiateError::NotLocalSource(nid));
            }
        }
        if !self.message_room(self.mds.partition_of(key).unwrap_or(0)) {
            return Err(InitiateError::TooManyMessages);
        }
        Ok(key)
    }

    /// The MD's length and whether this operation gets a response tracker
    /// (`lnet_response_tracking` and the per-MD override, docs/protocol/semantics.md §4.4).
    pub(super) fn md_send_profile(&self, md_key: Key, ack: bool, get: bool) -> (u32, bool) {
        let Some(md) = self.mds.get(md_key) else {
            return (0, false);
        };
        let wants_response = get || ack;
        let track = if md.options.contains(MdOptions::TRACK_RESPONSE) {
            wants_response
        } else if md.options.contains(MdOptions::NO_TRACK_RESPONSE) {
            false
        } else if get {
            self.node.tunables.response_tracking.tracks_get()
        } else {
            ack && self.node.tunables.response_tracking.tracks_put_with_ack()
        };
        (md.length, track)
    }
}

impl<N: NodeAccess> View<'_, Exclusive, N> {
    /// `lnet_send` / `lnet_select_pathway`: loopback shortcut, peer NI, discovery gate, path
    /// selection, commit, then post for credits. Failures before commit end the message with
    /// a SEND-side status and no resend.
    pub(super) fn send(&mut self, key: Key, source: Option<Nid>) {
        let Some(message) = self.msgs.get(key) else {
            self.record_violation(|| format!("send of missing message {key:?}"));
            return;
        };
        let dest = message.header.dest_nid;
        // lustre: lnet_select_pathway() shortcuts only 0@lo through the loopback LND. A
        // message to one of our own network NIDs goes through that NI's LND to ourselves,
        // with a peer for the NID (a "self peer"), as the kernel's does.
        if dest == Nid::LO_0 {
            self.commit_lo(key);
            return;
        }
        let credits = self.node.nis.peer_credits_for(dest);
        let Ok(destination) = self.peer_ni_or_create(dest, credits) else {
            self.finalize_tx(key, HealthStatus::LocalError, EventStatus::NoMemory, true);
            return;
        };
        // lustre: lnet_select_pathway() runs discovery once the peer NI exists, before any
        // credit is taken; the message may wait on the peer's queue.
        if self.hold_for_discovery(key, destination) {
            return;
        }
        let selected = self.select_path(key, destination, source);
        let path = match selected {
            Ok(path) => path,
            Err(SelectError::HostUnreachable) => {
                // lustre: selection failure -EHOSTUNREACH (reported in the SEND event).
                self.finalize_tx(
                    key,
                    HealthStatus::RemoteError,
                    EventStatus::HostUnreachable,
                    true,
                );
                return;
            }
            Err(SelectError::NoSource) => {
                self.finalize_tx(key, HealthStatus::LocalError, EventStatus::HostUnreachable, true);
                return;
            }
        };
        // lustre: lnet_handle_find_routed_path(): with the router checker off, the gateway
        // is discovered on use, and the message waits for it as for its destination.
        if path.routed_to.is_some()
            && self.node.tunables.router.alive_router_check_interval.is_zero()
            && self.hold_for_discovery(key, path.peer_ni)
        {
            return;
        }
        self.commit(key, path);
        self.post_send(key);
    }

    /// `lnet_handle_send`: round-robin stamps, the message's NI and peer NI, header NIDs
    /// (the destination becomes the chosen peer NI, or the final one when routed; a forwarded
    /// message keeps its originator's source), deadline, the tracker's next hop.
    fn commit(&mut self, key: Key, path: Path) {
        let (ni, peer_ni) = (path.ni, path.peer_ni);
        self.stamp_path(ni, peer_ni);
        if let Some(final_dst) = path.routed_to {
            self.stamp_destination(final_dst);
        }
        let deadline = self.call.now + self.transmission_timeout(ni);
        let destination = path.routed_to.unwrap_or(peer_ni);
        let (Some(local_nid), Some(peer_nid)) =
            (self.ni_nid(ni), self.node.peers.ni(&self.peer_nis, destination).map(|p| p.nid))
        else {
            return;
        };
        let now = self.call.now;
        let Some(message) = self.msgs.get_mut(key) else {
            return;
        };
        if !message.routing {
            message.header.src_nid = local_nid;
        }
        message.header.dest_nid = peer_nid;
        // Only an initiator's own PUT/GET reports us as initiator; a REPLY keeps the GET event
        // built from the request (lustre: lib-move.c lnet_parse_get(), lnet_build_msg_event()).
        if message.event == Some(EventKind::Send) {
            message.template.initiator.nid = local_nid;
            message.template.source = local_nid;
            message.template.sender = local_nid;
        }
        message.ni = ni;
        message.peer_ni = Some(peer_ni);
        message.deadline = deadline;
        if message.committed_at.is_none() {
            message.committed_at = Some(now);
        }
        // The tracker blames the next hop if the response never comes.
        if let Some(md) = self.tracked_md_of(key) {
            if let Some(tracker) = self.mds.get_mut(md).and_then(|md| md.tracker.as_mut()) {
                tracker.next_hop = Some(peer_ni);
            }
        }
    }

    /// `lnet_post_send_locked`: drop checks, then peer NI credit, then NI credit, then the LND.
    pub(super) fn post_send(&mut self, key: Key) {
        let Some(message) = self.msgs.get(key) else {
            self.record_violation(|| format!("post of missing message {key:?}"));
            return;
        };
        if let Some((health, status)) = self.post_drop(key, message) {
            self.finalize_tx(key, health, status, true);
            return;
        }
        let (ni, peer_ni, length) = (message.ni, message.peer_ni, message.length);
        if message.peer_credit == Credit::None {
            if let Some(peer) =
                peer_ni.and_then(|id| self.node.peers.ni_mut(&mut self.peer_nis, id))
            {
                let charge = length.saturating_add(HEADER_CHARGE);
                peer.queued_bytes += u64::from(charge);
                let granted = peer.credits.acquire(key) == crate::engine::credits::Acquire::Granted;
                let Some(message) = self.msgs.get_mut(key) else {
                    return;
                };
                message.charged_bytes = charge;
                if granted {
                    message.peer_credit = Credit::Held;
                } else {
                    message.peer_credit = Credit::Waiting;
                    message.phase = Phase::WaitPeerCredit;
                    return;
                }
            }
        }
        let Some(message) = self.msgs.get(key) else {
            return;
        };
        if message.ni_credit == Credit::None {
            // lustre: the queue is `ni->ni_tx_queues[msg->msg_tx_cpt]`, the partition of the
            // next hop on this NI (lib-move.c lnet_handle_send(): lnet_cpt_of_nid_locked()).
            let next_hop = peer_ni
                .and_then(|id| self.node.peers.ni(&self.peer_nis, id))
                .map_or(message.header.dest_nid, |peer| peer.nid);
            let cpt = self.cpt_of_nid(&next_hop, ni);
            if let Some(pool) = self.credit_pool_mut(ni, cpt) {
                let granted = pool.acquire(key) == crate::engine::credits::Acquire::Granted;
                let Some(message) = self.msgs.get_mut(key) else {
                    return;
                };
                message.tx_cpt = cpt;
                if granted {
                    message.ni_credit = Credit::Held;
                } else {
                    message.ni_credit = Credit::Waiting;
                    message.phase = Phase::WaitNiCredit;
                    return;
                }
            }
        }
        if let Some(message) = self.msgs.get_mut(key) {
            message.phase = Phase::TxReady;
            self.queue_transmit(key);
        }
    }

    /// A credit waiter was granted its credit: post it again, unless it was withdrawn
    /// meanwhile (fast failover, a lost link) and is waiting for selection instead.
    pub(super) fn resume_post(&mut self, key: Key) {
        let waiting = self
            .msgs
            .get(key)
            .is_some_and(|m| matches!(m.phase, Phase::WaitPeerCredit | Phase::WaitNiCredit));
        if waiting {
            self.post_send(key);
        }
    }

    /// `lnet_return_tx_credits_locked`: give back what `key` holds; a waiter at the head of a
    /// queue now holds the credit and is posted again.
    pub(super) fn return_credits(&mut self, key: Key) {
        let Some(message) = self.msgs.get_mut(key) else {
            return;
        };
        let (ni, peer_ni, cpt) = (message.ni, message.peer_ni, message.tx_cpt);
        let ni_credit = std::mem::replace(&mut message.ni_credit, Credit::None);
        let peer_credit = std::mem::replace(&mut message.peer_credit, Credit::None);
        let charged = std::mem::take(&mut message.charged_bytes);
        if ni_credit == Credit::Waiting || peer_credit == Credit::Waiting {
            self.record_violation(|| {
                format!("message {key:?} finalized while waiting for credits")
            });
        }
        if ni_credit == Credit::Held {
            let next = self.credit_pool_mut(ni, cpt).and_then(|pool| pool.release());
            if let Some(waiter) = next {
                self.grant(waiter, true);
            }
        }
        if peer_credit != Credit::None {
            if let Some(peer) =
                peer_ni.and_then(|id| self.node.peers.ni_mut(&mut self.peer_nis, id))
            {
                peer.queued_bytes = peer.queued_bytes.saturating_sub(u64::from(charged));
                if peer_credit == Credit::Held {
                    if let Some(waiter) = peer.credits.release() {
                        self.grant(waiter, false);
                    }
                }
            }
        }
    }

    fn grant(&mut self, waiter: Key, ni_credit: bool) {
        let Some(message) = self.msgs.get_mut(waiter) else {
            self.record_violation(|| format!("credit granted to missing message {waiter:?}"));
            return;
        };
        if ni_credit {
            message.ni_credit = Credit::Held;
        } else {
            message.peer_credit = Credit::Held;
        }
        self.call.work.push_back(Work::Post(waiter));
    }

    /// The monitor thread's resend: run selection again (deadline renewed on commit), from
    /// the source the user asked for (`msg_src_nid_param`).
    pub(super) fn resend(&mut self, key: Key) {
        let Some(message) = self.msgs.get_mut(key).filter(|m| m.phase == Phase::ResendQueued)
        else {
            return;
        };
        // A resend selects from the original target (Lustre's `msg_target`), not from the
        // peer NI the last attempt went to, which may since have been deleted (a new peer
        // would be made for it). lustre: lib-move.c lnet_resend_pending_msgs_locked(),
        // lnet_select_pathway().
        let target = message.template.target.nid;
        if message.response_ni.is_none() && !target.is_any() {
            message.header.dest_nid = target;
        }
        let source = message.source;
        self.send(key, source);
    }

    /// `lnet_handle_lo_send`: both NIDs become `0@lo`, no credits, and the loopback LND takes it.
    fn commit_lo(&mut self, key: Key) {
        let deadline = self.call.now + self.node.tunables.transaction_timeout;
        let Some(message) = self.msgs.get_mut(key) else {
            return;
        };
        message.header.dest_nid = Nid::LO_0;
        message.header.src_nid = Nid::LO_0;
        message.template.initiator.nid = Nid::LO_0;
        message.template.source = Nid::LO_0;
        message.template.sender = Nid::LO_0;
        message.ni = NiId::LOOPBACK;
        message.peer_ni = None;
        message.deadline = deadline;
        message.phase = Phase::LoQueued;
        self.call.work.push_back(Work::Lo(key));
    }

    /// `lolnd_send`: parse our own message as if it had arrived on `0@lo`.
    pub(super) fn lo_send(&mut self, tx: Key) {
        let Some(message) = self.msgs.get(tx).filter(|message| message.phase == Phase::LoQueued)
        else {
            return;
        };
        let header = message.header;
        match self.parse(NiId::LOOPBACK, Nid::LO_0, &header, Some(tx)) {
            RecvAction::Deliver { rx, .. } => self.lo_complete(rx.0, tx),
            RecvAction::Discard { .. } => {
                self.finalize_tx(tx, HealthStatus::Ok, EventStatus::Ok, false)
            }
            RecvAction::Delay { rx } => {
                if let Some(message) = self.msgs.get_mut(tx) {
                    message.phase = Phase::LoHeld;
                    message.lo_peer = Some(rx.0);
                }
            }
            RecvAction::ProtocolError(error) => {
                self.record_violation(|| format!("loopback message refused: {error}"));
                self.finalize_tx(tx, HealthStatus::LocalError, EventStatus::Io, true);
            }
        }
    }

    /// A delayed loopback receive found its buffer.
    pub(super) fn lo_deliver(&mut self, rx: Key) {
        let Some(tx) = self.msgs.get(rx).and_then(|message| message.lo_peer) else {
            return;
        };
        self.lo_complete(rx, tx);
    }

    /// `lolnd_recv`: copy the sender's payload into the receiver's MD, then finalize the
    /// receive and then the send, in that order as lo.c does.
    fn lo_complete(&mut self, rx: Key, tx: Key) {
        let copied = self.lo_copy(rx, tx);
        let (health, status) = if copied {
            (HealthStatus::Ok, EventStatus::Ok)
        } else {
            (HealthStatus::LocalError, EventStatus::Io)
        };
        if !copied {
            self.record_violation(|| format!("loopback copy {tx:?} -> {rx:?} out of range"));
        }
        if let Some(message) = self.msgs.get_mut(rx) {
            message.lo_peer = None;
        }
        self.finalize_rx(rx, health, status);
        self.finalize_tx(tx, health, status, true);
    }

    fn lo_copy(&mut self, rx: Key, tx: Key) -> bool {
        let (Some(receiver), Some(sender)) = (self.msgs.get(rx), self.msgs.get(tx)) else {
            return false;
        };
        let length = receiver.length.min(sender.length) as usize;
        if length == 0 {
            return true;
        }
        let (target_offset, source_offset) =
            (receiver.md_offset as usize, sender.md_offset as usize);
        // A fast-failover copy carries its payload privately (its MD may be gone); a copy can
        // reach loopback when the peer NI it was meant for is one of our own NIDs.
        if let (Some(target_md), None, Some(orphan)) =
            (receiver.md, sender.md, sender.orphan.as_deref())
        {
            let Some(md) = self.mds.get_mut(target_md) else {
                return false;
            };
            return copy_between(orphan, source_offset, &mut md.memory, target_offset, length);
        }
        let (Some(target_md), Some(source_md)) = (receiver.md, sender.md) else {
            return false;
        };
        if target_md == source_md {
            let Some(md) = self.mds.get_mut(target_md) else {
                return false;
            };
            let mut bytes = vec![0; length];
            return md.memory.read_at(source_offset, &mut bytes)
                && md.memory.write_at(target_offset, &bytes);
        }
        // Take the target memory out so both regions can be borrowed at once.
        let Some(mut target) = self.mds.get_mut(target_md).map(|md| std::mem::take(&mut md.memory))
        else {
            return false;
        };
        let copied = self.mds.get(source_md).is_some_and(|md| {
            copy_between(&md.memory, source_offset, &mut target, target_offset, length)
        });
        if let Some(md) = self.mds.get_mut(target_md) {
            md.memory = target;
        }
        copied
    }

    /// Common tail of `put` and `get`: attach the MD, build the message, send it. Deferred
    /// work is left to the caller (LNet's own sends run inside the work loop). `recovery`
    /// marks a recovery ping (`msg_recovery`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn initiate(
        &mut self,
        md_key: Key,
        header: Header,
        template: EventTemplate,
        length: u32,
        track: bool,
        source: Option<Nid>,
        recovery: bool,
    ) -> Result<(), InitiateError> {
        let message = Message {
            event: Some(EventKind::Send),
            template,
            md: Some(md_key),
            source: source.filter(|nid| !nid.is_any()),
            recovery,
            ..Message::blank(header, length)
        };
        let home = self.mds.partition_of(md_key).unwrap_or(0);
        let key = self.alloc_message(home, message).ok_or(InitiateError::TooManyMessages)?;
        if let Some(md) = self.mds.get_mut(md_key) {
            md.attach_operation();
        }
        if track {
            let fresh = self.attach_tracker(md_key);
            self.keep_request(md_key, &header, source, length, !recovery && fresh);
        }
        self.send(key, source.filter(|nid| !nid.is_any()));
        Ok(())
    }

    /// Fast failover keeps what a copy of the request needs (`keep`); a tracker shared by
    /// several operations keeps nothing (a copy would be ambiguous).
    fn keep_request(
        &mut self,
        md_key: Key,
        header: &Header,
        source: Option<Nid>,
        length: u32,
        keep: bool,
    ) {
        let enabled = self.failover_enabled() && keep;
        let request = enabled.then(|| {
            let request = TrackedRequest {
                header: *header,
                source: source.filter(|nid| !nid.is_any()),
                length,
                copies: 0,
            };
            self.trackers.boxed_request(md_key, request)
        });
        let Some(tracker) = self.mds.get_mut(md_key).and_then(|md| md.tracker.as_mut()) else {
            return;
        };
        tracker.request = request;
    }
}
