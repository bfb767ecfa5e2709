//! The live node behind the control socket: its configuration (nets and global settings),
//! the running [`Node`], and the answer to every control request, in the shapes `ulnetctl`
//! renders. This plays the kernel's part of lnetctl's commands (lnet/lnet/api-ni.c netlink
//! handlers and module parameter setters).
//!
//! # Concurrency
//!
//! The control server calls [`LiveNode::handle`] from one thread per connection. The
//! configuration sits behind one mutex, held for the length of a change (including a
//! rebuild of the node); queries and pings clone the [`Node`] handle (every call on it is
//! thread-safe) and let the mutex go, so a slow ping never blocks `net show`.
//!
//! # Changing NIs
//!
//! `net add`, `net del` and `import --add/--del` of nets change the running node's NIs in
//! place ([`Node::add_tcp_ni`], [`Node::remove_ni`], see `live/nets_live.rs`): other NIs'
//! connections, peers (configured or discovered), counters and the interface cookie stay,
//! and peers learn the new NI list by push, as with the kernel's `lnet_dyn_add_ni()` /
//! `lnet_dyn_del_ni()`. The node is rebuilt only where that cannot be done in place: NIs on
//! the in-process fabric (fixed at build), a net whose tunables would change, and
//! `lnet configure`, which starts LNet. A rebuild shuts the old node down (its messages in
//! flight are finalized with an error, its connections close) and starts a new one with a
//! new interface cookie and zeroed counters, carrying configured peers, routes, the routing
//! state (`live/routing.rs`) and UDSP rules (`live/policies.rs`) over; a failed one brings
//! the previous configuration back up. Global settings change live
//! ([`Node::set_tunables`]).

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use ulnet::proto::addr::NidRange;
use ulnet::proto::engine::tunables::{PortalRotor, RouterTunables};
use ulnet::proto::engine::{
    DiscoverError as EngineDiscoverError, PingFailure as EnginePingFailure,
    PingReply as EnginePingReply, PingStartError,
};
use ulnet::{
    BuildError, ConnsPerPeer, DiscoverError, LNET_PID_ANY, LndKind, MemFabric, NiConfig, Node,
    NodeBuilder, PingError, ProcessId, ResponseTracking, Tunables,
};
use ulnet_config::model::{
    self, Config, ExecCommand, GlobalSettings, HostInterface, LocalNiConfig, NetConfig,
};
use ulnet_config::render;
use ulnet_control::data::{
    self, ExportState, ManageCommand, ManageReply, PingFailure, PingReply, StatsShow,
};
use ulnet_control::message::{
    DEFAULT_PING_TIMEOUT, ExecReply, ImportMode, ImportReply, LocalNiSpec, NetAdd, NetDel, Ping,
    SetParam, ShownObjects, errno,
};
use ulnet_control::{ControlError, Request, Response};
use ulnet_proto::addr::{Net, Nid};

use crate::config::{TcpSettings, ip2net_specs, merge_net, unsupported_keys, unsupported_sections};
use crate::interfaces::host_interfaces;
use crate::modprobe::PartitionLayout;
use crate::nets::{
    NetError, NetSpec, SocklndTunables, bind_cpts, cpt_list, parse_cpt_text, resolve_net,
    with_lnd_defaults,
};
use crate::view;

mod admin;
mod faults;
mod lctl;
mod nets_live;
mod policies;
mod reload;
mod routing;

pub use routing::BootRouting;
use routing::{RoutingSnapshot, route_entries, routing_view, set_peer_states};

/// Which LND serves the node's tcp NIs.
#[derive(Clone, Debug)]
#[expect(
    clippy::large_enum_variant,
    reason = "one per daemon, made once at start-up: boxing the TCP settings buys nothing"
)]
pub enum LndChoice {
    /// socklnd over real TCP sockets.
    Tcp(TcpSettings),
    /// The in-process fabric: nodes of one process only (tests, the demo without sockets).
    Mem(MemFabric),
}

/// The node and its configuration, shared by the control connections.
#[derive(Debug)]
pub struct LiveNode {
    lnd: LndChoice,
    /// The CPU partitions, fixed at start as the kernel's are at module load: their CPUs,
    /// where their I/O threads are pinned, and their NUMA nodes, which bind an NI added
    /// without CPTs near its device.
    layout: PartitionLayout,
    /// The nets `lnet configure --all` brings up: the configuration file's, as the kernel
    /// brings up its `networks=` module parameter (a reload replaces them).
    boot_nets: Mutex<Vec<NetSpec>>,
    /// Whether the node hosts the selftest service (`lnet_selftest` in the configuration).
    selftest: bool,
    /// lnet's `enable_sysctl_setup` module parameter is 1: `setup-sysctl` tunes the host.
    enable_sysctl_setup: bool,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// `None` while LNet is unconfigured (`lnet unconfigure`, or a failed rebuild).
    node: Option<Node>,
    /// The lnet_selftest service hosted on `node` (every kernel node runs it when the
    /// lnet_selftest module is loaded; ulnetd does unless configured `lnet_selftest: false`).
    /// Replaced with the node.
    selftest: Option<ulnet_selftest::SelftestService>,
    nets: Vec<NetSpec>,
    settings: GlobalSettings,
    /// Whether the router buffer pools exist: from the first time routing is enabled until
    /// `lnet unconfigure` (`ln_rtrpools`; `routing show` prints nothing without them).
    pools_allocated: bool,
    /// The configuration file's routing blocks, applied again when LNet starts.
    boot_routing: BootRouting,
    /// Set by [`LiveNode::shutdown`]: no more changes.
    stopping: bool,
}

impl LiveNode {
    /// Builds the node with `nets` and `settings`, hosting the selftest service if `selftest`.
    pub fn start(
        lnd: LndChoice,
        layout: PartitionLayout,
        nets: Vec<NetSpec>,
        settings: GlobalSettings,
        selftest: bool,
    ) -> Result<Self, BuildError> {
        let node = build_node(&lnd, &layout, &nets, &settings)?;
        tracing::info!(nids = %nid_list(&node.nids()), "node up");
        Ok(Self {
            lnd,
            layout,
            boot_nets: Mutex::new(nets.clone()),
            selftest,
            enable_sysctl_setup: false,
            state: Mutex::new(State {
                selftest: host_selftest(&node, selftest),
                node: Some(node),
                nets,
                settings,
                pools_allocated: false,
                boot_routing: BootRouting::default(),
                stopping: false,
            }),
        })
    }

    /// Sets what `enable_sysctl_setup` said (module parameters are read once, at start).
    pub fn with_sysctl_setup(mut self, enabled: bool) -> Self {
        self.enable_sysctl_setup = enabled;
        self
    }

