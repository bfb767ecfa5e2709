use std::net::Ipv4Addr;

use proptest::prelude::*;
use ulnet_proto::addr::{LndType, Net, Nid};

use super::export::{backup, peer_ni_order};
use super::*;
use crate::grammar::parse_cpts;

fn tcp(a: u8, b: u8, c: u8, d: u8) -> Nid {
    Nid::ipv4(Net::TCP, Ipv4Addr::new(a, b, c, d))
}

fn add(text: &str) -> Imported {
    import(text, ImportMode::Add).unwrap()
}

fn add_err(text: &str) -> ImportError {
    import(text, ImportMode::Add).unwrap_err()
}

/// The backup of docs/protocol/cli.md §3.10 (its `global:` completed with the defaults).
const BACKUP: &str = "\
net:
-     net type: tcp
      local NI(s):
      -     interfaces:
                  0: eth0
            tunables:
                  peer_timeout: 180
                  peer_credits: 8
                  peer_buffer_credits: 0
                  credits: 256
            lnd tunables:
                  conns_per_peer: 1
                  tos: -1
            CPT: \"[0,1]\"
route:
-     net: o2ib
      gateway: 10.0.0.5@tcp
      hop: -1
      priority: 0
peer:
-     primary nid: 10.0.0.5@tcp
      Multi-Rail: false
      peer ni:
      -     nid: 10.0.0.5@tcp
global:
    numa_range: 0
    max_interfaces: 4096
    discovery: 1
    drop_asym_route: 0
    retry_count: 2
    transaction_timeout: 150
    health_sensitivity: 100
    recovery_interval: 1
    router_sensitivity: 100
    lnd_timeout: 49
    response_tracking: 3
    recovery_limit: 0
    max_recovery_ping_interval: 900
";

#[test]
fn backup_from_cli_md_round_trips() {
    let imported = add(BACKUP);
    assert_eq!(imported.warnings, Vec::<String>::new());
    let config = &imported.config;
    assert_eq!(config.nets.len(), 1);
    assert_eq!(config.nets[0].nis[0].interfaces[0].name, "eth0");
    // An NI's CPT binds that NI (its interfaces), not the net.
    assert_eq!(config.nets[0].cpts, None);
    assert_eq!(config.nets[0].nis[0].interfaces[0].cpts, parse_cpts("[0,1]").ok());
    assert_eq!(config.routes[0].gateway, tcp(10, 0, 0, 5));
    assert_eq!(config.routes[0].hops, None);
    assert_eq!(config.peers[0].multi_rail, Some(false));
    assert_eq!(config.global.len(), 13);

    let mut settings = GlobalSettings::default();
    settings.apply(config).unwrap();
    assert_eq!(backup(config, &settings, 2), BACKUP);
}

/// Two NIs named by NID alone, each with its own `CPT:` (before or after the NID): each binds
/// its own NI, as the kernel reads a local NI's CPT with that NI; the net keeps none.
#[test]
fn cpt_of_an_ni_named_by_nid_binds_that_ni() {
    let text = "\
net:
-     net type: tcp
      local NI(s):
      -     nid: 10.0.0.1@tcp
            CPT: \"[0]\"
      -     CPT: \"[1]\"
            nid: 10.0.0.2@tcp
";
    let imported = add(text);
    let net = &imported.config.nets[0];
    assert_eq!(net.cpts, None);
    assert_eq!(net.nis[0].cpts, parse_cpts("[0]").ok());
    assert_eq!(net.nis[1].cpts, parse_cpts("[1]").ok());
}

#[test]
fn round_trip_with_routing_peers_and_udsp() {
    let text = "\
net:
-     net type: tcp1
      local NI(s):
      -     interfaces:
                  0: eth1
            tunables:
                  peer_timeout: 60
                  peer_credits: 16
                  peer_buffer_credits: 4
                  credits: 512
            lnd tunables:
                  conns_per_peer: 4
                  tos: 104
            CPT: \"[1]\"
      -     interfaces:
                  0: eth2
            tunables:
                  peer_timeout: 60
                  peer_credits: 16
                  peer_buffer_credits: 4
                  credits: 512
            lnd tunables:
                  conns_per_peer: 4
                  tos: 104
            CPT: \"[1]\"
route:
-     net: o2ib
      gateway: 10.0.0.5@tcp1
      hop: 3
      priority: 2
peer:
-     primary nid: 24@gni
      Multi-Rail: true
      peer ni:
      -     nid: 24@gni
      -     nid: 11@gni
      -     nid: 10.0.0.9@tcp
routing:
    enable: 1
buffers:
    tiny: 2048
    small: 16384
    large: 1024
global:
    numa_range: 1
    max_interfaces: 200
    discovery: 0
    drop_asym_route: 1
    retry_count: 0
    transaction_timeout: 10
    health_sensitivity: 0
    recovery_interval: 1
    router_sensitivity: 50
    lnd_timeout: 9
    response_tracking: 1
    recovery_limit: 5
    max_recovery_ping_interval: 30
udsp:
    - idx: 0
      src: tcp1
      action:
          priority: 1
    - idx: 1
      src: 10.0.0.[1-2]@tcp1
      dst: o2ib
    - idx: 2
      dst: tcp
      rte: \"[0-255].[0-255].[0-255].[0-255]@tcp\"
";
    let imported = add(text);
    assert_eq!(imported.warnings, Vec::<String>::new());
    let mut settings = GlobalSettings::default();
    settings.apply(&imported.config).unwrap();
    assert_eq!(backup(&imported.config, &settings, 2), text);
}

