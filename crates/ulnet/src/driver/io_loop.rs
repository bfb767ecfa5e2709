//! The I/O thread's loop ([`run`]): the core's timer, held output that is due, LND polling,
//! then sleep until the next deadline or a doorbell.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use ulnet_proto::time::Time;

use super::core::{Lnds, Shared};
use super::drain::{drain_releasing, write_held};
use super::hold::HeldCheck;
use super::wake::Wakes;
use crate::clock;

/// The core's next deadline and the LNDs, when no timer is due at `now`: read with the core
/// shared on a node of several partitions, so a wake-up with nothing due stops no partition.
/// `None` when a timer is due, or the node has one partition: the loop takes the core
/// exclusively.
fn idle_timer(shared: &Arc<Shared>, now: Time) -> Option<(Time, Lnds)> {
    if !shared.partitioned {
        return None;
    }
    let core = shared.read();
    let armed = core.engine.poll_timeout().unwrap_or(Time::MAX);
    if armed <= now {
        return None;
    }
    core.set_armed(armed);
    Some((armed, Arc::clone(&core.lnds)))
}

/// The I/O thread's loop: core timer, LND polling, then sleep until the next deadline or a
/// doorbell. Returns when the node is closing.
pub(crate) async fn run(shared: &Arc<Shared>) {
    loop {
        if shared.closing.load(Ordering::Acquire) {
            return;
        }
        let mut now = clock::now();
        let held_check = match shared.output_hold.check(now) {
            HeldCheck::Idle => None,
            HeldCheck::At(due) => Some(due),
            HeldCheck::WriteNow => {
                write_held(shared);
                None
            }
        };
        let mut wakes = Wakes::default();
        let (mut next, lnds) = if let Some(seen) = idle_timer(shared, now) {
            seen
        } else {
            let mut core = shared.lock();
            if core.engine.poll_timeout().is_some_and(|deadline| deadline <= now) {
                core.engine.handle_timeout(now);
                // Resends after a failure come in bursts too.
                core = drain_releasing(shared, core, &mut now, &mut wakes);
            }
            let armed = core.engine.poll_timeout().unwrap_or(Time::MAX);
            core.set_armed(armed);
            (armed, Arc::clone(&core.lnds))
        };
        wakes.finish();
        for lnd in lnds.iter().flatten() {
            if let Some(deadline) = lnd.poll(shared, now) {
                next = next.min(deadline);
            }
        }
        if let Some(due) = held_check {
            next = next.min(due);
        }
        shared.doorbell.wait(next, shared.spin).await;
    }
}
