//! The handshake of one socklnd TCP connection, as two byte-fed state machines: the connector
//! ([`ActiveHandshake`]: connreq and hello out, the peer's hello in) and the acceptor
//! ([`PassiveHandshake`]: connreq and hello in, the reply out).
//!
//! Neither machine touches a socket or a clock. The driver writes what they hand out, feeds what
//! it reads (they never consume a byte past the hello, so the rest of a read belongs to the
//! connection's framing), and calls `handle_timeout` at `poll_timeout`. Decisions that need the
//! node's state (the connection race, duplicate limits, a rebooted peer) are made by [`admit`]
//! from a [`PeerView`] the caller fills in, so the handshake stays pure.
//!
//! Call protocol, active side:
//! 1. [`ActiveHandshake::new`]; write [`ActiveHandshake::initial_bytes`] (connreq then hello:
//!    the connector never waits between them).
//! 2. Read at most [`ActiveHandshake::read_hint`] bytes, pass them to
//!    [`ActiveHandshake::handle_input`]; repeat until it returns [`ActiveStep::Finished`] or an
//!    error. Call [`ActiveHandshake::handle_timeout`] when [`ActiveHandshake::poll_timeout`]
//!    passes and [`ActiveHandshake::handle_eof`] on end of stream.
//! 3. On [`ActiveOutcome::Established`], run [`admit`] (the peer's incarnation and duplicates),
//!    then hand the socket to a `Conn`; otherwise close.
//!
//! Passive side: [`PassiveHandshake::new`] when the socket is accepted (it refuses an insecure
//! port before reading anything), feed bytes the same way; on [`PassiveStep::Decide`] call
//! [`admit`] and pass the result to [`PassiveHandshake::decide`]. Every [`PassiveStep::Rejected`]
//! carries bytes to write before closing (possibly none); [`PassiveStep::Established`] carries the
//! reply hello, written before any framed message.
//!
//! lustre: lnet/lnet/acceptor.c (`lnet_connect()`, `lnet_acceptor()`, `lnet_accept()`),
//! lnet/klnds/socklnd/socklnd.c `ksocknal_create_conn()`, socklnd_cb.c (`ksocknal_send_hello()`,
//! `ksocknal_recv_hello()`).

use std::cmp::Ordering;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use crate::addr::{LNET_PID_USERFLAG, Nid, ProcessId};
use crate::time::Time;
use crate::wire::acceptor::{
    AcceptorError, ConnReq, ConnReqEmitError, ConnReqParse, ConnReqVersion, DOWNGRADE_ANSWER,
    DowngradeReason,
};
use crate::wire::header::HeaderForm;
use crate::wire::hello::{
    ActiveReplyError, ByteOrder, ConnType, Hello, HelloEmitError, HelloError, HelloParse,
    LocalIdentity, PassiveHelloError, ProtoVersion, UnknownHelloVersion, check_active_reply,
    passive_conn_type,
};

use super::tunables::{AcceptPolicy, MAX_RESERVED_PORT};

/// Which end of the TCP connection this node is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Side {
    /// The connector (`ksocknal_connect()`).
    Active,
    /// The acceptor (`ksocknal_accept()`).
    Passive,
}

/// What a completed hello exchange says about the peer, from this side's point of view.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PeerHello {
    /// Who the peer is: the hello's source, or for a userspace peer the identity derived from
    /// its socket address.
    pub peer: ProcessId,
    /// The protocol of the connection (the received hello's).
    pub version: ProtoVersion,
    /// The peer's `src_incarnation`.
    pub incarnation: u64,
    /// This side's type for the connection (NONE in a refusal).
    pub conn_type: ConnType,
    /// The order of the peer's ksock headers.
    pub byte_order: ByteOrder,
    /// The peer connected from an unprivileged port: the source NID and pid of every LNet header
    /// on this connection are replaced by [`PeerHello::peer`].
    pub userspace: bool,
}

/// A connection ready for framed messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Established {
    pub side: Side,
    /// The local NI the connection belongs to.
    pub local: LocalIdentity,
    pub hello: PeerHello,
}

