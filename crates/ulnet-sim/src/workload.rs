//! Workloads over the real engines: lnet_selftest's brw and ping RPCs and a Lustre client's
//! RPC stream, made of the LNet messages those services send.
//!
//! An RPC follows lnet_selftest's protocol (lustre: lnet/selftest/rpc.c, brw_test.c), which
//! ptlrpc's bulk I/O shares: the client posts its reply buffer and its bulk buffers on the
//! RDMA portal, then PUTs its request to the server's request portal; the server GETs the
//! client's bulk (a write) or PUTs into it (a read), one LNet message per MD of at most
//! 1 MiB, then PUTs its reply. A ping RPC has no bulk. The request names its workload in the
//! match bits (a service id) and its sequence number in the header data, which stand in for
//! the request body: payload bytes are not materialised (every MD shares one buffer per size,
//! which the simulated driver never writes), only their lengths travel.
//!
//! brw and ping keep `concurrency` RPCs in flight per client, each RPC going to the client's
//! next server; an RPC stream keeps `max_rpcs_in_flight` in flight to each of its servers.
//! An RPC without a reply after `rpc_timeout` fails and its buffers are unlinked; the slot
//! goes on with a new RPC, as lst does.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use ulnet_proto::addr::Nid;
use ulnet_proto::engine::testing::EventChecker;
use ulnet_proto::engine::{
    Engine, Event, EventKind, GetRequest, InsertPosition, LNET_PID_LUSTRE, MdHandle, MdOptions,
    MdSpec, Memory, ProcessId, PutRequest, Threshold, UnlinkMode,
};
use ulnet_proto::time::Time;
use ulnet_proto::wire::selftest::{SRPC_MSG_LEN, SRPC_RDMA_PORTAL, SRPC_REQUEST_PORTAL};

use crate::histogram::Histogram;
use crate::scenario::{Operation, WorkloadKind};

/// Most bulk MDs of one RPC (16 MiB in 1 MiB MDs).
pub const MAX_BULKS: usize = 16;
/// lst's RPC timeout when a workload sets none.
pub const DEFAULT_RPC_TIMEOUT: Duration = Duration::from_secs(64);

/// What an MD is for, in the low bits of its `user_ptr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum Role {
    ClientRequest = 0,
    ClientReply = 1,
    ClientBulk = 2,
    ServerRequestBuffer = 3,
    ServerBulk = 4,
    ServerReply = 5,
}

const ROLE_BITS: u32 = 3;

impl Role {
    fn from_bits(bits: u64) -> Option<Self> {
        Some(match bits {
            0 => Self::ClientRequest,
            1 => Self::ClientReply,
            2 => Self::ClientBulk,
            3 => Self::ServerRequestBuffer,
            4 => Self::ServerBulk,
            5 => Self::ServerReply,
            _ => return None,
        })
    }
}

fn user_ptr(index: u32, role: Role) -> u64 {
    (u64::from(index) << ROLE_BITS) | role as u64
}

/// One workload, resolved to node indices.
#[derive(Clone, Debug)]
pub struct Plan {
    pub label: String,
    pub kind: WorkloadKind,
    pub op: Operation,
    /// Bytes of each bulk MD, and how many (0 for ping).
    pub bulk_len: u32,
    pub bulks: u8,
    pub clients: std::ops::Range<u32>,
    pub servers: std::ops::Range<u32>,
    /// Servers each client uses.
    pub per_client: u32,
    pub shift: u32,
    /// brw/ping: slots per client; rpc_stream: slots per client and server.
    pub depth: u32,
    pub start: Time,
    pub stop: Time,
    pub rpc_timeout: Duration,
}

impl Plan {
    /// RPC slots per client.
    pub fn slots_per_client(&self) -> u32 {
        match self.kind {
            WorkloadKind::RpcStream => self.depth * self.per_client,
            _ => self.depth,
        }
    }

    /// Bytes of bulk per RPC.
    pub fn rpc_bytes(&self) -> u64 {
        u64::from(self.bulk_len) * u64::from(self.bulks)
    }
}

