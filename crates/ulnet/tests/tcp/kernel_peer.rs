//! A scripted kernel peer against a live node, both directions, checking every byte ulnet
//! sends: connreq, hellos, typed connections, frames, ZC-ACKs (piggy-backed and NOOPs),
//! keepalives, a peer reboot.
//!
//! Without the privilege to bind ports below 1024 the script's connections come from ordinary
//! ports, so the node sees each as a separate "userspace process" (pid `port | USERFLAG`); the
//! expectations follow (which pid the node answers, which connection carries a reply).

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, TcpListener};
use std::thread;
use std::time::Duration;

use ulnet::*;

use crate::script::*;
use crate::transfer::can_bind_privileged;
use crate::*;

const NODE: usize = 0;
const KERNEL: usize = 2;

fn node_ip() -> Ipv4Addr {
    ADDRESSES[NODE]
}

fn kernel_ip() -> Ipv4Addr {
    ADDRESSES[KERNEL]
}

/// Opens a connection from the scripted kernel to `node`'s acceptor: connreq, our hello of
/// type `ctype`, then checks the node's reply hello byte for byte.
fn dial_node(node: &Node, port: u16, privileged: bool, ctype: u32, incarnation: u64) -> Link {
    let mut link = Link::connect(kernel_ip(), SocketAddrV4::new(node_ip(), port), privileged);
    link.send(&connreq_v1(node_ip()));
    link.send(&Hello::active(kernel_ip(), node_ip(), incarnation, ctype).bytes());
    // The passive reply: same version, its identity, ours (as it accepted it) as destination,
    // the dst pid and incarnation we sent (0) echoed, its type for the connection.
    let reply = node_hello(node, 3, peer_type(ctype));
    link.expect(&reply.bytes(), "the node's reply hello");
    link
}

/// The node's hello in `version` for a connection of its type `ctype`, answering one that
/// named no pid and no incarnation.
fn node_hello(node: &Node, version: u32, ctype: u32) -> Hello {
    Hello {
        version,
        src: node_ip(),
        dst: kernel_ip(),
        src_pid: PID,
        dst_pid: 0,
        src_incarnation: node.tcp_incarnations()[0],
        dst_incarnation: 0,
        ctype,
    }
}

/// The type the other end gives a connection of type `ctype`: a kernel's BULK_IN is the node's
/// BULK_OUT and the other way round.
fn peer_type(ctype: u32) -> u32 {
    match ctype {
        BULK_IN => BULK_OUT,
        BULK_OUT => BULK_IN,
        other => other,
    }
}

/// A header from the scripted kernel to the node, both pid [`PID`].
fn to_node(msg_type: u32, payload_length: u32, body: [u8; 40]) -> Lnet {
    Lnet::new(node_ip(), kernel_ip(), msg_type, payload_length, body)
}

/// A header from the node (pid [`PID`]) to the kernel's `kernel_pid`.
fn to_kernel(kernel_pid: u32, msg_type: u32, payload_length: u32, body: [u8; 40]) -> Lnet {
    Lnet {
        dest_pid: kernel_pid,
        ..Lnet::new(kernel_ip(), node_ip(), msg_type, payload_length, body)
    }
}

fn kernel_wmd(object: u64) -> Wmd {
    Wmd { interface: KERNEL_COOKIE, object }
}

/// A PUT from the kernel to the node (portal 9), with a ZC request `cookie` (0 for none).
fn kernel_put(cookie: u64, ack: Wmd, bits: u64, data: &[u8]) -> Vec<u8> {
    let header = to_node(PUT, data.len() as u32, put_body(ack, bits, 0x0123_4567_89ab_cdef, 9, 0));
    [ksock(KSOCK_LNET, cookie, 0), header.nid4_bytes(), data.to_vec()].concat()
}

/// The ACK the node owes `put` (mlength `length`), piggy-backing `zc_ack`.
fn node_ack(kernel_pid: u32, zc_ack: u64, ack: Wmd, bits: u64, length: u32) -> Vec<u8> {
    let header = to_kernel(kernel_pid, ACK, 0, ack_body(ack, bits, length));
    [ksock(KSOCK_LNET, 0, zc_ack), header.nid4_bytes()].concat()
}

