//! Argument parsing, messages and exit codes of the command layer, against a recording
//! back end (no network).

use std::cell::RefCell;

use super::*;
use crate::console::{BatchInfo, SessionInfo, TransResult};

/// `new_session`'s arguments: key, name, timeout, force, features.
type NewSession = (u32, String, u32, bool, u32);

/// Records what the command layer asked for and answers with canned results.
#[derive(Default)]
struct Recorder {
    calls: RefCell<Vec<String>>,
    test: RefCell<Option<TestSpec>>,
    session: RefCell<Option<NewSession>>,
    stat_targets: RefCell<Vec<Target>>,
    /// Each stat call answers one node whose counters grow by 1 MiB and 1000 messages.
    stat_samples: RefCell<u32>,
}

impl Recorder {
    fn note(&self, call: &str) {
        self.calls.borrow_mut().push(call.to_string());
    }
}

fn info() -> SessionInfo {
    SessionInfo {
        name: "s".into(),
        key: 7,
        features: 1,
        nid: Nid::from_str_radix_nid4("10.0.0.9@tcp"),
        stamp: 1234,
        timeout_seconds: 300,
        force: false,
        nodes: 2,
    }
}

trait Nid4 {
    fn from_str_radix_nid4(text: &str) -> u64;
}

impl Nid4 for Nid {
    fn from_str_radix_nid4(text: &str) -> u64 {
        text.parse::<Nid>().unwrap().to_nid4().unwrap()
    }
}

