//! Stories about UDSP rules (`policies.rs`, docs/protocol/semantics.md §9): which local NI
//! and which peer NI carry traffic once rules are added, deleted, and met by NIs and peer
//! NIs that come later.

use super::multirail_stories::{EventLog, assert_complete, nids_of, start, tally, tcp_nid};
use super::{Harness, HarnessConfig, rail_nid};
use crate::addr::{Net, Nid};
use crate::engine::ni::MAX_SELECTION_PRIORITY;
use crate::engine::policies::{UdspAddError, UdspConstructInfo, UdspNotFound, UdspRule};
use crate::wire::header::{Body, Header};

/// Two nodes with the given tcp NIDs, discovered (so multi-rail).
fn pair(a: &[Nid], b: &[Nid]) -> Harness {
    let config =
        HarnessConfig { node_nids: vec![a.to_vec(), b.to_vec()], ..HarnessConfig::default() };
    let mut h = Harness::new(config);
    h.discover_all();
    h
}

/// `lnetctl udsp add` on node 0.
fn add(h: &mut Harness, src: Option<&str>, dst: Option<&str>, priority: Option<u32>) {
    add_at(h, src, dst, priority, None);
}

fn add_at(
    h: &mut Harness,
    src: Option<&str>,
    dst: Option<&str>,
    priority: Option<u32>,
    index: Option<usize>,
) {
    let rule = UdspRule::from_lnetctl(src, dst, None, priority).unwrap();
    h.with_node(0, |node, _| node.udsp_add(rule, index)).unwrap();
}

fn del(h: &mut Harness, index: Option<usize>) {
    h.with_node(0, |node, _| node.udsp_del(index)).unwrap();
}

/// Sends `count` PUTs (with ACK) from node 0 to node 1 and returns the headers node 0 sent.
fn send(h: &mut Harness, log: &mut EventLog, count: u64) -> Vec<Header> {
    h.take_transmitted(0);
    let batch = start(h, 0, 1, count, 16, false);
    h.drive();
    assert_complete(h, log, &batch);
    h.take_transmitted(0)
}

/// The local NIs PUTs left from.
fn sources(h: &mut Harness, log: &mut EventLog, count: u64) -> Vec<Nid> {
    let mut nids = nids_of(&tally(&send(h, log, count), false));
    nids.sort_by(Nid::cmp_wire);
    nids
}

/// The peer NIs PUTs went to.
fn destinations(h: &mut Harness, log: &mut EventLog, count: u64) -> Vec<Nid> {
    let mut nids = nids_of(&tally(&send(h, log, count), true));
    nids.sort_by(Nid::cmp_wire);
    nids
}

/// The (local NI, peer NI) pairs PUTs used.
fn paths(headers: &[Header]) -> Vec<(Nid, Nid)> {
    let mut pairs: Vec<(Nid, Nid)> = headers
        .iter()
        .filter(|header| matches!(header.body, Body::Put { .. }))
        .map(|header| (header.src_nid, header.dest_nid))
        .collect();
    pairs.sort_by(|x, y| x.0.cmp_wire(&y.0).then(x.1.cmp_wire(&y.1)));
    pairs.dedup();
    pairs
}

fn local_info(h: &Harness, nid: Nid) -> UdspConstructInfo {
    h.node(0).udsp_info(nid, false).unwrap()
}

fn peer_info(h: &Harness, nid: Nid) -> UdspConstructInfo {
    h.node(0).udsp_info(nid, true).unwrap()
}

const MAX: u32 = MAX_SELECTION_PRIORITY;

