//! NID lists and ranges, as configuration uses them to name sets of NIDs.
//!
//! ```text
//! nidlist    := nidrange (' ' nidrange)*
//! nidrange   := addrrange '@' net
//! addrrange  := '*' | netmask | ipv6 | ipv4range | numrange
//! netmask    := ipv4 '/' len | ipv6 '/' len          (IPv6 alone means /128)
//! ipv4range  := numrange '.' numrange '.' numrange '.' numrange
//! numrange   := number | '*' | '[' expr (',' expr)* ']'
//! expr       := number | '*' | number '-' number | number '-' number '/' stride
//! ```
//!
//! Numbers and the net number use C's base auto-detection (`0x` hex, leading `0` octal).
//!
//! lustre: lnet/lnet/nidstrings.c `cfs_parse_nidlist()`, `parse_nidrange()`,
//! `cfs_range_expr_parse()`, `cfs_match_nid()`, `cfs_print_nidlist()`; lib/libcfs/nidstrings.c
//! `parse_nidmask()`, `cfs_expand_nidlist()` (what lnetctl uses for `--nid` lists).
//!
//! Differences from Lustre, all on inputs where Lustre's behaviour is an accident:
//! * Ranges are kept one per token, in order; Lustre merges tokens of one net.
//! * Tokens are separated by any ASCII white space, not only ' '.
//! * A dotted range or number only matches NIDs with 4-byte addresses; the kernel compares
//!   the first address word of IPv6 NIDs too.
//! * Net masks parse on tcp, o2ib and efa (the LNDs with IPv6 handlers, as userspace libcfs
//!   checks) and match on all three; the kernel has no efa mask matcher, so efa masks there
//!   silently match nothing.
//! * Net numbers above 0xFFFF, `lo` with a number, and a zero stride (a division by zero in
//!   Lustre) are errors.
//! * Expansion also covers net masks, and refuses rather than truncates past the limit.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use super::nid::{AddressKind, LndType, Net, Nid};
use super::text::{
    NetNumberSyntax, NetParseError, NumberError, accepts_ipv6, parse_auto_radix, parse_decimal,
    parse_ipv4, parse_net,
};

/// Most nidranges parsed from one string. Lustre has no limit but memory; 256 is far above any
/// real configuration (lnetctl itself caps a peer at `LNET_MAX_NIDS_PER_PEER` = 128 NIDs).
pub const MAX_NIDRANGES: usize = 256;

/// Most entries in one `[...]` list. An octet has 256 values, so more entries are redundant.
pub const MAX_RANGE_EXPRS: usize = 256;

/// Default bound on NIDs produced by expansion: lnetctl's `LNET_MAX_NIDS_PER_PEER`
/// (lnet/utils/lnetconfig/liblnetconfig.h), the array it expands `--nid` lists into.
pub const DEFAULT_EXPANSION_LIMIT: usize = 128;

/// Largest value of one IPv4 octet range.
const OCTET_MAX: u32 = 255;

/// A parsed nidlist: nidranges in input order. Never empty.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NidList {
    ranges: Vec<NidRange>,
}

/// One `<addrrange>@<net>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NidRange {
    net: Net,
    addr: AddrRange,
}

/// The address part of a nidrange.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AddrRange {
    /// `*`: every address on the net, of any size.
    All,
    /// Four octet ranges; values above 255 never match and are never produced.
    Ipv4([ExprList; 4]),
    /// A numeric LND (and `lo`) address range.
    Numeric(ExprList),
    /// `a.b.c.d/len`. Lengths above 32 act as 32; 0 matches every IPv4 address.
    Ipv4Mask { addr: Ipv4Addr, prefix_len: u8 },
    /// `addr/len` or a lone IPv6 address (/128). Lengths above 128 act as 128.
    Ipv6Mask { addr: Ipv6Addr, prefix_len: u8 },
}

/// `number` or a bracketed list of range expressions (`cfs_expr_list`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExprList {
    exprs: Vec<RangeExpr>,
}

/// `lo-hi/stride` (`cfs_range_expr`). Invariant: `lo <= hi`, `stride >= 1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RangeExpr {
    lo: u32,
    hi: u32,
    stride: u32,
}

