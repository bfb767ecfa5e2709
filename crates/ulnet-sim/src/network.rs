//! The network model: NIs attached to switches by their own full-duplex links, switches
//! joined by links, and the time each frame takes through them.
//!
//! Every direction of every link is a FIFO server with a bandwidth, a propagation latency, a
//! packet loss rate, an MTU and a queue. A frame is reserved on each link of its path when it
//! is sent (a message-level model, not packet by packet): it starts on a link when both the
//! link is free and its first packet has arrived, and it cannot finish there before its last
//! packet has arrived from the previous link (cut-through, as TCP segments pipeline across
//! hops). Packet overhead (TCP/IP and Ethernet framing) is added per MTU-sized segment. A
//! packet lost on the way, or dropped because it found the link's queue full, costs the frame
//! one extra round trip (TCP's fast retransmit); frames themselves are never lost to loss,
//! since the LND is TCP. What loses frames is a fault: a link down, a black hole, a partition.
//!
//! A sender's own port is not one FIFO for all its connections: a host keeps each TCP
//! connection's backlog in its socket and lets at most [`DEVICE_QUEUE_BYTES`] of it into the
//! device queue (Linux's TCP small queues). So a small message on socklnd's CONTROL
//! connection waits at its port for the port's other small messages and for at most that much
//! of the bulk backlog, and its time on the wire is taken from the bulk frames queued behind
//! it, instead of waiting for all of them. Those frames are reserved on the later links of the
//! path too (at the times they will pass), so there the small message is not held behind them
//! either: it waits for what the link holds less the backlog it passed at the port. Switch
//! ports are otherwise FIFO for everyone (as the delay line's queue is): a backlog built at a
//! switch is waited for.
//!
//! Routes between switches are shortest paths in hops, computed once (breadth first, ties
//! to the lower-numbered link, so they are deterministic).

use std::collections::VecDeque;
use std::time::Duration;

use ulnet_proto::link_model::serialization_delay;
use ulnet_proto::rng::Rng;
use ulnet_proto::time::Time;

use crate::scenario::LinkParams;

/// Index of an NI's attachment (its port) in the network.
pub type EndpointId = u32;
/// Index of one direction of a link.
pub type LinkId = u32;

const NO_ROUTE: u32 = u32::MAX;
/// TCP/IP header bytes per segment (IPv4 20, TCP 20, timestamps 12).
pub const TCP_IP_OVERHEAD: u64 = 52;
/// Ethernet bytes per segment on the wire (header 14, FCS 4, preamble 8, inter-frame gap 12).
pub const ETHERNET_OVERHEAD: u64 = 38;

/// What of a bulk backlog is already in a sender's device queue, in front of a small message:
/// TCP small queues let a socket put up to `tcp_limit_output_bytes` (Linux's default, 1 MiB)
/// there; the rest waits in the socket.
pub const DEVICE_QUEUE_BYTES: u64 = 1 << 20;

/// Segments and bytes on the wire of a frame of `bytes` (LND headers and payload) at `mtu`.
fn on_the_wire(bytes: u64, mtu: u32) -> (u64, u64) {
    let mss = u64::from(mtu).saturating_sub(TCP_IP_OVERHEAD).max(1);
    let segments = bytes.div_ceil(mss).max(1);
    (segments, bytes + segments * (TCP_IP_OVERHEAD + ETHERNET_OVERHEAD))
}

/// One direction of a link.
#[derive(Clone, Debug)]
pub struct Link {
    pub params: LinkParams,
    /// When it finishes what it already accepted.
    pub busy_until: Time,
    /// Payload-and-header bytes carried, for utilisation.
    pub bytes: u64,
    /// When the small messages let ahead of the backlog (a sender's port) have left.
    pub sparse_until: Time,
}

/// An NI's port: the link up to its switch and the link down from it.
#[derive(Clone, Copy, Debug)]
pub struct Port {
    pub switch: u32,
    pub up: LinkId,
    pub down: LinkId,
}

