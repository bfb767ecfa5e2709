//! The sending half of a connection: frames from the socklnd framing, staged in the
//! connection's [`Outbox`] to be written without any lock.
//!
//! The framing hands out frames in order ([`Conn::poll_transmit`]); the writer keeps those not
//! yet staged, up to [`MAX_BATCH_FRAMES`] at a time, and stages them: headers and small
//! payloads copied, large payloads pinned, all from the payloads the table captured when it
//! took the messages ([`super::payload`]), so staging needs neither the core nor its lock. A
//! message whose bytes are all staged is complete, unless it asked the peer for a ZC-ACK
//! (payloads from `zc_min_payload`): then it completes on the ACK
//! (docs/decisions/0004-zero-copy-acks.md). What the outbox has no room for waits here, in
//! order, until the outbox empties (`outbox.rs`).
//!
//! A passive connection's reply hello goes first, as a preamble: it must precede any frame.
//!
//! lustre: socklnd_cb.c `ksocknal_transmit()`, `ksocknal_send_iov()`, `ksocknal_send_kiov()`.

use std::collections::VecDeque;

use foldhash::HashMap;
use ulnet_proto::engine::{HealthStatus, PinnedBytes, TxId};
use ulnet_proto::socklnd::MessageToken;
use ulnet_proto::socklnd::conn::{Conn, Frame};
use ulnet_proto::time::Time;

use super::context::CloseCause;
use super::outbox::{Outbox, Staging};
use super::payload::Sending;

/// Most frames staged in one go.
pub const MAX_BATCH_FRAMES: usize = 64;

/// A connection's unwritten output.
pub(super) struct Writer {
    /// Bytes that precede every frame (a passive side's reply hello).
    preamble: Vec<u8>,
    preamble_written: usize,
    /// Frames handed out by the framing and not yet fully staged, oldest first.
    frames: VecDeque<Frame>,
    /// Bytes of the front frame already staged.
    front_written: u64,
}

/// What a flush stages with, besides the writer.
pub(super) struct FlushCx<'a> {
    pub(super) now: Time,
    pub(super) conn: &'a mut Conn,
    pub(super) outbox: &'a Outbox,
    /// The messages handed to the framing, by token, with their payloads.
    pub(super) tokens: &'a mut HashMap<MessageToken, Sending>,
    /// Sends completed by this flush (their bytes all staged).
    pub(super) done: &'a mut Vec<(TxId, HealthStatus)>,
    /// Set when bytes were staged that this thread must write.
    pub(super) staged: &'a mut bool,
}

impl Writer {
    pub(super) fn new(preamble: Vec<u8>) -> Self {
        Self { preamble, preamble_written: 0, frames: VecDeque::new(), front_written: 0 }
    }

    /// Whether anything waits to be staged.
    pub(super) fn has_output(&self, conn: &Conn) -> bool {
        self.preamble_written < self.preamble.len()
            || !self.frames.is_empty()
            || conn.wants_to_transmit()
    }

    /// Stages frames until the outbox is full or nothing is left, completing each message
    /// whose bytes are all staged. Needs no core: the payloads were captured when the messages
    /// were handed to the table ([`super::payload`]).
    pub(super) fn flush(&mut self, cx: &mut FlushCx<'_>) -> Result<(), CloseCause> {
        loop {
            while self.frames.len() < MAX_BATCH_FRAMES {
                match cx.conn.poll_transmit() {
                    Some(frame) => self.frames.push_back(frame),
                    None => break,
                }
            }
            if self.preamble_written >= self.preamble.len() && self.frames.is_empty() {
                return Ok(());
            }
            let mut outbox = cx.outbox.stage();
            let staged = self.stage(cx.tokens, &mut outbox)?;
            if staged == 0 {
                // Full: later frames must not overtake the staged bytes, so they wait, and
                // whoever empties the outbox nudges the task to stage them.
                outbox.defer();
                return Ok(());
            }
            *cx.staged |= outbox.wants_writer();
            drop(outbox);
            self.advance(cx.now, cx.conn, staged)?;
            while let Some(token) = cx.conn.poll_sent() {
                if let Some(sending) = cx.tokens.remove(&token) {
                    cx.done.push((sending.tx, HealthStatus::Ok));
                }
            }
        }
    }

    /// Stages the preamble and frames, in order, into the outbox: headers and small payloads
    /// copied, large payloads pinned. Stops at the first frame that does not fit. Returns the
    /// bytes staged.
    fn stage(
        &self,
        tokens: &HashMap<MessageToken, Sending>,
        outbox: &mut Staging<'_>,
    ) -> Result<usize, CloseCause> {
        let mut staged = 0;
        if let Some(rest) = self.preamble.get(self.preamble_written..) {
            if !rest.is_empty() {
                if !outbox.has_room(rest.len(), 0) {
                    return Ok(0);
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
            let payload = match frame.token.and_then(|token| tokens.get(&token)) {
                Some(sending) => Some(&sending.payload),
                None if frame.payload_len == 0 => None,
                None => return Err(CloseCause::Internal("a frame's message is unknown")),
            };
            let (copied, pinned) = match payload {
                Some(payload) => payload.rest(payload_skip),
                None => (&[][..], None),
            };
            if copied.len() + pinned.as_ref().map_or(0, PinnedBytes::len)
                != (frame.payload_len as usize).saturating_sub(payload_skip)
            {
                return Err(CloseCause::Internal("a frame's payload has the wrong length"));
            }
            let pinned_len = pinned.as_ref().map_or(0, PinnedBytes::len);
            if !outbox.has_room(header_rest.len() + copied.len(), pinned_len) {
                return Ok(staged);
            }
            outbox.append(header_rest);
            outbox.append(copied);
            staged += header_rest.len() + copied.len();
            if let Some(pinned) = pinned {
                staged += pinned.len();
                outbox.append_pinned(pinned);
            }
        }
        Ok(staged)
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
