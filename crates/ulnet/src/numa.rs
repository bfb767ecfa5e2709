//! NUMA distance of a TCP NI's device, from sysfs, for path selection.
//!
//! The kernel places each interface's device on a NUMA node (`dev_to_node()`, lustre:
//! lnet/lnet/lib-socket.c `lnet_inet_enumerate()`, giving the NI its `ni_dev_cpt`) and, when
//! choosing a local NI, compares the distance from the message's CPU partition to that node
//! (lustre: lnet/lnet/lib-move.c `lnet_get_best_ni()`, lib-cpt.c `cfs_cpt_distance()`). In
//! userspace the same facts are in sysfs: `/sys/class/net/<if>/device/numa_node` (absent for
//! virtual devices, -1 on a machine without NUMA) and the node distance table
//! `/sys/devices/system/node/node<N>/distance`.
//!
//! When the node was given its partitions' NUMA nodes ([`NodeBuilder::partition_nodes`]),
//! each NI gets the kernel's distance from every partition: the device's partition is the
//! first one holding its node (`ni_dev_cpt`), and the distance between two partitions is the
//! largest between their nodes (`cfs_cpt_distance()`), the whole table's largest when the
//! device's node is unknown. The core compares a message's from its home partition.
//! Otherwise the node's memory is taken to be the I/O thread's node: that of its CPU when
//! pinned, else of the CPU building the node; a device with no node is as far as the farthest
//! node from there. When the local node or its distances are unknown, the NI keeps the core's
//! default (0: no preference).
//!
//! [`NodeBuilder::partition_nodes`]: crate::NodeBuilder::partition_nodes

use std::path::Path;

use ulnet_proto::engine::LndKind;

use crate::link_watch;

/// Bound on a sysfs attribute we read (a distance row for 1024 nodes fits easily).
const MAX_ATTRIBUTE_LEN: u64 = 8 * 1024;

/// Where the node's memory is, for measuring distances to its NIs' devices.
#[derive(Clone, Debug, Default)]
pub(crate) struct Placement {
    /// The I/O thread's pinned CPU, standing for the node's memory when the partitions'
    /// nodes are not known.
    pub(crate) cpu: Option<usize>,
    /// Each partition's NUMA nodes, by CPT; empty when not known.
    pub(crate) partition_nodes: Vec<Vec<u32>>,
}

/// Gives every TCP NI of `engine` the NUMA distance of its interface's device, seen from
/// each partition when `placement` knows their nodes, else from its CPU.
pub(crate) fn apply(engine: &mut ulnet_proto::engine::Engine, placement: &Placement) {
    let sysfs = Path::new("/sys");
    let nodes = &placement.partition_nodes;
    let by_partition = (!nodes.is_empty() && nodes.len() == engine.partitions().count() as usize)
        .then(|| CptDistances::read(sysfs, nodes));
    let Ok(host) = link_watch::host_addresses() else { return };
    let nis: Vec<_> =
        engine.ni_ids().filter_map(|ni| engine.ni_stats(ni).map(|s| (ni, s))).collect();
    for (ni, stats) in nis {
        if stats.lnd != LndKind::Tcp {
            continue;
        }
        let interface = stats.nid.ip().and_then(|ip| {
            let address = host.iter().find(|address| address.ip == ip)?;
            Some(address.interface.as_str())
        });
        // The NI was just listed by the core and the list is one per partition, so neither
        // setter can fail.
        if let Some(table) = &by_partition {
            // An NI whose device is unknown is as far as the table is wide, as the kernel's
            // `CFS_CPT_ANY` device is, not nearer than a known one.
            let dev_cpt = stats
                .dev_cpt
                .or_else(|| interface.and_then(|name| device_partition(sysfs, name, nodes)));
            let _ = engine.set_ni_numa_distances(ni, &table.to_partition(dev_cpt));
        } else if let Some(distance) =
            interface.and_then(|name| interface_distance(sysfs, name, placement.cpu))
        {
            let _ = engine.set_ni_numa_distance(ni, distance);
        }
    }
}

