//! The simulated cluster: every node's real [`Engine`] on one virtual clock, driven through
//! its public call protocol (decision 0003) by a driver that is the modelled socklnd and
//! network, with the workloads on top and the invariant checkers after every step.
//!
//! One priority queue holds everything that happens at a time: a frame's arrival, a send's
//! completion, an engine's timer, a fault, a keepalive, a workload's wake-up. Ties go in the
//! order they were scheduled, so a scenario and a seed replay exactly. A step pops one entry,
//! hands it to the node it concerns, drains that node's outputs (transmits become network
//! transits, events go to the workloads, which may start more operations), and checks the
//! node: its own invariants ([`Engine::check_invariants`]) and the event-level ones
//! ([`EventChecker`]). Only the nodes a step touched are checked, so a step costs the same
//! whatever the cluster's size.
//!
//! Routers are nodes like the others with routing on: a frame is delivered on the NI owning
//! the NID it was sent to (a routed frame's header names its final destination), a routed
//! receive waits for router credits and buffers through `RecvAction::Delay` with its
//! connection's reader parked ([`lanes`](crate::lanes)), and the forward is an ordinary
//! transmit. Nodes can lose every link (`node_down`) or stop and start again as a fresh
//! process (`node_stop`, `node_start`).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::time::Duration;

use ulnet_proto::addr::{Net, Nid};
use ulnet_proto::engine::faults::{DelayRule, DropRule, FaultMatch};
use ulnet_proto::engine::testing::{EventChecker, Tracking};
use ulnet_proto::engine::{
    BufferClass, DriverError, Engine, EngineConfig, HealthStatus, LNET_PID_LUSTRE, LndKind,
    NiConfig, NiId, PingCompletion, RecvAction, RouteConfig, RxId, Transmit, TxId,
};
use ulnet_proto::time::Time;

use crate::lanes::{Arrival, Held, LaneKey, Lanes, Parked};
use crate::network::{EndpointId, LinkId, Network};
use crate::scenario::tunables::NodeTunables;
use crate::scenario::{
    FaultSpec, Gateway, NodeSelector, Scenario, ScenarioError, WorkloadKind, parse_net,
};
use crate::socklnd::{KSOCK_HEADER_BYTES, LNET_HEADER_BYTES, PairId, PairState, Pairs};
use crate::workload::{Ctx, DEFAULT_RPC_TIMEOUT, Plan, Wake, Workloads};

/// After the end, how long the run may go on (no new RPC starts) for what is in flight to
/// finish, so that the final checks can see every message finalized.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(600);

/// Steps at one instant before the run is declared a livelock.
pub const MAX_STEPS_PER_INSTANT: u64 = 10_000_000;
/// Size of the table of forwarded payload bytes at which entries of messages a router
/// dropped are pruned (only LNet's own payloads, ping buffers and pushes, are kept there).
const FORWARD_BYTES_PRUNE: usize = 1024;

/// How to run.
#[derive(Clone, Copy, Debug)]
pub struct RunOptions {
    pub seed: u64,
    /// Check invariants after every step (on for `run`, off for `bench` unless asked); the
    /// final checks, after the run has drained, are made either way.
    pub check_invariants: bool,
}

/// What stopped a run early.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("invariant violated at {at:?} (seed {seed}): {what}")]
    Violation { at: Time, seed: u64, what: String },
    #[error("livelock: {steps} steps at {at:?} without time advancing (seed {seed})")]
    Livelock { at: Time, steps: u64, seed: u64 },
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
}

/// An NI's place in the network.
#[derive(Clone, Copy, Debug)]
struct Endpoint {
    node: u32,
    ni: NiId,
    nid: Nid,
    down: bool,
}

/// One simulated node.
#[derive(Debug)]
struct SimNode {
    engine: Engine,
    group: u32,
    /// Endpoint of each network NI, in NI order (NI 1 first; NI 0 is loopback).
    endpoints: Vec<EndpointId>,
    /// The engine timer scheduled in the queue.
    timer: Option<Time>,
    /// The process is stopped (`node_stop`): it does nothing, and nothing reaches it.
    stopped: bool,
    /// Starts so far: a completion meant for an earlier process is dropped.
    incarnation: u32,
}

/// Something that happens at a time.
#[derive(Clone, Debug)]
enum Pending {
    Arrive {
        arrival: Arrival,
        /// The sender's completion when it waits for this frame's ZC-ACK.
        send_done: Option<u32>,
    },
    SendDone {
        node: u32,
        incarnation: u32,
        tx: TxId,
        status: HealthStatus,
        close: Option<(PairId, u32)>,
    },
    /// A parked reader was resumed: read the frames that waited behind it.
    Unblock {
        key: LaneKey,
    },
    /// A pair's connections are up (handshakes done): both LNDs tell their engines.
    ConnUp {
        pair: PairId,
        generation: u32,
    },
    Timer {
        node: u32,
    },
    Fault {
        index: u32,
    },
    /// A drop or delay rule's `until`.
    FaultEnd {
        index: u32,
    },
    Keepalive {
        pair: PairId,
    },
    Workload(Wake),
    /// A cancelled entry (a send completion replaced when its frame was lost on the way).
    Nothing,
}

/// Counters of a run.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Totals {
    /// LNet messages the engines handed their driver.
    pub lnet_messages: u64,
    /// Of which carried by the network to a peer.
    pub frames_delivered: u64,
    /// Lost to a link down or a black hole.
    pub frames_lost: u64,
    /// Refused at once (no route, partition, unknown NID).
    pub sends_refused: u64,
    /// Large sends failed for want of a ZC-ACK.
    pub zc_timeouts: u64,
    pub payload_bytes: u64,
    pub connects: u64,
    pub connection_closes: u64,
    pub keepalives: u64,
    pub retransmits: u64,
    pub queue_overflows: u64,
    pub discoveries_failed: u64,
    pub engine_calls_refused: u64,
    pub steps: u64,
    pub invariant_checks: u64,
    pub faults_applied: u64,
    /// Messages routers forwarded (their `route_count`, summed at the end).
    pub forwarded: u64,
    /// Receives the engines delayed (router credits or buffers, lazy portals, delay rules),
    /// each parking its connection's reader.
    pub receives_delayed: u64,
    /// Frames that waited unread behind a parked reader.
    pub frames_held_unread: u64,
}

