//! Latency statistics: a fixed-bucket, log-scale histogram per operation, per NI and per peer
//! NI, with percentiles.
//!
//! Lustre keeps samples, sum, min and max per operation (lustre: include/linux/lnet/lib-types.h
//! `struct lnet_latency_stats`, `enum lnet_latency_op`; lnet/lnet/lib-move.c
//! `lnet_record_latency()`; lib-msg.c `lnet_record_response_latency()`, the PUT egress sample
//! in `lnet_msg_decommit_tx()`), which `lnetctl net|peer show -v` prints as
//! `<op>_samples`, `_min_nsec`, `_max_nsec`, `_avg_nsec`. ulnet keeps the same four numbers and
//! a histogram besides, so `peer show -v` can print percentiles.
//!
//! Buckets: 4 per power of two (about 19% wide) from 256 ns up to 2^40 ns (18 minutes); the
//! first bucket also holds everything shorter and the last everything longer. A percentile is
//! the upper bound of the bucket it falls in, clamped to the observed min and max.

use std::time::Duration;

/// Buckets per power of two.
const SUB_BUCKETS: u32 = 4;
/// log2 of the first bucket's lower bound (256 ns).
const FIRST_OCTAVE: u32 = 8;
/// Octaves covered: 2^8 ns to 2^40 ns.
const OCTAVES: u32 = 32;
/// Buckets in one histogram.
pub const LATENCY_BUCKETS: usize = (SUB_BUCKETS * OCTAVES) as usize;

/// One operation's latency distribution.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LatencyHistogram {
    samples: u64,
    sum_ns: u64,
    min_ns: u64,
    max_ns: u64,
    buckets: [u32; LATENCY_BUCKETS],
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self { samples: 0, sum_ns: 0, min_ns: 0, max_ns: 0, buckets: [0; LATENCY_BUCKETS] }
    }
}

impl LatencyHistogram {
    /// Adds one sample. Zero durations are ignored, as Lustre ignores `ns <= 0`.
    pub fn record(&mut self, latency: Duration) {
        let ns = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
        if ns == 0 {
            return;
        }
        self.samples = self.samples.saturating_add(1);
        self.sum_ns = self.sum_ns.saturating_add(ns);
        if self.samples == 1 {
            self.min_ns = ns;
            self.max_ns = ns;
        } else {
            self.min_ns = self.min_ns.min(ns);
            self.max_ns = self.max_ns.max(ns);
        }
        // bucket_index() is below LATENCY_BUCKETS by construction.
        if let Some(bucket) = self.buckets.get_mut(bucket_index(ns)) {
            *bucket = bucket.saturating_add(1);
        }
    }

    /// Adds `other`'s samples to these, as if recorded here.
    pub(crate) fn absorb(&mut self, other: &Self) {
        if other.samples == 0 {
            return;
        }
        if self.samples == 0 {
            (self.min_ns, self.max_ns) = (other.min_ns, other.max_ns);
        } else {
            self.min_ns = self.min_ns.min(other.min_ns);
            self.max_ns = self.max_ns.max(other.max_ns);
        }
        self.samples = self.samples.saturating_add(other.samples);
        self.sum_ns = self.sum_ns.saturating_add(other.sum_ns);
        for (bucket, count) in self.buckets.iter_mut().zip(other.buckets) {
            *bucket = bucket.saturating_add(count);
        }
    }

    /// `<op>_samples`.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// `<op>_min_nsec` (zero without samples).
    pub fn min(&self) -> Duration {
        Duration::from_nanos(self.min_ns)
    }

    /// `<op>_max_nsec` (zero without samples).
    pub fn max(&self) -> Duration {
        Duration::from_nanos(self.max_ns)
    }

    /// The samples added up (saturating), for exporters that report a sum.
    pub fn sum(&self) -> Duration {
        Duration::from_nanos(self.sum_ns)
    }

    /// `<op>_avg_nsec` (zero without samples).
    pub fn mean(&self) -> Duration {
        Duration::from_nanos(self.sum_ns.checked_div(self.samples).unwrap_or(0))
    }

