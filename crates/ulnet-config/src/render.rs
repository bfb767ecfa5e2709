//! Renderers for lnetctl's output shapes (docs/protocol/cli.md §3) from plain structs the daemon fills.
//!
//! Key names and orders are those of the kernel key tables (netlink attribute index order) for
//! dialect N and of liblnetconfig's cYAML builders for dialect C. Every renderer returns the
//! exact bytes lnetctl writes to stdout, or an empty string where lnetctl prints nothing.
//!
//! lustre: lnet/lnet/api-ni.c key tables (`net_props_list`, `local_ni_list`,
//! `lnet_peer_ni_list`, `route_props_list`, `ping_props_list`, ...) and dump handlers;
//! lnet/klnds/socklnd/socklnd.c `ksocknal_nl_get()`; lnet/utils/lnetctl.c
//! `yaml_lnet_peer_display()`, `yaml_lnet_ping_display()`, `jt_export()`;
//! lnet/utils/lnetconfig/liblnetconfig.c `lustre_lnet_show_routing()`,
//! `lustre_lnet_show_stats()`, `build_global_yaml_entry()`.

use ulnet_proto::addr::{Net, Nid};
/// The counter shapes are the engine's (declared once in `ulnet_proto::engine::stats`).
pub use ulnet_proto::engine::stats::{
    Counter, Latency, LocalNiHealth, MessageCounts, PeerNiHealth, Statistics, StatsShow,
};

use crate::emit::{LibyamlStyle, Scalar, ScalarStyle, Yaml};

mod error;

pub use error::{CyamlError, CyamlErrorEntry, ErrorOp, NetlinkError, exit_status, strerror};

/// What a dump is for: an interactive `show` at a verbosity level, or one of the exports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShowMode {
    /// `show -v L`: the level is the netlink request version.
    Show(u32),
    /// `export`: nets at level 2, peers at level 3, verbose routes.
    Export,
    /// `export --backup`: only what reconfiguration needs (`NLM_F_DUMP_FILTERED`).
    Backup,
}

impl ShowMode {
    fn level(self, export_level: u32) -> u32 {
        match self {
            Self::Show(level) => level,
            Self::Export => export_level,
            Self::Backup => export_level.min(1),
        }
    }

    fn backup(self) -> bool {
        self == Self::Backup
    }
}

// ---------------------------------------------------------------------------------------------
// net show

/// One net of `net show`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetEntry {
    pub net: Net,
    pub nis: Vec<LocalNiEntry>,
}

/// A local NI as `net show` reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalNiEntry {
    pub nid: Nid,
    pub up: bool,
    /// `None` for `0@lo` and NIs without an interface.
    pub interface: Option<String>,
    pub statistics: Statistics,
    pub udsp: UdspInfo,
    pub sent: MessageCounts,
    pub received: MessageCounts,
    pub dropped: MessageCounts,
    pub health: LocalNiHealth,
    pub tunables: NetTunables,
    /// `None` for `lo`, which has no LND key table.
    pub lnd_tunables: Option<LndTunablesShow>,
    pub dev_cpt: i32,
    /// The NI's CPTs, or all CPTs when unbound.
    pub cpts: Vec<u32>,
}

/// The net's `tunables:`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NetTunables {
    pub peer_timeout: i32,
    pub peer_credits: i32,
    pub peer_buffer_credits: i32,
    pub credits: i32,
}

/// `lnd tunables:` as each LND's `lnd_nl_get()` reports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LndTunablesShow {
    /// lustre: socklnd.c `ksocknal_tunables_keys`.
    Socklnd { conns_per_peer: u16, timeout: u32, tos: i16 },
    /// lustre: o2iblnd.c `kiblnd_tunables_keys`.
    O2iblnd {
        peercredits_hiw: u32,
        map_on_demand: bool,
        concurrent_sends: u32,
        fmr_pool_size: u32,
        fmr_flush_trigger: u32,
        fmr_cache: u32,
        ntx: u16,
        conns_per_peer: u16,
        timeout: u32,
        tos: i16,
    },
}

/// `udsp info:` of a local or peer NI (levels 4 and up).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UdspInfo {
    pub net_priority: i32,
    pub nid_priority: i32,
    pub preferred_gateways: Vec<Nid>,
    pub preferred_sources: Vec<Nid>,
}

