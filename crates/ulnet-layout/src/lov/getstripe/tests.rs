//! getstripe output against the shapes of docs/protocol/layouts.md §7 and the two published
//! listings (§7.6).

use super::*;
use crate::lov::map::{create, instantiate_write};
use crate::lov::ostid::OstId;
use crate::lov::plain::ObjectSlot;
use crate::lov::setstripe::Setstripe;
use crate::lov::{LCME_FL_PREF_RW, LCME_FL_STALE, LOV_PATTERN_OVERSTRIPING, LOV_PATTERN_RAID0};

fn request(options: &str) -> Layout {
    let args: Vec<&str> = options.split_whitespace().collect();
    Setstripe::parse(&args).map(|s| s.to_layout()).unwrap_or_else(|e| panic!("{options}: {e}"))
}

fn print(layout: &Layout, args: &[&str], path: &str) -> String {
    let (mut options, _) = GetstripeOptions::parse(args).unwrap_or_else(|e| panic!("{e}"));
    options.path = Some(path.to_string());
    getstripe(layout, &options)
}

const FILE_FID: Fid = Fid { seq: 0x2_0000_0401, oid: 1, ver: 0 };

/// The plain file of §7.2: `-c 2 -S 1M`, objects 2 on OST 1 and 3 on OST 0.
fn plain_file() -> Layout {
    let Layout::Plain(mut plain) = request("-c 2 -S 1M") else { panic!("plain") };
    plain.oi = OstId { first: 1, second: 0x2_0000_0401 };
    plain.offset_or_gen = 0;
    plain.objects = vec![
        ObjectSlot { oi: OstId::legacy(2), generation: 0, ost_index: 1 },
        ObjectSlot { oi: OstId::legacy(3), generation: 0, ost_index: 0 },
    ];
    Layout::Plain(plain)
}

#[test]
fn plain_file_default_verbose_and_yaml() {
    let layout = plain_file();
    let table = "\tobdidx\t\t objid\t\t objid\t\t group\n\t     1\t             2\t          0x2\t             0\n\t     0\t             3\t          0x3\t             0\n\n";
    let body = "lmm_stripe_count:  2\nlmm_stripe_size:   1048576\nlmm_pattern:       raid0\nlmm_layout_gen:    0\nlmm_stripe_offset: 1\n";
    assert_eq!(
        print(&layout, &[], "/mnt/lustre/file1"),
        format!("/mnt/lustre/file1\n{body}{table}")
    );
    let detail = "lmm_magic:         0x0BD10BD0\nlmm_seq:           0x200000401\nlmm_object_id:     0x1\nlmm_fid:           [0x200000401:0x1:0x0]\n";
    assert_eq!(
        print(&layout, &["-v"], "/mnt/lustre/file1"),
        format!("/mnt/lustre/file1\n{detail}{body}{table}")
    );
    let objects = "lmm_objects:\n      - l_ost_idx: 1\n        l_fid:     0x100010000:0x2:0x0\n      - l_ost_idx: 0\n        l_fid:     0x100000000:0x3:0x0\n";
    assert_eq!(print(&layout, &["-y"], "/mnt/lustre/file1"), format!("{body}{objects}"));
    assert_eq!(print(&layout, &["-c"], "f"), "2\n\n");
    assert_eq!(print(&layout, &["-S"], "f"), "1048576\n\n");
    assert_eq!(print(&layout, &["-i"], "f"), "1\n\n");
    assert_eq!(print(&layout, &["-L"], "f"), "raid0\n\n");
}

/// The §5.3 file after its 1-byte write at 300 MiB: objects 2 on OSTs 7, 8, 9, … in order.
fn pfl_after_write() -> CompositeLayout {
    let Layout::Composite(template) =
        request("-E 4M -c 1 -S 1M -E 64M -c 2 -E 256M -c 4 -E 1G -c 8 -E 10G -c 16 -E -1 -c -1")
    else {
        panic!("composite")
    };
    let mut next_ost = 7;
    let mut allocate = |_: usize, _: u64| {
        next_ost += 1;
        ObjectSlot { oi: OstId::legacy(2), generation: 0, ost_index: next_ost - 1 }
    };
    let mut layout = create(&template, FILE_FID, 32, &mut allocate);
    let _ = instantiate_write(&mut layout, 300 << 20, (300 << 20) + 1, 32, &mut allocate);
    layout
}

