//! The LNet message header: classic 72-byte nid4 form (socklnd V1-V3) and 96-byte large-NID
//! form (V4), with the 40-byte per-type body shared by both.
//!
//! lustre: include/uapi/linux/lnet/lnet-idl.h (`struct _lnet_hdr_nid4`, `struct lnet_hdr_nid16`,
//! `union lnet_cmd_hdr`), include/linux/lnet/lib-lnet.h (`lnet_hdr_from_nid4`, ...),
//! lnet/lnet/lib-move.c `lnet_parse()` for the receive-side checks.

use crate::addr::{LARGE_NID_LEN, LargeNidError, Nid};

/// `LNET_MTU`: the largest PUT or REPLY payload.
pub const LNET_MTU: u32 = 1 << 20;

/// `struct lnet_handle_wire`: 16 opaque bytes the peer echoes verbatim.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct WireHandle {
    pub interface_cookie: u64,
    pub object_cookie: u64,
}

impl WireHandle {
    /// `LNET_WIRE_HANDLE_COOKIE_NONE` in both words: in a PUT's `ack_wmd` it means "no ACK".
    pub const NONE: Self = Self { interface_cookie: u64::MAX, object_cookie: u64::MAX };

    pub fn is_none(&self) -> bool {
        *self == Self::NONE
    }
}

/// `enum lnet_msg_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum MsgType {
    Ack = 0,
    Put = 1,
    Get = 2,
    Reply = 3,
    /// Only inside a socklnd V1 hello; a received LNET message of this type is a protocol error.
    Hello = 4,
}

/// The per-type part of the header (`union lnet_cmd_hdr`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Body {
    Ack {
        dst_wmd: WireHandle,
        match_bits: u64,
        mlength: u32,
    },
    Put {
        ack_wmd: WireHandle,
        match_bits: u64,
        hdr_data: u64,
        ptl_index: u32,
        offset: u32,
    },
    Get {
        return_wmd: WireHandle,
        match_bits: u64,
        ptl_index: u32,
        src_offset: u32,
        sink_length: u32,
    },
    Reply {
        dst_wmd: WireHandle,
    },
    Hello {
        incarnation: u64,
        conn_type: u32,
    },
}

impl MsgType {
    /// Decodes the wire `type` field; `None` for values outside `enum lnet_msg_type`.
    pub fn from_u32(value: u32) -> Option<Self> {
        match value {
            0 => Some(Self::Ack),
            1 => Some(Self::Put),
            2 => Some(Self::Get),
            3 => Some(Self::Reply),
            4 => Some(Self::Hello),
            _ => None,
        }
    }
}

impl Body {
    pub fn msg_type(&self) -> MsgType {
        match self {
            Body::Ack { .. } => MsgType::Ack,
            Body::Put { .. } => MsgType::Put,
            Body::Get { .. } => MsgType::Get,
            Body::Reply { .. } => MsgType::Reply,
            Body::Hello { .. } => MsgType::Hello,
        }
    }
}

/// A validated LNet header, independent of its wire form.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Header {
    pub dest_nid: Nid,
    pub src_nid: Nid,
    pub dest_pid: u32,
    pub src_pid: u32,
    /// Bytes of payload that follow the header on the wire.
    pub payload_length: u32,
    pub body: Body,
}

/// Which of the two header layouts a connection uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HeaderForm {
    /// `struct _lnet_hdr_nid4`, 72 bytes: socklnd V1, V2, V3.
    Nid4,
    /// `struct lnet_hdr_nid16`, 96 bytes: socklnd V4.
    Nid16,
}

impl HeaderForm {
    /// Header length in bytes; a form is never empty.
    #[allow(clippy::len_without_is_empty)]
    pub const fn len(self) -> usize {
        match self {
            HeaderForm::Nid4 => 72,
            HeaderForm::Nid16 => 96,
        }
    }
}

/// Length of the per-type body, `sizeof(union lnet_cmd_hdr)`.
pub const BODY_LEN: usize = 40;

/// Why bytes are not an LNet header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    #[error("LNet header needs {needed} bytes, got {len}")]
    Truncated { needed: usize, len: usize },
    /// A `type` outside `enum lnet_msg_type`; no [`Body`] can hold it.
    #[error("unknown LNet message type {0:#x}")]
    UnknownType(u32),
    #[error("bad destination NID: {0}")]
    BadDestNid(LargeNidError),
    #[error("bad source NID: {0}")]
    BadSrcNid(LargeNidError),
}

