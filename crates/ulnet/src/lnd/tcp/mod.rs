//! The TCP LND: socklnd, byte-compatible with the kernel's `ksocklnd`.
//!
//! The protocol itself (handshakes, framing, ZC cookies, keepalives, which connection carries
//! what, reconnect backoff) lives in the I/O-free machines of [`ulnet_proto::socklnd`]. This
//! module is the I/O shell around them: it owns the sockets, moves bytes between them and the
//! machines (payload straight between sockets and MD memory), and runs the timers.
//!
//! # A tour, in the order bytes flow
//!
//! * [`socket`]: the listening socket on `<NI IP>:accept_port`, outgoing connections from a
//!   privileged source port (1023 down to 512) when the process may bind one, and the socket
//!   options (`TCP_NODELAY`, TCP keepalive, buffer sizes, ToS).
//! * [`listener`]: one listening socket per address and port, shared by every NI of the node
//!   on it (`tcp` and `tcp1` on one address, say), open while any of them is.
//! * [`acceptor`]: accepts connections and runs the passive handshake (connreq, hello) on each;
//!   the connreq's target NID picks the NI, and the verdict (races, duplicates, a rebooted
//!   peer) is taken with the core locked, in that NI's [`table`]. [`admission`] bounds the
//!   handshakes under way on a listener, in all and per source, so bad connections cannot lock
//!   good peers out.
//! * [`dialer`]: opens a typed connection when messages wait for a peer: connreq and hello out,
//!   the peer's hello in.
//! * [`table`]: the peer table. One entry per peer process with its
//!   [`PeerConns`](ulnet_proto::socklnd::peer_conns::PeerConns) (the typed connections and the
//!   state around them), the sockets, the messages waiting for a connection, and the glue to the
//!   core: transmit, resume, close, timers.
//! * [`connection`]: one task per established connection; it waits for the socket (or a nudge),
//!   writes its outbox and reads what it can without the lock, then runs the reader and the
//!   writer with the core locked.
//! * [`reader`]: bytes from the socket to `Conn::handle_input`, headers to the core, payload
//!   into the destination the core lends (`rx_lend`) or into MD memory (`rx_segments_mut`).
//! * [`payload`], [`deferred`], [`writer`] and [`outbox`]: a transmit's payload captured when
//!   the core hands it over (small ones copied, large ones pinned, `tx_payload_pinned`), the
//!   transmit framed by `Conn::poll_transmit` once the core lock is released, its frames staged
//!   and written with non-blocking vectored writes.
//! * [`ni`]: the NI's state its calls and tasks share (identity, tunables, counters, the inbox
//!   of work for the I/O thread); [`context`]: what the parts pass between them (the call
//!   context `Cx`, `ConnKey`, `CloseCause`...). They sit below the rest, so the imports form no
//!   circle: reader and writer below the table, the table below the connection task, the dialer
//!   and the acceptor on top (they start the tasks of the connections the table adds), and
//!   this module over all (the [`Lnd`] itself).
//!
//! # Threads and locks
//!
//! Everything here runs either on the node's I/O threads (the tasks, [`Lnd::poll`]) or on an
//! API caller's thread inside [`Lnd::transmit`] / [`Lnd::resume`] and after them.
//! A connection's task, and the dial that opens it, run on the I/O thread of the partition its
//! peer's NID hashes to (`ni::Placement`, the kernel's `lnet_cpt_of_nid()`); the listener and
//! the passive handshakes run on partition 0's, which hands each accepted socket to its
//! partition's runtime before the peer table's verdict (the socket must be registered with the
//! runtime whose thread waits on it). Wake-ups of a connection's task go straight to its thread.
//!
//! Each partition has its own peer table behind its own lock (`table::Tables`), as each of
//! socklnd's schedulers has its own `kss_lock`: a peer's connections all run on one partition,
//! so no entry is shared. A table's lock is taken inside the core lock (a receive turn, a
//! resume, a reset, the scan, a dial's or an accept's verdict) or alone, never the other way
//! round: [`Lnd::transmit`] only captures the message's payload (`payload`) and sets the
//! transmit aside in the thread's wake-ups, and once the core lock is released the thread
//! frames and stages it with only its table's lock held (`deferred`), then completes the sends
//! that finished with the core locked again, in one hold. The inbox is a leaf lock: dials to
//! start, posted from any thread, picked up by partition 0's [`Lnd::poll`] after a doorbell
//! ring, which starts each on its peer's partition.
//!
//! The transmits a drain set aside are queued on their connections, and each connection's queue
//! written with one vectored write, straight from the thread that produced them (no wake-up, no
//! thread hop) unless the caller is streaming and the runtime holds the output back for a batch
//! ("Batching" in [`crate::driver::hold`]). A burst is the exception: once half as many
//! messages as the previous batch had are queued for a connection (at least four), they are
//! written at once, so the peer works on them while the rest is staged
//! (`table::early_write_due`, decision 0011). What the socket does not take is left to the
//! connection's task.
//!
//! # Identity
//!
//! Each NI has one incarnation for the life of the process (wall-clock nanoseconds when the NI
//! is built, as the kernel's `ktime_get_real_ns()` at NI start-up), so a restarted node is seen
//! as rebooted by its peers and they drop its old connections.
//!
//! # Unprivileged processes
//!
//! Outgoing connections bind a source port from 1023 down to 512 when the process may (root or
//! `CAP_NET_BIND_SERVICE`), as the kernel does. Otherwise they come from an ordinary port, and:
//! * a peer with `accept=secure` (the kernel's default) closes them at once ("insecure port");
//! * a peer with `accept=all` takes this node for a *userspace process*: it names it by the
//!   source address and port (`pid = port | LNET_PID_USERFLAG`), rewrites the source of every
//!   header received on the connection to that identity, and never dials it back. Traffic
//!   works, but only over connections this node opened.
//!
//! lustre: lnet/klnds/socklnd/ (socklnd.c, socklnd_cb.c, socklnd_lib.c), lnet/lnet/acceptor.c,
//! lnet/lnet/lib-socket.c.

