//! The LNet message header: classic 72-byte nid4 form (socklnd V1-V3) and 96-byte large-NID
//! form (V4), with the 40-byte per-type body shared by both.
//!
//! lustre: include/uapi/linux/lnet/lnet-idl.h (`struct _lnet_hdr_nid4`, `struct lnet_hdr_nid16`,
//! `union lnet_cmd_hdr`), include/linux/lnet/lib-lnet.h (`lnet_hdr_from_nid4`, ...),
//! lnet/lnet/lib-move.c `lnet_parse()` for the receive-side checks.

use crate::addr::Nid;

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
    Ack { dst_wmd: WireHandle, match_bits: u64, mlength: u32 },
    Put { ack_wmd: WireHandle, match_bits: u64, hdr_data: u64, ptl_index: u32, offset: u32 },
    Get { return_wmd: WireHandle, match_bits: u64, ptl_index: u32, src_offset: u32, sink_length: u32 },
    Reply { dst_wmd: WireHandle },
    Hello { incarnation: u64, conn_type: u32 },
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
    #[allow(clippy::len_without_is_empty)]
    pub const fn len(self) -> usize {
        match self {
            HeaderForm::Nid4 => 72,
            HeaderForm::Nid16 => 96,
        }
    }
}
