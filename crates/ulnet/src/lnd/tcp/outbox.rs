//! Output set aside to be written without any lock.
//!
//! A connection's writer stages frames in the connection's outbox and completes them as a
//! written message is completed: headers and small payloads are copied, a large payload is
//! held by reference ([`PinnedBytes`]: the MD's buffer, reference-counted rather than copied).
//! The thread that staged them writes the outbox once it holds no lock ([`Wakes::write`]), or
//! at once for a burst's first half, so the system call, and for a large payload the copy into
//! the socket, holds up none of the node's other threads. The outbox's bytes go out in the
//! order they were staged: when it is full, later frames wait in the framing (`deferred`) and
//! whoever empties it nudges the connection's task to stage them.
//!
//! A small message staged here is complete, as one whose bytes the socket took is: if the
//! connection fails before they leave, they are lost like the socket's own unsent bytes. A
//! large one asked for a ZC-ACK (decision 0004), so it completes only when the peer has it. The
//! outbox's unsent bytes count as the socket's for the send deadline
//! (`Conn::set_socket_unsent`), so a peer that stops reading still times the connection out.
//! The kernel writes from its per-CPT scheduler threads with only that connection's locks held
//! (socklnd_cb.c `ksocknal_process_transmit()`); decision 0029 says why ulnet stages instead.
//!
//! [`Wakes::write`]: crate::driver::Wakes::write

use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use smallvec::SmallVec;
use tokio::net::TcpStream;
use tokio::sync::Notify;
use ulnet_proto::engine::PinnedBytes;

use crate::driver::Counters;

/// Largest payload a frame may carry to be copied into the outbox: a small RPC's bulk (4 KiB)
/// fits; larger payloads are pinned, or written from MD memory, without a copy.
pub const COPY_MAX_PAYLOAD: u32 = 4 << 10;

/// Most copied bytes an outbox holds unwritten; beyond it, frames wait in the framing. It
/// bounds what a peer that stops reading makes the node keep per connection, on top of the
/// socket's buffer.
pub const OUTBOX_MAX_COPIED: usize = 1 << 20;

/// Most bytes, copied and pinned, an outbox holds unwritten (a frame larger than this is still
/// staged into an empty outbox). Pinned bytes are MD memory the node holds anyway until the
/// peer acknowledges them; the bound keeps a stalled connection from holding more than this
/// of it after the MDs are gone.
pub const OUTBOX_MAX_BYTES: usize = 4 << 20;

/// Most slices gathered into one write of the outbox.
const MAX_WRITE_SLICES: usize = 64;

/// A connection's staged output, shared by its task, the threads that stage output for it and
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
    /// Staged output not yet taken by a writer, in stream order.
    pending: Staged,
    /// Buffers kept for the next take, so staging reuses their allocations.
    spare: Staged,
    /// A thread took output out and is writing it now.
    writing: bool,
    /// The socket was full: the connection's task writes the rest once it is writable.
    blocked: bool,
    /// A write failed: the connection's task closes the connection.
    failed: Option<io::ErrorKind>,
    /// Frames wait in the framing for the outbox to empty.
    deferred: bool,
    /// Bytes staged and not yet taken by the socket (pending, plus those being written).
    unsent: usize,
    /// The copied part of `unsent`.
    unsent_copied: usize,
    /// The connection's task is waiting for the socket to become writable: a write that finds
    /// the socket full need not wake it.
    task_awaits_writable: bool,
}

/// Output in stream order: runs of copied bytes (`copied`, in order) and pinned payloads.
#[derive(Default)]
struct Staged {
    copied: Vec<u8>,
    pieces: VecDeque<Piece>,
}

enum Piece {
    /// The next this many bytes of `copied`.
    Copied(usize),
    Pinned(PinnedBytes),
}

impl Staged {
    fn is_empty(&self) -> bool {
        self.pieces.is_empty()
    }

    fn push_copied(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        self.copied.extend_from_slice(bytes);
        match self.pieces.back_mut() {
            Some(Piece::Copied(run)) => *run += bytes.len(),
            _ => self.pieces.push_back(Piece::Copied(bytes.len())),
        }
    }

    fn push_pinned(&mut self, bytes: PinnedBytes) {
        if !bytes.is_empty() {
            self.pieces.push_back(Piece::Pinned(bytes));
        }
    }

