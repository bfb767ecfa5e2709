//! The selftest RPC layer (lnet_selftest's `srpc`): client RPCs with an optional passive bulk,
//! server services that receive requests on lazy portals, do the bulk themselves and reply,
//! the match-bit generator, and the `srpc_counters`.
//!
//! Everything runs over the public [`ulnet::Node`] API, so it works on any LND. One
//! [`Endpoint`] owns one event queue and one dispatcher thread; all its MDs report to that
//! queue, and an MD's `user_ptr` names what the event is about. Events are handled where they
//! are produced, as the kernel's `srpc_lnet_ev_handler()` is: the queue's handler locks the
//! endpoint's state (the RPC machinery plus the application on top: the selftest service or
//! the console) on the node's I/O thread, folds the events in and calls the application back,
//! so a request is answered without waking another thread. When the state is busy the events
//! stay queued for the dispatcher thread, which also runs the timers. Callers from other
//! threads (the console's commands) lock the same state and wait on a condition variable.
//!
//! The node calls of one fold (client RPCs started, replies, bulk transfers, request buffers
//! reposted) are held and made together at its end, under one lock of the node, with the
//! state released: one drain for all of them, their messages in one write per connection, and
//! another partition's thread may fold its own events meanwhile ([`held`]).
//!
//! Nothing here blocks while holding the lock except the node's own short calls (an unlink,
//! which never calls back into us), so the lock order is simply: endpoint state, then the
//! node's core. A fold that made its calls takes the state again to settle them, waiting for it
//! if another thread holds it: every holder now holds it for bookkeeping only. How long the
//! state is held, and how often a thread finds it held, is counted ([`EndpointLockStats`]).
//!
//! lustre: lnet/selftest/rpc.c (`srpc_send_rpc()`, `srpc_handle_rpc()`,
//! `srpc_lnet_ev_handler()`, `srpc_post_passive_rdma()`, `srpc_post_active_rdma()`,
//! `srpc_send_reply()`, `srpc_service_add_buffers()`), lnet/selftest/selftest.h.

mod buffers;
mod held;
mod lock_stats;
mod pool;

pub use buffers::PartitionBuffers;
use buffers::ServiceBuffers;
use held::{ClientStart, HeldCall, HeldKind, Made, Passive, Remote, ServerPart};
pub use lock_stats::EndpointLockStats;
use lock_stats::LockCounters;
use pool::BufferPool;
pub use pool::{BufferUsage, DEFAULT_BULK_BUDGET, SPARE_IDLE};

use std::cell::Cell;
use std::collections::{BTreeSet, VecDeque};

// Keys are our own counters: no need for a DoS-resistant hash on the per-RPC path.
use foldhash::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering, fence};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError, TryLockError, Weak};
use std::thread::{self, JoinHandle, Thread};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ulnet::proto::engine::cpt::Partitions;
use ulnet::proto::engine::slab::{Key, Slab};
use ulnet::proto::wire::selftest::{
    ByteOrder, SRPC_MSG_LEN, SrpcBody, SrpcCounters, SrpcMsg, SrpcParseError, SrpcService,
    check_request, errno,
};
use ulnet::{
    Event, EventKind, EventQueue, EventStatus, InsertPosition, MdHandle, MdOptions, MdSpec, Memory,
    Nid, Node, ProcessId, RecvError, Threshold,
};

/// How long the dispatcher sleeps at most, so timers (RPC deadlines, session expiry, the
/// console's pinger) are checked at least this often.
const TICK: Duration = Duration::from_millis(100);

/// Events folded in per lock hold before the lock is released for waiting callers.
const EVENT_BATCH: usize = 256;

/// Most shared bulk sources kept ([`RpcCore::shared_source`]).
const SHARED_SOURCES: usize = 16;

/// What names a shared bulk source: its length, then whatever its pattern depends on (for
/// BRW: the offset in the first page, the check mode and the magic).
pub type SourceKey = (usize, usize, u32, u64);

/// Read-only bulk sources, each shared by every RPC that sends the same bytes. lnet_selftest
/// gives each RPC pages of its own, but fills every one with the same pattern (lustre:
/// brw_test.c `brw_client_prep_rpc()` and `brw_server_handle()` both call `brw_fill_bulk()`
/// with `BRW_MAGIC`): one source serves them all, stays in cache, and spares a test at
/// concurrency N N-1 buffers (BENCHMARKS.md, "Findings").
#[derive(Debug, Default)]
pub struct SharedSources(HashMap<SourceKey, Arc<Vec<u8>>>);

impl SharedSources {
    /// The source named by `key` (`key.0` bytes long), made by `fill` the first time; `None`
    /// if `fill` refuses.
    pub fn get(
        &mut self,
        key: SourceKey,
        fill: impl FnOnce(&mut [u8]) -> bool,
    ) -> Option<Arc<Vec<u8>>> {
        if let Some(source) = self.0.get(&key) {
            return Some(Arc::clone(source));
        }
        let mut buffer = committed_buffer(key.0);
        if !fill(&mut buffer) {
            return None;
        }
        if self.0.len() >= SHARED_SOURCES {
            // Sources still in flight live on in their MDs.
            self.0.clear();
        }
        let source = Arc::new(buffer);
        self.0.insert(key, Arc::clone(&source));
        Some(source)
    }
}

/// What a new bulk buffer is filled with before its first use.
const FRESH_BUFFER_FILL: u8 = 0xa5;

/// A new bulk buffer backed by pages of its own, as the kernel's selftest bulk is (it
/// allocates pages, whatever their contents). A zeroed allocation reads as the kernel's one
/// shared zero page until written, so a source nobody writes (brw with no check) would be sent
/// from one cache-resident page: up to about twice as fast at concurrency 32 as from real
/// memory, which flattered every write figure (BENCHMARKS.md, "Findings"). The fill is not zero so
/// that the allocation cannot become a `calloc`.
fn committed_buffer(length: usize) -> Vec<u8> {
    vec![FRESH_BUFFER_FILL; length]
}

/// Most request buffers a test service posts (`SFW_TEST_WI_MAX`). lustre: selftest.h.
pub(crate) const MAX_TEST_BUFFERS: usize = 2048;

/// Linux errno values the RPC layer reports (positive, as selftest puts them on the wire).
pub(crate) mod errnos {
    pub const EINTR: u32 = 4;
    pub const ENOMEM: u32 = 12;
    pub const ESHUTDOWN: u32 = 108;
    pub const ETIMEDOUT: u32 = 110;
}

/// Why a client RPC failed (the kernel's `crpc_status`, a negative errno there).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RpcError {
    /// Aborted by the caller (a batch stopped with force, a transaction given up).
    #[error("interrupted")]
    Interrupted,
    /// No reply within the RPC's timeout (`rpc_timeout`, or the console's transaction timeout).
    #[error("timed out")]
    TimedOut,
    /// LNet failed a message of the RPC (the request, the reply or the bulk).
    #[error("network error {0:?}")]
    Network(EventStatus),
    /// The reply was not a selftest reply of the right type.
    #[error("bad reply message")]
    BadReply,
    /// The node could not post an MD or message (tables full).
    #[error("out of resources")]
    NoResources,
    /// The node or the endpoint is shutting down.
    #[error("shut down")]
    ShutDown,
}

impl RpcError {
    /// The positive errno lst prints with `strerror()`.
    pub fn errno(self) -> u32 {
        match self {
            Self::Interrupted => errnos::EINTR,
            Self::TimedOut => errnos::ETIMEDOUT,
            Self::Network(status) => status.errno().unsigned_abs(),
            Self::BadReply => errno::EBADMSG,
            Self::NoResources => errnos::ENOMEM,
            Self::ShutDown => errnos::ESHUTDOWN,
        }
    }
}

/// Why the selftest service or console endpoint did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("setting lazy portal {portal}: {source}")]
    LazyPortal {
        portal: u32,
        #[source]
        source: ulnet::PortalError,
    },
    #[error("posting a request buffer for {service:?}: {source}")]
    PostBuffer {
        service: SrpcService,
        #[source]
        source: ulnet::PostError,
    },
    #[error("spawning the dispatcher thread: {0}")]
    Thread(#[source] std::io::Error),
}

/// The bulk a client RPC offers its server (the client always posts the passive MD).
#[derive(Debug)]
pub(crate) enum ClientBulk {
    /// The server PUTs into this memory (BRW read, the client is the sink).
    Sink {
        memory: Memory,
        /// Take the data without keeping it (`check=discard`): the MD is a truncating
        /// zero-length one, so no byte is copied and the memory is handed back untouched.
        discard: bool,
    },
    /// The server GETs this memory (BRW write; the console's destination list).
    Source { memory: Memory },
}