/// What a workload did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct WorkloadStats {
    pub rpcs_started: u64,
    pub rpcs_completed: u64,
    pub rpcs_failed: u64,
    pub rpcs_timed_out: u64,
    /// Bulk bytes delivered (to the server for writes, to the client for reads).
    pub bytes: u64,
    #[serde(skip)]
    pub latency: Histogram,
    /// Bulk bytes delivered per sample interval.
    #[serde(skip)]
    pub series: Vec<u64>,
    /// Client RPCs that failed (timeouts included) per sample interval.
    #[serde(skip)]
    pub failures: Vec<u64>,
}

/// An RPC in flight, on its client or its server.
#[derive(Clone, Debug)]
struct Rpc {
    workload: u16,
    client_side: bool,
    node: u32,
    /// Client: its slot (to go on with); server: unused.
    slot: u32,
    seq: u64,
    peer: ProcessId,
    started: Time,
    /// Events still needed before the next step (client: completion; server: the bulk,
    /// then the reply).
    waiting: u8,
    replying: bool,
    failed: bool,
    done: bool,
    mds: [MdHandle; MAX_BULKS + 2],
    md_count: u8,
    /// MDs not yet reported unlinked: the record lives until it is 0.
    live: u8,
}

/// A timed action a workload asks the world to schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// Start every slot of a workload.
    Start { workload: u16 },
    /// A client slot's RPC timer: the RPC it runs fails if its deadline has passed.
    SlotTimer { workload: u16, node: u32, slot: u32 },
    /// Client `node`'s slot goes on after a failed RPC.
    Restart { workload: u16, node: u32, slot: u32 },
}

/// How long a client slot waits after a failed RPC before its next one, so that an
/// unreachable server is not retried in a loop at one instant.
pub const RETRY_DELAY: Duration = Duration::from_millis(100);

/// A client slot: the RPC it runs (record and sequence), when that RPC times out, and
/// whether a timer entry for the slot is queued. One entry per slot at most, re-armed when
/// it fires early, so timers never pile up however many RPCs complete.
#[derive(Clone, Copy, Debug, Default)]
struct SlotState {
    rpc: u32,
    seq: u64,
    deadline: Time,
    armed: bool,
}

/// The engine and checker of the node an operation runs on.
#[derive(Debug)]
pub struct Ctx<'a> {
    pub engine: &'a mut Engine,
    pub checker: &'a mut EventChecker,
    pub now: Time,
    pub node: u32,
}

/// Every workload of a run.
#[derive(Debug)]
pub struct Workloads {
    pub plans: Vec<Plan>,
    pub stats: Vec<WorkloadStats>,
    rpcs: Vec<Option<Rpc>>,
    free: Vec<u32>,
    next_seq: u64,
    /// Per workload, per client: RPCs started (picks the next server).
    issued: Vec<Vec<u32>>,
    /// Per workload, per client slot: the RPC it runs and its timer.
    slots: Vec<Vec<SlotState>>,
    sample_interval: Duration,
    samples: usize,
    /// One zeroed buffer per length, shared by every MD of that length.
    buffers: std::collections::BTreeMap<usize, Arc<Vec<u8>>>,
    /// Timed actions for the world to schedule.
    pub wakes: Vec<(Time, Wake)>,
    /// Client RPCs started and not yet finished.
    pub outstanding: u64,
    /// API calls the engine refused (a bound reached), counted, never fatal.
    pub refused: u64,
    /// Broken workload-level expectations (an event the RPC did not expect).
    pub violation: Option<String>,
}

impl Workloads {
    pub fn new(plans: Vec<Plan>, sample_interval: Duration, end: Time) -> Self {
        let samples = end.as_nanos().div_ceil(sample_interval.as_nanos().max(1) as u64) as usize;
        let mut buffers = std::collections::BTreeMap::new();
        for length in plans.iter().map(|plan| plan.bulk_len as usize).chain([SRPC_MSG_LEN]) {
            buffers.entry(length).or_insert_with(|| Arc::new(vec![0; length]));
        }
        let stats = plans
            .iter()
            .map(|_| WorkloadStats {
                series: vec![0; samples],
                failures: vec![0; samples],
                ..WorkloadStats::default()
            })
            .collect();
        let issued = plans.iter().map(|plan| vec![0; plan.clients.len()]).collect();
        let slots = plans
            .iter()
            .map(|plan| {
                vec![SlotState::default(); plan.clients.len() * plan.slots_per_client() as usize]
            })
            .collect();
        Self {
            wakes: plans
                .iter()
                .enumerate()
                .map(|(index, plan)| (plan.start, Wake::Start { workload: index as u16 }))
                .collect(),
            plans,
            stats,
            rpcs: Vec::new(),
            free: Vec::new(),
            next_seq: 1,
            issued,
            slots,
            sample_interval,
            samples,
            buffers,
            outstanding: 0,
            refused: 0,
            violation: None,
        }
    }

