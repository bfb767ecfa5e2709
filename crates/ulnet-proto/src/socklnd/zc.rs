//! Zero-copy cookies, both directions.
//!
//! - [`ZcAckQueue`]: cookies the *peer* asked us to return (`cookies[0]` of its LNET messages),
//!   one queue per connection. A cookie is queued only once the whole payload is in, and leaves
//!   the queue exactly once, piggy-backed on an LNET message or in a NOOP. The queue is per
//!   connection on purpose: when a connection closes the kernel forgets the requests sent on it
//!   (`ksocknal_finalize_zcreq()`), so returning them on a sibling would be "Unknown ZC-ACK
//!   cookie" and cost that sibling too.
//! - [`ZcRequests`]: cookies *we* put in our LNET messages, one set per peer because the ACK may
//!   come back on any connection. ulnet asks for them as the kernel does, for payloads of at
//!   least `zc_min_payload`, and completes such a send on the ACK rather than when written: a
//!   message is then only complete once the peer has all of it, and one caught in a dying
//!   connection fails and is resent (docs/decisions/0004-zero-copy-acks.md).
//!
//! lustre: socklnd_cb.c `ksocknal_check_zc_req()`, `ksocknal_check_peer_timeouts()`,
//! socklnd_proto.c (`ksocknal_handle_zcreq()`, `ksocknal_handle_zcack()`,
//! `ksocknal_queue_tx_zcack_v3()`), socklnd.c `ksocknal_finalize_zcreq()`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use crate::time::Time;
use crate::wire::hello::ProtoVersion;
use crate::wire::ksock::{
    FIRST_ZC_COOKIE, MAX_ZC_ACK_RANGE, SOCKNAL_KEEPALIVE_PING, ZcAck, next_zc_cookie,
};

use super::{ConnId, MessageToken};

/// Most cookies a connection holds for acknowledgement. A sender cannot have more ZC requests
/// outstanding than its send credits to us (`peer_credits`, default 8, at most the NI's
/// `credits`, default 256): each request holds a credit until our ACK. A peer past this bound
/// is misbehaving and loses the connection.
pub const MAX_PENDING_ZC_ACKS: usize = 4096;
/// Most ZC requests of ours awaiting ACK from one peer (same reasoning, our side).
pub const MAX_PENDING_ZC_REQUESTS: usize = 4096;

/// Cookies a connection must return to the peer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ZcAckQueue {
    cookies: BTreeSet<u64>,
}

/// More cookies to acknowledge than [`MAX_PENDING_ZC_ACKS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("more than {MAX_PENDING_ZC_ACKS} ZC requests awaiting acknowledgement")]
pub struct TooManyZcAcks;

impl ZcAckQueue {
    pub fn new() -> Self {
        Self::default()
    }

    /// Queues a cookie received in a complete message. A cookie already queued is not queued
    /// twice (the peer would count the second ACK as unknown).
    pub fn push(&mut self, cookie: u64) -> Result<(), TooManyZcAcks> {
        if self.cookies.len() >= MAX_PENDING_ZC_ACKS && !self.cookies.contains(&cookie) {
            return Err(TooManyZcAcks);
        }
        self.cookies.insert(cookie);
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.cookies.is_empty()
    }

    pub fn len(&self) -> usize {
        self.cookies.len()
    }

    /// The cookie to piggy-back on an outgoing LNET message (the oldest, i.e. smallest).
    pub fn pop_piggy_back(&mut self) -> Option<u64> {
        self.cookies.pop_first()
    }

