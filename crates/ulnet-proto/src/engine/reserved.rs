//! LNet's own use of the reserved portal: installing the ping target and posting the push
//! target, pings as an API, the internal ping GETs of discovery and recovery, and the routing
//! of the events of LNet's own MDs. Those events never reach the user: finalization
//! (`detach_md`) routes them here as internal events.
//!
//! lustre: lnet/lnet/api-ni.c (`lnet_ping_target_setup`, `lnet_ping_target_install_locked`,
//! `lnet_ping_target_update`, `lnet_push_target_init`, `lnet_push_target_post`,
//! `lnet_push_target_resize`, `lnet_ping`, `lnet_ping_event_handler`), docs/protocol/wire.md §6,
//! docs/protocol/semantics.md §1.6, §6.1.

use crate::engine::view::{Access, Flow, NodeAccess, View};
use std::time::Duration;

use crate::addr::Nid;
use crate::engine::error::PingStartError;
use crate::engine::event::{Event, EventKind, EventStatus};
use crate::engine::md::{MdOptions, MdOwner, MdSpec, Threshold, UnlinkMode};
use crate::engine::me::{InsertPosition, LNET_PID_ANY, LNET_PID_LUSTRE, Me, ProcessId};
use crate::engine::memory::Memory;
use crate::engine::msg::Phase;
use crate::engine::ni::LndKind;
use crate::engine::node::Engine;
use crate::engine::ping::{
    InternalEvent, MAX_PING_SINK, MAX_PINGS, PING_SINK, PingCompletion, PingFailure, PingId,
    PingReply, PingResult, PingState,
};
use crate::engine::slab::Key;
use crate::time::Time;
use crate::wire::header::{Body, Header, WireHandle};
use crate::wire::ping::{
    LNET_INTERFACES_MAX, LNET_PING_FEAT_DISCOVERY, LNET_PING_FEAT_MULTI_RAIL,
    LNET_PING_FEAT_NI_STATUS, LNET_PING_FEAT_PRIMARY_LARGE, LNET_PING_FEAT_RTE_DISABLED,
    LNET_PROTO_PING_MATCHBITS, LNET_RESERVED_PORTAL, NiStatus, PingError, PingInfo,
};

impl Engine {
    /// The ping buffer this node serves (entry 0's sequence number in `sequence`).
    pub fn local_ping_info(&self) -> &PingInfo {
        self.node.ping_target.info()
    }

    /// The ping buffer this node serves, as bytes on the wire.
    pub fn local_ping_buffer(&self) -> &[u8] {
        self.node.ping_target.bytes()
    }
    /// `LNetPing` / `lnetctl ping`: GETs `target`'s ping buffer (a 3960-byte sink, response
    /// tracking forced on) from `source` or any NI, and reports a [`PingResult`] through
    /// [`poll_completion`](Self::poll_completion) once it answers or `timeout` passes. A REPLY
    /// cut short by the sink is retried once with the size the peer claims. Pings never
    /// trigger discovery.
    /// lustre: lnet/lnet/api-ni.c `lnet_ping()`.
    pub fn ping(
        &mut self,
        now: Time,
        target: ProcessId,
        timeout: Duration,
        source: Option<Nid>,
    ) -> Result<PingId, PingStartError> {
        self.flow().ping(now, target, timeout, source)
    }

    /// The next finished ping or discovery.
    pub fn poll_completion(&mut self) -> Option<PingCompletion> {
        self.outputs().pop_completion()
    }
}