    /// `cpt-of-nid`: the kernel's hash of each NID over all the node's partitions (no NI
    /// involved). lustre: api-ni.c `lnet_cpt_of_nid_show_start()`,
    /// `lnet_cpt_of_nid_show_dump()`.
    fn cpt_of_nid(&self, nids: &[String]) -> Result<Response, ControlError> {
        if self.lock().node.is_none() {
            return Err(ControlError::NotConfigured);
        }
        if nids.is_empty() {
            return Err(ControlError::refused(errno::ENOENT, "Missing NID argument(s)"));
        }
        if nids.len() > ulnet_control::message::MAX_CPT_OF_NID {
            return Err(ControlError::refused(errno::EINVAL, "too many NIDs"));
        }
        let count = self.layout.partitions.count();
        let answers = nids
            .iter()
            .map(|text| {
                let nid: Nid = text
                    .trim()
                    .parse()
                    .map_err(|_| ControlError::refused(errno::EINVAL, "invalid NID"))?;
                let cpt = ulnet_proto::engine::cpt::nid_cpt_hash(&nid, count);
                Ok(ulnet_control::message::NidCpt { nid: nid.to_string(), cpt })
            })
            .collect::<Result<Vec<_>, ControlError>>()?;
        Ok(Response::CptOfNid(answers))
    }

    /// ksocklnd's module parameters (the in-process fabric has none: socklnd's defaults).
    fn socklnd_module(&self) -> ulnet_config::modprobe::SocklndModule {
        match &self.lnd {
            LndChoice::Tcp(tcp) => tcp.socklnd,
            LndChoice::Mem(_) => ulnet_config::modprobe::SocklndModule::default(),
        }
    }

    /// Whether the selftest service runs on the node now (configured on, LNet up, started).
    pub fn hosts_selftest(&self) -> bool {
        self.lock().selftest.is_some()
    }

    /// The hosted selftest service's state lock, counted; `None` while it does not run.
    pub fn selftest_lock_stats(&self) -> Option<ulnet_selftest::EndpointLockStats> {
        self.lock().selftest.as_ref().map(ulnet_selftest::SelftestService::lock_stats)
    }

    /// A handle on the running node, `None` while unconfigured.
    pub fn node(&self) -> Option<Node> {
        self.lock().node.clone()
    }

    /// The running node's NIDs, `0@lo` first; empty while unconfigured.
    pub fn nids(&self) -> Vec<Nid> {
        self.node().map(|node| node.nids()).unwrap_or_default()
    }

    /// Shuts the node down (messages in flight finalized with an error, connections
    /// closed); later requests are answered "Network is down".
    pub fn shutdown(&self) {
        let node = {
            let mut state = self.lock();
            state.stopping = true;
            state.selftest = None;
            state.node.take()
        };
        if let Some(node) = node {
            node.shutdown();
            tracing::info!("node shut down");
        }
    }

    /// Answers one control request.
    pub fn handle(&self, request: Request) -> Result<Response, ControlError> {
        tracing::debug!(command = request.command_name(), "control request");
        let result = match request {
            Request::Configure { all, large_nids: _ } => self.configure(all),
            Request::Unconfigure => self.unconfigure(),
            Request::GlobalShow => Ok(Response::Global(self.lock().settings.show().into())),
            Request::Set { param, value } => self.set(param, value),
            Request::NetAdd(add) => self.net_add(&add),
            Request::NetDel(del) => self.net_del(&del),
            Request::NetShow { net, level: _ } => self.net_show(net.as_deref()),
            Request::PeerShow { nid, level: _ } => self.peer_show(nid.as_deref()),
            Request::PeerList => self.peer_list(),
            Request::PeerAdd(add) => self.peer_add(&add),
            Request::PeerDel(del) => self.peer_del(&del),
            Request::PeerSet(set) => self.peer_set(&set),
            Request::NetSet(set) => self.net_set(&set),
            Request::DebugRecovery { queue } => self.debug_recovery(queue),
            Request::Ping(ping) => self.ping(&ping),
            Request::Discover { nids, force } => self.discover(&nids, force),
            Request::StatsShow => self.stats_show(),
            Request::StatsReset => self.stats_reset(),
            Request::Export { backup: _ } => self.export().map(Response::Export),
            Request::Import { mode, text } => self.import(mode, &text).map(Response::Import),
            Request::Fault(fault) => self.fault(&fault),
            Request::RouteAdd(spec) => self.route_add(&spec),
            Request::RouteDel(spec) => self.route_del(&spec),
            Request::RouteShow { filter, verbose: _ } => self.route_show(&filter),
            Request::RoutingShow => self.routing_show(),
            Request::Udsp(udsp) => self.udsp(&udsp),
            Request::CptOfNid { nids } => self.cpt_of_nid(&nids),
            Request::PeerDist { nids } => self.peer_dist(&nids),
            Request::ConnList { net } => self.conn_list(net.as_deref()),
            Request::DebugPeer { nid } => self.debug_peer(&nid),
            Request::SysctlSetup => Ok(self.sysctl_setup()),
            Request::CpuPartitions => self.cpu_partitions(),
        };
        if let Err(error) = &result {
            tracing::debug!(%error, errno = error.errno(), "control request refused");
        }
        result
    }

    // ------------------------------------------------------------------------ lnet

    /// `lnet configure [--all]`: brings LNet up with `lo` only, or with the configuration
    /// file's nets; on a running node `--all` adds those of them that are missing. Starting
    /// LNet applies the configuration file's buffers and routing again, and with `--all` its
    /// routes, as the kernel reads its module parameters.
    /// lustre: api-ni.c `lnet_configure()`, `lnet_net_conf_cmd()`; router.c
    /// `lnet_rtrpools_alloc()`.
    fn configure(&self, all: bool) -> Result<Response, ControlError> {
        let mut state = self.lock_unless_stopping()?;
        let starting = state.node.is_none();
        let mut nets = if state.node.is_some() { state.nets.clone() } else { Vec::new() };
        if all {
            let boot_nets = self.boot_nets.lock().unwrap_or_else(PoisonError::into_inner).clone();
            for net in &boot_nets {
                let mut missing = net.clone();
                missing.nis.retain(|ni| !has_nid(&nets, ni.nid));
                if !missing.nis.is_empty() {
                    merge_net(&mut nets, missing).map_err(|error| error.to_control())?;
                }
            }
        }
        if state.node.is_some() && nets == state.nets {
            return Ok(Response::Done);
        }
        self.rebuild(&mut state, nets)?;
        if starting {
            let mut boot = state.boot_routing.clone();
            drop(state);
            if !all {
                boot.routes.clear();
            }
            self.apply_routing_blocks(&boot.routes, boot.enable, boot.buffers, true)?;
        }
        Ok(Response::Done)
    }

    /// `lnet unconfigure`: every NI goes down; the global settings stay. Unconfiguring a
    /// node that is down succeeds, as in the kernel. lustre: api-ni.c `lnet_unconfigure()`.
    fn unconfigure(&self) -> Result<Response, ControlError> {
        let node = {
            let mut state = self.lock_unless_stopping()?;
            state.nets.clear();
            state.selftest = None;
            state.pools_allocated = false;
            state.node.take()
        };
        if let Some(node) = node {
            node.shutdown();
            tracing::info!("LNet unconfigured");
        }
        Ok(Response::Done)
    }

