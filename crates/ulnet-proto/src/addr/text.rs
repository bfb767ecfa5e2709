//! NIDs and nets as text: printing (`Display`) and parsing (`FromStr`).
//!
//! lustre: lnet/lnet/nidstrings.c `libcfs_net2str_r()`, `libcfs_nidstr_r()`,
//! `libcfs_str2net_internal()`, `libcfs_strnid()`, `libcfs_netstrfns[]`;
//! lib/libcfs/nidstrings.c (userspace variants).
//!
//! Parsing is chosen so that printing a parsed value gives the canonical text: `parse(s)`
//! followed by `to_string()` is idempotent, and `parse(nid.to_string()) == nid` for every NID of
//! a known LND.
//!
//! Two deliberate differences from the userspace libcfs large parse:
//!
//! * Loopback and link-local addresses (127.0.0.0/8, ::1, fe80::/10) are ACCEPTED. libcfs
//!   refuses them because a kernel node cannot route to them, but ulnet runs whole clusters on
//!   one host over 127.0.0.x, so they must be valid NIDs.
//! * Hostnames are NOT resolved: this crate does no I/O. Text that looks like a hostname gives
//!   [`NidParseError::Hostname`], so a caller with a resolver can resolve it and retry.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use super::nid::{AddressKind, LndType, Net, Nid};

/// LND names in Lustre's table order, which is also the prefix-match order for parsing.
pub const LND_NAMES: &[(LndType, &str)] = &[
    (LndType::LO, "lo"),
    (LndType::SOCK, "tcp"),
    (LndType::O2IB, "o2ib"),
    (LndType::GNI, "gni"),
    (LndType::GNIIP, "gip"),
    (LndType::PTL4, "ptlf"),
    (LndType::KFI, "kfi"),
    (LndType::EFA, "efa"),
    (LndType::BXI3, "bxi3f"),
];

impl LndType {
    /// The name Lustre prints for this LND, or `None` for removed and unknown types.
    pub fn name(self) -> Option<&'static str> {
        LND_NAMES.iter().find(|(lnd, _)| *lnd == self).map(|(_, name)| *name)
    }
}

/// Why text is not a net name (`<lnd>[<number>]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NetParseError {
    #[error("empty net name")]
    Empty,
    /// No LND name in [`LND_NAMES`] is a prefix of the text.
    #[error("no known LND name starts the net name")]
    UnknownLnd,
    /// `lo` followed by anything ("lo0" is invalid, "lo" is valid).
    #[error("the lo net takes no number")]
    LoWithNumber,
    /// The text after the LND name is not a complete number.
    #[error("net number is not a number")]
    BadNumber,
    /// The number does not fit the 16-bit `nid_num`. Lustre would let it spill into the type.
    #[error("net number does not fit in 16 bits")]
    NumberOutOfRange,
}

/// Why text is not a NID (`<addr>[@<net>]` or `<?>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NidParseError {
    #[error("empty NID")]
    Empty,
    #[error("bad net in NID")]
    Net(#[from] NetParseError),
    /// Nothing before the '@' (only `lo` accepts that).
    #[error("NID has no address")]
    MissingAddress,
    /// An IP LND address that is not a dotted quad.
    #[error("not a dotted-quad IPv4 address")]
    BadIpv4,
    /// A dotted quad with a part above 255.
    #[error("IPv4 address part above 255")]
    OctetOutOfRange,
    /// Text with ':' on an LND that takes IPv6, but not a valid IPv6 address.
    #[error("not an IPv6 address")]
    BadIpv6,
    /// A valid IPv6 address on an LND without large addresses (`gip`).
    #[error("this LND takes IPv4 addresses only")]
    Ipv6NotSupported,
    /// An address that starts with a letter: a hostname, which this crate does not resolve.
    #[error("hostnames are not resolved here")]
    Hostname,
    /// A numeric LND address that is not `0x<hex>`, `0X<hex>` or decimal.
    #[error("not a decimal or 0x-hex address")]
    BadNumericAddress,
    /// A numeric LND address above `u32::MAX`.
    #[error("numeric address does not fit in 32 bits")]
    NumericAddressOverflow,
    /// A well-formed address followed by more characters ("1.2.3.4x", "1.2.3.4.5", "12z").
    #[error("trailing characters after the address")]
    TrailingGarbage,
}

