//! Reading a layout xattr from the command line: `getfattr -e hex` output, a hex string, or
//! raw bytes.

use anyhow::{Context, bail};

/// Largest xattr accepted from a file or standard input: Lustre's largest layout xattr is
/// bounded by the MDT's `XATTR_SIZE_MAX` (64 KiB); hex text of one is twice that plus names.
pub const MAX_INPUT_BYTES: usize = 1 << 20;

/// The bytes of the layout xattr named `*.{suffix}` (`lov` or `lmv`) that `arg` designates:
/// a `0x...` hex string, `-` for standard input, or a file path. Text input may be
/// `getfattr -d -m - -e hex` output (the `lustre.{suffix}` or `trusted.{suffix}` line is
/// taken) or bare hex; anything else in a file is taken as the raw xattr.
pub fn read(arg: &str, suffix: &str) -> anyhow::Result<Vec<u8>> {
    if let Some(hex) = arg.strip_prefix("0x").or_else(|| arg.strip_prefix("0X")) {
        return decode_hex(hex);
    }
    let content = if arg == "-" {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(
            &mut std::io::Read::take(std::io::stdin(), MAX_INPUT_BYTES as u64 + 1),
            &mut bytes,
        )
        .context("reading standard input")?;
        bytes
    } else {
        let metadata = std::fs::metadata(arg).with_context(|| format!("cannot open '{arg}'"))?;
        if metadata.len() > MAX_INPUT_BYTES as u64 {
            bail!("'{arg}' is {} bytes, more than {MAX_INPUT_BYTES}", metadata.len());
        }
        std::fs::read(arg).with_context(|| format!("cannot read '{arg}'"))?
    };
    if content.len() > MAX_INPUT_BYTES {
        bail!("input is more than {MAX_INPUT_BYTES} bytes");
    }
    from_content(&content, suffix)
}

/// Interprets file or standard-input content (see [`read`]).
pub fn from_content(content: &[u8], suffix: &str) -> anyhow::Result<Vec<u8>> {
    let Ok(text) = std::str::from_utf8(content) else {
        return Ok(content.to_vec());
    };
    let mut saw_attribute = false;
    for line in text.lines().map(str::trim) {
        let Some((name, value)) = line.split_once('=') else { continue };
        saw_attribute = true;
        let matches = name.rsplit_once('.').is_some_and(|(_, last)| last == suffix);
        if !matches {
            continue;
        }
        if let Some(hex) = value.strip_prefix("0x") {
            return decode_hex(hex);
        }
        if value.starts_with("0s") {
            bail!("{name} is base64 (0s...); give getfattr -e hex output");
        }
        bail!("{name} has no hex value (0x...); give getfattr -e hex output");
    }
    if saw_attribute {
        bail!("no *.{suffix} attribute in the getfattr output");
    }
    let trimmed = text.trim();
    let bare = trimmed.strip_prefix("0x").unwrap_or(trimmed);
    if !bare.is_empty() && bare.bytes().all(|b| b.is_ascii_hexdigit() || b.is_ascii_whitespace()) {
        return decode_hex(bare);
    }
    Ok(content.to_vec())
}

/// Hex digits (whitespace ignored) to bytes.
pub fn decode_hex(hex: &str) -> anyhow::Result<Vec<u8>> {
    let digits: Vec<u8> = hex.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    if digits.len() % 2 != 0 {
        bail!("odd number of hex digits ({})", digits.len());
    }
    digits
        .chunks_exact(2)
        .map(|pair| {
            let text = std::str::from_utf8(pair).unwrap_or("??");
            u8::from_str_radix(text, 16).with_context(|| format!("'{text}' is not hex"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn getfattr_output_picks_the_named_attribute() {
        let text = b"# file: f\nlustre.lma=0x0000\ntrusted.lov=0xd00bd10b\n\n";
        assert_eq!(from_content(text, "lov").unwrap(), vec![0xd0, 0x0b, 0xd1, 0x0b]);
        assert!(from_content(text, "lmv").is_err());
    }

    #[test]
    fn bare_hex_and_raw_bytes() {
        assert_eq!(from_content(b"0a 0B\n", "lov").unwrap(), vec![0x0a, 0x0b]);
        assert_eq!(from_content(&[0xff, 0x00], "lov").unwrap(), vec![0xff, 0x00]);
        assert!(decode_hex("abc").is_err());
        assert!(decode_hex("zz").is_err());
    }

    #[test]
    fn base64_values_are_refused_by_name() {
        let error = from_content(b"lustre.lov=0sAAAA\n", "lov").unwrap_err();
        assert!(error.to_string().contains("base64"));
    }
}
