//! File offset arithmetic (docs/protocol/layouts.md §5): offset → (component, stripe, object,
//! object offset) on the **absolute** file offset, extents split per component and stripe,
//! object sizes merged into a file size, which components a write instantiates, and stripe
//! counts (-1, overstriping) resolved against an OST count.
//!
//! FLR: every function works on one mirror, the one holding the first component (the only
//! one of a non-mirrored file); choosing among mirrors (stale, prefer) is the caller's.

use thiserror::Error;

use super::composite::{Component, CompositeLayout, SubLayout};
use super::layout::Layout;
use super::ostid::OstId;
use super::plain::{ObjectSlot, PlainLayout};
use super::{
    DEFAULT_STRIPE_SIZE, LCME_FL_INIT, LOV_ALL_STRIPES, LOV_ALL_STRIPES_WIDE, LOV_MAGIC_SPECIFIC,
    LOV_MAGIC_V1, LOV_MAGIC_V3, LOV_MAX_STRIPE_COUNT, LUSTRE_EOF, MIRROR_ID_SHIFT, mirror_id_of,
};
use crate::fid::Fid;

/// Why an offset or extent could not be mapped.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MapError {
    /// No component of the mirror covers the offset (a write there fails on a real MDT:
    /// "the defined layout does not cover the write range").
    #[error("offset {0} is not covered by any component")]
    NotCovered(u64),
    /// The layout (or the covering component) is foreign: no striping to compute.
    #[error("foreign layouts have no striping")]
    Foreign,
    /// A stripe size of 0 with no default to resolve it.
    #[error("component {0} has stripe size 0")]
    ZeroStripeSize(usize),
    /// The extent is empty or reversed.
    #[error("empty extent [{0}, {1})")]
    EmptyExtent(u64, u64),
}

/// Stripe size and count of one component, resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    /// S, bytes (the component end for DoM).
    pub stripe_size: u64,
    /// c, at least 1 (1 for DoM).
    pub stripe_count: u64,
}

impl Geometry {
    /// W = S·c, the bytes of one full row of stripes.
    pub fn width(&self) -> u64 {
        self.stripe_size.saturating_mul(self.stripe_count)
    }

    /// `(F mod W) div S`.
    // lustre: lustre/lov/lov_offset.c lov_stripe_number()
    pub fn stripe_number(&self, offset: u64) -> u64 {
        (offset % self.width()) / self.stripe_size
    }

    /// `(F div W)·S + (F mod S)`: the byte of the stripe's object that holds file byte F.
    // lustre: lustre/lov/lov_offset.c lov_stripe_offset()
    pub fn object_offset(&self, offset: u64) -> u64 {
        (offset / self.width()) * self.stripe_size + offset % self.stripe_size
    }

    /// The file offset of byte `object_offset` of stripe `stripe`'s object (the inverse of
    /// [`Self::object_offset`]); `None` past `u64::MAX`.
    pub fn file_offset(&self, stripe: u64, object_offset: u64) -> Option<u64> {
        let row = u128::from(object_offset / self.stripe_size) * u128::from(self.width());
        let within = u128::from(stripe) * u128::from(self.stripe_size)
            + u128::from(object_offset % self.stripe_size);
        u64::try_from(row + within).ok()
    }

    /// File size implied by stripe `stripe`'s object holding `object_size` bytes: its highest
    /// byte's file offset + 1 (0 for an empty object).
    // lustre: lustre/lov/lov_offset.c lov_stripe_size()
    pub fn file_size(&self, stripe: u64, object_size: u64) -> Option<u64> {
        match object_size {
            0 => Some(0),
            size => self.file_offset(stripe, size - 1).and_then(|last| last.checked_add(1)),
        }
    }

    /// The object range `[lo, hi)` of stripe `stripe` that file range `[start, end)` touches.
    // lustre: lustre/lov/lov_offset.c lov_stripe_intersects()
    pub fn object_extent(&self, stripe: u64, start: u64, end: u64) -> Option<(u64, u64)> {
        let lo = self.object_bound(stripe, start);
        let hi = self.object_bound(stripe, end);
        (lo < hi).then_some((lo, hi))
    }

