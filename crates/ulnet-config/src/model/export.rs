//! A [`Config`] as `lnetctl export --backup` prints the configuration it creates.
//!
//! Values the configuration leaves unset are shown with the defaults the LNDs and LNet fill
//! in; live-only data (NIDs, status, statistics) is what `--backup` leaves out anyway, so this
//! is exact for a node configured from `config` alone.

use ulnet_proto::addr::{LndType, Net, Nid};

use super::{
    Config, DEFAULT_CONNS_PER_PEER, DEFAULT_TOS, GlobalSettings, LndTunables, Tunables,
    default_tunables,
};
use crate::grammar::ExprList;
use crate::render::{
    BufferPool, ExportState, LndTunablesShow, LocalNiEntry, LocalNiHealth, MessageCounts, NetEntry,
    NetTunables, PeerEntry, PeerNiEntry, PeerNiHealth, PeerNiState, RouteEntry, RoutingShow,
    Statistics, UdspEntry, UdspInfo, export,
};

/// Router buffer totals LNet allocates when `buffers:` leaves them unset, and the pages per
/// buffer of each pool. lustre: lnet/lnet/router.c (`tiny_router_buffers` 2048,
/// `small_router_buffers` 16384, `large_router_buffers` 1024; 0, 1 and 256 pages).
pub const DEFAULT_BUFFERS: [(u32, u32); 3] = [(2048, 0), (16384, 1), (1024, 256)];

/// `lnetctl export --backup` for a node configured from `config` with `settings` in force and
/// `ncpts` CPU partitions.
pub fn backup(config: &Config, settings: &GlobalSettings, ncpts: u32) -> String {
    export(&backup_state(config, settings, ncpts), true)
}

/// The export input `backup` renders.
pub fn backup_state(config: &Config, settings: &GlobalSettings, ncpts: u32) -> ExportState {
    let ncpts = ncpts.max(1);
    let nets = config
        .nets
        .iter()
        .map(|net| {
            let tunables = effective_tunables(net.net.lnd, &net.tunables);
            let lnd_tunables = effective_lnd_tunables(net.net.lnd, &net.lnd_tunables);
            let net_cpts = net.cpts.as_ref();
            let mut nis = Vec::new();
            for local in &net.nis {
                let nid = local.nid.unwrap_or(Nid::ANY);
                if local.interfaces.is_empty() {
                    nis.push(local_ni(nid, None, tunables, lnd_tunables, cpts_of(net_cpts, ncpts)));
                }
                for interface in &local.interfaces {
                    let cpts = cpts_of(interface.cpts.as_ref().or(net_cpts), ncpts);
                    nis.push(local_ni(
                        nid,
                        Some(interface.name.clone()),
                        tunables,
                        lnd_tunables,
                        cpts,
                    ));
                }
            }
            NetEntry { net: net.net, nis }
        })
        .collect();

    let routes = config
        .routes
        .iter()
        .map(|route| RouteEntry {
            net: route.net,
            gateway: route.gateway,
            hop: route.hops.map_or(-1, i32::from),
            priority: route.priority,
            up: route.alive.unwrap_or(true),
            multi_hop: false,
        })
        .collect();

    let peers = config
        .peers
        .iter()
        .map(|peer| {
            let listed = peer.nis.iter().flatten().filter_map(|ni| ni.nid);
            PeerEntry {
                primary_nid: peer.primary_nid,
                multi_rail: peer.multi_rail.unwrap_or(true),
                state: peer.state.unwrap_or(0),
                nis: peer_ni_order(peer.primary_nid, listed).into_iter().map(peer_ni).collect(),
            }
        })
        .collect();

    let routing = match config.routing {
        Some(true) => RoutingShow { cpts: buffer_pools(config, ncpts), enabled: true },
        _ => RoutingShow::default(),
    };

    let udsp = config
        .udsp
        .iter()
        .map(|rule| UdspEntry {
            idx: u32::try_from(rule.idx).unwrap_or(0),
            src: rule.src.clone(),
            dst: rule.dst.clone(),
            rte: rule.rte.clone(),
            priority: rule.priority.and_then(|p| u32::try_from(p).ok()),
        })
        .collect();

    ExportState { nets, routes, peers, routing, global: settings.show(), udsp }
}

/// Peer NIs in the kernel's order: grouped by net, nets in order of first appearance with the
/// primary's net first, and within a net in insertion order, primary first, duplicates
/// dropped (docs/protocol/cli.md §3.2).
pub fn peer_ni_order(primary: Nid, listed: impl IntoIterator<Item = Nid>) -> Vec<Nid> {
    let mut all: Vec<Nid> = vec![primary];
    for nid in listed {
        if !all.contains(&nid) {
            all.push(nid);
        }
    }
    let mut nets: Vec<Net> = Vec::new();
    for nid in &all {
        if !nets.contains(&nid.net()) {
            nets.push(nid.net());
        }
    }
    nets.iter().flat_map(|net| all.iter().copied().filter(move |nid| nid.net() == *net)).collect()
}

