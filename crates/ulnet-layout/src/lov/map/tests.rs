//! The vectors of docs/protocol/layouts.md §5 and properties of the arithmetic.

use proptest::prelude::*;

use super::*;
use crate::lov::setstripe::Setstripe;

const K: u64 = 1 << 10;
const M: u64 = 1 << 20;
const G: u64 = 1 << 30;

fn request(options: &str) -> Layout {
    let args: Vec<&str> = options.split_whitespace().collect();
    match Setstripe::parse(&args) {
        Ok(setstripe) => setstripe.to_layout(),
        Err(error) => panic!("{options}: {error}"),
    }
}

/// Object `stripe` of component `component` on OST 100·component + stripe, legacy id 2.
fn allocator() -> impl FnMut(usize, u64) -> ObjectSlot {
    |component, stripe| ObjectSlot {
        oi: OstId::legacy(2),
        generation: 0,
        ost_index: u32::try_from(100 * component as u64 + stripe).unwrap_or(0),
    }
}

const PFL: &str = "-E 4M -c 1 -S 1M -E 64M -c 2 -E 256M -c 4 -E 1G -c 8 -E 10G -c 16 -E -1 -c -1";

fn created(options: &str, ost_count: u32) -> CompositeLayout {
    let Layout::Composite(template) = request(options) else { panic!("not composite") };
    let fid = Fid { seq: 0x2_0000_0401, oid: 1, ver: 0 };
    create(&template, fid, ost_count, &mut allocator())
}

fn map(layout: &Layout, offset: u64, osts: u32) -> (usize, u64, u64) {
    let m = map_offset(layout, offset, osts).unwrap_or_else(|e| panic!("{offset}: {e}"));
    (m.component, m.stripe, m.object_offset)
}

#[test]
fn worked_example_vectors() {
    // (offset, component id, stripe, object offset); docs/protocol/layouts.md §5.3.
    let vectors: [(u64, usize, u64, u64); 13] = [
        (0, 1, 0, 0),
        (4 * M - 1, 1, 0, 4 * M - 1),
        (4 * M, 2, 0, 2 * M),
        (5 * M, 2, 1, 2 * M),
        (5 * M + 12_345, 2, 1, 2_109_497),
        (6 * M, 2, 0, 3 * M),
        (64 * M, 3, 0, 16 * M),
        (300 * M, 4, 4, 37 * M),
        (G, 5, 0, 64 * M),
        (10 * G - 1, 5, 15, 640 * M - 1),
        (10 * G, 6, 0, 320 * M),
        (20 * G, 6, 0, 640 * M),
        (20 * G + 31 * M + 7, 6, 31, 671_088_647),
    ];
    let fresh = Layout::Composite(created(PFL, 32));
    let template = request(PFL);
    for layout in [&fresh, &template] {
        for (offset, id, stripe, object_offset) in vectors {
            assert_eq!(map(layout, offset, 32), (id - 1, stripe, object_offset), "offset {offset}");
        }
    }
}

#[test]
fn reverse_check_and_full_write_sizes() {
    let layout = Layout::Composite(created(PFL, 32));
    // A 1-byte write at 300 MiB: stripe 4 of comp 4 holds 37 MiB + 1.
    assert_eq!(merged_file_size(&layout, &[(3, 4, 37 * M + 1)], 32), 300 * M + 1);
    // Written to 20 GiB: every object of comps 2/3/4 ends at 32/64/128 MiB, 5 and 6 at 640 MiB.
    for (component, stripes, end) in [
        (1usize, 2u64, 32 * M),
        (2, 4, 64 * M),
        (3, 8, 128 * M),
        (4, 16, 640 * M),
        (5, 32, 640 * M),
    ] {
        let pieces = split_extent(&layout, 0, 20 * G, 32).unwrap_or_default();
        for stripe in 0..stripes {
            let piece = pieces.iter().find(|p| p.component == component && p.stripe == stripe);
            assert_eq!(
                piece.map(|p| p.object_end),
                Some(end),
                "comp {} stripe {stripe}",
                component + 1
            );
        }
    }
}