mod acceptor;
mod admission;
mod connection;
mod context;
mod deferred;
mod dialer;
mod listener;
mod ni;
mod outbox;
mod payload;
mod reader;
mod socket;
mod sys;
mod table;
mod writer;

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ulnet_proto::addr::Nid;
use ulnet_proto::engine::{HealthStatus, NiId, RecvAction, Resume, Transmit};
use ulnet_proto::socklnd::peer_conns::PeerConfig;
use ulnet_proto::socklnd::tunables::{AcceptPolicy, ConnsPerPeer, SocklndTunables};
use ulnet_proto::time::Time;
use ulnet_proto::wire::hello::LocalIdentity;

use crate::clock;
use crate::driver::{Core, Shared, Wakes, drain};
use crate::error::BuildError;
use crate::lnd::{Lnd, Output};

pub use admission::{MAX_HANDSHAKES, MAX_HANDSHAKES_PER_SOURCE};
use context::Cx;
pub(crate) use deferred::{Deferred, Finished, Sends, complete_sends};
pub(crate) use listener::Listeners;
use listener::Membership;
pub(crate) use ni::Placement;
use ni::{Counters, Inbox, Inner, LogLimits};
pub(crate) use outbox::Outbox;
pub use outbox::{COPY_MAX_PAYLOAD, OUTBOX_MAX_BYTES};
pub use table::TcpConnection;

