//! Console RPC transactions: one RPC per node, posted together, waited for with a timeout,
//! then interpreted (node states, per-operation statistics). lustre:
//! lnet/selftest/conrpc.c (`lstcon_rpc_trans_*()`, `lstcon_rpc_get_reply()`,
//! `lstcon_rpc_stat_reply()`, `lstcon_sesnew_stat_reply()`).

use std::collections::HashMap;
use std::time::Instant;

use ulnet::ProcessId;
use ulnet::proto::wire::selftest::{
    LST_FEATS_MASK, SRPC_MSG_LEN, SessionId, SrpcBody, SrpcMsg, SrpcService, errno,
};

use super::model::{NodeState, Session};
use crate::ext::{LatencySummary, ULNET_DEBUG_PROBE};
use crate::srpc::{ClientBulk, ClientCall, ClientOutcome, ClientRpcId, RpcCore, RpcError};

/// `LST_TRANS_TIMEOUT`: the longest a transaction waits, and the default.
pub const TRANS_TIMEOUT_SECONDS: u32 = 30;
/// `LST_TRANS_MIN_TIMEOUT`.
pub const TRANS_MIN_TIMEOUT_SECONDS: u32 = 3;

/// `EPERM`, which a STOP may answer without it being a failure.
const EPERM: u32 = 1;

/// What a transaction does (`LST_TRANS_*`); decides how replies are counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransOp {
    SessionNew,
    SessionEnd,
    SessionQuery,
    TestClientAdd,
    TestServerAdd,
    BatchRun,
    BatchStop,
    BatchClientQuery,
    BatchServerQuery,
    StatQuery,
}

/// `struct lstcon_trans_stat`: what happened to a transaction's RPCs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct TransStat {
    pub rpc_total: u32,
    pub rpc_success: u32,
    pub rpc_failure: u32,
    /// errno of the first RPC that failed.
    pub rpc_errno: u32,
    /// Per-operation counters (`trs_fwk_stat`); see the accessors.
    pub framework: [u32; 8],
    /// errno of the first remote (framework) error.
    pub framework_errno: u32,
}

impl TransStat {
    /// `lstcon_sesop_stat_success/failure`, `lstcon_tsbop_stat_success/failure`,
    /// `lstcon_statqry_stat_success/failure`.
    pub fn op_success(&self) -> u32 {
        self.framework[0]
    }
    pub fn op_failure(&self) -> u32 {
        self.framework[1]
    }
    /// `lstcon_sesqry_stat_active/busy/unknown`.
    pub fn query_active(&self) -> u32 {
        self.framework[0]
    }
    pub fn query_busy(&self) -> u32 {
        self.framework[1]
    }
    pub fn query_unknown(&self) -> u32 {
        self.framework[2]
    }
    /// `lstcon_tsbqry_stat_idle/run/failure`.
    pub fn batch_idle(&self) -> u32 {
        self.framework[0]
    }
    pub fn batch_running(&self) -> u32 {
        self.framework[1]
    }
    pub fn batch_failure(&self) -> u32 {
        self.framework[2]
    }
}

/// One node's result in a transaction (`struct lstcon_rpc_ent`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RpcEntry {
    pub peer: ProcessId,
    /// The node's state after this reply.
    pub state: NodeState,
    /// Local failure of the RPC (positive errno), 0 if a reply came.
    pub rpc_errno: u32,
    /// The reply's `status` (positive errno).
    pub framework_errno: u32,
    /// The session id the node reported.
    pub session: SessionId,
    /// The reply body, when one came.
    pub reply: Option<SrpcBody>,
    /// The node's reply marked it as a ulnet node (`dbg_nbatch` probe).
    pub ulnet: bool,
    /// A ulnet node's latency percentiles (DEBUG replies only).
    pub latency: Option<LatencySummary>,
}

/// A finished transaction.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TransResult {
    pub entries: Vec<RpcEntry>,
    pub stat: TransStat,
    /// The features the replies agreed on (SESNEW).
    pub features: u32,
}

