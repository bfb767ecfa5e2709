//! Errors of the LMV decoders and of name placement.

use thiserror::Error;

/// Why a byte string is not a valid directory layout xattr.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// Fewer bytes than the fixed header of the format the magic names.
    #[error("{format} needs {needed} bytes, got {got}")]
    ShortHeader { format: &'static str, needed: usize, got: usize },
    /// The first word is none of the magics this decoder accepts.
    #[error("unknown LMV magic {0:#010x}")]
    UnknownMagic(u32),
    /// A stripe count above [`LMV_MAX_STRIPE_COUNT`](super::LMV_MAX_STRIPE_COUNT).
    #[error("stripe count {count} exceeds the limit {limit}")]
    StripeCountTooLarge { count: u32, limit: u32 },
    /// A `lmv_user_md` naming specific MDTs with a negative stripe count.
    #[error("specific-MDT layout with negative stripe count {0}")]
    NegativeSpecificCount(i32),
    /// Fewer bytes than the per-stripe entries the count announces.
    #[error("{count} stripe entries need {needed} bytes, got {got}")]
    ShortStripes { count: u32, needed: usize, got: usize },
    /// A foreign layout whose value length is above
    /// [`LMV_FOREIGN_MAX_VALUE`](super::LMV_FOREIGN_MAX_VALUE).
    #[error("foreign value length {length} exceeds the limit {limit}")]
    ForeignTooLong { length: u32, limit: u32 },
    /// A foreign layout whose value is cut short.
    #[error("foreign value of {length} bytes, only {got} present")]
    ShortForeignValue { length: u32, got: usize },
}

/// Why a name cannot be placed on a stripe of a layout.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PlacementError {
    /// Lustre never hashes an empty name (it asserts a positive length).
    #[error("empty name")]
    EmptyName,
    /// A hash type Lustre does not know (low 16 bits of the hash field), with more than one stripe.
    #[error("unknown hash type {0:#x}")]
    UnknownHashType(u32),
    /// More stripes than a directory may have
    /// ([`LMV_MAX_STRIPE_COUNT`](super::LMV_MAX_STRIPE_COUNT)): refused before hashing, since
    /// CRUSH's work grows with the count.
    #[error("stripe count {0} exceeds the limit")]
    TooManyStripes(u32),
    /// A layout with no stripe to place a name on.
    #[error("layout has no stripes")]
    NoStripes,
    /// The layout-change fields describe a layout that does not fit in the stripes present.
    #[error(
        "layout change inconsistent: stripe count {stripe_count}, migrate offset {migrate_offset}"
    )]
    InconsistentChange { stripe_count: u32, migrate_offset: u32 },
}
