//! The whole receive side of one socklnd connection as a pure decoder: the acceptor connreq, the
//! peer's hello, then framed messages (ksock header, LNet header, payload), with ping buffers and
//! selftest messages recognised inside payloads.
//!
//! It applies the checks a passive node applies, in the kernel's order, and stops at the first
//! point where the kernel would close the connection. It needs no local configuration, so checks
//! that depend on the node's own NIs (the connreq target, the destination NID of each message)
//! and on connection state (pending ZC cookies) are left to the caller. Tools use it to
//! pretty-print captured streams; the fuzz targets use it to drive every decoder in sequence.
//!
//! lustre: lnet/lnet/acceptor.c `lnet_accept()`, lnet/klnds/socklnd/socklnd_cb.c
//! `ksocknal_recv_hello()`, `ksocknal_process_receive()`, lnet/lnet/lib-move.c `lnet_parse()`.

use super::acceptor::{AcceptorError, ConnReq, ConnReqParse, DowngradeReason};
use super::cursor::ByteOrder;
use super::header::{Body, Header, HeaderError, HeaderReceiveError};
use super::hello::{
    ConnType, Hello, HelloError, HelloParse, PassiveHelloError, ProtoVersion, UnknownHelloVersion,
    passive_conn_type,
};
use super::ksock::{KsockError, KsockHeader, KsockMsgType, ZcAck, ZcAckError, v2_message_checksum};
use super::ping::{LNET_PROTO_PING_MAGIC, LNET_PROTO_PING_MATCHBITS, LNET_RESERVED_PORTAL};
use super::ping::{PingError, PingInfo};
use super::selftest::{self, SrpcMsg, SrpcParseError};
use super::selftest::{
    SRPC_FRAMEWORK_REQUEST_PORTAL, SRPC_MSG_LEN, SRPC_MSG_MAGIC, SRPC_RDMA_PORTAL,
    SRPC_REQUEST_PORTAL,
};

/// Decodes the bytes one side of a socklnd connection received, item by item. Iteration ends
/// at the end of the input, after an item that closes the connection ([`StreamEvent::Downgrade`],
/// [`StreamEvent::UnknownHelloVersion`]), or after the first error.
#[derive(Clone, Debug)]
pub struct StreamDecoder<'a> {
    input: &'a [u8],
    offset: usize,
    state: State,
}

/// One decoded item and where it sits in the input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamItem<'a> {
    /// Offset of the item's first byte in the input.
    pub offset: usize,
    /// Bytes the item occupies.
    pub len: usize,
    pub event: StreamEvent<'a>,
}

/// What the receiver found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StreamEvent<'a> {
    /// The acceptor connreq; the hello follows.
    ConnReq { request: ConnReq, byte_order: ByteOrder },
    /// The acceptor answers with its downgrade message and closes.
    Downgrade(DowngradeReason),
    /// The peer's hello and the connection type the passive side takes for it.
    Hello { hello: Hello, byte_order: ByteOrder, own_conn_type: ConnType },
    /// A hello in a version this side does not speak: answered, then closed.
    UnknownHelloVersion(UnknownHelloVersion),
    /// A NOOP: a ZC-ACK or a keepalive.
    Noop { ksock: KsockHeader, ack: ZcAck },
    /// An LNET message that passed the receive checks, with its whole payload.
    Message(Box<Message<'a>>),
}

/// A received LNET message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message<'a> {
    /// The ksock header; absent on V1 connections, which frame bare LNet headers.
    pub ksock: Option<KsockHeader>,
    /// The ZC-ACK piggy-backed on the ksock header.
    pub ack: ZcAck,
    pub header: Header,
    /// Exactly `header.payload_length` bytes.
    pub payload: &'a [u8],
    pub content: PayloadContent,
}

/// What a payload was recognised as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PayloadContent {
    /// Empty, or nothing this decoder recognises (bulk data, Lustre RPCs).
    Opaque,
    /// A ping buffer: a PUT to the reserved portal with the ping match bits (a discovery push),
    /// or a REPLY whose payload starts with the ping magic in either order. A REPLY names no
    /// portal; matching it to its GET needs the sender's MD, so the magic stands in for it.
    Ping(Result<(PingInfo, usize), PingError>),
    /// A selftest RPC: a PUT to a selftest request portal, or a 160-byte PUT to the RDMA portal
    /// that starts with the selftest magic (other PUTs there are bulk data).
    Selftest(Result<(SrpcMsg, selftest::ByteOrder), SrpcParseError>),
}

