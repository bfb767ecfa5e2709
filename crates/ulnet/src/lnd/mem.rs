//! The in-process "mem" LND: nodes of one process exchanging LNet messages through a shared
//! [`MemFabric`], with the core's link model (latency, bandwidth, loss, partitions) applied on
//! real time. No sockets; useful to test the public API and multi-node behaviour.
//!
//! # Data path
//!
//! * Transmit (sender's core locked, any thread): ask the link model for the frame's fate. A
//!   delivered frame (header plus the sender's `TxId`, no payload) goes into the receiver's inbox
//!   with its arrival time and the receiver's I/O thread is rung; a frame to an unknown NID or
//!   across a partition fails at once with `RemoteDropped` (the connection is refused); a lost
//!   frame completes `Ok` (the sender cannot tell).
//! * Receive (receiver's I/O thread, when the frame is due): lock both cores (lock order), run
//!   `handle_header`, copy the payload once, straight from the sender's `tx_payload` slices into
//!   the receiver's `rx_segments_mut` (as a wire would), complete the receive, then the send.
//!   The send therefore completes on delivery, as socklnd's zero-copy sends complete on the
//!   peer's ZC-ACK; until then the sender's MD memory is the frame's payload.
//! * `Delay` (lazy portal): the frame stays at the head of its link, and that link (the
//!   "connection" from that sender) is not read until `poll_resume` names the receive: LNet's
//!   receive back-pressure. Other senders' links keep flowing.
//! * Frames within one link are delivered in order. Duplication in the link model is not
//!   reproduced: a transmit completes once, so there is no second payload to deliver.
//! * Timers: the receiver's I/O loop sleeps until the earliest due frame. tokio's timer has
//!   millisecond resolution, so latencies below the node's spin time are met by spinning and
//!   longer ones round up to the next millisecond.
//!
//! The frame's wire size for the link model is the 72-byte header plus the payload.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, Weak};

use ulnet_proto::addr::Nid;
use ulnet_proto::engine::{HealthStatus, NiId, RecvAction, Resume, RxId, Transmit, TxId};
use ulnet_proto::link_model::{EndpointId, Fate, LinkConfig, LinkModel};
use ulnet_proto::time::Time;
use ulnet_proto::wire::header::Header;

use crate::clock;
use crate::driver::{Core, Shared, Wakes, drain, leaf, lock_pair};
use crate::error::BuildError;
use crate::lnd::Lnd;

/// Bytes a header takes on the fabric (the classic 72-byte form), for serialization delay.
const HEADER_BYTES: usize = 72;

/// Most NIs ever attached to one fabric (attachments are not reused, so this bounds the
/// directory over the fabric's whole life).
pub const MAX_FABRIC_ENDPOINTS: usize = 1 << 16;

/// An in-process network: the NIs attached to it reach each other by NID.
///
/// Cheap to clone (clones share the fabric). Attach NIs with
/// [`NodeBuilder::mem_ni`](crate::NodeBuilder::mem_ni); shape links with
/// [`set_link`](Self::set_link) and [`set_partitioned`](Self::set_partitioned) at any time.
///
/// ```
/// use std::time::Duration;
/// use ulnet::*;
///
/// let fabric = MemFabric::new(LinkConfig::IDEAL);
/// let a = Node::builder().mem_ni("10.0.0.1@tcp".parse().unwrap(), &fabric).build().unwrap();
/// let b = Node::builder().mem_ni("10.0.0.2@tcp".parse().unwrap(), &fabric).build().unwrap();
/// let inbox = b.event_queue(8);
/// let buffer = MdSpec::new(Memory::new(vec![0; 5]))
///     .options(MdOptions::OP_PUT)
///     .threshold(Threshold::Count(1));
/// b.post(7, 0x42, buffer, &inbox).unwrap();
/// let to_b = ProcessId::new("10.0.0.2@tcp".parse().unwrap(), LNET_PID_LUSTRE);
/// let done = a
///     .put_and_wait_ack(to_b, 7, 0x42, Memory::new(b"hello".to_vec()), Duration::from_secs(10))
///     .unwrap();
/// assert_eq!(done.event.mlength, 5);
/// let put = inbox.recv_timeout(Duration::from_secs(10)).unwrap();
/// assert_eq!(put.memory.unwrap().to_vec(), b"hello");
/// ```
#[derive(Clone)]
pub struct MemFabric {
    shared: Arc<FabricShared>,
}

