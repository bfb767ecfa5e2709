use proptest::prelude::*;

use super::*;

fn master() -> LmvMdsMd {
    LmvMdsMd {
        kind: MdsMdKind::Master,
        stripe_count: 2,
        master_mdt_index: 1,
        hash_type: HashTypeField(2 | HashTypeField::FLAG_FIXED),
        layout_version: 3,
        migrate_offset: 0,
        migrate_hash: HashTypeField(0),
        pool_name: PoolName::new(b"fast").unwrap_or_default(),
        stripe_fids: vec![
            Fid { seq: 0x2_4000_0400, oid: 2, ver: 0 },
            Fid { seq: 0x2_0000_0400, oid: 3, ver: 0 },
        ],
    }
}

#[test]
fn master_bytes_field_by_field() {
    let bytes = master().to_bytes();
    let expected: Vec<u8> = [
        &[0xd0, 0x0c, 0xd2, 0x0c][..], // LMV_MAGIC_V1
        &[2, 0, 0, 0],                 // stripe count
        &[1, 0, 0, 0],                 // master MDT
        &[2, 0, 0, 0x02],              // fnv_1a_64 | FIXED
        &[3, 0, 0, 0],                 // layout version
        &[0; 4],                       // migrate offset
        &[0; 4],                       // migrate hash
        &[0; 4],                       // padding2
        &[0; 8],                       // padding3
        b"fast\0\0\0\0\0\0\0\0\0\0\0\0",
        &[0x00, 0x04, 0, 0x40, 2, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0],
        &[0x00, 0x04, 0, 0x00, 2, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0],
    ]
    .concat();
    assert_eq!(bytes, expected);
    assert_eq!(bytes.len(), LMV_MDS_MD_HEADER_SIZE + 2 * Fid::SIZE);
    assert_eq!(LmvMdsMd::parse(&bytes), Ok(master()));
    assert_eq!(DirLayout::parse(&bytes), Ok(DirLayout::Striped(master())));
}

#[test]
fn user_md_bytes_field_by_field() {
    let md = LmvUserMd {
        kind: UserMdKind::Specific,
        stripe_count: 1,
        stripe_offset: 3,
        hash_type: HashTypeField(4),
        lum_type: 0,
        max_inherit: 3,
        max_inherit_rr: 255,
        pool_name: PoolName::default(),
        objects: vec![UserMdsData { fid: Fid { seq: 1, oid: 2, ver: 3 }, mds: 7 }],
    };
    let bytes = md.to_bytes();
    let expected: Vec<u8> = [
        &[0xd0, 0x0c, 0xd4, 0x0c][..],
        &[1, 0, 0, 0],
        &[3, 0, 0, 0],
        &[4, 0, 0, 0],
        &[0, 0, 0, 0],
        &[3, 255, 0, 0],
        &[0; 8],
        &[0; 16],
        &[1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0],
        &[0, 0, 0, 0, 7, 0, 0, 0],
    ]
    .concat();
    assert_eq!(bytes, expected);
    assert_eq!(LmvUserMd::parse(&bytes), Ok(md));
}

#[test]
fn a_default_layout_has_no_objects_and_keeps_negative_counts() {
    let md = LmvUserMd {
        kind: UserMdKind::Default,
        stripe_count: -1,
        stripe_offset: LmvUserMd::OFFSET_DEFAULT,
        hash_type: HashTypeField(0),
        lum_type: 0,
        max_inherit: 0,
        max_inherit_rr: 3,
        pool_name: PoolName::default(),
        objects: Vec::new(),
    };
    let bytes = md.to_bytes();
    assert_eq!(bytes.len(), LMV_USER_MD_HEADER_SIZE);
    assert_eq!(DirLayout::parse(&bytes), Ok(DirLayout::Default(md)));
}

#[test]
fn a_stripe_lmv_is_a_header_without_fids() {
    let mut stripe = master();
    stripe.kind = MdsMdKind::Stripe;
    stripe.stripe_fids.clear();
    let bytes = stripe.to_bytes();
    assert_eq!(bytes.len(), LMV_MDS_MD_HEADER_SIZE);
    assert_eq!(LmvMdsMd::parse(&bytes), Ok(stripe));
}

