//! An emulated fabric: a seeded model of point-to-point links with latency, bandwidth
//! (serialization delay), loss, duplication and partitions, on virtual time.
//!
//! Endpoints are plain indices so the model serves the core's test harness today and the
//! simulator later. [`Fabric`] carries frames of any type: [`Fabric::send`] asks the model what
//! happens to a frame and queues its deliveries; [`Fabric::pop_due`] hands them out in time order
//! (ties in send order), so a run is a pure function of the seed and the inputs.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};
use std::time::Duration;

use crate::rng::Rng;
use crate::time::Time;

/// Endpoint index on the fabric.
pub type EndpointId = usize;

/// Most frames in flight at once; a send beyond it is dropped as congestion loss. Keeps a
/// runaway test from growing memory without bound.
pub const MAX_FRAMES_IN_FLIGHT: usize = 1 << 20;

/// How one directed link behaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkConfig {
    /// Propagation delay added to every frame.
    pub latency: Duration,
    /// Bytes per second; `None` means infinitely fast (no serialization delay).
    pub bandwidth_bytes_per_sec: Option<u64>,
    /// Probability, in parts per million, that a frame is silently lost.
    pub loss_per_million: u32,
    /// Probability, in parts per million, that a delivered frame arrives twice.
    pub duplicate_per_million: u32,
}

impl LinkConfig {
    /// A perfect link: no latency, infinite bandwidth, no loss, no duplicates.
    pub const IDEAL: Self = Self {
        latency: Duration::ZERO,
        bandwidth_bytes_per_sec: None,
        loss_per_million: 0,
        duplicate_per_million: 0,
    };
}

impl Default for LinkConfig {
    fn default() -> Self {
        Self::IDEAL
    }
}

/// What the model decided for one frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// When the sender finished putting the frame on the wire (its send completion time).
    pub serialized_at: Time,
    /// What happens at the far end.
    pub fate: Fate,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Arrives once at the first time, and again at the second when duplicated.
    Delivered { at: Time, duplicate_at: Option<Time> },
    /// Silently lost in flight.
    Lost,
    /// The endpoints are partitioned: the sender can tell the peer is unreachable.
    Unreachable,
}

/// The link model: per-link configuration, partitions and serialization state.
#[derive(Clone, Debug)]
pub struct LinkModel {
    rng: Rng,
    default_link: LinkConfig,
    links: BTreeMap<(EndpointId, EndpointId), LinkConfig>,
    /// Unordered pairs (smaller index first) that cannot reach each other.
    partitions: BTreeSet<(EndpointId, EndpointId)>,
    /// When each directed link finishes serializing what it already accepted.
    busy_until: BTreeMap<(EndpointId, EndpointId), Time>,
}

impl LinkModel {
    pub fn new(seed: u64, default_link: LinkConfig) -> Self {
        Self {
            rng: Rng::new(seed),
            default_link,
            links: BTreeMap::new(),
            partitions: BTreeSet::new(),
            busy_until: BTreeMap::new(),
        }
    }

    /// Overrides the configuration of the directed link `from -> to`.
    pub fn set_link(&mut self, from: EndpointId, to: EndpointId, config: LinkConfig) {
        self.links.insert((from, to), config);
    }

    /// Changes the configuration of every link without an override.
    pub fn set_default_link(&mut self, config: LinkConfig) {
        self.default_link = config;
    }

    pub fn link(&self, from: EndpointId, to: EndpointId) -> LinkConfig {
        self.links.get(&(from, to)).copied().unwrap_or(self.default_link)
    }

    /// Cuts (`true`) or heals (`false`) both directions between `a` and `b`.
    pub fn set_partitioned(&mut self, a: EndpointId, b: EndpointId, partitioned: bool) {
        let key = (a.min(b), a.max(b));
        if partitioned {
            self.partitions.insert(key);
        } else {
            self.partitions.remove(&key);
        }
    }

    pub fn is_partitioned(&self, a: EndpointId, b: EndpointId) -> bool {
        self.partitions.contains(&(a.min(b), a.max(b)))
    }

    /// Decides the fate of a `length`-byte frame sent at `now`.
    pub fn transmit(
        &mut self,
        now: Time,
        from: EndpointId,
        to: EndpointId,
        length: usize,
    ) -> Verdict {
        let link = self.link(from, to);
        let start = self.busy_until.get(&(from, to)).copied().unwrap_or(Time::ZERO).max(now);
        let serialized_at = start + serialization_delay(length, link.bandwidth_bytes_per_sec);
        if serialized_at > now {
            self.busy_until.insert((from, to), serialized_at);
        }
        let fate = if self.is_partitioned(from, to) {
            Fate::Unreachable
        } else if self.rng.chance_per_million(link.loss_per_million) {
            Fate::Lost
        } else {
            let at = serialized_at + link.latency;
            let duplicate_at =
                self.rng.chance_per_million(link.duplicate_per_million).then_some(at);
            Fate::Delivered { at, duplicate_at }
        };
        Verdict { serialized_at, fate }
    }
}

/// How long `length` bytes take to leave at `bandwidth_bytes_per_sec` (none: instantly), rounded up.
pub fn serialization_delay(length: usize, bandwidth_bytes_per_sec: Option<u64>) -> Duration {
    match bandwidth_bytes_per_sec {
        Some(rate) if rate > 0 => {
            let nanos = (length as u128 * 1_000_000_000).div_ceil(u128::from(rate));
            Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
        }
        _ => Duration::ZERO,
    }
}

/// A frame scheduled for delivery.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery<T> {
    pub at: Time,
    pub from: EndpointId,
    pub to: EndpointId,
    pub frame: T,
}

