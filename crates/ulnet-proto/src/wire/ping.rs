//! The ping buffer (`struct lnet_ping_info` plus its entries): what a node serves to ping GETs on
//! the reserved portal and PUTs to peers as a discovery push. Both use this one format.
//!
//! Layout: a 16-byte header, `pi_nnis` 16-byte nid4 entries (entry 0 is `0@lo` carrying the
//! sequence number), then with `LARGE_ADDR` variable-size large-NID entries, then with
//! `METADATA` a counted table of 40-byte LND metadata entries. All integers are in the sender's
//! order (little-endian here); a receiver swaps when the magic is byte-reversed.
//!
//! lustre: include/uapi/linux/lnet/lnet-idl.h (`struct lnet_ping_info`, `struct lnet_ni_status`,
//! `struct lnet_ni_large_status`, `struct lnet_nid_metadata`, `lnet_ping_info_size`),
//! include/linux/lnet/lib-types.h (`lnet_ping_sts_size`), lnet/lnet/api-ni.c
//! (`lnet_ping_target_install_locked`, `lnet_swap_pinginfo`, `lnet_ping_info_validate`),
//! lnet/lnet/peer.c (`ping_iter_next`, `find_primary`, `lnet_discovery_event_reply`).

use crate::addr::{LARGE_NID_LEN, LndType, Nid};
use crate::wire::cursor::{ByteOrder, Reader, Writer};

/// `LNET_PROTO_PING_MAGIC`, 'ping'.
pub const LNET_PROTO_PING_MAGIC: u32 = 0x7069_6E67;
/// `LNET_PROTO_PING_MATCHBITS`: match bits of ping GETs and push PUTs.
pub const LNET_PROTO_PING_MATCHBITS: u64 = 0x8000_0000_0000_0000;
/// `LNET_RESERVED_PORTAL`: the portal of the ping and push targets.
pub const LNET_RESERVED_PORTAL: u32 = 0;

/// `LNET_NI_STATUS_UP`.
pub const LNET_NI_STATUS_UP: u32 = 0x15aa_c0de;
/// `LNET_NI_STATUS_DOWN`: the receiver considers that NID dead.
pub const LNET_NI_STATUS_DOWN: u32 = 0xdead_face;
/// `LNET_NI_STATUS_INVALID`.
pub const LNET_NI_STATUS_INVALID: u32 = 0;

/// `LNET_PING_FEAT_BASE`: legacy "just a ping", never set by current kernels.
pub const LNET_PING_FEAT_BASE: u32 = 1 << 0;
/// `LNET_PING_FEAT_NI_STATUS`: entries carry status. Receivers reject a buffer without it.
pub const LNET_PING_FEAT_NI_STATUS: u32 = 1 << 1;
/// `LNET_PING_FEAT_RTE_DISABLED`: the node does NOT route (despite the kernel's comment).
pub const LNET_PING_FEAT_RTE_DISABLED: u32 = 1 << 2;
/// `LNET_PING_FEAT_MULTI_RAIL`.
pub const LNET_PING_FEAT_MULTI_RAIL: u32 = 1 << 3;
/// `LNET_PING_FEAT_DISCOVERY`: discovery enabled on the node.
pub const LNET_PING_FEAT_DISCOVERY: u32 = 1 << 4;
/// `LNET_PING_FEAT_LARGE_ADDR`: large entries present; entry 0's `ns_msg_size` is the info size.
pub const LNET_PING_FEAT_LARGE_ADDR: u32 = 1 << 5;
/// `LNET_PING_FEAT_PRIMARY_LARGE`: the primary NID is the first large entry.
pub const LNET_PING_FEAT_PRIMARY_LARGE: u32 = 1 << 6;
/// `LNET_PING_FEAT_METADATA`: the LND metadata table follows the info.
pub const LNET_PING_FEAT_METADATA: u32 = 1 << 7;
/// `LNET_PING_FEAT_BITS`: every defined feature bit.
pub const LNET_PING_FEAT_BITS: u32 = 0xff;

/// `LNET_PING_INFO_HDR_SIZE`: magic, features, pid, nnis.
pub const LNET_PING_INFO_HDR_SIZE: usize = 16;
/// `sizeof(struct lnet_ni_status)`: one nid4 entry.
pub const NI_STATUS_LEN: usize = 16;
/// `LNET_PING_INFO_MIN_SIZE`: header plus `LNET_INTERFACES_MIN` (16) nid4 entries; the sink of
/// recovery pings and the initial push target.
pub const LNET_PING_INFO_MIN_SIZE: usize = LNET_PING_INFO_HDR_SIZE + 16 * NI_STATUS_LEN;
/// `LNET_PING_BUFFER_MAX`: the largest sink `lnetctl ping` uses (lustre: api-ni.c).
pub const LNET_PING_BUFFER_MAX: usize = 3960;
/// The default of the `lnet_interfaces_max` module parameter (`LNET_INTERFACES_MAX_DEFAULT`):
/// the bound on `pi_nnis`, on metadata entries, and here on the entries this module emits.
pub const LNET_INTERFACES_MAX: u32 = 4096;
/// `LNET_MD_BUFFER_SZ`: opaque LND bytes per metadata entry.
pub const LNET_MD_BUFFER_SZ: usize = 32;
/// `sizeof(struct lnet_nid_md_entry)`: nid4 plus the LND bytes.
pub const NID_MD_ENTRY_LEN: usize = 8 + LNET_MD_BUFFER_SZ;
/// Bytes a kernel reserves after the info when any LND supplies metadata
/// (lustre: api-ni.c `lnet_extra_bytes_for_md()`); the unused tail is zero.
pub const METADATA_RESERVED_LEN: usize = 4 + NID_MD_ENTRY_LEN * LNET_INTERFACES_MAX as usize;

