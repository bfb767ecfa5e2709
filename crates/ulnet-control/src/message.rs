//! Requests, responses and errors: one request per lnetctl command that reaches the node.
//!
//! The CLI does what lnetctl does in userspace (option parsing, nidlist expansion, the checks
//! lnetctl makes before talking to the kernel) and sends what lnetctl would send to the
//! kernel; the daemon plays the kernel's part (lnet/lnet/api-ni.c netlink handlers and module
//! parameter setters) and answers with plain data the CLI renders with
//! [`ulnet_config::render`]. Values are carried as lnetctl passes them; the daemon validates.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use ulnet_config::model::{GlobalError, GlobalKey, ImportError, ImportMode as ConfigImportMode};

pub use ulnet_config::render::{FaultKind, FaultRuleEntry};

use crate::data::{
    ExportState, GlobalShow, ManageCommand, ManageReply, NetEntry, PeerEntry, RouteEntry,
    RoutingShow, StatsShow, UdspEntry,
};

/// A command for the node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "command", content = "args", rename_all = "snake_case")]
pub enum Request {
    /// `lnet configure [--all] [--large]`: start LNet (only `lo` unless `all`).
    Configure { all: bool, large_nids: bool },
    /// `lnet unconfigure`: tear down every NI, route and peer.
    Unconfigure,
    /// `net add`.
    NetAdd(NetAdd),
    /// `net del`.
    NetDel(NetDel),
    /// `net show [-v L] [--net NET]`.
    NetShow { net: Option<String>, level: u32 },
    /// `peer show [-v L] [--nid NID]`; the filter selects the peer owning that NID.
    PeerShow { nid: Option<String>, level: u32 },
    /// `peer list`.
    PeerList,
    /// `peer add --prim_nid P [--nid LIST] [--non_mr] [--lock_prim]`.
    PeerAdd(PeerAdd),
    /// `peer del --prim_nid P [--nid LIST] [--force]`.
    PeerDel(PeerDel),
    /// `peer set --health V (--nid N | --all)` or `peer set --state S --nid N`.
    PeerSet(PeerSet),
    /// `net set --health V (--nid N | --all)`.
    NetSet(NetSet),
    /// `debug recovery --local|--peer`.
    DebugRecovery { queue: RecoveryQueue },
    /// `ping NIDS [--timeout S] [--source NID]`.
    Ping(Ping),
    /// `discover [--force] NIDS`.
    Discover { nids: Vec<String>, force: bool },
    /// `global show`.
    GlobalShow,
    /// `stats show`.
    StatsShow,
    /// `stats reset`: global counters and latency statistics back to zero.
    StatsReset,
    /// `set <param> <value>`; the value is what lnetctl's `parse_long()` read.
    Set { param: SetParam, value: i64 },
    /// `export [--backup]`.
    Export { backup: bool },
    /// `import [--add|--del|--show|--exec]`: the YAML text, at most
    /// [`ulnet_config::model::MAX_IMPORT_LEN`] bytes.
    Import { mode: ImportMode, text: String },
    /// `fault drop|delay add|del|reset|show` (lnetctl's `yaml_lnet_fault_rule()`).
    Fault(Fault),
    /// `route add --net NET --gateway LIST [--hop N] [--priority P]`: one route per gateway,
    /// added in order; the first refusal stops the rest (the kernel's `lnet_route_cmd()`).
    RouteAdd(RouteSpec),
    /// `route del --net NET --gateway LIST`: the routes to the net through each gateway.
    RouteDel(RouteSpec),
    /// `route show [--net] [--gateway] [--hop] [--priority] [-v]`: the routes matching the
    /// filter; `verbose` only changes what the CLI prints.
    RouteShow { filter: RouteSpec, verbose: bool },
    /// `routing show`: the router buffer pools and whether routing is enabled.
    RoutingShow,
    /// `udsp add|del|show` (lnetctl's `jt_add_udsp()`, `jt_del_udsp()`, `jt_show_udsp()`).
    Udsp(Udsp),
    /// `cpt-of-nid NID...`: the NIDs as typed, at most [`MAX_CPT_OF_NID`].
    CptOfNid { nids: Vec<String> },
    /// `which_nid NID...`: the kernel's distance and order of each NID as typed, at most
    /// [`MAX_CPT_OF_NID`].
    PeerDist { nids: Vec<String> },
    /// `conn_list`: the TCP LND's established connections, on `net` (lctl's `--net`) or
    /// every tcp net.
    ConnList { net: Option<String> },
    /// `debug peer --nid NID`: the node writes what its TCP LND holds for that peer (each
    /// connection) to its log, as the kernel writes socklnd's peer dump to its debug log.
    DebugPeer { nid: String },
    /// `setup-sysctl`: whether the node's `enable_sysctl_setup` module parameter asks for the
    /// host's sysctls to be tuned (the CLI does the writing, as lnetctl's script does).
    SysctlSetup,
    /// `get_param cpu_partition_table|cpu_partition_distance`: libcfs's partition table.
    CpuPartitions,
}

