//! CPU partition stories: messages land on the partition the kernel's NID hash gives, over
//! the node's partitions or an NI's subset of them, and credits come back whole.

use super::{Harness, HarnessConfig, node_nid};
use crate::engine::cpt::{CptError, CptList, Partitions};
use crate::engine::error::ConfigError;
use crate::engine::md::{MdOptions, MdSpec, Threshold};
use crate::engine::me::{LNET_PID_LUSTRE, ProcessId};
use crate::engine::memory::Memory;
use crate::engine::ni::{LndKind, NiConfig, NiId};
use crate::engine::node::PutRequest;
use crate::engine::tunables::NetTunables;
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
    // Every NI's tx credits are whole again.
    for node in 0..4 {
        let credits = h.node(node).ni_stats(NiId(1)).unwrap().tx_credits.unwrap();
        assert_eq!((credits.available, credits.max), (2, 2), "node {node}");
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
