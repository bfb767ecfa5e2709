//! The CPU partition table the kernel builds from libcfs's `cpu_pattern` and `cpu_npartitions`
//! over the machine's topology: the pattern grammar (CPU lists `0[0-15] 1[18-33]`, NUMA lists
//! `N 0[0] 1[1]`, exclusions `X[...]` and `C[...]`), the default layout and its estimate, and
//! the kernel's console messages for every refusal (docs/protocol/semantics.md §7.1).
//!
//! Pure: the topology comes in as a [`Topology`] (ulnetd reads it from sysfs), so every case
//! is a unit test. The kernel's quirks are kept, each where it happens, so that a modprobe.d
//! file gives the partitions it gives a kernel node.
//!
//! lustre: lnet/lnet/lib-cpt.c `cfs_cpt_table_create_pattern()`, `cfs_cpt_table_create()`,
//! `cfs_cpt_num_estimate()`, `cfs_cpt_choose_ncpus()`, `cfs_cpt_set_cpu()`,
//! `cfs_cpt_set_node()`, `cfs_unset_node_core()`, `cfs_unset_cpt_core()`, `cfs_cpu_init()`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::grammar::ExprList;

#[cfg(test)]
mod tests;

/// The kernel's default `cpu_pattern`: one partition per NUMA node with CPUs.
pub const DEFAULT_CPU_PATTERN: &str = "N";

/// Longest `cpu_pattern` accepted (a modprobe.d value; the kernel bounds none, a page is
/// generous for 256 partitions).
pub const MAX_PATTERN_LEN: usize = 4096;

/// Most CPUs and NUMA nodes a topology may describe (the kernel's `NR_CPUS` maximum is 8192).
pub const MAX_CPUS: u32 = 8192;

/// Most partitions (`LNET_CPT_MAX_BITS` is 8).
pub const MAX_PARTITIONS: usize = 256;

/// `CPT_WEIGHT_MIN`: machines with at most this many CPUs get one partition by default.
const CPT_WEIGHT_MIN: usize = 4;

/// Negative errnos the kernel returns.
const EPERM: i32 = -1;
const ENOMEM: i32 = -12;
const ENODEV: i32 = -19;
const EINVAL: i32 = -22;
const ERANGE: i32 = -34;

/// One online CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cpu {
    pub id: u32,
    /// Its NUMA node (`cpu_to_node()`).
    pub node: u32,
    /// `topology/physical_package_id`: CPUs sharing it are one socket (`topology_core_cpumask`).
    pub package: u32,
    /// `topology/core_id` within the package: CPUs sharing both are hyperthreads of one core
    /// (`topology_sibling_cpumask`).
    pub core: u32,
}

/// What the kernel consults: the online CPUs, the online NUMA nodes, and the id limits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    cpus: BTreeMap<u32, Cpu>,
    online_nodes: BTreeSet<u32>,
    /// `nr_cpu_ids`: one more than the highest possible CPU id.
    nr_cpu_ids: u32,
    /// `nr_node_ids`: one more than the highest possible node id.
    nr_node_ids: u32,
    /// `num_possible_cpus()`.
    possible_cpus: u32,
}

/// Why a topology description was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TopologyError {
    #[error("no online CPU")]
    NoCpu,
    #[error("CPU {0} is listed twice")]
    DuplicateCpu(u32),
    #[error("CPU or node id {0} is past the limit of {MAX_CPUS}")]
    TooLarge(u32),
    #[error("CPU {cpu} is on node {node}, which is not online")]
    NodeOffline { cpu: u32, node: u32 },
}

