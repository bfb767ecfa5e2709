#![no_main]
//! Directory layouts: every decoder is total; a decoded layout re-encodes to bytes that decode
//! to the same value; printing and name placement never panic, and placements stay inside the
//! layout.

use libfuzzer_sys::fuzz_target;
use ulnet_layout::lmv::getdirstripe::{self, Context, Fields, Options};
use ulnet_layout::lmv::{
    DirLayout, Fid, ForeignLmv, HashType, LMV_MAX_STRIPE_COUNT, LmvMdsMd, LmvUserMd, Placement,
    place_name, stripe_index,
};

fuzz_target!(|data: &[u8]| {
    // The first byte picks a name length for the placement checks; the rest is the layout.
    let Some((&name_len, bytes)) = data.split_first() else { return };
    let name = bytes.get(..usize::from(name_len % 32).min(bytes.len())).unwrap_or(&[]);

    if let Ok(layout) = DirLayout::parse(bytes) {
        assert_eq!(DirLayout::parse(&layout.to_bytes()).as_ref(), Ok(&layout));
        let context = Context {
            dir_fid: Some(Fid { seq: 0x2_0000_0400, oid: 1, ver: 0 }),
            stripe_mdts: (0..LMV_MAX_STRIPE_COUNT).collect(),
        };
        for fields in [Fields::DEFAULT, Fields::VERBOSE, Fields::HASH_TYPE] {
            for yaml in [false, true] {
                let _ =
                    getdirstripe::print(&layout, &context, Options { fields, yaml, hex_idx: yaml });
            }
        }
        if let DirLayout::Striped(md) = &layout {
            check_placement(md, name);
        }
    }
    if let Ok(md) = LmvUserMd::parse(bytes) {
        assert_eq!(LmvUserMd::parse(&md.to_bytes()), Ok(md));
    }
    if let Ok(md) = ForeignLmv::parse(bytes) {
        assert_eq!(ForeignLmv::parse(&md.to_bytes()), Ok(md));
    }
    if let Ok(md) = LmvMdsMd::parse(bytes) {
        assert_eq!(LmvMdsMd::parse(&md.to_bytes()), Ok(md));
    }
    for hash in HashType::ALL {
        let count = u32::from(name_len) + 1;
        if let Ok(index) = stripe_index(hash, count, name) {
            assert!(index < count);
        }
    }
});

fn check_placement(md: &LmvMdsMd, name: &[u8]) {
    match place_name(md, name) {
        Ok(Placement::Stripe(index)) => assert!(index < md.stripe_count.max(1)),
        Ok(Placement::Changing { new, old }) => {
            assert!(new < md.stripe_count && old < md.stripe_count)
        }
        Ok(Placement::AnyStripe) | Err(_) => {}
    }
}
