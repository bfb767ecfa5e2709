//! The binary end to end: setstripe --print-xattr → getstripe / map, and lfs's exit codes.

use std::process::{Command, Output};

fn lfs(args: &[&str]) -> Output {
    match Command::new(env!("CARGO_BIN_EXE_ulnet-lfs")).args(args).output() {
        Ok(output) => output,
        Err(error) => panic!("cannot run ulnet-lfs: {error}"),
    }
}

fn stdout(output: &Output) -> String {
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

const PFL: [&str; 24] = [
    "-E", "4M", "-c", "1", "-E", "64M", "-c", "2", "-E", "256M", "-c", "4", "-E", "1G", "-c", "8",
    "-E", "10G", "-c", "16", "-E", "-1", "-c", "-1",
];

fn print_xattr(options: &[&str]) -> String {
    let mut args = vec!["setstripe"];
    args.extend_from_slice(options);
    args.push("--print-xattr");
    let line = stdout(&lfs(&args));
    assert!(line.starts_with("lustre.lov=0x") && line.ends_with('\n'), "{line}");
    line.trim_end().trim_start_matches("lustre.lov=").to_string()
}

#[test]
fn setstripe_then_getstripe_reproduces_the_published_directory_default() {
    let hex = print_xattr(&PFL);
    // A directory default: lcm_size 32 + 6·48 + 6·32 = 512, v1 sub-layouts without objects.
    assert_eq!(hex.len(), 2 + 2 * 512);
    let text = stdout(&lfs(&[
        "getstripe",
        "--dir",
        "--fs-stripe-size=1M",
        "--path=/mnt/zlfs2/pfl_test01/",
        &hex,
    ]));
    let mut expected = String::from(
        "/mnt/zlfs2/pfl_test01/\n  lcm_layout_gen:    0\n  lcm_mirror_count:  1\n  lcm_entry_count:   6\n",
    );
    let ends = ["4194304", "67108864", "268435456", "1073741824", "10737418240", "EOF"];
    let mut start = "0".to_string();
    for (end, count) in ends.iter().zip(["1", "2", "4", "8", "16", "-1"]) {
        expected.push_str(&format!("    lcme_id:             N/A\n    lcme_mirror_id:      N/A\n    lcme_flags:          0\n    lcme_extent.e_start: {start}\n    lcme_extent.e_end:   {end}\n      stripe_count:  {count}       stripe_size:   1048576       pattern:       raid0       stripe_offset: -1\n\n"));
        start = end.to_string();
    }
    assert_eq!(text, expected);
    assert_eq!(stdout(&lfs(&["getstripe", "-c", "--dir", &hex])), "-1\n\n");
}

#[test]
fn getfattr_files_and_map() {
    let hex = print_xattr(&[
        "-E", "4M", "-c", "1", "-S", "1M", "-E", "64M", "-c", "2", "-E", "-1", "-c", "-1",
    ]);
    let path = std::env::temp_dir().join(format!("ulnet-lfs-lov-{}.txt", std::process::id()));
    let written = std::fs::write(&path, format!("# file: f\nlustre.lov={hex}\n\n"));
    assert!(written.is_ok());
    let path_text = path.to_string_lossy().into_owned();
    let text = stdout(&lfs(&["map", &path_text, "5M", "--ost-count", "32"]));
    let _ = std::fs::remove_file(&path);
    assert!(text.contains("comp_index:    1\n"), "{text}");
    assert!(text.contains("stripe:        1\n"), "{text}");
    assert!(text.contains("object_offset: 2097152\n"), "{text}");
    // Round trip: the xattr getstripe -y shows matches the options given.
    let yaml = stdout(&lfs(&["getstripe", "-y", &hex]));
    assert!(yaml.contains("    lcme_extent.e_end:   67108864\n    sub_layout:\n      lmm_stripe_count:  2\n      lmm_stripe_size:   1048576\n"), "{yaml}");
}

#[test]
fn errors_exit_like_lfs() {
    let bad_count = lfs(&["setstripe", "-c", "3000", "--print-xattr"]);
    assert_eq!(bad_count.status.code(), Some(4));
    assert_eq!(
        String::from_utf8_lossy(&bad_count.stderr),
        "lfs setstripe: invalid stripe count '3000'\n"
    );
    let misaligned = lfs(&["setstripe", "-E", "3M", "-S", "2M", "--print-xattr"]);
    assert_eq!(misaligned.status.code(), Some(22));
    let not_a_layout = lfs(&["getstripe", "0x01020304"]);
    assert_eq!(not_a_layout.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&not_a_layout.stderr).contains("unknown layout magic 0x04030201")
    );
}
