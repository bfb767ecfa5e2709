//! CPU partition stories: messages land on the partition the kernel's NID hash gives, over
//! the node's partitions or an NI's subset of them; NI tx credits and router buffers are
//! split per partition as the kernel splits them, a message waits on its own partition's
//! queue, and credits come back whole.

use std::time::Duration;

use super::{Harness, HarnessConfig, node_nid};
use crate::addr::{LndType, Net, Nid};
use crate::engine::cpt::{CptError, CptList, Partitions};
use crate::engine::error::ConfigError;
use crate::engine::error::MdBindError;
use crate::engine::event::EventKind;
use crate::engine::md::{MdOptions, MdSpec, Threshold, UnlinkMode};
use crate::engine::me::{InsertPosition, LNET_PID_LUSTRE, ProcessId};
use crate::engine::memory::Memory;
use crate::engine::ni::{LndKind, NiConfig, NiId};
use crate::engine::node::{GetRequest, PutRequest};
use crate::engine::routes::{BufferClass, RouteConfig};
use crate::engine::stats::{CreditStats, GlobalStats};
use crate::engine::tunables::{NetTunables, Tunables};
use crate::engine::tx_queues::CptCredits;
use crate::link_model::LinkConfig;
use crate::time::Time;

const PORTAL: u32 = 5;
const BITS: u64 = 0x77;

/// Harness node `i` is 10.0.0.(i+1)@tcp: NID bytes 00 02 00 00 0A 00 00 (i+1), which sum to
/// 13 + i. Over 3 partitions: node 0 (13) → 1, node 1 (14) → 2, node 2 (15) → 0,
/// node 3 (16) → 1.
#[test]
fn puts_and_acks_run_on_the_partition_the_hash_gives() {
    let config = HarnessConfig {
        nodes: 4,
        partitions: Partitions::new(3).unwrap(),
        net_tunables: NetTunables { credits: 2, peer_credits: 1, ..NetTunables::SOCKLND },
        ..HarnessConfig::default()
    };
    let mut h = Harness::new(config);
    h.discover_all();
    for node in 0..4 {
        h.take_transmit_cpts(node);
        assert_eq!(h.node(node).ni_cpts(NiId(1)), Some(vec![0, 1, 2]));
    }
    let before = h.node(0).ni_stats(NiId(1)).unwrap().statistics;
    for round in 0..3 {
        for node in 1..4 {
            let sink = MdSpec::new(Memory::new(vec![0; 8]))
                .threshold(Threshold::Count(1))
                .options(MdOptions::OP_PUT);
            h.post(node, PORTAL, BITS, sink);
            let md =
                h.bind(0, MdSpec::new(Memory::new(vec![round; 8])).threshold(Threshold::Count(2)));
            let request = PutRequest {
                md,
                ack: true,
                target: ProcessId::new(node_nid(node), LNET_PID_LUSTRE),
                portal: PORTAL,
                match_bits: BITS,
                remote_offset: 0,
                hdr_data: 0,
                source: None,
            };
            h.put(0, &request).unwrap();
        }
    }
    h.drive();
    h.assert_quiescent();
    let sent = h.take_transmit_cpts(0);
    assert_eq!(sent.len(), 9);
    // The NI's counts, kept by the partition of each call, add up to what it carried.
    let after = h.node(0).ni_stats(NiId(1)).unwrap().statistics;
    assert_eq!(after.sent_stats.put - before.sent_stats.put, 9);
    assert_eq!(after.received_stats.ack - before.received_stats.ack, 9);
    assert_eq!(after.sent_bytes.put - before.sent_bytes.put, 9 * 8);
    for (next_hop, cpt) in sent {
        let expected = match next_hop {
            n if n == node_nid(1) => 2,
            n if n == node_nid(2) => 0,
            n if n == node_nid(3) => 1,
            other => panic!("unexpected next hop {other:?}"),
        };
        assert_eq!(cpt, expected, "to {next_hop:?}");
    }
    // Every ACK back to node 0 (sum 13) runs on partition 1 of its sender.
    for node in 1..4 {
        let acks = h.take_transmit_cpts(node);
        assert_eq!(acks.len(), 3);
        assert!(acks.iter().all(|&(hop, cpt)| hop == node_nid(0) && cpt == 1), "{acks:?}");
        assert_eq!(h.node(node).cpt_of_nid(&node_nid(0), NiId(1)), 1);
    }
    // Every NI's tx credits are whole again: 2 per partition (2 / 3 = 0, raised to
    // 8 x 1 = 8, capped at 2), 6 in all.
    for node in 0..4 {
        let stats = h.node(node).ni_stats(NiId(1)).unwrap();
        let credits = stats.tx_credits.unwrap();
        assert_eq!((credits.available, credits.max), (6, 6), "node {node}");
        let queues: Vec<_> =
            stats.tx_queues.iter().map(|q| (q.cpt, q.credits.max, q.credits.available)).collect();
        assert_eq!(queues, [(0, 2, 2), (1, 2, 2), (2, 2, 2)], "node {node}");
    }
}

