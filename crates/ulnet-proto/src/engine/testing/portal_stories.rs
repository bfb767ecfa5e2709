//! Portal stories on nodes with several CPU partitions: where MEs go (`Local` to its
//! partition, `Before`/`After` to the portal's fixed table, a unique portal by the NID hash),
//! which table a received PUT tries first, the steal from another partition's table on a lazy
//! portal and the drop on one that is not, and one partition behaving as before.
//!
//! Harness node `i` is 10.0.0.(i+1)@tcp (NID byte sum 13 + i): over 2 partitions nodes 0 and
//! 2 hash to partition 1, nodes 1 and 3 to partition 0. Node 3 is the server throughout.

use std::time::Duration;

use super::{FABRIC_NI, Harness, HarnessConfig, node_nid, plain_put};
use crate::addr::{LndType, Net, Nid};
use crate::engine::cpt::Partitions;
use crate::engine::error::MeAttachError;
use crate::engine::event::EventKind;
use crate::engine::md::{MdOptions, MdSpec, Threshold, UnlinkMode};
use crate::engine::me::{InsertPosition, LNET_PID_LUSTRE, ProcessId};
use crate::engine::memory::Memory;
use crate::engine::ping::PingCompletion;
use crate::engine::portal::{MatchTableStats, RESERVED_PORTAL};
use crate::engine::routes::RouteConfig;
use crate::engine::tunables::{PortalRotor, Tunables};

const PORTAL: u32 = 5;
const BITS: u64 = 0x51;
const SERVER: usize = 3;

fn harness(partitions: u32) -> Harness {
    let config = HarnessConfig {
        nodes: 4,
        partitions: Partitions::new(partitions).unwrap(),
        ..HarnessConfig::default()
    };
    let mut h = Harness::new(config);
    h.discover_all();
    h
}

/// A one-shot 8-byte buffer for `bits` from anyone, attached at `position`; its events carry
/// `tag`.
fn post_at(h: &mut Harness, position: InsertPosition, bits: u64, tag: u64) {
    let me =
        h.me_attach(SERVER, PORTAL, ProcessId::ANY, bits, 0, UnlinkMode::Unlink, position).unwrap();
    let spec = MdSpec::new(Memory::new(vec![0; 8]))
        .threshold(Threshold::Count(1))
        .options(MdOptions::OP_PUT)
        .user_ptr(tag);
    h.md_attach(SERVER, me, spec, UnlinkMode::Unlink).unwrap();
}

fn send(h: &mut Harness, from: usize, bits: u64) {
    send_to(h, from, node_nid(SERVER), bits);
}

fn send_to(h: &mut Harness, from: usize, to: Nid, bits: u64) {
    let md = h.bind(from, MdSpec::new(Memory::new(vec![from as u8; 8])));
    let target = ProcessId::new(to, LNET_PID_LUSTRE);
    h.put(from, &plain_put(md, target, PORTAL, bits)).unwrap();
}

/// A PUT from each of `senders` in turn, each driven to the end, then nothing left in flight;
/// the server's PUT events' tags, in order.
fn send_in_turn(h: &mut Harness, senders: &[usize]) -> Vec<u64> {
    for &from in senders {
        send(h, from, BITS);
        h.drive();
    }
    h.assert_quiescent();
    put_tags(h)
}

/// The server's PUT events' tags, in order.
fn put_tags(h: &mut Harness) -> Vec<u64> {
    let events = h.take_events(SERVER);
    events.iter().filter(|e| e.kind == EventKind::Put).map(|e| e.user_ptr).collect()
}

/// (entries, matched, stolen) by partition.
fn tables(h: &Harness) -> Vec<(usize, u64, u64)> {
    let tables = h.node(SERVER).portal_tables(PORTAL).unwrap();
    tables
        .iter()
        .map(|&MatchTableStats { entries, matched, stolen }| (entries, matched, stolen))
        .collect()
}