impl TransResult {
    /// lst's `lst_ioctl()` verdict: -2 when an RPC failed, -3 when a node reported an error.
    pub fn lst_rc(&self) -> i32 {
        if self.stat.rpc_errno != 0 {
            -2
        } else if self.stat.framework_errno != 0 {
            -3
        } else {
            0
        }
    }
}

/// One RPC of a transaction.
#[derive(Debug)]
pub(super) struct TransRpc {
    pub node: ProcessId,
    pub rpc: Option<ClientRpcId>,
    pub finished: bool,
    /// When the RPC finished or was given up (`crp_stamp_ns`).
    pub stamp: Option<Instant>,
    pub status: Result<(), RpcError>,
    pub reply: Option<SrpcMsg>,
    pub raw_reply: Option<[u8; SRPC_MSG_LEN]>,
}

/// `struct lstcon_rpc_trans`.
#[derive(Debug)]
pub(super) struct Transaction {
    pub op: TransOp,
    pub rpcs: Vec<TransRpc>,
    pub remaining: usize,
    pub features: u32,
    pub features_updated: bool,
}

/// Transactions in progress, and the tags of their RPCs.
#[derive(Debug, Default)]
pub(super) struct Transactions {
    pub live: HashMap<u64, Transaction>,
    next_id: u64,
}

/// A tag is the transaction id in the high bits and the RPC's index in the low 24.
const INDEX_BITS: u32 = 24;
/// The pinger's RPCs: transaction id 0.
pub(super) const PINGER: u64 = 0;

pub(super) fn tag(transaction: u64, index: usize) -> u64 {
    (transaction << INDEX_BITS) | (index as u64 & ((1 << INDEX_BITS) - 1))
}

pub(super) fn untag(tag: u64) -> (u64, usize) {
    (tag >> INDEX_BITS, (tag & ((1 << INDEX_BITS) - 1)) as usize)
}

/// The most RPCs one transaction carries (the tag's index bits).
pub(super) const MAX_TRANSACTION_RPCS: usize = 1 << INDEX_BITS;

/// One RPC to put in a transaction.
#[derive(Debug)]
pub(super) struct Call {
    pub node: ProcessId,
    pub service: SrpcService,
    pub request: SrpcMsg,
    pub bulk: Option<ClientBulk>,
    /// An extension in the request's tail ([`crate::ext`]).
    pub tail: Option<(usize, Vec<u8>)>,
}

