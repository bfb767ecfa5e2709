//! Foreign layouts: `lov_foreign_md`, an opaque typed value (docs/protocol/layouts.md §2.5).
// lustre: lustre/include/uapi/linux/lustre/lustre_user.h struct lov_foreign_md

use super::LOV_MAGIC_FOREIGN;
use super::bytes::{Put, Reader};
use super::error::DecodeError;

/// Bytes before `lfm_value`.
pub const FOREIGN_HEADER_SIZE: usize = 16;

/// A foreign layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForeignLayout {
    /// `lfm_type`.
    pub foreign_type: u32,
    /// `lfm_flags`.
    pub flags: u32,
    /// `lfm_value` (`lfm_length` bytes).
    pub value: Vec<u8>,
}

impl ForeignLayout {
    /// Decodes `bytes`; the value is `lfm_length` bytes, the rest must be absent or padding.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let r = Reader::new(bytes);
        let magic = r.u32(0, "lfm_magic")?;
        if magic != LOV_MAGIC_FOREIGN {
            return Err(DecodeError::UnknownMagic(magic));
        }
        let length = r.u32(4, "lfm_length")?;
        let available = bytes.len().saturating_sub(FOREIGN_HEADER_SIZE);
        let len = usize::try_from(length)
            .ok()
            .filter(|&len| len <= available)
            .ok_or(DecodeError::ForeignLength { length, available })?;
        Ok(Self {
            foreign_type: r.u32(8, "lfm_type")?,
            flags: r.u32(12, "lfm_flags")?,
            value: r.slice(FOREIGN_HEADER_SIZE, len, "lfm_value")?.to_vec(),
        })
    }

    /// Size of the encoding.
    pub fn encoded_len(&self) -> usize {
        FOREIGN_HEADER_SIZE + self.value.len()
    }

    /// Appends the encoding.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        out.put_u32(LOV_MAGIC_FOREIGN);
        out.put_u32(u32::try_from(self.value.len()).unwrap_or(u32::MAX));
        out.put_u32(self.foreign_type);
        out.put_u32(self.flags);
        out.extend_from_slice(&self.value);
    }
}
