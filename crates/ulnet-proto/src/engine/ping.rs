//! The ping, push and discovery part: the ping target (our ping buffer, served to every ping
//! GET), the push target (where discovering peers PUT theirs), the API pings in flight
//! (`Pings`), and discovery's request queue and waiters (`Discoveries`). What LNet does with
//! them is in `reserved.rs`
//! (targets and pings) and `discovery.rs` (the discovery pass).
//!
//! lustre: lnet/lnet/api-ni.c (`ln_ping_target`, `ln_push_target`, `lnet_ping`), peer.c
//! (`ln_dc_request`), docs/protocol/wire.md §6.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::addr::Nid;
use crate::engine::event::{Event, EventStatus};
use crate::engine::md::MdOwner;
use crate::engine::me::ProcessId;
use crate::engine::peer::{PeerId, PeerInfo};
use crate::engine::slab::Key;
use crate::time::Time;
use crate::wire::ping::{
    LNET_INTERFACES_MAX, LNET_PING_BUFFER_MAX, LNET_PING_INFO_MIN_SIZE, PingError, PingInfo,
};

/// Most pings started with [`Engine::ping`](crate::engine::Engine::ping) waiting for their answer
/// at once (Lustre has no bound; each is a user thread there).
pub const MAX_PINGS: usize = 1024;
/// The sink of an API ping: `lnetctl ping`'s 16 + 24 × `lnet_interfaces_max`, capped at
/// `LNET_PING_BUFFER_MAX` (docs/protocol/wire.md §6.3; lustre: api-ni.c `lnet_ping()`).
pub const PING_SINK: u32 = LNET_PING_BUFFER_MAX as u32;
/// Largest sink a ping (API retry or discovery) grows to when a peer claims a bigger buffer:
/// every interface as a 24-byte large entry plus the header. A claim beyond it stays truncated.
pub const MAX_PING_SINK: u32 = 16 + 24 * LNET_INTERFACES_MAX;

/// Most [`Engine::discover`](crate::engine::Engine::discover) calls waited on at once.
pub const MAX_DISCOVERIES: usize = 1024;
/// A ping started with [`Engine::ping`](crate::engine::Engine::ping); its [`PingResult`] carries
/// the same id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PingId(pub u64);

/// A ping's answer: the peer's validated ping buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PingReply {
    pub info: PingInfo,
    /// The peer's primary NID as discovery would pick it (`find_primary`).
    pub primary_nid: Option<Nid>,
    /// The NID the REPLY came from.
    pub replier: Nid,
    /// Bytes the REPLY carried.
    pub length: u32,
}

/// Why a ping failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PingFailure {
    /// No REPLY within the timeout (the MD was unlinked, as `lnet_ping` does).
    #[error("no reply before the timeout")]
    TimedOut,
    /// The GET could not be sent (its SEND event's status).
    #[error("GET failed: {0:?}")]
    Send(EventStatus),
    /// The REPLY failed on arrival.
    #[error("REPLY failed: {0:?}")]
    Reply(EventStatus),
    /// The REPLY is not an acceptable ping buffer (still truncated after the one retry, or
    /// corrupt).
    #[error("bad ping buffer: {0}")]
    BadBuffer(PingError),
}

/// The outcome of [`Engine::ping`](crate::engine::Engine::ping).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PingResult {
    pub id: PingId,
    pub target: ProcessId,
    pub outcome: Result<PingReply, PingFailure>,
}

/// A finished ping or discovery, from
/// [`Engine::poll_completion`](crate::engine::Engine::poll_completion).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PingCompletion {
    Ping(PingResult),
    Discovery(DiscoveryResult),
}

/// The node's ping buffer and the MD serving it (`ln_ping_target`, `ln_ping_target_md`).
#[derive(Debug)]
pub(crate) struct PingTarget {
    info: PingInfo,
    bytes: Vec<u8>,
    md: Option<Key>,
}

impl PingTarget {
    /// The buffer served (entry 0's sequence number in `sequence`).
    pub(crate) fn info(&self) -> &PingInfo {
        &self.info
    }

    /// The buffer's wire bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The MD serving the buffer.
    pub(crate) fn md(&self) -> Option<Key> {
        self.md
    }

