//! Over the TCP LND on loopback addresses: the typical script, and the wire as tshark sees it.

use ulnet::{AcceptPolicy, Node, SocklndTunables};
use ulnet_selftest::{Console, SelftestService};

use crate::common::ulst_with;

/// A port of our own for this test binary's nodes (every NI of a network shares it).
fn port(offset: u16) -> u16 {
    20000 + (std::process::id() % 20000) as u16 + offset
}

fn tcp_node(address: &str, port: u16) -> Node {
    let tunables =
        SocklndTunables { accept_port: port, accept: AcceptPolicy::All, ..Default::default() };
    Node::builder().tcp_ni(format!("{address}@tcp").parse().unwrap(), tunables).build().unwrap()
}

#[test]
fn typical_script_over_tcp() {
    let port = port(0);
    let a = tcp_node("127.0.0.2", port);
    let b = tcp_node("127.0.0.3", port);
    let _services = [SelftestService::start(&a).unwrap(), SelftestService::start(&b).unwrap()];
    let console_node = tcp_node("127.0.0.4", port);
    let console = Console::new(&console_node).unwrap();
    let ok = |line: &str| {
        let (rc, out, err) = ulst_with(&console, line);
        assert_eq!((rc, err.as_str()), (0, ""), "{line}: {out}");
        out
    };
    ok("new_session tcp");
    assert_eq!(ok("add_group c 127.0.0.2@tcp"), "127.0.0.2@tcp are added to session\n");
    assert_eq!(ok("add_group s 127.0.0.3@tcp"), "127.0.0.3@tcp are added to session\n");
    ok("add_batch b");
    for test in [
        "brw write size=1M check=full",
        "brw read size=1M check=full",
        "brw write size=4k check=simple",
        "ping",
    ] {
        ok(&format!("add_test --batch b --loop 100 --concurrency 4 --from c --to s {test}"));
    }
    ok("run b");
    let stat = ok("stat --delay 1 --count 1 s");
    assert!(stat.contains("[LNet Bandwidth of s]"), "{stat}");
    assert!(ok("stop b").ends_with("Batch is stopped\n"));
    assert_eq!(
        ok("show_error c s"),
        "c:\nTotal 0 error nodes in c\ns:\nTotal 0 error nodes in s\n"
    );
    ok("end_session");
}

/// A node with `partitions` CPU partitions (each with its I/O thread) and one TCP NI.
fn partitioned_node(address: &str, port: u16, partitions: u32) -> Node {
    let tunables =
        SocklndTunables { accept_port: port, accept: AcceptPolicy::All, ..Default::default() };
    Node::builder()
        .partitions(ulnet::proto::engine::cpt::Partitions::new(partitions).unwrap())
        .tcp_ni(format!("{address}@tcp").parse().unwrap(), tunables)
        .build()
        .unwrap()
}

