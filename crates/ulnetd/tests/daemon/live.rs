//! The control handler over live nodes: daemons in this process whose tcp NIs sit on an
//! in-process fabric, driven by the `ulnetctl` binary over their real control sockets, and
//! moving data through the public API.

use std::time::Duration;

use ulnet::{LinkConfig, MdOptions, MdSpec, MemFabric, Memory, Threshold};
use ulnet_control::{Client, Request, Response};
use ulnetd::config::DaemonConfig;
use ulnetd::interfaces::host_interfaces;
use ulnetd::{Daemon, StartError};

use crate::HANG_GUARD;
use crate::support::{TempDir, ulnetctl, ulnetctl_with_stdin};

fn config(nid: &str) -> DaemonConfig {
    let text = format!(
        "net:\n    - net type: tcp\n      local NI(s):\n        - nid: {nid}\n      \
         tunables:\n          peer_credits: 16\n      lnd tunables:\n          tos: 8\n"
    );
    DaemonConfig::parse(&text, false, &host_interfaces().unwrap()).unwrap()
}

/// A test's scratch directory and the in-process fabric its daemons share.
struct Rig {
    dir: TempDir,
    fabric: MemFabric,
}

impl Rig {
    fn new(tag: &str) -> Self {
        Rig { dir: TempDir::new(tag), fabric: MemFabric::new(LinkConfig::IDEAL) }
    }

    /// A daemon on the fabric with one tcp NI, its socket `name` in the directory.
    fn start(&self, name: &str, nid: &str) -> Daemon {
        Daemon::start(&config(nid), &self.dir.path(name), Some(self.fabric.clone())).unwrap()
    }
}

fn check(daemon: &Daemon, name: &str, args: &[&str]) {
    let run = ulnetctl(daemon.socket(), args);
    insta::assert_snapshot!(name, run.transcript());
}

fn check_stdin(daemon: &Daemon, name: &str, args: &[&str], stdin: &str) {
    let run = ulnetctl_with_stdin(daemon.socket(), args, stdin);
    insta::assert_snapshot!(name, format!("--- stdin\n{stdin}{}", run.transcript()));
}

#[test]
fn a_configured_tcp_ni_shows_at_every_level_and_exports() {
    let rig = Rig::new("show");
    let daemon = rig.start("a.sock", "127.0.0.2@tcp");
    assert_eq!(
        daemon.ready_line(),
        format!("ulnetd: ready 0@lo,127.0.0.2@tcp control {}", daemon.socket().display())
    );
    check(&daemon, "live_net_show", &["net", "show"]);
    check(&daemon, "live_net_show_v1", &["net", "show", "-v"]);
    check(&daemon, "live_net_show_v4_tcp", &["net", "show", "-v", "4", "--net", "tcp"]);
    check(&daemon, "live_export", &["export"]);
    check(&daemon, "live_export_backup", &["export", "--backup"]);
    daemon.shutdown();
}

#[test]
fn net_add_and_del_rebuild_the_node() {
    let rig = Rig::new("add");
    let daemon = rig.start("a.sock", "127.0.0.2@tcp");
    let before = daemon.node().unwrap().interface_cookie();
    check(
        &daemon,
        "live_net_add_nid",
        &["net", "add", "--nid", "127.0.0.12@tcp", "--peer-credits", "4"],
    );
    check(
        &daemon,
        "live_net_add_second_net",
        &["net", "add", "--nid", "127.0.1.2@tcp1", "--conns-per-peer", "2"],
    );
    check(&daemon, "live_net_show_after_add", &["net", "show", "-v"]);
    assert_eq!(daemon.nids().len(), 4);
    assert_ne!(daemon.node().unwrap().interface_cookie(), before, "a new node");
    check(&daemon, "live_net_add_duplicate", &["net", "add", "--nid", "127.0.0.12@tcp"]);
    check(&daemon, "live_net_add_o2ib", &["net", "add", "--net", "o2ib", "--if", "ib0"]);
    check(&daemon, "live_net_add_no_interface", &["net", "add", "--net", "tcp", "--if", "nosuch0"]);
    check(
        &daemon,
        "live_net_add_bad_cpt",
        &["net", "add", "--nid", "127.0.0.13@tcp", "--cpt", "[1]"],
    );
    check(&daemon, "live_net_del_nid", &["net", "del", "--nid", "127.0.0.12@tcp"]);
    check(&daemon, "live_net_del_unknown_nid", &["net", "del", "--nid", "127.0.0.99@tcp"]);
    check(&daemon, "live_net_del_net", &["net", "del", "--net", "tcp1"]);
    check(&daemon, "live_net_del_missing_net", &["net", "del", "--net", "tcp1"]);
    check(&daemon, "live_net_del_lo", &["net", "del", "--net", "lo"]);
    check(&daemon, "live_net_show_after_del", &["net", "show"]);
    assert_eq!(daemon.nids().len(), 2);
    daemon.shutdown();
}

