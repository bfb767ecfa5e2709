//! One direction of the emulated link: loss, a drop-tail queue in front of a rate limit,
//! then a fixed propagation delay (mahimahi's `mm-loss`, `mm-link` and `mm-delay` in a row).
//!
//! No I/O and no clock: the caller says when each packet arrives (time since the line started)
//! and gets back when to deliver it, or why it is dropped, so the model is tested on its own.
//! A packet leaves the rate limiter `(len + overhead) / rate` after the previous one left (or
//! after it arrived, if the link was idle), then arrives `delay` later. The queue holds the
//! bytes that arrived and have not left the rate limiter yet; a packet that would take it past
//! its size is dropped, as a full router queue drops it. Without a rate, packets only wait out
//! the delay, and what waits is bounded by the queue size (at most [`MAX_DELAYED_BYTES`]).

use std::collections::VecDeque;
use std::time::Duration;

use ulnet_proto::rng::Rng;

/// Most bytes held in the delay stage when there is no rate to bound them (a rate bounds them
/// by the queue plus rate times delay).
pub const MAX_DELAYED_BYTES: u64 = 1 << 30;

/// How one direction behaves.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkConfig {
    /// One-way propagation delay.
    pub delay: Duration,
    /// Bytes per second the link carries; `None`: no limit.
    pub rate_bytes_per_sec: Option<u64>,
    /// Bytes charged per packet on top of its length (38 for Ethernet's header, FCS, preamble
    /// and gap, which a TUN device's IP packets do not carry).
    pub overhead_bytes: u64,
    /// Packets lost at random, per million.
    pub loss_per_million: u32,
    /// Bytes the queue before the rate limiter holds.
    pub queue_bytes: u64,
}

/// What happens to a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Deliver it at this time (since the line started).
    Deliver(Duration),
    /// Lost at random.
    Lost,
    /// The queue was full.
    QueueFull,
}

/// Counters of one direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct LinkStats {
    pub packets: u64,
    pub bytes: u64,
    pub delivered: u64,
    pub lost: u64,
    pub queue_full: u64,
    /// Most bytes queued before the rate limiter at once.
    pub max_queued_bytes: u64,
}

/// One direction's state.
#[derive(Debug)]
pub struct Link {
    config: LinkConfig,
    rng: Rng,
    /// When the rate limiter finishes what it accepted.
    busy_until: Duration,
    /// (leaves the rate limiter at, bytes) of what is queued, oldest first.
    queued: VecDeque<(Duration, u64)>,
    queued_bytes: u64,
    /// (delivered at, bytes) of what is in the delay stage with no rate to bound it.
    delayed: VecDeque<(Duration, u64)>,
    delayed_bytes: u64,
    pub stats: LinkStats,
}

impl Link {
    pub fn new(config: LinkConfig, seed: u64) -> Self {
        Self {
            config,
            rng: Rng::new(seed),
            busy_until: Duration::ZERO,
            queued: VecDeque::new(),
            queued_bytes: 0,
            delayed: VecDeque::new(),
            delayed_bytes: 0,
            stats: LinkStats::default(),
        }
    }

    pub fn config(&self) -> &LinkConfig {
        &self.config
    }

    /// A packet of `len` bytes arrives at `now`.
    pub fn admit(&mut self, now: Duration, len: usize) -> Verdict {
        let len = len as u64;
        self.stats.packets += 1;
        self.stats.bytes += len;
        if self.config.loss_per_million > 0
            && self.rng.chance_per_million(self.config.loss_per_million)
        {
            self.stats.lost += 1;
            return Verdict::Lost;
        }
        let Some(rate) = self.config.rate_bytes_per_sec.filter(|rate| *rate > 0) else {
            return self.delay_only(now, len);
        };
        while self.queued.front().is_some_and(|(leaves, _)| *leaves <= now) {
            if let Some((_, bytes)) = self.queued.pop_front() {
                self.queued_bytes -= bytes;
            }
        }
        if self.queued_bytes + len > self.config.queue_bytes {
            self.stats.queue_full += 1;
            return Verdict::QueueFull;
        }
        let wire = len + self.config.overhead_bytes;
        let serialize = Duration::from_nanos(
            u64::try_from(u128::from(wire) * 1_000_000_000 / u128::from(rate)).unwrap_or(u64::MAX),
        );
        let leaves = self.busy_until.max(now) + serialize;
        self.busy_until = leaves;
        self.queued.push_back((leaves, len));
        self.queued_bytes += len;
        self.stats.max_queued_bytes = self.stats.max_queued_bytes.max(self.queued_bytes);
        self.stats.delivered += 1;
        Verdict::Deliver(leaves + self.config.delay)
    }

