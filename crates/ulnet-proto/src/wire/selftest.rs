//! lnet_selftest's wire protocol: the 160-byte `srpc_msg` with every request and reply body, the
//! TEST service's destination list, the RPC match-bit generator and the BRW data patterns.
//!
//! Selftest messages are in the sender's host order. We always emit little-endian (every supported
//! Lustre platform is); on input a byte-reversed `msg_magic` means the whole message is swapped.
//! Selftest carries nid4 NIDs only.
//!
//! We swap every field of a swapped message. The kernel misses a few (`dbg_status` in
//! `sfw_unpack_message()`, and the test parameters of server-side tests), which only matters
//! between kernels of opposite endianness.
//!
//! lustre: lnet/selftest/rpc.h (message layouts), lnet/selftest/selftest.h (portals, service to
//! message type), lnet/selftest/framework.c (`sfw_unpack_message()`, session and test handlers),
//! lnet/selftest/rpc.c (request checks, match bits), lnet/selftest/brw_test.c,
//! lnet/selftest/ping_test.c, include/uapi/linux/lnet/lnetst.h, include/uapi/linux/lnet/lnet-idl.h.

use std::fmt;

/// `sizeof(struct srpc_msg)`: every request and reply is exactly this long.
pub const SRPC_MSG_LEN: usize = 160;
/// Offset of `msg_body` within `struct srpc_msg`.
pub const SRPC_BODY_OFFSET: usize = 24;
/// Size of the `msg_body` union (its largest member is `srpc_stat_reply`).
pub const SRPC_BODY_LEN: usize = SRPC_MSG_LEN - SRPC_BODY_OFFSET;

/// `SRPC_MSG_MAGIC`. lustre: lnet/selftest/rpc.h.
pub const SRPC_MSG_MAGIC: u32 = 0xEEB0_F00D;
/// `SRPC_MSG_VERSION`.
pub const SRPC_MSG_VERSION: u32 = 1;

/// `SRPC_REQUEST_PORTAL`: requests to test services (BRW, PING). lustre: selftest.h.
pub const SRPC_REQUEST_PORTAL: u32 = 50;
/// `SRPC_FRAMEWORK_REQUEST_PORTAL`: requests to framework services (ids below 10).
pub const SRPC_FRAMEWORK_REQUEST_PORTAL: u32 = 51;
/// `SRPC_RDMA_PORTAL`: replies (match bits = rpyid) and all bulk (match bits = bulkid).
pub const SRPC_RDMA_PORTAL: u32 = 52;

/// `SRPC_FRAMEWORK_SERVICE_MAX_ID`: services below it are framework services.
pub const SRPC_FRAMEWORK_SERVICE_MAX_ID: u32 = 10;
/// `SRPC_SERVICE_MAX_ID`: one past the last test service. A test's service must lie strictly
/// between [`SRPC_FRAMEWORK_SERVICE_MAX_ID`] and this (lustre: framework.c `sfw_add_test()`).
pub const SRPC_SERVICE_MAX_ID: u32 = 13;

/// `LST_FEAT_BULK_LEN`: BRW tests carry a byte length and offset (`test_bulk_req_v1`) instead
/// of a page count. lustre: lnetst.h.
pub const LST_FEAT_BULK_LEN: u32 = 1;
/// `LST_FEATS_MASK`: every session feature this protocol version knows.
pub const LST_FEATS_MASK: u32 = LST_FEAT_BULK_LEN;

/// `LST_NAME_SIZE`: session and group name buffers, NUL included.
pub const LST_NAME_SIZE: usize = 32;
/// `LST_MAX_CONCUR` (= `SFW_MAX_CONCUR`): the largest test concurrency a node accepts.
pub const LST_MAX_CONCUR: u32 = 1024;

/// `LST_PING_TEST_MAGIC`. lustre: ping_test.c.
pub const LST_PING_TEST_MAGIC: u32 = 0xBABE_FACE;

/// `BRW_MAGIC`: the u64 a BRW data source writes. lustre: brw_test.c.
pub const BRW_MAGIC: u64 = 0xEEB0_EEB1_EEB2_EEB3;
/// `BRW_POISON`: the u64 a BRW sink pre-fills with.
pub const BRW_POISON: u64 = 0xBEEF_BEEF_BEEF_BEEF;
/// `BRW_MSIZE`: the pattern word size; fragments and offsets are multiples of it.
pub const BRW_WORD_LEN: usize = 8;

/// `LST_BRW_READ`: the server PUTs data into the client's bulk MD.
pub const LST_BRW_READ: u32 = 1;
/// `LST_BRW_WRITE`: the server GETs data from the client's bulk MD.
pub const LST_BRW_WRITE: u32 = 2;

/// `LST_BRW_CHECK_NONE`.
pub const LST_BRW_CHECK_NONE: u32 = 1;
/// `LST_BRW_CHECK_SIMPLE`: first and last word of each page fragment.
pub const LST_BRW_CHECK_SIMPLE: u32 = 2;
/// `LST_BRW_CHECK_FULL`: every word.
pub const LST_BRW_CHECK_FULL: u32 = 3;
/// `LST_BRW_CHECK_DISCARD`: nothing; the sink may discard the payload.
pub const LST_BRW_CHECK_DISCARD: u32 = 4;

/// `SRPC_BATCH_OPC_RUN`. lustre: rpc.h.
pub const SRPC_BATCH_OPC_RUN: u32 = 1;
/// `SRPC_BATCH_OPC_STOP` (`arg` is "force").
pub const SRPC_BATCH_OPC_STOP: u32 = 2;
/// `SRPC_BATCH_OPC_QUERY`.
pub const SRPC_BATCH_OPC_QUERY: u32 = 3;

/// Default `session_timeout` module parameter, in seconds. lustre: framework.c.
pub const DEFAULT_SESSION_TIMEOUT_SECONDS: u32 = 100;
/// Default `rpc_timeout` module parameter, in seconds. lustre: framework.c.
pub const DEFAULT_RPC_TIMEOUT_SECONDS: u32 = 64;

/// `LNET_MAX_IOV`: the most pages one MD (and so one destination list) spans.
/// lustre: include/linux/lnet/lib-types.h.
pub const LNET_MAX_IOV: usize = 256;
/// `sizeof(struct lnet_process_id_packed)`: u64 nid4 then u32 pid, packed.
pub const PROCESS_ID_PACKED_LEN: usize = 12;
/// The common 4 KiB `PAGE_SIZE`, which both ends should use when interoperating.
pub const PAGE_SIZE_4K: usize = 4096;
/// `SFW_MAX_NDESTS` for 4 KiB pages: 256 × 341.
pub const SFW_MAX_NDESTS_4K: usize = max_dest_count(PAGE_SIZE_4K);

/// Reply statuses: selftest sends **positive** errno values in `status`.
pub mod errno {
    pub const ENOENT: u32 = 2;
    pub const ESRCH: u32 = 3;
    pub const EBUSY: u32 = 16;
    pub const EINVAL: u32 = 22;
    pub const EPROTO: u32 = 71;
    pub const EBADMSG: u32 = 74;
}

/// The byte order a selftest peer used, detected from `msg_magic`.
pub use super::cursor::ByteOrder;
use super::cursor::{Reader, Writer};

/// `enum srpc_service_type`: what a request's match bits name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum SrpcService {
    Debug = 0,
    MakeSession = 1,
    RemoveSession = 2,
    Batch = 3,
    /// "Add test".
    Test = 4,
    QueryStat = 5,
    /// Defined, but current kernels register no handler for it.
    Join = 6,
    Brw = 11,
    Ping = 12,
}

impl SrpcService {
    pub const ALL: [Self; 9] = [
        Self::Debug,
        Self::MakeSession,
        Self::RemoveSession,
        Self::Batch,
        Self::Test,
        Self::QueryStat,
        Self::Join,
        Self::Brw,
        Self::Ping,
    ];

    pub fn id(self) -> u32 {
        self as u32
    }

    pub fn from_id(id: u32) -> Option<Self> {
        Self::ALL.into_iter().find(|service| service.id() == id)
    }

    /// Framework services sit on portal 51; test services (BRW, PING) on portal 50.
    pub fn is_framework(self) -> bool {
        self.id() < SRPC_FRAMEWORK_SERVICE_MAX_ID
    }

    /// The portal its requests are PUT to; the match bits are [`SrpcService::id`].
    pub fn request_portal(self) -> u32 {
        if self.is_framework() { SRPC_FRAMEWORK_REQUEST_PORTAL } else { SRPC_REQUEST_PORTAL }
    }

    /// lustre: selftest.h `srpc_service2request()`.
    pub fn request_type(self) -> SrpcMsgType {
        match self {
            Self::Debug => SrpcMsgType::DebugRequest,
            Self::MakeSession => SrpcMsgType::MakeSessionRequest,
            Self::RemoveSession => SrpcMsgType::RemoveSessionRequest,
            Self::Batch => SrpcMsgType::BatchRequest,
            Self::Test => SrpcMsgType::TestRequest,
            Self::QueryStat => SrpcMsgType::StatRequest,
            Self::Join => SrpcMsgType::JoinRequest,
            Self::Brw => SrpcMsgType::BrwRequest,
            Self::Ping => SrpcMsgType::PingRequest,
        }
    }

    /// lustre: selftest.h `srpc_service2reply()` (request type + 1).
    pub fn reply_type(self) -> SrpcMsgType {
        self.request_type().reply_type()
    }
}

/// `enum srpc_msg_type`. Every reply is its request's type + 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum SrpcMsgType {
    MakeSessionRequest = 0,
    MakeSessionReply = 1,
    RemoveSessionRequest = 2,
    RemoveSessionReply = 3,
    BatchRequest = 4,
    BatchReply = 5,
    StatRequest = 6,
    StatReply = 7,
    TestRequest = 8,
    TestReply = 9,
    DebugRequest = 10,
    DebugReply = 11,
    BrwRequest = 12,
    BrwReply = 13,
    PingRequest = 14,
    PingReply = 15,
    JoinRequest = 16,
    JoinReply = 17,
}

impl SrpcMsgType {
    pub fn from_u32(value: u32) -> Option<Self> {
        Some(match value {
            0 => Self::MakeSessionRequest,
            1 => Self::MakeSessionReply,
            2 => Self::RemoveSessionRequest,
            3 => Self::RemoveSessionReply,
            4 => Self::BatchRequest,
            5 => Self::BatchReply,
            6 => Self::StatRequest,
            7 => Self::StatReply,
            8 => Self::TestRequest,
            9 => Self::TestReply,
            10 => Self::DebugRequest,
            11 => Self::DebugReply,
            12 => Self::BrwRequest,
            13 => Self::BrwReply,
            14 => Self::PingRequest,
            15 => Self::PingReply,
            16 => Self::JoinRequest,
            17 => Self::JoinReply,
            _ => return None,
        })
    }

    pub fn to_u32(self) -> u32 {
        self as u32
    }

    /// Requests have even numbers, replies odd.
    pub fn is_request(self) -> bool {
        self.to_u32() % 2 == 0
    }

    /// The matching reply type (a reply maps to itself).
    pub fn reply_type(self) -> Self {
        let reply = self.to_u32() | 1;
        // Every request number + 1 is a valid reply number in the enum above.
        Self::from_u32(reply).unwrap_or(self)
    }
}

/// `struct lst_sid`: a test session's identity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SessionId {
    /// `ses_nid`: the console's nid4 NID.
    pub nid: u64,
    /// `ses_stamp`: milliseconds of the console's monotonic clock at session creation.
    pub stamp: i64,
}

impl SessionId {
    /// `LST_INVALID_SID` as `get_old_sid(NULL)` returns it: NID ANY, stamp -1.
    pub const NONE: Self = Self { nid: u64::MAX, stamp: -1 };

    /// `ses_nid == LNET_NID_ANY`, which session requests reject with EINVAL.
    pub fn has_any_nid(&self) -> bool {
        self.nid == u64::MAX
    }
}

/// `struct lst_bid`: a batch id, unique within a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct BatchId(pub u64);

/// A `char[LST_NAME_SIZE]` session or group name: at most 31 bytes, no NUL, NUL-padded on the
/// wire. Bytes need not be UTF-8.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct LstName {
    len: u8,
    bytes: [u8; LST_NAME_SIZE],
}

/// Why bytes are not a valid [`LstName`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LstNameError {
    #[error("selftest name is {0} bytes, at most {max} fit", max = LstName::MAX_LEN)]
    TooLong(usize),
    #[error("selftest name contains a NUL byte")]
    ContainsNul,
    /// On the wire: 32 bytes with no NUL. The kernel would keep the first 31 bytes (`strscpy`
    /// in `sfw_init_session()`); we reject it since no `lst` console sends one.
    #[error("selftest name field has no NUL terminator")]
    NotTerminated,
}

