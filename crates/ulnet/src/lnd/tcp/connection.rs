//! One task per established connection.
//!
//! The task owns no protocol state (that lives in the peer table, under the core lock, so a
//! transmit on any thread can write to the socket directly). It only waits: for the socket to
//! become readable (unless the reader is parked on a lazy portal), for it to become writable
//! (when the writer is blocked), or for a nudge (a resume, new output, or the connection being
//! closed by someone else). Then it takes one turn:
//!
//! 0. write what the connection's outbox holds (frames staged by whichever thread produced
//!    them, `outbox.rs`), and read what the socket has, before taking any lock: into the
//!    task's own buffer when the next bytes are headers or a small payload, into a large
//!    payload's destination when the core lent it (`Input::preread`);
//! 1. lock the core and the table; handle the input (headers to the core, payload into MD
//!    memory), reading more from the socket as it goes when the core could not lend;
//! 2. release the table and drain the core: the ACKs, REPLYs and events the input produced
//!    are staged in their connections' outboxes; a burst's first half is written as soon as it
//!    is staged, with the core lock released for the write (`drain_releasing`), and the rest
//!    once the turn ends;
//! 3. lock the table again and write what this connection still has (ZC-ACK NOOPs, leftovers),
//!    which also tells the task what to wait for; drain again for the sends that completed.
//!
//! The task leaves when its connection is gone from the table.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use tokio::net::TcpStream;
use tokio::sync::Notify;
use ulnet_proto::time::Time;

use super::context::{ConnKey, Cx, Interest, NewConn, Turn};
use super::deferred::{complete_sends, recycle_sends, spare_sends};
use super::ni::Inner;
use super::outbox::{Lock, Outbox};
use super::reader::{Input, LentSlot};
use crate::clock;
use crate::driver::{Owed, Shared, Wakes, drain_releasing, drain_shared, partitions};

/// Starts the task of a connection the peer table just added, on the I/O thread of the
/// partition its peer hashes to (where the dialer or the acceptor registered its socket).
pub(super) fn start(inner: &Arc<Inner>, node: &Arc<Shared>, new: NewConn) {
    let NewConn { key, stream, nudge, outbox, lent } = new;
    let cpt = inner.placement.cpt_of(&key.peer.nid);
    let io = TaskIo { stream, nudge, outbox, lent };
    let task = run(Arc::clone(inner), Arc::downgrade(node), key, io);
    inner.spawn(node, cpt, task);
}

/// What a connection's task shares with the peer table.
struct TaskIo {
    stream: Arc<TcpStream>,
    nudge: Arc<Notify>,
    outbox: Arc<Outbox>,
    lent: Arc<LentSlot>,
}

/// Drives one connection until it closes.
async fn run(inner: Arc<Inner>, node: Weak<Shared>, key: ConnKey, io: TaskIo) {
    let TaskIo { stream, nudge, outbox, lent } = io;
    let _counted = node.upgrade().map(|node| ConnTaskCount::new(&node));
    let mut input = Input::new();
    // A new connection's reader waits for headers.
    let mut preread = true;
    loop {
        let Some(shared) = node.upgrade() else {
            return;
        };
        // What a full socket left in the outbox, or what was staged by a thread that has
        // not written it yet: out before anything new, and without the lock.
        // The task's own turn deals with whatever the write left.
        let _ = outbox.write_out(Lock::Released);
        input.preread(&stream, preread, &shared.counters, &lent);
        let turn = take_turn(&inner, &shared, key, &mut input);
        drop(shared);
        let interest = match turn {
            None => return,
            Some((interest, false)) => interest,
            Some((interest, true)) => {
                // Input may be waiting, but let the rest of the node run first.
                preread = interest.preread;
                tokio::task::yield_now().await;
                continue;
            }
        };
        preread = interest.preread;
        // Waiting ends on the first of these; a failed readiness wait shows up as an error on
        // the next read or write, which closes the connection.
        if interest.write {
            outbox.set_task_awaits_writable(true);
        }
        tokio::select! {
            () = nudge.notified() => {}
            _ = stream.readable(), if interest.read => {}
            _ = stream.writable(), if interest.write => {}
        }
        if interest.write {
            outbox.set_task_awaits_writable(false);
        }
    }
}