/// The distance from `cpu`'s NUMA node (the current CPU's when `None`) to `interface`'s
/// device, read under `sysfs` (normally `/sys`): a device with no node is as far as the
/// farthest node from here, never nearer than a known one. `None` when the local node or its
/// distances are unknown.
pub(crate) fn interface_distance(sysfs: &Path, interface: &str, cpu: Option<usize>) -> Option<u32> {
    let cpu = cpu.or_else(current_cpu)?;
    let local = cpu_node(sysfs, cpu)?;
    let row = distance_row(sysfs, u32::try_from(local).ok()?)?;
    match device_node(sysfs, interface) {
        Some(device) => row.get(&device).copied(),
        None => row.values().copied().max(),
    }
}

/// Node `node`'s row of the distance table, by node id. The kernel writes one entry per
/// online node in id order (`node_read_distance()`), so entry `i` is the `i`-th online node,
/// which is node `i` only when the ids have no gaps.
fn distance_row(sysfs: &Path, node: u32) -> Option<std::collections::BTreeMap<u32, u32>> {
    let text = read(&sysfs.join(format!("devices/system/node/node{node}/distance")))?;
    let values: Vec<u32> =
        text.split_whitespace().map(|v| v.parse().ok()).collect::<Option<_>>()?;
    let online = read(&sysfs.join("devices/system/node/online")).and_then(|list| node_list(&list));
    let ids = online.unwrap_or_else(|| (0..values.len() as u32).collect());
    Some(ids.into_iter().zip(values).collect())
}

/// A sysfs node list (`0-1,8`), at most [`MAX_NODES`] ids.
fn node_list(text: &str) -> Option<Vec<u32>> {
    let ids = ulnet_proto::engine::cpt::parse_id_list(text, MAX_NODES)?;
    Some(ids.into_iter().collect())
}

/// The partition of `interface`'s device when the NI was given none: the first holding its
/// node.
fn device_partition(sysfs: &Path, interface: &str, partition_nodes: &[Vec<u32>]) -> Option<u32> {
    let node = device_node(sysfs, interface)?;
    let cpt = partition_nodes.iter().position(|nodes| nodes.contains(&node))?;
    u32::try_from(cpt).ok()
}

/// The distances between CPU partitions (libcfs's `cpt_distance` and `ctb_distance`): between
/// two partitions, the largest node distance between their nodes; the table's, the largest
/// between any two of its nodes. Node distances come from sysfs
/// (`/sys/devices/system/node/node<N>/distance`); a node without a row counts as the kernel
/// without NUMA counts every node: 10 to itself, 20 to another (`LOCAL_DISTANCE`,
/// `REMOTE_DISTANCE`). lustre: lib-cpt.c `cfs_cpt_distance_calculate()`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CptDistances {
    /// `between[i][j]`: from partition `i` to partition `j`.
    between: Vec<Vec<u32>>,
    widest: u32,
}

impl CptDistances {
    /// The distances for partitions on `partition_nodes` (each partition's nodes, by CPT).
    pub fn read(sysfs: &Path, partition_nodes: &[Vec<u32>]) -> Self {
        let mut all: Vec<u32> = partition_nodes.iter().flatten().copied().collect();
        all.sort_unstable();
        all.dedup();
        let rows: std::collections::BTreeMap<u32, _> =
            all.iter().filter_map(|&node| Some((node, distance_row(sysfs, node)?))).collect();
        let distance = |a: u32, b: u32| {
            let generic = if a == b { 10 } else { 20 };
            rows.get(&a).and_then(|row| row.get(&b).copied()).unwrap_or(generic)
        };
        let largest = |from: &[u32], to: &[u32]| -> u32 {
            let pairs = from.iter().flat_map(|&a| to.iter().map(move |&b| (a, b)));
            pairs.map(|(a, b)| distance(a, b)).max().unwrap_or(0)
        };
        let between = partition_nodes
            .iter()
            .map(|from| partition_nodes.iter().map(|to| largest(from, to)).collect())
            .collect();
        Self { between, widest: largest(&all, &all) }
    }

    /// `cfs_cpt_distance(from, to)` for two partitions of the table (0 past it).
    pub fn between(&self, from: u32, to: u32) -> u32 {
        let row = self.between.get(from as usize);
        row.and_then(|row| row.get(to as usize)).copied().unwrap_or(0)
    }

    /// `cfs_cpt_distance(cpt, dev_cpt)` from every partition `cpt`, by CPT: to `dev_cpt`, or,
    /// when that is unknown (`CFS_CPT_ANY`), the table's largest from all of them.
    pub fn to_partition(&self, dev_cpt: Option<u32>) -> Vec<u32> {
        let count = self.count() as u32;
        match dev_cpt.filter(|&cpt| cpt < count) {
            Some(device) => (0..count).map(|cpt| self.between(cpt, device)).collect(),
            None => vec![self.widest; self.count()],
        }
    }

