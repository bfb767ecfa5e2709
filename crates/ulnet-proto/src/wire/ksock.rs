//! socklnd framing after the hello (V2-V4): the 24-byte ksock header, the zero-copy
//! request/ACK cookies it carries, keepalive NOOPs, the V2 checksum and message lengths.
//!
//! lustre: lnet/klnds/socklnd/socklnd-idl.h (`struct ksock_msg_hdr`, `KSOCK_MSG_*`),
//! socklnd_cb.c (`ksocknal_process_receive()`, `ksocknal_alloc_tx_noop()`,
//! `ksocknal_check_zc_req()`), socklnd_proto.c
//! (`ksocknal_handle_zcack()`, `ksocknal_queue_tx_zcack_v3()`), socklnd.h
//! (`SOCKNAL_KEEPALIVE_PING`), socklnd_lib.c (`ksocknal_lib_csum_tx()`).

use std::ops::RangeInclusive;

use super::cursor::{ByteOrder, Reader};
use super::header::HeaderForm;

/// `KSOCK_MSG_NOOP`: a header alone, carrying ZC-ACKs or a keepalive.
pub const KSOCK_MSG_NOOP: u32 = 0xc0;
/// `KSOCK_MSG_LNET`: a header followed by an LNet header and its payload.
pub const KSOCK_MSG_LNET: u32 = 0xc1;

/// `SOCKNAL_KEEPALIVE_PING`: the cookie a keepalive NOOP carries; never a real ZC cookie.
pub const SOCKNAL_KEEPALIVE_PING: u64 = 1;
/// The first ZC request cookie of a peer, and where numbering restarts after wrapping.
/// lustre: socklnd.c `ksocknal_create_peer()`, socklnd_cb.c `ksocknal_check_zc_req()`.
pub const FIRST_ZC_COOKIE: u64 = SOCKNAL_KEEPALIVE_PING + 1;
/// Longest cookie range a ZC-ACK may cover. The kernel counts the cookies of a range in an
/// `int`, so a longer range cannot be matched correctly and is a protocol error.
/// lustre: socklnd_proto.c `ksocknal_handle_zcack()` (`int count`).
pub const MAX_ZC_ACK_RANGE: u64 = i32::MAX as u64;

/// The ksock message types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KsockMsgType {
    Noop,
    Lnet,
}

impl KsockMsgType {
    /// The `ksh_type` value.
    pub const fn number(self) -> u32 {
        match self {
            Self::Noop => KSOCK_MSG_NOOP,
            Self::Lnet => KSOCK_MSG_LNET,
        }
    }

    pub const fn from_number(number: u32) -> Option<Self> {
        match number {
            KSOCK_MSG_NOOP => Some(Self::Noop),
            KSOCK_MSG_LNET => Some(Self::Lnet),
            _ => None,
        }
    }
}

/// `struct ksock_msg_hdr`: type, checksum and two ZC cookies, in the sender's host order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KsockHeader {
    pub msg_type: KsockMsgType,
    /// 0 = none. Only V2 senders with `enable_csum` ever set it.
    pub csum: u32,
    /// LNET: [ZC request cookie or 0, piggy-backed ZC-ACK cookie or 0].
    /// NOOP: the encoding of a [`ZcAck`].
    pub zc_cookies: [u64; 2],
}

/// Why 24 bytes are not a ksock header; the kernel closes the connection and its siblings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KsockError {
    #[error("ksock header needs 24 bytes, got {0}")]
    Truncated(usize),
    #[error("unknown ksock message type {0:#x}")]
    UnknownMsgType(u32),
}

impl KsockHeader {
    pub const LEN: usize = 24;

    /// A NOOP carrying `ack`.
    pub fn noop(ack: ZcAck) -> Self {
        Self { msg_type: KsockMsgType::Noop, csum: 0, zc_cookies: ack.encode() }
    }

    /// The keepalive NOOP (V3/V4): cookies (0, 1). lustre: socklnd_cb.c
    /// `ksocknal_send_keepalive_locked()`.
    pub fn keepalive() -> Self {
        Self::noop(ZcAck::Keepalive)
    }

