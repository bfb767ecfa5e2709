//! What the engine hands the driver: the queues that the `poll_*` calls of the call protocol
//! drain (decision 0003), and the types they carry. Transmits ready to go, delayed receives
//! that can proceed, user events (bounded by `Limits::events`), finished pings and
//! discoveries, and connections to reset.

use std::collections::VecDeque;

use crate::addr::Nid;
use crate::engine::error::ParseError;
use crate::engine::event::Event;
use crate::engine::msg::{RxId, TxId};
use crate::engine::ni::NiId;
use crate::engine::ping::PingCompletion;
use crate::engine::shares::Shares;
use crate::engine::slab::Key;
use crate::engine::view::{Access, Exclusive};
use crate::wire::header::Header;

/// Where the payload of a received message goes: the core's answer to
/// [`Engine::handle_header`](crate::engine::Engine::handle_header).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecvAction {
    /// Read `length` payload bytes into the MD (through
    /// [`Engine::rx_segments_mut`](crate::engine::Engine::rx_segments_mut) or
    /// [`Engine::rx_write`](crate::engine::Engine::rx_write)), then skip `discard` more (a
    /// truncated message), then call
    /// [`Engine::handle_recv_done`](crate::engine::Engine::handle_recv_done).
    Deliver { rx: RxId, length: u32, discard: u32 },
    /// The core is done with this message: skip `length` payload bytes. Nothing else to call.
    Discard { length: u32 },
    /// No buffer yet (a lazy portal, or a router credit or buffer for a message to forward):
    /// leave the payload unread and stop reading this connection
    /// (back-pressure) until [`Engine::poll_resume`](crate::engine::Engine::poll_resume) names this
    /// `rx`.
    Delay { rx: RxId },
    /// The header is malformed for LNet: close the connection.
    ProtocolError(ParseError),
}

/// A delayed receive that now has an answer (from
/// [`Engine::poll_resume`](crate::engine::Engine::poll_resume)); `action` is `Deliver` or
/// `Discard`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resume {
    pub rx: RxId,
    pub action: RecvAction,
}

/// A message for the driver to send (from
/// [`Engine::poll_transmit`](crate::engine::Engine::poll_transmit)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transmit {
    pub tx: TxId,
    /// The local NI to send from.
    pub ni: NiId,
    /// The peer NI to send to (the connection's remote NID).
    pub next_hop: Nid,
    /// The CPT the kernel would run this message on (`msg_tx_cpt`, the hash of `next_hop`
    /// over the NI's partitions): what a driver shards by.
    pub cpt: u32,
    pub header: Header,
}

/// What a driver is asked to do about a path fast failover gave up on, or a local NI whose
/// link went down: close the connections (`peer: None`, every connection of the NI), so
/// that what they hold fails back to the core (and is resent elsewhere if it may be)
/// instead of waiting for the LND's own timeout.
/// lustre: socklnd.c `ksocknal_handle_link_state_change()` closes a downed NI's connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathReset {
    pub ni: NiId,
    pub peer: Option<Nid>,
}

/// Most path resets queued for the driver on one partition; beyond it they are dropped (the LND's own
/// timeouts still apply), so a driver that never polls them cannot grow the queue.
pub const MAX_PATH_RESETS: usize = 1024;

/// One partition's share of the driver's queues: an item waits in the partition of what it
/// names (a transmit or a resume its message's, an event its MD's, so one MD's events stay
/// in order), a completion or a path reset in the partition of the call that made it. A
/// runtime that locks partitions apart drains each share under its own lock; the `pop` calls
/// of a view go through the partitions it holds in order.
/// What waits in one partition's outputs ([`Engine::pending_outputs`]), for a runtime that
/// drains partitions apart: transmits and events are taken on the partition, the rest
/// (resumes, finished pings, path resets: all made by calls planned on the whole node) by a
/// drain holding the whole engine.
///
/// [`Engine::pending_outputs`]: crate::engine::Engine::pending_outputs
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pending {
    pub transmits: bool,
    pub events: bool,
    /// Resumes, finished pings or discoveries, path resets.
    pub node_work: bool,
}

impl Pending {
    pub fn any(self) -> bool {
        self.transmits || self.events || self.node_work
    }
}

#[derive(Debug, Default)]
pub(crate) struct Outputs {
    /// Messages ready for [`Transmit`], in order.
    transmits: VecDeque<Key>,
    resumes: VecDeque<Resume>,
    events: VecDeque<Event>,
    completions: VecDeque<PingCompletion>,
    path_resets: VecDeque<PathReset>,
}

impl Outputs {
    pub(crate) fn has_transmits(&self) -> bool {
        !self.transmits.is_empty()
    }

    pub(crate) fn has_resumes(&self) -> bool {
        !self.resumes.is_empty()
    }

    /// What waits here, by kind.
    pub(crate) fn pending(&self) -> Pending {
        Pending {
            transmits: !self.transmits.is_empty(),
            events: !self.events.is_empty(),
            node_work: !self.resumes.is_empty()
                || !self.completions.is_empty()
                || !self.path_resets.is_empty(),
        }
    }

    /// The message of the next transmit here.
    pub(crate) fn front_transmit(&self) -> Option<Key> {
        self.transmits.front().copied()
    }

