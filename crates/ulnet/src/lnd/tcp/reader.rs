//! The receiving half of a connection: socket bytes to the socklnd framing, headers to the
//! core, payload into MD memory.
//!
//! Headers (and the payload of small messages) come through a fixed read buffer, so one system
//! call can bring in many small messages. A payload of [`DIRECT_READ_MIN`] bytes or more is read
//! from the socket straight into the MD's memory (`rx_segments_mut`); whatever part of it was
//! already in the read buffer is copied there first. Payload nobody wants is read into the
//! buffer and dropped, so a connection holds at most [`READ_BUFFER_LEN`] bytes of input
//! whatever the peer sends.
//!
//! Every payload byte is consumed, wanted or not: nothing else marks where the next message
//! starts. lustre: socklnd_cb.c `ksocknal_process_receive()`, `ksocknal_recv()`.
//!
//! The read buffer ([`Input`]) belongs to the connection's task, not to the peer table, so the
//! task fills it before it takes the core lock ([`Input::preread`]): the system call that
//! brings in headers and small payloads runs while other threads use the core. A large
//! payload's destination is lent by the core when nothing else can touch it
//! (`Engine::rx_lend`: a router buffer, or an MD this receive uses up) and the task reads into
//! it the same way ([`LentSlot`]); the turn under the lock only counts what arrived and gives
//! the memory back before completing the receive. Only reads into MD memory the core cannot
//! lend (an MD still open to other messages), and reads after a full buffer, run with the lock
//! held.
//!
//! On a node of several partitions a turn runs with the core shared ([`CoreRef::Shared`]),
//! beside the other partitions' turns. A call the engine declines there changed nothing: the
//! reader keeps where it was (a header not yet handled, a receive not yet completed, a close
//! not yet made) and the turn ends with [`ReadOutcome::Exclusive`], for the task to take the
//! core exclusively and go on from there.

