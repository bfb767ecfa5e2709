//! Rate limits for log lines a peer can cause at will (refused connections, bad handshakes,
//! broken streams), so a flood of bad connections cannot flood the log too.
//!
//! One [`LogLimit`] per kind of message: the first [`LogLimit::burst`] messages of each
//! `interval` go through, the rest are counted, and the first message of a later window is
//! followed by one line saying how many similar messages were suppressed. A quiet kind thus
//! logs every message; a flooded one logs `burst` lines per interval plus the count.
//!
//! The kernel limits its console the same way, per call site: a `cfs_debug_limit_state` lets a
//! message through, then skips the same call site's messages for a delay that doubles on each
//! message let through (half a second up to 600 s), and prints "Skipped N previous similar
//! messages" after the next one. ulnet keeps fixed windows, which are easier to reason about
//! and to test; the count line is the same idea.
//! lustre: libcfs/include/libcfs/libcfs_debug.h `CDEBUG_LIMIT`, `struct
//! cfs_debug_limit_state`, `CDEBUG_DEFAULT_MIN_DELAY`/`MAX_DELAY`; libcfs/libcfs/tracefile.c
//! `libcfs_debug_msg()`.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use ulnet_proto::time::Time;

/// Messages of one kind let through per window by default.
pub(crate) const DEFAULT_BURST: u32 = 5;

/// The default window: a sustained flood writes [`DEFAULT_BURST`] lines and one count line
/// every 10 s.
pub(crate) const DEFAULT_INTERVAL: Duration = Duration::from_secs(10);

/// The rate limit of one kind of log message. The clock is the caller's (`now` on each call),
/// so tests drive it by hand.
#[derive(Debug)]
pub(crate) struct LogLimit {
    /// What the count line calls the suppressed messages.
    kind: &'static str,
    burst: u32,
    interval: Duration,
    window: Mutex<Window>,
}

#[derive(Debug, Default)]
struct Window {
    /// When the current window started; `None` before the first message.
    start: Option<Time>,
    /// Messages let through in the current window.
    passed: u32,
    /// Messages suppressed since the last one let through.
    suppressed: u64,
}

impl LogLimit {
    /// [`DEFAULT_BURST`] messages per [`DEFAULT_INTERVAL`].
    pub(crate) const fn new(kind: &'static str) -> Self {
        Self::with_rate(kind, DEFAULT_BURST, DEFAULT_INTERVAL)
    }

    pub(crate) const fn with_rate(kind: &'static str, burst: u32, interval: Duration) -> Self {
        let window = Window { start: None, passed: 0, suppressed: 0 };
        Self { kind, burst, interval, window: Mutex::new(window) }
    }

    /// Whether a message of this kind may be logged at `now`: `Some(n)` when it may, `n` being
    /// how many were suppressed since the last one logged (to report with it); `None` when it
    /// is suppressed (and counted).
    pub(crate) fn pass(&self, now: Time) -> Option<u64> {
        let mut window = self.window.lock().unwrap_or_else(PoisonError::into_inner);
        let expired = window.start.is_none_or(|start| now >= start.saturating_add(self.interval));
        if expired {
            window.start = Some(now);
            window.passed = 0;
        }
        if window.passed >= self.burst {
            window.suppressed = window.suppressed.saturating_add(1);
            return None;
        }
        window.passed += 1;
        Some(std::mem::take(&mut window.suppressed))
    }

    /// What the count line calls the messages of this kind.
    pub(crate) fn kind(&self) -> &'static str {
        self.kind
    }
}

/// `tracing::warn!` through a [`LogLimit`]: the line is logged unless the limit suppresses it,
/// followed by "N similar messages suppressed" when some were since the last one logged.
///
/// `warn_limited!(limit, now, field = value, ..., "message")`, fields as `tracing::warn!`.
macro_rules! warn_limited {
    ($limit:expr, $now:expr, $($arg:tt)+) => {{
        let limit: &$crate::log_limit::LogLimit = $limit;
        if let Some(suppressed) = limit.pass($now) {
            tracing::warn!($($arg)+);
            if suppressed > 0 {
                tracing::warn!(kind = limit.kind(), "{suppressed} similar messages suppressed");
            }
        }
    }};
}

pub(crate) use warn_limited;

#[cfg(test)]
mod tests {
    use super::*;

    fn at(millis: u64) -> Time {
        Time::from_nanos(millis * 1_000_000)
    }

    #[test]
    fn a_burst_per_window_then_the_count() {
        let limit = LogLimit::with_rate("refused", 3, Duration::from_secs(1));
        // The first three of the window go through, with nothing suppressed before them.
        assert_eq!(limit.pass(at(0)), Some(0));
        assert_eq!(limit.pass(at(10)), Some(0));
        assert_eq!(limit.pass(at(20)), Some(0));
        // The rest of the window is counted, not logged.
        for millis in 30..40 {
            assert_eq!(limit.pass(at(millis)), None);
        }
        assert_eq!(limit.pass(at(999)), None);
        // A new window: the first message carries the count of the 11 suppressed.
        assert_eq!(limit.pass(at(1000)), Some(11));
        assert_eq!(limit.pass(at(1001)), Some(0));
        assert_eq!(limit.pass(at(1002)), Some(0));
        assert_eq!(limit.pass(at(1003)), None);
        assert_eq!(limit.kind(), "refused");
    }

    #[test]
    fn a_quiet_kind_logs_everything() {
        let limit = LogLimit::with_rate("quiet", 1, Duration::from_secs(1));
        for second in 0..20 {
            assert_eq!(limit.pass(at(second * 1000)), Some(0), "second {second}");
        }
    }

    #[test]
    fn the_window_starts_at_the_first_message_after_a_quiet_spell() {
        let limit = LogLimit::with_rate("late", 2, Duration::from_secs(10));
        assert_eq!(limit.pass(at(5_000)), Some(0));
        assert_eq!(limit.pass(at(6_000)), Some(0));
        assert_eq!(limit.pass(at(14_000)), None, "still the window of 5 s");
        assert_eq!(limit.pass(at(15_000)), Some(1));
        // Long after: a fresh window, not many windows' worth of budget.
        assert_eq!(limit.pass(at(100_000)), Some(0));
        assert_eq!(limit.pass(at(100_001)), Some(0));
        assert_eq!(limit.pass(at(100_002)), None);
    }

    #[test]
    fn a_flood_logs_a_bounded_number_of_lines() {
        let limit = LogLimit::new("flood");
        // 3,000 refusals in 1.5 s (the hostile trial's rate), then 60 s of 1,000 a second.
        let mut logged = 0u64;
        let mut reported = 0u64;
        let mut total = 0u64;
        for millis in 0..61_500u64 {
            let attempts = if millis < 1_500 { 2 } else { 1 };
            for _ in 0..attempts {
                total += 1;
                if let Some(suppressed) = limit.pass(at(millis)) {
                    logged += 1;
                    reported += suppressed;
                }
            }
        }
        // 7 windows of 10 s: DEFAULT_BURST lines each.
        assert_eq!(logged, 7 * u64::from(DEFAULT_BURST));
        // Every message is logged or counted in a later line, but the last window's 1,495
        // suppressed, which wait for the next message.
        assert_eq!(total - logged - reported, 1_500 - u64::from(DEFAULT_BURST));
    }
}
