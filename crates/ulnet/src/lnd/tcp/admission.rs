//! Who may run a passive handshake: the slots of one listener (the acceptor shared by the NIs
//! on one address and port, [`listener`](super::listener)).
//!
//! An accepted connection holds a slot from accept until its handshake ends (established,
//! refused, failed or timed out). The slots are bounded so bad connections cannot hold them
//! all and lock out good peers:
//!
//! * **In all**: at most [`MAX_HANDSHAKES`] at once per listener. Per listener, not per NI: a
//!   slot is taken at accept, before the connreq names the NI.
//! * **Per source**: at most [`MAX_HANDSHAKES_PER_SOURCE`] at once from one source (one IPv4
//!   address, or one IPv6 /64, which one host usually owns whole). A connection past it is
//!   closed at once: a source can only lock itself out.
//! * **Eviction**: when every slot is taken, a connection from a source holding fewer slots
//!   than the busiest source by two or more takes the busiest source's *oldest* slot (that
//!   handshake is closed). When the slots are spread more evenly than that, a connection from
//!   a source with no handshake under way takes the oldest slot of all (an honest handshake
//!   takes one round trip, so the oldest is almost surely a stuck one); any other newcomer is
//!   refused. So a source with no handshake under way is never starved.
//! * **Time**: each handshake (connreq and hello together) must end within `accept_timeout`
//!   of its accept, however the peer trickles its bytes (see [`acceptor`](super::acceptor)).
//!
//! With the defaults, 1024 slots and 5 s, an attacker needs 64 sources holding 16 slots each
//! (and reconnecting every 5 s) to fill the acceptor, and even then a new source still gets in
//! by eviction.
//!
//! lustre: the kernel has no such bounds: acceptor.c `lnet_acceptor()` reads each connreq in
//! its single acceptor thread (one slow connection delays every other by up to
//! `accept_timeout` per read), and socklnd.c `ksocknal_accept()` queues the hello read to the
//! connd threads (`ksocknal_connd()`, at most `nconnds_max` of them).

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Notify;

/// Most passive handshakes under way at once on one listener (all the NIs of one address and
/// port); more connections are refused or evict one (module documentation). The kernel bounds
/// them with its connd threads and the listen backlog.
pub const MAX_HANDSHAKES: usize = 1024;

/// Most passive handshakes under way at once from one source (an IPv4 address, an IPv6 /64).
/// An honest node hardly ever has more than one: the kernel dials one connection of a peer at
/// a time per route (socklnd_cb.c `ksocknal_connect()` loops over the types it lacks), and
/// ulnet dials one per missing connection, at most `conns_per_peer` of each type. 16 leaves
/// room for several processes (or NATed hosts) behind one address.
pub const MAX_HANDSHAKES_PER_SOURCE: usize = 16;

/// The slot table of one listener (behind a leaf lock: taken without the core lock, held for a
/// lookup).
#[derive(Debug)]
pub(super) struct Slots {
    max_total: usize,
    max_per_source: usize,
    total: usize,
    /// Each source's handshakes, oldest first. A source with none has no entry, so the map
    /// is bounded by `max_total` entries.
    by_source: HashMap<IpAddr, VecDeque<Held>>,
    next_serial: u64,
}

/// A handshake holding a slot, as the table knows it.
#[derive(Debug)]
struct Held {
    serial: u64,
    /// Notified when the handshake is evicted.
    evict: Arc<Notify>,
}

/// A slot granted to a new connection.
#[derive(Debug)]
pub(super) struct Granted {
    pub(super) source: IpAddr,
    pub(super) serial: u64,
    /// Notified (a permit is stored, so it is never missed) when the handshake must stop.
    pub(super) evicted: Arc<Notify>,
    /// The source whose oldest handshake made room for this one, and how many it held.
    pub(super) evicted_from: Option<(IpAddr, usize)>,
}

/// Why a new connection gets no slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(super) enum Refused {
    #[error("{held} handshakes already under way from this source")]
    SourceFull { held: usize },
    #[error("all {total} handshake slots taken, spread evenly over the sources")]
    Full { total: usize },
}

impl Slots {
    pub(super) fn new(max_total: usize, max_per_source: usize) -> Self {
        Self {
            max_total: max_total.max(1),
            max_per_source: max_per_source.max(1),
            total: 0,
            by_source: HashMap::new(),
            next_serial: 0,
        }
    }

