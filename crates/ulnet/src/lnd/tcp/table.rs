//! The peer table: every peer process this NI talks to, its typed connections and their
//! sockets, the messages waiting for a connection, and the glue between all that and the core.
//!
//! Each partition has its own table behind its own lock ([`Tables`]). Its methods get the
//! table as `self` and, in a [`Cx`], the core: locked for everything but framing transmits,
//! which runs with the core lock released ([`super::deferred`]), completing sends once it is
//! taken again. They never call [`drain`](fn@crate::driver::drain) (which calls back into the
//! LND); their callers do, after releasing the table.
//!
//! A peer is keyed by its process id as the kernel keys `ksock_peer_ni`: the next-hop NID and
//! the destination pid for a transmit, the hello's identity (or, for an unprivileged source
//! port, the "userspace process" identity) for an accepted connection.
//!
//! lustre: socklnd.c (`ksocknal_create_conn()`, `ksocknal_close_conn_locked()`,
//! `ksocknal_terminate_conn()`), socklnd_cb.c (`ksocknal_launch_packet()`,
//! `ksocknal_check_peer_timeouts()`, `ksocknal_txlist_done()`).

use std::collections::VecDeque;
use std::net::SocketAddr;

use foldhash::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::net::TcpStream;
use tokio::sync::Notify;
use ulnet_proto::addr::{Nid, ProcessId};
use ulnet_proto::engine::{HealthStatus, RecvAction, Resume, RxId, Transmit};
use ulnet_proto::socklnd::handshake::{Candidate, PassiveHandshake, PassiveStep};
use ulnet_proto::socklnd::peer_conns::{
    ActiveResolution, ClosedConn, PeerConns, PeerQueueError, TimeoutAction,
};
use ulnet_proto::socklnd::{ConnId, MessageToken};
use ulnet_proto::time::Time;
use ulnet_proto::wire::header::Header;
use ulnet_proto::wire::hello::ConnType;

use super::context::{CloseCause, ConnKey, Cx, DialError, Dialled, Interest, NewConn, Turn};
use super::ni::Inner;
use super::outbox::{Lock, Outbox, Written};
use super::payload::{Payload, Sending};
use super::reader::{Input, LentSlot, ReadCx, ReadOutcome, Reader};
use super::socket;
use super::writer::{FlushCx, Writer};
use crate::driver::CoreRef;
use crate::lnd::Output;
use crate::log_limit::warn_limited;

/// Most peers one NI keeps (each costs a few hundred bytes plus its connections).
pub const MAX_PEERS: usize = 1 << 16;
/// Most messages waiting for a connection to one peer. LNet's credits (`peer_credits`, 8 by
/// default) keep the real number far lower; this only stops a bug from growing the queue.
pub const MAX_PENDING_MESSAGES: usize = 4096;

/// The peer tables of one NI, one per CPU partition, each behind its own lock: a peer's
/// connections all run on the partition its NID hashes to (`Placement`), so its entry lives in
/// that partition's table and no entry is shared, as each of socklnd's schedulers has its own
/// lock (`kss_lock`). A table is taken with the core locked (the core lock first, the table's
/// as a leaf) or with no lock at all when transmits are framed ([`super::deferred`]); never the
/// core lock while a table's is held.
pub(crate) struct Tables {
    /// Partition 0's.
    first: Shard,
    /// Partition 1's and on.
    rest: Box<[Shard]>,
}

/// One partition's table, and the transmits handed to it and not yet taken.
#[derive(Default)]
struct Shard {
    table: Mutex<PeerTable>,
    /// Transmits in the order the core produced them: filled with the core locked (a leaf
    /// lock), emptied in order by whichever thread next holds the table
    /// ([`super::deferred`]), so that two threads running their transmits in turn cannot
    /// reorder a peer's stream.
    inbox: Mutex<Vec<(Transmit, Payload)>>,
}

