//! Receiving: a frame reaches its node (or is lost on the way), its header goes to the engine,
//! and its payload where the engine says, now or when a delayed receive resumes; the connection
//! readers parked meanwhile are in [`crate::lanes`].

use super::*;

impl World {
    /// A delayed receive whose connection closed before it could be read.
    pub(super) fn receive_failed(&mut self, node: u32, rx: RxId) {
        let now = self.now;
        if let Some(sim) = self.nodes.get_mut(node as usize) {
            if let Err(error) = sim.engine.handle_recv_done(now, rx, HealthStatus::RemoteDropped) {
                self.workloads
                    .violation
                    .get_or_insert(format!("node {node} refused a receive failure: {error}"));
            }
        }
    }

    pub(super) fn receive_done(&mut self, node: u32, rx: ulnet_proto::engine::RxId) {
        let now = self.now;
        if let Some(sim) = self.nodes.get_mut(node as usize) {
            // The payload is not materialised: the MD's memory is left as it is.
            if let Err(error) = sim.engine.handle_recv_done(now, rx, HealthStatus::Ok) {
                self.workloads
                    .violation
                    .get_or_insert(format!("node {node} refused a receive completion: {error}"));
            }
        }
    }

    /// A frame reaches its receiver: lost if its path is cut, queued unread if its
    /// connection's reader is parked, else read.
    pub(super) fn arrive(&mut self, arrival: Arrival, send_done: Option<u32>) {
        let from_endpoint = self.nid_index.get(&arrival.from).copied();
        let to_endpoint = self
            .nodes
            .get(arrival.node as usize)
            .and_then(|n| n.endpoints.get(usize::from(arrival.ni.0).saturating_sub(1)))
            .copied();
        if self.pairs.get(arrival.pair).is_some_and(|p| p.generation != arrival.generation) {
            // Its connection closed while it was on the way: closing a socket aborts what it
            // carried, and the sender's LND failed the send waiting for its ZC-ACK (lustre:
            // socklnd.c `ksocknal_finalize_zcreq()`). Read, it would reach a reader that no
            // longer exists (a lane closed while parked keeps nothing).
            self.totals.frames_lost += 1;
            self.totals.frames_lost_to_closes += 1;
            self.abort_pending_send(send_done);
            return;
        }
        let cut = match (from_endpoint, to_endpoint) {
            (Some(a), Some(b)) => self.is_cut(a, b),
            _ => true,
        };
        if cut {
            // Lost on the way: a large send waiting for its ZC-ACK fails after sock_timeout.
            self.totals.frames_lost += 1;
            self.fail_pending_send(send_done, arrival.pair);
            return;
        }
        self.totals.frames_delivered += 1;
        if let Some(entry) = self.pairs.get_mut(arrival.pair) {
            entry.last_alive = self.now;
        }
        if self.lanes.is_blocked(&arrival.key()) {
            // The reader is parked: the frame waits in the socket, and so does its ZC-ACK.
            let held = self.hold_completion(send_done, arrival.back);
            self.totals.frames_held_unread += 1;
            self.in_flight += 1;
            self.lanes.queue(arrival, held);
            return;
        }
        self.read_frame(arrival, Completion::Scheduled(send_done));
    }

    /// The receiver reads a frame's header and hands it to its engine; the payload goes
    /// where the engine says, now or when it resumes the receive.
    pub(super) fn read_frame(&mut self, arrival: Arrival, completion: Completion) {
        let node = arrival.node;
        let now = self.now;
        let routed = !self.is_local(node, arrival.header.dest_nid);
        let Some(sim) = self.nodes.get_mut(node as usize) else { return };
        match sim.engine.handle_header(now, arrival.ni, arrival.from, &arrival.header) {
            RecvAction::Deliver { rx, .. } => {
                self.place_payload(node, rx, arrival.bytes, routed);
                self.receive_done(node, rx);
                self.release_completion(completion);
            }
            RecvAction::Delay { rx } => {
                self.totals.receives_delayed += 1;
                let held = match completion {
                    Completion::Scheduled(slot) => self.hold_completion(slot, arrival.back),
                    Completion::Held(held) => held,
                };
                self.in_flight += 1;
                let key = arrival.key();
                let frame = Parked { bytes: arrival.bytes, held };
                self.lanes.park(key, node, rx, routed, frame);
            }
            RecvAction::Discard { .. } => self.release_completion(completion),
            RecvAction::ProtocolError(error) => {
                self.workloads
                    .violation
                    .get_or_insert(format!("node {node} refused a header: {error:?}"));
            }
        }
        self.drain(node);
    }

