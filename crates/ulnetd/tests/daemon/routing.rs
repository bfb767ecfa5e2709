//! Routing on live `ulnetd` processes over loopback TCP, no root: `route add|show|del`,
//! `set routing`, `routing show`, a routed `ping` through a router daemon with a NI on each
//! net, and routes carried by `export` into `import` and `--config`.
//!
//! Addresses are in 127.56.<block>.x (tcp) and 127.57.<block>.x (tcp1); ports are the OS's
//! free ones. Waits are bounded by `HANG_GUARD` and only turn a hang into a failure.

use std::net::TcpListener;
use std::time::Instant;

use crate::HANG_GUARD;
use crate::support::{self, Process, SIGTERM};

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn global(port: u16) -> String {
    format!("global:\n    accept_port: {port}\n    accept: all\n")
}

/// A net item with one NI on `nid`.
fn net(kind: &str, nid: &str) -> String {
    format!("    - net type: {kind}\n      local NI(s):\n        - nid: {nid}\n")
}

fn spawn(config: &str) -> Process {
    let daemon = Process::spawn(Some(config), &[]);
    assert!(daemon.ready.is_some(), "{config}\n{}", daemon.log());
    daemon
}

fn ok(daemon: &Process, args: &[&str]) -> String {
    let run = daemon.ulnetctl(args);
    assert_eq!(run.code, 0, "{args:?}: {}{}", run.stdout, run.stderr);
    assert_eq!(run.stderr, "", "{args:?}");
    run.stdout
}

fn stop(mut daemon: Process) {
    assert_eq!(daemon.signal_and_wait(SIGTERM), 0);
}

