//! A peer's connections: which types to dial and in what order, the verdict on each completed
//! handshake (reboot, duplicates, the race), which connection carries a message, retries and
//! reconnect backoff, keepalives and the peer-wide timeouts.
//!
//! One [`PeerConns`] per (local NI, peer NI) pair, like the kernel's `ksock_peer_ni` with its
//! single `ksock_conn_cb` (one peer address).
//!
//! Call protocol for a driver:
//! - Dialling: when messages wait for the peer, call [`PeerConns::poll_dial`]; for each request
//!   open a socket (from a privileged port where possible) and run an `ActiveHandshake` with the
//!   request's type and version. Report a socket or handshake error with
//!   [`PeerConns::on_dial_failed`] and an outcome with [`PeerConns::on_handshake`]. Call
//!   `poll_dial` again after either, and at [`PeerConns::poll_timeout`].
//! - Accepting: on `PassiveStep::Decide`, get the verdict from [`PeerConns::admit_passive`],
//!   pass it to `PassiveHandshake::decide`, and on `Established` call [`PeerConns::add_conn`].
//! - Sending: [`PeerConns::choose_conn`] (or [`PeerConns::queue_message`]) picks the
//!   connection as the kernel does; then drive that `Conn`.
//! - Receiving: [`PeerConns::conn_and_zc`] gives a connection with the peer's ZC request set.
//! - Timers: [`PeerConns::handle_timeout`] queues keepalives and names connections to close.
//! - Closing: [`PeerConns::remove_conn`] for one, [`PeerConns::close_all`] for a protocol error
//!   (the kernel closes a bad connection's siblings too) or a peer that went away.
//!
//! lustre: socklnd.c (`ksocknal_create_conn()`, `ksocknal_incr_conn_count()`,
//! `ksocknal_decr_conn_count()`, `ksocknal_close_conn_locked()`), socklnd_cb.c
//! (`ksocknal_connect()`, `ksocknal_find_conn_locked()`, `ksocknal_send_keepalive_locked()`,
//! `ksocknal_check_peer_timeouts()`), socklnd_proto.c (`ksocknal_match_tx_v3()`).

use std::time::Duration;

use crate::addr::ProcessId;
use crate::time::Time;
use crate::wire::header::Header;
use crate::wire::hello::{ConnType, LocalIdentity, ProtoVersion};
use crate::wire::ksock::KsockHeader;

use super::conn::{Conn, ConnError, QueueError};
use super::handshake::{
    ActiveOutcome, Admission, Candidate, Established, PeerHello, PeerView, RecordedHello,
    RefuseReason, Side, admit,
};
use super::tunables::{KEEPALIVE_RETRY, SOCKNAL_MAX_RETRIES, SocklndTunables};
use super::zc::ZcRequests;
use super::{ConnId, MessageToken};

/// The part of the tunables a peer's connection set uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerConfig {
    pub sock_timeout: Duration,
    pub keepalive: Option<Duration>,
    pub min_bulk: u32,
    pub typed_conns: bool,
    pub round_robin: bool,
    pub min_reconnect: Duration,
    pub max_reconnect: Duration,
    /// `conns_per_peer` resolved for the NI (see `ConnsPerPeer::resolve`), at least 1.
    pub max_conns_per_type: u8,
}

impl PeerConfig {
    pub fn new(tunables: &SocklndTunables, max_conns_per_type: u8) -> Self {
        let (min_reconnect, max_reconnect) = tunables.reconnect_bounds();
        Self {
            sock_timeout: tunables.sock_timeout,
            keepalive: tunables.keepalive,
            min_bulk: tunables.min_bulk,
            typed_conns: tunables.typed_conns,
            round_robin: tunables.round_robin,
            min_reconnect,
            max_reconnect,
            max_conns_per_type: max_conns_per_type.max(1),
        }
    }
}

/// A peer's connections and the state around them.
#[derive(Clone, Debug)]
pub struct PeerConns {
    local: LocalIdentity,
    peer: ProcessId,
    config: PeerConfig,
    slots: Vec<Slot>,
    next_conn_id: u32,
    post_sequence: u64,
    recorded: Option<RecordedHello>,
    zc: ZcRequests,
    /// `ksnr_connected`: bit n set when type n needs no more connections.
    connected: u8,
    dial: DialState,
    /// `ksnp_send_keepalive`: no keepalive attempt before this.
    keepalive_retry_at: Time,
    closing: bool,
}