    /// A slot for a new connection from `peer` (the policy of the module documentation).
    pub(super) fn admit(&mut self, peer: IpAddr) -> Result<Granted, Refused> {
        let source = source_of(peer);
        let held = self.by_source.get(&source).map_or(0, VecDeque::len);
        if held >= self.max_per_source {
            return Err(Refused::SourceFull { held });
        }
        let mut evicted_from = None;
        if self.total >= self.max_total {
            let victim = self.victim(held).ok_or(Refused::Full { total: self.total })?;
            self.evict_oldest(victim.0);
            evicted_from = Some(victim);
        }
        let serial = self.next_serial;
        self.next_serial += 1;
        let evicted = Arc::new(Notify::new());
        let entry = Held { serial, evict: Arc::clone(&evicted) };
        self.by_source.entry(source).or_default().push_back(entry);
        self.total += 1;
        Ok(Granted { source, serial, evicted, evicted_from })
    }

    /// The handshake `serial` of `source` ended; a no-op when it was evicted.
    pub(super) fn release(&mut self, source: IpAddr, serial: u64) {
        let Some(held) = self.by_source.get_mut(&source) else {
            return;
        };
        let before = held.len();
        held.retain(|entry| entry.serial != serial);
        self.total -= before - held.len();
        if held.is_empty() {
            self.by_source.remove(&source);
        }
    }

    /// Handshakes under way.
    #[cfg(test)]
    fn total(&self) -> usize {
        self.total
    }

    /// Whose oldest handshake makes room for a newcomer whose source holds `held` slots (and
    /// how many that source holds): the busiest source's if it holds two more than the
    /// newcomer's; else, for a newcomer with none, the source of the oldest handshake of all;
    /// else nobody. A scan, but only when every slot is taken, over at most `max_total`
    /// sources.
    fn victim(&self, held: usize) -> Option<(IpAddr, usize)> {
        let (busiest, most) = self
            .by_source
            .iter()
            .map(|(source, held)| (*source, held.len()))
            .max_by_key(|(_, held)| *held)?;
        if most >= held + 2 {
            return Some((busiest, most));
        }
        if held > 0 {
            return None;
        }
        self.by_source
            .iter()
            .filter_map(|(source, held)| Some((held.front()?.serial, *source, held.len())))
            .min_by_key(|(serial, _, _)| *serial)
            .map(|(_, source, held)| (source, held))
    }

    fn evict_oldest(&mut self, source: IpAddr) {
        let Some(held) = self.by_source.get_mut(&source) else {
            return;
        };
        if let Some(oldest) = held.pop_front() {
            self.total -= 1;
            oldest.evict.notify_one();
        }
        if held.is_empty() {
            self.by_source.remove(&source);
        }
    }
}

/// The slot a handshake task holds: released when dropped, however the task ends.
#[derive(Debug)]
pub(super) struct Slot<'a> {
    slots: &'a Mutex<Slots>,
    source: IpAddr,
    serial: u64,
}

impl<'a> Slot<'a> {
    pub(super) fn new(slots: &'a Mutex<Slots>, granted: &Granted) -> Self {
        Self { slots, source: granted.source, serial: granted.serial }
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner).release(self.source, self.serial);
    }
}

