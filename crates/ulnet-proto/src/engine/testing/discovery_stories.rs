//! Stories about the reserved portal: pings answered and sent, pushes taken, and discovery
//! before the first message (docs/protocol/semantics.md §6, docs/protocol/wire.md §6).

use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use super::{Frame, Harness, HarnessConfig, node_nid};
use crate::addr::{LndType, Net, Nid};
use crate::engine::discovery::MAX_DISCOVERY_PENDING;
use crate::engine::error::{DiscoverError, NiRemoveError, PingStartError};
use crate::engine::event::{Event, EventKind, EventStatus};
use crate::engine::health::HealthStatus;
use crate::engine::md::{MdHandle, MdOptions, MdSpec, Threshold, UnlinkMode};
use crate::engine::me::{InsertPosition, LNET_PID_ANY, LNET_PID_LUSTRE, ProcessId};
use crate::engine::memory::Memory;
use crate::engine::ni::{LndKind, NiConfig, NiId};
use crate::engine::node::{Engine, EngineConfig, PutRequest, RecvAction, Transmit};
use crate::engine::peer::{PeerInfo, PeerState};
use crate::engine::ping::{
    PING_SINK, PingCompletion, PingFailure, PingReply, RefusedNid, RefusedReason,
};
use crate::link_model::LinkConfig;
use crate::time::Time;
use crate::wire::header::{Body, Header, WireHandle};
use crate::wire::ping::{
    LNET_NI_STATUS_DOWN, LNET_NI_STATUS_UP, LNET_PING_INFO_MIN_SIZE, LNET_PROTO_PING_MATCHBITS,
    NiStatus, PingInfo,
};

const PORTAL: u32 = 5;
const BITS: u64 = 0x77;

fn tcp(a: u8, b: u8, c: u8, d: u8) -> Nid {
    Nid::ipv4(Net::TCP, Ipv4Addr::new(a, b, c, d))
}

fn tcp1(a: u8, b: u8, c: u8, d: u8) -> Nid {
    Nid::ipv4(Net::new(LndType::SOCK, 1), Ipv4Addr::new(a, b, c, d))
}

fn v6(last: u16) -> Nid {
    Nid::ipv6(Net::TCP, Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, last))
}

/// What a node put on the wire, by kind: `ping` and `push` are portal 0.
fn summary(headers: &[Header]) -> Vec<&'static str> {
    headers
        .iter()
        .map(|header| match header.body {
            Body::Get { ptl_index: 0, .. } => "ping",
            Body::Put { ptl_index: 0, .. } => "push",
            Body::Get { .. } => "GET",
            Body::Put { .. } => "PUT",
            Body::Reply { .. } => "REPLY",
            Body::Ack { .. } => "ACK",
            Body::Hello { .. } => "HELLO",
        })
        .collect()
}

fn kinds(events: &[Event]) -> Vec<(EventKind, EventStatus)> {
    events.iter().map(|event| (event.kind, event.status)).collect()
}

fn put_to(md: MdHandle, target: ProcessId) -> PutRequest {
    super::plain_put(md, target, PORTAL, BITS)
}

fn one_shot(bytes: &[u8]) -> MdSpec {
    MdSpec::new(Memory::new(bytes.to_vec())).threshold(Threshold::Count(1))
}

fn buffer(length: usize) -> MdSpec {
    MdSpec::new(Memory::new(vec![0; length])).options(MdOptions::OP_PUT)
}

fn ping_reply(completion: &PingCompletion) -> &PingReply {
    match completion {
        PingCompletion::Ping(result) => match &result.outcome {
            Ok(reply) => reply,
            Err(failure) => panic!("ping failed: {failure}"),
        },
        other => panic!("not a ping: {other:?}"),
    }
}

fn ping_failure(completion: &PingCompletion) -> PingFailure {
    match completion {
        PingCompletion::Ping(result) => match result.outcome {
            Err(failure) => failure,
            Ok(_) => panic!("ping succeeded"),
        },
        other => panic!("not a ping: {other:?}"),
    }
}

fn peer(h: &Harness, node: usize, of: usize) -> PeerInfo {
    h.node(node).peer_info(h.nid(of)).expect("a known peer")
}

/// A ping buffer as a peer with `features` serves it: lo, then `nids` UP.
fn peer_buffer(features: u32, sequence: u32, nids: &[Nid]) -> Vec<u8> {
    let info = PingInfo {
        features,
        pid: LNET_PID_LUSTRE,
        sequence,
        nids: nids.iter().map(|nid| NiStatus::up(*nid)).collect(),
        large: Vec::new(),
        metadata: Vec::new(),
    };
    info.to_bytes().unwrap()
}

/// What a kernel with lo and 192.168.1.2@tcp serves (docs/protocol/wire.md §6.2), with sequence number
/// `sequence`: 48 bytes, features 0x1e.
fn kernel_buffer(sequence: u8) -> Vec<u8> {
    [
        &[0x67, 0x6e, 0x69, 0x70, 0x1e, 0, 0, 0, 0x39, 0x30, 0, 0, 2, 0, 0, 0][..],
        &[0, 0, 0, 0, 0, 0, 9, 0, sequence, 0, 0, 0, 0, 0, 0, 0],
        &[2, 1, 0xa8, 0xc0, 0, 0, 2, 0, 0xde, 0xc0, 0xaa, 0x15, 0, 0, 0, 0],
    ]
    .concat()
}

fn single_ni_node(nid: Nid) -> Engine {
    let config = EngineConfig::new(
        0x1870_f7d9_3b1d_2a00,
        LNET_PID_LUSTRE,
        vec![NiConfig::new(nid, LndKind::Tcp)],
    );
    Engine::new(config).unwrap()
}

/// A header from `from` to `to` (pids 12345).
fn header(from: Nid, to: Nid, payload_length: u32, body: Body) -> Header {
    Header {
        dest_nid: to,
        src_nid: from,
        dest_pid: LNET_PID_LUSTRE,
        src_pid: LNET_PID_LUSTRE,
        payload_length,
        body,
    }
}

fn push_header(from: Nid, to: Nid, length: usize, ack_wmd: WireHandle) -> Header {
    let body = Body::Put {
        ack_wmd,
        match_bits: LNET_PROTO_PING_MATCHBITS,
        hdr_data: 0,
        ptl_index: 0,
        offset: 0,
    };
    header(from, to, length as u32, body)
}

/// Delivers a whole message to a node driven by hand and returns how it was taken.
fn deliver(node: &mut Engine, now: Time, from: Nid, header: &Header, payload: &[u8]) -> RecvAction {
    let action = node.handle_header(now, NiId(1), from, header);
    if let RecvAction::Deliver { rx, length, .. } = action {
        node.rx_write(rx, 0, &payload[..length as usize]).unwrap();
        node.handle_recv_done(now, rx, HealthStatus::Ok).unwrap();
    }
    action
}

/// Takes the next transmit and reports it sent.
fn sent(node: &mut Engine, now: Time) -> (Transmit, Vec<u8>) {
    let transmit = node.poll_transmit().expect("a transmit");
    let payload = node.tx_payload(transmit.tx).unwrap().collect::<Vec<_>>().concat();
    node.handle_send_done(now, transmit.tx, HealthStatus::Ok).unwrap();
    (transmit, payload)
}

