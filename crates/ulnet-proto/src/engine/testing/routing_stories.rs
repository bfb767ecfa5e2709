//! Stories about routing: messages across one and two routers, responses back through the
//! router their request came through, router buffers and credits running out, a router dying
//! and coming back, and the routing state and route table as lnetctl sees them
//! (docs/protocol/semantics.md §3.4, §5; docs/decisions/0023-routing.md).

use std::time::Duration;

use super::{Harness, HarnessConfig};
use crate::addr::{LndType, Net, Nid};
use crate::engine::config::{PeerAddError, PeerDelError};
use crate::engine::event::{EventKind, EventStatus};
use crate::engine::md::{MdHandle, MdOptions, MdSpec, Threshold};
use crate::engine::me::{LNET_PID_LUSTRE, ProcessId};
use crate::engine::memory::Memory;
use crate::engine::node::{GetRequest, PutRequest};
use crate::engine::routes::{BufferClass, RouteConfig, RouteError, RoutingState};
use crate::engine::tunables::Tunables;
use crate::link_model::LinkConfig;
use crate::wire::header::Body;

const PORTAL: u32 = 12;

fn net(number: u16) -> Net {
    Net::new(LndType::SOCK, number)
}

/// `10.<number>.0.<host>@tcp<number>`.
fn nid(number: u16, host: u32) -> Nid {
    Nid::new4(net(number), 0x0a00_0000 | (u32::from(number) << 16) | host)
}

/// A layout of nodes, each with its NIDs: clients on tcp, servers on tcp1, routers on both.
struct Layout {
    h: Harness,
}

/// Client 0 on tcp, `routers` routers on tcp and tcp1, then one server on tcp1; every node
/// has the routes it needs, routers forward. `tunables` for every node.
fn layout(routers: usize, tunables: Tunables) -> Layout {
    layout_on(
        routers,
        tunables,
        LinkConfig { latency: Duration::from_micros(20), ..LinkConfig::IDEAL },
    )
}

/// [`layout`] over links of `link`.
fn layout_on(routers: usize, tunables: Tunables, link: LinkConfig) -> Layout {
    let mut node_nids = vec![vec![nid(0, 1)]];
    for router in 0..routers {
        let host = 10 + router as u32;
        node_nids.push(vec![nid(0, host), nid(1, host)]);
    }
    node_nids.push(vec![nid(1, 100)]);
    let config = HarnessConfig {
        nodes: node_nids.len(),
        node_nids,
        tunables,
        link,
        ..HarnessConfig::default()
    };
    let mut h = Harness::new(config);
    for router in 1..=routers {
        h.with_node(router, |node, now| node.set_routing(now, true, true)).unwrap();
    }
    let server = routers + 1;
    for router in 0..routers {
        let host = 10 + router as u32;
        let to_servers =
            RouteConfig { net: net(1), gateway: nid(0, host), hops: Some(1), priority: 0 };
        h.with_node(0, |node, now| node.route_add(now, to_servers)).unwrap();
        let to_clients =
            RouteConfig { net: net(0), gateway: nid(1, host), hops: Some(1), priority: 0 };
        h.with_node(server, |node, now| node.route_add(now, to_clients)).unwrap();
    }
    Layout { h }
}

impl Layout {
    fn server(&self) -> usize {
        self.h.node_count() - 1
    }

    /// A PUT with ACK of `size` bytes from `from` to `to`'s first NID; returns its MD.
    fn put(&mut self, from: usize, to: usize, bits: u64, size: usize) -> MdHandle {
        let served = MdSpec::new(Memory::new(vec![0; size]))
            .threshold(Threshold::Count(1))
            .options(MdOptions::OP_PUT);
        self.h.post(to, PORTAL, bits, served);
        let md = self.h.bind(
            from,
            MdSpec::new(Memory::new(vec![bits as u8; size])).threshold(Threshold::Count(2)),
        );
        let request = PutRequest {
            md,
            ack: true,
            target: ProcessId::new(self.h.nids(to)[0], LNET_PID_LUSTRE),
            portal: PORTAL,
            match_bits: bits,
            remote_offset: 0,
            hdr_data: 0,
            source: None,
        };
        self.h.put(from, &request).unwrap();
        md
    }

