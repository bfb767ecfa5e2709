//! A deterministic harness: N nodes wired through the emulated fabric on virtual time.
//!
//! Modelled on quinn's `Pair`: the harness plays every node's driver (a fabric LND), moves
//! frames through a seeded [`LinkModel`], and advances virtual time to the next wakeup.
//! [`Harness::step`] runs one wakeup, [`Harness::drive`] runs until nothing is left to do (and
//! fails loudly past a step bound, turning a livelock into an assertion), and after every step
//! it checks each node's invariants plus the event-level ones: no event after an MD's unlinked
//! event, no more operations on an MD than its threshold, and (at quiescence) exactly one SEND
//! per successful `put`/`get`.
//!
//! Node `i` has one fabric NI per rail, rail `r` being `10.r.0.<i+1>@tcp<r>` (rail 0 is
//! `10.0.0.<i+1>@tcp`), or the NIDs of [`HarnessConfig::node_nids`], and pid
//! [`LNET_PID_LUSTRE`]. Every NID is its own fabric endpoint (`rail * nodes + node`, so rail 0
//! of node `i` is endpoint `i`): links, partitions, black holes and link-down are per rail.
//! Nodes discover each other before their first PUT or GET as kernels do;
//! [`Harness::discover_all`] gets that out of the way. The payload goes through the zero-copy
//! receive API (`rx_segments_mut`) like a real driver.

// The harness is test code shipped for the tests, benches and fuzzers: its panics are its
// assertions (a livelock, a broken invariant), so it indexes its own tables directly.
#![allow(clippy::expect_used, clippy::indexing_slicing)]

mod checker;
mod fuzz;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

pub use checker::{EventChecker, EventViolation, Tracking};
pub use fuzz::drive_arbitrary;

use crate::addr::{Net, Nid};
use crate::engine::cpt::{CptList, Partitions};
use crate::engine::discovery::DiscoveryId;
use crate::engine::error::{
    DiscoverError, InitiateError, MdAttachError, MdBindError, MdError, MeAttachError,
    PingStartError, PortalError, Rejected,
};
use crate::engine::event::Event;
use crate::engine::health::HealthStatus;
use crate::engine::md::{MdHandle, MdSpec, UnlinkMode};
use crate::engine::me::{InsertPosition, LNET_PID_LUSTRE, MeHandle, ProcessId};
use crate::engine::memory::Slices;
use crate::engine::msg::{RxId, TxId};
use crate::engine::ni::{LndKind, NiConfig, NiId};
use crate::engine::node::{
    Engine, EngineConfig, GetRequest, Limits, PutRequest, RecvAction, Resume, Transmit,
};
use crate::engine::ping::{PingCompletion, PingId};
use crate::engine::tunables::{NetTunables, Tunables};
use crate::link_model::{EndpointId, Fabric, Fate, LinkConfig, LinkModel};
use crate::time::Time;
use crate::wire::header::Header;

/// Bytes a header takes on the fabric (the classic nid4 form), for serialization delay.
const HEADER_BYTES: usize = 72;

/// The fabric NI of every harness node.
pub const FABRIC_NI: NiId = NiId(1);

/// The NID of harness node `index`: `10.0.0.<index+1>@tcp`.
pub fn node_nid(index: usize) -> Nid {
    rail_nid(index, 0)
}

/// The NID of harness node `index` on rail `rail`: `10.<rail>.0.<index+1>@tcp<rail>`.
pub fn rail_nid(index: usize, rail: usize) -> Nid {
    let net = Net::new(crate::addr::LndType::SOCK, rail as u16);
    let address = 0x0a00_0001_u32.wrapping_add((rail as u32) << 16).wrapping_add(index as u32);
    Nid::new4(net, address)
}

/// A PUT of `md` to `target` without ACK, at offset 0 and no header data: the stories' usual one.
pub fn plain_put(md: MdHandle, target: ProcessId, portal: u32, match_bits: u64) -> PutRequest {
    PutRequest {
        md,
        ack: false,
        target,
        portal,
        match_bits,
        remote_offset: 0,
        hdr_data: 0,
        source: None,
    }
}

/// How to build a [`Harness`].
#[derive(Clone, Debug)]
pub struct HarnessConfig {
    pub nodes: usize,
    pub seed: u64,
    pub link: LinkConfig,
    pub tunables: Tunables,
    pub net_tunables: NetTunables,
    pub limits: Limits,
    /// Steps one `drive` may take before it is declared a livelock.
    pub max_steps: u64,
    /// Run the invariant checkers after every step (off for benchmarks).
    pub check_invariants: bool,
    /// Keep events for [`Harness::take_events`] (the fuzzer turns this off).
    pub keep_events: bool,
    /// Give every node a second NI (`10.1.0.<i+1>@tcp1`, rail 1), which opens the resend
    /// gate for local failures (docs/protocol/semantics.md §4.2); the same as `rails: 2`.
    pub second_ni: bool,
    /// When not empty, node `i`'s fabric NIs are exactly `node_nids[i]` (the first is its
    /// address in [`Harness::nid`]); frames go to whichever node has the next hop's NID.
    pub node_nids: Vec<Vec<Nid>>,
    /// Rails per node (each its own net, see [`rail_nid`]) when `node_nids` is empty.
    pub rails: usize,
    /// Every node's CPU partitions.
    pub partitions: Partitions,
    /// The partitions every fabric NI is bound to (`net add --cpt`); all of them by default.
    pub ni_cpts: CptList,
}

