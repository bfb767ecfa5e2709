//! Transmits framed with the core lock released.
//!
//! The core hands a transmit to the LND with its lock held ([`Lnd::transmit`]); all the LND
//! does then is capture the payload ([`Payload::capture`]), hand the transmit to its
//! partition's table through the table's inbox (`Tables::post`, a leaf lock), and note in the
//! thread's [`Wakes`] that the table has work, with the flush that ends the drain
//! ([`Lnd::flush`]). Once the thread has released the core lock ([`Wakes::finish`]),
//! [`Deferred::run`] takes everything in each noted table's inbox, in order, and queues, frames,
//! stages and writes it with only that table's lock held: what was about 40% of a small RPC's
//! work under the core lock (docs/decisions/0029-io-thread-per-partition.md). The sends that
//! finish meanwhile (a small message is complete once staged) are completed with the core lock
//! taken again, in one hold, and the drain that follows may hand over more.
//!
//! Order: the inbox is filled with the core locked, so in the order the core produced the
//! transmits, and emptied in that order by whichever thread next holds the table; two threads
//! that each ran the transmits they had popped reordered a peer's stream.
//!
//! Bursts: a drain that may release the lock stops once half a burst is set aside
//! ([`Deferred::burst_due`]), frames and writes it ([`Deferred::run_early`]) and goes on, so
//! that the peer works on the first half while the rest is produced (decision 0011); the
//! drain completes the sends that framing finished when it holds the lock again.
//!
//! [`Lnd::transmit`]: crate::lnd::Lnd::transmit
//! [`Lnd::flush`]: crate::lnd::Lnd::flush
//! [`Wakes`]: crate::driver::Wakes
//! [`Wakes::finish`]: crate::driver::Wakes::finish

use std::cell::{Cell, RefCell};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use ulnet_proto::engine::{HealthStatus, Transmit, TxId};

use super::context::Cx;
use super::ni::Inner;
use super::payload::Payload;
use super::table::EARLY_WRITE_MIN;
use crate::clock;
use crate::driver::{Owed, Shared, Wakes, drain_releasing, drain_shared};
use crate::lnd::Output;

/// Spare lists kept per thread, so that setting transmits aside allocates nothing per turn.
const SPARE_LISTS: usize = 4;

/// Transmits and flushes set aside, each with its NI's LND state.
type Items = Vec<(Arc<Inner>, Item)>;

/// Sends completed with the core lock released, and how.
pub(crate) type Sends = Vec<(TxId, HealthStatus)>;

/// Sends a run finished, with their node, for the caller to complete with the core locked.
pub(crate) type Finished = Option<(Arc<Shared>, Sends)>;

thread_local! {
    static SPARE: RefCell<Vec<Items>> = const { RefCell::new(Vec::new()) };
    /// The lists a run takes the tables' transmits into and collects finished sends in, kept
    /// for their allocations.
    static SPARE_TAKEN: RefCell<Vec<(Transmit, Payload)>> = const { RefCell::new(Vec::new()) };
    static SPARE_SENDS: RefCell<Sends> = const { RefCell::new(Vec::new()) };
    /// Transmits of this thread's last flushed batch (a drain's, over its runs): a burst's
    /// size, whose first half a drain frames before it goes on ([`Deferred::burst_due`]).
    static LAST_BATCH: Cell<u32> = const { Cell::new(0) };
    /// Transmits run since this thread's last flush.
    static SINCE_FLUSH: Cell<u32> = const { Cell::new(0) };
}

/// What a thread set aside for the TCP LND while it held the core lock.
#[derive(Default)]
pub(crate) struct Deferred {
    items: Items,
    /// Transmits among `items`.
    transmits: u32,
    /// NIs whose transmits a pause part way through the drain ran ([`Wakes::run_early`]):
    /// the drain's flush must run for them even with no transmit set aside after.
    ///
    /// [`Wakes::run_early`]: crate::driver::Wakes::run_early
    ran_early: Vec<Arc<Inner>>,
}

pub(super) enum Item {
    /// Transmits were handed to partition `cpt`'s table (`Tables::post`).
    Transmit { cpt: u32 },
    /// The end of a drain: write what the transmits before it queued, unless `hold` (an API
    /// caller streams); `api_call`: the drain was an API call's.
    Flush { hold: bool, api_call: bool },
}

