//! Byte-exact codecs of the directory layout xattrs: `lmv_mds_md_v1` (`trusted.lmv` of a
//! striped directory and of each of its stripes), `lmv_user_md_v1` (a default layout in
//! `trusted.dmv`, or a `lfs mkdir` request), and the foreign LMV. All little-endian.
//! Layouts: docs/protocol/dirlayouts.md §2.

use super::{DecodeError, Fid, HashTypeField};

/// Master LMV of a striped directory.
// lustre: include/uapi/linux/lustre/lustre_idl.h LMV_MAGIC_V1
pub const LMV_MAGIC_V1: u32 = 0x0CD2_0CD0;
/// LMV of one stripe (header only; `master_mdt_index` holds the stripe's index).
// lustre: include/uapi/linux/lustre/lustre_idl.h LMV_MAGIC_STRIPE
pub const LMV_MAGIC_STRIPE: u32 = 0x0CD4_0CD0;
/// Foreign LMV: a free-format value Lustre does not interpret.
// lustre: include/uapi/linux/lustre/lustre_idl.h LMV_MAGIC_FOREIGN
pub const LMV_MAGIC_FOREIGN: u32 = 0x0CD5_0CD0;
/// `lmv_user_md` of a default layout or a plain request.
// lustre: include/uapi/linux/lustre/lustre_user.h LMV_USER_MAGIC
pub const LMV_USER_MAGIC: u32 = 0x0CD3_0CD0;
/// `lmv_user_md` listing the MDT of each stripe (`lfs mkdir -i 1,3,2`). Same value as
/// [`LMV_MAGIC_STRIPE`]: the xattr it is read from says which is meant.
// lustre: include/uapi/linux/lustre/lustre_user.h LMV_USER_MAGIC_SPECIFIC
pub const LMV_USER_MAGIC_SPECIFIC: u32 = 0x0CD4_0CD0;

/// Most stripes a directory may have; decoders refuse larger counts before allocating.
// lustre: include/uapi/linux/lustre/lustre_user.h LMV_MAX_STRIPE_COUNT
pub const LMV_MAX_STRIPE_COUNT: u32 = 2000;
/// Most stripes of one directory on one MDT when overstriped.
// lustre: include/uapi/linux/lustre/lustre_user.h LMV_MAX_STRIPES_PER_MDT
pub const LMV_MAX_STRIPES_PER_MDT: u32 = 5;
/// `sizeof(struct lmv_mds_md_v1)` without its stripe FIDs.
pub const LMV_MDS_MD_HEADER_SIZE: usize = 56;
/// `sizeof(struct lmv_user_md_v1)` without its per-stripe entries.
pub const LMV_USER_MD_HEADER_SIZE: usize = 48;
/// `sizeof(struct lmv_user_mds_data)`: FID, padding, MDT index.
pub const LMV_USER_MDS_DATA_SIZE: usize = 24;
/// `offsetof(struct lmv_foreign_md, lfm_value)`.
pub const LMV_FOREIGN_HEADER_SIZE: usize = 16;
/// Longest foreign value the client accepts: below `XATTR_SIZE_MAX` (65536) minus the header.
// lustre: lustre/llite/dir.c ll_dir_ioctl() LL_IOC_LMV_GETSTRIPE
pub const LMV_FOREIGN_MAX_VALUE: u32 = 65536 - LMV_FOREIGN_HEADER_SIZE as u32 - 1;

/// The 16-byte `lmv_pool_name` / `lum_pool_name` field, kept as stored.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct PoolName(pub [u8; 16]);

impl PoolName {
    /// Longest pool name (`LOV_MAXPOOLNAME`); the 16th byte is the terminator.
    // lustre: include/uapi/linux/lustre/lustre_user.h LOV_MAXPOOLNAME
    pub const MAX_LEN: usize = 15;

