//! The daemon's configuration file: the YAML `lnetctl import` accepts (both dialects, `net:`
//! with `local NI(s)`, `ip2nets:`, tunables, lnd tunables, `global:`), plus ulnetd's own
//! settings, which live in `global:` under the names of the kernel's `lnet` module
//! parameters they stand for:
//!
//! | key | values | default |
//! |---|---|---|
//! | `accept_port` | 1..=65535: the TCP port every NI's acceptor listens on and peers are dialled on | 988 |
//! | `accept` | `secure` (only privileged source ports), `all`, `none` (no acceptor) | `secure` as root, `all` otherwise |
//! | `lnet_selftest` | `true`, `false`: whether the node hosts the selftest service (the kernel's separately loaded `lnet_selftest` module); `false` leaves portals 50 to 52 closed to `lst`/`ulst` consoles | `true` |
//!
//! ```yaml
//! global:
//!     accept_port: 7988
//!     accept: all
//! net:
//!     - net type: tcp
//!       local NI(s):
//!         - nid: 127.0.0.2@tcp
//! ```
//!
//! These keys are taken out before the rest goes to [`ulnet_config::model::import()`], so
//! they are accepted only here, not by `ulnetctl import`. `peer:` items are added once the
//! node is up, as `lnetctl import` adds them, then the `udsp:` rules (checked here: each
//! must be a rule `udsp add` would accept, with no two equal). `route:`, `routing:` and `buffers:` are the
//! kernel's module parameters `routes=`, `forwarding=` and `*_router_buffers=`: applied when
//! the node is up (`routing: {enable: 1}` takes effect at once, as `forwarding=enabled`
//! does, where `ulnetctl set routing 1` waits as lnetctl's does); a route's gateway may be a
//! NID range, one route per NID. A route whose net is one of the file's own nets, or whose
//! gateway is on none of them, is refused here; one the node refuses at start stops it.
//!
//! The file is read strictly: what ulnetd cannot honour is an error that names it, never a
//! warning, and the daemon does not start ([`Unsupported`]). That is every key lnetctl would
//! skip: unknown keys inside a known block (an unknown top-level block is already lnetctl's
//! `invalid key` error) and `udsp:` items without `idx`. The read-only keys of `export` output
//! (`status`, statistics, credits, ...) are accepted, so an `export --backup` loads as a
//! configuration; a full export's socklnd `timeout` (a module parameter, which lnetctl's
//! import warns about and skips) is refused. `ulnetd --check FILE` runs the same checks
//! without starting.
//!
//! Module parameters (modprobe.d files, [`crate::modprobe`]) come first, as a kernel node
//! loads its modules with them before `lnetctl import` reads its file: the YAML's
//! `global:` keys and ulnetd's own keys then replace what they set, its nets are added to
//! theirs (a NID in both is refused), and what ulnetd cannot honour in either is refused
//! the same way, in one report (decision 0020).
//!
//! lustre: lnet/lnet/acceptor.c (`accept_port` 988, `accept` "secure"), lnetctl.c
//! `jt_import()` (the YAML vocabulary, via ulnet-config).

use std::path::Path;

use serde::Deserialize as _;
pub use ulnet::AcceptPolicy;
use ulnet::proto::engine::{UdspRule, UdspRules};
use ulnet_config::model::{self, GlobalSettings, HostInterface, ImportMode};
use ulnet_config::modprobe::{ModuleParameters, SocklndModule};
use yaml_serde::Value;

use crate::live::BootRouting;
use crate::modprobe::{ModprobeFile, Modules, PartitionLayout};
use crate::nets::{NetError, NetSpec, bind_cpts, resolve_ip2net, resolve_net, with_lnd_defaults};

/// `accept_port`'s default: the LNet port. lustre: acceptor.c `accept_port`.
pub const DEFAULT_ACCEPT_PORT: u16 = ulnet::proto::socklnd::tunables::DEFAULT_ACCEPT_PORT;

/// The port of the embedded default configuration and the demo: high, so no root is needed.
pub const UNPRIVILEGED_PORT: u16 = 7988;

/// Largest configuration file read; the same bound as an `import`.
pub const MAX_CONFIG_LEN: usize = model::MAX_IMPORT_LEN;

/// The configuration `ulnetd` runs without `--config`: one TCP NI on 127.0.0.2, on the
/// unprivileged port [`UNPRIVILEGED_PORT`], accepting connections from any source port. No
/// root and no host setup needed (Linux routes 127.0.0.0/8 to `lo`).
pub const DEFAULT_CONFIG: &str = "\
# ulnetd's embedded default: one TCP NI on 127.0.0.2, port 7988, no root needed.
global:
    accept_port: 7988
    accept: all
net:
    - net type: tcp
      local NI(s):
        - nid: 127.0.0.2@tcp
";

/// The default `accept` policy: the kernel's `secure` for root, `all` otherwise, since
/// unprivileged peers dial from unprivileged ports that `secure` refuses.
pub fn default_accept_policy(root: bool) -> AcceptPolicy {
    if root { AcceptPolicy::Secure } else { AcceptPolicy::All }
}

/// The TCP settings every tcp NI of the node shares (module parameters in the kernel).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpSettings {
    pub accept_port: u16,
    /// `accept_port_bulk` (a module parameter only): `None` puts bulk connections on
    /// `accept_port`.
    pub accept_port_bulk: Option<u16>,
    pub accept: AcceptPolicy,
    /// ksocklnd's module parameters: every connection's settings, the defaults of every
    /// tcp net (a `net add` without tunables gets them too).
    pub socklnd: SocklndModule,
}

impl TcpSettings {
    pub fn default_for(root: bool) -> Self {
        Self::new(DEFAULT_ACCEPT_PORT, default_accept_policy(root))
    }

    /// `accept_port` and `accept`, socklnd's defaults for the rest.
    pub fn new(accept_port: u16, accept: AcceptPolicy) -> Self {
        Self { accept_port, accept_port_bulk: None, accept, socklnd: SocklndModule::default() }
    }

