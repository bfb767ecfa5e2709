//! ulnet's one extension of the selftest wire protocol: latency percentiles of a node's test
//! RPCs, carried in the unused tail of DEBUG messages.
//!
//! Every selftest message is 160 bytes; a DEBUG request uses 52 of them and a DEBUG reply 84,
//! and kernels zero the rest and ignore it. A ulnet console sets `dbg_flags` to
//! [`ULNET_DEBUG_PROBE`] and may put a [`LatencyQuery`] in the request's tail; a ulnet node
//! answers with `dbg_nbatch` = [`ULNET_DEBUG_PROBE`] and a [`LatencySummary`] in the reply's
//! tail. A kernel node ignores the flags and tail (its reply says `dbg_nbatch` 0), and a kernel
//! console sends flags 0 and gets the kernel's reply from us, so either side may be a kernel.
//!
//! Layout (little-endian, offsets within the 160-byte message):
//!
//! | where | offset | field |
//! |---|---|---|
//! | request | 52 | u32 extension version (1) |
//! | request | 56 | u64 batch id, 0 for all batches |
//! | request | 64 | u32 test index (1-based), 0 for all tests |
//! | reply | 84 | u32 extension version (1) |
//! | reply | 88 | u32 tests merged |
//! | reply | 92 | u64 RPCs measured |
//! | reply | 100 | u64 failed RPCs |
//! | reply | 108 | u32 × 6: min, p50, p90, p99, p99.9, max (microseconds) |

use ulnet::proto::wire::selftest::SRPC_MSG_LEN;

/// `dbg_flags` of a ulnet console's DEBUG, echoed in `dbg_nbatch` by ulnet nodes.
pub const ULNET_DEBUG_PROBE: u32 = 0x756c_6e74;
/// The extension's version in both tails.
pub const EXTENSION_VERSION: u32 = 1;
/// Where the request's tail starts: after `srpc_debug_reqst` (24 + 28).
pub const REQUEST_TAIL: usize = 52;
/// Where the reply's tail starts: after `srpc_debug_reply` (24 + 60).
pub const REPLY_TAIL: usize = 84;

/// Which of a node's tests a ulnet console asks about.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LatencyQuery {
    /// 0: every batch.
    pub batch: u64,
    /// 0: every test of the batch.
    pub test: u32,
}

impl LatencyQuery {
    pub const LEN: usize = 16;

    pub fn emit(&self) -> [u8; Self::LEN] {
        let mut out = [0u8; Self::LEN];
        out[0..4].copy_from_slice(&EXTENSION_VERSION.to_le_bytes());
        out[4..12].copy_from_slice(&self.batch.to_le_bytes());
        out[12..16].copy_from_slice(&self.test.to_le_bytes());
        out
    }

    /// The query in a request, or `None` without one (a kernel's or an older console's).
    pub fn parse(message: &[u8; SRPC_MSG_LEN]) -> Option<Self> {
        let tail = message.get(REQUEST_TAIL..REQUEST_TAIL + Self::LEN)?;
        if le_u32(tail, 0) != EXTENSION_VERSION {
            return None;
        }
        Some(Self { batch: le_u64(tail, 4), test: le_u32(tail, 12) })
    }
}

/// Latency percentiles of the RPCs a node sent as a test client.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct LatencySummary {
    pub tests: u32,
    pub count: u64,
    pub errors: u64,
    pub min_us: u32,
    pub p50_us: u32,
    pub p90_us: u32,
    pub p99_us: u32,
    pub p999_us: u32,
    pub max_us: u32,
}

impl LatencySummary {
    pub const LEN: usize = 48;