/// The kernel's side of the node's discovery: the ping GET (checked byte for byte) is answered
/// with a ping buffer that says "not multi-rail" (NI_STATUS | RTE_DISABLED, §6.4's minimal safe
/// choice), so the node never pushes.
fn answer_ping(link: &mut Link, node: &Node) {
    let frame = link.read_frame();
    let wmd = body_wmd(&frame.lnet[32..]);
    assert_eq!(wmd.interface, node.interface_cookie());
    let get = to_kernel(PID, GET, 0, get_body(wmd, PING_BITS, 0, 0, PING_SINK));
    assert_eq!(hex(&frame.bytes()), hex(&get.frame(&[])), "the node's discovery ping");
    link.send(&ping_reply_not_multi_rail(wmd));
}

/// The kernel's REPLY to the node's ping GET (`wmd`): a ping buffer that says "not
/// multi-rail".
fn ping_reply_not_multi_rail(wmd: Wmd) -> Vec<u8> {
    let buffer = ping_buffer(kernel_ip(), 0x06, 1);
    to_node(REPLY, buffer.len() as u32, reply_body(wmd)).frame(&buffer)
}

/// The kernel pings the node (the §10.10 GET, addressed to it): the REPLY carries the node's
/// ping buffer, `0@lo` first with the sequence number, then its NID, UP.
#[test]
fn kernel_pings_ulnet() {
    let port = free_port();
    let node = tcp_node(NODE, port);
    let mut link = dial_node(&node, port, false, CONTROL, KERNEL_INCARNATION);
    let kernel_pid = link.pid_seen_by_acceptor();
    let get = to_node(GET, 0, get_body(kernel_wmd(0x409), PING_BITS, 0, 0, PING_SINK));
    link.send(&get.frame(&[]));
    let frame = link.read_frame();
    let reply = to_kernel(kernel_pid, REPLY, 48, reply_body(kernel_wmd(0x409)));
    assert_eq!(hex(&frame.ksock), hex(&ksock(KSOCK_LNET, 0, 0)));
    assert_eq!(hex(&frame.lnet), hex(&reply.nid4_bytes()), "REPLY header: 48 bytes served");
    // NI_STATUS | RTE_DISABLED | MULTI_RAIL | DISCOVERY, like a kernel node; the sequence number
    // is the node's own.
    let sequence = u32::from_le_bytes(frame.payload[24..28].try_into().unwrap());
    assert_eq!(hex(&frame.payload), hex(&ping_buffer(node_ip(), 0x1e, sequence)));
}

#[test]
fn kernel_dials_ulnet_from_privileged_ports() {
    if !can_bind_privileged() {
        eprintln!("skipped: this process cannot bind ports below 1024");
        return;
    }
    kernel_dials_ulnet(true);
}

#[test]
fn kernel_dials_ulnet_from_unprivileged_ports() {
    kernel_dials_ulnet(false);
}

