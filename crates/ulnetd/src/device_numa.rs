//! Where an NI's device sits: its NUMA node from sysfs, the partition that node maps to
//! (`ni_dev_cpt`, shown as `dev cpt`), and the partitions an NI configured without CPTs is
//! bound to, as the kernel's socklnd binds it at startup.
//! lustre: lib-socket.c `lnet_inet_enumerate()` (a VLAN's node is its real device's),
//! config.c `lnet_ni_set_default_cpts()`.
//!
//! A device without a NUMA node (loopback, veth, bridges, most virtual machines' NICs, a
//! kernel without NUMA) reads as unknown, and its NIs stay on every partition.

use std::path::PathBuf;

use ulnet::numa::CptDistances;
use ulnet_config::cpu_partitions::CptTable;
use ulnet_control::message::CpuPartitions;

/// The partition table's NUMA placement and where to read devices' nodes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceNuma {
    /// `None` when the topology was not read (one partition, nothing to choose).
    table: Option<CptTable>,
    /// Where sysfs is (`/sys` on a live system; tests point it at a copy).
    sysfs: PathBuf,
}

impl DeviceNuma {
    /// Placement over `table`, reading devices from the live `/sys`.
    pub fn new(table: Option<CptTable>) -> Self {
        Self { table, sysfs: PathBuf::from("/sys") }
    }

    #[cfg(test)]
    pub(crate) fn with_sysfs(table: CptTable, sysfs: &std::path::Path) -> Self {
        Self { table: Some(table), sysfs: sysfs.to_path_buf() }
    }

    /// `ni_dev_cpt` of an NI on `interface`: the partition its device's node maps to, `None`
    /// (`CFS_CPT_ANY`, printed -1) when the node is unknown or has no CPU in the table.
    pub fn dev_cpt(&self, interface: &str) -> Option<u32> {
        let table = self.table.as_ref()?;
        let node = ulnet::numa::device_node(&self.sysfs, interface)?;
        table.cpt_of_node(node).and_then(|cpt| u32::try_from(cpt).ok())
    }

    /// The partition table as lctl's `cpu_partition_table` and `cpu_partition_distance` show
    /// it. Without a table (the topology was not read), one partition on node 0 whose CPUs
    /// are not known.
    pub fn cpu_partitions(&self) -> CpuPartitions {
        let Some(table) = &self.table else {
            let distances = CptDistances::read(&self.sysfs, &[vec![0]]);
            return CpuPartitions { cpus: vec![Vec::new()], distances: matrix(&distances) };
        };
        let cpus = (0..table.count()).map(|cpt| table.cpus(cpt).into_iter().flatten());
        let cpus = cpus.map(|cpus| cpus.copied().collect()).collect();
        let distances = CptDistances::read(&self.sysfs, &self.partition_nodes());
        CpuPartitions { cpus, distances: matrix(&distances) }
    }

    /// Each partition's NUMA nodes, by CPT (empty when the table is unknown).
    pub fn partition_nodes(&self) -> Vec<Vec<u32>> {
        let Some(table) = &self.table else { return Vec::new() };
        let nodes = (0..table.count()).map(|cpt| table.nodes(cpt).into_iter().flatten());
        nodes.map(|nodes| nodes.copied().collect()).collect()
    }

    /// The partitions an NI configured without CPTs is bound to when its device is on
    /// `dev_cpt`; `None` for all of them.
    pub fn default_cpts(&self, dev_cpt: Option<u32>) -> Option<Vec<u32>> {
        let dev_cpt = usize::try_from(dev_cpt?).ok();
        self.table.as_ref()?.device_local_cpts(dev_cpt)
    }
}

/// `distances` as rows, by CPT.
fn matrix(distances: &CptDistances) -> Vec<Vec<u32>> {
    let count = distances.count() as u32;
    (0..count).map(|from| (0..count).map(|to| distances.between(from, to)).collect()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nets::{NetSpec, NiSpec, SocklndTunables, bind_cpts};
    use ulnet_config::cpu_partitions::{Cpu, Topology, build};
    use ulnet_proto::addr::Net;
    use ulnet_proto::engine::cpt::Partitions;

    /// Two nodes of four CPUs, four partitions (two a node).
    fn two_nodes() -> CptTable {
        let cpus = (0..8).map(|id| Cpu { id, node: id / 4, package: id / 4, core: id });
        build("", 4, &Topology::new(cpus, [0, 1], 8, 2).unwrap()).unwrap()
    }

    /// eth1 on node 1, its VLAN eth1.100, eth0 whose firmware gave no node (-1), veth0 with no
    /// device: an NI given no CPTs binds near its device, one given CPTs keeps them, one on a
    /// device with no node stays on all; each shows its device's partition.
    #[test]
    fn nis_given_no_cpts_bind_near_their_devices() {
        let sysfs = std::env::temp_dir().join(format!("ulnetd-numa-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&sysfs);
        let write = |path: &str, text: &str| {
            let path = sysfs.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        write("class/net/eth0/device/numa_node", "-1\n");
        write("class/net/eth1/device/numa_node", "1\n");
        write("class/net/eth1.100/uevent", "DEVTYPE=vlan\nINTERFACE=eth1.100\n");
        write("class/net/eth1.100/lower_eth1/uevent", "INTERFACE=eth1\n");
        write("class/net/veth0/uevent", "INTERFACE=veth0\n");
        let numa = DeviceNuma::with_sysfs(two_nodes(), &sysfs);
        assert_eq!(numa.dev_cpt("eth1"), Some(2));
        assert_eq!(numa.default_cpts(numa.dev_cpt("eth1.100")), Some(vec![2, 3]));
        assert_eq!(numa.dev_cpt("eth0"), None);
        // Without a table (topology unread), nothing is known.
        assert_eq!(DeviceNuma::new(None).default_cpts(Some(2)), None);

        let ni = |interface: &str, cpts: Option<Vec<u32>>| NiSpec {
            cpts,
            ..NiSpec::new("10.0.0.1@tcp".parse().unwrap(), Some(interface.into()))
        };
        let mut nets = [NetSpec {
            net: Net::TCP,
            nis: vec![
                ni("eth1", None),
                ni("eth1.100", Some(vec![0])),
                ni("veth0", None),
                ni("eth0", None),
            ],
            tunables: ulnet::NetTunables::SOCKLND,
            socklnd: SocklndTunables::default(),
        }];
        bind_cpts(&mut nets, Partitions::new(4).unwrap(), &numa).unwrap();
        let bound: Vec<_> = nets[0].nis.iter().map(|ni| (ni.cpts.clone(), ni.dev_cpt)).collect();
        assert_eq!(
            bound,
            [(Some(vec![2, 3]), Some(2)), (Some(vec![0]), Some(2)), (None, None), (None, None)]
        );
        std::fs::remove_dir_all(&sysfs).unwrap();
    }
}
