//! Scenario files: what a simulated cluster is made of and what it does, in YAML.
//!
//! A scenario names groups of nodes (each node has NIs on nets, each NI attached to a switch
//! by its own link), links between switches, tunables per group, workloads (lst-style brw and
//! ping tests, Lustre-style RPC streams) and faults on a timeline. [`Scenario::from_yaml`]
//! reads one strictly: an unknown key is an error naming it, every count and size a file can
//! make the simulator allocate has a named bound below, and what the simulator cannot honour
//! is refused by name. Routers are groups with `routing: true` and NIs on several nets; the
//! other groups reach remote nets through their `routes:`. See `examples/sim/` for complete
//! files and `docs/simulator.md` for every key.

mod select;
pub mod tunables;
pub mod units;

use std::collections::BTreeSet;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use select::{NodeSelector, SelectError};
use units::{Bandwidth, Size, Span};

/// Largest scenario file read.
pub const MAX_SCENARIO_BYTES: usize = 16 << 20;
/// Most simulated nodes.
pub const MAX_NODES: u64 = 1_000_000;
/// Most node groups.
pub const MAX_GROUPS: usize = 10_000;
/// Most NIs per node, rails included (the engine allows more; a simulated node needs no
/// more rails).
pub const MAX_NIS_PER_NODE: usize = 16;
/// Most routes one group lists (a selector gateway counts once per node it names).
pub const MAX_ROUTES_PER_GROUP: usize = 1024;
/// Most router buffers of one size a group may ask for (`tiny_buffers`, ...): buffers are
/// counted first and get memory only when lent, but the count is still bounded.
pub const MAX_ROUTER_BUFFERS: u32 = 1 << 20;
/// Most distinct nets.
pub const MAX_NETS: usize = 64;
/// Most switches (the route table is switches squared).
pub const MAX_SWITCHES: usize = 1024;
/// Most links between switches.
pub const MAX_TRUNKS: usize = 65_536;
/// Most workloads.
pub const MAX_WORKLOADS: usize = 256;
/// Most faults on the timeline.
pub const MAX_FAULTS: usize = 100_000;
/// Most samples in one bandwidth series (`duration / sample_interval`).
pub const MAX_SAMPLES: u64 = 100_000;
/// Longest simulated run.
pub const MAX_DURATION: Duration = Duration::from_secs(30 * 24 * 3600);
/// `LST_MAX_CONCUR`: the largest lst test concurrency.
pub const MAX_CONCURRENCY: u32 = ulnet_proto::wire::selftest::LST_MAX_CONCUR;
/// The largest `max_rpcs_in_flight` a Lustre client takes (`OSC_MAX_RIF_MAX`).
pub const MAX_RPCS_IN_FLIGHT: u32 = 256;
/// Largest bulk of one LNet message (`LNET_MTU`).
pub const MAX_BULK: u64 = ulnet_proto::wire::header::LNET_MTU as u64;
/// Largest Lustre RPC (`PTLRPC_MAX_BRW_SIZE`, 16 MiB): carried as up to 16 bulk MDs.
pub const MAX_RPC_SIZE: u64 = 16 << 20;
/// Most RPCs a scenario may keep in flight at once, over all workloads.
pub const MAX_RPC_SLOTS: u64 = 10_000_000;
/// Smallest and largest link MTU.
pub const MTU_RANGE: (u64, u64) = (576, 65_536);
/// Largest link queue.
pub const MAX_QUEUE: u64 = 1 << 40;
/// Most points in one sweep.
pub const MAX_SWEEP_POINTS: usize = 256;

/// A scenario file, as written.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// A name for results and plots (defaults to the file's stem).
    #[serde(default)]
    pub name: Option<String>,
    /// Virtual time the run lasts.
    pub duration: Span,
    /// Width of one bandwidth sample.
    #[serde(default = "default_sample_interval")]
    pub sample_interval: Span,
    #[serde(default)]
    pub defaults: Defaults,
    #[serde(default)]
    pub switches: Vec<SwitchSpec>,
    /// Links between switches.
    #[serde(default)]
    pub links: Vec<TrunkSpec>,
    pub nodes: Vec<GroupSpec>,
    /// Each entry is a one-key map: `brw: {...}`, `ping: {...}`, `rpc_stream: {...}`.
    #[serde(default, with = "yaml_serde::with::singleton_map_recursive")]
    pub workloads: Vec<WorkloadSpec>,
    /// Each entry is a one-key map: `link_down: {...}`, `blackhole: {...}`, ...
    #[serde(default, with = "yaml_serde::with::singleton_map_recursive")]
    pub faults: Vec<FaultSpec>,
}

fn default_sample_interval() -> Span {
    Span(Duration::from_millis(100))
}

