//! Bad input against a live node: each case gets its connection closed (with the exact answer
//! the kernel would give, where it gives one), is counted, and a well-behaved peer exchanging
//! messages with the same node the whole time never notices.

use std::net::{Shutdown, SocketAddrV4};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use ulnet::*;

use crate::script::*;
use crate::*;

const VICTIM: usize = 0;
const GOOD: usize = 1;
const BAD: usize = 3;

/// The node under attack: short timeouts so stuck connections are noticed within the test.
fn victim_tunables(port: u16) -> SocklndTunables {
    SocklndTunables {
        accept_timeout: Duration::from_secs(1),
        sock_timeout: Duration::from_secs(3),
        tx_buffer_size: 64 << 10,
        ..tunables(port)
    }
}

/// A victim node, a good peer with traffic flowing to and from it in the background, and the
/// port. Call [`Scene::finish`] to check the good peer never noticed anything.
struct Scene {
    victim: Node,
    good: Node,
    port: u16,
    stop: Arc<AtomicBool>,
    exchanged: Arc<AtomicU64>,
    traffic: Option<JoinHandle<()>>,
}

impl Scene {
    fn new() -> Scene {
        Scene::with_partitions(1)
    }

    /// A scene whose victim has `partitions` CPU partitions: with more than one, its
    /// connections' turns run with the core shared (decision 0029).
    fn with_partitions(partitions: u32) -> Scene {
        let port = free_port();
        let partitions = ulnet::proto::engine::cpt::Partitions::new(partitions).expect("count");
        let victim = Node::builder()
            .tcp_ni(tcp_nid(VICTIM), victim_tunables(port))
            .partitions(partitions)
            .build()
            .expect("TCP node");
        let good = tcp_node(GOOD, port);
        // Connections up before the attack starts.
        put_and_check(&good, &victim, u64::MAX, b"hello");
        let stop = Arc::new(AtomicBool::new(false));
        let exchanged = Arc::new(AtomicU64::new(0));
        let traffic = {
            let (victim, good) = (victim.clone(), good.clone());
            let (stop, exchanged) = (Arc::clone(&stop), Arc::clone(&exchanged));
            thread::spawn(move || {
                let mut round = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let data = pattern(4096, round as u8);
                    let (from, to) =
                        if round % 2 == 0 { (&good, &victim) } else { (&victim, &good) };
                    put_and_check(from, to, round, &data);
                    exchanged.fetch_add(1, Ordering::Relaxed);
                    round += 1;
                }
            })
        };
        Scene { victim, good, port, stop, exchanged, traffic: Some(traffic) }
    }

    fn address(&self) -> SocketAddrV4 {
        SocketAddrV4::new(ADDRESSES[VICTIM], self.port)
    }

    /// A connection from the bad peer's address, before any handshake.
    fn raw(&self) -> Link {
        Link::connect(ADDRESSES[BAD], self.address(), false)
    }

    /// A connection from the bad peer that completed its handshake (a CONTROL connection).
    fn established(&self) -> Link {
        let mut link = self.raw();
        link.send(&connreq_v1(ADDRESSES[VICTIM]));
        link.send(
            &Hello::active(ADDRESSES[BAD], ADDRESSES[VICTIM], KERNEL_INCARNATION, CONTROL).bytes(),
        );
        // The reply hello is written once the connection joined the peer table.
        let _reply = link.read_exact(56);
        link
    }

    /// A PUT header from the bad peer (no ZC request), `payload_length` as given.
    fn put(&self, dest: std::net::Ipv4Addr, payload_length: u32) -> Vec<u8> {
        let header =
            Lnet::new(dest, ADDRESSES[BAD], PUT, payload_length, put_body(Wmd::NONE, 1, 0, 9, 0));
        header.frame(&[])
    }

    /// Stops the traffic and checks it all went through, over the connections it started on.
    fn finish(mut self) -> TcpStats {
        // Let the good peer exchange a few more messages after the attack.
        let seen = self.exchanged.load(Ordering::Relaxed);
        wait_until("traffic after the attack", || {
            self.exchanged.load(Ordering::Relaxed) >= seen + 4
        });
        self.stop.store(true, Ordering::Relaxed);
        if let Some(traffic) = self.traffic.take() {
            traffic.join().expect("the good peer's traffic never failed");
        }
        put_and_check(&self.good, &self.victim, 1 << 40, &pattern(1 << 20, 9));
        let good = self.good.tcp_stats();
        assert_eq!(good.conns_closed, 0, "the good peer lost no connection: {good:?}");
        assert_eq!(good.protocol_errors + good.timeouts, 0);
        self.victim.tcp_stats()
    }
}