    /// The next NOOP's acknowledgement: on V3/V4 the longest run of consecutive cookies as a
    /// range, else the two smallest cookies as a pair, else one; V2 NOOPs carry one cookie.
    /// lustre: socklnd_proto.c `ksocknal_queue_tx_zcack_v3()` (what a receiver accepts:
    /// `ksocknal_handle_zcack()`).
    pub fn pop_noop(&mut self, version: ProtoVersion) -> Option<ZcAck> {
        let first = self.cookies.pop_first()?;
        if !matches!(version, ProtoVersion::V3 | ProtoVersion::V4) {
            return Some(ZcAck::Single(first));
        }
        let mut last = first;
        while last - first + 1 < MAX_ZC_ACK_RANGE {
            match last.checked_add(1) {
                Some(next) if self.cookies.remove(&next) => last = next,
                _ => break,
            }
        }
        if last > first {
            return Some(ZcAck::Range(first, last));
        }
        // (x, 1) would read as a malformed keepalive: a peer that used the reserved cookie 1
        // (the kernel never does) gets it back alone.
        if first == SOCKNAL_KEEPALIVE_PING {
            return Some(ZcAck::Single(first));
        }
        match self.cookies.pop_first() {
            Some(second) => Some(ZcAck::Pair(second, first)),
            None => Some(ZcAck::Single(first)),
        }
    }
}

/// Our ZC requests to one peer that await its ACK.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZcRequests {
    next_cookie: u64,
    pending: BTreeMap<u64, PendingRequest>,
    acked: VecDeque<MessageToken>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PendingRequest {
    conn: ConnId,
    token: MessageToken,
    deadline: Time,
}

/// Why a ZC request cannot be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("more than {MAX_PENDING_ZC_REQUESTS} ZC requests awaiting the peer's ACK")]
pub struct TooManyZcRequests;

/// A ZC-ACK naming cookies we are not waiting for ("Unknown ZC-ACK cookie", EPROTO).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("ZC-ACK {ack:?} names {unknown} cookie(s) with no pending request")]
pub struct UnknownZcCookie {
    pub ack: ZcAck,
    pub unknown: u64,
}

impl Default for ZcRequests {
    fn default() -> Self {
        Self::new()
    }
}

impl ZcRequests {
    pub fn new() -> Self {
        Self { next_cookie: FIRST_ZC_COOKIE, pending: BTreeMap::new(), acked: VecDeque::new() }
    }

    /// Assigns the next cookie to a message sent on `conn`; its ACK is due within `timeout`
    /// (`sock_timeout`). lustre: socklnd_cb.c `ksocknal_check_zc_req()`.
    pub fn register(
        &mut self,
        now: Time,
        timeout: Duration,
        conn: ConnId,
        token: MessageToken,
    ) -> Result<u64, TooManyZcRequests> {
        if self.pending.len() >= MAX_PENDING_ZC_REQUESTS {
            return Err(TooManyZcRequests);
        }
        // Skip cookies still pending after a wrap-around; the bound above keeps this short.
        let mut cookie = self.next_cookie;
        while self.pending.contains_key(&cookie) {
            cookie = next_zc_cookie(cookie);
        }
        self.next_cookie = next_zc_cookie(cookie);
        let deadline = now.saturating_add(timeout);
        self.pending.insert(cookie, PendingRequest { conn, token, deadline });
        Ok(cookie)
    }

    /// Matches an acknowledgement against the pending requests: every cookie it names must be
    /// pending. Matched requests complete (see [`ZcRequests::poll_acked`]) even when the ACK
    /// as a whole is a protocol error, as in the kernel. Keepalives and empty ACKs match
    /// nothing and are fine; the caller turns a V2 keepalive into `Single(1)` first, since V2
    /// does not know keepalives. lustre: socklnd_proto.c `ksocknal_handle_zcack()`.
    pub fn handle_ack(&mut self, ack: ZcAck) -> Result<(), UnknownZcCookie> {
        let matched: Vec<u64> = match ack {
            ZcAck::None | ZcAck::Keepalive => return Ok(()),
            ZcAck::Single(cookie) => vec![cookie],
            ZcAck::Pair(a, b) => vec![a, b],
            ZcAck::Range(a, b) => {
                self.pending.range(a.min(b)..=a.max(b)).map(|(&c, _)| c).collect()
            }
        };
        let mut found = 0u64;
        for cookie in matched {
            if let Some(request) = self.pending.remove(&cookie) {
                self.acked.push_back(request.token);
                found += 1;
            }
        }
        let unknown = ack.count().saturating_sub(found);
        if unknown == 0 { Ok(()) } else { Err(UnknownZcCookie { ack, unknown }) }
    }

