//! End-to-end: the `ulnetctl` binary against a control server over an in-memory node.
//! Every snapshot records the command line, exit status, stdout and stderr.

#![allow(clippy::unwrap_used)] // Test helpers outside #[test] functions.

mod support;

use support::{Daemon, State, run_ulnetctl};

/// Runs `args` and checks the transcript against the snapshot `name`.
fn check(daemon: &Daemon, name: &str, args: &[&str]) {
    let run = daemon.run(args);
    insta::assert_snapshot!(name, run.transcript());
}

fn check_stdin(daemon: &Daemon, name: &str, args: &[&str], stdin: &str) {
    let run = daemon.run_with_stdin(args, stdin);
    insta::assert_snapshot!(name, format!("--- stdin\n{stdin}{}", run.transcript()));
}

fn configured() -> Daemon {
    Daemon::start(State::configured())
}

// ---------------------------------------------------------------------------------------------
// The dispatcher: built-in words, groups, unknown words, the shell.

#[test]
fn help_and_command_lists() {
    let d = configured();
    check(&d, "help", &["help"]);
    check(&d, "help_net", &["help", "net"]);
    check(&d, "help_prefix", &["help", "ne"]);
    check(&d, "help_ambiguous", &["help", "s"]);
    check(&d, "help_joined_words", &["help", "net", "show"]);
    check(&d, "list_commands", &["--list-commands"]);
    check(&d, "group_list_commands", &["net", "--list-commands"]);
    check(&d, "group_help_word", &["net", "help"]);
}

#[test]
fn version() {
    let d = configured();
    let run = d.run(&["--version"]);
    assert_eq!(run.stdout, format!("ulnetctl {}\n", env!("CARGO_PKG_VERSION")));
    assert_eq!(run.code, 0);
}

#[test]
fn unknown_words() {
    let d = configured();
    check(&d, "unknown_command", &["frobnicate"]);
    check(&d, "unknown_option_at_top", &["--frobnicate"]);
    check(&d, "unknown_subcommand", &["net", "frobnicate"]);
    check(&d, "abbreviated_subcommand", &["net", "sh"]);
    check(&d, "group_without_subcommand", &["net"]);
    check(&d, "set_without_parameter", &["set"]);
    check(&d, "group_help_option", &["peer", "-h"]);
    check(&d, "subcommand_help_option", &["net", "show", "--help"]);
    check(&d, "subcommand_help_prefix", &["net", "show", "--he"]);
}

/// `cpt-of-nid`: the byte sums 373 (192.168.1.10@tcp) and 14 (10.0.0.1@tcp1) over the fake
/// node's two partitions give CPTs 1 and 0; a NID that does not parse is the kernel's
/// "invalid NID"; no NID prints the help.
#[test]
fn cpt_of_nid() {
    let d = configured();
    check(&d, "cpt_of_nid", &["cpt-of-nid", "192.168.1.10@tcp", "10.0.0.1@tcp1"]);
    check(&d, "cpt_of_nid_bad", &["cpt-of-nid", "nonsense"]);
    check(&d, "cpt_of_nid_none", &["cpt-of-nid"]);
}

/// lctl's `list_nids`, `which_nid`, `conn_list` and `get_param`: the fake node has `0@lo` and
/// 192.168.1.2@tcp, no routes, two connections to 192.168.1.3@tcp and two partitions.
#[test]
fn lctl_queries() {
    let d = configured();
    check(&d, "list_nids", &["list_nids"]);
    check(&d, "list_nids_all", &["list_nids", "all"]);
    check(&d, "list_nids_usage", &["list_nids", "a", "b"]);
    check(&d, "list_nids_help", &["list_nids", "-h"]);
    check(&d, "conn_list_help", &["conn_list", "--help"]);
    check(&d, "which_nid_prefers_local", &["which_nid", "192.168.1.9@tcp", "192.168.1.2@tcp"]);
    check(&d, "which_nid_first_of_equals", &["which_nid", "192.168.1.9@tcp", "192.168.1.8@tcp"]);
    check(&d, "which_nid_unreachable", &["which_nid", "10.0.0.1@tcp7", "0@lo"]);
    check(&d, "which_nid_bad", &["which_nid", "192.168.1.9@tcp", "*"]);
    check(&d, "which_nid_usage", &["which_nid"]);
    check(&d, "conn_list", &["conn_list"]);
    check(&d, "conn_list_other_net", &["conn_list", "--net", "tcp1"]);
    check(&d, "conn_list_incompatible", &["conn_list", "--net", "ptlf"]);
    check(&d, "conn_list_bad_net", &["conn_list", "--net", "nonsense"]);
    // The fake node's partitions: CPUs 0 1 4 5 and 2 3 6 7, 21 apart.
    check(&d, "get_param_table", &["get_param", "cpu_partition_table"]);
    check(&d, "get_param_both_no_name", &["get_param", "-n", "cpu_partition_*"]);
    check(&d, "get_param_only_name", &["get_param", "-N", "cpu*"]);
    check(&d, "get_param_missing", &["get_param", "peers", "cpu_partition_distance"]);
    check(&d, "get_param_unsupported", &["get_param", "--yaml", "cpu_partition_table"]);
    check(&d, "get_param_usage", &["get_param"]);
    let down = Daemon::start(State::unconfigured());
    check(&down, "get_param_down", &["get_param", "cpu_partition_table"]);
    check(&down, "list_nids_down", &["list_nids"]);
    check(&down, "which_nid_down", &["which_nid", "192.168.1.9@tcp"]);
    check(&down, "conn_list_down", &["conn_list"]);
}

/// `debug peer`: nothing printed when the node dumped the peer to its log; lnetctl's reports
/// otherwise.
#[test]
fn debug_peer() {
    let d = configured();
    check(&d, "debug_peer", &["debug", "peer", "--nid", "192.168.1.3@tcp"]);
    check(&d, "debug_peer_unknown", &["debug", "peer", "--nid", "192.168.1.9@tcp"]);
    check(&d, "debug_peer_missing_nid", &["debug", "peer"]);
    check(&d, "debug_peer_bad_nid", &["debug", "peer", "--nid", "nonsense"]);
}