    /// RPC records alive (client and server).
    pub fn live_rpcs(&self) -> usize {
        self.rpcs.len() - self.free.len()
    }

    /// Posts the request buffers of every workload `node` serves.
    pub fn setup_server(&mut self, ctx: &mut Ctx<'_>) {
        for (index, plan) in self.plans.iter().enumerate() {
            if !plan.servers.contains(&ctx.node) {
                continue;
            }
            let me = ctx.engine.me_attach(
                SRPC_REQUEST_PORTAL,
                ProcessId::ANY,
                index as u64,
                0,
                UnlinkMode::Retain,
                InsertPosition::After,
            );
            let Ok(me) = me else {
                self.refused += 1;
                continue;
            };
            let spec = MdSpec::new(self.memory(SRPC_MSG_LEN))
                .options(MdOptions::OP_PUT | MdOptions::MANAGE_REMOTE)
                .user_ptr(user_ptr(index as u32, Role::ServerRequestBuffer));
            let (threshold, events) = (spec.threshold, spec.events);
            match ctx.engine.md_attach(ctx.now, me, spec, UnlinkMode::Retain) {
                Ok(md) => ctx.checker.track(ctx.node as usize, md, threshold, events),
                Err(_) => self.refused += 1,
            }
        }
    }

    /// The (client, slot) pairs a workload starts.
    pub fn slots(&self, workload: u16) -> impl Iterator<Item = (u32, u32)> + use<> {
        let plan = self.plans.get(usize::from(workload));
        let clients = plan.map_or(0..0, |plan| plan.clients.clone());
        let slots = plan.map_or(0, Plan::slots_per_client);
        clients.flat_map(move |client| (0..slots).map(move |slot| (client, slot)))
    }

    /// Starts one RPC on client slot `slot` of workload `workload`, if it is still on.
    pub fn start_rpc(&mut self, ctx: &mut Ctx<'_>, workload: u16, slot: u32, nids: &[Nid]) {
        let Some(plan) = self.plans.get(usize::from(workload)) else { return };
        if ctx.now >= plan.stop || ctx.now < plan.start {
            return;
        }
        let client_index = ctx.node - plan.clients.start;
        let servers = plan.servers.len() as u32;
        let issued = self
            .issued
            .get_mut(usize::from(workload))
            .and_then(|list| list.get_mut(client_index as usize));
        let turn = match plan.kind {
            WorkloadKind::RpcStream => slot / plan.depth.max(1),
            _ => issued.map_or(0, |count| {
                let turn = *count % plan.per_client.max(1);
                *count = count.wrapping_add(1);
                turn
            }),
        };
        let server = plan.servers.start + (client_index + plan.shift + turn) % servers.max(1);
        let Some(&server_nid) = nids.get(server as usize) else { return };
        let (bulks, bulk_len, op, timeout) = (plan.bulks, plan.bulk_len, plan.op, plan.rpc_timeout);
        let seq = self.next_seq;
        self.next_seq += 1;
        let index = self.alloc(Rpc {
            workload,
            client_side: true,
            node: ctx.node,
            slot,
            seq,
            peer: ProcessId::new(server_nid, LNET_PID_LUSTRE),
            started: ctx.now,
            waiting: 2 + bulks,
            replying: false,
            failed: false,
            done: false,
            mds: [MdHandle(0); MAX_BULKS + 2],
            md_count: 0,
            live: 0,
        });
        if let Some(stats) = self.stats.get_mut(usize::from(workload)) {
            stats.rpcs_started += 1;
        }
        self.outstanding += 1;
        let deadline = ctx.now + timeout;
        let node = ctx.node;
        if let Some(state) = self.slot_state(workload, node, slot) {
            *state = SlotState { rpc: index, seq, deadline, armed: state.armed };
            if !state.armed {
                state.armed = true;
                self.wakes.push((deadline, Wake::SlotTimer { workload, node, slot }));
            }
        }
        let reply = self.post(
            ctx,
            index,
            Role::ClientReply,
            seq << 5,
            SRPC_MSG_LEN as u32,
            MdOptions::OP_PUT,
        );
        let mut ok = reply;
        for bulk in 0..bulks {
            if !ok {
                break;
            }
            let options = match op {
                Operation::Write => MdOptions::OP_GET,
                Operation::Read => MdOptions::OP_PUT,
            };
            ok = self.post(
                ctx,
                index,
                Role::ClientBulk,
                (seq << 5) | u64::from(bulk + 1),
                bulk_len,
                options,
            );
        }
        if ok {
            let request = PutRequest {
                md: MdHandle(0),
                ack: false,
                target: ProcessId::new(server_nid, LNET_PID_LUSTRE),
                portal: SRPC_REQUEST_PORTAL,
                match_bits: u64::from(workload),
                remote_offset: 0,
                hdr_data: seq,
                source: None,
            };
            ok = self.bind_and_put(ctx, index, Role::ClientRequest, SRPC_MSG_LEN, request);
        }
        if !ok {
            self.fail(ctx, index);
        }
    }

