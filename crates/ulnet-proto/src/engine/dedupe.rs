//! The target side of fast failover: recognising a copy of an operation already received, so
//! no MD sees an operation twice.
//!
//! Not in Lustre (which never copies a message, and so never needs this); see
//! docs/decisions/0008-fast-failover.md. A copy has the same wire handle as its original,
//! except for [`RESEND_COOKIE_FLAG`] in the
//! interface cookie. With fast failover on, the node remembers for
//! [`DEDUPE_WINDOW`] every PUT that asked for an ACK,
//! by a fingerprint of (source pid, wire handle without the flag, match bits, offset,
//! length). An arrival that matches a remembered one, where at least one of the two is a copy,
//! is a duplicate: it is ACKed again if the first was ACKed (the initiator's MD takes one
//! response, so a second ACK is stale there) and otherwise dropped. Two originals never match
//! each other: a user may legitimately PUT the same MD twice. GETs are not remembered: a copy
//! of a GET whose REPLY was lost is served again if the target MD still matches (a read is
//! idempotent; it is the only way to recover that REPLY), and the initiator still sees one
//! REPLY.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::time::Duration;

use crate::time::Time;
use crate::wire::header::{Body, Header};

/// How long a target remembers the PUTs (with ACK) it received, to recognise a copy sent by
/// fast failover. A protocol constant shared by initiators and targets.
pub const DEDUPE_WINDOW: Duration = Duration::from_secs(30);
/// Set in the interface cookie of a PUT copy's ACK wire handle. Interface cookies are start
/// times in nanoseconds, so the bit is otherwise clear (the node clears it in its own).
pub const RESEND_COOKIE_FLAG: u64 = 1 << 63;

/// Most deliveries remembered at once; beyond it the oldest are forgotten early (about 40
/// bytes each, so 40 MiB at most; it only grows with traffic).
pub const MAX_DELIVERY_RECORDS: usize = 1 << 20;

/// What became of a remembered arrival.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Delivery {
    /// Received, not (yet) acknowledged: a PUT being received or waiting on a lazy portal.
    Arrived,
    /// A PUT delivered and ACKed with this matched length.
    Acked(u32),
}

#[derive(Clone, Copy, Debug)]
struct Record {
    at: Time,
    copy: bool,
    delivery: Delivery,
}

/// What to do with an arrival.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// First time seen (or a repeat of an original by an original): deliver normally.
    Fresh(u64),
    /// A duplicate of something already delivered.
    Duplicate(Delivery),
}

#[derive(Debug, Default)]
pub(crate) struct DeliveryLog {
    /// Keyed by fingerprints, which are already well mixed.
    records: HashMap<u64, Record, BuildHasherDefault<PassThrough>>,
    order: VecDeque<(Time, u64)>,
}

/// A hasher for keys that are already uniformly mixed 64-bit fingerprints.
#[derive(Debug, Default)]
struct PassThrough(u64);

impl Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*byte);
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = value;
    }
}

impl DeliveryLog {
    /// Looks an arrival up and remembers it; `None` for messages it does not track (all but
    /// PUTs with ACK).
    pub(crate) fn arrive(
        &mut self,
        now: Time,
        header: &Header,
        window: Duration,
    ) -> Option<Verdict> {
        let (fingerprint, copy) = fingerprint(header)?;
        self.expire(now, window);
        if let Some(record) = self.records.get_mut(&fingerprint) {
            if copy || record.copy {
                return Some(Verdict::Duplicate(record.delivery));
            }
            *record = Record { at: now, copy, delivery: Delivery::Arrived };
        } else {
            self.records.insert(fingerprint, Record { at: now, copy, delivery: Delivery::Arrived });
        }
        self.order.push_back((now, fingerprint));
        Some(Verdict::Fresh(fingerprint))
    }

    /// The PUT remembered as `fingerprint` was ACKed with `mlength`.
    pub(crate) fn acked(&mut self, fingerprint: u64, mlength: u32) {
        if let Some(record) = self.records.get_mut(&fingerprint) {
            record.delivery = Delivery::Acked(mlength);
        }
    }

    /// The PUT remembered as `fingerprint` was not delivered after all (no match, failed
    /// receive): a copy may try again.
    pub(crate) fn forget(&mut self, fingerprint: u64) {
        self.records.remove(&fingerprint);
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.records.len()
    }

