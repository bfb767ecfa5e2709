//! The PING test: client and server. lustre: lnet/selftest/ping_test.c.

use std::time::{SystemTime, UNIX_EPOCH};

use ulnet::proto::wire::selftest::{
    LST_FEATS_MASK, LST_PING_TEST_MAGIC, PingReply, PingRequest, SrpcBody, SrpcMsg, errno,
};

use super::framework::{RpcResult, UnitCtx};
use crate::srpc::{ClientBulk, ClientOutcome, Incoming, Verdict};

/// `ping_client_prep_rpc()`.
pub(super) fn client_prepare(ctx: &mut UnitCtx<'_>) -> Option<(SrpcMsg, Option<ClientBulk>)> {
    let sequence = *ctx.ping_sequence;
    *ctx.ping_sequence = sequence.wrapping_add(1);
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let request = SrpcMsg::new(
        ctx.features,
        SrpcBody::PingRequest(PingRequest {
            reply_match_bits: 0,
            magic: LST_PING_TEST_MAGIC,
            sequence,
            time_seconds: now.as_secs(),
            time_nanoseconds: u64::from(now.subsec_nanos()),
        }),
    );
    Some((request, None))
}

/// `ping_client_done_rpc()`: a failed RPC, a wrong magic or a wrong sequence is an error
/// (the reply's status is not looked at, as in the kernel).
pub(super) fn client_done(
    ctx: &mut UnitCtx<'_>,
    sent: Option<SrpcMsg>,
    outcome: &ClientOutcome,
) -> RpcResult {
    if let Err(error) = outcome.status {
        tracing::debug!(%error, dest = %ctx.unit.dest, "PING RPC failed");
        if !ctx.stopping {
            ctx.count_error();
        }
        return RpcResult::Failed;
    }
    let sent_sequence = match sent.map(|msg| msg.body) {
        Some(SrpcBody::PingRequest(request)) => Some(request.sequence),
        _ => None,
    };
    match &outcome.reply {
        Some((SrpcMsg { body: SrpcBody::PingReply(reply), .. }, _))
            if reply.magic == LST_PING_TEST_MAGIC && Some(reply.sequence) == sent_sequence =>
        {
            RpcResult::Ok(outcome.latency)
        }
        _ => {
            ctx.count_error();
            RpcResult::Failed
        }
    }
}

/// `ping_server_handle()`: echo the sequence; a wrong magic is dropped (the handler fails).
pub(super) fn server_handle(incoming: &Incoming) -> Verdict {
    let SrpcBody::PingRequest(request) = &incoming.msg.body else { return Verdict::Drop };
    if request.magic != LST_PING_TEST_MAGIC {
        tracing::warn!(magic = request.magic, peer = %incoming.peer, "unexpected PING magic");
        return Verdict::Drop;
    }
    let features = incoming.msg.ses_feats;
    let (status, features) = if features & !LST_FEATS_MASK != 0 {
        (errno::EPROTO, LST_FEATS_MASK)
    } else {
        (0, features)
    };
    let mut reply = SrpcMsg::new(
        features,
        SrpcBody::PingReply(PingReply {
            status,
            magic: LST_PING_TEST_MAGIC,
            sequence: request.sequence,
        }),
    );
    reply.ses_feats = features;
    Verdict::Reply(reply)
}