    /// A GET of `size` bytes that `to` serves from a buffer of `fill`.
    fn get(&mut self, from: usize, to: usize, bits: u64, size: usize, fill: u8) -> MdHandle {
        let source = MdSpec::new(Memory::new(vec![fill; size]))
            .threshold(Threshold::Count(1))
            .options(MdOptions::OP_GET);
        self.h.post(to, PORTAL, bits, source);
        let md = self
            .h
            .bind(from, MdSpec::new(Memory::new(vec![0; size])).threshold(Threshold::Count(2)));
        let request = GetRequest {
            md,
            target: ProcessId::new(self.h.nids(to)[0], LNET_PID_LUSTRE),
            portal: PORTAL,
            match_bits: bits,
            remote_offset: 0,
            source: None,
        };
        self.h.get(from, &request).unwrap();
        md
    }
}

/// 20 us links of 100 MB/s, for stories with bulk in flight when a router goes.
fn bulk_link() -> LinkConfig {
    LinkConfig {
        latency: Duration::from_micros(20),
        bandwidth_bytes_per_sec: Some(100_000_000),
        ..LinkConfig::IDEAL
    }
}

/// The events of `md` on `node` as (kind, status).
fn outcome(events: &[crate::engine::event::Event], md: MdHandle) -> Vec<(EventKind, EventStatus)> {
    events.iter().filter(|e| e.md == md).map(|e| (e.kind, e.status)).collect()
}

#[test]
fn puts_and_gets_cross_a_router_both_ways() {
    let mut l = layout(1, Tunables::default());
    let server = l.server();
    let put = l.put(0, server, 1, 64 * 1024);
    let get = l.get(0, server, 2, 8192, 0x3c);
    let back = l.put(server, 0, 3, 100);
    l.h.run_for(Duration::from_secs(1));
    let client = l.h.take_events(0);
    assert_eq!(
        outcome(&client, put),
        [(EventKind::Send, EventStatus::Ok), (EventKind::Ack, EventStatus::Ok)]
    );
    let reply: Vec<_> = client.iter().filter(|e| e.md == get).collect();
    assert_eq!(
        reply.iter().map(|e| (e.kind, e.status)).collect::<Vec<_>>(),
        [(EventKind::Send, EventStatus::Ok), (EventKind::Reply, EventStatus::Ok)]
    );
    let memory = reply[1].memory.as_ref().expect("the last event hands the memory back");
    assert!(memory.to_vec().iter().all(|byte| *byte == 0x3c), "the REPLY's payload crossed intact");
    let served = l.h.take_events(server);
    let put_event = served.iter().find(|e| e.kind == EventKind::Put).unwrap();
    // The target sees the originator as initiator and the router as the last hop.
    assert_eq!(put_event.initiator.nid, nid(0, 1));
    assert_eq!(put_event.sender, nid(1, 10));
    assert_eq!(
        outcome(&served, back),
        [(EventKind::Send, EventStatus::Ok), (EventKind::Ack, EventStatus::Ok)]
    );
    // The router forwarded with the originator's NIDs in the header, and counted it.
    let forwarded = l.h.take_transmitted(1);
    assert!(forwarded.iter().any(|header| matches!(header.body, Body::Put { .. })
        && header.src_nid == nid(0, 1)
        && header.dest_nid == nid(1, 100)));
    let stats = l.h.node(1).stats();
    assert!(stats.route_count >= 6, "PUT, ACK, GET, REPLY, PUT, ACK at least: {stats:?}");
    assert!(stats.route_length >= 64 * 1024 + 8192 + 100);
    l.h.check();
    // Every buffer is back, and the large one is kept for the next message.
    let pools = l.h.node(1).router_pools();
    assert!(pools.iter().flatten().all(|pool| pool.credits == pool.buffers as i32), "{pools:?}");
    assert_eq!(l.h.node(1).router_spare_bytes() % 4096, 0);
}

