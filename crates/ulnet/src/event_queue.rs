//! Event queues: where a node puts the events of the MDs attached to them.
//!
//! # Why queues you create, rather than one stream per node
//!
//! LNet delivers each MD's events to the event queue (today, the handler) named in the MD, so
//! independent users of one node (an application, a selftest service, a ping responder) each
//! see only their own events, in their own thread or task, without a demultiplexer in between
//! and without one slow consumer holding up the others. ulnet keeps that shape: you create as
//! many [`EventQueue`]s as you have consumers and name one when you attach or bind an MD.
//! lustre: include/linux/lnet/api.h `LNetEQAlloc()`, lnet/lnet/lib-eq.c (before 2.15), and the
//! `md.handler` that replaced it.
//!
//! # Handlers: events on the producing thread
//!
//! A queue may also have a handler ([`Node::event_queue_with_handler`]), called on the thread
//! that produced its events (an I/O thread, or the caller whose operation completed) as soon
//! as the node's lock is released. This is Lustre's model: an MD's `handler` runs in the
//! context that finalized the message, so a service answers a request without first waking
//! a thread of its own (about 30 us on small virtual machines). Whatever the handler leaves
//! in the queue wakes the queue's other consumers as usual.
//! lustre: lnet/lnet/lib-msg.c `lnet_msg_detach_md()` calling `md->md_handler`.
//!
//! # Bounds
//!
//! The core already bounds the events waiting inside it; a queue also has a capacity of its own.
//! An event that finds its queue full is dropped and counted in [`EventQueue::dropped`] (LNet's
//! `-EOVERFLOW`), because the core must never wait for a consumer. Dropping the event that
//! carries an unlinked MD's memory drops that memory: size queues for the MDs you keep.

use std::cell::Cell;
use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, Weak};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use ulnet_proto::engine::Event;

#[cfg(doc)]
use crate::Node;
use crate::driver::{self, Shared};
use crate::error::RecvError;

/// A queue's handler (see "Handlers" above): takes what it can from the queue it is given.
/// It must not block (it may be running on a node's I/O thread), and it may call the node.
pub type EventHandler = Box<dyn Fn(&EventQueue) + Send + Sync>;

/// Largest capacity a queue may have; requests beyond are clamped. Matches the core's bound on
/// pending events (`MAX_PENDING_EVENTS`), so one queue can hold everything the core could.
pub const MAX_EVENT_QUEUE_CAPACITY: usize = ulnet_proto::engine::node::MAX_PENDING_EVENTS;

/// A bounded queue of events, shared by the node that fills it and the consumers that drain it.
///
/// Cheap to clone: clones are handles to the same queue. Consume it in one of three forms:
/// [`try_recv`](Self::try_recv), the blocking [`recv_timeout`](Self::recv_timeout), or
/// asynchronously with [`next`](Self::next) (or as a [`futures_core::Stream`]). After the node
/// shuts down and the last event is taken, the blocking form returns [`RecvError::Closed`] and
/// the async forms return `None`.
///
/// ```
/// use std::time::Duration;
/// use ulnet::{Memory, MdSpec, Node, UnlinkMode};
///
/// let node = Node::loopback().unwrap();
/// let events = node.event_queue(16);
/// let md = node
///     .md_bind(MdSpec::new(Memory::new(vec![1, 2, 3])), UnlinkMode::Retain, Some(&events))
///     .unwrap();
/// node.md_unlink(md).unwrap();
/// let unlink = events.recv_timeout(Duration::from_secs(10)).unwrap();
/// assert!(unlink.unlinked);
/// assert_eq!(unlink.memory.unwrap().to_vec(), [1, 2, 3]);
/// ```
#[derive(Clone)]
pub struct EventQueue {
    pub(crate) shared: Arc<EqShared>,
}

impl EventQueue {
    /// Takes the oldest event if there is one.
    pub fn try_recv(&self) -> Result<Event, RecvError> {
        let result = self.take();
        if let Err(RecvError::Empty) = result {
            self.shared.poll_found_empty();
        }
        result
    }

    /// Takes up to `max` waiting events at once, appending them to `into`, under one lock of
    /// the queue: cheaper than as many [`try_recv`](Self::try_recv) calls for a consumer that
    /// handles events in bursts. Returns how many it took; with none waiting, the same errors
    /// as `try_recv` (and, like it, writes what this thread's calls held back).
    pub fn try_recv_many(
        &self,
        into: &mut VecDeque<Event>,
        max: usize,
    ) -> Result<usize, RecvError> {
        let taken = {
            let mut state = self.shared.lock();
            let count = state.events.len().min(max);
            if count == 0 && max > 0 {
                if state.closed {
                    return Err(RecvError::Closed);
                }
            } else if count == state.events.len() && into.is_empty() {
                // All of them into an empty buffer: trade buffers, move nothing.
                std::mem::swap(&mut state.events, into);
                self.shared.len.store(0, Ordering::Release);
            } else {
                into.extend(state.events.drain(..count));
                self.shared.len.store(state.events.len(), Ordering::Release);
            }
            count
        };
        if taken == 0 && max > 0 {
            self.shared.poll_found_empty();
            return Err(RecvError::Empty);
        }
        Ok(taken)
    }