/// Where decoding stopped and why: each kind is a reason the kernel closes the connection,
/// except [`StreamErrorKind::Truncated`], which is the input ending inside an item.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("at byte {offset}: {kind}")]
pub struct StreamError {
    /// Offset of the first byte of the item that failed.
    pub offset: usize,
    pub kind: StreamErrorKind,
}

/// Why the stream cannot be decoded further.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StreamErrorKind {
    /// The input ends inside an item: `needed` bytes of it are required, `available` remain.
    #[error("input ends inside the {stage:?}: {needed} bytes needed, {available} available")]
    Truncated { stage: Stage, needed: usize, available: usize },
    #[error("acceptor: {0}")]
    Acceptor(AcceptorError),
    #[error("hello: {0}")]
    Hello(HelloError),
    #[error("hello connection type: {0}")]
    ConnType(PassiveHelloError),
    #[error("ksock header: {0}")]
    Ksock(KsockError),
    #[error("ZC-ACK: {0}")]
    ZcAck(ZcAckError),
    #[error("LNet header: {0}")]
    Header(HeaderError),
    #[error("LNet header rejected: {0}")]
    Receive(HeaderReceiveError),
    /// A V2 message whose non-zero `ksh_csum` does not match its bytes ("Checksum error").
    #[error("V2 checksum {sent:#010x}, computed {computed:#010x}")]
    ChecksumMismatch { sent: u32, computed: u32 },
}

/// The part of the stream being read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stage {
    ConnReq,
    Hello,
    KsockHeader,
    LnetHeader,
    Payload,
}

impl<'a> StreamDecoder<'a> {
    /// Decodes a connection's received bytes from the start, as the accepting side sees them:
    /// connreq first.
    pub fn new(input: &'a [u8]) -> Self {
        Self { input, offset: 0, state: State::ConnReq }
    }

    /// Decodes a connection's received bytes as the connecting side sees them: the peer's reply
    /// hello first. A reply of type NONE (the "retry" or "refused" answer) ends the stream.
    pub fn active(input: &'a [u8]) -> Self {
        Self { input, offset: 0, state: State::ReplyHello }
    }

    /// Decodes the bytes after the hellos of a connection of `version`, whose peer sends in
    /// `byte_order` (the active side's view, or a capture cut after the handshake).
    pub fn after_hello(input: &'a [u8], version: ProtoVersion, byte_order: ByteOrder) -> Self {
        Self { input, offset: 0, state: State::Messages { version, byte_order } }
    }

    /// Bytes consumed so far.
    pub fn offset(&self) -> usize {
        self.offset
    }

