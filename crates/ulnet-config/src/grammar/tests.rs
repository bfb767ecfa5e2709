use super::*;
use proptest::prelude::*;
use ulnet_proto::addr::LndType;

fn cpts(values: &[u32]) -> Option<ExprList> {
    Some(ExprList::from_values(values.iter().copied()))
}

fn ni(interface: &str, cpt_text: Option<&str>) -> NiSpec {
    NiSpec {
        interface: Some(interface.to_string()),
        cpts: cpt_text.map(|t| parse_cpts(t).unwrap()),
    }
}

fn tcp(a: u8, b: u8, c: u8, d: u8) -> Nid {
    Nid::ipv4(Net::TCP, Ipv4Addr::new(a, b, c, d))
}

// --- range expressions ---------------------------------------------------------------------

#[test]
fn expressions_parse_like_cfs_expr_list_parse() {
    let list = ExprList::parse("[0-3/2,5,7-8]", 0, 10).unwrap();
    assert_eq!(list.values().collect::<Vec<_>>(), [0, 2, 5, 7, 8]);
    assert_eq!(list.value_count(), 5);
    assert_eq!(list.to_string(), "[0-3/2,5,7-8]");
    assert!(list.contains(2) && !list.contains(3));
    assert_eq!(ExprList::parse("3", 0, 10).unwrap().values().collect::<Vec<_>>(), [3]);
    assert_eq!(ExprList::parse("*", 2, 4).unwrap().values().collect::<Vec<_>>(), [2, 3, 4]);
    assert_eq!(
        ExprList::parse("[ 0x1 , 010 ]", 0, 10).unwrap().values().collect::<Vec<_>>(),
        [1, 8]
    );
}

#[test]
fn expression_errors_are_distinct() {
    assert_eq!(parse_cpts("[]"), Err(ExprError::Empty));
    assert_eq!(parse_cpts("[0,]"), Err(ExprError::Empty));
    assert_eq!(parse_cpts("[1-0]"), Err(ExprError::Reversed { lo: 1, hi: 0 }));
    assert_eq!(parse_cpts("[0-4/0]"), Err(ExprError::ZeroStride));
    assert_eq!(parse_cpts("[a]"), Err(ExprError::BadElement("a".into())));
    assert_eq!(parse_cpts("0-3"), Err(ExprError::BadElement("0-3".into())));
    assert_eq!(parse_cpts("[5-]"), Err(ExprError::BadElement("5-".into())));
    assert_eq!(
        parse_cpts("[256]"),
        Err(ExprError::OutOfRange { value: 256, min: 0, max: MAX_CPT })
    );
}

// --- networks= -----------------------------------------------------------------------------

#[test]
fn networks_example_from_the_brief() {
    let nets = parse_networks("tcp0(eth0,eth1),o2ib1(ib0)[0,1]").unwrap();
    assert_eq!(
        nets,
        [
            NetSpec { net: Net::TCP, nis: vec![ni("eth0", None), ni("eth1", None)] },
            NetSpec { net: Net::new(LndType::O2IB, 1), nis: vec![ni("ib0", Some("[0,1]"))] },
        ]
    );
}

#[test]
fn networks_examples_from_cli_md() {
    assert_eq!(
        parse_networks("o2ib(ib0)[1]").unwrap(),
        [NetSpec { net: Net::new(LndType::O2IB, 0), nis: vec![ni("ib0", Some("1"))] }]
    );
    assert_eq!(
        parse_networks("tcp(eth0[0],eth1[1])").unwrap(),
        [NetSpec { net: Net::TCP, nis: vec![ni("eth0", Some("0")), ni("eth1", Some("1"))] }]
    );
    let nets = parse_networks("ptlf(0)[0],o2ib(ib0)[1]").unwrap();
    assert_eq!(nets[0].net, Net::new(LndType::PTL4, 0));
    assert_eq!(nets[0].nis, [ni("0", Some("0"))]);
    // A bare net asks for one NI on the LND's default interface; lo is implicit.
    assert_eq!(
        parse_networks(" tcp , lo ").unwrap(),
        [NetSpec { net: Net::TCP, nis: vec![NiSpec { interface: None, cpts: None }] }]
    );
    assert_eq!(parse_networks("").unwrap(), []);
    // A net named twice gets the NIs of both, own CPTs beating the net's.
    assert_eq!(
        parse_networks("tcp(eth0), tcp1, tcp(eth1[2],eth2)[3]").unwrap(),
        [
            NetSpec {
                net: Net::TCP,
                nis: vec![ni("eth0", None), ni("eth1", Some("2")), ni("eth2", Some("3"))]
            },
            NetSpec {
                net: Net::new(LndType::SOCK, 1),
                nis: vec![NiSpec { interface: None, cpts: None }]
            },
        ]
    );
    assert_eq!(cpts(&[3]), parse_cpts("3").ok());
}