/// Frames in flight between endpoints, driven by a [`LinkModel`].
#[derive(Debug)]
pub struct Fabric<T> {
    pub model: LinkModel,
    queue: BinaryHeap<Reverse<(Time, u64)>>,
    frames: BTreeMap<u64, Delivery<T>>,
    next_sequence: u64,
    /// Frames dropped because [`MAX_FRAMES_IN_FLIGHT`] were already queued.
    pub congestion_drops: u64,
}

impl<T: Clone> Fabric<T> {
    pub fn new(model: LinkModel) -> Self {
        Self {
            model,
            queue: BinaryHeap::new(),
            frames: BTreeMap::new(),
            next_sequence: 0,
            congestion_drops: 0,
        }
    }

    /// Sends `frame` of `length` bytes and returns the model's verdict; delivered frames (and
    /// duplicates) are queued for [`Fabric::pop_due`].
    pub fn send(
        &mut self,
        now: Time,
        from: EndpointId,
        to: EndpointId,
        length: usize,
        frame: T,
    ) -> Verdict {
        let verdict = self.model.transmit(now, from, to, length);
        if let Fate::Delivered { at, duplicate_at } = verdict.fate {
            if let Some(again) = duplicate_at {
                self.enqueue(Delivery { at: again, from, to, frame: frame.clone() });
            }
            self.enqueue(Delivery { at, from, to, frame });
        }
        verdict
    }

    /// The earliest pending delivery time.
    pub fn next_delivery(&self) -> Option<Time> {
        self.queue.peek().map(|Reverse((at, _))| *at)
    }

    /// The next delivery due at or before `now`.
    pub fn pop_due(&mut self, now: Time) -> Option<Delivery<T>> {
        let Reverse((at, sequence)) = *self.queue.peek()?;
        if at > now {
            return None;
        }
        self.queue.pop();
        self.frames.remove(&sequence)
    }

    pub fn in_flight(&self) -> usize {
        self.frames.len()
    }

    fn enqueue(&mut self, delivery: Delivery<T>) {
        if self.frames.len() >= MAX_FRAMES_IN_FLIGHT {
            self.congestion_drops += 1;
            return;
        }
        let sequence = self.next_sequence;
        self.next_sequence += 1;
        self.queue.push(Reverse((delivery.at, sequence)));
        self.frames.insert(sequence, delivery);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bandwidth_serializes_frames_back_to_back() {
        let link = LinkConfig {
            latency: Duration::from_micros(10),
            bandwidth_bytes_per_sec: Some(1_000_000),
            ..LinkConfig::IDEAL
        };
        let mut model = LinkModel::new(1, link);
        let first = model.transmit(Time::ZERO, 0, 1, 1000);
        assert_eq!(first.serialized_at, Time::from_nanos(1_000_000));
        assert_eq!(
            first.fate,
            Fate::Delivered { at: Time::from_nanos(1_010_000), duplicate_at: None }
        );
        // The second frame waits for the first to leave the wire.
        let second = model.transmit(Time::ZERO, 0, 1, 1000);
        assert_eq!(second.serialized_at, Time::from_nanos(2_000_000));
        // The reverse direction is an independent link.
        let reverse = model.transmit(Time::ZERO, 1, 0, 1000);
        assert_eq!(reverse.serialized_at, Time::from_nanos(1_000_000));
    }

    #[test]
    fn partitions_are_symmetric_and_heal() {
        let mut model = LinkModel::new(1, LinkConfig::IDEAL);
        model.set_partitioned(2, 1, true);
        assert_eq!(model.transmit(Time::ZERO, 1, 2, 1).fate, Fate::Unreachable);
        assert_eq!(model.transmit(Time::ZERO, 2, 1, 1).fate, Fate::Unreachable);
        model.set_partitioned(1, 2, false);
        assert!(matches!(model.transmit(Time::ZERO, 1, 2, 1).fate, Fate::Delivered { .. }));
    }

    #[test]
    fn loss_and_duplication_follow_the_seed() {
        let link = LinkConfig {
            loss_per_million: 500_000,
            duplicate_per_million: 500_000,
            ..LinkConfig::IDEAL
        };
        let run = |seed| {
            let mut model = LinkModel::new(seed, link);
            (0..64).map(|_| model.transmit(Time::ZERO, 0, 1, 1).fate).collect::<Vec<_>>()
        };
        let fates = run(9);
        assert_eq!(fates, run(9));
        assert!(fates.contains(&Fate::Lost));
        assert!(fates.iter().any(|f| matches!(f, Fate::Delivered { duplicate_at: Some(_), .. })));
        assert!(fates.iter().any(|f| matches!(f, Fate::Delivered { duplicate_at: None, .. })));
    }

    #[test]
    fn fabric_delivers_in_time_then_send_order() {
        let mut fabric = Fabric::new(LinkModel::new(1, LinkConfig::IDEAL));
        fabric.model.set_link(
            0,
            1,
            LinkConfig { latency: Duration::from_secs(1), ..LinkConfig::IDEAL },
        );
        fabric.send(Time::ZERO, 0, 1, 1, "slow");
        fabric.send(Time::ZERO, 1, 0, 1, "fast-a");
        fabric.send(Time::ZERO, 1, 0, 1, "fast-b");
        assert_eq!(fabric.next_delivery(), Some(Time::ZERO));
        let order: Vec<_> =
            std::iter::from_fn(|| fabric.pop_due(Time::ZERO)).map(|d| d.frame).collect();
        assert_eq!(order, ["fast-a", "fast-b"]);
        assert_eq!(fabric.pop_due(Time::ZERO), None);
        assert_eq!(fabric.pop_due(Time::from_secs(1)).map(|d| d.frame), Some("slow"));
        assert_eq!(fabric.in_flight(), 0);
    }
}