    /// What the module parameters set, the defaults (by `root`) for the rest.
    fn from_modules(params: &ModuleParameters, root: bool) -> Self {
        Self {
            accept_port: params.accept_port.unwrap_or(DEFAULT_ACCEPT_PORT),
            accept_port_bulk: params.accept_port_bulk,
            accept: params.accept.unwrap_or_else(|| default_accept_policy(root)),
            socklnd: params.socklnd,
        }
    }
}

/// A configuration file, parsed and resolved against the host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DaemonConfig {
    pub nets: Vec<NetSpec>,
    pub settings: GlobalSettings,
    pub tcp: TcpSettings,
    /// Whether the node hosts the selftest service (`lnet_selftest`).
    pub selftest: bool,
    /// The `peer:` items, added after the node starts.
    pub peers: Vec<model::PeerConfig>,
    /// The `route:`, `routing:` and `buffers:` blocks, applied before the peers.
    pub routing: BootRouting,
    /// The `udsp:` rules and the index each goes in at, added after the peers.
    pub udsp: Vec<(UdspRule, usize)>,
    /// lnetctl's warnings about the input; every one of them names a key that is refused,
    /// so a loaded configuration has none. Kept for the embedded default and the demo.
    pub warnings: Vec<String>,
    /// Lines of the modprobe.d files that are not LNet's (other modules, module loading),
    /// for the log.
    pub notes: Vec<String>,
    /// The CPU partitions (libcfs's `cpu_pattern`/`cpu_npartitions` over the host's CPUs);
    /// the command line's `--no-cpu-bind` empties their CPUs, leaving the threads unpinned.
    pub layout: PartitionLayout,
    /// lnet's `enable_sysctl_setup` is 1: `setup-sysctl` applies the sysctl file.
    pub enable_sysctl_setup: bool,
}

/// Why a configuration was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("the configuration is {0} bytes, at most {MAX_CONFIG_LEN} are read")]
    TooLarge(u64),
    #[error("invalid YAML: {0}")]
    Yaml(String),
    /// lnetctl's importer refused the input; the text is its `descr`.
    #[error("{0}")]
    Import(#[from] model::ImportError),
    #[error("global {key}: {descr}")]
    Global { key: &'static str, descr: String },
    #[error("global accept_port: '{0}' is not a port number (1-65535)")]
    BadAcceptPort(String),
    #[error("global accept: '{0}' is not one of secure, all, none")]
    BadAcceptPolicy(String),
    #[error("global lnet_selftest: '{0}' is not true or false")]
    BadSelftest(String),
    #[error(transparent)]
    Net(#[from] NetError),
    #[error("no ip2nets rule matches this host's interfaces: {0}")]
    Ip2nets(String),
    /// A `udsp:` item that is not a rule `udsp add` would accept, or one equal to another.
    #[error("udsp: idx {idx}: {descr}")]
    Udsp { idx: i64, descr: String },
    /// Blocks and keys ulnetd cannot honour, one line each.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Unsupported(Vec<Unsupported>),
}

/// One block or key of a configuration that ulnetd cannot honour, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unsupported {
    /// The block (`route`, `peer ni`).
    pub what: String,
    /// `user-defined selection policies are not implemented yet`, `unknown key 'colour'`.
    pub why: String,
}

impl std::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.what, self.why)
    }
}

/// Why ulnetd refuses a block of the configuration model (`None`: it honours it). The one
/// place that decides, for the YAML's blocks and for the module parameters that fill them:
/// `routes=`, `forwarding=` and the router buffers fill `route`, `routing` and `buffers`;
/// `router` stands for the router tunables no YAML key carries (`check_routers_before_use`,
/// `alive_router_check_interval`, ...), given other than their defaults.
pub fn block_refusal(block: &str) -> Option<&'static str> {
    match block {
        "router" => Some(
            "not honoured by ulnetd: auto_down is always 1 (a closed connection marks a \
             gateway's NI down), and router credits come from each net's \
             peer_buffer_credits or peer_credits",
        ),
        _ => None,
    }
}

/// The blocks of an import that ulnetd does not implement, present even when empty.
pub fn unsupported_sections(imported: &model::Imported) -> Vec<Unsupported> {
    imported
        .sections
        .iter()
        .filter_map(|block| {
            block_refusal(block)
                .map(|why| Unsupported { what: block.clone(), why: why.to_string() })
        })
        .collect()
}

/// The keys an import skipped (`all`), or only those lnetctl skips without a warning.
pub fn unsupported_keys(imported: &model::Imported, all: bool) -> Vec<Unsupported> {
    imported
        .unknown_keys
        .iter()
        .filter(|key| all || !key.warned)
        .map(|key| Unsupported {
            what: key.within.clone(),
            why: if key.within == "udsp" && key.key == model::UDSP_ITEM_WITHOUT_IDX {
                // lnetctl's importer skips such an item without a word.
                "an item without 'idx' (lnetctl skips it)".to_string()
            } else if key.within == "lnd tunables" && key.key == "timeout" {
                // A full export's: socklnd's module-wide sock_timeout, not an NI's setting.
                "'timeout' cannot be configured here (it is socklnd's module-wide timeout; \
                 `ulnetctl net set --lnd-timeout` sets it on a running node)"
                    .to_string()
            } else {
                format!("unknown key '{}'", key.key)
            },
        })
        .collect()
}

impl DaemonConfig {
    /// Reads and resolves the configuration file at `path` (no module parameters).
    pub fn load(path: &Path, root: bool) -> Result<Self, ConfigError> {
        Self::load_all(Some(path), &[], root)
    }

    /// Reads the configuration file `config` (if any) and the modprobe.d files `modprobe`,
    /// and resolves them against the host. With neither: the embedded default.
    pub fn load_all(
        config: Option<&Path>,
        modprobe: &[&Path],
        root: bool,
    ) -> Result<Self, ConfigError> {
        let text = config.map(read_config).transpose()?;
        let files =
            modprobe.iter().map(|path| ModprobeFile::read(path)).collect::<Result<Vec<_>, _>>()?;
        let host = crate::interfaces::host_interfaces()
            .map_err(|error| NetError::HostInterfaces(error.to_string()))?;
        Self::from_sources(text.as_deref(), &files, root, &host)
    }