    /// Waits up to `timeout` for an event. Spins for the node's spin time before sleeping, since
    /// waking a sleeping thread costs tens of microseconds on small virtual machines.
    pub fn recv_timeout(&self, timeout: Duration) -> Result<Event, RecvError> {
        match self.take() {
            Err(RecvError::Empty) => {}
            other => return other,
        }
        self.shared.before_wait();
        let start = Instant::now();
        let deadline = start.checked_add(timeout);
        let spin_until = start + self.shared.spin.min(timeout);
        loop {
            if self.shared.len.load(Ordering::Acquire) > 0 || self.shared.is_closed() {
                match self.take() {
                    Err(RecvError::Empty) => {}
                    other => return other,
                }
            }
            if Instant::now() >= spin_until {
                break;
            }
            std::hint::spin_loop();
        }
        let mut state = self.shared.lock();
        loop {
            if let Some(event) = self.shared.pop(&mut state) {
                return Ok(event);
            }
            if state.closed {
                return Err(RecvError::Closed);
            }
            let remaining = match deadline {
                Some(deadline) => deadline.saturating_duration_since(Instant::now()),
                None => Duration::MAX,
            };
            if remaining.is_zero() {
                return Err(RecvError::Timeout);
            }
            state.sleepers += 1;
            let (next, _) = self
                .shared
                .ready
                .wait_timeout(state, remaining)
                .unwrap_or_else(PoisonError::into_inner);
            state = next;
            state.sleepers -= 1;
        }
    }

    /// Waits for the next event; `None` once the node has shut down and the queue is empty.
    /// Works on any executor: it needs a waker, not a tokio runtime.
    pub fn next(&self) -> impl Future<Output = Option<Event>> + '_ {
        std::future::poll_fn(move |context| self.shared.poll_next(context))
    }

    /// Events waiting now.
    pub fn len(&self) -> usize {
        self.shared.len.load(Ordering::Acquire)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The most events the queue holds.
    pub fn capacity(&self) -> usize {
        self.shared.capacity
    }

    /// Events dropped because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }

    /// The node shut down (events may still be waiting).
    pub fn is_closed(&self) -> bool {
        self.shared.is_closed()
    }
}

impl EventQueue {
    /// [`try_recv`](Self::try_recv) without the hand-over to a waiting thread.
    fn take(&self) -> Result<Event, RecvError> {
        let mut state = self.shared.lock();
        match self.shared.pop(&mut state) {
            Some(event) => Ok(event),
            None if state.closed => Err(RecvError::Closed),
            None => Err(RecvError::Empty),
        }
    }
}

impl fmt::Debug for EventQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventQueue")
            .field("len", &self.len())
            .field("capacity", &self.capacity())
            .field("dropped", &self.dropped())
            .finish()
    }
}

impl futures_core::Stream for EventQueue {
    type Item = Event;

    fn poll_next(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Option<Event>> {
        self.shared.poll_next(context)
    }
}

// ------------------------------------------------------------------------------- internals

/// The queue itself, shared by every handle and by the node's routing table.
pub(crate) struct EqShared {
    /// The node that created the queue (MDs of other nodes may not name it).
    pub(crate) node_id: u64,
    /// Unique in the process, never 0: the handler an MD names its queue by (`MdSpec::handler`).
    pub(crate) id: u64,
    /// That node, for [`driver::before_wait`] (weak: the node owns its queues).
    node: Weak<Shared>,
    capacity: usize,
    spin: Duration,
    state: Mutex<EqState>,
    ready: Condvar,
    /// `state.events.len()`, readable without the lock for spinning.
    len: AtomicUsize,
    dropped: AtomicU64,
    handler: Option<EventHandler>,
}

thread_local! {
    /// The queue whose handler this thread is running (its address), so the events that
    /// handler's own calls produce are left to it rather than handled re-entrantly.
    static HANDLING: Cell<usize> = const { Cell::new(0) };
}

#[derive(Default)]
struct EqState {
    events: VecDeque<Event>,
    closed: bool,
    /// Threads blocked in `recv_timeout`; the condvar is signalled only when there are some.
    sleepers: usize,
    /// Tasks waiting in `next` / `poll_next`.
    wakers: Vec<Waker>,
}

impl EqShared {
    pub(crate) fn new(
        node: &Arc<Shared>,
        capacity: usize,
        handler: Option<EventHandler>,
    ) -> Arc<Self> {
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        Arc::new(Self {
            node_id: node.id,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            node: Arc::downgrade(node),
            capacity: capacity.clamp(1, MAX_EVENT_QUEUE_CAPACITY),
            spin: node.spin,
            state: Mutex::new(EqState::default()),
            ready: Condvar::new(),
            len: AtomicUsize::new(0),
            dropped: AtomicU64::new(0),
            handler,
        })
    }

