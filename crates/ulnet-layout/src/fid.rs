//! `lu_fid`: the 16-byte file identifier of every Lustre object (files, directory stripes,
//! OST objects), shared by the file and directory layouts.

use std::fmt;

/// A Lustre FID: sequence, object id within it, version.
// lustre: include/uapi/linux/lustre/lustre_user.h struct lu_fid
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Fid {
    pub seq: u64,
    pub oid: u32,
    pub ver: u32,
}

impl Fid {
    /// Encoded size: `seq` u64, `oid` u32, `ver` u32, little-endian on disk.
    pub const SIZE: usize = 16;

    /// Decodes the first [`Self::SIZE`] bytes; `None` if fewer are given.
    pub fn parse(bytes: &[u8]) -> Option<Self> {
        let seq = u64::from_le_bytes(bytes.get(0..8)?.try_into().ok()?);
        let oid = u32::from_le_bytes(bytes.get(8..12)?.try_into().ok()?);
        let ver = u32::from_le_bytes(bytes.get(12..16)?.try_into().ok()?);
        Some(Self { seq, oid, ver })
    }

    /// Appends the 16-byte little-endian encoding.
    pub fn emit(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.seq.to_le_bytes());
        out.extend_from_slice(&self.oid.to_le_bytes());
        out.extend_from_slice(&self.ver.to_le_bytes());
    }

    /// Whether Lustre deems the FID sane: a reserved, IGIF or IDIF sequence (1 to 2^33 - 1), or
    /// a normal sequence (from `FID_SEQ_START` = 2^33) with version 0. Sequence 0 is not.
    // lustre: include/uapi/linux/lustre/lustre_fid.h fid_is_sane()
    pub fn is_sane(&self) -> bool {
        const FID_SEQ_START: u64 = 0x2_0000_0000;
        self.seq != 0 && (self.seq < FID_SEQ_START || self.ver == 0)
    }

    /// Parses `SEQ:OID:VER` with each part hex (`0x` optional), brackets optional, as lfs
    /// prints FIDs.
    pub fn from_text(text: &str) -> Option<Self> {
        let inner = text.trim();
        let inner = inner.strip_prefix('[').unwrap_or(inner);
        let inner = inner.strip_suffix(']').unwrap_or(inner);
        let mut parts = inner.split(':');
        let seq = parse_hex_u64(parts.next()?)?;
        let oid = u32::try_from(parse_hex_u64(parts.next()?)?).ok()?;
        let ver = u32::try_from(parse_hex_u64(parts.next()?)?).ok()?;
        parts.next().is_none().then_some(Self { seq, oid, ver })
    }
}

impl Fid {
    /// `SEQ:OID:VER` without brackets, as Lustre's `DFID_NOBRACE` (`%#llx:0x%x:0x%x`): the
    /// sequence uses C's `#` flag, so a zero sequence prints as `0`, not `0x0`.
    // lustre: include/uapi/linux/lustre/lustre_user.h DFID_NOBRACE
    pub fn no_brace(&self) -> String {
        format!("{}:{:#x}:{:#x}", alt_hex(self.seq), self.oid, self.ver)
    }
}

/// `[SEQ:OID:VER]`, Lustre's `DFID`.
// lustre: include/uapi/linux/lustre/lustre_user.h DFID
impl fmt::Display for Fid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}]", self.no_brace())
    }
}

/// C's `%#x`: a `0x` prefix except for zero.
pub fn alt_hex(value: u64) -> String {
    if value == 0 { "0".to_string() } else { format!("{value:#x}") }
}

fn parse_hex_u64(text: &str) -> Option<u64> {
    let digits = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")).unwrap_or(text);
    if digits.is_empty() {
        return None;
    }
    u64::from_str_radix(digits, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_matches_c_alternate_hex() {
        let fid = Fid { seq: 0x2_8000_0400, oid: 2, ver: 0 };
        assert_eq!(fid.no_brace(), "0x280000400:0x2:0x0");
        assert_eq!(fid.to_string(), "[0x280000400:0x2:0x0]");
        assert_eq!(Fid::default().no_brace(), "0:0x0:0x0");
    }

    #[test]
    fn sanity_follows_the_sequence_ranges() {
        let fid = |seq, ver| Fid { seq, oid: 1, ver };
        assert!(!fid(0, 0).is_sane());
        assert!(fid(11, 0).is_sane() && fid(12, 5).is_sane() && fid(0x1_0000_0000, 1).is_sane());
        assert!(fid(0x2_0000_0400, 0).is_sane());
        assert!(!fid(0x2_0000_0400, 1).is_sane());
    }

    #[test]
    fn text_and_bytes_round_trip() {
        let fid = Fid { seq: 0x2_0000_0401, oid: 0x1234, ver: 7 };
        assert_eq!(Fid::from_text(&fid.no_brace()), Some(fid));
        assert_eq!(Fid::from_text("[0x200000401:0x1234:0x7]"), Some(fid));
        assert_eq!(Fid::from_text("0x1:0x2"), None);
        assert_eq!(Fid::from_text("0x1:0x100000000:0x0"), None);
        let mut bytes = Vec::new();
        fid.emit(&mut bytes);
        assert_eq!(bytes.len(), Fid::SIZE);
        assert_eq!(Fid::parse(&bytes), Some(fid));
        assert_eq!(Fid::parse(&bytes[..15]), None);
    }
}