/// A client RPC to start.
#[derive(Debug)]
pub(crate) struct ClientCall {
    pub dest: ProcessId,
    pub service: SrpcService,
    /// The request; its `rpyid` (and `bulkid`) are filled in here.
    pub request: SrpcMsg,
    pub bulk: Option<ClientBulk>,
    /// `None`: no timer (the kernel's `rpc_timeout = 0`).
    pub timeout: Option<Duration>,
    /// The application's name for this RPC, handed back in [`ClientOutcome::tag`].
    pub tag: u64,
    /// Bytes to put in the request's unused tail, at an offset (an extension, [`crate::ext`]).
    pub tail: Option<(usize, Vec<u8>)>,
}

/// A finished client RPC.
#[derive(Debug)]
pub(crate) struct ClientOutcome {
    pub tag: u64,
    /// `Ok` when a well-formed reply arrived (its `status` may still be an error) and the
    /// bulk, if any, completed.
    pub status: Result<(), RpcError>,
    pub reply: Option<(SrpcMsg, ByteOrder)>,
    /// The reply's 160 bytes as received (for extensions in its unused tail).
    pub raw_reply: Option<[u8; SRPC_MSG_LEN]>,
    /// The bulk memory, handed back (with the data for a sink).
    pub bulk: Option<Memory>,
    /// From the request's posting to the last event.
    pub latency: Duration,
}

/// One request received by a registered service.
#[derive(Clone, Debug)]
pub(crate) struct Incoming {
    pub service: SrpcService,
    /// Who to reply to: the request's source NID and pid.
    pub peer: ProcessId,
    /// The local NID the request arrived on; replies and bulk leave from it.
    pub self_nid: Nid,
    pub msg: SrpcMsg,
    pub order: ByteOrder,
    /// The request's 160 bytes as received.
    pub raw: [u8; SRPC_MSG_LEN],
}

/// What a service does with a request.
#[derive(Debug)]
pub(crate) enum Verdict {
    /// Send this reply (its body must be the service's reply type).
    Reply(SrpcMsg),
    /// Send these bytes as the reply (an encoded reply with an extension in its tail).
    ReplyBytes([u8; SRPC_MSG_LEN]),
    /// Move bulk data first, then call [`App::bulk_ready`].
    Bulk(ServerBulk),
    /// Send nothing (the kernel's handler returning an error).
    Drop,
}

/// The bulk transfer a server does for a request (the server is always the active side).
#[derive(Debug)]
pub(crate) enum ServerBulk {
    /// GET `length` bytes from the client (BRW write, the destination list).
    Get { length: usize },
    /// PUT `memory` into the client's MD (BRW read).
    Put { memory: Memory },
}

/// The application on top of the RPC layer. Every call runs on the dispatcher thread (or a
/// caller's thread) with the endpoint's state locked.
pub(crate) trait App: Send + 'static {
    /// A request arrived on a service registered with [`RpcCore::register`].
    fn request(&mut self, core: &mut RpcCore, incoming: &Incoming) -> Verdict;

    /// The bulk of a [`Verdict::Bulk`] finished; `memory` holds what was moved.
    fn bulk_ready(
        &mut self,
        core: &mut RpcCore,
        incoming: &Incoming,
        status: Result<(), RpcError>,
        memory: Option<Memory>,
    ) -> Verdict;

    /// A client RPC started with [`RpcCore::start`] finished.
    fn client_done(&mut self, core: &mut RpcCore, outcome: ClientOutcome);

    /// Called at least every [`TICK`]: run timers.
    fn tick(&mut self, core: &mut RpcCore, now: Instant);
}

/// The endpoint's locked state: the RPC machinery and the application.
#[derive(Debug)]
pub(crate) struct State<A> {
    pub core: RpcCore,
    pub app: A,
    /// When the holder took it, if this hold is timed ([`LockCounters`]).
    timed: Option<Instant>,
}

/// An RPC endpoint on a node: its event queue, dispatcher thread and state.
pub(crate) struct Endpoint<A: App> {
    shared: Arc<Shared<A>>,
    thread: Option<JoinHandle<()>>,
}

struct Shared<A> {
    state: Mutex<State<A>>,
    /// How `state` is used: held time, and threads that found it held.
    lock_stats: LockCounters,
    /// The node, for the calls made with the state released ([`HeldBatch::make`]).
    node: Node,
    /// The endpoint's queue, looked at after every unlock of `state`.
    events: EventQueue,
    /// Signalled after events changed something callers may wait for.
    changed: Condvar,
    /// Callers in [`Endpoint::wait_until`]: `changed` is signalled only when there are some
    /// (a signal is a system call, and a test node's RPCs have nobody waiting).
    waiters: AtomicUsize,
    /// The dispatcher thread, unparked for events nobody else took (see [`Shared::take_over`]).
    dispatcher: OnceLock<Thread>,
    stop: AtomicBool,
}

impl<A: App + fmt::Debug> Endpoint<A> {
    /// Starts an endpoint on `node`; `setup` registers services before the dispatcher runs.
    pub fn start(
        node: &Node,
        name: &str,
        app: A,
        setup: impl FnOnce(&mut State<A>) -> Result<(), StartError>,
    ) -> Result<Self, StartError> {
        // The handler finds the endpoint through this once it exists (a weak reference: the
        // endpoint owns the queue).
        let endpoint: Arc<OnceLock<Weak<Shared<A>>>> = Arc::new(OnceLock::new());
        let handler_endpoint = Arc::clone(&endpoint);
        let events = node.event_queue_with_handler(ulnet::MAX_EVENT_QUEUE_CAPACITY, move |_| {
            if let Some(shared) = handler_endpoint.get().and_then(Weak::upgrade) {
                shared.take_over();
            }
        });
        let core = RpcCore::new(node.clone(), events.clone());
        let mut state = State { core, app, timed: None };
        if let Err(error) = setup(&mut state) {
            state.core.shutdown();
            return Err(error);
        }
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
            lock_stats: LockCounters::default(),
            node: node.clone(),
            events,
            changed: Condvar::new(),
            waiters: AtomicUsize::new(0),
            dispatcher: OnceLock::new(),
            stop: AtomicBool::new(false),
        });
        let _ = endpoint.set(Arc::downgrade(&shared));
        let thread_shared = Arc::clone(&shared);
        let spawned = thread::Builder::new()
            .name(format!("ulnet-{name}"))
            .spawn(move || dispatch(&thread_shared));
        let thread = match spawned {
            Ok(thread) => thread,
            Err(error) => {
                lock(&shared.state).core.shutdown();
                return Err(StartError::Thread(error));
            }
        };
        let _ = shared.dispatcher.set(thread.thread().clone());
        Ok(Self { shared, thread: Some(thread) })
    }

    /// Runs `call` with the state locked.
    pub fn with<R>(&self, call: impl FnOnce(&mut State<A>) -> R) -> R {
        let mut state = self.shared.lock_state();
        let result = call(&mut state);
        self.shared.unlock(state);
        result
    }

    /// Locks the state and waits until `done` holds or `deadline` passes, then runs `then`
    /// with the state still locked and whether `done` held.
    pub fn wait_until<R>(
        &self,
        deadline: Instant,
        mut done: impl FnMut(&mut State<A>) -> bool,
        then: impl FnOnce(&mut State<A>, bool) -> R,
    ) -> R {
        let shared = &self.shared;
        let mut state = shared.lock_state();
        let finished = loop {
            // Events that came while we held the lock are ours to fold in (their producer
            // found the state busy and handed them to the dispatcher or to us).
            let wake;
            (state, wake) = shared.fold_in(state);
            shared.notify(wake);
            if done(&mut state) {
                break true;
            }
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                break false;
            }
            // SeqCst pairs with `notify`: the lock is held while counting, so whoever folds
            // events in after this sees the count. It pairs with `take_over` too: a producer
            // that found the lock held either sees this count (and hands its events to the
            // dispatcher) or pushed before the look below (and they are ours).
            shared.waiters.fetch_add(1, Ordering::SeqCst);
            if !shared.events.is_empty() {
                shared.waiters.fetch_sub(1, Ordering::SeqCst);
                continue;
            }
            HOLDING.set(0);
            shared.lock_stats.released(state.timed.take());
            let (mut next, _) = shared
                .changed
                .wait_timeout(state, remaining)
                .unwrap_or_else(PoisonError::into_inner);
            next.timed = shared.lock_stats.taken();
            HOLDING.set(shared.address());
            shared.waiters.fetch_sub(1, Ordering::SeqCst);
            state = next;
        };
        let result = then(&mut state, finished);
        shared.unlock(state);
        result
    }

    /// The endpoint's state lock, counted ([`EndpointLockStats`]).
    pub fn lock_stats(&self) -> EndpointLockStats {
        self.shared.lock_stats.snapshot()
    }

    /// Stops the dispatcher and releases everything posted on the node.
    pub fn shutdown(&mut self) {
        self.stop_dispatcher();
        lock(&self.shared.state).core.shutdown();
        self.shared.changed.notify_all();
    }
}

impl<A: App> Endpoint<A> {
    /// Stops the dispatcher thread and waits for it (idempotent).
    fn stop_dispatcher(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            if thread.join().is_err() {
                tracing::error!("selftest dispatcher panicked");
            }
        }
    }
}

