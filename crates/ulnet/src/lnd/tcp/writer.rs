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
//! lustre: socklnd_cb.c `ksocknal_transmit()`, `ksocknal_send_iov()`, `ksocknal_send_kiov()`.

use std::collections::VecDeque;

use foldhash::HashMap;
use std::io::{self, IoSlice};
use std::sync::atomic::{AtomicU64, Ordering};

use smallvec::SmallVec;
use tokio::net::TcpStream;
use ulnet_proto::engine::{HealthStatus, TxId};
use ulnet_proto::socklnd::MessageToken;
use ulnet_proto::socklnd::conn::{Conn, Frame};
use ulnet_proto::time::Time;

use super::context::{CloseCause, MAX_IOVECS};
use crate::driver::Core;

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
    /// Everything is written.
    Idle,
    /// The socket is full; wait until it is writable.
    Blocked,
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

    /// Writes until the socket is full or nothing is left, completing each message whose bytes
    /// are all written. `tokens` maps the framing's message tokens to the core's transmits.
    pub(super) fn flush(
        &mut self,
        core: &mut Core,
        now: Time,
        conn: &mut Conn,
        stream: &TcpStream,
        tokens: &mut HashMap<MessageToken, TxId>,
        writes: &AtomicU64,
    ) -> Result<Flushed, CloseCause> {
        loop {
            while self.frames.len() < MAX_BATCH_FRAMES {
                match conn.poll_transmit() {
                    Some(frame) => self.frames.push_back(frame),
                    None => break,
                }
            }
            if self.preamble_written >= self.preamble.len() && self.frames.is_empty() {
                return Ok(Flushed::Idle);
            }
            writes.fetch_add(1, Ordering::Relaxed);
            let written = match self.write(core, stream, tokens)? {
                Ok(0) => return Err(CloseCause::Io(io::ErrorKind::WriteZero)),
                Ok(written) => written,
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                    return Ok(Flushed::Blocked);
                }
                Err(error) => return Err(CloseCause::Io(error.kind())),
            };
            self.advance(now, conn, written)?;
            while let Some(token) = conn.poll_sent() {
                if let Some(tx) = tokens.remove(&token) {
                    core.complete_send(now, tx, HealthStatus::Ok);
                }
            }
        }
    }

    /// One vectored write of the preamble and the frames' unwritten bytes. The outer result
    /// is a local failure (a payload that is gone); the inner one the socket's answer.
    fn write(
        &self,
        core: &Core,
        stream: &TcpStream,
        tokens: &HashMap<MessageToken, TxId>,
    ) -> Result<io::Result<usize>, CloseCause> {
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
        Ok(super::sys::send_vectored(stream, slices.as_slice()))
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