    // ------------------------------------------------------------------------ settings

    /// `set <param> <value>`: lnetctl's and the kernel's checks (ulnet-config's
    /// `GlobalSettings`), then the engine's tunables live (`transaction_timeout`,
    /// `retry_count`, `health_sensitivity`, `response_tracking`, `discovery`, `numa_range`,
    /// `recovery_limit`, `max_recovery_ping_interval`). Keys the engine has no behaviour for
    /// (`max_interfaces`, `drop_asym_route`, `router_sensitivity`, the deprecated
    /// `recovery_interval`) are kept and shown, as the kernel keeps its module parameters.
    /// Routing and the router buffers go to the engine's routing (`live/routing.rs`).
    fn set(&self, param: SetParam, value: i64) -> Result<Response, ControlError> {
        let Some(key) = param.global_key() else {
            return self.set_routing_param(param, value);
        };
        let mut state = self.lock_unless_stopping()?;
        let mut settings = state.settings;
        settings.set(key, value).map_err(|error| ControlError::from(&error))?;
        if let Some(node) = &state.node {
            node.set_tunables(engine_tunables(&settings)).map_err(|error| {
                // The engine also refuses retry_count == transaction_timeout, which the
                // kernel's setter allows; reported as the kernel reports a refused write.
                ControlError::Global {
                    entity: key.name().to_string(),
                    errno: -errno::ENODATA,
                    descr: format!("cannot configure {}: {error}", key.name()),
                }
            })?;
        }
        state.settings = settings;
        tracing::info!(param = param.name(), value, "global setting changed");
        Ok(Response::Done)
    }

    // ------------------------------------------------------------------------ net

    /// `net add`. lustre: api-ni.c `lnet_net_cmd()`, `lnet_dyn_add_ni()`.
    fn net_add(&self, add: &NetAdd) -> Result<Response, ControlError> {
        let mut state = self.lock_running()?;
        let host = host()?;
        let socklnd = self.socklnd_module();
        let mut specs = match &add.ip2net {
            Some(rule) => {
                ip2net_specs(rule, &host, &socklnd).map_err(|error| error.to_control())?
            }
            None => {
                let config = net_config_of(add).map_err(|error| error.to_control())?;
                let config = with_lnd_defaults(&config, &socklnd);
                vec![resolve_net(&config, &host).map_err(|error| error.to_control())?]
            }
        };
        bind_cpts(&mut specs, self.layout.partitions, &self.layout.numa)
            .map_err(|error| error.to_control())?;
        let mut nets = state.nets.clone();
        for spec in specs {
            merge_net(&mut nets, spec).map_err(|error| error.to_control())?;
        }
        self.change_nets(&mut state, nets)?;
        Ok(Response::Done)
    }

    /// `net del`: a whole net, or the NIs named by interface or NID.
    /// lustre: api-ni.c `lnet_net_cmd()`, `lnet_dyn_del_net()`, `lnet_dyn_del_ni()`.
    fn net_del(&self, del: &NetDel) -> Result<Response, ControlError> {
        let mut state = self.lock_running()?;
        let net = parse_net(del.net.as_deref().unwrap_or(""))?;
        let mut nets = state.nets.clone();
        remove_nis(&mut nets, net, &del.nis)?;
        self.change_nets(&mut state, nets)?;
        Ok(Response::Done)
    }

    /// `net show [--net NET]`; the verbosity only changes what the CLI prints.
    fn net_show(&self, filter: Option<&str>) -> Result<Response, ControlError> {
        let mut nets = self.net_entries()?;
        if let Some(text) = filter {
            // lustre: api-ni.c `lnet_net_show_start()`: "cannot parse net", -ENOENT.
            let net: Net = text
                .parse()
                .map_err(|_| ControlError::refused(errno::ENOENT, "cannot parse net"))?;
            nets.retain(|entry| entry.net == net);
            if nets.is_empty() {
                return Err(ControlError::refused(errno::ENETDOWN, "Network is down"));
            }
        }
        Ok(Response::Nets(nets.iter().map(data::NetEntry::from).collect()))
    }

    // ------------------------------------------------------------------------ peers

    /// `peer show [--nid NID]`: the peer owning the NID, or every peer.
    /// lustre: api-ni.c `lnet_peer_ni_show_start()` ("invalid NID", "cannot find peer").
    fn peer_show(&self, filter: Option<&str>) -> Result<Response, ControlError> {
        let (node, nets, _) = self.snapshot()?;
        let mut peers = peer_entries(&node);
        set_peer_states(&node, &nets, &mut peers);
        if let Some(text) = filter {
            let nid: Nid =
                text.parse().map_err(|_| ControlError::refused(errno::EINVAL, "invalid NID"))?;
            peers.retain(|peer| peer.nis.iter().any(|ni| ni.nid == nid));
            if peers.is_empty() {
                return Err(ControlError::refused(errno::ENOENT, "cannot find peer"));
            }
        }
        Ok(Response::Peers(peers.iter().map(data::PeerEntry::from).collect()))
    }

    /// `peer list`: primary NIDs.
    fn peer_list(&self) -> Result<Response, ControlError> {
        let peers = peer_entries(&self.running_node()?);
        Ok(Response::PeerList(peers.iter().map(|peer| peer.primary_nid.to_string()).collect()))
    }

    // ------------------------------------------------------------------------ ping

    /// `ping NIDS [--timeout] [--source]`: one GET of each target's ping buffer, one after
    /// the other as the kernel's dump does; answers and failures are both reported.
    /// lustre: api-ni.c `lnet_ping_show_start()`, `lnet_ping_show_dump()`, `lnet_ping()`.
    fn ping(&self, ping: &Ping) -> Result<Response, ControlError> {
        let node = self.running_node()?;
        let source = match &ping.source {
            Some(text) => Some(
                text.parse::<Nid>()
                    .map_err(|_| ControlError::refused(errno::EINVAL, "invalid source nid"))?,
            ),
            None => None,
        };
        let targets = parse_targets(&ping.nids)?;
        let timeout = ping_timeout(ping.timeout_ms);
        let mut reply = ManageReply::default();
        for nid in targets {
            match node.ping(ProcessId::new(nid, LNET_PID_ANY), timeout, source) {
                Ok(answer) => reply.replies.push(ping_reply(&node, nid, &answer)),
                Err(PingError::ShutDown) => return Err(ControlError::NotConfigured),
                Err(error) => {
                    tracing::debug!(%nid, %error, "ping failed");
                    reply.failures.push(failure(nid, ping_errno(&error)));
                }
            }
        }
        Ok(Response::Manage(reply))
    }