/// `net show [-v L]`, or the `net:` part of an export. Empty when there are no nets.
pub fn net_show(nets: &[NetEntry], mode: ShowMode) -> String {
    let level = mode.level(2);
    let nets: Vec<Yaml> = nets
        .iter()
        .filter(|net| !(mode.backup() && net.net == Net::LO))
        .map(|net| {
            let nis = net.nis.iter().map(|ni| local_ni(net.net, ni, level, mode.backup()));
            Yaml::map([
                ("net type", Yaml::plain(net.net.to_string())),
                ("local NI(s)", Yaml::seq(nis)),
            ])
        })
        .collect();
    section_n("net", nets)
}

fn local_ni(net: Net, ni: &LocalNiEntry, level: u32, backup: bool) -> Yaml {
    let mut entries: Vec<(&str, Yaml)> = Vec::new();
    // ulnet keeps the NID in a backup (lnetctl leaves it out): ulnetd brings an NI up on
    // exactly this address, where the kernel takes the interface's first one, so without it
    // an import could not reproduce the node. lnetctl's importer ignores the key.
    if !backup || ni.nid != Nid::ANY {
        entries.push(("nid", Yaml::plain(ni.nid.to_string())));
    }
    if !backup {
        let up = ni.up || ni.nid == Nid::LO_0;
        entries.push(("status", Yaml::plain(if up { "up" } else { "down" })));
    }
    if let Some(interface) = ni.interface.as_ref().filter(|_| ni.nid != Nid::LO_0) {
        entries.push(("interfaces", Yaml::map([("0", Yaml::plain(interface.as_str()))])));
    }
    if level >= 1 {
        if !backup {
            entries.push(("statistics", statistics(&ni.statistics)));
            if level >= 4 {
                entries.push(("udsp info", udsp_info(&ni.udsp)));
            }
            if level >= 2 {
                entries.extend(per_type_counts(&ni.sent, &ni.received, &ni.dropped));
                let h = &ni.health;
                entries.push((
                    "health stats",
                    Yaml::map([
                        ("fatal_error", Yaml::int(h.fatal_error)),
                        ("health value", Yaml::int(h.value)),
                        ("interrupts", Yaml::int(h.interrupts)),
                        ("dropped", Yaml::int(h.dropped)),
                        ("aborted", Yaml::int(h.aborted)),
                        ("no route", Yaml::int(h.no_route)),
                        ("timeouts", Yaml::int(h.timeouts)),
                        ("error", Yaml::int(h.error)),
                        ("ping_count", Yaml::int(h.ping_count)),
                        ("next_ping", Yaml::int(h.next_ping)),
                    ]),
                ));
            }
        }
        let t = &ni.tunables;
        entries.push((
            "tunables",
            Yaml::map([
                ("peer_timeout", Yaml::int(t.peer_timeout)),
                ("peer_credits", Yaml::int(t.peer_credits)),
                ("peer_buffer_credits", Yaml::int(t.peer_buffer_credits)),
                ("credits", Yaml::int(t.credits)),
            ]),
        ));
        if net != Net::LO {
            if let Some(lnd) = &ni.lnd_tunables {
                entries.push(("lnd tunables", lnd_tunables(lnd, backup)));
            }
        }
        if !backup {
            entries.push(("dev cpt", Yaml::int(ni.dev_cpt)));
        }
        entries.push(("CPT", Yaml::double_quoted(cpt_text(&ni.cpts))));
    }
    Yaml::map(entries)
}

/// The kernel's `"[0,1]"` CPT string (without the quotes the emitter adds).
fn cpt_text(cpts: &[u32]) -> String {
    let list: Vec<String> = cpts.iter().map(u32::to_string).collect();
    format!("[{}]", list.join(","))
}