/// Parses a net name: the LND name by prefix in table order, then a complete decimal number.
/// lustre: nidstrings.c `libcfs_str2net_internal()`.
impl FromStr for Net {
    type Err = NetParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        parse_net(text, NetNumberSyntax::Decimal)
    }
}

/// Parses a NID. lustre: nidstrings.c `libcfs_strnid()` (large form, which also covers nid4).
impl FromStr for Nid {
    type Err = NidParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text.is_empty() {
            return Err(NidParseError::Empty);
        }
        let (addr, net) = match text.split_once('@') {
            Some((addr, net)) => (addr, parse_net(net, NetNumberSyntax::Decimal)?),
            None if text == "<?>" => return Ok(Nid::ANY),
            // lustre: libcfs_strnid() assumes @tcp0 without "@net".
            None => (text, Net::TCP),
        };
        parse_address(addr, net)
    }
}

impl fmt::Display for Net {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if *self == Net::ANY {
            return f.write_str("<?>");
        }
        match self.lnd.name() {
            Some(name) if self.number == 0 => f.write_str(name),
            Some(name) => write!(f, "{name}{}", self.number),
            None => write!(f, "<{}:{}>", self.lnd.0, self.number),
        }
    }
}

impl fmt::Display for Nid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_any() {
            return f.write_str("<?>");
        }
        let known = self.lnd().name().is_some();
        match (self.size(), self.lnd().address_kind()) {
            (0, AddressKind::Ip) => write!(f, "{}", std::net::Ipv4Addr::from(self.addr4()))?,
            (0, AddressKind::Numeric | AddressKind::Loopback) => write!(f, "{}", self.addr4())?,
            (12, AddressKind::Ip) if known => {
                let mut octets = [0u8; 16];
                octets.copy_from_slice(self.addr_bytes());
                write!(f, "{}", Ipv6Addr::from(octets))?;
            }
            _ => {
                // Unknown large form: each 32-bit word in hex, joined by ':'.
                for (i, word) in self.addr_bytes().chunks(4).enumerate() {
                    let mut w = [0u8; 4];
                    for (to, from) in w.iter_mut().zip(word) {
                        *to = *from;
                    }
                    if i > 0 {
                        f.write_str(":")?;
                    }
                    write!(f, "{:x}", u32::from_be_bytes(w))?;
                }
            }
        }
        write!(f, "@{}", self.net())
    }
}

/// How the number after an LND name is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NetNumberSyntax {
    /// `%u`: plain NIDs and nets (`libcfs_str2net_internal()`).
    Decimal,
    /// `strtoul(.., 0)`: nidlists (`add_nidrange()`), so "tcp0x10" is tcp16.
    AutoRadix,
}

pub(crate) fn parse_net(text: &str, syntax: NetNumberSyntax) -> Result<Net, NetParseError> {
    if text.is_empty() {
        return Err(NetParseError::Empty);
    }
    // lustre: libcfs_str2net_internal() takes the first table entry that is a prefix.
    let Some((lnd, rest)) =
        LND_NAMES.iter().find_map(|(lnd, name)| text.strip_prefix(name).map(|rest| (*lnd, rest)))
    else {
        return Err(NetParseError::UnknownLnd);
    };
    if rest.is_empty() {
        return Ok(Net::new(lnd, 0));
    }
    if lnd == LndType::LO {
        return Err(NetParseError::LoWithNumber);
    }
    let number = match syntax {
        NetNumberSyntax::Decimal => parse_decimal(rest),
        NetNumberSyntax::AutoRadix => parse_auto_radix(rest),
    };
    let number = number.map_err(|error| match error {
        NumberError::Invalid => NetParseError::BadNumber,
        NumberError::Overflow => NetParseError::NumberOutOfRange,
    })?;
    let number = u16::try_from(number).map_err(|_| NetParseError::NumberOutOfRange)?;
    Ok(Net::new(lnd, number))
}

/// True for the LNDs whose string handlers know 16-byte addresses (`nf_str2addr_size`).
pub(crate) fn accepts_ipv6(lnd: LndType) -> bool {
    matches!(lnd, LndType::SOCK | LndType::O2IB | LndType::EFA)
}

/// Parses the address part for `net`. lustre: `nf_str2addr` / `nf_str2addr_size` handlers.
fn parse_address(text: &str, net: Net) -> Result<Nid, NidParseError> {
    match net.lnd.address_kind() {
        // lustre: libcfs_lo_str2addr() ignores the text.
        AddressKind::Loopback => Ok(Nid::new4(net, 0)),
        AddressKind::Numeric => parse_numeric_address(text).map(|addr| Nid::new4(net, addr)),
        AddressKind::Ip => parse_ip_address(text, net),
    }
}