/// `debug nidlist`, `service-id`, `setup-mrrouting`: computed or run on this host.
#[test]
fn host_commands() {
    let d = configured();
    check(&d, "debug_nidlist", &["debug", "nidlist", "192.168.[1-3].*@tcp [8-12/2]@gni"]);
    check(
        &d,
        "debug_nidlist_match",
        &["debug", "nidlist", "192.168.[1-3].*@tcp", "192.168.2.7@tcp"],
    );
    check(&d, "debug_nidlist_no_match", &["debug", "nidlist", "[8-12/2]@gni", "9@gni"]);
    check(&d, "debug_nidlist_bad_list", &["debug", "nidlist", "192.168.[3-1].1@tcp"]);
    check(&d, "debug_nidlist_bad_nid", &["debug", "nidlist", "*@tcp", "x@y@z"]);
    check(&d, "debug_nidlist_missing", &["debug", "nidlist"]);
    check(&d, "debug_nidlist_too_many", &["debug", "nidlist", "a", "b", "c"]);
    // No ko2iblnd module on a test host: lnetctl's report and -ENOMSG.
    if !std::path::Path::new("/sys/module/ko2iblnd").exists() {
        check(&d, "service_id_without_ko2iblnd", &["service-id"]);
    }
    // No Lustre scripts on a test host.
    if !std::path::Path::new("/usr/sbin/ksocklnd-config").exists() {
        check(&d, "setup_mrrouting_without_script", &["setup-mrrouting"]);
    }
}

/// `setup-sysctl` with the fake node's `enable_sysctl_setup` at 0 and no backup to restore:
/// nothing to do (the file work is unit-tested in the crate).
#[test]
fn setup_sysctl_disabled() {
    if std::path::Path::new("/etc/lnet-sysctl.bak").exists() {
        return;
    }
    let d = configured();
    check(&d, "setup_sysctl_disabled", &["setup-sysctl"]);
}

#[test]
fn script_on_stdin() {
    let d = configured();
    check_stdin(&d, "shell_abbreviations", &[], "glo show\nstats show\n");
    check_stdin(&d, "shell_stops_at_error", &[], "net show --net o2ib\nglobal show\n");
    check_stdin(&d, "shell_ignore_errors", &[], "ignore_errors\nnet show --net o2ib\npeer list\n");
    check_stdin(&d, "shell_ambiguous_and_unknown", &[], "s\nfrobnicate\nquit\nglobal show\n");
}

// ---------------------------------------------------------------------------------------------
// getopt_long rules through real commands.

#[test]
fn option_parsing() {
    let d = configured();
    check(&d, "prefix_and_level", &["net", "show", "--verb", "2", "--ne", "tcp"]);
    check(&d, "verbose_equals_is_level_1", &["net", "show", "--verbose=3", "--net=tcp"]);
    check(&d, "verbose_word_not_a_number", &["net", "show", "-v", "x", "--net", "tcp"]);
    check(&d, "options_after_arguments", &["peer", "show", "--nid", "192.168.1.4@tcp", "-v", "3"]);
    check(&d, "optional_argument_attached", &["peer", "show", "-v2", "--nid", "192.168.1.4@tcp"]);
    check(&d, "ambiguous_option", &["net", "add", "--net", "tcp1", "--p", "5"]);
    check(&d, "unknown_long_option", &["net", "show", "--frobnicate"]);
    check(&d, "unknown_short_option", &["net", "show", "-z"]);
    check(&d, "missing_argument", &["net", "add", "--net"]);
    check(&d, "flag_with_argument", &["lnet", "configure", "--all=yes"]);
    check(&d, "unknown_option_without_help", &["ping", "--frobnicate", "192.168.1.3@tcp"]);
    check(&d, "double_dash", &["ping", "--", "-x@tcp"]);
}

// ---------------------------------------------------------------------------------------------
// lnet configure / unconfigure.

#[test]
fn configure_and_unconfigure() {
    let d = Daemon::start(State::unconfigured());
    check(&d, "unconfigured_net_show", &["net", "show"]);
    check(&d, "unconfigured_stats_show", &["stats", "show"]);
    check(&d, "unconfigure_when_down", &["lnet", "unconfigure"]);
    check(&d, "configure", &["lnet", "configure"]);
    check(&d, "configured_lo_only", &["net", "show"]);
    check(&d, "configure_all", &["lnet", "configure", "--all"]);
    check(&d, "configured_all", &["net", "show"]);
    check(&d, "unconfigure", &["lnet", "unconfigure"]);
    check(&d, "configure_help", &["lnet", "configure", "-h"]);
}

// ---------------------------------------------------------------------------------------------
// net add / del / show.

#[test]
fn net_show_levels() {
    let d = configured();
    check(&d, "net_show", &["net", "show"]);
    check(&d, "net_show_v", &["net", "show", "-v"]);
    check(&d, "net_show_v2", &["net", "show", "-v", "2"]);
    check(&d, "net_show_v4_tcp", &["net", "show", "--verbose", "4", "--net", "tcp"]);
    check(&d, "net_show_missing_net", &["net", "show", "--net", "o2ib"]);
    check(&d, "net_show_bad_net", &["net", "show", "--net", "nonet"]);
}

#[test]
fn net_add_and_del() {
    let d = configured();
    check(
        &d,
        "net_add",
        &[
            "net",
            "add",
            "--net",
            "tcp1",
            "--if",
            "eth1",
            "--peer-credits",
            "16",
            "--conns-per-peer",
            "4",
        ],
    );
    check(&d, "net_add_by_nid", &["net", "add", "--nid", "10.5.0.1@tcp2", "--tos", "8"]);
    check(&d, "net_show_after_add", &["net", "show", "-v"]);
    check(&d, "net_del_ni", &["net", "del", "--net", "tcp1", "--if", "eth1"]);
    check(&d, "net_del_net", &["net", "del", "--net", "tcp2"]);
    check(&d, "net_show_after_del", &["net", "show"]);
}

