//! The I/O shell: the state a node shares between API callers and its I/O thread, the routine
//! that carries out the core's outputs, the I/O thread's loop, and the shutdown order.
//!
//! # Who runs what
//!
//! * The core ([`ulnet_proto::engine::Engine`]) sits in [`Core`] behind one mutex. An API call
//!   (put, get, attach, unlink) locks it on the caller's thread, makes the call with `now`, and
//!   then, still holding the lock, carries out everything the core produced ([`drain`]): events
//!   go to their [`EventQueue`](crate::EventQueue)s, transmits to the LND of their NI, delayed
//!   receives that may proceed to the LND that holds them. Loopback completes inside the core, so
//!   a `0@lo` operation never leaves the caller's thread.
//! * Wake-ups (of the I/O threads, of event consumers) are collected in [`Wakes`] and issued
//!   after the lock is released, so nobody is woken only to block on the lock we hold.
//! * The I/O thread runs a tokio current-thread runtime. Its loop ([`run`]) fires the core's
//!   timer ([`poll_timeout`](ulnet_proto::engine::Engine::poll_timeout) /
//!   [`handle_timeout`](ulnet_proto::engine::Engine::handle_timeout)) and polls the LNDs that
//!   want polling (the in-process fabric delivers frames there); LNDs with tasks of their own
//!   (TCP) spawn them on the same runtime from [`Lnd::start`].
//!
//! # The wake-up trade-off
//!
//! Handing work to a sleeping thread on another CPU costs about 30 us on small virtual machines
//! (BENCHMARKS.md, "Peer tools"), more than the whole core spends on a message. So API calls work
//! on the caller's thread, the I/O thread is woken only when an LND needs it (a transmit for a
//! network NI, a delayed receive that may resume, a timer that moved earlier). A waiting thread
//! may spin for a bounded time before it parks ([`NodeBuilder::spin`](crate::NodeBuilder::spin));
//! off by default, because on a 2-vCPU machine with more runnable threads than CPUs a spinner
//! holds the CPU the next hop needs (figures at [`DEFAULT_SPIN`](crate::DEFAULT_SPIN)).
//! [`Doorbell`] makes ringing an awake thread cost two atomic operations; only a parked thread
//! costs a system call.
//!
//! # Batching output on callers' threads
//!
//! Every system call that writes one small message costs more than the core spends on it, so
//! LNDs queue what a drain produces and write it once the drain is done ([`Lnd::flush`]): one
//! vectored write per socket for all the ACKs an I/O turn produced, for instance. On an API
//! caller's thread a drain usually produces one message, so [`Batch`] goes further: the first
//! call after a thread waited writes at once (a lone request keeps its latency), and calls that
//! follow it within [`HOLD_WINDOW`], with nobody waiting in between, are a stream: the LND holds
//! their output back. A thread about to wait for anything of the node ([`before_wait`]: an event
//! queue found empty, a ping or discovery) writes what is held first, so a caller never waits
//! for its own held output; the I/O thread writes it after [`MAX_HOLD`] at the latest, for a
//! caller that never waits.
//!
//! An event queue's handler is a stream from its first call ([`HandlerStream`]): whatever its
//! calls produce, call by call, is written when it returns, one write per socket, and its own
//! polls of the queue do not end the stream. Its first call is no lone request: the handler
//! answers a burst of events, and writing the first answer alone split the burst in two on the
//! wire (lnet_selftest's client wrote one new RPC, then the rest). An LND may still write part
//! of a drain's output early: the TCP LND writes a burst's first half as soon as it is queued
//! (`lnd::tcp::table::early_write_due`).
//!
//! # Locks, in the only order they are taken
//!
//! 1. Core mutexes. When two nodes are involved (the in-process fabric copying a payload from the
//!    sender's MD into the receiver's), they are locked in order of node id ([`lock_pair`]).
//! 2. Leaf locks, taken briefly while a core may be held and never held while taking a core:
//!    an LND's inbox, the fabric's link model, an event queue, the list of event queues.
//!
//! # Shutdown order ([`finish`])
//!
//! Mark the core closed (API calls now fail with `ShutDown`) -> clear every lazy portal (delayed
//! PUTs are dropped) -> fail every transmit still held by an LND with `LocalError` (no resend),
//! and any transmit the core produces from then on -> unlink every MD that has an event queue,
//! so its final event hands the memory back -> deliver those events -> shut the LNDs down (the
//! fabric fails frames still addressed to us back to their senders) -> close the event queues.

