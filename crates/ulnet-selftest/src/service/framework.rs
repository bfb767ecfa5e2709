//! The framework services (sessions, batches, tests, stats, debug) and the client side of
//! tests. lustre: lnet/selftest/framework.c.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use ulnet::proto::wire::selftest::{
    BatchId, BatchReply, BatchRequest, DebugReply, DebugRequest, LST_FEATS_MASK,
    LnetCountersCommon, LstName, MakeSessionReply, MakeSessionRequest, PAGE_SIZE_4K,
    RemoveSessionReply, RemoveSessionRequest, SRPC_BATCH_OPC_QUERY, SRPC_BATCH_OPC_RUN,
    SRPC_BATCH_OPC_STOP, SRPC_FRAMEWORK_SERVICE_MAX_ID, SRPC_SERVICE_MAX_ID, SessionId,
    SfwCounters, SrpcBody, SrpcMsg, SrpcService, StatReply, StatRequest, TestParams, TestReply,
    TestRequest, decode_dest_list, dest_list_len, errno,
};
use ulnet::{Memory, ProcessId};

use super::limits::{
    MAX_BATCHES_PER_SESSION, MAX_CONCURRENCY, MAX_DESTINATIONS, MAX_TESTS_PER_BATCH, MAX_UNITS,
    errnos,
};
use super::{ServiceConfig, SessionSummary, brw, ping};
use crate::ext::{LatencyQuery, LatencySummary, REPLY_TAIL, ULNET_DEBUG_PROBE};
use crate::srpc::{
    App, ClientCall, ClientOutcome, ClientRpcId, Incoming, RpcCore, RpcError, ServerBulk, Verdict,
};

/// The pages a node uses for BRW fragments and destination lists.
pub(crate) const PAGE_SIZE: usize = PAGE_SIZE_4K;

/// Latency histograms cover 1 us to an hour, 3 significant digits.
const HISTOGRAM_MAX_MICROS: u64 = 3_600_000_000;

/// Latency of one test's RPCs, as measured by this node as a test client.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct TestLatency {
    pub batch: u64,
    /// 1-based index in the batch, as lst numbers tests.
    pub test: u32,
    pub service: &'static str,
    pub count: u64,
    pub errors: u64,
    pub min_us: u64,
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
}

/// The framework's state (`sfw_data`) and the registered tests.
#[derive(Debug)]
pub(crate) struct Framework {
    config: ServiceConfig,
    session: Option<Session>,
    /// Deactivated sessions whose batches are still stopping.
    zombies: Vec<Session>,
    next_generation: u64,
    /// Client RPC tag → the test unit that sent it.
    units: foldhash::HashMap<u64, UnitRef>,
    next_tag: u64,
    /// Which test services have a server test loaded ([`Framework::serves`]).
    serving: Serving,
}

#[derive(Clone, Copy, Debug, Default)]
struct Serving {
    brw: bool,
    ping: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct UnitRef {
    generation: u64,
    batch: usize,
    test: usize,
    unit: usize,
}

/// `struct sfw_session`.
#[derive(Debug)]
struct Session {
    generation: u64,
    id: SessionId,
    name: LstName,
    features: u32,
    timeout: Option<Duration>,
    expires: Option<Instant>,
    started: Instant,
    refcount: u32,
    batches: Vec<Batch>,
    brw_errors: u32,
    ping_errors: u32,
}

/// `struct sfw_batch`.
#[derive(Debug)]
struct Batch {
    id: BatchId,
    tests: Vec<TestInstance>,
    /// Client tests still running (`bat_nactive`).
    active: u32,
}

/// `struct sfw_test_instance`.
#[derive(Debug)]
struct TestInstance {
    service: SrpcService,
    /// `tsi_loop`: RPCs per unit; negative runs until stopped.
    loop_count: i32,
    is_client: bool,
    stop_on_error: bool,
    params: TestParams,
    units: Vec<Unit>,
    /// Units still running (`tsi_nactive`).
    active: u32,
    stopping: bool,
    /// PING's `pnd_counter`.
    ping_sequence: u32,
    latency: Option<Histogram<u64>>,
    errors: u64,
}

/// `struct sfw_test_unit`: one destination × one concurrency slot.
#[derive(Debug)]
pub(super) struct Unit {
    pub dest: ProcessId,
    pub loops_left: i32,
    pub rpc: Option<ClientRpcId>,
    /// The request the RPC in flight carries (to check its reply).
    pub sent: Option<SrpcMsg>,
}

impl Framework {
    pub(crate) fn new(config: ServiceConfig) -> Self {
        Self {
            config,
            session: None,
            zombies: Vec::new(),
            next_generation: 1,
            units: foldhash::HashMap::default(),
            next_tag: 1,
            serving: Serving::default(),
        }
    }

