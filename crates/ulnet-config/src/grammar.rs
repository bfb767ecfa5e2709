//! The kernel's text configuration grammars: range expressions, `networks=`, `ip2nets=` and
//! `routes=` (docs/protocol/cli.md §5.1-5.4).
//!
//! All parsers are total and bounded: inputs longer than Lustre's text-buffer limits and
//! expansions that would grow past them are refused with a named error, never allocated.
//!
//! lustre: lnet/lnet/config.c `lnet_parse_networks()`, `lnet_str2tbs_sep()`,
//! `lnet_str2tbs_expand()`, `lnet_parse_route()`, `lnet_match_networks()`,
//! `lnet_splitnets()`; lib/libcfs/string.c `cfs_expr_list_parse()`, `cfs_range_expr_parse()`;
//! lnet/lnet/nidstrings.c `cfs_ip_addr_parse()`, `cfs_ip_addr_match()`.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use ulnet_proto::addr::{Net, Nid};

use crate::nid_text::{parse_c_unsigned, parse_net, parse_nid};

/// Longest single text the kernel parses (`LNET_SINGLE_TEXTBUF_NOB`, lnet/lnet/config.c):
/// a whole `networks=` string, one `ip2nets=` rule or one route.
pub const MAX_SPEC_LEN: usize = 4 << 10;

/// Total text the kernel lets one parse allocate, expansions included
/// (`LNET_MAX_TEXTBUF_NOB`, lnet/lnet/config.c).
pub const MAX_TOTAL_TEXT: usize = 64 << 10;

/// Longest interface name lnetctl accepts (`LNET_MAX_STR_LEN` - 1, lnet-dlc.h).
pub const MAX_INTERFACE_NAME_LEN: usize = 127;

/// Highest CPT index: `LNET_CPT_MAX_BITS` is 8 (include/linux/lnet/lib-lnet.h).
pub const MAX_CPT: u32 = 255;

// ---------------------------------------------------------------------------------------------
// Range expressions.

/// One `lo[-hi[/stride]]` element of an expression list (`struct cfs_range_expr`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RangeExpr {
    pub lo: u32,
    pub hi: u32,
    pub stride: u32,
}

/// A parsed `N`, `*` or `[e1,e2,...]` expression (`struct cfs_expr_list`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ExprList {
    ranges: Vec<RangeExpr>,
}

/// Why a range expression did not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ExprError {
    #[error("empty range expression")]
    Empty,
    #[error("'{0}' is not a number or range")]
    BadElement(String),
    #[error("{value} is outside {min}..={max}")]
    OutOfRange { value: u64, min: u32, max: u32 },
    #[error("range {lo}-{hi} runs backwards")]
    Reversed { lo: u32, hi: u32 },
    #[error("range stride is zero")]
    ZeroStride,
}

