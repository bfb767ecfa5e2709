//! The plain data responses carry: serde mirrors of the input structs of
//! [`ulnet_config::render`], with NIDs and nets as text.
//!
//! The daemon fills the renderer's structs from live state and converts them with `From`; the
//! CLI converts back with `TryFrom` (which re-parses the NIDs) and hands them to the renderer.
//! Keeping the protocol types separate from the renderer's means a renderer change cannot
//! silently change the protocol, and the JSON is readable (`ulnetctl --json`).
//!
//! Structs without NIDs mirror their renderer struct field for field; a macro writes both
//! conversions with exhaustive destructuring, so a field added on one side and not the other
//! fails to compile. The statistics shapes ([`StatsShow`], [`Statistics`], [`Latency`],
//! [`MessageCounts`], [`LocalNiHealth`], [`PeerNiHealth`]) are not mirrored:
//! they are declared once, in `ulnet_proto::engine::stats`, and cross the socket as they are.

use serde::{Deserialize, Serialize};
use ulnet_config::render;
use ulnet_proto::addr::{Net, Nid};
/// The counter shapes cross the socket as the engine declares them (ulnet-proto's `serde`
/// feature), with the kernel's widths.
pub use ulnet_proto::engine::stats::{
    Latency, LocalNiHealth, MessageCounts, PeerNiHealth, Statistics, StatsShow,
};

/// A NID or net in a response that does not parse: the daemon and the CLI disagree about the
/// text form (a bug on one side).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DataError {
    #[error("bad NID '{text}' in {field}")]
    BadNid { field: &'static str, text: String },
    #[error("bad net '{text}' in {field}")]
    BadNet { field: &'static str, text: String },
}

/// Writes a mirror struct and its two conversions. Every field converts with `Into`, which is
/// the identity for plain numbers and the mirror conversion for nested mirrors.
macro_rules! mirror {
    (
        $(#[$meta:meta])*
        pub struct $name:ident mirrors $remote:ident {
            $( $(#[$field_meta:meta])* pub $field:ident : $ty:ty ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        pub struct $name {
            $( $(#[$field_meta])* pub $field: $ty ),*
        }

        #[allow(clippy::useless_conversion)]
        impl From<render::$remote> for $name {
            fn from(value: render::$remote) -> Self {
                let render::$remote { $($field),* } = value;
                Self { $($field: $field.into()),* }
            }
        }

        #[allow(clippy::useless_conversion)]
        impl From<$name> for render::$remote {
            fn from(value: $name) -> Self {
                let $name { $($field),* } = value;
                Self { $($field: $field.into()),* }
            }
        }
    };
}

// ---------------------------------------------------------------------------------------------
// net show

/// One net of `net show`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetEntry {
    /// `tcp`, `tcp1`, `lo`, ...
    pub net: String,
    pub nis: Vec<LocalNiEntry>,
}

/// A local NI as `net show` reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocalNiEntry {
    pub nid: String,
    pub up: bool,
    pub interface: Option<String>,
    pub statistics: Statistics,
    pub udsp: UdspInfo,
    pub sent: MessageCounts,
    pub received: MessageCounts,
    pub dropped: MessageCounts,
    pub health: LocalNiHealth,
    pub tunables: NetTunables,
    pub lnd_tunables: Option<LndTunables>,
    pub dev_cpt: i32,
    pub cpts: Vec<u32>,
}

mirror! {
    /// The net's `tunables:`.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub struct NetTunables mirrors NetTunables {
        pub peer_timeout: i32,
        pub peer_credits: i32,
        pub peer_buffer_credits: i32,
        pub credits: i32,
    }
}

/// `lnd tunables:` per LND.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "lnd", rename_all = "snake_case")]
pub enum LndTunables {
    Socklnd {
        conns_per_peer: u16,
        timeout: u32,
        tos: i16,
    },
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

/// `udsp info:` of a local or peer NI.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UdspInfo {
    pub net_priority: i32,
    pub nid_priority: i32,
    pub preferred_gateways: Vec<String>,
    pub preferred_sources: Vec<String>,
}

// ---------------------------------------------------------------------------------------------
// peer show

/// One peer of `peer show`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerEntry {
    pub primary_nid: String,
    pub multi_rail: bool,
    /// The raw peer state bitmask.
    pub state: u32,
    pub nis: Vec<PeerNiEntry>,
}

/// A peer NI's reachability (`NA`, `up`, `down`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PeerNiState {
    NotApplicable,
    Up,
    Down,
}

/// One peer NI of `peer show`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerNiEntry {
    pub nid: String,
    pub udsp: UdspInfo,
    pub state: PeerNiState,
    pub max_ni_tx_credits: u32,
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

// ---------------------------------------------------------------------------------------------
// route show

/// One route.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteEntry {
    pub net: String,
    pub gateway: String,
    /// 1..=255, or -1 when unset.
    pub hop: i32,
    pub priority: u32,
    pub up: bool,
    pub multi_hop: bool,
}