impl Topology {
    /// `possible_cpus` and `possible_nodes` are the counts of the kernel's `possible` masks
    /// (ids are assumed dense below them, as sysfs lists them on every machine Lustre runs on);
    /// each is raised to cover the ids actually seen.
    pub fn new(
        cpus: impl IntoIterator<Item = Cpu>,
        online_nodes: impl IntoIterator<Item = u32>,
        possible_cpus: u32,
        possible_nodes: u32,
    ) -> Result<Self, TopologyError> {
        let online_nodes: BTreeSet<u32> = online_nodes.into_iter().collect();
        let mut map = BTreeMap::new();
        for cpu in cpus {
            if cpu.id >= MAX_CPUS || cpu.node >= MAX_CPUS {
                return Err(TopologyError::TooLarge(cpu.id.max(cpu.node)));
            }
            if !online_nodes.contains(&cpu.node) {
                return Err(TopologyError::NodeOffline { cpu: cpu.id, node: cpu.node });
            }
            if map.insert(cpu.id, cpu).is_some() {
                return Err(TopologyError::DuplicateCpu(cpu.id));
            }
        }
        let highest_cpu = *map.keys().next_back().ok_or(TopologyError::NoCpu)?;
        if let Some(&node) = online_nodes.iter().find(|&&node| node >= MAX_CPUS) {
            return Err(TopologyError::TooLarge(node));
        }
        let highest_node = online_nodes.iter().next_back().copied().unwrap_or(0);
        let nr_cpu_ids = possible_cpus.clamp(highest_cpu + 1, MAX_CPUS);
        Ok(Self {
            cpus: map,
            online_nodes,
            nr_cpu_ids,
            nr_node_ids: possible_nodes.clamp(highest_node + 1, MAX_CPUS),
            possible_cpus: nr_cpu_ids,
        })
    }

    /// `n` CPUs on one node, one thread per core, one socket: what tests and machines without
    /// a readable topology use.
    pub fn uniform(n: u32) -> Result<Self, TopologyError> {
        let cpus = (0..n).map(|id| Cpu { id, node: 0, package: 0, core: id });
        Self::new(cpus, [0], n, 1)
    }

    pub fn online_cpus(&self) -> usize {
        self.cpus.len()
    }

    pub fn online_nodes(&self) -> usize {
        self.online_nodes.len()
    }

    fn is_online(&self, cpu: u32) -> bool {
        self.cpus.contains_key(&cpu)
    }

    /// `cpumask_of_node()`, restricted to online CPUs.
    fn cpus_of_node(&self, node: u32) -> BTreeSet<u32> {
        self.cpus.values().filter(|cpu| cpu.node == node).map(|cpu| cpu.id).collect()
    }

    /// Online nodes that have CPUs, in id order (`for_each_online_node` skipping empty masks).
    fn nodes_with_cpus(&self) -> impl Iterator<Item = u32> + '_ {
        self.online_nodes.iter().copied().filter(|&node| !self.cpus_of_node(node).is_empty())
    }

    /// `topology_sibling_cpumask()`: the hyperthreads of `cpu`'s core.
    fn siblings(&self, cpu: u32) -> BTreeSet<u32> {
        let Some(me) = self.cpus.get(&cpu) else { return BTreeSet::new() };
        self.cpus
            .values()
            .filter(|c| c.package == me.package && c.core == me.core)
            .map(|c| c.id)
            .collect()
    }

    /// `topology_core_cpumask()`: the CPUs of `cpu`'s socket.
    fn socket(&self, cpu: u32) -> BTreeSet<u32> {
        let Some(me) = self.cpus.get(&cpu) else { return BTreeSet::new() };
        self.cpus.values().filter(|c| c.package == me.package).map(|c| c.id).collect()
    }
}

/// Why the kernel would refuse to build the table: its console message and return code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CptTableError {
    /// The kernel's `CERROR` text, without the trailing newline.
    pub message: String,
    /// The negative errno `cfs_cpu_init()` would see.
    pub rc: i32,
}

impl CptTableError {
    fn new(rc: i32, message: String) -> Self {
        Self { message, rc }
    }
}

impl fmt::Display for CptTableError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CptTableError {}

/// A built partition table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CptTable {
    /// Each partition's CPUs, ascending (a cpumask).
    parts: Vec<BTreeSet<u32>>,
    /// `ctb_cpu2cpt`: the partition a CPU was last added to.
    cpu2cpt: BTreeMap<u32, usize>,
    /// Each partition's NUMA nodes (`cpt_nodemask`): those of the CPUs placed in it.
    nodes: Vec<BTreeSet<u32>>,
    /// `ctb_node2cpt`: the partition a node was first added to, for the nodes in the table.
    node2cpt: BTreeMap<u32, usize>,
    /// The kernel's `CWARN` when the count is far above the estimate.
    warning: Option<String>,
}

