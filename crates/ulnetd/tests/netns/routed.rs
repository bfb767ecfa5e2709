//! A routed fabric: a client namespace on net `tcp`, router namespaces on `tcp` and `tcp1`,
//! and a server namespace on `tcp1`, the two networks being two Linux bridges in a switch
//! namespace. Removed on drop, like [`super::fabric::Fabric`].
//!
//! Addresses: `tcp` is 10.2.0.0/24 (client .1, its lst console .3, router K .1K), `tcp1` is
//! 10.3.0.0/24 (router K .1K, server .100). Every link may be limited with `tc tbf`.
//!
//! [`Routed::one_segment`] is the other common layout: one Ethernet segment, and one router
//! whose two NIs share one interface and one address (`networks="tcp(eth0),tcp1(eth0)"`):
//! 10.2.0.11@tcp and 10.2.0.11@tcp1. The server's address is on 10.3.0.0/24 and each end
//! node has an IP route to the router only, so nothing but LNet routing joins them.

use std::process::Command;

use super::fabric::{ip, run};

/// The namespaces of one routed fabric.
pub struct Routed {
    pub switch: String,
    pub client: String,
    pub routers: Vec<String>,
    pub server: String,
    /// Both of each router's NIs on its one interface `eth0`, one address.
    pub one_interface: bool,
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
            one_interface: false,
        };
        fabric.add_namespaces();
        for bridge in ["br0", "br1"] {
            ip(&["-n", &fabric.switch, "link", "add", bridge, "type", "bridge"]);
            ip(&["-n", &fabric.switch, "link", "set", bridge, "up"]);
        }
        let mut port = 0;
        let mut attach = |ns: &str, name: &str, bridge: &str, addresses: &[String]| {
            port += 1;
            fabric.attach(port, ns, name, bridge, addresses, rate);
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

    /// One segment (bridge `br0`): client and console as in [`Routed::new`], one router
    /// with both NIs on `eth0` at 10.2.0.11, the server at 10.3.0.100; no link limits.
    pub fn one_segment(tag: &str) -> Self {
        let base = format!("ulnet-test-{}-{tag}", std::process::id());
        let fabric = Routed {
            switch: format!("{base}-sw"),
            client: format!("{base}-c"),
            routers: vec![format!("{base}-r1")],
            server: format!("{base}-s"),
            one_interface: true,
        };
        fabric.add_namespaces();
        ip(&["-n", &fabric.switch, "link", "add", "br0", "type", "bridge"]);
        ip(&["-n", &fabric.switch, "link", "set", "br0", "up"]);
        let client = ["10.2.0.1/24".to_string(), "10.2.0.3/24".to_string()];
        fabric.attach(1, &fabric.client, "eth0", "br0", &client, None);
        fabric.attach(2, &fabric.routers[0], "eth0", "br0", &["10.2.0.11/24".into()], None);
        fabric.attach(3, &fabric.server, "eth0", "br0", &["10.3.0.100/24".into()], None);
        // On-link routes between the router and the server only.
        ip(&["-n", &fabric.routers[0], "route", "add", "10.3.0.0/24", "dev", "eth0"]);
        ip(&["-n", &fabric.server, "route", "add", "10.2.0.11/32", "dev", "eth0"]);
        fabric.wait_operational();
        fabric
    }

    fn add_namespaces(&self) {
        for ns in self.namespaces() {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
            ip(&["netns", "add", ns]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
    }

    /// A veth `name` in `ns` with `addresses`, its other end `p<port>` on `bridge`, limited
    /// to `rate` inside `ns` when given.
    fn attach(
        &self,
        port: usize,
        ns: &str,
        name: &str,
        bridge: &str,
        addresses: &[String],
        rate: Option<&str>,
    ) {
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
            &self.switch,
        ]);
        ip(&["-n", &self.switch, "link", "set", &outside, "master", bridge]);
        ip(&["-n", &self.switch, "link", "set", &outside, "up"]);
        for address in addresses {
            ip(&["-n", ns, "addr", "add", address, "dev", name]);
        }
        ip(&["-n", ns, "link", "set", name, "up"]);
        if let Some(rate) = rate {
            run(
                "tc",
                &[
                    "-n", ns, "qdisc", "add", "dev", name, "root", "tbf", "rate", rate, "burst",
                    "256kb", "latency", "100ms",
                ],
            );
        }
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
            if !self.one_interface {
                ends.push((ns, "eth1"));
            }
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
    pub fn router_nids(&self, k: usize) -> (String, String) {
        let tcp1_subnet = if self.one_interface { 2 } else { 3 };
        (format!("10.2.0.{}@tcp", 10 + k), format!("10.{tcp1_subnet}.0.{}@tcp1", 10 + k))
    }

    pub const CLIENT: &'static str = "10.2.0.1@tcp";
    pub const CONSOLE: &'static str = "10.2.0.3@tcp";
    pub const SERVER: &'static str = "10.3.0.100@tcp1";

    /// Bytes router `k` sent on its `tcp1` side (its one interface when it has one).
    pub fn router_tx_bytes(&self, k: usize) -> u64 {
        let side = if self.one_interface { "eth0" } else { "eth1" };
        let output = ip(&["-n", &self.routers[k - 1], "-s", "-o", "link", "show", side]);
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