    /// `discover [--force] NIDS`: discovers the peer owning each NID and lists its NIs.
    /// Our own NIDs are answered from the node's own configuration (the kernel discovers
    /// itself through `0@lo`; the engine keeps no peer for itself).
    /// lustre: api-ni.c `lnet_net_discover()` (the `discover` handler), `lnet_discover()`.
    fn discover(&self, nids: &[String], force: bool) -> Result<Response, ControlError> {
        let node = self.running_node()?;
        let targets = parse_targets(nids)?;
        let mut reply = ManageReply::default();
        for nid in targets {
            match node.discover(nid, force) {
                Ok(peer) => reply.replies.push(PingReply {
                    primary_nid: peer.primary_nid.to_string(),
                    multi_rail: peer.multi_rail(),
                    nids: peer.nis.iter().map(|ni| ni.nid.to_string()).collect(),
                }),
                Err(DiscoverError::Start(EngineDiscoverError::LocalNid(_))) => {
                    reply.replies.push(self_reply(&node));
                }
                Err(DiscoverError::ShutDown) => return Err(ControlError::NotConfigured),
                Err(error) => {
                    tracing::debug!(%nid, %error, "discovery failed");
                    reply.failures.push(failure(nid, discover_errno(&error)));
                }
            }
        }
        Ok(Response::Manage(reply))
    }

    // ------------------------------------------------------------------------ stats, export

    fn stats_show(&self) -> Result<Response, ControlError> {
        let stats = self.running_node()?.stats();
        Ok(Response::Stats(StatsShow::from(&stats.global)))
    }

    /// `stats reset` (api-ni.c `lnet_reset_stats` via IOC_LIBCFS_RESET_LNET_STATS).
    fn stats_reset(&self) -> Result<Response, ControlError> {
        self.running_node()?.reset_stats().map_err(|_| ControlError::NotConfigured)?;
        Ok(Response::Done)
    }

    /// `export`: everything live; `--backup` filtering is the renderer's.
    fn export(&self) -> Result<ExportState, ControlError> {
        let (node, nets, settings) = self.snapshot()?;
        let routing = routing_view(&self.lock(), &node);
        let stats = node.stats();
        let udsp = |nid, remote| node.udsp_info(nid, remote);
        let mut peers = view::peer_entries(&stats, |nid| node.peer_info(nid), udsp);
        set_peer_states(&node, &nets, &mut peers);
        let state = render::ExportState {
            nets: view::net_entries(
                &nets,
                &stats,
                |nid| node.conns_per_peer(nid),
                |nid| node.lnd_timeout(nid),
                udsp,
                node.partitions().count(),
            ),
            routes: route_entries(&node),
            peers,
            routing,
            global: settings.show(),
            udsp: node
                .udsp_rules()
                .iter()
                .enumerate()
                .map(|(at, rule)| render::UdspEntry::new(at, rule))
                .collect(),
        };
        Ok(ExportState::from(&state))
    }

    // ------------------------------------------------------------------------ import

    /// `import [--add|--del|--show|--exec]`. The CLI has parsed the input already and
    /// reported its warnings; parsing again here is the node's own check.
    fn import(&self, mode: ImportMode, text: &str) -> Result<ImportReply, ControlError> {
        let imported =
            model::import(text, mode.into()).map_err(|error| ControlError::from(&error))?;
        if matches!(mode, ImportMode::Add | ImportMode::Del) {
            // Refused before anything is applied: what the node cannot honour is never
            // half-done or silently dropped. Keys lnetctl warns about were reported by the CLI.
            let mut refused = unsupported_sections(&imported);
            refused.extend(unsupported_keys(&imported, false));
            if !refused.is_empty() {
                let lines: Vec<String> = refused.iter().map(ToString::to_string).collect();
                return Err(ControlError::refused(errno::EOPNOTSUPP, lines.join("; ")));
            }
        }
        let config = imported.config;
        match mode {
            ImportMode::Add => self.import_add(&config),
            ImportMode::Del => self.import_del(&config),
            ImportMode::Show => self.import_show(&config),
            ImportMode::Exec => self.import_exec(&config),
        }
    }

    fn import_add(&self, config: &Config) -> Result<ImportReply, ControlError> {
        policies::check_udsp_items(&config.udsp)?;
        let mut state = self.lock_unless_stopping()?;
        let mut settings = state.settings;
        settings.apply(config).map_err(|error| ControlError::from(&error))?;
        let mut nets = state.nets.clone();
        let wants_nets = !config.nets.is_empty() || !config.ip2nets.is_empty();
        if wants_nets {
            if state.node.is_none() {
                return Err(ControlError::NotConfigured);
            }
            let host = host()?;
            let mut items = config.nets.clone();
            if !config.ip2nets.is_empty() {
                let resolved = model::resolve_ip2nets(&config.ip2nets, &host)
                    .map_err(|error| ControlError::refused(errno::EINVAL, error.to_string()))?;
                items.extend(resolved);
            }
            let socklnd = self.socklnd_module();
            for item in &items {
                let item = with_lnd_defaults(item, &socklnd);
                let spec = resolve_net(&item, &host).map_err(|error| import_error(&error))?;
                let mut specs = [spec];
                bind_cpts(&mut specs, self.layout.partitions, &self.layout.numa)
                    .map_err(|error| import_error(&error))?;
                let [spec] = specs;
                merge_net(&mut nets, spec).map_err(|error| import_error(&error))?;
            }
        }
        if let Some(node) = &state.node {
            node.set_tunables(engine_tunables(&settings))
                .map_err(|error| ControlError::refused(errno::EINVAL, error.to_string()))?;
        }
        state.settings = settings;
        if wants_nets {
            self.change_nets(&mut state, nets)?;
        }
        // Routing and peer calls take the node handle themselves; the state lock is not
        // needed. Routes go first, as `route:` comes before `peer:` in an export.
        drop(state);
        self.import_routing(config, false)?;
        if !config.peers.is_empty() {
            self.add_peers(&config.peers)?;
        }
        // Last, as in an export: rules reach the peers just added.
        if !config.udsp.is_empty() {
            self.import_udsp(&config.udsp)?;
        }
        Ok(ImportReply::default())
    }

    /// `import --exec`: each `ping:` and `discover:` block in order, as the commands would.
    fn import_exec(&self, config: &Config) -> Result<ImportReply, ControlError> {
        let mut exec = Vec::new();
        for command in &config.exec {
            let (kind, response) = match command {
                ExecCommand::Ping { nids, timeout, source } => {
                    let ping = Ping {
                        nids: nids.clone(),
                        timeout_ms: timeout.and_then(|ms| u32::try_from(ms).ok()),
                        source: source.clone(),
                    };
                    (ManageCommand::Ping, self.ping(&ping)?)
                }
                ExecCommand::Discover { nids } => {
                    (ManageCommand::Discover, self.discover(nids, false)?)
                }
            };
            if let Response::Manage(reply) = response {
                exec.push(ExecReply { command: kind, reply });
            }
        }
        Ok(ImportReply { exec, ..ImportReply::default() })
    }