#[test]
fn a_failed_rebuild_brings_the_previous_configuration_back() {
    let rig = Rig::new("fail");
    let a = rig.start("a.sock", "127.0.0.2@tcp");
    // b holds 127.0.0.3@tcp on the fabric: a cannot bring an NI up on it.
    let b = rig.start("b.sock", "127.0.0.3@tcp");
    check(&a, "live_net_add_taken", &["net", "add", "--nid", "127.0.0.3@tcp"]);
    check(&a, "live_net_show_after_failed_add", &["net", "show"]);
    a.shutdown();
    b.shutdown();
}

#[test]
fn two_nodes_move_data_and_show_peers_and_statistics() {
    let rig = Rig::new("data");
    let a = rig.start("a.sock", "127.0.0.2@tcp");
    let b = rig.start("b.sock", "127.0.0.3@tcp");
    let (node_a, node_b) = (a.node().unwrap(), b.node().unwrap());
    let inbox = node_b.event_queue(8);
    let sink = MdSpec::new(Memory::new(vec![0; 4096]))
        .options(MdOptions::OP_PUT)
        .threshold(Threshold::Count(1));
    node_b.post(9, 1, sink, &inbox).unwrap();
    let data = vec![7u8; 4096];
    node_a
        .put_and_wait_ack(node_b.process_id(), 9, 1, Memory::new(data.clone()), HANG_GUARD)
        .unwrap();
    let event = inbox.recv_timeout(HANG_GUARD).unwrap();
    assert_eq!(event.memory.unwrap().to_vec(), data);
    let source = MdSpec::new(Memory::new(vec![5; 1 << 20])).options(MdOptions::OP_GET);
    node_b.post(9, 2, source, &inbox).unwrap();
    let got = node_a.get_into(node_b.process_id(), 9, 2, vec![0; 1 << 20], HANG_GUARD).unwrap();
    assert_eq!(got, vec![5; 1 << 20]);

    check(&a, "live_peer_show", &["peer", "show"]);
    check(&a, "live_peer_show_v2", &["peer", "show", "-v", "2"]);
    check(&a, "live_peer_show_nid", &["peer", "show", "--nid", "127.0.0.3@tcp"]);
    check(&a, "live_peer_show_bad_nid", &["peer", "show", "--nid", "nonsense"]);
    check(&a, "live_peer_list", &["peer", "list"]);
    check(&a, "live_stats_show", &["stats", "show"]);
    check(&b, "live_stats_show_target", &["stats", "show"]);
    check(&b, "live_net_show_v2_target", &["net", "show", "-v", "2", "--net", "tcp"]);
    check(&a, "live_export_with_peer", &["export", "--backup"]);
    a.shutdown();
    b.shutdown();
}