impl Deferred {
    /// Hands `transmit` to its partition's table, to be framed once the lock is released.
    pub(super) fn transmit(&mut self, inner: &Arc<Inner>, transmit: Transmit, payload: Payload) {
        let cpt = inner.placement.cpt_of(&transmit.next_hop);
        inner.tables.post(cpt, transmit, payload);
        self.transmits += 1;
        // One run of the table takes all that was handed to it since.
        let last = self.items.iter().rev().find(|(known, _)| Arc::ptr_eq(known, inner));
        if !matches!(last, Some((_, Item::Transmit { cpt: known })) if *known == cpt) {
            self.push(inner, Item::Transmit { cpt });
        }
    }

    pub(super) fn push(&mut self, inner: &Arc<Inner>, item: Item) {
        if self.items.capacity() == 0 {
            if let Some(spare) = SPARE.try_with(|spare| spare.borrow_mut().pop()).ok().flatten() {
                self.items = spare;
            }
        }
        if let Item::Flush { .. } = item {
            self.ran_early.retain(|known| !Arc::ptr_eq(known, inner));
        }
        self.items.push((Arc::clone(inner), item));
    }

    /// Whether the transmits set aside are a burst's first half (half as many as this
    /// thread's last run had, and at least [`EARLY_WRITE_MIN`]): a drain that may release the
    /// lock frames them now, so that they leave while it produces the rest (decision 0011).
    pub(crate) fn burst_due(&self) -> bool {
        let last = LAST_BATCH.try_with(Cell::get).unwrap_or(0);
        self.transmits >= EARLY_WRITE_MIN.max(last.div_ceil(2))
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Whether a transmit of `inner`'s NI was set aside (or run part way through the drain)
    /// since its last flush.
    pub(super) fn transmits_since_flush(&self, inner: &Arc<Inner>) -> bool {
        let mut own = self.items.iter().rev().filter(|(known, _)| Arc::ptr_eq(known, inner));
        match own.next() {
            Some((_, Item::Transmit { .. })) => true,
            Some((_, Item::Flush { .. })) => false,
            None => self.ran_early.iter().any(|known| Arc::ptr_eq(known, inner)),
        }
    }

    /// Frames what was set aside part way through a drain (see [`Deferred::run`]), remembering
    /// whose transmits ran, for the drain's flush, and returns the sends that finished: the
    /// drain completes them when it takes the lock again (completing them here would start a
    /// drain inside the paused one, and bursts that keep coming would nest without end). Call
    /// with no lock held.
    pub(crate) fn run_early(wakes: &mut Wakes) -> Finished {
        let taken = std::mem::take(&mut wakes.tcp);
        let mut ran: Vec<Arc<Inner>> = Vec::new();
        for (inner, item) in &taken.items {
            if matches!(item, Item::Transmit { .. })
                && !ran.iter().any(|known| Arc::ptr_eq(known, inner))
            {
                ran.push(Arc::clone(inner));
            }
        }
        let finished = taken.frame(wakes);
        for inner in ran {
            if !wakes.tcp.ran_early.iter().any(|known| Arc::ptr_eq(known, &inner)) {
                wakes.tcp.ran_early.push(inner);
            }
        }
        finished
    }

    /// Runs what was set aside: each transmit under its partition's table lock, then the sends
    /// that finished with the core locked again. Call with no lock held.
    pub(crate) fn run(self, wakes: &mut Wakes) {
        if let Some((node, sends)) = self.frame(wakes) {
            complete_sends(&node, sends, wakes);
        }
    }

    /// Frames what was set aside (see [`Deferred::run`]) and returns the sends that finished,
    /// for the caller to complete with the core locked.
    fn frame(mut self, wakes: &mut Wakes) -> Finished {
        let mut items = std::mem::take(&mut self.items);
        // The list the tables' posted transmits are swapped into (kept for its allocation).
        let mut taken = SPARE_TAKEN.try_with(|spare| spare.take()).unwrap_or_default();
        let flushes = items.iter().any(|(_, item)| matches!(item, Item::Flush { .. }));
        let since = SINCE_FLUSH.try_with(Cell::get).unwrap_or(0).saturating_add(self.transmits);
        let _ = SINCE_FLUSH.try_with(|cell| cell.set(if flushes { 0 } else { since }));
        if flushes {
            let _ = LAST_BATCH.try_with(|last| last.set(since));
        }
        let now = clock::now();
        // Sends finished without the core lock, and their node (in practice always the same).
        let mut finished: Option<(Arc<Shared>, Sends)> = None;
        for (inner, item) in items.drain(..) {
            let Some(node) = inner.node.get().and_then(Weak::upgrade) else {
                // The node is gone, and its transmits with it.
                continue;
            };
            let mut cx = Cx::released(&inner, &node, now, wakes);
            if finished.is_none() {
                cx.done = spare_sends();
            }
            if let Some((_, sends)) =
                finished.as_mut().filter(|(known, _)| Arc::ptr_eq(known, &node))
            {
                // One list for the batch: it keeps its allocation.
                cx.done = std::mem::take(sends);
            }
            match item {
                Item::Transmit { cpt } => {
                    let mut table = inner.tables.lock(cpt);
                    // Everything handed to the table so far, by any thread, in order.
                    let mut posted = std::mem::take(&mut taken);
                    inner.tables.take_posted(cpt, &mut posted);
                    for (transmit, payload) in posted.drain(..) {
                        table.transmit(&mut cx, transmit, payload);
                    }
                    taken = posted;
                }
                Item::Flush { hold, api_call } => {
                    let mut output = Output::None;
                    cx.with_tables(|table, cx| match table.flush_queued(cx, hold) {
                        Output::None => {}
                        written_or_held => output = written_or_held,
                    });
                    // What stays queued is written by a later flush, which must then run even
                    // with no transmit before it.
                    inner.held.store(output == Output::Held, Ordering::Relaxed);
                    match output {
                        Output::Held => {
                            if node.output_hold.hold(now) {
                                // The I/O thread may sleep past the hold's deadline.
                                cx.wakes.ring(&node);
                            }
                        }
                        Output::Written if api_call => node.output_hold.wrote(now),
                        Output::Written | Output::None => {}
                    }
                }
            }
            let done = std::mem::take(&mut cx.done);
            match &mut finished {
                Some((known, sends)) if Arc::ptr_eq(known, &node) => *sends = done,
                _ => {
                    if let Some((other, sends)) = finished.replace((node, done)) {
                        complete_sends(&other, sends, wakes);
                    }
                }
            }
        }
        let _ = SPARE.try_with(|spare| {
            let mut spare = spare.borrow_mut();
            if spare.len() < SPARE_LISTS {
                spare.push(items);
            }
        });
        let _ = SPARE_TAKEN.try_with(|spare| spare.replace(taken));
        finished
    }
}

/// Completes `sends`, finished with the core lock released, with it taken again (shared
/// first on a node of several partitions), and carries out what that produces.
pub(crate) fn complete_sends(node: &Arc<Shared>, mut sends: Sends, wakes: &mut Wakes) {
    if sends.is_empty() {
        recycle_sends(sends);
        return;
    }
    if node.partitioned {
        let core = node.read();
        let mut now = clock::now();
        let mut owed = Owed::default();
        for (tx, status) in sends.drain(..) {
            if core.try_complete_send(now, tx, status).is_err() {
                owed.send(tx, status);
            }
        }
        drain_shared(node, core, &mut now, wakes, owed, false);
    } else {
        let mut core = node.lock();
        let mut now = clock::now();
        for (tx, status) in sends.drain(..) {
            core.complete_send(now, tx, status);
        }
        drop(drain_releasing(node, core, &mut now, wakes));
    }
    recycle_sends(sends);
}

/// Keeps `sends`' allocation (emptied) as this thread's spare.
pub(crate) fn recycle_sends(mut sends: Sends) {
    sends.clear();
    let _ = SPARE_SENDS.try_with(|spare| spare.replace(sends));
}

/// An empty list for sends finished without the core lock, with this thread's spare
/// allocation.
pub(super) fn spare_sends() -> Sends {
    SPARE_SENDS.try_with(|spare| spare.take()).unwrap_or_default()
}