#[test]
fn instantiation_sequence_and_xattr_sizes() {
    let mut layout = created(PFL, 32);
    let ids: Vec<u32> = layout.components.iter().map(|c| c.id).collect();
    assert_eq!(ids, [1, 2, 3, 4, 5, 6]);
    assert_eq!(layout.layout_gen, 6);
    let sizes =
        |l: &CompositeLayout| l.placements().iter().map(|p| (p.size, p.offset)).collect::<Vec<_>>();
    assert_eq!(sizes(&layout), [(56, 320), (56, 376), (56, 432), (56, 488), (56, 544), (56, 600)]);
    assert_eq!(layout.encoded_len(), 656);

    let done = instantiate_write(&mut layout, 300 * M, 300 * M + 1, 32, &mut allocator());
    assert_eq!(done, Ok(vec![1, 2, 3]));
    assert_eq!(layout.layout_gen, 7);
    assert_eq!(
        sizes(&layout),
        [(56, 320), (80, 376), (128, 456), (224, 584), (56, 808), (56, 864)]
    );
    assert_eq!(layout.encode().map(|b| b.len()), Ok(920));

    assert_eq!(
        instantiate_write(&mut layout, 20 * G, 20 * G + 1, 32, &mut allocator()),
        Ok(vec![4, 5])
    );
    assert_eq!(
        sizes(&layout),
        [(56, 320), (80, 376), (128, 456), (224, 584), (416, 808), (800, 1224)]
    );
    assert_eq!(layout.encode().map(|b| b.len()), Ok(2024));
    assert_eq!(Layout::decode(&layout.encode().unwrap_or_default()), Ok(Layout::Composite(layout)));
}

#[test]
fn edge_case_vectors() {
    let three = request("-E 4M -c 1 -S 1M -E 64M -c 3");
    assert_eq!(map(&three, 4 * M, 8), (1, 1, M));
    assert_eq!(map(&three, 5 * M, 8), (1, 2, M));
    assert_eq!(map(&three, 6 * M, 8), (1, 0, 2 * M));
    assert_eq!(map(&three, 7 * M, 8), (1, 1, 2 * M));

    let plain = request("-c 4 -S 64K");
    assert_eq!(map(&plain, 0, 8), (0, 0, 0));
    assert_eq!(map(&plain, 65_536, 8), (0, 1, 0));
    assert_eq!(map(&plain, 262_144, 8), (0, 0, 65_536));
    assert_eq!(map(&plain, 300_000, 8), (0, 0, 103_392));

    let dom = request("-E 1M -L mdt -E -1 -c 4 -S 1M");
    let m = map_offset(&dom, 512 * K, 8).unwrap_or_else(|e| panic!("{e}"));
    assert!(m.dom);
    assert_eq!((m.component, m.object_offset), (0, 512 * K));
    assert_eq!(map(&dom, M, 8), (1, 1, 0));
    assert_eq!(map(&dom, 4 * M, 8), (1, 0, M));
    assert_eq!(map(&dom, 5 * M, 8), (1, 1, M));

    // Overstriping -C 8 on 4 OSTs: c = 8.
    let over = request("-C 8 -S 1M");
    assert_eq!(map_offset(&over, 0, 4).map(|m| m.geometry.stripe_count), Ok(8));
    assert_eq!(map(&over, 7 * M, 4), (0, 7, 0));
}

#[test]
fn stripe_counts_resolve_against_the_ost_count() {
    assert_eq!(resolve_stripe_count(0xFFFF, false, 32, 1), 32);
    assert_eq!(resolve_stripe_count(0, false, 32, 1), 1);
    assert_eq!(resolve_stripe_count(0xFFFE, true, 4, 1), 8);
    assert_eq!(resolve_stripe_count(0xFFFF, true, 4, 1), 4);
    assert_eq!(resolve_stripe_count(0xFFFE, false, 4, 1), 4);
    assert_eq!(resolve_stripe_count(0xFFE0, true, 100, 1), 2000);
    assert_eq!(resolve_stripe_count(8, true, 4, 1), 8);
    assert_eq!(resolve_stripe_count(8, false, 4, 1), 4);
}