#[test]
fn import_accepts_lnet_conf_shapes() {
    // The cYAML dialect of lustre/conf/lnet.conf: 4-space indents, "True", quoted CPT.
    let text = "\
net:
    - net type: o2ib1
      local NI(s):
        - nid: 172.16.1.4@o2ib1
          interfaces:
              0: ib0
          lnd tunables:
              peercredits_hiw: 64
              map_on_demand: 32
              fmr_cache: 1
          CPT: \"[0,1]\"
peer:
    - primary nid: 192.168.1.2@o2ib
      Multi-Rail: True
      peer ni:
        - nid: 192.168.1.2@o2ib
        - nid: 192.168.2.2@o2ib
";
    let config = add(text).config;
    let o2ib1 = Net::new(LndType::O2IB, 1);
    assert_eq!(config.nets[0].net, o2ib1);
    assert_eq!(config.nets[0].nis[0].nid, Some(Nid::ipv4(o2ib1, Ipv4Addr::new(172, 16, 1, 4))));
    assert_eq!(config.nets[0].lnd_tunables.peercredits_hiw, Some(64));
    // 32 is not a yes/no word: lnetctl leaves map_on_demand alone.
    assert_eq!(config.nets[0].lnd_tunables.map_on_demand, None);
    assert_eq!(config.peers[0].multi_rail, Some(true));
    assert_eq!(config.peers[0].nis.as_ref().map(Vec::len), Some(2));
}

#[test]
fn full_export_imports_with_show_keys_skipped() {
    let text = "\
net:
-     net type: lo
      local NI(s):
      -     nid: 0@lo
            status: up
-     net type: tcp
      local NI(s):
      -     nid: 10.0.0.1@tcp
            status: up
            interfaces:
                  0: eth0
            statistics:
                  send_count: 7
            tunables:
                  peer_timeout: 180
            lnd tunables:
                  conns_per_peer: 1
                  timeout: 50
                  tos: -1
            dev cpt: -1
            CPT: \"[0,1]\"
route:
-     net: o2ib
      gateway: 10.0.0.5@tcp
      hop: -1
      priority: 0
      state: up
      type: single-hop
";
    let imported = add(text);
    // lnetctl's own warning for the read-only socklnd timeout.
    assert_eq!(imported.warnings, ["Ignoring unrecognized key 'timeout' for 'lnd tunables'"]);
    let config = imported.config;
    assert_eq!(config.nets.len(), 1, "lo is implicit");
    assert_eq!(config.nets[0].nis[0].nid, Some(tcp(10, 0, 0, 1)));
    assert_eq!(config.routes[0].alive, Some(true));
}

#[test]
fn cpt_forms() {
    let cpts = |value: &str| {
        let text = format!("net:\n- net type: tcp\n  interfaces: {{0: eth0}}\n  CPT: {value}\n");
        import(&text, ImportMode::Add)
            .map(|i| i.config.nets[0].cpts.clone().map(|c| c.values().collect::<Vec<_>>()))
    };
    assert_eq!(cpts("\"[0-3]\""), Ok(Some(vec![0, 1, 2, 3])));
    assert_eq!(cpts("[0-1, 3]"), Ok(Some(vec![0, 1, 3])));
    assert_eq!(cpts("2"), Ok(Some(vec![2])));
    // test 265
    assert_eq!(cpts("\"[1-0]\""), Err(ImportError::BadCpt("[1-0]".into())));
    assert_eq!(cpts("\"[]\""), Err(ImportError::BadCpt("[]".into())));
    assert_eq!(cpts("[]"), Err(ImportError::MissingCpt));
    assert_eq!(cpts("[[0]]"), Err(ImportError::MissingCpt));
    assert_eq!(cpts("[0, [1]]"), Err(ImportError::MalformedCpt));
    assert_eq!(cpts("{a: 1}"), Err(ImportError::CptNotScalarOrSequence));
    assert_eq!(cpts("[x]"), Err(ImportError::BadCpt("x".into())));
}

#[test]
fn interfaces_with_cpts_and_nids() {
    let config = add(
        "net:\n- net type: tcp\n  local NI(s):\n  - nid: 127.0.0.2@tcp\n    interfaces:\n      0: lo[0]\n      1: eth1\n",
    )
    .config;
    let ni = &config.nets[0].nis[0];
    assert_eq!(ni.nid, Some(tcp(127, 0, 0, 2)));
    assert_eq!(
        ni.interfaces[0],
        InterfaceConfig { name: "lo".into(), cpts: parse_cpts("[0]").ok() }
    );
    assert_eq!(ni.interfaces[1].cpts, None);
}