    /// `import --del`: the nets (or the NIs) named go; `numa_range`, `max_interfaces` and
    /// `discovery` return to their defaults (docs/protocol/cli.md §4.5).
    fn import_del(&self, config: &Config) -> Result<ImportReply, ControlError> {
        let mut state = self.lock_unless_stopping()?;
        let mut settings = state.settings;
        for (key, _) in &config.global {
            if let Some(value) = key.deleted_value() {
                settings.set(*key, value).map_err(|error| ControlError::from(&error))?;
            }
        }
        if config.numa_range.is_some() {
            settings
                .set(model::GlobalKey::NumaRange, 0)
                .map_err(|error| ControlError::from(&error))?;
        }
        let mut nets = state.nets.clone();
        for item in &config.nets {
            let specs = local_ni_specs(&item.nis);
            remove_nis(&mut nets, item.net, &specs)?;
        }
        state.settings = settings;
        if nets != state.nets {
            if state.node.is_none() {
                return Err(ControlError::NotConfigured);
            }
            self.change_nets(&mut state, nets)?;
        }
        drop(state);
        // Routes go before peers: a gateway's peer cannot be deleted while a route uses it.
        self.import_routing(config, true)?;
        if !config.peers.is_empty() {
            self.delete_peers(&config.peers)?;
        }
        if !config.udsp.is_empty() {
            self.import_del_udsp(&config.udsp)?;
        }
        Ok(ImportReply::default())
    }

    /// `import --show`: the configured nets, routes and peers the input names.
    fn import_show(&self, config: &Config) -> Result<ImportReply, ControlError> {
        let (node, nets, _) = self.snapshot()?;
        let stats = node.stats();
        let udsp = |nid, remote| node.udsp_info(nid, remote);
        let mut peers = view::peer_entries(&stats, |nid| node.peer_info(nid), udsp);
        set_peer_states(&node, &nets, &mut peers);
        let nets: Vec<data::NetEntry> = view::net_entries(
            &nets,
            &stats,
            |nid| node.conns_per_peer(nid),
            |nid| node.lnd_timeout(nid),
            udsp,
            node.partitions().count(),
        )
        .iter()
        .filter(|entry| config.nets.iter().any(|item| item.net == entry.net))
        .map(data::NetEntry::from)
        .collect();
        let peers: Vec<data::PeerEntry> = peers
            .iter()
            .filter(|peer| config.peers.iter().any(|item| item.primary_nid == peer.primary_nid))
            .map(data::PeerEntry::from)
            .collect();
        let routes: Vec<data::RouteEntry> = route_entries(&node)
            .iter()
            .filter(|route| {
                config
                    .routes
                    .iter()
                    .any(|item| item.net == route.net && item.gateway == route.gateway)
            })
            .map(data::RouteEntry::from)
            .collect();
        let udsp = config
            .udsp
            .iter()
            .flat_map(|item| policies::shown_rules(&node, u32::try_from(item.idx).ok()))
            .collect();
        let shown = ShownObjects { nets, routes, peers, udsp };
        Ok(ImportReply { shown, ..ImportReply::default() })
    }

    // ------------------------------------------------------------------------ internals

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every update of the state is a whole-value assignment after the checks, so a
        // panicking holder cannot leave it half-changed.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The state, for changes that need LNet up.
    fn lock_running(&self) -> Result<MutexGuard<'_, State>, ControlError> {
        let state = self.lock_unless_stopping()?;
        if state.node.is_none() {
            return Err(ControlError::NotConfigured);
        }
        Ok(state)
    }

    /// The state, for changes allowed while LNet is down (not while the daemon stops).
    fn lock_unless_stopping(&self) -> Result<MutexGuard<'_, State>, ControlError> {
        let state = self.lock();
        if state.stopping {
            return Err(ControlError::NotConfigured);
        }
        Ok(state)
    }

    fn running_node(&self) -> Result<Node, ControlError> {
        self.node().ok_or(ControlError::NotConfigured)
    }

    fn snapshot(&self) -> Result<(Node, Vec<NetSpec>, GlobalSettings), ControlError> {
        let state = self.lock();
        let node = state.node.clone().ok_or(ControlError::NotConfigured)?;
        Ok((node, state.nets.clone(), state.settings))
    }

    fn net_entries(&self) -> Result<Vec<render::NetEntry>, ControlError> {
        let (node, nets, _) = self.snapshot()?;
        Ok(view::net_entries(
            &nets,
            &node.stats(),
            |nid| node.conns_per_peer(nid),
            |nid| node.lnd_timeout(nid),
            |nid, remote| node.udsp_info(nid, remote),
            node.partitions().count(),
        ))
    }

    /// Replaces the node with one running `nets`; on failure the previous configuration
    /// comes back up (or, failing that too, LNet stays down).
    fn rebuild(&self, state: &mut State, nets: Vec<NetSpec>) -> Result<(), ControlError> {
        state.selftest = None;
        let (mut peers, mut routing, mut rules) = (Vec::new(), None, Vec::new());
        if let Some(old) = state.node.take() {
            peers = admin::configured_peers(&old);
            routing = Some(RoutingSnapshot::of(&old));
            rules = old.udsp_rules();
            old.shutdown();
        }
        let restore = |node: &Node| {
            admin::restore_peers(node, &peers);
            if let Some(routing) = &routing {
                routing.restore(node);
            }
            // After routes and peers, so router rules find their gateways.
            policies::restore_rules(node, &rules);
        };
        match build_node(&self.lnd, &self.layout, &nets, &state.settings) {
            Ok(node) => {
                tracing::info!(nids = %nid_list(&node.nids()), "node rebuilt");
                restore(&node);
                state.selftest = host_selftest(&node, self.selftest);
                state.node = Some(node);
                state.nets = nets;
                Ok(())
            }
            Err(error) => {
                tracing::warn!(%error, "the new configuration failed to start");
                match build_node(&self.lnd, &self.layout, &state.nets, &state.settings) {
                    Ok(node) => {
                        restore(&node);
                        state.selftest = host_selftest(&node, self.selftest);
                        state.node = Some(node);
                    }
                    Err(again) => {
                        tracing::error!(error = %again, "the previous configuration failed to restart: LNet is down");
                        state.nets.clear();
                        state.pools_allocated = false;
                    }
                }
                Err(build_error(&error))
            }
        }
    }
}

/// Starts the selftest service on `node`. A failure leaves the node serving without it (logged):
/// lnet_selftest is an optional module in Lustre too.
fn host_selftest(node: &Node, enabled: bool) -> Option<ulnet_selftest::SelftestService> {
    if !enabled {
        return None;
    }
    match ulnet_selftest::SelftestService::start(node) {
        Ok(service) => Some(service),
        Err(error) => {
            tracing::warn!(%error, "lnet_selftest service not started");
            None
        }
    }
}