    pub(crate) fn summary(&self) -> Option<SessionSummary> {
        self.session.as_ref().map(|session| SessionSummary {
            name: String::from_utf8_lossy(session.name.as_bytes()).into_owned(),
            console_nid: session.id.nid,
            stamp: session.id.stamp,
            features: session.features,
            batches: session.batches.len(),
            active_batches: session.batches.iter().filter(|batch| batch.active > 0).count(),
            brw_errors: session.brw_errors,
            ping_errors: session.ping_errors,
        })
    }

    pub(crate) fn latency(&self) -> Vec<TestLatency> {
        let Some(session) = &self.session else { return Vec::new() };
        let mut out = Vec::new();
        for batch in &session.batches {
            for (index, test) in batch.tests.iter().enumerate() {
                let Some(histogram) = &test.latency else { continue };
                out.push(TestLatency {
                    batch: batch.id.0,
                    test: u32::try_from(index + 1).unwrap_or(u32::MAX),
                    service: if test.service == SrpcService::Brw { "brw" } else { "ping" },
                    count: histogram.len(),
                    errors: test.errors,
                    min_us: histogram.min(),
                    p50_us: histogram.value_at_quantile(0.5),
                    p90_us: histogram.value_at_quantile(0.9),
                    p99_us: histogram.value_at_quantile(0.99),
                    p999_us: histogram.value_at_quantile(0.999),
                    max_us: histogram.max(),
                });
            }
        }
        out
    }

    /// The latency of the selected client tests of the session, merged.
    pub(crate) fn latency_summary(&self, query: LatencyQuery) -> LatencySummary {
        let mut merged: Option<Histogram<u64>> = None;
        let mut summary = LatencySummary::default();
        let Some(session) = &self.session else { return summary };
        for batch in session.batches.iter().filter(|b| query.batch == 0 || b.id.0 == query.batch) {
            for (index, test) in batch.tests.iter().enumerate() {
                if query.test != 0 && query.test as usize != index + 1 {
                    continue;
                }
                let Some(histogram) = &test.latency else { continue };
                summary.tests += 1;
                summary.errors += test.errors;
                match merged.as_mut() {
                    Some(merged) => {
                        let _ = merged.add(histogram);
                    }
                    None => merged = Some(histogram.clone()),
                }
            }
        }
        if let Some(histogram) = merged.filter(|histogram| !histogram.is_empty()) {
            let micros = |value: u64| u32::try_from(value).unwrap_or(u32::MAX);
            summary.count = histogram.len();
            summary.min_us = micros(histogram.min());
            summary.p50_us = micros(histogram.value_at_quantile(0.5));
            summary.p90_us = micros(histogram.value_at_quantile(0.9));
            summary.p99_us = micros(histogram.value_at_quantile(0.99));
            summary.p999_us = micros(histogram.value_at_quantile(0.999));
            summary.max_us = micros(histogram.max());
        }
        summary
    }

    /// The session timer: a session idle past its timeout ends. lustre: framework.c
    /// `sfw_session_expired()`.
    pub(crate) fn expire(&mut self, core: &mut RpcCore, now: Instant) {
        let expired =
            self.session.as_ref().and_then(|session| session.expires).is_some_and(|at| at <= now);
        if expired {
            if let Some(session) = &self.session {
                tracing::warn!(name = ?session.name, "selftest session expired");
            }
            self.deactivate(core);
        }
    }

    /// `sfw_handle_server_rpc()`: the common checks, then the service's handler.
    fn framework_request(&mut self, core: &mut RpcCore, incoming: &Incoming) -> Verdict {
        let service = incoming.service;
        let msg = &incoming.msg;
        // The session timer stops while the RPC is handled and restarts after.
        if let Some(session) = self.session.as_mut() {
            session.expires = None;
        }
        let body = self.framework_body(core, incoming);
        let features = self.session.as_ref().map_or(LST_FEATS_MASK, |session| session.features);
        if let Some(session) = self.session.as_mut() {
            session.expires = session.timeout.map(|timeout| Instant::now() + timeout);
        }
        match body {
            FrameworkOutcome::Reply(body) => {
                let probed = matches!(&body, SrpcBody::DebugReply(debug) if debug.batch_count == ULNET_DEBUG_PROBE);
                let mut reply = SrpcMsg::new(features, body);
                reply.ses_feats = features;
                if !probed {
                    return Verdict::Reply(reply);
                }
                // ulnet's extension: latency percentiles in the reply's tail.
                let query = LatencyQuery::parse(&incoming.raw).unwrap_or_default();
                let mut bytes = reply.emit();
                let summary = self.latency_summary(query).emit();
                bytes[REPLY_TAIL..REPLY_TAIL + LatencySummary::LEN].copy_from_slice(&summary);
                Verdict::ReplyBytes(bytes)
            }
            FrameworkOutcome::FeatureMismatch(body) => {
                let mut reply = SrpcMsg::new(features, body);
                reply.ses_feats = features;
                Verdict::Reply(reply)
            }
            FrameworkOutcome::Bulk(bulk) => Verdict::Bulk(bulk),
            FrameworkOutcome::Drop => {
                tracing::debug!(?service, ses_feats = msg.ses_feats, "dropping framework RPC");
                Verdict::Drop
            }
        }
    }

