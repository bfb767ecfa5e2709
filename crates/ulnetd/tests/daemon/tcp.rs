//! `ulnetd` processes talking over real TCP on loopback addresses: ping, discovery, a peer
//! going away and coming back, NIs added live, an address already taken.
//!
//! Each test has its own address block (127.53.<block>.x) and a port the OS just handed out,
//! so tests run in parallel with each other and with other suites.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener};

use crate::support::{Process, SIGTERM};

/// A port free right now on loopback.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn nid(block: u8, host: u8) -> String {
    format!("127.53.{block}.{host}@tcp")
}

fn config(nid: &str, port: u16) -> String {
    format!(
        "global:\n    accept_port: {port}\n    accept: all\n\
         net:\n    - net type: tcp\n      local NI(s):\n        - nid: {nid}\n"
    )
}

fn spawn(nid: &str, port: u16) -> Process {
    let daemon = Process::spawn(Some(&config(nid, port)), &[]);
    assert!(daemon.ready.is_some(), "{nid} did not start: {}", daemon.log());
    daemon
}

fn check(daemon: &Process, name: &str, args: &[&str]) {
    let run = daemon.ulnetctl(args);
    insta::assert_snapshot!(name, run.transcript());
}

fn stop(mut daemon: Process) {
    assert_eq!(daemon.signal_and_wait(SIGTERM), 0, "{}", daemon.log());
    assert!(!daemon.socket.exists());
}

#[test]
fn two_daemons_ping_and_discover_each_other() {
    let port = free_port();
    let (a_nid, b_nid) = (nid(1, 2), nid(1, 3));
    let a = spawn(&a_nid, port);
    let b = spawn(&b_nid, port);
    assert_eq!(
        a.ready.as_deref(),
        Some(format!("ulnetd: ready 0@lo,{a_nid} control {}", a.socket.display()).as_str())
    );
    check(&a, "tcp_ping_b", &["ping", &b_nid]);
    check(&b, "tcp_ping_a", &["ping", &a_nid]);
    check(&a, "tcp_discover_b", &["discover", &b_nid]);
    check(&a, "tcp_peer_show", &["peer", "show", "-v", "3"]);
    check(&b, "tcp_peer_list", &["peer", "list"]);
    check(&a, "tcp_net_show", &["net", "show", "-v", "--net", "tcp"]);
    stop(a);
    stop(b);
}

