//! Network identifiers: LND types, nets, and NIDs in their classic 64-bit and 20-byte large forms.
//!
//! One [`Nid`] type holds both forms, as Lustre's `struct lnet_nid` does since 2.15: a NID whose
//! address is 4 bytes long is "nid4-compatible" and converts losslessly to the 64-bit
//! `lnet_nid_t`; an IPv6 NID has a 16-byte address and no 64-bit form.
//!
//! lustre: include/uapi/linux/lnet/lnet-types.h (`lnet_nid_t`, `struct lnet_nid`, `nid_same`,
//! `lnet_nid_to_nid4`, `lnet_nid4_to_nid`), include/uapi/linux/lnet/nidstr.h (LND numbers).

use std::cmp::Ordering;
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

/// An LND (network driver) type number, the `nid_type` of a NID.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LndType(pub u8);

impl LndType {
    pub const QSW: Self = Self(1);
    pub const SOCK: Self = Self(2);
    pub const GM: Self = Self(3);
    pub const PTL: Self = Self(4);
    pub const O2IB: Self = Self(5);
    pub const CIB: Self = Self(6);
    pub const OPENIB: Self = Self(7);
    pub const IIB: Self = Self(8);
    pub const LO: Self = Self(9);
    pub const RA: Self = Self(10);
    pub const VIB: Self = Self(11);
    pub const MX: Self = Self(12);
    pub const GNI: Self = Self(13);
    pub const GNIIP: Self = Self(14);
    pub const PTL4: Self = Self(15);
    pub const KFI: Self = Self(16);
    pub const TOFU: Self = Self(17);
    pub const EFA: Self = Self(18);
    pub const BXI3: Self = Self(19);
    /// The wildcard type of `LNET_ANY_NID`.
    pub const ANY: Self = Self(0xff);

    /// How addresses of this LND are written and stored.
    pub fn address_kind(self) -> AddressKind {
        match self {
            Self::SOCK | Self::O2IB | Self::GNIIP | Self::EFA => AddressKind::Ip,
            Self::LO => AddressKind::Loopback,
            _ => AddressKind::Numeric,
        }
    }
}

impl fmt::Debug for LndType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LndType({})", self.0)
    }
}

/// The address syntax an LND uses (lustre: lnet/lnet/nidstrings.c `libcfs_netstrfns[]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddressKind {
    /// IPv4 dotted quad (or IPv6 in the large form): tcp, o2ib, gip, efa.
    Ip,
    /// A 32-bit number: gni, ptlf, kfi, bxi3f and unknown LNDs.
    Numeric,
    /// Always 0: lo.
    Loopback,
}

/// A network: LND type plus network number (`__u32 net` = `type << 16 | num`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Net {
    pub lnd: LndType,
    pub number: u16,
}

impl Net {
    /// `LNET_NET_ANY`.
    pub const ANY: Self = Self { lnd: LndType::ANY, number: 0xffff };
    /// The loopback net `lo`.
    pub const LO: Self = Self { lnd: LndType::LO, number: 0 };
    /// `tcp`, the net a NID without `@net` belongs to.
    pub const TCP: Self = Self { lnd: LndType::SOCK, number: 0 };

    pub const fn new(lnd: LndType, number: u16) -> Self {
        Self { lnd, number }
    }

    /// The packed 32-bit form. `LNET_NET_ANY` is 0xFFFFFFFF, not `0xFF << 16 | 0xFFFF`.
    pub fn to_u32(self) -> u32 {
        if self == Self::ANY {
            return u32::MAX;
        }
        (u32::from(self.lnd.0) << 16) | u32::from(self.number)
    }

    /// Unpacks a 32-bit net; bits above the type byte are ignored as `LNET_NETTYP` does.
    pub fn from_u32(net: u32) -> Self {
        if net == u32::MAX {
            return Self::ANY;
        }
        Self { lnd: LndType((net >> 16) as u8), number: net as u16 }
    }
}

impl fmt::Debug for Net {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Net({self})")
    }
}

/// Length of the large NID wire form, `sizeof(struct lnet_nid)`.
pub const LARGE_NID_LEN: usize = 20;

/// A node's network identifier, in the large form Lustre uses internally.
///
/// Invariant: `addr` bytes past [`Nid::addr_len`] are zero, so derived equality is
/// Lustre's `nid_same` for every value built through this API.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Nid {
    /// `nid_size`: address bytes minus 4 (0 for IPv4 and numeric, 12 for IPv6, 0xFF for ANY).
    size: u8,
    net: Net,
    /// Address in network byte order; only the first `size + 4` bytes are meaningful.
    addr: [u8; 16],
}