#[test]
fn without_forwarding_a_router_drops_what_is_not_its_own() {
    let mut l = layout(1, Tunables::default());
    l.h.with_node(1, |node, now| node.set_routing(now, false, true)).unwrap();
    assert_eq!(l.h.node(1).routing_state(), RoutingState::Disabled);
    let server = l.server();
    let put = l.put(0, server, 1, 10);
    l.h.run_for(Duration::from_secs(200));
    // The server is never discovered (its ping is dropped), so the PUT fails unsent.
    let client = l.h.take_events(0);
    let events = outcome(&client, put);
    assert_eq!(events.len(), 1, "{events:?}");
    assert_ne!(events[0].1, EventStatus::Ok);
    assert_eq!(l.h.node(1).stats().route_count, 0);
    assert!(l.h.node(1).stats().drop_count > 0);
}

#[test]
fn no_route_fails_the_send_with_host_unreachable() {
    let mut l = layout(1, Tunables::default());
    l.h.with_node(0, |node, now| node.route_del(now, Some(net(1)), None)).unwrap();
    let server = l.server();
    let put = l.put(0, server, 1, 10);
    l.h.run_for(Duration::from_secs(1));
    let client = l.h.take_events(0);
    assert_eq!(outcome(&client, put), [(EventKind::Send, EventStatus::HostUnreachable)]);
}

#[test]
fn routes_are_checked_as_lnetctl_checks_them() {
    let mut l = layout(1, Tunables::default());
    let route = |net, gateway, hops| RouteConfig { net, gateway, hops, priority: 0 };
    let add = |h: &mut Harness, config| h.with_node(0, |node, now| node.route_add(now, config));
    // A local net, a gateway on no local net, a gateway on the route's own net, bad hops.
    assert_eq!(add(&mut l.h, route(net(0), nid(0, 10), None)), Err(RouteError::Invalid));
    assert_eq!(add(&mut l.h, route(net(5), nid(3, 10), None)), Err(RouteError::GatewayUnreachable));
    assert_eq!(add(&mut l.h, route(net(5), nid(0, 10), Some(0))), Err(RouteError::Invalid));
    assert_eq!(add(&mut l.h, route(net(5), nid(0, 10), Some(256))), Err(RouteError::Invalid));
    // The same gateway twice for one net.
    assert_eq!(add(&mut l.h, route(net(1), nid(0, 10), Some(3))), Err(RouteError::Exists));
    assert_eq!(add(&mut l.h, route(net(5), nid(0, 10), None)), Ok(()));
    let routes = l.h.node(0).routes();
    assert_eq!(routes.len(), 2);
    assert!(routes.iter().any(|r| r.net == net(5) && r.hops.is_none()));
    assert_eq!(
        l.h.with_node(0, |node, now| node.route_del(now, Some(net(7)), None)),
        Err(RouteError::NotFound)
    );
    assert_eq!(l.h.with_node(0, |node, now| node.route_del(now, None, Some(nid(0, 10)))), Ok(2));
    assert!(l.h.node(0).routes().is_empty());
}

#[test]
fn a_gateway_peer_cannot_be_replaced_or_deleted() {
    // sanity-lnet 105 and 106: the route made the gateway a peer; `peer add` would replace
    // it and `peer del` delete it, and both answer EBUSY while the route exists.
    let mut l = layout(1, Tunables::default());
    let gateway = nid(0, 10);
    let add =
        |h: &mut Harness| h.with_node(0, |node, now| node.peer_add(now, gateway, &[], true, false));
    let del = |h: &mut Harness, force| {
        h.with_node(0, |node, now| node.peer_del(now, gateway, &[], force))
    };
    assert_eq!(add(&mut l.h), Err(PeerAddError::Gateway(gateway)));
    assert_eq!(del(&mut l.h, false), Err(PeerDelError::Gateway(gateway)));
    assert_eq!(del(&mut l.h, true), Err(PeerDelError::Gateway(gateway)));
    assert!(l.h.node(0).peer_info(gateway).is_some(), "the refusals lost the gateway");
    assert_eq!(l.h.node(0).routes().len(), 1);
    // Without the route it is an ordinary peer again.
    assert_eq!(l.h.with_node(0, |node, now| node.route_del(now, None, Some(gateway))), Ok(1));
    assert_eq!(add(&mut l.h), Ok(()));
    assert_eq!(del(&mut l.h, false), Ok(()));
    assert!(l.h.node(0).peer_info(gateway).is_none());
}