use foldhash::HashMap;
use std::io::{self, IoSliceMut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio::net::TcpStream;
use ulnet_proto::engine::{HealthStatus, LentPayload, NiId, RecvAction, RxId};
use ulnet_proto::socklnd::conn::{Conn, RecvEvent};
use ulnet_proto::socklnd::zc::ZcRequests;
use ulnet_proto::time::Time;
use ulnet_proto::wire::header::Header;

use super::context::{CloseCause, ConnKey, MAX_IOVECS};
use crate::driver::{Core, CoreRef, Counters, NeedsExclusive, leaf};

/// Bytes of input a connection buffers: headers, and the payload of small messages.
pub const READ_BUFFER_LEN: usize = 64 << 10;
/// Payloads at least this long are read straight into MD memory; shorter ones pass through the
/// read buffer (one copy of a few KiB, in exchange for fewer system calls).
pub const DIRECT_READ_MIN: u32 = 16 << 10;

/// Most messages handled in one turn before the task yields (and the core lock is released),
/// so one busy connection does not starve the node's other work.
const MESSAGES_PER_TURN: u32 = 256;
/// Most bytes read in one turn, for the same reason.
const BYTES_PER_TURN: usize = 4 << 20;

/// A connection's receive state (in the peer table, under its lock).
pub(super) struct Reader {
    state: RxState,
    /// A header the framing recognised whose call the engine declined with the core shared:
    /// handled first on the next turn.
    header: Option<Header>,
    /// Why the connection must close, found with the core shared (closing fails what it held
    /// back to the core, which takes the core exclusively): reported first on the next turn.
    closing: Option<CloseCause>,
}

/// A connection's read buffer, owned by its task: headers, and the payload of small messages.
pub(super) struct Input {
    buffer: Box<[u8]>,
    /// Unconsumed input is `buffer[start..end]`.
    start: usize,
    end: usize,
    /// This turn's last read came up short: the socket is empty, so the next fill ends the
    /// turn instead of reading again only to get EAGAIN.
    drained: bool,
    /// How the stream ended, as a read made without the lock found it: the next fill under
    /// the lock reports it (the framing decides whether an end is clean).
    ended: Option<io::ErrorKind>,
}

impl Input {
    pub(super) fn new() -> Self {
        Self {
            buffer: vec![0; READ_BUFFER_LEN].into(),
            start: 0,
            end: 0,
            drained: false,
            ended: None,
        }
    }

    /// Starts a turn: reads into a lent payload that still wants bytes, or into the buffer if
    /// it is empty, before the caller takes the core lock. `wanted`: the reader's state takes
    /// its next bytes through the buffer ([`Reader::reads_through_buffer`], as of the last
    /// turn).
    pub(super) fn preread(
        &mut self,
        stream: &TcpStream,
        wanted: bool,
        counters: &Counters,
        lent: &LentSlot,
    ) {
        self.drained = false;
        if self.start < self.end || self.ended.is_some() {
            return;
        }
        let filled_lent = match lent.lock().as_mut().filter(|lent| lent.wants_bytes()) {
            Some(lent) => {
                self.read_lent(stream, lent, counters);
                if lent.wants_bytes() || self.drained || self.ended.is_some() {
                    return;
                }
                true
            }
            None => false,
        };
        // A payload just filled, with the socket not known to be empty: what follows it is
        // headers (or a truncated tail to skip), which go through the buffer.
        if !wanted && !filled_lent {
            return;
        }
        counters.socket_reads.fetch_add(1, Ordering::Relaxed);
        counters.socket_reads_unlocked.fetch_add(1, Ordering::Relaxed);
        match super::sys::recv(stream, &mut self.buffer) {
            Ok(0) => self.ended = Some(io::ErrorKind::UnexpectedEof),
            Ok(read) => {
                self.start = 0;
                self.end = read;
                if read < self.buffer.len() {
                    self.drained = true;
                    clear_readable(stream);
                }
            }
            // The socket is empty: the turn has nothing to read.
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => self.drained = true,
            Err(error) => self.ended = Some(error.kind()),
        }
    }

    /// Reads the socket into a lent payload until it is full, the socket is empty or the
    /// stream ends (kept in `ended` for the turn to report).
    fn read_lent(&mut self, stream: &TcpStream, lent: &mut Lent, counters: &Counters) {
        while lent.wants_bytes() {
            counters.socket_reads.fetch_add(1, Ordering::Relaxed);
            counters.socket_reads_unlocked.fetch_add(1, Ordering::Relaxed);
            let mut slices = IoSlices::new();
            for slice in lent.payload.slices_mut(lent.filled) {
                slices.push(IoSliceMut::new(slice));
                if slices.len() == MAX_IOVECS {
                    break;
                }
            }
            let asked: usize = slices.iter().map(|slice| slice.len()).sum();
            match super::sys::read_vectored(stream, &mut slices) {
                Ok(0) => {
                    self.ended = Some(io::ErrorKind::UnexpectedEof);
                    return;
                }
                Ok(read) => {
                    lent.filled += read;
                    if read < asked {
                        self.drained = true;
                        clear_readable(stream);
                        return;
                    }
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                    self.drained = true;
                    return;
                }
                Err(error) => {
                    self.ended = Some(error.kind());
                    return;
                }
            }
        }
    }

    fn consume(&mut self, count: usize) {
        self.start = (self.start + count).min(self.end);
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// Reads into the (empty) buffer.
    fn fill(
        &mut self,
        stream: &TcpStream,
        conn: &Conn,
        reads: &AtomicU64,
    ) -> Result<Step, CloseCause> {
        self.start = 0;
        self.end = 0;
        if let Some(kind) = self.ended {
            return Err(ended(conn, kind));
        }
        if self.drained {
            return Ok(Step::Blocked);
        }
        reads.fetch_add(1, Ordering::Relaxed);
        match super::sys::recv(stream, &mut self.buffer) {
            Ok(0) => Err(ended(conn, io::ErrorKind::UnexpectedEof)),
            Ok(read) => {
                self.end = read;
                if read < self.buffer.len() {
                    self.drained = true;
                    // A short read emptied the socket: forget its readiness now rather than
                    // learn it from one more read failing with EAGAIN (as tokio's own
                    // `poll_read` does). Data arriving meanwhile raises a fresh readiness
                    // event, which this does not clear.
                    clear_readable(stream);
                }
                Ok(Step::Progress(read))
            }
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => Ok(Step::Blocked),
            Err(error) => Err(CloseCause::from_io(error.kind())),
        }
    }
}

/// The destination of the payload being received, when the core lent it
/// (`Engine::rx_lend`): the connection's task fills it without the core lock. Shared by the
/// task and the peer table, which gives it back when the connection closes from another
/// thread. Its lock is never held while taking the core lock.
#[derive(Default)]
pub(super) struct LentSlot(Mutex<Option<Lent>>);

pub(super) struct Lent {
    rx: RxId,
    payload: LentPayload,
    /// Bytes of the payload in.
    filled: usize,
}

impl Lent {
    fn wants_bytes(&self) -> bool {
        self.filled < self.payload.len()
    }
}

impl LentSlot {
    fn lock(&self) -> MutexGuard<'_, Option<Lent>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Asks the core to lend `rx`'s destination (a payload of `length` bytes, read from its
    /// start), if it is large enough to be read straight from the socket.
    fn lend(&self, mut core: CoreRef<'_>, rx: RxId, length: u32) {
        if length < DIRECT_READ_MIN {
            return;
        }
        let mut slot = self.lock();
        if let Some(lent) = slot.as_ref() {
            tracing::error!(held = ?lent.rx, ?rx, "a lent payload was never given back");
            return;
        }
        // Declined with the core shared: the payload is read with the core held instead.
        if let Ok(Ok(Some(payload))) = core.rx_lend(rx) {
            *slot = Some(Lent { rx, payload, filled: 0 });
        }
    }

    /// Gives `rx`'s destination back to the core, if it was lent; declined with the core
    /// shared, it stays lent.
    fn give_back(&self, mut core: CoreRef<'_>, rx: RxId) -> Result<(), NeedsExclusive> {
        let mut slot = self.lock();
        let Some(lent) = slot.take_if(|lent| lent.rx == rx) else {
            return Ok(());
        };
        let Lent { payload, filled, .. } = lent;
        match core.rx_give_back(rx, payload) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => {
                tracing::error!(%error, ?rx, "core refused a lent payload back");
                Ok(())
            }
            Err(payload) => {
                *slot = Some(Lent { rx, payload, filled });
                Err(NeedsExclusive)
            }
        }
    }
}

/// Why the stream ended: the peer closed it (cleanly between messages or inside one), or a
/// socket error (`kind`, other than `UnexpectedEof`, which stands for a 0-byte read).
fn ended(conn: &Conn, kind: io::ErrorKind) -> CloseCause {
    if kind != io::ErrorKind::UnexpectedEof {
        return CloseCause::from_io(kind);
    }
    match conn.handle_eof() {
        Ok(()) => CloseCause::PeerClosed,
        Err(_) => eof_inside_message(conn),
    }
}

/// Where the next bytes go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RxState {
    /// Headers: bytes go to `Conn::handle_input`.
    Frames,
    /// A message's payload: `offset` of `length` bytes are in the MD; then `discard` bytes
    /// (a truncated message) are skipped.
    Deliver { rx: RxId, offset: u32, length: u32, discard: u32 },
    /// Payload nobody wants.
    Discard { remaining: u32 },
    /// The core has no buffer for this message yet (lazy portal): reading stops until
    /// [`Reader::resume`].
    Parked { rx: RxId },
}

/// Why a receive turn ended.
#[derive(Debug)]
pub(super) enum ReadOutcome {
    /// The socket has nothing more for now.
    Blocked,
    /// Waiting for the core to resume a delayed message.
    Parked,
    /// The engine declined a call with the core shared: go on with it exclusive.
    Exclusive,
    /// The turn's budget is spent; more input may be waiting.
    Budget,
    /// Close the connection.
    Close(CloseCause),
}

/// What a receive turn works with, besides the reader.
pub(super) struct ReadCx<'a> {
    pub(super) core: CoreRef<'a>,
    pub(super) now: Time,
    pub(super) ni: NiId,
    pub(super) conn: &'a mut Conn,
    pub(super) zc: &'a mut ZcRequests,
    pub(super) stream: &'a TcpStream,
    pub(super) input: &'a mut Input,
    /// Counts read system calls ([`Counters::socket_reads`]).
    pub(super) reads: &'a AtomicU64,
    /// Receives parked on a lazy portal, so `resume` finds their connection.
    pub(super) parked: &'a mut HashMap<RxId, ConnKey>,
    pub(super) key: ConnKey,
    pub(super) lent: &'a LentSlot,
}

