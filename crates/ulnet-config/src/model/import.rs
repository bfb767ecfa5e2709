//! `lnetctl import`: YAML text (either dialect, several documents allowed) to a [`Config`].
//!
//! lnetctl streams the input: `net:`/`ip2nets:`/`udsp:`/`global:` are interpreted in
//! userspace, `peer:`/`route:`/`routing:`/`buffers:`/`numa:` are forwarded to the kernel,
//! and any other top-level key is taken for a global parameter. This parser reproduces the
//! accepted vocabulary and the error texts of both sides (the `descr` of lnetctl's report);
//! it validates everything up front instead of failing half-way through a stream.
//!
//! lustre: lnet/utils/lnetctl.c `jt_import()`, `handle_net_config_sequence()`,
//! `handle_global_parameter()`, `handle_cmn_tunable()`, `handle_lnd_tunable()`,
//! `handle_cpt_sequence()`, `handle_udsp_sequences()`; liblnetconfig_netlink.c
//! `yaml_fill_scalar_data()`; lnet/lnet/api-ni.c `lnet_peer_ni_cmd()`, `lnet_parse_peer_nis()`,
//! `lnet_route_cmd()`.

use serde::Deserialize as _;
use ulnet_proto::addr::{DEFAULT_EXPANSION_LIMIT, LndType, Net, Nid, NidList};
use yaml_serde::Value;

use super::{
    Config, ExecCommand, GlobalKey, InterfaceConfig, Ip2netsConfig, LndTunables, LocalNiConfig,
    NetConfig, PeerConfig, PeerNiConfig, RouteConfig, Tunables, UdspConfig,
};
use crate::grammar::{ExprList, IpPattern, MAX_INTERFACE_NAME_LEN, parse_cpts};
use crate::nid_text::{parse_c_long, parse_net, parse_nid};
use crate::render::{ErrorOp, NetlinkError};

/// Largest input accepted. lnetctl has no limit; this bounds what one import may allocate.
pub const MAX_IMPORT_LEN: usize = 1 << 20;

/// `import --add` (default), `--del`, `--show`, `--exec`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ImportMode {
    #[default]
    Add,
    Del,
    Show,
    Exec,
}

impl ImportMode {
    /// The operation word of error reports: the netlink flags of the mode's requests.
    pub fn error_op(self) -> ErrorOp {
        match self {
            Self::Add | Self::Exec => ErrorOp::Add,
            Self::Del => ErrorOp::Del,
            Self::Show => ErrorOp::Show,
        }
    }
}

/// A parsed import and the warnings lnetctl would print on stderr while reading it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Imported {
    pub config: Config,
    pub warnings: Vec<String>,
    /// Keys that were accepted but mean nothing to the model, in input order: the unknown
    /// keys of the warnings above, and those lnetctl (or the kernel) skips without a word.
    /// Read-only keys of `export` output (`status`, statistics, credits, ...) are not
    /// listed: they describe a node, they configure nothing. The socklnd `timeout` of a full
    /// export is listed (lnetctl warns about it): it is the module-wide `sock_timeout`, which
    /// an import does not set. `ulnetd --config` refuses a file that has any.
    pub unknown_keys: Vec<UnknownKey>,
    /// The top-level blocks of the input, in order, each once.
    pub sections: Vec<String>,
}

/// The [`UnknownKey::key`] of a `udsp:` item without `idx`, which lnetctl skips whole
/// (lnetctl.c `handle_udsp_sequences()` acts at the end of an item only when it had one).
pub const UDSP_ITEM_WITHOUT_IDX: &str = "<item without idx>";

/// A key [`import`] skipped: `key` inside `within` (`peer`, `peer ni`, `route`, `tunables`,
/// ...).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownKey {
    pub within: String,
    pub key: String,
    /// Whether lnetctl's "Ignoring unrecognized key" warning names it.
    pub warned: bool,
}

impl std::fmt::Display for UnknownKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: unknown key '{}'", self.within, self.key)
    }
}