#[test]
fn net_add_errors() {
    let d = configured();
    check(&d, "net_add_net_and_nid", &["net", "add", "--net", "tcp", "--nid", "10.0.0.1@tcp"]);
    check(&d, "net_add_without_net", &["net", "add", "--if", "eth1"]);
    check(&d, "net_add_without_interface", &["net", "add", "--net", "tcp1"]);
    check(&d, "net_add_unknown_interface", &["net", "add", "--net", "tcp1", "--if", "eth9"]);
    check(&d, "net_add_existing", &["net", "add", "--net", "tcp", "--if", "eth0"]);
    check(&d, "net_add_bad_net", &["net", "add", "--net", "nonet", "--if", "eth1"]);
    check(
        &d,
        "net_add_conns_per_peer",
        &["net", "add", "--net", "tcp1", "--if", "eth1", "--conns-per-peer", "200"],
    );
    check(&d, "net_add_tos", &["net", "add", "--net", "tcp1", "--if", "eth1", "--tos", "300"]);
    check(&d, "net_add_bad_interface_list", &["net", "add", "--net", "tcp1", "--if", "eth1[x]"]);
    check(&d, "net_del_without_net", &["net", "del"]);
    check(&d, "net_del_missing", &["net", "del", "--net", "tcp7"]);
    check(&d, "net_del_net_and_nid", &["net", "del", "--net", "tcp", "--nid", "192.168.1.2@tcp"]);
}

// ---------------------------------------------------------------------------------------------
// peer show / list.

#[test]
fn peers() {
    let d = configured();
    check(&d, "peer_show", &["peer", "show"]);
    check(&d, "peer_show_v", &["peer", "show", "-v"]);
    check(&d, "peer_show_v3", &["peer", "show", "-v", "3"]);
    check(&d, "peer_show_by_secondary_nid", &["peer", "show", "--nid", "10.1.0.3@tcp1"]);
    check(&d, "peer_show_unknown_nid", &["peer", "show", "--nid", "10.9.9.9@tcp"]);
    check(&d, "peer_list", &["peer", "list"]);
    let empty = Daemon::start({
        let mut state = State::configured();
        state.peers.clear();
        state
    });
    check(&empty, "peer_show_none", &["peer", "show"]);
    check(&empty, "peer_list_none", &["peer", "list"]);
}

// ---------------------------------------------------------------------------------------------
// ping / discover.

#[test]
fn ping_and_discover() {
    let d = configured();
    check(&d, "ping", &["ping", "192.168.1.3@tcp"]);
    check(&d, "ping_list_and_range", &["ping", "192.168.1.[2-4]@tcp,192.168.1.2@tcp"]);
    check(&d, "ping_failure", &["ping", "192.168.1.3@tcp", "192.168.1.99@tcp"]);
    check(
        &d,
        "ping_source_and_timeout",
        &["ping", "--source", "192.168.1.2@tcp", "--timeout", "5", "192.168.1.4@tcp"],
    );
    check(&d, "ping_source_not_local", &["ping", "-s", "192.168.1.9@tcp", "192.168.1.4@tcp"]);
    check(&d, "ping_bad_source", &["ping", "--source", "nonsense", "192.168.1.4@tcp"]);
    check(&d, "ping_asterisk", &["ping", "*@tcp"]);
    check(&d, "ping_bad_nid", &["ping", "1@tcp"]);
    check(&d, "ping_help", &["ping", "--help"]);
    check(&d, "discover", &["discover", "192.168.1.4@tcp"]);
    check(&d, "discover_force_failure", &["discover", "--force", "192.168.1.77@tcp"]);
    check(&d, "discover_without_nid", &["discover"]);
}

// ---------------------------------------------------------------------------------------------
// global show / stats show / set.

#[test]
fn globals_and_stats() {
    let d = configured();
    check(&d, "global_show", &["global", "show"]);
    check(&d, "global_show_extra_arguments", &["global", "show", "-v"]);
    check(&d, "stats_show", &["stats", "show"]);
    check(&d, "set_numa_range", &["set", "numa_range", "0x2"]);
    check(&d, "set_health_sensitivity_0", &["set", "health_sensitivity", "0"]);
    check(&d, "global_show_after_set", &["global", "show"]);
}

#[test]
fn set_errors() {
    let d = configured();
    check(&d, "set_unparseable", &["set", "numa_range", "two"]);
    check(&d, "set_negative_numa_range", &["set", "numa_range", "-1"]);
    check(&d, "set_max_recovery_ping_interval_0", &["set", "max_recovery_ping_interval", "0"]);
    check(&d, "set_transaction_timeout_below_retries", &["set", "transaction_timeout", "1"]);
    check(&d, "set_response_tracking_range", &["set", "response_tracking", "4"]);
    check(&d, "set_routing_2", &["set", "routing", "2"]);
    check(&d, "set_without_value", &["set", "numa_range"]);
    check(&d, "set_max_recovery_without_value", &["set", "max_recovery_ping_interval"]);
    check(&d, "set_help", &["set", "discovery", "-h"]);
    check(&d, "set_unknown_parameter", &["set", "lnd_timeout", "5"]);
}

// ---------------------------------------------------------------------------------------------
// route, routing and the router buffers.

#[test]
fn routes() {
    let d = configured();
    check(&d, "route_show_none", &["route", "show", "-v"]);
    let range = ["route", "add", "--net", "tcp1", "--gateway", "192.168.1.[5-6]@tcp"];
    check(&d, "route_add_range", &[&range[..], &["--hop", "2", "--prio", "1"]].concat());
    check(&d, "route_add", &["route", "add", "-n", "o2ib", "-g", "192.168.1.7@tcp"]);
    check(&d, "route_show", &["route", "show"]);
    check(&d, "route_show_verbose", &["route", "show", "-v"]);
    check(&d, "route_show_net_hop", &["route", "show", "--net", "tcp1", "--hop", "2"]);
    check(&d, "route_show_hop_alone_filters_nothing", &["route", "show", "--hop", "7"]);
    check(&d, "route_show_no_match", &["route", "show", "--net", "tcp7"]);
    check(&d, "route_add_missing_gateway", &["route", "add", "--net", "tcp1"]);
    check(&d, "route_add_missing_both", &["route", "add"]);
    let non_local = ["route", "add", "--net", "tcp", "--gateway", "1@gni"];
    check(&d, "route_add_gateway_not_local", &non_local);
    check(&d, "route_add_exists", &["route", "add", "--net", "o2ib", "-g", "192.168.1.7@tcp"]);
    check(&d, "route_add_bad_gateway", &["route", "add", "--net", "tcp1", "-g", "1.2.3@tcp"]);
    let many = ["route", "add", "--net", "tcp1", "-g", "10.0.[0-1].[0-255]@tcp"];
    check(&d, "route_add_too_many_gateways", &many);
    check(&d, "route_add_unknown_option", &["route", "add", "--health_sensitivity", "3"]);
    check(&d, "export_backup_with_routes", &["export", "--backup"]);
    let del = ["route", "del", "--net", "tcp1", "--gateway", "192.168.1.5@tcp"];
    check(&d, "route_del", &del);
    check(&d, "route_del_no_route", &["route", "del", "--net", "tcp9", "-g", "192.168.1.5@tcp"]);
    check(&d, "route_del_missing_net", &["route", "del", "--gateway", "192.168.1.5@tcp"]);
    check(&d, "route_show_after_del", &["route", "show", "-v"]);
}