    /// No rate: the packet waits out the delay, within [`MAX_DELAYED_BYTES`].
    fn delay_only(&mut self, now: Duration, len: u64) -> Verdict {
        while self.delayed.front().is_some_and(|(at, _)| *at <= now) {
            if let Some((_, bytes)) = self.delayed.pop_front() {
                self.delayed_bytes -= bytes;
            }
        }
        if self.delayed_bytes + len > MAX_DELAYED_BYTES.min(self.config.queue_bytes.max(len)) {
            self.stats.queue_full += 1;
            return Verdict::QueueFull;
        }
        let at = now + self.config.delay;
        self.delayed.push_back((at, len));
        self.delayed_bytes += len;
        self.stats.delivered += 1;
        Verdict::Deliver(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> LinkConfig {
        LinkConfig {
            delay: Duration::from_millis(25),
            // 1 MB/s: a 1000-byte packet takes 1 ms.
            rate_bytes_per_sec: Some(1_000_000),
            overhead_bytes: 0,
            loss_per_million: 0,
            queue_bytes: 3000,
        }
    }

    #[test]
    fn packets_are_serialized_at_the_rate_then_delayed() {
        let mut link = Link::new(config(), 1);
        let ms = Duration::from_millis;
        assert_eq!(link.admit(ms(0), 1000), Verdict::Deliver(ms(26)));
        assert_eq!(link.admit(ms(0), 1000), Verdict::Deliver(ms(27)));
        // An idle link sends at once.
        let idle = ms(100) + Duration::from_micros(500) + ms(25);
        assert_eq!(link.admit(ms(100), 500), Verdict::Deliver(idle));
    }

    #[test]
    fn a_full_queue_drops_the_tail_and_drains_at_the_rate() {
        let mut link = Link::new(config(), 1);
        let ms = Duration::from_millis;
        for _ in 0..3 {
            assert!(matches!(link.admit(ms(0), 1000), Verdict::Deliver(_)));
        }
        assert_eq!(link.admit(ms(0), 1000), Verdict::QueueFull);
        // One millisecond later the first has left: room for one more.
        assert!(matches!(link.admit(ms(1), 1000), Verdict::Deliver(_)));
        assert_eq!(link.admit(ms(1), 1000), Verdict::QueueFull);
        assert_eq!(link.stats.queue_full, 2);
        assert_eq!(link.stats.max_queued_bytes, 3000);
    }

    #[test]
    fn overhead_counts_against_the_rate() {
        let mut link = Link::new(LinkConfig { overhead_bytes: 1000, ..config() }, 1);
        let ms = Duration::from_millis;
        assert_eq!(link.admit(ms(0), 1000), Verdict::Deliver(ms(27)));
    }

    #[test]
    fn loss_is_random_at_its_rate_and_replays_from_the_seed() {
        let lossy = LinkConfig { loss_per_million: 100_000, queue_bytes: u64::MAX, ..config() };
        let run = |seed| {
            let mut link = Link::new(lossy, seed);
            (0..10_000).map(|i| link.admit(Duration::from_secs(i), 100)).collect::<Vec<_>>()
        };
        let first = run(7);
        assert_eq!(first, run(7));
        let lost = first.iter().filter(|v| **v == Verdict::Lost).count();
        assert!((800..1200).contains(&lost), "{lost} of 10000 lost at 10%");
    }

    #[test]
    fn without_a_rate_only_the_delay_applies_within_the_bound() {
        let unlimited = LinkConfig { rate_bytes_per_sec: None, queue_bytes: 2500, ..config() };
        let mut link = Link::new(unlimited, 1);
        let ms = Duration::from_millis;
        assert_eq!(link.admit(ms(0), 1000), Verdict::Deliver(ms(25)));
        assert_eq!(link.admit(ms(0), 1000), Verdict::Deliver(ms(25)));
        assert_eq!(link.admit(ms(0), 1000), Verdict::QueueFull);
        assert_eq!(link.admit(ms(25), 1000), Verdict::Deliver(ms(50)));
    }
}