/// What every group and link starts from.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Defaults {
    #[serde(default)]
    pub link: LinkSpec,
    #[serde(default)]
    pub tunables: TunableSpec,
}

/// One direction-symmetric link: an NI's port to its switch, or a link between switches.
/// Unset keys come from `defaults.link`, then from [`LinkSpec::BUILT_IN`].
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    pub bandwidth: Option<Bandwidth>,
    /// One-way propagation delay.
    pub latency: Option<Span>,
    /// Packet loss, as a fraction (0.001 is one packet in a thousand).
    pub loss: Option<f64>,
    pub mtu: Option<Size>,
    /// Bytes the link's queue holds before a packet is dropped (TCP then retransmits).
    pub queue: Option<Size>,
}

/// A link with every key set.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct LinkParams {
    pub bandwidth_bytes_per_sec: u64,
    pub latency: Duration,
    pub loss_per_million: u32,
    pub mtu: u32,
    pub queue_bytes: u64,
}

impl LinkSpec {
    /// 10 GbE, 1 us, no loss, MTU 1500, a 4 MiB queue.
    pub const BUILT_IN: LinkParams = LinkParams {
        bandwidth_bytes_per_sec: 1_250_000_000,
        latency: Duration::from_micros(1),
        loss_per_million: 0,
        mtu: 1500,
        queue_bytes: 4 << 20,
    };

    /// `self` over `base`.
    pub fn or(self, base: LinkSpec) -> LinkSpec {
        LinkSpec {
            bandwidth: self.bandwidth.or(base.bandwidth),
            latency: self.latency.or(base.latency),
            loss: self.loss.or(base.loss),
            mtu: self.mtu.or(base.mtu),
            queue: self.queue.or(base.queue),
        }
    }

    /// Every key resolved (over the built-in link) and checked.
    pub fn resolve(self, what: &str) -> Result<LinkParams, ScenarioError> {
        let built_in = Self::BUILT_IN;
        let bad = |reason: String| ScenarioError::Invalid(format!("{what}: {reason}"));
        let loss = self.loss.unwrap_or(0.0);
        if !(0.0..1.0).contains(&loss) {
            return Err(bad(format!("loss {loss} is not in [0, 1)")));
        }
        let mtu = self.mtu.map_or(u64::from(built_in.mtu), |m| m.0);
        if !(MTU_RANGE.0..=MTU_RANGE.1).contains(&mtu) {
            return Err(bad(format!("mtu {mtu} is not in {}..={}", MTU_RANGE.0, MTU_RANGE.1)));
        }
        let queue = self.queue.map_or(built_in.queue_bytes, |q| q.0);
        if queue > MAX_QUEUE {
            return Err(bad(format!("queue {queue} exceeds {MAX_QUEUE} bytes")));
        }
        let latency = self.latency.map_or(built_in.latency, |l| l.0);
        if latency > MAX_DURATION {
            return Err(bad(format!("latency {latency:?} exceeds {MAX_DURATION:?}")));
        }
        Ok(LinkParams {
            bandwidth_bytes_per_sec: self
                .bandwidth
                .map_or(built_in.bandwidth_bytes_per_sec, |b| b.0),
            latency,
            loss_per_million: (loss * 1e6).round() as u32,
            mtu: mtu as u32,
            queue_bytes: queue,
        })
    }
}

/// LNet and socklnd tunables of a group; unset keys come from `defaults.tunables`, then from
/// Lustre's defaults.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TunableSpec {
    /// Per peer NI tx credits (socklnd default 8).
    pub peer_credits: Option<u32>,
    /// NI tx credits (socklnd default 256).
    pub credits: Option<u32>,
    pub transaction_timeout: Option<Span>,
    pub retry_count: Option<u32>,
    pub health_sensitivity: Option<u32>,
    pub discovery: Option<bool>,
    /// Fast failover's progress timeout (0: the kernel's behaviour).
    pub blackhole_timeout: Option<Span>,
    /// socklnd `conns_per_peer` (0: from the link speed, as the kernel does).
    pub conns_per_peer: Option<u32>,
    /// socklnd `tx_buffer_size` (0: the system's largest autotuned send buffer).
    pub tx_buffer_size: Option<Size>,
    /// socklnd `rx_buffer_size` (0: the system's largest autotuned receive buffer).
    pub rx_buffer_size: Option<Size>,
    pub zc_min_payload: Option<Size>,
    pub min_bulk: Option<Size>,
    pub sock_timeout: Option<Span>,
    /// socklnd `keepalive` (0: off).
    pub keepalive: Option<Span>,
    /// Router credits per peer NI on a router (`peer_buffer_credits`; 0: `peer_credits`).
    pub peer_buffer_credits: Option<u32>,
    /// Seconds without news before a router drops what it would forward to a peer NI not
    /// UP (`peer_timeout`, socklnd's 180; 0: never).
    pub peer_timeout: Option<u32>,
    /// Router buffers of 0, 1 and 256 pages (`tiny_buffers`, `small_buffers`,
    /// `large_buffers` as `lnetctl set`; 0: the kernel's 2048, 16384, 1024).
    pub tiny_buffers: Option<u32>,
    pub small_buffers: Option<u32>,
    pub large_buffers: Option<u32>,
    /// How often every gateway is pinged (`alive_router_check_interval`, 60 s; 0: off).
    pub alive_router_check_interval: Option<Span>,
    /// `router_ping_timeout` (50 s).
    pub router_ping_timeout: Option<Span>,
    /// Routes start dead until their gateway answers (`check_routers_before_use`).
    pub check_routers_before_use: Option<bool>,
    /// A single-hop route is alive only while its gateway's far NI is UP
    /// (`avoid_asym_router_failure`, on).
    pub avoid_asym_router_failure: Option<bool>,
    /// Drop what comes through a gateway this node would not route back through
    /// (`lnet_drop_asym_route`, off).
    pub drop_asym_route: Option<bool>,
}