    fn rest(&self) -> &'a [u8] {
        self.input.get(self.offset..).unwrap_or_default()
    }

    fn step(&mut self) -> Result<Option<StreamItem<'a>>, StreamErrorKind> {
        let rest = self.rest();
        match self.state {
            State::Done => Ok(None),
            _ if rest.is_empty() => Ok(None),
            State::ConnReq => self.connreq(rest).map(Some),
            State::Hello => self.hello(rest).map(Some),
            State::ReplyHello => self.reply_hello(rest).map(Some),
            State::Messages { version, byte_order } => {
                self.message(rest, version, byte_order).map(Some)
            }
        }
    }

    /// lustre: acceptor.c `lnet_accept()`.
    fn connreq(&mut self, rest: &'a [u8]) -> Result<StreamItem<'a>, StreamErrorKind> {
        match ConnReq::parse(rest).map_err(StreamErrorKind::Acceptor)? {
            ConnReqParse::NeedMore(more) => Err(truncated(Stage::ConnReq, rest, more)),
            ConnReqParse::Downgrade(reason) => {
                self.state = State::Done;
                // The acceptor decided after the magic, or after magic and version.
                let len = match reason {
                    DowngradeReason::UnifiedProtocolProbe => 4,
                    DowngradeReason::UnknownVersion(_) => ConnReq::PREFIX_LEN,
                };
                Ok(self.item(len, StreamEvent::Downgrade(reason)))
            }
            ConnReqParse::Request { request, byte_order, len } => {
                self.state = State::Hello;
                Ok(self.item(len, StreamEvent::ConnReq { request, byte_order }))
            }
        }
    }

    /// lustre: socklnd_cb.c `ksocknal_recv_hello()` (passive side).
    fn hello(&mut self, rest: &'a [u8]) -> Result<StreamItem<'a>, StreamErrorKind> {
        match Hello::parse(rest).map_err(StreamErrorKind::Hello)? {
            HelloParse::NeedMore(more) => Err(truncated(Stage::Hello, rest, more)),
            HelloParse::UnknownVersion(unknown) => {
                self.state = State::Done;
                Ok(self.item(Hello::PREFIX_LEN, StreamEvent::UnknownHelloVersion(unknown)))
            }
            HelloParse::Complete { hello, byte_order, len } => {
                let own_conn_type =
                    passive_conn_type(hello.conn_type).map_err(StreamErrorKind::ConnType)?;
                self.state = State::Messages { version: hello.version, byte_order };
                Ok(self.item(len, StreamEvent::Hello { hello, byte_order, own_conn_type }))
            }
        }
    }

    /// lustre: socklnd_cb.c `ksocknal_recv_hello()` (active side): the reply's type is the
    /// peer's view; NONE asks the connector to retry or give up, and the connection closes.
    fn reply_hello(&mut self, rest: &'a [u8]) -> Result<StreamItem<'a>, StreamErrorKind> {
        match Hello::parse(rest).map_err(StreamErrorKind::Hello)? {
            HelloParse::NeedMore(more) => Err(truncated(Stage::Hello, rest, more)),
            HelloParse::UnknownVersion(unknown) => {
                self.state = State::Done;
                Ok(self.item(Hello::PREFIX_LEN, StreamEvent::UnknownHelloVersion(unknown)))
            }
            HelloParse::Complete { hello, byte_order, len } => {
                let own_conn_type = if hello.conn_type == ConnType::NONE {
                    self.state = State::Done;
                    ConnType::NONE
                } else {
                    self.state = State::Messages { version: hello.version, byte_order };
                    hello.conn_type.invert()
                };
                Ok(self.item(len, StreamEvent::Hello { hello, byte_order, own_conn_type }))
            }
        }
    }

    /// One framed message. lustre: socklnd_cb.c `ksocknal_process_receive()`.
    fn message(
        &mut self,
        rest: &'a [u8],
        version: ProtoVersion,
        byte_order: ByteOrder,
    ) -> Result<StreamItem<'a>, StreamErrorKind> {
        let (ksock, header_at) = if version.has_ksock_header() {
            let Some(bytes) = rest.get(..KsockHeader::LEN) else {
                return Err(truncated_at(Stage::KsockHeader, rest, KsockHeader::LEN));
            };
            let ksock = KsockHeader::parse(bytes, byte_order).map_err(StreamErrorKind::Ksock)?;
            (Some(ksock), KsockHeader::LEN)
        } else {
            (None, 0)
        };
        let ack = match ksock {
            Some(ksock) => ksock.zc_ack().map_err(StreamErrorKind::ZcAck)?,
            None => ZcAck::None,
        };
        if let Some(ksock) = ksock.filter(|k| k.msg_type == KsockMsgType::Noop) {
            // lustre: ksocknal_process_receive() verifies a NOOP's checksum before its ACK.
            check_v2_checksum(version, &ksock, &[], &[])?;
            return Ok(self.item(KsockHeader::LEN, StreamEvent::Noop { ksock, ack }));
        }

        let form = version.header_form();
        let header_end = header_at + form.len();
        let Some(header_bytes) = rest.get(header_at..header_end) else {
            return Err(truncated_at(Stage::LnetHeader, rest, header_end));
        };
        let header = Header::parse(header_bytes, form).map_err(StreamErrorKind::Header)?;
        header.validate_received().map_err(StreamErrorKind::Receive)?;
        // Widening: validate_received bounds payload_length by LNET_MTU.
        let message_len = header_end + header.payload_length as usize;
        let Some(payload) = rest.get(header_end..message_len) else {
            return Err(truncated_at(Stage::Payload, rest, message_len));
        };
        if let Some(ksock) = &ksock {
            check_v2_checksum(version, ksock, header_bytes, payload)?;
        }
        let content = classify(&header, payload);
        let message = Message { ksock, ack, header, payload, content };
        Ok(self.item(message_len, StreamEvent::Message(Box::new(message))))
    }

    fn item(&mut self, len: usize, event: StreamEvent<'a>) -> StreamItem<'a> {
        let offset = self.offset;
        self.offset = offset.saturating_add(len);
        StreamItem { offset, len, event }
    }
}

impl<'a> Iterator for StreamDecoder<'a> {
    type Item = Result<StreamItem<'a>, StreamError>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.step() {
            Ok(item) => item.map(Ok),
            Err(kind) => {
                self.state = State::Done;
                Some(Err(StreamError { offset: self.offset, kind }))
            }
        }
    }
}