impl LstName {
    /// The longest name that leaves room for the terminating NUL.
    pub const MAX_LEN: usize = LST_NAME_SIZE - 1;

    pub fn new(name: &[u8]) -> Result<Self, LstNameError> {
        if name.len() > Self::MAX_LEN {
            return Err(LstNameError::TooLong(name.len()));
        }
        if name.contains(&0) {
            return Err(LstNameError::ContainsNul);
        }
        let mut bytes = [0u8; LST_NAME_SIZE];
        // Length checked above: the whole name fits.
        for (to, from) in bytes.iter_mut().zip(name) {
            *to = *from;
        }
        Ok(Self { len: name.len() as u8, bytes })
    }

    /// Decodes the wire field: the bytes before the first NUL. Bytes after it are ignored, as
    /// the kernel's C string handling ignores them.
    pub fn from_wire(field: &[u8; LST_NAME_SIZE]) -> Result<Self, LstNameError> {
        let len = field.iter().position(|&b| b == 0).ok_or(LstNameError::NotTerminated)?;
        Self::new(field.get(..len).unwrap_or(field))
    }

    /// The NUL-padded wire field.
    pub fn to_wire(&self) -> [u8; LST_NAME_SIZE] {
        // Invariant: bytes past len are zero (set by `new`).
        self.bytes
    }

    pub fn as_bytes(&self) -> &[u8] {
        // `len` is at most MAX_LEN (checked by `new`).
        self.bytes.get(..usize::from(self.len)).unwrap_or(&self.bytes)
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl fmt::Debug for LstName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LstName({:?})", String::from_utf8_lossy(self.as_bytes()))
    }
}

/// A validated `struct srpc_msg`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SrpcMsg {
    /// `msg_version`. [`SrpcMsg::parse`] only accepts [`SRPC_MSG_VERSION`]; other values are
    /// emitted as given (for testing a peer's EPROTO answer).
    pub version: u32,
    /// `msg_ses_feats`: session feature bits ([`LST_FEAT_BULK_LEN`]).
    pub ses_feats: u32,
    /// The body; it also determines `msg_type`.
    pub body: SrpcBody,
}

/// Why 160 bytes (or not) are not a valid `srpc_msg`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SrpcParseError {
    #[error("selftest message is {0} bytes, not {SRPC_MSG_LEN}")]
    WrongLength(usize),
    /// Neither order of `SRPC_MSG_MAGIC` (read as little-endian).
    #[error("bad selftest magic {0:#010x}")]
    BadMagic(u32),
    /// A server answers this with `status` = EPROTO in a reply of its service's reply type,
    /// PUT to `reply_match_bits` (the request body's first u64, meaningful only for requests).
    /// lustre: rpc.c `srpc_handle_rpc()`.
    #[error("selftest version {version}, expected {SRPC_MSG_VERSION}")]
    WrongVersion { version: u32, msg_type: u32, reply_match_bits: u64, order: ByteOrder },
    #[error("unknown selftest message type {0}")]
    UnknownType(u32),
    #[error("selftest name field has no NUL terminator")]
    NameNotTerminated,
}

/// Why a server drops a received request without answering. lustre: rpc.c
/// `srpc_lnet_ev_handler()` (`SRPC_REQUEST_RCVD`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SrpcRequestError {
    #[error("selftest request is {0} bytes, not {SRPC_MSG_LEN}")]
    WrongLength(usize),
    #[error("bad selftest magic {0:#010x}")]
    BadMagic(u32),
    #[error("selftest request type {found} is not {expected:?} (in either byte order)")]
    WrongType { expected: SrpcMsgType, found: u32 },
}

impl SrpcMsg {
    pub const LEN: usize = SRPC_MSG_LEN;

    /// A current-version message.
    pub fn new(ses_feats: u32, body: SrpcBody) -> Self {
        Self { version: SRPC_MSG_VERSION, ses_feats, body }
    }

    pub fn msg_type(&self) -> SrpcMsgType {
        self.body.msg_type()
    }

    /// Decodes exactly [`SRPC_MSG_LEN`] bytes, swapping every field when the magic is
    /// byte-reversed, and reports the order the sender used. `msg_reserved0/1` are ignored.
    /// Checks run in the order length, magic, version, type, body.
    pub fn parse(buf: &[u8]) -> Result<(Self, ByteOrder), SrpcParseError> {
        let buf: &[u8; SRPC_MSG_LEN] =
            buf.try_into().map_err(|_| SrpcParseError::WrongLength(buf.len()))?;
        let (header, body) = buf.split_at(SRPC_BODY_OFFSET);
        let &[m0, m1, m2, m3, ..] = buf;
        let magic_le = u32::from_le_bytes([m0, m1, m2, m3]);
        let order = detect_order(magic_le).ok_or(SrpcParseError::BadMagic(magic_le))?;
        let mut header = Reader::new(header, order);
        let _magic = header.packed_u32();
        let version = header.packed_u32();
        let msg_type = header.packed_u32();
        let _reserved0 = header.packed_u32();
        let _reserved1 = header.packed_u32();
        let ses_feats = header.packed_u32();
        if version != SRPC_MSG_VERSION {
            let reply_match_bits = Reader::new(body, order).packed_u64();
            return Err(SrpcParseError::WrongVersion {
                version,
                msg_type,
                reply_match_bits,
                order,
            });
        }
        let kind = SrpcMsgType::from_u32(msg_type).ok_or(SrpcParseError::UnknownType(msg_type))?;
        let body = SrpcBody::parse(kind, body, order, ses_feats)?;
        Ok((Self { version, ses_feats, body }, order))
    }

    /// Encodes all 160 bytes, little-endian, unused body bytes zero.
    pub fn emit(&self) -> [u8; SRPC_MSG_LEN] {
        self.emit_in(ByteOrder::LittleEndian)
    }

    /// Encodes in the given order; [`ByteOrder::BigEndian`] imitates a byte-swapped peer.
    pub fn emit_in(&self, order: ByteOrder) -> [u8; SRPC_MSG_LEN] {
        let mut out = [0u8; SRPC_MSG_LEN];
        let (header, body) = out.split_at_mut(SRPC_BODY_OFFSET);
        let mut w = Writer::new(header, order);
        w.u32(SRPC_MSG_MAGIC);
        w.u32(self.version);
        w.u32(self.msg_type().to_u32());
        w.u32(0); // msg_reserved0
        w.u32(0); // msg_reserved1
        w.u32(self.ses_feats);
        self.body.emit(&mut Writer::new(body, order));
        out
    }
}

/// The server's acceptance test for a request received on `service`'s portal: exactly 160
/// bytes, magic in either order, type equal to the service's request type in either order
/// (independently of the magic's order, as the kernel checks). Returns the sender's order.
/// The version is checked later by [`SrpcMsg::parse`] (a wrong one earns an EPROTO reply).
/// lustre: rpc.c `srpc_lnet_ev_handler()`.
pub fn check_request(buf: &[u8], service: SrpcService) -> Result<ByteOrder, SrpcRequestError> {
    let buf: &[u8; SRPC_MSG_LEN] =
        buf.try_into().map_err(|_| SrpcRequestError::WrongLength(buf.len()))?;
    let magic = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]);
    let order = detect_order(magic).ok_or(SrpcRequestError::BadMagic(magic))?;
    let found = u32::from_le_bytes([buf[8], buf[9], buf[10], buf[11]]);
    let expected = service.request_type();
    if found != expected.to_u32() && found != expected.to_u32().swap_bytes() {
        return Err(SrpcRequestError::WrongType { expected, found });
    }
    Ok(order)
}

/// `msg_body`: one variant per message type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SrpcBody {
    MakeSessionRequest(MakeSessionRequest),
    MakeSessionReply(MakeSessionReply),
    RemoveSessionRequest(RemoveSessionRequest),
    RemoveSessionReply(RemoveSessionReply),
    BatchRequest(BatchRequest),
    BatchReply(BatchReply),
    StatRequest(StatRequest),
    StatReply(StatReply),
    TestRequest(TestRequest),
    TestReply(TestReply),
    DebugRequest(DebugRequest),
    DebugReply(DebugReply),
    BrwRequest(BrwRequest),
    BrwReply(BrwReply),
    PingRequest(PingRequest),
    PingReply(PingReply),
    JoinRequest(JoinRequest),
    JoinReply(JoinReply),
}

impl SrpcBody {
    pub fn msg_type(&self) -> SrpcMsgType {
        match self {
            Self::MakeSessionRequest(_) => SrpcMsgType::MakeSessionRequest,
            Self::MakeSessionReply(_) => SrpcMsgType::MakeSessionReply,
            Self::RemoveSessionRequest(_) => SrpcMsgType::RemoveSessionRequest,
            Self::RemoveSessionReply(_) => SrpcMsgType::RemoveSessionReply,
            Self::BatchRequest(_) => SrpcMsgType::BatchRequest,
            Self::BatchReply(_) => SrpcMsgType::BatchReply,
            Self::StatRequest(_) => SrpcMsgType::StatRequest,
            Self::StatReply(_) => SrpcMsgType::StatReply,
            Self::TestRequest(_) => SrpcMsgType::TestRequest,
            Self::TestReply(_) => SrpcMsgType::TestReply,
            Self::DebugRequest(_) => SrpcMsgType::DebugRequest,
            Self::DebugReply(_) => SrpcMsgType::DebugReply,
            Self::BrwRequest(_) => SrpcMsgType::BrwRequest,
            Self::BrwReply(_) => SrpcMsgType::BrwReply,
            Self::PingRequest(_) => SrpcMsgType::PingRequest,
            Self::PingReply(_) => SrpcMsgType::PingReply,
            Self::JoinRequest(_) => SrpcMsgType::JoinRequest,
            Self::JoinReply(_) => SrpcMsgType::JoinReply,
        }
    }

    /// A request's `rpyid`: the match bits its reply is PUT with (portal 52).
    pub fn reply_match_bits(&self) -> Option<u64> {
        Some(match self {
            Self::MakeSessionRequest(r) => r.reply_match_bits,
            Self::RemoveSessionRequest(r) => r.reply_match_bits,
            Self::BatchRequest(r) => r.reply_match_bits,
            Self::StatRequest(r) => r.reply_match_bits,
            Self::TestRequest(r) => r.reply_match_bits,
            Self::DebugRequest(r) => r.reply_match_bits,
            Self::BrwRequest(r) => r.reply_match_bits,
            Self::PingRequest(r) => r.reply_match_bits,
            Self::JoinRequest(r) => r.reply_match_bits,
            _ => return None,
        })
    }

    /// A reply's `status` (a positive errno, 0 for success).
    pub fn status(&self) -> Option<u32> {
        Some(match self {
            Self::MakeSessionReply(r) => r.status,
            Self::RemoveSessionReply(r) => r.status,
            Self::BatchReply(r) => r.status,
            Self::StatReply(r) => r.status,
            Self::TestReply(r) => r.status,
            Self::DebugReply(r) => r.status,
            Self::BrwReply(r) => r.status,
            Self::PingReply(r) => r.status,
            Self::JoinReply(r) => r.status,
            _ => return None,
        })
    }

    fn parse(
        kind: SrpcMsgType,
        body: &[u8],
        order: ByteOrder,
        ses_feats: u32,
    ) -> Result<Self, SrpcParseError> {
        let r = &mut Reader::new(body, order);
        Ok(match kind {
            SrpcMsgType::MakeSessionRequest => Self::MakeSessionRequest(Packed::read(r)?),
            SrpcMsgType::MakeSessionReply => Self::MakeSessionReply(Packed::read(r)?),
            SrpcMsgType::RemoveSessionRequest => Self::RemoveSessionRequest(Packed::read(r)?),
            SrpcMsgType::RemoveSessionReply => Self::RemoveSessionReply(Packed::read(r)?),
            SrpcMsgType::BatchRequest => Self::BatchRequest(Packed::read(r)?),
            SrpcMsgType::BatchReply => Self::BatchReply(Packed::read(r)?),
            SrpcMsgType::StatRequest => Self::StatRequest(Packed::read(r)?),
            SrpcMsgType::StatReply => Self::StatReply(Packed::read(r)?),
            SrpcMsgType::TestRequest => {
                let reply_match_bits = r.packed_u64();
                let bulk_match_bits = r.packed_u64();
                let session = r.session();
                let batch = BatchId(r.packed_u64());
                let service = r.packed_u32();
                let loop_count = r.packed_u32();
                let concurrency = r.packed_u32();
                let is_client = r.packed_u8() != 0;
                let stop_on_error = r.packed_u8() != 0;
                let dest_count = r.packed_u32();
                let params = TestParams::read(r, service, ses_feats);
                Self::TestRequest(TestRequest {
                    reply_match_bits,
                    bulk_match_bits,
                    session,
                    batch,
                    service,
                    loop_count,
                    concurrency,
                    is_client,
                    stop_on_error,
                    dest_count,
                    params,
                })
            }
            SrpcMsgType::TestReply => Self::TestReply(Packed::read(r)?),
            SrpcMsgType::DebugRequest => Self::DebugRequest(Packed::read(r)?),
            SrpcMsgType::DebugReply => Self::DebugReply(Packed::read(r)?),
            SrpcMsgType::BrwRequest => Self::BrwRequest(Packed::read(r)?),
            SrpcMsgType::BrwReply => Self::BrwReply(Packed::read(r)?),
            SrpcMsgType::PingRequest => Self::PingRequest(Packed::read(r)?),
            SrpcMsgType::PingReply => Self::PingReply(Packed::read(r)?),
            SrpcMsgType::JoinRequest => Self::JoinRequest(Packed::read(r)?),
            SrpcMsgType::JoinReply => Self::JoinReply(Packed::read(r)?),
        })
    }

