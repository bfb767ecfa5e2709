//! File layouts (LOV): the `lov_mds_md`/`lov_user_md` v1/v3 formats, composite (PFL) layouts
//! with DoM and SEL components, file offset arithmetic, the `lfs setstripe` grammar and the
//! `lfs getstripe` printers. Facts and sources: docs/protocol/layouts.md.
//!
//! - [`Layout::decode`]/[`Layout::encode`]: the `lustre.lov` xattr, byte-exact (§2, §3).
//! - [`map`]: offset → (component, stripe, object offset), sizes, instantiation (§5).
//! - [`setstripe`]: `lfs setstripe` options → the layout lfs sets (§6).
//! - [`getstripe`]: `lfs getstripe` text, `-v`, `-y` and field selectors (§7).

pub mod composite;
pub mod error;
pub mod foreign;
pub mod getstripe;
pub mod layout;
pub mod map;
pub mod ostid;
pub mod plain;
pub mod setstripe;
pub mod size;

mod bytes;

pub use crate::fid::Fid;
pub use composite::{Component, CompositeLayout, SubLayout};
pub use error::{DecodeError, EncodeError};
pub use foreign::ForeignLayout;
pub use layout::Layout;
pub use ostid::OstId;
pub use plain::{ObjectSlot, PlainLayout, PoolName};

// lustre: lustre/include/uapi/linux/lustre/lustre_user.h (LOV_USER_MAGIC_*), lustre_idl.h
// (LOV_MAGIC_*): every LOV magic ends in 0x0BD0 (docs/protocol/layouts.md §2.1).
/// `LOV_MAGIC_V1`: plain layout, no pool.
pub const LOV_MAGIC_V1: u32 = 0x0BD1_0BD0;
/// `LOV_MAGIC_V3`: plain layout with a pool name.
pub const LOV_MAGIC_V3: u32 = 0x0BD3_0BD0;
/// `LOV_USER_MAGIC_SPECIFIC`: v3 layout whose objects list the requested OSTs (`-o`).
pub const LOV_MAGIC_SPECIFIC: u32 = 0x0BD5_0BD0;
/// `LOV_MAGIC_COMP_V1`: composite (PFL/FLR/SEL) layout.
pub const LOV_MAGIC_COMP_V1: u32 = 0x0BD6_0BD0;
/// `LOV_MAGIC_FOREIGN`: foreign layout (opaque value).
pub const LOV_MAGIC_FOREIGN: u32 = 0x0BD7_0BD0;
/// `LOV_MAGIC_SEL`: composite layout with extension components, on the MDT's disk only.
pub const LOV_MAGIC_SEL: u32 = 0x0BD8_0BD0;

// lustre: lustre_user.h enum lov_pattern.
/// `LOV_PATTERN_RAID0`: plain striping.
pub const LOV_PATTERN_RAID0: u32 = 0x001;
/// `LOV_PATTERN_RAID1`: defined, unused.
pub const LOV_PATTERN_RAID1: u32 = 0x002;
/// `LOV_PATTERN_MDT`: Data-on-MDT.
pub const LOV_PATTERN_MDT: u32 = 0x100;
/// `LOV_PATTERN_OVERSTRIPING`: more than one stripe per OST allowed.
pub const LOV_PATTERN_OVERSTRIPING: u32 = 0x200;
/// `LOV_PATTERN_FOREIGN`.
pub const LOV_PATTERN_FOREIGN: u32 = 0x400;
/// `LOV_PATTERN_COMPRESS`.
pub const LOV_PATTERN_COMPRESS: u32 = 0x800;
/// `LOV_PATTERN_F_HOLE`: an object of the layout is missing.
pub const LOV_PATTERN_F_HOLE: u32 = 0x4000_0000;
/// `LOV_PATTERN_F_RELEASED`: HSM released, no objects.
pub const LOV_PATTERN_F_RELEASED: u32 = 0x8000_0000;
/// `LOV_PATTERN_DEFAULT`: "use the default" in templates.
pub const LOV_PATTERN_DEFAULT: u32 = 0xFFFF_FFFF;

// lustre: lustre_user.h enum lov_comp_md_entry_flags.
/// `LCME_FL_STALE`: FLR, data out of date.
pub const LCME_FL_STALE: u32 = 0x01;
/// `LCME_FL_PREF_RD`: FLR, preferred for reads.
pub const LCME_FL_PREF_RD: u32 = 0x02;
/// `LCME_FL_PREF_WR`: FLR, preferred for writes.
pub const LCME_FL_PREF_WR: u32 = 0x04;
/// `LCME_FL_PREF_RW`: both preferences (`prefer`).
pub const LCME_FL_PREF_RW: u32 = LCME_FL_PREF_RD | LCME_FL_PREF_WR;
/// `LCME_FL_OFFLINE`: defined, unused.
pub const LCME_FL_OFFLINE: u32 = 0x08;
/// `LCME_FL_INIT`: instantiated, objects allocated.
pub const LCME_FL_INIT: u32 = 0x10;
/// `LCME_FL_NOSYNC`: FLR, `lfs mirror resync` skips it; `lcme_timestamp` says since when.
pub const LCME_FL_NOSYNC: u32 = 0x20;
/// `LCME_FL_EXTENSION`: SEL extension space, never instantiated.
pub const LCME_FL_EXTENSION: u32 = 0x40;
/// `LCME_FL_PARITY`: erasure-coding parity component.
pub const LCME_FL_PARITY: u32 = 0x80;
/// `LCME_FL_COMPRESS`.
pub const LCME_FL_COMPRESS: u32 = 0x100;
/// `LCME_FL_PARTIAL`: some chunks are not compressed.
pub const LCME_FL_PARTIAL: u32 = 0x200;
/// `LCME_FL_NOCOMPR`.
pub const LCME_FL_NOCOMPR: u32 = 0x400;
/// `LCME_FL_NEG`: "clear these flags" in requests; never stored.
pub const LCME_FL_NEG: u32 = 0x8000_0000;

