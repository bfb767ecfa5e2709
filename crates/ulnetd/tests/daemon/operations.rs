//! Running under a service manager: systemd's notifications (`READY=1`, `RELOADING=1`,
//! `STOPPING=1`) on a socket the test plays systemd on, SIGHUP reloading the configuration
//! file (what changes live, what is refused), and logs in the journal's shape when stderr
//! is the stream `$JOURNAL_STREAM` names.

use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::process::Command;

use crate::HANG_GUARD;
use crate::support::{Process, SIGHUP, SIGTERM, TempDir, ULNETD};

/// A daemon with the test as its service manager.
struct Managed {
    process: Process,
    manager: UnixDatagram,
    config: PathBuf,
}

impl Managed {
    fn spawn(config: &str) -> Self {
        let dir = TempDir::new("sd");
        let socket = dir.path("ulnetd.sock");
        let manager = UnixDatagram::bind(dir.path("notify")).unwrap();
        manager.set_read_timeout(Some(HANG_GUARD)).unwrap();
        let config_path = dir.file("ulnetd.yaml", config);
        let mut command = Command::new(ULNETD);
        command
            .arg("--config")
            .arg(&config_path)
            .arg("--socket")
            .arg(&socket)
            .env("NOTIFY_SOCKET", dir.path("notify"));
        let process = Process::spawn_command(command, dir, socket);
        assert!(process.ready.is_some(), "did not start: {}", process.log());
        Self { process, manager, config: config_path }
    }

    /// The next notification.
    fn next(&self) -> String {
        let mut buffer = [0u8; 4096];
        let length = self.manager.recv(&mut buffer).expect("a notification");
        String::from_utf8(buffer[..length].to_vec()).unwrap()
    }

    /// Writes `config` as the daemon's file, sends SIGHUP and returns the `READY=1`
    /// notification that ends the reload.
    fn reload(&self, config: &str) -> String {
        std::fs::write(&self.config, config).unwrap();
        self.process.signal(SIGHUP);
        let reloading = self.next();
        assert!(reloading.starts_with("RELOADING=1\nMONOTONIC_USEC="), "{reloading}");
        let ready = self.next();
        assert!(ready.starts_with("READY=1\nSTATUS=ready; "), "{ready}");
        ready
    }
}