impl Backend for Recorder {
    fn new_session(
        &self,
        key: u32,
        name: &str,
        timeout: u32,
        force: bool,
        features: u32,
    ) -> Result<SessionInfo, ConsoleError> {
        self.note("new_session");
        *self.session.borrow_mut() = Some((key, name.to_string(), timeout, force, features));
        Ok(info())
    }
    fn end_session(&self, _: u32) -> Result<TransResult, ConsoleError> {
        self.note("end_session");
        Ok(TransResult::default())
    }
    fn session_info(&self) -> Result<SessionInfo, ConsoleError> {
        Ok(info())
    }
    fn debug(&self, _: u32, _: &Target, _: u32) -> Result<TransResult, ConsoleError> {
        self.note("debug");
        Ok(TransResult::default())
    }
    fn add_group(&self, _: u32, name: &str) -> Result<(), ConsoleError> {
        self.note(&format!("add_group {name}"));
        Ok(())
    }
    fn add_nodes(&self, _: u32, _: &str, ids: &[ProcessId]) -> Result<TransResult, ConsoleError> {
        self.note(&format!("add_nodes {}", ids.len()));
        Ok(TransResult { features: 1, ..TransResult::default() })
    }
    fn del_group(&self, _: u32, name: &str) -> Result<TransResult, ConsoleError> {
        self.note(&format!("del_group {name}"));
        Ok(TransResult::default())
    }
    fn update_group(
        &self,
        _: u32,
        _: &str,
        update: &GroupUpdate,
    ) -> Result<TransResult, ConsoleError> {
        self.note(&format!("update_group {update:?}"));
        Ok(TransResult::default())
    }
    fn groups(&self, _: u32) -> Result<Vec<String>, ConsoleError> {
        Ok(vec!["c".into(), "s".into()])
    }
    fn group_nodes(&self, _: u32, name: &str) -> Result<Vec<(ProcessId, NodeState)>, ConsoleError> {
        match name {
            "c" | "s" => {
                Ok(vec![(ProcessId::lustre("10.0.0.1@tcp".parse().unwrap()), NodeState::Active)])
            }
            _ => Err(ConsoleError::NotFound),
        }
    }
    fn add_batch(&self, _: u32, name: &str) -> Result<(), ConsoleError> {
        self.note(&format!("add_batch {name}"));
        Ok(())
    }
    fn batches(&self, _: u32) -> Result<Vec<String>, ConsoleError> {
        Ok(vec!["batch".into()])
    }
    fn batch_info(&self, _: u32, name: &str, _: u32) -> Result<BatchInfo, ConsoleError> {
        if name != "batch" && name != "b" {
            return Err(ConsoleError::NotFound);
        }
        Ok(BatchInfo {
            clients: NodeCounts::default(),
            servers: NodeCounts::default(),
            tests: 0,
            state: crate::console::BATCH_IDLE,
            test: None,
        })
    }
    fn batch_nodes(
        &self,
        _: u32,
        _: &str,
        _: u32,
        _: bool,
    ) -> Result<Vec<(ProcessId, NodeState)>, ConsoleError> {
        Ok(Vec::new())
    }
    fn add_test(&self, _: u32, spec: &TestSpec) -> Result<TransResult, ConsoleError> {
        self.note("add_test");
        *self.test.borrow_mut() = Some(spec.clone());
        Ok(TransResult::default())
    }
    fn run_batch(&self, _: u32, name: &str, _: u32) -> Result<TransResult, ConsoleError> {
        self.note(&format!("run {name}"));
        Ok(TransResult::default())
    }
    fn stop_batch(&self, _: u32, name: &str, force: bool) -> Result<TransResult, ConsoleError> {
        self.note(&format!("stop {name} {force}"));
        Ok(TransResult::default())
    }
    fn query_batch(
        &self,
        _: u32,
        _: &str,
        _: u32,
        _: bool,
        _: u32,
    ) -> Result<TransResult, ConsoleError> {
        Ok(TransResult::default())
    }
    fn stat(&self, _: u32, target: &Target, _: u32) -> Result<TransResult, ConsoleError> {
        self.stat_targets.borrow_mut().push(target.clone());
        let mut samples = self.stat_samples.borrow_mut();
        *samples += 1;
        let n = *samples;
        let lnet = ulnet::proto::wire::selftest::LnetCountersCommon {
            send_count: 1000 * n,
            receive_count: 1000 * n,
            send_length: u64::from(n) << 20,
            receive_length: u64::from(n) << 20,
            ..Default::default()
        };
        let reply = ulnet::proto::wire::selftest::StatReply {
            status: 0,
            session: ulnet::proto::wire::selftest::SessionId::NONE,
            framework: ulnet::proto::wire::selftest::SfwCounters {
                running_ms: 1000 * n,
                ..Default::default()
            },
            rpc: Default::default(),
            lnet,
        };
        let entry = RpcEntry {
            peer: ProcessId::lustre("10.0.0.1@tcp".parse().unwrap()),
            state: NodeState::Active,
            rpc_errno: 0,
            framework_errno: 0,
            session: ulnet::proto::wire::selftest::SessionId::NONE,
            reply: Some(SrpcBody::StatReply(reply)),
            ulnet: false,
            latency: None,
        };
        Ok(TransResult { entries: vec![entry], ..TransResult::default() })
    }
}

/// Runs `line` with `LST_SESSION=7` unless `env` says otherwise.
fn run_with(backend: &dyn Backend, env: &Env, line: &str) -> (i32, String, String) {
    run_on(backend, env, line, false)
}

fn run_on(backend: &dyn Backend, env: &Env, line: &str, terminal: bool) -> (i32, String, String) {
    run_captured(line, env, backend, terminal)
}

/// Runs `line` and checks it fails (-1) with exactly `err` on stderr.
fn assert_fails(backend: &Recorder, line: &str, err: &str) {
    let (rc, _, actual) = run_line(backend, line);
    assert_eq!((rc, actual.as_str()), (-1, err), "lst {line}");
}

fn keyed() -> Env {
    Env { session: Some("7".into()), features: None }
}

fn run_line(backend: &Recorder, line: &str) -> (i32, String, String) {
    run_with(backend, &keyed(), line)
}

