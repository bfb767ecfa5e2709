use super::*;
use crate::lmv::HashType::{AllChar, Crush, Crush2, Fnv1a64};

/// Name, FNV-1a 64, then stripe indices: all_char N=4, fnv N=4, crush N=4, crush2 N=4,
/// fnv N=3, crush N=3, crush2 N=3 (docs/protocol/dirlayouts.md §3.7).
const VECTORS: &[(&str, u64, [u32; 7])] = &[
    ("a", 0xaf63dc4c8601ec8c, [1, 0, 2, 2, 1, 2, 2]),
    ("abc", 0xe71fa2190541574b, [2, 3, 1, 1, 0, 1, 1]),
    ("file0", 0x69f7c38018123e49, [0, 1, 2, 2, 0, 2, 2]),
    ("file1", 0x69f7c28018123c96, [1, 2, 2, 2, 2, 2, 2]),
    ("file2", 0x69f7c18018123ae3, [2, 3, 3, 3, 1, 0, 0]),
    ("file3", 0x69f7c08018123930, [3, 0, 0, 0, 0, 0, 0]),
    ("dir.0", 0x38acc799c34aca1a, [1, 2, 0, 0, 0, 0, 0]),
    ("data.log", 0xf851ba3d54a9694d, [2, 1, 0, 0, 0, 0, 0]),
    ("foo", 0xdcb27518fed9d577, [0, 3, 1, 1, 1, 1, 1]),
    ("foo~", 0xdd1202790c24fe4b, [2, 3, 1, 1, 1, 1, 1]),
    ("foo.bak", 0xa93270ddf704daff, [0, 3, 1, 1, 1, 1, 1]),
    ("foo.orig", 0xf7a39e00d09be5ba, [3, 2, 1, 1, 2, 1, 1]),
    (".foo.aB3dE9", 0xf26c248cb717e0ad, [0, 1, 1, 1, 1, 1, 1]),
    ("foo.aB3dE9x2", 0x09c818e06934b4fb, [0, 3, 1, 1, 1, 1, 1]),
    ("file.mdtest.0.0", 0xe54f049348986656, [3, 2, 1, 1, 1, 1, 1]),
    ("file.mdtest.1.0", 0xedeac7934d74a1fd, [0, 1, 0, 0, 2, 0, 0]),
    ("dir.mdtest.0.0", 0x7d50f38f02455683, [2, 3, 0, 0, 0, 0, 0]),
    ("file.mdtest.12.12345", 0x6907f5faa9eb71de, [1, 2, 3, 2, 2, 0, 2]),
    ("file.mdtest.12.12346", 0x6907f4faa9eb702b, [2, 3, 3, 2, 1, 0, 2]),
    ("output.6334.log", 0xb9088f56c9e1167a, [3, 2, 3, 3, 2, 0, 1]),
    ("MiXeD.txt", 0xc9454874835280ae, [1, 2, 0, 0, 1, 0, 0]),
];

#[test]
fn every_documented_vector() {
    let columns = [
        (AllChar, 4),
        (Fnv1a64, 4),
        (Crush, 4),
        (Crush2, 4),
        (Fnv1a64, 3),
        (Crush, 3),
        (Crush2, 3),
    ];
    for &(name, fnv, indices) in VECTORS {
        assert_eq!(fnv_1a_64(name.as_bytes()), fnv, "fnv_1a_64({name:?})");
        for (&(hash, count), &expected) in columns.iter().zip(&indices) {
            let got = stripe_index(hash, count, name.as_bytes());
            assert_eq!(got, Ok(expected), "{hash} N={count} {name:?}");
        }
    }
}

#[test]
fn standard_fnv_1a_64_checks() {
    assert_eq!(fnv_1a_64(b""), 0xcbf29ce484222325);
    assert_eq!(fnv_1a_64(b"foobar"), 0x85944171f73967e8);
}

#[test]
fn temp_and_backup_names_share_their_stem_stripe_under_crush() {
    for hash in [Crush, Crush2] {
        for count in 2..=16 {
            let stem = stripe_index(hash, count, b"foo");
            for name in ["foo~", "foo.bak", "foo.orig", ".foo.aB3dE9", "foo.aB3dE9x2"] {
                assert_eq!(stripe_index(hash, count, name.as_bytes()), stem, "{hash} {name}");
            }
        }
    }
}

#[test]
fn crush_v1_collapses_mdtest_names_and_crush2_does_not() {
    // Under crush every file.mdtest.<rank>.<n> with a 5-digit n hashes as "file.mdtest".
    let stem = crush_placement_group(b"file.mdtest", false);
    let v2_groups: std::collections::BTreeSet<u32> = (10000..10064)
        .map(|n| {
            let name = format!("file.mdtest.12.{n}");
            assert_eq!(crush_placement_group(name.as_bytes(), false), stem);
            crush_placement_group(name.as_bytes(), true)
        })
        .collect();
    assert!(v2_groups.len() > 32, "crush2 spreads mdtest names: {}", v2_groups.len());
}

