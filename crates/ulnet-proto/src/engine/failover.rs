//! Fast failover: black holes noticed in seconds instead of the kernel's 49-150 s.
//!
//! Not in Lustre; the design and the delivery guarantee are in
//! docs/decisions/0008-fast-failover.md. In short, per peer NI two clocks run while work is
//! outstanding:
//!
//! * LND progress: transmits handed to the driver and not completed; any completion to that
//!   peer NI is progress.
//! * Peer progress: tracked requests (PUT with ACK, GET) sent and awaiting their response
//!   through that peer NI; any message received from that peer NI is progress.
//!
//! When either clock passes the peer NI's suspicion timeout (the tunable
//! `blackhole_timeout`, or a multiple of the round trip measured to that peer NI if longer,
//! never more than the LND timeout), the peer NI is suspect: it takes a remote failure (so
//! selection prefers its siblings), a recovery ping probes it at once (with a probe timeout
//! instead of the transaction timeout), and its messages move to other paths:
//!
//! * messages waiting for credits on it (never handed to the driver) are selected again;
//! * PUTs with ACK and GETs the driver still holds are copied: the driver keeps the original
//!   (with a private copy of its payload, so the MD is free), the copy carries the SEND event;
//! * PUTs with ACK and GETs that left but got no response are sent again from a saved copy.
//!
//! Copies of PUTs carry [`RESEND_COOKIE_FLAG`] in their ACK wire handle's interface cookie so
//! a ulnet target recognises them (`dedupe.rs`) and never delivers a PUT twice; a copy of a
//! GET may be served twice if the target MD still matches (a read; the initiator still sees
//! one REPLY). Copies are made only for MDs that accept exactly one more operation (so a late
//! second response is stale) and only within [`COPY_WINDOW`] of the original's departure
//! (targets remember PUTs for [`DEDUPE_WINDOW`]).

use std::time::Duration;

use crate::engine::md::Threshold;
use crate::engine::memory::Memory;
use crate::engine::msg::{Credit, Message, Phase};
use crate::engine::ni::NiId;
use crate::engine::node::{Node, Work};
use crate::engine::peer::PeerNiId;
use crate::engine::slab::Key;
use crate::time::Time;
use crate::wire::header::Body;

/// How long a target remembers the PUTs (with ACK) it received, to recognise a copy sent by
/// fast failover. A protocol constant shared by initiators and targets.
pub const DEDUPE_WINDOW: Duration = Duration::from_secs(30);
/// Copies are only sent this soon after the original left, so the target still remembers it.
pub const COPY_WINDOW: Duration = Duration::from_secs(15);
/// Set in the interface cookie of a PUT copy's ACK wire handle. Interface cookies are start
/// times in nanoseconds, so the bit is otherwise clear (the node clears it in its own).
pub const RESEND_COOKIE_FLAG: u64 = 1 << 63;
/// Payload bytes fast failover may hold in private copies at once (originals the driver
/// still sends, and copies of requests that already left); beyond it no more copies are made
/// and those operations wait for their response tracker as in Lustre.
pub const MAX_FAILOVER_BYTES: u64 = 64 << 20;
/// The suspicion timeout is this many retransmission timeouts (`srtt + 4 * rttvar`) when that
/// exceeds the tunable floor.
const RTO_MULTIPLIER: u64 = 4;

/// A peer NI's progress clocks and round-trip estimate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Watch {
    /// Transmits to it the driver holds.
    pub(crate) in_lnd: u32,
    /// The last LND progress (or when `in_lnd` became non-zero).
    pub(crate) lnd_since: Time,
    /// Tracked requests sent through it and awaiting their response.
    pub(crate) awaiting: u32,
    /// The last message received from it (or when `awaiting` became non-zero).
    pub(crate) rx_since: Time,
    /// Smoothed round trip and its variation (RFC 6298), nanoseconds; 0 until measured.
    pub(crate) srtt_ns: u64,
    pub(crate) rttvar_ns: u64,
    /// Its entry in the watch queue, if any (the instant it is filed under).
    pub(crate) armed: Option<Time>,
}

impl Watch {
    fn sample(&mut self, rtt: Duration) {
        let rtt = u64::try_from(rtt.as_nanos()).unwrap_or(u64::MAX);
        if self.srtt_ns == 0 {
            self.srtt_ns = rtt.max(1);
            self.rttvar_ns = rtt / 2;
        } else {
            let delta = self.srtt_ns.abs_diff(rtt);
            self.rttvar_ns = self.rttvar_ns - self.rttvar_ns / 4 + delta / 4;
            self.srtt_ns = (self.srtt_ns - self.srtt_ns / 8 + rtt / 8).max(1);
        }
    }

