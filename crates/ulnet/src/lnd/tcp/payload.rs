//! A message's payload, captured when the core hands the message to the LND ([`Payload`]), so
//! that framing and staging it need neither the core nor its lock.
//!
//! The core hands out a transmit with the core locked; the peer table frames and stages it
//! later, with only its own lock held ([`super::deferred`]). Meanwhile the core may reuse or
//! change the MD's memory, so the bytes are taken at hand-over: a small payload (up to
//! [`COPY_MAX_PAYLOAD`]) is copied, into a buffer from this thread's spares, and a larger one
//! pinned (`Engine::tx_payload_pinned`: the buffer becomes reference-counted, no copy). Memory
//! that cannot be pinned (an MD of several segments) is copied whatever its size: rare, and
//! the price of writing nothing under the lock.

use std::cell::RefCell;

use ulnet_proto::engine::{DriverError, PinnedBytes, TxId};

use super::outbox::COPY_MAX_PAYLOAD;
use crate::driver::Core;

/// Spare copy buffers kept per thread (each up to [`COPY_MAX_PAYLOAD`] or so): enough for a
/// burst at concurrency 64 on a few connections.
const SPARE_BUFFERS: usize = 256;

thread_local! {
    static SPARE: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// A message's payload, as the framing will send it.
#[derive(Debug)]
pub(super) enum Payload {
    None,
    Copied(Copied),
    Pinned(PinnedBytes),
}

/// A message the table took, by its framing token: the core's transmit and its payload.
#[derive(Debug)]
pub(super) struct Sending {
    pub(super) tx: TxId,
    pub(super) payload: Payload,
}

impl Payload {
    /// Takes `tx`'s payload of `length` bytes from the core (locked).
    pub(super) fn capture(core: &mut Core, tx: TxId, length: u32) -> Result<Self, DriverError> {
        if length == 0 {
            return Ok(Self::None);
        }
        if length > COPY_MAX_PAYLOAD {
            if let Some(pinned) = core.engine.tx_payload_pinned(tx)? {
                return Ok(Self::Pinned(pinned));
            }
        }
        let mut copy = Copied::with_capacity(length as usize);
        for slice in core.engine.tx_payload(tx)? {
            copy.0.extend_from_slice(slice);
        }
        Ok(Self::Copied(copy))
    }

    /// [`capture`](Self::capture) with the core shared: `None` when the engine needs the
    /// whole node to read it.
    pub(super) fn capture_shared(
        core: &Core,
        tx: TxId,
        length: u32,
    ) -> Option<Result<Self, DriverError>> {
        if length == 0 {
            return Some(Ok(Self::None));
        }
        if length > COPY_MAX_PAYLOAD {
            match core.engine.try_tx_payload_pinned(tx)? {
                Ok(Some(pinned)) => return Some(Ok(Self::Pinned(pinned))),
                Ok(None) => {}
                Err(error) => return Some(Err(error)),
            }
        }
        let mut copy = Copied::with_capacity(length as usize);
        let read = core.engine.with_tx_payload(tx, |slices| {
            for slice in slices {
                copy.0.extend_from_slice(slice);
            }
        })?;
        Some(read.map(|()| Self::Copied(copy)))
    }

    /// The payload past its first `skip` bytes: bytes to copy, or bytes pinned.
    pub(super) fn rest(&self, skip: usize) -> (&[u8], Option<PinnedBytes>) {
        match self {
            Self::None => (&[], None),
            Self::Copied(copy) => (copy.0.get(skip..).unwrap_or(&[]), None),
            Self::Pinned(pinned) => {
                let mut rest = pinned.clone();
                rest.consume(skip);
                (&[], Some(rest))
            }
        }
    }
}

/// A copied payload, in a buffer given back to this thread's spares when dropped.
#[derive(Debug)]
pub(super) struct Copied(Vec<u8>);

impl Copied {
    fn with_capacity(length: usize) -> Self {
        let spare = SPARE.try_with(|spare| spare.borrow_mut().pop()).ok().flatten();
        let mut buffer = spare.unwrap_or_default();
        buffer.clear();
        buffer.reserve(length);
        Self(buffer)
    }
}

impl Drop for Copied {
    fn drop(&mut self) {
        let buffer = std::mem::take(&mut self.0);
        // A large copy (memory that could not be pinned) is not kept.
        if buffer.capacity() == 0 || buffer.capacity() > 2 * COPY_MAX_PAYLOAD as usize {
            return;
        }
        let _ = SPARE.try_with(|spare| {
            let mut spare = spare.borrow_mut();
            if spare.len() < SPARE_BUFFERS {
                spare.push(buffer);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_reuse_this_threads_spare_buffers_up_to_the_bound() {
        let first = Copied::with_capacity(100);
        let address = first.0.as_ptr();
        drop(first);
        let again = Copied::with_capacity(100);
        assert_eq!(again.0.as_ptr(), address, "the spare was reused");
        let many: Vec<Copied> = (0..SPARE_BUFFERS + 8).map(|_| Copied::with_capacity(64)).collect();
        drop(many);
        assert!(SPARE.with(|spare| spare.borrow().len()) <= SPARE_BUFFERS);
        let large = Copied::with_capacity(4 * COPY_MAX_PAYLOAD as usize);
        drop(large);
        assert!(SPARE.with(|spare| {
            spare.borrow().iter().all(|b| b.capacity() <= 2 * COPY_MAX_PAYLOAD as usize)
        }));
    }

    #[test]
    fn the_rest_of_a_payload_skips_what_was_staged() {
        let mut copy = Copied::with_capacity(4);
        copy.0.extend_from_slice(b"abcd");
        let payload = Payload::Copied(copy);
        assert_eq!(payload.rest(1).0, b"bcd");
        assert_eq!(payload.rest(9).0, b"");
        assert!(Payload::None.rest(0).1.is_none());
    }
}
