//! The modelled socklnd's side of the driver: transmits become network transits on a pair's
//! connections, ZC-ACK completions, path resets and closes (reported to the engines where they
//! are seen), and keepalives.

use super::*;

impl World {
    /// Replaces the pending completion `slot` (a large send waiting for its ZC-ACK) of a
    /// frame lost in flight by a failure after `sock_timeout`.
    pub(super) fn fail_pending_send(&mut self, slot: Option<u32>, pair: PairId) {
        let Some((node, incarnation, tx)) = self.take_waiting_send(slot) else { return };
        let timeout = self.sock_params(node).sock_timeout;
        let generation = self.pairs.get(pair).map_or(0, |p| p.generation);
        self.totals.zc_timeouts += 1;
        let close = Some((pair, generation));
        let status = HealthStatus::LocalTimeout;
        let done = Pending::SendDone { node, incarnation, tx, status, close };
        self.schedule(self.now + timeout, done);
    }

    /// Hands a transmit to the modelled socklnd and network.
    pub(super) fn transmit(&mut self, node: u32, transmit: Transmit) {
        let now = self.now;
        let incarnation = self.nodes.get(node as usize).map_or(0, |n| n.incarnation);
        let done = |tx, status, close| Pending::SendDone { node, incarnation, tx, status, close };
        self.totals.lnet_messages += 1;
        let payload = u64::from(transmit.header.payload_length);
        self.totals.payload_bytes += payload;
        let from = self
            .nodes
            .get(node as usize)
            .and_then(|n| n.endpoints.get(usize::from(transmit.ni.0).saturating_sub(1)))
            .copied();
        let to = self.nid_index.get(&transmit.next_hop).copied();
        let refuse = |world: &mut Self| {
            world.totals.sends_refused += 1;
            world.schedule(now, done(transmit.tx, HealthStatus::RemoteDropped, None));
        };
        let (Some(from), Some(to)) = (from, to) else { return refuse(self) };
        // A partition, or a stopped process whose host refuses connections.
        if self.partitions.contains(&(from.min(to), from.max(to))) || self.endpoint_stopped(to) {
            return refuse(self);
        }
        let mut path = std::mem::take(&mut self.path);
        let mut back = std::mem::take(&mut self.back_path);
        let routed =
            self.network.path(from, to, &mut path).and(self.network.path(to, from, &mut back));
        if routed.is_none() {
            self.path = path;
            self.back_path = back;
            return refuse(self);
        }
        let forward_latency = self.network.latency(&path);
        let back_latency = self.network.latency(&back);
        let rtt = forward_latency + back_latency;
        let bytes = KSOCK_HEADER_BYTES + LNET_HEADER_BYTES + payload;
        let sender = self.sock_params(node);
        let receiver_node = self.endpoints.get(to as usize).map_or(node, |e| e.node);
        let receiver = self.sock_params(receiver_node);
        let speed_mbps = self
            .network
            .ports
            .get(from as usize)
            .and_then(|port| self.network.links.get(port.up as usize))
            .map_or(0, |link| {
                (link.params.bandwidth_bytes_per_sec / 125_000).min(u64::from(u32::MAX)) as u32
            });
        let posting = self.pairs.post(now, from, to, bytes, &sender, &receiver, speed_mbps, rtt);
        let cut = self.is_cut(from, to);
        if posting.connected {
            self.totals.connects += 1;
            if let Some(keepalive) = sender.keepalive {
                self.arm_keepalive(posting.pair, posting.start + keepalive);
            }
            if !cut {
                let generation = self.pairs.get(posting.pair).map_or(0, |p| p.generation);
                let up = Pending::ConnUp { pair: posting.pair, generation };
                let slot = alloc(&mut self.pending, &mut self.free, up);
                self.queue.push(posting.start, slot);
            }
            if cut {
                // The handshake finds no answer: the connect fails and takes the message.
                self.close_pair(posting.pair, Some(from));
                let failed = done(transmit.tx, HealthStatus::RemoteDropped, None);
                self.schedule(now + sender.sock_timeout, failed);
                self.path = path;
                self.back_path = back;
                return;
            }
        }
        let sparse = posting.is_control() && bytes < u64::from(sender.min_bulk);
        let transit =
            self.network.transmit(posting.start, &path, bytes, posting.min_first_hop, rtt, sparse);
        self.path = path;
        self.back_path = back;
        let zc = payload >= u64::from(sender.zc_min_payload);
        let acked = transit.arrived + back_latency;
        // A lost frame gives its window room back once sent: the model has no retransmission
        // queue, and holding the room until sock_timeout would stall the connection long
        // after a fault heals.
        self.pairs.commit(&posting, bytes, transit.sent, if cut { transit.sent } else { acked });
        if cut {
            self.totals.frames_lost += 1;
            let generation = self.pairs.get(posting.pair).map_or(0, |p| p.generation);
            let (at, completion) = if zc {
                self.totals.zc_timeouts += 1;
                let close = Some((posting.pair, generation));
                let failed = done(transmit.tx, HealthStatus::LocalTimeout, close);
                (transit.sent + sender.sock_timeout, failed)
            } else {
                (transit.sent, done(transmit.tx, HealthStatus::Ok, None))
            };
            self.schedule(at, completion);
            return;
        }
        let Some(endpoint) = self.endpoints.get(to as usize).copied() else { return };
        let from_nid = self.endpoints.get(from as usize).map_or(Nid::ANY, |e| e.nid);
        // The completion is scheduled after the arrival so that a loss on the way can cancel it.
        let arrive_slot = self.schedule(transit.arrived, Pending::Nothing);
        let done_at = if zc { acked } else { transit.sent };
        let done_slot = self.schedule(done_at, done(transmit.tx, HealthStatus::Ok, None));
        if zc {
            self.wait_for_zc_ack(posting.pair, done_slot);
        }
        let bytes = self.payload_bytes(node, &transmit);
        let generation = self.pairs.get(posting.pair).map_or(0, |p| p.generation);
        if let Some((entry, _)) = self.pending.get_mut(arrive_slot as usize) {
            *entry = Pending::Arrive {
                arrival: Arrival {
                    node: endpoint.node,
                    ni: endpoint.ni,
                    from: from_nid,
                    header: transmit.header,
                    pair: posting.pair,
                    generation,
                    lane: posting.lane(),
                    back: back_latency,
                    bytes,
                },
                send_done: zc.then_some(done_slot),
            };
        }
    }