impl<A: Access, N: NodeAccess> View<'_, A, N> {
    /// What `lnet_ping_target_install_locked` writes: `0@lo` (implied entry 0), then every
    /// nid4 NI net by net in configuration order, then the large ones.
    fn build_ping_info(&self, sequence: u32) -> PingInfo {
        let mut features = LNET_PING_FEAT_NI_STATUS | LNET_PING_FEAT_MULTI_RAIL;
        // A router advertises itself only once routing is Enabled (router.c).
        if !self.node.routes.state.enabled() {
            features |= LNET_PING_FEAT_RTE_DISABLED;
        }
        if self.node.tunables.discovery {
            features |= LNET_PING_FEAT_DISCOVERY;
        }
        let mut nets = Vec::new();
        for ni in self.node.nis.iter().filter(|ni| ni.lnd != LndKind::Lo && !ni.removed) {
            if !nets.contains(&ni.nid.net()) {
                nets.push(ni.nid.net());
            }
        }
        let ordered = nets.iter().flat_map(|net| {
            self.node.nis.iter().filter(move |ni| {
                ni.nid.net() == *net && ni.lnd != LndKind::Lo && !ni.removed && !ni.nid.is_any()
            })
        });
        let mut nids = Vec::new();
        let mut large = Vec::new();
        // Entry 0 is 0@lo, so at most lnet_interfaces_max - 1 more.
        for ni in ordered.take(LNET_INTERFACES_MAX as usize - 1) {
            let entry = NiStatus { nid: ni.nid, status: ni.ping_status() };
            if ni.nid.is_nid4() {
                nids.push(entry);
            } else {
                if nids.is_empty() && large.is_empty() {
                    features |= LNET_PING_FEAT_PRIMARY_LARGE;
                }
                large.push(entry);
            }
        }
        PingInfo { features, pid: self.pid, sequence, nids, large, metadata: Vec::new() }
    }

    fn wire_handle(&self, md: Key) -> WireHandle {
        let object_cookie =
            self.mds.get(md).map_or(WireHandle::NONE.object_cookie, |md| md.handle.0);
        WireHandle { interface_cookie: self.interface_cookie, object_cookie }
    }

    /// Whether message `key` waits for its peer's discovery.
    pub(crate) fn is_held_for_discovery(&self, key: Key) -> bool {
        self.msgs.get(key).is_some_and(|message| message.phase == Phase::DiscoveryWait)
            && self.node.peers.peers().any(|(_, peer)| peer.discovery.pending.contains(&key))
    }
}