#[test]
fn the_router_checker_learns_which_routes_are_alive() {
    let tunables = Tunables::default();
    let mut l = layout(2, tunables);
    l.h.run_for(Duration::from_secs(2));
    let routes = l.h.node(0).routes();
    assert_eq!(routes.len(), 2);
    assert!(routes.iter().all(|r| r.alive && !r.multi_hop), "{routes:?}");
    // Router 2 stops routing: its next check says RTE_DISABLED and its route dies.
    l.h.with_node(2, |node, now| node.set_routing(now, false, false)).unwrap();
    l.h.run_for(Duration::from_secs(61));
    let routes = l.h.node(0).routes();
    let dead: Vec<_> = routes.iter().filter(|r| !r.alive).map(|r| r.gateway).collect();
    assert_eq!(dead, [nid(0, 11)], "{routes:?}");
    // Traffic still flows through router 1 alone.
    let server = l.server();
    let put = l.put(0, server, 9, 4096);
    l.h.run_for(Duration::from_secs(1));
    let client = l.h.take_events(0);
    assert_eq!(
        outcome(&client, put),
        [(EventKind::Send, EventStatus::Ok), (EventKind::Ack, EventStatus::Ok)]
    );
    // Router 2 stops forwarding once its buffers are back, after 110 s.
    assert!(matches!(l.h.node(2).routing_state(), RoutingState::Stopping { .. }));
    l.h.run_for(Duration::from_secs(60));
    assert_eq!(l.h.node(2).routing_state(), RoutingState::Disabled);
}

#[test]
fn routes_share_traffic_round_robin() {
    let mut l = layout(3, Tunables::default());
    l.h.run_for(Duration::from_secs(1));
    let server = l.server();
    for bits in 0..30 {
        l.put(0, server, 100 + bits, 2048);
    }
    l.h.run_for(Duration::from_secs(1));
    let counts: Vec<u64> = (1..=3).map(|router| l.h.node(router).stats().route_count).collect();
    assert!(counts.iter().all(|count| *count >= 10), "each router forwarded its share: {counts:?}");
}

#[test]
fn exhausted_router_buffers_queue_and_lose_nothing() {
    let mut l = layout(1, Tunables::default());
    l.h.with_node(1, |node, now| {
        node.set_router_buffers(now, BufferClass::Large, 2);
        node.set_router_buffers(now, BufferClass::Small, 1);
    });
    l.h.run_for(Duration::from_secs(1));
    let server = l.server();
    let mut mds = Vec::new();
    for bits in 0..24 {
        let size = if bits % 2 == 0 { 256 * 1024 } else { 1000 };
        mds.push(l.put(0, server, 1000 + bits, size));
    }
    l.h.run_for(Duration::from_secs(5));
    let client = l.h.take_events(0);
    for md in mds {
        assert_eq!(
            outcome(&client, md),
            [(EventKind::Send, EventStatus::Ok), (EventKind::Ack, EventStatus::Ok)]
        );
    }
    let pools = l.h.node(1).router_pools()[0];
    let large = pools[2];
    assert_eq!(large.buffers, 2);
    assert!(large.min_credits < 0, "messages waited for a large buffer: {large:?}");
    assert!(pools[1].min_credits < 0, "and for a small one: {:?}", pools[1]);
    l.h.check();
}