impl Reader {
    /// A reader for a connection just out of its handshake (which never reads past the hello,
    /// so the stream starts at the first frame).
    pub(super) fn new() -> Self {
        Self { state: RxState::Frames, header: None, closing: None }
    }

    /// Whether the task should wait for the socket to become readable.
    pub(super) fn wants_input(&self) -> bool {
        !matches!(self.state, RxState::Parked { .. })
    }

    /// Whether the next bytes go through the read buffer (headers, a small payload, payload
    /// being skipped) rather than straight into MD memory, so the task may read them before it
    /// takes the lock.
    pub(super) fn reads_through_buffer(&self) -> bool {
        match self.state {
            RxState::Frames | RxState::Discard { .. } => true,
            RxState::Deliver { offset, length, .. } => length - offset < DIRECT_READ_MIN,
            RxState::Parked { .. } => false,
        }
    }

    /// Reads and handles input until the socket has no more, the reader parks, the budget is
    /// spent, or the connection must close.
    pub(super) fn receive(&mut self, cx: &mut ReadCx<'_>) -> ReadOutcome {
        if let Some(cause) = self.closing.take() {
            return self.close(cx, cause);
        }
        let mut messages = 0u32;
        let mut bytes = 0usize;
        loop {
            if messages >= MESSAGES_PER_TURN || bytes >= BYTES_PER_TURN {
                return ReadOutcome::Budget;
            }
            let step = match self.state {
                _ if self.header.is_some() => self.pending_header(cx),
                RxState::Parked { .. } => return ReadOutcome::Parked,
                RxState::Frames => self.frames(cx, &mut messages),
                RxState::Deliver { rx, offset, length, discard } => {
                    self.deliver(cx, rx, offset, length, discard)
                }
                RxState::Discard { remaining } => self.discard(cx, remaining),
            };
            match step {
                Ok(Step::Progress(read)) => bytes += read,
                Ok(Step::Blocked) => return ReadOutcome::Blocked,
                Ok(Step::Parked) => return ReadOutcome::Parked,
                Ok(Step::Exclusive) => return ReadOutcome::Exclusive,
                Err(cause) => return self.close(cx, cause),
            }
        }
    }