    /// One event of node `ctx.node`; `nids` maps nodes to their first NID.
    pub fn on_event(&mut self, ctx: &mut Ctx<'_>, event: &Event, nids: &[Nid]) {
        let Some(role) = Role::from_bits(event.user_ptr & ((1 << ROLE_BITS) - 1)) else {
            return self
                .violate(ctx, format!("event of an MD the workloads did not make: {event:?}"));
        };
        let index = (event.user_ptr >> ROLE_BITS) as u32;
        if role == Role::ServerRequestBuffer {
            return self.serve(ctx, index as u16, event, nids);
        }
        let Some(rpc) = self.rpcs.get_mut(index as usize).and_then(Option::as_mut) else {
            return self.violate(ctx, format!("event for an RPC that is gone: {event:?}"));
        };
        if event.unlinked {
            rpc.live = rpc.live.saturating_sub(1);
        }
        if rpc.done {
            self.maybe_free(index);
            return;
        }
        let (workload, client_side, replying) = (rpc.workload, rpc.client_side, rpc.replying);
        if event.kind == EventKind::Unlink {
            // LNet unlinked an MD the RPC still needed (its response tracker expired).
            self.fail(ctx, index);
            if client_side {
                self.restart_later(ctx.now, index);
            }
            return;
        }
        let expected = matches!(
            (role, event.kind),
            (Role::ClientRequest, EventKind::Send)
                | (Role::ClientReply, EventKind::Put)
                | (Role::ClientBulk, EventKind::Get | EventKind::Put)
                | (Role::ServerBulk, EventKind::Send | EventKind::Reply)
                | (Role::ServerReply, EventKind::Send)
        );
        if !expected {
            return self.violate(ctx, format!("unexpected {:?} event for {role:?}", event.kind));
        }
        if !event.status.is_ok() {
            self.fail(ctx, index);
            if client_side {
                self.restart_later(ctx.now, index);
            }
            return;
        }
        rpc.waiting = rpc.waiting.saturating_sub(1);
        let finished = rpc.waiting == 0;
        let delivered = matches!(
            (role, event.kind),
            (Role::ClientBulk, EventKind::Put) | (Role::ServerBulk, EventKind::Reply)
        );
        if delivered {
            self.count_bytes(workload, ctx.now, u64::from(event.mlength));
        }
        if !finished {
            return;
        }
        if client_side {
            self.complete(ctx, index, nids);
        } else if !replying {
            self.reply(ctx, index);
        } else {
            if let Some(rpc) = self.rpcs.get_mut(index as usize).and_then(Option::as_mut) {
                rpc.done = true;
            }
            self.maybe_free(index);
        }
    }

