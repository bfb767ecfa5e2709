use super::*;
use proptest::prelude::*;

fn ni(entries: Vec<(&str, Node)>) -> Node {
    Node::map(entries)
}

#[test]
fn net_show_shape_from_cli_md_section_0() {
    // docs/protocol/cli.md §0.1, dialect N example.
    let tree = Node::map([(
        "net",
        Node::seq([ni(vec![
            ("net type", Node::plain("tcp")),
            (
                "local NI(s)",
                Node::seq([ni(vec![
                    ("nid", Node::plain("192.168.1.2@tcp")),
                    ("status", Node::plain("up")),
                    ("interfaces", Node::map([("0", Node::plain("eth0"))])),
                ])]),
            ),
        ])]),
    )]);
    let expected = "\
net:
-     net type: tcp
      local NI(s):
      -     nid: 192.168.1.2@tcp
            status: up
            interfaces:
                  0: eth0
";
    assert_eq!(tree.to_string_n(), expected);
}

#[test]
fn global_and_udsp_shape_from_cli_md_section_0() {
    // docs/protocol/cli.md §0.1, dialect C example.
    let tree = Node::map([
        (
            "global",
            Node::map([
                ("numa_range", Node::c_number(0)),
                ("max_interfaces", Node::c_number(4096)),
            ]),
        ),
        (
            "udsp",
            Node::seq([Node::map([
                ("idx", Node::c_number(0)),
                ("src", Node::plain("tcp")),
                ("action", Node::map([("priority", Node::c_number(1))])),
            ])]),
        ),
    ]);
    let expected = "\
global:
    numa_range: 0
    max_interfaces: 4096
udsp:
    - idx: 0
      src: tcp
      action:
          priority: 1
";
    assert_eq!(tree.to_string_c(), expected);
}

#[test]
fn cyaml_error_shape_from_cli_md_section_2_2() {
    let tree = Node::map([(
        "add",
        Node::seq([Node::map([(
            "numa_range",
            Node::map([
                ("errno", Node::c_number(-22)),
                ("descr", Node::plain("\"cannot configure numa_range to 5: Invalid argument\"")),
            ]),
        )])]),
    )]);
    let expected = "\
add:
    - numa_range:
          errno: -22
          descr: \"cannot configure numa_range to 5: Invalid argument\"
";
    assert_eq!(tree.to_string_c(), expected);
}

#[test]
fn netlink_error_shape_matches_libyaml() {
    // Output of libyaml 0.2.5 for yaml_lnet_print_error()'s events (tests/oracle): explicit
    // document markers, no space after the empty `peer:` value, and the `!` tag libyaml puts
    // before a double-quoted scalar built with quoted_implicit = 0.
    let tree = Node::map([(
        "add",
        Node::seq([Node::map([
            ("peer", Node::plain("")),
            ("errno", Node::plain("-22")),
            (
                "descr",
                Node::Scalar(Scalar::event(
                    "Unable to parse nidlist: specifies more NIDs than allowed",
                    ScalarStyle::DoubleQuoted,
                )),
            ),
        ])]),
    )]);
    let expected = "\
---
add:
-     peer:
      errno: -22
      descr: ! \"Unable to parse nidlist: specifies more NIDs than allowed\"
...
";
    assert_eq!(tree.to_string_libyaml(LibyamlStyle::ERROR_N), expected);
}

#[test]
fn ping_shape_uses_the_default_indent() {
    // docs/protocol/cli.md §3.5; the failure text is a plain event that needs quotes because of ": ".
    let tree = Node::map([
        (
            "ping",
            Node::seq([Node::map([
                ("primary nid", Node::plain("10.0.0.2@tcp")),
                ("Multi-Rail", Node::bool(true)),
                ("peer_ni", Node::seq([Node::map([("nid", Node::plain("10.0.0.2@tcp"))])])),
            ])]),
        ),
        (
            "manage",
            Node::seq([Node::map([
                ("ping", Node::plain("")),
                ("errno", Node::int(-110)),
                (
                    "descr",
                    Node::Scalar(Scalar::event(
                        "failed to ping 10.0.0.9@tcp: Connection timed out",
                        ScalarStyle::Plain,
                    )),
                ),
            ])]),
        ),
    ]);
    let expected = "\
ping:
- primary nid: 10.0.0.2@tcp
  Multi-Rail: true
  peer_ni:
  - nid: 10.0.0.2@tcp
manage:
- ping:
  errno: -110
  descr: ! 'failed to ping 10.0.0.9@tcp: Connection timed out'
";
    assert_eq!(tree.to_string_libyaml(LibyamlStyle::DEFAULT_INDENT), expected);
}