#[test]
fn two_hops_cross_three_nets() {
    // client tcp -- R1 -- tcp1 -- R2 -- tcp2 -- server
    let node_nids = vec![
        vec![nid(0, 1)],
        vec![nid(0, 10), nid(1, 10)],
        vec![nid(1, 20), nid(2, 20)],
        vec![nid(2, 100)],
    ];
    let config = HarnessConfig { nodes: 4, node_nids, ..HarnessConfig::default() };
    let mut h = Harness::new(config);
    for router in [1, 2] {
        h.with_node(router, |node, now| node.set_routing(now, true, true)).unwrap();
    }
    let route = |net, gateway, hops| RouteConfig { net, gateway, hops: Some(hops), priority: 0 };
    let add = |h: &mut Harness, node: usize, config| {
        h.with_node(node, |engine, now| engine.route_add(now, config)).unwrap()
    };
    add(&mut h, 0, route(net(1), nid(0, 10), 1));
    add(&mut h, 0, route(net(2), nid(0, 10), 2));
    add(&mut h, 1, route(net(2), nid(1, 20), 1));
    add(&mut h, 2, route(net(0), nid(1, 10), 1));
    add(&mut h, 3, route(net(1), nid(2, 20), 1));
    add(&mut h, 3, route(net(0), nid(2, 20), 2));
    h.run_for(Duration::from_secs(1));
    let mut l = Layout { h };
    let put = l.put(0, 3, 5, 300_000);
    l.h.run_for(Duration::from_secs(1));
    let client = l.h.take_events(0);
    assert_eq!(
        outcome(&client, put),
        [(EventKind::Send, EventStatus::Ok), (EventKind::Ack, EventStatus::Ok)]
    );
    assert!(l.h.node(1).stats().route_count >= 2);
    assert!(l.h.node(2).stats().route_count >= 2);
    // The two-hop route is known to be multi-hop (R1's buffer lists nothing on tcp2).
    let routes = l.h.node(0).routes();
    let far = routes.iter().find(|r| r.net == net(2)).unwrap();
    assert!(far.multi_hop && far.alive, "{far:?}");
}

#[test]
fn a_dead_router_is_left_and_used_again_when_back() {
    let tunables = Tunables {
        transaction_timeout: Duration::from_secs(10),
        router: crate::engine::tunables::RouterTunables {
            alive_router_check_interval: Duration::from_secs(5),
            ..Default::default()
        },
        ..Tunables::default()
    };
    let mut l = layout(2, tunables);
    l.h.run_for(Duration::from_secs(1));
    let server = l.server();
    // Router 2 dies: both its links go down.
    l.h.set_link_down(2, nid(0, 11), true);
    l.h.set_link_down(2, nid(1, 11), true);
    // Within a check interval and a ping timeout its route is dead on both sides.
    l.h.run_for(Duration::from_secs(20));
    let alive: Vec<bool> =
        l.h.node(0)
            .routes()
            .iter()
            .map(|r| (r.gateway, r.alive))
            .filter(|r| r.0 == nid(0, 11))
            .map(|r| r.1)
            .collect();
    assert_eq!(alive, [false]);
    assert_eq!(l.h.node(0).gateway_alive(nid(0, 11)), Some(false));
    let dead_count = l.h.node(2).stats().route_count;
    let mut mds = Vec::new();
    for bits in 0..10 {
        mds.push(l.put(0, server, 2000 + bits, 8192));
    }
    l.h.run_for(Duration::from_secs(2));
    let client = l.h.take_events(0);
    for md in &mds {
        assert_eq!(
            outcome(&client, *md),
            [(EventKind::Send, EventStatus::Ok), (EventKind::Ack, EventStatus::Ok)]
        );
    }
    assert_eq!(l.h.node(2).stats().route_count, dead_count, "nothing went to the dead router");
    // Back: the next checks revive the route and traffic uses it again.
    l.h.set_link_down(2, nid(0, 11), false);
    l.h.set_link_down(2, nid(1, 11), false);
    l.h.run_for(Duration::from_secs(12));
    assert!(l.h.node(0).routes().iter().all(|r| r.alive), "{:?}", l.h.node(0).routes());
    // Its gateway NI's health comes back with the checks it answers; routes that tie on
    // priority and hops prefer the healthier gateway until then.
    l.h.run_for(Duration::from_secs(60));
    let before = l.h.node(2).stats().route_count;
    for bits in 0..10 {
        l.put(0, server, 3000 + bits, 8192);
    }
    l.h.run_for(Duration::from_secs(2));
    assert!(l.h.node(2).stats().route_count > before, "router 2 carries traffic again");
}