    fn framework_body(&mut self, core: &mut RpcCore, incoming: &Incoming) -> FrameworkOutcome {
        let service = incoming.service;
        let msg = &incoming.msg;
        if service != SrpcService::MakeSession && service != SrpcService::Debug {
            if let Some(session) = &self.session {
                if session.features != msg.ses_feats {
                    // lustre: framework.c `sfw_handle_server_rpc()`: the session's id goes
                    // back with EPROTO.
                    let body = crate::srpc::error_body(service, errno::EPROTO);
                    return FrameworkOutcome::FeatureMismatch(with_session(body, session.id));
                }
            }
        } else if msg.ses_feats & !LST_FEATS_MASK != 0 {
            let body = crate::srpc::error_body(service, errno::EPROTO);
            return FrameworkOutcome::Reply(with_session(body, SessionId { nid: 0, stamp: 0 }));
        }
        match &msg.body {
            SrpcBody::MakeSessionRequest(request) => {
                FrameworkOutcome::Reply(self.make_session(core, request, msg.ses_feats))
            }
            SrpcBody::RemoveSessionRequest(request) => {
                FrameworkOutcome::Reply(self.remove_session(core, request))
            }
            SrpcBody::DebugRequest(request) => FrameworkOutcome::Reply(self.debug(request)),
            SrpcBody::StatRequest(request) => FrameworkOutcome::Reply(self.stats(core, request)),
            SrpcBody::BatchRequest(request) => self.control_batch(core, request),
            SrpcBody::TestRequest(request) => {
                let outcome = self.add_test(request, incoming, None);
                self.refresh_serving();
                outcome
            }
            // JOIN and anything else: no handler.
            _ => FrameworkOutcome::Drop,
        }
    }

    /// `sfw_make_session()`.
    fn make_session(
        &mut self,
        core: &mut RpcCore,
        request: &MakeSessionRequest,
        features: u32,
    ) -> SrpcBody {
        let mut reply = MakeSessionReply {
            status: 0,
            session: SessionId { nid: 0, stamp: 0 },
            timeout_seconds: 0,
            name: LstName::default(),
        };
        if request.session.has_any_nid() {
            reply.session = self.old_sid();
            reply.status = errno::EINVAL;
            return SrpcBody::MakeSessionReply(reply);
        }
        if let Some(session) = self.session.as_mut() {
            reply.session = session.id;
            reply.timeout_seconds = timeout_seconds(session.timeout);
            if session.id == request.session {
                session.refcount += 1;
                return SrpcBody::MakeSessionReply(reply);
            }
            if !request.force {
                reply.status = errno::EBUSY;
                reply.name = session.name;
                return SrpcBody::MakeSessionReply(reply);
            }
        }
        if features & !LST_FEATS_MASK != 0 {
            reply.status = errno::EPROTO;
            return SrpcBody::MakeSessionReply(reply);
        }
        self.deactivate(core);
        let generation = self.next_generation;
        self.next_generation += 1;
        let timeout = self.config.session_timeout;
        self.session = Some(Session {
            generation,
            id: request.session,
            name: request.name,
            features,
            timeout,
            expires: None,
            started: Instant::now(),
            refcount: 1,
            batches: Vec::new(),
            brw_errors: 0,
            ping_errors: 0,
        });
        reply.status = 0;
        reply.session = request.session;
        reply.timeout_seconds = timeout_seconds(timeout);
        SrpcBody::MakeSessionReply(reply)
    }