/// Most NIDs one `cpt-of-nid` carries (a command line's worth).
pub const MAX_CPT_OF_NID: usize = 4096;

/// libcfs's CPU partition table, as lctl's `cpu_partition_table` and `cpu_partition_distance`
/// print it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuPartitions {
    /// Each partition's CPUs, ascending, by CPT.
    pub cpus: Vec<Vec<u32>>,
    /// `distances[i][j]`: the NUMA distance from partition `i` to partition `j`.
    pub distances: Vec<Vec<u32>>,
}

/// One NID's partition, as `cpt-of-nid` prints it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NidCpt {
    /// The NID as the kernel prints it (`libcfs_nidstr()`).
    pub nid: String,
    pub cpt: u32,
}

/// One reachable NID's distance, as the kernel's `LNetDist()` gives it (`which_nid`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NidDist {
    /// The NID as the kernel prints it (`libcfs_nidstr()`).
    pub nid: String,
    /// 0 for a local NID, 1 for a NID on a local net, hops + 1 through a router.
    pub distance: u32,
    /// Ties between equal distances: lower is preferred.
    pub order: u32,
}

/// The type of a socklnd connection, as `conn_list` prints it (`A`, `C`, `I`, `O`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConnKind {
    Any,
    Control,
    BulkIn,
    BulkOut,
}

/// One established TCP LND connection (lctl `conn_list`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnEntry {
    /// The peer process: its NID and pid.
    pub peer_nid: String,
    pub peer_pid: u32,
    pub kind: ConnKind,
    /// The I/O thread serving the connection (the kernel's scheduler index).
    pub scheduler: u32,
    pub local_ip: std::net::IpAddr,
    pub remote_ip: std::net::IpAddr,
    pub remote_port: u16,
    /// The socket's send and receive buffer sizes (`SO_SNDBUF`, `SO_RCVBUF`).
    pub tx_buffer: u32,
    pub rx_buffer: u32,
    /// Nagle's algorithm on (`TCP_NODELAY` off).
    pub nagle: bool,
}

/// A UDSP request: what lnetctl's ioctls ask of the kernel's rule list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Udsp {
    /// `udsp add` (`IOC_LIBCFS_ADD_UDSP`).
    Add(UdspAdd),
    /// `udsp del --idx N`, or every rule with `--all` (`None`; `IOC_LIBCFS_DEL_UDSP`).
    Del { idx: Option<u32> },
    /// `udsp show [--idx N]`: every rule, or the one at `idx` (none when there is no such
    /// rule, as lnetctl's loop ends at `-ENOENT`).
    Show { idx: Option<u32> },
}

