//! The nets a node runs, resolved to exact NIDs: from the configuration file's `net:` and
//! `ip2nets:` items, and from `net add` requests. Both paths end in [`NetSpec`], from which
//! the node is built.
//!
//! An NI comes up on exactly the address of its `nid:` key (or `--nid`), which need not be
//! an interface's own address (127.0.0.2, 127.0.0.3, ... all route to `lo`); an NI named
//! by interface takes that interface's first IPv4 address, as socklnd does.

use std::net::IpAddr;

use ulnet::NetTunables;
use ulnet_config::grammar::{self, ExprList, Ip2netsRule, parse_ip2nets, resolve_ip2nets};
use ulnet_config::model::{
    self, DEFAULT_TOS, HostInterface, LndTunables, LocalNiConfig, NetConfig, Tunables,
};
use ulnet_config::modprobe::SocklndModule;
use ulnet_control::ControlError;
use ulnet_control::message::errno;
use ulnet_proto::addr::{LndType, Net, Nid};
use ulnet_proto::engine::CptsJoin;
use ulnet_proto::engine::cpt::{CptError, CptList, MAX_CPTS, Partitions};

use crate::device_numa::DeviceNuma;
use crate::interfaces::{interface_address, interface_of};

/// One configured net as the node runs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetSpec {
    pub net: Net,
    pub nis: Vec<NiSpec>,
    /// The net's common tunables, LND defaults filled in.
    pub tunables: NetTunables,
    pub socklnd: SocklndTunables,
}

/// One NI: its exact NID, the interface it shows, its CPTs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NiSpec {
    pub nid: Nid,
    /// The host interface owning the address, when there is one (shown by `net show`).
    pub interface: Option<String>,
    /// The CPTs the NI is bound to; `None` for all of them (before [`bind_cpts`]: none
    /// configured).
    pub cpts: Option<Vec<u32>>,
    /// The partition of its device's NUMA node (`ni_dev_cpt`); `None` when unknown.
    pub dev_cpt: Option<u32>,
    /// How its CPTs join its net's set: given to a dynamic add (the configuration file,
    /// `net add`), by `networks=`, or bound near its device ([`bind_cpts`]).
    pub cpts_join: CptsJoin,
}

impl NiSpec {
    /// An NI on exactly `nid`, shown on `interface`, given no CPTs and not yet bound.
    pub fn new(nid: Nid, interface: Option<String>) -> Self {
        Self { nid, interface, cpts: None, dev_cpt: None, cpts_join: CptsJoin::Explicit }
    }
}

/// socklnd's per-net tunables (`lnd tunables:`), plus the module parameter `net show`
/// reports as `timeout`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SocklndTunables {
    /// As configured: 0 is "auto" (from the link speed, which socklnd resolves at start).
    pub conns_per_peer: u8,
    /// IP type of service; -1 leaves the socket's default.
    pub tos: i16,
}

/// socklnd's `sock_timeout` default, shown as the read-only `timeout` of `lnd tunables`.
/// lustre: socklnd.h `SOCKNAL_TIMEOUT_DEFAULT`, `ksocknal_timeout()`; socklnd.c
/// `ksocknal_nl_get()`.
pub const SOCK_TIMEOUT_SECONDS: u32 = 50;

impl Default for SocklndTunables {
    fn default() -> Self {
        Self { conns_per_peer: 0, tos: DEFAULT_TOS }
    }
}

impl SocklndTunables {
    /// The `conns_per_peer` `net show` reports for an NI whose interface runs at
    /// `link_speed_mbps`: the configured number, or for "auto" what socklnd derives from the
    /// speed (1 when unknown: loopback, links that are down).
    /// lustre: socklnd_modparams.c `ksocklnd_lookup_conns_per_peer()`.
    pub fn shown_conns_per_peer(&self, link_speed_mbps: Option<u32>) -> u16 {
        let configured = ulnet::ConnsPerPeer::new(u32::from(self.conns_per_peer));
        u16::from(configured.unwrap_or_default().resolve(link_speed_mbps))
    }
}