    /// Queues `events` under one lock, leaving `events` empty (into an empty queue the two
    /// trade buffers: nothing is moved); those beyond the capacity are dropped and counted.
    /// Returns true when a consumer is waiting and must be woken (by [`wake`](Self::wake),
    /// which the caller runs after releasing the node's lock).
    pub(crate) fn push_all(&self, events: &mut VecDeque<Event>) -> bool {
        let mut state = self.lock();
        if state.closed {
            events.clear();
            return false;
        }
        let room = self.capacity.saturating_sub(state.events.len());
        if events.len() > room {
            self.dropped.fetch_add((events.len() - room) as u64, Ordering::Relaxed);
            events.truncate(room);
        }
        if events.is_empty() {
            return false;
        }
        if state.events.is_empty() {
            std::mem::swap(&mut state.events, events);
        } else {
            state.events.append(events);
        }
        self.len.store(state.events.len(), Ordering::Release);
        self.handler.is_some() || state.sleepers > 0 || !state.wakers.is_empty()
    }

    /// Runs the handler, if any, then wakes the consumers if events remain. Call with no core
    /// lock held.
    pub(crate) fn wake(self: &Arc<Self>) {
        if let Some(handler) = &self.handler {
            let address = Arc::as_ptr(self) as usize;
            if HANDLING.get() == address {
                // Produced by this handler's own calls: it takes them before it returns, or
                // wakes the consumers then.
                return;
            }
            // The handler's calls are one stream (see "Batching" in driver::hold) that nobody
            // waits on, from its first call: what they all produce leaves in one write per
            // socket when the handler returns, not the first call's output alone and the
            // rest after it (one more write, and one more turn for the peer reading it).
            let stream = self.node.upgrade().map(driver::HandlerStream::begin);
            let outer = HANDLING.replace(address);
            handler(&EventQueue { shared: Arc::clone(self) });
            HANDLING.set(outer);
            drop(stream);
            if self.len.load(Ordering::Acquire) == 0 && !self.is_closed() {
                return;
            }
        }
        let (wakers, sleepers) = {
            let mut state = self.lock();
            (std::mem::take(&mut state.wakers), state.sleepers)
        };
        if sleepers > 0 {
            self.ready.notify_all();
        }
        for waker in wakers {
            waker.wake();
        }
    }

    /// The node shut down: no more events; waiters see the end once the queue is drained.
    pub(crate) fn close(self: &Arc<Self>) {
        self.lock().closed = true;
        self.wake();
    }

    fn is_closed(&self) -> bool {
        self.lock().closed
    }

    fn pop(&self, state: &mut EqState) -> Option<Event> {
        let event = state.events.pop_front();
        self.len.store(state.events.len(), Ordering::Release);
        event
    }

    /// A consumer found the queue empty and will wait: the node writes what callers' threads
    /// held back (see "Batching" in [`crate::driver::hold`]). Call without this queue's lock (the
    /// core lock comes first).
    fn before_wait(&self) {
        if let Some(node) = self.node.upgrade() {
            driver::before_wait(&node);
        }
    }

    /// A poll found the queue empty. Polling is waiting too: what this thread's calls held
    /// back may be what it polls for, so it is written now; except in this queue's own
    /// handler, whose calls stay one stream until it returns (written then, in [`wake`]).
    ///
    /// [`wake`]: Self::wake
    fn poll_found_empty(&self) {
        if HANDLING.get() != std::ptr::from_ref(self) as usize {
            self.before_wait();
        }
    }

    fn poll_next(&self, context: &mut Context<'_>) -> Poll<Option<Event>> {
        if self.len.load(Ordering::Acquire) == 0 {
            self.before_wait();
        }
        let mut state = self.lock();
        if let Some(event) = self.pop(&mut state) {
            return Poll::Ready(Some(event));
        }
        if state.closed {
            return Poll::Ready(None);
        }
        if !state.wakers.iter().any(|waker| waker.will_wake(context.waker())) {
            state.wakers.push(context.waker().clone());
        }
        Poll::Pending
    }

    fn lock(&self) -> MutexGuard<'_, EqState> {
        // Nothing panics while holding this lock; recover the state if something ever did.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl fmt::Debug for EqShared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EqShared")
            .field("node_id", &self.node_id)
            .field("handler", &self.handler.is_some())
            .finish_non_exhaustive()
    }
}
