//! Output copied aside to be written without the core lock.
//!
//! A connection's writer (under the core lock) copies frames with small payloads, headers and
//! all, into the connection's outbox and completes them as if written; the thread that did so
//! writes the outbox once it has released the core lock ([`Wakes::write`]), so the system
//! call, the larger half of a small message's cost, no longer holds up the node's other
//! threads. Frames with large payloads are written zero-copy from MD memory under the lock, as
//! before, but only when the outbox is empty, so the stream keeps its order: while the outbox
//! holds bytes, later frames wait in the framing (`deferred`) and whoever empties it nudges
//! the connection's task to write them.
//!
//! A message copied here is complete, as one whose bytes the socket took is: if the connection
//! fails before they leave, they are lost like the socket's own unsent bytes. The outbox's
//! unsent bytes count as the socket's for the send deadline (`Conn::set_socket_unsent`), so
//! a peer that stops reading still times the connection out. The kernel writes from its
//! per-CPT scheduler threads with only that connection's locks held (socklnd_cb.c
//! `ksocknal_process_transmit()`); decision 0029 says why ulnet copies small frames instead.
//!
//! [`Wakes::write`]: crate::driver::Wakes::write

use std::io::{self, IoSlice};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::net::TcpStream;
use tokio::sync::Notify;

use crate::driver::Counters;

/// Largest payload a frame may carry to be copied into the outbox: a small RPC's bulk (4 KiB)
/// fits; larger payloads are written from MD memory without a copy.
pub const COPY_MAX_PAYLOAD: u32 = 4 << 10;

/// Most bytes an outbox holds unwritten; beyond it, frames wait in the framing. It bounds what
/// a peer that stops reading makes the node keep per connection, on top of the socket's buffer.
pub const OUTBOX_MAX_BYTES: usize = 1 << 20;

/// A connection's copied output, shared by its task, the threads that stage output for it and
/// the thread writing it.
pub(crate) struct Outbox {
    state: Mutex<State>,
    stream: Arc<TcpStream>,
    /// Wakes the connection's task: to write what a full socket left, to write frames that
    /// waited for the outbox, or to close the connection after a failed write.
    nudge: Arc<Notify>,
    counters: Arc<Counters>,
}

#[derive(Default)]
struct State {
    /// Staged bytes not yet taken by a writer, in stream order.
    pending: Vec<u8>,
    /// A buffer kept for the next take, so staging reuses its allocation.
    spare: Vec<u8>,
    /// A thread took bytes out and is writing them now.
    writing: bool,
    /// The socket was full: the connection's task writes the rest once it is writable.
    blocked: bool,
    /// A write failed: the connection's task closes the connection.
    failed: Option<io::ErrorKind>,
    /// Frames wait in the framing for the outbox to empty.
    deferred: bool,
    /// Bytes staged and not yet taken by the socket (pending, plus those being written).
    unsent: usize,
}

/// How [`Outbox::write_out`] left the outbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Written {
    /// Empty, or another thread is writing it.
    Idle,
    /// Empty, and frames wait in the framing for it: the task should write them.
    Deferred,
    /// The socket is full: the task should wait until it is writable.
    Blocked,
    /// A write failed: the task should close the connection.
    Failed,
}

/// What staging frames found (see [`Outbox::stage`]).
pub(super) struct Staging<'a> {
    state: MutexGuard<'a, State>,
    /// The outbox had nothing staged, being written or blocked when the guard was taken.
    was_idle: bool,
}

impl Staging<'_> {
    /// Nothing staged, being written or left by a full socket: a frame may be written straight
    /// to the socket without overtaking staged bytes.
    pub(super) fn is_idle(&self) -> bool {
        self.was_idle && self.state.pending.is_empty()
    }

    /// Whether `bytes` more fit under [`OUTBOX_MAX_BYTES`] (always, into an empty outbox).
    pub(super) fn has_room(&self, bytes: usize) -> bool {
        self.state.unsent == 0 || self.state.unsent + bytes <= OUTBOX_MAX_BYTES
    }

    pub(super) fn append(&mut self, bytes: &[u8]) {
        self.state.pending.extend_from_slice(bytes);
        self.state.unsent += bytes.len();
    }

    /// Frames are left in the framing until the outbox empties.
    pub(super) fn defer(&mut self) {
        self.state.deferred = true;
    }

    /// Whether the staging thread should write the outbox once it releases the core lock:
    /// there is something to write and nobody else will (no writer now, no full socket the
    /// task waits on).
    pub(super) fn wants_writer(&self) -> bool {
        !self.state.pending.is_empty()
            && !self.state.writing
            && !self.state.blocked
            && self.state.failed.is_none()
    }
}

