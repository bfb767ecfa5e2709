//! The kernel's examples (Documentation/man4/cpu_pattern.4 and the seeds' KNL pattern) and
//! every refusal of `cfs_cpt_table_create_pattern()`, each worked by hand from lib-cpt.c.

use super::*;

/// `nodes` NUMA nodes of `per_node` CPUs, numbered node by node, two hyperthreads per core
/// with adjacent ids when `ht`.
fn machine(nodes: u32, per_node: u32, ht: bool) -> Topology {
    let cpus = (0..nodes * per_node).map(|id| Cpu {
        id,
        node: id / per_node,
        package: id / per_node,
        core: if ht { id / 2 } else { id },
    });
    Topology::new(cpus, 0..nodes, nodes * per_node, nodes).unwrap()
}

fn table(pattern: &str, npartitions: i32, topo: &Topology) -> String {
    build(pattern, npartitions, topo).unwrap_or_else(|e| panic!("{pattern}: {e}")).render()
}

fn refused(pattern: &str, npartitions: i32, topo: &Topology) -> (i32, String) {
    let e = build(pattern, npartitions, topo).expect_err(pattern);
    (e.rc, e.message)
}

#[test]
fn empty_pattern_gives_the_estimated_layout() {
    // 16 CPUs, 2 threads a core: 16 > 2 × 2 × n until n = 4; 4 divides 16.
    let topo = machine(1, 16, true);
    assert_eq!(estimate_partitions(&topo), 4);
    assert_eq!(
        table("", 0, &topo),
        "0\t: 0 1 2 3\n1\t: 4 5 6 7\n2\t: 8 9 10 11\n3\t: 12 13 14 15\n"
    );
}

#[test]
fn npartitions_splits_cpus_as_evenly_as_possible() {
    // num = 5, rem = 1: the first partition takes 6 CPUs (three whole cores), the second 5
    // (two cores and half of the third), the third the 5 left.
    let topo = machine(1, 16, true);
    assert_eq!(table("", 3, &topo), "0\t: 0 1 2 3 4 5\n1\t: 6 7 8 9 10\n2\t: 11 12 13 14 15\n");
}

#[test]
fn layout_spans_nodes_when_the_count_does_not_match() {
    // 2 nodes of 4, 3 partitions: num = 2, rem = 2. Node 0 fills CPT 0 with 3 CPUs and
    // starts CPT 1 with CPU 3; node 1 completes CPT 1 (4, 5) and fills CPT 2 (6, 7).
    let topo = machine(2, 4, false);
    assert_eq!(table("", 3, &topo), "0\t: 0 1 2\n1\t: 3 4 5\n2\t: 6 7\n");
}

#[test]
fn n_gives_one_partition_per_numa_node() {
    let topo = machine(4, 4, false);
    assert_eq!(
        table("N", 0, &topo),
        "0\t: 0 1 2 3\n1\t: 4 5 6 7\n2\t: 8 9 10 11\n3\t: 12 13 14 15\n"
    );
    assert_eq!(table("n", 0, &topo), table("N", 0, &topo));
    // A non-zero cpu_npartitions with a bare "N" takes the generic layout.
    assert_eq!(table("N", 2, &topo), "0\t: 0 1 2 3 4 5 6 7\n1\t: 8 9 10 11 12 13 14 15\n");
}

#[test]
fn n_on_one_node_is_one_partition() {
    assert_eq!(table("N", 0, &machine(1, 2, false)), "0\t: 0 1\n");
    assert_eq!(build("N", 0, &machine(1, 16, true)).unwrap().count(), 1);
}

/// A NUMA pattern has one partition per node with CPUs unless cpu_npartitions says otherwise
/// (lib-cpt.c counts nodes, not brackets, for "N" patterns): the man page's
/// `N 0[0,1] 1[2-3]` needs `cpu_npartitions=2` on a four-node machine.
#[test]
fn numa_pattern_groups_nodes() {
    let topo = machine(4, 4, false);
    assert_eq!(
        table("N 0[0,1] 1[2-3]", 2, &topo),
        "0\t: 0 1 2 3 4 5 6 7\n1\t: 8 9 10 11 12 13 14 15\n"
    );
    assert_eq!(
        refused("N 0[0,1] 1[2-3]", 0, &topo),
        (-22, "Expect 4 partitions but found 2".into())
    );
    assert_eq!(table("N 0[1] 1[0]", 0, &machine(2, 2, false)), "0\t: 2 3\n1\t: 0 1\n");
}