    /// The embedded default ([`DEFAULT_CONFIG`]), its NI's interface looked up in `host`.
    pub fn embedded_default(root: bool, host: &[HostInterface]) -> Result<Self, ConfigError> {
        Self::parse(DEFAULT_CONFIG, root, host)
    }

    /// Parses configuration `text` and resolves its NIs against `host`.
    pub fn parse(text: &str, root: bool, host: &[HostInterface]) -> Result<Self, ConfigError> {
        Self::from_sources(Some(text), &[], root, host)
    }

    /// Module parameters from `modprobe`, then the configuration `text` on top of them
    /// (module doc), resolved against `host`. Neither: the embedded default.
    pub fn from_sources(
        text: Option<&str>,
        modprobe: &[ModprobeFile],
        root: bool,
        host: &[HostInterface],
    ) -> Result<Self, ConfigError> {
        // Module parameters alone configure the node as the kernel's do at load: without
        // a net named, the kernel's `networks=tcp`.
        let kernel_default_net = text.is_none() && !modprobe.is_empty();
        let text = match (text, modprobe.is_empty()) {
            (None, true) => DEFAULT_CONFIG,
            (text, _) => text.unwrap_or(""),
        };
        if text.len() > MAX_CONFIG_LEN {
            return Err(ConfigError::TooLarge(text.len() as u64));
        }
        let modules = Modules::read(modprobe);
        let base = TcpSettings::from_modules(&modules.params, root);
        let (text, DaemonKeys { mut tcp, selftest }) = take_daemon_keys(text, base)?;
        let imported = model::import(&text, ImportMode::Add)?;
        let mut unsupported = modules.refusals();
        let layout = match modules.partitions(crate::cpu_topology::read(std::path::Path::new("/")))
        {
            Ok(layout) => layout,
            Err(refusal) => {
                unsupported.push(refusal);
                PartitionLayout::default()
            }
        };
        unsupported.extend(unsupported_sections(&imported));
        unsupported.extend(unsupported_keys(&imported, true));
        let warnings = imported.warnings;
        let config = imported.config;
        let mut settings = modules.params.settings;
        let applied = settings.apply(&config);
        // The module parameters' nets, problems named by parameter.
        let module_nets = modules.nets(host, kernel_default_net, &mut unsupported);
        // socklnd's 0 is LNet's lnd_timeout (lustre: socklnd.h ksocknal_timeout()).
        if tcp.socklnd.lnd.sock_timeout.is_zero() {
            let seconds = u64::try_from(settings.lnd_timeout()).unwrap_or(1);
            tcp.socklnd.lnd.sock_timeout = std::time::Duration::from_secs(seconds);
        }
        let nets = resolve_nets(&module_nets, &config, host, &tcp.socklnd).and_then(|mut nets| {
            bind_cpts(&mut nets, layout.partitions, &layout.numa)?;
            Ok(nets)
        });
        if !unsupported.is_empty() {
            // The routes too, where the nets resolve: every problem in one report.
            if let Ok(nets) = &nets {
                unsupported.extend(modules.refused_routes(nets));
                unsupported.extend(refused_routes(&config.routes, nets, "route"));
            }
            return Err(ConfigError::Unsupported(unsupported));
        }
        applied.map_err(|error| ConfigError::Global {
            key: error.key.name(),
            descr: error.descr.clone(),
        })?;
        let nets = nets?;
        let mut refused = modules.refused_routes(&nets);
        refused.extend(refused_routes(&config.routes, &nets, "route"));
        if !refused.is_empty() {
            return Err(ConfigError::Unsupported(refused));
        }
        let routing = modules.boot_routing(&config, &nets);
        let peers = config.peers.clone();
        let udsp = udsp_rules(&config.udsp)?;
        let notes = modules.params.notes.iter().map(ToString::to_string).collect();
        Ok(Self {
            nets,
            settings,
            tcp,
            selftest,
            peers,
            routing,
            udsp,
            warnings,
            notes,
            layout,
            enable_sysctl_setup: modules.params.enable_sysctl_setup,
        })
    }
}

/// The `udsp:` items as rules, added to an empty list as the node will add them, so an
/// item the node would refuse (an equal rule, too many) stops the configuration here.
fn udsp_rules(items: &[model::UdspConfig]) -> Result<Vec<(UdspRule, usize)>, ConfigError> {
    let mut rules = UdspRules::default();
    let mut added = Vec::new();
    for item in items {
        let refused = |descr: String| ConfigError::Udsp { idx: item.idx, descr };
        let (rule, index) = item.rule().map_err(|error| refused(error.to_string()))?;
        rules.add(rule.clone(), Some(index)).map_err(|error| refused(error.to_string()))?;
        added.push((rule, index));
    }
    Ok(added)
}

/// The configuration file's text, bounded by [`MAX_CONFIG_LEN`].
fn read_config(path: &Path) -> Result<String, ConfigError> {
    let read_error = |source| ConfigError::Read { path: path.display().to_string(), source };
    let length = std::fs::metadata(path).map_err(read_error)?.len();
    if length > MAX_CONFIG_LEN as u64 {
        return Err(ConfigError::TooLarge(length));
    }
    std::fs::read_to_string(path).map_err(read_error)
}

/// The module parameters' nets, then the `net:` and `ip2nets:` items of `config`, with
/// ksocklnd's parameters in what they leave unset, resolved against `host` and merged by net.
fn resolve_nets(
    module_nets: &[model::NetConfig],
    config: &model::Config,
    host: &[HostInterface],
    socklnd: &SocklndModule,
) -> Result<Vec<NetSpec>, ConfigError> {
    let mut nets: Vec<NetSpec> = Vec::new();
    let mut items = config.nets.clone();
    if !config.ip2nets.is_empty() {
        let resolved = model::resolve_ip2nets(&config.ip2nets, host)
            .map_err(|error| ConfigError::Ip2nets(error.to_string()))?;
        items.extend(resolved);
    }
    for item in module_nets {
        let mut spec = resolve_net(&with_lnd_defaults(item, socklnd), host)?;
        // `networks=`'s CPTs join the net as the string is parsed (config.c `lnet_ni_alloc()`).
        for ni in &mut spec.nis {
            ni.cpts_join = ulnet_proto::engine::CptsJoin::Parsed;
        }
        merge_net(&mut nets, spec)?;
    }
    for item in &items {
        merge_net(&mut nets, resolve_net(&with_lnd_defaults(item, socklnd), host)?)?;
    }
    Ok(nets)
}

