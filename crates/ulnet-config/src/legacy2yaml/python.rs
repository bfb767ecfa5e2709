//! The few Python string rules `lnet_legacy2yaml` relies on, so that text is split, stripped,
//! matched, decoded and quoted the way the Python 3 tool does: `str.isspace()` (regular
//! expressions' `\s`, `strip()`, `split()`), `\w`, `int()`, `repr()`, the UTF-8 codec's error
//! texts and text-mode newline translation.

/// `str.isspace()`, which is also what `\s`, `strip()` and `split()` use: Unicode White_Space
/// plus the four information separators U+001C..U+001F.
pub(super) fn is_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Regular expressions' `\w` on `str`: alphanumeric or underscore.
pub(super) fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// `str.strip()`.
pub(super) fn strip(text: &str) -> &str {
    text.trim_matches(is_space)
}

/// `str.rstrip()`.
pub(super) fn rstrip(text: &str) -> &str {
    text.trim_end_matches(is_space)
}

/// `str.split()` without arguments: runs of whitespace separate, none are kept.
pub(super) fn split_whitespace(text: &str) -> impl Iterator<Item = &str> {
    text.split(is_space).filter(|piece| !piece.is_empty())
}

/// `int(text)` for a decimal string: surrounding whitespace, an optional sign, digits with
/// single underscores between them. Returns the value as `str(int(text))` prints it (no
/// leading zeros, no `+`, `0` for minus zero), exact whatever its length. Only ASCII digits
/// are read (Python also takes other scripts' decimal digits).
pub(super) fn int(text: &str) -> Option<String> {
    let text = strip(text);
    let (negative, digits) = match text.as_bytes().first() {
        Some(b'-') => (true, text.get(1..)?),
        Some(b'+') => (false, text.get(1..)?),
        _ => (false, text),
    };
    if digits.is_empty()
        || digits.starts_with('_')
        || digits.ends_with('_')
        || digits.contains("__")
        || !digits.bytes().all(|b| b.is_ascii_digit() || b == b'_')
    {
        return None;
    }
    let plain: String = digits.chars().filter(|c| *c != '_').collect();
    let trimmed = plain.trim_start_matches('0');
    Some(match (negative, trimmed.is_empty()) {
        (_, true) => "0".to_string(),
        (true, false) => format!("-{trimmed}"),
        (false, false) => trimmed.to_string(),
    })
}

/// Whether the decimal `value` (as [`int`] returns it) lies in `low..=high`.
pub(super) fn int_in_range(value: &str, low: u32, high: u32) -> bool {
    // Longer than ten digits, or negative, is outside any u32 range.
    value.parse::<u32>().is_ok_and(|v| (low..=high).contains(&v))
}

/// `repr(text)` of a `str`: single quotes unless the text has one and no double quote, with
/// backslashes, the quote and unprintable characters escaped.
pub fn repr(text: &str) -> String {
    let quote = if text.contains('\'') && !text.contains('"') { '"' } else { '\'' };
    let mut out = String::with_capacity(text.len() + 2);
    out.push(quote);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if printable(c) => out.push(c),
            c if u32::from(c) < 0x100 => out.push_str(&format!("\\x{:02x}", u32::from(c))),
            c if u32::from(c) < 0x10000 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push_str(&format!("\\U{:08x}", u32::from(c))),
        }
    }
    out.push(quote);
    out
}

/// `str.isprintable()` for one character, approximately: not a control character and not a
/// separator other than the plain space.
fn printable(c: char) -> bool {
    c == ' ' || !(c.is_control() || c.is_whitespace() || ('\u{ad}' == c))
}

/// Text-mode reading: the file's bytes as UTF-8, with `\r\n` and `\r` read as `\n`
/// (Python's universal newlines). The error is the codec's message.
pub fn decode(bytes: &[u8]) -> Result<String, String> {
    match std::str::from_utf8(bytes) {
        Ok(text) => Ok(text.replace("\r\n", "\n").replace('\r', "\n")),
        Err(error) => Err(codec_error(bytes, &error)),
    }
}