/// Locks `mutex`: a poisoned lock is as consistent as a panic left it, and the node goes on,
/// as with the core lock.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Tables {
    /// The tables of an NI on a node of `partitions` CPU partitions.
    pub(super) fn new(partitions: u32) -> Self {
        let rest = (1..partitions.max(1)).map(|_| Shard::default()).collect();
        Self { first: Shard::default(), rest }
    }

    /// Partition `cpt`'s (partition 0's for a CPT the node does not have).
    fn shard(&self, cpt: u32) -> &Shard {
        let index = usize::try_from(cpt).unwrap_or(0);
        match index.checked_sub(1) {
            Some(index) => self.rest.get(index).unwrap_or(&self.first),
            None => &self.first,
        }
    }

    /// The table of partition `cpt`.
    pub(super) fn lock(&self, cpt: u32) -> MutexGuard<'_, PeerTable> {
        lock(&self.shard(cpt).table)
    }

    /// Hands `transmit` to partition `cpt`'s table (core locked).
    pub(super) fn post(&self, cpt: u32, transmit: Transmit, payload: Payload) {
        lock(&self.shard(cpt).inbox).push((transmit, payload));
    }

    /// The transmits handed to partition `cpt`'s table, in order, swapped with `into` (empty);
    /// call with that table locked.
    pub(super) fn take_posted(&self, cpt: u32, into: &mut Vec<(Transmit, Payload)>) {
        std::mem::swap(&mut *lock(&self.shard(cpt).inbox), into);
    }

    /// Drops what every partition was handed and has not taken (the NI is going: its
    /// transmits stay with the core, handed out and not completed, failed by the caller).
    pub(super) fn clear_posted(&self) {
        for shard in std::iter::once(&self.first).chain(self.rest.iter()) {
            lock(&shard.inbox).clear();
        }
    }

    /// Every table, in partition order.
    pub(super) fn all(&self) -> impl Iterator<Item = MutexGuard<'_, PeerTable>> {
        std::iter::once(&self.first).chain(self.rest.iter()).map(|shard| lock(&shard.table))
    }

    /// Every established connection of the NI, for `conn_list`. lustre: socklnd.c
    /// `ksocknal_get_conn_by_idx()`, `ksocknal_ctl()` (`IOC_LIBCFS_GET_CONN`).
    pub(crate) fn connections(&self) -> Vec<TcpConnection> {
        let mut list = Vec::new();
        for (partition, table) in (0u32..).zip(self.all()) {
            for peer in table.peers.values() {
                for io in &peer.io {
                    if let Some(conn) = peer.conns.conn(io.id) {
                        let peer_id = peer.conns.peer();
                        if let Some(shown) = TcpConnection::of(peer_id, conn, &io.stream, partition)
                        {
                            list.push(shown);
                        }
                    }
                }
            }
        }
        list
    }
}

impl<'a> Cx<'a> {
    /// Runs `call` on the table of `peer`'s partition.
    pub(super) fn with_table<R>(
        &mut self,
        peer: &Nid,
        call: impl FnOnce(&mut PeerTable, &mut Self) -> R,
    ) -> R {
        let inner: &'a Arc<Inner> = self.inner;
        let mut table = inner.tables.lock(inner.placement.cpt_of(peer));
        call(&mut table, self)
    }

    /// Runs `call` on every table of the NI, in partition order.
    pub(super) fn with_tables(&mut self, mut call: impl FnMut(&mut PeerTable, &mut Self)) {
        let inner: &'a Arc<Inner> = self.inner;
        for mut table in inner.tables.all() {
            call(&mut table, self);
        }
    }
}

/// One established connection as `conn_list` shows it: its peer, type and socket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcpConnection {
    pub peer: ProcessId,
    /// Our view of the connection's type (`BULK_IN`: we receive bulk on it).
    pub conn_type: ConnType,
    pub local: SocketAddr,
    pub remote: SocketAddr,
    /// `SO_SNDBUF` and `SO_RCVBUF` as the kernel reports them.
    pub send_buffer: u32,
    pub recv_buffer: u32,
    /// Nagle's algorithm on (`TCP_NODELAY` off).
    pub nagle: bool,
    /// The CPU partition whose I/O thread runs it (the kernel's scheduler `kss_cpt`).
    pub partition: u32,
}

impl TcpConnection {
    /// `None` for a socket already shut down (its addresses are gone).
    fn of(
        peer: ProcessId,
        conn: &ulnet_proto::socklnd::conn::Conn,
        stream: &TcpStream,
        partition: u32,
    ) -> Option<Self> {
        let sock = socket2::SockRef::from(stream);
        let size = |value: std::io::Result<usize>| {
            value.ok().and_then(|size| u32::try_from(size).ok()).unwrap_or(0)
        };
        Some(Self {
            peer,
            conn_type: conn.conn_type(),
            local: stream.local_addr().ok()?,
            remote: stream.peer_addr().ok()?,
            send_buffer: size(sock.send_buffer_size()),
            recv_buffer: size(sock.recv_buffer_size()),
            nagle: !stream.nodelay().unwrap_or(true),
            partition,
        })
    }
}

#[derive(Default)]
pub(crate) struct PeerTable {
    peers: HashMap<ProcessId, Peer>,
    /// The core's transmit behind each message token handed to the framing, with its payload.
    tokens: HashMap<MessageToken, Sending>,
    next_token: u64,
    /// Receives parked on a lazy portal, and their connection.
    parked: HashMap<RxId, ConnKey>,
    /// Connections given messages since the last flush, each once (`ConnIo::queued`).
    queued: Vec<(ProcessId, ConnId)>,
    /// Tells apart connections that reuse a peer's `ConnId` after the peer entry was rebuilt.
    next_serial: u64,
    /// The LND shut down: nothing new is accepted.
    closed: bool,
}

struct Peer {
    conns: PeerConns,
    io: Vec<ConnIo>,
    /// Messages no connection could carry yet, oldest first.
    pending: VecDeque<Pending>,
    /// We are building this peer's connection set because messages waited for it: keep
    /// dialling the missing types (the kernel's `ksock_conn_cb`). Cleared when the last
    /// connection closes with nothing waiting.
    building: bool,
    /// We dialled this peer at least once: its entry keeps the reconnect backoff, so it stays
    /// when idle. A peer that only ever connected to us is forgotten once idle.
    dialled: bool,
}

