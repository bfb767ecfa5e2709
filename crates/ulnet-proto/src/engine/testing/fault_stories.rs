//! Fault injection stories: drop and delay rules on harness nodes (faults.rs,
//! docs/protocol/semantics.md "Fault injection").

use std::time::Duration;

use super::{Harness, HarnessConfig};
use crate::addr::{Net, Nid};
use crate::engine::event::{Event, EventKind, EventStatus};
use crate::engine::faults::{
    DelayRule, DropRule, FaultMatch, HEALTH_RANDOM, MSG_GET, MSG_PUT, WILDCARD_ADDRESS,
};
use crate::engine::health::HealthStatus;
use crate::engine::md::{MdHandle, MdOptions, MdSpec, Threshold};
use crate::engine::me::ProcessId;
use crate::engine::memory::Memory;
use crate::engine::ni::NiId;
use crate::engine::node::PutRequest;
use crate::time::Time;

const PORTAL: u32 = 5;
const BITS: u64 = 0x77;

fn put_to(md: MdHandle, target: ProcessId) -> PutRequest {
    super::plain_put(md, target, PORTAL, BITS)
}

fn sink(threshold: u32) -> MdSpec {
    MdSpec::new(Memory::new(vec![0; 1024]))
        .threshold(Threshold::Count(threshold))
        .options(MdOptions::OP_PUT)
}

fn source() -> MdSpec {
    MdSpec::new(Memory::new(b"x".to_vec())).threshold(Threshold::Count(1))
}

fn puts(events: &[Event]) -> usize {
    events.iter().filter(|event| event.kind == EventKind::Put).count()
}

fn drop_rule(matching: FaultMatch, rate: u32) -> DropRule {
    DropRule { matching, rate, interval: 0, health_mask: 0, random: false, drop_all: false }
}

fn delay_rule(matching: FaultMatch, latency: u32) -> DelayRule {
    DelayRule { matching, rate: 1, interval: 0, latency }
}

/// Only PUTs on our portal: discovery and recovery pings are left alone.
fn puts_on_portal(source: Nid, destination: Nid) -> FaultMatch {
    FaultMatch {
        portal_mask: 1 << PORTAL,
        message_mask: MSG_PUT,
        ..FaultMatch::new(source, destination)
    }
}

fn wildcard(net: Net) -> Nid {
    Nid::new4(net, WILDCARD_ADDRESS)
}

/// Sends `count` PUTs from node 0 to node 1, one at a time.
fn send_puts(h: &mut Harness, count: u32) {
    let target = h.process(1);
    for _ in 0..count {
        let md = h.bind(0, source());
        h.put(0, &put_to(md, target)).unwrap();
        // Long enough for a frame to cross the link, far shorter than any delay here.
        h.run_for(Duration::from_millis(10));
    }
}

#[test]
fn receive_drops_follow_the_rate_and_count() {
    let mut h = Harness::pair();
    h.discover_all();
    h.post(1, PORTAL, BITS, sink(100));
    let rule = drop_rule(puts_on_portal(h.nid(0), wildcard(Net::TCP)), 4);
    h.with_node(1, |node, now| node.fault_drop_add(now, rule)).unwrap();
    send_puts(&mut h, 40);
    h.drive();
    // One in every window of four, the sender none the wiser.
    assert_eq!(puts(&h.take_events(1)), 30);
    let sent = h.take_events(0);
    assert!(sent.iter().all(|event| event.status == EventStatus::Ok));
    let (_, stats) = h.node(1).fault_drop_rules().next().unwrap();
    assert_eq!((stats.count, stats.hits, stats.put, stats.get), (40, 10, 10, 0));
    let ni = h.node(1).ni_stats(NiId(1)).unwrap();
    assert_eq!(ni.statistics.drop_count, 10);
    // Reset zeroes the counters; delete takes the rule away.
    h.with_node(1, |node, now| node.fault_drop_reset(now));
    assert_eq!(h.node(1).fault_drop_rules().next().unwrap().1, Default::default());
    assert_eq!(h.with_node(1, |node, _| node.fault_drop_del(Nid::ANY, Nid::ANY)), 1);
    send_puts(&mut h, 4);
    assert_eq!(puts(&h.take_events(1)), 4);
    h.assert_quiescent();
}