/// Why a net could not be resolved to NIs. Each kind is distinct; [`NetError::to_control`]
/// gives the errno and text the kernel's `net add` handler reports for it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NetError {
    #[error("cannot parse net '{0}'")]
    BadNet(String),
    #[error("the loopback net lo is implicit and cannot be configured")]
    LoopbackNet,
    /// Only socklnd (`tcp`) is implemented.
    #[error("net {0}: LND type not supported by ulnetd (only tcp)")]
    UnsupportedLnd(Net),
    #[error("net {0}: a local NI needs an interface or a nid")]
    MissingInterface(Net),
    #[error("cannot parse NID '{0}'")]
    BadNid(String),
    #[error("NID {nid} is not on net {net}")]
    NidNotOnNet { nid: Nid, net: Net },
    #[error("NID {0} has no IP address")]
    NidWithoutAddress(Nid),
    #[error("NI {nid}: a local NI with a nid names at most one interface, not {count}")]
    NidWithInterfaces { nid: Nid, count: usize },
    #[error("no interface '{0}' on this host")]
    NoSuchInterface(String),
    #[error("interface '{0}' has no IPv4 address")]
    InterfaceWithoutIpv4(String),
    #[error("no UP interface with an IPv4 address for net {0}")]
    NoDefaultInterface(Net),
    #[error("CPT {cpt} does not exist: the node has {count} CPT")]
    CptOutOfRange { cpt: u32, count: u32 },
    #[error("cannot parse CPT expression '{0}'")]
    BadCpt(String),
    #[error("NI {0} is configured twice")]
    DuplicateNid(Nid),
    #[error("ip2net: {0}")]
    BadIp2net(String),
    #[error("no ip2nets rule matches this host")]
    NoIp2netsMatch,
    #[error("cannot read the host's interfaces: {0}")]
    HostInterfaces(String),
}

impl NetError {
    /// The kernel's answer to a `net add` failing this way: its errno and extended-ack text.
    /// lustre: api-ni.c `lnet_net_cmd()`, `lnet_genl_parse_local_ni()` (messages),
    /// `lnet_dyn_add_ni()` (-EEXIST, -ERANGE, -ENOENT), socklnd.c `ksocknal_startup()`
    /// (-ENODEV for a missing interface).
    pub fn to_control(&self) -> ControlError {
        let (code, descr) = match self {
            Self::BadNet(_) => (errno::ENODEV, "cannot parse net"),
            Self::LoopbackNet => (errno::ENODEV, "setting @lo not allowed"),
            Self::UnsupportedLnd(_) => (errno::EINVAL, "LND type not supported"),
            Self::MissingInterface(_) => (errno::EINVAL, "interface / NID is missing"),
            Self::BadNid(_) | Self::NidNotOnNet { .. } | Self::NidWithoutAddress(_) => {
                (errno::EINVAL, "unsupported NID")
            }
            Self::NidWithInterfaces { .. } => (errno::EINVAL, "invalid interfaces"),
            Self::NoSuchInterface(_)
            | Self::InterfaceWithoutIpv4(_)
            | Self::NoDefaultInterface(_)
            | Self::HostInterfaces(_) => (errno::ENODEV, "cannot add LNet NI"),
            Self::CptOutOfRange { .. } => (errno::ERANGE, "invalid CPT value"),
            Self::BadCpt(_) => (errno::EINVAL, "invalid CPT config"),
            Self::DuplicateNid(_) => (errno::EEXIST, "cannot add LNet NI"),
            Self::BadIp2net(_) | Self::NoIp2netsMatch => (errno::EINVAL, "cannot setup ip2nets"),
        };
        ControlError::refused(code, descr)
    }
}

