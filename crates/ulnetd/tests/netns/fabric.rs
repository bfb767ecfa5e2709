//! Two network namespaces joined by N veth pairs ("rails"), each on its own subnet and each
//! optionally limited by `tc tbf`, plus the things a test does to them: links down and up,
//! nftables black holes, per-rail counters. Everything is removed on drop, also when a test
//! panics; namespaces left behind by a killed run (their pid no longer alive) are removed when
//! the next run starts.
//!
//! Layout for namespaces `ulnet-test-<pid>-<tag>-a` / `-b` and rail K (1-based): interface
//! `ulK` at both ends, 10.1.K.1/24 in A, 10.1.K.2/24 in B. A also holds 10.1.1.3/24 on rail 1
//! for the test's lst console.

use std::fs::File;
use std::process::{Command, Output};
use std::sync::Once;

/// Why the netns tests cannot run here, or `None` when they can.
pub fn unavailable() -> Option<String> {
    static VERDICT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    VERDICT.get_or_init(probe).clone()
}

fn probe() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let euid = status.lines().find_map(|line| line.strip_prefix("Uid:")?.split_whitespace().nth(1));
    if euid != Some("0") {
        return Some("not root".into());
    }
    for tool in ["ip", "tc", "nft"] {
        if Command::new(tool).arg("-V").output().is_err() {
            return Some(format!("`{tool}` is not installed"));
        }
    }
    let probe = format!("ulnet-test-{}-probe", std::process::id());
    let added = Command::new("ip").args(["netns", "add", &probe]).output();
    let _ = Command::new("ip").args(["netns", "del", &probe]).output();
    match added {
        Ok(output) if output.status.success() => None,
        Ok(output) => Some(format!(
            "cannot create a network namespace: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        )),
        Err(error) => Some(format!("cannot run ip: {error}")),
    }
}

/// Prints why a test is skipped and says whether it must be.
pub fn skip(test: &str) -> bool {
    match unavailable() {
        Some(reason) => {
            // CI runs as root with the tools installed: there, a skip is a failure.
            assert!(std::env::var_os("CI").is_none(), "{test}: netns tests cannot run: {reason}");
            eprintln!("SKIPPED {test}: network namespaces unavailable ({reason})");
            true
        }
        None => false,
    }
}

pub struct Fabric {
    pub a: String,
    pub b: String,
    pub rails: usize,
}

/// Which end of the fabric.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    A,
    B,
}

