use std::net::Ipv4Addr;

use super::*;
use ulnet_proto::addr::LndType;

fn tcp_nid(a: u8, b: u8, c: u8, d: u8) -> Nid {
    Nid::ipv4(Net::TCP, Ipv4Addr::new(a, b, c, d))
}

fn lo_ni() -> LocalNiEntry {
    LocalNiEntry {
        nid: Nid::LO_0,
        up: true,
        interface: None,
        statistics: Statistics::default(),
        udsp: UdspInfo::default(),
        sent: MessageCounts::default(),
        received: MessageCounts::default(),
        dropped: MessageCounts::default(),
        health: LocalNiHealth::default(),
        tunables: NetTunables::default(),
        lnd_tunables: None,
        dev_cpt: 0,
        cpts: vec![0, 1],
    }
}

fn tcp_ni() -> LocalNiEntry {
    LocalNiEntry {
        nid: tcp_nid(192, 168, 1, 2),
        up: true,
        interface: Some("eth0".into()),
        statistics: Statistics {
            send_count: 7,
            recv_count: 5,
            drop_count: 1,
            ..Statistics::default()
        },
        udsp: UdspInfo::default(),
        sent: MessageCounts { put: 3, get: 4, ..MessageCounts::default() },
        received: MessageCounts { put: 2, ack: 3, ..MessageCounts::default() },
        dropped: MessageCounts { hello: 1, ..MessageCounts::default() },
        health: LocalNiHealth { ping_count: 2, next_ping: 1234, ..LocalNiHealth::default() },
        tunables: NetTunables {
            peer_timeout: 180,
            peer_credits: 8,
            peer_buffer_credits: 0,
            credits: 256,
        },
        lnd_tunables: Some(LndTunablesShow::Socklnd { conns_per_peer: 1, timeout: 50, tos: -1 }),
        dev_cpt: -1,
        cpts: vec![0, 1],
    }
}

fn nets() -> Vec<NetEntry> {
    vec![
        NetEntry { net: Net::LO, nis: vec![lo_ni()] },
        NetEntry { net: Net::TCP, nis: vec![tcp_ni()] },
    ]
}

#[test]
fn net_show_level_0() {
    let expected = "\
net:
-     net type: lo
      local NI(s):
      -     nid: 0@lo
            status: up
-     net type: tcp
      local NI(s):
      -     nid: 192.168.1.2@tcp
            status: up
            interfaces:
                  0: eth0
";
    assert_eq!(net_show(&nets(), ShowMode::Show(0)), expected);
}

#[test]
fn net_show_level_1() {
    let mut ni = tcp_ni();
    ni.up = false;
    let out = net_show(&[NetEntry { net: Net::TCP, nis: vec![ni] }], ShowMode::Show(1));
    let expected = "\
net:
-     net type: tcp
      local NI(s):
      -     nid: 192.168.1.2@tcp
            status: down
            interfaces:
                  0: eth0
            statistics:
                  send_count: 7
                  recv_count: 5
                  drop_count: 1
                  put_egress_samples: 0
                  put_egress_min_nsec: 0
                  put_egress_max_nsec: 0
                  put_egress_avg_nsec: 0
                  get_rtt_samples: 0
                  get_rtt_min_nsec: 0
                  get_rtt_max_nsec: 0
                  get_rtt_avg_nsec: 0
                  put_ack_samples: 0
                  put_ack_min_nsec: 0
                  put_ack_max_nsec: 0
                  put_ack_avg_nsec: 0
            tunables:
                  peer_timeout: 180
                  peer_credits: 8
                  peer_buffer_credits: 0
                  credits: 256
            lnd tunables:
                  conns_per_peer: 1
                  timeout: 50
                  tos: -1
            dev cpt: -1
            CPT: \"[0,1]\"
";
    assert_eq!(out, expected);
}

#[test]
fn net_show_levels_2_and_4() {
    insta::assert_snapshot!("net_show_level_3", net_show(&nets(), ShowMode::Show(3)));
    let mut ni = tcp_ni();
    ni.udsp = UdspInfo {
        net_priority: 0,
        nid_priority: 1,
        preferred_gateways: vec![],
        preferred_sources: vec![tcp_nid(10, 0, 0, 1), tcp_nid(10, 0, 0, 2)],
    };
    insta::assert_snapshot!(
        "net_show_level_4",
        net_show(&[NetEntry { net: Net::TCP, nis: vec![ni] }], ShowMode::Show(4))
    );
}

