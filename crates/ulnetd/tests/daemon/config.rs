//! Configuration files read strictly (`--config` refuses what ulnetd cannot honour, naming
//! it), `--check`, and `ulnetctl export` then `import` reproducing a node on a fresh daemon,
//! with and without `--backup`.
//!
//! Addresses are in 127.55.<block>.x; ports are the OS's free ones.

use std::net::TcpListener;
use std::process::Command;

use crate::support::{self, Process, SIGTERM, TempDir};

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A net item on an address that no other test uses.
const NET: &str = "net:\n    - net type: tcp\n      local NI(s):\n        - nid: 127.55.0.1@tcp\n";

/// Starts a daemon on `text`, which must be refused before the ready line with exit status
/// 78 and every line of `messages` in its log.
fn refused(text: &str, messages: &[&str]) {
    let mut daemon = Process::spawn(Some(text), &[]);
    assert_eq!(daemon.ready, None, "{text} started");
    assert_eq!(daemon.wait(), 78, "{text}");
    let log = daemon.log();
    for message in messages {
        assert!(log.contains(&format!("ulnetd: {message}")), "{text}: {log}");
    }
    assert!(!log.contains("WARN"), "a refusal, not a warning: {log}");
    assert!(!daemon.socket.exists());
}

#[test]
fn every_unsupported_block_stops_the_daemon_before_it_is_ready() {
    refused("udsp:\n    - src: tcp\n", &["udsp: an item without 'idx' (lnetctl skips it)"]);
    refused("udsp:\n    - idx: 0\n      dst: bogus\n", &["udsp: idx 0: failed to parse dst"]);
    // A route the node could never take: all problems are reported, not just the first.
    refused(
        &format!(
            "{NET}route:\n    - net: tcp\n      gateway: 127.55.0.9@tcp\n\
             \x20   - net: tcp2\n      gateway: 127.55.0.[8-9]@tcp1\n"
        ),
        &[
            "route: net tcp is a local net of this node",
            "route: gateway 127.55.0.8@tcp1 is on no local net of this node",
            "route: gateway 127.55.0.9@tcp1 is on no local net of this node",
        ],
    );
    // One the node itself refuses at start: the daemon stops before it is ready too.
    let route = "    - net: tcp1\n      gateway: 127.55.0.9@tcp\n";
    refused(
        &format!("global:\n    accept_port: {}\n{NET}route:\n{route}{route}", free_port()),
        &["configuration: Route already exists or the specified network is local"],
    );
}

#[test]
fn unknown_keys_inside_known_blocks_are_errors() {
    refused(
        &format!(
            "{NET}          tunables:\n              peer_credits: 8\n              peer_credit: 16\n"
        ),
        &["tunables: unknown key 'peer_credit'"],
    );
    refused(
        &format!("{NET}      lnd_tunables:\n          conns_per_peer: 2\n"),
        &["net: unknown key 'lnd_tunables'"],
    );
    refused(
        &format!("{NET}peer:\n    - primary nid: 127.55.0.9@tcp\n      multi-rail: true\n"),
        &["peer: unknown key 'multi-rail'"],
    );
    refused(
        &format!(
            "{NET}peer:\n    - primary nid: 127.55.0.9@tcp\n      peer ni:\n        - nid: 127.55.0.9@tcp\n          health: 5\n"
        ),
        &["peer ni: unknown key 'health'"],
    );
    refused("numa:\n    rnage: 2\n", &["numa: unknown key 'rnage'"]);
    // Unknown top-level blocks and global keys were errors already (lnetctl's own).
    refused("routes:\n    - net: tcp1\n", &["invalid key 'routes'"]);
    refused("global:\n    retry_cnt: 1\n", &["invalid key 'retry_cnt'"]);
}