/// lustre: libcfs_ip_str2addr() (nid4, dotted quad) and libcfs_ip_str2addr_size() (IPv6).
fn parse_ip_address(text: &str, net: Net) -> Result<Nid, NidParseError> {
    if text.is_empty() {
        return Err(NidParseError::MissingAddress);
    }
    if text.contains(':') {
        let parsed = text.parse::<Ipv6Addr>();
        return match parsed {
            Ok(ip) if accepts_ipv6(net.lnd) => Ok(Nid::ipv6(net, ip)),
            Ok(_) => Err(NidParseError::Ipv6NotSupported),
            Err(_) if accepts_ipv6(net.lnd) => Err(NidParseError::BadIpv6),
            Err(_) => Err(NidParseError::BadIpv4),
        };
    }
    // lustre: userspace libcfs resolves text starting with a letter as a hostname.
    if text.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return Err(NidParseError::Hostname);
    }
    parse_ipv4(text).map(|ip| Nid::ipv4(net, ip))
}

/// A strict dotted quad: four decimal parts 0-255 and nothing else, as `"%u.%u.%u.%u%n"` with
/// the whole-string check, except that signs and white space are refused. Leading zeros are
/// decimal, as `%u` reads them.
pub(crate) fn parse_ipv4(text: &str) -> Result<Ipv4Addr, NidParseError> {
    let mut octets = [0u8; 4];
    let mut rest = text;
    for (index, octet) in octets.iter_mut().enumerate() {
        if index > 0 {
            rest = rest.strip_prefix('.').ok_or(NidParseError::BadIpv4)?;
        }
        let (digits, after) = split_digits(rest, 10);
        let value = parse_decimal(digits).map_err(|error| match error {
            NumberError::Invalid => NidParseError::BadIpv4,
            NumberError::Overflow => NidParseError::OctetOutOfRange,
        })?;
        *octet = u8::try_from(value).map_err(|_| NidParseError::OctetOutOfRange)?;
        rest = after;
    }
    if !rest.is_empty() {
        return Err(NidParseError::TrailingGarbage);
    }
    Ok(Ipv4Addr::from(octets))
}

/// `0x<hex>`, `0X<hex>` or decimal, 32 bits. lustre: libcfs_num_str2addr().
fn parse_numeric_address(text: &str) -> Result<u32, NidParseError> {
    let (digits, rest, radix) = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => {
            let (digits, rest) = split_digits(hex, 16);
            (digits, rest, 16)
        }
        None => {
            let (digits, rest) = split_digits(text, 10);
            (digits, rest, 10)
        }
    };
    let value = parse_radix(digits, radix).map_err(|error| match error {
        NumberError::Invalid => NidParseError::BadNumericAddress,
        NumberError::Overflow => NidParseError::NumericAddressOverflow,
    })?;
    if !rest.is_empty() {
        return Err(NidParseError::TrailingGarbage);
    }
    Ok(value)
}

/// Why digits did not make a `u32`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NumberError {
    /// No digits, or a character that is not a digit of the radix.
    Invalid,
    Overflow,
}

/// One or more decimal digits, nothing else (no sign, no space).
pub(crate) fn parse_decimal(text: &str) -> Result<u32, NumberError> {
    parse_radix(text, 10)
}

/// A number with C's base auto-detection (`strtoul(.., 0)`, `kstrtouint(.., 0)`): `0x`/`0X`
/// hex, a leading `0` octal, else decimal. Used where Lustre parses that way (nidlists).
pub(crate) fn parse_auto_radix(text: &str) -> Result<u32, NumberError> {
    if let Some(hex) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        parse_radix(hex, 16)
    } else if let Some(octal) = text.strip_prefix('0').filter(|digits| !digits.is_empty()) {
        parse_radix(octal, 8)
    } else {
        parse_radix(text, 10)
    }
}

fn parse_radix(text: &str, radix: u32) -> Result<u32, NumberError> {
    // from_str_radix would accept a leading '+'; Lustre's strict callers do not.
    if text.is_empty() || !text.chars().all(|c| c.is_digit(radix)) {
        return Err(NumberError::Invalid);
    }
    // Only digits remain, so the one possible failure is overflow.
    u32::from_str_radix(text, radix).map_err(|_| NumberError::Overflow)
}