#[derive(Clone, Debug)]
struct Slot {
    conn: Conn,
    /// Sequence number of the last message posted to it, for round robin.
    last_post: u64,
}

#[derive(Clone, Copy, Debug, Default)]
struct DialState {
    dialling: Option<ConnType>,
    /// `ksnr_retry_count`: EALREADY/EPROTO answers in a row.
    retry_count: u8,
    /// `ksnr_retry_interval`: 0 until a failure or refusal.
    retry_interval: Duration,
    /// `ksnr_timeout`: no dial before this, unless `retry_interval` is 0.
    next_attempt: Time,
}

/// A connection to open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DialRequest {
    /// This side's type for it.
    pub conn_type: ConnType,
    /// The version cached for the peer, else V3 (IPv4) or V4 (IPv6).
    pub version: ProtoVersion,
    /// CONTROL connections go to `accept_port`; the rest to the bulk port when one is set.
    pub control: bool,
}

/// What became of a completed active handshake.
#[derive(Debug)]
pub enum ActiveResolution {
    /// The connection joined the set.
    Added(ConnId),
    /// Close the new socket. `torn_down` are existing connections closed with it (the peer
    /// rebooted): close their sockets and finalize what [`Conn::abort`] returns.
    Closed { reason: ActiveCloseReason, torn_down: Vec<ClosedConn> },
}

/// Why the connector closes a socket whose handshake completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActiveCloseReason {
    /// The peer answered CONN_NONE (EALREADY): retried after `min_reconnect`.
    PeerRefused,
    /// The peer answered CONN_NONE in another version (EPROTO): retried at once with it.
    Renegotiate(ProtoVersion),
    /// This node refused the connection.
    LocalRefusal(RefuseReason),
}

/// The verdict on an incoming connection, with its side effects.
#[derive(Debug)]
pub struct PassiveAdmission {
    pub admission: Admission,
    /// Connections closed because the peer rebooted.
    pub torn_down: Vec<ClosedConn>,
}

/// A connection taken out of the set.
#[derive(Debug)]
pub struct ClosedConn {
    pub conn: Conn,
    /// Messages whose ZC requests were pending on it (always empty unless requests are used).
    pub zc_aborted: Vec<MessageToken>,
}

/// What needs sending, for [`PeerConns::choose_conn`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outgoing {
    /// An LNet message with this much payload.
    Message { payload_len: u32 },
    /// A NOOP; keepalives and ZC-ACKs are non-blocking.
    Noop { nonblocking: bool },
}

/// Why no message could be queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PeerQueueError {
    /// No connection may carry it: dial (see [`PeerConns::poll_dial`]) and hold the message.
    #[error("no connection to the peer can carry the message")]
    NoConnection,
    #[error("{0}")]
    Queue(QueueError),
}

/// Work found by [`PeerConns::handle_timeout`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeoutAction {
    /// A keepalive was queued on this connection: transmit from it.
    KeepaliveQueued(ConnId),
    /// Close this connection and its siblings.
    Close { conn: ConnId, reason: CloseReason },
}

/// Why a timer closes a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseReason {
    /// Stuck receive or send.
    Conn(ConnError),
    /// A ZC request of ours went unacknowledged for `sock_timeout` ("stale ZC_REQs").
    StaleZcRequests,
}

const TYPED_MASK: u8 = bit(ConnType::CONTROL) | bit(ConnType::BULK_IN) | bit(ConnType::BULK_OUT);

impl PeerConns {
    pub fn new(local: LocalIdentity, peer: ProcessId, config: PeerConfig) -> Self {
        Self {
            local,
            peer,
            config,
            slots: Vec::new(),
            next_conn_id: 0,
            post_sequence: 0,
            recorded: None,
            zc: ZcRequests::new(),
            connected: 0,
            dial: DialState::default(),
            keepalive_retry_at: Time::ZERO,
            closing: false,
        }
    }

    pub fn peer(&self) -> ProcessId {
        self.peer
    }

    pub fn local(&self) -> &LocalIdentity {
        &self.local
    }

    /// The protocol and incarnation recorded from the first connection, while any is open.
    pub fn recorded(&self) -> Option<RecordedHello> {
        self.recorded
    }

    pub fn conn(&self, id: ConnId) -> Option<&Conn> {
        self.slot(id).map(|slot| &slot.conn)
    }