impl<A: App> Drop for Endpoint<A> {
    fn drop(&mut self) {
        self.stop_dispatcher();
        lock(&self.shared.state).core.shutdown();
    }
}

impl<A: App> fmt::Debug for Endpoint<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint").finish_non_exhaustive()
    }
}

/// Rounds of [`Shared::take_over`] on one thread before the rest goes to the dispatcher.
const TAKE_OVER_ROUNDS: usize = 4;

thread_local! {
    /// The endpoint whose state this thread holds, or whose fold it is running with the state
    /// released for its node calls (its address; 0: none). Events its own node calls produce
    /// meanwhile are folded in when it unlocks, not handed over.
    static HOLDING: Cell<usize> = const { Cell::new(0) };
}

/// The endpoint's state, locked.
type Locked<'s, A> = MutexGuard<'s, State<A>>;

impl<A: App> Shared<A> {
    fn address(&self) -> usize {
        std::ptr::from_ref(self) as usize
    }

    /// Takes the state, waiting for it if another thread holds it.
    fn lock_state(&self) -> Locked<'_, A> {
        let mut state = match self.state.try_lock() {
            Ok(state) => state,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => {
                self.lock_stats.found_busy();
                lock(&self.state)
            }
        };
        state.timed = self.lock_stats.taken();
        HOLDING.set(self.address());
        state
    }

    /// Releases the state (counting the hold); `HOLDING` is the caller's to clear.
    fn release(&self, mut state: Locked<'_, A>) {
        self.lock_stats.released(state.timed.take());
        drop(state);
    }

    /// Folds in what is queued (at most [`EVENT_BATCH`] events), with the state locked, and
    /// makes the node calls that folding held ([`RpcCore::take_held`]) with it released;
    /// returns the state, locked again, and whether waiters must be woken.
    fn fold_in<'s>(&'s self, mut state: Locked<'s, A>) -> (Locked<'s, A>, bool) {
        if state.core.closed {
            return (state, false);
        }
        {
            let State { core, app, .. } = &mut *state;
            // Taken in bursts, under one lock of the queue each (and handled in place).
            let mut inbox = std::mem::take(&mut core.inbox);
            let mut handled = 0;
            while handled < EVENT_BATCH {
                match self.events.try_recv_many(&mut inbox, EVENT_BATCH - handled) {
                    Ok(count) => {
                        handled += count;
                        for event in &mut inbox {
                            core.handle_event(app, event);
                        }
                        inbox.clear();
                    }
                    Err(RecvError::Closed) => {
                        // The node shut down: every RPC in flight fails now.
                        core.closed = true;
                        core.fail_all();
                        core.wake = true;
                        break;
                    }
                    Err(RecvError::Empty | RecvError::Timeout) => break,
                }
            }
            core.inbox = inbox;
        }
        // Delivering may hold more calls (a finished bulk's reply), and a failed call may
        // leave a bulk to deliver.
        loop {
            let State { core, app, .. } = &mut *state;
            core.deliver(app);
            let Some(mut batch) = core.take_held() else { break };
            // Made with the state released, as the kernel's `srpc_send_reply()` and
            // `srpc_do_bulk()` call LNet with no service lock held: the calls' drain and the
            // writes it makes (most of a small RPC's cost) hold up no other partition's fold.
            // `HOLDING` stays set, so that the events they produce on this thread wait for
            // this fold rather than being folded in under it.
            self.release(state);
            batch.make(&self.node, &self.events);
            state = self.lock_state();
            if !state.core.settle_held(batch) {
                break;
            }
        }
        let wake = std::mem::take(&mut state.core.wake);
        (state, wake)
    }

    /// Folds in what is queued, unlocks, wakes waiters, and takes over events that came while
    /// the state was held (their producer found it busy and left them to us).
    fn unlock(&self, state: Locked<'_, A>) {
        let (state, wake) = self.fold_in(state);
        HOLDING.set(0);
        self.release(state);
        self.notify(wake);
        // SeqCst pairs with the producer's: it pushed before trying the lock, we unlocked
        // before looking; one of us sees the other.
        fence(Ordering::SeqCst);
        if !self.events.is_empty() {
            self.take_over();
        }
    }

    /// The queue's handler, on the thread that produced the events (or unlocked the state):
    /// folds them in if the state is free. The kernel's `srpc_lnet_ev_handler()` likewise
    /// runs in the LND's context. If this thread holds the state, it folds them in when it
    /// unlocks; if another thread does, so does that thread, or, while a thread waits on the
    /// state, the dispatcher (it blocks on the lock, which an I/O thread must not).
    fn take_over(&self) {
        if HOLDING.get() == self.address() {
            return;
        }
        for _ in 0..TAKE_OVER_ROUNDS {
            fence(Ordering::SeqCst);
            let mut state = match self.state.try_lock() {
                Ok(state) => state,
                Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
                // The holder folds them in: `unlock` looks again after its fence, and so
                // does a waiter before it sleeps, unless it counted itself first (SeqCst,
                // as the push): then it may sleep without looking, and the dispatcher must.
                // Another partition's thread holding the state is the common case here, and
                // waking the dispatcher for it cost a thread hop per fold.
                Err(TryLockError::WouldBlock) if self.waiters.load(Ordering::SeqCst) == 0 => {
                    self.lock_stats.found_busy();
                    return;
                }
                Err(TryLockError::WouldBlock) => {
                    self.lock_stats.found_busy();
                    break;
                }
            };
            state.timed = self.lock_stats.taken();
            HOLDING.set(self.address());
            let wake;
            (state, wake) = self.fold_in(state);
            let closed = state.core.closed;
            HOLDING.set(0);
            self.release(state);
            self.notify(wake);
            fence(Ordering::SeqCst);
            if closed || self.events.is_empty() {
                return;
            }
        }
        // Busy, or still more: hand the rest to the dispatcher rather than block or keep this
        // thread (perhaps an I/O thread) from its other work.
        if let Some(dispatcher) = self.dispatcher.get() {
            dispatcher.unpark();
        }
    }

    fn notify(&self, wake: bool) {
        if wake && self.waiters.load(Ordering::SeqCst) > 0 {
            self.changed.notify_all();
        }
    }
}

