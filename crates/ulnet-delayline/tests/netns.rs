//! The delay line for real: two network namespaces, one TUN device of the line in each, and
//! `iperf3` across. Needs root, `ip` and `iperf3`; skipped (with a reason) otherwise, and a
//! failure under `CI`, where they are installed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)] // Test code.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

/// Why the test cannot run here, or `None`.
fn unavailable() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let euid = status.lines().find_map(|line| line.strip_prefix("Uid:")?.split_whitespace().nth(1));
    if euid != Some("0") {
        return Some("not root".into());
    }
    for tool in ["ip", "iperf3"] {
        if Command::new(tool).arg("-v").output().is_err() {
            return Some(format!("`{tool}` is not installed"));
        }
    }
    if !std::path::Path::new("/dev/net/tun").exists() {
        return Some("no /dev/net/tun".into());
    }
    None
}

fn skip(test: &str) -> bool {
    match unavailable() {
        Some(reason) => {
            assert!(std::env::var_os("CI").is_none(), "{test}: cannot run: {reason}");
            eprintln!("SKIPPED {test}: {reason}");
            true
        }
        None => false,
    }
}

fn ip(args: &[&str]) {
    let output = Command::new("ip").args(args).output().unwrap();
    assert!(output.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&output.stderr));
}

/// Two namespaces with the line's devices in them, 10.250.0.1 and .2; removed on drop (the
/// devices go with the line's process).
struct Setup {
    namespaces: [String; 2],
    line: Child,
    stdin: Option<ChildStdin>,
}

impl Setup {
    fn new(tag: &str, line_args: &[&str]) -> Self {
        let pid = std::process::id();
        let namespaces = [format!("uldl-{pid}-{tag}-a"), format!("uldl-{pid}-{tag}-b")];
        // Device names are at most 15 bytes.
        let devices = [format!("dl{}{tag}a", pid % 100_000), format!("dl{}{tag}b", pid % 100_000)];
        let mut line = Command::new(env!("CARGO_BIN_EXE_ulnet-delayline"))
            .args(["--a", &devices[0], "--b", &devices[1], "--exit-on-eof"])
            .args(line_args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut ready = String::new();
        let stdout = line.stdout.take().unwrap();
        let mut reader = BufReader::new(stdout);
        reader.read_line(&mut ready).unwrap();
        assert_eq!(ready.trim(), "ready", "the line did not start");
        // Keep reading its output (the final counters) in the background.
        std::thread::spawn(move || {
            for line in reader.lines().map_while(Result::ok) {
                eprintln!("delay line: {line}");
            }
        });
        let stdin = line.stdin.take();
        let setup = Setup { namespaces, line, stdin };
        for (index, (ns, device)) in setup.namespaces.iter().zip(&devices).enumerate() {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
            ip(&["netns", "add", ns]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
            ip(&["link", "set", device, "netns", ns]);
            let address = format!("10.250.0.{}/24", index + 1);
            ip(&["-n", ns, "addr", "add", &address, "dev", device]);
            ip(&["-n", ns, "link", "set", device, "mtu", "9000", "up"]);
        }
        setup
    }

    /// `iperf3` from the first namespace to the second for `seconds`: (received bits per
    /// second, the sender's smallest TCP round trip in microseconds).
    fn iperf(&self, seconds: u32) -> (f64, f64) {
        let mut server = Command::new("ip")
            .args(["netns", "exec", &self.namespaces[1], "iperf3", "-s", "-1", "-p", "5299"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut output = None;
        for _ in 0..50 {
            std::thread::sleep(Duration::from_millis(100));
            let run = Command::new("ip")
                .args(["netns", "exec", &self.namespaces[0], "iperf3", "-c", "10.250.0.2"])
                .args(["-p", "5299", "-J", "-t", &seconds.to_string()])
                .output()
                .unwrap();
            if run.status.success() {
                output = Some(run.stdout);
                break;
            }
        }
        let _ = server.kill();
        let _ = server.wait();
        let report: serde_json::Value =
            serde_json::from_slice(&output.expect("iperf3 ran")).unwrap();
        let end = &report["end"];
        let bits = end["sum_received"]["bits_per_second"].as_f64().unwrap();
        let rtt = end["streams"][0]["sender"]["min_rtt"].as_f64().unwrap();
        (bits, rtt)
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = stdin.flush();
        }
        let _ = self.line.wait_timeout_or_kill();
        for ns in &self.namespaces {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

trait WaitOrKill {
    fn wait_timeout_or_kill(&mut self) -> std::io::Result<()>;
}

impl WaitOrKill for Child {
    /// The line exits when its stdin closes; kill it if it has not within a few seconds.
    fn wait_timeout_or_kill(&mut self) -> std::io::Result<()> {
        for _ in 0..50 {
            if self.try_wait()?.is_some() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        self.kill()?;
        self.wait().map(|_| ())
    }
}

#[test]
fn tcp_across_the_line_sees_its_delay_and_never_beats_its_rate() {
    if skip("tcp_across_the_line_sees_its_delay_and_never_beats_its_rate") {
        return;
    }
    // 20 ms each way, 100 Mbit/s with Ethernet's 38 bytes a packet, a 2 MiB queue.
    let setup = Setup::new(
        "rtt",
        &["--delay", "20ms", "--rate", "100Mbit", "--overhead", "38", "--queue", "2MiB"],
    );
    let (bits, min_rtt_us) = setup.iperf(3);
    eprintln!("iperf3 through the line: {:.1} Mbit/s, smallest RTT {min_rtt_us} us", bits / 1e6);
    // No packet crosses sooner than the delay: the round trip is at least 40 ms (the
    // machine's noise can only add to it).
    assert!(min_rtt_us >= 40_000.0, "round trip {min_rtt_us} us through a 2 x 20 ms line");
    assert!(
        min_rtt_us < 400_000.0,
        "round trip {min_rtt_us} us: the line holds packets far too long"
    );
    // Nor faster than the rate: 100 Mbit/s on the wire is less in TCP payload.
    assert!(bits > 0.0 && bits <= 100e6, "{bits} bit/s through a 100 Mbit/s line");
}
