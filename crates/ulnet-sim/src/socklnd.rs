//! The modelled socklnd: per pair of NIs, a set of TCP connections set up on first use, the
//! kernel's choice of connection for each message, each connection's TCP window, ZC-ACK
//! completion of large sends, and keepalives.
//!
//! * Setup: the first message between two NIs finds no connection; the dialling side opens
//!   CONTROL, BULK_IN and BULK_OUT connections (`conns_per_peer` of each bulk type), each a TCP
//!   handshake (one round trip) then the connreq and hello exchange (one more), so messages
//!   wait two round trips. Both sides then share them (lustre: socklnd_cb.c
//!   `ksocknal_connect()`, `ksocknal_launch_packet()`). A connect that finds the path cut
//!   fails its messages after `sock_timeout`; an unreachable peer fails them at once.
//! * Choice: a message of at least `min_bulk` bytes (headers included) goes on the least
//!   loaded BULK_OUT connection, ties to the least recently used, else on CONTROL (lustre:
//!   socklnd_cb.c `ksocknal_find_conn_locked()`, socklnd_proto.c `ksocknal_match_tx_v3()`).
//! * Window: a connection keeps at most min(sender's send buffer, receiver's receive buffer)
//!   bytes unacknowledged; a frame waits for room, and a frame larger than the window streams
//!   at window per round trip.
//! * Completion: a payload of at least `zc_min_payload` asks for a ZC-ACK and its send
//!   completes when the ACK returns (one way back after arrival); smaller ones complete once
//!   written, when they leave the sender's port (decision 0004). A ZC-ACK that never comes
//!   (the path went dark) fails the send after `sock_timeout` and closes the connections
//!   ("stale ZC_REQs"), so the next message connects again.
//! * Keepalive: a pair silent for `keepalive` sends a NOOP each way; one that then hears
//!   nothing for `sock_timeout` closes (lustre: socklnd_cb.c `ksocknal_check_peer_timeouts()`).

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use ulnet_proto::socklnd::tunables::ConnsPerPeer;
use ulnet_proto::time::Time;
use ulnet_proto::wire::ksock::KsockHeader;

use crate::network::EndpointId;
use crate::scenario::tunables::SockParams;

/// Bytes socklnd V3 adds before an LNet message: the ksock header.
pub const KSOCK_HEADER_BYTES: u64 = KsockHeader::LEN as u64;
/// The LNet header (classic form).
pub const LNET_HEADER_BYTES: u64 = 72;
/// Window accounting entries one connection keeps before merging the newest ones.
pub const MAX_WINDOW_ENTRIES: usize = 1024;

/// Index of a pair in [`Pairs`].
pub type PairId = u32;
/// One connection of a pair in one direction: the direction (0 from the lower endpoint) in
/// the high half, the connection index (0 CONTROL, then BULK) in the low half.
pub type Lane = u32;

/// The connection state of two NIs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PairState {
    /// Handshakes under way; usable from `ready`.
    Connecting {
        ready: Time,
    },
    Up,
    /// No connection (closed, or never opened).
    Down,
}

/// One TCP connection, one direction.
#[derive(Clone, Debug, Default)]
struct Conn {
    /// When what was queued on it has left.
    queued_until: Time,
    last_post: u64,
    /// (acknowledged at, bytes) of what is in flight, oldest first.
    window: VecDeque<(Time, u64)>,
    in_flight: u64,
}

/// The connections of one direction: `conns[0]` is CONTROL, the rest BULK_OUT.
#[derive(Clone, Debug, Default)]
struct Direction {
    conns: Vec<Conn>,
    posts: u64,
}

/// Two NIs' connections.
#[derive(Clone, Debug)]
pub struct Pair {
    /// The lower endpoint, then the higher.
    pub ends: [EndpointId; 2],
    pub state: PairState,
    directions: [Direction; 2],
    /// Last time anything arrived either way.
    pub last_alive: Time,
    /// A keepalive event is scheduled for this pair.
    pub keepalive_armed: bool,
    /// Bumped at every close, so that stale completions can tell.
    pub generation: u32,
    /// Both LNDs have reported the connections up to their engines (and will report their
    /// loss).
    pub announced: bool,
}

/// Where and when a frame goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Posting {
    pub pair: PairId,
    /// The frame may start then (connection ready, window open).
    pub start: Time,
    /// The first hop takes at least this long (a frame larger than the window).
    pub min_first_hop: Duration,
    /// Whether this send opened the connections.
    pub connected: bool,
    direction: usize,
    conn: usize,
}

impl Posting {
    /// The connection the frame goes on, one direction of it.
    pub fn lane(&self) -> Lane {
        ((self.direction as u32) << 16) | (self.conn as u32 & 0xffff)
    }

    /// Whether the frame goes on the CONTROL connection (messages under `min_bulk`).
    pub fn is_control(&self) -> bool {
        self.conn == 0
    }
}