    fn count_bytes(&mut self, workload: u16, now: Time, bytes: u64) {
        // Bytes that land after the end (while the run drains) are not the run's.
        let bucket = (now.as_nanos() / self.sample_interval.as_nanos().max(1) as u64) as usize;
        if bucket >= self.samples {
            return;
        }
        if let Some(stats) = self.stats.get_mut(usize::from(workload)) {
            stats.bytes += bytes;
            if let Some(sample) = stats.series.get_mut(bucket) {
                *sample += bytes;
            }
        }
    }

    /// Schedules the slot of failed client RPC `index` to go on after [`RETRY_DELAY`].
    fn restart_later(&mut self, now: Time, index: u32) {
        if let Some(rpc) = self.rpcs.get(index as usize).and_then(Option::as_ref) {
            let wake = Wake::Restart { workload: rpc.workload, node: rpc.node, slot: rpc.slot };
            self.wakes.push((now + RETRY_DELAY, wake));
        }
    }

    /// A slot's timer fired: its RPC fails if past its deadline, else the timer is re-armed.
    pub fn on_slot_timer(&mut self, ctx: &mut Ctx<'_>, workload: u16, slot: u32, nids: &[Nid]) {
        let now = ctx.now;
        let Some(state) = self.slot_state(workload, ctx.node, slot) else { return };
        state.armed = false;
        let SlotState { rpc, seq, deadline, .. } = *state;
        let running = self
            .rpcs
            .get(rpc as usize)
            .and_then(Option::as_ref)
            .is_some_and(|record| record.seq == seq && !record.done && record.client_side);
        if !running {
            return;
        }
        if deadline > now {
            if let Some(state) = self.slot_state(workload, ctx.node, slot) {
                state.armed = true;
            }
            self.wakes.push((deadline, Wake::SlotTimer { workload, node: ctx.node, slot }));
            return;
        }
        if let Some(stats) = self.stats.get_mut(usize::from(workload)) {
            stats.rpcs_timed_out += 1;
        }
        self.fail(ctx, rpc);
        self.next(ctx, rpc, nids);
    }

    fn slot_state(&mut self, workload: u16, node: u32, slot: u32) -> Option<&mut SlotState> {
        let plan = self.plans.get(usize::from(workload))?;
        let client = node.checked_sub(plan.clients.start)?;
        let index = client as usize * plan.slots_per_client() as usize + slot as usize;
        self.slots.get_mut(usize::from(workload))?.get_mut(index)
    }

    /// A slot goes on after its retry delay.
    pub fn restart(&mut self, ctx: &mut Ctx<'_>, workload: u16, slot: u32, nids: &[Nid]) {
        self.start_rpc(ctx, workload, slot, nids);
    }

    /// The node a timeout wake concerns.
    pub fn node_of(&self, rpc: u32) -> Option<u32> {
        self.rpcs.get(rpc as usize).and_then(Option::as_ref).map(|record| record.node)
    }

    // ------------------------------------------------------------------ server side

    fn serve(&mut self, ctx: &mut Ctx<'_>, workload: u16, event: &Event, _nids: &[Nid]) {
        if event.kind != EventKind::Put || !event.status.is_ok() {
            return;
        }
        let Some(plan) = self.plans.get(usize::from(workload)) else {
            return self.violate(ctx, format!("request for unknown workload {workload}"));
        };
        let (bulks, bulk_len, op) = (plan.bulks, plan.bulk_len, plan.op);
        let seq = event.hdr_data;
        let waiting = match op {
            // A GET's MD sees SEND then REPLY.
            Operation::Write => 2 * bulks,
            Operation::Read => bulks,
        };
        let index = self.alloc(Rpc {
            workload,
            client_side: false,
            node: ctx.node,
            slot: 0,
            seq,
            peer: event.initiator,
            started: ctx.now,
            waiting,
            replying: false,
            failed: false,
            done: false,
            mds: [MdHandle(0); MAX_BULKS + 2],
            md_count: 0,
            live: 0,
        });
        if bulks == 0 {
            return self.reply(ctx, index);
        }
        for bulk in 0..bulks {
            let bits = (seq << 5) | u64::from(bulk + 1);
            let ok = match op {
                Operation::Write => {
                    let request = GetRequest {
                        md: MdHandle(0),
                        target: event.initiator,
                        portal: SRPC_RDMA_PORTAL,
                        match_bits: bits,
                        remote_offset: 0,
                        source: None,
                    };
                    self.bind_and_get(ctx, index, bulk_len as usize, request)
                }
                Operation::Read => {
                    let request = rdma_put(event.initiator, bits);
                    self.bind_and_put(ctx, index, Role::ServerBulk, bulk_len as usize, request)
                }
            };
            if !ok {
                return self.fail(ctx, index);
            }
        }
    }