/// Resolves one `net:` item (or a `net add`, converted to one) against the host.
pub fn resolve_net(config: &NetConfig, host: &[HostInterface]) -> Result<NetSpec, NetError> {
    check_lnd(config.net)?;
    let net_cpts = config.cpts.as_ref().map(cpt_values).transpose()?;
    let mut nis = Vec::new();
    for local in &config.nis {
        resolve_local_ni(config.net, local, net_cpts.as_deref(), host, &mut nis)?;
    }
    if nis.is_empty() {
        return Err(NetError::MissingInterface(config.net));
    }
    for (index, ni) in nis.iter().enumerate() {
        if nis.iter().skip(index + 1).any(|other| other.nid == ni.nid) {
            return Err(NetError::DuplicateNid(ni.nid));
        }
    }
    Ok(NetSpec {
        net: config.net,
        nis,
        tunables: net_tunables(config.net.lnd, &config.tunables),
        socklnd: socklnd_tunables(&config.lnd_tunables),
    })
}

/// A net spec whose NIs take the default interface (`networks=tcp`, an ip2nets rule without
/// interfaces): the first UP interface with an IPv4 address other than `lo`.
/// lustre: liblnetconfig.c `lustre_lnet_match_ip_to_intf()`, docs/protocol/cli.md §1.1.
pub fn default_interface(net: Net, host: &[HostInterface]) -> Result<String, NetError> {
    host.iter()
        .find(|i| i.up && i.name != "lo" && i.addresses.iter().any(IpAddr::is_ipv4))
        .map(|i| i.name.clone())
        .ok_or(NetError::NoDefaultInterface(net))
}

/// Resolves an `--ip2net` rule string (kernel `ip2nets=` syntax) to net items.
/// lustre: api-ni.c `lnet_handle_legacy_ip2nets()`, config.c `lnet_parse_ip2nets()`.
pub fn resolve_ip2net(text: &str, host: &[HostInterface]) -> Result<Vec<NetConfig>, NetError> {
    let rules = parse_ip2nets(text).map_err(|error| NetError::BadIp2net(error.to_string()))?;
    resolve_ip2net_rules(&rules, host)
}

/// The nets of the kernel's `ip2nets=` rules that match this host's IPv4 addresses.
pub fn resolve_ip2net_rules(
    rules: &[Ip2netsRule],
    host: &[HostInterface],
) -> Result<Vec<NetConfig>, NetError> {
    let local: Vec<std::net::Ipv4Addr> = host
        .iter()
        .filter(|interface| interface.up)
        .flat_map(|interface| interface.addresses.iter())
        .filter_map(|address| match address {
            IpAddr::V4(ip) => Some(*ip),
            IpAddr::V6(_) => None,
        })
        .collect();
    let specs =
        resolve_ip2nets(rules, &local).map_err(|error| NetError::BadIp2net(error.to_string()))?;
    if specs.is_empty() {
        return Err(NetError::NoIp2netsMatch);
    }
    net_configs(specs, host)
}

/// Nets in the kernel's `networks=` form as net items: an NI without an interface takes
/// the default one ([`default_interface`]), a net without NIs one NI on it.
/// lustre: config.c `lnet_parse_networks()`, socklnd.c `ksocknal_startup()`.
pub fn net_configs(
    specs: Vec<grammar::NetSpec>,
    host: &[HostInterface],
) -> Result<Vec<NetConfig>, NetError> {
    let mut nets = Vec::new();
    for spec in specs {
        let mut nis = Vec::new();
        for ni in spec.nis {
            let name = match ni.interface {
                Some(name) => name,
                None => default_interface(spec.net, host)?,
            };
            let interface = model::InterfaceConfig { name, cpts: ni.cpts };
            nis.push(LocalNiConfig { nid: None, interfaces: vec![interface], cpts: None });
        }
        if nis.is_empty() {
            let name = default_interface(spec.net, host)?;
            let interface = model::InterfaceConfig { name, cpts: None };
            nis.push(LocalNiConfig { nid: None, interfaces: vec![interface], cpts: None });
        }
        nets.push(NetConfig {
            net: spec.net,
            nis,
            tunables: Tunables::default(),
            lnd_tunables: LndTunables::default(),
            cpts: None,
        });
    }
    Ok(nets)
}