#[test]
fn add_test_parses_every_option() {
    let backend = Recorder::default();
    let (rc, out, err) = run_line(
        &backend,
        "add_test --batch b --loop 100 --concurrency 8 --distribute 2:3 --from c --to s \
         brw write size=1M check=full off=64",
    );
    assert_eq!((rc, out.as_str(), err.as_str()), (0, "Test was added successfully\n", ""));
    let spec = backend.test.borrow().clone().unwrap();
    assert_eq!(
        spec,
        TestSpec {
            batch: "b".into(),
            kind: TestKind::Brw(BrwSpec {
                direction: BrwDirection::Write,
                check: BrwCheck::Full,
                size: 1 << 20,
                offset: 64,
            }),
            loop_count: 100,
            concurrency: 8,
            distribute: 2,
            span: 3,
            from: "c".into(),
            to: "s".into(),
        }
    );
}

#[test]
fn add_test_defaults_and_abbreviated_options() {
    let backend = Recorder::default();
    let (rc, _, _) = run_line(&backend, "add_test --conc 4 --fr c --to s brw");
    assert_eq!(rc, 0);
    let spec = backend.test.borrow().clone().unwrap();
    assert_eq!(spec.batch, "batch");
    assert_eq!((spec.loop_count, spec.concurrency, spec.distribute, spec.span), (-1, 4, 1, 1));
    assert_eq!(spec.kind, TestKind::Brw(BrwSpec::default()));
    let (rc, _, _) = run_line(&backend, "add_test --from c --to s PING");
    assert_eq!(rc, 0);
    assert_eq!(backend.test.borrow().as_ref().unwrap().kind, TestKind::Ping);
}

#[test]
fn brw_size_suffixes_and_bases() {
    let backend = Recorder::default();
    for (text, size) in [("size=4k", 4096), ("s=8K", 8192), ("size=0x1000", 4096), ("size=010", 8)]
    {
        let (rc, _, err) = run_line(&backend, &format!("add_test --from c --to s brw {text}"));
        assert_eq!((rc, err.as_str()), (0, ""), "{text}");
        let Some(TestKind::Brw(brw)) = backend.test.borrow().as_ref().map(|s| s.kind) else {
            panic!()
        };
        assert_eq!(brw.size, size, "{text}");
    }
}

#[test]
fn bad_size_is_refused_with_lsts_message() {
    let backend = Recorder::default();
    assert_fails(
        &backend,
        "add_test --from c --to s brw size=0",
        "Invalid size 0\nFailed to add test (brw)\n",
    );
    assert_fails(
        &backend,
        "add_test --from c --to s brw size=2M",
        "Size exceed limitation: 2097152 bytes\nFailed to add test (brw)\n",
    );
    assert!(backend.test.borrow().is_none());
}

#[test]
fn bad_check_and_offset_are_refused() {
    let backend = Recorder::default();
    assert_fails(
        &backend,
        "add_test --from c --to s brw check=none",
        "Unknow flag none\nFailed to add test (brw)\n",
    );
    let (rc, _, err) = run_line(&backend, "add_test --from c --to s brw off=12");
    assert_eq!(rc, -1);
    assert!(
        err.starts_with("Invalid offset 12/12, it should be postive value and multiple of 8\n")
    );
    assert_fails(
        &backend,
        "add_test --from c --to s brw check=full skip_rx_copy",
        "skip_rx_copy conflicts with check=\nFailed to add test (brw)\n",
    );
    assert_fails(
        &backend,
        "add_test --from c --to s brw bogus",
        "Unknow parameter: bogus\nFailed to add test (brw)\n",
    );
}

#[test]
fn bad_concurrency_and_distribution() {
    let backend = Recorder::default();
    assert_fails(
        &backend,
        "add_test --concurrency 2000 --from c --to s ping",
        "Invalid concurrency of test: 2000\n",
    );
    assert_fails(
        &backend,
        "add_test --distribute 3 --from c --to s ping",
        "Invalid distribution: 3\n",
    );
    assert_fails(
        &backend,
        "add_test --from c --to s dance",
        "Unknow test name dance\nFailed to add test (dance)\n",
    );
}

#[test]
fn unknown_group_in_add_test() {
    let backend = Recorder::default();
    assert_fails(
        &backend,
        "add_test --from nosuch --to s ping",
        "Can't get count of nodes from nosuch: No such file or directory\n",
    );
}