fn lnd_tunables(lnd: &LndTunablesShow, backup: bool) -> Yaml {
    let mut entries: Vec<(&str, Yaml)> = Vec::new();
    match *lnd {
        LndTunablesShow::Socklnd { conns_per_peer, timeout, tos } => {
            entries.push(("conns_per_peer", Yaml::int(conns_per_peer)));
            if !backup {
                entries.push(("timeout", Yaml::int(timeout)));
            }
            entries.push(("tos", Yaml::int(tos)));
        }
        LndTunablesShow::O2iblnd {
            peercredits_hiw,
            map_on_demand,
            concurrent_sends,
            fmr_pool_size,
            fmr_flush_trigger,
            fmr_cache,
            ntx,
            conns_per_peer,
            timeout,
            tos,
        } => {
            entries.push(("peercredits_hiw", Yaml::int(peercredits_hiw)));
            entries.push(("map_on_demand", Yaml::bool(map_on_demand)));
            entries.push(("concurrent_sends", Yaml::int(concurrent_sends)));
            entries.push(("fmr_pool_size", Yaml::int(fmr_pool_size)));
            entries.push(("fmr_flush_trigger", Yaml::int(fmr_flush_trigger)));
            entries.push(("fmr_cache", Yaml::int(fmr_cache)));
            entries.push(("ntx", Yaml::int(ntx)));
            entries.push(("conns_per_peer", Yaml::int(conns_per_peer)));
            if !backup {
                entries.push(("timeout", Yaml::int(timeout)));
            }
            entries.push(("tos", Yaml::int(tos)));
        }
    }
    Yaml::map(entries)
}

fn statistics(s: &Statistics) -> Yaml {
    let mut entries = vec![
        ("send_count".to_string(), Yaml::int(s.send_count)),
        ("recv_count".to_string(), Yaml::int(s.recv_count)),
        ("drop_count".to_string(), Yaml::int(s.drop_count)),
    ];
    for (op, latency) in
        [("put_egress", s.put_egress), ("get_rtt", s.get_rtt), ("put_ack", s.put_ack)]
    {
        entries.push((format!("{op}_samples"), Yaml::int(latency.samples)));
        entries.push((format!("{op}_min_nsec"), Yaml::int(latency.min_nsec)));
        entries.push((format!("{op}_max_nsec"), Yaml::int(latency.max_nsec)));
        entries.push((format!("{op}_avg_nsec"), Yaml::int(latency.avg_nsec)));
    }
    Yaml::Map(entries)
}

/// The `sent_stats`, `received_stats` and `dropped_stats` blocks of a local or peer NI.
fn per_type_counts(
    sent: &MessageCounts,
    received: &MessageCounts,
    dropped: &MessageCounts,
) -> [(&'static str, Yaml); 3] {
    [
        ("sent_stats", message_counts(sent)),
        ("received_stats", message_counts(received)),
        ("dropped_stats", message_counts(dropped)),
    ]
}

fn message_counts(c: &MessageCounts) -> Yaml {
    Yaml::map(c.fields().map(|(key, value)| {
        let value = match value {
            Counter::U32(count) => Yaml::int(count),
            Counter::U64(count) => Yaml::int(count),
        };
        (key, value)
    }))
}

fn udsp_info(u: &UdspInfo) -> Yaml {
    let mut entries = vec![
        ("net priority".to_string(), Yaml::int(u.net_priority)),
        ("nid priority".to_string(), Yaml::int(u.nid_priority)),
    ];
    let list = |nids: &[Nid]| {
        Yaml::Map(
            nids.iter()
                .enumerate()
                .map(|(i, nid)| (format!("NID-{i}"), Yaml::plain(nid.to_string())))
                .collect(),
        )
    };
    // lustre: lnet_udsp_info_send() only sends the gateway list when it is non-empty.
    if !u.preferred_gateways.is_empty() {
        entries.push(("Preferred gateway NIDs".to_string(), list(&u.preferred_gateways)));
    }
    if !u.preferred_sources.is_empty() {
        entries.push(("Preferred source NIDs".to_string(), list(&u.preferred_sources)));
    }
    Yaml::Map(entries)
}

// ---------------------------------------------------------------------------------------------
// peer show / peer list

/// One peer of `peer show`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerEntry {
    pub primary_nid: Nid,
    pub multi_rail: bool,
    /// The raw `lp_state` bitmask (docs/protocol/cli.md §3.2), shown from level 3.
    pub state: u32,
    /// In the kernel's order: grouped by peer net, primary first.
    pub nis: Vec<PeerNiEntry>,
}

/// A peer NI's reachability as `peer show` words it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerNiState {
    /// Neither a router nor subject to aliveness checks.
    NotApplicable,
    Up,
    Down,
}