/// `item` with ksocklnd's module parameters in the tunables it leaves unset, as the
/// kernel's socklnd fills a net's -1s from them. Other LNDs' items are returned as they
/// are. lustre: socklnd_modparams.c `ksocknal_tunables_setup()`.
pub fn with_lnd_defaults(item: &NetConfig, socklnd: &SocklndModule) -> NetConfig {
    let mut item = item.clone();
    if item.net.lnd == LndType::SOCK {
        let (tunables, defaults) = (&mut item.tunables, &socklnd.net);
        tunables.credits = tunables.credits.or(defaults.credits);
        tunables.peer_credits = tunables.peer_credits.or(defaults.peer_credits);
        tunables.peer_buffer_credits =
            tunables.peer_buffer_credits.or(defaults.peer_buffer_credits);
        tunables.peer_timeout = tunables.peer_timeout.or(defaults.peer_timeout);
        let lnd = &mut item.lnd_tunables;
        lnd.conns_per_peer = lnd.conns_per_peer.or(socklnd.conns_per_peer);
        lnd.tos = lnd.tos.or(socklnd.tos);
    }
    item
}

/// The net's common tunables: configured values where LNet keeps them, the LND's defaults
/// otherwise. lustre: api-ni.c `lnet_genl_parse_tunables()`, `lnet_set_tune_defaults()`.
pub fn net_tunables(lnd: LndType, tunables: &Tunables) -> NetTunables {
    let shown = model::export::effective_tunables(lnd, tunables);
    // effective_tunables keeps only non-negative values.
    let unsigned = |value: i32| u32::try_from(value).unwrap_or(0);
    let credits = unsigned(shown.credits);
    NetTunables {
        credits,
        // lustre: socklnd_modparams.c ksocknal_tunables_setup(): at most the NI's credits.
        peer_credits: unsigned(shown.peer_credits).min(credits),
        peer_buffer_credits: unsigned(shown.peer_buffer_credits),
        peer_timeout: unsigned(shown.peer_timeout),
    }
}

fn socklnd_tunables(tunables: &LndTunables) -> SocklndTunables {
    // The importer and the CLI check the ranges (0..=127, -1..=255).
    let conns_per_peer =
        tunables.conns_per_peer.and_then(|value| u8::try_from(value).ok()).unwrap_or(0);
    let tos = tunables.tos.and_then(|v| i16::try_from(v).ok()).unwrap_or(DEFAULT_TOS);
    SocklndTunables { conns_per_peer, tos }
}

fn check_lnd(net: Net) -> Result<(), NetError> {
    if net.lnd == LndType::LO {
        return Err(NetError::LoopbackNet);
    }
    if net.lnd != LndType::SOCK {
        return Err(NetError::UnsupportedLnd(net));
    }
    Ok(())
}

fn resolve_local_ni(
    net: Net,
    local: &LocalNiConfig,
    net_cpts: Option<&[u32]>,
    host: &[HostInterface],
    nis: &mut Vec<NiSpec>,
) -> Result<(), NetError> {
    let interface_cpts = |interface: &model::InterfaceConfig| -> Result<Option<Vec<u32>>, _> {
        match &interface.cpts {
            Some(list) => cpt_values(list).map(Some),
            None => Ok(net_cpts.map(<[u32]>::to_vec)),
        }
    };
    if let Some(nid) = local.nid {
        if nid.net() != net {
            return Err(NetError::NidNotOnNet { nid, net });
        }
        let address = nid.ip().ok_or(NetError::NidWithoutAddress(nid))?;
        let (interface, cpts) = match local.interfaces.as_slice() {
            [] => {
                let cpts = match &local.cpts {
                    Some(list) => Some(cpt_values(list)?),
                    None => net_cpts.map(<[u32]>::to_vec),
                };
                (interface_of(host, address), cpts)
            }
            [named] => (Some(named.name.clone()), interface_cpts(named)?),
            more => return Err(NetError::NidWithInterfaces { nid, count: more.len() }),
        };
        nis.push(NiSpec { cpts, ..NiSpec::new(nid, interface) });
        return Ok(());
    }
    for named in &local.interfaces {
        if !host.iter().any(|interface| interface.name == named.name) {
            return Err(NetError::NoSuchInterface(named.name.clone()));
        }
        let address = interface_address(host, &named.name)
            .ok_or_else(|| NetError::InterfaceWithoutIpv4(named.name.clone()))?;
        let nid = match address {
            IpAddr::V4(ip) => Nid::ipv4(net, ip),
            IpAddr::V6(ip) => Nid::ipv6(net, ip),
        };
        let cpts = interface_cpts(named)?;
        nis.push(NiSpec { cpts, ..NiSpec::new(nid, Some(named.name.clone())) });
    }
    Ok(())
}