/// Why text is not a nidlist.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RangeParseError {
    /// No nidrange at all (empty or only white space).
    #[error("empty nidlist")]
    Empty,
    #[error("more than {MAX_NIDRANGES} nidranges")]
    TooManyRanges,
    #[error("nidrange has no '@'")]
    MissingAt,
    #[error("nidrange has more than one '@'")]
    ExtraAt,
    #[error("bad net in nidrange")]
    Net(#[from] NetParseError),
    #[error("nidrange has no address range before '@'")]
    EmptyAddressRange,
    /// An IPv4 range without exactly four dot-separated parts.
    #[error("IPv4 range needs four parts")]
    BadOctetCount,
    /// An empty octet, list entry or bound (`1..2.3`, `[]`, `[1,]`, `[1-]`).
    #[error("empty range expression")]
    EmptyExpression,
    /// A bound that is not a decimal, `0x` hex or `0` octal number.
    #[error("range bound is not a number")]
    BadNumber,
    /// A bound or stride above the largest address value (255 for an octet).
    #[error("range bound out of range")]
    NumberOutOfRange,
    #[error("range low bound above its high bound")]
    ReversedRange,
    #[error("range stride is zero")]
    ZeroStride,
    /// `n-m` outside brackets (`10.0.0.1-5@tcp`).
    #[error("ranges must be inside brackets")]
    RangeOutsideBrackets,
    /// '[' without a closing ']' at the end, or ']' without '['.
    #[error("unbalanced brackets")]
    BadBracket,
    #[error("more than {MAX_RANGE_EXPRS} entries in one list")]
    TooManyExprs,
    /// A net mask or IPv6 address on an LND without large addresses (gip, numeric, lo).
    #[error("this LND takes no net masks")]
    NetmaskNotSupported,
    #[error("net mask address is not an IP address")]
    BadMaskAddress,
    /// Missing, non-decimal, zero, or above 32 (IPv4) / 128 (IPv6).
    #[error("bad net mask prefix length")]
    BadPrefixLength,
}

/// Why a range cannot be expanded into NIDs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RangeError {
    /// The range holds more NIDs than the caller's limit; nothing was allocated.
    #[error("range holds {count} NIDs, more than the limit of {limit}")]
    TooManyNids { count: u128, limit: usize },
    /// `*@net` names every address of every size: it has no finite expansion.
    #[error("'*' ranges cannot be expanded")]
    WildcardNotExpandable,
}

impl NidList {
    /// Parses a space-separated nidlist. lustre: nidstrings.c `cfs_parse_nidlist()`.
    pub fn parse(text: &str) -> Result<Self, RangeParseError> {
        let mut ranges = Vec::new();
        for token in text.split_ascii_whitespace() {
            if ranges.len() == MAX_NIDRANGES {
                return Err(RangeParseError::TooManyRanges);
            }
            ranges.push(NidRange::parse(token)?);
        }
        if ranges.is_empty() {
            return Err(RangeParseError::Empty);
        }
        Ok(Self { ranges })
    }

    /// True when any range contains `nid`. lustre: nidstrings.c `cfs_match_nid()`.
    pub fn matches(&self, nid: &Nid) -> bool {
        self.ranges.iter().any(|range| range.matches(nid))
    }

    pub fn ranges(&self) -> &[NidRange] {
        &self.ranges
    }

    /// The NIDs of all ranges in order, at most `limit` of them in total.
    /// lustre: lib/libcfs/nidstrings.c `cfs_expand_nidlist()`.
    pub fn expand(&self, limit: usize) -> Result<Vec<Nid>, RangeError> {
        let mut count: u128 = 0;
        for range in &self.ranges {
            count = count.saturating_add(range.count().ok_or(RangeError::WildcardNotExpandable)?);
        }
        // Exact capacity: growing by extension would over-allocate past `limit`.
        let mut nids = Vec::with_capacity(check_limit(count, limit)?);
        for range in &self.ranges {
            nids.extend(range.expand(limit)?);
        }
        Ok(nids)
    }
}

impl NidRange {
    pub fn new(net: Net, addr: AddrRange) -> Self {
        Self { net, addr }
    }

    /// Parses one `<addrrange>@<net>`. lustre: nidstrings.c `parse_nidrange()`.
    pub fn parse(text: &str) -> Result<Self, RangeParseError> {
        let Some((addr, net)) = text.split_once('@') else {
            return Err(RangeParseError::MissingAt);
        };
        if net.contains('@') {
            return Err(RangeParseError::ExtraAt);
        }
        let net = parse_net(net, NetNumberSyntax::AutoRadix)?;
        if addr.is_empty() {
            return Err(RangeParseError::EmptyAddressRange);
        }
        Ok(Self { net, addr: parse_addr_range(addr, net.lnd)? })
    }

    pub fn net(&self) -> Net {
        self.net
    }

    pub fn addr(&self) -> &AddrRange {
        &self.addr
    }

    /// True when `nid` is on this range's net and inside its address range.
    pub fn matches(&self, nid: &Nid) -> bool {
        if nid.is_any() || nid.net() != self.net {
            return false;
        }
        let nid4 = nid.size() == 0;
        match &self.addr {
            AddrRange::All => true,
            AddrRange::Ipv4(octets) => {
                nid4 && octets
                    .iter()
                    .zip(nid.addr4().to_be_bytes())
                    .all(|(list, octet)| list.matches(u32::from(octet)))
            }
            AddrRange::Numeric(list) => nid4 && list.matches(nid.addr4()),
            AddrRange::Ipv4Mask { addr, prefix_len } => {
                let mask = ipv4_mask(*prefix_len);
                nid4 && (nid.addr4() ^ u32::from(*addr)) & mask == 0
            }
            AddrRange::Ipv6Mask { addr, prefix_len } => {
                if nid.size() != 12 {
                    return false;
                }
                let mut octets = [0u8; 16];
                octets.copy_from_slice(nid.addr_bytes());
                let mask = ipv6_mask(*prefix_len);
                (u128::from_be_bytes(octets) ^ u128::from(*addr)) & mask == 0
            }
        }
    }