#[test]
fn a_peer_stopping_and_restarting_is_seen() {
    let port = free_port();
    let (a_nid, b_nid) = (nid(2, 2), nid(2, 3));
    let a = spawn(&a_nid, port);
    let b = spawn(&b_nid, port);
    assert_eq!(a.ulnetctl(&["ping", &b_nid]).code, 0);
    // SIGTERM with a connection up: graceful, socket removed.
    stop(b);
    let run = a.ulnetctl(&["ping", "--timeout", "2", &b_nid]);
    assert_ne!(run.code, 0, "b is gone: {}", run.stdout);
    assert!(run.stdout.contains(&format!("failed to ping {b_nid}")), "{}", run.stdout);
    // b comes back with a new incarnation: a reconnects.
    let b = spawn(&b_nid, port);
    let run = a.ulnetctl(&["ping", &b_nid]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(b.ulnetctl(&["ping", &a_nid]).code, 0);
    stop(a);
    stop(b);
}

#[test]
fn an_ni_added_live_answers_pings() {
    let port = free_port();
    let (a_nid, b_nid, extra) = (nid(3, 2), nid(3, 3), nid(3, 4));
    let a = spawn(&a_nid, port);
    let b = spawn(&b_nid, port);
    check(&a, "tcp_net_add", &["net", "add", "--nid", &extra]);
    let run = b.ulnetctl(&["ping", &extra]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(run.stdout.contains(&extra) && run.stdout.contains(&a_nid), "{}", run.stdout);
    check(&a, "tcp_net_del", &["net", "del", "--nid", &extra]);
    let run = b.ulnetctl(&["ping", "--timeout", "2", &extra]);
    assert_ne!(run.code, 0, "the NI is gone: {}", run.stdout);
    stop(a);
    stop(b);
}

#[test]
fn an_address_already_taken_fails_the_start_with_status_1() {
    let port = free_port();
    let a_nid = nid(4, 2);
    let a = spawn(&a_nid, port);
    let mut second = Process::spawn(Some(&config(&a_nid, port)), &[]);
    assert_eq!(second.ready, None);
    assert_eq!(second.wait(), 1);
    let log = second.log();
    assert!(log.contains(&format!("NI {a_nid}: cannot listen on port {port}")), "{log}");
    assert!(!second.socket.exists(), "the refused daemon removes its socket");
    // A net add onto a taken address is refused, and the node keeps the NIs it had.
    let c_nid = nid(4, 3);
    let c = spawn(&c_nid, port);
    let run = c.ulnetctl(&["net", "add", "--nid", &a_nid]);
    assert_ne!(run.code, 0, "{}", run.stderr);
    assert!(run.stderr.contains("errno: -98"), "{}", run.stderr);
    assert!(run.stderr.contains(&format!("cannot listen on port {port}")), "{}", run.stderr);
    let run = c.ulnetctl(&["net", "show", "--net", "tcp"]);
    assert!(run.stdout.contains(&c_nid) && !run.stdout.contains(&a_nid), "{}", run.stdout);
    assert_eq!(a.ulnetctl(&["ping", &c_nid]).code, 0, "c still serves on its address");
    stop(a);
    stop(c);
}

#[test]
fn idle_rss_and_startup_with_a_tcp_ni() {
    let port = free_port();
    let mut daemon = spawn(&nid(5, 2), port);
    std::thread::sleep(std::time::Duration::from_millis(200));
    let rss = daemon.rss_kib();
    eprintln!("tcp ulnetd: spawn to ready {:?}, idle RSS {rss} KiB", daemon.startup);
    assert!(rss > 0);
    assert_eq!(daemon.signal_and_wait(SIGTERM), 0);
}

#[test]
fn three_daemons_and_concurrent_pings() {
    let port = free_port();
    let nids: Vec<String> = (2..5).map(|host| nid(6, host)).collect();
    let daemons: Vec<Process> = nids.iter().map(|nid| spawn(nid, port)).collect();
    // Every daemon pings the two others, eight clients at once on each.
    std::thread::scope(|scope| {
        for (index, daemon) in daemons.iter().enumerate() {
            for client in 0..8 {
                let target = &nids[(index + 1 + client % 2) % nids.len()];
                let socket = &daemon.socket;
                scope.spawn(move || {
                    let run = crate::support::ulnetctl(socket, &["ping", target]);
                    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
                    assert!(
                        run.stdout.contains(&format!("primary nid: {target}")),
                        "{}",
                        run.stdout
                    );
                });
            }
        }
    });
    // Peers come in the order the concurrent pings created them.
    let run = daemons[0].ulnetctl(&["peer", "list"]);
    assert_eq!(run.stdout.matches("nid: ").count(), 2, "{}", run.stdout);
    assert!(run.stdout.contains(&nids[1]) && run.stdout.contains(&nids[2]), "{}", run.stdout);
    let run = daemons[1].ulnetctl(&["discover", &nids[2], &nids[0]]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(run.stdout.matches("Multi-Rail: true").count(), 2, "{}", run.stdout);
    for daemon in daemons {
        stop(daemon);
    }
}

/// Two nets on one address in one daemon (`127.53.7.x@tcp` and `@tcp1`): one listener serves
/// both NIs, each answers pings on its net, and `net del` of one leaves the other reachable
/// (issue 19; lustre: acceptor.c `lnet_accept()` picks the NI by the connreq's target NID).
#[test]
fn two_nets_on_one_address_answer_pings_on_both() {
    let port = free_port();
    let two_nets = |host: u8| {
        let (tcp, tcp1) = (nid(7, host), nid(7, host).replace("@tcp", "@tcp1"));
        let config = format!(
            "global:\n    accept_port: {port}\n    accept: all\n\
             net:\n    - net type: tcp\n      local NI(s):\n        - nid: {tcp}\n\
             \x20   - net type: tcp1\n      local NI(s):\n        - nid: {tcp1}\n"
        );
        let daemon = Process::spawn(Some(&config), &[]);
        assert!(daemon.ready.is_some(), "{tcp} and {tcp1} did not start: {}", daemon.log());
        (daemon, tcp, tcp1)
    };
    let ping = |daemon: &Process, target: &str| {
        let run = daemon.ulnetctl(&["ping", target]);
        assert_eq!(run.code, 0, "ping {target}: {}{}", run.stdout, run.stderr);
        assert!(run.stdout.contains(target), "{}", run.stdout);
    };
    let (a, a_tcp, a_tcp1) = two_nets(2);
    let (b, b_tcp, b_tcp1) = two_nets(3);
    for target in [&b_tcp, &b_tcp1] {
        ping(&a, target);
    }
    for target in [&a_tcp, &a_tcp1] {
        ping(&b, target);
    }
    // a drops its tcp NI: a new peer on tcp1 still gets in through the shared listener.
    assert_eq!(a.ulnetctl(&["net", "del", "--nid", &a_tcp]).code, 0);
    let c_tcp1 = nid(7, 4).replace("@tcp", "@tcp1");
    let c = Process::spawn(
        Some(&config(&c_tcp1, port).replace("net type: tcp\n", "net type: tcp1\n")),
        &[],
    );
    assert!(c.ready.is_some(), "{c_tcp1} did not start: {}", c.log());
    ping(&c, &a_tcp1);
    // ...and the tcp NI added back joins it: b reaches it again (b's old connection went with
    // the NI, so this is a new one).
    assert_eq!(a.ulnetctl(&["net", "add", "--nid", &a_tcp]).code, 0);
    ping(&b, &a_tcp);
    // A connreq for a net a does not have on that address (127.53.7.2@tcp2): closed
    // unanswered, with the kernel's console message.
    let mut stranger = std::net::TcpStream::connect(("127.53.7.2", port)).unwrap();
    let tcp2 = (0x0002_0002u64 << 32) | u64::from(u32::from(Ipv4Addr::new(127, 53, 7, 2)));
    let connreq = [&0xacce_7100u32.to_le_bytes()[..], &1u32.to_le_bytes(), &tcp2.to_le_bytes()];
    stranger.write_all(&connreq.concat()).unwrap();
    let mut answer = Vec::new();
    stranger.read_to_end(&mut answer).unwrap();
    assert_eq!(answer, b"", "no matching NI: nothing written");
    let mut a = a;
    assert_eq!(a.signal_and_wait(SIGTERM), 0);
    let log = a.log();
    let source = stranger.local_addr().unwrap().ip();
    let refusal = format!("Refusing connection from {source} for 127.53.7.2@tcp2: No matching NI");
    assert!(log.contains(&refusal), "{log}");
    stop(b);
    stop(c);
}

/// lctl's queries on a live node: `list_nids`, `which_nid` (a local NID beats a peer on a
/// local net, which beats an unreachable one), and `conn_list` with the typed connections a
/// ping opened (CONTROL, BULK_IN and BULK_OUT at `conns_per_peer` 1), from A's address to
/// B's acceptor port, and B's side of them; `debug peer` writing those to A's log; a routed
/// NID reachable but farther than one on a local net.
#[test]
fn lctl_queries_see_nids_distances_and_connections() {
    let port = free_port();
    let (a_nid, b_nid) = (nid(8, 2), nid(8, 3));
    let a = spawn(&a_nid, port);
    let b = spawn(&b_nid, port);
    let run = a.ulnetctl(&["list_nids"]);
    assert_eq!((run.code, run.stdout.as_str()), (0, format!("{a_nid}\n").as_str()));
    let run = a.ulnetctl(&["list_nids", "all"]);
    assert_eq!(run.stdout, format!("0@lo\n{a_nid}\n"));
    let run = a.ulnetctl(&["which_nid", "10.9.9.9@tcp9", &b_nid, &a_nid]);
    assert_eq!((run.code, run.stdout.as_str()), (0, format!("{a_nid}\n").as_str()));
    let run = a.ulnetctl(&["which_nid", "10.9.9.9@tcp9", &b_nid]);
    assert_eq!(run.stdout, format!("{b_nid}\n"));
    let run = a.ulnetctl(&["which_nid", "10.9.9.9@tcp9"]);
    assert_eq!((run.code, run.stderr.as_str()), (255, "No reachable NID\n"));

    let run = a.ulnetctl(&["conn_list"]);
    assert_eq!(run.stdout, "<no connections>\n");
    assert_eq!(a.ulnetctl(&["ping", &b_nid]).code, 0);
    // The bulk connections are dialled once the CONTROL one is up: wait for all three.
    let deadline = std::time::Instant::now() + crate::HANG_GUARD;
    let lines = loop {
        let run = a.ulnetctl(&["conn_list", "--net", "tcp"]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let lines: Vec<String> = run.stdout.lines().map(str::to_string).collect();
        if lines.len() >= 3 || std::time::Instant::now() > deadline {
            break lines;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let (a_ip, b_ip) = (a_nid.trim_end_matches("@tcp"), b_nid.trim_end_matches("@tcp"));
    let mut kinds: Vec<&str> = Vec::new();
    for line in &lines {
        let fields: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(fields.len(), 4, "{line}");
        assert_eq!(fields[0], format!("12345-{b_nid}"), "{line}");
        let (kind, rest) = fields[1].split_at(1);
        assert_eq!(rest, format!("[0]{a_ip}->{b_ip}:{port}"), "{line}");
        kinds.push(kind);
        let (tx, rx) = fields[2].split_once('/').unwrap();
        assert!(tx.parse::<u32>().unwrap() > 0 && rx.parse::<u32>().unwrap() > 0, "{line}");
        assert_eq!(fields[3], "nonagle", "{line}");
    }
    kinds.sort_unstable();
    assert_eq!(kinds, ["C", "I", "O"], "{lines:?}");
    // B accepted them: its view has the types inverted and A's source ports.
    let run = b.ulnetctl(&["conn_list"]);
    let mut kinds: Vec<&str> = run
        .stdout
        .lines()
        .map(|line| {
            assert!(line.starts_with(&format!("12345-{a_nid}")), "{line}");
            assert!(line.contains(&format!("]{b_ip}->{a_ip}:")), "{line}");
            &line[21..22]
        })
        .collect();
    kinds.sort_unstable();
    assert_eq!(kinds, ["C", "I", "O"], "{}", run.stdout);
    let run = a.ulnetctl(&["conn_list", "--net", "tcp1"]);
    assert_eq!(run.stdout, "<no connections>\n");
    // debug peer: nothing printed, the connections in the node's log.
    let run = a.ulnetctl(&["debug", "peer", "--nid", &b_nid]);
    assert_eq!((run.code, run.stdout.as_str(), run.stderr.as_str()), (0, "", ""));
    let deadline = std::time::Instant::now() + crate::HANG_GUARD;
    while !a.log().contains("debug peer") && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(a.log().contains(&format!("peer=12345-{b_nid}")), "{}", a.log());
    let run = a.ulnetctl(&["debug", "peer", "--nid", "127.53.8.9@tcp"]);
    assert_eq!(run.code, 255, "{}", run.stderr);
    // Through a route: reachable, farther than a local net.
    let run = a.ulnetctl(&["route", "add", "--net", "tcp9", "--gateway", &b_nid]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let run = a.ulnetctl(&["which_nid", "10.9.9.9@tcp9"]);
    assert_eq!(run.stdout, "10.9.9.9@tcp9\n", "{}", run.stderr);
    let run = a.ulnetctl(&["which_nid", "10.9.9.9@tcp9", &b_nid]);
    assert_eq!(run.stdout, format!("{b_nid}\n"));
    stop(a);
    stop(b);
}

/// ulnetd resolves interface names in its own network namespace: a ulnetctl in another one
/// (`unshare --net`, root only) is refused a `net add --if` or `--ip2net` before anything is
/// sent, naming both namespaces; requests without interface names still work from there.
#[test]
fn interfaces_are_refused_from_another_network_namespace() {
    let probe = std::process::Command::new("unshare").args(["--net", "true"]).status();
    if !probe.is_ok_and(|status| status.success()) {
        eprintln!("skipped: cannot unshare a network namespace here (needs root)");
        return;
    }
    let port = free_port();
    let a_nid = nid(9, 2);
    let a = spawn(&a_nid, port);
    let elsewhere = |args: &[&str]| {
        let out = std::process::Command::new("unshare")
            .arg("--net")
            .arg(crate::support::ulnetctl_path())
            .arg("--socket")
            .arg(&a.socket)
            .args(args)
            .output()
            .unwrap();
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        (out.status.code(), text(&out.stdout), text(&out.stderr))
    };
    for args in [
        &["net", "add", "--net", "tcp5", "--if", "lo"][..],
        &["net", "add", "--net", "tcp5", "--ip2net", "tcp5 127.*.*.*"][..],
    ] {
        let (code, _, stderr) = elsewhere(args);
        assert_ne!(code, Some(0), "{args:?}: {stderr}");
        assert!(stderr.contains("ulnetd resolves interfaces in its network namespace (net:["));
        assert!(stderr.contains("not in this process's (net:["), "{stderr}");
    }
    let (code, stdout, stderr) = elsewhere(&["list_nids"]);
    assert_eq!((code, stdout.as_str()), (Some(0), format!("{a_nid}\n").as_str()), "{stderr}");
    let run = a.ulnetctl(&["net", "show", "--net", "tcp5"]);
    assert!(!run.stdout.contains("tcp5"), "nothing was added: {}", run.stdout);
    stop(a);
}

/// `setup-mrrouting` runs `$KSOCKLND_CONFIG` (a stand-in for Lustre's script, which reads the
/// node's interfaces with `$LNETCTL net show`) with `LNETCTL` naming ulnetctl and the socket
/// passed on; its exit status decides ulnetctl's.
#[test]
fn setup_mrrouting_runs_the_script_against_this_node() {
    let port = free_port();
    let a_nid = nid(10, 2);
    let a = spawn(&a_nid, port);
    let dir = crate::support::TempDir::new("mrrouting");
    let script = dir.path("ksocklnd-config");
    // Written by a child process: no descriptor open for writing in this one, which a
    // concurrent fork could carry into the exec (ETXTBSY).
    let written = std::process::Command::new("sh")
        .args(["-c", "printf '#!/bin/sh\\n\"$LNETCTL\" list_nids\\nexit $FAIL\\n' > \"$1\" && chmod 755 \"$1\""])
        .arg("sh")
        .arg(&script)
        .status()
        .unwrap();
    assert!(written.success());
    let run = |fail: &str| {
        let out = std::process::Command::new(crate::support::ulnetctl_path())
            .args(["--socket", a.socket.to_str().unwrap(), "setup-mrrouting"])
            .env("KSOCKLND_CONFIG", &script)
            .env("FAIL", fail)
            .env_remove("ULNET_SOCKET")
            .output()
            .unwrap();
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        (out.status.code(), text(&out.stdout), text(&out.stderr))
    };
    assert_eq!(run("0"), (Some(0), format!("{a_nid}\n"), String::new()));
    let (code, stdout, stderr) = run("3");
    assert_eq!((code, stdout), (Some(251), format!("{a_nid}\n")));
    assert_eq!(
        stderr,
        "manage:\n    - setup-mrrouting:\n          errno: -5\n          \
         descr: \"failed to execute ksocklnd-config : exit status 3\"\n"
    );
    stop(a);
}