/// `udsp add`: the criteria as typed (the node parses them as lnetctl did: lnetctl sends
/// them parsed, and the CLI has checked they parse), the priority if one was given, and the
/// index to insert at (appended without one).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UdspAdd {
    pub src: Option<String>,
    pub dst: Option<String>,
    pub rte: Option<String>,
    pub priority: Option<u32>,
    pub idx: Option<u32>,
}

/// Routes as `route add|del|show` send them (lnetctl.c `yaml_lnet_route()`): the net as
/// typed, the `--gateway` nidlist expanded by the CLI (canonical NIDs), hop and priority as
/// parsed (`None` where lnetctl sends nothing: not given, not a number, or -1).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteSpec {
    pub net: Option<String>,
    pub gateways: Vec<String>,
    pub hop: Option<i64>,
    pub priority: Option<i64>,
}

/// A fault injection request: which list, and what to do with it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fault {
    pub kind: FaultKind,
    pub op: FaultOp,
}

/// What to do with the rules (the kernel's `LNET_CTL_DROP_ADD` .. `LNET_CTL_DELAY_LIST`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum FaultOp {
    Add(FaultRuleSpec),
    /// Remove the rules with these endpoints (`<?>`, the any NID, matches any).
    Del {
        source: String,
        destination: String,
    },
    /// Zero every rule's counters.
    Reset,
    Show,
}

/// A rule as lnetctl sends it: NIDs as `libcfs_nidstr()` prints them (`<?>` for any,
/// `255.255.255.255@net` for a whole net), masks and values as parsed. The node validates.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultRuleSpec {
    pub source: String,
    pub destination: String,
    pub local_nid: String,
    pub portal_mask: u64,
    pub message_mask: u32,
    pub rate: u32,
    pub interval: u32,
    /// Drop rules: health errors to simulate (`1 << status` bits, all ones for random).
    pub health_error_mask: u32,
    pub random: bool,
    pub drop_all: bool,
    /// Delay rules: seconds.
    pub latency: u32,
}

/// `net add`: lnetctl's NI request (lnetctl.c `yaml_lnet_config_ni()`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetAdd {
    /// `--net` as typed, or the net of the NIDs given with `--nid`.
    pub net: Option<String>,
    /// `--ip2net`: an ip2nets rule the node resolves against its interfaces.
    pub ip2net: Option<String>,
    /// `--if` and `--nid` entries in argument order.
    pub nis: Vec<LocalNiSpec>,
    pub tunables: TunablesSpec,
    pub lnd_tunables: LndTunablesSpec,
    /// `--cpt`, a range expression the CLI has checked (`[0,1]`, `0`, `[0-3/2]`).
    pub cpts: Option<String>,
}

/// One `local NI(s)` entry of a `net add`/`net del`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LocalNiSpec {
    /// `--if NAME[cpts]`.
    Interface { name: String, cpts: Option<String> },
    /// `--nid NID`: bring the NI up on exactly this address.
    Nid { nid: String },
}

/// `net add` common tunables; `None` keeps the LND default (lnetctl sends -1 or leaves the
/// key out).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TunablesSpec {
    pub peer_timeout: Option<i64>,
    pub peer_credits: Option<i64>,
    pub peer_buffer_credits: Option<i64>,
    pub credits: Option<i64>,
}

/// `net add` LND tunables.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LndTunablesSpec {
    /// 0..=127, checked by the CLI.
    pub conns_per_peer: Option<i64>,
    /// -1..=255, checked by the CLI.
    pub tos: Option<i64>,
    /// kfilnd only.
    pub auth_key: Option<i64>,
    /// kfilnd only.
    pub traffic_class: Option<String>,
}

/// `peer add`: what lnetctl sends to the kernel (lnetctl.c `yaml_lnet_peer()`,
/// `NLM_F_CREATE`, `NLM_F_EXCL` for `--lock_prim`). The CLI has expanded the nidlist.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerAdd {
    /// `None` without `--prim_nid` (the node answers "missing primary NID").
    pub primary_nid: Option<String>,
    /// Expanded `--nid` list, canonical NID texts.
    pub nids: Vec<String>,
    /// False with `--non_mr`.
    pub multi_rail: bool,
    /// `--lock_prim`.
    pub lock_primary: bool,
}