/// Why an import was refused. The messages are lnetctl's `descr` texts; variants that share
/// a text are still distinct causes.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ImportError {
    #[error("input is {0} bytes, at most {MAX_IMPORT_LEN} are read")]
    TooLarge(usize),
    /// The YAML itself did not parse.
    #[error("{0}")]
    Yaml(String),
    #[error("a document must be a mapping of sections")]
    NotAMapping,
    #[error("invalid key '{0}'")]
    InvalidKey(String),
    #[error("no value specified for key '{0}'")]
    NoValue(String),
    #[error("invalid value '{value}' for key '{key}'")]
    InvalidValue { key: String, value: String },
    #[error("'{0}' must be a sequence")]
    ExpectedSequence(String),
    #[error("'{0}' must be a mapping")]
    ExpectedMapping(String),
    #[error("Malformed input. Expect 'net type' found '{0}'")]
    ExpectedNetType(String),
    #[error("Malformed input. Expect 'net-spec' found '{0}'")]
    ExpectedNetSpec(String),
    #[error("Invalid network ID '{0}'")]
    InvalidNetwork(String),
    // lnetctl's text, opening quote missing as in lnetctl.c.
    #[error("local NI(s)' not valid for ip2nets")]
    LocalNiInIp2nets,
    #[error("'ip-range' only valid for ip2nets")]
    IpRangeInNet,
    #[error("Failed to parse interfaces list rc = -22")]
    InterfacesNotMapping,
    #[error("Failed to parse interfaces list rc = -22")]
    BadInterface(String),
    #[error("Failed to parse ip-range list rc = -22")]
    IpRangeNotMapping,
    #[error("Failed to parse ip-range list rc = -22")]
    BadIpRange(String),
    #[error("Failed to parse tunables rc = -22")]
    TunablesNotMapping,
    #[error("Failed to parse lnd tunables rc = -22")]
    LndTunablesNotMapping,
    #[error("Unable to parse CPT '{0}'")]
    BadCpt(String),
    #[error("Unable to parse CPT configuration")]
    CptNotScalarOrSequence,
    #[error("Missing CPT configuration")]
    MissingCpt,
    #[error("Malformed CPT configuration")]
    MalformedCpt,
    #[error("invalid conns-per-peer value (valid range 0-127)")]
    ConnsPerPeerRange(i64),
    #[error("Invalid ToS argument")]
    TosRange(i64),
    /// ulnet: a local NI's `nid:` (which lnetctl ignores) that does not parse.
    #[error("cannot parse nid '{0}'")]
    BadLocalNid(String),
    /// ulnet: a local NI's `nid:` on another net than the item's.
    #[error("nid '{nid}' is not on net {net}")]
    NidNotOnNet { nid: Nid, net: Net },
    #[error("missing primary NID")]
    MissingPrimaryNid,
    #[error("unsupported primary NID")]
    BadPrimaryNid(String),
    #[error("invalid MR flag param")]
    BadMultiRail(String),
    #[error("invalid peer state param")]
    BadPeerState(String),
    #[error("invalid NIDs list")]
    PeerNisNotSequence,
    #[error("unsupported secondary NID")]
    BadPeerNid(String),
    #[error("invalid health configuration")]
    HealthNotMapping,
    #[error("wrong health config format")]
    WrongHealthKey(String),
    #[error("invalid health config format")]
    BadHealthValue(String),
    #[error("missing mandatory parameter: network")]
    MissingRouteNet,
    #[error("missing mandatory parameter: gateway")]
    MissingGateway,
    #[error("cannot parse remote net")]
    BadRouteNet(String),
    #[error("setting @lo not allowed")]
    LoRoute,
    #[error("cannot parse gateway")]
    BadGateway(String),
    #[error("hop has invalid key")]
    HopNotInteger(String),
    #[error("invalid hop count must be between 1 and 255")]
    HopRange(i64),
    #[error("priority has invalid key")]
    PriorityNotInteger(String),
    #[error("invalid priority, must not be negative")]
    NegativePriority(i64),
    #[error("status string bad value")]
    BadRouteState(String),
    #[error("notify_time is invalid key")]
    BadNotifyTime(String),
    #[error("tiny, small and large must be >= 0")]
    BufferRange(i64),
    /// ulnet: a `ping:`/`discover:` block without targets.
    #[error("Missing nid argument")]
    ExecWithoutNids,
}

impl ImportError {
    /// The negative errno lnetctl reports with the error.
    pub fn errno(&self) -> i32 {
        match self {
            Self::MissingCpt => -61,
            Self::BadRouteNet(_)
            | Self::BadGateway(_)
            | Self::MissingRouteNet
            | Self::MissingGateway => -19,
            Self::LoRoute => -13,
            Self::ConnsPerPeerRange(_) | Self::BufferRange(_) => -34,
            _ => -22,
        }
    }

    /// lnetctl's stderr report: `<op>: - import: {errno, descr}` in dialect N.
    pub fn report(&self, mode: ImportMode) -> String {
        NetlinkError::new(mode.error_op(), "import", self.errno(), self.to_string()).render()
    }
}

/// Parses `lnetctl import` input. Warnings are lnetctl's "Ignoring unrecognized key" lines,
/// plus one for unknown keys in `net:` items, which lnetctl skips silently.
pub fn import(text: &str, mode: ImportMode) -> Result<Imported, ImportError> {
    if text.len() > MAX_IMPORT_LEN {
        return Err(ImportError::TooLarge(text.len()));
    }
    let mut walker = Walker { mode, imported: Imported::default() };
    for document in yaml_serde::Deserializer::from_str(text) {
        let value = Value::deserialize(document).map_err(|e| ImportError::Yaml(e.to_string()))?;
        walker.document(&value)?;
    }
    Ok(walker.imported)
}

struct Walker {
    mode: ImportMode,
    imported: Imported,
}

/// Keys of `net show` output that an export carries and import skips.
const SHOW_ONLY_NET_KEYS: &[&str] = &[
    "nid",
    "status",
    "statistics",
    "udsp info",
    "sent_stats",
    "received_stats",
    "dropped_stats",
    "health stats",
    "dev cpt",
];

