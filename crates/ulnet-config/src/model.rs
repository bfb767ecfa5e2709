//! The configuration model: what `lnetctl import` accepts (docs/protocol/cli.md §4) as plain data, the
//! global settings with Lustre's defaults and validation (docs/protocol/cli.md §1.6, §3.7), and the
//! conversions to `export` output.
//!
//! Parsing is in [`mod@import`]; [`mod@export`] renders a model the way `lnetctl export --backup`
//! prints the configuration it creates.

use std::net::IpAddr;

use ulnet_proto::addr::{LndType, Net, Nid};
use ulnet_proto::engine::{UdspRule, UdspSpecError};

use crate::grammar::{ExprList, IpPattern};
use crate::render::{CyamlErrorEntry, GlobalShow};

pub mod export;
pub mod import;

pub use import::{
    ImportError, ImportMode, Imported, MAX_IMPORT_LEN, UDSP_ITEM_WITHOUT_IDX, UnknownKey, import,
};

/// A parsed configuration file (or `lnetctl import` input), in file order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Config {
    pub nets: Vec<NetConfig>,
    /// `ip2nets:` rules, resolved against the host's interfaces by [`resolve_ip2nets`].
    pub ip2nets: Vec<Ip2netsConfig>,
    pub routes: Vec<RouteConfig>,
    pub peers: Vec<PeerConfig>,
    /// `routing: {enable: 0|1}`.
    pub routing: Option<bool>,
    /// `buffers: {tiny, small, large}`, totals across CPTs.
    pub buffers: Option<Buffers>,
    /// `numa: {range: N}`.
    pub numa_range: Option<i64>,
    /// `global:` keys (and bare top-level global keys) in the order given: the cross-checks
    /// between `retry_count`, `transaction_timeout` and `health_sensitivity` depend on it.
    pub global: Vec<(GlobalKey, i64)>,
    pub udsp: Vec<UdspConfig>,
    /// `ping:`/`discover:` blocks, only accepted by [`ImportMode::Exec`].
    pub exec: Vec<ExecCommand>,
}

/// One `net:` item: a net and the NIs to bring up on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetConfig {
    pub net: Net,
    /// The `local NI(s)` items (and a net-level `interfaces:` as one more NI).
    pub nis: Vec<LocalNiConfig>,
    /// `tunables:` seen anywhere in the item; later ones win per key, as in lnetctl.
    pub tunables: Tunables,
    pub lnd_tunables: LndTunables,
    /// `CPT:` seen anywhere in the item.
    pub cpts: Option<ExprList>,
}

/// One `local NI(s)` item.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LocalNiConfig {
    /// A `nid:` key. lnetctl ignores it; `ulnetd` brings the NI up on exactly this address.
    pub nid: Option<Nid>,
    pub interfaces: Vec<InterfaceConfig>,
    /// The `CPT:` of an NI named by `nid:` alone: that NI's binding, as the kernel reads a
    /// local NI's CPT list with that NI (lustre: api-ni.c `lnet_genl_parse_local_ni()`).
    pub cpts: Option<ExprList>,
}

/// An interface name with its optional `[cpt-expr]` suffix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InterfaceConfig {
    pub name: String,
    pub cpts: Option<ExprList>,
}

/// `tunables:`; `None` keeps the LND's default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tunables {
    pub peer_timeout: Option<i64>,
    pub peer_credits: Option<i64>,
    pub peer_buffer_credits: Option<i64>,
    pub credits: Option<i64>,
}

/// `lnd tunables:` for every LND lnetctl knows; keys of other LNDs are kept but unused.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LndTunables {
    pub conns_per_peer: Option<i64>,
    pub tos: Option<i64>,
    pub peercredits_hiw: Option<i64>,
    pub map_on_demand: Option<bool>,
    pub concurrent_sends: Option<i64>,
    pub fmr_pool_size: Option<i64>,
    pub fmr_flush_trigger: Option<i64>,
    pub fmr_cache: Option<i64>,
    pub ntx: Option<i64>,
    pub auth_key: Option<i64>,
    pub traffic_class: Option<String>,
}

/// One `ip2nets:` rule (lnetctl's userspace matcher, docs/protocol/cli.md §4.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ip2netsConfig {
    pub net: Net,
    pub interfaces: Vec<InterfaceConfig>,
    pub ranges: Vec<IpPattern>,
    pub tunables: Tunables,
    pub lnd_tunables: LndTunables,
    pub cpts: Option<ExprList>,
}