    pub fn conn_mut(&mut self, id: ConnId) -> Option<&mut Conn> {
        self.slots.iter_mut().find(|slot| slot.conn.id() == id).map(|slot| &mut slot.conn)
    }

    /// A connection together with the peer's ZC request set, for `Conn::handle_input`.
    pub fn conn_and_zc(&mut self, id: ConnId) -> Option<(&mut Conn, &mut ZcRequests)> {
        let slot = self.slots.iter_mut().find(|slot| slot.conn.id() == id)?;
        Some((&mut slot.conn, &mut self.zc))
    }

    pub fn conns(&self) -> impl Iterator<Item = &Conn> {
        self.slots.iter().map(|slot| &slot.conn)
    }

    pub fn zc_requests(&mut self) -> &mut ZcRequests {
        &mut self.zc
    }

    /// Live connections of `conn_type`.
    pub fn count(&self, conn_type: ConnType) -> u32 {
        self.slots.iter().filter(|slot| slot.conn.conn_type() == conn_type).count() as u32
    }

    /// Marks the peer as going away: no dialling, incoming connections refused silently.
    pub fn set_closing(&mut self) {
        self.closing = true;
    }

    // -----------------------------------------------------------------------------------------
    // Dialling

    /// The next connection to open, if one is wanted and the backoff allows it: CONTROL first,
    /// then BULK_IN and BULK_OUT alternately up to `conns_per_peer` each. Never for a
    /// userspace peer. lustre: socklnd_cb.c `ksocknal_connect()`,
    /// `ksocknal_find_connectable_conn_cb_locked()`.
    pub fn poll_dial(&mut self, now: Time) -> Option<DialRequest> {
        if self.peer.is_userspace() || self.closing || self.dial.dialling.is_some() {
            return None;
        }
        let wanted = self.mask() & !self.connected;
        if wanted == 0 {
            return None;
        }
        if self.dial.retry_interval != Duration::ZERO && now < self.dial.next_attempt {
            return None;
        }
        let conn_type = if wanted & bit(ConnType::ANY) != 0 {
            ConnType::ANY
        } else if wanted & bit(ConnType::CONTROL) != 0 {
            ConnType::CONTROL
        } else if wanted & bit(ConnType::BULK_IN) != 0
            && self.count(ConnType::BULK_IN) <= self.count(ConnType::BULK_OUT)
        {
            ConnType::BULK_IN
        } else {
            ConnType::BULK_OUT
        };
        self.dial.dialling = Some(conn_type);
        Some(DialRequest {
            conn_type,
            version: self.dial_version(),
            control: conn_type == ConnType::CONTROL,
        })
    }

    /// The dial in progress failed before a verdict (connect error, handshake error, timeout):
    /// back off, doubling from `min_reconnect` up to `max_reconnect`.
    /// lustre: socklnd_cb.c `ksocknal_connect()` (`failed:`).
    pub fn on_dial_failed(&mut self, now: Time) {
        self.dial.dialling = None;
        self.back_off(now);
    }

    /// Settles a completed active handshake: records or checks the peer's incarnation,
    /// applies the duplicate limit, and adds the connection or schedules the retry.
    /// `loopback`: both ends have the same IP.
    /// lustre: socklnd.c `ksocknal_create_conn()` (active), socklnd_cb.c `ksocknal_connect()`.
    pub fn on_handshake(
        &mut self,
        now: Time,
        outcome: &ActiveOutcome,
        loopback: bool,
    ) -> ActiveResolution {
        self.dial.dialling = None;
        let hello = *outcome.hello();
        let view = self.view(hello.conn_type, loopback);
        // Refusals by the peer are only checked for a reboot; duplicates need an established
        // connection.
        let view = match outcome {
            ActiveOutcome::Established(_) => view,
            _ => PeerView { same_type_conns: 0, ..view },
        };
        let verdict = admit(Side::Active, &self.local.nid, &hello, &view);
        let torn_down = self.apply_verdict(verdict, &hello);
        let reason = match (verdict, outcome) {
            (Admission::Refuse(RefuseReason::PeerClosing), _) => {
                self.back_off(now);
                return ActiveResolution::Closed {
                    reason: ActiveCloseReason::LocalRefusal(RefuseReason::PeerClosing),
                    torn_down,
                };
            }
            (Admission::Accept, ActiveOutcome::Established(established)) => {
                let id = self.add_conn(now, established);
                self.dial.retry_count = 0;
                return ActiveResolution::Added(id);
            }
            (Admission::Refuse(reason), _) => ActiveCloseReason::LocalRefusal(reason),
            (Admission::Accept, ActiveOutcome::Refused(_)) => ActiveCloseReason::PeerRefused,
            (Admission::Accept, ActiveOutcome::Renegotiate(peer)) => {
                ActiveCloseReason::Renegotiate(peer.version)
            }
        };
        self.retry_later(now, reason);
        ActiveResolution::Closed { reason, torn_down }
    }