fn tcp_config(port: u16, nids: &[&str], extra: &str) -> String {
    let nis: String = nids.iter().map(|nid| format!("        - nid: {nid}\n")).collect();
    format!(
        "global:\n    accept_port: {port}\n    accept: all\n{extra}\
         net:\n    - net type: tcp\n      local NI(s):\n{nis}"
    )
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[test]
fn notifications_frame_start_reloads_and_stop() {
    let port = free_port();
    let mut daemon = Managed::spawn(&tcp_config(port, &["127.57.1.2@tcp"], ""));
    let ready = daemon.next();
    assert_eq!(
        ready,
        format!(
            "READY=1\nSTATUS=ready 0@lo,127.57.1.2@tcp control {}",
            daemon.process.socket.display()
        )
    );
    // A setting and an NI change live.
    let status = daemon.reload(&tcp_config(
        port,
        &["127.57.1.2@tcp", "127.57.1.3@tcp"],
        "    retry_count: 1\n",
    ));
    assert!(
        status.ends_with(
            "configuration reloaded: NIs added 127.57.1.3@tcp; settings changed retry_count,lnd_timeout"
        ),
        "{status}"
    );
    let global = daemon.process.ulnetctl(&["global", "show"]);
    assert!(global.stdout.contains("retry_count: 1\n"), "{}", global.stdout);
    let nets = daemon.process.ulnetctl(&["net", "show"]);
    assert!(nets.stdout.contains("nid: 127.57.1.3@tcp"), "{}", nets.stdout);
    // The same file again changes nothing.
    let status = daemon.reload(&tcp_config(
        port,
        &["127.57.1.2@tcp", "127.57.1.3@tcp"],
        "    retry_count: 1\n",
    ));
    assert!(status.ends_with("configuration reloaded: no change"), "{status}");
    // Unset keys return to their defaults; removed NIs go.
    let status = daemon.reload(&tcp_config(port, &["127.57.1.3@tcp"], ""));
    assert!(
        status.ends_with("NIs removed 127.57.1.2@tcp; settings changed retry_count,lnd_timeout"),
        "{status}"
    );
    let nets = daemon.process.ulnetctl(&["net", "show"]);
    assert!(!nets.stdout.contains("127.57.1.2@tcp"), "{}", nets.stdout);
    daemon.process.signal(SIGTERM);
    assert_eq!(daemon.next(), "STOPPING=1\nSTATUS=shutting down");
    assert_eq!(daemon.process.wait(), 0, "{}", daemon.process.log());
}

#[test]
fn what_cannot_change_live_is_refused_and_the_node_runs_on() {
    let port = free_port();
    let first = tcp_config(port, &["127.57.2.2@tcp"], "");
    let mut daemon = Managed::spawn(&first);
    daemon.next();
    let other_port = tcp_config(port.wrapping_add(1).max(1024), &["127.57.2.3@tcp"], "");
    let status = daemon.reload(&other_port);
    assert!(
        status.contains(
            "reload refused, running as before: global accept_port: cannot change on a running node"
        ),
        "{status}"
    );
    let refused = daemon.reload(&first.replace("accept: all", "accept: none"));
    assert!(refused.contains("global accept: cannot change"), "{refused}");
    let selftest =
        daemon.reload(&first.replace("global:\n", "global:\n    lnet_selftest: false\n"));
    assert!(selftest.contains("global lnet_selftest: cannot change"), "{selftest}");
    let broken = daemon.reload("net: [\n");
    assert!(broken.contains("reload refused, running as before: invalid YAML"), "{broken}");
    let unsupported = daemon.reload(&format!("{first}udsp:\n  - src: tcp\n"));
    assert!(unsupported.contains("udsp: an item without 'idx'"), "{unsupported}");
    // Nothing of the refused files was applied: the first NI still serves, no new one.
    let nets = daemon.process.ulnetctl(&["net", "show"]);
    assert!(nets.stdout.contains("nid: 127.57.2.2@tcp"), "{}", nets.stdout);
    assert!(!nets.stdout.contains("127.57.2.3@tcp"), "{}", nets.stdout);
    let log = daemon.process.log();
    assert!(log.contains("reload refused: global accept_port"), "{log}");
    assert_eq!(daemon.process.signal_and_wait(SIGTERM), 0, "{log}");
}

#[test]
fn a_reload_adds_and_removes_configured_peers() {
    let port = free_port();
    let peer =
        "peer:\n    - primary nid: 127.57.3.9@tcp\n      peer ni:\n        - nid: 127.57.3.9@tcp\n";
    let base = tcp_config(port, &["127.57.3.2@tcp"], "");
    let mut daemon = Managed::spawn(&base);
    daemon.next();
    let added = daemon.reload(&format!("{base}{peer}"));
    assert!(added.ends_with("configuration reloaded: peers added 127.57.3.9@tcp"), "{added}");
    let list = daemon.process.ulnetctl(&["peer", "list"]);
    assert!(list.stdout.contains("127.57.3.9@tcp"), "{}", list.stdout);
    let again = daemon.reload(&format!("{base}{peer}"));
    assert!(again.ends_with("configuration reloaded: no change"), "{again}");
    let removed = daemon.reload(&base);
    assert!(removed.ends_with("configuration reloaded: peers removed 127.57.3.9@tcp"), "{removed}");
    let list = daemon.process.ulnetctl(&["peer", "list"]);
    assert!(!list.stdout.contains("127.57.3.9@tcp"), "{}", list.stdout);
    assert_eq!(daemon.process.signal_and_wait(SIGTERM), 0);
}

#[test]
fn logs_take_the_journals_shape_only_when_stderr_is_the_journal() {
    const LO_ONLY: &str = "global:\n    retry_count: 1\n";
    for (matching, expected_prefix) in [(true, "<6>ulnetd"), (false, "")] {
        let dir = TempDir::new("journal");
        let socket = dir.path("ulnetd.sock");
        let config = dir.file("ulnetd.yaml", LO_ONLY);
        // The file the daemon's stderr will be (created again, same inode).
        let log = dir.file("stderr.log", "");
        let meta = std::fs::metadata(&log).unwrap();
        let inode = if matching { meta.ino() } else { meta.ino() + 1 };
        let mut command = Command::new(ULNETD);
        command
            .arg("--config")
            .arg(&config)
            .arg("--socket")
            .arg(&socket)
            .env("JOURNAL_STREAM", format!("{}:{inode}", meta.dev()));
        let mut process = Process::spawn_command(command, dir, socket);
        assert!(process.ready.is_some(), "{}", process.log());
        assert_eq!(process.signal_and_wait(SIGTERM), 0);
        let text = process.log();
        let first = text.lines().next().unwrap_or_default();
        if matching {
            assert!(first.starts_with(expected_prefix), "{text}");
            assert!(text.lines().all(|line| line.starts_with('<')), "{text}");
            assert!(!text.contains('\u{1b}'), "{text}");
        } else {
            // The human shape: an RFC 3339 timestamp first.
            assert!(first.starts_with("20") && first.contains('T'), "{text}");
        }
    }
}

#[test]
fn a_reload_moves_routes_and_forwarding() {
    let port = free_port();
    let base = tcp_config(port, &["127.57.4.2@tcp"], "");
    let route = "route:\n    - net: tcp5\n      gateway: 127.57.4.9@tcp\n";
    let mut daemon = Managed::spawn(&base);
    daemon.next();
    let added = daemon.reload(&format!("{base}{route}routing:\n    enable: 1\n"));
    assert!(
        added.ends_with(
            "configuration reloaded: settings changed routing; routes added tcp5 via 127.57.4.9@tcp"
        ),
        "{added}"
    );
    let routes = daemon.process.ulnetctl(&["route", "show"]);
    assert!(routes.stdout.contains("gateway: 127.57.4.9@tcp"), "{}", routes.stdout);
    let routing = daemon.process.ulnetctl(&["routing", "show"]);
    assert!(routing.stdout.contains("enable: 1"), "{}", routing.stdout);
    // A changed hop count replaces the route.
    let hop = daemon.reload(&format!("{base}{route}      hop: 2\nrouting:\n    enable: 1\n"));
    assert!(
        hop.ends_with(
            "routes removed tcp5 via 127.57.4.9@tcp; routes added tcp5 via 127.57.4.9@tcp"
        ),
        "{hop}"
    );
    let removed = daemon.reload(&base);
    assert!(
        removed.ends_with("settings changed routing; routes removed tcp5 via 127.57.4.9@tcp"),
        "{removed}"
    );
    let routes = daemon.process.ulnetctl(&["route", "show"]);
    assert!(!routes.stdout.contains("127.57.4.9@tcp"), "{}", routes.stdout);
    assert_eq!(daemon.process.signal_and_wait(SIGTERM), 0);
}

#[test]
fn a_reload_replaces_udsp_rules() {
    let port = free_port();
    let base = tcp_config(port, &["127.71.2.2@tcp"], "");
    let rule = "udsp:\n    - idx: 0\n      src: tcp\n      action:\n          priority: 2\n";
    let mut daemon = Managed::spawn(&format!("{base}{rule}"));
    daemon.next();
    let show = |daemon: &Managed| daemon.process.ulnetctl(&["udsp", "show"]).stdout;
    assert!(show(&daemon).contains("src: tcp"), "{}", show(&daemon));
    let again = daemon.reload(&format!("{base}{rule}"));
    assert!(again.ends_with("configuration reloaded: no change"), "{again}");
    // A rule added at run time and not in the file goes; the file's stay.
    let added = daemon.process.ulnetctl(&["udsp", "add", "--dst", "tcp", "--priority", "1"]);
    assert_eq!(added.code, 0, "{}", added.stderr);
    let replaced = daemon.reload(&format!("{base}{rule}"));
    assert!(
        replaced.ends_with("configuration reloaded: udsp rules replaced (1 now)"),
        "{replaced}"
    );
    assert!(!show(&daemon).contains("dst: tcp"), "{}", show(&daemon));
    let removed = daemon.reload(&base);
    assert!(removed.ends_with("udsp rules replaced (0 now)"), "{removed}");
    assert_eq!(show(&daemon), "");
    let net = daemon.process.ulnetctl(&["net", "show", "-v", "4", "--net", "tcp"]).stdout;
    assert!(net.contains("net priority: -1"), "{net}");
    assert_eq!(daemon.process.signal_and_wait(SIGTERM), 0);
}
