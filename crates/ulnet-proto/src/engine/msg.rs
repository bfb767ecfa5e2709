//! The message: one LNet message instance through its lifecycle, and the message table
//! (`Messages`) holding every message alive, bounded by `Limits::messages`.
//!
//! lustre: include/linux/lnet/lib-types.h `struct lnet_msg`, lnet/lnet/lib-msg.c
//! (`lnet_msg_commit`, `lnet_finalize`), docs/protocol/semantics.md §11. As in Lustre, a received PUT is reused
//! as its ACK and a received GET as its REPLY.

use crate::addr::Nid;
use crate::engine::event::{EventKind, EventTemplate};
use crate::engine::health::HealthStatus;
use crate::engine::memory::Memory;
use crate::engine::ni::NiId;
use crate::engine::peer::PeerNiId;
use crate::engine::shares::{Keyed, Shares};
use crate::engine::slab::{Key, KeyPartitions, PartSlab};
use crate::engine::view::{Access, Exclusive};
use crate::time::Time;
use crate::wire::header::{Header, WireHandle};

/// A transmit the driver must carry out (see [`Engine::poll_transmit`](crate::engine::Engine::poll_transmit)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TxId(pub(crate) Key);

/// A receive the driver is carrying out (see [`Engine::handle_header`](crate::engine::Engine::handle_header)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RxId(pub(crate) Key);

impl RxId {
    /// The transmit this received message becomes if the engine sends it on: a message a
    /// router receives into a router buffer is forwarded as the same message (decision 0023),
    /// so a driver that keeps something per receive (bytes it did not write into the buffer)
    /// finds it again when the forward is handed to it.
    pub fn as_tx(self) -> TxId {
        TxId(self.0)
    }
}

/// Where a message is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Queued on its peer NI's credit queue.
    WaitPeerCredit,
    /// Queued on its NI's credit queue.
    WaitNiCredit,
    /// Holds its credits; waiting for the driver to poll it.
    TxReady,
    /// Handed to the driver; waiting for send completion.
    InLnd,
    /// Queued for the loopback LND.
    LoQueued,
    /// A loopback send waiting for its receive (delayed on a lazy portal).
    LoHeld,
    /// Waiting for the resend pass.
    ResendQueued,
    /// Header matched; the driver is filling the MD.
    Receiving,
    /// A PUT delayed on a lazy portal, its receive pending.
    Delayed,
    /// A PUT or GET held on its peer's pending queue until discovery completes
    /// (`LNET_DC_WAIT`), before any credit is taken.
    DiscoveryWait,
    /// A receive a delay rule holds (faults.rs), its payload unread.
    FaultHeld,
    /// A message to forward waiting for a router credit or buffer, its payload unread.
    RouterWait,
}

/// The paths (local NI, peer NI) a message's last sends failed on, newest last: with fast
/// failover on, selection tries every other path before one of these again
/// (docs/decisions/0008). Holds as many as `retry_count` can make.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct FailedPaths {
    /// Each path packed as `1 << 48 | ni << 32 | peer NI` (0: none), to keep messages small.
    paths: [u64; FailedPaths::CAPACITY],
}

impl FailedPaths {
    pub(crate) const CAPACITY: usize = 3;

    fn pack(ni: NiId, peer_ni: PeerNiId) -> u64 {
        1 << 48 | u64::from(ni.0) << 32 | u64::from(peer_ni.0)
    }

    pub(crate) fn record(&mut self, ni: NiId, peer_ni: PeerNiId) {
        if self.contains(ni, peer_ni) {
            return;
        }
        self.paths.rotate_left(1);
        if let Some(last) = self.paths.last_mut() {
            *last = Self::pack(ni, peer_ni);
        }
    }

    pub(crate) fn contains(&self, ni: NiId, peer_ni: PeerNiId) -> bool {
        self.paths.contains(&Self::pack(ni, peer_ni))
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.paths.iter().all(|path| *path == 0)
    }
}

/// Whether a message holds, waits for, or has no claim on a credit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Credit {
    None,
    /// Charged and queued.
    Waiting,
    Held,
}

