//! One established socklnd connection: the framing of what it receives and what it sends.
//!
//! Receive (V2-V4): a 24-byte ksock header; for an LNET message then a 72- or 96-byte LNet header
//! and `payload_length` bytes of payload; a NOOP is the ksock header alone. V1 has no ksock
//! header. The connection only frames and checks: it validates headers, settles ZC-ACKs, queues
//! the ZC requests it must return, and counts payload bytes. Where payload goes (an MD, or
//! nowhere) is the caller's decision; either way every payload byte must be consumed, because
//! nothing else marks where the next message starts.
//!
//! Transmit: the caller queues LNet messages (header plus the payload length it will write from
//! MD memory); [`Conn::poll_transmit`] hands out frames in order, each the ksock header (with a
//! piggy-backed ZC-ACK when one is owed) and the LNet header, followed on the wire by the
//! payload the driver writes itself. When no message is queued, owed ZC-ACKs go out as NOOPs,
//! batched into ranges on V3/V4; a queued keepalive goes last. ulnet never requests ZC-ACKs
//! itself (see [`super::zc`]).
//!
//! Call protocol for a driver:
//! 1. Receive: look at [`Conn::recv_need`]. For a header, read at most that many bytes and pass
//!    them to [`Conn::handle_input`] (which also accepts any larger slice and stops after one
//!    event). For payload, read up to `remaining` bytes straight into the destination the
//!    engine chose and report them with [`Conn::handle_payload`].
//! 2. Act on each [`RecvEvent`]: `Message` gives the validated header; route its payload.
//! 3. Transmit: whenever [`Conn::wants_to_transmit`] (after queueing, and after receiving,
//!    since a completed message may owe a ZC-ACK), take frames with [`Conn::poll_transmit`],
//!    write each frame's header bytes then its payload, and report written bytes with
//!    [`Conn::on_transmitted`]; fully written messages come back from [`Conn::poll_sent`].
//! 4. Timers: call [`Conn::handle_timeout`] at [`Conn::poll_timeout`]; on end of stream call
//!    [`Conn::handle_eof`].
//! 5. Any error: close the connection (the kernel also closes its siblings); [`Conn::abort`]
//!    returns the messages that were not fully written.
//!
//! lustre: socklnd_cb.c (`ksocknal_process_receive()`, `ksocknal_new_packet()`,
//! `ksocknal_queue_tx_locked()`, `ksocknal_transmit()`, `ksocknal_find_timed_out_conn()`),
//! socklnd_proto.c (`ksocknal_queue_tx_msg_v2()`, `ksocknal_queue_tx_zcack_v3()`, `pro_pack`).

use std::collections::VecDeque;
use std::time::Duration;

use crate::addr::ProcessId;
use crate::time::Time;
use crate::wire::header::{Header, HeaderEmitError, HeaderError, HeaderForm, HeaderReceiveError};
use crate::wire::hello::{ByteOrder, ConnType, ProtoVersion};
use crate::wire::ksock::{
    KsockError, KsockHeader, KsockMsgType, SOCKNAL_KEEPALIVE_PING, ZcAck, ZcAckError,
};

use super::handshake::Established;
use super::zc::{TooManyZcAcks, TooManyZcRequests, UnknownZcCookie, ZcAckQueue, ZcRequests};
use super::{ConnId, MessageToken};

/// Longest frame header: the ksock header plus the large-NID LNet header.
pub const FRAME_HEADER_MAX_LEN: usize = KsockHeader::LEN + Header::NID16_LEN;
/// Most messages queued on one connection. LNet's credits (`peer_credits`, `credits`) bound
/// what the engine hands a connection far below this; this only keeps a bug from growing the
/// queue without limit.
pub const MAX_QUEUED_MESSAGES: usize = 4096;

/// One established connection.
#[derive(Clone, Debug)]
pub struct Conn {
    id: ConnId,
    peer: ProcessId,
    version: ProtoVersion,
    conn_type: ConnType,
    byte_order: ByteOrder,
    userspace: bool,
    sock_timeout: Duration,
    // Receive.
    recv: RecvState,
    staging: [u8; Header::NID16_LEN],
    staged: usize,
    rx_deadline: Option<Time>,
    last_alive: Time,
    acks: ZcAckQueue,
    // Transmit.
    queue: VecDeque<QueuedMessage>,
    queue_bytes: u64,
    in_flight: VecDeque<InFlight>,
    sent: VecDeque<MessageToken>,
    keepalive_queued: bool,
    tx_deadline: Option<Time>,
    socket_unsent: u64,
    stats: ConnStats,
}