/// The dispatcher: runs timers every [`TICK`], and folds in events handed to it.
fn dispatch<A: App>(shared: &Shared<A>) {
    let mut next_tick = Instant::now();
    while !shared.stop.load(Ordering::Acquire) {
        thread::park_timeout(next_tick.saturating_duration_since(Instant::now()).min(TICK));
        let mut state = shared.lock_state();
        let now = Instant::now();
        if now >= next_tick && !state.core.closed {
            let State { core, app, .. } = &mut *state;
            let dropped = shared.events.dropped();
            if dropped > core.events_dropped {
                // An MD's final event lost means an RPC that never completes: say so loudly.
                tracing::error!(dropped, "selftest event queue overflowed; RPCs may hang");
                core.events_dropped = dropped;
            }
            core.expire(now);
            core.trim(now);
            core.deliver(app);
            app.tick(core, now);
            next_tick = now + TICK;
        }
        shared.unlock(state);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves consistent-enough state for shutdown.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The match bits of every selftest RPC and bulk from this process: one generator for all
/// endpoints (two endpoints on one node must never share match bits on portal 52), seeded
/// as `srpc_startup()` seeds it. lustre: rpc.c `srpc_next_id()`. Reserves `count` consecutive
/// values and returns the first.
fn reserve_match_bits(count: u64) -> u64 {
    static IDS: OnceLock<AtomicU64> = OnceLock::new();
    let ids = IDS.get_or_init(|| {
        let seconds = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
        AtomicU64::new(seconds << 48)
    });
    ids.fetch_add(count, Ordering::Relaxed).wrapping_add(1)
}

/// Match bits an endpoint takes from [`reserve_match_bits`] a block at a time: an RPC then
/// costs no atomic read-modify-write on a counter every endpoint shares. Uniqueness within the
/// process is all `srpc_next_id()` promises; the order between endpoints does not matter.
#[derive(Debug, Default)]
struct MatchBitsBlock {
    next: u64,
    end: u64,
}

impl MatchBitsBlock {
    const SIZE: u64 = 64;

    fn take(&mut self) -> u64 {
        if self.next == self.end {
            self.next = reserve_match_bits(Self::SIZE);
            self.end = self.next.wrapping_add(Self::SIZE);
        }
        let bits = self.next;
        self.next = bits.wrapping_add(1);
        bits
    }
}

/// An identifier of a client RPC within its endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ClientRpcId(u64);

/// A request buffer's MD: one PUT, then it unlinks.
/// Where a service's request buffer of partition `cpt` goes on its portal: a test service's
/// in that partition's match table, a framework service's in the portal's fixed one.
/// lustre: rpc.c `srpc_service_post_buffer()` (`local = !srpc_serv_is_framework(sv)`),
/// `srpc_post_passive_rdma()` (`LNET_INS_LOCAL` or `LNET_INS_AFTER`).
fn buffer_position(service: SrpcService, cpt: u32) -> InsertPosition {
    if service.is_framework() { InsertPosition::After } else { InsertPosition::Local { cpt } }
}

fn request_buffer_spec(buffer: Vec<u8>, token: u64) -> MdSpec {
    MdSpec::new(Memory::new(buffer))
        .options(MdOptions::OP_PUT)
        .threshold(Threshold::Count(1))
        .user_ptr(token)
}

/// What an MD's events are about (found by the MD's `user_ptr`).
#[derive(Clone, Copy, Debug)]
enum Slot {
    /// A request buffer of a service's partition, with its MD once posted.
    RequestBuffer(SrpcService, u32, Option<MdHandle>),
    ClientRequest(u64),
    ClientReply(u64),
    ClientBulk(u64),
    ServerBulk(u64),
    ServerReply(u64),
}

#[derive(Debug)]
struct ClientRpc {
    tag: u64,
    dest: ProcessId,
    started: Instant,
    deadline: Option<Instant>,
    /// Its start is held or being made ([`held`]): it knows none of its MDs yet, and counts as
    /// live until it does.
    starting: bool,
    /// MDs whose final event has not come yet.
    request_md: Option<MdHandle>,
    reply_md: Option<MdHandle>,
    bulk_md: Option<MdHandle>,
    /// The MDs' final events that are in (they may come before the start is settled).
    request_ended: bool,
    reply_ended: bool,
    bulk_ended: bool,
    has_bulk: bool,
    request_status: Option<Result<(), RpcError>>,
    reply: Option<Result<(SrpcMsg, ByteOrder), RpcError>>,
    raw_reply: Option<[u8; SRPC_MSG_LEN]>,
    bulk_status: Option<Result<(), RpcError>>,
    bulk_memory: Option<Memory>,
    /// Set once the RPC is given up; the first reason wins.
    aborted: Option<RpcError>,
    /// The reply carried an error, so the bulk MD was unlinked on purpose.
    bulk_cancelled: bool,
    expected_reply: ulnet::proto::wire::selftest::SrpcMsgType,
    /// Bulk bytes charged to the pool's budget, given back when the RPC completes.
    charged: usize,
}

impl ClientRpc {
    /// An RPC whose start is held ([`held`]), with a `timeout` from now.
    fn starting(
        tag: u64,
        dest: ProcessId,
        timeout: Option<Duration>,
        has_bulk: bool,
        expected_reply: ulnet::proto::wire::selftest::SrpcMsgType,
        charged: usize,
    ) -> Self {
        let started = Instant::now();
        Self {
            tag,
            dest,
            started,
            deadline: timeout.map(|timeout| started + timeout),
            starting: true,
            request_md: None,
            reply_md: None,
            bulk_md: None,
            request_ended: false,
            reply_ended: false,
            bulk_ended: false,
            has_bulk,
            request_status: None,
            reply: None,
            raw_reply: None,
            bulk_status: None,
            bulk_memory: None,
            aborted: None,
            bulk_cancelled: false,
            expected_reply,
            charged,
        }
    }

    fn live(&self) -> bool {
        self.starting
            || self.request_md.is_some()
            || self.reply_md.is_some()
            || self.bulk_md.is_some()
    }
}

impl ServerRpc {
    /// A request just received, with nothing made for it yet.
    fn new(incoming: Incoming) -> Self {
        Self {
            incoming,
            bulk_md: None,
            bulk_error: None,
            reply_md: None,
            bulk_ended: false,
            charged: 0,
        }
    }
}

#[derive(Debug)]
struct ServerRpc {
    incoming: Incoming,
    bulk_md: Option<MdHandle>,
    /// The first failure of the bulk's events.
    bulk_error: Option<RpcError>,
    reply_md: Option<MdHandle>,
    /// The bulk MD's final event is in (it may come before the batch that made the MD is
    /// settled, [`RpcCore::settle_held`]).
    bulk_ended: bool,
    /// Bulk bytes charged to the pool's budget, given back when the RPC ends.
    charged: usize,
}

/// The RPC machinery of one endpoint (lnet_selftest's `srpc_data` and its services).
pub(crate) struct RpcCore {
    node: Node,
    /// The node's CPU partitions: a client RPC's MDs are made on its server's.
    partitions: Partitions,
    events: EventQueue,
    /// What each MD's events are about, by the MD's token (its `user_ptr`).
    slots: Slab<Slot>,
    clients: HashMap<u64, ClientRpc>,
    servers: HashMap<u64, ServerRpc>,
    next_rpc: u64,
    match_bits: MatchBitsBlock,
    services: HashMap<u32, ServiceBuffers>,
    /// Finished client RPCs, handed to the application outside the event fold.
    done: VecDeque<ClientOutcome>,
    /// Server RPCs whose bulk finished, waiting for the application.
    bulk_ready: VecDeque<(u64, Result<(), RpcError>, Option<Memory>)>,
    /// Bulk memory under its budget, and the spare buffers.
    pool: BufferPool,
    /// Bulk sources shared by every RPC that sends the same bytes.
    sources: SharedSources,
    counters: SrpcCounters,
    /// Something changed that a waiting caller may care about.
    pub wake: bool,
    /// Events the queue dropped, as last reported.
    events_dropped: u64,
    /// Node calls waiting for [`RpcCore::take_held`].
    held: Vec<HeldCall>,
    /// What each held call was, and what it made (kept for their allocations).
    held_kinds: Vec<HeldKind>,
    held_made: Vec<Made>,
    /// Events taken from the queue and being handled (kept for its allocation).
    inbox: VecDeque<Event>,
    closed: bool,
}

impl fmt::Debug for RpcCore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RpcCore")
            .field("clients", &self.clients.len())
            .field("servers", &self.servers.len())
            .field("counters", &self.counters)
            .finish_non_exhaustive()
    }
}

impl RpcCore {
    fn new(node: Node, events: EventQueue) -> Self {
        Self {
            partitions: node.partitions(),
            node,
            events,
            slots: Slab::new(),
            clients: HashMap::default(),
            servers: HashMap::default(),
            next_rpc: 1,
            match_bits: MatchBitsBlock::default(),
            services: HashMap::default(),
            done: VecDeque::new(),
            bulk_ready: VecDeque::new(),
            pool: BufferPool::new(DEFAULT_BULK_BUDGET),
            sources: SharedSources::default(),
            counters: SrpcCounters::default(),
            wake: false,
            events_dropped: 0,
            held: Vec::new(),
            held_kinds: Vec::new(),
            held_made: Vec::new(),
            inbox: VecDeque::new(),
            closed: false,
        }
    }

    pub fn node(&self) -> &Node {
        &self.node
    }

    /// `srpc_get_counters()`.
    pub fn counters(&self) -> SrpcCounters {
        self.counters
    }

    /// Registers `service`: its portal becomes lazy (requests wait for a buffer instead of
    /// being dropped) and `buffers` request buffers are posted, on every partition of the
    /// node for a test service (in the partition's match table, so that a request is taken
    /// by a buffer of the partition that received it) and once for a framework service;
    /// each partition grows its buffers on demand, the service owning at most
    /// `max_buffers` in all. lustre: rpc.c `srpc_startup()`, `srpc_service_init()`,
    /// `srpc_service_add_buffers()`, `srpc_lnet_ev_handler()` (`scd_buf_low`).
    pub fn register(
        &mut self,
        service: SrpcService,
        buffers: usize,
        max_buffers: usize,
    ) -> Result<(), StartError> {
        let portal = service.request_portal();
        self.node
            .set_lazy_portal(portal)
            .map_err(|source| StartError::LazyPortal { portal, source })?;
        let partitions =
            if service.is_framework() { 1 } else { self.node.partitions().count() as usize };
        let shares = ServiceBuffers::new(partitions, max_buffers);
        let initial = shares.initial(buffers);
        self.services.insert(service.id(), shares);
        for cpt in 0..partitions as u32 {
            for _ in 0..initial {
                self.post_buffer(service, cpt, vec![0; SRPC_MSG_LEN])
                    .map_err(|source| StartError::PostBuffer { service, source })?;
            }
        }
        Ok(())
    }

    /// `service`'s request buffers by partition (one share for a framework service); empty
    /// for a service not registered.
    pub fn request_buffers(&self, service: SrpcService) -> Vec<PartitionBuffers> {
        self.services.get(&service.id()).map(ServiceBuffers::snapshot).unwrap_or_default()
    }