impl Default for HarnessConfig {
    fn default() -> Self {
        Self {
            nodes: 2,
            seed: 0,
            link: LinkConfig { latency: Duration::from_micros(10), ..LinkConfig::IDEAL },
            tunables: Tunables::default(),
            net_tunables: NetTunables::default(),
            limits: Limits::default(),
            max_steps: 1_000_000,
            check_invariants: true,
            keep_events: true,
            second_ni: false,
            node_nids: Vec::new(),
            rails: 1,
            partitions: Partitions::default(),
            ni_cpts: CptList::ALL,
        }
    }
}

/// A frame on the emulated fabric: a header and its payload bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    pub header: Header,
    pub payload: Vec<u8>,
}

#[derive(Clone, Copy, Debug)]
struct SendDone {
    node: usize,
    tx: TxId,
    status: HealthStatus,
}

/// N nodes, a fabric, and virtual time.
#[derive(Debug)]
pub struct Harness {
    now: Time,
    nodes: Vec<Engine>,
    pub fabric: Fabric<Frame>,
    send_dones: BTreeMap<(Time, u64), SendDone>,
    sequence: u64,
    /// Payloads of receives delayed on lazy portals, held as a driver would hold its socket.
    delayed: BTreeMap<(usize, RxId), Frame>,
    events: Vec<Vec<Event>>,
    completions: Vec<Vec<PingCompletion>>,
    /// Headers each node handed to its driver, in order (kept with `keep_events`).
    transmitted: Vec<Vec<Header>>,
    /// Each node's transmits as (next hop, CPT), in order (kept with `keep_events`).
    transmit_cpts: Vec<Vec<(Nid, u32)>>,
    /// The NIDs frames reach each node on.
    fabric_nids: Vec<Vec<Nid>>,
    /// Each NID's fabric endpoint (a short list: harnesses have a handful of NIDs).
    endpoints: Vec<(Nid, EndpointId)>,
    /// Endpoints whose link is down: everything to or from them is lost.
    down: BTreeSet<EndpointId>,
    /// Endpoint pairs (smaller first) that silently drop everything both ways.
    blackholes: BTreeSet<(EndpointId, EndpointId)>,
    /// Directed endpoint pairs that silently drop everything one way.
    one_way: BTreeSet<(EndpointId, EndpointId)>,
    /// Frames and bytes sent per directed endpoint pair.
    rail_traffic: BTreeMap<(EndpointId, EndpointId), (u64, u64)>,
    injected_failures: Vec<VecDeque<HealthStatus>>,
    checker: EventChecker,
    config: HarnessConfig,
    steps: u64,
    /// Headers a node refused as protocol errors.
    pub protocol_errors: u64,
}

impl Harness {
    pub fn new(config: HarnessConfig) -> Self {
        let rails = if config.second_ni { config.rails.max(2) } else { config.rails.max(1) };
        let fabric_nids: Vec<Vec<Nid>> = (0..config.nodes)
            .map(|index| match config.node_nids.get(index) {
                Some(nids) if !nids.is_empty() => nids.clone(),
                _ => (0..rails).map(|rail| rail_nid(index, rail)).collect(),
            })
            .collect();
        let nodes = (0..config.nodes)
            .map(|index| {
                let ni = NiConfig {
                    tunables: config.net_tunables,
                    cpts: config.ni_cpts,
                    ..NiConfig::new(node_nid(index), LndKind::Fabric)
                };
                let nis: Vec<NiConfig> =
                    fabric_nids[index].iter().map(|nid| NiConfig { nid: *nid, ..ni }).collect();
                let node_config = EngineConfig {
                    interface_cookie: 0x1000 + index as u64,
                    pid: LNET_PID_LUSTRE,
                    tunables: config.tunables,
                    nis,
                    limits: config.limits,
                    partitions: config.partitions,
                };
                match Engine::new(node_config) {
                    Ok(node) => node,
                    Err(error) => panic!("harness node {index}: {error}"),
                }
            })
            .collect();
        let count = config.nodes;
        let mut harness = Self {
            now: Time::ZERO,
            nodes,
            fabric: Fabric::new(LinkModel::new(config.seed, config.link)),
            send_dones: BTreeMap::new(),
            sequence: 0,
            delayed: BTreeMap::new(),
            events: vec![Vec::new(); count],
            completions: vec![Vec::new(); count],
            transmitted: vec![Vec::new(); count],
            transmit_cpts: vec![Vec::new(); count],
            fabric_nids,
            endpoints: Vec::new(),
            down: BTreeSet::new(),
            blackholes: BTreeSet::new(),
            one_way: BTreeSet::new(),
            rail_traffic: BTreeMap::new(),
            injected_failures: vec![VecDeque::new(); count],
            checker: EventChecker::new(count, Tracking::Lenient),
            config,
            steps: 0,
            protocol_errors: 0,
        };
        harness.index_endpoints();
        harness
    }

