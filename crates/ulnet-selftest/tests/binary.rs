//! The `ulst` binary itself: the console server it starts, the relay, exit codes. A loopback
//! console (`ULST_NID=0@lo`) tests against the selftest service on its own node, so no
//! network is needed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)] // Test, bench and example code outside #[test] functions.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn ulst(socket: &Path, key: &str, args: &[&str]) -> Run {
    let output = Command::new(env!("CARGO_BIN_EXE_ulst"))
        .args(args)
        .env("ULST_SOCKET", socket)
        .env("ULST_NID", "0@lo")
        .env("LST_SESSION", key)
        .env_remove("LST_FEATURES")
        .output()
        .expect("running ulst");
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ulst-bin-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir.join("console.sock")
}

#[test]
fn loopback_console_runs_the_typical_script() {
    let socket = scratch("script");
    let run = |args: &[&str]| ulst(&socket, "99", args);
    // No console yet: lst's "no session" answers, exit 255.
    let before = run(&["show_session"]);
    assert_eq!((before.code, before.stderr.as_str()), (255, "No session exists\n"));
    let created = run(&["new_session", "--timeout", "60", "bin"]);
    assert_eq!(created.code, 0, "{}", created.stderr);
    assert_eq!(created.stdout, "SESSION: bin FEATURES: 1 TIMEOUT: 60 FORCE: No\n");
    assert!(socket.exists());
    assert_eq!(run(&["add_group", "self", "0@lo"]).stdout, "0@lo are added to session\n");
    let added = run(&[
        "add_test",
        "--loop",
        "200",
        "--concurrency",
        "2",
        "--from",
        "self",
        "--to",
        "self",
        "brw",
        "write",
        "check=full",
        "size=8k",
    ]);
    assert_eq!((added.code, added.stdout.as_str()), (0, "Test was added successfully\n"));
    assert_eq!(run(&["run"]).stdout, "batch is running now\n");
    let stat = run(&["stat", "--delay", "1", "--count", "1", "self"]);
    assert_eq!(stat.code, 0, "{}", stat.stderr);
    assert_eq!(
        stat.stdout.lines().filter(|line| line.starts_with('[')).count(),
        6,
        "{}",
        stat.stdout
    );
    assert!(run(&["stop"]).stdout.ends_with("Batch is stopped\n"));
    assert_eq!(run(&["show_error", "self"]).stdout, "self:\nTotal 0 error nodes in self\n");
    // Another key is refused.
    let other = ulst(&socket, "98", &["list_group"]);
    assert_eq!((other.code, other.stderr.as_str()), (255, "Unmatched session key or not root\n"));
    let ended = run(&["end_session"]);
    assert_eq!((ended.code, ended.stdout.as_str(), ended.stderr.as_str()), (0, "", ""));
    // The server leaves once it has no session.
    let deadline = Instant::now() + Duration::from_secs(20);
    while socket.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(!socket.exists(), "the console server did not exit");
    let _ = std::fs::remove_dir_all(socket.parent().unwrap());
}

#[test]
fn new_session_without_a_nid_says_how_to_give_one() {
    let socket = scratch("nonid");
    let output = Command::new(env!("CARGO_BIN_EXE_ulst"))
        .args(["new_session", "x"])
        .env("ULST_SOCKET", &socket)
        .env_remove("ULST_NID")
        .env("LST_SESSION", "5")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(255));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.starts_with("ulst: no NID for the console: set ULST_NID"), "{stderr}");
    // Argument errors come first, as lst reports them, with no console involved.
    let output = Command::new(env!("CARGO_BIN_EXE_ulst"))
        .args(["new_session", "--timeout", "0"])
        .env("ULST_SOCKET", &socket)
        .env("LST_SESSION", "5")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(255));
    assert_eq!(String::from_utf8_lossy(&output.stderr), "Invalid timeout value\n");
}

#[test]
fn tcp_console_drives_a_tcp_test_node() {
    use ulnet::{AcceptPolicy, Node, SocklndTunables};
    let port = 40000 + (std::process::id() % 20000) as u16;
    let tunables =
        SocklndTunables { accept_port: port, accept: AcceptPolicy::All, ..Default::default() };
    let node = Node::builder().tcp_ni("127.0.0.5@tcp".parse().unwrap(), tunables).build().unwrap();
    let service = ulnet_selftest::SelftestService::start(&node).unwrap();
    let socket = scratch("tcp");
    let run = |args: &[&str]| {
        let output = Command::new(env!("CARGO_BIN_EXE_ulst"))
            .args(args)
            .env("ULST_SOCKET", &socket)
            .env("ULST_NID", "127.0.0.6@tcp")
            .env("ULST_PORT", port.to_string())
            .env("LST_SESSION", "77")
            .output()
            .unwrap();
        Run {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    };
    let created = run(&["new_session", "--timeout", "60", "tcp"]);
    assert_eq!(created.code, 0, "{}", created.stderr);
    let added = run(&["add_group", "n", "127.0.0.5@tcp"]);
    assert_eq!(
        (added.code, added.stdout.as_str()),
        (0, "127.0.0.5@tcp are added to session\n"),
        "{}",
        added.stderr
    );
    assert_eq!(service.session().unwrap().name, "tcp");
    let ping = run(&["ping", "--group", "n"]);
    assert_eq!(ping.stdout, "\t12345-127.0.0.5@tcp: Active [session: tcp id: 127.0.0.6@tcp]\n");
    let ended = run(&["end_session"]);
    assert_eq!(ended.code, 0, "{}", ended.stderr);
    assert!(service.session().is_none());
    let deadline = Instant::now() + Duration::from_secs(20);
    while socket.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = std::fs::remove_dir_all(socket.parent().unwrap());
}