fn objects_text(first_ost: u32, count: u32) -> String {
    (0..count)
        .map(|i| {
            format!(
                "      - {i:>3}: {{ l_ost_idx: {:>3}, l_fid: [0x1{:04x}0000:0x2:0x0] }}\n",
                first_ost + i,
                first_ost + i
            )
        })
        .collect()
}

fn component_text(
    id: u32,
    flags: &str,
    start: u64,
    end: &str,
    count: &str,
    offset: &str,
    objects: &str,
) -> String {
    let mut text = format!(
        "    lcme_id:             {id}\n    lcme_mirror_id:      0\n    lcme_flags:          {flags}\n    lcme_extent.e_start: {start}\n    lcme_extent.e_end:   {end}\n      lmm_stripe_count:  {count}\n      lmm_stripe_size:   1048576\n      lmm_pattern:       raid0\n      lmm_layout_gen:    0\n      lmm_stripe_offset: {offset}\n"
    );
    if !objects.is_empty() {
        text.push_str("      lmm_objects:\n");
        text.push_str(objects);
    }
    text.push('\n');
    text
}

#[test]
fn pfl_file_default_text() {
    let layout = Layout::Composite(pfl_after_write());
    let expected = [
        "/mnt/lustre/pfl\n  lcm_layout_gen:    7\n  lcm_mirror_count:  1\n  lcm_entry_count:   6\n"
            .to_string(),
        component_text(1, "init", 0, "4194304", "1", "7", &objects_text(7, 1)),
        component_text(2, "init", 4 << 20, "67108864", "2", "8", &objects_text(8, 2)),
        component_text(3, "init", 64 << 20, "268435456", "4", "10", &objects_text(10, 4)),
        component_text(4, "init", 256 << 20, "1073741824", "8", "14", &objects_text(14, 8)),
        component_text(5, "0", 1 << 30, "10737418240", "16", "-1", ""),
        component_text(6, "0", 10 << 30, "EOF", "-1", "-1", ""),
    ]
    .concat();
    assert_eq!(print(&layout, &[], "/mnt/lustre/pfl"), expected);
    // Single fields come from the last instantiated component (comp 4).
    assert_eq!(print(&layout, &["-c"], "f"), "8\n\n");
    assert_eq!(print(&layout, &["-i"], "f"), "14\n\n");
    assert_eq!(print(&layout, &["--component-count"], "f"), "6\n\n");
    assert_eq!(print(&layout, &["-I"], "f"), "4\n\n");
    assert_eq!(print(&layout, &["-I5", "-E"], "f"), "10737418240\n\n");
}

#[test]
fn component_filters() {
    let layout = Layout::Composite(pfl_after_write());
    let ids = |args: &[&str]| {
        let text = print(&layout, args, "f");
        text.lines()
            .filter_map(|l| l.strip_prefix("    lcme_id:             "))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(&["--component-flags=init"]), ["1", "2", "3", "4"]);
    assert_eq!(ids(&["--component-flags=^init"]), ["5", "6"]);
    assert_eq!(ids(&["--component-start=+64M"]), ["4", "5", "6"]);
    assert_eq!(ids(&["-E-5M"]), ["1"]);
    assert_eq!(ids(&["-EEOF"]), ["6"]);
    assert_eq!(ids(&["-I3"]), ["3"]);
    assert_eq!(print(&layout, &["-I3", "-i", "--hex-idx"], "f"), "0xa\n\n");
    assert!(GetstripeOptions::parse(&["-I0"]).is_err());
    assert!(GetstripeOptions::parse(&["--component-flags=bogus"]).is_err());
}

