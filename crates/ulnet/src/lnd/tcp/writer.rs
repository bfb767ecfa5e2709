//! The sending half of a connection: frames from the socklnd framing, written with
//! non-blocking vectored writes of the frame headers and the payload's MD memory.
//!
//! The framing hands out frames in order ([`Conn::poll_transmit`]); the writer keeps those not
//! yet fully written, gathers up to [`MAX_BATCH_FRAMES`] of them (headers from the frame, payload
//! slices from `tx_payload`, never copied) into one `writev`, and reports what the socket took
//! ([`Conn::on_transmitted`]). A message whose bytes are all in the socket is complete, unless
//! it asked the peer for a ZC-ACK (payloads from `zc_min_payload`): then it completes on the
//! ACK (docs/decisions/0004-zero-copy-acks.md).
//!
//! A passive connection's reply hello goes first, as a preamble: it must precede any frame.
//!
//! Frames are not written here but staged in the connection's [`Outbox`] (headers and small
//! payloads copied, large payloads pinned), which the staging thread writes once it has
//! released the core lock. Only a payload that cannot be pinned (MD memory of several
//! segments) is written here, with the lock held, when the outbox is empty, and waits for it
//! otherwise (`outbox.rs` says why).
//!
//! lustre: socklnd_cb.c `ksocknal_transmit()`, `ksocknal_send_iov()`, `ksocknal_send_kiov()`.

use std::collections::VecDeque;

use foldhash::HashMap;
use std::io::{self, IoSlice};
use std::sync::atomic::Ordering;

use smallvec::SmallVec;
use tokio::net::TcpStream;
use ulnet_proto::engine::{HealthStatus, PinnedBytes, TxId};
use ulnet_proto::socklnd::MessageToken;
use ulnet_proto::socklnd::conn::{Conn, Frame};
use ulnet_proto::time::Time;

use super::context::{CloseCause, MAX_IOVECS};
use super::outbox::{COPY_MAX_PAYLOAD, Outbox, Staging};
use crate::driver::{Core, Counters};

/// Most frames gathered into one vectored write.
pub const MAX_BATCH_FRAMES: usize = 64;

/// Why staging stopped short of the last frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stop {
    /// The outbox has no room for the next frame.
    Full,
    /// The next frame's payload cannot be pinned: it is written from MD memory.
    Unpinned,
}

/// A connection's unwritten output.
pub(super) struct Writer {
    /// Bytes that precede every frame (a passive side's reply hello).
    preamble: Vec<u8>,
    preamble_written: usize,
    /// Frames handed out by the framing and not yet fully written, oldest first.
    frames: VecDeque<Frame>,
    /// Bytes of the front frame already written.
    front_written: u64,
}

/// How a flush ended, short of an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Flushed {
    /// Everything is written, staged in the outbox, or waiting for the outbox to empty.
    Idle,
    /// The socket is full; wait until it is writable.
    Blocked,
}

/// What a flush writes with, besides the writer.
pub(super) struct FlushCx<'a> {
    pub(super) core: &'a mut Core,
    pub(super) now: Time,
    pub(super) conn: &'a mut Conn,
    pub(super) stream: &'a TcpStream,
    pub(super) outbox: &'a Outbox,
    pub(super) tokens: &'a mut HashMap<MessageToken, TxId>,
    pub(super) counters: &'a Counters,
    /// Set when bytes were staged that this thread must write once it releases the lock.
    pub(super) staged: &'a mut bool,
}

impl Writer {
    pub(super) fn new(preamble: Vec<u8>) -> Self {
        Self { preamble, preamble_written: 0, frames: VecDeque::new(), front_written: 0 }
    }

    /// Whether anything waits to be written.
    pub(super) fn has_output(&self, conn: &Conn) -> bool {
        self.preamble_written < self.preamble.len()
            || !self.frames.is_empty()
            || conn.wants_to_transmit()
    }