impl CptTable {
    fn alloc(ncpt: usize) -> Result<Self, CptTableError> {
        if ncpt == 0 || ncpt > MAX_PARTITIONS {
            return Err(CptTableError::new(
                ENOMEM,
                "Failed to allocate CPU partition table".to_string(),
            ));
        }
        Ok(Self {
            parts: vec![BTreeSet::new(); ncpt],
            cpu2cpt: BTreeMap::new(),
            nodes: vec![BTreeSet::new(); ncpt],
            node2cpt: BTreeMap::new(),
            warning: None,
        })
    }

    /// `cfs_cpt_number()`.
    pub fn count(&self) -> usize {
        self.parts.len()
    }

    /// One partition's CPUs, ascending.
    pub fn cpus(&self, cpt: usize) -> Option<&BTreeSet<u32>> {
        self.parts.get(cpt)
    }

    pub fn warning(&self) -> Option<&str> {
        self.warning.as_deref()
    }

    /// `cfs_cpt_of_cpu()`.
    pub fn cpt_of_cpu(&self, cpu: u32) -> Option<usize> {
        self.cpu2cpt.get(&cpu).copied()
    }

    /// `cfs_cpt_of_node()`: the partition a device on `node` belongs to; `None` (the
    /// kernel's `CFS_CPT_ANY`) for a node with no CPU in the table.
    pub fn cpt_of_node(&self, node: u32) -> Option<usize> {
        self.node2cpt.get(&node).copied()
    }

    /// One partition's NUMA nodes (`cfs_cpt_nodemask()`).
    pub fn nodes(&self, cpt: usize) -> Option<&BTreeSet<u32>> {
        self.nodes.get(cpt)
    }

    /// The partitions an NI configured without CPTs is bound to when its device is on
    /// partition `dev_cpt`: every partition sharing a NUMA node with it. `None` binds it to
    /// all of them, as when the device's partition is unknown or its nodes span the table
    /// (a one-node machine). lustre: config.c `lnet_ni_set_default_cpts()`.
    pub fn device_local_cpts(&self, dev_cpt: Option<usize>) -> Option<Vec<u32>> {
        let device_nodes = self.nodes.get(dev_cpt?)?;
        let local: Vec<u32> = (0..self.parts.len())
            .filter(|&cpt| self.nodes.get(cpt).is_some_and(|n| !n.is_disjoint(device_nodes)))
            .filter_map(|cpt| u32::try_from(cpt).ok())
            .collect();
        (!local.is_empty() && local.len() < self.parts.len()).then_some(local)
    }

    /// `cfs_cpt_add_node()`: a node's first partition is the one devices on it map to.
    fn add_node(&mut self, cpt: usize, node: u32) {
        if let Some(nodes) = self.nodes.get_mut(cpt) {
            self.node2cpt.entry(node).or_insert(cpt);
            nodes.insert(node);
        }
    }

    /// `cfs_cpt_del_node()`: after `cpt` lost a CPU of `node`, the node leaves the partition
    /// when none of its CPUs is left there (its devices then map to the last partition still
    /// holding it), and leaves the table when none is left anywhere.
    fn del_node(&mut self, topo: &Topology, cpt: usize, node: u32) {
        let on_node = |cpu: &u32| topo.cpus.get(cpu).is_some_and(|c| c.node == node);
        let Some(part) = self.parts.get(cpt) else { return };
        if !part.iter().any(on_node) && self.nodes.get(cpt).is_some_and(|n| n.contains(&node)) {
            if let Some(nodes) = self.nodes.get_mut(cpt) {
                nodes.remove(&node);
            }
            if let Some(last) = self.nodes.iter().rposition(|nodes| nodes.contains(&node)) {
                self.node2cpt.insert(node, last);
            }
        }
        if !self.cpu2cpt.keys().any(on_node) {
            self.node2cpt.remove(&node);
        }
    }

