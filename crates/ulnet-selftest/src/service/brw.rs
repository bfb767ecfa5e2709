//! The BRW (bulk read/write) test: client and server. lustre: lnet/selftest/brw_test.c.

use ulnet::Memory;
use ulnet::proto::wire::selftest::{
    BRW_MAGIC, BRW_POISON, BrwCheck, BrwDirection, BrwReply, BrwRequest, LST_FEAT_BULK_LEN,
    LST_FEATS_MASK, SrpcBody, SrpcMsg, TestParams, brw_check, brw_fill, brw_magic, errno,
};

use super::framework::{PAGE_SIZE, RpcResult, UnitCtx};
use super::limits::MAX_BULK_LEN;
use crate::srpc::{ClientBulk, ClientOutcome, Incoming, RpcCore, RpcError, ServerBulk, Verdict};

/// A BRW test's parameters, whichever wire form they came in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Params {
    direction: u32,
    check: u32,
    length: usize,
    /// The client's bulk offset within its first page.
    offset: usize,
}

fn params(params: &TestParams) -> Option<Params> {
    match *params {
        // lustre: brw_test.c `brw_client_init()`: v0 carries pages, v1 bytes and an offset.
        TestParams::BrwV0 { opcode, page_count, flags } => Some(Params {
            direction: opcode,
            check: flags,
            length: (page_count as usize).saturating_mul(PAGE_SIZE),
            offset: 0,
        }),
        TestParams::BrwV1 { opcode, flags, length, offset } => Some(Params {
            direction: u32::from(opcode),
            check: u32::from(flags),
            length: length as usize,
            offset: offset as usize % PAGE_SIZE,
        }),
        _ => None,
    }
}

/// `brw_client_init()`: the test's parameters must make sense before it is added.
pub(super) fn client_init(test: &TestParams, _features: u32) -> Result<(), u32> {
    let Some(p) = params(test) else { return Err(errno::EINVAL) };
    if p.offset % 8 != 0
        || p.length > MAX_BULK_LEN
        || BrwDirection::from_u32(p.direction).is_none()
        || BrwCheck::from_u32(p.check).is_none()
    {
        return Err(errno::EINVAL);
    }
    Ok(())
}

/// `brw_client_prep_rpc()`: the request and the bulk for the unit's next RPC.
pub(super) fn client_prepare(
    core: &mut RpcCore,
    ctx: &mut UnitCtx<'_>,
) -> Option<(SrpcMsg, Option<ClientBulk>)> {
    let p = params(ctx.params)?;
    let direction = BrwDirection::from_u32(p.direction)?;
    let check = BrwCheck::from_u32(p.check)?;
    let bulk = match direction {
        BrwDirection::Write => {
            // Every unit of the test sends the same pattern: they share one source.
            let key = (p.length, p.offset, p.check, BRW_MAGIC);
            let source = core.shared_source(key, |buffer| {
                brw_fill(buffer, p.offset, PAGE_SIZE, check, BRW_MAGIC).is_ok()
            })?;
            ClientBulk::Source { memory: Memory::shared(source) }
        }
        BrwDirection::Read => {
            // The sink comes from the budgeted pool (it went back there after the last RPC):
            // no room, no RPC, and the unit ends as the kernel's does when it cannot allocate
            // one (lustre: framework.c `sfw_run_test()`); counted as an error here.
            if !core.bulk_room(p.length) {
                tracing::debug!(dest = %ctx.unit.dest, "selftest bulk budget spent: unit ends");
                ctx.count_error();
                return None;
            }
            let mut buffer = core.buffer(p.length);
            brw_fill(&mut buffer, p.offset, PAGE_SIZE, check, BRW_POISON).ok()?;
            ClientBulk::Sink { memory: Memory::new(buffer), discard: check == BrwCheck::Discard }
        }
    };
    let request = SrpcMsg::new(
        ctx.features,
        SrpcBody::BrwRequest(BrwRequest {
            reply_match_bits: 0,
            bulk_match_bits: 0,
            direction: p.direction,
            length: u32::try_from(p.length).unwrap_or(u32::MAX),
            check_mode: p.check,
        }),
    );
    Some((request, Some(bulk)))
}

