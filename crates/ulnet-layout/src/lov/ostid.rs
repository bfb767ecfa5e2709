//! Object identifiers: the 16-byte `ost_id` (a legacy id/sequence pair or a FID) and `lu_fid`.
// lustre: lustre/include/uapi/linux/lustre/lustre_ostid.h ostid_seq(), ostid_id(),
// ostid_to_fid(); lustre_fid.h fid_idif_seq() (docs/protocol/layouts.md §2.4).

use crate::fid::Fid;

/// `FID_SEQ_OST_MDT0`: legacy objects of MDT0 carry sequence 0.
pub const FID_SEQ_OST_MDT0: u64 = 0;
/// `FID_SEQ_RSVD`: sequences 1..=11 are reserved.
pub const FID_SEQ_RSVD: u64 = 11;
/// `FID_SEQ_IDIF`: first IDIF sequence; IDIF FIDs embed the OST index in bits 31..16.
pub const FID_SEQ_IDIF: u64 = 0x1_0000_0000;
/// `FID_SEQ_IDIF_MAX`.
pub const FID_SEQ_IDIF_MAX: u64 = 0x1_FFFF_FFFF;
/// `FID_SEQ_LOV_DEFAULT`: marks a directory's default layout in `lmm_oi`.
pub const FID_SEQ_LOV_DEFAULT: u64 = u64::MAX;
/// `IDIF_OID_MASK`: legacy object ids have 48 bits.
pub const IDIF_OID_MASK: u64 = (1 << 48) - 1;

/// The 16-byte `ost_id` as stored: two little-endian u64 words. Read as `oi.oi_id`/`oi.oi_seq`
/// (legacy) or as a FID (`f_seq` = first word, `f_oid`/`f_ver` = halves of the second).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OstId {
    pub first: u64,
    pub second: u64,
}

impl OstId {
    /// The object's sequence ("group"), as `ostid_seq()` reads it.
    pub fn seq(&self) -> u64 {
        if self.second == FID_SEQ_OST_MDT0 {
            FID_SEQ_OST_MDT0
        } else if self.second == FID_SEQ_LOV_DEFAULT {
            FID_SEQ_LOV_DEFAULT
        } else if is_idif(self.first) {
            FID_SEQ_OST_MDT0
        } else {
            self.first
        }
    }

    /// The object id, as `ostid_id()` reads it.
    pub fn id(&self) -> u64 {
        if self.second == FID_SEQ_OST_MDT0 {
            self.first & IDIF_OID_MASK
        } else if self.second == FID_SEQ_LOV_DEFAULT {
            self.first
        } else if is_idif(self.first) {
            ((self.first & 0xFFFF) << 32) | (self.second & 0xFFFF_FFFF)
        } else {
            self.second & 0xFFFF_FFFF
        }
    }

    /// The object's FID on OST `ost_index`: legacy ids become IDIF FIDs.
    pub fn to_fid(&self, ost_index: u32) -> Fid {
        if self.seq() == FID_SEQ_OST_MDT0 {
            let id = self.id();
            Fid {
                seq: FID_SEQ_IDIF | (u64::from(ost_index) << 16) | ((id >> 32) & 0xFFFF),
                oid: low32(id),
                ver: 0,
            }
        } else {
            self.as_fid()
        }
    }

    /// The bytes read as a FID.
    pub fn as_fid(&self) -> Fid {
        Fid { seq: self.first, oid: low32(self.second), ver: low32(self.second >> 32) }
    }

    /// A FID stored as an `ost_id`.
    pub fn from_fid(fid: Fid) -> Self {
        Self { first: fid.seq, second: u64::from(fid.oid) | (u64::from(fid.ver) << 32) }
    }

    /// A legacy (sequence 0) object id.
    pub fn legacy(id: u64) -> Self {
        Self { first: id, second: 0 }
    }
}

fn is_idif(seq: u64) -> bool {
    (FID_SEQ_IDIF..=FID_SEQ_IDIF_MAX).contains(&seq)
}

/// Whether lfs prints this group in decimal (reserved or MDT0 sequences).
// lustre: lustre_fid.h fid_seq_is_rsvd(), fid_seq_is_mdt0()
pub fn seq_prints_decimal(seq: u64) -> bool {
    seq <= FID_SEQ_RSVD
}

pub(crate) fn low32(value: u64) -> u32 {
    (value & 0xFFFF_FFFF) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_object_on_ost_7_is_the_idif_fid() {
        let oi = OstId::legacy(2);
        assert_eq!((oi.seq(), oi.id()), (0, 2));
        assert_eq!(oi.to_fid(7).to_string(), "[0x100070000:0x2:0x0]");
        assert_eq!(oi.to_fid(7).no_brace(), "0x100070000:0x2:0x0");
    }

    #[test]
    fn fid_objects_print_their_fid() {
        let fid = Fid { seq: 0x2c0000400, oid: 5, ver: 0 };
        let oi = OstId::from_fid(fid);
        assert_eq!((oi.seq(), oi.id()), (0x2c0000400, 5));
        assert_eq!(oi.to_fid(3), fid);
        assert!(!seq_prints_decimal(oi.seq()));
    }
}
