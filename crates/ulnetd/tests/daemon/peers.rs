//! Multi-rail administration against real `ulnetd` processes over loopback TCP: configured
//! peers added, shown and deleted, global tunables set and shown, local NI health set and
//! its recovery queue listed, and peers exported from one daemon and imported into another.
//!
//! Each test has its own address block (127.54.<block>.x) and a port the OS just handed out.

use std::net::TcpListener;

use crate::support::{Process, SIGTERM};

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn nid(block: u8, host: u8) -> String {
    format!("127.54.{block}.{host}@tcp")
}

/// A daemon with one tcp NI per NID given.
fn spawn(nids: &[&str], port: u16) -> Process {
    let mut config = format!(
        "global:\n    accept_port: {port}\n    accept: all\n\
         net:\n    - net type: tcp\n      local NI(s):\n"
    );
    for nid in nids {
        config.push_str(&format!("        - nid: {nid}\n"));
    }
    let daemon = Process::spawn(Some(&config), &[]);
    assert!(daemon.ready.is_some(), "{nids:?} did not start: {}", daemon.log());
    daemon
}

fn ok(daemon: &Process, args: &[&str]) -> String {
    let run = daemon.ulnetctl(args);
    assert_eq!(run.code, 0, "{args:?}: {}{}", run.stdout, run.stderr);
    run.stdout
}

fn stop(mut daemon: Process) {
    assert_eq!(daemon.signal_and_wait(SIGTERM), 0, "{}", daemon.log());
}

#[test]
fn peer_add_show_del_round_trip() {
    let port = free_port();
    let a = spawn(&[&nid(1, 2)], port);
    let (primary, second, third) = (nid(1, 10), nid(1, 11), nid(1, 12));
    let list = "127.54.1.[11-12]@tcp".to_string();
    ok(&a, &["peer", "add", "--prim_nid", &primary, "--nid", &list, "--lock_prim"]);
    // Re-adding what the peer has succeeds and duplicates nothing.
    ok(&a, &["peer", "add", "--prim_nid", &primary, "--nid", &second]);
    let shown = ok(&a, &["peer", "show"]);
    assert_eq!(
        shown,
        format!(
            "peer:\n-     primary nid: {primary}\n      Multi-Rail: true\n      peer ni:\n\
             \x20     -     nid: {primary}\n            state: NA\n\
             \x20     -     nid: {second}\n            state: NA\n\
             \x20     -     nid: {third}\n            state: NA\n"
        )
    );
    // Level 3: LOCK_PRIMARY | CONFIGURED | MULTI_RAIL, as sanity-lnet test 304 expects.
    let verbose = ok(&a, &["peer", "show", "-v", "3", "--nid", &third]);
    assert!(verbose.contains("peer state: 1048585"), "{verbose}");
    assert!(verbose.contains("health value: 1000"), "{verbose}");
    // Level 4 adds UDSP info and ulnet's latency percentiles.
    let detailed = ok(&a, &["peer", "show", "-v", "4"]);
    assert!(detailed.contains("udsp info:") && detailed.contains("put_ack_p99_usec: 0"));
    assert_eq!(ok(&a, &["peer", "list"]), format!("peer list:\n-     nid: {primary}\n"));
    // Health: one peer NI down, listed on the peer recovery queue only once heard from (it
    // never was), then everything back up.
    ok(&a, &["peer", "set", "--nid", &third, "--health", "0"]);
    let verbose = ok(&a, &["peer", "show", "-v", "2", "--nid", &third]);
    assert!(verbose.contains("health value: 0"), "{verbose}");
    ok(&a, &["peer", "set", "--all", "--health", "1000"]);
    assert!(!ok(&a, &["peer", "show", "-v", "2"]).contains("health value: 0"));
    // Deleting a secondary, then the whole locked peer: without --force only the other NIDs
    // go; with it the peer goes.
    ok(&a, &["peer", "del", "--prim_nid", &primary, "--nid", &third]);
    assert!(!ok(&a, &["peer", "show"]).contains(&third));
    ok(&a, &["peer", "del", "--prim_nid", &primary]);
    let kept = ok(&a, &["peer", "show"]);
    assert!(kept.contains(&primary) && !kept.contains(&second), "{kept}");
    ok(&a, &["peer", "del", "--prim_nid", &primary, "--force"]);
    assert_eq!(ok(&a, &["peer", "show"]), "");
    let run = a.ulnetctl(&["peer", "show", "--nid", &primary]);
    assert_ne!(run.code, 0);
    stop(a);
}

