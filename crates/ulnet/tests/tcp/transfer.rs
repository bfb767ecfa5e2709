//! Nodes talking to each other over TCP.

use ulnet::proto::addr::LNET_PID_USERFLAG;
use ulnet::*;

use crate::*;

#[test]
fn two_nodes_put_and_get_every_size() {
    let port = free_port();
    let (a, b) = (tcp_node(0, port), tcp_node(1, port));
    for (put, _) in put_and_get_every_size(&a, &b) {
        assert_eq!(put.initiator.nid, tcp_nid(0));
    }
    assert_eq!((a.stats().messages, b.stats().messages), (0, 0));
    let (sa, sb) = (a.tcp_stats(), b.tcp_stats());
    assert_eq!(sa.protocol_errors + sb.protocol_errors, 0);
    assert!(sa.conns_dialled >= 1, "{sa:?}");
    assert!(sb.conns_accepted >= 1, "{sb:?}");
}

/// A caller that streams PUTs and never waits for anything of its node: the output the
/// runtime holds back for a batch still goes out (the I/O thread writes it), whole and in order.
#[test]
fn a_stream_of_puts_nobody_waits_for_arrives_in_order() {
    const COUNT: u64 = 500;
    let port = free_port();
    let (a, b) = (tcp_node(0, port), tcp_node(1, port));
    let inbox = b.event_queue(COUNT as usize + 8);
    open_portal_12(&b, &inbox);
    let md = a.md_bind(MdSpec::new(Memory::new(vec![7; 8])), UnlinkMode::Retain, None).unwrap();
    for index in 0..COUNT {
        a.put(&put_to_portal_12(&b, md, index)).unwrap();
    }
    for index in 0..COUNT {
        let put = recv(&inbox);
        assert_eq!(put.kind, EventKind::Put);
        assert_eq!(put.hdr_data, index, "in order");
        assert_eq!(put.mlength, 8);
    }
}