struct Pending {
    token: MessageToken,
    header: Header,
    since: Time,
}

/// The I/O side of one established connection (its protocol side is the `Conn` in the peer's
/// `PeerConns`, under the same `ConnId`).
struct ConnIo {
    id: ConnId,
    serial: u64,
    stream: Arc<TcpStream>,
    /// Wakes the connection's task.
    nudge: Arc<Notify>,
    reader: Reader,
    writer: Writer,
    /// Frames staged to be written without the core lock.
    outbox: Arc<Outbox>,
    /// The payload destination the core lent, which the task fills without the core lock.
    lent: Arc<LentSlot>,
    /// The socket's send timeout (`socket::set_send_timeout`): `sock_timeout` when the
    /// connection was made, brought up to date by the scan when `--lnd-timeout` changes it.
    send_timeout: std::time::Duration,
    /// Listed in `PeerTable::queued`.
    queued: bool,
    /// Messages queued since the connection was last written ([`early_write_due`]).
    unwritten: u32,
    /// Messages queued since the last drain ended, and how many the drain before queued.
    drain_count: u32,
    last_drain: u32,
}

impl PeerTable {
    // ------------------------------------------------------------------------- from the core

    /// `lnd_send`: queue the message on a connection that may carry it, to be written by the
    /// next [`flush_queued`](Self::flush_queued) (with whatever else the drain queues, in one
    /// vectored write per connection); or hold it and dial. lustre: socklnd_cb.c
    /// `ksocknal_send()`, `ksocknal_launch_packet()`.
    pub(super) fn transmit(&mut self, cx: &mut Cx<'_>, transmit: Transmit, payload: Payload) {
        let (now, tx) = (cx.now, transmit.tx);
        if self.closed {
            cx.send_done(tx, HealthStatus::LocalError);
            return;
        }
        let peer_id = ProcessId::new(transmit.next_hop, transmit.header.dest_pid);
        let token = MessageToken(self.next_token);
        self.next_token = self.next_token.wrapping_add(1);
        let Some(peer) = peer_entry(&mut self.peers, cx.inner, peer_id) else {
            tracing::warn!(peer = %peer_id, "peer table full ({MAX_PEERS}): message dropped");
            cx.send_done(tx, HealthStatus::LocalError);
            return;
        };
        let zc_min_payload = cx.inner.tunables.effective_zc_min_payload();
        match peer.conns.queue_message_acked(now, &transmit.header, token, zc_min_payload) {
            Ok(id) => {
                self.tokens.insert(token, Sending { tx, payload });
                let mut full = false;
                if let Some(io) = peer.io.iter_mut().find(|io| io.id == id) {
                    if !io.queued {
                        io.queued = true;
                        self.queued.push((peer_id, id));
                    }
                    io.unwritten += 1;
                    io.drain_count += 1;
                    full = early_write_due(io.unwritten, io.last_drain);
                }
                if full {
                    self.flush(cx, peer_id, id, Urgency::Now);
                }
            }
            Err(PeerQueueError::NoConnection) => {
                if peer_id.is_userspace() {
                    // lustre: ksocknal_launch_packet() "Refusing to create a connection to
                    // userspace process": only the process itself can connect.
                    cx.send_done(tx, HealthStatus::RemoteDropped);
                    return;
                }
                if peer.pending.len() >= MAX_PENDING_MESSAGES {
                    cx.send_done(tx, HealthStatus::LocalError);
                    return;
                }
                self.tokens.insert(token, Sending { tx, payload });
                peer.pending.push_back(Pending { token, header: transmit.header, since: now });
                peer.building = true;
                self.start_dial(cx, peer_id);
            }
            Err(PeerQueueError::Queue(error)) => {
                tracing::warn!(peer = %peer_id, %error, "message cannot be queued");
                cx.send_done(tx, HealthStatus::LocalError);
            }
        }
    }

    /// Writes what transmits queued since the last flush, unless `hold` (then it stays queued
    /// for a later flush).
    pub(super) fn flush_queued(&mut self, cx: &mut Cx<'_>, hold: bool) -> Output {
        if self.queued.is_empty() {
            return Output::None;
        }
        if hold {
            return Output::Held;
        }
        let mut queued = std::mem::take(&mut self.queued);
        for &(peer_id, id) in &queued {
            let Some(peer) = self.peers.get_mut(&peer_id) else {
                continue;
            };
            if let Some(io) = peer.io.iter_mut().find(|io| io.id == id) {
                io.queued = false;
                io.last_drain = std::mem::take(&mut io.drain_count);
            }
            self.flush(cx, peer_id, id, Urgency::AfterUnlock);
        }
        queued.clear();
        if self.queued.is_empty() {
            // Nothing was queued meanwhile: keep the allocation for the next drain.
            self.queued = queued;
        }
        Output::Written
    }