impl Flow<'_> {
    /// See [`Engine::ping`].
    pub(crate) fn ping(
        &mut self,
        now: Time,
        target: ProcessId,
        timeout: Duration,
        source: Option<Nid>,
    ) -> Result<PingId, PingStartError> {
        self.advance(now);
        if target.nid.is_any() {
            return Err(PingStartError::AnyNid);
        }
        let source = source.filter(|nid| !nid.is_any());
        if let Some(nid) = source.filter(|nid| self.ni_for_nid(*nid).is_none()) {
            return Err(PingStartError::NotLocalSource(nid));
        }
        if self.node.pings.len() >= MAX_PINGS {
            return Err(PingStartError::TooManyPings);
        }
        // A ping's MD, and so its message, lives in partition 0 (`bind_internal`).
        if !self.message_room(0) {
            return Err(PingStartError::TooManyMessages);
        }
        let target = if target.pid == LNET_PID_ANY {
            ProcessId::new(target.nid, LNET_PID_LUSTRE)
        } else {
            target
        };
        let deadline = self.call.now + timeout;
        let state = PingState {
            target,
            source,
            deadline,
            md: None,
            retried: false,
            reply: None,
            failure: None,
        };
        let id = self.node.pings.start(state);
        // The source was checked above, so only a full table can fail the GET here.
        if self.send_api_ping(id, PING_SINK).is_err() {
            self.node.pings.finish(id);
            self.run_work();
            return Err(PingStartError::TooManyMessages);
        }
        self.run_work();
        Ok(PingId(id))
    }

    // ------------------------------------------------------------ the targets

    /// Node creation: portal 0 is lazy (pushes wait for the push target to be re-posted), the
    /// ping target and a 272-byte push target are attached.
    /// lustre: api-ni.c `lnet_push_target_init()`, `lnet_ping_target_setup()`.
    pub(super) fn setup_reserved_portal(&mut self) {
        if let Some(table) = self.node.portals.get_mut(LNET_RESERVED_PORTAL as usize) {
            table.lazy = true;
        }
        self.install_ping_target();
        self.post_push_target();
    }

    /// Builds the ping buffer from the NIs with a new sequence number, attaches an MD over it
    /// and unlinks the old one; then queues pushes to peers that have not seen it.
    /// lustre: api-ni.c `lnet_ping_target_update()`, `lnet_ping_target_install_locked()`,
    /// peer.c `lnet_push_update_to_peers()`.
    pub(super) fn install_ping_target(&mut self) {
        let sequence = self.node.ping_target.info().sequence.wrapping_add(1);
        let info = self.build_ping_info(sequence);
        let bytes = match info.to_bytes() {
            Ok(bytes) => bytes,
            Err(error) => {
                self.record_violation(|| format!("own ping buffer does not encode: {error}"));
                return;
            }
        };
        let spec = MdSpec::new(Memory::new(bytes.clone()))
            .options(MdOptions::OP_GET | MdOptions::TRUNCATE | MdOptions::MANAGE_REMOTE);
        let md = self.attach_internal(spec, MdOwner::PingTarget, UnlinkMode::Retain);
        if let Some(old) = self.node.ping_target.install(info, bytes, md) {
            self.abort_live_md(old);
        }
        self.push_update_to_peers();
    }

    /// Health and fatal-flag status changes are visible to pings at once: the buffer is
    /// rewritten with the same sequence number, in the MD that serves it (its length does
    /// not change), and nobody is pushed (docs/protocol/semantics.md §4.1, §6.1).
    pub(super) fn update_ping_buffer_in_place(&mut self) {
        let info = self.build_ping_info(self.node.ping_target.info().sequence);
        let Ok(bytes) = info.to_bytes() else {
            return;
        };
        if bytes.len() != self.node.ping_target.bytes().len() {
            self.record_violation(|| "ping buffer changed size on a status change".to_string());
            return;
        }
        if let Some(md) = self.node.ping_target.md().and_then(|md| self.mds.get_mut(md)) {
            md.memory.write_at(0, &bytes);
        }
        self.node.ping_target.rewrite(info, bytes);
    }

    /// Posts a push target of the wanted size, unlinking the one it replaces.
    /// lustre: api-ni.c `lnet_push_target_post()`, `lnet_push_target_resize()`.
    fn post_push_target(&mut self) {
        let size = self.node.push_target.size();
        let spec = MdSpec::new(Memory::new(vec![0; size as usize]))
            .threshold(Threshold::Count(1))
            .options(MdOptions::OP_PUT | MdOptions::TRUNCATE);
        let md = self.attach_internal(spec, MdOwner::PushTarget, UnlinkMode::Unlink);
        if let Some(old) = self.node.push_target.posted(md) {
            self.abort_live_md(old);
        }
    }

    /// The discovery thread's first duty: grow the push target, or post it again after a
    /// push consumed it. True when it did something.
    pub(super) fn service_push_target(&mut self) -> bool {
        if self.node.push_target.wants_post() {
            self.post_push_target();
            return true;
        }
        false
    }

    /// An ME on portal 0 with the ping match bits (any NID, any pid, appended) and `spec`
    /// attached, owned by LNet; delayed pushes are matched against it at once.
    fn attach_internal(&mut self, spec: MdSpec, owner: MdOwner, unlink: UnlinkMode) -> Option<Key> {
        let mut me = Me {
            portal: LNET_RESERVED_PORTAL,
            match_id: ProcessId::ANY,
            match_bits: LNET_PROTO_PING_MATCHBITS,
            ignore_bits: 0,
            unlink: UnlinkMode::Unlink,
            md: None,
            internal: true,
            cpt: 0,
        };
        let table = self.node.portals.get_mut(LNET_RESERVED_PORTAL as usize)?;
        if !table.accepts(&me) {
            // Cannot happen: the ping target fixes portal 0 as wildcard at node creation.
            self.record_violation(|| "portal 0 refused LNet's wildcard ME".to_string());
            return None;
        }
        // lustre: api-ni.c lnet_ping_target_setup() attaches with LNET_INS_AFTER: portal
        // 0's fixed table.
        me.cpt = table.table_of_attach(&me, InsertPosition::After, |nid| {
            self.node.nis.cpt_of_nid_any(&self.partitions, nid)
        });
        let me_key = self.mes.insert(me.clone())?;
        table.insert(&mut self.match_tables, me_key, &me, InsertPosition::After);
        let Some(md_key) = self.insert_md(spec, unlink, Some(me_key), owner) else {
            self.remove_me(me_key);
            return None;
        };
        if let Some(me) = self.mes.get_mut(me_key) {
            me.md = Some(md_key);
        }
        self.match_delayed(me_key, md_key);
        Some(md_key)
    }

    /// Unlinks one of LNet's MDs if it is still live (`LNetMDUnlink` on a kept handle).
    pub(super) fn abort_live_md(&mut self, md: Key) {
        if self.mds.get(md).is_some_and(|md| !md.zombie) {
            self.abort_md(md);
        }
    }

    /// Unlinks an MD its consumer is done with; its remaining events are ignored. (In Lustre
    /// the UNLINK event runs inside `LNetMDUnlink`, while the peer is still being worked on,
    /// and changes nothing; here events are handled later, so they are cut off instead.)
    pub(super) fn abandon_md(&mut self, md: Key) {
        if let Some(entry) = self.mds.get_mut(md) {
            entry.owner = MdOwner::Abandoned;
        }
        self.abort_live_md(md);
    }

    // ------------------------------------------------------------ LNet's own GETs and PUTs

    /// Binds a bound MD of `length` bytes (threshold 2, TRUNCATE, tracked) and GETs the
    /// target's ping buffer into it (`lnet_send_ping`). Deferred work is left to the caller.
    pub(super) fn send_internal_ping(
        &mut self,
        owner: MdOwner,
        length: u32,
        target: ProcessId,
        source: Option<Nid>,
        recovery: bool,
    ) -> Result<Key, EventStatus> {
        let spec = MdSpec::new(Memory::new(vec![0; length as usize]))
            .threshold(Threshold::Count(2))
            .options(MdOptions::TRUNCATE | MdOptions::TRACK_RESPONSE);
        let md_key = self.bind_internal(spec, owner, source)?;
        let header = Header {
            dest_nid: target.nid,
            src_nid: Nid::ANY,
            dest_pid: target.pid,
            src_pid: self.pid,
            payload_length: 0,
            body: Body::Get {
                return_wmd: self.wire_handle(md_key),
                match_bits: LNET_PROTO_PING_MATCHBITS,
                ptl_index: LNET_RESERVED_PORTAL,
                src_offset: 0,
                sink_length: length,
            },
        };
        let template = crate::engine::event::EventTemplate {
            initiator: ProcessId::new(Nid::ANY, self.pid),
            target,
            portal: LNET_RESERVED_PORTAL,
            match_bits: LNET_PROTO_PING_MATCHBITS,
            rlength: length,
            ..crate::engine::event::EventTemplate::EMPTY
        };
        self.initiate(md_key, header, template, 0, true, source, recovery)
            .map_err(|_| EventStatus::NoMemory)?;
        Ok(md_key)
    }

    /// Binds our ping buffer (threshold 2, tracked) and PUTs it with an ACK: a discovery push.
    /// lustre: peer.c `lnet_peer_send_push()`.
    pub(super) fn send_internal_push(
        &mut self,
        owner: MdOwner,
        target: ProcessId,
        source: Option<Nid>,
    ) -> Result<Key, EventStatus> {
        let bytes = self.node.ping_target.bytes().to_vec();
        let length = u32::try_from(bytes.len()).map_err(|_| EventStatus::NoMemory)?;
        let spec = MdSpec::new(Memory::new(bytes))
            .threshold(Threshold::Count(2))
            .options(MdOptions::TRACK_RESPONSE);
        let md_key = self.bind_internal(spec, owner, source)?;
        let header = Header {
            dest_nid: target.nid,
            src_nid: Nid::ANY,
            dest_pid: target.pid,
            src_pid: self.pid,
            payload_length: length,
            body: Body::Put {
                ack_wmd: self.wire_handle(md_key),
                match_bits: LNET_PROTO_PING_MATCHBITS,
                hdr_data: 0,
                ptl_index: LNET_RESERVED_PORTAL,
                offset: 0,
            },
        };
        let template = crate::engine::event::EventTemplate {
            initiator: ProcessId::new(Nid::ANY, self.pid),
            target,
            portal: LNET_RESERVED_PORTAL,
            match_bits: LNET_PROTO_PING_MATCHBITS,
            rlength: length,
            mlength: length,
            ..crate::engine::event::EventTemplate::EMPTY
        };
        self.initiate(md_key, header, template, length, true, source, false)
            .map_err(|_| EventStatus::NoMemory)?;
        Ok(md_key)
    }

    /// A bound MD owned by LNet (`LNetMDBind` without the user limit), checked like a user
    /// initiator's: a source NID that is not local fails as the kernel's `LNetGet` would.
    fn bind_internal(
        &mut self,
        spec: MdSpec,
        owner: MdOwner,
        source: Option<Nid>,
    ) -> Result<Key, EventStatus> {
        if source.is_some_and(|nid| self.ni_for_nid(nid).is_none()) {
            return Err(EventStatus::HostUnreachable);
        }
        if !self.message_room(spec.cpt.unwrap_or(0)) {
            return Err(EventStatus::NoMemory);
        }
        self.insert_md(spec, UnlinkMode::Unlink, None, owner).ok_or(EventStatus::NoMemory)
    }

    // ------------------------------------------------------------ API pings

    fn send_api_ping(&mut self, id: u64, sink: u32) -> Result<(), EventStatus> {
        let Some(state) = self.node.pings.get(id) else {
            return Err(EventStatus::NoMemory);
        };
        let (target, source) = (state.target, state.source);
        let md = self.send_internal_ping(MdOwner::Ping(id), sink, target, source, false)?;
        if let Some(state) = self.node.pings.get_mut(id) {
            state.md = Some(md);
        }
        Ok(())
    }

    /// `lnet_ping_event_handler`: a failure or the REPLY is recorded; the ping completes when
    /// its MD is unlinked (or its GET failed).
    fn ping_event(&mut self, id: u64, md: Key, event: &Event, data: Vec<u8>) {
        let Some(state) = self.node.pings.get_mut(id).filter(|state| state.md == Some(md)) else {
            return;
        };
        if !event.status.is_ok() {
            if state.failure.is_none() && state.reply.is_none() {
                state.failure = Some(match event.kind {
                    EventKind::Send => PingFailure::Send(event.status),
                    EventKind::Reply => PingFailure::Reply(event.status),
                    _ => PingFailure::TimedOut,
                });
            }
        } else if event.kind == EventKind::Reply {
            state.reply = Some((data, event.source));
        }
        let send_failed = event.kind == EventKind::Send && !event.status.is_ok();
        if event.unlinked || send_failed {
            self.finish_ping(id);
        }
    }

    /// Reports a finished ping, or retries once with the size a truncated REPLY claims.
    fn finish_ping(&mut self, id: u64) {
        let Some(state) = self.node.pings.get_mut(id) else {
            return;
        };
        if let Some(md) = state.md.take() {
            self.abandon_md(md);
        }
        let Some(state) = self.node.pings.get_mut(id) else {
            return;
        };
        let outcome = match (state.reply.take(), state.failure.take()) {
            (Some((bytes, replier)), _) => match PingInfo::parse(&bytes) {
                Ok((info, _)) => Ok(PingReply {
                    primary_nid: info.primary_nid(),
                    info,
                    replier,
                    length: u32::try_from(bytes.len()).unwrap_or(u32::MAX),
                }),
                Err(PingError::Truncated { info_size, len }) if !state.retried => {
                    state.retried = true;
                    let sink = u32::try_from(info_size).unwrap_or(u32::MAX).min(MAX_PING_SINK);
                    if sink as usize > len && self.send_api_ping(id, sink).is_ok() {
                        return;
                    }
                    Err(PingFailure::BadBuffer(PingError::Truncated { info_size, len }))
                }
                Err(error) => Err(PingFailure::BadBuffer(error)),
            },
            (None, Some(failure)) => Err(failure),
            (None, None) => Err(PingFailure::TimedOut),
        };
        self.complete_ping(id, outcome);
    }

    fn complete_ping(&mut self, id: u64, outcome: Result<PingReply, PingFailure>) {
        let Some(state) = self.node.pings.finish(id) else {
            return;
        };
        if let Some(md) = state.md {
            self.abandon_md(md);
        }
        self.outputs.complete(
            self.call.cpt,
            PingCompletion::Ping(PingResult { id: PingId(id), target: state.target, outcome }),
        );
    }

    /// Pings whose timeout passed fail; their MDs are unlinked (late events are ignored).
    pub(super) fn expire_pings(&mut self) {
        while let Some(id) = self.node.pings.pop_expired(self.call.now) {
            self.complete_ping(id, Err(PingFailure::TimedOut));
        }
    }

    // ------------------------------------------------------------ event routing

    /// Dispatches an event of one of LNet's MDs to its consumer.
    pub(super) fn handle_internal_event(&mut self, internal: InternalEvent) {
        let InternalEvent { owner, md, event, data } = internal;
        match owner {
            MdOwner::User | MdOwner::PingTarget | MdOwner::Abandoned => {}
            MdOwner::PushTarget => {
                if event.unlinked {
                    self.node.push_target.unlinked(md);
                }
                if event.kind == EventKind::Put {
                    self.received_push(&event, &data);
                }
            }
            MdOwner::DiscoveryPing(peer) => self.discovery_event(peer, md, true, &event, &data),
            MdOwner::DiscoveryPush(peer) => self.discovery_event(peer, md, false, &event, &data),
            MdOwner::Ping(id) => self.ping_event(id, md, &event, data),
            MdOwner::Recovery(target) => self.recovery_event(target, md, &event),
        }
    }
}