use foldhash::HashMap;
use std::any::Any;
use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, Weak};
use std::time::Duration;

use ulnet_proto::engine::portal::MAX_PORTALS;
use ulnet_proto::engine::{
    Event, HealthStatus, MdHandle, NiId, PingCompletion, RecvAction, RxId, TxId,
};
use ulnet_proto::time::Time;

use crate::clock;
use crate::event_queue::EqShared;
use crate::lnd::{Lnd, Output};

/// What a node shares between its handles, its I/O thread and other nodes' fabric LNDs.
pub(crate) struct Shared {
    /// Unique in the process; orders core locks.
    pub(crate) id: u64,
    pub(crate) core: Mutex<Core>,
    pub(crate) doorbell: Doorbell,
    /// Set by `Node::shutdown`: the I/O thread leaves its loop and runs [`finish`].
    pub(crate) closing: AtomicBool,
    /// Every event queue created for this node, closed at shutdown.
    pub(crate) queues: Mutex<Vec<Weak<EqShared>>>,
    pub(crate) counters: Counters,
    /// How long a waiting thread spins before it parks.
    pub(crate) spin: Duration,
    /// Output held back on callers' threads (see "Batching" above).
    pub(crate) batch: Batch,
    /// The I/O thread's runtime, once it runs: an NI added live starts its LND tasks there.
    pub(crate) runtime: OnceLock<tokio::runtime::Handle>,
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
}

/// The core plus the runtime's bookkeeping about it, all behind one mutex.
pub(crate) struct Core {
    pub(crate) engine: ulnet_proto::engine::Engine,
    /// The LND of each NI, indexed by `NiId`; `None` for loopback (inside the core) and for
    /// removed NIs. Replaced whole when an NI is added or removed (`crate::ni_live`), under
    /// this lock, so the core never produces a transmit for an NI the runtime does not know;
    /// readers that must not hold the lock clone the `Arc`.
    pub(crate) lnds: Lnds,
    /// Transmits handed to an LND and not yet completed, with their NI. Completing through
    /// [`Core::complete_send`] removes them, so a transmit is never completed twice and
    /// shutdown knows what to fail.
    pub(crate) in_flight: HashMap<TxId, NiId>,
    /// State an LND keeps with the core, by NI (see [`Core::take_lnd_state`]): guarded by the
    /// core lock alone, so using it costs no lock (no atomics) of its own.
    lnd_state: Vec<Option<Box<dyn Any + Send>>>,
    /// Receives an LND delayed (`RecvAction::Delay`), with the NI whose LND holds the payload.
    pub(crate) delayed: HashMap<RxId, NiId>,
    /// The event queue of every MD created with one, by handle cookie: the queue's id, a
    /// plain number, so that making and ending an MD costs no reference-count atomics.
    pub(crate) routes: HashMap<u64, u64>,
    /// Every event queue an MD of the node named, by id, weak (the application owns its
    /// queues); dead ones are swept when it has doubled since the last sweep.
    queue_registry: HashMap<u64, Weak<EqShared>>,
    queue_registry_sweep_at: usize,
    /// The core timer deadline the I/O thread last armed; an API call that moves the core's
    /// deadline earlier rings the doorbell.
    pub(crate) armed: Time,
    /// Callers blocked in `Node::ping` / `Node::discover`, by what they wait for. Dropping a
    /// sender (at shutdown) wakes its caller with an error.
    pub(crate) completions: HashMap<CompletionKey, SyncSender<PingCompletion>>,
    /// Buffers [`route_events`] keeps for their allocations.
    event_scratch: VecDeque<Event>,
    event_targets: Vec<Option<usize>>,
    /// The queues events went to lately, kept across calls so that routing a batch costs no
    /// `Weak::upgrade` and drop (atomic read-modify-writes) per queue; one nobody else holds
    /// any more is let go at the next batch.
    event_queues: Vec<Arc<EqShared>>,
    event_run: VecDeque<Event>,
    /// NIs being drained before their removal (`crate::ni_live`): marked fatal on purpose,
    /// so the link watcher must not clear the flag when their interface looks fine.
    pub(crate) draining: Vec<NiId>,
    /// API calls fail with `ShutDown`; transmits fail locally.
    pub(crate) closed: bool,
    /// [`finish`] ran to the end.
    pub(crate) finished: bool,
}