#[test]
fn missing_from_prints_usage_and_returns_zero() {
    let backend = Recorder::default();
    let (rc, out, err) = run_line(&backend, "add_test --to s ping");
    assert_eq!((rc, out.as_str()), (0, ""));
    assert!(err.starts_with("add_test: Usage: lst add_test [--batch BATCH]"), "{err}");
}

#[test]
fn unknown_option_prints_getopts_diagnostic_then_usage() {
    let backend = Recorder::default();
    let (rc, _, err) = run_line(&backend, "run --frobnicate");
    assert_eq!(rc, 0);
    assert_eq!(
        err,
        "run: unrecognized option '--frobnicate'\nrun: Usage: lst run [--timeout TIME] [NAME]\n"
    );
}

#[test]
fn no_session_key_is_refused() {
    let backend = Recorder::default();
    for line in ["end_session", "add_group g 10.0.0.1@tcp", "stat g", "run", "add_batch b"] {
        let (rc, _, err) = run_with(&backend, &Env::default(), line);
        assert_eq!((rc, err.as_str()), (-1, "Can't find env LST_SESSION or value is not valid\n"));
    }
    let (rc, _, err) =
        run_with(&backend, &Env { session: Some("abc".into()), features: None }, "run");
    assert_eq!((rc, err.as_str()), (-1, "Can't find env LST_SESSION or value is not valid\n"));
    assert!(backend.calls.borrow().is_empty());
}

#[test]
fn unsupported_features_are_refused() {
    let backend = Recorder::default();
    let env = Env { session: Some("7".into()), features: Some("3".into()) };
    let (rc, _, err) = run_with(&backend, &env, "show_session");
    assert_eq!(rc, -1);
    assert_eq!(err, "Unsupported session features 2, only support these features so far: 1\n");
}

#[test]
fn new_session_prints_lsts_line() {
    let backend = Recorder::default();
    let (rc, out, _) = run_line(&backend, "new_session --timeo 100000 hh");
    assert_eq!((rc, out.as_str()), (0, "SESSION: hh FEATURES: 1 TIMEOUT: 100000 FORCE: No\n"));
    assert_eq!(backend.session.borrow().clone(), Some((7, "hh".into(), 100000, false, 1)));
    let env = Env { session: Some("7".into()), features: Some("0".into()) };
    let (rc, out, _) = run_with(&backend, &env, "new_session --force x");
    assert_eq!((rc, out.as_str()), (0, "SESSION: x FEATURES: 0 TIMEOUT: 300 FORCE: Yes\n"));
}

#[test]
fn new_session_refuses_bad_input() {
    let backend = Recorder::default();
    assert_fails(&backend, "new_session --timeout 0 x", "Invalid timeout value\n");
    let long = "n".repeat(32);
    let (rc, _, err) = run_line(&backend, &format!("new_session {long}"));
    assert_eq!((rc, err.as_str()), (-1, "Name size is limited to 31\n"));
    let (rc, _, err) = run_line(&backend, "new_session a b");
    assert_eq!(rc, 0);
    assert!(err.starts_with("new_session: Usage: lst new_session"));
}

#[test]
fn show_session_line() {
    let backend = Recorder::default();
    let (rc, out, _) = run_line(&backend, "show_session");
    assert_eq!((rc, out.as_str()), (0, "s ID: 1234@10.0.0.9@tcp, KEY: 7 FEATURES: 1 NODES: 2\n"));
}

#[test]
fn add_group_with_a_bad_nid_expression() {
    let backend = Recorder::default();
    let (rc, out, err) = run_line(&backend, "add_group g 10.0.0.[1-2@tcp");
    assert_eq!(
        err,
        "Syntax error in \"10.0.0.[1-2@tcp\"\nIgnore invalid id list 10.0.0.[1-2@tcp\n\
         No nodes added successfully, deleting group g\n"
    );
    assert_eq!(out, "Group is deleted\n");
    // lst returns what deleting the group returned.
    assert_eq!(rc, 0);
    assert_eq!(backend.calls.borrow().clone(), ["add_group g", "del_group g"]);
}