/// What a frame's trip looks like.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transit {
    /// When its last byte left the sender's port (the socket drained).
    pub sent: Time,
    /// When its last byte reached the receiver.
    pub arrived: Time,
    /// Whether a lost or overflowed packet cost it a retransmission.
    pub retransmitted: bool,
}

/// The modelled network.
#[derive(Clone, Debug)]
pub struct Network {
    pub links: Vec<Link>,
    pub ports: Vec<Port>,
    switches: usize,
    /// `route[from * switches + to]`: the first link from switch `from` towards `to`.
    route: Vec<LinkId>,
    /// Where each link goes (switch links only; port links are never in `route`).
    link_target: Vec<u32>,
    rng: Rng,
    /// Frames charged a retransmission for a lost packet.
    pub retransmits: u64,
    /// Frames that found a queue full (also charged a retransmission).
    pub queue_overflows: u64,
}

impl Network {
    /// A network of `switches` switches, no ports and no links yet.
    pub fn new(switches: usize, seed: u64) -> Self {
        Self {
            links: Vec::new(),
            ports: Vec::new(),
            switches,
            route: Vec::new(),
            link_target: Vec::new(),
            rng: Rng::new(seed),
            retransmits: 0,
            queue_overflows: 0,
        }
    }

    /// Attaches a port to `switch` with `params` both ways.
    pub fn add_port(&mut self, switch: u32, params: LinkParams) -> EndpointId {
        let up = self.add_link(params, u32::MAX);
        let down = self.add_link(params, u32::MAX);
        self.ports.push(Port { switch, up, down });
        (self.ports.len() - 1) as EndpointId
    }

    /// Joins two switches with `params` both ways.
    pub fn add_trunk(&mut self, a: u32, b: u32, params: LinkParams) -> (LinkId, LinkId, u32, u32) {
        let forward = self.add_link(params, b);
        let backward = self.add_link(params, a);
        (forward, backward, a, b)
    }

    fn add_link(&mut self, params: LinkParams, target: u32) -> LinkId {
        self.links.push(Link {
            params,
            busy_until: Time::ZERO,
            bytes: 0,
            sparse_until: Time::ZERO,
        });
        self.link_target.push(target);
        (self.links.len() - 1) as LinkId
    }

    /// Computes the switch routes; call once after every trunk is added. `trunks` lists
    /// (link, from switch) for each direction.
    pub fn compute_routes(&mut self, trunks: &[(LinkId, u32)]) {
        let n = self.switches;
        let mut adjacency: Vec<Vec<(u32, LinkId)>> = vec![Vec::new(); n];
        for &(link, from) in trunks {
            let to = self.link_target.get(link as usize).copied().unwrap_or(u32::MAX);
            if let Some(list) = adjacency.get_mut(from as usize) {
                list.push((to, link));
            }
        }
        for list in &mut adjacency {
            list.sort_unstable_by_key(|(_, link)| *link);
        }
        self.route = vec![NO_ROUTE; n * n];
        // Breadth first from every destination over reversed edges gives, for each source,
        // the first hop of a shortest path; simpler here: from every source, record the first
        // link used to reach each switch.
        for source in 0..n {
            let mut first: Vec<LinkId> = vec![NO_ROUTE; n];
            let mut seen = vec![false; n];
            let mut queue = VecDeque::new();
            if let Some(flag) = seen.get_mut(source) {
                *flag = true;
            }
            queue.push_back(source as u32);
            while let Some(at) = queue.pop_front() {
                let via = first.get(at as usize).copied().unwrap_or(NO_ROUTE);
                for &(next, link) in adjacency.get(at as usize).map_or(&[][..], Vec::as_slice) {
                    let Some(flag) = seen.get_mut(next as usize) else { continue };
                    if *flag {
                        continue;
                    }
                    *flag = true;
                    if let Some(slot) = first.get_mut(next as usize) {
                        *slot = if at as usize == source { link } else { via };
                    }
                    queue.push_back(next);
                }
            }
            if let Some(row) = self.route.get_mut(source * n..(source + 1) * n) {
                row.copy_from_slice(&first);
            }
        }
    }