#[test]
fn routing_and_buffers() {
    let d = configured();
    check(&d, "routing_show_never_enabled", &["routing", "show"]);
    check(&d, "set_routing_1", &["set", "routing", "1"]);
    check(&d, "set_tiny_buffers", &["set", "tiny_buffers", "600"]);
    check(&d, "set_small_buffers_below_minus_one", &["set", "small_buffers", "-2"]);
    check(&d, "routing_show", &["routing", "show"]);
    check(&d, "set_routing_0", &["set", "routing", "0"]);
    check(&d, "routing_show_disabled", &["routing", "show"]);
    check(&d, "export_backup_with_routing", &["export", "--backup"]);
    let down = Daemon::start(State::unconfigured());
    check(&down, "set_routing_network_down", &["set", "routing", "1"]);
    check(&down, "set_buffers_network_down", &["set", "large_buffers", "512"]);
    check(&down, "routing_show_network_down", &["routing", "show"]);
    check(&down, "route_show_network_down", &["route", "show"]);
}

// ---------------------------------------------------------------------------------------------
// export / import.

#[test]
fn export() {
    let d = configured();
    check(&d, "export", &["export"]);
    check(&d, "export_backup", &["export", "--backup"]);
    check(&d, "export_help", &["export", "-h"]);
    let file = d.dir.0.join("backup.yaml");
    let path = file.to_str().unwrap();
    let run = d.run(&["export", path, "-b"]);
    assert_eq!((run.code, run.stdout.as_str(), run.stderr.as_str()), (0, "", ""));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), d.run(&["export", "-b"]).stdout);
    let run = d.run(&["export", "/nonexistent/dir/file.yaml"]);
    assert_eq!((run.code, run.stdout.as_str(), run.stderr.as_str()), (255, "", ""));
}

const IMPORT_NET: &str = "\
net:
    - net type: tcp1
      local NI(s):
        - interfaces:
              0: eth1
global:
    numa_range: 3
    max_intf: 300
";

#[test]
fn import() {
    let d = configured();
    let file = d.dir.0.join("lnet.conf");
    std::fs::write(&file, IMPORT_NET).unwrap();
    let path = file.to_str().unwrap();
    let run = d.run(&["import", path]);
    assert_eq!((run.code, run.stdout.as_str(), run.stderr.as_str()), (0, "", ""));
    check(&d, "import_result", &["net", "show", "--net", "tcp1"]);
    check(&d, "import_result_global", &["global", "show"]);
    check_stdin(&d, "import_show_stdin", &["import", "--show"], "net:\n    - net type: tcp1\n");
    check_stdin(&d, "import_del_dash", &["import", "--del", "-"], "net:\n    - net type: tcp1\n");
    check(&d, "import_del_result", &["net", "show"]);
    check_stdin(
        &d,
        "import_exec",
        &["import", "--exec"],
        "ping:\n    nids: [192.168.1.3@tcp, 192.168.1.99@tcp]\ndiscover:\n    nids: [192.168.1.4@tcp]\n",
    );
    check_stdin(&d, "import_bad_key", &["import"], "global:\n    frobnicate: 1\n");
    check_stdin(&d, "import_bad_global", &["import"], "global:\n    response_tracking: 10\n");
    check_stdin(
        &d,
        "import_daemon_refusal",
        &["import"],
        "net:\n    - net type: tcp3\n      local NI(s):\n        - interfaces:\n              0: eth9\n",
    );
    check(&d, "import_missing_file", &["import", "/nonexistent/lnet.conf"]);
    check(&d, "import_help", &["import", "--help"]);
}

// ---------------------------------------------------------------------------------------------
// No daemon, --socket, --json.

#[test]
fn daemon_not_running() {
    let run = run_ulnetctl(&["--socket", "/nonexistent/ulnetd.sock", "net", "show"], None, "");
    insta::assert_snapshot!("no_daemon_net_show", run.transcript());
    let run = run_ulnetctl(&["global", "show", "--socket=/nonexistent/ulnetd.sock"], None, "");
    insta::assert_snapshot!("no_daemon_global_show", run.transcript());
    // Commands that need no node still work.
    let run =
        run_ulnetctl(&["--socket", "/nonexistent/ulnetd.sock", "net", "show", "-h"], None, "");
    assert_eq!(run.code, 1);
}

#[test]
fn socket_option_overrides_the_environment() {
    let d = configured();
    let socket = d.socket();
    let run = run_ulnetctl(
        &["peer", "list", "--socket", socket.to_str().unwrap()],
        Some("/nonexistent/x".as_ref()),
        "",
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.starts_with("peer list:\n"), "{}", run.stdout);
}

#[test]
fn json_output() {
    let d = configured();
    check(&d, "json_global_show", &["--json", "global", "show"]);
    check(&d, "json_peer_list", &["peer", "list", "--json"]);
    check(&d, "json_ping", &["--json", "ping", "192.168.1.4@tcp"]);
}

