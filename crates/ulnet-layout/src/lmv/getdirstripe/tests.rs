use super::*;
use crate::lmv::{LmvUserMd, PoolName, UserMdKind};

/// The documented example: 4 stripes, master on MDT2 (docs/protocol/dirlayouts.md §5.3).
fn example() -> (DirLayout, Context) {
    let fid = |seq, oid| Fid { seq, oid, ver: 0 };
    let md = LmvMdsMd {
        kind: MdsMdKind::Master,
        stripe_count: 4,
        master_mdt_index: 2,
        hash_type: HashTypeField(2),
        layout_version: 0,
        migrate_offset: 0,
        migrate_hash: HashTypeField(0),
        pool_name: PoolName::default(),
        stripe_fids: vec![
            fid(0x2_8000_0400, 2),
            fid(0x2_c000_0400, 2),
            fid(0x2_0000_0400, 3),
            fid(0x2_4000_0400, 2),
        ],
    };
    let context = Context {
        dir_fid: Some(Fid { seq: 0x2_8000_0400, oid: 1, ver: 0 }),
        stripe_mdts: vec![2, 3, 0, 1],
    };
    (DirLayout::Striped(md), context)
}

fn text(fields: Fields, yaml: bool, hex_idx: bool) -> String {
    let (layout, context) = example();
    let bytes = print(&layout, &context, Options { fields, yaml, hex_idx });
    String::from_utf8(bytes.unwrap_or_default()).unwrap_or_default()
}

const TABLE: &str = "mdtidx\t\t FID[seq:oid:ver]\n\
     \x20    2\t\t [0x280000400:0x2:0x0]\t\t\n\
     \x20    3\t\t [0x2c0000400:0x2:0x0]\t\t\n\
     \x20    0\t\t [0x200000400:0x3:0x0]\t\t\n\
     \x20    1\t\t [0x240000400:0x2:0x0]\t\t\n";

#[test]
fn default_text_matches_the_documented_listing() {
    let expected =
        format!("lmv_stripe_count: 4 lmv_stripe_offset: 2 lmv_hash_type: fnv_1a_64\n{TABLE}");
    assert_eq!(text(Fields::DEFAULT, false, false), expected);
    assert_eq!(text(Fields::NONE, false, false), expected);
}

#[test]
fn yaml_matches_the_documented_listing() {
    let expected = "lmv_stripe_count:  4\n\
        lmv_stripe_offset: 2\n\
        lmv_hash_type:     fnv_1a_64\n\
        lmv_objects:\n\
        \x20     - l_mdt_idx: 2\n        l_fid:     0x280000400:0x2:0x0\n\
        \x20     - l_mdt_idx: 3\n        l_fid:     0x2c0000400:0x2:0x0\n\
        \x20     - l_mdt_idx: 0\n        l_fid:     0x200000400:0x3:0x0\n\
        \x20     - l_mdt_idx: 1\n        l_fid:     0x240000400:0x2:0x0\n";
    assert_eq!(text(Fields::DEFAULT, true, false), expected);
}

#[test]
fn verbose_adds_fid_and_magic() {
    let expected = format!(
        "lmv_fid: 0x280000400:0x1:0x0 lmv_magic: 0xcd20cd0 lmv_stripe_count: 4 \
         lmv_stripe_offset: 2 lmv_hash_type: fnv_1a_64\n{TABLE}"
    );
    assert_eq!(text(Fields::VERBOSE, false, false), expected);
    let yaml = text(Fields::VERBOSE, true, false);
    assert!(
        yaml.starts_with("lmv_fid:           0x280000400:0x1:0x0\nlmv_magic:         0xcd20cd0\n")
    );
}

#[test]
fn single_selectors_print_bare_values() {
    assert_eq!(text(Fields::STRIPE_COUNT, false, false), "4\n");
    assert_eq!(text(Fields::STRIPE_OFFSET, false, false), "2\n");
    assert_eq!(text(Fields::STRIPE_OFFSET, false, true), "0x2\n");
    assert_eq!(text(Fields::HASH_TYPE, false, false), "fnv_1a_64\n");
    assert_eq!(text(Fields::FID, false, false), "0x280000400:0x1:0x0\n");
    // Inheritance belongs to default layouts: a striped directory prints an empty line.
    assert_eq!(text(Fields::MAX_INHERIT, false, false), "\n");
    let two = Fields::STRIPE_COUNT.with(Fields::HASH_TYPE);
    assert_eq!(text(two, false, false), "lmv_stripe_count: 4 lmv_hash_type: fnv_1a_64\n");
}

#[test]
fn hex_indices_in_the_table() {
    let out = text(Fields::DEFAULT, false, true);
    assert!(out.starts_with("lmv_stripe_count: 4 lmv_stripe_offset: 0x2 "), "{out:?}");
    assert!(out.contains("\n   0x3\t\t [0x2c0000400:0x2:0x0]\t\t\n     0\t\t [0x2"), "{out:?}");
    assert!(text(Fields::DEFAULT, true, true).contains("l_mdt_idx: 0x3\n"));
}

