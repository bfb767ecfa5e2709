//! The I/O shell: the state a node shares between API callers and its I/O thread, the routine
//! that carries out the core's outputs, the I/O thread's loop, and the shutdown order. One
//! module per job, each using only those listed before it:
//!
//! | module | job |
//! |---|---|
//! | [`doorbell`] | waking the I/O thread cheaply ([`Doorbell`]) |
//! | [`hold`] | when output made on callers' threads is held back, and how long ([`OutputHold`]) |
//! | [`core`] | the state behind the core lock ([`Core`]) and what a node shares ([`Shared`]) |
//! | [`wake`] | wake-ups owed once the lock is released ([`Wakes`]) |
//! | [`event_route`] | the core's events to their event queues |
//! | [`drain`](mod@drain) | carrying out what the core produced, writing (or holding) the output |
//! | [`io_loop`] | the I/O thread's loop: timers, LND polling, sleeping |
//! | [`partitions`] | the I/O threads of the other CPU partitions, and pinning |
//! | [`shutdown`] | the shutdown order ([`finish`]) |
//!
//! # Who runs what
//!
//! * The core ([`ulnet_proto::engine::Engine`]) sits in [`Core`] behind one read-write lock.
//!   An API call (put, get, attach, unlink) takes it on the caller's thread, makes the call
//!   with `now`, and then, still holding it, carries out everything the core produced
//!   ([`drain`](fn@drain)): events go to their [`EventQueue`](crate::EventQueue)s, transmits to
//!   the LND of their NI, delayed receives that may proceed to the LND that holds them.
//!   Loopback completes inside the core, so a `0@lo` operation never leaves the caller's thread.
//! * On a node of one partition every engine call holds the core exclusively. On a node of
//!   several, the message path (a connection's turn, send completions, the API's message
//!   calls, the drains after them) holds it shared and makes the engine's calls on the
//!   partitions their plans name ([`CoreRef`], [`drain_shared`]); a call the engine declines
//!   there changed nothing, and is made again with the core held exclusively (decision 0029).
//! * Wake-ups (of the I/O threads, of event consumers) are collected in [`Wakes`] and issued
//!   after the lock is released, so nobody is woken only to block on the lock we hold.
//! * Each CPU partition has an I/O thread running a tokio current-thread runtime of its own,
//!   pinned to the partition's CPUs when the node was given them ([`partitions`]). Partition
//!   0's is the node's I/O thread: its loop ([`run`]) fires the core's timer
//!   ([`poll_timeout`](ulnet_proto::engine::Engine::poll_timeout) /
//!   [`handle_timeout`](ulnet_proto::engine::Engine::handle_timeout)) and polls the LNDs that
//!   want polling (the in-process fabric delivers frames there); LNDs with tasks of their own
//!   (TCP) start them from [`Lnd::start`](crate::lnd::Lnd::start), each connection on the
//!   runtime of the partition its peer's NID hashes to.
//!
//! # Locks, in the only order they are taken
//!
//! 1. Core locks, exclusive or shared, never both by one thread. When two nodes are involved
//!    (the in-process fabric copying a payload from the sender's MD into the receiver's), they
//!    are locked exclusively in order of node id ([`lock_pair`]).
//! 2. Inside the engine, its partitions' locks, in partition order (taken and released within
//!    each engine call).
//! 3. Leaf locks, taken briefly while a core may be held and never held while taking a core:
//!    a partition's event router, the registry of event queues, the delayed receives, an
//!    LND's inbox, the fabric's link model, an event queue, the list of event queues.

pub(crate) mod core;
pub(crate) mod doorbell;
pub(crate) mod drain;
pub(crate) mod event_route;
pub(crate) mod hold;
pub(crate) mod io_loop;
pub(crate) mod partitions;
pub(crate) mod shutdown;
pub(crate) mod wake;

pub(crate) use self::core::{
    CompletionKey, Core, CoreGuard, CoreRead, CoreRef, Counters, Lnds, NeedsExclusive, Shared,
    leaf, lock_pair, next_node_id,
};
pub(crate) use doorbell::Doorbell;
pub(crate) use drain::{
    HandlerStream, Owed, before_wait, drain, drain_call, drain_releasing, drain_shared,
};
pub(crate) use hold::OutputHold;
pub(crate) use io_loop::run;
pub(crate) use shutdown::finish;
pub(crate) use wake::Wakes;