    /// Two nodes, seed 0, 10 us links.
    pub fn pair() -> Self {
        Self::new(HarnessConfig::default())
    }

    pub fn now(&self) -> Time {
        self.now
    }

    pub fn steps(&self) -> u64 {
        self.steps
    }

    pub fn node(&self, index: usize) -> &Engine {
        &self.nodes[index]
    }

    /// Direct access; calls made this way bypass the checker's MD registration.
    pub fn node_mut(&mut self, index: usize) -> &mut Engine {
        &mut self.nodes[index]
    }

    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Node `index`'s (first) fabric NID.
    pub fn nid(&self, index: usize) -> Nid {
        self.fabric_nids.get(index).and_then(|nids| nids.first()).copied().unwrap_or(Nid::ANY)
    }

    /// Node `index`'s process id (its fabric NID and pid 12345).
    pub fn process(&self, index: usize) -> ProcessId {
        ProcessId::new(self.nid(index), LNET_PID_LUSTRE)
    }

    /// Node `index`'s fabric NIDs, rail order.
    pub fn nids(&self, index: usize) -> &[Nid] {
        self.fabric_nids.get(index).map_or(&[], Vec::as_slice)
    }

    /// The fabric endpoint of a NID: `rail * nodes + node`.
    pub fn endpoint(&self, nid: Nid) -> Option<EndpointId> {
        self.endpoints.iter().find(|(other, _)| *other == nid).map(|(_, endpoint)| *endpoint)
    }

    fn index_endpoints(&mut self) {
        let nodes = self.nodes.len();
        self.endpoints = self
            .fabric_nids
            .iter()
            .enumerate()
            .flat_map(|(node, nids)| {
                nids.iter().enumerate().map(move |(rail, nid)| (*nid, rail * nodes + node))
            })
            .collect();
    }

    /// The link between NIDs `a` and `b` drops everything, both ways, without telling anyone
    /// (`on`), or carries traffic again. Frames already on the wire are lost too.
    pub fn set_blackhole(&mut self, a: Nid, b: Nid, on: bool) {
        let (Some(a), Some(b)) = (self.endpoint(a), self.endpoint(b)) else {
            panic!("set_blackhole: unknown NID");
        };
        let pair = (a.min(b), a.max(b));
        if on {
            self.blackholes.insert(pair);
        } else {
            self.blackholes.remove(&pair);
        }
    }

    /// Frames from NID `from` to NID `to` (one direction only) are dropped silently.
    pub fn set_blackhole_one_way(&mut self, from: Nid, to: Nid, on: bool) {
        let (Some(from), Some(to)) = (self.endpoint(from), self.endpoint(to)) else {
            panic!("set_blackhole_one_way: unknown NID");
        };
        if on {
            self.one_way.insert((from, to));
        } else {
            self.one_way.remove(&(from, to));
        }
    }

    /// `lnetctl net add` on node `node`: the fabric learns the NID and the node adds the NI
    /// (which rebuilds its ping buffer and pushes it to multi-rail peers).
    pub fn add_ni(&mut self, node: usize, nid: Nid) -> NiId {
        self.fabric_nids[node].push(nid);
        self.index_endpoints();
        let config =
            NiConfig { tunables: self.config.net_tunables, ..NiConfig::new(nid, LndKind::Fabric) };
        let now = self.now;
        let ni =
            self.nodes[node].add_ni(now, config).unwrap_or_else(|error| panic!("add_ni: {error}"));
        self.flush();
        ni
    }

    /// `lnetctl net del` on node `node`: the NI goes; frames to its NID are refused from now.
    pub fn remove_ni(&mut self, node: usize, nid: Nid) {
        let Some(ni) = self.nodes[node].ni_for_nid(nid) else {
            panic!("remove_ni: node {node} has no NI {nid:?}");
        };
        let now = self.now;
        if let Err(error) = self.nodes[node].remove_ni(now, ni) {
            panic!("remove_ni: {error}");
        }
        if let Some(endpoint) = self.endpoint(nid) {
            self.down.insert(endpoint);
        }
        self.flush();
    }

