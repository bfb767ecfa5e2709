//! The words of an lfs command line: options, C-style integers, OST lists.

use crate::lov::{LOV_MAX_STRIPE_COUNT, LOV_V1_INSANE_STRIPE_INDEX};

/// C's `strtol(s, &end, 0)` that must consume everything.
pub(super) fn parse_c_long(text: &str) -> Option<i64> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let value = if let Some(hex) = digits.strip_prefix("0x").or_else(|| digits.strip_prefix("0X")) {
        i64::from_str_radix(hex, 16).ok()?
    } else if digits.len() > 1 && digits.starts_with('0') {
        i64::from_str_radix(digits.get(1..)?, 8).ok()?
    } else {
        digits.parse::<i64>().ok().filter(|_| digits.bytes().all(|b| b.is_ascii_digit()))?
    };
    Some(if negative { -value } else { value })
}

/// `1,2-4,7` (also `[1,2-4]`) → OST indices in order.
// lustre: lustre/utils/lfs.c parse_targets()
pub(super) fn parse_targets(text: &str) -> Option<Vec<u32>> {
    let inner = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')).unwrap_or(text);
    let mut out = Vec::new();
    for part in inner.split(',') {
        let (lo, hi) = match part.split_once('-') {
            Some((lo, hi)) => (lo.parse::<u32>().ok()?, hi.parse::<u32>().ok()?),
            None => {
                let one = part.parse::<u32>().ok()?;
                (one, one)
            }
        };
        if lo > hi
            || hi > u32::from(LOV_V1_INSANE_STRIPE_INDEX)
            || out.len() + usize::from(u16::try_from(hi - lo).unwrap_or(u16::MAX))
                >= usize::from(LOV_MAX_STRIPE_COUNT)
        {
            return None;
        }
        out.extend(lo..=hi);
    }
    Some(out)
}

/// `--name` or `-n` → (name, inline value); `None` for operands.
pub(super) fn split_option(arg: &str) -> Option<(&str, Option<&str>)> {
    if let Some(long) = arg.strip_prefix("--") {
        return Some(match long.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (long, None),
        });
    }
    let short = arg.strip_prefix('-').filter(|s| !s.is_empty())?;
    let split = short.char_indices().nth(1).map_or(short.len(), |(i, _)| i);
    let (name, rest) = short.split_at(split);
    Some((name, (!rest.is_empty()).then_some(rest)))
}

pub(super) fn canonical(name: &str) -> Option<char> {
    Some(match name {
        "E" | "component-end" | "comp-end" => 'E',
        "c" | "stripe-count" | "stripe_count" => 'c',
        "C" | "overstripe-count" => 'C',
        "S" | "stripe-size" | "stripe_size" => 'S',
        "i" | "stripe-index" | "stripe-offset" | "stripe_index" | "stripe_offset" => 'i',
        "o" | "ost" | "ost-list" => 'o',
        "p" | "pool" => 'p',
        "L" | "layout" => 'L',
        "z" | "extension-size" | "ext-size" => 'z',
        "comp-flags" | "component-flags" => 'F',
        "N" | "mirror-count" | "y" | "yaml" | "copy" | "foreign" | "comp-add" | "component-add"
        | "comp-del" | "component-del" | "comp-set" | "component-set" | "d" | "delete" => 'U',
        _ => return None,
    })
}
