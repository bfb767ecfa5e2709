//! `ulnet-lfs getdirstripe` and `hash` run as a user would run them.

use std::process::Command;

fn lfs(args: &[&str]) -> (bool, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_ulnet-lfs")).args(args).output();
    let Ok(output) = output else { return (false, String::new(), "did not start".into()) };
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// `trusted.lmv` of a 4-stripe fnv_1a_64 directory whose master is on MDT2, as
/// `getfattr -d -m - -e hex` prints it.
fn getfattr_output() -> String {
    let mut hex = String::from("d00cd20c04000000020000000200000000000000000000000000000000000000");
    hex.push_str(&"00".repeat(24));
    for (seq, oid) in
        [(0x2_8000_0400u64, 2u32), (0x2_c000_0400, 2), (0x2_0000_0400, 3), (0x2_4000_0400, 2)]
    {
        for byte in seq.to_le_bytes().iter().chain(&oid.to_le_bytes()).chain(&[0; 4]) {
            hex.push_str(&format!("{byte:02x}"));
        }
    }
    format!("# file: dir\ntrusted.link=0xdff1ea11\ntrusted.lmv=0x{hex}\n\n")
}

fn xattr_file(name: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("ulnet-lfs-{}-{name}", std::process::id()));
    let _ = std::fs::write(&path, getfattr_output());
    path
}

#[test]
fn getdirstripe_of_getfattr_output_matches_lfs() {
    let path = xattr_file("lmv");
    let file = path.to_string_lossy();
    let (ok, out, err) = lfs(&["getdirstripe", &file]);
    assert!(ok, "{err}");
    assert_eq!(
        out,
        "lmv_stripe_count: 4 lmv_stripe_offset: 2 lmv_hash_type: fnv_1a_64\n\
         mdtidx\t\t FID[seq:oid:ver]\n\
         \x20    2\t\t [0x280000400:0x2:0x0]\t\t\n\
         \x20    3\t\t [0x2c0000400:0x2:0x0]\t\t\n\
         \x20    0\t\t [0x200000400:0x3:0x0]\t\t\n\
         \x20    1\t\t [0x240000400:0x2:0x0]\t\t\n"
    );
    let (ok, out, _) = lfs(&["getdirstripe", "-y", "--mdts", "5,6,7,8", &file]);
    assert!(ok);
    assert!(out.starts_with("lmv_stripe_count:  4\nlmv_stripe_offset: 2\n"));
    assert!(out.ends_with("      - l_mdt_idx: 8\n        l_fid:     0x240000400:0x2:0x0\n"));
    let (ok, _, err) = lfs(&["getdirstripe", "-v", &file]);
    assert!(!ok && err.contains("FID"), "{err}");
    let (ok, out, _) = lfs(&["getdirstripe", "-v", "--dir-fid", "0x280000400:0x1:0x0", &file]);
    assert!(ok && out.starts_with("lmv_fid: 0x280000400:0x1:0x0 lmv_magic: 0xcd20cd0 "), "{out}");
    let _ = std::fs::remove_file(path);
}

#[test]
fn hash_places_names_like_lustre() {
    let (ok, out, err) = lfs(&["hash", "file.mdtest.12.12345", "--count", "4", "--type", "crush2"]);
    assert!(ok, "{err}");
    assert_eq!(out, "file.mdtest.12.12345\t2\n");
    // fnv_1a_64 is the default type.
    let (ok, out, _) = lfs(&["hash", "foo", "--count", "4", "--mdts", "2,3,0,1"]);
    assert!(ok);
    assert_eq!(out, "foo\t3\t1\n");
    let path = xattr_file("hash");
    let (ok, out, _) = lfs(&["hash", "a", "abc", "--layout", &path.to_string_lossy()]);
    assert!(ok);
    assert_eq!(out, "a\t0\nabc\t3\n");
    let _ = std::fs::remove_file(path);
    let (ok, _, err) = lfs(&["hash", "a", "--count", "x"]);
    assert!(!ok && err.contains("bad count"), "{err}");
}

#[test]
fn getdirstripe_default_and_foreign_layouts() {
    // trusted.dmv: -c 2 -i -1 -H crush2 --max-inherit 3, pool "flash".
    let mut dmv = String::from("d00cd30c02000000ffffffff0400000000000000030000000000000000000000");
    dmv.push_str("666c617368");
    dmv.push_str(&"00".repeat(11));
    let text = format!("# file: d\ntrusted.dmv=0x{dmv}\ntrusted.lmv=0x00\n");
    let path = std::env::temp_dir().join(format!("ulnet-lfs-{}-dmv", std::process::id()));
    let _ = std::fs::write(&path, text);
    let (ok, out, err) = lfs(&["getdirstripe", "-D", &path.to_string_lossy()]);
    assert!(ok, "{err}");
    assert_eq!(
        out,
        "lmv_stripe_count: 2 lmv_stripe_offset: -1 lmv_hash_type: crush2 lmv_max_inherit: 3 \
         lmv_max_inherit_rr: 0 (Default)lmv_pool: flash  \n"
    );
    let (ok, out, _) = lfs(&["getdirstripe", "-D", "-X", &path.to_string_lossy()]);
    assert!(ok);
    assert_eq!(out, "3\n");
    let _ = std::fs::remove_file(path);

    let foreign = "0xd00cd50c0300000005da000000000000616263";
    let (ok, out, _) = lfs(&["getdirstripe", foreign]);
    assert!(ok);
    assert_eq!(out, "lfm_value:     'abc'\n\n");
    let (ok, _, err) = lfs(&["getdirstripe", "0xd00cd50c"]);
    assert!(!ok && err.contains("lmv_foreign_md needs 16 bytes"), "{err}");
}