    /// A message whose ZC request the peer acknowledged.
    pub fn poll_acked(&mut self) -> Option<MessageToken> {
        self.acked.pop_front()
    }

    /// Forgets the requests made on a closed connection (the peer forgets them too) and
    /// returns their messages, which complete unacknowledged.
    /// lustre: socklnd.c `ksocknal_finalize_zcreq()`.
    pub fn abort_conn(&mut self, conn: ConnId) -> Vec<MessageToken> {
        let mut aborted = Vec::new();
        self.pending.retain(|_, request| {
            let keep = request.conn != conn;
            if !keep {
                aborted.push(request.token);
            }
            keep
        });
        aborted
    }

    pub fn len(&self) -> usize {
        self.pending.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// The earliest ACK deadline.
    pub fn poll_timeout(&self) -> Option<Time> {
        self.pending.values().map(|request| request.deadline).min()
    }

    /// The connection of the oldest request whose ACK is overdue ("stale ZC_REQs"): the kernel
    /// closes it and its siblings with ETIMEDOUT.
    /// lustre: socklnd_cb.c `ksocknal_check_peer_timeouts()`.
    pub fn stale_conn(&self, now: Time) -> Option<ConnId> {
        self.pending
            .values()
            .filter(|request| now >= request.deadline)
            .min_by_key(|request| request.deadline)
            .map(|request| request.conn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(cookies: &[u64]) -> ZcAckQueue {
        let mut queue = ZcAckQueue::new();
        for &cookie in cookies {
            queue.push(cookie).unwrap();
        }
        queue
    }

    fn drain(queue: &mut ZcAckQueue, version: ProtoVersion) -> Vec<ZcAck> {
        std::iter::from_fn(|| queue.pop_noop(version)).collect()
    }

    #[test]
    fn noops_batch_runs_into_ranges_then_pairs() {
        let mut q = queue(&[5, 2, 3, 4, 9, 12, 20]);
        assert_eq!(
            drain(&mut q, ProtoVersion::V3),
            [ZcAck::Range(2, 5), ZcAck::Pair(12, 9), ZcAck::Single(20)]
        );
        assert!(q.is_empty());
    }

    #[test]
    fn v2_noops_carry_one_cookie() {
        let mut q = queue(&[3, 2]);
        assert_eq!(drain(&mut q, ProtoVersion::V2), [ZcAck::Single(2), ZcAck::Single(3)]);
    }

    #[test]
    fn noop_encodings_decode_to_the_same_cookies() {
        let mut q = queue(&[7, 8, 9, 11, 40]);
        let mut seen = Vec::new();
        for ack in drain(&mut q, ProtoVersion::V4) {
            let decoded = ZcAck::decode(ack.encode()).unwrap();
            seen.extend(decoded.cookies());
        }
        seen.sort_unstable();
        assert_eq!(seen, [7, 8, 9, 11, 40]);
    }

    #[test]
    fn cookies_are_queued_once_and_bounded() {
        let q = queue(&[2, 2]);
        assert_eq!(q.len(), 1);
        let mut q = ZcAckQueue::new();
        for cookie in 0..MAX_PENDING_ZC_ACKS as u64 {
            q.push(cookie + 2).unwrap();
        }
        assert_eq!(q.push(2), Ok(()));
        assert_eq!(q.push(1 << 40), Err(TooManyZcAcks));
        assert_eq!(q.pop_piggy_back(), Some(2));
    }

    #[test]
    fn the_reserved_cookie_is_never_paired() {
        // Found by fuzzing: Pair(9, 1) would encode as (9, 1), a malformed keepalive.
        let mut q = queue(&[1, 9]);
        let acks = drain(&mut q, ProtoVersion::V3);
        assert_eq!(acks, [ZcAck::Single(1), ZcAck::Single(9)]);
        for ack in acks {
            assert!(ZcAck::decode(ack.encode()).is_ok());
        }
        let mut q = queue(&[1, 2, 3]);
        assert_eq!(drain(&mut q, ProtoVersion::V3), [ZcAck::Range(1, 3)]);
    }

    #[test]
    fn a_range_at_the_top_of_the_cookie_space_stops() {
        let mut q = queue(&[u64::MAX - 1, u64::MAX]);
        assert_eq!(drain(&mut q, ProtoVersion::V3), [ZcAck::Range(u64::MAX - 1, u64::MAX)]);
    }

    const TIMEOUT: Duration = Duration::from_secs(50);

    fn requests(count: u64) -> ZcRequests {
        let mut requests = ZcRequests::new();
        for i in 0..count {
            let cookie =
                requests.register(Time::ZERO, TIMEOUT, ConnId(i as u32 % 2), MessageToken(i));
            assert_eq!(cookie, Ok(FIRST_ZC_COOKIE + i));
        }
        requests
    }

    #[test]
    fn acks_complete_requests() {
        let mut r = requests(5); // cookies 2..=6
        assert_eq!(r.handle_ack(ZcAck::Range(2, 4)), Ok(()));
        assert_eq!(r.handle_ack(ZcAck::Pair(6, 5)), Ok(()));
        let acked: Vec<_> = std::iter::from_fn(|| r.poll_acked()).collect();
        assert_eq!(acked, [0, 1, 2, 4, 3].map(MessageToken));
        assert!(r.is_empty());
    }

    #[test]
    fn unknown_cookies_are_errors() {
        let mut r = requests(2); // cookies 2, 3
        assert_eq!(r.handle_ack(ZcAck::Keepalive), Ok(()));
        assert_eq!(r.handle_ack(ZcAck::None), Ok(()));
        assert_eq!(
            r.handle_ack(ZcAck::Single(9)),
            Err(UnknownZcCookie { ack: ZcAck::Single(9), unknown: 1 })
        );
        // A range naming one pending and two unknown cookies still completes the known one.
        assert_eq!(
            r.handle_ack(ZcAck::Range(3, 5)),
            Err(UnknownZcCookie { ack: ZcAck::Range(3, 5), unknown: 2 })
        );
        assert_eq!(r.poll_acked(), Some(MessageToken(1)));
        // Acknowledging twice is unknown the second time.
        assert_eq!(r.handle_ack(ZcAck::Single(2)), Ok(()));
        assert_eq!(
            r.handle_ack(ZcAck::Single(2)),
            Err(UnknownZcCookie { ack: ZcAck::Single(2), unknown: 1 })
        );
    }

    #[test]
    fn closed_connections_abort_their_requests() {
        let mut r = requests(4);
        assert_eq!(r.abort_conn(ConnId(1)), [MessageToken(1), MessageToken(3)]);
        assert_eq!(r.len(), 2);
        assert_eq!(r.handle_ack(ZcAck::Single(3)).map_err(|e| e.unknown), Err(1));
    }

    #[test]
    fn stale_requests_name_their_connection() {
        let mut r = ZcRequests::new();
        r.register(Time::from_secs(10), TIMEOUT, ConnId(7), MessageToken(0)).unwrap();
        r.register(Time::from_secs(5), TIMEOUT, ConnId(3), MessageToken(1)).unwrap();
        assert_eq!(r.poll_timeout(), Some(Time::from_secs(55)));
        assert_eq!(r.stale_conn(Time::from_secs(54)), None);
        assert_eq!(r.stale_conn(Time::from_secs(60)), Some(ConnId(3)));
    }

    #[test]
    fn cookie_numbering_skips_pending_cookies_after_wrapping() {
        let mut r = ZcRequests::new();
        r.register(Time::ZERO, TIMEOUT, ConnId(0), MessageToken(0)).unwrap(); // 2
        r.next_cookie = u64::MAX;
        assert_eq!(r.register(Time::ZERO, TIMEOUT, ConnId(0), MessageToken(1)), Ok(u64::MAX));
        // Wraps to 2, which is pending, so 3.
        assert_eq!(r.register(Time::ZERO, TIMEOUT, ConnId(0), MessageToken(2)), Ok(3));
    }
}