/// `--src NID --priority`: the NI with the best priority carries everything; equal
/// priorities share; rule 0 wins where rules overlap; a deleted rule reverts what it matched
/// (to the default, even where another rule also matches, until the next addition); an NI
/// that comes up later takes the rules that name it.
#[test]
fn source_nid_rules_choose_the_local_ni() {
    let a = [tcp_nid(0x0a00_0001), tcp_nid(0x0a00_0101), tcp_nid(0x0a00_0201)];
    let b = [tcp_nid(0x0a00_0002), tcp_nid(0x0a00_0102)];
    let mut h = pair(&a, &b);
    let mut log = EventLog::default();
    assert_eq!(sources(&mut h, &mut log, 12), a);

    add(&mut h, Some("10.0.1.1@tcp"), None, Some(0));
    assert_eq!(sources(&mut h, &mut log, 12), [a[1]]);
    assert_eq!((local_info(&h, a[1]).nid_priority, local_info(&h, a[0]).nid_priority), (0, MAX));
    // A second rule at index 0 gives another NI the same priority: they share.
    add_at(&mut h, Some("10.0.2.1@tcp"), None, Some(0), Some(0));
    assert_eq!(sources(&mut h, &mut log, 12), [a[1], a[2]]);
    // A range rule appended: the two NIs it shares with rule 0 and 1 keep theirs (rule 0
    // wins), the first NI gets 3.
    add(&mut h, Some("10.0.*.1@tcp"), None, Some(3));
    let priorities = |h: &Harness| a.map(|nid| local_info(h, nid).nid_priority);
    assert_eq!(priorities(&h), [3, 0, 0]);
    // Deleting rule 0 reverts its NI to the default although rule 2 matches it too.
    del(&mut h, Some(0));
    assert_eq!(priorities(&h), [3, 0, MAX]);
    assert_eq!(sources(&mut h, &mut log, 12), [a[1]]);
    // The next addition applies every rule again.
    add(&mut h, None, Some("10.0.0.2@tcp"), Some(1));
    assert_eq!(priorities(&h), [3, 0, 3]);
    // Same criteria, new priority: the rule changes in place.
    add(&mut h, Some("10.0.1.1@tcp"), None, Some(9));
    assert_eq!(priorities(&h), [3, 9, 3]);
    assert_eq!(h.node(0).udsp_rules().len(), 3);
    let again = UdspRule::from_lnetctl(Some("10.0.1.1@tcp"), None, None, Some(9)).unwrap();
    assert_eq!(h.with_node(0, |node, _| node.udsp_add(again, None)), Err(UdspAddError::Exists));
    assert_eq!(sources(&mut h, &mut log, 12), [a[0], a[2]]);

    // An NI that comes up later is stamped by the rules that name it (rule 0 winning over
    // the range rule).
    add_at(&mut h, Some("10.0.3.1@tcp"), None, Some(0), Some(0));
    let late = tcp_nid(0x0a00_0301);
    h.add_ni(0, late);
    h.drive();
    assert_eq!(local_info(&h, late).nid_priority, 0);
    assert_eq!(sources(&mut h, &mut log, 12), [late]);

    del(&mut h, None);
    assert!(h.node(0).udsp_rules().is_empty());
    assert_eq!(priorities(&h), [MAX; 3]);
    assert_eq!(h.with_node(0, |node, _| node.udsp_del(Some(0))), Err(UdspNotFound(0)));
    assert_eq!(sources(&mut h, &mut log, 16), [a[0], a[1], a[2], late]);
}

/// Net rules: `--src NET` orders local nets, `--dst NET` orders the peer's nets, and the
/// peer net's priority is compared before the local net's.
#[test]
fn net_rules_choose_the_net() {
    let config = HarnessConfig { rails: 2, ..HarnessConfig::default() };
    let mut h = Harness::new(config);
    h.discover_all();
    let mut log = EventLog::default();
    let (tcp, tcp1) = (rail_nid(0, 0), rail_nid(0, 1));
    assert_eq!(sources(&mut h, &mut log, 8), [tcp, tcp1]);

    add(&mut h, Some("tcp1"), None, Some(2));
    assert_eq!(sources(&mut h, &mut log, 8), [tcp1]);
    let stamped = UdspConstructInfo { net_priority: 2, nid_priority: MAX, ..Default::default() };
    assert_eq!(local_info(&h, tcp1), stamped);
    assert_eq!(local_info(&h, tcp).net_priority, MAX);

    add(&mut h, None, Some("tcp"), Some(5));
    assert_eq!(sources(&mut h, &mut log, 8), [tcp]);
    let peer = rail_nid(1, 0);
    assert_eq!((peer_info(&h, peer).net_priority, peer_info(&h, peer).nid_priority), (5, MAX));
    assert_eq!(peer_info(&h, rail_nid(1, 1)).net_priority, MAX);

    // A net rule names net number 0 only without numbers: `tcp` is not `tcp1`.
    del(&mut h, None);
    add(&mut h, Some("tcp[1-3]"), None, Some(0));
    assert_eq!(sources(&mut h, &mut log, 8), [tcp1]);
}