    /// How many NIDs [`NidRange::expand`] would produce, or `None` for `*`.
    pub fn count(&self) -> Option<u128> {
        match &self.addr {
            AddrRange::All => None,
            AddrRange::Ipv4(octets) => {
                Some(octets.iter().map(|list| u128::from(list.count_upto(OCTET_MAX))).product())
            }
            AddrRange::Numeric(list) => Some(u128::from(list.count_upto(u32::MAX))),
            AddrRange::Ipv4Mask { prefix_len, .. } => {
                Some(1u128 << (32 - u32::from((*prefix_len).min(32))))
            }
            AddrRange::Ipv6Mask { prefix_len, .. } => {
                // 2^128 does not fit; a /0 mask saturates, which no limit reaches anyway.
                let host_bits = 128 - u32::from((*prefix_len).min(128));
                Some(1u128.checked_shl(host_bits).unwrap_or(u128::MAX))
            }
        }
    }

    /// Every NID in the range, in ascending order per expression, or an error when there are
    /// more than `limit` (checked before allocating). Duplicates in the expression are kept,
    /// as Lustre keeps them. lustre: lib/libcfs/nidstrings.c `libcfs_expand_nidrange()`.
    pub fn expand(&self, limit: usize) -> Result<Vec<Nid>, RangeError> {
        let count = self.count().ok_or(RangeError::WildcardNotExpandable)?;
        let capacity = check_limit(count, limit)?;
        let mut nids = Vec::with_capacity(capacity);
        let net = self.net;
        match &self.addr {
            AddrRange::All => return Err(RangeError::WildcardNotExpandable),
            AddrRange::Ipv4([a, b, c, d]) => {
                for a in a.values_upto(OCTET_MAX) {
                    for b in b.values_upto(OCTET_MAX) {
                        for c in c.values_upto(OCTET_MAX) {
                            for d in d.values_upto(OCTET_MAX) {
                                nids.push(Nid::new4(net, a << 24 | b << 16 | c << 8 | d));
                            }
                        }
                    }
                }
            }
            AddrRange::Numeric(list) => {
                nids.extend(list.values_upto(u32::MAX).map(|addr| Nid::new4(net, addr)));
            }
            AddrRange::Ipv4Mask { addr, prefix_len } => {
                let base = u32::from(*addr) & ipv4_mask(*prefix_len);
                // Offsets stay below the mask's size, 2^(32 - len), so they fit in u32.
                let offsets = (0..count).filter_map(|offset| u32::try_from(offset).ok());
                nids.extend(offsets.map(|offset| Nid::new4(net, base | offset)));
            }
            AddrRange::Ipv6Mask { addr, prefix_len } => {
                let base = u128::from(*addr) & ipv6_mask(*prefix_len);
                nids.extend((0..count).map(|offset| Nid::ipv6(net, Ipv6Addr::from(base | offset))));
            }
        }
        Ok(nids)
    }
}

impl ExprList {
    pub fn new(exprs: Vec<RangeExpr>) -> Self {
        Self { exprs }
    }

    pub fn exprs(&self) -> &[RangeExpr] {
        &self.exprs
    }

    /// lustre: nidstrings.c `cfs_expr_list_match()`.
    pub fn matches(&self, value: u32) -> bool {
        self.exprs.iter().any(|expr| expr.contains(value))
    }

    /// Number of values at most `max`, duplicates included. At most 2^40, so no overflow.
    fn count_upto(&self, max: u32) -> u64 {
        self.exprs.iter().map(|expr| expr.count_upto(max)).sum()
    }

    fn values_upto(&self, max: u32) -> impl Iterator<Item = u32> + '_ {
        self.exprs.iter().flat_map(move |expr| expr.values_upto(max))
    }
}

impl RangeExpr {
    /// `None` unless `lo <= hi` and `stride >= 1`. A single value gets stride 1, so equal
    /// sets compare equal whatever stride the text gave.
    pub fn new(lo: u32, hi: u32, stride: u32) -> Option<Self> {
        let stride = if lo == hi { 1 } else { stride };
        (lo <= hi && stride >= 1).then_some(Self { lo, hi, stride })
    }

    /// A single value.
    pub fn single(value: u32) -> Self {
        Self { lo: value, hi: value, stride: 1 }
    }

    pub fn lo(&self) -> u32 {
        self.lo
    }

    pub fn hi(&self) -> u32 {
        self.hi
    }

    pub fn stride(&self) -> u32 {
        self.stride
    }