#[test]
fn networks_errors_are_distinct() {
    use NetworksError::*;
    let long = format!("tcp({})", "e".repeat(MAX_SPEC_LEN));
    assert_eq!(parse_networks(&long), Err(TooLong(long.len())));
    assert_eq!(parse_networks("tcp(eth0"), Err(UnterminatedInterfaceList { offset: 4 }));
    assert_eq!(parse_networks("tcp(eth0)[0"), Err(UnterminatedCpt { offset: 9 }));
    assert_eq!(
        parse_networks("tcp[x]"),
        Err(BadCpt { offset: 3, error: ExprError::BadElement("x".into()) })
    );
    assert_eq!(parse_networks("tcp:1"), Err(UnexpectedDelimiter { offset: 3, found: ':' }));
    assert_eq!(parse_networks("tcp(eth0) junk"), Err(TrailingText { offset: 10 }));
    assert_eq!(parse_networks("elan(eth0)"), Err(UnknownNet { offset: 0, name: "elan".into() }));
    assert_eq!(parse_networks("tcp(eth0,)"), Err(EmptyInterface { offset: 9 }));
    assert_eq!(parse_networks("tcp()"), Err(EmptyInterface { offset: 4 }));
    assert_eq!(parse_networks("tcp(eth0 eth1)"), Err(TrailingText { offset: 9 }));
    assert_eq!(parse_networks("tcp(eth0)x(eth1)"), Err(TrailingText { offset: 9 }));
    let name = "i".repeat(MAX_INTERFACE_NAME_LEN + 1);
    assert_eq!(parse_networks(&format!("tcp({name})")), Err(InterfaceNameTooLong { offset: 4 }));
    assert_eq!(
        parse_networks("tcp(eth0,eth0)"),
        Err(DuplicateInterface { net: Net::TCP, interface: "eth0".into() })
    );
    assert_eq!(
        parse_networks("tcp(eth0),tcp(eth0)"),
        Err(DuplicateInterface { net: Net::TCP, interface: "eth0".into() })
    );
}

#[test]
fn syntax_report_marks_the_offset() {
    assert_eq!(
        syntax_report("networks", "tcp:1", 3, 2),
        "Error parsing 'networks=\"tcp:1\"'\nhere........................|-|\n"
    );
}

// --- ip2nets= ------------------------------------------------------------------------------

#[test]
fn ip2nets_manual_examples() {
    let rules = parse_ip2nets("tcp(eth1,eth2) 134.32.1.[4-10/2]; tcp(eth1) *.*.*.*").unwrap();
    assert_eq!(rules.len(), 2);
    assert_eq!(
        rules[0].nets,
        [NetSpec { net: Net::TCP, nis: vec![ni("eth1", None), ni("eth2", None)] }]
    );
    assert!(rules[0].matches(&[Ipv4Addr::new(134, 32, 1, 6)]));
    assert!(!rules[0].matches(&[Ipv4Addr::new(134, 32, 1, 5)]));
    assert!(rules[1].matches(&[Ipv4Addr::new(1, 2, 3, 4)]));

    let rules = parse_ip2nets("o2ib 192.168.0.*\n# comment\ntcp(eth2) 192.168.0.[1,7,4,12] # tail")
        .unwrap();
    let here = [Ipv4Addr::new(192, 168, 0, 7)];
    let nets = resolve_ip2nets(&rules, &here).unwrap();
    assert_eq!(
        nets.iter().map(|n| n.net).collect::<Vec<_>>(),
        [Net::new(LndType::O2IB, 0), Net::TCP]
    );
    let nets = resolve_ip2nets(&rules, &[Ipv4Addr::new(192, 168, 0, 8)]).unwrap();
    assert_eq!(nets.len(), 1);
    assert_eq!(resolve_ip2nets(&rules, &[Ipv4Addr::new(10, 0, 0, 1)]).unwrap(), []);
}

#[test]
fn ip2nets_multi_net_rules_and_merging() {
    let rules = parse_ip2nets("tcp(eth0),o2ib(ib0)[1] 10.0.0.*; tcp(eth1) 10.0.*.*").unwrap();
    assert_eq!(rules[0].nets.len(), 2);
    let nets = resolve_ip2nets(&rules, &[Ipv4Addr::new(10, 0, 0, 1)]).unwrap();
    assert_eq!(nets[0].nis, [ni("eth0", None), ni("eth1", None)]);
    // A rule without ranges never matches.
    let rules = parse_ip2nets("tcp(eth0)").unwrap();
    assert!(!rules[0].matches(&[Ipv4Addr::new(10, 0, 0, 1)]));
    // The same interface from two matching rules is a duplicate NI.
    let rules = parse_ip2nets("tcp(eth0) *.*.*.*; tcp(eth0) 10.*.*.*").unwrap();
    assert_eq!(
        resolve_ip2nets(&rules, &[Ipv4Addr::new(10, 0, 0, 1)]),
        Err(NetworksError::DuplicateInterface { net: Net::TCP, interface: "eth0".into() })
    );
}