#[test]
fn libyaml_scalar_styles() {
    let doc = |value: Node| Node::map([("k", value)]).to_string_n();
    assert_eq!(doc(Node::double_quoted("[0,1]")), "k: \"[0,1]\"\n");
    assert_eq!(doc(Node::plain("[0,1]")), "k: '[0,1]'\n");
    assert_eq!(doc(Node::plain("a: b")), "k: 'a: b'\n");
    assert_eq!(doc(Node::plain("it's: x")), "k: 'it''s: x'\n");
    assert_eq!(doc(Node::plain("a:b")), "k: a:b\n");
    assert_eq!(doc(Node::plain("<?>")), "k: <?>\n");
    assert_eq!(doc(Node::plain("- x")), "k: '- x'\n");
    assert_eq!(doc(Node::plain("a #b")), "k: 'a #b'\n");
    assert_eq!(doc(Node::plain(" lead")), "k: ' lead'\n");
    assert_eq!(doc(Node::plain("tab\there")), "k: \"tab\\there\"\n");
    assert_eq!(doc(Node::plain("caf\u{e9}")), "k: \"caf\\xE9\"\n");
    assert_eq!(doc(Node::plain("---x")), "k: '---x'\n");
    assert_eq!(doc(Node::plain("")), "k:\n");
    assert_eq!(doc(Node::seq([])), "k: []\n");
    assert_eq!(doc(Node::map(Vec::<(String, Node)>::new())), "k: {}\n");
    // Quoted keys and the `? ` form for keys over 128 bytes.
    assert_eq!(Node::map([("a: b", Node::plain("v"))]).to_string_n(), "'a: b': v\n");
    let long = "k".repeat(129);
    assert_eq!(
        Node::map([(long.as_str(), Node::plain("v"))]).to_string_n(),
        format!("? {long}\n: v\n")
    );
}

#[test]
fn libyaml_multiline_scalars() {
    let doc = |value: Node| Node::map([("k", value)]).to_string_n();
    // Verified against libyaml 0.2.5 (tests/oracle).
    assert_eq!(doc(Node::plain("a\nb")), "k: 'a\n\n      b'\n");
    assert_eq!(doc(Node::double_quoted("a\nb")), "k: \"a\\nb\"\n");
    assert_eq!(doc(Node::plain("a \nb")), "k: \"a \\nb\"\n");
}

#[test]
fn libyaml_folds_long_plain_scalars_at_column_80() {
    let words = ["alpha"; 20].join(" ");
    let out = Node::map([("descr", Node::plain(words.as_str()))]).to_string_n();
    // Verified against libyaml 0.2.5 (tests/oracle): the break happens at the first space past
    // column 80 and the continuation is indented one step.
    let expected = "descr: alpha alpha alpha alpha alpha alpha alpha alpha alpha alpha alpha alpha alpha\n      alpha alpha alpha alpha alpha alpha alpha\n";
    assert_eq!(out, expected);
}

#[test]
fn root_sequence_and_scalar() {
    let out = Node::seq([Node::plain("a"), Node::seq([Node::plain("b")])]).to_string_n();
    assert_eq!(out, "- a\n-     - b\n");
    assert_eq!(Node::plain("x").to_string_n(), "x\n");
}

#[test]
fn cyaml_routing_shape_from_cli_md_section_3_6() {
    let pool = |npages: u32, n: u32| {
        Node::map([
            ("npages", Node::c_number(npages)),
            ("nbuffers", Node::c_number(n)),
            ("credits", Node::c_number(n)),
            ("mincredits", Node::c_number(n)),
        ])
    };
    let tree = Node::map([
        (
            "routing",
            Node::seq([
                Node::map([(
                    "cpt[0]",
                    Node::map([
                        ("tiny", pool(0, 512)),
                        ("small", pool(1, 4096)),
                        ("large", pool(256, 256)),
                    ]),
                )]),
                Node::map([("enable", Node::c_number(1))]),
            ]),
        ),
        (
            "buffers",
            Node::map([
                ("tiny", Node::c_number(512)),
                ("small", Node::c_number(4096)),
                ("large", Node::c_number(256)),
            ]),
        ),
    ]);
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
    - enable: 1
buffers:
    tiny: 512
    small: 4096
    large: 256
";
    assert_eq!(tree.to_string_c(), expected);
}

#[test]
fn cyaml_quirks() {
    // A sequence opening a sequence item loses its "- " (cyaml.c print_array()).
    let tree = Node::map([(
        "a",
        Node::seq([Node::map([("inner", Node::seq([Node::map([("x", Node::c_number(1))])]))])]),
    )]);
    assert_eq!(tree.to_string_c(), "a:\n      inner:\n        - x: 1\n");
    // Multi-line strings continue under the value.
    let tree = Node::map([("g", Node::map([("descr", Node::plain("one\ntwo"))]))]);
    assert_eq!(tree.to_string_c(), "g:\n    descr: one\n           two\n");
    // Named empty collections print just the key.
    let tree = Node::map([("e", Node::seq([])), ("f", Node::map(Vec::<(String, Node)>::new()))]);
    assert_eq!(tree.to_string_c(), "e:\nf:\n");
}