/// Counters of one connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConnStats {
    pub messages_received: u64,
    pub noops_received: u64,
    pub payload_bytes_received: u64,
    pub messages_sent: u64,
    pub noops_sent: u64,
    pub zc_acks_sent: u64,
    pub keepalives_sent: u64,
}

/// What the receiver wants next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecvNeed {
    /// This many bytes complete the ksock header.
    KsockHeader(usize),
    /// This many bytes complete the LNet header.
    LnetHeader(usize),
    /// This many payload bytes remain; read them into the message's destination.
    Payload { remaining: u32 },
}

impl RecvNeed {
    /// Bytes wanted, whatever they are.
    pub fn len(&self) -> usize {
        match *self {
            Self::KsockHeader(n) | Self::LnetHeader(n) => n,
            Self::Payload { remaining } => remaining as usize,
        }
    }

    /// Never true: a connection always wants the next message.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What a piece of input amounted to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecvEvent {
    /// All input consumed; the current header or payload is incomplete.
    NeedMore,
    /// A NOOP: a keepalive or ZC-ACKs (already settled against the peer's requests).
    Noop(ZcAck),
    /// A validated LNet header. The message is complete if `payload_length` is 0; otherwise
    /// its payload follows.
    Message(Header),
    /// The last `len` consumed bytes are payload of the current message; `remaining` is 0 at
    /// its end.
    Payload { len: usize, remaining: u32 },
}

/// A frame to write: `header_bytes()` then `payload_len` bytes of the message's payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    bytes: [u8; FRAME_HEADER_MAX_LEN],
    len: usize,
    pub payload_len: u32,
    /// The queued message, `None` for a NOOP.
    pub token: Option<MessageToken>,
    pub kind: FrameKind,
}

/// What a frame carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameKind {
    /// An LNet message, with its piggy-backed ZC-ACK cookie or 0, and the ZC request cookie
    /// it carries or 0 (then it completes on the peer's ACK, not when written).
    Message { zc_ack: u64, zc_request: u64 },
    /// A NOOP returning ZC cookies.
    ZcAck(ZcAck),
    /// A keepalive NOOP.
    Keepalive,
}

impl Frame {
    /// The ksock header (V2-V4) and LNet header, or a NOOP's 24 bytes.
    pub fn header_bytes(&self) -> &[u8] {
        self.bytes.get(..self.len).unwrap_or(&[])
    }

    /// Bytes on the wire: header bytes plus payload.
    pub fn wire_len(&self) -> u64 {
        self.len as u64 + u64::from(self.payload_len)
    }
}

/// A malformed stream or a stuck connection: close it (and, as the kernel does, its siblings).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConnError {
    /// An unknown ksock message type ("Unknown message type").
    #[error("bad ksock header: {0}")]
    KsockHeader(KsockError),
    /// A NOOP whose cookies cannot mean anything.
    #[error("malformed ZC-ACK: {0}")]
    MalformedZcAck(ZcAckError),
    /// "Unknown ZC-ACK cookie".
    #[error("{0}")]
    UnknownZcCookie(UnknownZcCookie),
    /// An LNet header that does not decode (unknown type, bad large NID).
    #[error("bad LNet header: {0}")]
    LnetHeader(HeaderError),
    /// A decodable header the kernel's `lnet_parse()` rejects (GET with payload, over 1 MiB,
    /// HELLO, source ANY).
    #[error("invalid LNet message: {0}")]
    InvalidMessage(HeaderReceiveError),
    #[error("{0}")]
    TooManyZcAcks(TooManyZcAcks),
    /// [`Conn::handle_payload`] outside a payload.
    #[error("payload reported while the connection expects a header")]
    NotReceivingPayload,
    /// [`Conn::handle_payload`] with more bytes than the message has left.
    #[error("{given} payload bytes reported, {remaining} remain")]
    PayloadOverrun { given: usize, remaining: u32 },
    /// End of stream inside a message.
    #[error("connection closed in the middle of a message")]
    EofMidMessage,
    /// A message started arriving and made no progress for `sock_timeout`.
    #[error("timed out receiving a message")]
    ReceiveTimeout,
    /// Data waiting to be sent made no progress for `sock_timeout`.
    #[error("timed out sending")]
    SendTimeout,
    /// [`Conn::on_transmitted`] with more bytes than were handed out.
    #[error("{excess} bytes reported written beyond the frames handed out")]
    TransmitOverrun { excess: u64 },
}

