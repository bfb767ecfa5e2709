//! The host's CPU topology from sysfs, for libcfs's partition table
//! ([`ulnet_config::cpu_partitions`] does the computing): online and possible CPUs, each
//! online CPU's NUMA node, socket and core, and the online and possible nodes.
//!
//! Read once when the daemon starts, as the kernel builds its table at module load. A machine
//! without `/sys/devices/system/node` (no NUMA support) is one node 0; a CPU without a
//! readable `topology/` directory is its own core on socket 0. Every file read is bounded.

use std::collections::BTreeSet;
use std::path::Path;

use ulnet_config::cpu_partitions::{Cpu, MAX_CPUS, Topology, TopologyError, parse_cpulist};

/// Where the kernel lists CPUs and nodes.
const CPU_DIR: &str = "/sys/devices/system/cpu";
const NODE_DIR: &str = "/sys/devices/system/node";

/// Longest sysfs attribute read (a cpulist of 8192 CPUs in the worst spelling fits).
const MAX_ATTRIBUTE_LEN: u64 = 64 * 1024;

/// Why the topology could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TopologyReadError {
    #[error("cannot read {path}: {reason}")]
    Read { path: String, reason: String },
    #[error("{path}: not a CPU list: '{text}'")]
    BadList { path: String, text: String },
    #[error(transparent)]
    Topology(#[from] TopologyError),
}

/// The host's topology under `root` (`/` on a live system; tests point it at a copy).
pub fn read(root: &Path) -> Result<Topology, TopologyReadError> {
    let cpu_dir = root.join(CPU_DIR.trim_start_matches('/'));
    let node_dir = root.join(NODE_DIR.trim_start_matches('/'));
    let online = read_list(&cpu_dir.join("online"))?;
    let possible = read_list(&cpu_dir.join("possible")).unwrap_or_else(|_| online.clone());
    let (online_nodes, possible_nodes) = match read_list(&node_dir.join("online")) {
        Ok(nodes) => {
            let possible = read_list(&node_dir.join("possible")).unwrap_or_else(|_| nodes.clone());
            (nodes, possible)
        }
        Err(_) => (BTreeSet::from([0]), BTreeSet::from([0])),
    };
    let mut node_of = std::collections::BTreeMap::new();
    for &node in &online_nodes {
        let path = node_dir.join(format!("node{node}")).join("cpulist");
        if let Ok(cpus) = read_list(&path) {
            for cpu in cpus {
                node_of.insert(cpu, node);
            }
        }
    }
    let first_node = online_nodes.first().copied().unwrap_or(0);
    let cpus = online.iter().map(|&id| {
        let topology = cpu_dir.join(format!("cpu{id}")).join("topology");
        Cpu {
            id,
            node: node_of.get(&id).copied().unwrap_or(first_node),
            package: read_number(&topology.join("physical_package_id")).unwrap_or(0),
            core: read_number(&topology.join("core_id")).unwrap_or(id),
        }
    });
    let count = |set: &BTreeSet<u32>| set.iter().next_back().map_or(0, |&last| last + 1);
    Ok(Topology::new(cpus, online_nodes.iter().copied(), count(&possible), count(&possible_nodes))?)
}

fn read_text(path: &Path) -> Result<String, TopologyReadError> {
    use std::io::Read;
    let error =
        |reason: String| TopologyReadError::Read { path: path.display().to_string(), reason };
    let file = std::fs::File::open(path).map_err(|e| error(e.to_string()))?;
    let mut text = String::new();
    file.take(MAX_ATTRIBUTE_LEN).read_to_string(&mut text).map_err(|e| error(e.to_string()))?;
    Ok(text)
}

fn read_list(path: &Path) -> Result<BTreeSet<u32>, TopologyReadError> {
    let text = read_text(path)?;
    parse_cpulist(&text).ok_or_else(|| TopologyReadError::BadList {
        path: path.display().to_string(),
        text: text.trim().chars().take(80).collect(),
    })
}

/// A sysfs id (`core_id`, `physical_package_id`); -1 or garbage reads as absent.
fn read_number(path: &Path) -> Option<u32> {
    read_text(path).ok()?.trim().parse::<u32>().ok().filter(|&v| v < MAX_CPUS * 64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, path: &str, text: &str) {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// Two nodes of two cores with two threads each (siblings 0/4, 1/5 on node 0; 2/6, 3/7
    /// on node 1, as Intel numbers them): the default "N" gives one partition per node, and
    /// the generic layout keeps each core's threads together.
    #[test]
    fn reads_a_two_node_machine() {
        let dir = std::env::temp_dir().join(format!("ulnetd-topology-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        write(&dir, "sys/devices/system/cpu/online", "0-7\n");
        write(&dir, "sys/devices/system/cpu/possible", "0-7\n");
        write(&dir, "sys/devices/system/node/online", "0-1\n");
        write(&dir, "sys/devices/system/node/possible", "0-1\n");
        write(&dir, "sys/devices/system/node/node0/cpulist", "0-1,4-5\n");
        write(&dir, "sys/devices/system/node/node1/cpulist", "2-3,6-7\n");
        for cpu in 0..8 {
            let base = format!("sys/devices/system/cpu/cpu{cpu}/topology");
            write(&dir, &format!("{base}/physical_package_id"), &format!("{}\n", (cpu % 4) / 2));
            write(&dir, &format!("{base}/core_id"), &format!("{}\n", cpu % 2));
        }
        let topo = read(&dir).unwrap();
        assert_eq!((topo.online_cpus(), topo.online_nodes()), (8, 2));
        let table = ulnet_config::cpu_partitions::build("N", 0, &topo).unwrap();
        assert_eq!(table.render(), "0\t: 0 1 4 5\n1\t: 2 3 6 7\n");
        let table = ulnet_config::cpu_partitions::build("", 4, &topo).unwrap();
        assert_eq!(table.render(), "0\t: 0 4\n1\t: 1 5\n2\t: 2 6\n3\t: 3 7\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_machine_without_numa_is_one_node() {
        let dir = std::env::temp_dir().join(format!("ulnetd-topology-flat-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        write(&dir, "sys/devices/system/cpu/online", "0-3\n");
        let topo = read(&dir).unwrap();
        assert_eq!((topo.online_cpus(), topo.online_nodes()), (4, 1));
        write(&dir, "sys/devices/system/cpu/online", "0-x\n");
        assert!(matches!(read(&dir), Err(TopologyReadError::BadList { .. })));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The machine the tests run on reads without error.
    #[test]
    fn this_host_reads() {
        if Path::new(CPU_DIR).join("online").exists() {
            assert!(read(Path::new("/")).unwrap().online_cpus() >= 1);
        }
    }
}