/// The node's peers with their discovery state.
fn peer_entries(node: &Node) -> Vec<render::PeerEntry> {
    view::peer_entries(
        &node.stats(),
        |nid| node.peer_info(nid),
        |nid, remote| node.udsp_info(nid, remote),
    )
}

/// The most targets one `ping` or `discover` expands to (ulnetctl's bound too).
pub const MAX_TARGETS: usize = 1024;

/// Targets as the CLI sends them (canonical NIDs), or nidlists as an import `--exec` block
/// writes them (`10.0.0.[1-4]@tcp`, comma lists).
/// lustre: api-ni.c `lnet_ping_show_start()` ("cannot parse NID").
fn parse_targets(texts: &[String]) -> Result<Vec<Nid>, ControlError> {
    let bad = || ControlError::refused(errno::EINVAL, "cannot parse NID");
    let mut nids = Vec::new();
    for entry in texts.iter().flat_map(|text| split_nidlist(text)) {
        let limit = MAX_TARGETS.saturating_sub(nids.len());
        if entry.contains('[') {
            let range = NidRange::parse(entry).map_err(|_| bad())?;
            nids.extend(range.expand(limit).map_err(|_| bad())?);
        } else if limit == 0 {
            return Err(bad());
        } else {
            nids.push(entry.parse::<Nid>().map_err(|_| bad())?);
        }
    }
    if nids.is_empty() {
        return Err(ControlError::refused(errno::ENOENT, "Ping needs NID targets"));
    }
    Ok(nids)
}

/// Splits a nidlist at the commas outside brackets.
fn split_nidlist(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (index, character) in text.char_indices() {
        match character {
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(text.get(start..index).unwrap_or("").trim());
                start = index + 1;
            }
            _ => {}
        }
    }
    parts.push(text.get(start..).unwrap_or("").trim());
    parts.retain(|part| !part.is_empty());
    parts
}

/// The kernel honours a ping timeout only below its default (`DEFAULT_PEER_TIMEOUT`).
/// lustre: api-ni.c `lnet_ping_show_start()`.
fn ping_timeout(timeout_ms: Option<u32>) -> Duration {
    match timeout_ms.map(|ms| Duration::from_millis(u64::from(ms))) {
        Some(timeout) if !timeout.is_zero() && timeout < DEFAULT_PING_TIMEOUT => timeout,
        _ => DEFAULT_PING_TIMEOUT,
    }
}

/// A ping's answer as `lnetctl ping` prints it: the peer's primary NID and Multi-Rail flag
/// from the peer table (`<?>` without a peer), the buffer's NIDs without `0@lo`.
/// Our own network NIDs have no peer in the engine; the kernel creates a fresh one for
/// them when it sends (primary NID the target, not yet multi-rail), which this reports.
fn ping_reply(node: &Node, target: Nid, answer: &EnginePingReply) -> PingReply {
    let (primary_nid, multi_rail) = match node.peer_info(target) {
        Some(peer) => (peer.primary_nid, peer.multi_rail()),
        None if target != Nid::LO_0 && node.nids().contains(&target) => (target, false),
        None => (Nid::ANY, false),
    };
    let info = &answer.info;
    let nids = info.nids.iter().chain(info.large.iter()).map(|entry| entry.nid);
    PingReply {
        primary_nid: primary_nid.to_string(),
        multi_rail,
        nids: nids.filter(|nid| *nid != Nid::LO_0).map(|nid| nid.to_string()).collect(),
    }
}

/// This node as a discovery of one of its own NIDs reports it.
fn self_reply(node: &Node) -> PingReply {
    let nids: Vec<String> =
        node.nids().iter().filter(|nid| **nid != Nid::LO_0).map(Nid::to_string).collect();
    PingReply {
        primary_nid: nids.first().cloned().unwrap_or_else(|| Nid::LO_0.to_string()),
        multi_rail: true,
        nids,
    }
}

fn failure(target: Nid, errno: i32) -> PingFailure {
    PingFailure { target: target.to_string(), errno }
}

/// The errno the kernel's `lnet_ping()` returns for each way a ping fails: the failed
/// event's status, -EIO for an MD unlinked unanswered (`pd.rc ?: -EIO`), -EPROTO for a
/// buffer it cannot parse.
fn ping_errno(error: &PingError) -> i32 {
    match error {
        PingError::Start(PingStartError::AnyNid | PingStartError::NotLocalSource(_)) => {
            -errno::EINVAL
        }
        PingError::Start(_) => -ENOMEM,
        PingError::Failed(EnginePingFailure::TimedOut) => -errno::EIO,
        PingError::Failed(EnginePingFailure::Send(status) | EnginePingFailure::Reply(status)) => {
            status.errno()
        }
        PingError::Failed(EnginePingFailure::BadBuffer(_)) => -errno::EPROTO,
        PingError::ShutDown => -errno::ENETDOWN,
    }
}

/// lustre: api-ni.c `lnet_discover()`: -EINVAL for `LNET_NID_ANY`, -ENOMEM for full
/// tables, the status discovery failed with otherwise.
fn discover_errno(error: &DiscoverError) -> i32 {
    match error {
        DiscoverError::Start(EngineDiscoverError::AnyNid | EngineDiscoverError::LocalNid(_)) => {
            -errno::EINVAL
        }
        DiscoverError::Start(_) => -ENOMEM,
        DiscoverError::Failed(status) => status.errno(),
        DiscoverError::ShutDown => -errno::ENETDOWN,
    }
}

/// -ENOMEM (not in the protocol's errno list).
const ENOMEM: i32 = 12;

/// Builds a node running `nets` with `settings`, on the partitions of `layout` (their I/O
/// threads pinned to their CPUs, when it has them).
pub fn build_node(
    lnd: &LndChoice,
    layout: &PartitionLayout,
    nets: &[NetSpec],
    settings: &GlobalSettings,
) -> Result<Node, BuildError> {
    let mut builder = Node::builder()
        .tunables(engine_tunables(settings))
        .partitions(layout.partitions)
        .partition_cpus(layout.cpus.clone())
        .partition_nodes(layout.numa.partition_nodes());
    for net in nets {
        for ni in &net.nis {
            let config = NiConfig {
                nid: ni.nid,
                lnd: LndKind::Tcp,
                tunables: net.tunables,
                lnd_timeout: None,
                cpts: cpt_list(ni.cpts.as_deref()),
                dev_cpt: ni.dev_cpt,
                cpts_join: ni.cpts_join,
            };
            builder = match lnd {
                LndChoice::Tcp(tcp) => tcp_ni(builder, config, net.socklnd, *tcp),
                LndChoice::Mem(fabric) => builder.mem_ni_config(config, fabric),
            };
        }
    }
    builder.build()
}

