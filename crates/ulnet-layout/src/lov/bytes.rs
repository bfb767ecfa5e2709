//! Bounds-checked little-endian reads: every read names the field, so a short buffer
//! becomes [`DecodeError::Truncated`] instead of a panic.

use super::error::DecodeError;

/// Reads fixed-width little-endian fields of `bytes` at absolute offsets.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Self { bytes }
    }

    pub(crate) fn slice(
        &self,
        at: usize,
        len: usize,
        field: &'static str,
    ) -> Result<&'a [u8], DecodeError> {
        at.checked_add(len).and_then(|end| self.bytes.get(at..end)).ok_or(DecodeError::Truncated {
            field,
            needed: at.saturating_add(len),
            available: self.bytes.len(),
        })
    }

    fn array<const N: usize>(
        &self,
        at: usize,
        field: &'static str,
    ) -> Result<[u8; N], DecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.slice(at, N, field)?);
        Ok(out)
    }

    pub(crate) fn u8(&self, at: usize, field: &'static str) -> Result<u8, DecodeError> {
        Ok(self.array::<1>(at, field)?[0])
    }

    pub(crate) fn u16(&self, at: usize, field: &'static str) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(self.array(at, field)?))
    }

    pub(crate) fn u32(&self, at: usize, field: &'static str) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.array(at, field)?))
    }

    pub(crate) fn u64(&self, at: usize, field: &'static str) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.array(at, field)?))
    }
}

/// Appends little-endian fields.
pub(crate) trait Put {
    fn put_u16(&mut self, value: u16);
    fn put_u32(&mut self, value: u32);
    fn put_u64(&mut self, value: u64);
}

impl Put for Vec<u8> {
    fn put_u16(&mut self, value: u16) {
        self.extend_from_slice(&value.to_le_bytes());
    }
    fn put_u32(&mut self, value: u32) {
        self.extend_from_slice(&value.to_le_bytes());
    }
    fn put_u64(&mut self, value: u64) {
        self.extend_from_slice(&value.to_le_bytes());
    }
}