#[test]
fn global_keys_anywhere_and_invalid_ones() {
    let config = add("numa_range: 2\nglobal:\n  max_intf: 300\n  discovery: 0x0\n").config;
    assert_eq!(
        config.global,
        [(GlobalKey::NumaRange, 2), (GlobalKey::MaxInterfaces, 300), (GlobalKey::Discovery, 0)]
    );
    // test 27
    assert_eq!(add_err("global:\n  foo: 1\n"), ImportError::InvalidKey("foo".into()));
    assert_eq!(add_err("statistics:\n  a: 1\n"), ImportError::InvalidKey("statistics".into()));
    assert_eq!(add_err("global:\n  numa_range:\n"), ImportError::NoValue("numa_range".into()));
    assert_eq!(
        add_err("global:\n  numa_range: abc\n"),
        ImportError::InvalidValue { key: "numa_range".into(), value: "abc".into() }
    );
    assert_eq!(
        add_err("global:\n  numa_range: [1]\n"),
        ImportError::InvalidValue { key: "numa_range".into(), value: String::new() }
    );
}

#[test]
fn exec_mode_vocabulary() {
    let text = "ping:\n  nids:\n    0: 10.0.0.1@tcp\n    1: 10.0.0.[2-3]@tcp\n  timeout: 5\ndiscover:\n  nids: [24@gni]\n";
    let config = import(text, ImportMode::Exec).unwrap().config;
    assert_eq!(
        config.exec,
        [
            ExecCommand::Ping {
                nids: vec!["10.0.0.1@tcp".into(), "10.0.0.[2-3]@tcp".into()],
                timeout: Some(5),
                source: None
            },
            ExecCommand::Discover { nids: vec!["24@gni".into()] },
        ]
    );
    assert_eq!(add_err(text), ImportError::InvalidKey("ping".into()));
    assert_eq!(
        import("peer:\n- primary nid: 1.1.1.1@tcp\n", ImportMode::Exec).unwrap_err(),
        ImportError::InvalidKey("peer".into())
    );
    assert_eq!(
        import("ping:\n  timeout: 5\n", ImportMode::Exec).unwrap_err(),
        ImportError::ExecWithoutNids
    );
}

#[test]
fn net_item_errors() {
    use ImportError::*;
    assert_eq!(
        add_err("net:\n- interfaces: {0: eth0}\n  net type: tcp\n"),
        ExpectedNetType("interfaces".into())
    );
    assert_eq!(add_err("ip2nets:\n- net type: tcp\n"), ExpectedNetSpec("net type".into()));
    assert_eq!(add_err("net:\n- {}\n"), ExpectedNetType(String::new()));
    assert_eq!(add_err("net:\n- net type: elan\n"), InvalidNetwork("elan".into()));
    assert_eq!(add_err("ip2nets:\n- net-spec: tcp\n  local NI(s): []\n"), LocalNiInIp2nets);
    assert_eq!(add_err("net:\n- net type: tcp\n  ip-range: {0: 1.1.1.1}\n"), IpRangeInNet);
    assert_eq!(add_err("net:\n- net type: tcp\n  interfaces: [eth0]\n"), InterfacesNotMapping);
    assert_eq!(
        add_err("net:\n- net type: tcp\n  interfaces: {0: \"eth0[x]\"}\n"),
        BadInterface("eth0[x]".into())
    );
    assert_eq!(
        add_err("net:\n- net type: tcp\n  interfaces: {0: \"eth0[0\"}\n"),
        BadInterface("eth0[0".into())
    );
    let long = "e".repeat(200);
    assert_eq!(
        add_err(&format!("net:\n- net type: tcp\n  interfaces: {{0: {long}}}\n")),
        BadInterface(long)
    );
    assert_eq!(add_err("ip2nets:\n- net-spec: tcp\n  ip-range: [1.1.1.1]\n"), IpRangeNotMapping);
    assert_eq!(
        add_err("ip2nets:\n- net-spec: tcp\n  ip-range: {0: 1.1.1}\n"),
        BadIpRange("1.1.1".into())
    );
    assert_eq!(add_err("net:\n- net type: tcp\n  tunables: 5\n"), TunablesNotMapping);
    assert_eq!(add_err("net:\n- net type: tcp\n  lnd tunables: [1]\n"), LndTunablesNotMapping);
    assert_eq!(
        add_err("net:\n- net type: tcp\n  tunables: {peer_credits: x}\n"),
        InvalidValue { key: "peer_credits".into(), value: "x".into() }
    );
    // test 230
    assert_eq!(
        add_err("net:\n- net type: tcp\n  lnd tunables: {conns_per_peer: 128}\n"),
        ConnsPerPeerRange(128)
    );
    assert_eq!(add_err("net:\n- net type: tcp\n  lnd tunables: {tos: 256}\n"), TosRange(256));
    assert_eq!(
        add_err("net:\n- net type: o2ib\n  lnd tunables: {map_on_demand: }\n"),
        NoValue("map_on_demand".into())
    );
    assert_eq!(
        add_err("net:\n- net type: tcp\n  local NI(s):\n  - nid: 1@tcp\n"),
        BadLocalNid("1@tcp".into())
    );
    assert_eq!(
        add_err("net:\n- net type: tcp1\n  local NI(s):\n  - nid: 10.0.0.1@tcp\n"),
        NidNotOnNet { nid: tcp(10, 0, 0, 1), net: Net::new(LndType::SOCK, 1) }
    );
    assert_eq!(add_err("net:\n  net type: tcp\n"), ExpectedSequence("net".into()));
    assert_eq!(add_err("net:\n- tcp\n"), ExpectedMapping("net".into()));
    assert_eq!(
        add_err("net:\n- net type: tcp\n  local NI(s): {a: 1}\n"),
        ExpectedSequence("local NI(s)".into())
    );
    assert_eq!(
        add_err("net:\n- net type: tcp\n  local NI(s): [1]\n"),
        ExpectedMapping("local NI(s)".into())
    );
}