impl Outbox {
    pub(super) fn new(stream: Arc<TcpStream>, nudge: Arc<Notify>, counters: Arc<Counters>) -> Self {
        Self { state: Mutex::new(State::default()), stream, nudge, counters }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Opens the outbox for staging (with the core lock held; the outbox's own lock is never
    /// held while taking the core lock).
    pub(super) fn stage(&self) -> Staging<'_> {
        let state = self.lock();
        let was_idle = state.unsent == 0 && !state.writing && !state.blocked;
        Staging { state, was_idle }
    }

    /// Bytes staged and not yet taken by the socket.
    pub(super) fn unsent(&self) -> usize {
        self.lock().unsent
    }

    /// Whether the socket was full: the task should wait for it to become writable.
    pub(super) fn is_blocked(&self) -> bool {
        self.lock().blocked
    }

    /// The error a write met, once: the task closes the connection.
    pub(super) fn take_failure(&self) -> Option<io::ErrorKind> {
        self.lock().failed.take()
    }

    /// Writes what is staged, from a thread other than the connection's task, and wakes the
    /// task if it has something to do about it: wait for room in the socket, close the
    /// connection after a failed write, or write frames that waited for the outbox.
    pub(crate) fn write_out_and_tell(&self) {
        if self.write_out() != Written::Idle {
            self.nudge.notify_one();
        }
    }

    /// Writes what is staged, with no core lock held, until it is all written, the socket is
    /// full (the task then waits for room) or a write fails (the task then closes the
    /// connection). Leaves at once if another thread is writing: it writes what was staged
    /// meanwhile before it stops.
    pub(super) fn write_out(&self) -> Written {
        let mut state = self.lock();
        if state.writing {
            return Written::Idle;
        }
        if state.failed.is_some() {
            return Written::Failed;
        }
        state.blocked = false;
        loop {
            if state.pending.is_empty() {
                return match std::mem::take(&mut state.deferred) {
                    true => Written::Deferred,
                    false => Written::Idle,
                };
            }
            let spare = std::mem::take(&mut state.spare);
            let mut bytes = std::mem::replace(&mut state.pending, spare);
            state.writing = true;
            drop(state);
            let (written, outcome) = self.write_all(&bytes);
            state = self.lock();
            state.writing = false;
            state.unsent -= written.min(state.unsent);
            match outcome {
                Ok(()) => {
                    bytes.clear();
                    if state.spare.capacity() < bytes.capacity() {
                        state.spare = bytes;
                    }
                }
                Err(error) => {
                    if error.kind() == io::ErrorKind::WouldBlock {
                        // What is left goes back in front of what was staged meanwhile.
                        bytes.drain(..written);
                        bytes.extend_from_slice(&state.pending);
                        state.pending.clear();
                        state.spare = std::mem::replace(&mut state.pending, bytes);
                        state.blocked = true;
                        return Written::Blocked;
                    }
                    state.failed = Some(error.kind());
                    return Written::Failed;
                }
            }
        }
    }

    /// Non-blocking writes of `bytes` until all are written or the socket answers otherwise;
    /// returns how many were written.
    fn write_all(&self, bytes: &[u8]) -> (usize, io::Result<()>) {
        let counters = &self.counters;
        let mut written = 0;
        while let Some(rest) = bytes.get(written..).filter(|rest| !rest.is_empty()) {
            counters.socket_writes.fetch_add(1, Ordering::Relaxed);
            counters.socket_writes_unlocked.fetch_add(1, Ordering::Relaxed);
            match super::sys::send_vectored(&self.stream, &[IoSlice::new(rest)]) {
                Ok(0) => return (written, Err(io::ErrorKind::WriteZero.into())),
                Ok(count) => written += count,
                Err(error) => return (written, Err(error)),
            }
        }
        (written, Ok(()))
    }
}