/// Why 20 bytes are not a valid `struct lnet_nid`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LargeNidError {
    /// `nid_size` would make the address longer than 16 bytes.
    #[error("large NID claims {0} address bytes, at most 16 fit")]
    SizeTooLarge(u8),
    /// The buffer is shorter than 20 bytes.
    #[error("large NID needs {LARGE_NID_LEN} bytes, got {0}")]
    Truncated(usize),
    /// Non-zero bytes past the `nid_size + 4` address bytes: the kernel compares all 16
    /// address bytes (`nid_same`), so such a NID names no NI and no peer.
    #[error("large NID has non-zero bytes past its {0} address bytes")]
    JunkPastAddress(u8),
}

impl Nid {
    /// `LNET_ANY_NID` (nid4: `LNET_NID_ANY` = all ones), printed `<?>`.
    pub const ANY: Self = Self { size: 0xff, net: Net::ANY, addr: [0xff; 16] };
    /// `0@lo`, `LNET_NID_LO_0`.
    pub const LO_0: Self = Self { size: 0, net: Net::LO, addr: [0; 16] };

    /// A NID with a 4-byte address given as the host-order integer of `lnet_nid_t`.
    /// A wildcard net (type 0xFF) gives [`Nid::ANY`]: the kernel tests only the type byte
    /// (`LNET_NID_IS_ANY`), so no other field may make two wildcards differ.
    pub fn new4(net: Net, addr: u32) -> Self {
        if net.lnd == LndType::ANY {
            return Self::ANY;
        }
        let mut bytes = [0u8; 16];
        bytes[..4].copy_from_slice(&addr.to_be_bytes());
        Self { size: 0, net, addr: bytes }
    }

    pub fn ipv4(net: Net, ip: Ipv4Addr) -> Self {
        Self::new4(net, u32::from(ip))
    }

    /// An IPv6 NID (`nid_size` 12). It has no nid4 form.
    pub fn ipv6(net: Net, ip: Ipv6Addr) -> Self {
        if net.lnd == LndType::ANY {
            return Self::ANY;
        }
        Self { size: 12, net, addr: ip.octets() }
    }

    /// Converts a classic 64-bit NID. lustre: lnet-types.h `lnet_nid4_to_nid()`.
    pub fn from_nid4(nid4: u64) -> Self {
        if nid4 == u64::MAX {
            return Self::ANY;
        }
        let net = Net::from_u32((nid4 >> 32) as u32);
        Self::new4(net, nid4 as u32)
    }

    /// The classic 64-bit form, or `None` when the address does not fit in 4 bytes.
    pub fn to_nid4(&self) -> Option<u64> {
        if self.is_any() {
            return Some(u64::MAX);
        }
        if self.size != 0 {
            return None;
        }
        Some((u64::from(self.net.to_u32()) << 32) | u64::from(self.addr4()))
    }

    /// The nid4 form with silent truncation of large addresses, as `lnet_nid_to_nid4()` does
    /// (keeps type, number and the first address word). Used where the wire only has 64 bits.
    pub fn to_nid4_lossy(&self) -> u64 {
        if self.is_any() {
            return u64::MAX;
        }
        (u64::from(self.net.to_u32()) << 32) | u64::from(self.addr4())
    }

    /// Decodes the 20-byte `struct lnet_nid`. Bytes past the address are ignored (and zeroed in
    /// the result); `nid_type` 0xFF is ANY whatever the other fields say. Lenient: for ping
    /// buffers and message headers, where such a NID is at worst one that matches nothing.
    /// Where the NID identifies a connection, use [`from_large_bytes_exact`](Self::from_large_bytes_exact).
    pub fn from_large_bytes(bytes: &[u8]) -> Result<Self, LargeNidError> {
        let Some(&[size, lnd, net_hi, net_lo, ref address @ ..]) =
            bytes.first_chunk::<LARGE_NID_LEN>()
        else {
            return Err(LargeNidError::Truncated(bytes.len()));
        };
        if lnd == 0xff {
            return Ok(Self::ANY);
        }
        if size > 12 {
            return Err(LargeNidError::SizeTooLarge(size.saturating_add(4)));
        }
        let net = Net::new(LndType(lnd), u16::from_be_bytes([net_hi, net_lo]));
        // Keep the `size + 4` meaningful bytes (at most all 16); the rest stay zero.
        let mut addr = [0u8; 16];
        let len = usize::from(size) + 4;
        for (to, from) in addr.iter_mut().zip(address).take(len) {
            *to = *from;
        }
        Ok(Self { size, net, addr })
    }