impl Transactions {
    /// `lstcon_rpc_trans_prep()` + `lstcon_rpc_trans_postwait()`'s posting half.
    pub fn start(
        &mut self,
        core: &mut RpcCore,
        op: TransOp,
        features: u32,
        calls: Vec<Call>,
    ) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        let mut transaction =
            Transaction { op, rpcs: Vec::new(), remaining: 0, features, features_updated: false };
        for (index, call) in calls.into_iter().take(MAX_TRANSACTION_RPCS).enumerate() {
            let node = call.node;
            let started = core.start(ClientCall {
                dest: call.node,
                service: call.service,
                request: call.request,
                bulk: call.bulk,
                // The transaction's own timeout bounds the wait; RPCs get none of their own.
                timeout: None,
                tag: tag(id, index),
                tail: call.tail,
            });
            let rpc = match started {
                Ok(rpc) => {
                    transaction.remaining += 1;
                    TransRpc {
                        node,
                        rpc: Some(rpc),
                        finished: false,
                        stamp: None,
                        status: Ok(()),
                        reply: None,
                        raw_reply: None,
                    }
                }
                Err(error) => TransRpc {
                    node,
                    rpc: None,
                    finished: true,
                    stamp: Some(Instant::now()),
                    status: Err(error),
                    reply: None,
                    raw_reply: None,
                },
            };
            transaction.rpcs.push(rpc);
        }
        self.live.insert(id, transaction);
        id
    }

    pub fn is_done(&self, id: u64) -> bool {
        self.live.get(&id).is_none_or(|transaction| transaction.remaining == 0)
    }

    /// `lstcon_rpc_done()`.
    pub fn rpc_done(&mut self, core: &mut RpcCore, outcome: ClientOutcome) -> bool {
        let (id, index) = untag(outcome.tag);
        let Some(rpc) = self.live.get_mut(&id).and_then(|t| t.rpcs.get_mut(index)) else {
            // An orphan of a transaction already given up.
            if let Some(memory) = outcome.bulk {
                core.recycle(memory);
            }
            return false;
        };
        if rpc.finished {
            return false;
        }
        rpc.finished = true;
        if rpc.stamp.is_none() {
            rpc.stamp = Some(Instant::now());
            rpc.status = outcome.status;
        }
        rpc.reply = outcome.reply.map(|(msg, _)| msg);
        rpc.raw_reply = outcome.raw_reply;
        if let Some(transaction) = self.live.get_mut(&id) {
            transaction.remaining = transaction.remaining.saturating_sub(1);
        }
        if let Some(memory) = outcome.bulk {
            core.recycle(memory);
        }
        true
    }

    /// `lstcon_rpc_trans_abort()`: the RPCs still out are given up with `error`; with
    /// ETIMEDOUT their nodes are marked down.
    pub fn abort(
        &mut self,
        core: &mut RpcCore,
        id: u64,
        error: RpcError,
        nodes: &mut HashMap<ProcessId, super::model::NodeEntry>,
    ) {
        let Some(transaction) = self.live.get_mut(&id) else { return };
        let now = Instant::now();
        for rpc in &mut transaction.rpcs {
            if rpc.finished || rpc.stamp.is_some() {
                continue;
            }
            rpc.stamp = Some(now);
            rpc.status = Err(error);
            if let Some(handle) = rpc.rpc {
                core.abort(handle, error);
            }
            if error != RpcError::TimedOut {
                continue;
            }
            if let Some(node) = nodes.get_mut(&rpc.node) {
                if node.stamp <= now {
                    node.stamp = now;
                    node.state = NodeState::Down;
                }
            }
        }
    }

    /// `lstcon_rpc_trans_stat()` + `lstcon_rpc_trans_interpreter()` +
    /// `lstcon_rpc_trans_destroy()`: node states from the replies, the statistics, one entry
    /// per RPC; the transaction is forgotten (RPCs still out become orphans).
    pub fn finish(
        &mut self,
        id: u64,
        session: &mut Session,
        nodes: &mut HashMap<ProcessId, super::model::NodeEntry>,
    ) -> TransResult {
        let Some(mut transaction) = self.live.remove(&id) else { return TransResult::default() };
        let mut stat = TransStat::default();
        let mut entries = Vec::with_capacity(transaction.rpcs.len());
        let op = transaction.op;
        let rpcs = std::mem::take(&mut transaction.rpcs);
        for rpc in &rpcs {
            stat.rpc_total += 1;
            let error = get_reply(rpc, session.id, nodes);
            let state = nodes.get(&rpc.node).map_or(NodeState::Unknown, |node| node.state);
            let mut entry = RpcEntry {
                peer: rpc.node,
                state,
                rpc_errno: 0,
                framework_errno: 0,
                session: SessionId::NONE,
                reply: None,
                ulnet: false,
                latency: None,
            };
            match (error, &rpc.reply) {
                (Some(_), _) | (None, None) => {
                    let errno = error.unwrap_or(errno::EPROTO);
                    stat.rpc_failure += 1;
                    if stat.rpc_errno == 0 {
                        stat.rpc_errno = errno;
                    }
                    entry.rpc_errno = errno;
                }
                (None, Some(reply)) => {
                    stat.rpc_success += 1;
                    stat_reply(&mut transaction, reply, rpc.node, session.id, nodes, &mut stat);
                    entry.session = reply_session(&reply.body);
                    entry.framework_errno = reply.body.status().unwrap_or(0);
                    entry.ulnet = matches!(
                        &reply.body,
                        SrpcBody::DebugReply(debug) if debug.batch_count == ULNET_DEBUG_PROBE
                    );
                    if entry.ulnet {
                        entry.latency = rpc.raw_reply.as_ref().and_then(LatencySummary::parse);
                    }
                    entry.reply = Some(reply.body.clone());
                }
            }
            entries.push(entry);
        }
        if op == TransOp::SessionNew && stat.framework_errno == 0 {
            stat.framework_errno = session.features_check(transaction.features);
        }
        TransResult { entries, stat, features: transaction.features }
    }
}