impl TunableSpec {
    /// `self` over `base`.
    pub fn or(self, base: TunableSpec) -> TunableSpec {
        TunableSpec {
            peer_credits: self.peer_credits.or(base.peer_credits),
            credits: self.credits.or(base.credits),
            transaction_timeout: self.transaction_timeout.or(base.transaction_timeout),
            retry_count: self.retry_count.or(base.retry_count),
            health_sensitivity: self.health_sensitivity.or(base.health_sensitivity),
            discovery: self.discovery.or(base.discovery),
            blackhole_timeout: self.blackhole_timeout.or(base.blackhole_timeout),
            conns_per_peer: self.conns_per_peer.or(base.conns_per_peer),
            tx_buffer_size: self.tx_buffer_size.or(base.tx_buffer_size),
            rx_buffer_size: self.rx_buffer_size.or(base.rx_buffer_size),
            zc_min_payload: self.zc_min_payload.or(base.zc_min_payload),
            min_bulk: self.min_bulk.or(base.min_bulk),
            sock_timeout: self.sock_timeout.or(base.sock_timeout),
            keepalive: self.keepalive.or(base.keepalive),
            peer_buffer_credits: self.peer_buffer_credits.or(base.peer_buffer_credits),
            peer_timeout: self.peer_timeout.or(base.peer_timeout),
            tiny_buffers: self.tiny_buffers.or(base.tiny_buffers),
            small_buffers: self.small_buffers.or(base.small_buffers),
            large_buffers: self.large_buffers.or(base.large_buffers),
            alive_router_check_interval: self
                .alive_router_check_interval
                .or(base.alive_router_check_interval),
            router_ping_timeout: self.router_ping_timeout.or(base.router_ping_timeout),
            check_routers_before_use: self
                .check_routers_before_use
                .or(base.check_routers_before_use),
            avoid_asym_router_failure: self
                .avoid_asym_router_failure
                .or(base.avoid_asym_router_failure),
            drop_asym_route: self.drop_asym_route.or(base.drop_asym_route),
        }
    }
}

/// A switch NIs attach to.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchSpec {
    pub name: String,
}

/// A link between two switches.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TrunkSpec {
    pub between: [String; 2],
    #[serde(default)]
    pub link: LinkSpec,
}

/// `count` nodes named `NAME0`, `NAME1`, ... (or just `NAME` when `count` is 1).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct GroupSpec {
    pub name: String,
    #[serde(default = "one")]
    pub count: u64,
    pub nis: Vec<NiSpec>,
    #[serde(default)]
    pub tunables: TunableSpec,
    /// The nodes forward between their nets (`lnetctl set routing 1`, `forwarding=enabled`).
    #[serde(default)]
    pub routing: bool,
    /// Routes to remote nets (`lnetctl route add`).
    #[serde(default)]
    pub routes: Vec<RouteSpec>,
}

/// `lnetctl route add --net NET --gateway GW [--hop H] [--priority P]`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RouteSpec {
    /// The remote net.
    pub net: String,
    /// A NID (`10.0.0.3@tcp`), or a node selector (`router`, `'router[0-2]'`) naming every
    /// gateway: each selected node's NID on the first net of this group it has, or on the net
    /// after an `@` (`router@tcp1`).
    pub gateway: String,
    /// 1..=255; unset is lnetctl's undefined (counted as 1).
    #[serde(default)]
    pub hops: Option<u32>,
    /// 0 is the highest.
    #[serde(default)]
    pub priority: u32,
}

fn one() -> u64 {
    1
}