#[test]
fn net_show_o2ib_lnd_tunables_and_no_nets() {
    let mut ni = tcp_ni();
    ni.nid = Nid::ipv4(Net::new(LndType::O2IB, 1), Ipv4Addr::new(10, 1, 0, 1));
    ni.interface = Some("ib0".into());
    ni.lnd_tunables = Some(LndTunablesShow::O2iblnd {
        peercredits_hiw: 4,
        map_on_demand: true,
        concurrent_sends: 8,
        fmr_pool_size: 512,
        fmr_flush_trigger: 384,
        fmr_cache: 1,
        ntx: 512,
        conns_per_peer: 1,
        timeout: 50,
        tos: -1,
    });
    let out =
        net_show(&[NetEntry { net: Net::new(LndType::O2IB, 1), nis: vec![ni] }], ShowMode::Backup);
    let expected = "\
net:
-     net type: o2ib1
      local NI(s):
      -     nid: 10.1.0.1@o2ib1
            interfaces:
                  0: ib0
            tunables:
                  peer_timeout: 180
                  peer_credits: 8
                  peer_buffer_credits: 0
                  credits: 256
            lnd tunables:
                  peercredits_hiw: 4
                  map_on_demand: true
                  concurrent_sends: 8
                  fmr_pool_size: 512
                  fmr_flush_trigger: 384
                  fmr_cache: 1
                  ntx: 512
                  conns_per_peer: 1
                  tos: -1
            CPT: \"[0,1]\"
";
    assert_eq!(out, expected);
    assert_eq!(net_show(&[], ShowMode::Show(0)), "");
}

fn peer() -> PeerEntry {
    let ni = |nid: Nid| PeerNiEntry {
        nid,
        udsp: UdspInfo::default(),
        state: PeerNiState::NotApplicable,
        max_ni_tx_credits: 8,
        available_tx_credits: -2,
        min_tx_credits: 7,
        tx_q_num_of_buf: 0,
        available_rtr_credits: 8,
        min_rtr_credits: 8,
        refcount: 4,
        statistics: Statistics { send_count: 3, ..Statistics::default() },
        sent: MessageCounts::default(),
        received: MessageCounts::default(),
        dropped: MessageCounts::default(),
        health: PeerNiHealth::default(),
    };
    PeerEntry {
        primary_nid: tcp_nid(10, 0, 0, 5),
        multi_rail: true,
        state: 1_048_585,
        nis: vec![ni(tcp_nid(10, 0, 0, 5)), ni(tcp_nid(10, 0, 0, 6))],
    }
}

#[test]
fn peer_show_level_0() {
    let expected = "\
peer:
-     primary nid: 10.0.0.5@tcp
      Multi-Rail: true
      peer ni:
      -     nid: 10.0.0.5@tcp
            state: NA
      -     nid: 10.0.0.6@tcp
            state: NA
";
    assert_eq!(peer_show(&[peer()], ShowMode::Show(0)), expected);
    assert_eq!(peer_show(&[], ShowMode::Show(0)), "");
}

#[test]
fn peer_show_verbose_levels() {
    insta::assert_snapshot!("peer_show_level_1", peer_show(&[peer()], ShowMode::Show(1)));
    insta::assert_snapshot!("peer_show_level_3", peer_show(&[peer()], ShowMode::Show(3)));
}

#[test]
fn peer_list_counts_like_test_28() {
    let out = peer_list(&[tcp_nid(10, 0, 0, 5), Nid::new4(Net::new(LndType::GNI, 0), 24)]);
    assert_eq!(out, "peer list:\n-     nid: 10.0.0.5@tcp\n-     nid: 24@gni\n");
    assert_eq!(
        out.lines().filter(|l| l.trim_start_matches('-').trim_start().starts_with("nid:")).count(),
        2
    );
    assert_eq!(peer_list(&[]), "");
}