/// One peer NI of `peer show`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerNiEntry {
    pub nid: Nid,
    pub udsp: UdspInfo,
    pub state: PeerNiState,
    pub max_ni_tx_credits: u32,
    /// Credits go negative when messages queue; the netlink attribute is a u32, so lnetctl
    /// prints the two's complement (as it does).
    pub available_tx_credits: i32,
    pub min_tx_credits: i32,
    pub tx_q_num_of_buf: u32,
    pub available_rtr_credits: i32,
    pub min_rtr_credits: i32,
    pub refcount: u32,
    pub statistics: Statistics,
    pub sent: MessageCounts,
    pub received: MessageCounts,
    pub dropped: MessageCounts,
    pub health: PeerNiHealth,
}

/// `peer show [-v L]`, or the `peer:` part of an export. Empty without peers; callers leave
/// out `0@lo`.
pub fn peer_show(peers: &[PeerEntry], mode: ShowMode) -> String {
    let level = match mode {
        ShowMode::Backup => 0,
        other => other.level(3),
    };
    let backup = mode.backup();
    let peers: Vec<Yaml> = peers
        .iter()
        .map(|peer| {
            let mut entries: Vec<(&str, Yaml)> = vec![
                ("primary nid", Yaml::plain(peer.primary_nid.to_string())),
                ("Multi-Rail", Yaml::bool(peer.multi_rail)),
            ];
            if level >= 3 {
                entries.push(("peer state", Yaml::int(peer.state)));
            }
            let nis = peer.nis.iter().map(|ni| peer_ni(ni, level, backup));
            entries.push(("peer ni", Yaml::seq(nis)));
            Yaml::map(entries)
        })
        .collect();
    section_n("peer", peers)
}

fn peer_ni(ni: &PeerNiEntry, level: u32, backup: bool) -> Yaml {
    let mut entries: Vec<(&str, Yaml)> = vec![("nid", Yaml::plain(ni.nid.to_string()))];
    if level >= 4 {
        entries.push(("udsp info", udsp_info(&ni.udsp)));
    }
    if !backup {
        let state = match ni.state {
            PeerNiState::NotApplicable => "NA",
            PeerNiState::Up => "up",
            PeerNiState::Down => "down",
        };
        entries.push(("state", Yaml::plain(state)));
    }
    if level >= 1 {
        // The attributes are u32: negative credits print as their two's complement.
        let u32_of = |v: i32| Yaml::int(v as u32);
        entries.push(("max_ni_tx_credits", Yaml::int(ni.max_ni_tx_credits)));
        entries.push(("available_tx_credits", u32_of(ni.available_tx_credits)));
        entries.push(("min_tx_credits", u32_of(ni.min_tx_credits)));
        entries.push(("tx_q_num_of_buf", Yaml::int(ni.tx_q_num_of_buf)));
        entries.push(("available_rtr_credits", u32_of(ni.available_rtr_credits)));
        entries.push(("min_rtr_credits", u32_of(ni.min_rtr_credits)));
        entries.push(("refcount", Yaml::int(ni.refcount)));
        entries.push(("statistics", statistics(&ni.statistics)));
    }
    if level >= 2 {
        entries.extend(per_type_counts(&ni.sent, &ni.received, &ni.dropped));
        let h = &ni.health;
        entries.push((
            "health stats",
            Yaml::map([
                ("health value", Yaml::int(h.value)),
                ("dropped", Yaml::int(h.dropped)),
                ("timeout", Yaml::int(h.timeout)),
                ("error", Yaml::int(h.error)),
                ("network timeout", Yaml::int(h.network_timeout)),
                ("ping_count", Yaml::int(h.ping_count)),
                ("next_ping", Yaml::int(h.next_ping)),
            ]),
        ));
    }
    if level >= 4 && !backup {
        entries.push(("latency percentiles", latency_percentiles(&ni.statistics)));
    }
    Yaml::map(entries)
}