#[test]
fn cpu_lists_with_ranges_and_strides() {
    let topo = machine(1, 16, false);
    assert_eq!(table("0[0-3] 1[4,5,7]", 0, &topo), "0\t: 0 1 2 3\n1\t: 4 5 7\n");
    assert_eq!(table("0[0-15/2] 1[1-15/2]", 0, &topo).lines().count(), 2);
    assert_eq!(table(" 1[8-9]  0[0x2]  ", 0, &topo), "0\t: 2\n1\t: 8 9\n");
}

/// The many-core seed's pattern on a 72-CPU node: CPUs 16, 17 and 66-71 are left out.
#[test]
fn the_seeds_knl_pattern() {
    let topo = machine(1, 72, false);
    let t = build("0[0-15] 1[18-33] 2[34-49] 3[50-65]", 0, &topo).unwrap();
    assert_eq!(t.count(), 4);
    for (cpt, first) in [(0, 0), (1, 18), (2, 34), (3, 50)] {
        let cpus: Vec<u32> = t.cpus(cpt).unwrap().iter().copied().collect();
        assert_eq!(cpus, (first..first + 16).collect::<Vec<_>>());
    }
    assert_eq!(t.cpt_of_cpu(16), None);
    assert_eq!(t.cpt_of_cpu(20), Some(1));
}

#[test]
fn exclusions() {
    // "N C[0,1]": per node, drop the CPUs 0 and 1 past the node's first id.
    let topo = machine(4, 4, false);
    assert_eq!(table("N C[0,1]", 0, &topo), "0\t: 2 3\n1\t: 6 7\n2\t: 10 11\n3\t: 14 15\n");
    // "X[0]" with 3 partitions: the 3-way layout, then CPU 0 removed.
    let topo = machine(1, 16, true);
    assert_eq!(table("X[0]", 3, &topo), "0\t: 1 2 3 4 5\n1\t: 6 7 8 9 10\n2\t: 11 12 13 14 15\n");
    // "C[0]" alone: one partition (one bracket), its first CPU dropped.
    assert_eq!(table("C[0]", 0, &topo), "0\t: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15\n");
}

/// Kept from lib-cpt.c: without "N" a relative exclusion leaves the range bound at 0, so the
/// man page's `C[0,1]` is refused by the kernel it documents.
#[test]
fn relative_exclusion_without_n_only_accepts_zero() {
    let topo = machine(1, 16, true);
    assert_eq!(refused("C[0,1]", 4, &topo), (-34, "Can't parse number range in '[0,1]'".into()));
}