impl Walker {
    fn document(&mut self, value: &Value) -> Result<(), ImportError> {
        match value {
            Value::Null => Ok(()),
            Value::Mapping(map) => {
                for (key, value) in map {
                    let key = scalar_text(key).ok_or(ImportError::NotAMapping)?;
                    self.section(&key, value)?;
                }
                Ok(())
            }
            Value::Tagged(tagged) => self.document(&tagged.value),
            _ => Err(ImportError::NotAMapping),
        }
    }

    fn section(&mut self, key: &str, value: &Value) -> Result<(), ImportError> {
        if !self.imported.sections.iter().any(|seen| seen == key) {
            self.imported.sections.push(key.to_string());
        }
        let exec = self.mode == ImportMode::Exec;
        match key {
            "net" | "ip2nets" => {
                for item in sequence_of_maps(key, value)? {
                    self.net_item(item, key == "ip2nets")?;
                }
            }
            "peer" if !exec => {
                for item in sequence_of_maps(key, value)? {
                    let peer = self.peer_item(item)?;
                    self.imported.config.peers.push(peer);
                }
            }
            "route" if !exec => {
                for item in sequence_of_maps(key, value)? {
                    let routes = self.route_item(item)?;
                    self.imported.config.routes.extend(routes);
                }
            }
            "routing" if !exec => {
                for (key, value) in routing_entries(key, value)? {
                    if key == "enable" {
                        let enable =
                            forwarded_int(value).ok_or_else(|| invalid_value(&key, value))?;
                        self.imported.config.routing = Some(enable != 0);
                    } else if !is_cpt_pools(&key) {
                        self.unknown("routing", &key);
                    }
                }
            }
            "buffers" if !exec => {
                let mut buffers = self.imported.config.buffers.unwrap_or_default();
                for (key, value) in mapping(key, value)? {
                    let slot = match key.as_str() {
                        "tiny" => &mut buffers.tiny,
                        "small" => &mut buffers.small,
                        "large" => &mut buffers.large,
                        _ => {
                            self.unknown("buffers", &key);
                            continue;
                        }
                    };
                    let count = forwarded_int(value).ok_or_else(|| invalid_value(&key, value))?;
                    if count < -1 {
                        return Err(ImportError::BufferRange(count));
                    }
                    *slot = (count != -1).then_some(count);
                }
                self.imported.config.buffers = Some(buffers);
            }
            "numa" if !exec => {
                for (key, value) in mapping(key, value)? {
                    if key == "range" {
                        let range =
                            forwarded_int(value).ok_or_else(|| invalid_value(&key, value))?;
                        self.imported.config.numa_range = Some(range);
                    } else {
                        self.unknown("numa", &key);
                    }
                }
            }
            "udsp" => {
                for item in sequence_of_maps(key, value)? {
                    let (rule, unknown) = udsp_item(item)?;
                    for key in unknown {
                        self.unknown("udsp", &key);
                    }
                    match rule {
                        Some(rule) => self.imported.config.udsp.push(rule),
                        None => self.unknown("udsp", UDSP_ITEM_WITHOUT_IDX),
                    }
                }
            }
            "global" => {
                for (key, value) in mapping(key, value)? {
                    self.global_parameter(&key, value)?;
                }
            }
            "ping" | "discover" if exec => {
                let command = exec_block(key, value)?;
                self.imported.config.exec.push(command);
            }
            _ => self.global_parameter(key, value)?,
        }
        Ok(())
    }

    /// lustre: lnetctl.c `handle_global_parameter()` and `yaml_lnet_extract_long()`.
    fn global_parameter(&mut self, key: &str, value: &Value) -> Result<(), ImportError> {
        let global =
            GlobalKey::from_name(key).ok_or_else(|| ImportError::InvalidKey(key.to_string()))?;
        let number = extract_long(key, value)?;
        self.imported.config.global.push((global, number));
        Ok(())
    }

    /// One `net:` or `ip2nets:` item (lnetctl.c `handle_net_config_sequence()`).
    fn net_item(&mut self, item: &yaml_serde::Mapping, ip2nets: bool) -> Result<(), ImportError> {
        let mut entries = item.iter();
        let (first_key, first_value) = match entries.next() {
            Some((key, value)) => (scalar_text(key).unwrap_or_default(), value),
            None => (String::new(), &Value::Null),
        };
        let expected = if ip2nets { "net-spec" } else { "net type" };
        if first_key != expected {
            return Err(if ip2nets {
                ImportError::ExpectedNetSpec(first_key)
            } else {
                ImportError::ExpectedNetType(first_key)
            });
        }
        let net_text = scalar_text(first_value).unwrap_or_default();
        let net = parse_net(&net_text).ok_or(ImportError::InvalidNetwork(net_text))?;

        let mut state = NetItem {
            net,
            nis: Vec::new(),
            ranges: Vec::new(),
            tunables: Tunables::default(),
            lnd_tunables: LndTunables::default(),
            cpts: None,
        };
        for (key, value) in entries {
            let key = scalar_text(key).unwrap_or_default();
            match key.as_str() {
                "local NI(s)" if ip2nets => return Err(ImportError::LocalNiInIp2nets),
                "local NI(s)" => {
                    let Value::Sequence(nis) = value else {
                        return Err(ImportError::ExpectedSequence(key));
                    };
                    for ni in nis {
                        let Value::Mapping(ni) = ni else {
                            return Err(ImportError::ExpectedMapping(key.clone()));
                        };
                        let local = self.local_ni(&mut state, ni)?;
                        state.nis.push(local);
                    }
                }
                "ip-range" if !ip2nets => return Err(ImportError::IpRangeInNet),
                "ip-range" => {
                    for text in scalar_list(value, ImportError::IpRangeNotMapping)? {
                        let range =
                            IpPattern::parse(&text).map_err(|_| ImportError::BadIpRange(text))?;
                        state.ranges.push(range);
                    }
                }
                _ => self.net_setting(&mut state, &key, value, "net")?,
            }
        }

        if net == Net::LO {
            // Loopback is implicit; full exports list it.
            return Ok(());
        }
        let config = &mut self.imported.config;
        if ip2nets {
            let interfaces = state.nis.into_iter().flat_map(|ni| ni.interfaces).collect();
            config.ip2nets.push(Ip2netsConfig {
                net,
                interfaces,
                ranges: state.ranges,
                tunables: state.tunables,
                lnd_tunables: state.lnd_tunables,
                cpts: state.cpts,
            });
        } else {
            config.nets.push(NetConfig {
                net,
                nis: state.nis,
                tunables: state.tunables,
                lnd_tunables: state.lnd_tunables,
                cpts: state.cpts,
            });
        }
        Ok(())
    }