    fn expire(&mut self, now: Time, window: Duration) {
        while let Some(&(at, fingerprint)) = self.order.front() {
            let full = self.order.len() >= MAX_DELIVERY_RECORDS;
            if !full && now < at + window {
                break;
            }
            self.order.pop_front();
            // A later arrival with the same fingerprint refreshed the record: keep it.
            if self.records.get(&fingerprint).is_some_and(|record| record.at == at) {
                self.records.remove(&fingerprint);
            }
        }
    }
}

/// The identity of a PUT with ACK, and whether it is a copy.
fn fingerprint(header: &Header) -> Option<(u64, bool)> {
    let Body::Put { ack_wmd: handle, match_bits, offset, .. } = header.body else {
        return None;
    };
    if handle.is_none() {
        return None;
    }
    let words = [
        u64::from(header.src_pid) << 32 | u64::from(offset),
        u64::from(header.payload_length),
        match_bits,
        handle.interface_cookie & !RESEND_COOKIE_FLAG,
        handle.object_cookie,
    ];
    let fingerprint = words.iter().fold(0x9e37_79b9_7f4a_7c15_u64, |state, word| mix(state ^ word));
    Some((fingerprint, handle.interface_cookie & RESEND_COOKIE_FLAG != 0))
}

/// The splitmix64 finalizer: a fast, well-distributed 64-bit mix. Fingerprints need not
/// resist an adversary: a collision can only make the node drop a copy, never an original.
fn mix(mut value: u64) -> u64 {
    value = (value ^ (value >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    value = (value ^ (value >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    value ^ (value >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::{Net, Nid};
    use crate::wire::header::WireHandle;

    fn put(cookie: u64, ack: bool) -> Header {
        let ack_wmd = if ack {
            WireHandle { interface_cookie: cookie, object_cookie: 0x21 }
        } else {
            WireHandle::NONE
        };
        Header {
            dest_nid: Nid::new4(Net::TCP, 2),
            src_nid: Nid::new4(Net::TCP, 1),
            dest_pid: 12345,
            src_pid: 12345,
            payload_length: 8,
            body: Body::Put { ack_wmd, match_bits: 7, hdr_data: 0, ptl_index: 4, offset: 0 },
        }
    }

    const WINDOW: Duration = Duration::from_secs(30);

    #[test]
    fn originals_never_match_each_other() {
        let mut log = DeliveryLog::default();
        let now = Time::from_secs(1);
        assert!(matches!(log.arrive(now, &put(5, true), WINDOW), Some(Verdict::Fresh(_))));
        assert!(matches!(log.arrive(now, &put(5, true), WINDOW), Some(Verdict::Fresh(_))));
        assert_eq!(log.arrive(now, &put(5, false), WINDOW), None);
    }

    #[test]
    fn a_copy_after_its_original_is_a_duplicate_and_reports_the_ack() {
        let mut log = DeliveryLog::default();
        let now = Time::from_secs(1);
        let Some(Verdict::Fresh(fingerprint)) = log.arrive(now, &put(5, true), WINDOW) else {
            panic!("fresh");
        };
        let copy = put(5 | RESEND_COOKIE_FLAG, true);
        assert_eq!(log.arrive(now, &copy, WINDOW), Some(Verdict::Duplicate(Delivery::Arrived)));
        log.acked(fingerprint, 8);
        assert_eq!(log.arrive(now, &copy, WINDOW), Some(Verdict::Duplicate(Delivery::Acked(8))));
        // The original arriving after its copy is a duplicate too.
        let mut log = DeliveryLog::default();
        log.arrive(now, &copy, WINDOW);
        assert_eq!(
            log.arrive(now, &put(5, true), WINDOW),
            Some(Verdict::Duplicate(Delivery::Arrived))
        );
    }

    #[test]
    fn records_expire_and_can_be_forgotten() {
        let mut log = DeliveryLog::default();
        let copy = put(5 | RESEND_COOKIE_FLAG, true);
        let Some(Verdict::Fresh(fingerprint)) =
            log.arrive(Time::from_secs(1), &put(5, true), WINDOW)
        else {
            panic!("fresh");
        };
        log.forget(fingerprint);
        assert!(matches!(log.arrive(Time::from_secs(2), &copy, WINDOW), Some(Verdict::Fresh(_))));
        assert_eq!(log.len(), 1);
        // Past the window the copy is forgotten.
        assert!(matches!(
            log.arrive(Time::from_secs(40), &put(5, true), WINDOW),
            Some(Verdict::Fresh(_))
        ));
        assert_eq!(log.len(), 1);
    }
}