/// ulnet's own keys (not in lnetctl), at `peer show -v 4` after `health stats`: PUT->ACK and
/// GET->REPLY round trips from the latency histograms, in microseconds (zero without
/// samples): `put_ack_p50_usec`, `_p90_usec`, `_p99_usec`, `_max_usec`, then `get_rtt_*`.
fn latency_percentiles(s: &Statistics) -> Yaml {
    let mut entries = Vec::new();
    for (op, latency) in [("put_ack", s.put_ack), ("get_rtt", s.get_rtt)] {
        for (name, nsec) in [
            ("p50", latency.p50_nsec),
            ("p90", latency.p90_nsec),
            ("p99", latency.p99_nsec),
            ("max", latency.max_nsec),
        ] {
            entries.push((format!("{op}_{name}_usec"), Yaml::int(nsec / 1000)));
        }
    }
    Yaml::Map(entries)
}

/// `peer list`: the primary NIDs only. Empty without peers.
pub fn peer_list(primary_nids: &[Nid]) -> String {
    let items: Vec<Yaml> =
        primary_nids.iter().map(|nid| Yaml::map([("nid", Yaml::plain(nid.to_string()))])).collect();
    section_n("peer list", items)
}

// ---------------------------------------------------------------------------------------------
// route show

/// One route of `route show`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RouteEntry {
    pub net: Net,
    pub gateway: Nid,
    /// 1..=255, or -1 when unset (`LNET_UNDEFINED_HOPS`).
    pub hop: i32,
    pub priority: u32,
    pub up: bool,
    pub multi_hop: bool,
}

/// `route show [-v]` (`verbose` is the request version), or the `route:` part of an export.
/// Empty without routes.
pub fn route_show(routes: &[RouteEntry], mode: ShowMode) -> String {
    let verbose = mode.level(1) >= 1;
    let routes: Vec<Yaml> = routes
        .iter()
        .map(|route| {
            let mut entries: Vec<(&str, Yaml)> = vec![
                ("net", Yaml::plain(route.net.to_string())),
                ("gateway", Yaml::plain(route.gateway.to_string())),
            ];
            if verbose {
                entries.push(("hop", Yaml::int(route.hop)));
                entries.push(("priority", Yaml::int(route.priority)));
                if !mode.backup() {
                    entries.push(("state", Yaml::plain(if route.up { "up" } else { "down" })));
                    let kind = if route.multi_hop { "multi-hop" } else { "single-hop" };
                    entries.push(("type", Yaml::plain(kind)));
                }
            }
            Yaml::map(entries)
        })
        .collect();
    section_n("route", routes)
}

// ---------------------------------------------------------------------------------------------
// ping / discover

/// Which of the two manage commands produced a reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ManageCommand {
    Ping,
    Discover,
}

impl ManageCommand {
    pub fn name(self) -> &'static str {
        match self {
            Self::Ping => "ping",
            Self::Discover => "discover",
        }
    }
}

/// A target that answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PingReply {
    /// The peer's primary NID, or `Nid::ANY` (printed `<?>`) when no peer exists.
    pub primary_nid: Nid,
    pub multi_rail: bool,
    /// The NIDs of the ping buffer, without `0@lo`; `12345-<nid>` forms when the target was
    /// given with a non-Lustre PID (`libcfs_idstr()`).
    pub nids: Vec<String>,
}

/// A target that failed: reported as `failed to <cmd> <nid>: <strerror>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PingFailure {
    pub target: String,
    /// Negative errno.
    pub errno: i32,
}

/// `ping`/`discover` output (dialect N with libyaml's default indent 2). Empty when nothing
/// answered and nothing failed.
pub fn ping_show(
    command: ManageCommand,
    replies: &[PingReply],
    failures: &[PingFailure],
) -> String {
    let mut top: Vec<(&str, Yaml)> = Vec::new();
    if !replies.is_empty() {
        let items = replies.iter().map(|reply| {
            let nis = reply.nids.iter().map(|nid| Yaml::map([("nid", Yaml::plain(nid.as_str()))]));
            // An empty nest reaches the parser as a bare `peer_ni:` key, i.e. an empty scalar.
            let nis = if reply.nids.is_empty() { Yaml::plain("") } else { Yaml::seq(nis) };
            Yaml::map([
                ("primary nid", Yaml::plain(reply.primary_nid.to_string())),
                ("Multi-Rail", Yaml::bool(reply.multi_rail)),
                ("peer_ni", nis),
            ])
        });
        top.push((command.name(), Yaml::seq(items)));
    }
    if !failures.is_empty() {
        let items = failures.iter().map(|failure| {
            let descr = format!(
                "failed to {} {}: {}",
                command.name(),
                failure.target,
                strerror(failure.errno.saturating_neg())
            );
            Yaml::map([
                (command.name(), Yaml::plain("")),
                ("errno", Yaml::int(failure.errno)),
                // lnetctl rebuilds this scalar itself (yaml_lnet_ping_display()).
                ("descr", Yaml::Scalar(Scalar::event(descr, ScalarStyle::Plain))),
            ])
        });
        top.push(("manage", Yaml::seq(items)));
    }
    if top.is_empty() {
        return String::new();
    }
    Yaml::map(top).to_string_libyaml(LibyamlStyle::DEFAULT_INDENT)
}

