//! The `lmv_hash_type` word: a hash function in the low 16 bits, state flags above.
// lustre: include/uapi/linux/lustre/lustre_user.h enum lmv_hash_type, LMV_HASH_FLAG_*,
// lmv_hash_is_splitting(), lmv_hash_is_merging(), lmv_hash_is_migrating()

use std::fmt;

/// The name hashes Lustre defines (docs/protocol/dirlayouts.md §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HashType {
    /// Sum of the name's bytes; for testing only.
    AllChar,
    /// 64-bit FNV-1a; `LMV_HASH_TYPE_DEFAULT`, the default for new striped directories.
    Fnv1a64,
    /// CRUSH straw2 over 4096 placement groups, temp-file stems with the LU-15692 bug.
    Crush,
    /// CRUSH with the corrected temp-file stem rule (Lustre 2.16).
    Crush2,
}

impl HashType {
    /// Lustre's default for new striped directories (`LMV_HASH_TYPE_DEFAULT`).
    pub const DEFAULT: Self = Self::Fnv1a64;
    /// Every hash type, in code order.
    pub const ALL: [Self; 4] = [Self::AllChar, Self::Fnv1a64, Self::Crush, Self::Crush2];

    /// The code in the low 16 bits of `lmv_hash_type`.
    pub fn code(self) -> u32 {
        match self {
            Self::AllChar => 1,
            Self::Fnv1a64 => 2,
            Self::Crush => 3,
            Self::Crush2 => 4,
        }
    }

    /// The hash type a code names; `None` for 0 ("none") and unknown codes.
    pub fn from_code(code: u32) -> Option<Self> {
        Self::ALL.into_iter().find(|hash| hash.code() == code)
    }

    /// The name lfs prints and accepts (`mdt_hash_name[]`).
    pub fn name(self) -> &'static str {
        HASH_NAMES.get(self.code() as usize).copied().unwrap_or("")
    }

    /// Parses a name as `lfs mkdir -H` does, or a decimal code.
    pub fn from_name(name: &str) -> Option<Self> {
        if let Ok(code) = name.parse::<u32>() {
            return Self::from_code(code);
        }
        Self::ALL.into_iter().find(|hash| hash.name() == name)
    }
}

impl fmt::Display for HashType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `mdt_hash_name[]`, indexed by code.
const HASH_NAMES: [&str; 5] = ["none", "all_char", "fnv_1a_64", "crush", "crush2"];

/// The whole 32-bit `lmv_hash_type` / `lum_hash_type` word, flags included.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct HashTypeField(pub u32);

impl HashTypeField {
    /// The low 16 bits hold the hash code.
    pub const TYPE_MASK: u32 = 0x0000_ffff;
    /// More than one stripe per MDT was asked for.
    pub const FLAG_OVERSTRIPED: u32 = 0x0100_0000;
    /// Never split automatically.
    pub const FLAG_FIXED: u32 = 0x0200_0000;
    /// Being merged (with [`Self::FLAG_MIGRATION`]).
    pub const FLAG_MERGE: u32 = 0x0400_0000;
    /// Being split (with [`Self::FLAG_MIGRATION`]).
    pub const FLAG_SPLIT: u32 = 0x0800_0000;
    /// LFSCK rebuilt a lost master LMV.
    pub const FLAG_LOST_LMV: u32 = 0x1000_0000;
    /// LFSCK found the hash type bad: names may be on any stripe.
    pub const FLAG_BAD_TYPE: u32 = 0x2000_0000;
    /// Being migrated (alone), split or merged (with [`Self::FLAG_SPLIT`] / [`Self::FLAG_MERGE`]).
    pub const FLAG_MIGRATION: u32 = 0x8000_0000;
    /// Flags that describe a layout change.
    pub const FLAG_LAYOUT_CHANGE: u32 = Self::FLAG_MIGRATION | Self::FLAG_SPLIT | Self::FLAG_MERGE;
    /// Every flag Lustre defines (`LMV_HASH_FLAG_KNOWN`).
    pub const FLAG_KNOWN: u32 = 0xbf00_0000;

    /// A field holding `hash` and no flags.
    pub fn new(hash: HashType) -> Self {
        Self(hash.code())
    }

    /// The hash code (low 16 bits).
    pub fn code(self) -> u32 {
        self.0 & Self::TYPE_MASK
    }

    /// The hash type, if the code is one Lustre knows (`lmv_is_known_hash_type`).
    pub fn hash_type(self) -> Option<HashType> {
        HashType::from_code(self.code())
    }