/// Counters of the TCP LND, summed over a node's TCP NIs ([`Node::tcp_stats`](crate::Node::tcp_stats)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpStats {
    /// Connections that completed a handshake and joined a peer's set, by side.
    pub conns_accepted: u64,
    pub conns_dialled: u64,
    /// Established connections closed, for any reason.
    pub conns_closed: u64,
    /// Incoming connections closed during the handshake (bad connreq or hello, insecure port,
    /// a connreq for no NI of the node, timeout, refused by the peer verdict, refused or
    /// evicted by the handshake slots).
    pub handshakes_failed: u64,
    /// Of `handshakes_failed`: incoming connections refused or evicted because too many
    /// handshakes were under way, from their source or in all (`admission`).
    pub handshakes_refused: u64,
    /// Outgoing connection attempts that failed or were refused.
    pub dials_failed: u64,
    /// Established connections closed for a malformed stream (bad framing, bad header, unknown
    /// ZC cookie, a message the core refuses).
    pub protocol_errors: u64,
    /// Established connections closed by `sock_timeout` (stuck receive or send).
    pub timeouts: u64,
    /// Connections closed because their peer came back with a new incarnation.
    pub peer_reboots: u64,
}

impl TcpStats {
    /// Connections established and not yet closed.
    pub fn conns_live(&self) -> u64 {
        (self.conns_accepted + self.conns_dialled).saturating_sub(self.conns_closed)
    }

    fn add(&mut self, other: &TcpStats) {
        self.conns_accepted += other.conns_accepted;
        self.conns_dialled += other.conns_dialled;
        self.conns_closed += other.conns_closed;
        self.handshakes_failed += other.handshakes_failed;
        self.handshakes_refused += other.handshakes_refused;
        self.dials_failed += other.dials_failed;
        self.protocol_errors += other.protocol_errors;
        self.timeouts += other.timeouts;
        self.peer_reboots += other.peer_reboots;
    }

    /// The sum over several NIs.
    pub(crate) fn sum<'a>(all: impl IntoIterator<Item = &'a TcpStats>) -> TcpStats {
        let mut total = TcpStats::default();
        for stats in all {
            total.add(stats);
        }
        total
    }
}

/// The LND of one TCP NI.
pub(crate) struct TcpLnd {
    inner: Arc<Inner>,
    /// The NI's place on the listener of its address (none with `accept=none`); taken, and so
    /// left, when the NI is retired or shut down.
    membership: Mutex<Option<Membership>>,
    /// The NI's place on its address's `accept_port_bulk` listener, when that port differs.
    bulk_membership: Mutex<Option<Membership>>,
}

/// Longest gap between two scans of the peers' timers. Deadlines are at least `keepalive` or
/// `sock_timeout` away when armed, so a scan this often finds each within this much of due.
const SCAN_INTERVAL: Duration = Duration::from_millis(500);

impl TcpLnd {
    /// The LND for NI `ni` with `nid` (an IPv4 or IPv6 NID); unless `accept=none`, joins the
    /// node's listener on its address and `accept_port` (binding it if this is the first NI
    /// there; one with other acceptor settings is an error).
    pub(crate) fn new(
        ni: NiId,
        nid: Nid,
        pid: u32,
        tunables: SocklndTunables,
        privileged_ports: bool,
        listeners: &Listeners,
        placement: Placement,
    ) -> Result<Self, BuildError> {
        let ip = nid.ip().ok_or(BuildError::TcpNotIp(nid))?;
        let identity = LocalIdentity { nid, pid, incarnation: next_incarnation() };
        // Auto follows the interface's link speed; loopback has none, which gives 1.
        let conns_per_peer = tunables.conns_per_peer.resolve(crate::link_speed_mbps(ip));
        let inner = Inner {
            ni,
            identity,
            ip,
            peer_config: PeerConfig::new(&tunables, conns_per_peer),
            conns_per_peer: AtomicU8::new(conns_per_peer.max(1)),
            sock_timeout_ns: AtomicU64::new(
                u64::try_from(tunables.sock_timeout.as_nanos()).unwrap_or(u64::MAX),
            ),
            tunables,
            placement,
            node: OnceLock::new(),
            inbox: Mutex::new(Inbox::default()),
            privileged_ports: AtomicBool::new(privileged_ports),
            next_scan: AtomicU64::new(0),
            counters: Counters::default(),
            log_limits: LogLimits::default(),
            tables: table::Tables::new(placement.partitions()),
            held: AtomicBool::new(false),
        };
        let inner = Arc::new(inner);
        let port = inner.tunables.accept_port;
        let bulk = inner.tunables.bulk_port();
        let (membership, bulk_membership) = match inner.tunables.accept {
            AcceptPolicy::None => (None, None),
            AcceptPolicy::Secure | AcceptPolicy::All => {
                let joined = listeners.join(&inner, port);
                let main = joined.map_err(|source| BuildError::TcpListen { nid, port, source })?;
                // lustre: acceptor.c `lnet_acceptor_add_socket()`: a second listener when
                // `accept_port_bulk` differs.
                let bulk_joined = (bulk != port).then(|| listeners.join(&inner, bulk));
                let bulk_membership = bulk_joined
                    .transpose()
                    .map_err(|source| BuildError::TcpListen { nid, port: bulk, source })?;
                (Some(main), bulk_membership)
            }
        };
        Ok(Self {
            inner,
            membership: Mutex::new(membership),
            bulk_membership: Mutex::new(bulk_membership),
        })
    }

