//! The state behind the core lock ([`Core`]: the engine plus the runtime's bookkeeping about
//! it) and what a node shares between its handles, its I/O thread and other nodes' fabric LNDs
//! ([`Shared`]).

use foldhash::HashMap;
use std::cell::Cell;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::{
    Arc, Mutex, MutexGuard, OnceLock, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard,
    TryLockError, Weak,
};
use std::time::{Duration, Instant};

use ulnet_proto::addr::Nid;
use ulnet_proto::engine::{
    DriverError, HealthStatus, LentPayload, NiId, PingCompletion, RecvAction, RxId, TxId,
};
use ulnet_proto::time::Time;
use ulnet_proto::wire::header::Header;

use super::doorbell::Doorbell;
use super::event_route::{EventRouter, QueueRegistry};
use super::hold::OutputHold;
use crate::event_queue::EqShared;
use crate::lnd::Lnd;

/// What a node shares between its handles, its I/O thread and other nodes' fabric LNDs.
pub(crate) struct Shared {
    /// Unique in the process; orders core locks.
    pub(crate) id: u64,
    /// The core: taken exclusively ([`Shared::lock`]) for any engine call, or shared
    /// ([`Shared::read`]) by the partitions' threads for the engine's calls made on the
    /// partitions their plans name (decision 0029).
    pub(crate) core: RwLock<Core>,
    /// The node has more than one CPU partition: its message path takes the core shared
    /// first. With one, every engine call declines on partitions, so none is tried.
    pub(crate) partitioned: bool,
    pub(crate) doorbell: Doorbell,
    /// Set by `Node::shutdown`: the I/O thread leaves its loop and runs
    /// [`finish`](super::shutdown::finish).
    pub(crate) closing: AtomicBool,
    /// Every event queue created for this node, closed at shutdown.
    pub(crate) queues: Mutex<Vec<Weak<EqShared>>>,
    /// Shared with the connections' outboxes, which count their writes without the lock.
    pub(crate) counters: Arc<Counters>,
    /// How long a waiting thread spins before it parks.
    pub(crate) spin: Duration,
    /// Whether output made on callers' threads is held back ([`super::hold`]).
    pub(crate) output_hold: OutputHold,
    /// Each partition's I/O runtime, by CPT, once the I/O threads run
    /// ([`super::partitions`]); partition 0's is the node's I/O thread, where an NI added live
    /// starts its LND tasks.
    pub(crate) runtimes: OnceLock<Box<[tokio::runtime::Handle]>>,
    /// Connection tasks running now, by the partition whose I/O thread runs them.
    pub(crate) conn_tasks: Box<[AtomicU64]>,
}

/// The LNDs of a node's NIs, indexed by `NiId` (see [`Core::lnds`]).
pub(crate) type Lnds = Arc<[Option<Arc<dyn Lnd>>]>;

/// What a caller blocked on a core completion waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum CompletionKey {
    Ping(u64),
    Discovery(u64),
}

/// Runtime counters (the core keeps its own statistics).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// Times the I/O thread was woken from a park by a doorbell.
    pub(crate) io_wakeups: AtomicU64,
    /// Events whose MD had no live event queue any more.
    pub(crate) events_unrouted: AtomicU64,
    /// Transmits failed because their NI had no LND (a bug) or the node was closing.
    pub(crate) transmits_failed_locally: AtomicU64,
    /// Write system calls on LND sockets.
    pub(crate) socket_writes: AtomicU64,
    /// Those of `socket_writes` made without the core lock held (a connection's outbox).
    pub(crate) socket_writes_unlocked: AtomicU64,
    /// Read system calls on LND sockets' established connections, and those of them made
    /// without the core lock held.
    pub(crate) socket_reads: AtomicU64,
    pub(crate) socket_reads_unlocked: AtomicU64,
    /// Times a thread found the core lock held and waited for it.
    pub(crate) core_lock_waits: AtomicU64,
    /// How long the core lock was held, and how many times it was taken, both estimated from
    /// one acquisition in [`HOLD_SAMPLE`] on each thread (timing every hold would cost two
    /// clock reads per hold, a tenth of a small RPC): the message path's serial share, which
    /// bounds what more partitions can gain while the lock is one (decision 0029).
    pub(crate) core_lock_held_ns: AtomicU64,
    pub(crate) core_lock_holds: AtomicU64,
    /// Times the core was taken shared (the message path of a node of several partitions),
    /// and of those, times the engine declined a call on partitions and the thread took the
    /// core exclusively to make it.
    pub(crate) core_shared_holds: AtomicU64,
    pub(crate) core_shared_declined: AtomicU64,
}

