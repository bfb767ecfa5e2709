//! The acceptor connection request: the first bytes on every socklnd TCP connection, naming the
//! NID the connector wants to reach on the listening node.
//!
//! lustre: lnet/lnet/acceptor.c (`lnet_connect()` sends it, `lnet_accept()` reads it),
//! include/uapi/linux/lnet/lnet-idl.h (`struct lnet_acceptor_connreq`, `_v2`, the magics).

use crate::addr::{LargeNidError, Nid};

use super::cursor::{ByteOrder, Reader, Writer};

/// Magic of an acceptor connreq.
pub const LNET_PROTO_ACCEPTOR_MAGIC: u32 = 0xacce_7100;
/// Magic of socklnd hellos V2+ and of the "unified protocol" probe ("Eric").
pub const LNET_PROTO_MAGIC: u32 = 0x4572_6963;
/// Magic of the socklnd V1 hello (an old socknal that skips the connreq sends it first).
pub const LNET_PROTO_TCP_MAGIC: u32 = 0xeebc_0ded;
/// Magic of the ping buffer ("ping").
pub const LNET_PROTO_PING_MAGIC: u32 = 0x7069_6e67;
/// Magic of o2iblnd messages.
pub const LNET_PROTO_IB_MAGIC: u32 = 0x0be9_1b91;
/// Magic of gnilnd messages.
pub const LNET_PROTO_GNI_MAGIC: u32 = 0xb00f_babe;
/// Magic of kfilnd messages.
pub const LNET_PROTO_KFI_MAGIC: u32 = 0xdead_beef;
/// Magic of efalnd messages.
pub const LNET_PROTO_EFA_MAGIC: u32 = 0x2be0_92be;
/// Magic of lnet_selftest RPC messages (lustre: lnet/selftest/rpc.h).
pub const SRPC_MSG_MAGIC: u32 = 0xeeb0_f00d;

/// Connreq version carrying a 64-bit NID.
pub const LNET_PROTO_ACCEPTOR_VERSION: u32 = 1;
/// Connreq version carrying a 20-byte `struct lnet_nid` (Lustre 2.15+).
pub const LNET_PROTO_ACCEPTOR_VERSION_16: u32 = 2;

/// The acceptor's whole answer to a probe it does not understand: a v1 connreq with NID 0,
/// telling the peer "I am old", sent right before closing. (docs/protocol/wire.md §10.3)
pub const DOWNGRADE_ANSWER: [u8; ConnReq::V1_LEN] = downgrade_answer();

/// The two connreq layouts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConnReqVersion {
    /// `struct lnet_acceptor_connreq`, 16 bytes, nid4 target.
    V1,
    /// `struct lnet_acceptor_connreq_v2`, 28 bytes, large-NID target.
    V2,
}

impl ConnReqVersion {
    /// The version a kernel connector uses for `target`: v1 iff the address is 4 bytes.
    /// lustre: acceptor.c `lnet_connect()` (`nid_is_nid4()`).
    pub fn for_target(target: &Nid) -> Self {
        if target.size() == 0 { Self::V1 } else { Self::V2 }
    }

    /// The `acr_version` value.
    pub const fn number(self) -> u32 {
        match self {
            Self::V1 => LNET_PROTO_ACCEPTOR_VERSION,
            Self::V2 => LNET_PROTO_ACCEPTOR_VERSION_16,
        }
    }

    /// Bytes of the whole request.
    pub const fn wire_len(self) -> usize {
        match self {
            Self::V1 => ConnReq::V1_LEN,
            Self::V2 => ConnReq::V2_LEN,
        }
    }
}

/// A connection request: "connect me to `target`", which must be exactly one of the
/// listener's NIDs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConnReq {
    pub version: ConnReqVersion,
    pub target: Nid,
}

/// What the acceptor does with the bytes read so far. lustre: acceptor.c `lnet_accept()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnReqParse {
    /// No decision yet: read at least this many more bytes.
    NeedMore(usize),
    /// A complete request of `len` bytes; the socket now carries the socklnd hello.
    Request { request: ConnReq, byte_order: ByteOrder, len: usize },
    /// Write [`DOWNGRADE_ANSWER`] and close.
    Downgrade(DowngradeReason),
}