    pub(super) fn wait_for_zc_ack(&mut self, pair: PairId, slot: u32) {
        let generation = self.pending.get(slot as usize).map_or(0, |entry| entry.1);
        let pending = &self.pending;
        let list = self.zc_waiting.entry(pair).or_default();
        if list.len() >= 64 && list.len().is_power_of_two() {
            list.retain(|&(slot, generation)| still_waiting(pending, slot, generation));
        }
        list.push((slot, generation));
    }

    /// Fast failover gave up on a path (or an NI went down): close its connections, so that
    /// the sends still waiting for a ZC-ACK on them fail back to the engine now, as the TCP
    /// LND does (lustre: socklnd.c `ksocknal_close_conn_locked()`).
    pub(super) fn reset_path(&mut self, node: u32, reset: ulnet_proto::engine::PathReset) {
        let Some(&endpoint) = self
            .nodes
            .get(node as usize)
            .and_then(|n| n.endpoints.get(usize::from(reset.ni.0).saturating_sub(1)))
        else {
            return;
        };
        let pairs: Vec<PairId> = match reset.peer {
            Some(peer) => match self.nid_index.get(&peer) {
                Some(&other) => vec![self.pairs.pair_of(endpoint, other)],
                None => Vec::new(),
            },
            None => self.pairs.pairs_of(endpoint).collect(),
        };
        for pair in pairs {
            self.reset_pair(pair, endpoint);
        }
    }