#[test]
fn warnings_for_unknown_keys() {
    let imported = add(
        "net:\n- net type: tcp\n  typo: 1\n  tunables: {peer_credits: 8, credit: 3}\n  lnd tunables: {foo: 1}\n",
    );
    assert_eq!(
        imported.warnings,
        [
            "Ignoring unrecognized key 'typo' for 'net'",
            "Ignoring unrecognized key 'credit' for 'tunables'",
            "Ignoring unrecognized key 'foo' for 'lnd tunables'",
        ]
    );
}

#[test]
fn peer_errors() {
    use ImportError::*;
    assert_eq!(add_err("peer:\n- Multi-Rail: true\n"), MissingPrimaryNid);
    assert_eq!(add_err("peer:\n- primary nid: 1@tcp\n"), BadPrimaryNid("1@tcp".into()));
    // test 99b
    assert_eq!(
        add_err("peer:\n- primary nid: 1.1.1.1@tcp\n  Multi-Rail: Foobar\n"),
        BadMultiRail("Foobar".into())
    );
    assert_eq!(
        add_err("peer:\n- primary nid: 1.1.1.1@tcp\n  peer state: x\n"),
        BadPeerState("x".into())
    );
    assert_eq!(
        add_err("peer:\n- primary nid: 1.1.1.1@tcp\n  peer ni: {a: 1}\n"),
        PeerNisNotSequence
    );
    assert_eq!(
        add_err("peer:\n- primary nid: 1.1.1.1@tcp\n  peer ni:\n  - nid: x\n"),
        BadPeerNid("x".into())
    );
    assert_eq!(
        add_err(
            "peer:\n- primary nid: 1.1.1.1@tcp\n  peer ni:\n  - nid: 1.1.1.2@tcp\n    health stats: 5\n"
        ),
        HealthNotMapping
    );
    // A full export's health stats carry read-only counters next to `health value`: they
    // are skipped so that the export imports back; any other key is still refused.
    let full = add(
        "peer:\n- primary nid: 1.1.1.1@tcp\n  peer ni:\n  - nid: 1.1.1.1@tcp\n    state: NA\n    refcount: 1\n    health stats: {health value: 900, dropped: 0, timeout: 0, error: 0, network timeout: 0, ping_count: 0, next_ping: 0}\n",
    );
    assert_eq!(full.config.peers[0].nis.as_ref().unwrap()[0].health_value, Some(900));
    assert!(full.unknown_keys.is_empty(), "{:?}", full.unknown_keys);
    assert_eq!(
        add_err(
            "peer:\n- primary nid: 1.1.1.1@tcp\n  peer ni:\n  - health stats: {health value: 1000, sickness: 0}\n"
        ),
        WrongHealthKey("sickness".into())
    );
    assert_eq!(
        add_err(
            "peer:\n- primary nid: 1.1.1.1@tcp\n  peer ni:\n  - health stats: {health value: high}\n"
        ),
        BadHealthValue("high".into())
    );
    let peer = &add("peer:\n- primary nid: 1.1.1.1@tcp\n  Multi-Rail: no\n  peer state: 1048585\n  peer ni:\n  - nid: 1.1.1.2@tcp\n    health stats: {health value: 2000}\n").config.peers[0];
    assert_eq!(peer.multi_rail, Some(false));
    assert_eq!(peer.state, Some(1_048_585));
    assert_eq!(peer.nis.as_ref().unwrap()[0].health_value, Some(1000));
    assert_eq!(add("peer:\n- primary nid: 1.1.1.1@tcp\n").config.peers[0].nis, None);
}