impl ExprList {
    /// `cfs_expr_list_parse()`: a bracketed list of `N`, `N-M`, `N-M/S` and `*` elements, or
    /// a single unbracketed `N` or `*`. Numbers are C literals (decimal, `0x`, octal).
    /// Stride 0, which Lustre accepts and later divides by, is refused.
    pub fn parse(text: &str, min: u32, max: u32) -> Result<Self, ExprError> {
        let ranges = match text.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
            Some(inner) => {
                if inner.trim().is_empty() {
                    return Err(ExprError::Empty);
                }
                inner
                    .split(',')
                    .map(|element| Self::parse_range(element.trim(), min, max, true))
                    .collect::<Result<Vec<_>, _>>()?
            }
            None => vec![Self::parse_range(text.trim(), min, max, false)?],
        };
        Ok(Self { ranges })
    }

    /// A list holding exactly these values, each as its own element.
    pub fn from_values(values: impl IntoIterator<Item = u32>) -> Self {
        Self { ranges: values.into_iter().map(|v| RangeExpr { lo: v, hi: v, stride: 1 }).collect() }
    }

    /// Adds another list's elements after these (lnetctl merges `CPT:` sequences this way).
    pub fn append(&mut self, other: ExprList) {
        self.ranges.extend(other.ranges);
    }

    pub fn ranges(&self) -> &[RangeExpr] {
        &self.ranges
    }

    /// `cfs_expr_list_match()`.
    pub fn contains(&self, value: u32) -> bool {
        self.ranges
            .iter()
            .any(|r| (r.lo..=r.hi).contains(&value) && (value - r.lo) % r.stride.max(1) == 0)
    }

    /// `cfs_expr_list_values()`: every value, element by element, in the order written.
    pub fn values(&self) -> impl Iterator<Item = u32> + '_ {
        self.ranges.iter().flat_map(|r| (r.lo..=r.hi).step_by(r.stride.max(1) as usize))
    }

    /// The number of values [`Self::values`] yields, without producing them.
    pub fn value_count(&self) -> u64 {
        self.ranges.iter().map(|r| u64::from((r.hi - r.lo) / r.stride.max(1)) + 1).sum()
    }

    fn parse_range(
        element: &str,
        min: u32,
        max: u32,
        bracketed: bool,
    ) -> Result<RangeExpr, ExprError> {
        if element.is_empty() {
            return Err(ExprError::Empty);
        }
        if element == "*" {
            return Ok(RangeExpr { lo: min, hi: max, stride: 1 });
        }
        let bad = || ExprError::BadElement(element.to_string());
        let number = |text: &str| -> Result<u32, ExprError> {
            let value = parse_c_unsigned(text.trim()).ok_or_else(bad)?;
            match u32::try_from(value) {
                Ok(v) if (min..=max).contains(&v) => Ok(v),
                _ => Err(ExprError::OutOfRange { value, min, max }),
            }
        };
        let (lo, hi, stride) = match element.split_once('-') {
            None => {
                let v = number(element)?;
                (v, v, 1)
            }
            Some(_) if !bracketed => return Err(bad()),
            Some((lo, rest)) => match rest.split_once('/') {
                None => (number(lo)?, number(rest)?, 1),
                Some((hi, stride)) => (number(lo)?, number(hi)?, number(stride)?),
            },
        };
        if lo > hi {
            return Err(ExprError::Reversed { lo, hi });
        }
        if stride == 0 {
            return Err(ExprError::ZeroStride);
        }
        Ok(RangeExpr { lo, hi, stride })
    }
}

impl fmt::Display for ExprList {
    /// Lustre's bracketed form, e.g. `[0-3/2,5]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, r) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            match (r.lo == r.hi, r.stride) {
                (true, _) => write!(f, "{}", r.lo)?,
                (false, 1) => write!(f, "{}-{}", r.lo, r.hi)?,
                (false, s) => write!(f, "{}-{}/{}", r.lo, r.hi, s)?,
            }
        }
        f.write_str("]")
    }
}

/// Parses a CPT expression (`[0,1]`, `0`, `[0-3/2]`) bounded by [`MAX_CPT`].
pub fn parse_cpts(text: &str) -> Result<ExprList, ExprError> {
    ExprList::parse(text, 0, MAX_CPT)
}

/// Parses `net add --cpt` as lnetctl does, bounded by `u32::MAX` only (lnetctl.c
/// `jt_add_ni()`): a CPT past the node's count is then refused by the node with -ERANGE
/// ("invalid CPT value"), not dropped as unparseable. The list stays ranges, never expanded.
pub fn parse_cpt_option(text: &str) -> Result<ExprList, ExprError> {
    ExprList::parse(text, 0, u32::MAX)
}

// ---------------------------------------------------------------------------------------------
// networks=

/// One NI a net spec asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NiSpec {
    /// `None` when the net had no interface list: the LND picks its default interface.
    pub interface: Option<String>,
    /// The NI's own CPT expression, or the net's when the interface had none.
    pub cpts: Option<ExprList>,
}

/// One net of a `networks=` string with the NIs to create on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetSpec {
    pub net: Net,
    pub nis: Vec<NiSpec>,
}

