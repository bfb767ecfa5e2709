//! The socklnd hello: the message each side sends right after the acceptor connreq, naming the
//! protocol version, both identities, the incarnation and the connection type.
//!
//! lustre: lnet/klnds/socklnd/socklnd-idl.h (`struct ksock_hello_msg`, `_nid4`),
//! socklnd_proto.c (`ksocknal_send_hello_v1/v2/v4`, `ksocknal_recv_hello_v1/v2/v4`),
//! socklnd_cb.c (`ksocknal_parse_proto_version()`, `ksocknal_recv_hello()`,
//! `ksocknal_invert_type()`), include/uapi/linux/lnet/socklnd.h (connection types).

use std::fmt;
use std::net::Ipv4Addr;

use crate::addr::{LargeNidError, Nid};

use super::acceptor::{LNET_PROTO_MAGIC, LNET_PROTO_TCP_MAGIC};
pub use super::cursor::ByteOrder;
use super::cursor::{Reader, Writer};
use super::header::{HeaderForm, MsgType};

/// `LNET_PROTO_TCP_VERSION_MAJOR`: the only V1 major version.
pub const KSOCK_PROTO_V1_MAJOR: u16 = 1;
/// `LNET_PROTO_TCP_VERSION_MINOR`: the only V1 minor version.
pub const KSOCK_PROTO_V1_MINOR: u16 = 0;
/// Most IPv4 addresses a hello may list; receivers reject more.
/// lustre: include/uapi/linux/lnet/lnet-types.h `LNET_INTERFACES_NUM`.
pub const MAX_HELLO_IPS: usize = 16;

/// A socklnd connection type as carried in `kshm_ctype`, from the point of view of the side
/// that names it. Any u32 can appear on the wire; only 0..=3 and NONE mean something.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnType(pub u32);

impl ConnType {
    /// `SOCKLND_CONN_NONE` (-1): "refused, retry" in a reply hello.
    pub const NONE: Self = Self(u32::MAX);
    /// `SOCKLND_CONN_ANY`: untyped. V3/V4 kernels never send LNet messages on it.
    pub const ANY: Self = Self(0);
    /// `SOCKLND_CONN_CONTROL`: small messages.
    pub const CONTROL: Self = Self(1);
    /// `SOCKLND_CONN_BULK_IN`: I receive bulk here.
    pub const BULK_IN: Self = Self(2);
    /// `SOCKLND_CONN_BULK_OUT`: I send bulk here.
    pub const BULK_OUT: Self = Self(3);
    /// `SOCKLND_CONN_ACK`: my non-blocking ZC-ACKs and keepalives go out on my BULK_IN.
    pub const ACK: Self = Self::BULK_IN;

    /// The peer's view of the same connection: swaps BULK_IN and BULK_OUT, keeps ANY and
    /// CONTROL, and maps NONE and every unknown value to NONE.
    /// lustre: socklnd_cb.c `ksocknal_invert_type()`.
    pub fn invert(self) -> Self {
        match self {
            Self::ANY | Self::CONTROL => self,
            Self::BULK_IN => Self::BULK_OUT,
            Self::BULK_OUT => Self::BULK_IN,
            _ => Self::NONE,
        }
    }

    /// One of ANY, CONTROL, BULK_IN, BULK_OUT.
    pub fn is_known(self) -> bool {
        self.0 <= Self::BULK_OUT.0
    }
}

impl fmt::Debug for ConnType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::NONE => f.write_str("ConnType::NONE"),
            Self::ANY => f.write_str("ConnType::ANY"),
            Self::CONTROL => f.write_str("ConnType::CONTROL"),
            Self::BULK_IN => f.write_str("ConnType::BULK_IN"),
            Self::BULK_OUT => f.write_str("ConnType::BULK_OUT"),
            Self(other) => write!(f, "ConnType({other})"),
        }
    }
}

/// socklnd protocol versions (`KSOCK_PROTO_V*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProtoVersion {
    /// The LNet-header-shaped hello with `LNET_PROTO_TCP_MAGIC`; recognised, not recommended.
    V1,
    /// `ksock_hello_msg_nid4`; framing with optional checksums and single-cookie ZC-ACKs.
    V2,
    /// As V2 plus ZC-ACK ranges and keepalive NOOPs; the kernel default over IPv4.
    V3,
    /// `ksock_hello_msg` with large NIDs and the 96-byte LNet header; the default over IPv6.
    V4,
}

impl ProtoVersion {
    /// `pro_version`: 1 to 4.
    pub const fn number(self) -> u32 {
        match self {
            Self::V1 => 1,
            Self::V2 => 2,
            Self::V3 => 3,
            Self::V4 => 4,
        }
    }

    /// The version a `LNET_PROTO_MAGIC` hello announces in `kshm_version`.
    /// lustre: socklnd_cb.c `ksocknal_parse_proto_version()`.
    pub const fn from_lnet_magic_version(version: u32) -> Option<Self> {
        match version {
            2 => Some(Self::V2),
            3 => Some(Self::V3),
            4 => Some(Self::V4),
            _ => None,
        }
    }

    /// The version a kernel dials with when it knows nothing about the peer, and answers an
    /// unknown version with: V4 for an IPv6 socket, V3 for IPv4.
    pub const fn default_for(peer_is_ipv6: bool) -> Self {
        if peer_is_ipv6 { Self::V4 } else { Self::V3 }
    }

    /// The LNet header layout of LNET messages on this connection.
    pub const fn header_form(self) -> HeaderForm {
        match self {
            Self::V4 => HeaderForm::Nid16,
            _ => HeaderForm::Nid4,
        }
    }

    /// Whether messages start with the 24-byte ksock header (V1 sends bare LNet headers).
    pub const fn has_ksock_header(self) -> bool {
        !matches!(self, Self::V1)
    }

    /// Whether the hello may be followed by an IPv4 address list (V4 never reads one).
    pub const fn carries_ip_list(self) -> bool {
        !matches!(self, Self::V4)
    }

    /// Bytes of the hello without any IP list.
    pub const fn hello_fixed_len(self) -> usize {
        match self {
            Self::V1 => HeaderForm::Nid4.len(),
            Self::V2 | Self::V3 => 56,
            Self::V4 => 80,
        }
    }
}

/// What a node puts in the `src_*` fields of its hellos.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LocalIdentity {
    /// The NI's NID.
    pub nid: Nid,
    /// The LNet PID (kernel: 12345, `LNET_PID_LUSTRE`).
    pub pid: u32,
    /// The NI's epoch, constant for the life of the process.
    pub incarnation: u64,
}