    /// An LNET message header: `zc_request` is 0 or a fresh cookie from [`next_zc_cookie`];
    /// `zc_ack` is 0 or one cookie being acknowledged by piggy-back.
    pub fn lnet(zc_request: u64, zc_ack: u64) -> Self {
        Self { msg_type: KsockMsgType::Lnet, csum: 0, zc_cookies: [zc_request, zc_ack] }
    }

    /// Reads the first 24 bytes of `buf` in the connection's byte order (from its hello).
    /// lustre: socklnd_cb.c `ksocknal_process_receive()` (`SOCKNAL_RX_KSM_HEADER`).
    pub fn parse(buf: &[u8], byte_order: ByteOrder) -> Result<Self, KsockError> {
        let mut r = Reader::new(buf, byte_order);
        let fields = (|| Some((r.u32()?, r.u32()?, r.u64()?, r.u64()?)))();
        let Some((msg_type, csum, cookie0, cookie1)) = fields else {
            return Err(KsockError::Truncated(buf.len()));
        };
        let msg_type =
            KsockMsgType::from_number(msg_type).ok_or(KsockError::UnknownMsgType(msg_type))?;
        Ok(Self { msg_type, csum, zc_cookies: [cookie0, cookie1] })
    }

    /// The header little-endian.
    pub fn emit(&self) -> [u8; Self::LEN] {
        self.emit_ordered(ByteOrder::LittleEndian)
    }

    /// The header as a host of `byte_order` sends it.
    pub fn emit_ordered(&self, byte_order: ByteOrder) -> [u8; Self::LEN] {
        let mut out = [0u8; Self::LEN];
        let mut w = super::cursor::Writer::new(&mut out, byte_order);
        w.u32(self.msg_type.number());
        w.u32(self.csum);
        w.u64(self.zc_cookies[0]);
        w.u64(self.zc_cookies[1]);
        out
    }

    /// The ZC request cookie of an LNET message, which the receiver must acknowledge once
    /// the whole payload is in.
    pub fn zc_request(&self) -> Option<u64> {
        match (self.msg_type, self.zc_cookies[0]) {
            (KsockMsgType::Lnet, 0) | (KsockMsgType::Noop, _) => None,
            (KsockMsgType::Lnet, cookie) => Some(cookie),
        }
    }

    /// What this header acknowledges: the NOOP forms of [`ZcAck`], or for an LNET message
    /// the single piggy-backed cookie (its `cookies[0]` is its own request, not a range end).
    /// lustre: socklnd_cb.c `ksocknal_process_receive()`, socklnd_proto.c
    /// `ksocknal_handle_zcack()`.
    pub fn zc_ack(&self) -> Result<ZcAck, ZcAckError> {
        match self.msg_type {
            KsockMsgType::Noop => ZcAck::decode(self.zc_cookies),
            KsockMsgType::Lnet => ZcAck::decode([0, self.zc_cookies[1]]),
        }
    }

    /// This header with the V2 checksum over itself (csum 0), `lnet_header` and `payload`.
    pub fn with_v2_checksum(self, lnet_header: &[u8], payload: &[u8]) -> Self {
        Self { csum: v2_message_checksum(&self, lnet_header, payload), ..self }
    }
}

/// The meaning of a NOOP's two cookies (V3/V4; V2 senders use only `Single`).
///
/// On a V2 connection the kernel does not special-case the keepalive cookie: it looks for a
/// pending request with cookie 1, finds none (cookies start at 2) and closes with EPROTO.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ZcAck {
    /// `cookies[1]` = 0: nothing acknowledged.
    None,
    /// (0, 1): a keepalive ping, ignored.
    Keepalive,
    /// (0, c): cookie c.
    Single(u64),
    /// (a, b) with a > b: exactly the two cookies a and b.
    Pair(u64, u64),
    /// (a, b) with a < b: every cookie of a..=b.
    Range(u64, u64),
}

/// A NOOP whose cookies the kernel rejects with EPROTO.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ZcAckError {
    /// `cookies[1]` is the keepalive cookie but `cookies[0]` makes the count other than 1.
    #[error("keepalive NOOP with cookies[0] = {low}")]
    MalformedKeepalive { low: u64 },
    /// A range longer than [`MAX_ZC_ACK_RANGE`].
    #[error("ZC-ACK range {low}..={high} exceeds {MAX_ZC_ACK_RANGE} cookies")]
    RangeTooLong { low: u64, high: u64 },
}