#[test]
fn refusals_carry_the_kernels_messages() {
    let topo = machine(1, 16, false);
    let cases: &[(&str, i32, i32, &str)] = &[
        ("garbage", 0, -22, "Invalid pattern 'garbage', or too many partitions 0"),
        ("0[0-3] 0[4-7]", 0, -1, "Partition 0 has already been set."),
        ("0[0-3] 2[4-7]", 0, -22, "Invalid partition id 2, total partitions 2"),
        ("0[0-3] -1[4-7]", 0, -22, "Invalid partition id -1, total partitions 2"),
        ("0[0-3] 1[4-7", 0, -22, "Missing right bracket for partition 1 in '[4-7'"),
        ("0[0-3] 1 x[4]", 0, -22, "Invalid pattern 'x[4]' does not start with '['"),
        ("a[0]", 0, -22, "Invalid CPU pattern 'a[0]'"),
        ("0[0-3] junk", 0, -22, "Invalid pattern 'junk'"),
        ("0[16]", 0, -34, "Can't parse number range in '[16]'"),
        ("0[0-3] 1[]", 0, -34, "Can't parse number range in '[]'"),
        ("0[3-1]", 0, -34, "Can't parse number range in '[3-1]'"),
        ("0[0-3]", 2, -22, "Expect 2 partitions but found 1"),
        ("X[0-15]", 0, -19, "All cores are excluded on partition 0: rc=19"),
        (
            "0[0-3] 1[3-5]",
            0,
            -22,
            "Failed to create cptab from pattern '0[0-3] 1[3-5]': CPU 3 is invalid, offline \
             or already in a partition",
        ),
    ];
    for &(pattern, npartitions, rc, message) in cases {
        assert_eq!(refused(pattern, npartitions, &topo), (rc, message.to_string()), "{pattern}");
    }
    assert_eq!(
        refused("0[0] 1[1] 2[2]", 0, &machine(1, 2, false)),
        (-22, "Invalid pattern '0[0] 1[1] 2[2]', or too many partitions 3".into())
    );
    assert_eq!(
        refused("N 0[0] 1[1]", 0, &machine(1, 4, false)),
        (-22, "Invalid partition id 1, total partitions 1".into())
    );
    assert_eq!(
        refused("", 17, &topo),
        (-22, "libcfs: CPU partition count 17 > cores 16: rc = -22".into())
    );
    assert_eq!(refused("0[0]", -1, &topo).0, -12, "a negative count fails to allocate");
}

#[test]
fn a_node_without_cpus_gives_an_offline_partition() {
    // Node 1 is online but has no CPUs (memory only).
    let cpus = (0..4).map(|id| Cpu { id, node: 0, package: 0, core: id });
    let topo = Topology::new(cpus, [0, 1], 4, 2).unwrap();
    assert_eq!(refused("N 0[1]", 0, &topo), (-19, "No online CPU is found on partition 0".into()));
    assert_eq!(table("N", 0, &topo), "0\t: 0 1 2 3\n", "N skips the empty node");
}

#[test]
fn estimates() {
    for (cpus, ht, expected) in [
        (2, false, 1),
        (4, false, 1),
        (6, false, 3),
        (7, false, 1),
        (10, false, 5),
        (12, true, 3),
        (66, false, 33),
    ] {
        assert_eq!(estimate_partitions(&machine(1, cpus, ht)), expected, "{cpus} CPUs");
    }
    // 7 CPUs estimate 1 partition; 5 is more than 4 times that.
    let big = build("", 5, &machine(1, 7, false)).unwrap();
    assert!(
        big.warning()
            .unwrap()
            .starts_with("CPU partition number 5 is larger than suggested value (1)")
    );
    assert_eq!(build("", 4, &machine(1, 7, false)).unwrap().warning(), None);
}

#[test]
fn cpulists() {
    assert_eq!(
        parse_cpulist("0-3,8,10-11\n").unwrap().into_iter().collect::<Vec<_>>(),
        [0, 1, 2, 3, 8, 10, 11]
    );
    assert_eq!(parse_cpulist("").unwrap().len(), 0);
    assert_eq!(parse_cpulist("3-1"), None);
    assert_eq!(parse_cpulist("0-9000"), None);
    assert_eq!(parse_cpulist("a"), None);
}

#[test]
fn topology_is_checked() {
    let cpu = Cpu { id: 0, node: 1, package: 0, core: 0 };
    assert_eq!(
        Topology::new([cpu], [0], 1, 1),
        Err(TopologyError::NodeOffline { cpu: 0, node: 1 })
    );
    assert_eq!(Topology::new([], [0], 1, 1), Err(TopologyError::NoCpu));
    assert_eq!(build(&"0[0]".repeat(2000), 0, &machine(1, 2, false)).unwrap_err().rc, -22);
}

/// Each partition's nodes, and the CPTs an NI with no CPTs binds to when its device sits on
/// `node` (lnet_ni_set_default_cpts() over ctb_node2cpt and the partitions' nodemasks).
fn local_cpts(t: &CptTable, node: u32) -> Option<Vec<u32>> {
    t.device_local_cpts(t.cpt_of_node(node))
}