    /// A pool name of at most [`Self::MAX_LEN`] bytes without NUL.
    pub fn new(name: &[u8]) -> Option<Self> {
        if name.len() > Self::MAX_LEN || name.contains(&0) {
            return None;
        }
        let mut bytes = [0; 16];
        bytes.get_mut(..name.len())?.copy_from_slice(name);
        Some(Self(bytes))
    }

    /// The name as C reads it: up to the first NUL, at most [`Self::MAX_LEN`] bytes.
    pub fn as_bytes(&self) -> &[u8] {
        let end = self.0.iter().take(Self::MAX_LEN).position(|&b| b == 0).unwrap_or(Self::MAX_LEN);
        self.0.get(..end).unwrap_or(&[])
    }
}

/// Which `lmv_mds_md_v1` an xattr holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MdsMdKind {
    /// [`LMV_MAGIC_V1`]: the master inode's layout, with every stripe's FID.
    Master,
    /// [`LMV_MAGIC_STRIPE`]: one stripe's copy of the header, without FIDs.
    Stripe,
}

/// `struct lmv_mds_md_v1`. The padding fields decode as ignored and encode as zero.
// lustre: include/uapi/linux/lustre/lustre_idl.h struct lmv_mds_md_v1
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LmvMdsMd {
    pub kind: MdsMdKind,
    /// Stripes of the directory. A master carries this many FIDs; a stripe carries none.
    pub stripe_count: u32,
    /// On a master, the MDT holding the master inode; on a stripe, the stripe's index.
    pub master_mdt_index: u32,
    pub hash_type: HashTypeField,
    /// Bumped at each migration, restripe or LFSCK repair.
    pub layout_version: u32,
    /// During a layout change: the other layout's stripe count (docs §3.6).
    pub migrate_offset: u32,
    /// During a layout change: the other layout's hash type.
    pub migrate_hash: HashTypeField,
    pub pool_name: PoolName,
    /// Stripe FIDs in stripe order; empty on a [`MdsMdKind::Stripe`].
    pub stripe_fids: Vec<Fid>,
}

impl LmvMdsMd {
    /// Decodes a master or stripe LMV. Bytes past the FIDs are ignored, as Lustre does.
    // lustre: lustre/lmv/lmv_obd.c lmv_stripe_object_alloc() (length checks),
    // lustre/lod/lod_object.c lod_prep_slave_lmv_md()
    pub fn parse(bytes: &[u8]) -> Result<Self, DecodeError> {
        let header = Header::new(bytes, "lmv_mds_md_v1", LMV_MDS_MD_HEADER_SIZE)?;
        let kind = match header.u32_at(0) {
            LMV_MAGIC_V1 => MdsMdKind::Master,
            LMV_MAGIC_STRIPE => MdsMdKind::Stripe,
            other => return Err(DecodeError::UnknownMagic(other)),
        };
        let stripe_count = header.u32_at(4);
        let fid_count = match kind {
            MdsMdKind::Master => checked_count(stripe_count)?,
            MdsMdKind::Stripe => 0,
        };
        let mut pool = [0; 16];
        pool.copy_from_slice(header.slice(40, 16));
        let stripes = stripe_entries(bytes, LMV_MDS_MD_HEADER_SIZE, fid_count, Fid::SIZE)?;
        let stripe_fids = stripes.filter_map(Fid::parse).collect();
        Ok(Self {
            kind,
            stripe_count,
            master_mdt_index: header.u32_at(8),
            hash_type: HashTypeField(header.u32_at(12)),
            layout_version: header.u32_at(16),
            migrate_offset: header.u32_at(20),
            migrate_hash: HashTypeField(header.u32_at(24)),
            pool_name: PoolName(pool),
            stripe_fids,
        })
    }

    /// Bytes [`Self::emit`] writes.
    pub fn encoded_len(&self) -> usize {
        LMV_MDS_MD_HEADER_SIZE + self.stripe_fids.len() * Fid::SIZE
    }