#[test]
fn route_errors() {
    use ImportError::*;
    assert_eq!(add_err("route:\n- gateway: 1.1.1.1@tcp\n"), MissingRouteNet);
    assert_eq!(add_err("route:\n- net: o2ib\n"), MissingGateway);
    assert_eq!(add_err("route:\n- net: elan\n"), BadRouteNet("elan".into()));
    assert_eq!(add_err("route:\n- net: lo\n"), LoRoute);
    assert_eq!(add_err("route:\n- net: o2ib\n  gateway: 1@tcp\n"), BadGateway("1@tcp".into()));
    assert_eq!(
        add_err("route:\n- net: o2ib\n  gateway: 1.1.1.1@tcp\n  hop: x\n"),
        HopNotInteger("x".into())
    );
    assert_eq!(add_err("route:\n- net: o2ib\n  gateway: 1.1.1.1@tcp\n  hop: 0\n"), HopRange(0));
    assert_eq!(
        add_err("route:\n- net: o2ib\n  gateway: 1.1.1.1@tcp\n  priority: x\n"),
        PriorityNotInteger("x".into())
    );
    assert_eq!(
        add_err("route:\n- net: o2ib\n  gateway: 1.1.1.1@tcp\n  priority: -1\n"),
        NegativePriority(-1)
    );
    assert_eq!(
        add_err("route:\n- net: o2ib\n  gateway: 1.1.1.1@tcp\n  state: sideways\n"),
        BadRouteState("sideways".into())
    );
    assert_eq!(
        add_err("route:\n- net: o2ib\n  gateway: 1.1.1.1@tcp\n  notify_time: soon\n"),
        BadNotifyTime("soon".into())
    );
    let route = add("route:\n- net: o2ib\n  gateway: 1.1.1.1@tcp\n  hop: 255\n  priority: 010\n")
        .config
        .routes[0];
    assert_eq!((route.hops, route.priority), (Some(255), 8));
}

#[test]
fn routing_buffers_numa_udsp() {
    use ImportError::*;
    let imported = add(
        "routing: {enable: yes}\nbuffers: {tiny: 512, small: -1}\nnuma: {range: 3}\nudsp:\n- src: tcp\n- idx: 1\n  dst: o2ib\n  priority: 4\n",
    );
    // The item without idx is dropped, as lnetctl drops it, and listed as skipped.
    let skipped: Vec<String> = imported.unknown_keys.iter().map(ToString::to_string).collect();
    assert_eq!(skipped, [format!("udsp: unknown key '{UDSP_ITEM_WITHOUT_IDX}'")]);
    let config = imported.config;
    assert_eq!(config.routing, Some(true));
    assert_eq!(config.buffers, Some(Buffers { tiny: Some(512), small: None, large: None }));
    assert_eq!(config.numa_range, Some(3));
    assert_eq!(
        config.udsp,
        [UdspConfig { idx: 1, src: None, dst: Some("o2ib".into()), rte: None, priority: Some(4) }]
    );
    assert_eq!(add_err("buffers: {tiny: -2}\n"), BufferRange(-2));
    assert_eq!(
        add_err("routing: {enable: maybe}\n"),
        InvalidValue { key: "enable".into(), value: "maybe".into() }
    );
    assert_eq!(add_err("routing: 1\n"), ExpectedMapping("routing".into()));
    assert_eq!(add_err("udsp:\n- idx: x\n"), InvalidValue { key: "idx".into(), value: "x".into() });
}

#[test]
fn documents_and_limits() {
    use ImportError::*;
    let config = add("global: {numa_range: 1}\n---\nglobal: {numa_range: 2}\n").config;
    assert_eq!(config.global, [(GlobalKey::NumaRange, 1), (GlobalKey::NumaRange, 2)]);
    assert_eq!(add("").config, Config::default());
    assert_eq!(add_err("- 1\n"), NotAMapping);
    assert!(matches!(add_err("net: [\n"), Yaml(_)));
    let huge = " ".repeat(MAX_IMPORT_LEN + 1);
    assert_eq!(add_err(&huge), TooLarge(huge.len()));
}

#[test]
fn import_error_reports() {
    let error = add_err("global:\n  foo: 1\n");
    assert_eq!(
        error.report(ImportMode::Add),
        "---\nadd:\n-     import:\n      errno: -22\n      descr: ! \"invalid key 'foo'\"\n...\n"
    );
    assert!(error.report(ImportMode::Del).starts_with("---\ndel:\n"));
    assert!(error.report(ImportMode::Show).starts_with("---\nshow:\n"));
    assert_eq!(ImportError::MissingCpt.errno(), -61);
    assert_eq!(ImportError::LoRoute.errno(), -13);
}

// --- global settings -----------------------------------------------------------------------

#[test]
fn global_defaults_and_lnd_timeout() {
    let settings = GlobalSettings::default();
    assert_eq!(settings.lnd_timeout(), 49);
    assert_eq!(settings.show(), crate::render::tests::default_global());
    for key in GlobalKey::ALL {
        assert_eq!(GlobalKey::from_name(key.name()), Some(key));
    }
    assert_eq!(GlobalKey::from_name("max_intf"), Some(GlobalKey::MaxInterfaces));
    assert_eq!(GlobalKey::MaxInterfaces.deleted_value(), Some(4096));
    assert_eq!(GlobalKey::RetryCount.deleted_value(), None);
}