    /// When it becomes suspect, if anything is outstanding.
    fn due(&self, timeout: Duration) -> Option<Time> {
        let lnd = (self.in_lnd > 0).then(|| self.lnd_since + timeout);
        let peer = (self.awaiting > 0).then(|| self.rx_since + timeout);
        [lnd, peer].into_iter().flatten().min()
    }
}

/// What can be done with a message to a suspect peer NI.
enum Move {
    /// Never reached the driver: select again.
    Reselect,
    /// The driver holds it: copy it.
    Copy,
}

impl Node {
    /// Fast failover is on (`blackhole_timeout` > 0).
    pub(super) fn failover_enabled(&self) -> bool {
        !self.tunables.blackhole_timeout.is_zero()
    }

    /// The suspicion (and probe) timeout of a peer NI.
    pub(super) fn failover_timeout(&self, id: PeerNiId) -> Duration {
        let floor = self.tunables.blackhole_timeout;
        if floor.is_zero() {
            return floor;
        }
        let ceiling = self.tunables.lnd_timeout().max(floor);
        let rto = self
            .peers
            .ni(id)
            .map_or(0, |ni| ni.watch.srtt_ns.saturating_add(ni.watch.rttvar_ns.saturating_mul(4)));
        Duration::from_nanos(rto.saturating_mul(RTO_MULTIPLIER)).clamp(floor, ceiling)
    }

    /// A transmit to `id` went to the driver.
    pub(super) fn watch_lnd_start(&mut self, id: PeerNiId) {
        let now = self.now;
        let Some(ni) = self.peers.ni_mut(id) else {
            return;
        };
        if ni.watch.in_lnd == 0 {
            ni.watch.lnd_since = now;
        }
        ni.watch.in_lnd = ni.watch.in_lnd.saturating_add(1);
        self.arm_watch(id);
    }

    /// The driver finished a transmit to `id` that took `took`.
    pub(super) fn watch_lnd_done(&mut self, id: PeerNiId, took: Option<Duration>) {
        let now = self.now;
        let Some(ni) = self.peers.ni_mut(id) else {
            return;
        };
        ni.watch.in_lnd = ni.watch.in_lnd.saturating_sub(1);
        ni.watch.lnd_since = now;
        if let Some(took) = took {
            ni.watch.sample(took);
        }
        self.disarm_if_idle(id);
    }

    /// A tracked request through `id` left and awaits its response.
    pub(super) fn watch_await_start(&mut self, id: PeerNiId) {
        let now = self.now;
        let Some(ni) = self.peers.ni_mut(id) else {
            return;
        };
        if ni.watch.awaiting == 0 {
            ni.watch.rx_since = now;
        }
        ni.watch.awaiting = ni.watch.awaiting.saturating_add(1);
        self.arm_watch(id);
    }

    /// A request through `id` is no longer awaited; `rtt` when its response came.
    pub(super) fn watch_await_end(&mut self, id: PeerNiId, rtt: Option<Duration>) {
        let Some(ni) = self.peers.ni_mut(id) else {
            return;
        };
        ni.watch.awaiting = ni.watch.awaiting.saturating_sub(1);
        if let Some(rtt) = rtt {
            ni.watch.sample(rtt);
        }
        self.disarm_if_idle(id);
    }

    /// Something arrived from `id`: the peer is making progress.
    pub(super) fn watch_rx(&mut self, id: PeerNiId) {
        let now = self.now;
        if let Some(ni) = self.peers.ni_mut(id) {
            ni.watch.rx_since = now;
        }
    }

    /// When the earliest watch entry is due (entries may be early: they are re-checked).
    pub(super) fn watch_deadline(&self) -> Option<Time> {
        self.watch_queue.first().map(|(at, _)| (*at).max(self.now))
    }

    /// Checks the due peer NIs; suspects the ones without progress.
    pub(super) fn run_watch(&mut self) {
        while let Some(&(at, id)) = self.watch_queue.first() {
            if at > self.now {
                break;
            }
            self.watch_queue.pop_first();
            let timeout = self.failover_timeout(id);
            let Some(ni) = self.peers.ni_mut(id) else {
                continue;
            };
            ni.watch.armed = None;
            if ni.deleted || timeout.is_zero() {
                continue;
            }
            match ni.watch.due(timeout) {
                None => {}
                Some(due) if due > self.now => self.arm_watch(id),
                Some(_) => {
                    self.suspect(id);
                    self.arm_watch(id);
                }
            }
        }
    }

