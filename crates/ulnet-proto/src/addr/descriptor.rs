//! NID descriptors: what a UDSP rule's `--src`, `--dst` and `--rte` name. A descriptor is an
//! LND type with optional net-number ranges and, for a NID descriptor, address ranges:
//!
//! ```text
//! descriptor := [addrrange '@'] lnd [netnums]
//! netnums    := number | '*' | '[' expr (',' expr)* ']'
//! addrrange  := numrange '.' numrange '.' numrange '.' numrange    (IP LNDs)
//!             | numrange                                          (numeric LNDs and lo)
//! ```
//!
//! (`numrange` and `expr` as in the nidlist grammar of [`NidRange`](super::NidRange).) A
//! descriptor without an address part is a *net* descriptor (`tcp`, `o2ib[1-3]`); one with
//! it is a *NID* descriptor (`10.0.0.[1-20]@tcp`, `*.*.*.*@tcp1`). Without net numbers only
//! net number 0 matches: `tcp` names `tcp0`, not `tcp1`.
//!
//! lustre: lib/libcfs/nidstrings.c `cfs_parse_nid_parts()`, `parse_net_range()`,
//! `cfs_ip_addr_parse()`, `libcfs_num_parse()`, `cfs_expr2str()` (lnetctl's side);
//! lnet/lnet/nidstrings.c `cfs_match_net()`, `cfs_match_nid_net()`, `cfs_ip_addr_match()`
//! (the kernel's); lnet/lnet/udsp.c `lnet_udsp_nid_descr_equal()`;
//! lnet/utils/lnetconfig/liblnetconfig_udsp.c `lustre_lnet_nid_descr2str()` (the text
//! `udsp show` prints).
//!
//! Kept from Lustre: an address of `*` alone is not a valid IP range (`*.*.*.*` is); text
//! between the LND name and a `[` is ignored (`tcp5[1-2]` is `tcp[1-2]`); the printed form
//! is `cfs_expr2str()`'s, which writes single values of a list with dots (`[4,6]` prints as
//! `4.6`, so such a rule's `udsp show` text does not parse back, in lnetctl too).
//! Differences, as in [`NidRange`](super::NidRange): a zero stride is refused (a division
//! by zero in the kernel's matcher), and address ranges match only NIDs with 4-byte
//! addresses (the kernel compares the first address word of an IPv6 NID).

use std::fmt;
use std::str::FromStr;

use super::nid::{AddressKind, LndType, Net, Nid};
use super::range::{ExprList, RangeParseError, parse_expr_list};
use super::text::LND_NAMES;

/// Largest value of one IPv4 octet range.
const OCTET_MAX: u32 = 255;

/// A UDSP NID descriptor (`struct lnet_ud_nid_descr`). Equality is the kernel's: the same
/// LND, the same net-number ranges and the same address ranges, range by range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NidDescriptor {
    lnd: LndType,
    /// `udn_net_num_range`: `None` is the kernel's empty list (net number 0 only).
    net_numbers: Option<ExprList>,
    /// `ud_addr_range`: empty for a net descriptor; four octet lists on IP LNDs, one list
    /// on numeric LNDs and `lo`.
    address: Vec<ExprList>,
}

/// Why text is not a NID descriptor. lnetctl reports every one as "failed to parse ...".
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DescriptorParseError {
    /// Empty, only white space, or nothing before the `@`.
    #[error("empty descriptor or address")]
    Empty,
    /// No LND name in [`LND_NAMES`] starts the net part.
    #[error("no known LND name starts the net")]
    UnknownLnd,
    /// `*` before `[` in the net part.
    #[error("'*' before '[' in the net")]
    StarBeforeBracket,
    #[error("bad net number range: {0}")]
    NetNumbers(RangeParseError),
    #[error("bad address range: {0}")]
    Address(RangeParseError),
    /// An IP address range without exactly four dot-separated parts.
    #[error("IP address range needs four parts")]
    BadOctetCount,
}