/// One NI of every node of a group.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NiSpec {
    /// The LNet net: `tcp`, `tcp1`, ... (the simulated LND is socklnd).
    pub net: String,
    /// The switch its link goes to; default: a switch named after the net.
    #[serde(default)]
    pub switch: Option<String>,
    /// The link to the switch (over `defaults.link`).
    #[serde(default)]
    pub link: LinkSpec,
    /// This many NIs on the net (multi-rail on one net), each with its own link: rail `r` of
    /// node `i` has address `10.0.0.0 + (r << 20) + i + 1`. Default 1.
    #[serde(default = "one_rail")]
    pub rails: u32,
}

fn one_rail() -> u32 {
    1
}

/// What moves data: `brw:`, `ping:` or `rpc_stream:` followed by a [`Workload`].
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub enum WorkloadSpec {
    /// `lst add_test --test brw`: each client keeps `concurrency` bulk RPCs of `size` in
    /// flight (`op`, `size`, `concurrency`).
    Brw(Workload),
    /// `lst add_test --test ping`: each client keeps `concurrency` ping RPCs in flight.
    Ping(Workload),
    /// A Lustre client's writes or reads: `max_rpcs_in_flight` RPCs of `rpc_size` to each of
    /// its servers (`op`, `rpc_size`, `max_rpcs_in_flight`).
    RpcStream(Workload),
}

/// The kind of a workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkloadKind {
    Brw,
    Ping,
    RpcStream,
}

/// Read or write, from the client's side.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    /// The server PUTs the data into the client's buffer.
    Read,
    /// The server GETs the data from the client's buffer.
    Write,
}

/// One workload's keys; which apply depends on its kind (a key that does not is refused).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    #[serde(default)]
    pub name: Option<String>,
    /// A node selector: `group`, `group[3]` or `group[2-5]`.
    pub clients: String,
    pub servers: String,
    /// Servers each client uses, round robin (default: all).
    #[serde(default)]
    pub servers_per_client: Option<u32>,
    /// Client `i` starts at server `(i + shift) mod servers`.
    #[serde(default)]
    pub shift: u32,
    #[serde(default)]
    pub start: Span,
    /// No new RPC after this (default: the run's end).
    #[serde(default)]
    pub stop: Option<Span>,
    /// An RPC with no reply after this fails (lst's default 64 s).
    #[serde(default)]
    pub rpc_timeout: Option<Span>,
    /// brw, rpc_stream.
    #[serde(default)]
    pub op: Option<Operation>,
    /// brw: bytes per RPC, at most `LNET_MTU`.
    #[serde(default)]
    pub size: Option<Size>,
    /// brw, ping: RPCs in flight per client.
    #[serde(default)]
    pub concurrency: Option<u32>,
    /// rpc_stream: bytes per RPC, carried as bulks of at most 1 MiB.
    #[serde(default)]
    pub rpc_size: Option<Size>,
    /// rpc_stream: RPCs in flight per client and server.
    #[serde(default)]
    pub max_rpcs_in_flight: Option<u32>,
}