    fn local_ni(
        &mut self,
        state: &mut NetItem,
        ni: &yaml_serde::Mapping,
    ) -> Result<LocalNiConfig, ImportError> {
        let mut local = LocalNiConfig::default();
        let mut ni_cpts = None;
        for (key, value) in ni {
            let key = scalar_text(key).unwrap_or_default();
            match key.as_str() {
                "nid" => {
                    let text = scalar_text(value).unwrap_or_default();
                    let nid = parse_nid(text.trim()).ok_or(ImportError::BadLocalNid(text))?;
                    if nid.net() != state.net {
                        return Err(ImportError::NidNotOnNet { nid, net: state.net });
                    }
                    local.nid = Some(nid);
                }
                "interfaces" => local.interfaces.extend(interfaces(value)?),
                "ip-range" => return Err(ImportError::IpRangeInNet),
                // The kernel reads an NI's CPT list with that NI (lustre: api-ni.c
                // lnet_genl_parse_local_ni()): it binds that NI, whichever key comes first.
                "CPT" => ni_cpts = Some((cpt(value)?, value)),
                _ => self.net_setting(state, &key, value, "local NI(s)")?,
            }
        }
        if let Some((cpts, value)) = ni_cpts {
            if local.interfaces.is_empty() && local.nid.is_none() {
                // An item of CPT alone names no NI: the net's list.
                self.net_setting(state, "CPT", value, "local NI(s)")?;
            } else if local.interfaces.is_empty() {
                local.cpts = Some(cpts);
            } else {
                for interface in &mut local.interfaces {
                    interface.cpts.get_or_insert_with(|| cpts.clone());
                }
            }
        }
        Ok(local)
    }

    /// Keys valid both on a net item and inside its `local NI(s)`.
    fn net_setting(
        &mut self,
        state: &mut NetItem,
        key: &str,
        value: &Value,
        within: &str,
    ) -> Result<(), ImportError> {
        match key {
            "interfaces" => {
                let interfaces = interfaces(value)?;
                state.nis.push(LocalNiConfig { nid: None, interfaces, cpts: None });
            }
            "tunables" => self.tunables(&mut state.tunables, value)?,
            "lnd tunables" => self.lnd_tunables(state.net.lnd, &mut state.lnd_tunables, value)?,
            "CPT" => {
                // A scalar replaces what came before; a sequence's elements are appended
                // (lnetctl.c handle_cpt_sequence()).
                let cpts = cpt(value)?;
                match (&mut state.cpts, value) {
                    (Some(existing), Value::Sequence(_)) => existing.append(cpts),
                    (slot, _) => *slot = Some(cpts),
                }
            }
            // Exports have it on each local NI (read above); on the net it would name no NI.
            "nid" if within == "net" => self.unknown(within, key),
            key if SHOW_ONLY_NET_KEYS.contains(&key) => {}
            key => self.unrecognized(within, key),
        }
        Ok(())
    }

    /// lustre: lnetctl.c `handle_cmn_tunable()`.
    fn tunables(&mut self, tunables: &mut Tunables, value: &Value) -> Result<(), ImportError> {
        let Value::Mapping(map) = value else { return Err(ImportError::TunablesNotMapping) };
        for (key, value) in map {
            let key = scalar_text(key).unwrap_or_default();
            let number = extract_long(&key, value)?;
            match key.as_str() {
                "peer_timeout" => tunables.peer_timeout = Some(number),
                "peer_credits" => tunables.peer_credits = Some(number),
                "peer_buffer_credits" => tunables.peer_buffer_credits = Some(number),
                "credits" => tunables.credits = Some(number),
                _ => self.unrecognized("tunables", &key),
            }
        }
        Ok(())
    }