    /// Appends the encoding: the header, then every entry of `stripe_fids`.
    pub fn emit(&self, out: &mut Vec<u8>) {
        let magic = match self.kind {
            MdsMdKind::Master => LMV_MAGIC_V1,
            MdsMdKind::Stripe => LMV_MAGIC_STRIPE,
        };
        for word in [
            magic,
            self.stripe_count,
            self.master_mdt_index,
            self.hash_type.0,
            self.layout_version,
            self.migrate_offset,
            self.migrate_hash.0,
            0,
        ] {
            out.extend_from_slice(&word.to_le_bytes());
        }
        out.extend_from_slice(&0u64.to_le_bytes());
        out.extend_from_slice(&self.pool_name.0);
        for fid in &self.stripe_fids {
            fid.emit(out);
        }
    }

    /// The encoding as a new buffer.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len());
        self.emit(&mut out);
        out
    }
}

/// Which `lmv_user_md_v1` a buffer holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UserMdKind {
    /// [`LMV_USER_MAGIC`]: header only (a default layout, or a request without an MDT list).
    Default,
    /// [`LMV_USER_MAGIC_SPECIFIC`]: followed by one `lmv_user_mds_data` per stripe.
    Specific,
}

/// One `struct lmv_user_mds_data`: a stripe's FID and MDT (the padding word encodes as zero).
// lustre: include/uapi/linux/lustre/lustre_user.h struct lmv_user_mds_data
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct UserMdsData {
    pub fid: Fid,
    pub mds: u32,
}

/// `struct lmv_user_md_v1`.
// lustre: include/uapi/linux/lustre/lustre_user.h struct lmv_user_md_v1
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LmvUserMd {
    pub kind: UserMdKind,
    /// Stripes asked for; -1 means every MDT, and with the overstriped flag -1..-5 mean that
    /// many stripes per MDT. A [`UserMdKind::Specific`] layout carries this many `objects`.
    pub stripe_count: i32,
    /// Starting MDT; `0xffffffff` (`LMV_OFFSET_DEFAULT`) lets the MDS choose.
    pub stripe_offset: u32,
    pub hash_type: HashTypeField,
    /// `LMV_TYPE_DEFAULT` (0) or `LMV_TYPE_RAW` (1).
    pub lum_type: u32,
    /// Inheritance depth of a default layout: 0 unlimited, 255 none.
    pub max_inherit: u8,
    /// Depth of round-robin placement inherited: 0 none, 255 unlimited.
    pub max_inherit_rr: u8,
    pub pool_name: PoolName,
    /// Per-stripe entries; encoded only for [`UserMdKind::Specific`].
    pub objects: Vec<UserMdsData>,
}

impl LmvUserMd {
    /// `LMV_OFFSET_DEFAULT`: no starting MDT requested.
    pub const OFFSET_DEFAULT: u32 = u32::MAX;

    /// Decodes a default or specific `lmv_user_md`; bytes past its entries are ignored.
    // lustre: include/uapi/linux/lustre/lustre_user.h lmv_user_md_size()
    pub fn parse(bytes: &[u8]) -> Result<Self, DecodeError> {
        let header = Header::new(bytes, "lmv_user_md_v1", LMV_USER_MD_HEADER_SIZE)?;
        let kind = match header.u32_at(0) {
            LMV_USER_MAGIC => UserMdKind::Default,
            LMV_USER_MAGIC_SPECIFIC => UserMdKind::Specific,
            other => return Err(DecodeError::UnknownMagic(other)),
        };
        let stripe_count = header.u32_at(4) as i32;
        let object_count = match kind {
            UserMdKind::Default => 0,
            UserMdKind::Specific => {
                let count = u32::try_from(stripe_count)
                    .map_err(|_| DecodeError::NegativeSpecificCount(stripe_count))?;
                checked_count(count)?
            }
        };
        let entries =
            stripe_entries(bytes, LMV_USER_MD_HEADER_SIZE, object_count, LMV_USER_MDS_DATA_SIZE)?;
        let objects = entries
            .filter_map(|entry| {
                let fid = Fid::parse(entry)?;
                let mds = u32::from_le_bytes(entry.get(20..24)?.try_into().ok()?);
                Some(UserMdsData { fid, mds })
            })
            .collect();
        let inherit = header.slice(20, 2);
        let mut pool = [0; 16];
        pool.copy_from_slice(header.slice(32, 16));
        Ok(Self {
            kind,
            stripe_count,
            stripe_offset: header.u32_at(8),
            hash_type: HashTypeField(header.u32_at(12)),
            lum_type: header.u32_at(16),
            max_inherit: inherit.first().copied().unwrap_or(0),
            max_inherit_rr: inherit.get(1).copied().unwrap_or(0),
            pool_name: PoolName(pool),
            objects,
        })
    }