#[test]
fn global_validation_matches_lnetctl_and_the_kernel() {
    let mut s = GlobalSettings::default();
    let err = |s: &mut GlobalSettings, key, value| s.set(key, value).unwrap_err();

    // test 104
    let e = err(&mut s, GlobalKey::ResponseTracking, 10);
    assert_eq!((e.rc, e.descr.as_str()), (-22, "Valid values are: 0, 1, 2, or 3"));
    assert_eq!(err(&mut s, GlobalKey::ResponseTracking, -10).entity, "response_tracking");
    assert_eq!(
        err(&mut s, GlobalKey::RecoveryLimit, -1).descr,
        "Must be greater than or equal to 0"
    );
    let e = err(&mut s, GlobalKey::MaxRecoveryPingInterval, 0);
    assert_eq!(
        (e.entity, e.descr.as_str()),
        ("maximum recovery ping interval", "must be strictly positive")
    );
    let e = err(&mut s, GlobalKey::NumaRange, -5);
    assert_eq!(
        (e.rc, e.descr.as_str()),
        (-22, "cannot configure numa_range to -5: Invalid argument")
    );
    let e = err(&mut s, GlobalKey::TransactionTimeout, 2);
    assert_eq!(
        (e.rc, e.descr.as_str()),
        (-61, "cannot configure transaction timeout: Invalid argument")
    );
    assert_eq!(
        err(&mut s, GlobalKey::RetryCount, 151).descr,
        "cannot configure retry count: Invalid argument"
    );
    assert_eq!(
        err(&mut s, GlobalKey::HealthSensitivity, 1001).descr,
        "cannot configure health sensitivity: Invalid argument"
    );
    assert_eq!(
        err(&mut s, GlobalKey::RouterSensitivity, 101).descr,
        "cannot configure router health sensitivity: Invalid argument"
    );
    assert_eq!(
        crate::render::CyamlError {
            entries: vec![err(&mut s, GlobalKey::TransactionTimeout, 0).report()]
        }
        .render(),
        "add:\n    - transaction_timeout:\n          errno: -61\n          descr: \"cannot configure transaction timeout: Invalid argument\"\n"
    );

    // Accepted values and their side effects.
    s.set(GlobalKey::MaxInterfaces, 3).unwrap();
    assert_eq!(s.max_interfaces, 4096);
    s.set(GlobalKey::Discovery, 7).unwrap();
    assert!(s.discovery);
    s.set(GlobalKey::HealthSensitivity, 0).unwrap();
    assert_eq!(s.retry_count, 0);
    assert!(s.set(GlobalKey::RetryCount, 1).is_err(), "health feature off");
    s.set(GlobalKey::RecoveryInterval, 77).unwrap();
    assert_eq!(s.value(GlobalKey::RecoveryInterval), 1);
    s.set(GlobalKey::LndTimeout, 5).unwrap();
    assert_eq!(s.lnd_timeout(), 149);
}

#[test]
fn restoring_every_global_show_value_is_accepted() {
    // sanity-lnet's restore_lnet_params: `lnetctl set` of every key in `global show` order.
    let original =
        GlobalSettings { retry_count: 3, transaction_timeout: 50, ..GlobalSettings::default() };
    let mut s = GlobalSettings::default();
    for key in GlobalKey::ALL {
        s.set(key, original.value(key)).unwrap();
    }
    assert_eq!(s, original);
}

// --- interface matching --------------------------------------------------------------------

fn host() -> Vec<HostInterface> {
    vec![
        HostInterface {
            name: "lo".into(),
            up: true,
            addresses: vec!["127.0.0.1".parse().unwrap()],
        },
        HostInterface {
            name: "eth0".into(),
            up: true,
            addresses: vec!["192.168.0.7".parse().unwrap()],
        },
        HostInterface {
            name: "eth1".into(),
            up: false,
            addresses: vec!["10.0.0.1".parse().unwrap()],
        },
        HostInterface {
            name: "ib0".into(),
            up: true,
            addresses: vec!["2001:db8::7".parse().unwrap(), "10.1.0.1".parse().unwrap()],
        },
    ]
}

fn iface(name: &str) -> InterfaceConfig {
    InterfaceConfig { name: name.into(), cpts: None }
}

#[test]
fn interface_matching_rules() {
    let range = |t: &str| IpPattern::parse(t).unwrap();
    assert_eq!(match_interfaces(Net::TCP, &[], &[], &host()), Ok(vec![iface("eth0")]));
    assert_eq!(match_interfaces(Net::TCP, &[], &[], &host()[..1]), Err(MatchError::NoUpInterface));
    assert_eq!(
        match_interfaces(Net::TCP, &[], &[range("10.*.*.*")], &host()),
        Ok(vec![iface("ib0")])
    );
    assert_eq!(
        match_interfaces(Net::TCP, &[], &[range("2001:db8::/32"), range("10.1.0.1")], &host()),
        Ok(vec![iface("ib0")])
    );
    assert_eq!(
        match_interfaces(Net::TCP, &[], &[range("1.*.*.*")], &host()),
        Err(MatchError::NoPatternMatch)
    );
    assert_eq!(match_interfaces(Net::TCP, &[iface("eth0")], &[], &host()), Ok(vec![iface("eth0")]));
    assert_eq!(
        match_interfaces(Net::TCP, &[iface("eth9")], &[], &host()),
        Err(MatchError::NoSuchInterface("eth9".into()))
    );
    assert_eq!(
        match_interfaces(Net::TCP, &[iface("eth1")], &[], &host()),
        Err(MatchError::InterfaceDown("eth1".into()))
    );
    assert_eq!(
        match_interfaces(Net::TCP, &[iface("eth0")], &[range("10.*.*.*")], &host()),
        Err(MatchError::OutsideRanges("eth0".into()))
    );
    let kfi = Net::new(LndType::KFI, 0);
    assert_eq!(match_interfaces(kfi, &[iface("cxi0")], &[], &host()), Ok(vec![iface("cxi0")]));
}