    /// The receive of the next resume here.
    pub(crate) fn front_resume(&self) -> Option<Key> {
        self.resumes.front().map(|resume| resume.rx.0)
    }

    /// The next finished ping or discovery here.
    pub(crate) fn pop_completion(&mut self) -> Option<PingCompletion> {
        self.completions.pop_front()
    }

    /// The next path reset here.
    pub(crate) fn pop_path_reset(&mut self) -> Option<PathReset> {
        self.path_resets.pop_front()
    }

    /// Moves the events waiting here to the end of `into` (trading buffers when `into` is
    /// empty); returns whether there were any.
    pub(crate) fn take_events(&mut self, into: &mut VecDeque<Event>) -> bool {
        if self.events.is_empty() {
            return false;
        }
        if into.is_empty() {
            std::mem::swap(&mut self.events, into);
        } else {
            into.append(&mut self.events);
        }
        true
    }
}

impl<'a, A: Access> Shares<'a, A, Outputs> {
    pub(crate) fn transmit_count(&self) -> usize {
        self.iter_shares().map(|(_, queues)| queues.transmits.len()).sum()
    }

    pub(crate) fn resume_count(&self) -> usize {
        self.iter_shares().map(|(_, queues)| queues.resumes.len()).sum()
    }

    /// The most events waiting in one partition (each is held to `Limits::events`).
    pub(crate) fn most_events(&self) -> usize {
        self.iter_shares().map(|(_, queues)| queues.events.len()).max().unwrap_or(0)
    }
}

impl<'a> Shares<'a, Exclusive, Outputs> {
    /// The first item `take` finds, going through the partitions held in order.
    #[inline]
    fn pop<T>(&mut self, mut take: impl FnMut(&mut Outputs) -> Option<T>) -> Option<T> {
        self.iter_shares_mut().find_map(|(_, queues)| take(queues))
    }

    /// Queues a transmit in its message's partition; false when the call does not hold it.
    #[must_use]
    pub(crate) fn push_transmit(&mut self, key: Key) -> bool {
        let Some(queues) = self.share_of_mut(key) else {
            return false;
        };
        queues.transmits.push_back(key);
        true
    }

    pub(crate) fn pop_transmit(&mut self) -> Option<Key> {
        self.pop(|queues| queues.transmits.pop_front())
    }

    /// The next transmit of partition `cpt`, when the call holds it.
    pub(crate) fn pop_transmit_of(&mut self, cpt: u32) -> Option<Key> {
        self.share_mut(cpt)?.transmits.pop_front()
    }

    /// The next resume of partition `cpt`, when the call holds it.
    pub(crate) fn pop_resume_of(&mut self, cpt: u32) -> Option<Resume> {
        self.share_mut(cpt)?.resumes.pop_front()
    }

    /// Queues a resume in its receive's partition; false when the call does not hold it.
    #[must_use]
    pub(crate) fn push_resume(&mut self, resume: Resume) -> bool {
        let Some(queues) = self.share_of_mut(resume.rx.0) else {
            return false;
        };
        queues.resumes.push_back(resume);
        true
    }

    pub(crate) fn pop_resume(&mut self) -> Option<Resume> {
        self.pop(|queues| queues.resumes.pop_front())
    }

    /// Queues a user event in its MD's partition unless `limit` are waiting there; returns it
    /// in place, or `None` when it was dropped.
    #[inline]
    pub(crate) fn push_event(&mut self, event: Event, limit: usize) -> Option<&mut Event> {
        let cpt = event.md.key().and_then(|key| self.partition_of(key)).unwrap_or(0);
        let queues = self.share_mut(cpt)?;
        if queues.events.len() >= limit {
            return None;
        }
        queues.events.push_back(event);
        queues.events.back_mut()
    }

    pub(crate) fn pop_event(&mut self) -> Option<Event> {
        self.pop(|queues| queues.events.pop_front())
    }

    /// Moves every waiting event to the end of `into`, partition by partition (trading
    /// buffers when `into` is empty); returns whether there were any.
    pub(crate) fn take_events(&mut self, into: &mut VecDeque<Event>) -> bool {
        let mut any = false;
        for (_, queues) in self.iter_shares_mut() {
            any |= queues.take_events(into);
        }
        any
    }

    /// Queues a finished ping or discovery in partition `cpt`.
    pub(crate) fn complete(&mut self, cpt: u32, completion: PingCompletion) {
        if let Some(queues) = self.share_mut(cpt) {
            queues.completions.push_back(completion);
        }
    }

    pub(crate) fn pop_completion(&mut self) -> Option<PingCompletion> {
        self.pop(Outputs::pop_completion)
    }

    /// Queues a reset in partition `cpt` once; beyond [`MAX_PATH_RESETS`] there it is dropped
    /// (the LND's own timeouts still apply).
    pub(crate) fn request_path_reset(&mut self, cpt: u32, reset: PathReset) {
        let Some(queues) = self.share_mut(cpt) else {
            return;
        };
        let queue = &mut queues.path_resets;
        if queue.len() < MAX_PATH_RESETS && !queue.contains(&reset) {
            queue.push_back(reset);
        }
    }

    pub(crate) fn pop_path_reset(&mut self) -> Option<PathReset> {
        self.pop(Outputs::pop_path_reset)
    }
}