#[test]
fn route_show_plain_and_verbose() {
    let routes = [
        RouteEntry {
            net: Net::new(LndType::O2IB, 0),
            gateway: tcp_nid(10, 0, 0, 5),
            hop: -1,
            priority: 0,
            up: true,
            multi_hop: false,
        },
        RouteEntry {
            net: Net::new(LndType::SOCK, 2),
            gateway: tcp_nid(10, 0, 0, 6),
            hop: 2,
            priority: 1,
            up: false,
            multi_hop: true,
        },
    ];
    assert_eq!(
        route_show(&routes, ShowMode::Show(0)),
        "route:\n-     net: o2ib\n      gateway: 10.0.0.5@tcp\n-     net: tcp2\n      gateway: 10.0.0.6@tcp\n"
    );
    let expected = "\
route:
-     net: o2ib
      gateway: 10.0.0.5@tcp
      hop: -1
      priority: 0
      state: up
      type: single-hop
-     net: tcp2
      gateway: 10.0.0.6@tcp
      hop: 2
      priority: 1
      state: down
      type: multi-hop
";
    assert_eq!(route_show(&routes, ShowMode::Show(1)), expected);
    assert_eq!(route_show(&[], ShowMode::Show(1)), "");
}

#[test]
fn ping_and_discover() {
    let replies = [PingReply {
        primary_nid: tcp_nid(10, 0, 0, 2),
        multi_rail: true,
        nids: vec!["10.0.0.2@tcp".into(), "10.0.1.2@tcp".into()],
    }];
    let failures = [PingFailure { target: "10.0.0.9@tcp".into(), errno: -110 }];
    let expected = "\
ping:
- primary nid: 10.0.0.2@tcp
  Multi-Rail: true
  peer_ni:
  - nid: 10.0.0.2@tcp
  - nid: 10.0.1.2@tcp
manage:
- ping:
  errno: -110
  descr: ! 'failed to ping 10.0.0.9@tcp: Connection timed out'
";
    assert_eq!(ping_show(ManageCommand::Ping, &replies, &failures), expected);
    let unknown = [PingReply { primary_nid: Nid::ANY, multi_rail: false, nids: vec![] }];
    assert_eq!(
        ping_show(ManageCommand::Discover, &unknown, &[]),
        "discover:\n- primary nid: <?>\n  Multi-Rail: false\n  peer_ni:\n"
    );
    assert_eq!(ping_show(ManageCommand::Ping, &[], &[]), "");
}

#[test]
fn debug_recovery() {
    assert_eq!(
        recovery_show(RecoveryQueue::Local, &[tcp_nid(10, 0, 0, 1)]),
        "Local NI recovery:\n      nid-0: 10.0.0.1@tcp\n"
    );
    assert_eq!(recovery_show(RecoveryQueue::Peer, &[]), "");
}

pub(crate) fn default_global() -> GlobalShow {
    GlobalShow {
        numa_range: 0,
        max_interfaces: 4096,
        discovery: 1,
        drop_asym_route: 0,
        retry_count: 2,
        transaction_timeout: 150,
        health_sensitivity: 100,
        recovery_interval: 1,
        router_sensitivity: 100,
        lnd_timeout: 49,
        response_tracking: 3,
        recovery_limit: 0,
        max_recovery_ping_interval: 900,
    }
}

const GLOBAL_DEFAULTS: &str = "\
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
fn global_show_defaults() {
    assert_eq!(global_show(&default_global()), GLOBAL_DEFAULTS);
}

#[test]
fn stats_show_order_and_big_lengths() {
    let stats = StatsShow {
        msgs_alloc: 1,
        msgs_max: 9,
        resend_count: 2,
        send_length: 5_000_000_000,
        recv_length: (1 << 53) + 1,
        ..StatsShow::default()
    };
    let expected = "\
statistics:
    msgs_alloc: 1
    msgs_max: 9
    rst_alloc: 0
    errors: 0
    send_count: 0
    resend_count: 2
    response_timeout_count: 0
    local_interrupt_count: 0
    local_dropped_count: 0
    local_aborted_count: 0
    local_no_route_count: 0
    local_timeout_count: 0
    local_error_count: 0
    remote_dropped_count: 0
    remote_error_count: 0
    remote_timeout_count: 0
    network_timeout_count: 0
    failed_resends: 0
    successful_resends: 0
    recv_count: 0
    route_count: 0
    drop_count: 0
    send_length: 5000000000
    recv_length: 9007199254740992
    route_length: 0
    drop_length: 0
";
    assert_eq!(stats_show(&stats), expected);
}

