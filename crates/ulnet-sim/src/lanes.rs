//! Back-pressure on delayed receives: the modelled socklnd's connection readers.
//!
//! When the engine answers a header with `RecvAction::Delay` (a router waiting for a router
//! credit or buffer, a lazy portal without a buffer, a delay rule), the TCP LND stops reading
//! that connection until the engine resumes the receive (`poll_resume`): the payload stays in
//! the socket, the frames behind it on the same connection wait unread, and so does the
//! sender's ZC-ACK for each of them, since socklnd acknowledges a zero-copy payload only once
//! it is read (lustre: socklnd_cb.c `ksocknal_process_receive()`, `pro_handle_zcreq`): the
//! sender's peer credits stay taken. A connection closed meanwhile loses what it held; the
//! parked receive then fails when the engine resumes it, as the TCP LND's does
//! (`RemoteDropped`).
//!
//! A lane is one connection in one direction: a pair's generation (a reconnection is a new
//! lane), the direction and the connection index ([`Posting::lane`](crate::socklnd::Posting::lane)).
//! What waits in a lane is bounded by the messages in flight, which the workloads' RPC slots
//! bound; the TCP window a stalled reader would close is not modelled (a sender's small
//! messages still complete as they leave its port).

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use ulnet_proto::addr::Nid;
use ulnet_proto::engine::{NiId, RxId, TxId};
use ulnet_proto::wire::header::Header;

use crate::socklnd::{Lane, PairId};

/// One connection's reader: pair, pair generation, lane.
pub type LaneKey = (PairId, u32, Lane);

/// A frame that reached its receiver.
#[derive(Clone, Debug)]
pub struct Arrival {
    pub node: u32,
    pub ni: NiId,
    pub from: Nid,
    pub header: Header,
    pub pair: PairId,
    pub generation: u32,
    pub lane: Lane,
    /// One-way latency back to the sender (a ZC-ACK's trip).
    pub back: Duration,
    /// The payload's bytes, for LNet's own messages (ping buffers, pushes); `None` for
    /// workload payloads, which only have a length.
    pub bytes: Option<Box<[u8]>>,
}

impl Arrival {
    pub fn key(&self) -> LaneKey {
        (self.pair, self.generation, self.lane)
    }
}

/// A sender's send completion that waits for its payload to be read (the ZC-ACK).
#[derive(Clone, Copy, Debug)]
pub struct Held {
    pub node: u32,
    pub incarnation: u32,
    pub tx: TxId,
    pub back: Duration,
}

/// A lane whose reader is parked.
#[derive(Debug)]
struct Blocked {
    node: u32,
    /// The parked receive; `None` once resumed, while the frames behind it are being read.
    rx: Option<RxId>,
    /// The parked receive is one the node forwards (a router's).
    routed: bool,
    bytes: Option<Box<[u8]>>,
    held: Option<Held>,
    queue: VecDeque<(Arrival, Option<Held>)>,
    closed: bool,
}

/// What a parked frame keeps until it is read: its bytes and its sender's completion.
#[derive(Debug)]
pub struct Parked {
    pub bytes: Option<Box<[u8]>>,
    pub held: Option<Held>,
}

/// A parked receive the engine resumed.
#[derive(Debug)]
pub struct Resumed {
    pub key: LaneKey,
    /// The connection closed while it waited: the payload is gone.
    pub closed: bool,
    /// A receive the node forwards: its bytes go with the forward.
    pub routed: bool,
    pub bytes: Option<Box<[u8]>>,
    /// The sender's completion, now due (one way back from now).
    pub held: Option<Held>,
    /// Frames wait behind it: read them next.
    pub queued: bool,
    /// What waited behind it on a connection that closed: lost with it.
    pub dropped: Dropped,
}

/// What a closed connection or a stopped node took: completions to fail, frames lost.
#[derive(Debug, Default)]
pub struct Dropped {
    pub held: Vec<Held>,
    pub frames: u64,
    /// Parked receives forgotten (their node stopped).
    pub parked: u64,
}

/// Every parked lane.
#[derive(Debug, Default)]
pub struct Lanes {
    blocked: HashMap<LaneKey, Blocked, foldhash::fast::FixedState>,
    parked: HashMap<(u32, RxId), LaneKey, foldhash::fast::FixedState>,
}

impl Lanes {
    pub fn is_empty(&self) -> bool {
        self.blocked.is_empty()
    }