/// `peer del` (`yaml_lnet_peer()` without `NLM_F_CREATE`; `NLM_F_EXCL` for `--force`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerDel {
    pub primary_nid: Option<String>,
    /// Empty: the whole peer.
    pub nids: Vec<String>,
    pub force: bool,
}

/// `peer set` (`yaml_lnet_config_peer_ni_healthv()`, `NLM_F_REPLACE`). Negative or unparsed
/// values are left out by the CLI, as lnetctl sends nothing for them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerSet {
    /// `--nid`, as typed.
    pub nid: Option<String>,
    /// `--all`.
    pub all: bool,
    /// `--health`, 0 and up; the node caps it at 1000 as the kernel's setter does.
    pub health: Option<i64>,
    /// `--state`: the raw peer state bits (debug only).
    pub state: Option<i64>,
}

/// `net set --health` and `--conns-per-peer` (`yaml_lnet_config_ni_value()`,
/// `NLM_F_REPLACE`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetSet {
    /// `--nid`, as typed.
    pub nid: Option<String>,
    /// `--all`.
    pub all: bool,
    /// `--health`, 0 and up; the node caps it at 1000.
    pub health: Option<i64>,
    /// `--conns-per-peer`, 0 (auto) to 127.
    #[serde(default)]
    pub conns_per_peer: Option<i64>,
    /// `--lnd-timeout S` (0 and up, checked by the CLI) with `--net NET`: the LND timeout of
    /// that net's LND (socklnd's `sock_timeout`); 0 follows the global `lnd_timeout`.
    #[serde(default)]
    pub lnd_timeout: Option<i64>,
    /// `--net`, as typed; only with `lnd_timeout`.
    #[serde(default)]
    pub net: Option<String>,
}

/// Which recovery queue `debug recovery` lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecoveryQueue {
    Local,
    Peer,
}

/// `net del`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetDel {
    /// The whole net when `nis` is empty.
    pub net: Option<String>,
    pub nis: Vec<LocalNiSpec>,
}

/// `ping`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ping {
    /// Expanded targets, NIDs in canonical text.
    pub nids: Vec<String>,
    /// Omitted as lnetctl omits it (no `--timeout`, or `--timeout 1`): the node's default
    /// applies (180 s, lib-move.c `DEFAULT_PEER_TIMEOUT`).
    pub timeout_ms: Option<u32>,
    pub source: Option<String>,
}

/// A parameter of `lnetctl set` (lnetctl.c `set_cmds`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SetParam {
    TinyBuffers,
    SmallBuffers,
    LargeBuffers,
    Routing,
    NumaRange,
    MaxInterfaces,
    Discovery,
    DropAsymRoute,
    RetryCount,
    TransactionTimeout,
    HealthSensitivity,
    RecoveryInterval,
    RouterSensitivity,
    ResponseTracking,
    RecoveryLimit,
    MaxRecoveryPingInterval,
}

impl SetParam {
    /// In lnetctl's `set_cmds` order.
    pub const ALL: [Self; 16] = [
        Self::TinyBuffers,
        Self::SmallBuffers,
        Self::LargeBuffers,
        Self::Routing,
        Self::NumaRange,
        Self::MaxInterfaces,
        Self::Discovery,
        Self::DropAsymRoute,
        Self::RetryCount,
        Self::TransactionTimeout,
        Self::HealthSensitivity,
        Self::RecoveryInterval,
        Self::RouterSensitivity,
        Self::ResponseTracking,
        Self::RecoveryLimit,
        Self::MaxRecoveryPingInterval,
    ];