/// Why a `networks=` string did not parse. Offsets are byte offsets into the input, the
/// position `lnet_syntax()` marks.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NetworksError {
    #[error("networks string is {0} bytes, at most {MAX_SPEC_LEN} are parsed")]
    TooLong(usize),
    #[error("interface list at {offset} has no closing ')'")]
    UnterminatedInterfaceList { offset: usize },
    #[error("CPT expression at {offset} has no closing ']'")]
    UnterminatedCpt { offset: usize },
    #[error("bad CPT expression at {offset}: {error}")]
    BadCpt { offset: usize, error: ExprError },
    #[error("unexpected '{found}' at {offset}")]
    UnexpectedDelimiter { offset: usize, found: char },
    #[error("unexpected text at {offset}")]
    TrailingText { offset: usize },
    #[error("unrecognised network type '{name}' at {offset}")]
    UnknownNet { offset: usize, name: String },
    #[error("empty interface name at {offset}")]
    EmptyInterface { offset: usize },
    #[error("interface name at {offset} is longer than {MAX_INTERFACE_NAME_LEN} bytes")]
    InterfaceNameTooLong { offset: usize },
    #[error("interface '{interface}' appears twice on {net}")]
    DuplicateInterface { net: Net, interface: String },
}

impl NetworksError {
    /// Where `lnet_syntax()` would point, when the error has a position.
    pub fn offset(&self) -> Option<usize> {
        match self {
            Self::UnterminatedInterfaceList { offset }
            | Self::UnterminatedCpt { offset }
            | Self::BadCpt { offset, .. }
            | Self::UnexpectedDelimiter { offset, .. }
            | Self::TrailingText { offset }
            | Self::UnknownNet { offset, .. }
            | Self::EmptyInterface { offset }
            | Self::InterfaceNameTooLong { offset } => Some(*offset),
            Self::TooLong(_) | Self::DuplicateInterface { .. } => None,
        }
    }
}

const SPACES: &[char] = &[' ', '\t', '\u{b}', '\r', '\n', '\u{c}'];
/// Characters that end a net name (`SPACESTR ":()[],"`).
const NAME_END: &[char] = &[' ', '\t', '\u{b}', '\r', '\n', '\u{c}', ':', '(', ')', '[', ']', ','];
/// Characters that end an interface name (`SPACESTR "[],"`).
const INTERFACE_END: &[char] = &[' ', '\t', '\u{b}', '\r', '\n', '\u{c}', '[', ']', ','];
/// `DELIMITERS` in lnet/lnet/config.c.
const DELIMITERS: &[char] = &[':', '(', ')', '[', ']'];

/// Parses `networks=`: `<net>["(" <iface>["[" <cpts> "]"] {"," ...} ")"]["[" <cpts> "]"]`,
/// comma separated. `lo` entries are ignored; a net named twice gets the NIs of both; a
/// net-level CPT expression applies to the interfaces without their own.
/// Example: `tcp0(eth0,eth1),o2ib1(ib0)[0,1]`.
///
/// Where the kernel silently skips text after a net spec up to the next comma, this refuses
/// it with [`NetworksError::TrailingText`].
pub fn parse_networks(text: &str) -> Result<Vec<NetSpec>, NetworksError> {
    if text.len() > MAX_SPEC_LEN {
        return Err(NetworksError::TooLong(text.len()));
    }
    let mut nets: Vec<NetSpec> = Vec::new();
    let mut cursor = Cursor { text, pos: 0 };
    loop {
        cursor.skip_spaces();
        if cursor.at_end() {
            break;
        }
        let name_start = cursor.pos;
        let name = cursor.take_until(NAME_END);
        cursor.skip_spaces();

        let interfaces = if cursor.peek() == Some('(') {
            let list_start = cursor.pos + 1;
            let Some(len) = text[list_start..].find(')') else {
                return Err(NetworksError::UnterminatedInterfaceList { offset: list_start });
            };
            cursor.pos = list_start + len + 1;
            cursor.skip_spaces();
            Some((list_start, &text[list_start..list_start + len]))
        } else {
            None
        };

        let net_cpts = if cursor.peek() == Some('[') {
            let cpts = cursor.take_cpts()?;
            cursor.skip_spaces();
            Some(cpts)
        } else {
            None
        };

        match cursor.peek() {
            None => {}
            Some(',') => cursor.pos += 1,
            Some(c) if DELIMITERS.contains(&c) => {
                return Err(NetworksError::UnexpectedDelimiter { offset: cursor.pos, found: c });
            }
            Some(_) => return Err(NetworksError::TrailingText { offset: cursor.pos }),
        }

        let net = parse_net(name).ok_or_else(|| NetworksError::UnknownNet {
            offset: name_start,
            name: name.to_string(),
        })?;
        if net == Net::LO {
            // Loopback is implicit (config.c "Loopback is implicit, and there can be only one").
            continue;
        }
        let nis = match interfaces {
            None => vec![NiSpec { interface: None, cpts: net_cpts }],
            Some((offset, list)) => {
                parse_interface_list(net, text, offset, list, net_cpts.as_ref())?
            }
        };
        merge_net(&mut nets, NetSpec { net, nis })?;
    }
    Ok(nets)
}