    /// A delayed receive may proceed: unpark its connection's reader. Hands `resume` back if
    /// no connection of this table parked it.
    pub(super) fn resume(&mut self, cx: &mut Cx<'_>, resume: Resume) -> Option<Resume> {
        let Some(key) = self.parked.remove(&resume.rx) else {
            return Some(resume);
        };
        let io = self.conn_io(key);
        match io {
            Some(io) => {
                if let Some(core) = cx.core.as_deref_mut() {
                    io.reader.resume(core, cx.now, resume.action, &io.lent);
                }
                cx.inner.post_nudge(cx.wakes, &io.nudge);
            }
            None => {
                // The connection closed meanwhile: its payload is gone.
                if let (RecvAction::Deliver { rx, .. }, Some(core)) =
                    (resume.action, cx.core.as_deref_mut())
                {
                    core.complete_recv(cx.now, rx, HealthStatus::RemoteDropped);
                }
            }
        }
        None
    }

    // ------------------------------------------------------------------- from the connection

    /// A connection's receive turn, from what its task read ahead into `input` and then from
    /// the socket.
    pub(super) fn receive(&mut self, cx: &mut Cx<'_>, key: ConnKey, input: &mut Input) -> Turn {
        let Some(peer) = self.peers.get_mut(&key.peer) else {
            return Turn::Closed;
        };
        let Some(io) = peer.io.iter_mut().find(|io| io.serial == key.serial) else {
            return Turn::Closed;
        };
        let id = io.id;
        if cx.core.is_some() {
            if let Some(kind) = io.outbox.take_failure() {
                // Writing the outbox failed, without the lock: close now.
                self.close_conn(cx, key.peer, id, CloseCause::from_io(kind));
                return Turn::Closed;
            }
        } else if io.outbox.has_failed() {
            // Closing fails what the connection holds back to the core: exclusive.
            return Turn::Exclusive;
        }
        let Some((conn, zc)) = peer.conns.conn_and_zc(id) else {
            return Turn::Closed;
        };
        let core = match (cx.core.as_deref_mut(), cx.shared) {
            (Some(core), _) => CoreRef::Exclusive(core),
            (None, Some(core)) => CoreRef::Shared(core),
            (None, None) => {
                tracing::error!("a receive turn without the core lock");
                return Turn::Open { more: false };
            }
        };
        let mut read = ReadCx {
            core,
            now: cx.now,
            ni: cx.inner.ni,
            conn,
            zc,
            stream: &io.stream,
            input,
            reads: &cx.node.counters.socket_reads,
            parked: &mut self.parked,
            key,
            lent: &io.lent,
        };
        let outcome = io.reader.receive(&mut read);
        // ZC-ACKs that came in complete the messages that asked for them.
        while let Some(token) = peer.conns.zc_requests().poll_acked() {
            if let Some(Sending { tx, .. }) = self.tokens.remove(&token) {
                cx.send_done(tx, HealthStatus::Ok);
            }
        }
        match outcome {
            ReadOutcome::Blocked | ReadOutcome::Parked => Turn::Open { more: false },
            ReadOutcome::Exclusive => Turn::Exclusive,
            ReadOutcome::Budget => Turn::Open { more: true },
            ReadOutcome::Close(cause) => {
                self.close_conn(cx, key.peer, id, cause);
                Turn::Closed
            }
        }
    }

    /// A connection's send turn: write what it has, then say what to wait for (`None`: it is
    /// closed).
    pub(super) fn send(&mut self, cx: &mut Cx<'_>, key: ConnKey) -> Option<Interest> {
        let id = self.conn_io(key)?.id;
        self.flush(cx, key.peer, id, Urgency::AfterUnlock)?;
        let io = self.conn_io(key)?;
        let write = io.outbox.is_blocked();
        let reader = &io.reader;
        Some(Interest { read: reader.wants_input(), write, preread: reader.reads_through_buffer() })
    }

    // ---------------------------------------------------------------- from the handshakes

    /// A dial finished: add the connection, or record the failure and back off.
    /// lustre: socklnd_cb.c `ksocknal_connect()`.
    pub(super) fn on_dialled(
        &mut self,
        cx: &mut Cx<'_>,
        peer_id: ProcessId,
        result: Result<Dialled, DialError>,
    ) -> Option<NewConn> {
        if self.closed {
            return None;
        }
        let peer = self.peers.get_mut(&peer_id)?;
        let mut started = None;
        let now = cx.now;
        match result {
            Err(error) => {
                cx.inner.count(|c| &c.dials_failed);
                tracing::debug!(peer = %peer_id, %error, "connection attempt failed");
                peer.conns.on_dial_failed(now);
                if peer.io.is_empty() {
                    // Nothing can carry them until the backoff ends: fail them now, as the
                    // kernel does ("-EHOSTUNREACH"); LNet may resend elsewhere.
                    let waiting = std::mem::take(&mut peer.pending);
                    peer.building = false;
                    for pending in waiting {
                        if let Some(Sending { tx, .. }) = self.tokens.remove(&pending.token) {
                            cx.send_done(tx, HealthStatus::RemoteDropped);
                        }
                    }
                }
            }
            Ok(dialled) => match peer.conns.on_handshake(now, &dialled.outcome, dialled.loopback) {
                ActiveResolution::Added(id) => {
                    cx.inner.count(|c| &c.conns_dialled);
                    tracing::debug!(peer = %peer_id, conn = id.0, "connection dialled");
                    started = self.install(cx, peer_id, id, dialled.stream, Vec::new());
                }
                ActiveResolution::Closed { reason, torn_down } => {
                    cx.inner.count(|c| &c.dials_failed);
                    tracing::debug!(peer = %peer_id, ?reason, "dialled connection not kept");
                    self.tear_down(cx, peer_id, torn_down);
                }
            },
        }
        if self.peers.get(&peer_id).is_some_and(|peer| peer.building || !peer.pending.is_empty()) {
            self.start_dial(cx, peer_id);
        }
        started
    }