    /// Node `node`'s interface `nid` loses its link (`down`) or gets it back, as the OS would
    /// report through netlink: the driver raises or clears the NI's fatal flag, and while it
    /// is down everything to or from it is lost (the LND still accepts sends, as a socket
    /// buffer does, until they are lost).
    pub fn set_link_down(&mut self, node: usize, nid: Nid, down: bool) {
        let Some(endpoint) = self.endpoint(nid) else {
            panic!("set_link_down: unknown NID {nid:?}");
        };
        if down {
            self.down.insert(endpoint);
        } else {
            self.down.remove(&endpoint);
        }
        let Some(ni) = self.nodes[node].ni_for_nid(nid) else {
            panic!("set_link_down: node {node} has no NI {nid:?}");
        };
        let now = self.now;
        if let Err(error) = self.nodes[node].set_ni_fatal(now, ni, down) {
            panic!("set_ni_fatal: {error}");
        }
        self.flush();
    }

    /// Every link back to `link`, no partition, black hole or link down left.
    pub fn heal(&mut self, link: LinkConfig) {
        let endpoints = self.nodes.len() * self.fabric_nids.iter().map(Vec::len).max().unwrap_or(0);
        for a in 0..endpoints {
            for b in 0..endpoints {
                self.fabric.model.set_link(a, b, link);
                self.fabric.model.set_partitioned(a, b, false);
            }
        }
        self.blackholes.clear();
        self.one_way.clear();
        let down: Vec<EndpointId> = std::mem::take(&mut self.down).into_iter().collect();
        for endpoint in down {
            let node = endpoint % self.nodes.len();
            let rail = endpoint / self.nodes.len();
            if let Some(ni) =
                self.fabric_nids[node].get(rail).and_then(|nid| self.nodes[node].ni_for_nid(*nid))
            {
                let now = self.now;
                let _ = self.nodes[node].set_ni_fatal(now, ni, false);
            }
        }
        self.flush();
    }

    /// Frames and payload-plus-header bytes sent from NID `from` to NID `to` so far (counted
    /// with [`HarnessConfig::keep_events`]).
    pub fn rail_traffic(&self, from: Nid, to: Nid) -> (u64, u64) {
        match (self.endpoint(from), self.endpoint(to)) {
            (Some(from), Some(to)) => self.rail_traffic.get(&(from, to)).copied().unwrap_or((0, 0)),
            _ => (0, 0),
        }
    }

    /// Runs a call on node `index` directly, then drains its outputs (for APIs the harness
    /// does not wrap: configuration, health, tunables).
    pub fn with_node<T>(&mut self, index: usize, call: impl FnOnce(&mut Engine, Time) -> T) -> T {
        let now = self.now;
        let result = call(&mut self.nodes[index], now);
        self.flush();
        result
    }

    // ------------------------------------------------------------ API calls through the checker

    /// [`Engine::me_attach`] on node `node` (hence one argument more than it).
    #[allow(clippy::too_many_arguments)]
    pub fn me_attach(
        &mut self,
        node: usize,
        portal: u32,
        match_id: ProcessId,
        match_bits: u64,
        ignore_bits: u64,
        unlink: UnlinkMode,
        position: InsertPosition,
    ) -> Result<MeHandle, MeAttachError> {
        let engine = &mut self.nodes[node];
        let attach = (portal, match_id, match_bits, ignore_bits, unlink, position);
        let tried = apart(engine).then(|| {
            engine.try_me_attach(attach.0, attach.1, attach.2, attach.3, attach.4, attach.5)
        });
        match tried.flatten() {
            Some(attached) => attached,
            None => engine.me_attach(portal, match_id, match_bits, ignore_bits, unlink, position),
        }
    }

    pub fn md_attach(
        &mut self,
        node: usize,
        me: MeHandle,
        spec: MdSpec,
        unlink: UnlinkMode,
    ) -> Result<MdHandle, Rejected<MdAttachError>> {
        let (threshold, events) = (spec.threshold, spec.events);
        let now = self.now;
        let engine = &mut self.nodes[node];
        let tried =
            if apart(engine) { engine.try_md_attach(now, me, spec, unlink) } else { Err(spec) };
        let handle = match tried {
            Ok(attached) => attached,
            Err(spec) => engine.md_attach(now, me, spec, unlink),
        }?;
        self.checker.track(node, handle, threshold, events);
        self.flush();
        Ok(handle)
    }

    pub fn md_bind(
        &mut self,
        node: usize,
        spec: MdSpec,
        unlink: UnlinkMode,
    ) -> Result<MdHandle, Rejected<MdBindError>> {
        let (threshold, events) = (spec.threshold, spec.events);
        let engine = &mut self.nodes[node];
        let tried = if apart(engine) { engine.try_md_bind(spec, unlink) } else { Err(spec) };
        let handle = match tried {
            Ok(bound) => bound,
            Err(spec) => engine.md_bind(spec, unlink),
        }?;
        self.checker.track(node, handle, threshold, events);
        Ok(handle)
    }

    pub fn put(&mut self, node: usize, request: &PutRequest) -> Result<(), InitiateError> {
        let now = self.now;
        // Every message-path call is made as a runtime that locks partitions apart makes it:
        // on the partitions its plan names when it can, else on the whole node.
        let engine = &mut self.nodes[node];
        let tried = apart(engine).then(|| engine.try_put(now, request)).flatten();
        tried.unwrap_or_else(|| engine.put(now, request))?;
        self.count_initiated(node, request.md);
        self.flush();
        Ok(())
    }