    /// `sfw_remove_session()`.
    fn remove_session(&mut self, core: &mut RpcCore, request: &RemoveSessionRequest) -> SrpcBody {
        let mut reply = RemoveSessionReply { status: 0, session: self.old_sid() };
        if request.session.has_any_nid() {
            reply.status = errno::EINVAL;
            return SrpcBody::RemoveSessionReply(reply);
        }
        match self.session.as_mut() {
            None => reply.status = errno::ESRCH,
            Some(session) if session.id != request.session => reply.status = errno::EBUSY,
            Some(session) => {
                session.refcount = session.refcount.saturating_sub(1);
                if session.refcount == 0 {
                    self.deactivate(core);
                    reply.session = SessionId::NONE;
                }
            }
        }
        SrpcBody::RemoveSessionReply(reply)
    }

    /// `sfw_debug_session()`.
    fn debug(&self, request: &DebugRequest) -> SrpcBody {
        let Some(session) = &self.session else {
            return SrpcBody::DebugReply(DebugReply {
                status: errno::ESRCH,
                session: SessionId::NONE,
                timeout_seconds: 0,
                batch_count: 0,
                name: LstName::default(),
            });
        };
        // The kernel leaves dbg_nbatch 0; a ulnet console's probe learns we are ulnet.
        let batch_count = if request.flags == ULNET_DEBUG_PROBE { ULNET_DEBUG_PROBE } else { 0 };
        SrpcBody::DebugReply(DebugReply {
            status: 0,
            session: session.id,
            timeout_seconds: timeout_seconds(session.timeout),
            batch_count,
            name: session.name,
        })
    }

    /// `sfw_get_stats()`.
    fn stats(&self, core: &RpcCore, request: &StatRequest) -> SrpcBody {
        let mut reply = StatReply {
            status: 0,
            session: self.old_sid(),
            framework: SfwCounters::default(),
            rpc: Default::default(),
            lnet: Default::default(),
        };
        if request.session.has_any_nid() {
            reply.status = errno::EINVAL;
            return SrpcBody::StatReply(reply);
        }
        let Some(session) = self.session.as_ref().filter(|session| session.id == request.session)
        else {
            reply.status = errno::ESRCH;
            return SrpcBody::StatReply(reply);
        };
        reply.lnet = lnet_counters(core);
        reply.rpc = core.counters();
        let running = session.started.elapsed().as_millis();
        reply.framework = SfwCounters {
            // 32 bits of milliseconds wrap after about 49 days, as in the kernel.
            running_ms: (running & u128::from(u32::MAX)) as u32,
            active_batches: session.batches.iter().filter(|batch| batch.active > 0).count() as u32,
            zombie_sessions: self.zombies.len() as u32,
            brw_errors: session.brw_errors,
            ping_errors: session.ping_errors,
        };
        SrpcBody::StatReply(reply)
    }