impl Established {
    /// The LNet header layout of the connection's messages.
    pub fn header_form(&self) -> HeaderForm {
        self.hello.version.header_form()
    }

    pub fn peer(&self) -> ProcessId {
        self.hello.peer
    }
}

/// What the node knows about the peer when a hello exchange completes; filled in by the caller
/// (normally from `PeerConns`) and judged by [`admit`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PeerView {
    /// This node is itself dialling the peer at the address the connection came from
    /// (`ksocknal_connecting()`).
    pub dialling_peer: bool,
    /// The peer is being torn down.
    pub closing: bool,
    /// Protocol and incarnation recorded from the peer's first connection, while it has any.
    pub recorded: Option<RecordedHello>,
    /// Live connections to the peer of the candidate's type between the same two IPs.
    pub same_type_conns: u32,
    /// The per-type limit: the `conns_per_peer` recorded when this node first dialled the
    /// peer, or the NI's own.
    pub max_conns_per_type: u32,
    /// Both ends have the same IP: duplicates are allowed.
    pub loopback: bool,
}

/// `ksnp_proto` and `ksnp_incarnation`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RecordedHello {
    pub version: ProtoVersion,
    pub incarnation: u64,
}

/// The node's verdict on a completed hello exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Admission {
    Accept,
    Refuse(RefuseReason),
}

/// Why a well-formed connection is not kept. lustre: socklnd.c `ksocknal_create_conn()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RefuseReason {
    /// Both sides are dialling each other and the peer's NID is lower: this node's own
    /// connection wins ("connection race resolution"; EALREADY).
    LostRace,
    /// The peer is being torn down (-ESTALE: closed without a reply).
    PeerClosing,
    /// The peer's incarnation changed: it rebooted. Every connection to it is closed too.
    PeerRebooted,
    /// Same incarnation, different protocol. Every connection to it is closed too.
    WrongProtoVersion,
    /// The per-type limit is reached (EALREADY).
    Duplicate,
}

impl RefuseReason {
    /// Whether an acceptor answers with a CONN_NONE hello (a positive error code in the
    /// kernel) rather than closing silently.
    pub fn replies_with_none(self) -> bool {
        !matches!(self, Self::PeerClosing)
    }

    /// Whether the node must also close every existing connection to the peer.
    pub fn tears_down_peer(self) -> bool {
        matches!(self, Self::PeerRebooted | Self::WrongProtoVersion)
    }
}

/// Judges a completed hello exchange in the kernel's order: race (passive only), closing peer,
/// reboot or protocol change, then duplicates. A first connection records its protocol and
/// incarnation; the caller does that on `Accept` and on [`RefuseReason::Duplicate`].
/// lustre: socklnd.c `ksocknal_create_conn()`.
pub fn admit(side: Side, local_nid: &Nid, hello: &PeerHello, view: &PeerView) -> Admission {
    // The kernel compares the 20-byte wire forms with memcmp: the higher NID wins.
    if side == Side::Passive
        && view.dialling_peer
        && hello.peer.nid.cmp_wire(local_nid) == Ordering::Less
    {
        return Admission::Refuse(RefuseReason::LostRace);
    }
    if view.closing {
        return Admission::Refuse(RefuseReason::PeerClosing);
    }
    if let Some(recorded) = view.recorded {
        if recorded.incarnation != hello.incarnation {
            return Admission::Refuse(RefuseReason::PeerRebooted);
        }
        if recorded.version != hello.version {
            return Admission::Refuse(RefuseReason::WrongProtoVersion);
        }
    }
    if !view.loopback && view.same_type_conns >= view.max_conns_per_type.max(1) {
        return Admission::Refuse(RefuseReason::Duplicate);
    }
    Admission::Accept
}

// ---------------------------------------------------------------------------------------------
// Active side

