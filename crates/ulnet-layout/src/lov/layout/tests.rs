//! Codec vectors, hostile input, and decode(encode(x)) == x for every format.

use proptest::prelude::*;

use super::*;
use crate::lov::composite::{Component, SubLayout};
use crate::lov::ostid::OstId;
use crate::lov::plain::{ObjectSlot, PoolName};
use crate::lov::{LCME_FL_INIT, LUSTRE_EOF};

fn hex(text: &str) -> Vec<u8> {
    let digits: Vec<u8> = text.bytes().filter(u8::is_ascii_hexdigit).collect();
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap_or("0"), 16).unwrap_or(0))
        .collect()
}

#[test]
fn v3_layout_with_pool_and_one_object() {
    let bytes = hex("d00bd30b 01000000 0100000000000000 0104000002000000 00001000 0100 0000
         666c61736800000000000000000000 00
         0200000000000000 0000000000000000 00000000 07000000");
    let Ok(Layout::Plain(plain)) = Layout::decode(&bytes) else {
        panic!("{:?}", Layout::decode(&bytes))
    };
    assert_eq!(plain.magic, LOV_MAGIC_V3);
    assert_eq!(plain.pool.as_str(), "flash");
    assert_eq!((plain.stripe_size, plain.stripe_count), (1 << 20, 1));
    assert_eq!(plain.oi, OstId { first: 1, second: 0x2_0000_0401 });
    assert_eq!(plain.objects, [ObjectSlot { oi: OstId::legacy(2), generation: 0, ost_index: 7 }]);
    assert_eq!(Layout::Plain(plain).encode(), Ok(bytes));
}

#[test]
fn composite_header_and_entry_offsets() {
    let sub = PlainLayout::request(1, 1 << 20, 1, 0xFFFF);
    let mut first = Component::request(0, 1 << 20, LCME_FL_INIT, sub.clone());
    first.id = 1;
    first.sub =
        SubLayout::Plain(PlainLayout { objects: vec![ObjectSlot::default()], ..sub.clone() });
    let mut second = Component::request(1 << 20, LUSTRE_EOF, LCME_FL_INIT, sub.clone());
    second.id = 2;
    second.sub = SubLayout::Plain(PlainLayout {
        stripe_count: 2,
        objects: vec![ObjectSlot::default(); 2],
        ..sub
    });
    let layout = CompositeLayout { layout_gen: 2, ..CompositeLayout::request(vec![first, second]) };
    let bytes = layout.encode().unwrap_or_default();
    // The two-component example of liblustreapi.c: offsets 128 and 184, sizes 56 and 80.
    assert_eq!(bytes.len(), 264);
    assert_eq!(bytes.get(4..8), Some(&264u32.to_le_bytes()[..]));
    assert_eq!(bytes.get(14..16), Some(&[2, 0][..]));
    assert_eq!(bytes.get(32 + 24..32 + 32), Some(&[128, 0, 0, 0, 56, 0, 0, 0][..]));
    assert_eq!(bytes.get(80 + 24..80 + 32), Some(&[184, 0, 0, 0, 80, 0, 0, 0][..]));
    assert_eq!(Layout::decode(&bytes), Ok(Layout::Composite(layout)));
}

#[test]
fn hostile_input_gives_named_errors() {
    assert!(matches!(Layout::decode(&[]), Err(DecodeError::Truncated { .. })));
    assert_eq!(Layout::decode(&[1, 2, 3, 4]), Err(DecodeError::UnknownMagic(0x0403_0201)));
    let mut v1 = PlainLayout::request(1, 65536, 1, 0);
    v1.objects.push(ObjectSlot::default());
    let mut bytes = Vec::new();
    let _ = v1.encode_into(&mut bytes);
    bytes.push(0);
    assert_eq!(Layout::decode(&bytes), Err(DecodeError::PartialObject(1)));
    // v3 without a NUL in the pool name.
    let mut v3 = hex("d00bd30b 01000000");
    v3.resize(48, b'a');
    assert_eq!(Layout::decode(&v3), Err(DecodeError::BadPoolName));
    // Composite: wrong size, zero entries, entries past the end, sub-layout out of bounds.
    let comp = |size: u32, count: u16| {
        let mut b = hex("d00bd60b");
        b.extend(size.to_le_bytes());
        b.extend([0; 6]);
        b.extend(count.to_le_bytes());
        b.resize(32, 0);
        b
    };
    assert_eq!(
        Layout::decode(&comp(33, 1)),
        Err(DecodeError::SizeMismatch { declared: 33, actual: 32 })
    );
    assert_eq!(Layout::decode(&comp(32, 0)), Err(DecodeError::BadEntryCount(0)));
    assert_eq!(Layout::decode(&comp(32, 65535)), Err(DecodeError::BadEntryCount(65535)));
    let mut entry = comp(80, 1);
    entry.extend([0; 24]);
    entry.extend(80u32.to_le_bytes());
    entry.extend(32u32.to_le_bytes());
    entry.resize(80, 0);
    assert_eq!(
        Layout::decode(&entry),
        Err(DecodeError::SubLayoutOutOfBounds { index: 0, offset: 80, size: 32 })
    );
    assert!(matches!(
        Layout::decode(&vec![0xd0; MAX_XATTR_SIZE + 1]),
        Err(DecodeError::TooLarge(_))
    ));
}

fn ost_id() -> impl Strategy<Value = OstId> {
    (any::<u64>(), any::<u64>()).prop_map(|(first, second)| OstId { first, second })
}

fn plain() -> impl Strategy<Value = PlainLayout> {
    let magic = prop_oneof![Just(LOV_MAGIC_V1), Just(LOV_MAGIC_V3), Just(LOV_MAGIC_SPECIFIC)];
    let objects = proptest::collection::vec((ost_id(), any::<u32>(), any::<u32>()), 0..6);
    (
        magic,
        any::<u32>(),
        ost_id(),
        any::<u32>(),
        any::<u16>(),
        any::<u16>(),
        "[a-z0-9_]{0,15}",
        objects,
    )
        .prop_map(
            |(magic, pattern, oi, stripe_size, stripe_count, offset_or_gen, pool, objects)| {
                PlainLayout {
                    magic,
                    pattern,
                    oi,
                    stripe_size,
                    stripe_count,
                    offset_or_gen,
                    pool: if magic == LOV_MAGIC_V1 {
                        PoolName::default()
                    } else {
                        PoolName::new(&pool).unwrap_or_default()
                    },
                    objects: objects
                        .into_iter()
                        .map(|(oi, generation, ost_index)| ObjectSlot { oi, generation, ost_index })
                        .collect(),
                }
            },
        )
}

fn foreign() -> impl Strategy<Value = ForeignLayout> {
    (any::<u32>(), any::<u32>(), proptest::collection::vec(any::<u8>(), 0..40))
        .prop_map(|(foreign_type, flags, value)| ForeignLayout { foreign_type, flags, value })
}

fn component() -> impl Strategy<Value = Component> {
    let sub = prop_oneof![4 => plain().prop_map(SubLayout::Plain), 1 => foreign().prop_map(SubLayout::Foreign)];
    (
        any::<u32>(),
        any::<u32>(),
        any::<u64>(),
        any::<u64>(),
        any::<u32>(),
        any::<u64>(),
        any::<[u8; 4]>(),
        sub,
    )
        .prop_map(
            |(
                id,
                flags,
                a,
                b,
                layout_gen,
                timestamp,
                [dstripe_count, cstripe_count, compr_type, compr_level_and_chunk],
                sub,
            )| Component {
                id,
                flags,
                start: a.min(b),
                end: a.max(b),
                layout_gen,
                timestamp,
                dstripe_count,
                cstripe_count,
                compr_type,
                compr_level_and_chunk,
                sub,
            },
        )
}

fn layout() -> impl Strategy<Value = Layout> {
    let composite = (
        prop_oneof![Just(LOV_MAGIC_COMP_V1), Just(LOV_MAGIC_SEL)],
        any::<u32>(),
        any::<u16>(),
        any::<u16>(),
        any::<u8>(),
        proptest::collection::vec(component(), 1..6),
    )
        .prop_map(|(magic, layout_gen, flags, mirror_count, ec_count, components)| {
            CompositeLayout { magic, layout_gen, flags, mirror_count, ec_count, components }
        });
    prop_oneof![
        plain().prop_map(Layout::Plain),
        composite.prop_map(Layout::Composite),
        foreign().prop_map(Layout::Foreign)
    ]
}

proptest! {
    #[test]
    fn every_format_round_trips(layout in layout()) {
        let bytes = layout.encode();
        prop_assert!(bytes.is_ok());
        let bytes = bytes.unwrap_or_default();
        prop_assert_eq!(Layout::decode(&bytes), Ok(layout.clone()));
        // Re-encoding a decoded layout is byte-exact.
        prop_assert_eq!(Layout::decode(&bytes).and_then(|l| l.encode().map_err(|_| DecodeError::TooLarge(0))), Ok(bytes));
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        if let Ok(layout) = Layout::decode(&bytes) {
            let _ = crate::lov::getstripe::getstripe(&layout, &crate::lov::getstripe::GetstripeOptions::default());
            let _ = crate::lov::map::map_offset(&layout, 1 << 30, 8);
        }
    }
}
