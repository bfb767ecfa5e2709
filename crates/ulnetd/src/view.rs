//! The node's live state as the renderer's input structs (`ulnet_config::render`): what
//! `net show`, `peer show`, `peer list`, `stats show` and `export` print.
//!
//! The kernel keeps most counters in 32 bits (`struct lnet_element_stats` atomics,
//! `struct lnet_counters_common` u32 fields), so they wrap there; the engine counts in 64
//! bits and the low 32 bits are shown, which is what a kernel node would show
//! (`ulnet_proto::engine::stats`, where the shown shapes are declared with their conversions).
//! lustre: include/uapi/linux/lnet/lnet-types.h, api-ni.c `lnet_fill_ni_info()`,
//! peer.c `lnet_peer_ni_info()` (via the netlink dumps).

use ulnet::{NiStats, NodeStats, PeerNiStats, UdspConstructInfo};
use ulnet_config::render::{
    LndTunablesShow, LocalNiEntry, LocalNiHealth, MessageCounts, NetEntry, NetTunables, PeerEntry,
    PeerNiEntry, PeerNiHealth, PeerNiState, Statistics, UdspInfo,
};
use ulnet_proto::addr::{Net, Nid};
use ulnet_proto::engine::PeerInfo;
use ulnet_proto::engine::stats::CounterWidth;

use crate::nets::{NetSpec, NiSpec, SOCK_TIMEOUT_SECONDS};

/// `LNET_PEER_MULTI_RAIL`, bit 0 of the peer state (include/linux/lnet/lib-types.h).
pub const PEER_MULTI_RAIL: u32 = 1 << 0;

/// `net show`: `lo` first, then the configured nets in configuration order. `conns_per_peer`
/// gives the count in force on a live NI (changed by `net set --conns-per-peer`); NIs it does
/// not know show what the configuration resolves to. `udsp` gives the UDSP stamps of a local
/// NI (`false`) or peer NI (`true`).
pub fn net_entries(
    nets: &[NetSpec],
    stats: &NodeStats,
    conns_per_peer: impl Fn(Nid) -> Option<u8>,
    lnd_timeout: impl Fn(Nid) -> Option<std::time::Duration>,
    udsp: impl Fn(Nid, bool) -> Option<UdspConstructInfo>,
    cpt_count: u32,
) -> Vec<NetEntry> {
    let lo = stats.nis.iter().find(|ni| ni.nid == Nid::LO_0);
    let mut entries = vec![NetEntry {
        net: Net::LO,
        nis: vec![local_ni(
            &NiSpec::new(Nid::LO_0, None),
            lo,
            None,
            NetTunables::default(),
            udsp_info(udsp(Nid::LO_0, false)),
            cpt_count,
        )],
    }];
    for net in nets {
        let tunables = shown_tunables(net);
        let nis = net
            .nis
            .iter()
            .map(|ni| {
                let live = stats.nis.iter().find(|known| known.nid == ni.nid);
                let in_force = conns_per_peer(ni.nid).map(u16::from);
                let configured = || {
                    let speed = ni.nid.ip().and_then(ulnet::link_speed_mbps);
                    net.socklnd.shown_conns_per_peer(speed)
                };
                let lnd = LndTunablesShow::Socklnd {
                    conns_per_peer: in_force.unwrap_or_else(configured),
                    timeout: lnd_timeout(ni.nid).map_or(SOCK_TIMEOUT_SECONDS, |timeout| {
                        u32::try_from(timeout.as_secs()).unwrap_or(u32::MAX)
                    }),
                    tos: net.socklnd.tos,
                };
                local_ni(ni, live, Some(lnd), tunables, udsp_info(udsp(ni.nid, false)), cpt_count)
            })
            .collect();
        entries.push(NetEntry { net: net.net, nis });
    }
    entries
}

/// `peer show`: one entry per peer (by primary NID, in the order the node learnt them), its
/// NIs in the peer's order (primary net first, primary NI first in its net) when `info`
/// knows the peer. Loopback peers (ourselves through `0@lo`) are never shown.
pub fn peer_entries(
    stats: &NodeStats,
    info: impl Fn(Nid) -> Option<PeerInfo>,
    udsp: impl Fn(Nid, bool) -> Option<UdspConstructInfo>,
) -> Vec<PeerEntry> {
    let mut peers: Vec<PeerEntry> = Vec::new();
    for ni in stats.peer_nis.iter().filter(|ni| ni.nid.net() != Net::LO) {
        let entry = peer_ni(ni, udsp_info(udsp(ni.nid, true)));
        match peers.iter_mut().find(|peer| peer.primary_nid == ni.primary_nid) {
            Some(peer) => peer.nis.push(entry),
            None => peers.push(PeerEntry {
                primary_nid: ni.primary_nid,
                multi_rail: ni.multi_rail,
                state: if ni.multi_rail { PEER_MULTI_RAIL } else { 0 },
                nis: vec![entry],
            }),
        }
    }
    for peer in &mut peers {
        let Some(known) = info(peer.primary_nid) else { continue };
        peer.state = known.state.0;
        peer.multi_rail = known.multi_rail();
        let rank = |nid: Nid| known.nis.iter().position(|ni| ni.nid == nid).unwrap_or(usize::MAX);
        peer.nis.sort_by_key(|ni| rank(ni.nid));
    }
    peers
}