    /// `cfs_cpt_add_cpu()`: no check, the mapping follows the last partition.
    fn add_cpu(&mut self, cpt: usize, cpu: u32) {
        if let Some(part) = self.parts.get_mut(cpt) {
            self.cpu2cpt.insert(cpu, cpt);
            part.insert(cpu);
        }
    }

    /// `cfs_cpt_weight()`: how many CPUs partition `cpt` has (0 past the table).
    fn weight(&self, cpt: usize) -> usize {
        self.parts.get(cpt).map_or(0, BTreeSet::len)
    }

    /// `cfs_cpt_del_cpu()`.
    fn del_cpu(&mut self, cpt: usize, cpu: u32) {
        if let Some(part) = self.parts.get_mut(cpt) {
            part.remove(&cpu);
        }
        self.cpu2cpt.remove(&cpu);
    }

    /// `cfs_cpt_set_cpu()`: false for an offline or out-of-range CPU or one already placed.
    fn set_cpu(&mut self, topo: &Topology, cpt: usize, cpu: u32) -> bool {
        if cpu >= topo.nr_cpu_ids || !topo.is_online(cpu) || self.cpu2cpt.contains_key(&cpu) {
            return false;
        }
        self.add_cpu(cpt, cpu);
        if let Some(c) = topo.cpus.get(&cpu) {
            self.add_node(cpt, c.node);
        }
        true
    }

    /// `cfs_cpt_set_node()`: every CPU of the node, even ones already in another partition
    /// (the kernel then lists them in both masks); false only for an id past `nr_node_ids`.
    fn set_node(&mut self, topo: &Topology, cpt: usize, node: u32) -> bool {
        if node >= topo.nr_node_ids {
            return false;
        }
        for cpu in topo.cpus_of_node(node) {
            self.add_cpu(cpt, cpu);
        }
        self.add_node(cpt, node);
        true
    }

    /// `cfs_cpt_unset_cpu(CFS_CPT_ANY, cpu)`: removes it wherever it is, if anywhere, and
    /// its node from that partition when it was the node's last CPU there.
    fn unset_cpu(&mut self, topo: &Topology, cpu: u32) {
        if let Some(cpt) = self.cpt_of_cpu(cpu) {
            self.del_cpu(cpt, cpu);
            if let Some(c) = topo.cpus.get(&cpu) {
                self.del_node(topo, cpt, c.node);
            }
        }
    }

    /// `cfs_unset_node_core()`: removes CPUs whose id lies in `lo..=hi` past the first CPU id
    /// of their node (ids, not positions: a node with holes in its ids loses fewer CPUs).
    fn unset_node_core(&mut self, topo: &Topology, lo: u32, hi: u32) {
        for node in topo.online_nodes.iter().copied().collect::<Vec<_>>() {
            let cpus = topo.cpus_of_node(node);
            let Some(&offset) = cpus.first() else { continue };
            for cpu in cpus {
                // `cfs_cpt_del_cpu()` alone: the node stays in the partition's nodes.
                if lo + offset <= cpu && cpu <= hi + offset {
                    if let Some(cpt) = self.cpt_of_cpu(cpu) {
                        self.del_cpu(cpt, cpu);
                    }
                }
            }
        }
    }

    /// `cfs_unset_cpt_core()`: the same relative to the first CPU of each partition.
    fn unset_cpt_core(&mut self, lo: u32, hi: u32) {
        for cpt in 0..self.parts.len() {
            let cpus: Vec<u32> =
                self.parts.get(cpt).map(|part| part.iter().copied().collect()).unwrap_or_default();
            let Some(&offset) = cpus.first() else { continue };
            for cpu in cpus {
                if lo + offset <= cpu && cpu <= hi + offset {
                    self.del_cpu(cpt, cpu);
                }
            }
        }
    }

    /// `cfs_cpt_table_print()`: `lctl get_param cpu_partition_table`'s lines, `0\t: 0 1 2 3`.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for (cpt, cpus) in self.parts.iter().enumerate() {
            out.push_str(&format!("{cpt}\t:"));
            for cpu in cpus {
                out.push_str(&format!(" {cpu}"));
            }
            out.push('\n');
        }
        out
    }
}