/// Counters of a [`MemFabric`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FabricStats {
    /// Transmits handed to the fabric.
    pub frames_sent: u64,
    /// Frames whose header reached the receiving core.
    pub frames_delivered: u64,
    /// Frames the link model lost (the send still completed `Ok`).
    pub frames_lost: u64,
    /// Transmits refused: unknown NID, partition, or a receiver that shut down.
    pub frames_refused: u64,
    /// Headers the receiving core refused as malformed.
    pub protocol_errors: u64,
}

/// Shaping a [`MemFabric`] link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FabricError {
    #[error("NID {0} is not attached to this fabric")]
    UnknownNid(Nid),
}

impl MemFabric {
    /// A fabric whose links all behave as `link`, with seed 0 for the loss model.
    pub fn new(link: LinkConfig) -> Self {
        Self::with_seed(0, link)
    }

    /// A fabric with a chosen seed for the link model's random choices (loss).
    pub fn with_seed(seed: u64, link: LinkConfig) -> Self {
        Self {
            shared: Arc::new(FabricShared {
                state: Mutex::new(FabricState {
                    model: LinkModel::new(seed, link),
                    endpoints: Vec::new(),
                    by_nid: HashMap::new(),
                }),
                counters: FabricCounters::default(),
            }),
        }
    }

    /// Changes every link without an override of its own.
    pub fn set_default_link(&self, link: LinkConfig) {
        self.shared.lock().model.set_default_link(link);
    }

    /// Overrides the directed link `from -> to`.
    pub fn set_link(&self, from: Nid, to: Nid, link: LinkConfig) -> Result<(), FabricError> {
        let mut state = self.shared.lock();
        let (from, to) = (state.endpoint(from)?, state.endpoint(to)?);
        state.model.set_link(from, to, link);
        Ok(())
    }

    /// Cuts (`true`) or heals both directions between `a` and `b`; sends across a cut fail with
    /// `RemoteDropped`.
    pub fn set_partitioned(&self, a: Nid, b: Nid, partitioned: bool) -> Result<(), FabricError> {
        let mut state = self.shared.lock();
        let (a, b) = (state.endpoint(a)?, state.endpoint(b)?);
        state.model.set_partitioned(a, b, partitioned);
        Ok(())
    }

    pub fn stats(&self) -> FabricStats {
        let counters = &self.shared.counters;
        FabricStats {
            frames_sent: counters.sent.load(Ordering::Relaxed),
            frames_delivered: counters.delivered.load(Ordering::Relaxed),
            frames_lost: counters.lost.load(Ordering::Relaxed),
            frames_refused: counters.refused.load(Ordering::Relaxed),
            protocol_errors: counters.protocol_errors.load(Ordering::Relaxed),
        }
    }

    /// Attaches NI `ni` with `nid`: the returned LND serves it. The node is set later with
    /// [`MemLnd::set_node`], once it exists.
    pub(crate) fn attach(&self, nid: Nid, ni: NiId) -> Result<Arc<MemLnd>, BuildError> {
        let mut state = self.shared.lock();
        if state.by_nid.contains_key(&nid) {
            return Err(BuildError::FabricNidTaken(nid));
        }
        if state.endpoints.len() >= MAX_FABRIC_ENDPOINTS {
            return Err(BuildError::FabricFull);
        }
        let endpoint = state.endpoints.len();
        let lnd = Arc::new(MemLnd {
            fabric: Arc::clone(&self.shared),
            endpoint,
            nid,
            ni,
            node: OnceLock::new(),
            inbox: Mutex::new(Inbox::default()),
            links: Mutex::new(BTreeMap::new()),
        });
        state.endpoints.push(Arc::clone(&lnd));
        state.by_nid.insert(nid, endpoint);
        Ok(lnd)
    }
}

impl fmt::Debug for MemFabric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemFabric").field("stats", &self.stats()).finish()
    }
}

// ------------------------------------------------------------------------------- internals

struct FabricShared {
    state: Mutex<FabricState>,
    counters: FabricCounters,
}

