//! UDSP rules on real `ulnetd` processes over loopback TCP: a rule from the configuration
//! file and rules added with `ulnetctl udsp add` show in the priorities `net show -v` and
//! `peer show -v` print (read as sanity-lnet.sh's `check_udsp_prio()` reads them), steer
//! which NI traffic leaves from, which of a multi-rail peer's NIs it goes to and which router
//! carries it to a remote net, are shown and
//! deleted by `import --show|--del`, deleted,
//! and exported then imported into a fresh daemon and loaded as its configuration.
//!
//! Addresses 127.71.<block>.x, a port the OS just handed out.

use std::net::TcpListener;

use crate::support::{Process, SIGTERM};

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn nid(block: u8, host: u8) -> String {
    format!("127.71.{block}.{host}@tcp")
}

/// A daemon with one tcp NI per NID and `extra` appended to its configuration.
fn spawn(nids: &[&str], port: u16, extra: &str) -> Process {
    let mut config = format!(
        "global:\n    accept_port: {port}\n    accept: all\n\
         net:\n    - net type: tcp\n      local NI(s):\n"
    );
    for nid in nids {
        config.push_str(&format!("        - nid: {nid}\n"));
    }
    config.push_str(extra);
    let daemon = Process::spawn(Some(&config), &[]);
    assert!(daemon.ready.is_some(), "{nids:?} did not start: {}", daemon.log());
    daemon
}

fn ok(daemon: &Process, args: &[&str]) -> String {
    let run = daemon.ulnetctl(args);
    assert_eq!(run.code, 0, "{args:?}: {}{}", run.stdout, run.stderr);
    run.stdout
}

/// `(nid, net priority, nid priority)` of every NI listed, in order: sanity-lnet.sh's
/// `check_udsp_prio()` pairs the `- nid:` lines with the `net priority:` and `nid
/// priority:` lines the same way.
fn priorities(shown: &str) -> Vec<(String, i64, i64)> {
    let value = |line: &str| line.rsplit(' ').next().unwrap_or_default().to_string();
    // awk's /-\s+nid:/: a sequence item whose key is `nid` (not `primary nid`).
    let is_nid = |line: &&str| {
        let item = line.trim_start().strip_prefix('-').map(str::trim_start);
        item.is_some_and(|rest| rest.starts_with("nid: "))
    };
    let nids: Vec<String> = shown.lines().filter(is_nid).map(value).collect();
    let numbers = |key: &str| -> Vec<i64> {
        let lines = shown.lines().filter(|line| line.contains(key));
        lines.map(|line| value(line).parse().unwrap()).collect()
    };
    let (net, nid) = (numbers("net priority:"), numbers("nid priority:"));
    assert_eq!((nids.len(), net.len()), (nid.len(), nid.len()), "{shown}");
    nids.into_iter().zip(net).zip(nid).map(|((n, a), b)| (n, a, b)).collect()
}

/// The `send_count` of each local NI, from `net show -v`.
fn send_counts(daemon: &Process) -> Vec<(String, u64)> {
    counts(daemon, "send_count: ")
}

/// One statistic (`key`, as `net show -v` prints it) of each local NI.
fn counts(daemon: &Process, key: &str) -> Vec<(String, u64)> {
    let shown = ok(daemon, &["net", "show", "-v"]);
    let mut counts = Vec::new();
    let mut current = None;
    for line in shown.lines() {
        if let Some(nid) = line.trim_start().strip_prefix("-     nid: ") {
            current = Some(nid.to_string());
        } else if let Some(count) = line.trim_start().strip_prefix(key) {
            if let Some(nid) = current.take() {
                counts.push((nid, count.parse().unwrap()));
            }
        }
    }
    counts
}