    /// Moves everything in `later` behind this.
    fn append(&mut self, later: &mut Staged) {
        self.copied.extend_from_slice(&later.copied);
        later.copied.clear();
        for piece in later.pieces.drain(..) {
            match piece {
                Piece::Copied(run) => match self.pieces.back_mut() {
                    Some(Piece::Copied(last)) => *last += run,
                    _ => self.pieces.push_back(Piece::Copied(run)),
                },
                Piece::Pinned(bytes) => self.pieces.push_back(Piece::Pinned(bytes)),
            }
        }
    }

    /// Drops the first `count` bytes. Returns how many of them were copied bytes.
    fn consume(&mut self, mut count: usize) -> usize {
        let mut copied = 0;
        while count > 0 {
            let Some(front) = self.pieces.front_mut() else { break };
            match front {
                Piece::Copied(run) => {
                    let take = (*run).min(count);
                    *run -= take;
                    copied += take;
                    count -= take;
                    if *run == 0 {
                        self.pieces.pop_front();
                    }
                }
                Piece::Pinned(bytes) => {
                    let take = bytes.len().min(count);
                    bytes.consume(take);
                    count -= take;
                    if bytes.is_empty() {
                        self.pieces.pop_front();
                    }
                }
            }
        }
        self.copied.drain(..copied.min(self.copied.len()));
        copied
    }

    /// The first slices of the output, for one vectored write.
    fn slices(&self) -> SmallVec<[IoSlice<'_>; MAX_WRITE_SLICES]> {
        let mut slices = SmallVec::new();
        let mut at = 0;
        for piece in &self.pieces {
            let bytes = match piece {
                Piece::Copied(run) => {
                    let bytes = self.copied.get(at..at + run).unwrap_or(&[]);
                    at += run;
                    bytes
                }
                Piece::Pinned(pinned) => pinned.as_slice(),
            };
            slices.push(IoSlice::new(bytes));
            if slices.len() == MAX_WRITE_SLICES {
                break;
            }
        }
        slices
    }

    fn clear(&mut self) {
        self.copied.clear();
        self.pieces.clear();
    }
}

/// Whether the thread writing an outbox holds the core lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Lock {
    Held,
    Released,
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
}

