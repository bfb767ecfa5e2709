//! A fixed-size log-linear histogram of nanosecond values (16 steps per power of two), for
//! RPC latencies: deterministic, allocation-free after creation, within 6.25% per bucket.

use serde::Serialize;

const SUB_BITS: u32 = 4;
const SUB: usize = 1 << SUB_BITS;
const BUCKETS: usize = 64 * SUB;

#[derive(Clone, Debug)]
pub struct Histogram {
    counts: Vec<u64>,
    count: u64,
    sum: u128,
    max: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self { counts: vec![0; BUCKETS], count: 0, sum: 0, max: 0 }
    }
}

/// Summary in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct LatencySummary {
    pub count: u64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

impl Histogram {
    pub fn record(&mut self, value: u64) {
        if let Some(count) = self.counts.get_mut(bucket(value)) {
            *count += 1;
        }
        self.count += 1;
        self.sum += u128::from(value);
        self.max = self.max.max(value);
    }

    /// The value below which `fraction` of the samples lie (a bucket's upper edge).
    pub fn quantile(&self, fraction: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((self.count as f64) * fraction).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (index, count) in self.counts.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return upper_edge(index).min(self.max);
            }
        }
        self.max
    }

    pub fn summary(&self) -> LatencySummary {
        let us = |nanos: u64| nanos as f64 / 1000.0;
        LatencySummary {
            count: self.count,
            mean_us: if self.count == 0 {
                0.0
            } else {
                (self.sum / u128::from(self.count)) as f64 / 1000.0
            },
            p50_us: us(self.quantile(0.5)),
            p99_us: us(self.quantile(0.99)),
            max_us: us(self.max),
        }
    }
}

fn bucket(value: u64) -> usize {
    if value < SUB as u64 {
        return value as usize;
    }
    let exponent = 63 - value.leading_zeros();
    let mantissa = (value >> (exponent - SUB_BITS)) as usize & (SUB - 1);
    ((exponent - SUB_BITS + 1) as usize) * SUB + mantissa
}

fn upper_edge(index: usize) -> u64 {
    if index < SUB {
        return index as u64;
    }
    let exponent = (index / SUB) as u32 + SUB_BITS - 1;
    let mantissa = (index % SUB) as u64;
    let base = (SUB as u64 + mantissa) << (exponent - SUB_BITS);
    base + (1u64 << (exponent - SUB_BITS)) - 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_monotonic_and_tight() {
        let mut last = 0;
        for value in (0..20).chain([100, 1000, 65_535, 1 << 40, u64::MAX / 3]) {
            let index = bucket(value);
            assert!(index >= last);
            last = index;
            let edge = upper_edge(index);
            assert!(edge >= value, "{value} -> {edge}");
            assert!(edge - value <= value / 16 + 1, "{value} -> {edge}");
        }
    }

    #[test]
    fn quantiles() {
        let mut histogram = Histogram::default();
        for value in 1..=1000 {
            histogram.record(value * 1000);
        }
        let p50 = histogram.quantile(0.5);
        assert!((500_000..=532_000).contains(&p50), "{p50}");
        assert_eq!(histogram.quantile(1.0), 1_000_000);
        assert_eq!(histogram.summary().count, 1000);
    }
}