/// The connector's side of one connection.
#[derive(Clone, Debug)]
pub struct ActiveHandshake {
    local: LocalIdentity,
    peer: ProcessId,
    conn_type: ConnType,
    version: ProtoVersion,
    initial: Vec<u8>,
    input: InputBuffer,
    finished: bool,
}

/// Progress of a handshake after some input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActiveStep {
    /// Read at least this many more bytes.
    NeedMore(usize),
    Finished(ActiveOutcome),
}

/// How the connector's handshake ended, short of an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActiveOutcome {
    /// The peer accepted; run [`admit`] before using the connection.
    Established(Established),
    /// CONN_NONE in the version sent: lost the race or a duplicate (EALREADY). Close, retry
    /// after `min_reconnect`.
    Refused(PeerHello),
    /// CONN_NONE in another version (EPROTO): record it and redial with `PeerHello::version`.
    Renegotiate(PeerHello),
}

impl ActiveOutcome {
    /// What the peer's hello said, whatever the outcome.
    pub fn hello(&self) -> &PeerHello {
        match self {
            Self::Established(established) => &established.hello,
            Self::Refused(hello) | Self::Renegotiate(hello) => hello,
        }
    }
}

/// Why a connector cannot start a handshake.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ActiveSetupError {
    /// The kernel never dials a userspace process ("Refusing to create a connection to
    /// userspace process"). lustre: socklnd_cb.c `ksocknal_launch_packet()`.
    #[error("refusing to dial userspace process {0}")]
    UserspacePeer(ProcessId),
    /// Only ANY, CONTROL, BULK_IN and BULK_OUT can be dialled.
    #[error("cannot dial a connection of type {0:?}")]
    UndialableConnType(ConnType),
    #[error("cannot build the hello: {0}")]
    Hello(HelloEmitError),
    #[error("cannot build the connection request: {0}")]
    ConnReq(ConnReqEmitError),
}

/// Why a connector drops its connection during the handshake (the kernel's negative codes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ActiveError {
    #[error("bad hello from the peer: {0}")]
    Hello(HelloError),
    /// A valid magic with a version this side does not speak; the active side just closes.
    #[error("peer hello has an unknown version: {0:?}")]
    UnknownVersion(UnknownHelloVersion),
    /// "Connected successfully to X ... but they claimed they were Y".
    #[error("peer claimed to be {claimed}")]
    IdentityMismatch { claimed: ProcessId },
    /// The reply's type does not invert to ours.
    #[error("mismatched connection types: mine {own:?}, peer {peer:?}")]
    MismatchedTypes { own: ConnType, peer: ConnType },
    /// No complete hello within `sock_timeout` of the current read starting.
    #[error("timed out reading the peer's hello after {received} bytes")]
    Timeout { received: usize },
    /// End of stream before the hello was complete: an acceptor that refused the connreq
    /// (wrong NID, insecure port) closes silently.
    #[error("connection closed after {received} bytes of the peer's hello")]
    ClosedByPeer { received: usize },
    /// Input after the handshake finished.
    #[error("handshake already finished")]
    Finished,
}

impl ActiveHandshake {
    /// Starts a connection to `peer` as type `conn_type`, speaking `version` (the version cached
    /// for the peer, else [`ProtoVersion::default_for`] its address family). `sock_timeout`
    /// bounds each read of the peer's hello.
    /// lustre: acceptor.c `lnet_connect()`, socklnd.c `ksocknal_create_conn()`.
    pub fn new(
        now: Time,
        local: LocalIdentity,
        peer: ProcessId,
        conn_type: ConnType,
        version: ProtoVersion,
        sock_timeout: Duration,
    ) -> Result<Self, ActiveSetupError> {
        if peer.is_userspace() {
            return Err(ActiveSetupError::UserspacePeer(peer));
        }
        if !conn_type.is_known() {
            return Err(ActiveSetupError::UndialableConnType(conn_type));
        }
        let connreq = ConnReq::new(peer.nid);
        let hello = Hello::active(version, &local, peer.nid, conn_type);
        let mut initial = vec![0u8; connreq.buffer_len() + hello.buffer_len()];
        let (connreq_bytes, hello_bytes) = initial.split_at_mut(connreq.buffer_len());
        connreq.emit(connreq_bytes).map_err(ActiveSetupError::ConnReq)?;
        hello.emit(hello_bytes).map_err(ActiveSetupError::Hello)?;
        Ok(Self {
            local,
            peer,
            conn_type,
            version,
            initial,
            input: InputBuffer::new(now, sock_timeout),
            finished: false,
        })
    }