#[test]
fn unstriped_directory_and_flags() {
    let md = LmvMdsMd {
        kind: MdsMdKind::Master,
        stripe_count: 0,
        master_mdt_index: 1,
        hash_type: HashTypeField(0),
        layout_version: 0,
        migrate_offset: 0,
        migrate_hash: HashTypeField(0),
        pool_name: PoolName::default(),
        stripe_fids: Vec::new(),
    };
    let context = Context::default();
    let out = print_striped(&md, &context, Options::default());
    assert_eq!(out, Ok(b"lmv_stripe_count: 0 lmv_stripe_offset: 1 lmv_hash_type: none\n".to_vec()));
    let yaml = Options { yaml: true, ..Options::default() };
    assert_eq!(print_striped(&md, &context, yaml), Err(PrintError::MissingDirFid));
    let with_fid = Context { dir_fid: Some(Fid { seq: 0x2_4000_0400, oid: 1, ver: 0 }), ..context };
    let out = print_striped(&md, &with_fid, yaml).unwrap_or_default();
    assert_eq!(
        String::from_utf8_lossy(&out),
        "lmv_stripe_count:  0\nlmv_stripe_offset: 1\nlmv_hash_type:     none\nlmv_objects:\n\
         \x20     - l_mdt_idx: 1\n        l_fid:     0x240000400:0x1:0x0\n"
    );
    let migrating = LmvMdsMd {
        hash_type: HashTypeField(3 | HashTypeField::FLAG_MIGRATION | HashTypeField::FLAG_FIXED),
        ..md
    };
    let hash_only = Options { fields: Fields::HASH_TYPE, ..Options::default() };
    assert_eq!(
        print_striped(&migrating, &with_fid, hash_only),
        Ok(b"crush,migrating,fixed\n".to_vec())
    );
}

#[test]
fn missing_mdts_and_stripe_lmvs_are_refused() {
    let (DirLayout::Striped(md), context) = example() else { return };
    let short = Context { stripe_mdts: vec![2, 3], ..context.clone() };
    assert_eq!(
        print_striped(&md, &short, Options::default()),
        Err(PrintError::MissingStripeMdt(2))
    );
    let stripe = LmvMdsMd { kind: MdsMdKind::Stripe, stripe_fids: Vec::new(), ..md };
    assert_eq!(print_striped(&stripe, &context, Options::default()), Err(PrintError::StripeLmv));
}

#[test]
fn default_layouts_show_inheritance_and_pool() {
    let md = LmvUserMd {
        kind: UserMdKind::Default,
        stripe_count: 2,
        stripe_offset: LmvUserMd::OFFSET_DEFAULT,
        hash_type: HashTypeField(4),
        lum_type: 0,
        max_inherit: 3,
        max_inherit_rr: 0,
        pool_name: PoolName::new(b"flash").unwrap_or_default(),
        objects: Vec::new(),
    };
    let out = print_default(&md, None, Options::default()).unwrap_or_default();
    assert_eq!(
        String::from_utf8_lossy(&out),
        "lmv_stripe_count: 2 lmv_stripe_offset: -1 lmv_hash_type: crush2 lmv_max_inherit: 3 \
         lmv_max_inherit_rr: 0 (Default)lmv_pool: flash  \n"
    );
    let root = LmvUserMd {
        stripe_count: 1,
        hash_type: HashTypeField(0),
        max_inherit: 0,
        max_inherit_rr: 3,
        pool_name: PoolName::default(),
        ..md.clone()
    };
    let out = print_default(&root, None, Options::default()).unwrap_or_default();
    assert_eq!(
        String::from_utf8_lossy(&out),
        "lmv_stripe_count: 1 lmv_stripe_offset: -1 lmv_hash_type: none lmv_max_inherit: -1 \
         lmv_max_inherit_rr: 3\n"
    );
    let none = LmvUserMd { max_inherit: 255, max_inherit_rr: 255, ..root };
    let yaml = Options { yaml: true, ..Options::default() };
    let out = print_default(&none, None, yaml).unwrap_or_default();
    assert_eq!(
        String::from_utf8_lossy(&out),
        "lmv_stripe_count:  1\nlmv_stripe_offset: -1\nlmv_hash_type:     none\n\
         lmv_max_inherit:   0\nlmv_max_inherit_rr: -1\n"
    );
    let verbose = Options { fields: Fields::VERBOSE, ..Options::default() };
    assert_eq!(print_default(&md, None, verbose), Err(PrintError::MissingDirFid));
    let inherit = Options { fields: Fields::MAX_INHERIT, ..Options::default() };
    assert_eq!(print_default(&md, None, inherit), Ok(b"3\n".to_vec()));
}

#[test]
fn foreign_layouts_show_their_value() {
    let md = ForeignLmv { foreign_type: 0xda05, flags: 1, value: b"uuid\0junk".to_vec() };
    assert_eq!(print_foreign(&md, Options::default()), b"lfm_value:     'uuid'\n\n");
    let verbose = Options { fields: Fields::VERBOSE, ..Options::default() };
    assert_eq!(
        String::from_utf8_lossy(&print_foreign(&md, verbose)),
        "lfm_magic:         0x0CD50CD0\nlfm_length:          9\nlfm_type:          0x0000DA05 \
         (symlink)\nlfm_flags:          0x00000001\nlfm_value:     'uuid'\n\n"
    );
}

#[test]
fn insane_stripe_fids_show_as_zero_on_mdt_0() {
    let (DirLayout::Striped(mut md), context) = example() else { return };
    if let Some(fid) = md.stripe_fids.get_mut(1) {
        fid.ver = 1;
    }
    let out = print_striped(&md, &context, Options::default()).unwrap_or_default();
    let out = String::from_utf8_lossy(&out);
    assert!(
        out.contains("\n     0\t\t [0:0x0:0x0]\t\t\n     0\t\t [0x200000400:0x3:0x0]"),
        "{out}"
    );
}