#[derive(Default)]
struct FabricCounters {
    sent: AtomicU64,
    delivered: AtomicU64,
    lost: AtomicU64,
    refused: AtomicU64,
    protocol_errors: AtomicU64,
}

struct FabricState {
    model: LinkModel,
    /// Every attachment ever made, by endpoint id (the link model's index).
    endpoints: Vec<Arc<MemLnd>>,
    /// Live attachments.
    by_nid: HashMap<Nid, EndpointId>,
}

impl FabricState {
    fn endpoint(&self, nid: Nid) -> Result<EndpointId, FabricError> {
        self.by_nid.get(&nid).copied().ok_or(FabricError::UnknownNid(nid))
    }
}

impl FabricShared {
    fn lock(&self) -> MutexGuard<'_, FabricState> {
        // Leaf lock; nothing panics while holding it.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A header on its way, with the transmit whose payload it carries.
pub(crate) struct Frame {
    from: EndpointId,
    from_nid: Nid,
    sender: Weak<Shared>,
    tx: TxId,
    header: Header,
    /// When it arrives.
    at: Time,
}

/// What other threads hand this LND: frames to deliver, delayed receives that may resume.
#[derive(Default)]
struct Inbox {
    frames: Vec<Frame>,
    resumes: Vec<Resume>,
    /// The node shut down: pushes are refused.
    closed: bool,
}

/// The frames from one sender endpoint: one "connection".
#[derive(Default)]
struct Link {
    frames: VecDeque<Frame>,
    /// The head frame was delayed (lazy portal): nothing is read from this link until its
    /// resume arrives.
    parked: Option<RxId>,
}

/// The mem LND of one NI.
pub(crate) struct MemLnd {
    fabric: Arc<FabricShared>,
    endpoint: EndpointId,
    nid: Nid,
    ni: NiId,
    node: OnceLock<Weak<Shared>>,
    inbox: Mutex<Inbox>,
    /// Used by the owning node's I/O thread only (a mutex for `Sync`; never contended).
    links: Mutex<BTreeMap<EndpointId, Link>>,
}

impl fmt::Debug for MemLnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemLnd")
            .field("nid", &self.nid)
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

/// What happened to the head frame of a link.
enum Delivered {
    Done,
    Parked(RxId),
}

impl MemLnd {
    pub(crate) fn set_node(&self, node: Weak<Shared>) {
        let _ = self.node.set(node);
    }

    fn node(&self) -> Option<Arc<Shared>> {
        self.node.get().and_then(Weak::upgrade)
    }

    fn lock_inbox(&self) -> MutexGuard<'_, Inbox> {
        self.inbox.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock_links(&self) -> MutexGuard<'_, BTreeMap<EndpointId, Link>> {
        self.links.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Leaves the fabric: the NID is free again and pushes are refused. Returns what was
    /// waiting in the inbox.
    pub(crate) fn detach(&self) -> (Vec<Frame>, Vec<Resume>) {
        let pending = {
            let mut inbox = self.lock_inbox();
            inbox.closed = true;
            (std::mem::take(&mut inbox.frames), std::mem::take(&mut inbox.resumes))
        };
        let mut state = self.fabric.lock();
        if state.by_nid.get(&self.nid) == Some(&self.endpoint) {
            state.by_nid.remove(&self.nid);
        }
        pending
    }

    /// Queues a frame for this NI; false if the node shut down.
    fn push(&self, frame: Frame) -> bool {
        let mut inbox = self.lock_inbox();
        if inbox.closed {
            return false;
        }
        inbox.frames.push(frame);
        true
    }