#[test]
fn pfl_file_yaml_and_verbose() {
    let layout = Layout::Composite(pfl_after_write());
    let yaml = print(&layout, &["-y"], "/mnt/lustre/pfl");
    let head = "lcm_layout_gen:    7\nlcm_mirror_count:  1\nlcm_entry_count:   6\ncomponents:\n  - lcme_id:             1\n    lcme_mirror_id:      0\n    lcme_flags:          init\n    lcme_extent.e_start: 0\n    lcme_extent.e_end:   4194304\n    sub_layout:\n      lmm_stripe_count:  1\n      lmm_stripe_size:   1048576\n      lmm_pattern:       raid0\n      lmm_layout_gen:    0\n      lmm_stripe_offset: 7\n      lmm_objects:\n      - l_ost_idx: 7\n        l_fid:     0x100070000:0x2:0x0\n  - lcme_id:             2\n";
    assert!(yaml.starts_with(head), "{yaml}");
    let tail = "  - lcme_id:             6\n    lcme_mirror_id:      0\n    lcme_flags:          0\n    lcme_extent.e_start: 10737418240\n    lcme_extent.e_end:   EOF\n    sub_layout:\n      lmm_stripe_count:  -1\n      lmm_stripe_size:   1048576\n      lmm_pattern:       raid0\n      lmm_layout_gen:    0\n      lmm_stripe_offset: -1\n";
    assert!(yaml.ends_with(tail), "{yaml}");

    let verbose = print(&layout, &["-v"], "/mnt/lustre/pfl");
    let head = "/mnt/lustre/pfl\ncomposite_header:\n  lcm_magic:         0x0BD60BD0\n  lcm_size:          920\n  lcm_flags:         0\n  lcm_layout_gen:    7\n  lcm_mirror_count:  1\n  lcm_entry_count:   6\ncomponents:\n  - lcme_id:             1\n    lcme_mirror_id:      0\n    lcme_flags:          init\n    lcme_extent.e_start: 0\n    lcme_extent.e_end:   4194304\n    lcme_offset:         320\n    lcme_size:           56\n    sub_layout:\n      lmm_magic:         0x0BD10BD0\n      lmm_seq:           0x200000401\n      lmm_object_id:     0x1\n      lmm_fid:           [0x200000401:0x1:0x0]\n      lmm_stripe_count:  1\n      lmm_stripe_size:   1048576\n      lmm_pattern:       raid0\n      lmm_layout_gen:    0\n      lmm_stripe_offset: 7\n      lmm_objects:\n      -   0: { l_ost_idx:   7, l_fid: [0x100070000:0x2:0x0] }\n\n  - lcme_id:             2\n";
    assert!(verbose.starts_with(head), "{verbose}");
}

#[test]
fn dom_and_extension_components() {
    let dom = request("-E 1M -L mdt -E -1 -c 4 -S 1M");
    let text = print(&dom, &[], "f");
    assert!(text.contains("      lmm_stripe_count:  0\n      lmm_stripe_size:   1048576\n      lmm_pattern:       mdt\n      lmm_layout_gen:    0\n      lmm_mdt_index:     -1\n"), "{text}");
    let sel = request("-E -1 -z 64M");
    let text = print(&sel, &[], "f");
    assert!(text.contains("    lcme_flags:          extension\n"), "{text}");
    assert!(
        text.contains("      lmm_stripe_count:  0\n      lmm_extension_size: 67108864\n"),
        "{text}"
    );
    assert_eq!(print(&sel, &["-z"], "f"), "67108864\n\n");
}