    /// The subcommand word.
    pub fn name(self) -> &'static str {
        match self {
            Self::TinyBuffers => "tiny_buffers",
            Self::SmallBuffers => "small_buffers",
            Self::LargeBuffers => "large_buffers",
            Self::Routing => "routing",
            Self::NumaRange => "numa_range",
            Self::MaxInterfaces => "max_interfaces",
            Self::Discovery => "discovery",
            Self::DropAsymRoute => "drop_asym_route",
            Self::RetryCount => "retry_count",
            Self::TransactionTimeout => "transaction_timeout",
            Self::HealthSensitivity => "health_sensitivity",
            Self::RecoveryInterval => "recovery_interval",
            Self::RouterSensitivity => "router_sensitivity",
            Self::ResponseTracking => "response_tracking",
            Self::RecoveryLimit => "recovery_limit",
            Self::MaxRecoveryPingInterval => "max_recovery_ping_interval",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|param| param.name() == name)
    }

    /// The global setting this parameter writes; `None` for routing and the buffer pools.
    pub fn global_key(self) -> Option<GlobalKey> {
        match self {
            Self::TinyBuffers | Self::SmallBuffers | Self::LargeBuffers | Self::Routing => None,
            Self::NumaRange => Some(GlobalKey::NumaRange),
            Self::MaxInterfaces => Some(GlobalKey::MaxInterfaces),
            Self::Discovery => Some(GlobalKey::Discovery),
            Self::DropAsymRoute => Some(GlobalKey::DropAsymRoute),
            Self::RetryCount => Some(GlobalKey::RetryCount),
            Self::TransactionTimeout => Some(GlobalKey::TransactionTimeout),
            Self::HealthSensitivity => Some(GlobalKey::HealthSensitivity),
            Self::RecoveryInterval => Some(GlobalKey::RecoveryInterval),
            Self::RouterSensitivity => Some(GlobalKey::RouterSensitivity),
            Self::ResponseTracking => Some(GlobalKey::ResponseTracking),
            Self::RecoveryLimit => Some(GlobalKey::RecoveryLimit),
            Self::MaxRecoveryPingInterval => Some(GlobalKey::MaxRecoveryPingInterval),
        }
    }
}

/// `import` modes (mirror of [`ulnet_config::model::ImportMode`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ImportMode {
    #[default]
    Add,
    Del,
    Show,
    Exec,
}

impl From<ImportMode> for ConfigImportMode {
    fn from(mode: ImportMode) -> Self {
        match mode {
            ImportMode::Add => Self::Add,
            ImportMode::Del => Self::Del,
            ImportMode::Show => Self::Show,
            ImportMode::Exec => Self::Exec,
        }
    }
}

impl From<ConfigImportMode> for ImportMode {
    fn from(mode: ConfigImportMode) -> Self {
        match mode {
            ConfigImportMode::Add => Self::Add,
            ConfigImportMode::Del => Self::Del,
            ConfigImportMode::Show => Self::Show,
            ConfigImportMode::Exec => Self::Exec,
        }
    }
}

impl Request {
    /// How long the node may legitimately take to answer beyond ordinary requests: pings and
    /// discoveries wait for the network. The client adds this to its timeout.
    pub fn expected_duration(&self) -> Duration {
        match self {
            Self::Ping(ping) => {
                ping.timeout_ms.map_or(DEFAULT_PING_TIMEOUT, |ms| Duration::from_millis(ms.into()))
            }
            Self::Discover { .. } => DEFAULT_PING_TIMEOUT,
            Self::Import { mode: ImportMode::Exec, .. } => DEFAULT_PING_TIMEOUT,
            _ => Duration::ZERO,
        }
    }

