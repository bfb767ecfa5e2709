//! Shutting a node down ([`finish`]).
//!
//! # Shutdown order
//!
//! Mark the core closed (API calls now fail with `ShutDown`) -> clear every lazy portal (delayed
//! PUTs are dropped) -> fail every transmit still held by an LND with `LocalError` (no resend),
//! and any transmit the core produces from then on -> unlink every MD that has an event queue,
//! so its final event hands the memory back -> deliver those events -> shut the LNDs down (the
//! fabric fails frames still addressed to us back to their senders) -> close the event queues.

use std::sync::{Arc, PoisonError, Weak};

use ulnet_proto::engine::portal::MAX_PORTALS;
use ulnet_proto::engine::{HealthStatus, MdHandle, TxId};

use super::core::Shared;
use super::drain::drain;
use super::wake::Wakes;
use crate::clock;

/// Shuts the node down in the order the module documentation gives. Idempotent; runs on the
/// I/O thread as it exits, or on the caller's thread if the I/O thread is gone.
pub(crate) fn finish(shared: &Arc<Shared>) {
    let now = clock::now();
    let lnds = {
        let mut core = shared.lock();
        if core.closed {
            return;
        }
        core.closed = true;
        // Wake every caller blocked on a ping or discovery: they get `ShutDown`.
        core.completions.clear();
        Arc::clone(&core.lnds)
    };
    // LNDs first: they stop taking frames, fail the receives they were about to fill and hand
    // what they hold back to its senders. Our own transmits they held stay with the core
    // (`Phase::InLnd`).
    for lnd in lnds.iter().flatten() {
        lnd.shutdown(shared, now);
    }
    let mut wakes = Wakes::default();
    {
        let mut core = shared.lock();
        for portal in 0..MAX_PORTALS {
            // Every index is in range, so this cannot fail.
            let _ = core.engine.clear_lazy_portal(now, portal);
        }
        drain(shared, &mut core, now, &mut wakes);
        // Failing a transmit can release credits and start queued ones; closed-mode draining
        // fails those at once, so one pass leaves nothing held.
        let held: Vec<TxId> = core.engine.transmits_in_lnd().map(|(tx, _)| tx).collect();
        for tx in held {
            core.complete_send(now, tx, HealthStatus::LocalError);
            drain(shared, &mut core, now, &mut wakes);
        }
        let mds: Vec<MdHandle> = core.engine.handled_mds().collect();
        for md in mds {
            // An MD may already have gone with an earlier one's messages; that is fine.
            let _ = core.engine.md_unlink(now, md);
            drain(shared, &mut core, now, &mut wakes);
        }
        let left = core.engine.message_count();
        if left != 0 {
            tracing::warn!(left, "messages still alive after shutdown");
        }
        core.finished = true;
    }
    wakes.finish();
    let queues = std::mem::take(&mut *shared.queues.lock().unwrap_or_else(PoisonError::into_inner));
    for queue in queues.iter().filter_map(Weak::upgrade) {
        queue.close();
    }
}