    pub fn get(&mut self, node: usize, request: &GetRequest) -> Result<(), InitiateError> {
        let now = self.now;
        let engine = &mut self.nodes[node];
        let tried = apart(engine).then(|| engine.try_get(now, request)).flatten();
        tried.unwrap_or_else(|| engine.get(now, request))?;
        self.count_initiated(node, request.md);
        self.flush();
        Ok(())
    }

    /// [`Engine::ping`] on node `node`.
    pub fn ping(
        &mut self,
        node: usize,
        target: ProcessId,
        timeout: Duration,
        source: Option<Nid>,
    ) -> Result<PingId, PingStartError> {
        let now = self.now;
        let id = self.nodes[node].ping(now, target, timeout, source)?;
        self.flush();
        Ok(id)
    }

    /// [`Engine::discover`] on node `node`.
    pub fn discover(
        &mut self,
        node: usize,
        nid: Nid,
        force: bool,
    ) -> Result<DiscoveryId, DiscoverError> {
        let now = self.now;
        let id = self.nodes[node].discover(now, nid, force)?;
        self.flush();
        Ok(id)
    }

    /// Every node discovers every other (pings, pushes both ways) and the completions are
    /// dropped: afterwards PUTs and GETs go straight out. Panics if one fails.
    pub fn discover_all(&mut self) {
        for from in 0..self.nodes.len() {
            for to in (0..self.nodes.len()).filter(|to| *to != from) {
                let nid = self.nid(to);
                if let Err(error) = self.discover(from, nid, false) {
                    panic!("node {from} cannot discover {nid:?}: {error}");
                }
            }
        }
        self.drive();
        for (node, completions) in self.completions.iter_mut().enumerate() {
            for completion in completions.drain(..) {
                if let PingCompletion::Discovery(result) = completion {
                    assert!(result.outcome.is_ok(), "node {node}: discovery failed: {result:?}");
                }
            }
        }
    }

    /// Takes the headers `node` transmitted so far (its driver's view of the wire).
    pub fn take_transmitted(&mut self, node: usize) -> Vec<Header> {
        std::mem::take(&mut self.transmitted[node])
    }

    /// Takes the (next hop, CPT) of each transmit `node` made so far.
    pub fn take_transmit_cpts(&mut self, node: usize) -> Vec<(Nid, u32)> {
        std::mem::take(&mut self.transmit_cpts[node])
    }

    /// Takes the pings and discoveries `node` finished so far.
    pub fn take_completions(&mut self, node: usize) -> Vec<PingCompletion> {
        std::mem::take(&mut self.completions[node])
    }

    pub fn md_unlink(&mut self, node: usize, md: MdHandle) -> Result<(), MdError> {
        let now = self.now;
        let engine = &mut self.nodes[node];
        let tried = apart(engine).then(|| engine.try_md_unlink(now, md)).flatten();
        tried.unwrap_or_else(|| engine.md_unlink(now, md))?;
        self.flush();
        Ok(())
    }

    pub fn set_lazy_portal(&mut self, node: usize, portal: u32) -> Result<(), PortalError> {
        self.nodes[node].set_lazy_portal(portal)
    }

    pub fn clear_lazy_portal(&mut self, node: usize, portal: u32) -> Result<(), PortalError> {
        let now = self.now;
        self.nodes[node].clear_lazy_portal(now, portal)?;
        self.flush();
        Ok(())
    }

    /// Posts a receive buffer the simple way: a wildcard ME (any initiator, exact bits,
    /// appended, unlinked with its MD) and `spec` auto-unlinked. Panics on API errors.
    pub fn post(&mut self, node: usize, portal: u32, match_bits: u64, spec: MdSpec) -> MdHandle {
        let me = self.me_attach(
            node,
            portal,
            ProcessId::ANY,
            match_bits,
            0,
            UnlinkMode::Unlink,
            InsertPosition::After,
        );
        let me = me.unwrap_or_else(|error| panic!("me_attach: {error}"));
        self.md_attach(node, me, spec, UnlinkMode::Unlink)
            .unwrap_or_else(|error| panic!("md_attach: {error}"))
    }

    /// Binds a send MD (auto-unlinked). Panics on API errors.
    pub fn bind(&mut self, node: usize, spec: MdSpec) -> MdHandle {
        self.md_bind(node, spec, UnlinkMode::Unlink)
            .unwrap_or_else(|error| panic!("md_bind: {error}"))
    }

    /// The next send from `node` fails at its LND with `status` (instead of reaching the fabric).
    pub fn fail_next_send(&mut self, node: usize, status: HealthStatus) {
        self.injected_failures[node].push_back(status);
    }