#[test]
fn names_of_patterns_flags_and_times() {
    assert_eq!(pattern_string(LOV_PATTERN_RAID0 | LOV_PATTERN_OVERSTRIPING), "raid0,overstriped");
    assert_eq!(pattern_string(LOV_PATTERN_RAID0 | LOV_PATTERN_F_RELEASED), "raid0,released");
    assert_eq!(pattern_string(0x1 | 0x1000), "raid0,unknown_1000");
    assert_eq!(flags_string(LCME_FL_INIT | LCME_FL_STALE), "init,stale");
    assert_eq!(flags_string(LCME_FL_INIT | LCME_FL_PREF_RW), "init,prefer");
    assert_eq!(flags_string(0x10 | 0x4000), "init,0x4000");
    assert_eq!(layout_flags_string(2), "wp");
    assert_eq!(ctime_utc(0), "Thu Jan  1 00:00:00 1970");
    assert_eq!(ctime_utc(1_700_000_000), "Tue Nov 14 22:13:20 2023");
}

/// (label, value) pairs of a listing, whitespace-insensitive, the path kept as a value.
fn fields(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut words = text.split_whitespace().peekable();
    while let Some(word) = words.next() {
        match word.strip_suffix(':').filter(|label| !label.starts_with('/')) {
            Some(label) => {
                out.push((label.to_string(), words.next().unwrap_or_default().to_string()))
            }
            None => out.push(("path".to_string(), word.to_string())),
        }
    }
    out
}

/// The published 2.10.1 listings (LAD'17), verbatim.
const PUBLISHED: [(&str, &str, &str); 2] = [
    (
        "-E 4M -c 1 -E 64M -c 2 -E 256M -c 4 -E 1G -c 8 -E 10G -c 16 -E -1 -c -1",
        "/mnt/zlfs2/pfl_test01/",
        include_str!("published_pfl_test01.txt"),
    ),
    (
        "-E 4M -S 1M -c 1 -E 64M -S 2M -c 2 -E 256M -S 16M -c 4 -E 1G -S 32M -c 8 -E 10G -S 128M -c 16 -E -1 -S 256M -c -1",
        "/mnt/zlfs2/pfl_new1/",
        include_str!("published_pfl_new1.txt"),
    ),
];

#[test]
fn published_listings_field_for_field() {
    for (options, path, published) in PUBLISHED {
        let layout = request(options);
        let (mut o, _) = GetstripeOptions::parse::<&str>(&[]).unwrap_or_else(|e| panic!("{e}"));
        o.directory = true;
        o.path = Some(path.to_string());
        o.defaults.stripe_size = 1 << 20; // the file system's default in the talk
        let ours = getstripe(&layout, &o);
        // 2.11+ added lcm_mirror_count and lcme_mirror_id, and directory lines gained pattern.
        let added = ["lcm_mirror_count", "lcme_mirror_id", "pattern"];
        let ours: Vec<_> = fields(&ours)
            .into_iter()
            .filter(|(label, _)| !added.contains(&label.as_str()))
            .collect();
        assert_eq!(ours, fields(published), "{options}");
    }
}

#[test]
fn published_listing_in_emulated_text() {
    let layout = request(PUBLISHED[0].0);
    let o = GetstripeOptions {
        directory: true,
        path: Some("/mnt/zlfs2/pfl_test01/".into()),
        defaults: FsDefaults { stripe_count: 1, stripe_size: 1 << 20 },
        ..GetstripeOptions::default()
    };
    let component = |start: u64, end: &str, count: i32| {
        format!(
            "    lcme_id:             N/A\n    lcme_mirror_id:      N/A\n    lcme_flags:          0\n    lcme_extent.e_start: {start}\n    lcme_extent.e_end:   {end}\n      stripe_count:  {count}       stripe_size:   1048576       pattern:       raid0       stripe_offset: -1\n\n"
        )
    };
    let expected = [
        "/mnt/zlfs2/pfl_test01/\n  lcm_layout_gen:    0\n  lcm_mirror_count:  1\n  lcm_entry_count:   6\n".to_string(),
        component(0, "4194304", 1),
        component(4 << 20, "67108864", 2),
        component(64 << 20, "268435456", 4),
        component(256 << 20, "1073741824", 8),
        component(1 << 30, "10737418240", 16),
        component(10 << 30, "EOF", -1),
    ]
    .concat();
    assert_eq!(getstripe(&layout, &o), expected);
}