    /// `sfw_control_batch()`.
    #[expect(
        clippy::indexing_slicing,
        reason = "batch_index comes from position() on the same vector"
    )]
    fn control_batch(&mut self, core: &mut RpcCore, request: &BatchRequest) -> FrameworkOutcome {
        let mut reply = BatchReply { status: 0, session: self.old_sid(), active: 0, time: 0 };
        let Some(session) = self.session.as_mut().filter(|session| session.id == request.session)
        else {
            reply.status = errno::ESRCH;
            return FrameworkOutcome::Reply(SrpcBody::BatchReply(reply));
        };
        let Some(batch_index) = session.batches.iter().position(|batch| batch.id == request.batch)
        else {
            reply.status = errno::ENOENT;
            return FrameworkOutcome::Reply(SrpcBody::BatchReply(reply));
        };
        match request.opcode {
            SRPC_BATCH_OPC_RUN => {
                let generation = session.generation;
                self.run_batch(core, generation, batch_index);
            }
            SRPC_BATCH_OPC_STOP => {
                let generation = session.generation;
                self.stop_batch(core, generation, batch_index, request.arg != 0);
            }
            SRPC_BATCH_OPC_QUERY => {
                // batch_index came from position() on this vector just above.
                let batch = &session.batches[batch_index];
                // The kernel reads bar_testidx as an int.
                let index = request.test_index as i32;
                if index < 0 {
                    reply.status = errno::EINVAL;
                } else if index == 0 {
                    reply.active = batch.active;
                } else {
                    match batch.tests.get(index as usize - 1) {
                        Some(test) => reply.active = test.active,
                        None => reply.status = errno::ENOENT,
                    }
                }
            }
            // Unknown opcode: dropped.
            _ => return FrameworkOutcome::Drop,
        }
        FrameworkOutcome::Reply(SrpcBody::BatchReply(reply))
    }

    /// `sfw_add_test()`, first pass (`destinations` is `None`) and after the destination
    /// list arrived (`sfw_bulk_ready()`).
    #[expect(
        clippy::indexing_slicing,
        reason = "batch_index comes from position() or push() on the same vector"
    )]
    fn add_test(
        &mut self,
        request: &TestRequest,
        incoming: &Incoming,
        destinations: Option<&[u8]>,
    ) -> FrameworkOutcome {
        let mut reply = TestReply { status: 0, session: self.old_sid() };
        let self_units = self.unit_count();
        if request.loop_count == 0
            || request.concurrency == 0
            || request.session.has_any_nid()
            || request.dest_count as usize > MAX_DESTINATIONS
            || (request.is_client && request.dest_count == 0)
            || request.concurrency > MAX_CONCURRENCY
            || request.service >= SRPC_SERVICE_MAX_ID
            || request.service <= SRPC_FRAMEWORK_SERVICE_MAX_ID
        {
            reply.status = errno::EINVAL;
            return FrameworkOutcome::Reply(SrpcBody::TestReply(reply));
        }
        let service = SrpcService::from_id(request.service);
        let Some(session) = self.session.as_mut().filter(|session| session.id == request.session)
        else {
            reply.status = errno::ENOENT;
            return FrameworkOutcome::Reply(SrpcBody::TestReply(reply));
        };
        let Some(service) = service.filter(|service| !service.is_framework()) else {
            reply.status = errno::ENOENT;
            return FrameworkOutcome::Reply(SrpcBody::TestReply(reply));
        };
        // `sfw_bid2batch()`: the batch comes into being with its first test.
        let batch_index = match session.batches.iter().position(|batch| batch.id == request.batch) {
            Some(index) => index,
            None if session.batches.len() >= MAX_BATCHES_PER_SESSION => {
                tracing::debug!(batches = session.batches.len(), "selftest: too many batches");
                reply.status = errnos::ENOMEM;
                return FrameworkOutcome::Reply(SrpcBody::TestReply(reply));
            }
            None => {
                session.batches.push(Batch { id: request.batch, tests: Vec::new(), active: 0 });
                session.batches.len() - 1
            }
        };
        // batch_index came from position() or push() on this vector just above.
        if session.batches[batch_index].active > 0 {
            reply.status = errno::EBUSY;
            return FrameworkOutcome::Reply(SrpcBody::TestReply(reply));
        }
        // The bounds, before anything (the destination list included) is fetched or made.
        let units = if request.is_client {
            (request.dest_count as usize).saturating_mul(request.concurrency as usize)
        } else {
            0
        };
        if session.batches[batch_index].tests.len() >= MAX_TESTS_PER_BATCH
            || units > MAX_UNITS.saturating_sub(self_units)
        {
            tracing::debug!(units, held = self_units, "selftest: TEST request over its bounds");
            reply.status = errnos::ENOMEM;
            return FrameworkOutcome::Reply(SrpcBody::TestReply(reply));
        }
        if request.is_client && destinations.is_none() {
            // Fetch the destination list first; we come back through bulk_ready.
            let length = dest_list_len(request.dest_count as usize, PAGE_SIZE).unwrap_or(0);
            return FrameworkOutcome::Bulk(ServerBulk::Get { length });
        }
        let status = match add_test_instance(
            &mut session.batches[batch_index],
            request,
            service,
            incoming,
            destinations,
        ) {
            Ok(()) => 0,
            Err(status) => status,
        };
        reply.status = status;
        FrameworkOutcome::Reply(SrpcBody::TestReply(reply))
    }

    /// `sfw_run_batch()`.
    fn run_batch(&mut self, core: &mut RpcCore, generation: u64, batch_index: usize) {
        let Some(batch) = self.batch_mut(generation, batch_index) else { return };
        if batch.active > 0 {
            return;
        }
        let mut to_start = Vec::new();
        for (test_index, test) in batch.tests.iter_mut().enumerate() {
            if !test.is_client {
                continue;
            }
            batch.active += 1;
            test.stopping = false;
            for (unit_index, unit) in test.units.iter_mut().enumerate() {
                test.active += 1;
                unit.loops_left = test.loop_count;
                to_start.push(UnitRef {
                    generation,
                    batch: batch_index,
                    test: test_index,
                    unit: unit_index,
                });
            }
        }
        for unit in to_start {
            self.run_unit(core, unit);
        }
    }

    /// `sfw_stop_batch()`.
    fn stop_batch(&mut self, core: &mut RpcCore, generation: u64, batch_index: usize, force: bool) {
        let Some(batch) = self.batch_mut(generation, batch_index) else { return };
        if batch.active == 0 {
            return;
        }
        let mut abort = Vec::new();
        for test in &mut batch.tests {
            if !test.is_client || test.active == 0 || test.stopping {
                continue;
            }
            test.stopping = true;
            if force {
                abort.extend(test.units.iter().filter_map(|unit| unit.rpc));
            }
        }
        for rpc in abort {
            core.abort(rpc, RpcError::Interrupted);
        }
    }

    /// `sfw_run_test()`: prepare and post the unit's next RPC, or finish the unit.
    fn run_unit(&mut self, core: &mut RpcCore, at: UnitRef) {
        let rpc_timeout = self.config.rpc_timeout;
        let tag = self.next_tag;
        let started = {
            let Some(mut ctx) = self.unit_ctx(at) else { return };
            if ctx.stopping {
                None
            } else {
                let prepared = match ctx.service {
                    SrpcService::Brw => brw::client_prepare(core, &mut ctx),
                    _ => ping::client_prepare(&mut ctx),
                };
                match prepared {
                    None => None,
                    Some((request, bulk)) => {
                        if ctx.unit.loops_left > 0 {
                            ctx.unit.loops_left -= 1;
                        }
                        ctx.unit.sent = Some(request.clone());
                        let call = ClientCall {
                            dest: ctx.unit.dest,
                            service: ctx.service,
                            request,
                            bulk,
                            timeout: rpc_timeout,
                            tag,
                            tail: None,
                        };
                        match core.start(call) {
                            Ok(id) => {
                                ctx.unit.rpc = Some(id);
                                Some(true)
                            }
                            Err(error) => {
                                tracing::warn!(%error, "cannot start a test RPC");
                                ctx.count_error();
                                Some(false)
                            }
                        }
                    }
                }
            }
        };
        match started {
            Some(true) => {
                self.next_tag += 1;
                self.units.insert(tag, at);
            }
            Some(false) | None => self.unit_done(at),
        }
    }

    /// `sfw_test_rpc_done()`.
    fn unit_rpc_done(&mut self, core: &mut RpcCore, at: UnitRef, outcome: ClientOutcome) {
        let done = {
            let Some(mut ctx) = self.unit_ctx(at) else {
                if let Some(memory) = outcome.bulk {
                    core.recycle(memory);
                }
                return;
            };
            ctx.unit.rpc = None;
            let sent = ctx.unit.sent.take();
            let result = match ctx.service {
                SrpcService::Brw => brw::client_done(core, &mut ctx, sent, outcome),
                _ => ping::client_done(&mut ctx, sent, &outcome),
            };
            let failed = match result {
                RpcResult::Ok(latency) => {
                    if let Some(histogram) = ctx.latency.as_mut() {
                        let micros = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
                        let _ = histogram.record(micros.clamp(1, HISTOGRAM_MAX_MICROS));
                    }
                    false
                }
                RpcResult::Failed => {
                    *ctx.errors += 1;
                    true
                }
            };
            ctx.stopping || ctx.unit.loops_left == 0 || (failed && ctx.stop_on_error)
        };
        if done {
            self.unit_done(at);
        } else {
            self.run_unit(core, at);
        }
    }

    /// `sfw_test_unit_done()`.
    #[expect(clippy::indexing_slicing, reason = "index comes from position() on the same vector")]
    fn unit_done(&mut self, at: UnitRef) {
        let Some(batch) = self.batch_mut(at.generation, at.batch) else { return };
        let Some(test) = batch.tests.get_mut(at.test) else { return };
        test.active = test.active.saturating_sub(1);
        if test.active > 0 {
            return;
        }
        test.stopping = false;
        batch.active = batch.active.saturating_sub(1);
        // A zombie session goes once all its batches have stopped.
        if let Some(index) =
            self.zombies.iter().position(|zombie| zombie.generation == at.generation)
        {
            // index came from position() on this vector just above.
            if self.zombies[index].batches.iter().all(|batch| batch.active == 0) {
                let zombie = self.zombies.remove(index);
                self.forget(&zombie);
            }
        }
    }

    /// `sfw_deactivate_session()`: the session becomes a zombie until its batches stop.
    fn deactivate(&mut self, core: &mut RpcCore) {
        let Some(session) = self.session.take() else { return };
        let generation = session.generation;
        let active: Vec<usize> = session
            .batches
            .iter()
            .enumerate()
            .filter(|(_, batch)| batch.active > 0)
            .map(|(index, _)| index)
            .collect();
        if active.is_empty() {
            self.forget(&session);
            return;
        }
        self.zombies.push(session);
        for batch_index in active {
            self.stop_batch(core, generation, batch_index, true);
        }
    }

    /// Test units held by the session and the zombies ([`MAX_UNITS`]).
    fn unit_count(&self) -> usize {
        self.session
            .iter()
            .chain(&self.zombies)
            .flat_map(|session| &session.batches)
            .flat_map(|batch| &batch.tests)
            .map(|test| test.units.len())
            .sum()
    }

    /// Whether a server test of `service` is loaded (in the session or a zombie). Only then
    /// does the kernel have request buffers posted for the test service: they are added by
    /// `sfw_load_test()` for a server test and removed by `sfw_unload_test()`, so without one a
    /// BRW or PING request is never handled (lustre: framework.c). A request then gets no reply
    /// here either, and no bulk is made for it.
    fn serves(&self, service: SrpcService) -> bool {
        match service {
            SrpcService::Brw => self.serving.brw,
            SrpcService::Ping => self.serving.ping,
            _ => false,
        }
    }

    /// Recomputes [`Framework::serves`] after tests were added or sessions forgotten (not per
    /// request: a session may hold many tests).
    fn refresh_serving(&mut self) {
        let mut serving = Serving::default();
        let tests = self
            .session
            .iter()
            .chain(&self.zombies)
            .flat_map(|session| &session.batches)
            .flat_map(|batch| &batch.tests)
            .filter(|test| !test.is_client);
        for test in tests {
            match test.service {
                SrpcService::Brw => serving.brw = true,
                SrpcService::Ping => serving.ping = true,
                _ => {}
            }
        }
        self.serving = serving;
    }

    fn forget(&mut self, session: &Session) {
        self.units.retain(|_, unit| unit.generation != session.generation);
        self.refresh_serving();
    }

    fn old_sid(&self) -> SessionId {
        self.session.as_ref().map_or(SessionId::NONE, |session| session.id)
    }

    fn session_mut(&mut self, generation: u64) -> Option<&mut Session> {
        match self.session.as_mut() {
            Some(session) if session.generation == generation => Some(session),
            _ => self.zombies.iter_mut().find(|zombie| zombie.generation == generation),
        }
    }

    fn batch_mut(&mut self, generation: u64, batch: usize) -> Option<&mut Batch> {
        self.session_mut(generation)?.batches.get_mut(batch)
    }

    fn unit_ctx(&mut self, at: UnitRef) -> Option<UnitCtx<'_>> {
        let session = self.session_mut(at.generation)?;
        let Session { features, batches, brw_errors, ping_errors, .. } = session;
        let test = batches.get_mut(at.batch)?.tests.get_mut(at.test)?;
        let TestInstance {
            service,
            stop_on_error,
            params,
            units,
            stopping,
            ping_sequence,
            latency,
            errors,
            ..
        } = test;
        Some(UnitCtx {
            features: *features,
            brw_errors,
            ping_errors,
            service: *service,
            params,
            stopping: *stopping,
            stop_on_error: *stop_on_error,
            ping_sequence,
            latency,
            errors,
            unit: units.get_mut(at.unit)?,
        })
    }
}