    /// The connection must close: at once with the core exclusive, else on the next turn.
    fn close(&mut self, cx: &ReadCx<'_>, cause: CloseCause) -> ReadOutcome {
        if cx.core.is_shared() {
            self.closing = Some(cause);
            ReadOutcome::Exclusive
        } else {
            ReadOutcome::Close(cause)
        }
    }

    /// The core decided where a parked message's payload goes.
    pub(super) fn resume(
        &mut self,
        core: &mut Core,
        now: Time,
        action: RecvAction,
        lent: &LentSlot,
    ) {
        let RxState::Parked { rx: parked } = self.state else {
            return;
        };
        self.state = match action {
            RecvAction::Deliver { rx, length, discard } => {
                RxState::Deliver { rx, offset: 0, length, discard }
            }
            RecvAction::Discard { length } => RxState::Discard { remaining: length },
            // The core only resumes with Deliver or Discard; anything else leaves nothing to
            // read into, so skip the payload.
            RecvAction::Delay { .. } | RecvAction::ProtocolError(_) => {
                tracing::error!(?parked, "core resumed a delayed receive with no destination");
                RxState::Frames
            }
        };
        // A message without payload is complete at once.
        if let RxState::Deliver { rx, length: 0, discard: 0, .. } = self.state {
            core.complete_recv(now, rx, HealthStatus::Ok);
            self.state = RxState::Frames;
        }
        if let RxState::Deliver { rx, length, .. } = self.state {
            lent.lend(CoreRef::Exclusive(core), rx, length);
        }
        if self.state == (RxState::Discard { remaining: 0 }) {
            self.state = RxState::Frames;
        }
    }