    /// Whether frames on `key` must wait.
    pub fn is_blocked(&self, key: &LaneKey) -> bool {
        !self.blocked.is_empty() && self.blocked.contains_key(key)
    }

    /// Queues `arrival` behind the parked reader of its lane.
    pub fn queue(&mut self, arrival: Arrival, held: Option<Held>) {
        if let Some(blocked) = self.blocked.get_mut(&arrival.key()) {
            blocked.queue.push_back((arrival, held));
        }
    }

    /// Parks the reader of `key` on receive `rx` of `node` (`routed` when the node forwards
    /// it), with the frame's bytes and its sender's completion.
    pub fn park(&mut self, key: LaneKey, node: u32, rx: RxId, routed: bool, frame: Parked) {
        self.parked.insert((node, rx), key);
        let queue = self.blocked.remove(&key).map(|b| b.queue).unwrap_or_default();
        let Parked { bytes, held } = frame;
        let blocked = Blocked { node, rx: Some(rx), routed, bytes, held, queue, closed: false };
        self.blocked.insert(key, blocked);
    }

    /// The engine resumed `rx` of `node`; `None` if it was not parked here.
    pub fn resume(&mut self, node: u32, rx: RxId) -> Option<Resumed> {
        let key = self.parked.remove(&(node, rx))?;
        let blocked = self.blocked.get_mut(&key)?;
        blocked.rx = None;
        let mut dropped = Dropped::default();
        if blocked.closed {
            // Nothing is read from a closed connection again (`close` emptied the queue; a
            // frame still on its way when it closed is lost on arrival).
            for (_, held) in blocked.queue.drain(..) {
                dropped.frames += 1;
                dropped.held.extend(held);
            }
        }
        let resumed = Resumed {
            key,
            closed: blocked.closed,
            routed: blocked.routed,
            bytes: blocked.bytes.take(),
            held: blocked.held.take(),
            queued: !blocked.queue.is_empty(),
            dropped,
        };
        if !resumed.queued {
            self.blocked.remove(&key);
        }
        Some(resumed)
    }

    /// The frames waiting on a resumed lane, oldest first; the lane is free again.
    pub fn take_queue(&mut self, key: &LaneKey) -> VecDeque<(Arrival, Option<Held>)> {
        match self.blocked.get(key) {
            Some(blocked) if blocked.rx.is_none() => {
                self.blocked.remove(key).map(|b| b.queue).unwrap_or_default()
            }
            _ => VecDeque::new(),
        }
    }

    /// Puts frames back at the head of a lane that parked again while they were read.
    pub fn requeue(&mut self, key: &LaneKey, rest: VecDeque<(Arrival, Option<Held>)>) {
        if let Some(blocked) = self.blocked.get_mut(key) {
            let mut queue = rest;
            queue.append(&mut blocked.queue);
            blocked.queue = queue;
        }
    }

    /// `pair`'s connections closed: what waited unread on them is lost.
    pub fn close(&mut self, pair: PairId) -> Dropped {
        let mut dropped = Dropped::default();
        if self.blocked.is_empty() {
            return dropped;
        }
        let keys: Vec<LaneKey> = self.blocked.keys().filter(|key| key.0 == pair).copied().collect();
        for key in keys {
            let Some(blocked) = self.blocked.get_mut(&key) else { continue };
            blocked.closed = true;
            dropped.held.extend(blocked.held.take());
            for (_, held) in blocked.queue.drain(..) {
                dropped.frames += 1;
                dropped.held.extend(held);
            }
            if blocked.rx.is_none() {
                self.blocked.remove(&key);
            }
        }
        dropped
    }

    /// `node` stopped: its parked receives are forgotten with what waited behind them.
    pub fn forget_node(&mut self, node: u32) -> Dropped {
        let mut dropped = Dropped::default();
        let keys: Vec<LaneKey> =
            self.blocked.iter().filter(|(_, b)| b.node == node).map(|(key, _)| *key).collect();
        for key in keys {
            let Some(blocked) = self.blocked.remove(&key) else { continue };
            if blocked.rx.is_some() {
                dropped.parked += 1;
            }
            dropped.held.extend(blocked.held);
            for (_, held) in blocked.queue {
                dropped.frames += 1;
                dropped.held.extend(held);
            }
        }
        self.parked.retain(|(parked_node, _), _| *parked_node != node);
        dropped
    }
}
