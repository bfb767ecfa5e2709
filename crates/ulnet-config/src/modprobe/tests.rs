//! Module parameters: the syntax, every parameter's default accepted, the kernel's checks
//! and messages, what ulnet cannot honour refused by name, and the seeds' options lines.

use super::*;

fn read(text: &str) -> (ModuleParameters, Vec<String>) {
    let (params, problems) = parse(&[Source { name: "lustre.conf", text }]);
    (params, problems.iter().map(ToString::to_string).collect())
}

fn ok(text: &str) -> ModuleParameters {
    let (params, problems) = read(text);
    assert!(problems.is_empty(), "{text}: {problems:?}");
    params
}

/// The one problem `text` has.
fn problem(text: &str) -> String {
    let (_, problems) = read(text);
    assert_eq!(problems.len(), 1, "{text}: {problems:?}");
    problems[0].clone()
}

#[test]
fn every_parameters_default_is_accepted_and_changes_nothing() {
    for param in table::PARAMS {
        if matches!(param.target, Target::Refused(_)) {
            continue;
        }
        let module = match param.module {
            Module::Lnet => "lnet",
            Module::Libcfs => "libcfs",
            Module::Ksocklnd => "ksocklnd",
            Module::LnetSelftest => "lnet_selftest",
        };
        let line = format!("options {module} {}=\"{}\"\n", param.name, param.default);
        let params = ok(&line);
        assert_eq!(params.settings, GlobalSettings::default(), "{line}");
        let defaults = SocklndModule::default();
        assert_eq!(params.socklnd.lnd, defaults.lnd, "{line}");
        assert_eq!(params.networks, None, "{line}");
        assert_eq!(params.ip2nets, None, "{line}");
        // A router buffer count names its block, whatever its value; a router tunable at
        // its default, or a default text one (routes="", forwarding=""), sets nothing.
        let routing = matches!(param.target, Target::Buffers(_));
        assert_eq!(params.blocks.len(), usize::from(routing), "{line}");
        assert_eq!(params.routing.routes, Vec::new(), "{line}");
    }
}

#[test]
fn every_numeric_parameter_refuses_a_non_number_with_the_kernels_text() {
    for param in table::PARAMS.iter().filter(|p| !matches!(p.kind, Kind::Text | Kind::Any)) {
        let module = match param.module {
            Module::Lnet => "lnet",
            Module::Libcfs => "libcfs",
            Module::Ksocklnd => "ksocklnd",
            Module::LnetSelftest => "lnet_selftest",
        };
        let line = format!("options {module} {}=12abc\n", param.name);
        let expected = match param.kind {
            Kind::Ulong(text) | Kind::Long(text) => text.to_string(),
            _ => format!("`12abc' invalid for parameter `{}'", param.name),
        };
        assert_eq!(
            problem(&line),
            format!("lustre.conf:1: options {module} {}=12abc: {expected}", param.name)
        );
    }
}

#[test]
fn the_kernels_names_defaults_and_lines_merge() {
    let params = ok("# LNet\n\
                     options lnet lnet_transaction_timeout=200 \\\n\
                     \x20   lnet-retry-count=3\n\
                     options lnet lnet_transaction_timeout=0x12c accept=all accept_port=7988\n\
                     options ksocklnd peer_credits=32 credits=1024 sock_timeout=\"100\"\n\
                     options ksocklnd conns_per_peer=4 tos=0x10 keepalive=0 nagle=1\n\
                     options lnet lnet_peer_discovery_disabled=1 lnet_health_sensitivity=50\n");
    assert_eq!(params.settings.transaction_timeout, 300, "the later value wins");
    assert_eq!(params.settings.retry_count, 3);
    assert!(!params.settings.discovery);
    assert_eq!(params.settings.health_sensitivity, 50);
    assert_eq!(params.accept, Some(AcceptPolicy::All));
    assert_eq!(params.accept_port, Some(7988));
    assert_eq!(params.socklnd.net.peer_credits, Some(32));
    assert_eq!(params.socklnd.net.credits, Some(1024));
    assert_eq!(params.socklnd.conns_per_peer, Some(4));
    assert_eq!(params.socklnd.tos, Some(16));
    assert_eq!(params.socklnd.lnd.sock_timeout, Duration::from_secs(100));
    assert_eq!(params.socklnd.lnd.keepalive, None);
    assert!(params.socklnd.lnd.nagle);
    assert!(params.notes.is_empty());
}

