//! Sessions over time: node-side expiry, the console server and relay.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ulnet_selftest::cli::Env;
use ulnet_selftest::console::NodeState;
use ulnet_selftest::serve::{self, Frame, PROTOCOL_VERSION, Request};
use ulnet_selftest::{Console, Target};

use crate::common::{Cluster, KEY, eventually, ulst};

#[test]
fn a_session_idle_past_its_timeout_ends_on_the_node() {
    let cluster = Cluster::new(1);
    ulst(&cluster, "new_session s");
    ulst(&cluster, "add_group g 10.0.0.1@tcp");
    let service = cluster.services[0].as_ref().unwrap();
    assert_eq!(service.session().unwrap().name, "s");
    // Just before the 100 s: still there. Just after: gone.
    service.expire_at(Instant::now() + Duration::from_secs(99));
    assert!(service.session().is_some());
    service.expire_at(Instant::now() + Duration::from_secs(101));
    assert!(service.session().is_none());
    // The console learns it from the next reply: the node is in no session.
    let result = cluster.console.debug(KEY, &Target::Group("g".into()), 5).unwrap();
    assert_eq!(result.entries[0].state, NodeState::Unknown);
    let (_, out, _) = ulst(&cluster, "update_group --refresh g");
    assert_eq!(out, "");
    assert_eq!(cluster.console.group_nodes(KEY, "g").unwrap()[0].1, NodeState::Active);
    assert!(service.session().is_some());
}

#[test]
fn a_running_batch_survives_only_with_its_session() {
    let cluster = Cluster::new(2);
    ulst(&cluster, "new_session s");
    ulst(&cluster, "add_group c 10.0.0.1@tcp");
    ulst(&cluster, "add_group s 10.0.0.2@tcp");
    ulst(&cluster, "add_test --from c --to s ping");
    ulst(&cluster, "run");
    let client = cluster.services[0].as_ref().unwrap();
    assert_eq!(client.session().unwrap().active_batches, 1);
    // The session expires: its batch stops (a zombie until then), the node is free.
    client.expire_at(Instant::now() + Duration::from_secs(101));
    assert!(client.session().is_none());
    // The node answers the console's query with ESRCH: a framework error for lst.
    let (rc, out, _) = ulst(&cluster, "query");
    assert_eq!((rc, out.as_str()), (-3, "batch [0] stopped: 1 , running: 0, failed: 1\n"));
}