/// `cfs_cpt_num_estimate()`: with more than 4 CPUs, the smallest count ≥ 2 that gives each
/// partition at most two cores' worth of threads, lowered until it divides the CPU count. The
/// "current CPU" whose siblings the kernel counts is taken as the lowest online CPU.
pub fn estimate_partitions(topo: &Topology) -> usize {
    let ncpu = topo.online_cpus();
    let first = topo.cpus.keys().next().copied().unwrap_or(0);
    let nthr = topo.siblings(first).len().max(1);
    let mut ncpt = 1;
    if ncpu > CPT_WEIGHT_MIN {
        ncpt = 2;
        while ncpu > 2 * nthr * ncpt {
            ncpt += 1;
        }
    }
    while ncpu % ncpt != 0 {
        ncpt -= 1;
    }
    ncpt
}

/// `cfs_cpu_init()`: the table for these module parameters. A non-empty pattern wins (with
/// the exceptions [`create_pattern`] keeps); an empty one lays out `npartitions` partitions.
pub fn build(pattern: &str, npartitions: i32, topo: &Topology) -> Result<CptTable, CptTableError> {
    if pattern.len() > MAX_PATTERN_LEN {
        return Err(CptTableError::new(
            EINVAL,
            format!("cpu_pattern is longer than {MAX_PATTERN_LEN} bytes"),
        ));
    }
    if pattern.is_empty() {
        create(npartitions, topo)
    } else {
        create_pattern(pattern, npartitions, topo)
    }
}

/// `cfs_cpt_table_create()`: `ncpt` partitions (the estimate when ≤ 0), filled node by node
/// with whole cores and sockets kept together where the count allows.
pub fn create(ncpt: i32, topo: &Topology) -> Result<CptTable, CptTableError> {
    let estimate = estimate_partitions(topo);
    let online = topo.online_cpus();
    let ncpt = if ncpt <= 0 { estimate } else { ncpt as usize };
    let failed = |rc: i32| {
        CptTableError::new(
            rc,
            format!(
                "Failed (rc = {rc}) to setup CPU partition table with {ncpt} partitions, \
                 online HW NUMA nodes: {}, HW CPU cores: {online}.",
                topo.online_nodes()
            ),
        )
    };
    if ncpt > online {
        return Err(CptTableError::new(
            EINVAL,
            format!("libcfs: CPU partition count {ncpt} > cores {online}: rc = {EINVAL}"),
        ));
    }
    let mut table = CptTable::alloc(ncpt).map_err(|_| failed(ENOMEM))?;
    if ncpt > 4 * estimate {
        table.warning = Some(format!(
            "CPU partition number {ncpt} is larger than suggested value ({estimate}), your \
             system may have performance issue or run out of memory while under pressure"
        ));
    }
    let num = online / ncpt;
    let mut rem = (online % ncpt) as i64;
    let mut cpt = 0;
    for node in topo.online_nodes.iter().copied() {
        let mut node_mask = topo.cpus_of_node(node);
        while cpt < ncpt && !node_mask.is_empty() {
            let have = table.weight(cpt);
            let want = usize::from(rem > 0) + num - have;
            choose_ncpus(&mut table, topo, cpt, &mut node_mask, want).map_err(failed)?;
            if table.weight(cpt) == num + usize::from(rem > 0) {
                cpt += 1;
                rem -= 1;
            }
        }
    }
    Ok(table)
}

/// `cfs_cpt_choose_ncpus()`: moves up to `number` CPUs of `node_mask` into `cpt`, a core's
/// hyperthreads together and a socket's cores before the next socket's.
fn choose_ncpus(
    table: &mut CptTable,
    topo: &Topology,
    cpt: usize,
    node_mask: &mut BTreeSet<u32>,
    mut number: usize,
) -> Result<(), i32> {
    if number >= node_mask.len() {
        while let Some(cpu) = node_mask.pop_first() {
            if topo.is_online(cpu) && !table.set_cpu(topo, cpt, cpu) {
                return Err(EINVAL);
            }
        }
        return Ok(());
    }
    while let Some(&first) = node_mask.first() {
        let mut socket_mask: BTreeSet<u32> =
            topo.socket(first).intersection(node_mask).copied().collect();
        let mut cpu = first;
        while !socket_mask.is_empty() {
            let core_mask: Vec<u32> = topo.siblings(cpu).intersection(node_mask).copied().collect();
            for i in core_mask {
                socket_mask.remove(&i);
                node_mask.remove(&i);
                if !topo.is_online(i) {
                    continue;
                }
                if !table.set_cpu(topo, cpt, i) {
                    return Err(EINVAL);
                }
                number -= 1;
                if number == 0 {
                    return Ok(());
                }
            }
            match socket_mask.first() {
                Some(&next) => cpu = next,
                None => break,
            }
        }
    }
    Ok(())
}