#[test]
fn import_into_a_running_node_refuses_what_it_cannot_honour_and_applies_nothing() {
    let port = free_port();
    let config = format!("global:\n    accept_port: {port}\n    accept: all\n{NET}");
    let mut daemon = Process::spawn(Some(&config), &[]);
    assert!(daemon.ready.is_some(), "{}", daemon.log());
    let before = ok(&daemon, &["export", "--backup"]);
    let import = |text: &str| support::ulnetctl_with_stdin(&daemon.socket, &["import"], text);

    let udsp = import("global:\n    retry_count: 1\nudsp:\n    - src: tcp\n");
    assert_ne!(udsp.code, 0);
    assert!(udsp.stderr.contains("errno: -95"), "{}", udsp.stderr);
    assert!(udsp.stderr.contains("udsp: an item without 'idx'"), "{}", udsp.stderr);
    let udsp = import("udsp:\n    - idx: 0\n      src: tcp\n      rte: 1.1.1.1@tcp\n");
    assert!(udsp.stderr.contains("src and rte cannot be combined"), "{}", udsp.stderr);
    // A key the kernel would skip without a word.
    let peer = import("peer:\n    - primary nid: 127.55.0.9@tcp\n      colour: red\n");
    assert!(peer.stderr.contains("peer: unknown key 'colour'"), "{}", peer.stderr);
    assert_eq!(ok(&daemon, &["export", "--backup"]), before, "nothing applied");

    // A key lnetctl warns about keeps lnetctl's warning there.
    let warned = import(
        "net:\n    - net type: tcp\n      local NI(s):\n        - nid: 127.55.0.5@tcp\n      frob: 1\n",
    );
    assert_eq!(warned.code, 0, "{}", warned.stderr);
    assert!(warned.stderr.contains("Ignoring unrecognized key 'frob' for 'net'"));
    assert_eq!(daemon.signal_and_wait(SIGTERM), 0);
}

fn check(text: &str) -> support::Run {
    let dir = TempDir::new("check");
    let file = dir.file("c.yaml", text);
    let output = Command::new(support::ULNETD)
        .arg("--check")
        .arg(&file)
        .env_remove("ULNET_LOG")
        .output()
        .unwrap();
    support::Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        args: Vec::new(),
    }
}

#[test]
fn check_is_silent_on_a_valid_file_and_lists_the_problems_of_an_invalid_one() {
    let valid = check(&format!("global:\n    accept_port: 7999\n    retry_count: 1\n{NET}"));
    assert_eq!((valid.code, valid.stdout.as_str(), valid.stderr.as_str()), (0, "", ""));

    let routing = "routing:\n    enable: 1\nbuffers:\n    tiny: 512\n";
    let routes = "route:\n    - net: tcp1\n      gateway: 127.55.0.[8-9]@tcp\n      hop: 2\n";
    let valid = check(&format!("{NET}{routing}{routes}udsp:\n    - idx: 0\n      src: tcp\n"));
    assert_eq!((valid.code, valid.stdout.as_str(), valid.stderr.as_str()), (0, "", ""));

    let invalid = check(&format!(
        "{NET}udsp:\n    - src: tcp\nroute:\n    - net: tcp1\n      gateway: 1@gni\n"
    ));
    assert_eq!(invalid.code, 78);
    assert_eq!(invalid.stdout, "");
    assert_eq!(
        invalid.stderr,
        "ulnetd: udsp: an item without 'idx' (lnetctl skips it)\n\
         ulnetd: route: gateway 1@gni is on no local net of this node\n"
    );
    let rules = check(&format!("{NET}udsp:\n    - idx: 0\n      src: tcp\n"));
    assert_eq!((rules.code, rules.stderr.as_str()), (0, ""));
    let yaml = check("net: [\n");
    assert_eq!(yaml.code, 78);
    assert!(yaml.stderr.starts_with("ulnetd: invalid YAML"), "{}", yaml.stderr);

    // Nothing is bound: a check of a file whose NI is in use by a running daemon passes.
    let port = free_port();
    let config = format!("global:\n    accept_port: {port}\n    accept: all\n{NET}");
    let mut running = Process::spawn(Some(&config), &[]);
    assert!(running.ready.is_some(), "{}", running.log());
    assert_eq!(check(&config).code, 0);
    assert_eq!(running.signal_and_wait(SIGTERM), 0);
}

#[test]
fn check_of_a_missing_file_is_exit_status_66() {
    let output = Command::new(support::ULNETD)
        .args(["--check", "/nonexistent/ulnetd.yaml"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(66));
    assert!(String::from_utf8_lossy(&output.stderr).contains("cannot read"));
}

#[test]
fn help_documents_check() {
    let output = Command::new(support::ULNETD).arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&output.stdout);
    assert!(help.contains("--check [<FILE>]"), "{help}");
    assert!(help.contains("--modprobe <FILE>"), "{help}");
}

// ------------------------------------------------------------------------ round trips

