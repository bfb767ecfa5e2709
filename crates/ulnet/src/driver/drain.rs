//! Draining: carrying out everything the core produced (transmits to the LNDs, delayed
//! receives that may proceed, events to their queues, completions to blocked callers) until it
//! produces nothing more, then having the LNDs write, or hold back, the output
//! ([`super::hold`] decides which). Runs with the core locked, on whichever thread made the
//! core call.
//!
//! With the core shared ([`drain_shared`], a node of several partitions), a drain takes
//! each partition's transmits and events through the engine's calls on partitions; what needs
//! the whole node (a transmit whose plan does, a resume, a finished ping, a path reset, a
//! send completion after a failure) sends it to the exclusive drain, which carries out the
//! rest.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use ulnet_proto::engine::{HealthStatus, NiId, PingCompletion, RecvAction, Transmit, TxId};
use ulnet_proto::time::Time;

use super::core::{CompletionKey, Core, CoreGuard, CoreRead, Lnds, Shared, leaf};
use super::event_route::{route_events, route_events_of};
use super::partitions;
use super::wake::Wakes;
use crate::clock;
use crate::lnd::tcp::{Sends, complete_sends};
use crate::lnd::{Lnd, Output};

/// Carries out everything the core produced, until it produces nothing more, and writes all
/// the output. Runs with the core locked, on whichever thread made the core call.
pub(crate) fn drain(shared: &Arc<Shared>, core: &mut Core, now: Time, wakes: &mut Wakes) {
    drain_and_flush(shared, core, now, wakes, false);
}

/// [`drain`] on the message path (a connection's turn, a handler's held output, a finished
/// dial or accept, the core's timers): output due at once (a burst's first half of TCP
/// transmits, decision 0011) is framed and written with the core lock released, and the drain
/// then goes on under the lock again, with `now` read anew, completing the sends that finished
/// meanwhile. Returns the lock, taken again.
pub(crate) fn drain_releasing<'a>(
    shared: &'a Arc<Shared>,
    core: CoreGuard<'a>,
    now: &mut Time,
    wakes: &mut Wakes,
) -> CoreGuard<'a> {
    release_for_early_output(shared, core, now, wakes, false)
}

/// [`drain_releasing`] for an API call: output that continues a stream may be held back
/// ([`super::hold`]).
pub(crate) fn drain_call<'a>(
    shared: &'a Arc<Shared>,
    core: CoreGuard<'a>,
    now: &mut Time,
    wakes: &mut Wakes,
) -> CoreGuard<'a> {
    release_for_early_output(shared, core, now, wakes, true)
}

fn release_for_early_output<'a>(
    shared: &'a Arc<Shared>,
    mut core: CoreGuard<'a>,
    now: &mut Time,
    wakes: &mut Wakes,
    api_call: bool,
) -> CoreGuard<'a> {
    // Restored on the way out: a drain nested in another's pause must not end the outer's.
    let may_unlock = wakes.set_may_unlock(true);
    while drain_and_flush(shared, &mut core, *now, wakes, api_call) == Drained::Paused {
        // The core is consistent between two outputs: whoever takes the lock meanwhile may
        // carry out the rest.
        drop(core);
        let own = write_early(shared, wakes);
        core = shared.lock();
        // Under the lock, so that `now` never goes backwards for the core.
        *now = clock::now().max(*now);
        // Sends the early output finished: the drain goes on with what they release.
        for &(tx, status) in own.iter().flatten() {
            core.complete_send(*now, tx, status);
        }
    }
    wakes.set_may_unlock(may_unlock);
    core
}

/// With the core lock released part way through a drain: writes the burst's first half set
/// aside (decision 0011) and returns the sends of `shared` it finished, for the drain to
/// complete once it holds the lock again. Another node's (never with one node per LND) are
/// completed here, under its own lock.
fn write_early(shared: &Arc<Shared>, wakes: &mut Wakes) -> Option<Sends> {
    match wakes.run_early() {
        Some((node, sends)) if !Arc::ptr_eq(&node, shared) => {
            complete_sends(&node, sends, wakes);
            None
        }
        finished => finished.map(|(_, sends)| sends),
    }
}

/// How a drain ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Drained {
    /// Everything is carried out.
    Done,
    /// Output is due at once and the caller may release the lock to write it
    /// ([`drain_releasing`]); the rest waits in the core.
    Paused,
}