impl ZcAck {
    /// Interprets (`cookies[0]`, `cookies[1]`) as `ksocknal_handle_zcack()` does: a zero low
    /// end means "same as the high end", low > high names two cookies, low < high a range.
    /// (1, 1) counts one cookie, so it is a keepalive too.
    pub fn decode(cookies: [u64; 2]) -> Result<Self, ZcAckError> {
        let [low, high] = cookies;
        if high == 0 {
            return Ok(Self::None);
        }
        let first = if low == 0 { high } else { low };
        if high == SOCKNAL_KEEPALIVE_PING {
            return if first == SOCKNAL_KEEPALIVE_PING {
                Ok(Self::Keepalive)
            } else {
                Err(ZcAckError::MalformedKeepalive { low })
            };
        }
        if first == high {
            return Ok(Self::Single(high));
        }
        if first > high {
            return Ok(Self::Pair(first, high));
        }
        // first < high, so the count neither underflows nor overflows.
        if high - first >= MAX_ZC_ACK_RANGE {
            return Err(ZcAckError::RangeTooLong { low: first, high });
        }
        Ok(Self::Range(first, high))
    }

    /// The NOOP cookies for this acknowledgement. Equal ends collapse to `Single`; `Pair`
    /// puts the larger cookie first and `Range` the smaller, whatever order they were given.
    /// Cookies must be at least [`FIRST_ZC_COOKIE`]; this is not checked.
    pub fn encode(self) -> [u64; 2] {
        match self {
            Self::None => [0, 0],
            Self::Keepalive => [0, SOCKNAL_KEEPALIVE_PING],
            Self::Single(c) => [0, c],
            Self::Pair(a, b) | Self::Range(a, b) if a == b => [0, a],
            Self::Pair(a, b) => [a.max(b), a.min(b)],
            Self::Range(a, b) => [a.min(b), a.max(b)],
        }
    }

    /// How many cookies this acknowledges (the kernel's `count`).
    pub fn count(&self) -> u64 {
        match *self {
            Self::None | Self::Keepalive => 0,
            Self::Single(_) => 1,
            Self::Pair(a, b) => {
                if a == b {
                    1
                } else {
                    2
                }
            }
            Self::Range(a, b) => a.abs_diff(b).saturating_add(1),
        }
    }

    /// Whether `cookie` is acknowledged; match pending requests with this rather than
    /// iterating a long range.
    pub fn contains(&self, cookie: u64) -> bool {
        match *self {
            Self::None | Self::Keepalive => false,
            Self::Single(c) => cookie == c,
            Self::Pair(a, b) => cookie == a || cookie == b,
            Self::Range(a, b) => (a.min(b)..=a.max(b)).contains(&cookie),
        }
    }

    /// The acknowledged cookies in ascending order. A hand-built range longer than
    /// [`MAX_ZC_ACK_RANGE`] yields only its first `MAX_ZC_ACK_RANGE` cookies.
    pub fn cookies(&self) -> AckedCookies {
        let (range, extra) = match *self {
            Self::None | Self::Keepalive => (RangeInclusive::new(1, 0), None),
            Self::Single(c) => (c..=c, None),
            Self::Pair(a, b) if a == b => (a..=a, None),
            Self::Pair(a, b) => (a.min(b)..=a.min(b), Some(a.max(b))),
            Self::Range(a, b) => {
                let low = a.min(b);
                let high = a.max(b).min(low.saturating_add(MAX_ZC_ACK_RANGE - 1));
                (low..=high, None)
            }
        };
        AckedCookies { range, extra }
    }
}

/// Iterator over the cookies of a [`ZcAck`].
#[derive(Clone, Debug)]
pub struct AckedCookies {
    range: RangeInclusive<u64>,
    extra: Option<u64>,
}

impl Iterator for AckedCookies {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        self.range.next().or_else(|| self.extra.take())
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let (low, high) = self.range.size_hint();
        let extra = usize::from(self.extra.is_some());
        (low.saturating_add(extra), high.and_then(|h| h.checked_add(extra)))
    }
}