/// What the node receives for a command line: lnetctl's option rules decide the request.
#[test]
fn argv_to_request_table() {
    use ulnet_control::Request;
    use ulnet_control::message::*;
    let d = configured();
    let file = d.dir.0.join("in.yaml");
    std::fs::write(&file, "global:\n    numa_range: 1\n").unwrap();
    let file = file.to_str().unwrap().to_string();
    let show = |net: Option<&str>, level| Request::NetShow { net: net.map(Into::into), level };
    let peer = |nid: Option<&str>, level| Request::PeerShow { nid: nid.map(Into::into), level };
    let ping = |nids: &[&str], timeout_ms, source: Option<&str>| {
        Request::Ping(Ping {
            nids: nids.iter().map(|n| n.to_string()).collect(),
            timeout_ms,
            source: source.map(Into::into),
        })
    };
    let table: Vec<(Vec<&str>, Request)> = vec![
        (vec!["net", "show"], show(None, 0)),
        (vec!["net", "show", "-v"], show(None, 1)),
        (vec!["net", "show", "-v", "2"], show(None, 2)),
        (vec!["net", "show", "-v", "0x3"], show(None, 3)),
        (vec!["net", "show", "--verbose=4"], show(None, 1)),
        (vec!["net", "show", "--verb", "4"], show(None, 4)),
        (vec!["net", "show", "-v", "--net", "tcp"], show(Some("tcp"), 1)),
        (vec!["net", "show", "--n=tcp", "-v", "tcp1"], show(Some("tcp"), 1)),
        (vec!["net", "show", "--net", "tcp", "--net", "tcp1"], show(Some("tcp1"), 0)),
        (vec!["peer", "show", "-v2"], peer(None, 1)),
        (vec!["peer", "show", "-v", "2"], peer(None, 2)),
        (
            vec!["peer", "show", "--ni", "192.168.1.3@tcp", "--v", "3"],
            peer(Some("192.168.1.3@tcp"), 3),
        ),
        (vec!["peer", "show", "-n192.168.1.4@tcp"], peer(Some("192.168.1.4@tcp"), 0)),
        (vec!["peer", "list", "extra", "words"], Request::PeerList),
        (vec!["ping", "192.168.1.3@tcp"], ping(&["192.168.1.3@tcp"], None, None)),
        (vec!["ping", "-t", "5", "192.168.1.3@tcp"], ping(&["192.168.1.3@tcp"], Some(5000), None)),
        (vec!["ping", "--timeout", "1", "192.168.1.3@tcp"], ping(&["192.168.1.3@tcp"], None, None)),
        (
            vec!["ping", "192.168.1.3@tcp", "--time=2s"],
            ping(&["192.168.1.3@tcp"], Some(2000), None),
        ),
        (
            vec!["ping", "192.168.1.3@tcp", "--so", "192.168.1.2@tcp0", "192.168.1.4@tcp"],
            ping(&["192.168.1.3@tcp", "192.168.1.4@tcp"], None, Some("192.168.1.2@tcp")),
        ),
        (
            vec!["discover", "-f", "192.168.1.4@tcp"],
            Request::Discover { nids: vec!["192.168.1.4@tcp".into()], force: true },
        ),
        (vec!["lnet", "configure", "-al"], Request::Configure { all: true, large_nids: true }),
        (vec!["lnet", "configure", "--larg"], Request::Configure { all: false, large_nids: true }),
        (vec!["lnet", "unconfigure", "--ignored"], Request::Unconfigure),
        (vec!["set", "numa_range", "0x10"], Request::Set { param: SetParam::NumaRange, value: 16 }),
        (
            vec!["set", "discovery", "010", "extra"],
            Request::Set { param: SetParam::Discovery, value: 8 },
        ),
        (vec!["export", "-b"], Request::Export { backup: true }),
        (vec!["stats", "reset"], Request::StatsReset),
        (
            vec!["import", "--del", &file],
            Request::Import { mode: ImportMode::Del, text: "global:\n    numa_range: 1\n".into() },
        ),
        (
            vec!["import", &file],
            Request::Import { mode: ImportMode::Add, text: "global:\n    numa_range: 1\n".into() },
        ),
        (
            vec![
                "net",
                "add",
                "--if",
                "eth1[0,1],10.5.0.9@tcp5",
                "--peer-timeout",
                "x",
                "--peer-cr",
                "16",
                "--cpt",
                "[0-1]",
                "-k",
                "yes",
            ],
            Request::NetAdd(NetAdd {
                net: Some("tcp5".into()),
                ip2net: None,
                nis: vec![
                    LocalNiSpec::Interface { name: "eth1".into(), cpts: Some("[0,1]".into()) },
                    LocalNiSpec::Nid { nid: "10.5.0.9@tcp5".into() },
                ],
                tunables: TunablesSpec { peer_credits: Some(16), ..Default::default() },
                lnd_tunables: LndTunablesSpec::default(),
                cpts: Some("[0-1]".into()),
            }),
        ),
        (
            vec![
                "net",
                "add",
                "--net",
                "tcp9",
                "--ip2net",
                "tcp9 192.168.*.*",
                "--cpt",
                "[bad",
                "--tos",
                "0x10",
            ],
            Request::NetAdd(NetAdd {
                net: Some("tcp9".into()),
                ip2net: Some("tcp9 192.168.*.*".into()),
                lnd_tunables: LndTunablesSpec { tos: Some(16), ..Default::default() },
                ..Default::default()
            }),
        ),
        (
            vec!["net", "del", "--nid", "192.168.2.2@tcp1"],
            Request::NetDel(NetDel {
                net: Some("tcp1".into()),
                nis: vec![LocalNiSpec::Nid { nid: "192.168.2.2@tcp1".into() }],
            }),
        ),
        (
            vec!["route", "add", "--net", "tcp1", "-g", "192.168.1.[5-6]@tcp", "--hop-c", "2"],
            Request::RouteAdd(RouteSpec {
                net: Some("tcp1".into()),
                gateways: vec!["192.168.1.5@tcp".into(), "192.168.1.6@tcp".into()],
                hop: Some(2),
                priority: None,
            }),
        ),
        (
            // A hop or priority that does not parse, or -1, is not sent.
            vec!["route", "add", "-n", "o2ib", "-g", "192.168.1.5@tcp", "-c", "x", "-p", "-1"],
            Request::RouteAdd(RouteSpec {
                net: Some("o2ib".into()),
                gateways: vec!["192.168.1.5@tcp".into()],
                ..RouteSpec::default()
            }),
        ),
        (
            vec!["route", "del", "--net", "o2ib", "--gateway", "192.168.1.5@tcp"],
            Request::RouteDel(RouteSpec {
                net: Some("o2ib".into()),
                gateways: vec!["192.168.1.5@tcp".into()],
                ..RouteSpec::default()
            }),
        ),
        (
            vec!["route", "show", "--prio", "0x3", "-v"],
            Request::RouteShow { filter: RouteSpec::default(), verbose: true },
        ),
        (
            vec!["route", "show", "--gateway", "192.168.1.5@tcp", "--hop", "2"],
            Request::RouteShow {
                filter: RouteSpec {
                    gateways: vec!["192.168.1.5@tcp".into()],
                    hop: Some(2),
                    ..RouteSpec::default()
                },
                verbose: false,
            },
        ),
        (vec!["routing", "show"], Request::RoutingShow),
        (
            vec!["set", "large_buffers", "-1"],
            Request::Set { param: SetParam::LargeBuffers, value: -1 },
        ),
    ];
    for (args, expected) in table {
        d.state.lock().unwrap().requests.clear();
        let run = d.run(&args);
        let requests = d.state.lock().unwrap().requests.clone();
        assert_eq!(requests, vec![expected], "{args:?}: {}", run.stderr);
    }
}