/// A validated hello of any version.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Hello {
    pub version: ProtoVersion,
    pub src_nid: Nid,
    /// Not checked by receivers. A V1 hello has no destination: parsing fills the all-zero
    /// NID (the kernel's zeroed buffer), and emitting ignores it.
    pub dst_nid: Nid,
    pub src_pid: u32,
    /// Not checked by receivers; absent (0) in V1.
    pub dst_pid: u32,
    pub src_incarnation: u64,
    /// Not checked by receivers; absent (0) in V1.
    pub dst_incarnation: u64,
    pub conn_type: ConnType,
    /// Deprecated address list of V1-V3 (always empty from current kernels); never in V4.
    pub ips: Vec<Ipv4Addr>,
}

/// The result of looking at the first 8 bytes (magic and version) of a hello.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HelloPrefixParse {
    /// Read at least this many more bytes.
    NeedMore(usize),
    /// A known version; the rest of the hello follows in `byte_order`.
    Version { version: ProtoVersion, byte_order: ByteOrder },
    /// A valid magic with a version this side does not speak. See [`UnknownHelloVersion`].
    UnknownVersion(UnknownHelloVersion),
}

/// A hello whose magic is valid but whose version is unknown. The passive side answers with
/// [`Hello::unknown_version_answer`] and closes (EPROTO); the active side just closes.
/// lustre: socklnd_cb.c `ksocknal_recv_hello()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnknownHelloVersion {
    /// `LNET_PROTO_MAGIC` in the given order with an unknown `kshm_version` (already swapped).
    LnetMagic { byte_order: ByteOrder, version: u32 },
    /// `LNET_PROTO_TCP_MAGIC` with a major.minor other than 1.0.
    TcpMagic { major: u16, minor: u16 },
}

/// The result of parsing the bytes of a hello received so far.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HelloParse {
    /// Read at least this many more bytes.
    NeedMore(usize),
    /// A whole hello of `len` bytes; the ksock framing (or V1 headers) follows.
    Complete { hello: Hello, byte_order: ByteOrder, len: usize },
    /// See [`UnknownHelloVersion`].
    UnknownVersion(UnknownHelloVersion),
}

/// A hello the receiver rejects with EPROTO and closes, sending nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HelloError {
    /// Neither `LNET_PROTO_MAGIC` (either order) nor little-endian `LNET_PROTO_TCP_MAGIC`;
    /// the value is the 4 bytes read little-endian.
    #[error("bad hello magic {0:#010x}")]
    BadMagic(u32),
    /// A V1 hello whose LNet header type is not `LNET_MSG_HELLO`.
    #[error("expecting a HELLO header, got type {0}")]
    NotHelloType(u32),
    /// More than [`MAX_HELLO_IPS`] addresses announced.
    #[error("hello announces {0} IP addresses, at most {MAX_HELLO_IPS} allowed")]
    TooManyIps(u32),
    /// An address of the IP list is 0.0.0.0.
    #[error("hello IP address {index} is zero")]
    ZeroIp { index: usize },
    /// A V4 `struct lnet_nid` that is not a valid NID.
    #[error("hello carries an invalid large NID: {0}")]
    BadNid(LargeNidError),
    /// `kshm_src_nid` is `LNET_NID_ANY`.
    #[error("hello source NID is LNET_NID_ANY")]
    SrcNidAny,
}

/// Why a hello cannot be written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HelloEmitError {
    #[error("hello needs {needed} bytes, buffer has {got}")]
    BufferTooSmall { needed: usize, got: usize },
    /// V1-V3 carry 64-bit NIDs; converting an IPv6 NID would truncate it.
    #[error("source NID has no 64-bit form for a V1-V3 hello")]
    SrcNidNotNid4,
    #[error("destination NID has no 64-bit form for a V1-V3 hello")]
    DstNidNotNid4,
    #[error("{0} IP addresses, at most {MAX_HELLO_IPS} allowed")]
    TooManyIps(usize),
    /// V4 has no IP list.
    #[error("a V4 hello carries no IP list, {0} addresses given")]
    IpsNotCarriedByV4(usize),
}

impl Hello {
    /// Magic plus version: what the receiver reads before it knows the layout.
    pub const PREFIX_LEN: usize = 8;
    /// The longest hello: V1 with a full IP list.
    pub const MAX_LEN: usize = 72 + 4 * MAX_HELLO_IPS;

    /// The hello a connector sends: its identity, the NID it dials, destination pid and
    /// incarnation 0, its own view of the connection type.
    /// lustre: socklnd_cb.c `ksocknal_send_hello()` from `ksocknal_create_conn()`.
    pub fn active(
        version: ProtoVersion,
        local: &LocalIdentity,
        peer_nid: Nid,
        conn_type: ConnType,
    ) -> Self {
        Self {
            version,
            src_nid: local.nid,
            dst_nid: peer_nid,
            src_pid: local.pid,
            dst_pid: 0,
            src_incarnation: local.incarnation,
            dst_incarnation: 0,
            conn_type,
            ips: Vec::new(),
        }
    }

    /// The acceptor's answer to `received`: same version, its own identity, `peer_nid` (the
    /// identity it accepted) as destination, the received destination pid and incarnation
    /// echoed (the kernel reuses the received buffer), and `conn_type`: its own type from
    /// [`passive_conn_type`], or [`ConnType::NONE`] to refuse (race, duplicate, reboot).
    pub fn passive_reply(
        local: &LocalIdentity,
        received: &Hello,
        peer_nid: Nid,
        conn_type: ConnType,
    ) -> Self {
        Self {
            version: received.version,
            src_nid: local.nid,
            dst_nid: peer_nid,
            src_pid: local.pid,
            dst_pid: received.dst_pid,
            src_incarnation: local.incarnation,
            dst_incarnation: received.dst_incarnation,
            conn_type,
            ips: Vec::new(),
        }
    }

    /// The acceptor's answer to an unknown version: its default version for the socket's
    /// family, conn type NONE, and (a kernel quirk) its **own** NID as destination.
    /// lustre: socklnd_cb.c `ksocknal_recv_hello()`.
    pub fn unknown_version_answer(local: &LocalIdentity, peer_is_ipv6: bool) -> Self {
        Self {
            version: ProtoVersion::default_for(peer_is_ipv6),
            src_nid: local.nid,
            dst_nid: local.nid,
            src_pid: local.pid,
            dst_pid: 0,
            src_incarnation: local.incarnation,
            dst_incarnation: 0,
            conn_type: ConnType::NONE,
            ips: Vec::new(),
        }
    }

    /// Bytes [`Hello::emit`] writes: 72 + 4·nips (V1), 56 + 4·nips (V2, V3), 80 (V4).
    pub fn buffer_len(&self) -> usize {
        let ips = if self.version.carries_ip_list() { self.ips.len() } else { 0 };
        self.version.hello_fixed_len().saturating_add(ips.saturating_mul(4))
    }