/// What the per-source cap counts as one source: an IPv4 address (a v4-mapped IPv6 one is
/// the same peer), or an IPv6 address's /64.
fn source_of(peer: IpAddr) -> IpAddr {
    match peer.to_canonical() {
        IpAddr::V4(ip) => IpAddr::V4(ip),
        IpAddr::V6(ip) => {
            let prefix = u128::from(ip) & !((1u128 << 64) - 1);
            IpAddr::V6(prefix.into())
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, Ipv6Addr};

    use super::*;

    fn v4(last: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, last))
    }

    fn evicted(granted: &Granted) -> bool {
        // A stored permit makes `notified()` ready at once.
        let notified = granted.evicted.notified();
        futures_ready(notified)
    }

    /// Whether a future is ready on its first poll.
    fn futures_ready(future: impl std::future::Future<Output = ()>) -> bool {
        let waker = std::task::Waker::noop();
        let mut context = std::task::Context::from_waker(waker);
        let mut future = std::pin::pin!(future);
        future.as_mut().poll(&mut context).is_ready()
    }

    #[test]
    fn one_source_is_capped() {
        let mut slots = Slots::new(100, 3);
        let held: Vec<Granted> = (0..3).map(|_| slots.admit(v4(1)).unwrap()).collect();
        assert_eq!(slots.admit(v4(1)).unwrap_err(), Refused::SourceFull { held: 3 });
        // Other sources are not affected.
        let other = slots.admit(v4(2)).unwrap();
        assert_eq!(slots.total(), 4);
        // A slot freed is a slot for the same source again.
        slots.release(held[0].source, held[0].serial);
        let again = slots.admit(v4(1)).unwrap();
        assert_eq!(again.evicted_from, None);
        assert_eq!(slots.total(), 4);
        slots.release(other.source, other.serial);
        slots.release(other.source, other.serial);
        assert_eq!(slots.total(), 3, "a second release is a no-op");
    }

    #[test]
    fn a_new_source_evicts_the_oldest_of_the_busiest() {
        let mut slots = Slots::new(6, 4);
        let a: Vec<Granted> = (0..4).map(|_| slots.admit(v4(1)).unwrap()).collect();
        let b: Vec<Granted> = (0..2).map(|_| slots.admit(v4(2)).unwrap()).collect();
        assert_eq!(slots.total(), 6);
        // Full: a newcomer takes the oldest slot of source 1 (4 held).
        let c = slots.admit(v4(3)).unwrap();
        assert_eq!(c.evicted_from, Some((v4(1), 4)));
        assert!(evicted(&a[0]));
        assert!(!a[1..].iter().chain(&b).any(evicted));
        assert_eq!(slots.total(), 6);
        // The evicted handshake's release changes nothing.
        slots.release(a[0].source, a[0].serial);
        assert_eq!(slots.total(), 6);
        // Source 1 (3 held) against source 3 (1 held): still evicts source 1's oldest.
        let c2 = slots.admit(v4(3)).unwrap();
        assert_eq!(c2.evicted_from, Some((v4(1), 3)));
        assert!(evicted(&a[1]));
        // Now 2, 2, 2: a source holding 2 cannot take from one holding 2 (no churn)...
        assert_eq!(slots.admit(v4(2)).unwrap_err(), Refused::Full { total: 6 });
        // ...but a source holding none still gets in.
        let d = slots.admit(v4(4)).unwrap();
        assert!(d.evicted_from.is_some_and(|(_, held)| held == 2));
    }

    #[test]
    fn slots_spread_evenly_go_oldest_first_to_new_sources_only() {
        let mut slots = Slots::new(3, 4);
        let held: Vec<Granted> = (1..=3).map(|source| slots.admit(v4(source)).unwrap()).collect();
        // A source already holding one cannot take another's.
        assert_eq!(slots.admit(v4(1)).unwrap_err(), Refused::Full { total: 3 });
        // A new source takes the oldest of all (source 1's), then the next oldest.
        let d = slots.admit(v4(4)).unwrap();
        assert_eq!(d.evicted_from, Some((v4(1), 1)));
        assert!(evicted(&held[0]));
        let e = slots.admit(v4(5)).unwrap();
        assert_eq!(e.evicted_from, Some((v4(2), 1)));
        assert!(evicted(&held[1]));
        assert!(!evicted(&held[2]) && !evicted(&d));
        assert_eq!(slots.total(), 3);
    }

    #[test]
    fn a_flood_from_many_sources_never_starves_a_new_one() {
        // 64 sources fill every slot; each new source still gets one.
        let mut slots = Slots::new(64 * 4, 4);
        for source in 0..64 {
            for _ in 0..4 {
                slots.admit(v4(source)).unwrap();
            }
        }
        for newcomer in 100..160 {
            let granted = slots.admit(v4(newcomer)).unwrap();
            assert!(granted.evicted_from.is_some_and(|(_, held)| held >= 2));
        }
        assert_eq!(slots.total(), 64 * 4);
        assert!(slots.by_source.len() <= 64 * 4);
    }

    #[test]
    fn ipv6_sources_are_counted_by_their_64() {
        let mut slots = Slots::new(100, 2);
        let host = |last: u16| IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 1, 0, 0, 0, last));
        slots.admit(host(1)).unwrap();
        slots.admit(host(2)).unwrap();
        assert_eq!(slots.admit(host(3)).unwrap_err(), Refused::SourceFull { held: 2 });
        let other_net = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 2, 0, 0, 0, 1));
        slots.admit(other_net).unwrap();
        // A v4-mapped address is its IPv4 source.
        let mapped = IpAddr::V6(Ipv4Addr::new(10, 0, 0, 1).to_ipv6_mapped());
        assert_eq!(source_of(mapped), v4(1));
    }

    #[test]
    fn the_slot_guard_releases() {
        let slots = Mutex::new(Slots::new(4, 4));
        let granted = slots.lock().unwrap().admit(v4(1)).unwrap();
        {
            let _slot = Slot::new(&slots, &granted);
            assert_eq!(slots.lock().unwrap().total(), 1);
        }
        assert_eq!(slots.lock().unwrap().total(), 0);
        assert!(slots.lock().unwrap().by_source.is_empty());
    }
}