/// Why a message cannot be queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QueueError {
    #[error("connection send queue is full ({MAX_QUEUED_MESSAGES} messages)")]
    Full,
    /// The peer would reject it (and close the connection).
    #[error("invalid message: {0}")]
    Invalid(HeaderReceiveError),
    /// The header does not fit the connection's form (an IPv6 NID on a V2/V3 connection).
    #[error("cannot encode header: {0}")]
    Header(HeaderEmitError),
    /// V1 has no ksock header to carry a ZC request.
    #[error("V1 connections carry no ZC requests")]
    ZcUnsupported,
    #[error("{0}")]
    TooManyZcRequests(TooManyZcRequests),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RecvState {
    KsockHeader,
    LnetHeader { zc_request: u64 },
    Payload { remaining: u32, zc_request: u64 },
}

#[derive(Clone, Copy, Debug)]
struct QueuedMessage {
    lnet_header: [u8; Header::NID16_LEN],
    payload_len: u32,
    token: MessageToken,
    zc_request: u64,
}

#[derive(Clone, Copy, Debug)]
struct InFlight {
    token: Option<MessageToken>,
    remaining: u64,
}

impl Conn {
    /// A connection just out of its handshake. `sock_timeout` bounds stuck receives and sends.
    pub fn new(now: Time, id: ConnId, established: &Established, sock_timeout: Duration) -> Self {
        let hello = &established.hello;
        let version = hello.version;
        Self {
            id,
            peer: hello.peer,
            version,
            conn_type: hello.conn_type,
            byte_order: hello.byte_order,
            userspace: hello.userspace,
            sock_timeout,
            recv: start_state(version),
            staging: [0; Header::NID16_LEN],
            staged: 0,
            rx_deadline: None,
            last_alive: now,
            acks: ZcAckQueue::new(),
            queue: VecDeque::new(),
            queue_bytes: 0,
            in_flight: VecDeque::new(),
            sent: VecDeque::new(),
            keepalive_queued: false,
            tx_deadline: None,
            socket_unsent: 0,
            stats: ConnStats::default(),
        }
    }

    pub fn id(&self) -> ConnId {
        self.id
    }

    pub fn peer(&self) -> ProcessId {
        self.peer
    }

    pub fn version(&self) -> ProtoVersion {
        self.version
    }

    /// This side's type for the connection.
    pub fn conn_type(&self) -> ConnType {
        self.conn_type
    }

    pub fn header_form(&self) -> HeaderForm {
        self.version.header_form()
    }

    pub fn stats(&self) -> &ConnStats {
        &self.stats
    }

    /// When bytes last arrived or the peer last acknowledged sent data (see
    /// [`Conn::set_socket_unsent`]); drives keepalives.
    pub fn last_alive(&self) -> Time {
        self.last_alive
    }

    // -----------------------------------------------------------------------------------------
    // Receive

    /// What the next bytes are for.
    pub fn recv_need(&self) -> RecvNeed {
        match self.recv {
            RecvState::KsockHeader => RecvNeed::KsockHeader(KsockHeader::LEN - self.staged),
            RecvState::LnetHeader { .. } => RecvNeed::LnetHeader(self.form_len() - self.staged),
            RecvState::Payload { remaining, .. } => RecvNeed::Payload { remaining },
        }
    }

