//! Fast failover's state: each peer NI's progress clocks per path (`Watch`), and the
//! engine-wide part (`Failover`): the watch queue of armed paths, the bytes held in private
//! payload copies and the target side's delivery log. The
//! operations that move messages are in `failover.rs`; the design is in
//! docs/decisions/0008-fast-failover.md.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use crate::engine::dedupe::DeliveryLog;
use crate::engine::ni::NiId;
use crate::time::Time;

/// Payload bytes fast failover may hold in private copies at once (originals the driver
/// still sends, and copies of requests that already left); beyond it no more copies are made
/// and those operations wait for their response tracker as in Lustre.
pub const MAX_FAILOVER_BYTES: u64 = 64 << 20;

/// A peer NI's round-trip estimate and the progress clocks of the paths to it.
///
/// A black hole is a property of a path, a (local NI, peer NI) pair, not of either end: with
/// rails on separate subnets, a connection from one rail's address to another rail's address
/// crosses both rails (the destination's route out, the source's route back), so one broken
/// rail breaks every pair that involves it while its peer NI stays reachable from the
/// other local NIs. So the clocks, the suspicion and the probes are per path.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Watch {
    /// Smoothed round trip and its variation (RFC 6298), nanoseconds; 0 until measured.
    pub(crate) srtt_ns: u64,
    pub(crate) rttvar_ns: u64,
    /// The paths to it with work outstanding, armed, or suspect (others are dropped).
    pub(crate) paths: Vec<PathWatch>,
    /// When something last arrived from it on each local NI (a path proven alive).
    pub(crate) heard: Vec<(NiId, Time)>,
}

/// The progress clocks of one path (local NI -> this peer NI).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PathWatch {
    pub(crate) ni: NiId,
    /// Transmits on it the driver holds.
    pub(crate) in_lnd: u32,
    /// The last LND progress (or when `in_lnd` became non-zero).
    pub(crate) lnd_since: Time,
    /// Tracked requests sent on it and awaiting their response.
    pub(crate) awaiting: u32,
    /// The last message received on it (or when `awaiting` became non-zero).
    pub(crate) rx_since: Time,
    /// Its entry in the watch queue, if any (the instant it is filed under).
    pub(crate) armed: Option<Time>,
    /// Suspected of black-holing traffic: selection avoids it until something arrives on it
    /// (a probe's REPLY, or any message).
    pub(crate) suspect: bool,
}

impl PathWatch {
    pub(crate) fn new(ni: NiId) -> Self {
        Self {
            ni,
            in_lnd: 0,
            lnd_since: Time::ZERO,
            awaiting: 0,
            rx_since: Time::ZERO,
            armed: None,
            suspect: false,
        }
    }

    /// When it becomes suspect, if anything is outstanding.
    pub(crate) fn due(&self, timeout: Duration) -> Option<Time> {
        let lnd = (self.in_lnd > 0).then(|| self.lnd_since + timeout);
        let peer = (self.awaiting > 0).then(|| self.rx_since + timeout);
        [lnd, peer].into_iter().flatten().min()
    }

    pub(crate) fn idle(&self) -> bool {
        self.in_lnd == 0 && self.awaiting == 0 && self.armed.is_none() && !self.suspect
    }
}

impl Watch {
    pub(crate) fn sample(&mut self, rtt: Duration) {
        let rtt = u64::try_from(rtt.as_nanos()).unwrap_or(u64::MAX);
        if self.srtt_ns == 0 {
            self.srtt_ns = rtt.max(1);
            self.rttvar_ns = rtt / 2;
        } else {
            let delta = self.srtt_ns.abs_diff(rtt);
            self.rttvar_ns = self.rttvar_ns - self.rttvar_ns / 4 + delta / 4;
            self.srtt_ns = (self.srtt_ns - self.srtt_ns / 8 + rtt / 8).max(1);
        }
    }

    pub(crate) fn path(&self, ni: NiId) -> Option<&PathWatch> {
        self.paths.iter().find(|path| path.ni == ni)
    }

    /// The path from `ni`, created if missing.
    #[expect(clippy::indexing_slicing, reason = "the index was found or pushed just above")]
    pub(crate) fn path_mut(&mut self, ni: NiId) -> &mut PathWatch {
        let index = match self.paths.iter().position(|path| path.ni == ni) {
            Some(index) => index,
            None => {
                self.paths.push(PathWatch::new(ni));
                self.paths.len() - 1
            }
        };
        // In range: found above or just pushed.
        &mut self.paths[index]
    }

    /// Whether the path from `ni` is suspected of black-holing traffic.
    pub(crate) fn suspects(&self, ni: NiId) -> bool {
        self.path(ni).is_some_and(|path| path.suspect)
    }

    /// Whether any path to it is suspect (it stays under recovery until each is probed).
    pub(crate) fn any_suspect(&self) -> bool {
        self.paths.iter().any(|path| path.suspect)
    }

    /// The local NI of a suspect path to probe next, rotating so each gets its turn.
    pub(crate) fn next_probe(&mut self) -> Option<NiId> {
        let index = self.paths.iter().position(|path| path.suspect)?;
        let path = self.paths.remove(index);
        self.paths.push(path);
        Some(path.ni)
    }

    /// Forgets every path, keeping the round-trip estimate (fast failover turned on or off).
    pub(crate) fn restart(&mut self) {
        self.paths.clear();
        self.heard.clear();
    }

    pub(crate) fn prune(&mut self) {
        self.paths.retain(|path| !path.idle());
    }
}

/// Fast failover's engine-wide state. Calls on any partition hold copies and log
/// deliveries, so each piece is an atomic or a leaf lock of its own, taken for one operation
/// and never held while taking another (decision 0029); the watch queue is kept per
/// partition, beside the peer NIs it watches (`peer.rs`, `PeerNis`).
#[derive(Debug, Default)]
pub(crate) struct Failover {
    /// Payload bytes held in private copies.
    held_bytes: AtomicU64,
    /// Target side: PUTs with ACK and GETs received lately.
    deliveries: Mutex<DeliveryLog>,
}

/// A leaf lock, taken: the engine never panics while holding one, so a poisoned one is
/// taken as it is.
fn leaf<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Failover {
    /// Whether `bytes` more fit in the private-copy budget.
    pub(crate) fn can_hold(&self, bytes: u64) -> bool {
        self.held_bytes() + bytes <= MAX_FAILOVER_BYTES
    }

    pub(crate) fn hold(&self, bytes: u64) {
        self.held_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    pub(crate) fn release(&self, bytes: u64) {
        let _ = self.held_bytes.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
            Some(held.saturating_sub(bytes))
        });
    }

    pub(crate) fn held_bytes(&self) -> u64 {
        self.held_bytes.load(Ordering::Relaxed)
    }

    /// The delivery log, locked: hold it for one operation only.
    pub(crate) fn deliveries(&self) -> MutexGuard<'_, DeliveryLog> {
        leaf(&self.deliveries)
    }
}
