//! Waking the I/O thread cheaply ([`Doorbell`]).
//!
//! # The wake-up trade-off
//!
//! Handing work to a sleeping thread on another CPU costs about 30 us on small virtual machines
//! (BENCHMARKS.md, "Peer tools"), more than the whole core spends on a message. So API calls work
//! on the caller's thread, the I/O thread is woken only when an LND needs it (a transmit for a
//! network NI, a delayed receive that may resume, a timer that moved earlier). A waiting thread
//! may spin for a bounded time before it parks ([`NodeBuilder::spin`](crate::NodeBuilder::spin));
//! off by default, because on a 2-vCPU machine with more runnable threads than CPUs a spinner
//! holds the CPU the next hop needs (figures at [`DEFAULT_SPIN`](crate::DEFAULT_SPIN)).
//! [`Doorbell`] makes ringing an awake thread cost two atomic operations; only a parked thread
//! costs a system call.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use ulnet_proto::time::Time;

use crate::clock;

/// Bell checks between two yields to the I/O runtime while spinning.
const SPINS_PER_YIELD: u32 = 64;

/// A cheap wake-up for the I/O thread: ringing an awake (or spinning) thread is two atomic
/// operations; only a parked one gets a `Notify` (and so a system call to unpark it).
#[derive(Debug, Default)]
pub(crate) struct Doorbell {
    rung: AtomicBool,
    parked: AtomicBool,
    notify: tokio::sync::Notify,
}

impl Doorbell {
    /// Wakes the thread; `wakeups` counts the times it was parked.
    pub(crate) fn ring(&self, wakeups: &AtomicU64) {
        // SeqCst pairs with `wait`: either the waiter sees `rung`, or we see `parked` and
        // notify (a notification sent before the waiter awaits is kept as a permit).
        self.rung.store(true, Ordering::SeqCst);
        if self.parked.load(Ordering::SeqCst) {
            wakeups.fetch_add(1, Ordering::Relaxed);
            self.notify.notify_one();
        }
    }

    /// Waits until rung or until `deadline`: spins (yielding to other tasks) for up to `spin`,
    /// then parks.
    pub(super) async fn wait(&self, deadline: Time, spin: Duration) {
        let now = clock::now();
        if now >= deadline {
            // Already due: still let the runtime poll its I/O driver and run the socket tasks
            // once, so a deadline that stays due cannot starve every connection and the
            // acceptor (the loop would otherwise never await).
            tokio::task::yield_now().await;
            return;
        }
        let spin_until = now.saturating_add(spin).min(deadline);
        loop {
            // Check the bell often and the clock (and other tasks) less often: yielding to
            // tokio polls its I/O driver, a system call.
            for _ in 0..SPINS_PER_YIELD {
                if self.rung.swap(false, Ordering::AcqRel) {
                    return;
                }
                std::hint::spin_loop();
            }
            let now = clock::now();
            if now >= deadline {
                return;
            }
            if now >= spin_until {
                break;
            }
            tokio::task::yield_now().await;
        }
        self.parked.store(true, Ordering::SeqCst);
        if !self.rung.swap(false, Ordering::SeqCst) {
            let notified = self.notify.notified();
            if deadline == Time::MAX {
                notified.await;
            } else {
                let at = tokio::time::Instant::from_std(clock::instant(deadline));
                let _ = tokio::time::timeout_at(at, notified).await;
            }
            self.rung.store(false, Ordering::SeqCst);
        }
        self.parked.store(false, Ordering::SeqCst);
    }
}