/// An NI bound to CPTs [2,0] indexes that list by the hash over 2: node 1 (sum 14) → index 0
/// → CPT 2; node 2 (15) → index 1 → CPT 0. Out-of-range and over-long lists are refused.
#[test]
fn a_bound_ni_uses_its_own_partitions() {
    let config =
        HarnessConfig { partitions: Partitions::new(3).unwrap(), ..HarnessConfig::default() };
    let mut h = Harness::new(config);
    let nid = "10.9.0.1@tcp9".parse().unwrap();
    let bound =
        NiConfig { cpts: CptList::new(&[2, 0]).unwrap(), ..NiConfig::new(nid, LndKind::Fabric) };
    let ni = h.node_mut(0).add_ni(Time::ZERO, bound).unwrap();
    assert_eq!(h.node(0).ni_cpts(ni), Some(vec![2, 0]));
    assert_eq!(h.node(0).cpt_of_nid(&node_nid(1), ni), 2);
    assert_eq!(h.node(0).cpt_of_nid(&node_nid(2), ni), 0);

    let far = NiConfig {
        cpts: CptList::new(&[3]).unwrap(),
        ..NiConfig::new("10.9.0.2@tcp9".parse().unwrap(), LndKind::Fabric)
    };
    assert_eq!(
        h.node_mut(0).add_ni(Time::ZERO, far),
        Err(ConfigError::Cpt { nid: far.nid, error: CptError::OutOfRange { cpt: 3, count: 3 } })
    );
    // A list naming every partition is stored as unbound.
    let all = NiConfig {
        cpts: CptList::new(&[0, 1, 2]).unwrap(),
        ..NiConfig::new("10.9.0.3@tcp9".parse().unwrap(), LndKind::Fabric)
    };
    let ni = h.node_mut(0).add_ni(Time::ZERO, all).unwrap();
    assert_eq!(h.node(0).cpt_of_nid(&node_nid(1), ni), 14 % 3);
}

/// NIs bound to CPTs [2,0] on 3 partitions: a peer NI's owner (the hash over all 3) and the
/// partition whose tx credits a send to it takes (the hash over the NI's 2) differ for node 0
/// (sum 13: owner 1, tx 0) and node 3 (16: owner 1, tx 2). PUTs with ACKs and GETs with
/// REPLYs between them keep every call within its plan (the harness checks each), which must
/// name both.
#[test]
fn a_bound_ni_plans_its_tx_partition_beside_the_peer_nis_owner() {
    let config = HarnessConfig {
        nodes: 4,
        partitions: Partitions::new(3).unwrap(),
        ni_cpts: CptList::new(&[2, 0]).unwrap(),
        ..HarnessConfig::default()
    };
    let mut h = Harness::new(config);
    h.discover_all();
    let owner = |nid: &Nid| Partitions::new(3).unwrap().cpt_of_nid(nid, None);
    assert_eq!((owner(&node_nid(0)), h.node(3).cpt_of_nid(&node_nid(0), NiId(1))), (1, 0));
    assert_eq!((owner(&node_nid(3)), h.node(0).cpt_of_nid(&node_nid(3), NiId(1))), (1, 2));
    for node in [0, 3] {
        h.node_mut(node).partition_audit();
    }
    for round in 0..3 {
        put(&mut h, 0, node_nid(3), 300 + round, 64);
        put(&mut h, 3, node_nid(0), 400 + round, 64);
        let source = MdSpec::new(Memory::new(vec![7; 32])).options(MdOptions::OP_GET);
        h.post(3, PORTAL, 500 + round, source.threshold(Threshold::Count(1)));
        let md = h.bind(0, MdSpec::new(Memory::new(vec![0; 32])).threshold(Threshold::Count(2)));
        let target = ProcessId::new(node_nid(3), LNET_PID_LUSTRE);
        let get = GetRequest {
            md,
            target,
            portal: PORTAL,
            match_bits: 500 + round,
            remote_offset: 0,
            source: None,
        };
        h.get(0, &get).unwrap();
    }
    h.drive();
    h.assert_quiescent();
    let kinds: Vec<_> = h.take_events(0).iter().map(|event| event.kind).collect();
    let count = |kind| kinds.iter().filter(|k| **k == kind).count();
    assert_eq!((count(EventKind::Ack), count(EventKind::Reply)), (3, 3), "{kinds:?}");
    // The sends planned two partitions, the owner's and the tx one.
    for node in [0, 3] {
        let audit = h.node_mut(node).partition_audit();
        assert!(audit.crossings.is_empty(), "node {node}: {:?}", audit.crossings);
        assert!(audit.plans[1] > 0, "node {node}: {:?}", audit.plans);
    }
}