    /// Writes the hello little-endian; returns the bytes written.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, HelloEmitError> {
        self.emit_ordered(buf, ByteOrder::LittleEndian)
    }

    /// Writes the hello in `byte_order` as a host of that order would (V1 is little-endian
    /// whatever the host; large NIDs are never swapped). ulnet sends little-endian; this
    /// exists to produce what a big-endian kernel sends.
    pub fn emit_ordered(
        &self,
        buf: &mut [u8],
        byte_order: ByteOrder,
    ) -> Result<usize, HelloEmitError> {
        if self.version.carries_ip_list() && self.ips.len() > MAX_HELLO_IPS {
            return Err(HelloEmitError::TooManyIps(self.ips.len()));
        }
        if !self.version.carries_ip_list() && !self.ips.is_empty() {
            return Err(HelloEmitError::IpsNotCarriedByV4(self.ips.len()));
        }
        let needed = self.buffer_len();
        let Some(buf) = buf.get_mut(..needed) else {
            return Err(HelloEmitError::BufferTooSmall { needed, got: buf.len() });
        };
        match self.version {
            ProtoVersion::V1 => self.emit_v1(buf)?,
            ProtoVersion::V2 | ProtoVersion::V3 => self.emit_nid4(buf, byte_order)?,
            ProtoVersion::V4 => self.emit_v4(buf, byte_order),
        }
        Ok(needed)
    }

    /// Parses the bytes received so far, mirroring the kernel's reads: magic, version, the
    /// fixed part, then the IP list, with the receiver's checks at the point the kernel makes
    /// them. The outcome for a prefix never changes as more bytes arrive, except from
    /// `NeedMore` to a decision.
    /// lustre: socklnd_cb.c `ksocknal_recv_hello()`, socklnd_proto.c `ksocknal_recv_hello_*`.
    pub fn parse(buf: &[u8]) -> Result<HelloParse, HelloError> {
        let (version, byte_order) = match Self::parse_prefix(buf)? {
            HelloPrefixParse::NeedMore(n) => return Ok(HelloParse::NeedMore(n)),
            HelloPrefixParse::UnknownVersion(u) => return Ok(HelloParse::UnknownVersion(u)),
            HelloPrefixParse::Version { version, byte_order } => (version, byte_order),
        };
        let parsed = match version {
            ProtoVersion::V1 => parse_v1(buf)?,
            ProtoVersion::V2 | ProtoVersion::V3 => parse_nid4(buf, version, byte_order)?,
            ProtoVersion::V4 => parse_v4(buf, byte_order)?,
        };
        let Some((hello, len)) = parsed else {
            return Ok(HelloParse::NeedMore(need_more_for(version, byte_order, buf)));
        };
        // lustre: ksocknal_recv_hello() checks ANY after the version's reader succeeded.
        if hello.src_nid.is_any() {
            return Err(HelloError::SrcNidAny);
        }
        Ok(HelloParse::Complete { hello, byte_order, len })
    }

    /// The first step of [`Hello::parse`]: magic (rejected as soon as 4 bytes are in) and
    /// version. lustre: socklnd_cb.c `ksocknal_parse_proto_version()`.
    pub fn parse_prefix(buf: &[u8]) -> Result<HelloPrefixParse, HelloError> {
        let mut reader = Reader::new(buf, ByteOrder::LittleEndian);
        let Some(magic) = reader.u32() else {
            return Ok(HelloPrefixParse::NeedMore(4usize.saturating_sub(buf.len())));
        };
        let byte_order = if magic == LNET_PROTO_MAGIC {
            Some(ByteOrder::LittleEndian)
        } else if magic == LNET_PROTO_MAGIC.swap_bytes() {
            Some(ByteOrder::BigEndian)
        } else if magic == LNET_PROTO_TCP_MAGIC {
            // V1 is explicitly little-endian; a swapped TCP magic is a bad magic.
            None
        } else {
            return Err(HelloError::BadMagic(magic));
        };
        let Some(word) = reader.array::<4>() else {
            return Ok(HelloPrefixParse::NeedMore(Self::PREFIX_LEN.saturating_sub(buf.len())));
        };
        Ok(match byte_order {
            Some(byte_order) => {
                let version = byte_order.u32_from(word);
                match ProtoVersion::from_lnet_magic_version(version) {
                    Some(version) => HelloPrefixParse::Version { version, byte_order },
                    None => HelloPrefixParse::UnknownVersion(UnknownHelloVersion::LnetMagic {
                        byte_order,
                        version,
                    }),
                }
            }
            None => {
                let major = u16::from_le_bytes([word[0], word[1]]);
                let minor = u16::from_le_bytes([word[2], word[3]]);
                if major == KSOCK_PROTO_V1_MAJOR && minor == KSOCK_PROTO_V1_MINOR {
                    HelloPrefixParse::Version {
                        version: ProtoVersion::V1,
                        byte_order: ByteOrder::LittleEndian,
                    }
                } else {
                    HelloPrefixParse::UnknownVersion(UnknownHelloVersion::TcpMagic { major, minor })
                }
            }
        })
    }

    /// V1: an LNet nid4 header of type HELLO, every field little-endian.
    /// lustre: socklnd_proto.c `ksocknal_send_hello_v1()`.
    fn emit_v1(&self, buf: &mut [u8]) -> Result<(), HelloEmitError> {
        let src = self.src_nid.to_nid4().ok_or(HelloEmitError::SrcNidNotNid4)?;
        let mut w = Writer::new(buf, ByteOrder::LittleEndian);
        w.u32(LNET_PROTO_TCP_MAGIC);
        w.u16(KSOCK_PROTO_V1_MAJOR);
        w.u16(KSOCK_PROTO_V1_MINOR);
        w.u64(src);
        w.u32(0); // dest_pid
        w.u32(self.src_pid);
        w.u32(MsgType::Hello as u32);
        // Bounded by MAX_HELLO_IPS, checked by the caller.
        w.u32((self.ips.len() * 4) as u32);
        w.u64(self.src_incarnation);
        w.u32(self.conn_type.0);
        w.zeros(HeaderForm::Nid4.len() - 44);
        for ip in &self.ips {
            w.u32(u32::from(*ip));
        }
        Ok(())
    }

    /// V2/V3: `struct ksock_hello_msg_nid4` in host order.
    fn emit_nid4(&self, buf: &mut [u8], byte_order: ByteOrder) -> Result<(), HelloEmitError> {
        let src = self.src_nid.to_nid4().ok_or(HelloEmitError::SrcNidNotNid4)?;
        let dst = self.dst_nid.to_nid4().ok_or(HelloEmitError::DstNidNotNid4)?;
        let mut w = Writer::new(buf, byte_order);
        w.u32(LNET_PROTO_MAGIC);
        w.u32(self.version.number());
        w.u64(src);
        w.u64(dst);
        w.u32(self.src_pid);
        w.u32(self.dst_pid);
        w.u64(self.src_incarnation);
        w.u64(self.dst_incarnation);
        w.u32(self.conn_type.0);
        // Bounded by MAX_HELLO_IPS, checked by the caller.
        w.u32(self.ips.len() as u32);
        for ip in &self.ips {
            w.u32(u32::from(*ip));
        }
        Ok(())
    }

    /// V4: `struct ksock_hello_msg`, NIDs in their fixed 20-byte layout, nips always 0.
    /// lustre: socklnd_proto.c `ksocknal_send_hello_v4()`.
    fn emit_v4(&self, buf: &mut [u8], byte_order: ByteOrder) {
        let mut w = Writer::new(buf, byte_order);
        w.u32(LNET_PROTO_MAGIC);
        w.u32(self.version.number());
        w.bytes(&self.src_nid.to_large_bytes());
        w.bytes(&self.dst_nid.to_large_bytes());
        w.u32(self.src_pid);
        w.u32(self.dst_pid);
        w.u64(self.src_incarnation);
        w.u64(self.dst_incarnation);
        w.u32(self.conn_type.0);
        w.u32(0);
    }
}