impl NidDescriptor {
    /// Parses a descriptor as lnetctl does before sending a rule.
    pub fn parse(text: &str) -> Result<Self, DescriptorParseError> {
        // lustre: cfs_gettok() skips leading white space and fails on a leading delimiter.
        let text = text.trim_start();
        if text.is_empty() || text.starts_with('@') {
            return Err(DescriptorParseError::Empty);
        }
        let (address_text, net_text) = match text.split_once('@') {
            Some((address, net)) => (Some(address.trim_end()), net),
            None => (None, text),
        };
        let (lnd, net_numbers) = parse_net_part(net_text)?;
        let address = match address_text {
            None => Vec::new(),
            Some(address) => parse_address(address, lnd)?,
        };
        Ok(Self { lnd, net_numbers, address })
    }

    pub fn lnd(&self) -> LndType {
        self.lnd
    }

    /// A net descriptor: no address part (`lnet_udsp_is_net_rule()`).
    pub fn is_net(&self) -> bool {
        self.address.is_empty()
    }

    /// Whether `net` is one of the nets named. lustre: nidstrings.c `cfs_match_net()`.
    pub fn matches_net(&self, net: Net) -> bool {
        if net.lnd != self.lnd {
            return false;
        }
        match &self.net_numbers {
            None => net.number == 0,
            Some(numbers) => numbers.matches(u32::from(net.number)),
        }
    }

    /// Whether `nid` is one of the NIDs named: never for a net descriptor.
    /// lustre: nidstrings.c `cfs_match_nid_net()`, `cfs_ip_addr_match()`,
    /// `libcfs_num_match()`.
    pub fn matches_nid(&self, nid: &Nid) -> bool {
        if self.is_net() || !self.matches_net(nid.net()) || !nid.is_nid4() {
            return false;
        }
        let address = nid.addr4();
        match nid.lnd().address_kind() {
            AddressKind::Ip => {
                self.address.len() == 4
                    && self
                        .address
                        .iter()
                        .zip(address.to_be_bytes())
                        .all(|(octet, value)| octet.matches(u32::from(value)))
            }
            AddressKind::Numeric | AddressKind::Loopback => {
                self.address.first().is_some_and(|numbers| numbers.matches(address))
            }
        }
    }
}

impl FromStr for NidDescriptor {
    type Err = DescriptorParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse(text)
    }
}

/// The text `udsp show` prints: the address ranges, `@`, the LND name, the net-number
/// ranges, each list as `cfs_expr2str()` writes it.
/// lustre: liblnetconfig_udsp.c `lustre_lnet_nid_descr2str()`.
impl fmt::Display for NidDescriptor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut text = expr_lists_text(&self.address);
        if !self.address.is_empty() {
            text.push('@');
        }
        text.push_str(LND_NAMES.iter().find(|(lnd, _)| *lnd == self.lnd).map_or("", |e| e.1));
        text.push_str(&expr_lists_text(self.net_numbers.as_slice()));
        f.write_str(&text)
    }
}

/// lustre: lib/libcfs/nidstrings.c `parse_net_range()`: the first LND name that starts the
/// text, then net numbers from the first `[` (or right after the name) to the end.
fn parse_net_part(text: &str) -> Result<(LndType, Option<ExprList>), DescriptorParseError> {
    let (lnd, after_name) = LND_NAMES
        .iter()
        .find_map(|(lnd, name)| text.strip_prefix(name).map(|rest| (*lnd, rest)))
        .ok_or(DescriptorParseError::UnknownLnd)?;
    let bracket = text.find('[');
    if let (Some(bracket), Some(star)) = (bracket, text.find('*')) {
        if star < bracket {
            return Err(DescriptorParseError::StarBeforeBracket);
        }
    }
    // `bracket` is the byte index of an ASCII '[', a char boundary.
    let numbers = match bracket {
        Some(at) => text.get(at..).unwrap_or_default(),
        None => after_name,
    };
    if numbers.is_empty() {
        return Ok((lnd, None));
    }
    let numbers = parse_expr_list(numbers, u32::MAX).map_err(DescriptorParseError::NetNumbers)?;
    Ok((lnd, Some(numbers)))
}