fn drain_and_flush(
    shared: &Arc<Shared>,
    core: &mut Core,
    now: Time,
    wakes: &mut Wakes,
    api_call: bool,
) -> Drained {
    // One handle on the LNDs for the whole drain: they change only under this lock, and not
    // from inside an LND call (`crate::ni_live`), so a clone per step would only cost atomics.
    let lnds = Arc::clone(&core.lnds);
    loop {
        if carry_out(shared, core, &lnds, now, wakes) == Drained::Paused {
            return Drained::Paused;
        }
        // Writing completes sends, which may free credits for more transmits: carry out again.
        if !flush(shared, &lnds, now, wakes, api_call) {
            break;
        }
    }
    log_refused_nids(core);
    ring_if_earlier(shared, core, wakes);
    Drained::Done
}

/// The I/O thread sleeps until the deadline it armed; a core deadline earlier than that
/// needs it awake.
fn ring_if_earlier(shared: &Arc<Shared>, core: &Core, wakes: &mut Wakes) {
    if core.engine.poll_timeout().is_some_and(|deadline| deadline < core.armed()) {
        core.set_armed(Time::ZERO);
        wakes.ring(shared);
    }
}

/// Hands partition `cpt`'s transmits to their LNDs until it has none (`Done`), or output is
/// due at once (`Paused`), or the next needs the whole node (`Exclusive`).
fn transmits_shared(
    shared: &Arc<Shared>,
    core: &Core,
    lnds: &Lnds,
    cpt: u32,
    now: Time,
    wakes: &mut Wakes,
    owed: &mut Owed,
) -> SharedDrain {
    loop {
        let transmit = match core.engine.try_poll_transmit(cpt) {
            None => return SharedDrain::Exclusive,
            Some(None) => return SharedDrain::Done,
            Some(Some(transmit)) => transmit,
        };
        let lnd = lnd_of(lnds, transmit.ni).filter(|_| !core.closed);
        let refused = match lnd {
            Some(lnd) => lnd.transmit_shared(shared, core, now, transmit, wakes),
            None => Some(transmit),
        };
        owed.transmits.extend(refused);
        if wakes.early_due() {
            return SharedDrain::Paused;
        }
    }
}

/// Fails a transmit nobody can carry (the node is closing, or, a bug, its NI has no LND). Not
/// a resendable status, so this cannot loop.
fn fail_locally(shared: &Arc<Shared>, core: &mut Core, now: Time, tx: TxId) {
    shared.counters.transmits_failed_locally.fetch_add(1, Ordering::Relaxed);
    if let Err(error) = core.engine.handle_send_done(now, tx, HealthStatus::LocalError) {
        tracing::error!(%error, "core refused a local send failure");
    }
}

// -------------------------------------------------------------------- with the core shared

/// What a drain with the core shared left for the exclusive one: transmits an LND could
/// not take on partitions and send completions the engine declined, in the order met.
#[derive(Default)]
pub(crate) struct Owed {
    transmits: Vec<Transmit>,
    sends: Vec<(TxId, HealthStatus)>,
}

impl Owed {
    pub(crate) fn send(&mut self, tx: TxId, status: HealthStatus) {
        self.sends.push((tx, status));
    }

    fn is_empty(&self) -> bool {
        self.transmits.is_empty() && self.sends.is_empty()
    }
}