    /// Delivers the due frames of one link, holding both cores for the whole batch (every frame
    /// of a link has the same sender).
    fn deliver_link(&self, node: &Arc<Shared>, link: &mut Link, now: Time) {
        let Some(head) = link.frames.front() else {
            return;
        };
        if link.parked.is_some() || head.at > now {
            return;
        }
        let Some(sender) = head.sender.upgrade() else {
            // The sender is gone; shutdown already failed its transmits.
            link.frames.clear();
            return;
        };
        let mut wakes = Wakes::default();
        if Arc::ptr_eq(&sender, node) {
            // To one of our own NIDs (a self peer): one core sends and receives.
            let mut core = node.lock();
            while let Some(frame) = link.frames.front() {
                if frame.at > now {
                    break;
                }
                match self.deliver_to_self(&mut core, frame, now) {
                    Delivered::Done => {
                        link.frames.pop_front();
                    }
                    Delivered::Parked(rx) => {
                        link.parked = Some(rx);
                        break;
                    }
                }
            }
            drain(node, &mut core, now, &mut wakes);
            drop(core);
            wakes.finish();
            return;
        }
        {
            let (mut receiver, mut sender_core) = lock_pair(node, &sender);
            while let Some(frame) = link.frames.front() {
                if frame.at > now {
                    break;
                }
                match self.deliver(&mut receiver, &mut sender_core, frame, now) {
                    Delivered::Done => {
                        link.frames.pop_front();
                    }
                    Delivered::Parked(rx) => {
                        link.parked = Some(rx);
                        break;
                    }
                }
            }
            drain(node, &mut receiver, now, &mut wakes);
            drain(&sender, &mut sender_core, now, &mut wakes);
        }
        wakes.finish();
    }

    /// One frame: header into the receiving core, then the payload as the core directs.
    fn deliver(
        &self,
        receiver: &mut Core,
        sender: &mut Core,
        frame: &Frame,
        now: Time,
    ) -> Delivered {
        if sender.closed {
            return Delivered::Done;
        }
        if receiver.closed {
            sender.complete_send(now, frame.tx, HealthStatus::RemoteDropped);
            return Delivered::Done;
        }
        self.fabric.counters.delivered.fetch_add(1, Ordering::Relaxed);
        match receiver.engine.handle_header(now, self.ni, frame.from_nid, &frame.header) {
            RecvAction::Deliver { rx, length, .. } => {
                let status = copy_payload(sender, frame.tx, receiver, rx, length);
                receiver.complete_recv(now, rx, status);
                sender.complete_send(now, frame.tx, HealthStatus::Ok);
                Delivered::Done
            }
            RecvAction::Discard { .. } => {
                sender.complete_send(now, frame.tx, HealthStatus::Ok);
                Delivered::Done
            }
            RecvAction::Delay { rx } => {
                leaf(&receiver.delayed).insert(rx, self.ni);
                Delivered::Parked(rx)
            }
            RecvAction::ProtocolError(error) => {
                // A real LND closes the connection; here the one frame fails.
                self.fabric.counters.protocol_errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%error, from = %frame.from_nid, "fabric frame refused");
                sender.complete_send(now, frame.tx, HealthStatus::RemoteError);
                Delivered::Done
            }
        }
    }

