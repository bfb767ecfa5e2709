//! The `ulnetctl` binary against a live `ulnetd` process. Every snapshot records the command
//! line, exit status, stdout and stderr.

use crate::support::{Process, SIGTERM};

/// A daemon with only `lo`, one global changed from its default.
const CONFIG: &str = "global:\n    health_sensitivity: 50\n";

fn check(daemon: &Process, name: &str, args: &[&str]) {
    let run = daemon.ulnetctl(args);
    insta::assert_snapshot!(name, run.transcript());
}

fn check_stdin(daemon: &Process, name: &str, args: &[&str], stdin: &str) {
    let run = crate::support::ulnetctl_with_stdin(&daemon.socket, args, stdin);
    insta::assert_snapshot!(name, format!("--- stdin\n{stdin}{}", run.transcript()));
}

fn stop(mut daemon: Process) {
    assert_eq!(daemon.signal_and_wait(SIGTERM), 0);
}

#[test]
fn shows_against_the_live_daemon() {
    let daemon = Process::spawn(Some(CONFIG), &[]);
    check(&daemon, "process_net_show", &["net", "show"]);
    check(&daemon, "process_net_show_v2", &["net", "show", "-v", "2"]);
    check(&daemon, "process_net_show_missing_net", &["net", "show", "--net", "tcp9"]);
    check(&daemon, "process_global_show", &["global", "show"]);
    check(&daemon, "process_stats_show", &["stats", "show"]);
    check(&daemon, "process_peer_show_none", &["peer", "show"]);
    check(&daemon, "process_peer_list_none", &["peer", "list"]);
    check(&daemon, "process_peer_show_unknown", &["peer", "show", "--nid", "10.9.9.9@tcp"]);
    check(&daemon, "process_export", &["export"]);
    check(&daemon, "process_export_backup", &["export", "--backup"]);
    stop(daemon);
}

#[test]
fn set_changes_global_show_and_refusals_keep_lnetctls_shapes() {
    let daemon = Process::spawn(Some(CONFIG), &[]);
    check(&daemon, "process_set_transaction_timeout", &["set", "transaction_timeout", "30"]);
    check(&daemon, "process_set_retry_count", &["set", "retry_count", "3"]);
    check(&daemon, "process_set_discovery", &["set", "discovery", "0"]);
    check(&daemon, "process_global_show_after_set", &["global", "show"]);
    check(&daemon, "process_set_bad_timeout", &["set", "transaction_timeout", "2"]);
    check(&daemon, "process_set_bad_tracking", &["set", "response_tracking", "7"]);
    check(&daemon, "process_set_routing", &["set", "routing", "1"]);
    check(&daemon, "process_set_unparsable", &["set", "retry_count", "many"]);
    check(&daemon, "process_export_backup_after_set", &["export", "--backup"]);
    stop(daemon);
}

#[test]
fn unconfigure_and_configure() {
    let daemon = Process::spawn(Some(CONFIG), &[]);
    check(&daemon, "process_unconfigure", &["lnet", "unconfigure"]);
    check(&daemon, "process_net_show_unconfigured", &["net", "show"]);
    check(&daemon, "process_stats_show_unconfigured", &["stats", "show"]);
    // Global settings are module parameters: readable and settable while LNet is down.
    check(&daemon, "process_set_unconfigured", &["set", "retry_count", "1"]);
    check(&daemon, "process_unconfigure_again", &["lnet", "unconfigure"]);
    check(&daemon, "process_configure", &["lnet", "configure"]);
    check(&daemon, "process_net_show_configured", &["net", "show"]);
    check(&daemon, "process_global_show_configured", &["global", "show"]);
    stop(daemon);
}

#[test]
fn import_applies_globals() {
    let daemon = Process::spawn(Some(CONFIG), &[]);
    let input = "global:\n    max_interfaces: 300\n    recovery_limit: 5\n";
    check_stdin(&daemon, "process_import_globals", &["import"], input);
    check(&daemon, "process_global_show_imported", &["global", "show"]);
    let delete = "global:\n    max_interfaces: 300\n";
    check_stdin(&daemon, "process_import_del_globals", &["import", "--del"], delete);
    check(&daemon, "process_global_show_deleted", &["global", "show"]);
    let refused = "global:\n    health_sensitivity: 2000\n";
    check_stdin(&daemon, "process_import_refused_global", &["import"], refused);
    stop(daemon);
}