impl std::iter::FusedIterator for StreamDecoder<'_> {}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    ConnReq,
    Hello,
    ReplyHello,
    Messages { version: ProtoVersion, byte_order: ByteOrder },
    Done,
}

/// V2 receivers verify a non-zero checksum over the whole message. V3/V4 receivers only run the
/// CRC over payload pages, so a V3/V4 sender's checksum is ignored, as docs/protocol/wire.md §3.5 recommends.
/// lustre: socklnd_cb.c `ksocknal_process_receive()`, socklnd_lib.c `ksocknal_lib_csum_tx()`.
fn check_v2_checksum(
    version: ProtoVersion,
    ksock: &KsockHeader,
    lnet_header: &[u8],
    payload: &[u8],
) -> Result<(), StreamErrorKind> {
    if version != ProtoVersion::V2 || ksock.csum == 0 {
        return Ok(());
    }
    let computed = v2_message_checksum(ksock, lnet_header, payload);
    if computed != ksock.csum {
        return Err(StreamErrorKind::ChecksumMismatch { sent: ksock.csum, computed });
    }
    Ok(())
}

/// Recognises ping buffers and selftest RPCs by portal and match bits (and magic where the
/// header alone cannot tell). lustre: api-ni.c (ping and push targets), selftest/rpc.c.
fn classify(header: &Header, payload: &[u8]) -> PayloadContent {
    let magic = payload.first_chunk::<4>().map(|word| u32::from_le_bytes(*word));
    let is_magic = |constant: u32| magic == Some(constant) || magic == Some(constant.swap_bytes());
    match header.body {
        Body::Put { ptl_index: LNET_RESERVED_PORTAL, match_bits, .. }
            if match_bits == LNET_PROTO_PING_MATCHBITS =>
        {
            PayloadContent::Ping(PingInfo::parse(payload))
        }
        Body::Reply { .. } if is_magic(LNET_PROTO_PING_MAGIC) => {
            PayloadContent::Ping(PingInfo::parse(payload))
        }
        Body::Put { ptl_index: SRPC_REQUEST_PORTAL | SRPC_FRAMEWORK_REQUEST_PORTAL, .. } => {
            PayloadContent::Selftest(SrpcMsg::parse(payload))
        }
        Body::Put { ptl_index: SRPC_RDMA_PORTAL, .. }
            if payload.len() == SRPC_MSG_LEN && is_magic(SRPC_MSG_MAGIC) =>
        {
            PayloadContent::Selftest(SrpcMsg::parse(payload))
        }
        _ => PayloadContent::Opaque,
    }
}

/// The input ends `more` bytes short of a decision.
fn truncated(stage: Stage, rest: &[u8], more: usize) -> StreamErrorKind {
    StreamErrorKind::Truncated {
        stage,
        needed: rest.len().saturating_add(more),
        available: rest.len(),
    }
}