    /// The connreq followed by this side's hello, to write as soon as the socket connects.
    pub fn initial_bytes(&self) -> &[u8] {
        &self.initial
    }

    /// The version this side's hello used.
    pub fn version(&self) -> ProtoVersion {
        self.version
    }

    /// The most bytes the driver should read next so that nothing past the hello is read;
    /// 0 once finished.
    pub fn read_hint(&self) -> usize {
        if self.finished { 0 } else { hello_need(self.input.filled()) }
    }

    /// Consumes bytes of the peer's hello; returns how many were used (never more than the
    /// hello) and the progress. Bytes past a finished hello are the connection's.
    pub fn handle_input(
        &mut self,
        now: Time,
        input: &[u8],
    ) -> Result<(usize, ActiveStep), ActiveError> {
        if self.finished {
            return Err(ActiveError::Finished);
        }
        let mut consumed = 0;
        loop {
            let parsed = Hello::parse(self.input.filled()).map_err(|e| self.fail(e.into()))?;
            match parsed {
                HelloParse::NeedMore(need) => {
                    let took = self.input.take(now, need, rest(input, consumed));
                    consumed += took;
                    if took == 0 {
                        return Ok((consumed, ActiveStep::NeedMore(need)));
                    }
                }
                HelloParse::UnknownVersion(unknown) => {
                    return Err(self.fail(ActiveError::UnknownVersion(unknown)));
                }
                HelloParse::Complete { hello, byte_order, .. } => {
                    self.finished = true;
                    let outcome = self.judge_reply(&hello, byte_order)?;
                    return Ok((consumed, ActiveStep::Finished(outcome)));
                }
            }
        }
    }

    /// When the current read times out, if the handshake is still running.
    pub fn poll_timeout(&self) -> Option<Time> {
        (!self.finished).then_some(self.input.deadline)
    }

    /// Fails the handshake if `now` is at or past [`ActiveHandshake::poll_timeout`].
    pub fn handle_timeout(&mut self, now: Time) -> Result<(), ActiveError> {
        if self.finished || now < self.input.deadline {
            return Ok(());
        }
        Err(self.fail(ActiveError::Timeout { received: self.input.len }))
    }

    /// The peer closed the stream before the hello was complete.
    pub fn handle_eof(&mut self) -> ActiveError {
        if self.finished {
            return ActiveError::Finished;
        }
        self.fail(ActiveError::ClosedByPeer { received: self.input.len })
    }

    fn fail(&mut self, error: ActiveError) -> ActiveError {
        self.finished = true;
        error
    }

    /// lustre: socklnd_cb.c `ksocknal_recv_hello()` (active branch).
    fn judge_reply(
        &self,
        reply: &Hello,
        byte_order: ByteOrder,
    ) -> Result<ActiveOutcome, ActiveError> {
        let hello = PeerHello {
            peer: self.peer,
            version: reply.version,
            incarnation: reply.src_incarnation,
            conn_type: self.conn_type,
            byte_order,
            userspace: false,
        };
        match check_active_reply(reply, &self.peer.nid, self.peer.pid, self.version, self.conn_type)
        {
            Ok(()) => Ok(ActiveOutcome::Established(Established {
                side: Side::Active,
                local: self.local,
                hello,
            })),
            Err(ActiveReplyError::Refused) => Ok(ActiveOutcome::Refused(hello)),
            Err(ActiveReplyError::VersionMismatch { .. }) => Ok(ActiveOutcome::Renegotiate(hello)),
            Err(ActiveReplyError::IdentityMismatch { claimed_nid, claimed_pid }) => {
                Err(ActiveError::IdentityMismatch {
                    claimed: ProcessId::new(claimed_nid, claimed_pid),
                })
            }
            Err(ActiveReplyError::MismatchedTypes { own, peer }) => {
                Err(ActiveError::MismatchedTypes { own, peer })
            }
        }
    }
}

