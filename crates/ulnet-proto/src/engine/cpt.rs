//! CPU partitions (CPTs) as engine state: how many partitions the node has, which partitions
//! each NI is bound to, and the kernel's NID → CPT hash that maps a peer, and every message to
//! or from it, onto one partition (docs/protocol/semantics.md §7.3).
//!
//! In the kernel a partition owns locks, queues and threads; here it is a label the engine
//! computes exactly as the kernel does so that configuration, `net show` and the drivers that
//! shard work by partition agree with a kernel node. No thread lives here (decision 0026).
//!
//! lustre: lnet/lnet/api-ni.c `lnet_nid4_cpt_hash()`, `lnet_nid_cpt_hash()`,
//! `lnet_cpt_of_nid_locked()`, `lnet_create_locks()` (`ln_cpt_bits`).

use crate::addr::{LndType, Nid};

/// Most partitions a node may have: `LNET_CPT_MAX_BITS` is 8 (lnet/include/lnet/lib-lnet.h).
pub const MAX_CPTS: u32 = 1 << 8;

/// The kernel's 32-bit multiplicative hash constant (`GOLDEN_RATIO_32`, include/linux/hash.h).
const GOLDEN_RATIO_32: u32 = 0x61C8_8647;
/// The 64-bit one (`GOLDEN_RATIO_64`), used by `hash_long()` on 64-bit kernels.
const GOLDEN_RATIO_64: u64 = 0x61C8_8646_80B5_83EB;

/// Why a partition configuration was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CptError {
    #[error("partition count {0} is outside 1..={MAX_CPTS}")]
    BadCount(u32),
    #[error("CPT {cpt} does not exist: the node has {count} CPT")]
    OutOfRange { cpt: u32, count: u32 },
    #[error("CPT list is empty")]
    EmptyList,
    #[error("CPT list has {values} values but the node has {count} CPT")]
    TooMany { values: usize, count: u32 },
}

/// The bits needed to number `count` partitions: the kernel's `ln_cpt_bits`, the smallest `b`
/// with `2^b >= count` (lustre: api-ni.c `lnet_create_locks()`).
pub fn cpt_bits(count: u32) -> u32 {
    if count <= 1 { 0 } else { 32 - (count - 1).leading_zeros() }
}

/// The kernel's `hash_32()`: the top `bits` bits of `value × GOLDEN_RATIO_32`.
fn hash_32(value: u32, bits: u32) -> u32 {
    let product = value.wrapping_mul(GOLDEN_RATIO_32);
    if bits == 0 { 0 } else { product >> (32 - bits) }
}

/// The kernel's `hash_64()` (what `hash_long()` is on a 64-bit kernel).
fn hash_64(value: u64, bits: u32) -> u32 {
    let product = value.wrapping_mul(GOLDEN_RATIO_64);
    if bits == 0 { 0 } else { (product >> (64 - bits)) as u32 }
}

/// `lnet_nid_cpt_hash()`: which of `number` partitions a NID hashes to.
///
/// - 4-byte addresses (every classic NID): the sum of the eight bytes of the 64-bit NID,
///   mod `number`; kfilnd NIDs use `hash_long()` instead.
/// - Larger addresses (IPv6): `hash_32` chained over the four address words, folded with the
///   net, reduced the same way kfilnd's is.
///
/// `number` is the node's partition count, the hash taken over all of them; `number` is clamped
/// to 1..=[`MAX_CPTS`] (the kernel asserts it). [`Partitions`] hashes over an NI's subset with
/// the node's bits, as the kernel does.
pub fn nid_cpt_hash(nid: &Nid, number: u32) -> u32 {
    hash_within(nid, number, cpt_bits(number.clamp(1, MAX_CPTS)))
}

