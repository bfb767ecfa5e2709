//! Module parameter values read as the kernel reads them: `kstrtoull()` and friends with
//! base 0 (`0x` hex, leading-zero octal, decimal), an optional `+` (and `-` for signed
//! types), one trailing newline allowed; `charp` strings up to 1024 bytes.
//!
//! lustre: none (Linux lib/kstrtox.c `_kstrtoull()`, `kstrtoll()`, `_parse_integer_fixup_radix()`;
//! kernel/params.c `param_set_int()`, `param_set_uint()`, `param_set_charp()`).

/// Longest string a `charp` parameter takes. Linux kernel/params.c `param_set_charp()`.
pub const MAX_STRING_PARAM_LEN: usize = 1024;

/// Why a number did not read (the kernel's -EINVAL and -ERANGE).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum NumberError {
    Invalid,
    Range,
}

/// `kstrtoull(text, 0)`.
pub(super) fn unsigned(text: &str) -> Result<u64, NumberError> {
    digits(text.strip_prefix('+').unwrap_or(text))
}

/// `kstrtoll(text, 0)`.
pub(super) fn signed(text: &str) -> Result<i64, NumberError> {
    match text.strip_prefix('-') {
        Some(rest) => {
            let magnitude = digits(rest)?;
            0i64.checked_sub_unsigned(magnitude).ok_or(NumberError::Range)
        }
        None => i64::try_from(unsigned(text)?).map_err(|_| NumberError::Range),
    }
}

/// `kstrtoint(text, 0)`.
pub(super) fn int(text: &str) -> Result<i32, NumberError> {
    i32::try_from(signed(text)?).map_err(|_| NumberError::Range)
}

/// `kstrtouint(text, 0)`.
pub(super) fn uint(text: &str) -> Result<u32, NumberError> {
    u32::try_from(unsigned(text)?).map_err(|_| NumberError::Range)
}

/// `_kstrtoull()`: the radix from the prefix, at least one digit, then nothing but one
/// optional newline.
fn digits(text: &str) -> Result<u64, NumberError> {
    let bytes = text.as_bytes();
    let (radix, body) = match bytes {
        [b'0', b'x' | b'X', rest @ ..] if rest.first().is_some_and(u8::is_ascii_hexdigit) => {
            (16, rest)
        }
        [b'0', ..] => (8, bytes),
        _ => (10, bytes),
    };
    let mut value: u64 = 0;
    let mut count = 0;
    for byte in body {
        let Some(digit) = char::from(*byte).to_digit(radix) else { break };
        value = value
            .checked_mul(u64::from(radix))
            .and_then(|v| v.checked_add(u64::from(digit)))
            .ok_or(NumberError::Range)?;
        count += 1;
    }
    let rest = body.get(count..).unwrap_or_default();
    if count == 0 {
        return Err(NumberError::Invalid);
    }
    match rest {
        [] | [b'\n'] => Ok(value),
        _ => Err(NumberError::Invalid),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_as_the_kernel_reads_them() {
        assert_eq!(unsigned("150"), Ok(150));
        assert_eq!(unsigned("+7"), Ok(7));
        assert_eq!(unsigned("0x1F"), Ok(31));
        assert_eq!(unsigned("010"), Ok(8));
        assert_eq!(unsigned("0"), Ok(0));
        assert_eq!(unsigned("12\n"), Ok(12));
        for bad in ["", "+", "-1", "1x", "08", "0x", "1 ", " 1", "1\n\n", "0xg"] {
            assert_eq!(unsigned(bad), Err(NumberError::Invalid), "{bad:?}");
        }
        assert_eq!(unsigned("18446744073709551616"), Err(NumberError::Range));
        assert_eq!(signed("-1"), Ok(-1));
        assert_eq!(signed("-0x10"), Ok(-16));
        assert_eq!(signed("-9223372036854775808"), Ok(i64::MIN));
        assert_eq!(signed("9223372036854775808"), Err(NumberError::Range));
        assert_eq!(int("-2147483648"), Ok(i32::MIN));
        assert_eq!(int("2147483648"), Err(NumberError::Range));
        assert_eq!(uint("4294967295"), Ok(u32::MAX));
        assert_eq!(uint("4294967296"), Err(NumberError::Range));
        assert_eq!(uint("-1"), Err(NumberError::Invalid));
    }
}