/// [`drain_releasing`] (or, `api_call`, [`drain_call`]) with the core shared (`core`, taken
/// by the caller for calls made on partitions): carries out the partitions' transmits and events, writing a burst's first
/// half early as the exclusive drain does, then the output. What needs the whole node, and
/// what `owed` holds, is carried out with the core taken exclusively, by the exclusive drain.
/// Returns with the core released.
pub(crate) fn drain_shared(
    shared: &Arc<Shared>,
    core: CoreRead<'_>,
    now: &mut Time,
    wakes: &mut Wakes,
    mut owed: Owed,
    api_call: bool,
) {
    let may_unlock = wakes.set_may_unlock(true);
    let mut core = core;
    let lnds = Arc::clone(&core.lnds);
    let exclusive = loop {
        match carry_out_shared(shared, &core, &lnds, *now, wakes, &mut owed) {
            SharedDrain::Done => {
                // Writing completes sends, which may free credits: carry out again.
                if !flush(shared, &lnds, *now, wakes, api_call) {
                    ring_if_earlier(shared, &core, wakes);
                    break false;
                }
            }
            SharedDrain::Paused => {
                drop(core);
                let own = write_early(shared, wakes);
                core = shared.read();
                *now = clock::now().max(*now);
                for &(tx, status) in own.iter().flatten() {
                    if core.try_complete_send(*now, tx, status).is_err() {
                        owed.send(tx, status);
                    }
                }
            }
            SharedDrain::Exclusive => break true,
        }
    };
    wakes.set_may_unlock(may_unlock);
    drop(core);
    if exclusive || !owed.is_empty() {
        shared.counters.core_shared_declined.fetch_add(1, Ordering::Relaxed);
        let mut core = shared.lock();
        *now = clock::now().max(*now);
        settle(shared, &mut core, *now, owed, wakes);
        drop(release_for_early_output(shared, core, now, wakes, api_call));
    }
}

/// Carries out, with the core exclusive, what a drain with it shared left.
fn settle(shared: &Arc<Shared>, core: &mut Core, now: Time, owed: Owed, wakes: &mut Wakes) {
    let lnds = Arc::clone(&core.lnds);
    for transmit in owed.transmits {
        match lnd_of(&lnds, transmit.ni).filter(|_| !core.closed) {
            Some(lnd) => lnd.transmit(shared, core, now, transmit, wakes),
            None => fail_locally(shared, core, now, transmit.tx),
        }
    }
    for (tx, status) in owed.sends {
        core.complete_send(now, tx, status);
    }
}

/// How a drain with the core shared ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SharedDrain {
    Done,
    /// As [`Drained::Paused`].
    Paused,
    /// Something needs the whole node.
    Exclusive,
}

/// Carries out the partitions' transmits and events (this thread's partition first) until
/// they produce nothing more.
fn carry_out_shared(
    shared: &Arc<Shared>,
    core: &Core,
    lnds: &Lnds,
    now: Time,
    wakes: &mut Wakes,
    owed: &mut Owed,
) -> SharedDrain {
    let count = core.engine.partitions().count().max(1);
    let first = partitions::current().unwrap_or(0) % count;
    loop {
        let mut progressed = false;
        for cpt in (first..count).chain(0..first) {
            let pending = core.engine.pending_outputs(cpt);
            if pending.node_work {
                return SharedDrain::Exclusive;
            }
            if pending.transmits {
                match transmits_shared(shared, core, lnds, cpt, now, wakes, owed) {
                    SharedDrain::Done => progressed = true,
                    ended => return ended,
                }
            }
            if pending.events {
                progressed |= route_events_of(shared, core, cpt, wakes);
            }
        }
        if !progressed {
            return SharedDrain::Done;
        }
    }
}

/// Logs the NIDs discovery refused to attach to the peer that listed them (one of ours, or a
/// configured peer's: docs/decisions/0016-discovery-nid-ownership.md): the first, then each
/// time their count doubles, so a peer that repeats itself cannot flood the log.
fn log_refused_nids(core: &mut Core) {
    let count = core.engine.discovery_nids_refused();
    let logged = core.refused_nids_logged;
    if count <= logged || (logged > 0 && count < logged.saturating_mul(2)) {
        return;
    }
    core.refused_nids_logged = count;
    if let Some(refused) = core.engine.last_refused_nid() {
        tracing::warn!(
            peer = %refused.peer,
            nid = %refused.nid,
            refused = count,
            "discovery refused a NID the peer listed: {}",
            refused.reason
        );
    }
}

/// Has every LND write (or hold back) its queued output. Returns whether anything was written.
fn flush(shared: &Arc<Shared>, lnds: &Lnds, now: Time, wakes: &mut Wakes, api_call: bool) -> bool {
    let hold = api_call && shared.output_hold.streaming(now);
    let mut written = false;
    for lnd in lnds.iter().flatten() {
        match lnd.flush(shared, now, wakes, hold, api_call) {
            Output::Written => written = true,
            Output::Held => {
                if shared.output_hold.hold(now) {
                    // The I/O thread may sleep past the hold's deadline: have it look again.
                    wakes.ring(shared);
                }
            }
            Output::None => {}
        }
    }
    if written && api_call {
        shared.output_hold.wrote(now);
    }
    written
}

