//! Composite layouts: `lov_comp_md_v1` and its `lov_comp_md_entry_v1` entries, each pointing at
//! a plain or foreign sub-layout (docs/protocol/layouts.md §3).
// lustre: lustre/include/uapi/linux/lustre/lustre_user.h struct lov_comp_md_v1,
// struct lov_comp_md_entry_v1; lustre/lov/lov_ea.c (the client's checks on the same bytes).

use super::bytes::{Put, Reader};
use super::error::{DecodeError, EncodeError};
use super::foreign::ForeignLayout;
use super::plain::PlainLayout;
use super::{
    LCME_FL_EXTENSION, LCME_FL_INIT, LOV_MAGIC_COMP_V1, LOV_MAGIC_FOREIGN, LOV_MAGIC_SEL,
    LOV_MAGIC_SPECIFIC, LOV_MAGIC_V1, LOV_MAGIC_V3, MAX_COMPONENTS, MAX_XATTR_SIZE, mirror_id_of,
};

/// Bytes of the `lov_comp_md_v1` header.
pub const HEADER_SIZE: usize = 32;
/// Bytes of one `lov_comp_md_entry_v1`.
pub const ENTRY_SIZE: usize = 48;

/// A component's sub-layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubLayout {
    Plain(PlainLayout),
    Foreign(ForeignLayout),
}

impl SubLayout {
    fn encoded_len(&self) -> usize {
        match self {
            Self::Plain(plain) => plain.encoded_len(),
            Self::Foreign(foreign) => foreign.encoded_len(),
        }
    }

    fn encode_into(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        match self {
            Self::Plain(plain) => plain.encode_into(out),
            Self::Foreign(foreign) => {
                foreign.encode_into(out);
                Ok(())
            }
        }
    }

    /// The plain sub-layout, if it is one.
    pub fn plain(&self) -> Option<&PlainLayout> {
        match self {
            Self::Plain(plain) => Some(plain),
            Self::Foreign(_) => None,
        }
    }
}

/// One component: an extent of the file and its striping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Component {
    /// `lcme_id`: mirror id in bits 30..16, sequence below; 0 in templates and requests.
    pub id: u32,
    /// `lcme_flags`: `LCME_FL_*`.
    pub flags: u32,
    /// `lcme_extent.e_start`, inclusive.
    pub start: u64,
    /// `lcme_extent.e_end`, exclusive; [`super::LUSTRE_EOF`] for "to end of file".
    pub end: u64,
    /// `lcme_layout_gen`.
    pub layout_gen: u32,
    /// `lcme_timestamp`: when `nosync` was set (seconds since the epoch).
    pub timestamp: u64,
    /// `lcme_dstripe_count`: EC data stripes (k).
    pub dstripe_count: u8,
    /// `lcme_cstripe_count`: EC code stripes (p).
    pub cstripe_count: u8,
    /// `lcme_compr_type`.
    pub compr_type: u8,
    /// `lcme_compr_lvl` (low 4 bits) and `lcme_compr_chunk_log_bits` (high 4 bits).
    pub compr_level_and_chunk: u8,
    /// The striping of this extent.
    pub sub: SubLayout,
}

impl Component {
    /// A request/template component (id 0, no generation) over `[start, end)`.
    pub fn request(start: u64, end: u64, flags: u32, sub: PlainLayout) -> Self {
        Self {
            id: 0,
            flags,
            start,
            end,
            layout_gen: 0,
            timestamp: 0,
            dstripe_count: 0,
            cstripe_count: 0,
            compr_type: 0,
            compr_level_and_chunk: 0,
            sub: SubLayout::Plain(sub),
        }
    }

    /// Whether the component has objects (`init`).
    pub fn is_instantiated(&self) -> bool {
        self.flags & LCME_FL_INIT != 0
    }

    /// Whether this is SEL extension space.
    pub fn is_extension(&self) -> bool {
        self.flags & LCME_FL_EXTENSION != 0
    }

    /// The mirror this component belongs to.
    pub fn mirror_id(&self) -> u16 {
        mirror_id_of(self.id)
    }

    /// Whether `offset` falls in `[start, end)`.
    pub fn contains(&self, offset: u64) -> bool {
        self.start <= offset && offset < self.end
    }
}

/// A composite layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompositeLayout {
    /// [`LOV_MAGIC_COMP_V1`], or [`LOV_MAGIC_SEL`] as the MDT stores SEL layouts.
    pub magic: u32,
    /// `lcm_layout_gen`.
    pub layout_gen: u32,
    /// `lcm_flags`: FLR state (`LCM_FL_*`).
    pub flags: u16,
    /// `lcm_mirror_count`: mirrors − 1.
    pub mirror_count: u16,
    /// `lcm_ec_count`: parity components (2.16+).
    pub ec_count: u8,
    /// The entries, in order; the encoding places sub-layouts in the same order.
    pub components: Vec<Component>,
}

/// Where a component's sub-layout sits in the encoding (`lcme_offset`, `lcme_size`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    pub offset: u32,
    pub size: u32,
}

impl CompositeLayout {
    /// A request/template: generation 0, one mirror.
    pub fn request(components: Vec<Component>) -> Self {
        Self {
            magic: LOV_MAGIC_COMP_V1,
            layout_gen: 0,
            flags: 0,
            mirror_count: 0,
            ec_count: 0,
            components,
        }
    }