#[test]
fn bulk_traffic_survives_a_router_dying_under_it() {
    let tunables = Tunables { transaction_timeout: Duration::from_secs(30), ..Tunables::default() };
    // 100 MB/s links: the batch takes about 0.15 s through two routers.
    let link = bulk_link();
    let mut l = layout_on(2, tunables, link);
    l.h.run_for(Duration::from_secs(1));
    let server = l.server();
    let mut mds = Vec::new();
    for bits in 0..40 {
        mds.push(l.put(0, server, 5000 + bits, 256 * 1024));
        mds.push(l.get(0, server, 6000 + bits, 64 * 1024, 7));
    }
    // Let traffic start through both routers, then router 2 vanishes mid-stream.
    l.h.run_for(Duration::from_millis(30));
    l.h.set_link_down(2, nid(0, 11), true);
    l.h.set_link_down(2, nid(1, 11), true);
    let died = l.h.now();
    assert!(l.h.node(2).stats().route_count > 0, "router 2 was carrying part of the batch");
    l.h.run_for(Duration::from_secs(5));
    // New traffic goes through router 1 alone, at once.
    assert!(
        l.h.node(0).routes().iter().any(|r| r.gateway == nid(0, 11) && !r.alive),
        "the dead gateway's route is down within seconds: {:?}",
        l.h.node(0).routes()
    );
    l.h.run_for(Duration::from_secs(60));
    let client = l.h.take_events(0);
    let mut failed = 0;
    for md in &mds {
        let events = outcome(&client, *md);
        if events.last().map(|e| e.1) != Some(EventStatus::Ok) || events.len() != 2 {
            failed += 1;
        }
    }
    eprintln!("{failed} of {} operations failed after the router died at {died:?}", mds.len());
    assert_eq!(failed, 0, "every operation completed through the live router");
    l.h.check();
}

#[test]
fn a_router_net_nobody_pings_goes_down_and_comes_back() {
    let mut l = layout(1, Tunables::default());
    l.h.run_for(Duration::from_secs(1));
    assert!(l.h.node(0).routes()[0].alive);
    // The server is cut off: nobody pings the router on tcp1 any more, so after
    // router_ping_timeout + alive_router_check_interval (110 s) the router reports its tcp1
    // NI DOWN and the client's route (single hop, avoid_asym_router_failure) dies.
    let server = l.server();
    l.h.with_node(server, |node, now| node.route_del(now, None, None)).unwrap();
    l.h.set_link_down(server, nid(1, 100), true);
    l.h.run_for(Duration::from_secs(200));
    assert!(!l.h.node(1).ni_stats(crate::engine::ni::NiId(2)).unwrap().up);
    let routes = l.h.node(0).routes();
    assert!(!routes[0].alive, "{routes:?}");
    // A route on the server again: its check pings the router, whose NI comes back UP and
    // tells the client.
    l.h.set_link_down(server, nid(1, 100), false);
    let back = RouteConfig { net: net(0), gateway: nid(1, 10), hops: Some(1), priority: 0 };
    l.h.with_node(server, |node, now| node.route_add(now, back)).unwrap();
    l.h.run_for(Duration::from_secs(61));
    let routes = l.h.node(0).routes();
    assert!(routes[0].alive, "{routes:?}");
}