/// One acquisition of the core lock in this many, on each thread, is timed.
pub(crate) const HOLD_SAMPLE: u32 = 16;

thread_local! {
    /// Acquisitions of a core lock on this thread since the last timed one.
    static UNTIMED_HOLDS: Cell<u32> = const { Cell::new(0) };
}

/// The core, locked exclusively: a write guard that times the hold when it is one of the
/// sampled ones.
pub(crate) struct CoreGuard<'a> {
    guard: RwLockWriteGuard<'a, Core>,
    /// When the lock was taken, on a sampled acquisition, and the counters to add it to.
    timed: Option<(Instant, &'a Counters)>,
}

impl<'a> CoreGuard<'a> {
    fn new(guard: RwLockWriteGuard<'a, Core>, counters: &'a Counters) -> Self {
        let untimed = UNTIMED_HOLDS.get() + 1;
        let timed = if untimed >= HOLD_SAMPLE {
            UNTIMED_HOLDS.set(0);
            Some((Instant::now(), counters))
        } else {
            UNTIMED_HOLDS.set(untimed);
            None
        };
        Self { guard, timed }
    }
}

impl Deref for CoreGuard<'_> {
    type Target = Core;

    fn deref(&self) -> &Core {
        &self.guard
    }
}

impl DerefMut for CoreGuard<'_> {
    fn deref_mut(&mut self) -> &mut Core {
        &mut self.guard
    }
}

impl Drop for CoreGuard<'_> {
    fn drop(&mut self) {
        if let Some((taken, counters)) = self.timed {
            let held = u64::try_from(taken.elapsed().as_nanos()).unwrap_or(u64::MAX);
            let sample = u64::from(HOLD_SAMPLE);
            counters.core_lock_held_ns.fetch_add(held.saturating_mul(sample), Ordering::Relaxed);
            counters.core_lock_holds.fetch_add(sample, Ordering::Relaxed);
        }
    }
}

/// The core, taken shared: only `&self` engine calls.
pub(crate) type CoreRead<'a> = RwLockReadGuard<'a, Core>;