/// The cookie to use after `cookie` for a peer's next ZC request: increments, skipping 0
/// and the keepalive cookie on wrap-around.
/// lustre: socklnd_cb.c `ksocknal_check_zc_req()` (`ksnp_zc_next_cookie`).
pub fn next_zc_cookie(cookie: u64) -> u64 {
    match cookie.wrapping_add(1) {
        0 | SOCKNAL_KEEPALIVE_PING => FIRST_ZC_COOKIE,
        next => next,
    }
}

/// Why the length of an LNET message cannot be computed yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FramingError {
    #[error("LNet header needs {needed} bytes to find payload_length, got {got}")]
    LnetHeaderTruncated { needed: usize, got: usize },
}

/// `payload_length` of a raw LNet header: the little-endian u32 at offset 28 (nid4) or 52
/// (nid16). It is never byte-swapped with the connection.
pub fn lnet_payload_length(form: HeaderForm, lnet_header: &[u8]) -> Result<u32, FramingError> {
    let offset = match form {
        HeaderForm::Nid4 => 28,
        HeaderForm::Nid16 => 52,
    };
    let mut r = Reader::at(lnet_header, offset, ByteOrder::LittleEndian);
    r.u32().ok_or(FramingError::LnetHeaderTruncated { needed: offset + 4, got: lnet_header.len() })
}

/// Bytes on the wire of a whole LNET ksock message: 24 + the header form's length +
/// `payload_length`. The payload must always be consumed, even when the message is dropped:
/// there is no other boundary marker. (A NOOP is [`KsockHeader::LEN`] bytes.)
pub fn lnet_message_len(form: HeaderForm, lnet_header: &[u8]) -> Result<u64, FramingError> {
    let payload = lnet_payload_length(form, lnet_header)?;
    Ok((KsockHeader::LEN + form.len()) as u64 + u64::from(payload))
}

/// The V2 checksum of a message: CRC over the ksock header with csum 0, the LNet header
/// bytes, then the payload. lustre: socklnd_lib.c `ksocknal_lib_csum_tx()`.
pub fn v2_message_checksum(header: &KsockHeader, lnet_header: &[u8], payload: &[u8]) -> u32 {
    let zeroed = KsockHeader { csum: 0, ..*header };
    let mut crc = Crc32Le::new();
    crc.update(&zeroed.emit());
    crc.update(lnet_header);
    crc.update(payload);
    crc.value()
}

/// Linux `crc32_le`: reflected IEEE polynomial 0xEDB88320, seeded with 0xFFFFFFFF and with
/// **no** final inversion (= zlib's crc32 XOR 0xFFFFFFFF). The arithmetic is `crc32fast`'s
/// (zlib's CRC, resumable): the running value is its finalized value inverted (decision 0014).
#[derive(Clone, Debug, Default)]
pub struct Crc32Le {
    zlib: crc32fast::Hasher,
}

impl PartialEq for Crc32Le {
    fn eq(&self, other: &Self) -> bool {
        self.value() == other.value()
    }
}

impl Eq for Crc32Le {}

impl Crc32Le {
    /// The socklnd seed (`~0`).
    pub const SEED: u32 = 0xffff_ffff;

    pub fn new() -> Self {
        Self::default()
    }

    /// One-shot CRC of `data` from the seed.
    pub fn checksum(data: &[u8]) -> u32 {
        let mut crc = Self::new();
        crc.update(data);
        crc.value()
    }

    pub fn update(&mut self, data: &[u8]) {
        self.zlib.update(data);
    }