/// The hash over `number` partitions of a node whose partitions take `bits` bits: the kernel
/// takes `hash_long()` / `hash_32()` to `LNET_CPT_BITS` (the node's `ln_cpt_bits`) even when an
/// NI is bound to fewer partitions, and only then reduces to `number`.
fn hash_within(nid: &Nid, number: u32, bits: u32) -> u32 {
    let number = number.clamp(1, MAX_CPTS);
    if number == 1 {
        return 0;
    }
    if nid.is_nid4() {
        let key = nid.to_nid4_lossy();
        if nid.lnd() == LndType::KFI {
            let cpt = hash_64(key, bits);
            if cpt < number {
                return cpt;
            }
            // The kernel adds in u64 and reduces: the number of CPTs need not be a power of 2.
            return (key.wrapping_add(u64::from(cpt)).wrapping_add(u64::from(cpt >> 1))
                % u64::from(number)) as u32;
        }
        let byte_sum: u32 = key.to_be_bytes().iter().map(|&b| u32::from(b)).sum();
        return byte_sum % number;
    }
    // The kernel hashes the in-memory words of the big-endian address as a little-endian CPU
    // loads them (x86_64 and aarch64, the platforms Lustre ships for).
    let addr = nid.to_large_bytes();
    let mut h: u32 = 0;
    // The address words follow the 4-byte type/number/size header of `struct lnet_nid`.
    for word in addr.get(4..20).unwrap_or_default().chunks_exact(4) {
        let word: [u8; 4] = word.try_into().unwrap_or_default();
        h = hash_32(u32::from_le_bytes(word) ^ h, 32);
    }
    let val = hash_32(nid.net().to_u32() ^ h, bits);
    if val < number {
        return val;
    }
    h.wrapping_add(val).wrapping_add(val >> 1) % number
}

/// The CPTs an NI is bound to, as the kernel stores them (`ni_cpts`): in the order written,
/// duplicates kept, or empty for "all partitions". Fixed-size so that `NiConfig` stays `Copy`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct CptList {
    len: u16,
    cpts: [u8; MAX_CPTS as usize],
}

impl Default for CptList {
    fn default() -> Self {
        Self::ALL
    }
}

impl std::fmt::Debug for CptList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_all() {
            f.write_str("CptList(all)")
        } else {
            write!(f, "CptList({:?})", self.values())
        }
    }
}

impl CptList {
    /// Bound to every partition (the kernel's `ni_cpts == NULL`).
    pub const ALL: Self = Self { len: 0, cpts: [0; MAX_CPTS as usize] };

    /// A list of the given CPTs, unchecked against any node (see [`Partitions::bind`]).
    pub fn new(values: &[u32]) -> Result<Self, CptError> {
        if values.is_empty() {
            return Err(CptError::EmptyList);
        }
        if values.len() > MAX_CPTS as usize {
            return Err(CptError::TooMany { values: values.len(), count: MAX_CPTS });
        }
        let mut list = Self::ALL;
        for (slot, &cpt) in list.cpts.iter_mut().zip(values) {
            *slot = u8::try_from(cpt).map_err(|_| CptError::OutOfRange { cpt, count: MAX_CPTS })?;
        }
        list.len = values.len() as u16;
        Ok(list)
    }

    pub fn is_all(&self) -> bool {
        self.len == 0
    }

    /// The CPTs in order; empty when bound to all.
    pub fn values(&self) -> Vec<u32> {
        self.slice().iter().map(|&c| u32::from(c)).collect()
    }

    fn slice(&self) -> &[u8] {
        self.cpts.get(..usize::from(self.len)).unwrap_or_default()
    }
}

/// The node's partitions: their number and the NID → CPT mapping over them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Partitions {
    count: u32,
}

impl Default for Partitions {
    /// One partition: what a node without `cpu_pattern`/`cpu_npartitions` on one small NUMA
    /// node gets.
    fn default() -> Self {
        Self { count: 1 }
    }
}

impl Partitions {
    /// The node's `ln_cpt_bits`, which every hash is taken to.
    fn bits(&self) -> u32 {
        cpt_bits(self.count)
    }

    pub fn new(count: u32) -> Result<Self, CptError> {
        if count == 0 || count > MAX_CPTS {
            return Err(CptError::BadCount(count));
        }
        Ok(Self { count })
    }

    /// `LNET_CPT_NUMBER`.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// Checks an NI's CPT list against this node and returns what the kernel stores: the
    /// values as written (duplicates kept, as `cfs_expr_list_values()` keeps them), or `None`
    /// (bound to all) when the list has exactly as many values as the node has partitions.
    /// An out-of-range CPT is refused (lnetctl reports it with -ERANGE), and so is a list
    /// longer than the partition count (-EINVAL). lustre: lnet/lnet/config.c `lnet_ni_alloc()`,
    /// nidstrings.c `cfs_expr_list_values()`.
    pub fn check_ni_cpts(&self, cpts: Option<&[u32]>) -> Result<Option<Vec<u32>>, CptError> {
        let Some(cpts) = cpts else { return Ok(None) };
        if cpts.is_empty() {
            return Err(CptError::EmptyList);
        }
        if let Some(&cpt) = cpts.iter().find(|&&cpt| cpt >= self.count) {
            return Err(CptError::OutOfRange { cpt, count: self.count });
        }
        match cpts.len().cmp(&(self.count as usize)) {
            std::cmp::Ordering::Less => Ok(Some(cpts.to_vec())),
            std::cmp::Ordering::Equal => Ok(None),
            std::cmp::Ordering::Greater => {
                Err(CptError::TooMany { values: cpts.len(), count: self.count })
            }
        }
    }