/// A CPT expression's values in the order written, duplicates kept, as the kernel's
/// `cfs_expr_list_values()` gives them; checked against the node by [`bind_cpts`].
fn cpt_values(list: &ExprList) -> Result<Vec<u32>, NetError> {
    // Bounded: more values than a node can have partitions is refused before expanding.
    if list.value_count() > u64::from(MAX_CPTS) {
        return Err(NetError::BadCpt(list.to_string()));
    }
    Ok(list.values().collect())
}

/// Checks every NI's CPTs against the node's `partitions` and stores them as the kernel does
/// (`None` when they name as many CPTs as the node has). A CPT at or past the count is
/// refused with -ERANGE ("invalid CPT value"). An NI configured without CPTs is bound to the
/// partitions local to its device's NUMA node, all of them when that is unknown or covers
/// them all. lustre: config.c `lnet_ni_alloc()`, `lnet_ni_set_default_cpts()`.
pub fn bind_cpts(
    nets: &mut [NetSpec],
    partitions: Partitions,
    numa: &DeviceNuma,
) -> Result<(), NetError> {
    for ni in nets.iter_mut().flat_map(|net| net.nis.iter_mut()) {
        ni.dev_cpt = ni.interface.as_deref().and_then(|interface| numa.dev_cpt(interface));
        if ni.cpts.is_none() {
            ni.cpts = numa.default_cpts(ni.dev_cpt);
            ni.cpts_join = CptsJoin::Default;
        }
        ni.cpts = partitions.check_ni_cpts(ni.cpts.as_deref()).map_err(|error| match error {
            CptError::OutOfRange { cpt, count } => NetError::CptOutOfRange { cpt, count },
            other => NetError::BadCpt(other.to_string()),
        })?;
    }
    Ok(())
}

/// The engine's form of an NI's (bound) CPT list.
pub fn cpt_list(cpts: Option<&[u32]>) -> CptList {
    cpts.and_then(|cpts| CptList::new(cpts).ok()).unwrap_or(CptList::ALL)
}