/// Commands refused by lnetctl's own checks never reach the node.
#[test]
fn refused_before_the_node() {
    let d = configured();
    for args in [
        vec!["net", "add", "--net", "tcp1"],
        vec!["net", "add", "--net", "tcp1", "--if", "eth1", "--conns-per-peer", "128"],
        vec!["net", "del"],
        vec!["net", "show", "--frobnicate"],
        vec!["ping", "*@tcp"],
        vec!["ping", "--source", "x", "192.168.1.3@tcp"],
        vec!["discover"],
        vec!["set", "numa_range", "x"],
        vec!["set", "routing", "3"],
        vec!["set", "tiny_buffers", "-2"],
        vec!["route", "add", "--net", "tcp1"],
        vec!["route", "add", "--gateway", "192.168.1.5@tcp"],
        vec!["route", "del", "--net", "tcp1"],
        vec!["route", "add", "--net", "tcp1", "--gateway", "1.2.3@tcp"],
        vec!["route", "add", "--net", "tcp1", "--gateway", "10.0.[0-1].[0-255]@tcp"],
        vec!["route", "show", "--frobnicate"],
        vec!["import", "/nonexistent"],
        vec!["export", "--frobnicate"],
    ] {
        let run = d.run(&args);
        // Each says so, or fails (a bad --source is silent in lnetctl too).
        assert!(run.code != 0 || !(run.stdout.is_empty() && run.stderr.is_empty()), "{args:?}");
        assert!(d.state.lock().unwrap().requests.is_empty(), "{args:?} reached the node");
    }
}

// ---------------------------------------------------------------------------------------------
// peer add|del|set, net set, debug recovery (multi-rail administration).

/// What each administration command line sends: nidlists expanded, flags as lnetctl sets
/// them (`--force` on add and `--lock_prim` on del only set the exclusive flag).
#[test]
fn administration_requests() {
    use ulnet_control::Request;
    use ulnet_control::message::*;
    let d = configured();
    let s = |text: &str| text.to_string();
    let table: Vec<(Vec<&str>, Request)> = vec![
        (
            vec![
                "peer",
                "add",
                "--prim_nid",
                "10.0.0.1@tcp",
                "--nid",
                "10.0.0.[2-3]@tcp,10.1.0.1@tcp1",
            ],
            Request::PeerAdd(PeerAdd {
                primary_nid: Some(s("10.0.0.1@tcp")),
                nids: vec![s("10.0.0.2@tcp"), s("10.0.0.3@tcp"), s("10.1.0.1@tcp1")],
                multi_rail: true,
                lock_primary: false,
            }),
        ),
        (
            // Unique prefixes, as sanity-lnet uses them.
            vec!["peer", "add", "--prim", "10.0.0.1@tcp", "--non_mr", "--lock"],
            Request::PeerAdd(PeerAdd {
                primary_nid: Some(s("10.0.0.1@tcp")),
                nids: Vec::new(),
                multi_rail: false,
                lock_primary: true,
            }),
        ),
        (
            vec!["peer", "del", "--prim_nid", "10.0.0.1@tcp", "--force"],
            Request::PeerDel(PeerDel {
                primary_nid: Some(s("10.0.0.1@tcp")),
                nids: Vec::new(),
                force: true,
            }),
        ),
        (
            vec!["peer", "del", "--prim_nid", "10.0.0.1@tcp", "--nid", "10.0.0.2@tcp"],
            Request::PeerDel(PeerDel {
                primary_nid: Some(s("10.0.0.1@tcp")),
                nids: vec![s("10.0.0.2@tcp")],
                force: false,
            }),
        ),
        (
            vec!["peer", "set", "--health", "0", "--nid", "10.0.0.2@tcp"],
            Request::PeerSet(PeerSet {
                nid: Some(s("10.0.0.2@tcp")),
                all: false,
                health: Some(0),
                state: None,
            }),
        ),
        (
            vec!["peer", "set", "--all", "--health", "0x3e8"],
            Request::PeerSet(PeerSet { nid: None, all: true, health: Some(1000), state: None }),
        ),
        (
            vec!["peer", "set", "--state", "1048577", "--nid", "10.0.0.1@tcp"],
            Request::PeerSet(PeerSet {
                nid: Some(s("10.0.0.1@tcp")),
                all: false,
                health: None,
                state: Some(1_048_577),
            }),
        ),
        (
            vec!["net", "set", "--nid", "192.168.1.2@tcp", "--health", "500"],
            Request::NetSet(NetSet {
                nid: Some(s("192.168.1.2@tcp")),
                all: false,
                health: Some(500),
                conns_per_peer: None,
                ..NetSet::default()
            }),
        ),
        (
            vec!["net", "set", "--all", "--health", "1000"],
            Request::NetSet(NetSet {
                nid: None,
                all: true,
                health: Some(1000),
                conns_per_peer: None,
                ..NetSet::default()
            }),
        ),
        (
            vec!["net", "set", "--nid", "192.168.1.2@tcp", "--conns-per-peer", "4"],
            Request::NetSet(NetSet {
                nid: Some(s("192.168.1.2@tcp")),
                all: false,
                health: None,
                conns_per_peer: Some(4),
                ..NetSet::default()
            }),
        ),
        (
            vec!["debug", "recovery", "--peer"],
            Request::DebugRecovery { queue: RecoveryQueue::Peer },
        ),
        (
            vec!["net", "set", "--net", "tcp1", "--lnd-timeout", "7"],
            Request::NetSet(NetSet {
                lnd_timeout: Some(7),
                net: Some(s("tcp1")),
                ..NetSet::default()
            }),
        ),
    ];
    for (args, expected) in table {
        d.state.lock().unwrap().requests.clear();
        let run = d.run(&args);
        assert_eq!(run.code, 0, "{args:?}: {}{}", run.stdout, run.stderr);
        let requests = d.state.lock().unwrap().requests.clone();
        assert_eq!(requests, vec![expected], "{args:?}: {}", run.stderr);
    }
}