/// A PUT with ACK of `size` bytes from `from` to the first NID of `to`.
fn put(h: &mut Harness, from: usize, to: Nid, bits: u64, size: usize) {
    let to_node = (0..h.node_count()).find(|node| h.nids(*node).contains(&to)).unwrap();
    let sink = MdSpec::new(Memory::new(vec![0; size]))
        .threshold(Threshold::Count(1))
        .options(MdOptions::OP_PUT);
    h.post(to_node, PORTAL, bits, sink);
    let md = h.bind(from, MdSpec::new(Memory::new(vec![1; size])).threshold(Threshold::Count(2)));
    let request = PutRequest {
        md,
        ack: true,
        target: ProcessId::new(to, LNET_PID_LUSTRE),
        portal: PORTAL,
        match_bits: bits,
        remote_offset: 0,
        hdr_data: 0,
        source: None,
    };
    h.put(from, &request).unwrap();
}

/// The (CPT, max, available, min) of each tx queue of NI 1 of `node`.
fn queues(h: &Harness, node: usize) -> Vec<(u32, i32, i32, i32)> {
    let stats = h.node(node).ni_stats(NiId(1)).unwrap();
    stats
        .tx_queues
        .iter()
        .map(|CptCredits { cpt, credits }| (*cpt, credits.max, credits.available, credits.min))
        .collect()
}

/// `lnet_ni_tq_credits()` on 1, 2 and 4 partitions with socklnd's 256 credits: 256, 128
/// and 64 per partition; with 16 peer credits the floor 8 x 16 = 128 lifts the 4-partition
/// share from 64 to 128 (512 in all, more than the NI's 256, as on a kernel node).
#[test]
fn ni_credits_are_split_per_partition() {
    let cases = [(1, 8, 256), (2, 8, 128), (4, 8, 64), (4, 16, 128), (2, 64, 256)];
    for (partitions, peer_credits, share) in cases {
        let config = HarnessConfig {
            nodes: 1,
            partitions: Partitions::new(partitions).unwrap(),
            net_tunables: NetTunables { credits: 256, peer_credits, ..NetTunables::SOCKLND },
            ..HarnessConfig::default()
        };
        let h = Harness::new(config);
        let expected: Vec<_> = (0..partitions).map(|cpt| (cpt, share, share, share)).collect();
        assert_eq!(queues(&h, 0), expected, "{partitions} CPTs, peer_credits {peer_credits}");
        let total = share * partitions as i32;
        let stats = h.node(0).ni_stats(NiId(1)).unwrap();
        assert_eq!(
            stats.tx_credits,
            Some(CreditStats { max: total, available: total, min: total })
        );
        assert!(h.node(0).ni_stats(NiId::LOOPBACK).unwrap().tx_queues.is_empty());
    }
    // An NI bound to one of four partitions has one queue with all its credits.
    let config =
        HarnessConfig { nodes: 1, partitions: Partitions::new(4).unwrap(), ..Default::default() };
    let mut h = Harness::new(config);
    let bound = NiConfig {
        cpts: CptList::new(&[2]).unwrap(),
        tunables: NetTunables { credits: 256, peer_credits: 8, ..NetTunables::SOCKLND },
        ..NiConfig::new("10.9.0.1@tcp9".parse().unwrap(), LndKind::Fabric)
    };
    let ni = h.node_mut(0).add_ni(Time::ZERO, bound).unwrap();
    let stats = h.node(0).ni_stats(ni).unwrap();
    let shown: Vec<_> = stats.tx_queues.iter().map(|q| (q.cpt, q.credits.max)).collect();
    assert_eq!(shown, [(2, 256)]);
}

