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
//! A batch whose payloads are all small is not written here but copied into the connection's
//! [`Outbox`], which the staging thread writes once it has released the core lock; a batch
//! with a large payload is written here, with the lock held, when the outbox is empty, and
//! waits for it otherwise (`outbox.rs` says why).
//!
//! lustre: socklnd_cb.c `ksocknal_transmit()`, `ksocknal_send_iov()`, `ksocknal_send_kiov()`.

use std::collections::VecDeque;

use foldhash::HashMap;
use std::io::{self, IoSlice};
use std::sync::atomic::Ordering;

use smallvec::SmallVec;
use tokio::net::TcpStream;
use ulnet_proto::engine::{HealthStatus, TxId};
use ulnet_proto::socklnd::MessageToken;
use ulnet_proto::socklnd::conn::{Conn, Frame};
use ulnet_proto::time::Time;

use super::context::{CloseCause, MAX_IOVECS};
use super::outbox::{COPY_MAX_PAYLOAD, Outbox};
use crate::driver::{Core, Counters};

/// Most frames gathered into one vectored write.
pub const MAX_BATCH_FRAMES: usize = 64;

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
            let small = self.frames.iter().all(|frame| frame.payload_len <= COPY_MAX_PAYLOAD);
            let mut outbox = cx.outbox.stage();
            if small || !outbox.is_idle() {
                let unwritten = self.unwritten_len();
                if !small || !outbox.has_room(unwritten) {
                    // Later frames must not overtake the staged bytes: they wait.
                    outbox.defer();
                    return Ok(Flushed::Idle);
                }
                let slices = self.slices(cx.core, cx.tokens)?;
                let mut copied = 0;
                for slice in &slices {
                    outbox.append(slice);
                    copied += slice.len();
                }
                *cx.staged |= outbox.wants_writer();
                drop((outbox, slices));
                self.advance(cx.now, cx.conn, copied)?;
            } else {
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
            }
            while let Some(token) = cx.conn.poll_sent() {
                if let Some(tx) = cx.tokens.remove(&token) {
                    cx.core.complete_send(cx.now, tx, HealthStatus::Ok);
                }
            }
        }
    }

    /// Bytes of the preamble and the handed-out frames not yet written.
    fn unwritten_len(&self) -> usize {
        let preamble = self.preamble.len().saturating_sub(self.preamble_written);
        let frames: u64 = self.frames.iter().map(Frame::wire_len).sum();
        preamble + (frames - self.front_written) as usize
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