/// `brw_client_done_rpc()`: count the RPC's errors and check READ data.
pub(super) fn client_done(
    core: &mut RpcCore,
    ctx: &mut UnitCtx<'_>,
    _sent: Option<SrpcMsg>,
    outcome: ClientOutcome,
) -> RpcResult {
    let ClientOutcome { status, reply, bulk, latency, .. } = outcome;
    // A shared source goes back to its sharers, not to the unit.
    let buffer =
        bulk.filter(|memory| !memory.is_shared()).and_then(|memory| memory.into_segments().next());
    let p = params(ctx.params);
    let result = match (status, reply) {
        (Err(error), _) => {
            tracing::debug!(%error, dest = %ctx.unit.dest, "BRW RPC failed");
            if !ctx.stopping {
                ctx.count_error();
            }
            RpcResult::Failed
        }
        (Ok(()), Some((SrpcMsg { body: SrpcBody::BrwReply(reply), .. }, order))) => {
            if reply.status != 0 {
                tracing::debug!(status = reply.status, dest = %ctx.unit.dest, "BRW RPC refused");
                ctx.count_error();
                RpcResult::Failed
            } else if let (Some(p), Some(data)) = (p, buffer.as_deref()) {
                let check = BrwCheck::from_u32(p.check);
                let verify = p.direction == BrwDirection::Read as u32
                    && matches!(check, Some(BrwCheck::Simple | BrwCheck::Full));
                let corrupt = verify
                    && check.is_some_and(|check| {
                        brw_check(data, p.offset, PAGE_SIZE, check, brw_magic(order)).is_err()
                    });
                if corrupt {
                    tracing::warn!(dest = %ctx.unit.dest, "BRW READ data is corrupted");
                    ctx.count_error();
                    RpcResult::Failed
                } else {
                    RpcResult::Ok(latency)
                }
            } else {
                RpcResult::Ok(latency)
            }
        }
        (Ok(()), _) => {
            ctx.count_error();
            RpcResult::Failed
        }
    };
    // Back to the pool, where its bytes count against the budget (and go when idle).
    if let Some(buffer) = buffer {
        core.recycle(Memory::new(buffer));
    }
    result
}

/// `brw_server_handle()`: check the request and start the bulk.
pub(super) fn server_handle(core: &mut RpcCore, incoming: &Incoming) -> Verdict {
    let SrpcBody::BrwRequest(request) = &incoming.msg.body else { return Verdict::Drop };
    let reply = |status: u32, features: u32| {
        let mut msg = SrpcMsg::new(features, SrpcBody::BrwReply(BrwReply { status }));
        msg.ses_feats = features;
        Verdict::Reply(msg)
    };
    let (Some(direction), Some(check)) =
        (BrwDirection::from_u32(request.direction), BrwCheck::from_u32(request.check_mode))
    else {
        return reply(errno::EINVAL, 0);
    };
    let features = incoming.msg.ses_feats;
    if features & !LST_FEATS_MASK != 0 {
        return reply(errno::EPROTO, LST_FEATS_MASK);
    }
    let length = request.length as usize;
    if features & LST_FEAT_BULK_LEN == 0 && length % PAGE_SIZE != 0 {
        return reply(errno::EINVAL, 0);
    }
    if length == 0 || length > MAX_BULK_LEN {
        return reply(errno::EINVAL, features);
    }
    match direction {
        BrwDirection::Write => Verdict::Bulk(ServerBulk::Get { length }),
        BrwDirection::Read => {
            // The server's bulk starts at offset 0 of its pages; every read of this length and
            // check sends the same pattern, so they share one source.
            let key = (length, 0, request.check_mode, BRW_MAGIC);
            let fill = |buffer: &mut [u8]| brw_fill(buffer, 0, PAGE_SIZE, check, BRW_MAGIC).is_ok();
            match core.shared_source(key, fill) {
                Some(source) => Verdict::Bulk(ServerBulk::Put { memory: Memory::shared(source) }),
                None => reply(errno::EINVAL, features),
            }
        }
    }
}

/// `brw_bulk_ready()`: check WRITE data, then reply.
pub(super) fn server_bulk_ready(
    core: &mut RpcCore,
    incoming: &Incoming,
    status: Result<(), RpcError>,
    memory: Option<Memory>,
) -> Verdict {
    let SrpcBody::BrwRequest(request) = &incoming.msg.body else { return Verdict::Drop };
    if let Err(error) = status {
        // lustre: the RPC is dropped without a reply.
        tracing::debug!(%error, peer = %incoming.peer, "BRW bulk failed");
        if let Some(memory) = memory {
            core.recycle(memory);
        }
        return Verdict::Drop;
    }
    let mut reply_status = 0;
    if request.direction == BrwDirection::Write as u32 {
        if let (Some(check), Some(memory)) = (BrwCheck::from_u32(request.check_mode), &memory) {
            let data = memory.segments().first().map(Vec::as_slice).unwrap_or_default();
            if brw_check(data, 0, PAGE_SIZE, check, brw_magic(incoming.order)).is_err() {
                tracing::warn!(peer = %incoming.peer, "BRW WRITE data is corrupted");
                reply_status = errno::EBADMSG;
            }
        }
    }
    if let Some(memory) = memory {
        core.recycle(memory);
    }
    let features = incoming.msg.ses_feats;
    let mut msg = SrpcMsg::new(features, SrpcBody::BrwReply(BrwReply { status: reply_status }));
    msg.ses_feats = features;
    Verdict::Reply(msg)
}
