//! A routed fabric: a client namespace on net `tcp`, router namespaces on `tcp` and `tcp1`,
//! and a server namespace on `tcp1`, the two networks being two Linux bridges in a switch
//! namespace. Removed on drop, like [`super::fabric::Fabric`].
//!
//! Addresses: `tcp` is 10.2.0.0/24 (client .1, its lst console .3, router K .1K), `tcp1` is
//! 10.3.0.0/24 (router K .1K, server .100). Every link may be limited with `tc tbf`.

use std::process::Command;

use super::fabric::{ip, run};

/// The namespaces of one routed fabric.
pub struct Routed {
    pub switch: String,
    pub client: String,
    pub routers: Vec<String>,
    pub server: String,
}

impl Routed {
    /// The namespaces, bridges and veths, each veth end in a node namespace limited to `rate`
    /// when given.
    pub fn new(tag: &str, routers: usize, rate: Option<&str>) -> Self {
        let base = format!("ulnet-test-{}-{tag}", std::process::id());
        let fabric = Routed {
            switch: format!("{base}-sw"),
            client: format!("{base}-c"),
            routers: (1..=routers).map(|k| format!("{base}-r{k}")).collect(),
            server: format!("{base}-s"),
        };
        for ns in fabric.namespaces() {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
            ip(&["netns", "add", ns]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        for bridge in ["br0", "br1"] {
            ip(&["-n", &fabric.switch, "link", "add", bridge, "type", "bridge"]);
            ip(&["-n", &fabric.switch, "link", "set", bridge, "up"]);
        }
        let mut port = 0;
        let mut attach = |ns: &str, name: &str, bridge: &str, addresses: &[String]| {
            port += 1;
            let outside = format!("p{port}");
            ip(&[
                "-n",
                ns,
                "link",
                "add",
                name,
                "type",
                "veth",
                "peer",
                "name",
                &outside,
                "netns",
                &fabric.switch,
            ]);
            ip(&["-n", &fabric.switch, "link", "set", &outside, "master", bridge]);
            ip(&["-n", &fabric.switch, "link", "set", &outside, "up"]);
            for address in addresses {
                ip(&["-n", ns, "addr", "add", address, "dev", name]);
            }
            ip(&["-n", ns, "link", "set", name, "up"]);
            if let Some(rate) = rate {
                run(
                    "tc",
                    &[
                        "-n", ns, "qdisc", "add", "dev", name, "root", "tbf", "rate", rate,
                        "burst", "256kb", "latency", "100ms",
                    ],
                );
            }
        };
        attach(&fabric.client, "eth0", "br0", &["10.2.0.1/24".into(), "10.2.0.3/24".into()]);
        for (index, ns) in fabric.routers.iter().enumerate() {
            let host = 11 + index;
            attach(ns, "eth0", "br0", &[format!("10.2.0.{host}/24")]);
            attach(ns, "eth1", "br1", &[format!("10.3.0.{host}/24")]);
        }
        attach(&fabric.server, "eth0", "br1", &["10.3.0.100/24".into()]);
        fabric.wait_operational();
        fabric
    }

    fn namespaces(&self) -> impl Iterator<Item = &String> {
        [&self.switch, &self.client, &self.server].into_iter().chain(&self.routers)
    }

    /// Waits until every node interface reports `state UP`.
    fn wait_operational(&self) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut ends: Vec<(&str, &str)> = vec![(&self.client, "eth0"), (&self.server, "eth0")];
        for ns in &self.routers {
            ends.push((ns, "eth0"));
            ends.push((ns, "eth1"));
        }
        for (ns, name) in ends {
            loop {
                let output = ip(&["-n", ns, "-o", "link", "show", name]);
                if String::from_utf8_lossy(&output.stdout).contains("state UP") {
                    break;
                }
                assert!(std::time::Instant::now() < deadline, "{ns} {name} never came up");
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
    }

    /// Router `k`'s (1-based) NIDs on `tcp` and `tcp1`.
    pub fn router_nids(k: usize) -> (String, String) {
        (format!("10.2.0.{}@tcp", 10 + k), format!("10.3.0.{}@tcp1", 10 + k))
    }

    pub const CLIENT: &'static str = "10.2.0.1@tcp";
    pub const CONSOLE: &'static str = "10.2.0.3@tcp";
    pub const SERVER: &'static str = "10.3.0.100@tcp1";

    /// Bytes router `k` sent on its `tcp1` side.
    pub fn router_tx_bytes(&self, k: usize) -> u64 {
        let output = ip(&["-n", &self.routers[k - 1], "-s", "-o", "link", "show", "eth1"]);
        let text = String::from_utf8_lossy(&output.stdout);
        let fields: Vec<&str> = text.split('\\').map(str::trim).collect();
        let tx = fields.iter().position(|field| field.starts_with("TX:")).unwrap();
        fields[tx + 1].split_whitespace().next().unwrap().parse().unwrap()
    }
}

impl Drop for Routed {
    fn drop(&mut self) {
        for ns in self.namespaces() {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}