    /// Starts a client RPC: posts the reply MD and the bulk MD on portal 52, then PUTs the
    /// request (no ACK), at the end of the fold ([`held::ClientStart`]). Fails at once only
    /// when the endpoint is shut down or the bulk over its budget; a start the node refuses
    /// completes the RPC with `NoResources`. lustre: rpc.c `srpc_send_rpc()`
    /// (`SWI_STATE_NEWBORN`), `srpc_prepare_reply()`, `srpc_prepare_bulk()`,
    /// `srpc_send_request()`.
    pub fn start(&mut self, call: ClientCall) -> Result<ClientRpcId, RpcError> {
        if self.closed {
            return Err(RpcError::ShutDown);
        }
        let ClientCall { dest, service, mut request, bulk, timeout, tag, tail } = call;
        // The bulk is charged at its nominal length, shared source or not, as the kernel gives
        // every RPC pages of its own; a discarding sink holds no memory.
        let charged = match &bulk {
            Some(ClientBulk::Sink { discard: true, .. }) | None => 0,
            Some(ClientBulk::Sink { memory, .. } | ClientBulk::Source { memory }) => memory.len(),
        };
        if !self.pool.charge(charged) {
            if let Some(ClientBulk::Sink { memory, .. }) = bulk {
                self.recycle(memory);
            }
            return Err(RpcError::NoResources);
        }
        let id = self.next_rpc;
        self.next_rpc += 1;
        let reply_bits = self.match_bits.take();
        let bulk_bits = bulk.as_ref().map(|_| self.match_bits.take());
        set_match_bits(&mut request.body, reply_bits, bulk_bits);

        let reply_token = self.token(Slot::ClientReply(id));
        let reply_spec = MdSpec::new(Memory::new(self.buffer(SRPC_MSG_LEN)))
            .options(MdOptions::OP_PUT)
            .threshold(Threshold::Count(1))
            .user_ptr(reply_token);
        let mut bulk_post = None;
        if let (Some(bulk), Some(bits)) = (bulk, bulk_bits) {
            let token = self.token(Slot::ClientBulk(id));
            let spec = match bulk {
                ClientBulk::Sink { memory, discard: false } => {
                    MdSpec::new(memory).options(MdOptions::OP_PUT)
                }
                ClientBulk::Sink { memory, discard: true } => {
                    // A zero-length truncating MD: the LND skips the payload.
                    self.recycle(memory);
                    MdSpec::new(Memory::empty()).options(MdOptions::OP_PUT | MdOptions::TRUNCATE)
                }
                ClientBulk::Source { memory } => MdSpec::new(memory).options(MdOptions::OP_GET),
            };
            bulk_post = Some((token, bits, spec.threshold(Threshold::Count(1)).user_ptr(token)));
        }
        let request_token = self.token(Slot::ClientRequest(id));
        let mut payload = self.buffer(SRPC_MSG_LEN);
        payload.copy_from_slice(&request.emit());
        if let Some((offset, bytes)) = tail {
            if let Some(slot) = payload.get_mut(offset..offset + bytes.len()) {
                slot.copy_from_slice(&bytes);
            }
        }
        // Every MD of the RPC on the partition its server's NID maps to, where its replies
        // arrive: the kernel runs a client RPC on that CPT (selftest.h `srpc_init_client_rpc()`,
        // `lnet_nid2cpt(peer, NULL)`, through the net's CPTs when its NIs are bound to some),
        // so its calls lock that partition alone. Asked per RPC, as the kernel asks: a net's
        // CPTs change as NIs come and go.
        let cpt = match self.partitions.count() {
            1 => 0,
            _ => self.node.cpt_of_nid(&dest.nid),
        };
        let request_spec = MdSpec::new(Memory::new(payload))
            .threshold(Threshold::Count(1))
            .user_ptr(request_token)
            .on_partition(cpt);
        let has_bulk = bulk_post.is_some();
        let bulk = bulk_post.map(|(token, match_bits, spec)| Passive { match_bits, spec, token });
        let start = ClientStart {
            reply: Passive { match_bits: reply_bits, spec: reply_spec, token: reply_token },
            bulk,
            request: request_spec,
            request_token,
            dest,
            service,
            cpt,
        };
        // Made at the end of the fold, with the state released (`held`); the RPC counts as
        // live until then.
        self.held.push(HeldCall::Client { id, start: Box::new(start) });
        let rpc = ClientRpc::starting(tag, dest, timeout, has_bulk, service.reply_type(), charged);
        self.clients.insert(id, rpc);
        Ok(ClientRpcId(id))
    }

    /// Gives up a client RPC: its MDs are unlinked and it completes with `why` once their
    /// final events are in. lustre: rpc.c `srpc_abort_rpc()`.
    pub fn abort(&mut self, id: ClientRpcId, why: RpcError) {
        let Some(rpc) = self.clients.get_mut(&id.0) else { return };
        if rpc.aborted.is_none() {
            rpc.aborted = Some(why);
        }
        for md in [rpc.request_md, rpc.reply_md, rpc.bulk_md].into_iter().flatten() {
            // Already gone is fine: its final event is on its way.
            let _ = self.node.md_unlink(md);
        }
    }

    /// A pooled buffer of `length` bytes (contents unspecified).
    pub fn buffer(&mut self, length: usize) -> Vec<u8> {
        self.pool.take(length)
    }

    /// Sets the budget of bulk memory ([`BufferUsage`]); RPCs already charged keep theirs.
    pub fn set_bulk_budget(&mut self, budget: usize) {
        self.pool.set_budget(budget);
    }

    /// How much selftest buffer memory is in use.
    pub fn buffer_usage(&self) -> BufferUsage {
        self.pool.usage()
    }

    /// Whether a bulk of `length` bytes would be granted now: a caller about to allocate one
    /// for [`RpcCore::start`] asks first (a "no" counts as a refused charge).
    pub fn bulk_room(&mut self, length: usize) -> bool {
        self.pool.check_room(length)
    }

    /// Frees spare buffers idle since before `now` ([`SPARE_IDLE`]).
    pub fn trim(&mut self, now: Instant) {
        self.pool.trim(now);
    }

    /// A read-only bulk source shared by every RPC that sends the same bytes
    /// ([`SharedSources::get`]).
    pub fn shared_source(
        &mut self,
        key: SourceKey,
        fill: impl FnOnce(&mut [u8]) -> bool,
    ) -> Option<Arc<Vec<u8>>> {
        self.sources.get(key, fill)
    }

    /// Returns memory to the pool (a shared source is only let go).
    pub fn recycle(&mut self, memory: Memory) {
        if memory.is_shared() {
            return;
        }
        for segment in memory.into_segments() {
            self.pool.give_back(segment);
        }
    }

    // ------------------------------------------------------------------- internals

    /// A request buffer's MD is posted.
    fn buffer_posted(&mut self, token: u64, md: MdHandle) {
        if let Some(Slot::RequestBuffer(_, _, posted)) = self.slots.get_mut(Key::from_u64(token)) {
            *posted = Some(md);
        }
    }

    fn shares(&mut self, service: SrpcService) -> Option<&mut ServiceBuffers> {
        self.services.get_mut(&service.id())
    }

    fn token(&mut self, slot: Slot) -> u64 {
        // A slab of four billion slots would exhaust memory first; the fallback names nothing.
        self.slots.insert(slot).map_or(u64::MAX, Key::to_u64)
    }

    fn post_buffer(
        &mut self,
        service: SrpcService,
        cpt: u32,
        buffer: Vec<u8>,
    ) -> Result<(), ulnet::PostError> {
        let token = self.token(Slot::RequestBuffer(service, cpt, None));
        let spec = request_buffer_spec(buffer, token);
        let portal = service.request_portal();
        let bits = u64::from(service.id());
        match self.node.post_at(portal, bits, buffer_position(service, cpt), spec, &self.events) {
            Ok(md) => {
                self.buffer_posted(token, md);
                if let Some(shares) = self.shares(service) {
                    shares.posting(cpt as usize);
                }
                Ok(())
            }
            Err(rejected) => {
                self.slots.discard(Key::from_u64(token));
                Err(rejected.error)
            }
        }
    }

    /// A request buffer of partition `cpt` is free again: repost it there, and grow that
    /// partition when it runs low. The posts are held for [`take_held`](Self::take_held)
    /// and counted now, so the next request of the same fold sees them.
    /// lustre: rpc.c `srpc_server_rpc_done()` reposts on the buffer's own `scd`.
    fn repost(&mut self, service: SrpcService, cpt: u32, buffer: Vec<u8>) {
        if self.closed {
            return;
        }
        if let Some(shares) = self.shares(service) {
            shares.released(cpt as usize);
        }
        self.hold_post(service, cpt, buffer);
        let grow = self.services.get(&service.id()).map_or(0, |shares| shares.growth(cpt as usize));
        for _ in 0..grow {
            self.hold_post(service, cpt, vec![0; SRPC_MSG_LEN]);
        }
    }

    fn hold_post(&mut self, service: SrpcService, cpt: u32, buffer: Vec<u8>) {
        let token = self.token(Slot::RequestBuffer(service, cpt, None));
        let spec = request_buffer_spec(buffer, token);
        if let Some(shares) = self.shares(service) {
            shares.posting(cpt as usize);
        }
        self.held.push(HeldCall::Post { service, cpt, token, spec });
    }