// ---------------------------------------------------------------------------------------------
// ping / discover

/// Which manage command a reply belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ManageCommand {
    Ping,
    Discover,
}

/// A target that answered a ping or discovery.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PingReply {
    /// `<?>` when no peer exists.
    pub primary_nid: String,
    pub multi_rail: bool,
    /// Ping buffer NIDs without `0@lo`, as text (may be `12345-<nid>` forms).
    pub nids: Vec<String>,
}

mirror! {
    /// A target that failed; `errno` is negative.
    #[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
    pub struct PingFailure mirrors PingFailure {
        pub target: String,
        pub errno: i32,
    }
}

/// The outcome of one `ping` or `discover` over all its targets.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManageReply {
    pub replies: Vec<PingReply>,
    pub failures: Vec<PingFailure>,
}

// ---------------------------------------------------------------------------------------------
// global show, stats show, routing, udsp

mirror! {
    /// Every `global show` key in its order.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
    pub struct GlobalShow mirrors GlobalShow {
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
}

mirror! {
    /// One router buffer pool of one CPT.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub struct BufferPool mirrors BufferPool {
        pub npages: u32,
        pub nbuffers: u32,
        pub credits: i32,
        pub mincredits: i32,
    }
}

/// Router buffer pools (`tiny`, `small`, `large` per CPT) and the routing switch.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoutingShow {
    pub cpts: Vec<[BufferPool; 3]>,
    pub enabled: bool,
}

mirror! {
    /// One UDSP rule.
    #[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
    pub struct UdspEntry mirrors UdspEntry {
        pub idx: u32,
        pub src: Option<String>,
        pub dst: Option<String>,
        pub rte: Option<String>,
        pub priority: Option<u32>,
    }
}

/// Everything `export` prints.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExportState {
    pub nets: Vec<NetEntry>,
    pub routes: Vec<RouteEntry>,
    pub peers: Vec<PeerEntry>,
    pub routing: RoutingShow,
    pub global: GlobalShow,
    pub udsp: Vec<UdspEntry>,
}

// ---------------------------------------------------------------------------------------------
// Conversions of the structs holding NIDs, nets or enums.

fn parse_nid(field: &'static str, text: &str) -> Result<Nid, DataError> {
    text.parse().map_err(|_| DataError::BadNid { field, text: text.to_string() })
}

fn parse_net(field: &'static str, text: &str) -> Result<Net, DataError> {
    text.parse().map_err(|_| DataError::BadNet { field, text: text.to_string() })
}

fn nid_texts(nids: &[Nid]) -> Vec<String> {
    nids.iter().map(Nid::to_string).collect()
}

fn parse_nids(field: &'static str, texts: &[String]) -> Result<Vec<Nid>, DataError> {
    texts.iter().map(|text| parse_nid(field, text)).collect()
}

impl From<&render::NetEntry> for NetEntry {
    fn from(net: &render::NetEntry) -> Self {
        Self { net: net.net.to_string(), nis: net.nis.iter().map(LocalNiEntry::from).collect() }
    }
}

impl TryFrom<&NetEntry> for render::NetEntry {
    type Error = DataError;

    fn try_from(net: &NetEntry) -> Result<Self, DataError> {
        Ok(Self {
            net: parse_net("net type", &net.net)?,
            nis: net.nis.iter().map(render::LocalNiEntry::try_from).collect::<Result<_, _>>()?,
        })
    }
}

