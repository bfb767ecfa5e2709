//! Temporary and backup file names, which CRUSH hashes by their stem so that a rename from
//! the temporary name to the final one stays on the same MDT (docs/protocol/dirlayouts.md §3.4).

/// The part of `name` CRUSH hashes: `.NAME.XXXXXX` (rsync) gives `NAME`, `NAME.XXXXXXXX`
/// (striped-directory tools) gives `NAME`, and `NAME~`, `NAME.bak`, `NAME.sav`, `NAME.orig`
/// give `NAME`; any other name is its own stem.
// lustre: lustre/include/lustre_lmv.h lmv_hash_crush()
pub fn crush_stem(name: &[u8], crush2: bool) -> &[u8] {
    let len = name.len();
    let stem = if is_temp_name(name, true, 6, crush2) {
        name.get(1..len - 7)
    } else if is_temp_name(name, false, 8, crush2) {
        name.get(..len - 9)
    } else {
        backup_suffix_len(name).and_then(|suffix| name.get(..len - suffix))
    };
    stem.unwrap_or(name)
}

/// Whether `name` ends in a `suffix_len`-character mktemp suffix after a dot (and, with
/// `dot_prefix`, starts with a dot). A suffix of only upper-case or only lower-case letters
/// is not random. Nor is one of mostly digits: for CRUSH2 at least `suffix_len - 1` digits
/// with a leading digit; for CRUSH (the LU-15692 bug, kept because placement must not change)
/// at least `suffix_len - 1` digits with a leading non-digit. CRUSH2 also refuses any
/// character that is not a letter or digit; CRUSH lets them through.
// lustre: lustre/include/lu_object.h lu_name_is_temp_file()
pub fn is_temp_name(name: &[u8], dot_prefix: bool, suffix_len: usize, crush2: bool) -> bool {
    if dot_prefix && name.first() != Some(&b'.') {
        return false;
    }
    let len = name.len();
    if len < usize::from(dot_prefix) + suffix_len + 2
        || name.get(len - suffix_len - 1) != Some(&b'.')
    {
        return false;
    }
    let suffix = name.get(len - suffix_len..).unwrap_or(&[]);
    let (mut lower, mut upper, mut digit) = (0, 0, 0);
    for &byte in suffix {
        match Class::of(byte) {
            Class::Lower => lower += 1,
            Class::Upper => upper += 1,
            Class::Digit => digit += 1,
            Class::Other if crush2 => return false,
            Class::Other => {}
        }
    }
    if upper == suffix_len || lower == suffix_len {
        return false;
    }
    let leading_digit = suffix.first().is_some_and(|&b| Class::of(b) == Class::Digit);
    !(digit + 1 >= suffix_len && leading_digit == crush2)
}

/// Whether `name` is a backup name: `NAME~` (but not `.~`), or ends in `.bak`, `.sav` or
/// `.orig`, case-insensitively.
// lustre: lustre/include/lu_object.h lu_name_is_backup_file()
pub fn is_backup_name(name: &[u8]) -> bool {
    backup_suffix_len(name).is_some()
}

fn backup_suffix_len(name: &[u8]) -> Option<usize> {
    let len = name.len();
    if len > 1 && name.get(len - 1) == Some(&b'~') && name.get(len - 2) != Some(&b'.') {
        return Some(1);
    }
    let dotted = |suffix: &[u8]| {
        let n = suffix.len() + 1;
        len > n
            && name.get(len - n) == Some(&b'.')
            && name.get(len - suffix.len()..).is_some_and(|end| end.eq_ignore_ascii_case(suffix))
    };
    if dotted(b"bak") || dotted(b"sav") {
        return Some(4);
    }
    dotted(b"orig").then_some(5)
}

/// A byte's class under the Linux kernel's `ctype` table, which follows Latin-1 above 0x7f.
// lustre: the kernel's lib/ctype.c, through islower()/isupper()/isdigit() in lu_object.h
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Lower,
    Upper,
    Digit,
    Other,
}

impl Class {
    fn of(byte: u8) -> Self {
        match byte {
            b'a'..=b'z' | 0xdf..=0xf6 | 0xf8..=0xff => Self::Lower,
            b'A'..=b'Z' | 0xc0..=0xd6 | 0xd8..=0xde => Self::Upper,
            b'0'..=b'9' => Self::Digit,
            _ => Self::Other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stems_of_the_documented_shapes() {
        for crush2 in [false, true] {
            assert_eq!(crush_stem(b".foo.aB3dE9", crush2), b"foo");
            assert_eq!(crush_stem(b"foo.aB3dE9x2", crush2), b"foo");
            assert_eq!(crush_stem(b"foo~", crush2), b"foo");
            assert_eq!(crush_stem(b"foo.bak", crush2), b"foo");
            assert_eq!(crush_stem(b"foo.SAV", crush2), b"foo");
            assert_eq!(crush_stem(b"foo.Orig", crush2), b"foo");
            assert_eq!(crush_stem(b"foo", crush2), b"foo");
            assert_eq!(crush_stem(b".~", crush2), b".~");
            assert_eq!(crush_stem(b"~", crush2), b"~");
            assert_eq!(crush_stem(b".bak", crush2), b".bak");
            // All one case: not random.
            assert_eq!(crush_stem(b".foo.abcdef", crush2), b".foo.abcdef");
            assert_eq!(crush_stem(b"foo.ABCDEFGH", crush2), b"foo.ABCDEFGH");
        }
    }

    #[test]
    fn crush_v1_bug_lu_15692() {
        // A dot in the suffix, or mostly digits after a non-digit: v1 takes it as temporary.
        assert_eq!(crush_stem(b"file.mdtest.12.12345", false), b"file.mdtest");
        assert_eq!(crush_stem(b"file.mdtest.12.12345", true), b"file.mdtest.12.12345");
        assert_eq!(crush_stem(b"output.6334.log", false), b"output");
        assert_eq!(crush_stem(b"output.6334.log", true), b"output.6334.log");
        // Mostly digits with a leading digit: v1 takes it as temporary, v2 does not.
        assert!(is_temp_name(b"f.1234567a", false, 8, false));
        assert!(!is_temp_name(b"f.1234567a", false, 8, true));
        // Mostly digits with a leading letter: v2 takes it as temporary, v1 does not.
        assert!(!is_temp_name(b"f.a1234567", false, 8, false));
        assert!(is_temp_name(b"f.a1234567", false, 8, true));
    }

    #[test]
    fn latin1_classes_follow_the_kernel() {
        assert_eq!(Class::of(0xc0), Class::Upper);
        assert_eq!(Class::of(0xd7), Class::Other);
        assert_eq!(Class::of(0xdf), Class::Lower);
        assert_eq!(Class::of(0xf7), Class::Other);
        assert_eq!(Class::of(0xb5), Class::Other);
        assert_eq!(Class::of(b'-'), Class::Other);
    }
}