    /// Consumes input up to and including one event. Headers may arrive in any pieces;
    /// payload in `input` is reported as [`RecvEvent::Payload`] for the caller to copy. `zc`
    /// is the peer's set of our pending ZC requests, against which ZC-ACKs are settled.
    /// lustre: socklnd_cb.c `ksocknal_process_receive()`.
    pub fn handle_input(
        &mut self,
        now: Time,
        input: &[u8],
        zc: &mut ZcRequests,
    ) -> Result<(usize, RecvEvent), ConnError> {
        let mut consumed = 0;
        let event = loop {
            let rest = input.get(consumed..).unwrap_or(&[]);
            if let RecvState::Payload { remaining, .. } = self.recv {
                let len = rest.len().min(remaining as usize);
                if len == 0 {
                    break RecvEvent::NeedMore;
                }
                consumed += len;
                let remaining = self.advance_payload(now, len)?;
                break RecvEvent::Payload { len, remaining };
            }
            let wanted = self.recv_need().len();
            let len = rest.len().min(wanted);
            let (Some(dst), Some(src)) =
                (self.staging.get_mut(self.staged..self.staged + len), rest.get(..len))
            else {
                break RecvEvent::NeedMore; // unreachable: wanted fits the staging buffer
            };
            dst.copy_from_slice(src);
            self.staged += len;
            consumed += len;
            if len < wanted {
                break RecvEvent::NeedMore;
            }
            if let Some(event) = self.complete_header(now, zc)? {
                break event;
            }
        };
        self.note_received(now, consumed);
        Ok((consumed, event))
    }

    /// Reports `len` payload bytes the driver read straight into the message's destination
    /// (or discarded). Returns what remains; at 0 the message is complete.
    pub fn handle_payload(&mut self, now: Time, len: usize) -> Result<u32, ConnError> {
        let RecvState::Payload { remaining, .. } = self.recv else {
            return Err(ConnError::NotReceivingPayload);
        };
        if len > remaining as usize {
            return Err(ConnError::PayloadOverrun { given: len, remaining });
        }
        let remaining = self.advance_payload(now, len)?;
        self.note_received(now, len);
        Ok(remaining)
    }

    /// The stream ended: fine between messages, an error inside one.
    pub fn handle_eof(&self) -> Result<(), ConnError> {
        if self.at_message_boundary() { Ok(()) } else { Err(ConnError::EofMidMessage) }
    }

    // -----------------------------------------------------------------------------------------
    // Transmit

    /// Queues an LNet message whose `payload_length` bytes the driver will write from MD
    /// memory after the frame header. The header must pass the checks the peer will apply.
    pub fn queue_message(
        &mut self,
        now: Time,
        header: &Header,
        token: MessageToken,
    ) -> Result<(), QueueError> {
        let message = self.prepare(header, token)?;
        self.push_message(now, message);
        Ok(())
    }

    /// As [`Conn::queue_message`], asking the peer to acknowledge receipt with a ZC-ACK
    /// (registered in the peer's `zc`); returns the cookie. The message completes on the
    /// ACK ([`ZcRequests::poll_acked`]), not when written.
    pub fn queue_message_with_zc_request(
        &mut self,
        now: Time,
        header: &Header,
        token: MessageToken,
        zc: &mut ZcRequests,
    ) -> Result<u64, QueueError> {
        if !self.version.has_ksock_header() {
            return Err(QueueError::ZcUnsupported);
        }
        let mut message = self.prepare(header, token)?;
        let cookie = zc
            .register(now, self.sock_timeout, self.id, token)
            .map_err(QueueError::TooManyZcRequests)?;
        message.zc_request = cookie;
        self.push_message(now, message);
        Ok(cookie)
    }

    /// Queues a keepalive NOOP (V3/V4). Returns false when it is not needed or not possible:
    /// V1/V2, or something (a message or an ACK) is already queued, which serves as well.
    /// lustre: socklnd_cb.c `ksocknal_send_keepalive_locked()`.
    pub fn queue_keepalive(&mut self, now: Time) -> bool {
        let speaks_keepalive = matches!(self.version, ProtoVersion::V3 | ProtoVersion::V4);
        if !speaks_keepalive || !self.queue.is_empty() || !self.acks.is_empty() {
            return false;
        }
        if !self.keepalive_queued {
            self.keepalive_queued = true;
            self.arm_tx_deadline(now);
        }
        true
    }

    /// Whether [`Conn::poll_transmit`] has a frame to hand out.
    pub fn wants_to_transmit(&self) -> bool {
        !self.queue.is_empty() || !self.acks.is_empty() || self.keepalive_queued
    }

