//! The event-level invariant checker, shared by the harness and the simulator: no event for
//! an MD after the event that says it is unlinked, no more operations on an MD than its
//! threshold, and (at quiescence) exactly one SEND event per successful `put`/`get`.
//!
//! The driver tells it about every MD it creates ([`EventChecker::track`]) and every PUT or
//! GET it starts ([`EventChecker::initiated`]), and shows it every event
//! ([`EventChecker::record`]). Engine-internal invariants (credits conserved, each message
//! finalized once) are [`Engine::check_invariants`]'s.

use std::collections::HashMap;
use std::fmt;

use crate::engine::event::{Event, EventKind};
use crate::engine::md::{MdHandle, Threshold};
use crate::engine::node::Engine;

/// What the checker knows about one MD.
#[derive(Clone, Copy, Debug)]
struct MdTrack {
    threshold: Option<u32>,
    operations: u32,
    unlinked: bool,
    events: bool,
}

/// How strictly unknown MDs are treated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tracking {
    /// Remember every MD forever; events of MDs never tracked are ignored (a test may create
    /// MDs behind the checker's back).
    Lenient,
    /// Forget an MD at its unlinked event, so memory stays bounded by the live MDs; every
    /// event must then name a tracked MD (a handle is never reused, so an event for a
    /// forgotten one is an event after unlink).
    Strict,
    /// Only the counts the quiescence check needs (PUTs/GETs started, SEND events): no
    /// per-MD record beyond the few MDs created without events, so events are not checked
    /// against their MD. For a driver that runs without per-step checks (the simulator's
    /// `--no-check`), where a table of every live MD of 10,000 nodes costs a cache miss an
    /// event.
    Counting,
}

/// A broken event-level invariant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventViolation {
    pub node: usize,
    pub what: String,
}

impl fmt::Display for EventViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node {}: {}", self.node, self.what)
    }
}

/// The event-level checker of a set of nodes (see the module doc).
#[derive(Clone, Debug)]
pub struct EventChecker {
    tracking: Tracking,
    mds: HashMap<(usize, u64), MdTrack, foldhash::fast::FixedState>,
    initiated: Vec<u64>,
    sends: Vec<u64>,
}

impl EventChecker {
    pub fn new(nodes: usize, tracking: Tracking) -> Self {
        Self {
            tracking,
            mds: HashMap::with_hasher(foldhash::fast::FixedState::default()),
            initiated: vec![0; nodes],
            sends: vec![0; nodes],
        }
    }

    /// An MD node `node` just created with `threshold` and `events` (its spec's).
    pub fn track(&mut self, node: usize, md: MdHandle, threshold: Threshold, events: bool) {
        let threshold = match threshold {
            Threshold::Infinite => None,
            Threshold::Count(count) => Some(count),
        };
        if self.tracking == Tracking::Counting && events {
            return;
        }
        let track = MdTrack { threshold, operations: 0, unlinked: false, events };
        self.mds.insert((node, md.0), track);
    }

    /// Node `node` started a PUT or GET on `md` successfully.
    pub fn initiated(&mut self, node: usize, md: MdHandle) {
        if self.has_events(node, md) {
            if let Some(count) = self.initiated.get_mut(node) {
                *count += 1;
            }
        }
    }

    /// Checks one event of node `node`.
    pub fn record(&mut self, node: usize, event: &Event) -> Result<(), EventViolation> {
        let violation = |what: String| Err(EventViolation { node, what });
        if self.tracking == Tracking::Counting {
            // An event comes only from an MD with events on.
            if event.kind == EventKind::Send {
                if let Some(count) = self.sends.get_mut(node) {
                    *count += 1;
                }
            }
            return Ok(());
        }
        let key = (node, event.md.0);
        let Some(track) = self.mds.get_mut(&key) else {
            return match self.tracking {
                Tracking::Lenient | Tracking::Counting => Ok(()),
                Tracking::Strict => {
                    violation(format!("event for an unlinked or unknown MD: {event:?}"))
                }
            };
        };
        if track.unlinked {
            return violation(format!("event after the unlinked event: {event:?}"));
        }
        if event.kind != EventKind::Unlink {
            track.operations += 1;
            if let Some(threshold) = track.threshold.filter(|t| track.operations > *t) {
                let operations = track.operations;
                return violation(format!(
                    "MD {:?} saw {operations} operations, threshold {threshold}",
                    event.md
                ));
            }
        }
        track.unlinked = event.unlinked;
        if event.kind == EventKind::Send && track.events {
            if let Some(count) = self.sends.get_mut(node) {
                *count += 1;
            }
        }
        if event.unlinked && self.tracking == Tracking::Strict {
            self.mds.remove(&key);
        }
        Ok(())
    }

    /// Whether `md` of node `node` reports events (counting mode: every MD not recorded as
    /// created without them).
    fn has_events(&self, node: usize, md: MdHandle) -> bool {
        match self.mds.get(&(node, md.0)) {
            Some(track) => track.events,
            None => self.tracking == Tracking::Counting,
        }
    }

    /// MDs tracked now.
    pub fn tracked(&self) -> usize {
        self.mds.len()
    }

    /// At quiescence: every message of `engine` (node `node`) finalized except PUTs parked
    /// on lazy portals, and one SEND event per successful `put`/`get` (or a held send).
    pub fn check_quiescent(&self, node: usize, engine: &Engine) -> Result<(), EventViolation> {
        let violation = |what: String| Err(EventViolation { node, what });
        if engine.message_count() != engine.delayed_message_count() {
            return violation(format!(
                "{} unfinished messages at quiescence",
                engine.message_count() - engine.delayed_message_count()
            ));
        }
        let held = engine.pending_sends().filter(|md| self.has_events(node, *md)).count() as u64;
        let initiated = self.initiated.get(node).copied().unwrap_or(0);
        let sends = self.sends.get(node).copied().unwrap_or(0);
        if initiated != sends + held {
            return violation(format!("{initiated} puts/gets, {sends} SEND events, {held} held"));
        }
        Ok(())
    }
}