/// The kernel's `skip_spaces()`.
fn skip_spaces(text: &str) -> &str {
    text.trim_start_matches(|c: char| c.is_ascii_whitespace())
}

/// The kernel's `strim()`.
fn strim(text: &str) -> &str {
    text.trim_matches(|c: char| c.is_ascii_whitespace())
}

/// `sscanf(str, "%d%n")`: optional leading spaces and sign, then decimal digits. Returns the
/// value (saturated, as a huge id is refused as out of range anyway) and the bytes consumed.
fn scan_int(text: &str) -> Option<(i64, usize)> {
    let body = skip_spaces(text);
    let mut consumed = text.len() - body.len();
    let bytes = body.as_bytes();
    let mut index = 0;
    let negative = match bytes.first() {
        Some(b'-') => {
            index = 1;
            true
        }
        Some(b'+') => {
            index = 1;
            false
        }
        _ => false,
    };
    let digits = bytes.get(index..)?.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 {
        return None;
    }
    let value = body[index..index + digits]
        .bytes()
        .fold(0i64, |acc, d| acc.saturating_mul(10).saturating_add(i64::from(d - b'0')));
    consumed += index + digits;
    Some((if negative { -value } else { value }, consumed))
}

/// `cfs_cpt_table_create_pattern()` for a non-empty `pattern`.
pub fn create_pattern(
    pattern: &str,
    npartitions: i32,
    topo: &Topology,
) -> Result<CptTable, CptTableError> {
    let err = |rc: i32, message: String| Err(CptTableError::new(rc, message));
    let mut text = skip_spaces(pattern);
    // 1: a NUMA pattern; -1: the bare "N" layout.
    let mut node = 0i32;
    let mut ncpt = i64::from(npartitions);
    let mut exclude = false;
    let mut relative = false;
    let mut high: u32 = 0;

    if let Some(rest) = text.strip_prefix(['n', 'N']) {
        text = rest;
        node = 1;
        if text.is_empty() {
            if npartitions != 0 {
                return create(npartitions, topo);
            }
            node = -1;
            ncpt += topo.nodes_with_cpus().count() as i64;
        }
        text = skip_spaces(text);
    }
    if let Some(rest) = text.strip_prefix(['x', 'X']) {
        text = skip_spaces(rest);
        exclude = true;
    }
    if let Some(rest) = text.strip_prefix(['c', 'C']) {
        text = rest;
        exclude = true;
        relative = true;
    }
    if node != 0 && ncpt == 0 {
        ncpt = topo.nodes_with_cpus().count() as i64;
    } else if ncpt == 0 {
        ncpt = text.matches('[').count() as i64;
    }
    if (ncpt == 0 && !exclude)
        || (node != 0 && ncpt > topo.online_nodes() as i64)
        || (node == 0 && ncpt > topo.online_cpus() as i64)
    {
        return err(EINVAL, format!("Invalid pattern '{pattern}', or too many partitions {ncpt}"));
    }
    // A negative cpu_npartitions reaches the allocator, which fails.
    let ncpt = usize::try_from(ncpt).unwrap_or(0);
    let mut table = CptTable::alloc(ncpt)?;

    if exclude || node < 0 {
        if node != 0 {
            for (cpt, n) in topo.nodes_with_cpus().collect::<Vec<_>>().into_iter().enumerate() {
                // The kernel writes past its table when cpu_npartitions is below the node
                // count; refused here instead.
                if cpt >= ncpt {
                    return err(
                        EINVAL,
                        format!("Invalid pattern '{pattern}', or too many partitions {ncpt}"),
                    );
                }
                table.set_node(topo, cpt, n);
                if relative {
                    let count = topo.cpus_of_node(n).len() as u32;
                    if high == 0 || count < high {
                        high = count;
                    }
                }
            }
            if node < 0 {
                return Ok(table);
            }
        } else {
            table = create(ncpt as i32, topo)?;
        }
        // Kernel quirk kept: a relative exclusion without "N" leaves `high` at 0, so
        // "C[0,1]" alone fails to parse ("Can't parse number range").
        if !relative {
            high = topo.online_cpus() as u32 - 1;
        }
    }
    if !exclude {
        high = if node != 0 { topo.nr_node_ids - 1 } else { topo.nr_cpu_ids - 1 };
    }

    let mut cpt: i64 = 0;
    for c in 0..topo.possible_cpus as i64 {
        let Some(open) = text.find('[') else {
            if !text.is_empty() {
                return err(EINVAL, format!("Invalid pattern '{text}'"));
            }
            if !exclude && c != ncpt as i64 {
                return err(EINVAL, format!("Expect {ncpt} partitions but found {c}"));
            }
            break;
        };
        if exclude {
            text = &text[open..];
        } else {
            let Some((value, consumed)) = scan_int(text) else {
                return err(EINVAL, format!("Invalid CPU pattern '{text}'"));
            };
            cpt = value;
            if cpt < 0 || cpt >= ncpt as i64 {
                return err(EINVAL, format!("Invalid partition id {cpt}, total partitions {ncpt}"));
            }
            if table.weight(cpt as usize) != 0 {
                return err(EPERM, format!("Partition {cpt} has already been set."));
            }
            // The number must be followed (after spaces) by this very bracket.
            let after = &text[consumed..];
            let trimmed = skip_spaces(after);
            if consumed + (after.len() - trimmed.len()) != open {
                return err(
                    EINVAL,
                    format!("Invalid pattern '{}' does not start with '['", strim(after)),
                );
            }
            text = trimmed;
        }
        let Some(close) = text.find(']') else {
            return err(EINVAL, format!("Missing right bracket for partition {cpt} in '{text}'"));
        };
        let Ok(list) = ExprList::parse(&text[..=close], 0, high) else {
            return err(ERANGE, format!("Can't parse number range in '{text}'"));
        };
        for range in list.ranges() {
            if exclude && relative {
                if node != 0 {
                    table.unset_node_core(topo, range.lo, range.hi);
                } else {
                    table.unset_cpt_core(range.lo, range.hi);
                }
                continue;
            }
            for i in (range.lo..=range.hi).step_by(range.stride as usize) {
                if exclude {
                    table.unset_cpu(topo, i);
                    continue;
                }
                let placed = if node != 0 {
                    table.set_node(topo, cpt as usize, i)
                } else {
                    table.set_cpu(topo, cpt as usize, i)
                };
                if !placed {
                    // The kernel logs the cause at debug level only; name it here.
                    let what = if node != 0 { "NUMA node" } else { "CPU" };
                    return err(
                        EINVAL,
                        format!(
                            "Failed to create cptab from pattern '{pattern}': {what} {i} is \
                             invalid, offline or already in a partition"
                        ),
                    );
                }
            }
        }
        if exclude || relative {
            if let Some(empty) = table.parts.iter().position(BTreeSet::is_empty) {
                return err(
                    ENODEV,
                    format!("All cores are excluded on partition {empty}: rc={}", -ENODEV),
                );
            }
        } else if table.weight(cpt as usize) == 0 {
            return err(ENODEV, format!("No online CPU is found on partition {cpt}"));
        }
        text = strim(&text[close + 1..]);
    }
    Ok(table)
}

/// Parses the kernel's cpulist format (`/sys/devices/system/cpu/online`, a node's `cpulist`):
/// `0-3,8,10-11`, empty for none. Bounded by [`MAX_CPUS`].
pub fn parse_cpulist(text: &str) -> Option<BTreeSet<u32>> {
    ulnet_proto::engine::cpt::parse_id_list(text, MAX_CPUS)
}