    /// The next frame, in order: queued messages first (each piggy-backing the oldest owed
    /// ZC-ACK), then NOOPs for the remaining ACKs, then a keepalive.
    pub fn poll_transmit(&mut self) -> Option<Frame> {
        let frame = if let Some(message) = self.queue.pop_front() {
            self.message_frame(message)
        } else if let Some(ack) = self.acks.pop_noop(self.version) {
            // A real ACK does a keepalive's job.
            self.keepalive_queued = false;
            self.stats.noops_sent += 1;
            self.stats.zc_acks_sent += ack.count();
            noop_frame(FrameKind::ZcAck(ack), KsockHeader::noop(ack))
        } else if self.keepalive_queued {
            self.keepalive_queued = false;
            self.stats.noops_sent += 1;
            self.stats.keepalives_sent += 1;
            noop_frame(FrameKind::Keepalive, KsockHeader::keepalive())
        } else {
            return None;
        };
        // A message with a ZC request completes when the peer acknowledges it
        // (`ZcRequests::poll_acked`), not when its bytes are written.
        let awaits_ack =
            matches!(frame.kind, FrameKind::Message { zc_request, .. } if zc_request != 0);
        let token = frame.token.filter(|_| !awaits_ack);
        self.in_flight.push_back(InFlight { token, remaining: frame.wire_len() });
        Some(frame)
    }

    /// Reports `written` bytes of the frames handed out (headers and payloads, in order).
    /// Writing is progress: the send deadline restarts.
    pub fn on_transmitted(&mut self, now: Time, written: usize) -> Result<(), ConnError> {
        let mut left = written as u64;
        while left > 0 {
            let Some(front) = self.in_flight.front_mut() else {
                return Err(ConnError::TransmitOverrun { excess: left });
            };
            let step = left.min(front.remaining);
            front.remaining -= step;
            left -= step;
            if front.remaining == 0 {
                if let Some(token) = front.token {
                    self.sent.push_back(token);
                }
                self.in_flight.pop_front();
            }
        }
        if written > 0 {
            self.tx_deadline = Some(now.saturating_add(self.sock_timeout));
        }
        self.disarm_tx_deadline_if_idle();
        Ok(())
    }

    /// A message whose frame has been completely written.
    pub fn poll_sent(&mut self) -> Option<MessageToken> {
        self.sent.pop_front()
    }

    /// Optional: the bytes still in the socket's send buffer (SIOCOUTQ). A decrease means the
    /// peer acknowledged data, which counts as liveness, as the kernel's `sk_wmem_queued`
    /// accounting does; a non-zero value keeps the send deadline armed.
    pub fn set_socket_unsent(&mut self, now: Time, bytes: u64) {
        if bytes < self.socket_unsent {
            self.last_alive = now;
            self.tx_deadline = Some(now.saturating_add(self.sock_timeout));
        }
        self.socket_unsent = bytes;
        if bytes > 0 && self.tx_deadline.is_none() {
            self.arm_tx_deadline(now);
        }
        self.disarm_tx_deadline_if_idle();
    }

    /// Bytes queued or handed out but not yet written, plus the socket's unsent bytes: the
    /// load figure the kernel balances connections by.
    pub fn queued_bytes(&self) -> u64 {
        let in_flight: u64 = self.in_flight.iter().map(|f| f.remaining).sum();
        self.queue_bytes.saturating_add(in_flight).saturating_add(self.socket_unsent)
    }

    /// The messages not completely written, to finalize with an error when the connection
    /// closes. (Their ZC requests, if any, are aborted with `ZcRequests::abort_conn`.)
    pub fn abort(self) -> Vec<MessageToken> {
        let in_flight = self.in_flight.into_iter().filter_map(|f| f.token);
        in_flight.chain(self.queue.into_iter().map(|m| m.token)).collect()
    }

    // -----------------------------------------------------------------------------------------
    // Timers

    /// The earliest of the receive deadline (a message under way) and the send deadline (data
    /// waiting).
    pub fn poll_timeout(&self) -> Option<Time> {
        match (self.rx_deadline, self.tx_deadline) {
            (Some(rx), Some(tx)) => Some(rx.min(tx)),
            (rx, tx) => rx.or(tx),
        }
    }