    fn emit(&self, w: &mut Writer<'_>) {
        match self {
            Self::MakeSessionRequest(b) => b.write(w),
            Self::MakeSessionReply(b) => b.write(w),
            Self::RemoveSessionRequest(b) => b.write(w),
            Self::RemoveSessionReply(b) => b.write(w),
            Self::BatchRequest(b) => b.write(w),
            Self::BatchReply(b) => b.write(w),
            Self::StatRequest(b) => b.write(w),
            Self::StatReply(b) => b.write(w),
            Self::TestRequest(b) => {
                w.u64(b.reply_match_bits);
                w.u64(b.bulk_match_bits);
                w.session(b.session);
                w.u64(b.batch.0);
                w.u32(b.service);
                w.u32(b.loop_count);
                w.u32(b.concurrency);
                w.u8(u8::from(b.is_client));
                w.u8(u8::from(b.stop_on_error));
                w.u32(b.dest_count);
                b.params.write(w);
            }
            Self::TestReply(b) => b.write(w),
            Self::DebugRequest(b) => b.write(w),
            Self::DebugReply(b) => b.write(w),
            Self::BrwRequest(b) => b.write(w),
            Self::BrwReply(b) => b.write(w),
            Self::PingRequest(b) => b.write(w),
            Self::PingReply(b) => b.write(w),
            Self::JoinRequest(b) => b.write(w),
            Self::JoinReply(b) => b.write(w),
        }
    }
}

/// A field of a packed selftest struct, or a whole one, read and written in the message's
/// byte order. Reads of checked-length bodies cannot run out (see [`Reader`]'s packed reads);
/// only a name without its NUL fails.
trait Packed: Sized {
    fn read(r: &mut Reader<'_>) -> Result<Self, SrpcParseError>;
    fn write(&self, w: &mut Writer<'_>);
}

impl Packed for u32 {
    fn read(r: &mut Reader<'_>) -> Result<Self, SrpcParseError> {
        Ok(r.packed_u32())
    }

    fn write(&self, w: &mut Writer<'_>) {
        w.u32(*self);
    }
}

impl Packed for u64 {
    fn read(r: &mut Reader<'_>) -> Result<Self, SrpcParseError> {
        Ok(r.packed_u64())
    }

    fn write(&self, w: &mut Writer<'_>) {
        w.u64(*self);
    }
}

impl Packed for SessionId {
    fn read(r: &mut Reader<'_>) -> Result<Self, SrpcParseError> {
        Ok(r.session())
    }

    fn write(&self, w: &mut Writer<'_>) {
        w.session(*self);
    }
}

impl Packed for BatchId {
    fn read(r: &mut Reader<'_>) -> Result<Self, SrpcParseError> {
        Ok(Self(r.packed_u64()))
    }

    fn write(&self, w: &mut Writer<'_>) {
        w.u64(self.0);
    }
}

impl Packed for LstName {
    fn read(r: &mut Reader<'_>) -> Result<Self, SrpcParseError> {
        r.name()
    }

    fn write(&self, w: &mut Writer<'_>) {
        w.name(self);
    }
}

/// Declares a packed C struct once: the struct, and its reading and writing, which take the
/// fields in declaration order. `flag: bool as u32` is a C integer flag (non-zero is true).
macro_rules! packed_struct {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$field_meta:meta])* pub $field:ident : $ty:ty $(as $wire:ty)?, )*
        }
    ) => {
        $(#[$meta])*
        pub struct $name {
            $( $(#[$field_meta])* pub $field: $ty, )*
        }

        impl Packed for $name {
            fn read(r: &mut Reader<'_>) -> Result<Self, SrpcParseError> {
                Ok(Self { $( $field: packed_struct!(@read r, $ty $(, $wire)?), )* })
            }

            fn write(&self, w: &mut Writer<'_>) {
                $( packed_struct!(@write w, self.$field, $ty $(, $wire)?); )*
            }
        }
    };
    (@read $r:ident, $ty:ty) => { <$ty as Packed>::read($r)? };
    (@read $r:ident, $ty:ty, $wire:ty) => { <$wire as Packed>::read($r)? != 0 };
    (@write $w:ident, $value:expr, $ty:ty) => { Packed::write(&$value, $w) };
    (@write $w:ident, $value:expr, $ty:ty, $wire:ty) => {
        Packed::write(&<$wire>::from($value), $w)
    };
}

packed_struct! {
    /// `srpc_mksn_reqst` (60 bytes).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct MakeSessionRequest {
        /// `mksn_rpyid`.
        pub reply_match_bits: u64,
        pub session: SessionId,
        /// `mksn_force`: replace a different existing session. Nonzero is true.
        pub force: bool as u32,
        pub name: LstName,
    }
}

packed_struct! {
    /// `srpc_mksn_reply` (56 bytes).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct MakeSessionReply {
        pub status: u32,
        pub session: SessionId,
        /// `mksn_timeout`: the session's inactivity timeout.
        pub timeout_seconds: u32,
        /// The existing session's name when `status` is EBUSY.
        pub name: LstName,
    }
}

packed_struct! {
    /// `srpc_rmsn_reqst` (24 bytes).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct RemoveSessionRequest {
        pub reply_match_bits: u64,
        pub session: SessionId,
    }
}

packed_struct! {
    /// `srpc_rmsn_reply` (20 bytes).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct RemoveSessionReply {
        pub status: u32,
        pub session: SessionId,
    }
}

packed_struct! {
    /// `srpc_debug_reqst` (28 bytes).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct DebugRequest {
        pub reply_match_bits: u64,
        pub session: SessionId,
        /// `dbg_flags`: unused by the kernel.
        pub flags: u32,
    }
}

packed_struct! {
    /// `srpc_debug_reply` (60 bytes).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct DebugReply {
        pub status: u32,
        pub session: SessionId,
        pub timeout_seconds: u32,
        /// `dbg_nbatch`: the kernel leaves it 0.
        pub batch_count: u32,
        pub name: LstName,
    }
}

packed_struct! {
    /// `srpc_batch_reqst` (44 bytes).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct BatchRequest {
        pub reply_match_bits: u64,
        pub session: SessionId,
        pub batch: BatchId,
        /// `bar_opc`: [`SRPC_BATCH_OPC_RUN`], [`SRPC_BATCH_OPC_STOP`] or [`SRPC_BATCH_OPC_QUERY`].
        pub opcode: u32,
        /// `bar_testidx`: for QUERY, 0 for the whole batch or a 1-based test index.
        pub test_index: u32,
        /// `bar_arg`: "force" for STOP, a timeout for RUN.
        pub arg: u32,
    }
}

packed_struct! {
    /// `srpc_batch_reply` (28 bytes).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct BatchReply {
        pub status: u32,
        pub session: SessionId,
        /// `bar_active`: active tests (or units) in the batch or test.
        pub active: u32,
        /// `bar_time`: remaining time.
        pub time: u32,
    }
}

packed_struct! {
    /// `srpc_stat_reqst` (28 bytes).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct StatRequest {
        pub reply_match_bits: u64,
        pub session: SessionId,
        /// `str_type`: 0.
        pub stat_type: u32,
    }
}

packed_struct! {
    /// `srpc_stat_reply` (136 bytes, the largest body).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct StatReply {
        pub status: u32,
        pub session: SessionId,
        pub framework: SfwCounters,
        pub rpc: SrpcCounters,
        pub lnet: LnetCountersCommon,
    }
}

packed_struct! {
    /// `struct sfw_counters` (20 bytes, packed). lustre: lnetst.h.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
    pub struct SfwCounters {
        /// Milliseconds since the current session started.
        pub running_ms: u32,
        pub active_batches: u32,
        pub zombie_sessions: u32,
        pub brw_errors: u32,
        pub ping_errors: u32,
    }
}

packed_struct! {
    /// `struct srpc_counters` (36 bytes, packed). lustre: lnetst.h.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
    pub struct SrpcCounters {
        pub errors: u32,
        pub rpcs_sent: u32,
        /// `rpcs_rcvd`.
        pub rpcs_received: u32,
        pub rpcs_dropped: u32,
        pub rpcs_expired: u32,
        pub bulk_get: u64,
        pub bulk_put: u64,
    }
}

packed_struct! {
    /// `struct lnet_counters_common` (60 bytes, packed). lustre: lnet-idl.h.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
    pub struct LnetCountersCommon {
        /// `lcc_msgs_alloc`.
        pub messages_allocated: u32,
        /// `lcc_msgs_max`.
        pub messages_max: u32,
        pub errors: u32,
        pub send_count: u32,
        /// `lcc_recv_count`.
        pub receive_count: u32,
        pub route_count: u32,
        pub drop_count: u32,
        pub send_length: u64,
        /// `lcc_recv_length`.
        pub receive_length: u64,
        pub route_length: u64,
        pub drop_length: u64,
    }
}

/// `srpc_test_reqst` (70 bytes): add a test to a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TestRequest {
    pub reply_match_bits: u64,
    /// `tsr_bulkid`: for a client test, the match bits of the console's destination list MD.
    pub bulk_match_bits: u64,
    pub session: SessionId,
    pub batch: BatchId,
    /// `tsr_service`: [`SrpcService::Brw`] or [`SrpcService::Ping`] id; others are invalid.
    pub service: u32,
    /// `tsr_loop`: client loop count, or server buffers needed.
    pub loop_count: u32,
    /// `tsr_concur`.
    pub concurrency: u32,
    /// `tsr_is_client` (u8). Nonzero is true.
    pub is_client: bool,
    /// `tsr_stop_onerr` (u8). Nonzero is true.
    pub stop_on_error: bool,
    /// `tsr_ndest`, an unaligned u32 at body offset 54.
    pub dest_count: u32,
    /// `tsr_u`. Which variant the parser picks depends on `service` and on
    /// [`LST_FEAT_BULK_LEN`] in `msg_ses_feats`; emit the variant that matches them, or the
    /// message will not parse back to the same value.
    pub params: TestParams,
}

/// `tsr_u`, the 12-byte test parameter union.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TestParams {
    /// `test_ping_req`: service PING.
    Ping { size: u32, flags: u32 },
    /// `test_bulk_req`: service BRW without [`LST_FEAT_BULK_LEN`].
    BrwV0 { opcode: u32, page_count: u32, flags: u32 },
    /// `test_bulk_req_v1`: service BRW with [`LST_FEAT_BULK_LEN`]. `offset` is the client's
    /// bulk offset within its first page.
    BrwV1 { opcode: u16, flags: u16, length: u32, offset: u32 },
    /// Any other service: the raw bytes, never swapped (the kernel rejects the test).
    Unknown([u8; 12]),
}

packed_struct! {
    /// `srpc_test_reply` (20 bytes).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct TestReply {
        pub status: u32,
        pub session: SessionId,
    }
}

packed_struct! {
    /// `srpc_ping_reqst` (32 bytes): the PING test's request.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct PingRequest {
        pub reply_match_bits: u64,
        /// [`LST_PING_TEST_MAGIC`], or the server answers EPROTO.
        pub magic: u32,
        /// `pnr_seq`, echoed in the reply.
        pub sequence: u32,
        /// Sender's wall-clock time.
        pub time_seconds: u64,
        pub time_nanoseconds: u64,
    }
}

packed_struct! {
    /// `srpc_ping_reply` (12 bytes).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct PingReply {
        pub status: u32,
        pub magic: u32,
        pub sequence: u32,
    }
}

