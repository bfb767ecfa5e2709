//! Bad input and failures: no session, unknown names, bad parameters, a node gone mid-batch.

use std::time::{Duration, Instant};

use ulnet::proto::wire::selftest::{BrwCheck, BrwDirection};
use ulnet_selftest::console::BrwSpec;
use ulnet_selftest::{ConsoleError, ServiceConfig, Target, TestKind, TestSpec};

use crate::common::{Cluster, KEY, eventually, ulst};

#[test]
fn no_session() {
    let cluster = Cluster::new(1);
    let console = &cluster.console;
    assert_eq!(console.add_group(KEY, "g"), Err(ConsoleError::NoSession));
    assert_eq!(console.run_batch(KEY, "batch", 0).unwrap_err(), ConsoleError::NoSession);
    assert_eq!(console.session_info().unwrap_err(), ConsoleError::NoSession);
    let (rc, out, err) = ulst(&cluster, "add_group g 10.0.0.1@tcp");
    assert_eq!((rc, out.as_str(), err.as_str()), (-1, "", "No session exists\n"));
    let (rc, _, err) = ulst(&cluster, "stat g");
    assert_eq!((rc, err.as_str()), (-1, "Failed to get count of nodes from g: No such process\n"));
}

#[test]
fn wrong_key_and_second_session() {
    let cluster = Cluster::new(1);
    let console = &cluster.console;
    console.new_session(KEY, "s", 0, false, 1).unwrap();
    assert_eq!(console.add_group(KEY + 1, "g"), Err(ConsoleError::KeyMismatch));
    assert_eq!(console.new_session(KEY, "t", 0, false, 1).unwrap_err(), ConsoleError::Exists);
    let (rc, _, err) = ulst(&cluster, "new_session t");
    assert_eq!((rc, err.as_str()), (-1, "session already exists\n"));
    let (rc, out, _) = ulst(&cluster, "new_session --force t");
    assert_eq!((rc, out.as_str()), (0, "SESSION: t FEATURES: 1 TIMEOUT: 300 FORCE: Yes\n"));
    assert_eq!(console.session_info().unwrap().name, "t");
}

#[test]
fn unknown_group_or_batch() {
    let cluster = Cluster::new(2);
    let console = &cluster.console;
    console.new_session(KEY, "s", 0, false, 1).unwrap();
    console.add_group(KEY, "g").unwrap();
    console.add_nodes(KEY, "g", &cluster.ids(0..2)).unwrap();
    assert_eq!(console.group_nodes(KEY, "nope").unwrap_err(), ConsoleError::NotFound);
    assert_eq!(console.run_batch(KEY, "nope", 0).unwrap_err(), ConsoleError::NotFound);
    let mut spec = TestSpec::new(TestKind::Ping, "g", "nope");
    assert_eq!(console.add_test(KEY, &spec).unwrap_err(), ConsoleError::NotFound);
    spec.to = "g".into();
    spec.batch = "nope".into();
    assert_eq!(console.add_test(KEY, &spec).unwrap_err(), ConsoleError::NotFound);
    let (rc, _, err) = ulst(&cluster, "run nope");
    assert_eq!(
        (rc, err.as_str()),
        (-1, "Failed to get count of nodes from nope: No such file or directory\n")
    );
    let (rc, _, err) = ulst(&cluster, "add_test --batch nope --from g --to g ping");
    assert_eq!((rc, err.as_str()), (-1, "Can't find test in current session\n"));
    let (rc, _, err) = ulst(&cluster, "del_group nope");
    assert_eq!((rc, err.as_str()), (-1, "Can't find group in current session\n"));
    let (rc, _, err) = ulst(&cluster, "add_group g 10.0.0.1@tcp");
    assert_eq!((rc, err.as_str()), (-1, "group already exists\n"));
}