// ---------------------------------------------------------------------------------------------
// debug recovery

/// Which recovery queue `debug recovery` dumps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecoveryQueue {
    Local,
    Peer,
}

/// `debug recovery --local|--peer`: `nid-0`, `nid-1`, ... Empty when the queue is.
pub fn recovery_show(queue: RecoveryQueue, nids: &[Nid]) -> String {
    if nids.is_empty() {
        return String::new();
    }
    let title = match queue {
        RecoveryQueue::Local => "Local NI recovery",
        RecoveryQueue::Peer => "Peer NI recovery",
    };
    let entries =
        nids.iter().enumerate().map(|(i, nid)| (format!("nid-{i}"), Yaml::plain(nid.to_string())));
    Yaml::map([(title, Yaml::map(entries))]).to_string_n()
}

// ---------------------------------------------------------------------------------------------
// fault show

/// Which list a fault rule is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    Drop,
    Delay,
}

/// One rule of `fault drop show` or `fault delay show`, as the kernel's dump carries it
/// (lnet/lnet/api-ni.c `lnet_fault_show_dump()`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FaultRuleEntry {
    pub kind: FaultKind,
    /// `libcfs_nidstr()` of the source: `<?>` for any, `255.255.255.255@net` for a net.
    pub source: String,
    pub destination: String,
    pub portal_mask: u64,
    pub message_mask: u32,
    pub rate: u32,
    pub interval: u32,
    /// Delay rules only.
    pub latency: u32,
    /// `ds_dropped` or `ls_delayed`.
    pub hits: u64,
    pub count: u64,
    pub put: u64,
    pub ack: u64,
    pub get: u64,
    pub reply: u64,
}

/// `fault drop show` / `fault delay show` (dialect N): a `fault:` sequence, keys in the
/// kernel's attribute order (`fault_attr_list`). Empty without rules (the kernel answers
/// `-ENOENT`, which lnetctl takes as "nothing to show").
/// lustre: lnet/lnet/api-ni.c `fault_attr_list`, `lnet_fault_show_dump()`.
pub fn fault_show(rules: &[FaultRuleEntry]) -> String {
    let items = rules
        .iter()
        .map(|rule| {
            let mut entries: Vec<(&str, Yaml)> = vec![
                (
                    "rule_type",
                    Yaml::plain(match rule.kind {
                        FaultKind::Drop => "drop",
                        FaultKind::Delay => "delay",
                    }),
                ),
                ("fa_src", Yaml::plain(rule.source.clone())),
                ("fa_dst", Yaml::plain(rule.destination.clone())),
                ("fa_ptl_mask", Yaml::int(rule.portal_mask)),
                ("fa_msg_mask", Yaml::int(rule.message_mask)),
            ];
            match rule.kind {
                FaultKind::Drop => entries.extend([
                    ("da_rate", Yaml::int(rule.rate)),
                    ("da_interval", Yaml::int(rule.interval)),
                    ("ds_dropped", Yaml::int(rule.hits)),
                ]),
                FaultKind::Delay => entries.extend([
                    ("la_rate", Yaml::int(rule.rate)),
                    ("la_interval", Yaml::int(rule.interval)),
                    ("la_latency", Yaml::int(rule.latency)),
                    ("ls_delayed", Yaml::int(rule.hits)),
                ]),
            }
            entries.extend([
                ("fs_count", Yaml::int(rule.count)),
                ("fs_put", Yaml::int(rule.put)),
                ("fs_ack", Yaml::int(rule.ack)),
                ("fs_get", Yaml::int(rule.get)),
                ("fs_reply", Yaml::int(rule.reply)),
            ]);
            Yaml::map(entries)
        })
        .collect();
    section_n("fault", items)
}