    /// An incoming connection's hello is in: judge it (race, reboot, duplicates), answer, and
    /// add it. Returns the new connection (for the caller to start), or, when refused, the
    /// socket with the bytes to write before closing it.
    /// lustre: socklnd.c `ksocknal_create_conn()` (passive).
    pub(super) fn admit(
        &mut self,
        cx: &mut Cx<'_>,
        handshake: &mut PassiveHandshake,
        candidate: &Candidate,
        stream: TcpStream,
        loopback: bool,
    ) -> Result<Option<NewConn>, (TcpStream, Vec<u8>)> {
        if self.closed {
            return Err((stream, Vec::new()));
        }
        let peer_id = candidate.hello.peer;
        let Some(peer) = peer_entry(&mut self.peers, cx.inner, peer_id) else {
            warn_limited!(
                &cx.inner.log_limits.table_full,
                cx.now,
                peer = %peer_id,
                "peer table full ({MAX_PEERS}): connection refused"
            );
            return Err((stream, Vec::new()));
        };
        let admission = peer.conns.admit_passive(candidate, loopback);
        let step = handshake.decide(admission.admission);
        self.tear_down(cx, peer_id, admission.torn_down);
        match step {
            Ok(PassiveStep::Established { established, reply }) => {
                let Some(peer) = self.peers.get_mut(&peer_id) else {
                    return Err((stream, Vec::new()));
                };
                let id = peer.conns.add_conn(cx.now, &established);
                cx.inner.count(|c| &c.conns_accepted);
                tracing::debug!(peer = %peer_id, conn = id.0, "connection accepted");
                Ok(self.install(cx, peer_id, id, stream, reply))
            }
            Ok(PassiveStep::Rejected(rejection)) => {
                tracing::debug!(peer = %peer_id, reason = ?rejection.reason, "connection refused");
                self.forget_if_idle(peer_id);
                Err((stream, rejection.reply))
            }
            Ok(PassiveStep::NeedMore(_) | PassiveStep::Decide(_)) | Err(_) => {
                self.forget_if_idle(peer_id);
                Err((stream, Vec::new()))
            }
        }
    }

    /// Closes every connection to the peers at `nid` (every peer when `None`) and fails the
    /// messages waiting for one, with `RemoteDropped` (resent elsewhere when they may be), as
    /// the kernel does for a downed link's connections.
    /// lustre: socklnd.c `ksocknal_handle_link_state_change()`, `ksocknal_close_conn_locked()`.
    pub(super) fn reset(&mut self, cx: &mut Cx<'_>, nid: Option<ulnet_proto::addr::Nid>) {
        let peers: Vec<ProcessId> = self
            .peers
            .keys()
            .filter(|peer| nid.is_none_or(|nid| peer.nid == nid))
            .copied()
            .collect();
        for peer_id in peers {
            let Some(peer) = self.peers.get_mut(&peer_id) else {
                continue;
            };
            let pending: Vec<Pending> = peer.pending.drain(..).collect();
            peer.building = false;
            let conns: Vec<ConnId> = peer.io.iter().map(|io| io.id).collect();
            for pending in pending {
                if let Some(Sending { tx, .. }) = self.tokens.remove(&pending.token) {
                    cx.send_done(tx, HealthStatus::RemoteDropped);
                }
            }
            for id in conns {
                self.close_conn(cx, peer_id, id, CloseCause::Reset);
            }
            self.forget_if_idle(peer_id);
        }
    }

    // ------------------------------------------------------------------------------ timers