    /// Writes (or stages) until the socket is full or nothing is left, completing each message
    /// whose bytes are all written or staged. `tokens` maps the framing's message tokens to the
    /// core's transmits.
    pub(super) fn flush(&mut self, cx: &mut FlushCx<'_>) -> Result<Flushed, CloseCause> {
        loop {
            while self.frames.len() < MAX_BATCH_FRAMES {
                match cx.conn.poll_transmit() {
                    Some(frame) => self.frames.push_back(frame),
                    None => break,
                }
            }
            if self.preamble_written >= self.preamble.len() && self.frames.is_empty() {
                return Ok(Flushed::Idle);
            }
            let mut outbox = cx.outbox.stage();
            let (staged, stopped) = self.stage(cx.core, cx.tokens, &mut outbox)?;
            if staged > 0 {
                *cx.staged |= outbox.wants_writer();
                drop(outbox);
                self.advance(cx.now, cx.conn, staged)?;
            } else if stopped == Some(Stop::Unpinned) && outbox.is_idle() {
                // Nothing staged ahead of it: write it from MD memory, lock held.
                drop(outbox);
                cx.counters.socket_writes.fetch_add(1, Ordering::Relaxed);
                let slices = self.slices(cx.core, cx.tokens)?;
                let written = match super::sys::send_vectored(cx.stream, slices.as_slice()) {
                    Ok(0) => return Err(CloseCause::Io(io::ErrorKind::WriteZero)),
                    Ok(written) => written,
                    Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                        return Ok(Flushed::Blocked);
                    }
                    Err(error) => return Err(CloseCause::from_io(error.kind())),
                };
                drop(slices);
                self.advance(cx.now, cx.conn, written)?;
            } else {
                // Later frames must not overtake the staged bytes: they wait.
                outbox.defer();
                return Ok(Flushed::Idle);
            }
            while let Some(token) = cx.conn.poll_sent() {
                if let Some(tx) = cx.tokens.remove(&token) {
                    cx.core.complete_send(cx.now, tx, HealthStatus::Ok);
                }
            }
        }
    }

    /// Stages the preamble and frames, in order, into the outbox: headers and small payloads
    /// copied, large payloads pinned. Stops at the first frame that does not fit or whose
    /// payload cannot be pinned. Returns the bytes staged and why it stopped, if it did.
    fn stage(
        &self,
        core: &mut Core,
        tokens: &HashMap<MessageToken, TxId>,
        outbox: &mut Staging<'_>,
    ) -> Result<(usize, Option<Stop>), CloseCause> {
        let mut staged = 0;
        if let Some(rest) = self.preamble.get(self.preamble_written..) {
            if !rest.is_empty() {
                if !outbox.has_room(rest.len(), 0) {
                    return Ok((0, Some(Stop::Full)));
                }
                outbox.append(rest);
                staged += rest.len();
            }
        }
        for (index, frame) in self.frames.iter().enumerate() {
            let skip = if index == 0 { self.front_written as usize } else { 0 };
            let header = frame.header_bytes();
            let header_rest = header.get(skip..).unwrap_or(&[]);
            let payload_skip = skip.saturating_sub(header.len());
            let payload_len = (frame.payload_len as usize).saturating_sub(payload_skip);
            let tx = match frame.token.and_then(|token| tokens.get(&token)) {
                Some(tx) => Some(*tx),
                None if frame.payload_len == 0 => None,
                None => return Err(CloseCause::Internal("a frame's message is unknown")),
            };
            let (copied, pinned) = match tx {
                Some(tx) if frame.payload_len > COPY_MAX_PAYLOAD => {
                    let Ok(pinned) = core.engine.tx_payload_pinned(tx) else {
                        return Err(CloseCause::Internal("a frame's payload went away"));
                    };
                    let Some(mut pinned) = pinned else {
                        return Ok((staged, Some(Stop::Unpinned)));
                    };
                    pinned.consume(payload_skip);
                    (header_rest.len(), Some(pinned))
                }
                _ => (header_rest.len() + payload_len, None),
            };
            if !outbox.has_room(copied, pinned.as_ref().map_or(0, PinnedBytes::len)) {
                return Ok((staged, Some(Stop::Full)));
            }
            outbox.append(header_rest);
            staged += header_rest.len();
            match (pinned, tx) {
                (Some(pinned), _) => {
                    staged += pinned.len();
                    outbox.append_pinned(pinned);
                }
                (None, Some(tx)) if payload_len > 0 => {
                    let Ok(payload) = core.engine.tx_payload(tx) else {
                        return Err(CloseCause::Internal("a frame's payload went away"));
                    };
                    let mut skip = payload_skip;
                    for slice in payload {
                        let part = slice.get(skip.min(slice.len())..).unwrap_or(&[]);
                        skip -= slice.len().min(skip);
                        outbox.append(part);
                        staged += part.len();
                    }
                }
                _ => {}
            }
        }
        Ok((staged, None))
    }

    /// The preamble's and the frames' unwritten bytes, as slices for one vectored write (the
    /// first [`MAX_IOVECS`] of them). Fails if a frame's payload is gone.
    fn slices<'a>(
        &'a self,
        core: &'a Core,
        tokens: &HashMap<MessageToken, TxId>,
    ) -> Result<IoSlices<'a>, CloseCause> {
        let mut slices = IoSlices::new();
        if let Some(rest) = self.preamble.get(self.preamble_written..) {
            if !rest.is_empty() {
                slices.push(IoSlice::new(rest));
            }
        }
        'frames: for (index, frame) in self.frames.iter().enumerate() {
            let mut skip = if index == 0 { self.front_written as usize } else { 0 };
            let header = frame.header_bytes();
            if skip < header.len() {
                slices.push(IoSlice::new(header.get(skip..).unwrap_or(&[])));
                skip = 0;
            } else {
                skip -= header.len();
            }
            if frame.payload_len == 0 {
                continue;
            }
            let Some(tx) = frame.token.and_then(|token| tokens.get(&token)) else {
                return Err(CloseCause::Internal("a frame's message is unknown"));
            };
            let Ok(payload) = core.engine.tx_payload(*tx) else {
                // The message went away under us; the stream cannot continue without its bytes.
                return Err(CloseCause::Internal("a frame's payload went away"));
            };
            for slice in payload {
                if skip >= slice.len() {
                    skip -= slice.len();
                    continue;
                }
                slices.push(IoSlice::new(slice.get(std::mem::take(&mut skip)..).unwrap_or(&[])));
                if slices.len() >= MAX_IOVECS {
                    break 'frames;
                }
            }
        }
        Ok(slices)
    }

    /// Accounts `written` bytes: preamble first, then frames in order.
    fn advance(&mut self, now: Time, conn: &mut Conn, written: usize) -> Result<(), CloseCause> {
        let preamble_left = self.preamble.len().saturating_sub(self.preamble_written);
        let to_preamble = written.min(preamble_left);
        self.preamble_written += to_preamble;
        if self.preamble_written >= self.preamble.len() && !self.preamble.is_empty() {
            self.preamble = Vec::new();
            self.preamble_written = 0;
        }
        let mut left = (written - to_preamble) as u64;
        if left == 0 {
            return Ok(());
        }
        conn.on_transmitted(now, left as usize).map_err(CloseCause::from_conn_error)?;
        while left > 0 {
            let Some(front) = self.frames.front() else {
                return Err(CloseCause::Internal("wrote more than the frames handed out"));
            };
            let front_left = front.wire_len() - self.front_written;
            if left >= front_left {
                left -= front_left;
                self.frames.pop_front();
                self.front_written = 0;
            } else {
                self.front_written += left;
                left = 0;
            }
        }
        Ok(())
    }
}

/// Slices kept on the stack up to this many: a burst of small messages (a header and a
/// payload each) fits, so the common write allocates nothing.
const INLINE_SLICES: usize = 32;

/// The slices of one vectored write: on the stack while few, on the heap beyond that.
type IoSlices<'a> = SmallVec<[IoSlice<'a>; INLINE_SLICES]>;
