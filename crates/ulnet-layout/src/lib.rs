//! Lustre's file and directory layouts, with no I/O.
//!
//! - [`lov`]: file layouts: the plain `lov_mds_md`/`lov_user_md` v1/v3 formats, composite
//!   (PFL) layouts with DoM components, file offset arithmetic, the `lfs setstripe` grammar and
//!   the `lfs getstripe` printers.
//! - [`lmv`]: directory layouts: `lmv_mds_md_v1`, `lmv_user_md` and the foreign LMV, the name
//!   hashes (`all_char`, `fnv_1a_64`, `crush`, `crush2`) that place an entry on a stripe, also
//!   during migration, split and merge, and the `lfs getdirstripe` printer.
//!
//! Every decoder is total: any input gives a value or a named error, and no count read from
//! input allocates beyond a named bound. Facts: docs/protocol/layouts.md and
//! docs/protocol/dirlayouts.md, and the Lustre files they cite.

pub mod fid;
pub mod lmv;
pub mod lov;
