//! Node calls held until the end of a fold and made with the endpoint's state released.
//!
//! What a fold decides to do on the node (start a client RPC, reply to or move the bulk of a
//! server RPC, repost a request buffer) is held ([`HeldCall`]) and, at the fold's end, taken
//! out of the state ([`RpcCore::take_held`]), made under one lock of the node with the state
//! released ([`HeldBatch::make`]: one drain for all of them, their messages in one write per
//! connection), then settled with the state locked again ([`RpcCore::settle_held`]). The
//! kernel's selftest likewise makes its LNet calls with no service lock held (rpc.c
//! `srpc_send_reply()` drops `scd_lock` before `srpc_post_active_rdma()`; `srpc_send_rpc()`
//! holds only the RPC's own lock): the drain and the socket writes a call causes are most of a
//! small RPC's cost, and another partition's thread may fold its events meanwhile.
//!
//! While a batch is being made, other folds may run: the events of the MDs it makes may come
//! in before it is settled (a request buffer used, a reply sent, a bulk done or failed, a
//! client RPC's reply), and the endpoint may shut down. Settling allows for each: an RPC being
//! started counts as live until its batch is settled, an MD whose final event is in is not
//! taken back, an MD the RPC gave up meanwhile (aborted, bulk cancelled or failed) is unlinked
//! then, and whatever a shut-down endpoint would have unlinked is unlinked.
//!
//! lustre: lnet/selftest/rpc.c (`srpc_send_rpc()`, `srpc_send_reply()`, `srpc_do_bulk()`,
//! `srpc_post_active_rdma()`, `srpc_post_passive_rdma()`).

use ulnet::proto::wire::selftest::{SRPC_RDMA_PORTAL, SrpcService};
use ulnet::{
    Calls, EventQueue, GetRequest, InsertPosition, MdBindError, MdHandle, MdSpec, Memory, Nid,
    Node, ProcessId, PutRequest, Rejected, UnlinkMode,
};

use super::{ClientOutcome, ClientRpcId, Key, RpcCore, RpcError, buffer_position};

/// A node call held until the end of the fold.
pub(super) enum HeldCall {
    /// Repost a request buffer of `service` on partition `cpt` (its slot is `token`).
    Post { service: SrpcService, cpt: u32, token: u64, spec: MdSpec },
    /// Bind `spec` and start server RPC `id`'s reply or bulk on it (its slot is `token`).
    Start { id: u64, token: u64, spec: MdSpec, remote: Remote, part: ServerPart },
    /// Start client RPC `id`.
    Client { id: u64, start: Box<ClientStart> },
}

impl HeldCall {
    /// The slots of the MDs this call would make.
    pub(super) fn tokens(&self) -> impl Iterator<Item = u64> {
        let tokens = match self {
            Self::Post { token, .. } | Self::Start { token, .. } => [Some(*token), None, None],
            Self::Client { start, .. } => start.tokens(),
        };
        tokens.into_iter().flatten()
    }
}

/// A client RPC's start: post the reply buffer (and the passive bulk) on the RDMA portal, bind
/// the request and PUT it, no ACK. lustre: rpc.c `srpc_send_rpc()` (`SWI_STATE_NEWBORN`),
/// `srpc_prepare_reply()`, `srpc_prepare_bulk()`, `srpc_send_request()`.
pub(super) struct ClientStart {
    pub(super) reply: Passive,
    pub(super) bulk: Option<Passive>,
    pub(super) request: MdSpec,
    pub(super) request_token: u64,
    /// The request's PUT, less its MD.
    pub(super) dest: ProcessId,
    pub(super) service: SrpcService,
    /// The partition its MDs are made on (its server's).
    pub(super) cpt: u32,
}

/// A passive MD a client RPC posts on the RDMA portal for its server.
pub(super) struct Passive {
    pub(super) match_bits: u64,
    pub(super) spec: MdSpec,
    pub(super) token: u64,
}

impl ClientStart {
    /// Its slots: reply, bulk, request.
    fn tokens(&self) -> [Option<u64>; 3] {
        let bulk = self.bulk.as_ref().map(|bulk| bulk.token);
        [Some(self.reply.token), bulk, Some(self.request_token)]
    }