/// Why a header cannot be emitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HeaderEmitError {
    #[error("LNet header needs {needed} bytes, buffer has {len}")]
    BufferTooSmall { needed: usize, len: usize },
    /// The nid4 form has only 64 bits per NID; an IPv6 NID would be silently truncated.
    #[error("destination NID {0} has no nid4 form")]
    DestNidNotNid4(Nid),
    #[error("source NID {0} has no nid4 form")]
    SrcNidNotNid4(Nid),
}

/// Why a received, well-formed header is a protocol error (the kernel returns EPROTO and closes
/// the connection). lustre: lnet/lnet/lib-move.c `lnet_parse()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HeaderReceiveError {
    /// HELLO only exists inside a socklnd V1 hello ("Bad message type").
    #[error("HELLO received as an LNet message")]
    Hello,
    #[error("{msg_type:?} carries payload {payload_length}, 0 expected")]
    PayloadNotAllowed { msg_type: MsgType, payload_length: u32 },
    #[error("{msg_type:?} payload {payload_length} exceeds LNET_MTU")]
    PayloadTooLarge { msg_type: MsgType, payload_length: u32 },
    /// The originator must be a real NID: matching and responses are keyed on it.
    #[error("source NID is LNET_NID_ANY")]
    SrcNidAny,
}

impl Header {
    /// Length of the nid4 form, `sizeof(struct _lnet_hdr_nid4)`.
    pub const NID4_LEN: usize = 72;
    /// Length of the large-NID form, `sizeof(struct lnet_hdr_nid16)`.
    pub const NID16_LEN: usize = 96;

    pub fn msg_type(&self) -> MsgType {
        self.body.msg_type()
    }

    /// Decodes the first `form.len()` bytes of `buf`; later bytes are not looked at. Unused body
    /// bytes are ignored. No checks beyond what the representation needs: see
    /// [`Header::validate_received`].
    pub fn parse(buf: &[u8], form: HeaderForm) -> Result<Self, HeaderError> {
        match form {
            HeaderForm::Nid4 => match buf.first_chunk::<{ Self::NID4_LEN }>() {
                Some(bytes) => Self::parse_nid4(bytes),
                None => Err(HeaderError::Truncated { needed: Self::NID4_LEN, len: buf.len() }),
            },
            HeaderForm::Nid16 => match buf.first_chunk::<{ Self::NID16_LEN }>() {
                Some(bytes) => Self::parse_nid16(bytes),
                None => Err(HeaderError::Truncated { needed: Self::NID16_LEN, len: buf.len() }),
            },
        }
    }

    /// Decodes `struct _lnet_hdr_nid4`. lustre: lib-lnet.h `lnet_hdr_from_nid4()`.
    pub fn parse_nid4(bytes: &[u8; Self::NID4_LEN]) -> Result<Self, HeaderError> {
        const N: usize = Header::NID4_LEN;
        let body = Body::decode(u32_at::<24, N>(bytes), &array_at::<32, BODY_LEN, N>(bytes))?;
        Ok(Self {
            dest_nid: Nid::from_nid4(u64_at::<0, N>(bytes)),
            src_nid: Nid::from_nid4(u64_at::<8, N>(bytes)),
            dest_pid: u32_at::<16, N>(bytes),
            src_pid: u32_at::<20, N>(bytes),
            payload_length: u32_at::<28, N>(bytes),
            body,
        })
    }

    /// Decodes `struct lnet_hdr_nid16`. lustre: lib-lnet.h `lnet_hdr_from_nid16()`.
    pub fn parse_nid16(bytes: &[u8; Self::NID16_LEN]) -> Result<Self, HeaderError> {
        const N: usize = Header::NID16_LEN;
        let body = Body::decode(u32_at::<48, N>(bytes), &array_at::<56, BODY_LEN, N>(bytes))?;
        let dest_nid = Nid::from_large_bytes(&array_at::<0, LARGE_NID_LEN, N>(bytes))
            .map_err(HeaderError::BadDestNid)?;
        let src_nid = Nid::from_large_bytes(&array_at::<20, LARGE_NID_LEN, N>(bytes))
            .map_err(HeaderError::BadSrcNid)?;
        Ok(Self {
            dest_nid,
            src_nid,
            dest_pid: u32_at::<40, N>(bytes),
            src_pid: u32_at::<44, N>(bytes),
            payload_length: u32_at::<52, N>(bytes),
            body,
        })
    }