#[test]
fn add_group_adds_each_expression() {
    let backend = Recorder::default();
    let (rc, out, err) = run_line(&backend, "add_group servers 10.0.0.[1-3]@tcp 10.0.1.1@tcp");
    assert_eq!((rc, err.as_str()), (0, ""));
    assert_eq!(out, "10.0.0.[1-3]@tcp are added to session\n10.0.1.1@tcp are added to session\n");
    assert_eq!(backend.calls.borrow().clone(), ["add_group servers", "add_nodes 3", "add_nodes 1"]);
}

#[test]
fn update_group_options() {
    let backend = Recorder::default();
    assert_eq!(run_line(&backend, "update_group --clean invalid g").0, 0);
    assert_eq!(run_line(&backend, "update_group --remove 10.0.0.1@tcp c").0, 0);
    assert_eq!(
        backend.calls.borrow().clone(),
        ["update_group Clean(14)", "update_group Remove([ProcessId(12345-10.0.0.1@tcp)])"]
    );
    // Two operations at once, or a bad state: usage.
    let (rc, _, err) = run_line(&backend, "update_group --refresh --clean busy g");
    assert_eq!(rc, 0);
    assert!(err.contains("Usage: lst update_group"));
    let (_, _, err) = run_line(&backend, "update_group --clean sleepy g");
    assert!(err.contains("Usage: lst update_group"));
}

#[test]
fn list_group_skips_unknown_groups() {
    let backend = Recorder::default();
    let (rc, out, _) = run_line(&backend, "list_group s bad_group c");
    assert_eq!(rc, 0);
    assert_eq!(
        out,
        "\tACTIVE\tBUSY\tDOWN\tUNKNOWN\tTOTAL\n\t1\t0\t0\t0\t1\ts\n\t1\t0\t0\t0\t1\tc\n"
    );
    let (_, out, _) = run_line(&backend, "list_group");
    assert_eq!(out, "1) c\n2) s\nTotal 2 groups\n");
    let (_, out, _) = run_line(&backend, "list_group --active c");
    assert_eq!(out, "Group [ c ]\n\t12345-10.0.0.1@tcp: Active\nTotal 1 nodes [ c ]\n");
}

#[test]
fn stat_options_and_targets() {
    let backend = Recorder::default();
    let (rc, _, _) = run_line(&backend, "stat --count 1 --delay 1 c 10.0.0.[1-2]@tcp");
    assert_eq!(rc, 0);
    let targets = backend.stat_targets.borrow().clone();
    // Two samples (one primes), two targets each.
    assert_eq!(targets.len(), 4);
    assert_eq!(targets[0], Target::Group("c".into()));
    assert!(matches!(&targets[1], Target::Nodes(ids) if ids.len() == 2));
    assert_fails(&backend, "stat --delay 0 c", "Invalid timeout or delay value\n");
    assert_fails(&backend, "stat --count -2 c", "Invalid count value\n");
}

#[test]
fn run_stop_query_default_to_batch() {
    let backend = Recorder::default();
    let (rc, out, _) = run_line(&backend, "run");
    assert_eq!((rc, out.as_str()), (0, "batch is running now\n"));
    let (rc, out, _) = run_line(&backend, "stop --force");
    assert_eq!((rc, out.as_str()), (0, "Batch is stopped\n"));
    let (rc, out, _) = run_line(&backend, "query");
    assert_eq!((rc, out.as_str()), (0, "batch [0] is stopped\n"));
    assert_fails(
        &backend,
        "run nosuch",
        "Failed to get count of nodes from nosuch: No such file or directory\n",
    );
    assert_eq!(backend.calls.borrow().clone(), ["run batch", "stop batch true"]);
}