    /// Makes the start within a batch. Any initiator on the buffers: the match bits are
    /// unique, and a multi-rail peer may answer from another NID than the one we addressed
    /// (the kernel filters on the peer here). A step that fails unlinks what the earlier ones
    /// made; their UNLINK events come back with no RPC to report to.
    fn make(self, calls: &mut Calls<'_>, events: &EventQueue) -> Result<ClientMds, StartFailure> {
        let Self { reply, bulk, request, dest, service, cpt, .. } = self;
        // In the match table of the partition the replies arrive on.
        let local = InsertPosition::Local { cpt };
        let reply = calls
            .post_at(SRPC_RDMA_PORTAL, reply.match_bits, local, reply.spec, events)
            .map_err(|_| StartFailure::Reply)?;
        let mut bulk_md = None;
        if let Some(bulk) = bulk {
            match calls.post_at(SRPC_RDMA_PORTAL, bulk.match_bits, local, bulk.spec, events) {
                Ok(md) => bulk_md = Some(md),
                Err(_) => {
                    let _ = calls.md_unlink(reply);
                    return Err(StartFailure::Bulk);
                }
            }
        }
        let request = match calls.md_bind(request, UnlinkMode::Unlink, Some(events)) {
            Ok(md) => md,
            Err(_) => {
                for md in [Some(reply), bulk_md].into_iter().flatten() {
                    let _ = calls.md_unlink(md);
                }
                return Err(StartFailure::Request);
            }
        };
        let put = PutRequest {
            md: request,
            ack: false,
            target: dest,
            portal: service.request_portal(),
            match_bits: u64::from(service.id()),
            remote_offset: 0,
            hdr_data: 0,
            source: None,
        };
        let sent = calls.put(&put).is_ok();
        Ok(ClientMds { reply, bulk: bulk_md, request, sent })
    }
}

/// The MDs a client RPC's start made, and whether its request left.
#[derive(Clone, Copy, Debug)]
pub(super) struct ClientMds {
    reply: MdHandle,
    bulk: Option<MdHandle>,
    request: MdHandle,
    sent: bool,
}

/// Which step of a client RPC's start failed.
#[derive(Clone, Copy, Debug)]
pub(super) enum StartFailure {
    Reply,
    Bulk,
    Request,
}

/// Where a server RPC's active transfer goes: the peer's MD on the RDMA portal.
#[derive(Clone, Copy)]
pub(super) struct Remote {
    pub(super) peer: ProcessId,
    pub(super) match_bits: u64,
    pub(super) self_nid: Nid,
    /// A GET (the bulk of a write), else a PUT (a reply, or the bulk of a read).
    pub(super) get: bool,
}

/// Which MD of a server RPC a [`HeldCall::Start`] makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ServerPart {
    Reply,
    Bulk,
}

/// What a held call was, for settling it once made.
#[derive(Clone, Copy, Debug)]
pub(super) enum HeldKind {
    Post { service: SrpcService, cpt: u32, token: u64 },
    Server { id: u64, token: u64, part: ServerPart },
    Client { id: u64, tokens: [Option<u64>; 3] },
}

impl From<&HeldCall> for HeldKind {
    fn from(call: &HeldCall) -> Self {
        match call {
            HeldCall::Post { service, cpt, token, .. } => {
                Self::Post { service: *service, cpt: *cpt, token: *token }
            }
            HeldCall::Start { id, token, part, .. } => {
                Self::Server { id: *id, token: *token, part: *part }
            }
            HeldCall::Client { id, start } => Self::Client { id: *id, tokens: start.tokens() },
        }
    }
}

/// What a held call made.
#[derive(Debug)]
pub(super) enum Made {
    /// A request buffer posted or a server MD bound, or on failure the memory if it came back.
    Md(Result<MdHandle, Option<Memory>>),
    Client(Result<ClientMds, StartFailure>),
}

/// Held calls taken out of the state ([`RpcCore::take_held`]), made with it released
/// ([`HeldBatch::make`]), then settled ([`RpcCore::settle_held`]).
pub(super) struct HeldBatch {
    calls: Vec<HeldCall>,
    /// What each call was, and (once made) what it became.
    kinds: Vec<HeldKind>,
    made: Vec<Made>,
}