    pub fn contains(&self, value: u32) -> bool {
        // stride >= 1 by construction, so the remainder is defined.
        (self.lo..=self.hi).contains(&value) && (value - self.lo) % self.stride == 0
    }

    fn count_upto(&self, max: u32) -> u64 {
        if self.lo > max {
            return 0;
        }
        u64::from((self.hi.min(max) - self.lo) / self.stride) + 1
    }

    fn values_upto(&self, max: u32) -> impl Iterator<Item = u32> {
        // A stride beyond usize (16-bit targets) still yields just `lo`.
        let step = usize::try_from(self.stride).unwrap_or(usize::MAX);
        // Empty when `lo > max`, as then `hi.min(max) < lo`.
        (self.lo..=self.hi.min(max)).step_by(step)
    }
}

impl FromStr for NidList {
    type Err = RangeParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse(text)
    }
}

impl FromStr for NidRange {
    type Err = RangeParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse(text)
    }
}

/// Space-separated ranges. lustre: nidstrings.c `cfs_print_nidlist()`.
impl fmt::Display for NidList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, range) in self.ranges.iter().enumerate() {
            if index > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{range}")?;
        }
        Ok(())
    }
}

impl fmt::Display for NidRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.addr, self.net)
    }
}

/// lustre: nidstrings.c `libcfs_ip_addr_range_print()`, `print_nidmask()`. IPv4 masks keep
/// their "/32" (Lustre drops it) so the text parses back to a mask.
impl fmt::Display for AddrRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::All => f.write_str("*"),
            Self::Ipv4([a, b, c, d]) => write!(f, "{a}.{b}.{c}.{d}"),
            Self::Numeric(list) => write!(f, "{list}"),
            Self::Ipv4Mask { addr, prefix_len } => write!(f, "{addr}/{prefix_len}"),
            Self::Ipv6Mask { addr, prefix_len } if *prefix_len >= 128 => write!(f, "{addr}"),
            Self::Ipv6Mask { addr, prefix_len } => write!(f, "{addr}/{prefix_len}"),
        }
    }
}

/// One expression bare, a lone range in brackets, several in one bracketed list.
/// lustre: nidstrings.c `cfs_expr_list_print()`.
impl fmt::Display for ExprList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let [only] = self.exprs.as_slice() {
            if only.lo == only.hi {
                return write!(f, "{}", only.lo);
            }
            return write!(f, "[{only}]");
        }
        f.write_str("[")?;
        for (index, expr) in self.exprs.iter().enumerate() {
            if index > 0 {
                f.write_str(",")?;
            }
            write!(f, "{expr}")?;
        }
        f.write_str("]")
    }
}

/// The bracket-less form. lustre: nidstrings.c `cfs_range_expr_print()`.
impl fmt::Display for RangeExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.lo == self.hi {
            write!(f, "{}", self.lo)
        } else if self.stride == 1 {
            write!(f, "{}-{}", self.lo, self.hi)
        } else {
            write!(f, "{}-{}/{}", self.lo, self.hi, self.stride)
        }
    }
}

/// Returns `count` as a `usize` when it is within `limit`.
fn check_limit(count: u128, limit: usize) -> Result<usize, RangeError> {
    match usize::try_from(count) {
        Ok(count) if count <= limit => Ok(count),
        _ => Err(RangeError::TooManyNids { count, limit }),
    }
}

/// lustre: nidstrings.c `parse_nidrange()` picks a mask when the text has a ':' or a '/' that
/// no ']' follows (a '/' inside brackets is a stride).
fn parse_addr_range(text: &str, lnd: LndType) -> Result<AddrRange, RangeParseError> {
    if text == "*" {
        return Ok(AddrRange::All);
    }
    let stride_slash = |slash: usize| text.get(slash..).is_some_and(|tail| tail.contains(']'));
    let is_mask = text.contains(':') || text.find('/').is_some_and(|slash| !stride_slash(slash));
    if is_mask {
        return parse_mask(text, lnd);
    }
    match lnd.address_kind() {
        AddressKind::Ip => parse_ipv4_range(text),
        // lustre: libcfs_num_parse() serves the numeric LNDs and lo alike.
        AddressKind::Numeric | AddressKind::Loopback => {
            Ok(AddrRange::Numeric(parse_expr_list(text, u32::MAX)?))
        }
    }
}

/// lustre: nidstrings.c `cfs_ip_addr_parse()`.
fn parse_ipv4_range(text: &str) -> Result<AddrRange, RangeParseError> {
    let mut parts = text.split('.');
    let mut octet = || -> Result<ExprList, RangeParseError> {
        let part = parts.next().ok_or(RangeParseError::BadOctetCount)?;
        parse_expr_list(part, OCTET_MAX)
    };
    let octets = [octet()?, octet()?, octet()?, octet()?];
    if parts.next().is_some() {
        return Err(RangeParseError::BadOctetCount);
    }
    Ok(AddrRange::Ipv4(octets))
}