    /// Takes the events `node` delivered so far.
    pub fn take_events(&mut self, node: usize) -> Vec<Event> {
        std::mem::take(&mut self.events[node])
    }

    // ------------------------------------------------------------ time

    /// Processes the next wakeup; false when there is none.
    pub fn step(&mut self) -> bool {
        self.flush();
        let Some(next) = self.next_wakeup() else {
            return false;
        };
        self.now = self.now.max(next);
        self.process_due();
        self.steps += 1;
        self.flush();
        true
    }

    /// Steps until idle. Panics (a failed assertion) after `max_steps` steps: a livelock.
    pub fn drive(&mut self) {
        let start = self.steps;
        while self.step() {
            if self.steps - start > self.config.max_steps {
                let timers: Vec<Option<Time>> =
                    self.nodes.iter().map(Engine::poll_timeout).collect();
                let recovery: Vec<(Vec<Nid>, Vec<Nid>)> = self
                    .nodes
                    .iter()
                    .map(|node| {
                        (
                            node.local_recovery_queue().collect(),
                            node.peer_recovery_queue().collect(),
                        )
                    })
                    .collect();
                panic!(
                    "livelock: no quiescence after {} steps (seed {}) at {:?}: timers {timers:?}, \
                     recovery {recovery:?}, {} frames in flight",
                    self.config.max_steps,
                    self.config.seed,
                    self.now,
                    self.fabric.in_flight()
                );
            }
        }
    }

    /// Steps through every wakeup at or before `deadline`, then sets the clock to it.
    pub fn drive_until(&mut self, deadline: Time) {
        let start = self.steps;
        loop {
            self.flush();
            match self.next_wakeup() {
                Some(next) if next <= deadline => {
                    self.step();
                }
                _ => break,
            }
            if self.steps - start > self.config.max_steps {
                panic!("livelock before {deadline:?} (seed {})", self.config.seed);
            }
        }
        self.now = self.now.max(deadline);
    }

    /// Runs for `span` of virtual time.
    pub fn run_for(&mut self, span: Duration) {
        let deadline = self.now + span;
        self.drive_until(deadline);
    }

    /// Processes everything due now without advancing the clock.
    pub fn settle(&mut self) {
        let now = self.now;
        self.drive_until(now);
    }

    /// Checks that nothing is in flight: every message finalized except PUTs parked on lazy
    /// portals, and one SEND event per successful `put`/`get` (or a held loopback send).
    pub fn assert_quiescent(&self) {
        assert_eq!(self.fabric.in_flight(), 0, "frames still in flight");
        assert!(self.send_dones.is_empty(), "sends still in progress");
        for (index, node) in self.nodes.iter().enumerate() {
            if let Err(violation) = self.checker.check_quiescent(index, node) {
                panic!("{violation}");
            }
        }
    }

    /// Runs every invariant checker now; panics with the seed on a violation.
    pub fn check(&self) {
        for (index, node) in self.nodes.iter().enumerate() {
            if let Err(violation) = node.check_invariants() {
                panic!("node {index} invariant violated (seed {}): {violation}", self.config.seed);
            }
            // Every message-path call stays within the partitions its lock plan names
            // (engine/audit.rs).
            #[cfg(test)]
            if let Some(crossing) = node.partition_crossings().first() {
                panic!("node {index}: a call left its lock plan: {crossing:?}");
            }
            // And its plan, settled from its own partition as a runtime settles it, is the
            // whole engine's.
            #[cfg(test)]
            if let Some(unsettled) = node.partition_unsettled().first() {
                panic!("node {index}: a plan settled otherwise: {unsettled:?}");
            }
        }
    }

    // ------------------------------------------------------------ the driver

    fn next_wakeup(&self) -> Option<Time> {
        let fabric = self.fabric.next_delivery();
        let send = self.send_dones.keys().next().map(|(at, _)| *at);
        let timers = self.nodes.iter().filter_map(Engine::poll_timeout).min();
        [fabric, send, timers].into_iter().flatten().min()
    }