    /// The running CRC (no final inversion).
    pub fn value(&self) -> u32 {
        !self.zlib.clone().finalize()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const VECTOR_10_8: [u8; 24] =
        [0xc0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0, 0, 0, 0, 0, 0, 0];

    const VECTOR_10_9: [u8; 24] =
        [0xc0, 0, 0, 0, 0x64, 0x34, 0xbb, 0x7f, 0, 0, 0, 0, 0, 0, 0, 0, 0x05, 0, 0, 0, 0, 0, 0, 0];

    const VECTOR_10_10: [u8; 96] = [
        0xc1, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x01, 0xa8, 0xc0, 0x00, 0x00,
        0x02, 0x00, 0x02, 0x01, 0xa8, 0xc0, 0x00, 0x00, 0x02, 0x00, 0x39, 0x30, 0x00, 0x00, 0x39,
        0x30, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x2a, 0x1d, 0x3b,
        0xd9, 0xf7, 0x70, 0x18, 0x09, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x01,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ];

    const VECTOR_10_13: [u8; 96] = [
        0xc1, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x01, 0xa8, 0xc0, 0x00, 0x00,
        0x02, 0x00, 0x01, 0x01, 0xa8, 0xc0, 0x00, 0x00, 0x02, 0x00, 0x39, 0x30, 0x00, 0x00, 0x39,
        0x30, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x2a, 0x1d, 0x3b,
        0xd9, 0xf7, 0x70, 0x18, 0x0d, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x80, 0x30, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ];

    #[test]
    fn vector_10_8_keepalive() {
        assert_eq!(KsockHeader::keepalive().emit(), VECTOR_10_8);
        let parsed = KsockHeader::parse(&VECTOR_10_8, ByteOrder::LittleEndian).unwrap();
        assert_eq!(parsed, KsockHeader::keepalive());
        assert_eq!(parsed.zc_ack(), Ok(ZcAck::Keepalive));
        assert_eq!(parsed.zc_request(), None);
    }

    #[test]
    fn vector_10_9_v2_checksum() {
        let noop = KsockHeader::noop(ZcAck::Single(5));
        assert_eq!(v2_message_checksum(&noop, &[], &[]), 0x7fbb_3464);
        let summed = noop.with_v2_checksum(&[], &[]);
        assert_eq!(summed.emit(), VECTOR_10_9);
        // Verification recomputes over the header with csum zeroed.
        let parsed = KsockHeader::parse(&VECTOR_10_9, ByteOrder::LittleEndian).unwrap();
        assert_eq!(v2_message_checksum(&parsed, &[], &[]), parsed.csum);
    }

    #[test]
    fn vectors_10_10_and_10_13_ksock_headers_and_lengths() {
        for vector in [VECTOR_10_10, VECTOR_10_13] {
            let header = KsockHeader::parse(&vector, ByteOrder::LittleEndian).unwrap();
            assert_eq!(header, KsockHeader::lnet(0, 0));
            assert_eq!(header.emit(), vector[..24]);
            assert_eq!(header.zc_ack(), Ok(ZcAck::None));
            assert_eq!(lnet_payload_length(HeaderForm::Nid4, &vector[24..]), Ok(0));
            assert_eq!(lnet_message_len(HeaderForm::Nid4, &vector[24..]), Ok(96));
        }
    }

    #[test]
    fn message_len_reads_payload_length_per_form() {
        let mut nid4 = [0u8; 72];
        nid4[28..32].copy_from_slice(&272u32.to_le_bytes());
        assert_eq!(lnet_message_len(HeaderForm::Nid4, &nid4), Ok(24 + 72 + 272));
        let mut nid16 = [0u8; 96];
        nid16[52..56].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(lnet_message_len(HeaderForm::Nid16, &nid16), Ok(24 + 96 + u64::from(u32::MAX)));
        assert_eq!(
            lnet_message_len(HeaderForm::Nid16, &nid16[..55]),
            Err(FramingError::LnetHeaderTruncated { needed: 56, got: 55 })
        );
        assert_eq!(
            lnet_payload_length(HeaderForm::Nid4, &[]),
            Err(FramingError::LnetHeaderTruncated { needed: 32, got: 0 })
        );
    }

    #[test]
    fn crc_check_value() {
        assert_eq!(Crc32Le::checksum(b"123456789"), 0x340b_c6d9);
        // zlib's crc32("123456789") = 0xCBF43926, inverted.
        assert_eq!(Crc32Le::checksum(b"123456789"), !0xcbf4_3926);
        assert_eq!(Crc32Le::checksum(b""), Crc32Le::SEED);
    }

    /// The reflected IEEE polynomial.
    const CRC32_POLY_LE: u32 = 0xedb8_8320;

    /// `crc32_le()` bit by bit, as lib/crc32.c defines it.
    fn bitwise_crc(data: &[u8]) -> u32 {
        let mut crc = Crc32Le::SEED;
        for &byte in data {
            crc ^= u32::from(byte);
            for _ in 0..8 {
                crc = if crc & 1 != 0 { (crc >> 1) ^ CRC32_POLY_LE } else { crc >> 1 };
            }
        }
        crc
    }

    #[test]
    fn zc_ack_forms_of_wire_md() {
        assert_eq!(ZcAck::decode([0, 7]), Ok(ZcAck::Single(7)));
        assert_eq!(ZcAck::decode([7, 9]), Ok(ZcAck::Range(7, 9)));
        assert_eq!(ZcAck::decode([9, 7]), Ok(ZcAck::Pair(9, 7)));
        assert_eq!(ZcAck::decode([0, 1]), Ok(ZcAck::Keepalive));
        assert_eq!(ZcAck::decode([0, 0]), Ok(ZcAck::None));
        assert_eq!(ZcAck::decode([5, 0]), Ok(ZcAck::None));
        // Equal ends count one cookie in the kernel.
        assert_eq!(ZcAck::decode([7, 7]), Ok(ZcAck::Single(7)));
        assert_eq!(ZcAck::decode([1, 1]), Ok(ZcAck::Keepalive));

        assert_eq!(ZcAck::Range(7, 9).cookies().collect::<Vec<_>>(), [7, 8, 9]);
        assert_eq!(ZcAck::Pair(9, 7).cookies().collect::<Vec<_>>(), [7, 9]);
        assert_eq!(ZcAck::Single(7).cookies().collect::<Vec<_>>(), [7]);
        assert_eq!(ZcAck::Keepalive.cookies().count(), 0);
        assert_eq!(ZcAck::None.cookies().count(), 0);
        assert_eq!(ZcAck::Range(7, 9).count(), 3);
        assert!(ZcAck::Range(7, 9).contains(8));
        assert!(!ZcAck::Pair(9, 7).contains(8));
    }

    #[test]
    fn keepalive_with_a_low_cookie_is_an_error() {
        assert_eq!(ZcAck::decode([3, 1]), Err(ZcAckError::MalformedKeepalive { low: 3 }));
        let noop = KsockHeader { zc_cookies: [2, 1], ..KsockHeader::keepalive() };
        assert_eq!(noop.zc_ack(), Err(ZcAckError::MalformedKeepalive { low: 2 }));
    }

    #[test]
    fn overlong_range_is_an_error() {
        let high = 2 + MAX_ZC_ACK_RANGE;
        assert_eq!(ZcAck::decode([2, high]), Err(ZcAckError::RangeTooLong { low: 2, high }));
        assert_eq!(ZcAck::decode([2, high - 1]).map(|ack| ack.count()), Ok(MAX_ZC_ACK_RANGE));
        // A hand-built longer range iterates at most MAX_ZC_ACK_RANGE cookies.
        let (_, upper) = ZcAck::Range(2, u64::MAX).cookies().size_hint();
        assert_eq!(upper, usize::try_from(MAX_ZC_ACK_RANGE).ok());
    }

    #[test]
    fn lnet_messages_piggy_back_one_cookie() {
        let header = KsockHeader::lnet(40, 9);
        assert_eq!(header.zc_request(), Some(40));
        // cookies[0] of an LNET message is its own request, not a range end.
        assert_eq!(header.zc_ack(), Ok(ZcAck::Single(9)));
        assert_eq!(KsockHeader::lnet(40, 0).zc_ack(), Ok(ZcAck::None));
    }

    #[test]
    fn header_errors() {
        assert_eq!(
            KsockHeader::parse(&VECTOR_10_8[..23], ByteOrder::LittleEndian),
            Err(KsockError::Truncated(23))
        );
        let mut bad = VECTOR_10_8;
        bad[0] = 0xc2;
        assert_eq!(
            KsockHeader::parse(&bad, ByteOrder::LittleEndian),
            Err(KsockError::UnknownMsgType(0xc2))
        );
        // A little-endian NOOP read as big-endian has type 0xC0000000.
        assert_eq!(
            KsockHeader::parse(&VECTOR_10_8, ByteOrder::BigEndian),
            Err(KsockError::UnknownMsgType(0xc000_0000))
        );
    }

    #[test]
    fn byte_swapped_header() {
        let header = KsockHeader { csum: 0x1234_5678, ..KsockHeader::lnet(0x0102, 0x0304) };
        let bytes = header.emit_ordered(ByteOrder::BigEndian);
        assert_eq!(bytes[..4], [0, 0, 0, 0xc1]);
        assert_eq!(KsockHeader::parse(&bytes, ByteOrder::BigEndian), Ok(header));
    }

    #[test]
    fn zc_cookies_start_at_2_and_skip_keepalive_on_wrap() {
        assert_eq!(FIRST_ZC_COOKIE, 2);
        assert_eq!(next_zc_cookie(2), 3);
        assert_eq!(next_zc_cookie(u64::MAX), 2);
        assert_eq!(next_zc_cookie(0), 2);
    }

    fn msg_type_strategy() -> impl Strategy<Value = KsockMsgType> {
        prop_oneof![Just(KsockMsgType::Noop), Just(KsockMsgType::Lnet)]
    }

    fn zc_ack_strategy() -> impl Strategy<Value = ZcAck> {
        prop_oneof![
            Just(ZcAck::None),
            Just(ZcAck::Keepalive),
            (FIRST_ZC_COOKIE..).prop_map(ZcAck::Single),
            (FIRST_ZC_COOKIE..u64::MAX)
                .prop_flat_map(|b| ((b + 1).., Just(b)))
                .prop_map(|(a, b)| ZcAck::Pair(a, b)),
            (FIRST_ZC_COOKIE..u64::MAX - 1)
                .prop_flat_map(|a| (Just(a), (a + 1)..=a.saturating_add(MAX_ZC_ACK_RANGE - 1)))
                .prop_map(|(a, b)| ZcAck::Range(a, b)),
        ]
    }

    proptest! {
        #[test]
        fn header_round_trip(
            msg_type in msg_type_strategy(),
            csum in any::<u32>(),
            zc_cookies in any::<[u64; 2]>(),
            big in any::<bool>(),
        ) {
            let order = if big { ByteOrder::BigEndian } else { ByteOrder::LittleEndian };
            let header = KsockHeader { msg_type, csum, zc_cookies };
            prop_assert_eq!(KsockHeader::parse(&header.emit_ordered(order), order), Ok(header));
        }

        #[test]
        fn zc_ack_round_trip(ack in zc_ack_strategy()) {
            prop_assert_eq!(ZcAck::decode(ack.encode()), Ok(ack));
            let noop = KsockHeader::noop(ack);
            let parsed = KsockHeader::parse(&noop.emit(), ByteOrder::LittleEndian).unwrap();
            prop_assert_eq!(parsed.zc_ack(), Ok(ack));
        }

        #[test]
        fn zc_ack_decode_is_total_and_consistent(cookies in any::<[u64; 2]>()) {
            if let Ok(ack) = ZcAck::decode(cookies) {
                // Re-encoding is canonical and decodes to the same acknowledgement.
                prop_assert_eq!(ZcAck::decode(ack.encode()), Ok(ack));
                let mut iter = ack.cookies();
                let first: Vec<u64> = iter.by_ref().take(4).collect();
                prop_assert!(first.iter().all(|&c| ack.contains(c)));
                prop_assert!(first.windows(2).all(|w| w[0] < w[1]));
            }
        }

        #[test]
        fn header_parse_never_panics(
            bytes in proptest::collection::vec(any::<u8>(), 0..32),
            big in any::<bool>(),
        ) {
            let order = if big { ByteOrder::BigEndian } else { ByteOrder::LittleEndian };
            if let Ok(header) = KsockHeader::parse(&bytes, order) {
                let _ = header.zc_ack();
            }
        }

        #[test]
        fn crc32fast_matches_bitwise(
            data in proptest::collection::vec(any::<u8>(), 0..100),
            split in 0usize..100,
        ) {
            prop_assert_eq!(Crc32Le::checksum(&data), bitwise_crc(&data));
            let split = split.min(data.len());
            let mut crc = Crc32Le::new();
            crc.update(&data[..split]);
            crc.update(&data[split..]);
            prop_assert_eq!(crc.value(), bitwise_crc(&data));
        }

        #[test]
        fn message_len_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..100)) {
            for form in [HeaderForm::Nid4, HeaderForm::Nid16] {
                if let Ok(len) = lnet_message_len(form, &bytes) {
                    prop_assert!(len >= (24 + form.len()) as u64);
                }
            }
        }
    }
}