fn routing() -> RoutingShow {
    let pools = |n: u32| {
        [
            BufferPool { npages: 0, nbuffers: n, credits: n as i32, mincredits: n as i32 },
            BufferPool {
                npages: 1,
                nbuffers: 8 * n,
                credits: 8 * n as i32,
                mincredits: 8 * n as i32,
            },
            BufferPool {
                npages: 256,
                nbuffers: n / 2,
                credits: (n / 2) as i32,
                mincredits: (n / 2) as i32,
            },
        ]
    };
    RoutingShow { cpts: vec![pools(512), pools(512)], enabled: true }
}

#[test]
fn routing_show_from_cli_md_section_3_6() {
    let expected = "\
routing:
    - cpt[0]:
          tiny:
              npages: 0
              nbuffers: 512
              credits: 512
              mincredits: 512
          small:
              npages: 1
              nbuffers: 4096
              credits: 4096
              mincredits: 4096
          large:
              npages: 256
              nbuffers: 256
              credits: 256
              mincredits: 256
    - cpt[1]:
          tiny:
              npages: 0
              nbuffers: 512
              credits: 512
              mincredits: 512
          small:
              npages: 1
              nbuffers: 4096
              credits: 4096
              mincredits: 4096
          large:
              npages: 256
              nbuffers: 256
              credits: 256
              mincredits: 256
    - enable: 1
buffers:
    tiny: 1024
    small: 8192
    large: 512
";
    assert_eq!(routing_show(&routing()), expected);
    assert_eq!(routing_show(&RoutingShow::default()), "");
}

#[test]
fn udsp_show_from_cli_md_section_0() {
    let rules =
        [UdspEntry { idx: 0, src: Some("tcp".into()), dst: None, rte: None, priority: Some(1) }];
    assert_eq!(
        udsp_show(&rules),
        "udsp:\n    - idx: 0\n      src: tcp\n      action:\n          priority: 1\n"
    );
    assert_eq!(udsp_show(&[]), "");
}

pub(crate) fn backup_state() -> ExportState {
    let mut ni = tcp_ni();
    ni.nid = tcp_nid(10, 0, 0, 1);
    ExportState {
        nets: vec![
            NetEntry { net: Net::LO, nis: vec![lo_ni()] },
            NetEntry { net: Net::TCP, nis: vec![ni] },
        ],
        routes: vec![RouteEntry {
            net: Net::new(LndType::O2IB, 0),
            gateway: tcp_nid(10, 0, 0, 5),
            hop: -1,
            priority: 0,
            up: true,
            multi_hop: false,
        }],
        peers: vec![PeerEntry {
            primary_nid: tcp_nid(10, 0, 0, 5),
            multi_rail: false,
            state: 0,
            nis: vec![peer().nis[0].clone()],
        }],
        routing: RoutingShow::default(),
        global: default_global(),
        udsp: vec![],
    }
}

/// cli.md §3.10's backup, plus the `nid:` that ulnet keeps (lnetctl leaves it out).
#[test]
fn export_backup_from_cli_md_section_3_10() {
    let expected = format!(
        "\
net:
-     net type: tcp
      local NI(s):
      -     nid: 10.0.0.1@tcp
            interfaces:
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
{GLOBAL_DEFAULTS}"
    );
    assert_eq!(export(&backup_state(), true), expected);
}

#[test]
fn export_backup_of_an_empty_node_is_just_global() {
    let state = ExportState {
        nets: vec![NetEntry { net: Net::LO, nis: vec![lo_ni()] }],
        routes: vec![],
        peers: vec![],
        routing: RoutingShow::default(),
        global: default_global(),
        udsp: vec![],
    };
    assert_eq!(export(&state, true), GLOBAL_DEFAULTS);
    let mut with_pools = state;
    with_pools.routing = routing();
    let out = export(&with_pools, true);
    assert!(out.starts_with("routing:\n    enable: 1\nbuffers:\n    tiny: 1024\n    small: 8192\n    large: 512\nglobal:\n"));
}