#[test]
fn a_device_binds_to_the_partitions_of_its_node() {
    // "N" on four nodes: one partition a node, a device on node 2 binds to CPT 2 alone.
    let t = build("N", 0, &machine(4, 4, false)).unwrap();
    assert_eq!(t.cpt_of_node(2), Some(2));
    assert_eq!(local_cpts(&t, 2), Some(vec![2]));
    // Two partitions a node (the generic layout fills node by node): both of node 1's.
    let t = build("", 4, &machine(2, 4, false)).unwrap();
    assert_eq!(t.render(), "0\t: 0 1\n1\t: 2 3\n2\t: 4 5\n3\t: 6 7\n");
    assert_eq!(t.cpt_of_node(1), Some(2));
    assert_eq!(local_cpts(&t, 1), Some(vec![2, 3]));
    // A partition spanning two nodes: 3 partitions over 2 nodes of 4 (0 1 2 | 3 4 5 | 6 7).
    // Node 0's devices are on CPT 0 and bind to CPTs 0 and 1 (which shares node 0). Node 1's
    // devices are on CPT 1, its first partition, and the kernel matches CPT 1's nodes (0 and
    // 1), which every partition shares: they stay on all.
    let t = build("", 3, &machine(2, 4, false)).unwrap();
    assert_eq!(t.nodes(1).map(|n| n.iter().copied().collect::<Vec<_>>()), Some(vec![0, 1]));
    assert_eq!((t.cpt_of_node(0), local_cpts(&t, 0)), (Some(0), Some(vec![0, 1])));
    assert_eq!((t.cpt_of_node(1), local_cpts(&t, 1)), (Some(1), None));
}

#[test]
fn a_device_whose_node_covers_every_partition_binds_to_all() {
    // One node: every partition is local, so the NI stays on all of them.
    let t = build("", 4, &machine(1, 16, true)).unwrap();
    assert_eq!((t.cpt_of_node(0), local_cpts(&t, 0)), (Some(0), None));
    // "N 0[0,1] 1[2-3]": both partitions span two nodes each, disjoint from the other's.
    let t = build("N 0[0,1] 1[2-3]", 2, &machine(4, 4, false)).unwrap();
    assert_eq!((t.cpt_of_node(1), local_cpts(&t, 1)), (Some(0), Some(vec![0])));
    assert_eq!((t.cpt_of_node(3), local_cpts(&t, 3)), (Some(1), Some(vec![1])));
    // A device with no node (veth, bridges, a VM's NIC: -1), or on a node with no CPU in
    // the table: CFS_CPT_ANY, all partitions.
    assert_eq!(t.device_local_cpts(None), None);
    assert_eq!(t.cpt_of_node(7), None);
}

#[test]
fn excluded_cpus_take_their_node_along_only_when_plain() {
    // "X[4-7]": node 1's CPUs all leave CPT 1 by cfs_cpt_unset_cpu(), and the node leaves
    // the table with them; CPT 1 keeps node 0's CPU 3.
    let topo = machine(2, 4, false);
    let t = build("X[4-7]", 2, &topo);
    assert_eq!(
        t.as_ref().map(CptTable::render).map_err(|e| e.rc),
        Err(-19),
        "CPT 1 of the 2-way layout is node 1's CPUs alone, so it is left empty"
    );
    let t = build("X[3,7]", 2, &topo).unwrap();
    assert_eq!(t.render(), "0\t: 0 1 2\n1\t: 4 5 6\n");
    assert_eq!((t.cpt_of_node(1), local_cpts(&t, 1)), (Some(1), Some(vec![1])));
    // "N C[0-3]" would empty every partition; "N C[0]" uses cfs_cpt_del_cpu() alone, so each
    // node stays in its partition's nodes and still maps there.
    let t = build("N C[0]", 0, &topo).unwrap();
    assert_eq!(t.render(), "0\t: 1 2 3\n1\t: 5 6 7\n");
    assert_eq!((t.cpt_of_node(0), local_cpts(&t, 0)), (Some(0), Some(vec![0])));
}