/// Two partitions, 2 credits each (256 credits would take many messages; 2 / 2 = 1 raised to
/// 8 x 8 = 64, capped at the NI's 2). Node 1 (sum 14) hashes to CPT 0 and node 2 (15) to CPT 1. Three PUTs
/// to node 1 fill CPT 0's queue and the third waits on it, while CPT 1's queue is untouched;
/// a PUT to node 2 then goes at once on CPT 1 (lib-move.c lnet_post_send_locked() with
/// `ni->ni_tx_queues[msg->msg_tx_cpt]`). Everything completes, and each queue's low-water
/// mark says which waited.
#[test]
fn a_message_waits_on_its_partitions_queue_while_another_is_free() {
    let config = HarnessConfig {
        nodes: 3,
        partitions: Partitions::new(2).unwrap(),
        net_tunables: NetTunables { credits: 2, peer_credits: 8, ..NetTunables::SOCKLND },
        ..HarnessConfig::default()
    };
    let mut h = Harness::new(config);
    h.discover_all();
    h.take_transmit_cpts(0);
    // (CPT, max, available) of each queue; the low-water marks are checked at the end.
    let available = |h: &Harness| {
        queues(h, 0).into_iter().map(|(cpt, max, now, _)| (cpt, max, now)).collect::<Vec<_>>()
    };
    assert_eq!(h.node(0).cpt_of_nid(&node_nid(1), NiId(1)), 0);
    assert_eq!(h.node(0).cpt_of_nid(&node_nid(2), NiId(1)), 1);
    assert_eq!(available(&h), [(0, 2, 2), (1, 2, 2)]);
    for bits in 0..3 {
        put(&mut h, 0, node_nid(1), 100 + bits, 64);
    }
    assert_eq!(available(&h), [(0, 2, -1), (1, 2, 2)], "one PUT waits on CPT 0");
    assert_eq!(h.node(0).ni_stats(NiId(1)).unwrap().tx_credits.unwrap().available, 1);
    put(&mut h, 0, node_nid(2), 200, 64);
    assert_eq!(available(&h), [(0, 2, -1), (1, 2, 1)], "CPT 1 sends at once");
    let sent = h.take_transmit_cpts(0);
    assert_eq!(sent, [(node_nid(1), 0), (node_nid(1), 0), (node_nid(2), 1)]);
    h.drive();
    h.assert_quiescent();
    assert_eq!(
        h.take_transmit_cpts(0),
        [(node_nid(1), 0)],
        "the waiter went once a credit came back"
    );
    let lows: Vec<_> =
        queues(&h, 0).into_iter().map(|(cpt, _, now, min)| (cpt, now, min)).collect();
    assert_eq!(lows[0], (0, 2, -1), "CPT 0 had a waiter: {lows:?}");
    assert!(lows[1].1 == 2 && lows[1].2 >= 0, "CPT 1 never had one: {lows:?}");
}

fn tcp(number: u16) -> Net {
    Net::new(LndType::SOCK, number)
}

/// `10.<number>.0.<host>@tcp<number>`.
fn routed_nid(number: u16, host: u32) -> Nid {
    Nid::new4(tcp(number), 0x0a00_0000 | (u32::from(number) << 16) | host)
}

