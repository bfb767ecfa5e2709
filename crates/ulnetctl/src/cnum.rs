//! The C number conversions lnetctl's handlers use on arguments.

/// lnetctl's `parse_long()`: `strtol(text, &end, 0)` that fails on overflow or when anything
/// follows the number. As with strtol, leading white space and a sign are accepted, `0x` is
/// hex and a leading `0` octal; and an empty string parses as 0 (strtol consumes nothing and
/// `*end` is the terminating NUL).
/// lustre: lnet/utils/lnetctl.c `parse_long()`.
pub fn parse_long(text: &str) -> Option<i64> {
    if text.is_empty() {
        return Some(0);
    }
    let (value, consumed) = strtol(text, 0);
    if consumed == 0 || consumed != text.len() {
        return None;
    }
    value
}

/// `atol()`: `strtol(text, NULL, 10)` with errors ignored: the leading decimal number, 0 if
/// there is none, saturated on overflow as glibc's strtol saturates.
pub fn atol(text: &str) -> i64 {
    let (value, _) = strtol(text, 10);
    value.unwrap_or_else(|| if text.trim_start().starts_with('-') { i64::MIN } else { i64::MAX })
}

/// C `strtol()` on 64-bit Linux: the value (`None` on overflow) and the bytes consumed
/// (0 when no digits were found, as strtol then sets `end` to the start).
fn strtol(text: &str, base: u32) -> (Option<i64>, usize) {
    let bytes = text.as_bytes();
    let mut at = 0;
    while bytes.get(at).is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)) {
        at += 1;
    }
    let negative = match bytes.get(at) {
        Some(b'-') => {
            at += 1;
            true
        }
        Some(b'+') => {
            at += 1;
            false
        }
        _ => false,
    };
    let mut radix = base;
    let is_hex_prefix = bytes.get(at) == Some(&b'0')
        && matches!(bytes.get(at + 1), Some(b'x' | b'X'))
        && bytes.get(at + 2).is_some_and(u8::is_ascii_hexdigit);
    if (base == 0 || base == 16) && is_hex_prefix {
        radix = 16;
        at += 2;
    } else if base == 0 {
        radix = if bytes.get(at) == Some(&b'0') { 8 } else { 10 };
    }
    let start = at;
    let mut magnitude: i128 = 0;
    let mut overflow = false;
    while let Some(digit) = bytes.get(at).and_then(|b| char::from(*b).to_digit(radix)) {
        magnitude = magnitude * i128::from(radix) + i128::from(digit);
        if magnitude > i128::from(i64::MAX) + 1 {
            overflow = true;
            magnitude = i128::from(i64::MAX) + 1;
        }
        at += 1;
    }
    if at == start {
        return (Some(0), 0);
    }
    let value = if negative { -magnitude } else { magnitude };
    if overflow {
        return (None, at);
    }
    (i64::try_from(value).ok(), at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_long_is_strict_strtol_base_0() {
        assert_eq!(parse_long("5"), Some(5));
        assert_eq!(parse_long("-5"), Some(-5));
        assert_eq!(parse_long(" +7"), Some(7));
        assert_eq!(parse_long("0x10"), Some(16));
        assert_eq!(parse_long("010"), Some(8));
        assert_eq!(parse_long("0"), Some(0));
        assert_eq!(parse_long(""), Some(0));
        assert_eq!(parse_long("5x"), None);
        assert_eq!(parse_long("x"), None);
        assert_eq!(parse_long(" "), None);
        assert_eq!(parse_long("08"), None);
        assert_eq!(parse_long("0x"), None);
        assert_eq!(parse_long("9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_long("-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_long("9223372036854775808"), None);
        assert_eq!(parse_long("99999999999999999999999"), None);
    }

    #[test]
    fn atol_takes_the_leading_number() {
        assert_eq!(atol("5"), 5);
        assert_eq!(atol("5s"), 5);
        assert_eq!(atol("abc"), 0);
        assert_eq!(atol(" -3"), -3);
        assert_eq!(atol("0x10"), 0);
        assert_eq!(atol("99999999999999999999"), i64::MAX);
        assert_eq!(atol("-99999999999999999999"), i64::MIN);
    }
}