#[test]
fn list_batch_tables() {
    let backend = Recorder::default();
    let (_, out, _) = run_line(&backend, "list_batch");
    assert_eq!(out, "1) batch\nTotal 1 batches\n");
    let (_, out, _) = run_line(&backend, "list_batch batch");
    assert_eq!(
        out,
        "Batch: batch Tests: 0 State: 176\n\tACTIVE\tBUSY\tDOWN\tUNKNOWN\tTOTAL\n\
         client\t0\t0\t0\t0\t0\nserver\t0\t0\t0\t0\t0\n"
    );
    assert_fails(&backend, "list_batch --test 0 batch", "Invalid test id, test id starts from 1\n");
}

#[test]
fn dispatcher_words() {
    let backend = Recorder::default();
    assert_fails(
        &backend,
        "frobnicate",
        "lst: 'frobnicate' is not a valid command. See 'lst --list-commands'.\n",
    );
    let (rc, _, err) = run_line(&backend, "help stat");
    assert_eq!(rc, 0);
    assert!(err.starts_with("stat: Usage: lst stat [--bw]"));
    let (rc, out, _) = run_line(&backend, "--list-commands");
    assert_eq!(rc, 0);
    assert!(out.contains("new_session") && out.contains("add_test"));
}

#[test]
fn show_error_without_errors() {
    let backend = Recorder::default();
    let (rc, out, err) = run_line(&backend, "show_error c s");
    assert_eq!((rc, err.as_str()), (0, ""));
    assert_eq!(out, "c:\nTotal 0 error nodes in c\ns:\nTotal 0 error nodes in s\n");
}

#[test]
fn c_number_parsing() {
    assert_eq!(atoi("  42abc"), 42);
    assert_eq!(atoi("-7"), -7);
    assert_eq!(atoi("x"), 0);
    assert_eq!(strtol("0x1f", 16).0, 31);
    assert_eq!(strtol("1f", 16).0, 31);
    assert_eq!(strtol("0x10k", 0), (16, "k"));
    assert_eq!(strtol("017", 0).0, 15);
    assert_eq!(strtol("4k", 0), (4, "k"));
}

#[test]
fn strerror_texts() {
    assert_eq!(strerror(110), "Connection timed out");
    assert_eq!(strerror(9999), "Unknown error 9999");
}

#[test]
fn stat_prints_lsts_lines_and_redraws_on_a_terminal() {
    let backend = Recorder::default();
    let (rc, out, _) = run_line(&backend, "stat --delay 1 --count 2 c");
    assert_eq!(rc, 0);
    let block = "[LNet Rates of c]\n\
        [R] Avg: 1000     RPC/s Min: 1000     RPC/s Max: 1000     RPC/s\n\
        [W] Avg: 1000     RPC/s Min: 1000     RPC/s Max: 1000     RPC/s\n\
        [LNet Bandwidth of c]\n\
        [R] Avg: 1.00     MiB/s Min: 1.00     MiB/s Max: 1.00     MiB/s \n\
        [W] Avg: 1.00     MiB/s Min: 1.00     MiB/s Max: 1.00     MiB/s \n";
    assert_eq!(out, format!("{block}{block}"));

    let backend = Recorder::default();
    let (rc, out, _) = run_on(&backend, &keyed(), "stat --delay 1 --count 2 c", true);
    assert_eq!(rc, 0);
    let (first, second) =
        out.split_once("\x1b[7A\x1b[J").expect("second report redrawn over the first");
    assert!(first.starts_with(block) && first.contains("-- sample 1, "), "{first}");
    assert!(second.starts_with(block) && second.contains("-- sample 2, "), "{second}");
}

#[test]
fn stat_stops_when_cancelled() {
    let backend = Recorder::default();
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    let cancelled = || true;
    let mut io =
        Io { stdout: &mut stdout, stderr: &mut stderr, terminal: false, cancelled: &cancelled };
    let args = ["lst", "stat", "c"].map(str::to_string).to_vec();
    let started = std::time::Instant::now();
    assert_eq!(run(args, &keyed(), &backend, &mut io), 0);
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    assert_eq!(*backend.stat_samples.borrow(), 1, "only the priming sample");
}