/// A console server on a temporary socket, driven through the relay as `ulst` does.
#[test]
fn console_server_relays_commands_and_exits_after_end_session() {
    let cluster = Cluster::new(1);
    let dir = std::env::temp_dir().join(format!("ulst-test-{}", std::process::id()));
    let socket = dir.join("console.sock");
    let stop = AtomicBool::new(false);
    let console_node = ulnet::Node::builder()
        .mem_ni("10.0.0.201@tcp".parse().unwrap(), cluster.fabric())
        .build()
        .unwrap();
    let console = Console::new(&console_node).unwrap();
    let env = Env { session: Some(KEY.to_string()), features: None };
    let send = |line: &str| {
        let request = Request {
            version: PROTOCOL_VERSION,
            argv: std::iter::once("ulst")
                .chain(line.split_whitespace())
                .map(str::to_string)
                .collect(),
            env: env.clone(),
            terminal: false,
        };
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = serve::relay(&socket, &request, &mut out, &mut err).unwrap();
        (code, String::from_utf8(out).unwrap(), String::from_utf8(err).unwrap())
    };
    std::thread::scope(|scope| {
        let server = scope.spawn(|| serve::serve(console, &socket, &stop));
        assert!(eventually(Duration::from_secs(10), || socket.exists()));
        assert_eq!(
            send("new_session relay").1,
            "SESSION: relay FEATURES: 1 TIMEOUT: 300 FORCE: No\n"
        );
        assert_eq!(send("add_group g 10.0.0.1@tcp").1, "10.0.0.1@tcp are added to session\n");
        let (code, _, err) = send("add_group g 10.0.0.1@tcp");
        assert_eq!((code, err.as_str()), (-1, "group already exists\n"));
        assert_eq!(send("list_group").1, "1) g\nTotal 1 groups\n");
        // A client that goes away cancels its command: stat forever, then hang up.
        let mut stream = std::os::unix::net::UnixStream::connect(&socket).unwrap();
        let request = Request {
            version: PROTOCOL_VERSION,
            argv: ["ulst", "stat", "--delay", "1", "g"].map(str::to_string).to_vec(),
            env: env.clone(),
            terminal: false,
        };
        use std::io::Write;
        let mut line = serde_json::to_vec(&request).unwrap();
        line.push(b'\n');
        stream.write_all(&line).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        drop(stream);
        assert_eq!(send("end_session"), (0, String::new(), String::new()));
        // No session, no client: the server leaves and removes its socket.
        let result = server.join().unwrap();
        assert!(result.is_ok(), "{result:?}");
        assert!(!socket.exists());
    });
    assert!(!stop.load(Ordering::Acquire));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn frames_are_json_lines() {
    let frame = serde_json::to_string(&Frame::Stdout("x\n".into())).unwrap();
    assert_eq!(frame, r#"{"stdout":"x\n"}"#);
    assert_eq!(serde_json::to_string(&Frame::Exit(-1)).unwrap(), r#"{"exit":-1}"#);
}

#[test]
fn an_idle_console_ends_its_session_on_the_nodes() {
    let cluster = Cluster::new(1);
    cluster.console.new_session(KEY, "idle", 5, false, 1).unwrap();
    ulst(&cluster, "add_group g 10.0.0.1@tcp");
    let service = cluster.services[0].as_ref().unwrap();
    assert!(service.session().is_some());
    // Past the console's 5 s: the pinger ends the session on every active node.
    cluster.console.tick_at(Instant::now() + Duration::from_secs(10));
    assert!(eventually(Duration::from_secs(10), || service.session().is_none()));
    let (rc, _, err) = ulst(&cluster, "list_group");
    assert_eq!((rc, err.as_str()), (-1, "No session exists\n"));
}

#[test]
fn the_pinger_keeps_idle_nodes_in_the_session() {
    let cluster = Cluster::new(1);
    ulst(&cluster, "new_session s");
    ulst(&cluster, "add_group g 10.0.0.1@tcp");
    let service = cluster.services[0].as_ref().unwrap();
    let before = service.rpc_counters().rpcs_received;
    // 60 s later (half the node's 100 s): a DEBUG goes out, and the console stays in use.
    cluster.console.tick_at(Instant::now() + Duration::from_secs(60));
    assert!(eventually(Duration::from_secs(10), || service.rpc_counters().rpcs_received > before));
    assert!(service.session().is_some());
    assert_eq!(ulst(&cluster, "list_group").0, 0);
}

#[test]
fn a_service_shut_down_leaves_nothing_posted_on_its_node() {
    let fabric = ulnet::MemFabric::new(ulnet::LinkConfig::IDEAL);
    let node =
        ulnet::Node::builder().mem_ni("10.0.0.1@tcp".parse().unwrap(), &fabric).build().unwrap();
    let service = ulnet_selftest::SelftestService::start(&node).unwrap();
    assert!(node.stats().mds > 0, "request buffers are posted");
    // `shutdown` releases them; its drop then finds nothing left to do.
    service.shutdown();
    assert!(eventually(Duration::from_secs(10), || {
        let stats = node.stats();
        stats.mds == 0 && stats.mes == 0
    }));
}

/// Services shut down while a client streams brw and ping RPCs to a server: whatever their
/// folds were making on the node meanwhile (calls made with the state released, settled after
/// the shutdown) is unlinked too, and both nodes are left with nothing posted.
#[test]
fn services_shut_down_under_load_leave_nothing_posted() {
    for round in 0..20 {
        let mut cluster = Cluster::new(2);
        let ok = |cluster: &Cluster, line: &str| {
            let (rc, out, err) = ulst(cluster, line);
            assert_eq!(rc, 0, "{line}: {out}{err}");
        };
        ok(&cluster, "new_session s");
        ok(&cluster, "add_group c 10.0.0.1@tcp");
        ok(&cluster, "add_group s 10.0.0.2@tcp");
        ok(&cluster, "add_test --concurrency 16 --from c --to s brw write size=4k");
        ok(&cluster, "add_test --concurrency 16 --from c --to s ping");
        ok(&cluster, "run");
        let server = cluster.services[1].as_ref().unwrap();
        assert!(
            eventually(Duration::from_secs(10), || server.rpc_counters().rpcs_received > 100),
            "round {round}: no traffic"
        );
        // Server first in even rounds, client first in odd ones.
        let order = if round % 2 == 0 { [1, 0] } else { [0, 1] };
        for index in order {
            if let Some(service) = cluster.services[index].take() {
                service.shutdown();
            }
        }
        for node in &cluster.nodes {
            assert!(
                eventually(Duration::from_secs(10), || {
                    let stats = node.stats();
                    stats.mds == 0 && stats.mes == 0
                }),
                "round {round}: {} left {:?} MDs",
                node.process_id(),
                node.stats().mds
            );
        }
    }
}