/// The running simulation.
pub struct World {
    now: Time,
    end: Time,
    options: RunOptions,
    nodes: Vec<SimNode>,
    group_tunables: Vec<NodeTunables>,
    endpoints: Vec<Endpoint>,
    nid_index: HashMap<Nid, EndpointId, foldhash::fast::FixedState>,
    /// Each node's first NID (what workloads address).
    first_nids: Vec<Nid>,
    nets: Vec<Net>,
    network: Network,
    pairs: Pairs,
    /// Unordered endpoint pairs that lose everything, or refuse it.
    blackholes: HashSet<(EndpointId, EndpointId), foldhash::fast::FixedState>,
    partitions: HashSet<(EndpointId, EndpointId), foldhash::fast::FixedState>,
    faults: Vec<FaultSpec>,
    scenario: Scenario,
    queue: BinaryHeap<Reverse<(Time, u64, u32)>>,
    pending: Vec<(Pending, u32)>,
    free: Vec<u32>,
    sequence: u64,
    in_flight: u64,
    workloads: Workloads,
    checker: EventChecker,
    pub totals: Totals,
    path: Vec<LinkId>,
    back_path: Vec<LinkId>,
    events: Vec<ulnet_proto::engine::Event>,
    touched: Vec<u32>,
    steps_at_instant: u64,
    /// Per pair, the send completions waiting for a ZC-ACK (slot and slot generation), so a
    /// path reset can fail them at once.
    zc_waiting: HashMap<PairId, Vec<(u32, u32)>, foldhash::fast::FixedState>,
    /// Connection readers parked on delayed receives, and what waits behind them.
    lanes: Lanes,
    /// Payload bytes routers received (LNet's own messages), to send on with the forward.
    forward_bytes: HashMap<(u32, TxId), Box<[u8]>, foldhash::fast::FixedState>,
    /// Each group's routes, gateways resolved to NIDs.
    group_routes: Vec<Vec<RouteConfig>>,
    /// Nodes stopped now.
    stopped_nodes: u32,
}

impl std::fmt::Debug for World {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("World").field("now", &self.now).field("nodes", &self.nodes.len()).finish()
    }
}

impl World {
    /// Builds every node, link and workload of `scenario`.
    pub fn new(scenario: &Scenario, options: RunOptions) -> Result<Self, ScenarioError> {
        let invalid = |text: String| ScenarioError::Invalid(text);
        // Switches: the declared ones, then one per net for NIs that name none.
        let mut switch_names: Vec<String> =
            scenario.switches.iter().map(|s| s.name.clone()).collect();
        let mut nets: Vec<Net> = Vec::new();
        for group in &scenario.nodes {
            for ni in &group.nis {
                let net = parse_net(&ni.net)?;
                if !nets.contains(&net) {
                    nets.push(net);
                }
            }
        }
        for net in &nets {
            switch_names.push(format!("net:{net}"));
        }
        let switch_of = |name: &str| switch_names.iter().position(|s| s == name).map(|i| i as u32);
        let mut network = Network::new(switch_names.len(), options.seed ^ 0x005e_ed0f_11e7);
        let mut trunks = Vec::new();
        for trunk in &scenario.links {
            let params = trunk.link.or(scenario.defaults.link).resolve("link")?;
            let a = switch_of(&trunk.between[0])
                .ok_or_else(|| invalid("link: unknown switch".into()))?;
            let b = switch_of(&trunk.between[1])
                .ok_or_else(|| invalid("link: unknown switch".into()))?;
            let (forward, backward, from, to) = network.add_trunk(a, b, params);
            trunks.push((forward, from));
            trunks.push((backward, to));
        }
        network.compute_routes(&trunks);

        let total = scenario.node_count() as usize;
        let mut nodes = Vec::with_capacity(total);
        let mut endpoints = Vec::new();
        let mut nid_index = HashMap::with_hasher(foldhash::fast::FixedState::default());
        let mut first_nids = Vec::with_capacity(total);
        let mut group_tunables = Vec::with_capacity(scenario.nodes.len());
        for (group_index, group) in scenario.nodes.iter().enumerate() {
            let tunables = group.tunables.or(scenario.defaults.tunables).resolve(&group.name)?;
            group_tunables.push(tunables);
            // One plan per NI: its net, switch, link and rail on that net.
            let mut ni_plans = Vec::new();
            for ni in &group.nis {
                let net = parse_net(&ni.net)?;
                let params = ni.link.or(scenario.defaults.link).resolve("NI link")?;
                let switch = match &ni.switch {
                    Some(name) => switch_of(name),
                    None => switch_of(&format!("net:{net}")),
                }
                .ok_or_else(|| invalid(format!("group {:?}: unknown switch", group.name)))?;
                for rail in 0..ni.rails {
                    ni_plans.push((net, switch, params, rail));
                }
            }
            for _ in 0..group.count {
                let index = nodes.len() as u32;
                let mut nids = Vec::with_capacity(ni_plans.len());
                let mut node_endpoints = Vec::new();
                for (net, switch, params, rail) in &ni_plans {
                    let nid = Nid::new4(*net, node_address(index, *rail));
                    nids.push(nid);
                    let endpoint = network.add_port(*switch, *params);
                    endpoints.push(Endpoint { node: index, ni: NiId(0), nid, down: false });
                    nid_index.insert(nid, endpoint);
                    node_endpoints.push(endpoint);
                }
                first_nids.push(nids.first().copied().unwrap_or(Nid::ANY));
                let engine = build_engine(index, 0, &tunables, &nids)?;
                for &endpoint in &node_endpoints {
                    if let Some(entry) = endpoints.get_mut(endpoint as usize) {
                        entry.ni = engine.ni_for_nid(entry.nid).unwrap_or(NiId(0));
                    }
                }
                nodes.push(SimNode {
                    engine,
                    group: group_index as u32,
                    endpoints: node_endpoints,
                    timer: None,
                    stopped: false,
                    incarnation: 0,
                });
            }
        }

        let end = Time::ZERO + scenario.end();
        let plans = plans(scenario, end)?;
        let mut world = Self {
            now: Time::ZERO,
            end,
            options,
            checker: EventChecker::new(nodes.len(), Tracking::Strict),
            nodes,
            group_tunables,
            endpoints,
            nid_index,
            first_nids,
            nets,
            network,
            pairs: Pairs::default(),
            blackholes: HashSet::with_hasher(foldhash::fast::FixedState::default()),
            partitions: HashSet::with_hasher(foldhash::fast::FixedState::default()),
            faults: scenario.faults.clone(),
            scenario: scenario.clone(),
            queue: BinaryHeap::new(),
            pending: Vec::new(),
            free: Vec::new(),
            sequence: 0,
            in_flight: 0,
            workloads: Workloads::new(plans, scenario.sample_interval.0, end),
            totals: Totals::default(),
            path: Vec::new(),
            back_path: Vec::new(),
            events: Vec::new(),
            touched: Vec::new(),
            steps_at_instant: 0,
            zc_waiting: HashMap::with_hasher(foldhash::fast::FixedState::default()),
            lanes: Lanes::default(),
            forward_bytes: HashMap::with_hasher(foldhash::fast::FixedState::default()),
            group_routes: Vec::new(),
            stopped_nodes: 0,
        };
        world.group_routes = world.resolve_routes()?;
        for node in 0..world.nodes.len() as u32 {
            world.configure_routing(node)?;
        }
        let servers: Vec<u32> = {
            let mut list: Vec<u32> =
                world.workloads.plans.iter().flat_map(|plan| plan.servers.clone()).collect();
            list.sort_unstable();
            list.dedup();
            list
        };
        for node in servers {
            world.with_ctx(node, |workloads, ctx, _| workloads.setup_server(ctx));
        }
        for (index, fault) in world.faults.iter().enumerate() {
            let at = Time::ZERO + fault_time(fault);
            world.sequence += 1;
            let slot =
                alloc(&mut world.pending, &mut world.free, Pending::Fault { index: index as u32 });
            world.queue.push(Reverse((at, world.sequence, slot)));
            let until = match fault {
                FaultSpec::DropRule(rule) => rule.until,
                FaultSpec::DelayRule(rule) => rule.until,
                _ => None,
            };
            if let Some(until) = until {
                world.sequence += 1;
                let slot = alloc(
                    &mut world.pending,
                    &mut world.free,
                    Pending::FaultEnd { index: index as u32 },
                );
                world.queue.push(Reverse((Time::ZERO + until.0, world.sequence, slot)));
            }
        }
        world.schedule_wakes();
        Ok(world)
    }