/// `--dst NID --priority`: the peer NI with the best priority carries everything; a peer
/// NI learnt later (pushed by the peer) is stamped when it is attached.
#[test]
fn destination_nid_rules_choose_the_peer_ni() {
    let a = [tcp_nid(0x0a00_0001)];
    let b = [tcp_nid(0x0a00_0002), tcp_nid(0x0a00_0102)];
    let mut h = pair(&a, &b);
    let mut log = EventLog::default();
    assert_eq!(destinations(&mut h, &mut log, 10), b);

    add(&mut h, None, Some("10.0.1.2@tcp"), Some(1));
    assert_eq!(destinations(&mut h, &mut log, 10), [b[1]]);
    assert_eq!(peer_info(&h, b[1]).nid_priority, 1);

    // A rule for a NID the peer does not have yet; the peer adds it and pushes.
    add(&mut h, None, Some("10.0.5.*@tcp"), Some(0));
    let late = tcp_nid(0x0a00_0502);
    h.add_ni(1, late);
    h.drive();
    assert_eq!(h.node(0).peer_info(b[0]).unwrap().nis.len(), 3);
    assert_eq!(peer_info(&h, late).nid_priority, 0);
    assert_eq!(destinations(&mut h, &mut log, 10), [late]);
}

/// `--src NID --dst NID`: the peer NI prefers the source NI. With one local NI in use (a
/// priority rule), its messages alternate over the peer's NIs; a pair rule makes them all
/// go to the peer NI that prefers it.
#[test]
fn nid_pair_rules_pin_peer_nis_to_local_nis() {
    let a = [tcp_nid(0x0a00_0001), tcp_nid(0x0a00_0101)];
    let b = [tcp_nid(0x0a00_0002), tcp_nid(0x0a00_0102)];
    let mut h = pair(&a, &b);
    let mut log = EventLog::default();
    add(&mut h, Some("10.0.1.1@tcp"), None, Some(0));
    assert_eq!(paths(&send(&mut h, &mut log, 20)), [(a[1], b[0]), (a[1], b[1])]);

    add(&mut h, Some("10.0.1.1@tcp"), Some("10.0.0.2@tcp"), None);
    assert_eq!(peer_info(&h, b[0]).preferred_sources, [a[1]]);
    assert!(peer_info(&h, b[1]).preferred_sources.is_empty());
    assert_eq!(paths(&send(&mut h, &mut log, 20)), [(a[1], b[0])]);

    // A net destination reaches every peer NI of the net that exists now; the earlier rule
    // still wins for the peer NI it names.
    add(&mut h, Some("10.0.0.1@tcp"), Some("tcp"), None);
    assert_eq!(peer_info(&h, b[0]).preferred_sources, [a[1]]);
    assert_eq!(peer_info(&h, b[1]).preferred_sources, [a[0]]);
    // A source given as a net names no NI (local NIs are matched by NID): no change.
    add(&mut h, Some("tcp"), Some("10.0.0.2@tcp"), None);
    assert_eq!(peer_info(&h, b[0]).preferred_sources, [a[1]]);
    assert_eq!(h.node(0).udsp_rules().len(), 4);

    // Deleting a pair rule clears the lists it matched.
    del(&mut h, Some(1));
    assert!(peer_info(&h, b[0]).preferred_sources.is_empty());
    assert_eq!(peer_info(&h, b[1]).preferred_sources, [a[0]]);
    assert_eq!(paths(&send(&mut h, &mut log, 20)), [(a[1], b[0]), (a[1], b[1])]);
    del(&mut h, None);
    assert!(peer_info(&h, b[1]).preferred_sources.is_empty());
}