/// One `peer:` item.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerConfig {
    pub primary_nid: Nid,
    /// `Multi-Rail:`; as written in this Lustre snapshot the kernel ignores `false`.
    pub multi_rail: Option<bool>,
    /// `peer state:`, the raw bitmask.
    pub state: Option<u32>,
    /// `peer ni:`; `None` when absent, which `--del` reads as "the whole peer".
    pub nis: Option<Vec<PeerNiConfig>>,
}

/// One `peer ni` item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerNiConfig {
    pub nid: Option<Nid>,
    /// `health stats: {health value: N}`, clamped to 0..=1000 by the kernel.
    pub health_value: Option<i64>,
}

/// One `route:` item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RouteConfig {
    pub net: Net,
    pub gateway: Nid,
    /// 1..=255; `None` is unset (`-1`).
    pub hops: Option<u8>,
    pub priority: u32,
    /// `state: up|down`, router state injection.
    pub alive: Option<bool>,
    pub notify_time: Option<i64>,
}

/// `buffers:` totals; `None` leaves a pool unchanged (lnetctl's -1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Buffers {
    pub tiny: Option<i64>,
    pub small: Option<i64>,
    pub large: Option<i64>,
}

/// One `udsp:` item (items without `idx` are dropped, as lnetctl drops them, and listed in
/// [`Imported::unknown_keys`] as [`UDSP_ITEM_WITHOUT_IDX`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UdspConfig {
    pub idx: i64,
    pub src: Option<String>,
    pub dst: Option<String>,
    pub rte: Option<String>,
    pub priority: Option<i64>,
}

/// Why a `udsp:` item is not a rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UdspItemError {
    #[error("idx {0} is negative")]
    NegativeIndex(i64),
    #[error("priority {0} is not between 0 and 4294967295")]
    BadPriority(i64),
    #[error("{0}")]
    Rule(#[from] UdspSpecError),
}

impl UdspConfig {
    /// The rule this item adds and the index it goes in at, as `udsp add` would make it:
    /// without a priority, a lone `src` or `dst` is a priority-0 rule and anything else a
    /// preferred-list rule, so an `export` (which prints `action` for priority rules only)
    /// imports back to the same rules. lnetctl's importer differs (decision 0021): it sends
    /// every item as a priority rule, of priority -1 when it has none, and fails on a
    /// priority of 0. lustre: lnetctl.c `handle_udsp_sequences()`, liblnetconfig_udsp.c
    /// `lustre_lnet_add_udsp()`.
    pub fn rule(&self) -> Result<(UdspRule, usize), UdspItemError> {
        let index =
            usize::try_from(self.idx).map_err(|_| UdspItemError::NegativeIndex(self.idx))?;
        let priority = self
            .priority
            .map(|priority| {
                u32::try_from(priority).map_err(|_| UdspItemError::BadPriority(priority))
            })
            .transpose()?;
        let rule = UdspRule::from_lnetctl(
            self.src.as_deref(),
            self.dst.as_deref(),
            self.rte.as_deref(),
            priority,
        )?;
        Ok((rule, index))
    }
}

/// A `ping:` or `discover:` block of `import --exec` (docs/protocol/cli.md §4.6). NIDs are kept as
/// written: they may be nidlists with ranges.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExecCommand {
    Ping { nids: Vec<String>, timeout: Option<i64>, source: Option<String> },
    Discover { nids: Vec<String> },
}

// ---------------------------------------------------------------------------------------------
// Defaults.

/// The common tunables a net gets from its LND when the configuration leaves them unset.
/// lustre: socklnd_modparams.c (`peer_timeout` 180, `peer_credits` 8, `peer_buffer_credits` 0,
/// `credits` 256); lo reports zeros; o2iblnd_modparams.c (180, 8, 0, 256 as well).
pub fn default_tunables(lnd: LndType) -> (i32, i32, i32, i32) {
    match lnd {
        LndType::LO => (0, 0, 0, 0),
        _ => (180, 8, 0, 256),
    }
}

/// The `conns_per_peer` a socklnd NI shows when the configuration leaves it unset and the
/// link speed is unknown: the module default is 0 ("auto", `DEFAULT_CONNS_PER_PEER` in
/// lib-lnet.h), which NI startup replaces with the count for the link's speed
/// (`ulnet_proto::socklnd::tunables::auto_conns_per_peer`).
pub const DEFAULT_CONNS_PER_PEER: u16 = 1;

