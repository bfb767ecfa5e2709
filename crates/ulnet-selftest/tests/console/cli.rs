//! The typical lst script through the command layer (what `ulst` prints), with two and three
//! test nodes.

use crate::common::{Cluster, ulst};

/// `lnet-selftest.sh`'s smoke run, shortened: write and read with check=full, then stat,
/// stop, show_error with zero errors and end_session.
fn typical_script(cluster: &Cluster, clients: &str, servers: &str, distribute: &str) {
    let ok = |line: &str| {
        let (rc, out, err) = ulst(cluster, line);
        assert_eq!(rc, 0, "{line}: {out}{err}");
        assert_eq!(err, "", "{line}");
        out
    };
    assert_eq!(
        ok("new_session --timeo 100000 hh"),
        "SESSION: hh FEATURES: 1 TIMEOUT: 100000 FORCE: No\n"
    );
    assert_eq!(ok(&format!("add_group c {clients}")), format!("{clients} are added to session\n"));
    assert_eq!(ok(&format!("add_group s {servers}")), format!("{servers} are added to session\n"));
    let listed = ok("list_group s bad_group c");
    assert!(listed.starts_with("\tACTIVE\tBUSY\tDOWN\tUNKNOWN\tTOTAL\n"), "{listed}");
    assert_eq!(ok("add_batch b"), "");
    for test in ["brw write size=4k", "brw read size=1M", "brw write size=256k", "ping"] {
        let line = format!(
            "add_test --batch b --loop 50 --concurrency 2 --distribute {distribute} --from c --to s {test} check=full"
        );
        let line = if test == "ping" { line.replace(" check=full", "") } else { line };
        assert_eq!(ok(&line), "Test was added successfully\n", "{line}");
    }
    assert_eq!(ok("run b"), "b is running now\n");
    let stat = ok("stat --delay 1 --count 1 c s");
    assert!(stat.contains("[LNet Rates of c]") && stat.contains("[LNet Bandwidth of s]"), "{stat}");
    for line in stat.lines().filter(|line| line.starts_with("[R]") || line.starts_with("[W]")) {
        assert!(
            line.split_whitespace().nth(2).is_some_and(|value| value.parse::<f64>().is_ok()),
            "{line}"
        );
    }
    let stopped = ok("stop b");
    assert!(stopped.ends_with("Batch is stopped\n"), "{stopped}");
    let query = ok("query b");
    assert_eq!(query, "b [0] is stopped\n");
    assert_eq!(
        ok("show_error c s"),
        "c:\nTotal 0 error nodes in c\ns:\nTotal 0 error nodes in s\n"
    );
    assert_eq!(ok("end_session"), "");
    let (rc, _, err) = ulst(cluster, "show_session");
    assert_eq!((rc, err.as_str()), (-1, "No session exists\n"));
}

#[test]
fn typical_script_two_nodes() {
    let cluster = Cluster::new(2);
    typical_script(&cluster, "10.0.0.1@tcp", "10.0.0.2@tcp", "1:1");
}

#[test]
fn typical_script_three_nodes() {
    let cluster = Cluster::new(3);
    typical_script(&cluster, "10.0.0.1@tcp", "10.0.0.[2-3]@tcp", "1:2");
}

#[test]
fn typical_script_three_nodes_two_clients() {
    let cluster = Cluster::new(3);
    typical_script(&cluster, "10.0.0.[1-2]@tcp", "10.0.0.3@tcp", "2:1");
}

#[test]
fn list_batch_and_ping_show_the_session() {
    let cluster = Cluster::new(2);
    ulst(&cluster, "new_session s");
    ulst(&cluster, "add_group all 10.0.0.[1-2]@tcp");
    let (rc, out, _) = ulst(&cluster, "ping --group all");
    assert_eq!(rc, 0);
    assert_eq!(
        out,
        "\t12345-10.0.0.1@tcp: Active [session: s id: 10.0.0.200@tcp]\n\
         \t12345-10.0.0.2@tcp: Active [session: s id: 10.0.0.200@tcp]\n"
    );
    let (_, out, _) = ulst(&cluster, "add_test --from all --to all --loop 3 ping");
    assert_eq!(out, "Test was added successfully\n");
    let (_, out, _) = ulst(&cluster, "list_batch batch");
    assert_eq!(
        out,
        "Batch: batch Tests: 1 State: 176\n\tACTIVE\tBUSY\tDOWN\tUNKNOWN\tTOTAL\n\
         client\t2\t0\t0\t0\t2\nserver\t2\t0\t0\t0\t2\n\
         \tTest 1(ping) (loop: 3, concurrency: 1)\n\tACTIVE\tBUSY\tDOWN\tUNKNOWN\tTOTAL\n\
         client\t2\t0\t0\t0\t2\nserver\t2\t0\t0\t0\t2\n"
    );
    let (_, out, _) = ulst(&cluster, "show_session");
    assert!(
        out.starts_with("s ID: ")
            && out.ends_with("@10.0.0.200@tcp, KEY: 4242 FEATURES: 1 NODES: 2\n"),
        "{out}"
    );
    ulst(&cluster, "end_session");
}