/// A router with two partitions between clients on tcp and a server on tcp1. Its pools are
/// the node-wide counts halved (`lnet_nrb_*_calculate()`): 2048 / 2 tiny, 2 / 2 small (set
/// below), 1024 / 2 large. Client 10.0.0.1 (bytes sum 13) hashes to CPT 1 and client
/// 10.0.0.2 (14) to CPT 0 on the router: each client's PUTs take their buffers from their
/// own partition's pools (`lnet_msg2bufpool()` with `msg_rx_cpt`), so client 1's PUTs queue
/// for partition 1's one small buffer and never for partition 0's (which only carries what
/// the server, sum 114, sends back: discovery's ping replies, ACKs).
#[test]
fn routed_messages_take_buffers_of_their_partition() {
    let (client, other, router, server) =
        (routed_nid(0, 1), routed_nid(0, 2), routed_nid(0, 10), routed_nid(1, 100));
    let config = HarnessConfig {
        nodes: 4,
        node_nids: vec![vec![client], vec![other], vec![router, routed_nid(1, 10)], vec![server]],
        partitions: Partitions::new(2).unwrap(),
        tunables: Tunables::default(),
        link: LinkConfig { latency: Duration::from_micros(20), ..LinkConfig::IDEAL },
        ..HarnessConfig::default()
    };
    let mut h = Harness::new(config);
    h.with_node(2, |node, now| {
        node.set_routing(now, true, true).unwrap();
        node.set_router_buffers(now, BufferClass::Small, 2);
    });
    let pools = h.node(2).router_pools();
    let sizes: Vec<_> = pools.iter().map(|set| set.map(|pool| pool.buffers)).collect();
    assert_eq!(sizes, [[1024, 1, 512], [1024, 1, 512]]);
    for node in [0, 1] {
        let to_server = RouteConfig { net: tcp(1), gateway: router, hops: Some(1), priority: 0 };
        h.with_node(node, |engine, now| engine.route_add(now, to_server)).unwrap();
    }
    let to_clients =
        RouteConfig { net: tcp(0), gateway: routed_nid(1, 10), hops: Some(1), priority: 0 };
    h.with_node(3, |engine, now| engine.route_add(now, to_clients)).unwrap();
    assert_eq!(h.node(2).cpt_of_nid(&client, NiId(1)), 1);
    assert_eq!(h.node(2).cpt_of_nid(&other, NiId(1)), 0);
    h.run_for(Duration::from_secs(1));
    for bits in 0..8 {
        put(&mut h, 0, server, 300 + bits, 1000);
    }
    h.run_for(Duration::from_secs(5));
    let events = h.take_events(0);
    let acked = events.iter().filter(|e| e.kind == crate::engine::event::EventKind::Ack).count();
    assert_eq!(acked, 8, "every PUT was forwarded and acknowledged");
    let pools = h.node(2).router_pools();
    let small: Vec<_> = pools.iter().map(|set| (set[1].credits, set[1].min_credits)).collect();
    assert!(small[1].1 < 0, "client 1's PUTs waited for partition 1's buffer: {small:?}");
    assert!(small[0].1 >= 0, "nothing queued for partition 0's small buffer: {small:?}");
    assert_eq!((small[0].0, small[1].0), (1, 1), "both buffers are back");
    h.check();
}