#[test]
fn export_full() {
    let mut state = backup_state();
    state.routing = routing();
    state.udsp = vec![UdspEntry {
        idx: 0,
        src: None,
        dst: Some("o2ib".into()),
        rte: None,
        priority: Some(2),
    }];
    insta::assert_snapshot!("export_full", export(&state, false));
}

// --- errors --------------------------------------------------------------------------------

#[test]
fn netlink_error_report() {
    let error = NetlinkError::new(
        ErrorOp::Add,
        "peer",
        -22,
        "Unable to parse nidlist: specifies more NIDs than allowed",
    );
    let expected = "\
---
add:
-     peer:
      errno: -22
      descr: ! \"Unable to parse nidlist: specifies more NIDs than allowed\"
...
";
    assert_eq!(error.render(), expected);
    let down = NetlinkError::new(ErrorOp::Show, "net", -3, "Network is down").render();
    assert_eq!(
        down,
        "---\nshow:\n-     net:\n      errno: -3\n      descr: ! \"Network is down\"\n...\n"
    );
    let configure = NetlinkError::new(ErrorOp::Configure, "lnet", -22, "LNet configure error: x");
    assert!(configure.render().starts_with("---\nconfigure:\n-     lnet:\n"));
}

#[test]
fn cyaml_error_report() {
    let error = CyamlError {
        entries: vec![CyamlErrorEntry::quoted(
            "add",
            "numa_range",
            -22,
            "cannot configure numa_range to 5: Invalid argument",
        )],
    };
    let expected = "\
add:
    - numa_range:
          errno: -22
          descr: \"cannot configure numa_range to 5: Invalid argument\"
";
    assert_eq!(error.render(), expected);
    // `set` parse failures are unquoted and several entries group under their command.
    let error = CyamlError {
        entries: vec![
            CyamlErrorEntry {
                cmd: "parser".into(),
                entity: "set".into(),
                seq_no: None,
                errno: -1,
                descr: "cannot parse numa_range value".into(),
            },
            CyamlErrorEntry {
                seq_no: Some(3),
                ..CyamlErrorEntry::quoted("add", "route", -19, "x")
            },
            CyamlErrorEntry::quoted("parser", "set", -1, "y"),
        ],
    };
    let expected = "\
parser:
    - set:
          errno: -1
          descr: cannot parse numa_range value
    - set:
          errno: -1
          descr: \"y\"
add:
    - route:
          seq_no: 3
          errno: -19
          descr: \"x\"
";
    assert_eq!(error.render(), expected);
}

#[test]
fn exit_statuses_are_the_low_byte() {
    assert_eq!(exit_status(0), 0);
    assert_eq!(exit_status(-22), 234);
    assert_eq!(exit_status(-1), 255);
    assert_eq!(exit_status(-61), 195);
    assert_eq!(exit_status(1), 1);
    assert_eq!(strerror(110), "Connection timed out");
    assert_eq!(strerror(9999), "Unknown error 9999");
}

