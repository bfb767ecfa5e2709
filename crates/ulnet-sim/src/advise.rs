//! The WAN tuning advisor: from a link's bandwidth and round trip, the tunables that let one
//! client and one server fill it, and the fraction of the link they reach when simulated.
//!
//! The rules follow from what the simulator shows (docs/simulator.md, "The WAN seed"):
//! * a write RPC takes two round trips, so at least two bandwidth-delay products must be in
//!   flight (under three reach 99% in the check below, where the bottleneck is the client's own
//!   port and its requests pass the bulk queued there). A FIFO bottleneck in the network (a
//!   WAN router's queue, the delay line's) holds the requests behind the bulk: the RPCs then
//!   move in phase and the link idles a round trip per cycle of the queue, so the advice
//!   keeps eight in flight (behind the delay line's queue, simulated, 64 RPCs of 1 MiB reach
//!   95% of 2 Gb/s at 50 ms and 96 reach 99%, as the real line's 247.5 MB/s):
//!   `max_rpcs_in_flight` up to 256 (the OSC's maximum), then larger RPCs (up to 16 MiB);
//! * a 1 MiB bulk holds its peer credit from the moment it is queued until its ZC-ACK returns,
//!   and a write RPC's request queues for the same credits: when credits run out, requests wait
//!   behind bulk and the RPCs move as a herd, leaving the link idle between herds. So
//!   `peer_credits` per rail covers every message of every RPC in flight on it (its bulks and
//!   its request), never fewer than twice the rail's bandwidth-delay product in 1 MiB messages;
//! * every bulk connection keeps at most its socket buffer in flight: buffers of 1.25
//!   bandwidth-delay products over `conns_per_peer` (the kernel's `net.core.wmem_max` and
//!   `rmem_max` must allow them);
//! * NI `credits` at least twice `peer_credits`, so a second peer still finds credits;
//! * with a router between client and server (`--routers`; one rail), the router's own
//!   `peer_credits` and its router credits per peer NI (`peer_buffer_credits`) are the ends'
//!   `peer_credits`, and it keeps a large buffer for every 1 MiB message the ends may have in
//!   flight through it (a forwarded message holds its buffer from its arrival until the next
//!   hop's ZC-ACK): `large_buffers` twice `peer_credits`, never fewer than the kernel's 1024.

use std::time::Duration;

use serde::Serialize;

use crate::results::{RunResults, round};
use crate::scenario::units::{Bandwidth, Span};
use crate::scenario::{MAX_RPC_SIZE, MAX_RPCS_IN_FLIGHT, Scenario, ScenarioError};
use crate::world::{RunError, RunOptions, World};

/// One LNet bulk message (`LNET_MTU`).
const BULK: f64 = 1_048_576.0;

/// What the advisor is asked.
#[derive(Clone, Copy, Debug)]
pub struct AdviseRequest {
    /// Bandwidth of each rail.
    pub bandwidth: Bandwidth,
    pub rtt: Span,
    pub rails: u32,
    pub mtu: u32,
    /// A router between client and server, half the round trip on each side.
    pub routers: bool,
    /// Simulate the advice (else only compute it).
    pub check: bool,
}

/// The tunables to set, and what they reach.
#[derive(Clone, Debug, Serialize)]
pub struct Advice {
    pub rails: u32,
    pub bandwidth_per_rail_bytes_per_s: u64,
    pub rtt_ms: f64,
    pub bandwidth_delay_product_bytes: u64,
    pub peer_credits: u32,
    pub credits: u32,
    pub conns_per_peer: u32,
    pub tx_buffer_size: u64,
    pub rx_buffer_size: u64,
    pub max_rpcs_in_flight: u32,
    pub rpc_size: u64,
    pub mtu: u32,
    /// The router's settings, with `--routers`.
    pub router: Option<RouterAdvice>,
    /// Fraction of the rails' total bandwidth reached in simulation (steady state, payload
    /// bytes), when checked.
    pub simulated_fraction: Option<f64>,
    pub simulated_mb_per_s: Option<f64>,
    pub notes: Vec<String>,
}

/// A router's tunables (`lnetctl set large_buffers`, the router's NIs' tunables).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct RouterAdvice {
    pub peer_credits: u32,
    pub peer_buffer_credits: u32,
    pub large_buffers: u32,
    pub small_buffers: u32,
}