impl Drop for Scene {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

// ------------------------------------------------------------------------- before the hello

#[test]
fn garbage_instead_of_a_connreq_is_closed_silently() {
    let scene = Scene::new();
    let mut link = scene.raw();
    link.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(link.read_to_close(), b"", "no answer to a bad magic");
    let stats = scene.finish();
    assert!(stats.handshakes_failed >= 1, "{stats:?}");
}

#[test]
fn wrong_magics_in_the_connreq() {
    let scene = Scene::new();
    // The old socknal hello magic where a connreq belongs: refused, nothing sent.
    let mut link = scene.raw();
    link.send(&[0xeebc_0dedu32.to_le_bytes(), [1, 0, 0, 0]].concat());
    assert_eq!(link.read_to_close(), b"");
    // LNET_PROTO_MAGIC (the "unified protocol" probe) and an unknown connreq version: the
    // 16-byte downgrade answer, then close.
    let downgrade = unhex("00 71 ce ac 01 00 00 00 00 00 00 00 00 00 00 00");
    let mut probe = scene.raw();
    probe.send(&0x4572_6963u32.to_le_bytes());
    assert_eq!(hex(&probe.read_to_close()), hex(&downgrade));
    let mut version = scene.raw();
    version.send(&[0x00, 0x71, 0xce, 0xac, 0x07, 0x00, 0x00, 0x00]);
    assert_eq!(hex(&version.read_to_close()), hex(&downgrade));
    let stats = scene.finish();
    assert!(stats.handshakes_failed >= 3, "{stats:?}");
}

#[test]
fn connreq_for_another_nid_is_closed() {
    let scene = Scene::new();
    let mut link = scene.raw();
    link.send(&connreq_v1(ADDRESSES[5]));
    assert_eq!(link.read_to_close(), b"", "no matching NI: silent close");
    scene.finish();
}

#[test]
fn wrong_hello_magic_is_closed() {
    let scene = Scene::new();
    let mut link = scene.raw();
    link.send(&connreq_v1(ADDRESSES[VICTIM]));
    let mut hello = Hello::active(ADDRESSES[BAD], ADDRESSES[VICTIM], 1, CONTROL).bytes();
    hello[..4].copy_from_slice(&0xdead_beefu32.to_le_bytes());
    link.send(&hello);
    assert_eq!(link.read_to_close(), b"", "bad hello magic: EPROTO, nothing sent");
    scene.finish();
}

/// An unknown hello version gets the node's own default hello (V3 on IPv4) with type NONE and,
/// a kernel quirk, the node's own NID as destination; then the connection closes.
#[test]
fn unknown_hello_version_gets_the_exact_answer() {
    let scene = Scene::new();
    let mut link = scene.raw();
    link.send(&connreq_v1(ADDRESSES[VICTIM]));
    let hello =
        Hello { version: 9, ..Hello::active(ADDRESSES[BAD], ADDRESSES[VICTIM], 1, CONTROL) };
    link.send(&hello.bytes());
    let answer = Hello {
        version: 3,
        src: ADDRESSES[VICTIM],
        dst: ADDRESSES[VICTIM],
        src_pid: PID,
        dst_pid: 0,
        src_incarnation: scene.victim.tcp_incarnations()[0],
        dst_incarnation: 0,
        ctype: CONN_NONE,
    };
    assert_eq!(hex(&link.read_to_close()), hex(&answer.bytes()));
    scene.finish();
}

#[test]
fn truncated_hello_then_close() {
    let scene = Scene::new();
    let failed = scene.victim.tcp_stats().handshakes_failed;
    let mut link = scene.raw();
    link.send(&connreq_v1(ADDRESSES[VICTIM]));
    link.send(&Hello::active(ADDRESSES[BAD], ADDRESSES[VICTIM], 1, CONTROL).bytes()[..30]);
    link.stream.shutdown(Shutdown::Write).unwrap();
    assert_eq!(link.read_to_close(), b"");
    let stats = scene.finish();
    assert_eq!(stats.handshakes_failed, failed + 1, "the truncated connection never joined");
}

#[test]
fn truncated_hello_then_silence_times_out() {
    let scene = Scene::new();
    let mut link = scene.raw();
    link.send(&connreq_v1(ADDRESSES[VICTIM]));
    link.send(&Hello::active(ADDRESSES[BAD], ADDRESSES[VICTIM], 1, CONTROL).bytes()[..30]);
    // accept_timeout is 1 s on the victim.
    assert_eq!(link.read_to_close(), b"");
    scene.finish();
}

// -------------------------------------------------------------------------- after the hello

/// Runs `attack` on an established connection from the bad peer and checks the node closes it
/// as a protocol error.
fn closes_as_protocol_error(attack: impl FnOnce(&Scene, &mut Link)) {
    closes_as_protocol_error_on(Scene::new(), attack);
}

/// [`closes_as_protocol_error`] on `scene`; returns its victim.
fn closes_as_protocol_error_on(scene: Scene, attack: impl FnOnce(&Scene, &mut Link)) -> Node {
    let victim = scene.victim.clone();
    let mut link = scene.established();
    attack(&scene, &mut link);
    link.expect_closed("the bad connection");
    wait_until("the protocol error to be counted", || {
        scene.victim.tcp_stats().protocol_errors >= 1
    });
    let stats = scene.finish();
    assert_eq!(stats.protocol_errors, 1, "{stats:?}");
    victim
}

#[test]
fn garbage_after_the_hello() {
    closes_as_protocol_error(|_, link| link.send(&[0x42; 24]));
}

/// On a victim of two partitions, whose turns run with the core shared: a framing error found
/// there is kept until the turn that holds the core exclusively closes the connection (closing
/// fails what it held back to the core), and the good peer, on the same node, never notices.
#[test]
fn garbage_after_the_hello_on_two_partitions() {
    let victim =
        closes_as_protocol_error_on(Scene::with_partitions(2), |_, link| link.send(&[0x42; 24]));
    let runtime = victim.stats().runtime;
    assert!(runtime.core_shared_holds > 0 && runtime.core_shared_declined > 0, "{runtime:?}");
}

/// A header the core refuses, on a victim of two partitions: the same.
#[test]
fn wrong_dest_nid_on_two_partitions() {
    let victim = closes_as_protocol_error_on(Scene::with_partitions(2), |scene, link| {
        let mut bytes = scene.put(ADDRESSES[5], 4);
        bytes.extend_from_slice(b"data");
        link.send(&bytes);
    });
    assert!(victim.stats().runtime.core_shared_holds > 0);
}

#[test]
fn get_with_payload() {
    closes_as_protocol_error(|_, link| {
        let get = Lnet::new(
            ADDRESSES[VICTIM],
            ADDRESSES[BAD],
            GET,
            10,
            get_body(Wmd { interface: 1, object: 2 }, 1, 9, 0, 10),
        );
        link.send(&get.frame(&[0; 10]));
    });
}

#[test]
fn payload_over_one_mib() {
    closes_as_protocol_error(|scene, link| {
        // Only the header: the node must refuse before reading (or allocating for) a payload.
        link.send(&scene.put(ADDRESSES[VICTIM], (1 << 20) + 1));
    });
}

#[test]
fn wrong_dest_nid() {
    closes_as_protocol_error(|scene, link| {
        // Same net as the victim, not its NID: "should have been sent direct".
        let mut bytes = scene.put(ADDRESSES[5], 4);
        bytes.extend_from_slice(b"data");
        link.send(&bytes);
    });
}

#[test]
fn unknown_zc_cookie() {
    closes_as_protocol_error(|_, link| link.send(&ksock(KSOCK_NOOP, 0, 99)));
}

/// Serves GETs of `size` bytes on portal 9 (match bits 0x88) of the victim, from one buffer
/// every GET reads whole (remote-managed: a locally managed offset would be at its end after
/// the first), and returns a connection from the bad peer that never reads and holds at most
/// `window` bytes in its receive buffer (0: as the system sizes it).
fn stalled_reader(scene: &Scene, size: usize, window: usize) -> Link {
    let me = scene
        .victim
        .me_attach(9, ProcessId::ANY, 0x88, 0, UnlinkMode::Retain, InsertPosition::After)
        .unwrap();
    let served = MdSpec::new(Memory::new(pattern(size, 8)))
        .options(MdOptions::OP_GET | MdOptions::MANAGE_REMOTE)
        .threshold(Threshold::Infinite);
    scene.victim.md_attach(me, served, UnlinkMode::Retain, None).unwrap();
    let link = scene.established();
    link.stream.set_read_timeout(Some(HANG_GUARD)).unwrap();
    if window > 0 {
        // A fixed receive buffer: the kernel would otherwise take megabytes for the peer, and
        // acknowledged bytes are not stuck.
        socket2::SockRef::from(&link.stream).set_recv_buffer_size(window).unwrap();
    }
    link
}

/// `count` GETs of `size` bytes from the bad peer for what [`stalled_reader`] serves.
fn gets(count: u64, size: u32) -> Vec<u8> {
    (0..count)
        .flat_map(|index| {
            let get = Lnet::new(
                ADDRESSES[VICTIM],
                ADDRESSES[BAD],
                GET,
                0,
                get_body(Wmd { interface: 1, object: index }, 0x88, 9, 0, size),
            );
            get.frame(&[])
        })
        .collect()
}

/// Waits for the victim to time the stalled connection out, and for nothing else to happen.
fn times_out(scene: Scene, mut link: Link) {
    wait_until("the send timeout", || scene.victim.tcp_stats().timeouts >= 1);
    link.expect_closed("the stalled connection");
    let stats = scene.finish();
    assert_eq!((stats.timeouts, stats.protocol_errors), (1, 0), "{stats:?}");
}

/// The peer asks for megabytes and stops reading: the node's writes stall, and after
/// `sock_timeout` it closes the connection.
#[test]
fn half_open_connection_times_out() {
    let scene = Scene::new();
    let mut link = stalled_reader(&scene, 1 << 20, 0);
    link.send(&gets(16, 1 << 20));
    times_out(scene, link);
}

/// The same with small replies, which the node copies into the connection's outbox and writes
/// without the core lock: the outbox fills behind the full socket, and the send timeout
/// still closes the connection.
#[test]
fn half_open_connection_with_small_replies_times_out() {
    let scene = Scene::new();
    let mut link = stalled_reader(&scene, 4 << 10, 64 << 10);
    link.send(&gets(4096, 4 << 10));
    wait_until("the send timeout", || scene.victim.tcp_stats().timeouts >= 1);
    let runtime = scene.victim.stats().runtime;
    assert!(runtime.socket_writes_unlocked > 0, "{runtime:?}");
    times_out(scene, link);
}

/// The peer stops reading with only a few small replies outstanding: everything the node sent
/// is complete (taken by its socket), nothing waits in the framing or the outbox, and only the
/// socket's send timeout (`TCP_USER_TIMEOUT` at `sock_timeout`, socklnd's check of a socket
/// buffer that does not drain) notices the bytes stuck behind the peer's zero window.
#[test]
fn bytes_stuck_in_the_socket_time_out() {
    let scene = Scene::new();
    let mut link = stalled_reader(&scene, 4 << 10, 16 << 10);
    // 64 KiB of replies: the node's socket (a 64 KiB `tx_buffer_size`, doubled by Linux) takes
    // them all at once, and a quarter of them stay there, behind the peer's full window.
    link.send(&gets(16, 4 << 10));
    times_out(scene, link);
}

/// The peer starts a message and stops sending mid-payload: after `sock_timeout` the receive
/// is declared stuck and the connection closed.
#[test]
fn stalled_receive_times_out() {
    let scene = Scene::new();
    let mut link = scene.established();
    let mut bytes = scene.put(ADDRESSES[VICTIM], 1000);
    bytes.extend_from_slice(&[7; 10]);
    link.send(&bytes);
    link.expect_closed("the stalled connection");
    let stats = scene.finish();
    assert_eq!(stats.timeouts, 1, "{stats:?}");
}