#[test]
fn rules_show_in_net_and_peer_show_and_choose_the_source_ni() {
    let port = free_port();
    let (a1, a2, b1) = (nid(1, 1), nid(1, 2), nid(1, 10));
    // sanity-lnet.sh test 401: a peer net rule, then a peer discovered later.
    let rule = "udsp:\n    - idx: 0\n      dst: tcp\n      action:\n          priority: 1\n";
    let a = spawn(&[&a1, &a2], port, rule);
    let b = spawn(&[&b1], port, "");
    assert_eq!(
        ok(&a, &["udsp", "show"]),
        "udsp:\n    - idx: 0\n      dst: tcp\n      action:\n          priority: 1\n"
    );

    // A source NI rule, inserted first: the NI's nid priority, its net untouched.
    ok(&a, &["udsp", "add", "--src", &a2, "--prio", "0", "--idx", "0"]);
    let local = priorities(&ok(&a, &["net", "show", "-v", "5"]));
    assert_eq!(
        local,
        [("0@lo".into(), -1, -1), (a1.clone(), -1, -1), (a2.clone(), -1, 0)],
        "{local:?}"
    );

    ok(&a, &["discover", &b1]);
    let remote = priorities(&ok(&a, &["peer", "show", "-v", "5"]));
    assert_eq!(remote, [(b1.clone(), 1, -1)]);

    // Every ping leaves from the preferred NI.
    let before = send_counts(&a);
    for _ in 0..4 {
        ok(&a, &["ping", &b1]);
    }
    let after = send_counts(&a);
    let grew = |nid: &str| {
        let count = |counts: &[(String, u64)]| counts.iter().find(|(n, _)| n == nid).unwrap().1;
        count(&after) - count(&before)
    };
    assert_eq!(grew(&a1), 0, "{before:?} {after:?}");
    assert!(grew(&a2) >= 4, "{before:?} {after:?}");

    let export = ok(&a, &["export", "--backup"]);
    let rules = "udsp:\n    - idx: 0\n      src: 127.71.1.2@tcp\n      action:\n          priority: 0\n\
                 \x20   - idx: 1\n      dst: tcp\n      action:\n          priority: 1\n";
    assert!(export.ends_with(rules), "{export}");
    // An equal rule is -EALREADY, as lnetctl reports it.
    let again = a.ulnetctl(&["udsp", "add", "--src", &a2, "--priority", "0"]);
    assert_eq!(again.code, 114, "{}", again.stderr);

    // `import --show` and `--del` name rules by index.
    let import = |mode: &str, text: &str| {
        let run = crate::support::ulnetctl_with_stdin(&a.socket, &["import", mode], text);
        assert_eq!(run.code, 0, "{mode}: {}", run.stderr);
        run.stdout
    };
    let second = "udsp:\n    - idx: 1\n      dst: tcp\n      action:\n          priority: 1\n";
    assert_eq!(import("--show", "udsp:\n    - idx: 1\n"), second);
    import("--del", "udsp:\n    - idx: 1\n");
    assert_eq!(ok(&a, &["udsp", "show", "--idx", "1"]), "");
    assert_eq!(priorities(&ok(&a, &["peer", "show", "-v", "4"])), [(b1.clone(), -1, -1)]);

    // Deleting reverts what the rules stamped.
    ok(&a, &["udsp", "del", "--all"]);
    assert_eq!(ok(&a, &["udsp", "show"]), "");
    let local = priorities(&ok(&a, &["net", "show", "-v", "4"]));
    assert!(local.iter().all(|(_, net, nid)| (*net, *nid) == (-1, -1)), "{local:?}");
    assert_eq!(priorities(&ok(&a, &["peer", "show", "-v", "4"])), [(b1.clone(), -1, -1)]);
    let mut a = a;
    assert_eq!(a.signal_and_wait(SIGTERM), 0, "{}", a.log());

    // The backup imports into a fresh node (only `lo`) with its rules, which stamp the NIs
    // the same import brings up; as a configuration file it does the same.
    let daemon_keys = format!("global:\n    accept_port: {port}\n    accept: all\n");
    let mut fresh = Process::spawn(Some(&daemon_keys), &[]);
    assert!(fresh.ready.is_some(), "{}", fresh.log());
    let import = crate::support::ulnetctl_with_stdin(&fresh.socket, &["import"], &export);
    assert_eq!(import.code, 0, "{}", import.stderr);
    assert!(ok(&fresh, &["export", "--backup"]).ends_with(rules));
    let local = priorities(&ok(&fresh, &["net", "show", "-v", "4"]));
    assert!(local.contains(&(a2.clone(), -1, 0)), "{local:?}");
    assert_eq!(fresh.signal_and_wait(SIGTERM), 0);
    let mut third = Process::spawn(Some(&format!("{daemon_keys}---\n{export}")), &[]);
    assert!(third.ready.is_some(), "{}", third.log());
    assert!(ok(&third, &["export", "--backup"]).ends_with(rules));
    assert_eq!(priorities(&ok(&third, &["peer", "show", "-v", "4"])), [(b1, 1, -1)]);
    assert_eq!(third.signal_and_wait(SIGTERM), 0);
    let mut b = b;
    assert_eq!(b.signal_and_wait(SIGTERM), 0);
}