/// A non-multi-rail peer NI takes one preferred NID, and a rule's replaces the one traffic
/// set: from then on every message to it leaves from the rule's NI.
#[test]
fn a_pair_rule_moves_a_non_multi_rail_peer_to_its_source() {
    let a = [tcp_nid(0x0a00_0001), tcp_nid(0x0a00_0101)];
    let b = [tcp_nid(0x0a00_0002)];
    let config =
        HarnessConfig { node_nids: vec![a.to_vec(), b.to_vec()], ..HarnessConfig::default() };
    let mut h = Harness::new(config);
    let mut quiet = *h.node(1).tunables();
    quiet.discovery = false;
    h.with_node(1, |node, now| node.set_tunables(now, quiet)).unwrap();
    h.discover_all();
    assert!(!h.node(0).peer_info(b[0]).unwrap().multi_rail());
    let mut log = EventLog::default();
    let first = sources(&mut h, &mut log, 6);
    assert_eq!(first.len(), 1);
    let other = if first[0] == a[0] { a[1] } else { a[0] };

    let text = if other == a[0] { "10.0.0.1@tcp" } else { "10.0.1.1@tcp" };
    add(&mut h, Some("10.0.*.1@tcp"), Some("10.0.0.2@tcp"), None);
    // Both local NIs match; a non-multi-rail peer NI keeps the first only.
    assert_eq!(peer_info(&h, b[0]).preferred_sources, [a[0]]);
    del(&mut h, None);
    add(&mut h, Some(text), Some("10.0.0.2@tcp"), None);
    assert_eq!(peer_info(&h, b[0]).preferred_sources, [other]);
    assert_eq!(sources(&mut h, &mut log, 6), [other]);
    assert_eq!(h.node(0).peer_ni_stats(b[0]).unwrap().preferred, Some(other));
}

/// Rules the kernel stores but never applies, and router rules on a node without routes,
/// are kept and shown and change nothing.
#[test]
fn inert_and_router_rules_change_nothing_without_routes() {
    let a = [tcp_nid(0x0a00_0001), tcp_nid(0x0a00_0101)];
    let b = [tcp_nid(0x0a00_0002), tcp_nid(0x0a00_0102)];
    let mut h = pair(&a, &b);
    let mut log = EventLog::default();
    for (src, dst, rte, priority) in [
        (None, Some("tcp"), Some("*.*.*.*@tcp"), None),
        (None, Some("tcp"), Some("10.0.0.9@tcp"), Some(1)),
        (Some("10.0.0.1@tcp"), Some("10.0.0.2@tcp"), None, Some(1)),
        (None, None, Some("10.0.0.9@tcp"), None),
    ] {
        let rule = UdspRule::from_lnetctl(src, dst, rte, priority).unwrap();
        h.with_node(0, |node, _| node.udsp_add(rule, None)).unwrap();
    }
    assert_eq!(h.node(0).udsp_rules().len(), 4);
    for nid in b {
        let untouched =
            UdspConstructInfo { net_priority: MAX, nid_priority: MAX, ..Default::default() };
        assert_eq!(peer_info(&h, nid), untouched);
    }
    assert_eq!(sources(&mut h, &mut log, 8), a);
    assert_eq!(destinations(&mut h, &mut log, 8), b);
    assert!(h.node(0).udsp_info(tcp_nid(0x0a00_0009), true).is_none());
    assert!(h.node(0).udsp_info(Nid::LO_0, false).is_some());
    assert_eq!(Net::TCP, a[0].net());
}

/// `10.<number>.0.<host>@tcp<number>`, as the routing stories name nodes.
fn routed_nid(number: u16, host: u32) -> Nid {
    let net = Net::new(crate::addr::LndType::SOCK, number);
    Nid::new4(net, 0x0a00_0000 | (u32::from(number) << 16) | host)
}