/// The UTF-8 codec's `UnicodeDecodeError` text: `'utf-8' codec can't decode byte 0xff in
/// position 0: invalid start byte` (or `bytes in position 3-4: ...`).
fn codec_error(bytes: &[u8], error: &std::str::Utf8Error) -> String {
    let at = error.valid_up_to();
    let (length, reason) = match error.error_len() {
        None => (bytes.len() - at, "unexpected end of data"),
        Some(length) => {
            let invalid_start =
                bytes.get(at).is_some_and(|b| matches!(b, 0x80..=0xc1 | 0xf5..=0xff));
            let reason = if length == 1 && invalid_start {
                "invalid start byte"
            } else {
                "invalid continuation byte"
            };
            (length, reason)
        }
    };
    let what = if length <= 1 {
        format!("byte 0x{:02x} in position {at}", bytes.get(at).copied().unwrap_or(0))
    } else {
        format!("bytes in position {at}-{}", at + length - 1)
    };
    format!("'utf-8' codec can't decode {what}: {reason}")
}

/// An `OSError`'s text: `[Errno 2] No such file or directory: 'path'`.
pub fn os_error(error: &std::io::Error, path: &str) -> String {
    let text = error.to_string();
    match error.raw_os_error() {
        Some(code) => {
            // io::Error prints "<strerror> (os error N)"; Python prints strerror alone.
            let suffix = format!(" (os error {code})");
            let message = text.strip_suffix(&suffix).unwrap_or(&text);
            format!("[Errno {code}] {message}: {}", repr(path))
        }
        None => format!("{text}: {}", repr(path)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int_reads_what_python_reads() {
        for (text, value) in [
            ("7", "7"),
            ("007", "7"),
            (" +3 ", "3"),
            ("-0", "0"),
            ("-12", "-12"),
            ("1_000", "1000"),
            ("99999999999999999999999", "99999999999999999999999"),
        ] {
            assert_eq!(int(text).as_deref(), Some(value), "{text}");
        }
        for text in ["", "+", "x", "1x", "_1", "1_", "1__0", "0x10", "1.0", "- 1"] {
            assert_eq!(int(text), None, "{text}");
        }
        assert!(int_in_range("255", 1, 255));
        assert!(!int_in_range("256", 1, 255));
        assert!(!int_in_range("-1", 1, 255));
        assert!(!int_in_range("99999999999999999999999", 1, 255));
    }

    #[test]
    fn repr_quotes_as_python() {
        assert_eq!(repr("x"), "'x'");
        assert_eq!(repr("it's"), "\"it's\"");
        assert_eq!(repr("a'b\"c"), "'a\\'b\"c'");
        assert_eq!(repr("a\\b\n\x01"), "'a\\\\b\\n\\x01'");
    }

    #[test]
    fn decoding_translates_newlines_and_reports_codec_errors() {
        assert_eq!(decode(b"a\r\nb\rc\n").unwrap(), "a\nb\nc\n");
        assert_eq!(
            decode(b"ab\xff").unwrap_err(),
            "'utf-8' codec can't decode byte 0xff in position 2: invalid start byte"
        );
        assert_eq!(
            decode(b"\xc3x").unwrap_err(),
            "'utf-8' codec can't decode byte 0xc3 in position 0: invalid continuation byte"
        );
        assert_eq!(
            decode(b"\xe2\x82x").unwrap_err(),
            "'utf-8' codec can't decode bytes in position 0-1: invalid continuation byte"
        );
        assert_eq!(
            decode(b"a\xe2\x82").unwrap_err(),
            "'utf-8' codec can't decode bytes in position 1-2: unexpected end of data"
        );
    }

    #[test]
    fn whitespace_is_pythons() {
        assert!(is_space('\u{1f}') && is_space('\u{a0}') && is_space('\u{3000}'));
        assert!(!is_space('x'));
        assert_eq!(strip("\u{a0} a b \u{1c}"), "a b");
        assert_eq!(split_whitespace(" a\t b\u{2003}c ").collect::<Vec<_>>(), ["a", "b", "c"]);
    }
}
