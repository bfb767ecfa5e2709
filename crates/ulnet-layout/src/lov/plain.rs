//! Plain RAID0/DoM layouts: `lov_mds_md_v1/v3` on the MDT and `lov_user_md_v1/v3` (and the
//! v3-shaped `SPECIFIC` request) from users: the same bytes (docs/protocol/layouts.md §2).
// lustre: lustre/include/uapi/linux/lustre/lustre_user.h struct lov_user_md_v1/v3,
// struct lov_user_ost_data_v1; lustre_idl.h struct lov_mds_md_v1/v3.

use super::bytes::{Put, Reader};
use super::error::{DecodeError, EncodeError};
use super::ostid::OstId;
use super::{
    LOV_MAGIC_SPECIFIC, LOV_MAGIC_V1, LOV_MAGIC_V3, LOV_MAX_STRIPE_COUNT, LOV_MAXPOOLNAME,
    LOV_PATTERN_MDT, LOV_PATTERN_OVERSTRIPING,
};

/// Bytes before the objects of a v1 layout.
pub const V1_HEADER_SIZE: usize = 32;
/// Bytes before the objects of a v3 (or specific) layout: v1 plus the 16-byte pool name.
pub const V3_HEADER_SIZE: usize = 48;
/// Bytes of one `lov_ost_data_v1` object slot.
pub const OBJECT_SIZE: usize = 24;

/// A pool name: at most [`LOV_MAXPOOLNAME`] bytes, no NUL.
#[derive(Debug, Clone, PartialEq, Eq, Default, Hash)]
pub struct PoolName(String);

impl PoolName {
    /// `name` if it fits `lmm_pool_name`.
    pub fn new(name: &str) -> Option<Self> {
        (name.len() <= LOV_MAXPOOLNAME && !name.contains('\0')).then(|| Self(name.to_string()))
    }

    /// The name; empty for none.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether no pool is named.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let end = bytes.iter().position(|&b| b == 0).ok_or(DecodeError::BadPoolName)?;
        let name = bytes.get(..end).ok_or(DecodeError::BadPoolName)?;
        let name = std::str::from_utf8(name).map_err(|_| DecodeError::BadPoolName)?;
        Ok(Self(name.to_string()))
    }

    fn encode(&self, out: &mut Vec<u8>) {
        let mut field = [0u8; LOV_MAXPOOLNAME + 1];
        for (slot, byte) in field.iter_mut().zip(self.0.bytes()) {
            *slot = byte;
        }
        out.extend_from_slice(&field);
    }
}

/// One `lov_ost_data_v1`: where stripe `i` lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ObjectSlot {
    /// `l_ost_oi`: the object.
    pub oi: OstId,
    /// `l_ost_gen`: the OST's generation (or `l_ost_type`).
    pub generation: u32,
    /// `l_ost_idx`: the OST index; `u32::MAX` in an uninstantiated placeholder.
    pub ost_index: u32,
}

/// A plain layout (`lov_mds_md`/`lov_user_md`, v1/v3/specific).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlainLayout {
    /// [`LOV_MAGIC_V1`], [`LOV_MAGIC_V3`] or [`LOV_MAGIC_SPECIFIC`].
    pub magic: u32,
    /// `lmm_pattern`: `LOV_PATTERN_*` base bits and flags.
    pub pattern: u32,
    /// `lmm_oi`: the file's MDT object (`oi_id` first, then `oi_seq`).
    pub oi: OstId,
    /// `lmm_stripe_size` in bytes (KiB for SEL extension components); 0 = default.
    pub stripe_size: u32,
    /// `lmm_stripe_count` as stored: 0 = default, 0xFFFF = all OSTs, 0xFFE0..0xFFFE = per OST.
    pub stripe_count: u16,
    /// `lmm_layout_gen` once instantiated, else the requested `lmm_stripe_offset` (0xFFFF = any).
    pub offset_or_gen: u16,
    /// `lmm_pool_name` (v3 and specific only; empty for v1).
    pub pool: PoolName,
    /// `lmm_objects`: one per stripe once instantiated, one placeholder before, none in
    /// requests (except `SPECIFIC`, which lists the requested OSTs).
    pub objects: Vec<ObjectSlot>,
}