impl From<&render::LocalNiEntry> for LocalNiEntry {
    fn from(ni: &render::LocalNiEntry) -> Self {
        Self {
            nid: ni.nid.to_string(),
            up: ni.up,
            interface: ni.interface.clone(),
            statistics: ni.statistics,
            udsp: UdspInfo::from(&ni.udsp),
            sent: ni.sent,
            received: ni.received,
            dropped: ni.dropped,
            health: ni.health,
            tunables: ni.tunables.into(),
            lnd_tunables: ni.lnd_tunables.map(LndTunables::from),
            dev_cpt: ni.dev_cpt,
            cpts: ni.cpts.clone(),
        }
    }
}

impl TryFrom<&LocalNiEntry> for render::LocalNiEntry {
    type Error = DataError;

    fn try_from(ni: &LocalNiEntry) -> Result<Self, DataError> {
        Ok(Self {
            nid: parse_nid("local NI", &ni.nid)?,
            up: ni.up,
            interface: ni.interface.clone(),
            statistics: ni.statistics,
            udsp: render::UdspInfo::try_from(&ni.udsp)?,
            sent: ni.sent,
            received: ni.received,
            dropped: ni.dropped,
            health: ni.health,
            tunables: ni.tunables.into(),
            lnd_tunables: ni.lnd_tunables.map(render::LndTunablesShow::from),
            dev_cpt: ni.dev_cpt,
            cpts: ni.cpts.clone(),
        })
    }
}

impl From<render::LndTunablesShow> for LndTunables {
    fn from(lnd: render::LndTunablesShow) -> Self {
        match lnd {
            render::LndTunablesShow::Socklnd { conns_per_peer, timeout, tos } => {
                Self::Socklnd { conns_per_peer, timeout, tos }
            }
            render::LndTunablesShow::O2iblnd {
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
            } => Self::O2iblnd {
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
            },
        }
    }
}

impl From<LndTunables> for render::LndTunablesShow {
    fn from(lnd: LndTunables) -> Self {
        match lnd {
            LndTunables::Socklnd { conns_per_peer, timeout, tos } => {
                Self::Socklnd { conns_per_peer, timeout, tos }
            }
            LndTunables::O2iblnd {
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
            } => Self::O2iblnd {
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
            },
        }
    }
}

impl From<&render::UdspInfo> for UdspInfo {
    fn from(udsp: &render::UdspInfo) -> Self {
        Self {
            net_priority: udsp.net_priority,
            nid_priority: udsp.nid_priority,
            preferred_gateways: nid_texts(&udsp.preferred_gateways),
            preferred_sources: nid_texts(&udsp.preferred_sources),
        }
    }
}

impl TryFrom<&UdspInfo> for render::UdspInfo {
    type Error = DataError;

    fn try_from(udsp: &UdspInfo) -> Result<Self, DataError> {
        Ok(Self {
            net_priority: udsp.net_priority,
            nid_priority: udsp.nid_priority,
            preferred_gateways: parse_nids("Preferred gateway NIDs", &udsp.preferred_gateways)?,
            preferred_sources: parse_nids("Preferred source NIDs", &udsp.preferred_sources)?,
        })
    }
}

impl From<&render::PeerEntry> for PeerEntry {
    fn from(peer: &render::PeerEntry) -> Self {
        Self {
            primary_nid: peer.primary_nid.to_string(),
            multi_rail: peer.multi_rail,
            state: peer.state,
            nis: peer.nis.iter().map(PeerNiEntry::from).collect(),
        }
    }
}

impl TryFrom<&PeerEntry> for render::PeerEntry {
    type Error = DataError;

    fn try_from(peer: &PeerEntry) -> Result<Self, DataError> {
        Ok(Self {
            primary_nid: parse_nid("primary nid", &peer.primary_nid)?,
            multi_rail: peer.multi_rail,
            state: peer.state,
            nis: peer.nis.iter().map(render::PeerNiEntry::try_from).collect::<Result<_, _>>()?,
        })
    }
}

impl From<render::PeerNiState> for PeerNiState {
    fn from(state: render::PeerNiState) -> Self {
        match state {
            render::PeerNiState::NotApplicable => Self::NotApplicable,
            render::PeerNiState::Up => Self::Up,
            render::PeerNiState::Down => Self::Down,
        }
    }
}

impl From<PeerNiState> for render::PeerNiState {
    fn from(state: PeerNiState) -> Self {
        match state {
            PeerNiState::NotApplicable => Self::NotApplicable,
            PeerNiState::Up => Self::Up,
            PeerNiState::Down => Self::Down,
        }
    }
}