    /// Puts `id` in the watch queue at its due time if it has work outstanding. A peer with
    /// one NI is not watched: there is no other path to move its traffic to.
    fn arm_watch(&mut self, id: PeerNiId) {
        let armed = self.peers.ni(id).is_none_or(|ni| ni.watch.armed.is_some());
        if armed || !self.failover_enabled() || self.peers.peer_ni_count(id) <= 1 {
            return;
        }
        let timeout = self.failover_timeout(id);
        let Some(ni) = self.peers.ni_mut(id) else {
            return;
        };
        if let Some(due) = ni.watch.due(timeout) {
            ni.watch.armed = Some(due);
            self.watch_queue.insert((due, id));
        }
    }

    /// Nothing outstanding any more: the entry goes (no wakeup for an idle peer NI).
    fn disarm_if_idle(&mut self, id: PeerNiId) {
        let Some(ni) = self.peers.ni_mut(id) else {
            return;
        };
        if ni.watch.in_lnd == 0 && ni.watch.awaiting == 0 {
            if let Some(at) = ni.watch.armed.take() {
                self.watch_queue.remove(&(at, id));
            }
        }
    }

    /// `id` showed no progress for its timeout: lower its health, probe it, move its work.
    fn suspect(&mut self, id: PeerNiId) {
        let now = self.now;
        self.stats.blackhole_suspicions += 1;
        let Some(ni) = self.peers.ni_mut(id) else {
            return;
        };
        ni.health_stats.suspicions += 1;
        // The clocks restart: a peer NI that stays silent is suspected again a timeout later.
        ni.watch.lnd_since = now;
        ni.watch.rx_since = now;
        // As for remote health (semantics.md §4.2): with one NI there is nowhere else to go.
        if self.peers.peer_ni_count(id) <= 1 {
            return;
        }
        self.remote_failure(id);
        self.probe_now(id);
        let candidates: Vec<(Key, Move)> = self
            .msgs
            .iter()
            .filter(|(_, message)| message.tx && message.peer_ni == Some(id))
            .filter_map(|(key, message)| self.movable(message).map(|how| (key, how)))
            .collect();
        for (key, how) in candidates {
            match how {
                Move::Reselect => self.reselect(key),
                Move::Copy => self.copy_in_lnd(key),
            }
        }
        // A set: the tracker queue may list an MD more than once.
        let awaiting: std::collections::BTreeSet<Key> = self
            .trackers
            .iter()
            .map(|(_, md)| md)
            .filter(|md| {
                self.mds.get(*md).and_then(|md| md.tracker.as_ref()).is_some_and(|tracker| {
                    tracker.awaiting == Some(id) && tracker.request.is_some()
                })
            })
            .collect();
        for md in awaiting {
            self.reissue(md);
        }
    }

    /// A local NI lost its link (its fatal flag went up): what the driver holds on it and
    /// the requests that left through it and await a response move to other paths at once,
    /// as for a suspect peer NI.
    pub(super) fn evacuate_ni(&mut self, ni: NiId) {
        if !self.failover_enabled() {
            return;
        }
        let held: Vec<Key> = self
            .msgs
            .iter()
            .filter(|(_, m)| m.tx && m.ni == ni && m.phase == Phase::InLnd)
            .filter(|(_, m)| matches!(self.movable(m), Some(Move::Copy)))
            .map(|(key, _)| key)
            .collect();
        for key in held {
            self.copy_in_lnd(key);
        }
        let awaiting: std::collections::BTreeSet<Key> = self
            .trackers
            .iter()
            .map(|(_, md)| md)
            .filter(|md| {
                self.mds.get(*md).and_then(|md| md.tracker.as_ref()).is_some_and(|tracker| {
                    tracker.sent_ni == Some(ni)
                        && tracker.awaiting.is_some()
                        && tracker.request.is_some()
                })
            })
            .collect();
        for md in awaiting {
            self.reissue(md);
        }
    }

    /// Whether a message to a suspect peer NI can go elsewhere: not pinned to a source (nor
    /// a response, which is), to a multi-rail peer, not a recovery ping.
    fn movable(&self, message: &Message) -> Option<Move> {
        if message.source.is_some()
            || message.recovery
            || message.abandoned
            || message.response_ni.is_some()
        {
            return None;
        }
        let multi_rail = message
            .peer_ni
            .and_then(|id| self.peers.peer_of(id))
            .is_some_and(|peer| peer.multi_rail());
        if !multi_rail {
            return None;
        }
        match message.phase {
            Phase::WaitPeerCredit | Phase::WaitNiCredit | Phase::TxReady => Some(Move::Reselect),
            Phase::InLnd if self.copyable(message) => Some(Move::Copy),
            _ => None,
        }
    }