    pub fn now(&self) -> Time {
        self.now
    }

    pub fn end(&self) -> Time {
        self.end
    }

    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    pub fn workloads(&self) -> &Workloads {
        &self.workloads
    }

    pub fn network(&self) -> &Network {
        &self.network
    }

    pub fn scenario(&self) -> &Scenario {
        &self.scenario
    }

    /// Runs to the end, calling `progress` now and then with the virtual time reached.
    pub fn run(&mut self, progress: &mut dyn FnMut(Time)) -> Result<(), RunError> {
        let mut since_progress = 0u32;
        while let Some(&Reverse((at, _, _))) = self.queue.peek() {
            if at > self.end {
                break;
            }
            self.step()?;
            since_progress += 1;
            if since_progress >= 4096 {
                since_progress = 0;
                progress(self.now);
            }
        }
        self.now = self.now.max(self.end);
        progress(self.now);
        let limit = self.end + DRAIN_LIMIT;
        while !self.quiescent() {
            match self.queue.peek() {
                Some(&Reverse((at, _, _))) if at <= limit => self.step()?,
                _ => break,
            }
        }
        self.final_checks()
    }

    /// Processes one queue entry.
    pub fn step(&mut self) -> Result<(), RunError> {
        let Some(Reverse((at, _, slot))) = self.queue.pop() else { return Ok(()) };
        if at > self.now {
            self.now = at;
            self.steps_at_instant = 0;
        }
        self.steps_at_instant += 1;
        if self.steps_at_instant > MAX_STEPS_PER_INSTANT {
            return Err(RunError::Livelock {
                at: self.now,
                steps: self.steps_at_instant,
                seed: self.options.seed,
            });
        }
        self.totals.steps += 1;
        let entry = take(&mut self.pending, &mut self.free, slot);
        match entry {
            Pending::Arrive { arrival, send_done } => {
                self.in_flight -= 1;
                self.arrive(arrival, send_done);
            }
            Pending::SendDone { node, incarnation, tx, status, close } => {
                self.in_flight -= 1;
                if let Some((pair, generation)) = close {
                    if self.pairs.get(pair).is_some_and(|p| p.generation == generation) {
                        let closer = self.end_of(pair, node);
                        self.close_pair(pair, closer);
                    }
                }
                let now = self.now;
                // A completion for a process that has stopped since goes nowhere.
                let live = self
                    .nodes
                    .get(node as usize)
                    .is_some_and(|sim| !sim.stopped && sim.incarnation == incarnation);
                if let Some(sim) = self.nodes.get_mut(node as usize).filter(|_| live) {
                    if let Err(error) = sim.engine.handle_send_done(now, tx, status) {
                        return Err(self
                            .violation(format!("node {node} refused a send completion: {error}")));
                    }
                    self.drain(node);
                }
            }
            Pending::Unblock { key } => self.unblock(key),
            Pending::ConnUp { pair, generation } => {
                if let Some(entry) =
                    self.pairs.get_mut(pair).filter(|p| p.generation == generation && !p.announced)
                {
                    entry.announced = true;
                    let ends = entry.ends;
                    self.notify_connection(ends[0], ends[1], true);
                    self.notify_connection(ends[1], ends[0], true);
                }
            }
            Pending::Timer { node } => {
                let now = self.now;
                if let Some(sim) = self.nodes.get_mut(node as usize) {
                    if sim.timer == Some(at) && !sim.stopped {
                        sim.timer = None;
                        if sim.engine.poll_timeout().is_some_and(|deadline| deadline <= now) {
                            sim.engine.handle_timeout(now);
                        }
                        self.drain(node);
                    }
                }
            }
            Pending::Fault { index } => self.apply_fault(index as usize)?,
            Pending::FaultEnd { index } => self.end_fault(index as usize)?,
            Pending::Keepalive { pair } => self.keepalive(pair),
            Pending::Workload(wake) => self.wake(wake),
            Pending::Nothing => {}
        }
        self.schedule_wakes();
        self.check_touched()
    }

    // ------------------------------------------------------------------ driving a node