fn kernel_dials_ulnet(privileged: bool) {
    let port = free_port();
    let node = tcp_node(NODE, port);
    let inbox = node.event_queue(16);

    // A kernel opens CONTROL, then BULK_IN and BULK_OUT (its types; the node's are inverted).
    let mut control = dial_node(&node, port, privileged, CONTROL, KERNEL_INCARNATION);
    let mut bulk_in = dial_node(&node, port, privileged, BULK_IN, KERNEL_INCARNATION);
    let mut bulk_out = dial_node(&node, port, privileged, BULK_OUT, KERNEL_INCARNATION);
    let kernel_pid = control.pid_seen_by_acceptor();

    // A small PUT with a ZC request and an ACK wanted: the ACK piggy-backs the cookie.
    let data = pattern(16, 1);
    node.post(9, 0x11, sink(16), &inbox).unwrap();
    control.send(&kernel_put(7, kernel_wmd(0x40d), 0x11, &data));
    control.expect(&node_ack(kernel_pid, 7, kernel_wmd(0x40d), 0x11, 16), "ACK with ZC-ACK 7");
    let put = recv(&inbox);
    assert_eq!(put.kind, EventKind::Put);
    assert_eq!(put.initiator, ProcessId::new(tcp_nid(KERNEL), kernel_pid));
    assert_eq!(put.hdr_data, 0x0123_4567_89ab_cdef);
    assert_eq!(put.memory.unwrap().to_vec(), data);

    // A bulk PUT on the kernel's BULK_OUT, no ACK wanted: the cookie comes back in a NOOP on
    // that connection.
    let bulk = pattern(20 << 10, 2);
    node.post(9, 0x12, sink(bulk.len()), &inbox).unwrap();
    let from_pid = bulk_out.pid_seen_by_acceptor();
    bulk_out.send(&kernel_put(8, Wmd::NONE, 0x12, &bulk));
    bulk_out.expect(&ksock(KSOCK_NOOP, 0, 8), "NOOP returning ZC cookie 8");
    let put = recv(&inbox);
    assert_eq!(put.initiator.pid, from_pid);
    assert_eq!(put.memory.unwrap().to_vec(), bulk);

    // A GET: the REPLY carries 4 KiB, so it goes on the node's BULK_OUT (the kernel's BULK_IN)
    // when both are one peer; a userspace peer has only the connection it asked on.
    let served = pattern(4096, 3);
    node.post(9, 0x22, source(served.clone()), &inbox).unwrap();
    let get = to_node(GET, 0, get_body(kernel_wmd(0x409), 0x22, 9, 0, 4096));
    control.send(&get.frame(&[]));
    let reply = to_kernel(kernel_pid, REPLY, 4096, reply_body(kernel_wmd(0x409)));
    let expected = reply.frame(&served);
    let carrier = if privileged { &mut bulk_in } else { &mut control };
    carrier.expect(&expected, "REPLY with 4 KiB");
    assert_eq!(recv(&inbox).kind, EventKind::Get);

    // Three messages with ZC requests in one write, nothing to answer: every cookie comes back
    // exactly once, in NOOPs (a range when they arrive together).
    let burst: Vec<u8> =
        (9..12).flat_map(|cookie| kernel_put(cookie, Wmd::NONE, 0x99, &[])).collect();
    control.send(&burst);
    let mut acked = Vec::new();
    while acked.len() < 3 {
        let frame = control.read_frame();
        assert_eq!(frame.msg_type(), KSOCK_NOOP, "only NOOPs owed: {frame:?}");
        assert_eq!(&frame.ksock[4..8], &[0; 4], "checksum 0");
        match frame.cookies() {
            (0, cookie) => acked.push(cookie),
            (low, high) if low < high => acked.extend(low..=high),
            (first, second) => acked.extend([first, second]),
        }
    }
    acked.sort_unstable();
    assert_eq!(acked, [9, 10, 11]);

    // The kernel hangs up its CONTROL connection; the others keep working.
    drop(control);
    wait_until("the node to count the close", || node.tcp_stats().conns_closed >= 1);
    node.post(9, 0x13, sink(4), &inbox).unwrap();
    bulk_out.send(&kernel_put(0, Wmd::NONE, 0x13, b"more"));
    assert_eq!(recv(&inbox).memory.unwrap().to_vec(), b"more");
    let stats = node.tcp_stats();
    assert_eq!((stats.conns_accepted, stats.protocol_errors), (3, 0), "{stats:?}");
}

/// The node dials the kernel: connreq and hello checked byte for byte, CONTROL then BULK_IN
/// then BULK_OUT, each message on the connection the kernel's rules pick.
#[test]
fn ulnet_dials_kernel_from_privileged_ports() {
    ulnet_dials_kernel(true);
}

/// The same from ordinary ports (what an unprivileged process does).
#[test]
fn ulnet_dials_kernel_from_unprivileged_ports() {
    ulnet_dials_kernel(false);
}