impl HeldBatch {
    /// Makes the calls under one lock of the node: one drain for all of them, and their
    /// messages leave in one write per connection. Needs no endpoint state.
    pub(super) fn make(&mut self, node: &Node, events: &EventQueue) {
        let Self { calls, made, .. } = self;
        let done = node.batch(|batch| {
            made.extend(calls.drain(..).map(|call| {
                match call {
                    HeldCall::Post { service, cpt, spec, .. } => Made::Md(
                        batch
                            .post_at(
                                service.request_portal(),
                                u64::from(service.id()),
                                buffer_position(service, cpt),
                                spec,
                                events,
                            )
                            .map_err(|rejected| Some(rejected.memory)),
                    ),
                    HeldCall::Start { spec, remote, .. } => {
                        Made::Md(bind_and_start(batch, events, spec, remote))
                    }
                    HeldCall::Client { start, .. } => Made::Client(start.make(batch, events)),
                }
            }));
        });
        if done.is_err() {
            // The node shut down and made none of the calls.
            made.clear();
        }
        calls.clear();
    }
}

/// Binds `spec` and starts the transfer to `remote` on it, within a batch. If the transfer
/// cannot start, the MD is unlinked again in the same batch and its UNLINK event reports it,
/// so this still returns the MD; `Err` carries the memory back when the bind failed.
/// lustre: rpc.c `srpc_post_active_rdma()`.
fn bind_and_start(
    calls: &mut Calls<'_>,
    events: &EventQueue,
    spec: MdSpec,
    remote: Remote,
) -> Result<MdHandle, Option<Memory>> {
    let md = calls
        .md_bind(spec, UnlinkMode::Unlink, Some(events))
        .map_err(|rejected: Rejected<MdBindError>| Some(rejected.memory))?;
    let started = if remote.get {
        calls.get(&GetRequest {
            md,
            target: remote.peer,
            portal: SRPC_RDMA_PORTAL,
            match_bits: remote.match_bits,
            remote_offset: 0,
            source: Some(remote.self_nid),
        })
    } else {
        // A server's PUT (bulk or reply) from the NID the request came in on, without ACK.
        calls.put(&PutRequest {
            md,
            ack: false,
            target: remote.peer,
            portal: SRPC_RDMA_PORTAL,
            match_bits: remote.match_bits,
            remote_offset: 0,
            hdr_data: 0,
            source: Some(remote.self_nid),
        })
    };
    if started.is_err() {
        let _ = calls.md_unlink(md);
    }
    Ok(md)
}

impl RpcCore {
    /// Takes the held calls, to be made with the state released ([`HeldBatch::make`]) and
    /// settled with it locked again ([`settle_held`](Self::settle_held)); `None` when nothing
    /// is held.
    pub(super) fn take_held(&mut self) -> Option<HeldBatch> {
        if self.held.is_empty() {
            return None;
        }
        // The lists are kept between batches (taken and put back): this runs for every RPC.
        let calls = std::mem::take(&mut self.held);
        let mut kinds = std::mem::take(&mut self.held_kinds);
        kinds.extend(calls.iter().map(HeldKind::from));
        let made = std::mem::take(&mut self.held_made);
        Some(HeldBatch { calls, kinds, made })
    }