/// What a test's client code sees of its session, test and unit.
pub(super) struct UnitCtx<'a> {
    pub features: u32,
    pub brw_errors: &'a mut u32,
    pub ping_errors: &'a mut u32,
    pub service: SrpcService,
    pub params: &'a TestParams,
    /// `tsi_stopping`: errors of aborted RPCs are not counted.
    pub stopping: bool,
    pub stop_on_error: bool,
    pub ping_sequence: &'a mut u32,
    pub latency: &'a mut Option<Histogram<u64>>,
    pub errors: &'a mut u64,
    pub unit: &'a mut Unit,
}

impl UnitCtx<'_> {
    /// Counts a failed RPC against the session (`sn_brw_errors` / `sn_ping_errors`).
    pub fn count_error(&mut self) {
        let counter = if self.service == SrpcService::Brw {
            &mut *self.brw_errors
        } else {
            &mut *self.ping_errors
        };
        *counter = counter.wrapping_add(1);
    }
}

/// How a test RPC went, for the unit's loop.
pub(super) enum RpcResult {
    Ok(Duration),
    Failed,
}

enum FrameworkOutcome {
    Reply(SrpcBody),
    /// EPROTO for a feature mismatch, carrying the session's id.
    FeatureMismatch(SrpcBody),
    Bulk(ServerBulk),
    Drop,
}

