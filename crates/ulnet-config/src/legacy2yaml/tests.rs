//! Conversions against the outputs of Lustre's `lnet_legacy2yaml` for the same input:
//! sanity-lnet.sh tests 600-629, the man page's examples, the seeds' modprobe file, and
//! malformed inputs with the tool's messages and exit statuses. Each expected text is what
//! the Python tool printed (stdout on success; the last stderr line and the status on
//! failure), byte for byte.

use super::*;

struct Case {
    name: &'static str,
    modprobe: &'static [&'static str],
    ip2nets: &'static [&'static str],
    routes: &'static [&'static str],
    networks: &'static [&'static str],
    inline: Option<&'static str>,
    default_hop: Option<&'static str>,
    expected: Result<&'static str, (u8, &'static str)>,
}

/// The tool's order: modprobe files, ip2nets, routes and networks files, the inline text.
/// Files are named as the generator named them (`m0.conf`, `r0.conf`, ...).
fn convert(case: &Case) -> Result<String, Failure> {
    let mut converter = Converter::new();
    let named = |prefix: char, index: usize| format!("{prefix}{index}.conf");
    for (index, text) in case.modprobe.iter().enumerate() {
        converter.add_modprobe(&named('m', index), text)?;
    }
    for (index, text) in case.ip2nets.iter().enumerate() {
        converter.add_ip2nets(&named('i', index), text)?;
    }
    for (index, text) in case.routes.iter().enumerate() {
        converter.add_routes(&named('r', index), text)?;
    }
    for (index, text) in case.networks.iter().enumerate() {
        converter.add_networks(&named('n', index), text)?;
    }
    if let Some(text) = case.inline {
        converter.add_inline(text)?;
    }
    let hop = case.default_hop.map(|hop| python::int(hop).unwrap());
    converter.finish(hop.as_deref())
}

