//! Every module parameter of lnet, libcfs, ksocklnd and lnet_selftest, one row each: the
//! kernel's name, how the kernel reads its value, its default, and what it becomes in
//! ulnet. Changing what ulnet does with a parameter is changing its row's target; the
//! routing parameters fill the configuration model's `route`, `routing` and `buffers`
//! blocks, and the router tunables no YAML key carries fill a `router` block of their own,
//! so honouring them is a matter for whoever reads those blocks.
//!
//! lustre: lnet/lnet/api-ni.c, router.c, acceptor.c, module.c, lib-move.c, lib-ptl.c (the
//! `module_param()`s and their setters); lnet/libcfs/module.c, debug.c;
//! lnet/klnds/socklnd/socklnd_modparams.c; lnet/selftest/framework.c, brw_test.c,
//! ping_test.c.

use crate::model::GlobalKey;

/// The LNet modules whose parameters ulnet reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Module {
    Lnet,
    Libcfs,
    Ksocklnd,
    LnetSelftest,
}

impl Module {
    pub(super) fn from_name(name: &str) -> Option<Self> {
        match name {
            "lnet" => Some(Self::Lnet),
            "libcfs" => Some(Self::Libcfs),
            "ksocklnd" => Some(Self::Ksocklnd),
            "lnet_selftest" => Some(Self::LnetSelftest),
            _ => None,
        }
    }
}