/// One interface and its status (`ns_status`: one of the `LNET_NI_STATUS_*` values, kept raw).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NiStatus {
    pub nid: Nid,
    pub status: u32,
}

/// One `struct lnet_nid_md_entry`: LND-defined bytes for a NID (EFA uses them; socklnd not).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NidMetadata {
    /// The NI's nid4 form (truncated by the sender for large NIDs, as `lnet_nid_to_nid4` does).
    pub nid4: u64,
    pub lnd_data: [u8; LNET_MD_BUFFER_SZ],
}

/// A validated ping buffer. Entry 0 (`0@lo`, carrying [`PingInfo::sequence`] and, with
/// `LARGE_ADDR`, the info size) is implied.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PingInfo {
    /// `pi_features` as sent. [`PingInfo::emit`] adds `LARGE_ADDR` and `METADATA` when the
    /// matching entries are present; other bits go out as given.
    pub features: u32,
    /// `pi_pid`.
    pub pid: u32,
    /// The buffer's sequence number, sent in entry 0's `ns_status`.
    pub sequence: u32,
    /// nid4 entries after `0@lo`, in order; the first is the primary NID unless
    /// `PRIMARY_LARGE` says otherwise.
    pub nids: Vec<NiStatus>,
    /// Large-address entries (`struct lnet_ni_large_status`), in order.
    pub large: Vec<NiStatus>,
    /// The LND metadata table.
    pub metadata: Vec<NidMetadata>,
}

/// Why bytes are not an acceptable ping buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PingError {
    #[error("ping buffer of {len} bytes is shorter than its {LNET_PING_INFO_HDR_SIZE}-byte header")]
    HeaderTruncated { len: usize },
    #[error("bad ping magic {0:#010x}")]
    BadMagic(u32),
    /// `LNET_PING_FEAT_NI_STATUS` is clear (kernel: EPROTO).
    #[error("ping features {0:#x} lack NI_STATUS")]
    NoNiStatus(u32),
    /// `pi_nnis` is 0 or above [`LNET_INTERFACES_MAX`] (kernel: ERANGE).
    #[error("ping buffer claims {0} nid4 entries")]
    NiCountOutOfRange(u32),
    /// The sender's info is longer than what arrived: the reply was cut by the GET's
    /// `sink_length`. Retry with a sink of at least `info_size` bytes, as the kernel does.
    /// `info_size` is exact when the header and entry 0 arrived, else a lower bound.
    #[error("ping info of {info_size} bytes truncated to {len}")]
    Truncated { info_size: usize, len: usize },
    /// Entry 0 is not `0@lo` (kernel: EPROTO).
    #[error("first ping entry {0:#018x} is not 0@lo")]
    FirstEntryNotLoopback(u64),
    /// With `LARGE_ADDR`, entry 0's size does not even cover the nid4 table.
    #[error("ping info size {info_size} is smaller than its nid4 table ({nid4_end} bytes)")]
    InfoSizeTooSmall { info_size: usize, nid4_end: usize },
    /// A large entry runs past the info size.
    #[error("large ping entry at offset {0} runs past the info size")]
    LargeEntryOverrun(usize),
    /// `num_nid_mappings` is above [`LNET_INTERFACES_MAX`].
    #[error("ping metadata claims {0} entries")]
    MetadataCountOutOfRange(u32),
}

/// Why a ping buffer cannot be emitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PingEmitError {
    #[error("ping buffer needs {needed} bytes, buffer has {len}")]
    BufferTooSmall { needed: usize, len: usize },
    /// More interfaces (lo included) than [`LNET_INTERFACES_MAX`].
    #[error("{0} interfaces exceed lnet_interfaces_max")]
    TooManyNis(usize),
    /// A NID in the nid4 table has no nid4 form; it belongs in the large entries.
    #[error("NID {0} in the nid4 table has no nid4 form")]
    NidNotNid4(Nid),
    /// Readers skip a large entry holding `LNET_ANY_NID` (its size byte is 0xFF).
    #[error("LNET_ANY_NID cannot be a large entry")]
    AnyNidInLargeEntry,
    #[error("{0} metadata entries exceed lnet_interfaces_max")]
    TooManyMetadataEntries(usize),
}

impl PingInfo {
    /// `pi_features` as [`PingInfo::emit`] writes it: `LARGE_ADDR` and `METADATA` are set when
    /// their entries exist. lustre: api-ni.c `lnet_ping_target_install_locked()`.
    pub fn wire_features(&self) -> u32 {
        let mut features = self.features;
        if !self.large.is_empty() {
            features |= LNET_PING_FEAT_LARGE_ADDR;
        }
        if !self.metadata.is_empty() {
            features |= LNET_PING_FEAT_METADATA;
        }
        features
    }

    /// Bytes from `pi_magic` through the last large entry (`lnet_ping_info_size`): what a
    /// receiver needs for the NID lists, and what it sizes its next ping's sink by.
    pub fn info_size(&self) -> usize {
        let large: usize = self.large.iter().map(|entry| large_entry_len(&entry.nid)).sum();
        nid4_table_end(self.nids.len() + 1) + large
    }