/// Adds a net's NIs, merging with an earlier spec of the same net as `lnet_net_alloc()` does.
fn merge_net(nets: &mut Vec<NetSpec>, spec: NetSpec) -> Result<(), NetworksError> {
    let Some(existing) = nets.iter_mut().find(|n| n.net == spec.net) else {
        nets.push(spec);
        return Ok(());
    };
    for ni in spec.nis {
        if let Some(name) = &ni.interface {
            if existing.nis.iter().any(|n| n.interface.as_ref() == Some(name)) {
                return Err(NetworksError::DuplicateInterface {
                    net: spec.net,
                    interface: name.clone(),
                });
            }
        }
        existing.nis.push(ni);
    }
    Ok(())
}

fn parse_interface_list(
    net: Net,
    text: &str,
    list_offset: usize,
    list: &str,
    net_cpts: Option<&ExprList>,
) -> Result<Vec<NiSpec>, NetworksError> {
    let mut nis: Vec<NiSpec> = Vec::new();
    // Work on the whole text so offsets stay absolute.
    let mut cursor = Cursor { text: &text[..list_offset + list.len()], pos: list_offset };
    loop {
        cursor.skip_spaces();
        let name_start = cursor.pos;
        let name = cursor.take_until(INTERFACE_END);
        cursor.skip_spaces();
        let cpts = if cursor.peek() == Some('[') {
            let cpts = cursor.take_cpts()?;
            cursor.skip_spaces();
            Some(cpts)
        } else {
            net_cpts.cloned()
        };
        let more = match cursor.peek() {
            Some(',') => {
                cursor.pos += 1;
                cursor.skip_spaces();
                if cursor.at_end() {
                    return Err(NetworksError::EmptyInterface { offset: cursor.pos });
                }
                true
            }
            Some(c) if DELIMITERS.contains(&c) => {
                return Err(NetworksError::UnexpectedDelimiter { offset: cursor.pos, found: c });
            }
            Some(_) => return Err(NetworksError::TrailingText { offset: cursor.pos }),
            None => false,
        };
        if name.is_empty() {
            return Err(NetworksError::EmptyInterface { offset: name_start });
        }
        if name.len() > MAX_INTERFACE_NAME_LEN {
            return Err(NetworksError::InterfaceNameTooLong { offset: name_start });
        }
        if nis.iter().any(|ni| ni.interface.as_deref() == Some(name)) {
            return Err(NetworksError::DuplicateInterface { net, interface: name.to_string() });
        }
        nis.push(NiSpec { interface: Some(name.to_string()), cpts });
        if !more {
            return Ok(nis);
        }
    }
}

struct Cursor<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn at_end(&self) -> bool {
        self.pos >= self.text.len()
    }

    fn peek(&self) -> Option<char> {
        self.text.get(self.pos..).and_then(|rest| rest.chars().next())
    }

    fn skip_spaces(&mut self) {
        while let Some(c) = self.peek().filter(|c| SPACES.contains(c)) {
            self.pos += c.len_utf8();
        }
    }

    fn take_until(&mut self, stop: &[char]) -> &'a str {
        let start = self.pos;
        while let Some(c) = self.peek().filter(|c| !stop.contains(c)) {
            self.pos += c.len_utf8();
        }
        &self.text[start..self.pos]
    }

    /// A `[...]` CPT expression at the cursor.
    fn take_cpts(&mut self) -> Result<ExprList, NetworksError> {
        let offset = self.pos;
        let Some(len) = self.text[offset..].find(']') else {
            return Err(NetworksError::UnterminatedCpt { offset });
        };
        let expr = &self.text[offset..=offset + len];
        self.pos = offset + len + 1;
        parse_cpts(expr).map_err(|error| NetworksError::BadCpt { offset, error })
    }
}