    /// Fails a connection stuck for `sock_timeout`.
    /// lustre: socklnd_cb.c `ksocknal_find_timed_out_conn()`.
    pub fn handle_timeout(&mut self, now: Time) -> Result<(), ConnError> {
        if self.rx_deadline.is_some_and(|deadline| now >= deadline) {
            return Err(ConnError::ReceiveTimeout);
        }
        if self.tx_deadline.is_some_and(|deadline| now >= deadline) {
            return Err(ConnError::SendTimeout);
        }
        Ok(())
    }

    // -----------------------------------------------------------------------------------------
    // Helpers

    fn form_len(&self) -> usize {
        self.version.header_form().len()
    }

    fn at_message_boundary(&self) -> bool {
        self.staged == 0 && self.recv == start_state(self.version)
    }

    /// Liveness and the receive deadline: armed while a message is under way, as the kernel's
    /// `ksnc_rx_started`.
    fn note_received(&mut self, now: Time, len: usize) {
        if len == 0 {
            return;
        }
        self.last_alive = now;
        self.rx_deadline =
            (!self.at_message_boundary()).then(|| now.saturating_add(self.sock_timeout));
    }

    /// Handles a complete header in the staging buffer; `None` when the next header follows
    /// without an event (a ksock header of an LNET message).
    fn complete_header(
        &mut self,
        now: Time,
        zc: &mut ZcRequests,
    ) -> Result<Option<RecvEvent>, ConnError> {
        let staged = self.staging.get(..self.staged).unwrap_or(&[]);
        match self.recv {
            RecvState::KsockHeader => {
                let header =
                    KsockHeader::parse(staged, self.byte_order).map_err(ConnError::KsockHeader)?;
                self.staged = 0;
                let ack = self.received_ack(&header)?;
                zc.handle_ack(ack).map_err(ConnError::UnknownZcCookie)?;
                match header.msg_type {
                    KsockMsgType::Noop => {
                        self.stats.noops_received += 1;
                        Ok(Some(RecvEvent::Noop(ack)))
                    }
                    KsockMsgType::Lnet => {
                        self.recv = RecvState::LnetHeader { zc_request: header.zc_cookies[0] };
                        Ok(None)
                    }
                }
            }
            RecvState::LnetHeader { zc_request } => {
                let mut header =
                    Header::parse(staged, self.header_form()).map_err(ConnError::LnetHeader)?;
                self.staged = 0;
                if self.userspace {
                    // lustre: ksocknal_process_receive() substitutes the connection's identity.
                    header.src_nid = self.peer.nid;
                    header.src_pid = self.peer.pid;
                }
                header.validate_received().map_err(ConnError::InvalidMessage)?;
                self.stats.messages_received += 1;
                if header.payload_length == 0 {
                    self.finish_message(now, zc_request)?;
                } else {
                    let remaining = header.payload_length;
                    self.recv = RecvState::Payload { remaining, zc_request };
                }
                Ok(Some(RecvEvent::Message(header)))
            }
            // handle_input never stages payload.
            RecvState::Payload { .. } => Ok(None),
        }
    }

    /// The acknowledgement a ksock header carries. V2 has no keepalive: its cookie 1 is an
    /// ordinary cookie, never pending, so such a NOOP is an unknown-cookie error.
    /// lustre: socklnd_proto.c `ksocknal_handle_zcack()`.
    fn received_ack(&self, header: &KsockHeader) -> Result<ZcAck, ConnError> {
        let [low, high] = header.zc_cookies;
        if self.version == ProtoVersion::V2 && high == SOCKNAL_KEEPALIVE_PING {
            let is_noop = header.msg_type == KsockMsgType::Noop;
            return Ok(match low {
                low if is_noop && low > SOCKNAL_KEEPALIVE_PING => ZcAck::Pair(low, high),
                _ => ZcAck::Single(high),
            });
        }
        header.zc_ack().map_err(ConnError::MalformedZcAck)
    }

    fn advance_payload(&mut self, now: Time, len: usize) -> Result<u32, ConnError> {
        let RecvState::Payload { remaining, zc_request } = self.recv else {
            return Err(ConnError::NotReceivingPayload);
        };
        // Callers bound len by remaining, a u32.
        let remaining = remaining.saturating_sub(len as u32);
        self.stats.payload_bytes_received += len as u64;
        if remaining == 0 {
            self.finish_message(now, zc_request)?;
        } else {
            self.recv = RecvState::Payload { remaining, zc_request };
        }
        Ok(remaining)
    }