/// `LCME_ID_INVAL`: no id (templates and requests).
pub const LCME_ID_INVAL: u32 = 0;
/// `LCME_ID_MAX`: largest component id.
pub const LCME_ID_MAX: u32 = 0x7FFF_FFFF;
/// `MIRROR_ID_MASK`/`MIRROR_ID_SHIFT`: bits 30..16 of a component id are its mirror id.
pub const MIRROR_ID_MASK: u32 = 0x7FFF_0000;
/// See [`MIRROR_ID_MASK`].
pub const MIRROR_ID_SHIFT: u32 = 16;

// lustre: lustre_user.h enum lov_comp_md_flags (FLR state in lcm_flags).
/// `LCM_FL_RDONLY`: mirrors in sync.
pub const LCM_FL_RDONLY: u16 = 0x1;
/// `LCM_FL_WRITE_PENDING`.
pub const LCM_FL_WRITE_PENDING: u16 = 0x2;
/// `LCM_FL_SYNC_PENDING`.
pub const LCM_FL_SYNC_PENDING: u16 = 0x3;
/// `LCM_FL_PCC_RDONLY`.
pub const LCM_FL_PCC_RDONLY: u16 = 0x8;
/// `LCM_FL_FLR_MASK`.
pub const LCM_FL_FLR_MASK: u16 = 0xB;

/// `LOV_MIN_STRIPE_SIZE`: stripe sizes and component ends are multiples of 64 KiB.
pub const LOV_MIN_STRIPE_SIZE: u64 = 1 << 16;
/// `LOV_MAX_STRIPE_COUNT`: most stripes (objects) of one component, with large xattrs.
pub const LOV_MAX_STRIPE_COUNT: u16 = 2000;
/// `LOV_MAX_STRIPE_COUNT_OLD`: most stripes when the MDT's xattrs are limited to ~4 KiB.
pub const LOV_MAX_STRIPE_COUNT_OLD: u16 = 160;
/// `LOV_ALL_STRIPES`: stripe count -1, one stripe on every OST.
pub const LOV_ALL_STRIPES: u16 = 0xFFFF;
/// `LOV_ALL_STRIPES_WIDE`: stripe count -32, the lowest "stripes per OST" request.
pub const LOV_ALL_STRIPES_WIDE: u16 = 0xFFE0;
/// `LOV_V1_INSANE_STRIPE_INDEX`: largest OST index a request may name.
pub const LOV_V1_INSANE_STRIPE_INDEX: u16 = LOV_ALL_STRIPES_WIDE - 1;
/// `LOV_OFFSET_DEFAULT`: stripe offset -1, the MDS chooses.
pub const LOV_OFFSET_DEFAULT: u16 = 0xFFFF;
/// `LOV_MAXPOOLNAME`: pool names are at most 15 bytes (16 with the NUL).
pub const LOV_MAXPOOLNAME: usize = 15;
/// `LUSTRE_EOF`: component end "to end of file".
pub const LUSTRE_EOF: u64 = u64::MAX;
/// `SEL_UNIT_SIZE`: an extension component stores its size in KiB.
pub const SEL_UNIT_SIZE: u64 = 1024;
/// `LUSTRE_MIRROR_COUNT_MAX` (2.15–2.17): most FLR mirrors.
pub const LUSTRE_MIRROR_COUNT_MAX: u16 = 16;
/// `LOV_DESC_STRIPE_SIZE_DEFAULT`: the file system's stripe size unless tuned.
pub const DEFAULT_STRIPE_SIZE: u32 = 4 << 20;

/// `XATTR_SIZE_MAX` (Linux): no layout xattr is larger, so no decoder reads past it.
pub const MAX_XATTR_SIZE: usize = 65536;
/// Most components a layout can hold: each takes a 48-byte entry and a sub-layout of at least
/// 32 bytes, within [`MAX_XATTR_SIZE`] after the 32-byte header.
pub const MAX_COMPONENTS: usize =
    (MAX_XATTR_SIZE - composite::HEADER_SIZE) / (composite::ENTRY_SIZE + plain::V1_HEADER_SIZE);

/// The mirror id in bits 30..16 of a component id.
// lustre: lustre_user.h mirror_id_of()
pub fn mirror_id_of(component_id: u32) -> u16 {
    // The mask keeps 15 bits, so the shifted value fits in u16.
    ((component_id & MIRROR_ID_MASK) >> MIRROR_ID_SHIFT) as u16
}