/// The tunables a net runs with: configured values where LNet keeps them
/// (`peer_timeout` >= 0, the others > 0), the LND's defaults otherwise.
/// lustre: api-ni.c `lnet_genl_parse_tunables()` / `lnet_add_net_common()`.
pub fn effective_tunables(lnd: LndType, tunables: &Tunables) -> NetTunables {
    let (peer_timeout, peer_credits, peer_buffer_credits, credits) = default_tunables(lnd);
    let keep = |value: Option<i64>, min: i64, default: i32| {
        value.filter(|v| *v >= min).and_then(|v| i32::try_from(v).ok()).unwrap_or(default)
    };
    NetTunables {
        peer_timeout: keep(tunables.peer_timeout, 0, peer_timeout),
        peer_credits: keep(tunables.peer_credits, 1, peer_credits),
        peer_buffer_credits: keep(tunables.peer_buffer_credits, 1, peer_buffer_credits),
        credits: keep(tunables.credits, 1, credits),
    }
}

/// The LND tunables `net show` reports for a configured net, `None` for LNDs without a key
/// table here. The read-only `timeout` is left 0: backups omit it.
pub fn effective_lnd_tunables(lnd: LndType, tunables: &LndTunables) -> Option<LndTunablesShow> {
    let conns_per_peer = tunables
        .conns_per_peer
        .and_then(|v| u16::try_from(v).ok())
        .unwrap_or(DEFAULT_CONNS_PER_PEER);
    let tos = tunables.tos.and_then(|v| i16::try_from(v).ok()).unwrap_or(DEFAULT_TOS);
    let u32_or = |value: Option<i64>, default: u32| {
        value.and_then(|v| u32::try_from(v).ok()).unwrap_or(default)
    };
    match lnd {
        LndType::SOCK => Some(LndTunablesShow::Socklnd { conns_per_peer, timeout: 0, tos }),
        // lustre: o2iblnd_modparams.c module parameter defaults.
        LndType::O2IB => Some(LndTunablesShow::O2iblnd {
            peercredits_hiw: u32_or(tunables.peercredits_hiw, 0),
            map_on_demand: tunables.map_on_demand.unwrap_or(true),
            concurrent_sends: u32_or(tunables.concurrent_sends, 0),
            fmr_pool_size: u32_or(tunables.fmr_pool_size, 512),
            fmr_flush_trigger: u32_or(tunables.fmr_flush_trigger, 384),
            fmr_cache: u32_or(tunables.fmr_cache, 1),
            ntx: tunables.ntx.and_then(|v| u16::try_from(v).ok()).unwrap_or(512),
            conns_per_peer,
            timeout: 0,
            tos,
        }),
        _ => None,
    }
}

fn cpts_of(cpts: Option<&ExprList>, ncpts: u32) -> Vec<u32> {
    match cpts {
        Some(list) => list.values().collect(),
        None => (0..ncpts).collect(),
    }
}

fn local_ni(
    nid: Nid,
    interface: Option<String>,
    tunables: NetTunables,
    lnd_tunables: Option<LndTunablesShow>,
    cpts: Vec<u32>,
) -> LocalNiEntry {
    LocalNiEntry {
        nid,
        up: true,
        interface,
        statistics: Statistics::default(),
        udsp: UdspInfo::default(),
        sent: MessageCounts::default(),
        received: MessageCounts::default(),
        dropped: MessageCounts::default(),
        health: LocalNiHealth::default(),
        tunables,
        lnd_tunables,
        dev_cpt: -1,
        cpts,
    }
}

fn peer_ni(nid: Nid) -> PeerNiEntry {
    PeerNiEntry {
        nid,
        udsp: UdspInfo::default(),
        state: PeerNiState::NotApplicable,
        max_ni_tx_credits: 0,
        available_tx_credits: 0,
        min_tx_credits: 0,
        tx_q_num_of_buf: 0,
        available_rtr_credits: 0,
        min_rtr_credits: 0,
        refcount: 0,
        statistics: Statistics::default(),
        sent: MessageCounts::default(),
        received: MessageCounts::default(),
        dropped: MessageCounts::default(),
        health: PeerNiHealth::default(),
    }
}

/// Per-CPT pools from the `buffers:` totals (or the defaults): total / ncpts, at least 1.
fn buffer_pools(config: &Config, ncpts: u32) -> Vec<[BufferPool; 3]> {
    let buffers = config.buffers.unwrap_or_default();
    let pool = |total: Option<i64>, (default_total, npages): (u32, u32)| {
        let total =
            total.and_then(|t| u32::try_from(t).ok()).filter(|t| *t > 0).unwrap_or(default_total);
        let nbuffers = (total / ncpts).max(1);
        let credits = i32::try_from(nbuffers).unwrap_or(i32::MAX);
        BufferPool { npages, nbuffers, credits, mincredits: credits }
    };
    let [tiny, small, large] = DEFAULT_BUFFERS;
    let pools = [pool(buffers.tiny, tiny), pool(buffers.small, small), pool(buffers.large, large)];
    (0..ncpts).map(|_| pools).collect()
}