    /// Installs a new buffer served by `md`; returns the MD it replaces.
    pub(crate) fn install(
        &mut self,
        info: PingInfo,
        bytes: Vec<u8>,
        md: Option<Key>,
    ) -> Option<Key> {
        self.info = info;
        self.bytes = bytes;
        std::mem::replace(&mut self.md, md)
    }

    /// Rewrites the buffer in place (same MD, same length).
    pub(crate) fn rewrite(&mut self, info: PingInfo, bytes: Vec<u8>) {
        self.info = info;
        self.bytes = bytes;
    }
}

/// The push target (`ln_push_target`, `ln_push_target_nbytes`).
#[derive(Debug)]
pub(crate) struct PushTarget {
    md: Option<Key>,
    /// The size wanted: grown by truncated pushes and ping replies.
    size: u32,
    /// The size of the posted buffer.
    posted: u32,
    /// The posted buffer took a push and must be posted again (`pb_needs_post`).
    needs_post: bool,
}

impl PushTarget {
    /// The size a new buffer is posted with.
    pub(crate) fn size(&self) -> u32 {
        self.size
    }

    /// A peer's buffer of `size` bytes did not fit: the next post is at least that big
    /// (up to [`MAX_PING_SINK`]).
    pub(crate) fn grow(&mut self, size: u32) {
        self.size = self.size.max(size.min(MAX_PING_SINK));
    }

    /// Whether a buffer must be posted: it is too small, or it took a push.
    pub(crate) fn wants_post(&self) -> bool {
        self.size > self.posted || self.needs_post
    }

    /// A buffer of [`Self::size`] is posted as `md`; returns the MD it replaces.
    pub(crate) fn posted(&mut self, md: Option<Key>) -> Option<Key> {
        self.needs_post = false;
        self.posted = self.size;
        std::mem::replace(&mut self.md, md)
    }

    /// `md` was unlinked; if it is the posted buffer, a new one is needed.
    pub(crate) fn unlinked(&mut self, md: Key) {
        if self.md == Some(md) {
            self.md = None;
            self.needs_post = true;
        }
    }
}

/// One API ping (`struct ping_data`).
#[derive(Debug)]
pub(crate) struct PingState {
    pub(crate) target: ProcessId,
    pub(crate) source: Option<Nid>,
    pub(crate) deadline: Time,
    pub(crate) md: Option<Key>,
    pub(crate) retried: bool,
    /// The REPLY's bytes and sender, once it arrived.
    pub(crate) reply: Option<(Vec<u8>, Nid)>,
    pub(crate) failure: Option<PingFailure>,
}

/// An event of one of LNet's own MDs, with the bytes a REPLY or PUT brought.
#[derive(Debug)]
pub(crate) struct InternalEvent {
    pub(crate) owner: MdOwner,
    pub(crate) md: Key,
    pub(crate) event: Event,
    pub(crate) data: Vec<u8>,
}

/// The API pings in flight, by id, with their deadlines.
#[derive(Debug, Default)]
pub(crate) struct Pings {
    pings: BTreeMap<u64, PingState>,
    deadlines: BTreeSet<(Time, u64)>,
    last_id: u64,
}

impl Pings {
    pub(crate) fn len(&self) -> usize {
        self.pings.len()
    }

    /// Files a new ping under the next id.
    pub(crate) fn start(&mut self, state: PingState) -> u64 {
        self.last_id += 1;
        let id = self.last_id;
        self.deadlines.insert((state.deadline, id));
        self.pings.insert(id, state);
        id
    }

    pub(crate) fn get(&self, id: u64) -> Option<&PingState> {
        self.pings.get(&id)
    }

    pub(crate) fn get_mut(&mut self, id: u64) -> Option<&mut PingState> {
        self.pings.get_mut(&id)
    }

    /// Removes a ping (and its deadline).
    pub(crate) fn finish(&mut self, id: u64) -> Option<PingState> {
        let state = self.pings.remove(&id)?;
        self.deadlines.remove(&(state.deadline, id));
        Some(state)
    }

    /// The earliest deadline.
    pub(crate) fn deadline(&self) -> Option<Time> {
        self.deadlines.first().map(|(deadline, _)| *deadline)
    }