/// The core as a call holds it: exclusively (any engine call), or shared with the other
/// partitions' threads, where only the engine's calls on partitions may be made, and each
/// may decline ([`NeedsExclusive`]) having changed nothing.
pub(crate) enum CoreRef<'a> {
    Exclusive(&'a mut Core),
    Shared(&'a Core),
}

/// The engine declined a call with the core shared (its plan needs the whole node): the
/// caller takes the core exclusively and makes it again. Nothing was changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NeedsExclusive;

impl CoreRef<'_> {
    pub(crate) fn reborrow(&mut self) -> CoreRef<'_> {
        match self {
            Self::Exclusive(core) => CoreRef::Exclusive(core),
            Self::Shared(core) => CoreRef::Shared(core),
        }
    }

    pub(crate) fn core(&self) -> &Core {
        match self {
            Self::Exclusive(core) => core,
            Self::Shared(core) => core,
        }
    }

    /// The core, if held exclusively.
    pub(crate) fn exclusive(&mut self) -> Option<&mut Core> {
        match self {
            Self::Exclusive(core) => Some(core),
            Self::Shared(_) => None,
        }
    }

    pub(crate) fn is_shared(&self) -> bool {
        matches!(self, Self::Shared(_))
    }

    pub(crate) fn handle_header(
        &mut self,
        now: Time,
        ni: NiId,
        from: Nid,
        header: &Header,
    ) -> Result<RecvAction, NeedsExclusive> {
        match self {
            Self::Exclusive(core) => Ok(core.engine.handle_header(now, ni, from, header)),
            Self::Shared(core) => {
                core.engine.try_handle_header(now, ni, from, header).ok_or(NeedsExclusive)
            }
        }
    }

    pub(crate) fn complete_recv(
        &mut self,
        now: Time,
        rx: RxId,
        status: HealthStatus,
    ) -> Result<(), NeedsExclusive> {
        match self {
            Self::Exclusive(core) => {
                core.complete_recv(now, rx, status);
                Ok(())
            }
            Self::Shared(core) => core.try_complete_recv(now, rx, status),
        }
    }

    pub(crate) fn rx_write(
        &mut self,
        rx: RxId,
        offset: u32,
        bytes: &[u8],
    ) -> Result<Result<(), DriverError>, NeedsExclusive> {
        match self {
            Self::Exclusive(core) => Ok(core.engine.rx_write(rx, offset, bytes)),
            Self::Shared(core) => core.engine.try_rx_write(rx, offset, bytes).ok_or(NeedsExclusive),
        }
    }

    pub(crate) fn rx_lend(
        &mut self,
        rx: RxId,
    ) -> Result<Result<Option<LentPayload>, DriverError>, NeedsExclusive> {
        match self {
            Self::Exclusive(core) => Ok(core.engine.rx_lend(rx)),
            Self::Shared(core) => core.engine.try_rx_lend(rx).ok_or(NeedsExclusive),
        }
    }

    /// Gives lent memory back; `Err` with the memory, untouched, when declined.
    pub(crate) fn rx_give_back(
        &mut self,
        rx: RxId,
        lent: LentPayload,
    ) -> Result<Result<(), DriverError>, LentPayload> {
        match self {
            Self::Exclusive(core) => Ok(core.engine.rx_give_back(rx, lent)),
            Self::Shared(core) => core.engine.try_rx_give_back(rx, lent),
        }
    }
}

/// The core plus the runtime's bookkeeping about it, behind one read-write lock: what the
/// message path changes with it shared sits behind leaf locks of its own.
pub(crate) struct Core {
    pub(crate) engine: ulnet_proto::engine::Engine,
    /// The LND of each NI, indexed by `NiId`; `None` for loopback (inside the core) and for
    /// removed NIs. Replaced whole when an NI is added or removed (`crate::ni_live`), under
    /// this lock, so the core never produces a transmit for an NI the runtime does not know;
    /// readers that must not hold the lock clone the `Arc`.
    pub(crate) lnds: Lnds,
    /// Receives an LND delayed (`RecvAction::Delay`), with the NI whose LND holds the payload
    /// (a leaf lock).
    pub(crate) delayed: Mutex<HashMap<RxId, NiId>>,
    /// Every event queue an MD of the node named (a leaf lock).
    pub(super) queue_registry: Mutex<QueueRegistry>,
    /// What routes each partition's events to their queues, one per partition (a leaf lock:
    /// one partition's events are routed in order by whoever holds it).
    pub(super) event_routers: Box<[Mutex<EventRouter>]>,
    /// The core timer deadline the I/O thread last armed, in nanoseconds; a call that moves
    /// the core's deadline earlier rings the doorbell.
    pub(crate) armed: AtomicU64,
    /// Callers blocked in `Node::ping` / `Node::discover`, by what they wait for. Dropping a
    /// sender (at shutdown) wakes its caller with an error.
    pub(crate) completions: HashMap<CompletionKey, SyncSender<PingCompletion>>,
    /// NIs being drained before their removal (`crate::ni_live`): marked fatal on purpose,
    /// so the link watcher must not clear the flag when their interface looks fine.
    pub(crate) draining: Vec<NiId>,
    /// API calls fail with `ShutDown`; transmits fail locally.
    pub(crate) closed: bool,
    /// [`finish`](super::shutdown::finish) ran to the end.
    pub(crate) finished: bool,
    /// The engine's `discovery_nids_refused` when a refusal was last logged
    /// (`drain::log_refused_nids`).
    pub(super) refused_nids_logged: u64,
}