    /// Settles what each call of a batch made with the state released became (see the module
    /// documentation for what may have happened meanwhile). Returns whether something waits
    /// for [`deliver`](Self::deliver).
    pub(super) fn settle_held(&mut self, batch: HeldBatch) -> bool {
        let HeldBatch { mut calls, mut kinds, mut made } = batch;
        let mut results = made.drain(..);
        for kind in kinds.drain(..) {
            // None: the node shut down and made none of the calls.
            let result = results.next();
            match kind {
                HeldKind::Post { service, cpt, token } => match result {
                    Some(Made::Md(Ok(md))) if self.closed => {
                        // Shut down meanwhile, which unlinked only the buffers it knew of.
                        self.slots.discard(Key::from_u64(token));
                        let _ = self.node.md_unlink(md);
                    }
                    Some(Made::Md(Ok(md))) => self.buffer_posted(token, md),
                    _ => {
                        self.slots.discard(Key::from_u64(token));
                        if let Some(shares) = self.shares(service) {
                            shares.post_failed(cpt as usize);
                        }
                        if !self.closed {
                            tracing::warn!(?service, "failed to repost a selftest request buffer");
                        }
                    }
                },
                HeldKind::Server { id, token, part } => match result {
                    Some(Made::Md(Ok(md))) => self.server_md_made(id, part, md),
                    failed => {
                        self.slots.discard(Key::from_u64(token));
                        if let Some(Made::Md(Err(Some(memory)))) = failed {
                            self.recycle(memory);
                        }
                        match part {
                            ServerPart::Reply => self.server_done(id, false),
                            ServerPart::Bulk => {
                                self.bulk_ready.push_back((id, Err(RpcError::NoResources), None));
                            }
                        }
                    }
                },
                HeldKind::Client { id, tokens } => match result {
                    Some(Made::Client(Ok(mds))) => self.client_started(id, mds),
                    Some(Made::Client(Err(failure))) => {
                        self.client_start_failed(id, tokens, Some(failure));
                    }
                    _ => self.client_start_failed(id, tokens, None),
                },
            }
        }
        drop(results);
        calls.clear();
        if self.held.is_empty() {
            self.held = calls;
        }
        self.held_kinds = kinds;
        self.held_made = made;
        !self.bulk_ready.is_empty() || !self.done.is_empty()
    }

    /// Server RPC `id`'s reply or bulk MD was made.
    fn server_md_made(&mut self, id: u64, part: ServerPart, md: MdHandle) {
        let Some(rpc) = self.servers.get_mut(&id) else {
            // The RPC ended meanwhile, which its MD's final event (already in) or a shutdown
            // did; only the shutdown leaves the MD to unlink.
            if self.closed {
                let _ = self.node.md_unlink(md);
            }
            return;
        };
        match part {
            ServerPart::Reply => rpc.reply_md = Some(md),
            ServerPart::Bulk if rpc.bulk_ended => {}
            ServerPart::Bulk => {
                rpc.bulk_md = Some(md);
                if rpc.bulk_error.is_some() {
                    // Its SEND failed before this: no REPLY will come (`server_bulk_event`).
                    let _ = self.node.md_unlink(md);
                }
            }
        }
    }

    /// Client RPC `id`'s start was made: its MDs whose final event is not in yet are its to
    /// wait for, and what it gave up meanwhile is unlinked now.
    fn client_started(&mut self, id: u64, mds: ClientMds) {
        let Some(rpc) = self.clients.get_mut(&id) else {
            // Only a shutdown ends an RPC being started (it counts as live till now).
            for md in [Some(mds.reply), mds.bulk, Some(mds.request)].into_iter().flatten() {
                let _ = self.node.md_unlink(md);
            }
            return;
        };
        rpc.starting = false;
        rpc.request_md = (!rpc.request_ended).then_some(mds.request);
        rpc.reply_md = (!rpc.reply_ended).then_some(mds.reply);
        rpc.bulk_md = mds.bulk.filter(|_| !rpc.bulk_ended);
        let give_up = if rpc.aborted.is_some() {
            vec![rpc.request_md, rpc.reply_md, rpc.bulk_md]
        } else if rpc.bulk_cancelled {
            vec![rpc.bulk_md]
        } else {
            Vec::new()
        };
        for md in give_up.into_iter().flatten() {
            // Already gone is fine: its final event is on its way.
            let _ = self.node.md_unlink(md);
        }
        if !mds.sent {
            // The request MD is still idle: unlinking it reports through its UNLINK event.
            self.abort(ClientRpcId(id), RpcError::NoResources);
        }
        self.check_client(id);
    }