/// lnetctl's own refusals of administration commands, with their texts and codes.
#[test]
fn administration_refusals() {
    let d = configured();
    check(
        &d,
        "peer_add_bad_nidlist",
        &["peer", "add", "--prim_nid", "10.0.0.1@tcp", "--nid", "10.0.0.[3-1]@tcp"],
    );
    check(
        &d,
        "peer_add_invalid_nid",
        &["peer", "add", "--prim_nid", "10.0.0.1@tcp", "--nid", "10.0.0.x@tcp"],
    );
    check(
        &d,
        "peer_add_too_many_nids",
        &["peer", "add", "--prim_nid", "10.0.0.1@tcp", "--nid", "10.0.[0-1].[0-255]@tcp"],
    );
    check(&d, "peer_del_non_mr", &["peer", "del", "--prim_nid", "10.0.0.1@tcp", "--non_mr"]);
    check(
        &d,
        "net_set_all_and_nid",
        &["net", "set", "--all", "--nid", "192.168.1.2@tcp", "--health", "5"],
    );
    check(&d, "net_set_lnd_timeout_without_net", &["net", "set", "--lnd-timeout", "5"]);
    check(&d, "net_set_bad_net", &["net", "set", "--net", "frob", "--health", "5"]);
    check(&d, "debug_recovery_without_queue", &["debug", "recovery"]);
    check(&d, "debug_recovery_local", &["debug", "recovery", "--local"]);
    for args in [
        vec!["peer", "add", "--prim_nid", "10.0.0.1@tcp", "--nid", "10.0.0.[3-1]@tcp"],
        vec!["peer", "del", "--prim_nid", "10.0.0.1@tcp", "--non_mr"],
        vec!["net", "set", "--all", "--nid", "192.168.1.2@tcp", "--health", "5"],
        vec!["net", "set", "--lnd-timeout", "5"],
        vec!["debug", "recovery"],
        // A negative or unparsed health sends nothing, as in lnetctl.
        vec!["peer", "set", "--nid", "10.0.0.1@tcp", "--health", "-5"],
        vec!["net", "set", "--all", "--health", "x"],
    ] {
        d.state.lock().unwrap().requests.clear();
        let _ = d.run(&args);
        assert!(d.state.lock().unwrap().requests.is_empty(), "{args:?} reached the node");
    }
}

// ---------------------------------------------------------------------------------------------
// fault

#[test]
fn fault_rules_add_show_del() {
    use ulnet_control::Request;
    use ulnet_control::message::FaultOp;
    let d = configured();
    check(
        &d,
        "fault_drop_add",
        &[
            "fault",
            "drop",
            "add",
            "-s",
            "*@tcp",
            "-d",
            "10.0.0.2@tcp",
            "-r",
            "2",
            "-m",
            "PUT",
            "-m",
            "get",
            "-p",
            "4",
            "-e",
            "local_timeout",
        ],
    );
    check(
        &d,
        "fault_delay_add",
        &[
            "fault",
            "delay",
            "add",
            "--source",
            "*",
            "--dest",
            "*",
            "--interval",
            "5",
            "--latency",
            "3",
        ],
    );
    check(&d, "fault_drop_show", &["fault", "drop", "show"]);
    check(&d, "fault_delay_show", &["fault", "delay", "show"]);
    check(&d, "fault_drop_del_missing", &["fault", "drop", "del", "-s", "10.9.9.9@tcp", "-d", "*"]);
    check(&d, "fault_drop_del_all", &["fault", "drop", "del", "-a"]);
    check(&d, "fault_drop_show_empty", &["fault", "drop", "show"]);
    check(&d, "fault_delay_reset", &["fault", "delay", "reset", "x"]);
    let requests = d.state.lock().unwrap().requests.clone();
    let Some(Request::Fault(first)) = requests.first() else { panic!("{requests:?}") };
    let FaultOp::Add(spec) = &first.op else { panic!("{first:?}") };
    assert_eq!(
        (spec.source.as_str(), spec.destination.as_str(), spec.local_nid.as_str()),
        ("255.255.255.255@tcp", "10.0.0.2@tcp", "<?>")
    );
    assert_eq!((spec.message_mask, spec.portal_mask, spec.health_error_mask), (6, 16, 1 << 6));
}