    /// lustre: lnetctl.c `handle_lnd_tunable()`; ranges from socklnd.c `ksocknal_nl_set()`
    /// and lnetctl.c `jt_add_ni()`.
    fn lnd_tunables(
        &mut self,
        lnd: LndType,
        tunables: &mut LndTunables,
        value: &Value,
    ) -> Result<(), ImportError> {
        let Value::Mapping(map) = value else { return Err(ImportError::LndTunablesNotMapping) };
        for (key, value) in map {
            let key = scalar_text(key).unwrap_or_default();
            if lnd == LndType::KFI && key == "traffic_class" {
                let text = scalar_text(value).unwrap_or_default();
                if text.is_empty() {
                    return Err(ImportError::NoValue(key));
                }
                tunables.traffic_class = Some(text);
                continue;
            }
            if lnd == LndType::O2IB && key == "map_on_demand" {
                let text = scalar_text(value).unwrap_or_default();
                if text.is_empty() {
                    return Err(ImportError::NoValue(key));
                }
                // Anything else leaves the setting alone, silently, as lnetctl does.
                tunables.map_on_demand = bool_word(&text).or(tunables.map_on_demand);
                continue;
            }
            let number = extract_long(&key, value)?;
            let socket_like = lnd == LndType::SOCK || lnd == LndType::O2IB;
            match key.as_str() {
                "auth_key" if lnd == LndType::KFI => tunables.auth_key = Some(number),
                "conns_per_peer" => {
                    if socket_like && !(0..=127).contains(&number) {
                        return Err(ImportError::ConnsPerPeerRange(number));
                    }
                    tunables.conns_per_peer = Some(number);
                }
                "tos" => {
                    if socket_like && !(-1..=255).contains(&number) {
                        return Err(ImportError::TosRange(number));
                    }
                    tunables.tos = Some(number);
                }
                "peercredits_hiw" if lnd == LndType::O2IB => {
                    tunables.peercredits_hiw = Some(number)
                }
                "concurrent_sends" if lnd == LndType::O2IB => {
                    tunables.concurrent_sends = Some(number)
                }
                "fmr_pool_size" if lnd == LndType::O2IB => tunables.fmr_pool_size = Some(number),
                "fmr_flush_trigger" if lnd == LndType::O2IB => {
                    tunables.fmr_flush_trigger = Some(number)
                }
                "fmr_cache" if lnd == LndType::O2IB => tunables.fmr_cache = Some(number),
                "ntx" if lnd == LndType::O2IB => tunables.ntx = Some(number),
                // o2iblnd ignores the rest without a word.
                _ if lnd == LndType::O2IB => self.unknown("lnd tunables", &key),
                _ => self.unrecognized("lnd tunables", &key),
            }
        }
        Ok(())
    }

    fn warn(&mut self, warning: String) {
        self.imported.warnings.push(warning);
    }

    /// A key lnetctl warns about and skips.
    fn unrecognized(&mut self, within: &str, key: &str) {
        self.warn(format!("Ignoring unrecognized key '{key}' for '{within}'"));
        self.skip(within, key, true);
    }

    /// A key skipped (without a word, unless [`Self::unrecognized`] gave one).
    fn unknown(&mut self, within: &str, key: &str) {
        self.skip(within, key, false);
    }

    fn skip(&mut self, within: &str, key: &str, warned: bool) {
        let key = UnknownKey { within: within.to_string(), key: key.to_string(), warned };
        self.imported.unknown_keys.push(key);
    }
}

/// Read-only keys of a `peer ni` item in `peer show`/`export` output (docs/protocol/cli.md
/// §3.2): an export imports without them meaning anything.
const SHOW_ONLY_PEER_NI_KEYS: &[&str] = &[
    "udsp info",
    "state",
    "max_ni_tx_credits",
    "available_tx_credits",
    "min_tx_credits",
    "tx_q_num_of_buf",
    "available_rtr_credits",
    "min_rtr_credits",
    "refcount",
    "statistics",
    "sent_stats",
    "received_stats",
    "dropped_stats",
    "latency percentiles",
];

/// The counters next to `health value` in a peer NI's `health stats` (docs/protocol/cli.md
/// §3.2), which a full export carries.
const SHOW_ONLY_PEER_HEALTH_KEYS: &[&str] =
    &["dropped", "timeout", "error", "network timeout", "ping_count", "next_ping"];

struct NetItem {
    net: Net,
    nis: Vec<LocalNiConfig>,
    ranges: Vec<IpPattern>,
    tunables: Tunables,
    lnd_tunables: LndTunables,
    cpts: Option<ExprList>,
}

/// `interfaces: {0: eth0, 1: eth1[0,1]}` (lnetctl.c `parse_yaml_list()`,
/// liblnetconfig.c `lustre_lnet_add_intf_descr()`).
fn interfaces(value: &Value) -> Result<Vec<InterfaceConfig>, ImportError> {
    scalar_list(value, ImportError::InterfacesNotMapping)?
        .into_iter()
        .map(|text| interface(&text).ok_or(ImportError::BadInterface(text)))
        .collect()
}