    /// The connection is closing: fail the receive the core expected us to fill, forget a
    /// parked one (its resume will find no connection and fail it).
    pub(super) fn abandon(
        &mut self,
        core: &mut Core,
        now: Time,
        parked: &mut HashMap<RxId, ConnKey>,
        status: HealthStatus,
        lent: &LentSlot,
    ) {
        match self.state {
            RxState::Deliver { rx, .. } => {
                // Exclusive: never declined.
                let _ = lent.give_back(CoreRef::Exclusive(core), rx);
                core.complete_recv(now, rx, status);
            }
            RxState::Parked { rx } => {
                parked.remove(&rx);
            }
            RxState::Frames | RxState::Discard { .. } => {}
        }
        self.state = RxState::Frames;
        self.header = None;
        self.closing = None;
    }

    // ------------------------------------------------------------------------------- steps

    /// A header whose call was declined with the core shared, handled again.
    fn pending_header(&mut self, cx: &mut ReadCx<'_>) -> Result<Step, CloseCause> {
        match self.header.take() {
            Some(header) => self.header(cx, header),
            None => Ok(Step::Progress(0)),
        }
    }

    /// Headers: feed buffered input to the framing; act on what it recognises.
    fn frames(&mut self, cx: &mut ReadCx<'_>, messages: &mut u32) -> Result<Step, CloseCause> {
        if cx.input.start == cx.input.end {
            return cx.input.fill(cx.stream, cx.conn, cx.reads);
        }
        let now = cx.now;
        let input = cx.input.buffer.get(cx.input.start..cx.input.end).unwrap_or(&[]);
        let (consumed, event) =
            cx.conn.handle_input(now, input, cx.zc).map_err(CloseCause::from_conn_error)?;
        cx.input.consume(consumed);
        match event {
            // The framing took everything (a header in pieces): read more.
            RecvEvent::NeedMore | RecvEvent::Noop(_) => Ok(Step::Progress(0)),
            RecvEvent::Message(header) => {
                *messages += 1;
                self.header(cx, header)
            }
            // `handle_input` reports payload only when fed some, and payload is never fed to
            // it (the Deliver and Discard states take it).
            RecvEvent::Payload { .. } => Err(CloseCause::Internal("payload fed to the framing")),
        }
    }

    /// A header the framing recognised, to the core. Declined with the core shared, it is
    /// kept for the turn that holds the core exclusive.
    fn header(&mut self, cx: &mut ReadCx<'_>, header: Header) -> Result<Step, CloseCause> {
        let peer = cx.conn.peer().nid;
        let Ok(action) = cx.core.handle_header(cx.now, cx.ni, peer, &header) else {
            self.header = Some(header);
            return Ok(Step::Exclusive);
        };
        match action {
            RecvAction::Deliver { rx, length, discard } => {
                self.state = RxState::Deliver { rx, offset: 0, length, discard };
                if length == 0 && discard == 0 {
                    if cx.core.complete_recv(cx.now, rx, HealthStatus::Ok).is_err() {
                        // Completed by the exclusive turn (`deliver`, all of it in).
                        return Ok(Step::Exclusive);
                    }
                    self.state = RxState::Frames;
                } else {
                    cx.lent.lend(cx.core.reborrow(), rx, length);
                }
                Ok(Step::Progress(0))
            }
            RecvAction::Discard { length } => {
                if length > 0 {
                    self.state = RxState::Discard { remaining: length };
                }
                Ok(Step::Progress(0))
            }
            RecvAction::Delay { rx } => {
                leaf(&cx.core.core().delayed).insert(rx, cx.ni);
                cx.parked.insert(rx, cx.key);
                self.state = RxState::Parked { rx };
                Ok(Step::Parked)
            }
            RecvAction::ProtocolError(error) => Err(CloseCause::Refused(error)),
        }
    }