impl App for Framework {
    fn request(&mut self, core: &mut RpcCore, incoming: &Incoming) -> Verdict {
        match incoming.service {
            SrpcService::Brw | SrpcService::Ping if !self.serves(incoming.service) => {
                tracing::debug!(peer = %incoming.peer, service = ?incoming.service,
                    "selftest test request without a server test loaded: dropped");
                Verdict::Drop
            }
            SrpcService::Brw => brw::server_handle(core, incoming),
            SrpcService::Ping => ping::server_handle(incoming),
            _ => self.framework_request(core, incoming),
        }
    }

    fn bulk_ready(
        &mut self,
        core: &mut RpcCore,
        incoming: &Incoming,
        status: Result<(), RpcError>,
        memory: Option<Memory>,
    ) -> Verdict {
        match incoming.service {
            SrpcService::Brw => brw::server_bulk_ready(core, incoming, status, memory),
            SrpcService::Test => {
                // lustre: framework.c `sfw_bulk_ready()`: a failed transfer drops the RPC.
                let data = memory.map(|memory| {
                    let data = memory.to_vec();
                    core.recycle(memory);
                    data
                });
                if status.is_err() {
                    return Verdict::Drop;
                }
                let SrpcBody::TestRequest(request) = &incoming.msg.body else {
                    return Verdict::Drop;
                };
                if let Some(session) = self.session.as_mut() {
                    session.expires = None;
                }
                let outcome =
                    self.add_test(request, incoming, Some(data.as_deref().unwrap_or(&[])));
                self.refresh_serving();
                let features =
                    self.session.as_ref().map_or(LST_FEATS_MASK, |session| session.features);
                if let Some(session) = self.session.as_mut() {
                    session.expires = session.timeout.map(|timeout| Instant::now() + timeout);
                }
                match outcome {
                    FrameworkOutcome::Reply(body) | FrameworkOutcome::FeatureMismatch(body) => {
                        Verdict::Reply(SrpcMsg::new(features, body))
                    }
                    _ => Verdict::Drop,
                }
            }
            _ => {
                if let Some(memory) = memory {
                    core.recycle(memory);
                }
                Verdict::Drop
            }
        }
    }