    /// Total bytes [`PingInfo::emit`] writes: the info plus, when present, the metadata table.
    /// A kernel serving metadata pads this with zeros to `info_size() + METADATA_RESERVED_LEN`.
    pub fn buffer_len(&self) -> usize {
        self.info_size() + self.metadata_len()
    }

    /// The peer's primary NID as discovery picks it: the first large entry with a large
    /// address when `PRIMARY_LARGE` is set and one exists, else the first nid4 entry after lo,
    /// else none. lustre: lnet/lnet/peer.c `find_primary()`.
    pub fn primary_nid(&self) -> Option<Nid> {
        if self.features & LNET_PING_FEAT_PRIMARY_LARGE != 0
            && let Some(entry) = self.large.iter().find(|entry| entry.nid.size() != 0)
        {
            return Some(entry.nid);
        }
        self.nids.first().map(|entry| entry.nid)
    }

    /// Every listed interface after `0@lo`, in the order a receiver walks them (nid4 table,
    /// then large entries). lustre: peer.c `ping_iter_next()`.
    pub fn entries(&self) -> impl Iterator<Item = &NiStatus> {
        self.nids.iter().chain(&self.large)
    }

    /// Encodes the buffer as a kernel builds it into the first [`PingInfo::buffer_len`] bytes
    /// of `buf` and returns that length. lustre: api-ni.c `lnet_ping_target_install_locked()`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, PingEmitError> {
        let interfaces = 1 + self.nids.len() + self.large.len();
        if interfaces > LNET_INTERFACES_MAX as usize {
            return Err(PingEmitError::TooManyNis(interfaces));
        }
        if self.metadata.len() > LNET_INTERFACES_MAX as usize {
            return Err(PingEmitError::TooManyMetadataEntries(self.metadata.len()));
        }
        if let Some(entry) = self.nids.iter().find(|entry| entry.nid.to_nid4().is_none()) {
            return Err(PingEmitError::NidNotNid4(entry.nid));
        }
        if self.large.iter().any(|entry| entry.nid.is_any()) {
            return Err(PingEmitError::AnyNidInLargeEntry);
        }
        let needed = self.buffer_len();
        let len = buf.len();
        let Some(out) = buf.get_mut(..needed) else {
            return Err(PingEmitError::BufferTooSmall { needed, len });
        };
        out.fill(0);
        let features = self.wire_features();
        let info_size = self.info_size();
        let mut writer = Writer::new(out, ByteOrder::LittleEndian);
        writer.u32(LNET_PROTO_PING_MAGIC);
        writer.u32(features);
        writer.u32(self.pid);
        // Cannot truncate: bounded by LNET_INTERFACES_MAX above.
        writer.u32((self.nids.len() + 1) as u32);
        // Entry 0: `0@lo`, the sequence number as its status, the info size when large.
        writer.u64(Nid::LO_0.to_nid4_lossy());
        writer.u32(self.sequence);
        let msg_size = if features & LNET_PING_FEAT_LARGE_ADDR != 0 { info_size } else { 0 };
        // Cannot truncate: at most 4096 entries of at most 24 bytes each.
        writer.u32(msg_size as u32);
        for entry in &self.nids {
            // Exact: every NID here was checked to have a nid4 form.
            writer.u64(entry.nid.to_nid4_lossy());
            writer.u32(entry.status);
            writer.u32(0);
        }
        for entry in &self.large {
            let stride = large_entry_len(&entry.nid);
            let start = writer.position();
            writer.u32(entry.status);
            let nid = entry.nid.to_large_bytes();
            writer.bytes(nid.get(..entry.nid.wire_len()).unwrap_or(&nid));
            writer.zeros((start + stride).saturating_sub(writer.position()));
        }
        if self.has_metadata_area(features) {
            // Cannot truncate: bounded by LNET_INTERFACES_MAX above.
            writer.u32(self.metadata.len() as u32);
            for entry in &self.metadata {
                writer.u64(entry.nid4);
                writer.bytes(&entry.lnd_data);
            }
        }
        // `buffer_len()` counts every field written; a mismatch would be a bug here, and the
        // writer drops what does not fit rather than panicking.
        debug_assert!(writer.position() <= needed, "ping emit overran buffer_len()");
        Ok(needed)
    }

    /// [`PingInfo::emit`] into a new buffer of exactly [`PingInfo::buffer_len`] bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>, PingEmitError> {
        let mut out = vec![0; self.buffer_len()];
        self.emit(&mut out)?;
        Ok(out)
    }

    /// Decodes and validates a received ping reply or push, swapping a byte-reversed buffer.
    /// Returns the info and the bytes used (the info size, plus the metadata table when it
    /// arrived whole; a partially received table is left out, as a sink cut by `sink_length`
    /// loses it). Large entries whose NID claims more than 20 bytes are skipped as kernels do.
    /// lustre: api-ni.c `lnet_swap_pinginfo()`, `lnet_ping_info_validate()`; peer.c
    /// `lnet_discovery_event_reply()` (truncation), `ping_iter_next()` (entry walk).
    pub fn parse(buf: &[u8]) -> Result<(Self, usize), PingError> {
        let len = buf.len();
        if len < LNET_PING_INFO_HDR_SIZE {
            return Err(PingError::HeaderTruncated { len });
        }
        let magic = Reader::new(buf, ByteOrder::LittleEndian).u32_at(0);
        let magic = magic.ok_or(PingError::HeaderTruncated { len })?;
        let order =
            ByteOrder::detect(magic, LNET_PROTO_PING_MAGIC).ok_or(PingError::BadMagic(magic))?;
        let reader = Reader::new(buf, order);
        let header = |at| reader.u32_at(at).ok_or(PingError::HeaderTruncated { len });
        let features = header(4)?;
        let pid = header(8)?;
        let nnis = header(12)?;
        if features & LNET_PING_FEAT_NI_STATUS == 0 {
            return Err(PingError::NoNiStatus(features));
        }
        if !(1..=LNET_INTERFACES_MAX).contains(&nnis) {
            return Err(PingError::NiCountOutOfRange(nnis));
        }
        let large_addr = features & LNET_PING_FEAT_LARGE_ADDR != 0;
        // In range: nnis <= LNET_INTERFACES_MAX.
        let nid4_end = nid4_table_end(nnis as usize);
        let entry0_end = nid4_table_end(1);
        if len < entry0_end {
            // Entry 0 (and with LARGE_ADDR the exact size in it) did not arrive.
            return Err(PingError::Truncated { info_size: nid4_end, len });
        }
        let entry0_truncated = PingError::Truncated { info_size: nid4_end, len };
        let lo = reader.u64_at(LNET_PING_INFO_HDR_SIZE).ok_or(entry0_truncated)?;
        if lo != Nid::LO_0.to_nid4_lossy() {
            return Err(PingError::FirstEntryNotLoopback(lo));
        }
        let sequence = reader.u32_at(LNET_PING_INFO_HDR_SIZE + 8).ok_or(entry0_truncated)?;
        let info_size = if large_addr {
            let msg_size = reader.u32_at(LNET_PING_INFO_HDR_SIZE + 12).ok_or(entry0_truncated)?;
            // Widening: usize is at least 32 bits on every target this crate supports.
            let info_size = (msg_size & !3) as usize;
            if info_size < nid4_end {
                return Err(PingError::InfoSizeTooSmall { info_size, nid4_end });
            }
            info_size
        } else {
            nid4_end
        };
        if info_size > len {
            return Err(PingError::Truncated { info_size, len });
        }
        let truncated = PingError::Truncated { info_size, len };

        // Bounded: nnis <= LNET_INTERFACES_MAX and the whole table is inside `buf`.
        let mut nids = Vec::with_capacity(nnis as usize - 1);
        for at in (entry0_end..nid4_end).step_by(NI_STATUS_LEN) {
            let nid = Nid::from_nid4(reader.u64_at(at).ok_or(truncated)?);
            let status = reader.u32_at(at + 8).ok_or(truncated)?;
            nids.push(NiStatus { nid, status });
        }

        let mut large = Vec::new();
        if large_addr {
            let mut at = nid4_end;
            while at < info_size {
                // Status plus the NID's size, type and number decide the entry's length.
                let head = buf.get(at..).and_then(<[u8]>::first_chunk::<8>);
                let Some(&[_, _, _, _, nid_size, nid_type, _, _]) =
                    head.filter(|_| at + 8 <= info_size)
                else {
                    return Err(PingError::LargeEntryOverrun(at));
                };
                let stride = large_entry_len_raw(nid_size, nid_type);
                let Some(entry) = buf.get(at..at + stride).filter(|_| at + stride <= info_size)
                else {
                    return Err(PingError::LargeEntryOverrun(at));
                };
                let nid_bytes = usize::from(nid_size) + 8;
                if nid_bytes <= LARGE_NID_LEN {
                    let status = reader.u32_at(at).ok_or(truncated)?;
                    let mut raw = [0u8; LARGE_NID_LEN];
                    let src = entry.get(4..4 + nid_bytes).ok_or(truncated)?;
                    raw.get_mut(..nid_bytes).ok_or(truncated)?.copy_from_slice(src);
                    // nid_size <= 12 here, so the only decode error cannot occur; should it,
                    // the entry is skipped like any other unusable one. A wildcard type makes
                    // the NID LNET_ANY_NID whatever its size says: no interface, so skipped as
                    // a kernel's size-0xFF ANY entry is (and as emit refuses to write one).
                    if let Ok(nid) = Nid::from_large_bytes(&raw)
                        && !nid.is_any()
                    {
                        large.push(NiStatus { nid, status });
                    }
                }
                at += stride;
            }
        }

        let mut info = PingInfo { features, pid, sequence, nids, large, metadata: Vec::new() };
        let mut used = info_size;
        if info.has_metadata_area(features)
            && let Some(count) = reader.u32_at(info_size)
        {
            if count > LNET_INTERFACES_MAX {
                return Err(PingError::MetadataCountOutOfRange(count));
            }
            // In range: count <= LNET_INTERFACES_MAX.
            let table_len = 4 + NID_MD_ENTRY_LEN * count as usize;
            if let Some(table) = buf.get(info_size + 4..info_size + table_len) {
                info.metadata = table
                    .chunks_exact(NID_MD_ENTRY_LEN)
                    .filter_map(|chunk| {
                        let (nid4, lnd_data) = chunk.split_first_chunk::<8>()?;
                        Some(NidMetadata {
                            nid4: order.u64_from(*nid4),
                            lnd_data: lnd_data.try_into().ok()?,
                        })
                    })
                    .collect();
                used = info_size + table_len;
            }
        }
        Ok((info, used))
    }

    /// Whether a metadata table follows the info: `METADATA` set, or any nid4 entry on EFA,
    /// which always carries metadata. lustre: api-ni.c `lnet_peer_has_metadata()`.
    fn has_metadata_area(&self, features: u32) -> bool {
        features & LNET_PING_FEAT_METADATA != 0
            || self.nids.iter().any(|entry| entry.nid.lnd() == LndType::EFA)
    }

    fn metadata_len(&self) -> usize {
        if self.has_metadata_area(self.wire_features()) {
            4 + NID_MD_ENTRY_LEN * self.metadata.len()
        } else {
            0
        }
    }
}