    /// Payload into the MD: from the buffer first, then straight from the socket.
    fn deliver(
        &mut self,
        cx: &mut ReadCx<'_>,
        rx: RxId,
        offset: u32,
        length: u32,
        discard: u32,
    ) -> Result<Step, CloseCause> {
        // Only a payload of `DIRECT_READ_MIN` bytes or more is ever lent: a smaller one
        // leaves the slot (and its lock) alone.
        let lendable = length >= DIRECT_READ_MIN;
        if offset < length {
            if let Some(step) =
                lendable.then(|| self.deliver_lent(cx, rx, offset, length, discard)).flatten()
            {
                return step;
            }
        } else if lendable && cx.lent.give_back(cx.core.reborrow(), rx).is_err() {
            return Ok(Step::Exclusive);
        }
        if offset >= length {
            if discard > 0 {
                // The truncated tail: skip it like an unwanted payload, then complete.
                let read = self.skip(cx, discard)?;
                if let Some(skipped) = read.skipped {
                    let discard = discard - skipped;
                    self.state = RxState::Deliver { rx, offset, length, discard };
                }
                return Ok(read.step);
            }
            if cx.core.complete_recv(cx.now, rx, HealthStatus::Ok).is_err() {
                return Ok(Step::Exclusive);
            }
            self.state = RxState::Frames;
            return Ok(Step::Progress(0));
        }
        let want = length - offset;
        let now = cx.now;
        let input = &mut *cx.input;
        let taken = if input.start < input.end {
            // Already buffered: copy (the one copy small payloads make).
            let count = (input.end - input.start).min(want as usize);
            let bytes = input.buffer.get(input.start..input.start + count).unwrap_or(&[]);
            match cx.core.rx_write(rx, offset, bytes) {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Err(CloseCause::Internal("the receive's MD went away")),
                Err(NeedsExclusive) => return Ok(Step::Exclusive),
            }
            input.consume(count);
            count
        } else if want < DIRECT_READ_MIN {
            return input.fill(cx.stream, cx.conn, cx.reads);
        } else if let Some(kind) = input.ended {
            return Err(ended(cx.conn, kind));
        } else {
            // MD memory the core could not lend is read into with the core exclusive.
            let Some(core) = cx.core.exclusive() else {
                return Ok(Step::Exclusive);
            };
            cx.reads.fetch_add(1, Ordering::Relaxed);
            match read_into_md(core, rx, offset, want, cx.stream) {
                Ok(0) => return Err(eof_inside_message(cx.conn)),
                Ok(read) => read,
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                    return Ok(Step::Blocked);
                }
                Err(error) => return Err(CloseCause::from_io(error.kind())),
            }
        };
        // `taken` is at most `want`, a u32.
        let taken32 = taken as u32;
        cx.conn.handle_payload(now, taken).map_err(CloseCause::from_conn_error)?;
        self.state = RxState::Deliver { rx, offset: offset + taken32, length, discard };
        Ok(Step::Progress(taken))
    }

    /// Payload into a lent destination: counts what the task read into it without the lock,
    /// copies in what the buffer holds, and otherwise leaves the socket to the task's next
    /// read without the lock. `None` if the destination is not lent.
    fn deliver_lent(
        &mut self,
        cx: &mut ReadCx<'_>,
        rx: RxId,
        offset: u32,
        length: u32,
        discard: u32,
    ) -> Option<Result<Step, CloseCause>> {
        let mut slot = cx.lent.lock();
        let lent = slot.as_mut().filter(|lent| lent.rx == rx)?;
        let input = &mut *cx.input;
        // `filled` is at most the payload's length, a u32.
        let taken = if lent.filled > offset as usize {
            lent.filled - offset as usize
        } else if input.start < input.end {
            // Already buffered (the bytes that came with the header): copy them in.
            let count = (input.end - input.start).min((length - offset) as usize);
            let bytes = input.buffer.get(input.start..input.start + count).unwrap_or(&[]);
            if !lent.payload.write_at(offset as usize, bytes) {
                return Some(Err(CloseCause::Internal(
                    "a lent payload is shorter than its receive",
                )));
            }
            lent.filled += count;
            input.consume(count);
            count
        } else if let Some(kind) = input.ended {
            return Some(Err(ended(cx.conn, kind)));
        } else {
            // The rest comes from the socket, read by the task without the lock.
            return Some(Ok(Step::Blocked));
        };
        drop(slot);
        if let Err(error) = cx.conn.handle_payload(cx.now, taken) {
            return Some(Err(CloseCause::from_conn_error(error)));
        }
        let offset = offset + taken as u32;
        self.state = RxState::Deliver { rx, offset, length, discard };
        Some(Ok(Step::Progress(0)))
    }

    fn discard(&mut self, cx: &mut ReadCx<'_>, remaining: u32) -> Result<Step, CloseCause> {
        let read = self.skip(cx, remaining)?;
        if let Some(skipped) = read.skipped {
            let remaining = remaining - skipped;
            self.state =
                if remaining == 0 { RxState::Frames } else { RxState::Discard { remaining } };
        }
        Ok(read.step)
    }

    /// Skips up to `remaining` payload bytes through the buffer.
    fn skip(&mut self, cx: &mut ReadCx<'_>, remaining: u32) -> Result<Skip, CloseCause> {
        if cx.input.start == cx.input.end {
            return Ok(Skip { step: cx.input.fill(cx.stream, cx.conn, cx.reads)?, skipped: None });
        }
        let count = (cx.input.end - cx.input.start).min(remaining as usize);
        cx.input.consume(count);
        cx.conn.handle_payload(cx.now, count).map_err(CloseCause::from_conn_error)?;
        // `count` is at most `remaining`, a u32.
        Ok(Skip { step: Step::Progress(count), skipped: Some(count as u32) })
    }
}