    /// The links from one port to another, in order; `None` when no route joins them.
    pub fn path(&self, from: EndpointId, to: EndpointId, path: &mut Vec<LinkId>) -> Option<()> {
        path.clear();
        let from = *self.ports.get(from as usize)?;
        let to = *self.ports.get(to as usize)?;
        path.push(from.up);
        let mut at = from.switch;
        let mut hops = 0;
        while at != to.switch {
            let link = *self.route.get(at as usize * self.switches + to.switch as usize)?;
            if link == NO_ROUTE || hops > self.switches {
                return None;
            }
            path.push(link);
            at = *self.link_target.get(link as usize)?;
            hops += 1;
        }
        path.push(to.down);
        Some(())
    }

    /// The propagation delay along `path`.
    pub fn latency(&self, path: &[LinkId]) -> Duration {
        path.iter()
            .filter_map(|link| self.links.get(*link as usize))
            .map(|l| l.params.latency)
            .sum()
    }

    /// The slowest link's bandwidth along `path`, bytes per second.
    pub fn bottleneck(&self, path: &[LinkId]) -> u64 {
        path.iter()
            .filter_map(|link| self.links.get(*link as usize))
            .map(|l| l.params.bandwidth_bytes_per_sec)
            .min()
            .unwrap_or(u64::MAX)
    }

