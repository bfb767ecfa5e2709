//! `ulnet-legacy2yaml` as a process: the inputs (argument, stdin, files, modprobe files),
//! `-o`, exit statuses and messages of Lustre's `lnet_legacy2yaml`, the program named as
//! invoked (so a link named `lnet_legacy2yaml` is a drop-in), and its YAML accepted by
//! `ulnetd --check`. The conversions themselves are checked byte for byte against the
//! tool's in ulnet-config (`legacy2yaml::tests`).

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::support::{self, Run, TempDir};

const CONVERTER: &str = env!("CARGO_BIN_EXE_ulnet-legacy2yaml");

/// Runs `program ARGS` with `stdin` piped in (`None`: no stdin at all, as from /dev/null).
fn run(program: &Path, args: &[&str], stdin: Option<&[u8]>) -> Run {
    let mut child = Command::new(program)
        .args(args)
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(bytes) = stdin {
        child.stdin.take().unwrap().write_all(bytes).unwrap();
    }
    let output = child.wait_with_output().unwrap();
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        args: args.iter().map(ToString::to_string).collect(),
    }
}

fn convert(args: &[&str], stdin: Option<&[u8]>) -> Run {
    run(Path::new(CONVERTER), args, stdin)
}

#[test]
fn the_man_pages_networks_example() {
    let out = convert(&["options lnet networks=\"tcp0(eth0),o2ib(ib0)\""], None);
    assert_eq!((out.code, out.stderr.as_str()), (0, ""));
    assert_eq!(
        out.stdout,
        "net:\n-     net type: tcp0\n      local NI(s):\n      -     interfaces:\n\
         \x20                 0: eth0\n-     net type: o2ib\n      local NI(s):\n\
         \x20     -     interfaces:\n                  0: ib0\n"
    );
}

#[test]
fn stdin_files_and_output_file() {
    let piped = convert(&[], Some(b"tcp(eth0) 192.168.0.[2,4]; tcp 192.168.0.*\n"));
    assert_eq!(piped.code, 0, "{}", piped.stderr);
    assert_eq!(
        piped.stdout,
        "ip2nets:\n  - net-spec: tcp\n    interfaces:\n         0: eth0\n    ip-range:\n\
         \x20        0: 192.168.0.[2,4]\n  - net-spec: tcp\n    ip-range:\n         0: 192.168.0.*\n"
    );
    let dir = TempDir::new("l2y");
    let modprobe = dir.file("lnet.conf", "options lnet \\\n  routes=\"tcp0 1 10.1.0.1@o2ib0:9\"\n");
    // Windows line ends read as newlines, as Python's text files read them.
    let rules = dir.file("ip.rules", "tcp0(eth0) 10.1.0.*\r\n");
    let output = dir.path("lnet.yaml");
    let path = |p: &Path| p.to_str().unwrap().to_string();
    let written = convert(
        &["-m", &path(&modprobe), "-i", &path(&rules), "-o", &path(&output), "--default-hop"],
        None,
    );
    assert_eq!((written.code, written.stdout.as_str(), written.stderr.as_str()), (0, "", ""));
    assert_eq!(
        std::fs::read_to_string(&output).unwrap(),
        "ip2nets:\n  - net-spec: tcp0\n    interfaces:\n         0: eth0\n    ip-range:\n\
         \x20        0: 10.1.0.*\nroute:\n  - net: tcp0\n    gateway: 10.1.0.1@o2ib0\n    hop: 1\n\
         \x20   priority: 9\n"
    );
}

#[test]
fn exit_statuses_and_messages_are_the_tools() {
    let empty = convert(&[], Some(b""));
    assert_eq!(empty.code, 1);
    assert_eq!(
        empty.stderr,
        "Error: no ip2nets, routes, or networks data provided (use -m/-i/-r, inline arg, or stdin)\n"
    );
    let missing = convert(&["-i", "/nonexistent/ip.rules"], None);
    assert_eq!(missing.code, 2);
    assert_eq!(
        missing.stderr,
        "Error: cannot read /nonexistent/ip.rules: [Errno 2] No such file or directory: \
         '/nonexistent/ip.rules'\n"
    );
    let dir = TempDir::new("l2y-bad");
    let bad = dir.file("bad.rules", "");
    std::fs::write(&bad, b"\xfftcp 10.0.0.*\n").unwrap();
    let undecodable = convert(&["-i", bad.to_str().unwrap()], None);
    assert_eq!(undecodable.code, 2);
    assert!(
        undecodable.stderr.ends_with(
            "bad.rules: 'utf-8' codec can't decode byte 0xff in position 0: invalid start byte\n"
        ),
        "{}",
        undecodable.stderr
    );
    let unwritable = convert(&["-o", "/nonexistent/x.yaml", "tcp 1.2.3.4"], None);
    assert_eq!(unwritable.code, 2);
    assert!(unwritable.stderr.starts_with("Error: cannot write output file /nonexistent/x.yaml"));
    let malformed = convert(&["tcp0(eth0) 10.0.0.* tcp1(eth1) 192.168.1.*"], None);
    assert_eq!(malformed.code, 2);
    assert!(malformed.stderr.contains("Multiple network rules must be separated by semicolons"));
    let usage = convert(&["--default-hop", "x"], None);
    assert_eq!(usage.code, 2);
    assert_eq!(
        usage.stderr,
        "usage: ulnet-legacy2yaml [-h] [-i FILE] [-r FILE] [-n FILE] [-m FILE]\n\
         \x20                        [-o FILE] [--default-hop [HOP]]\n\
         \x20                        [inline]\n\
         ulnet-legacy2yaml: error: argument --default-hop: invalid int value: 'x'\n"
    );
    let help = convert(&["-h"], None);
    assert_eq!(help.code, 0);
    assert!(help.stdout.starts_with("usage: ulnet-legacy2yaml [-h]"), "{}", help.stdout);
}

#[test]
fn linked_as_lnet_legacy2yaml_it_is_named_so() {
    let dir = TempDir::new("l2y-link");
    let link = dir.path("lnet_legacy2yaml");
    std::os::unix::fs::symlink(CONVERTER, &link).unwrap();
    let out = run(&link, &["a", "b"], None);
    assert_eq!(out.code, 2);
    assert!(out.stderr.starts_with("usage: lnet_legacy2yaml [-h]"), "{}", out.stderr);
    assert!(out.stderr.ends_with("lnet_legacy2yaml: error: unrecognized arguments: b\n"));
}

#[test]
fn the_converted_yaml_is_a_configuration_ulnetd_accepts() {
    let dir = TempDir::new("l2y-check");
    let converted = convert(&["options lnet networks=tcp(lo)"], None);
    assert_eq!(converted.code, 0, "{}", converted.stderr);
    let file = dir.file("lnet.yaml", &converted.stdout);
    let check = Command::new(support::ULNETD).arg("--check").arg(&file).output().unwrap();
    assert_eq!(check.status.code(), Some(0), "{}", String::from_utf8_lossy(&check.stderr));
}