#[derive(Debug)]
pub(crate) struct Message {
    /// The header as sent (tx) or as received (rx).
    pub(crate) header: Header,
    /// True while the message is a send (tx-committed), false while a receive.
    pub(crate) tx: bool,
    pub(crate) phase: Phase,
    /// The event its MD gets at finalize.
    pub(crate) event: Option<EventKind>,
    pub(crate) template: EventTemplate,
    pub(crate) md: Option<Key>,
    /// Where in the MD the payload starts, and how many bytes.
    pub(crate) md_offset: u32,
    pub(crate) length: u32,
    pub(crate) ni: NiId,
    pub(crate) peer_ni: Option<PeerNiId>,
    /// The NI a response must leave through (the one its request arrived on).
    pub(crate) response_ni: Option<NiId>,
    pub(crate) health: HealthStatus,
    pub(crate) retry_count: u32,
    /// Per-transmission (or reception) deadline (docs/protocol/semantics.md §4.4).
    pub(crate) deadline: Time,
    pub(crate) peer_credit: Credit,
    pub(crate) ni_credit: Credit,
    /// `msg_tx_cpt`: the partition whose tx queue of `ni` the NI credit is charged to, set
    /// when it is charged (the CPT of the next hop on `ni`).
    pub(crate) tx_cpt: u32,
    /// `msg_rx_cpt` of a message to forward: the partition (of the previous hop on the
    /// receiving NI) whose router buffer pools it takes its buffer from.
    pub(crate) rx_cpt: u32,
    /// Bytes charged to the peer NI's queue while holding a peer credit.
    pub(crate) charged_bytes: u32,
    /// An rx PUT whose initiator wants an ACK (and the MD allows it): the ACK's wire handle.
    pub(crate) ack_to: Option<WireHandle>,
    /// Loopback pairing: a lo rx knows its tx, a held lo tx knows its rx.
    pub(crate) lo_peer: Option<Key>,
    /// Bytes past the matched length the driver discards (truncation).
    pub(crate) discard: u32,
    /// `msg_no_resend`.
    pub(crate) no_resend: bool,
    /// Was resent at least once (for the successful/failed resend counters).
    pub(crate) resent: bool,
    /// The source NID the user asked for (`msg_src_nid_param`), kept for resends and for the
    /// send that follows discovery. Responses are pinned to the NI their request came in on.
    pub(crate) source: Option<Nid>,
    /// `msg_recovery`: a recovery ping, sent non-multi-rail to exactly its NID, never resent.
    pub(crate) recovery: bool,
    /// A send on this message's path failed and it is being resent: with fast failover on, a
    /// pinned message to a multi-rail peer then leaves the path (docs/decisions/0008).
    pub(crate) path_failed: bool,
    /// The paths its failed sends took.
    pub(crate) failed_paths: FailedPaths,
    /// Fast failover copied this transmit while the driver held it: its completion only
    /// gives back credits (the copy carries the event).
    pub(crate) abandoned: bool,
    /// A private copy of the payload (fast failover: an abandoned original, or a copy of a
    /// request that already left); `tx_payload` reads it instead of an MD.
    pub(crate) orphan: Option<Box<Memory>>,
    /// A fast-failover copy of a request that already left: the MD whose tracker it serves.
    pub(crate) tracked_md: Option<Key>,
    /// `msg_t_start`: the first commit (PUT egress latency).
    pub(crate) committed_at: Option<Time>,
    /// When the driver last took it (`poll_transmit`).
    pub(crate) lnd_at: Option<Time>,
    /// A received PUT with ACK, as the duplicate log knows it.
    pub(crate) delivery: Option<u64>,
    /// A transmit a delay rule held and released: `poll_transmit` hands it out without
    /// asking the delay rules again (faults.rs).
    pub(crate) fault_released: bool,
    /// `msg_routing`: received for another node and forwarded (routing.rs). The header's
    /// source and destination stay the originator's.
    pub(crate) routing: bool,
    /// `msg_rtr_nid_param`: the router a response goes back through (its request's last hop,
    /// as the peer NI it came from).
    pub(crate) router_hint: Option<PeerNiId>,
    /// The peer NI a forwarded message came from, once it is being sent on.
    pub(crate) rx_peer: Option<PeerNiId>,
    /// `msg_peerrtrcredit`: a router credit of the peer NI it came from.
    pub(crate) router_credit: Credit,
    /// `msg_rtrcredit`: a router buffer of its size class.
    pub(crate) buffer_credit: Credit,
    /// The router buffer the payload was received into and is sent from (empty for tiny).
    pub(crate) router_buffer: Option<Memory>,
    /// A receive whose destination (MD memory or router buffer) the driver holds
    /// (`Engine::rx_lend`) until it gives it back.
    pub(crate) payload_lent: bool,
}