#[test]
fn peer_errors_match_lnetctl() {
    let port = free_port();
    let local = nid(2, 2);
    let a = spawn(&[&local], port);
    let unknown = nid(2, 9);
    let run = a.ulnetctl(&["peer", "del", "--prim_nid", &unknown]);
    assert_eq!(run.code, 234);
    assert_eq!(
        run.stderr,
        "---\ndel:\n-     peer:\n      errno: -2\n      descr: ! \"failed to del primary peer\"\n...\n"
    );
    let run = a.ulnetctl(&["peer", "add", "--prim_nid", "127.54.2.300@tcp"]);
    assert_eq!(run.code, 234);
    assert!(run.stderr.contains("\"unsupported primary NID\""), "{}", run.stderr);
    // The node's own NID is a peer like any other (lnet_add_peer_ni() takes it: a self peer).
    ok(&a, &["peer", "add", "--prim_nid", &local]);
    ok(&a, &["peer", "del", "--prim_nid", &local]);
    // A secondary NID is not the primary: -ENODEV.
    ok(&a, &["peer", "add", "--prim_nid", &nid(2, 10), "--nid", &nid(2, 11)]);
    let run = a.ulnetctl(&["peer", "del", "--prim_nid", &nid(2, 11)]);
    assert!(run.stderr.contains("errno: -19"), "{}", run.stderr);
    stop(a);
}

#[test]
fn set_tunables_then_global_show() {
    let port = free_port();
    let a = spawn(&[&nid(3, 2)], port);
    for (param, value) in [
        ("health_sensitivity", "50"),
        ("retry_count", "1"),
        ("transaction_timeout", "30"),
        ("recovery_interval", "5"),
        ("recovery_limit", "60"),
        ("discovery", "0"),
        ("max_interfaces", "8"),
        ("numa_range", "2"),
        ("drop_asym_route", "1"),
        ("response_tracking", "1"),
        ("max_recovery_ping_interval", "64"),
    ] {
        ok(&a, &["set", param, value]);
    }
    let shown = ok(&a, &["global", "show"]);
    assert_eq!(
        shown,
        "global:\n    numa_range: 2\n    max_interfaces: 4096\n    discovery: 0\n    \
         drop_asym_route: 1\n    retry_count: 1\n    transaction_timeout: 30\n    \
         health_sensitivity: 50\n    recovery_interval: 1\n    router_sensitivity: 100\n    \
         lnd_timeout: 14\n    response_tracking: 1\n    recovery_limit: 60\n    \
         max_recovery_ping_interval: 64\n"
    );
    // Out-of-range values are refused with lnetctl's reports and exit codes.
    let run = a.ulnetctl(&["set", "response_tracking", "7"]);
    assert_eq!(run.code, 234);
    assert!(run.stderr.contains("Valid values are: 0, 1, 2, or 3"), "{}", run.stderr);
    let run = a.ulnetctl(&["set", "health_sensitivity", "1001"]);
    assert_eq!(run.code, 195);
    let run = a.ulnetctl(&["set", "recovery_limit", "x"]);
    assert_eq!((run.code, run.stderr.contains("cannot parse recovery_limit value")), (255, true));
    stop(a);
}