    /// A whole message is in: owe the peer its ZC-ACK, if it asked.
    /// lustre: socklnd_cb.c `ksocknal_process_receive()` (`pro_handle_zcreq`).
    fn finish_message(&mut self, now: Time, zc_request: u64) -> Result<(), ConnError> {
        self.recv = start_state(self.version);
        if zc_request != 0 {
            self.acks.push(zc_request).map_err(ConnError::TooManyZcAcks)?;
            self.keepalive_queued = false;
            // The ACK is queued on this connection: sending it is now pending.
            self.arm_tx_deadline(now);
        }
        Ok(())
    }

    fn prepare(&self, header: &Header, token: MessageToken) -> Result<QueuedMessage, QueueError> {
        if self.queue.len() >= MAX_QUEUED_MESSAGES {
            return Err(QueueError::Full);
        }
        header.validate_received().map_err(QueueError::Invalid)?;
        let mut lnet_header = [0u8; Header::NID16_LEN];
        header.emit(self.header_form(), &mut lnet_header).map_err(QueueError::Header)?;
        Ok(QueuedMessage { lnet_header, payload_len: header.payload_length, token, zc_request: 0 })
    }

    fn push_message(&mut self, now: Time, message: QueuedMessage) {
        self.queue_bytes = self.queue_bytes.saturating_add(self.message_wire_len(&message));
        self.queue.push_back(message);
        self.arm_tx_deadline(now);
    }

    fn message_wire_len(&self, message: &QueuedMessage) -> u64 {
        let ksock = if self.version.has_ksock_header() { KsockHeader::LEN } else { 0 };
        (ksock + self.form_len()) as u64 + u64::from(message.payload_len)
    }

    /// lustre: socklnd_proto.c `ksocknal_queue_tx_msg_v2()` (piggy-backing an owed ACK).
    fn message_frame(&mut self, message: QueuedMessage) -> Frame {
        self.queue_bytes = self.queue_bytes.saturating_sub(self.message_wire_len(&message));
        let mut frame = Frame {
            bytes: [0; FRAME_HEADER_MAX_LEN],
            len: 0,
            payload_len: message.payload_len,
            token: Some(message.token),
            kind: FrameKind::Message { zc_ack: 0, zc_request: message.zc_request },
        };
        if self.version.has_ksock_header() {
            let zc_ack = self.acks.pop_piggy_back().unwrap_or(0);
            if zc_ack != 0 {
                self.stats.zc_acks_sent += 1;
            }
            frame.kind = FrameKind::Message { zc_ack, zc_request: message.zc_request };
            frame.push(&KsockHeader::lnet(message.zc_request, zc_ack).emit());
        }
        frame.push(message.lnet_header.get(..self.form_len()).unwrap_or(&[]));
        self.stats.messages_sent += 1;
        frame
    }

    /// Starts the send deadline when data is queued on an idle connection.
    fn arm_tx_deadline(&mut self, now: Time) {
        if self.tx_deadline.is_none() {
            self.tx_deadline = Some(now.saturating_add(self.sock_timeout));
        }
    }

    fn disarm_tx_deadline_if_idle(&mut self) {
        let busy = self.wants_to_transmit() || !self.in_flight.is_empty() || self.socket_unsent > 0;
        if !busy {
            self.tx_deadline = None;
        }
    }
}

impl Frame {
    fn push(&mut self, bytes: &[u8]) {
        let end = self.len + bytes.len();
        if let Some(dst) = self.bytes.get_mut(self.len..end) {
            dst.copy_from_slice(bytes);
            self.len = end;
        }
    }
}

fn start_state(version: ProtoVersion) -> RecvState {
    if version.has_ksock_header() {
        RecvState::KsockHeader
    } else {
        RecvState::LnetHeader { zc_request: 0 }
    }
}

fn noop_frame(kind: FrameKind, header: KsockHeader) -> Frame {
    let mut frame =
        Frame { bytes: [0; FRAME_HEADER_MAX_LEN], len: 0, payload_len: 0, token: None, kind };
    frame.push(&header.emit());
    frame
}

#[cfg(test)]
mod tests;