    /// A message the driver holds may be copied if it is a PUT with ACK or a GET whose MD
    /// takes exactly its response (so a second response is stale), within the copy window
    /// and the retry budget.
    fn copyable(&self, message: &Message) -> bool {
        let request = match message.header.body {
            Body::Put { ack_wmd, .. } => !ack_wmd.is_none(),
            Body::Get { .. } => true,
            _ => false,
        };
        let single_response = message.md.and_then(|md| self.mds.get(md)).is_some_and(|md| {
            md.threshold == Threshold::Count(1) && md.refcount == 1 && !md.aborted && !md.zombie
        });
        let left = message
            .md
            .and_then(|md| self.mds.get(md))
            .and_then(|md| md.tracker.as_ref())
            .and_then(|tracker| tracker.sent_at)
            .or(message.lnd_at);
        request
            && single_response
            && message.event.is_some()
            && message.retry_count < self.tunables.effective_retry_count()
            && left.is_some_and(|at| self.now < at + COPY_WINDOW)
            && self.failover_bytes + u64::from(message.length) <= MAX_FAILOVER_BYTES
    }

    /// Takes a message that never reached the driver off its credit queues and selects again.
    pub(super) fn reselect(&mut self, key: Key) {
        self.withdraw(key);
        self.stats.fast_resends += 1;
        self.work.push_back(Work::Resend(key));
    }

    /// Withdraws a not-yet-transmitted message from its credit queues (giving back what it
    /// holds) and leaves it ready for selection.
    pub(super) fn withdraw(&mut self, key: Key) {
        let Some(message) = self.msgs.get_mut(key) else {
            return;
        };
        if !matches!(message.phase, Phase::WaitPeerCredit | Phase::WaitNiCredit | Phase::TxReady) {
            let phase = message.phase;
            self.record_violation(|| format!("withdrawing message {key:?} in phase {phase:?}"));
            return;
        }
        let (ni, peer_ni) = (message.ni, message.peer_ni);
        if message.ni_credit == Credit::Waiting {
            message.ni_credit = Credit::None;
            if let Some(pool) =
                self.nis.get_mut(usize::from(ni.0)).and_then(|ni| ni.credits.as_mut())
            {
                pool.remove(key);
            }
        }
        let Some(message) = self.msgs.get_mut(key) else {
            return;
        };
        if message.peer_credit == Credit::Waiting {
            message.peer_credit = Credit::None;
            let charged = std::mem::take(&mut message.charged_bytes);
            if let Some(peer) = peer_ni.and_then(|id| self.peers.ni_mut(id)) {
                peer.credits.remove(key);
                peer.queued_bytes = peer.queued_bytes.saturating_sub(u64::from(charged));
            }
        }
        self.return_credits(key);
        if let Some(message) = self.msgs.get_mut(key) {
            message.phase = Phase::ResendQueued;
            message.peer_ni = None;
            message.ni = NiId::LOOPBACK;
        }
    }

    /// The driver holds `key` to a suspect peer NI: it keeps the original with a private copy
    /// of its payload (its MD reference and SEND event go to the copy), and the copy is
    /// selected afresh.
    fn copy_in_lnd(&mut self, key: Key) {
        if self.msgs.len() >= self.limits.messages {
            return;
        }
        let Some(original) = self.msgs.get(key) else {
            return;
        };
        let payload = self.payload_copy(original);
        let mut copy = Message {
            header: original.header,
            tx: true,
            phase: Phase::ResendQueued,
            event: original.event,
            template: original.template,
            md: original.md,
            md_offset: original.md_offset,
            length: original.length,
            ni: NiId::LOOPBACK,
            peer_ni: None,
            response_ni: None,
            health: crate::engine::health::HealthStatus::Ok,
            retry_count: original.retry_count + 1,
            deadline: Time::MAX,
            peer_credit: Credit::None,
            ni_credit: Credit::None,
            charged_bytes: 0,
            ack_to: None,
            lo_peer: None,
            discard: 0,
            no_resend: original.no_resend,
            resent: true,
            source: None,
            recovery: false,
            abandoned: false,
            orphan: None,
            tracked_md: None,
            committed_at: original.committed_at,
            lnd_at: None,
            delivery: None,
        };
        flag_wire_handle(&mut copy.header.body);
        let Some(copy_key) = self.alloc_message(copy) else {
            return;
        };
        self.failover_bytes += payload.len() as u64;
        if let Some(original) = self.msgs.get_mut(key) {
            original.abandoned = true;
            original.no_resend = true;
            original.event = None;
            original.md = None;
            original.orphan = Some(Box::new(payload));
            original.md_offset = 0;
        }
        self.stats.fast_resends += 1;
        self.work.push_back(Work::Resend(copy_key));
    }