// ---------------------------------------------------------------------------------------------
// ip2nets=

/// An IPv4 address pattern `a.b.c.d`, each field a number, `*` or `[list]` of 0..=255.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Ipv4Pattern {
    fields: [ExprList; 4],
}

impl Ipv4Pattern {
    /// `cfs_ip_addr_parse()`.
    pub fn parse(text: &str) -> Result<Self, ExprError> {
        let mut fields = text.split('.');
        let mut parse = || ExprList::parse(fields.next().ok_or(ExprError::Empty)?.trim(), 0, 255);
        let parsed = [parse()?, parse()?, parse()?, parse()?];
        if fields.next().is_some() {
            return Err(ExprError::BadElement(text.to_string()));
        }
        Ok(Self { fields: parsed })
    }

    /// `cfs_ip_addr_match()`.
    pub fn matches(&self, ip: Ipv4Addr) -> bool {
        self.fields.iter().zip(ip.octets()).all(|(field, octet)| field.contains(u32::from(octet)))
    }

    pub fn fields(&self) -> &[ExprList; 4] {
        &self.fields
    }
}

/// An `ip-range` of lnetctl's YAML `ip2nets:` block: an IPv4 pattern, or an IPv6 address with
/// an optional prefix length.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum IpPattern {
    V4(Ipv4Pattern),
    V6 { address: Ipv6Addr, prefix: u8 },
}

impl IpPattern {
    pub fn parse(text: &str) -> Result<Self, ExprError> {
        if text.contains(':') {
            let bad = || ExprError::BadElement(text.to_string());
            let (address, prefix) = match text.split_once('/') {
                Some((address, prefix)) => (address, prefix.parse::<u8>().map_err(|_| bad())?),
                None => (text, 128),
            };
            if prefix > 128 {
                return Err(bad());
            }
            let address = address.parse().map_err(|_| bad())?;
            return Ok(Self::V6 { address, prefix });
        }
        Ipv4Pattern::parse(text).map(Self::V4)
    }

    pub fn matches(&self, ip: std::net::IpAddr) -> bool {
        match (self, ip) {
            (Self::V4(pattern), std::net::IpAddr::V4(ip)) => pattern.matches(ip),
            (Self::V6 { address, prefix }, std::net::IpAddr::V6(ip)) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(*prefix)).unwrap_or(0);
                u128::from(*address) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

/// One `ip2nets=` rule: nets to configure when a local address matches a range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ip2netsRule {
    pub nets: Vec<NetSpec>,
    /// A rule without ranges never matches, as in the kernel.
    pub ranges: Vec<Ipv4Pattern>,
}

impl Ip2netsRule {
    /// True when any local address matches any of the rule's ranges.
    pub fn matches(&self, local: &[Ipv4Addr]) -> bool {
        self.ranges.iter().any(|range| local.iter().any(|ip| range.matches(*ip)))
    }
}

/// Why an `ip2nets=` string did not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Ip2netsError {
    #[error("ip2nets is {0} bytes, at most {MAX_TOTAL_TEXT} are parsed")]
    TooLong(usize),
    #[error("ip2nets rule at {offset} is longer than {MAX_SPEC_LEN} bytes")]
    RuleTooLong { offset: usize },
    #[error("net list at {offset}: ')' must be followed by ',' or the end")]
    BadNetList { offset: usize },
    #[error("net {net} appears twice in the rule at {offset}")]
    DuplicateNet { offset: usize, net: Net },
    #[error("bad net spec at {offset}: {error}")]
    BadNetSpec { offset: usize, error: NetworksError },
    #[error("bad IP range '{text}' at {offset}: {error}")]
    BadIpRange { offset: usize, text: String, error: ExprError },
}

