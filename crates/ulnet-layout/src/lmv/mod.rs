//! Directory layouts (DNE): the `lmv_mds_md_v1` and `lmv_user_md` xattr formats, the name hashes
//! that place a directory entry on a stripe, and the `lfs getdirstripe` printer.
//!
//! Facts and their Lustre sources: docs/protocol/dirlayouts.md.
//!
//! - [`DirLayout::parse`] reads a `trusted.lmv` / `trusted.dmv` xattr into a [`LmvMdsMd`],
//!   [`ForeignLmv`] or default [`LmvUserMd`]; each type also has `parse`, `emit`, `to_bytes`.
//! - [`stripe_index`] hashes a name for a count; [`place_name`] places it in a decoded layout,
//!   migration, split, merge and bad hash types included.
//! - [`getdirstripe::print`] renders `lfs getdirstripe` output.
//!
//! ```
//! use ulnet_layout::lmv::{HashType, stripe_index};
//!
//! assert_eq!(stripe_index(HashType::Crush2, 4, b"file.mdtest.12.12345"), Ok(2));
//! assert_eq!(stripe_index(HashType::Crush, 4, b"file.mdtest.12.12345"), Ok(3));
//! ```

mod error;
mod format;
pub mod getdirstripe;
mod hash;
mod hash_type;
mod placement;
mod stem;

pub use crate::fid::Fid;
pub use error::{DecodeError, PlacementError};
pub use format::{
    DirLayout, ForeignLmv, LMV_FOREIGN_HEADER_SIZE, LMV_FOREIGN_MAX_VALUE, LMV_MAGIC_FOREIGN,
    LMV_MAGIC_STRIPE, LMV_MAGIC_V1, LMV_MAX_STRIPE_COUNT, LMV_MAX_STRIPES_PER_MDT,
    LMV_MDS_MD_HEADER_SIZE, LMV_USER_MAGIC, LMV_USER_MAGIC_SPECIFIC, LMV_USER_MD_HEADER_SIZE,
    LMV_USER_MDS_DATA_SIZE, LmvMdsMd, LmvUserMd, MdsMdKind, PoolName, UserMdKind, UserMdsData,
};
pub use hash::{
    LMV_CRUSH_PG_COUNT, all_char, crush_hash32_2, crush_placement_group, fnv_1a_64, stripe_index,
};
pub use hash_type::{HashType, HashTypeField};
pub use placement::{LayoutChange, Placement, layout_stripe_index, place_name};
pub use stem::{crush_stem, is_backup_name, is_temp_name};