// ---------------------------------------------------------------------------------------------
// Dialect C: global show, stats show, routing show, udsp show.

/// Every `global:` key in `global show` order (docs/protocol/cli.md §3.7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GlobalShow {
    pub numa_range: i64,
    pub max_interfaces: i64,
    pub discovery: i64,
    pub drop_asym_route: i64,
    pub retry_count: i64,
    pub transaction_timeout: i64,
    pub health_sensitivity: i64,
    pub recovery_interval: i64,
    pub router_sensitivity: i64,
    pub lnd_timeout: i64,
    pub response_tracking: i64,
    pub recovery_limit: i64,
    pub max_recovery_ping_interval: i64,
}

impl GlobalShow {
    fn node(&self) -> Yaml {
        let entries = [
            ("numa_range", self.numa_range),
            ("max_interfaces", self.max_interfaces),
            ("discovery", self.discovery),
            ("drop_asym_route", self.drop_asym_route),
            ("retry_count", self.retry_count),
            ("transaction_timeout", self.transaction_timeout),
            ("health_sensitivity", self.health_sensitivity),
            ("recovery_interval", self.recovery_interval),
            ("router_sensitivity", self.router_sensitivity),
            ("lnd_timeout", self.lnd_timeout),
            ("response_tracking", self.response_tracking),
            ("recovery_limit", self.recovery_limit),
            ("max_recovery_ping_interval", self.max_recovery_ping_interval),
        ];
        Yaml::map(entries.map(|(key, value)| (key, Yaml::c_number(value as f64))))
    }
}

/// `global show`.
pub fn global_show(global: &GlobalShow) -> String {
    Yaml::map([("global", global.node())]).to_string_c()
}

/// `stats show`. The 64-bit lengths go through a double as in lnetctl.
pub fn stats_show(s: &StatsShow) -> String {
    let entries = s.fields().map(|(key, value)| {
        let value = match value {
            Counter::U32(count) => Yaml::c_number(count),
            Counter::U64(length) => Yaml::c_number(length as f64),
        };
        (key, value)
    });
    Yaml::map([("statistics", Yaml::map(entries))]).to_string_c()
}

/// One router buffer pool of one CPT.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BufferPool {
    pub npages: u32,
    pub nbuffers: u32,
    pub credits: i32,
    pub mincredits: i32,
}

/// Router buffer pools (`tiny`, `small`, `large` per CPT) and the routing switch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RoutingShow {
    /// Empty when the pools were never allocated: lnetctl then prints nothing.
    pub cpts: Vec<[BufferPool; 3]>,
    pub enabled: bool,
}

const POOL_NAMES: [&str; 3] = ["tiny", "small", "large"];

impl RoutingShow {
    /// The `routing:` and `buffers:` entries, or nothing without pools.
    fn entries(&self, backup: bool) -> Vec<(&'static str, Yaml)> {
        if self.cpts.is_empty() {
            return Vec::new();
        }
        let enable = ("enable", Yaml::c_number(u8::from(self.enabled)));
        let routing = if backup {
            Yaml::map([enable])
        } else {
            let mut items: Vec<Yaml> = self
                .cpts
                .iter()
                .enumerate()
                .map(|(i, pools)| {
                    let pools = POOL_NAMES.iter().zip(pools).map(|(name, pool)| {
                        let pool = Yaml::map([
                            ("npages", Yaml::c_number(pool.npages)),
                            ("nbuffers", Yaml::c_number(pool.nbuffers)),
                            ("credits", Yaml::c_number(pool.credits)),
                            ("mincredits", Yaml::c_number(pool.mincredits)),
                        ]);
                        (*name, pool)
                    });
                    Yaml::map([(format!("cpt[{i}]"), Yaml::map(pools))])
                })
                .collect();
            items.push(Yaml::map([enable]));
            Yaml::Seq(items)
        };
        let totals = POOL_NAMES.iter().enumerate().map(|(j, name)| {
            let total: u64 = self
                .cpts
                .iter()
                .filter_map(|pools| pools.get(j))
                .map(|pool| u64::from(pool.nbuffers))
                .sum();
            // lustre: the totals are C ints summed from u32 counts.
            (*name, Yaml::c_number(total as f64))
        });
        vec![("routing", routing), ("buffers", Yaml::map(totals))]
    }
}