fn interface(text: &str) -> Option<InterfaceConfig> {
    // lustre: LNET_MAX_STR_LEN bounds the whole string and the name.
    if text.len() > MAX_INTERFACE_NAME_LEN {
        return None;
    }
    let (name, cpts) = match text.find('[') {
        Some(open) => {
            text[open..].find(']')?;
            (&text[..open], Some(parse_cpts(&text[open..]).ok()?))
        }
        None => (text, None),
    };
    (!name.is_empty()).then(|| InterfaceConfig { name: name.to_string(), cpts })
}

/// The scalar values of a mapping such as `interfaces:` or `ip-range:` (keys are ignored).
fn scalar_list(value: &Value, not_mapping: ImportError) -> Result<Vec<String>, ImportError> {
    let Value::Mapping(map) = value else { return Err(not_mapping) };
    map.values().map(|v| scalar_text(v).ok_or_else(|| not_mapping.clone())).collect()
}

/// lustre: lnetctl.c `handle_cpt_sequence()`: a scalar expression, or a flow sequence whose
/// elements are each read as `[element]`.
fn cpt(value: &Value) -> Result<ExprList, ImportError> {
    match value {
        Value::Sequence(items) => {
            let mut merged: Option<ExprList> = None;
            for (i, item) in items.iter().enumerate() {
                let Some(text) = scalar_text(item) else {
                    return Err(if i == 0 {
                        ImportError::MissingCpt
                    } else {
                        ImportError::MalformedCpt
                    });
                };
                let list =
                    parse_cpts(&format!("[{text}]")).map_err(|_| ImportError::BadCpt(text))?;
                match &mut merged {
                    Some(merged) => merged.append(list),
                    None => merged = Some(list),
                }
            }
            merged.ok_or(ImportError::MissingCpt)
        }
        Value::Mapping(_) => Err(ImportError::CptNotScalarOrSequence),
        Value::Tagged(tagged) => cpt(&tagged.value),
        scalar => {
            let text = scalar_text(scalar).unwrap_or_default();
            parse_cpts(&text).map_err(|_| ImportError::BadCpt(text))
        }
    }
}

impl Walker {
    /// One `peer:` item as the kernel reads it.
    fn peer_item(&mut self, item: &yaml_serde::Mapping) -> Result<PeerConfig, ImportError> {
        let mut primary = None;
        let mut peer =
            PeerConfig { primary_nid: Nid::ANY, multi_rail: None, state: None, nis: None };
        for (key, value) in item {
            match scalar_text(key).unwrap_or_default().as_str() {
                "primary nid" => {
                    let text = scalar_text(value).unwrap_or_default();
                    primary = Some(parse_nid(text.trim()).ok_or(ImportError::BadPrimaryNid(text))?);
                }
                "Multi-Rail" => {
                    let flag = forwarded_int(value)
                        .ok_or_else(|| ImportError::BadMultiRail(text_of(value)))?;
                    peer.multi_rail = Some(flag != 0);
                }
                "peer state" => {
                    let state = forwarded_int(value)
                        .ok_or_else(|| ImportError::BadPeerState(text_of(value)))?;
                    // The kernel stores the s64 into a u32 bitmask.
                    peer.state = Some(state as u32);
                }
                "peer ni" => {
                    let Value::Sequence(nis) = value else {
                        return Err(ImportError::PeerNisNotSequence);
                    };
                    let parsed =
                        nis.iter().map(|ni| self.peer_ni(ni)).collect::<Result<Vec<_>, _>>()?;
                    peer.nis = Some(parsed);
                }
                key => self.unknown("peer", key),
            }
        }
        peer.primary_nid = primary.ok_or(ImportError::MissingPrimaryNid)?;
        Ok(peer)
    }

    /// lustre: api-ni.c `lnet_parse_peer_nis()`.
    fn peer_ni(&mut self, item: &Value) -> Result<PeerNiConfig, ImportError> {
        let Value::Mapping(map) = item else { return Err(ImportError::PeerNisNotSequence) };
        let mut ni = PeerNiConfig { nid: None, health_value: None };
        for (key, value) in map {
            match scalar_text(key).unwrap_or_default().as_str() {
                "nid" => {
                    let text = scalar_text(value).unwrap_or_default();
                    ni.nid = Some(parse_nid(text.trim()).ok_or(ImportError::BadPeerNid(text))?);
                }
                "health stats" => {
                    let Value::Mapping(health) = value else {
                        return Err(ImportError::HealthNotMapping);
                    };
                    for (key, value) in health {
                        let key = scalar_text(key).unwrap_or_default();
                        if SHOW_ONLY_PEER_HEALTH_KEYS.contains(&key.as_str()) {
                            continue;
                        }
                        if key != "health value" {
                            return Err(ImportError::WrongHealthKey(key));
                        }
                        let health = forwarded_int(value)
                            .ok_or_else(|| ImportError::BadHealthValue(text_of(value)))?;
                        ni.health_value = Some(health.clamp(0, 1000));
                    }
                }
                key if SHOW_ONLY_PEER_NI_KEYS.contains(&key) => {}
                key => self.unknown("peer ni", key),
            }
        }
        Ok(ni)
    }