    /// The flag bits (high 16 bits).
    pub fn flags(self) -> u32 {
        self.0 & !Self::TYPE_MASK
    }

    /// Names may sit on any stripe: BAD_TYPE is set or the code is unknown (`lmv_dir_bad_hash`).
    // lustre: lustre/include/lustre_lmv.h lmv_dir_bad_hash()
    pub fn is_bad(self) -> bool {
        self.0 & Self::FLAG_BAD_TYPE != 0 || self.hash_type().is_none()
    }

    /// The layout change in progress, if any.
    pub fn layout_change(self) -> Option<super::LayoutChange> {
        use super::LayoutChange;
        match self.0 & Self::FLAG_LAYOUT_CHANGE {
            x if x == Self::FLAG_MIGRATION | Self::FLAG_SPLIT => Some(LayoutChange::Split),
            x if x == Self::FLAG_MIGRATION | Self::FLAG_MERGE => Some(LayoutChange::Merge),
            x if x == Self::FLAG_MIGRATION => Some(LayoutChange::Migration),
            _ => None,
        }
    }
}

/// The hash as `lfs getdirstripe` prints it: the name (or the code in hex when it has no
/// name), then `,overstriped`, `,migrating`, `,bad_type`, `,lost_lmv`, `,fixed` and
/// `,unknown_XXXX` for undefined flag bits, in that order.
// lustre: lustre/utils/liblustreapi.c lmv_dump_user_lmm()
impl fmt::Display for HashTypeField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match HASH_NAMES.get(self.code() as usize) {
            Some(name) => f.write_str(name)?,
            None => write!(f, "{:#x}", self.code())?,
        }
        let flags = self.flags();
        for (bit, name) in [
            (Self::FLAG_OVERSTRIPED, ",overstriped"),
            (Self::FLAG_MIGRATION, ",migrating"),
            (Self::FLAG_BAD_TYPE, ",bad_type"),
            (Self::FLAG_LOST_LMV, ",lost_lmv"),
            (Self::FLAG_FIXED, ",fixed"),
        ] {
            if flags & bit != 0 {
                f.write_str(name)?;
            }
        }
        let unknown = flags & !Self::FLAG_KNOWN;
        if unknown != 0 {
            write!(f, ",unknown_{unknown:04x}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lmv::LayoutChange;

    #[test]
    fn names_and_codes() {
        assert_eq!(HashType::DEFAULT, HashType::Fnv1a64);
        for hash in HashType::ALL {
            assert_eq!(HashType::from_name(hash.name()), Some(hash));
            assert_eq!(HashType::from_code(hash.code()), Some(hash));
        }
        assert_eq!(HashType::from_name("4"), Some(HashType::Crush2));
        assert_eq!(HashType::from_name("none"), None);
        assert_eq!(HashType::from_code(5), None);
    }

    #[test]
    fn printed_with_flags_in_lfs_order() {
        let field = HashTypeField(2 | HashTypeField::FLAG_FIXED | HashTypeField::FLAG_MIGRATION);
        assert_eq!(field.to_string(), "fnv_1a_64,migrating,fixed");
        assert_eq!(HashTypeField(0).to_string(), "none");
        assert_eq!(HashTypeField(7).to_string(), "0x7");
        assert_eq!(HashTypeField(3 | 0x4000_0000).to_string(), "crush,unknown_40000000");
        assert_eq!(HashTypeField(0x0100_0004).to_string(), "crush2,overstriped");
    }

    #[test]
    fn layout_changes_and_bad_types() {
        let m = HashTypeField::FLAG_MIGRATION;
        assert_eq!(HashTypeField(2 | m).layout_change(), Some(LayoutChange::Migration));
        let split = HashTypeField(2 | m | HashTypeField::FLAG_SPLIT);
        assert_eq!(split.layout_change(), Some(LayoutChange::Split));
        let merge = HashTypeField(2 | m | HashTypeField::FLAG_MERGE);
        assert_eq!(merge.layout_change(), Some(LayoutChange::Merge));
        assert_eq!(HashTypeField(2 | HashTypeField::FLAG_SPLIT).layout_change(), None);
        assert!(HashTypeField(2 | HashTypeField::FLAG_BAD_TYPE).is_bad());
        assert!(HashTypeField(0).is_bad());
        assert!(!HashTypeField(4).is_bad());
    }
}
