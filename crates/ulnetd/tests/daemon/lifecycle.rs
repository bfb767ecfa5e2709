//! The `ulnetd` process: start, ready line, signals, graceful shutdown, refusals with their
//! exit statuses.

use crate::support::{Process, SIGINT, SIGTERM, TempDir, mask};
use crate::*;

/// Only `lo`: a configuration that needs no network.
const LO_ONLY: &str = "global:\n    retry_count: 1\n";

#[test]
fn starts_prints_the_ready_line_and_stops_on_sigterm() {
    let mut daemon = Process::spawn(Some(LO_ONLY), &[]);
    let ready = daemon.ready.clone().expect("a ready line");
    assert_eq!(ready, format!("ulnetd: ready 0@lo control {}", daemon.socket.display()));
    assert!(daemon.socket.exists());
    assert_eq!(daemon.signal_and_wait(SIGTERM), 0);
    assert!(!daemon.socket.exists(), "the socket file is removed");
    let log = daemon.log();
    assert!(log.contains("shutting down") && log.contains("SIGTERM"), "{log}");
    assert!(log.contains("control socket removed"), "{log}");
}

#[test]
fn sigint_also_shuts_down_gracefully() {
    let mut daemon = Process::spawn(Some(LO_ONLY), &[]);
    assert!(daemon.ready.is_some(), "{}", daemon.log());
    assert_eq!(daemon.signal_and_wait(SIGINT), 0);
    assert!(!daemon.socket.exists());
    assert!(daemon.log().contains("SIGINT"));
}

#[test]
fn the_startup_time_is_logged() {
    let mut daemon = Process::spawn(Some(LO_ONLY), &[]);
    assert!(daemon.ready.is_some());
    let log = daemon.log();
    assert!(log.contains("startup_us="), "{log}");
    eprintln!("startup to ready, spawn to ready line: {:?}", daemon.startup);
    assert_eq!(daemon.signal_and_wait(SIGTERM), 0);
}

