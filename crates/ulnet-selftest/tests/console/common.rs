//! A cluster of in-process nodes, each running the selftest service, plus a console node.

use std::time::{Duration, Instant};

use ulnet::{LinkConfig, MemFabric, Node, ProcessId};
use ulnet_selftest::{Console, SelftestService};

pub const KEY: u32 = 4242;

pub struct Cluster {
    pub fabric: MemFabric,
    pub nodes: Vec<Node>,
    pub services: Vec<Option<SelftestService>>,
    pub console_node: Node,
    pub console: Console,
}

impl Cluster {
    /// `count` test nodes 10.0.0.1..=count@tcp and a console at 10.0.0.200@tcp.
    pub fn new(count: u8) -> Self {
        let fabric = MemFabric::new(LinkConfig::IDEAL);
        let mut nodes = Vec::new();
        let mut services = Vec::new();
        for i in 1..=count {
            let node = Node::builder()
                .mem_ni(format!("10.0.0.{i}@tcp").parse().unwrap(), &fabric)
                .build()
                .unwrap();
            services.push(Some(SelftestService::start(&node).unwrap()));
            nodes.push(node);
        }
        let console_node =
            Node::builder().mem_ni("10.0.0.200@tcp".parse().unwrap(), &fabric).build().unwrap();
        let console = Console::new(&console_node).unwrap();
        Self { fabric, nodes, services, console_node, console }
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