/// `tos` unset (lustre: `init_lnd_tunables()` in lnetctl.c sets -1).
pub const DEFAULT_TOS: i16 = -1;

// ---------------------------------------------------------------------------------------------
// Global settings.

/// Every key `global show` prints, in its order, plus the `max_intf` spelling import accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GlobalKey {
    NumaRange,
    MaxInterfaces,
    Discovery,
    DropAsymRoute,
    RetryCount,
    TransactionTimeout,
    HealthSensitivity,
    RecoveryInterval,
    RouterSensitivity,
    LndTimeout,
    ResponseTracking,
    RecoveryLimit,
    MaxRecoveryPingInterval,
}

impl GlobalKey {
    /// `global show` order (docs/protocol/cli.md §3.7).
    pub const ALL: [Self; 13] = [
        Self::NumaRange,
        Self::MaxInterfaces,
        Self::Discovery,
        Self::DropAsymRoute,
        Self::RetryCount,
        Self::TransactionTimeout,
        Self::HealthSensitivity,
        Self::RecoveryInterval,
        Self::RouterSensitivity,
        Self::LndTimeout,
        Self::ResponseTracking,
        Self::RecoveryLimit,
        Self::MaxRecoveryPingInterval,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::NumaRange => "numa_range",
            Self::MaxInterfaces => "max_interfaces",
            Self::Discovery => "discovery",
            Self::DropAsymRoute => "drop_asym_route",
            Self::RetryCount => "retry_count",
            Self::TransactionTimeout => "transaction_timeout",
            Self::HealthSensitivity => "health_sensitivity",
            Self::RecoveryInterval => "recovery_interval",
            Self::RouterSensitivity => "router_sensitivity",
            Self::LndTimeout => "lnd_timeout",
            Self::ResponseTracking => "response_tracking",
            Self::RecoveryLimit => "recovery_limit",
            Self::MaxRecoveryPingInterval => "max_recovery_ping_interval",
        }
    }

    /// The key for a name lnetctl's importer accepts (`global_params[]`, lnetctl.c).
    pub fn from_name(name: &str) -> Option<Self> {
        if name == "max_intf" {
            return Some(Self::MaxInterfaces);
        }
        Self::ALL.into_iter().find(|key| key.name() == name)
    }

    /// The value `import --del` restores, for the three keys it resets (docs/protocol/cli.md §4.5).
    pub fn deleted_value(self) -> Option<i64> {
        match self {
            Self::NumaRange => Some(0),
            Self::MaxInterfaces => Some(INTERFACES_MAX_DEFAULT),
            Self::Discovery => Some(1),
            _ => None,
        }
    }
}

/// `LNET_INTERFACES_MAX_DEFAULT` (include/uapi/linux/lnet/lnet-types.h).
pub const INTERFACES_MAX_DEFAULT: i64 = 4096;
/// `LNET_INTERFACES_MIN`: smaller `max_interfaces` values fall back to the default.
pub const INTERFACES_MIN: i64 = 16;

/// lnetctl's `LUSTRE_CFG_RC_GENERIC_ERR` (-ENODATA): what a rejected sysfs write reports.
const RC_GENERIC_ERR: i32 = -61;
/// -EINVAL.
const RC_BAD_PARAM: i32 = -22;

/// The global tunables with Lustre's defaults (docs/protocol/cli.md §1.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GlobalSettings {
    pub numa_range: i64,
    pub max_interfaces: i64,
    pub discovery: bool,
    pub drop_asym_route: bool,
    pub retry_count: i64,
    pub transaction_timeout: i64,
    pub health_sensitivity: i64,
    pub router_sensitivity: i64,
    pub response_tracking: i64,
    pub recovery_limit: i64,
    pub max_recovery_ping_interval: i64,
    /// Router module parameters no YAML key carries (set from modprobe.d files): never
    /// shown by `global show`, which prints only lnetctl's keys.
    pub router: RouterSettings,
    /// lnet's `portal_rotor` (0-3, default 3), from modprobe.d files only: lnetctl has no key
    /// for it (the kernel's is written in /sys/module/lnet/parameters).
    pub portal_rotor: i64,
}