    /// Keepalives, stuck connections, messages that waited too long for a connection, dials
    /// whose backoff ended. Returns the earliest deadline left.
    /// lustre: socklnd_cb.c `ksocknal_check_peer_timeouts()`.
    pub(super) fn scan(&mut self, cx: &mut Cx<'_>) -> Option<Time> {
        let now = cx.now;
        let sock_timeout = cx.inner.sock_timeout();
        let ids: Vec<ProcessId> = self.peers.keys().copied().collect();
        let mut next: Option<Time> = None;
        for peer_id in ids {
            let Some(peer) = self.peers.get_mut(&peer_id) else {
                continue;
            };
            // Bytes in an outbox count as the socket's unsent bytes: a peer that stops reading
            // times the connection out whether they sit in the socket or in front of it.
            for io in &mut peer.io {
                if let Some(conn) = peer.conns.conn_mut(io.id) {
                    conn.set_socket_unsent(now, io.outbox.unsent() as u64);
                }
                if io.send_timeout != sock_timeout
                    && socket::set_send_timeout(&io.stream, sock_timeout).is_ok()
                {
                    io.send_timeout = sock_timeout;
                }
            }
            let actions = peer.conns.handle_timeout(now);
            while peer.pending.front().is_some_and(|p| p.since + sock_timeout <= cx.now) {
                let Some(pending) = peer.pending.pop_front() else { break };
                if let Some(Sending { tx, .. }) = self.tokens.remove(&pending.token) {
                    cx.send_done(tx, HealthStatus::LocalTimeout);
                }
            }
            for action in actions {
                match action {
                    TimeoutAction::KeepaliveQueued(id) => {
                        self.flush(cx, peer_id, id, Urgency::AfterUnlock);
                    }
                    TimeoutAction::Close { conn, reason } => {
                        self.close_conn(cx, peer_id, conn, reason.into());
                    }
                }
            }
            let wants_dial =
                self.peers.get(&peer_id).is_some_and(|p| p.building || !p.pending.is_empty());
            if wants_dial {
                self.start_dial(cx, peer_id);
            }
            if let Some(peer) = self.peers.get(&peer_id) {
                // A backed-off dial's time counts only while something waits for it: with
                // nothing waiting it stays in the past, and a deadline due forever kept the
                // I/O thread turning without ever reading a socket (the stall after a black
                // hole, whose dials back off).
                let dial = (peer.building || !peer.pending.is_empty())
                    .then(|| peer.conns.poll_dial_timeout())
                    .flatten();
                let deadlines = peer
                    .conns
                    .poll_conn_timeout()
                    .into_iter()
                    .chain(dial)
                    .chain(peer.pending.front().map(|pending| pending.since + sock_timeout));
                next = deadlines.chain(next).min();
            }
            self.forget_if_idle(peer_id);
        }
        next
    }

    /// Drops every connection (their tasks are gone with the runtime) and fails the receives
    /// the core expected us to fill.
    pub(super) fn shutdown(&mut self, cx: &mut Cx<'_>) {
        self.closed = true;
        for (_, mut peer) in self.peers.drain() {
            for mut io in peer.io.drain(..) {
                let status = HealthStatus::LocalError;
                if let Some(core) = cx.core.as_deref_mut() {
                    io.reader.abandon(core, cx.now, &mut self.parked, status, &io.lent);
                }
                // What was staged is complete already: let it go as a closing socket's own
                // unsent bytes would, if the socket takes it now.
                let _ = io.outbox.write_out(Lock::Held);
                socket::shut_down(&io.stream);
            }
        }
        self.tokens.clear();
        self.parked.clear();
    }

    // ----------------------------------------------------------------------------- helpers

    fn conn_io(&mut self, key: ConnKey) -> Option<&mut ConnIo> {
        let peer = self.peers.get_mut(&key.peer)?;
        peer.io.iter_mut().find(|io| io.serial == key.serial)
    }

    /// Stages what connection `id` has in its outbox, and has it written when `urgency` says.
    /// Returns `None` if the connection closed. With the core lock released a framing failure
    /// cannot close it here: the outbox is marked failed, and its task closes it.
    fn flush(
        &mut self,
        cx: &mut Cx<'_>,
        peer_id: ProcessId,
        id: ConnId,
        urgency: Urgency,
    ) -> Option<()> {
        let peer = self.peers.get_mut(&peer_id)?;
        let io = peer.io.iter_mut().find(|io| io.id == id)?;
        io.unwritten = 0;
        let conn = peer.conns.conn_mut(id)?;
        if !io.writer.has_output(conn) {
            return Some(());
        }
        let mut staged = false;
        let flushed = io.writer.flush(&mut FlushCx {
            now: cx.now,
            conn,
            outbox: &io.outbox,
            tokens: &mut self.tokens,
            done: &mut cx.done,
            staged: &mut staged,
        });
        if staged {
            match urgency {
                Urgency::AfterUnlock => cx.wakes.write(&io.outbox),
                Urgency::Now => {
                    // Transmits are framed with the core lock released (`deferred`).
                    let lock = if cx.core.is_some() { Lock::Held } else { Lock::Released };
                    if io.outbox.write_out(lock) != Written::Idle {
                        cx.inner.post_nudge(cx.wakes, &io.nudge);
                    }
                }
            }
        }
        let failed = match flushed {
            Ok(()) => None,
            // Without the core lock the connection cannot be closed here (that fails what it
            // holds back to the core): its task closes it, as after a failed write.
            Err(cause) if cx.core.is_none() => {
                tracing::error!(peer = %peer_id, %cause, "framing failed; closing the connection");
                io.outbox.fail(std::io::ErrorKind::Other);
                None
            }
            Err(cause) => Some(cause),
        };
        cx.complete_done();
        match failed {
            None => Some(()),
            Some(cause) => {
                self.close_conn(cx, peer_id, id, cause);
                None
            }
        }
    }