impl Message {
    /// A message with nothing attached, charged or pinned yet: queued for path selection as a
    /// send, on no NI, with no deadline. Each constructor site states only what differs.
    #[inline]
    pub(crate) fn blank(header: Header, length: u32) -> Self {
        Self {
            header,
            tx: true,
            phase: Phase::ResendQueued,
            event: None,
            template: EventTemplate::EMPTY,
            md: None,
            md_offset: 0,
            length,
            ni: NiId::LOOPBACK,
            peer_ni: None,
            response_ni: None,
            health: HealthStatus::Ok,
            retry_count: 0,
            deadline: Time::MAX,
            peer_credit: Credit::None,
            ni_credit: Credit::None,
            tx_cpt: 0,
            rx_cpt: 0,
            charged_bytes: 0,
            ack_to: None,
            lo_peer: None,
            discard: 0,
            no_resend: false,
            resent: false,
            source: None,
            recovery: false,
            path_failed: false,
            failed_paths: FailedPaths::default(),
            abandoned: false,
            orphan: None,
            tracked_md: None,
            committed_at: None,
            lnd_at: None,
            delivery: None,
            fault_released: false,
            routing: false,
            router_hint: None,
            rx_peer: None,
            router_credit: Credit::None,
            buffer_credit: Credit::None,
            router_buffer: None,
            payload_lent: false,
        }
    }
}

/// One partition's messages alive (sends, receives, delayed PUTs), by key; [`TxId`] and
/// [`RxId`] name them to the driver. A message lives in its home partition, which its key
/// names: a send in its MD's (where the kernel attaches it to the MD, under
/// `lnet_res_lock(cpt)`), a receive in the partition of the NID it came from on its NI
/// (`lnet_parse()`'s `lnet_cpt_of_nid()`). Each partition holds at most `Limits::messages`,
/// as the kernel counts `msgs_alloc` per CPT.
#[derive(Debug)]
pub(crate) struct Messages {
    slab: PartSlab<Message>,
}

impl Messages {
    /// Partition `cpt`'s messages.
    pub(crate) fn new(cpt: u32, partitions: KeyPartitions) -> Self {
        Self { slab: PartSlab::new(cpt, partitions, u32::MAX) }
    }

    pub(crate) fn len(&self) -> usize {
        self.slab.len()
    }
}

impl Keyed for Messages {
    type Value = Message;

    fn slab(&self) -> &PartSlab<Message> {
        &self.slab
    }

    fn slab_mut(&mut self) -> &mut PartSlab<Message> {
        &mut self.slab
    }
}

impl<'a, A: Access> Shares<'a, A, Messages> {
    /// Messages alive in the partitions held.
    pub(crate) fn len(&self) -> usize {
        self.iter_shares().map(|(_, share)| share.len()).sum()
    }
}

impl<'a> Shares<'a, Exclusive, Messages> {
    /// Files a new message in partition `cpt`; `None` when `limit` messages are alive there
    /// (or keys ran out, or the call does not hold the partition).
    #[inline]
    pub(crate) fn alloc(&mut self, cpt: u32, message: Message, limit: usize) -> Option<Key> {
        let share = self.share_mut(cpt)?;
        if share.slab.len() >= limit {
            return None;
        }
        share.slab.insert(message)
    }

    /// Removes a finished message; `None` if it was already gone.
    pub(crate) fn free(&mut self, key: Key) -> Option<Message> {
        self.share_of_mut(key)?.slab.remove(key)
    }

    /// [`Self::free`] when the message itself is no longer needed; false if already gone.
    #[inline]
    pub(crate) fn discard(&mut self, key: Key) -> bool {
        self.share_of_mut(key).is_some_and(|share| share.slab.discard(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_paths_keep_the_newest_three() {
        let mut paths = FailedPaths::default();
        assert!(paths.is_empty());
        for peer in 0..4 {
            paths.record(NiId(1), PeerNiId(peer));
        }
        paths.record(NiId(1), PeerNiId(3));
        assert!(!paths.contains(NiId(1), PeerNiId(0)), "the oldest went");
        assert!((1..4).all(|peer| paths.contains(NiId(1), PeerNiId(peer))));
        assert!(!paths.contains(NiId(2), PeerNiId(1)));
        assert!(!paths.is_empty());
    }
}