fn ulnet_dials_kernel(privileged_ports: bool) {
    let port = free_port();
    let listener = TcpListener::bind(SocketAddrV4::new(kernel_ip(), port)).unwrap();
    let node = Node::builder()
        .tcp_ni(tcp_nid(NODE), tunables(port))
        .privileged_ports(privileged_ports)
        .build()
        .unwrap();
    let privileged = privileged_ports && can_bind_privileged();
    let kernel = ProcessId::new(tcp_nid(KERNEL), PID);
    let incarnation = node.tcp_incarnations()[0];

    let data = pattern(16, 5);
    let sender = {
        let node = node.clone();
        let data = data.clone();
        thread::spawn(move || {
            node.put_and_wait_ack(kernel, 4, 0x44, Memory::new(data), HANG_GUARD).unwrap()
        })
    };

    // Each connection: connreq for our NID, then the node's V3 hello, then our reply.
    let accept = |ctype: u32| {
        let mut link = Link::accept(&listener);
        assert_eq!(link.privileged, privileged, "source port {}", link.peer_port());
        link.expect(&connreq_v1(kernel_ip()), "connreq v1 for the kernel's NID");
        link.expect(&Hello::active(node_ip(), kernel_ip(), incarnation, ctype).bytes(), "hello");
        link.send(
            &Hello::active(kernel_ip(), node_ip(), KERNEL_INCARNATION, peer_type(ctype)).bytes(),
        );
        link
    };
    let mut control = accept(CONTROL);
    // Discovery first: the node pings a new peer before its first message.
    answer_ping(&mut control, &node);

    // The PUT: every byte but the node's MD cookie, which is checked for sense.
    let frame = control.read_frame();
    let ack_wmd = body_wmd(&frame.lnet[32..]);
    assert_eq!(ack_wmd.interface, node.interface_cookie());
    assert_ne!(ack_wmd.object, u64::MAX);
    let put = to_kernel(PID, PUT, 16, put_body(ack_wmd, 0x44, 0, 4, 0));
    assert_eq!(
        hex(&frame.bytes()),
        hex(&put.frame(&data)),
        "the node's small PUT (no ZC request below zc_min_payload)"
    );
    // The node's BULK_IN is the kernel's BULK_OUT, and the other way round.
    let mut kernel_out = accept(BULK_IN);
    let mut kernel_in = accept(BULK_OUT);

    let ack = to_node(ACK, 0, ack_body(ack_wmd, 0x44, 16));
    control.send(&ack.frame(&[]));
    assert_eq!(sender.join().unwrap().event.mlength, 16);

    // A bulk PUT from the kernel with a ZC request, on its BULK_OUT: the NOOP comes back there.
    let inbox = node.event_queue(8);
    let bulk = pattern(20 << 10, 6);
    node.post(9, 0x55, sink(bulk.len()), &inbox).unwrap();
    kernel_out.send(&kernel_put(5, Wmd::NONE, 0x55, &bulk));
    kernel_out.expect(&ksock(KSOCK_NOOP, 0, 5), "NOOP returning ZC cookie 5");
    assert_eq!(recv(&inbox).memory.unwrap().to_vec(), bulk);

    // A 1 MiB PUT from the node goes on its BULK_OUT, the kernel's BULK_IN.
    let big = pattern(1 << 20, 7);
    let sender = {
        let node = node.clone();
        let big = big.clone();
        thread::spawn(move || {
            node.put_and_wait_ack(kernel, 4, 0x66, Memory::new(big), HANG_GUARD).unwrap()
        })
    };
    let frame = kernel_in.read_frame();
    let ack_wmd = body_wmd(&frame.lnet[32..]);
    let put = Lnet { payload_length: 1 << 20, body: put_body(ack_wmd, 0x66, 0, 4, 0), ..put };
    // At least zc_min_payload (16 KiB): the node asks for a ZC-ACK (the first cookie, 2), as
    // the kernel does for what it sends zero-copy, and completes the send on it.
    assert_eq!(hex(&frame.ksock), hex(&ksock(KSOCK_LNET, 2, 0)));
    assert_eq!(hex(&frame.lnet), hex(&put.nid4_bytes()));
    assert!(frame.payload == big, "1 MiB payload intact");
    kernel_in.send(&ksock(KSOCK_NOOP, 0, 2));
    let ack = Lnet { body: ack_body(ack_wmd, 0x66, 1 << 20), ..ack };
    control.send(&ack.frame(&[]));
    assert_eq!(sender.join().unwrap().event.mlength, 1 << 20);
    assert_eq!(node.tcp_stats().conns_dialled, 3);
}

