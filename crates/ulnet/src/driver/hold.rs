//! When output made on API callers' threads is held back, and until when ([`OutputHold`]).
//! This module decides; [`drain`](mod@super::drain) carries the decisions out.
//!
//! # Batching output on callers' threads
//!
//! Every system call that writes one small message costs more than the core spends on it, so
//! LNDs queue what a drain produces and write it once the drain is done
//! ([`Lnd::flush`](crate::lnd::Lnd::flush)): one vectored write per socket for all the ACKs an
//! I/O turn produced, for instance. On an API caller's thread a drain usually produces one
//! message, so [`OutputHold`] goes further: the first call after a thread waited writes at once
//! (a lone request keeps its latency), and calls that follow it within [`HOLD_WINDOW`], with
//! nobody waiting in between, are a stream: the LND holds their output back. A thread about to
//! wait for anything of the node ([`before_wait`](super::drain::before_wait): an event queue
//! found empty, a ping or discovery) writes what is held first, so a caller never waits for its
//! own held output; the I/O thread writes it after [`MAX_HOLD`] at the latest, for a caller
//! that never waits.
//!
//! An event queue's handler is a stream from its first call
//! ([`HandlerStream`](super::drain::HandlerStream)): whatever its calls produce, call by call,
//! is written when it returns, one write per socket, and its own polls of the queue do not end
//! the stream. Its first call is no lone request: the handler answers a burst of events, and
//! writing the first answer alone split the burst in two on the wire (lnet_selftest's client
//! wrote one new RPC, then the rest). An LND may still write part of a drain's output early:
//! the TCP LND writes a burst's first half as soon as it is queued
//! (`lnd::tcp::table::early_write_due`).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use ulnet_proto::time::Time;

/// After an API call wrote output at once, how long further API output counts as a stream and
/// may be held back. Longer than the gap between back-to-back calls (about a microsecond),
/// short enough that occasional sends from a thread that never waits are written at once.
pub(crate) const HOLD_WINDOW: Duration = Duration::from_micros(200);

/// Longest time output stays held when no thread waits: the I/O thread writes it then. The
/// I/O thread's timers have a resolution of one millisecond.
pub(crate) const MAX_HOLD: Duration = Duration::from_millis(1);

/// Whether output produced on API callers' threads is held back (see "Batching" above).
/// Atomics rather than core state so that a waiting thread can end a stream without the lock.
#[derive(Debug, Default)]
pub(crate) struct OutputHold {
    /// When an API call last wrote output at once (nanoseconds of [`Time`]); 0 once a thread
    /// waited since.
    written_at: AtomicU64,
    /// Since when an LND holds output back (nanoseconds of [`Time`]); 0: nothing held.
    held_since: AtomicU64,
    /// When the I/O thread next looks at held output (nanoseconds of [`Time`]); 0: not armed.
    /// It stays armed while streams keep holding output, so only arming rings the I/O thread.
    check_at: AtomicU64,
    /// Event handlers running ([`HandlerStream`](super::drain::HandlerStream)): each writes
    /// what is held when it returns, so holding output meanwhile needs no check by the I/O
    /// thread (nor the wake-up).
    handlers: AtomicUsize,
}

/// What the I/O thread is to do about held output ([`OutputHold::check`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HeldCheck {
    /// Nothing to look at until a hold arms the check again.
    Idle,
    /// Look again at this time.
    At(Time),
    /// Output was held for [`MAX_HOLD`] with nobody waiting: write it now.
    WriteNow,
}

impl OutputHold {
    /// Whether output produced now by an API call may be held back.
    pub(crate) fn streaming(&self, now: Time) -> bool {
        let written_at = self.written_at.load(Ordering::Relaxed);
        written_at != 0 && now < Time::from_nanos(written_at).saturating_add(HOLD_WINDOW)
    }

    /// An API call wrote output at once at `now`: calls that follow within [`HOLD_WINDOW`]
    /// are a stream.
    pub(crate) fn wrote(&self, now: Time) {
        self.written_at.store(now.as_nanos().max(1), Ordering::Relaxed);
    }

    /// An LND held output back at `now`. Returns whether the I/O thread must be rung to write
    /// it in time (it may sleep past the new deadline).
    #[must_use]
    pub(crate) fn hold(&self, now: Time) -> bool {
        let since = now.as_nanos().max(1);
        // SeqCst with `check`: either it sees this hold, or we see it disarmed and re-arm.
        let _ = self.held_since.compare_exchange(0, since, Ordering::SeqCst, Ordering::Relaxed);
        if self.handlers.load(Ordering::SeqCst) > 0 {
            return false;
        }
        let due = now.saturating_add(MAX_HOLD).as_nanos();
        self.check_at.compare_exchange(0, due, Ordering::SeqCst, Ordering::Relaxed).is_ok()
    }

    /// Ends the stream; returns whether output was held.
    pub(super) fn release(&self) -> bool {
        self.written_at.store(0, Ordering::Relaxed);
        self.held_since.swap(0, Ordering::SeqCst) != 0
    }

    /// An event handler starts at `now`: a stream from its first call.
    pub(super) fn begin_handler(&self, now: Time) {
        self.handlers.fetch_add(1, Ordering::SeqCst);
        self.written_at.store(now.as_nanos().max(1), Ordering::Relaxed);
    }

    /// An event handler returned (the caller then writes what is held).
    pub(super) fn end_handler(&self) {
        self.handlers.fetch_sub(1, Ordering::SeqCst);
    }

    /// On the I/O thread: whether output held for [`MAX_HOLD`] is to be written now, or when
    /// to look again. [`HeldCheck::WriteNow`] has already ended the hold.
    pub(super) fn check(&self, now: Time) -> HeldCheck {
        let due = self.check_at.load(Ordering::SeqCst);
        if due == 0 {
            return HeldCheck::Idle;
        }
        if now < Time::from_nanos(due) {
            return HeldCheck::At(Time::from_nanos(due));
        }
        self.check_at.store(0, Ordering::SeqCst);
        let since = self.held_since.load(Ordering::SeqCst);
        if since == 0 {
            // Every waiter wrote what was held; the next hold arms again.
            return HeldCheck::Idle;
        }
        let due = Time::from_nanos(since).saturating_add(MAX_HOLD);
        if now >= due {
            // Nobody waited within MAX_HOLD: the I/O thread writes it.
            if self.held_since.swap(0, Ordering::SeqCst) != 0 {
                return HeldCheck::WriteNow;
            }
            return HeldCheck::Idle;
        }
        // Held more recently: look again when that is due (unless a hold armed meanwhile).
        match self.check_at.compare_exchange(0, due.as_nanos(), Ordering::SeqCst, Ordering::SeqCst)
        {
            Ok(_) => HeldCheck::At(due),
            Err(armed) => HeldCheck::At(Time::from_nanos(armed)),
        }
    }
}