    /// Bytes [`Self::emit`] writes.
    pub fn encoded_len(&self) -> usize {
        match self.kind {
            UserMdKind::Default => LMV_USER_MD_HEADER_SIZE,
            UserMdKind::Specific => {
                LMV_USER_MD_HEADER_SIZE + self.objects.len() * LMV_USER_MDS_DATA_SIZE
            }
        }
    }

    /// Appends the encoding: the header, then (specific layouts only) every object.
    pub fn emit(&self, out: &mut Vec<u8>) {
        let magic = match self.kind {
            UserMdKind::Default => LMV_USER_MAGIC,
            UserMdKind::Specific => LMV_USER_MAGIC_SPECIFIC,
        };
        for word in [magic, self.stripe_count as u32, self.stripe_offset, self.hash_type.0] {
            out.extend_from_slice(&word.to_le_bytes());
        }
        out.extend_from_slice(&self.lum_type.to_le_bytes());
        out.extend_from_slice(&[self.max_inherit, self.max_inherit_rr, 0, 0]);
        out.extend_from_slice(&[0; 8]);
        out.extend_from_slice(&self.pool_name.0);
        if self.kind == UserMdKind::Specific {
            for object in &self.objects {
                object.fid.emit(out);
                out.extend_from_slice(&0u32.to_le_bytes());
                out.extend_from_slice(&object.mds.to_le_bytes());
            }
        }
    }

    /// The encoding as a new buffer.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len());
        self.emit(&mut out);
        out
    }
}

/// `struct lmv_foreign_md`: a directory whose layout belongs to something outside Lustre.
// lustre: include/uapi/linux/lustre/lustre_idl.h struct lmv_foreign_md
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForeignLmv {
    /// `LU_FOREIGN_TYPE_*` (1 posix, 2 pccrw, 3 pccro, 4 S3, 0xda05 symlink).
    pub foreign_type: u32,
    pub flags: u32,
    /// `lfm_value`; its length is `lfm_length`.
    pub value: Vec<u8>,
}

impl ForeignLmv {
    /// Decodes a foreign LMV; bytes past the value are ignored.
    pub fn parse(bytes: &[u8]) -> Result<Self, DecodeError> {
        let header = Header::new(bytes, "lmv_foreign_md", LMV_FOREIGN_HEADER_SIZE)?;
        let magic = header.u32_at(0);
        if magic != LMV_MAGIC_FOREIGN {
            return Err(DecodeError::UnknownMagic(magic));
        }
        let length = header.u32_at(4);
        if length > LMV_FOREIGN_MAX_VALUE {
            return Err(DecodeError::ForeignTooLong { length, limit: LMV_FOREIGN_MAX_VALUE });
        }
        let rest = bytes.get(LMV_FOREIGN_HEADER_SIZE..).unwrap_or(&[]);
        let value = rest
            .get(..length as usize)
            .ok_or(DecodeError::ShortForeignValue { length, got: rest.len() })?;
        Ok(Self { foreign_type: header.u32_at(8), flags: header.u32_at(12), value: value.to_vec() })
    }

    /// Bytes [`Self::emit`] writes.
    pub fn encoded_len(&self) -> usize {
        LMV_FOREIGN_HEADER_SIZE + self.value.len()
    }