#[test]
fn every_conversion_matches_the_tools_output() {
    let mut failures = Vec::new();
    for case in CASES {
        let got = convert(case).map_err(|failure| (failure.status, failure.message));
        let expected = case.expected.map(str::to_string).map_err(|(s, m)| (s, m.to_string()));
        if got != expected {
            failures.push(format!("{}:\n  got      {got:?}\n  expected {expected:?}", case.name));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_seeds_route_converts_as_the_tool_converts_it() {
    // The tool leaves gateways as written: this one is no YAML lnetctl can read back (a flow
    // sequence followed by text), which is the tool's output too.
    let case = CASES.iter().find(|case| case.name == "seeds_client").unwrap();
    let yaml = convert(case).unwrap();
    assert!(yaml.contains("    gateway: [1,2,3,4,5]@ptlf\n"), "{yaml}");
    assert!(crate::model::import(&yaml, crate::model::ImportMode::Add).is_err());
}

const CASES: &[Case] = &[
    Case {
        name: "sanity_600_ip2nets",
        modprobe: &[],
        ip2nets: &[],
        routes: &[],
        networks: &[],
        inline: Some("tcp0(eth0,eth1) 10.0.0.*; o2ib0 192.168.[1-2].*"),
        default_hop: None,
        expected: Ok(
            "ip2nets:\n  - net-spec: tcp0\n    interfaces:\n         0: eth0\n         1: eth1\n    ip-range:\n         0: 10.0.0.*\n  - net-spec: o2ib0\n    ip-range:\n         0: 192.168.[1-2].*\n",
        ),
    },
    Case {
        name: "sanity_601_routes",
        modprobe: &[],
        ip2nets: &[],
        routes: &[],
        networks: &[],
        inline: Some("routes='tcp0 1 10.0.0.1@o2ib0'"),
        default_hop: None,
        expected: Ok("route:\n  - net: tcp0\n    gateway: 10.0.0.1@o2ib0\n    hop: 1\n"),
    },
    Case {
        name: "sanity_602_priority",
        modprobe: &[],
        ip2nets: &[],
        routes: &[],
        networks: &[],
        inline: Some("routes='tcp0 2 10.0.0.1@o2ib0:7'"),
        default_hop: None,
        expected: Ok(
            "route:\n  - net: tcp0\n    gateway: 10.0.0.1@o2ib0\n    hop: 2\n    priority: 7\n",
        ),
    },
    Case {
        name: "sanity_603_default_hop",
        modprobe: &[],
        ip2nets: &[],
        routes: &[],
        networks: &[],
        inline: Some("routes='tcp0 10.0.0.1@o2ib0'"),
        default_hop: Some("1"),
        expected: Ok("route:\n  - net: tcp0\n    gateway: 10.0.0.1@o2ib0\n    hop: 1\n"),
    },
    Case {
        name: "sanity_604_default_hop_value",
        modprobe: &[],
        ip2nets: &[],
        routes: &[],
        networks: &[],
        inline: Some("routes='tcp0 10.0.0.1@o2ib0'"),
        default_hop: Some("3"),
        expected: Ok("route:\n  - net: tcp0\n    gateway: 10.0.0.1@o2ib0\n    hop: 3\n"),
    },
    Case {
        name: "sanity_605_leading_star",
        modprobe: &[],
        ip2nets: &[],
        routes: &[],
        networks: &[],
        inline: Some("tcp *.*.*.*"),
        default_hop: None,
        expected: Ok("ip2nets:\n  - net-spec: tcp\n    ip-range:\n         0: \"*.*.*.*\"\n"),
    },
    Case {
        name: "sanity_606_files",
        modprobe: &[],
        ip2nets: &["tcp0 10.1.0.*\n"],
        routes: &["tcp0 1 10.1.0.1@o2ib0:9\n"],
        networks: &[],
        inline: None,
        default_hop: None,
        expected: Ok(
            "ip2nets:\n  - net-spec: tcp0\n    ip-range:\n         0: 10.1.0.*\nroute:\n  - net: tcp0\n    gateway: 10.1.0.1@o2ib0\n    hop: 1\n    priority: 9\n",
        ),
    },
    Case {
        name: "sanity_607_options_line",
        modprobe: &[],
        ip2nets: &[],
        routes: &[],
        networks: &[],
        inline: Some("options lnet 'ip2nets=\"tcp0 10.0.0.*\" routes=\"tcp0 1 10.0.0.2@o2ib0\"'"),
        default_hop: None,
        expected: Ok(
            "ip2nets:\n  - net-spec: tcp0\n    ip-range:\n         0: 10.0.0.*\nroute:\n  - net: tcp0\n    gateway: 10.0.0.2@o2ib0\n    hop: 1\n",
        ),
    },
    Case {
        name: "sanity_608_missing_pattern",
        modprobe: &[],
        ip2nets: &[],
        routes: &[],
        networks: &[],
        inline: Some("tcp0"),
        default_hop: None,
        expected: Err((2, "Error: Cannot parse rule header: 'tcp0'")),
    },
    Case {
        name: "sanity_609_no_input",
        modprobe: &[],
        ip2nets: &[],
        routes: &[],
        networks: &[],
        inline: Some(""),
        default_hop: None,
        expected: Err((
            1,
            "Error: no ip2nets, routes, or networks data provided (use -m/-i/-r, inline arg, or stdin)",
        )),
    },
    Case {
        name: "sanity_610_order",
        modprobe: &[],
        ip2nets: &["tcp0 10.0.0.*\n", "o2ib0 192.168.0.*\n"],
        routes: &["tcp0 1 10.0.0.1@o2ib0\n"],
        networks: &[],
        inline: Some("routes='o2ib0 1 192.168.0.1@tcp0'"),
        default_hop: None,
        expected: Ok(
            "ip2nets:\n  - net-spec: tcp0\n    ip-range:\n         0: 10.0.0.*\n  - net-spec: o2ib0\n    ip-range:\n         0: 192.168.0.*\nroute:\n  - net: tcp0\n    gateway: 10.0.0.1@o2ib0\n    hop: 1\n  - net: o2ib0\n    gateway: 192.168.0.1@tcp0\n    hop: 1\n",
        ),
    },
    Case {
        name: "sanity_611_hop_zero",
        modprobe: &[],
        ip2nets: &[],
        routes: &[],
        networks: &[],
        inline: Some("routes='tcp0 0 10.0.0.1@o2ib0'"),
        default_hop: None,
        expected: Err((
            2,
            "Error: routes: hopcount 0 out of range 1-255 in 'tcp0 0 10.0.0.1@o2ib0'",
        )),
    },
    Case {
        name: "sanity_612_bad_pattern",
        modprobe: &[],
        ip2nets: &[],
        routes: &[],
        networks: &[],
        inline: Some("tcp0 10.0.0"),
        default_hop: None,
        expected: Err((
            2,
            "Error: Invalid-looking IP pattern token '10.0.0' in rule: 'tcp0 10.0.0'",
        )),
    },
    Case {
        name: "sanity_613_patterns",
        modprobe: &[],
        ip2nets: &[],
        routes: &[],
        networks: &[],
        inline: Some("tcp0 10.0.0.* 10.0.1.*"),
        default_hop: None,
        expected: Ok(
            "ip2nets:\n  - net-spec: tcp0\n    ip-range:\n         0: 10.0.0.*\n         1: 10.0.1.*\n",
        ),
    },
    Case {
        name: "sanity_614_interfaces_and_patterns",
        modprobe: &[],
        ip2nets: &[],
        routes: &[],
        networks: &[],
        inline: Some("tcp0(eth0,eth1) 10.0.0.* 10.0.1.*"),
        default_hop: None,
        expected: Ok(
            "ip2nets:\n  - net-spec: tcp0\n    interfaces:\n         0: eth0\n         1: eth1\n    ip-range:\n         0: 10.0.0.*\n         1: 10.0.1.*\n",
        ),
    },
    Case {
        name: "sanity_615_modprobe",
        modprobe: &[
            "# Modprobe configuration file for LNet\noptions lnet ip2nets=\"tcp0(eth0) 10.1.0.*\"\n\n# Routes configuration\noptions lnet routes=\"tcp0 1 10.1.0.1@o2ib0:9\"\n\n# Line continuation test\noptions lnet \\\n  ip2nets=\"o2ib0 192.168.1.*\"\n",
        ],
        ip2nets: &[],
        routes: &[],
        networks: &[],
        inline: None,
        default_hop: None,
        expected: Ok(
            "ip2nets:\n  - net-spec: tcp0\n    interfaces:\n         0: eth0\n    ip-range:\n         0: 10.1.0.*\n  - net-spec: o2ib0\n    ip-range:\n         0: 192.168.1.*\nroute:\n  - net: tcp0\n    gateway: 10.1.0.1@o2ib0\n    hop: 1\n    priority: 9\n",
        ),
    },
    Case {
        name: "sanity_616_modprobe_and_file",
        modprobe: &[
            "options lnet ip2nets=\"tcp0 10.0.0.*\"\noptions lnet routes=\"tcp0 1 10.0.0.1@o2ib0\"\n",
        ],
        ip2nets: &["o2ib0 192.168.0.*\n"],
        routes: &[],
        networks: &[],
        inline: None,
        default_hop: None,
        expected: Ok(
            "ip2nets:\n  - net-spec: tcp0\n    ip-range:\n         0: 10.0.0.*\n  - net-spec: o2ib0\n    ip-range:\n         0: 192.168.0.*\nroute:\n  - net: tcp0\n    gateway: 10.0.0.1@o2ib0\n    hop: 1\n",
        ),
    },
    Case {
        name: "sanity_618_alternative_route",
        modprobe: &[],
        ip2nets: &[],
        routes: &["tcp7: { gateway: 10.3.3.[6-12]@tcp, priority: 20, hop: 8 }\n"],
        networks: &[],
        inline: None,
        default_hop: None,
        expected: Ok(
            "route:\n  - net: tcp7\n    gateway: 10.3.3.[6-12]@tcp\n    hop: 8\n    priority: 20\n",
        ),
    },
    Case {
        name: "sanity_619_alternative_routes",
        modprobe: &[],
        ip2nets: &[],
        routes: &[
            "# Alternative route format examples\ntcp1: { gateway: 10.1.1.2@tcp0, priority: 3 }  # High priority route\n# This is a comment line\ntcp4: { gateway: 10.3.3.4@tcp }\ntcp6: { gateway: 10.3.3.6@tcp, hop: 2, priority: 5 }\ntcp7: { gateway: 10.3.3.[6-12]@tcp, priority: 20, hop: 8 }\n",
        ],
        networks: &[],
        inline: None,
        default_hop: None,
        expected: Ok(
            "route:\n  - net: tcp1\n    gateway: 10.1.1.2@tcp0\n    priority: 3\n  - net: tcp4\n    gateway: 10.3.3.4@tcp\n  - net: tcp6\n    gateway: 10.3.3.6@tcp\n    hop: 2\n    priority: 5\n  - net: tcp7\n    gateway: 10.3.3.[6-12]@tcp\n    hop: 8\n    priority: 20\n",
        ),
    },
    Case {
        name: "sanity_620_mixed_routes",
        modprobe: &[],
        ip2nets: &[],
        routes: &[
            "# Mixed route formats\ntcp1: { gateway: 10.1.1.2@tcp0, priority: 3 }\ntcp0 1 10.2.2.3@tcp1\ntcp6: { gateway: 10.3.3.6@tcp, hop: 2, priority: 5 }\ntcp2 2 10.4.4.5@tcp0:7\n",
        ],
        networks: &[],
        inline: None,
        default_hop: None,
        expected: Ok(
            "route:\n  - net: tcp1\n    gateway: 10.1.1.2@tcp0\n    priority: 3\n  - net: tcp0\n    gateway: 10.2.2.3@tcp1\n    hop: 1\n  - net: tcp6\n    gateway: 10.3.3.6@tcp\n    hop: 2\n    priority: 5\n  - net: tcp2\n    gateway: 10.4.4.5@tcp0\n    hop: 2\n    priority: 7\n",
        ),
    },
    Case {
        name: "sanity_621_alternative_hop_zero",
        modprobe: &[],
        ip2nets: &[],
        routes: &["tcp0: { gateway: 10.0.0.1@o2ib0, hop: 0 }\n"],
        networks: &[],
        inline: None,
        default_hop: None,
        expected: Err((
            2,
            "Error in routes file r0.conf: routes: hopcount 0 out of range 1-255 in 'tcp0: { gateway: 10.0.0.1@o2ib0, hop: 0 }'",
        )),
    },
    Case {
        name: "sanity_622_alternative_default_hop",
        modprobe: &[],
        ip2nets: &[],
        routes: &["tcp5: { gateway: 10.5.5.5@tcp0 }\n"],
        networks: &[],
        inline: None,
        default_hop: Some("3"),
        expected: Ok("route:\n  - net: tcp5\n    gateway: 10.5.5.5@tcp0\n    hop: 3\n"),
    },
    Case {
        name: "sanity_623_networks",
        modprobe: &[],
        ip2nets: &[],
        routes: &[],
        networks: &[],
        inline: Some("options lnet networks=tcp"),
        default_hop: None,
        expected: Ok("net:\n-     net type: tcp\n"),
    },
    Case {
        name: "sanity_624_networks_interface",
        modprobe: &[],
        ip2nets: &[],
        routes: &[],
        networks: &[],
        inline: Some("options lnet networks=tcp0(eth0)"),
        default_hop: None,
        expected: Ok(
            "net:\n-     net type: tcp0\n      local NI(s):\n      -     interfaces:\n                  0: eth0\n",
        ),
    },
    Case {
        name: "sanity_625_networks_several",
        modprobe: &[],
        ip2nets: &[],
        routes: &[],
        networks: &[],
        inline: Some("options lnet networks=tcp0(eth0),o2ib(ib0)"),
        default_hop: None,
        expected: Ok(
            "net:\n-     net type: tcp0\n      local NI(s):\n      -     interfaces:\n                  0: eth0\n-     net type: o2ib\n      local NI(s):\n      -     interfaces:\n                  0: ib0\n",
        ),
    },
    Case {
        name: "sanity_626_modprobe_mixed",
        modprobe: &[
            "options lnet networks=tcp0(eth0),o2ib(ib0)\noptions lnet ip2nets=\"tcp1(eth1) 192.168.1.*\"\noptions lnet routes=\"tcp0 1 10.0.0.1@o2ib0\"\n",
        ],
        ip2nets: &[],
        routes: &[],
        networks: &[],
        inline: None,
        default_hop: None,
        expected: Ok(
            "net:\n-     net type: tcp0\n      local NI(s):\n      -     interfaces:\n                  0: eth0\n-     net type: o2ib\n      local NI(s):\n      -     interfaces:\n                  0: ib0\nip2nets:\n  - net-spec: tcp1\n    interfaces:\n         0: eth1\n    ip-range:\n         0: 192.168.1.*\nroute:\n  - net: tcp0\n    gateway: 10.0.0.1@o2ib0\n    hop: 1\n",
        ),
    },
    Case {
        name: "sanity_627_bad_networks",
        modprobe: &[],
        ip2nets: &[],
        routes: &[],
        networks: &[],
        inline: Some("options lnet networks=tcp0(eth0"),
        default_hop: None,
        expected: Err((2, "Error: Invalid network specification: 'tcp0(eth0'")),
    },
    Case {
        name: "sanity_628_missing_delimiter",
        modprobe: &[],
        ip2nets: &[],
        routes: &[],
        networks: &[],
        inline: Some("tcp0(eth0) 10.0.0.* tcp1(eth1) 192.168.1.*"),
        default_hop: None,
        expected: Err((
            2,
            "Error: Detected what looks like a second network specification 'tcp1(eth1)' in rule: 'tcp0(eth0) 10.0.0.* tcp1(eth1) 192.168.1.*'. Multiple network rules must be separated by semicolons (;).",
        )),
    },
    Case {
        name: "sanity_629_several_gateways",
        modprobe: &[],
        ip2nets: &[],
        routes: &[],
        networks: &[],
        inline: Some("options lnet routes=\"tcp0 1 10.0.0.1@o2ib0 10.0.0.2@o2ib0\""),
        default_hop: None,
        expected: Err((
            2,
            "Error: routes: multiple gateway specifications found in single rule 'tcp0 1 10.0.0.1@o2ib0 10.0.0.2@o2ib0'. If you intended multiple routes, separate them with semicolons (;). Found gateways: 10.0.0.1@o2ib0, 10.0.0.2@o2ib0",
        )),
    },
    Case {
        name: "man_networks",
        modprobe: &[],
        ip2nets: &[],
        routes: &[],
        networks: &[],
        inline: Some("options lnet networks=\"tcp0(eth0),o2ib(ib0)\""),
        default_hop: None,
        expected: Ok(
            "net:\n-     net type: tcp0\n      local NI(s):\n      -     interfaces:\n                  0: eth0\n-     net type: o2ib\n      local NI(s):\n      -     interfaces:\n                  0: ib0\n",
        ),
    },
    Case {
        name: "man_options_line",
        modprobe: &[],
        ip2nets: &[],
        routes: &[],
        networks: &[],
        inline: Some("options lnet ip2nets=\"tcp0 10.0.0.*\" routes=\"tcp0 1 10.0.0.1@o2ib0\""),
        default_hop: None,
        expected: Ok(
            "ip2nets:\n  - net-spec: tcp0\n    ip-range:\n         0: 10.0.0.*\nroute:\n  - net: tcp0\n    gateway: 10.0.0.1@o2ib0\n    hop: 1\n",
        ),
    },
    Case {
        name: "man_doc_ip2nets",
        modprobe: &[],
        ip2nets: &[],
        routes: &[],
        networks: &[],
        inline: Some("tcp(eth0) 192.168.0.[2,4]; tcp 192.168.0.*"),
        default_hop: None,
        expected: Ok(
            "ip2nets:\n  - net-spec: tcp\n    interfaces:\n         0: eth0\n    ip-range:\n         0: 192.168.0.[2,4]\n  - net-spec: tcp\n    ip-range:\n         0: 192.168.0.*\n",
        ),
    },
    Case {
        name: "man_routes_conf",
        modprobe: &[],
        ip2nets: &[],
        routes: &[
            "tcp1: { gateway: 10.1.1.2@tcp0, priority: 3 }\ntcp4: { gateway: 10.3.3.4@tcp }\ntcp6: { gateway: 10.3.3.6@tcp, hop: 2, priority: 5 }\ntcp7: { gateway: 10.3.3.[6-12]@tcp, priority: 20, hop: 8 }\n",
        ],
        networks: &[],
        inline: None,
        default_hop: None,
        expected: Ok(
            "route:\n  - net: tcp1\n    gateway: 10.1.1.2@tcp0\n    priority: 3\n  - net: tcp4\n    gateway: 10.3.3.4@tcp\n  - net: tcp6\n    gateway: 10.3.3.6@tcp\n    hop: 2\n    priority: 5\n  - net: tcp7\n    gateway: 10.3.3.[6-12]@tcp\n    hop: 8\n    priority: 20\n",
        ),
    },
    Case {
        name: "man_files_default_hop",
        modprobe: &[],
        ip2nets: &["tcp0(eth0,eth1) 192.168.0.[2,4]\no2ib0 132.6.[1-3].[2-8/2]\n"],
        routes: &["tcp0 10.0.0.[1-2]@o2ib0:5\ntcp0 2 10.0.0.[3-4]@o2ib0:10\n"],
        networks: &[],
        inline: None,
        default_hop: Some("2"),
        expected: Ok(
            "ip2nets:\n  - net-spec: tcp0\n    interfaces:\n         0: eth0\n         1: eth1\n    ip-range:\n         0: 192.168.0.[2,4]\n  - net-spec: o2ib0\n    ip-range:\n         0: 132.6.[1-3].[2-8/2]\nroute:\n  - net: tcp0\n    gateway: 10.0.0.[1-2]@o2ib0\n    hop: 2\n    priority: 5\n  - net: tcp0\n    gateway: 10.0.0.[3-4]@o2ib0\n    hop: 2\n    priority: 10\n",
        ),
    },
    Case {
        name: "seeds_client",
        modprobe: &[
            "options lnet networks=ptlf(0) routes='o2ib [1,2,3,4,5]@ptlf' lnet_peer_discovery_disabled=1 lnet_health_sensitivity=0 check_router_before_use=1 live_router_check_interval=107 dead_router_check_interval=50\noptions kptl4lnd peer_credits=32 ntx=8192\noptions libcfs cpu_pattern=\"0[0-15] 1[18-33] 2[34-49] 3[50-65]\"\n",
        ],
        ip2nets: &[],
        routes: &[],
        networks: &[],
        inline: None,
        default_hop: None,
        expected: Ok(
            "net:\n-     net type: ptlf\n      local NI(s):\n      -     interfaces:\n                  0: 0\nroute:\n  - net: o2ib\n    gateway: [1,2,3,4,5]@ptlf\n",
        ),
    },
    Case {
        name: "comments_semicolons_and_continuations",
        modprobe: &[],
        ip2nets: &[],
        routes: &[],
        networks: &[],
        inline: Some("tcp0 10.0.0.* # first\\\n ; o2ib 10.1.*.* ;; # gone; tcp2 1.2.3.4\n"),
        default_hop: None,
        expected: Ok(
            "ip2nets:\n  - net-spec: tcp0\n    ip-range:\n         0: 10.0.0.*\n  - net-spec: o2ib\n    ip-range:\n         0: 10.1.*.*\n  - net-spec: tcp2\n    ip-range:\n         0: 1.2.3.4\n",
        ),
    },
    Case {
        name: "default_hop_keeps_explicit",
        modprobe: &[],
        ip2nets: &[],
        routes: &["tcp0 10.0.0.1@o2ib0; tcp1 4 10.0.0.2@o2ib0"],
        networks: &[],
        inline: None,
        default_hop: Some("9"),
        expected: Ok(
            "route:\n  - net: tcp0\n    gateway: 10.0.0.1@o2ib0\n    hop: 9\n  - net: tcp1\n    gateway: 10.0.0.2@o2ib0\n    hop: 4\n",
        ),
    },
    Case {
        name: "default_hop_out_of_range",
        modprobe: &[],
        ip2nets: &[],
        routes: &["tcp0 10.0.0.1@o2ib0"],
        networks: &[],
        inline: None,
        default_hop: Some("256"),
        expected: Err((2, "Error: --default-hop value 256 out of range (1-255)")),
    },
    Case {
        name: "empty_interface_list",
        modprobe: &[],
        ip2nets: &[],
        routes: &[],
        networks: &[],
        inline: Some("tcp(,) 10.0.0.*"),
        default_hop: None,
        expected: Err((2, "Error: Empty interface list in rule: 'tcp(,) 10.0.0.*'")),
    },
    Case {
        name: "networks_file_newline",
        modprobe: &[],
        ip2nets: &[],
        routes: &[],
        networks: &["tcp0(eth0)\no2ib\n"],
        inline: None,
        default_hop: None,
        expected: Err((
            2,
            "Error in networks file n0.conf: Invalid network specification: 'tcp0(eth0)\no2ib'",
        )),
    },
    Case {
        name: "networks_file_commas",
        modprobe: &[],
        ip2nets: &[],
        routes: &[],
        networks: &["tcp0(eth0), o2ib(ib0,ib1) ,tcp1\n"],
        inline: None,
        default_hop: None,
        expected: Ok(
            "net:\n-     net type: tcp0\n      local NI(s):\n      -     interfaces:\n                  0: eth0\n-     net type: o2ib\n      local NI(s):\n      -     interfaces:\n                  0: ib0\n                  1: ib1\n-     net type: tcp1\n",
        ),
    },
    Case {
        name: "route_incomplete",
        modprobe: &[],
        ip2nets: &[],
        routes: &["tcp0\n"],
        networks: &[],
        inline: None,
        default_hop: None,
        expected: Err((
            2,
            "Error in routes file r0.conf: routes: incomplete route specification 'tcp0'",
        )),
    },
    Case {
        name: "route_missing_gateway",
        modprobe: &[],
        ip2nets: &[],
        routes: &["tcp0 3\n"],
        networks: &[],
        inline: None,
        default_hop: None,
        expected: Err((
            2,
            "Error in routes file r0.conf: routes: missing gateway specs in 'tcp0 3'",
        )),
    },
    Case {
        name: "alternative_bad_priority",
        modprobe: &[],
        ip2nets: &[],
        routes: &["tcp0: { gateway: a@b, priority: x }\n"],
        networks: &[],
        inline: None,
        default_hop: None,
        expected: Err((
            2,
            "Error in routes file r0.conf: routes: invalid priority value 'x' in 'tcp0: { gateway: a@b, priority: x }'",
        )),
    },
    Case {
        name: "alternative_bad_hop",
        modprobe: &[],
        ip2nets: &[],
        routes: &["tcp0: { gateway: a@b, hop: two }\n"],
        networks: &[],
        inline: None,
        default_hop: None,
        expected: Err((
            2,
            "Error in routes file r0.conf: routes: invalid hop value 'two' in 'tcp0: { gateway: a@b, hop: two }'",
        )),
    },
    Case {
        name: "priority_needs_an_at_sign",
        modprobe: &[],
        ip2nets: &[],
        routes: &["tcp0 1 10.0.0.1:7\ntcp0 1 a@b:007\ntcp0 1 a@b:x\n"],
        networks: &[],
        inline: None,
        default_hop: None,
        expected: Ok(
            "route:\n  - net: tcp0\n    gateway: 10.0.0.1:7\n    hop: 1\n  - net: tcp0\n    gateway: a@b\n    hop: 1\n    priority: 7\n  - net: tcp0\n    gateway: a@b:x\n    hop: 1\n",
        ),
    },
    Case {
        name: "second_net_spec",
        modprobe: &[],
        ip2nets: &[],
        routes: &[],
        networks: &[],
        inline: Some("tcp0 10.0.0.* tcp1"),
        default_hop: None,
        expected: Err((
            2,
            "Error: Detected what looks like a second network specification 'tcp1' in rule: 'tcp0 10.0.0.* tcp1'. Multiple network rules must be separated by semicolons (;).",
        )),
    },
    Case {
        name: "rule_header_error",
        modprobe: &[],
        ip2nets: &[],
        routes: &[],
        networks: &[],
        inline: Some("1tcp 10.0.0.*"),
        default_hop: None,
        expected: Err((2, "Error: Cannot parse rule header: '1tcp 10.0.0.*'")),
    },
    Case {
        name: "inline_quoted_value_spans_lines",
        modprobe: &[],
        ip2nets: &[],
        routes: &[],
        networks: &[],
        inline: Some("ip2nets=\"tcp0 10.0.0.*\ntcp1 10.1.0.*\""),
        default_hop: None,
        expected: Ok(
            "ip2nets:\n  - net-spec: tcp0\n    ip-range:\n         0: 10.0.0.*\n  - net-spec: tcp1\n    ip-range:\n         0: 10.1.0.*\n",
        ),
    },
    Case {
        name: "modprobe_files_in_order",
        modprobe: &["options lnet routes=\"tcp0 a@b\"\n", "options lnet networks=tcp\n"],
        ip2nets: &["tcp 1.2.3.4\n"],
        routes: &[],
        networks: &[],
        inline: None,
        default_hop: None,
        expected: Ok(
            "net:\n-     net type: tcp\nip2nets:\n  - net-spec: tcp\n    ip-range:\n         0: 1.2.3.4\nroute:\n  - net: tcp0\n    gateway: a@b\n",
        ),
    },
    Case {
        name: "error_in_modprobe",
        modprobe: &["options lnet networks=tcp(\n"],
        ip2nets: &[],
        routes: &[],
        networks: &[],
        inline: None,
        default_hop: None,
        expected: Err((2, "Error in modprobe file m0.conf: Invalid network specification: 'tcp('")),
    },
    Case {
        name: "error_in_ip2nets_file",
        modprobe: &[],
        ip2nets: &["tcp\n"],
        routes: &[],
        networks: &[],
        inline: None,
        default_hop: None,
        expected: Err((2, "Error in ip2nets file i0.conf: Cannot parse rule header: 'tcp'")),
    },
    Case {
        name: "error_in_networks_file",
        modprobe: &[],
        ip2nets: &[],
        routes: &[],
        networks: &["tcp(eth0\n"],
        inline: None,
        default_hop: None,
        expected: Err((
            2,
            "Error in networks file n0.conf: Invalid network specification: 'tcp(eth0'",
        )),
    },
];

mod properties {
    use super::*;
    use proptest::prelude::*;

    fn text() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop_oneof![
                "[ -~\n]{0,6}",
                Just("routes=".to_string()),
                Just("ip2nets=".to_string()),
                Just("networks=".to_string()),
                Just("options lnet ".to_string()),
                Just("tcp1: { gateway: ".to_string()),
                Just("10.0.0.*".to_string()),
                Just("\\\n".to_string()),
            ],
            0..20,
        )
        .prop_map(|pieces| pieces.concat())
    }

    proptest! {
        #[test]
        fn conversions_never_panic_and_end_lines(inline in text(), file in text()) {
            let mut converter = Converter::new();
            let added = converter
                .add_modprobe("m", &file)
                .and_then(|()| converter.add_ip2nets("i", &file))
                .and_then(|()| converter.add_routes("r", &file))
                .and_then(|()| converter.add_networks("n", &file))
                .and_then(|()| converter.add_inline(&inline));
            if added.is_ok() {
                if let Ok(yaml) = converter.finish(Some("2")) {
                    prop_assert!(yaml.ends_with('\n'));
                }
            }
        }
    }
}