/// Every pair of NIs that ever talked.
#[derive(Clone, Debug, Default)]
pub struct Pairs {
    index: HashMap<(EndpointId, EndpointId), PairId, foldhash::fast::FixedState>,
    pairs: Vec<Pair>,
    /// Connection sets opened, and closed by faults or timeouts.
    pub connects: u64,
    pub closes: u64,
}

impl Pairs {
    pub fn get(&self, pair: PairId) -> Option<&Pair> {
        self.pairs.get(pair as usize)
    }

    pub fn get_mut(&mut self, pair: PairId) -> Option<&mut Pair> {
        self.pairs.get_mut(pair as usize)
    }

    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// The pair of `from` and `to`, made on first use.
    pub fn pair_of(&mut self, from: EndpointId, to: EndpointId) -> PairId {
        let key = (from.min(to), from.max(to));
        let next = self.pairs.len() as PairId;
        *self.index.entry(key).or_insert_with(|| {
            self.pairs.push(Pair {
                ends: [key.0, key.1],
                state: PairState::Down,
                directions: [Direction::default(), Direction::default()],
                last_alive: Time::ZERO,
                keepalive_armed: false,
                generation: 0,
                announced: false,
            });
            next
        })
    }

    /// Finds the pair, opens its connections if needed (`handshake` is two round trips, the
    /// dialler's `conns_per_peer` resolved for `link_speed_mbps`), picks a connection for a
    /// frame of `bytes` and waits for window room. `rtt` is the path's round trip.
    #[allow(clippy::too_many_arguments)]
    pub fn post(
        &mut self,
        now: Time,
        from: EndpointId,
        to: EndpointId,
        bytes: u64,
        sender: &SockParams,
        receiver: &SockParams,
        link_speed_mbps: u32,
        rtt: Duration,
    ) -> Posting {
        let id = self.pair_of(from, to);
        let mut connected = false;
        let Some(pair) = self.pairs.get_mut(id as usize) else {
            return Posting {
                pair: id,
                start: now,
                min_first_hop: Duration::ZERO,
                connected,
                direction: 0,
                conn: 0,
            };
        };
        match pair.state {
            PairState::Connecting { ready } if ready <= now => pair.state = PairState::Up,
            PairState::Down => {
                let bulk = conns_per_peer(sender.conns_per_peer, link_speed_mbps);
                for direction in &mut pair.directions {
                    direction.conns = vec![Conn::default(); 1 + usize::from(bulk)];
                }
                pair.state = PairState::Connecting { ready: now + rtt * 2 };
                pair.last_alive = now;
                connected = true;
                self.connects += 1;
            }
            _ => {}
        }
        let ready = match pair.state {
            PairState::Connecting { ready } => ready,
            _ => now,
        };
        let direction_index = usize::from(from != pair.ends[0]);
        let Some(direction) = pair.directions.get_mut(direction_index) else {
            return Posting {
                pair: id,
                start: now,
                min_first_hop: Duration::ZERO,
                connected,
                direction: 0,
                conn: 0,
            };
        };
        let conn_index = choose_conn(direction, now, bytes >= u64::from(sender.min_bulk));
        direction.posts += 1;
        let posts = direction.posts;
        let window = sender.tx_buffer.min(receiver.rx_buffer).max(1);
        let Some(conn) = direction.conns.get_mut(conn_index) else {
            return Posting {
                pair: id,
                start: now,
                min_first_hop: Duration::ZERO,
                connected,
                direction: 0,
                conn: 0,
            };
        };
        conn.last_post = posts;
        let start = conn.wait_for_room(ready.max(now), bytes.min(window), window);
        let min_first_hop = if bytes > window {
            let extra = (bytes - window) as f64 / window as f64;
            Duration::from_nanos((extra * rtt.as_nanos() as f64) as u64)
        } else {
            Duration::ZERO
        };
        Posting {
            pair: id,
            start,
            min_first_hop,
            connected,
            direction: direction_index,
            conn: conn_index,
        }
    }

    /// Records where the frame `posting` placed went: it left the port at `sent` and is
    /// acknowledged (its window room freed) at `acked`.
    pub fn commit(&mut self, posting: &Posting, bytes: u64, sent: Time, acked: Time) {
        let Some(pair) = self.pairs.get_mut(posting.pair as usize) else { return };
        let Some(direction) = pair.directions.get_mut(posting.direction) else { return };
        let Some(conn) = direction.conns.get_mut(posting.conn) else { return };
        conn.queued_until = conn.queued_until.max(sent);
        conn.in_flight += bytes;
        let full = conn.window.len() >= MAX_WINDOW_ENTRIES;
        match conn.window.back_mut() {
            Some(last) if full => {
                last.0 = last.0.max(acked);
                last.1 += bytes;
            }
            _ => conn.window.push_back((acked, bytes)),
        }
    }