/// lnet_selftest's way: buffers posted per partition with `LNET_INS_LOCAL`; a request is
/// matched on the buffers of the partition that received it, and one that finds none waits
/// on the lazy portal for the next buffer, wherever it is posted.
#[test]
fn local_buffers_take_the_requests_of_their_partition() {
    let mut h = harness(2);
    assert_eq!(h.node(SERVER).cpt_of_nid(&node_nid(1), FABRIC_NI), 0);
    assert_eq!(h.node(SERVER).cpt_of_nid(&node_nid(0), FABRIC_NI), 1);
    assert_eq!(h.node(SERVER).cpt_of_nid(&node_nid(2), FABRIC_NI), 1);
    h.set_lazy_portal(SERVER, PORTAL).unwrap();
    for cpt in [0, 1, 0, 1] {
        post_at(&mut h, InsertPosition::Local { cpt }, BITS, u64::from(cpt));
    }
    assert_eq!(tables(&h), [(2, 0, 0), (2, 0, 0)]);
    for from in [1, 0, 1, 2] {
        send(&mut h, from, BITS);
        h.drive();
    }
    assert_eq!(put_tags(&mut h), [0, 1, 0, 1], "each on its sender's partition");
    assert_eq!(tables(&h), [(0, 2, 0), (0, 2, 0)]);
    // No buffer anywhere: the PUT waits, and the next buffer takes it.
    send(&mut h, 1, BITS);
    h.drive();
    assert_eq!(h.node(SERVER).delayed_message_count(), 1);
    post_at(&mut h, InsertPosition::Local { cpt: 1 }, BITS, 1);
    h.drive();
    h.assert_quiescent();
    assert_eq!(put_tags(&mut h), [1]);
    assert_eq!(tables(&h), [(0, 2, 0), (0, 3, 0)]);
}

/// A partition whose table has buffers, none for these bits: on a lazy portal the PUT steals
/// one of another partition's (`lnet_ptl_match_delay()`); on a portal that is not lazy it is
/// dropped, as the kernel drops it, and the other partition's buffer stays.
#[test]
fn a_miss_steals_on_a_lazy_portal_and_drops_otherwise() {
    let mut h = harness(2);
    post_at(&mut h, InsertPosition::Local { cpt: 0 }, BITS + 1, 0);
    post_at(&mut h, InsertPosition::Local { cpt: 1 }, BITS, 1);
    let dropped = h.node(SERVER).stats().drop_count;
    send(&mut h, 1, BITS);
    h.drive();
    assert_eq!(put_tags(&mut h), Vec::<u64>::new());
    assert_eq!(h.node(SERVER).stats().drop_count, dropped + 1);
    assert_eq!(tables(&h), [(1, 0, 0), (1, 0, 0)]);

    h.set_lazy_portal(SERVER, PORTAL).unwrap();
    send(&mut h, 1, BITS);
    h.drive();
    h.assert_quiescent();
    assert_eq!(put_tags(&mut h), [1]);
    assert_eq!(tables(&h), [(1, 0, 0), (0, 1, 1)]);
}

/// Posters without affinity (`Before`/`After`) share the portal's fixed table (5 % 2 = 1), and
/// PUTs received on either partition find it: an empty first choice maps to the active table.
#[test]
fn before_and_after_share_the_fixed_table() {
    let mut h = harness(2);
    post_at(&mut h, InsertPosition::After, BITS, 7);
    post_at(&mut h, InsertPosition::Before, BITS, 8);
    assert_eq!(tables(&h), [(0, 0, 0), (2, 0, 0)]);
    assert_eq!(send_in_turn(&mut h, &[1, 0]), [8, 7]);
    assert_eq!(tables(&h), [(0, 0, 0), (0, 2, 0)]);
}

/// On the server's unique portal, a one-shot buffer for node 1 (tag 10), then one for node 0
/// (tag 20).
fn attach_unique_from_nodes_1_and_0(h: &mut Harness) {
    for (from, tag) in [(1, 10), (0, 20)] {
        let id = ProcessId::new(node_nid(from), LNET_PID_LUSTRE);
        let me =
            h.me_attach(SERVER, PORTAL, id, BITS, 0, UnlinkMode::Unlink, InsertPosition::After);
        let spec = MdSpec::new(Memory::new(vec![0; 8]))
            .threshold(Threshold::Count(1))
            .options(MdOptions::OP_PUT)
            .user_ptr(tag);
        h.md_attach(SERVER, me.unwrap(), spec, UnlinkMode::Unlink).unwrap();
    }
}