#[test]
fn ip2nets_errors_are_distinct() {
    use Ip2netsError::*;
    let huge = "x".repeat(MAX_TOTAL_TEXT + 1);
    assert_eq!(parse_ip2nets(&huge), Err(TooLong(huge.len())));
    let long_rule = format!("tcp {}", "1.1.1.1 ".repeat(600));
    assert_eq!(parse_ip2nets(&long_rule), Err(RuleTooLong { offset: 0 }));
    assert_eq!(parse_ip2nets("tcp(eth0)x,o2ib 1.1.1.1"), Err(BadNetList { offset: 3 }));
    assert_eq!(parse_ip2nets("tcp,tcp0 1.1.1.1"), Err(DuplicateNet { offset: 4, net: Net::TCP }));
    assert!(matches!(parse_ip2nets("bad 1.1.1.1"), Err(BadNetSpec { offset: 0, .. })));
    assert!(matches!(parse_ip2nets("tcp, 1.1.1.1"), Err(BadNetSpec { offset: 4, .. })));
    assert_eq!(
        parse_ip2nets("tcp 1.1.1"),
        Err(BadIpRange { offset: 4, text: "1.1.1".into(), error: ExprError::Empty })
    );
    assert!(matches!(
        parse_ip2nets("tcp 1.1.1.256"),
        Err(BadIpRange { error: ExprError::OutOfRange { value: 256, .. }, .. })
    ));
    assert!(matches!(parse_ip2nets("tcp 1.1.1.1.1"), Err(BadIpRange { .. })));
}

#[test]
fn ip_patterns_for_yaml_ip2nets() {
    let v6 = IpPattern::parse("2001:db8::/32").unwrap();
    assert!(v6.matches("2001:db8::5".parse().unwrap()));
    assert!(!v6.matches("2001:db9::5".parse().unwrap()));
    assert!(!v6.matches("10.0.0.1".parse().unwrap()));
    let exact = IpPattern::parse("2001:db8::1").unwrap();
    assert!(exact.matches("2001:db8::1".parse().unwrap()));
    assert!(!exact.matches("2001:db8::2".parse().unwrap()));
    assert!(IpPattern::parse("2001:db8::/129").is_err());
    assert!(IpPattern::parse("10.[1-2].*.7").unwrap().matches("10.2.3.7".parse().unwrap()));
}

// --- routes= -------------------------------------------------------------------------------

#[test]
fn routes_examples_from_cli_md() {
    let routes = parse_routes("o2ib [1,2,3,4,5]@ptlf").unwrap();
    assert_eq!(routes.len(), 5);
    assert!(routes.iter().all(|r| r.net == Net::new(LndType::O2IB, 0) && r.hops.is_none()));
    assert_eq!(routes[4].gateway, Nid::new4(Net::new(LndType::PTL4, 0), 5));

    // `[tcp,o2ib] 2 [8-14/2]@gni`: two nets via four gateways with hop 2 (docs/protocol/cli.md uses the
    // long-gone elan LND; gni has the same numeric addresses).
    let routes = parse_routes("[tcp,o2ib] 2 [8-14/2]@gni").unwrap();
    assert_eq!(routes.len(), 8);
    assert!(routes.iter().all(|r| r.hops == Some(2)));
    let gateways: Vec<u32> = routes[..4].iter().map(|r| r.gateway.addr4()).collect();
    assert_eq!(gateways, [8, 10, 12, 14]);
    assert_eq!(routes[4].net, Net::new(LndType::O2IB, 0));
}

#[test]
fn routes_priorities_comments_and_hops() {
    let routes =
        parse_routes("tcp1 10.0.0.1@tcp:3 10.0.0.2@tcp # gateways\n; o2ib 10.0.0.[3-4]@tcp")
            .unwrap();
    let tcp1 = Net::new(LndType::SOCK, 1);
    let o2ib = Net::new(LndType::O2IB, 0);
    assert_eq!(
        routes,
        [
            RouteSpec { net: tcp1, gateway: tcp(10, 0, 0, 1), hops: None, priority: 3 },
            RouteSpec { net: tcp1, gateway: tcp(10, 0, 0, 2), hops: None, priority: 0 },
            RouteSpec { net: o2ib, gateway: tcp(10, 0, 0, 3), hops: None, priority: 0 },
            RouteSpec { net: o2ib, gateway: tcp(10, 0, 0, 4), hops: None, priority: 0 },
        ]
    );
    // 300 is not a hop count (1..=255), so it is read as a gateway and fails.
    assert_eq!(
        parse_routes("o2ib 300 10.0.0.1@tcp"),
        Err(RoutesError::BadGateway { offset: 5, token: "300".into() })
    );
    assert_eq!(parse_routes("o2ib 255 10.0.0.1@tcp").unwrap()[0].hops, Some(255));
    assert_eq!(parse_routes("  ; # nothing\n").unwrap(), []);
}

