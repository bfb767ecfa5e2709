//! The `lustre.lov` xattr: a plain, composite or foreign layout, chosen by its magic.

use super::bytes::Reader;
use super::composite::CompositeLayout;
use super::error::{DecodeError, EncodeError};
use super::foreign::ForeignLayout;
use super::plain::PlainLayout;
use super::{
    LOV_MAGIC_COMP_V1, LOV_MAGIC_FOREIGN, LOV_MAGIC_SEL, LOV_MAGIC_SPECIFIC, LOV_MAGIC_V1,
    LOV_MAGIC_V3, MAX_XATTR_SIZE,
};

/// A file layout or a directory's default layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Layout {
    Plain(PlainLayout),
    Composite(CompositeLayout),
    Foreign(ForeignLayout),
}

impl Layout {
    /// Decodes an xattr value. Total: any input gives a layout or a named error.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        if bytes.len() > MAX_XATTR_SIZE {
            return Err(DecodeError::TooLarge(bytes.len()));
        }
        match Reader::new(bytes).u32(0, "lmm_magic")? {
            LOV_MAGIC_V1 | LOV_MAGIC_V3 | LOV_MAGIC_SPECIFIC => {
                PlainLayout::decode(bytes).map(Self::Plain)
            }
            LOV_MAGIC_COMP_V1 | LOV_MAGIC_SEL => {
                CompositeLayout::decode(bytes).map(Self::Composite)
            }
            LOV_MAGIC_FOREIGN => ForeignLayout::decode(bytes).map(Self::Foreign),
            other => Err(DecodeError::UnknownMagic(other)),
        }
    }

    /// The xattr value.
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        let out = match self {
            Self::Plain(plain) => {
                let mut out = Vec::with_capacity(plain.encoded_len());
                plain.encode_into(&mut out)?;
                out
            }
            Self::Composite(composite) => composite.encode()?,
            Self::Foreign(foreign) => {
                let mut out = Vec::with_capacity(foreign.encoded_len());
                foreign.encode_into(&mut out);
                out
            }
        };
        if out.len() > MAX_XATTR_SIZE {
            return Err(EncodeError::TooLarge(out.len()));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