impl NiStatus {
    pub fn up(nid: Nid) -> Self {
        Self { nid, status: LNET_NI_STATUS_UP }
    }

    pub fn is_up(&self) -> bool {
        self.status == LNET_NI_STATUS_UP
    }
}

/// End of the nid4 table holding `entries` entries, lo included.
fn nid4_table_end(entries: usize) -> usize {
    LNET_PING_INFO_HDR_SIZE + NI_STATUS_LEN * entries
}

/// Bytes a large entry for `nid` occupies. lustre: lib-types.h `lnet_ping_sts_size()`.
fn large_entry_len(nid: &Nid) -> usize {
    if nid.is_any() {
        return large_entry_len_raw(0xff, LndType::ANY.0);
    }
    large_entry_len_raw(nid.size(), nid.lnd().0)
}

/// [`large_entry_len`] from the NID's size and type bytes, as a reader computes it: ANY takes
/// a whole `struct lnet_ni_large_status`, a 4-byte address the size of a nid4 entry, anything
/// else its status and real NID bytes rounded up to 4.
fn large_entry_len_raw(nid_size: u8, nid_type: u8) -> usize {
    if nid_type == LndType::ANY.0 {
        4 + LARGE_NID_LEN
    } else if nid_size == 0 {
        NI_STATUS_LEN
    } else {
        (4 + usize::from(nid_size) + 8).next_multiple_of(4)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::Net;
    use proptest::prelude::*;
    use std::net::Ipv4Addr;

    const KERNEL_FEATURES: u32 = 0x1e;

    fn client() -> Nid {
        Nid::ipv4(Net::TCP, Ipv4Addr::new(192, 168, 1, 2))
    }

    fn v6() -> Nid {
        Nid::ipv6(Net::TCP, "2001:db8::1".parse().unwrap())
    }

    /// What a kernel with lo and 192.168.1.2@tcp serves: 48 bytes.
    fn kernel_buffer() -> Vec<u8> {
        [
            &[0x67, 0x6e, 0x69, 0x70, 0x1e, 0, 0, 0, 0x39, 0x30, 0, 0, 2, 0, 0, 0][..],
            &[0, 0, 0, 0, 0, 0, 9, 0, 7, 0, 0, 0, 0, 0, 0, 0],
            &[2, 1, 0xa8, 0xc0, 0, 0, 2, 0, 0xde, 0xc0, 0xaa, 0x15, 0, 0, 0, 0],
        ]
        .concat()
    }

    fn kernel_info() -> PingInfo {
        PingInfo {
            features: KERNEL_FEATURES,
            pid: 12345,
            sequence: 7,
            nids: vec![NiStatus::up(client())],
            large: vec![],
            metadata: vec![],
        }
    }

    /// An IPv6-only node: lo, then one 24-byte large entry; entry 0 holds the size, 56.
    fn ipv6_buffer() -> Vec<u8> {
        [
            &[0x67, 0x6e, 0x69, 0x70, 0x7e, 0, 0, 0, 0x39, 0x30, 0, 0, 1, 0, 0, 0][..],
            &[0, 0, 0, 0, 0, 0, 9, 0, 3, 0, 0, 0, 56, 0, 0, 0],
            &[0xde, 0xc0, 0xaa, 0x15, 0x0c, 0x02, 0, 0],
            &[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
        ]
        .concat()
    }

    fn ipv6_info() -> PingInfo {
        PingInfo {
            features: 0x7e,
            pid: 12345,
            sequence: 3,
            nids: vec![],
            large: vec![NiStatus::up(v6())],
            metadata: vec![],
        }
    }

    /// Byte-reverses what a big-endian sender would: header, nid4 entries and entry 0's
    /// msg_size; only the status of large entries.
    fn swap(buf: &[u8], nnis: usize, large_at: &[usize]) -> Vec<u8> {
        let mut out = buf.to_vec();
        for at in [0, 4, 8, 12] {
            out[at..at + 4].reverse();
        }
        for entry in 0..nnis {
            let at = 16 + 16 * entry;
            out[at..at + 8].reverse();
            out[at + 8..at + 12].reverse();
            if entry == 0 {
                out[at + 12..at + 16].reverse();
            }
        }
        for &at in large_at {
            out[at..at + 4].reverse();
        }
        out
    }

    #[test]
    fn kernel_lo_plus_tcp_is_48_bytes() {
        let info = kernel_info();
        assert_eq!(info.info_size(), 48);
        assert_eq!(info.to_bytes().unwrap(), kernel_buffer());
        assert_eq!(PingInfo::parse(&kernel_buffer()), Ok((info.clone(), 48)));
        assert_eq!(info.primary_nid(), Some(client()));
        // A 272-byte sink: the rest of the reply is whatever followed, and is not looked at.
        let mut sink = kernel_buffer();
        sink.resize(LNET_PING_INFO_MIN_SIZE, 0xee);
        assert_eq!(PingInfo::parse(&sink), Ok((info, 48)));
    }

    #[test]
    fn ipv6_only_node_uses_a_24_byte_large_entry() {
        let info = ipv6_info();
        assert_eq!(info.info_size(), 56);
        assert_eq!(info.to_bytes().unwrap(), ipv6_buffer());
        assert_eq!(PingInfo::parse(&ipv6_buffer()), Ok((info.clone(), 56)));
        assert_eq!(info.primary_nid(), Some(v6()));
        // LARGE_ADDR is derived from the entries.
        let without = PingInfo { features: 0x5e, ..info };
        assert_eq!(without.wire_features(), 0x7e);
        assert_eq!(without.to_bytes().unwrap(), ipv6_buffer());
    }

    #[test]
    fn byte_swapped_buffers_are_accepted() {
        let swapped = swap(&kernel_buffer(), 2, &[]);
        assert_eq!(&swapped[..4], &[0x70, 0x69, 0x6e, 0x67]);
        assert_eq!(PingInfo::parse(&swapped), Ok((kernel_info(), 48)));
        // Large NIDs are never swapped, only their status.
        let swapped = swap(&ipv6_buffer(), 1, &[32]);
        assert_eq!(PingInfo::parse(&swapped), Ok((ipv6_info(), 56)));
    }

    #[test]
    fn primary_nid_rules() {
        // PRIMARY_LARGE without a large-address entry falls back to the first nid4 entry.
        let mut info =
            PingInfo { features: KERNEL_FEATURES | LNET_PING_FEAT_PRIMARY_LARGE, ..kernel_info() };
        assert_eq!(info.primary_nid(), Some(client()));
        info.large.push(NiStatus::up(v6()));
        assert_eq!(info.primary_nid(), Some(v6()));
        info.features = KERNEL_FEATURES;
        assert_eq!(info.primary_nid(), Some(client()));
        // Without PRIMARY_LARGE the large entries never name the primary.
        let lonely = PingInfo { features: KERNEL_FEATURES, ..ipv6_info() };
        assert_eq!(lonely.primary_nid(), None);
        let empty = PingInfo { nids: vec![], ..kernel_info() };
        assert_eq!(empty.primary_nid(), None);
        assert_eq!(info.entries().map(|entry| entry.nid).collect::<Vec<_>>(), [client(), v6()]);
    }

    #[test]
    fn oversized_large_entries_are_skipped() {
        // lo, one entry claiming a 21-byte NID (size 13: 4 + 21 -> 28 bytes), then the IPv6 one.
        let mut buf = ipv6_buffer();
        let mut bogus = vec![0u8; 28];
        bogus[..4].copy_from_slice(&LNET_NI_STATUS_UP.to_le_bytes());
        bogus[4] = 13;
        bogus[5] = 2;
        buf.splice(32..32, bogus);
        buf[28..32].copy_from_slice(&84u32.to_le_bytes());
        assert_eq!(PingInfo::parse(&buf), Ok((ipv6_info(), 84)));
    }

    /// Regression (fuzz target ping_buffer): an entry of type 0xFF with a small size decoded as
    /// LNET_ANY_NID and was kept, so the parsed buffer could not be emitted again.
    #[test]
    fn wildcard_large_entries_are_skipped() {
        // lo, a 24-byte entry {size 0, type 0xFF}, then the IPv6 one.
        let mut buf = ipv6_buffer();
        let mut wildcard = vec![0u8; 24];
        wildcard[..4].copy_from_slice(&LNET_NI_STATUS_UP.to_le_bytes());
        wildcard[5] = 0xff;
        wildcard[8..12].copy_from_slice(&[10, 0, 0, 1]);
        buf.splice(32..32, wildcard);
        buf[28..32].copy_from_slice(&80u32.to_le_bytes());
        let (info, used) = PingInfo::parse(&buf).unwrap();
        assert_eq!((&info, used), (&ipv6_info(), 80));
        assert_eq!(info.to_bytes().unwrap(), ipv6_buffer());
    }

    #[test]
    fn large_entry_with_a_nid4_address_takes_16_bytes() {
        let info = PingInfo { large: vec![NiStatus::up(client())], ..ipv6_info() };
        let bytes = info.to_bytes().unwrap();
        assert_eq!(bytes.len(), 48);
        assert_eq!(
            &bytes[32..48],
            &[0xde, 0xc0, 0xaa, 0x15, 0, 2, 0, 0, 0xc0, 0xa8, 1, 2, 0, 0, 0, 0]
        );
        assert_eq!(PingInfo::parse(&bytes), Ok((info.clone(), 48)));
        // Not a large address, so not a PRIMARY_LARGE candidate.
        assert_eq!(info.primary_nid(), None);
    }

    #[test]
    fn metadata_follows_the_info() {
        let entry = NidMetadata { nid4: client().to_nid4().unwrap(), lnd_data: [0x5a; 32] };
        let info = PingInfo { metadata: vec![entry], ..kernel_info() };
        assert_eq!(info.wire_features(), KERNEL_FEATURES | LNET_PING_FEAT_METADATA);
        let bytes = info.to_bytes().unwrap();
        assert_eq!(bytes.len(), 48 + 4 + 40);
        assert_eq!(&bytes[48..52], &[1, 0, 0, 0]);
        assert_eq!(&bytes[52..60], &[2, 1, 0xa8, 0xc0, 0, 0, 2, 0]);
        let expected = PingInfo { features: info.wire_features(), ..info.clone() };
        assert_eq!(PingInfo::parse(&bytes), Ok((expected.clone(), 92)));
        // A kernel pads the table to its reserved size with zeros.
        let mut padded = bytes.clone();
        padded.resize(48 + METADATA_RESERVED_LEN, 0);
        assert_eq!(PingInfo::parse(&padded), Ok((expected.clone(), 92)));
        // A table cut by the sink is left out; the info itself is whole.
        let cut = PingInfo { metadata: vec![], ..expected };
        assert_eq!(PingInfo::parse(&bytes[..91]), Ok((cut.clone(), 48)));
        assert_eq!(PingInfo::parse(&bytes[..50]), Ok((cut, 48)));
    }

    #[test]
    fn efa_nids_imply_a_metadata_table() {
        let efa = Nid::ipv4(Net::new(LndType::EFA, 0), Ipv4Addr::new(10, 0, 0, 9));
        let info = PingInfo { nids: vec![NiStatus::up(efa)], ..kernel_info() };
        let bytes = info.to_bytes().unwrap();
        assert_eq!(bytes.len(), 52, "count word written even without METADATA");
        assert_eq!(PingInfo::parse(&bytes), Ok((info, 52)));
    }

    #[test]
    fn truncated_replies_report_the_claimed_size() {
        assert_eq!(
            PingInfo::parse(&kernel_buffer()[..40]),
            Err(PingError::Truncated { info_size: 48, len: 40 })
        );
        assert_eq!(
            PingInfo::parse(&ipv6_buffer()[..40]),
            Err(PingError::Truncated { info_size: 56, len: 40 })
        );
        // Entry 0 missing: only a lower bound is known.
        assert_eq!(
            PingInfo::parse(&ipv6_buffer()[..20]),
            Err(PingError::Truncated { info_size: 32, len: 20 })
        );
        assert_eq!(
            PingInfo::parse(&kernel_buffer()[..16]),
            Err(PingError::Truncated { info_size: 48, len: 16 })
        );
    }

    #[test]
    fn short_header_is_rejected() {
        assert_eq!(PingInfo::parse(&[]), Err(PingError::HeaderTruncated { len: 0 }));
        assert_eq!(
            PingInfo::parse(&kernel_buffer()[..15]),
            Err(PingError::HeaderTruncated { len: 15 })
        );
    }

    #[test]
    fn bad_magic_is_rejected() {
        let mut buf = kernel_buffer();
        buf[0] = 0x68;
        assert_eq!(PingInfo::parse(&buf), Err(PingError::BadMagic(0x7069_6e68)));
    }

    #[test]
    fn missing_ni_status_is_rejected() {
        let mut buf = kernel_buffer();
        buf[4] = 0x1c;
        assert_eq!(PingInfo::parse(&buf), Err(PingError::NoNiStatus(0x1c)));
    }

    #[test]
    fn ni_count_out_of_range_is_rejected() {
        let mut buf = kernel_buffer();
        buf[12..16].copy_from_slice(&0u32.to_le_bytes());
        assert_eq!(PingInfo::parse(&buf), Err(PingError::NiCountOutOfRange(0)));
        buf[12..16].copy_from_slice(&4097u32.to_le_bytes());
        assert_eq!(PingInfo::parse(&buf), Err(PingError::NiCountOutOfRange(4097)));
        // The bound itself is allowed: it then needs the whole table.
        buf[12..16].copy_from_slice(&4096u32.to_le_bytes());
        assert_eq!(
            PingInfo::parse(&buf),
            Err(PingError::Truncated { info_size: 16 + 16 * 4096, len: 48 })
        );
    }

    #[test]
    fn first_entry_must_be_loopback() {
        let mut buf = kernel_buffer();
        buf[16..24].copy_from_slice(&client().to_nid4().unwrap().to_le_bytes());
        assert_eq!(
            PingInfo::parse(&buf),
            Err(PingError::FirstEntryNotLoopback(0x0002_0000_c0a8_0102))
        );
    }

    #[test]
    fn info_size_below_the_nid4_table_is_rejected() {
        let mut buf = kernel_buffer();
        buf[4] |= LNET_PING_FEAT_LARGE_ADDR as u8;
        buf[28..32].copy_from_slice(&40u32.to_le_bytes());
        assert_eq!(
            PingInfo::parse(&buf),
            Err(PingError::InfoSizeTooSmall { info_size: 40, nid4_end: 48 })
        );
    }

    #[test]
    fn large_entry_overrun_is_rejected() {
        // Info size claims 4 bytes past entry 0: not even a status and NID header.
        let mut buf = ipv6_buffer();
        buf[28..32].copy_from_slice(&36u32.to_le_bytes());
        assert_eq!(PingInfo::parse(&buf), Err(PingError::LargeEntryOverrun(32)));
        // Room for the entry header but not its 24 bytes.
        buf[28..32].copy_from_slice(&52u32.to_le_bytes());
        assert_eq!(PingInfo::parse(&buf), Err(PingError::LargeEntryOverrun(32)));
    }

    #[test]
    fn metadata_count_out_of_range_is_rejected() {
        let mut buf = kernel_buffer();
        buf[4] |= LNET_PING_FEAT_METADATA as u8;
        buf.extend_from_slice(&4097u32.to_le_bytes());
        assert_eq!(PingInfo::parse(&buf), Err(PingError::MetadataCountOutOfRange(4097)));
    }

    #[test]
    fn emit_errors() {
        let info = kernel_info();
        assert_eq!(
            info.emit(&mut [0; 47]),
            Err(PingEmitError::BufferTooSmall { needed: 48, len: 47 })
        );
        let bad = PingInfo { nids: vec![NiStatus::up(v6())], ..kernel_info() };
        assert_eq!(bad.to_bytes(), Err(PingEmitError::NidNotNid4(v6())));
        let bad = PingInfo { large: vec![NiStatus::up(Nid::ANY)], ..kernel_info() };
        assert_eq!(bad.to_bytes(), Err(PingEmitError::AnyNidInLargeEntry));
        let many = vec![NiStatus::up(client()); 4096];
        let bad = PingInfo { nids: many, ..kernel_info() };
        assert_eq!(bad.to_bytes(), Err(PingEmitError::TooManyNis(4097)));
        let entry = NidMetadata { nid4: 0, lnd_data: [0; 32] };
        let bad = PingInfo { metadata: vec![entry; 4097], ..kernel_info() };
        assert_eq!(bad.to_bytes(), Err(PingEmitError::TooManyMetadataEntries(4097)));
    }

    fn any_nid4() -> impl Strategy<Value = Nid> {
        (0u8..0xff, any::<u16>(), any::<u32>())
            .prop_map(|(lnd, number, addr)| Nid::new4(Net::new(LndType(lnd), number), addr))
    }

    fn any_large_nid() -> impl Strategy<Value = Nid> {
        prop_oneof![
            any_nid4(),
            (0u8..0xff, any::<u16>(), any::<[u8; 16]>()).prop_map(|(lnd, number, addr)| Nid::ipv6(
                Net::new(LndType(lnd), number),
                addr.into()
            )),
            // Odd address lengths a future LND might use.
            (1u8..=12, 0u8..0xff, any::<[u8; 18]>()).prop_map(|(size, lnd, rest)| {
                let mut raw = [0u8; 20];
                raw[0] = size;
                raw[1] = lnd;
                let len = usize::from(size) + 6;
                raw[2..2 + len].copy_from_slice(&rest[..len]);
                Nid::from_large_bytes(&raw).unwrap()
            }),
        ]
    }

    fn any_entry(nid: impl Strategy<Value = Nid>) -> impl Strategy<Value = NiStatus> {
        (nid, any::<u32>()).prop_map(|(nid, status)| NiStatus { nid, status })
    }

    fn any_info() -> impl Strategy<Value = PingInfo> {
        (
            any::<u32>(),
            any::<u32>(),
            any::<u32>(),
            proptest::collection::vec(any_entry(any_nid4()), 0..6),
            proptest::collection::vec(any_entry(any_large_nid()), 0..6),
            proptest::collection::vec(
                (any::<u64>(), any::<[u8; 32]>())
                    .prop_map(|(nid4, lnd_data)| NidMetadata { nid4, lnd_data }),
                0..3,
            ),
        )
            .prop_map(|(features, pid, sequence, nids, large, metadata)| PingInfo {
                features: features | LNET_PING_FEAT_NI_STATUS,
                pid,
                sequence,
                nids,
                large,
                metadata,
            })
    }

    proptest! {
        #[test]
        fn round_trip(info in any_info()) {
            let bytes = info.to_bytes().unwrap();
            prop_assert_eq!(bytes.len(), info.buffer_len());
            prop_assert_eq!(bytes.len() % 4, 0);
            let expected = PingInfo { features: info.wire_features(), ..info.clone() };
            prop_assert_eq!(PingInfo::parse(&bytes), Ok((expected, bytes.len())));
            // Any cut inside the info is reported with the real size.
            if info.info_size() > 32 {
                let cut = &bytes[..info.info_size() - 1];
                prop_assert_eq!(
                    PingInfo::parse(cut),
                    Err(PingError::Truncated { info_size: info.info_size(), len: cut.len() })
                );
            }
        }

        #[test]
        fn parse_is_total(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = PingInfo::parse(&bytes);
        }

        #[test]
        fn parse_is_total_past_the_header(
            features in any::<u32>(),
            nnis in 0u32..8,
            msg_size in 0u32..400,
            tail in proptest::collection::vec(any::<u8>(), 0..400),
        ) {
            // A valid prefix so the entry walk, large entries and metadata see random bytes.
            let mut buf = Vec::new();
            buf.extend_from_slice(&LNET_PROTO_PING_MAGIC.to_le_bytes());
            buf.extend_from_slice(&(features | LNET_PING_FEAT_NI_STATUS).to_le_bytes());
            buf.extend_from_slice(&12345u32.to_le_bytes());
            buf.extend_from_slice(&nnis.to_le_bytes());
            buf.extend_from_slice(&Nid::LO_0.to_nid4().unwrap().to_le_bytes());
            buf.extend_from_slice(&1u32.to_le_bytes());
            buf.extend_from_slice(&msg_size.to_le_bytes());
            buf.extend_from_slice(&tail);
            if let Ok((info, used)) = PingInfo::parse(&buf) {
                prop_assert!(used <= buf.len());
                prop_assert!(info.nids.len() < 8);
            }
        }
    }
}