/// The acceptor side's own connection type for a received hello: the inverse of the peer's.
/// lustre: socklnd_cb.c `ksocknal_recv_hello()` (passive branch).
pub fn passive_conn_type(received: ConnType) -> Result<ConnType, PassiveHelloError> {
    if received == ConnType::NONE {
        return Err(PassiveHelloError::PeerSentNone);
    }
    match received.invert() {
        ConnType::NONE => Err(PassiveHelloError::UnknownConnType(received.0)),
        own => Ok(own),
    }
}

/// Why an acceptor refuses a hello's connection type (EPROTO, close without reply).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PassiveHelloError {
    #[error("peer sent connection type NONE in its first hello")]
    PeerSentNone,
    #[error("unexpected connection type {0}")]
    UnknownConnType(u32),
}

/// Checks the acceptor's reply on the connecting side, in the kernel's order.
/// `sent_version` is the version this side's hello used, `own_type` its connection type.
/// lustre: socklnd_cb.c `ksocknal_recv_hello()` (active branch).
pub fn check_active_reply(
    reply: &Hello,
    dialled_nid: &Nid,
    dialled_pid: u32,
    sent_version: ProtoVersion,
    own_type: ConnType,
) -> Result<(), ActiveReplyError> {
    if reply.src_pid != dialled_pid || reply.src_nid != *dialled_nid {
        return Err(ActiveReplyError::IdentityMismatch {
            claimed_nid: reply.src_nid,
            claimed_pid: reply.src_pid,
        });
    }
    if reply.conn_type == ConnType::NONE {
        return Err(if reply.version == sent_version {
            ActiveReplyError::Refused
        } else {
            ActiveReplyError::VersionMismatch { peer_version: reply.version }
        });
    }
    // A reply in another version with a proper type is accepted: the kernel adopts it.
    if reply.conn_type.invert() != own_type {
        return Err(ActiveReplyError::MismatchedTypes { own: own_type, peer: reply.conn_type });
    }
    Ok(())
}

/// Why the connecting side drops a connection after reading the reply hello.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ActiveReplyError {
    /// The peer is not who was dialled: "Connected successfully to X ... but they claimed they
    /// were Y" (EPROTO).
    #[error("peer claimed to be {claimed_nid}-{claimed_pid}, not the NID and pid dialled")]
    IdentityMismatch { claimed_nid: Nid, claimed_pid: u32 },
    /// Type NONE in the version sent: lost the connection race or a duplicate (EALREADY).
    #[error("peer refused the connection (race or duplicate)")]
    Refused,
    /// Type NONE in another version: redial with `peer_version` (EPROTO).
    #[error("peer speaks {peer_version:?}; reconnect with it")]
    VersionMismatch { peer_version: ProtoVersion },
    /// The peer's type does not invert to this side's ("Mismatched types", EPROTO).
    #[error("mismatched connection types: mine {own:?}, peer {peer:?}")]
    MismatchedTypes { own: ConnType, peer: ConnType },
}

/// V1: the 72-byte header, then `payload_length / 4` little-endian addresses.
/// lustre: socklnd_proto.c `ksocknal_recv_hello_v1()`.
fn parse_v1(buf: &[u8]) -> Result<Option<(Hello, usize)>, HelloError> {
    let mut r = Reader::at(buf, Hello::PREFIX_LEN, ByteOrder::LittleEndian);
    let Some(fixed) = read_v1_fixed(&mut r) else {
        return Ok(None);
    };
    if fixed.msg_type != MsgType::Hello as u32 {
        return Err(HelloError::NotHelloType(fixed.msg_type));
    }
    let nips = fixed.payload_length / 4;
    let Some(ips) = read_ips(buf, HeaderForm::Nid4.len(), nips, ByteOrder::LittleEndian)? else {
        return Ok(None);
    };
    let len = HeaderForm::Nid4.len() + ips.len() * 4;
    let hello = Hello {
        version: ProtoVersion::V1,
        src_nid: Nid::from_nid4(fixed.src_nid),
        dst_nid: Nid::from_nid4(0),
        src_pid: fixed.src_pid,
        dst_pid: 0,
        src_incarnation: fixed.incarnation,
        dst_incarnation: 0,
        conn_type: ConnType(fixed.conn_type),
        ips,
    };
    Ok(Some((hello, len)))
}

/// V2/V3: 48 fixed bytes after the prefix, every multi-byte field swapped when flipped
/// (NIDs as u64), then `nips` addresses.
/// lustre: socklnd_proto.c `ksocknal_recv_hello_v2()`.
fn parse_nid4(
    buf: &[u8],
    version: ProtoVersion,
    byte_order: ByteOrder,
) -> Result<Option<(Hello, usize)>, HelloError> {
    let mut r = Reader::at(buf, Hello::PREFIX_LEN, byte_order);
    let Some(fixed) = read_nid4_fixed(&mut r) else {
        return Ok(None);
    };
    let fixed_len = version.hello_fixed_len();
    let Some(ips) = read_ips(buf, fixed_len, fixed.nips, byte_order)? else {
        return Ok(None);
    };
    let len = fixed_len + ips.len() * 4;
    let hello = Hello {
        version,
        src_nid: Nid::from_nid4(fixed.src_nid),
        dst_nid: Nid::from_nid4(fixed.dst_nid),
        src_pid: fixed.src_pid,
        dst_pid: fixed.dst_pid,
        src_incarnation: fixed.src_incarnation,
        dst_incarnation: fixed.dst_incarnation,
        conn_type: ConnType(fixed.conn_type),
        ips,
    };
    Ok(Some((hello, len)))
}