/// A unique portal's ME lives in the table of its NID's hash over all partitions, and a PUT
/// looks in its initiator's.
#[test]
fn a_unique_portal_hashes_the_initiator() {
    let mut h = harness(2);
    attach_unique_from_nodes_1_and_0(&mut h);
    assert_eq!(tables(&h), [(1, 0, 0), (1, 0, 0)]);
    assert_eq!(send_in_turn(&mut h, &[0, 1]), [20, 10]);
    assert_eq!(tables(&h), [(0, 1, 0), (0, 1, 0)]);
}

/// On a net bound to a subset a unique portal's ME and a PUT's initiator both map through the
/// net's CPT set (`lnet_nid2cpt(nid, NULL)`): 4 partitions, every NI on [2,3], node 0 (byte
/// sum 13) at index 13 mod 2 = 1, CPT 3, node 1 (14) at CPT 2, where a hash over all four
/// would give 1 and 2.
#[test]
fn a_unique_portal_on_a_bound_net_hashes_over_the_nets_cpts() {
    let config = HarnessConfig {
        nodes: 4,
        partitions: Partitions::new(4).unwrap(),
        ni_cpts: crate::engine::cpt::CptList::new(&[2, 3]).unwrap(),
        ..HarnessConfig::default()
    };
    let mut h = Harness::new(config);
    h.discover_all();
    attach_unique_from_nodes_1_and_0(&mut h);
    assert_eq!(tables(&h), [(0, 0, 0), (0, 0, 0), (1, 0, 0), (1, 0, 0)]);
    assert_eq!(send_in_turn(&mut h, &[0, 1]), [20, 10]);
    assert_eq!(tables(&h), [(0, 0, 0), (0, 0, 0), (0, 1, 0), (0, 1, 0)]);
}

/// One partition: one table, `Local { cpt: 0 }` is `After`, as before partitions; a partition
/// the node does not have is refused.
#[test]
fn one_partition_keeps_one_table() {
    let mut h = harness(1);
    post_at(&mut h, InsertPosition::Local { cpt: 0 }, BITS, 1);
    post_at(&mut h, InsertPosition::After, BITS, 2);
    post_at(&mut h, InsertPosition::Before, BITS, 3);
    for _ in 0..3 {
        send(&mut h, 1, BITS);
        h.drive();
    }
    h.assert_quiescent();
    assert_eq!(put_tags(&mut h), [3, 1, 2]);
    assert_eq!(tables(&h), [(0, 3, 0)]);
    let refused = h.me_attach(
        SERVER,
        PORTAL,
        ProcessId::ANY,
        BITS,
        0,
        UnlinkMode::Unlink,
        InsertPosition::Local { cpt: 1 },
    );
    assert_eq!(refused, Err(MeAttachError::BadCpt { cpt: 1, count: 1 }));
    let mut two = harness(2);
    let refused = two.me_attach(
        SERVER,
        PORTAL,
        ProcessId::ANY,
        BITS,
        0,
        UnlinkMode::Unlink,
        InsertPosition::Local { cpt: 2 },
    );
    assert_eq!(refused, Err(MeAttachError::BadCpt { cpt: 2, count: 2 }));
}

/// `10.<number>.0.<host>@tcp<number>`.
fn routed_nid(number: u16, host: u32) -> Nid {
    Nid::new4(Net::new(LndType::SOCK, number), 0x0a00_0000 | (u32::from(number) << 16) | host)
}