impl Staging<'_> {
    /// Whether `copied` more bytes to copy and `pinned` more to pin fit under the bounds
    /// ([`OUTBOX_MAX_COPIED`], [`OUTBOX_MAX_BYTES`]); anything fits into an empty outbox.
    pub(super) fn has_room(&self, copied: usize, pinned: usize) -> bool {
        let state = &self.state;
        state.unsent == 0
            || (state.unsent_copied + copied <= OUTBOX_MAX_COPIED
                && state.unsent + copied + pinned <= OUTBOX_MAX_BYTES)
    }

    /// Copies `bytes` in.
    pub(super) fn append(&mut self, bytes: &[u8]) {
        self.state.pending.push_copied(bytes);
        self.state.unsent += bytes.len();
        self.state.unsent_copied += bytes.len();
    }

    /// Stages a payload by reference.
    pub(super) fn append_pinned(&mut self, bytes: PinnedBytes) {
        self.state.unsent += bytes.len();
        self.state.pending.push_pinned(bytes);
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

    /// Opens the outbox for staging (with its connection's table locked; the outbox's own lock
    /// is a leaf, never held while taking another).
    pub(super) fn stage(&self) -> Staging<'_> {
        let state = self.lock();
        Staging { state }
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
    pub(super) fn has_failed(&self) -> bool {
        self.lock().failed.is_some()
    }

    pub(super) fn take_failure(&self) -> Option<io::ErrorKind> {
        self.lock().failed.take()
    }

    /// The connection must close (its framing failed while no core lock was held to close
    /// it): the task closes it on its next turn, as after a failed write.
    pub(super) fn fail(&self, kind: io::ErrorKind) {
        self.lock().failed.get_or_insert(kind);
        self.nudge.notify_one();
    }

    /// Writes what is staged, from a thread other than the connection's task, and wakes the
    /// task if it has something to do about it: wait for room in the socket, close the
    /// connection after a failed write, or write frames that waited for the outbox.
    pub(crate) fn write_out_and_tell(&self) {
        match self.write_out(Lock::Released) {
            Written::Idle => {}
            // The task already waits for room: a streaming connection's every staged batch
            // would otherwise cost it a turn that finds the socket as full.
            Written::Blocked if self.lock().task_awaits_writable => {}
            Written::Blocked | Written::Deferred | Written::Failed => self.nudge.notify_one(),
        }
    }

    /// The connection's task starts (`true`) or stops waiting for the socket to become
    /// writable.
    pub(super) fn set_task_awaits_writable(&self, awaits: bool) {
        self.lock().task_awaits_writable = awaits;
    }

    /// Writes what is staged until it is all written, the socket is full (the task then waits
    /// for room) or a write fails (the task then closes the connection). Leaves at once if
    /// another thread is writing: it writes what was staged meanwhile before it stops. `lock`
    /// says whether the caller holds the core lock (a burst's first half, shutdown), for the
    /// counters.
    pub(super) fn write_out(&self, lock: Lock) -> Written {
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
            let mut output = std::mem::replace(&mut state.pending, spare);
            state.writing = true;
            drop(state);
            let (written, copied, outcome) = self.write_all(&mut output, lock);
            state = self.lock();
            state.writing = false;
            state.unsent -= written.min(state.unsent);
            state.unsent_copied -= copied.min(state.unsent_copied);
            match outcome {
                Ok(()) => {
                    output.clear();
                    if state.spare.copied.capacity() < output.copied.capacity() {
                        state.spare = output;
                    }
                }
                Err(error) => {
                    if error.kind() == io::ErrorKind::WouldBlock {
                        // What is left goes back in front of what was staged meanwhile.
                        output.append(&mut state.pending);
                        state.spare = std::mem::replace(&mut state.pending, output);
                        state.blocked = true;
                        return Written::Blocked;
                    }
                    state.failed = Some(error.kind());
                    return Written::Failed;
                }
            }
        }
    }

    /// Non-blocking writes of `output` until all is written or the socket answers otherwise,
    /// consuming what was written; returns how many bytes were written, and how many of them
    /// were copied bytes.
    fn write_all(&self, output: &mut Staged, lock: Lock) -> (usize, usize, io::Result<()>) {
        let counters = &self.counters;
        let (mut written, mut copied) = (0, 0);
        while !output.is_empty() {
            counters.socket_writes.fetch_add(1, Ordering::Relaxed);
            if lock == Lock::Released {
                counters.socket_writes_unlocked.fetch_add(1, Ordering::Relaxed);
            }
            let sent = super::sys::send_vectored(&self.stream, &output.slices());
            match sent {
                Ok(0) => return (written, copied, Err(io::ErrorKind::WriteZero.into())),
                Ok(count) => {
                    written += count;
                    copied += output.consume(count);
                }
                Err(error) => return (written, copied, Err(error)),
            }
        }
        (written, copied, Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pinned(bytes: &[u8]) -> PinnedBytes {
        let mut memory = ulnet_proto::engine::Memory::new(bytes.to_vec());
        memory.pin(0, bytes.len()).expect("one buffer pins")
    }

    fn contents(staged: &Staged) -> Vec<u8> {
        staged.slices().iter().flat_map(|slice| slice.to_vec()).collect()
    }

    #[test]
    fn staged_output_keeps_its_order_through_partial_writes() {
        let mut staged = Staged::default();
        staged.push_copied(b"ab");
        staged.push_copied(b"c");
        staged.push_pinned(pinned(b"DEFG"));
        staged.push_copied(b"h");
        assert_eq!(staged.pieces.len(), 3, "adjacent copies are one run");
        assert_eq!(contents(&staged), b"abcDEFGh");

        assert_eq!(staged.consume(4), 3, "three copied bytes and one pinned");
        assert_eq!(contents(&staged), b"EFGh");
        let mut later = Staged::default();
        later.push_copied(b"ij");
        later.push_pinned(pinned(b"K"));
        staged.append(&mut later);
        assert!(later.is_empty() && later.copied.is_empty());
        assert_eq!(contents(&staged), b"EFGhijK");
        assert_eq!(staged.pieces.len(), 3, "h and ij join");
        assert_eq!(staged.consume(6), 3);
        assert_eq!(contents(&staged), b"K");
        assert_eq!(staged.consume(10), 0);
        assert!(staged.is_empty() && staged.copied.is_empty());
    }

    #[test]
    fn empty_pieces_are_not_staged() {
        let mut staged = Staged::default();
        staged.push_copied(b"");
        staged.push_pinned(pinned(b""));
        assert!(staged.is_empty());
    }
}