impl From<HelloError> for ActiveError {
    fn from(error: HelloError) -> Self {
        Self::Hello(error)
    }
}

// ---------------------------------------------------------------------------------------------
// Passive side

/// What an acceptor needs to know about the node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AcceptConfig {
    pub policy: AcceptPolicy,
    /// Bounds each connreq read and the hello read.
    pub accept_timeout: Duration,
    /// Every local NI a connreq may name (the acceptor serves the whole node, not just the NI
    /// whose address it listens on). Only socklnd NIs belong here: the loopback NI accepts no
    /// IP connections.
    pub local_nis: Vec<LocalIdentity>,
}

/// The acceptor's side of one connection.
#[derive(Clone, Debug)]
pub struct PassiveHandshake {
    local_nis: Vec<LocalIdentity>,
    peer_addr: SocketAddr,
    phase: PassivePhase,
    input: InputBuffer,
}

#[derive(Clone, Debug)]
enum PassivePhase {
    ConnReq,
    Hello { local: LocalIdentity, connreq: ConnReqVersion },
    Deciding { candidate: Candidate, received: Box<Hello> },
    Finished,
}

/// A hello the acceptor has read and checked; the node decides with [`admit`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// The NI the connreq named.
    pub local: LocalIdentity,
    pub hello: PeerHello,
    /// The connreq's layout (v1 for nid4 targets, v2 for large ones).
    pub connreq: ConnReqVersion,
}

/// Progress of an acceptor after some input or a decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PassiveStep {
    /// Read at least this many more bytes.
    NeedMore(usize),
    /// The hello is in: call [`admit`], then [`PassiveHandshake::decide`].
    Decide(Candidate),
    /// Write `reply` (the reply hello), then run the connection.
    Established { established: Established, reply: Vec<u8> },
    /// Write `reply` (possibly empty), then close.
    Rejected(Rejection),
}

/// A connection the acceptor closes after writing an answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejection {
    pub reason: RejectReason,
    /// Bytes to write before closing.
    pub reply: Vec<u8>,
}

/// Why an acceptor closes a connection after answering it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RejectReason {
    /// A `LNET_PROTO_MAGIC` probe or an unknown connreq version: the reply is
    /// [`DOWNGRADE_ANSWER`].
    Downgrade(DowngradeReason),
    /// A hello version this side does not speak: the reply is this side's default hello with
    /// type NONE, so the peer learns what to retry with.
    UnknownHelloVersion(UnknownHelloVersion),
    /// [`admit`] refused it: a CONN_NONE hello in the received version, or nothing.
    Refused(RefuseReason),
}

/// Why an acceptor closes a connection without writing anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PassiveError {
    /// `accept=none`: there should be no listener.
    #[error("the acceptor is disabled (accept=none)")]
    AcceptDisabled,
    /// `accept=secure` and the peer's source port is above 1023 ("insecure port").
    #[error("refusing connection from insecure port {port}")]
    InsecurePort { port: u16 },
    #[error("bad connection request: {0}")]
    ConnReq(AcceptorError),
    /// The connreq names a NID that is not exactly one of the local NIs ("No matching NI").
    #[error("connection request for {0}: no matching NI")]
    NoMatchingNi(Nid),
    #[error("bad hello: {0}")]
    Hello(HelloError),
    #[error("bad connection type in hello: {0}")]
    ConnType(PassiveHelloError),
    /// An unprivileged port over IPv6 makes the kernel assert (it derives an IPv4 NID from the
    /// source address); ulnet refuses instead.
    #[error("refusing a userspace peer over IPv6")]
    UserspacePeerOverIpv6,
    /// The reply cannot be written in the peer's version, e.g. an IPv6 NI answering V3.
    #[error("cannot build the reply hello: {0}")]
    Reply(HelloEmitError),
    #[error("timed out after {received} bytes of the current read")]
    Timeout { received: usize },
    #[error("connection closed after {received} bytes of the current read")]
    ClosedByPeer { received: usize },
    /// [`PassiveHandshake::decide`] without a pending [`PassiveStep::Decide`], or input while
    /// one is pending or after the end.
    #[error("handshake is not expecting this call in its current state")]
    OutOfOrder,
}

