//! Errors of the layout codecs. Arithmetic and grammar errors live next to their code.

use thiserror::Error;

/// Why a layout xattr did not decode.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// The buffer ends inside a field.
    #[error("truncated at {field}: need {needed} bytes, have {available}")]
    Truncated { field: &'static str, needed: usize, available: usize },
    /// The xattr is larger than any layout can be.
    #[error("layout of {0} bytes exceeds the {max} byte xattr limit", max = super::MAX_XATTR_SIZE)]
    TooLarge(usize),
    /// The first word is no LOV magic this crate knows.
    #[error("unknown layout magic {0:#010x}")]
    UnknownMagic(u32),
    /// A component's sub-layout has a magic that cannot appear there.
    #[error("component {index}: sub-layout magic {magic:#010x} is not v1, v3, specific or foreign")]
    BadSubLayoutMagic { index: usize, magic: u32 },
    /// Bytes after the objects do not form a whole `lov_ost_data_v1`.
    #[error("{0} bytes after the objects are not a whole 24-byte object slot")]
    PartialObject(usize),
    /// More object slots than `LOV_MAX_STRIPE_COUNT`.
    #[error("{0} object slots exceed LOV_MAX_STRIPE_COUNT ({max})", max = super::LOV_MAX_STRIPE_COUNT)]
    TooManyObjects(usize),
    /// `lcm_size` disagrees with the buffer.
    #[error("lcm_size {declared} does not match the {actual} byte buffer")]
    SizeMismatch { declared: u32, actual: usize },
    /// `lcm_entry_count` is zero or more than fit.
    #[error("lcm_entry_count {0} is zero or exceeds what the buffer holds")]
    BadEntryCount(u16),
    /// A component's `lcme_offset`/`lcme_size` point outside the layout or into the header.
    #[error("component {index}: sub-layout [{offset}, +{size}) lies outside the layout")]
    SubLayoutOutOfBounds { index: usize, offset: u32, size: u32 },
    /// A component's extent starts after it ends.
    #[error("component {index}: extent start {start} is after end {end}")]
    BadExtent { index: usize, start: u64, end: u64 },
    /// The pool name has no terminating NUL within 16 bytes or is not UTF-8.
    #[error("pool name is not a NUL-terminated UTF-8 string of at most 15 bytes")]
    BadPoolName,
    /// `lfm_length` runs past the buffer.
    #[error("foreign value length {length} exceeds the {available} bytes left")]
    ForeignLength { length: u32, available: usize },
    /// A composite layout nested inside a component.
    #[error("component {0}: nested composite layouts are not allowed")]
    Nested(usize),
}

/// Why a layout could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EncodeError {
    /// The encoding would exceed the xattr limit.
    #[error("layout of {0} bytes exceeds the {max} byte xattr limit", max = super::MAX_XATTR_SIZE)]
    TooLarge(usize),
    /// More components than `lcm_entry_count` can hold, or none.
    #[error("{0} components: a composite layout holds 1 to {max}", max = super::MAX_COMPONENTS)]
    ComponentCount(usize),
    /// More objects than `LOV_MAX_STRIPE_COUNT`.
    #[error("{0} object slots exceed LOV_MAX_STRIPE_COUNT")]
    TooManyObjects(usize),
}