    /// One `route:` item as the kernel reads it (api-ni.c `lnet_route_cmd()`): one route per
    /// gateway, a gateway written as a NID range (`10.0.0.[1-5]@tcp`, as `route add --gateway`
    /// takes it) giving one per NID.
    fn route_item(&mut self, item: &yaml_serde::Mapping) -> Result<Vec<RouteConfig>, ImportError> {
        let (mut net, mut gateways) = (None, None);
        let mut route = RouteConfig {
            net: Net::ANY,
            gateway: Nid::ANY,
            hops: None,
            priority: 0,
            alive: None,
            notify_time: None,
        };
        for (key, value) in item {
            match scalar_text(key).unwrap_or_default().as_str() {
                "net" => {
                    let text = scalar_text(value).unwrap_or_default();
                    let parsed = parse_net(&text).ok_or(ImportError::BadRouteNet(text))?;
                    if parsed == Net::LO {
                        return Err(ImportError::LoRoute);
                    }
                    net = Some(parsed);
                }
                "gateway" => {
                    let text = scalar_text(value).unwrap_or_default();
                    gateways = Some(gateway_nids(&text)?);
                }
                "hop" => {
                    let hop = forwarded_int(value)
                        .ok_or_else(|| ImportError::HopNotInteger(text_of(value)))?;
                    route.hops = match hop {
                        -1 => None,
                        1..=255 => u8::try_from(hop).ok(),
                        _ => return Err(ImportError::HopRange(hop)),
                    };
                }
                "priority" => {
                    let priority = forwarded_int(value)
                        .ok_or_else(|| ImportError::PriorityNotInteger(text_of(value)))?;
                    route.priority = u32::try_from(priority)
                        .map_err(|_| ImportError::NegativePriority(priority))?;
                }
                "state" => {
                    route.alive = match text_of(value).as_str() {
                        "up" => Some(true),
                        "down" => Some(false),
                        other => return Err(ImportError::BadRouteState(other.to_string())),
                    };
                }
                "notify_time" => {
                    let when = forwarded_int(value)
                        .ok_or_else(|| ImportError::BadNotifyTime(text_of(value)))?;
                    route.notify_time = Some(when);
                }
                // `route show -v` and full exports: the kind of route, which is not set.
                "type" => {}
                key => self.unknown("route", key),
            }
        }
        route.net = net.ok_or(ImportError::MissingRouteNet)?;
        let gateways = gateways.ok_or(ImportError::MissingGateway)?;
        Ok(gateways.into_iter().map(|gateway| RouteConfig { gateway, ..route }).collect())
    }
}

/// A route's gateway: one NID, or a NID range of at most [`DEFAULT_EXPANSION_LIMIT`] NIDs.
fn gateway_nids(text: &str) -> Result<Vec<Nid>, ImportError> {
    let trimmed = text.trim();
    if let Some(nid) = parse_nid(trimmed) {
        return Ok(vec![nid]);
    }
    let bad = || ImportError::BadGateway(text.to_string());
    let list = NidList::parse(trimmed).map_err(|_| bad())?;
    let nids = list.expand(DEFAULT_EXPANSION_LIMIT).map_err(|_| bad())?;
    if nids.is_empty() { Err(bad()) } else { Ok(nids) }
}

/// One `udsp:` item; `None` without `idx` (lnetctl.c `handle_udsp_sequences()`).
fn udsp_item(item: &yaml_serde::Mapping) -> Result<(Option<UdspConfig>, Vec<String>), ImportError> {
    let mut rule = UdspConfig { idx: -1, src: None, dst: None, rte: None, priority: None };
    let mut has_idx = false;
    let mut unknown = Vec::new();
    let mut visit = |key: &str, value: &Value| -> Result<(), ImportError> {
        match key {
            "idx" => {
                rule.idx = extract_long(key, value)?;
                has_idx = true;
            }
            "priority" => rule.priority = Some(extract_long(key, value)?),
            "src" => rule.src = Some(text_of(value)),
            "dst" => rule.dst = Some(text_of(value)),
            "rte" => rule.rte = Some(text_of(value)),
            "action" => {}
            other => unknown.push(other.to_string()),
        }
        Ok(())
    };
    for (key, value) in item {
        let key = scalar_text(key).unwrap_or_default();
        if let Value::Mapping(inner) = value {
            // `action: {priority: N}`: lnetctl reads the keys wherever they are.
            for (inner_key, inner_value) in inner {
                visit(&scalar_text(inner_key).unwrap_or_default(), inner_value)?;
            }
        } else {
            visit(&key, value)?;
        }
    }
    Ok((has_idx.then_some(rule), unknown))
}

/// `ping: {nids: ..., timeout: ..., source: ...}` or `discover: {nids: ...}`.
fn exec_block(command: &str, value: &Value) -> Result<ExecCommand, ImportError> {
    let mut nids = Vec::new();
    let (mut timeout, mut source) = (None, None);
    for (key, value) in mapping(command, value)? {
        match key.as_str() {
            "nids" => {
                nids = match value {
                    Value::Mapping(map) => map.values().map(text_of).collect(),
                    Value::Sequence(items) => items.iter().map(text_of).collect(),
                    scalar => vec![text_of(scalar)],
                };
            }
            "timeout" => timeout = Some(extract_long(&key, value)?),
            "source" => source = Some(text_of(value)),
            _ => {}
        }
    }
    if nids.is_empty() {
        return Err(ImportError::ExecWithoutNids);
    }
    Ok(match command {
        "ping" => ExecCommand::Ping { nids, timeout, source },
        _ => ExecCommand::Discover { nids },
    })
}