/// `routing show`. Empty when the router buffer pools were never allocated.
pub fn routing_show(routing: &RoutingShow) -> String {
    let entries = routing.entries(false);
    if entries.is_empty() {
        return String::new();
    }
    Yaml::map(entries).to_string_c()
}

/// One UDSP rule of `udsp show`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UdspEntry {
    pub idx: u32,
    pub src: Option<String>,
    pub dst: Option<String>,
    pub rte: Option<String>,
    /// `Some` for priority rules.
    pub priority: Option<u32>,
}

impl UdspEntry {
    /// The rule at `idx` as `udsp show` prints it: each criterion in its shown form, the
    /// action only for a priority rule. lustre: liblnetconfig_udsp.c `lustre_lnet_show_udsp()`.
    pub fn new(idx: usize, rule: &ulnet_proto::engine::UdspRule) -> Self {
        Self {
            idx: u32::try_from(idx).unwrap_or(u32::MAX),
            src: rule.src.as_ref().map(ToString::to_string),
            dst: rule.dst.as_ref().map(ToString::to_string),
            rte: rule.rte.as_ref().map(ToString::to_string),
            priority: rule.priority(),
        }
    }
}

fn udsp_items(rules: &[UdspEntry]) -> Yaml {
    Yaml::seq(rules.iter().map(|rule| {
        let mut entries: Vec<(&str, Yaml)> = vec![("idx", Yaml::c_number(rule.idx))];
        for (key, value) in [("src", &rule.src), ("dst", &rule.dst), ("rte", &rule.rte)] {
            // cYAML prints strings raw, so lnetctl's `[0-255].*...` would read back as a
            // broken flow sequence: ulnet quotes such a value (decision 0021).
            match value {
                Some(value) if value.starts_with('[') => {
                    entries.push((key, Yaml::double_quoted(value.as_str())));
                }
                Some(value) => entries.push((key, Yaml::plain(value.as_str()))),
                None => {}
            }
        }
        if let Some(priority) = rule.priority {
            entries.push(("action", Yaml::map([("priority", Yaml::c_number(priority))])));
        }
        Yaml::map(entries)
    }))
}

/// `udsp show`. Empty without rules.
pub fn udsp_show(rules: &[UdspEntry]) -> String {
    if rules.is_empty() {
        return String::new();
    }
    Yaml::map([("udsp", udsp_items(rules))]).to_string_c()
}

// ---------------------------------------------------------------------------------------------
// export

/// Everything `export` prints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportState {
    pub nets: Vec<NetEntry>,
    pub routes: Vec<RouteEntry>,
    pub peers: Vec<PeerEntry>,
    pub routing: RoutingShow,
    pub global: GlobalShow,
    pub udsp: Vec<UdspEntry>,
}

/// `export` (`backup = false`) or `export --backup` (docs/protocol/cli.md §3.10): `net:`, `route:`, `peer:`
/// in dialect N, then one dialect-C tree of `routing`/`buffers`, `global` and `udsp`.
pub fn export(state: &ExportState, backup: bool) -> String {
    let mode = if backup { ShowMode::Backup } else { ShowMode::Export };
    let mut out = net_show(&state.nets, mode);
    out.push_str(&route_show(&state.routes, mode));
    out.push_str(&peer_show(&state.peers, mode));
    let mut tail = state.routing.entries(backup);
    tail.push(("global", state.global.node()));
    if !state.udsp.is_empty() {
        tail.push(("udsp", udsp_items(&state.udsp)));
    }
    out.push_str(&Yaml::map(tail).to_string_c());
    out
}

/// A dialect-N document `<title>:` holding `items`, or nothing when there are none.
fn section_n(title: &str, items: Vec<Yaml>) -> String {
    if items.is_empty() {
        return String::new();
    }
    Yaml::map([(title, Yaml::Seq(items))]).to_string_n()
}

#[cfg(test)]
pub(crate) mod tests;
