//! NIs of several nets on one address share one listening socket (issue 19): the connreq's
//! target NID picks the NI, a connreq for no NI of the node is closed unanswered as the
//! kernel's acceptor closes it, and the listener lives as long as any NI on it.
//! lustre: lnet/lnet/acceptor.c `lnet_acceptor()`, `lnet_accept()` ("No matching NI").

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4};

use super::script::*;
use super::*;

/// The shared address: test address 0, on `tcp` and `tcp1`.
const HOST: usize = 0;

fn nid_on(index: usize, net: &str) -> Nid {
    format!("{}@{net}", ADDRESSES[index]).parse().unwrap()
}

/// A node with one TCP NI, on test address `index` and `net`.
fn peer(index: usize, net: &str, port: u16) -> Node {
    Node::builder().tcp_ni(nid_on(index, net), tunables(port)).build().unwrap()
}

/// PUT `data` from `from` to `to` at its NID `to_nid`, and check it arrives.
fn put_to(from: &Node, to: &Node, to_nid: Nid, bits: u64, data: &[u8]) {
    let inbox = to.event_queue(4);
    to.post(10, bits, sink(data.len()), &inbox).unwrap();
    let target = ProcessId::new(to_nid, to.pid());
    let done =
        from.put_and_wait_ack(target, 10, bits, Memory::new(data.to_vec()), HANG_GUARD).unwrap();
    assert_eq!(done.event.mlength as usize, data.len());
    let put = recv(&inbox);
    assert_eq!(put.kind, EventKind::Put);
    assert_eq!(put.memory.unwrap().to_vec(), data);
}

/// A connreq v1 for `ip@tcp<number>`.
fn connreq_v1_on(ip: Ipv4Addr, number: u16) -> Vec<u8> {
    let nid4 = nid4(ip) | (u64::from(number) << 32);
    [&0xacce_7100u32.to_le_bytes()[..], &1u32.to_le_bytes(), &nid4.to_le_bytes()].concat()
}

/// Sends `connreq` to the node's shared listener from a fresh connection; what the node writes
/// back before closing.
fn answer_to(port: u16, connreq: &[u8]) -> Vec<u8> {
    let mut link = Link::connect(ADDRESSES[5], SocketAddrV4::new(ADDRESSES[HOST], port), false);
    link.send(connreq);
    link.read_to_close()
}

#[test]
fn two_nets_on_one_address_share_the_listener_through_removal_and_re_adding() {
    let port = free_port();
    let (tcp, tcp1) = (nid_on(HOST, "tcp"), nid_on(HOST, "tcp1"));
    // Both NIs on one address and port: one socket, no "address already in use".
    let node = Node::builder().tcp_ni(tcp, tunables(port)).tcp_ni(tcp1, tunables(port)).build();
    let node = node.expect("two nets on one address");
    let on_tcp = peer(1, "tcp", port);
    let on_tcp1 = peer(2, "tcp1", port);
    // Each peer dials the node on its own net; the connreq names the NI.
    put_to(&on_tcp, &node, tcp, 1, b"over tcp");
    put_to(&on_tcp1, &node, tcp1, 2, b"over tcp1");
    assert!(node.tcp_stats().conns_accepted >= 2, "{:?}", node.tcp_stats());
    // And the node reaches each of them back on that net.
    put_to(&node, &on_tcp, nid_on(1, "tcp"), 3, b"back on tcp");
    put_to(&node, &on_tcp1, nid_on(2, "tcp1"), 4, b"back on tcp1");

    // A connreq naming a NID of neither NI (another net on the address, another address):
    // closed, nothing written, counted.
    let failed = node.tcp_stats().handshakes_failed;
    assert_eq!(answer_to(port, &connreq_v1_on(ADDRESSES[HOST], 2)), b"", "tcp2: no matching NI");
    assert_eq!(answer_to(port, &connreq_v1(ADDRESSES[1])), b"", "another address's NID");
    let mut large = large_nid(ADDRESSES[HOST]);
    large[3] = 7;
    assert_eq!(answer_to(port, &connreq_v2(large)), b"", "v2 connreq for tcp7");
    wait_until("the refusals to be counted", || node.tcp_stats().handshakes_failed >= failed + 3);

    // `net del` of the tcp NI: the tcp1 NI keeps accepting (a new peer gets in), and a
    // connreq for the removed NI is now refused as one for no NI.
    node.remove_ni(tcp).unwrap();
    let new_on_tcp1 = peer(3, "tcp1", port);
    put_to(&new_on_tcp1, &node, tcp1, 5, b"after the del");
    assert_eq!(answer_to(port, &connreq_v1(ADDRESSES[HOST])), b"", "the removed NI");

    // Added back: it joins the listener still open, and a new peer on tcp reaches it.
    node.add_tcp_ni(NiConfig::new(tcp, LndKind::Tcp), tunables(port)).unwrap();
    let new_on_tcp = peer(4, "tcp", port);
    put_to(&new_on_tcp, &node, tcp, 6, b"after the re-add");
    put_to(&on_tcp1, &node, tcp1, 7, b"tcp1 still");

    // The last NI gone, the listener closes at once: the address and port are free.
    node.remove_ni(tcp).unwrap();
    node.remove_ni(tcp1).unwrap();
    std::net::TcpListener::bind(SocketAddrV4::new(ADDRESSES[HOST], port))
        .expect("the listener closed with its last NI");
    for node in [node, on_tcp, on_tcp1, new_on_tcp, new_on_tcp1] {
        node.shutdown();
    }
}

/// Large NIDs: `[::1]@tcp` and `[::1]@tcp1` share a listener too, and a connreq v2 for the
/// second gets a V4 hello from that NI (with a privileged source port; without one, only the
/// refusal of a NID of neither is checked).
#[test]
fn ipv6_nis_of_two_nets_share_the_listener() {
    let port = free_port();
    let ip = Ipv6Addr::LOCALHOST;
    let tcp1_net = nid_on(HOST, "tcp1").net();
    let (tcp, tcp1) = (Nid::ipv6(Net::TCP, ip), Nid::ipv6(tcp1_net, ip));
    let node = Node::builder().tcp_ni(tcp, tunables(port)).tcp_ni(tcp1, tunables(port)).build();
    let node = node.expect("two IPv6 NIs on one address");
    let to = SocketAddr::from((ip, port));
    let large = |number: u8| {
        let mut bytes = large_nid6(ip);
        bytes[3] = number;
        bytes
    };

    let mut stranger = Link::connect_any(ip.into(), to, false);
    stranger.send(&connreq_v2(large(2)));
    assert_eq!(stranger.read_to_close(), b"", "[::1]@tcp2: no matching NI");
    if !(512..1024).rev().any(|port| std::net::TcpListener::bind((ip, port)).is_ok()) {
        eprintln!("skipped the rest: this process cannot bind ports below 1024");
        return;
    }
    let kernel = large_nid6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 4));
    let mut link = Link::connect_any(ip.into(), to, true);
    link.send(&connreq_v2(large(1)));
    link.send(&hello_v4(kernel, large(1), (PID, 0), (KERNEL_INCARNATION, 0), CONTROL));
    let incarnation = node.tcp_incarnations()[1];
    let reply = hello_v4(large(1), kernel, (PID, 0), (incarnation, 0), CONTROL);
    link.expect(&reply, "the tcp1 NI's V4 hello");
    node.shutdown();
}