/// `check_routers_before_use`, `avoid_asym_router_failure`, `alive_router_check_interval`
/// and `router_ping_timeout` (lnet/lnet/router.c), with the kernel's defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RouterSettings {
    pub check_routers_before_use: bool,
    pub avoid_asym_router_failure: bool,
    /// Seconds; 0 or less turns the router checker off.
    pub alive_router_check_interval: i64,
    pub router_ping_timeout: i64,
}

impl Default for RouterSettings {
    fn default() -> Self {
        Self {
            check_routers_before_use: false,
            avoid_asym_router_failure: true,
            alive_router_check_interval: 60,
            router_ping_timeout: 50,
        }
    }
}

impl Default for GlobalSettings {
    fn default() -> Self {
        Self {
            numa_range: 0,
            max_interfaces: INTERFACES_MAX_DEFAULT,
            discovery: true,
            drop_asym_route: false,
            retry_count: 2,
            transaction_timeout: 150,
            health_sensitivity: 100,
            router_sensitivity: 100,
            response_tracking: 3,
            recovery_limit: 0,
            max_recovery_ping_interval: 900,
            router: RouterSettings::default(),
            portal_rotor: 3,
        }
    }
}

/// A global setting lnetctl or the kernel refused; rendered as lnetctl's cYAML error.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{descr}")]
pub struct GlobalError {
    pub key: GlobalKey,
    /// The entity word of the report (`maximum recovery ping interval` for one key).
    pub entity: &'static str,
    pub rc: i32,
    pub descr: String,
}

impl GlobalError {
    /// The `add: - <entity>: {errno, descr}` entry lnetctl prints on stderr.
    pub fn report(&self) -> CyamlErrorEntry {
        CyamlErrorEntry::quoted("add", self.entity, self.rc, &self.descr)
    }
}

impl GlobalSettings {
    /// Derived `lnd_timeout = max((transaction_timeout - 1) / (retry_count + 1), 1)`.
    /// lustre: api-ni.c `lnet_set_lnd_timeout()`.
    pub fn lnd_timeout(&self) -> i64 {
        ((self.transaction_timeout - 1) / (self.retry_count + 1)).max(1)
    }

    /// The value `global show` prints for `key`.
    pub fn value(&self, key: GlobalKey) -> i64 {
        match key {
            GlobalKey::NumaRange => self.numa_range,
            GlobalKey::MaxInterfaces => self.max_interfaces,
            GlobalKey::Discovery => i64::from(self.discovery),
            GlobalKey::DropAsymRoute => i64::from(self.drop_asym_route),
            GlobalKey::RetryCount => self.retry_count,
            GlobalKey::TransactionTimeout => self.transaction_timeout,
            GlobalKey::HealthSensitivity => self.health_sensitivity,
            // Deprecated: accepted and ignored, always reads 1.
            GlobalKey::RecoveryInterval => 1,
            GlobalKey::RouterSensitivity => self.router_sensitivity,
            GlobalKey::LndTimeout => self.lnd_timeout(),
            GlobalKey::ResponseTracking => self.response_tracking,
            GlobalKey::RecoveryLimit => self.recovery_limit,
            GlobalKey::MaxRecoveryPingInterval => self.max_recovery_ping_interval,
        }
    }

    /// The `global show` input.
    pub fn show(&self) -> GlobalShow {
        let v = |key| self.value(key);
        GlobalShow {
            numa_range: v(GlobalKey::NumaRange),
            max_interfaces: v(GlobalKey::MaxInterfaces),
            discovery: v(GlobalKey::Discovery),
            drop_asym_route: v(GlobalKey::DropAsymRoute),
            retry_count: v(GlobalKey::RetryCount),
            transaction_timeout: v(GlobalKey::TransactionTimeout),
            health_sensitivity: v(GlobalKey::HealthSensitivity),
            recovery_interval: v(GlobalKey::RecoveryInterval),
            router_sensitivity: v(GlobalKey::RouterSensitivity),
            lnd_timeout: v(GlobalKey::LndTimeout),
            response_tracking: v(GlobalKey::ResponseTracking),
            recovery_limit: v(GlobalKey::RecoveryLimit),
            max_recovery_ping_interval: v(GlobalKey::MaxRecoveryPingInterval),
        }
    }