/// Progress of one step.
enum Step {
    /// Bytes read from the socket (0 for work on buffered input).
    Progress(usize),
    Blocked,
    Parked,
    /// The engine declined a call with the core shared.
    Exclusive,
}

struct Skip {
    step: Step,
    /// Payload bytes skipped from the buffer, if any were.
    skipped: Option<u32>,
}

/// The slices of one vectored read, on the stack while few.
type IoSlices<'a> = smallvec::SmallVec<[IoSliceMut<'a>; 32]>;

/// Clears the stream's read readiness without a system call: `try_io` clears it when its
/// closure reports WouldBlock, and only if no newer readiness event came in meanwhile.
fn clear_readable(stream: &TcpStream) {
    let _ = stream.try_io(tokio::io::Interest::READABLE, || {
        Err::<(), _>(io::Error::from(io::ErrorKind::WouldBlock))
    });
}

fn eof_inside_message(conn: &Conn) -> CloseCause {
    match conn.handle_eof() {
        Err(error) => CloseCause::from_conn_error(error),
        Ok(()) => CloseCause::PeerClosed,
    }
}

/// One non-blocking vectored read of up to `want` bytes straight into the receive's MD memory,
/// at `offset` within the receive.
fn read_into_md(
    core: &mut Core,
    rx: RxId,
    offset: u32,
    want: u32,
    stream: &TcpStream,
) -> io::Result<usize> {
    let segments = core
        .engine
        .rx_segments_mut(rx)
        .map_err(|_| io::Error::other("the receive's MD went away"))?;
    let mut skip = offset as usize;
    let mut left = want as usize;
    let mut slices: Vec<IoSliceMut<'_>> = Vec::new();
    for segment in segments {
        if skip >= segment.len() {
            skip -= segment.len();
            continue;
        }
        let Some(segment) = segment.get_mut(std::mem::take(&mut skip)..) else {
            continue; // unreachable: skip < len
        };
        let take = segment.len().min(left);
        if let Some(part) = segment.get_mut(..take) {
            slices.push(IoSliceMut::new(part));
        }
        left -= take;
        if left == 0 || slices.len() == MAX_IOVECS {
            break;
        }
    }
    super::sys::read_vectored(stream, &mut slices)
}