#[test]
fn net_set_health_then_net_show_and_recovery_queue() {
    let port = free_port();
    let (first, second) = (nid(4, 2), nid(4, 3));
    let a = spawn(&[&first, &second], port);
    assert_eq!(ok(&a, &["debug", "recovery", "--local"]), "");
    ok(&a, &["net", "set", "--nid", &second, "--health", "0"]);
    let shown = ok(&a, &["net", "show", "-v", "2", "--net", "tcp"]);
    let at_second = shown.split(&format!("nid: {second}")).nth(1).unwrap();
    assert!(at_second.contains("status: down"), "{shown}");
    assert!(at_second.contains("health value: 0"), "{shown}");
    assert!(shown.contains("fatal_error: 0"), "{shown}");
    assert_eq!(
        ok(&a, &["debug", "recovery", "--local"]),
        format!("Local NI recovery:\n      nid-0: {second}\n")
    );
    assert_eq!(ok(&a, &["debug", "recovery", "--peer"]), "");
    // Back to full health: up again.
    ok(&a, &["net", "set", "--all", "--health", "1000"]);
    let shown = ok(&a, &["net", "show", "-v", "2", "--net", "tcp"]);
    assert!(!shown.contains("status: down") && !shown.contains("health value: 0"), "{shown}");
    stop(a);
}

/// `net set --conns-per-peer` changes one NI (or all) of a running daemon; `net show` and
/// `export` report the count in force, and 0 goes back to auto (1 on loopback addresses).
#[test]
fn net_set_conns_per_peer_changes_the_count_in_force() {
    let port = free_port();
    let (first, second) = (nid(6, 2), nid(6, 3));
    let a = spawn(&[&first, &second], port);
    let counts = |a: &Process| -> Vec<String> {
        ok(a, &["net", "show", "-v", "--net", "tcp"])
            .lines()
            .filter(|line| line.contains("conns_per_peer:"))
            .map(|line| line.trim().to_string())
            .collect()
    };
    assert_eq!(counts(&a), ["conns_per_peer: 1", "conns_per_peer: 1"]);
    ok(&a, &["net", "set", "--nid", &second, "--conns-per-peer", "4"]);
    assert_eq!(counts(&a), ["conns_per_peer: 1", "conns_per_peer: 4"]);
    assert!(ok(&a, &["export"]).contains("conns_per_peer: 4"));
    ok(&a, &["net", "set", "--all", "--conns-per-peer", "0"]);
    assert_eq!(counts(&a), ["conns_per_peer: 1", "conns_per_peer: 1"]);
    // lnetctl's own range check, and a NID that is not ours changes nothing (as the kernel).
    let run = a.ulnetctl(&["net", "set", "--all", "--conns-per-peer", "128"]);
    assert_ne!(run.code, 0);
    ok(&a, &["net", "set", "--nid", &nid(6, 99), "--conns-per-peer", "3"]);
    assert_eq!(counts(&a), ["conns_per_peer: 1", "conns_per_peer: 1"]);
    stop(a);
}

#[test]
fn export_then_import_reproduces_the_peers() {
    let port = free_port();
    let a = spawn(&[&nid(5, 2)], port);
    let b = spawn(&[&nid(5, 3)], port);
    let mr_peer = format!("{},{}", nid(5, 11), nid(5, 12));
    ok(&a, &["peer", "add", "--prim_nid", &nid(5, 10), "--nid", &mr_peer]);
    ok(&a, &["peer", "add", "--prim_nid", &nid(5, 20), "--non_mr"]);
    ok(&a, &["set", "retry_count", "3"]);
    let backup = ok(&a, &["export", "--backup"]);
    assert!(backup.contains("peer:") && backup.contains("Multi-Rail: false"), "{backup}");
    // The backup's `net:` part names a's NIs by NID (ulnet keeps `nid:`), which b must not
    // take: b gets the peers and globals only.
    let peers_and_globals =
        |export: &str| export[export.find("\npeer:").unwrap() + 1..].to_string();
    let file = b.dir.file("backup.yaml", &peers_and_globals(&backup));
    ok(&b, &["import", file.to_str().unwrap()]);
    assert_eq!(ok(&b, &["peer", "show"]), ok(&a, &["peer", "show"]));
    assert!(ok(&b, &["global", "show"]).contains("retry_count: 3"));
    // A full export's peer NIs carry every health counter; they are read-only and the
    // export imports as well.
    let full = ok(&a, &["export"]);
    assert!(full.contains("peer state:") && full.contains("next_ping"), "{full}");
    ok(&b, &["import", "--del", file.to_str().unwrap()]);
    assert_eq!(ok(&b, &["peer", "show"]), "");
    ok(&b, &["import", b.dir.file("full.yaml", &peers_and_globals(&full)).to_str().unwrap()]);
    // (The peer table's order after a delete and re-add is its own: compare peer by peer.)
    for primary in [nid(5, 10), nid(5, 20)] {
        let show = ["peer", "show", "--nid", primary.as_str()];
        assert_eq!(ok(&b, &show), ok(&a, &show));
    }
    // --del of the backup removes the peers again.
    ok(&b, &["import", "--del", file.to_str().unwrap()]);
    assert_eq!(ok(&b, &["peer", "show"]), "");
    stop(a);
    stop(b);
}

