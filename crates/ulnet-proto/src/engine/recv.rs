//! The receive path: header checks, matching, lazy-portal delay, and response lookup.
//!
//! lustre: lnet/lnet/lib-move.c (`lnet_parse`, `lnet_parse_put`, `lnet_parse_get`,
//! `lnet_parse_ack`, `lnet_parse_reply`, `lnet_drop_message`), lib-ptl.c (`lnet_ptl_match_md`,
//! `lnet_ptl_attach_md`, `lnet_clear_lazy_portal`), docs/protocol/semantics.md §1.6, docs/protocol/wire.md §4.4-4.5.

use crate::addr::Nid;
use crate::engine::call::Work;
use crate::engine::dedupe::{DEDUPE_WINDOW, RESEND_COOKIE_FLAG};
use crate::engine::dedupe::{Delivery, Verdict};
use crate::engine::error::ParseError;
use crate::engine::event::{EventKind, EventTemplate};
use crate::engine::health::HealthStatus;
use crate::engine::md::MdHandle;
use crate::engine::md::MdOptions;
use crate::engine::me::ProcessId;
use crate::engine::msg::{Message, Phase, RxId};
use crate::engine::ni::NiId;
use crate::engine::node::{RecvAction, Resume};
use crate::engine::peer::PeerNiId;
use crate::engine::portal::{MatchInfo, MatchPlace, MdMatch, PortalMatch, try_match_md};
use crate::engine::slab::Key;
use crate::engine::view::{Access, Exclusive, Flow, NodeAccess, View};
use crate::time::Time;
use crate::wire::header::{Body, Header, LNET_MTU, MsgType, WireHandle};

impl<A: Access, N: NodeAccess> View<'_, A, N> {
    /// Where a received message stands when its portal picks a match table: what the kernel
    /// reads from the parsing thread and the message (lib-move.c `lnet_parse_put()`,
    /// `lnet_parse_get()`: `mi_cpt`; lib-ptl.c `lnet_mt_of_match()`). The kernel parses on
    /// the thread of the previous hop's partition on the receiving NI, which is the
    /// partition the runtime's I/O thread for that connection serves (decision 0029).
    fn match_place(&self, key: Key) -> MatchPlace {
        let Some(message) = self.msgs.get(key).filter(|_| self.partitions.count() > 1) else {
            return MatchPlace::default();
        };
        let initiator = message.template.initiator.nid;
        self.place_of(message.ni, message.template.sender, initiator, &message.header)
    }

    /// [`match_place`](Self::match_place) of a header from `sender` on `ni` whose initiator
    /// (the source's primary NID) is `initiator`.
    pub(super) fn place_of(
        &self,
        ni: NiId,
        sender: Nid,
        initiator: Nid,
        header: &Header,
    ) -> MatchPlace {
        MatchPlace {
            current: self.cpt_of_nid(&sender, ni),
            routed: header.src_nid.net() != header.dest_nid.net(),
            initiator_on_ni: self.cpt_of_nid(&initiator, ni),
            initiator: self.node.nis.cpt_of_nid_any(&self.partitions, &initiator),
            rotor: self.node.tunables.portal_rotor,
        }
    }

    /// The MD a response names, if it is one of this incarnation's (live or not).
    pub(super) fn response_md_key(&self, handle: WireHandle) -> Option<Key> {
        if handle.interface_cookie & !RESEND_COOKIE_FLAG != self.interface_cookie {
            return None;
        }
        MdHandle(handle.object_cookie).key()
    }

    /// `lnet_wire_handle2md` plus `lnet_parse_ack/reply`'s checks: our incarnation, a live
    /// MD, active, and not attached to an ME.
    fn response_md(&self, handle: WireHandle) -> Option<Key> {
        // A fast-failover copy's response carries the flag (failover.rs).
        let key = self.response_md_key(handle)?;
        let md = self.mds.get(key)?;
        (!md.zombie && !md.threshold.is_zero() && md.me.is_none()).then_some(key)
    }

    /// An rx commit sets the deadline from the rx NI as a send commit does (docs/protocol/semantics.md §4.4).
    fn rx_deadline(&self, ni: NiId) -> Time {
        self.call.now + self.transmission_timeout(ni)
    }
}