    /// Appends the encoding. `lfm_length` is the value's length (saturated at `u32::MAX`).
    pub fn emit(&self, out: &mut Vec<u8>) {
        let length = u32::try_from(self.value.len()).unwrap_or(u32::MAX);
        for word in [LMV_MAGIC_FOREIGN, length, self.foreign_type, self.flags] {
            out.extend_from_slice(&word.to_le_bytes());
        }
        out.extend_from_slice(&self.value);
    }

    /// The encoding as a new buffer.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len());
        self.emit(&mut out);
        out
    }
}

/// A directory layout xattr as `lfs getdirstripe` meets it, told apart by its magic:
/// `trusted.lmv` holds a master, stripe or foreign LMV, `trusted.dmv` a default `lmv_user_md`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DirLayout {
    Striped(LmvMdsMd),
    Foreign(ForeignLmv),
    Default(LmvUserMd),
}

impl DirLayout {
    /// Decodes by the first word. [`LMV_USER_MAGIC_SPECIFIC`] equals [`LMV_MAGIC_STRIPE`] and
    /// decodes as a stripe LMV: a specific `lmv_user_md` is a request, never stored.
    pub fn parse(bytes: &[u8]) -> Result<Self, DecodeError> {
        let header = Header::new(bytes, "LMV magic", 4)?;
        match header.u32_at(0) {
            LMV_MAGIC_V1 | LMV_MAGIC_STRIPE => LmvMdsMd::parse(bytes).map(Self::Striped),
            LMV_MAGIC_FOREIGN => ForeignLmv::parse(bytes).map(Self::Foreign),
            LMV_USER_MAGIC => LmvUserMd::parse(bytes).map(Self::Default),
            other => Err(DecodeError::UnknownMagic(other)),
        }
    }

    /// The encoding as a new buffer.
    pub fn to_bytes(&self) -> Vec<u8> {
        match self {
            Self::Striped(md) => md.to_bytes(),
            Self::Foreign(md) => md.to_bytes(),
            Self::Default(md) => md.to_bytes(),
        }
    }
}

/// A fixed-size header known to be present, read without further bounds failures.
struct Header<'a>(&'a [u8]);

impl<'a> Header<'a> {
    fn new(bytes: &'a [u8], format: &'static str, size: usize) -> Result<Self, DecodeError> {
        bytes.get(..size).map(Self).ok_or(DecodeError::ShortHeader {
            format,
            needed: size,
            got: bytes.len(),
        })
    }

    /// The little-endian word at `offset`; 0 past the header (callers stay inside it).
    fn u32_at(&self, offset: usize) -> u32 {
        self.0
            .get(offset..offset + 4)
            .and_then(|word| word.try_into().ok())
            .map_or(0, u32::from_le_bytes)
    }

    /// `len` bytes at `offset`, zeros past the header (callers stay inside it).
    fn slice(&self, offset: usize, len: usize) -> &'a [u8] {
        const ZEROS: [u8; 16] = [0; 16];
        self.0.get(offset..offset + len).unwrap_or(ZEROS.get(..len).unwrap_or(&[]))
    }
}

fn checked_count(count: u32) -> Result<usize, DecodeError> {
    if count > LMV_MAX_STRIPE_COUNT {
        return Err(DecodeError::StripeCountTooLarge { count, limit: LMV_MAX_STRIPE_COUNT });
    }
    Ok(count as usize)
}

/// The `count` entries of `size` bytes after `header`, or an error if they are cut short.
fn stripe_entries(
    bytes: &[u8],
    header: usize,
    count: usize,
    size: usize,
) -> Result<std::slice::ChunksExact<'_, u8>, DecodeError> {
    let needed = count * size;
    let body = bytes.get(header..).unwrap_or(&[]);
    let entries = body.get(..needed).ok_or(DecodeError::ShortStripes {
        count: count as u32,
        needed: header + needed,
        got: bytes.len(),
    })?;
    Ok(entries.chunks_exact(size))
}

#[cfg(test)]
mod tests;
