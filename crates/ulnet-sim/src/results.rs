//! What a run did, as a JSON document: the scenario's name and seed, the virtual time
//! covered, the run's counters, and per workload its RPC counts, latency, bytes, average
//! bandwidth and bandwidth over time. Nothing in it depends on the host (no wall time), so
//! the same scenario and seed give the same bytes.

use serde::Serialize;

use crate::histogram::LatencySummary;
use crate::scenario::WorkloadKind;
use crate::world::{Totals, World};

/// A run's results.
#[derive(Clone, Debug, Serialize)]
pub struct RunResults {
    pub scenario: String,
    pub seed: u64,
    pub nodes: usize,
    pub simulated_seconds: f64,
    pub sample_interval_seconds: f64,
    /// Nothing was in flight at the end (the final checks then included quiescence).
    pub quiescent: bool,
    pub totals: Totals,
    pub workloads: Vec<WorkloadResults>,
}

/// One workload's results.
#[derive(Clone, Debug, Serialize)]
pub struct WorkloadResults {
    pub name: String,
    pub kind: WorkloadKind,
    pub clients: usize,
    pub servers: usize,
    pub rpcs_started: u64,
    pub rpcs_completed: u64,
    pub rpcs_failed: u64,
    pub rpcs_timed_out: u64,
    pub bytes: u64,
    /// Bulk bytes over the workload's active time (start to stop or the run's end), MB/s.
    pub bandwidth_mb_per_s: f64,
    /// RPCs completed per second of active time.
    pub rpcs_per_s: f64,
    pub latency: LatencySummary,
    /// MB/s in each sample interval from 0.
    pub bandwidth_series_mb_per_s: Vec<f64>,
    /// RPCs that failed in each sample interval (those after the end are only in
    /// `rpcs_failed`).
    pub failures_series: Vec<u64>,
}

impl RunResults {
    pub fn from_world(world: &World, name: &str, seed: u64) -> Self {
        let scenario = world.scenario();
        let interval = scenario.sample_interval.0.as_secs_f64();
        let end = world.end();
        let workloads = world.workloads();
        let results = workloads
            .plans
            .iter()
            .zip(&workloads.stats)
            .map(|(plan, stats)| {
                let stop = plan.stop.min(end);
                let active = stop.saturating_duration_since(plan.start).as_secs_f64().max(1e-9);
                let samples = (end.as_nanos() as f64 / (interval * 1e9)).ceil() as usize;
                WorkloadResults {
                    name: plan.label.clone(),
                    kind: plan.kind,
                    clients: plan.clients.len(),
                    servers: plan.servers.len(),
                    rpcs_started: stats.rpcs_started,
                    rpcs_completed: stats.rpcs_completed,
                    rpcs_failed: stats.rpcs_failed,
                    rpcs_timed_out: stats.rpcs_timed_out,
                    bytes: stats.bytes,
                    bandwidth_mb_per_s: round(stats.bytes as f64 / active / 1e6),
                    rpcs_per_s: round(stats.rpcs_completed as f64 / active),
                    latency: stats.latency.summary(),
                    bandwidth_series_mb_per_s: stats
                        .series
                        .iter()
                        .take(samples)
                        .map(|bytes| round(*bytes as f64 / interval / 1e6))
                        .collect(),
                    failures_series: stats.failures.iter().take(samples).copied().collect(),
                }
            })
            .collect();
        Self {
            scenario: name.to_owned(),
            seed,
            nodes: world.node_count(),
            simulated_seconds: end.as_nanos() as f64 / 1e9,
            sample_interval_seconds: interval,
            quiescent: world.quiescent(),
            totals: world.totals.clone(),
            workloads: results,
        }
    }

    /// The whole bandwidth of every workload, MB/s.
    pub fn total_bandwidth(&self) -> f64 {
        round(self.workloads.iter().map(|w| w.bandwidth_mb_per_s).sum())
    }

    /// A few lines for a person.
    pub fn summary(&self) -> String {
        let mut text = format!(
            "{}: {} nodes, {} s simulated (seed {}): {} LNet messages, {} connections, {} frames lost\n",
            self.scenario,
            self.nodes,
            self.simulated_seconds,
            self.seed,
            self.totals.lnet_messages,
            self.totals.connects,
            self.totals.frames_lost
        );
        for workload in &self.workloads {
            text.push_str(&format!(
                "  {} ({:?}, {} clients, {} servers): {} RPCs done, {} failed, {:.1} MB/s, \
                 latency mean {:.1} us p99 {:.1} us\n",
                workload.name,
                workload.kind,
                workload.clients,
                workload.servers,
                workload.rpcs_completed,
                workload.rpcs_failed,
                workload.bandwidth_mb_per_s,
                workload.latency.mean_us,
                workload.latency.p99_us
            ));
        }
        text
    }
}

/// Three decimals: enough for MB/s, and stable text.
pub fn round(value: f64) -> f64 {
    (value * 1000.0).round() / 1000.0
}