/// The peer answers a later connection with a new incarnation: it rebooted. The node drops
/// every connection to it, then talks to the new incarnation.
#[test]
fn peer_reboot_tears_down_its_connections() {
    let port = free_port();
    let listener = TcpListener::bind(SocketAddrV4::new(kernel_ip(), port)).unwrap();
    let node = tcp_node(NODE, port);
    let kernel = ProcessId::new(tcp_nid(KERNEL), PID);
    let accept = |incarnation: u64| {
        let mut link = Link::accept(&listener);
        let _connreq = link.read_exact(16);
        let hello = link.read_exact(56);
        let ctype = u32::from_le_bytes(hello[48..52].try_into().unwrap());
        link.send(&Hello::active(kernel_ip(), node_ip(), incarnation, peer_type(ctype)).bytes());
        (link, ctype)
    };
    let put = |bits: u64| {
        let node = node.clone();
        thread::spawn(move || node.put_and_wait_ack(kernel, 4, bits, Memory::empty(), HANG_GUARD))
    };
    // Acknowledges the node's next PUT, answering its discovery ping first if one comes.
    let ack_for = |link: &mut Link, bits: u64| {
        let mut frame = link.read_frame();
        if u32::from_le_bytes(frame.lnet[24..28].try_into().unwrap()) == GET {
            let wmd = body_wmd(&frame.lnet[32..]);
            link.send(&ping_reply_not_multi_rail(wmd));
            frame = link.read_frame();
        }
        let ack_wmd = body_wmd(&frame.lnet[32..]);
        let ack = to_node(ACK, 0, ack_body(ack_wmd, bits, 0));
        link.send(&ack.frame(&[]));
    };

    let first = put(1);
    let (mut control, ctype) = accept(KERNEL_INCARNATION);
    assert_eq!(ctype, CONTROL);
    ack_for(&mut control, 1);
    first.join().unwrap().unwrap();

    // The next connection (BULK_IN) says the kernel restarted.
    let (mut bulk, ctype) = accept(KERNEL_INCARNATION + 1);
    assert_eq!(ctype, BULK_IN);
    bulk.expect_closed("the connection that revealed the reboot");
    control.expect_closed("the old incarnation's CONTROL connection");
    wait_until("the teardown to be counted", || node.tcp_stats().peer_reboots >= 1);

    // Traffic goes on with the new incarnation, over a new CONTROL connection.
    let second = put(2);
    let (mut control, ctype) = accept(KERNEL_INCARNATION + 1);
    assert_eq!(ctype, CONTROL);
    ack_for(&mut control, 2);
    second.join().unwrap().unwrap();
    assert_eq!(node.tcp_stats().protocol_errors, 0);
}

/// After `keepalive` seconds of silence the node sends a keepalive NOOP (§10.8) on its BULK_IN
/// connection (the kernel's BULK_OUT), the only type a non-blocking NOOP may use.
#[test]
fn keepalive_noop_after_idle() {
    let port = free_port();
    let tunables = SocklndTunables { keepalive: Some(Duration::from_secs(1)), ..tunables(port) };
    let node = tcp_node_with(NODE, tunables);
    let privileged = can_bind_privileged();
    let _control = dial_node(&node, port, privileged, CONTROL, KERNEL_INCARNATION);
    let mut bulk_out = dial_node(&node, port, privileged, BULK_OUT, KERNEL_INCARNATION);
    bulk_out.expect(
        &unhex("c0 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 01 00 00 00 00 00 00 00"),
        "keepalive NOOP",
    );
}

/// V4 hellos (large NIDs) are answered in V4 even over IPv4, and the framing then uses the
/// 96-byte header.
#[test]
fn v4_hello_and_nid16_framing() {
    let port = free_port();
    let node = tcp_node(NODE, port);
    let privileged = can_bind_privileged();
    let mut link = Link::connect(kernel_ip(), SocketAddrV4::new(node_ip(), port), privileged);
    let kernel_pid = link.pid_seen_by_acceptor();
    link.send(&connreq_v1(node_ip()));
    let hello =
        Hello { version: 4, ..Hello::active(kernel_ip(), node_ip(), KERNEL_INCARNATION, CONTROL) };
    link.send(&hello.bytes());
    let reply = node_hello(&node, 4, CONTROL);
    assert_eq!(reply.bytes().len(), 80);
    link.expect(&reply.bytes(), "V4 reply hello");

    let inbox = node.event_queue(4);
    node.post(9, 0x77, sink(3), &inbox).unwrap();
    let put = to_node(PUT, 3, put_body(kernel_wmd(0x41), 0x77, 0, 9, 0));
    link.send(&[ksock(KSOCK_LNET, 3, 0), put.nid16_bytes(), b"abc".to_vec()].concat());
    let ack = to_kernel(kernel_pid, ACK, 0, ack_body(kernel_wmd(0x41), 0x77, 3));
    let frame = link.read_frame_form(true);
    assert_eq!(hex(&frame.bytes()), hex(&[ksock(KSOCK_LNET, 0, 3), ack.nid16_bytes()].concat()));
    assert_eq!(recv(&inbox).memory.unwrap().to_vec(), b"abc");
}