/// Carries out what the core produced until it produces nothing more, or until output is due
/// at once and may be written with the lock released ([`Drained::Paused`]).
fn carry_out(
    shared: &Arc<Shared>,
    core: &mut Core,
    lnds: &Lnds,
    now: Time,
    wakes: &mut Wakes,
) -> Drained {
    loop {
        let mut progressed = false;
        // Resets first: a probe of a path just given up on is queued after them.
        while let Some(reset) = core.engine.poll_path_reset() {
            progressed = true;
            if let Some(lnd) = lnd_of(lnds, reset.ni).filter(|_| !core.closed) {
                lnd.reset(shared, core, now, reset.peer, wakes);
            }
        }
        let mut next = core.engine.poll_transmit();
        while let Some(transmit) = next.take() {
            progressed = true;
            let lnd = if core.closed { None } else { lnd_of(lnds, transmit.ni) };
            match lnd {
                Some(lnd) => {
                    lnd.transmit(shared, core, now, transmit, wakes);
                    if wakes.early_due() {
                        return Drained::Paused;
                    }
                }
                None => fail_locally(shared, core, now, transmit.tx),
            }
            next = core.engine.poll_transmit();
        }
        while let Some(resume) = core.engine.poll_resume() {
            progressed = true;
            let holder = leaf(&core.delayed).remove(&resume.rx);
            let lnd = if core.closed { None } else { holder.and_then(|ni| lnd_of(lnds, ni)) };
            match lnd {
                Some(lnd) => lnd.resume(shared, core, now, resume, wakes),
                None => {
                    // Nobody will read the payload any more: fail the receive.
                    if let RecvAction::Deliver { rx, .. } = resume.action {
                        core.complete_recv(now, rx, HealthStatus::LocalError);
                    }
                }
            }
        }
        progressed |= route_events(shared, core, wakes);
        while let Some(completion) = core.engine.poll_completion() {
            progressed = true;
            let key = match &completion {
                PingCompletion::Ping(result) => CompletionKey::Ping(result.id.0),
                PingCompletion::Discovery(result) => CompletionKey::Discovery(result.id.0),
                // A kind this runtime does not wait for yet has no caller to wake.
                _ => continue,
            };
            if let Some(waiter) = core.completions.remove(&key) {
                wakes.complete(waiter, completion);
            }
        }
        if !progressed {
            return Drained::Done;
        }
    }
}

/// The LND of NI `ni` in `lnds`, borrowed.
fn lnd_of(lnds: &Lnds, ni: NiId) -> Option<&Arc<dyn Lnd>> {
    lnds.get(usize::from(ni.0)).and_then(Option::as_ref)
}

// ------------------------------------------------------------------ writing held output

/// A thread is about to wait for something of the node: end the stream, so the next API call
/// writes at once, and write the output held back, which may be what it waits for. Takes the
/// core lock only if something is held. Call with no core lock held.
pub(crate) fn before_wait(shared: &Arc<Shared>) {
    if shared.output_hold.release() {
        write_held(shared);
    }
}

/// An event handler runs on this thread while this lives: what its calls write is held back,
/// however they follow one another, and written when it is dropped (also on a panic, so the
/// count of running handlers stays right).
pub(crate) struct HandlerStream(Arc<Shared>);

impl HandlerStream {
    pub(crate) fn begin(shared: Arc<Shared>) -> Self {
        shared.output_hold.begin_handler(clock::now());
        Self(shared)
    }
}

impl Drop for HandlerStream {
    /// Writes what the handler's calls held back. Output held after the count drops arms the
    /// I/O thread's check as usual.
    fn drop(&mut self) {
        self.0.output_hold.end_handler();
        before_wait(&self.0);
    }
}

/// Writes whatever the LNDs hold back (with the core shared on a node of several
/// partitions: an event handler's every batch ends here).
pub(super) fn write_held(shared: &Arc<Shared>) {
    let mut wakes = Wakes::default();
    if shared.partitioned {
        let core = shared.read();
        let mut now = clock::now();
        drain_shared(shared, core, &mut now, &mut wakes, Owed::default(), false);
    } else {
        let core = shared.lock();
        let mut now = clock::now();
        drop(drain_releasing(shared, core, &mut now, &mut wakes));
    }
    wakes.finish();
}