/// lustre: lib/libcfs/nidstrings.c `parse_nidmask()`, `parse_prefix_len()`.
fn parse_mask(text: &str, lnd: LndType) -> Result<AddrRange, RangeParseError> {
    if !accepts_ipv6(lnd) {
        return Err(RangeParseError::NetmaskNotSupported);
    }
    let (addr_text, prefix_text) = match text.split_once('/') {
        Some((addr, prefix)) => (addr, Some(prefix)),
        None => (text, None),
    };
    if addr_text.contains(':') {
        let addr = addr_text.parse::<Ipv6Addr>().map_err(|_| RangeParseError::BadMaskAddress)?;
        let prefix_len = match prefix_text {
            None => 128,
            Some(prefix) => parse_prefix_len(prefix, 128)?,
        };
        return Ok(AddrRange::Ipv6Mask { addr, prefix_len });
    }
    let addr = parse_ipv4(addr_text).map_err(|_| RangeParseError::BadMaskAddress)?;
    // An IPv4 mask must give its length.
    let prefix_len = parse_prefix_len(prefix_text.ok_or(RangeParseError::BadPrefixLength)?, 32)?;
    Ok(AddrRange::Ipv4Mask { addr, prefix_len })
}

/// Decimal 1..=max, as the kernel's `kstrtouint(.., 10)` with the range check.
fn parse_prefix_len(text: &str, max: u8) -> Result<u8, RangeParseError> {
    let value = parse_decimal(text).map_err(|_| RangeParseError::BadPrefixLength)?;
    match u8::try_from(value) {
        Ok(len) if (1..=max).contains(&len) => Ok(len),
        _ => Err(RangeParseError::BadPrefixLength),
    }
}

/// lustre: nidstrings.c `cfs_expr_list_parse()`.
pub(crate) fn parse_expr_list(text: &str, max: u32) -> Result<ExprList, RangeParseError> {
    let Some(inner) = text.strip_prefix('[') else {
        if text.ends_with(']') {
            return Err(RangeParseError::BadBracket);
        }
        return Ok(ExprList { exprs: vec![parse_range_expr(text, max, false)?] });
    };
    let inner = inner.strip_suffix(']').ok_or(RangeParseError::BadBracket)?;
    let mut exprs = Vec::new();
    for entry in inner.split(',') {
        if exprs.len() == MAX_RANGE_EXPRS {
            return Err(RangeParseError::TooManyExprs);
        }
        exprs.push(parse_range_expr(entry, max, true)?);
    }
    Ok(ExprList { exprs })
}

/// lustre: nidstrings.c `cfs_range_expr_parse()`. Outside brackets only a number or `*`.
fn parse_range_expr(text: &str, max: u32, bracketed: bool) -> Result<RangeExpr, RangeParseError> {
    if text.is_empty() {
        return Err(RangeParseError::EmptyExpression);
    }
    if text == "*" {
        return Ok(RangeExpr { lo: 0, hi: max, stride: 1 });
    }
    if text.contains('[') || text.contains(']') {
        return Err(RangeParseError::BadBracket);
    }
    let Some((lo_text, rest)) = text.split_once('-') else {
        return Ok(RangeExpr::single(parse_bound(text, max)?));
    };
    if !bracketed {
        return Err(RangeParseError::RangeOutsideBrackets);
    }
    let (hi_text, stride_text) = match rest.split_once('/') {
        Some((hi, stride)) => (hi, Some(stride)),
        None => (rest, None),
    };
    let lo = parse_bound(lo_text, max)?;
    let hi = parse_bound(hi_text, max)?;
    let stride = stride_text.map_or(Ok(1), |stride| parse_bound(stride, max))?;
    if stride == 0 {
        return Err(RangeParseError::ZeroStride);
    }
    RangeExpr::new(lo, hi, stride).ok_or(RangeParseError::ReversedRange)
}

/// A range bound or stride: auto-radix, at most `max`.
fn parse_bound(text: &str, max: u32) -> Result<u32, RangeParseError> {
    if text.is_empty() {
        return Err(RangeParseError::EmptyExpression);
    }
    match parse_auto_radix(text) {
        Ok(value) if value <= max => Ok(value),
        Ok(_) | Err(NumberError::Overflow) => Err(RangeParseError::NumberOutOfRange),
        Err(NumberError::Invalid) => Err(RangeParseError::BadNumber),
    }
}

fn ipv4_mask(prefix_len: u8) -> u32 {
    u32::MAX.checked_shl(32 - u32::from(prefix_len.min(32))).unwrap_or(0)
}