impl Core {
    pub(crate) fn new(engine: ulnet_proto::engine::Engine, lnds: Lnds) -> Self {
        let partitions = engine.partitions().count().max(1);
        Self {
            engine,
            lnds,
            delayed: Mutex::default(),
            queue_registry: Mutex::default(),
            event_routers: (0..partitions).map(|_| Mutex::default()).collect(),
            completions: HashMap::default(),
            armed: AtomicU64::new(Time::MAX.as_nanos()),
            draining: Vec::new(),
            closed: false,
            finished: false,
            refused_nids_logged: 0,
        }
    }

    /// Registers `queue` (of this node), which an MD just made names by id, unless it is
    /// known already.
    pub(crate) fn register_queue(&self, queue: &Arc<EqShared>) {
        leaf(&self.queue_registry).register(queue);
    }

    /// The core timer deadline the I/O thread last armed.
    pub(crate) fn armed(&self) -> Time {
        Time::from_nanos(self.armed.load(Ordering::Relaxed))
    }

    pub(crate) fn set_armed(&self, deadline: Time) {
        self.armed.store(deadline.as_nanos(), Ordering::Relaxed);
    }

    /// The LND of NI `ni`, if it has one.
    pub(crate) fn lnd(&self, ni: NiId) -> Option<Arc<dyn Lnd>> {
        self.lnds.get(usize::from(ni.0)).and_then(Option::clone)
    }

    /// Completes a transmit an LND held, exactly once: the core takes a completion only for a
    /// message it handed out and has not seen completed (`Phase::InLnd`), so one already
    /// completed (or failed by shutdown, or by an NI's removal) is ignored.
    pub(crate) fn complete_send(&mut self, now: Time, tx: TxId, status: HealthStatus) {
        match self.engine.handle_send_done(now, tx, status) {
            Ok(()) | Err(DriverError::UnknownTx | DriverError::WrongState) => {}
            Err(error) => tracing::error!(%error, "core refused a send completion"),
        }
    }

    /// Completes a receive an LND filled (or failed).
    pub(crate) fn complete_recv(&mut self, now: Time, rx: RxId, status: HealthStatus) {
        if let Err(error) = self.engine.handle_recv_done(now, rx, status) {
            tracing::error!(%error, "core refused a receive completion");
        }
    }

    /// [`complete_send`](Self::complete_send) with the core shared.
    pub(crate) fn try_complete_send(
        &self,
        now: Time,
        tx: TxId,
        status: HealthStatus,
    ) -> Result<(), NeedsExclusive> {
        match self.engine.try_handle_send_done(now, tx, status).ok_or(NeedsExclusive)? {
            Ok(()) | Err(DriverError::UnknownTx | DriverError::WrongState) => {}
            Err(error) => tracing::error!(%error, "core refused a send completion"),
        }
        Ok(())
    }

    /// [`complete_recv`](Self::complete_recv) with the core shared.
    pub(crate) fn try_complete_recv(
        &self,
        now: Time,
        rx: RxId,
        status: HealthStatus,
    ) -> Result<(), NeedsExclusive> {
        if let Err(error) =
            self.engine.try_handle_recv_done(now, rx, status).ok_or(NeedsExclusive)?
        {
            tracing::error!(%error, "core refused a receive completion");
        }
        Ok(())
    }
}

