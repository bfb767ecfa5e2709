//! Virtual time: the core never reads a clock, drivers pass `now` in.
//!
//! [`Time`] is an instant in nanoseconds since an epoch the driver chooses (process start for a
//! real driver, zero for a simulation). Spans are [`std::time::Duration`].

use std::fmt;
use std::ops::{Add, AddAssign, Sub};
use std::time::Duration;

/// An instant, in nanoseconds since the driver's epoch.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Time(u64);

impl Time {
    /// The driver's epoch.
    pub const ZERO: Self = Self(0);
    /// Later than every reachable instant; a deadline that never fires.
    pub const MAX: Self = Self(u64::MAX);

    pub const fn from_nanos(nanos: u64) -> Self {
        Self(nanos)
    }

    pub const fn from_secs(secs: u64) -> Self {
        Self(secs.saturating_mul(1_000_000_000))
    }

    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// The span from `earlier` to `self`, zero when `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Time) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }

    /// `self - span`, saturating at [`Time::ZERO`].
    pub fn saturating_sub(self, span: Duration) -> Time {
        let nanos = u64::try_from(span.as_nanos()).unwrap_or(u64::MAX);
        Time(self.0.saturating_sub(nanos))
    }

    /// `self + span`, saturating at [`Time::MAX`].
    pub fn saturating_add(self, span: Duration) -> Time {
        let nanos = u64::try_from(span.as_nanos()).unwrap_or(u64::MAX);
        Time(self.0.saturating_add(nanos))
    }
}

impl Add<Duration> for Time {
    type Output = Time;

    fn add(self, span: Duration) -> Time {
        self.saturating_add(span)
    }
}

impl AddAssign<Duration> for Time {
    fn add_assign(&mut self, span: Duration) {
        *self = self.saturating_add(span);
    }
}

impl Sub<Duration> for Time {
    type Output = Time;

    fn sub(self, span: Duration) -> Time {
        self.saturating_sub(span)
    }
}

impl fmt::Debug for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "t+{}.{:09}s", self.0 / 1_000_000_000, self.0 % 1_000_000_000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates() {
        assert_eq!(Time::MAX + Duration::from_secs(1), Time::MAX);
        assert_eq!(Time::ZERO + Duration::from_millis(1), Time::from_nanos(1_000_000));
        assert_eq!(Time::from_secs(1) - Duration::from_secs(2), Time::ZERO);
        assert_eq!(
            Time::from_secs(1).saturating_duration_since(Time::from_secs(2)),
            Duration::ZERO
        );
        assert_eq!(format!("{:?}", Time::from_nanos(1_500_000_000)), "t+1.500000000s");
    }
}