/// Why the acceptor answers with [`DOWNGRADE_ANSWER`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DowngradeReason {
    /// The magic was `LNET_PROTO_MAGIC` (either order): a "unified protocol" version query.
    UnifiedProtocolProbe,
    /// The connreq magic was right but the version (after any swap) is unknown.
    UnknownVersion(u32),
}

/// A connection the acceptor closes without writing anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AcceptorError {
    /// `LNET_PROTO_TCP_MAGIC` (either order): an old socknal/tcpnal that skipped the connreq.
    #[error("refusing connection with magic {0:#010x}: 'old' socknal/tcpnal acceptor protocol")]
    OldSocknalMagic(u32),
    /// Any other magic.
    #[error("refusing connection with magic {0:#010x}: unrecognised acceptor protocol")]
    UnknownMagic(u32),
    /// A v2 request whose `struct lnet_nid` cannot name any NI (the kernel finds no match).
    #[error("connection request names an invalid large NID: {0}")]
    BadTargetNid(LargeNidError),
}

/// Why a connreq cannot be written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConnReqEmitError {
    #[error("connreq needs {needed} bytes, buffer has {got}")]
    BufferTooSmall { needed: usize, got: usize },
    /// A v1 request can only carry a NID with a 64-bit form.
    #[error("target NID has no 64-bit form for a v1 connreq")]
    TargetNotNid4,
}

impl ConnReq {
    pub const V1_LEN: usize = 16;
    pub const V2_LEN: usize = 28;
    /// Magic plus version: what the acceptor needs before it knows the layout.
    pub const PREFIX_LEN: usize = 8;

    /// The request a kernel connector sends for `target` (v1 iff nid4-compatible).
    pub fn new(target: Nid) -> Self {
        Self { version: ConnReqVersion::for_target(&target), target }
    }

    pub fn buffer_len(&self) -> usize {
        self.version.wire_len()
    }

    /// Writes the request little-endian; returns the bytes written.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, ConnReqEmitError> {
        let needed = self.buffer_len();
        let Some(buf) = buf.get_mut(..needed) else {
            return Err(ConnReqEmitError::BufferTooSmall { needed, got: buf.len() });
        };
        let mut writer = Writer::new(buf, ByteOrder::LittleEndian);
        writer.u32(LNET_PROTO_ACCEPTOR_MAGIC);
        writer.u32(self.version.number());
        match self.version {
            ConnReqVersion::V1 => {
                let nid4 = self.target.to_nid4().ok_or(ConnReqEmitError::TargetNotNid4)?;
                writer.u64(nid4);
            }
            ConnReqVersion::V2 => writer.bytes(&self.target.to_large_bytes()),
        }
        Ok(needed)
    }

    /// Decides, from the bytes read so far, what the acceptor does next, in the kernel's
    /// order: magic, then version, then the NID. The decision for a prefix never changes as
    /// more bytes arrive, so callers may call this again with a longer buffer.
    /// lustre: acceptor.c `lnet_accept()`.
    pub fn parse(buf: &[u8]) -> Result<ConnReqParse, AcceptorError> {
        let mut reader = Reader::new(buf, ByteOrder::LittleEndian);
        let Some(magic) = reader.u32() else {
            return Ok(need_more(4, buf));
        };
        let byte_order = match magic {
            LNET_PROTO_ACCEPTOR_MAGIC => ByteOrder::LittleEndian,
            m if m == LNET_PROTO_ACCEPTOR_MAGIC.swap_bytes() => ByteOrder::BigEndian,
            m if is_magic(m, LNET_PROTO_MAGIC) => {
                return Ok(ConnReqParse::Downgrade(DowngradeReason::UnifiedProtocolProbe));
            }
            m if is_magic(m, LNET_PROTO_TCP_MAGIC) => {
                return Err(AcceptorError::OldSocknalMagic(m));
            }
            m => return Err(AcceptorError::UnknownMagic(m)),
        };

        let mut reader = Reader::at(buf, 4, byte_order);
        let Some(version) = reader.u32() else {
            return Ok(need_more(Self::PREFIX_LEN, buf));
        };
        let request = match version {
            LNET_PROTO_ACCEPTOR_VERSION => {
                // The v1 NID is swapped with the rest.
                let Some(nid4) = reader.u64() else {
                    return Ok(need_more(Self::V1_LEN, buf));
                };
                ConnReq { version: ConnReqVersion::V1, target: Nid::from_nid4(nid4) }
            }
            LNET_PROTO_ACCEPTOR_VERSION_16 => {
                // `struct lnet_nid` has a fixed byte layout and is never swapped.
                let Some(bytes) = reader.array::<20>() else {
                    return Ok(need_more(Self::V2_LEN, buf));
                };
                // Exact, as the kernel's nid_same() match: junk past the address is refused.
                let target =
                    Nid::from_large_bytes_exact(&bytes).map_err(AcceptorError::BadTargetNid)?;
                ConnReq { version: ConnReqVersion::V2, target }
            }
            other => {
                return Ok(ConnReqParse::Downgrade(DowngradeReason::UnknownVersion(other)));
            }
        };
        Ok(ConnReqParse::Request { request, byte_order, len: reader.position() })
    }
}