/// Clients 0 and 1 on tcp reach server 3 on tcp1 through router 2; every node has two
/// partitions and `rotor`. The server holds two one-shot buffers on each partition, tagged
/// with it. Returns the tags of the PUTs of clients 0, 1, 0, 1, in order.
fn routed_tags(rotor: PortalRotor) -> Vec<u64> {
    let node_nids = vec![
        vec![routed_nid(0, 1)],
        vec![routed_nid(0, 2)],
        vec![routed_nid(0, 10), routed_nid(1, 10)],
        vec![routed_nid(1, 100)],
    ];
    let config = HarnessConfig {
        nodes: node_nids.len(),
        node_nids,
        partitions: Partitions::new(2).unwrap(),
        tunables: Tunables { portal_rotor: rotor, ..Tunables::default() },
        ..HarnessConfig::default()
    };
    let mut h = Harness::new(config);
    h.with_node(2, |node, now| node.set_routing(now, true, true)).unwrap();
    for client in [0, 1] {
        let route = RouteConfig {
            net: Net::new(LndType::SOCK, 1),
            gateway: routed_nid(0, 10),
            hops: Some(1),
            priority: 0,
        };
        h.with_node(client, |node, now| node.route_add(now, route)).unwrap();
    }
    let back =
        RouteConfig { net: Net::TCP, gateway: routed_nid(1, 10), hops: Some(1), priority: 0 };
    h.with_node(SERVER, |node, now| node.route_add(now, back)).unwrap();
    // The server parses everything on the router's partition (10.1.0.10@tcp1: byte sum 24,
    // partition 0); the initiators hash apart (13: partition 1, 14: partition 0).
    let server = h.node(SERVER);
    assert_eq!(server.cpt_of_nid(&routed_nid(1, 10), FABRIC_NI), 0);
    assert_eq!(server.cpt_of_nid(&routed_nid(0, 1), FABRIC_NI), 1);
    assert_eq!(server.cpt_of_nid(&routed_nid(0, 2), FABRIC_NI), 0);
    for cpt in [0, 1, 0, 1] {
        post_at(&mut h, InsertPosition::Local { cpt }, BITS, u64::from(cpt));
    }
    for from in [0, 1, 0, 1] {
        send_to(&mut h, from, routed_nid(1, 100), BITS);
        h.run_for(std::time::Duration::from_secs(1));
    }
    let tags = put_tags(&mut h);
    assert_eq!(tables(&h).iter().map(|table| table.1).sum::<u64>(), 4);
    tags
}

/// Routed PUTs (source and destination on different nets) under each `portal_rotor`: 3 (the
/// default) hashes the initiator, 2 and 1 rotate, 0 keeps them on the partition that parsed
/// them (the router's) until its buffers are gone, then maps them to the other.
#[test]
fn routed_puts_follow_the_rotor() {
    assert_eq!(routed_tags(PortalRotor::RoutedHash), [1, 0, 1, 0]);
    assert_eq!(routed_tags(PortalRotor::RoutedRoundRobin), [0, 1, 0, 1]);
    assert_eq!(routed_tags(PortalRotor::On), [0, 1, 0, 1]);
    assert_eq!(routed_tags(PortalRotor::Off), [0, 0, 1, 1]);
}

/// Whether a ping from `from` to the server is answered.
fn ping_answered(h: &mut Harness, from: usize) -> bool {
    let target = ProcessId::new(node_nid(SERVER), LNET_PID_LUSTRE);
    h.ping(from, target, Duration::from_secs(1), None).unwrap();
    h.drive();
    let completions = h.take_completions(from);
    match completions.as_slice() {
        [PingCompletion::Ping(result)] => result.outcome.is_ok(),
        other => panic!("one ping completion expected, got {other:?}"),
    }
}

/// LNet's own portal is a wildcard portal like any other: a user's `Local` buffer there enables
/// its partition's table, so a ping GET parsed on that partition looks only in it, misses the
/// ping target (in the portal's fixed table, 0 % 2 = 0) and is dropped, as the kernel drops
/// it (lib-ptl.c `lnet_mt_of_match()`, `lnet_mt_match_md()`: a GET is neither delayed nor
/// stolen). Pings parsed on the other partition are answered, and unlinking the buffer heals
/// it. A peer recovering this node hears from it only now and then, so its recovery never
/// ends: why the engine fuzz posts no `Local` ME on portal 0.
#[test]
fn a_local_buffer_on_the_reserved_portal_hides_the_ping_target_from_its_partition() {
    let mut h = harness(2);
    let me = h
        .me_attach(
            SERVER,
            RESERVED_PORTAL,
            ProcessId::ANY,
            1,
            0,
            UnlinkMode::Unlink,
            InsertPosition::Local { cpt: 1 },
        )
        .unwrap();
    let spec = MdSpec::new(Memory::new(vec![0; 8])).options(MdOptions::OP_PUT);
    let md = h.md_attach(SERVER, me, spec, UnlinkMode::Unlink).unwrap();
    let dropped = h.node(SERVER).stats().drop_count;
    // Node 1 hashes to partition 0, node 0 to partition 1.
    assert!(ping_answered(&mut h, 1));
    assert!(!ping_answered(&mut h, 0));
    assert_eq!(h.node(SERVER).stats().drop_count, dropped + 1);
    h.md_unlink(SERVER, md).unwrap();
    h.drive();
    assert!(ping_answered(&mut h, 0), "partition 1's empty table maps to the targets'");
    h.assert_quiescent();
}
