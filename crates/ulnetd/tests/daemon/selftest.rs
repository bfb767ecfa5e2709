//! `ulnetd` hosts the lnet_selftest service: an lst console (the `ulst` command layer over an
//! in-process console node) runs the typical lst script against two and three real daemons over
//! TCP, as an administrator would against kernel nodes.

use std::net::TcpListener;

use ulnet::{AcceptPolicy, Node, SocklndTunables};
use ulnet_selftest::Console;
use ulnet_selftest::cli::{self, Env};

use crate::support::{Process, SIGTERM};

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn daemon(nid: &str, port: u16) -> Process {
    let config = format!(
        "global:\n    accept_port: {port}\n    accept: all\n\
         net:\n    - net type: tcp\n      local NI(s):\n        - nid: {nid}\n"
    );
    let process = Process::spawn(Some(&config), &[]);
    assert!(process.ready.is_some(), "{nid} did not start: {}", process.log());
    process
}

/// Runs one `lst` command line through the real command layer; returns (status, stdout).
fn lst(console: &Console, line: &str) -> (i32, String) {
    let env = Env { session: Some(std::process::id().to_string()), features: None };
    let (status, stdout, stderr) = cli::run_captured(line, &env, console, false);
    assert!(stderr.is_empty(), "{line}: status {status}: {stderr}");
    (status, stdout)
}

fn typical_script(block: u8, servers: usize) {
    let port = free_port();
    let nids: Vec<String> =
        (0..=servers).map(|i| format!("127.54.{block}.{}@tcp", 2 + i)).collect();
    let daemons: Vec<Process> = nids.iter().map(|nid| daemon(nid, port)).collect();
    let tunables =
        SocklndTunables { accept_port: port, accept: AcceptPolicy::All, ..Default::default() };
    let console_nid = format!("127.54.{block}.100@tcp").parse().unwrap();
    let console_node = Node::builder().tcp_ni(console_nid, tunables).build().unwrap();
    let console = Console::new(&console_node).unwrap();
    let ok = |line: &str| {
        let (status, out) = lst(&console, line);
        assert_eq!(status, 0, "{line}: {out}");
        out
    };
    ok("new_session daemons");
    assert_eq!(
        ok(&format!("add_group c {}", nids[0])),
        format!("{} are added to session\n", nids[0])
    );
    ok(&format!("add_group s {}", nids[1..].join(" ")));
    ok("add_batch bulk");
    ok(
        "add_test --batch bulk --loop 50 --concurrency 4 --from c --to s brw write size=1M check=full",
    );
    ok(
        "add_test --batch bulk --loop 50 --concurrency 4 --from c --to s brw read size=1M check=full",
    );
    ok("add_test --batch bulk --loop 50 --concurrency 2 --from c --to s ping");
    ok("run bulk");
    let stat = ok("stat --delay 1 --count 1 s");
    assert!(stat.contains("[LNet Bandwidth of s]"), "{stat}");
    assert!(ok("stop bulk").ends_with("Batch is stopped\n"));
    assert_eq!(
        ok("show_error c s"),
        "c:\nTotal 0 error nodes in c\ns:\nTotal 0 error nodes in s\n"
    );
    ok("end_session");
    drop(console);
    console_node.shutdown();
    for mut daemon in daemons {
        assert_eq!(daemon.signal_and_wait(SIGTERM), 0, "{}", daemon.log());
    }
}

#[test]
fn lst_typical_script_against_two_daemons() {
    typical_script(1, 1);
}

#[test]
fn lst_typical_script_against_three_daemons() {
    typical_script(2, 2);
}

#[test]
fn no_selftest_flag_leaves_the_service_off_and_the_daemon_serving() {
    let port = free_port();
    let config = format!(
        "global:\n    accept_port: {port}\n    accept: all\n\
         net:\n    - net type: tcp\n      local NI(s):\n        - nid: 127.54.3.2@tcp\n"
    );
    let mut process = Process::spawn(Some(&config), &["--no-selftest"]);
    assert!(process.ready.is_some(), "did not start: {}", process.log());
    let run = process.ulnetctl(&["net", "show"]);
    assert_eq!(run.code, 0, "{}", run.transcript());
    assert!(run.stdout.contains("127.54.3.2@tcp"), "{}", run.stdout);
    assert!(process.log().contains("lnet_selftest service not hosted"), "{}", process.log());
    assert_eq!(process.signal_and_wait(SIGTERM), 0, "{}", process.log());
}