/// Something that happens at `at`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub enum FaultSpec {
    /// The NI on `net` of every selected node loses its link: everything to or from it is
    /// lost, and the node is told (netlink link down).
    LinkDown(NiFault),
    LinkUp(NiFault),
    /// Everything between two nodes (on `net`, or on every net) vanishes silently.
    Blackhole(PairFault),
    /// The two nodes can no longer reach each other, and the sender can tell.
    Partition(PairFault),
    /// Ends black holes and partitions between the two nodes.
    Heal(PairFault),
    /// `lnetctl fault drop add` on the selected nodes.
    DropRule(DropRuleSpec),
    /// `lnetctl fault delay add` on the selected nodes.
    DelayRule(DelayRuleSpec),
    /// Every NI of the selected nodes loses its link (every cable pulled): the node is told,
    /// its peers hear nothing.
    NodeDown(NodeFault),
    /// Every NI of the selected nodes gets its link back.
    NodeUp(NodeFault),
    /// The selected nodes' processes stop (killed): their connections are reset, so their
    /// peers know at once, and new connections are refused until `node_start`. Only for
    /// nodes no workload uses (routers, bystanders).
    NodeStop(NodeFault),
    /// A stopped node starts again: a fresh process with the same configuration.
    NodeStart(NodeFault),
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NodeFault {
    pub at: Span,
    pub node: String,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NiFault {
    pub at: Span,
    pub node: String,
    pub net: String,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PairFault {
    pub at: Span,
    pub between: [String; 2],
    #[serde(default)]
    pub net: Option<String>,
}

/// A rule's message filter: `source` and `destination` are `*`, a NID (`10.0.0.3@tcp`,
/// `*@tcp`) or a node selector naming one node (its NID on `net`, or its first).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DropRuleSpec {
    pub at: Span,
    pub node: String,
    #[serde(default = "star")]
    pub source: String,
    #[serde(default = "star")]
    pub destination: String,
    /// Drop one message in `rate`.
    #[serde(default)]
    pub rate: u32,
    /// Drop one message every `interval` seconds.
    #[serde(default)]
    pub interval: u32,
    /// Drop every match.
    #[serde(default)]
    pub all: bool,
    /// Removed again at this time.
    #[serde(default)]
    pub until: Option<Span>,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DelayRuleSpec {
    pub at: Span,
    pub node: String,
    #[serde(default = "star")]
    pub source: String,
    #[serde(default = "star")]
    pub destination: String,
    #[serde(default)]
    pub rate: u32,
    #[serde(default)]
    pub interval: u32,
    /// Seconds each delayed message is held (whole seconds, as `lnetctl fault delay`).
    pub latency: u32,
    #[serde(default)]
    pub until: Option<Span>,
}

fn star() -> String {
    "*".to_owned()
}

/// Why a scenario was refused.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("scenario file is {0} bytes, more than the {MAX_SCENARIO_BYTES} allowed")]
    TooLarge(usize),
    #[error("{0}")]
    Yaml(String),
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Select(#[from] SelectError),
}

impl Scenario {
    /// Reads and checks a scenario.
    pub fn from_yaml(text: &str) -> Result<Self, ScenarioError> {
        if text.len() > MAX_SCENARIO_BYTES {
            return Err(ScenarioError::TooLarge(text.len()));
        }
        let scenario: Scenario =
            yaml_serde::from_str(text).map_err(|error| ScenarioError::Yaml(error.to_string()))?;
        scenario.validate()?;
        Ok(scenario)
    }

    /// The name results are filed under.
    pub fn name_or<'a>(&'a self, fallback: &'a str) -> &'a str {
        self.name.as_deref().unwrap_or(fallback)
    }

    /// The run's end.
    pub fn end(&self) -> Duration {
        self.duration.0
    }

    /// Total nodes.
    pub fn node_count(&self) -> u64 {
        self.nodes.iter().map(|group| group.count).sum()
    }

    fn validate(&self) -> Result<(), ScenarioError> {
        let invalid = |text: String| Err(ScenarioError::Invalid(text));
        if self.duration.0.is_zero() || self.duration.0 > MAX_DURATION {
            return invalid(format!("duration must be in (0, {MAX_DURATION:?}]"));
        }
        if self.sample_interval.0.is_zero() {
            return invalid("sample_interval must be positive".to_owned());
        }
        let samples = self.duration.0.as_nanos() / self.sample_interval.0.as_nanos();
        if samples > u128::from(MAX_SAMPLES) {
            return invalid(format!(
                "duration / sample_interval is {samples} samples, more than {MAX_SAMPLES}"
            ));
        }
        self.validate_topology()?;
        self.validate_workloads()?;
        self.validate_faults()
    }

    fn validate_topology(&self) -> Result<(), ScenarioError> {
        let invalid = |text: String| Err(ScenarioError::Invalid(text));
        if self.nodes.is_empty() {
            return invalid("no nodes".to_owned());
        }
        if self.nodes.len() > MAX_GROUPS {
            return invalid(format!("{} node groups, more than {MAX_GROUPS}", self.nodes.len()));
        }
        let mut names = BTreeSet::new();
        let mut total: u64 = 0;
        let mut nets = BTreeSet::new();
        for group in &self.nodes {
            if !select::is_name(&group.name) {
                return invalid(format!(
                    "group name {:?}: letters, digits, '-' and '_' only, starting with a letter",
                    group.name
                ));
            }
            if !names.insert(group.name.as_str()) {
                return invalid(format!("group {:?} is defined twice", group.name));
            }
            if group.count == 0 {
                return invalid(format!("group {:?}: count must be at least 1", group.name));
            }
            total = total.saturating_add(group.count);
            if total > MAX_NODES {
                return invalid(format!("more than {MAX_NODES} nodes"));
            }
            if group.nis.is_empty() || group.nis.len() > MAX_NIS_PER_NODE {
                return invalid(format!(
                    "group {:?}: 1 to {MAX_NIS_PER_NODE} NIs per node",
                    group.name
                ));
            }
            let mut group_nets = BTreeSet::new();
            let mut rails: u64 = 0;
            for ni in &group.nis {
                let net = parse_net(&ni.net)?;
                if !group_nets.insert(net) {
                    return invalid(format!(
                        "group {:?}: two NIs on net {} (one entry per net: `rails` puts \
                         several NIs on it)",
                        group.name, ni.net
                    ));
                }
                rails += u64::from(ni.rails);
                if ni.rails == 0 || rails > MAX_NIS_PER_NODE as u64 {
                    return invalid(format!(
                        "group {:?}: rails must be at least 1, and 1 to {MAX_NIS_PER_NODE} NIs \
                         per node in all",
                        group.name
                    ));
                }
                nets.insert(ni.net.as_str());
                ni.link.or(self.defaults.link).resolve(&format!("group {:?} NI", group.name))?;
            }
            group.tunables.or(self.defaults.tunables).resolve(&group.name)?;
            self.validate_routes(group, &group_nets)?;
        }
        if nets.len() > MAX_NETS {
            return invalid(format!("{} nets, more than {MAX_NETS}", nets.len()));
        }
        if self.switches.len() > MAX_SWITCHES {
            return invalid(format!("more than {MAX_SWITCHES} switches"));
        }
        let mut switches = BTreeSet::new();
        for switch in &self.switches {
            if !switches.insert(switch.name.as_str()) {
                return invalid(format!("switch {:?} is defined twice", switch.name));
            }
        }
        for group in &self.nodes {
            for ni in &group.nis {
                if let Some(name) = &ni.switch {
                    if !switches.contains(name.as_str()) {
                        return invalid(format!(
                            "group {:?}: unknown switch {name:?} (list it under `switches:`)",
                            group.name
                        ));
                    }
                }
            }
        }
        if switches.len() + nets.len() > MAX_SWITCHES {
            return invalid(format!("more than {MAX_SWITCHES} switches with the nets' own"));
        }
        if self.links.len() > MAX_TRUNKS {
            return invalid(format!("more than {MAX_TRUNKS} links"));
        }
        for trunk in &self.links {
            for end in &trunk.between {
                if !switches.contains(end.as_str()) {
                    return invalid(format!("link between unknown switch {end:?}"));
                }
            }
            trunk.link.or(self.defaults.link).resolve("link")?;
        }
        Ok(())
    }

    /// A group's routes: remote nets, gateways that resolve to NIDs on a net of the group.
    fn validate_routes(
        &self,
        group: &GroupSpec,
        nets: &BTreeSet<ulnet_proto::addr::Net>,
    ) -> Result<(), ScenarioError> {
        let bad = |text: String| ScenarioError::Invalid(format!("group {:?}: {text}", group.name));
        if group.routes.len() > MAX_ROUTES_PER_GROUP {
            return Err(bad(format!("more than {MAX_ROUTES_PER_GROUP} routes")));
        }
        let mut total: u64 = 0;
        for route in &group.routes {
            let net = parse_net(&route.net)?;
            if nets.contains(&net) {
                return Err(bad(format!("route to {}: a local net needs no route", route.net)));
            }
            if route.hops.is_some_and(|hops| !(1..=255).contains(&hops)) {
                return Err(bad(format!("route to {}: hops must be in 1..=255", route.net)));
            }
            let gateways = match Gateway::parse(&route.gateway)? {
                Gateway::Nid(nid) => {
                    if !nets.contains(&nid.net()) {
                        return Err(bad(format!(
                            "route to {}: gateway {nid} is not on a net of the group",
                            route.net
                        )));
                    }
                    1
                }
                Gateway::Nodes { selector, net } => {
                    let count = selector.count(self)?;
                    let gateway_group = self
                        .nodes
                        .iter()
                        .find(|g| g.name == selector.group)
                        .ok_or_else(|| SelectError::UnknownGroup(selector.group.clone()))?;
                    let shared = gateway_group
                        .nis
                        .iter()
                        .filter_map(|ni| parse_net(&ni.net).ok())
                        .find(|gateway_net| {
                            nets.contains(gateway_net) && net.is_none_or(|net| net == *gateway_net)
                        });
                    if shared.is_none() {
                        return Err(bad(format!(
                            "route to {}: gateway group {:?} shares no net with the group{}",
                            route.net,
                            selector.group,
                            net.map(|net| format!(" on {net}")).unwrap_or_default()
                        )));
                    }
                    count
                }
            };
            total = total.saturating_add(gateways);
            if total > MAX_ROUTES_PER_GROUP as u64 {
                return Err(bad(format!("more than {MAX_ROUTES_PER_GROUP} routes")));
            }
        }
        Ok(())
    }

    fn validate_workloads(&self) -> Result<(), ScenarioError> {
        let invalid = |text: String| Err(ScenarioError::Invalid(text));
        if self.workloads.len() > MAX_WORKLOADS {
            return invalid(format!("more than {MAX_WORKLOADS} workloads"));
        }
        let mut slots: u64 = 0;
        for (index, spec) in self.workloads.iter().enumerate() {
            let what = format!("workload {}", spec.label(index));
            let (kind, workload) = spec.parts();
            let clients = NodeSelector::parse(&workload.clients)?.count(self)?;
            let servers = NodeSelector::parse(&workload.servers)?.count(self)?;
            if workload.start.0 >= self.duration.0 {
                return invalid(format!("{what}: start is not before the run's end"));
            }
            if workload.stop.is_some_and(|stop| stop.0 <= workload.start.0) {
                return invalid(format!("{what}: stop is not after start"));
            }
            if workload.servers_per_client == Some(0) {
                return invalid(format!("{what}: servers_per_client must be at least 1"));
            }
            let foreign = workload.foreign_keys(kind);
            if !foreign.is_empty() {
                return invalid(format!(
                    "{what}: {} does not apply to {kind:?} workloads",
                    foreign.join(", ")
                ));
            }
            let missing = workload.missing_keys(kind);
            if !missing.is_empty() {
                return invalid(format!("{what}: {} missing", missing.join(", ")));
            }
            let per_client =
                u64::from(workload.servers_per_client.unwrap_or(u32::MAX)).min(servers);
            if let Some(size) = workload.size.filter(|size| size.0 > MAX_BULK) {
                return invalid(format!("{what}: size {} exceeds LNET_MTU ({MAX_BULK})", size.0));
            }
            if let Some(concurrency) = workload.concurrency {
                if concurrency == 0 || concurrency > MAX_CONCURRENCY {
                    return invalid(format!(
                        "{what}: concurrency must be in 1..={MAX_CONCURRENCY}"
                    ));
                }
            }
            if let Some(size) = workload.rpc_size.filter(|s| s.0 == 0 || s.0 > MAX_RPC_SIZE) {
                return invalid(format!(
                    "{what}: rpc_size {} is not in 1..={MAX_RPC_SIZE} bytes",
                    size.0
                ));
            }
            if let Some(rif) = workload.max_rpcs_in_flight {
                if rif == 0 || rif > MAX_RPCS_IN_FLIGHT {
                    return invalid(format!(
                        "{what}: max_rpcs_in_flight must be in 1..={MAX_RPCS_IN_FLIGHT}"
                    ));
                }
            }
            let in_flight = match kind {
                WorkloadKind::Brw | WorkloadKind::Ping => {
                    u64::from(workload.concurrency.unwrap_or(1))
                }
                WorkloadKind::RpcStream => {
                    u64::from(workload.max_rpcs_in_flight.unwrap_or(1)) * per_client
                }
            };
            slots = slots.saturating_add(clients.saturating_mul(in_flight));
        }
        if slots > MAX_RPC_SLOTS {
            return invalid(format!(
                "the workloads keep {slots} RPCs in flight, more than {MAX_RPC_SLOTS}"
            ));
        }
        Ok(())
    }

    fn validate_faults(&self) -> Result<(), ScenarioError> {
        let invalid = |text: String| Err(ScenarioError::Invalid(text));
        if self.faults.len() > MAX_FAULTS {
            return invalid(format!("more than {MAX_FAULTS} faults"));
        }
        for fault in &self.faults {
            match fault {
                FaultSpec::LinkDown(ni) | FaultSpec::LinkUp(ni) => {
                    NodeSelector::parse(&ni.node)?.count(self)?;
                    parse_net(&ni.net)?;
                }
                FaultSpec::Blackhole(pair) | FaultSpec::Partition(pair) | FaultSpec::Heal(pair) => {
                    for end in &pair.between {
                        NodeSelector::parse(end)?.count(self)?;
                    }
                    if let Some(net) = &pair.net {
                        parse_net(net)?;
                    }
                }
                FaultSpec::DropRule(rule) => {
                    NodeSelector::parse(&rule.node)?.count(self)?;
                    if usize::from(rule.all)
                        + usize::from(rule.rate > 0)
                        + usize::from(rule.interval > 0)
                        != 1
                    {
                        return invalid(
                            "drop_rule: set exactly one of `rate`, `interval`, `all`".to_owned(),
                        );
                    }
                }
                FaultSpec::DelayRule(rule) => {
                    NodeSelector::parse(&rule.node)?.count(self)?;
                    if (rule.rate > 0) == (rule.interval > 0) || rule.latency == 0 {
                        return invalid(
                            "delay_rule: set one of `rate` and `interval`, and a latency of at \
                             least 1 second"
                                .to_owned(),
                        );
                    }
                }
                FaultSpec::NodeDown(node) | FaultSpec::NodeUp(node) => {
                    NodeSelector::parse(&node.node)?.count(self)?;
                }
                FaultSpec::NodeStop(node) | FaultSpec::NodeStart(node) => {
                    let selector = NodeSelector::parse(&node.node)?;
                    selector.count(self)?;
                    if let Some(workload) = self.workload_using(&selector)? {
                        return invalid(format!(
                            "node_stop/node_start {:?}: workload {workload} runs on it (only \
                             nodes no workload uses can be stopped)",
                            node.node
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// The label of a workload whose clients or servers overlap `selector`, if any.
    fn workload_using(&self, selector: &NodeSelector) -> Result<Option<String>, ScenarioError> {
        let span = |selector: &NodeSelector| -> Result<(u64, u64), ScenarioError> {
            let count = selector.count(self)?;
            let group = self.nodes.iter().find(|g| g.name == selector.group);
            let size = group.map_or(count, |g| g.count);
            Ok(selector.range.unwrap_or((0, size.saturating_sub(1))))
        };
        let (low, high) = span(selector)?;
        for (index, spec) in self.workloads.iter().enumerate() {
            let (_, workload) = spec.parts();
            for text in [&workload.clients, &workload.servers] {
                let other = NodeSelector::parse(text)?;
                if other.group != selector.group {
                    continue;
                }
                let (first, last) = span(&other)?;
                if first <= high && low <= last {
                    return Ok(Some(spec.label(index)));
                }
            }
        }
        Ok(None)
    }
}

/// A route's gateway as written: a NID, or the nodes of a selector (on a net, after `@`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Gateway {
    Nid(ulnet_proto::addr::Nid),
    Nodes { selector: NodeSelector, net: Option<ulnet_proto::addr::Net> },
}

impl Gateway {
    pub fn parse(text: &str) -> Result<Self, ScenarioError> {
        if let Ok(nid) = text.parse::<ulnet_proto::addr::Nid>() {
            return Ok(Self::Nid(nid));
        }
        let (selector, net) = match text.rsplit_once('@') {
            Some((selector, net)) => (selector, Some(parse_net(net)?)),
            None => (text, None),
        };
        let selector = NodeSelector::parse(selector).map_err(|_| {
            ScenarioError::Invalid(format!(
                "gateway {text:?} is neither a NID nor a node selector (router, router[0-2], \
                 router@tcp1)"
            ))
        })?;
        Ok(Self::Nodes { selector, net })
    }
}

/// A net name as LNet writes it; only socket nets are simulated (the LND is socklnd).
pub fn parse_net(text: &str) -> Result<ulnet_proto::addr::Net, ScenarioError> {
    let net: ulnet_proto::addr::Net =
        text.parse().map_err(|error| ScenarioError::Invalid(format!("net {text:?}: {error}")))?;
    if net.lnd != ulnet_proto::addr::LndType::SOCK {
        return Err(ScenarioError::Invalid(format!(
            "net {text:?}: only tcp nets are simulated (the simulated LND is socklnd)"
        )));
    }
    Ok(net)
}

impl WorkloadSpec {
    pub fn parts(&self) -> (WorkloadKind, &Workload) {
        match self {
            Self::Brw(workload) => (WorkloadKind::Brw, workload),
            Self::Ping(workload) => (WorkloadKind::Ping, workload),
            Self::RpcStream(workload) => (WorkloadKind::RpcStream, workload),
        }
    }

    /// The workload's name, or its kind and index.
    pub fn label(&self, index: usize) -> String {
        let (kind, workload) = self.parts();
        let kind = match kind {
            WorkloadKind::Brw => "brw",
            WorkloadKind::Ping => "ping",
            WorkloadKind::RpcStream => "rpc_stream",
        };
        workload.name.clone().unwrap_or_else(|| format!("{kind}{index}"))
    }
}

impl Workload {
    /// Keys set that `kind` does not take.
    fn foreign_keys(&self, kind: WorkloadKind) -> Vec<&'static str> {
        let set = [
            ("op", self.op.is_some(), kind != WorkloadKind::Ping),
            ("size", self.size.is_some(), kind == WorkloadKind::Brw),
            ("concurrency", self.concurrency.is_some(), kind != WorkloadKind::RpcStream),
            ("rpc_size", self.rpc_size.is_some(), kind == WorkloadKind::RpcStream),
            (
                "max_rpcs_in_flight",
                self.max_rpcs_in_flight.is_some(),
                kind == WorkloadKind::RpcStream,
            ),
        ];
        set.iter()
            .filter(|(_, present, allowed)| *present && !allowed)
            .map(|(k, _, _)| *k)
            .collect()
    }

    /// Keys `kind` needs that are not set.
    fn missing_keys(&self, kind: WorkloadKind) -> Vec<&'static str> {
        let needed = [
            ("op", self.op.is_none(), kind != WorkloadKind::Ping),
            ("size", self.size.is_none(), kind == WorkloadKind::Brw),
            ("rpc_size", self.rpc_size.is_none(), kind == WorkloadKind::RpcStream),
            (
                "max_rpcs_in_flight",
                self.max_rpcs_in_flight.is_none(),
                kind == WorkloadKind::RpcStream,
            ),
        ];
        needed.iter().filter(|(_, absent, needed)| *absent && *needed).map(|(k, _, _)| *k).collect()
    }
}