    /// Client RPC `id`'s start failed (`None`: the node shut down before making it): it
    /// completes with `NoResources`. The slots of the MDs never made go; those made were
    /// unlinked again, and their UNLINK events find no RPC.
    fn client_start_failed(
        &mut self,
        id: u64,
        tokens: [Option<u64>; 3],
        failure: Option<StartFailure>,
    ) {
        let [reply, bulk, request] = tokens;
        let never_made = match failure {
            None | Some(StartFailure::Reply) => [reply, bulk, request],
            Some(StartFailure::Bulk) => [None, bulk, request],
            Some(StartFailure::Request) => [None, None, request],
        };
        for token in never_made.into_iter().flatten() {
            self.slots.discard(Key::from_u64(token));
        }
        let Some(rpc) = self.clients.remove(&id) else { return };
        self.pool.release(rpc.charged);
        self.done.push_back(ClientOutcome {
            tag: rpc.tag,
            status: Err(rpc.aborted.unwrap_or(RpcError::NoResources)),
            reply: None,
            raw_reply: None,
            bulk: rpc.bulk_memory,
            latency: rpc.started.elapsed(),
        });
        self.wake = true;
    }
}

#[cfg(test)]
mod tests {
    use ulnet::Nid;
    use ulnet::proto::wire::selftest::{
        ByteOrder, SRPC_MSG_LEN, SrpcMsg, SrpcMsgType, SrpcService,
    };

    use super::super::{ClientRpc, Incoming, ServerRpc, Slot, error_body};
    use super::*;

    /// An endpoint's RPC machinery on a loopback node.
    fn rpc_core() -> RpcCore {
        let node = Node::loopback().unwrap();
        let events = node.event_queue(64);
        RpcCore::new(node, events)
    }

    /// ... with server RPC `id` in progress.
    fn core_serving(id: u64) -> RpcCore {
        let mut core = rpc_core();
        let incoming = Incoming {
            service: SrpcService::Brw,
            peer: ProcessId::new(Nid::LO_0, 12345),
            self_nid: Nid::LO_0,
            msg: SrpcMsg::new(0, error_body(SrpcService::Brw, 0)),
            order: ByteOrder::LittleEndian,
            raw: [0; SRPC_MSG_LEN],
        };
        core.servers.insert(id, ServerRpc::new(incoming));
        core
    }

    /// ... with client RPC `id` being started.
    fn core_starting(id: u64) -> RpcCore {
        let mut core = rpc_core();
        let dest = ProcessId::new(Nid::LO_0, 12345);
        let rpc = ClientRpc::starting(1, dest, None, true, SrpcMsgType::BrwReply, 0);
        core.clients.insert(id, rpc);
        core
    }

    /// A live MD of the node's (as a batch makes them).
    fn live_md(core: &RpcCore) -> MdHandle {
        let spec = MdSpec::new(Memory::new(vec![0; 8]));
        core.node.md_bind(spec, UnlinkMode::Retain, Some(&core.events)).unwrap()
    }

    /// A batch that made one MD for server RPC `id`'s `part`, and that MD.
    fn made(core: &RpcCore, id: u64, part: ServerPart) -> (HeldBatch, MdHandle) {
        let md = live_md(core);
        let kinds = vec![HeldKind::Server { id, token: 0, part }];
        (HeldBatch { calls: Vec::new(), kinds, made: vec![Made::Md(Ok(md))] }, md)
    }

    /// A batch that started client RPC `id`, and the MDs it made (request, reply, bulk).
    fn started(core: &RpcCore, id: u64, sent: bool) -> (HeldBatch, [MdHandle; 3]) {
        let [request, reply, bulk] = [live_md(core), live_md(core), live_md(core)];
        let mds = ClientMds { reply, bulk: Some(bulk), request, sent };
        let kinds = vec![HeldKind::Client { id, tokens: [None; 3] }];
        (
            HeldBatch { calls: Vec::new(), kinds, made: vec![Made::Client(Ok(mds))] },
            [request, reply, bulk],
        )
    }

    fn is_live(core: &RpcCore, md: MdHandle) -> bool {
        // Unlinking a live MD succeeds (and ends it); a gone one is an error.
        core.node.md_unlink(md).is_ok()
    }

    #[test]
    fn a_settled_bulk_md_is_kept_for_its_rpc() {
        let mut core = core_serving(7);
        let (batch, md) = made(&core, 7, ServerPart::Bulk);
        assert!(!core.settle_held(batch));
        assert_eq!(core.servers[&7].bulk_md, Some(md));
        assert!(is_live(&core, md), "the RPC unlinks it when it ends");
    }