    pub fn emit(&self) -> [u8; Self::LEN] {
        let values =
            [self.min_us, self.p50_us, self.p90_us, self.p99_us, self.p999_us, self.max_us];
        let bytes = EXTENSION_VERSION
            .to_le_bytes()
            .into_iter()
            .chain(self.tests.to_le_bytes())
            .chain(self.count.to_le_bytes())
            .chain(self.errors.to_le_bytes())
            .chain(values.into_iter().flat_map(u32::to_le_bytes));
        let mut out = [0u8; Self::LEN];
        for (to, from) in out.iter_mut().zip(bytes) {
            *to = from;
        }
        out
    }

    /// The summary in a reply, or `None` when the reply has none (a kernel node's).
    pub fn parse(message: &[u8; SRPC_MSG_LEN]) -> Option<Self> {
        let tail = message.get(REPLY_TAIL..REPLY_TAIL + Self::LEN)?;
        if le_u32(tail, 0) != EXTENSION_VERSION {
            return None;
        }
        let value = |index: usize| le_u32(tail, 24 + index * 4);
        Some(Self {
            tests: le_u32(tail, 4),
            count: le_u64(tail, 8),
            errors: le_u64(tail, 16),
            min_us: value(0),
            p50_us: value(1),
            p90_us: value(2),
            p99_us: value(3),
            p999_us: value(4),
            max_us: value(5),
        })
    }
}

// Both tails fit in the message.
const _: () = assert!(REQUEST_TAIL + LatencyQuery::LEN <= SRPC_MSG_LEN);
const _: () = assert!(REPLY_TAIL + LatencySummary::LEN <= SRPC_MSG_LEN);

fn le_u32(bytes: &[u8], at: usize) -> u32 {
    let mut word = [0u8; 4];
    if let Some(slice) = bytes.get(at..at + 4) {
        word.copy_from_slice(slice);
    }
    u32::from_le_bytes(word)
}

fn le_u64(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    if let Some(slice) = bytes.get(at..at + 8) {
        word.copy_from_slice(slice);
    }
    u64::from_le_bytes(word)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_round_trip_and_absence() {
        let mut message = [0u8; SRPC_MSG_LEN];
        assert_eq!(LatencyQuery::parse(&message), None);
        let query = LatencyQuery { batch: 0x0102_0304_0506_0708, test: 3 };
        message[REQUEST_TAIL..REQUEST_TAIL + LatencyQuery::LEN].copy_from_slice(&query.emit());
        assert_eq!(message[52..56], [1, 0, 0, 0]);
        assert_eq!(message[56..64], [8, 7, 6, 5, 4, 3, 2, 1]);
        assert_eq!(LatencyQuery::parse(&message), Some(query));
    }

    #[test]
    fn summary_round_trip_and_kernel_reply() {
        let kernel_reply = [0u8; SRPC_MSG_LEN];
        assert_eq!(LatencySummary::parse(&kernel_reply), None);
        let summary = LatencySummary {
            tests: 2,
            count: 1000,
            errors: 1,
            min_us: 10,
            p50_us: 20,
            p90_us: 30,
            p99_us: 40,
            p999_us: 50,
            max_us: 60,
        };
        let mut message = [0u8; SRPC_MSG_LEN];
        message[REPLY_TAIL..REPLY_TAIL + LatencySummary::LEN].copy_from_slice(&summary.emit());
        assert_eq!(u32::from_le_bytes(message[112..116].try_into().unwrap()), 20);
        assert_eq!(LatencySummary::parse(&message), Some(summary));
    }

    proptest::proptest! {
        #[test]
        fn summaries_round_trip(count: u64, errors: u64, values: [u32; 6], tests: u32) {
            let summary = LatencySummary {
                tests, count, errors,
                min_us: values[0], p50_us: values[1], p90_us: values[2],
                p99_us: values[3], p999_us: values[4], max_us: values[5],
            };
            let mut message = [0u8; SRPC_MSG_LEN];
            message[REPLY_TAIL..REPLY_TAIL + LatencySummary::LEN].copy_from_slice(&summary.emit());
            proptest::prop_assert_eq!(LatencySummary::parse(&message), Some(summary));
        }
    }
}