/// Splits `text` after its leading digits of `radix`.
fn split_digits(text: &str, radix: u32) -> (&str, &str) {
    let end = text.find(|c: char| !c.is_digit(radix)).unwrap_or(text.len());
    // `end` is at a char boundary: it is a `find` result or the length.
    text.split_at(end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn prints_like_libcfs_nidstr() {
        assert_eq!(
            Nid::ipv4(Net::TCP, Ipv4Addr::new(192, 168, 1, 2)).to_string(),
            "192.168.1.2@tcp"
        );
        assert_eq!(Nid::LO_0.to_string(), "0@lo");
        assert_eq!(Nid::new4(Net::new(LndType::PTL4, 2), 42).to_string(), "42@ptlf2");
        let o2ib3 = Nid::ipv4(Net::new(LndType::O2IB, 3), Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(o2ib3.to_string(), "10.0.0.1@o2ib3");
        let v6 = Nid::ipv6(Net::TCP, "2001:db8::1".parse().expect("valid IPv6"));
        assert_eq!(v6.to_string(), "2001:db8::1@tcp");
        assert_eq!(Nid::ANY.to_string(), "<?>");
        assert_eq!(Nid::new4(Net::new(LndType::TOFU, 1), 7).to_string(), "7@<17:1>");
        assert_eq!(Net::new(LndType::SOCK, 1).to_string(), "tcp1");
    }

    fn nid(text: &str) -> Result<Nid, NidParseError> {
        text.parse()
    }

    fn large(prefix: &[u8]) -> [u8; 20] {
        let mut bytes = [0u8; 20];
        bytes[..prefix.len()].copy_from_slice(prefix);
        bytes
    }

    /// docs/protocol/wire.md §5.4 examples: (text, canonical text, nid4, large bytes).
    #[test]
    fn wire_md_examples_parse_and_print() {
        let rows: [(&str, &str, Option<u64>, [u8; 20]); 7] = [
            (
                "192.168.1.2@tcp",
                "192.168.1.2@tcp",
                Some(0x0002_0000_C0A8_0102),
                large(&[0, 2, 0, 0, 0xc0, 0xa8, 1, 2]),
            ),
            (
                "10.0.0.1@o2ib3",
                "10.0.0.1@o2ib3",
                Some(0x0005_0003_0A00_0001),
                large(&[0, 5, 0, 3, 0x0a, 0, 0, 1]),
            ),
            ("0@lo", "0@lo", Some(0x0009_0000_0000_0000), large(&[0, 9])),
            (
                "42@ptlf2",
                "42@ptlf2",
                Some(0x000F_0002_0000_002A),
                large(&[0, 15, 0, 2, 0, 0, 0, 42]),
            ),
            (
                "0x1f@kfi",
                "31@kfi",
                Some(0x0010_0000_0000_001F),
                large(&[0, 16, 0, 0, 0, 0, 0, 0x1f]),
            ),
            ("5@gni1", "5@gni1", Some(0x000D_0001_0000_0005), large(&[0, 13, 0, 1, 0, 0, 0, 5])),
            (
                "2001:db8::1@tcp",
                "2001:db8::1@tcp",
                None,
                [0x0c, 0x02, 0, 0, 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
            ),
        ];
        for (text, canonical, nid4, bytes) in rows {
            let parsed = nid(text).expect(text);
            assert_eq!(parsed.to_nid4(), nid4, "{text}");
            assert_eq!(parsed.to_large_bytes(), bytes, "{text}");
            assert_eq!(parsed.to_string(), canonical);
            // The other direction: from the binary forms to the text.
            let from_bytes = Nid::from_large_bytes(&bytes).expect(text);
            assert_eq!(from_bytes.to_string(), canonical);
            if let Some(value) = nid4 {
                assert_eq!(Nid::from_nid4(value).to_string(), canonical);
            }
            assert_eq!(nid(canonical), Ok(parsed));
        }
    }

    #[test]
    fn net_names_and_numbers() {
        assert_eq!("tcp".parse(), Ok(Net::TCP));
        assert_eq!("tcp0".parse(), Ok(Net::TCP));
        assert_eq!("o2ib3".parse(), Ok(Net::new(LndType::O2IB, 3)));
        assert_eq!("tcp007".parse(), Ok(Net::new(LndType::SOCK, 7)));
        assert_eq!("lo".parse(), Ok(Net::LO));
        assert_eq!("gip2".parse(), Ok(Net::new(LndType::GNIIP, 2)));
        assert_eq!("bxi3f".parse(), Ok(Net::new(LndType::BXI3, 0)));
        assert_eq!("efa65535".parse(), Ok(Net::new(LndType::EFA, 0xffff)));
        for (lnd, name) in LND_NAMES {
            assert_eq!(name.parse(), Ok(Net::new(*lnd, 0)));
        }
    }

    #[test]
    fn net_errors() {
        assert_eq!("".parse::<Net>(), Err(NetParseError::Empty));
        assert_eq!("elan".parse::<Net>(), Err(NetParseError::UnknownLnd));
        assert_eq!("<17:1>".parse::<Net>(), Err(NetParseError::UnknownLnd));
        assert_eq!("lo0".parse::<Net>(), Err(NetParseError::LoWithNumber));
        assert_eq!("tcpx".parse::<Net>(), Err(NetParseError::BadNumber));
        assert_eq!("tcp0x10".parse::<Net>(), Err(NetParseError::BadNumber));
        assert_eq!("tcp+1".parse::<Net>(), Err(NetParseError::BadNumber));
        assert_eq!("tcp-1".parse::<Net>(), Err(NetParseError::BadNumber));
        assert_eq!("tcp65536".parse::<Net>(), Err(NetParseError::NumberOutOfRange));
        assert_eq!("tcp99999999999".parse::<Net>(), Err(NetParseError::NumberOutOfRange));
    }

    #[test]
    fn nid_defaults_and_special_forms() {
        assert_eq!(nid("<?>"), Ok(Nid::ANY));
        assert_eq!(nid("10.1.2.3"), Ok(Nid::ipv4(Net::TCP, Ipv4Addr::new(10, 1, 2, 3))));
        assert_eq!(nid("::1"), Ok(Nid::ipv6(Net::TCP, Ipv6Addr::LOCALHOST)));
        // lo takes any address text, even none.
        assert_eq!(nid("whatever@lo"), Ok(Nid::LO_0));
        assert_eq!(nid("@lo"), Ok(Nid::LO_0));
        assert_eq!(nid("0X1F@gni"), Ok(Nid::new4(Net::new(LndType::GNI, 0), 31)));
        assert_eq!(nid("4294967295@bxi3f"), Ok(Nid::new4(Net::new(LndType::BXI3, 0), u32::MAX)));
        assert_eq!(nid("010.0.0.1@tcp"), Ok(Nid::ipv4(Net::TCP, Ipv4Addr::new(10, 0, 0, 1))));
        let v6 = nid("2001:db8::2@efa1").expect("IPv6 on efa");
        assert_eq!(v6.size(), 12);
        assert_eq!(v6.to_string(), "2001:db8::2@efa1");
    }

    /// The userspace large parse rejects these; ulnet needs them for single-host clusters.
    #[test]
    fn loopback_and_link_local_are_accepted() {
        assert_eq!(nid("127.0.0.1@tcp"), Ok(Nid::ipv4(Net::TCP, Ipv4Addr::LOCALHOST)));
        assert_eq!(nid("127.0.0.2@tcp").map(|n| n.to_string()), Ok("127.0.0.2@tcp".into()));
        assert_eq!(nid("::1@tcp"), Ok(Nid::ipv6(Net::TCP, Ipv6Addr::LOCALHOST)));
        assert_eq!(nid("fe80::1@o2ib").map(|n| n.size()), Ok(12));
    }

    #[test]
    fn nid_errors() {
        use NidParseError as E;
        assert_eq!(nid(""), Err(E::Empty));
        assert_eq!(nid("1.2.3.4@"), Err(E::Net(NetParseError::Empty)));
        assert_eq!(nid("1.2.3.4@elan"), Err(E::Net(NetParseError::UnknownLnd)));
        assert_eq!(nid("0@lo1"), Err(E::Net(NetParseError::LoWithNumber)));
        assert_eq!(nid("1.2.3.4@tcpz"), Err(E::Net(NetParseError::BadNumber)));
        assert_eq!(nid("1.2.3.4@tcp@tcp"), Err(E::Net(NetParseError::BadNumber)));
        assert_eq!(nid("1.2.3.4@tcp70000"), Err(E::Net(NetParseError::NumberOutOfRange)));
        assert_eq!(nid("@tcp"), Err(E::MissingAddress));
        assert_eq!(nid("1.2.3@tcp"), Err(E::BadIpv4));
        assert_eq!(nid("1..2.3@tcp"), Err(E::BadIpv4));
        assert_eq!(nid("+1.2.3.4@tcp"), Err(E::BadIpv4));
        assert_eq!(nid(" 1.2.3.4@tcp"), Err(E::BadIpv4));
        assert_eq!(nid("1.2.3.256@tcp"), Err(E::OctetOutOfRange));
        assert_eq!(nid("1.2.3.99999999999@tcp"), Err(E::OctetOutOfRange));
        assert_eq!(nid("1.2.3.4.5@tcp"), Err(E::TrailingGarbage));
        assert_eq!(nid("1.2.3.4x"), Err(E::TrailingGarbage));
        assert_eq!(nid("2001:db8::g@tcp"), Err(E::BadIpv6));
        assert_eq!(nid("1:2:3@o2ib"), Err(E::BadIpv6));
        assert_eq!(nid("2001:db8::1@gip"), Err(E::Ipv6NotSupported));
        assert_eq!(nid("2001:db8::zz@gip"), Err(E::BadIpv4));
        assert_eq!(nid("node1@tcp"), Err(E::Hostname));
        assert_eq!(nid("localhost"), Err(E::Hostname));
        assert_eq!(nid("abc@ptlf"), Err(E::BadNumericAddress));
        assert_eq!(nid("0x@kfi"), Err(E::BadNumericAddress));
        assert_eq!(nid("@gni"), Err(E::BadNumericAddress));
        assert_eq!(nid("-1@gni"), Err(E::BadNumericAddress));
        assert_eq!(nid("4294967296@gni"), Err(E::NumericAddressOverflow));
        assert_eq!(nid("0x100000000@gni"), Err(E::NumericAddressOverflow));
        assert_eq!(nid("12z@gni"), Err(E::TrailingGarbage));
        assert_eq!(nid("0x1fg@kfi"), Err(E::TrailingGarbage));
    }

    #[test]
    fn auto_radix_numbers() {
        assert_eq!(parse_auto_radix("0"), Ok(0));
        assert_eq!(parse_auto_radix("0x10"), Ok(16));
        assert_eq!(parse_auto_radix("0X1f"), Ok(31));
        assert_eq!(parse_auto_radix("010"), Ok(8));
        assert_eq!(parse_auto_radix("08"), Err(NumberError::Invalid));
        assert_eq!(parse_auto_radix("0x"), Err(NumberError::Invalid));
        assert_eq!(parse_auto_radix(""), Err(NumberError::Invalid));
        assert_eq!(parse_auto_radix("4294967296"), Err(NumberError::Overflow));
    }

    /// Known LNDs in [`LND_NAMES`] order with their address kinds, for the proptests.
    fn arbitrary_nid() -> impl Strategy<Value = Nid> {
        let nid4 =
            (0..LND_NAMES.len(), any::<u16>(), any::<u32>()).prop_map(|(i, number, addr)| {
                let lnd = LND_NAMES[i].0;
                if lnd == LndType::LO { Nid::LO_0 } else { Nid::new4(Net::new(lnd, number), addr) }
            });
        let ipv6 = (
            prop::sample::select(vec![LndType::SOCK, LndType::O2IB, LndType::EFA]),
            any::<u16>(),
            any::<[u8; 16]>(),
        )
            .prop_map(|(lnd, number, octets)| {
                Nid::ipv6(Net::new(lnd, number), Ipv6Addr::from(octets))
            });
        prop_oneof![4 => nid4, 1 => ipv6, 1 => Just(Nid::ANY)]
    }

    proptest! {
        #[test]
        fn print_then_parse_is_identity(original in arbitrary_nid()) {
            let text = original.to_string();
            prop_assert_eq!(nid(&text), Ok(original), "{}", text);
        }

        #[test]
        fn parse_then_print_is_canonical(text in "[0-9a-fx.:@<?>]{0,24}(@(tcp|o2ib|gni|lo|kfi)[0-9]{0,3})?") {
            if let Ok(parsed) = nid(&text) {
                let printed = parsed.to_string();
                prop_assert_eq!(nid(&printed), Ok(parsed));
            }
        }

        #[test]
        fn parse_never_panics(text in any::<String>()) {
            let _ = nid(&text);
            let _ = text.parse::<Net>();
        }
    }
}