    /// The words of the command this request carries, for messages (`net show`).
    pub fn command_name(&self) -> &'static str {
        match self {
            Self::Configure { .. } => "lnet configure",
            Self::Unconfigure => "lnet unconfigure",
            Self::NetAdd(_) => "net add",
            Self::NetDel(_) => "net del",
            Self::NetShow { .. } => "net show",
            Self::PeerShow { .. } => "peer show",
            Self::PeerList => "peer list",
            Self::PeerAdd(_) => "peer add",
            Self::PeerDel(_) => "peer del",
            Self::PeerSet(_) => "peer set",
            Self::NetSet(_) => "net set",
            Self::DebugRecovery { .. } => "debug recovery",
            Self::Ping(_) => "ping",
            Self::Discover { .. } => "discover",
            Self::GlobalShow => "global show",
            Self::StatsShow => "stats show",
            Self::StatsReset => "stats reset",
            Self::Set { .. } => "set",
            Self::Export { .. } => "export",
            Self::Import { .. } => "import",
            Self::Fault(_) => "fault",
            Self::RouteAdd(_) => "route add",
            Self::RouteDel(_) => "route del",
            Self::RouteShow { .. } => "route show",
            Self::RoutingShow => "routing show",
            Self::Udsp(_) => "udsp",
            Self::CptOfNid { .. } => "cpt-of-nid",
            Self::PeerDist { .. } => "which_nid",
            Self::ConnList { .. } => "conn_list",
            Self::DebugPeer { .. } => "debug peer",
            Self::SysctlSetup => "setup-sysctl",
            Self::CpuPartitions => "get_param",
        }
    }
}

/// The kernel's default ping and discovery timeout (lib-move.c `DEFAULT_PEER_TIMEOUT`, 180 s).
pub const DEFAULT_PING_TIMEOUT: Duration = Duration::from_secs(180);

/// What the node answers. Each request has one success shape:
///
/// | request | response |
/// |---|---|
/// | `Configure`, `Unconfigure`, `NetAdd`, `NetDel`, `Set`, `PeerAdd`, `PeerDel`, `PeerSet`, `NetSet`, `StatsReset`, `RouteAdd`, `RouteDel`, `DebugPeer` | `Done` |
/// | `RouteShow` | `Routes` (empty: nothing printed) |
/// | `RoutingShow` | `Routing` (no pools: nothing printed) |
/// | `DebugRecovery` | `Recovery` (NIDs in queue order; empty: nothing printed) |
/// | `NetShow` | `Nets` (empty: nothing printed) |
/// | `PeerShow` | `Peers` (empty: nothing printed) |
/// | `PeerList` | `PeerList` (primary NIDs) |
/// | `Ping`, `Discover` | `Manage` |
/// | `GlobalShow` | `Global` |
/// | `StatsShow` | `Stats` |
/// | `Export` | `Export` |
/// | `Import` | `Import` |
/// | `Fault` | `Faults` for `show`, `Done` otherwise |
/// | `Udsp` | `Udsp` for `show` (empty: nothing printed), `Done` otherwise |
/// | `CptOfNid` | `CptOfNid` (in request order) |
/// | `PeerDist` | `PeerDist` (reachable NIDs, in request order) |
/// | `ConnList` | `Conns` (empty: none) |
/// | `SysctlSetup` | `SysctlSetup` |
/// | `CpuPartitions` | `CpuPartitions` |
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "data", rename_all = "snake_case")]
pub enum Response {
    Done,
    Nets(Vec<NetEntry>),
    Peers(Vec<PeerEntry>),
    PeerList(Vec<String>),
    Recovery(Vec<String>),
    Manage(ManageReply),
    Global(GlobalShow),
    Stats(StatsShow),
    Export(ExportState),
    Import(ImportReply),
    /// `fault ... show`: the rules, newest first.
    Faults(Vec<FaultRuleEntry>),
    /// `route show`: the matching routes.
    Routes(Vec<RouteEntry>),
    /// `routing show`: the pools (none when never allocated) and the routing switch.
    Routing(RoutingShow),
    /// `udsp show`: the rules, in index order.
    Udsp(Vec<UdspEntry>),
    /// `cpt-of-nid`: each NID's partition.
    CptOfNid(Vec<NidCpt>),
    /// `which_nid`: the distance of each reachable NID.
    PeerDist(Vec<NidDist>),
    /// `conn_list`: the connections, by peer.
    Conns(Vec<ConnEntry>),
    /// `setup-sysctl`: the node's `enable_sysctl_setup`.
    SysctlSetup {
        enabled: bool,
    },
    /// `get_param cpu_partition_*`: the partition table.
    CpuPartitions(CpuPartitions),
}