#[test]
fn setters_check_in_the_order_parameters_come() {
    // lnet_retry_count is checked against the transaction timeout set before it.
    assert_eq!(
        problem("options lnet lnet_transaction_timeout=3 lnet_retry_count=5\n"),
        "lustre.conf:1: options lnet lnet_retry_count=5: Invalid value for lnet_retry_count (5). \
         Has to be smaller than lnet_transaction_timeout (3)"
    );
    assert_eq!(
        problem("options lnet lnet_retry_count=5\noptions lnet lnet_transaction_timeout=4\n"),
        "lustre.conf:2: options lnet lnet_transaction_timeout=4: Invalid value for \
         lnet_transaction_timeout (4). Has to be greater than lnet_retry_count (5)"
    );
    // Health off forces the retry count to 0 and refuses a later one.
    let params = ok("options lnet lnet_health_sensitivity=0\n");
    assert_eq!(params.settings.retry_count, 0);
    assert_eq!(
        problem("options lnet lnet_health_sensitivity=0 lnet_retry_count=1\n"),
        "lustre.conf:1: options lnet lnet_retry_count=1: Can not set lnet_retry_count when \
         health feature is turned off"
    );
}

#[test]
fn the_kernels_refusals_and_their_texts() {
    let cases = [
        (
            "options lnet lnet_transaction_timeout=0",
            "Invalid value for lnet_transaction_timeout (0). Has to be greater than lnet_retry_count (2)",
        ),
        (
            "options lnet lnet_transaction_timeout=-5",
            "Invalid module parameter value for 'lnet_transaction_timeout'",
        ),
        (
            "options lnet lnet_health_sensitivity=1001",
            "Invalid health value. Maximum: 1000 value = 1001",
        ),
        (
            "options lnet lnet_health_sensitivity=lots",
            "Invalid module parameter value for 'lnet_health_sensitivity'",
        ),
        (
            "options lnet lnet_max_recovery_ping_interval=0",
            "Invalid max ping timeout. Must be strictly positive",
        ),
        ("options lnet lnet_response_tracking=4", "Invalid value (4) for 'lnet_response_tracking'"),
        ("options lnet lnet_response_tracking=x", "Invalid value for 'lnet_response_tracking'"),
        (
            "options lnet router_sensitivity_percentage=101",
            "Invalid value: 101 for 'router_sensitivity_percentage'",
        ),
        (
            "options lnet lnet_interfaces_max=4k",
            "Invalid module parameter value for 'lnet_interfaces_max'",
        ),
        ("options lnet lnet_numa_range=-1", "`-1' invalid for parameter `lnet_numa_range'"),
        (
            "options lnet lnet_recovery_limit=5000000000",
            "`5000000000' invalid for parameter `lnet_recovery_limit'",
        ),
        (
            "options lnet lnet_drop_asym_route=3000000000",
            "3000000000 is too large (at most 2147483647)",
        ),
        ("options lnet accept=maybe", "Can't parse 'accept=\"maybe\"'"),
        ("options lnet accept_port=0", "0 is not a port number (1-65535)"),
        ("options lnet accept_port=65536", "65536 is not a port number (1-65535)"),
        ("options lnet accept_port", "`' invalid for parameter `accept_port'"),
        ("options lnet accept_timeout=0", "0: the acceptor's timeout must be at least 1 second"),
        ("options lnet forwarding=on", "forwarding='on' not set to either 'enabled' or 'disabled'"),
        (
            "options lnet small_router_buffers=-1",
            "small_router_buffers=-1 invalid when routing enabled",
        ),
        (
            "options lnet dead_router_check_interval=50",
            "live_router_check_interval and dead_router_check_interval have been deprecated. Use alive_router_check_interval instead. Ignoring these deprecated parameters (ulnetd refuses what it would ignore)",
        ),
        ("options lnet networks=tcp(eth0", "interface list at 4 has no closing ')'"),
        ("options lnet networks=foo", "unrecognised network type 'foo' at 0"),
        ("options lnet routes=\"tcp1 10.0.0.1@nonet\"", "bad gateway NID '10.0.0.1@nonet' at 5"),
        (
            "options lnet ip2nets=\"tcp 10.0.0.300\"",
            "bad IP range '10.0.0.300' at 4: 300 is outside 0..=255",
        ),
        (
            "options lnet use_tcp_bonding=1",
            "use_tcp_bonding has been removed. Use Multi-Rail and Dynamic Discovery instead (only \"0\" is accepted)",
        ),
        ("options ksocklnd tos=256", "`256' invalid for parameter `tos'"),
        ("options ksocklnd tos=-2", "`-2' invalid for parameter `tos'"),
        ("options ksocklnd credits=0", "0: credits must be at least 1"),
        ("options ksocklnd peer_credits=-8", "-8: peer_credits must be at least 1"),
        ("options ksocklnd peer_buffer_credits=-1", "-1: peer_buffer_credits must not be negative"),
        (
            "options ksocklnd conns_per_peer=128",
            "128: ulnet opens at most 127 connections per peer (lnetctl's range 0-127)",
        ),
        ("options ksocklnd conns_per_peer=-1", "`-1' invalid for parameter `conns_per_peer'"),
        ("options ksocklnd sock_timeout=-1", "-1 is negative: sock_timeout counts from 0"),
        ("options ksocklnd min_reconnectms=1s", "`1s' invalid for parameter `min_reconnectms'"),
        (
            "options ksocklnd nscheds=4",
            "ulnet's TCP LND runs on the partitions' I/O threads, not scheduler threads (only \"0\" is accepted)",
        ),
        (
            "options ksocklnd enable_csum=1",
            "sending message checksums is not implemented (received ones are checked) (only \"0\" is accepted)",
        ),
        (
            "options ksocklnd backoff_init=3",
            "unknown parameter: it exists only in kernels built with SOCKNAL_BACKOFF",
        ),
        ("options ksocklnd zc_recv=yes", "`yes' invalid for parameter `zc_recv'"),
        (
            "options libcfs libcfs_debug=0",
            "libcfs's kernel debug log has no ulnet counterpart: ulnetd logs with tracing, filtered by ULNET_LOG",
        ),
        ("options libcfs cpu_npartitions=four", "`four' invalid for parameter `cpu_npartitions'"),
        (
            "options lnet portal_rotor=4",
            "portal_rotor=4 is none of the kernel's rotor modes: 0 (off), 1 (on), 2 (routed messages round robin), 3 (routed messages by hash)",
        ),
        ("options lnet portal_rotor=on", "`on' invalid for parameter `portal_rotor'"),
        (
            "options lnet_selftest rpc_timeout=30",
            "the selftest service's parameters are not configurable in ulnetd yet (only \"64\" is accepted)",
        ),
        (
            "options lnet colour=red",
            "unknown parameter: lnet has no such parameter (the kernel ignores it with a warning)",
        ),
        (
            "options ksocklnd peer_credit=16",
            "unknown parameter (did you mean peer_credits?): ksocklnd has no such parameter (the kernel ignores it with a warning)",
        ),
    ];
    let mut wrong = Vec::new();
    for (line, why) in cases {
        let (_, problems) = read(&format!("{line}\n"));
        let got: Vec<String> =
            problems.iter().map(|p| p.splitn(3, ": ").nth(2).unwrap_or("").to_string()).collect();
        if got != [why] {
            wrong.push(format!("{line}\n  got      {got:?}\n  expected {why:?}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn values_the_kernel_reads_the_same_are_the_same() {
    let params =
        ok("options lnet lnet_transaction_timeout=+0x96 cpu_npartitions=1 cpu_pattern=\"\"\n\
                     options libcfs cpu_pattern=N cpu_npartitions=0x0\n\
                     options lnet config_on_load=1 lnet_recovery_interval lnet_interfaces_max=8\n\
                     options ksocklnd skip_mr_route_setup=1 nonblk_zcack=01\n");
    assert_eq!(params.settings.transaction_timeout, 150);
    // Below 16, the kernel takes its default back.
    assert_eq!(params.settings.max_interfaces, 4096);
    // lnet's and libcfs's are one variable: the last given wins.
    assert_eq!(params.cpu_pattern.unwrap().value, "N");
    assert_eq!(params.cpu_npartitions.unwrap().value, 0);
}

#[test]
fn routing_parameters_fill_the_routing_model_and_name_their_block() {
    let params = ok("options lnet routes=\"o2ib 1 10.0.0.[1-2]@tcp:5; tcp2 10.0.0.3@tcp\" \
                     forwarding=enabled tiny_router_buffers=1024 large_router_buffers=64\n\
                     options lnet check_routers_before_use=1 alive_router_check_interval=30 \
                     peer_buffer_credits=16 rnet_htable_size=256 router_ping_timeout=50\n");
    assert_eq!(params.routing.routes.len(), 3);
    assert_eq!(params.routing.routes[0].hops, Some(1));
    assert_eq!(params.routing.routes[1].priority, 5);
    assert_eq!(params.routing.routing, Some(true));
    assert_eq!(
        params.routing.buffers,
        Some(Buffers { tiny: Some(1024), small: None, large: Some(64) })
    );
    assert_eq!(params.router.check_routers_before_use, Some(1));
    assert_eq!(params.router.alive_router_check_interval, Some(30));
    assert_eq!(params.router.peer_buffer_credits, Some(16));
    assert_eq!(params.router.router_ping_timeout, Some(50));
    // The router checker's tunables reach the settings; only the ones ulnetd does not
    // honour (peer_buffer_credits, auto_down) off their defaults fill the refused router
    // block, and the hash size (no behaviour) fills none.
    assert!(params.settings.router.check_routers_before_use);
    assert_eq!(params.settings.router.alive_router_check_interval, 30);
    assert_eq!(params.settings.router.router_ping_timeout, 50);
    let blocks: Vec<&str> = params.blocks.iter().map(|(block, _)| *block).collect();
    assert_eq!(blocks, ["route", "routing", "buffers", "buffers", "router"]);
    assert_eq!(
        params.blocks[0].1.to_string(),
        "lustre.conf:1: options lnet routes=o2ib 1 10.0.0.[1-2]@tcp:5; tcp2 10.0.0.3@tcp"
    );
    // portal_rotor reaches the settings, every mode of the kernel's.
    assert_eq!(ok("").settings.portal_rotor, 3);
    for mode in 0..=3 {
        assert_eq!(ok(&format!("options lnet portal_rotor={mode}\n")).settings.portal_rotor, mode);
    }
    // Empty text forms are the defaults: nothing given.
    assert!(ok("options lnet routes=\"\" forwarding=\"\"\n").blocks.is_empty());
}

#[test]
fn networks_and_ip2nets_keep_the_kernels_syntax() {
    let params = ok("options lnet networks=\"tcp0(eth0,eth1),tcp1(eth2[0])\"\n");
    let nets = params.networks.unwrap();
    assert_eq!(nets.value.len(), 2);
    assert_eq!(nets.value[0].nis[1].interface.as_deref(), Some("eth1"));
    assert_eq!(nets.origin.line, 1);
    let params = ok("options lnet ip2nets=\"tcp(eth0) 192.168.0.*; tcp1 10.0.0.[2-4]\"\n");
    assert_eq!(params.ip2nets.unwrap().value.len(), 2);
    // Both at once is the kernel's error; an empty value unsets.
    assert_eq!(
        problem("options lnet networks=tcp ip2nets=\"tcp 10.0.0.*\"\n"),
        "lustre.conf:1: options lnet networks=tcp: Please specify EITHER 'networks' or \
         'ip2nets' but not both at once"
    );
    assert_eq!(ok("options lnet networks=tcp networks=\"\"\n").networks, None);
}

#[test]
fn the_bulk_port_is_taken_as_given() {
    assert_eq!(ok("options lnet accept_port=7988\n").accept_port_bulk, None);
    let params = ok("options lnet accept_port_bulk=7989 accept_port=7988\n");
    assert_eq!((params.accept_port, params.accept_port_bulk), (Some(7988), Some(7989)));
    assert_eq!(
        problem("options lnet accept_port_bulk=70000\n"),
        "lustre.conf:1: options lnet accept_port_bulk=70000: 70000 is not a port number (1-65535)"
    );
}

#[test]
fn modprobe_syntax_problems_are_named() {
    assert_eq!(
        problem("options lnet networks=tcp # the client\n"),
        "lustre.conf:1: options lnet: '# the client': modprobe passes the rest of the line to \
         the module, which takes '#' for a parameter; write comments on lines of their own"
    );
    assert_eq!(
        problem("options lnet routes='o2ib 1@ptlf\n"),
        "lustre.conf:1: options lnet: a quote opens in 'routes='o2ib 1@ptlf' and never closes"
    );
    assert_eq!(
        problem("\n\noption lnet networks=tcp\n"),
        "lustre.conf:3: option: not a modprobe.d command (options, alias, blacklist, install, \
         remove, softdep, weakdep)"
    );
    assert_eq!(
        problem("options lnet\n"),
        "lustre.conf:1: options: needs a module name and parameters"
    );
    assert_eq!(
        problem("install lnet /sbin/modprobe --ignore-install lnet && lnetctl lnet configure\n"),
        "lustre.conf:1: install lnet: the command stands in for loading the module, which \
         ulnetd does not run"
    );
}

#[test]
fn other_modules_and_commands_are_notes() {
    let params =
        ok("options ptlrpc at_max=600\nalias lustre-fs lustre\nsoftdep lnet pre: libcfs\n\
                     install osc /bin/true\n");
    let notes: Vec<String> = params.notes.iter().map(ToString::to_string).collect();
    assert_eq!(
        notes,
        [
            "lustre.conf:1: options ptlrpc: not an LNet module: left to the kernel",
            "lustre.conf:2: alias: concerns loading kernel modules, which ulnetd does not do",
            "lustre.conf:3: softdep: concerns loading kernel modules, which ulnetd does not do",
            "lustre.conf:4: install: concerns loading kernel modules, which ulnetd does not do",
        ]
    );
}

#[test]
fn lnds_ulnet_cannot_drive_are_refused_by_name() {
    assert_eq!(
        problem("options ko2iblnd peer_credits=128 concurrent_sends=256 map_on_demand=1\n"),
        "lustre.conf:1: options ko2iblnd peer_credits concurrent_sends map_on_demand: ulnet \
         cannot drive the ko2iblnd LND: its o2ib networks need RDMA hardware (InfiniBand, RoCE, \
         iWARP)"
    );
    for module in ["kgnilnd", "kkfilnd", "kefalnd", "kmxlnd"] {
        let line = problem(&format!("options {module} credits=8\n"));
        assert!(line.contains(&format!("ulnet cannot drive the {module} LND")), "{line}");
    }
}

/// The seeds' client and router options, as their files have them: what maps, and each
/// parameter ulnet cannot honour, by name.
#[test]
fn the_seeds_options_lines() {
    let text = "options lnet networks=ptlf(0) routes='o2ib [1,2,3,4,5]@ptlf' \
                lnet_peer_discovery_disabled=1 lnet_health_sensitivity=0 \
                check_router_before_use=1 live_router_check_interval=107 \
                dead_router_check_interval=50\n\
                options kptl4lnd peer_credits=32 ntx=8192\n\
                options libcfs cpu_pattern=\"0[0-15] 1[18-33] 2[34-49] 3[50-65]\"\n";
    let (params, problems) = read(text);
    assert_eq!(
        problems,
        [
            "lustre.conf:1: options lnet check_router_before_use=1: unknown parameter (did you \
             mean check_routers_before_use?): lnet has no such parameter (the kernel ignores it \
             with a warning)",
            "lustre.conf:1: options lnet live_router_check_interval=107: live_router_check_interval \
             and dead_router_check_interval have been deprecated. Use alive_router_check_interval \
             instead. Ignoring these deprecated parameters (ulnetd refuses what it would ignore)",
            "lustre.conf:1: options lnet dead_router_check_interval=50: live_router_check_interval \
             and dead_router_check_interval have been deprecated. Use alive_router_check_interval \
             instead. Ignoring these deprecated parameters (ulnetd refuses what it would ignore)",
            "lustre.conf:2: options kptl4lnd peer_credits ntx: ulnet cannot drive the kptl4lnd \
             LND: its networks (ptlf, bxi3f) need Portals 4 hardware",
        ]
    );
    // The pattern is kept for the daemon, which builds the table over the host's CPUs.
    let pattern = params.cpu_pattern.as_ref().unwrap();
    assert_eq!(pattern.value, "0[0-15] 1[18-33] 2[34-49] 3[50-65]");
    assert_eq!(pattern.origin.line, 3);
    // What maps: discovery off, health off (which takes the retry count to 0), the net as
    // the kernel parses it, the routes in the routing model's route block, for the daemon
    // to treat as it treats that block.
    assert!(!params.settings.discovery);
    assert_eq!(params.settings.health_sensitivity, 0);
    assert_eq!(params.settings.retry_count, 0);
    assert_eq!(params.networks.as_ref().unwrap().value[0].net.to_string(), "ptlf");
    assert_eq!(params.routing.routes.len(), 5);
    assert_eq!(params.routing.routes[4].gateway.to_string(), "5@ptlf");
    let blocks: Vec<&str> = params.blocks.iter().map(|(block, _)| *block).collect();
    assert_eq!(blocks, ["route"]);
}

#[test]
fn a_file_too_large_is_refused() {
    let huge = "#".repeat(MAX_MODPROBE_LEN + 1);
    assert_eq!(
        problem(&huge),
        format!("lustre.conf:0: file: {} bytes, at most {MAX_MODPROBE_LEN} are read", huge.len())
    );
    let long = format!("options lnet networks=\"{}\"\n", "t".repeat(MAX_STRING_PARAM_LEN + 1));
    assert!(problem(&long).ends_with("string parameter too long (1025 bytes, at most 1024)"));
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    /// Pieces modprobe.d text is made of, good and bad.
    fn piece() -> impl Strategy<Value = String> {
        let names: Vec<String> = table::PARAMS.iter().map(|p| p.name.to_string()).collect();
        prop_oneof![
            Just("options lnet ".to_string()),
            Just("options ksocklnd ".to_string()),
            Just("options libcfs ".to_string()),
            Just("options ko2iblnd ".to_string()),
            Just("install lnet x\n".to_string()),
            prop::sample::select(names),
            Just("=".to_string()),
            Just("\"".to_string()),
            Just("'".to_string()),
            Just("\\\n".to_string()),
            Just("#".to_string()),
            Just("\n".to_string()),
            Just(" ".to_string()),
            "[ -~]{0,8}",
            "-?(0x)?[0-9]{1,12}",
        ]
    }

    proptest! {
        #[test]
        fn any_text_reads_without_panic_and_problems_name_real_lines(
            pieces in prop::collection::vec(piece(), 0..40)
        ) {
            let text: String = pieces.concat();
            let (_, problems) = parse(&[Source { name: "f", text: &text }]);
            let lines = text.split('\n').count();
            for problem in problems {
                prop_assert!(problem.origin.line >= 1 && problem.origin.line <= lines, "{problem}");
            }
        }
    }
}

#[test]
fn enable_sysctl_setup_is_an_int_acted_on_at_one() {
    assert!(!ok("options lnet enable_sysctl_setup=0\n").enable_sysctl_setup);
    assert!(ok("options lnet enable_sysctl_setup=1\n").enable_sysctl_setup);
    // The script compares the text with "1": other numbers leave the host alone.
    assert!(!ok("options lnet enable_sysctl_setup=2\n").enable_sysctl_setup);
    assert!(problem("options lnet enable_sysctl_setup=yes\n").contains("enable_sysctl_setup"));
}