    /// `closer` closes a pair's connections: the sends waiting for a ZC-ACK on them fail at
    /// once. When nothing gets through to the other end (the closer's link is down), the
    /// other end never hears of it: its connections stay up for it, and only the closer's
    /// sends fail and its engine is told.
    pub(super) fn reset_pair(&mut self, pair: PairId, closer: EndpointId) {
        let Some(ends) = self.pairs.get(pair).map(|p| p.ends) else { return };
        let other = if ends[0] == closer { ends[1] } else { ends[0] };
        let closer_node = self.endpoints.get(closer as usize).map(|e| e.node);
        let half = self.path_dark(closer, other);
        if half {
            if self.pairs.get(pair).is_some_and(|p| p.announced) {
                self.notify_connection(closer, other, false);
            }
        } else {
            self.close_pair(pair, Some(closer));
        }
        let mut waiting = self.zc_waiting.remove(&pair).unwrap_or_default();
        if half {
            // The other end's sends still wait for their ZC-ACKs.
            let pending = &self.pending;
            let (mine, theirs): (Vec<_>, Vec<_>) = waiting.into_iter().partition(|(slot, _)| {
                matches!(pending.get(*slot as usize), Some((Pending::SendDone { node, .. }, _))
                    if Some(*node) == closer_node)
            });
            if !theirs.is_empty() {
                self.zc_waiting.insert(pair, theirs);
            }
            waiting = mine;
        }
        for (slot, generation) in waiting {
            if still_waiting(&self.pending, slot, generation) {
                self.abort_pending_send(Some(slot));
            }
        }
    }

    /// Replaces the pending completion `slot` of a send waiting for its ZC-ACK on a connection
    /// that closed by a failure now: the LND aborts such sends when it closes the connection
    /// (lustre: socklnd.c `ksocknal_finalize_zcreq()`).
    pub(super) fn abort_pending_send(&mut self, slot: Option<u32>) {
        let Some((node, incarnation, tx)) = self.take_waiting_send(slot) else { return };
        let status = HealthStatus::RemoteDropped;
        let done = Pending::SendDone { node, incarnation, tx, status, close: None };
        self.schedule(self.now, done);
    }

    /// Takes back the pending completion `slot` if it is a send still waiting for its ZC-ACK
    /// (to be replaced by a failure): its node, incarnation and transmit.
    fn take_waiting_send(&mut self, slot: Option<u32>) -> Option<(u32, u32, TxId)> {
        let (entry, _) = self.pending.get_mut(slot? as usize)?;
        let Pending::SendDone { node, incarnation, tx, status: HealthStatus::Ok, close: None } =
            *entry
        else {
            return None;
        };
        *entry = Pending::Nothing;
        self.in_flight -= 1;
        Some((node, incarnation, tx))
    }

    /// Closes a pair's connections, at `closer`'s end (or both ends, timing out together):
    /// what waited unread on them is lost, and the sends whose ZC-ACK waited with it fail.
    /// Connections that had come up are reported gone by the closer's LND, and by the other
    /// end's when the close reaches it (no link down or black hole between them).
    pub(super) fn close_pair(&mut self, pair: PairId, closer: Option<EndpointId>) {
        let announced = self.pairs.get(pair).filter(|p| p.announced).map(|p| p.ends);
        self.pairs.close(pair);
        if let Some([a, b]) = announced {
            let dark = self.path_dark(a, b);
            for (end, other) in [(a, b), (b, a)] {
                if closer.is_none_or(|closer| closer == end) || !dark {
                    self.notify_connection(end, other, false);
                }
            }
        }
        let dropped = self.lanes.close(pair);
        self.drop_frames(dropped);
    }

    /// `end`'s LND tells its engine that its connections to `other` came up or all went
    /// (`lnet_notify`, which sets a gateway NI's status), as the TCP LND does.
    pub(super) fn notify_connection(&mut self, end: EndpointId, other: EndpointId, up: bool) {
        let now = self.now;
        let (Some(at), Some(peer)) =
            (self.endpoints.get(end as usize).copied(), self.endpoints.get(other as usize))
        else {
            return;
        };
        let peer_nid = peer.nid;
        if let Some(sim) = self.nodes.get_mut(at.node as usize).filter(|n| !n.stopped) {
            let _ = sim.engine.handle_connection(now, at.ni, peer_nid, up);
            self.drain(at.node);
        }
    }

    /// The end of `pair` that belongs to `node`.
    pub(super) fn end_of(&self, pair: PairId, node: u32) -> Option<EndpointId> {
        let ends = self.pairs.get(pair)?.ends;
        ends.into_iter().find(|e| self.endpoints.get(*e as usize).is_some_and(|e| e.node == node))
    }

