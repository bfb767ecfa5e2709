//! A cluster of in-process nodes, each running the selftest service, plus a console node.

use std::time::{Duration, Instant};

use ulnet::{LinkConfig, MemFabric, Node, ProcessId};
use ulnet_selftest::{Console, SelftestService, ServiceConfig};

pub const KEY: u32 = 4242;

/// Bound on any single wait; reached only if something hangs.
pub const HANG_GUARD: Duration = Duration::from_secs(60);

pub struct Cluster {
    /// Kept alive with the nodes on it.
    _fabric: MemFabric,
    pub nodes: Vec<Node>,
    pub services: Vec<Option<SelftestService>>,
    _console_node: Node,
    pub console: Console,
}

impl Cluster {
    /// `count` test nodes 10.0.0.1..=count@tcp and a console at 10.0.0.200@tcp.
    pub fn new(count: u8) -> Self {
        Self::with_config(count, ServiceConfig::default())
    }

    /// As [`new`](Self::new), with the services configured by `config`.
    pub fn with_config(count: u8, config: ServiceConfig) -> Self {
        let fabric = MemFabric::new(LinkConfig::IDEAL);
        let mut nodes = Vec::new();
        let mut services = Vec::new();
        for i in 1..=count {
            let node = Node::builder()
                .mem_ni(format!("10.0.0.{i}@tcp").parse().unwrap(), &fabric)
                .build()
                .unwrap();
            services.push(Some(SelftestService::start_with(&node, config).unwrap()));
            nodes.push(node);
        }
        let console_node =
            Node::builder().mem_ni("10.0.0.200@tcp".parse().unwrap(), &fabric).build().unwrap();
        let console = Console::new(&console_node).unwrap();
        Self { _fabric: fabric, nodes, services, _console_node: console_node, console }
    }

    pub fn fabric(&self) -> &MemFabric {
        &self._fabric
    }

    pub fn id(&self, index: usize) -> ProcessId {
        ProcessId::lustre(format!("10.0.0.{}@tcp", index + 1).parse().unwrap())
    }

    pub fn ids(&self, range: std::ops::Range<usize>) -> Vec<ProcessId> {
        range.map(|i| self.id(i)).collect()
    }

    /// Stops node `index` as if it crashed: its service and node go away.
    pub fn kill(&mut self, index: usize) {
        if let Some(service) = self.services[index].take() {
            drop(service);
        }
        self.nodes[index].shutdown();
    }
}

/// Polls `probe` until it returns true or `limit` passes.
pub fn eventually(limit: Duration, mut probe: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if probe() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    probe()
}

/// Runs one `ulst` command line against the cluster's console, in process.
pub fn ulst(cluster: &Cluster, line: &str) -> (i32, String, String) {
    ulst_with(&cluster.console, line)
}

pub fn ulst_with(console: &Console, line: &str) -> (i32, String, String) {
    ulst_env(console, line, None)
}

/// As [`ulst_with`], with `LST_FEATURES` set to `features`.
pub fn ulst_env(console: &Console, line: &str, features: Option<&str>) -> (i32, String, String) {
    use ulnet_selftest::cli::{self, Env};
    let env = Env { session: Some(KEY.to_string()), features: features.map(str::to_string) };
    cli::run_captured(line, &env, console, false)
}