/// The input ends before byte `end` of the item.
fn truncated_at(stage: Stage, rest: &[u8], end: usize) -> StreamErrorKind {
    StreamErrorKind::Truncated { stage, needed: end, available: rest.len() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::{Net, Nid};
    use crate::wire::acceptor::{ConnReqVersion, DOWNGRADE_ANSWER, LNET_PROTO_MAGIC};
    use crate::wire::header::{HeaderForm, LNET_MTU, MsgType, WireHandle};
    use crate::wire::hello::LocalIdentity;
    use crate::wire::ping::NiStatus;
    use crate::wire::ping::{LNET_PING_FEAT_DISCOVERY, LNET_PING_FEAT_NI_STATUS};
    use crate::wire::selftest::{LST_PING_TEST_MAGIC, PingRequest, SrpcBody};
    use proptest::prelude::*;
    use std::net::Ipv4Addr;

    fn client() -> Nid {
        Nid::ipv4(Net::TCP, Ipv4Addr::new(192, 168, 1, 2))
    }

    fn server() -> Nid {
        Nid::ipv4(Net::TCP, Ipv4Addr::new(192, 168, 1, 1))
    }

    fn hello(version: ProtoVersion) -> Hello {
        let local = LocalIdentity { nid: client(), pid: 12345, incarnation: 0x1870_F7D9_3B1D_2A00 };
        Hello::active(version, &local, server(), ConnType::CONTROL)
    }

    fn handshake(version: ProtoVersion) -> Vec<u8> {
        let mut out = vec![0u8; ConnReq::V1_LEN];
        ConnReq::new(server()).emit(&mut out).unwrap();
        let hello = hello(version);
        let at = out.len();
        out.resize(at + hello.buffer_len(), 0);
        hello.emit(&mut out[at..]).unwrap();
        out
    }

    fn header(body: Body, payload_length: u32) -> Header {
        Header {
            dest_nid: server(),
            src_nid: client(),
            dest_pid: 12345,
            src_pid: 12345,
            payload_length,
            body,
        }
    }

    fn put(ptl_index: u32, match_bits: u64, payload_length: u32) -> Header {
        header(
            Body::Put { ack_wmd: WireHandle::NONE, match_bits, hdr_data: 0, ptl_index, offset: 0 },
            payload_length,
        )
    }

    fn reply(payload_length: u32) -> Header {
        header(
            Body::Reply { dst_wmd: WireHandle { interface_cookie: 1, object_cookie: 2 } },
            payload_length,
        )
    }

    /// Appends one framed message of `version`.
    fn frame(
        out: &mut Vec<u8>,
        version: ProtoVersion,
        ksock: KsockHeader,
        header: &Header,
        payload: &[u8],
    ) {
        if version.has_ksock_header() {
            out.extend_from_slice(&ksock.emit());
        }
        let form = version.header_form();
        let at = out.len();
        out.resize(at + form.len(), 0);
        header.emit(form, &mut out[at..]).unwrap();
        out.extend_from_slice(payload);
    }

    fn ping_info() -> PingInfo {
        PingInfo {
            features: LNET_PING_FEAT_NI_STATUS | LNET_PING_FEAT_DISCOVERY,
            pid: 12345,
            sequence: 7,
            nids: vec![NiStatus::up(server())],
            large: Vec::new(),
            metadata: Vec::new(),
        }
    }

    fn collect(decoder: StreamDecoder<'_>) -> (Vec<StreamItem<'_>>, Option<StreamError>) {
        let mut items = Vec::new();
        for result in decoder {
            match result {
                Ok(item) => items.push(item),
                Err(error) => return (items, Some(error)),
            }
        }
        (items, None)
    }

    fn message<'a>(item: &'a StreamItem<'_>) -> &'a Message<'a> {
        match &item.event {
            StreamEvent::Message(message) => message,
            other => panic!("expected a message, got {other:?}"),
        }
    }

    #[test]
    fn decodes_a_v3_connection() {
        let mut bytes = handshake(ProtoVersion::V3);
        let ping = ping_info().to_bytes().unwrap();
        let get = header(
            Body::Get {
                return_wmd: WireHandle { interface_cookie: 1, object_cookie: 2 },
                match_bits: LNET_PROTO_PING_MATCHBITS,
                ptl_index: LNET_RESERVED_PORTAL,
                src_offset: 0,
                sink_length: 272,
            },
            0,
        );
        frame(&mut bytes, ProtoVersion::V3, KsockHeader::lnet(0, 0), &get, &[]);
        frame(
            &mut bytes,
            ProtoVersion::V3,
            KsockHeader::lnet(0, 0),
            &reply(ping.len() as u32),
            &ping,
        );
        bytes.extend_from_slice(&KsockHeader::noop(ZcAck::Range(2, 4)).emit());
        frame(&mut bytes, ProtoVersion::V3, KsockHeader::lnet(5, 3), &put(4, 9, 3), b"abc");

        let (items, error) = collect(StreamDecoder::new(&bytes));
        assert_eq!(error, None);
        assert_eq!(items.len(), 6);
        assert_eq!(
            items[0],
            StreamItem {
                offset: 0,
                len: 16,
                event: StreamEvent::ConnReq {
                    request: ConnReq { version: ConnReqVersion::V1, target: server() },
                    byte_order: ByteOrder::LittleEndian,
                },
            }
        );
        assert_eq!(
            items[1].event,
            StreamEvent::Hello {
                hello: hello(ProtoVersion::V3),
                byte_order: ByteOrder::LittleEndian,
                own_conn_type: ConnType::CONTROL,
            }
        );
        assert_eq!((items[1].offset, items[1].len), (16, 56));
        assert_eq!(message(&items[2]).header, get);
        assert_eq!(message(&items[2]).content, PayloadContent::Opaque);
        assert_eq!(message(&items[3]).content, PayloadContent::Ping(Ok((ping_info(), ping.len()))));
        assert_eq!(message(&items[3]).payload, &ping[..]);
        assert_eq!(
            items[4].event,
            StreamEvent::Noop {
                ksock: KsockHeader::noop(ZcAck::Range(2, 4)),
                ack: ZcAck::Range(2, 4)
            }
        );
        let put_message = message(&items[5]);
        assert_eq!(put_message.ack, ZcAck::Single(3));
        assert_eq!(put_message.ksock.and_then(|k| k.zc_request()), Some(5));
        assert_eq!(put_message.payload, b"abc");
        assert_eq!(items[5].offset + items[5].len, bytes.len());
    }

    #[test]
    fn decodes_v4_and_v1_framing() {
        let mut v4 = Vec::new();
        let v6 = Nid::ipv6(Net::TCP, "fd00::1".parse().unwrap());
        let header_v4 = Header { src_nid: v6, ..put(4, 1, 2) };
        frame(&mut v4, ProtoVersion::V4, KsockHeader::lnet(0, 0), &header_v4, b"hi");
        let (items, error) =
            collect(StreamDecoder::after_hello(&v4, ProtoVersion::V4, ByteOrder::LittleEndian));
        assert_eq!(error, None);
        assert_eq!(message(&items[0]).header, header_v4);
        assert_eq!(items[0].len, 24 + 96 + 2);

        let mut v1 = handshake(ProtoVersion::V1);
        frame(&mut v1, ProtoVersion::V1, KsockHeader::lnet(0, 0), &put(4, 1, 1), b"x");
        let (items, error) = collect(StreamDecoder::new(&v1));
        assert_eq!(error, None);
        let last = message(&items[2]);
        assert_eq!(last.ksock, None);
        assert_eq!(items[2].len, 72 + 1);
    }

    #[test]
    fn big_endian_peer_ksock_headers_are_swapped() {
        let mut bytes =
            KsockHeader::noop(ZcAck::Single(9)).emit_ordered(ByteOrder::BigEndian).to_vec();
        bytes.extend_from_slice(&KsockHeader::lnet(0, 0).emit_ordered(ByteOrder::BigEndian));
        let at = bytes.len();
        bytes.resize(at + 72, 0);
        put(4, 1, 0).emit(HeaderForm::Nid4, &mut bytes[at..]).unwrap();
        let (items, error) =
            collect(StreamDecoder::after_hello(&bytes, ProtoVersion::V3, ByteOrder::BigEndian));
        assert_eq!(error, None);
        assert_eq!(items.len(), 2);
        assert!(matches!(items[0].event, StreamEvent::Noop { ack: ZcAck::Single(9), .. }));
    }

    #[test]
    fn recognises_selftest_rpcs_and_pushes() {
        let request = SrpcMsg::new(
            0,
            SrpcBody::PingRequest(PingRequest {
                reply_match_bits: 1,
                magic: LST_PING_TEST_MAGIC,
                sequence: 3,
                time_seconds: 4,
                time_nanoseconds: 5,
            }),
        );
        let rpc = request.emit();
        let push = ping_info().to_bytes().unwrap();
        let mut bytes = Vec::new();
        let v3 = ProtoVersion::V3;
        frame(&mut bytes, v3, KsockHeader::lnet(0, 0), &put(SRPC_REQUEST_PORTAL, 1, 160), &rpc);
        frame(&mut bytes, v3, KsockHeader::lnet(0, 0), &put(SRPC_RDMA_PORTAL, 2, 160), &rpc);
        frame(&mut bytes, v3, KsockHeader::lnet(0, 0), &put(SRPC_RDMA_PORTAL, 3, 8), &[7; 8]);
        let push_header = put(LNET_RESERVED_PORTAL, LNET_PROTO_PING_MATCHBITS, push.len() as u32);
        frame(&mut bytes, v3, KsockHeader::lnet(0, 0), &push_header, &push);
        // Same portal, other match bits: not a push.
        frame(
            &mut bytes,
            v3,
            KsockHeader::lnet(0, 0),
            &put(LNET_RESERVED_PORTAL, 1, 16),
            &push[..16],
        );
        let (items, error) =
            collect(StreamDecoder::after_hello(&bytes, v3, ByteOrder::LittleEndian));
        assert_eq!(error, None);
        let selftest = PayloadContent::Selftest(Ok((request, selftest::ByteOrder::LittleEndian)));
        assert_eq!(message(&items[0]).content, selftest);
        assert_eq!(message(&items[1]).content, selftest);
        assert_eq!(message(&items[2]).content, PayloadContent::Opaque);
        assert_eq!(message(&items[3]).content, PayloadContent::Ping(Ok((ping_info(), push.len()))));
        assert_eq!(message(&items[4]).content, PayloadContent::Opaque);
    }

    #[test]
    fn payload_errors_do_not_stop_the_stream() {
        let mut bytes = Vec::new();
        let v3 = ProtoVersion::V3;
        let mut bad_ping = LNET_PROTO_PING_MAGIC.to_le_bytes().to_vec();
        bad_ping.extend_from_slice(&[0; 12]);
        frame(&mut bytes, v3, KsockHeader::lnet(0, 0), &reply(16), &bad_ping);
        frame(&mut bytes, v3, KsockHeader::lnet(0, 0), &put(SRPC_REQUEST_PORTAL, 1, 4), &[1; 4]);
        let (items, error) =
            collect(StreamDecoder::after_hello(&bytes, v3, ByteOrder::LittleEndian));
        assert_eq!(error, None);
        assert_eq!(message(&items[0]).content, PayloadContent::Ping(Err(PingError::NoNiStatus(0))));
        assert_eq!(
            message(&items[1]).content,
            PayloadContent::Selftest(Err(SrpcParseError::WrongLength(4)))
        );
    }

    #[test]
    fn v2_checksums_are_verified() {
        let v2 = ProtoVersion::V2;
        let put = put(4, 1, 2);
        let header_bytes = put.emit_nid4().unwrap();
        let good = KsockHeader::lnet(0, 0).with_v2_checksum(&header_bytes, b"ok");
        let mut bytes = Vec::new();
        frame(&mut bytes, v2, good, &put, b"ok");
        // docs/protocol/wire.md §10.9: V2 NOOP acknowledging cookie 5 with its checksum.
        bytes.extend_from_slice(&[
            0xc0, 0, 0, 0, 0x64, 0x34, 0xbb, 0x7f, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0,
        ]);
        let (items, error) =
            collect(StreamDecoder::after_hello(&bytes, v2, ByteOrder::LittleEndian));
        assert_eq!((items.len(), error), (2, None));

        let bad = KsockHeader { csum: good.csum ^ 1, ..good };
        let mut bytes = Vec::new();
        frame(&mut bytes, v2, bad, &put, b"ok");
        let (_, error) = collect(StreamDecoder::after_hello(&bytes, v2, ByteOrder::LittleEndian));
        assert_eq!(
            error,
            Some(StreamError {
                offset: 0,
                kind: StreamErrorKind::ChecksumMismatch { sent: bad.csum, computed: good.csum },
            })
        );
        // V3 ignores the field.
        let (items, error) =
            collect(StreamDecoder::after_hello(&bytes, ProtoVersion::V3, ByteOrder::LittleEndian));
        assert_eq!((items.len(), error), (1, None));
    }

    #[test]
    fn acceptor_outcomes() {
        let (items, error) = collect(StreamDecoder::new(&DOWNGRADE_ANSWER[..4]));
        assert!(items.is_empty());
        assert_eq!(
            error.unwrap().kind,
            StreamErrorKind::Truncated { stage: Stage::ConnReq, needed: 8, available: 4 }
        );

        let probe = [&LNET_PROTO_MAGIC.to_le_bytes()[..], &[3, 0, 0, 0, 9, 9]].concat();
        let (items, error) = collect(StreamDecoder::new(&probe));
        assert_eq!(error, None);
        assert_eq!(
            items,
            vec![StreamItem {
                offset: 0,
                len: 4,
                event: StreamEvent::Downgrade(DowngradeReason::UnifiedProtocolProbe),
            }]
        );

        let (_, error) = collect(StreamDecoder::new(&[0xde, 0xad, 0xbe, 0xef]));
        assert_eq!(
            error,
            Some(StreamError {
                offset: 0,
                kind: StreamErrorKind::Acceptor(AcceptorError::UnknownMagic(0xefbe_adde)),
            })
        );
    }

    #[test]
    fn hello_outcomes() {
        let mut bytes = handshake(ProtoVersion::V3);
        bytes[16 + 4] = 9; // kshm_version
        let (items, error) = collect(StreamDecoder::new(&bytes));
        assert_eq!(error, None);
        assert_eq!(
            items[1].event,
            StreamEvent::UnknownHelloVersion(UnknownHelloVersion::LnetMagic {
                byte_order: ByteOrder::LittleEndian,
                version: 9,
            })
        );
        assert_eq!(items.len(), 2);

        let mut bytes = handshake(ProtoVersion::V3);
        bytes[16] ^= 0xff;
        let (_, error) = collect(StreamDecoder::new(&bytes));
        assert!(matches!(error.unwrap().kind, StreamErrorKind::Hello(HelloError::BadMagic(_))));

        let mut bytes = handshake(ProtoVersion::V3);
        let conn_type_at = 16 + 48;
        bytes[conn_type_at] = 7;
        let (_, error) = collect(StreamDecoder::new(&bytes));
        assert_eq!(
            error,
            Some(StreamError {
                offset: 16,
                kind: StreamErrorKind::ConnType(PassiveHelloError::UnknownConnType(7)),
            })
        );

        let bytes = handshake(ProtoVersion::V3);
        let (_, error) = collect(StreamDecoder::new(&bytes[..40]));
        assert_eq!(
            error.unwrap().kind,
            StreamErrorKind::Truncated { stage: Stage::Hello, needed: 56, available: 24 }
        );
    }

    #[test]
    fn framing_errors() {
        let v3 = ProtoVersion::V3;
        let decode = |bytes: &[u8]| {
            collect(StreamDecoder::after_hello(bytes, v3, ByteOrder::LittleEndian))
                .1
                .map(|e| e.kind)
        };
        assert_eq!(
            decode(&[0xc2; 24]),
            Some(StreamErrorKind::Ksock(KsockError::UnknownMsgType(0xc2c2_c2c2)))
        );
        assert_eq!(
            decode(&KsockHeader { zc_cookies: [5, 1], ..KsockHeader::keepalive() }.emit()),
            Some(StreamErrorKind::ZcAck(ZcAckError::MalformedKeepalive { low: 5 }))
        );
        assert_eq!(
            decode(&KsockHeader::keepalive().emit()[..10]),
            Some(StreamErrorKind::Truncated {
                stage: Stage::KsockHeader,
                needed: 24,
                available: 10
            })
        );

        let mut bytes = Vec::new();
        frame(&mut bytes, v3, KsockHeader::lnet(0, 0), &put(4, 1, 10), b"short");
        assert_eq!(
            decode(&bytes),
            Some(StreamErrorKind::Truncated { stage: Stage::Payload, needed: 106, available: 101 })
        );
        assert_eq!(
            decode(&bytes[..50]),
            Some(StreamErrorKind::Truncated {
                stage: Stage::LnetHeader,
                needed: 96,
                available: 50
            })
        );

        let mut bytes = Vec::new();
        frame(&mut bytes, v3, KsockHeader::lnet(0, 0), &put(4, 1, 0), &[]);
        bytes[24 + 24] = 9; // type
        assert_eq!(decode(&bytes), Some(StreamErrorKind::Header(HeaderError::UnknownType(9))));

        let mut bytes = Vec::new();
        frame(&mut bytes, v3, KsockHeader::lnet(0, 0), &put(4, 1, LNET_MTU + 1), &[]);
        assert_eq!(
            decode(&bytes),
            Some(StreamErrorKind::Receive(HeaderReceiveError::PayloadTooLarge {
                msg_type: MsgType::Put,
                payload_length: LNET_MTU + 1,
            }))
        );
    }

    #[test]
    fn stops_after_the_first_error() {
        let mut decoder =
            StreamDecoder::after_hello(&[0xc2; 48], ProtoVersion::V3, ByteOrder::LittleEndian);
        assert!(matches!(decoder.next(), Some(Err(_))));
        assert_eq!(decoder.next(), None);
        assert_eq!(decoder.offset(), 0);
    }

    proptest! {
        #[test]
        fn items_tile_the_input(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            for decoder in [
                StreamDecoder::new(&bytes),
                StreamDecoder::after_hello(&bytes, ProtoVersion::V3, ByteOrder::LittleEndian),
            ] {
                let mut next = 0;
                for result in decoder {
                    match result {
                        Ok(item) => {
                            prop_assert_eq!(item.offset, next);
                            next = item.offset + item.len;
                            prop_assert!(next <= bytes.len());
                        }
                        Err(error) => prop_assert_eq!(error.offset, next),
                    }
                }
            }
        }
    }
}