    /// Whether nothing gets through between two endpoints (a link down, a black hole): a
    /// stopped process's host still answers, so it does not count.
    pub(super) fn path_dark(&self, a: EndpointId, b: EndpointId) -> bool {
        let down = |e: EndpointId| self.endpoints.get(e as usize).is_some_and(|e| e.down);
        down(a)
            || down(b)
            || (!self.blackholes.is_empty() && self.blackholes.contains(&(a.min(b), a.max(b))))
    }

    /// The bytes of a transmit's payload: a forward's are those its router received; none
    /// for a workload's shared buffer.
    pub(super) fn payload_bytes(&mut self, node: u32, transmit: &Transmit) -> Option<Box<[u8]>> {
        if transmit.header.payload_length == 0 {
            return None;
        }
        if !self.is_local(node, transmit.header.src_nid) {
            // A forward: never copied out of the router buffer, which holds nothing written.
            return self.forward_bytes.remove(&(node, transmit.tx));
        }
        let sim = self.nodes.get_mut(node as usize)?;
        let mut slices = sim.engine.tx_payload(transmit.tx).ok()?.peekable();
        let first = slices.peek()?;
        if self.workloads.is_virtual(first.as_ptr()) {
            return None;
        }
        Some(slices.flat_map(|slice| slice.iter().copied()).collect())
    }

    /// Whether frames between two endpoints are lost (a link down, a black hole).
    pub(super) fn is_cut(&self, a: EndpointId, b: EndpointId) -> bool {
        self.path_dark(a, b) || self.endpoint_stopped(a) || self.endpoint_stopped(b)
    }

    /// Whether the node owning `endpoint` is stopped.
    pub(super) fn endpoint_stopped(&self, endpoint: EndpointId) -> bool {
        self.stopped_nodes > 0
            && self
                .endpoints
                .get(endpoint as usize)
                .and_then(|e| self.nodes.get(e.node as usize))
                .is_some_and(|n| n.stopped)
    }

    pub(super) fn sock_params(&self, node: u32) -> crate::scenario::tunables::SockParams {
        let group = self.nodes.get(node as usize).map_or(0, |n| n.group);
        self.group_tunables
            .get(group as usize)
            .map_or(crate::scenario::tunables::FALLBACK_SOCK, |t| t.sock)
    }

    pub(super) fn arm_keepalive(&mut self, pair: PairId, at: Time) {
        let armed = self.pairs.get(pair).is_some_and(|p| p.keepalive_armed);
        if !armed {
            if let Some(entry) = self.pairs.get_mut(pair) {
                entry.keepalive_armed = true;
            }
            let slot = alloc(&mut self.pending, &mut self.free, Pending::Keepalive { pair });
            self.queue.push(at, slot);
        }
    }

    /// A pair's keepalive timer: silent for `keepalive`, it sends a NOOP each way; silent
    /// for `keepalive` plus `sock_timeout`, it closes.
    pub(super) fn keepalive(&mut self, pair_id: PairId) {
        let now = self.now;
        let Some(pair) = self.pairs.get_mut(pair_id) else { return };
        pair.keepalive_armed = false;
        if pair.state == PairState::Down {
            return;
        }
        let [a, b] = pair.ends;
        let last_alive = pair.last_alive;
        let node = self.endpoints.get(a as usize).map_or(0, |e| e.node);
        let sock = self.sock_params(node);
        let Some(keepalive) = sock.keepalive else { return };
        if last_alive + keepalive > now {
            return self.arm_keepalive(pair_id, last_alive + keepalive);
        }
        if now.saturating_duration_since(last_alive) >= keepalive + sock.sock_timeout {
            self.close_pair(pair_id, None);
            return;
        }
        self.totals.keepalives += 2;
        if !self.is_cut(a, b) {
            if let Some(pair) = self.pairs.get_mut(pair_id) {
                pair.last_alive = now;
            }
            self.arm_keepalive(pair_id, now + keepalive);
        } else {
            self.arm_keepalive(pair_id, last_alive + keepalive + sock.sock_timeout);
        }
    }
}