    /// A tracked request that left but got no response: send a copy of it, event-less, from
    /// a private copy of its payload, if its MD takes exactly the response.
    fn reissue(&mut self, md_key: Key) {
        if self.msgs.len() >= self.limits.messages {
            return;
        }
        let now = self.now;
        let retry_limit = self.tunables.effective_retry_count();
        let Some(md) = self.mds.get(md_key) else {
            return;
        };
        let single_response = md.threshold == Threshold::Count(1)
            && md.refcount == 0
            && !md.aborted
            && !md.zombie
            && md.me.is_none();
        let Some(tracker) = md.tracker.as_ref() else {
            return;
        };
        let Some(request) = tracker.request.as_deref() else {
            return;
        };
        let in_window = tracker.sent_at.is_some_and(|at| now < at + COPY_WINDOW);
        // Like a held message, only a request free to take another path is copied: no source
        // was asked for, and the peer is multi-rail.
        let free = request.source.is_none()
            && tracker
                .awaiting
                .and_then(|id| self.peers.peer_of(id))
                .is_some_and(|peer| peer.multi_rail());
        if !single_response || !in_window || !free || request.copies >= retry_limit {
            return;
        }
        let length = match request.header.body {
            Body::Put { .. } => request.length,
            _ => 0,
        };
        if self.failover_bytes + u64::from(length) > MAX_FAILOVER_BYTES {
            return;
        }
        let mut payload = vec![0; length as usize];
        if !md.memory.read_at(0, &mut payload) {
            return;
        }
        let mut header = request.header;
        flag_wire_handle(&mut header.body);
        let (source, copies) = (request.source, request.copies);
        let message = Message {
            header,
            tx: true,
            phase: Phase::ResendQueued,
            event: None,
            template: crate::engine::event::EventTemplate::EMPTY,
            md: None,
            md_offset: 0,
            length,
            ni: NiId::LOOPBACK,
            peer_ni: None,
            response_ni: None,
            health: crate::engine::health::HealthStatus::Ok,
            retry_count: copies + 1,
            deadline: Time::MAX,
            peer_credit: Credit::None,
            ni_credit: Credit::None,
            charged_bytes: 0,
            ack_to: None,
            lo_peer: None,
            discard: 0,
            no_resend: false,
            resent: true,
            source,
            recovery: false,
            abandoned: false,
            orphan: Some(Box::new(Memory::new(payload))),
            tracked_md: Some(md_key),
            committed_at: None,
            lnd_at: None,
            delivery: None,
        };
        let Some(key) = self.alloc_message(message) else {
            return;
        };
        self.failover_bytes += u64::from(length);
        if let Some(request) = self
            .mds
            .get_mut(md_key)
            .and_then(|md| md.tracker.as_mut())
            .and_then(|t| t.request.as_mut())
        {
            request.copies += 1;
        }
        self.stats.fast_resends += 1;
        self.work.push_back(Work::Resend(key));
    }

    /// The payload a message sends, copied out of its MD.
    fn payload_copy(&self, message: &Message) -> Memory {
        let mut bytes = vec![0; message.length as usize];
        let copied = message
            .md
            .and_then(|md| self.mds.get(md))
            .is_some_and(|md| md.memory.read_at(message.md_offset as usize, &mut bytes));
        if !copied {
            bytes.clear();
        }
        Memory::new(bytes)
    }

    /// A message's private payload copy is gone: its bytes leave the budget.
    pub(super) fn release_orphan(&mut self, message: &Message) {
        if let Some(orphan) = &message.orphan {
            self.failover_bytes = self.failover_bytes.saturating_sub(orphan.len() as u64);
        }
    }
}

/// Marks a PUT copy's ACK handle so a ulnet target recognises it.
pub(crate) fn flag_wire_handle(body: &mut Body) {
    if let Body::Put { ack_wmd, .. } = body {
        if !ack_wmd.is_none() {
            ack_wmd.interface_cookie |= RESEND_COOKIE_FLAG;
        }
    }
}