    fn handle_event<A: App>(&mut self, app: &mut A, event: &mut Event) {
        if !event.status.is_ok() && event.status != EventStatus::Canceled {
            self.counters.errors = self.counters.errors.wrapping_add(1);
        }
        let key = Key::from_u64(event.user_ptr);
        let Some(slot) = self.slots.get(key).copied() else { return };
        if event.unlinked {
            self.slots.discard(key);
        }
        match slot {
            Slot::RequestBuffer(service, cpt, _) => self.request_arrived(app, service, cpt, event),
            Slot::ClientRequest(id) => self.client_request_event(id, event),
            Slot::ClientReply(id) => self.client_reply_event(id, event),
            Slot::ClientBulk(id) => self.client_bulk_event(id, event),
            Slot::ServerBulk(id) => self.server_bulk_event(id, event),
            Slot::ServerReply(id) => self.server_reply_event(id, event),
        }
    }

    /// lustre: rpc.c `srpc_lnet_ev_handler()` (`SRPC_REQUEST_RCVD`) and `srpc_handle_rpc()`
    /// (`SWI_STATE_NEWBORN`).
    fn request_arrived<A: App>(
        &mut self,
        app: &mut A,
        service: SrpcService,
        cpt: u32,
        event: &mut Event,
    ) {
        let received = event.kind == EventKind::Put && !self.closed;
        if let Some(shares) = self.shares(service) {
            shares.taken(cpt as usize, received);
        }
        let buffer = event
            .memory
            .take()
            .and_then(|memory| memory.into_segments().next())
            .unwrap_or_else(|| vec![0; SRPC_MSG_LEN]);
        if event.kind != EventKind::Put || self.closed {
            // An UNLINK at shutdown.
            return;
        }
        self.counters.rpcs_received = self.counters.rpcs_received.wrapping_add(1);
        let length = (event.mlength as usize).min(buffer.len());
        let received = buffer.get(..length).unwrap_or_default();
        let parsed = if event.status.is_ok() {
            check_request(received, service).ok().map(|_| SrpcMsg::parse(received))
        } else {
            None
        };
        let peer = ProcessId::new(event.source, event.initiator.pid);
        let self_nid = event.target.nid;
        let mut raw = [0u8; SRPC_MSG_LEN];
        let copied = received.len().min(SRPC_MSG_LEN);
        if let (Some(to), Some(from)) = (raw.get_mut(..copied), received.get(..copied)) {
            to.copy_from_slice(from);
        }
        let verdict_and_incoming = match parsed {
            Some(Ok((msg, order))) => {
                let incoming = Incoming { service, peer, self_nid, msg, order, raw };
                let verdict = app.request(self, &incoming);
                Some((verdict, incoming))
            }
            Some(Err(SrpcParseError::WrongVersion { reply_match_bits, order, .. })) => {
                // lustre: rpc.c `srpc_handle_rpc()`: a version mismatch is answered EPROTO.
                tracing::warn!(%peer, "selftest request with a wrong version");
                let mut reply = SrpcMsg::new(0, error_body(service, errno::EPROTO));
                reply.ses_feats = 0;
                let request = SrpcMsg::new(0, with_reply_bits(service, reply_match_bits));
                let incoming = Incoming { service, peer, self_nid, msg: request, order, raw };
                Some((Verdict::Reply(reply), incoming))
            }
            _ => {
                tracing::warn!(%peer, ?service, length, "dropping a malformed selftest request");
                None
            }
        };
        match verdict_and_incoming {
            Some((verdict, incoming)) => {
                let id = self.next_rpc;
                self.next_rpc += 1;
                self.servers.insert(id, ServerRpc::new(incoming));
                self.repost(service, cpt, buffer);
                self.server_verdict(id, verdict);
            }
            None => {
                self.counters.rpcs_dropped = self.counters.rpcs_dropped.wrapping_add(1);
                self.repost(service, cpt, buffer);
            }
        }
    }

    fn server_verdict(&mut self, id: u64, verdict: Verdict) {
        match verdict {
            Verdict::Reply(reply) => self.send_reply(id, reply.emit()),
            Verdict::ReplyBytes(bytes) => self.send_reply(id, bytes),
            Verdict::Drop => self.server_done(id, false),
            Verdict::Bulk(bulk) => self.start_server_bulk(id, bulk),
        }
    }

    /// lustre: rpc.c `srpc_do_bulk()`, `srpc_post_active_rdma()`.
    fn start_server_bulk(&mut self, id: u64, bulk: ServerBulk) {
        let Some(rpc) = self.servers.get(&id) else { return };
        let peer = rpc.incoming.peer;
        let self_nid = rpc.incoming.self_nid;
        let Some(match_bits) = bulk_match_bits(&rpc.incoming.msg.body) else {
            self.server_done(id, false);
            return;
        };
        let length = match &bulk {
            ServerBulk::Get { length } => *length,
            ServerBulk::Put { memory } => memory.len(),
        };
        if !self.pool.charge(length) {
            // Over the bulk budget: ENOMEM back, what the kernel's failed allocation reports
            // (lustre: framework.c `sfw_alloc_pages()`; there the RPC is then dropped).
            tracing::debug!(%peer, length, "selftest bulk budget spent; answering ENOMEM");
            let features = rpc.incoming.msg.ses_feats;
            let mut reply =
                SrpcMsg::new(features, error_body(rpc.incoming.service, errnos::ENOMEM));
            reply.ses_feats = features;
            self.send_reply(id, reply.emit());
            return;
        }
        if let Some(rpc) = self.servers.get_mut(&id) {
            rpc.charged = length;
        }
        let token = self.token(Slot::ServerBulk(id));
        let (memory, get) = match bulk {
            ServerBulk::Get { length } => (Memory::new(self.buffer(length)), true),
            ServerBulk::Put { memory } => (memory, false),
        };
        // A GET's MD sees SEND and REPLY; a PUT's only SEND.
        let threshold = if get { 2 } else { 1 };
        let spec = MdSpec::new(memory).threshold(Threshold::Count(threshold)).user_ptr(token);
        let remote = Remote { peer, match_bits, self_nid, get };
        self.held.push(HeldCall::Start { id, token, spec, remote, part: ServerPart::Bulk });
    }

    fn server_bulk_event(&mut self, id: u64, event: &mut Event) {
        let memory = event.memory.take();
        let Some(rpc) = self.servers.get_mut(&id) else {
            if let Some(memory) = memory {
                self.recycle(memory);
            }
            return;
        };
        if event.kind == EventKind::Unlink {
            rpc.bulk_error.get_or_insert(RpcError::Interrupted);
        } else if !event.status.is_ok() {
            tracing::debug!(peer = %rpc.incoming.peer, kind = ?event.kind, status = ?event.status,
                "selftest server bulk failed");
            rpc.bulk_error.get_or_insert(RpcError::Network(event.status));
        }
        if !event.unlinked {
            if rpc.bulk_error.is_some() {
                // A GET whose SEND failed: no REPLY will come, so let the MD go now.
                if let Some(md) = rpc.bulk_md {
                    let _ = self.node.md_unlink(md);
                }
            }
            return;
        }
        rpc.bulk_md = None;
        rpc.bulk_ended = true;
        let status = match rpc.bulk_error {
            Some(error) => Err(error),
            None => {
                let moved = u64::from(event.mlength);
                match event.kind {
                    EventKind::Reply => {
                        self.counters.bulk_get = self.counters.bulk_get.wrapping_add(moved);
                    }
                    EventKind::Send => {
                        self.counters.bulk_put = self.counters.bulk_put.wrapping_add(moved);
                    }
                    _ => {}
                }
                Ok(())
            }
        };
        self.bulk_ready.push_back((id, status, memory));
    }

    /// lustre: rpc.c `srpc_send_reply()`.
    fn send_reply(&mut self, id: u64, reply: [u8; SRPC_MSG_LEN]) {
        let Some(rpc) = self.servers.get(&id) else { return };
        let Some(match_bits) = rpc.incoming.msg.body.reply_match_bits() else {
            self.server_done(id, false);
            return;
        };
        let remote = Remote {
            peer: rpc.incoming.peer,
            match_bits,
            self_nid: rpc.incoming.self_nid,
            get: false,
        };
        let token = self.token(Slot::ServerReply(id));
        let mut payload = self.buffer(SRPC_MSG_LEN);
        payload.copy_from_slice(&reply);
        let spec = MdSpec::new(Memory::new(payload)).threshold(Threshold::Count(1)).user_ptr(token);
        self.held.push(HeldCall::Start { id, token, spec, remote, part: ServerPart::Reply });
    }

    fn server_reply_event(&mut self, id: u64, event: &mut Event) {
        if let Some(memory) = event.memory.take() {
            self.recycle(memory);
        }
        if !event.unlinked {
            return;
        }
        // Gone already: `server_done` need not unlink it (one locked call per RPC saved).
        if let Some(rpc) = self.servers.get_mut(&id) {
            rpc.reply_md = None;
        }
        let ok = event.status.is_ok() && event.kind == EventKind::Send;
        if !ok {
            tracing::debug!(kind = ?event.kind, status = ?event.status, "selftest reply failed");
        }
        self.server_done(id, ok);
    }