/// MDs and MEs live in a partition, and their handles' cookies say which, as the kernel's
/// do (`lnet_cpt_of_cookie()`: the CPT right above the two type bits): a bound MD where it is
/// bound, an attached one where its ME's match table is. Response trackers wait per partition
/// and still expire in deadline order across them.
#[test]
fn mds_live_in_their_partition_and_trackers_expire_across_partitions() {
    let config =
        HarnessConfig { partitions: Partitions::new(4).unwrap(), ..HarnessConfig::default() };
    let mut h = Harness::new(config);
    h.discover_all();
    let cookie_cpt = |handle: crate::engine::md::MdHandle| (handle.0 >> 2) & 0x3;

    let source = |byte: u8| MdSpec::new(Memory::new(vec![byte; 8])).threshold(Threshold::Count(2));
    let md = h.bind(0, source(1).on_partition(2));
    assert_eq!((h.node(0).md_partition(md), cookie_cpt(md)), (Ok(2), 2));
    let refused = h.md_bind(0, source(2).on_partition(4), UnlinkMode::Unlink).unwrap_err();
    assert_eq!(refused.error, MdBindError::BadCpt { cpt: 4, count: 4 });
    assert_eq!(refused.memory.to_vec(), vec![2; 8]);

    let me = h
        .me_attach(
            1,
            PORTAL,
            ProcessId::ANY,
            BITS,
            0,
            UnlinkMode::Unlink,
            InsertPosition::Local { cpt: 3 },
        )
        .unwrap();
    let sink = MdSpec::new(Memory::new(vec![0; 8]))
        .threshold(Threshold::Count(1))
        .options(MdOptions::OP_PUT)
        .on_partition(1);
    let buffer = h.md_attach(1, me, sink, UnlinkMode::Unlink).unwrap();
    assert_eq!((h.node(1).md_partition(buffer), cookie_cpt(buffer)), (Ok(3), 3));
    assert_eq!(h.node(1).mds_by_partition()[3], 1);
    let target = ProcessId::new(node_nid(1), LNET_PID_LUSTRE);
    let put = |md, portal| PutRequest {
        md,
        ack: true,
        target,
        portal,
        match_bits: BITS,
        remote_offset: 0,
        hdr_data: 0,
        source: None,
    };
    let counted = |h: &Harness, node: usize, count: fn(&GlobalStats) -> u64| -> Vec<u64> {
        h.node(node).stats_by_partition().iter().map(count).collect()
    };
    let sent_before = counted(&h, 0, |c| c.send_count);
    let received_before = counted(&h, 1, |c| c.recv_count);
    h.put(0, &put(md, PORTAL)).unwrap();
    // The PUT lives in its MD's partition on the way out, and on the way in in the partition
    // its sender's NID hashes to on the receiving NI.
    assert_eq!(h.node(0).messages_by_partition(), [0, 0, 1, 0]);
    let home = h.node(1).cpt_of_nid(&node_nid(0), NiId(1)) as usize;
    assert_ne!(home, 0, "the story needs a home no default would give");
    while h.node(1).messages_by_partition().iter().sum::<usize>() == 0 {
        assert!(h.step(), "the PUT never arrived");
    }
    let mut receiving = vec![0; 4];
    receiving[home] = 1;
    assert_eq!(h.node(1).messages_by_partition(), receiving);
    h.drive();
    let delivered = h.take_events(1);
    assert!(delivered.iter().any(|event| event.md == buffer && event.mlength == 8));
    // Each node counts where it handled the message, as the kernel's `ln_counters[cpt]`;
    // `stats show` sums the partitions.
    let delta = |after: Vec<u64>, before: &[u64]| -> Vec<u64> {
        after.iter().zip(before).map(|(after, before)| after - before).collect()
    };
    assert_eq!(delta(counted(&h, 0, |c| c.send_count), &sent_before), [0, 0, 1, 0]);
    let received = delta(counted(&h, 1, |c| c.recv_count), &received_before);
    assert_eq!(received, receiving.iter().map(|&count| count as u64).collect::<Vec<_>>());
    let total = h.node(0).stats().send_count;
    assert_eq!(total, counted(&h, 0, |c| c.send_count).iter().sum::<u64>());
    assert!(h.node(0).stats_by_partition()[2].msgs_max >= 1);

    // PUTs to a portal nobody posted on are dropped; their senders' trackers expire, the
    // one on partition 3 (started first) before the one on partition 1.
    let first = h.bind(0, source(3).on_partition(3));
    h.put(0, &put(first, PORTAL + 1)).unwrap();
    h.run_for(Duration::from_secs(1));
    let second = h.bind(0, source(4).on_partition(1));
    h.put(0, &put(second, PORTAL + 1)).unwrap();
    h.take_events(0);
    h.run_for(Duration::from_secs(300));
    let unlinked: Vec<_> = h
        .take_events(0)
        .into_iter()
        .filter(|event| event.kind == EventKind::Unlink)
        .map(|event| event.md)
        .collect();
    assert_eq!(unlinked, [first, second]);
    assert_eq!(h.node(0).stats().response_timeout_count, 2);
    h.drive();
    h.assert_quiescent();
}

