//! The grammar: inheritance, DoM, SEL, OST lists, lfs's errors, and the options → layout →
//! options round trip.

use proptest::prelude::*;

use super::*;

fn parse(options: &str) -> Result<Setstripe, SetstripeError> {
    let args: Vec<&str> = options.split_whitespace().collect();
    Setstripe::parse(&args)
}

fn components(options: &str) -> Vec<ComponentRequest> {
    parse(options).map(|s| s.components).unwrap_or_else(|e| panic!("{options}: {e}"))
}

const M: u64 = 1 << 20;

#[test]
fn components_inherit_size_count_and_pool() {
    let c = components("-E 4M -c 1 -S 1M -p flash -E 64M -c 2 -E -1 -c -1 -p ''");
    let summary: Vec<_> = c
        .iter()
        .map(|c| (c.start, c.end, c.stripe_size, c.stripe_count, c.pool.as_str().to_string()))
        .collect();
    assert_eq!(
        summary,
        [
            (0, 4 * M, M, 1, "flash".into()),
            (4 * M, 64 * M, M, 2, "flash".into()),
            (64 * M, LUSTRE_EOF, M, 0xFFFF, "''".into()),
        ]
    );
    // Not inherited: the stripe index and the pattern.
    let c = components("-E 4M -i 3 -C 8 -E -1");
    assert_eq!(
        (c[0].stripe_offset, c[0].pattern),
        (3, LOV_PATTERN_RAID0 | LOV_PATTERN_OVERSTRIPING)
    );
    assert_eq!(
        (c[1].stripe_offset, c[1].pattern, c[1].stripe_count),
        (LOV_OFFSET_DEFAULT, LOV_PATTERN_RAID0, 8)
    );
}

#[test]
fn dom_component_and_what_follows() {
    let c = components("-E 1M -L mdt -E -1 -c 4");
    assert_eq!((c[0].pattern, c[0].stripe_size, c[0].stripe_count), (LOV_PATTERN_MDT, M, 0));
    assert_eq!((c[1].stripe_size, c[1].stripe_count), (0, 4));
    assert_eq!(parse("-E 1M -c 1 -E 2M -L mdt").err(), Some(SetstripeError::DomNotFirst));
    assert_eq!(parse("-E 2G -L mdt").err(), Some(SetstripeError::DomTooBig));
    // lfs checks the size at -L, against the end known then: this order passes, and the
    // canonical options keep it (found by the lov_setstripe fuzz target).
    let quirk = parse("-L mdt -E 2G").expect("lfs accepts -L mdt before its -E");
    assert_eq!(quirk.to_args()[..4], ["-L", "mdt", "-E", "2G"]);
    let again = Setstripe::parse(&quirk.to_args()).map(|s| s.to_layout());
    assert_eq!(again, Ok(quirk.to_layout()));
    assert_eq!(parse("-E 1M -L mdt -c 2 -E -1").err(), Some(SetstripeError::DomStripeCount(2)));
    assert_eq!(parse("-E 1M -L mdt -C 2").err(), Some(SetstripeError::OverstripeWithDom));
    assert_eq!(
        parse("-E 1M -L mdt -p fast -E -1").err(),
        Some(SetstripeError::DomPool("fast".into()))
    );
    assert_eq!(parse("-E 1M -L foo").err(), Some(SetstripeError::UnknownLayout("foo".into())));
}

#[test]
fn extension_size_makes_a_zero_length_component_and_extension_space() {
    let c = components("-E -1 -S 4M -z 64M");
    assert_eq!(c.len(), 2);
    assert_eq!((c[0].start, c[0].end, c[0].flags), (0, 0, 0));
    assert_eq!(
        (c[1].start, c[1].end, c[1].flags, c[1].stripe_size),
        (0, LUSTRE_EOF, LCME_FL_EXTENSION, 64 * M)
    );
    let Layout::Composite(layout) =
        parse("-E -1 -S 4M -z 64M").map(|s| s.to_layout()).unwrap_or_else(|e| panic!("{e}"))
    else {
        panic!()
    };
    assert_eq!(layout.components[1].sub.plain().map(|p| p.stripe_size), Some(65536)); // KiB
    assert_eq!(
        parse("-E -1 -S 4M -z 6M").err(),
        Some(SetstripeError::Sanity("The extension size must be aligned by the stripe size"))
    );
}

#[test]
fn ost_lists() {
    let c = components("-c 3 -o 1,4-5");
    assert_eq!((c[0].osts.clone(), c[0].stripe_offset, c[0].stripe_count), (vec![1, 4, 5], 1, 3));
    let layout = parse("-o 1,4-5 -i 4").map(|s| s.to_layout()).unwrap_or_else(|e| panic!("{e}"));
    let Layout::Plain(plain) = layout else { panic!() };
    assert_eq!(plain.magic, LOV_MAGIC_SPECIFIC);
    assert_eq!(plain.objects.iter().map(|o| o.ost_index).collect::<Vec<_>>(), [1, 4, 5]);
    assert_eq!(plain.offset_or_gen, 4);
    assert_eq!(parse("-E -1 -c 2 -o 1,4-5").err(), Some(SetstripeError::CountNotListLength(2, 3)));
    assert_eq!(parse("-E -1 -i 2 -o 1,4-5").err(), Some(SetstripeError::OffsetNotInList(2)));
    assert!(parse("-i 2 -o 1,4-5").is_ok()); // plain: left to the MDS
    assert_eq!(parse("-c 2 -o 1,4-5").map_err(|e| e.exit_status()).err(), Some(4));
    assert_eq!(parse("-o 1,x").err(), Some(SetstripeError::OstList("1,x".into())));
    assert_eq!(components("-o 1,1")[0].pattern, LOV_PATTERN_RAID0 | LOV_PATTERN_OVERSTRIPING);
}