    /// lustre: rpc.c `srpc_server_rpc_done()`.
    fn server_done(&mut self, id: u64, ok: bool) {
        if !ok {
            self.counters.rpcs_dropped = self.counters.rpcs_dropped.wrapping_add(1);
        }
        if let Some(rpc) = self.servers.remove(&id) {
            self.pool.release(rpc.charged);
            for md in [rpc.bulk_md, rpc.reply_md].into_iter().flatten() {
                let _ = self.node.md_unlink(md);
            }
        }
    }

    fn client_request_event(&mut self, id: u64, event: &mut Event) {
        if let Some(memory) = event.memory.take() {
            self.recycle(memory);
        }
        let Some(rpc) = self.clients.get_mut(&id) else { return };
        if event.kind == EventKind::Send && event.status.is_ok() {
            self.counters.rpcs_sent = self.counters.rpcs_sent.wrapping_add(1);
            rpc.request_status = Some(Ok(()));
        } else if event.kind == EventKind::Unlink {
            rpc.request_status.get_or_insert(Err(RpcError::Interrupted));
        } else {
            rpc.request_status = Some(Err(RpcError::Network(event.status)));
        }
        if event.unlinked {
            rpc.request_md = None;
            rpc.request_ended = true;
        }
        if matches!(rpc.request_status, Some(Err(_))) {
            let why = match rpc.request_status {
                Some(Err(error)) => error,
                _ => RpcError::Interrupted,
            };
            self.abort(ClientRpcId(id), why);
        }
        self.check_client(id);
    }

    fn client_reply_event(&mut self, id: u64, event: &mut Event) {
        let memory = event.memory.take();
        let Some(rpc) = self.clients.get_mut(&id) else { return };
        if event.unlinked {
            rpc.reply_md = None;
            rpc.reply_ended = true;
        }
        let outcome = if event.kind == EventKind::Put && event.status.is_ok() {
            let bytes = memory
                .as_ref()
                .and_then(|memory| memory.segments().first())
                .map(|segment| segment.get(..event.mlength as usize).unwrap_or(segment))
                .unwrap_or_default();
            if let Ok(raw) = <[u8; SRPC_MSG_LEN]>::try_from(bytes) {
                rpc.raw_reply = Some(raw);
            }
            match SrpcMsg::parse(bytes) {
                Ok((msg, order)) if msg.msg_type() == rpc.expected_reply => Ok((msg, order)),
                _ => Err(RpcError::BadReply),
            }
        } else if event.kind == EventKind::Unlink {
            Err(RpcError::Interrupted)
        } else {
            Err(RpcError::Network(event.status))
        };
        let mut cancel_bulk = false;
        let mut abort = None;
        match &outcome {
            Ok((msg, _)) => {
                // A remote error means the server will not touch the bulk.
                // lustre: rpc.c `srpc_send_rpc()` (`SWI_STATE_REQUEST_SENT`).
                if rpc.bulk_md.is_some() && msg.body.status().unwrap_or(0) != 0 {
                    cancel_bulk = true;
                    rpc.bulk_cancelled = true;
                }
            }
            Err(error) => abort = Some(*error),
        }
        rpc.reply = Some(outcome);
        let bulk_md = rpc.bulk_md;
        if cancel_bulk {
            if let Some(md) = bulk_md {
                let _ = self.node.md_unlink(md);
            }
        }
        if let Some(why) = abort {
            self.abort(ClientRpcId(id), why);
        }
        if let Some(memory) = memory {
            self.recycle(memory);
        }
        self.check_client(id);
    }

    fn client_bulk_event(&mut self, id: u64, event: &mut Event) {
        let memory = event.memory.take();
        let Some(rpc) = self.clients.get_mut(&id) else {
            if let Some(memory) = memory {
                self.recycle(memory);
            }
            return;
        };
        if event.unlinked {
            rpc.bulk_md = None;
            rpc.bulk_ended = true;
        }
        if memory.is_some() {
            rpc.bulk_memory = memory;
        }
        rpc.bulk_status = Some(match event.kind {
            EventKind::Unlink => Err(RpcError::Interrupted),
            _ if event.status.is_ok() => Ok(()),
            _ => Err(RpcError::Network(event.status)),
        });
        if let Some(Err(error)) = rpc.bulk_status {
            if !rpc.bulk_cancelled {
                self.abort(ClientRpcId(id), error);
            }
        }
        self.check_client(id);
    }

    /// Completes a client RPC once all its MDs are gone. lustre: rpc.c `srpc_send_rpc()`
    /// (`SWI_STATE_REPLY_RECEIVED`), `srpc_client_rpc_done()`.
    fn check_client(&mut self, id: u64) {
        let done = self.clients.get(&id).is_some_and(|rpc| !rpc.live());
        if !done {
            return;
        }
        let Some(rpc) = self.clients.remove(&id) else { return };
        self.pool.release(rpc.charged);
        let reply = rpc.reply.and_then(Result::ok);
        let status = if let Some(why) = rpc.aborted {
            Err(why)
        } else if let Some(Err(error)) = rpc.request_status {
            Err(error)
        } else if reply.is_none() {
            Err(RpcError::BadReply)
        } else if rpc.has_bulk && !rpc.bulk_cancelled {
            match rpc.bulk_status {
                Some(Ok(())) => Ok(()),
                Some(Err(error)) => Err(error),
                None => Err(RpcError::Interrupted),
            }
        } else {
            Ok(())
        };
        self.done.push_back(ClientOutcome {
            tag: rpc.tag,
            status,
            reply: if status.is_ok() { reply } else { None },
            raw_reply: if status.is_ok() { rpc.raw_reply } else { None },
            bulk: rpc.bulk_memory,
            latency: rpc.started.elapsed(),
        });
        self.wake = true;
    }

    /// Aborts client RPCs past their deadline. lustre: rpc.c `srpc_client_rpc_expired()`.
    fn expire(&mut self, now: Instant) {
        let expired: Vec<u64> = self
            .clients
            .iter()
            .filter(|(_, rpc)| rpc.aborted.is_none() && rpc.deadline.is_some_and(|at| at <= now))
            .map(|(id, _)| *id)
            .collect();
        for id in expired {
            if let Some(rpc) = self.clients.get(&id) {
                tracing::warn!(dest = %rpc.dest, "selftest client RPC expired");
            }
            self.counters.rpcs_expired = self.counters.rpcs_expired.wrapping_add(1);
            self.abort(ClientRpcId(id), RpcError::TimedOut);
        }
    }

    /// Hands finished work to the application (outside the event fold, so the application
    /// may start new RPCs freely).
    fn deliver<A: App>(&mut self, app: &mut A) {
        loop {
            if let Some((id, status, memory)) = self.bulk_ready.pop_front() {
                let Some(incoming) = self.servers.get(&id).map(|rpc| rpc.incoming.clone()) else {
                    if let Some(memory) = memory {
                        self.recycle(memory);
                    }
                    continue;
                };
                let verdict = app.bulk_ready(self, &incoming, status, memory);
                self.server_verdict(id, verdict);
                continue;
            }
            let Some(outcome) = self.done.pop_front() else { break };
            app.client_done(self, outcome);
        }
    }

    /// The node shut down under us: every RPC fails.
    fn fail_all(&mut self) {
        let ids: Vec<u64> = self.clients.keys().copied().collect();
        for id in ids {
            if let Some(rpc) = self.clients.remove(&id) {
                self.pool.release(rpc.charged);
                self.done.push_back(ClientOutcome {
                    tag: rpc.tag,
                    status: Err(RpcError::ShutDown),
                    reply: None,
                    raw_reply: None,
                    bulk: None,
                    latency: rpc.started.elapsed(),
                });
            }
        }
        for (_, rpc) in self.servers.drain() {
            self.pool.release(rpc.charged);
        }
        self.wake = true;
    }

    /// Releases everything posted on the node: request buffers, server RPCs in progress and
    /// client RPCs (their final events go to a queue nobody reads any more).
    fn shutdown(&mut self) {
        // Posted request buffers, found by their slots; taken here, so a second shutdown
        // (`Endpoint::shutdown`, then its drop) finds none.
        let buffers: Vec<(Key, MdHandle)> = self
            .slots
            .iter()
            .filter_map(|(key, slot)| match slot {
                Slot::RequestBuffer(_, _, Some(md)) => Some((key, *md)),
                _ => None,
            })
            .collect();
        if self.closed && self.clients.is_empty() && buffers.is_empty() {
            return;
        }
        self.closed = true;
        // Calls never made: their slots go with them.
        for call in std::mem::take(&mut self.held) {
            for token in call.tokens() {
                self.slots.discard(Key::from_u64(token));
            }
        }
        let portals: BTreeSet<u32> = self
            .services
            .keys()
            .filter_map(|id| SrpcService::from_id(*id))
            .map(SrpcService::request_portal)
            .collect();
        for portal in portals {
            let _ = self.node.clear_lazy_portal(portal);
        }
        self.services.clear();
        for (key, md) in buffers {
            // Their UNLINK events then find no slot, as nobody reads the queue any more.
            self.slots.discard(key);
            let _ = self.node.md_unlink(md);
        }
        let ids: Vec<u64> = self.clients.keys().copied().collect();
        for id in ids {
            self.abort(ClientRpcId(id), RpcError::ShutDown);
        }
        let mds: Vec<MdHandle> =
            self.servers.values().flat_map(|rpc| [rpc.bulk_md, rpc.reply_md]).flatten().collect();
        for md in mds {
            let _ = self.node.md_unlink(md);
        }
        self.fail_all();
        self.done.clear();
        self.bulk_ready.clear();
    }
}