/// The one place a tcp NI is handed to the TCP LND: the net's socklnd tunables and the
/// node-wide acceptor settings, socklnd's defaults for the rest.
fn tcp_ni(
    builder: NodeBuilder,
    config: NiConfig,
    socklnd: SocklndTunables,
    tcp: TcpSettings,
) -> NodeBuilder {
    builder.tcp_ni_config(config, tcp_tunables(socklnd, tcp))
}

/// The TCP LND's tunables for a net's socklnd tunables and the node-wide settings (the
/// acceptor's, and ksocklnd's module parameters for the rest).
fn tcp_tunables(socklnd: SocklndTunables, tcp: TcpSettings) -> ulnet::SocklndTunables {
    ulnet::SocklndTunables {
        accept_port: tcp.accept_port,
        accept_port_bulk: tcp.accept_port_bulk,
        accept: tcp.accept,
        // In range: the importer, the CLI and the module parameters check 0..=127.
        conns_per_peer: ConnsPerPeer::new(u32::from(socklnd.conns_per_peer)).unwrap_or_default(),
        // -1 is "not set".
        tos: u8::try_from(socklnd.tos).ok(),
        ..tcp.socklnd.lnd
    }
}

/// The engine's tunables for `settings`. The values are in range: `GlobalSettings` checks
/// them (timeout > 0, counts >= 0, response tracking 0..=3, ping interval > 0). The engine
/// has no behaviour for `max_interfaces`, `router_sensitivity` (deprecated in Lustre too) or
/// `recovery_interval` (deprecated and ignored by the kernel): ulnetd keeps those in its
/// settings and `global show` reports them. The other router tunables are the kernel's
/// module parameters, which lnetctl cannot set: their defaults.
pub fn engine_tunables(settings: &GlobalSettings) -> Tunables {
    let seconds = u64::try_from(settings.transaction_timeout).unwrap_or(1);
    Tunables {
        transaction_timeout: Duration::from_secs(seconds),
        retry_count: u32::try_from(settings.retry_count).unwrap_or(0),
        response_tracking: match settings.response_tracking {
            0 => ResponseTracking::InternalOnly,
            1 => ResponseTracking::Get,
            2 => ResponseTracking::PutWithAck,
            _ => ResponseTracking::Both,
        },
        health_sensitivity: u32::try_from(settings.health_sensitivity).unwrap_or(0),
        discovery: settings.discovery,
        numa_range: u32::try_from(settings.numa_range).unwrap_or(u32::MAX),
        recovery_limit: Duration::from_secs(u64::try_from(settings.recovery_limit).unwrap_or(0)),
        max_recovery_ping_interval: Duration::from_secs(
            u64::try_from(settings.max_recovery_ping_interval).unwrap_or(1).max(1),
        ),
        router: RouterTunables {
            drop_asym_route: settings.drop_asym_route,
            check_routers_before_use: settings.router.check_routers_before_use,
            avoid_asym_router_failure: settings.router.avoid_asym_router_failure,
            alive_router_check_interval: Duration::from_secs(
                u64::try_from(settings.router.alive_router_check_interval).unwrap_or(0),
            ),
            router_ping_timeout: Duration::from_secs(
                u64::try_from(settings.router.router_ping_timeout).unwrap_or(0),
            ),
        },
        // In range: the module parameter reader accepts only 0..=3.
        portal_rotor: PortalRotor::from_value(settings.portal_rotor).unwrap_or_default(),
        ..Tunables::default()
    }
}

/// NIDs as one comma-separated word, as the ready line and logs print them.
pub fn nid_list(nids: &[Nid]) -> String {
    nids.iter().map(Nid::to_string).collect::<Vec<_>>().join(",")
}

fn has_nid(nets: &[NetSpec], nid: Nid) -> bool {
    nets.iter().flat_map(|net| net.nis.iter()).any(|ni| ni.nid == nid)
}

fn host() -> Result<Vec<HostInterface>, ControlError> {
    host_interfaces().map_err(|error| NetError::HostInterfaces(error.to_string()).to_control())
}

/// lustre: api-ni.c `lnet_net_cmd()`: "cannot parse net" and "setting @lo not allowed",
/// both -ENODEV.
fn parse_net(text: &str) -> Result<Net, ControlError> {
    let net: Net = text.parse().map_err(|_| NetError::BadNet(text.to_string()).to_control())?;
    if net == Net::LO {
        return Err(NetError::LoopbackNet.to_control());
    }
    Ok(net)
}

/// A `net add` request as a `net:` item.
fn net_config_of(add: &NetAdd) -> Result<NetConfig, NetError> {
    let text = add.net.as_deref().unwrap_or("");
    let net: Net = text.parse().map_err(|_| NetError::BadNet(text.to_string()))?;
    let mut nis = Vec::new();
    for spec in &add.nis {
        match spec {
            LocalNiSpec::Interface { name, cpts } => {
                let cpts = cpts.as_deref().map(parse_cpt_text).transpose()?;
                let interface = model::InterfaceConfig { name: name.clone(), cpts };
                nis.push(LocalNiConfig { nid: None, interfaces: vec![interface], cpts: None });
            }
            LocalNiSpec::Nid { nid } => {
                let parsed = nid.parse().map_err(|_| NetError::BadNid(nid.clone()))?;
                nis.push(LocalNiConfig { nid: Some(parsed), interfaces: Vec::new(), cpts: None });
            }
        }
    }
    let tunables = model::Tunables {
        peer_timeout: add.tunables.peer_timeout,
        peer_credits: add.tunables.peer_credits,
        peer_buffer_credits: add.tunables.peer_buffer_credits,
        credits: add.tunables.credits,
    };
    let lnd_tunables = model::LndTunables {
        conns_per_peer: add.lnd_tunables.conns_per_peer,
        tos: add.lnd_tunables.tos,
        ..model::LndTunables::default()
    };
    let cpts = add.cpts.as_deref().map(parse_cpt_text).transpose()?;
    Ok(NetConfig { net, nis, tunables, lnd_tunables, cpts })
}

/// The `local NI(s)` of an import item as `net del` NI specs.
fn local_ni_specs(nis: &[LocalNiConfig]) -> Vec<LocalNiSpec> {
    let mut specs = Vec::new();
    for ni in nis {
        match ni.nid {
            Some(nid) => specs.push(LocalNiSpec::Nid { nid: nid.to_string() }),
            None => specs.extend(ni.interfaces.iter().map(|interface| LocalNiSpec::Interface {
                name: interface.name.clone(),
                cpts: None,
            })),
        }
    }
    specs
}