    /// [`Self::check_ni_cpts`] for an NI's [`CptList`]: the list the NI keeps.
    pub fn bind(&self, list: CptList) -> Result<CptList, CptError> {
        if list.is_all() {
            return Ok(CptList::ALL);
        }
        match self.check_ni_cpts(Some(&list.values()))? {
            None => Ok(CptList::ALL),
            Some(_) => Ok(list),
        }
    }

    /// The CPTs an NI with `list` covers, as `net show` prints them: the list, or all of
    /// `0..count` when unbound.
    pub fn covered(&self, list: &CptList) -> Vec<u32> {
        if list.is_all() { (0..self.count).collect() } else { list.values() }
    }

    /// [`Self::cpt_of_nid`] for an NI's [`CptList`].
    pub fn cpt_of_nid_for(&self, nid: &Nid, list: &CptList) -> u32 {
        if self.count == 1 {
            return 0;
        }
        let slice = list.slice();
        if slice.is_empty() {
            return nid_cpt_hash(nid, self.count);
        }
        let index = hash_within(nid, slice.len() as u32, self.bits()) as usize % slice.len();
        slice.get(index).map_or(0, |&cpt| u32::from(cpt))
    }

    /// `lnet_cpt_of_nid_locked()` with an NI: the partition that serialises all traffic
    /// between that NI and `nid`. An NI bound to a subset indexes the subset by the hash over
    /// the subset's size; an NI bound to all partitions hashes over all of them.
    pub fn cpt_of_nid(&self, nid: &Nid, ni_cpts: Option<&[u32]>) -> u32 {
        if self.count == 1 {
            return 0;
        }
        match ni_cpts {
            Some(list) if !list.is_empty() => {
                let index = hash_within(nid, list.len() as u32, self.bits()) as usize % list.len();
                list.get(index).copied().unwrap_or(0)
            }
            _ => nid_cpt_hash(nid, self.count),
        }
    }
}

/// A local net's CPT set (`net_cpts`, `net_ncpts`), which maps a NID to a partition when no NI
/// is given (`lnet_nid2cpt(nid, NULL)`: a unique portal's match table, a message's initiator).
/// Kept as the kernel keeps it, transitions and all (lustre: config.c
/// `lnet_net_append_cpts()`, `lnet_net_remove_cpts()`):
///
/// - the first bound NI's list becomes the net's; an NI on all partitions makes the net
///   unrestricted for good, until an NI's removal rebuilds it;
/// - a later bound NI appends only the values the net already has (`in_array()` answers
///   "absent", so the kernel's `!in_array()` keeps what is present): duplicates, which weigh
///   the hash, and never a new partition;
/// - removing an NI rebuilds the set from the NIs left, except that a net left unrestricted
///   keeps its count, so it stays unrestricted (the rebuild's appends stop at a full count).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NetCpts {
    /// `net_cpts`: `None` is unrestricted (or not yet set).
    cpts: Option<Vec<u32>>,
    /// `net_ncpts`: 0 for a new net.
    count: u32,
}

impl NetCpts {
    /// The partitions the net is restricted to, if it is.
    pub fn restricted(&self) -> Option<&[u32]> {
        self.cpts.as_deref()
    }

    /// `lnet_net_append_cpts()` for an NI bound to `ni` (`None`: all `node_count` partitions).
    pub fn append(&mut self, ni: Option<&[u32]>, node_count: u32) {
        if self.count == node_count {
            return;
        }
        let Some(ni) = ni else {
            self.cpts = None;
            self.count = node_count;
            return;
        };
        match &mut self.cpts {
            None => {
                self.cpts = Some(ni.to_vec());
                self.count = ni.len() as u32;
            }
            Some(cpts) => {
                let present: Vec<u32> =
                    ni.iter().filter(|cpt| cpts.contains(cpt)).copied().collect();
                // Bounded as the kernel's array of LNET_CPT_NUMBER is not: a list never
                // exceeds the most partitions a node may have.
                let room = (MAX_CPTS as usize).saturating_sub(cpts.len());
                cpts.extend(present.into_iter().take(room));
                self.count = cpts.len() as u32;
            }
        }
    }