/// The outcome of an `import`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportReply {
    /// Warnings the node has beyond the parse (the CLI parses the input itself first and
    /// reports parse errors; the daemon must not repeat parse warnings here).
    pub warnings: Vec<String>,
    /// `--show`: the configured objects the input names.
    pub shown: ShownObjects,
    /// `--exec`: one reply per `ping:`/`discover:` block, in input order.
    pub exec: Vec<ExecReply>,
}

/// Objects an `import --show` names.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShownObjects {
    pub nets: Vec<NetEntry>,
    pub routes: Vec<RouteEntry>,
    pub peers: Vec<PeerEntry>,
    /// The rules at the `idx` of each `udsp:` item.
    #[serde(default)]
    pub udsp: Vec<UdspEntry>,
}

/// One executed `ping:` or `discover:` block.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecReply {
    pub command: ManageCommand,
    pub reply: ManageReply,
}

/// Errno values (Linux) the protocol names. Error fields carry them negated, as the kernel
/// reports them and lnetctl prints them.
pub mod errno {
    pub const EPERM: i32 = 1;
    pub const ENOENT: i32 = 2;
    pub const EIO: i32 = 5;
    pub const EAGAIN: i32 = 11;
    pub const ENOMEM: i32 = 12;
    pub const EBUSY: i32 = 16;
    pub const EEXIST: i32 = 17;
    pub const ENODEV: i32 = 19;
    pub const EINVAL: i32 = 22;
    pub const ENOSPC: i32 = 28;
    pub const ERANGE: i32 = 34;
    pub const ENODATA: i32 = 61;
    pub const EPROTO: i32 = 71;
    pub const EMSGSIZE: i32 = 90;
    pub const EOPNOTSUPP: i32 = 95;
    pub const ENETDOWN: i32 = 100;
    pub const ECONNRESET: i32 = 104;
    pub const ETIMEDOUT: i32 = 110;
    pub const EHOSTUNREACH: i32 = 113;
    pub const EALREADY: i32 = 114;
}

/// Why the node did not do what was asked. Every variant has a negative errno
/// ([`ControlError::errno`]) and a description ([`ControlError::descr`], the `Display` text):
/// the two things lnetctl's error reports print.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "error", rename_all = "snake_case")]
pub enum ControlError {
    /// LNet is not running (no `lnet configure` yet, or `lnet unconfigure`): `-ENETDOWN`,
    /// "Network is down", as the kernel answers (api-ni.c, `!the_lnet.ln_refcount`).
    #[error("Network is down")]
    NotConfigured,
    /// The node refused the operation as a kernel handler does: the errno and the extended
    /// ACK message lnetctl prints as `descr` (e.g. -22, "cannot parse net").
    #[error("{descr}")]
    Refused { errno: i32, descr: String },
    /// A global setting was refused (`set`, `global:` in an import): ulnet-config's
    /// [`GlobalError`] as lnetctl reports it (`add: - <entity>: ...`).
    #[error("{descr}")]
    Global { entity: String, errno: i32, descr: String },
    /// The import input was refused: [`ImportError`]'s text and errno.
    #[error("{descr}")]
    Import { errno: i32, descr: String },
    /// The node does not implement this yet: `-EOPNOTSUPP`.
    #[error("{what} is not supported by ulnetd")]
    Unsupported { what: String },
    /// The node could not read the request (malformed or oversized frame): `-EINVAL`.
    #[error("bad request: {reason}")]
    BadRequest { reason: String },
    /// Client and daemon speak different protocol versions: `-EPROTO`.
    #[error("ulnetd speaks control protocol version {server}, this client {client}")]
    VersionMismatch { server: u32, client: u32 },
    /// Too many clients at once: `-EAGAIN`.
    #[error("ulnetd is busy: too many control connections")]
    Busy,
    /// The handler failed unexpectedly: `-EIO`.
    #[error("internal error in ulnetd: {reason}")]
    Internal { reason: String },
}