#[test]
fn bad_size_and_span() {
    let cluster = Cluster::new(2);
    let console = &cluster.console;
    console.new_session(KEY, "s", 0, false, 1).unwrap();
    console.add_group(KEY, "g").unwrap();
    console.add_nodes(KEY, "g", &cluster.ids(0..2)).unwrap();
    let brw = |size| {
        TestKind::Brw(BrwSpec {
            direction: BrwDirection::Write,
            check: BrwCheck::None,
            size,
            offset: 0,
        })
    };
    assert_eq!(
        console.add_test(KEY, &TestSpec::new(brw(2 << 20), "g", "g")).unwrap_err(),
        ConsoleError::Invalid
    );
    let (rc, _, err) = ulst(&cluster, "add_test --from g --to g brw size=2m");
    assert_eq!(
        (rc, err.as_str()),
        (-1, "Size exceed limitation: 2097152 bytes\nFailed to add test (brw)\n")
    );
    // A span past the server group: EINVAL from the console.
    let (rc, _, err) = ulst(&cluster, "add_test --distribute 1:3 --from g --to g ping");
    assert_eq!((rc, err.as_str()), (-1, "Invalid parameters list in command line\n"));
}

#[test]
fn bad_nid_expression() {
    let cluster = Cluster::new(1);
    ulst(&cluster, "new_session s");
    let (rc, out, err) = ulst(&cluster, "add_group g 10.0.0.[1-@tcp");
    assert_eq!(rc, 0, "lst returns what deleting the empty group returned");
    assert_eq!(
        err,
        "Syntax error in \"10.0.0.[1-@tcp\"\nIgnore invalid id list 10.0.0.[1-@tcp\n\
         No nodes added successfully, deleting group g\n"
    );
    assert_eq!(out, "Group is deleted\n");
    let (_, out, _) = ulst(&cluster, "list_group");
    assert_eq!(out, "Total 0 groups\n");
    let (_, _, err) = ulst(&cluster, "add_group g 10.0.0.1@nosuchnet");
    assert!(err.starts_with("Invalid nid: 10.0.0.1@nosuchnet\n"), "{err}");
}

#[test]
fn unreachable_node_is_down_and_the_group_goes() {
    let cluster = Cluster::new(1);
    ulst(&cluster, "new_session s");
    let started = Instant::now();
    let (rc, out, err) = ulst(&cluster, "add_group g 10.0.0.77@tcp");
    assert!(started.elapsed() < Duration::from_secs(30), "the console hung");
    assert_eq!(rc, -2);
    assert!(err.starts_with("create session RPC failed on 12345-10.0.0.77@tcp: "), "{err}");
    assert!(err.contains("No nodes added successfully, deleting group g\n"), "{err}");
    assert_eq!(out, "Group is deleted\n");
}

#[test]
fn node_killed_mid_batch() {
    // A short rpc_timeout: RPCs in flight to the dead node expire quickly.
    let config =
        ServiceConfig { rpc_timeout: Some(Duration::from_secs(2)), ..ServiceConfig::default() };
    let mut cluster = Cluster::with_config(3, config);
    let ok = |cluster: &Cluster, line: &str| {
        let (rc, out, err) = ulst(cluster, line);
        assert_eq!(rc, 0, "{line}: {out}{err}");
    };
    ok(&cluster, "new_session s");
    ok(&cluster, "add_group c 10.0.0.1@tcp");
    ok(&cluster, "add_group s 10.0.0.[2-3]@tcp");
    ok(
        &cluster,
        "add_test --distribute 1:2 --concurrency 4 --from c --to s brw write size=64k check=simple",
    );
    ok(&cluster, "run");
    let target = Target::Group("s".into());
    let console = &cluster.console;
    // Killed mid-batch means once traffic flows to it: both servers have moved bulk. Killed
    // earlier, while the client's discovery of it waits for the ACK of its push, the client's
    // first RPCs stay held by discovery until the push times out (the transaction timeout),
    // as in LNet: an unlinked MD's message is cancelled only when it leaves discovery
    // (lustre: lib-move.c lnet_post_send_locked()).
    assert!(eventually(Duration::from_secs(10), || {
        let stat = console.stat(KEY, &target, 5).unwrap();
        stat.entries.len() == 2
            && stat.entries.iter().all(|entry| entry.rpc_errno == 0 && server_bulk(entry) > 0)
    }));
    cluster.kill(2);
    let started = Instant::now();
    let clients = Target::Group("c".into());
    let mut last = None;
    let seen = eventually(Duration::from_secs(20), || {
        let stat = cluster.console.stat(KEY, &clients, 5).unwrap();
        let errors = console_errors(&stat);
        last = Some(stat);
        errors > 0
    });
    assert!(
        seen,
        "no client error 20 s after the kill; last stat: {last:#?}\nclient node: {:#?}\nfabric: {:?}",
        cluster.nodes[0].stats(),
        cluster.fabric().stats()
    );
    // The client counts errors (its RPCs to the dead server fail, and it stops on error).
    let (rc, out, err) = ulst(&cluster, "show_error c s");
    assert_eq!(rc, -2, "{out}{err}");
    assert!(out.contains("Total 1 error nodes in c\n"), "{out}");
    assert!(out.contains("Total 1 error nodes in s\n"), "{out}");
    assert!(err.contains("RPC failure, can't show error on 12345-10.0.0.3@tcp\n"), "{err}");
    assert!(err.contains("12345-10.0.0.1@tcp: [Session "), "{err}");
    assert!(err.contains(" expired]\n"), "{err}");
    let (_, out, _) = ulst(&cluster, "list_group --all s");
    assert!(out.contains("\t12345-10.0.0.2@tcp: Active\n"), "{out}");
    // A fast failure (not a timeout) leaves the node's state as it was, as in the kernel;
    // lst shows the session as unknown.
    let (rc, out, _) = ulst(&cluster, "ping --group s");
    assert_eq!(rc, -2);
    assert!(
        out.contains("12345-10.0.0.3@tcp: Active [session: Unknown id: LNET_NID_ANY]"),
        "{out}"
    );
    let (rc, _, _) = ulst(&cluster, "stop");
    assert!(rc == 0 || rc == -2);
    assert!(started.elapsed() < Duration::from_secs(60), "the console hung");
    ulst(&cluster, "end_session");
}