/// A second CONTROL connection from the same kernel is one too many (conns_per_peer 1): the
/// node answers CONN_NONE in the version it received and closes it. Needs privileged ports
/// (otherwise each connection is a different userspace peer).
#[test]
fn duplicate_connection_refused_with_conn_none() {
    if !can_bind_privileged() {
        eprintln!("skipped: this process cannot bind ports below 1024");
        return;
    }
    let port = free_port();
    let node = tcp_node(NODE, port);
    let _control = dial_node(&node, port, true, CONTROL, KERNEL_INCARNATION);
    let mut second = Link::connect(kernel_ip(), SocketAddrV4::new(node_ip(), port), true);
    second.send(&connreq_v1(node_ip()));
    second.send(&Hello::active(kernel_ip(), node_ip(), KERNEL_INCARNATION, CONTROL).bytes());
    let refusal = node_hello(&node, 3, CONN_NONE);
    assert_eq!(hex(&second.read_to_close()), hex(&refusal.bytes()));
}

/// IPv6: the kernel connects to a node on `[::1]` with a connreq v2 and a V4 hello (large
/// NIDs); the node answers V4 and frames with 96-byte headers. The kernel's NID needs no local
/// address (the hello names it), but a privileged source port: from an unprivileged one the
/// node refuses outright, since the kernel's "userspace peer" identity has no IPv6 form.
#[test]
fn kernel_dials_ulnet_over_ipv6() {
    let port = free_port();
    let node_nid = Nid::ipv6(Net::TCP, Ipv6Addr::LOCALHOST);
    let node = Node::builder().tcp_ni(node_nid, tunables(port)).build().unwrap();
    let (node_large, kernel_large) = (large_nid6(Ipv6Addr::LOCALHOST), large_nid6(KERNEL_IP6));
    let to = SocketAddr::from((Ipv6Addr::LOCALHOST, port));
    let hello = hello_v4(kernel_large, node_large, (PID, 0), (KERNEL_INCARNATION, 0), CONTROL);

    let mut unprivileged = Link::connect_any(Ipv6Addr::LOCALHOST.into(), to, false);
    unprivileged.send(&connreq_v2(node_large));
    unprivileged.send(&hello);
    assert_eq!(unprivileged.read_to_close(), b"", "an unprivileged IPv6 peer is refused");
    if !can_bind_privileged() {
        eprintln!("skipped the rest: this process cannot bind ports below 1024");
        return;
    }

    let mut link = Link::connect_any(Ipv6Addr::LOCALHOST.into(), to, true);
    link.send(&connreq_v2(node_large));
    link.send(&hello);
    let incarnation = node.tcp_incarnations()[0];
    let reply = hello_v4(node_large, kernel_large, (PID, 0), (incarnation, 0), CONTROL);
    link.expect(&reply, "V4 reply hello with large NIDs");

    let inbox = node.event_queue(4);
    node.post(9, 0x66, sink(4), &inbox).unwrap();
    let put = Lnet {
        dest: Ipv4Addr::UNSPECIFIED,
        src: Ipv4Addr::UNSPECIFIED,
        dest_pid: PID,
        src_pid: PID,
        msg_type: PUT,
        payload_length: 4,
        body: put_body(kernel_wmd(0x51), 0x66, 0, 9, 0),
    };
    link.send(
        &[ksock(KSOCK_LNET, 3, 0), nid16_header(node_large, kernel_large, &put), b"six!".to_vec()]
            .concat(),
    );
    let ack =
        Lnet { msg_type: ACK, payload_length: 0, body: ack_body(kernel_wmd(0x51), 0x66, 4), ..put };
    let expected = [ksock(KSOCK_LNET, 0, 3), nid16_header(kernel_large, node_large, &ack)].concat();
    assert_eq!(hex(&link.read_frame_form(true).bytes()), hex(&expected), "nid16 ACK, ZC-ACK 3");
    let event = recv(&inbox);
    assert_eq!(event.initiator, ProcessId::new(Nid::ipv6(Net::TCP, KERNEL_IP6), PID));
    assert_eq!(event.memory.unwrap().to_vec(), b"six!");
}

/// A documentation address (RFC 3849) for the scripted kernel's IPv6 NID.
const KERNEL_IP6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 4);