#[test]
fn cyaml_numbers_follow_the_double_rules() {
    assert_eq!(cyaml_number_text(0.0), "0");
    assert_eq!(cyaml_number_text(-22.0), "-22");
    assert_eq!(cyaml_number_text(f64::from(i32::MAX)), "2147483647");
    assert_eq!(cyaml_number_text(4_294_967_296.0), "4294967296");
    // u64 counters pass through a double: 2^53 + 1 prints as 2^53.
    assert_eq!(cyaml_number_text(9_007_199_254_740_993_u64 as f64), "9007199254740992");
    assert_eq!(cyaml_number_text(0.5), "0.500000");
    assert_eq!(cyaml_number_text(1.5e-7), "1.500000e-07");
    assert_eq!(cyaml_number_text(1.0e70), "1.000000e+70");
    assert_eq!(
        Node::c_number(18_446_744_073_709_551_615_u64 as f64),
        Node::plain("18446744073709551616")
    );
}

// ---------------------------------------------------------------------------------------------
// Round trips through a real YAML parser.

/// Scalars that stay strings when parsed: a letter first, so never a number, bool or null.
fn any_text() -> impl Strategy<Value = String> {
    "[a-zA-Z][ -~\n]{0,30}".prop_filter("not a YAML 1.2 keyword", |s| {
        !matches!(s.to_ascii_lowercase().as_str(), "true" | "false" | "null" | "nan" | "inf")
    })
}

/// Scalars cYAML can print raw and still parse back unchanged.
fn plain_safe_text() -> impl Strategy<Value = String> {
    "x[a-zA-Z0-9@._/-]{0,20}"
}

fn unique_keys(entries: Vec<(String, Node)>) -> Vec<(String, Node)> {
    entries.into_iter().enumerate().map(|(i, (k, v))| (format!("{k}{i}"), v)).collect()
}

fn tree_n() -> impl Strategy<Value = Node> {
    let leaf = (
        any_text(),
        prop_oneof![
            Just(ScalarStyle::Plain),
            Just(ScalarStyle::SingleQuoted),
            Just(ScalarStyle::DoubleQuoted)
        ],
    )
        .prop_map(|(text, style)| Node::Scalar(Scalar::new(text, style)));
    leaf.prop_recursive(4, 40, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Node::Seq),
            prop::collection::vec((any_text(), inner), 0..5)
                .prop_map(|entries| Node::Map(unique_keys(entries))),
        ]
    })
}

fn tree_c() -> impl Strategy<Value = Node> {
    let leaf = plain_safe_text().prop_map(Node::plain);
    let map_of = |inner: BoxedStrategy<Node>| {
        prop::collection::vec((plain_safe_text(), inner), 1..5)
            .prop_map(|entries| Node::Map(unique_keys(entries)))
    };
    leaf.prop_recursive(4, 40, 5, move |inner| {
        // cYAML sequences hold mappings whose first value is not a sequence.
        let item =
            prop::collection::vec((plain_safe_text(), inner.clone()), 1..5).prop_map(|entries| {
                let mut entries = unique_keys(entries);
                if let Some((_, first)) = entries.first_mut() {
                    if matches!(first, Node::Seq(_)) {
                        *first = Node::plain("x");
                    }
                }
                Node::Map(entries)
            });
        prop_oneof![map_of(inner.boxed()), prop::collection::vec(item, 1..4).prop_map(Node::Seq)]
    })
    .prop_map(|node| match node {
        map @ Node::Map(_) => map,
        other => Node::map([("root", other)]),
    })
}

/// The tree a parser sees, with every scalar reduced to its text.
fn from_value(value: &yaml_serde::Value) -> Node {
    match value {
        yaml_serde::Value::Null => Node::plain(""),
        yaml_serde::Value::Bool(b) => Node::plain(b.to_string()),
        yaml_serde::Value::Number(n) => Node::plain(n.to_string()),
        yaml_serde::Value::String(s) => Node::plain(s.as_str()),
        yaml_serde::Value::Sequence(items) => Node::Seq(items.iter().map(from_value).collect()),
        yaml_serde::Value::Mapping(map) => Node::Map(
            map.iter()
                .map(|(k, v)| (k.as_str().unwrap_or_default().to_string(), from_value(v)))
                .collect(),
        ),
        yaml_serde::Value::Tagged(tagged) => from_value(&tagged.value),
    }
}

fn plain_texts(node: &Node) -> Node {
    match node {
        Node::Scalar(s) => Node::plain(s.text.as_str()),
        Node::Seq(items) => Node::Seq(items.iter().map(plain_texts).collect()),
        Node::Map(entries) => {
            Node::Map(entries.iter().map(|(k, v)| (k.clone(), plain_texts(v))).collect())
        }
    }
}

proptest! {
    #[test]
    fn dialect_n_parses_back_to_the_same_tree(tree in tree_n()) {
        for style in [LibyamlStyle::DIALECT_N, LibyamlStyle::DEFAULT_INDENT, LibyamlStyle::ERROR_N] {
            let text = tree.to_string_libyaml(style);
            let value: yaml_serde::Value = yaml_serde::from_str(&text)
                .map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
            prop_assert_eq!(from_value(&value), plain_texts(&tree), "{}", text);
        }
    }

    #[test]
    fn dialect_c_parses_back_to_the_same_tree(tree in tree_c()) {
        let text = tree.to_string_c();
        let value: yaml_serde::Value = yaml_serde::from_str(&text)
            .map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(from_value(&value), tree, "{}", text);
    }
}
