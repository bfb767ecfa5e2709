use super::*;
use crate::lmv::{HashType, MdsMdKind, PoolName};

const MIGRATION: u32 = HashTypeField::FLAG_MIGRATION;
const SPLIT: u32 = HashTypeField::FLAG_SPLIT;
const MERGE: u32 = HashTypeField::FLAG_MERGE;

fn layout(hash: u32, stripe_count: u32, migrate_hash: u32, migrate_offset: u32) -> LmvMdsMd {
    LmvMdsMd {
        kind: MdsMdKind::Master,
        stripe_count,
        master_mdt_index: 0,
        hash_type: HashTypeField(hash),
        layout_version: 1,
        migrate_offset,
        migrate_hash: HashTypeField(migrate_hash),
        pool_name: PoolName::default(),
        stripe_fids: Vec::new(),
    }
}

fn index(hash: HashType, count: u32, name: &str) -> u32 {
    stripe_index(hash, count, name.as_bytes()).unwrap_or(u32::MAX)
}

#[test]
fn a_steady_layout_places_by_its_hash() {
    let md = layout(HashType::Crush2.code() | HashTypeField::FLAG_FIXED, 4, 0, 0);
    assert_eq!(place_name(&md, b"file.mdtest.12.12345"), Ok(Placement::Stripe(2)));
    assert_eq!(place_name(&md, b""), Err(PlacementError::EmptyName));
}

#[test]
fn migration_puts_targets_first_and_sources_after() {
    // 2 target stripes hashed fnv_1a_64, then 4 source stripes hashed crush.
    let md = layout(HashType::Fnv1a64.code() | MIGRATION, 6, HashType::Crush.code(), 2);
    for name in ["a", "abc", "file0", "output.6334.log"] {
        let new = index(HashType::Fnv1a64, 2, name);
        let old = 2 + index(HashType::Crush, 4, name);
        assert_eq!(place_name(&md, name.as_bytes()), Ok(Placement::Changing { new, old }));
    }
    // "a": fnv N=2 gives 0 (its fnv N=4 is 0); crush N=4 gives 2.
    assert_eq!(place_name(&md, b"a"), Ok(Placement::Changing { new: 0, old: 4 }));
}

#[test]
fn split_and_merge_swap_which_layout_is_old() {
    let split = layout(HashType::Crush2.code() | MIGRATION | SPLIT, 4, HashType::Fnv1a64.code(), 3);
    let merge = layout(HashType::Crush.code() | MIGRATION | MERGE, 4, HashType::Fnv1a64.code(), 3);
    for name in ["a", "file2", "file.mdtest.12.12345", "MiXeD.txt"] {
        let crush2_4 = index(HashType::Crush2, 4, name);
        let crush_4 = index(HashType::Crush, 4, name);
        let fnv_3 = index(HashType::Fnv1a64, 3, name);
        assert_eq!(
            place_name(&split, name.as_bytes()),
            Ok(Placement::Changing { new: crush2_4, old: fnv_3 })
        );
        assert_eq!(
            place_name(&merge, name.as_bytes()),
            Ok(Placement::Changing { new: fnv_3, old: crush_4 })
        );
    }
}

#[test]
fn a_bad_hash_type_means_any_stripe() {
    let flagged = layout(HashType::Fnv1a64.code() | HashTypeField::FLAG_BAD_TYPE, 4, 0, 0);
    assert_eq!(place_name(&flagged, b"a"), Ok(Placement::AnyStripe));
    let unknown = layout(9, 4, 0, 0);
    assert_eq!(place_name(&unknown, b"a"), Ok(Placement::AnyStripe));
    // One stripe needs no hash at all.
    assert_eq!(place_name(&layout(9, 1, 0, 0), b"a"), Ok(Placement::Stripe(0)));
    // A layout change to an unknown old hash cannot place the old copy.
    let old_unknown = layout(HashType::Fnv1a64.code() | MIGRATION, 4, 9, 2);
    assert_eq!(place_name(&old_unknown, b"a"), Err(PlacementError::UnknownHashType(9)));
}

#[test]
fn inconsistent_changes_are_refused() {
    let inconsistent = |count, offset| {
        Err(PlacementError::InconsistentChange { stripe_count: count, migrate_offset: offset })
    };
    let too_far = layout(HashType::Fnv1a64.code() | MIGRATION, 3, 2, 7);
    assert_eq!(place_name(&too_far, b"a"), inconsistent(3, 7));
    let empty_merge = layout(2 | MIGRATION | MERGE, 4, 2, 0);
    assert_eq!(place_name(&empty_merge, b"a"), inconsistent(4, 0));
    let wider_old = layout(2 | MIGRATION | SPLIT, 2, 2, 64);
    assert_eq!(place_name(&wider_old, b"a"), inconsistent(2, 64));
    // A migration target count read from input is checked before CRUSH iterates over it.
    let huge = layout(HashType::Crush.code() | MIGRATION, 2, 3, 0xd003_01a7);
    assert_eq!(place_name(&huge, b"a"), inconsistent(2, 0xd003_01a7));
    let wide_stripe = layout(HashType::Crush.code(), u32::MAX, 0, 0);
    assert_eq!(place_name(&wide_stripe, b"a"), Err(PlacementError::TooManyStripes(u32::MAX)));
    assert_eq!(place_name(&layout(2, 0, 0, 0), b"a"), Err(PlacementError::NoStripes));
}

proptest::proptest! {
    #[test]
    fn placements_stay_inside_the_layout(
        name in proptest::collection::vec(proptest::num::u8::ANY, 1..40),
        hash in 0u32..=5,
        migrate_hash in 1u32..=4,
        flags in proptest::sample::select(vec![0, MIGRATION, MIGRATION | SPLIT, MIGRATION | MERGE]),
        count in 1u32..=64,
        offset in 0u32..=64,
    ) {
        let md = layout(hash | flags, count, migrate_hash, offset);
        match place_name(&md, &name) {
            Ok(Placement::Stripe(i)) => proptest::prop_assert!(i < count),
            Ok(Placement::Changing { new, old }) => {
                proptest::prop_assert!(new < count && old < count)
            }
            Ok(Placement::AnyStripe) | Err(_) => {}
        }
    }
}
