//! NID and net parsing for the grammars (delegating to ulnet-proto's shared parsers), and the
//! C number conventions (`strtoul(.., 0)`, `strtol`) lnetctl's inputs use.
//!
//! lustre: lnet/lnet/nidstrings.c `libcfs_str2net_internal()`, `libcfs_strnid()`,
//! `libcfs_ip_str2addr()`, `libcfs_num_str2addr()`.

use ulnet_proto::addr::{Net, Nid};

/// `libcfs_str2net()`. `None` where Lustre returns `LNET_NET_ANY`.
pub(crate) fn parse_net(text: &str) -> Option<Net> {
    text.parse().ok()
}

/// `libcfs_strnid()`: `<address>@<net>`, or a bare address on `tcp`. Hostnames are not
/// resolved (configuration parsing does no I/O).
pub(crate) fn parse_nid(text: &str) -> Option<Nid> {
    text.parse().ok()
}

/// `strtoul(.., 0)` with full consumption: decimal, `0x` hex or leading-zero octal. Signs and
/// whitespace, which strtoul tolerates, are refused.
pub(crate) fn parse_c_unsigned(text: &str) -> Option<u64> {
    if let Some(hex) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        if hex.is_empty() || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        return u64::from_str_radix(hex, 16).ok();
    }
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if text.len() > 1 && text.starts_with('0') {
        return u64::from_str_radix(&text[1..], 8).ok();
    }
    text.parse().ok()
}

/// lnetctl's `parse_long()`: `strtol(.., 0)` that must consume the whole string. Leading
/// whitespace and a sign are accepted as strtol accepts them; out-of-range values fail.
pub(crate) fn parse_c_long(text: &str) -> Option<i64> {
    let trimmed = text.trim_start_matches([' ', '\t', '\n', '\r', '\u{b}', '\u{c}']);
    let (negative, digits) = match trimmed.as_bytes().first() {
        Some(b'-') => (true, &trimmed[1..]),
        Some(b'+') => (false, &trimmed[1..]),
        _ => (false, trimmed),
    };
    let magnitude = i128::from(parse_c_unsigned(digits)?);
    i64::try_from(if negative { -magnitude } else { magnitude }).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;
    use ulnet_proto::addr::LndType;

    #[test]
    fn nets() {
        assert_eq!(parse_net("tcp"), Some(Net::TCP));
        assert_eq!(parse_net("tcp0"), Some(Net::TCP));
        assert_eq!(parse_net("o2ib3"), Some(Net::new(LndType::O2IB, 3)));
        assert_eq!(parse_net("lo"), Some(Net::LO));
        assert_eq!(parse_net("lo1"), None);
        assert_eq!(parse_net("tcpx"), None);
        assert_eq!(parse_net("tcp65536"), None);
        assert_eq!(parse_net("elan"), None);
        assert_eq!(parse_net(""), None);
    }

    #[test]
    fn nids() {
        let tcp = |a, b, c, d| Nid::ipv4(Net::TCP, Ipv4Addr::new(a, b, c, d));
        assert_eq!(parse_nid("10.0.0.1@tcp"), Some(tcp(10, 0, 0, 1)));
        assert_eq!(parse_nid("10.0.0.1"), Some(tcp(10, 0, 0, 1)));
        assert_eq!(parse_nid("5@gni"), Some(Nid::new4(Net::new(LndType::GNI, 0), 5)));
        assert_eq!(parse_nid("0@lo"), Some(Nid::LO_0));
        assert_eq!(parse_nid("1@tcp"), None);
        assert_eq!(parse_nid("1.1.1.1@gni"), None);
        assert_eq!(parse_nid("256.0.0.1@tcp"), None);
        assert_eq!(parse_nid("10.0.0.1@nonet"), None);
        assert!(parse_nid("2001:db8::1@tcp").is_some());
    }

    #[test]
    fn c_numbers() {
        assert_eq!(parse_c_unsigned("0x10"), Some(16));
        assert_eq!(parse_c_unsigned("010"), Some(8));
        assert_eq!(parse_c_unsigned("0"), Some(0));
        assert_eq!(parse_c_unsigned("08"), None);
        assert_eq!(parse_c_unsigned("-1"), None);
        assert_eq!(parse_c_long(" -22"), Some(-22));
        assert_eq!(parse_c_long("+7"), Some(7));
        assert_eq!(parse_c_long("7 "), None);
        assert_eq!(parse_c_long(""), None);
        assert_eq!(parse_c_long("99999999999999999999"), None);
    }
}