#[test]
fn rules_that_do_not_match_let_messages_through() {
    let mut h = Harness::pair();
    h.discover_all();
    h.post(1, PORTAL, BITS, sink(100));
    let other_net = Net::new(Net::TCP.lnd, 7);
    let rules = [
        // Another source, another net, another portal, another type, a local NID elsewhere.
        drop_rule(puts_on_portal(h.nid(1), Nid::ANY), 1),
        drop_rule(puts_on_portal(wildcard(other_net), Nid::ANY), 1),
        drop_rule(FaultMatch { portal_mask: 1 << 9, ..FaultMatch::new(Nid::ANY, Nid::ANY) }, 1),
        drop_rule(FaultMatch { message_mask: MSG_GET, ..FaultMatch::new(Nid::ANY, Nid::ANY) }, 1),
        drop_rule(FaultMatch { local_nid: h.nid(0), ..puts_on_portal(Nid::ANY, Nid::ANY) }, 1),
    ];
    for rule in rules {
        h.with_node(1, |node, now| node.fault_drop_add(now, rule)).unwrap();
    }
    send_puts(&mut h, 5);
    assert_eq!(puts(&h.take_events(1)), 5);
    assert!(h.node(1).fault_drop_rules().all(|(_, stats)| stats.hits == 0));
    // The receiving NI's own NID as local NID matches.
    let rule =
        drop_rule(FaultMatch { local_nid: h.nid(1), ..puts_on_portal(Nid::ANY, Nid::ANY) }, 1);
    h.with_node(1, |node, now| node.fault_drop_add(now, rule)).unwrap();
    send_puts(&mut h, 2);
    assert_eq!(puts(&h.take_events(1)), 0);
}

/// Runs `count` PUTs on a two-rail pair where node 0's sends fail by `inject`, and returns
/// what node 0 saw: its events' statuses, its counters, and both NIs' health.
fn failing_run(
    inject: impl FnOnce(&mut Harness),
) -> (Vec<EventStatus>, crate::engine::stats::GlobalStats, [u32; 2], u32) {
    let mut h = Harness::new(HarnessConfig { second_ni: true, ..HarnessConfig::default() });
    h.discover_all();
    h.post(1, PORTAL, BITS, sink(10));
    inject(&mut h);
    send_puts(&mut h, 1);
    h.settle();
    let statuses = h.take_events(0).iter().map(|event| event.status).collect();
    let node = h.node(0);
    let health = [1, 2].map(|ni| node.ni_stats(NiId(ni)).unwrap().health.health_value);
    let peer = node.peer_ni_stats(h.nid(1)).unwrap().health.health_value;
    (statuses, node.stats(), health, peer)
}

#[test]
fn health_drops_take_the_path_of_a_real_failure() {
    for status in [
        HealthStatus::LocalInterrupt,
        HealthStatus::LocalError,
        HealthStatus::RemoteDropped,
        HealthStatus::NetworkTimeout,
    ] {
        // A health rule failing every PUT send with this status...
        let by_rule = failing_run(|h| {
            let rule = DropRule {
                health_mask: 1 << status as u32,
                ..drop_rule(puts_on_portal(Nid::ANY, Nid::ANY), 1)
            };
            h.with_node(0, |node, now| node.fault_drop_add(now, rule)).unwrap();
        });
        let failures = by_rule.1.local_interrupt_count
            + by_rule.1.local_error_count
            + by_rule.1.remote_dropped_count
            + by_rule.1.network_timeout_count;
        assert!(failures >= 1, "{status:?}");
        // ...does what the LND failing that many sends with it does.
        let by_lnd = failing_run(|h| {
            for _ in 0..failures {
                h.fail_next_send(0, status);
            }
        });
        assert_eq!(by_rule, by_lnd, "{status:?}");
    }
}

#[test]
fn local_interrupts_from_a_rule_are_resent_on_the_other_rail() {
    let mut h = Harness::new(HarnessConfig { second_ni: true, ..HarnessConfig::default() });
    h.discover_all();
    h.post(1, PORTAL, BITS, sink(10));
    // Only the first rail's PUTs fail (the header source is the sending NI's NID).
    let rule = DropRule {
        health_mask: 1 << HealthStatus::LocalInterrupt as u32,
        ..drop_rule(puts_on_portal(h.nid(0), Nid::ANY), 1)
    };
    h.with_node(0, |node, now| node.fault_drop_add(now, rule)).unwrap();
    send_puts(&mut h, 3);
    assert_eq!(puts(&h.take_events(1)), 3);
    assert!(h.take_events(0).iter().all(|event| event.status == EventStatus::Ok));
    let stats = h.node(0).stats();
    assert_eq!(stats.successful_resends, stats.local_interrupt_count);
    let (_, fault) = h.node(0).fault_drop_rules().next().unwrap();
    assert_eq!(stats.local_interrupt_count, fault.hits);
}

