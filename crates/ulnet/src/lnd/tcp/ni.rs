//! The state of one TCP NI that the LND's calls and tasks share ([`Inner`]): its identity and
//! tunables, counters, and the inbox of work posted for the I/O thread. The listener is not
//! the NI's: the NIs on one address share it ([`listener`](super::listener)).

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, Weak};

use tokio::sync::Notify;
use ulnet_proto::addr::{Nid, ProcessId};
use ulnet_proto::engine::NiId;
use ulnet_proto::engine::cpt::{CptList, Partitions};
use ulnet_proto::socklnd::peer_conns::{DialRequest, PeerConfig};
use ulnet_proto::socklnd::tunables::SocklndTunables;
use ulnet_proto::wire::hello::LocalIdentity;

use super::table::Tables;
use crate::driver::{Shared, Wakes};
use crate::log_limit::LogLimit;

/// What the LND's calls and tasks share.
pub(crate) struct Inner {
    pub(super) ni: NiId,
    /// Our NID, pid and incarnation, as hellos carry them.
    pub(super) identity: LocalIdentity,
    /// The NI's IP: the listener's address and the source address of outgoing connections.
    pub(super) ip: IpAddr,
    pub(super) tunables: SocklndTunables,
    pub(super) peer_config: PeerConfig,
    /// `conns_per_peer` in force (resolved, at least 1): copied into each new peer's
    /// configuration, so `net set --conns-per-peer` applies to peers met from then on.
    pub(super) conns_per_peer: AtomicU8,
    /// `sock_timeout` in force, in nanoseconds: `tunables.sock_timeout` until `lnetctl net set
    /// --lnd-timeout` changes it (read through [`Inner::sock_timeout`]).
    pub(super) sock_timeout_ns: AtomicU64,
    /// Which partition's I/O thread runs a peer's connections.
    pub(super) placement: Placement,
    pub(super) node: OnceLock<Weak<Shared>>,
    /// Leaf lock: work posted for the I/O thread.
    pub(super) inbox: Mutex<Inbox>,
    /// Try privileged source ports; cleared for good on the first EACCES.
    pub(super) privileged_ports: AtomicBool,
    /// When [`Lnd::poll`](crate::lnd::Lnd::poll) next scans the peers' timers (nanoseconds
    /// of [`Time`](ulnet_proto::time::Time)).
    pub(super) next_scan: AtomicU64,
    pub(super) counters: Counters,
    /// Rate limits of the warnings a peer can cause at will.
    pub(super) log_limits: LogLimits,
    /// The peer tables, one per partition.
    pub(super) tables: Tables,
    /// The last flush held queued output back (an API caller streams): the next flush runs
    /// even with no transmit set aside before it.
    pub(super) held: AtomicBool,
}

/// Which partition's I/O thread runs the connections to a peer: the kernel's
/// `lnet_cpt_of_nid()` of the peer's NID through this NI, which is also the `cpt` of the
/// transmits to it. lustre: socklnd.c `ksocknal_create_conn()` (`lnet_cpt_of_nid()` then
/// `ksocknal_choose_scheduler_locked()`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Placement {
    partitions: Partitions,
    /// The NI's CPTs, bound as the core binds them.
    cpts: CptList,
}

impl Placement {
    /// For an NI of a node with `partitions`, configured with `cpts` (checked by the core; a
    /// list it would refuse never gets this far, and is taken as "all").
    pub(crate) fn new(partitions: Partitions, cpts: CptList) -> Self {
        Self { partitions, cpts: partitions.bind(cpts).unwrap_or(CptList::ALL) }
    }

    /// The node's number of partitions.
    pub(crate) fn partitions(&self) -> u32 {
        self.partitions.count()
    }

    /// The partition of the connections to `peer`.
    pub(crate) fn cpt_of(&self, peer: &Nid) -> u32 {
        self.partitions.cpt_of_nid_for(peer, &self.cpts)
    }
}

/// One rate limit per kind of warning a peer can cause on an NI (the listener has its own for
/// what happens before a connection's NI is known).
#[derive(Debug)]
pub(super) struct LogLimits {
    /// Connections refused because the peer table is full.
    pub(super) table_full: LogLimit,
    /// Established connections closed for a protocol error or a timeout.
    pub(super) conn_errors: LogLimit,
}

impl Default for LogLimits {
    fn default() -> Self {
        Self {
            table_full: LogLimit::new("peer table full"),
            conn_errors: LogLimit::new("connection closed on error"),
        }
    }
}

#[derive(Default)]
pub(super) struct Counters {
    pub(super) conns_accepted: AtomicU64,
    pub(super) conns_dialled: AtomicU64,
    pub(super) conns_closed: AtomicU64,
    pub(super) handshakes_failed: AtomicU64,
    pub(super) handshakes_refused: AtomicU64,
    pub(super) dials_failed: AtomicU64,
    pub(super) protocol_errors: AtomicU64,
    pub(super) timeouts: AtomicU64,
    pub(super) peer_reboots: AtomicU64,
}

/// Work for the I/O thread, posted from any thread.
#[derive(Default)]
pub(super) struct Inbox {
    pub(super) dials: Vec<(ProcessId, DialRequest)>,
}

impl Inner {
    /// `sock_timeout` in force.
    pub(super) fn sock_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.sock_timeout_ns.load(Ordering::Relaxed))
    }

    /// The configuration a peer met now gets: `conns_per_peer` as currently set.
    pub(super) fn peer_config_now(&self) -> PeerConfig {
        let max_conns_per_type = self.conns_per_peer.load(Ordering::Relaxed).max(1);
        PeerConfig { max_conns_per_type, ..self.peer_config }
    }

    pub(super) fn lock_inbox(&self) -> MutexGuard<'_, Inbox> {
        self.inbox.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Asks the I/O thread to start a dial.
    pub(super) fn post_dial(
        &self,
        node: &Arc<Shared>,
        wakes: &mut Wakes,
        peer: ProcessId,
        dial: DialRequest,
    ) {
        self.lock_inbox().dials.push((peer, dial));
        wakes.ring(node);
    }

    /// Wakes a connection's task (it has output, input to resume, or was closed) once the
    /// core lock is released: straight on its partition's thread, not through partition 0's.
    pub(super) fn post_nudge(&self, wakes: &mut Wakes, nudge: &Arc<Notify>) {
        wakes.nudge(Arc::clone(nudge));
    }

    /// Spawns a task on partition `cpt`'s I/O runtime (from any thread).
    pub(super) fn spawn(
        &self,
        node: &Shared,
        cpt: u32,
        task: impl std::future::Future<Output = ()> + Send + 'static,
    ) {
        match node.runtime(cpt) {
            Some(runtime) => drop(runtime.spawn(task)),
            None => tracing::error!("TCP LND task spawned before start"),
        }
    }

    pub(super) fn count(&self, counter: impl Fn(&Counters) -> &AtomicU64) {
        counter(&self.counters).fetch_add(1, Ordering::Relaxed);
    }
}