    /// Applies one value as `import` (and `lnetctl set`) does, enforcing the union of
    /// lnetctl's and the kernel's checks. lnetctl passes values as C `int`, so the value is
    /// truncated to 32 bits first, as there. `lnd_timeout` is accepted and ignored.
    ///
    /// lustre: liblnetconfig.c `lustre_lnet_config_*()`; api-ni.c `*_set()` module parameter
    /// setters; router.c `rtr_sensitivity_set()`.
    pub fn set(&mut self, key: GlobalKey, value: i64) -> Result<(), GlobalError> {
        let value = i64::from(value as i32);
        let sysfs_error = |what: &str| GlobalError {
            key,
            entity: key.name(),
            rc: RC_GENERIC_ERR,
            descr: format!("cannot configure {what}: Invalid argument"),
        };
        match key {
            GlobalKey::NumaRange => {
                if value < 0 {
                    return Err(GlobalError {
                        key,
                        entity: key.name(),
                        rc: RC_BAD_PARAM,
                        descr: format!("cannot configure numa_range to {value}: Invalid argument"),
                    });
                }
                self.numa_range = value;
            }
            GlobalKey::MaxInterfaces => {
                self.max_interfaces =
                    if value < INTERFACES_MIN { INTERFACES_MAX_DEFAULT } else { value };
            }
            GlobalKey::Discovery => self.discovery = value != 0,
            GlobalKey::DropAsymRoute => self.drop_asym_route = value != 0,
            GlobalKey::RetryCount => {
                let health_off = self.health_sensitivity == 0 && value > 0;
                if value < 0 || health_off || value > self.transaction_timeout {
                    return Err(sysfs_error("retry count"));
                }
                self.retry_count = value;
            }
            GlobalKey::TransactionTimeout => {
                if value <= 0 || value <= self.retry_count {
                    return Err(sysfs_error("transaction timeout"));
                }
                self.transaction_timeout = value;
            }
            GlobalKey::HealthSensitivity => {
                if !(0..=1000).contains(&value) {
                    return Err(sysfs_error("health sensitivity"));
                }
                if value == 0 {
                    self.retry_count = 0;
                }
                self.health_sensitivity = value;
            }
            GlobalKey::RecoveryInterval | GlobalKey::LndTimeout => {}
            GlobalKey::RouterSensitivity => {
                if !(0..=100).contains(&value) {
                    return Err(sysfs_error("router health sensitivity"));
                }
                self.router_sensitivity = value;
            }
            GlobalKey::ResponseTracking => {
                if !(0..=3).contains(&value) {
                    return Err(GlobalError {
                        key,
                        entity: key.name(),
                        rc: RC_BAD_PARAM,
                        descr: "Valid values are: 0, 1, 2, or 3".into(),
                    });
                }
                self.response_tracking = value;
            }
            GlobalKey::RecoveryLimit => {
                if value < 0 {
                    return Err(GlobalError {
                        key,
                        entity: key.name(),
                        rc: RC_BAD_PARAM,
                        descr: "Must be greater than or equal to 0".into(),
                    });
                }
                self.recovery_limit = value;
            }
            GlobalKey::MaxRecoveryPingInterval => {
                if value <= 0 {
                    return Err(GlobalError {
                        key,
                        entity: "maximum recovery ping interval",
                        rc: RC_BAD_PARAM,
                        descr: "must be strictly positive".into(),
                    });
                }
                self.max_recovery_ping_interval = value;
            }
        }
        Ok(())
    }