    /// Asks for the next connection of the peer's set, if one is wanted and allowed now.
    fn start_dial(&mut self, cx: &mut Cx<'_>, peer_id: ProcessId) {
        if self.closed {
            return;
        }
        let Some(peer) = self.peers.get_mut(&peer_id) else {
            return;
        };
        if let Some(request) = peer.conns.poll_dial(cx.now) {
            peer.dialled = true;
            cx.inner.post_dial(cx.node, cx.wakes, peer_id, request);
        }
    }

    /// A connection joined the peer's set: tell the core the peer is up, and move waiting
    /// messages onto the set. Returns the connection, whose task the caller starts.
    fn install(
        &mut self,
        cx: &mut Cx<'_>,
        peer_id: ProcessId,
        id: ConnId,
        stream: TcpStream,
        preamble: Vec<u8>,
    ) -> Option<NewConn> {
        let serial = self.next_serial;
        self.next_serial = self.next_serial.wrapping_add(1);
        let peer = self.peers.get_mut(&peer_id)?;
        let stream = Arc::new(stream);
        let nudge = Arc::new(Notify::new());
        let outbox = Arc::new(Outbox::new(
            Arc::clone(&stream),
            Arc::clone(&nudge),
            Arc::clone(&cx.node.counters),
        ));
        let lent = Arc::new(LentSlot::default());
        let first = peer.io.is_empty();
        peer.io.push(ConnIo {
            id,
            serial,
            stream: Arc::clone(&stream),
            nudge: Arc::clone(&nudge),
            reader: Reader::new(),
            writer: Writer::new(preamble),
            outbox: Arc::clone(&outbox),
            lent: Arc::clone(&lent),
            send_timeout: cx.inner.sock_timeout(),
            queued: false,
            unwritten: 0,
            drain_count: 0,
            last_drain: 0,
        });
        let key = ConnKey { peer: peer_id, serial };
        if let (true, Some(core)) = (first, cx.core.as_deref_mut()) {
            if let Err(error) =
                core.engine.handle_connection(cx.now, cx.inner.ni, peer_id.nid, true)
            {
                tracing::error!(%error, "core refused a connection notice");
            }
        }
        let now = cx.now;
        let zc_min_payload = cx.inner.tunables.effective_zc_min_payload();
        for pending in std::mem::take(&mut peer.pending) {
            match peer.conns.queue_message_acked(
                now,
                &pending.header,
                pending.token,
                zc_min_payload,
            ) {
                Ok(_) => {}
                Err(PeerQueueError::NoConnection) => peer.pending.push_back(pending),
                Err(PeerQueueError::Queue(error)) => {
                    tracing::warn!(peer = %peer_id, %error, "message cannot be queued");
                    if let Some(Sending { tx, .. }) = self.tokens.remove(&pending.token) {
                        cx.send_done(tx, HealthStatus::LocalError);
                    }
                }
            }
        }
        let ids: Vec<ConnId> = peer.io.iter().map(|io| io.id).collect();
        for id in ids {
            self.flush(cx, peer_id, id, Urgency::AfterUnlock);
        }
        Some(NewConn { key, stream, nudge, outbox, lent })
    }

    /// Closes one connection: fails what it held, shuts the socket, wakes its task so it
    /// leaves. A malformed stream costs only this connection: the kernel also closes the bad
    /// connection's siblings (`ksocknal_close_conn_and_siblings()`), but they carry well-framed
    /// traffic and a peer with one broken stream keeps the others here.
    fn close_conn(&mut self, cx: &mut Cx<'_>, peer_id: ProcessId, id: ConnId, cause: CloseCause) {
        let Some(peer) = self.peers.get_mut(&peer_id) else {
            return;
        };
        let closed = peer.conns.remove_conn(id);
        self.finish_close(cx, peer_id, id, closed, cause);
    }

    /// Closes the I/O side of connections the protocol side already dropped (a rebooted peer).
    fn tear_down(&mut self, cx: &mut Cx<'_>, peer_id: ProcessId, torn_down: Vec<ClosedConn>) {
        for closed in torn_down {
            cx.inner.count(|c| &c.peer_reboots);
            let id = closed.conn.id();
            self.finish_close(cx, peer_id, id, Some(closed), CloseCause::PeerRebooted);
        }
    }