#[test]
fn lfs_errors() {
    let cases = [
        ("-c 2001", "lfs setstripe: invalid stripe count '2001'"),
        ("-c -2", "lfs setstripe: invalid stripe count '-2'"),
        ("-c x", "lfs setstripe: invalid stripe count 'x'"),
        ("-S 100K", "lfs setstripe: invalid stripe size '100K'"),
        ("-E -1 -S 4G", "Set stripe size 4294967296 failed: Invalid argument"),
        (
            "-S 4G",
            "lfs setstripe: error: stripe size '4294967296' over 4GB limit: Invalid argument (22)",
        ),
        (
            "-L mdt",
            "lfs setstripe: Invalid pattern: '-L mdt', must be specified with -E: Invalid argument (22)",
        ),
        ("-i 65504", "lfs setstripe: invalid stripe offset '65504'"),
        ("-E 100K", "lfs setstripe: invalid component end '100K'"),
        ("-E 3M -S 2M", "Invalid layout: The component end must be aligned by the stripe size"),
        ("-E -1 -p sixteen_chars_xx", "Set pool name: sixteen_chars_xx failed. Invalid argument"),
        (
            "-p sixteen_chars_xx",
            "lfs setstripe: Invalid Poolname 'sixteen_chars_xx': Invalid argument (22)",
        ),
        ("-Q", "lfs: unrecognized option '-Q'"),
        ("-c", "lfs: option requires an argument -- 'c'"),
        ("-N2", "lfs setstripe: -N2 is not supported by this tool"),
    ];
    for (options, message) in cases {
        assert_eq!(
            parse(options).map_err(|e| e.to_string()).err().as_deref(),
            Some(message),
            "{options}"
        );
    }
    assert!(parse("-C -32 -S 64K").is_ok());
    assert!(parse("-C -33").is_err());
    // Bare sizes under 4096 are KiB; -E takes "eof" by prefix.
    assert_eq!(components("-S 1024")[0].stripe_size, M);
    assert_eq!(components("-E 1024 -E eofx")[1].end, LUSTRE_EOF);
}

#[test]
fn plain_request_bytes() {
    // lov_user_md_v1: magic, pattern raid0, oi 0, size 1 MiB, count 2, offset -1.
    let layout = parse("-c 2 -S 1M").map(|s| s.to_layout()).unwrap_or_else(|e| panic!("{e}"));
    let bytes = layout.encode().unwrap_or_default();
    let mut expected = vec![0xd0, 0x0b, 0xd1, 0x0b, 1, 0, 0, 0];
    expected.extend([0; 16]);
    expected.extend([0, 0, 0x10, 0, 2, 0, 0xff, 0xff]);
    assert_eq!(bytes, expected);
}

fn component_options() -> impl Strategy<Value = String> {
    let size = prop_oneof![Just(""), Just("-S 64K"), Just("-S 1M"), Just("-S 4M"), Just("-S 0")];
    let count = prop_oneof![
        Just(""),
        Just("-c 0"),
        Just("-c 1"),
        Just("-c 16"),
        Just("-c -1"),
        Just("-C 8"),
        Just("-C -2")
    ];
    let pool = prop_oneof![Just(""), Just("-p flash"), Just("-p ignore"), Just("-p inherit")];
    let index = prop_oneof![Just(""), Just("-i 3"), Just("-i -1")];
    let flags = prop_oneof![Just(""), Just("--comp-flags prefer"), Just("--comp-flags nosync")];
    (size, count, pool, index, flags).prop_map(|(a, b, c, d, e)| [a, b, c, d, e].join(" "))
}

fn command() -> impl Strategy<Value = String> {
    let plain = (component_options(), prop_oneof![Just(""), Just("-o 1,3-4")])
        .prop_map(|(o, l)| format!("{o} {l}"));
    let pfl = (
        any::<bool>(),
        proptest::collection::vec((1u64..4, component_options(), any::<bool>()), 1..5),
    )
        .prop_map(|(dom, parts)| {
            let mut text = if dom { "-E 1M -L mdt".to_string() } else { String::new() };
            let mut end = 4u64;
            let count = parts.len();
            for (i, (step, options, extend)) in parts.into_iter().enumerate() {
                end += step * 4;
                let e = if i + 1 == count { "-1".to_string() } else { format!("{end}M") };
                let z = if extend { " -z 16M" } else { "" };
                text.push_str(&format!(" -E {e} {options}{z}"));
            }
            text
        });
    prop_oneof![plain, pfl]
}

proptest! {
    /// options → layout → options → the same layout.
    #[test]
    fn grammar_round_trips(options in command()) {
        if let Ok(first) = parse(&options) {
            let again = Setstripe::parse(&first.to_args());
            prop_assert_eq!(again.as_ref().map(Setstripe::to_layout), Ok(first.to_layout()), "{} → {:?}", options, first.to_args());
        }
    }
}

/// Inputs a random-token search found where canonical options lost information.
#[test]
fn canonical_options_regressions() {
    for options in
        ["-o 1,1 -p eof -i -1", "-E 8M --comp-flags prefrd -L mdt", "-E 1M -L mdt -i 0 -E -1"]
    {
        let first = parse(options).unwrap_or_else(|e| panic!("{options}: {e}"));
        let again = Setstripe::parse(&first.to_args()).map(|s| s.to_layout());
        assert_eq!(again, Ok(first.to_layout()), "{options}");
    }
}