#[test]
fn settings_apply_to_the_running_node() {
    let rig = Rig::new("set");
    let daemon = rig.start("a.sock", "127.0.0.2@tcp");
    let node = daemon.node().unwrap();
    assert_eq!(ulnetctl(daemon.socket(), &["set", "transaction_timeout", "20"]).code, 0);
    assert_eq!(ulnetctl(daemon.socket(), &["set", "retry_count", "1"]).code, 0);
    assert_eq!(ulnetctl(daemon.socket(), &["set", "response_tracking", "1"]).code, 0);
    assert_eq!(ulnetctl(daemon.socket(), &["set", "health_sensitivity", "0"]).code, 0);
    let tunables = node.tunables();
    assert_eq!(tunables.transaction_timeout, Duration::from_secs(20));
    assert_eq!(tunables.retry_count, 0, "health_sensitivity 0 forces retry_count 0");
    assert_eq!(tunables.health_sensitivity, 0);
    assert_eq!(tunables.response_tracking, ulnet::ResponseTracking::Get);
    // A rebuilt node keeps them.
    assert_eq!(ulnetctl(daemon.socket(), &["net", "add", "--nid", "127.0.0.22@tcp"]).code, 0);
    assert_eq!(daemon.node().unwrap().tunables(), tunables);
    daemon.shutdown();
}

#[test]
fn import_adds_shows_and_deletes_nets() {
    let rig = Rig::new("import");
    let daemon = rig.start("a.sock", "127.0.0.2@tcp");
    let nets = "net:\n    - net type: tcp2\n      local NI(s):\n        - nid: 127.0.2.2@tcp2\n\
                peer:\n    - primary nid: 10.0.0.9@tcp\n";
    check_stdin(&daemon, "live_import_net", &["import"], nets);
    check_stdin(&daemon, "live_import_show", &["import", "--show"], nets);
    check_stdin(&daemon, "live_import_del", &["import", "--del"], nets);
    check(&daemon, "live_net_show_after_import_del", &["net", "show"]);
    let bad = "net:\n    - net type: tcp\n      local NI(s):\n        - nid: 127.0.0.2@tcp\n";
    check_stdin(&daemon, "live_import_duplicate", &["import"], bad);
    check_stdin(
        &daemon,
        "live_import_exec",
        &["import", "--exec"],
        "ping:\n    nids: [127.0.0.2@tcp]\n",
    );
    daemon.shutdown();
}

#[test]
fn configure_all_brings_back_the_configuration_files_nets() {
    let rig = Rig::new("configure");
    let daemon = rig.start("a.sock", "127.0.0.2@tcp");
    assert_eq!(ulnetctl(daemon.socket(), &["lnet", "unconfigure"]).code, 0);
    assert!(daemon.node().is_none());
    assert_eq!(ulnetctl(daemon.socket(), &["lnet", "configure"]).code, 0);
    assert_eq!(daemon.nids().len(), 1, "lo only");
    check(&daemon, "live_configure_all", &["lnet", "configure", "--all"]);
    check(&daemon, "live_net_show_configured_all", &["net", "show"]);
    // Again: nothing missing, nothing changes.
    let cookie = daemon.node().unwrap().interface_cookie();
    assert_eq!(ulnetctl(daemon.socket(), &["lnet", "configure", "--all"]).code, 0);
    assert_eq!(daemon.node().unwrap().interface_cookie(), cookie);
    daemon.shutdown();
}