    /// `lnet_net_remove_cpts()` after an NI bound to `removed` left, `remaining` being the
    /// net's NIs still up, in the order they came up.
    pub fn remove<'a>(
        &mut self,
        removed: Option<&[u32]>,
        remaining: impl Iterator<Item = Option<&'a [u32]>> + Clone,
        node_count: u32,
    ) {
        let removed_count = removed.map_or(node_count, |list| list.len() as u32);
        if removed_count == 0 {
            return;
        }
        if removed_count == node_count && remaining.clone().any(|ni| ni.is_none()) {
            return;
        }
        // Freed, its count kept (the kernel does not reset `net_ncpts` here).
        self.cpts = None;
        for ni in remaining {
            self.append(ni, node_count);
        }
    }
}

/// Parses the kernel's list format for CPU and node ids (sysfs `online`, a node's `cpulist`):
/// `0-3,8,10-11`, empty for none; `None` for anything else or an id at or past `limit`.
pub fn parse_id_list(text: &str, limit: u32) -> Option<std::collections::BTreeSet<u32>> {
    let mut set = std::collections::BTreeSet::new();
    let text = text.trim();
    if text.is_empty() {
        return Some(set);
    }
    for part in text.split(',') {
        let (lo, hi) = match part.split_once('-') {
            Some((lo, hi)) => (lo.trim().parse::<u32>().ok()?, hi.trim().parse::<u32>().ok()?),
            None => {
                let id = part.trim().parse::<u32>().ok()?;
                (id, id)
            }
        };
        if lo > hi || hi >= limit {
            return None;
        }
        set.extend(lo..=hi);
    }
    Some(set)
}