#[test]
fn a_multi_rail_gateway_losing_one_ni_keeps_routing() {
    // The router has two NIs on tcp; the client's route names the first.
    let node_nids =
        vec![vec![nid(0, 1)], vec![nid(0, 10), nid(0, 20), nid(1, 10)], vec![nid(1, 100)]];
    let link = bulk_link();
    let config = HarnessConfig { nodes: 3, node_nids, link, ..HarnessConfig::default() };
    let mut h = Harness::new(config);
    h.with_node(1, |node, now| node.set_routing(now, true, true)).unwrap();
    let to_servers = RouteConfig { net: net(1), gateway: nid(0, 10), hops: Some(1), priority: 0 };
    h.with_node(0, |node, now| node.route_add(now, to_servers)).unwrap();
    let to_clients = RouteConfig { net: net(0), gateway: nid(1, 10), hops: Some(1), priority: 0 };
    h.with_node(2, |node, now| node.route_add(now, to_clients)).unwrap();
    h.run_for(Duration::from_secs(1));
    let mut l = Layout { h };
    // Both of the gateway's tcp NIs carry traffic.
    for bits in 0..20 {
        l.put(0, 2, 7000 + bits, 64 * 1024);
    }
    l.h.run_for(Duration::from_secs(1));
    let (to_first, _) = l.h.rail_traffic(nid(0, 1), nid(0, 10));
    let (to_second, _) = l.h.rail_traffic(nid(0, 1), nid(0, 20));
    assert!(to_first > 0 && to_second > 0, "frames to each gateway NI: {to_first} / {to_second}");
    l.h.take_events(0);
    // The NI the route names goes away mid-stream: the gateway's other NI carries on.
    let mut mds = Vec::new();
    for bits in 0..40 {
        mds.push(l.put(0, 2, 8000 + bits, 64 * 1024));
    }
    l.h.run_for(Duration::from_millis(5));
    l.h.set_link_down(1, nid(0, 10), true);
    l.h.run_for(Duration::from_secs(30));
    let client = l.h.take_events(0);
    for md in mds {
        assert_eq!(
            outcome(&client, md),
            [(EventKind::Send, EventStatus::Ok), (EventKind::Ack, EventStatus::Ok)]
        );
    }
    assert!(l.h.node(0).routes()[0].alive);
    let (after, _) = l.h.rail_traffic(nid(0, 1), nid(0, 20));
    assert!(after > to_second, "the second NI carried the traffic");
    l.h.check();
}

#[test]
fn a_discovery_ping_through_a_router_gone_silent_is_copied() {
    // Discovery on: the first PUTs to the server wait for its discovery ping. The router that
    // ping goes through falls silent (either of the two, one layout each); fast failover
    // copies the ping through the other router, so the held PUTs complete within seconds,
    // not at the ping's transaction timeout.
    for silent in [1, 2] {
        let link = bulk_link();
        let mut l = layout_on(2, Tunables::default(), link);
        l.h.run_for(Duration::from_secs(1));
        let server = l.server();
        let host = 9 + silent as u32;
        l.h.set_link_down(silent, nid(0, host), true);
        l.h.set_link_down(silent, nid(1, host), true);
        let mds: Vec<MdHandle> = (0..8).map(|bits| l.put(0, server, 7000 + bits, 4096)).collect();
        l.h.run_for(Duration::from_secs(8));
        let client = l.h.take_events(0);
        let done = mds
            .iter()
            .filter(|md| outcome(&client, **md).last() == Some(&(EventKind::Ack, EventStatus::Ok)))
            .count();
        assert_eq!(done, mds.len(), "router {silent} silent: PUTs still held after 8 s");
        l.h.check();
    }
}

#[test]
fn a_silent_router_is_left_within_seconds_with_discovery_off() {
    // Discovery off: each gateway is known by one NID (not multi-rail), as at the seeds' sites.
    let tunables = Tunables { discovery: false, ..Tunables::default() };
    let link = bulk_link();
    let mut l = layout_on(2, tunables, link);
    l.h.run_for(Duration::from_secs(1));
    let server = l.server();
    // The server is known (its first-contact ping answered) before the router goes.
    let first = l.put(0, server, 8999, 1024);
    l.h.run_for(Duration::from_secs(1));
    assert_eq!(outcome(&l.h.take_events(0), first).len(), 2);
    // Router 2 goes silent (its links drop everything; nobody is told).
    l.h.set_link_down(2, nid(0, 11), true);
    l.h.set_link_down(2, nid(1, 11), true);
    let mut mds = Vec::new();
    for bits in 0..40 {
        mds.push(l.put(0, server, 9000 + bits, 64 * 1024));
    }
    l.h.run_for(Duration::from_secs(5));
    let routes = l.h.node(0).routes();
    assert!(
        routes.iter().any(|r| r.gateway == nid(0, 11) && !r.alive),
        "the silent router's route is down within seconds: {routes:?}"
    );
    l.h.run_for(Duration::from_secs(60));
    let client = l.h.take_events(0);
    let done = mds
        .iter()
        .filter(|md| outcome(&client, **md).last() == Some(&(EventKind::Ack, EventStatus::Ok)))
        .count();
    assert_eq!(done, mds.len(), "every PUT completed through the live router");
    l.h.check();
}