#[test]
fn random_health_errors_are_failures() {
    let mut h = Harness::pair();
    h.discover_all();
    h.post(1, PORTAL, BITS, sink(10));
    let rule =
        DropRule { health_mask: HEALTH_RANDOM, ..drop_rule(puts_on_portal(Nid::ANY, Nid::ANY), 1) };
    h.with_node(0, |node, now| node.fault_drop_add(now, rule)).unwrap();
    send_puts(&mut h, 5);
    h.drive();
    assert_eq!(puts(&h.take_events(1)), 0);
    assert!(h.take_events(0).iter().all(|event| event.status != EventStatus::Ok));
}

/// When node 1 saw its first PUT, sending one PUT at time zero under `setup`.
fn first_put_at(setup: impl FnOnce(&mut Harness)) -> Time {
    let mut h = Harness::pair();
    h.discover_all();
    h.post(1, PORTAL, BITS, sink(10));
    setup(&mut h);
    let start = h.now();
    let target = h.process(1);
    let md = h.bind(0, source());
    h.put(0, &put_to(md, target)).unwrap();
    while puts(&h.take_events(1)) == 0 {
        assert!(h.step(), "the PUT never arrived");
    }
    let arrived = h.now();
    h.drive();
    h.assert_quiescent();
    Time::from_nanos(arrived.as_nanos() - start.as_nanos())
}

#[test]
fn delay_rules_hold_receives_and_transmits_for_their_latency() {
    let undelayed = first_put_at(|_| {});
    assert!(undelayed < Time::from_secs(1));
    let on_receive = first_put_at(|h| {
        let rule = delay_rule(puts_on_portal(Nid::ANY, Nid::ANY), 5);
        h.with_node(1, |node, now| node.fault_delay_add(now, rule)).unwrap();
    });
    let on_send = first_put_at(|h| {
        let rule = delay_rule(puts_on_portal(Nid::ANY, Nid::ANY), 3);
        h.with_node(0, |node, now| node.fault_delay_add(now, rule)).unwrap();
    });
    for (delayed, latency) in [(on_receive, 5), (on_send, 3)] {
        assert!(delayed >= Time::from_secs(latency), "{delayed:?}");
        assert!(delayed < Time::from_secs(latency + 1), "{delayed:?}");
    }
}

#[test]
fn deleting_a_delay_rule_releases_what_it_holds() {
    let mut h = Harness::pair();
    h.discover_all();
    h.post(1, PORTAL, BITS, sink(10));
    let rule = delay_rule(puts_on_portal(Nid::ANY, Nid::ANY), 1000);
    h.with_node(1, |node, now| node.fault_delay_add(now, rule)).unwrap();
    h.with_node(0, |node, now| node.fault_delay_add(now, rule)).unwrap();
    let start = h.now();
    send_puts(&mut h, 2);
    h.run_for(Duration::from_secs(1));
    assert_eq!(puts(&h.take_events(1)), 0);
    // Node 0 holds both transmits; nothing reached node 1.
    assert_eq!((h.node(0).fault_held_count(), h.node(1).fault_held_count()), (2, 0));
    assert_eq!(h.with_node(0, |node, now| node.fault_delay_del(now, Nid::ANY, Nid::ANY)), 1);
    h.run_for(Duration::from_secs(1));
    // Now node 1 holds them; deleting its rule lets them in long before their latency.
    assert_eq!(h.node(1).fault_held_count(), 2);
    let (_, stats) = h.node(1).fault_delay_rules().next().unwrap();
    assert_eq!((stats.count, stats.hits, stats.put), (2, 2, 2));
    assert_eq!(h.with_node(1, |node, now| node.fault_delay_del(now, Nid::ANY, Nid::ANY)), 1);
    h.settle();
    assert_eq!(puts(&h.take_events(1)), 2);
    assert!(h.now() < start + Duration::from_secs(10));
    h.drive();
    h.assert_quiescent();
}

#[test]
fn delay_rate_picks_one_in_each_window() {
    let mut h = Harness::pair();
    h.discover_all();
    h.post(1, PORTAL, BITS, sink(100));
    let rule = DelayRule { rate: 3, ..delay_rule(puts_on_portal(Nid::ANY, Nid::ANY), 2) };
    h.with_node(1, |node, now| node.fault_delay_add(now, rule)).unwrap();
    send_puts(&mut h, 30);
    h.drive();
    assert_eq!(puts(&h.take_events(1)), 30);
    let (_, stats) = h.node(1).fault_delay_rules().next().unwrap();
    assert_eq!((stats.count, stats.hits), (30, 10));
    h.assert_quiescent();
}
