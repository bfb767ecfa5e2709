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
//!
//! Here: the world, its queue, a step, a node's drain and the checks. `receive` carries frames
//! into the engines, `connections` is the modelled socklnd's side (transmits, completions,
//! closes, keepalives), `faults` the timeline, `setup` the nodes' engines and routing.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use ulnet_proto::addr::{Net, Nid};
use ulnet_proto::engine::faults::{DelayRule, DropRule, FaultMatch};
use ulnet_proto::engine::testing::{EventChecker, Tracking};
use ulnet_proto::engine::{
    BufferClass, DriverError, Engine, EngineConfig, HealthStatus, LNET_PID_LUSTRE, LndKind,
    NiConfig, NiId, PingCompletion, RecvAction, RouteConfig, RxId, Transmit, TxId,
};
use ulnet_proto::time::Time;

use crate::lanes::{Arrival, Dropped, Held, LaneKey, Lanes, Parked};
use crate::network::{EndpointId, LinkId, Network};
use crate::queue::EventQueue;
use crate::scenario::tunables::NodeTunables;
use crate::scenario::{
    FaultSpec, Gateway, NodeSelector, Scenario, ScenarioError, WorkloadKind, parse_net,
};
use crate::socklnd::{KSOCK_HEADER_BYTES, LNET_HEADER_BYTES, PairId, PairState, Pairs};
use crate::workload::{Ctx, DEFAULT_RPC_TIMEOUT, Plan, Wake, Workloads};

mod connections;
mod faults;
mod receive;
mod setup;

use faults::fault_time;
use setup::{build_engine, node_address, plans};

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
    /// Lost to a link down or a black hole, or with the connection that carried them.
    pub frames_lost: u64,
    /// Of which reached their receiver after their connection had closed (they were on the
    /// way when it closed).
    pub frames_lost_to_closes: u64,
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
    queue: EventQueue,
    pending: Vec<(Pending, u32)>,
    free: Vec<u32>,
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
            // Without per-step checks, only the counts the final quiescence check needs.
            checker: EventChecker::new(
                nodes.len(),
                if options.check_invariants { Tracking::Strict } else { Tracking::Counting },
            ),
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
            queue: EventQueue::default(),
            pending: Vec::new(),
            free: Vec::new(),
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
            let slot =
                alloc(&mut world.pending, &mut world.free, Pending::Fault { index: index as u32 });
            world.queue.push(at, slot);
            let until = match fault {
                FaultSpec::DropRule(rule) => rule.until,
                FaultSpec::DelayRule(rule) => rule.until,
                _ => None,
            };
            if let Some(until) = until {
                let slot = alloc(
                    &mut world.pending,
                    &mut world.free,
                    Pending::FaultEnd { index: index as u32 },
                );
                world.queue.push(Time::ZERO + until.0, slot);
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
        while let Some(at) = self.queue.peek() {
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
        // Engines may still hold messages that only their timers finish: a router's forwarded
        // PUT waiting for its destination's discovery, whose push lost its ACK, fails when the
        // push's transaction times out. The drain runs them out too.
        while !self.quiescent() || self.engines_hold_messages() {
            match self.queue.peek() {
                Some(at) if at <= limit => self.step()?,
                _ => break,
            }
        }
        self.final_checks()
    }

    /// Processes one queue entry.
    pub fn step(&mut self) -> Result<(), RunError> {
        let Some((at, slot)) = self.queue.pop() else { return Ok(()) };
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
                let slot = alloc(&mut self.pending, &mut self.free, Pending::Timer { node });
                self.queue.push(at, slot);
            }
        }
        if self.options.check_invariants && self.touched.last() != Some(&node) {
            self.touched.push(node);
        }
    }

    /// Queues `entry` at `at`; returns its slot.
    fn schedule(&mut self, at: Time, entry: Pending) -> u32 {
        if matches!(entry, Pending::Arrive { .. } | Pending::SendDone { .. } | Pending::Nothing) {
            self.in_flight += 1;
        }
        let slot = alloc(&mut self.pending, &mut self.free, entry);
        self.queue.push(at, slot);
        slot
    }

    // ------------------------------------------------------------------ keepalive

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
            let slot = alloc(&mut self.pending, &mut self.free, Pending::Workload(*wake));
            self.queue.push(*at, slot);
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
    pub fn has_work(&mut self) -> bool {
        let end = self.end;
        self.queue.peek().is_some_and(|at| at <= end)
    }

    /// Whether a running node's engine holds a message that is not parked on a lazy portal.
    fn engines_hold_messages(&self) -> bool {
        self.nodes
            .iter()
            .filter(|node| !node.stopped)
            .any(|node| node.engine.message_count() != node.engine.delayed_message_count())
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

/// Whether pending `slot` still holds the successful send completion it got at `generation`.
fn still_waiting(pending: &[(Pending, u32)], slot: u32, generation: u32) -> bool {
    pending.get(slot as usize).is_some_and(|(entry, current)| {
        *current == generation
            && matches!(entry, Pending::SendDone { status: HealthStatus::Ok, close: None, .. })
    })
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