impl From<&render::PeerNiEntry> for PeerNiEntry {
    fn from(ni: &render::PeerNiEntry) -> Self {
        Self {
            nid: ni.nid.to_string(),
            udsp: UdspInfo::from(&ni.udsp),
            state: ni.state.into(),
            max_ni_tx_credits: ni.max_ni_tx_credits,
            available_tx_credits: ni.available_tx_credits,
            min_tx_credits: ni.min_tx_credits,
            tx_q_num_of_buf: ni.tx_q_num_of_buf,
            available_rtr_credits: ni.available_rtr_credits,
            min_rtr_credits: ni.min_rtr_credits,
            refcount: ni.refcount,
            statistics: ni.statistics,
            sent: ni.sent,
            received: ni.received,
            dropped: ni.dropped,
            health: ni.health,
        }
    }
}

impl TryFrom<&PeerNiEntry> for render::PeerNiEntry {
    type Error = DataError;

    fn try_from(ni: &PeerNiEntry) -> Result<Self, DataError> {
        Ok(Self {
            nid: parse_nid("peer ni", &ni.nid)?,
            udsp: render::UdspInfo::try_from(&ni.udsp)?,
            state: ni.state.into(),
            max_ni_tx_credits: ni.max_ni_tx_credits,
            available_tx_credits: ni.available_tx_credits,
            min_tx_credits: ni.min_tx_credits,
            tx_q_num_of_buf: ni.tx_q_num_of_buf,
            available_rtr_credits: ni.available_rtr_credits,
            min_rtr_credits: ni.min_rtr_credits,
            refcount: ni.refcount,
            statistics: ni.statistics,
            sent: ni.sent,
            received: ni.received,
            dropped: ni.dropped,
            health: ni.health,
        })
    }
}

impl From<&render::RouteEntry> for RouteEntry {
    fn from(route: &render::RouteEntry) -> Self {
        Self {
            net: route.net.to_string(),
            gateway: route.gateway.to_string(),
            hop: route.hop,
            priority: route.priority,
            up: route.up,
            multi_hop: route.multi_hop,
        }
    }
}

impl TryFrom<&RouteEntry> for render::RouteEntry {
    type Error = DataError;

    fn try_from(route: &RouteEntry) -> Result<Self, DataError> {
        Ok(Self {
            net: parse_net("route net", &route.net)?,
            gateway: parse_nid("gateway", &route.gateway)?,
            hop: route.hop,
            priority: route.priority,
            up: route.up,
            multi_hop: route.multi_hop,
        })
    }
}

impl From<render::ManageCommand> for ManageCommand {
    fn from(command: render::ManageCommand) -> Self {
        match command {
            render::ManageCommand::Ping => Self::Ping,
            render::ManageCommand::Discover => Self::Discover,
        }
    }
}

impl From<ManageCommand> for render::ManageCommand {
    fn from(command: ManageCommand) -> Self {
        match command {
            ManageCommand::Ping => Self::Ping,
            ManageCommand::Discover => Self::Discover,
        }
    }
}

impl From<&render::PingReply> for PingReply {
    fn from(reply: &render::PingReply) -> Self {
        Self {
            primary_nid: reply.primary_nid.to_string(),
            multi_rail: reply.multi_rail,
            nids: reply.nids.clone(),
        }
    }
}

impl TryFrom<&PingReply> for render::PingReply {
    type Error = DataError;

    fn try_from(reply: &PingReply) -> Result<Self, DataError> {
        Ok(Self {
            primary_nid: parse_nid("primary nid", &reply.primary_nid)?,
            multi_rail: reply.multi_rail,
            nids: reply.nids.clone(),
        })
    }
}

impl ManageReply {
    /// The renderer's inputs: replies and failures.
    pub fn to_render(
        &self,
    ) -> Result<(Vec<render::PingReply>, Vec<render::PingFailure>), DataError> {
        let replies =
            self.replies.iter().map(render::PingReply::try_from).collect::<Result<_, _>>()?;
        let failures = self.failures.iter().cloned().map(render::PingFailure::from).collect();
        Ok((replies, failures))
    }
}

impl From<&render::RoutingShow> for RoutingShow {
    fn from(routing: &render::RoutingShow) -> Self {
        Self {
            cpts: routing.cpts.iter().map(|pools| pools.map(BufferPool::from)).collect(),
            enabled: routing.enabled,
        }
    }
}