    /// Encodes into the first `form.len()` bytes of `buf` and returns that length. Unused body
    /// bytes are written as zero.
    pub fn emit(&self, form: HeaderForm, buf: &mut [u8]) -> Result<usize, HeaderEmitError> {
        let len = buf.len();
        match form {
            HeaderForm::Nid4 => {
                let Some(out) = buf.first_chunk_mut::<{ Self::NID4_LEN }>() else {
                    return Err(HeaderEmitError::BufferTooSmall { needed: Self::NID4_LEN, len });
                };
                *out = self.emit_nid4()?;
                Ok(Self::NID4_LEN)
            }
            HeaderForm::Nid16 => {
                let Some(out) = buf.first_chunk_mut::<{ Self::NID16_LEN }>() else {
                    return Err(HeaderEmitError::BufferTooSmall { needed: Self::NID16_LEN, len });
                };
                *out = self.emit_nid16();
                Ok(Self::NID16_LEN)
            }
        }
    }

    /// Encodes `struct _lnet_hdr_nid4`; fails rather than truncate a NID with no nid4 form.
    /// lustre: lib-lnet.h `lnet_hdr_to_nid4()` (which truncates silently).
    pub fn emit_nid4(&self) -> Result<[u8; Self::NID4_LEN], HeaderEmitError> {
        const N: usize = Header::NID4_LEN;
        let dest = self.dest_nid.to_nid4().ok_or(HeaderEmitError::DestNidNotNid4(self.dest_nid))?;
        let src = self.src_nid.to_nid4().ok_or(HeaderEmitError::SrcNidNotNid4(self.src_nid))?;
        let mut out = [0u8; N];
        put_u64::<0, N>(&mut out, dest);
        put_u64::<8, N>(&mut out, src);
        put_u32::<16, N>(&mut out, self.dest_pid);
        put_u32::<20, N>(&mut out, self.src_pid);
        put_u32::<24, N>(&mut out, self.msg_type() as u32);
        put_u32::<28, N>(&mut out, self.payload_length);
        put_array::<32, BODY_LEN, N>(&mut out, &self.body.encode());
        Ok(out)
    }

    /// Encodes `struct lnet_hdr_nid16`. lustre: lib-lnet.h `lnet_hdr_to_nid16()`.
    pub fn emit_nid16(&self) -> [u8; Self::NID16_LEN] {
        const N: usize = Header::NID16_LEN;
        let mut out = [0u8; N];
        put_array::<0, LARGE_NID_LEN, N>(&mut out, &self.dest_nid.to_large_bytes());
        put_array::<20, LARGE_NID_LEN, N>(&mut out, &self.src_nid.to_large_bytes());
        put_u32::<40, N>(&mut out, self.dest_pid);
        put_u32::<44, N>(&mut out, self.src_pid);
        put_u32::<48, N>(&mut out, self.msg_type() as u32);
        put_u32::<52, N>(&mut out, self.payload_length);
        put_array::<56, BODY_LEN, N>(&mut out, &self.body.encode());
        out
    }

    /// The checks the kernel applies to every received header before routing or matching.
    /// Destination checks need the receiving NI and are left to the caller.
    /// lustre: lnet/lnet/lib-move.c `lnet_parse()`.
    pub fn validate_received(&self) -> Result<(), HeaderReceiveError> {
        let msg_type = self.msg_type();
        let payload_length = self.payload_length;
        match msg_type {
            MsgType::Hello => return Err(HeaderReceiveError::Hello),
            MsgType::Ack | MsgType::Get if payload_length != 0 => {
                return Err(HeaderReceiveError::PayloadNotAllowed { msg_type, payload_length });
            }
            // LNET_MAX_PAYLOAD (for us) and LNET_MTU (forwarded) are the same value.
            MsgType::Put | MsgType::Reply if payload_length > LNET_MTU => {
                return Err(HeaderReceiveError::PayloadTooLarge { msg_type, payload_length });
            }
            MsgType::Ack | MsgType::Get | MsgType::Put | MsgType::Reply => {}
        }
        if self.src_nid.is_any() {
            return Err(HeaderReceiveError::SrcNidAny);
        }
        Ok(())
    }
}

/// The raw `type` field of a header at the start of `buf`, without decoding the rest.
pub fn raw_msg_type(buf: &[u8], form: HeaderForm) -> Result<u32, HeaderError> {
    let at = match form {
        HeaderForm::Nid4 => 24,
        HeaderForm::Nid16 => 48,
    };
    raw_u32(buf, form, at)
}

/// The `payload_length` of a header at the start of `buf`, without decoding the rest: how many
/// bytes a framer must read after the header.
pub fn raw_payload_length(buf: &[u8], form: HeaderForm) -> Result<u32, HeaderError> {
    let at = match form {
        HeaderForm::Nid4 => 28,
        HeaderForm::Nid16 => 52,
    };
    raw_u32(buf, form, at)
}