    fn client_done(&mut self, core: &mut RpcCore, outcome: ClientOutcome) {
        let Some(at) = self.units.remove(&outcome.tag) else {
            if let Some(memory) = outcome.bulk {
                core.recycle(memory);
            }
            return;
        };
        self.unit_rpc_done(core, at, outcome);
    }

    fn tick(&mut self, core: &mut RpcCore, now: Instant) {
        self.expire(core, now);
    }
}

/// `sfw_add_test_instance()` (with the test's `tso_init`).
fn add_test_instance(
    batch: &mut Batch,
    request: &TestRequest,
    service: SrpcService,
    incoming: &Incoming,
    destinations: Option<&[u8]>,
) -> Result<(), u32> {
    let mut test = TestInstance {
        service,
        loop_count: request.loop_count as i32,
        is_client: request.is_client,
        stop_on_error: request.stop_on_error,
        params: request.params,
        units: Vec::new(),
        active: 0,
        stopping: false,
        ping_sequence: 0,
        latency: None,
        errors: 0,
    };
    if !request.is_client {
        // A server test only needs request buffers, which grow on demand.
        batch.tests.push(test);
        return Ok(());
    }
    let data = destinations.unwrap_or_default();
    let ids = decode_dest_list(data, request.dest_count, PAGE_SIZE, incoming.order)
        .map_err(|_| errno::EINVAL)?;
    for id in ids {
        let dest = ProcessId::new(ulnet::Nid::from_nid4(id.nid), id.pid);
        for _ in 0..request.concurrency {
            test.units.push(Unit { dest, loops_left: 0, rpc: None, sent: None });
        }
    }
    if service == SrpcService::Brw {
        brw::client_init(&test.params, incoming.msg.ses_feats)?;
    }
    test.latency = Histogram::new_with_bounds(1, HISTOGRAM_MAX_MICROS, 3).ok();
    batch.tests.push(test);
    Ok(())
}

/// The node's LNet counters in the form QUERY_STAT carries (`lnet_counters_get_common()`);
/// the 32-bit fields wrap as the kernel's do.
fn lnet_counters(core: &RpcCore) -> LnetCountersCommon {
    LnetCountersCommon::from(&core.node().stats().global)
}

fn timeout_seconds(timeout: Option<Duration>) -> u32 {
    timeout.map_or(0, |timeout| u32::try_from(timeout.as_secs()).unwrap_or(u32::MAX))
}

/// Puts `session` into a generic reply body's `sid`.
fn with_session(mut body: SrpcBody, session: SessionId) -> SrpcBody {
    match &mut body {
        SrpcBody::MakeSessionReply(r) => r.session = session,
        SrpcBody::RemoveSessionReply(r) => r.session = session,
        SrpcBody::BatchReply(r) => r.session = session,
        SrpcBody::StatReply(r) => r.session = session,
        SrpcBody::TestReply(r) => r.session = session,
        SrpcBody::DebugReply(r) => r.session = session,
        SrpcBody::JoinReply(r) => r.session = session,
        _ => {}
    }
    body
}