/// Takes a leaf lock (lock order rule 2), recovering from poisoning as the core lock does.
pub(crate) fn leaf<T>(lock: &Mutex<T>) -> MutexGuard<'_, T> {
    lock.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    pub(crate) fn lock(&self) -> CoreGuard<'_> {
        // The core never panics on any input (its contract); recover rather than cascade if a
        // runtime bug ever poisoned the lock.
        // `try_lock` first: the same one atomic operation when the lock is free, and a count
        // of the times it was not (how much the partitions' threads contend for the core).
        let guard = match self.core.try_write() {
            Ok(core) => core,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => {
                self.counters.core_lock_waits.fetch_add(1, Ordering::Relaxed);
                self.core.write().unwrap_or_else(PoisonError::into_inner)
            }
        };
        CoreGuard::new(guard, &self.counters)
    }

    /// Takes the core shared (the message path of a node of several partitions, counted; a
    /// read of what only changes exclusively).
    pub(crate) fn read(&self) -> CoreRead<'_> {
        if self.partitioned {
            self.counters.core_shared_holds.fetch_add(1, Ordering::Relaxed);
        }
        match self.core.try_read() {
            Ok(core) => core,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => {
                self.counters.core_lock_waits.fetch_add(1, Ordering::Relaxed);
                self.core.read().unwrap_or_else(PoisonError::into_inner)
            }
        }
    }

    /// The I/O runtime of partition `cpt` (partition 0's for a CPT the node does not have),
    /// once the I/O threads run.
    pub(crate) fn runtime(&self, cpt: u32) -> Option<&tokio::runtime::Handle> {
        let runtimes = self.runtimes.get()?;
        runtimes.get(usize::try_from(cpt).unwrap_or(0)).or(runtimes.first())
    }

    /// The LNDs now (a snapshot, for callers that must not hold the core lock).
    pub(crate) fn lnds(&self) -> Lnds {
        Arc::clone(&self.read().lnds)
    }
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shared").field("id", &self.id).finish_non_exhaustive()
    }
}

/// A unique id per node in the process (orders core locks).
pub(crate) fn next_node_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Locks two different nodes' cores in id order (lock order rule 1) and returns them as
/// (first, second) in the order asked.
pub(crate) fn lock_pair<'a>(
    first: &'a Shared,
    second: &'a Shared,
) -> (CoreGuard<'a>, CoreGuard<'a>) {
    if first.id < second.id {
        let a = first.lock();
        let b = second.lock();
        (a, b)
    } else {
        let b = second.lock();
        let a = first.lock();
        (a, b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_of_the_core_lock_are_sampled_and_timed() {
        let node = crate::Node::loopback().unwrap();
        let shared = node.shared();
        let before = shared.counters.core_lock_holds.load(Ordering::Relaxed);
        let held = Duration::from_micros(200);
        for _ in 0..2 * HOLD_SAMPLE {
            let _core = shared.lock();
            let taken = Instant::now();
            while taken.elapsed() < held {
                std::hint::spin_loop();
            }
        }
        let holds = shared.counters.core_lock_holds.load(Ordering::Relaxed) - before;
        // Two sampled holds at least (the node's own calls on this thread may have advanced
        // the thread's count), each counted for the HOLD_SAMPLE holds it stands for.
        assert!(holds >= 2 * u64::from(HOLD_SAMPLE), "{holds}");
        assert_eq!(holds % u64::from(HOLD_SAMPLE), 0);
        let held_ns = shared.counters.core_lock_held_ns.load(Ordering::Relaxed);
        // Ours hold it 200 us each; a sampled short hold of the node's own would pull the mean
        // down by a third at most.
        let per_hold = Duration::from_nanos(held_ns / holds);
        assert!(per_hold >= held / 2, "{per_hold:?}");
    }

    #[test]
    fn the_queue_registry_forgets_dropped_queues() {
        use crate::{MdSpec, Memory, UnlinkMode};
        let node = crate::Node::loopback().unwrap();
        let kept = node.event_queue(4);
        for round in 0..200u8 {
            // A queue per MD, dropped after its MD, as every blocking transfer makes.
            let queue = node.event_queue(1);
            let spec = MdSpec::new(Memory::new(vec![round]));
            let md = node.md_bind(spec, UnlinkMode::Retain, Some(&queue)).unwrap();
            node.md_unlink(md).unwrap();
        }
        node.md_bind(MdSpec::new(Memory::new(vec![0])), UnlinkMode::Retain, Some(&kept)).unwrap();
        let core = node.shared().lock();
        let registry = leaf(&core.queue_registry);
        assert!(registry.len() <= 2 * super::super::event_route::MIN_QUEUE_REGISTRY_SWEEP);
        assert!(registry.contains(kept.shared.id));
    }
}