/// The routes a node running `nets` would refuse whatever else it has: to one of its own
/// nets (`-EEXIST`), or through a gateway on none of them (`-EHOSTUNREACH`); `what` names
/// where they come from. lustre: router.c `lnet_add_route()`.
pub fn refused_routes(
    routes: &[model::RouteConfig],
    nets: &[NetSpec],
    what: &str,
) -> Vec<Unsupported> {
    let local = |net| nets.iter().any(|spec| spec.net == net);
    let mut refused = Vec::new();
    for route in routes {
        let why = if local(route.net) {
            format!("net {} is a local net of this node", route.net)
        } else if !local(route.gateway.net()) {
            format!("gateway {} is on no local net of this node", route.gateway)
        } else {
            continue;
        };
        refused.push(Unsupported { what: what.to_string(), why });
    }
    refused
}

/// Adds `spec` to `nets`: a net named again gets the new NIs (a NID twice is refused).
pub fn merge_net(nets: &mut Vec<NetSpec>, spec: NetSpec) -> Result<(), NetError> {
    for ni in &spec.nis {
        if nets.iter().flat_map(|net| net.nis.iter()).any(|known| known.nid == ni.nid) {
            return Err(NetError::DuplicateNid(ni.nid));
        }
    }
    match nets.iter_mut().find(|net| net.net == spec.net) {
        Some(known) => known.nis.extend(spec.nis),
        None => nets.push(spec),
    }
    Ok(())
}

/// Resolves `ip2net` text from a `net add --ip2net` request, its nets taking ksocklnd's
/// defaults from `socklnd`.
pub fn ip2net_specs(
    text: &str,
    host: &[HostInterface],
    socklnd: &SocklndModule,
) -> Result<Vec<NetSpec>, NetError> {
    resolve_ip2net(text, host)?
        .iter()
        .map(|item| resolve_net(&with_lnd_defaults(item, socklnd), host))
        .collect()
}

/// ulnetd's own keys, as [`take_daemon_keys`] found them.
struct DaemonKeys {
    tcp: TcpSettings,
    selftest: bool,
}

/// Takes `accept_port`, `accept` and `lnet_selftest` out of every document's `global:`
/// mapping, on top of `tcp`. The text is returned untouched when none is present, else
/// re-emitted without them.
fn take_daemon_keys(text: &str, tcp: TcpSettings) -> Result<(String, DaemonKeys), ConfigError> {
    let mut tcp = tcp;
    let mut selftest = true;
    let mut documents = Vec::new();
    let mut changed = false;
    for document in yaml_serde::Deserializer::from_str(text) {
        let mut value =
            Value::deserialize(document).map_err(|error| ConfigError::Yaml(error.to_string()))?;
        if let Some(Value::Mapping(global)) =
            value.as_mapping_mut().and_then(|map| map.get_mut("global"))
        {
            if let Some(port) = global.remove("accept_port") {
                tcp.accept_port = accept_port(&port)?;
                changed = true;
            }
            if let Some(policy) = global.remove("accept") {
                tcp.accept = accept_policy(&policy)?;
                changed = true;
            }
            if let Some(value) = global.remove("lnet_selftest") {
                selftest = selftest_switch(&value)?;
                changed = true;
            }
        }
        documents.push(value);
    }
    if !changed {
        return Ok((text.to_string(), DaemonKeys { tcp, selftest }));
    }
    let mut rewritten = String::new();
    for document in &documents {
        let emitted = yaml_serde::to_string(document)
            .map_err(|error| ConfigError::Yaml(error.to_string()))?;
        rewritten.push_str("---\n");
        rewritten.push_str(&emitted);
    }
    Ok((rewritten, DaemonKeys { tcp, selftest }))
}

/// `lnet_selftest`: a YAML boolean (or its text).
fn selftest_switch(value: &Value) -> Result<bool, ConfigError> {
    if let Value::Bool(flag) = value {
        return Ok(*flag);
    }
    let text = scalar_text(value);
    match text.trim() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(ConfigError::BadSelftest(text)),
    }
}

fn scalar_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Number(number) => number.to_string(),
        Value::Bool(flag) => flag.to_string(),
        Value::Tagged(tagged) => scalar_text(&tagged.value),
        Value::Null => String::new(),
        Value::Sequence(_) | Value::Mapping(_) => "<not a scalar>".to_string(),
    }
}

fn accept_port(value: &Value) -> Result<u16, ConfigError> {
    let text = scalar_text(value);
    match text.trim().parse::<u16>() {
        Ok(port) if port > 0 => Ok(port),
        _ => Err(ConfigError::BadAcceptPort(text)),
    }
}