/// How the kernel reads a value, and what it says when it cannot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// `int` (`kstrtoint`): "`V' invalid for parameter `NAME'".
    Int,
    /// `uint` (`kstrtouint`).
    Uint,
    /// A setter reading `kstrtoul`; the text it logs when that fails.
    Ulong(&'static str),
    /// A setter reading `kstrtoint`; the text it logs when that fails.
    Long(&'static str),
    /// `charp`: a string of at most 1024 bytes.
    Text,
    /// A setter that does not read the value at all.
    Any,
}

/// What a parameter becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Target {
    /// A global setting, through the kernel's setter checks (`lnetctl set` / `global:`).
    Global(GlobalKey),
    /// `lnet_peer_discovery_disabled`: discovery, inverted.
    DiscoveryDisabled,
    /// The acceptor: `accept`, `accept_port`, `accept_port_bulk`.
    Accept,
    AcceptPort,
    AcceptPortBulk,
    /// `enable_sysctl_setup`: what `lnetctl setup-sysctl` does.
    EnableSysctlSetup,
    /// `networks=` and `ip2nets=`, in the kernel's syntax and meaning.
    Networks,
    Ip2nets,
    /// The routing model: `routes=` (route block), `forwarding=` (routing block), router
    /// buffers (buffers block), router tunables (router block, when not the default).
    Routes,
    Forwarding,
    Buffers(Pool),
    Router(RouterKey),
    /// socklnd settings for every connection (`ulnet_proto::socklnd::tunables`).
    Socklnd(SocklndKey),
    /// The defaults of a tcp net's tunables and LND tunables.
    NetDefault(NetKey),
    /// `portal_rotor`: how wildcard portals spread incoming messages over the partitions'
    /// match tables (lib-ptl.c), one of the kernel's four modes.
    PortalRotor,
    /// libcfs's partition table: the pattern (checked against the host's CPUs when the daemon
    /// starts) and the partition count.
    CpuPattern,
    CpuNpartitions,
    /// Read and checked; the kernel's behaviour is ulnet's whatever the value: why.
    NoEffect(&'static str),
    /// Only these values (the default first) are accepted; why others cannot be honoured.
    Only(&'static [&'static str], &'static str),
    /// No value can be honoured: why.
    Refused(&'static str),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Pool {
    Tiny,
    Small,
    Large,
}

/// Router tunables: lnetctl has no YAML key for them (it sets them through sysfs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum RouterKey {
    PeerBufferCredits,
    AutoDown,
    CheckRoutersBeforeUse,
    AvoidAsymRouterFailure,
    AliveRouterCheckInterval,
    RouterPingTimeout,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum SocklndKey {
    SockTimeout,
    MinReconnectMs,
    MaxReconnectMs,
    TypedConns,
    MinBulk,
    TxBufferSize,
    RxBufferSize,
    Nagle,
    RoundRobin,
    Keepalive,
    KeepaliveIdle,
    KeepaliveCount,
    KeepaliveInterval,
    ZcMinPayload,
    AcceptBacklog,
    AcceptTimeout,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum NetKey {
    Credits,
    PeerCredits,
    PeerBufferCredits,
    PeerTimeout,
    ConnsPerPeer,
    Tos,
}

/// One module parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Param {
    pub module: Module,
    pub name: &'static str,
    pub kind: Kind,
    /// The kernel's default, as text (documentation and the `Only` lists).
    pub default: &'static str,
    pub target: Target,
}

const fn row(
    module: Module,
    name: &'static str,
    kind: Kind,
    default: &'static str,
    target: Target,
) -> Param {
    Param { module, name, kind, default, target }
}

use Kind::{Any, Int, Text, Uint, Ulong};
use Module::{Ksocklnd, Libcfs, Lnet, LnetSelftest};
use Target::{Global, NetDefault, NoEffect, Only, Refused, Router, Socklnd};

const DEBUG_LOG: &str = "libcfs's kernel debug log has no ulnet counterpart: ulnetd logs \
                         with tracing, filtered by ULNET_LOG";
/// The kernel's warning for the two deprecated intervals, which it then ignores.
const DEPRECATED_INTERVALS: &str = "live_router_check_interval and dead_router_check_interval \
                                    have been deprecated. Use alive_router_check_interval \
                                    instead. Ignoring these deprecated parameters (ulnetd \
                                    refuses what it would ignore)";
const SELFTEST: &str = "the selftest service's parameters are not configurable in ulnetd yet";

/// The parameters, by module. lnet's and libcfs's `cpu_npartitions`/`cpu_pattern` are the
/// same variables (libcfs keeps them for compatibility).
pub(super) const PARAMS: &[Param] = &[
    // lnet: networks and the deprecated text forms (api-ni.c).
    row(Lnet, "networks", Text, "", Target::Networks),
    row(Lnet, "ip2nets", Text, "", Target::Ip2nets),
    row(Lnet, "routes", Text, "", Target::Routes),
    row(
        Lnet,
        "rnet_htable_size",
        Int,
        "128",
        NoEffect("the size of the remote-net hash changes no behaviour"),
    ),
    row(
        Lnet,
        "use_tcp_bonding",
        Int,
        "0",
        Only(
            &["0"],
            "use_tcp_bonding has been removed. Use Multi-Rail and Dynamic Discovery instead",
        ),
    ),
    // lnet: global settings (api-ni.c setters).
    row(Lnet, "lnet_numa_range", Uint, "0", Global(GlobalKey::NumaRange)),
    row(
        Lnet,
        "lnet_health_sensitivity",
        Ulong("Invalid module parameter value for 'lnet_health_sensitivity'"),
        "100",
        Global(GlobalKey::HealthSensitivity),
    ),
    // Deprecated: the setter only warns, as `global: recovery_interval` is only kept.
    row(Lnet, "lnet_recovery_interval", Any, "1", Global(GlobalKey::RecoveryInterval)),
    row(Lnet, "lnet_recovery_limit", Uint, "0", Global(GlobalKey::RecoveryLimit)),
    row(
        Lnet,
        "lnet_max_recovery_ping_interval",
        Ulong("Invalid module parameter value for 'lnet_max_recovery_ping_interval'"),
        "900",
        Global(GlobalKey::MaxRecoveryPingInterval),
    ),
    row(
        Lnet,
        "lnet_interfaces_max",
        Kind::Long("Invalid module parameter value for 'lnet_interfaces_max'"),
        "4096",
        Global(GlobalKey::MaxInterfaces),
    ),
    row(
        Lnet,
        "lnet_peer_discovery_disabled",
        Ulong("Invalid module parameter value for 'lnet_peer_discovery_disabled'"),
        "0",
        Target::DiscoveryDisabled,
    ),
    row(
        Lnet,
        "lnet_drop_asym_route",
        Ulong("Invalid module parameter value for 'lnet_drop_asym_route'"),
        "0",
        Global(GlobalKey::DropAsymRoute),
    ),
    row(
        Lnet,
        "lnet_transaction_timeout",
        Ulong("Invalid module parameter value for 'lnet_transaction_timeout'"),
        "150",
        Global(GlobalKey::TransactionTimeout),
    ),
    row(
        Lnet,
        "lnet_retry_count",
        Ulong("Invalid module parameter value for 'lnet_retry_count'"),
        "2",
        Global(GlobalKey::RetryCount),
    ),
    row(
        Lnet,
        "lnet_response_tracking",
        Ulong("Invalid value for 'lnet_response_tracking'"),
        "3",
        Global(GlobalKey::ResponseTracking),
    ),
    row(
        Lnet,
        "router_sensitivity_percentage",
        Ulong("Invalid module parameter value for 'router_sensitivity_percentage'"),
        "100",
        Global(GlobalKey::RouterSensitivity),
    ),
    row(
        Lnet,
        "lock_prim_nid",
        Int,
        "1",
        Only(&["1"], "ulnet has no LNetPrimaryNID() whose primary NIDs it would stop locking"),
    ),
    // lnet: lib-move.c, lib-ptl.c, module.c.
    row(
        Lnet,
        "local_nid_dist_zero",
        Int,
        "1",
        Only(&["1"], "ulnet has no LNetDist() whose answer for local NIDs it would change"),
    ),
    row(Lnet, "portal_rotor", Int, "3", Target::PortalRotor),
    row(
        Lnet,
        "config_on_load",
        Int,
        "0",
        NoEffect("ulnetd configures LNet when it starts, whatever the value"),
    ),
    row(Lnet, "enable_sysctl_setup", Int, "0", Target::EnableSysctlSetup),
    row(Lnet, "cpu_npartitions", Int, "0", Target::CpuNpartitions),
    row(Lnet, "cpu_pattern", Text, "N", Target::CpuPattern),
    // lnet: routing and router buffers (router.c).
    row(Lnet, "forwarding", Text, "", Target::Forwarding),
    row(Lnet, "tiny_router_buffers", Int, "0", Target::Buffers(Pool::Tiny)),
    row(Lnet, "small_router_buffers", Int, "0", Target::Buffers(Pool::Small)),
    row(Lnet, "large_router_buffers", Int, "0", Target::Buffers(Pool::Large)),
    row(Lnet, "peer_buffer_credits", Int, "0", Router(RouterKey::PeerBufferCredits)),
    row(Lnet, "auto_down", Int, "1", Router(RouterKey::AutoDown)),
    row(Lnet, "check_routers_before_use", Int, "0", Router(RouterKey::CheckRoutersBeforeUse)),
    row(Lnet, "avoid_asym_router_failure", Int, "1", Router(RouterKey::AvoidAsymRouterFailure)),
    row(Lnet, "dead_router_check_interval", Int, "-2147483648", Refused(DEPRECATED_INTERVALS)),
    row(Lnet, "live_router_check_interval", Int, "-2147483648", Refused(DEPRECATED_INTERVALS)),
    row(
        Lnet,
        "alive_router_check_interval",
        Int,
        "60",
        Router(RouterKey::AliveRouterCheckInterval),
    ),
    row(Lnet, "router_ping_timeout", Int, "50", Router(RouterKey::RouterPingTimeout)),
    // lnet: the acceptor (acceptor.c).
    row(Lnet, "accept", Text, "secure", Target::Accept),
    row(Lnet, "accept_port", Int, "988", Target::AcceptPort),
    row(Lnet, "accept_port_bulk", Int, "988", Target::AcceptPortBulk),
    row(Lnet, "accept_backlog", Int, "127", Socklnd(SocklndKey::AcceptBacklog)),
    row(Lnet, "accept_timeout", Int, "5", Socklnd(SocklndKey::AcceptTimeout)),
    // libcfs (module.c, debug.c).
    row(Libcfs, "cpu_npartitions", Int, "0", Target::CpuNpartitions),
    row(Libcfs, "cpu_pattern", Text, "N", Target::CpuPattern),
    row(Libcfs, "libcfs_debug", Any, "", Refused(DEBUG_LOG)),
    row(Libcfs, "libcfs_subsystem_debug", Any, "", Refused(DEBUG_LOG)),
    row(Libcfs, "libcfs_debug_mb", Any, "", Refused(DEBUG_LOG)),
    row(Libcfs, "libcfs_subsystem_printk", Any, "", Refused(DEBUG_LOG)),
    row(Libcfs, "libcfs_printk", Any, "", Refused(DEBUG_LOG)),
    row(Libcfs, "libcfs_console_ratelimit", Any, "", Refused(DEBUG_LOG)),
    row(Libcfs, "libcfs_console_max_delay", Any, "", Refused(DEBUG_LOG)),
    row(Libcfs, "libcfs_console_min_delay", Any, "", Refused(DEBUG_LOG)),
    row(Libcfs, "libcfs_console_backoff", Any, "", Refused(DEBUG_LOG)),
    row(Libcfs, "libcfs_panic_on_lbug", Any, "", Refused(DEBUG_LOG)),
    row(Libcfs, "libcfs_debug_file_path", Any, "", Refused(DEBUG_LOG)),
    row(Libcfs, "libcfs_debug_raw_pointers", Any, "", Refused(DEBUG_LOG)),
    // ksocklnd (socklnd_modparams.c).
    row(Ksocklnd, "sock_timeout", Int, "50", Socklnd(SocklndKey::SockTimeout)),
    row(Ksocklnd, "credits", Int, "256", NetDefault(NetKey::Credits)),
    row(Ksocklnd, "peer_credits", Int, "8", NetDefault(NetKey::PeerCredits)),
    row(Ksocklnd, "peer_buffer_credits", Int, "0", NetDefault(NetKey::PeerBufferCredits)),
    row(Ksocklnd, "peer_timeout", Int, "180", NetDefault(NetKey::PeerTimeout)),
    row(
        Ksocklnd,
        "nscheds",
        Int,
        "0",
        Only(&["0"], "ulnet's TCP LND runs on the partitions' I/O threads, not scheduler threads"),
    ),
    row(
        Ksocklnd,
        "nconnds",
        Int,
        "4",
        Only(&["4"], "ulnet's TCP LND connects on its I/O thread, not connection daemons"),
    ),
    row(
        Ksocklnd,
        "nconnds_max",
        Int,
        "64",
        Only(&["64"], "ulnet's TCP LND connects on its I/O thread, not connection daemons"),
    ),
    row(Ksocklnd, "min_reconnectms", Int, "1000", Socklnd(SocklndKey::MinReconnectMs)),
    row(Ksocklnd, "max_reconnectms", Int, "60000", Socklnd(SocklndKey::MaxReconnectMs)),
    row(
        Ksocklnd,
        "eager_ack",
        Int,
        "0",
        Only(&["0"], "eager TCP ACKs (TCP_QUICKACK) are not implemented"),
    ),
    row(Ksocklnd, "typed_conns", Int, "1", Socklnd(SocklndKey::TypedConns)),
    row(Ksocklnd, "min_bulk", Int, "1024", Socklnd(SocklndKey::MinBulk)),
    row(Ksocklnd, "tx_buffer_size", Int, "0", Socklnd(SocklndKey::TxBufferSize)),
    row(Ksocklnd, "rx_buffer_size", Int, "0", Socklnd(SocklndKey::RxBufferSize)),
    row(Ksocklnd, "nagle", Int, "0", Socklnd(SocklndKey::Nagle)),
    row(Ksocklnd, "round_robin", Int, "1", Socklnd(SocklndKey::RoundRobin)),
    row(Ksocklnd, "keepalive", Int, "30", Socklnd(SocklndKey::Keepalive)),
    row(Ksocklnd, "keepalive_idle", Int, "30", Socklnd(SocklndKey::KeepaliveIdle)),
    row(Ksocklnd, "keepalive_count", Int, "5", Socklnd(SocklndKey::KeepaliveCount)),
    row(Ksocklnd, "keepalive_intvl", Int, "5", Socklnd(SocklndKey::KeepaliveInterval)),
    row(
        Ksocklnd,
        "enable_csum",
        Int,
        "0",
        Only(&["0"], "sending message checksums is not implemented (received ones are checked)"),
    ),
    row(
        Ksocklnd,
        "inject_csum_error",
        Int,
        "0",
        Only(&["0"], "checksum error injection is not implemented"),
    ),
    row(
        Ksocklnd,
        "enable_irq_affinity",
        Int,
        "0",
        Only(&["0"], "irq_affinity is removed from socklnd"),
    ),
    row(
        Ksocklnd,
        "nonblk_zcack",
        Int,
        "1",
        Only(&["1"], "which connection carries ZC-ACKs is not configurable"),
    ),
    row(Ksocklnd, "zc_min_payload", Int, "16384", Socklnd(SocklndKey::ZcMinPayload)),
    row(
        Ksocklnd,
        "zc_recv",
        Int,
        "0",
        Only(&["0"], "zero-copy receive (Chelsio) is not implemented"),
    ),
    row(
        Ksocklnd,
        "zc_recv_min_nfrags",
        Int,
        "16",
        Only(&["16"], "zero-copy receive (Chelsio) is not implemented"),
    ),
    row(Ksocklnd, "conns_per_peer", Uint, "0", NetDefault(NetKey::ConnsPerPeer)),
    row(
        Ksocklnd,
        "skip_mr_route_setup",
        Uint,
        "0",
        NoEffect(
            "ulnetd installs no Linux routes for multi-rail (as net add --skip-mr-route-setup)",
        ),
    ),
    row(Ksocklnd, "tos", Int, "-1", NetDefault(NetKey::Tos)),
    // lnet_selftest (framework.c, brw_test.c, ping_test.c).
    row(LnetSelftest, "session_timeout", Int, "100", Only(&["100"], SELFTEST)),
    row(LnetSelftest, "rpc_timeout", Int, "64", Only(&["64"], SELFTEST)),
    row(LnetSelftest, "brw_srv_workitems", Int, "2048", Only(&["2048"], SELFTEST)),
    row(LnetSelftest, "ping_srv_workitems", Int, "2048", Only(&["2048"], SELFTEST)),
    row(LnetSelftest, "brw_inject_errors", Int, "0", Only(&["0"], SELFTEST)),
];

/// Parameters that exist only in kernels built with a debugging option, and which.
pub(super) const SPECIAL_BUILDS: &[(Module, &str, &str)] = &[
    (Ksocklnd, "backoff_init", "SOCKNAL_BACKOFF"),
    (Ksocklnd, "backoff_max", "SOCKNAL_BACKOFF"),
    (Ksocklnd, "protocol", "SOCKNAL_VERSION_DEBUG"),
];

/// The row for `name` (already `_`-normalised) of `module`.
pub(super) fn find(module: Module, name: &str) -> Option<&'static Param> {
    PARAMS.iter().find(|param| param.module == module && param.name == name)
}

/// A parameter of `module` spelt like `name`, for a "did you mean" hint: one edit away, or
/// the same words in another order or number (`check_router_before_use`).
pub(super) fn near(module: Module, name: &str) -> Option<&'static str> {
    let words = |text: &str| {
        let mut words: Vec<String> =
            text.split('_').map(|word| word.trim_end_matches('s').to_string()).collect();
        words.sort();
        words
    };
    PARAMS
        .iter()
        .filter(|param| param.module == module)
        .map(|param| param.name)
        .find(|candidate| edit_distance(candidate, name) <= 2 || words(candidate) == words(name))
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1];
        for (cb, pair) in b.iter().zip(previous.windows(2)) {
            let &[diagonal, up] = pair else { continue };
            let left = current.last().copied().unwrap_or(0);
            current.push((diagonal + usize::from(ca != *cb)).min(up + 1).min(left + 1));
        }
        previous = current;
    }
    previous.last().copied().unwrap_or(0)
}
