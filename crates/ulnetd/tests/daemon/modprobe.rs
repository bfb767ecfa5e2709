//! Module parameters from a modprobe.d file (`--modprobe`): the kernel's names on a real
//! daemon, seen through `ulnetctl`; the configuration file on top of them; what cannot be
//! honoured stopping the daemon with every parameter named; `--check` of both.
//!
//! The module's own nets come up on lo's first address (127.0.0.1, the kernel's choice for
//! `networks=tcp(lo)`), on a port of the OS's; other addresses are in 127.64.x.

use std::net::TcpListener;
use std::process::Command;

use crate::support::{self, Process, SIGTERM, TempDir};

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn ok(daemon: &Process, args: &[&str]) -> String {
    let run = daemon.ulnetctl(args);
    assert_eq!(run.code, 0, "{args:?}: {}{}", run.stdout, run.stderr);
    run.stdout
}

/// The value of `key: N` in a `show` output (the first one).
fn value(text: &str, key: &str) -> i64 {
    let prefix = format!("{key}: ");
    let line = text.lines().map(str::trim).find(|line| line.starts_with(&prefix));
    line.and_then(|line| line[prefix.len()..].parse().ok())
        .unwrap_or_else(|| panic!("{key}: {text}"))
}

/// Starts `ulnetd --modprobe FILE [--config CONFIG]` with `modules` in FILE.
fn spawn(modules: &str, config: Option<&str>) -> (Process, TempDir) {
    let dir = TempDir::new("modprobe");
    let file = dir.file("lustre.conf", modules);
    let daemon = Process::spawn(config, &["--modprobe", file.to_str().unwrap()]);
    (daemon, dir)
}

/// The seeds' client and router options.
const SEEDS: &str = "options lnet networks=ptlf(0) routes='o2ib [1,2,3,4,5]@ptlf' \
                     lnet_peer_discovery_disabled=1 lnet_health_sensitivity=0 \
                     check_router_before_use=1 live_router_check_interval=107 \
                     dead_router_check_interval=50\n\
                     options kptl4lnd peer_credits=32 ntx=8192\n\
                     options libcfs cpu_pattern=\"0[0-15] 1[18-33] 2[34-49] 3[50-65]\"\n";

#[test]
fn module_parameters_take_effect_on_the_running_node() {
    let port = free_port();
    let modules = format!(
        "# A site's file: several lines per module, a continuation, quoted values.\n\
         options lnet networks=\"tcp(lo)\" accept=all \\\n    accept_port={port}\n\
         options lnet lnet_transaction_timeout=200 lnet-retry-count=1 \
         routes='tcp9 1 127.0.0.9@tcp'\n\
         options ksocklnd peer_credits=32 credits=512 sock_timeout=77 conns_per_peer=2\n\
         options ptlrpc at_max=600\n"
    );
    let (mut daemon, _dir) = spawn(&modules, None);
    let ready = daemon.ready.clone().unwrap_or_else(|| panic!("{}", daemon.log()));
    assert!(ready.starts_with("ulnetd: ready 0@lo,127.0.0.1@tcp "), "{ready}");

    let global = ok(&daemon, &["global", "show"]);
    assert_eq!(value(&global, "transaction_timeout"), 200);
    assert_eq!(value(&global, "retry_count"), 1);
    let net = ok(&daemon, &["net", "show", "-v", "--net", "tcp"]);
    assert_eq!(value(&net, "peer_credits"), 32, "{net}");
    assert_eq!(value(&net, "credits"), 512, "{net}");
    assert_eq!(value(&net, "conns_per_peer"), 2, "{net}");
    // socklnd's sock_timeout is the LND tunable `timeout` net show reports.
    assert_eq!(value(&net, "timeout"), 77, "{net}");
    // routes= is a route, as the YAML's route: block.
    let routes = ok(&daemon, &["route", "show"]);
    assert!(routes.contains("net: tcp9") && routes.contains("gateway: 127.0.0.9@tcp"), "{routes}");
    // A net added later gets ksocklnd's parameters too, as in the kernel.
    ok(&daemon, &["net", "add", "--net", "tcp1", "--if", "lo"]);
    let added = ok(&daemon, &["net", "show", "-v", "--net", "tcp1"]);
    assert_eq!(value(&added, "peer_credits"), 32, "{added}");
    // Another module's line is left alone, and said so.
    let log = daemon.log();
    assert!(log.contains("options ptlrpc: not an LNet module: left to the kernel"), "{log}");
    assert!(!log.contains("WARN"), "{log}");
    assert_eq!(daemon.signal_and_wait(SIGTERM), 0);
}