    /// Reserves a frame of `bytes` (LND headers and payload) on `path`, starting no earlier
    /// than `start` and taking at least `min_first_hop` on the first link (a TCP window
    /// smaller than the frame); `rtt` is what a retransmission costs. A `sparse` frame (a
    /// small message on a CONTROL connection) passes the bulk backlog of the first link, the
    /// sender's port, beyond [`DEVICE_QUEUE_BYTES`], and pushes it back by its own time on the
    /// wire.
    pub fn transmit(
        &mut self,
        start: Time,
        path: &[LinkId],
        bytes: u64,
        min_first_hop: Duration,
        rtt: Duration,
        sparse: bool,
    ) -> Transit {
        let mut head = start;
        let mut previous_tail = start;
        let mut sent = start;
        let mut lost_chance: f64 = 0.0;
        let mut overflowed = false;
        // What a sparse frame passed at its sender's port.
        let mut passed = Duration::ZERO;
        for (hop, link_id) in path.iter().enumerate() {
            let Some(link) = self.links.get_mut(*link_id as usize) else { continue };
            let params = link.params;
            let (segments, wire) = on_the_wire(bytes, params.mtu);
            let rate = Some(params.bandwidth_bytes_per_sec);
            let whole = serialization_delay(wire as usize, rate);
            let first_packet = serialization_delay(wire.min(u64::from(params.mtu)) as usize, rate);
            let begin = if sparse && hop == 0 {
                // Its own queue is the socket's: before it are the other small messages and
                // what the bulk sockets already put in the device queue.
                let device = on_the_wire(DEVICE_QUEUE_BYTES, params.mtu).1;
                let device = serialization_delay(device as usize, rate);
                let begin = head.max(link.sparse_until).max(link.busy_until.min(head + device));
                passed = link.busy_until.saturating_duration_since(begin);
                begin
            } else if sparse {
                // The frames passed at the port are reserved here behind what was here.
                head.max(link.busy_until.saturating_sub(passed)).max(link.sparse_until)
            } else {
                let backlog = link.busy_until.saturating_duration_since(head);
                let queued =
                    backlog.as_nanos() * u128::from(params.bandwidth_bytes_per_sec) / 1_000_000_000;
                if queued > u128::from(params.queue_bytes) {
                    overflowed = true;
                }
                head.max(link.busy_until)
            };
            let mut tail = (begin + whole).max(previous_tail + first_packet);
            if hop == 0 {
                tail = tail.max(begin + min_first_hop);
                sent = tail;
            }
            if sparse {
                link.sparse_until = tail;
                // The bulk queued here leaves that much later.
                link.busy_until = link.busy_until.max(begin) + whole;
            } else {
                link.busy_until = tail;
            }
            link.bytes += wire;
            if params.loss_per_million > 0 {
                let survive =
                    (1.0 - f64::from(params.loss_per_million) / 1e6).powf(segments as f64);
                lost_chance = 1.0 - (1.0 - lost_chance) * survive;
            }
            head = begin + first_packet + params.latency;
            previous_tail = tail + params.latency;
        }
        let lost = lost_chance > 0.0
            && (self.rng.below(1 << 30) as f64) < lost_chance * f64::from(1u32 << 30);
        if lost {
            self.retransmits += 1;
        }
        if overflowed {
            self.queue_overflows += 1;
        }
        let retransmitted = lost || overflowed;
        let arrived = if retransmitted { previous_tail + rtt } else { previous_tail };
        Transit { sent, arrived, retransmitted }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(gbit: u64, latency_us: u64) -> LinkParams {
        LinkParams {
            bandwidth_bytes_per_sec: gbit * 125_000_000,
            latency: Duration::from_micros(latency_us),
            loss_per_million: 0,
            mtu: 9000,
            queue_bytes: 1 << 30,
        }
    }

    #[test]
    fn routes_follow_the_fewest_hops() {
        let mut network = Network::new(4, 1);
        let a = network.add_port(0, params(10, 1));
        let b = network.add_port(3, params(10, 1));
        // 0-1-3 and 0-2-3 are both two hops; 0-3 directly is one.
        let mut trunks = Vec::new();
        for (x, y) in [(0, 1), (1, 3), (0, 2), (2, 3), (0, 3)] {
            let (forward, backward, from, to) = network.add_trunk(x, y, params(100, 10));
            trunks.push((forward, from));
            trunks.push((backward, to));
        }
        network.compute_routes(&trunks);
        let mut path = Vec::new();
        network.path(a, b, &mut path).unwrap();
        assert_eq!(path.len(), 3, "{path:?}");
        assert_eq!(network.latency(&path), Duration::from_micros(12));
    }

    #[test]
    fn a_frame_pipelines_and_queues_behind_the_previous() {
        let mut network = Network::new(1, 1);
        let a = network.add_port(0, params(10, 5));
        let b = network.add_port(0, params(10, 5));
        network.compute_routes(&[]);
        let mut path = Vec::new();
        network.path(a, b, &mut path).unwrap();
        let bytes = 1 << 20;
        let first =
            network.transmit(Time::ZERO, &path, bytes, Duration::ZERO, Duration::ZERO, false);
        // About 0.85 ms to serialize 1 MiB plus overhead at 10 Gb/s; the second link adds one
        // packet and the two latencies, not a second full serialization.
        let serialize = first.sent.as_nanos();
        assert!((840_000..860_000).contains(&serialize), "{serialize}");
        let trip = first.arrived.as_nanos() - serialize;
        assert!((10_000..20_000).contains(&trip), "{trip}");
        let second =
            network.transmit(Time::ZERO, &path, bytes, Duration::ZERO, Duration::ZERO, false);
        assert_eq!(second.sent.as_nanos(), 2 * serialize);
        // A small message on CONTROL waits for what the device queue holds (the first 1 MiB),
        // passes the rest of the backlog at the sender's port and on the next link, and
        // delays it by its own time on the wire; a bulk frame after it waits for everything.
        let small = network.transmit(Time::ZERO, &path, 200, Duration::ZERO, Duration::ZERO, true);
        let small_wire = serialization_delay(200 + 90, Some(1_250_000_000)).as_nanos() as u64;
        assert_eq!(small.sent.as_nanos(), serialize + small_wire);
        assert!(small.arrived < second.arrived, "{small:?} {second:?}");
        let third =
            network.transmit(Time::ZERO, &path, bytes, Duration::ZERO, Duration::ZERO, false);
        assert_eq!(third.sent.as_nanos(), 3 * serialize + small_wire);
    }

    #[test]
    fn no_route_between_islands() {
        let mut network = Network::new(2, 1);
        let a = network.add_port(0, params(10, 1));
        let b = network.add_port(1, params(10, 1));
        network.compute_routes(&[]);
        assert!(network.path(a, b, &mut Vec::new()).is_none());
    }
}