    /// Closes a pair's connections (a fault, a stale ZC request, a dead keepalive).
    pub fn close(&mut self, pair: PairId) {
        if let Some(pair) = self.pairs.get_mut(pair as usize) {
            if pair.state != PairState::Down {
                pair.state = PairState::Down;
                pair.announced = false;
                pair.generation = pair.generation.wrapping_add(1);
                pair.directions = [Direction::default(), Direction::default()];
                self.closes += 1;
            }
        }
    }

    /// The pairs with `endpoint` at one end.
    pub fn pairs_of(&self, endpoint: EndpointId) -> impl Iterator<Item = PairId> + '_ {
        self.pairs
            .iter()
            .enumerate()
            .filter(move |(_, pair)| pair.ends.contains(&endpoint))
            .map(|(index, _)| index as PairId)
    }
}

impl Conn {
    /// The earliest time from `start` at which `need` more bytes fit in `window`.
    fn wait_for_room(&mut self, start: Time, need: u64, window: u64) -> Time {
        let mut at = start;
        while let Some(&(acked, bytes)) = self.window.front() {
            if acked > at && self.in_flight + need <= window {
                break;
            }
            at = at.max(acked);
            self.in_flight -= bytes.min(self.in_flight);
            self.window.pop_front();
        }
        at
    }
}

/// `conns_per_peer` in force for a port of `link_speed_mbps`.
fn conns_per_peer(setting: ConnsPerPeer, link_speed_mbps: u32) -> u8 {
    setting.resolve(Some(link_speed_mbps))
}

/// The kernel's choice among one direction's connections: bulk messages prefer BULK_OUT,
/// others CONTROL; among BULK_OUT the least loaded, ties to the least recently used.
fn choose_conn(direction: &Direction, now: Time, bulk: bool) -> usize {
    if !bulk || direction.conns.len() < 2 {
        return 0;
    }
    let mut best = 1;
    let mut best_key = (Duration::MAX, u64::MAX);
    for (index, conn) in direction.conns.iter().enumerate().skip(1) {
        let key = (conn.queued_until.saturating_duration_since(now), conn.last_post);
        if key < best_key {
            best = index;
            best_key = key;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sock(window: u64) -> SockParams {
        SockParams {
            conns_per_peer: ConnsPerPeer::Fixed(2),
            tx_buffer: window,
            rx_buffer: window,
            zc_min_payload: 16 << 10,
            min_bulk: 1024,
            sock_timeout: Duration::from_secs(50),
            keepalive: Some(Duration::from_secs(30)),
        }
    }

    #[test]
    fn the_first_message_waits_two_round_trips() {
        let mut pairs = Pairs::default();
        let rtt = Duration::from_millis(10);
        let params = sock(1 << 20);
        let first = pairs.post(Time::ZERO, 1, 0, 100, &params, &params, 10_000, rtt);
        assert!(first.connected);
        assert_eq!(first.start, Time::ZERO + rtt * 2);
        // Either side may use the connections once they are up.
        let later = Time::ZERO + rtt * 3;
        let reply = pairs.post(later, 0, 1, 100, &params, &params, 10_000, rtt);
        assert!(!reply.connected);
        assert_eq!(reply.start, later);
        assert_eq!(pairs.connects, 1);
    }

    #[test]
    fn bulk_spreads_over_bulk_connections_and_the_window_holds_frames() {
        let mut pairs = Pairs::default();
        let rtt = Duration::from_millis(10);
        let params = sock(2 << 20);
        let warm = Time::from_secs(1);
        let first = pairs.post(Time::ZERO, 0, 1, 100, &params, &params, 10_000, rtt);
        pairs.commit(&first, 100, first.start, first.start + rtt);
        let mut used = Vec::new();
        for _ in 0..4 {
            let posting = pairs.post(warm, 0, 1, 1 << 20, &params, &params, 10_000, rtt);
            used.push((posting.conn, posting.start));
            pairs.commit(&posting, 1 << 20, posting.start, posting.start + rtt);
        }
        // Two bulk connections, used in turn; each holds two 1 MiB frames in its 2 MiB
        // window, so the third and fourth frames are on the wire at once, then none waits.
        assert_eq!(used.iter().map(|(conn, _)| *conn).collect::<Vec<_>>(), [1, 2, 1, 2]);
        assert!(used.iter().all(|(_, start)| *start == warm));
        let fifth = pairs.post(warm, 0, 1, 1 << 20, &params, &params, 10_000, rtt);
        assert_eq!(fifth.start, warm + rtt);
        // A frame larger than the window streams at window per round trip.
        let big = pairs.post(warm, 0, 1, 6 << 20, &params, &params, 10_000, rtt);
        assert_eq!(big.min_first_hop, rtt * 2);
    }
}