/// With each MD on the partition of the peer it serves (a client binding where the server's
/// NID hashes, a server posting `Local` where the client's does, as lnet_selftest's threads
/// do), a PUT with its ACK and a GET with its REPLY plan every message-path call of both nodes
/// on one partition: a runtime with a lock per partition would take one lock per call. An MD
/// on the other partition makes the calls that reach it plan two. Either way no call reaches a
/// partition its plan does not name (the harness checks that of every call, engine/audit.rs).
#[test]
fn an_rpc_with_its_mds_on_the_peers_partition_plans_one_partition_per_call() {
    let config =
        HarnessConfig { partitions: Partitions::new(2).unwrap(), ..HarnessConfig::default() };
    let mut h = Harness::new(config);
    h.discover_all();
    let client_cpt = h.node(0).cpt_of_nid(&node_nid(1), NiId(1));
    let server_cpt = h.node(1).cpt_of_nid(&node_nid(0), NiId(1));
    let rpc = |h: &mut Harness, client_md_cpt: u32, server_md_cpt: u32| {
        for node in 0..2 {
            h.node_mut(node).partition_audit();
        }
        let local = InsertPosition::Local { cpt: server_md_cpt };
        for (bits, options) in [(1, MdOptions::OP_PUT), (2, MdOptions::OP_GET)] {
            let me =
                h.me_attach(1, PORTAL, ProcessId::ANY, bits, 0, UnlinkMode::Unlink, local).unwrap();
            let buffer = MdSpec::new(Memory::new(vec![9; 8]))
                .threshold(Threshold::Count(1))
                .options(options);
            h.md_attach(1, me, buffer, UnlinkMode::Unlink).unwrap();
        }
        let target = ProcessId::new(node_nid(1), LNET_PID_LUSTRE);
        let source = MdSpec::new(Memory::new(vec![1; 8])).threshold(Threshold::Count(2));
        let md = h.bind(0, source.on_partition(client_md_cpt));
        let put = PutRequest {
            md,
            ack: true,
            target,
            portal: PORTAL,
            match_bits: 1,
            remote_offset: 0,
            hdr_data: 0,
            source: None,
        };
        h.put(0, &put).unwrap();
        let sink = MdSpec::new(Memory::new(vec![0; 8])).threshold(Threshold::Count(2));
        let md = h.bind(0, sink.on_partition(client_md_cpt));
        let get = GetRequest {
            md,
            target,
            portal: PORTAL,
            match_bits: 2,
            remote_offset: 0,
            source: None,
        };
        h.get(0, &get).unwrap();
        h.drive();
        let kinds: Vec<_> = h.take_events(0).iter().map(|event| event.kind).collect();
        assert!(kinds.contains(&EventKind::Ack) && kinds.contains(&EventKind::Reply), "{kinds:?}");
        h.take_events(1);
        [0, 1].map(|node| {
            let report = h.node_mut(node).partition_audit();
            assert!(report.crossings.is_empty(), "node {node}: {:?}", report.crossings);
            (report.plans, report.made_on_partitions)
        })
    };

    // Client: the PUT and the GET, taking their two transmits, their send completions, the
    // ACK, the REPLY and its receive completion. Server: the PUT and its receive completion,
    // the GET, taking the ACK's and the REPLY's transmits, and their send completions.
    // The server also attaches its two buffers (an ME and an MD each); the portal's first
    // ME fixes its match type, which is the node's. Every other call is made through
    // `&self` on its partition (`partition_call.rs`), the node part shared, as a runtime
    // locking partitions apart makes them.
    let [client, server] = rpc(&mut h, client_cpt, server_cpt);
    assert_eq!((client, server), (([9, 0, 0], 9), ([10, 0, 1], 10)));
    // The client's MDs on the other partition: every call of the client reaches both the MD's
    // partition and the one owning the server's peer NI (its credits, health, statistics).
    let [client, server] = rpc(&mut h, 1 - client_cpt, server_cpt);
    assert_eq!((client, server), (([0, 9, 0], 9), ([11, 0, 0], 11)));
    // The server's buffers on the other partition: its own table has none for the requests,
    // so their match would take the rotor (the whole node); what reaches the buffers after
    // (the PUT's completion, the REPLY's transmit and completion) plans both partitions.
    let [client, server] = rpc(&mut h, client_cpt, 1 - server_cpt);
    assert_eq!((client, server), (([9, 0, 0], 9), ([6, 3, 2], 9)));
    h.assert_quiescent();
}