impl Core {
    pub(crate) fn new(engine: ulnet_proto::engine::Engine, lnds: Lnds) -> Self {
        Self {
            engine,
            lnds,
            in_flight: HashMap::default(),
            delayed: HashMap::default(),
            routes: HashMap::default(),
            lnd_state: Vec::new(),
            queue_registry: HashMap::default(),
            queue_registry_sweep_at: MIN_QUEUE_REGISTRY_SWEEP,
            completions: HashMap::default(),
            armed: Time::MAX,
            event_scratch: VecDeque::new(),
            event_targets: Vec::new(),
            event_queues: Vec::new(),
            event_run: VecDeque::new(),
            draining: Vec::new(),
            closed: false,
            finished: false,
        }
    }

    /// Takes the state the LND of `ni` keeps with the core (a fresh one the first time), for
    /// the length of one call: out of the core, it can be borrowed next to the core. The LND
    /// puts it back with [`put_lnd_state`](Self::put_lnd_state) before the lock is released.
    pub(crate) fn take_lnd_state<T: Any + Send + Default>(&mut self, ni: NiId) -> Box<T> {
        let slot = self.lnd_state.get_mut(usize::from(ni.0)).and_then(Option::take);
        slot.and_then(|state| state.downcast::<T>().ok()).unwrap_or_default()
    }

    /// Puts back what [`take_lnd_state`](Self::take_lnd_state) took.
    pub(crate) fn put_lnd_state<T: Any + Send>(&mut self, ni: NiId, state: Box<T>) {
        let index = usize::from(ni.0);
        if self.lnd_state.len() <= index {
            self.lnd_state.resize_with(index + 1, || None);
        }
        self.lnd_state[index] = Some(state);
    }

    /// Sends the events of `md` to `queue` (a queue of this node).
    pub(crate) fn route(&mut self, md: MdHandle, queue: &Arc<EqShared>) {
        self.routes.insert(md.0, queue.id);
        if self.queue_registry.contains_key(&queue.id) {
            return;
        }
        if self.queue_registry.len() >= self.queue_registry_sweep_at {
            self.queue_registry.retain(|_, queue| queue.strong_count() > 0);
            self.queue_registry_sweep_at =
                (self.queue_registry.len() * 2).max(MIN_QUEUE_REGISTRY_SWEEP);
        }
        self.queue_registry.insert(queue.id, Arc::downgrade(queue));
    }

    /// The LND of NI `ni`, if it has one.
    pub(crate) fn lnd(&self, ni: NiId) -> Option<Arc<dyn Lnd>> {
        self.lnds.get(usize::from(ni.0)).and_then(Option::clone)
    }

    /// Completes a transmit an LND held, exactly once: a transmit already completed (or failed
    /// by shutdown) is ignored. Returns whether it was still held.
    pub(crate) fn complete_send(&mut self, now: Time, tx: TxId, status: HealthStatus) -> bool {
        if self.in_flight.remove(&tx).is_none() {
            return false;
        }
        if let Err(error) = self.engine.handle_send_done(now, tx, status) {
            tracing::error!(%error, "core refused a send completion");
        }
        true
    }