/// lustre: nidstrings.c `cfs_ip_addr_parse()` (four octet lists) or `libcfs_num_parse()`.
fn parse_address(text: &str, lnd: LndType) -> Result<Vec<ExprList>, DescriptorParseError> {
    if text.is_empty() {
        return Err(DescriptorParseError::Empty);
    }
    let address = |part: &str, max| parse_expr_list(part, max);
    match lnd.address_kind() {
        AddressKind::Ip => {
            let octets = text
                .split('.')
                .map(|part| address(part.trim(), OCTET_MAX))
                .collect::<Result<Vec<_>, _>>()
                .map_err(DescriptorParseError::Address)?;
            if octets.len() != 4 {
                return Err(DescriptorParseError::BadOctetCount);
            }
            Ok(octets)
        }
        AddressKind::Numeric | AddressKind::Loopback => {
            Ok(vec![address(text, u32::MAX).map_err(DescriptorParseError::Address)?])
        }
    }
}

/// lustre: lib/libcfs/nidstrings.c `cfs_expr2str()`: each range as `lo.` when single,
/// `[lo-hi,` (or `lo-hi,` after the first) otherwise; a list that had a range has its last
/// character turned into `]` and a `.` added; the final `.` goes.
fn expr_lists_text(lists: &[ExprList]) -> String {
    let mut text = String::new();
    for list in lists {
        let mut bracket = false;
        for (index, expr) in list.exprs().iter().enumerate() {
            let open = if index == 0 { "[" } else { "" };
            let (lo, hi, stride) = (expr.lo(), expr.hi(), expr.stride());
            if lo == hi {
                text.push_str(&format!("{lo}."));
            } else if stride > 1 {
                text.push_str(&format!("{open}{lo}-{hi}/{stride},"));
                bracket = true;
            } else {
                text.push_str(&format!("{open}{lo}-{hi},"));
                bracket = true;
            }
        }
        if bracket {
            text.pop();
            text.push_str("].");
        }
    }
    if !lists.is_empty() {
        text.pop();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::net::Ipv4Addr;

    fn descriptor(text: &str) -> NidDescriptor {
        NidDescriptor::parse(text).unwrap_or_else(|error| panic!("{text}: {error}"))
    }

    fn tcp(net: u16, a: u8, b: u8, c: u8, d: u8) -> Nid {
        Nid::ipv4(Net::new(LndType::SOCK, net), Ipv4Addr::new(a, b, c, d))
    }

    #[test]
    fn net_descriptors_name_net_numbers() {
        let tcp0 = descriptor("tcp");
        assert!(tcp0.is_net());
        assert!(tcp0.matches_net(Net::TCP));
        assert!(!tcp0.matches_net(Net::new(LndType::SOCK, 1)));
        assert!(!tcp0.matches_net(Net::new(LndType::O2IB, 0)));
        // A net descriptor matches no NID, even on its net (cfs_match_nid_net()).
        assert!(!tcp0.matches_nid(&tcp(0, 1, 1, 1, 1)));
        let some = descriptor("o2ib[1-3/2]");
        assert!(some.matches_net(Net::new(LndType::O2IB, 3)));
        assert!(!some.matches_net(Net::new(LndType::O2IB, 2)));
        assert!(descriptor("tcp*").matches_net(Net::new(LndType::SOCK, 9)));
        assert!(descriptor("tcp1").matches_net(Net::new(LndType::SOCK, 1)));
        // Text between the name and '[' is skipped, as parse_net_range() does.
        assert_eq!(descriptor("tcp5[1-2]"), descriptor("tcp[1-2]"));
        // "tcp" (no numbers) and "tcp0" are different rules that match the same net.
        assert_ne!(descriptor("tcp"), descriptor("tcp0"));
        assert!(descriptor("tcp0").matches_net(Net::TCP));
    }

    #[test]
    fn nid_descriptors_match_addresses_and_nets() {
        let range = descriptor("10.0.[1-2].*@tcp1");
        assert!(!range.is_net());
        assert!(range.matches_nid(&tcp(1, 10, 0, 2, 77)));
        assert!(!range.matches_nid(&tcp(1, 10, 0, 3, 77)));
        assert!(!range.matches_nid(&tcp(0, 10, 0, 2, 77)));
        let gni = descriptor("[5-9]@gni");
        assert!(gni.matches_nid(&Nid::new4(Net::new(LndType::GNI, 0), 7)));
        assert!(!gni.matches_nid(&Nid::new4(Net::new(LndType::GNI, 0), 10)));
        let v6 = Nid::ipv6(Net::TCP, "::a00:1".parse().unwrap());
        assert!(!descriptor("*.*.*.*@tcp").matches_nid(&v6));
        assert!(descriptor("1@lo").matches_nid(&Nid::new4(Net::LO, 1)));
    }

    #[test]
    fn bad_descriptors_are_refused() {
        use DescriptorParseError::*;
        for (text, error) in [
            ("", Empty),
            ("@tcp", Empty),
            ("foo", UnknownLnd),
            ("1.2.3.4@foo", UnknownLnd),
            ("tcp*[1]", StarBeforeBracket),
            ("*@tcp", BadOctetCount),
            ("1.2.3@tcp", BadOctetCount),
            ("1.2.3.4.5@tcp", BadOctetCount),
            ("1.2.3.256@tcp", Address(RangeParseError::NumberOutOfRange)),
            ("1.2.3.0/24@tcp", Address(RangeParseError::BadNumber)),
            ("tcpx", NetNumbers(RangeParseError::BadNumber)),
            ("tcp[3-1]", NetNumbers(RangeParseError::ReversedRange)),
        ] {
            assert_eq!(NidDescriptor::parse(text), Err(error), "{text}");
        }
    }

    #[test]
    fn printed_as_lnetctl_prints() {
        for (text, shown) in [
            ("tcp", "tcp"),
            ("tcp1", "tcp1"),
            ("o2ib[1-3]", "o2ib[1-3]"),
            ("tcp*", "tcp[0-4294967295]"),
            ("1.1.1.1@tcp", "1.1.1.1@tcp"),
            ("401@kfi", "401@kfi"),
            ("10.0.[1-20/2].*@tcp2", "10.0.[1-20/2].[0-255]@tcp2"),
            ("[1-3,5].2.3.4@tcp", "[1-3,5].2.3.4@tcp"),
            // cfs_expr2str()'s quirks with single values in a list.
            ("[4,6].2.3.4@tcp", "4.6.2.3.4@tcp"),
            ("[1,3-5].2.3.4@tcp", "1.3-5].2.3.4@tcp"),
        ] {
            assert_eq!(descriptor(text).to_string(), shown, "{text}");
        }
    }

    proptest! {
        #[test]
        fn parse_never_panics(text in any::<String>()) {
            let _ = NidDescriptor::parse(&text);
        }

        #[test]
        fn plain_forms_print_back(net in 0u16..10, octets in any::<[u8; 4]>()) {
            let [a, b, c, d] = octets;
            let text = if net == 0 {
                format!("{a}.{b}.{c}.{d}@tcp")
            } else {
                format!("{a}.{b}.{c}.{d}@tcp{net}")
            };
            let parsed = descriptor(&text);
            prop_assert_eq!(parsed.to_string(), text);
            prop_assert!(parsed.matches_nid(&tcp(net, a, b, c, d)));
        }
    }
}