/// Plays the peer for a node driven by hand: the next transmit must be a discovery ping,
/// answered with `buffer` cut to the GET's sink as a kernel would.
fn answer_ping(node: &mut Engine, now: Time, buffer: &[u8]) {
    let (transmit, _) = sent(node, now);
    let Body::Get { return_wmd, sink_length, ptl_index: 0, match_bits, .. } = transmit.header.body
    else {
        panic!("not a ping: {transmit:?}");
    };
    assert_eq!(match_bits, LNET_PROTO_PING_MATCHBITS);
    let payload = &buffer[..buffer.len().min(sink_length as usize)];
    let reply = header(
        transmit.next_hop,
        transmit.header.src_nid,
        payload.len() as u32,
        Body::Reply { dst_wmd: return_wmd },
    );
    let action = deliver(node, now, transmit.next_hop, &reply, payload);
    assert!(matches!(action, RecvAction::Deliver { .. }), "REPLY not taken: {action:?}");
}

// ---------------------------------------------------------------- answering pings

#[test]
fn ping_is_answered_with_the_kernel_buffer_byte_for_byte() {
    let (client, server) = (tcp(192, 168, 1, 2), tcp(192, 168, 1, 1));
    let mut node = single_ni_node(client);
    let now = Time::ZERO;
    // Only the sequence number differs from the kernel's example: this is our first buffer.
    let expected = kernel_buffer(1);
    assert_eq!(node.local_ping_buffer(), &expected[..]);
    assert_eq!(node.local_ping_info().primary_nid(), Some(client));
    // The GET of docs/protocol/wire.md §10.10 and variants: REPLY length = min(sink, 48 - offset).
    let return_wmd = WireHandle { interface_cookie: 0x1870_f7d0_0000_0000, object_cookie: 0x409 };
    for (sink_length, src_offset, range) in
        [(272, 0, 0..48), (16, 0, 0..16), (272, 16, 16..48), (8, 40, 40..48), (272, 48, 48..48)]
    {
        let body = Body::Get {
            return_wmd,
            match_bits: LNET_PROTO_PING_MATCHBITS,
            ptl_index: 0,
            src_offset,
            sink_length,
        };
        let get = header(server, client, 0, body);
        assert_eq!(
            node.handle_header(now, NiId(1), server, &get),
            RecvAction::Discard { length: 0 }
        );
        let (transmit, payload) = sent(&mut node, now);
        let reply = Body::Reply { dst_wmd: return_wmd };
        assert_eq!(transmit.header, header(client, server, range.len() as u32, reply));
        assert_eq!(payload, expected[range]);
    }
    // Serving pings is LNet's business: no user events, no user MDs or MEs.
    assert_eq!(node.poll_event(), None);
    assert_eq!((node.md_count(), node.me_count()), (0, 0));
    // A ping never makes the pinged node discover the pinger.
    let pinger = node.peer_info(server).unwrap();
    assert!(!pinger.state.intersects(PeerState::DISCOVERING | PeerState::DISCOVERED));
    node.check_invariants().unwrap();
}

#[test]
fn ping_api_returns_the_peers_buffer_without_discovering_it() {
    let mut h = Harness::pair();
    let id = h.ping(0, h.process(1), Duration::from_secs(10), None).unwrap();
    h.drive();
    h.assert_quiescent();
    let completions = h.take_completions(0);
    assert_eq!(completions.len(), 1);
    let PingCompletion::Ping(result) = &completions[0] else { panic!("not a ping") };
    assert_eq!((result.id, result.target), (id, h.process(1)));
    let reply = ping_reply(&completions[0]);
    assert_eq!(&reply.info, h.node(1).local_ping_info());
    assert_eq!((reply.primary_nid, reply.replier, reply.length), (Some(h.nid(1)), h.nid(1), 48));
    assert_eq!(reply.info.features, 0x1e);
    // One GET with lnetctl's sink, one REPLY; no discovery on either side.
    let sent = h.take_transmitted(0);
    assert_eq!(summary(&sent), ["ping"]);
    assert!(matches!(sent[0].body, Body::Get { sink_length: PING_SINK, src_offset: 0, .. }));
    assert_eq!(summary(&h.take_transmitted(1)), ["REPLY"]);
    assert!(!peer(&h, 0, 1).state.intersects(PeerState::DISCOVERED | PeerState::MULTI_RAIL));
    assert!(h.take_events(0).is_empty());
}

#[test]
fn ping_of_ourselves_is_served_through_loopback() {
    let mut node = single_ni_node(tcp(192, 168, 1, 2));
    let lo = ProcessId::new(Nid::LO_0, LNET_PID_ANY);
    node.ping(Time::ZERO, lo, Duration::from_secs(1), None).unwrap();
    let completion = node.poll_completion().expect("loopback completes inside the call");
    let reply = ping_reply(&completion);
    assert_eq!(&reply.info, node.local_ping_info());
    assert_eq!(node.poll_transmit(), None);
    node.check_invariants().unwrap();
}

