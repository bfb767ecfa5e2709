//! Node calls held until the end of a fold: every reply, bulk transfer and request buffer
//! repost a server makes, and every client RPC started, while the endpoint folds a burst of
//! events in. [`RpcCore::flush_held`] makes them all in one `Node::batch`: one lock of the
//! node, one drain, and their messages leave together, in one write per connection. Made one
//! by one, each call paid its own drain and, often, its own `sendmsg`.
//!
//! A held call's slot (its MD's token) exists from the moment it is held; a client RPC is in
//! the client table, marked pending, so it can be aborted before its MDs exist.

use ulnet::proto::engine::slab::Key;
use ulnet::proto::wire::selftest::{SRPC_RDMA_PORTAL, SrpcService};
use ulnet::{
    Calls, EventQueue, GetRequest, MdBindError, MdHandle, MdSpec, Memory, Nid, ProcessId,
    PutRequest, Rejected, ShutDown, UnlinkMode,
};

use super::{ClientRpcId, RpcCore, RpcError, rdma_put};

/// See the module documentation.
pub(super) enum HeldCall {
    /// Repost a request buffer of `service` (its slot is `token`).
    Post { service: SrpcService, token: u64, spec: MdSpec },
    /// Bind `spec` and start server RPC `id`'s reply or bulk on it (its slot is `token`).
    Start { id: u64, token: u64, spec: MdSpec, remote: Remote, part: ServerPart },
    /// Client RPC `id`: post its reply (and bulk) buffers, bind its request and send it.
    Client(Box<ClientStart>),
}

/// What starting a client RPC makes (lustre: rpc.c `srpc_send_rpc()`, `SWI_STATE_NEWBORN`).
pub(super) struct ClientStart {
    pub(super) id: u64,
    /// The reply buffer: its token, match bits and MD.
    pub(super) reply: (u64, u64, MdSpec),
    pub(super) bulk: Option<(u64, u64, MdSpec)>,
    pub(super) request: (u64, MdSpec),
    pub(super) dest: ProcessId,
    pub(super) service: SrpcService,
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

/// Which step of a client start failed.
#[derive(Clone, Copy, Debug)]
enum StartFailure {
    Reply,
    Bulk,
    Request,
}

/// The MDs a client start made, and whether its request went out.
type ClientMds = (MdHandle, Option<MdHandle>, MdHandle, bool);

/// What became of a held call.
enum Made {
    /// The buffer's MD, or nothing (the memory is dropped).
    Posted {
        service: SrpcService,
        token: u64,
        md: Option<MdHandle>,
    },
    /// The MD, or on failure the memory if it came back.
    Started {
        id: u64,
        token: u64,
        part: ServerPart,
        md: Result<MdHandle, Option<Memory>>,
    },
    Client {
        id: u64,
        tokens: (u64, Option<u64>, u64),
        mds: Result<ClientMds, StartFailure>,
    },
}

impl HeldCall {
    /// Makes the call inside a batch.
    fn make(self, calls: &mut Calls<'_>, events: &EventQueue) -> Made {
        match self {
            HeldCall::Post { service, token, spec } => {
                let posted =
                    calls.post(service.request_portal(), u64::from(service.id()), spec, events);
                Made::Posted { service, token, md: posted.ok() }
            }
            HeldCall::Start { id, token, spec, remote, part } => {
                Made::Started { id, token, part, md: bind_and_start(calls, events, spec, remote) }
            }
            HeldCall::Client(start) => {
                let tokens = start.tokens();
                Made::Client { id: start.id, tokens, mds: start.make(calls, events) }
            }
        }
    }

    /// The node shut down before the batch: nothing was made.
    fn refused(self) -> Made {
        match self {
            HeldCall::Post { service, token, .. } => Made::Posted { service, token, md: None },
            HeldCall::Start { id, token, part, spec, .. } => {
                Made::Started { id, token, part, md: Err(Some(spec.memory)) }
            }
            HeldCall::Client(start) => {
                Made::Client { id: start.id, tokens: start.tokens(), mds: Err(StartFailure::Reply) }
            }
        }
    }

    /// The token of every MD the call would make.
    pub(super) fn tokens(&self) -> Vec<u64> {
        match self {
            HeldCall::Post { token, .. } | HeldCall::Start { token, .. } => vec![*token],
            HeldCall::Client(start) => {
                let (reply, bulk, request) = start.tokens();
                [Some(reply), bulk, Some(request)].into_iter().flatten().collect()
            }
        }
    }
}

impl ClientStart {
    fn tokens(&self) -> (u64, Option<u64>, u64) {
        (self.reply.0, self.bulk.as_ref().map(|bulk| bulk.0), self.request.0)
    }