/// Parses a `--cpt` expression from a `net add` request.
pub fn parse_cpt_text(text: &str) -> Result<ExprList, NetError> {
    ulnet_config::grammar::parse_cpt_option(text).map_err(|_| NetError::BadCpt(text.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interfaces::up_interface;
    use ulnet_config::model::InterfaceConfig;

    fn host() -> Vec<HostInterface> {
        vec![
            up_interface("lo", &["127.0.0.1"]),
            up_interface("eth0", &["192.168.1.2"]),
            up_interface("ib0", &["fe80::2"]),
        ]
    }

    fn tcp_net(nis: Vec<LocalNiConfig>) -> NetConfig {
        NetConfig {
            net: Net::TCP,
            nis,
            tunables: Tunables::default(),
            lnd_tunables: LndTunables::default(),
            cpts: None,
        }
    }

    fn by_nid(text: &str) -> LocalNiConfig {
        LocalNiConfig { nid: Some(text.parse().unwrap()), interfaces: vec![], cpts: None }
    }

    fn by_interface(name: &str) -> LocalNiConfig {
        LocalNiConfig {
            nid: None,
            interfaces: vec![InterfaceConfig { name: name.into(), cpts: None }],
            cpts: None,
        }
    }

    #[test]
    fn a_nid_comes_up_on_exactly_its_address() {
        let spec = resolve_net(&tcp_net(vec![by_nid("127.0.0.2@tcp")]), &host()).unwrap();
        assert_eq!(
            spec.nis,
            vec![NiSpec::new("127.0.0.2@tcp".parse().unwrap(), Some("lo".into()))]
        );
        assert_eq!(spec.tunables, NetTunables::SOCKLND);
        assert_eq!(spec.socklnd, SocklndTunables { conns_per_peer: 0, tos: -1 });
        assert_eq!(spec.socklnd.shown_conns_per_peer(None), 1);
        assert_eq!(spec.socklnd.shown_conns_per_peer(Some(25_000)), 3, "auto follows the speed");
    }

    /// A NID-named NI's own CPT list binds it; another NI of the net keeps the net's.
    #[test]
    fn a_nid_named_nis_cpts_bind_that_ni() {
        let mut bound = by_nid("127.0.0.2@tcp");
        bound.cpts = ulnet_config::grammar::parse_cpts("[1]").ok();
        let mut net = tcp_net(vec![bound, by_nid("127.0.0.3@tcp")]);
        net.cpts = ulnet_config::grammar::parse_cpts("[0]").ok();
        let spec = resolve_net(&net, &host()).unwrap();
        let cpts: Vec<_> = spec.nis.iter().map(|ni| ni.cpts.clone()).collect();
        assert_eq!(cpts, [Some(vec![1]), Some(vec![0])]);
    }

    #[test]
    fn an_interface_gives_its_address() {
        let spec = resolve_net(&tcp_net(vec![by_interface("eth0")]), &host()).unwrap();
        assert_eq!(spec.nis[0].nid, "192.168.1.2@tcp".parse().unwrap());
        assert_eq!(spec.nis[0].interface.as_deref(), Some("eth0"));
    }

    #[test]
    fn a_nid_with_one_interface_shows_that_interface() {
        let mut ni = by_nid("127.0.0.9@tcp");
        ni.interfaces.push(InterfaceConfig { name: "eth0".into(), cpts: None });
        let spec = resolve_net(&tcp_net(vec![ni.clone()]), &host()).unwrap();
        assert_eq!(spec.nis[0].interface.as_deref(), Some("eth0"));
        ni.interfaces.push(InterfaceConfig { name: "lo".into(), cpts: None });
        assert_eq!(
            resolve_net(&tcp_net(vec![ni]), &host()),
            Err(NetError::NidWithInterfaces { nid: "127.0.0.9@tcp".parse().unwrap(), count: 2 })
        );
    }

    #[test]
    fn configured_tunables_are_kept_and_bad_ones_take_defaults() {
        let mut net = tcp_net(vec![by_nid("127.0.0.2@tcp")]);
        net.tunables = Tunables {
            peer_credits: Some(16),
            credits: Some(0),
            peer_timeout: Some(-1),
            ..Tunables::default()
        };
        net.lnd_tunables.conns_per_peer = Some(4);
        net.lnd_tunables.tos = Some(32);
        let spec = resolve_net(&net, &host()).unwrap();
        assert_eq!(spec.tunables.peer_credits, 16);
        assert_eq!(spec.tunables.credits, 256);
        assert_eq!(spec.tunables.peer_timeout, 180);
        assert_eq!(spec.socklnd, SocklndTunables { conns_per_peer: 4, tos: 32 });
    }

    #[test]
    fn bad_nets_are_refused_by_kind() {
        let h = host();
        let mut lo = tcp_net(vec![by_nid("127.0.0.2@tcp")]);
        lo.net = Net::LO;
        assert_eq!(resolve_net(&lo, &h), Err(NetError::LoopbackNet));
        let mut o2ib = tcp_net(vec![]);
        o2ib.net = "o2ib".parse().unwrap();
        assert_eq!(resolve_net(&o2ib, &h), Err(NetError::UnsupportedLnd(o2ib.net)));
        assert_eq!(resolve_net(&tcp_net(vec![]), &h), Err(NetError::MissingInterface(Net::TCP)));
        assert_eq!(
            resolve_net(&tcp_net(vec![by_nid("127.0.0.2@tcp1")]), &h),
            Err(NetError::NidNotOnNet { nid: "127.0.0.2@tcp1".parse().unwrap(), net: Net::TCP })
        );
        assert_eq!(
            resolve_net(&tcp_net(vec![by_interface("eth9")]), &h),
            Err(NetError::NoSuchInterface("eth9".into()))
        );
        assert_eq!(
            resolve_net(&tcp_net(vec![by_interface("ib0")]), &h),
            Err(NetError::InterfaceWithoutIpv4("ib0".into()))
        );
        let twice = tcp_net(vec![by_nid("127.0.0.2@tcp"), by_nid("127.0.0.2@tcp")]);
        assert_eq!(
            resolve_net(&twice, &h),
            Err(NetError::DuplicateNid("127.0.0.2@tcp".parse().unwrap()))
        );
        let mut cpts = tcp_net(vec![by_nid("127.0.0.2@tcp")]);
        cpts.cpts = Some(parse_cpt_text("[0,1]").unwrap());
        let mut specs = vec![resolve_net(&cpts, &h).unwrap()];
        assert_eq!(specs[0].nis[0].cpts, Some(vec![0, 1]));
        assert_eq!(
            bind_cpts(&mut specs.clone(), Partitions::default(), &DeviceNuma::default()),
            Err(NetError::CptOutOfRange { cpt: 1, count: 1 })
        );
        // Naming every CPT is stored as unbound; a subset is kept as written.
        bind_cpts(&mut specs, Partitions::new(2).unwrap(), &DeviceNuma::default()).unwrap();
        assert_eq!(specs[0].nis[0].cpts, None);
        let mut specs = vec![resolve_net(&cpts, &h).unwrap()];
        bind_cpts(&mut specs, Partitions::new(3).unwrap(), &DeviceNuma::default()).unwrap();
        assert_eq!(specs[0].nis[0].cpts, Some(vec![0, 1]));
        assert_eq!(cpt_list(Some(&[0, 1])).values(), [0, 1]);
        assert!(cpt_list(None).is_all());
        assert_eq!(parse_cpt_text("[x"), Err(NetError::BadCpt("[x".into())));
    }

    #[test]
    fn the_default_interface_is_the_first_up_ipv4_one_but_lo() {
        assert_eq!(default_interface(Net::TCP, &host()), Ok("eth0".to_string()));
        let only_lo = &host()[..1];
        assert_eq!(
            default_interface(Net::TCP, only_lo),
            Err(NetError::NoDefaultInterface(Net::TCP))
        );
    }

    #[test]
    fn errors_carry_the_kernel_answers() {
        let control = NetError::DuplicateNid(Nid::LO_0).to_control();
        assert_eq!(control.errno(), -17);
        assert_eq!(control.descr(), "cannot add LNet NI");
        assert_eq!(NetError::LoopbackNet.to_control().descr(), "setting @lo not allowed");
        assert_eq!(NetError::CptOutOfRange { cpt: 3, count: 1 }.to_control().errno(), -34);
    }

    #[test]
    fn ip2net_rules_resolve_against_the_host() {
        let nets = resolve_ip2net("tcp(eth0) 192.168.1.*", &host()).unwrap();
        assert_eq!(nets.len(), 1);
        let spec = resolve_net(&nets[0], &host()).unwrap();
        assert_eq!(spec.nis[0].nid, "192.168.1.2@tcp".parse().unwrap());
        assert_eq!(resolve_ip2net("tcp 10.0.0.*", &host()), Err(NetError::NoIp2netsMatch));
        assert!(matches!(resolve_ip2net("tcp(eth0 1.2.3.4", &host()), Err(NetError::BadIp2net(_))));
    }
}