impl PassiveHandshake {
    /// Starts on a freshly accepted socket whose remote end is `peer_addr`. With `secure`, a
    /// source port above 1023 is refused before anything is read.
    /// lustre: acceptor.c `lnet_acceptor()`.
    pub fn new(
        now: Time,
        config: &AcceptConfig,
        peer_addr: SocketAddr,
    ) -> Result<Self, PassiveError> {
        match config.policy {
            AcceptPolicy::None => return Err(PassiveError::AcceptDisabled),
            AcceptPolicy::Secure if peer_addr.port() > MAX_RESERVED_PORT => {
                return Err(PassiveError::InsecurePort { port: peer_addr.port() });
            }
            AcceptPolicy::Secure | AcceptPolicy::All => {}
        }
        Ok(Self {
            local_nis: config.local_nis.clone(),
            // A v4-mapped address is an IPv4 peer on a dual-stack socket.
            peer_addr: SocketAddr::new(peer_addr.ip().to_canonical(), peer_addr.port()),
            phase: PassivePhase::ConnReq,
            input: InputBuffer::new(now, config.accept_timeout),
        })
    }

    /// The most bytes the driver should read next; 0 while deciding or once finished.
    pub fn read_hint(&self) -> usize {
        match self.phase {
            PassivePhase::ConnReq => connreq_need(self.input.filled()),
            PassivePhase::Hello { .. } => hello_need(self.input.filled()),
            PassivePhase::Deciding { .. } | PassivePhase::Finished => 0,
        }
    }

    /// Consumes bytes of the connreq and hello; returns how many were used (never more than
    /// both) and the progress.
    pub fn handle_input(
        &mut self,
        now: Time,
        input: &[u8],
    ) -> Result<(usize, PassiveStep), PassiveError> {
        let mut consumed = 0;
        loop {
            let step = match self.phase {
                PassivePhase::ConnReq => self.step_connreq(now),
                PassivePhase::Hello { local, connreq } => self.step_hello(local, connreq),
                PassivePhase::Deciding { .. } | PassivePhase::Finished => {
                    Err(PassiveError::OutOfOrder)
                }
            };
            match step.map_err(|e| self.fail(e))? {
                PassiveStep::NeedMore(need) => {
                    let took = self.input.take(now, need, rest(input, consumed));
                    consumed += took;
                    if took == 0 {
                        return Ok((consumed, PassiveStep::NeedMore(need)));
                    }
                }
                decided => return Ok((consumed, decided)),
            }
        }
    }

    /// Applies the node's verdict on [`PassiveStep::Decide`]'s candidate.
    /// lustre: socklnd.c `ksocknal_create_conn()` (passive reply and CONN_NONE refusals).
    pub fn decide(&mut self, admission: Admission) -> Result<PassiveStep, PassiveError> {
        let PassivePhase::Deciding { candidate, received } =
            std::mem::replace(&mut self.phase, PassivePhase::Finished)
        else {
            return Err(PassiveError::OutOfOrder);
        };
        let peer_nid = candidate.hello.peer.nid;
        match admission {
            Admission::Accept => {
                let own = candidate.hello.conn_type;
                let reply = Hello::passive_reply(&candidate.local, &received, peer_nid, own);
                let established = Established {
                    side: Side::Passive,
                    local: candidate.local,
                    hello: candidate.hello,
                };
                Ok(PassiveStep::Established { established, reply: emit_hello(&reply)? })
            }
            Admission::Refuse(reason) => {
                let reply = if reason.replies_with_none() {
                    let none = ConnType::NONE;
                    emit_hello(&Hello::passive_reply(&candidate.local, &received, peer_nid, none))?
                } else {
                    Vec::new()
                };
                Ok(PassiveStep::Rejected(Rejection {
                    reason: RejectReason::Refused(reason),
                    reply,
                }))
            }
        }
    }