/// The bulk bytes a server's stat reply counts (GETs for brw write).
fn server_bulk(entry: &ulnet_selftest::console::RpcEntry) -> u64 {
    match &entry.reply {
        Some(ulnet::proto::wire::selftest::SrpcBody::StatReply(stat)) => stat.rpc.bulk_get,
        _ => 0,
    }
}

fn console_errors(result: &ulnet_selftest::console::TransResult) -> u32 {
    result
        .entries
        .iter()
        .map(|entry| match &entry.reply {
            Some(ulnet::proto::wire::selftest::SrpcBody::StatReply(stat)) => {
                stat.framework.brw_errors
            }
            _ => 0,
        })
        .sum()
}

#[test]
fn a_test_past_the_bulk_budget_counts_errors_and_memory_stays_within_it() {
    // Room for four 64 KiB transfers: a read test at concurrency 8 cannot have all its sinks
    // charged; the units without one end with an error, as the kernel's do when they cannot
    // allocate an RPC.
    let budget = 4 * 64 * 1024;
    let cluster = Cluster::with_config(2, ServiceConfig::default().with_bulk_budget(budget));
    let ok = |line: &str| {
        let (rc, out, err) = ulst(&cluster, line);
        assert_eq!(rc, 0, "{line}: {out}{err}");
    };
    ok("new_session budget");
    ok("add_group c 10.0.0.1@tcp");
    ok("add_group s 10.0.0.2@tcp");
    ok("add_test --concurrency 8 --from c --to s brw read size=64k check=simple");
    ok("run");
    let within = |index: usize| {
        let usage = cluster.services[index].as_ref().unwrap().buffer_usage();
        assert!(usage.charged + usage.spare <= usage.budget, "node {index}: {usage:?}");
        usage.refused
    };
    let clients = Target::Group("c".into());
    assert!(eventually(Duration::from_secs(30), || {
        let refused = within(0);
        within(1);
        let stat = cluster.console.stat(KEY, &clients, 5).unwrap();
        console_errors(&stat) > 0 && refused > 0
    }));
    ok("stop");
    within(0);
    within(1);
    // Some units ran: the budget refuses the excess, not everything.
    let stat = cluster.console.stat(KEY, &Target::Group("s".into()), 5).unwrap();
    let moved: u64 = stat
        .entries
        .iter()
        .map(|entry| match &entry.reply {
            Some(ulnet::proto::wire::selftest::SrpcBody::StatReply(stat)) => stat.rpc.bulk_put,
            _ => 0,
        })
        .sum();
    assert!(moved > 0, "no READ data moved");
    ulst(&cluster, "end_session");
}