// ---------------------------------------------------------------------------------------------
// Scalars.

/// A scalar as the text libyaml would have delivered; `None` for collections.
fn scalar_text(value: &Value) -> Option<String> {
    match value {
        Value::Null => Some(String::new()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        Value::String(s) => Some(s.clone()),
        Value::Tagged(tagged) => scalar_text(&tagged.value),
        Value::Sequence(_) | Value::Mapping(_) => None,
    }
}

fn text_of(value: &Value) -> String {
    scalar_text(value).unwrap_or_default()
}

/// lustre: lnetctl.c `yaml_lnet_extract_long()`: empty → "no value", unparsable → "invalid".
fn extract_long(key: &str, value: &Value) -> Result<i64, ImportError> {
    let Some(text) = scalar_text(value) else { return Err(invalid_value(key, value)) };
    if text.is_empty() {
        return Err(ImportError::NoValue(key.to_string()));
    }
    parse_c_long(&text)
        .ok_or_else(|| ImportError::InvalidValue { key: key.to_string(), value: text })
}

fn invalid_value(key: &str, value: &Value) -> ImportError {
    ImportError::InvalidValue { key: key.to_string(), value: text_of(value) }
}

/// How lnetctl forwards a value to the kernel (liblnetconfig_netlink.c
/// `yaml_fill_scalar_data()`): yes/true/on/y and no/false/off/n become 1 and 0, strings of
/// digits and '-' become integers (`strtoll(.., 0)`), the rest stays a string (`None` here).
fn forwarded_int(value: &Value) -> Option<i64> {
    let text = scalar_text(value)?;
    if let Some(flag) = bool_word(&text).filter(|_| text != "1" && text != "0") {
        return Some(i64::from(flag));
    }
    if text.is_empty() || !text.bytes().all(|b| b == b'-' || b.is_ascii_digit()) {
        return None;
    }
    Some(c_strtoll_prefix(&text))
}

/// `strtoll(text, NULL, 0)` on a string of digits and dashes: the longest valid prefix, 0
/// when there is none, saturated on overflow.
fn c_strtoll_prefix(text: &str) -> i64 {
    let (negative, rest) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let digits: &str = &rest[..rest.find('-').unwrap_or(rest.len())];
    let (radix, digits) = if digits.len() > 1 && digits.starts_with('0') {
        let octal_len = digits.bytes().take_while(|b| (b'0'..=b'7').contains(b)).count();
        (8, &digits[..octal_len])
    } else {
        (10, digits)
    };
    let magnitude = i128::from_str_radix(if digits.is_empty() { "0" } else { digits }, radix)
        .unwrap_or(i128::MAX);
    let value = if negative { -magnitude } else { magnitude };
    value.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

/// The boolean words lnetctl understands (case-insensitive), plus "1"/"0".
fn bool_word(text: &str) -> Option<bool> {
    match text.to_ascii_lowercase().as_str() {
        "yes" | "true" | "on" | "y" | "1" => Some(true),
        "no" | "false" | "off" | "n" | "0" => Some(false),
        _ => None,
    }
}

fn mapping<'v>(key: &str, value: &'v Value) -> Result<Vec<(String, &'v Value)>, ImportError> {
    match value {
        Value::Mapping(map) => {
            Ok(map.iter().map(|(k, v)| (scalar_text(k).unwrap_or_default(), v)).collect())
        }
        Value::Tagged(tagged) => mapping(key, &tagged.value),
        _ => Err(ImportError::ExpectedMapping(key.to_string())),
    }
}

/// A `routing:` block: `{enable: N}` (what `export --backup` writes and lnetctl's users
/// write), or the sequence a full export and `routing show` print: one `cpt[N]:` item of pool
/// statistics per partition, then `- enable: N`. Its entries, in order.
fn routing_entries<'v>(
    key: &str,
    value: &'v Value,
) -> Result<Vec<(String, &'v Value)>, ImportError> {
    match value {
        Value::Sequence(_) => {
            let mut entries = Vec::new();
            for item in sequence_of_maps(key, value)? {
                entries.extend(item.iter().map(|(k, v)| (scalar_text(k).unwrap_or_default(), v)));
            }
            Ok(entries)
        }
        _ => mapping(key, value),
    }
}

/// `cpt[N]`: a partition's pool statistics in a full export, read-only.
fn is_cpt_pools(key: &str) -> bool {
    key.strip_prefix("cpt[")
        .and_then(|rest| rest.strip_suffix(']'))
        .is_some_and(|number| !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit()))
}

fn sequence_of_maps<'v>(
    key: &str,
    value: &'v Value,
) -> Result<Vec<&'v yaml_serde::Mapping>, ImportError> {
    let Value::Sequence(items) = value else {
        return Err(ImportError::ExpectedSequence(key.to_string()));
    };
    items
        .iter()
        .map(|item| match item {
            Value::Mapping(map) => Ok(map),
            _ => Err(ImportError::ExpectedMapping(key.to_string())),
        })
        .collect()
}