#[test]
fn the_configuration_file_applies_on_top_of_the_module_parameters() {
    let port = free_port();
    let modules = "options lnet lnet_transaction_timeout=200 lnet_retry_count=1 accept_port=1\n\
                   options ksocklnd peer_credits=32\n";
    let config = format!(
        "global:\n    transaction_timeout: 300\n    accept_port: {port}\n    accept: all\n\
         net:\n    - net type: tcp\n      local NI(s):\n        - nid: 127.64.0.1@tcp\n"
    );
    let (mut daemon, _dir) = spawn(modules, Some(&config));
    assert!(daemon.ready.is_some(), "{}", daemon.log());
    let global = ok(&daemon, &["global", "show"]);
    assert_eq!(value(&global, "transaction_timeout"), 300, "the file's value replaces it");
    assert_eq!(value(&global, "retry_count"), 1, "the parameter's value stays");
    let net = ok(&daemon, &["net", "show", "-v", "--net", "tcp"]);
    assert!(net.contains("nid: 127.64.0.1@tcp"), "{net}");
    assert!(!net.contains("127.0.0.1@tcp"), "no module net without networks=: {net}");
    assert_eq!(value(&net, "peer_credits"), 32, "{net}");
    assert_eq!(daemon.signal_and_wait(SIGTERM), 0);
}

#[test]
fn parameters_that_cannot_be_honoured_stop_the_daemon_each_named() {
    let (mut daemon, dir) = spawn(SEEDS, None);
    assert_eq!(daemon.ready, None);
    assert_eq!(daemon.wait(), 78);
    let log = support::mask(&daemon.log(), &dir.0);
    for message in [
        "ulnetd: <dir>/lustre.conf:1: options lnet check_router_before_use=1: unknown parameter \
         (did you mean check_routers_before_use?)",
        "ulnetd: <dir>/lustre.conf:2: options kptl4lnd peer_credits ntx: ulnet cannot drive \
         the kptl4lnd LND",
        "ulnetd: <dir>/lustre.conf:1: options lnet routes=o2ib [1,2,3,4,5]@ptlf: gateway \
         5@ptlf is on no local net of this node",
        "ulnetd: <dir>/lustre.conf:1: options lnet live_router_check_interval=107: \
         live_router_check_interval and dead_router_check_interval have been deprecated",
        "ulnetd: <dir>/lustre.conf:1: options lnet dead_router_check_interval=50: \
         live_router_check_interval and dead_router_check_interval have been deprecated",
        "ulnetd: <dir>/lustre.conf:1: options lnet networks=ptlf(0): net ptlf: LND type not \
         supported by ulnetd (only tcp)",
    ] {
        assert!(log.contains(message), "{message}\n{log}");
    }
    assert!(!log.contains("WARN"), "a refusal, not a warning: {log}");
    assert!(!daemon.socket.exists());
}