    /// `cfs_cpt_distance()` with either partition `CFS_CPT_ANY`: the table's largest.
    pub fn widest(&self) -> u32 {
        self.widest
    }

    /// How many partitions.
    pub fn count(&self) -> usize {
        self.between.len()
    }
}

/// The NUMA node of network interface `interface`'s device (`dev_to_node()`), read under
/// `sysfs` (normally `/sys`): a VLAN's is its real device's, as `lnet_inet_enumerate()` takes
/// it. `None` for a device without one (loopback, veth, bridges, -1 without NUMA).
pub fn device_node(sysfs: &Path, interface: &str) -> Option<u32> {
    let class = sysfs.join("class/net");
    // An IPv4 alias (`eth0:1`, getifaddrs's name for a labelled address) is its device's.
    let device_name = interface.split(':').next().unwrap_or(interface);
    let device = class.join(directory_entry(device_name)?);
    let device = if is_vlan(&device) { class.join(vlan_real_device(&device)?) } else { device };
    let node = read(&device.join("device/numa_node"))?;
    node.trim().parse::<u32>().ok().filter(|&node| node < MAX_NODES)
}

/// Node ids past this are not believed (the kernel's `MAX_NUMNODES` is at most 1024).
const MAX_NODES: u32 = 1024;

/// `name` when it can only name an entry of a directory: a slash or a dot path would leave
/// /sys/class/net.
fn directory_entry(name: &str) -> Option<&str> {
    (!name.is_empty() && !name.contains('/') && !name.starts_with('.')).then_some(name)
}

/// A VLAN device says so in its `uevent` (`DEVTYPE=vlan`).
fn is_vlan(device: &Path) -> bool {
    read(&device.join("uevent"))
        .is_some_and(|text| text.lines().any(|line| line.trim() == "DEVTYPE=vlan"))
}

/// The device a VLAN sits on (`vlan_dev_real_dev()`): its directory's `lower_<name>` link.
fn vlan_real_device(device: &Path) -> Option<String> {
    let entries = std::fs::read_dir(device).ok()?;
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().into_string().ok())
        .find_map(|name| name.strip_prefix("lower_").and_then(directory_entry).map(str::to_string))
}

/// The NUMA node of `cpu`: the `nodeN` entry in its sysfs directory.
fn cpu_node(sysfs: &Path, cpu: usize) -> Option<usize> {
    let entries = std::fs::read_dir(sysfs.join(format!("devices/system/cpu/cpu{cpu}"))).ok()?;
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.strip_prefix("node")?.parse().ok())
        .next()
}

fn current_cpu() -> Option<usize> {
    Some(rustix::thread::sched_getcpu())
}