    /// Decodes exactly `bytes`.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        if bytes.len() > MAX_XATTR_SIZE {
            return Err(DecodeError::TooLarge(bytes.len()));
        }
        let r = Reader::new(bytes);
        let magic = r.u32(0, "lcm_magic")?;
        if magic != LOV_MAGIC_COMP_V1 && magic != LOV_MAGIC_SEL {
            return Err(DecodeError::UnknownMagic(magic));
        }
        let declared = r.u32(4, "lcm_size")?;
        if usize::try_from(declared).ok() != Some(bytes.len()) {
            return Err(DecodeError::SizeMismatch { declared, actual: bytes.len() });
        }
        let count = r.u16(14, "lcm_entry_count")?;
        let entries_end = HEADER_SIZE + usize::from(count) * ENTRY_SIZE;
        if count == 0 || usize::from(count) > MAX_COMPONENTS || entries_end > bytes.len() {
            return Err(DecodeError::BadEntryCount(count));
        }
        let components = (0..usize::from(count))
            .map(|index| decode_entry(&r, index, entries_end))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            magic,
            layout_gen: r.u32(8, "lcm_layout_gen")?,
            flags: r.u16(12, "lcm_flags")?,
            mirror_count: r.u16(16, "lcm_mirror_count")?,
            ec_count: r.u8(18, "lcm_ec_count")?,
            components,
        })
    }

    /// `lcme_offset`/`lcme_size` of each component as [`Self::encode`] places them: the
    /// sub-layouts follow the entries in order, as the MDT and llapi write them.
    pub fn placements(&self) -> Vec<Placement> {
        let mut offset = HEADER_SIZE + self.components.len() * ENTRY_SIZE;
        self.components
            .iter()
            .map(|component| {
                let size = component.sub.encoded_len();
                let placement =
                    Placement { offset: saturating_u32(offset), size: saturating_u32(size) };
                offset += size;
                placement
            })
            .collect()
    }

    /// Size of the encoding (`lcm_size`).
    pub fn encoded_len(&self) -> usize {
        HEADER_SIZE
            + self.components.iter().map(|c| ENTRY_SIZE + c.sub.encoded_len()).sum::<usize>()
    }

    /// The encoding: header, entries, sub-layouts.
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        let count = self.components.len();
        if count == 0 || count > MAX_COMPONENTS {
            return Err(EncodeError::ComponentCount(count));
        }
        let total = self.encoded_len();
        if total > MAX_XATTR_SIZE {
            return Err(EncodeError::TooLarge(total));
        }
        let mut out = Vec::with_capacity(total);
        out.put_u32(self.magic);
        out.put_u32(saturating_u32(total));
        out.put_u32(self.layout_gen);
        out.put_u16(self.flags);
        out.put_u16(u16::try_from(count).map_err(|_| EncodeError::ComponentCount(count))?);
        out.put_u16(self.mirror_count);
        out.push(self.ec_count);
        out.resize(HEADER_SIZE, 0);
        for (component, placement) in self.components.iter().zip(self.placements()) {
            out.put_u32(component.id);
            out.put_u32(component.flags);
            out.put_u64(component.start);
            out.put_u64(component.end);
            out.put_u32(placement.offset);
            out.put_u32(placement.size);
            out.put_u32(component.layout_gen);
            out.put_u64(component.timestamp);
            out.extend_from_slice(&[
                component.dstripe_count,
                component.cstripe_count,
                component.compr_type,
                component.compr_level_and_chunk,
            ]);
        }
        for component in &self.components {
            component.sub.encode_into(&mut out)?;
        }
        Ok(out)
    }
}

fn saturating_u32(value: usize) -> u32 {
    u32::try_from(value).unwrap_or(u32::MAX)
}

fn decode_entry(
    r: &Reader<'_>,
    index: usize,
    entries_end: usize,
) -> Result<Component, DecodeError> {
    let at = HEADER_SIZE + index * ENTRY_SIZE;
    let start = r.u64(at + 8, "lcme_extent.e_start")?;
    let end = r.u64(at + 16, "lcme_extent.e_end")?;
    if start > end {
        return Err(DecodeError::BadExtent { index, start, end });
    }
    let offset = r.u32(at + 24, "lcme_offset")?;
    let size = r.u32(at + 28, "lcme_size")?;
    let out_of_bounds = DecodeError::SubLayoutOutOfBounds { index, offset, size };
    let begin = usize::try_from(offset).map_err(|_| out_of_bounds.clone())?;
    let len = usize::try_from(size).map_err(|_| out_of_bounds.clone())?;
    if begin < entries_end {
        return Err(out_of_bounds);
    }
    let blob = r.slice(begin, len, "sub-layout").map_err(|_| out_of_bounds)?;
    let magic = Reader::new(blob).u32(0, "lmm_magic")?;
    let sub = match magic {
        LOV_MAGIC_V1 | LOV_MAGIC_V3 | LOV_MAGIC_SPECIFIC => {
            SubLayout::Plain(PlainLayout::decode(blob)?)
        }
        LOV_MAGIC_FOREIGN => SubLayout::Foreign(ForeignLayout::decode(blob)?),
        LOV_MAGIC_COMP_V1 | LOV_MAGIC_SEL => return Err(DecodeError::Nested(index)),
        other => return Err(DecodeError::BadSubLayoutMagic { index, magic: other }),
    };
    let tail = r.slice(at + 44, 4, "lcme_compr_lvl")?;
    let [dstripe_count, cstripe_count, compr_type, compr_level_and_chunk] =
        [tail.first(), tail.get(1), tail.get(2), tail.get(3)].map(|b| b.copied().unwrap_or(0));
    Ok(Component {
        id: r.u32(at, "lcme_id")?,
        flags: r.u32(at + 4, "lcme_flags")?,
        start,
        end,
        layout_gen: r.u32(at + 32, "lcme_layout_gen")?,
        timestamp: r.u64(at + 36, "lcme_timestamp")?,
        dstripe_count,
        cstripe_count,
        compr_type,
        compr_level_and_chunk,
        sub,
    })
}