    /// Posts the reply (and bulk) buffers, binds the request and sends it. Any initiator on the
    /// buffers: the match bits are unique, and a multi-rail peer may answer from another NID
    /// than the one we addressed (the kernel filters on the peer here). A step that fails
    /// unlinks what the earlier ones made; their UNLINK events come back with no RPC to report
    /// to.
    fn make(self, calls: &mut Calls<'_>, events: &EventQueue) -> Result<ClientMds, StartFailure> {
        let ClientStart { reply, bulk, request, dest, service, .. } = self;
        let reply_md = calls
            .post(SRPC_RDMA_PORTAL, reply.1, reply.2, events)
            .map_err(|_| StartFailure::Reply)?;
        let mut bulk_md = None;
        if let Some((_, bits, spec)) = bulk {
            match calls.post(SRPC_RDMA_PORTAL, bits, spec, events) {
                Ok(md) => bulk_md = Some(md),
                Err(_) => {
                    let _ = calls.md_unlink(reply_md);
                    return Err(StartFailure::Bulk);
                }
            }
        }
        let request_md = match calls.md_bind(request.1, UnlinkMode::Unlink, Some(events)) {
            Ok(md) => md,
            Err(_) => {
                for md in [Some(reply_md), bulk_md].into_iter().flatten() {
                    let _ = calls.md_unlink(md);
                }
                return Err(StartFailure::Request);
            }
        };
        let put = PutRequest {
            md: request_md,
            ack: false,
            target: dest,
            portal: service.request_portal(),
            match_bits: u64::from(service.id()),
            remote_offset: 0,
            hdr_data: 0,
            source: None,
        };
        let sent = calls.put(&put).is_ok();
        Ok((reply_md, bulk_md, request_md, sent))
    }
}

/// Binds `spec` and starts the transfer to `remote` on it, within a batch. If the transfer
/// cannot start, the MD is unlinked again in the same batch and its UNLINK event reports it,
/// so this still returns the MD; `Err` carries the memory back when the bind failed.
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
        calls.put(&rdma_put(md, remote.peer, remote.match_bits, remote.self_nid))
    };
    if started.is_err() {
        let _ = calls.md_unlink(md);
    }
    Ok(md)
}

impl RpcCore {
    /// Makes the held calls under one lock of the node, then settles what each became.
    /// Returns whether a failure left something for `deliver` (a bulk, a client RPC).
    pub(super) fn flush_held(&mut self) -> bool {
        if self.held.is_empty() {
            return false;
        }
        let mut held = std::mem::take(&mut self.held);
        let events = &self.events;
        let made = self
            .node
            .batch(|calls| held.drain(..).map(|call| call.make(calls, events)).collect::<Vec<_>>());
        let made = match made {
            Ok(made) => made,
            Err(ShutDown) => held.drain(..).map(HeldCall::refused).collect(),
        };
        self.held = held;
        for made in made {
            self.settle(made);
        }
        !self.bulk_ready.is_empty() || !self.done.is_empty()
    }

    fn settle(&mut self, made: Made) {
        match made {
            Made::Posted { token, md: Some(md), .. } => self.buffer_posted(token, md),
            Made::Posted { service, token, md: None } => {
                self.slots.discard(Key::from_u64(token));
                if let Some(buffers) = self.services.get_mut(&service.id()) {
                    buffers.posted = buffers.posted.saturating_sub(1);
                    buffers.total = buffers.total.saturating_sub(1);
                }
                if !self.closed {
                    tracing::warn!(?service, "failed to repost a selftest request buffer");
                }
            }
            Made::Started { id, part, md: Ok(md), .. } => {
                if let Some(rpc) = self.servers.get_mut(&id) {
                    match part {
                        ServerPart::Reply => rpc.reply_md = Some(md),
                        ServerPart::Bulk => rpc.bulk_md = Some(md),
                    }
                }
            }
            Made::Started { id, token, part, md: Err(memory) } => {
                self.slots.discard(Key::from_u64(token));
                if let Some(memory) = memory {
                    self.recycle(memory);
                }
                match part {
                    ServerPart::Reply => self.server_done(id, false),
                    ServerPart::Bulk => {
                        self.bulk_ready.push_back((id, Err(RpcError::NoResources), None));
                    }
                }
            }
            Made::Client { id, mds: Ok((reply_md, bulk_md, request_md, sent)), .. } => {
                let Some(rpc) = self.clients.get_mut(&id) else {
                    // Failed meanwhile (the node shut down): its MDs go, unreported.
                    for md in [Some(reply_md), bulk_md, Some(request_md)].into_iter().flatten() {
                        let _ = self.node.md_unlink(md);
                    }
                    return;
                };
                rpc.pending = false;
                rpc.request_md = Some(request_md);
                rpc.reply_md = Some(reply_md);
                rpc.bulk_md = bulk_md;
                rpc.has_bulk = bulk_md.is_some();
                if let Some(why) = rpc.aborted {
                    // Aborted while held: its MDs go now, and their events end it.
                    self.abort(ClientRpcId(id), why);
                } else if !sent {
                    // The request MD is still idle: unlinking it reports through its UNLINK
                    // event.
                    self.abort(ClientRpcId(id), RpcError::NoResources);
                }
            }
            Made::Client { id, tokens: (reply, bulk, request), mds: Err(failure) } => {
                // The slots of the MDs never made go; the others meet their UNLINK events.
                let never_made = match failure {
                    StartFailure::Reply => vec![Some(reply), bulk, Some(request)],
                    StartFailure::Bulk => vec![bulk, Some(request)],
                    StartFailure::Request => vec![Some(request)],
                };
                for token in never_made.into_iter().flatten() {
                    self.slots.discard(Key::from_u64(token));
                }
                if let Some(rpc) = self.clients.get_mut(&id) {
                    rpc.pending = false;
                    rpc.aborted.get_or_insert(RpcError::NoResources);
                }
                // No MD of it is left: it completes now.
                self.check_client(id);
            }
        }
    }
}
