//! A node's statistics in the Prometheus text exposition format (version 0.0.4), encoded by
//! `prometheus-client`: the counters `stats show`, `net show -v` and `peer show -v` print, at
//! the engine's 64-bit width (they do not wrap as the shown 32-bit ones do), health values,
//! credits and the latency histograms.
//!
//! Every metric is named `ulnet_*`; per-NI series carry `nid`, per-peer-NI series `peer`
//! (the peer's primary NID) and `nid`. Latency histograms are in seconds, with the engine's
//! buckets merged into powers of four from 1 µs to 64 s (each engine bucket lies wholly
//! inside one of them, so the counts are exact); a histogram without samples is left out.
//! At most [`MAX_PEER_NIS`] peer NIs are exported, in the order the node learnt them;
//! `ulnet_metrics_peer_nis_omitted` counts the rest. While the node hosts the selftest
//! service, its state lock is counted too (`ulnet_selftest_lock_*`).

use std::fmt;
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use ulnet::proto::engine::{ElementStats, LatencyHistogram, LatencyStats, MsgTypeCounts};
use ulnet::{NiStats, NodeStats, PeerNiStats};
use ulnet_selftest::EndpointLockStats;

/// The `Content-Type` of what [`render`] returns.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// The most peer NIs one scrape exports. Each is about 80 lines (8 KiB) once its latency
/// histograms fill: 256 of them make a 2 MiB scrape, where a server with thousands of
/// clients would otherwise answer with tens of megabytes.
pub const MAX_PEER_NIS: usize = 256;

/// The exported latency buckets end at `4^k - 1` ns for these k (1 µs to 69 s), then
/// `+Inf`. The engine's buckets end at `2^n - 1` ns every fourth bucket, so each falls
/// wholly inside one of these.
const LATENCY_BOUND_EXPONENTS: std::ops::RangeInclusive<u32> = 5..=18;

/// The node's metrics now; `None` while LNet is not configured (only `ulnet_lnet_up 0`).
/// `selftest`: the hosted selftest service's state lock, while it runs.
pub fn render(
    stats: Option<&NodeStats>,
    selftest: Option<&EndpointLockStats>,
) -> Result<String, fmt::Error> {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Snapshot(stats.cloned(), selftest.copied())));
    let mut text = String::new();
    prometheus_client::encoding::prometheus_text::encode(&mut text, &registry)?;
    Ok(text)
}

/// One scrape's statistics, encoded once.
#[derive(Debug)]
struct Snapshot(Option<NodeStats>, Option<EndpointLockStats>);

impl Collector for Snapshot {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> fmt::Result {
        let out = &mut encoder;
        gauge(
            out,
            "ulnet_lnet_up",
            "1 while LNet is configured",
            [(labels([]), i64::from(self.0.is_some()))],
        )?;
        let Some(stats) = &self.0 else { return Ok(()) };
        node_metrics(out, stats)?;
        ni_metrics(out, &stats.nis)?;
        let shown = stats.peer_nis.len().min(MAX_PEER_NIS);
        peer_ni_metrics(out, stats.peer_nis.get(..shown).unwrap_or_default())?;
        let omitted = stats.peer_nis.len() - shown;
        gauge(
            out,
            "ulnet_metrics_peer_nis_omitted",
            "Peer NIs left out of this scrape (at most 256 are exported)",
            [(labels([]), count(omitted as u64))],
        )?;
        match &self.1 {
            Some(selftest) => selftest_metrics(out, selftest),
            None => Ok(()),
        }
    }
}

/// The selftest service's state lock: its serial section, as the core lock is the node's.
fn selftest_metrics(out: &mut DescriptorEncoder<'_>, lock: &EndpointLockStats) -> fmt::Result {
    counter(
        out,
        "ulnet_selftest_lock_events",
        "The selftest service's state lock: times taken (estimated from one in 16), times found held",
        [
            (labels([("event", "hold".to_string())]), lock.holds),
            (labels([("event", "busy".to_string())]), lock.busy),
        ],
    )?;
    counter_f64(
        out,
        "ulnet_selftest_lock_held_seconds",
        "Time the selftest service's state lock was held (estimated from one acquisition in 16)",
        Duration::from_nanos(lock.held_ns).as_secs_f64(),
    )
}