/// Why no advice.
#[derive(Debug, thiserror::Error)]
pub enum AdviseError {
    #[error("--rails must be 1 to 16")]
    Rails,
    #[error("--routers is advised for one rail only (a router per rail is not modelled yet)")]
    RoutedRails,
    #[error("--rtt must be positive and at most 10 s")]
    Rtt,
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    #[error(transparent)]
    Run(#[from] RunError),
}

/// Computes the advice, and simulates it when asked.
pub fn advise(request: AdviseRequest) -> Result<Advice, AdviseError> {
    if request.rails == 0 || request.rails > 16 {
        return Err(AdviseError::Rails);
    }
    if request.routers && request.rails != 1 {
        return Err(AdviseError::RoutedRails);
    }
    let rtt = request.rtt.0;
    if rtt.is_zero() || rtt > Duration::from_secs(10) {
        return Err(AdviseError::Rtt);
    }
    let rail = request.bandwidth.0 as f64;
    let bdp = rail * rtt.as_secs_f64();
    let total_bdp = bdp * f64::from(request.rails);
    let mut notes = Vec::new();
    let speed_mbps = (rail * 8.0 / 1e6).min(f64::from(u32::MAX)) as u32;
    let conns_per_peer =
        u32::from(ulnet_proto::socklnd::tunables::auto_conns_per_peer(Some(speed_mbps)));
    let buffer = ((1.25 * bdp / f64::from(conns_per_peer) + BULK) / BULK).ceil() as u64 * (1 << 20);
    // Four times the two round trips' worth of RPCs in flight: with less, behind a FIFO
    // bottleneck the RPCs move in phase and the link idles a round trip per cycle
    // (docs/simulator.md, "The advisor").
    let wanted = 8.0 * total_bdp;
    let mut rpc_size: u64 = 1 << 20;
    while f64::from(MAX_RPCS_IN_FLIGHT) * (rpc_size as f64) < wanted && rpc_size < MAX_RPC_SIZE {
        rpc_size *= 2;
    }
    let needed = (wanted / rpc_size as f64).ceil() as u32;
    let max_rpcs_in_flight = needed.clamp(8, MAX_RPCS_IN_FLIGHT);
    if needed > MAX_RPCS_IN_FLIGHT {
        notes.push(format!(
            "even {} MiB RPCs would need {needed} in flight for full margin: several clients fill \
             the link more surely",
            rpc_size >> 20
        ));
    }
    let messages_per_rpc = (rpc_size as f64 / BULK).ceil() as u32 + 1;
    let per_rail = (max_rpcs_in_flight * messages_per_rpc).div_ceil(request.rails);
    let peer_credits = per_rail.max((2.0 * bdp / BULK).ceil() as u32).max(8);
    let credits = (2 * peer_credits).max(256);
    let router = request.routers.then(|| RouterAdvice {
        peer_credits,
        peer_buffer_credits: peer_credits,
        large_buffers: (2 * peer_credits).max(1024),
        small_buffers: (2 * peer_credits).max(16_384),
    });
    notes.push(format!(
        "socket buffers of {} MiB need net.core.wmem_max and net.core.rmem_max at least as large",
        buffer >> 20
    ));
    if request.mtu < 9000 {
        notes.push(format!(
            "MTU {}: TCP/IP and Ethernet framing cost more than 1% of the link",
            request.mtu
        ));
    }
    let mut advice = Advice {
        rails: request.rails,
        bandwidth_per_rail_bytes_per_s: request.bandwidth.0,
        rtt_ms: round(rtt.as_secs_f64() * 1000.0),
        bandwidth_delay_product_bytes: bdp as u64,
        peer_credits,
        credits,
        conns_per_peer,
        tx_buffer_size: buffer,
        rx_buffer_size: buffer,
        max_rpcs_in_flight,
        rpc_size,
        mtu: request.mtu,
        router,
        simulated_fraction: None,
        simulated_mb_per_s: None,
        notes,
    };
    if request.check {
        let (fraction, mb) = simulate(&advice, rtt)?;
        advice.simulated_fraction = Some(round(fraction));
        advice.simulated_mb_per_s = Some(round(mb));
    }
    Ok(advice)
}

/// The scenario the advice is checked on: one client and one server, a net per rail, the
/// round trip split over the four port links of each path, 1 MiB-bulk write RPCs; with a
/// router, client and server on two nets and the router between them, the round trip split
/// over the eight port links of each path.
pub fn scenario(advice: &Advice, rtt: Duration) -> Result<Scenario, ScenarioError> {
    if let Some(router) = advice.router {
        return routed_scenario(advice, &router, rtt);
    }
    let quarter = rtt.as_nanos() / 4;
    // Long enough for the start-up (discovery, connections: a few round trips) and then
    // twenty round trips of steady state.
    let duration = (rtt * 30).max(Duration::from_millis(200));
    let nis: Vec<String> = (0..advice.rails)
        .map(|rail| if rail == 0 { "{net: tcp}".to_owned() } else { format!("{{net: tcp{rail}}}") })
        .collect();
    Scenario::from_yaml(&format!(
        "name: advice
duration: {}ns
sample_interval: {}ns
defaults:
  link: {{bandwidth: {}, latency: {quarter}ns, mtu: {}, queue: 16GiB}}
  tunables:
    peer_credits: {}
    credits: {}
    conns_per_peer: {}
    tx_buffer_size: {}
    rx_buffer_size: {}
nodes:
  - {{name: client, nis: [{}]}}
  - {{name: server, nis: [{}]}}
workloads:
  - rpc_stream: {{name: stream, clients: client, servers: server, op: write, rpc_size: {}, max_rpcs_in_flight: {}}}
",
        duration.as_nanos(),
        (duration / 30).as_nanos(),
        advice.bandwidth_per_rail_bytes_per_s,
        advice.mtu,
        advice.peer_credits,
        advice.credits,
        advice.conns_per_peer,
        advice.tx_buffer_size,
        advice.rx_buffer_size,
        nis.join(", "),
        nis.join(", "),
        advice.rpc_size,
        advice.max_rpcs_in_flight,
    ))
}

fn routed_scenario(
    advice: &Advice,
    router: &RouterAdvice,
    rtt: Duration,
) -> Result<Scenario, ScenarioError> {
    let eighth = rtt.as_nanos() / 8;
    let duration = (rtt * 30).max(Duration::from_millis(200));
    Scenario::from_yaml(&format!(
        "name: advice
duration: {}ns
sample_interval: {}ns
defaults:
  link: {{bandwidth: {}, latency: {eighth}ns, mtu: {}, queue: 16GiB}}
  tunables:
    peer_credits: {}
    credits: {}
    conns_per_peer: {}
    tx_buffer_size: {}
    rx_buffer_size: {}
nodes:
  - {{name: client, nis: [{{net: tcp}}], routes: [{{net: tcp1, gateway: router}}]}}
  - name: router
    nis: [{{net: tcp}}, {{net: tcp1}}]
    routing: true
    tunables: {{peer_credits: {}, peer_buffer_credits: {}, large_buffers: {}, small_buffers: {}}}
  - {{name: server, nis: [{{net: tcp1}}], routes: [{{net: tcp, gateway: router}}]}}
workloads:
  - rpc_stream: {{name: stream, clients: client, servers: server, op: write, rpc_size: {}, max_rpcs_in_flight: {}}}
",
        duration.as_nanos(),
        (duration / 30).as_nanos(),
        advice.bandwidth_per_rail_bytes_per_s,
        advice.mtu,
        advice.peer_credits,
        advice.credits,
        advice.conns_per_peer,
        advice.tx_buffer_size,
        advice.rx_buffer_size,
        router.peer_credits,
        router.peer_buffer_credits,
        router.large_buffers,
        router.small_buffers,
        advice.rpc_size,
        advice.max_rpcs_in_flight,
    ))
}

/// Simulates the advice: the payload bandwidth over the second half of the run, and its
/// fraction of the rails' total.
fn simulate(advice: &Advice, rtt: Duration) -> Result<(f64, f64), AdviseError> {
    let scenario = scenario(advice, rtt)?;
    let mut world = World::new(&scenario, RunOptions { seed: 1, check_invariants: false })?;
    world.run(&mut |_| {})?;
    let results = RunResults::from_world(&world, "advice", 1);
    let series =
        results.workloads.first().map_or(&[][..], |w| w.bandwidth_series_mb_per_s.as_slice());
    let half = series.get(series.len() / 2..).unwrap_or_default();
    let mb = half.iter().sum::<f64>() / half.len().max(1) as f64;
    let link_mb = advice.bandwidth_per_rail_bytes_per_s as f64 * f64::from(advice.rails) / 1e6;
    Ok((mb / link_mb, mb))
}

impl Advice {
    /// The advice as a person reads it.
    pub fn text(&self) -> String {
        let mut text = format!(
            "{} rail(s) of {:.1} Gbit/s, {} ms round trip: {:.1} MB in flight per rail\n\
             lnetctl net set / module parameters, per NI:\n  peer_credits {}\n  credits {}\n\
             socklnd:\n  conns_per_peer {}\n  tx_buffer_size {}\n  rx_buffer_size {}\n\
             Lustre client (lctl set_param osc.*.):\n  max_rpcs_in_flight {}\n  max_pages_per_rpc {} (RPCs of {} MiB)\n",
            self.rails,
            self.bandwidth_per_rail_bytes_per_s as f64 * 8.0 / 1e9,
            self.rtt_ms,
            self.bandwidth_delay_product_bytes as f64 / 1e6,
            self.peer_credits,
            self.credits,
            self.conns_per_peer,
            self.tx_buffer_size,
            self.rx_buffer_size,
            self.max_rpcs_in_flight,
            self.rpc_size / 4096,
            self.rpc_size >> 20,
        );
        if let Some(router) = &self.router {
            text.push_str(&format!(
                "router (lnetctl set / its NIs' tunables):\n  peer_credits {}\n  peer_buffer_credits {}\n  \
                 large_buffers {}\n  small_buffers {}\n",
                router.peer_credits,
                router.peer_buffer_credits,
                router.large_buffers,
                router.small_buffers
            ));
        }
        if let (Some(fraction), Some(mb)) = (self.simulated_fraction, self.simulated_mb_per_s) {
            let through = if self.router.is_some() { ", through one router" } else { "" };
            text.push_str(&format!(
                "simulated (one client, one server{through}, 1 MiB-bulk writes): {mb:.0} MB/s, {:.1}% of the link\n",
                fraction * 100.0
            ));
        }
        for note in &self.notes {
            text.push_str(&format!("note: {note}\n"));
        }
        text
    }
}