    pub(crate) fn stats(&self) -> TcpStats {
        let counters = &self.inner.counters;
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        TcpStats {
            conns_accepted: load(&counters.conns_accepted),
            conns_dialled: load(&counters.conns_dialled),
            conns_closed: load(&counters.conns_closed),
            handshakes_failed: load(&counters.handshakes_failed),
            handshakes_refused: load(&counters.handshakes_refused),
            dials_failed: load(&counters.dials_failed),
            protocol_errors: load(&counters.protocol_errors),
            timeouts: load(&counters.timeouts),
            peer_reboots: load(&counters.peer_reboots),
        }
    }

    /// The NI's established connections (`conn_list`).
    pub(crate) fn connections(&self) -> Vec<TcpConnection> {
        self.inner.tables.connections()
    }

    /// The NI this LND serves.
    pub(crate) fn ni(&self) -> NiId {
        self.inner.ni
    }

    /// This NI's incarnation (the `src_incarnation` of its hellos).
    pub(crate) fn incarnation(&self) -> u64 {
        self.inner.identity.incarnation
    }

    fn lock_membership(&self) -> std::sync::MutexGuard<'_, Option<Membership>> {
        self.membership.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock_bulk_membership(&self) -> std::sync::MutexGuard<'_, Option<Membership>> {
        self.bulk_membership.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Leaves the listeners (a no-op the second time); dropping the memberships does it.
    fn leave_listener(&self) {
        let membership = self.lock_membership().take();
        drop(membership);
        let bulk = self.lock_bulk_membership().take();
        drop(bulk);
    }
}

impl TcpLnd {
    /// The NI is being removed from a running node (core locked, the core already told with
    /// `remove_ni`): stop accepting, write what is queued (responses already committed to
    /// this NI, such as ACKs, still reach the peer), then close every connection. Receives
    /// in progress fail; transmits still held stay with the core for the caller to fail
    /// with a status the core may resend on another NI. Dials under way find the table
    /// closed. lustre: api-ni.c `lnet_dyn_del_ni()` -> socklnd.c `ksocknal_shutdown()`.
    pub(crate) fn retire(&self, node: &Arc<Shared>, core: &mut Core, now: Time, wakes: &mut Wakes) {
        let inner = &self.inner;
        // Off the listener: the NIs left on it go on accepting; the last closes it.
        self.leave_listener();
        let mut cx = Cx::locked(inner, node, core, now, wakes);
        cx.with_tables(|table, cx| {
            let _ = table.flush_queued(cx, false);
            table.shutdown(cx);
        });
        inner.tables.clear_posted();
    }

    /// Carries out what [`retire`](Self::retire) left posted (dials, which find the table
    /// closed); its wake-ups already told the connection tasks to leave. No lock held.
    pub(crate) fn finish_retire(&self, node: &Arc<Shared>) {
        self.inner.run_inbox(node);
    }
}