/// Runs `args` until its output contains `wanted` (the router checker works in the
/// background); returns that output.
fn eventually(daemon: &Process, args: &[&str], wanted: &str) -> String {
    let deadline = Instant::now() + HANG_GUARD;
    loop {
        let out = ok(daemon, args);
        if out.contains(wanted) {
            return out;
        }
        assert!(Instant::now() < deadline, "{args:?} never showed {wanted:?}: {out}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// A router with a NI on each net, forwarding from the start (`routing: enable: 1` in the
/// file, the module parameter's path), with small pools.
fn router(port: u16, block: u8) -> Process {
    let tcp = net("tcp", &format!("127.56.{block}.3@tcp"));
    let tcp1 = net("tcp1", &format!("127.57.{block}.3@tcp1"));
    spawn(&format!(
        "{}net:\n{tcp}{tcp1}routing:\n    enable: 1\nbuffers:\n    tiny: 600\n    small: 64\n    \
         large: 8\n",
        global(port)
    ))
}

#[test]
fn routes_and_routing_on_live_daemons() {
    let port = free_port();
    let router = router(port, 0);
    insta::assert_snapshot!("routing_router_routing_show", ok(&router, &["routing", "show"]));

    let client = spawn(&format!("{}net:\n{}", global(port), net("tcp", "127.56.0.2@tcp")));
    assert_eq!(ok(&client, &["route", "show", "-v"]), "");
    assert_eq!(ok(&client, &["routing", "show"]), "", "no pools before routing is enabled");
    let add = ["route", "add", "--net", "tcp1", "--gateway", "127.56.0.3@tcp"];
    ok(&client, &[&add[..], &["--hop", "1", "--priority", "2"]].concat());
    // The router checker pings the gateway at once; its ping buffer lists a tcp1 NID. The
    // route may show up before that reply sets its type (a new route is multi-hop until
    // then, as the kernel's `lr_single_hop` starts false), so wait for both.
    eventually(&client, &["route", "show", "-v"], "state: up");
    let shown = eventually(&client, &["route", "show", "-v"], "type: single-hop");
    insta::assert_snapshot!("routing_route_show_verbose", shown);
    insta::assert_snapshot!("routing_route_show", ok(&client, &["route", "show"]));
    // The gateway is a peer whose NIs have a state (`NA` for other peers).
    let peers = ok(&client, &["peer", "show", "--nid", "127.56.0.3@tcp"]);
    assert!(peers.contains("state: up") && !peers.contains("state: NA"), "{peers}");

    // Refusals keep lnetctl's shapes.
    let again = client.ulnetctl(&add);
    insta::assert_snapshot!("routing_route_add_exists", again.transcript());
    let unreachable = ["route", "add", "--net", "tcp2", "--gateway", "127.56.9.9@tcp9"];
    insta::assert_snapshot!(
        "routing_route_add_unreachable",
        client.ulnetctl(&unreachable).transcript()
    );
    let local = ["route", "add", "--net", "tcp", "--gateway", "127.56.0.3@tcp"];
    insta::assert_snapshot!("routing_route_add_local_net", client.ulnetctl(&local).transcript());

    // `set routing 1` allocates the pools at once but says enabled only after
    // alive_router_check_interval + router_ping_timeout, as the kernel does.
    ok(&client, &["set", "tiny_buffers", "512"]);
    ok(&client, &["set", "routing", "1"]);
    insta::assert_snapshot!(
        "routing_client_routing_show_starting",
        ok(&client, &["routing", "show"])
    );
    ok(&client, &["set", "routing", "0"]);
    let busy = client.ulnetctl(&["set", "routing", "1"]);
    insta::assert_snapshot!("routing_set_routing_while_stopping", busy.transcript());

    ok(&client, &["route", "del", "--net", "tcp1", "--gateway", "127.56.0.3@tcp"]);
    assert_eq!(ok(&client, &["route", "show"]), "");
    let gone = client.ulnetctl(&["route", "del", "--net", "tcp1", "--gateway", "127.56.0.3@tcp"]);
    insta::assert_snapshot!("routing_route_del_no_route", gone.transcript());
    stop(client);
    stop(router);
}

#[test]
fn a_ping_crosses_a_router_daemon() {
    let port = free_port();
    let router = router(port, 1);
    let client = spawn(&format!(
        "{}net:\n{}route:\n    - net: tcp1\n      gateway: 127.56.1.3@tcp\n",
        global(port),
        net("tcp", "127.56.1.2@tcp")
    ));
    let server = spawn(&format!(
        "{}net:\n{}route:\n    - net: tcp\n      gateway: 127.57.1.3@tcp1\n",
        global(port),
        net("tcp1", "127.57.1.4@tcp1")
    ));
    eventually(&client, &["route", "show", "-v"], "state: up");
    eventually(&server, &["route", "show", "-v"], "state: up");
    let ping = ok(&client, &["ping", "127.57.1.4@tcp1"]);
    assert!(ping.contains("- nid: 127.57.1.4@tcp1"), "{ping}");
    let back = ok(&server, &["ping", "127.56.1.2@tcp"]);
    assert!(back.contains("- nid: 127.56.1.2@tcp"), "{back}");
    stop(server);
    stop(client);
    stop(router);
}

/// `check_routers_before_use=1`: the client is ready only once the router checker has heard
/// from, or given up on, each gateway (the `RTR_DISCOVERED` bit of `peer state`): a live
/// router, and a black hole that accepts connections and never answers, so its check lasts
/// the transaction timeout. Then sanity-lnet 105 and 106: while a route goes through the
/// gateway, `peer add` of it (which would replace the peer) and `peer del` answer -EBUSY and
/// lose nothing; without the route both work.
#[test]
fn gateways_are_known_at_readiness_and_busy_as_peers() {
    const RTR_DISCOVERED: u64 = 1 << 17;
    let port = free_port();
    let router = router(port, 4);
    let black_hole = TcpListener::bind(("127.56.4.9", port)).unwrap();
    let dir = support::TempDir::new("crbu");
    let modprobe = dir.file(
        "lustre.conf",
        "options lnet check_routers_before_use=1 lnet_retry_count=0 lnet_transaction_timeout=2\n",
    );
    let config = format!(
        "{}net:\n{}route:\n    - net: tcp1\n      gateway: 127.56.4.3@tcp\n    - net: tcp2\n      \
         gateway: 127.56.4.9@tcp\n",
        global(port),
        net("tcp", "127.56.4.2@tcp")
    );
    let client = Process::spawn(Some(&config), &["--modprobe", modprobe.to_str().unwrap()]);
    assert!(client.ready.is_some(), "{}", client.log());
    for gateway in ["127.56.4.3@tcp", "127.56.4.9@tcp"] {
        let shown = ok(&client, &["peer", "show", "-v", "3", "--nid", gateway]);
        let state: u64 = shown
            .lines()
            .find_map(|line| line.trim().strip_prefix("peer state: "))
            .and_then(|value| value.parse().ok())
            .unwrap_or_else(|| panic!("no peer state: {shown}"));
        assert_ne!(state & RTR_DISCOVERED, 0, "ready before {gateway} was checked: {shown}");
    }
    let routes = ok(&client, &["route", "show", "-v"]);
    assert_eq!(routes.matches("state: up").count(), 1, "{routes}");
    drop(black_hole);

    let gateway = "127.56.4.3@tcp";
    let add = client.ulnetctl(&["peer", "add", "--prim_nid", gateway]);
    insta::assert_snapshot!("routing_peer_add_gateway", add.transcript());
    let del = client.ulnetctl(&["peer", "del", "--prim_nid", gateway]);
    insta::assert_snapshot!("routing_peer_del_gateway", del.transcript());
    assert!(ok(&client, &["peer", "show", "--nid", gateway]).contains(gateway));
    assert!(ok(&client, &["route", "show"]).contains(gateway));
    ok(&client, &["route", "del", "--net", "tcp1", "--gateway", gateway]);
    ok(&client, &["peer", "add", "--prim_nid", gateway]);
    ok(&client, &["peer", "del", "--prim_nid", gateway]);
    stop(client);
    stop(router);
}

/// An export with the items of its `route:` and `peer:` sections sorted: routes to one net
/// are kept in a random order (each node prefers different routers) and peers in table
/// order, so two nodes with the same routes and peers may list them differently.
fn sorted(export: &str) -> String {
    let mut out = String::new();
    let mut items: Vec<String> = Vec::new();
    let mut sorting = false;
    for line in export.split_inclusive('\n') {
        let inside = line.starts_with(['-', ' ']);
        if sorting && inside {
            if line.starts_with('-') {
                items.push(String::new());
            }
            if let Some(item) = items.last_mut() {
                item.push_str(line);
            }
            continue;
        }
        items.sort();
        out.push_str(&items.concat());
        items.clear();
        sorting = line == "route:\n" || line == "peer:\n";
        out.push_str(line);
    }
    items.sort();
    out.push_str(&items.concat());
    out
}

#[test]
fn export_with_routes_then_import_and_config_reproduce_them() {
    let port = free_port();
    let original = format!(
        "{}net:\n{}route:\n    - net: tcp1\n      gateway: 127.56.2.[8-9]@tcp\n      hop: 2\n      \
         priority: 1\n    - net: o2ib\n      gateway: 127.56.2.7@tcp\nrouting:\n    enable: 1\n\
         buffers:\n    tiny: 700\n    small: 32\n    large: 4\n",
        global(port),
        net("tcp", "127.56.2.2@tcp")
    );
    let first = spawn(&original);
    let backup = ok(&first, &["export", "--backup"]);
    let full = ok(&first, &["export"]);
    let routing = ok(&first, &["routing", "show"]);
    stop(first);
    assert_eq!(backup.matches("      gateway: 127.56.2.").count(), 3, "{backup}");
    assert!(backup.contains("routing:\n    enable: 1\nbuffers:\n    tiny: 700\n"), "{backup}");

    // Into a fresh node: the routes come back; routing is enabled through the delayed path
    // of lnetctl's import, so the pools exist at once and `enable` follows later.
    for export in [&backup, &full] {
        let fresh = spawn(&global(port));
        let run = support::ulnetctl_with_stdin(&fresh.socket, &["import"], export);
        assert_eq!(run.code, 0, "import of\n{export}: {}{}", run.stdout, run.stderr);
        let again = ok(&fresh, &["export", "--backup"]);
        let (again, expected) = (sorted(&again), sorted(&backup));
        // The same but for `enable`, which follows the pools after the delay.
        assert_eq!(again.replace("enable: 0", "enable: 1"), expected, "import of\n{export}");
        let shown = ok(&fresh, &["routing", "show"]);
        assert_eq!(shown.replace("enable: 0", "enable: 1"), routing);
        stop(fresh);
    }

    // The backup as a configuration file: the same node, routing enabled at once.
    let third = spawn(&format!("{}---\n{backup}", global(port)));
    assert_eq!(sorted(&ok(&third, &["export", "--backup"])), sorted(&backup));
    assert_eq!(ok(&third, &["routing", "show"]), routing);
    // `import --del` of the routes removes them.
    let routes = "route:\n    - net: tcp1\n      gateway: 127.56.2.[8-9]@tcp\n    - net: o2ib\n      \
                  gateway: 127.56.2.7@tcp\n";
    let run = support::ulnetctl_with_stdin(&third.socket, &["import", "--del"], routes);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(ok(&third, &["route", "show"]), "");
    stop(third);
}

/// A node on the in-process fabric is rebuilt to change its NIs: its routes, forwarding and
/// buffer counts are carried to the new engine.
#[test]
fn routes_and_routing_survive_a_rebuild_of_the_node() {
    let dir = support::TempDir::new("rebuild");
    let text = "net:\n    - net type: tcp\n      local NI(s):\n        - nid: 127.58.0.2@tcp\n\
                route:\n    - net: tcp1\n      gateway: 127.58.0.3@tcp\n      hop: 3\n\
                routing:\n    enable: 1\nbuffers:\n    tiny: 700\n";
    let host = ulnetd::interfaces::host_interfaces().unwrap();
    let config = ulnetd::DaemonConfig::parse(text, false, &host).unwrap();
    let fabric = ulnet::MemFabric::new(ulnet::LinkConfig::IDEAL);
    let daemon = ulnetd::Daemon::start(&config, &dir.path("s"), Some(fabric)).unwrap();
    let run = |args: &[&str]| {
        let run = support::ulnetctl(daemon.socket(), args);
        assert_eq!(run.code, 0, "{args:?}: {}{}", run.stdout, run.stderr);
        run.stdout
    };
    let routes = run(&["route", "show", "-v"]);
    let routing = run(&["routing", "show"]);
    assert!(
        routing.contains("    - enable: 1\n") && routing.contains("nbuffers: 700"),
        "{routing}"
    );
    run(&["net", "add", "--nid", "127.58.2.2@tcp2"]);
    assert!(run(&["net", "show"]).contains("127.58.2.2@tcp2"));
    let shown = run(&["route", "show", "-v"]);
    assert!(shown.contains("gateway: 127.58.0.3@tcp\n      hop: 3\n"), "{routes}\n{shown}");
    assert_eq!(run(&["routing", "show"]), routing);
    daemon.shutdown();
}