    /// When the current read times out, if the handshake is reading.
    pub fn poll_timeout(&self) -> Option<Time> {
        match self.phase {
            PassivePhase::ConnReq | PassivePhase::Hello { .. } => Some(self.input.deadline),
            PassivePhase::Deciding { .. } | PassivePhase::Finished => None,
        }
    }

    /// Fails the handshake if `now` is at or past [`PassiveHandshake::poll_timeout`].
    pub fn handle_timeout(&mut self, now: Time) -> Result<(), PassiveError> {
        match self.poll_timeout() {
            Some(deadline) if now >= deadline => {
                Err(self.fail(PassiveError::Timeout { received: self.input.len }))
            }
            _ => Ok(()),
        }
    }

    /// The peer closed the stream before the hello was complete.
    pub fn handle_eof(&mut self) -> PassiveError {
        match self.phase {
            PassivePhase::ConnReq | PassivePhase::Hello { .. } => {
                self.fail(PassiveError::ClosedByPeer { received: self.input.len })
            }
            PassivePhase::Deciding { .. } | PassivePhase::Finished => PassiveError::OutOfOrder,
        }
    }

    fn fail(&mut self, error: PassiveError) -> PassiveError {
        self.phase = PassivePhase::Finished;
        error
    }

    /// lustre: acceptor.c `lnet_accept()`.
    fn step_connreq(&mut self, now: Time) -> Result<PassiveStep, PassiveError> {
        let (request, len) = match ConnReq::parse(self.input.filled()) {
            Err(error) => return Err(PassiveError::ConnReq(error)),
            Ok(ConnReqParse::NeedMore(need)) => return Ok(PassiveStep::NeedMore(need)),
            Ok(ConnReqParse::Downgrade(reason)) => {
                self.phase = PassivePhase::Finished;
                return Ok(PassiveStep::Rejected(Rejection {
                    reason: RejectReason::Downgrade(reason),
                    reply: DOWNGRADE_ANSWER.to_vec(),
                }));
            }
            Ok(ConnReqParse::Request { request, len, .. }) => (request, len),
        };
        // nid_same: every field, not just the net.
        let local = self
            .local_nis
            .iter()
            .find(|ni| ni.nid == request.target)
            .copied()
            .ok_or(PassiveError::NoMatchingNi(request.target))?;
        debug_assert_eq!(len, self.input.len, "read_hint never reads past the connreq");
        self.input.restart(now);
        self.phase = PassivePhase::Hello { local, connreq: request.version };
        Ok(PassiveStep::NeedMore(hello_need(&[])))
    }

    /// lustre: socklnd_cb.c `ksocknal_recv_hello()` (passive branch).
    fn step_hello(
        &mut self,
        local: LocalIdentity,
        connreq: ConnReqVersion,
    ) -> Result<PassiveStep, PassiveError> {
        let (received, byte_order) = match Hello::parse(self.input.filled()) {
            Err(error) => return Err(PassiveError::Hello(error)),
            Ok(HelloParse::NeedMore(need)) => return Ok(PassiveStep::NeedMore(need)),
            Ok(HelloParse::UnknownVersion(unknown)) => {
                self.phase = PassivePhase::Finished;
                let answer = Hello::unknown_version_answer(&local, self.peer_addr.is_ipv6());
                return Ok(PassiveStep::Rejected(Rejection {
                    reason: RejectReason::UnknownHelloVersion(unknown),
                    reply: emit_hello(&answer)?,
                }));
            }
            Ok(HelloParse::Complete { hello, byte_order, .. }) => (hello, byte_order),
        };
        let (peer, userspace) = self.peer_identity(&local, &received)?;
        let conn_type = passive_conn_type(received.conn_type).map_err(PassiveError::ConnType)?;
        let candidate = Candidate {
            local,
            hello: PeerHello {
                peer,
                version: received.version,
                incarnation: received.src_incarnation,
                conn_type,
                byte_order,
                userspace,
            },
            connreq,
        };
        self.phase = PassivePhase::Deciding { candidate, received: Box::new(received) };
        Ok(PassiveStep::Decide(candidate))
    }