/// Parses `ip2nets=`: rules separated by `;` or newlines, `#` comments to the end of the rule,
/// each `<net-spec>[,<net-spec>...] <ip-range> {<ip-range>}` (docs/protocol/cli.md §5.3). Every rule is fully
/// validated here; the kernel only checks the rules it evaluates.
pub fn parse_ip2nets(text: &str) -> Result<Vec<Ip2netsRule>, Ip2netsError> {
    if text.len() > MAX_TOTAL_TEXT {
        return Err(Ip2netsError::TooLong(text.len()));
    }
    let mut rules = Vec::new();
    for (offset, rule) in split_statements(text) {
        if rule.len() > MAX_SPEC_LEN {
            return Err(Ip2netsError::RuleTooLong { offset });
        }
        let mut tokens = tokens(rule).map(|(at, token)| (offset + at, token));
        let Some((net_offset, net_list)) = tokens.next() else { continue };
        let nets = split_net_list(net_offset, net_list)?;
        let ranges = tokens
            .map(|(at, token)| {
                Ipv4Pattern::parse(token).map_err(|error| Ip2netsError::BadIpRange {
                    offset: at,
                    text: token.to_string(),
                    error,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        rules.push(Ip2netsRule { nets, ranges });
    }
    Ok(rules)
}

/// The nets the matching rules select, in rule order, merged like a `networks=` string built
/// from them (`lnet_match_networks()` then `lnet_parse_networks()`).
pub fn resolve_ip2nets(
    rules: &[Ip2netsRule],
    local: &[Ipv4Addr],
) -> Result<Vec<NetSpec>, NetworksError> {
    let mut nets = Vec::new();
    for rule in rules.iter().filter(|rule| rule.matches(local)) {
        for spec in &rule.nets {
            merge_net(&mut nets, spec.clone())?;
        }
    }
    Ok(nets)
}

/// `lnet_splitnets()`: commas separate nets except inside an interface list.
fn split_net_list(offset: usize, list: &str) -> Result<Vec<NetSpec>, Ip2netsError> {
    let mut nets: Vec<NetSpec> = Vec::new();
    let mut start = 0;
    while start <= list.len() {
        let rest = &list[start..];
        let comma = rest.find(',');
        let paren = rest.find('(');
        let end = match (comma, paren) {
            (Some(comma), Some(paren)) if paren < comma => {
                let close = rest[paren..].find(')').map(|c| paren + c);
                match close {
                    Some(close) if close + 1 == rest.len() => rest.len(),
                    Some(close) if rest[close + 1..].starts_with(',') => close + 1,
                    _ => return Err(Ip2netsError::BadNetList { offset: offset + start + paren }),
                }
            }
            (Some(comma), _) => comma,
            (None, _) => rest.len(),
        };
        let piece = &rest[..end];
        let piece_offset = offset + start;
        if piece.is_empty() {
            let error = NetworksError::UnknownNet { offset: 0, name: String::new() };
            return Err(Ip2netsError::BadNetSpec { offset: piece_offset, error });
        }
        let spec = parse_networks(piece).map_err(|error| Ip2netsError::BadNetSpec {
            offset: piece_offset + error.offset().unwrap_or(0),
            error,
        })?;
        for net in spec {
            if nets.iter().any(|n| n.net == net.net) {
                return Err(Ip2netsError::DuplicateNet { offset: piece_offset, net: net.net });
            }
            nets.push(net);
        }
        start += end + 1;
    }
    Ok(nets)
}

/// `lnet_str2tbs_sep()`: statements split at `;`, CR or LF, `#` starting a comment that runs
/// to the next separator; yields each non-blank statement with its offset.
fn split_statements(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut offset = 0;
    text.split([';', '\n', '\r']).filter_map(move |piece| {
        let at = offset;
        offset += piece.len() + 1;
        let piece = piece.split('#').next().unwrap_or_default();
        let trimmed = piece.trim_start_matches(SPACES);
        let lead = piece.len() - trimmed.len();
        let trimmed = trimmed.trim_end_matches(SPACES);
        (!trimmed.is_empty()).then_some((at + lead, trimmed))
    })
}

/// Whitespace-separated tokens with their offsets.
fn tokens(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.split(SPACES)
        .scan(0usize, |offset, token| {
            let at = *offset;
            *offset += token.len() + 1;
            Some((at, token))
        })
        .filter(|(_, token)| !token.is_empty())
}

// ---------------------------------------------------------------------------------------------
// routes=

/// One route a `routes=` string configures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RouteSpec {
    /// The remote net.
    pub net: Net,
    pub gateway: Nid,
    /// 1..=255, `None` when not given (shown as -1, `LNET_UNDEFINED_HOPS`).
    pub hops: Option<u8>,
    pub priority: u32,
}

/// Why a `routes=` string did not parse. Offsets point at the offending token.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RoutesError {
    #[error("routes is {0} bytes, at most {MAX_TOTAL_TEXT} are parsed")]
    TooLong(usize),
    #[error("route at {offset} is longer than {MAX_SPEC_LEN} bytes")]
    RouteTooLong { offset: usize },
    #[error("route at {offset} has no gateway")]
    MissingGateway { offset: usize },
    #[error("bad [...] expansion in '{token}' at {offset}")]
    BadExpansion { offset: usize, token: String },
    #[error("expanding '{token}' at {offset} needs more than {MAX_TOTAL_TEXT} bytes")]
    ExpansionTooLarge { offset: usize, token: String },
    #[error("bad remote net '{token}' at {offset}")]
    BadNet { offset: usize, token: String },
    #[error("bad priority in '{token}' at {offset}")]
    BadPriority { offset: usize, token: String },
    #[error("bad gateway NID '{token}' at {offset}")]
    BadGateway { offset: usize, token: String },
}

/// Parses `routes=`: routes separated by `;` or newlines, `#` comments, each
/// `<net> [<hops>] <gateway>[:<priority>] {<gateway>[:<priority>]}` where any token may carry
/// `[a,b,lo-hi,lo-hi/stride]` expansions (docs/protocol/cli.md §5.4). Yields every net x gateway pair.
/// Gateways that are local NIDs (which make the node a router) are returned like the others.
pub fn parse_routes(text: &str) -> Result<Vec<RouteSpec>, RoutesError> {
    if text.len() > MAX_TOTAL_TEXT {
        return Err(RoutesError::TooLong(text.len()));
    }
    let mut routes = Vec::new();
    let mut budget = MAX_TOTAL_TEXT;
    for (offset, route) in split_statements(text) {
        if route.len() > MAX_SPEC_LEN {
            return Err(RoutesError::RouteTooLong { offset });
        }
        parse_route(offset, route, &mut budget, &mut routes)?;
    }
    Ok(routes)
}

fn parse_route(
    offset: usize,
    route: &str,
    budget: &mut usize,
    routes: &mut Vec<RouteSpec>,
) -> Result<(), RoutesError> {
    let mut nets = Vec::new();
    let mut gateways = Vec::new();
    let mut hops = None;
    for (index, (at, token)) in tokens(route).enumerate() {
        let at = offset + at;
        if index == 1 {
            if let Some(h) = parse_hops(token) {
                hops = Some(h);
                continue;
            }
        }
        for item in expand(at, token, budget)? {
            if index == 0 {
                match parse_net(&item) {
                    Some(net) if net != Net::LO => nets.push(net),
                    _ => return Err(RoutesError::BadNet { offset: at, token: token.to_string() }),
                }
            } else {
                gateways.push(parse_gateway(at, token, &item)?);
            }
        }
    }
    if nets.is_empty() || gateways.is_empty() {
        return Err(RoutesError::MissingGateway { offset });
    }
    for net in nets {
        for &(gateway, priority) in &gateways {
            routes.push(RouteSpec { net, gateway, hops, priority });
        }
    }
    Ok(())
}

/// `lnet_parse_hops()`: 1..=255, decimal.
fn parse_hops(token: &str) -> Option<u8> {
    if !token.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    token.parse::<u8>().ok().filter(|h| *h > 0)
}

/// `lnet_parse_priority()` then `libcfs_strnid()`: `<nid>[:<priority>]`, not `0@lo`.
fn parse_gateway(at: usize, token: &str, item: &str) -> Result<(Nid, u32), RoutesError> {
    let (nid, priority) = match item.split_once(':') {
        Some((nid, priority)) => {
            let valid = !priority.is_empty() && priority.bytes().all(|b| b.is_ascii_digit());
            match priority.parse::<u32>() {
                Ok(p) if valid => (nid, p),
                _ => return Err(RoutesError::BadPriority { offset: at, token: token.to_string() }),
            }
        }
        None => (item, 0),
    };
    match parse_nid(nid) {
        Some(nid) if nid != Nid::LO_0 => Ok((nid, priority)),
        _ => Err(RoutesError::BadGateway { offset: at, token: token.to_string() }),
    }
}

/// `lnet_str2tbs_expand()` applied until no `[` is left: the first `[...]` of a string is
/// replaced by each of its items in turn; items are `lo-hi/stride` or `lo-hi` ranges (stride
/// must divide `hi - lo`) or literal text. The expanded strings share `budget` bytes.
fn expand(at: usize, token: &str, budget: &mut usize) -> Result<Vec<String>, RoutesError> {
    let bad = || RoutesError::BadExpansion { offset: at, token: token.to_string() };
    let mut done = Vec::new();
    let mut pending = vec![token.to_string()];
    while let Some(text) = pending.pop() {
        let Some(open) = text.find('[') else {
            done.push(text);
            continue;
        };
        let close = text[open..].find(']').map(|c| open + c).ok_or_else(bad)?;
        let (head, items, tail) = (&text[..open], &text[open + 1..close], &text[close + 1..]);
        let mut expanded = Vec::new();
        for item in items.split(',') {
            if item.is_empty() {
                return Err(bad());
            }
            let mut push = |middle: &str| -> Result<(), RoutesError> {
                let len = head.len() + middle.len() + tail.len();
                *budget = budget.checked_sub(len).ok_or_else(|| {
                    RoutesError::ExpansionTooLarge { offset: at, token: token.to_string() }
                })?;
                expanded.push(format!("{head}{middle}{tail}"));
                Ok(())
            };
            match parse_expansion_range(item) {
                RangeItem::Literal => push(item)?,
                RangeItem::Invalid => return Err(bad()),
                RangeItem::Range { lo, hi, stride } => {
                    for value in (lo..=hi).step_by(stride) {
                        push(&value.to_string())?;
                    }
                }
            }
        }
        // Keep the written order: the stack pops from the back.
        pending.extend(expanded.into_iter().rev());
    }
    Ok(done)
}

enum RangeItem {
    Literal,
    Invalid,
    Range { lo: u32, hi: u32, stride: usize },
}

/// The `%d-%d/%d` / `%d-%d` scan of `lnet_str2tbs_expand()`: an item that does not start like
/// a range is literal text; one that does must be a whole, well-formed range.
fn parse_expansion_range(item: &str) -> RangeItem {
    let Some((lo, rest)) = item.split_once('-') else { return RangeItem::Literal };
    let number = |s: &str| -> Option<u32> {
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse().ok()).flatten()
    };
    let Some(lo) = number(lo) else { return RangeItem::Literal };
    let (hi, stride) = match rest.split_once('/') {
        Some((hi, stride)) => (hi, Some(stride)),
        None => (rest, None),
    };
    let Some(hi) = number(hi) else {
        // "%d-%d" needs a number after '-': "1-x" is literal text, "1-2x" is junk.
        let starts_numeric = hi.bytes().next().is_some_and(|b| b.is_ascii_digit());
        return if starts_numeric { RangeItem::Invalid } else { RangeItem::Literal };
    };
    let stride = match stride.map(number) {
        None => 1,
        Some(Some(s)) if s > 0 => s,
        Some(_) => return RangeItem::Invalid,
    };
    if hi < lo || (hi - lo) % stride != 0 {
        return RangeItem::Invalid;
    }
    RangeItem::Range { lo, hi, stride: stride as usize }
}

/// `lnet_syntax()`'s console report for a syntax error in module parameter `param`.
pub fn syntax_report(param: &str, source: &str, offset: usize, width: usize) -> String {
    let dots = |n: usize| ".".repeat(n);
    format!(
        "Error parsing '{param}=\"{source}\"'\nhere...........{}..{}|{}|\n",
        dots(param.len()),
        dots(offset),
        "-".repeat(width.saturating_sub(1))
    )
}

#[cfg(test)]
mod tests;