packed_struct! {
    /// `srpc_brw_reqst` (28 bytes): the BRW test's request.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct BrwRequest {
        pub reply_match_bits: u64,
        /// The client's bulk MD match bits on portal 52.
        pub bulk_match_bits: u64,
        /// `brw_rw`: [`LST_BRW_READ`] or [`LST_BRW_WRITE`] (see [`BrwDirection`]).
        pub direction: u32,
        /// `brw_len`: bulk bytes.
        pub length: u32,
        /// `brw_flags`: an `LST_BRW_CHECK_*` mode (see [`BrwCheck`]).
        pub check_mode: u32,
    }
}

packed_struct! {
    /// `srpc_brw_reply` (4 bytes).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct BrwReply {
        pub status: u32,
    }
}

packed_struct! {
    /// `srpc_join_reqst` (56 bytes). No kernel registers a JOIN handler.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct JoinRequest {
        pub reply_match_bits: u64,
        pub session: SessionId,
        /// `join_group`.
        pub group: LstName,
    }
}

packed_struct! {
    /// `srpc_join_reply` (56 bytes).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct JoinReply {
        pub status: u32,
        pub session: SessionId,
        /// `join_timeout`: seconds of inactivity before expiry.
        pub timeout_seconds: u32,
        /// `join_session`.
        pub session_name: LstName,
    }
}

impl MakeSessionRequest {
    pub const LEN: usize = 60;
}
impl MakeSessionReply {
    pub const LEN: usize = 56;
}
impl RemoveSessionRequest {
    pub const LEN: usize = 24;
}
impl RemoveSessionReply {
    pub const LEN: usize = 20;
}
impl DebugRequest {
    pub const LEN: usize = 28;
}
impl DebugReply {
    pub const LEN: usize = 60;
}
impl BatchRequest {
    pub const LEN: usize = 44;
}
impl BatchReply {
    pub const LEN: usize = 28;
}
impl StatRequest {
    pub const LEN: usize = 28;
}
impl StatReply {
    pub const LEN: usize = 136;
}
impl SfwCounters {
    pub const LEN: usize = 20;
}
impl SrpcCounters {
    pub const LEN: usize = 36;
}
impl LnetCountersCommon {
    pub const LEN: usize = 60;
}
impl TestRequest {
    pub const LEN: usize = 70;
    /// Offset of the unaligned `tsr_ndest` within the body.
    pub const DEST_COUNT_OFFSET: usize = 54;
    /// Offset of `tsr_u` within the body.
    pub const PARAMS_OFFSET: usize = 58;
}
impl TestParams {
    pub const LEN: usize = 12;
}
impl TestReply {
    pub const LEN: usize = 20;
}
impl PingRequest {
    pub const LEN: usize = 32;
}
impl PingReply {
    pub const LEN: usize = 12;
}
impl BrwRequest {
    pub const LEN: usize = 28;
}
impl BrwReply {
    pub const LEN: usize = 4;
}
impl JoinRequest {
    pub const LEN: usize = 56;
}
impl JoinReply {
    pub const LEN: usize = 56;
}

// Every body fits the union; the reader and writer rely on it to stay in bounds.
const _: () = assert!(StatReply::LEN == SRPC_BODY_LEN);
const _: () = assert!(TestRequest::PARAMS_OFFSET + TestParams::LEN == TestRequest::LEN);
const _: () = assert!(SfwCounters::LEN + SrpcCounters::LEN + LnetCountersCommon::LEN + 20 == 136);

/// `struct lnet_process_id_packed`: one destination of a client test.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ProcessIdPacked {
    /// nid4.
    pub nid: u64,
    pub pid: u32,
}

/// Why a destination list cannot be encoded or decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DestListError {
    #[error("page size {0} holds no {PROCESS_ID_PACKED_LEN}-byte process id")]
    PageTooSmall(usize),
    /// More than `SFW_MAX_NDESTS` (256 pages' worth) destinations.
    #[error("{count} destinations, at most {max}")]
    TooManyDestinations { count: usize, max: usize },
    #[error("destination list needs {needed} bytes, got {available}")]
    Truncated { needed: usize, available: usize },
}

/// `SFW_ID_PER_PAGE`: process ids per page; the last `page_size % 12` bytes of each page are
/// unused. lustre: selftest.h.
pub const fn ids_per_page(page_size: usize) -> usize {
    page_size / PROCESS_ID_PACKED_LEN
}

/// `SFW_MAX_NDESTS` = `LNET_MAX_IOV * SFW_ID_PER_PAGE`: the largest `tsr_ndest` a node accepts.
pub const fn max_dest_count(page_size: usize) -> usize {
    LNET_MAX_IOV * ids_per_page(page_size)
}

/// Bytes the paged layout of `count` destinations spans: full pages for all but the last
/// page, whose used part ends after its last entry.
///
/// A kernel node GETs only `12 * count` bytes (`sfw_add_test()`), and a kernel console with
/// [`LST_FEAT_BULK_LEN`] offers only that many, so beyond one page's worth of destinations the
/// last entries never arrive (the kernel node reads stale page memory for them). Our node
/// should GET this length.
pub fn dest_list_len(count: usize, page_size: usize) -> Result<usize, DestListError> {
    let per_page = ids_per_page(page_size);
    if per_page == 0 {
        return Err(DestListError::PageTooSmall(page_size));
    }
    let max = max_dest_count(page_size);
    if count > max {
        return Err(DestListError::TooManyDestinations { count, max });
    }
    if count == 0 {
        return Ok(0);
    }
    let last = count - 1;
    // count <= 256 * per_page, so the product is at most 256 pages: no overflow.
    Ok((last / per_page) * page_size + (last % per_page + 1) * PROCESS_ID_PACKED_LEN)
}

/// Packs destinations the way `lstcon_dstnodes_prep()` does: `ids_per_page(page_size)` per
/// page, little-endian, page tails zero. The result is [`dest_list_len`] bytes long.
pub fn encode_dest_list(
    ids: &[ProcessIdPacked],
    page_size: usize,
) -> Result<Vec<u8>, DestListError> {
    let len = dest_list_len(ids.len(), page_size)?;
    let per_page = ids_per_page(page_size);
    let mut out = vec![0u8; len];
    for (index, id) in ids.iter().enumerate() {
        let at = dest_offset(index, per_page, page_size);
        // `at + 12 <= len` by construction of dest_list_len.
        if let Some(slot) = out.get_mut(at..at + PROCESS_ID_PACKED_LEN) {
            let packed = id.nid.to_le_bytes().into_iter().chain(id.pid.to_le_bytes());
            for (to, from) in slot.iter_mut().zip(packed) {
                *to = from;
            }
        }
    }
    Ok(out)
}

/// Unpacks `count` destinations from the bulk data a node fetched, swapping them when the TEST
/// request came from a byte-swapped peer. lustre: framework.c `sfw_add_test_instance()`.
pub fn decode_dest_list(
    bytes: &[u8],
    count: u32,
    page_size: usize,
    order: ByteOrder,
) -> Result<Vec<ProcessIdPacked>, DestListError> {
    let count = usize::try_from(count).unwrap_or(usize::MAX);
    let needed = dest_list_len(count, page_size)?;
    if bytes.len() < needed {
        return Err(DestListError::Truncated { needed, available: bytes.len() });
    }
    let per_page = ids_per_page(page_size);
    let mut ids = Vec::with_capacity(count);
    for index in 0..count {
        let at = dest_offset(index, per_page, page_size);
        let Some(slot) = bytes.get(at..at + PROCESS_ID_PACKED_LEN) else {
            // Unreachable: bytes.len() >= needed covers every entry.
            return Err(DestListError::Truncated { needed, available: bytes.len() });
        };
        let mut r = Reader::new(slot, order);
        ids.push(ProcessIdPacked { nid: r.packed_u64(), pid: r.packed_u32() });
    }
    Ok(ids)
}

/// The RPC id generator: seeded with `unix_seconds << 48` (the low 16 bits of the seconds
/// land in bits 63..48), each id is the previous plus one, the first being seed + 1.
/// lustre: rpc.c `srpc_startup()`, `srpc_next_id()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatchBitsGenerator {
    last: u64,
}

impl MatchBitsGenerator {
    /// `unix_seconds`: wall-clock seconds at startup, supplied by the caller.
    pub fn new(unix_seconds: u64) -> Self {
        Self { last: unix_seconds << 48 }
    }

    pub fn next_id(&mut self) -> u64 {
        self.last = self.last.wrapping_add(1);
        self.last
    }
}

/// `enum lst_brw_type`: `brw_rw`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum BrwDirection {
    /// The server is the source and PUTs into the client's MD.
    Read = LST_BRW_READ,
    /// The client is the source; the server GETs from the client's MD.
    Write = LST_BRW_WRITE,
}

impl BrwDirection {
    pub fn from_u32(value: u32) -> Option<Self> {
        match value {
            LST_BRW_READ => Some(Self::Read),
            LST_BRW_WRITE => Some(Self::Write),
            _ => None,
        }
    }
}

/// `enum lst_brw_flags`: the BRW data check mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum BrwCheck {
    None = LST_BRW_CHECK_NONE,
    Simple = LST_BRW_CHECK_SIMPLE,
    Full = LST_BRW_CHECK_FULL,
    Discard = LST_BRW_CHECK_DISCARD,
}

impl BrwCheck {
    pub fn from_u32(value: u32) -> Option<Self> {
        match value {
            LST_BRW_CHECK_NONE => Some(Self::None),
            LST_BRW_CHECK_SIMPLE => Some(Self::Simple),
            LST_BRW_CHECK_FULL => Some(Self::Full),
            LST_BRW_CHECK_DISCARD => Some(Self::Discard),
            _ => None,
        }
    }
}

/// Why a BRW pattern cannot be applied, or where the data is wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BrwPatternError {
    #[error("page size {0} is zero or not a multiple of {BRW_WORD_LEN}")]
    BadPageSize(usize),
    #[error("offset {offset} is not within a {page_size}-byte page")]
    OffsetOutsidePage { offset: usize, page_size: usize },
    #[error("offset {0} is not a multiple of {BRW_WORD_LEN}")]
    MisalignedOffset(usize),
    #[error("length {0} is not a multiple of {BRW_WORD_LEN}")]
    MisalignedLength(usize),
    /// `at` is the byte offset within the checked buffer.
    #[error("bad BRW data at byte {at}: {found:#018x}, expected {expected:#018x}")]
    Mismatch { at: usize, found: u64, expected: u64 },
}

/// The magic a BRW sink checks for: [`BRW_MAGIC`], byte-swapped when the request or reply came
/// from a byte-swapped peer (lustre: brw_test.c `brw_bulk_ready()`).
pub const fn brw_magic(order: ByteOrder) -> u64 {
    match order {
        ByteOrder::LittleEndian => BRW_MAGIC,
        ByteOrder::BigEndian => BRW_MAGIC.swap_bytes(),
    }
}

/// Fills one page fragment per `check` with `magic` stored little-endian (host order):
/// SIMPLE writes the first and last word, FULL every word, NONE and DISCARD nothing.
/// lustre: brw_test.c `brw_fill_page()`.
pub fn brw_fill_fragment(
    fragment: &mut [u8],
    check: BrwCheck,
    magic: u64,
) -> Result<(), BrwPatternError> {
    if fragment.len() % BRW_WORD_LEN != 0 {
        return Err(BrwPatternError::MisalignedLength(fragment.len()));
    }
    let word = magic.to_le_bytes();
    match check {
        BrwCheck::None | BrwCheck::Discard => {}
        BrwCheck::Simple => {
            let len = fragment.len();
            if let Some(first) = fragment.get_mut(..BRW_WORD_LEN) {
                first.copy_from_slice(&word);
            }
            if let Some(last) = fragment.get_mut(len.saturating_sub(BRW_WORD_LEN)..) {
                if last.len() == BRW_WORD_LEN {
                    last.copy_from_slice(&word);
                }
            }
        }
        BrwCheck::Full => {
            for chunk in fragment.chunks_exact_mut(BRW_WORD_LEN) {
                chunk.copy_from_slice(&word);
            }
        }
    }
    Ok(())
}

/// Checks one page fragment filled by [`brw_fill_fragment`]. lustre: brw_test.c
/// `brw_check_page()`.
pub fn brw_check_fragment(
    fragment: &[u8],
    check: BrwCheck,
    magic: u64,
) -> Result<(), BrwPatternError> {
    check_fragment_at(fragment, 0, check, magic)
}