/// Counts the task in [`Shared::conn_tasks`] under the partition whose thread runs it, for
/// as long as it lives.
struct ConnTaskCount {
    node: Weak<Shared>,
    cpt: Option<usize>,
}

impl ConnTaskCount {
    fn new(node: &Arc<Shared>) -> Self {
        let cpt = partitions::current().and_then(|cpt| usize::try_from(cpt).ok());
        if let Some(count) = cpt.and_then(|cpt| node.conn_tasks.get(cpt)) {
            count.fetch_add(1, Ordering::Relaxed);
        }
        Self { node: Arc::downgrade(node), cpt }
    }
}

impl Drop for ConnTaskCount {
    fn drop(&mut self) {
        let Some(node) = self.node.upgrade() else { return };
        if let Some(count) = self.cpt.and_then(|cpt| node.conn_tasks.get(cpt)) {
            count.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// A turn's receive half with the core shared, on a node of several partitions: `Exclusive`
/// when the engine declined a call (the turn goes on with the core exclusive); `None` when
/// the node is closing.
fn shared_turn(
    inner: &Arc<Inner>,
    node: &Arc<Shared>,
    key: ConnKey,
    input: &mut Input,
    now: &mut Time,
    wakes: &mut Wakes,
) -> Option<Turn> {
    let core = node.read();
    if core.closed {
        return None;
    }
    let (turn, done) = {
        let mut cx = Cx::shared(inner, node, &core, *now, wakes);
        cx.done = spare_sends();
        let turn = cx.with_table(&key.peer.nid, |table, cx| table.receive(cx, key, input));
        (turn, std::mem::take(&mut cx.done))
    };
    // Sends the turn finished (ZC-ACKs that came in), then what the turn produced.
    let mut owed = Owed::default();
    for &(tx, status) in &done {
        if core.try_complete_send(*now, tx, status).is_err() {
            owed.send(tx, status);
        }
    }
    recycle_sends(done);
    drain_shared(node, core, now, wakes, owed, false);
    Some(turn)
}

/// One turn (see the module documentation). Returns what to wait for and whether the reader
/// stopped on its budget with input possibly left; `None` when the connection is gone.
fn take_turn(
    inner: &Arc<Inner>,
    node: &Arc<Shared>,
    key: ConnKey,
    input: &mut Input,
) -> Option<(Interest, bool)> {
    let mut now = clock::now();
    let mut wakes = Wakes::default();
    let shared_turn = if node.partitioned {
        shared_turn(inner, node, key, input, &mut now, &mut wakes)?
    } else {
        Turn::Exclusive
    };
    let turn = if shared_turn != Turn::Exclusive {
        shared_turn
    } else {
        if node.partitioned {
            node.counters.core_shared_declined.fetch_add(1, Ordering::Relaxed);
        }
        let mut core = node.lock();
        if core.closed {
            return None;
        }
        let turn = {
            let mut cx = Cx::locked(inner, node, &mut core, now, &mut wakes);
            cx.with_table(&key.peer.nid, |table, cx| table.receive(cx, key, input))
        };
        drop(drain_releasing(node, core, &mut now, &mut wakes));
        turn
    };
    // The transmits the input produced, framed with the lock released: ZC-ACKs the turn owes
    // ride on them rather than on NOOPs of their own.
    wakes.run_deferred();
    let interest = match turn {
        Turn::Closed | Turn::Exclusive => None,
        Turn::Open { more } => {
            let mut cx = Cx::released(inner, node, clock::now(), &mut wakes);
            cx.done = spare_sends();
            let peer = key.peer.nid;
            let interest = cx.with_table(&peer, |table, cx| table.send(cx, key));
            let done = std::mem::take(&mut cx.done);
            complete_sends(node, done, &mut wakes);
            interest.map(|interest| (interest, more))
        }
    };
    wakes.finish();
    interest
}