    /// The first object offset of `stripe` whose file offset is at or after `offset`.
    fn object_bound(&self, stripe: u64, offset: u64) -> u64 {
        let row = offset / self.width();
        let here = self.stripe_number(offset);
        if here == stripe {
            self.object_offset(offset)
        } else if here < stripe {
            row * self.stripe_size
        } else {
            // Saturates only past u64::MAX, where no object byte can be.
            (row + 1).saturating_mul(self.stripe_size)
        }
    }
}

/// A stored stripe count resolved against `ost_count` OSTs: 0 becomes `default_count`; a
/// count above the OST count is capped at it, unless `overstriped`, where -k (`0x10000 − k`,
/// k ≤ 32) means k per OST and other counts stand; always 1..=[`LOV_MAX_STRIPE_COUNT`]. The
/// MDT also caps by the xattr space left (`lod_osd_max_easize`), which is not modelled.
// lustre: lustre/lod/lod_qos.c lod_get_stripe_count_plain()
pub fn resolve_stripe_count(
    stored: u16,
    overstriped: bool,
    ost_count: u32,
    default_count: u16,
) -> u32 {
    let osts = ost_count.max(1);
    let requested = if stored == 0 { default_count } else { stored };
    let count = match u32::from(requested) {
        n if n <= osts => n,
        _ if !overstriped => osts,
        _ if requested >= LOV_ALL_STRIPES_WIDE => {
            (u32::from(LOV_ALL_STRIPES - requested) + 1).saturating_mul(osts)
        }
        n => n,
    };
    count.clamp(1, u32::from(LOV_MAX_STRIPE_COUNT))
}

/// The geometry of a plain (sub-)layout: instantiated layouts use their stored count, the
/// rest resolve it against `ost_count`.
pub fn geometry(plain: &PlainLayout, instantiated: bool, ost_count: u32) -> Option<Geometry> {
    if plain.is_dom() {
        return (plain.stripe_size > 0)
            .then_some(Geometry { stripe_size: u64::from(plain.stripe_size), stripe_count: 1 });
    }
    let stripe_size =
        u64::from(if plain.stripe_size == 0 { DEFAULT_STRIPE_SIZE } else { plain.stripe_size });
    let stripe_count =
        if instantiated && plain.stripe_count != 0 && plain.stripe_count < LOV_ALL_STRIPES_WIDE {
            u32::from(plain.stripe_count)
        } else {
            resolve_stripe_count(plain.stripe_count, plain.is_overstriped(), ost_count, 1)
        };
    Some(Geometry { stripe_size, stripe_count: u64::from(stripe_count) })
}

/// Where one file byte lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// Index of the component in the layout (0 for a plain layout).
    pub component: usize,
    /// Its `lcme_id` (0 for a plain layout).
    pub component_id: u32,
    /// Stripe index within the component.
    pub stripe: u64,
    /// Byte offset within the stripe's object (for DoM: within the MDT inode's data).
    pub object_offset: u64,
    /// The component's striping.
    pub geometry: Geometry,
    /// Whether the component has objects; if not, reads see a hole and writes instantiate it.
    pub instantiated: bool,
    /// Whether the data is on the MDT.
    pub dom: bool,
    /// The object slot, when the component is instantiated and has one for this stripe.
    pub object: Option<ObjectSlot>,
}

/// One component's view used by the arithmetic.
#[derive(Debug, Clone, Copy)]
pub struct Extent<'a> {
    pub index: usize,
    pub id: u32,
    pub start: u64,
    pub end: u64,
    pub instantiated: bool,
    pub plain: &'a PlainLayout,
}

/// The components of the first mirror, in order (a plain layout is one component over the
/// whole file). Foreign sub-layouts are skipped.
pub fn extents(layout: &Layout) -> Vec<Extent<'_>> {
    match layout {
        Layout::Plain(plain) => vec![Extent {
            index: 0,
            id: 0,
            start: 0,
            end: LUSTRE_EOF,
            instantiated: !plain.objects.is_empty(),
            plain,
        }],
        Layout::Foreign(_) => Vec::new(),
        Layout::Composite(composite) => {
            let mirror = composite.components.first().map(Component::mirror_id);
            composite
                .components
                .iter()
                .enumerate()
                .filter(|(_, c)| Some(c.mirror_id()) == mirror && !c.is_extension())
                .filter_map(|(index, c)| {
                    c.sub.plain().map(|plain| Extent {
                        index,
                        id: c.id,
                        start: c.start,
                        end: c.end,
                        instantiated: c.is_instantiated(),
                        plain,
                    })
                })
                .collect()
        }
    }
}