    /// [`Self::deliver`] when the sender is this node: the payload goes through a copy, as
    /// the sender's MD and the receiver's are in the same core.
    fn deliver_to_self(&self, core: &mut Core, frame: &Frame, now: Time) -> Delivered {
        if core.closed {
            return Delivered::Done;
        }
        self.fabric.counters.delivered.fetch_add(1, Ordering::Relaxed);
        match core.engine.handle_header(now, self.ni, frame.from_nid, &frame.header) {
            RecvAction::Deliver { rx, length, .. } => {
                let status = copy_within(core, frame.tx, rx, length);
                core.complete_recv(now, rx, status);
                core.complete_send(now, frame.tx, HealthStatus::Ok);
                Delivered::Done
            }
            RecvAction::Discard { .. } => {
                core.complete_send(now, frame.tx, HealthStatus::Ok);
                Delivered::Done
            }
            RecvAction::Delay { rx } => {
                leaf(&core.delayed).insert(rx, self.ni);
                Delivered::Parked(rx)
            }
            RecvAction::ProtocolError(error) => {
                self.fabric.counters.protocol_errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%error, from = %frame.from_nid, "fabric frame refused");
                core.complete_send(now, frame.tx, HealthStatus::RemoteError);
                Delivered::Done
            }
        }
    }

    /// A delayed receive has its answer: finish the parked head frame and unpark its link.
    fn resume_link(&self, node: &Arc<Shared>, link: &mut Link, resume: Resume, now: Time) {
        link.parked = None;
        let Some(frame) = link.frames.pop_front() else {
            return;
        };
        let mut wakes = Wakes::default();
        match frame.sender.upgrade() {
            Some(sender) if Arc::ptr_eq(&sender, node) => {
                let mut core = node.lock();
                if !core.closed {
                    match resume.action {
                        RecvAction::Deliver { rx, length, .. } => {
                            let status = copy_within(&mut core, frame.tx, rx, length);
                            core.complete_recv(now, rx, status);
                            core.complete_send(now, frame.tx, HealthStatus::Ok);
                        }
                        _ => {
                            core.complete_send(now, frame.tx, HealthStatus::Ok);
                        }
                    }
                    drain(node, &mut core, now, &mut wakes);
                }
            }
            Some(sender) => {
                let (mut receiver, mut sender_core) = lock_pair(node, &sender);
                let live = !sender_core.closed;
                match resume.action {
                    RecvAction::Deliver { rx, length, .. } if live => {
                        let status =
                            copy_payload(&mut sender_core, frame.tx, &mut receiver, rx, length);
                        receiver.complete_recv(now, rx, status);
                        sender_core.complete_send(now, frame.tx, HealthStatus::Ok);
                    }
                    RecvAction::Deliver { rx, .. } => {
                        receiver.complete_recv(now, rx, HealthStatus::RemoteDropped);
                    }
                    _ if live => {
                        sender_core.complete_send(now, frame.tx, HealthStatus::Ok);
                    }
                    _ => {}
                }
                drain(node, &mut receiver, now, &mut wakes);
                drain(&sender, &mut sender_core, now, &mut wakes);
            }
            None => {
                if let RecvAction::Deliver { rx, .. } = resume.action {
                    let mut receiver = node.lock();
                    receiver.complete_recv(now, rx, HealthStatus::RemoteDropped);
                    drain(node, &mut receiver, now, &mut wakes);
                }
            }
        }
        wakes.finish();
    }

    /// Fails a frame back to its sender: we shut down before reading it.
    fn refuse(&self, frame: Frame, now: Time) {
        let Some(sender) = frame.sender.upgrade() else {
            return;
        };
        if self.node().is_some_and(|node| Arc::ptr_eq(&node, &sender)) {
            return;
        }
        self.fabric.counters.refused.fetch_add(1, Ordering::Relaxed);
        let mut wakes = Wakes::default();
        {
            let mut core = sender.lock();
            if !core.closed {
                core.complete_send(now, frame.tx, HealthStatus::RemoteDropped);
                drain(&sender, &mut core, now, &mut wakes);
            }
        }
        wakes.finish();
    }
}

impl Lnd for MemLnd {
    fn transmit(
        &self,
        node: &Arc<Shared>,
        core: &mut Core,
        now: Time,
        transmit: Transmit,
        wakes: &mut Wakes,
    ) {
        let counters = &self.fabric.counters;
        counters.sent.fetch_add(1, Ordering::Relaxed);
        let length = HEADER_BYTES + transmit.header.payload_length as usize;
        let route = {
            let mut state = self.fabric.lock();
            state.by_nid.get(&transmit.next_hop).copied().and_then(|to| {
                let verdict = state.model.transmit(now, self.endpoint, to, length);
                state.endpoints.get(to).cloned().map(|target| (verdict.fate, target))
            })
        };
        let status = match route {
            Some((Fate::Delivered { at, .. }, target)) => {
                let frame = Frame {
                    from: self.endpoint,
                    from_nid: self.nid,
                    sender: Arc::downgrade(node),
                    tx: transmit.tx,
                    header: transmit.header,
                    at,
                };
                if target.push(frame) {
                    if let Some(peer) = target.node() {
                        wakes.ring(&peer);
                    }
                    return;
                }
                HealthStatus::RemoteDropped
            }
            Some((Fate::Lost, _)) => {
                counters.lost.fetch_add(1, Ordering::Relaxed);
                HealthStatus::Ok
            }
            // Nobody has that NID, a partition, or a receiver that shut down: refused.
            Some((Fate::Unreachable, _)) | None => HealthStatus::RemoteDropped,
        };
        if status != HealthStatus::Ok {
            counters.refused.fetch_add(1, Ordering::Relaxed);
        }
        core.complete_send(now, transmit.tx, status);
    }