/// Router rules: client 0 on tcp, routers 10, 11 and 12 on tcp and tcp1, server 100 on
/// tcp1; the client's route through router 11 has the worse priority, so the client sends
/// nothing through it. A
/// `--dst <server> --rte <router 11>` rule makes the server's peer NI prefer router 11, and
/// a preferred gateway comes before route priority: everything goes through it, until the
/// rule is deleted.
#[test]
fn router_rules_choose_the_gateway() {
    use crate::engine::routes::RouteConfig;
    use std::time::Duration;
    let hosts = [10u32, 11, 12];
    let mut node_nids = vec![vec![routed_nid(0, 1)]];
    node_nids.extend(hosts.iter().map(|host| vec![routed_nid(0, *host), routed_nid(1, *host)]));
    node_nids.push(vec![routed_nid(1, 100)]);
    let server_nid = routed_nid(1, 100);
    let config = HarnessConfig { nodes: node_nids.len(), node_nids, ..HarnessConfig::default() };
    let mut h = Harness::new(config);
    let server = hosts.len() + 1;
    for (index, host) in hosts.iter().enumerate() {
        let router = index + 1;
        h.with_node(router, |node, now| node.set_routing(now, true, true)).unwrap();
        let priority = u32::from(*host == 11);
        let to_servers = RouteConfig {
            net: routed_nid(1, 0).net(),
            gateway: routed_nid(0, *host),
            hops: Some(1),
            priority,
        };
        h.with_node(0, |node, now| node.route_add(now, to_servers)).unwrap();
        // The server's own traffic (its discovery push, whose ACK follows it back) goes
        // through router 11.
        let to_clients = RouteConfig {
            net: Net::TCP,
            gateway: routed_nid(1, *host),
            hops: Some(1),
            priority: u32::from(*host != 11),
        };
        h.with_node(server, |node, now| node.route_add(now, to_clients)).unwrap();
    }
    h.run_for(Duration::from_secs(1));
    let mut log = EventLog::default();
    // Frames the client sent to each router's tcp NI while 12 PUTs went to the server.
    let sent = |h: &Harness| -> Vec<u64> {
        hosts.iter().map(|host| h.rail_traffic(routed_nid(0, 1), routed_nid(0, *host)).0).collect()
    };
    let through = |h: &mut Harness, log: &mut EventLog| -> Vec<u64> {
        let before = sent(h);
        let batch = start(h, 0, server, 12, 64, false);
        h.run_for(Duration::from_secs(1));
        assert_complete(h, log, &batch);
        sent(h).iter().zip(before).map(|(after, before)| after - before).collect()
    };

    // Before any traffic: the rule stamps the server's peer NI when it is created.
    let rule = UdspRule::from_lnetctl(None, Some("10.1.0.100@tcp1"), Some("10.0.0.11@tcp"), None);
    h.with_node(0, |node, _| node.udsp_add(rule.unwrap(), None)).unwrap();
    let shares = through(&mut h, &mut log);
    assert_eq!(shares[0] + shares[2], 0, "{shares:?}");
    assert!(shares[1] >= 12, "{shares:?}");
    let info = h.node(0).udsp_info(server_nid, true).unwrap();
    assert_eq!(info.preferred_gateways, [routed_nid(0, 11)]);

    // Deleted: the route priorities decide again.
    del(&mut h, Some(0));
    assert!(h.node(0).udsp_info(server_nid, true).unwrap().preferred_gateways.is_empty());
    let shares = through(&mut h, &mut log);
    assert_eq!(shares[1], 0, "{shares:?}");
    assert!(shares[0] > 0 && shares[2] > 0, "{shares:?}");

    // Added again with the peer NI in place, matching any router on tcp: the list names
    // every gateway once, and route priority orders the preferred ones.
    let rule = UdspRule::from_lnetctl(None, Some("tcp1"), Some("10.0.0.*@tcp"), None);
    h.with_node(0, |node, _| node.udsp_add(rule.unwrap(), None)).unwrap();
    let mut gateways = h.node(0).udsp_info(server_nid, true).unwrap().preferred_gateways;
    gateways.sort_by(Nid::cmp_wire);
    assert_eq!(gateways, hosts.map(|host| routed_nid(0, host)));
    assert_eq!(through(&mut h, &mut log)[1], 0);
}