#[test]
fn serves_ulnetctl_until_stopped() {
    let mut daemon = Process::spawn(Some(LO_ONLY), &[]);
    let run = daemon.ulnetctl(&["global", "show"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("retry_count: 1"), "{}", run.stdout);
    assert_eq!(daemon.signal_and_wait(SIGTERM), 0);
    let run = daemon.ulnetctl(&["global", "show"]);
    assert_ne!(run.code, 0, "nothing serves the socket any more");
}

#[test]
fn a_bad_configuration_is_refused_with_exit_status_78() {
    let cases = [
        ("frobnicate: 1\n", "invalid key 'frobnicate'"),
        ("global:\n    accept_port: 99999\n", "accept_port: '99999' is not a port number"),
        ("global:\n    response_tracking: 9\n", "Valid values are: 0, 1, 2, or 3"),
        (
            "net:\n    - net type: o2ib\n      interfaces:\n          0: ib0\n",
            "LND type not supported",
        ),
        ("net: [\n", "invalid YAML"),
    ];
    for (text, message) in cases {
        let mut daemon = Process::spawn(Some(text), &[]);
        assert_eq!(daemon.ready, None, "{text}");
        assert_eq!(daemon.wait(), 78, "{text}");
        let log = daemon.log();
        assert!(log.contains(message), "{text}: {log}");
        assert!(!daemon.socket.exists());
    }
}

#[test]
fn a_missing_configuration_file_is_exit_status_66() {
    let dir = TempDir::new("missing");
    let missing = dir.path("nothing.yaml");
    let socket = dir.path("s.sock");
    let mut command = std::process::Command::new(support::ULNETD);
    command.arg("--config").arg(&missing).arg("--socket").arg(&socket);
    let mut daemon = Process::spawn_command(command, TempDir::new("missing-run"), socket);
    assert_eq!(daemon.wait(), 66);
    assert!(daemon.log().contains("cannot read"), "{}", daemon.log());
}

#[test]
fn bad_arguments_are_exit_status_2() {
    let mut daemon = Process::spawn(None, &["--frobnicate"]);
    assert_eq!(daemon.wait(), 2);
    assert!(daemon.log().contains("--frobnicate"), "{}", daemon.log());
}

#[test]
fn a_socket_in_use_is_refused_and_left_alone() {
    let mut first = Process::spawn(Some(LO_ONLY), &[]);
    assert!(first.ready.is_some());
    let mut command = std::process::Command::new(support::ULNETD);
    let dir = TempDir::new("second");
    let config = dir.file("c.yaml", LO_ONLY);
    command.arg("--config").arg(config).arg("--socket").arg(&first.socket);
    let mut second = Process::spawn_command(command, dir, first.socket.clone());
    assert_eq!(second.ready, None);
    assert_eq!(second.wait(), 73);
    let log = mask(&second.log(), &first.dir.0);
    assert!(log.contains("another ulnetd is listening on <dir>/ulnetd.sock"), "{log}");
    // The first daemon still serves.
    assert_eq!(first.ulnetctl(&["global", "show"]).code, 0);
    assert_eq!(first.signal_and_wait(SIGTERM), 0);
}

#[test]
fn a_stale_socket_file_is_replaced() {
    let dir = TempDir::new("stale");
    let socket = dir.path("ulnetd.sock");
    // A socket nobody listens on: what a killed daemon leaves.
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    assert!(socket.exists());
    let mut command = std::process::Command::new(support::ULNETD);
    command.arg("--config").arg(dir.file("c.yaml", LO_ONLY)).arg("--socket").arg(&socket);
    let mut daemon = Process::spawn_command(command, TempDir::new("stale-run"), socket.clone());
    assert!(daemon.ready.is_some(), "{}", daemon.log());
    assert_eq!(daemon.ulnetctl(&["global", "show"]).code, 0);
    assert_eq!(daemon.signal_and_wait(SIGTERM), 0);
}

#[test]
fn idle_rss_is_measured() {
    let mut daemon = Process::spawn(Some(LO_ONLY), &[]);
    assert!(daemon.ready.is_some());
    // Let the daemon settle after start-up.
    std::thread::sleep(std::time::Duration::from_millis(200));
    let rss = daemon.rss_kib();
    eprintln!("idle ulnetd RSS: {rss} KiB");
    assert!(rss > 0);
    assert_eq!(daemon.signal_and_wait(SIGTERM), 0);
}

/// `cpu_npartitions=2` (one on a one-CPU host): one I/O thread per partition, each pinned to
/// its partition's CPUs from libcfs's table, within the process's own mask; with
/// `--no-cpu-bind` every one keeps the whole mask.
#[test]
fn each_partition_has_an_io_thread_pinned_to_its_cpus() {
    use std::collections::BTreeSet;
    use ulnet_config::cpu_partitions::{self, DEFAULT_CPU_PATTERN, parse_cpulist};

    let topology = ulnetd::cpu_topology::read(std::path::Path::new("/")).unwrap();
    let count = topology.online_cpus().min(2);
    let table = cpu_partitions::build(DEFAULT_CPU_PATTERN, count as i32, &topology).unwrap();
    let allowed = |task: &std::path::Path| -> BTreeSet<u32> {
        let status = std::fs::read_to_string(task.join("status")).unwrap();
        let line = status.lines().find_map(|line| line.strip_prefix("Cpus_allowed_list:"));
        parse_cpulist(line.unwrap().trim()).unwrap()
    };
    let mask = allowed(std::path::Path::new("/proc/self"));
    let dir = TempDir::new("cpt");
    let modprobe = dir.file("lnet.conf", &format!("options libcfs cpu_npartitions={count}\n"));
    let modprobe = modprobe.to_str().unwrap();
    for bind in [true, false] {
        let mut args = vec!["--modprobe", modprobe];
        if !bind {
            args.push("--no-cpu-bind");
        }
        let mut daemon = Process::spawn(Some(LO_ONLY), &args);
        assert!(daemon.ready.is_some(), "{}", daemon.log());
        // Threads named ulnet-io-<node> (partition 0) and ulnet-io-<node>.<cpt>.
        let mut threads: Vec<(usize, BTreeSet<u32>)> = Vec::new();
        let tasks = std::fs::read_dir(format!("/proc/{}/task", daemon.child.id())).unwrap();
        for task in tasks {
            let task = task.unwrap().path();
            let name = std::fs::read_to_string(task.join("comm")).unwrap_or_default();
            let Some(id) = name.trim().strip_prefix("ulnet-io-") else { continue };
            let cpt = id.split_once('.').map_or(0, |(_, cpt)| cpt.parse().unwrap());
            threads.push((cpt, allowed(&task)));
        }
        threads.sort();
        assert_eq!(
            threads.iter().map(|(cpt, _)| *cpt).collect::<Vec<_>>(),
            (0..count).collect::<Vec<_>>()
        );
        for (cpt, cpus) in threads {
            let own: BTreeSet<u32> =
                table.cpus(cpt).unwrap().intersection(&mask).copied().collect();
            let expected = if bind && !own.is_empty() { own } else { mask.clone() };
            assert_eq!(cpus, expected, "partition {cpt}, bound: {bind}");
        }
        assert_eq!(daemon.signal_and_wait(SIGTERM), 0);
    }
}