/// Maps file offset `offset`; `ost_count` resolves counts of uninstantiated components.
pub fn map_offset(layout: &Layout, offset: u64, ost_count: u32) -> Result<Mapping, MapError> {
    if matches!(layout, Layout::Foreign(_)) {
        return Err(MapError::Foreign);
    }
    let extent = extents(layout)
        .into_iter()
        .find(|e| e.start <= offset && offset < e.end)
        .ok_or(MapError::NotCovered(offset))?;
    let geometry = geometry(extent.plain, extent.instantiated, ost_count)
        .ok_or(MapError::ZeroStripeSize(extent.index))?;
    let stripe = geometry.stripe_number(offset);
    let object = if extent.instantiated {
        usize::try_from(stripe).ok().and_then(|s| extent.plain.objects.get(s)).copied()
    } else {
        None
    };
    Ok(Mapping {
        component: extent.index,
        component_id: extent.id,
        stripe,
        object_offset: geometry.object_offset(offset),
        geometry,
        instantiated: extent.instantiated,
        dom: extent.plain.is_dom(),
        object,
    })
}

/// One (component, stripe) piece of an extent: the object bytes `[object_start, object_end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    pub component: usize,
    pub stripe: u64,
    pub object_start: u64,
    pub object_end: u64,
}

/// Splits file range `[start, end)` into one piece per (component, stripe) it touches, in
/// component then stripe order: the sub-I/Os a client sends.
// lustre: lustre/lov/lov_io.c (one sub-I/O per stripe), lov_offset.c lov_stripe_intersects()
pub fn split_extent(
    layout: &Layout,
    start: u64,
    end: u64,
    ost_count: u32,
) -> Result<Vec<Piece>, MapError> {
    if start >= end {
        return Err(MapError::EmptyExtent(start, end));
    }
    let mut pieces = Vec::new();
    let mut covered = start;
    for extent in extents(layout) {
        let lo = start.max(extent.start);
        let hi = end.min(extent.end);
        if lo >= hi {
            continue;
        }
        if lo != covered {
            return Err(MapError::NotCovered(covered));
        }
        covered = hi;
        let geometry = geometry(extent.plain, extent.instantiated, ost_count)
            .ok_or(MapError::ZeroStripeSize(extent.index))?;
        for stripe in 0..geometry.stripe_count {
            if let Some((object_start, object_end)) = geometry.object_extent(stripe, lo, hi) {
                pieces.push(Piece { component: extent.index, stripe, object_start, object_end });
            }
        }
    }
    if covered != end {
        return Err(MapError::NotCovered(covered));
    }
    Ok(pieces)
}

/// The file size implied by object sizes `(component, stripe, object size)`: the largest
/// highest-byte-plus-one over them. `dom_size` is the MDT's view when a DoM component exists.
pub fn merged_file_size(layout: &Layout, objects: &[(usize, u64, u64)], ost_count: u32) -> u64 {
    let extents = extents(layout);
    objects
        .iter()
        .filter_map(|&(component, stripe, size)| {
            let extent = extents.iter().find(|e| e.index == component)?;
            geometry(extent.plain, extent.instantiated, ost_count)?.file_size(stripe, size)
        })
        .max()
        .unwrap_or(0)
}

/// Indices of the components a write of `[start, end)` instantiates: every uninstantiated
/// component of the mirror with `e_start < end`, skipped earlier ones included.
// lustre: lustre/lod/lod_object.c lod_declare_update_plain() (non-FLR write intent)
pub fn components_to_instantiate(
    layout: &Layout,
    start: u64,
    end: u64,
) -> Result<Vec<usize>, MapError> {
    if start >= end {
        return Err(MapError::EmptyExtent(start, end));
    }
    let extents = extents(layout);
    let last_end = extents.last().map_or(0, |e| e.end);
    if end > last_end {
        return Err(MapError::NotCovered(last_end.max(start)));
    }
    Ok(extents.iter().filter(|e| !e.instantiated && e.start < end).map(|e| e.index).collect())
}