    fn resume(
        &self,
        node: &Arc<Shared>,
        _core: &mut Core,
        _now: Time,
        resume: Resume,
        wakes: &mut Wakes,
    ) {
        // Finishing the parked frame needs the sender's core too: the I/O thread does it.
        self.lock_inbox().resumes.push(resume);
        wakes.ring(node);
    }

    fn poll(&self, node: &Arc<Shared>, _now: Time) -> Option<Time> {
        let (frames, resumes) = {
            let mut inbox = self.lock_inbox();
            (std::mem::take(&mut inbox.frames), std::mem::take(&mut inbox.resumes))
        };
        let mut links = self.lock_links();
        for frame in frames {
            links.entry(frame.from).or_default().frames.push_back(frame);
        }
        let now = clock::now();
        for resume in resumes {
            let parked = links.values_mut().find(|link| link.parked == Some(resume.rx));
            if let Some(link) = parked {
                self.resume_link(node, link, resume, now);
            }
        }
        let mut next: Option<Time> = None;
        for link in links.values_mut() {
            self.deliver_link(node, link, now);
            if link.parked.is_none() {
                if let Some(head) = link.frames.front() {
                    next = Some(next.map_or(head.at, |next| next.min(head.at)));
                }
            }
        }
        links.retain(|_, link| !link.frames.is_empty());
        next
    }

    fn shutdown(&self, node: &Arc<Shared>, now: Time) {
        let (pending, resumes) = self.detach();
        // Receives the core was told to fill will not be: fail them.
        let mut wakes = Wakes::default();
        {
            let mut core = node.lock();
            for resume in resumes {
                if let RecvAction::Deliver { rx, .. } = resume.action {
                    core.complete_recv(now, rx, HealthStatus::LocalError);
                }
            }
            drain(node, &mut core, now, &mut wakes);
        }
        wakes.finish();
        let links = std::mem::take(&mut *self.lock_links());
        for frame in links.into_values().flat_map(|link| link.frames).chain(pending) {
            self.refuse(frame, now);
        }
    }
}

/// Copies a payload from the sender's MD into the receiver's: the one copy a wire makes.
fn copy_payload(
    sender: &mut Core,
    tx: TxId,
    receiver: &mut Core,
    rx: RxId,
    length: u32,
) -> HealthStatus {
    let Ok(source) = sender.engine.tx_payload(tx) else {
        return HealthStatus::RemoteDropped;
    };
    let Ok(target) = receiver.engine.rx_segments_mut(rx) else {
        return HealthStatus::LocalError;
    };
    fill(source, target, length)
}

/// [`copy_payload`] within one core (a message to ourselves): the payload is read out first.
fn copy_within(core: &mut Core, tx: TxId, rx: RxId, length: u32) -> HealthStatus {
    let Ok(source) = core.engine.tx_payload(tx) else {
        return HealthStatus::RemoteDropped;
    };
    let bytes: Vec<u8> = source.flat_map(|slice| slice.iter().copied()).collect();
    let Ok(target) = core.engine.rx_segments_mut(rx) else {
        return HealthStatus::LocalError;
    };
    fill(std::iter::once(bytes.as_slice()), target, length)
}

/// Copies `source`'s slices into `target`'s, in order; Ok when `length` bytes went.
fn fill<'s, 't>(
    source: impl Iterator<Item = &'s [u8]>,
    target: impl IntoIterator<Item = &'t mut [u8]>,
    length: u32,
) -> HealthStatus {
    let mut source = source;
    let mut current: &[u8] = &[];
    let mut copied = 0usize;
    'target: for slice in target {
        let mut slice = slice;
        while !slice.is_empty() {
            if current.is_empty() {
                match source.next() {
                    Some(next) => current = next,
                    None => break 'target,
                }
                continue;
            }
            let count = slice.len().min(current.len());
            // `count` is at most both lengths, so neither split panics.
            let (into, rest) = std::mem::take(&mut slice).split_at_mut(count);
            let (from, remaining) = current.split_at(count);
            into.copy_from_slice(from);
            slice = rest;
            current = remaining;
            copied += count;
        }
    }
    if copied == length as usize { HealthStatus::Ok } else { HealthStatus::RemoteError }
}