    // -----------------------------------------------------------------------------------------
    // Accepting

    /// What this node knows, for [`admit`].
    pub fn view(&self, conn_type: ConnType, loopback: bool) -> PeerView {
        PeerView {
            dialling_peer: self.dial.dialling.is_some(),
            closing: self.closing,
            recorded: self.recorded,
            same_type_conns: self.count(conn_type),
            max_conns_per_type: u32::from(self.config.max_conns_per_type),
            loopback,
        }
    }

    /// The verdict on an incoming connection (race, closing, reboot, duplicates), recording
    /// the peer's protocol and incarnation or tearing its connections down as the kernel does.
    /// lustre: socklnd.c `ksocknal_create_conn()` (passive).
    pub fn admit_passive(&mut self, candidate: &Candidate, loopback: bool) -> PassiveAdmission {
        let view = self.view(candidate.hello.conn_type, loopback);
        let admission = admit(Side::Passive, &self.local.nid, &candidate.hello, &view);
        let torn_down = self.apply_verdict(admission, &candidate.hello);
        PassiveAdmission { admission, torn_down }
    }

    /// Adds an accepted connection (the passive side's; the active side's join through
    /// [`PeerConns::on_handshake`]). A new connection lets dialling proceed at once.
    /// lustre: socklnd.c `ksocknal_associate_cb_conn_locked()`.
    pub fn add_conn(&mut self, now: Time, established: &Established) -> ConnId {
        let id = ConnId(self.next_conn_id);
        self.next_conn_id = self.next_conn_id.wrapping_add(1);
        if self.recorded.is_none() {
            self.recorded = Some(recorded(&established.hello));
        }
        let conn = Conn::new(now, id, established, self.config.sock_timeout);
        let conn_type = conn.conn_type();
        self.slots.push(Slot { conn, last_post: 0 });
        self.count_added(conn_type);
        self.dial.retry_interval = Duration::ZERO;
        id
    }

    // -----------------------------------------------------------------------------------------
    // Closing

    /// Takes one connection out of the set and aborts the ZC requests made on it. When the last
    /// one goes, the recorded protocol is forgotten (the next connection renegotiates).
    /// lustre: socklnd.c `ksocknal_close_conn_locked()`.
    pub fn remove_conn(&mut self, id: ConnId) -> Option<ClosedConn> {
        let index = self.slots.iter().position(|slot| slot.conn.id() == id)?;
        let slot = self.slots.swap_remove(index);
        let conn_type = slot.conn.conn_type();
        self.count_removed(conn_type);
        if self.slots.is_empty() {
            self.recorded = None;
        }
        Some(ClosedConn { zc_aborted: self.zc.abort_conn(id), conn: slot.conn })
    }

    /// Takes every connection out of the set (a protocol error on one closes its siblings).
    pub fn close_all(&mut self) -> Vec<ClosedConn> {
        let ids: Vec<ConnId> = self.conns().map(Conn::id).collect();
        ids.into_iter().filter_map(|id| self.remove_conn(id)).collect()
    }

    // -----------------------------------------------------------------------------------------
    // Sending

    /// The connection for `outgoing`, as the kernel chooses: among connections whose type
    /// prefers it, the least loaded (queued bytes), ties to the least recently used; else the
    /// same among connections that accept it as a fallback.
    /// lustre: socklnd_cb.c `ksocknal_find_conn_locked()`, socklnd_proto.c `ksocknal_match_tx*()`.
    pub fn choose_conn(&mut self, outgoing: Outgoing) -> Option<ConnId> {
        let mut preferred: Option<(usize, u64, u64)> = None;
        let mut fallback: Option<(usize, u64, u64)> = None;
        for (index, slot) in self.slots.iter().enumerate() {
            let best = match match_conn(&slot.conn, outgoing, self.config.min_bulk) {
                Match::No => continue,
                Match::Yes => &mut preferred,
                Match::May => &mut fallback,
            };
            let load = slot.conn.queued_bytes();
            let better = match *best {
                None => true,
                Some((_, best_load, best_post)) => {
                    load < best_load
                        || (load == best_load
                            && self.config.round_robin
                            && slot.last_post < best_post)
                }
            };
            if better {
                *best = Some((index, load, slot.last_post));
            }
        }
        let (index, _, _) = preferred.or(fallback)?;
        self.post_sequence += 1;
        let slot = self.slots.get_mut(index)?;
        slot.last_post = self.post_sequence;
        Some(slot.conn.id())
    }