#[test]
fn three_nodes_every_pair_both_ways() {
    let port = free_port();
    let nodes: Vec<Node> = (0..3).map(|index| tcp_node(index, port)).collect();
    for (from, sender) in nodes.iter().enumerate() {
        for (to, receiver) in nodes.iter().enumerate() {
            if from == to {
                continue;
            }
            for (round, size) in SIZES.into_iter().enumerate() {
                let bits = (from * 100 + to * 10 + round) as u64;
                put_and_check(sender, receiver, bits, &pattern(size, bits as u8));
                let served = pattern(size, !bits as u8);
                let inbox = receiver.event_queue(4);
                receiver.post(11, bits, source(served.clone()), &inbox).unwrap();
                let reply = sender
                    .get_into(receiver.process_id(), 11, bits, vec![0; size], HANG_GUARD)
                    .unwrap();
                assert_eq!(reply, served);
            }
        }
    }
    for node in &nodes {
        let stats = node.tcp_stats();
        assert_eq!(stats.protocol_errors, 0, "{stats:?}");
        // A REPLY's sender frees its message when its LND reports the send done, which may
        // come just after the GET's initiator has the REPLY: nothing may stay, eventually.
        let start = std::time::Instant::now();
        while node.stats().messages != 0 && start.elapsed() < HANG_GUARD {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(node.stats().messages, 0);
    }
}

/// Many messages in flight at once, both directions at the same time (so both sides dial each
/// other and the connection race is settled under load), small and large.
#[test]
fn many_concurrent_messages_both_ways() {
    const SENDERS: usize = 4;
    const PER_SENDER: usize = 100;
    let port = free_port();
    let (a, b) = (tcp_node(0, port), tcp_node(1, port));
    let size_of = |index: usize| if index % 10 == 9 { 1 << 20 } else { 4096 };
    let inboxes: Vec<EventQueue> = [&a, &b]
        .iter()
        .map(|node| {
            let inbox = node.event_queue(2 * SENDERS * PER_SENDER);
            for sender in 0..SENDERS {
                for index in 0..PER_SENDER {
                    let bits = (sender * PER_SENDER + index) as u64;
                    node.post(12, bits, sink(size_of(index)), &inbox).unwrap();
                }
            }
            inbox
        })
        .collect();
    std::thread::scope(|scope| {
        for (from, to) in [(&a, &b), (&b, &a)] {
            for sender in 0..SENDERS {
                scope.spawn(move || {
                    for index in 0..PER_SENDER {
                        let bits = (sender * PER_SENDER + index) as u64;
                        let data = pattern(size_of(index), bits as u8);
                        let done = from
                            .put_and_wait_ack(
                                to.process_id(),
                                12,
                                bits,
                                Memory::new(data),
                                HANG_GUARD,
                            )
                            .unwrap();
                        assert_eq!(done.event.mlength as usize, size_of(index));
                    }
                });
            }
        }
    });
    for inbox in &inboxes {
        let mut seen = vec![false; SENDERS * PER_SENDER];
        for _ in 0..SENDERS * PER_SENDER {
            let put = recv(inbox);
            assert_eq!(put.kind, EventKind::Put);
            let bits = put.match_bits as usize;
            assert!(!seen[bits], "match bits {bits} twice");
            seen[bits] = true;
            let expected = pattern(size_of(bits % PER_SENDER), bits as u8);
            assert_eq!(put.memory.unwrap().to_vec(), expected, "payload of {bits}");
        }
        assert!(inbox.is_empty());
    }
    let (sa, sb) = (a.tcp_stats(), b.tcp_stats());
    assert_eq!(sa.protocol_errors + sb.protocol_errors, 0, "{sa:?} {sb:?}");
    assert_eq!(sa.timeouts + sb.timeouts, 0);
}

/// A node restarts on the same address and port: new incarnation. The other side drops the old
/// connections (they end when the node goes) and talks to the new node, both ways.
#[test]
fn restarted_node_is_reached_again_both_ways() {
    let port = free_port();
    let a = tcp_node(0, port);
    let b = tcp_node(1, port);
    put_and_check(&a, &b, 1, b"before");
    put_and_check(&b, &a, 2, b"before, back");
    let old = b.tcp_incarnations();
    let live_before = a.tcp_stats().conns_live();
    assert!(live_before >= 1);
    b.shutdown();
    drop(b);
    wait_until("a to see b's connections close", || a.tcp_stats().conns_live() == 0);
    let b = tcp_node(1, port);
    assert_ne!(b.tcp_incarnations(), old, "a new incarnation");
    put_and_check(&a, &b, 3, &pattern(1 << 20, 3));
    put_and_check(&b, &a, 4, &pattern(4096, 4));
    assert!(a.tcp_stats().conns_closed >= live_before);
    assert_eq!(a.tcp_stats().protocol_errors, 0);
}

/// A PUT to a lazy portal with no match entry yet parks its connection's reader; posting the
/// buffer resumes it and the payload lands, and the connection carries on.
#[test]
fn lazy_portal_parks_and_resumes_the_connection() {
    let port = free_port();
    let (a, b) = (tcp_node(0, port), tcp_node(1, port));
    b.set_lazy_portal(13).unwrap();
    let data = pattern(64 << 10, 13);
    let to_b = b.process_id();
    let sending = {
        let a = a.clone();
        let data = data.clone();
        std::thread::spawn(move || {
            a.put_and_wait_ack(to_b, 13, 5, Memory::new(data), HANG_GUARD).unwrap()
        })
    };
    wait_until("the PUT to be delayed", || b.stats().messages == 1);
    let inbox = b.event_queue(4);
    b.post(13, 5, sink(data.len()), &inbox).unwrap();
    let put = recv(&inbox);
    assert_eq!(put.memory.unwrap().to_vec(), data);
    assert_eq!(sending.join().unwrap().event.mlength as usize, data.len());
    put_and_check(&a, &b, 6, b"after the park");
}

/// Outgoing connections from ordinary ports: a peer with `accept=all` sees a userspace process
/// (pid `port | LNET_PID_USERFLAG`) and answers over that connection; a peer with
/// `accept=secure` refuses it.
#[test]
fn unprivileged_source_ports() {
    let port = free_port();
    let a =
        Node::builder().tcp_ni(tcp_nid(0), tunables(port)).privileged_ports(false).build().unwrap();
    let b = tcp_node(1, port);
    let inbox = b.event_queue(4);
    b.post(10, 1, sink(5), &inbox).unwrap();
    a.put_and_wait_ack(b.process_id(), 10, 1, Memory::new(b"hello".to_vec()), HANG_GUARD).unwrap();
    let put = recv(&inbox);
    assert_eq!(put.initiator.nid, tcp_nid(0), "the NID comes from the source address");
    assert_ne!(put.initiator.pid & LNET_PID_USERFLAG, 0, "a userspace process: {}", put.initiator);

    let secure = SocklndTunables { accept: AcceptPolicy::Secure, ..tunables(port) };
    let c = tcp_node_with(2, secure);
    let refused =
        a.put_and_wait_ack(c.process_id(), 10, 1, Memory::new(b"hello".to_vec()), HANG_GUARD);
    assert!(
        matches!(refused, Err(TransferError::Failed { kind: EventKind::Send, .. })),
        "{refused:?}"
    );
    wait_until("c to count the refusal", || c.tcp_stats().handshakes_failed >= 1);
    assert_eq!(c.tcp_stats().conns_accepted, 0);
}

/// With privileged source ports (root, or CAP_NET_BIND_SERVICE), `accept=secure` peers take
/// us as a full peer with pid 12345. Skipped (with a message) without the privilege.
#[test]
fn privileged_source_ports_pass_accept_secure() {
    if !can_bind_privileged() {
        eprintln!("skipped: this process cannot bind ports below 1024");
        return;
    }
    let port = free_port();
    let secure = SocklndTunables { accept: AcceptPolicy::Secure, ..tunables(port) };
    let (a, b) = (tcp_node_with(0, secure), tcp_node_with(1, secure));
    let inbox = b.event_queue(4);
    b.post(10, 1, sink(2), &inbox).unwrap();
    a.put_and_wait_ack(b.process_id(), 10, 1, Memory::new(b"ok".to_vec()), HANG_GUARD).unwrap();
    assert_eq!(recv(&inbox).initiator, a.process_id());
    put_and_check(&b, &a, 2, b"and back");
}

/// `accept=none`: the node has no listener but dials out, and its peers answer over the
/// connections it opened.
#[test]
fn accept_none_dials_out_only() {
    let port = free_port();
    let none = SocklndTunables { accept: AcceptPolicy::None, ..tunables(port) };
    let a = tcp_node_with(0, none);
    let b = tcp_node(1, port);
    put_and_check(&a, &b, 1, b"out");
    put_and_check(&b, &a, 2, b"back over a's connections");
    assert!(std::net::TcpStream::connect((ADDRESSES[0], port)).is_err(), "no listener");
}

/// A peer nobody listens for: the PUT fails (no hang), and the node keeps serving others.
#[test]
fn unreachable_peer_fails_the_message() {
    let port = free_port();
    let a = tcp_node(0, port);
    let nobody = ProcessId::new(tcp_nid(5), LNET_PID_LUSTRE);
    let result = a.put_and_wait_ack(nobody, 10, 1, Memory::new(vec![1; 10]), HANG_GUARD);
    assert!(
        matches!(result, Err(TransferError::Failed { kind: EventKind::Send, .. })),
        "{result:?}"
    );
    assert!(a.tcp_stats().dials_failed >= 1);
    let b = tcp_node(1, port);
    put_and_check(&a, &b, 2, b"still working");
}

pub fn can_bind_privileged() -> bool {
    (512..1024).rev().any(|port| std::net::TcpListener::bind((ADDRESSES[5], port)).is_ok())
}

/// A peer that was down comes up: the first PUT fails (connection refused), the next waits out
/// the reconnect backoff (min_reconnect, 1 s) and goes through on a fresh connection.
#[test]
fn reconnects_after_backoff_when_the_peer_comes_up() {
    let port = free_port();
    let a = tcp_node(0, port);
    let to_b = ProcessId::new(tcp_nid(1), LNET_PID_LUSTRE);
    let first = a.put_and_wait_ack(to_b, 10, 1, Memory::new(vec![1; 8]), HANG_GUARD);
    assert!(matches!(first, Err(TransferError::Failed { kind: EventKind::Send, .. })), "{first:?}");
    let b = tcp_node(1, port);
    put_and_check(&a, &b, 2, b"after the backoff");
    let stats = a.tcp_stats();
    assert!(stats.dials_failed >= 1 && stats.conns_dialled >= 1, "{stats:?}");
}

/// `lnetctl ping` and `discover` over TCP: the REPLY carries the peer's ping buffer, and
/// discovery records its primary NID.
#[test]
fn ping_and_discover_over_tcp() {
    let port = free_port();
    let (a, b) = (tcp_node(0, port), tcp_node(1, port));
    let reply = a.ping(b.process_id(), HANG_GUARD, None).unwrap();
    assert_eq!(reply.replier, tcp_nid(1));
    assert_eq!(reply.primary_nid, Some(tcp_nid(1)));
    assert_eq!(reply.info.pid, LNET_PID_LUSTRE);
    let info = b.discover(tcp_nid(0), true).unwrap();
    assert_eq!(info.primary_nid, tcp_nid(0));
    assert_eq!(a.tcp_stats().protocol_errors + b.tcp_stats().protocol_errors, 0);
}

/// `net set --conns-per-peer`: peers met after the change get that many connections of each
/// bulk type (ksocknal_incr_conn_count()): one CONTROL plus two BULK_IN and two BULK_OUT. Both
/// sides need the setting: the accepting side refuses connections beyond its own count.
#[test]
fn conns_per_peer_set_live_applies_to_peers_met_afterwards() {
    let port = free_port();
    let (a, b) = (tcp_node(0, port), tcp_node(1, port));
    let own = tcp_nid(0);
    assert_eq!(a.conns_per_peer(own), Some(1), "auto on loopback (no link speed) is 1");
    assert_eq!(a.set_conns_per_peer(Some(own), ConnsPerPeer::Fixed(2)), Ok(1));
    assert_eq!(a.conns_per_peer(own), Some(2));
    assert_eq!(
        a.set_conns_per_peer(Some(nid("127.0.9.9@tcp")), ConnsPerPeer::Fixed(5)),
        Ok(0),
        "not ours"
    );
    assert_eq!(b.set_conns_per_peer(None, ConnsPerPeer::Fixed(2)), Ok(1));
    let inbox = b.event_queue(4);
    b.post(10, 1, sink(8), &inbox).unwrap();
    a.put_and_wait_ack(b.process_id(), 10, 1, Memory::new(vec![1; 8]), HANG_GUARD).unwrap();
    wait_until("a to dial 1 + 2 x 2 connections", || {
        let stats = a.tcp_stats();
        stats.conns_dialled == 5 && stats.conns_live() == 5
    });
    // Auto again resolves from the link speed, as at start-up.
    assert_eq!(a.set_conns_per_peer(None, ConnsPerPeer::Auto), Ok(1));
    assert_eq!(a.conns_per_peer(own), Some(1));
    let lo = Node::loopback().unwrap();
    assert_eq!(lo.set_conns_per_peer(None, ConnsPerPeer::Fixed(3)), Ok(0), "no socklnd NI");
    assert_eq!(lo.conns_per_peer(Nid::LO_0), None);
}

/// socklnd's `typed_conns=0`: each peer gets one connection of type ANY that carries every
/// message, small and bulk, both ways.
#[test]
fn untyped_connections_carry_everything_both_ways() {
    let port = free_port();
    let untyped = || SocklndTunables { typed_conns: false, ..tunables(port) };
    let (a, b) = (tcp_node_with(0, untyped()), tcp_node_with(1, untyped()));
    for (round, size) in SIZES.into_iter().enumerate() {
        put_and_check(&a, &b, round as u64, &pattern(size, round as u8));
        put_and_check(&b, &a, round as u64, &pattern(size, 50 + round as u8));
    }
    let (sa, sb) = (a.tcp_stats(), b.tcp_stats());
    assert_eq!(sa.protocol_errors + sb.protocol_errors, 0);
}