/// lustre: acceptor.c `accept2secure()`.
fn accept_policy(value: &Value) -> Result<AcceptPolicy, ConfigError> {
    let text = scalar_text(value);
    text.trim().parse().map_err(|_| ConfigError::BadAcceptPolicy(text))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{IpAddr, Ipv4Addr};
    use ulnet_proto::addr::Nid;

    fn host() -> Vec<HostInterface> {
        vec![
            HostInterface {
                name: "lo".into(),
                up: true,
                addresses: vec![IpAddr::V4(Ipv4Addr::LOCALHOST)],
            },
            HostInterface {
                name: "eth0".into(),
                up: true,
                addresses: vec![IpAddr::V4(Ipv4Addr::new(10, 1, 0, 2))],
            },
        ]
    }

    fn nid(text: &str) -> Nid {
        text.parse().unwrap()
    }

    #[test]
    fn the_embedded_default_is_one_unprivileged_tcp_ni() {
        let config = DaemonConfig::embedded_default(false, &host()).unwrap();
        assert_eq!(config.nets.len(), 1);
        assert_eq!(config.nets[0].nis[0].nid, nid("127.0.0.2@tcp"));
        assert_eq!(config.nets[0].nis[0].interface.as_deref(), Some("lo"));
        assert_eq!(config.tcp, TcpSettings::new(UNPRIVILEGED_PORT, AcceptPolicy::All));
        assert_eq!(config.settings, GlobalSettings::default());
        assert!(config.warnings.is_empty());
    }

    #[test]
    fn daemon_keys_come_out_and_lnetctl_globals_stay() {
        let text = "global:\n  accept_port: 7000\n  accept: secure\n  retry_count: 1\n\
                    net:\n  - net type: tcp\n    local NI(s):\n      - nid: 127.0.0.3@tcp\n";
        let config = DaemonConfig::parse(text, false, &host()).unwrap();
        assert_eq!(config.tcp, TcpSettings::new(7000, AcceptPolicy::Secure));
        assert_eq!(config.settings.retry_count, 1);
        assert_eq!(config.nets[0].nis[0].nid, nid("127.0.0.3@tcp"));
    }

    #[test]
    fn lnet_selftest_switches_the_service_and_is_not_an_lnetctl_key() {
        let net = "net:\n  - net type: tcp\n    local NI(s):\n      - nid: 127.0.0.3@tcp\n";
        let on = DaemonConfig::parse(net, false, &host()).unwrap();
        assert!(on.selftest, "hosted by default");
        let off =
            DaemonConfig::parse(&format!("global:\n  lnet_selftest: false\n{net}"), false, &host())
                .unwrap();
        assert!(!off.selftest);
        let on =
            DaemonConfig::parse(&format!("global:\n  lnet_selftest: true\n{net}"), false, &host())
                .unwrap();
        assert!(on.selftest);
        assert!(matches!(
            DaemonConfig::parse("global:\n  lnet_selftest: maybe\n", false, &host()).unwrap_err(),
            ConfigError::BadSelftest(text) if text == "maybe"
        ));
        // Unknown keys stay errors.
        assert!(matches!(
            DaemonConfig::parse("global:\n  selftest: false\n", false, &host()).unwrap_err(),
            ConfigError::Import(_) | ConfigError::Global { .. }
        ));
    }

    #[test]
    fn without_daemon_keys_the_defaults_depend_on_root() {
        let text = "net:\n  - net type: tcp\n    interfaces:\n      0: eth0\n";
        let user = DaemonConfig::parse(text, false, &host()).unwrap();
        assert_eq!(user.tcp, TcpSettings::new(988, AcceptPolicy::All));
        assert_eq!(user.nets[0].nis[0].nid, nid("10.1.0.2@tcp"));
        let root = DaemonConfig::parse(text, true, &host()).unwrap();
        assert_eq!(root.tcp.accept, AcceptPolicy::Secure);
    }

    #[test]
    fn several_documents_and_nets_merge() {
        let text = "net:\n  - net type: tcp\n    local NI(s):\n      - nid: 127.0.0.2@tcp\n\
                    ---\nglobal:\n  accept_port: 7100\n\
                    net:\n  - net type: tcp\n    local NI(s):\n      - nid: 127.0.0.4@tcp\n\
                    \x20 - net type: tcp1\n    local NI(s):\n      - nid: 127.0.1.2@tcp1\n";
        let config = DaemonConfig::parse(text, false, &host()).unwrap();
        assert_eq!(config.tcp.accept_port, 7100);
        assert_eq!(config.nets.len(), 2);
        let nids: Vec<Nid> = config.nets[0].nis.iter().map(|ni| ni.nid).collect();
        assert_eq!(nids, vec![nid("127.0.0.2@tcp"), nid("127.0.0.4@tcp")]);
    }

    #[test]
    fn ip2nets_rules_are_resolved() {
        let text = "ip2nets:\n  - net-spec: tcp\n    interfaces:\n      0: eth0\n    \
                    ip-range:\n      0: 10.1.0.*\n";
        let config = DaemonConfig::parse(text, false, &host()).unwrap();
        assert_eq!(config.nets[0].nis[0].nid, nid("10.1.0.2@tcp"));
    }

    fn unsupported(text: &str) -> Vec<String> {
        match DaemonConfig::parse(text, false, &host()) {
            Err(ConfigError::Unsupported(found)) => found.iter().map(ToString::to_string).collect(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn routing_blocks_are_kept_and_routes_checked_against_the_nets() {
        let net = "net:\n  - net type: tcp\n    local NI(s):\n      - nid: 10.1.0.2@tcp\n";
        let text = format!(
            "{net}route:\n  - net: tcp1\n    gateway: 10.1.0.[8-9]@tcp\n    hop: 2\n\
             routing: {{enable: 1}}\nbuffers: {{tiny: 600}}\n"
        );
        let config = DaemonConfig::parse(&text, false, &host()).unwrap();
        let gateways: Vec<String> =
            config.routing.routes.iter().map(|route| route.gateway.to_string()).collect();
        assert_eq!(gateways, ["10.1.0.8@tcp", "10.1.0.9@tcp"]);
        assert_eq!(config.routing.routes[0].hops, Some(2));
        assert_eq!(config.routing.enable, Some(true));
        assert_eq!(config.routing.buffers.and_then(|buffers| buffers.tiny), Some(600));
        assert_eq!(
            unsupported(&format!("{net}route:\n  - net: tcp\n    gateway: 10.1.0.9@tcp\n")),
            ["route: net tcp is a local net of this node"]
        );
        assert_eq!(
            unsupported(&format!("{net}route:\n  - net: tcp2\n    gateway: 10.9.0.9@tcp1\n")),
            ["route: gateway 10.9.0.9@tcp1 is on no local net of this node"]
        );
    }

    #[test]
    fn a_udsp_item_without_idx_is_an_error_that_names_it() {
        assert_eq!(
            unsupported("udsp:\n  - src: tcp\n"),
            ["udsp: an item without 'idx' (lnetctl skips it)"]
        );
    }

    #[test]
    fn udsp_items_are_checked_rules() {
        let text = concat!(
            "udsp:\n  - idx: 0\n    src: tcp\n    action: {priority: 1}\n",
            "  - idx: 0\n    src: 10.0.0.1@tcp\n    dst: tcp1\n",
        );
        let config = DaemonConfig::parse(text, false, &host()).unwrap();
        let shown: Vec<String> =
            config.udsp.iter().map(|(rule, at)| format!("{at} {rule}")).collect();
        assert_eq!(shown, ["0 src: tcp priority: 1", "0 src: 10.0.0.1@tcp dst: tcp1"]);
        let refused = |text: &str| match DaemonConfig::parse(text, false, &host()) {
            Err(error @ ConfigError::Udsp { .. }) => error.to_string(),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            refused("udsp:\n  - idx: 0\n    src: '*@tcp'\n"),
            "udsp: idx 0: failed to parse src parameter"
        );
        assert_eq!(
            refused("udsp:\n  - idx: 0\n    src: tcp\n  - idx: 1\n    src: tcp\n"),
            "udsp: idx 1: an equal rule exists"
        );
        assert_eq!(
            refused("udsp:\n  - idx: 0\n    src: tcp\n    rte: 1.1.1.1@tcp\n"),
            "udsp: idx 0: src and rte cannot be combined"
        );
        let both = "udsp:\n  - idx: 0\n    src: tcp\n\
                    peer:\n  - primary nid: 10.0.0.9@tcp\n    colour: red\n";
        assert_eq!(unsupported(both), ["peer: unknown key 'colour'"]);
    }

    #[test]
    fn unknown_keys_inside_known_blocks_are_errors() {
        let net = "net:\n  - net type: tcp\n    local NI(s):\n      - nid: 127.0.0.3@tcp\n";
        assert_eq!(
            unsupported(&format!("{net}        tunables: {{peer_credits: 8, peer_credit: 9}}\n")),
            ["tunables: unknown key 'peer_credit'"]
        );
        assert_eq!(
            unsupported(&format!("{net}        interface: {{0: lo}}\n")),
            ["local NI(s): unknown key 'interface'"]
        );
        assert_eq!(
            unsupported("peer:\n  - primary nid: 10.0.0.9@tcp\n    colour: red\n"),
            ["peer: unknown key 'colour'"]
        );
        assert_eq!(unsupported("numa:\n  rnage: 1\n"), ["numa: unknown key 'rnage'"]);
        // A `nid:` belongs to a local NI; on the net item it would bind nothing.
        assert_eq!(
            unsupported("net:\n  - net type: tcp\n    nid: 127.0.0.3@tcp\n"),
            ["net: unknown key 'nid'"]
        );
    }

    #[test]
    fn the_read_only_keys_of_an_export_are_accepted_but_not_the_socklnd_timeout() {
        let export = |lnd: &str| {
            format!(
                "net:\n    - net type: lo\n      local NI(s):\n        - nid: 0@lo\n          status: up\n\
                 \x20   - net type: tcp\n      local NI(s):\n        - nid: 127.0.0.3@tcp\n          status: up\n\
                 \x20         interfaces:\n              0: lo\n          statistics: {{send_count: 0}}\n\
                 \x20         lnd tunables: {{{lnd}}}\n          dev cpt: -1\n\
                 peer:\n    - primary nid: 10.0.0.9@tcp\n      Multi-Rail: true\n      peer state: 0\n\
                 \x20     peer ni:\n        - nid: 10.0.0.9@tcp\n          state: NA\n\
                 \x20         health stats: {{health value: 1000, dropped: 0, timeout: 0}}\n"
            )
        };
        let config =
            DaemonConfig::parse(&export("conns_per_peer: 1, tos: -1"), false, &host()).unwrap();
        assert_eq!(config.nets[0].nis[0].nid, nid("127.0.0.3@tcp"));
        assert_eq!(config.peers.len(), 1);
        assert!(config.warnings.is_empty());
        // A full export's socklnd timeout is the module-wide sock_timeout: not configurable
        // here, so refused rather than warned about and dropped.
        let refused = unsupported(&export("conns_per_peer: 1, timeout: 50, tos: -1"));
        assert_eq!(refused.len(), 1);
        assert!(refused[0].starts_with("lnd tunables: 'timeout' cannot be configured here"));
    }

    #[test]
    fn bad_configurations_are_refused_by_kind() {
        let parse = |text: &str| DaemonConfig::parse(text, false, &host()).unwrap_err();
        assert!(matches!(parse("global: [1"), ConfigError::Yaml(_)));
        assert!(matches!(
            parse("global:\n  accept_port: 70000\n"),
            ConfigError::BadAcceptPort(text) if text == "70000"
        ));
        assert!(matches!(parse("global:\n  accept_port: 0\n"), ConfigError::BadAcceptPort(_)));
        assert!(matches!(
            parse("global:\n  accept: maybe\n"),
            ConfigError::BadAcceptPolicy(text) if text == "maybe"
        ));
        assert!(matches!(
            parse("frobnicate: 1\n"),
            ConfigError::Import(model::ImportError::InvalidKey(key)) if key == "frobnicate"
        ));
        assert!(matches!(
            parse("global:\n  response_tracking: 7\n"),
            ConfigError::Global { key: "response_tracking", .. }
        ));
        assert!(matches!(
            parse("net:\n  - net type: o2ib\n    interfaces:\n      0: ib0\n"),
            ConfigError::Net(NetError::UnsupportedLnd(_))
        ));
        assert!(matches!(
            parse("net:\n  - net type: tcp\n    interfaces:\n      0: eth7\n"),
            ConfigError::Net(NetError::NoSuchInterface(name)) if name == "eth7"
        ));
        let twice = "net:\n  - net type: tcp\n    local NI(s):\n      - nid: 127.0.0.2@tcp\n\
                     \x20 - net type: tcp\n    local NI(s):\n      - nid: 127.0.0.2@tcp\n";
        assert!(matches!(parse(twice), ConfigError::Net(NetError::DuplicateNid(_))));
        let ip2nets = "ip2nets:\n  - net-spec: tcp\n    ip-range:\n      0: 192.168.*.*\n";
        assert!(matches!(parse(ip2nets), ConfigError::Ip2nets(_)));
        let huge = "#".repeat(MAX_CONFIG_LEN + 1);
        assert!(matches!(parse(&huge), ConfigError::TooLarge(_)));
    }

    // ------------------------------------------------------------ module parameters

    fn modprobe(text: &str) -> Vec<ModprobeFile> {
        vec![ModprobeFile { path: "lustre.conf".into(), text: text.into() }]
    }

    fn with_modules(yaml: Option<&str>, modules: &str) -> Result<DaemonConfig, ConfigError> {
        DaemonConfig::from_sources(yaml, &modprobe(modules), false, &host())
    }

    #[test]
    fn module_parameters_alone_configure_the_node() {
        let config = with_modules(
            None,
            "options lnet networks=tcp(eth0) accept_port=7000 lnet_transaction_timeout=200\n\
             options ksocklnd peer_credits=32 sock_timeout=100 conns_per_peer=2 keepalive=0\n",
        )
        .unwrap();
        assert_eq!(config.nets.len(), 1);
        assert_eq!(config.nets[0].nis[0].nid, nid("10.1.0.2@tcp"));
        assert_eq!(config.nets[0].tunables.peer_credits, 32);
        assert_eq!(config.nets[0].tunables.credits, 256);
        assert_eq!(config.nets[0].socklnd.conns_per_peer, 2);
        assert_eq!((config.tcp.accept_port, config.tcp.accept), (7000, AcceptPolicy::All));
        assert_eq!(config.tcp.socklnd.lnd.sock_timeout, std::time::Duration::from_secs(100));
        assert_eq!(config.tcp.socklnd.lnd.keepalive, None);
        assert_eq!(config.settings.transaction_timeout, 200);
        // An NI given no CPTs is bound when it starts; one given CPTs in `networks=` joins
        // its net's set as the string is parsed; one from the file, as a dynamic add does.
        assert_eq!(config.nets[0].nis[0].cpts_join, ulnet_proto::engine::CptsJoin::Default);
        let both = with_modules(
            Some("net:\n    - net type: tcp1\n      local NI(s):\n        - nid: 10.1.0.2@tcp1\n          CPT: \"[0]\"\n"),
            "options lnet networks=tcp(eth0)[0]\n",
        )
        .unwrap();
        let joins: Vec<_> =
            both.nets.iter().flat_map(|net| &net.nis).map(|ni| ni.cpts_join).collect();
        use ulnet_proto::engine::CptsJoin::{Explicit, Parsed};
        assert_eq!(joins, [Parsed, Explicit]);
        // Without a net named, the kernel's networks=tcp: the first UP non-loopback one.
        let config = with_modules(None, "options lnet lnet_retry_count=1\n").unwrap();
        assert_eq!(config.nets[0].nis[0].nid, nid("10.1.0.2@tcp"));
        assert_eq!(config.tcp.accept_port, DEFAULT_ACCEPT_PORT);
        // ip2nets with the kernel's meaning.
        let config =
            with_modules(None, "options lnet ip2nets=\"tcp1 10.1.0.*; tcp2 192.0.2.*\"\n").unwrap();
        assert_eq!(config.nets.len(), 1);
        assert_eq!(config.nets[0].nis[0].nid, nid("10.1.0.2@tcp1"));
    }

    #[test]
    fn the_configuration_file_applies_on_top_of_the_module_parameters() {
        let modules = "options lnet networks=tcp(eth0) accept_port=7000 accept=secure \
                       lnet_transaction_timeout=200 lnet_retry_count=3\n\
                       options ksocklnd peer_credits=32 tos=16\n";
        let yaml = "global:\n  transaction_timeout: 300\n  accept_port: 7100\n\
                    net:\n  - net type: tcp1\n    local NI(s):\n      - nid: 127.0.1.2@tcp1\n\
                    \x20 - net type: tcp2\n    local NI(s):\n      - nid: 127.0.2.2@tcp2\n\
                    \x20   tunables:\n      peer_credits: 16\n";
        let config = with_modules(Some(yaml), modules).unwrap();
        // The YAML's global keys replace the parameters'; the others stay.
        assert_eq!(config.settings.transaction_timeout, 300);
        assert_eq!(config.settings.retry_count, 3);
        assert_eq!(config.tcp.accept_port, 7100);
        assert_eq!(config.tcp.accept, AcceptPolicy::Secure);
        // Nets add up, the module's first; ksocklnd's defaults fill what an item leaves.
        let nets: Vec<String> = config.nets.iter().map(|net| net.net.to_string()).collect();
        assert_eq!(nets, ["tcp", "tcp1", "tcp2"]);
        assert_eq!(config.nets[1].tunables.peer_credits, 32);
        assert_eq!(config.nets[1].socklnd.tos, 16);
        assert_eq!(config.nets[2].tunables.peer_credits, 16);
        // With a configuration file, no net is added for the module's default.
        let config =
            with_modules(Some("global:\n  retry_count: 1\n"), "options lnet lnet_retry_count=2\n")
                .unwrap();
        assert!(config.nets.is_empty());
        assert_eq!(config.settings.retry_count, 1);
        // A NID in both is refused.
        let twice = "net:\n  - net type: tcp\n    local NI(s):\n      - nid: 10.1.0.2@tcp\n";
        assert!(matches!(
            with_modules(Some(twice), "options lnet networks=tcp(eth0)\n").unwrap_err(),
            ConfigError::Net(NetError::DuplicateNid(_))
        ));
    }

    #[test]
    fn socklnd_zero_timeout_is_lnets_lnd_timeout_and_peer_credits_stop_at_credits() {
        let config = with_modules(
            None,
            "options lnet networks=tcp(eth0) lnet_transaction_timeout=61 lnet_retry_count=2\n\
             options ksocklnd sock_timeout=0 credits=4 peer_credits=8\n",
        )
        .unwrap();
        assert_eq!(config.tcp.socklnd.lnd.sock_timeout, std::time::Duration::from_secs(20));
        assert_eq!(config.nets[0].tunables.credits, 4);
        assert_eq!(config.nets[0].tunables.peer_credits, 4);
    }

    fn refused_with_modules(yaml: Option<&str>, modules: &str) -> Vec<String> {
        match with_modules(yaml, modules) {
            Err(ConfigError::Unsupported(found)) => found.iter().map(ToString::to_string).collect(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn routing_parameters_join_the_yamls_routing() {
        let modules = "options lnet networks=tcp(eth0) forwarding=disabled \
                       routes=\"tcp1 10.1.0.9@tcp; tcp3 10.1.0.2@tcp\"\n\
                       options lnet tiny_router_buffers=512 small_router_buffers=4096 \
                       avoid_asym_router_failure=1\n";
        let yaml = "route:\n  - net: tcp2\n    gateway: 10.1.0.8@tcp\nbuffers:\n  small: 8192\n";
        let config = with_modules(Some(yaml), modules).unwrap();
        let routes: Vec<String> = config
            .routing
            .routes
            .iter()
            .map(|route| format!("{} via {}", route.net, route.gateway))
            .collect();
        // The route through this node's own NID adds none (it makes the node a router).
        assert_eq!(routes, ["tcp1 via 10.1.0.9@tcp", "tcp2 via 10.1.0.8@tcp"]);
        assert_eq!(config.routing.enable, Some(false), "forwarding=disabled says so");
        assert_eq!(
            config.routing.buffers,
            Some(model::Buffers { tiny: Some(512), small: Some(8192), large: None })
        );
        // Without forwarding=, a route through one of our NIDs turns forwarding on; the
        // YAML's routing block has the last word.
        let router = "options lnet networks=tcp(eth0) routes=\"tcp3 10.1.0.2@tcp\"\n";
        assert_eq!(with_modules(None, router).unwrap().routing.enable, Some(true));
        let off = with_modules(Some("routing:\n  enable: 0\n"), router).unwrap();
        assert_eq!(off.routing.enable, Some(false));
        // A route the node would refuse is refused by the parameter's name (the kernel
        // skips it without a word).
        assert_eq!(
            refused_with_modules(
                None,
                "options lnet networks=tcp(eth0) routes=\"tcp 10.1.0.9@tcp\"\n"
            ),
            [
                "lustre.conf:1: options lnet routes=tcp 10.1.0.9@tcp: net tcp is a local net of this node"
            ]
        );
    }

    #[test]
    fn router_tunables_reach_the_engine_and_the_unhonoured_ones_are_refused() {
        let config = with_modules(
            None,
            "options lnet networks=tcp(eth0) check_routers_before_use=1 \
             alive_router_check_interval=7 router_ping_timeout=9 avoid_asym_router_failure=0\n",
        )
        .unwrap();
        let router = crate::live::engine_tunables(&config.settings).router;
        assert!(router.check_routers_before_use && !router.avoid_asym_router_failure);
        assert_eq!(router.alive_router_check_interval, std::time::Duration::from_secs(7));
        assert_eq!(router.router_ping_timeout, std::time::Duration::from_secs(9));
        let refused = refused_with_modules(None, "options lnet networks=tcp(eth0) auto_down=0\n");
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert!(
            refused[0].starts_with("lustre.conf:1: options lnet auto_down=0: not honoured"),
            "{refused:?}"
        );
    }

    /// The seeds' client options: every parameter ulnetd cannot honour, by name, at once.
    #[test]
    fn the_seeds_options_are_refused_parameter_by_parameter() {
        let refused = refused_with_modules(
            None,
            "options lnet networks=ptlf(0) routes='o2ib [1,2,3,4,5]@ptlf' \
             lnet_peer_discovery_disabled=1 lnet_health_sensitivity=0 check_router_before_use=1 \
             live_router_check_interval=107 dead_router_check_interval=50\n\
             options kptl4lnd peer_credits=32 ntx=8192\n\
             options libcfs cpu_pattern=\"0[0-15] 1[18-33] 2[34-49] 3[50-65]\"\n",
        );
        let line1 = "lustre.conf:1: options lnet";
        let deprecated = "live_router_check_interval and dead_router_check_interval have been \
                          deprecated. Use alive_router_check_interval instead. Ignoring these \
                          deprecated parameters (ulnetd refuses what it would ignore)";
        let mut expected = vec![
            format!(
                "{line1} check_router_before_use=1: unknown parameter (did you mean \
                 check_routers_before_use?): lnet has no such parameter (the kernel ignores it \
                 with a warning)"
            ),
            format!("{line1} live_router_check_interval=107: {deprecated}"),
            format!("{line1} dead_router_check_interval=50: {deprecated}"),
            "lustre.conf:2: options kptl4lnd peer_credits ntx: ulnet cannot drive the kptl4lnd \
             LND: its networks (ptlf, bxi3f) need Portals 4 hardware"
                .to_string(),
            format!(
                "{line1} networks=ptlf(0): net ptlf: LND type not supported by ulnetd (only tcp)"
            ),
        ];
        // Without the ptlf net, no gateway of the route is on a net of this node.
        for gateway in 1..=5 {
            expected.push(format!(
                "{line1} routes=o2ib [1,2,3,4,5]@ptlf: gateway {gateway}@ptlf is on no local net \
                 of this node"
            ));
        }
        // The KNL pattern needs 66 CPUs: a smaller host refuses it as the kernel would.
        let pattern = "lustre.conf:3: options libcfs cpu_pattern=0[0-15] 1[18-33] 2[34-49] \
                       3[50-65]";
        let host_cpus = crate::cpu_topology::read(std::path::Path::new("/"))
            .map_or(0, |topology| topology.online_cpus());
        if host_cpus < 66 {
            expected.insert(
                4,
                format!(
                    "{pattern}: Invalid pattern '0[0-15] 1[18-33] 2[34-49] 3[50-65]', or too \
                     many partitions 4: rc = -22"
                ),
            );
        }
        assert_eq!(refused, expected);
    }

    #[test]
    fn a_module_net_that_cannot_run_is_named_by_its_parameter() {
        assert_eq!(
            refused_with_modules(None, "options lnet networks=tcp(eth7)\n"),
            ["lustre.conf:1: options lnet networks=tcp(eth7): no interface 'eth7' on this host"]
        );
        assert_eq!(
            refused_with_modules(None, "options lnet ip2nets=\"tcp 192.0.2.*\"\n"),
            [
                "lustre.conf:1: options lnet ip2nets=tcp 192.0.2.*: no ip2nets rule matches this host"
            ]
        );
    }
}
