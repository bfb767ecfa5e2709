//! What a call works with besides the parts: its clock, the partition it runs on, and the
//! work it defers until it returns. One per partition: a runtime that locks partitions
//! apart gives a call the one of the partition it entered on (decision 0029); the engine
//! alone gives every call partition 0's.

use std::collections::VecDeque;

use crate::engine::ping::InternalEvent;
use crate::engine::slab::Key;
use crate::time::Time;

/// A call's state; empty of work between calls.
#[derive(Debug, Default)]
pub(crate) struct CallState {
    /// The latest `now` a call on this partition was given.
    pub(crate) now: Time,
    /// The partition the current call runs on (where it counts): a message's home partition,
    /// or the one a receive's previous hop hashes to.
    pub(crate) cpt: u32,
    /// Work the call deferred, drained before it returns.
    pub(crate) work: VecDeque<Work>,
    /// Events of LNet's own MDs, handled before the call returns.
    pub(crate) internal_events: VecDeque<InternalEvent>,
}

/// Deferred internal work, drained before every public call returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Work {
    /// Run a loopback send through the receive path (lustre: lo.c `lolnd_send()`).
    Lo(Key),
    /// A credit waiter was granted a credit: post it again (`lnet_post_send_locked`).
    Post(Key),
    /// Re-run path selection for a failed message (the monitor thread's resend queue).
    Resend(Key),
    /// A delayed loopback receive matched: copy and complete it.
    LoDeliver(Key),
    /// Discovery of the message's peer completed: send it (`lnet_peer_discovery_complete`).
    Release(Key),
    /// A message to forward was granted its router credit or buffer (routing.rs).
    RoutedRecv(Key),
}