impl PlainLayout {
    /// A request or template with no objects (`lov_user_md` as lfs builds it).
    pub fn request(pattern: u32, stripe_size: u32, stripe_count: u16, stripe_offset: u16) -> Self {
        Self {
            magic: LOV_MAGIC_V1,
            pattern,
            oi: OstId::default(),
            stripe_size,
            stripe_count,
            offset_or_gen: stripe_offset,
            pool: PoolName::default(),
            objects: Vec::new(),
        }
    }

    /// Decodes exactly `bytes` (the whole xattr or one component's `lcme_size` bytes).
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let r = Reader::new(bytes);
        let magic = r.u32(0, "lmm_magic")?;
        let header = match magic {
            LOV_MAGIC_V1 => V1_HEADER_SIZE,
            LOV_MAGIC_V3 | LOV_MAGIC_SPECIFIC => V3_HEADER_SIZE,
            other => return Err(DecodeError::UnknownMagic(other)),
        };
        let pool = if header == V3_HEADER_SIZE {
            PoolName::decode(r.slice(32, LOV_MAXPOOLNAME + 1, "lmm_pool_name")?)?
        } else {
            PoolName::default()
        };
        let rest = bytes.len().checked_sub(header).ok_or(DecodeError::Truncated {
            field: "lmm_objects",
            needed: header,
            available: bytes.len(),
        })?;
        if rest % OBJECT_SIZE != 0 {
            return Err(DecodeError::PartialObject(rest % OBJECT_SIZE));
        }
        let count = rest / OBJECT_SIZE;
        if count > usize::from(LOV_MAX_STRIPE_COUNT) {
            return Err(DecodeError::TooManyObjects(count));
        }
        let objects = (0..count)
            .map(|i| decode_object(&r, header + i * OBJECT_SIZE))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            magic,
            pattern: r.u32(4, "lmm_pattern")?,
            oi: OstId { first: r.u64(8, "lmm_oi")?, second: r.u64(16, "lmm_oi")? },
            stripe_size: r.u32(24, "lmm_stripe_size")?,
            stripe_count: r.u16(28, "lmm_stripe_count")?,
            offset_or_gen: r.u16(30, "lmm_layout_gen")?,
            pool,
            objects,
        })
    }

    /// Size of the encoding.
    pub fn encoded_len(&self) -> usize {
        self.header_len() + self.objects.len() * OBJECT_SIZE
    }

    /// Appends the encoding to `out`. A v1 magic drops the pool (v1 has no field for it).
    pub fn encode_into(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        if self.objects.len() > usize::from(LOV_MAX_STRIPE_COUNT) {
            return Err(EncodeError::TooManyObjects(self.objects.len()));
        }
        out.put_u32(self.magic);
        out.put_u32(self.pattern);
        out.put_u64(self.oi.first);
        out.put_u64(self.oi.second);
        out.put_u32(self.stripe_size);
        out.put_u16(self.stripe_count);
        out.put_u16(self.offset_or_gen);
        if self.header_len() == V3_HEADER_SIZE {
            self.pool.encode(out);
        }
        for object in &self.objects {
            out.put_u64(object.oi.first);
            out.put_u64(object.oi.second);
            out.put_u32(object.generation);
            out.put_u32(object.ost_index);
        }
        Ok(())
    }

    fn header_len(&self) -> usize {
        if self.magic == LOV_MAGIC_V1 { V1_HEADER_SIZE } else { V3_HEADER_SIZE }
    }

    /// Whether this is a Data-on-MDT layout.
    pub fn is_dom(&self) -> bool {
        self.pattern & LOV_PATTERN_MDT != 0 && self.pattern != super::LOV_PATTERN_DEFAULT
    }

    /// Whether overstriping (several stripes per OST) is allowed.
    pub fn is_overstriped(&self) -> bool {
        self.pattern & LOV_PATTERN_OVERSTRIPING != 0 && self.pattern != super::LOV_PATTERN_DEFAULT
    }

    /// The stripe count as lfs prints it: the u16 read as signed.
    pub fn signed_stripe_count(&self) -> i16 {
        i16::from_le_bytes(self.stripe_count.to_le_bytes())
    }
}

fn decode_object(r: &Reader<'_>, at: usize) -> Result<ObjectSlot, DecodeError> {
    Ok(ObjectSlot {
        oi: OstId { first: r.u64(at, "l_ost_oi")?, second: r.u64(at + 8, "l_ost_oi")? },
        generation: r.u32(at + 16, "l_ost_gen")?,
        ost_index: r.u32(at + 20, "l_ost_idx")?,
    })
}