    /// Chooses a connection for an LNet message and queues it there.
    pub fn queue_message(
        &mut self,
        now: Time,
        header: &Header,
        token: MessageToken,
    ) -> Result<ConnId, PeerQueueError> {
        let outgoing = Outgoing::Message { payload_len: header.payload_length };
        let id = self.choose_conn(outgoing).ok_or(PeerQueueError::NoConnection)?;
        let conn = self.conn_mut(id).ok_or(PeerQueueError::NoConnection)?;
        conn.queue_message(now, header, token).map_err(PeerQueueError::Queue)?;
        Ok(id)
    }

    /// As [`PeerConns::queue_message`], and a payload of at least `zc_min_payload` bytes asks
    /// the peer for a ZC-ACK where the connection's protocol has one, so that the message
    /// completes only once the peer has all of it (and fails, to be resent, if the connection
    /// dies first). lustre: socklnd_cb.c `ksocknal_launch_packet()`, `ksocknal_check_zc_req()`
    /// (the kernel asks for payloads of at least `zc_min_payload` it sends zero-copy).
    pub fn queue_message_acked(
        &mut self,
        now: Time,
        header: &Header,
        token: MessageToken,
        zc_min_payload: u32,
    ) -> Result<ConnId, PeerQueueError> {
        if header.payload_length < zc_min_payload {
            return self.queue_message(now, header, token);
        }
        let outgoing = Outgoing::Message { payload_len: header.payload_length };
        let id = self.choose_conn(outgoing).ok_or(PeerQueueError::NoConnection)?;
        let slot = self.slots.iter_mut().find(|slot| slot.conn.id() == id);
        let conn = slot.map(|slot| &mut slot.conn).ok_or(PeerQueueError::NoConnection)?;
        match conn.queue_message_with_zc_request(now, header, token, &mut self.zc) {
            Ok(_) => Ok(id),
            // V1 has no ksock header to carry the request; too many outstanding: no request.
            Err(QueueError::ZcUnsupported | QueueError::TooManyZcRequests(_)) => {
                conn.queue_message(now, header, token).map_err(PeerQueueError::Queue)?;
                Ok(id)
            }
            Err(error) => Err(PeerQueueError::Queue(error)),
        }
    }

    // -----------------------------------------------------------------------------------------
    // Timers

    /// The earliest of: a connection's deadline, a ZC request's, the next keepalive, the next
    /// permitted dial. For a driver that holds messages for the peer; one that has none
    /// waits for [`PeerConns::poll_conn_timeout`] only.
    pub fn poll_timeout(&self) -> Option<Time> {
        self.poll_conn_timeout().into_iter().chain(self.poll_dial_timeout()).min()
    }

    /// The timers that run whether or not messages wait: connections' deadlines, ZC requests',
    /// the next keepalive.
    pub fn poll_conn_timeout(&self) -> Option<Time> {
        let conns = self.conns().filter_map(Conn::poll_timeout);
        conns.chain(self.zc.poll_timeout()).chain(self.keepalive_deadline()).min()
    }

    /// When a backed-off dial is next permitted. It matters only while messages wait for a
    /// connection: the kernel retries a route when a transmit needs it
    /// (`ksocknal_launch_packet()`), so with nothing waiting the deadline must not be
    /// watched: it stays in the past and would be due forever. `None` when
    /// [`PeerConns::poll_dial`] would never dial (a userspace or closing peer).
    /// lustre: socklnd_cb.c `ksocknal_find_connectable_conn_cb_locked()` (`ksnr_timeout`).
    pub fn poll_dial_timeout(&self) -> Option<Time> {
        (!self.peer.is_userspace()
            && !self.closing
            && self.dial.dialling.is_none()
            && self.mask() & !self.connected != 0
            && self.dial.retry_interval != Duration::ZERO)
            .then_some(self.dial.next_attempt)
    }