impl fmt::Debug for TcpLnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpLnd")
            .field("nid", &self.inner.identity.nid)
            .field("port", &self.inner.tunables.accept_port)
            .field("accept", &self.inner.tunables.accept)
            .finish_non_exhaustive()
    }
}

impl Lnd for TcpLnd {
    fn conns_per_peer(&self) -> Option<u8> {
        Some(self.inner.conns_per_peer.load(Ordering::Relaxed))
    }

    fn set_conns_per_peer(&self, value: ConnsPerPeer) -> bool {
        // 0 (auto) follows the link speed again, as when the NI started.
        let resolved = value.resolve(crate::link_speed_mbps(self.inner.ip)).max(1);
        self.inner.conns_per_peer.store(resolved, Ordering::Relaxed);
        true
    }

    fn set_timeout(&self, timeout: std::time::Duration) -> bool {
        let nanos = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
        self.inner.sock_timeout_ns.store(nanos, Ordering::Relaxed);
        true
    }

    fn start(&self, node: &Arc<Shared>) {
        let inner = &self.inner;
        let _ = inner.node.set(Arc::downgrade(node));
        // The first NI of a listener to start serves it; the others find it served.
        if let Some(membership) = self.lock_membership().as_ref() {
            membership.start(node);
        }
        if let Some(membership) = self.lock_bulk_membership().as_ref() {
            membership.start(node);
        }
    }

    fn transmit(
        &self,
        _node: &Arc<Shared>,
        core: &mut Core,
        now: Time,
        transmit: Transmit,
        wakes: &mut Wakes,
    ) {
        // Framed once the lock is released (`deferred`): only the payload is taken now.
        match payload::Payload::capture(core, transmit.tx, transmit.header.payload_length) {
            Ok(payload) => wakes.tcp.transmit(&self.inner, transmit, payload),
            Err(error) => {
                tracing::error!(%error, "a transmit's payload cannot be read");
                core.complete_send(now, transmit.tx, HealthStatus::LocalError);
            }
        }
    }

    fn transmit_shared(
        &self,
        _node: &Arc<Shared>,
        core: &Core,
        _now: Time,
        transmit: Transmit,
        wakes: &mut Wakes,
    ) -> Option<Transmit> {
        // A payload that cannot be read on partitions (or at all) is taken with the core
        // exclusive, where `transmit` fails it if it must.
        match payload::Payload::capture_shared(core, transmit.tx, transmit.header.payload_length) {
            Some(Ok(payload)) => {
                wakes.tcp.transmit(&self.inner, transmit, payload);
                None
            }
            Some(Err(_)) | None => Some(transmit),
        }
    }

    fn flush(
        &self,
        _node: &Arc<Shared>,
        _now: Time,
        wakes: &mut Wakes,
        hold: bool,
        api_call: bool,
    ) -> Output {
        // After the transmits set aside before it, with the lock released (`deferred`): only
        // when there are some, or output is held from before (every drain ends in a flush).
        let inner = &self.inner;
        if wakes.tcp.transmits_since_flush(inner) || inner.held.load(Ordering::Relaxed) {
            wakes.tcp.push(inner, deferred::Item::Flush { hold, api_call });
        }
        Output::None
    }

    fn resume(
        &self,
        node: &Arc<Shared>,
        core: &mut Core,
        now: Time,
        resume: Resume,
        wakes: &mut Wakes,
    ) {
        let inner = &self.inner;
        let mut cx = Cx::locked(inner, node, core, now, wakes);
        // The table whose connection parked the receive (they are few).
        let mut resume = Some(resume);
        cx.with_tables(|table, cx| {
            if let Some(waiting) = resume.take() {
                resume = table.resume(cx, waiting);
            }
        });
        if let Some(Resume { action: RecvAction::Deliver { rx, .. }, .. }) = resume {
            // No connection parked it: it closed, and its payload is gone.
            if let Some(core) = cx.core.as_deref_mut() {
                core.complete_recv(now, rx, HealthStatus::RemoteDropped);
            }
        }
    }