#[test]
fn fault_option_errors() {
    let d = configured();
    for (name, args) in [
        (
            "fault_drop_add_rate_and_interval",
            vec!["fault", "drop", "add", "-s", "*", "-d", "*", "-r", "2", "-i", "3"],
        ),
        ("fault_drop_add_neither", vec!["fault", "drop", "add", "-s", "*", "-d", "*"]),
        (
            "fault_drop_add_random_without_interval",
            vec!["fault", "drop", "add", "-s", "*", "-d", "*", "-r", "2", "-n"],
        ),
        ("fault_drop_add_no_dest", vec!["fault", "drop", "add", "-s", "*", "-r", "2"]),
        (
            "fault_drop_add_bad_nid",
            vec!["fault", "drop", "add", "-s", "frob", "-d", "*", "-r", "2"],
        ),
        (
            "fault_drop_add_bad_net",
            vec!["fault", "drop", "add", "-s", "*@frob", "-d", "*", "-r", "2"],
        ),
        (
            "fault_drop_add_bad_message",
            vec!["fault", "drop", "add", "-s", "*", "-d", "*", "-r", "2", "-m", "HELLO"],
        ),
        (
            "fault_drop_add_bad_portal",
            vec!["fault", "drop", "add", "-s", "*", "-d", "*", "-r", "2", "-p", "64"],
        ),
        (
            "fault_drop_add_bad_health",
            vec!["fault", "drop", "add", "-s", "*", "-d", "*", "-r", "2", "-e", "frob"],
        ),
        (
            "fault_drop_add_unknown_option",
            vec!["fault", "drop", "add", "-s", "*", "-d", "*", "-r", "2", "-z"],
        ),
        (
            "fault_delay_add_zero_latency",
            vec!["fault", "delay", "add", "-s", "*", "-d", "*", "-r", "2"],
        ),
        (
            "fault_delay_add_short_interval",
            vec!["fault", "delay", "add", "-s", "*", "-d", "*", "-i", "2", "-l", "1"],
        ),
        ("fault_drop_add_alone", vec!["fault", "drop", "add"]),
        ("fault_drop_del_nothing", vec!["fault", "drop", "del", "-s", "*"]),
        ("fault_drop_del_all_and_source", vec!["fault", "drop", "del", "-a", "-s", "*"]),
        ("fault_drop_reset_alone", vec!["fault", "drop", "reset"]),
    ] {
        check(&d, name, &args);
    }
    // lnetctl reports an unknown option and goes on: that rule is the only one sent.
    let requests = d.state.lock().unwrap().requests.clone();
    assert_eq!(requests.len(), 1, "{requests:?}");
}

#[test]
fn net_set_lnd_timeout() {
    let d = configured();
    check(&d, "net_set_lnd_timeout", &["net", "set", "--net", "tcp", "--lnd-timeout", "9"]);
    check(&d, "net_set_lnd_timeout_o2ib", &["net", "set", "--net", "o2ib", "--lnd-timeout", "9"]);
    check(&d, "net_set_lnd_timeout_lo", &["net", "set", "--net", "lo", "--lnd-timeout", "9"]);
    check(
        &d,
        "net_set_lnd_timeout_negative",
        &["net", "set", "--net", "tcp", "--lnd-timeout", "-1"],
    );
}

// ---------------------------------------------------------------------------------------------
// udsp

/// sanity-lnet.sh test 403's rules, then indexes, an equal rule (-EALREADY), the pair and
/// router forms, deletion by index and of everything.
#[test]
fn udsp_add_show_del() {
    let d = configured();
    // Test 403: `udsp add --src|--dst <net|nid> --prio 1`, shown at index 0 (abbreviated
    // option, as the test writes it).
    check(&d, "udsp_add_src_net", &["udsp", "add", "--src", "tcp", "--prio", "1"]);
    check(&d, "udsp_show_src_net", &["udsp", "show"]);
    check(&d, "udsp_del_idx_0", &["udsp", "del", "--idx", "0"]);
    check(&d, "udsp_show_none", &["udsp", "show"]);
    check(&d, "udsp_add_dst_nid", &["udsp", "add", "--dst", "1.1.1.1@tcp", "--prio", "1"]);
    check(&d, "udsp_add_same_again", &["udsp", "add", "--dst", "1.1.1.1@tcp", "--priority", "1"]);
    let _ = d.run(&["udsp", "add", "--src", "10.0.[1-4/2].*@tcp1", "--dst", "o2ib[1-3]"]);
    let _ = d.run(&["udsp", "add", "--dst", "tcp", "--rte", "*.*.*.*@tcp", "--idx", "0"]);
    let _ = d.run(&["udsp", "add", "-s", "o2ib", "--idx", "99"]);
    check(&d, "udsp_show_all", &["udsp", "show"]);
    check(&d, "udsp_show_idx", &["udsp", "show", "--idx", "1"]);
    check(&d, "udsp_show_missing_idx", &["udsp", "show", "--idx", "7"]);
    check(&d, "udsp_export", &["export"]);
    check(&d, "udsp_del_missing", &["udsp", "del", "--idx", "7"]);
    check(&d, "udsp_del_all", &["udsp", "del", "--all"]);
    assert!(d.state.lock().unwrap().udsp.is_empty());
    let _ = d.run(&["udsp", "add", "--src", "tcp"]);
    let _ = d.run(&["udsp", "del", "--idx", "-1"]);
    assert!(d.state.lock().unwrap().udsp.is_empty(), "--idx -1 deletes every rule");
}

/// lnetctl's option and combination errors, none of which reaches the node.
#[test]
fn udsp_errors() {
    let d = configured();
    for (name, args) in [
        ("udsp_add_nothing", &["udsp", "add"][..]),
        ("udsp_add_bad_priority", &["udsp", "add", "--src", "tcp", "--priority", "-1"]),
        ("udsp_add_bad_index", &["udsp", "add", "--src", "tcp", "--idx", "x"]),
        ("udsp_add_all_three", &["udsp", "add", "--src", "tcp", "--dst", "tcp", "--rte", "tcp"]),
        ("udsp_add_src_and_rte", &["udsp", "add", "--src", "tcp", "--rte", "1.1.1.1@tcp"]),
        ("udsp_add_bad_src", &["udsp", "add", "--src", "*@tcp"]),
        ("udsp_add_bad_dst", &["udsp", "add", "--dst", "foo1"]),
        ("udsp_add_unknown_option", &["udsp", "add", "--colour", "red"]),
        ("udsp_del_nothing", &["udsp", "del"]),
        ("udsp_del_all_and_idx", &["udsp", "del", "--all", "--idx", "0"]),
        ("udsp_del_bad_index", &["udsp", "del", "--idx", "-2"]),
        ("udsp_show_bad_index", &["udsp", "show", "--idx", "x"]),
        ("udsp_show_unknown_option", &["udsp", "show", "-x"]),
        ("udsp_add_help", &["udsp", "add", "-h"]),
    ] {
        d.state.lock().unwrap().requests.clear();
        check(&d, name, args);
        assert!(d.state.lock().unwrap().requests.is_empty(), "{args:?} reached the node");
    }
}

#[test]
fn udsp_when_lnet_is_down() {
    let d = Daemon::start(State::unconfigured());
    check(&d, "udsp_add_unconfigured", &["udsp", "add", "--src", "tcp"]);
    check(&d, "udsp_del_unconfigured", &["udsp", "del", "--all"]);
    check(&d, "udsp_show_unconfigured", &["udsp", "show"]);
}