#[test]
fn ipv6_only_node_serves_large_entries() {
    let config = HarnessConfig { node_nids: vec![vec![v6(1)], vec![v6(2)]], ..Default::default() };
    let mut h = Harness::new(config);
    // docs/protocol/wire.md §6.2: lo, no nid4 entry, one 24-byte large entry; entry 0 holds the size, 56.
    let expected = [
        &[0x67, 0x6e, 0x69, 0x70, 0x7e, 0, 0, 0, 0x39, 0x30, 0, 0, 1, 0, 0, 0][..],
        &[0, 0, 0, 0, 0, 0, 9, 0, 1, 0, 0, 0, 56, 0, 0, 0],
        &[0xde, 0xc0, 0xaa, 0x15, 0x0c, 0x02, 0, 0],
        &[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
    ]
    .concat();
    assert_eq!(h.node(1).local_ping_buffer(), &expected[..]);
    h.ping(0, h.process(1), Duration::from_secs(10), None).unwrap();
    h.drive();
    let completions = h.take_completions(0);
    let reply = ping_reply(&completions[0]);
    assert_eq!((reply.info.features, reply.length), (0x7e, 56));
    assert_eq!((reply.info.nids.len(), reply.info.large.clone()), (0, vec![NiStatus::up(v6(2))]));
    assert_eq!(reply.primary_nid, Some(v6(2)));
    // Discovery works over large NIDs too.
    h.post(1, PORTAL, BITS, buffer(8));
    let md = h.bind(0, one_shot(b"six"));
    h.put(0, &put_to(md, h.process(1))).unwrap();
    h.drive();
    h.assert_quiescent();
    assert_eq!(kinds(&h.take_events(1)), [(EventKind::Put, EventStatus::Ok)]);
    let known = peer(&h, 0, 1);
    assert_eq!((known.primary_nid, known.multi_rail()), (v6(2), true));
}

#[test]
fn truncated_ping_reply_is_retried_with_the_size_the_peer_claims() {
    // Node 1 has 250 NIDs: 16 + 16 x 251 = 4032 bytes, more than lnetctl's 3960-byte sink.
    let many: Vec<Nid> = (0..250).map(|i| tcp(10, 1, 0, i as u8 + 1)).collect();
    let config = HarnessConfig { node_nids: vec![vec![node_nid(0)], many], ..Default::default() };
    let mut h = Harness::new(config);
    h.ping(0, h.process(1), Duration::from_secs(10), None).unwrap();
    h.drive();
    let completions = h.take_completions(0);
    let reply = ping_reply(&completions[0]);
    assert_eq!((reply.length, reply.info.nids.len()), (4032, 250));
    let sinks: Vec<u32> = h
        .take_transmitted(0)
        .iter()
        .filter_map(|header| match header.body {
            Body::Get { sink_length, .. } => Some(sink_length),
            _ => None,
        })
        .collect();
    assert_eq!(sinks, [3960, 4032]);

    // Discovery does the same from its 272-byte sink, and remembers the size.
    h.discover(0, h.nid(1), false).unwrap();
    h.drive();
    h.assert_quiescent();
    let known = peer(&h, 0, 1);
    assert_eq!((known.nis.len(), known.data_bytes, known.multi_rail()), (250, 4032, true));
    let sinks: Vec<u32> = h
        .take_transmitted(0)
        .iter()
        .filter_map(|header| match header.body {
            Body::Get { sink_length, .. } => Some(sink_length),
            _ => None,
        })
        .collect();
    assert_eq!(sinks, [LNET_PING_INFO_MIN_SIZE as u32, 4032]);
    // Node 0 grew its push target on the truncated reply, so node 1's push fit.
    assert!(peer(&h, 1, 0).state.contains(PeerState::DISCOVERED));
}

#[test]
fn ping_failures_are_reported() {
    let mut h = Harness::pair();
    assert_eq!(
        h.ping(0, ProcessId::new(Nid::ANY, LNET_PID_LUSTRE), Duration::from_secs(1), None),
        Err(PingStartError::AnyNid)
    );
    let stranger = tcp(10, 9, 9, 9);
    assert_eq!(
        h.ping(0, h.process(1), Duration::from_secs(1), Some(stranger)),
        Err(PingStartError::NotLocalSource(stranger))
    );
    // Nobody has that NID: the connection is refused, the GET fails.
    h.ping(0, ProcessId::new(node_nid(7), LNET_PID_LUSTRE), Duration::from_secs(1), None).unwrap();
    h.drive();
    let completions = h.take_completions(0);
    assert_eq!(ping_failure(&completions[0]), PingFailure::Send(EventStatus::Io));
    // A silent peer: the ping gives up at its timeout, long before the response tracker.
    h.fabric.model.set_link(0, 1, LinkConfig { loss_per_million: 1_000_000, ..LinkConfig::IDEAL });
    let start = h.now();
    h.ping(0, h.process(1), Duration::from_secs(5), None).unwrap();
    h.run_for(Duration::from_secs(6));
    let completions = h.take_completions(0);
    assert_eq!(ping_failure(&completions[0]), PingFailure::TimedOut);
    assert!(h.now() < start + Duration::from_secs(150));
    h.drive();
    assert!(h.take_completions(0).is_empty());
    h.assert_quiescent();
}

// ---------------------------------------------------------------- discovery

#[test]
fn first_put_waits_for_discovery_then_goes() {
    let mut h = Harness::pair();
    h.post(1, PORTAL, BITS, buffer(8));
    let md = h.bind(0, one_shot(b"held"));
    h.put(0, &put_to(md, h.process(1))).unwrap();
    // The PUT waits on the peer's queue; a ping goes first.
    let waiting = peer(&h, 0, 1);
    assert!(waiting.state.contains(PeerState::DISCOVERING));
    assert_eq!(waiting.pending, 1);
    assert_eq!(summary(&h.take_transmitted(0)), ["ping"]);
    assert!(h.take_events(0).is_empty());
    h.drive();
    h.assert_quiescent();
    // Node 1 is multi-rail with discovery: node 0 pushes its buffer and, once ACKed, sends the
    // PUT; node 1 learns node 0 from the push and pushes back.
    assert_eq!(summary(&h.take_transmitted(0)), ["push", "PUT", "ACK"]);
    assert_eq!(summary(&h.take_transmitted(1)), ["REPLY", "ACK", "push"]);
    assert_eq!(kinds(&h.take_events(0)), [(EventKind::Send, EventStatus::Ok)]);
    assert_eq!(kinds(&h.take_events(1)), [(EventKind::Put, EventStatus::Ok)]);
    let known = peer(&h, 0, 1);
    let learned = PeerState::MULTI_RAIL | PeerState::DISCOVERED | PeerState::NIDS_UPTODATE;
    assert_eq!(known.state, learned);
    assert_eq!((known.primary_nid, known.peer_sequence, known.node_sequence), (h.nid(1), 1, 1));
    assert_eq!(
        known.nis.iter().map(|ni| (ni.nid, ni.status)).collect::<Vec<_>>(),
        [(h.nid(1), LNET_NI_STATUS_UP)]
    );
    assert_eq!(peer(&h, 1, 0).state, learned);
    // The next PUT goes straight out.
    h.post(1, PORTAL, BITS, buffer(8));
    let md = h.bind(0, one_shot(b"next"));
    h.put(0, &put_to(md, h.process(1))).unwrap();
    h.drive();
    assert_eq!(summary(&h.take_transmitted(0)), ["PUT"]);
}

#[test]
fn silent_peer_fails_held_messages_when_the_ping_times_out() {
    let mut h = Harness::pair();
    h.fabric.model.set_link(0, 1, LinkConfig { loss_per_million: 1_000_000, ..LinkConfig::IDEAL });
    // No response tracker on the PUT itself: the failure is discovery's.
    let md = h.bind(0, one_shot(b"lost").options(MdOptions::NO_TRACK_RESPONSE));
    h.put(0, &put_to(md, h.process(1))).unwrap();
    h.run_for(Duration::from_secs(149));
    assert!(h.take_events(0).is_empty());
    assert_eq!(peer(&h, 0, 1).pending, 1);
    h.drive();
    assert_eq!(h.now(), Time::from_secs(150));
    let events = h.take_events(0);
    assert_eq!(kinds(&events), [(EventKind::Send, EventStatus::TimedOut)]);
    assert!(events[0].unlinked);
    let failed = peer(&h, 0, 1);
    assert!(failed.state.contains(PeerState::REDISCOVER));
    assert!(!failed.state.intersects(PeerState::DISCOVERING | PeerState::DISCOVERED));
    assert_eq!(failed.pending, 0);
    assert_eq!(h.node(0).stats().response_timeout_count, 1);
    h.assert_quiescent();
    // The next message tries again, and this time the peer answers.
    h.fabric.model.set_link(0, 1, LinkConfig::IDEAL);
    h.take_transmitted(0);
    h.post(1, PORTAL, BITS, buffer(8));
    let md = h.bind(0, one_shot(b"again"));
    h.put(0, &put_to(md, h.process(1))).unwrap();
    h.drive();
    assert_eq!(summary(&h.take_transmitted(0))[..3], ["ping", "push", "PUT"]);
    assert_eq!(kinds(&h.take_events(1)), [(EventKind::Put, EventStatus::Ok)]);
}

#[test]
fn pending_queue_is_bounded() {
    let peer_nid = tcp(192, 168, 1, 9);
    let mut node = single_ni_node(tcp(192, 168, 1, 2));
    let spec = MdSpec::new(Memory::new(b"q".to_vec()));
    let md = node.md_bind(spec, UnlinkMode::Unlink).unwrap();
    let target = ProcessId::new(peer_nid, LNET_PID_LUSTRE);
    for _ in 0..=MAX_DISCOVERY_PENDING {
        node.put(Time::ZERO, &put_to(md, target)).unwrap();
    }
    // The one beyond the bound fails at once with -ENOMEM; the others wait.
    let events: Vec<Event> = std::iter::from_fn(|| node.poll_event()).collect();
    assert_eq!(kinds(&events), [(EventKind::Send, EventStatus::NoMemory)]);
    assert_eq!(node.peer_info(peer_nid).unwrap().pending, MAX_DISCOVERY_PENDING);
    node.check_invariants().unwrap();
    // The peer answers (without multi-rail): they all go, 8 at a time (peer credits).
    answer_ping(&mut node, Time::ZERO, &peer_buffer(0x06, 1, &[peer_nid]));
    assert_eq!(node.peer_info(peer_nid).unwrap().pending, 0);
    let transmits: Vec<Transmit> = std::iter::from_fn(|| node.poll_transmit()).collect();
    assert_eq!(transmits.len(), 8);
    assert!(transmits.iter().all(|t| matches!(t.header.body, Body::Put { ptl_index: PORTAL, .. })));
}

#[test]
fn non_multi_rail_peers_are_never_pushed() {
    let now = Time::ZERO;
    let mut node = single_ni_node(tcp(192, 168, 1, 2));
    let spec = MdSpec::new(Memory::new(b"p".to_vec()));
    let md = node.md_bind(spec, UnlinkMode::Unlink).unwrap();
    // 0x06 (NI_STATUS | RTE_DISABLED): docs/protocol/wire.md's minimal safe choice for a userspace peer.
    let plain = tcp(192, 168, 1, 3);
    node.put(now, &put_to(md, ProcessId::new(plain, LNET_PID_LUSTRE))).unwrap();
    answer_ping(&mut node, now, &peer_buffer(0x06, 1, &[plain]));
    let (transmit, _) = sent(&mut node, now);
    assert!(matches!(transmit.header.body, Body::Put { ptl_index: PORTAL, .. }), "{transmit:?}");
    let known = node.peer_info(plain).unwrap();
    assert_eq!(
        known.state,
        PeerState::NO_DISCOVERY | PeerState::DISCOVERED | PeerState::NIDS_UPTODATE
    );
    assert_eq!((known.peer_sequence, known.node_sequence), (0, 0));
    // 0x0a (NI_STATUS | MULTI_RAIL, no DISCOVERY, no RTE_DISABLED): a router with discovery
    // off; multi-rail needs discovery on both sides, so it is not pushed either.
    let router = tcp(192, 168, 1, 4);
    node.put(now, &put_to(md, ProcessId::new(router, LNET_PID_LUSTRE))).unwrap();
    answer_ping(&mut node, now, &peer_buffer(0x0a, 1, &[router]));
    let (transmit, _) = sent(&mut node, now);
    assert!(matches!(transmit.header.body, Body::Put { ptl_index: PORTAL, .. }), "{transmit:?}");
    let known = node.peer_info(router).unwrap();
    assert!(known.state.contains(PeerState::ROUTER_ENABLED | PeerState::NO_DISCOVERY));
    assert!(!known.multi_rail());
    node.check_invariants().unwrap();
}

#[test]
fn discovery_disabled_pings_once_and_never_pushes() {
    let mut config = HarnessConfig::default();
    config.tunables.discovery = false;
    let mut h = Harness::new(config);
    // No DISCOVERY bit: NI_STATUS | RTE_DISABLED | MULTI_RAIL.
    assert_eq!(h.node(0).local_ping_info().features, 0x0e);
    for round in 0..2 {
        h.post(1, PORTAL, BITS, buffer(8));
        let md = h.bind(0, one_shot(b"dd"));
        h.put(0, &put_to(md, h.process(1))).unwrap();
        h.drive();
        h.assert_quiescent();
        // First contact still pings (docs/protocol/semantics.md §6.7); nothing is pushed either way.
        let expected: &[&str] = if round == 0 { &["ping", "PUT"] } else { &["PUT"] };
        assert_eq!(summary(&h.take_transmitted(0)), expected);
        assert_eq!(
            summary(&h.take_transmitted(1)),
            if round == 0 { vec!["REPLY"] } else { vec![] }
        );
        assert_eq!(kinds(&h.take_events(1)), [(EventKind::Put, EventStatus::Ok)]);
    }
    let known = peer(&h, 0, 1);
    assert_eq!(
        known.state,
        PeerState::NO_DISCOVERY | PeerState::DISCOVERED | PeerState::NIDS_UPTODATE
    );
    // Forcing a discovery still only pings, and completes.
    h.discover(0, h.nid(1), true).unwrap();
    h.drive();
    let completions = h.take_completions(0);
    let PingCompletion::Discovery(result) = &completions[0] else { panic!("not a discovery") };
    assert!(!result.outcome.as_ref().unwrap().multi_rail());
    assert_eq!(summary(&h.take_transmitted(0)), ["ping"]);
}

// ---------------------------------------------------------------- pushes

#[test]
fn push_is_acked_and_applied() {
    let now = Time::ZERO;
    let (local, remote, remote2) = (tcp(192, 168, 1, 1), tcp(192, 168, 1, 2), tcp1(10, 9, 0, 2));
    let mut node = single_ni_node(local);
    let pushed = peer_buffer(0x1e, 5, &[remote, remote2]);
    let ack_wmd = WireHandle { interface_cookie: 0x1870_f7d9_3b1d_2a00, object_cookie: 0x40d };
    let push = push_header(remote, local, pushed.len(), ack_wmd);
    let action = deliver(&mut node, now, remote, &push, &pushed);
    assert!(matches!(action, RecvAction::Deliver { length: 64, discard: 0, .. }));
    // An ordinary PUT ACK (docs/protocol/wire.md §10.13): the bytes kept, the ping match bits.
    let (ack, _) = sent(&mut node, now);
    let body = Body::Ack { dst_wmd: ack_wmd, match_bits: LNET_PROTO_PING_MATCHBITS, mlength: 64 };
    assert_eq!(ack.header, header(local, remote, 0, body));
    // The peer is what the push says: multi-rail, both NIDs, its sequence number...
    let known = node.peer_info(remote).unwrap();
    assert!(known.multi_rail() && known.state.contains(PeerState::NIDS_UPTODATE));
    assert_eq!(known.peer_sequence, 5);
    let nids: Vec<(Nid, u32)> = known.nis.iter().map(|ni| (ni.nid, ni.status)).collect();
    assert_eq!(nids, [(remote, LNET_NI_STATUS_UP), (remote2, LNET_NI_STATUS_UP)]);
    // ...and it has not seen our buffer: we push it back, tracked, and ACKed it is done.
    let (back, payload) = sent(&mut node, now);
    let Body::Put { ack_wmd: ours, ptl_index: 0, match_bits, .. } = back.header.body else {
        panic!("not a push: {back:?}");
    };
    assert_eq!((match_bits, back.next_hop), (LNET_PROTO_PING_MATCHBITS, remote));
    assert_eq!(payload, node.local_ping_buffer());
    let acked = Body::Ack { dst_wmd: ours, match_bits, mlength: payload.len() as u32 };
    deliver(&mut node, now, remote, &header(remote, local, 0, acked), &[]);
    let known = node.peer_info(remote).unwrap();
    assert_eq!(known.node_sequence, 1);
    assert!(known.state.contains(PeerState::DISCOVERED));
    assert!(!known.state.contains(PeerState::DISCOVERING));
    // The push target was posted again: a newer push drops remote2, which we delete.
    let newer = peer_buffer(0x1e, 6, &[remote]);
    let push = push_header(remote, local, newer.len(), ack_wmd);
    let action = deliver(&mut node, now, remote, &push, &newer);
    assert!(matches!(action, RecvAction::Deliver { length: 48, .. }));
    sent(&mut node, now);
    let known = node.peer_info(remote).unwrap();
    assert_eq!(known.peer_sequence, 6);
    let nids: Vec<(Nid, u32)> = known.nis.iter().map(|ni| (ni.nid, ni.status)).collect();
    assert_eq!(nids, [(remote, LNET_NI_STATUS_UP)]);
    // A NID first listed DOWN is added DOWN, and that is a remote failure (health down).
    let remote3 = tcp1(10, 9, 0, 3);
    let mut info = PingInfo::parse(&newer).unwrap().0;
    info.sequence = 7;
    info.nids.push(NiStatus { nid: remote3, status: LNET_NI_STATUS_DOWN });
    let with_down = info.to_bytes().unwrap();
    let push = push_header(remote, local, with_down.len(), ack_wmd);
    deliver(&mut node, now, remote, &push, &with_down);
    sent(&mut node, now);
    let known = node.peer_info(remote).unwrap();
    assert_eq!(
        known.nis.last().map(|ni| (ni.nid, ni.status)),
        Some((remote3, LNET_NI_STATUS_DOWN))
    );
    assert_eq!(node.peer_ni_stats(remote3).unwrap().health.health_value, 900);
    assert_eq!(node.poll_transmit(), None);
    assert_eq!(node.poll_event(), None);
    node.check_invariants().unwrap();
}

#[test]
fn truncated_push_grows_the_target_and_pings_instead() {
    let now = Time::ZERO;
    let (local, remote) = (tcp(192, 168, 1, 1), tcp(192, 168, 1, 2));
    let mut node = single_ni_node(local);
    // 40 NIDs: 16 + 16 x 41 = 672 bytes, more than the initial 272-byte push target.
    let nids: Vec<Nid> = (0..40).map(|i| tcp(192, 168, 2, i + 1)).collect();
    let pushed = peer_buffer(0x1e, 3, &nids);
    let ack_wmd = WireHandle { interface_cookie: 1, object_cookie: 0x40d };
    let push = push_header(remote, local, pushed.len(), ack_wmd);
    let action = deliver(&mut node, now, remote, &push, &pushed);
    assert!(matches!(action, RecvAction::Deliver { length: 272, discard: 400, .. }));
    let (ack, _) = sent(&mut node, now);
    assert!(matches!(ack.header.body, Body::Ack { mlength: 272, .. }));
    // Discovery pings the peer for the whole buffer instead.
    let (ping, _) = sent(&mut node, now);
    assert!(matches!(ping.header.body, Body::Get { ptl_index: 0, sink_length: 672, .. }));
    // And the next push fits whole.
    let action = deliver(&mut node, now, remote, &push, &pushed);
    assert!(matches!(action, RecvAction::Deliver { length: 672, discard: 0, .. }));
    node.check_invariants().unwrap();
}

#[test]
fn pushes_from_non_multi_rail_or_corrupt_senders_are_acked_but_not_applied() {
    let now = Time::ZERO;
    let (local, remote) = (tcp(192, 168, 1, 1), tcp(192, 168, 1, 2));
    let mut node = single_ni_node(local);
    // The node knows the peer already: not multi-rail.
    let md = node.md_bind(MdSpec::new(Memory::new(b"k".to_vec())), UnlinkMode::Unlink).unwrap();
    node.put(now, &put_to(md, ProcessId::new(remote, LNET_PID_LUSTRE))).unwrap();
    answer_ping(&mut node, now, &peer_buffer(0x06, 1, &[remote]));
    sent(&mut node, now);
    let ack_wmd = WireHandle { interface_cookie: 1, object_cookie: 0x40d };
    // "A non-Multi-Rail peer is not supposed to be capable of sending a push."
    let plain = peer_buffer(0x06, 9, &[remote, tcp(192, 168, 1, 3)]);
    deliver(&mut node, now, remote, &push_header(remote, local, plain.len(), ack_wmd), &plain);
    let (ack, _) = sent(&mut node, now);
    assert!(matches!(ack.header.body, Body::Ack { mlength: 64, .. }));
    assert_eq!(node.poll_transmit(), None);
    let known = node.peer_info(remote).unwrap();
    assert!(!known.multi_rail());
    assert_eq!((known.peer_sequence, known.nis.len()), (0, 1));
    // Garbage: ACKed too, then the peer is pinged for the truth.
    let garbage = vec![0xa5; 48];
    deliver(&mut node, now, remote, &push_header(remote, local, 48, ack_wmd), &garbage);
    let (ack, _) = sent(&mut node, now);
    assert!(matches!(ack.header.body, Body::Ack { mlength: 48, .. }));
    let (ping, _) = sent(&mut node, now);
    assert!(matches!(ping.header.body, Body::Get { ptl_index: 0, .. }));
    node.check_invariants().unwrap();
}

// ---------------------------------------------------------------- the peer model

/// Two nodes with two rails each: `10.0.0.x@tcp` (primary) and `10.1.0.x@tcp1`.
fn two_rail_pair() -> Harness {
    let node_nids = (0..2u8).map(|i| vec![tcp(10, 0, 0, i + 1), tcp1(10, 1, 0, i + 1)]).collect();
    Harness::new(HarnessConfig { node_nids, ..Default::default() })
}

#[test]
fn me_with_a_specific_nid_matches_the_initiators_primary_nid() {
    let mut h = two_rail_pair();
    let (a1, a2, b2) = (tcp(10, 0, 0, 1), tcp1(10, 1, 0, 1), tcp1(10, 1, 0, 2));
    // Node 1 takes PUTs from node 0 only, named by its primary NID.
    let from_a = ProcessId::new(a1, LNET_PID_LUSTRE);
    let me =
        h.me_attach(1, PORTAL, from_a, BITS, 0, UnlinkMode::Unlink, InsertPosition::After).unwrap();
    h.md_attach(1, me, buffer(8), UnlinkMode::Unlink).unwrap();
    // Node 0 sends over its second rail, to node 1's second rail.
    let md = h.bind(0, one_shot(b"rail"));
    let request =
        PutRequest { source: Some(a2), ..put_to(md, ProcessId::new(b2, LNET_PID_LUSTRE)) };
    h.put(0, &request).unwrap();
    h.drive();
    h.assert_quiescent();
    // Discovery merged a2 under a1 on node 1 (from node 0's push), so the ME matched.
    let events = h.take_events(1);
    assert_eq!(kinds(&events), [(EventKind::Put, EventStatus::Ok)]);
    assert_eq!((events[0].initiator, events[0].source, events[0].sender), (from_a, a2, a2));
    let known = h.node(1).peer_info(a2).unwrap();
    assert_eq!(known.primary_nid, a1);
    assert_eq!(known.nis.iter().map(|ni| ni.nid).collect::<Vec<_>>(), [a1, a2]);
    // And node 0 knows node 1 by b1, though it pinged b2.
    assert_eq!(h.node(0).peer_info(b2).unwrap().primary_nid, tcp(10, 0, 0, 2));
    assert_eq!(h.node(0).peers().count(), 1);
    // A stranger's PUT does not match the ME.
    let stranger = tcp(10, 0, 0, 77);
    let body = Body::Put {
        ack_wmd: WireHandle::NONE,
        match_bits: BITS,
        hdr_data: 0,
        ptl_index: PORTAL,
        offset: 0,
    };
    h.inject(stranger, 1, Frame { header: header(stranger, h.nid(1), 1, body), payload: vec![1] });
    assert!(h.take_events(1).is_empty());
}

#[test]
fn peers_created_by_traffic_are_merged_when_discovery_links_them() {
    let mut h = two_rail_pair();
    let (a1, a2) = (tcp(10, 0, 0, 1), tcp1(10, 1, 0, 1));
    let (b1, b2) = (h.nid(1), tcp1(10, 1, 0, 2));
    // Node 1 hears from both of node 0's NIDs before knowing they are one node: two peers.
    for (from, to) in [(a1, b1), (a2, b2)] {
        let body = Body::Put {
            ack_wmd: WireHandle::NONE,
            match_bits: 0,
            hdr_data: 0,
            ptl_index: 9,
            offset: 0,
        };
        h.inject(from, 1, Frame { header: header(from, to, 0, body), payload: Vec::new() });
    }
    assert_eq!(h.node(1).peers().count(), 2);
    // Discovering a2: its buffer names a1 primary, which another peer owns: they merge.
    h.discover(1, a2, false).unwrap();
    h.drive();
    h.assert_quiescent();
    let completions = h.take_completions(1);
    let PingCompletion::Discovery(result) = &completions[0] else { panic!("not a discovery") };
    let merged = result.outcome.clone().unwrap();
    assert_eq!(merged.primary_nid, a1);
    assert_eq!(merged.nis.iter().map(|ni| ni.nid).collect::<Vec<_>>(), [a1, a2]);
    assert_eq!(h.node(1).peers().count(), 1);
    let known = h.node(1).peer_info(a1).unwrap();
    assert_eq!((known.primary_nid, known.nis), (merged.primary_nid, merged.nis));
}

#[test]
fn a_node_discovers_itself() {
    // sanity-lnet's "discover myself": the node's own NID is discovered through its NI like
    // any peer's, and the self peer lists the node's NIDs.
    let config = HarnessConfig {
        node_nids: vec![vec![tcp(10, 0, 0, 1), tcp(10, 0, 1, 1)], vec![tcp(10, 0, 0, 2)]],
        ..HarnessConfig::default()
    };
    let mut h = Harness::new(config);
    let own = h.nid(0);
    let id = h.discover(0, own, false).unwrap();
    h.drive();
    let completions = h.take_completions(0);
    let PingCompletion::Discovery(result) = &completions[0] else { panic!("not a discovery") };
    assert_eq!((result.id, result.nid), (id, own));
    let learned = result.outcome.clone().unwrap();
    assert_eq!(learned.primary_nid, own);
    let nids: Vec<Nid> = learned.nis.iter().map(|ni| ni.nid).collect();
    assert_eq!(nids, [tcp(10, 0, 0, 1), tcp(10, 0, 1, 1)]);
    assert!(learned.multi_rail());
    h.check();
}

#[test]
fn discover_api_reports_what_was_learned() {
    let mut h = Harness::pair();
    assert_eq!(h.discover(0, Nid::ANY, false), Err(DiscoverError::AnyNid));
    assert_eq!(h.discover(0, Nid::LO_0, false), Err(DiscoverError::LocalNid(Nid::LO_0)));
    let id = h.discover(0, h.nid(1), false).unwrap();
    h.drive();
    let completions = h.take_completions(0);
    let PingCompletion::Discovery(result) = &completions[0] else { panic!("not a discovery") };
    assert_eq!((result.id, result.nid), (id, h.nid(1)));
    assert_eq!(result.outcome.as_ref().map(|info| info.primary_nid), Ok(h.nid(1)));
    assert_eq!(summary(&h.take_transmitted(0)), ["ping", "push", "ACK"]);
    // Again, forced: ping and push once more even though nothing changed.
    h.discover(0, h.nid(1), true).unwrap();
    h.drive();
    assert_eq!(summary(&h.take_transmitted(0)), ["ping", "push"]);
    // A NID nobody has: the ping cannot be sent and discovery says why.
    h.discover(0, node_nid(5), false).unwrap();
    h.drive();
    let completions = h.take_completions(0);
    let PingCompletion::Discovery(result) = completions.last().unwrap() else { panic!() };
    assert_eq!(result.outcome, Err(EventStatus::Io));
    h.assert_quiescent();
}

#[test]
fn adding_and_removing_nis_rebuilds_the_buffer_and_pushes_it() {
    let mut h = Harness::pair();
    h.discover_all();
    h.take_transmitted(0);
    let extra = tcp1(10, 1, 0, 1);
    let now = h.now();
    let ni = h.node_mut(0).add_ni(now, NiConfig::new(extra, LndKind::Fabric)).unwrap();
    let info = h.node(0).local_ping_info().clone();
    assert_eq!(info.sequence, 2);
    assert_eq!(info.nids, [NiStatus::up(h.nid(0)), NiStatus::up(extra)]);
    h.drive();
    // Node 1 had acknowledged sequence 1: it gets the new buffer.
    assert_eq!(summary(&h.take_transmitted(0)), ["push"]);
    let known = peer(&h, 1, 0);
    assert_eq!((known.peer_sequence, known.nis.len()), (2, 2));
    let now = h.now();
    assert_eq!(h.node_mut(0).remove_ni(now, NiId::LOOPBACK), Err(NiRemoveError::Loopback));
    h.node_mut(0).remove_ni(now, ni).unwrap();
    assert_eq!(h.node_mut(0).remove_ni(now, ni), Err(NiRemoveError::AlreadyRemoved));
    assert_eq!(h.node(0).local_ping_info().sequence, 3);
    assert_eq!(h.node(0).ni_for_nid(extra), None);
    assert_eq!(h.node(0).ni_ids().count(), 2);
    assert!(h.node(0).ni_stats(ni).is_none());
    let from = h.nid(1);
    let stray =
        header(from, extra, 0, Body::Ack { dst_wmd: WireHandle::NONE, match_bits: 0, mlength: 0 });
    assert!(matches!(
        h.node_mut(0).handle_header(now, ni, from, &stray),
        RecvAction::ProtocolError(_)
    ));
    h.drive();
    // The vanished NID is deleted from the peer.
    let known = peer(&h, 1, 0);
    assert_eq!(known.peer_sequence, 3);
    assert_eq!(
        known.nis.iter().map(|ni| (ni.nid, ni.status)).collect::<Vec<_>>(),
        [(h.nid(0), LNET_NI_STATUS_UP)]
    );
    h.assert_quiescent();
}

// ---------------------------------------------------------------- hostile buffers
// A ping reply or push that claims our own NIDs or another peer's (docs/decisions/0016).

fn two_ni_node(first: Nid, second: Nid) -> Engine {
    let nis = vec![NiConfig::new(first, LndKind::Tcp), NiConfig::new(second, LndKind::Tcp)];
    Engine::new(EngineConfig::new(0x1870_f7d9_3b1d_2a00, LNET_PID_LUSTRE, nis)).unwrap()
}

fn nids_of(info: &PeerInfo) -> Vec<Nid> {
    info.nis.iter().map(|ni| ni.nid).collect()
}

/// The next transmit must be a discovery push: it is reported sent and ACKed by its target.
/// A PUT to `remote` that waits for the discovery the test then answers.
fn put_held_until_discovered(node: &mut Engine, now: Time, remote: Nid) {
    let md = node.md_bind(one_shot(b"held"), UnlinkMode::Unlink).unwrap();
    node.put(now, &put_to(md, ProcessId::new(remote, LNET_PID_LUSTRE))).unwrap();
}

/// Discovery ends (its push is acknowledged) and the held PUT leaves for `next_hop`.
fn assert_the_held_put_leaves_for(node: &mut Engine, now: Time, next_hop: Nid) {
    ack_push(node, now);
    let (put, _) = sent(node, now);
    assert_eq!(put.next_hop, next_hop);
    node.check_invariants().unwrap();
}

fn ack_push(node: &mut Engine, now: Time) {
    let (push, payload) = sent(node, now);
    let Body::Put { ack_wmd, ptl_index: 0, match_bits, .. } = push.header.body else {
        panic!("not a push: {push:?}");
    };
    let acked = Body::Ack { dst_wmd: ack_wmd, match_bits, mlength: payload.len() as u32 };
    let ack = header(push.next_hop, push.header.src_nid, 0, acked);
    deliver(node, now, push.next_hop, &ack, &[]);
}

/// PUTs `count` messages to `target` and returns the next hop each went to.
fn put_hops(node: &mut Engine, now: Time, target: Nid, count: usize) -> Vec<Nid> {
    (0..count)
        .map(|_| {
            let md = node.md_bind(one_shot(b"data"), UnlinkMode::Unlink).unwrap();
            node.put(now, &put_to(md, ProcessId::new(target, LNET_PID_LUSTRE))).unwrap();
            let (put, _) = sent(node, now);
            assert!(matches!(put.header.body, Body::Put { ptl_index: PORTAL, .. }), "{put:?}");
            put.next_hop
        })
        .collect()
}

/// A peer `nid` that traffic created (a PUT from it, dropped) and a push from it made
/// multi-rail with `nids`; our push back is ACKed.
fn discovered_peer(node: &mut Engine, now: Time, local: Nid, nids: &[Nid]) {
    let from = nids[0];
    let body = Body::Put {
        ack_wmd: WireHandle::NONE,
        match_bits: 0,
        hdr_data: 0,
        ptl_index: 9,
        offset: 0,
    };
    deliver(node, now, from, &header(from, local, 0, body), &[]);
    let pushed = peer_buffer(0x1e, 1, nids);
    let ack_wmd = WireHandle { interface_cookie: 1, object_cookie: 0x40d };
    deliver(node, now, from, &push_header(from, local, pushed.len(), ack_wmd), &pushed);
    let (ack, _) = sent(node, now);
    assert!(matches!(ack.header.body, Body::Ack { .. }));
    ack_push(node, now);
    assert_eq!(nids_of(&node.peer_info(from).unwrap()), nids);
}

#[test]
fn ping_reply_listing_our_own_nid_does_not_attach_it() {
    let now = Time::ZERO;
    let (local, local2, remote) = (tcp(192, 168, 1, 1), tcp1(10, 9, 0, 1), tcp(192, 168, 1, 2));
    let mut node = two_ni_node(local, local2);
    put_held_until_discovered(&mut node, now, remote);
    // The peer claims our second NID as one of its own.
    answer_ping(&mut node, now, &peer_buffer(0x1e, 1, &[remote, local2]));
    let known = node.peer_info(remote).unwrap();
    assert_eq!((known.primary_nid, nids_of(&known)), (remote, vec![remote]));
    assert!(node.peer_info(local2).is_none());
    assert_eq!(node.stats().discovery_nids_refused, 1);
    assert_eq!(node.discovery_nids_refused(), 1, "the driver's cheap read agrees");
    let refused = RefusedNid { peer: remote, nid: local2, reason: RefusedReason::Local };
    assert_eq!(node.last_refused_nid(), Some(refused));
    // The rest of the reply counts: the peer is multi-rail, pushed, and the PUT goes to it.
    assert!(known.multi_rail());
    ack_push(&mut node, now);
    let (put, _) = sent(&mut node, now);
    assert_eq!(put.next_hop, remote);
    assert_eq!(put_hops(&mut node, now, remote, 4), [remote; 4]);
    node.check_invariants().unwrap();
}

#[test]
fn ping_reply_naming_our_own_nid_primary_is_refused() {
    let now = Time::ZERO;
    let (local, remote) = (tcp(192, 168, 1, 1), tcp(192, 168, 1, 2));
    let mut node = single_ni_node(local);
    put_held_until_discovered(&mut node, now, remote);
    answer_ping(&mut node, now, &peer_buffer(0x1e, 1, &[local, remote]));
    // Without the check the peer became ours: primary 192.168.1.1@tcp.
    let known = node.peer_info(remote).unwrap();
    assert_eq!((known.primary_nid, nids_of(&known)), (remote, vec![remote]));
    assert!(node.peer_info(local).is_none());
    assert_eq!(node.stats().discovery_nids_refused, 1);
    ack_push(&mut node, now);
    let (put, _) = sent(&mut node, now);
    assert_eq!(put.next_hop, remote);
    assert_eq!(put_hops(&mut node, now, remote, 2), [remote; 2]);
    node.check_invariants().unwrap();
}

#[test]
fn push_naming_our_own_nid_primary_cannot_replace_the_peer() {
    let now = Time::ZERO;
    let (local, remote, remote2) = (tcp(192, 168, 1, 1), tcp(192, 168, 1, 2), tcp1(10, 9, 0, 2));
    let mut node = single_ni_node(local);
    discovered_peer(&mut node, now, local, &[remote, remote2]);
    // A newer push from the same peer names our NID primary.
    let hostile = peer_buffer(0x1e, 6, &[local, remote]);
    let ack_wmd = WireHandle { interface_cookie: 1, object_cookie: 0x40e };
    deliver(&mut node, now, remote, &push_header(remote, local, hostile.len(), ack_wmd), &hostile);
    let (ack, _) = sent(&mut node, now);
    assert!(matches!(ack.header.body, Body::Ack { .. }));
    let known = node.peer_info(remote).unwrap();
    assert_eq!((known.primary_nid, nids_of(&known)), (remote, vec![remote, remote2]));
    assert!(node.peer_info(local).is_none());
    assert_eq!(node.stats().discovery_nids_refused, 1);
    let reason = RefusedReason::LocalPrimary;
    assert_eq!(node.last_refused_nid(), Some(RefusedNid { peer: remote, nid: local, reason }));
    // Traffic to the peer still goes to its own NIDs.
    let hops = put_hops(&mut node, now, remote, 4);
    assert!(hops.iter().all(|hop| *hop == remote || *hop == remote2), "{hops:?}");
    node.check_invariants().unwrap();
}

#[test]
fn ping_reply_cannot_take_a_configured_peers_nid() {
    let now = Time::ZERO;
    let (local, remote) = (tcp(192, 168, 1, 1), tcp(192, 168, 1, 2));
    let (b1, b2) = (tcp(192, 168, 1, 3), tcp1(10, 9, 0, 3));
    let mut node = single_ni_node(local);
    node.peer_add(now, b1, &[b2], true, false).unwrap();
    put_held_until_discovered(&mut node, now, remote);
    // lustre: lnet_peer_add_nid() answers -EEXIST for a NID configured on another peer.
    answer_ping(&mut node, now, &peer_buffer(0x1e, 1, &[remote, b2]));
    assert_eq!(nids_of(&node.peer_info(remote).unwrap()), [remote]);
    let configured = node.peer_info(b2).unwrap();
    assert_eq!((configured.primary_nid, nids_of(&configured)), (b1, vec![b1, b2]));
    assert_eq!(node.stats().discovery_nids_refused, 1);
    let reason = RefusedReason::ConfiguredElsewhere;
    assert_eq!(node.last_refused_nid(), Some(RefusedNid { peer: remote, nid: b2, reason }));
    assert_the_held_put_leaves_for(&mut node, now, remote);
}

#[test]
fn ping_reply_cannot_take_a_locked_primary_from_a_peer_with_other_nids() {
    let now = Time::ZERO;
    let (local, remote) = (tcp(192, 168, 1, 1), tcp(192, 168, 1, 2));
    let (b1, b2) = (tcp(192, 168, 1, 3), tcp1(10, 9, 0, 3));
    let mut node = single_ni_node(local);
    discovered_peer(&mut node, now, local, &[b1, b2]);
    let state = node.peer_info(b1).unwrap().state;
    node.set_peer_state(b1, state | PeerState::LOCK_PRIMARY).unwrap();
    put_held_until_discovered(&mut node, now, remote);
    answer_ping(&mut node, now, &peer_buffer(0x1e, 1, &[remote, b1]));
    // lustre: "Peer %s NID %s is already locked with peer %s": both flagged, nothing moves.
    let attacker = node.peer_info(remote).unwrap();
    assert_eq!(nids_of(&attacker), [remote]);
    let locked = node.peer_info(b1).unwrap();
    assert_eq!((locked.primary_nid, nids_of(&locked)), (b1, vec![b1, b2]));
    assert!(attacker.state.contains(PeerState::BAD_CONFIG));
    assert!(locked.state.contains(PeerState::BAD_CONFIG));
    assert_the_held_put_leaves_for(&mut node, now, remote);
}

#[test]
fn ping_reply_moves_a_discovered_peers_nid_as_the_kernel_does() {
    let now = Time::ZERO;
    let (local, remote) = (tcp(192, 168, 1, 1), tcp(192, 168, 1, 2));
    let (b1, b2) = (tcp(192, 168, 1, 3), tcp1(10, 9, 0, 3));
    let mut node = single_ni_node(local);
    discovered_peer(&mut node, now, local, &[b1, b2]);
    put_held_until_discovered(&mut node, now, remote);
    // Neither configured nor locked: the NID moves (lustre: lnet_peer_add_nid() detaches it
    // from the peer that had it), and that peer is discovered again on its next message.
    answer_ping(&mut node, now, &peer_buffer(0x1e, 1, &[remote, b2]));
    assert_eq!(nids_of(&node.peer_info(b2).unwrap()), [remote, b2]);
    let rest = node.peer_info(b1).unwrap();
    assert_eq!((rest.primary_nid, nids_of(&rest)), (b1, vec![b1]));
    assert_eq!(node.stats().discovery_nids_refused, 0);
    node.check_invariants().unwrap();
}

#[test]
fn a_locked_primary_alone_on_its_peer_moves_with_its_lock() {
    let now = Time::ZERO;
    let (local, remote, b1) = (tcp(192, 168, 1, 1), tcp(192, 168, 1, 2), tcp(192, 168, 1, 3));
    let mut node = single_ni_node(local);
    // A peer created by traffic, its only NID locked primary (as the upper layer does).
    let body = Body::Put {
        ack_wmd: WireHandle::NONE,
        match_bits: 0,
        hdr_data: 0,
        ptl_index: 9,
        offset: 0,
    };
    deliver(&mut node, now, b1, &header(b1, local, 0, body), &[]);
    let state = node.peer_info(b1).unwrap().state;
    node.set_peer_state(b1, state | PeerState::LOCK_PRIMARY).unwrap();
    put_held_until_discovered(&mut node, now, remote);
    // lustre: lnet_peer_add_nid(): the NID locked first stays primary; the old peer goes.
    answer_ping(&mut node, now, &peer_buffer(0x1e, 1, &[remote, b1]));
    let merged = node.peer_info(remote).unwrap();
    assert_eq!((merged.primary_nid, nids_of(&merged)), (b1, vec![b1, remote]));
    assert!(merged.state.contains(PeerState::LOCK_PRIMARY));
    assert_eq!(node.peers().count(), 1);
    node.check_invariants().unwrap();
}

#[test]
fn push_into_the_peer_for_our_own_nid_is_refused() {
    let now = Time::ZERO;
    let (local, attacker) = (tcp(192, 168, 1, 1), tcp(192, 168, 1, 9));
    let mut node = single_ni_node(local);
    // A message over the network from our own NID (as a recovery ping of our NI makes) gives
    // that NID a peer entry.
    let body = Body::Put {
        ack_wmd: WireHandle::NONE,
        match_bits: 0,
        hdr_data: 0,
        ptl_index: 9,
        offset: 0,
    };
    deliver(&mut node, now, local, &header(local, local, 0, body), &[]);
    assert_eq!(nids_of(&node.peer_info(local).unwrap()), [local]);
    // Pushes claiming to come from it offer another node's NID, ours primary or theirs: a
    // self peer takes only our own NIDs.
    let ack_wmd = WireHandle { interface_cookie: 1, object_cookie: 0x40f };
    let cases = [
        (3, [local, attacker], local, RefusedReason::LocalPeer),
        (4, [attacker, local], attacker, RefusedReason::LocalPeer),
    ];
    for (sequence, nids, named, reason) in cases {
        let hostile = peer_buffer(0x1e, sequence, &nids);
        let push = push_header(local, local, hostile.len(), ack_wmd);
        deliver(&mut node, now, local, &push, &hostile);
        while node.poll_transmit().is_some() {}
        assert_eq!(nids_of(&node.peer_info(local).unwrap()), [local]);
        assert!(node.peer_info(attacker).is_none());
        assert_eq!(node.last_refused_nid(), Some(RefusedNid { peer: local, nid: named, reason }));
    }
    node.check_invariants().unwrap();
}
