//! The simulator's own speed: `N` nodes on one switch, each keeping lst ping RPCs in flight
//! to its neighbour, run until a number of LNet messages have been simulated; wall time,
//! messages per wall second and the process's peak memory (VmHWM) are reported. With
//! `idle`, the nodes are only built: the memory an idle simulated node costs.

use std::time::Instant;

use serde::Serialize;

use crate::scenario::Scenario;
use crate::world::{RunError, RunOptions, World};

/// How to bench.
#[derive(Clone, Copy, Debug)]
pub struct BenchOptions {
    pub nodes: u64,
    /// Stop once this many LNet messages were simulated.
    pub messages: u64,
    /// Ping RPCs each node keeps in flight.
    pub concurrency: u32,
    pub check_invariants: bool,
    pub idle: bool,
}

/// What the bench measured.
#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    pub nodes: u64,
    pub messages: u64,
    pub rpcs: u64,
    pub simulated_seconds: f64,
    pub build_wall_seconds: f64,
    pub wall_seconds: f64,
    pub messages_per_wall_second: f64,
    pub rss_after_build_bytes: u64,
    pub peak_rss_bytes: u64,
    pub invariant_checks: bool,
}

/// The bench's scenario: one group on one switch, a ping workload to the next node.
pub fn scenario(nodes: u64, concurrency: u32) -> Result<Scenario, crate::scenario::ScenarioError> {
    Scenario::from_yaml(&format!(
        "name: bench
duration: 1h
sample_interval: 10s
defaults:
  link: {{bandwidth: 10Gbit, latency: 2us}}
nodes:
  - name: node
    count: {nodes}
    nis: [{{net: tcp}}]
workloads:
  - ping: {{clients: node, servers: node, servers_per_client: 1, shift: 1, concurrency: {concurrency}}}
"
    ))
}

/// Runs the bench.
pub fn run(options: BenchOptions) -> Result<BenchReport, RunError> {
    let scenario = scenario(options.nodes, options.concurrency)?;
    let build = Instant::now();
    let mut world =
        World::new(&scenario, RunOptions { seed: 1, check_invariants: options.check_invariants })?;
    let build_wall_seconds = build.elapsed().as_secs_f64();
    let rss_after_build_bytes = memory_kib("VmRSS").saturating_mul(1024);
    let started = Instant::now();
    if !options.idle {
        while world.totals.lnet_messages < options.messages && world.now() < world.end() {
            if !world.has_work() {
                break;
            }
            world.step()?;
        }
    }
    let wall_seconds = started.elapsed().as_secs_f64();
    let messages = world.totals.lnet_messages;
    let rpcs = world.workloads().stats.iter().map(|s| s.rpcs_completed).sum();
    Ok(BenchReport {
        nodes: options.nodes,
        messages,
        rpcs,
        simulated_seconds: world.now().as_nanos() as f64 / 1e9,
        build_wall_seconds,
        wall_seconds,
        messages_per_wall_second: if wall_seconds > 0.0 {
            messages as f64 / wall_seconds
        } else {
            0.0
        },
        rss_after_build_bytes,
        peak_rss_bytes: memory_kib("VmHWM").saturating_mul(1024),
        invariant_checks: options.check_invariants,
    })
}

/// A `/proc/self/status` memory line in KiB (0 where there is none, as off Linux).
pub fn memory_kib(key: &str) -> u64 {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else { return 0 };
    status
        .lines()
        .find_map(|line| line.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}