    /// The latency below which `per_mille` thousandths of the samples fall (500 = median,
    /// 990 = p99), to the histogram's precision; `None` without samples.
    pub fn percentile(&self, per_mille: u32) -> Option<Duration> {
        if self.samples == 0 {
            return None;
        }
        let per_mille = u64::from(per_mille.min(1000));
        // The rank of the wanted sample, 1-based: ceil(samples * p / 1000), at least 1.
        let rank = (self.samples.saturating_mul(per_mille)).div_ceil(1000).max(1);
        let mut seen = 0u64;
        for (index, count) in self.buckets.iter().enumerate() {
            seen += u64::from(*count);
            if seen >= rank {
                // The last bucket is open-ended: its samples are up to the maximum.
                if index == LATENCY_BUCKETS - 1 {
                    return Some(Duration::from_nanos(self.max_ns));
                }
                let bound = bucket_upper_bound(index);
                return Some(Duration::from_nanos(bound.clamp(self.min_ns, self.max_ns)));
            }
        }
        // Bucket counts saturated: the answer is beyond what was counted.
        Some(Duration::from_nanos(self.max_ns))
    }

    /// Bucket counts, with each bucket's upper bound in nanoseconds (for exporters).
    pub fn buckets(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.buckets.iter().enumerate().map(|(index, count)| (bucket_upper_bound(index), *count))
    }
}

/// The operations Lustre times (`enum lnet_latency_op`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LatencyStats {
    /// `put_egress`: a PUT's first commit to its local send completion (not resent ones).
    pub put_egress: LatencyHistogram,
    /// `get_rtt`: `LNetGet` to its REPLY.
    pub get_rtt: LatencyHistogram,
    /// `put_ack`: `LNetPut` to its ACK.
    pub put_ack: LatencyHistogram,
}

/// Which operation a sample times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LatencyOp {
    PutEgress,
    GetRtt,
    PutAck,
}

impl LatencyStats {
    pub(crate) fn record(&mut self, op: LatencyOp, latency: Duration) {
        match op {
            LatencyOp::PutEgress => self.put_egress.record(latency),
            LatencyOp::GetRtt => self.get_rtt.record(latency),
            LatencyOp::PutAck => self.put_ack.record(latency),
        }
    }

    /// Adds `other`'s samples to these.
    pub(crate) fn absorb(&mut self, other: &Self) {
        self.put_egress.absorb(&other.put_egress);
        self.get_rtt.absorb(&other.get_rtt);
        self.put_ack.absorb(&other.put_ack);
    }
}

/// Lazily allocated latency statistics: NIs and peer NIs that never carry a timed operation
/// cost one pointer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct LatencySlot(Option<Box<LatencyStats>>);

impl LatencySlot {
    pub(crate) fn record(&mut self, op: LatencyOp, latency: Duration) {
        self.0.get_or_insert_with(Box::default).record(op, latency);
    }

    pub(crate) fn snapshot(&self) -> LatencyStats {
        self.0.as_deref().copied().unwrap_or_default()
    }

    /// Adds this slot's samples to `stats`.
    pub(crate) fn add_to(&self, stats: &mut LatencyStats) {
        if let Some(own) = self.0.as_deref() {
            stats.absorb(own);
        }
    }

    pub(crate) fn reset(&mut self) {
        self.0 = None;
    }
}

fn bucket_index(ns: u64) -> usize {
    let log = 63 - ns.leading_zeros();
    if log < FIRST_OCTAVE {
        return 0;
    }
    // The two bits after the leading one pick the sub-bucket.
    let sub = ((ns >> (log - 2)) & u64::from(SUB_BUCKETS - 1)) as u32;
    let index = (log - FIRST_OCTAVE) * SUB_BUCKETS + sub;
    (index as usize).min(LATENCY_BUCKETS - 1)
}