impl<N: NodeAccess> View<'_, Exclusive, N> {
    /// `lnet_parse`: checks, peer bookkeeping, then dispatch by type. `lo_tx` is the sending
    /// message when the loopback LND is the caller.
    pub(super) fn parse(
        &mut self,
        ni: NiId,
        from: Nid,
        header: &Header,
        lo_tx: Option<Key>,
    ) -> RecvAction {
        // A removed NI receives nothing more (its driver is closing its connections).
        let Some(local) = self.node.nis.get(ni).filter(|local| !local.removed) else {
            self.count(|counters| counters.protocol_errors += 1);
            return RecvAction::ProtocolError(ParseError::UnknownNi);
        };
        let (local_nid, peer_credits) = (local.nid, local.tunables.peer_credits);
        if let Err(error) = check_header(header) {
            self.count(|counters| counters.protocol_errors += 1);
            return RecvAction::ProtocolError(error);
        }
        let msg_type = header.body.msg_type();
        let payload = header.payload_length;
        let for_me = header.dest_nid == local_nid;
        if !for_me {
            if header.dest_nid.net() == local_nid.net() {
                self.count(|counters| counters.protocol_errors += 1);
                return RecvAction::ProtocolError(ParseError::ShouldHaveBeenDirect(
                    header.dest_nid,
                ));
            }
            if self.ni_for_nid(header.dest_nid).is_some() {
                self.count(|counters| counters.protocol_errors += 1);
                return RecvAction::ProtocolError(ParseError::WrongLocalNi(header.dest_nid));
            }
            if !self.node.routes.state.forwards() {
                // "Dropping message for NID (routing not enabled)": payload skipped.
                self.count_drop(ni, None, msg_type, payload);
                return RecvAction::Discard { length: payload };
            }
        }
        // lustre: lib-move.c lnet_parse() asks the drop rules before a message exists:
        // the payload is skipped and the sender learns nothing (net_fault.c).
        let now = self.call.now;
        if self.node.faults.has_drop_rules()
            && self.on_node("a drop rule", |flow| {
                flow.node.faults.drop_on_receive(header, local_nid, now)
            }) == Some(true)
        {
            self.count_drop(ni, None, msg_type, payload);
            return RecvAction::Discard { length: payload };
        }
        // lustre: lnet_parse() counts an incoming LNet ping as proof a router's net is alive.
        if lo_tx.is_none() && self.counts_as_router_ping(header) {
            self.on_node("a router's ping", |flow| flow.router_ping_received(ni));
        }
        let peer_ni = if lo_tx.is_some() {
            None
        } else {
            match self.peer_ni_or_create(from, peer_credits) {
                Ok(id) => Some(id),
                Err(_) => {
                    self.count_drop(ni, None, msg_type, payload);
                    return RecvAction::Discard { length: payload };
                }
            }
        };
        // lustre: lnet_parse() checks a message that came through a gateway (its source on
        // another net): a dead gateway lives again, and an asymmetric route may be refused.
        if let Some(from_ni) = peer_ni {
            if header.src_nid.net() != from.net()
                && self.check_asymmetric_route(from_ni, header.src_nid, for_me)
            {
                self.count_drop(ni, peer_ni, msg_type, payload);
                return RecvAction::Discard { length: payload };
            }
        }
        if let Some(peer) = peer_ni.and_then(|id| self.node.peers.ni_mut(&mut self.peer_nis, id)) {
            peer.last_alive = Some(self.call.now);
            peer.alive = true;
            // lustre: a message from a peer NI says it is UP (`lpni_ns_status`); only gateway
            // liveness reads it here.
            peer.status = crate::wire::ping::LNET_NI_STATUS_UP;
        }
        if let Some(peer_ni) = peer_ni.filter(|_| self.failover_enabled()) {
            self.watch_rx(peer_ni, ni);
        }
        let template = EventTemplate {
            initiator: ProcessId::new(self.node.peers.primary_nid(header.src_nid), header.src_pid),
            source: header.src_nid,
            sender: from,
            target: ProcessId::new(header.dest_nid, header.dest_pid),
            rlength: payload,
            ..EventTemplate::EMPTY
        };
        let message = Message {
            tx: false,
            phase: Phase::Receiving,
            template,
            ni,
            peer_ni,
            deadline: self.rx_deadline(ni),
            lo_peer: lo_tx,
            routing: !for_me,
            ..Message::blank(*header, 0)
        };
        let home = if self.partitions.count() > 1 { self.cpt_of_nid(&from, ni) } else { 0 };
        let Some(key) = self.alloc_message(home, message) else {
            self.count_drop(ni, peer_ni, msg_type, payload);
            return RecvAction::Discard { length: payload };
        };
        if lo_tx.is_none() && for_me && self.failover_enabled() {
            let arrival =
                self.node.failover.deliveries().arrive(self.call.now, header, DEDUPE_WINDOW);
            match arrival {
                Some(Verdict::Fresh(fingerprint)) => {
                    if let Some(message) = self.msgs.get_mut(key) {
                        message.delivery = Some(fingerprint);
                    }
                }
                Some(Verdict::Duplicate(delivery)) => return self.duplicate(key, delivery),
                None => {}
            }
        }
        // lustre: lib-move.c lnet_parse() asks the delay rules once the message is
        // committed: it waits, its payload unread, until the rule lets it go (net_fault.c
        // delay_rule_match()). Loopback messages are not delayed (the loopback LND's send
        // would have to wait with them).
        let now = self.call.now;
        if lo_tx.is_none()
            && self.node.faults.has_delay_rules()
            && self.on_node("a delay rule", |flow| flow.node.faults.delay(header, key, false, now))
                == Some(true)
        {
            if let Some(message) = self.msgs.get_mut(key) {
                message.phase = Phase::FaultHeld;
            }
            return RecvAction::Delay { rx: RxId(key) };
        }
        self.parse_body(key, header)
    }

    /// A receive a delay rule held goes on where `parse` left it: its answer reaches the
    /// driver as a [`Resume`], unless it now waits on a lazy portal (which resumes it later).
    /// lustre: net_fault.c `delayed_msg_process()` calling lib-move.c `lnet_parse_local()`.
    pub(super) fn resume_fault_held(&mut self, key: Key) {
        let Some(header) = self.msgs.get(key).map(|message| message.header) else {
            return;
        };
        match self.parse_body(key, &header) {
            RecvAction::Delay { .. } => {}
            action => self.queue_resume(Resume { rx: RxId(key), action }),
        }
    }

    /// The per-type part of `lnet_parse_local()`: match and commit message `key`; a message
    /// for another node is forwarded instead (`lnet_parse_forward_locked`).
    fn parse_body(&mut self, key: Key, header: &Header) -> RecvAction {
        if self.msgs.get(key).is_some_and(|message| message.routing) {
            if !self.node.routes.state.forwards() {
                self.drop_rx(key);
                return RecvAction::Discard { length: header.payload_length };
            }
            return self.post_routed_recv(key);
        }
        match header.body {
            Body::Put { ack_wmd, match_bits, hdr_data, ptl_index, .. } => {
                self.parse_put(key, ack_wmd, match_bits, hdr_data, ptl_index)
            }
            Body::Get { return_wmd, match_bits, ptl_index, src_offset, sink_length } => {
                self.parse_get(key, return_wmd, match_bits, ptl_index, src_offset, sink_length)
            }
            Body::Ack { dst_wmd, match_bits, mlength } => {
                self.parse_ack(key, dst_wmd, match_bits, mlength)
            }
            Body::Reply { dst_wmd } => self.parse_reply(key, dst_wmd),
            // check_header refused HELLO above.
            Body::Hello { .. } => {
                self.drop_rx(key);
                RecvAction::ProtocolError(ParseError::HelloMessage)
            }
        }
    }

    fn parse_put(
        &mut self,
        key: Key,
        ack_wmd: WireHandle,
        match_bits: u64,
        hdr_data: u64,
        portal: u32,
    ) -> RecvAction {
        let Some(message) = self.msgs.get_mut(key) else {
            return RecvAction::Discard { length: 0 };
        };
        message.event = Some(EventKind::Put);
        message.template.portal = portal;
        message.template.match_bits = match_bits;
        message.template.hdr_data = hdr_data;
        let payload = message.header.payload_length;
        let info = put_info(message);
        let place = self.match_place(key);
        let Some(table) = self.node.portals.get(portal as usize) else {
            self.drop_rx(key);
            return RecvAction::Discard { length: payload };
        };
        match table.match_md(&mut self.match_tables, &self.mes, &mut self.mds, &info, &place) {
            PortalMatch::Ok { md, offset: md_offset, mlength, .. } => {
                self.commit_match(key, md, md_offset, mlength, ack_wmd);
                RecvAction::Deliver {
                    rx: RxId(key),
                    length: mlength,
                    discard: payload.saturating_sub(mlength),
                }
            }
            PortalMatch::Delay => {
                let limit = self.limits.lazy_queue;
                let delayed = self.on_node("a lazy portal's delayed list", |flow| {
                    let table = flow.node.portals.get_mut(portal as usize);
                    let table = table.filter(|table| table.delayed().len() < limit)?;
                    table.delayed_mut().push_back(key);
                    Some(())
                });
                if delayed.flatten().is_none() {
                    self.drop_rx(key);
                    return RecvAction::Discard { length: payload };
                }
                if let Some(message) = self.msgs.get_mut(key) {
                    message.phase = Phase::Delayed;
                }
                RecvAction::Delay { rx: RxId(key) }
            }
            PortalMatch::Drop(_) => {
                self.drop_rx(key);
                RecvAction::Discard { length: payload }
            }
        }
    }

    fn parse_get(
        &mut self,
        key: Key,
        return_wmd: WireHandle,
        match_bits: u64,
        portal: u32,
        src_offset: u32,
        sink_length: u32,
    ) -> RecvAction {
        let Some(message) = self.msgs.get_mut(key) else {
            return RecvAction::Discard { length: 0 };
        };
        message.event = Some(EventKind::Get);
        message.template.portal = portal;
        message.template.match_bits = match_bits;
        message.template.rlength = sink_length;
        let info = MatchInfo {
            initiator: message.template.initiator,
            operation: MdOptions::OP_GET,
            match_bits,
            remote_offset: src_offset,
            rlength: sink_length,
        };
        let place = self.match_place(key);
        let matched = match self.node.portals.get(portal as usize) {
            Some(table) => {
                table.match_md(&mut self.match_tables, &self.mes, &mut self.mds, &info, &place)
            }
            None => PortalMatch::Drop(crate::engine::portal::DropReason::BadPortal),
        };
        let PortalMatch::Ok { md, offset, mlength, .. } = matched else {
            self.drop_rx(key);
            return RecvAction::Discard { length: 0 };
        };
        self.commit_match(key, md, offset, mlength, WireHandle::NONE);
        // The GET is received (no payload): count it, then reuse it as the REPLY, sent back
        // from the receiving NI. The GET event fires when the REPLY send completes.
        self.rx_health(key, HealthStatus::Ok);
        self.count_received(key);
        let pid = self.pid;
        let Some(message) = self.msgs.get_mut(key) else {
            return RecvAction::Discard { length: 0 };
        };
        let request = message.header;
        message.header = Header {
            dest_nid: request.src_nid,
            src_nid: request.dest_nid,
            dest_pid: request.src_pid,
            src_pid: pid,
            payload_length: mlength,
            body: Body::Reply { dst_wmd: return_wmd },
        };
        message.tx = true;
        message.phase = Phase::ResendQueued;
        message.response_ni = Some(message.ni);
        // lustre: lnet_parse_get() replies through the GET's last hop (`msg_from`).
        message.router_hint = message.peer_ni;
        message.lo_peer = None;
        // lustre: lib-move.c lnet_parse_get(): the REPLY leaves from the NI the GET came in
        // on, to exactly its source (`lnet_send(&ni->ni_nid, ...)`).
        let source = (message.ni != NiId::LOOPBACK).then_some(request.dest_nid);
        message.source = source;
        self.send(key, source);
        RecvAction::Discard { length: 0 }
    }

    fn parse_ack(
        &mut self,
        key: Key,
        dst_wmd: WireHandle,
        match_bits: u64,
        mlength: u32,
    ) -> RecvAction {
        let Some(md) = self.response_md(dst_wmd) else {
            // Silent: expected after an unlink.
            self.count(|counters| counters.stale_responses += 1);
            self.drop_rx(key);
            return RecvAction::Discard { length: 0 };
        };
        if let Some(md) = self.mds.get_mut(md) {
            md.attach_operation();
        }
        if let Some(message) = self.msgs.get_mut(key) {
            message.event = Some(EventKind::Ack);
            message.md = Some(md);
            message.template.match_bits = match_bits;
            message.template.mlength = mlength;
            message.template.rlength = mlength;
        }
        self.finalize_rx(key, HealthStatus::Ok, crate::engine::event::EventStatus::Ok);
        RecvAction::Discard { length: 0 }
    }

    fn parse_reply(&mut self, key: Key, dst_wmd: WireHandle) -> RecvAction {
        let Some(payload) = self.msgs.get(key).map(|message| message.header.payload_length) else {
            return RecvAction::Discard { length: 0 };
        };
        let Some(md_key) = self.response_md(dst_wmd) else {
            self.count(|counters| counters.stale_responses += 1);
            self.drop_rx(key);
            return RecvAction::Discard { length: payload };
        };
        let Some(md) = self.mds.get_mut(md_key) else {
            return RecvAction::Discard { length: payload };
        };
        let mlength = payload.min(md.length);
        if mlength < payload && !md.options.contains(MdOptions::TRUNCATE) {
            // "REPLY too big": dropped, the GET will time out.
            self.drop_rx(key);
            return RecvAction::Discard { length: payload };
        }
        md.attach_operation();
        let Some(message) = self.msgs.get_mut(key) else {
            return RecvAction::Discard { length: payload };
        };
        message.event = Some(EventKind::Reply);
        message.md = Some(md_key);
        message.md_offset = 0;
        message.length = mlength;
        message.discard = payload.saturating_sub(mlength);
        message.template.mlength = mlength;
        RecvAction::Deliver {
            rx: RxId(key),
            length: mlength,
            discard: payload.saturating_sub(mlength),
        }
    }

    /// `lnet_msg_attach_md` for a match: reference, threshold, and auto-unlink when exhausted
    /// (lib-ptl.c `lnet_try_match_md`).
    fn commit_match(
        &mut self,
        key: Key,
        md_key: Key,
        offset: u32,
        mlength: u32,
        ack_wmd: WireHandle,
    ) {
        let Some(md) = self.mds.get_mut(md_key) else {
            return;
        };
        md.attach_operation();
        let wants_ack = !ack_wmd.is_none() && !md.options.contains(MdOptions::ACK_DISABLE);
        let auto_unlink = md.auto_unlink && md.exhausted();
        // Not in Lustre: with fast failover on, an MD a PUT's payload exhausts stays linked
        // until the payload is in (its finalize unlinks it, with the same event), so that a PUT
        // cut off in transit can give it back for the PUT sent again (`await_again`).
        let auto_unlink = auto_unlink && !self.may_await_again(key, mlength);
        if let Some(message) = self.msgs.get_mut(key) {
            message.md = Some(md_key);
            message.md_offset = offset;
            message.length = mlength;
            message.discard = message.header.payload_length.saturating_sub(mlength);
            message.template.offset = offset;
            message.template.mlength = mlength;
            message.ack_to = wants_ack.then_some(ack_wmd);
        }
        if auto_unlink {
            self.unlink_md(md_key);
        }
    }

    /// A copy of a PUT already received (fast failover, dedupe.rs): the arrival is progress
    /// from the peer, the PUT is not delivered again; if it was ACKed it is ACKed again (the
    /// first ACK may be what was lost; a second one is stale at the initiator, whose MD takes
    /// one response).
    fn duplicate(&mut self, key: Key, delivery: Delivery) -> RecvAction {
        self.count(|counters| counters.duplicates_dropped += 1);
        self.rx_health(key, HealthStatus::Ok);
        let Some(message) = self.msgs.get_mut(key) else {
            return RecvAction::Discard { length: 0 };
        };
        let payload = message.header.payload_length;
        match (message.header.body, delivery) {
            (Body::Put { ack_wmd, .. }, Delivery::Acked(mlength)) if !ack_wmd.is_none() => {
                message.length = mlength;
                self.send_ack(key, ack_wmd);
            }
            _ => self.discard_message(key),
        }
        RecvAction::Discard { length: payload }
    }

    /// The duplicate log learns how a received PUT with ACK ended: ACKed with its matched
    /// length, or not delivered (a copy may then try again).
    pub(super) fn settle_delivery(&mut self, key: Key, delivered: bool, acked: bool) {
        let Some(message) = self.msgs.get_mut(key) else {
            return;
        };
        let Some(fingerprint) = message.delivery.take() else {
            return;
        };
        if acked {
            self.node.failover.deliveries().acked(fingerprint, message.length);
        } else if !delivered {
            self.node.failover.deliveries().forget(fingerprint);
        }
    }

    /// `lnet_drop_message`: count and free an rx message that never got an MD.
    pub(super) fn drop_rx(&mut self, key: Key) {
        self.settle_delivery(key, false, false);
        let Some(message) = self.free_message(key) else {
            return;
        };
        self.count_drop(
            message.ni,
            message.peer_ni,
            message.header.body.msg_type(),
            message.header.payload_length,
        );
    }

    pub(super) fn count_drop(
        &mut self,
        ni: NiId,
        peer_ni: Option<PeerNiId>,
        msg_type: MsgType,
        bytes: u32,
    ) {
        self.count(|counters| counters.drop_count += 1);
        self.count(|counters| counters.drop_length += u64::from(bytes));
        if let Some(local) = self.ni_shares.traffic_mut(ni, self.call.cpt) {
            local.stats.dropped(msg_type, bytes);
        }
        if let Some(peer) = peer_ni.and_then(|id| self.node.peers.ni_mut(&mut self.peer_nis, id)) {
            peer.stats.dropped(msg_type, bytes);
        }
    }
}

