//! Sizes on lfs command lines: a number (decimal, `0x` hex or `0` octal, as C's `strtoull`
//! base 0 reads it) with an optional suffix: `b` = 512-byte blocks, `k`/`m`/`g`/`t`/`p`/`e`
//! (either case) = powers of 1024 (docs/protocol/layouts.md §6.2).
// lustre: lustre/utils/liblustreapi.c llapi_parse_size()

use thiserror::Error;

/// Why a size did not parse.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SizeError {
    #[error("'{0}' is not a size")]
    Invalid(String),
    #[error("'{0}' overflows 64 bits")]
    Overflow(String),
}

/// Parses `text` as lfs does. Fractions (`1.5M`) are not accepted.
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    let invalid = || SizeError::Invalid(text.to_string());
    if text.starts_with('-') {
        return Err(invalid());
    }
    let (digits, radix) =
        if let Some(hex) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
            (hex, 16)
        } else if text.len() > 1 && text.starts_with('0') {
            (text.get(1..).unwrap_or(""), 8)
        } else {
            (text, 10)
        };
    let split = digits.find(|c: char| !c.is_digit(radix)).unwrap_or(digits.len());
    let (number, suffix) = digits.split_at(split);
    if number.is_empty() && radix != 8 {
        return Err(invalid());
    }
    let value = if number.is_empty() {
        0
    } else {
        u64::from_str_radix(number, radix).map_err(|_| SizeError::Overflow(text.to_string()))?
    };
    let shift = match suffix {
        "" => 0,
        "b" | "B" => 9,
        "k" | "K" => 10,
        "m" | "M" => 20,
        "g" | "G" => 30,
        "t" | "T" => 40,
        "p" | "P" => 50,
        "e" | "E" => 60,
        _ => return Err(invalid()),
    };
    value.checked_mul(1 << shift).ok_or_else(|| SizeError::Overflow(text.to_string()))
}

/// `value` with the largest exact binary suffix (`4M`, `64K`, `10G`), for option text.
pub fn format_size(value: u64) -> String {
    const SUFFIXES: [(u32, &str); 5] = [(50, "P"), (40, "T"), (30, "G"), (20, "M"), (10, "K")];
    for (shift, suffix) in SUFFIXES {
        if value != 0 && value % (1 << shift) == 0 {
            return format!("{}{suffix}", value >> shift);
        }
    }
    value.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffixes_and_radixes() {
        assert_eq!(parse_size("4M"), Ok(4 << 20));
        assert_eq!(parse_size("64k"), Ok(64 << 10));
        assert_eq!(parse_size("10G"), Ok(10 << 30));
        assert_eq!(parse_size("0x10000"), Ok(65536));
        assert_eq!(parse_size("010"), Ok(8));
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size("2b"), Ok(1024));
        assert!(parse_size("-1").is_err());
        assert!(parse_size("4MB").is_err());
        assert!(parse_size("M").is_err());
        assert!(matches!(parse_size("17E"), Err(SizeError::Overflow(_))));
        assert_eq!(format_size(1 << 20), "1M");
        assert_eq!(format_size(10 << 30), "10G");
        assert_eq!(format_size(3 << 16), "192K");
    }
}