    /// Completes a receive an LND filled (or failed).
    pub(crate) fn complete_recv(&mut self, now: Time, rx: RxId, status: HealthStatus) {
        if let Err(error) = self.engine.handle_recv_done(now, rx, status) {
            tracing::error!(%error, "core refused a receive completion");
        }
    }
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, Core> {
        // The core never panics on any input (its contract); recover rather than cascade if a
        // runtime bug ever poisoned the lock.
        self.core.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The LNDs now (a snapshot, for callers that must not hold the core lock).
    pub(crate) fn lnds(&self) -> Lnds {
        Arc::clone(&self.lock().lnds)
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

// ------------------------------------------------------------------------------- wake-ups

/// Wake-ups owed once the core lock is released.
#[derive(Default)]
pub(crate) struct Wakes {
    doorbells: ArcSet<Shared>,
    queues: ArcSet<EqShared>,
    /// Completions for blocked callers: sent after the unlock, else the woken caller's next
    /// call would find the core still locked and sleep again.
    completions: Vec<(SyncSender<PingCompletion>, PingCompletion)>,
}

impl Wakes {
    /// Wake `node`'s I/O thread.
    pub(crate) fn ring(&mut self, node: &Arc<Shared>) {
        if !self.doorbells.contains(node) {
            self.doorbells.insert(Arc::clone(node));
        }
    }

    fn queue(&mut self, queue: Arc<EqShared>) {
        if !self.queues.contains(&queue) {
            self.queues.insert(queue);
        }
    }

    /// Hand `completion` to the caller blocked on `waiter`.
    fn complete(&mut self, waiter: SyncSender<PingCompletion>, completion: PingCompletion) {
        self.completions.push((waiter, completion));
    }

    /// Issues the wake-ups. Call with no core lock held.
    pub(crate) fn finish(self) {
        for node in self.doorbells.into_items() {
            node.doorbell.ring(&node.counters);
        }
        for queue in self.queues.into_items() {
            queue.wake();
        }
        for (waiter, completion) in self.completions {
            // Capacity 1 and one completion per key: this never blocks. A caller that gave
            // up has dropped its receiver; nothing is lost then.
            let _ = waiter.try_send(completion);
        }
    }
}

/// Bell checks between two yields to the I/O runtime while spinning.
const SPINS_PER_YIELD: u32 = 64;

/// A cheap wake-up for the I/O thread: ringing an awake (or spinning) thread is two atomic
/// operations; only a parked one gets a `Notify` (and so a system call to unpark it).
#[derive(Debug, Default)]
pub(crate) struct Doorbell {
    rung: AtomicBool,
    parked: AtomicBool,
    notify: tokio::sync::Notify,
}

impl Doorbell {
    pub(crate) fn ring(&self, counters: &Counters) {
        // SeqCst pairs with `wait`: either the waiter sees `rung`, or we see `parked` and
        // notify (a notification sent before the waiter awaits is kept as a permit).
        self.rung.store(true, Ordering::SeqCst);
        if self.parked.load(Ordering::SeqCst) {
            counters.io_wakeups.fetch_add(1, Ordering::Relaxed);
            self.notify.notify_one();
        }
    }

    /// Waits until rung or until `deadline`: spins (yielding to other tasks) for up to `spin`,
    /// then parks.
    async fn wait(&self, deadline: Time, spin: Duration) {
        let now = clock::now();
        if now >= deadline {
            // Already due: still let the runtime poll its I/O driver and run the socket tasks
            // once, so a deadline that stays due cannot starve every connection and the
            // acceptor (the loop would otherwise never await).
            tokio::task::yield_now().await;
            return;
        }
        let spin_until = now.saturating_add(spin).min(deadline);
        loop {
            // Check the bell often and the clock (and other tasks) less often: yielding to
            // tokio polls its I/O driver, a system call.
            for _ in 0..SPINS_PER_YIELD {
                if self.rung.swap(false, Ordering::AcqRel) {
                    return;
                }
                std::hint::spin_loop();
            }
            let now = clock::now();
            if now >= deadline {
                return;
            }
            if now >= spin_until {
                break;
            }
            tokio::task::yield_now().await;
        }
        self.parked.store(true, Ordering::SeqCst);
        if !self.rung.swap(false, Ordering::SeqCst) {
            let notified = self.notify.notified();
            if deadline == Time::MAX {
                notified.await;
            } else {
                let at = tokio::time::Instant::from_std(clock::instant(deadline));
                let _ = tokio::time::timeout_at(at, notified).await;
            }
            self.rung.store(false, Ordering::SeqCst);
        }
        self.parked.store(false, Ordering::SeqCst);
    }
}

/// Distinct `Arc`s (by pointer), in insertion order. The first is kept inline: a turn nearly
/// always wakes one node or one queue, and a `Vec` would allocate for it on every turn.
struct ArcSet<T> {
    first: Option<Arc<T>>,
    rest: Vec<Arc<T>>,
}

impl<T> Default for ArcSet<T> {
    fn default() -> Self {
        Self { first: None, rest: Vec::new() }
    }
}

impl<T> ArcSet<T> {
    fn contains(&self, item: &Arc<T>) -> bool {
        self.first.iter().chain(&self.rest).any(|known| Arc::ptr_eq(known, item))
    }

    /// Adds `item` at the end (the caller checked it is not there yet).
    fn insert(&mut self, item: Arc<T>) {
        if self.first.is_none() {
            self.first = Some(item);
        } else {
            self.rest.push(item);
        }
    }

    fn into_items(self) -> impl Iterator<Item = Arc<T>> {
        self.first.into_iter().chain(self.rest)
    }
}

// ------------------------------------------------------------------------------- batching

/// After an API call wrote output at once, how long further API output counts as a stream and
/// may be held back. Longer than the gap between back-to-back calls (about a microsecond),
/// short enough that occasional sends from a thread that never waits are written at once.
pub(crate) const HOLD_WINDOW: Duration = Duration::from_micros(200);

/// Longest time output stays held when no thread waits: the I/O thread writes it then. The
/// I/O thread's timers have a resolution of one millisecond.
pub(crate) const MAX_HOLD: Duration = Duration::from_millis(1);

/// Whether output produced on API callers' threads is held back (see "Batching" above).
/// Atomics rather than core state so that a waiting thread can end a stream without the lock.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    /// When an API call last wrote output at once (nanoseconds of [`Time`]); 0 once a thread
    /// waited since.
    written_at: AtomicU64,
    /// Since when an LND holds output back (nanoseconds of [`Time`]); 0: nothing held.
    held_since: AtomicU64,
    /// When the I/O thread next looks at held output (nanoseconds of [`Time`]); 0: not armed.
    /// It stays armed while streams keep holding output, so only arming rings the I/O thread.
    check_at: AtomicU64,
    /// Event handlers running ([`HandlerStream`]): each writes what is held when it returns,
    /// so holding output meanwhile needs no check by the I/O thread (nor the wake-up).
    handlers: AtomicUsize,
}

impl Batch {
    /// Whether output produced now by an API call may be held back.
    fn streaming(&self, now: Time) -> bool {
        let written_at = self.written_at.load(Ordering::Relaxed);
        written_at != 0 && now < Time::from_nanos(written_at).saturating_add(HOLD_WINDOW)
    }

    /// An LND held output back at `now`: make sure the I/O thread writes it in time.
    fn hold(&self, shared: &Arc<Shared>, now: Time, wakes: &mut Wakes) {
        let since = now.as_nanos().max(1);
        // SeqCst with `check`: either it sees this hold, or we see it disarmed and re-arm.
        let _ = self.held_since.compare_exchange(0, since, Ordering::SeqCst, Ordering::Relaxed);
        if self.handlers.load(Ordering::SeqCst) > 0 {
            return;
        }
        let due = now.saturating_add(MAX_HOLD).as_nanos();
        if self.check_at.compare_exchange(0, due, Ordering::SeqCst, Ordering::Relaxed).is_ok() {
            // The I/O thread may sleep past `due`: have it look at the new deadline.
            wakes.ring(shared);
        }
    }

    /// Ends the stream; returns whether output was held.
    fn release(&self) -> bool {
        self.written_at.store(0, Ordering::Relaxed);
        self.held_since.swap(0, Ordering::SeqCst) != 0
    }

    /// On the I/O thread: writes output held for MAX_HOLD, and returns when to look again.
    fn check(&self, shared: &Arc<Shared>, now: Time) -> Option<Time> {
        let due = self.check_at.load(Ordering::SeqCst);
        if due == 0 || now < Time::from_nanos(due) {
            return (due != 0).then(|| Time::from_nanos(due));
        }
        self.check_at.store(0, Ordering::SeqCst);
        let since = self.held_since.load(Ordering::SeqCst);
        if since == 0 {
            // Every waiter wrote what was held; the next hold arms again.
            return None;
        }
        let due = Time::from_nanos(since).saturating_add(MAX_HOLD);
        if now >= due {
            // Nobody waited within MAX_HOLD: write it here.
            if self.held_since.swap(0, Ordering::SeqCst) != 0 {
                write_held(shared);
            }
            return None;
        }
        // Held more recently: look again when that is due (unless a hold armed meanwhile).
        match self.check_at.compare_exchange(0, due.as_nanos(), Ordering::SeqCst, Ordering::SeqCst)
        {
            Ok(_) => Some(due),
            Err(armed) => Some(Time::from_nanos(armed)),
        }
    }
}

/// A thread is about to wait for something of the node: end the stream, so the next API call
/// writes at once, and write the output held back, which may be what it waits for. Takes the
/// core lock only if something is held. Call with no core lock held.
pub(crate) fn before_wait(shared: &Arc<Shared>) {
    if shared.batch.release() {
        write_held(shared);
    }
}

/// An event handler runs on this thread while this lives: what its calls write is held back,
/// however they follow one another, and written when it is dropped (also on a panic, so the
/// count of running handlers stays right).
pub(crate) struct HandlerStream(Arc<Shared>);

impl HandlerStream {
    pub(crate) fn begin(shared: Arc<Shared>) -> Self {
        shared.batch.handlers.fetch_add(1, Ordering::SeqCst);
        shared.batch.written_at.store(clock::now().as_nanos().max(1), Ordering::Relaxed);
        Self(shared)
    }
}

impl Drop for HandlerStream {
    /// Writes what the handler's calls held back. Output held after the count drops arms the
    /// I/O thread's check as usual.
    fn drop(&mut self) {
        self.0.batch.handlers.fetch_sub(1, Ordering::SeqCst);
        before_wait(&self.0);
    }
}

/// Writes whatever the LNDs hold back.
fn write_held(shared: &Arc<Shared>) {
    let mut wakes = Wakes::default();
    {
        let mut core = shared.lock();
        let now = clock::now();
        drain(shared, &mut core, now, &mut wakes);
    }
    wakes.finish();
}

// ------------------------------------------------------------------------------- draining

/// Carries out everything the core produced, until it produces nothing more, and writes all
/// the output. Runs with the core locked, on whichever thread made the core call.
pub(crate) fn drain(shared: &Arc<Shared>, core: &mut Core, now: Time, wakes: &mut Wakes) {
    drain_and_flush(shared, core, now, wakes, false);
}

/// [`drain`] for an API call: output that continues a stream may be held back (see
/// "Batching" above).
pub(crate) fn drain_call(shared: &Arc<Shared>, core: &mut Core, now: Time, wakes: &mut Wakes) {
    drain_and_flush(shared, core, now, wakes, true);
}

fn drain_and_flush(
    shared: &Arc<Shared>,
    core: &mut Core,
    now: Time,
    wakes: &mut Wakes,
    api_call: bool,
) {
    // One handle on the LNDs for the whole drain: they change only under this lock, and not
    // from inside an LND call (`crate::ni_live`), so a clone per step would only cost atomics.
    let lnds = Arc::clone(&core.lnds);
    loop {
        carry_out(shared, core, &lnds, now, wakes);
        // Writing completes sends, which may free credits for more transmits: carry out again.
        if !flush(shared, core, &lnds, now, wakes, api_call) {
            break;
        }
    }
    // The I/O thread sleeps until `armed`; a core deadline earlier than that needs it awake.
    if core.engine.poll_timeout().is_some_and(|deadline| deadline < core.armed) {
        core.armed = Time::ZERO;
        wakes.ring(shared);
    }
}

/// Has every LND write (or hold back) its queued output. Returns whether anything was written.
fn flush(
    shared: &Arc<Shared>,
    core: &mut Core,
    lnds: &Lnds,
    now: Time,
    wakes: &mut Wakes,
    api_call: bool,
) -> bool {
    let hold = api_call && shared.batch.streaming(now);
    let mut written = false;
    for lnd in lnds.iter().flatten() {
        match lnd.flush(shared, core, now, wakes, hold) {
            Output::Written => written = true,
            Output::Held => shared.batch.hold(shared, now, wakes),
            Output::None => {}
        }
    }
    if written && api_call {
        shared.batch.written_at.store(now.as_nanos().max(1), Ordering::Relaxed);
    }
    written
}

/// Carries out what the core produced until it produces nothing more.
fn carry_out(shared: &Arc<Shared>, core: &mut Core, lnds: &Lnds, now: Time, wakes: &mut Wakes) {
    loop {
        let mut progressed = false;
        // Resets first: a probe of a path just given up on is queued after them.
        while let Some(reset) = core.engine.poll_path_reset() {
            progressed = true;
            if let Some(lnd) = lnd_of(lnds, reset.ni).filter(|_| !core.closed) {
                lnd.reset(shared, core, now, reset.peer, wakes);
            }
        }
        let mut next = core.engine.poll_transmit();
        while let Some(transmit) = next.take() {
            progressed = true;
            let lnd = if core.closed { None } else { lnd_of(lnds, transmit.ni) };
            match lnd {
                Some(lnd) => {
                    core.in_flight.insert(transmit.tx, transmit.ni);
                    lnd.transmit(shared, core, now, transmit, wakes);
                }
                None => {
                    // Closing (or, a bug, an NI without an LND): the transmit fails here. Not a
                    // resendable status, so this cannot loop.
                    shared.counters.transmits_failed_locally.fetch_add(1, Ordering::Relaxed);
                    if let Err(error) =
                        core.engine.handle_send_done(now, transmit.tx, HealthStatus::LocalError)
                    {
                        tracing::error!(%error, "core refused a local send failure");
                    }
                }
            }
            next = core.engine.poll_transmit();
        }
        while let Some(resume) = core.engine.poll_resume() {
            progressed = true;
            let holder = core.delayed.remove(&resume.rx);
            let lnd = if core.closed { None } else { holder.and_then(|ni| lnd_of(lnds, ni)) };
            match lnd {
                Some(lnd) => lnd.resume(shared, core, now, resume, wakes),
                None => {
                    // Nobody will read the payload any more: fail the receive.
                    if let RecvAction::Deliver { rx, .. } = resume.action {
                        core.complete_recv(now, rx, HealthStatus::LocalError);
                    }
                }
            }
        }
        progressed |= route_events(shared, core, wakes);
        while let Some(completion) = core.engine.poll_completion() {
            progressed = true;
            let key = match &completion {
                PingCompletion::Ping(result) => CompletionKey::Ping(result.id.0),
                PingCompletion::Discovery(result) => CompletionKey::Discovery(result.id.0),
                // A kind this runtime does not wait for yet has no caller to wake.
                _ => continue,
            };
            if let Some(waiter) = core.completions.remove(&key) {
                wakes.complete(waiter, completion);
            }
        }
        if !progressed {
            break;
        }
    }
}

/// The LND of NI `ni` in `lnds`, borrowed.
fn lnd_of(lnds: &Lnds, ni: NiId) -> Option<&Arc<dyn Lnd>> {
    lnds.get(usize::from(ni.0)).and_then(Option::as_ref)
}

/// Hands the core's events to the queues their MDs name. When they all go to one queue (the
/// usual case: one consumer per node), the whole batch moves in at once under one lock of the
/// queue, traded or appended rather than moved event by event; otherwise each run of events
/// for one queue goes in under one lock. Returns whether there were events.
fn route_events(shared: &Arc<Shared>, core: &mut Core, wakes: &mut Wakes) -> bool {
    let mut events = std::mem::take(&mut core.event_scratch);
    if !core.engine.take_events(&mut events) {
        core.event_scratch = events;
        return false;
    }
    // Where each event goes, as an index into `queues` (None: nowhere). A cached queue whose
    // last handle was dropped is dead, as a failed upgrade would find it; a long list is
    // rebuilt rather than searched.
    let mut queues = std::mem::take(&mut core.event_queues);
    if queues.len() > MAX_CACHED_QUEUES {
        queues.clear();
    }
    queues.retain(|queue| Arc::strong_count(queue) > 1);
    let mut targets = std::mem::take(&mut core.event_targets);
    for event in &events {
        let removed;
        let route = if event.unlinked {
            removed = core.routes.remove(&event.md.0);
            removed.as_ref()
        } else {
            core.routes.get(&event.md.0)
        };
        let target = route.and_then(|&id| match queues.iter().position(|queue| queue.id == id) {
            Some(index) => Some(index),
            None => {
                let queue = core.queue_registry.get(&id).and_then(Weak::upgrade);
                if queue.is_none() {
                    core.queue_registry.remove(&id);
                }
                queue.map(|queue| {
                    queues.push(queue);
                    queues.len() - 1
                })
            }
        });
        targets.push(target);
    }
    let unrouted = targets.iter().filter(|target| target.is_none()).count();
    let first = targets.first().copied().flatten();
    let single = first.filter(|_| unrouted == 0 && targets.iter().all(|target| *target == first));
    if let Some(queue) = single.map(|index| &queues[index]) {
        if queue.push_all(&mut events) {
            wakes.queue(Arc::clone(queue));
        }
    } else {
        let mut run = std::mem::take(&mut core.event_run);
        let mut current = None;
        for (event, target) in events.drain(..).zip(targets.iter().copied()) {
            let Some(target) = target else { continue };
            if current != Some(target) {
                if let Some(previous) = current {
                    push_run(&queues[previous], &mut run, wakes);
                }
                current = Some(target);
            }
            run.push_back(event);
        }
        if let Some(last) = current {
            push_run(&queues[last], &mut run, wakes);
        }
        core.event_run = run;
    }
    if unrouted > 0 {
        shared.counters.events_unrouted.fetch_add(unrouted as u64, Ordering::Relaxed);
    }
    events.clear();
    targets.clear();
    core.event_scratch = events;
    core.event_targets = targets;
    core.event_queues = queues;
    true
}

/// The smallest size of [`Core::queue_registry`] that is swept for dead queues.
const MIN_QUEUE_REGISTRY_SWEEP: usize = 16;

/// How many event queues [`route_events`] keeps between batches (a node has one consumer
/// in the usual case, a few with services such as the selftest one).
const MAX_CACHED_QUEUES: usize = 8;

fn push_run(queue: &Arc<EqShared>, run: &mut VecDeque<Event>, wakes: &mut Wakes) {
    // `push_all` leaves `run` empty whatever it does.
    if queue.push_all(run) {
        wakes.queue(Arc::clone(queue));
    }
}

/// Locks two different nodes' cores in id order (lock order rule 1) and returns them as
/// (first, second) in the order asked.
pub(crate) fn lock_pair<'a>(
    first: &'a Shared,
    second: &'a Shared,
) -> (MutexGuard<'a, Core>, MutexGuard<'a, Core>) {
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

// ------------------------------------------------------------------------------- I/O thread

/// The I/O thread's loop: core timer, LND polling, then sleep until the next deadline or a
/// doorbell. Returns when the node is closing.
pub(crate) async fn run(shared: &Arc<Shared>) {
    loop {
        if shared.closing.load(Ordering::Acquire) {
            return;
        }
        let now = clock::now();
        let held_check = shared.batch.check(shared, now);
        let mut wakes = Wakes::default();
        let (mut next, lnds) = {
            let mut core = shared.lock();
            if core.engine.poll_timeout().is_some_and(|deadline| deadline <= now) {
                core.engine.handle_timeout(now);
                drain(shared, &mut core, now, &mut wakes);
            }
            core.armed = core.engine.poll_timeout().unwrap_or(Time::MAX);
            (core.armed, Arc::clone(&core.lnds))
        };
        wakes.finish();
        for lnd in lnds.iter().flatten() {
            if let Some(deadline) = lnd.poll(shared, now) {
                next = next.min(deadline);
            }
        }
        if let Some(due) = held_check {
            next = next.min(due);
        }
        shared.doorbell.wait(next, shared.spin).await;
    }
}

/// Shuts the node down in the order the module documentation gives. Idempotent; runs on the
/// I/O thread as it exits, or on the caller's thread if the I/O thread is gone.
pub(crate) fn finish(shared: &Arc<Shared>) {
    let now = clock::now();
    let lnds = {
        let mut core = shared.lock();
        if core.closed {
            return;
        }
        core.closed = true;
        // Wake every caller blocked on a ping or discovery: they get `ShutDown`.
        core.completions.clear();
        Arc::clone(&core.lnds)
    };
    // LNDs first: they stop taking frames, fail the receives they were about to fill and hand
    // what they hold back to its senders. Our own transmits they held stay in `in_flight`.
    for lnd in lnds.iter().flatten() {
        lnd.shutdown(shared, now);
    }
    let mut wakes = Wakes::default();
    {
        let mut core = shared.lock();
        for portal in 0..MAX_PORTALS {
            // Every index is in range, so this cannot fail.
            let _ = core.engine.clear_lazy_portal(now, portal);
        }
        drain(shared, &mut core, now, &mut wakes);
        // Failing a transmit can release credits and start queued ones; closed-mode draining
        // fails those at once, so one pass leaves nothing held.
        let held: Vec<TxId> = core.in_flight.keys().copied().collect();
        for tx in held {
            core.complete_send(now, tx, HealthStatus::LocalError);
            drain(shared, &mut core, now, &mut wakes);
        }
        let mds: Vec<u64> = core.routes.keys().copied().collect();
        for md in mds {
            // An MD may already have gone with an earlier one's messages; that is fine.
            let _ = core.engine.md_unlink(now, MdHandle(md));
            drain(shared, &mut core, now, &mut wakes);
        }
        let left = core.engine.message_count();
        if left != 0 {
            tracing::warn!(left, "messages still alive after shutdown");
        }
        core.finished = true;
    }
    wakes.finish();
    let queues = std::mem::take(&mut *shared.queues.lock().unwrap_or_else(PoisonError::into_inner));
    for queue in queues.iter().filter_map(Weak::upgrade) {
        queue.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arc_set_keeps_distinct_items_in_insertion_order() {
        let (a, b, c) = (Arc::new(1), Arc::new(2), Arc::new(3));
        let mut set = ArcSet::default();
        for item in [&a, &b, &a, &c, &b] {
            if !set.contains(item) {
                set.insert(Arc::clone(item));
            }
        }
        // Equal values in distinct allocations are distinct members.
        let twin = Arc::new(1);
        assert!(!set.contains(&twin));
        let items: Vec<i32> = set.into_items().map(|item| *item).collect();
        assert_eq!(items, [1, 2, 3]);
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
        assert!(core.queue_registry.len() <= 2 * MIN_QUEUE_REGISTRY_SWEEP);
        assert!(core.queue_registry.contains_key(&kept.shared.id));
    }
}