#[test]
fn stat_json_carries_latency_percentiles() {
    let cluster = Cluster::new(2);
    ulst(&cluster, "new_session s");
    ulst(&cluster, "add_group c 10.0.0.1@tcp");
    ulst(&cluster, "add_group s 10.0.0.2@tcp");
    ulst(&cluster, "add_test --concurrency 2 --from c --to s ping");
    ulst(&cluster, "run");
    let (rc, out, err) = ulst(&cluster, "--json stat --delay 1 --count 1 c");
    assert_eq!((rc, err.as_str()), (0, ""));
    let line = out.lines().next().unwrap();
    let value: serde_json::Value = serde_json::from_str(line).unwrap();
    assert_eq!(value["group"], "c");
    assert!(value["rpc_rate"]["write"]["avg"].as_f64().unwrap() > 0.0, "{line}");
    let worst = &value["latency_us"]["worst"];
    assert!(worst["count"].as_u64().unwrap() > 0, "{line}");
    assert!(worst["p50_us"].as_u64().unwrap() <= worst["p99_us"].as_u64().unwrap(), "{line}");
    assert!(worst["p99_us"].as_u64().unwrap() <= worst["max_us"].as_u64().unwrap(), "{line}");
    assert_eq!(value["latency_us"]["nodes"][0]["node"], "12345-10.0.0.1@tcp");
    // Plain stat output stays exactly lst's.
    let (_, out, _) = ulst(&cluster, "stat --delay 1 --count 1 c");
    assert!(!out.contains("Latency"), "{out}");
    ulst(&cluster, "stop");
    ulst(&cluster, "end_session");
}

#[test]
fn discard_mode_moves_data_without_errors() {
    let cluster = Cluster::new(2);
    ulst(&cluster, "new_session s");
    ulst(&cluster, "add_group c 10.0.0.1@tcp");
    ulst(&cluster, "add_group s 10.0.0.2@tcp");
    for test in ["brw read size=64k check=discard", "brw write size=64k skip_rx_copy"] {
        let (rc, out, err) =
            ulst(&cluster, &format!("add_test --loop 100 --concurrency 4 --from c --to s {test}"));
        assert_eq!(
            (rc, out.as_str(), err.as_str()),
            (0, "Test was added successfully\n", ""),
            "{test}"
        );
    }
    ulst(&cluster, "run");
    let server = cluster.services[1].as_ref().unwrap();
    // 4 units x 100 loops of each test: the server has moved all the bulk.
    assert!(crate::common::eventually(std::time::Duration::from_secs(20), || {
        let counters = server.rpc_counters();
        counters.bulk_put >= 400 * 65536 && counters.bulk_get >= 400 * 65536
    }));
    let (rc, out, _) = ulst(&cluster, "show_error c s");
    assert_eq!(
        (rc, out.as_str()),
        (0, "c:\nTotal 0 error nodes in c\ns:\nTotal 0 error nodes in s\n")
    );
    ulst(&cluster, "end_session");
}

#[test]
fn sessions_without_bulk_len_use_page_counts() {
    let cluster = Cluster::new(2);
    let run = |line: &str| crate::common::ulst_env(&cluster.console, line, Some("0"));
    assert_eq!(run("new_session old").1, "SESSION: old FEATURES: 0 TIMEOUT: 300 FORCE: No\n");
    run("add_group c 10.0.0.1@tcp");
    run("add_group s 10.0.0.2@tcp");
    let (rc, out, err) = run("add_test --loop 20 --from c --to s brw write size=8k check=full");
    assert_eq!((rc, out.as_str(), err.as_str()), (0, "Test was added successfully\n", ""));
    run("run");
    let server = cluster.services[1].as_ref().unwrap();
    assert_eq!(server.session().unwrap().features, 0);
    assert!(crate::common::eventually(std::time::Duration::from_secs(10), || {
        server.rpc_counters().bulk_get >= 20 * 8192
    }));
    assert_eq!(
        run("show_error c s").1,
        "c:\nTotal 0 error nodes in c\ns:\nTotal 0 error nodes in s\n"
    );
    run("end_session");
}