/// `lnet_nid2cpt(nid, NULL)`: the partition of `nid` on a node of `partitions` whose NID's
/// net, if local, has the set `net`.
pub fn cpt_of_nid_on_net(partitions: &Partitions, nid: &Nid, net: Option<&NetCpts>) -> u32 {
    match net.and_then(NetCpts::restricted) {
        Some(list) if partitions.count() > 1 && !list.is_empty() => {
            let index =
                hash_within(nid, list.len() as u32, partitions.bits()) as usize % list.len();
            list.get(index).copied().unwrap_or(0)
        }
        _ => partitions.cpt_of_nid(nid, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::Net;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn nid(text: &str) -> Nid {
        text.parse().unwrap()
    }

    #[test]
    fn cpt_bits_is_the_ceiling_log2() {
        let pairs = [(1, 0), (2, 1), (3, 2), (4, 2), (5, 3), (8, 3), (9, 4), (255, 8), (256, 8)];
        for (count, bits) in pairs {
            assert_eq!(cpt_bits(count), bits, "{count}");
        }
    }

    /// Hand computation of the kernel's nid4 hash (`lnet_nid4_cpt_hash`): the 64-bit NID is
    /// `net << 32 | addr`, net = `lnd << 16 | number`; socklnd is LND type 2.
    ///
    /// 192.168.1.10@tcp: NID 0x0002_0000_C0A8_010A, bytes 00 02 00 00 C0 A8 01 0A,
    /// sum = 2 + 192 + 168 + 1 + 10 = 373; 373 mod 2 = 1, mod 3 = 1, mod 4 = 1, mod 12 = 1
    /// (373 = 31 × 12 + 1), mod 7 = 2 (373 = 53 × 7 + 2).
    ///
    /// 10.0.0.1@tcp1: bytes 00 02 00 01 0A 00 00 01, sum = 2 + 1 + 10 + 1 = 14;
    /// mod 2 = 0, mod 3 = 2, mod 4 = 2, mod 5 = 4.
    ///
    /// 10.1.2.3@o2ib: o2iblnd is type 5: bytes 00 05 00 00 0A 01 02 03, sum = 21;
    /// mod 5 = 1, mod 7 = 0, mod 16 = 5.
    #[test]
    fn nid4_hash_is_the_byte_sum_mod_the_count() {
        let cases = [
            ("192.168.1.10@tcp", [(1, 0), (2, 1), (3, 1), (4, 1), (7, 2), (12, 1)].as_slice()),
            ("10.0.0.1@tcp1", [(2, 0), (3, 2), (4, 2), (5, 4)].as_slice()),
            ("10.1.2.3@o2ib", [(5, 1), (7, 0), (16, 5)].as_slice()),
        ];
        for (text, expected) in cases {
            for &(number, cpt) in expected {
                assert_eq!(nid_cpt_hash(&nid(text), number), cpt, "{text} over {number}");
            }
        }
        // 0@lo: every byte but the LND type (9) is zero.
        assert_eq!(nid_cpt_hash(&nid("0@lo"), 4), 9 % 4);
    }

    /// kfilnd (type 16) uses `hash_long()`: 5@kfi is 0x0010_0000_0000_0005.
    /// × 0x61C8864680B583EB mod 2^64 = 0x61C8_8646_80B5_83EB × 5 + 0x61C8_8646_80B5_83EB
    /// × 0x0010_0000_0000_0000 (mod 2^64):
    ///   × 5 = 0xE8EA_9F60_838B_9397 (mod 2^64), and the second term shifts the constant left by
    ///   52 bits, keeping its low 12 bits 0x3EB: 0x3EB0_0000_0000_0000;
    ///   sum = 0x279A_9F60_838B_9397 (carry out dropped).
    /// Top 2 bits (4 CPTs): 0b00 = 0. Top 3 bits (5 CPTs, bits 3): 0b001 = 1 (< 5, kept).
    /// Top 3 bits over 6 CPTs: 1. Top 3 bits is 1 for 8 CPTs too.
    #[test]
    fn kfi_hash_uses_hash_long() {
        let kfi = Nid::new4(Net::new(LndType::KFI, 0), 5);
        assert_eq!(kfi.to_nid4(), Some(0x0010_0000_0000_0005));
        assert_eq!(0x0010_0000_0000_0005u64.wrapping_mul(GOLDEN_RATIO_64), 0x279A_9F60_838B_9397);
        assert_eq!(nid_cpt_hash(&kfi, 4), 0);
        assert_eq!(nid_cpt_hash(&kfi, 5), 1);
        assert_eq!(nid_cpt_hash(&kfi, 8), 1);
    }

    /// The reduction branch of kfilnd's hash: with 3 CPTs (2 bits) a hash of 3 is out of range
    /// and becomes (key + 3 + 1) mod 3. Found by search below, then checked by hand: the
    /// product's top two bits are 0b11.
    #[test]
    fn kfi_hash_reduces_out_of_range_values() {
        let net = Net::new(LndType::KFI, 0);
        let (addr, key) = (0u32..)
            .map(|a| (a, Nid::new4(net, a).to_nid4().unwrap()))
            .find(|&(_, key)| key.wrapping_mul(GOLDEN_RATIO_64) >> 62 == 3)
            .unwrap();
        let expected = ((key + 3 + 1) % 3) as u32;
        assert_eq!(nid_cpt_hash(&Nid::new4(net, addr), 3), expected);
    }

    /// Large NIDs: `hash_32` over the four address words as loaded on a little-endian CPU.
    /// For ::1@tcp the words are 0, 0, 0 and 0x0100_0000 (bytes 00 00 00 01 read LE):
    /// h stays 0 through three rounds (0 × φ = 0), then h = 0x0100_0000 × 0x61C88647 mod 2^32
    /// = 0x4700_0000 (only the low byte 0x47 of φ survives the shift by 24).
    /// Net tcp = 0x0002_0000; val = hash_32(0x0002_0000 ^ 0x4700_0000, bits):
    /// 0x4702_0000 × 0x61C88647 mod 2^32 = (0x4702 × 0x8647 mod 2^16) << 16
    /// = (0x4702 × 0x8647 = 0x253E_BD8E → 0xBD8E) << 16 = 0xBD8E_0000 (0b1011_1101...).
    /// Over 2 CPTs (1 bit): 1. Over 4 (2 bits): 0b10 = 2. Over 3 (2 bits): 2 < 3, so 2.
    /// Over 8 (3 bits): 0b101 = 5. Over 16 (4 bits): 0xB = 11.
    /// Over 5 (3 bits): 5 is out of range, so (h + val + val/2) mod 5
    /// = (0x4700_0000 + 5 + 2) mod 5 = 1_191_182_343 mod 5 = 3.
    #[test]
    fn large_nid_hash_chains_hash_32() {
        let v6 = Nid::ipv6(Net::new(LndType::SOCK, 0), Ipv6Addr::LOCALHOST);
        assert_eq!(0x0100_0000u32.wrapping_mul(GOLDEN_RATIO_32), 0x4700_0000);
        assert_eq!(0x4702_0000u32.wrapping_mul(GOLDEN_RATIO_32), 0xBD8E_0000);
        for (number, cpt) in [(2, 1), (3, 2), (4, 2), (5, 3), (8, 5), (16, 11)] {
            assert_eq!(nid_cpt_hash(&v6, number), cpt, "over {number}");
        }
    }

    /// An NI bound to a subset hashes to the node's bits, then reduces to the subset's size
    /// (lnet_nid_cpt_hash() takes `LNET_CPT_BITS`). ::1@tcp on a node of 8 partitions (3 bits)
    /// with an NI bound to [4,5,6]: val = top 3 bits of 0xBD8E_0000 = 5 (see above), out of
    /// range for 3, so (0x4700_0000 + 5 + 2) mod 3 = 1_191_182_343 mod 3 = 0 (digit sum 33):
    /// CPT 4. Hashing to the subset's own 2 bits would give 2, CPT 6.
    #[test]
    fn a_subset_hashes_with_the_nodes_bits() {
        let v6 = Nid::ipv6(Net::new(LndType::SOCK, 0), Ipv6Addr::LOCALHOST);
        let parts = Partitions::new(8).unwrap();
        assert_eq!(parts.cpt_of_nid(&v6, Some(&[4, 5, 6])), 4);
        let list = CptList::new(&[4, 5, 6]).unwrap();
        assert_eq!(parts.cpt_of_nid_for(&v6, &list), 4);
        // kfilnd's hash_long() likewise: 5@kfi over [1,2,3] of 8 (3 bits) is 1 (see above), in
        // range, so index 1: CPT 2.
        let kfi = Nid::new4(Net::new(LndType::KFI, 0), 5);
        assert_eq!(parts.cpt_of_nid(&kfi, Some(&[1, 2, 3])), 2);
    }

    /// `lnet_net_append_cpts()` on a node of 4: the first bound NI's list, then only values
    /// already present (the kernel's inverted `in_array()`), then an NI on all partitions
    /// lifts the restriction for good.
    #[test]
    fn a_nets_cpts_grow_as_the_kernels_do() {
        let mut net = NetCpts::default();
        assert_eq!(net.restricted(), None);
        net.append(Some(&[2, 3]), 4);
        assert_eq!(net.restricted(), Some(&[2, 3][..]));
        net.append(Some(&[3, 1]), 4);
        assert_eq!(net.restricted(), Some(&[2, 3, 3][..]), "3 again, never 1");
        net.append(None, 4);
        assert_eq!(net.restricted(), None);
        net.append(Some(&[0]), 4);
        assert_eq!(net.restricted(), None, "unrestricted stays so");
    }

    /// `lnet_net_remove_cpts()`: a net made unrestricted by its only all-partition NI keeps
    /// its count when that NI goes, so the rebuild changes nothing; a restricted net is
    /// rebuilt from the NIs left; an all-partition NI leaving while another remains changes
    /// nothing.
    #[test]
    fn a_nets_cpts_after_a_removal_are_the_kernels() {
        let mut net = NetCpts::default();
        net.append(None, 4);
        net.append(Some(&[0]), 4);
        net.remove(None, [Some(&[0][..])].into_iter(), 4);
        assert_eq!(net.restricted(), None);

        let mut net = NetCpts::default();
        net.append(Some(&[1]), 4);
        net.append(Some(&[1, 2]), 4);
        assert_eq!(net.restricted(), Some(&[1, 1][..]));
        net.remove(Some(&[1]), [Some(&[1, 2][..])].into_iter(), 4);
        assert_eq!(net.restricted(), Some(&[1, 2][..]));

        let mut net = NetCpts::default();
        net.append(Some(&[3]), 4);
        net.append(None, 4);
        net.remove(None, [Some(&[3][..]), None].into_iter(), 4);
        assert_eq!(net.restricted(), None);
    }

    /// With no NI given a NID maps through its net's set when restricted: 192.168.1.10@tcp
    /// sums to 373, index 373 mod 2 = 1 of [2,3], CPT 3; unrestricted, 373 mod 4 = 1.
    #[test]
    fn no_ni_maps_through_the_nets_cpts() {
        let parts = Partitions::new(4).unwrap();
        let peer = nid("192.168.1.10@tcp");
        let mut net = NetCpts::default();
        assert_eq!(cpt_of_nid_on_net(&parts, &peer, Some(&net)), 1);
        net.append(Some(&[2, 3]), 4);
        assert_eq!(cpt_of_nid_on_net(&parts, &peer, Some(&net)), 3);
        assert_eq!(cpt_of_nid_on_net(&parts, &peer, None), 1);
    }

    #[test]
    fn one_partition_maps_everything_to_zero() {
        let parts = Partitions::default();
        let v4 = Nid::ipv4(Net::new(LndType::SOCK, 0), Ipv4Addr::new(192, 168, 1, 10));
        assert_eq!(parts.cpt_of_nid(&v4, None), 0);
        assert_eq!(nid_cpt_hash(&v4, 0), 0, "a zero count is clamped to one");
    }

    /// 192.168.1.10@tcp sums to 373: over a 3-CPT subset [1,2,3] it picks index 373 mod 3 = 1,
    /// CPT 2; over all 4 CPTs it picks 373 mod 4 = 1.
    #[test]
    fn bound_nis_index_their_subset() {
        let parts = Partitions::new(4).unwrap();
        let peer = nid("192.168.1.10@tcp");
        assert_eq!(parts.cpt_of_nid(&peer, Some(&[1, 2, 3])), 2);
        assert_eq!(parts.cpt_of_nid(&peer, None), 1);
        assert_eq!(parts.cpt_of_nid(&peer, Some(&[3])), 3);
    }

    #[test]
    fn cpt_lists_bind_like_the_kernel() {
        let parts = Partitions::new(4).unwrap();
        let peer = nid("192.168.1.10@tcp");
        let subset = CptList::new(&[1, 2, 3]).unwrap();
        assert_eq!(parts.bind(subset), Ok(subset));
        assert_eq!(parts.cpt_of_nid_for(&peer, &subset), 2);
        assert_eq!(parts.cpt_of_nid_for(&peer, &CptList::ALL), 1);
        assert_eq!(parts.covered(&CptList::ALL), [0, 1, 2, 3]);
        assert_eq!(parts.covered(&subset), [1, 2, 3]);
        assert!(parts.bind(CptList::new(&[0, 1, 2, 3]).unwrap()).unwrap().is_all());
        assert_eq!(
            parts.bind(CptList::new(&[4]).unwrap()),
            Err(CptError::OutOfRange { cpt: 4, count: 4 })
        );
        assert_eq!(CptList::new(&[256]), Err(CptError::OutOfRange { cpt: 256, count: 256 }));
        assert_eq!(CptList::new(&[]), Err(CptError::EmptyList));
        assert_eq!(format!("{subset:?}"), "CptList([1, 2, 3])");
    }

    #[test]
    fn ni_cpt_lists_are_checked() {
        let parts = Partitions::new(2).unwrap();
        assert_eq!(parts.check_ni_cpts(None), Ok(None));
        assert_eq!(parts.check_ni_cpts(Some(&[1])), Ok(Some(vec![1])));
        assert_eq!(parts.check_ni_cpts(Some(&[1, 0])), Ok(None), "every CPT: unbound");
        // The kernel counts values, not distinct CPTs: [1,1] on two CPTs is "all".
        assert_eq!(parts.check_ni_cpts(Some(&[1, 1])), Ok(None));
        assert_eq!(
            parts.check_ni_cpts(Some(&[0, 1, 1])),
            Err(CptError::TooMany { values: 3, count: 2 })
        );
        assert_eq!(
            parts.check_ni_cpts(Some(&[0, 2])),
            Err(CptError::OutOfRange { cpt: 2, count: 2 })
        );
        assert_eq!(parts.check_ni_cpts(Some(&[])), Err(CptError::EmptyList));
        assert_eq!(Partitions::new(0), Err(CptError::BadCount(0)));
        assert_eq!(Partitions::new(257), Err(CptError::BadCount(257)));
        assert!(Partitions::new(256).is_ok());
    }
}
