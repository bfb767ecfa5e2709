//! The runtime's clock: a monotonic instant mapped onto the core's [`Time`].
//!
//! Every node in the process shares one epoch (the first time anything asks), so instants taken
//! by different nodes compare directly; the in-process fabric relies on that to schedule a
//! frame sent by one node for delivery by another.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use ulnet_proto::time::Time;

static EPOCH: OnceLock<Instant> = OnceLock::new();

fn epoch() -> Instant {
    *EPOCH.get_or_init(Instant::now)
}

/// Now, as the core's [`Time`]. Never goes backwards (`Instant` is monotonic).
pub(crate) fn now() -> Time {
    let nanos = u64::try_from(epoch().elapsed().as_nanos()).unwrap_or(u64::MAX);
    Time::from_nanos(nanos)
}

/// The [`Instant`] of a core [`Time`], saturating far in the future for [`Time::MAX`].
pub(crate) fn instant(time: Time) -> Instant {
    let span = Duration::from_nanos(time.as_nanos());
    // A year is "never" for a sleep; keeps `Instant` arithmetic from overflowing.
    const FAR: Duration = Duration::from_secs(365 * 24 * 3600);
    let start = epoch();
    start.checked_add(span.min(FAR)).unwrap_or(start)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn now_is_monotonic_and_maps_back_to_instants() {
        let first = now();
        let second = now();
        assert!(second >= first);
        let back = instant(first);
        assert!(back <= Instant::now());
        assert!(instant(Time::MAX) > Instant::now());
    }
}