/// Allocates the object of `stripe` of component `component`: the MDS's OST choice, which
/// the request does not determine (docs/protocol/layouts.md §2.3).
pub type Allocator<'a> = dyn FnMut(usize, u64) -> ObjectSlot + 'a;

/// What the MDT stores when it creates a file from `template` (a request or a directory
/// default): ids and generations assigned, the components starting at 0 instantiated, the
/// others kept with their requested count and one placeholder object.
// lustre: lustre/lod/lod_object.c (component ids), lod_qos.c lod_prepare_create(),
// lod_internal.h lod_comp_shrink_stripe_count()
pub fn create(
    template: &CompositeLayout,
    file: Fid,
    ost_count: u32,
    allocate: &mut Allocator<'_>,
) -> CompositeLayout {
    let mut layout = template.clone();
    let oi = OstId { first: u64::from(file.oid) | (u64::from(file.ver) << 32), second: file.seq };
    for (index, component) in layout.components.iter_mut().enumerate() {
        layout.layout_gen = layout.layout_gen.wrapping_add(1);
        let mirror = u32::from(mirror_id_of(component.id));
        component.id = (mirror << MIRROR_ID_SHIFT) | (layout.layout_gen & 0xFFFF);
        if let SubLayout::Plain(plain) = &mut component.sub {
            plain.oi = oi;
            if plain.magic == LOV_MAGIC_SPECIFIC {
                plain.magic = LOV_MAGIC_V3;
            }
            if plain.magic == LOV_MAGIC_V3 && plain.pool.is_empty() {
                plain.magic = LOV_MAGIC_V1;
            }
            if plain.stripe_size == 0 && !plain.is_dom() {
                plain.stripe_size = DEFAULT_STRIPE_SIZE;
            }
            if component.start == 0 {
                component.flags |= LCME_FL_INIT;
                fill_objects(plain, index, ost_count, allocate);
            } else if !plain.is_dom() {
                plain.objects =
                    vec![ObjectSlot { oi: OstId::default(), generation: 0, ost_index: u32::MAX }];
            }
        }
    }
    layout
}

/// Instantiates what a write of `[start, end)` needs (see [`components_to_instantiate`]),
/// bumping `lcm_layout_gen` once if anything changed. Returns the indices instantiated.
pub fn instantiate_write(
    layout: &mut CompositeLayout,
    start: u64,
    end: u64,
    ost_count: u32,
    allocate: &mut Allocator<'_>,
) -> Result<Vec<usize>, MapError> {
    let indices = components_to_instantiate(&Layout::Composite(layout.clone()), start, end)?;
    for &index in &indices {
        if let Some(component) = layout.components.get_mut(index) {
            component.flags |= LCME_FL_INIT;
            if let SubLayout::Plain(plain) = &mut component.sub {
                fill_objects(plain, index, ost_count, allocate);
            }
        }
    }
    if !indices.is_empty() {
        layout.layout_gen = layout.layout_gen.wrapping_add(1);
    }
    Ok(indices)
}

fn fill_objects(
    plain: &mut PlainLayout,
    index: usize,
    ost_count: u32,
    allocate: &mut Allocator<'_>,
) {
    plain.offset_or_gen = 0;
    if plain.is_dom() {
        plain.objects.clear();
        return;
    }
    let count = resolve_stripe_count(plain.stripe_count, plain.is_overstriped(), ost_count, 1);
    // resolve_stripe_count() caps at LOV_MAX_STRIPE_COUNT, which fits u16.
    plain.stripe_count = u16::try_from(count).unwrap_or(LOV_MAX_STRIPE_COUNT);
    plain.objects = (0..u64::from(count)).map(|stripe| allocate(index, stripe)).collect();
    if plain.magic != LOV_MAGIC_V1 && plain.pool.is_empty() {
        plain.magic = LOV_MAGIC_V1;
    }
}

#[cfg(test)]
mod tests;