fn check(args: &[&str]) -> support::Run {
    let output = Command::new(support::ULNETD)
        .arg("--check")
        .args(args)
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
fn check_reads_the_module_parameters_too() {
    let dir = TempDir::new("modprobe-check");
    let good = dir.file("good.conf", "options lnet networks=tcp(lo) accept_port=7999\n");
    let bad = dir.file("bad.conf", "options lnet lnet_transaction_timeout=0\n");
    let config = dir.file("c.yaml", "global:\n    retry_count: 1\n");
    let path = |p: &std::path::Path| p.to_str().unwrap().to_string();

    let valid = check(&["--modprobe", &path(&good)]);
    assert_eq!((valid.code, valid.stdout.as_str(), valid.stderr.as_str()), (0, "", ""));
    let with_file = check(&[&path(&config), "--modprobe", &path(&good)]);
    assert_eq!(with_file.code, 0, "{}", with_file.stderr);

    let invalid = check(&[&path(&config), "--modprobe", &path(&bad)]);
    assert_eq!(invalid.code, 78);
    assert_eq!(
        support::mask(&invalid.stderr, &dir.0),
        "ulnetd: <dir>/bad.conf:1: options lnet lnet_transaction_timeout=0: Invalid value for \
         lnet_transaction_timeout (0). Has to be greater than lnet_retry_count (2)\n"
    );
    let missing = check(&["--modprobe", "/nonexistent/lustre.conf"]);
    assert_eq!(missing.code, 66, "{}", missing.stderr);
}

/// Waits (bounded) until the daemon's log holds `text` `count` times.
fn wait_for_log(daemon: &Process, text: &str, count: usize) -> String {
    let deadline = std::time::Instant::now() + crate::HANG_GUARD;
    loop {
        let log = daemon.log();
        if log.matches(text).count() >= count {
            return log;
        }
        assert!(std::time::Instant::now() < deadline, "no {text:?} in {log}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn a_reload_reads_the_module_parameters_again_and_keeps_socklnds() {
    let port = free_port();
    let dir = TempDir::new("modprobe-reload");
    let modules = dir.file(
        "lustre.conf",
        "options lnet lnet_transaction_timeout=200\noptions ksocklnd peer_credits=32\n",
    );
    let config = |retry: u8| {
        format!(
            "global:\n    accept_port: {port}\n    accept: all\n    retry_count: {retry}\n\
             net:\n    - net type: tcp\n      local NI(s):\n        - nid: 127.64.1.1@tcp\n"
        )
    };
    let config_file = dir.file("ulnetd.yaml", &config(1));
    let mut daemon = Process::spawn_command(
        {
            let mut command = Command::new(support::ULNETD);
            command
                .arg("--config")
                .arg(&config_file)
                .arg("--modprobe")
                .arg(&modules)
                .arg("--socket")
                .arg(dir.path("ulnetd.sock"));
            command
        },
        TempDir::new("modprobe-reload-d"),
        dir.path("ulnetd.sock"),
    );
    assert!(daemon.ready.is_some(), "{}", daemon.log());

    // The file changes: its value is applied, the parameter's stays under it.
    std::fs::write(&config_file, config(2)).unwrap();
    daemon.signal(support::SIGHUP);
    wait_for_log(&daemon, "configuration reloaded", 1);
    let global = ok(&daemon, &["global", "show"]);
    assert_eq!(value(&global, "retry_count"), 2);
    assert_eq!(value(&global, "transaction_timeout"), 200);

    // ksocklnd's parameters are fixed at load: refused by name, nothing applied.
    std::fs::write(
        &modules,
        "options lnet lnet_transaction_timeout=200\noptions ksocklnd peer_credits=64\n",
    )
    .unwrap();
    std::fs::write(&config_file, config(1)).unwrap();
    daemon.signal(support::SIGHUP);
    let log = wait_for_log(&daemon, "reload refused", 1);
    assert!(log.contains("ksocklnd module parameters: cannot change on a running node"), "{log}");
    assert_eq!(value(&ok(&daemon, &["global", "show"]), "retry_count"), 2);
    assert_eq!(value(&ok(&daemon, &["net", "show", "-v", "--net", "tcp"]), "peer_credits"), 32);
    assert_eq!(daemon.signal_and_wait(SIGTERM), 0);
}

/// libcfs's parameters shape the node's partitions: `get_param` shows the table as lctl
/// does, a pattern with two partitions binds the module net's NI to both (`lo` has no NUMA
/// node), and `net add --cpt [1]` binds a new one to the second.
#[test]
fn cpu_pattern_gives_the_node_its_partitions() {
    let port = free_port();
    let modules = format!(
        "options libcfs cpu_pattern=\"0[0] 1[1]\"\n\
         options lnet networks=\"tcp(lo)\" accept=all accept_port={port}\n"
    );
    let (mut daemon, _dir) = spawn(&modules, None);
    assert!(daemon.ready.is_some(), "{}", daemon.log());
    let table = ok(&daemon, &["get_param", "cpu_partition_table"]);
    assert_eq!(table, "cpu_partition_table=\n0\t: 0\n1\t: 1\n");
    // Each partition is 10 from itself (LOCAL_DISTANCE, from sysfs or without NUMA).
    let distances = ok(&daemon, &["get_param", "-n", "cpu_partition_distance"]);
    let lines: Vec<&str> = distances.lines().collect();
    assert!(
        matches!(&lines[..], [first, second]
            if first.starts_with("0\t: 0:10 1:") && second.starts_with("1\t: 0:")
                && second.ends_with(" 1:10")),
        "{distances}"
    );
    let shown = ok(&daemon, &["net", "show", "-v", "--net", "tcp"]);
    assert!(shown.contains("dev cpt: -1"), "{shown}");
    let net = ok(&daemon, &["net", "show", "-v", "--net", "tcp"]);
    assert!(net.contains("CPT: \"[0,1]\""), "{net}");
    ok(&daemon, &["net", "add", "--net", "tcp1", "--if", "lo", "--cpt", "[1]"]);
    let added = ok(&daemon, &["net", "show", "-v", "--net", "tcp1"]);
    assert!(added.contains("CPT: \"[1]\""), "{added}");
    assert_eq!(daemon.signal_and_wait(SIGTERM), 0);
}

/// A pattern the kernel refuses stops the daemon with the kernel's message and code.
#[test]
fn a_bad_cpu_pattern_is_refused_with_the_kernels_message() {
    let (mut daemon, dir) = spawn("options libcfs cpu_pattern=\"0[0] 0[1]\"\n", None);
    assert_eq!(daemon.ready, None);
    assert_eq!(daemon.wait(), 78);
    let log = support::mask(&daemon.log(), &dir.0);
    let message = "ulnetd: <dir>/lustre.conf:1: options libcfs cpu_pattern=0[0] 0[1]: Partition 0 \
                   has already been set.: rc = -1";
    assert!(log.contains(message), "{log}");
}

/// `enable_sysctl_setup=1` reaches `setup-sysctl`, which then reads the host's
/// `/etc/lnet-sysctl.conf`: on a host without one (a test host), lnetctl's report of the
/// missing file, and nothing written. At 0 (the default), with no backup, nothing to do.
#[test]
fn enable_sysctl_setup_reaches_setup_sysctl() {
    if std::path::Path::new("/etc/lnet-sysctl.conf").exists()
        || std::path::Path::new("/etc/lnet-sysctl.bak").exists()
    {
        eprintln!("skipped: this host has an LNet sysctl file");
        return;
    }
    let port = free_port();
    let modules = format!("options lnet enable_sysctl_setup=1 accept_port={port}\n");
    let (mut daemon, _dir) = spawn(&modules, None);
    assert!(daemon.ready.is_some(), "{}", daemon.log());
    let run = daemon.ulnetctl(&["setup-sysctl"]);
    assert_eq!(run.code, 254, "{}", run.stderr);
    assert_eq!(
        run.stderr,
        "manage:\n    - setup-sysctl:\n          errno: -2\n          \
         descr: \"failed to execute lnet-sysctl-config : No such file or directory\"\n"
    );
    assert!(!std::path::Path::new("/etc/lnet-sysctl.bak").exists());
    assert_eq!(daemon.signal_and_wait(SIGTERM), 0);

    let (mut daemon, _dir) = spawn(&format!("options lnet accept_port={port}\n"), None);
    let run = daemon.ulnetctl(&["setup-sysctl"]);
    assert_eq!((run.code, run.stderr.as_str()), (0, ""));
    assert_eq!(daemon.signal_and_wait(SIGTERM), 0);
}

/// `setup-sysctl` end to end, in a private mount namespace (root only) so that the host is
/// left alone: a tmpfs over `/etc` holds the shipped `dist/sysctl/lnet-sysctl.conf`, tmpfs
/// directories over `/proc/sys/net/ipv{4,6}/neigh/default` hold `gc_thresh1..3` at Linux's
/// defaults. A daemon with `enable_sysctl_setup=1` applies the file (the values change, the
/// old ones go to the backup); one with 0 restores them and removes the backup.
#[test]
fn setup_sysctl_applies_and_restores_the_shipped_file() {
    let probe = Command::new("unshare").args(["--mount", "true"]).status();
    if !probe.is_ok_and(|status| status.success()) {
        eprintln!("skipped: cannot unshare a mount namespace here (needs root)");
        return;
    }
    // Two daemons on the default NID: a port each.
    let modules = |enabled: u8| {
        let port = free_port();
        format!("options lnet enable_sysctl_setup={enabled} accept_port={port}\n")
    };
    let (mut on, _on_dir) = spawn(&modules(1), None);
    let (mut off, _off_dir) = spawn(&modules(0), None);
    assert!(on.ready.is_some() && off.ready.is_some(), "{}{}", on.log(), off.log());
    let conf =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../dist/sysctl/lnet-sysctl.conf");
    let script = format!(
        "set -e\n\
         mount -t tmpfs ulnet-test-etc /etc\n\
         cp '{conf}' /etc/lnet-sysctl.conf\n\
         for v in 4 6; do\n\
           d=/proc/sys/net/ipv$v/neigh/default\n\
           mount -t tmpfs ulnet-test-neigh $d\n\
           echo 128 > $d/gc_thresh1; echo 512 > $d/gc_thresh2; echo 1024 > $d/gc_thresh3\n\
         done\n\
         show() {{ echo $1 $(cat /proc/sys/net/ipv4/neigh/default/gc_thresh*) \
           $(cat /proc/sys/net/ipv6/neigh/default/gc_thresh*); }}\n\
         '{ctl}' --socket '{on}' setup-sysctl\n\
         show applied\n\
         cat /etc/lnet-sysctl.bak\n\
         '{ctl}' --socket '{off}' setup-sysctl\n\
         show restored\n\
         test -e /etc/lnet-sysctl.bak && echo backup kept || echo backup removed\n",
        conf = conf.display(),
        ctl = support::ulnetctl_path().display(),
        on = on.socket.display(),
        off = off.socket.display(),
    );
    let out = Command::new("unshare").args(["--mount", "sh", "-c", &script]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stderr.is_empty(), "{stdout}{stderr}");
    let expected = "applied 1024 2048 4096 1024 2048 4096\n\
                    # Generated backup for original lnet-sysctl.conf parameters\n\
                    net.ipv4.neigh.default.gc_thresh1=128\n\
                    net.ipv4.neigh.default.gc_thresh2=512\n\
                    net.ipv4.neigh.default.gc_thresh3=1024\n\
                    net.ipv6.neigh.default.gc_thresh1=128\n\
                    net.ipv6.neigh.default.gc_thresh2=512\n\
                    net.ipv6.neigh.default.gc_thresh3=1024\n\
                    restored 128 512 1024 128 512 1024\n\
                    backup removed\n";
    assert_eq!(stdout, expected);
    assert_eq!(on.signal_and_wait(SIGTERM), 0);
    assert_eq!(off.signal_and_wait(SIGTERM), 0);
}

/// `accept_port_bulk` (lnet 2.16.58): a second acceptor on the bulk port, and the bulk
/// connections (BULK_IN, BULK_OUT) dialled there while CONTROL goes to `accept_port`; what
/// lctl's `conn_list` shows on the dialling side. On nodes of two partitions each side's
/// connections run on the thread of the partition its peer's NID hashes to, which `conn_list`
/// prints as socklnd prints its scheduler's CPT: 127.64.9.2@tcp sums to 204 (partition 0 on A),
/// 127.64.9.1@tcp to 203 (partition 1 on B).
#[test]
fn bulk_connections_use_accept_port_bulk() {
    let (port, bulk) = (free_port(), free_port());
    let modules = format!(
        "options lnet accept_port={port} accept_port_bulk={bulk}\n\
         options libcfs cpu_npartitions=2\n"
    );
    let node = |nid: &str| {
        let config = format!(
            "global:\n    accept: all\nnet:\n    - net type: tcp\n      local NI(s):\n        \
             - nid: {nid}\n"
        );
        spawn(&modules, Some(&config))
    };
    let (a, _a_dir) = node("127.64.9.1@tcp");
    let (b, _b_dir) = node("127.64.9.2@tcp");
    assert!(a.ready.is_some() && b.ready.is_some(), "{}\n{}", a.log(), b.log());
    ok(&a, &["ping", "127.64.9.2@tcp"]);
    let deadline = std::time::Instant::now() + crate::HANG_GUARD;
    let wanted = [
        format!("C[0]127.64.9.1->127.64.9.2:{port} "),
        format!("I[0]127.64.9.1->127.64.9.2:{bulk} "),
        format!("O[0]127.64.9.1->127.64.9.2:{bulk} "),
    ];
    loop {
        let conns = ok(&a, &["conn_list"]);
        if wanted.iter().all(|line| conns.contains(line.as_str())) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{wanted:?} not all in:\n{conns}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    loop {
        let accepted = ok(&b, &["conn_list"]);
        if accepted.matches("[1]127.64.9.2->127.64.9.1:").count() == 3 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "not 3 on partition 1:\n{accepted}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    for mut daemon in [a, b] {
        assert_eq!(daemon.signal_and_wait(SIGTERM), 0, "{}", daemon.log());
    }
}