/// A receive's whole life through `&self` on a node of two partitions, as a runtime's
/// partition thread makes it: the header, the payload lent and given back, the rest written,
/// and the completion, each on the partition of the peer it came from, the node part shared.
#[test]
fn a_receive_runs_on_its_peers_partition_through_shared_calls() {
    use crate::engine::health::HealthStatus;
    use crate::engine::outputs::RecvAction;
    use crate::wire::header::{Body, Header, WireHandle};

    let config =
        HarnessConfig { partitions: Partitions::new(2).unwrap(), ..HarnessConfig::default() };
    let mut h = Harness::new(config);
    h.discover_all();
    let cpt = h.node(1).cpt_of_nid(&node_nid(0), NiId(1));
    let local = InsertPosition::Local { cpt };
    let me = h.me_attach(1, PORTAL, ProcessId::ANY, BITS, 0, UnlinkMode::Unlink, local).unwrap();
    let buffer = MdSpec::new(Memory::new(vec![0; 8]))
        .threshold(Threshold::Count(1))
        .options(MdOptions::OP_PUT);
    let md = h.md_attach(1, me, buffer, UnlinkMode::Retain).unwrap();
    let header = Header {
        dest_nid: node_nid(1),
        src_nid: node_nid(0),
        dest_pid: LNET_PID_LUSTRE,
        src_pid: LNET_PID_LUSTRE,
        payload_length: 8,
        body: Body::Put {
            ack_wmd: WireHandle::NONE,
            match_bits: BITS,
            hdr_data: 0,
            ptl_index: PORTAL,
            offset: 0,
        },
    };
    let node = h.node_mut(1);
    node.partition_audit();
    let now = node.now();
    let action = node.try_handle_header(now, NiId(1), node_nid(0), &header);
    let Some(RecvAction::Deliver { rx, length: 8, .. }) = action else {
        panic!("expected a delivery made on the partition: {action:?}");
    };
    let lent = node.try_rx_lend(rx).expect("on the partition").unwrap();
    let mut lent = lent.expect("a used-up MD is lent");
    assert!(lent.write_at(0, b"abcd"));
    let given = node.try_rx_give_back(rx, lent);
    assert!(matches!(given, Ok(Ok(()))), "given back on the partition");
    node.try_rx_write(rx, 4, b"efgh").expect("on the partition").unwrap();
    node.try_handle_recv_done(now, rx, HealthStatus::Ok).expect("on the partition").unwrap();
    assert_eq!(node.md_memory(md).unwrap().to_vec(), b"abcdefgh");
    let report = node.partition_audit();
    assert!(report.crossings.is_empty(), "{:?}", report.crossings);
    // The header and the completion are the calls the audit holds to a plan; every call
    // above returned `Some`: it was made on the partition.
    assert_eq!(report.made_on_partitions, 2);
    // An MD bound on the other partition, through `&self`, lives there.
    let other = 1 - cpt;
    let spec = MdSpec::new(Memory::new(vec![1; 4])).on_partition(other);
    let bound = node.try_md_bind(spec, UnlinkMode::Unlink);
    let Ok(Ok(md)) = bound else { panic!("not bound on its partition") };
    assert_eq!(node.md_partition(md), Ok(other));
    node.check_invariants().unwrap();
}

/// How an NI's CPTs join its net's set, which `lnet_nid2cpt(nid, NULL)` hashes over
/// (192.168.1.10@tcp sums to 373: over [2,3] CPT 3, over all four 1). An NI given CPTs by a
/// dynamic add joins only a net it creates: the kernel allocates it on a net of its own and
/// frees that when the net exists (`lnet_dyn_add_ni()`). An NI given none, bound when it
/// starts, always joins (`lnet_ni_set_default_cpts()`), as one from `networks=` does.
#[test]
fn an_explicit_ni_added_to_a_net_leaves_its_set_alone() {
    use crate::engine::CptsJoin;
    use crate::engine::node::{Engine, EngineConfig};

    let ni = |nid: &str, cpts: CptList, join: CptsJoin| NiConfig {
        cpts,
        cpts_join: join,
        ..NiConfig::new(nid.parse().unwrap(), LndKind::Tcp)
    };
    let near = CptList::new(&[2, 3]).unwrap();
    let config = EngineConfig {
        partitions: Partitions::new(4).unwrap(),
        ..EngineConfig::new(7, LNET_PID_LUSTRE, vec![ni("10.0.0.1@tcp", near, CptsJoin::Default)])
    };
    let mut engine = Engine::new(config).unwrap();
    let peer: Nid = "192.168.1.10@tcp".parse().unwrap();
    assert_eq!(engine.cpt_of_nid_without_ni(&peer), 3);
    let now = Time::ZERO;
    engine.add_ni(now, ni("10.0.0.2@tcp", CptList::ALL, CptsJoin::Explicit)).unwrap();
    assert_eq!(engine.cpt_of_nid_without_ni(&peer), 3, "the explicit NI left the set alone");
    engine.add_ni(now, ni("10.0.0.3@tcp", CptList::ALL, CptsJoin::Parsed)).unwrap();
    assert_eq!(engine.cpt_of_nid_without_ni(&peer), 1, "a parsed NI on all lifts it");
    // An explicit NI creating its net sets that net's set.
    engine.add_ni(now, ni("10.0.0.1@tcp1", near, CptsJoin::Explicit)).unwrap();
    let other: Nid = "192.168.1.12@tcp1".parse().unwrap();
    let over_all = Partitions::new(4).unwrap().cpt_of_nid(&other, None);
    let over_near = Partitions::new(4).unwrap().cpt_of_nid(&other, Some(&[2, 3]));
    assert_ne!(over_all, over_near, "the test needs the two hashes apart");
    assert_eq!(engine.cpt_of_nid_without_ni(&other), over_near);
}