impl From<&RoutingShow> for render::RoutingShow {
    fn from(routing: &RoutingShow) -> Self {
        Self {
            cpts: routing.cpts.iter().map(|pools| pools.map(render::BufferPool::from)).collect(),
            enabled: routing.enabled,
        }
    }
}

impl From<&render::ExportState> for ExportState {
    fn from(state: &render::ExportState) -> Self {
        Self {
            nets: state.nets.iter().map(NetEntry::from).collect(),
            routes: state.routes.iter().map(RouteEntry::from).collect(),
            peers: state.peers.iter().map(PeerEntry::from).collect(),
            routing: RoutingShow::from(&state.routing),
            global: state.global.into(),
            udsp: state.udsp.iter().cloned().map(UdspEntry::from).collect(),
        }
    }
}

impl TryFrom<&ExportState> for render::ExportState {
    type Error = DataError;

    fn try_from(state: &ExportState) -> Result<Self, DataError> {
        Ok(Self {
            nets: state.nets.iter().map(render::NetEntry::try_from).collect::<Result<_, _>>()?,
            routes: state
                .routes
                .iter()
                .map(render::RouteEntry::try_from)
                .collect::<Result<_, _>>()?,
            peers: state.peers.iter().map(render::PeerEntry::try_from).collect::<Result<_, _>>()?,
            routing: render::RoutingShow::from(&state.routing),
            global: state.global.into(),
            udsp: state.udsp.iter().cloned().map(render::UdspEntry::from).collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn tcp(d: u8) -> Nid {
        Nid::ipv4(Net::TCP, Ipv4Addr::new(10, 0, 0, d))
    }

    fn local_ni() -> render::LocalNiEntry {
        render::LocalNiEntry {
            nid: tcp(1),
            up: true,
            interface: Some("eth0".into()),
            statistics: render::Statistics {
                send_count: 3,
                put_ack: render::Latency {
                    samples: 1,
                    min_nsec: 2,
                    max_nsec: 3,
                    avg_nsec: 4,
                    ..Default::default()
                },
                ..Default::default()
            },
            udsp: render::UdspInfo {
                net_priority: 1,
                nid_priority: 2,
                preferred_gateways: vec![tcp(9)],
                preferred_sources: vec![tcp(8)],
            },
            sent: render::MessageCounts { put: 1, ..Default::default() },
            received: render::MessageCounts { get: 2, ..Default::default() },
            dropped: render::MessageCounts { hello: 3, ..Default::default() },
            health: render::LocalNiHealth { next_ping: 7, ..Default::default() },
            tunables: render::NetTunables {
                peer_timeout: 180,
                peer_credits: 8,
                peer_buffer_credits: 0,
                credits: 256,
            },
            lnd_tunables: Some(render::LndTunablesShow::O2iblnd {
                peercredits_hiw: 4,
                map_on_demand: true,
                concurrent_sends: 8,
                fmr_pool_size: 512,
                fmr_flush_trigger: 384,
                fmr_cache: 1,
                ntx: 512,
                conns_per_peer: 1,
                timeout: 50,
                tos: -1,
            }),
            dev_cpt: -1,
            cpts: vec![0, 1],
        }
    }

    fn export_state() -> render::ExportState {
        render::ExportState {
            nets: vec![render::NetEntry { net: Net::TCP, nis: vec![local_ni()] }],
            routes: vec![render::RouteEntry {
                net: "o2ib".parse().unwrap(),
                gateway: tcp(5),
                hop: -1,
                priority: 0,
                up: true,
                multi_hop: false,
            }],
            peers: vec![render::PeerEntry {
                primary_nid: tcp(5),
                multi_rail: true,
                state: 0x100009,
                nis: vec![render::PeerNiEntry {
                    nid: tcp(5),
                    udsp: render::UdspInfo::default(),
                    state: render::PeerNiState::Down,
                    max_ni_tx_credits: 8,
                    available_tx_credits: -2,
                    min_tx_credits: -3,
                    tx_q_num_of_buf: 1,
                    available_rtr_credits: 0,
                    min_rtr_credits: 0,
                    refcount: 4,
                    statistics: render::Statistics::default(),
                    sent: render::MessageCounts::default(),
                    received: render::MessageCounts::default(),
                    dropped: render::MessageCounts::default(),
                    health: render::PeerNiHealth { next_ping: -1, ..Default::default() },
                }],
            }],
            routing: render::RoutingShow {
                cpts: vec![
                    [render::BufferPool { npages: 1, nbuffers: 2, credits: 3, mincredits: -4 }; 3],
                ],
                enabled: true,
            },
            global: ulnet_config::model::GlobalSettings::default().show(),
            udsp: vec![render::UdspEntry {
                idx: 0,
                src: Some("tcp".into()),
                dst: None,
                rte: None,
                priority: Some(1),
            }],
        }
    }

    #[test]
    fn export_state_round_trips_through_the_mirror_and_json() {
        let state = export_state();
        let mirror = ExportState::from(&state);
        let json = serde_json::to_string(&mirror).unwrap();
        let back: ExportState = serde_json::from_str(&json).unwrap();
        assert_eq!(back, mirror);
        assert_eq!(render::ExportState::try_from(&back).unwrap(), state);
        assert_eq!(render::export(&state, false), {
            let again = render::ExportState::try_from(&back).unwrap();
            render::export(&again, false)
        });
    }

    #[test]
    fn ping_replies_round_trip() {
        let reply = render::PingReply {
            primary_nid: Nid::ANY,
            multi_rail: false,
            nids: vec!["12345-10.0.0.1@tcp".into()],
        };
        let mirror = ManageReply {
            replies: vec![PingReply::from(&reply)],
            failures: vec![PingFailure { target: "10.0.0.2@tcp".into(), errno: -110 }],
        };
        assert_eq!(mirror.replies[0].primary_nid, "<?>");
        let (replies, failures) = mirror.to_render().unwrap();
        assert_eq!(replies, vec![reply]);
        assert_eq!(failures[0].errno, -110);
    }

    #[test]
    fn a_bad_nid_is_a_named_error() {
        let mut peer = PeerEntry::from(&export_state().peers[0]);
        peer.primary_nid = "10.0.0.1@nonet".into();
        assert_eq!(
            render::PeerEntry::try_from(&peer),
            Err(DataError::BadNid { field: "primary nid", text: "10.0.0.1@nonet".into() })
        );
    }

    /// The statistics shapes are the engine's, not mirrors: their JSON is pinned here, so a change
    /// in `ulnet_proto::engine::stats` that would change the wire fails this test.
    #[test]
    fn counter_shapes_keep_their_json() {
        let stats = StatsShow { msgs_alloc: 1, drop_length: 1 << 40, ..StatsShow::default() };
        assert_eq!(
            serde_json::to_string(&stats).unwrap(),
            "{\"msgs_alloc\":1,\"msgs_max\":0,\"rst_alloc\":0,\"errors\":0,\"send_count\":0,\
             \"resend_count\":0,\"response_timeout_count\":0,\"local_interrupt_count\":0,\
             \"local_dropped_count\":0,\"local_aborted_count\":0,\"local_no_route_count\":0,\
             \"local_timeout_count\":0,\"local_error_count\":0,\"remote_dropped_count\":0,\
             \"remote_error_count\":0,\"remote_timeout_count\":0,\"network_timeout_count\":0,\
             \"failed_resends\":0,\"successful_resends\":0,\"recv_count\":0,\"route_count\":0,\
             \"drop_count\":0,\"send_length\":0,\"recv_length\":0,\"route_length\":0,\
             \"drop_length\":1099511627776}"
        );
        let counts = MessageCounts { put: 1, get: 2, reply: 3, ack: 4, hello: 5 };
        assert_eq!(
            serde_json::to_string(&counts).unwrap(),
            "{\"put\":1,\"get\":2,\"reply\":3,\"ack\":4,\"hello\":5}"
        );
        // A daemon from before the percentiles sends summaries without them.
        let old = "{\"samples\":1,\"min_nsec\":2,\"max_nsec\":3,\"avg_nsec\":4}";
        let latency: Latency = serde_json::from_str(old).unwrap();
        assert_eq!(
            latency,
            Latency { samples: 1, min_nsec: 2, max_nsec: 3, avg_nsec: 4, ..Default::default() }
        );
    }

    #[test]
    fn a_bad_net_is_a_named_error() {
        let net = NetEntry { net: "nonet".into(), nis: vec![] };
        assert_eq!(
            render::NetEntry::try_from(&net),
            Err(DataError::BadNet { field: "net type", text: "nonet".into() })
        );
    }
}
