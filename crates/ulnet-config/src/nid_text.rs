//! Private NID and net parsers for the grammars.
//!
//! ulnet-proto is gaining `FromStr for Nid/Net` on another branch; these adapters cover what
//! this crate needs until the merge switches them over. They follow libcfs' rules strictly
//! (no hostname resolution, no whitespace).
//!
//! lustre: lnet/lnet/nidstrings.c `libcfs_str2net_internal()`, `libcfs_strnid()`,
//! `libcfs_ip_str2addr()`, `libcfs_num_str2addr()`.

use std::net::{Ipv4Addr, Ipv6Addr};

use ulnet_proto::addr::{AddressKind, LND_NAMES, Net, Nid};

/// `libcfs_str2net()`: an LND name from the table (first prefix match) and an optional
/// decimal net number; `lo` takes no number. `None` where Lustre returns `LNET_NET_ANY`.
pub(crate) fn parse_net(text: &str) -> Option<Net> {
    let (lnd, name) = LND_NAMES.iter().find(|(_, name)| text.starts_with(name))?;
    let rest = &text[name.len()..];
    if rest.is_empty() {
        return Some(Net::new(*lnd, 0));
    }
    if *lnd == ulnet_proto::addr::LndType::LO || !rest.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // The packed net keeps 16 bits of number; larger values would corrupt the type.
    rest.parse::<u16>().ok().map(|number| Net::new(*lnd, number))
}

/// `libcfs_strnid()`: `<address>@<net>`, or a bare address on `tcp`.
pub(crate) fn parse_nid(text: &str) -> Option<Nid> {
    let (address, net) = match text.split_once('@') {
        Some((address, net)) => (address, parse_net(net)?),
        None => (text, Net::TCP),
    };
    match net.lnd.address_kind() {
        AddressKind::Ip => match parse_dotted_quad(address) {
            Some(ip) => Some(Nid::ipv4(net, ip)),
            None => address.parse::<Ipv6Addr>().ok().map(|ip| Nid::ipv6(net, ip)),
        },
        AddressKind::Numeric | AddressKind::Loopback => {
            parse_c_unsigned(address).and_then(|n| u32::try_from(n).ok()).map(|n| Nid::new4(net, n))
        }
    }
}

/// `libcfs_ip_str2addr()`: exactly four decimal fields of 0..=255.
pub(crate) fn parse_dotted_quad(text: &str) -> Option<Ipv4Addr> {
    let mut octets = [0u8; 4];
    let mut fields = text.split('.');
    for octet in &mut octets {
        let field = fields.next()?;
        if field.is_empty() || field.len() > 3 || !field.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        *octet = field.parse().ok()?;
    }
    fields.next().is_none().then(|| Ipv4Addr::from(octets))
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