/// V4: exactly 80 bytes; NIDs never swapped, nips ignored (and not swapped).
/// lustre: socklnd_proto.c `ksocknal_recv_hello_v4()`.
fn parse_v4(buf: &[u8], byte_order: ByteOrder) -> Result<Option<(Hello, usize)>, HelloError> {
    let mut r = Reader::at(buf, Hello::PREFIX_LEN, byte_order);
    let Some(fixed) = read_v4_fixed(&mut r) else {
        return Ok(None);
    };
    let hello = Hello {
        version: ProtoVersion::V4,
        // The source NID names the peer: exact, as the kernel's nid_same() when it checks who
        // answered (ksocknal_recv_hello()); a passive kernel would keep the junk as a NID of
        // its own, which matches no one and which we cannot represent. The destination NID the
        // kernel never reads: lenient.
        src_nid: Nid::from_large_bytes_exact(&fixed.src_nid).map_err(HelloError::BadNid)?,
        dst_nid: Nid::from_large_bytes(&fixed.dst_nid).map_err(HelloError::BadNid)?,
        src_pid: fixed.src_pid,
        dst_pid: fixed.dst_pid,
        src_incarnation: fixed.src_incarnation,
        dst_incarnation: fixed.dst_incarnation,
        conn_type: ConnType(fixed.conn_type),
        ips: Vec::new(),
    };
    Ok(Some((hello, ProtoVersion::V4.hello_fixed_len())))
}

struct V1Fixed {
    src_nid: u64,
    src_pid: u32,
    msg_type: u32,
    payload_length: u32,
    incarnation: u64,
    conn_type: u32,
}

fn read_v1_fixed(r: &mut Reader<'_>) -> Option<V1Fixed> {
    let src_nid = r.u64()?;
    let _dest_pid = r.u32()?;
    let src_pid = r.u32()?;
    let msg_type = r.u32()?;
    let payload_length = r.u32()?;
    let incarnation = r.u64()?;
    let conn_type = r.u32()?;
    r.skip(HeaderForm::Nid4.len() - 44)?;
    Some(V1Fixed { src_nid, src_pid, msg_type, payload_length, incarnation, conn_type })
}

struct Nid4Fixed {
    src_nid: u64,
    dst_nid: u64,
    src_pid: u32,
    dst_pid: u32,
    src_incarnation: u64,
    dst_incarnation: u64,
    conn_type: u32,
    nips: u32,
}

fn read_nid4_fixed(r: &mut Reader<'_>) -> Option<Nid4Fixed> {
    Some(Nid4Fixed {
        src_nid: r.u64()?,
        dst_nid: r.u64()?,
        src_pid: r.u32()?,
        dst_pid: r.u32()?,
        src_incarnation: r.u64()?,
        dst_incarnation: r.u64()?,
        conn_type: r.u32()?,
        nips: r.u32()?,
    })
}

struct V4Fixed {
    src_nid: [u8; 20],
    dst_nid: [u8; 20],
    src_pid: u32,
    dst_pid: u32,
    src_incarnation: u64,
    dst_incarnation: u64,
    conn_type: u32,
}

fn read_v4_fixed(r: &mut Reader<'_>) -> Option<V4Fixed> {
    let fixed = V4Fixed {
        src_nid: r.array()?,
        dst_nid: r.array()?,
        src_pid: r.u32()?,
        dst_pid: r.u32()?,
        src_incarnation: r.u64()?,
        dst_incarnation: r.u64()?,
        conn_type: r.u32()?,
    };
    r.skip(4)?; // kshm_nips: never read by V4
    Some(fixed)
}

/// Checks `nips` against the bound before reading (and allocating) anything, then reads the
/// list and rejects zero addresses. `None`: the list has not fully arrived.
fn read_ips(
    buf: &[u8],
    offset: usize,
    nips: u32,
    byte_order: ByteOrder,
) -> Result<Option<Vec<Ipv4Addr>>, HelloError> {
    let count = usize::try_from(nips).unwrap_or(usize::MAX);
    if count > MAX_HELLO_IPS {
        return Err(HelloError::TooManyIps(nips));
    }
    if buf.len() < offset + count * 4 {
        return Ok(None);
    }
    let mut r = Reader::at(buf, offset, byte_order);
    let mut ips = Vec::with_capacity(count);
    for index in 0..count {
        let Some(raw) = r.u32() else {
            return Ok(None);
        };
        if raw == 0 {
            return Err(HelloError::ZeroIp { index });
        }
        ips.push(Ipv4Addr::from(raw));
    }
    Ok(Some(ips))
}