impl Body {
    /// Decodes `union lnet_cmd_hdr` for a wire `type`.
    fn decode(msg_type: u32, body: &[u8; BODY_LEN]) -> Result<Self, HeaderError> {
        const N: usize = BODY_LEN;
        let handle = WireHandle {
            interface_cookie: u64_at::<0, N>(body),
            object_cookie: u64_at::<8, N>(body),
        };
        let match_bits = u64_at::<16, N>(body);
        match MsgType::from_u32(msg_type) {
            Some(MsgType::Ack) => {
                Ok(Body::Ack { dst_wmd: handle, match_bits, mlength: u32_at::<24, N>(body) })
            }
            Some(MsgType::Put) => Ok(Body::Put {
                ack_wmd: handle,
                match_bits,
                hdr_data: u64_at::<24, N>(body),
                ptl_index: u32_at::<32, N>(body),
                offset: u32_at::<36, N>(body),
            }),
            Some(MsgType::Get) => Ok(Body::Get {
                return_wmd: handle,
                match_bits,
                ptl_index: u32_at::<24, N>(body),
                src_offset: u32_at::<28, N>(body),
                sink_length: u32_at::<32, N>(body),
            }),
            Some(MsgType::Reply) => Ok(Body::Reply { dst_wmd: handle }),
            Some(MsgType::Hello) => Ok(Body::Hello {
                incarnation: u64_at::<0, N>(body),
                conn_type: u32_at::<8, N>(body),
            }),
            None => Err(HeaderError::UnknownType(msg_type)),
        }
    }

    /// Encodes `union lnet_cmd_hdr` with unused bytes zero.
    fn encode(&self) -> [u8; BODY_LEN] {
        const N: usize = BODY_LEN;
        let mut out = [0u8; N];
        match *self {
            Body::Ack { dst_wmd, match_bits, mlength } => {
                put_handle(&mut out, &dst_wmd);
                put_u64::<16, N>(&mut out, match_bits);
                put_u32::<24, N>(&mut out, mlength);
            }
            Body::Put { ack_wmd, match_bits, hdr_data, ptl_index, offset } => {
                put_handle(&mut out, &ack_wmd);
                put_u64::<16, N>(&mut out, match_bits);
                put_u64::<24, N>(&mut out, hdr_data);
                put_u32::<32, N>(&mut out, ptl_index);
                put_u32::<36, N>(&mut out, offset);
            }
            Body::Get { return_wmd, match_bits, ptl_index, src_offset, sink_length } => {
                put_handle(&mut out, &return_wmd);
                put_u64::<16, N>(&mut out, match_bits);
                put_u32::<24, N>(&mut out, ptl_index);
                put_u32::<28, N>(&mut out, src_offset);
                put_u32::<32, N>(&mut out, sink_length);
            }
            Body::Reply { dst_wmd } => put_handle(&mut out, &dst_wmd),
            Body::Hello { incarnation, conn_type } => {
                put_u64::<0, N>(&mut out, incarnation);
                put_u32::<8, N>(&mut out, conn_type);
            }
        }
        out
    }
}

/// A LE u32 at `at` of a header that must be whole in `buf`.
fn raw_u32(buf: &[u8], form: HeaderForm, at: usize) -> Result<u32, HeaderError> {
    let needed = form.len();
    match buf.get(at..).and_then(<[u8]>::first_chunk::<4>) {
        Some(word) if buf.len() >= needed => Ok(u32::from_le_bytes(*word)),
        _ => Err(HeaderError::Truncated { needed, len: buf.len() }),
    }
}

fn put_handle(out: &mut [u8; BODY_LEN], handle: &WireHandle) {
    put_u64::<0, BODY_LEN>(out, handle.interface_cookie);
    put_u64::<8, BODY_LEN>(out, handle.object_cookie);
}

// Fixed-offset little-endian accessors. Each asserts its bound at compile time, so the slicing
// inside cannot panic and compiles to plain loads and stores.

#[inline(always)]
fn array_at<const AT: usize, const LEN: usize, const N: usize>(bytes: &[u8; N]) -> [u8; LEN] {
    const { assert!(AT + LEN <= N) };
    let mut out = [0u8; LEN];
    out.copy_from_slice(&bytes[AT..AT + LEN]);
    out
}

#[inline(always)]
fn u32_at<const AT: usize, const N: usize>(bytes: &[u8; N]) -> u32 {
    u32::from_le_bytes(array_at::<AT, 4, N>(bytes))
}

#[inline(always)]
fn u64_at<const AT: usize, const N: usize>(bytes: &[u8; N]) -> u64 {
    u64::from_le_bytes(array_at::<AT, 8, N>(bytes))
}

#[inline(always)]
fn put_array<const AT: usize, const LEN: usize, const N: usize>(
    bytes: &mut [u8; N],
    value: &[u8; LEN],
) {
    const { assert!(AT + LEN <= N) };
    bytes[AT..AT + LEN].copy_from_slice(value);
}