    fn process_due(&mut self) {
        let now = self.now;
        while let Some(entry) = self.send_dones.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let done = entry.remove();
            let engine = &mut self.nodes[done.node];
            let done_on_partitions = apart(engine)
                .then(|| engine.try_handle_send_done(now, done.tx, done.status))
                .flatten();
            let result = done_on_partitions
                .unwrap_or_else(|| engine.handle_send_done(now, done.tx, done.status));
            if let Err(error) = result {
                panic!("node {} refused a send completion: {error}", done.node);
            }
        }
        while let Some(delivery) = self.fabric.pop_due(now) {
            if self.is_cut(delivery.from, delivery.to) {
                continue;
            }
            // The connection's peer NID is the sending NI's (the header's source is the
            // originator's, a router's when forwarded).
            let from = self
                .endpoints
                .iter()
                .find(|(_, endpoint)| *endpoint == delivery.from)
                .map_or(delivery.frame.header.src_nid, |(nid, _)| *nid);
            let to = delivery.to % self.nodes.len();
            // The NI the frame arrives on is the one owning the NID it was sent to (a routed
            // frame's header names its final destination, not this hop).
            let local = self
                .endpoints
                .iter()
                .find(|(_, endpoint)| *endpoint == delivery.to)
                .map(|(nid, _)| *nid);
            self.deliver_on(from, to, local, delivery.frame);
        }
        for node in &mut self.nodes {
            if node.poll_timeout().is_some_and(|deadline| deadline <= now) {
                node.handle_timeout(now);
            }
        }
    }

    /// Drains every node's outputs until none produces more.
    fn flush(&mut self) {
        loop {
            let mut progressed = false;
            for index in 0..self.nodes.len() {
                while let Some(transmit) = self.next_transmit(index) {
                    progressed = true;
                    self.transmit(index, transmit);
                }
                while let Some(resume) = self.next_resume(index) {
                    progressed = true;
                    self.resume(index, resume);
                }
                while let Some(event) = self.nodes[index].poll_event() {
                    progressed = true;
                    self.record(index, event);
                }
                while let Some(completion) = self.next_completion(index) {
                    progressed = true;
                    if self.config.keep_events {
                        self.completions[index].push(completion);
                    }
                }
            }
            if !progressed {
                break;
            }
        }
        if self.config.check_invariants {
            self.check();
        }
    }

    /// Node `index`'s next transmit, taken as a runtime's partitions take theirs (on the
    /// partitions its message's plan names, through `&self`) in the order the node's own
    /// poll gives (partition 0's first), and through `&mut self` when the plan needs the node.
    fn next_transmit(&mut self, index: usize) -> Option<Transmit> {
        let engine = &mut self.nodes[index];
        if !apart(engine) {
            return engine.poll_transmit();
        }
        for cpt in 0..engine.partitions().count() {
            match engine.try_poll_transmit(cpt) {
                Some(Some(transmit)) => return Some(transmit),
                Some(None) => {}
                None => return engine.poll_transmit(),
            }
        }
        None
    }

    /// Node `index`'s next finished ping or discovery, partition by partition as the node's
    /// own poll gives them, each taken holding its partition alone.
    fn next_completion(&mut self, index: usize) -> Option<PingCompletion> {
        let engine = &mut self.nodes[index];
        if !apart(engine) {
            return engine.poll_completion();
        }
        (0..engine.partitions().count()).find_map(|cpt| engine.poll_completion_of(cpt))
    }

    /// Node `index`'s next resume, as [`next_transmit`](Self::next_transmit).
    fn next_resume(&mut self, index: usize) -> Option<Resume> {
        let engine = &mut self.nodes[index];
        if !apart(engine) {
            return engine.poll_resume();
        }
        for cpt in 0..engine.partitions().count() {
            match engine.try_poll_resume(cpt) {
                Some(Some(resume)) => return Some(resume),
                Some(None) => {}
                None => return engine.poll_resume(),
            }
        }
        None
    }

    fn transmit(&mut self, from: usize, transmit: Transmit) {
        let copy = |slices: Slices<'_>| -> Vec<u8> {
            slices.flat_map(|slice| slice.iter().copied()).collect()
        };
        let engine = &mut self.nodes[from];
        let payload =
            match apart(engine).then(|| engine.with_tx_payload(transmit.tx, copy)).flatten() {
                Some(copied) => copied,
                None => engine.tx_payload(transmit.tx).map(copy),
            };
        let payload = payload
            .unwrap_or_else(|e| panic!("node {from} has no payload for its own transmit: {e}"));
        assert_eq!(
            payload.len(),
            transmit.header.payload_length as usize,
            "payload length disagrees with the header"
        );
        assert!(
            transmit.cpt < self.nodes[from].partitions().count(),
            "transmit CPT {} past the node's partitions",
            transmit.cpt
        );
        if self.config.keep_events {
            self.transmitted[from].push(transmit.header);
            self.transmit_cpts[from].push((transmit.next_hop, transmit.cpt));
        }
        let source = self.nodes[from].ni_nid(transmit.ni).and_then(|nid| self.endpoint(nid));
        let destination = self.endpoint(transmit.next_hop);
        let (at, status) = if let Some(status) = self.injected_failures[from].pop_front() {
            (self.now, status)
        } else if let (Some(source), Some(to)) = (source, destination) {
            let length = HEADER_BYTES + payload.len();
            if self.config.keep_events {
                let traffic = self.rail_traffic.entry((source, to)).or_default();
                traffic.0 += 1;
                traffic.1 += length as u64;
            }
            let frame = Frame { header: transmit.header, payload };
            let verdict = if self.is_cut(source, to) {
                // Lost silently: the LND only learns of it by the lack of answers.
                let mut verdict = self.fabric.model.transmit(self.now, source, to, length);
                verdict.fate = Fate::Lost;
                verdict
            } else {
                self.fabric.send(self.now, source, to, length, frame)
            };
            let status = if verdict.fate == Fate::Unreachable {
                HealthStatus::RemoteDropped
            } else {
                HealthStatus::Ok
            };
            (verdict.serialized_at, status)
        } else {
            // Nobody has that NID: the connection is refused.
            (self.now, HealthStatus::RemoteDropped)
        };
        self.sequence += 1;
        self.send_dones
            .insert((at, self.sequence), SendDone { node: from, tx: transmit.tx, status });
    }

    /// Whether frames between two endpoints are lost (a link down, a black hole).
    fn is_cut(&self, a: EndpointId, b: EndpointId) -> bool {
        if self.down.is_empty() && self.blackholes.is_empty() && self.one_way.is_empty() {
            return false;
        }
        self.down.contains(&a)
            || self.down.contains(&b)
            || self.blackholes.contains(&(a.min(b), a.max(b)))
            || self.one_way.contains(&(a, b))
    }

    /// Delivers a frame to node `to` as if it came from the peer NID `from` (which need not
    /// be a harness node): forged, stale or malformed traffic for tests.
    pub fn inject(&mut self, from: Nid, to: usize, frame: Frame) {
        self.deliver(from, to, frame);
        self.flush();
    }

    /// Hands a frame from the peer NID `from` to node `to`, as its driver would.
    fn deliver(&mut self, from: Nid, to: usize, frame: Frame) {
        self.deliver_on(from, to, None, frame);
    }

    /// [`Self::deliver`] on the NI owning `local` when given.
    fn deliver_on(&mut self, from: Nid, to: usize, local: Option<Nid>, frame: Frame) {
        let now = self.now;
        // The NI that owns the NID it was sent to, else the destination NID's, else the first
        // (misaddressed frames).
        let ni = local
            .or(Some(frame.header.dest_nid))
            .filter(|nid| self.fabric_nids[to].contains(nid))
            .and_then(|nid| self.nodes[to].ni_for_nid(nid))
            .unwrap_or(FABRIC_NI);
        let engine = &mut self.nodes[to];
        let action = apart(engine)
            .then(|| engine.try_handle_header(now, ni, from, &frame.header))
            .flatten()
            .unwrap_or_else(|| engine.handle_header(now, ni, from, &frame.header));
        match action {
            RecvAction::Deliver { rx, length, .. } => self.fill(to, rx, length, &frame.payload),
            RecvAction::Discard { .. } => {}
            RecvAction::Delay { rx } => {
                self.delayed.insert((to, rx), frame);
            }
            RecvAction::ProtocolError(_) => self.protocol_errors += 1,
        }
    }

    fn resume(&mut self, node: usize, resume: Resume) {
        let frame = self.delayed.remove(&(node, resume.rx));
        if let (RecvAction::Deliver { rx, length, .. }, Some(frame)) = (resume.action, frame) {
            self.fill(node, rx, length, &frame.payload);
        }
    }

    /// Reads `length` payload bytes straight into the MD, as a socket driver would.
    fn fill(&mut self, node: usize, rx: RxId, length: u32, payload: &[u8]) {
        let status = match self.nodes[node].rx_segments_mut(rx) {
            Ok(slices) => {
                let mut source = payload.get(..length as usize).unwrap_or(payload);
                for slice in slices {
                    let (head, rest) = source.split_at(slice.len().min(source.len()));
                    slice[..head.len()].copy_from_slice(head);
                    source = rest;
                }
                HealthStatus::Ok
            }
            Err(error) => panic!("node {node} lent no memory for a Deliver: {error}"),
        };
        let now = self.now;
        let engine = &mut self.nodes[node];
        let result = apart(engine)
            .then(|| engine.try_handle_recv_done(now, rx, status))
            .flatten()
            .unwrap_or_else(|| engine.handle_recv_done(now, rx, status));
        if let Err(error) = result {
            panic!("node {node} refused a receive completion: {error}");
        }
    }

    fn count_initiated(&mut self, node: usize, md: MdHandle) {
        self.checker.initiated(node, md);
    }

    /// The event-level checkers.
    fn record(&mut self, node: usize, event: Event) {
        if let Err(violation) = self.checker.record(node, &event) {
            panic!("{violation} (seed {})", self.config.seed);
        }
        if self.config.keep_events {
            self.events[node].push(event);
        }
    }
}

#[cfg(test)]
mod cpt_stories;
#[cfg(test)]
mod discovery_stories;
#[cfg(test)]
mod fault_stories;
#[cfg(test)]
mod multirail_stories;
#[cfg(test)]
mod policy_stories;
#[cfg(test)]
mod portal_stories;
#[cfg(test)]
mod routing_stories;
#[cfg(test)]
mod scenarios;

/// Whether the node has several partitions: its message-path calls are then made through
/// `&self` on theirs first (a node of one makes them all through `&mut self`, as a runtime
/// does), so that the engine's benchmark of one partition measures the engine alone.
fn apart(engine: &Engine) -> bool {
    engine.partitions().count() > 1
}