#[test]
fn routes_errors_are_distinct() {
    use RoutesError::*;
    let huge = "x".repeat(MAX_TOTAL_TEXT + 1);
    assert_eq!(parse_routes(&huge), Err(TooLong(huge.len())));
    let long = format!("tcp {}", "1.1.1.1@tcp ".repeat(400));
    assert_eq!(parse_routes(&long), Err(RouteTooLong { offset: 0 }));
    assert_eq!(parse_routes("o2ib"), Err(MissingGateway { offset: 0 }));
    assert_eq!(parse_routes("o2ib 1.1.1.1@tcp; tcp"), Err(MissingGateway { offset: 18 }));
    assert_eq!(parse_routes("o2ib 2"), Err(MissingGateway { offset: 0 }));
    assert_eq!(
        parse_routes("o2ib 1.1.1.[1-2@tcp"),
        Err(BadExpansion { offset: 5, token: "1.1.1.[1-2@tcp".into() })
    );
    assert_eq!(
        parse_routes("o2ib 1.1.1.[1-10/2]@tcp"),
        Err(BadExpansion { offset: 5, token: "1.1.1.[1-10/2]@tcp".into() })
    );
    assert_eq!(
        parse_routes("o2ib 1.1.1.[,1]@tcp"),
        Err(BadExpansion { offset: 5, token: "1.1.1.[,1]@tcp".into() })
    );
    assert_eq!(
        parse_routes("o2ib 1.1.1.[2-1]@tcp"),
        Err(BadExpansion { offset: 5, token: "1.1.1.[2-1]@tcp".into() })
    );
    assert_eq!(
        parse_routes("o2ib 1.1.1.[1-2x]@tcp"),
        Err(BadExpansion { offset: 5, token: "1.1.1.[1-2x]@tcp".into() })
    );
    assert_eq!(parse_routes("lo 1.1.1.1@tcp"), Err(BadNet { offset: 0, token: "lo".into() }));
    assert_eq!(parse_routes("elan 1.1.1.1@tcp"), Err(BadNet { offset: 0, token: "elan".into() }));
    assert_eq!(
        parse_routes("o2ib 1.1.1.1@tcp:x"),
        Err(BadPriority { offset: 5, token: "1.1.1.1@tcp:x".into() })
    );
    assert_eq!(parse_routes("o2ib 1@tcp"), Err(BadGateway { offset: 5, token: "1@tcp".into() }));
    assert_eq!(parse_routes("o2ib 0@lo"), Err(BadGateway { offset: 5, token: "0@lo".into() }));
    let blowup = format!("o2ib {}", "[0-9999]".repeat(3));
    assert!(matches!(parse_routes(&blowup), Err(ExpansionTooLarge { offset: 5, .. })));
}

proptest! {
    #[test]
    fn grammars_never_panic(text in "[ -~\n]{0,80}") {
        let _ = parse_networks(&text);
        let _ = parse_ip2nets(&text);
        let _ = parse_routes(&text);
        let _ = parse_cpts(&text);
    }

    #[test]
    fn expression_display_round_trips(
        ranges in prop::collection::vec((0u32..200, 0u32..50, 1u32..8), 1..6)
    ) {
        let list = ExprList {
            ranges: ranges.into_iter().map(|(lo, span, stride)| RangeExpr { lo, hi: lo + span, stride }).collect(),
        };
        let parsed = ExprList::parse(&list.to_string(), 0, MAX_CPT).unwrap();
        prop_assert_eq!(parsed.values().collect::<Vec<_>>(), list.values().collect::<Vec<_>>());
    }

    #[test]
    fn networks_round_trip(
        nets in prop::collection::btree_map(1u16..20, prop::collection::btree_set("[a-z][a-z0-9]{0,6}", 1..4), 1..4)
    ) {
        let text = nets
            .iter()
            .map(|(n, ifaces)| format!("tcp{n}({})", ifaces.iter().cloned().collect::<Vec<_>>().join(",")))
            .collect::<Vec<_>>()
            .join(",");
        let parsed = parse_networks(&text).unwrap();
        prop_assert_eq!(parsed.len(), nets.len());
        for (spec, (n, ifaces)) in parsed.iter().zip(&nets) {
            prop_assert_eq!(spec.net, Net::new(LndType::SOCK, *n));
            let names: Vec<_> = spec.nis.iter().filter_map(|ni| ni.interface.clone()).collect();
            prop_assert_eq!(names, ifaces.iter().cloned().collect::<Vec<_>>());
        }
    }
}