    fn reply(&mut self, ctx: &mut Ctx<'_>, index: u32) {
        let Some(rpc) = self.rpcs.get_mut(index as usize).and_then(Option::as_mut) else { return };
        rpc.replying = true;
        rpc.waiting = 1;
        let request = rdma_put(rpc.peer, rpc.seq << 5);
        if !self.bind_and_put(ctx, index, Role::ServerReply, SRPC_MSG_LEN, request) {
            self.fail(ctx, index);
        }
    }

    // ------------------------------------------------------------------ client side

    fn complete(&mut self, ctx: &mut Ctx<'_>, index: u32, nids: &[Nid]) {
        let Some(rpc) = self.rpcs.get_mut(index as usize).and_then(Option::as_mut) else { return };
        rpc.done = true;
        self.outstanding -= 1;
        let latency = ctx.now.saturating_duration_since(rpc.started);
        if let Some(stats) = self.stats.get_mut(usize::from(rpc.workload)) {
            stats.rpcs_completed += 1;
            stats.latency.record(latency.as_nanos() as u64);
        }
        self.next(ctx, index, nids);
        self.maybe_free(index);
    }

    /// The slot of finished client RPC `index` goes on.
    fn next(&mut self, ctx: &mut Ctx<'_>, index: u32, nids: &[Nid]) {
        let Some(rpc) = self.rpcs.get(index as usize).and_then(Option::as_ref) else { return };
        let (workload, slot) = (rpc.workload, rpc.slot);
        self.start_rpc(ctx, workload, slot, nids);
    }

    // ------------------------------------------------------------------ MDs

    /// Posts a passive MD of `length` bytes on the RDMA portal with `bits`.
    fn post(
        &mut self,
        ctx: &mut Ctx<'_>,
        index: u32,
        role: Role,
        bits: u64,
        length: u32,
        options: MdOptions,
    ) -> bool {
        let me = ctx.engine.me_attach(
            SRPC_RDMA_PORTAL,
            ProcessId::ANY,
            bits,
            0,
            UnlinkMode::Unlink,
            InsertPosition::After,
        );
        let Ok(me) = me else {
            self.refused += 1;
            return false;
        };
        let spec = MdSpec::new(self.memory(length as usize))
            .options(options)
            .threshold(Threshold::Count(1))
            .user_ptr(user_ptr(index, role));
        let (threshold, events) = (spec.threshold, spec.events);
        match ctx.engine.md_attach(ctx.now, me, spec, UnlinkMode::Unlink) {
            Ok(md) => {
                ctx.checker.track(ctx.node as usize, md, threshold, events);
                self.remember(index, md);
                true
            }
            Err(_) => {
                self.refused += 1;
                false
            }
        }
    }

    fn bind(
        &mut self,
        ctx: &mut Ctx<'_>,
        index: u32,
        role: Role,
        length: usize,
        threshold: u32,
    ) -> Option<MdHandle> {
        let spec = MdSpec::new(self.memory(length))
            .threshold(Threshold::Count(threshold))
            .user_ptr(user_ptr(index, role));
        let (threshold, events) = (spec.threshold, spec.events);
        match ctx.engine.md_bind(spec, UnlinkMode::Unlink) {
            Ok(md) => {
                ctx.checker.track(ctx.node as usize, md, threshold, events);
                self.remember(index, md);
                Some(md)
            }
            Err(_) => {
                self.refused += 1;
                None
            }
        }
    }