#[test]
fn ip2nets_rules_for_one_net_are_merged() {
    let text = "\
ip2nets:
- net-spec: tcp
  ip-range:
    0: 10.9.*.*
- net-spec: tcp
  interfaces:
    0: eth0
- net-spec: tcp
  interfaces:
    0: ib0
- net-spec: o2ib
  ip-range:
    0: 10.1.0.[1-3]
  tunables:
    peer_credits: 32
";
    let config = add(text).config;
    assert_eq!(config.ip2nets.len(), 4);
    let nets = resolve_ip2nets(&config.ip2nets, &host()).unwrap();
    assert_eq!(nets.len(), 2);
    assert_eq!(nets[0].nis[0].interfaces, [iface("eth0")]);
    // The third rule adds ib0 to tcp.
    assert_eq!(nets[0].nis[1].interfaces, [iface("ib0")]);
    assert_eq!(nets[0].nis.len(), 2);
    assert_eq!(nets[1].net, Net::new(LndType::O2IB, 0));
    assert_eq!(nets[1].nis[0].interfaces, [iface("ib0")]);
    assert_eq!(nets[1].tunables.peer_credits, Some(32));
    assert_eq!(
        resolve_ip2nets(&config.ip2nets[..1], &host()),
        Err(MatchError::NoIp2netsRulesApplied)
    );
    // A rule repeating an interface an earlier one configured changes nothing (sanity-lnet
    // test 151, "Additional rules for same net should not change config").
    let mut repeated = config.ip2nets[1..2].to_vec();
    repeated.extend_from_slice(&config.ip2nets[1..3]);
    let nets = resolve_ip2nets(&repeated, &host()).unwrap();
    assert_eq!(nets.len(), 1);
    assert_eq!(nets[0].nis.len(), 2, "{nets:?}");
}

#[test]
fn peer_ni_ordering_groups_by_net() {
    // docs/protocol/cli.md §3.2: primary 24@gni plus o2ib, tcp and gni NIDs lists 24@gni, 11@gni, o2ib..., tcp...
    let gni = |n| Nid::new4(Net::new(LndType::GNI, 0), n);
    let o2ib = Nid::ipv4(Net::new(LndType::O2IB, 0), Ipv4Addr::new(1, 1, 1, 1));
    let order = peer_ni_order(gni(24), [o2ib, tcp(2, 2, 2, 2), gni(11), gni(24), o2ib]);
    assert_eq!(order, [gni(24), gni(11), o2ib, tcp(2, 2, 2, 2)]);
}

proptest! {
    #[test]
    fn import_never_panics(text in "[ -~\n]{0,200}") {
        let _ = import(&text, ImportMode::Add);
        let _ = import(&text, ImportMode::Exec);
    }

    #[test]
    fn generated_backups_round_trip(
        nets in prop::collection::btree_map(
            1u16..50,
            (prop::collection::btree_set("[a-z][a-z0-9]{0,6}", 1..3), 1i64..200, -1i64..256, 0i64..128),
            1..4,
        ),
        routes in prop::collection::vec((1u16..50, 1u8..255, any::<u8>(), prop::option::of(1u8..=255), 0u32..9), 0..4),
        numa in 0i64..100,
    ) {
        let mut config = Config::default();
        for (n, (interfaces, credits, tos, conns)) in &nets {
            config.nets.push(NetConfig {
                net: Net::new(LndType::SOCK, *n),
                nis: interfaces.iter().map(|name| LocalNiConfig { nid: None, interfaces: vec![iface(name)], cpts: None }).collect(),
                tunables: Tunables { peer_credits: Some(*credits), ..Tunables::default() },
                lnd_tunables: LndTunables { tos: Some(*tos), conns_per_peer: Some(*conns), ..LndTunables::default() },
                cpts: None,
            });
        }
        for (n, a, b, hops, priority) in routes {
            config.routes.push(RouteConfig {
                net: Net::new(LndType::O2IB, n),
                gateway: tcp(10, a, b, 1),
                hops,
                priority,
                alive: None,
                notify_time: None,
            });
        }
        let mut settings = GlobalSettings::default();
        settings.set(GlobalKey::NumaRange, numa).unwrap();
        let text = backup(&config, &settings, 3);
        let again = import(&text, ImportMode::Add).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        let mut settings_again = GlobalSettings::default();
        settings_again.apply(&again.config).unwrap();
        prop_assert_eq!(backup(&again.config, &settings_again, 3), text);
    }
}

