//! What one metrics scrape costs to encode: a node snapshot with N peer NIs (each with a
//! filled latency histogram) rendered repeatedly; prints the text size and time per scrape.
//!
//! `cargo run --release -p ulnetd --example metrics_cost -- 1024`

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use ulnet::proto::engine::{
    CptCredits, CreditStats, ElementStats, LatencyStats, NiHealthStats, PeerNiHealthStats,
};
use ulnet::{GlobalStats, LndKind, NetTunables, NiStats, NodeStats, PeerNiStats, RuntimeStats};

fn main() {
    let peers: u32 = std::env::args().nth(1).map_or(1024, |text| text.parse().unwrap());
    let mut latency = LatencyStats::default();
    for micros in 1..200u64 {
        latency.get_rtt.record(Duration::from_micros(micros * 7));
        latency.put_ack.record(Duration::from_micros(micros * 11));
    }
    let ni = NiStats {
        nid: "10.1.0.1@tcp".parse().unwrap(),
        lnd: LndKind::Tcp,
        up: true,
        statistics: ElementStats::default(),
        health: NiHealthStats::default(),
        tunables: NetTunables::default(),
        tx_credits: Some(CreditStats { max: 256, available: 256, min: 200 }),
        tx_queues: vec![CptCredits {
            cpt: 0,
            credits: CreditStats { max: 256, available: 256, min: 200 },
        }],
        priority: 0,
        numa_distance: 0,
        dev_cpt: None,
        latency,
    };
    let peer_nis = (0..peers)
        .map(|index| {
            let nid = format!("10.2.{}.{}@tcp", index / 250, index % 250 + 1).parse().unwrap();
            PeerNiStats {
                nid,
                primary_nid: nid,
                multi_rail: true,
                tx_credits: CreditStats { max: 8, available: 8, min: 1 },
                tx_q_num_of_buf: 0,
                rtr_credits: CreditStats { max: 8, available: 8, min: 8 },
                statistics: ElementStats { send_count: 1 << 20, ..ElementStats::default() },
                health: PeerNiHealthStats { health_value: 1000, ..PeerNiHealthStats::default() },
                status: 0,
                priority: 0,
                preferred: None,
                latency,
                srtt: Duration::from_micros(90),
            }
        })
        .collect();
    let stats = NodeStats {
        global: GlobalStats::default(),
        nis: vec![ni],
        peer_nis,
        messages: 0,
        mds: 0,
        mes: 0,
        runtime: RuntimeStats::default(),
        connections_by_partition: vec![0],
    };
    let text = ulnetd::metrics::render(Some(&stats), None).unwrap();
    let rounds = 20u32;
    let started = Instant::now();
    for _ in 0..rounds {
        std::hint::black_box(ulnetd::metrics::render(Some(&stats), None).unwrap());
    }
    let each = started.elapsed() / rounds;
    println!(
        "{peers} peer NIs: {} bytes, {} lines, {:.2} ms per scrape",
        text.len(),
        text.lines().count(),
        each.as_secs_f64() * 1e3
    );
}