    /// Applies every `global:` entry of `config` in order, stopping at the first refusal as
    /// lnetctl's importer does.
    pub fn apply(&mut self, config: &Config) -> Result<(), GlobalError> {
        for &(key, value) in &config.global {
            self.set(key, value)?;
        }
        if let Some(range) = config.numa_range {
            self.set(GlobalKey::NumaRange, range)?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Interface matching for `net:` and `ip2nets:` items.

/// A host interface as `getifaddrs()` reports it; the daemon fills these.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostInterface {
    pub name: String,
    pub up: bool,
    pub addresses: Vec<IpAddr>,
}

/// Why a rule's interfaces could not be matched to the host's (lnetctl's messages).
/// lustre: liblnetconfig.c `lustre_lnet_match_ip_to_intf()`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MatchError {
    #[error("No UP interfaces were found")]
    NoUpInterface,
    #[error("IP pattern(s) do not match available interfaces")]
    NoPatternMatch,
    #[error("No interface matching '{0}'")]
    NoSuchInterface(String),
    #[error("Matched interface '{0}' is not UP")]
    InterfaceDown(String),
    #[error("Interface '{0}' doesn't match an IP pattern")]
    OutsideRanges(String),
    #[error("No ip2nets rules applied")]
    NoIp2netsRulesApplied,
}

/// Picks the interfaces a rule names on this host: with none named and no ranges, the first
/// UP interface with an IPv4 address other than `lo`; with ranges only, every UP interface
/// with an address in a range; with interfaces, all of them, each UP and (with ranges) in a
/// range.
pub fn match_interfaces(
    net: Net,
    interfaces: &[InterfaceConfig],
    ranges: &[IpPattern],
    host: &[HostInterface],
) -> Result<Vec<InterfaceConfig>, MatchError> {
    let in_range = |iface: &HostInterface| {
        iface.addresses.iter().any(|ip| ranges.iter().any(|range| range.matches(*ip)))
    };
    if interfaces.is_empty() && ranges.is_empty() {
        return host
            .iter()
            .find(|i| i.up && i.name != "lo" && i.addresses.iter().any(IpAddr::is_ipv4))
            .map(|i| vec![InterfaceConfig { name: i.name.clone(), cpts: None }])
            .ok_or(MatchError::NoUpInterface);
    }
    if interfaces.is_empty() {
        let mut matched: Vec<InterfaceConfig> = Vec::new();
        for iface in host.iter().filter(|i| i.up && in_range(i)) {
            // lnetctl adds an interface once per matching address; once is what it means.
            if !matched.iter().any(|m| m.name == iface.name) {
                matched.push(InterfaceConfig { name: iface.name.clone(), cpts: None });
            }
        }
        return if matched.is_empty() { Err(MatchError::NoPatternMatch) } else { Ok(matched) };
    }
    for wanted in interfaces {
        let Some(iface) = host.iter().find(|i| i.name == wanted.name) else {
            // kfilnd's cxi devices are not network interfaces (lustre: kfilnd exception).
            let cxi = wanted.name.strip_prefix("cxi").is_some_and(|n| n.parse::<u32>().is_ok());
            if net.lnd == LndType::KFI && ranges.is_empty() && cxi {
                continue;
            }
            return Err(MatchError::NoSuchInterface(wanted.name.clone()));
        };
        if !iface.up {
            return Err(MatchError::InterfaceDown(wanted.name.clone()));
        }
        if !ranges.is_empty() && !in_range(iface) {
            return Err(MatchError::OutsideRanges(wanted.name.clone()));
        }
    }
    Ok(interfaces.to_vec())
}

/// lnetctl's `ip2nets:` handling: each rule that matches this host configures its
/// interfaces on its net, as one `net add` would; rules naming one net are merged into it
/// (the first rule's tunables stay, as the kernel keeps a net's tunables when NIs join it),
/// and an interface an earlier rule configured is not added twice. No rule matching at all is
/// an error. lustre: liblnetconfig.c `handle_yaml_config_ip2nets()`,
/// `lustre_lnet_config_ip2nets()` (one NI configuration per rule).
pub fn resolve_ip2nets(
    rules: &[Ip2netsConfig],
    host: &[HostInterface],
) -> Result<Vec<NetConfig>, MatchError> {
    let mut nets: Vec<NetConfig> = Vec::new();
    for rule in rules {
        let Ok(interfaces) = match_interfaces(rule.net, &rule.interfaces, &rule.ranges, host)
        else {
            continue;
        };
        if let Some(net) = nets.iter_mut().find(|n| n.net == rule.net) {
            let known = |wanted: &InterfaceConfig| {
                net.nis.iter().flat_map(|ni| &ni.interfaces).any(|i| i.name == wanted.name)
            };
            let new: Vec<InterfaceConfig> =
                interfaces.into_iter().filter(|wanted| !known(wanted)).collect();
            if !new.is_empty() {
                net.nis.push(LocalNiConfig { nid: None, interfaces: new, cpts: None });
            }
            continue;
        }
        nets.push(NetConfig {
            net: rule.net,
            nis: vec![LocalNiConfig { nid: None, interfaces, cpts: None }],
            tunables: rule.tunables,
            lnd_tunables: rule.lnd_tunables.clone(),
            cpts: rule.cpts.clone(),
        });
    }
    if nets.is_empty() {
        return Err(MatchError::NoIp2netsRulesApplied);
    }
    Ok(nets)
}

#[cfg(test)]
mod tests;