/// Sets `rpyid` (and `bulkid`) in a request body.
fn set_match_bits(body: &mut SrpcBody, reply: u64, bulk: Option<u64>) {
    match body {
        SrpcBody::MakeSessionRequest(r) => r.reply_match_bits = reply,
        SrpcBody::RemoveSessionRequest(r) => r.reply_match_bits = reply,
        SrpcBody::BatchRequest(r) => r.reply_match_bits = reply,
        SrpcBody::StatRequest(r) => r.reply_match_bits = reply,
        SrpcBody::DebugRequest(r) => r.reply_match_bits = reply,
        SrpcBody::PingRequest(r) => r.reply_match_bits = reply,
        SrpcBody::JoinRequest(r) => r.reply_match_bits = reply,
        SrpcBody::TestRequest(r) => {
            r.reply_match_bits = reply;
            r.bulk_match_bits = bulk.unwrap_or(0);
        }
        SrpcBody::BrwRequest(r) => {
            r.reply_match_bits = reply;
            r.bulk_match_bits = bulk.unwrap_or(0);
        }
        _ => {}
    }
}

/// A request's `bulkid`, for the bodies that have one.
fn bulk_match_bits(body: &SrpcBody) -> Option<u64> {
    match body {
        SrpcBody::TestRequest(r) => Some(r.bulk_match_bits),
        SrpcBody::BrwRequest(r) => Some(r.bulk_match_bits),
        _ => None,
    }
}

/// A reply body of `service`'s reply type carrying only `status`.
pub(crate) fn error_body(service: SrpcService, status: u32) -> SrpcBody {
    use ulnet::proto::wire::selftest::{
        BatchReply, BrwReply, DebugReply, JoinReply, LstName, MakeSessionReply, PingReply,
        RemoveSessionReply, SessionId, StatReply, TestReply,
    };
    let session = SessionId::NONE;
    match service {
        SrpcService::Debug => SrpcBody::DebugReply(DebugReply {
            status,
            session,
            timeout_seconds: 0,
            batch_count: 0,
            name: LstName::default(),
        }),
        SrpcService::MakeSession => SrpcBody::MakeSessionReply(MakeSessionReply {
            status,
            session,
            timeout_seconds: 0,
            name: LstName::default(),
        }),
        SrpcService::RemoveSession => {
            SrpcBody::RemoveSessionReply(RemoveSessionReply { status, session })
        }
        SrpcService::Batch => {
            SrpcBody::BatchReply(BatchReply { status, session, active: 0, time: 0 })
        }
        SrpcService::Test => SrpcBody::TestReply(TestReply { status, session }),
        SrpcService::QueryStat => SrpcBody::StatReply(StatReply {
            status,
            session,
            framework: Default::default(),
            rpc: Default::default(),
            lnet: Default::default(),
        }),
        SrpcService::Join => SrpcBody::JoinReply(JoinReply {
            status,
            session,
            timeout_seconds: 0,
            session_name: LstName::default(),
        }),
        SrpcService::Brw => SrpcBody::BrwReply(BrwReply { status }),
        SrpcService::Ping => SrpcBody::PingReply(PingReply { status, magic: 0, sequence: 0 }),
    }
}

/// A minimal request body of `service`'s request type with only `rpyid` set (to answer a
/// request we could not parse beyond its version).
fn with_reply_bits(service: SrpcService, reply_match_bits: u64) -> SrpcBody {
    use ulnet::proto::wire::selftest::{
        BatchId, BatchRequest, BrwRequest, DebugRequest, JoinRequest, LstName, MakeSessionRequest,
        PingRequest, RemoveSessionRequest, SessionId, StatRequest, TestParams, TestRequest,
    };
    let session = SessionId::NONE;
    match service {
        SrpcService::Debug => {
            SrpcBody::DebugRequest(DebugRequest { reply_match_bits, session, flags: 0 })
        }
        SrpcService::MakeSession => SrpcBody::MakeSessionRequest(MakeSessionRequest {
            reply_match_bits,
            session,
            force: false,
            name: LstName::default(),
        }),
        SrpcService::RemoveSession => {
            SrpcBody::RemoveSessionRequest(RemoveSessionRequest { reply_match_bits, session })
        }
        SrpcService::Batch => SrpcBody::BatchRequest(BatchRequest {
            reply_match_bits,
            session,
            batch: BatchId(0),
            opcode: 0,
            test_index: 0,
            arg: 0,
        }),
        SrpcService::Test => SrpcBody::TestRequest(TestRequest {
            reply_match_bits,
            bulk_match_bits: 0,
            session,
            batch: BatchId(0),
            service: 0,
            loop_count: 0,
            concurrency: 0,
            is_client: false,
            stop_on_error: false,
            dest_count: 0,
            params: TestParams::Unknown([0; 12]),
        }),
        SrpcService::QueryStat => {
            SrpcBody::StatRequest(StatRequest { reply_match_bits, session, stat_type: 0 })
        }
        SrpcService::Join => SrpcBody::JoinRequest(JoinRequest {
            reply_match_bits,
            session,
            group: LstName::default(),
        }),
        SrpcService::Brw => SrpcBody::BrwRequest(BrwRequest {
            reply_match_bits,
            bulk_match_bits: 0,
            direction: 0,
            length: 0,
            check_mode: 0,
        }),
        SrpcService::Ping => SrpcBody::PingRequest(PingRequest {
            reply_match_bits,
            magic: 0,
            sequence: 0,
            time_seconds: 0,
            time_nanoseconds: 0,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::{
        FRESH_BUFFER_FILL, MatchBitsBlock, SHARED_SOURCES, SharedSources, committed_buffer,
    };
    use std::collections::HashSet;
    use std::sync::Arc;

    #[test]
    fn match_bits_stay_unique_across_endpoints_and_blocks() {
        let (mut first, mut second) = (MatchBitsBlock::default(), MatchBitsBlock::default());
        let mut seen = HashSet::new();
        let rounds = MatchBitsBlock::SIZE * 2 + 3;
        for _ in 0..rounds {
            assert!(seen.insert(first.take()), "first endpoint repeated match bits");
            assert!(seen.insert(second.take()), "second endpoint repeated match bits");
        }
        assert_eq!(seen.len() as u64, rounds * 2);
        // Within a block an endpoint's bits are consecutive, as one RPC's reply and bulk were.
        let bits = first.take();
        if first.next != first.end {
            assert_eq!(first.take(), bits + 1);
        }
    }

    #[test]
    fn one_source_per_key_made_once() {
        let mut sources = SharedSources::default();
        let mut fills = 0;
        let mut fill = |buffer: &mut [u8]| {
            fills += 1;
            buffer.fill(7);
            true
        };
        let first = sources.get((4096, 0, 1, 9), &mut fill).unwrap();
        let again = sources.get((4096, 0, 1, 9), &mut fill).unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        let other = sources.get((4096, 8, 1, 9), &mut fill).unwrap();
        assert!(!Arc::ptr_eq(&first, &other));
        assert_eq!(fills, 2);
        assert_eq!(first.len(), 4096);
        assert!(first.iter().all(|&byte| byte == 7));
        assert!(sources.get((8192, 0, 1, 9), |_| false).is_none(), "a refused fill is no source");
        assert!(sources.get((8192, 0, 1, 9), |_| true).is_some(), "and is not remembered");
    }

    #[test]
    fn sources_are_bounded_and_live_on_while_used() {
        let mut sources = SharedSources::default();
        let kept = sources.get((8, 0, 0, 0), |_| true).unwrap();
        for offset in 1..=SHARED_SOURCES {
            sources.get((8, offset, 0, 0), |_| true).unwrap();
        }
        assert!(sources.0.len() <= SHARED_SOURCES);
        assert_eq!(*kept, vec![FRESH_BUFFER_FILL; 8], "still readable by its holder");
        let remade = sources.get((8, 0, 0, 0), |_| true).unwrap();
        assert!(!Arc::ptr_eq(&kept, &remade));
    }

    #[test]
    fn a_new_bulk_buffer_is_written_not_left_zero_mapped() {
        let buffer = committed_buffer(3 * 4096 + 8);
        assert_eq!(buffer.len(), 3 * 4096 + 8);
        assert!(buffer.iter().all(|&byte| byte == FRESH_BUFFER_FILL));
    }
}