#[test]
fn writes_past_the_last_component_are_refused() {
    let bounded = request("-E 4M -c 1 -E 64M -c 2");
    assert_eq!(
        components_to_instantiate(&bounded, 64 * M, 64 * M + 1),
        Err(MapError::NotCovered(64 * M))
    );
    assert_eq!(components_to_instantiate(&bounded, 0, 1), Ok(vec![0]));
    assert_eq!(components_to_instantiate(&bounded, 5 * M, 5 * M + 1), Ok(vec![0, 1]));
}

fn geometry_strategy() -> impl Strategy<Value = Geometry> {
    (1u64..=64, 1u64..=40)
        .prop_map(|(size, count)| Geometry { stripe_size: size * 65_536, stripe_count: count })
}

proptest! {
    /// Every file byte maps to one object byte, and that object byte maps back.
    #[test]
    fn offsets_round_trip(g in geometry_strategy(), offset in 0u64..(1 << 50)) {
        let stripe = g.stripe_number(offset);
        prop_assert!(stripe < g.stripe_count);
        prop_assert_eq!(g.file_offset(stripe, g.object_offset(offset)), Some(offset));
    }

    /// Distinct file bytes never share an object byte.
    #[test]
    fn mapping_is_injective(g in geometry_strategy(), a in 0u64..(1 << 40), b in 0u64..(1 << 40)) {
        prop_assume!(a != b);
        prop_assert_ne!((g.stripe_number(a), g.object_offset(a)), (g.stripe_number(b), g.object_offset(b)));
    }

    /// After writing [0, n) the merged size is n: the largest per-object size wins.
    #[test]
    fn merged_size_is_highest_byte_plus_one(g in geometry_strategy(), n in 1u64..(1 << 36)) {
        let sizes = (0..g.stripe_count).map(|s| g.object_extent(s, 0, n).map_or(0, |(_, hi)| hi));
        let merged = sizes.enumerate().filter_map(|(s, z)| g.file_size(s as u64, z)).max();
        prop_assert_eq!(merged, Some(n));
    }

    /// Through a whole PFL layout: a byte maps into the component holding it, and back.
    #[test]
    fn layout_offsets_round_trip(offset in 0u64..(1 << 45), osts in 1u32..64) {
        let layout = request(PFL);
        let m = map_offset(&layout, offset, osts);
        prop_assert!(m.is_ok());
        let m = m.unwrap_or_else(|_| unreachable!());
        let extent = extents(&layout).into_iter().find(|e| e.index == m.component);
        prop_assert!(extent.is_some_and(|e| e.start <= offset && offset < e.end));
        prop_assert_eq!(m.geometry.file_offset(m.stripe, m.object_offset), Some(offset));
    }

    /// Pieces of an extent cover exactly its bytes.
    #[test]
    fn pieces_cover_the_extent(start in 0u64..(1 << 34), len in 1u64..(1 << 28), pick in 0usize..3) {
        let layout = request(["-c 3 -S 128K", "-E 4M -c 1 -S 1M -E 64M -c 3 -E -1 -c 5", "-E 1M -L mdt -E -1 -c 4 -S 1M"][pick]);
        let pieces = split_extent(&layout, start, start + len, 8);
        let total: u64 = pieces.unwrap_or_default().iter().map(|p| p.object_end - p.object_start).sum();
        prop_assert_eq!(total, len);
    }
}

#[test]
fn extents_near_the_end_of_the_offset_space() {
    let g = Geometry { stripe_size: 1 << 20, stripe_count: 3 };
    let here = g.stripe_number(u64::MAX - 5);
    for stripe in 0..3 {
        let extent = g.object_extent(stripe, u64::MAX - 5, u64::MAX);
        assert_eq!(extent.is_some(), stripe == here, "stripe {stripe}");
    }
    let layout = request("-c 3 -S 1M");
    assert!(split_extent(&layout, u64::MAX - (1 << 21), u64::MAX, 3).is_ok());
}