/// `lstcon_rpc_get_reply()`: the RPC's errno, and the node's state from the reply's session.
fn get_reply(
    rpc: &TransRpc,
    session: SessionId,
    nodes: &mut HashMap<ProcessId, super::model::NodeEntry>,
) -> Option<u32> {
    if let Err(error) = rpc.status {
        return Some(error.errno());
    }
    let reply = rpc.reply.as_ref()?;
    let stamp = rpc.stamp.unwrap_or_else(Instant::now);
    if let Some(node) = nodes.get_mut(&rpc.node) {
        if node.stamp <= stamp {
            node.stamp = stamp;
            let sid = reply_session(&reply.body);
            node.state = if sid.has_any_nid() {
                NodeState::Unknown
            } else if sid == session {
                NodeState::Active
            } else {
                NodeState::Busy
            };
        }
    }
    None
}

/// The `sid` of a reply (the generic reply's second field).
fn reply_session(body: &SrpcBody) -> SessionId {
    match body {
        SrpcBody::MakeSessionReply(r) => r.session,
        SrpcBody::RemoveSessionReply(r) => r.session,
        SrpcBody::BatchReply(r) => r.session,
        SrpcBody::StatReply(r) => r.session,
        SrpcBody::TestReply(r) => r.session,
        SrpcBody::DebugReply(r) => r.session,
        SrpcBody::JoinReply(r) => r.session,
        _ => SessionId::NONE,
    }
}

/// `lstcon_rpc_stat_reply()`.
fn stat_reply(
    transaction: &mut Transaction,
    reply: &SrpcMsg,
    node: ProcessId,
    session: SessionId,
    nodes: &mut HashMap<ProcessId, super::model::NodeEntry>,
    stat: &mut TransStat,
) {
    let status = reply.body.status().unwrap_or(0);
    let error = match (transaction.op, &reply.body) {
        (TransOp::SessionNew, SrpcBody::MakeSessionReply(make)) => {
            // lustre: conrpc.c `lstcon_sesnew_stat_reply()`.
            let mut status = make.status;
            if status == 0 && reply.ses_feats & !LST_FEATS_MASK != 0 {
                status = errno::EPROTO;
            }
            if status == 0 {
                if !transaction.features_updated {
                    transaction.features_updated = true;
                    transaction.features = reply.ses_feats;
                }
                if reply.ses_feats != transaction.features {
                    status = errno::EPROTO;
                }
            }
            if status == 0 {
                if let Some(entry) = nodes.get_mut(&node) {
                    entry.timeout_seconds = make.timeout_seconds;
                }
                stat.framework[0] += 1;
                return;
            }
            stat.framework[1] += 1;
            status
        }
        (TransOp::SessionEnd, _) => {
            // ESRCH is not an error for end session.
            if status == 0 || status == errno::ESRCH {
                stat.framework[0] += 1;
                return;
            }
            stat.framework[1] += 1;
            status
        }
        (TransOp::SessionQuery, SrpcBody::DebugReply(debug)) => {
            if debug.status == errno::ESRCH {
                stat.framework[2] += 1;
            } else if debug.session == session {
                stat.framework[0] += 1;
            } else {
                stat.framework[1] += 1;
            }
            return;
        }
        (TransOp::BatchRun | TransOp::BatchStop, _) => {
            if status == 0 || (status == EPERM && transaction.op == TransOp::BatchStop) {
                stat.framework[0] += 1;
                return;
            }
            stat.framework[1] += 1;
            status
        }
        (TransOp::BatchClientQuery | TransOp::BatchServerQuery, SrpcBody::BatchReply(batch)) => {
            if batch.active != 0 {
                stat.framework[1] += 1;
            } else {
                stat.framework[0] += 1;
            }
            if status == 0 {
                return;
            }
            stat.framework[2] += 1;
            status
        }
        (TransOp::TestClientAdd | TransOp::TestServerAdd | TransOp::StatQuery, _) => {
            if status == 0 {
                stat.framework[0] += 1;
                return;
            }
            stat.framework[1] += 1;
            status
        }
        _ => status,
    };
    if stat.framework_errno == 0 {
        stat.framework_errno = error;
    }
}