    fn finish_close(
        &mut self,
        cx: &mut Cx<'_>,
        peer_id: ProcessId,
        id: ConnId,
        closed: Option<ClosedConn>,
        cause: CloseCause,
    ) {
        let Some(peer) = self.peers.get_mut(&peer_id) else {
            return;
        };
        let status = cause.status();
        if let Some(closed) = closed {
            for token in closed.conn.abort().into_iter().chain(closed.zc_aborted) {
                if let Some(Sending { tx, .. }) = self.tokens.remove(&token) {
                    cx.send_done(tx, status);
                }
            }
        }
        let Some(index) = peer.io.iter().position(|io| io.id == id) else {
            return;
        };
        let mut io = peer.io.swap_remove(index);
        if let Some(core) = cx.core.as_deref_mut() {
            io.reader.abandon(core, cx.now, &mut self.parked, HealthStatus::RemoteError, &io.lent);
        }
        socket::shut_down(&io.stream);
        cx.inner.post_nudge(cx.wakes, &io.nudge);
        cx.inner.count(|c| &c.conns_closed);
        match cause {
            _ if cause.is_protocol_error() => {
                cx.inner.count(|c| &c.protocol_errors);
                let limit = &cx.inner.log_limits.conn_errors;
                warn_limited!(limit, cx.now, peer = %peer_id, %cause, "closing connection");
            }
            CloseCause::Timeout(_) | CloseCause::StaleZcRequests => {
                cx.inner.count(|c| &c.timeouts);
                let limit = &cx.inner.log_limits.conn_errors;
                warn_limited!(limit, cx.now, peer = %peer_id, %cause, "closing connection");
            }
            CloseCause::Internal(_) => {
                tracing::error!(peer = %peer_id, %cause, "closing connection")
            }
            _ => tracing::debug!(peer = %peer_id, %cause, "connection closed"),
        }
        if peer.io.is_empty() {
            peer.building = !peer.pending.is_empty();
            if let Some(core) = cx.core.as_deref_mut() {
                if let Err(error) =
                    core.engine.handle_connection(cx.now, cx.inner.ni, peer_id.nid, false)
                {
                    tracing::error!(%error, "core refused a connection notice");
                }
            }
            if peer.building {
                self.start_dial(cx, peer_id);
            }
        }
        self.forget_if_idle(peer_id);
    }

    /// Drops the entry of a peer with no connection and nothing waiting, unless we dial it
    /// (its backoff must survive). This bounds the table by the peers we talk to: a userspace
    /// peer is known only by a connection's port and cannot come back under that name, and a
    /// peer that only connected to us starts afresh if it connects again.
    fn forget_if_idle(&mut self, peer_id: ProcessId) {
        let idle = self.peers.get(&peer_id).is_some_and(|peer| {
            peer.io.is_empty()
                && peer.pending.is_empty()
                && (!peer.dialled || peer_id.is_userspace())
        });
        if idle {
            self.peers.remove(&peer_id);
        }
    }
}

/// When output staged in a connection's outbox is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Urgency {
    /// Once this thread releases the core lock (`Wakes::write`): the system call holds up
    /// nobody.
    AfterUnlock,
    /// At once: a burst's first half, which leaves early so the peer works it while the
    /// second half is produced (decision 0011). Transmits are framed with the core lock
    /// released (`deferred`), so this write holds no lock but the table's.
    Now,
}

/// The peer's entry, created if there is room.
fn peer_entry<'a>(
    peers: &'a mut HashMap<ProcessId, Peer>,
    inner: &Inner,
    peer_id: ProcessId,
) -> Option<&'a mut Peer> {
    if !peers.contains_key(&peer_id) && peers.len() >= MAX_PEERS {
        return None;
    }
    Some(peers.entry(peer_id).or_insert_with(|| Peer {
        conns: PeerConns::new(inner.identity, peer_id, inner.peer_config_now()),
        io: Vec::new(),
        pending: VecDeque::new(),
        building: false,
        dialled: false,
    }))
}

/// Fewest messages a drain writes to a connection before its end (see [`early_write_due`]).
pub(super) const EARLY_WRITE_MIN: u32 = 4;

/// Whether a connection with `unwritten` messages queued in the current drain is written now,
/// before the drain ends, given that the last drain queued `last_drain` messages for it.
///
/// A drain's output for a socket is written once, when the drain ends: one system call for
/// all of it. But a peer that answers every message of a burst at once, as we do, then
/// takes turns with us: each end idles while the other works the whole burst, and on two
/// CPUs half the machine waits (lnet_selftest at concurrency 8 moves all eight RPCs as one
/// burst). Writing the first half of a burst as soon as it is queued lets the peer work it
/// while we produce the second half; the halves then stay apart, so both ends stay busy with
/// bursts of half the size. Halves of fewer than [`EARLY_WRITE_MIN`] messages would cost
/// more in system calls than the overlap returns.
pub(super) fn early_write_due(unwritten: u32, last_drain: u32) -> bool {
    unwritten >= EARLY_WRITE_MIN.max(last_drain.div_ceil(2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drain_writes_the_first_half_of_a_burst_early() {
        // Nothing known yet, or small bursts: early only from EARLY_WRITE_MIN messages.
        assert!(!early_write_due(EARLY_WRITE_MIN - 1, 0));
        assert!(early_write_due(EARLY_WRITE_MIN, 0));
        assert!(!early_write_due(3, 6));
        // After a burst of 8: the first 4 leave at once, the rest when the drain ends.
        assert!(!early_write_due(3, 8));
        assert!(early_write_due(4, 8));
        // After 64 (concurrency 64): halves of 32, not writes of 4.
        assert!(!early_write_due(31, 64));
        assert!(early_write_due(32, 64));
        assert!(early_write_due(4, 7) && !early_write_due(3, 7));
    }
}