/// How many more bytes the version's reader needs: up to the fixed part, then (its count
/// being known by then) up to the end of the IP list.
fn need_more_for(version: ProtoVersion, byte_order: ByteOrder, buf: &[u8]) -> usize {
    let fixed = version.hello_fixed_len();
    let total = if buf.len() < fixed {
        fixed
    } else {
        let mut r = Reader::at(buf, 0, byte_order);
        let nips = match version {
            ProtoVersion::V1 => r.skip(28).and_then(|()| r.u32()).map(|len| len / 4),
            ProtoVersion::V2 | ProtoVersion::V3 => r.skip(52).and_then(|()| r.u32()),
            ProtoVersion::V4 => Some(0),
        };
        // nips was bounded by read_ips() before NeedMore could be returned.
        fixed + nips.map_or(0, |n| n as usize * 4)
    };
    total.saturating_sub(buf.len()).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::{LndType, Net};
    use proptest::prelude::*;
    use std::net::Ipv6Addr;

    const CLIENT_INCARNATION: u64 = 0x1870_F7D9_3B1D_2A00;
    const SERVER_INCARNATION: u64 = 0x1870_F7D0_0000_0000;

    fn client() -> LocalIdentity {
        LocalIdentity {
            nid: Nid::ipv4(Net::TCP, Ipv4Addr::new(192, 168, 1, 2)),
            pid: 12345,
            incarnation: CLIENT_INCARNATION,
        }
    }

    fn server() -> LocalIdentity {
        LocalIdentity {
            nid: Nid::ipv4(Net::TCP, Ipv4Addr::new(192, 168, 1, 1)),
            pid: 12345,
            incarnation: SERVER_INCARNATION,
        }
    }

    fn emit(hello: &Hello) -> Vec<u8> {
        let mut buf = vec![0u8; hello.buffer_len()];
        assert_eq!(hello.emit(&mut buf), Ok(hello.buffer_len()));
        buf
    }

    fn complete(bytes: &[u8]) -> (Hello, ByteOrder, usize) {
        match Hello::parse(bytes) {
            Ok(HelloParse::Complete { hello, byte_order, len }) => (hello, byte_order, len),
            other => panic!("expected a complete hello, got {other:?}"),
        }
    }

    const VECTOR_10_4: [u8; 56] = [
        0x63, 0x69, 0x72, 0x45, 0x03, 0x00, 0x00, 0x00, 0x02, 0x01, 0xa8, 0xc0, 0x00, 0x00, 0x02,
        0x00, 0x01, 0x01, 0xa8, 0xc0, 0x00, 0x00, 0x02, 0x00, 0x39, 0x30, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x2a, 0x1d, 0x3b, 0xd9, 0xf7, 0x70, 0x18, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ];

    const VECTOR_10_5: [u8; 56] = [
        0x63, 0x69, 0x72, 0x45, 0x03, 0x00, 0x00, 0x00, 0x01, 0x01, 0xa8, 0xc0, 0x00, 0x00, 0x02,
        0x00, 0x02, 0x01, 0xa8, 0xc0, 0x00, 0x00, 0x02, 0x00, 0x39, 0x30, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xd0, 0xf7, 0x70, 0x18, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ];

    #[test]
    fn vector_10_4_active_v3_hello() {
        let hello = Hello::active(ProtoVersion::V3, &client(), server().nid, ConnType::CONTROL);
        assert_eq!(emit(&hello), VECTOR_10_4);
        assert_eq!(complete(&VECTOR_10_4), (hello, ByteOrder::LittleEndian, 56));
    }

    #[test]
    fn vector_10_5_passive_v3_reply() {
        let (received, _, _) = complete(&VECTOR_10_4);
        let own_type = passive_conn_type(received.conn_type).unwrap();
        assert_eq!(own_type, ConnType::CONTROL);
        let reply = Hello::passive_reply(&server(), &received, received.src_nid, own_type);
        assert_eq!(emit(&reply), VECTOR_10_5);
        let (parsed, _, _) = complete(&VECTOR_10_5);
        assert_eq!(parsed, reply);
        assert_eq!(
            check_active_reply(&parsed, &server().nid, 12345, ProtoVersion::V3, ConnType::CONTROL),
            Ok(())
        );
    }

    #[test]
    fn v4_hello_is_exactly_80_bytes() {
        let ip: Ipv6Addr = "2001:db8::2".parse().unwrap();
        let local = LocalIdentity { nid: Nid::ipv6(Net::TCP, ip), ..client() };
        let hello = Hello::active(ProtoVersion::V4, &local, server().nid, ConnType::BULK_IN);
        let bytes = emit(&hello);
        assert_eq!(bytes.len(), 80);
        assert_eq!(bytes[..8], [0x63, 0x69, 0x72, 0x45, 4, 0, 0, 0]);
        assert_eq!(bytes[8..28], local.nid.to_large_bytes());
        assert_eq!(bytes[28..48], server().nid.to_large_bytes());
        assert_eq!(bytes[72..], [2, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(complete(&bytes), (hello, ByteOrder::LittleEndian, 80));
    }

    #[test]
    fn v4_source_nid_with_junk_past_its_address_is_refused() {
        let hello = Hello::active(ProtoVersion::V4, &client(), server().nid, ConnType::CONTROL);
        let mut bytes = emit(&hello);
        // kshm_src_nid is bytes 8..28: a 4-byte address at 12..16, then 12 unused bytes.
        bytes[27] = 0x5a;
        assert_eq!(
            Hello::parse(&bytes),
            Err(HelloError::BadNid(LargeNidError::JunkPastAddress(4)))
        );
        // The destination NID, which the kernel never reads, stays lenient.
        bytes[27] = 0;
        bytes[47] = 0x5a;
        assert_eq!(complete(&bytes), (hello, ByteOrder::LittleEndian, 80));
    }

    #[test]
    fn v4_ignores_nips_and_never_reads_an_ip_list() {
        let hello = Hello::active(ProtoVersion::V4, &client(), server().nid, ConnType::CONTROL);
        let mut bytes = emit(&hello);
        bytes[76..80].copy_from_slice(&1000u32.to_le_bytes());
        assert_eq!(complete(&bytes), (hello, ByteOrder::LittleEndian, 80));
    }

    #[test]
    fn v1_hello_round_trips() {
        let mut hello =
            Hello::active(ProtoVersion::V1, &client(), Nid::from_nid4(0), ConnType::ANY);
        hello.ips = vec![Ipv4Addr::new(10, 0, 0, 1)];
        let bytes = emit(&hello);
        assert_eq!(bytes.len(), 76);
        assert_eq!(bytes[..8], [0xed, 0x0d, 0xbc, 0xee, 1, 0, 0, 0]);
        assert_eq!(bytes[24..32], [4, 0, 0, 0, 4, 0, 0, 0]);
        assert_eq!(complete(&bytes), (hello, ByteOrder::LittleEndian, 76));
    }

    #[test]
    fn byte_swapped_v3_swaps_every_field() {
        let mut hello =
            Hello::active(ProtoVersion::V3, &client(), server().nid, ConnType::BULK_OUT);
        hello.dst_pid = 7;
        hello.dst_incarnation = 9;
        hello.ips = vec![Ipv4Addr::new(192, 168, 1, 2), Ipv4Addr::new(10, 0, 0, 1)];
        let mut bytes = vec![0u8; hello.buffer_len()];
        hello.emit_ordered(&mut bytes, ByteOrder::BigEndian).unwrap();
        assert_eq!(bytes[..8], [0x45, 0x72, 0x69, 0x63, 0, 0, 0, 3]);
        assert_eq!(bytes[8..16], 0x0002_0000_C0A8_0102u64.to_be_bytes());
        assert_eq!(complete(&bytes), (hello, ByteOrder::BigEndian, 64));
    }

    #[test]
    fn byte_swapped_v4_keeps_nids() {
        let hello = Hello::active(ProtoVersion::V4, &client(), server().nid, ConnType::CONTROL);
        let mut bytes = vec![0u8; 80];
        hello.emit_ordered(&mut bytes, ByteOrder::BigEndian).unwrap();
        assert_eq!(bytes[8..28], client().nid.to_large_bytes());
        assert_eq!(bytes[48..52], 12345u32.to_be_bytes());
        assert_eq!(complete(&bytes), (hello, ByteOrder::BigEndian, 80));
    }

    #[test]
    fn prefix_outcomes() {
        assert_eq!(Hello::parse_prefix(&[]), Ok(HelloPrefixParse::NeedMore(4)));
        assert_eq!(Hello::parse_prefix(&VECTOR_10_4[..5]), Ok(HelloPrefixParse::NeedMore(3)));
        assert_eq!(
            Hello::parse_prefix(&VECTOR_10_4),
            Ok(HelloPrefixParse::Version {
                version: ProtoVersion::V3,
                byte_order: ByteOrder::LittleEndian
            })
        );
    }

    #[test]
    fn unknown_lnet_version_asks_for_the_default_answer() {
        let mut bytes = VECTOR_10_4;
        bytes[4] = 5;
        assert_eq!(
            Hello::parse(&bytes[..8]),
            Ok(HelloParse::UnknownVersion(UnknownHelloVersion::LnetMagic {
                byte_order: ByteOrder::LittleEndian,
                version: 5
            }))
        );
        let mut swapped = [0u8; 8];
        swapped[..4].copy_from_slice(&LNET_PROTO_MAGIC.to_be_bytes());
        swapped[4..].copy_from_slice(&1u32.to_be_bytes());
        assert_eq!(
            Hello::parse(&swapped),
            Ok(HelloParse::UnknownVersion(UnknownHelloVersion::LnetMagic {
                byte_order: ByteOrder::BigEndian,
                version: 1
            }))
        );
    }

    #[test]
    fn unknown_tcp_version_asks_for_the_default_answer() {
        let bytes = [0xed, 0x0d, 0xbc, 0xee, 2, 0, 0, 0];
        assert_eq!(
            Hello::parse(&bytes),
            Ok(HelloParse::UnknownVersion(UnknownHelloVersion::TcpMagic { major: 2, minor: 0 }))
        );
    }

    #[test]
    fn unknown_version_answer_is_v3_none_to_self() {
        let answer = Hello::unknown_version_answer(&server(), false);
        assert_eq!(answer.version, ProtoVersion::V3);
        assert_eq!(answer.conn_type, ConnType::NONE);
        assert_eq!(answer.dst_nid, server().nid);
        let bytes = emit(&answer);
        assert_eq!(bytes[48..56], [0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
        assert_eq!(Hello::unknown_version_answer(&server(), true).version, ProtoVersion::V4);
    }

    #[test]
    fn bad_magic_is_rejected_after_four_bytes() {
        assert_eq!(Hello::parse(&[1, 2, 3, 4]), Err(HelloError::BadMagic(0x0403_0201)));
        // V1 magic byte-swapped is not accepted.
        assert_eq!(
            Hello::parse(&LNET_PROTO_TCP_MAGIC.to_be_bytes()),
            Err(HelloError::BadMagic(LNET_PROTO_TCP_MAGIC.swap_bytes()))
        );
    }

    #[test]
    fn v1_with_wrong_type_is_rejected() {
        let hello = Hello::active(ProtoVersion::V1, &client(), Nid::from_nid4(0), ConnType::ANY);
        let mut bytes = emit(&hello);
        bytes[24] = 1;
        assert_eq!(Hello::parse(&bytes), Err(HelloError::NotHelloType(1)));
    }

    #[test]
    fn too_many_ips_is_rejected_before_reading_them() {
        let mut bytes = VECTOR_10_4;
        bytes[52] = 17;
        assert_eq!(Hello::parse(&bytes), Err(HelloError::TooManyIps(17)));
        bytes[52..56].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(Hello::parse(&bytes), Err(HelloError::TooManyIps(u32::MAX)));
        // V1: nips = payload_length / 4.
        let hello = Hello::active(ProtoVersion::V1, &client(), Nid::from_nid4(0), ConnType::ANY);
        let mut v1 = emit(&hello);
        v1[28..32].copy_from_slice(&(17u32 * 4).to_le_bytes());
        assert_eq!(Hello::parse(&v1), Err(HelloError::TooManyIps(17)));
    }

    #[test]
    fn zero_ip_is_rejected() {
        let mut bytes = VECTOR_10_4.to_vec();
        bytes[52] = 2;
        bytes.extend_from_slice(&[1, 0, 0, 10, 0, 0, 0, 0]);
        assert_eq!(Hello::parse(&bytes), Err(HelloError::ZeroIp { index: 1 }));
    }

    #[test]
    fn any_src_nid_is_rejected() {
        let mut bytes = VECTOR_10_4;
        bytes[8..16].fill(0xff);
        assert_eq!(Hello::parse(&bytes), Err(HelloError::SrcNidAny));
        let any = LocalIdentity { nid: Nid::ANY, ..client() };
        let v4 = emit(&Hello::active(ProtoVersion::V4, &any, server().nid, ConnType::CONTROL));
        assert_eq!(Hello::parse(&v4), Err(HelloError::SrcNidAny));
    }

    #[test]
    fn bad_large_nid_is_rejected() {
        let hello = Hello::active(ProtoVersion::V4, &client(), server().nid, ConnType::CONTROL);
        let mut bytes = emit(&hello);
        bytes[28] = 13;
        assert_eq!(Hello::parse(&bytes), Err(HelloError::BadNid(LargeNidError::SizeTooLarge(17))));
    }

    #[test]
    fn need_more_reaches_the_ip_list() {
        let mut hello = Hello::active(ProtoVersion::V3, &client(), server().nid, ConnType::CONTROL);
        hello.ips = vec![Ipv4Addr::new(1, 2, 3, 4); 3];
        let bytes = emit(&hello);
        assert_eq!(Hello::parse(&bytes[..8]), Ok(HelloParse::NeedMore(48)));
        assert_eq!(Hello::parse(&bytes[..56]), Ok(HelloParse::NeedMore(12)));
        assert_eq!(Hello::parse(&bytes[..67]), Ok(HelloParse::NeedMore(1)));
    }

    #[test]
    fn emit_errors() {
        let ip: Ipv6Addr = "2001:db8::2".parse().unwrap();
        let v6 = Nid::ipv6(Net::TCP, ip);
        let local6 = LocalIdentity { nid: v6, ..client() };
        let mut buf = [0u8; Hello::MAX_LEN];
        let hello = Hello::active(ProtoVersion::V3, &local6, server().nid, ConnType::CONTROL);
        assert_eq!(hello.emit(&mut buf), Err(HelloEmitError::SrcNidNotNid4));
        let hello = Hello::active(ProtoVersion::V3, &client(), v6, ConnType::CONTROL);
        assert_eq!(hello.emit(&mut buf), Err(HelloEmitError::DstNidNotNid4));
        let hello = Hello::active(ProtoVersion::V1, &local6, server().nid, ConnType::CONTROL);
        assert_eq!(hello.emit(&mut buf), Err(HelloEmitError::SrcNidNotNid4));
        let mut hello = Hello::active(ProtoVersion::V3, &client(), v6, ConnType::CONTROL);
        hello.ips = vec![Ipv4Addr::new(1, 1, 1, 1); 17];
        assert_eq!(hello.emit(&mut buf), Err(HelloEmitError::TooManyIps(17)));
        hello.version = ProtoVersion::V4;
        assert_eq!(hello.emit(&mut buf), Err(HelloEmitError::IpsNotCarriedByV4(17)));
        let hello = Hello::active(ProtoVersion::V3, &client(), server().nid, ConnType::CONTROL);
        assert_eq!(
            hello.emit(&mut buf[..55]),
            Err(HelloEmitError::BufferTooSmall { needed: 56, got: 55 })
        );
    }

    #[test]
    fn conn_type_inversion() {
        assert_eq!(ConnType::ANY.invert(), ConnType::ANY);
        assert_eq!(ConnType::CONTROL.invert(), ConnType::CONTROL);
        assert_eq!(ConnType::BULK_IN.invert(), ConnType::BULK_OUT);
        assert_eq!(ConnType::BULK_OUT.invert(), ConnType::BULK_IN);
        assert_eq!(ConnType::NONE.invert(), ConnType::NONE);
        assert_eq!(ConnType(4).invert(), ConnType::NONE);
    }

    #[test]
    fn passive_type_checks() {
        assert_eq!(passive_conn_type(ConnType::BULK_IN), Ok(ConnType::BULK_OUT));
        assert_eq!(passive_conn_type(ConnType::ANY), Ok(ConnType::ANY));
        assert_eq!(passive_conn_type(ConnType::NONE), Err(PassiveHelloError::PeerSentNone));
        assert_eq!(passive_conn_type(ConnType(7)), Err(PassiveHelloError::UnknownConnType(7)));
    }

    #[test]
    fn active_reply_checks() {
        let dialled = server().nid;
        let ok = Hello::active(ProtoVersion::V3, &server(), client().nid, ConnType::BULK_OUT);
        let check = |reply: &Hello| {
            check_active_reply(reply, &dialled, 12345, ProtoVersion::V3, ConnType::BULK_IN)
        };
        assert_eq!(check(&ok), Ok(()));

        let mut impostor = ok.clone();
        impostor.src_pid = 1;
        assert_eq!(
            check(&impostor),
            Err(ActiveReplyError::IdentityMismatch { claimed_nid: dialled, claimed_pid: 1 })
        );
        let mut impostor = ok.clone();
        impostor.src_nid = client().nid;
        assert!(matches!(check(&impostor), Err(ActiveReplyError::IdentityMismatch { .. })));

        let mut refused = ok.clone();
        refused.conn_type = ConnType::NONE;
        assert_eq!(check(&refused), Err(ActiveReplyError::Refused));
        refused.version = ProtoVersion::V2;
        assert_eq!(
            check(&refused),
            Err(ActiveReplyError::VersionMismatch { peer_version: ProtoVersion::V2 })
        );

        let mut wrong = ok.clone();
        wrong.conn_type = ConnType::BULK_IN;
        assert_eq!(
            check(&wrong),
            Err(ActiveReplyError::MismatchedTypes {
                own: ConnType::BULK_IN,
                peer: ConnType::BULK_IN
            })
        );

        // Another version with a proper type is accepted, as the kernel does.
        let mut other_version = ok;
        other_version.version = ProtoVersion::V2;
        assert_eq!(check(&other_version), Ok(()));
    }

    fn nid4_strategy() -> impl Strategy<Value = Nid> {
        (0..0xffu8, any::<u16>(), any::<u32>())
            .prop_map(|(lnd, number, addr)| Nid::new4(Net::new(LndType(lnd), number), addr))
    }

    fn large_nid_strategy() -> impl Strategy<Value = Nid> {
        prop_oneof![
            nid4_strategy(),
            (0..0xffu8, any::<u16>(), any::<[u8; 16]>()).prop_map(|(lnd, number, addr)| {
                Nid::ipv6(Net::new(LndType(lnd), number), Ipv6Addr::from(addr))
            }),
        ]
    }

    fn byte_order_strategy() -> impl Strategy<Value = ByteOrder> {
        prop_oneof![Just(ByteOrder::LittleEndian), Just(ByteOrder::BigEndian)]
    }

    #[allow(clippy::too_many_arguments)]
    fn build(
        version: ProtoVersion,
        src_nid: Nid,
        dst_nid: Nid,
        pids: (u32, u32),
        incarnations: (u64, u64),
        conn_type: u32,
        ips: Vec<u32>,
    ) -> Hello {
        Hello {
            version,
            src_nid,
            dst_nid,
            src_pid: pids.0,
            dst_pid: pids.1,
            src_incarnation: incarnations.0,
            dst_incarnation: incarnations.1,
            conn_type: ConnType(conn_type),
            ips: ips.into_iter().map(Ipv4Addr::from).collect(),
        }
    }

    fn check_round_trip(hello: &Hello, byte_order: ByteOrder) -> Result<(), TestCaseError> {
        let mut bytes = vec![0u8; hello.buffer_len()];
        prop_assert_eq!(hello.emit_ordered(&mut bytes, byte_order), Ok(bytes.len()));
        let expected_order =
            if hello.version == ProtoVersion::V1 { ByteOrder::LittleEndian } else { byte_order };
        prop_assert_eq!(
            Hello::parse(&bytes),
            Ok(HelloParse::Complete {
                hello: hello.clone(),
                byte_order: expected_order,
                len: bytes.len()
            })
        );
        for cut in 0..bytes.len() {
            match Hello::parse(&bytes[..cut]) {
                Ok(HelloParse::NeedMore(n)) => prop_assert!(n >= 1 && cut + n <= bytes.len()),
                other => prop_assert!(false, "prefix of {} gave {:?}", cut, other),
            }
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn nid4_versions_round_trip(
            v3 in any::<bool>(),
            src in nid4_strategy(),
            dst in prop_oneof![nid4_strategy(), Just(Nid::ANY)],
            pids in any::<(u32, u32)>(),
            incarnations in any::<(u64, u64)>(),
            conn_type in any::<u32>(),
            ips in proptest::collection::vec(1..=u32::MAX, 0..=MAX_HELLO_IPS),
            byte_order in byte_order_strategy(),
        ) {
            let version = if v3 { ProtoVersion::V3 } else { ProtoVersion::V2 };
            let hello = build(version, src, dst, pids, incarnations, conn_type, ips);
            check_round_trip(&hello, byte_order)?;
        }

        #[test]
        fn v4_round_trips(
            src in large_nid_strategy(),
            dst in prop_oneof![large_nid_strategy(), Just(Nid::ANY)],
            pids in any::<(u32, u32)>(),
            incarnations in any::<(u64, u64)>(),
            conn_type in any::<u32>(),
            byte_order in byte_order_strategy(),
        ) {
            let hello = build(ProtoVersion::V4, src, dst, pids, incarnations, conn_type, vec![]);
            check_round_trip(&hello, byte_order)?;
        }

        #[test]
        fn v1_round_trips(
            src in nid4_strategy(),
            src_pid in any::<u32>(),
            incarnation in any::<u64>(),
            conn_type in any::<u32>(),
            ips in proptest::collection::vec(1..=u32::MAX, 0..=MAX_HELLO_IPS),
        ) {
            let hello = build(
                ProtoVersion::V1, src, Nid::from_nid4(0), (src_pid, 0), (incarnation, 0),
                conn_type, ips,
            );
            check_round_trip(&hello, ByteOrder::LittleEndian)?;
        }

        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..160)) {
            let _ = Hello::parse(&bytes);
        }

        #[test]
        fn parse_never_panics_on_valid_prefixes(
            prefix in prop_oneof![
                Just([0x63u8, 0x69, 0x72, 0x45, 2, 0, 0, 0]),
                Just([0x63u8, 0x69, 0x72, 0x45, 3, 0, 0, 0]),
                Just([0x63u8, 0x69, 0x72, 0x45, 4, 0, 0, 0]),
                Just([0x45u8, 0x72, 0x69, 0x63, 0, 0, 0, 3]),
                Just([0xedu8, 0x0d, 0xbc, 0xee, 1, 0, 0, 0]),
            ],
            rest in proptest::collection::vec(any::<u8>(), 0..160),
        ) {
            let mut bytes = prefix.to_vec();
            bytes.extend_from_slice(&rest);
            if let Ok(HelloParse::Complete { len, .. }) = Hello::parse(&bytes) {
                prop_assert!(len <= bytes.len());
            }
        }
    }
}