/// Fills bulk data laid out in page fragments: the first fragment starts `first_offset` bytes
/// into a page (0 on a server; the test's `blk_offset` on a client), the rest are whole pages.
/// `first_offset`, `page_size` and `data.len()` must be multiples of 8.
/// lustre: rpc.c `srpc_init_bulk()`, brw_test.c `brw_fill_bulk()`.
pub fn brw_fill(
    data: &mut [u8],
    first_offset: usize,
    page_size: usize,
    check: BrwCheck,
    magic: u64,
) -> Result<(), BrwPatternError> {
    check_layout(data.len(), first_offset, page_size)?;
    let (first, rest) = data.split_at_mut(first_fragment_len(data.len(), first_offset, page_size));
    brw_fill_fragment(first, check, magic)?;
    for fragment in rest.chunks_mut(page_size) {
        brw_fill_fragment(fragment, check, magic)?;
    }
    Ok(())
}

/// Checks bulk data filled by [`brw_fill`] with the same layout. lustre: brw_test.c
/// `brw_check_bulk()`.
pub fn brw_check(
    data: &[u8],
    first_offset: usize,
    page_size: usize,
    check: BrwCheck,
    magic: u64,
) -> Result<(), BrwPatternError> {
    check_layout(data.len(), first_offset, page_size)?;
    let first_len = first_fragment_len(data.len(), first_offset, page_size);
    let (first, rest) = data.split_at(first_len);
    check_fragment_at(first, 0, check, magic)?;
    for (index, fragment) in rest.chunks(page_size).enumerate() {
        check_fragment_at(fragment, first_len + index * page_size, check, magic)?;
    }
    Ok(())
}

// ---- helpers ----

fn detect_order(magic_le: u32) -> Option<ByteOrder> {
    ByteOrder::detect(magic_le, SRPC_MSG_MAGIC)
}

fn dest_offset(index: usize, per_page: usize, page_size: usize) -> usize {
    (index / per_page) * page_size + (index % per_page) * PROCESS_ID_PACKED_LEN
}

fn check_layout(len: usize, first_offset: usize, page_size: usize) -> Result<(), BrwPatternError> {
    if page_size == 0 || page_size % BRW_WORD_LEN != 0 {
        return Err(BrwPatternError::BadPageSize(page_size));
    }
    if first_offset >= page_size {
        return Err(BrwPatternError::OffsetOutsidePage { offset: first_offset, page_size });
    }
    if first_offset % BRW_WORD_LEN != 0 {
        return Err(BrwPatternError::MisalignedOffset(first_offset));
    }
    if len % BRW_WORD_LEN != 0 {
        return Err(BrwPatternError::MisalignedLength(len));
    }
    Ok(())
}

/// `min(off + len, PAGE_SIZE) - off`, as `srpc_init_bulk()` sizes the first fragment.
fn first_fragment_len(len: usize, first_offset: usize, page_size: usize) -> usize {
    // check_layout guarantees first_offset < page_size.
    len.min(page_size - first_offset)
}

fn check_fragment_at(
    fragment: &[u8],
    base: usize,
    check: BrwCheck,
    magic: u64,
) -> Result<(), BrwPatternError> {
    if fragment.len() % BRW_WORD_LEN != 0 {
        return Err(BrwPatternError::MisalignedLength(fragment.len()));
    }
    let words = fragment.chunks_exact(BRW_WORD_LEN);
    let count = words.len();
    for (index, chunk) in words.enumerate() {
        let wanted = match check {
            BrwCheck::None | BrwCheck::Discard => false,
            BrwCheck::Simple => index == 0 || index + 1 == count,
            BrwCheck::Full => true,
        };
        if !wanted {
            continue;
        }
        let mut word = [0u8; BRW_WORD_LEN];
        word.copy_from_slice(chunk);
        let found = u64::from_le_bytes(word);
        if found != magic {
            return Err(BrwPatternError::Mismatch {
                at: base + index * BRW_WORD_LEN,
                found,
                expected: magic,
            });
        }
    }
    Ok(())
}

impl TestParams {
    fn read(r: &mut Reader<'_>, service: u32, ses_feats: u32) -> Self {
        // lustre: framework.c `sfw_unpack_addtest_req()` picks the union member this way.
        if service == SrpcService::Brw.id() {
            if ses_feats & LST_FEAT_BULK_LEN == 0 {
                Self::BrwV0 {
                    opcode: r.packed_u32(),
                    page_count: r.packed_u32(),
                    flags: r.packed_u32(),
                }
            } else {
                Self::BrwV1 {
                    opcode: r.packed_u16(),
                    flags: r.packed_u16(),
                    length: r.packed_u32(),
                    offset: r.packed_u32(),
                }
            }
        } else if service == SrpcService::Ping.id() {
            Self::Ping { size: r.packed_u32(), flags: r.packed_u32() }
        } else {
            Self::Unknown(r.packed_array())
        }
    }

    fn write(&self, w: &mut Writer<'_>) {
        match *self {
            Self::Ping { size, flags } => {
                w.u32(size);
                w.u32(flags);
            }
            Self::BrwV0 { opcode, page_count, flags } => {
                w.u32(opcode);
                w.u32(page_count);
                w.u32(flags);
            }
            Self::BrwV1 { opcode, flags, length, offset } => {
                w.u16(opcode);
                w.u16(flags);
                w.u32(length);
                w.u32(offset);
            }
            Self::Unknown(raw) => w.bytes(&raw),
        }
    }
}

/// Selftest's composite fields on the wire cursor. Every struct read is at most as long as the
/// slice it reads from (const-asserted above), so the packed reads' zero fallback past the end
/// never happens.
impl Reader<'_> {
    fn session(&mut self) -> SessionId {
        // Bit-for-bit: the kernel's `ses_stamp` is an s64 sent as its 8 bytes.
        SessionId { nid: self.packed_u64(), stamp: self.packed_u64() as i64 }
    }

    fn name(&mut self) -> Result<LstName, SrpcParseError> {
        LstName::from_wire(&self.packed_array()).map_err(|_| SrpcParseError::NameNotTerminated)
    }
}