    /// Runs `call` with node `node`'s context, then drains the node.
    fn with_ctx(&mut self, node: u32, call: impl FnOnce(&mut Workloads, &mut Ctx<'_>, &[Nid])) {
        let now = self.now;
        let Some(sim) = self.nodes.get_mut(node as usize) else { return };
        let mut ctx = Ctx { engine: &mut sim.engine, checker: &mut self.checker, now, node };
        call(&mut self.workloads, &mut ctx, &self.first_nids);
        self.drain(node);
    }

    /// Carries out everything node `node` wants done, until it wants nothing more.
    fn drain(&mut self, node: u32) {
        let now = self.now;
        if self.stopped_nodes > 0 && self.nodes.get(node as usize).is_some_and(|n| n.stopped) {
            return;
        }
        loop {
            let mut progressed = false;
            // Resets first, as the TCP driver does: a probe of the path comes after them.
            while let Some(reset) =
                self.nodes.get_mut(node as usize).and_then(|n| n.engine.poll_path_reset())
            {
                progressed = true;
                self.reset_path(node, reset);
            }
            while let Some(transmit) =
                self.nodes.get_mut(node as usize).and_then(|n| n.engine.poll_transmit())
            {
                progressed = true;
                self.transmit(node, transmit);
            }
            while let Some(resume) =
                self.nodes.get_mut(node as usize).and_then(|n| n.engine.poll_resume())
            {
                progressed = true;
                self.resume(node, resume);
            }
            let Some(sim) = self.nodes.get_mut(node as usize) else { return };
            while let Some(event) = sim.engine.poll_event() {
                self.events.push(event);
            }
            while let Some(completion) = sim.engine.poll_completion() {
                if let PingCompletion::Discovery(result) = completion {
                    if result.outcome.is_err() {
                        self.totals.discoveries_failed += 1;
                    }
                }
            }
            if !self.events.is_empty() {
                progressed = true;
                let events = std::mem::take(&mut self.events);
                let mut ctx =
                    Ctx { engine: &mut sim.engine, checker: &mut self.checker, now, node };
                for event in &events {
                    if let Err(violation) = ctx.checker.record(node as usize, event) {
                        self.workloads.violation.get_or_insert(violation.to_string());
                        continue;
                    }
                    self.workloads.on_event(&mut ctx, event, &self.first_nids);
                }
                self.events = events;
                self.events.clear();
            }
            if !progressed {
                break;
            }
        }
        if let Some(sim) = self.nodes.get_mut(node as usize) {
            // Only an earlier deadline needs a new queue entry: a later one is picked up when
            // the scheduled entry fires and finds nothing due yet.
            let deadline = sim.engine.poll_timeout().map(|t| t.max(now));
            if let Some(at) =
                deadline.filter(|at| sim.timer.is_none_or(|scheduled| *at < scheduled))
            {
                sim.timer = Some(at);
                self.sequence += 1;
                let slot = alloc(&mut self.pending, &mut self.free, Pending::Timer { node });
                self.queue.push(Reverse((at, self.sequence, slot)));
            }
        }
        if self.options.check_invariants && self.touched.last() != Some(&node) {
            self.touched.push(node);
        }
    }

    /// A delayed receive whose connection closed before it could be read.
    fn receive_failed(&mut self, node: u32, rx: RxId) {
        let now = self.now;
        if let Some(sim) = self.nodes.get_mut(node as usize) {
            if let Err(error) = sim.engine.handle_recv_done(now, rx, HealthStatus::RemoteDropped) {
                self.workloads
                    .violation
                    .get_or_insert(format!("node {node} refused a receive failure: {error}"));
            }
        }
    }

    fn receive_done(&mut self, node: u32, rx: ulnet_proto::engine::RxId) {
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
    fn arrive(&mut self, arrival: Arrival, send_done: Option<u32>) {
        let from_endpoint = self.nid_index.get(&arrival.from).copied();
        let to_endpoint = self
            .nodes
            .get(arrival.node as usize)
            .and_then(|n| n.endpoints.get(usize::from(arrival.ni.0).saturating_sub(1)))
            .copied();
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
    fn read_frame(&mut self, arrival: Arrival, completion: Completion) {
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
    fn resume(&mut self, node: u32, resume: ulnet_proto::engine::Resume) {
        let Some(resumed) = self.lanes.resume(node, resume.rx) else {
            // Not parked by this driver (never in practice): complete it as read.
            if let RecvAction::Deliver { rx, .. } = resume.action {
                self.receive_done(node, rx);
            }
            return;
        };
        self.in_flight -= 1;
        if resumed.closed {
            // The connection closed meanwhile: its payload is gone (the TCP LND's answer).
            if let RecvAction::Deliver { rx, .. } = resume.action {
                self.receive_failed(node, rx);
            }
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
    fn unblock(&mut self, key: LaneKey) {
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

    /// Takes a scheduled ZC completion out of the queue, to let it go when the payload is read.
    fn hold_completion(&mut self, slot: Option<u32>, back: Duration) -> Option<Held> {
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
    fn release_completion(&mut self, completion: Completion) {
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
    fn fail_held(&mut self, held: Vec<Held>) {
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
    fn place_payload(&mut self, node: u32, rx: RxId, bytes: Option<Box<[u8]>>, routed: bool) {
        let Some(bytes) = bytes else { return };
        if routed {
            if self.forward_bytes.len() >= FORWARD_BYTES_PRUNE
                && self.forward_bytes.len().is_power_of_two()
            {
                let nodes = &self.nodes;
                self.forward_bytes.retain(|(node, tx), _| {
                    nodes.get(*node as usize).is_some_and(|sim| {
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
    fn is_local(&self, node: u32, nid: Nid) -> bool {
        self.nid_index
            .get(&nid)
            .and_then(|e| self.endpoints.get(*e as usize))
            .is_some_and(|e| e.node == node)
    }

    /// Replaces the pending completion `slot` (a large send waiting for its ZC-ACK) of a
    /// frame lost in flight by a failure after `sock_timeout`.
    fn fail_pending_send(&mut self, slot: Option<u32>, pair: PairId) {
        let Some(slot) = slot else { return };
        let Some((entry, _)) = self.pending.get_mut(slot as usize) else { return };
        let Pending::SendDone { node, incarnation, tx, status: HealthStatus::Ok, close: None } =
            *entry
        else {
            return;
        };
        *entry = Pending::Nothing;
        self.in_flight -= 1;
        let timeout = self.sock_params(node).sock_timeout;
        let generation = self.pairs.get(pair).map_or(0, |p| p.generation);
        self.totals.zc_timeouts += 1;
        let close = Some((pair, generation));
        let status = HealthStatus::LocalTimeout;
        let done = Pending::SendDone { node, incarnation, tx, status, close };
        self.schedule(self.now + timeout, done);
    }

    /// Hands a transmit to the modelled socklnd and network.
    fn transmit(&mut self, node: u32, transmit: Transmit) {
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
                self.sequence += 1;
                let up = Pending::ConnUp { pair: posting.pair, generation };
                let slot = alloc(&mut self.pending, &mut self.free, up);
                self.queue.push(Reverse((posting.start, self.sequence, slot)));
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
        let transit =
            self.network.transmit(posting.start, &path, bytes, posting.min_first_hop, rtt);
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

    fn wait_for_zc_ack(&mut self, pair: PairId, slot: u32) {
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
    fn reset_path(&mut self, node: u32, reset: ulnet_proto::engine::PathReset) {
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
    fn reset_pair(&mut self, pair: PairId, closer: EndpointId) {
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
            if !still_waiting(&self.pending, slot, generation) {
                continue;
            }
            let Some((entry, _)) = self.pending.get_mut(slot as usize) else { continue };
            let Pending::SendDone { node, incarnation, tx, .. } = *entry else { continue };
            *entry = Pending::Nothing;
            self.in_flight -= 1;
            let status = HealthStatus::RemoteDropped;
            let done = Pending::SendDone { node, incarnation, tx, status, close: None };
            self.schedule(self.now, done);
        }
    }

    /// Closes a pair's connections, at `closer`'s end (or both ends, timing out together):
    /// what waited unread on them is lost, and the sends whose ZC-ACK waited with it fail.
    /// Connections that had come up are reported gone by the closer's LND, and by the other
    /// end's when the close reaches it (no link down or black hole between them).
    fn close_pair(&mut self, pair: PairId, closer: Option<EndpointId>) {
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
        self.in_flight -= dropped.frames;
        self.totals.frames_lost += dropped.frames;
        self.fail_held(dropped.held);
    }

    /// `end`'s LND tells its engine that its connections to `other` came up or all went
    /// (`lnet_notify`, which sets a gateway NI's status), as the TCP LND does.
    fn notify_connection(&mut self, end: EndpointId, other: EndpointId, up: bool) {
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
    fn end_of(&self, pair: PairId, node: u32) -> Option<EndpointId> {
        let ends = self.pairs.get(pair)?.ends;
        ends.into_iter().find(|e| self.endpoints.get(*e as usize).is_some_and(|e| e.node == node))
    }

    /// Whether nothing gets through between two endpoints (a link down, a black hole): a
    /// stopped process's host still answers, so it does not count.
    fn path_dark(&self, a: EndpointId, b: EndpointId) -> bool {
        let down = |e: EndpointId| self.endpoints.get(e as usize).is_some_and(|e| e.down);
        down(a)
            || down(b)
            || (!self.blackholes.is_empty() && self.blackholes.contains(&(a.min(b), a.max(b))))
    }

    /// The bytes of a transmit's payload: a forward's are those its router received; none
    /// for a workload's shared buffer.
    fn payload_bytes(&mut self, node: u32, transmit: &Transmit) -> Option<Box<[u8]>> {
        if transmit.header.payload_length == 0 {
            return None;
        }
        if !self.is_local(node, transmit.header.src_nid) {
            // A forward: never copied out of the router buffer, which holds nothing written.
            return self.forward_bytes.remove(&(node, transmit.tx));
        }
        let sim = self.nodes.get(node as usize)?;
        let mut slices = sim.engine.tx_payload(transmit.tx).ok()?.peekable();
        let first = slices.peek()?;
        if self.workloads.is_virtual(first.as_ptr()) {
            return None;
        }
        Some(slices.flat_map(|slice| slice.iter().copied()).collect())
    }

    /// Whether frames between two endpoints are lost (a link down, a black hole).
    fn is_cut(&self, a: EndpointId, b: EndpointId) -> bool {
        self.path_dark(a, b) || self.endpoint_stopped(a) || self.endpoint_stopped(b)
    }

    /// Whether the node owning `endpoint` is stopped.
    fn endpoint_stopped(&self, endpoint: EndpointId) -> bool {
        self.stopped_nodes > 0
            && self
                .endpoints
                .get(endpoint as usize)
                .and_then(|e| self.nodes.get(e.node as usize))
                .is_some_and(|n| n.stopped)
    }

    fn sock_params(&self, node: u32) -> crate::scenario::tunables::SockParams {
        let group = self.nodes.get(node as usize).map_or(0, |n| n.group);
        self.group_tunables
            .get(group as usize)
            .map_or(crate::scenario::tunables::FALLBACK_SOCK, |t| t.sock)
    }

    /// Queues `entry` at `at`; returns its slot.
    fn schedule(&mut self, at: Time, entry: Pending) -> u32 {
        if matches!(entry, Pending::Arrive { .. } | Pending::SendDone { .. } | Pending::Nothing) {
            self.in_flight += 1;
        }
        self.sequence += 1;
        let slot = alloc(&mut self.pending, &mut self.free, entry);
        self.queue.push(Reverse((at, self.sequence, slot)));
        slot
    }

    // ------------------------------------------------------------------ keepalive

    fn arm_keepalive(&mut self, pair: PairId, at: Time) {
        let armed = self.pairs.get(pair).is_some_and(|p| p.keepalive_armed);
        if !armed {
            if let Some(entry) = self.pairs.get_mut(pair) {
                entry.keepalive_armed = true;
            }
            self.sequence += 1;
            let slot = alloc(&mut self.pending, &mut self.free, Pending::Keepalive { pair });
            self.queue.push(Reverse((at, self.sequence, slot)));
        }
    }

    /// A pair's keepalive timer: silent for `keepalive`, it sends a NOOP each way; silent
    /// for `keepalive` plus `sock_timeout`, it closes.
    fn keepalive(&mut self, pair_id: PairId) {
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

    // ------------------------------------------------------------------ faults and wakes

    fn apply_fault(&mut self, index: usize) -> Result<(), RunError> {
        let Some(fault) = self.faults.get(index).cloned() else { return Ok(()) };
        self.totals.faults_applied += 1;
        let now = self.now;
        match fault {
            FaultSpec::LinkDown(spec) | FaultSpec::LinkUp(spec) => {
                let down = matches!(self.faults.get(index), Some(FaultSpec::LinkDown(_)));
                let net = parse_net(&spec.net)?;
                for node in self.select(&spec.node)? {
                    let Some(endpoint) = self.endpoint_on(node, net) else { continue };
                    let (ni, _) = match self.endpoints.get_mut(endpoint as usize) {
                        Some(entry) => {
                            entry.down = down;
                            (entry.ni, entry.nid)
                        }
                        None => continue,
                    };
                    if let Some(sim) = self.nodes.get_mut(node as usize) {
                        // The OS reports the link: the driver raises the NI's fatal flag.
                        let _ = sim.engine.set_ni_fatal(now, ni, down);
                    }
                    self.drain(node);
                }
            }
            FaultSpec::Blackhole(spec) | FaultSpec::Partition(spec) | FaultSpec::Heal(spec) => {
                let kind = match self.faults.get(index) {
                    Some(FaultSpec::Blackhole(_)) => 0,
                    Some(FaultSpec::Partition(_)) => 1,
                    _ => 2,
                };
                let net = spec.net.as_deref().map(parse_net).transpose()?;
                let left = self.select(&spec.between[0])?;
                let right = self.select(&spec.between[1])?;
                for &a in &left {
                    for &b in &right {
                        for (x, y) in self.endpoint_pairs(a, b, net) {
                            let key = (x.min(y), x.max(y));
                            match kind {
                                0 => {
                                    self.blackholes.insert(key);
                                }
                                1 => {
                                    self.partitions.insert(key);
                                }
                                _ => {
                                    self.blackholes.remove(&key);
                                    self.partitions.remove(&key);
                                }
                            }
                        }
                    }
                }
            }
            FaultSpec::DropRule(spec) => {
                for node in self.select(&spec.node)? {
                    let matching = self.fault_match(&spec.source, &spec.destination)?;
                    let rule = DropRule {
                        matching,
                        rate: spec.rate,
                        interval: spec.interval,
                        health_mask: 0,
                        random: false,
                        drop_all: spec.all,
                    };
                    if let Some(sim) = self.nodes.get_mut(node as usize) {
                        if let Err(error) = sim.engine.fault_drop_add(now, rule) {
                            return Err(RunError::Scenario(ScenarioError::Invalid(format!(
                                "drop_rule: {error}"
                            ))));
                        }
                    }
                    self.drain(node);
                }
            }
            FaultSpec::DelayRule(spec) => {
                for node in self.select(&spec.node)? {
                    let matching = self.fault_match(&spec.source, &spec.destination)?;
                    let rule = DelayRule {
                        matching,
                        rate: spec.rate,
                        interval: spec.interval,
                        latency: spec.latency,
                    };
                    if let Some(sim) = self.nodes.get_mut(node as usize) {
                        if let Err(error) = sim.engine.fault_delay_add(now, rule) {
                            return Err(RunError::Scenario(ScenarioError::Invalid(format!(
                                "delay_rule: {error}"
                            ))));
                        }
                    }
                    self.drain(node);
                }
            }
            FaultSpec::NodeDown(spec) | FaultSpec::NodeUp(spec) => {
                let down = matches!(self.faults.get(index), Some(FaultSpec::NodeDown(_)));
                for node in self.select(&spec.node)? {
                    self.set_node_links(node, down);
                }
            }
            FaultSpec::NodeStop(spec) => {
                for node in self.select(&spec.node)? {
                    self.stop_node(node);
                }
            }
            FaultSpec::NodeStart(spec) => {
                for node in self.select(&spec.node)? {
                    self.start_node(node)?;
                }
            }
        }
        Ok(())
    }

    /// Every NI of `node` loses its link (`down`) or gets it back; the node is told, as
    /// netlink would tell it.
    fn set_node_links(&mut self, node: u32, down: bool) {
        let now = self.now;
        let endpoints = self.nodes.get(node as usize).map(|n| n.endpoints.clone());
        for endpoint in endpoints.unwrap_or_default() {
            let Some(entry) = self.endpoints.get_mut(endpoint as usize) else { continue };
            entry.down = down;
            let ni = entry.ni;
            if let Some(sim) = self.nodes.get_mut(node as usize).filter(|n| !n.stopped) {
                let _ = sim.engine.set_ni_fatal(now, ni, down);
            }
        }
        if !self.nodes.get(node as usize).is_some_and(|n| n.stopped) {
            self.drain(node);
        }
    }

    /// `node`'s process stops: it does nothing more, what it was reading is lost, and its
    /// connections are reset, which each peer's LND reports to its engine (`lnet_notify`).
    fn stop_node(&mut self, node: u32) {
        let Some(sim) = self.nodes.get_mut(node as usize).filter(|n| !n.stopped) else { return };
        sim.stopped = true;
        sim.timer = None;
        let endpoints = sim.endpoints.clone();
        self.stopped_nodes += 1;
        let dropped = self.lanes.forget_node(node);
        self.in_flight -= dropped.parked + dropped.frames;
        self.totals.frames_lost += dropped.frames;
        self.fail_held(dropped.held);
        self.forward_bytes.retain(|(owner, _), _| *owner != node);
        // The resets reach the peers at once; their LNDs report the connections gone.
        for endpoint in endpoints {
            let pairs: Vec<PairId> = self.pairs.pairs_of(endpoint).collect();
            for pair in pairs {
                self.reset_pair(pair, endpoint);
            }
        }
    }

    /// A stopped node starts again: a fresh engine (a new process) with its group's
    /// configuration; NIs whose link is down are reported so.
    fn start_node(&mut self, node: u32) -> Result<(), RunError> {
        let now = self.now;
        let Some(sim) = self.nodes.get(node as usize).filter(|n| n.stopped) else { return Ok(()) };
        let incarnation = sim.incarnation + 1;
        let tunables = self
            .group_tunables
            .get(sim.group as usize)
            .copied()
            .ok_or_else(|| self.violation(format!("node {node} has no group")))?;
        let links: Vec<(Nid, bool)> = sim
            .endpoints
            .iter()
            .filter_map(|e| self.endpoints.get(*e as usize))
            .map(|e| (e.nid, e.down))
            .collect();
        let nids: Vec<Nid> = links.iter().map(|(nid, _)| *nid).collect();
        let mut engine = build_engine(node, incarnation, &tunables, &nids)?;
        for (nid, down) in links {
            if let Some(ni) = engine.ni_for_nid(nid).filter(|_| down) {
                let _ = engine.set_ni_fatal(now, ni, true);
            }
        }
        if let Some(sim) = self.nodes.get_mut(node as usize) {
            sim.engine = engine;
            sim.stopped = false;
            sim.incarnation = incarnation;
            sim.timer = None;
        }
        self.stopped_nodes -= 1;
        self.configure_routing(node)?;
        self.drain(node);
        Ok(())
    }

    /// Each group's routes with their gateways resolved: a NID as written, or each selected
    /// node's NID on the `@` net, else on the first net of the group it has.
    fn resolve_routes(&self) -> Result<Vec<Vec<RouteConfig>>, ScenarioError> {
        let mut all = Vec::with_capacity(self.scenario.nodes.len());
        for group in &self.scenario.nodes {
            let group_nets: Vec<Net> =
                group.nis.iter().map(|ni| parse_net(&ni.net)).collect::<Result<_, _>>()?;
            let mut routes = Vec::new();
            for route in &group.routes {
                let net = parse_net(&route.net)?;
                let config = |gateway| RouteConfig {
                    net,
                    gateway,
                    hops: route.hops,
                    priority: route.priority,
                };
                match Gateway::parse(&route.gateway)? {
                    Gateway::Nid(nid) => routes.push(config(nid)),
                    Gateway::Nodes { selector, net: on } => {
                        let text = match selector.range {
                            Some((low, high)) => format!("{}[{low}-{high}]", selector.group),
                            None => selector.group.clone(),
                        };
                        for gateway in self.select(&text)? {
                            let nid = group_nets
                                .iter()
                                .filter(|net| on.is_none_or(|on| on == **net))
                                .find_map(|net| self.endpoint_on(gateway, *net))
                                .and_then(|e| self.endpoints.get(e as usize))
                                .map(|e| e.nid)
                                .ok_or_else(|| {
                                    ScenarioError::Invalid(format!(
                                        "group {:?}: route to {}: gateway node {gateway} shares \
                                         no net with the group",
                                        group.name, route.net
                                    ))
                                })?;
                            routes.push(config(nid));
                        }
                    }
                }
            }
            all.push(routes);
        }
        Ok(all)
    }

    /// Router buffers, routing and routes on `node`, as its group says (`lnetctl set
    /// *_buffers`, `set routing 1`, `route add`).
    fn configure_routing(&mut self, node: u32) -> Result<(), ScenarioError> {
        let now = self.now;
        let Some(sim) = self.nodes.get_mut(node as usize) else { return Ok(()) };
        let group = sim.group as usize;
        let Some(spec) = self.scenario.nodes.get(group) else { return Ok(()) };
        let buffers = self.group_tunables.get(group).map_or([0; 3], |t| t.router_buffers);
        let mut configured = false;
        for (class, count) in BufferClass::ALL.into_iter().zip(buffers) {
            if count > 0 {
                sim.engine.set_router_buffers(now, class, count);
                configured = true;
            }
        }
        if spec.routing {
            sim.engine.set_routing(now, true, true).map_err(|error| {
                ScenarioError::Invalid(format!("group {:?}: routing: {error}", spec.name))
            })?;
            configured = true;
        }
        for route in self.group_routes.get(group).map_or(&[][..], Vec::as_slice) {
            sim.engine.route_add(now, *route).map_err(|error| {
                ScenarioError::Invalid(format!(
                    "group {:?}: route to {} through {}: {error}",
                    spec.name, route.net, route.gateway
                ))
            })?;
            configured = true;
        }
        if configured {
            self.drain(node);
        }
        Ok(())
    }

    /// Removes a drop or delay rule at its `until` (`lnetctl fault drop del`).
    fn end_fault(&mut self, index: usize) -> Result<(), RunError> {
        let Some(fault) = self.faults.get(index).cloned() else { return Ok(()) };
        let now = self.now;
        let (node, source, destination, drop) = match &fault {
            FaultSpec::DropRule(rule) => (&rule.node, &rule.source, &rule.destination, true),
            FaultSpec::DelayRule(rule) => (&rule.node, &rule.source, &rule.destination, false),
            _ => return Ok(()),
        };
        let matching = self.fault_match(source, destination)?;
        for node in self.select(node)? {
            if let Some(sim) = self.nodes.get_mut(node as usize) {
                if drop {
                    sim.engine.fault_drop_del(matching.source, matching.destination);
                } else {
                    // Held messages are released as the kernel's `fault delay del` does.
                    sim.engine.fault_delay_del(now, matching.source, matching.destination);
                }
            }
            self.drain(node);
        }
        Ok(())
    }

    /// The nodes a selector names.
    fn select(&self, text: &str) -> Result<Vec<u32>, ScenarioError> {
        let selector = NodeSelector::parse(text)?;
        let mut first = 0u64;
        for group in &self.scenario.nodes {
            if group.name == selector.group {
                let (low, high) = selector.range.unwrap_or((0, group.count.saturating_sub(1)));
                return Ok((first + low..=first + high).map(|n| n as u32).collect());
            }
            first += group.count;
        }
        Err(ScenarioError::Select(crate::scenario::SelectError::UnknownGroup(selector.group)))
    }

    fn endpoint_on(&self, node: u32, net: Net) -> Option<EndpointId> {
        let sim = self.nodes.get(node as usize)?;
        sim.endpoints
            .iter()
            .copied()
            .find(|e| self.endpoints.get(*e as usize).is_some_and(|e| e.nid.net() == net))
    }

    fn endpoint_pairs(&self, a: u32, b: u32, net: Option<Net>) -> Vec<(EndpointId, EndpointId)> {
        let mut pairs = Vec::new();
        let nets: Vec<Net> = match net {
            Some(net) => vec![net],
            None => self.nets.clone(),
        };
        for net in nets {
            if let (Some(x), Some(y)) = (self.endpoint_on(a, net), self.endpoint_on(b, net)) {
                pairs.push((x, y));
            }
        }
        pairs
    }

    /// A fault rule's NIDs: `*`, a NID, or a selector naming one node (its first NID).
    fn fault_match(&self, source: &str, destination: &str) -> Result<FaultMatch, ScenarioError> {
        let nid = |text: &str| -> Result<Nid, ScenarioError> {
            if text == "*" {
                return Ok(Nid::ANY);
            }
            if let Ok(nid) = text.parse::<Nid>() {
                return Ok(nid);
            }
            let nodes = self.select(text)?;
            match nodes.as_slice() {
                [node] => Ok(self.first_nids.get(*node as usize).copied().unwrap_or(Nid::ANY)),
                _ => Err(ScenarioError::Invalid(format!(
                    "fault rule: {text:?} names more than one node"
                ))),
            }
        };
        Ok(FaultMatch {
            source: nid(source)?,
            destination: nid(destination)?,
            local_nid: Nid::ANY,
            portal_mask: 0,
            message_mask: 0,
        })
    }

    fn wake(&mut self, wake: Wake) {
        match wake {
            Wake::Start { workload } => {
                let slots: Vec<(u32, u32)> = self.workloads.slots(workload).collect();
                for (client, slot) in slots {
                    self.with_ctx(client, |workloads, ctx, nids| {
                        workloads.start_rpc(ctx, workload, slot, nids)
                    });
                }
            }
            Wake::SlotTimer { workload, node, slot } => {
                self.with_ctx(node, |workloads, ctx, nids| {
                    workloads.on_slot_timer(ctx, workload, slot, nids)
                });
            }
            Wake::Restart { workload, node, slot } => {
                self.with_ctx(node, |workloads, ctx, nids| {
                    workloads.restart(ctx, workload, slot, nids)
                });
            }
        }
    }

    fn schedule_wakes(&mut self) {
        let wakes = std::mem::take(&mut self.workloads.wakes);
        for (at, wake) in &wakes {
            self.sequence += 1;
            let slot = alloc(&mut self.pending, &mut self.free, Pending::Workload(*wake));
            self.queue.push(Reverse((*at, self.sequence, slot)));
        }
        self.workloads.wakes = wakes;
        self.workloads.wakes.clear();
    }

    // ------------------------------------------------------------------ checks

    fn check_touched(&mut self) -> Result<(), RunError> {
        if let Some(what) = self.workloads.violation.take() {
            return Err(self.violation(what));
        }
        if !self.options.check_invariants {
            self.touched.clear();
            return Ok(());
        }
        let touched = std::mem::take(&mut self.touched);
        for &node in &touched {
            self.totals.invariant_checks += 1;
            if let Some(sim) = self.nodes.get(node as usize) {
                if let Err(what) = sim.engine.check_invariants() {
                    return Err(self.violation(format!("node {node}: {what}")));
                }
            }
        }
        self.touched = touched;
        self.touched.clear();
        Ok(())
    }

    /// At the end: every node's invariants, and, when nothing is left in flight, that every
    /// message was finalized and every PUT/GET had its SEND event.
    fn final_checks(&mut self) -> Result<(), RunError> {
        self.totals.connects = self.pairs.connects;
        self.totals.connection_closes = self.pairs.closes;
        self.totals.retransmits = self.network.retransmits;
        self.totals.queue_overflows = self.network.queue_overflows;
        self.totals.engine_calls_refused = self.workloads.refused;
        self.totals.forwarded = self.nodes.iter().map(|n| n.engine.stats().route_count).sum();
        for (index, sim) in self.nodes.iter().enumerate() {
            if let Err(what) = sim.engine.check_invariants() {
                return Err(self.violation(format!("node {index}: {what}")));
            }
        }
        if self.quiescent() {
            // A stopped process is frozen as it was, messages in flight included.
            for (index, sim) in self.nodes.iter().enumerate().filter(|(_, n)| !n.stopped) {
                if let Err(violation) = self.checker.check_quiescent(index, &sim.engine) {
                    return Err(self.violation(violation.to_string()));
                }
            }
        }
        Ok(())
    }

    /// Sizes of the simulator's own tables: queue entries, pending slots, tracked MDs,
    /// live RPC records (for the bench's memory figures).
    pub fn table_sizes(&self) -> [usize; 4] {
        [self.queue.len(), self.pending.len(), self.checker.tracked(), self.workloads.live_rpcs()]
    }

    /// What is still in flight: frames and send completions, client RPCs, RPC records.
    pub fn in_flight(&self) -> (u64, u64, usize) {
        (self.in_flight, self.workloads.outstanding, self.workloads.live_rpcs())
    }

    /// Whether anything is left to happen before the end.
    pub fn has_work(&self) -> bool {
        self.queue.peek().is_some_and(|Reverse((at, _, _))| *at <= self.end)
    }

    /// Nothing in flight: no frame, no send completion, no RPC.
    pub fn quiescent(&self) -> bool {
        self.in_flight == 0 && self.workloads.outstanding == 0 && self.workloads.live_rpcs() == 0
    }

    fn violation(&self, what: String) -> RunError {
        RunError::Violation { at: self.now, seed: self.options.seed, what }
    }

    /// Node `index`'s engine.
    pub fn engine(&self, index: usize) -> Option<&Engine> {
        self.nodes.get(index).map(|n| &n.engine)
    }
}

/// A read frame's sender completion: still in the queue (at its ZC-ACK's time), or held
/// while the frame waited unread.
#[derive(Clone, Copy, Debug)]
enum Completion {
    Scheduled(Option<u32>),
    Held(Option<Held>),
}

/// Whether pending `slot` still holds the successful send completion it got at `generation`.
fn still_waiting(pending: &[(Pending, u32)], slot: u32, generation: u32) -> bool {
    pending.get(slot as usize).is_some_and(|(entry, current)| {
        *current == generation
            && matches!(entry, Pending::SendDone { status: HealthStatus::Ok, close: None, .. })
    })
}

/// Reads `bytes` into a `Deliver` receive's MD, as a socket driver would.
fn fill(engine: &mut Engine, rx: ulnet_proto::engine::RxId, bytes: &[u8]) {
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

/// Node `index`'s address on rail `rail` of a net: `10.0.0.0 + (rail << 20) + index + 1`
/// (the scenario bounds keep both fields apart: nodes below 2^20, rails below 16).
fn node_address(index: u32, rail: u32) -> u32 {
    (10u32 << 24) | (rail << 20) | (index + 1)
}

/// A node's engine: its NIs on `nids`, its group's tunables. A restarted node (`incarnation`
/// above 0) gets a new interface cookie, as a new process would.
fn build_engine(
    index: u32,
    incarnation: u32,
    tunables: &NodeTunables,
    nids: &[Nid],
) -> Result<Engine, ScenarioError> {
    let nis = nids
        .iter()
        .map(|nid| NiConfig {
            tunables: tunables.net,
            lnd_timeout: Some(tunables.sock.sock_timeout),
            ..NiConfig::new(*nid, LndKind::Fabric)
        })
        .collect();
    let config = EngineConfig {
        interface_cookie: 0x5100_0000_0000 + u64::from(index) + (u64::from(incarnation) << 24),
        pid: LNET_PID_LUSTRE,
        tunables: tunables.engine,
        nis,
        limits: ulnet_proto::engine::Limits::default(),
    };
    Engine::new(config).map_err(|error| ScenarioError::Invalid(format!("node {index}: {error}")))
}

fn alloc(pending: &mut Vec<(Pending, u32)>, free: &mut Vec<u32>, entry: Pending) -> u32 {
    match free.pop() {
        Some(slot) => {
            if let Some(place) = pending.get_mut(slot as usize) {
                place.0 = entry;
                place.1 = place.1.wrapping_add(1);
            }
            slot
        }
        None => {
            pending.push((entry, 0));
            (pending.len() - 1) as u32
        }
    }
}

fn take(pending: &mut [(Pending, u32)], free: &mut Vec<u32>, slot: u32) -> Pending {
    free.push(slot);
    pending
        .get_mut(slot as usize)
        .map_or(Pending::Nothing, |place| std::mem::replace(&mut place.0, Pending::Nothing))
}

fn fault_time(fault: &FaultSpec) -> Duration {
    match fault {
        FaultSpec::LinkDown(spec) | FaultSpec::LinkUp(spec) => spec.at.0,
        FaultSpec::Blackhole(spec) | FaultSpec::Partition(spec) | FaultSpec::Heal(spec) => {
            spec.at.0
        }
        FaultSpec::DropRule(spec) => spec.at.0,
        FaultSpec::DelayRule(spec) => spec.at.0,
        FaultSpec::NodeDown(spec)
        | FaultSpec::NodeUp(spec)
        | FaultSpec::NodeStop(spec)
        | FaultSpec::NodeStart(spec) => spec.at.0,
    }
}

/// Each workload resolved to node indices.
fn plans(scenario: &Scenario, end: Time) -> Result<Vec<Plan>, ScenarioError> {
    let mut group_start = HashMap::new();
    let mut first = 0u64;
    for group in &scenario.nodes {
        group_start.insert(group.name.clone(), (first, group.count));
        first += group.count;
    }
    let range = |text: &str| -> Result<std::ops::Range<u32>, ScenarioError> {
        let selector = NodeSelector::parse(text)?;
        let (start, count) = *group_start
            .get(&selector.group)
            .ok_or_else(|| crate::scenario::SelectError::UnknownGroup(selector.group.clone()))?;
        let (low, high) = selector.range.unwrap_or((0, count.saturating_sub(1)));
        Ok((start + low) as u32..(start + high + 1) as u32)
    };
    let mut plans = Vec::new();
    for (index, spec) in scenario.workloads.iter().enumerate() {
        let (kind, workload) = spec.parts();
        let clients = range(&workload.clients)?;
        let servers = range(&workload.servers)?;
        let per_client =
            workload.servers_per_client.unwrap_or(u32::MAX).min(servers.len() as u32).max(1);
        let (bulk_len, bulks) = match kind {
            WorkloadKind::Ping => (0, 0),
            WorkloadKind::Brw => (workload.size.map_or(0, |s| s.0) as u32, 1),
            WorkloadKind::RpcStream => {
                let size = workload.rpc_size.map_or(0, |s| s.0);
                let bulks = size.div_ceil(crate::scenario::MAX_BULK).max(1);
                (size.div_ceil(bulks) as u32, bulks as u8)
            }
        };
        let depth = match kind {
            WorkloadKind::RpcStream => workload.max_rpcs_in_flight.unwrap_or(1),
            _ => workload.concurrency.unwrap_or(1),
        };
        plans.push(Plan {
            label: spec.label(index),
            kind,
            op: workload.op.unwrap_or(crate::scenario::Operation::Write),
            bulk_len,
            bulks,
            clients,
            servers,
            per_client,
            shift: workload.shift,
            depth,
            start: Time::ZERO + workload.start.0,
            stop: workload.stop.map_or(end, |stop| Time::ZERO + stop.0),
            rpc_timeout: workload.rpc_timeout.map_or(DEFAULT_RPC_TIMEOUT, |t| t.0),
        });
    }
    Ok(plans)
}