    /// [`from_large_bytes`](Self::from_large_bytes), refusing non-zero bytes past the address
    /// ([`LargeNidError::JunkPastAddress`]). The kernel's `nid_same` compares all 16 address
    /// bytes, so a connection request whose NID carries junk there matches no NI and is
    /// refused; we cannot keep the junk (our NIDs are normalised), so we refuse it too.
    /// lustre: lnet/lnet/acceptor.c `lnet_accept()`, include/uapi/linux/lnet/lnet-types.h
    /// `nid_same()`.
    pub fn from_large_bytes_exact(bytes: &[u8]) -> Result<Self, LargeNidError> {
        let nid = Self::from_large_bytes(bytes)?;
        if nid.is_any() {
            return Ok(nid);
        }
        // nid_size, nid_type and nid_num (4 bytes), then `nid_size + 4` address bytes.
        let used = 4 + usize::from(nid.size) + 4;
        if bytes.get(used..LARGE_NID_LEN).is_some_and(|rest| rest.iter().any(|byte| *byte != 0)) {
            return Err(LargeNidError::JunkPastAddress(nid.size.saturating_add(4)));
        }
        Ok(nid)
    }

    /// Encodes the 20-byte `struct lnet_nid` (unused address bytes zero).
    pub fn to_large_bytes(&self) -> [u8; LARGE_NID_LEN] {
        let mut out = [0u8; LARGE_NID_LEN];
        out[0] = self.size;
        out[1] = self.net.lnd.0;
        out[2..4].copy_from_slice(&self.net.number.to_be_bytes());
        out[4..].copy_from_slice(&self.addr);
        out
    }

    pub fn is_any(&self) -> bool {
        self.net.lnd == LndType::ANY
    }

    /// True when the NID has a lossless 64-bit form.
    pub fn is_nid4(&self) -> bool {
        self.size == 0 || self.is_any()
    }

    pub fn net(&self) -> Net {
        self.net
    }

    pub fn lnd(&self) -> LndType {
        self.net.lnd
    }

    /// `nid_size`.
    pub fn size(&self) -> u8 {
        self.size
    }

    /// `NID_ADDR_BYTES`: 4 or 16 (20 for ANY, whose size field is 0xFF).
    pub fn addr_len(&self) -> usize {
        if self.is_any() { 16 } else { usize::from(self.size) + 4 }
    }

    /// `NID_BYTES`: the bytes of `struct lnet_nid` that carry meaning.
    pub fn wire_len(&self) -> usize {
        self.addr_len() + 4
    }

    /// The meaningful address bytes, network order.
    pub fn addr_bytes(&self) -> &[u8] {
        // `addr_len()` is at most 16 by construction (size <= 12 is checked on every path).
        self.addr.get(..self.addr_len()).unwrap_or(&self.addr)
    }

    /// The first address word as a host-order integer (`nid_addr[0]`, the nid4 address).
    pub fn addr4(&self) -> u32 {
        u32::from_be_bytes([self.addr[0], self.addr[1], self.addr[2], self.addr[3]])
    }

    /// The IP address, for NIDs of IP LNDs.
    pub fn ip(&self) -> Option<std::net::IpAddr> {
        if self.lnd().address_kind() != AddressKind::Ip {
            return None;
        }
        match self.size {
            0 => Some(Ipv4Addr::from(self.addr4()).into()),
            12 => Some(Ipv6Addr::from(self.addr).into()),
            _ => None,
        }
    }

    /// The same address on another net (`lnet_nid` with a replaced net).
    pub fn with_net(mut self, net: Net) -> Self {
        self.net = net;
        self
    }

    /// Byte-wise comparison of the 20-byte wire forms, as the socklnd connection race rule
    /// uses it. lustre: socklnd.c `ksocknal_create_conn()` (`memcmp(&peerid.nid, &ni_nid)`).
    pub fn cmp_wire(&self, other: &Self) -> Ordering {
        self.to_large_bytes().cmp(&other.to_large_bytes())
    }
}