fn ipv6_mask(prefix_len: u8) -> u128 {
    u128::MAX.checked_shl(128 - u32::from(prefix_len.min(128))).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn tcp(a: u8, b: u8, c: u8, d: u8) -> Nid {
        Nid::ipv4(Net::TCP, Ipv4Addr::new(a, b, c, d))
    }

    fn list(text: &str) -> NidList {
        NidList::parse(text).expect(text)
    }

    fn range(text: &str) -> NidRange {
        NidRange::parse(text).expect(text)
    }

    fn v6(text: &str) -> Ipv6Addr {
        text.parse().expect(text)
    }

    #[test]
    fn wire_md_examples() {
        let subnets = list("192.168.[1-2].*@tcp");
        assert!(subnets.matches(&tcp(192, 168, 1, 0)));
        assert!(subnets.matches(&tcp(192, 168, 2, 255)));
        assert!(!subnets.matches(&tcp(192, 168, 3, 1)));
        assert!(
            !subnets.matches(&Nid::ipv4(Net::new(LndType::SOCK, 1), Ipv4Addr::new(192, 168, 1, 1)))
        );
        assert!(
            !subnets.matches(&Nid::ipv4(Net::new(LndType::O2IB, 0), Ipv4Addr::new(192, 168, 1, 1)))
        );
        let all = subnets.expand(512).expect("512 NIDs");
        assert_eq!(all.len(), 512);
        assert_eq!(all.first(), Some(&tcp(192, 168, 1, 0)));
        assert_eq!(all.last(), Some(&tcp(192, 168, 2, 255)));
        assert_eq!(
            subnets.expand(DEFAULT_EXPANSION_LIMIT),
            Err(RangeError::TooManyNids { count: 512, limit: 128 })
        );

        let ptlf = list("[42-43]@ptlf");
        let ptlf_net = Net::new(LndType::PTL4, 0);
        assert_eq!(
            ptlf.expand(DEFAULT_EXPANSION_LIMIT),
            Ok(vec![Nid::new4(ptlf_net, 42), Nid::new4(ptlf_net, 43)])
        );
        assert!(!ptlf.matches(&Nid::new4(ptlf_net, 44)));

        let strided = list("10.0.0.[1-5/2]@tcp");
        assert_eq!(
            strided.expand(DEFAULT_EXPANSION_LIMIT),
            Ok(vec![tcp(10, 0, 0, 1), tcp(10, 0, 0, 3), tcp(10, 0, 0, 5)])
        );
        assert!(!strided.matches(&tcp(10, 0, 0, 2)));

        let o2ib = list("10.0.0.0/8@o2ib");
        let o2ib_net = Net::new(LndType::O2IB, 0);
        assert!(o2ib.matches(&Nid::ipv4(o2ib_net, Ipv4Addr::new(10, 200, 3, 4))));
        assert!(!o2ib.matches(&Nid::ipv4(o2ib_net, Ipv4Addr::new(11, 0, 0, 1))));
        assert!(!o2ib.matches(&tcp(10, 0, 0, 1)));

        let v6_range = list("2001:db8::/32@tcp");
        assert!(v6_range.matches(&Nid::ipv6(Net::TCP, v6("2001:db8:ffff::1"))));
        assert!(!v6_range.matches(&Nid::ipv6(Net::TCP, v6("2001:db9::1"))));
        assert!(!v6_range.matches(&tcp(32, 1, 13, 184)));

        let any_tcp1 = list("*@tcp1");
        let tcp1 = Net::new(LndType::SOCK, 1);
        assert!(any_tcp1.matches(&Nid::ipv4(tcp1, Ipv4Addr::new(1, 2, 3, 4))));
        assert!(any_tcp1.matches(&Nid::ipv6(tcp1, Ipv6Addr::LOCALHOST)));
        assert!(!any_tcp1.matches(&tcp(1, 2, 3, 4)));
        assert_eq!(
            any_tcp1.expand(DEFAULT_EXPANSION_LIMIT),
            Err(RangeError::WildcardNotExpandable)
        );
    }

    #[test]
    fn lists_numbers_and_printing() {
        let nids = list("  10.0.0.[1,3,5-9/2]@tcp0x10\t[0x10,020]@kfi  0@lo 2001:db8::1@o2ib ");
        assert_eq!(nids.ranges().len(), 4);
        assert_eq!(nids.ranges()[0].net(), Net::new(LndType::SOCK, 16));
        assert_eq!(nids.to_string(), "10.0.0.[1,3,5-9/2]@tcp16 [16,16]@kfi 0@lo 2001:db8::1@o2ib");
        assert!(nids.matches(&Nid::LO_0));
        assert!(nids.matches(&Nid::new4(Net::new(LndType::KFI, 0), 16)));
        assert!(nids.matches(&Nid::ipv6(Net::new(LndType::O2IB, 0), v6("2001:db8::1"))));
        assert!(!nids.matches(&Nid::ipv6(Net::new(LndType::O2IB, 0), v6("2001:db8::2"))));
        assert!(!nids.matches(&Nid::ANY));
        // Duplicates are kept, as Lustre keeps them.
        assert_eq!(nids.expand(DEFAULT_EXPANSION_LIMIT).map(|n| n.len()), Ok(5 + 2 + 1 + 1));

        assert_eq!(range("*.*.*.1@gip").to_string(), "[0-255].[0-255].[0-255].1@gip");
        assert_eq!(range("10.0.0.1/32@efa").to_string(), "10.0.0.1/32@efa");
        assert_eq!(range("1.2.3.4@tcp").expand(1), Ok(vec![tcp(1, 2, 3, 4)]));
        assert_eq!(range("10.1.2.3/30@tcp").expand(4).map(|n| n[3]), Ok(tcp(10, 1, 2, 3)));
        let small_v6 = range("2001:db8::/127@tcp").expand(2);
        assert_eq!(small_v6.map(|n| n[1].to_string()), Ok("2001:db8::1@tcp".into()));
        assert_eq!(
            range("::/1@tcp").expand(usize::MAX),
            Err(RangeError::TooManyNids { count: 1 << 127, limit: usize::MAX })
        );
        // A dotted range only matches 4-byte addresses.
        assert!(!range("0.0.0.0@tcp").matches(&Nid::ipv6(Net::TCP, Ipv6Addr::UNSPECIFIED)));
    }

    #[test]
    fn parse_errors() {
        use RangeParseError as E;
        let cases: &[(&str, RangeParseError)] = &[
            ("", E::Empty),
            (" \t ", E::Empty),
            ("10.0.0.1", E::MissingAt),
            ("10.0.0.1@tcp@tcp", E::ExtraAt),
            ("10.0.0.1@", E::Net(NetParseError::Empty)),
            ("10.0.0.1@elan", E::Net(NetParseError::UnknownLnd)),
            ("0@lo1", E::Net(NetParseError::LoWithNumber)),
            ("10.0.0.1@tcpx", E::Net(NetParseError::BadNumber)),
            ("10.0.0.1@tcp0x10000", E::Net(NetParseError::NumberOutOfRange)),
            ("@tcp", E::EmptyAddressRange),
            ("10.0.0@tcp", E::BadOctetCount),
            ("10.0.0.1.2@tcp", E::BadOctetCount),
            ("10..0.1@tcp", E::EmptyExpression),
            ("10.0.0.[]@tcp", E::EmptyExpression),
            ("10.0.0.[1,]@tcp", E::EmptyExpression),
            ("10.0.0.[1-]@tcp", E::EmptyExpression),
            ("10.0.0.x@tcp", E::BadNumber),
            ("10.0.0.09@tcp", E::BadNumber),
            ("10.0.0.256@tcp", E::NumberOutOfRange),
            ("10.0.0.[1-300]@tcp", E::NumberOutOfRange),
            ("[1-4294967296]@gni", E::NumberOutOfRange),
            ("10.0.0.[5-1]@tcp", E::ReversedRange),
            ("10.0.0.[1-5/0]@tcp", E::ZeroStride),
            ("10.0.0.1-5@tcp", E::RangeOutsideBrackets),
            ("1-5@gni", E::RangeOutsideBrackets),
            ("10.0.0.[1-5@tcp", E::BadBracket),
            ("10.0.0.1]@tcp", E::BadBracket),
            ("[[1]]@gni", E::BadBracket),
            ("10.0.0.0/8@gip", E::NetmaskNotSupported),
            ("::1@ptlf", E::NetmaskNotSupported),
            ("0/8@gni", E::NetmaskNotSupported),
            ("10.0.0/8@tcp", E::BadMaskAddress),
            ("2001:zz::/32@tcp", E::BadMaskAddress),
            ("10.0.0.0/@tcp", E::BadPrefixLength),
            ("10.0.0.0/0@tcp", E::BadPrefixLength),
            ("10.0.0.0/33@tcp", E::BadPrefixLength),
            ("::/129@tcp", E::BadPrefixLength),
            ("10.0.0.0/x@tcp", E::BadPrefixLength),
        ];
        for (text, error) in cases {
            assert_eq!(NidList::parse(text), Err(*error), "{text:?}");
        }
    }

    /// Regression (fuzz target nid_text): `expand` grew its result by extension, allocating
    /// room for 4 NIDs when the limit was 1.
    #[test]
    fn expand_allocates_within_the_limit() {
        let one = list("0x0000000000000000000000000001@gni");
        let nids = one.expand(1).unwrap();
        assert_eq!(nids.len(), 1);
        assert_eq!(nids.capacity(), 1);
        let nids = list("1.2.3.4@tcp 1.2.3.[5-6]@tcp").expand(3).unwrap();
        assert_eq!(nids.capacity(), 3);
    }

    #[test]
    fn parse_bounds() {
        let many = "1.2.3.4@tcp ".repeat(MAX_NIDRANGES);
        assert_eq!(list(&many).ranges().len(), MAX_NIDRANGES);
        let too_many = format!("{many} 1.2.3.4@tcp");
        assert_eq!(NidList::parse(&too_many), Err(RangeParseError::TooManyRanges));

        let entries = vec!["1"; MAX_RANGE_EXPRS].join(",");
        assert!(NidRange::parse(&format!("[{entries}]@gni")).is_ok());
        let over = format!("[{entries},1]@gni");
        assert_eq!(NidRange::parse(&over), Err(RangeParseError::TooManyExprs));
    }

    /// Builds a small IPv4 range expression and its text.
    fn octet_list() -> impl Strategy<Value = ExprList> {
        let expr = (0u32..=255, 0u32..6, 1u32..4).prop_map(|(lo, len, stride)| {
            RangeExpr::new(lo, (lo + len).min(255), stride).unwrap_or(RangeExpr::single(lo))
        });
        prop::collection::vec(expr, 1..3).prop_map(ExprList::new)
    }

    fn ipv4_range() -> impl Strategy<Value = NidRange> {
        [octet_list(), octet_list(), octet_list(), octet_list()]
            .prop_map(|octets| NidRange::new(Net::TCP, AddrRange::Ipv4(octets)))
    }

    fn numeric_range() -> impl Strategy<Value = NidRange> {
        let expr = (any::<u32>(), 0u32..40, 1u32..9).prop_map(|(lo, len, stride)| {
            RangeExpr::new(lo, lo.saturating_add(len), stride).unwrap_or(RangeExpr::single(lo))
        });
        prop::collection::vec(expr, 1..4).prop_map(|exprs| {
            NidRange::new(Net::new(LndType::GNI, 3), AddrRange::Numeric(ExprList::new(exprs)))
        })
    }

    proptest! {
        #[test]
        fn every_expanded_nid_matches(nid_range in prop_oneof![ipv4_range(), numeric_range()]) {
            // Through the text form, which also checks that printing parses back.
            let reparsed = range(&nid_range.to_string());
            prop_assert_eq!(&reparsed, &nid_range);
            match reparsed.expand(4096) {
                Ok(nids) => {
                    prop_assert_eq!(Some(nids.len() as u128), reparsed.count());
                    for nid in &nids {
                        prop_assert!(reparsed.matches(nid), "{} not in {}", nid, reparsed);
                    }
                }
                Err(RangeError::TooManyNids { count, limit }) => {
                    prop_assert!(count > limit as u128);
                }
                Err(error) => prop_assert!(false, "unexpected {error:?}"),
            }
        }

        #[test]
        fn ipv4_mask_matches_exactly_its_addresses(base in any::<u32>(), prefix_len in 1u8..=32, probe in any::<u32>(), host in any::<u32>()) {
            let mask_range = range(&format!("{}/{prefix_len}@tcp", Ipv4Addr::from(base)));
            let mask = u32::MAX << (32 - u32::from(prefix_len));
            let inside = (base & mask) | (host & !mask);
            prop_assert!(mask_range.matches(&Nid::new4(Net::TCP, inside)));
            let expected = (probe & mask) == (base & mask);
            prop_assert_eq!(mask_range.matches(&Nid::new4(Net::TCP, probe)), expected);
        }

        #[test]
        fn small_ipv4_mask_expands_to_exactly_its_addresses(base in any::<u32>(), prefix_len in 24u8..=32, probe in any::<u8>()) {
            let mask_range = range(&format!("{}/{prefix_len}@o2ib", Ipv4Addr::from(base)));
            let nids = mask_range.expand(256).expect("at most 256 NIDs");
            prop_assert_eq!(nids.len(), 1usize << (32 - prefix_len));
            let probe = Nid::new4(Net::new(LndType::O2IB, 0), (base & !0xff) | u32::from(probe));
            prop_assert_eq!(nids.contains(&probe), mask_range.matches(&probe));
        }

        #[test]
        fn ipv6_mask_matches_exactly_its_addresses(base in any::<u128>(), prefix_len in 1u8..=128, probe in any::<u128>(), host in any::<u128>()) {
            let mask_range = range(&format!("{}/{prefix_len}@efa", Ipv6Addr::from(base)));
            let net = Net::new(LndType::EFA, 0);
            let mask = u128::MAX << (128 - u32::from(prefix_len));
            let inside = (base & mask) | (host & !mask);
            prop_assert!(mask_range.matches(&Nid::ipv6(net, Ipv6Addr::from(inside))));
            let expected = (probe & mask) == (base & mask);
            prop_assert_eq!(mask_range.matches(&Nid::ipv6(net, Ipv6Addr::from(probe))), expected);
        }

        #[test]
        fn parse_never_panics(text in any::<String>()) {
            let _ = NidList::parse(&text);
        }

        #[test]
        fn parse_never_panics_on_range_like_text(text in "[0-9*\\[\\],/.:x@ -]{0,30}(tcp|gni|lo|o2ib)?[0-9x]{0,3}") {
            if let Ok(parsed) = NidList::parse(&text) {
                prop_assert_eq!(NidList::parse(&parsed.to_string()), Ok(parsed.clone()));
                let _ = parsed.expand(64);
            }
        }
    }
}