#[test]
fn one_stripe_or_none_is_stripe_zero_and_empty_names_are_refused() {
    for hash in HashType::ALL {
        assert_eq!(stripe_index(hash, 0, b"x"), Ok(0));
        assert_eq!(stripe_index(hash, 1, b"x"), Ok(0));
        assert_eq!(stripe_index(hash, 4, b""), Err(PlacementError::EmptyName));
        assert_eq!(stripe_index(hash, 2001, b"x"), Err(PlacementError::TooManyStripes(2001)));
    }
}

#[test]
fn crush_hash_mixes_both_inputs() {
    // Distinct inputs give distinct straws for the cases CRUSH compares.
    let straws: std::collections::BTreeSet<u32> = (0..64).map(|i| crush_hash32_2(7, i)).collect();
    assert_eq!(straws.len(), 64);
    assert_ne!(crush_hash32_2(1, 2), crush_hash32_2(2, 1));
}

proptest::proptest! {
    #[test]
    fn every_name_maps_below_the_count(
        name in proptest::collection::vec(proptest::num::u8::ANY, 1..64),
        count in 1u32..=crate::lmv::LMV_MAX_STRIPE_COUNT,
    ) {
        for hash in HashType::ALL {
            let index = stripe_index(hash, count, &name);
            proptest::prop_assert!(matches!(index, Ok(i) if i < count), "{hash} {index:?}");
        }
    }

    #[test]
    fn crush_and_crush2_agree_when_the_stem_rules_agree(
        name in "[a-z]{1,12}(\\.[a-zA-Z0-9]{1,10})?",
        count in 2u32..64,
    ) {
        let bytes = name.as_bytes();
        if crush_stem(bytes, false) == crush_stem(bytes, true) {
            proptest::prop_assert_eq!(
                stripe_index(Crush, count, bytes),
                stripe_index(Crush2, count, bytes)
            );
        }
    }
}

/// mktemp-like suffixes from a fixed generator: letters of both cases and digits.
fn mktemp_suffixes(len: usize, count: usize) -> Vec<String> {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut state = 0x2545_f491_4f6c_dd1du64;
    (0..count)
        .map(|_| {
            (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    char::from(ALPHABET[(state % ALPHABET.len() as u64) as usize])
                })
                .collect()
        })
        .collect()
}

/// Lustre's own check of the difference (sanity.sh test 33h for crush, 33hh for crush2, with
/// 4 MDTs and 250 names per pattern): temporary names follow their target; numbered names
/// (`.f.111111`+i, `f.11111111`+i) all follow it under crush but spread under crush2; names with
/// dots in the suffix likewise.
#[test]
fn lustre_sanity_33h_and_33hh() {
    const COUNT: usize = 250;
    const MDTS: u32 = 4;
    let target = "f33h";
    for hash in [Crush, Crush2] {
        let home = index(hash, MDTS, target);
        let mut mismatched = 0;
        for (prefix, len) in [(".", 6), ("", 8)] {
            for suffix in mktemp_suffixes(len, COUNT) {
                let name = format!("{prefix}{target}.{suffix}");
                mismatched += usize::from(index(hash, MDTS, &name) != home);
            }
        }
        assert!(mismatched < 10, "{hash}: {mismatched} temporary names moved");

        // Lustre accepts within (5/7, 9/7] of the expected matches per pattern.
        let expect = if hash == Crush { COUNT } else { COUNT / MDTS as usize };
        let within = |same: usize| same <= expect * 9 / 7 && same > expect * 5 / 7;
        let numbered = [(".", 111_111u64), ("", 11_111_111)].map(|(prefix, first)| {
            (0..COUNT as u64)
                .filter(|i| index(hash, MDTS, &format!("{prefix}{target}.{}", first + i)) == home)
                .count()
        });
        assert!(within(numbered.iter().sum::<usize>() / 2), "{hash} numbered: {numbered:?}");
        let dotted = [(".", 3), ("", 5)].map(|(prefix, len)| {
            mktemp_suffixes(len, COUNT)
                .iter()
                .filter(|suffix| {
                    index(hash, MDTS, &format!("{prefix}{target}....{suffix}")) == home
                })
                .count()
        });
        assert!(within(dotted.iter().sum::<usize>() / 2), "{hash} dotted: {dotted:?}");
    }
}

fn index(hash: HashType, count: u32, name: &str) -> u32 {
    stripe_index(hash, count, name.as_bytes()).unwrap_or(u32::MAX)
}