#[test]
fn peer_show_level_4_adds_udsp_and_latency_percentiles() {
    let mut peer = peer();
    peer.nis.truncate(1);
    let ni = &mut peer.nis[0];
    ni.udsp = UdspInfo { net_priority: -1, nid_priority: -1, ..UdspInfo::default() };
    ni.statistics.put_ack = Latency {
        samples: 3,
        min_nsec: 40_000,
        max_nsec: 2_500_000,
        avg_nsec: 900_000,
        p50_nsec: 52_300,
        p90_nsec: 2_000_000,
        p99_nsec: 2_500_000,
    };
    ni.health.value = 900;
    let expected = "\
peer:
-     primary nid: 10.0.0.5@tcp
      Multi-Rail: true
      peer state: 1048585
      peer ni:
      -     nid: 10.0.0.5@tcp
            udsp info:
                  net priority: -1
                  nid priority: -1
            state: NA
            max_ni_tx_credits: 8
            available_tx_credits: 4294967294
            min_tx_credits: 7
            tx_q_num_of_buf: 0
            available_rtr_credits: 8
            min_rtr_credits: 8
            refcount: 4
            statistics:
                  send_count: 3
                  recv_count: 0
                  drop_count: 0
                  put_egress_samples: 0
                  put_egress_min_nsec: 0
                  put_egress_max_nsec: 0
                  put_egress_avg_nsec: 0
                  get_rtt_samples: 0
                  get_rtt_min_nsec: 0
                  get_rtt_max_nsec: 0
                  get_rtt_avg_nsec: 0
                  put_ack_samples: 3
                  put_ack_min_nsec: 40000
                  put_ack_max_nsec: 2500000
                  put_ack_avg_nsec: 900000
            sent_stats:
                  put: 0
                  get: 0
                  reply: 0
                  ack: 0
                  hello: 0
            received_stats:
                  put: 0
                  get: 0
                  reply: 0
                  ack: 0
                  hello: 0
            dropped_stats:
                  put: 0
                  get: 0
                  reply: 0
                  ack: 0
                  hello: 0
            health stats:
                  health value: 900
                  dropped: 0
                  timeout: 0
                  error: 0
                  network timeout: 0
                  ping_count: 0
                  next_ping: 0
            latency percentiles:
                  put_ack_p50_usec: 52
                  put_ack_p90_usec: 2000
                  put_ack_p99_usec: 2500
                  put_ack_max_usec: 2500
                  get_rtt_p50_usec: 0
                  get_rtt_p90_usec: 0
                  get_rtt_p99_usec: 0
                  get_rtt_max_usec: 0
";
    assert_eq!(peer_show(&[peer.clone()], ShowMode::Show(4)), expected);
    // Export (level 3) and backup never carry ulnet's own keys.
    assert!(!peer_show(&[peer.clone()], ShowMode::Export).contains("latency percentiles"));
    assert!(!peer_show(&[peer], ShowMode::Backup).contains("latency percentiles"));
}

#[test]
fn debug_recovery_shapes() {
    let nids = [tcp_nid(10, 0, 0, 5), tcp_nid(10, 0, 0, 6)];
    assert_eq!(
        recovery_show(RecoveryQueue::Local, &nids),
        "Local NI recovery:\n      nid-0: 10.0.0.5@tcp\n      nid-1: 10.0.0.6@tcp\n"
    );
    assert_eq!(
        recovery_show(RecoveryQueue::Peer, &nids[..1]),
        "Peer NI recovery:\n      nid-0: 10.0.0.5@tcp\n"
    );
    assert_eq!(recovery_show(RecoveryQueue::Peer, &[]), "");
}

#[test]
fn fault_show_has_the_kernel_key_order() {
    let drop = FaultRuleEntry {
        kind: FaultKind::Drop,
        source: "<?>".into(),
        destination: "255.255.255.255@tcp".into(),
        portal_mask: 0,
        message_mask: 15,
        rate: 2,
        interval: 0,
        latency: 0,
        hits: 3,
        count: 6,
        put: 1,
        ack: 0,
        get: 2,
        reply: 0,
    };
    let delay = FaultRuleEntry {
        kind: FaultKind::Delay,
        source: "10.0.0.1@tcp".into(),
        latency: 5,
        ..drop.clone()
    };
    assert_eq!(
        fault_show(&[drop, delay]),
        "fault:\n\
         -     rule_type: drop\n\
         \x20     fa_src: <?>\n\
         \x20     fa_dst: 255.255.255.255@tcp\n\
         \x20     fa_ptl_mask: 0\n\
         \x20     fa_msg_mask: 15\n\
         \x20     da_rate: 2\n\
         \x20     da_interval: 0\n\
         \x20     ds_dropped: 3\n\
         \x20     fs_count: 6\n\
         \x20     fs_put: 1\n\
         \x20     fs_ack: 0\n\
         \x20     fs_get: 2\n\
         \x20     fs_reply: 0\n\
         -     rule_type: delay\n\
         \x20     fa_src: 10.0.0.1@tcp\n\
         \x20     fa_dst: 255.255.255.255@tcp\n\
         \x20     fa_ptl_mask: 0\n\
         \x20     fa_msg_mask: 15\n\
         \x20     la_rate: 2\n\
         \x20     la_interval: 0\n\
         \x20     la_latency: 5\n\
         \x20     ls_delayed: 3\n\
         \x20     fs_count: 6\n\
         \x20     fs_put: 1\n\
         \x20     fs_ack: 0\n\
         \x20     fs_get: 2\n\
         \x20     fs_reply: 0\n"
    );
    assert_eq!(fault_show(&[]), "");
}