    /// Queues a due keepalive and reports stuck connections and stale ZC requests, in the
    /// kernel's order. lustre: socklnd_cb.c `ksocknal_check_peer_timeouts()`.
    pub fn handle_timeout(&mut self, now: Time) -> Vec<TimeoutAction> {
        let mut actions = Vec::new();
        if let Some(id) = self.send_keepalive(now) {
            actions.push(TimeoutAction::KeepaliveQueued(id));
        }
        for slot in &mut self.slots {
            if let Err(error) = slot.conn.handle_timeout(now) {
                let reason = CloseReason::Conn(error);
                actions.push(TimeoutAction::Close { conn: slot.conn.id(), reason });
            }
        }
        if let Some(conn) = self.zc.stale_conn(now) {
            actions.push(TimeoutAction::Close { conn, reason: CloseReason::StaleZcRequests });
        }
        actions
    }

    // -----------------------------------------------------------------------------------------
    // Helpers

    fn slot(&self, id: ConnId) -> Option<&Slot> {
        self.slots.iter().find(|slot| slot.conn.id() == id)
    }

    /// `ksocknal_conn_cb_mask()`.
    fn mask(&self) -> u8 {
        if self.config.typed_conns { TYPED_MASK } else { bit(ConnType::ANY) }
    }

    fn dial_version(&self) -> ProtoVersion {
        match self.recorded {
            Some(recorded) => recorded.version,
            None => {
                let ipv6 = self.peer.nid.ip().is_some_and(|ip| ip.is_ipv6());
                ProtoVersion::default_for(ipv6)
            }
        }
    }

    /// Records a first connection's hello, or tears everything down for a rebooted peer.
    fn apply_verdict(&mut self, admission: Admission, hello: &PeerHello) -> Vec<ClosedConn> {
        match admission {
            Admission::Refuse(RefuseReason::LostRace | RefuseReason::PeerClosing) => Vec::new(),
            Admission::Refuse(reason) if reason.tears_down_peer() => {
                let torn_down = self.close_all();
                self.recorded = None;
                torn_down
            }
            Admission::Accept | Admission::Refuse(_) => {
                if self.recorded.is_none() {
                    self.recorded = Some(recorded(hello));
                }
                Vec::new()
            }
        }
    }

    /// A positive return from `ksocknal_create_conn()`: count the retry; after
    /// [`SOCKNAL_MAX_RETRIES`] settle for one connection of each type, or fail if any type is
    /// missing. A refusal waits `min_reconnect`; anything else retries at once.
    fn retry_later(&mut self, now: Time, reason: ActiveCloseReason) {
        self.dial.retry_count = self.dial.retry_count.saturating_add(1);
        if self.dial.retry_count >= SOCKNAL_MAX_RETRIES {
            let have_each = [ConnType::CONTROL, ConnType::BULK_IN, ConnType::BULK_OUT]
                .iter()
                .all(|&t| self.count(t) > 0);
            if have_each {
                // "assume that the peer doesn't support as many connections as we want".
                self.connected |= TYPED_MASK;
            } else {
                self.back_off(now);
            }
            return;
        }
        let refused = matches!(
            reason,
            ActiveCloseReason::PeerRefused
                | ActiveCloseReason::LocalRefusal(RefuseReason::Duplicate)
        );
        if refused {
            self.dial.retry_interval = self.config.min_reconnect;
            self.dial.next_attempt = now.saturating_add(self.config.min_reconnect);
        } else {
            self.dial.next_attempt = now;
        }
    }

    fn back_off(&mut self, now: Time) {
        let doubled = self.dial.retry_interval.saturating_mul(2);
        let interval = doubled.clamp(self.config.min_reconnect, self.config.max_reconnect);
        self.dial.retry_interval = interval;
        self.dial.next_attempt = now.saturating_add(interval);
    }

    /// `ksocknal_incr_conn_count()`: a type is satisfied at one CONTROL or at
    /// `conns_per_peer` of a bulk type.
    fn count_added(&mut self, conn_type: ConnType) {
        let max = u32::from(self.config.max_conns_per_type);
        let satisfied = match conn_type {
            ConnType::CONTROL => true,
            ConnType::ANY => self.slots.len() as u32 >= max,
            other => self.count(other) >= max,
        };
        if satisfied {
            self.connected |= bit(conn_type);
        }
    }