    /// The engine resumed a delayed receive: read its payload (or skip it), let its sender's
    /// ZC-ACK go, and read what waited behind it.
    pub(super) fn resume(&mut self, node: u32, resume: ulnet_proto::engine::Resume) {
        let Some(resumed) = self.lanes.resume(node, resume.rx) else {
            // Not parked by this driver (never in practice): complete it as read.
            if let RecvAction::Deliver { rx, .. } = resume.action {
                self.receive_done(node, rx);
            }
            return;
        };
        self.in_flight -= 1;
        if resumed.closed {
            // The connection closed meanwhile: its payload is gone (the TCP LND's answer), and
            // so is anything that waited behind it.
            if let RecvAction::Deliver { rx, .. } = resume.action {
                self.receive_failed(node, rx);
            }
            self.drop_frames(resumed.dropped);
            return;
        }
        if let RecvAction::Deliver { rx, .. } = resume.action {
            self.place_payload(node, rx, resumed.bytes, resumed.routed);
            self.receive_done(node, rx);
        }
        self.release_completion(Completion::Held(resumed.held));
        if resumed.queued {
            self.schedule(self.now, Pending::Unblock { key: resumed.key });
        }
    }

    /// Reads the frames that waited behind a resumed reader, until one parks it again.
    pub(super) fn unblock(&mut self, key: LaneKey) {
        let mut queue = self.lanes.take_queue(&key);
        while let Some((arrival, held)) = queue.pop_front() {
            self.in_flight -= 1;
            self.read_frame(arrival, Completion::Held(held));
            if self.lanes.is_blocked(&key) {
                self.lanes.requeue(&key, queue);
                return;
            }
        }
    }

    /// Frames a closed connection or a stopped node took: lost, and their senders' completions
    /// fail.
    pub(super) fn drop_frames(&mut self, dropped: Dropped) {
        self.in_flight -= dropped.parked + dropped.frames;
        self.totals.frames_lost += dropped.frames;
        self.fail_held(dropped.held);
    }

    /// Takes a scheduled ZC completion out of the queue, to let it go when the payload is read.
    pub(super) fn hold_completion(&mut self, slot: Option<u32>, back: Duration) -> Option<Held> {
        let slot = slot?;
        let (entry, _) = self.pending.get_mut(slot as usize)?;
        let Pending::SendDone { node, incarnation, tx, status: HealthStatus::Ok, close: None } =
            *entry
        else {
            return None;
        };
        *entry = Pending::Nothing;
        self.in_flight -= 1;
        Some(Held { node, incarnation, tx, back })
    }

    /// A read payload's ZC-ACK goes back: a held completion is due one way later.
    pub(super) fn release_completion(&mut self, completion: Completion) {
        if let Completion::Held(Some(held)) = completion {
            let done = Pending::SendDone {
                node: held.node,
                incarnation: held.incarnation,
                tx: held.tx,
                status: HealthStatus::Ok,
                close: None,
            };
            self.schedule(self.now + held.back, done);
        }
    }

    /// Completions whose connection closed before their payload was read fail now.
    pub(super) fn fail_held(&mut self, held: Vec<Held>) {
        for held in held {
            let done = Pending::SendDone {
                node: held.node,
                incarnation: held.incarnation,
                tx: held.tx,
                status: HealthStatus::RemoteDropped,
                close: None,
            };
            self.schedule(self.now, done);
        }
    }

    /// Where a delivered payload's bytes go: into the MD, or (a router's) kept for the
    /// forward, so that the router buffer is never written.
    pub(super) fn place_payload(
        &mut self,
        node: u32,
        rx: RxId,
        bytes: Option<Box<[u8]>>,
        routed: bool,
    ) {
        let Some(bytes) = bytes else { return };
        if routed {
            if self.forward_bytes.len() >= FORWARD_BYTES_PRUNE
                && self.forward_bytes.len().is_power_of_two()
            {
                let nodes = &mut self.nodes;
                self.forward_bytes.retain(|(node, tx), _| {
                    nodes.get_mut(*node as usize).is_some_and(|sim| {
                        !matches!(sim.engine.tx_payload(*tx), Err(DriverError::UnknownTx))
                    })
                });
            }
            self.forward_bytes.insert((node, rx.as_tx()), bytes);
        } else if let Some(sim) = self.nodes.get_mut(node as usize) {
            fill(&mut sim.engine, rx, &bytes);
        }
    }

    /// Whether `nid` is one of `node`'s.
    pub(super) fn is_local(&self, node: u32, nid: Nid) -> bool {
        self.nid_index
            .get(&nid)
            .and_then(|e| self.endpoints.get(*e as usize))
            .is_some_and(|e| e.node == node)
    }
}

/// A read frame's sender completion: still in the queue (at its ZC-ACK's time), or held
/// while the frame waited unread.
#[derive(Clone, Copy, Debug)]
pub(super) enum Completion {
    Scheduled(Option<u32>),
    Held(Option<Held>),
}

/// Reads `bytes` into a `Deliver` receive's MD, as a socket driver would.
pub(super) fn fill(engine: &mut Engine, rx: ulnet_proto::engine::RxId, bytes: &[u8]) {
    let Ok(slices) = engine.rx_segments_mut(rx) else { return };
    let mut source = bytes;
    for slice in slices {
        let (head, rest) = source.split_at(slice.len().min(source.len()));
        if let Some(target) = slice.get_mut(..head.len()) {
            target.copy_from_slice(head);
        }
        source = rest;
    }
}