/// The largest latency (ns) that falls in bucket `index`.
fn bucket_upper_bound(index: usize) -> u64 {
    let index = index as u32;
    let octave = FIRST_OCTAVE + index / SUB_BUCKETS;
    let sub = u64::from(index % SUB_BUCKETS);
    let base = 1u64 << octave;
    let step = base / u64::from(SUB_BUCKETS);
    base + (sub + 1) * step - 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_histogram_reports_zeros_as_lustre_does() {
        let histogram = LatencyHistogram::default();
        assert_eq!(
            (histogram.samples(), histogram.min(), histogram.max()),
            (0, Duration::ZERO, Duration::ZERO)
        );
        assert_eq!(histogram.mean(), Duration::ZERO);
        assert_eq!(histogram.percentile(500), None);
    }

    #[test]
    fn zero_samples_are_ignored() {
        let mut histogram = LatencyHistogram::default();
        histogram.record(Duration::ZERO);
        assert_eq!(histogram.samples(), 0);
    }

    #[test]
    fn merged_histograms_equal_one_that_recorded_everything() {
        let samples = [3_u64, 700, 25_000, 9, 1_000_000, 40];
        let mut whole = LatencyHistogram::default();
        let mut parts = [LatencyHistogram::default(), LatencyHistogram::default()];
        for (index, micros) in samples.into_iter().enumerate() {
            whole.record(Duration::from_micros(micros));
            parts[index % 2].record(Duration::from_micros(micros));
        }
        let mut merged = LatencyHistogram::default();
        merged.absorb(&LatencyHistogram::default());
        parts.iter().for_each(|part| merged.absorb(part));
        assert_eq!(merged, whole);
        let mut stats = LatencyStats::default();
        let mut slot = LatencySlot::default();
        slot.add_to(&mut stats);
        assert_eq!(stats, LatencyStats::default(), "an empty slot adds nothing");
        slot.record(LatencyOp::GetRtt, Duration::from_micros(5));
        slot.add_to(&mut stats);
        slot.add_to(&mut stats);
        assert_eq!((stats.get_rtt.samples(), stats.put_ack.samples()), (2, 0));
    }

    #[test]
    fn min_max_mean_are_exact() {
        let mut histogram = LatencyHistogram::default();
        for micros in [10, 20, 30] {
            histogram.record(Duration::from_micros(micros));
        }
        assert_eq!(histogram.samples(), 3);
        assert_eq!(histogram.min(), Duration::from_micros(10));
        assert_eq!(histogram.max(), Duration::from_micros(30));
        assert_eq!(histogram.mean(), Duration::from_micros(20));
        assert_eq!(histogram.sum(), Duration::from_micros(60));
    }

    #[test]
    fn percentiles_are_within_a_bucket() {
        let mut histogram = LatencyHistogram::default();
        // 1..=1000 microseconds, one sample each.
        for micros in 1..=1000u64 {
            histogram.record(Duration::from_micros(micros));
        }
        for (per_mille, exact) in [(500u32, 500u64), (900, 900), (990, 990), (1000, 1000)] {
            let reported = histogram.percentile(per_mille).unwrap().as_micros() as u64;
            // A bucket is at most 25% wide: the reported bound is at or above the exact
            // value and within a bucket of it.
            assert!(reported >= exact && reported <= exact * 5 / 4 + 1, "p{per_mille}: {reported}");
        }
        assert_eq!(histogram.percentile(1000), Some(Duration::from_micros(1000)));
        assert_eq!(histogram.percentile(0), histogram.percentile(1));
    }

    #[test]
    fn extremes_land_in_the_edge_buckets() {
        assert_eq!(bucket_index(1), 0);
        assert_eq!(bucket_index(255), 0);
        assert_eq!(bucket_index(256), 0);
        assert_eq!(bucket_index(320), 1);
        assert_eq!(bucket_index(u64::MAX), LATENCY_BUCKETS - 1);
        let mut histogram = LatencyHistogram::default();
        histogram.record(Duration::from_secs(100_000));
        histogram.record(Duration::from_nanos(3));
        assert_eq!(histogram.percentile(1000), Some(Duration::from_secs(100_000)));
        // The first bucket reaches down to zero: its bound is what a low percentile reports.
        assert_eq!(histogram.percentile(1), Some(Duration::from_nanos(319)));
    }

    #[test]
    fn bucket_bounds_are_monotonic_and_contain_their_samples() {
        let mut previous = 0;
        for index in 0..LATENCY_BUCKETS {
            let bound = bucket_upper_bound(index);
            assert!(bound > previous);
            previous = bound;
        }
        for ns in [256u64, 300, 511, 512, 1_000_000, 123_456_789] {
            let index = bucket_index(ns);
            assert!(ns <= bucket_upper_bound(index));
            assert!(index == 0 || ns > bucket_upper_bound(index - 1));
        }
    }

    #[test]
    fn slots_allocate_lazily_and_reset() {
        let mut slot = LatencySlot::default();
        assert_eq!(slot.snapshot(), LatencyStats::default());
        slot.record(LatencyOp::GetRtt, Duration::from_micros(5));
        assert_eq!(slot.snapshot().get_rtt.samples(), 1);
        assert_eq!(slot.snapshot().put_ack.samples(), 0);
        slot.reset();
        assert_eq!(slot.snapshot(), LatencyStats::default());
    }
}
