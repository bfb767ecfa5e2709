//! Fault injection and the LND timeout on `ulnetd` processes over real TCP: a drop rule
//! makes pings fail at its rate, a delay rule holds them for its latency, and
//! `net set --lnd-timeout` shows in `net show -v`.
//!
//! Pings give up after two seconds (lnetctl sends no timeout for `--timeout 1`) where a rule is meant to make them fail; the rules'
//! counters (`fault ... show`) say what happened, so nothing here depends on how fast the
//! machine is beyond a delay of 5 s outlasting a 2 s ping timeout.

use std::net::TcpListener;

use crate::support::{Process, SIGTERM};

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn nid(host: u8) -> String {
    format!("127.53.40.{host}@tcp")
}

fn spawn(nid: &str, port: u16) -> Process {
    let config = format!(
        "global:\n    accept_port: {port}\n    accept: all\n\
         net:\n    - net type: tcp\n      local NI(s):\n        - nid: {nid}\n"
    );
    let daemon = Process::spawn(Some(&config), &[]);
    assert!(daemon.ready.is_some(), "{nid} did not start: {}", daemon.log());
    daemon
}

fn ok(daemon: &Process, args: &[&str]) -> String {
    let run = daemon.ulnetctl(args);
    assert_eq!(run.code, 0, "{args:?}: {}{}", run.stdout, run.stderr);
    run.stdout
}

/// The value of `key: N` in a `show` output.
fn value(text: &str, key: &str) -> u64 {
    let prefix = format!("{key}: ");
    let line = text.lines().map(str::trim).find(|line| line.starts_with(&prefix));
    line.and_then(|line| line[prefix.len()..].parse().ok()).unwrap_or_else(|| panic!("{text}"))
}

#[test]
fn drop_and_delay_rules_on_pings_between_daemons() {
    let port = free_port();
    let (a_nid, b_nid) = (nid(2), nid(3));
    let a = spawn(&a_nid, port);
    let b = spawn(&b_nid, port);
    // The first ping discovers b; the rules below then only see pings.
    ok(&a, &["ping", &b_nid]);

    // One GET in every two from a is dropped on arrival at b.
    ok(&b, &["fault", "drop", "add", "-s", &a_nid, "-d", "*@tcp", "-r", "2", "-m", "GET"]);
    let failed =
        (0..6).filter(|_| a.ulnetctl(&["ping", "--timeout", "2", &b_nid]).code != 0).count();
    let shown = ok(&b, &["fault", "drop", "show"]);
    assert_eq!((value(&shown, "fs_count"), value(&shown, "ds_dropped")), (6, 3), "{shown}");
    assert_eq!(value(&shown, "fs_get"), 3, "{shown}");
    assert_eq!(failed, 3, "{shown}");
    ok(&b, &["fault", "drop", "reset", "x"]);
    assert_eq!(value(&ok(&b, &["fault", "drop", "show"]), "ds_dropped"), 0);
    ok(&b, &["fault", "drop", "del", "-s", &a_nid, "-d", "*@tcp"]);
    assert_eq!(ok(&b, &["fault", "drop", "show"]), "");
    ok(&a, &["ping", "--timeout", "2", &b_nid]);

    // Every GET is held 5 s on arrival: a 2 s ping gives up, a patient one gets its reply.
    ok(&b, &["fault", "delay", "add", "-s", "*", "-d", "*", "-r", "1", "-l", "5", "-m", "GET"]);
    assert_ne!(a.ulnetctl(&["ping", "--timeout", "2", &b_nid]).code, 0);
    ok(&a, &["ping", "--timeout", "10", &b_nid]);
    let shown = ok(&b, &["fault", "delay", "show"]);
    assert_eq!((value(&shown, "ls_delayed"), value(&shown, "la_latency")), (2, 5), "{shown}");
    ok(&b, &["fault", "delay", "del", "-a"]);
    ok(&a, &["ping", "--timeout", "2", &b_nid]);

    // A health rule on a fails its sends as the LND would: the ping fails at once.
    ok(&a, &["fault", "drop", "add", "-s", "*", "-d", &b_nid, "-r", "1", "-e", "local_error"]);
    let run = a.ulnetctl(&["ping", "--timeout", "5", &b_nid]);
    assert_ne!(run.code, 0, "{}", run.stdout);
    let stats = ok(&a, &["stats", "show"]);
    assert!(value(&stats, "local_error_count") >= 1, "{stats}");

    for mut daemon in [a, b] {
        assert_eq!(daemon.signal_and_wait(SIGTERM), 0, "{}", daemon.log());
    }
}

#[test]
fn lnd_timeout_set_live_shows_in_net_show() {
    let port = free_port();
    let a = spawn(&nid(10), port);
    let timeout = |a: &Process| value(&ok(a, &["net", "show", "-v", "--net", "tcp"]), "timeout");
    assert_eq!(timeout(&a), 50);
    ok(&a, &["net", "set", "--net", "tcp", "--lnd-timeout", "7"]);
    assert_eq!(timeout(&a), 7);
    // 0 follows the global lnd_timeout.
    let global = value(&ok(&a, &["global", "show"]), "lnd_timeout");
    ok(&a, &["net", "set", "--net", "tcp", "--lnd-timeout", "0"]);
    assert_eq!(timeout(&a), global);
    let run = a.ulnetctl(&["net", "set", "--net", "o2ib", "--lnd-timeout", "3"]);
    assert_ne!(run.code, 0);
    assert!(run.stderr.contains("Failed to set LND timeout for net o2ib"), "{}", run.stderr);
    let mut a = a;
    assert_eq!(a.signal_and_wait(SIGTERM), 0, "{}", a.log());
}