/// Selftest between nodes with two CPU partitions: the client's connections to its two
/// servers run on different partitions' threads (127.0.0.3 and 127.0.0.4 hash apart), and
/// every brw (check=full: each page's pattern checked) and ping of every loop completes,
/// without one error, drop or expiry.
#[test]
fn brw_check_full_over_two_partitions_loses_nothing() {
    use ulnet::proto::wire::selftest::{BrwCheck, BrwDirection, SrpcBody};
    use ulnet_selftest::console::BrwSpec;
    use ulnet_selftest::{Target, TestKind, TestSpec};

    const KEY: u32 = 2323;
    const LOOPS: i32 = 100;
    const CONCURRENCY: u32 = 8;
    let port = port(3);
    let client = partitioned_node("127.0.0.2", port, 2);
    let servers = [partitioned_node("127.0.0.3", port, 2), partitioned_node("127.0.0.4", port, 2)];
    let _services: Vec<SelftestService> = std::iter::once(&client)
        .chain(&servers)
        .map(|node| SelftestService::start(node).unwrap())
        .collect();
    let console_node = tcp_node("127.0.0.5", port);
    let console = Console::new(&console_node).unwrap();
    console.new_session(KEY, "partitions", 0, false, 1).unwrap();
    for (group, nodes) in [("c", std::slice::from_ref(&client)), ("s", &servers[..])] {
        console.add_group(KEY, group).unwrap();
        let ids: Vec<_> = nodes.iter().map(Node::process_id).collect();
        assert_eq!(console.add_nodes(KEY, group, &ids).unwrap().lst_rc(), 0);
    }
    console.add_batch(KEY, "b").unwrap();
    let brw = |direction, size| {
        TestKind::Brw(BrwSpec { direction, check: BrwCheck::Full, size, offset: 0 })
    };
    let kinds = [
        brw(BrwDirection::Write, 4096),
        brw(BrwDirection::Read, 4096),
        brw(BrwDirection::Write, 1 << 20),
        brw(BrwDirection::Read, 64 << 10),
        TestKind::Ping,
    ];
    for kind in &kinds {
        let mut test = TestSpec::new(*kind, "c", "s");
        test.batch = "b".into();
        test.loop_count = LOOPS;
        test.concurrency = CONCURRENCY;
        // `--distribute 1:2`: the client's units go to both servers.
        test.span = 2;
        assert_eq!(console.add_test(KEY, &test).unwrap().lst_rc(), 0);
    }
    assert_eq!(console.run_batch(KEY, "b", 0).unwrap().lst_rc(), 0);
    // The batch ends by itself once every loop of every unit is done.
    let start = std::time::Instant::now();
    loop {
        let query = console.query_batch(KEY, "b", 0, false, 5).unwrap();
        if query.stat.batch_running() == 0 {
            break;
        }
        assert!(start.elapsed() < std::time::Duration::from_secs(120), "{query:?}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let counters = |group: &str| {
        let stat = console.stat(KEY, &Target::Group(group.into()), 10).unwrap();
        let replies: Vec<_> = stat
            .entries
            .iter()
            .map(|entry| match &entry.reply {
                Some(SrpcBody::StatReply(stat)) => *stat,
                other => panic!("{other:?}"),
            })
            .collect();
        replies
    };
    let client_counters = counters("c");
    let sent_by_client = client_counters.iter().map(|stat| {
        assert_eq!((stat.framework.brw_errors, stat.framework.ping_errors), (0, 0), "{stat:?}");
        let rpc = stat.rpc;
        assert_eq!((rpc.errors, rpc.rpcs_dropped, rpc.rpcs_expired), (0, 0, 0), "{stat:?}");
        rpc.rpcs_sent
    });
    let sent_by_client: u32 = sent_by_client.sum();
    let received_by_servers: u32 = counters("s")
        .iter()
        .map(|stat| {
            let rpc = stat.rpc;
            assert_eq!((rpc.errors, rpc.rpcs_dropped, rpc.rpcs_expired), (0, 0, 0), "{stat:?}");
            rpc.rpcs_received
        })
        .sum();
    // Every unit's every loop is one RPC to a server; the framework's own RPCs (session,
    // tests, batches, from the console) come on top.
    let expected = LOOPS as u32 * CONCURRENCY * kinds.len() as u32;
    assert!(sent_by_client >= expected, "{sent_by_client} < {expected}");
    assert!(received_by_servers >= expected, "{received_by_servers} < {expected}");
    // Both of the client's partitions carried traffic.
    let by_partition = client.connections_by_partition();
    assert!(by_partition.iter().all(|&count| count > 0), "{by_partition:?}");
    // The test services' traffic runs with each node's core shared: every RPC's MDs are on
    // the partition of its peer, so its calls lock that partition alone. What takes the core
    // exclusively is the framework's (the console's lazy portal) and LNet's own (discovery).
    for node in std::iter::once(&client).chain(&servers) {
        let runtime = node.stats().runtime;
        let (shared, declined) = (runtime.core_shared_holds, runtime.core_shared_declined);
        assert!(shared > u64::from(expected) / 2, "{shared} {declined}");
        assert!(declined * 10 < shared, "{shared} {declined}");
    }
    assert_eq!(console.end_session(KEY).unwrap().lst_rc(), 0);
}

/// lnet_selftest's per-partition request buffers: a server with two partitions posts its test
/// services' buffers in each partition's match table of the request portal, and a request is
/// taken by a buffer of the partition that received it, its client's by the NID hash (the
/// clients, 127.0.0.2 and 127.0.0.3, hash apart). Per partition, the requests its buffers took
/// are exactly the requests its client sent; nothing is stolen, dropped, lost or late.
#[test]
fn requests_take_the_buffers_of_their_own_partition() {
    use ulnet::proto::engine::cpt::Partitions;
    use ulnet::proto::wire::selftest::{BrwCheck, BrwDirection, SRPC_REQUEST_PORTAL, SrpcService};
    use ulnet_selftest::console::BrwSpec;
    use ulnet_selftest::{PartitionBuffers, TestKind, TestSpec};

    const KEY: u32 = 2424;
    const LOOPS: i32 = 50;
    const CONCURRENCY: u32 = 4;
    let port = port(6);
    let server = partitioned_node("127.0.0.4", port, 2);
    let clients = [tcp_node("127.0.0.2", port), tcp_node("127.0.0.3", port)];
    let cpt_of =
        |node: &Node| Partitions::new(2).unwrap().cpt_of_nid(&node.process_id().nid, None) as usize;
    assert_ne!(cpt_of(&clients[0]), cpt_of(&clients[1]), "the test needs both partitions");
    let server_service = SelftestService::start(&server).unwrap();
    let client_services: Vec<SelftestService> =
        clients.iter().map(|node| SelftestService::start(node).unwrap()).collect();
    let fresh = PartitionBuffers { posted: 256, total: 256, received: 0 };
    for service in [SrpcService::Brw, SrpcService::Ping] {
        assert_eq!(server_service.request_buffers(service), [fresh, fresh]);
    }
    // A framework service keeps one share, as the kernel's.
    assert_eq!(server_service.request_buffers(SrpcService::Batch).len(), 1);

    let console_node = tcp_node("127.0.0.5", port);
    let console = Console::new(&console_node).unwrap();
    console.new_session(KEY, "buffers", 0, false, 1).unwrap();
    for (group, nodes) in [("c", &clients[..]), ("s", std::slice::from_ref(&server))] {
        console.add_group(KEY, group).unwrap();
        let ids: Vec<_> = nodes.iter().map(Node::process_id).collect();
        assert_eq!(console.add_nodes(KEY, group, &ids).unwrap().lst_rc(), 0);
    }
    console.add_batch(KEY, "b").unwrap();
    let brw =
        BrwSpec { direction: BrwDirection::Write, check: BrwCheck::Full, size: 4096, offset: 0 };
    for kind in [TestKind::Brw(brw), TestKind::Ping] {
        let mut test = TestSpec::new(kind, "c", "s");
        test.batch = "b".into();
        test.loop_count = LOOPS;
        test.concurrency = CONCURRENCY;
        assert_eq!(console.add_test(KEY, &test).unwrap().lst_rc(), 0);
    }
    assert_eq!(console.run_batch(KEY, "b", 0).unwrap().lst_rc(), 0);
    let start = std::time::Instant::now();
    while console.query_batch(KEY, "b", 0, false, 5).unwrap().stat.batch_running() != 0 {
        assert!(start.elapsed() < std::time::Duration::from_secs(120), "the batch never ended");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(console.end_session(KEY).unwrap().lst_rc(), 0);

    let mut sent_by_partition = [0u64; 2];
    for (node, service) in clients.iter().zip(&client_services) {
        let rpc = service.rpc_counters();
        assert_eq!((rpc.errors, rpc.rpcs_dropped, rpc.rpcs_expired), (0, 0, 0), "{rpc:?}");
        assert!(rpc.rpcs_sent >= LOOPS as u32 * CONCURRENCY * 2, "{rpc:?}");
        sent_by_partition[cpt_of(node)] += u64::from(rpc.rpcs_sent);
    }
    let rpc = server_service.rpc_counters();
    assert_eq!((rpc.errors, rpc.rpcs_dropped, rpc.rpcs_expired), (0, 0, 0), "{rpc:?}");
    // Both partitions' threads folded requests in: the state lock was taken and timed.
    let lock = server_service.lock_stats();
    assert!(lock.holds > 0 && lock.held_ns > 0, "{lock:?}");
    let mut taken_by_partition = [0u64; 2];
    for service in [SrpcService::Brw, SrpcService::Ping] {
        for (cpt, share) in server_service.request_buffers(service).iter().enumerate() {
            taken_by_partition[cpt] += share.received;
        }
    }
    assert_eq!(taken_by_partition, sent_by_partition);
    let tables = server.portal_tables(SRPC_REQUEST_PORTAL).unwrap();
    let matched: Vec<(u64, u64)> =
        tables.iter().map(|table| (table.matched, table.stolen)).collect();
    assert_eq!(matched, [(sent_by_partition[0], 0), (sent_by_partition[1], 0)]);
}