fn shown_tunables(net: &NetSpec) -> NetTunables {
    let signed = |value: u32| i32::try_from(value).unwrap_or(i32::MAX);
    NetTunables {
        peer_timeout: signed(net.tunables.peer_timeout),
        peer_credits: signed(net.tunables.peer_credits),
        peer_buffer_credits: signed(net.tunables.peer_buffer_credits),
        credits: signed(net.tunables.credits),
    }
}

fn local_ni(
    spec: &NiSpec,
    live: Option<&NiStats>,
    lnd_tunables: Option<LndTunablesShow>,
    tunables: NetTunables,
    udsp: UdspInfo,
    cpt_count: u32,
) -> LocalNiEntry {
    let statistics = live.map(|ni| ni.statistics).unwrap_or_default();
    let latency = live.map(|ni| ni.latency).unwrap_or_default();
    let health = live.map(|ni| ni.health).unwrap_or_default();
    LocalNiEntry {
        nid: spec.nid,
        up: live.is_some_and(|ni| ni.up),
        interface: spec.interface.clone(),
        statistics: Statistics::new(&statistics, &latency),
        udsp,
        sent: MessageCounts::from(&statistics.sent_stats),
        received: MessageCounts::from(&statistics.received_stats),
        dropped: MessageCounts::from(&statistics.dropped_stats),
        health: LocalNiHealth::from(&health),
        tunables,
        lnd_tunables,
        // -1 is CFS_CPT_ANY: no device (the loopback NI) or no NUMA node known for it.
        dev_cpt: spec.dev_cpt.and_then(|cpt| i32::try_from(cpt).ok()).unwrap_or(-1),
        cpts: spec.cpts.clone().unwrap_or_else(|| (0..cpt_count).collect()),
    }
}

fn peer_ni(ni: &PeerNiStats, udsp: UdspInfo) -> PeerNiEntry {
    PeerNiEntry {
        nid: ni.nid,
        udsp,
        // `NA` unless the peer is a router or this node routes (docs/protocol/cli.md §3.2):
        // `live/routing.rs` `set_peer_states()` says which.
        state: PeerNiState::NotApplicable,
        max_ni_tx_credits: u32::try_from(ni.tx_credits.max).unwrap_or(0),
        available_tx_credits: ni.tx_credits.available,
        min_tx_credits: ni.tx_credits.min,
        tx_q_num_of_buf: CounterWidth::wrapped(ni.tx_q_num_of_buf),
        available_rtr_credits: ni.rtr_credits.available,
        min_rtr_credits: ni.rtr_credits.min,
        // The peer table's own reference (lustre: peer.c, `lpni_refcount`).
        refcount: 1,
        statistics: Statistics::new(&ni.statistics, &ni.latency),
        sent: MessageCounts::from(&ni.statistics.sent_stats),
        received: MessageCounts::from(&ni.statistics.received_stats),
        dropped: MessageCounts::from(&ni.statistics.dropped_stats),
        health: PeerNiHealth::from(&ni.health),
    }
}

/// `udsp info` (levels 4 and up): both priorities as the netlink dump sends them, s32, so
/// the default `LNET_MAX_SELECTION_PRIORITY` (`u32::MAX`) shows as -1; the preferred
/// routers of a peer NI. The kernel's dump sends no other list (no rule fills a local net's
/// routers, and `lnet_udsp_info_send()` leaves a peer NI's preferred sources out), so
/// neither does this. A construct that went away meanwhile shows the defaults.
/// lustre: api-ni.c `lnet_udsp_info_send()`, `udsp_info_list` (`NLA_S32`); config.c
/// `lnet_ni_alloc()`, peer.c `lnet_peer_ni_alloc()`.
fn udsp_info(info: Option<UdspConstructInfo>) -> UdspInfo {
    let info = info.unwrap_or(UdspConstructInfo {
        net_priority: u32::MAX,
        nid_priority: u32::MAX,
        ..UdspConstructInfo::default()
    });
    let shown = |priority: u32| i32::from_ne_bytes(priority.to_ne_bytes());
    UdspInfo {
        net_priority: shown(info.net_priority),
        nid_priority: shown(info.nid_priority),
        preferred_gateways: info.preferred_gateways,
        preferred_sources: Vec::new(),
    }
}