fn read(path: &Path) -> Option<String> {
    use std::io::Read;
    let file = std::fs::File::open(path).ok()?;
    let mut text = String::new();
    file.take(MAX_ATTRIBUTE_LEN).read_to_string(&mut text).ok()?;
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake sysfs: two nodes 10/21 apart, CPU 0 on node 0, CPU 1 on node 1, `eth1` on node
    /// 1, `veth0` without a device, `eth9` on node -1.
    fn fake_sysfs(tag: &str) -> std::path::PathBuf {
        let root = std::env::temp_dir().join(format!("ulnet-numa-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let write = |path: &str, text: &str| {
            let path = root.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        write("devices/system/node/node0/distance", "10 21\n");
        write("devices/system/node/node1/distance", "21 10\n");
        write("devices/system/cpu/cpu0/node0/cpulist", "0\n");
        write("devices/system/cpu/cpu1/node1/cpulist", "1\n");
        write("class/net/eth1/device/numa_node", "1\n");
        write("class/net/eth9/device/numa_node", "-1\n");
        std::fs::create_dir_all(root.join("class/net/veth0")).unwrap();
        write("class/net/eth1.100/uevent", "DEVTYPE=vlan\nINTERFACE=eth1.100\n");
        write("class/net/eth1.100/lower_eth1/uevent", "INTERFACE=eth1\n");
        write("device/numa_node", "0\n");
        root
    }

    /// The kernel's `cfs_cpt_distance(cpt, ni_dev_cpt)` from every partition.
    #[test]
    fn distances_from_each_partition_are_the_kernels() {
        let sysfs = fake_sysfs("partitions");
        let distances = |interface: &str, nodes: &[Vec<u32>]| {
            let table = CptDistances::read(&sysfs, nodes);
            table.to_partition(device_partition(&sysfs, interface, nodes))
        };
        let one_each = [vec![0], vec![1]];
        assert_eq!(distances("eth1", &one_each), [21, 10]);
        // A device with no node: the table's largest, from everywhere.
        assert_eq!(distances("eth9", &one_each), [21, 21]);
        assert_eq!(distances("veth0", &one_each), [21, 21]);
        // The device's partition spans both nodes: the largest pair counts.
        let spanning = [vec![0], vec![0, 1]];
        assert_eq!(distances("eth1", &spanning), [21, 21]);
        // The partition the configuration gave wins over the first holding the node.
        assert_eq!(CptDistances::read(&sysfs, &spanning).to_partition(Some(0)), [10, 21]);
        // A device on a node no partition holds is unknown: the table's largest is node 0's
        // distance to itself.
        let node0 = [vec![0], vec![0]];
        assert_eq!(distances("eth1", &node0), [10, 10]);
        // Node 3 has no distance row: the kernel's generic 10 to itself, 20 to another.
        let table = CptDistances::read(&sysfs, &[vec![0], vec![3]]);
        assert_eq!((table.between(0, 1), table.between(1, 1), table.widest()), (20, 10, 20));
        assert_eq!((table.between(0, 0), table.between(5, 0), table.count()), (10, 0, 2));
        std::fs::remove_dir_all(sysfs).unwrap();
    }

    #[test]
    fn a_vlan_is_on_its_real_devices_node() {
        let sysfs = fake_sysfs("vlan");
        assert_eq!(device_node(&sysfs, "eth1"), Some(1));
        assert_eq!(device_node(&sysfs, "eth1.100"), Some(1));
        assert_eq!(interface_distance(&sysfs, "eth1.100", Some(0)), Some(21));
        // No device, -1, no such interface, and a name reaching for sysfs's root.
        assert_eq!(device_node(&sysfs, "eth1:1"), Some(1), "an alias is its device's");
        for name in ["veth0", "eth9", "eth7", "..", "../.."] {
            assert_eq!(device_node(&sysfs, name), None, "{name}");
        }
        std::fs::remove_dir_all(sysfs).unwrap();
    }

    #[test]
    fn distance_is_read_from_the_node_table() {
        let sysfs = fake_sysfs("table");
        assert_eq!(interface_distance(&sysfs, "eth1", Some(0)), Some(21));
        assert_eq!(interface_distance(&sysfs, "eth1", Some(1)), Some(10));
        std::fs::remove_dir_all(sysfs).unwrap();
    }

    #[test]
    fn unknown_parts_give_no_distance() {
        let sysfs = fake_sysfs("unknown");
        // No device (virtual interface), no NUMA (-1), no such interface: as far as the
        // farthest node, never nearer than a known device.
        for name in ["veth0", "eth9", "eth7", "../eth1", ""] {
            assert_eq!(interface_distance(&sysfs, name, Some(0)), Some(21), "{name}");
        }
        // No such CPU: nothing is known.
        assert_eq!(interface_distance(&sysfs, "eth1", Some(5)), None);
        std::fs::remove_dir_all(sysfs).unwrap();
    }

    /// Distance rows list the online nodes in order, whatever their ids: with nodes 0 and 8
    /// online, node 0's row "10 21" gives 21 to node 8.
    #[test]
    fn distance_rows_follow_the_online_nodes() {
        let sysfs = fake_sysfs("gaps");
        let write = |path: &str, text: &str| {
            let path = sysfs.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        write("devices/system/node/online", "0,8\n");
        write("devices/system/node/node8/distance", "21 10\n");
        write("class/net/eth8/device/numa_node", "8\n");
        assert_eq!(interface_distance(&sysfs, "eth8", Some(0)), Some(21));
        let table = CptDistances::read(&sysfs, &[vec![0], vec![8]]);
        assert_eq!((table.between(0, 1), table.between(1, 1)), (21, 10));
        assert_eq!(node_list("0-2,8"), Some(vec![0, 1, 2, 8]));
        assert_eq!(node_list("9-2"), None);
        std::fs::remove_dir_all(sysfs).unwrap();
    }
}