#[test]
fn a_gateway_range_gives_one_route_per_nid() {
    let config = add("route:\n- net: tcp1\n  gateway: 10.0.0.[1-3]@tcp\n  hop: 2\n").config;
    let gateways: Vec<Nid> = config.routes.iter().map(|route| route.gateway).collect();
    assert_eq!(gateways, vec![tcp(10, 0, 0, 1), tcp(10, 0, 0, 2), tcp(10, 0, 0, 3)]);
    assert!(config.routes.iter().all(|route| route.hops == Some(2)));
    let quoted = add("route:\n- net: tcp1\n  gateway: \"[1-5]@gni\"\n").config;
    assert_eq!(quoted.routes.len(), 5);
    assert_eq!(
        add_err("route:\n- net: tcp1\n  gateway: 10.0.0.*@tcp\n"),
        ImportError::BadGateway("10.0.0.*@tcp".into())
    );
}

#[test]
fn skipped_keys_are_listed() {
    let text = "net:\n- net type: tcp\n  frob: 1\n  local NI(s):\n  - nid: 10.0.0.1@tcp\n    \
                tunables: {peer_timeout: 1, bogus: 2}\n    lnd tunables: {timeout: 50}\n\
                peer:\n- primary nid: 1.1.1.1@tcp\n  colour: red\n  peer ni:\n  - nid: 1.1.1.2@tcp\n    mood: 3\n\
                route:\n- net: tcp1\n  gateway: 10.0.0.5@tcp\n  type: single-hop\n  weight: 1\n\
                routing: {enable: 0, fast: 1}\nbuffers: {tiny: 1, huge: 2}\nnuma: {width: 1}\n\
                udsp:\n- idx: 0\n  src: tcp\n  flavour: x\n";
    let imported = add(text);
    let unknown: Vec<String> = imported.unknown_keys.iter().map(ToString::to_string).collect();
    assert_eq!(
        unknown,
        [
            "net: unknown key 'frob'",
            "tunables: unknown key 'bogus'",
            "lnd tunables: unknown key 'timeout'",
            "peer: unknown key 'colour'",
            "peer ni: unknown key 'mood'",
            "route: unknown key 'weight'",
            "routing: unknown key 'fast'",
            "buffers: unknown key 'huge'",
            "numa: unknown key 'width'",
            "udsp: unknown key 'flavour'",
        ]
    );
    // lnetctl's warnings are unchanged.
    assert_eq!(
        imported.warnings,
        [
            "Ignoring unrecognized key 'frob' for 'net'",
            "Ignoring unrecognized key 'bogus' for 'tunables'",
            "Ignoring unrecognized key 'timeout' for 'lnd tunables'",
        ]
    );
}

#[test]
fn a_full_exports_routing_sequence_imports_its_switch() {
    let text = "routing:\n    - cpt[0]:\n          tiny:\n              npages: 0\n              \
                nbuffers: 512\n              credits: 512\n              mincredits: 500\n    \
                - cpt[1]:\n          tiny: {npages: 0}\n    - enable: 1\n\
                buffers:\n    tiny: 1024\n";
    let imported = add(text);
    assert_eq!(imported.config.routing, Some(true));
    assert_eq!(imported.config.buffers.and_then(|buffers| buffers.tiny), Some(1024));
    assert!(imported.unknown_keys.is_empty(), "{:?}", imported.unknown_keys);
    // Anything else in the sequence is still an unknown key; a scalar is still refused.
    let odd = add("routing:\n    - cpt[x]: 1\n    - enable: 0\n");
    assert_eq!(odd.config.routing, Some(false));
    let unknown: Vec<String> = odd.unknown_keys.iter().map(ToString::to_string).collect();
    assert_eq!(unknown, ["routing: unknown key 'cpt[x]'"]);
    assert_eq!(add_err("routing:\n    - 1\n"), ImportError::ExpectedMapping("routing".into()));
}

#[test]
fn udsp_items_become_the_rules_udsp_add_makes() {
    use ulnet_proto::engine::{UdspAction, UdspSpecError};
    let item = |src: Option<&str>, dst: Option<&str>, priority: Option<i64>| UdspConfig {
        idx: 2,
        src: src.map(Into::into),
        dst: dst.map(Into::into),
        rte: None,
        priority,
    };
    let (rule, index) = item(Some("tcp"), None, None).rule().unwrap();
    assert_eq!((rule.action, index), (UdspAction::Priority(0), 2));
    let (rule, _) = item(Some("tcp"), None, Some(0)).rule().unwrap();
    assert_eq!(rule.action, UdspAction::Priority(0));
    let (rule, _) = item(Some("1.1.1.1@tcp"), Some("tcp"), None).rule().unwrap();
    assert_eq!(rule.action, UdspAction::Preferred);
    assert_eq!(item(Some("tcp"), None, Some(-1)).rule(), Err(UdspItemError::BadPriority(-1)));
    assert_eq!(
        UdspConfig { idx: -3, ..item(Some("tcp"), None, None) }.rule(),
        Err(UdspItemError::NegativeIndex(-3))
    );
    assert!(matches!(
        item(Some("bogus"), None, None).rule(),
        Err(UdspItemError::Rule(UdspSpecError::Source(_)))
    ));
}