impl fmt::Debug for Nid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Nid({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nid4_vectors_from_wire_md() {
        // docs/protocol/wire.md §5.4 table.
        let tcp = Nid::ipv4(Net::TCP, Ipv4Addr::new(192, 168, 1, 2));
        assert_eq!(tcp.to_nid4(), Some(0x0002_0000_C0A8_0102));
        assert_eq!(tcp.to_nid4().map(u64::to_le_bytes), Some([2, 1, 0xa8, 0xc0, 0, 0, 2, 0]));
        let mut large = [0u8; 20];
        large[..8].copy_from_slice(&[0, 2, 0, 0, 0xc0, 0xa8, 1, 2]);
        assert_eq!(tcp.to_large_bytes(), large);
        assert_eq!(Nid::from_large_bytes(&large), Ok(tcp));

        let o2ib3 = Nid::ipv4(Net::new(LndType::O2IB, 3), Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(o2ib3.to_nid4(), Some(0x0005_0003_0A00_0001));
        assert_eq!(Nid::LO_0.to_nid4(), Some(0x0009_0000_0000_0000));
        let ptlf2 = Nid::new4(Net::new(LndType::PTL4, 2), 42);
        assert_eq!(ptlf2.to_nid4(), Some(0x000F_0002_0000_002A));
    }

    #[test]
    fn ipv6_large_form() {
        let ip: Ipv6Addr = "2001:db8::1".parse().unwrap();
        let nid = Nid::ipv6(Net::TCP, ip);
        let expected =
            [0x0c, 0x02, 0, 0, 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        assert_eq!(nid.to_large_bytes(), expected);
        assert_eq!(Nid::from_large_bytes(&expected), Ok(nid));
        assert_eq!(nid.to_nid4(), None);
        assert!(!nid.is_nid4());
    }

    #[test]
    fn any_round_trips_both_forms() {
        assert_eq!(Nid::from_nid4(u64::MAX), Nid::ANY);
        assert_eq!(Nid::ANY.to_nid4(), Some(u64::MAX));
        assert_eq!(Nid::ANY.to_large_bytes(), [0xff; 20]);
        // nid_type 0xFF is ANY whatever the other fields hold.
        let mut odd = [0u8; 20];
        odd[1] = 0xff;
        assert_eq!(Nid::from_large_bytes(&odd), Ok(Nid::ANY));
        // Any nid4 whose type byte is 0xFF is the wildcard too.
        assert_eq!(Nid::from_nid4(0x00ff_0000_0a00_0001), Nid::ANY);
    }

    #[test]
    fn bad_large_nids_are_rejected() {
        assert_eq!(Nid::from_large_bytes(&[0; 19]), Err(LargeNidError::Truncated(19)));
        let mut big = [0u8; 20];
        big[0] = 13;
        assert_eq!(Nid::from_large_bytes(&big), Err(LargeNidError::SizeTooLarge(17)));
    }

    #[test]
    fn readers_ignore_bytes_past_the_address() {
        let mut bytes = [0u8; 20];
        bytes[..8].copy_from_slice(&[0, 2, 0, 0, 10, 0, 0, 1]);
        bytes[12] = 0xaa;
        let nid = Nid::from_large_bytes(&bytes).unwrap();
        assert_eq!(nid, Nid::ipv4(Net::TCP, Ipv4Addr::new(10, 0, 0, 1)));
    }

    #[test]
    fn the_exact_decoder_refuses_bytes_past_the_address() {
        // 10.0.0.1@tcp with 0xaa in the first unused byte (offset 8) and in the last (19).
        for junk_at in [8, 19] {
            let mut bytes = [0u8; 20];
            bytes[..8].copy_from_slice(&[0, 2, 0, 0, 10, 0, 0, 1]);
            bytes[junk_at] = 0xaa;
            assert_eq!(Nid::from_large_bytes_exact(&bytes), Err(LargeNidError::JunkPastAddress(4)));
            bytes[junk_at] = 0;
            let clean = Nid::ipv4(Net::TCP, Ipv4Addr::new(10, 0, 0, 1));
            assert_eq!(Nid::from_large_bytes_exact(&bytes), Ok(clean));
        }
        // IPv6 uses all 16 address bytes: nothing is past them.
        let ipv6 = Nid::ipv6(Net::TCP, "2001:db8::1".parse().unwrap());
        assert_eq!(Nid::from_large_bytes_exact(&ipv6.to_large_bytes()), Ok(ipv6));
        // An 8-byte address (nid_size 4): byte 11 is its last, byte 12 the first unused.
        let mut eight = [0u8; 20];
        eight[..12].copy_from_slice(&[4, 2, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]);
        assert!(Nid::from_large_bytes_exact(&eight).is_ok());
        eight[12] = 1;
        assert_eq!(Nid::from_large_bytes_exact(&eight), Err(LargeNidError::JunkPastAddress(8)));
        // ANY stays ANY; short buffers are still Truncated.
        assert_eq!(Nid::from_large_bytes_exact(&[0xff; 20]), Ok(Nid::ANY));
        assert_eq!(Nid::from_large_bytes_exact(&[0; 12]), Err(LargeNidError::Truncated(12)));
    }
}