/// The 16-byte answer to an unknown version or a `LNET_PROTO_MAGIC` probe:
/// {`LNET_PROTO_ACCEPTOR_MAGIC`, version 1, NID 0}. lustre: acceptor.c `lnet_accept()`.
#[expect(clippy::indexing_slicing, reason = "constant indexes below 8 into 16- and 4-byte arrays")]
pub const fn downgrade_answer() -> [u8; ConnReq::V1_LEN] {
    let mut out = [0u8; ConnReq::V1_LEN];
    let magic = LNET_PROTO_ACCEPTOR_MAGIC.to_le_bytes();
    let version = LNET_PROTO_ACCEPTOR_VERSION.to_le_bytes();
    let mut i = 0;
    while i < 4 {
        out[i] = magic[i];
        out[4 + i] = version[i];
        i += 1;
    }
    out
}

/// `lnet_accept_magic()`: the constant in either byte order.
fn is_magic(magic: u32, constant: u32) -> bool {
    magic == constant || magic == constant.swap_bytes()
}

fn need_more(total: usize, buf: &[u8]) -> ConnReqParse {
    ConnReqParse::NeedMore(total.saturating_sub(buf.len()).max(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::{LndType, Net};
    use proptest::prelude::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn server() -> Nid {
        Nid::ipv4(Net::TCP, Ipv4Addr::new(192, 168, 1, 1))
    }

    fn emit(request: &ConnReq) -> Vec<u8> {
        let mut buf = vec![0u8; request.buffer_len()];
        assert_eq!(request.emit(&mut buf), Ok(request.buffer_len()));
        buf
    }

    #[test]
    fn vector_10_1_connreq_v1() {
        let expected = [
            0x00, 0x71, 0xce, 0xac, 0x01, 0x00, 0x00, 0x00, 0x01, 0x01, 0xa8, 0xc0, 0x00, 0x00,
            0x02, 0x00,
        ];
        let request = ConnReq::new(server());
        assert_eq!(request.version, ConnReqVersion::V1);
        assert_eq!(emit(&request), expected);
        assert_eq!(
            ConnReq::parse(&expected),
            Ok(ConnReqParse::Request { request, byte_order: ByteOrder::LittleEndian, len: 16 })
        );
    }

    #[test]
    fn vector_10_3_downgrade_answer() {
        let expected = [0x00, 0x71, 0xce, 0xac, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(DOWNGRADE_ANSWER, expected);
        // It is itself a well-formed v1 request for NID 0.
        assert!(matches!(
            ConnReq::parse(&DOWNGRADE_ANSWER),
            Ok(ConnReqParse::Request { request: ConnReq { version: ConnReqVersion::V1, .. }, .. })
        ));
    }

    #[test]
    fn ipv6_target_uses_v2() {
        let ip: Ipv6Addr = "2001:db8::1".parse().unwrap();
        let target = Nid::ipv6(Net::TCP, ip);
        let request = ConnReq::new(target);
        assert_eq!(request.version, ConnReqVersion::V2);
        let bytes = emit(&request);
        assert_eq!(bytes.len(), 28);
        assert_eq!(bytes[..8], [0x00, 0x71, 0xce, 0xac, 0x02, 0, 0, 0]);
        assert_eq!(bytes[8..], target.to_large_bytes());
        assert_eq!(
            ConnReq::parse(&bytes),
            Ok(ConnReqParse::Request { request, byte_order: ByteOrder::LittleEndian, len: 28 })
        );
    }

    #[test]
    fn byte_swapped_v1_swaps_version_and_nid() {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&LNET_PROTO_ACCEPTOR_MAGIC.to_be_bytes());
        bytes.extend_from_slice(&1u32.to_be_bytes());
        bytes.extend_from_slice(&0x0002_0000_C0A8_0101u64.to_be_bytes());
        assert_eq!(
            ConnReq::parse(&bytes),
            Ok(ConnReqParse::Request {
                request: ConnReq::new(server()),
                byte_order: ByteOrder::BigEndian,
                len: 16
            })
        );
    }

    #[test]
    fn byte_swapped_v2_never_swaps_the_nid() {
        let target = Nid::ipv4(Net::new(LndType::SOCK, 3), Ipv4Addr::new(10, 1, 2, 3));
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&LNET_PROTO_ACCEPTOR_MAGIC.to_be_bytes());
        bytes.extend_from_slice(&2u32.to_be_bytes());
        bytes.extend_from_slice(&target.to_large_bytes());
        assert_eq!(
            ConnReq::parse(&bytes),
            Ok(ConnReqParse::Request {
                request: ConnReq { version: ConnReqVersion::V2, target },
                byte_order: ByteOrder::BigEndian,
                len: 28
            })
        );
    }

    #[test]
    fn need_more_counts_to_the_next_decision() {
        let full = emit(&ConnReq::new(server()));
        assert_eq!(ConnReq::parse(&[]), Ok(ConnReqParse::NeedMore(4)));
        assert_eq!(ConnReq::parse(&full[..3]), Ok(ConnReqParse::NeedMore(1)));
        assert_eq!(ConnReq::parse(&full[..4]), Ok(ConnReqParse::NeedMore(4)));
        assert_eq!(ConnReq::parse(&full[..8]), Ok(ConnReqParse::NeedMore(8)));
        assert_eq!(ConnReq::parse(&full[..15]), Ok(ConnReqParse::NeedMore(1)));
        let v2 = emit(&ConnReq { version: ConnReqVersion::V2, target: server() });
        assert_eq!(ConnReq::parse(&v2[..8]), Ok(ConnReqParse::NeedMore(20)));
    }

    #[test]
    fn unified_protocol_probe_in_either_order_is_downgraded() {
        for magic in [LNET_PROTO_MAGIC.to_le_bytes(), LNET_PROTO_MAGIC.to_be_bytes()] {
            assert_eq!(
                ConnReq::parse(&magic),
                Ok(ConnReqParse::Downgrade(DowngradeReason::UnifiedProtocolProbe))
            );
        }
    }

    #[test]
    fn unknown_version_is_downgraded() {
        let mut bytes = LNET_PROTO_ACCEPTOR_MAGIC.to_le_bytes().to_vec();
        bytes.extend_from_slice(&3u32.to_le_bytes());
        assert_eq!(
            ConnReq::parse(&bytes),
            Ok(ConnReqParse::Downgrade(DowngradeReason::UnknownVersion(3)))
        );
        // Swapped magic: the version is swapped before the check.
        let mut bytes = LNET_PROTO_ACCEPTOR_MAGIC.to_be_bytes().to_vec();
        bytes.extend_from_slice(&0u32.to_be_bytes());
        assert_eq!(
            ConnReq::parse(&bytes),
            Ok(ConnReqParse::Downgrade(DowngradeReason::UnknownVersion(0)))
        );
    }

    #[test]
    fn tcp_magic_is_refused_silently() {
        let le = LNET_PROTO_TCP_MAGIC.to_le_bytes();
        assert_eq!(ConnReq::parse(&le), Err(AcceptorError::OldSocknalMagic(LNET_PROTO_TCP_MAGIC)));
        let be = LNET_PROTO_TCP_MAGIC.to_be_bytes();
        assert_eq!(
            ConnReq::parse(&be),
            Err(AcceptorError::OldSocknalMagic(LNET_PROTO_TCP_MAGIC.swap_bytes()))
        );
    }

    #[test]
    fn other_magic_is_refused_silently() {
        let bytes = LNET_PROTO_PING_MAGIC.to_le_bytes();
        assert_eq!(ConnReq::parse(&bytes), Err(AcceptorError::UnknownMagic(LNET_PROTO_PING_MAGIC)));
    }

    #[test]
    fn v2_with_oversized_nid_is_refused() {
        let mut bytes = LNET_PROTO_ACCEPTOR_MAGIC.to_le_bytes().to_vec();
        bytes.extend_from_slice(&2u32.to_le_bytes());
        let mut nid = [0u8; 20];
        nid[0] = 13;
        nid[1] = 2;
        bytes.extend_from_slice(&nid);
        assert_eq!(
            ConnReq::parse(&bytes),
            Err(AcceptorError::BadTargetNid(LargeNidError::SizeTooLarge(17)))
        );
    }

    #[test]
    fn v2_with_junk_past_the_address_is_refused() {
        // lustre: acceptor.c lnet_accept() looks the NID up with nid_same(), which compares
        // all 16 address bytes: 10.0.0.1@tcp with junk in byte 12 of its address matches no NI.
        let mut nid = [0u8; 20];
        nid[..8].copy_from_slice(&[0, 2, 0, 0, 10, 0, 0, 1]);
        nid[16] = 0x01;
        let mut bytes = LNET_PROTO_ACCEPTOR_MAGIC.to_le_bytes().to_vec();
        bytes.extend_from_slice(&2u32.to_le_bytes());
        bytes.extend_from_slice(&nid);
        assert_eq!(
            ConnReq::parse(&bytes),
            Err(AcceptorError::BadTargetNid(LargeNidError::JunkPastAddress(4)))
        );
        // The same NID clean is taken.
        bytes[8 + 16] = 0;
        assert!(matches!(ConnReq::parse(&bytes), Ok(ConnReqParse::Request { .. })));
    }

    #[test]
    fn emit_errors() {
        let request = ConnReq::new(server());
        assert_eq!(
            request.emit(&mut [0u8; 15]),
            Err(ConnReqEmitError::BufferTooSmall { needed: 16, got: 15 })
        );
        let ip: Ipv6Addr = "2001:db8::1".parse().unwrap();
        let forced = ConnReq { version: ConnReqVersion::V1, target: Nid::ipv6(Net::TCP, ip) };
        assert_eq!(forced.emit(&mut [0u8; 16]), Err(ConnReqEmitError::TargetNotNid4));
    }

    /// NIDs that survive both wire forms (type 0xFF is always ANY).
    pub(crate) fn any_nid() -> impl Strategy<Value = Nid> {
        prop_oneof![
            (0..0xffu8, any::<u16>(), any::<u32>()).prop_map(|(lnd, number, addr)| {
                Nid::new4(Net::new(LndType(lnd), number), addr)
            }),
            (0..0xffu8, any::<u16>(), any::<[u8; 16]>()).prop_map(|(lnd, number, addr)| {
                Nid::ipv6(Net::new(LndType(lnd), number), Ipv6Addr::from(addr))
            }),
            Just(Nid::ANY),
        ]
    }

    proptest! {
        #[test]
        fn round_trip(target in any_nid()) {
            let request = ConnReq::new(target);
            let bytes = emit(&request);
            prop_assert_eq!(
                ConnReq::parse(&bytes),
                Ok(ConnReqParse::Request {
                    request,
                    byte_order: ByteOrder::LittleEndian,
                    len: bytes.len()
                })
            );
        }

        #[test]
        fn round_trip_forced_v2(target in any_nid()) {
            let request = ConnReq { version: ConnReqVersion::V2, target };
            let bytes = emit(&request);
            prop_assert_eq!(
                ConnReq::parse(&bytes),
                Ok(ConnReqParse::Request { request, byte_order: ByteOrder::LittleEndian, len: 28 })
            );
        }

        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            let _ = ConnReq::parse(&bytes);
        }

        #[test]
        fn decisions_are_stable_as_bytes_arrive(target in any_nid()) {
            let bytes = emit(&ConnReq::new(target));
            let full = ConnReq::parse(&bytes);
            for cut in 0..bytes.len() {
                match ConnReq::parse(&bytes[..cut]) {
                    Ok(ConnReqParse::NeedMore(n)) => prop_assert!(cut + n <= bytes.len()),
                    other => prop_assert_eq!(other, full),
                }
            }
        }
    }
}