/// Removes `net` (when `nis` is empty) or the NIs named from it; a net goes with its last
/// NI. lustre: api-ni.c `lnet_net_cmd()` and `lnet_genl_parse_local_ni()`, delete case.
fn remove_nis(nets: &mut Vec<NetSpec>, net: Net, nis: &[LocalNiSpec]) -> Result<(), ControlError> {
    let Some(index) = nets.iter().position(|spec| spec.net == net) else {
        return Err(if nis.is_empty() {
            ControlError::refused(errno::EINVAL, "cannot del network")
        } else {
            ControlError::refused(errno::ENODEV, "LNet net doesn't exist")
        });
    };
    if nis.is_empty() {
        nets.remove(index);
        return Ok(());
    }
    for spec in nis {
        let Some(entry) = nets.get_mut(index) else { break };
        let position = match spec {
            LocalNiSpec::Interface { name, .. } => {
                entry.nis.iter().position(|ni| ni.interface.as_deref() == Some(name.as_str()))
            }
            LocalNiSpec::Nid { nid } => {
                let nid: Nid = nid
                    .parse()
                    .map_err(|_| ControlError::refused(errno::EINVAL, "unsupported NID"))?;
                entry.nis.iter().position(|ni| ni.nid == nid)
            }
        };
        match position {
            Some(position) => {
                entry.nis.remove(position);
            }
            None => {
                let code = if matches!(spec, LocalNiSpec::Nid { .. }) {
                    errno::ENOENT
                } else {
                    errno::ENODEV
                };
                return Err(ControlError::refused(code, "cannot del LNet NI"));
            }
        }
    }
    if nets.get(index).is_some_and(|entry| entry.nis.is_empty()) {
        nets.remove(index);
    }
    Ok(())
}

/// How a node that failed to build is reported to `ulnetctl`.
fn build_error(error: &BuildError) -> ControlError {
    let code = match error {
        BuildError::Config(_) => errno::EINVAL,
        BuildError::FabricNidTaken(_) => errno::EEXIST,
        BuildError::TcpNotIp(_) => errno::EINVAL,
        // The kernel's acceptor failing to bind: socklnd startup fails with the socket error.
        BuildError::TcpListen { source, .. } => source.raw_os_error().unwrap_or(errno::EIO),
        _ => errno::EIO,
    };
    ControlError::refused(code, format!("cannot add LNet NI: {error}"))
}

/// A net error during an import, as lnetctl reports it under `import`.
fn import_error(error: &NetError) -> ControlError {
    let control = error.to_control();
    ControlError::Import { errno: control.errno(), descr: control.descr() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_net_add_request_becomes_a_net_item() {
        let add = NetAdd {
            net: Some("tcp1".into()),
            nis: vec![
                LocalNiSpec::Nid { nid: "127.0.1.2@tcp1".into() },
                LocalNiSpec::Interface { name: "lo".into(), cpts: Some("[0]".into()) },
            ],
            cpts: Some("0".into()),
            ..NetAdd::default()
        };
        let config = net_config_of(&add).unwrap();
        assert_eq!(config.net, "tcp1".parse().unwrap());
        assert_eq!(config.nis.len(), 2);
        assert_eq!(config.nis[0].nid, Some("127.0.1.2@tcp1".parse().unwrap()));
        assert_eq!(config.nis[1].interfaces[0].name, "lo");
        assert!(config.cpts.is_some());
    }

    #[test]
    fn bad_net_add_requests_are_refused_by_kind() {
        let bad_net = NetAdd { net: Some("nonet".into()), ..NetAdd::default() };
        assert_eq!(net_config_of(&bad_net), Err(NetError::BadNet("nonet".into())));
        let bad_nid = NetAdd {
            net: Some("tcp".into()),
            nis: vec![LocalNiSpec::Nid { nid: "1.2.3@tcp".into() }],
            ..NetAdd::default()
        };
        assert_eq!(net_config_of(&bad_nid), Err(NetError::BadNid("1.2.3@tcp".into())));
        let bad_cpt =
            NetAdd { net: Some("tcp".into()), cpts: Some("[x".into()), ..NetAdd::default() };
        assert_eq!(net_config_of(&bad_cpt), Err(NetError::BadCpt("[x".into())));
    }

    #[test]
    fn nidlists_expand_and_bad_ones_are_refused() {
        let texts = vec!["127.0.0.[2-3]@tcp,127.0.0.9@tcp".to_string(), "0@lo".to_string()];
        let nids = parse_targets(&texts).unwrap();
        let shown: Vec<String> = nids.iter().map(Nid::to_string).collect();
        assert_eq!(shown, ["127.0.0.2@tcp", "127.0.0.3@tcp", "127.0.0.9@tcp", "0@lo"]);
        assert_eq!(
            parse_targets(&["nonsense".to_string()]),
            Err(ControlError::refused(errno::EINVAL, "cannot parse NID"))
        );
        assert_eq!(
            parse_targets(&[]),
            Err(ControlError::refused(errno::ENOENT, "Ping needs NID targets"))
        );
        let too_many = vec!["10.0.[0-255].[0-255]@tcp".to_string()];
        assert_eq!(
            parse_targets(&too_many),
            Err(ControlError::refused(errno::EINVAL, "cannot parse NID"))
        );
    }

    #[test]
    fn ping_timeouts_follow_the_kernel() {
        assert_eq!(ping_timeout(None), DEFAULT_PING_TIMEOUT);
        assert_eq!(ping_timeout(Some(0)), DEFAULT_PING_TIMEOUT);
        assert_eq!(ping_timeout(Some(2500)), Duration::from_millis(2500));
        assert_eq!(ping_timeout(Some(200_000)), DEFAULT_PING_TIMEOUT);
    }

    #[test]
    fn ping_failures_carry_the_kernels_errnos() {
        assert_eq!(ping_errno(&PingError::Failed(EnginePingFailure::TimedOut)), -5);
        let unreachable = EnginePingFailure::Send(ulnet::EventStatus::HostUnreachable);
        assert_eq!(ping_errno(&PingError::Failed(unreachable)), -113);
        assert_eq!(ping_errno(&PingError::Start(PingStartError::AnyNid)), -22);
        assert_eq!(ping_errno(&PingError::Start(PingStartError::TooManyPings)), -12);
        let failed = DiscoverError::Failed(ulnet::EventStatus::TimedOut);
        assert_eq!(discover_errno(&failed), -110);
    }

    #[test]
    fn settings_map_onto_the_engines_tunables() {
        let mut settings = GlobalSettings::default();
        settings.set(model::GlobalKey::ResponseTracking, 2).unwrap();
        settings.set(model::GlobalKey::Discovery, 0).unwrap();
        let tunables = engine_tunables(&settings);
        assert_eq!(tunables.response_tracking, ResponseTracking::PutWithAck);
        assert!(!tunables.discovery);
        assert_eq!(tunables.transaction_timeout, Duration::from_secs(150));
        assert_eq!(engine_tunables(&GlobalSettings::default()), Tunables::default());
        let rotor = GlobalSettings { portal_rotor: 1, ..GlobalSettings::default() };
        assert_eq!(engine_tunables(&rotor).portal_rotor, PortalRotor::On);
    }
}