    #[test]
    fn a_bulk_that_failed_before_its_batch_was_settled_is_unlinked_then() {
        // Its SEND failed while the batch was being made: the event could not unlink an MD
        // the RPC did not know yet, and no REPLY will come to end it.
        let mut core = core_serving(7);
        core.servers.get_mut(&7).unwrap().bulk_error = Some(RpcError::Interrupted);
        let (batch, md) = made(&core, 7, ServerPart::Bulk);
        core.settle_held(batch);
        assert!(!is_live(&core, md), "the MD was left posted");
    }

    #[test]
    fn a_bulk_already_ended_is_not_taken_back() {
        let mut core = core_serving(7);
        core.servers.get_mut(&7).unwrap().bulk_ended = true;
        let (batch, _) = made(&core, 7, ServerPart::Bulk);
        core.settle_held(batch);
        assert_eq!(core.servers[&7].bulk_md, None);
    }

    #[test]
    fn what_a_batch_made_after_a_shutdown_is_unlinked() {
        let mut core = core_serving(7);
        let (reply, reply_md) = made(&core, 7, ServerPart::Reply);
        // A request buffer reposted by the same batch.
        let token = core.token(Slot::RequestBuffer(SrpcService::Ping, 0, None));
        let buffer_md = live_md(&core);
        core.shutdown();
        let mut kinds = reply.kinds;
        kinds.push(HeldKind::Post { service: SrpcService::Ping, cpt: 0, token });
        let made = vec![Made::Md(Ok(reply_md)), Made::Md(Ok(buffer_md))];
        core.settle_held(HeldBatch { calls: Vec::new(), kinds, made });
        assert!(!is_live(&core, reply_md), "the reply MD was left posted");
        assert!(!is_live(&core, buffer_md), "the request buffer was left posted");
    }

    #[test]
    fn a_client_rpc_waits_for_the_mds_its_start_made() {
        let mut core = core_starting(3);
        // Live while being started, though it knows no MD yet.
        core.check_client(3);
        assert!(core.clients.contains_key(&3));
        let (batch, [request, reply, bulk]) = started(&core, 3, true);
        core.settle_held(batch);
        let rpc = &core.clients[&3];
        assert!(!rpc.starting);
        assert_eq!(
            (rpc.request_md, rpc.reply_md, rpc.bulk_md),
            (Some(request), Some(reply), Some(bulk))
        );
        assert!(core.done.is_empty());
    }

    #[test]
    fn a_client_rpc_whose_events_came_first_completes_at_its_settling() {
        // Every MD's final event was folded in while the batch was being made.
        let mut core = core_starting(3);
        let rpc = core.clients.get_mut(&3).unwrap();
        (rpc.request_ended, rpc.reply_ended, rpc.bulk_ended) = (true, true, true);
        rpc.request_status = Some(Ok(()));
        rpc.bulk_status = Some(Ok(()));
        rpc.reply = Some(Err(RpcError::BadReply));
        let (batch, mds) = started(&core, 3, true);
        assert!(core.settle_held(batch), "its outcome waits for delivery");
        assert!(!core.clients.contains_key(&3));
        assert_eq!(core.done.len(), 1);
        for md in mds {
            // Ours to clean up in this test: the events that ended them were made up.
            assert!(is_live(&core, md));
        }
    }

    #[test]
    fn a_client_rpc_aborted_while_starting_gives_up_its_mds_at_settling() {
        let mut core = core_starting(3);
        core.abort(ClientRpcId(3), RpcError::TimedOut);
        let (batch, mds) = started(&core, 3, true);
        core.settle_held(batch);
        for md in mds {
            assert!(!is_live(&core, md), "an MD of an aborted RPC was left posted");
        }
        // It completes once their UNLINK events are in.
        assert!(core.clients[&3].live());
    }

    #[test]
    fn a_client_start_that_failed_completes_the_rpc_with_no_resources() {
        let mut core = core_starting(3);
        let kinds = vec![HeldKind::Client { id: 3, tokens: [None; 3] }];
        let made = vec![Made::Client(Err(StartFailure::Request))];
        assert!(core.settle_held(HeldBatch { calls: Vec::new(), kinds, made }));
        assert!(!core.clients.contains_key(&3));
        let outcome = core.done.pop_front().unwrap();
        assert_eq!(outcome.status, Err(RpcError::NoResources));
    }
}