    /// Takes the earliest ping whose deadline passed at `now`; it stays in the table.
    pub(crate) fn pop_expired(&mut self, now: Time) -> Option<u64> {
        let &(deadline, id) = self.deadlines.first()?;
        if deadline > now {
            return None;
        }
        self.deadlines.pop_first();
        Some(id)
    }
}

impl Default for PushTarget {
    fn default() -> Self {
        Self {
            md: None,
            // lustre: api-ni.c lnet_push_target_init(): start at LNET_PING_INFO_MIN_SIZE.
            size: LNET_PING_INFO_MIN_SIZE as u32,
            posted: 0,
            needs_post: false,
        }
    }
}

impl Default for PingTarget {
    fn default() -> Self {
        Self {
            info: PingInfo {
                features: 0,
                pid: 0,
                sequence: 0,
                nids: Vec::new(),
                large: Vec::new(),
                metadata: Vec::new(),
            },
            bytes: Vec::new(),
            md: None,
        }
    }
}

/// A discovery started with [`Engine::discover`](crate::engine::Engine::discover).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DiscoveryId(pub u64);

/// The outcome of [`Engine::discover`](crate::engine::Engine::discover): what the node now knows of
/// the peer owning `nid`, or the error discovery ended with (the status its held messages failed
/// with).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiscoveryResult {
    pub id: DiscoveryId,
    pub nid: Nid,
    pub outcome: Result<PeerInfo, EventStatus>,
}

/// A [`Engine::discover`](crate::engine::Engine::discover) call waiting for its peer's discovery to
/// end.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DiscoverWaiter {
    pub(crate) id: u64,
    pub(crate) nid: Nid,
}

/// The discovery pass's request queue (`ln_dc_request`) and the callers of
/// [`Engine::discover`](crate::engine::Engine::discover) waiting for their answer.
#[derive(Debug, Default)]
pub(crate) struct Discoveries {
    requests: VecDeque<PeerId>,
    waiters: Vec<DiscoverWaiter>,
    last_id: u64,
    /// The last NID discovery refused to attach (docs/decisions/0016).
    pub(crate) last_refused: Option<RefusedNid>,
}

/// A NID a peer's ping reply or push listed that discovery did not attach to it
/// ([`Engine::last_refused_nid`](crate::engine::Engine::last_refused_nid)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RefusedNid {
    /// The primary NID of the peer whose data listed it.
    pub peer: Nid,
    pub nid: Nid,
    pub reason: RefusedReason,
}

/// Why discovery refused a NID.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RefusedReason {
    /// One of this node's own NIDs.
    #[error("it is one of ours")]
    Local,
    /// One of this node's own NIDs named primary: the whole buffer was refused.
    #[error("it is one of ours, named primary: the whole buffer was refused")]
    LocalPrimary,
    /// Data for a peer that traffic created for one of our own NIDs (`peer` is ours, `nid` the
    /// primary the buffer named): the whole buffer was refused.
    #[error("the peer is one of our own NIDs: the whole buffer was refused")]
    LocalPeer,
    /// A NID of another peer that configuration owns (the kernel's `-EEXIST`).
    #[error("another peer has it configured")]
    ConfiguredElsewhere,
}

impl Discoveries {
    /// Queues `peer` for the discovery pass, at the head when `front` (`list_move`).
    pub(crate) fn request(&mut self, peer: PeerId, front: bool) {
        if front {
            self.requests.push_front(peer);
        } else {
            self.requests.push_back(peer);
        }
    }

    pub(crate) fn has_requests(&self) -> bool {
        !self.requests.is_empty()
    }

    pub(crate) fn pop_request(&mut self) -> Option<PeerId> {
        self.requests.pop_front()
    }

    pub(crate) fn waiter_count(&self) -> usize {
        self.waiters.len()
    }

    /// Files a waiter for `nid` under the next id.
    pub(crate) fn add_waiter(&mut self, nid: Nid) -> u64 {
        self.last_id += 1;
        self.waiters.push(DiscoverWaiter { id: self.last_id, nid });
        self.last_id
    }

    pub(crate) fn waiter(&self, index: usize) -> Option<DiscoverWaiter> {
        self.waiters.get(index).copied()
    }

    /// Removes the waiter at `index`; the last one takes its place.
    pub(crate) fn remove_waiter(&mut self, index: usize) {
        self.waiters.swap_remove(index);
    }
}