    /// The hello's identity, or for an unprivileged source port the "userspace process"
    /// identity: the receiving NI's net with the peer's IPv4 address, and the port with
    /// `LNET_PID_USERFLAG` as pid.
    fn peer_identity(
        &self,
        local: &LocalIdentity,
        received: &Hello,
    ) -> Result<(ProcessId, bool), PassiveError> {
        let port = self.peer_addr.port();
        if port <= MAX_RESERVED_PORT {
            return Ok((ProcessId::new(received.src_nid, received.src_pid), false));
        }
        let IpAddr::V4(ip) = self.peer_addr.ip() else {
            return Err(PassiveError::UserspacePeerOverIpv6);
        };
        let nid = Nid::ipv4(local.nid.net(), ip);
        Ok((ProcessId::new(nid, u32::from(port) | LNET_PID_USERFLAG), true))
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers

/// The bytes of the current read (connreq or hello), bounded by the longest hello, with the
/// deadline of the kernel's per-read timeout.
#[derive(Clone, Debug)]
struct InputBuffer {
    bytes: [u8; Hello::MAX_LEN],
    len: usize,
    timeout: Duration,
    deadline: Time,
    /// Where the read the deadline belongs to ends: a parse asking for bytes past it starts
    /// a new read, with a fresh deadline, as the kernel's sequence of `lnet_sock_read()` calls
    /// does.
    section_end: usize,
}

impl InputBuffer {
    fn new(now: Time, timeout: Duration) -> Self {
        Self {
            bytes: [0; Hello::MAX_LEN],
            len: 0,
            timeout,
            deadline: now.saturating_add(timeout),
            section_end: 0,
        }
    }

    fn filled(&self) -> &[u8] {
        // len never exceeds the buffer: take() bounds it.
        self.bytes.get(..self.len).unwrap_or(&[])
    }

    /// Copies up to `need` bytes of `input`; restarts the deadline when `need` opens a new read.
    fn take(&mut self, now: Time, need: usize, input: &[u8]) -> usize {
        let end = self.len.saturating_add(need);
        if end != self.section_end {
            self.section_end = end;
            self.deadline = now.saturating_add(self.timeout);
        }
        let space = Hello::MAX_LEN - self.len;
        let count = need.min(input.len()).min(space);
        if let (Some(dst), Some(src)) =
            (self.bytes.get_mut(self.len..self.len + count), input.get(..count))
        {
            dst.copy_from_slice(src);
            self.len += count;
            count
        } else {
            0
        }
    }

    /// Empties the buffer for the next message (connreq → hello).
    fn restart(&mut self, now: Time) {
        self.len = 0;
        self.section_end = 0;
        self.deadline = now.saturating_add(self.timeout);
    }
}

fn rest(input: &[u8], consumed: usize) -> &[u8] {
    input.get(consumed..).unwrap_or(&[])
}

fn connreq_need(filled: &[u8]) -> usize {
    match ConnReq::parse(filled) {
        Ok(ConnReqParse::NeedMore(need)) => need,
        _ => 0,
    }
}

fn hello_need(filled: &[u8]) -> usize {
    match Hello::parse(filled) {
        Ok(HelloParse::NeedMore(need)) => need,
        _ => 0,
    }
}

fn emit_hello(hello: &Hello) -> Result<Vec<u8>, PassiveError> {
    let mut bytes = vec![0u8; hello.buffer_len()];
    hello.emit(&mut bytes).map_err(PassiveError::Reply)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests;