#[test]
fn configured_peers_come_from_the_config_file_and_survive_net_changes() {
    let port = free_port();
    let (local, peer) = (nid(6, 2), nid(6, 10));
    let config = format!(
        "global:\n    accept_port: {port}\n    accept: all\n\
         net:\n    - net type: tcp\n      local NI(s):\n        - nid: {local}\n\
         peer:\n    - primary nid: {peer}\n      Multi-Rail: True\n      peer ni:\n\
         \x20       - nid: {peer}\n        - nid: {}\n",
        nid(6, 11)
    );
    let a = Process::spawn(Some(&config), &[]);
    assert!(a.ready.is_some(), "{}", a.log());
    let before = ok(&a, &["peer", "show"]);
    assert!(before.contains(&nid(6, 11)), "{before}");
    // A net change rebuilds the node; the configured peer is kept.
    ok(&a, &["net", "add", "--nid", &nid(6, 3)]);
    assert_eq!(ok(&a, &["peer", "show"]), before);
    stop(a);
}

/// The `send_count` line of `stats show`.
fn send_count(daemon: &Process) -> u64 {
    let shown = ok(daemon, &["stats", "show"]);
    let line = shown.lines().find(|line| line.trim_start().starts_with("send_count:"));
    let value = line.and_then(|line| line.split(':').nth(1)).map(str::trim);
    value.and_then(|value| value.parse().ok()).unwrap_or_else(|| panic!("{shown}"))
}

#[test]
fn stats_reset_zeroes_the_counters() {
    let port = free_port();
    let a = spawn(&[&nid(7, 2)], port);
    ok(&a, &["ping", &nid(7, 2)]);
    assert!(send_count(&a) > 0);
    ok(&a, &["stats", "reset"]);
    assert_eq!(send_count(&a), 0);
    stop(a);
}

/// A node's own NIDs are peers like any other's (sanity-lnet tests 210, 230 and 475): a ping
/// of its own NID goes through the TCP LND to itself, with `conns_per_peer` typed connections
/// each way as lctl's `conn_list` counts them (2 + 2 x conns_per_peer lines name the NID), and
/// `discover` of itself makes a multi-rail self peer with the node's NIDs and statistics.
#[test]
fn a_node_pings_and_discovers_itself() {
    let port = free_port();
    let (first, second) = (nid(9, 1), nid(9, 2));
    let a = spawn(&[&first, &second], port);
    ok(&a, &["net", "set", "--all", "--conns-per-peer", "2"]);
    ok(&a, &["ping", &first]);
    let deadline = std::time::Instant::now() + crate::HANG_GUARD;
    loop {
        let conns = ok(&a, &["conn_list"]);
        let named =
            conns.lines().filter(|line| line.starts_with(&format!("12345-{first} "))).count();
        if named == 2 + 2 * 2 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{named} connections to itself:\n{conns}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let found = ok(&a, &["discover", &first]);
    assert!(
        found.contains(&format!("- nid: {first}")) && found.contains(&format!("- nid: {second}"))
    );
    let shown = ok(&a, &["peer", "show", "-v", "--nid", &first]);
    assert!(shown.contains("Multi-Rail: true"), "{shown}");
    assert!(shown.contains(&format!("nid: {second}")), "{shown}");
    assert!(!shown.contains("send_count: 0\n"), "the self peer counts its traffic: {shown}");
    stop(a);
}
