//! NIs added to and removed from running nodes over real TCP on 127/8: the peer learns the
//! change by push (lustre: api-ni.c `lnet_dyn_add_ni()`, `lnet_dyn_del_ni()`,
//! `lnet_push_update_to_peers()`), uses a new NI and stops using a removed one, and traffic
//! running meanwhile loses nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use ulnet::{
    AcceptPolicy, AddNiError, InsertPosition, LndKind, MdOptions, MdSpec, Memory, NiConfig, Nid,
    Node, ProcessId, RemoveNiError, SocklndTunables, Threshold, UnlinkMode,
};

const PORTAL: u32 = 7;
const BITS: u64 = 0x5eed;

fn tunables(port: u16) -> SocklndTunables {
    SocklndTunables { accept_port: port, accept: AcceptPolicy::All, ..Default::default() }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn nid(text: &str) -> Nid {
    text.parse().unwrap()
}

/// Waits up to 20 s for `done`.
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(20));
    }
}

fn peer_nids(node: &Node, peer: Nid) -> Vec<Nid> {
    node.peer_info(peer).map(|info| info.nis.iter().map(|ni| ni.nid).collect()).unwrap_or_default()
}

fn sends_to(node: &Node, peer_ni: Nid) -> u64 {
    node.stats()
        .peer_nis
        .iter()
        .filter(|stats| stats.nid == peer_ni)
        .map(|stats| stats.statistics.send_count)
        .sum()
}

/// An MD on `node` that takes any number of PUTs (each at offset 0), without events.
fn sink(node: &Node) {
    let me = node
        .me_attach(PORTAL, ProcessId::ANY, BITS, 0, UnlinkMode::Retain, InsertPosition::After)
        .unwrap();
    let spec = MdSpec::new(Memory::new(vec![0; 4096]))
        .options(MdOptions::OP_PUT | MdOptions::MANAGE_REMOTE)
        .threshold(Threshold::Infinite);
    node.md_attach(me, spec, UnlinkMode::Retain, None).unwrap();
}

/// PUTs with ACK from `from` to `to` until `stop`, counting completions and failures.
fn traffic(
    from: Node,
    to: ProcessId,
    stop: Arc<AtomicBool>,
    done: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
) -> thread::JoinHandle<Vec<String>> {
    thread::spawn(move || {
        let mut errors = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            let sent = from.put_and_wait_ack(
                to,
                PORTAL,
                BITS,
                Memory::new(vec![0xab; 2048]),
                Duration::from_secs(30),
            );
            match sent {
                Ok(_) => done.fetch_add(1, Ordering::Relaxed),
                Err(error) => {
                    errors.push(error.to_string());
                    failed.fetch_add(1, Ordering::Relaxed)
                }
            };
        }
        errors
    })
}

#[test]
fn a_peer_learns_an_added_ni_uses_it_and_stops_using_it_once_removed_without_loss() {
    let port = free_port();
    let (a_nid, b_nid, b_extra) =
        (nid("127.62.0.1@tcp"), nid("127.62.0.2@tcp"), nid("127.62.0.3@tcp"));
    let a = Node::builder().tcp_ni(a_nid, tunables(port)).build().unwrap();
    let b = Node::builder().tcp_ni(b_nid, tunables(port)).build().unwrap();
    sink(&b);
    // Each knows the other as a multi-rail peer, so NI changes are pushed both ways.
    a.discover(b_nid, false).unwrap();
    b.discover(a_nid, false).unwrap();
    assert_eq!(peer_nids(&a, b_nid), [b_nid]);

    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let to = ProcessId::new(b_nid, b.pid());
    a.put_and_wait_ack(to, PORTAL, BITS, Memory::new(vec![1; 64]), Duration::from_secs(10))
        .unwrap();
    let worker = traffic(a.clone(), to, Arc::clone(&stop), Arc::clone(&done), Arc::clone(&failed));
    wait_until("traffic", || done.load(Ordering::Relaxed) > 50);

    // B adds an NI: A learns it by push and spreads its PUTs over both.
    let added = b.add_tcp_ni(NiConfig::new(b_extra, LndKind::Tcp), tunables(port)).unwrap();
    assert_eq!(added, b_extra);
    assert!(b.nids().contains(&b_extra));
    wait_until("A to learn B's new NI", || peer_nids(&a, b_nid).contains(&b_extra));
    wait_until("A to send to B's new NI", || sends_to(&a, b_extra) > 20);
    let before = b.tcp_stats().conns_live();
    assert!(before >= 2, "connections on both of B's NIs: {:?}", b.tcp_stats());

    // B removes it: A learns that by push too and goes on over the first NI only.
    b.remove_ni(b_extra).unwrap();
    assert!(!b.nids().contains(&b_extra));
    wait_until("A to forget B's removed NI", || !peer_nids(&a, b_nid).contains(&b_extra));
    let after_removal = done.load(Ordering::Relaxed);
    let on_removed = sends_to(&a, b_extra);
    wait_until("traffic after the removal", || done.load(Ordering::Relaxed) > after_removal + 100);
    assert_eq!(sends_to(&a, b_extra), on_removed, "nothing more sent to the removed NI");

    stop.store(true, Ordering::Relaxed);
    let errors = worker.join().unwrap();
    assert!(errors.is_empty(), "PUTs failed: {errors:?}");
    assert_eq!(failed.load(Ordering::Relaxed), 0);
    // The first NI's connections were never touched.
    assert_eq!(a.tcp_stats().peer_reboots, 0);
    a.shutdown();
    b.shutdown();
}

#[test]
fn live_ni_changes_are_checked() {
    let port = free_port();
    let first = nid("127.63.0.1@tcp");
    let node = Node::builder().tcp_ni(first, tunables(port)).build().unwrap();
    let duplicate = node.add_tcp_ni(NiConfig::new(first, LndKind::Tcp), tunables(port));
    assert!(matches!(duplicate, Err(AddNiError::DuplicateNid(nid)) if nid == first));
    let not_ip = node.add_tcp_ni(NiConfig::new(Nid::LO_0, LndKind::Tcp), tunables(port));
    assert!(matches!(not_ip, Err(AddNiError::Config(_))), "{not_ip:?}");
    // An address no interface holds cannot be listened on.
    let foreign = nid("192.0.2.1@tcp");
    let unbound = node.add_tcp_ni(NiConfig::new(foreign, LndKind::Tcp), tunables(port));
    assert!(matches!(unbound, Err(AddNiError::Listen { nid, .. }) if nid == foreign));
    assert_eq!(node.remove_ni(Nid::LO_0), Err(RemoveNiError::Loopback));
    let unknown = nid("127.63.0.9@tcp");
    assert_eq!(node.remove_ni(unknown), Err(RemoveNiError::UnknownNid(unknown)));
    // Remove and add back the same NID: the port is free again.
    node.remove_ni(first).unwrap();
    assert_eq!(node.remove_ni(first), Err(RemoveNiError::UnknownNid(first)));
    assert_eq!(node.nids(), [Nid::LO_0]);
    wait_until("the old listener to close", || {
        node.add_tcp_ni(NiConfig::new(first, LndKind::Tcp), tunables(port)).is_ok()
    });
    assert_eq!(node.nids(), [Nid::LO_0, first]);
    assert_eq!(node.tcp_incarnations().len(), 2, "a new incarnation for the new NI");
    node.shutdown();
    assert!(matches!(
        node.add_tcp_ni(NiConfig::new(first, LndKind::Tcp), tunables(port)),
        Err(AddNiError::ShutDown)
    ));
    assert_eq!(node.remove_ni(first), Err(RemoveNiError::ShutDown));
}