impl Fabric {
    /// Two namespaces and `rails` veth pairs, each direction of each limited to `rate` (a tc
    /// rate such as `100mbit`) when given.
    pub fn new(tag: &str, rails: usize, rate: Option<&str>) -> Self {
        static SWEEP: Once = Once::new();
        SWEEP.call_once(remove_stale_namespaces);
        let base = format!("ulnet-test-{}-{tag}", std::process::id());
        let fabric = Fabric { a: format!("{base}-a"), b: format!("{base}-b"), rails };
        for ns in [&fabric.a, &fabric.b] {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
            ip(&["netns", "add", ns]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        for rail in 1..=rails {
            let name = format!("ul{rail}");
            ip(&[
                "-n", &fabric.a, "link", "add", &name, "type", "veth", "peer", "name", &name,
                "netns", &fabric.b,
            ]);
            for (ns, host) in [(&fabric.a, 1), (&fabric.b, 2)] {
                ip(&["-n", ns, "addr", "add", &format!("10.1.{rail}.{host}/24"), "dev", &name]);
                ip(&["-n", ns, "link", "set", &name, "up"]);
                if let Some(rate) = rate {
                    run(
                        "tc",
                        &[
                            "-n", ns, "qdisc", "add", "dev", &name, "root", "tbf", "rate", rate,
                            "burst", "256kb", "latency", "100ms",
                        ],
                    );
                }
            }
        }
        ip(&["-n", &fabric.a, "addr", "add", "10.1.1.3/24", "dev", "ul1"]);
        fabric.wait_operational();
        fabric
    }

    /// Waits until every rail reads `state UP` on both sides: the kernel reports a new veth's
    /// carrier up to a second late (linkwatch), and a daemon started before that raises the
    /// NI's fatal flag at startup and advertises it DOWN.
    fn wait_operational(&self) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        for side in [Side::A, Side::B] {
            for rail in 1..=self.rails {
                loop {
                    let output =
                        ip(&["-n", self.ns(side), "-o", "link", "show", &format!("ul{rail}")]);
                    if String::from_utf8_lossy(&output.stdout).contains("state UP") {
                        break;
                    }
                    assert!(std::time::Instant::now() < deadline, "ul{rail} never came up");
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
            }
        }
    }

    pub fn ns(&self, side: Side) -> &str {
        match side {
            Side::A => &self.a,
            Side::B => &self.b,
        }
    }

    /// The NID of `side`'s end of `rail`.
    pub fn nid(side: Side, rail: usize) -> String {
        format!("10.1.{rail}.{}@tcp", if side == Side::A { 1 } else { 2 })
    }

    /// One more address, 10.1.`rail`.`host`/24, on `side`'s end of `rail`.
    pub fn add_address(&self, side: Side, rail: usize, host: u8) {
        ip(&[
            "-n",
            self.ns(side),
            "addr",
            "add",
            &format!("10.1.{rail}.{host}/24"),
            "dev",
            &format!("ul{rail}"),
        ]);
    }

    pub fn link(&self, side: Side, rail: usize, up: bool) {
        ip(&[
            "-n",
            self.ns(side),
            "link",
            "set",
            &format!("ul{rail}"),
            if up { "up" } else { "down" },
        ]);
    }

    /// Drops every packet arriving at `side` on `rail`, both directions' traffic of the rail
    /// then being lost (TCP keeps retransmitting into the hole): a black hole.
    pub fn black_hole(&self, side: Side, rail: usize) {
        let rules = format!(
            "table inet ulnet_hole {{\n\
             \x20 chain input {{\n    type filter hook input priority 0;\n    iifname \"ul{rail}\" drop\n  }}\n\
             \x20 chain output {{\n    type filter hook output priority 0;\n    oifname \"ul{rail}\" drop\n  }}\n}}\n"
        );
        let file = std::env::temp_dir().join(format!("{}-hole.nft", self.ns(side)));
        std::fs::write(&file, rules).unwrap();
        run("ip", &["netns", "exec", self.ns(side), "nft", "-f", file.to_str().unwrap()]);
        let _ = std::fs::remove_file(file);
    }

    pub fn clear_black_hole(&self, side: Side) {
        run("ip", &["netns", "exec", self.ns(side), "nft", "delete table inet ulnet_hole"]);
    }

    /// Bytes `side` sent on `rail`, from the kernel's interface counters.
    pub fn tx_bytes(&self, side: Side, rail: usize) -> u64 {
        let output =
            run("ip", &["-n", self.ns(side), "-s", "-o", "link", "show", &format!("ul{rail}")]);
        let text = String::from_utf8_lossy(&output.stdout);
        // One line: "... RX: bytes packets ... \    <rx numbers> \    TX: bytes ... \    <tx numbers>".
        let fields: Vec<&str> = text.split('\\').map(str::trim).collect();
        let tx = fields.iter().position(|field| field.starts_with("TX:")).unwrap();
        fields[tx + 1].split_whitespace().next().unwrap().parse().unwrap()
    }

    /// Runs `f` on a thread inside `side`'s namespace: sockets (and threads) it creates stay
    /// there.
    pub fn inside<R: Send>(&self, side: Side, f: impl FnOnce() -> R + Send) -> R {
        inside(self.ns(side), f)
    }
}

impl Drop for Fabric {
    fn drop(&mut self) {
        for ns in [&self.a, &self.b] {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

pub fn ip(args: &[&str]) -> Output {
    run("ip", args)
}

pub fn run(program: &str, args: &[&str]) -> Output {
    let output = Command::new(program).args(args).output().unwrap();
    assert!(
        output.status.success(),
        "{program} {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// Runs `f` on a thread inside namespace `ns`: sockets (and threads) it creates stay there.
pub fn inside<R: Send>(ns: &str, f: impl FnOnce() -> R + Send) -> R {
    let path = format!("/var/run/netns/{ns}");
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let ns = File::open(&path).unwrap();
                rustix::thread::move_into_link_name_space(
                    std::os::fd::AsFd::as_fd(&ns),
                    Some(rustix::thread::LinkNameSpaceType::Network),
                )
                .unwrap();
                f()
            })
            .join()
            .unwrap()
    })
}

/// Namespaces of earlier runs whose process is gone.
fn remove_stale_namespaces() {
    let Ok(output) = Command::new("ip").args(["netns", "list"]).output() else { return };
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let Some(name) = line.split_whitespace().next() else { continue };
        let Some(rest) = name.strip_prefix("ulnet-test-") else { continue };
        let Some(pid) = rest.split('-').next().and_then(|pid| pid.parse::<u32>().ok()) else {
            continue;
        };
        if pid != std::process::id() && !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = Command::new("ip").args(["netns", "del", name]).output();
        }
    }
}