#[test]
fn concurrent_clients_get_consistent_answers() {
    let rig = Rig::new("many");
    let daemon = rig.start("a.sock", "127.0.0.2@tcp");
    let socket = daemon.socket().to_path_buf();
    let threads: Vec<_> = (0..8)
        .map(|index| {
            let socket = socket.clone();
            std::thread::spawn(move || {
                let mut client = Client::connect(&socket).unwrap();
                for round in 0..25 {
                    let request = if (index + round) % 3 == 0 {
                        Request::Set {
                            param: ulnet_control::message::SetParam::RecoveryLimit,
                            value: round,
                        }
                    } else {
                        Request::NetShow { net: None, level: 2 }
                    };
                    match client.call(&request).unwrap() {
                        Response::Done => {}
                        Response::Nets(nets) => assert_eq!(nets.len(), 2),
                        other => panic!("unexpected {other:?}"),
                    }
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    daemon.shutdown();
}

#[test]
fn shutdown_answers_network_down_and_removes_the_socket() {
    let rig = Rig::new("down");
    let daemon = rig.start("a.sock", "127.0.0.2@tcp");
    let live = std::sync::Arc::clone(daemon.live());
    let node = daemon.node().unwrap();
    let socket = daemon.socket().to_path_buf();
    daemon.shutdown();
    assert!(node.is_shut_down());
    assert!(!socket.exists());
    assert_eq!(
        live.handle(Request::NetShow { net: None, level: 0 }),
        Err(ulnet_control::ControlError::NotConfigured)
    );
    assert_eq!(
        live.handle(Request::Configure { all: true, large_nids: false }),
        Err(ulnet_control::ControlError::NotConfigured)
    );
}

#[test]
fn a_second_daemon_on_the_same_socket_is_refused() {
    let rig = Rig::new("twice");
    let first = rig.start("a.sock", "127.0.0.2@tcp");
    let error = Daemon::start(&config("127.0.0.3@tcp"), first.socket(), Some(rig.fabric.clone()))
        .unwrap_err();
    assert!(matches!(error, StartError::Listen(ulnet_control::ListenError::InUse { .. })));
    // The refused daemon took no NID: 127.0.0.3 is still free on the fabric.
    let other = rig.start("b.sock", "127.0.0.3@tcp");
    first.shutdown();
    other.shutdown();
}

#[test]
fn stopping_finalizes_messages_in_flight_with_an_error() {
    let rig = Rig::new("inflight");
    let a = rig.start("a.sock", "127.0.0.2@tcp");
    let b = rig.start("b.sock", "127.0.0.3@tcp");
    let (node_a, target) = (a.node().unwrap(), b.node().unwrap().process_id());
    // Discovered first, so the GET goes out at once instead of waiting for discovery.
    node_a.discover(target.nid, false).unwrap();
    let gets_sent = |node: &ulnet::Node| -> u64 {
        node.stats().peer_nis.iter().map(|ni| ni.statistics.sent_stats.get).sum()
    };
    let before = gets_sent(&node_a);
    // Nothing on b matches: the GET waits for a REPLY that never comes (the tracker would
    // give up after transaction_timeout, 150 s).
    let waiting = std::thread::spawn({
        let node_a = node_a.clone();
        move || node_a.get_into(target, 9, 0xdead, vec![0; 64], HANG_GUARD)
    });
    while gets_sent(&node_a) == before || node_a.stats().messages > 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    a.shutdown();
    let outcome = waiting.join().unwrap();
    // The MD is unlinked with the node: its final event hands the memory back unanswered.
    assert_eq!(outcome, Err(ulnet::TransferError::NoResponse(ulnet::EventKind::Reply)));
    b.shutdown();
}

#[test]
fn ping_and_discover_between_two_nodes() {
    let rig = Rig::new("ping");
    let a = rig.start("a.sock", "127.0.0.2@tcp");
    let b = rig.start("b.sock", "127.0.0.3@tcp");
    check(&a, "live_ping", &["ping", "127.0.0.3@tcp"]);
    check(&a, "live_ping_self", &["ping", "127.0.0.2@tcp"]);
    check(&a, "live_ping_lo", &["ping", "0@lo"]);
    check(&a, "live_ping_unreachable", &["ping", "--timeout", "1", "127.0.0.9@tcp"]);
    check(&a, "live_ping_some_fail", &["ping", "127.0.0.3@tcp,127.0.0.9@tcp"]);
    check(&a, "live_ping_bad_source", &["ping", "--source", "127.0.0.7@tcp", "127.0.0.3@tcp"]);
    check(&a, "live_peer_show_after_ping", &["peer", "show", "-v", "3"]);
    check(&a, "live_discover", &["discover", "127.0.0.3@tcp"]);
    check(&a, "live_discover_self", &["discover", "127.0.0.2@tcp"]);
    check(&a, "live_peer_show_after_discover", &["peer", "show", "-v", "3"]);
    let exec = "ping:\n    nids: [127.0.0.3@tcp]\ndiscover:\n    nids: [127.0.0.3@tcp]\n";
    check_stdin(&a, "live_import_exec_ping_discover", &["import", "--exec"], exec);
    a.shutdown();
    b.shutdown();
}

#[test]
fn discovery_can_be_turned_off_live() {
    let rig = Rig::new("nodisc");
    let a = rig.start("a.sock", "127.0.0.2@tcp");
    let b = rig.start("b.sock", "127.0.0.3@tcp");
    assert_eq!(ulnetctl(b.socket(), &["set", "discovery", "0"]).code, 0);
    assert!(!b.node().unwrap().tunables().discovery);
    // b no longer advertises discovery: a sees a peer that is not multi-rail.
    check(&a, "live_discover_peer_without_discovery", &["discover", "127.0.0.3@tcp"]);
    a.shutdown();
    b.shutdown();
}

#[test]
fn lnet_selftest_false_keeps_the_selftest_service_off_across_rebuilds() {
    let rig = Rig::new("noselftest");
    let hosted = rig.start("on.sock", "127.0.0.2@tcp");
    assert!(hosted.live().hosts_selftest(), "hosted by default");
    let text = "global:\n    lnet_selftest: false\n\
                net:\n    - net type: tcp\n      local NI(s):\n        - nid: 127.0.0.3@tcp\n";
    let config = DaemonConfig::parse(text, false, &host_interfaces().unwrap()).unwrap();
    assert!(!config.selftest);
    let daemon =
        Daemon::start(&config, &rig.dir.path("off.sock"), Some(rig.fabric.clone())).unwrap();
    assert!(!daemon.live().hosts_selftest());
    // A rebuild (net add) brings the node back without it too.
    let run = ulnetctl(daemon.socket(), &["net", "add", "--nid", "127.0.0.13@tcp"]);
    assert_eq!(run.code, 0, "{}", run.transcript());
    assert_eq!(daemon.nids().len(), 3);
    assert!(!daemon.live().hosts_selftest());
    daemon.shutdown();
    hosted.shutdown();
}

#[test]
fn ulnetctl_is_served_while_200_idle_clients_hold_the_control_socket() {
    let rig = Rig::new("idle");
    let daemon = rig.start("a.sock", "127.0.0.2@tcp");
    let idle: Vec<std::os::unix::net::UnixStream> = (0..200)
        .map(|_| std::os::unix::net::UnixStream::connect(daemon.socket()).unwrap())
        .collect();
    let run = ulnetctl(daemon.socket(), &["net", "show"]);
    assert_eq!(run.code, 0, "{}", run.transcript());
    assert!(run.stdout.contains("127.0.0.2@tcp"), "{}", run.stdout);
    drop(idle);
    daemon.shutdown();
}

/// A node with two CPU partitions (what `cpu_npartitions=2` gives): `net add --cpt [1]` binds
/// the NI to CPT 1, a CPT past the node's is refused with -ERANGE, `net show -v` prints each
/// NI's CPTs as lnetctl does, and an export imports back into a node with the same
/// partitions unchanged.
#[test]
fn partitions_bind_nis_and_round_trip_through_export() {
    let rig = Rig::new("cpt");
    let mut two = config("127.0.0.2@tcp");
    two.layout.partitions = ulnet_proto::engine::cpt::Partitions::new(2).unwrap();
    let a = Daemon::start(&two, &rig.dir.path("a.sock"), Some(rig.fabric.clone())).unwrap();
    let add = ulnetctl(a.socket(), &["net", "add", "--nid", "127.0.0.13@tcp", "--cpt", "[1]"]);
    assert_eq!(add.code, 0, "{}", add.transcript());
    let bad = ulnetctl(a.socket(), &["net", "add", "--nid", "127.0.0.14@tcp", "--cpt", "[2]"]);
    assert_ne!(bad.code, 0);
    assert!(bad.transcript().contains("invalid CPT value"), "{}", bad.transcript());
    // Past the 255 a CPT list's grammar allows elsewhere: still the node's refusal, not an
    // unbound NI.
    let far = ulnetctl(a.socket(), &["net", "add", "--nid", "127.0.0.14@tcp", "--cpt", "[300]"]);
    assert_ne!(far.code, 0);
    assert!(far.transcript().contains("invalid CPT value"), "{}", far.transcript());
    let show = ulnetctl(a.socket(), &["net", "show", "-v"]).stdout;
    // lo and the unbound NI cover both partitions; the bound one only CPT 1.
    assert_eq!(show.matches("CPT: \"[0,1]\"").count(), 2, "{show}");
    assert_eq!(show.matches("CPT: \"[1]\"").count(), 1, "{show}");
    let export = ulnetctl(a.socket(), &["export", "--backup"]).stdout;
    assert!(export.contains("CPT: \"[1]\""), "{export}");

    let mut two_b = config("127.0.0.3@tcp");
    two_b.layout.partitions = two.layout.partitions;
    let b = Daemon::start(&two_b, &rig.dir.path("b.sock"), Some(rig.fabric.clone())).unwrap();
    let del = ulnetctl(b.socket(), &["net", "del", "--net", "tcp"]);
    assert_eq!(del.code, 0, "{}", del.transcript());
    let text = export
        .replace("127.0.0.2@tcp", "127.0.0.3@tcp")
        .replace("127.0.0.13@tcp", "127.0.0.23@tcp");
    let import = ulnetctl_with_stdin(b.socket(), &["import"], &text);
    assert_eq!(import.code, 0, "{}", import.transcript());
    let again = ulnetctl(b.socket(), &["export", "--backup"]).stdout;
    assert_eq!(again, text);
    // cpt-of-nid hashes over all the node's partitions: 192.168.1.10@tcp's NID bytes sum to
    // 373 (odd: CPT 1), 10.0.0.1@tcp1's to 14 (CPT 0).
    let cpts = ulnetctl(a.socket(), &["cpt-of-nid", "192.168.1.10@tcp", "10.0.0.1@tcp1"]);
    assert_eq!(
        cpts.stdout,
        "cpt-of-nid:\n-     nid: 192.168.1.10@tcp\n      cpt: 1\n-     nid: 10.0.0.1@tcp1\n      \
         cpt: 0\n"
    );
    let bad = ulnetctl(a.socket(), &["cpt-of-nid", "nonsense"]);
    assert!(bad.transcript().contains("invalid NID"), "{}", bad.transcript());
    // Router buffers per partition: the node-wide defaults (2048 tiny, 16384 small, 1024
    // large) halved into `cpt[0]` and `cpt[1]` (router.c lnet_nrb_*_calculate()).
    let routing = ulnetctl(a.socket(), &["set", "routing", "1"]);
    assert_eq!(routing.code, 0, "{}", routing.transcript());
    let show = ulnetctl(a.socket(), &["routing", "show"]).stdout;
    let pool = |npages: u32, count: u32| {
        format!(
            "              npages: {npages}\n              nbuffers: {count}\n              \
             credits: {count}\n              mincredits: {count}\n"
        )
    };
    let cpt = |index: u32| {
        format!(
            "    - cpt[{index}]:\n          tiny:\n{}          small:\n{}          large:\n{}",
            pool(0, 1024),
            pool(1, 8192),
            pool(256, 512)
        )
    };
    assert!(show.starts_with(&format!("routing:\n{}{}", cpt(0), cpt(1))), "{show}");
    assert!(
        show.ends_with("buffers:\n    tiny: 2048\n    small: 16384\n    large: 1024\n"),
        "{show}"
    );
    a.shutdown();
    b.shutdown();
}