    fn reset(
        &self,
        node: &Arc<Shared>,
        core: &mut Core,
        now: Time,
        peer: Option<Nid>,
        wakes: &mut Wakes,
    ) {
        let inner = &self.inner;
        let mut cx = Cx::locked(inner, node, core, now, wakes);
        cx.with_tables(|table, cx| table.reset(cx, peer));
    }

    fn poll(&self, node: &Arc<Shared>, now: Time) -> Option<Time> {
        let inner = &self.inner;
        inner.run_inbox(node);
        let next_scan = Time::from_nanos(inner.next_scan.load(Ordering::Relaxed));
        if now < next_scan {
            return Some(next_scan);
        }
        let mut wakes = Wakes::default();
        let mut next = now.saturating_add(SCAN_INTERVAL);
        {
            let mut core = node.lock();
            if core.closed {
                return None;
            }
            let mut cx = Cx::locked(inner, node, &mut core, now, &mut wakes);
            cx.with_tables(|table, cx| {
                if let Some(deadline) = table.scan(cx) {
                    next = next.min(deadline);
                }
            });
            drain(node, &mut core, now, &mut wakes);
        }
        wakes.finish();
        // Work the scan posted (dials) is picked up on the next turn, which the ring ensures.
        inner.next_scan.store(next.as_nanos(), Ordering::Relaxed);
        Some(next)
    }

    fn shutdown(&self, node: &Arc<Shared>, now: Time) {
        let inner = &self.inner;
        self.leave_listener();
        let mut wakes = Wakes::default();
        {
            let mut core = node.lock();
            {
                let mut cx = Cx::locked(inner, node, &mut core, now, &mut wakes);
                cx.with_tables(|table, cx| table.shutdown(cx));
            }
            inner.tables.clear_posted();
            drain(node, &mut core, now, &mut wakes);
        }
        wakes.finish();
        inner.lock_inbox().dials.clear();
    }
}

impl Inner {
    /// Carries out the posted work; on the I/O thread. A dial runs on the thread of the
    /// peer's partition, so the connection it makes is registered with that runtime.
    fn run_inbox(self: &Arc<Self>, node: &Arc<Shared>) {
        let dials = std::mem::take(&mut self.lock_inbox().dials);
        for (peer, dial) in dials {
            let cpt = self.placement.cpt_of(&peer.nid);
            let task = dialer::run(Arc::clone(self), Arc::downgrade(node), peer, dial);
            self.spawn(node, cpt, task);
        }
    }
}

/// The tokio instant of a socklnd deadline.
fn deadline_instant(deadline: Time) -> tokio::time::Instant {
    tokio::time::Instant::from_std(clock::instant(deadline))
}

/// A fresh incarnation: wall-clock nanoseconds, strictly increasing within the process so two
/// NIs (or a node rebuilt within the same nanosecond) never share one.
/// lustre: socklnd.c `ksocknal_startup()` (`ksnn_incarnation = ktime_get_real_ns()`).
fn next_incarnation() -> u64 {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let wall = u64::try_from(since_epoch.as_nanos()).unwrap_or(u64::MAX);
    let mut last = LAST.load(Ordering::Relaxed);
    loop {
        let next = wall.max(last.saturating_add(1));
        match LAST.compare_exchange_weak(last, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return next,
            Err(seen) => last = seen,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn incarnations_strictly_increase() {
        let first = next_incarnation();
        let second = next_incarnation();
        assert!(second > first);
        let wall = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos();
        assert!(u128::from(second) <= wall + 1_000_000, "close to the wall clock");
    }

    #[test]
    fn stats_sum_and_live() {
        let one =
            TcpStats { conns_accepted: 2, conns_dialled: 3, conns_closed: 1, ..Default::default() };
        let total = TcpStats::sum([&one, &one]);
        assert_eq!(total.conns_accepted, 4);
        assert_eq!(total.conns_live(), 8);
    }
}