impl ControlError {
    /// The negative errno of the report.
    pub fn errno(&self) -> i32 {
        match self {
            Self::NotConfigured => -errno::ENETDOWN,
            Self::Refused { errno, .. }
            | Self::Global { errno, .. }
            | Self::Import { errno, .. } => *errno,
            Self::Unsupported { .. } => -errno::EOPNOTSUPP,
            Self::BadRequest { .. } => -errno::EINVAL,
            Self::VersionMismatch { .. } => -errno::EPROTO,
            Self::Busy => -errno::EAGAIN,
            Self::Internal { .. } => -errno::EIO,
        }
    }

    /// The description lnetctl prints (`descr:`).
    pub fn descr(&self) -> String {
        self.to_string()
    }

    /// `Refused` with a positive errno constant from [`errno`].
    pub fn refused(positive_errno: i32, descr: impl Into<String>) -> Self {
        Self::Refused { errno: -positive_errno, descr: descr.into() }
    }
}

impl From<&GlobalError> for ControlError {
    fn from(error: &GlobalError) -> Self {
        Self::Global {
            entity: error.entity.to_string(),
            errno: error.rc,
            descr: error.descr.clone(),
        }
    }
}

impl From<&ImportError> for ControlError {
    fn from(error: &ImportError) -> Self {
        Self::Import { errno: error.errno(), descr: error.to_string() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_params_round_trip_by_name() {
        for param in SetParam::ALL {
            assert_eq!(SetParam::from_name(param.name()), Some(param));
        }
        assert_eq!(SetParam::from_name("lnd_timeout"), None);
    }

    #[test]
    fn set_params_map_to_every_settable_global() {
        let keys: Vec<GlobalKey> = SetParam::ALL.iter().filter_map(|p| p.global_key()).collect();
        for key in GlobalKey::ALL {
            // lnd_timeout is derived, not settable (lnetctl has no `set lnd_timeout`).
            assert_eq!(keys.contains(&key), key != GlobalKey::LndTimeout, "{key:?}");
        }
        for param in SetParam::ALL {
            if let Some(key) = param.global_key() {
                assert_eq!(key.name(), param.name());
            }
        }
    }

    #[test]
    fn errors_carry_negative_errnos() {
        assert_eq!(ControlError::NotConfigured.errno(), -100);
        assert_eq!(ControlError::NotConfigured.descr(), "Network is down");
        assert_eq!(ControlError::refused(errno::EINVAL, "cannot parse net").errno(), -22);
        assert_eq!(ControlError::Unsupported { what: "routing".into() }.errno(), -95);
        assert_eq!(ControlError::Busy.errno(), -11);
    }

    #[test]
    fn global_errors_convert_with_their_entity() {
        let mut settings = ulnet_config::model::GlobalSettings::default();
        let error = settings.set(GlobalKey::MaxRecoveryPingInterval, 0).unwrap_err();
        let control = ControlError::from(&error);
        assert_eq!(
            control,
            ControlError::Global {
                entity: "maximum recovery ping interval".into(),
                errno: -22,
                descr: "must be strictly positive".into(),
            }
        );
    }

    #[test]
    fn ping_duration_follows_the_timeout() {
        let ping = Request::Ping(Ping { timeout_ms: Some(2500), ..Ping::default() });
        assert_eq!(ping.expected_duration(), Duration::from_millis(2500));
        let ping = Request::Ping(Ping::default());
        assert_eq!(ping.expected_duration(), DEFAULT_PING_TIMEOUT);
        assert_eq!(Request::PeerList.expected_duration(), Duration::ZERO);
    }
}