type Labels = Vec<(&'static str, String)>;

fn labels<const N: usize>(pairs: [(&'static str, String); N]) -> Labels {
    pairs.into_iter().collect()
}

fn with(base: &Labels, pairs: &[(&'static str, &'static str)]) -> Labels {
    let mut all = base.clone();
    all.extend(pairs.iter().map(|(key, value)| (*key, (*value).to_string())));
    all
}

fn count(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

// ------------------------------------------------------------------------ the node

fn node_metrics(out: &mut DescriptorEncoder<'_>, stats: &NodeStats) -> fmt::Result {
    let global = &stats.global;
    let none = labels([]);
    let by = |key: &'static str, value: &'static str| with(&none, &[(key, value)]);
    counter(
        out,
        "ulnet_messages",
        "Messages sent, received, routed and dropped by the node (stats show)",
        [
            (by("direction", "sent"), global.send_count),
            (by("direction", "received"), global.recv_count),
            (by("direction", "routed"), global.route_count),
            (by("direction", "dropped"), global.drop_count),
        ],
    )?;
    counter(
        out,
        "ulnet_message_bytes",
        "Payload bytes sent, received, routed and dropped by the node (stats show *_length)",
        [
            (by("direction", "sent"), global.send_length),
            (by("direction", "received"), global.recv_length),
            (by("direction", "routed"), global.route_length),
            (by("direction", "dropped"), global.drop_length),
        ],
    )?;
    gauge(
        out,
        "ulnet_messages_alive",
        "Messages alive now (msgs_alloc)",
        [(none.clone(), count(global.msgs_alloc))],
    )?;
    gauge(
        out,
        "ulnet_messages_alive_max",
        "Most messages alive at once (msgs_max)",
        [(none.clone(), count(global.msgs_max))],
    )?;
    counter(
        out,
        "ulnet_errors",
        "Messages that failed (stats show errors)",
        [(none.clone(), global.errors)],
    )?;
    counter(
        out,
        "ulnet_resends",
        "Resends: attempted (resend_count), then how they ended",
        [
            (by("result", "attempted"), global.resend_count),
            (by("result", "succeeded"), global.successful_resends),
            (by("result", "failed"), global.failed_resends),
        ],
    )?;
    counter(
        out,
        "ulnet_response_timeouts",
        "Responses not received in time (response_timeout_count)",
        [(none.clone(), global.response_timeout_count)],
    )?;
    let health = [
        ("local_interrupt", global.local_interrupt_count),
        ("local_dropped", global.local_dropped_count),
        ("local_aborted", global.local_aborted_count),
        ("local_no_route", global.local_no_route_count),
        ("local_timeout", global.local_timeout_count),
        ("local_error", global.local_error_count),
        ("remote_dropped", global.remote_dropped_count),
        ("remote_error", global.remote_error_count),
        ("remote_timeout", global.remote_timeout_count),
        ("network_timeout", global.network_timeout_count),
    ];
    counter(
        out,
        "ulnet_health_events",
        "Sends that ended with each health status (stats show *_count)",
        health.map(|(status, value)| (by("status", status), value)),
    )?;
    let engine = [
        ("stale_response", global.stale_responses),
        ("protocol_error", global.protocol_errors),
        ("event_dropped", global.events_dropped),
        ("blackhole_suspicion", global.blackhole_suspicions),
        ("fast_resend", global.fast_resends),
        ("pin_released", global.pins_released),
        ("receive_awaited_again", global.receives_awaited_again),
        ("duplicate_dropped", global.duplicates_dropped),
        ("discovery_nid_refused", global.discovery_nids_refused),
    ];
    counter(
        out,
        "ulnet_engine_events",
        "ulnet's own counters, not in lnetctl (stale responses, protocol errors, fast failover, ...)",
        engine.map(|(event, value)| (by("event", event), value)),
    )?;
    let runtime = &stats.runtime;
    let runtime = [
        ("io_wakeup", runtime.io_wakeups),
        ("socket_write", runtime.socket_writes),
        ("socket_write_unlocked", runtime.socket_writes_unlocked),
        ("socket_read", runtime.socket_reads),
        ("socket_read_unlocked", runtime.socket_reads_unlocked),
        ("core_lock_wait", runtime.core_lock_waits),
        ("core_lock_hold", runtime.core_lock_holds),
        ("core_shared_hold", runtime.core_shared_holds),
        ("core_shared_declined", runtime.core_shared_declined),
        ("event_unrouted", runtime.events_unrouted),
        ("transmit_failed_locally", runtime.transmits_failed_locally),
    ];
    counter(
        out,
        "ulnet_runtime_events",
        "The runtime's counters: I/O thread wake-ups, socket writes, waits for the core lock, ...",
        runtime.map(|(event, value)| (by("event", event), value)),
    )?;
    gauge(
        out,
        "ulnet_connections",
        "TCP connections by the CPU partition whose I/O thread runs them (each runs on the \
         partition its peer's NID hashes to)",
        stats
            .connections_by_partition
            .iter()
            .enumerate()
            .map(|(cpt, tasks)| (labels([("cpt", cpt.to_string())]), count(*tasks))),
    )?;
    let held = Duration::from_nanos(stats.runtime.core_lock_held_ns).as_secs_f64();
    counter_f64(
        out,
        "ulnet_core_lock_held_seconds",
        "Time the node's core lock was held (estimated from one acquisition in 16)",
        held,
    )
}

// ------------------------------------------------------------------------ local NIs

fn ni_metrics(out: &mut DescriptorEncoder<'_>, nis: &[NiStats]) -> fmt::Result {
    let id = |ni: &NiStats| labels([("nid", ni.nid.to_string())]);
    gauge(
        out,
        "ulnet_ni_up",
        "1 when the local NI is up (net show status)",
        nis.iter().map(|ni| (id(ni), i64::from(ni.up))),
    )?;
    element_metrics(out, "ulnet_ni", "local NI", nis.iter().map(|ni| (id(ni), &ni.statistics)))?;
    gauge(
        out,
        "ulnet_ni_health_value",
        "Local NI health value, 0 to 1000 (net show -v 2)",
        nis.iter().map(|ni| (id(ni), i64::from(ni.health.health_value))),
    )?;
    gauge(
        out,
        "ulnet_ni_fatal_error",
        "1 when the local NI's link is down (fatal_error)",
        nis.iter().map(|ni| (id(ni), i64::from(ni.health.fatal_error))),
    )?;
    let events = |ni: &NiStats| {
        let health = &ni.health;
        [
            ("interrupts", health.interrupts),
            ("dropped", health.dropped),
            ("aborted", health.aborted),
            ("no_route", health.no_route),
            ("timeouts", health.timeouts),
            ("error", health.error),
        ]
        .map(|(event, value)| (with(&id(ni), &[("event", event)]), value))
    };
    counter(
        out,
        "ulnet_ni_health_events",
        "Local NI health events (net show -v 2 health stats)",
        nis.iter().flat_map(events),
    )?;
    counter(
        out,
        "ulnet_ni_recovery_pings",
        "Recovery pings sent from the local NI (ping_count)",
        nis.iter().map(|ni| (id(ni), ni.health.ping_count)),
    )?;
    // One series per NI and partition, as the kernel's `nis` file has one line per NI and CPT
    // (lnet_debugfs.c proc_lnet_nis(): max, tx, min of `ni_tx_queues[cpt]`).
    let credited: Vec<_> = nis
        .iter()
        .flat_map(|ni| {
            ni.tx_queues.iter().map(|queue| {
                let labels = labels([("nid", ni.nid.to_string()), ("cpt", queue.cpt.to_string())]);
                (labels, queue.credits)
            })
        })
        .collect();
    let credit = |pick: fn(&ulnet::proto::engine::CreditStats) -> i32| {
        credited.iter().map(move |(labels, credits)| (labels.clone(), i64::from(pick(credits))))
    };
    gauge(
        out,
        "ulnet_ni_tx_credits",
        "Local NI send credits of a CPU partition available now; negative: messages queued",
        credit(|c| c.available),
    )?;
    gauge(
        out,
        "ulnet_ni_tx_credits_max",
        "Local NI send credits of a CPU partition (credits divided among the NI's partitions)",
        credit(|c| c.max),
    )?;
    gauge(
        out,
        "ulnet_ni_tx_credits_min",
        "Lowest local NI send credits of a CPU partition seen",
        credit(|c| c.min),
    )?;
    latency_metrics(
        out,
        "ulnet_ni_latency_seconds",
        "local NI",
        nis.iter().map(|ni| (id(ni), &ni.latency)),
    )
}

// ------------------------------------------------------------------------ peer NIs

fn peer_ni_metrics(out: &mut DescriptorEncoder<'_>, nis: &[PeerNiStats]) -> fmt::Result {
    let id = |ni: &PeerNiStats| {
        labels([("peer", ni.primary_nid.to_string()), ("nid", ni.nid.to_string())])
    };
    element_metrics(
        out,
        "ulnet_peer_ni",
        "peer NI",
        nis.iter().map(|ni| (id(ni), &ni.statistics)),
    )?;
    gauge(
        out,
        "ulnet_peer_ni_health_value",
        "Peer NI health value, 0 to 1000 (peer show -v 2)",
        nis.iter().map(|ni| (id(ni), i64::from(ni.health.health_value))),
    )?;
    let events = |ni: &PeerNiStats| {
        let health = &ni.health;
        [
            ("dropped", health.dropped),
            ("timeout", health.timeout),
            ("error", health.error),
            ("network_timeout", health.network_timeout),
        ]
        .map(|(event, value)| (with(&id(ni), &[("event", event)]), value))
    };
    counter(
        out,
        "ulnet_peer_ni_health_events",
        "Peer NI health events (peer show -v 2 health stats)",
        nis.iter().flat_map(events),
    )?;
    counter(
        out,
        "ulnet_peer_ni_recovery_pings",
        "Recovery pings sent to the peer NI (ping_count)",
        nis.iter().map(|ni| (id(ni), ni.health.ping_count)),
    )?;
    counter(
        out,
        "ulnet_peer_ni_blackhole_suspicions",
        "Times fast failover suspected the peer NI of black-holing traffic",
        nis.iter().map(|ni| (id(ni), ni.health.suspicions)),
    )?;
    gauge(
        out,
        "ulnet_peer_ni_tx_credits",
        "Peer NI send credits available now; negative: messages queued",
        nis.iter().map(|ni| (id(ni), i64::from(ni.tx_credits.available))),
    )?;
    gauge(
        out,
        "ulnet_peer_ni_tx_credits_max",
        "Peer NI send credits configured (peer_credits)",
        nis.iter().map(|ni| (id(ni), i64::from(ni.tx_credits.max))),
    )?;
    gauge(
        out,
        "ulnet_peer_ni_tx_credits_min",
        "Lowest peer NI send credits seen",
        nis.iter().map(|ni| (id(ni), i64::from(ni.tx_credits.min))),
    )?;
    gauge(
        out,
        "ulnet_peer_ni_rtr_credits",
        "Peer NI router buffer credits available now",
        nis.iter().map(|ni| (id(ni), i64::from(ni.rtr_credits.available))),
    )?;
    gauge(
        out,
        "ulnet_peer_ni_rtr_credits_min",
        "Lowest peer NI router buffer credits seen",
        nis.iter().map(|ni| (id(ni), i64::from(ni.rtr_credits.min))),
    )?;
    gauge(
        out,
        "ulnet_peer_ni_tx_queued_bytes",
        "Bytes of messages holding a peer NI credit (tx_q_num_of_buf)",
        nis.iter().map(|ni| (id(ni), count(ni.tx_q_num_of_buf))),
    )?;
    gauge_f64(
        out,
        "ulnet_peer_ni_srtt_seconds",
        "Fast failover's smoothed round trip to the peer NI (0 until measured)",
        nis.iter().map(|ni| (id(ni), ni.srtt.as_secs_f64())),
    )?;
    latency_metrics(
        out,
        "ulnet_peer_ni_latency_seconds",
        "peer NI",
        nis.iter().map(|ni| (id(ni), &ni.latency)),
    )
}

// ------------------------------------------------------------------------ shared shapes

/// The `statistics` and per-type blocks of `net show -v` / `peer show -v`.
fn element_metrics<'a>(
    out: &mut DescriptorEncoder<'_>,
    prefix: &'static str,
    what: &str,
    elements: impl Iterator<Item = (Labels, &'a ElementStats)> + Clone,
) -> fmt::Result {
    let totals = |(labels, stats): (Labels, &ElementStats)| {
        [("sent", stats.send_count), ("received", stats.recv_count), ("dropped", stats.drop_count)]
            .map(|(direction, value)| (with(&labels, &[("direction", direction)]), value))
    };
    counter(
        out,
        &format!("{prefix}_messages"),
        &format!("Messages through the {what} (send_count, recv_count, drop_count)"),
        elements.clone().flat_map(totals),
    )?;
    let mut messages = Vec::new();
    let mut bytes = Vec::new();
    for (labels, stats) in elements {
        let blocks = [
            ("sent", &stats.sent_stats, &stats.sent_bytes),
            ("received", &stats.received_stats, &stats.received_bytes),
            ("dropped", &stats.dropped_stats, &stats.dropped_bytes),
        ];
        for (direction, counts, sizes) in blocks {
            let labels = with(&labels, &[("direction", direction)]);
            for ((kind, count), (_, size)) in by_type(counts).into_iter().zip(by_type(sizes)) {
                messages.push((with(&labels, &[("type", kind)]), count));
                bytes.push((with(&labels, &[("type", kind)]), size));
            }
        }
    }
    counter(
        out,
        &format!("{prefix}_messages_by_type"),
        &format!(
            "Messages through the {what} by LNet type (sent_stats, received_stats, dropped_stats)"
        ),
        messages,
    )?;
    counter(
        out,
        &format!("{prefix}_bytes"),
        &format!("Bytes through the {what} by LNet type"),
        bytes,
    )
}

fn by_type(counts: &MsgTypeCounts) -> [(&'static str, u64); 5] {
    [
        ("put", counts.put),
        ("get", counts.get),
        ("reply", counts.reply),
        ("ack", counts.ack),
        ("hello", counts.hello),
    ]
}

/// One histogram per operation Lustre times, for each element that has samples.
fn latency_metrics<'a>(
    out: &mut DescriptorEncoder<'_>,
    name: &'static str,
    what: &str,
    elements: impl Iterator<Item = (Labels, &'a LatencyStats)>,
) -> fmt::Result {
    let series: Vec<(Labels, &LatencyHistogram)> = elements
        .flat_map(|(labels, latency)| {
            [
                ("put_egress", &latency.put_egress),
                ("get_rtt", &latency.get_rtt),
                ("put_ack", &latency.put_ack),
            ]
            .map(|(op, histogram)| (with(&labels, &[("op", op)]), histogram))
        })
        .filter(|(_, histogram)| histogram.samples() > 0)
        .collect();
    if series.is_empty() {
        return Ok(());
    }
    let help = format!(
        "Latency through the {what}: put_egress (PUT to send completion), get_rtt (GET to REPLY), put_ack (PUT to ACK)"
    );
    let mut family = out.encode_descriptor(name, &help, None, MetricType::Histogram)?;
    for (labels, histogram) in &series {
        let buckets = latency_buckets(histogram);
        let total = buckets.iter().map(|(_, count)| count).sum();
        family.encode_family(labels)?.encode_histogram::<NoLabelSet>(
            histogram.sum().as_secs_f64(),
            total,
            &buckets,
            None,
        )?;
    }
    Ok(())
}

/// The engine's buckets merged into the exported ones: (upper bound in seconds, samples in
/// that bucket alone), the last `+Inf`.
pub fn latency_buckets(histogram: &LatencyHistogram) -> Vec<(f64, u64)> {
    let bounds: Vec<u64> =
        LATENCY_BOUND_EXPONENTS.map(|exponent| (1u64 << (2 * exponent)) - 1).collect();
    let mut counts = vec![0u64; bounds.len() + 1];
    for (upper_ns, samples) in histogram.buckets() {
        let slot = bounds.iter().position(|bound| upper_ns <= *bound).unwrap_or(bounds.len());
        if let Some(count) = counts.get_mut(slot) {
            *count += u64::from(samples);
        }
    }
    let mut buckets: Vec<(f64, u64)> =
        bounds.iter().zip(&counts).map(|(bound, count)| (*bound as f64 / 1e9, *count)).collect();
    buckets.push((f64::INFINITY, counts.last().copied().unwrap_or(0)));
    buckets
}

fn counter(
    out: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (Labels, u64)>,
) -> fmt::Result {
    let series: Vec<_> = series.into_iter().collect();
    if series.is_empty() {
        return Ok(());
    }
    let mut family = out.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, value) in &series {
        family.encode_family(labels)?.encode_counter::<NoLabelSet, u64, u64>(value, None)?;
    }
    Ok(())
}

fn counter_f64(out: &mut DescriptorEncoder<'_>, name: &str, help: &str, value: f64) -> fmt::Result {
    let mut family = out.encode_descriptor(name, help, None, MetricType::Counter)?;
    family.encode_family(&Labels::default())?.encode_counter::<NoLabelSet, f64, u64>(&value, None)
}

fn gauge(
    out: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (Labels, i64)>,
) -> fmt::Result {
    let series: Vec<_> = series.into_iter().collect();
    if series.is_empty() {
        return Ok(());
    }
    let mut family = out.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, value) in &series {
        family.encode_family(labels)?.encode_gauge(value)?;
    }
    Ok(())
}

fn gauge_f64(
    out: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (Labels, f64)>,
) -> fmt::Result {
    let series: Vec<_> = series.into_iter().collect();
    if series.is_empty() {
        return Ok(());
    }
    let mut family = out.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, value) in &series {
        family.encode_family(labels)?.encode_gauge(value)?;
    }
    Ok(())
}

/// The strict text-format reader the daemon tests use too.
#[cfg(test)]
#[path = "../../tests/daemon/promtext.rs"]
mod promtext;

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ulnet::proto::engine::{CptCredits, CreditStats, NiHealthStats, PeerNiHealthStats};
    use ulnet::{GlobalStats, LndKind, NetTunables, Nid, RuntimeStats};

    use super::*;
    use crate::metrics::exposition::promtext;

    fn nid(text: &str) -> Nid {
        text.parse().unwrap()
    }

    fn ni(text: &str, latency: LatencyStats) -> NiStats {
        let mut statistics = ElementStats { send_count: (1 << 32) + 5, ..ElementStats::default() };
        statistics.sent_stats.put = 7;
        statistics.sent_bytes.put = 7 << 20;
        NiStats {
            nid: nid(text),
            lnd: LndKind::Tcp,
            up: true,
            statistics,
            health: NiHealthStats { health_value: 900, timeouts: 2, ..NiHealthStats::default() },
            tunables: NetTunables::default(),
            // Loopback has no credits; the TCP NI two partitions of 128.
            tx_credits: (text != "0@lo").then_some(CreditStats {
                max: 256,
                available: 125,
                min: 90,
            }),
            tx_queues: if text == "0@lo" {
                Vec::new()
            } else {
                vec![
                    CptCredits {
                        cpt: 0,
                        credits: CreditStats { max: 128, available: -3, min: -10 },
                    },
                    CptCredits {
                        cpt: 1,
                        credits: CreditStats { max: 128, available: 128, min: 100 },
                    },
                ]
            },
            priority: 0,
            numa_distance: 0,
            dev_cpt: None,
            latency,
        }
    }

    fn peer_ni(index: u32) -> PeerNiStats {
        let address = format!("10.0.{}.{}@tcp", index / 250, index % 250 + 1);
        PeerNiStats {
            nid: nid(&address),
            primary_nid: nid(&address),
            multi_rail: true,
            tx_credits: CreditStats { max: 8, available: 8, min: 2 },
            tx_q_num_of_buf: 0,
            rtr_credits: CreditStats { max: 8, available: 8, min: 8 },
            statistics: ElementStats { recv_count: u64::from(index), ..ElementStats::default() },
            health: PeerNiHealthStats { health_value: 1000, ..PeerNiHealthStats::default() },
            status: 0,
            priority: 0,
            preferred: None,
            latency: LatencyStats::default(),
            srtt: Duration::from_micros(250),
        }
    }

    fn stats(peers: u32) -> NodeStats {
        let mut latency = LatencyStats::default();
        for micros in [1u64, 3, 50, 50, 800, 20_000, 90_000_000] {
            latency.get_rtt.record(Duration::from_micros(micros));
        }
        NodeStats {
            global: GlobalStats {
                send_count: 1 << 33,
                send_length: 1 << 40,
                ..GlobalStats::default()
            },
            nis: vec![ni("0@lo", LatencyStats::default()), ni("127.0.0.2@tcp", latency)],
            peer_nis: (0..peers).map(peer_ni).collect(),
            messages: 0,
            mds: 0,
            mes: 0,
            runtime: RuntimeStats::default(),
            connections_by_partition: vec![3, 1],
        }
    }

    #[test]
    fn a_node_exports_well_formed_families_at_full_width() {
        let text = render(Some(&stats(2)), None).unwrap();
        let parsed = promtext::parse(&text).unwrap_or_else(|error| panic!("{error}\n{text}"));
        assert_eq!(parsed.sum("ulnet_lnet_up", &[]), 1.0);
        // 64-bit counters, not the 32-bit values lnetctl shows.
        assert_eq!(
            parsed.sum("ulnet_messages_total", &[("direction", "sent")]),
            (1u64 << 33) as f64
        );
        assert_eq!(
            parsed.sum("ulnet_message_bytes_total", &[("direction", "sent")]),
            (1u64 << 40) as f64
        );
        assert_eq!(parsed.sum("ulnet_connections", &[("cpt", "0")]), 3.0);
        assert_eq!(parsed.sum("ulnet_connections", &[("cpt", "1")]), 1.0);
        let tcp = [("nid", "127.0.0.2@tcp")];
        assert_eq!(
            parsed.sum("ulnet_ni_messages_total", &[tcp[0], ("direction", "sent")]),
            ((1u64 << 32) + 5) as f64
        );
        let put = [tcp[0], ("direction", "sent"), ("type", "put")];
        assert_eq!(parsed.sum("ulnet_ni_messages_by_type_total", &put), 7.0);
        assert_eq!(parsed.sum("ulnet_ni_bytes_total", &put), (7 << 20) as f64);
        assert_eq!(parsed.sum("ulnet_ni_health_value", &tcp), 900.0);
        assert_eq!(
            parsed.sum("ulnet_ni_health_events_total", &[tcp[0], ("event", "timeouts")]),
            2.0
        );
        let cpt0 = [tcp[0], ("cpt", "0")];
        assert_eq!(parsed.sum("ulnet_ni_tx_credits", &cpt0), -3.0);
        assert_eq!(parsed.sum("ulnet_ni_tx_credits_min", &cpt0), -10.0);
        assert_eq!(parsed.sum("ulnet_ni_tx_credits", &[tcp[0], ("cpt", "1")]), 128.0);
        assert_eq!(parsed.samples("ulnet_ni_tx_credits_max", &tcp).count(), 2);
        // Series for credits loopback does not have are left out, not zero.
        assert_eq!(parsed.samples("ulnet_ni_tx_credits", &[("nid", "0@lo")]).count(), 0);
        assert_eq!(parsed.sum("ulnet_peer_ni_messages_total", &[("direction", "received")]), 1.0);
        assert_eq!(parsed.sum("ulnet_peer_ni_srtt_seconds", &[("nid", "10.0.0.1@tcp")]), 0.00025);
        assert_eq!(parsed.sum("ulnet_metrics_peer_nis_omitted", &[]), 0.0);
        for (name, family) in &parsed.families {
            assert!(name.starts_with("ulnet_"), "{name}");
            assert!(!family.help.is_empty(), "{name}");
            if family.kind == "counter" {
                assert!(name.ends_with("_total"), "{name}");
            }
        }
    }

    #[test]
    fn histograms_carry_the_engines_samples_exactly() {
        let text = render(Some(&stats(0)), None).unwrap();
        let parsed = promtext::parse(&text).unwrap();
        let family = &parsed.families["ulnet_ni_latency_seconds"];
        assert_eq!(family.kind, "histogram");
        // Only the histogram with samples is exported.
        assert!(family.samples.iter().all(|sample| sample.labels["op"] == "get_rtt"));
        assert!(family.samples.iter().all(|sample| sample.labels["nid"] == "127.0.0.2@tcp"));
        let bucket = |le: &str| {
            parsed.sum("ulnet_ni_latency_seconds_bucket", &[("op", "get_rtt"), ("le", le)])
        };
        assert_eq!(bucket("1.023e-6"), 0.0, "no such bound: the encoder spells it its way");
        let at = |seconds: f64| {
            family
                .samples
                .iter()
                .filter(|sample| sample.name.ends_with("_bucket"))
                .find(|sample| sample.labels["le"].parse::<f64>().unwrap() == seconds)
                .map(|sample| sample.value)
        };
        // 1 µs and 3 µs; 50 µs twice; 800 µs; 20 ms; 90 s (beyond the last bound).
        assert_eq!(at(1023e-9), Some(1.0));
        assert_eq!(at(4095e-9), Some(2.0));
        assert_eq!(at(65535e-9), Some(4.0));
        assert_eq!(at(1_048_575e-9), Some(5.0));
        assert_eq!(at(67_108_863e-9), Some(6.0));
        assert_eq!(at(68_719_476_735e-9), Some(6.0));
        assert_eq!(at(f64::INFINITY), Some(7.0));
        assert_eq!(parsed.sum("ulnet_ni_latency_seconds_count", &[]), 7.0);
        let sum = parsed.sum("ulnet_ni_latency_seconds_sum", &[]);
        assert!((sum - 90.020_904).abs() < 1e-9, "{sum}");
    }

    #[test]
    fn peer_nis_beyond_the_bound_are_counted_not_exported() {
        let peers = u32::try_from(MAX_PEER_NIS).unwrap() + 5;
        let text = render(Some(&stats(peers)), None).unwrap();
        let parsed = promtext::parse(&text).unwrap();
        assert_eq!(parsed.samples("ulnet_peer_ni_health_value", &[]).count(), MAX_PEER_NIS);
        assert_eq!(parsed.sum("ulnet_metrics_peer_nis_omitted", &[]), 5.0);
    }

    #[test]
    fn the_selftest_services_lock_is_exported_while_it_runs() {
        let lock = EndpointLockStats { holds: 32, held_ns: 3_000_000_000, busy: 7 };
        let text = render(Some(&stats(0)), Some(&lock)).unwrap();
        let parsed = promtext::parse(&text).unwrap_or_else(|error| panic!("{error}\n{text}"));
        assert_eq!(parsed.sum("ulnet_selftest_lock_held_seconds_total", &[]), 3.0);
        assert_eq!(parsed.sum("ulnet_selftest_lock_events_total", &[("event", "hold")]), 32.0);
        assert_eq!(parsed.sum("ulnet_selftest_lock_events_total", &[("event", "busy")]), 7.0);
        let without = render(Some(&stats(0)), None).unwrap();
        assert!(!without.contains("ulnet_selftest_lock"), "{without}");
    }

    #[test]
    fn a_node_that_is_down_says_so_only() {
        let text = render(None, None).unwrap();
        let parsed = promtext::parse(&text).unwrap();
        assert_eq!(parsed.families.len(), 1);
        assert_eq!(parsed.sum("ulnet_lnet_up", &[]), 0.0);
    }
}