/// A node with what a configuration can set: NIs on exact NIDs (none of them an
/// interface's first address), tunables and LND tunables off their defaults, a second net,
/// a peer with two NIs, and globals.
fn original(port: u16, block: u8) -> String {
    format!(
        "global:\n    accept_port: {port}\n    accept: all\n    retry_count: 1\n    \
         transaction_timeout: 40\n    health_sensitivity: 50\n    discovery: 0\n\
         net:\n    - net type: tcp\n      local NI(s):\n        - nid: 127.55.{block}.2@tcp\n\
         \x20         tunables:\n              peer_timeout: 90\n              peer_credits: 16\n\
         \x20             credits: 512\n          lnd tunables:\n              conns_per_peer: 2\n\
         \x20       - nid: 127.55.{block}.3@tcp\n\
         \x20   - net type: tcp3\n      local NI(s):\n        - nid: 127.55.{block}.4@tcp3\n\
         peer:\n    - primary nid: 127.55.{block}.20@tcp\n      Multi-Rail: true\n      peer ni:\n\
         \x20       - nid: 127.55.{block}.20@tcp\n        - nid: 127.55.{block}.21@tcp\n"
    )
}

fn ok(daemon: &Process, args: &[&str]) -> String {
    let run = daemon.ulnetctl(args);
    assert_eq!(run.code, 0, "{args:?}: {}{}", run.stdout, run.stderr);
    assert_eq!(run.stderr, "", "{args:?}");
    run.stdout
}

/// What must be the same on both nodes: the backup (nets with NIDs, tunables, peers,
/// globals) and `net show` (NIDs and their state).
fn fingerprint(daemon: &Process) -> (String, String) {
    (ok(daemon, &["export", "--backup"]), ok(daemon, &["net", "show"]))
}

fn round_trip(block: u8, backup: bool) {
    let port = free_port();
    let mut first = Process::spawn(Some(&original(port, block)), &[]);
    assert!(first.ready.is_some(), "{}", first.log());
    let export = if backup { ok(&first, &["export", "--backup"]) } else { ok(&first, &["export"]) };
    let expected = fingerprint(&first);
    assert!(expected.0.contains(&format!("nid: 127.55.{block}.2@tcp")), "{}", expected.0);
    assert_eq!(first.signal_and_wait(SIGTERM), 0);

    // A fresh node with only `lo` and the same port, then `ulnetctl import`.
    let fresh = format!("global:\n    accept_port: {port}\n    accept: all\n");
    let second = Process::spawn(Some(&fresh), &[]);
    assert!(second.ready.is_some(), "{}", second.log());
    let run = support::ulnetctl_with_stdin(&second.socket, &["import"], &export);
    assert_eq!(run.code, 0, "import of\n{export}: {}{}", run.stdout, run.stderr);
    assert_eq!(fingerprint(&second), expected, "import of\n{export}");
    let mut second = second;
    assert_eq!(second.signal_and_wait(SIGTERM), 0);

    // A backup is a configuration file too (with the daemon's own keys added). A full
    // export carries socklnd's module-wide timeout, which a configuration cannot set: refused
    // by name, where `import` (above) follows lnetctl's warning.
    let as_config = format!("global:\n    accept_port: {port}\n    accept: all\n---\n{export}");
    let mut third = Process::spawn(Some(&as_config), &[]);
    if backup {
        assert!(third.ready.is_some(), "{}", third.log());
        assert_eq!(fingerprint(&third), expected, "--config of\n{export}");
        assert_eq!(third.signal_and_wait(SIGTERM), 0);
    } else {
        assert_eq!(third.ready, None);
        assert_eq!(third.wait(), 78);
        assert!(third.log().contains("ulnetd: lnd tunables: 'timeout' cannot be configured here"));
    }
}

#[test]
fn export_backup_then_import_reproduces_the_node() {
    round_trip(1, true);
}

#[test]
fn full_export_then_import_reproduces_the_node() {
    round_trip(2, false);
}

#[test]
fn export_while_lnet_is_down_or_absent_prints_the_error_and_exits_0() {
    let daemon = Process::spawn(Some("global:\n    retry_count: 1\n"), &[]);
    assert!(daemon.ready.is_some(), "{}", daemon.log());
    ok(&daemon, &["lnet", "unconfigure"]);
    for args in [&["export"][..], &["export", "--backup"]] {
        let run = daemon.ulnetctl(args);
        assert_eq!(run.code, 0, "{args:?}: {}{}", run.stdout, run.stderr);
        assert!(run.stderr.contains("errno:"), "{args:?}: {}", run.stderr);
    }
    let mut daemon = daemon;
    assert_eq!(daemon.signal_and_wait(SIGTERM), 0);
    // No daemon at all: lnetctl without LNet loaded reports and exits 0 too.
    for args in [&["export"][..], &["export", "--backup"]] {
        let run = daemon.ulnetctl(args);
        assert_eq!((run.code, run.stdout.as_str()), (0, ""), "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains("startup:"), "{args:?}: {}", run.stderr);
    }
    // Other commands keep their failure status.
    assert_ne!(daemon.ulnetctl(&["net", "show"]).code, 0);
}
