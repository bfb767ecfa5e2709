//! A group's tunables resolved: the engine's (LNet), its NIs' (credits) and the modelled
//! socklnd's (connections, socket buffers, ZC-ACKs, keepalive).

use std::time::Duration;

use ulnet_proto::engine::tunables::RouterTunables;
use ulnet_proto::engine::{NetTunables, Tunables};
use ulnet_proto::socklnd::tunables::{ConnsPerPeer, SocklndTunables};

use super::{ScenarioError, TunableSpec};

/// The largest send buffer Linux autotunes to (`net.ipv4.tcp_wmem`'s maximum, 4 MiB):
/// what a socket gets when socklnd's `tx_buffer_size` is 0.
pub const LINUX_TCP_WMEM_MAX: u64 = 4 << 20;
/// The largest receive buffer Linux autotunes to (`net.ipv4.tcp_rmem`'s maximum, 6 MiB).
pub const LINUX_TCP_RMEM_MAX: u64 = 6 << 20;
/// Most peer credits or NI credits a group may set (the kernel's tunables are 32-bit; this
/// bounds what a scenario can make one node queue).
pub const MAX_CREDITS: u32 = 1 << 16;
/// Largest socket buffer a scenario may set.
pub const MAX_SOCKET_BUFFER: u64 = 1 << 34;

/// The modelled socklnd's settings for one node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SockParams {
    /// `conns_per_peer` as configured (0: from the link speed).
    pub conns_per_peer: ConnsPerPeer,
    /// Send buffer bytes (the TCP window this side can keep in flight).
    pub tx_buffer: u64,
    /// Receive buffer bytes (the TCP window this side advertises).
    pub rx_buffer: u64,
    pub zc_min_payload: u32,
    pub min_bulk: u32,
    pub sock_timeout: Duration,
    pub keepalive: Option<Duration>,
}

/// Everything a group's nodes are built with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeTunables {
    pub engine: Tunables,
    pub net: NetTunables,
    pub sock: SockParams,
    /// Router buffers asked for: tiny, small, large (0: the kernel's default).
    pub router_buffers: [u32; 3],
}

impl TunableSpec {
    /// Resolves every key over Lustre's defaults and checks the ranges.
    pub fn resolve(&self, group: &str) -> Result<NodeTunables, ScenarioError> {
        let bad = |reason: String| ScenarioError::Invalid(format!("group {group:?}: {reason}"));
        let defaults = Tunables::default();
        let engine = Tunables {
            transaction_timeout: self
                .transaction_timeout
                .map_or(defaults.transaction_timeout, |span| span.0),
            retry_count: self.retry_count.unwrap_or(defaults.retry_count),
            health_sensitivity: self.health_sensitivity.unwrap_or(defaults.health_sensitivity),
            discovery: self.discovery.unwrap_or(defaults.discovery),
            blackhole_timeout: self
                .blackhole_timeout
                .map_or(defaults.blackhole_timeout, |span| span.0),
            router: RouterTunables {
                alive_router_check_interval: self
                    .alive_router_check_interval
                    .map_or(defaults.router.alive_router_check_interval, |span| span.0),
                router_ping_timeout: self
                    .router_ping_timeout
                    .map_or(defaults.router.router_ping_timeout, |span| span.0),
                check_routers_before_use: self
                    .check_routers_before_use
                    .unwrap_or(defaults.router.check_routers_before_use),
                avoid_asym_router_failure: self
                    .avoid_asym_router_failure
                    .unwrap_or(defaults.router.avoid_asym_router_failure),
                drop_asym_route: self.drop_asym_route.unwrap_or(defaults.router.drop_asym_route),
            },
            ..defaults
        };
        engine.validate().map_err(|error| bad(error.to_string()))?;
        let mut net = NetTunables::SOCKLND;
        net.peer_credits = self.peer_credits.unwrap_or(net.peer_credits);
        net.credits = self.credits.unwrap_or(net.credits);
        for (name, value) in [("peer_credits", net.peer_credits), ("credits", net.credits)] {
            if value == 0 || value > MAX_CREDITS {
                return Err(bad(format!("{name} {value} is not in 1..={MAX_CREDITS}")));
            }
        }
        net.peer_buffer_credits = self.peer_buffer_credits.unwrap_or(net.peer_buffer_credits);
        if net.peer_buffer_credits > MAX_CREDITS {
            return Err(bad(format!(
                "peer_buffer_credits {} is not in 0..={MAX_CREDITS}",
                net.peer_buffer_credits
            )));
        }
        net.peer_timeout = self.peer_timeout.unwrap_or(net.peer_timeout);
        let router_buffers =
            [self.tiny_buffers, self.small_buffers, self.large_buffers].map(|n| n.unwrap_or(0));
        if let Some(count) = router_buffers.iter().find(|n| **n > super::MAX_ROUTER_BUFFERS) {
            return Err(bad(format!(
                "{count} router buffers of one size, more than {}",
                super::MAX_ROUTER_BUFFERS
            )));
        }
        let sock_defaults = SocklndTunables::default();
        let conns_per_peer = ConnsPerPeer::new(self.conns_per_peer.unwrap_or(0))
            .map_err(|error| bad(error.to_string()))?;
        let buffer = |value: Option<super::units::Size>, system: u64| match value {
            None => Ok(system),
            Some(size) if size.0 == 0 => Ok(system),
            Some(size) if size.0 > MAX_SOCKET_BUFFER => {
                Err(bad(format!("socket buffer {} exceeds {MAX_SOCKET_BUFFER}", size.0)))
            }
            Some(size) => Ok(size.0),
        };
        let small = |value: Option<super::units::Size>, default: u32, name: &str| match value {
            None => Ok(default),
            Some(size) => u32::try_from(size.0).map_err(|_| bad(format!("{name} too large"))),
        };
        let sock = SockParams {
            conns_per_peer,
            tx_buffer: buffer(self.tx_buffer_size, LINUX_TCP_WMEM_MAX)?,
            rx_buffer: buffer(self.rx_buffer_size, LINUX_TCP_RMEM_MAX)?,
            zc_min_payload: small(
                self.zc_min_payload,
                sock_defaults.zc_min_payload,
                "zc_min_payload",
            )?
            .max(ulnet_proto::socklnd::tunables::MIN_ZC_MIN_PAYLOAD),
            min_bulk: small(self.min_bulk, sock_defaults.min_bulk, "min_bulk")?,
            sock_timeout: self.sock_timeout.map_or(sock_defaults.sock_timeout, |span| span.0),
            keepalive: match self.keepalive {
                None => sock_defaults.keepalive,
                Some(span) if span.0.is_zero() => None,
                Some(span) => Some(span.0),
            },
        };
        if sock.sock_timeout.is_zero() {
            return Err(bad("sock_timeout must be positive".to_owned()));
        }
        Ok(NodeTunables { engine, net, sock, router_buffers })
    }
}

/// socklnd's defaults with Linux's socket buffers, for a node whose group is unknown (never
/// in practice: every node has a group).
pub const FALLBACK_SOCK: SockParams = SockParams {
    conns_per_peer: ConnsPerPeer::Auto,
    tx_buffer: LINUX_TCP_WMEM_MAX,
    rx_buffer: LINUX_TCP_RMEM_MAX,
    zc_min_payload: 16 << 10,
    min_bulk: 1024,
    sock_timeout: Duration::from_secs(50),
    keepalive: Some(Duration::from_secs(30)),
};