impl Writer<'_> {
    fn session(&mut self, session: SessionId) {
        self.u64(session.nid);
        self.u64(session.stamp as u64);
    }

    fn name(&mut self, name: &LstName) {
        self.bytes(&name.to_wire());
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // Tests state their expectations with unwrap.
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SID: SessionId = SessionId { nid: 0x0002_0000_C0A8_0101, stamp: 0x0102_0304_0506_0708 };

    fn emit(ses_feats: u32, body: SrpcBody) -> [u8; SRPC_MSG_LEN] {
        SrpcMsg::new(ses_feats, body).emit()
    }

    fn u16_at(buf: &[u8], at: usize) -> u16 {
        u16::from_le_bytes(buf[at..at + 2].try_into().unwrap())
    }

    fn u32_at(buf: &[u8], at: usize) -> u32 {
        u32::from_le_bytes(buf[at..at + 4].try_into().unwrap())
    }

    fn u64_at(buf: &[u8], at: usize) -> u64 {
        u64::from_le_bytes(buf[at..at + 8].try_into().unwrap())
    }

    fn name(text: &str) -> LstName {
        LstName::new(text.as_bytes()).unwrap()
    }

    /// Asserts the session id sits at absolute offset `at` and everything past the body's
    /// length is zero, then that the bytes parse back to the same message.
    fn check_common(buf: &[u8; SRPC_MSG_LEN], sid_at: Option<usize>, body_len: usize) {
        if let Some(at) = sid_at {
            assert_eq!(u64_at(buf, at), SID.nid);
            assert_eq!(u64_at(buf, at + 8) as i64, SID.stamp);
        }
        assert!(buf[SRPC_BODY_OFFSET + body_len..].iter().all(|&b| b == 0));
        let (msg, order) = SrpcMsg::parse(buf).unwrap();
        assert_eq!(order, ByteOrder::LittleEndian);
        assert_eq!(msg.emit(), *buf);
    }

    #[test]
    fn header_layout() {
        let body = SrpcBody::BrwReply(BrwReply { status: errno::EBADMSG });
        let buf = emit(LST_FEAT_BULK_LEN, body);
        assert_eq!(buf[..4], [0x0d, 0xf0, 0xb0, 0xee]);
        assert_eq!(u32_at(&buf, 4), 1);
        assert_eq!(u32_at(&buf, 8), 13);
        assert_eq!(u32_at(&buf, 12), 0);
        assert_eq!(u32_at(&buf, 16), 0);
        assert_eq!(u32_at(&buf, 20), 1);
        assert_eq!(u32_at(&buf, 24), 74);
        check_common(&buf, None, BrwReply::LEN);
    }

    #[test]
    fn make_session_layout() {
        let request = MakeSessionRequest {
            reply_match_bits: 0x1111_2222_3333_4444,
            session: SID,
            force: true,
            name: name("bench"),
        };
        let buf = emit(1, SrpcBody::MakeSessionRequest(request));
        assert_eq!(u32_at(&buf, 8), 0);
        assert_eq!(u64_at(&buf, 24), 0x1111_2222_3333_4444);
        assert_eq!(u32_at(&buf, 48), 1);
        assert_eq!(&buf[52..57], b"bench");
        assert!(buf[57..84].iter().all(|&b| b == 0));
        check_common(&buf, Some(32), MakeSessionRequest::LEN);

        let reply = MakeSessionReply {
            status: errno::EBUSY,
            session: SID,
            timeout_seconds: 100,
            name: name("other"),
        };
        let buf = emit(1, SrpcBody::MakeSessionReply(reply));
        assert_eq!(u32_at(&buf, 8), 1);
        assert_eq!(u32_at(&buf, 24), 16);
        assert_eq!(u32_at(&buf, 44), 100);
        assert_eq!(&buf[48..53], b"other");
        check_common(&buf, Some(28), MakeSessionReply::LEN);
    }

    #[test]
    fn remove_session_layout() {
        let request = RemoveSessionRequest { reply_match_bits: 7, session: SID };
        let buf = emit(1, SrpcBody::RemoveSessionRequest(request));
        assert_eq!(u32_at(&buf, 8), 2);
        assert_eq!(u64_at(&buf, 24), 7);
        check_common(&buf, Some(32), RemoveSessionRequest::LEN);

        let reply = RemoveSessionReply { status: errno::ESRCH, session: SID };
        let buf = emit(1, SrpcBody::RemoveSessionReply(reply));
        assert_eq!(u32_at(&buf, 8), 3);
        assert_eq!(u32_at(&buf, 24), 3);
        check_common(&buf, Some(28), RemoveSessionReply::LEN);
    }

    #[test]
    fn debug_layout() {
        let request = DebugRequest { reply_match_bits: 9, session: SID, flags: 0xabcd };
        let buf = emit(1, SrpcBody::DebugRequest(request));
        assert_eq!(u32_at(&buf, 8), 10);
        assert_eq!(u64_at(&buf, 24), 9);
        assert_eq!(u32_at(&buf, 48), 0xabcd);
        check_common(&buf, Some(32), DebugRequest::LEN);

        let reply = DebugReply {
            status: 0,
            session: SID,
            timeout_seconds: 100,
            batch_count: 5,
            name: LstName::new(&[b'x'; 31]).unwrap(),
        };
        let buf = emit(1, SrpcBody::DebugReply(reply));
        assert_eq!(u32_at(&buf, 8), 11);
        assert_eq!(u32_at(&buf, 44), 100);
        assert_eq!(u32_at(&buf, 48), 5);
        assert_eq!(buf[52..83], [b'x'; 31]);
        assert_eq!(buf[83], 0);
        check_common(&buf, Some(28), DebugReply::LEN);
    }

    #[test]
    fn batch_layout() {
        let request = BatchRequest {
            reply_match_bits: 3,
            session: SID,
            batch: BatchId(0x0a0b_0c0d_0e0f_1011),
            opcode: SRPC_BATCH_OPC_STOP,
            test_index: 4,
            arg: 1,
        };
        let buf = emit(1, SrpcBody::BatchRequest(request));
        assert_eq!(u32_at(&buf, 8), 4);
        assert_eq!(u64_at(&buf, 48), 0x0a0b_0c0d_0e0f_1011);
        assert_eq!(u32_at(&buf, 56), 2);
        assert_eq!(u32_at(&buf, 60), 4);
        assert_eq!(u32_at(&buf, 64), 1);
        check_common(&buf, Some(32), BatchRequest::LEN);

        let reply = BatchReply { status: 0, session: SID, active: 6, time: 30 };
        let buf = emit(1, SrpcBody::BatchReply(reply));
        assert_eq!(u32_at(&buf, 8), 5);
        assert_eq!(u32_at(&buf, 44), 6);
        assert_eq!(u32_at(&buf, 48), 30);
        check_common(&buf, Some(28), BatchReply::LEN);
    }

    #[test]
    fn stat_layout() {
        let request = StatRequest { reply_match_bits: 11, session: SID, stat_type: 0 };
        let buf = emit(1, SrpcBody::StatRequest(request));
        assert_eq!(u32_at(&buf, 8), 6);
        assert_eq!(u64_at(&buf, 24), 11);
        check_common(&buf, Some(32), StatRequest::LEN);

        let reply = StatReply {
            status: 0,
            session: SID,
            framework: SfwCounters {
                running_ms: 1,
                active_batches: 2,
                zombie_sessions: 3,
                brw_errors: 4,
                ping_errors: 5,
            },
            rpc: SrpcCounters {
                errors: 6,
                rpcs_sent: 7,
                rpcs_received: 8,
                rpcs_dropped: 9,
                rpcs_expired: 10,
                bulk_get: 0x1_0000_0011,
                bulk_put: 0x1_0000_0012,
            },
            lnet: LnetCountersCommon {
                messages_allocated: 13,
                messages_max: 14,
                errors: 15,
                send_count: 16,
                receive_count: 17,
                route_count: 18,
                drop_count: 19,
                send_length: 0x2_0000_0020,
                receive_length: 0x2_0000_0021,
                route_length: 0x2_0000_0022,
                drop_length: 0x2_0000_0023,
            },
        };
        let buf = emit(1, SrpcBody::StatReply(reply));
        assert_eq!(u32_at(&buf, 8), 7);
        // sfw_counters at body 20 (absolute 44).
        for (i, expected) in (1..=5).enumerate() {
            assert_eq!(u32_at(&buf, 44 + 4 * i), expected);
        }
        // srpc_counters at body 40 (absolute 64).
        for (i, expected) in (6..=10).enumerate() {
            assert_eq!(u32_at(&buf, 64 + 4 * i), expected);
        }
        assert_eq!(u64_at(&buf, 84), 0x1_0000_0011);
        assert_eq!(u64_at(&buf, 92), 0x1_0000_0012);
        // lnet_counters_common at body 76 (absolute 100).
        for (i, expected) in (13..=19).enumerate() {
            assert_eq!(u32_at(&buf, 100 + 4 * i), expected);
        }
        assert_eq!(u64_at(&buf, 128), 0x2_0000_0020);
        assert_eq!(u64_at(&buf, 136), 0x2_0000_0021);
        assert_eq!(u64_at(&buf, 144), 0x2_0000_0022);
        assert_eq!(u64_at(&buf, 152), 0x2_0000_0023);
        check_common(&buf, Some(28), StatReply::LEN);
    }

    fn test_request(service: u32, params: TestParams) -> TestRequest {
        TestRequest {
            reply_match_bits: 0x5151,
            bulk_match_bits: 0x5252,
            session: SID,
            batch: BatchId(0x77),
            service,
            loop_count: 1000,
            concurrency: 8,
            is_client: true,
            stop_on_error: true,
            dest_count: 0xA1B2_C3D4,
            params,
        }
    }

    #[test]
    fn test_request_layout_ping() {
        let request = test_request(12, TestParams::Ping { size: 0x1234, flags: 0x5678 });
        let buf = emit(1, SrpcBody::TestRequest(request));
        assert_eq!(u32_at(&buf, 8), 8);
        assert_eq!(u64_at(&buf, 24), 0x5151);
        assert_eq!(u64_at(&buf, 32), 0x5252);
        assert_eq!(u64_at(&buf, 56), 0x77);
        assert_eq!(u32_at(&buf, 64), 12);
        assert_eq!(u32_at(&buf, 68), 1000);
        assert_eq!(u32_at(&buf, 72), 8);
        assert_eq!(buf[76], 1);
        assert_eq!(buf[77], 1);
        // The unaligned ndest at body offset 54.
        assert_eq!(SRPC_BODY_OFFSET + TestRequest::DEST_COUNT_OFFSET, 78);
        assert_eq!(buf[78..82], [0xd4, 0xc3, 0xb2, 0xa1]);
        assert_eq!(u32_at(&buf, 82), 0x1234);
        assert_eq!(u32_at(&buf, 86), 0x5678);
        assert_eq!(u32_at(&buf, 90), 0);
        check_common(&buf, Some(40), TestRequest::LEN);
    }

    #[test]
    fn test_request_layout_brw_v0_and_v1() {
        let v0 = test_request(11, TestParams::BrwV0 { opcode: 2, page_count: 16, flags: 3 });
        let buf = emit(0, SrpcBody::TestRequest(v0));
        assert_eq!(u32_at(&buf, 82), 2);
        assert_eq!(u32_at(&buf, 86), 16);
        assert_eq!(u32_at(&buf, 90), 3);
        check_common(&buf, Some(40), TestRequest::LEN);

        let params = TestParams::BrwV1 { opcode: 1, flags: 2, length: 65536, offset: 8 };
        let buf = emit(LST_FEAT_BULK_LEN, SrpcBody::TestRequest(test_request(11, params)));
        assert_eq!(u16_at(&buf, 82), 1);
        assert_eq!(u16_at(&buf, 84), 2);
        assert_eq!(u32_at(&buf, 86), 65536);
        assert_eq!(u32_at(&buf, 90), 8);
        check_common(&buf, Some(40), TestRequest::LEN);
    }

    #[test]
    fn test_params_variant_follows_service_and_feature() {
        let mut buf =
            emit(0, SrpcBody::TestRequest(test_request(11, TestParams::Unknown([0; 12]))));
        buf[82..94].copy_from_slice(&[1, 0, 2, 0, 3, 0, 0, 0, 4, 0, 0, 0]);
        let parse_params = |buf: &[u8; 160]| match SrpcMsg::parse(buf).unwrap().0.body {
            SrpcBody::TestRequest(t) => t.params,
            other => panic!("unexpected {other:?}"),
        };
        assert_eq!(
            parse_params(&buf),
            TestParams::BrwV0 { opcode: 0x0002_0001, page_count: 3, flags: 4 }
        );
        buf[20] = 1; // BULK_LEN
        assert_eq!(
            parse_params(&buf),
            TestParams::BrwV1 { opcode: 1, flags: 2, length: 3, offset: 4 }
        );
        buf[64] = 12; // PING
        assert_eq!(parse_params(&buf), TestParams::Ping { size: 0x0002_0001, flags: 3 });
        buf[64] = 4; // not a test service: raw bytes
        let mut raw = [0u8; 12];
        raw.copy_from_slice(&buf[82..94]);
        assert_eq!(parse_params(&buf), TestParams::Unknown(raw));
    }

    #[test]
    fn test_reply_layout() {
        let reply = TestReply { status: errno::ENOENT, session: SID };
        let buf = emit(1, SrpcBody::TestReply(reply));
        assert_eq!(u32_at(&buf, 8), 9);
        assert_eq!(u32_at(&buf, 24), 2);
        check_common(&buf, Some(28), TestReply::LEN);
    }

    #[test]
    fn ping_layout() {
        let request = PingRequest {
            reply_match_bits: 0x99,
            magic: LST_PING_TEST_MAGIC,
            sequence: 42,
            time_seconds: 1_700_000_000,
            time_nanoseconds: 123_456_789,
        };
        let buf = emit(1, SrpcBody::PingRequest(request));
        assert_eq!(u32_at(&buf, 8), 14);
        assert_eq!(u64_at(&buf, 24), 0x99);
        assert_eq!(buf[32..36], [0xce, 0xfa, 0xbe, 0xba]);
        assert_eq!(u32_at(&buf, 36), 42);
        assert_eq!(u64_at(&buf, 40), 1_700_000_000);
        assert_eq!(u64_at(&buf, 48), 123_456_789);
        check_common(&buf, None, PingRequest::LEN);

        let reply = PingReply { status: 0, magic: LST_PING_TEST_MAGIC, sequence: 42 };
        let buf = emit(1, SrpcBody::PingReply(reply));
        assert_eq!(u32_at(&buf, 8), 15);
        assert_eq!(u32_at(&buf, 28), 0xBABE_FACE);
        assert_eq!(u32_at(&buf, 32), 42);
        check_common(&buf, None, PingReply::LEN);
    }

    #[test]
    fn brw_layout() {
        let request = BrwRequest {
            reply_match_bits: 0x10,
            bulk_match_bits: 0x20,
            direction: LST_BRW_WRITE,
            length: 1 << 20,
            check_mode: LST_BRW_CHECK_SIMPLE,
        };
        let buf = emit(1, SrpcBody::BrwRequest(request));
        assert_eq!(u32_at(&buf, 8), 12);
        assert_eq!(u64_at(&buf, 24), 0x10);
        assert_eq!(u64_at(&buf, 32), 0x20);
        assert_eq!(u32_at(&buf, 40), 2);
        assert_eq!(u32_at(&buf, 44), 1 << 20);
        assert_eq!(u32_at(&buf, 48), 2);
        check_common(&buf, None, BrwRequest::LEN);
    }

    #[test]
    fn join_layout() {
        let request = JoinRequest { reply_match_bits: 5, session: SID, group: name("clients") };
        let buf = emit(1, SrpcBody::JoinRequest(request));
        assert_eq!(u32_at(&buf, 8), 16);
        assert_eq!(u64_at(&buf, 24), 5);
        assert_eq!(&buf[48..55], b"clients");
        check_common(&buf, Some(32), JoinRequest::LEN);

        let reply =
            JoinReply { status: 0, session: SID, timeout_seconds: 300, session_name: name("s") };
        let buf = emit(1, SrpcBody::JoinReply(reply));
        assert_eq!(u32_at(&buf, 8), 17);
        assert_eq!(u32_at(&buf, 44), 300);
        assert_eq!(buf[48], b's');
        check_common(&buf, Some(28), JoinReply::LEN);
    }

    #[test]
    fn swapped_magic_parses_and_swaps_every_field() {
        // A big-endian peer's PING request, built by hand.
        let mut buf = [0u8; SRPC_MSG_LEN];
        buf[..4].copy_from_slice(&[0xee, 0xb0, 0xf0, 0x0d]);
        buf[4..8].copy_from_slice(&1u32.to_be_bytes());
        buf[8..12].copy_from_slice(&14u32.to_be_bytes());
        buf[20..24].copy_from_slice(&1u32.to_be_bytes());
        buf[24..32].copy_from_slice(&0x0102_0304_0506_0708u64.to_be_bytes());
        buf[32..36].copy_from_slice(&LST_PING_TEST_MAGIC.to_be_bytes());
        buf[36..40].copy_from_slice(&7u32.to_be_bytes());
        buf[40..48].copy_from_slice(&99u64.to_be_bytes());
        buf[48..56].copy_from_slice(&5u64.to_be_bytes());
        let (msg, order) = SrpcMsg::parse(&buf).unwrap();
        assert_eq!(order, ByteOrder::BigEndian);
        let expected = SrpcMsg::new(
            1,
            SrpcBody::PingRequest(PingRequest {
                reply_match_bits: 0x0102_0304_0506_0708,
                magic: LST_PING_TEST_MAGIC,
                sequence: 7,
                time_seconds: 99,
                time_nanoseconds: 5,
            }),
        );
        assert_eq!(msg, expected);
        assert_eq!(expected.emit_in(ByteOrder::BigEndian), buf);
    }

    #[test]
    fn swapped_test_request_swaps_u16_params_and_unaligned_ndest() {
        let params = TestParams::BrwV1 { opcode: 1, flags: 3, length: 4096, offset: 16 };
        let msg = SrpcMsg::new(LST_FEAT_BULK_LEN, SrpcBody::TestRequest(test_request(11, params)));
        let buf = msg.emit_in(ByteOrder::BigEndian);
        assert_eq!(buf[78..82], [0xa1, 0xb2, 0xc3, 0xd4]);
        assert_eq!(buf[82..86], [0, 1, 0, 3]);
        assert_eq!(SrpcMsg::parse(&buf), Ok((msg, ByteOrder::BigEndian)));
    }

    #[test]
    fn wrong_length_is_rejected() {
        let buf = emit(1, SrpcBody::BrwReply(BrwReply { status: 0 }));
        assert_eq!(SrpcMsg::parse(&buf[..159]), Err(SrpcParseError::WrongLength(159)));
        assert_eq!(SrpcMsg::parse(&[]), Err(SrpcParseError::WrongLength(0)));
        let mut long = buf.to_vec();
        long.push(0);
        assert_eq!(SrpcMsg::parse(&long), Err(SrpcParseError::WrongLength(161)));
    }

    #[test]
    fn bad_magic_is_rejected() {
        let mut buf = emit(1, SrpcBody::BrwReply(BrwReply { status: 0 }));
        buf[0] = 0x0e;
        assert_eq!(SrpcMsg::parse(&buf), Err(SrpcParseError::BadMagic(0xEEB0_F00E)));
    }

    #[test]
    fn wrong_version_reports_what_an_eproto_reply_needs() {
        let request = DebugRequest { reply_match_bits: 0xfeed, session: SID, flags: 0 };
        let mut msg = SrpcMsg::new(1, SrpcBody::DebugRequest(request));
        msg.version = 2;
        for order in [ByteOrder::LittleEndian, ByteOrder::BigEndian] {
            assert_eq!(
                SrpcMsg::parse(&msg.emit_in(order)),
                Err(SrpcParseError::WrongVersion {
                    version: 2,
                    msg_type: 10,
                    reply_match_bits: 0xfeed,
                    order
                })
            );
        }
    }

    #[test]
    fn unknown_type_is_rejected() {
        let mut buf = emit(1, SrpcBody::BrwReply(BrwReply { status: 0 }));
        buf[8] = 18;
        assert_eq!(SrpcMsg::parse(&buf), Err(SrpcParseError::UnknownType(18)));
    }

    #[test]
    fn unterminated_name_is_rejected() {
        let request = MakeSessionRequest {
            reply_match_bits: 1,
            session: SID,
            force: false,
            name: LstName::default(),
        };
        let mut buf = emit(1, SrpcBody::MakeSessionRequest(request));
        buf[52..84].fill(b'a');
        assert_eq!(SrpcMsg::parse(&buf), Err(SrpcParseError::NameNotTerminated));
    }

    #[test]
    fn name_rules() {
        assert_eq!(LstName::new(&[b'a'; 32]), Err(LstNameError::TooLong(32)));
        assert_eq!(LstName::new(b"a\0b"), Err(LstNameError::ContainsNul));
        assert_eq!(LstName::from_wire(&[b'a'; 32]), Err(LstNameError::NotTerminated));
        // Bytes after the first NUL are ignored.
        let mut field = [0u8; 32];
        field[..3].copy_from_slice(b"abc");
        field[10] = b'z';
        let parsed = LstName::from_wire(&field).unwrap();
        assert_eq!(parsed.as_bytes(), b"abc");
        assert!(!parsed.is_empty());
        assert!(LstName::default().is_empty());
        let mut expected = [0u8; 32];
        expected[..3].copy_from_slice(b"abc");
        assert_eq!(parsed.to_wire(), expected);
    }

    #[test]
    fn check_request_accepts_both_orders() {
        let body = SrpcBody::BrwRequest(BrwRequest {
            reply_match_bits: 1,
            bulk_match_bits: 2,
            direction: 1,
            length: 4096,
            check_mode: 1,
        });
        let msg = SrpcMsg::new(1, body);
        assert_eq!(check_request(&msg.emit(), SrpcService::Brw), Ok(ByteOrder::LittleEndian));
        let swapped = msg.emit_in(ByteOrder::BigEndian);
        assert_eq!(check_request(&swapped, SrpcService::Brw), Ok(ByteOrder::BigEndian));
        // The kernel accepts the type in either order, whatever the magic's order.
        let mut mixed = msg.emit();
        mixed[8..12].copy_from_slice(&12u32.to_be_bytes());
        assert_eq!(check_request(&mixed, SrpcService::Brw), Ok(ByteOrder::LittleEndian));
        // A wrong version still passes this check (it gets an EPROTO reply later).
        let mut old = msg.clone();
        old.version = 0;
        assert_eq!(check_request(&old.emit(), SrpcService::Brw), Ok(ByteOrder::LittleEndian));
    }

    #[test]
    fn check_request_errors() {
        let msg =
            SrpcMsg::new(1, SrpcBody::PingReply(PingReply { status: 0, magic: 0, sequence: 0 }));
        let buf = msg.emit();
        assert_eq!(
            check_request(&buf[..100], SrpcService::Ping),
            Err(SrpcRequestError::WrongLength(100))
        );
        let mut bad = buf;
        bad[3] = 0;
        assert_eq!(
            check_request(&bad, SrpcService::Ping),
            Err(SrpcRequestError::BadMagic(0x00B0_F00D))
        );
        assert_eq!(
            check_request(&buf, SrpcService::Ping),
            Err(SrpcRequestError::WrongType { expected: SrpcMsgType::PingRequest, found: 15 })
        );
    }

    #[test]
    fn services_map_to_types_and_portals() {
        let table = [
            (SrpcService::Debug, 0, 10, 11, 51),
            (SrpcService::MakeSession, 1, 0, 1, 51),
            (SrpcService::RemoveSession, 2, 2, 3, 51),
            (SrpcService::Batch, 3, 4, 5, 51),
            (SrpcService::Test, 4, 8, 9, 51),
            (SrpcService::QueryStat, 5, 6, 7, 51),
            (SrpcService::Join, 6, 16, 17, 51),
            (SrpcService::Brw, 11, 12, 13, 50),
            (SrpcService::Ping, 12, 14, 15, 50),
        ];
        for (service, id, request, reply, portal) in table {
            assert_eq!(service.id(), id);
            assert_eq!(SrpcService::from_id(id), Some(service));
            assert_eq!(service.request_type().to_u32(), request);
            assert_eq!(service.reply_type().to_u32(), reply);
            assert_eq!(service.request_portal(), portal);
            assert!(service.request_type().is_request());
            assert!(!service.reply_type().is_request());
        }
        assert_eq!(SrpcService::from_id(SRPC_FRAMEWORK_SERVICE_MAX_ID), None);
        assert_eq!(SrpcMsgType::from_u32(18), None);
    }

    #[test]
    fn match_bits_generator_follows_srpc_next_id() {
        let mut ids = MatchBitsGenerator::new(0x1_6553_0ABC);
        assert_eq!(ids.next_id(), 0x0ABC_0000_0000_0001);
        assert_eq!(ids.next_id(), 0x0ABC_0000_0000_0002);
        let mut wrap = MatchBitsGenerator { last: u64::MAX - 1 };
        assert_eq!(wrap.next_id(), u64::MAX);
        assert_eq!(wrap.next_id(), 0);
    }

    #[test]
    fn dest_list_4k_layout() {
        let ids: Vec<ProcessIdPacked> = (0..343u32)
            .map(|i| ProcessIdPacked { nid: 0x0002_0000_0A00_0000 | u64::from(i), pid: 12345 })
            .collect();
        assert_eq!(ids_per_page(PAGE_SIZE_4K), 341);
        assert_eq!(SFW_MAX_NDESTS_4K, 87_296);
        let bytes = encode_dest_list(&ids, PAGE_SIZE_4K).unwrap();
        assert_eq!(bytes.len(), 4096 + 24);
        assert_eq!(u64_at(&bytes, 0), 0x0002_0000_0A00_0000);
        assert_eq!(u32_at(&bytes, 8), 12345);
        assert_eq!(u64_at(&bytes, 340 * 12), 0x0002_0000_0A00_0000 | 340);
        assert_eq!(bytes[4092..4096], [0; 4]);
        assert_eq!(u64_at(&bytes, 4096), 0x0002_0000_0A00_0000 | 341);
        assert_eq!(u32_at(&bytes, 4104), 12345);
        assert_eq!(decode_dest_list(&bytes, 343, PAGE_SIZE_4K, ByteOrder::LittleEndian), Ok(ids));
    }

    #[test]
    fn dest_list_swapped_entries() {
        let mut bytes = vec![0u8; 12];
        bytes[..8].copy_from_slice(&0x0002_0000_C0A8_0102u64.to_be_bytes());
        bytes[8..].copy_from_slice(&12345u32.to_be_bytes());
        assert_eq!(
            decode_dest_list(&bytes, 1, PAGE_SIZE_4K, ByteOrder::BigEndian),
            Ok(vec![ProcessIdPacked { nid: 0x0002_0000_C0A8_0102, pid: 12345 }])
        );
    }

    #[test]
    fn dest_list_errors() {
        assert_eq!(
            decode_dest_list(&[0; 24], 1, 11, ByteOrder::LittleEndian),
            Err(DestListError::PageTooSmall(11))
        );
        assert_eq!(
            decode_dest_list(&[], 87_297, PAGE_SIZE_4K, ByteOrder::LittleEndian),
            Err(DestListError::TooManyDestinations { count: 87_297, max: 87_296 })
        );
        // A kernel node's 12 * ndest GET is short of the paged layout past one page.
        assert_eq!(
            decode_dest_list(&[0; 12 * 342], 342, PAGE_SIZE_4K, ByteOrder::LittleEndian),
            Err(DestListError::Truncated { needed: 4108, available: 4104 })
        );
        let too_many = vec![ProcessIdPacked { nid: 0, pid: 0 }; 257];
        assert_eq!(
            encode_dest_list(&too_many, 12),
            Err(DestListError::TooManyDestinations { count: 257, max: 256 })
        );
        assert_eq!(decode_dest_list(&[], 0, PAGE_SIZE_4K, ByteOrder::LittleEndian), Ok(vec![]));
    }

    #[test]
    fn brw_simple_marks_first_and_last_word_of_each_fragment() {
        // 64-byte pages, client offset 48: fragments [0, 16), [16, 80), [80, 96).
        let mut data = vec![0u8; 96];
        brw_fill(&mut data, 48, 64, BrwCheck::Simple, BRW_MAGIC).unwrap();
        let marked: Vec<usize> =
            (0..12).filter(|w| u64_at(&data, w * 8) == BRW_MAGIC).map(|w| w * 8).collect();
        assert_eq!(marked, [0, 8, 16, 72, 80, 88]);
        assert_eq!(data[..8], [0xb3, 0xee, 0xb2, 0xee, 0xb1, 0xee, 0xb0, 0xee]);
        brw_check(&data, 48, 64, BrwCheck::Simple, BRW_MAGIC).unwrap();
        // The same data seen with offset 0 has different fragment boundaries.
        assert_eq!(
            brw_check(&data, 0, 64, BrwCheck::Simple, BRW_MAGIC),
            Err(BrwPatternError::Mismatch { at: 56, found: 0, expected: BRW_MAGIC })
        );
    }

    #[test]
    fn brw_full_none_and_discard() {
        let mut data = vec![0u8; 4096 * 2];
        brw_fill(&mut data, 0, 4096, BrwCheck::Full, BRW_POISON).unwrap();
        assert!(data.iter().all(|&b| b == 0xbe || b == 0xef));
        brw_check(&data, 0, 4096, BrwCheck::Full, BRW_POISON).unwrap();
        data[4096 + 800] ^= 1;
        assert!(matches!(
            brw_check(&data, 0, 4096, BrwCheck::Full, BRW_POISON),
            Err(BrwPatternError::Mismatch { at: 4896, .. })
        ));
        let mut untouched = vec![7u8; 64];
        brw_fill(&mut untouched, 0, 32, BrwCheck::None, BRW_MAGIC).unwrap();
        brw_fill(&mut untouched, 0, 32, BrwCheck::Discard, BRW_MAGIC).unwrap();
        assert!(untouched.iter().all(|&b| b == 7));
        brw_check(&untouched, 0, 32, BrwCheck::None, BRW_MAGIC).unwrap();
        brw_check(&untouched, 0, 32, BrwCheck::Discard, BRW_MAGIC).unwrap();
    }

    #[test]
    fn brw_swapped_magic() {
        assert_eq!(brw_magic(ByteOrder::BigEndian), 0xB3EE_B2EE_B1EE_B0EE);
        let mut fragment = [0u8; 8];
        brw_fill_fragment(&mut fragment, BrwCheck::Simple, brw_magic(ByteOrder::BigEndian))
            .unwrap();
        // A big-endian peer's host-order BRW_MAGIC.
        assert_eq!(fragment, BRW_MAGIC.to_be_bytes());
        brw_check_fragment(&fragment, BrwCheck::Full, brw_magic(ByteOrder::BigEndian)).unwrap();
    }

    #[test]
    fn brw_layout_errors() {
        let mut data = [0u8; 16];
        assert_eq!(
            brw_fill(&mut data, 0, 0, BrwCheck::Full, BRW_MAGIC),
            Err(BrwPatternError::BadPageSize(0))
        );
        assert_eq!(
            brw_check(&data, 0, 4095, BrwCheck::Full, BRW_MAGIC),
            Err(BrwPatternError::BadPageSize(4095))
        );
        assert_eq!(
            brw_fill(&mut data, 4096, 4096, BrwCheck::Full, BRW_MAGIC),
            Err(BrwPatternError::OffsetOutsidePage { offset: 4096, page_size: 4096 })
        );
        assert_eq!(
            brw_fill(&mut data, 4, 4096, BrwCheck::Full, BRW_MAGIC),
            Err(BrwPatternError::MisalignedOffset(4))
        );
        assert_eq!(
            brw_check(&data[..12], 0, 4096, BrwCheck::Full, BRW_MAGIC),
            Err(BrwPatternError::MisalignedLength(12))
        );
        assert_eq!(
            brw_fill_fragment(&mut data[..5], BrwCheck::Simple, BRW_MAGIC),
            Err(BrwPatternError::MisalignedLength(5))
        );
    }

    fn arb_name() -> impl Strategy<Value = LstName> {
        proptest::collection::vec(1u8..=255, 0..=LstName::MAX_LEN)
            .prop_map(|bytes| LstName::new(&bytes).unwrap())
    }

    fn arb_session() -> impl Strategy<Value = SessionId> {
        (any::<u64>(), any::<i64>()).prop_map(|(nid, stamp)| SessionId { nid, stamp })
    }

    fn arb_counters() -> impl Strategy<Value = (SfwCounters, SrpcCounters, LnetCountersCommon)> {
        (
            any::<[u32; 5]>(),
            (any::<[u32; 5]>(), any::<[u64; 2]>()),
            (any::<[u32; 7]>(), any::<[u64; 4]>()),
        )
            .prop_map(|(f, (r, rl), (l, ll))| {
                (
                    SfwCounters {
                        running_ms: f[0],
                        active_batches: f[1],
                        zombie_sessions: f[2],
                        brw_errors: f[3],
                        ping_errors: f[4],
                    },
                    SrpcCounters {
                        errors: r[0],
                        rpcs_sent: r[1],
                        rpcs_received: r[2],
                        rpcs_dropped: r[3],
                        rpcs_expired: r[4],
                        bulk_get: rl[0],
                        bulk_put: rl[1],
                    },
                    LnetCountersCommon {
                        messages_allocated: l[0],
                        messages_max: l[1],
                        errors: l[2],
                        send_count: l[3],
                        receive_count: l[4],
                        route_count: l[5],
                        drop_count: l[6],
                        send_length: ll[0],
                        receive_length: ll[1],
                        route_length: ll[2],
                        drop_length: ll[3],
                    },
                )
            })
    }

    /// A test request with parameters consistent with its service and `ses_feats`.
    fn arb_test_request() -> impl Strategy<Value = (u32, SrpcBody)> {
        let params = prop_oneof![
            (any::<u32>(), any::<u32>()).prop_map(|(size, flags)| (
                12,
                0,
                TestParams::Ping { size, flags }
            )),
            (any::<u32>(), any::<u32>(), any::<u32>()).prop_map(|(opcode, page_count, flags)| {
                (11, 0, TestParams::BrwV0 { opcode, page_count, flags })
            }),
            (any::<u16>(), any::<u16>(), any::<u32>(), any::<u32>()).prop_map(
                |(opcode, flags, length, offset)| {
                    (11, LST_FEAT_BULK_LEN, TestParams::BrwV1 { opcode, flags, length, offset })
                }
            ),
            (
                any::<u32>().prop_filter("not a test service", |s| *s != 11 && *s != 12),
                any::<[u8; 12]>()
            )
                .prop_map(|(service, raw)| (service, 0, TestParams::Unknown(raw))),
        ];
        (
            params,
            any::<[u64; 3]>(),
            arb_session(),
            any::<[u32; 3]>(),
            any::<[bool; 2]>(),
            any::<u32>(),
        )
            .prop_map(
                |((service, feats, params), ids, session, counts, flags, extra_feats)| {
                    // Bits other than BULK_LEN do not change the layout.
                    let feats = feats | (extra_feats & !LST_FEAT_BULK_LEN);
                    let request = TestRequest {
                        reply_match_bits: ids[0],
                        bulk_match_bits: ids[1],
                        session,
                        batch: BatchId(ids[2]),
                        service,
                        loop_count: counts[0],
                        concurrency: counts[1],
                        is_client: flags[0],
                        stop_on_error: flags[1],
                        dest_count: counts[2],
                        params,
                    };
                    (feats, SrpcBody::TestRequest(request))
                },
            )
    }

    fn arb_msg() -> impl Strategy<Value = SrpcMsg> {
        let u = any::<u32>;
        let q = any::<u64>;
        let simple = prop_oneof![
            (q(), arb_session(), any::<bool>(), arb_name()).prop_map(|(a, b, c, d)| {
                SrpcBody::MakeSessionRequest(MakeSessionRequest {
                    reply_match_bits: a,
                    session: b,
                    force: c,
                    name: d,
                })
            }),
            (u(), arb_session(), u(), arb_name()).prop_map(|(a, b, c, d)| {
                SrpcBody::MakeSessionReply(MakeSessionReply {
                    status: a,
                    session: b,
                    timeout_seconds: c,
                    name: d,
                })
            }),
            (q(), arb_session()).prop_map(|(a, b)| {
                SrpcBody::RemoveSessionRequest(RemoveSessionRequest {
                    reply_match_bits: a,
                    session: b,
                })
            }),
            (u(), arb_session()).prop_map(|(a, b)| {
                SrpcBody::RemoveSessionReply(RemoveSessionReply { status: a, session: b })
            }),
            (q(), arb_session(), q(), any::<[u32; 3]>()).prop_map(|(a, b, c, d)| {
                SrpcBody::BatchRequest(BatchRequest {
                    reply_match_bits: a,
                    session: b,
                    batch: BatchId(c),
                    opcode: d[0],
                    test_index: d[1],
                    arg: d[2],
                })
            }),
            (u(), arb_session(), u(), u()).prop_map(|(a, b, c, d)| {
                SrpcBody::BatchReply(BatchReply { status: a, session: b, active: c, time: d })
            }),
            (q(), arb_session(), u()).prop_map(|(a, b, c)| {
                SrpcBody::StatRequest(StatRequest { reply_match_bits: a, session: b, stat_type: c })
            }),
            (u(), arb_session(), arb_counters()).prop_map(|(a, b, (f, r, l))| {
                SrpcBody::StatReply(StatReply {
                    status: a,
                    session: b,
                    framework: f,
                    rpc: r,
                    lnet: l,
                })
            }),
            (u(), arb_session())
                .prop_map(|(a, b)| SrpcBody::TestReply(TestReply { status: a, session: b })),
            (q(), arb_session(), u()).prop_map(|(a, b, c)| {
                SrpcBody::DebugRequest(DebugRequest { reply_match_bits: a, session: b, flags: c })
            }),
            (u(), arb_session(), u(), u(), arb_name()).prop_map(|(a, b, c, d, e)| {
                SrpcBody::DebugReply(DebugReply {
                    status: a,
                    session: b,
                    timeout_seconds: c,
                    batch_count: d,
                    name: e,
                })
            }),
            (q(), q(), any::<[u32; 3]>()).prop_map(|(a, b, c)| {
                SrpcBody::BrwRequest(BrwRequest {
                    reply_match_bits: a,
                    bulk_match_bits: b,
                    direction: c[0],
                    length: c[1],
                    check_mode: c[2],
                })
            }),
            u().prop_map(|a| SrpcBody::BrwReply(BrwReply { status: a })),
            (q(), u(), u(), q(), q()).prop_map(|(a, b, c, d, e)| {
                SrpcBody::PingRequest(PingRequest {
                    reply_match_bits: a,
                    magic: b,
                    sequence: c,
                    time_seconds: d,
                    time_nanoseconds: e,
                })
            }),
            (u(), u(), u()).prop_map(|(a, b, c)| {
                SrpcBody::PingReply(PingReply { status: a, magic: b, sequence: c })
            }),
            (q(), arb_session(), arb_name()).prop_map(|(a, b, c)| {
                SrpcBody::JoinRequest(JoinRequest { reply_match_bits: a, session: b, group: c })
            }),
            (u(), arb_session(), u(), arb_name()).prop_map(|(a, b, c, d)| {
                SrpcBody::JoinReply(JoinReply {
                    status: a,
                    session: b,
                    timeout_seconds: c,
                    session_name: d,
                })
            }),
        ];
        prop_oneof![
            17 => (u(), simple).prop_map(|(feats, body)| SrpcMsg::new(feats, body)),
            3 => arb_test_request().prop_map(|(feats, body)| SrpcMsg::new(feats, body)),
        ]
    }

    proptest! {
        #[test]
        fn every_variant_round_trips_in_both_orders(msg in arb_msg()) {
            for order in [ByteOrder::LittleEndian, ByteOrder::BigEndian] {
                let buf = msg.emit_in(order);
                prop_assert_eq!(SrpcMsg::parse(&buf), Ok((msg.clone(), order)));
                let service = SrpcService::ALL
                    .into_iter()
                    .find(|s| s.request_type() == msg.msg_type());
                if let Some(service) = service {
                    prop_assert_eq!(check_request(&buf, service), Ok(order));
                }
            }
        }

        #[test]
        fn parse_never_panics_on_160_bytes(bytes in any::<[u8; 160]>()) {
            let _ = SrpcMsg::parse(&bytes);
            let _ = check_request(&bytes, SrpcService::Test);
        }

        #[test]
        fn parse_never_panics_past_the_header(
            mut bytes in any::<[u8; 160]>(),
            msg_type in 0u32..20,
            big in any::<bool>(),
        ) {
            let order = if big { ByteOrder::BigEndian } else { ByteOrder::LittleEndian };
            let header = SrpcMsg::new(0, SrpcBody::BrwReply(BrwReply { status: 0 })).emit_in(order);
            bytes[..8].copy_from_slice(&header[..8]);
            let type_bytes = if big { msg_type.to_be_bytes() } else { msg_type.to_le_bytes() };
            bytes[8..12].copy_from_slice(&type_bytes);
            match SrpcMsg::parse(&bytes) {
                Ok((msg, parsed_order)) => {
                    prop_assert_eq!(parsed_order, order);
                    prop_assert_eq!(msg.msg_type().to_u32(), msg_type);
                }
                Err(e) => {
                    let expected = matches!(
                        e,
                        SrpcParseError::UnknownType(_) | SrpcParseError::NameNotTerminated
                    );
                    prop_assert!(expected, "unexpected {:?}", e);
                }
            }
        }

        #[test]
        fn parse_never_panics_on_any_length(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let result = SrpcMsg::parse(&bytes);
            if bytes.len() != SRPC_MSG_LEN {
                prop_assert_eq!(result, Err(SrpcParseError::WrongLength(bytes.len())));
            }
        }

        #[test]
        fn dest_list_round_trips(
            ids in proptest::collection::vec((any::<u64>(), any::<u32>()), 0..200),
            page_size in 12usize..100,
        ) {
            let ids: Vec<ProcessIdPacked> =
                ids.into_iter().map(|(nid, pid)| ProcessIdPacked { nid, pid }).collect();
            match encode_dest_list(&ids, page_size) {
                Ok(bytes) => {
                    let count = u32::try_from(ids.len()).unwrap();
                    prop_assert_eq!(
                        decode_dest_list(&bytes, count, page_size, ByteOrder::LittleEndian),
                        Ok(ids)
                    );
                }
                Err(e) => {
                    let expected = matches!(e, DestListError::TooManyDestinations { .. });
                    prop_assert!(expected, "unexpected {:?}", e);
                }
            }
        }

        #[test]
        fn dest_list_decode_never_panics(
            bytes in proptest::collection::vec(any::<u8>(), 0..600),
            count in any::<u32>(),
            page_size in 0usize..5000,
        ) {
            let _ = decode_dest_list(&bytes, count, page_size, ByteOrder::BigEndian);
        }

        #[test]
        fn brw_fill_then_check_passes(
            words in 0usize..200,
            offset_words in 0usize..8,
            page_words in 1usize..64,
            mode in 1u32..=4,
            big in any::<bool>(),
        ) {
            let page_size = page_words * 8;
            let first_offset = (offset_words % page_words) * 8;
            let check = BrwCheck::from_u32(mode).unwrap();
            let order = if big { ByteOrder::BigEndian } else { ByteOrder::LittleEndian };
            let mut data = vec![0u8; words * 8];
            brw_fill(&mut data, first_offset, page_size, check, brw_magic(order)).unwrap();
            prop_assert_eq!(brw_check(&data, first_offset, page_size, check, brw_magic(order)), Ok(()));
        }

        #[test]
        fn brw_check_never_panics(
            data in proptest::collection::vec(any::<u8>(), 0..300),
            first_offset in 0usize..100,
            page_size in 0usize..100,
            mode in 1u32..=4,
        ) {
            let check = BrwCheck::from_u32(mode).unwrap();
            let _ = brw_check(&data, first_offset, page_size, check, BRW_MAGIC);
            let mut data = data;
            let _ = brw_fill(&mut data, first_offset, page_size, check, BRW_MAGIC);
        }
    }
}
