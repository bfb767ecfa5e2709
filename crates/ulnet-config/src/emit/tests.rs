use super::*;
use proptest::prelude::*;

fn ni(entries: Vec<(&str, Yaml)>) -> Yaml {
    Yaml::map(entries)
}

#[test]
fn net_show_shape_from_cli_md_section_0() {
    // docs/protocol/cli.md §0.1, dialect N example.
    let tree = Yaml::map([(
        "net",
        Yaml::seq([ni(vec![
            ("net type", Yaml::plain("tcp")),
            (
                "local NI(s)",
                Yaml::seq([ni(vec![
                    ("nid", Yaml::plain("192.168.1.2@tcp")),
                    ("status", Yaml::plain("up")),
                    ("interfaces", Yaml::map([("0", Yaml::plain("eth0"))])),
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
    let tree = Yaml::map([
        (
            "global",
            Yaml::map([
                ("numa_range", Yaml::c_number(0)),
                ("max_interfaces", Yaml::c_number(4096)),
            ]),
        ),
        (
            "udsp",
            Yaml::seq([Yaml::map([
                ("idx", Yaml::c_number(0)),
                ("src", Yaml::plain("tcp")),
                ("action", Yaml::map([("priority", Yaml::c_number(1))])),
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
    let tree = Yaml::map([(
        "add",
        Yaml::seq([Yaml::map([(
            "numa_range",
            Yaml::map([
                ("errno", Yaml::c_number(-22)),
                ("descr", Yaml::plain("\"cannot configure numa_range to 5: Invalid argument\"")),
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
    let tree = Yaml::map([(
        "add",
        Yaml::seq([Yaml::map([
            ("peer", Yaml::plain("")),
            ("errno", Yaml::plain("-22")),
            (
                "descr",
                Yaml::Scalar(Scalar::event(
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
    let tree = Yaml::map([
        (
            "ping",
            Yaml::seq([Yaml::map([
                ("primary nid", Yaml::plain("10.0.0.2@tcp")),
                ("Multi-Rail", Yaml::bool(true)),
                ("peer_ni", Yaml::seq([Yaml::map([("nid", Yaml::plain("10.0.0.2@tcp"))])])),
            ])]),
        ),
        (
            "manage",
            Yaml::seq([Yaml::map([
                ("ping", Yaml::plain("")),
                ("errno", Yaml::int(-110)),
                (
                    "descr",
                    Yaml::Scalar(Scalar::event(
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
    let doc = |value: Yaml| Yaml::map([("k", value)]).to_string_n();
    assert_eq!(doc(Yaml::double_quoted("[0,1]")), "k: \"[0,1]\"\n");
    assert_eq!(doc(Yaml::plain("[0,1]")), "k: '[0,1]'\n");
    assert_eq!(doc(Yaml::plain("a: b")), "k: 'a: b'\n");
    assert_eq!(doc(Yaml::plain("it's: x")), "k: 'it''s: x'\n");
    assert_eq!(doc(Yaml::plain("a:b")), "k: a:b\n");
    assert_eq!(doc(Yaml::plain("<?>")), "k: <?>\n");
    assert_eq!(doc(Yaml::plain("- x")), "k: '- x'\n");
    assert_eq!(doc(Yaml::plain("a #b")), "k: 'a #b'\n");
    assert_eq!(doc(Yaml::plain(" lead")), "k: ' lead'\n");
    assert_eq!(doc(Yaml::plain("tab\there")), "k: \"tab\\there\"\n");
    assert_eq!(doc(Yaml::plain("caf\u{e9}")), "k: \"caf\\xE9\"\n");
    assert_eq!(doc(Yaml::plain("---x")), "k: '---x'\n");
    assert_eq!(doc(Yaml::plain("")), "k:\n");
    assert_eq!(doc(Yaml::seq([])), "k: []\n");
    assert_eq!(doc(Yaml::map(Vec::<(String, Yaml)>::new())), "k: {}\n");
    // Quoted keys and the `? ` form for keys over 128 bytes.
    assert_eq!(Yaml::map([("a: b", Yaml::plain("v"))]).to_string_n(), "'a: b': v\n");
    let long = "k".repeat(129);
    assert_eq!(
        Yaml::map([(long.as_str(), Yaml::plain("v"))]).to_string_n(),
        format!("? {long}\n: v\n")
    );
}

#[test]
fn libyaml_multiline_scalars() {
    let doc = |value: Yaml| Yaml::map([("k", value)]).to_string_n();
    // Verified against libyaml 0.2.5 (tests/oracle).
    assert_eq!(doc(Yaml::plain("a\nb")), "k: 'a\n\n      b'\n");
    assert_eq!(doc(Yaml::double_quoted("a\nb")), "k: \"a\\nb\"\n");
    assert_eq!(doc(Yaml::plain("a \nb")), "k: \"a \\nb\"\n");
}

#[test]
fn libyaml_folds_long_plain_scalars_at_column_80() {
    let words = ["alpha"; 20].join(" ");
    let out = Yaml::map([("descr", Yaml::plain(words.as_str()))]).to_string_n();
    // Verified against libyaml 0.2.5 (tests/oracle): the break happens at the first space past
    // column 80 and the continuation is indented one step.
    let expected = "descr: alpha alpha alpha alpha alpha alpha alpha alpha alpha alpha alpha alpha alpha\n      alpha alpha alpha alpha alpha alpha alpha\n";
    assert_eq!(out, expected);
}

#[test]
fn root_sequence_and_scalar() {
    let out = Yaml::seq([Yaml::plain("a"), Yaml::seq([Yaml::plain("b")])]).to_string_n();
    assert_eq!(out, "- a\n-     - b\n");
    assert_eq!(Yaml::plain("x").to_string_n(), "x\n");
}

#[test]
fn cyaml_routing_shape_from_cli_md_section_3_6() {
    let pool = |npages: u32, n: u32| {
        Yaml::map([
            ("npages", Yaml::c_number(npages)),
            ("nbuffers", Yaml::c_number(n)),
            ("credits", Yaml::c_number(n)),
            ("mincredits", Yaml::c_number(n)),
        ])
    };
    let tree = Yaml::map([
        (
            "routing",
            Yaml::seq([
                Yaml::map([(
                    "cpt[0]",
                    Yaml::map([
                        ("tiny", pool(0, 512)),
                        ("small", pool(1, 4096)),
                        ("large", pool(256, 256)),
                    ]),
                )]),
                Yaml::map([("enable", Yaml::c_number(1))]),
            ]),
        ),
        (
            "buffers",
            Yaml::map([
                ("tiny", Yaml::c_number(512)),
                ("small", Yaml::c_number(4096)),
                ("large", Yaml::c_number(256)),
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
    let tree = Yaml::map([(
        "a",
        Yaml::seq([Yaml::map([("inner", Yaml::seq([Yaml::map([("x", Yaml::c_number(1))])]))])]),
    )]);
    assert_eq!(tree.to_string_c(), "a:\n      inner:\n        - x: 1\n");
    // Multi-line strings continue under the value.
    let tree = Yaml::map([("g", Yaml::map([("descr", Yaml::plain("one\ntwo"))]))]);
    assert_eq!(tree.to_string_c(), "g:\n    descr: one\n           two\n");
    // Named empty collections print just the key.
    let tree = Yaml::map([("e", Yaml::seq([])), ("f", Yaml::map(Vec::<(String, Yaml)>::new()))]);
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
        Yaml::c_number(18_446_744_073_709_551_615_u64 as f64),
        Yaml::plain("18446744073709551616")
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

fn unique_keys(entries: Vec<(String, Yaml)>) -> Vec<(String, Yaml)> {
    entries.into_iter().enumerate().map(|(i, (k, v))| (format!("{k}{i}"), v)).collect()
}

fn tree_n() -> impl Strategy<Value = Yaml> {
    let leaf = (
        any_text(),
        prop_oneof![
            Just(ScalarStyle::Plain),
            Just(ScalarStyle::SingleQuoted),
            Just(ScalarStyle::DoubleQuoted)
        ],
    )
        .prop_map(|(text, style)| Yaml::Scalar(Scalar::new(text, style)));
    leaf.prop_recursive(4, 40, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Yaml::Seq),
            prop::collection::vec((any_text(), inner), 0..5)
                .prop_map(|entries| Yaml::Map(unique_keys(entries))),
        ]
    })
}

fn tree_c() -> impl Strategy<Value = Yaml> {
    let leaf = plain_safe_text().prop_map(Yaml::plain);
    let map_of = |inner: BoxedStrategy<Yaml>| {
        prop::collection::vec((plain_safe_text(), inner), 1..5)
            .prop_map(|entries| Yaml::Map(unique_keys(entries)))
    };
    leaf.prop_recursive(4, 40, 5, move |inner| {
        // cYAML sequences hold mappings whose first value is not a sequence.
        let item =
            prop::collection::vec((plain_safe_text(), inner.clone()), 1..5).prop_map(|entries| {
                let mut entries = unique_keys(entries);
                if let Some((_, first)) = entries.first_mut() {
                    if matches!(first, Yaml::Seq(_)) {
                        *first = Yaml::plain("x");
                    }
                }
                Yaml::Map(entries)
            });
        prop_oneof![map_of(inner.boxed()), prop::collection::vec(item, 1..4).prop_map(Yaml::Seq)]
    })
    .prop_map(|node| match node {
        map @ Yaml::Map(_) => map,
        other => Yaml::map([("root", other)]),
    })
}

/// The tree a parser sees, with every scalar reduced to its text.
fn from_value(value: &yaml_serde::Value) -> Yaml {
    match value {
        yaml_serde::Value::Null => Yaml::plain(""),
        yaml_serde::Value::Bool(b) => Yaml::plain(b.to_string()),
        yaml_serde::Value::Number(n) => Yaml::plain(n.to_string()),
        yaml_serde::Value::String(s) => Yaml::plain(s.as_str()),
        yaml_serde::Value::Sequence(items) => Yaml::Seq(items.iter().map(from_value).collect()),
        yaml_serde::Value::Mapping(map) => Yaml::Map(
            map.iter()
                .map(|(k, v)| (k.as_str().unwrap_or_default().to_string(), from_value(v)))
                .collect(),
        ),
        yaml_serde::Value::Tagged(tagged) => from_value(&tagged.value),
    }
}

fn plain_texts(node: &Yaml) -> Yaml {
    match node {
        Yaml::Scalar(s) => Yaml::plain(s.text.as_str()),
        Yaml::Seq(items) => Yaml::Seq(items.iter().map(plain_texts).collect()),
        Yaml::Map(entries) => {
            Yaml::Map(entries.iter().map(|(k, v)| (k.clone(), plain_texts(v))).collect())
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
