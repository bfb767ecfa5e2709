//! Differential test of the dialect-N emitter against the system libyaml.
//!
//! Needs a C toolchain and libyaml, so it is ignored by default:
//! `cc -o /tmp/libyaml_emit tests/oracle/libyaml_emit.c -lyaml` then
//! `ULNET_LIBYAML_ORACLE=/tmp/libyaml_emit cargo test -p ulnet-config --test libyaml_oracle -- --ignored`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)] // Test, bench and example code outside #[test] functions.

use std::io::Write as _;
use std::process::{Command, Stdio};

use proptest::prelude::*;
use ulnet_config::emit::{LibyamlStyle, Scalar, ScalarStyle, Yaml};

fn script(node: &Yaml, out: &mut String) {
    match node {
        Yaml::Scalar(scalar) => scalar_line(scalar, out),
        Yaml::Seq(items) => {
            out.push_str("S\n");
            for item in items {
                script(item, out);
            }
            out.push_str("s\n");
        }
        Yaml::Map(entries) => {
            out.push_str("M\n");
            for (key, value) in entries {
                scalar_line(&Scalar::new(key.as_str(), ScalarStyle::Plain), out);
                script(value, out);
            }
            out.push_str("m\n");
        }
    }
}

fn scalar_line(scalar: &Scalar, out: &mut String) {
    out.push(if scalar.quoted_implicit { 'd' } else { 'e' });
    out.push(match scalar.style {
        ScalarStyle::Plain => 'p',
        ScalarStyle::SingleQuoted => 's',
        ScalarStyle::DoubleQuoted => 'd',
    });
    for byte in scalar.text.bytes() {
        out.push_str(&format!("{byte:02x}"));
    }
    out.push('\n');
}

fn libyaml(oracle: &str, node: &Yaml, style: LibyamlStyle) -> String {
    let mut input = String::new();
    script(node, &mut input);
    let mut child = Command::new(oracle)
        .args([
            style.indent.to_string(),
            u8::from(style.explicit_start).to_string(),
            u8::from(style.explicit_end).to_string(),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run the oracle");
    child.stdin.take().expect("stdin").write_all(input.as_bytes()).expect("write script");
    let output = child.wait_with_output().expect("oracle output");
    assert!(output.status.success(), "oracle failed on:\n{input}");
    String::from_utf8(output.stdout).expect("utf-8")
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[ -~]{0,12}",
        "[a-z :#'\"\\[\\]{},&*!|>%@`?-]{0,12}",
        "[a-z ]{60,120}",
        "[a-z\n\t\u{e9}\u{2028} ]{0,10}",
        Just(String::new()),
    ]
}

fn scalar() -> impl Strategy<Value = Scalar> {
    (
        text(),
        prop_oneof![
            Just(ScalarStyle::Plain),
            Just(ScalarStyle::SingleQuoted),
            Just(ScalarStyle::DoubleQuoted)
        ],
        any::<bool>(),
    )
        .prop_map(|(text, style, quoted_implicit)| Scalar { text, style, quoted_implicit })
}

fn tree() -> impl Strategy<Value = Yaml> {
    scalar().prop_map(Yaml::Scalar).prop_recursive(4, 48, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Yaml::Seq),
            prop::collection::vec(("[ -~]{0,10}", inner), 0..5).prop_map(Yaml::Map),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]
    #[test]
    #[ignore = "needs ULNET_LIBYAML_ORACLE, a build of tests/oracle/libyaml_emit.c"]
    fn emitter_matches_libyaml(node in tree(), indent in 1usize..11, start: bool, end: bool) {
        let oracle = std::env::var("ULNET_LIBYAML_ORACLE")
            .expect("set ULNET_LIBYAML_ORACLE to the built oracle");
        let style = LibyamlStyle { indent, explicit_start: start, explicit_end: end };
        prop_assert_eq!(node.to_string_libyaml(style), libyaml(&oracle, &node, style));
    }
}