/// A destination rule on a multi-rail peer (sanity-lnet.sh test 403's shape): after
/// `udsp add --dst <second NI> --priority 0` the peer NI's nid priority is 0 and every ping
/// addressed to the peer's primary NID arrives on the preferred NI; deleting the rule puts the
/// priorities back.
#[test]
fn a_destination_rule_chooses_the_peer_ni() {
    let port = free_port();
    let (a1, b1, b2) = (nid(2, 1), nid(2, 10), nid(2, 11));
    let a = spawn(&[&a1], port, "");
    let b = spawn(&[&b1, &b2], port, "");
    ok(&a, &["discover", &b1]);
    let remote = priorities(&ok(&a, &["peer", "show", "-v", "5"]));
    assert_eq!(remote, [(b1.clone(), -1, -1), (b2.clone(), -1, -1)], "{remote:?}");

    ok(&a, &["udsp", "add", "--dst", &b2, "--priority", "0"]);
    let remote = priorities(&ok(&a, &["peer", "show", "-v", "5"]));
    assert_eq!(remote, [(b1.clone(), -1, -1), (b2.clone(), -1, 0)], "{remote:?}");

    let before = counts(&b, "recv_count: ");
    for _ in 0..6 {
        ok(&a, &["ping", &b1]);
    }
    let after = counts(&b, "recv_count: ");
    let grew = |nid: &str| {
        let count = |counts: &[(String, u64)]| counts.iter().find(|(n, _)| n == nid).unwrap().1;
        count(&after) - count(&before)
    };
    assert_eq!(grew(&b1), 0, "{before:?} {after:?}");
    assert!(grew(&b2) >= 6, "{before:?} {after:?}");

    ok(&a, &["udsp", "del", "--all"]);
    let remote = priorities(&ok(&a, &["peer", "show", "-v", "5"]));
    assert_eq!(remote, [(b1, -1, -1), (b2, -1, -1)], "{remote:?}");
    for mut daemon in [a, b] {
        assert_eq!(daemon.signal_and_wait(SIGTERM), 0, "{}", daemon.log());
    }
}

/// `stats show`'s `route_count`: the messages a router forwarded.
fn forwarded(daemon: &Process) -> u64 {
    let shown = ok(daemon, &["stats", "show"]);
    let count = shown.lines().find_map(|line| line.trim().strip_prefix("route_count: "));
    count.and_then(|count| count.parse().ok()).unwrap_or_else(|| panic!("{shown}"))
}

/// A router rule on real daemons (sanity-lnet.sh test 404's shape): a client reaches tcp1
/// through two routers of equal routes, and its pings to the server go through both; after
/// `udsp add --dst tcp1 --rte <the second router>` every one goes through that router, the
/// first forwards none. The server's route back goes through the second router only, so the
/// first forwards nothing but the client's requests.
#[test]
fn a_router_rule_chooses_the_gateway() {
    let port = free_port();
    let tcp1 = |host: u8| format!("127.72.3.{host}@tcp1");
    let net = |kind: &str, nid: &str| {
        format!("    - net type: {kind}\n      local NI(s):\n        - nid: {nid}\n")
    };
    let global = format!("global:\n    accept_port: {port}\n    accept: all\n");
    let start = |config: String| {
        let daemon = Process::spawn(Some(&config), &[]);
        assert!(daemon.ready.is_some(), "{config}\n{}", daemon.log());
        daemon
    };
    let router = |host: u8| {
        let nets = net("tcp", &nid(3, host)) + &net("tcp1", &tcp1(host));
        start(format!("{global}net:\n{nets}routing:\n    enable: 1\n"))
    };
    let (r1, r2) = (router(3), router(5));
    let routes = |gateways: &[String]| -> String {
        let items =
            gateways.iter().map(|gateway| format!("    - net: tcp1\n      gateway: {gateway}\n"));
        items.collect()
    };
    let client = start(format!(
        "{global}net:\n{}route:\n{}",
        net("tcp", &nid(3, 2)),
        routes(&[nid(3, 3), nid(3, 5)])
    ));
    let server = start(format!(
        "{global}net:\n{}route:\n    - net: tcp\n      gateway: {}\n",
        net("tcp1", &tcp1(4)),
        tcp1(5)
    ));
    let deadline = std::time::Instant::now() + crate::HANG_GUARD;
    while ok(&client, &["route", "show", "-v"]).matches("state: up").count() < 2 {
        assert!(std::time::Instant::now() < deadline, "the routes never came up");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    while !ok(&server, &["route", "show", "-v"]).contains("state: up") {
        assert!(std::time::Instant::now() < deadline, "the route back never came up");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let pings = |count: usize| -> (u64, u64) {
        let before = (forwarded(&r1), forwarded(&r2));
        for _ in 0..count {
            ok(&client, &["ping", &tcp1(4)]);
        }
        (forwarded(&r1) - before.0, forwarded(&r2) - before.1)
    };
    // The first ping discovers the server; then the routes take turns.
    pings(1);
    let (through_r1, through_r2) = pings(6);
    assert!(through_r1 >= 1 && through_r2 >= 1, "no rule: {through_r1} and {through_r2}");

    ok(&client, &["udsp", "add", "--dst", "tcp1", "--rte", &nid(3, 5)]);
    let shown = ok(&client, &["udsp", "show"]);
    assert!(shown.contains("rte:") && shown.contains(&nid(3, 5)), "{shown}");
    let (through_r1, through_r2) = pings(6);
    assert_eq!(through_r1, 0, "the rule left requests on the first router");
    assert!(through_r2 >= 12, "6 requests and 6 replies through the second: {through_r2}");
    for mut daemon in [client, server, r1, r2] {
        assert_eq!(daemon.signal_and_wait(SIGTERM), 0, "{}", daemon.log());
    }
}