impl Flow<'_> {
    /// `lnet_ptl_attach_md`: a new MD on `me` takes delayed PUTs of its portal, oldest first,
    /// until it is exhausted.
    pub(super) fn match_delayed(&mut self, me_key: Key, md_key: Key) {
        let Some(portal) = self.mes.get(me_key).map(|me| me.portal as usize) else {
            return;
        };
        let Some(table) = self.node.portals.get_mut(portal) else {
            return;
        };
        if table.delayed().is_empty() {
            return;
        }
        let mut pending = std::mem::take(table.delayed_mut());
        let mut kept = std::collections::VecDeque::new();
        while let Some(key) = pending.pop_front() {
            let (Some(me), Some(md), Some(message)) =
                (self.mes.get(me_key), self.mds.get_mut(md_key), self.msgs.get(key))
            else {
                kept.push_back(key);
                break;
            };
            if md.zombie || md.exhausted() {
                kept.push_back(key);
                break;
            }
            let info = put_info(message);
            let Body::Put { ack_wmd, .. } = message.header.body else {
                kept.push_back(key);
                continue;
            };
            let lo = message.lo_peer.is_some();
            match try_match_md(me, md, &info) {
                MdMatch::None => kept.push_back(key),
                MdMatch::TooBig => self.drop_delayed(key),
                MdMatch::Ok { offset, mlength } => {
                    if let Some(table) = self.node.portals.get_mut(portal) {
                        table.count_match(&mut self.match_tables, me.cpt);
                    }
                    self.commit_match(key, md_key, offset, mlength, ack_wmd);
                    let discard = info.rlength.saturating_sub(mlength);
                    if let Some(message) = self.msgs.get_mut(key) {
                        message.phase = Phase::Receiving;
                    }
                    if lo {
                        self.call.work.push_back(Work::LoDeliver(key));
                    } else {
                        self.queue_resume(Resume {
                            rx: RxId(key),
                            action: RecvAction::Deliver { rx: RxId(key), length: mlength, discard },
                        });
                    }
                }
            }
        }
        kept.extend(pending);
        if let Some(table) = self.node.portals.get_mut(portal) {
            kept.extend(std::mem::take(table.delayed_mut()));
            *table.delayed_mut() = kept;
        }
    }

    /// Drops a delayed PUT: the driver skips its payload, a loopback sender completes.
    pub(super) fn drop_delayed(&mut self, key: Key) {
        let Some(message) = self.msgs.get(key) else {
            return;
        };
        let (payload, lo_tx) = (message.header.payload_length, message.lo_peer);
        self.drop_rx(key);
        match lo_tx {
            Some(tx) => {
                self.finalize_tx(tx, HealthStatus::Ok, crate::engine::event::EventStatus::Ok, true)
            }
            None => self.queue_resume(Resume {
                rx: RxId(key),
                action: RecvAction::Discard { length: payload },
            }),
        }
    }
}

/// `lnet_parse`'s header checks.
fn check_header(header: &Header) -> Result<(), ParseError> {
    match header.body {
        Body::Hello { .. } => Err(ParseError::HelloMessage),
        Body::Ack { .. } | Body::Get { .. } if header.payload_length != 0 => {
            Err(ParseError::PayloadOnBodiless(header.payload_length))
        }
        Body::Put { .. } | Body::Reply { .. } if header.payload_length > LNET_MTU => {
            Err(ParseError::PayloadTooLong(header.payload_length))
        }
        _ => Ok(()),
    }
}

fn put_info(message: &Message) -> MatchInfo {
    let (match_bits, remote_offset) = match message.header.body {
        Body::Put { match_bits, offset, .. } => (match_bits, offset),
        _ => (0, 0),
    };
    MatchInfo {
        initiator: message.template.initiator,
        operation: MdOptions::OP_PUT,
        match_bits,
        remote_offset,
        rlength: message.header.payload_length,
    }
}