    /// `ksocknal_decr_conn_count()`: a type is wanted again only when none is left.
    fn count_removed(&mut self, conn_type: ConnType) {
        let left = match conn_type {
            ConnType::ANY => self.slots.len() as u32,
            other => self.count(other),
        };
        if left == 0 {
            self.connected &= !bit(conn_type);
        }
    }

    /// The peer-wide keepalive deadline: `keepalive` after the last sign of life on any
    /// connection, and not before the retry time of the last attempt. V3/V4 only.
    fn keepalive_deadline(&self) -> Option<Time> {
        let keepalive = self.config.keepalive.filter(|k| !k.is_zero())?;
        let version = self.recorded?.version;
        if !matches!(version, ProtoVersion::V3 | ProtoVersion::V4) {
            return None;
        }
        let last_alive = self.conns().map(Conn::last_alive).max()?;
        Some(last_alive.saturating_add(keepalive).max(self.keepalive_retry_at))
    }

    /// lustre: socklnd_cb.c `ksocknal_send_keepalive_locked()`.
    fn send_keepalive(&mut self, now: Time) -> Option<ConnId> {
        if now < self.keepalive_deadline()? {
            return None;
        }
        self.keepalive_retry_at = now.saturating_add(KEEPALIVE_RETRY);
        let id = self.choose_conn(Outgoing::Noop { nonblocking: true })?;
        let conn = self.conn_mut(id)?;
        conn.queue_keepalive(now).then_some(id)
    }
}

/// `SOCKNAL_MATCH_*`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Match {
    No,
    Yes,
    May,
}

/// Whether a connection's type suits `outgoing`. `nob` counts the whole frame: ksock header,
/// LNet header (72 or 96 bytes) and payload.
/// lustre: socklnd_proto.c `ksocknal_match_tx()` (V1, V2), `ksocknal_match_tx_v3()`,
/// `ksocknal_match_tx_v4()`.
///
/// One deviation: the kernel's V3/V4 matchers refuse an ANY connection, so with
/// `typed_conns=0` (which dials only ANY) every message to a V3/V4 peer waits for a connection
/// that never comes and times out. Here an ANY connection carries everything, as in V1/V2; a
/// kernel at the other end receives on any connection whatever its type.
fn match_conn(conn: &Conn, outgoing: Outgoing, min_bulk: u32) -> Match {
    let (is_message, nonblocking, nob) = match outgoing {
        Outgoing::Message { payload_len } => {
            let ksock = if conn.version().has_ksock_header() { KsockHeader::LEN } else { 0 };
            let headers = (ksock + conn.header_form().len()) as u64;
            (true, false, headers + u64::from(payload_len))
        }
        Outgoing::Noop { nonblocking } => (false, nonblocking, KsockHeader::LEN as u64),
    };
    let bulk = nob >= u64::from(min_bulk);
    match conn.version() {
        ProtoVersion::V1 | ProtoVersion::V2 => match conn.conn_type() {
            ConnType::ANY => Match::Yes,
            ConnType::BULK_IN => Match::May,
            ConnType::BULK_OUT if bulk => Match::Yes,
            ConnType::BULK_OUT => Match::May,
            ConnType::CONTROL if bulk => Match::May,
            ConnType::CONTROL => Match::Yes,
            _ => Match::No,
        },
        ProtoVersion::V3 | ProtoVersion::V4 => match conn.conn_type() {
            ConnType::ANY => Match::Yes,
            ConnType::BULK_IN if nonblocking => Match::Yes,
            ConnType::BULK_IN if !is_message => Match::May,
            ConnType::BULK_OUT | ConnType::CONTROL if nonblocking => Match::No,
            ConnType::BULK_OUT if bulk => Match::Yes,
            ConnType::BULK_OUT => Match::May,
            ConnType::CONTROL if bulk => Match::May,
            ConnType::CONTROL => Match::Yes,
            // BULK_IN for a blocking LNet message.
            _ => Match::No,
        },
    }
}

const fn bit(conn_type: ConnType) -> u8 {
    // Only types 0..=3 are ever stored; anything else maps to no bit.
    if conn_type.0 < 8 { 1 << conn_type.0 } else { 0 }
}

fn recorded(hello: &PeerHello) -> RecordedHello {
    RecordedHello { version: hello.version, incarnation: hello.incarnation }
}

#[cfg(test)]
mod tests;