#[test]
fn hostile_inputs_get_named_errors() {
    let bytes = master().to_bytes();
    assert!(matches!(LmvMdsMd::parse(&bytes[..55]), Err(DecodeError::ShortHeader { .. })));
    assert!(matches!(LmvMdsMd::parse(&bytes[..71]), Err(DecodeError::ShortStripes { .. })));
    assert_eq!(
        DirLayout::parse(&[1, 2]),
        Err(DecodeError::ShortHeader { format: "LMV magic", needed: 4, got: 2 })
    );
    assert_eq!(DirLayout::parse(&[0; 64]), Err(DecodeError::UnknownMagic(0)));
    let mut huge = bytes.clone();
    huge[4..8].copy_from_slice(&2001u32.to_le_bytes());
    assert_eq!(
        LmvMdsMd::parse(&huge),
        Err(DecodeError::StripeCountTooLarge { count: 2001, limit: LMV_MAX_STRIPE_COUNT })
    );
    let mut specific = vec![0xd0, 0x0c, 0xd4, 0x0c, 0xff, 0xff, 0xff, 0xff];
    specific.resize(LMV_USER_MD_HEADER_SIZE, 0);
    assert_eq!(LmvUserMd::parse(&specific), Err(DecodeError::NegativeSpecificCount(-1)));
    let foreign = [0xd0, 0x0c, 0xd5, 0x0c, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    assert_eq!(
        ForeignLmv::parse(&foreign),
        Err(DecodeError::ForeignTooLong { length: 0xffff, limit: LMV_FOREIGN_MAX_VALUE })
    );
    let mut short = foreign;
    short[4..8].copy_from_slice(&3u32.to_le_bytes());
    assert_eq!(
        ForeignLmv::parse(&short),
        Err(DecodeError::ShortForeignValue { length: 3, got: 0 })
    );
}

#[test]
fn constants_pinned() {
    assert_eq!(
        (LMV_MAGIC_V1, LMV_MAGIC_STRIPE, LMV_MAGIC_FOREIGN),
        (0x0CD20CD0, 0x0CD40CD0, 0x0CD50CD0)
    );
    assert_eq!((LMV_USER_MAGIC, LMV_USER_MAGIC_SPECIFIC), (0x0CD30CD0, 0x0CD40CD0));
    assert_eq!((LMV_MAX_STRIPE_COUNT, LMV_MAX_STRIPES_PER_MDT), (2000, 5));
    assert_eq!(
        (LMV_MDS_MD_HEADER_SIZE, LMV_USER_MD_HEADER_SIZE, LMV_USER_MDS_DATA_SIZE),
        (56, 48, 24)
    );
}

#[test]
fn pool_names_read_as_c_strings() {
    assert_eq!(PoolName::new(b"flash").map(|p| p.as_bytes().to_vec()), Some(b"flash".to_vec()));
    assert_eq!(PoolName::new(b"0123456789abcdef"), None);
    assert_eq!(PoolName::new(b"a\0b"), None);
    assert_eq!(PoolName([b'x'; 16]).as_bytes(), &[b'x'; 15]);
}

fn fid() -> impl Strategy<Value = Fid> {
    (any::<u64>(), any::<u32>(), any::<u32>()).prop_map(|(seq, oid, ver)| Fid { seq, oid, ver })
}

fn pool() -> impl Strategy<Value = PoolName> {
    any::<[u8; 16]>().prop_map(PoolName)
}

fn mds_md() -> impl Strategy<Value = LmvMdsMd> {
    let header = (any::<u32>(), any::<u32>(), any::<u32>(), any::<u32>(), any::<u32>(), pool());
    (any::<bool>(), header, proptest::collection::vec(fid(), 0..40), any::<u32>()).prop_map(
        |(master, (index, hash, version, offset, migrate, pool_name), fids, count)| {
            let (kind, stripe_count, stripe_fids) = if master {
                (MdsMdKind::Master, fids.len() as u32, fids)
            } else {
                (MdsMdKind::Stripe, count, Vec::new())
            };
            LmvMdsMd {
                kind,
                stripe_count,
                master_mdt_index: index,
                hash_type: HashTypeField(hash),
                layout_version: version,
                migrate_offset: offset,
                migrate_hash: HashTypeField(migrate),
                pool_name,
                stripe_fids,
            }
        },
    )
}

fn user_md() -> impl Strategy<Value = LmvUserMd> {
    let header = (any::<u32>(), any::<u32>(), any::<u32>(), any::<u8>(), any::<u8>(), pool());
    let objects = proptest::collection::vec(
        (fid(), any::<u32>()).prop_map(|(fid, mds)| UserMdsData { fid, mds }),
        0..40,
    );
    (any::<bool>(), header, objects, any::<i32>()).prop_map(
        |(specific, (offset, hash, lum_type, inherit, inherit_rr, pool_name), objects, count)| {
            let (kind, stripe_count, objects) = if specific {
                (UserMdKind::Specific, objects.len() as i32, objects)
            } else {
                (UserMdKind::Default, count, Vec::new())
            };
            LmvUserMd {
                kind,
                stripe_count,
                stripe_offset: offset,
                hash_type: HashTypeField(hash),
                lum_type,
                max_inherit: inherit,
                max_inherit_rr: inherit_rr,
                pool_name,
                objects,
            }
        },
    )
}

proptest! {
    #[test]
    fn mds_md_round_trips(md in mds_md()) {
        let bytes = md.to_bytes();
        prop_assert_eq!(bytes.len(), md.encoded_len());
        prop_assert_eq!(LmvMdsMd::parse(&bytes), Ok(md.clone()));
        prop_assert_eq!(DirLayout::parse(&bytes), Ok(DirLayout::Striped(md)));
    }

    #[test]
    fn user_md_round_trips(md in user_md()) {
        let bytes = md.to_bytes();
        prop_assert_eq!(bytes.len(), md.encoded_len());
        prop_assert_eq!(LmvUserMd::parse(&bytes), Ok(md));
    }

    #[test]
    fn foreign_round_trips(
        kind in any::<u32>(),
        flags in any::<u32>(),
        value in proptest::collection::vec(any::<u8>(), 0..200),
    ) {
        let md = ForeignLmv { foreign_type: kind, flags, value };
        let bytes = md.to_bytes();
        prop_assert_eq!(bytes.len(), md.encoded_len());
        prop_assert_eq!(DirLayout::parse(&bytes), Ok(DirLayout::Foreign(md)));
    }

    #[test]
    fn any_bytes_decode_or_fail_by_name(
        bytes in proptest::collection::vec(any::<u8>(), 0..400),
        magic in 0u32..6,
    ) {
        let mut bytes = bytes;
        let magics = [LMV_MAGIC_V1, LMV_MAGIC_STRIPE, LMV_MAGIC_FOREIGN, LMV_USER_MAGIC, 0, 1];
        if let (Some(head), Some(&m)) = (bytes.get_mut(..4), magics.get(magic as usize)) {
            head.copy_from_slice(&m.to_le_bytes());
        }
        if let Ok(layout) = DirLayout::parse(&bytes) {
            let again = layout.to_bytes();
            prop_assert_eq!(DirLayout::parse(&again), Ok(layout));
        }
        let _ = LmvUserMd::parse(&bytes);
    }
}