    fn bind_and_put(
        &mut self,
        ctx: &mut Ctx<'_>,
        index: u32,
        role: Role,
        length: usize,
        mut request: PutRequest,
    ) -> bool {
        let Some(md) = self.bind(ctx, index, role, length, 1) else { return false };
        request.md = md;
        match ctx.engine.put(ctx.now, &request) {
            Ok(()) => {
                ctx.checker.initiated(ctx.node as usize, md);
                true
            }
            Err(_) => {
                self.refused += 1;
                false
            }
        }
    }

    fn bind_and_get(
        &mut self,
        ctx: &mut Ctx<'_>,
        index: u32,
        length: usize,
        mut request: GetRequest,
    ) -> bool {
        let Some(md) = self.bind(ctx, index, Role::ServerBulk, length, 2) else { return false };
        request.md = md;
        match ctx.engine.get(ctx.now, &request) {
            Ok(()) => {
                ctx.checker.initiated(ctx.node as usize, md);
                true
            }
            Err(_) => {
                self.refused += 1;
                false
            }
        }
    }

    fn memory(&self, length: usize) -> Memory {
        match self.buffers.get(&length) {
            Some(buffer) => Memory::shared(buffer.clone()),
            None => Memory::new(vec![0; length]),
        }
    }

    /// Whether a payload starting at `start` is read from a workload's shared buffer, whose
    /// bytes nobody reads: the driver then carries its length only.
    pub fn is_virtual(&self, start: *const u8) -> bool {
        self.buffers.values().any(|buffer| std::ptr::eq(buffer.as_ptr(), start))
    }

    fn remember(&mut self, index: u32, md: MdHandle) {
        if let Some(rpc) = self.rpcs.get_mut(index as usize).and_then(Option::as_mut) {
            if let Some(slot) = rpc.mds.get_mut(usize::from(rpc.md_count)) {
                *slot = md;
                rpc.md_count += 1;
                rpc.live += 1;
            }
        }
    }

    /// Fails an RPC: unlinks what is left of its MDs (their last events free the record).
    fn fail(&mut self, ctx: &mut Ctx<'_>, index: u32) {
        let Some(rpc) = self.rpcs.get_mut(index as usize).and_then(Option::as_mut) else { return };
        if rpc.done {
            return;
        }
        rpc.done = true;
        rpc.failed = true;
        if rpc.client_side {
            self.outstanding -= 1;
            let bucket = ctx.now.as_nanos() / self.sample_interval.as_nanos().max(1) as u64;
            if let Some(stats) = self.stats.get_mut(usize::from(rpc.workload)) {
                stats.rpcs_failed += 1;
                if let Some(sample) = stats.failures.get_mut(bucket as usize) {
                    *sample += 1;
                }
            }
        }
        let mds: Vec<MdHandle> = rpc.mds.iter().take(usize::from(rpc.md_count)).copied().collect();
        for md in mds {
            // MDs already unlinked answer an error: nothing to do for them.
            let _ = ctx.engine.md_unlink(ctx.now, md);
        }
        self.maybe_free(index);
    }

    fn alloc(&mut self, rpc: Rpc) -> u32 {
        match self.free.pop() {
            Some(index) => {
                if let Some(slot) = self.rpcs.get_mut(index as usize) {
                    *slot = Some(rpc);
                }
                index
            }
            None => {
                self.rpcs.push(Some(rpc));
                (self.rpcs.len() - 1) as u32
            }
        }
    }

    fn maybe_free(&mut self, index: u32) {
        let Some(slot) = self.rpcs.get_mut(index as usize) else { return };
        if slot.as_ref().is_some_and(|rpc| rpc.done && rpc.live == 0) {
            *slot = None;
            self.free.push(index);
        }
    }

    fn violate(&mut self, ctx: &Ctx<'_>, what: String) {
        if self.violation.is_none() {
            self.violation = Some(format!("node {}: {what}", ctx.node));
        }
    }
}

/// A server's PUT to the client's buffer on the RDMA portal, without ACK (lustre: rpc.c
/// `srpc_post_active_rdma()`).
fn rdma_put(target: ProcessId, match_bits: u64) -> PutRequest {
    PutRequest {
        md: MdHandle(0),
        ack: false,
        target,
        portal: SRPC_RDMA_PORTAL,
        match_bits,
        remote_offset: 0,
        hdr_data: 0,
        source: None,
    }
}