#[inline(always)]
fn put_u32<const AT: usize, const N: usize>(bytes: &mut [u8; N], value: u32) {
    put_array::<AT, 4, N>(bytes, &value.to_le_bytes());
}

#[inline(always)]
fn put_u64<const AT: usize, const N: usize>(bytes: &mut [u8; N], value: u64) {
    put_array::<AT, 8, N>(bytes, &value.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::{LndType, Net};
    use proptest::prelude::*;
    use std::net::Ipv4Addr;

    const CLIENT: u64 = 0x0002_0000_C0A8_0102;
    const SERVER: u64 = 0x0002_0000_C0A8_0101;
    const COOKIE: u64 = 0x1870_F7D9_3B1D_2A00;
    const PING_BITS: u64 = 0x8000_0000_0000_0000;

    /// Parses hex dump lines as in docs/protocol/wire.md §10.
    fn hex(text: &str) -> Vec<u8> {
        text.split_whitespace().map(|byte| u8::from_str_radix(byte, 16).unwrap()).collect()
    }

    /// docs/protocol/wire.md §10.10, the LNet header after the 24-byte ksock header.
    fn vector_10_10() -> Vec<u8> {
        let frame = hex("
            c1 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
            00 00 00 00 00 00 00 00 01 01 a8 c0 00 00 02 00
            02 01 a8 c0 00 00 02 00 39 30 00 00 39 30 00 00
            02 00 00 00 00 00 00 00 00 2a 1d 3b d9 f7 70 18
            09 04 00 00 00 00 00 00 00 00 00 00 00 00 00 80
            00 00 00 00 00 00 00 00 10 01 00 00 00 00 00 00");
        frame[24..96].to_vec()
    }

    /// docs/protocol/wire.md §10.13, the LNet header after the 24-byte ksock header.
    fn vector_10_13() -> Vec<u8> {
        let frame = hex("
            c1 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
            00 00 00 00 00 00 00 00 02 01 a8 c0 00 00 02 00
            01 01 a8 c0 00 00 02 00 39 30 00 00 39 30 00 00
            00 00 00 00 00 00 00 00 00 2a 1d 3b d9 f7 70 18
            0d 04 00 00 00 00 00 00 00 00 00 00 00 00 00 80
            30 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00");
        frame[24..96].to_vec()
    }

    fn ping_get() -> Header {
        Header {
            dest_nid: Nid::from_nid4(SERVER),
            src_nid: Nid::from_nid4(CLIENT),
            dest_pid: 12345,
            src_pid: 12345,
            payload_length: 0,
            body: Body::Get {
                return_wmd: WireHandle { interface_cookie: COOKIE, object_cookie: 0x409 },
                match_bits: PING_BITS,
                ptl_index: 0,
                src_offset: 0,
                sink_length: 272,
            },
        }
    }

    fn push_ack() -> Header {
        Header {
            dest_nid: Nid::from_nid4(CLIENT),
            src_nid: Nid::from_nid4(SERVER),
            dest_pid: 12345,
            src_pid: 12345,
            payload_length: 0,
            body: Body::Ack {
                dst_wmd: WireHandle { interface_cookie: COOKIE, object_cookie: 0x40d },
                match_bits: PING_BITS,
                mlength: 48,
            },
        }
    }

    fn put(payload_length: u32) -> Header {
        Header {
            dest_nid: Nid::ipv4(Net::TCP, Ipv4Addr::new(192, 168, 1, 1)),
            src_nid: Nid::ipv4(Net::TCP, Ipv4Addr::new(192, 168, 1, 2)),
            dest_pid: 12345,
            src_pid: 12345,
            payload_length,
            body: Body::Put {
                ack_wmd: WireHandle::NONE,
                match_bits: 0x1234,
                hdr_data: 0x5678,
                ptl_index: 4,
                offset: 0,
            },
        }
    }

    #[test]
    fn vector_10_10_ping_get_both_directions() {
        let bytes = vector_10_10();
        assert_eq!(Header::parse(&bytes, HeaderForm::Nid4), Ok(ping_get()));
        assert_eq!(ping_get().emit_nid4().unwrap().as_slice(), bytes.as_slice());
        assert_eq!(ping_get().validate_received(), Ok(()));
    }

    #[test]
    fn vector_10_13_ack_both_directions() {
        let bytes = vector_10_13();
        assert_eq!(Header::parse(&bytes, HeaderForm::Nid4), Ok(push_ack()));
        let mut out = [0xaa; 80];
        assert_eq!(push_ack().emit(HeaderForm::Nid4, &mut out), Ok(72));
        assert_eq!(&out[..72], bytes.as_slice());
        assert_eq!(out[72..], [0xaa; 8], "bytes past the header are left alone");
    }

    #[test]
    fn nid16_form_layout() {
        // The 10.10 GET in the V4 form: large NIDs, then the same fields 24 bytes later.
        let mut expected = vec![0u8; 96];
        expected[..8].copy_from_slice(&[0, 2, 0, 0, 0xc0, 0xa8, 1, 1]);
        expected[20..28].copy_from_slice(&[0, 2, 0, 0, 0xc0, 0xa8, 1, 2]);
        expected[40..56].copy_from_slice(&vector_10_10()[16..32]);
        expected[56..].copy_from_slice(&vector_10_10()[32..]);
        assert_eq!(ping_get().emit_nid16().as_slice(), expected.as_slice());
        assert_eq!(Header::parse(&expected, HeaderForm::Nid16), Ok(ping_get()));
    }

    #[test]
    fn nid16_form_carries_ipv6() {
        let v6 = Nid::ipv6(Net::TCP, "2001:db8::2".parse().unwrap());
        let header = Header { src_nid: v6, ..put(10) };
        let bytes = header.emit_nid16();
        assert_eq!(bytes[20..40], v6.to_large_bytes());
        assert_eq!(Header::parse(&bytes, HeaderForm::Nid16), Ok(header));
    }

    #[test]
    fn every_body_layout() {
        let handle = WireHandle { interface_cookie: 0x0102_0304_0506_0708, object_cookie: 9 };
        let mut handle_bytes = [0u8; 16];
        handle_bytes[..8].copy_from_slice(&0x0102_0304_0506_0708u64.to_le_bytes());
        handle_bytes[8] = 9;
        let cases: [(Body, u32, Vec<u8>); 5] = [
            (
                Body::Put { ack_wmd: handle, match_bits: 2, hdr_data: 3, ptl_index: 4, offset: 5 },
                1,
                [
                    &handle_bytes[..],
                    &[2, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 5, 0, 0, 0],
                ]
                .concat(),
            ),
            (
                Body::Get {
                    return_wmd: handle,
                    match_bits: 2,
                    ptl_index: 3,
                    src_offset: 4,
                    sink_length: 5,
                },
                2,
                [
                    &handle_bytes[..],
                    &[2, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0],
                ]
                .concat(),
            ),
            (
                Body::Ack { dst_wmd: handle, match_bits: 2, mlength: 3 },
                0,
                [&handle_bytes[..], &[2, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0], &[0; 12]].concat(),
            ),
            (Body::Reply { dst_wmd: handle }, 3, [&handle_bytes[..], &[0; 24]].concat()),
            (
                Body::Hello { incarnation: 0x0102_0304_0506_0708, conn_type: 3 },
                4,
                [&handle_bytes[..8], &[3, 0, 0, 0], &[0; 28]].concat(),
            ),
        ];
        for (body, msg_type, body_bytes) in cases {
            let header = Header { body, ..put(0) };
            let bytes = header.emit_nid4().unwrap();
            assert_eq!(u32::from_le_bytes(bytes[24..28].try_into().unwrap()), msg_type);
            assert_eq!(&bytes[32..], body_bytes.as_slice(), "{body:?}");
            assert_eq!(Header::parse_nid4(&bytes), Ok(header));
            assert_eq!(&header.emit_nid16()[56..], body_bytes.as_slice(), "{body:?}");
        }
    }

    #[test]
    fn unused_body_bytes_are_ignored_on_parse() {
        let mut bytes = vector_10_13();
        bytes[32 + 28..].fill(0xee);
        assert_eq!(Header::parse(&bytes, HeaderForm::Nid4), Ok(push_ack()));
        let mut bytes = push_ack().emit_nid16();
        bytes[8..20].fill(0xee); // past the 4-byte addresses too
        bytes[56 + 28..].fill(0xee);
        assert_eq!(Header::parse(&bytes, HeaderForm::Nid16), Ok(push_ack()));
    }

    #[test]
    fn raw_accessors_read_framing_fields() {
        let bytes = put(4096).emit_nid4().unwrap();
        assert_eq!(raw_payload_length(&bytes, HeaderForm::Nid4), Ok(4096));
        assert_eq!(raw_msg_type(&bytes, HeaderForm::Nid4), Ok(1));
        let bytes = put(777).emit_nid16();
        assert_eq!(raw_payload_length(&bytes, HeaderForm::Nid16), Ok(777));
        assert_eq!(raw_msg_type(&bytes, HeaderForm::Nid16), Ok(1));
        assert_eq!(
            raw_payload_length(&bytes[..95], HeaderForm::Nid16),
            Err(HeaderError::Truncated { needed: 96, len: 95 })
        );
        assert_eq!(
            raw_msg_type(&bytes[..20], HeaderForm::Nid4),
            Err(HeaderError::Truncated { needed: 72, len: 20 })
        );
    }

    #[test]
    fn truncated_input_is_rejected() {
        assert_eq!(
            Header::parse(&vector_10_10()[..71], HeaderForm::Nid4),
            Err(HeaderError::Truncated { needed: 72, len: 71 })
        );
        assert_eq!(
            Header::parse(&vector_10_10(), HeaderForm::Nid16),
            Err(HeaderError::Truncated { needed: 96, len: 72 })
        );
    }

    #[test]
    fn every_wildcard_nid4_is_any() {
        let mut bytes = vector_10_10();
        bytes[8..16].copy_from_slice(&0x00ff_1234_0000_0001u64.to_le_bytes());
        let header = Header::parse(&bytes, HeaderForm::Nid4).unwrap();
        assert_eq!(header.src_nid, Nid::ANY);
        assert_eq!(header.validate_received(), Err(HeaderReceiveError::SrcNidAny));
    }

    #[test]
    fn unknown_type_is_rejected_on_parse() {
        let mut bytes = vector_10_10();
        bytes[24] = 5;
        assert_eq!(Header::parse(&bytes, HeaderForm::Nid4), Err(HeaderError::UnknownType(5)));
        let mut bytes = ping_get().emit_nid16();
        bytes[48..52].copy_from_slice(&0xdead_beefu32.to_le_bytes());
        assert_eq!(
            Header::parse(&bytes, HeaderForm::Nid16),
            Err(HeaderError::UnknownType(0xdead_beef))
        );
    }

    #[test]
    fn oversized_large_nids_are_rejected() {
        let mut bytes = ping_get().emit_nid16();
        bytes[0] = 13;
        assert_eq!(
            Header::parse(&bytes, HeaderForm::Nid16),
            Err(HeaderError::BadDestNid(LargeNidError::SizeTooLarge(17)))
        );
        let mut bytes = ping_get().emit_nid16();
        bytes[20] = 0xfe;
        assert!(matches!(
            Header::parse(&bytes, HeaderForm::Nid16),
            Err(HeaderError::BadSrcNid(LargeNidError::SizeTooLarge(_)))
        ));
    }

    #[test]
    fn emit_errors() {
        let mut short = [0u8; 95];
        assert_eq!(
            ping_get().emit(HeaderForm::Nid16, &mut short),
            Err(HeaderEmitError::BufferTooSmall { needed: 96, len: 95 })
        );
        assert_eq!(
            ping_get().emit(HeaderForm::Nid4, &mut short[..71]),
            Err(HeaderEmitError::BufferTooSmall { needed: 72, len: 71 })
        );
        let v6 = Nid::ipv6(Net::TCP, "2001:db8::1".parse().unwrap());
        let header = Header { dest_nid: v6, ..ping_get() };
        assert_eq!(header.emit_nid4(), Err(HeaderEmitError::DestNidNotNid4(v6)));
        let header = Header { src_nid: v6, ..ping_get() };
        assert_eq!(
            header.emit(HeaderForm::Nid4, &mut [0; 72]),
            Err(HeaderEmitError::SrcNidNotNid4(v6))
        );
    }

    #[test]
    fn receive_checks() {
        let hello = Header { body: Body::Hello { incarnation: 1, conn_type: 0 }, ..ping_get() };
        assert_eq!(hello.validate_received(), Err(HeaderReceiveError::Hello));
        let get = Header { payload_length: 1, ..ping_get() };
        assert_eq!(
            get.validate_received(),
            Err(HeaderReceiveError::PayloadNotAllowed {
                msg_type: MsgType::Get,
                payload_length: 1
            })
        );
        let ack = Header { payload_length: 48, ..push_ack() };
        assert_eq!(
            ack.validate_received(),
            Err(HeaderReceiveError::PayloadNotAllowed {
                msg_type: MsgType::Ack,
                payload_length: 48
            })
        );
        assert_eq!(put(LNET_MTU).validate_received(), Ok(()));
        assert_eq!(
            put(LNET_MTU + 1).validate_received(),
            Err(HeaderReceiveError::PayloadTooLarge {
                msg_type: MsgType::Put,
                payload_length: LNET_MTU + 1
            })
        );
        let reply = Header { body: Body::Reply { dst_wmd: WireHandle::NONE }, ..put(LNET_MTU + 1) };
        assert_eq!(
            reply.validate_received(),
            Err(HeaderReceiveError::PayloadTooLarge {
                msg_type: MsgType::Reply,
                payload_length: LNET_MTU + 1
            })
        );
        let anonymous = Header { src_nid: Nid::ANY, ..put(0) };
        assert_eq!(anonymous.validate_received(), Err(HeaderReceiveError::SrcNidAny));
    }

    fn any_handle() -> impl Strategy<Value = WireHandle> {
        (any::<u64>(), any::<u64>()).prop_map(|(interface_cookie, object_cookie)| WireHandle {
            interface_cookie,
            object_cookie,
        })
    }

    fn any_body() -> impl Strategy<Value = Body> {
        prop_oneof![
            (any_handle(), any::<u64>(), any::<u32>()).prop_map(
                |(dst_wmd, match_bits, mlength)| Body::Ack { dst_wmd, match_bits, mlength }
            ),
            (any_handle(), any::<u64>(), any::<u64>(), any::<u32>(), any::<u32>()).prop_map(
                |(ack_wmd, match_bits, hdr_data, ptl_index, offset)| {
                    Body::Put { ack_wmd, match_bits, hdr_data, ptl_index, offset }
                }
            ),
            (any_handle(), any::<u64>(), any::<u32>(), any::<u32>(), any::<u32>()).prop_map(
                |(return_wmd, match_bits, ptl_index, src_offset, sink_length)| Body::Get {
                    return_wmd,
                    match_bits,
                    ptl_index,
                    src_offset,
                    sink_length
                }
            ),
            any_handle().prop_map(|dst_wmd| Body::Reply { dst_wmd }),
            (any::<u64>(), any::<u32>())
                .prop_map(|(incarnation, conn_type)| Body::Hello { incarnation, conn_type }),
        ]
    }

    /// NIDs with a nid4 form: any LND but the wildcard, plus ANY itself.
    fn any_nid4() -> impl Strategy<Value = Nid> + Clone {
        prop_oneof![
            (0u8..0xff, any::<u16>(), any::<u32>())
                .prop_map(|(lnd, number, addr)| Nid::new4(Net::new(LndType(lnd), number), addr)),
            Just(Nid::ANY),
        ]
    }

    fn any_nid() -> impl Strategy<Value = Nid> + Clone {
        prop_oneof![
            any_nid4(),
            (0u8..0xff, any::<u16>(), any::<[u8; 16]>()).prop_map(|(lnd, number, addr)| {
                Nid::ipv6(Net::new(LndType(lnd), number), addr.into())
            }),
        ]
    }

    fn any_header(nid: impl Strategy<Value = Nid> + Clone) -> impl Strategy<Value = Header> {
        (nid.clone(), nid, any::<u32>(), any::<u32>(), any::<u32>(), any_body()).prop_map(
            |(dest_nid, src_nid, dest_pid, src_pid, payload_length, body)| Header {
                dest_nid,
                src_nid,
                dest_pid,
                src_pid,
                payload_length,
                body,
            },
        )
    }

    proptest! {
        #[test]
        fn nid16_round_trip(header in any_header(any_nid())) {
            let bytes = header.emit_nid16();
            prop_assert_eq!(Header::parse(&bytes, HeaderForm::Nid16), Ok(header));
            prop_assert_eq!(raw_payload_length(&bytes, HeaderForm::Nid16), Ok(header.payload_length));
            prop_assert_eq!(raw_msg_type(&bytes, HeaderForm::Nid16), Ok(header.msg_type() as u32));
        }

        #[test]
        fn nid4_round_trip(header in any_header(any_nid4())) {
            let bytes = header.emit_nid4().unwrap();
            prop_assert_eq!(Header::parse(&bytes, HeaderForm::Nid4), Ok(header));
            prop_assert_eq!(raw_payload_length(&bytes, HeaderForm::Nid4), Ok(header.payload_length));
        }

        #[test]
        fn parse_is_total_and_stable(
            mut bytes in proptest::collection::vec(any::<u8>(), 0..120),
            msg_type in 0u32..6,
        ) {
            for form in [HeaderForm::Nid4, HeaderForm::Nid16] {
                // Mostly-known types, so most inputs get past the type check.
                let at = if form == HeaderForm::Nid4 { 24 } else { 48 };
                if let Some(field) = bytes.get_mut(at..at + 4) {
                    field.copy_from_slice(&msg_type.to_le_bytes());
                }
                if let Ok(header) = Header::parse(&bytes, form) {
                    // Whatever parsed re-encodes to something that parses the same.
                    let mut out = [0u8; 96];
                    let len = header.emit(form, &mut out).unwrap();
                    prop_assert_eq!(Header::parse(&out[..len], form), Ok(header));
                    let _ = header.validate_received();
                }
            }
        }
    }
}
