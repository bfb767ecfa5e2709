//! socklnd tunables: one plain struct with Lustre's defaults, plus the acceptor's settings that
//! live in lnet.ko but only matter to the TCP LND.
//!
//! lustre: lnet/klnds/socklnd/socklnd_modparams.c (module parameters and defaults,
//! `ksocklnd_speed2cpp()`, `ksocklnd_lookup_conns_per_peer()`), socklnd.h
//! (`SOCKNAL_TIMEOUT_DEFAULT`, `SOCKNAL_MAX_RETRIES`), lnet/lnet/acceptor.c (`accept`,
//! `accept_port`, `accept_timeout`, `accept_backlog`).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// Default acceptor port. lustre: acceptor.c `accept_port`.
pub const DEFAULT_ACCEPT_PORT: u16 = 988;
/// The highest privileged source port; a connection from above it is "insecure".
/// lustre: include/linux/lnet/lib-lnet.h `LNET_ACCEPTOR_MAX_RESERVED_PORT`.
pub const MAX_RESERVED_PORT: u16 = 1023;
/// The lowest port a connector tries to bind. lustre: `LNET_ACCEPTOR_MIN_RESERVED_PORT`.
pub const MIN_RESERVED_PORT: u16 = 512;
/// Largest explicit `conns_per_peer` lnetctl accepts (the module parameter caps at 255 because
/// the per-type counters are 8 bits wide). lustre: lnet/utils/lnetconfig `conns_per_peer`.
pub const MAX_CONNS_PER_PEER: u8 = 127;
/// How many EALREADY/EPROTO retries a connector makes before it settles for the connections it
/// has. lustre: socklnd.h `SOCKNAL_MAX_RETRIES`.
pub const SOCKNAL_MAX_RETRIES: u8 = 3;
/// The floor the kernel applies to `zc_min_payload`. lustre: socklnd_modparams.c
/// `ksocknal_tunables_init()`.
pub const MIN_ZC_MIN_PAYLOAD: u32 = 2 << 10;
/// Delay before retrying a keepalive that could not be queued.
/// lustre: socklnd_cb.c `ksocknal_send_keepalive_locked()` (`+ 10`).
pub const KEEPALIVE_RETRY: Duration = Duration::from_secs(10);

/// The acceptor's policy for incoming connections (`accept=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum AcceptPolicy {
    /// Refuse peers whose source port is above 1023 before reading anything.
    #[default]
    Secure,
    /// Accept any source port; an unprivileged one makes the peer a "userspace" process.
    All,
    /// No acceptor at all.
    None,
}

/// `accept=` text that is not one of the three policies.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown accept policy {0:?}: expected secure, all or none")]
pub struct AcceptPolicyParseError(pub String);

impl FromStr for AcceptPolicy {
    type Err = AcceptPolicyParseError;

    /// lustre: acceptor.c `accept2secure()`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "secure" => Ok(Self::Secure),
            "all" => Ok(Self::All),
            "none" => Ok(Self::None),
            other => Err(AcceptPolicyParseError(other.to_owned())),
        }
    }
}

impl fmt::Display for AcceptPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Secure => "secure",
            Self::All => "all",
            Self::None => "none",
        })
    }
}

/// `conns_per_peer`: connections of each bulk type a node opens to a peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum ConnsPerPeer {
    /// 0: derived from the interface's link speed.
    #[default]
    Auto,
    /// 1 to [`MAX_CONNS_PER_PEER`].
    Fixed(u8),
}

/// A `conns_per_peer` value outside 0..=127.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("conns_per_peer {0} out of range 0..={MAX_CONNS_PER_PEER}")]
pub struct ConnsPerPeerError(pub u32);

impl ConnsPerPeer {
    /// From the configured number: 0 is auto.
    pub fn new(value: u32) -> Result<Self, ConnsPerPeerError> {
        match u8::try_from(value) {
            Ok(0) => Ok(Self::Auto),
            Ok(n) if n <= MAX_CONNS_PER_PEER => Ok(Self::Fixed(n)),
            _ => Err(ConnsPerPeerError(value)),
        }
    }

    /// The configured number (0 for auto).
    pub fn value(self) -> u8 {
        match self {
            Self::Auto => 0,
            Self::Fixed(n) => n,
        }
    }

    /// The number in force for an interface of `link_speed_mbps` (`None` or 0 when unknown).
    pub fn resolve(self, link_speed_mbps: Option<u32>) -> u8 {
        match self {
            Self::Fixed(n) => n.max(1),
            Self::Auto => auto_conns_per_peer(link_speed_mbps),
        }
    }
}

/// The kernel's heuristic: floor(log2(speed / 1000)) / 2 + 1 with speed in Mbps floored at
/// 1000; an unknown speed gives 1. 1 Gb → 1, 10 Gb → 2, 25 Gb → 3, 100/200 Gb → 4, 400 Gb → 5.
/// lustre: socklnd_modparams.c `ksocklnd_speed2cpp()`, `ksocklnd_lookup_conns_per_peer()`.
pub fn auto_conns_per_peer(link_speed_mbps: Option<u32>) -> u8 {
    let Some(speed) = link_speed_mbps.filter(|&s| s > 0) else {
        return 1;
    };
    let gigabits = speed.max(1000) / 1000;
    // ilog2 of a u32 is at most 31, so the result is at most 16.
    (gigabits.ilog2() / 2 + 1) as u8
}

/// The socklnd tunables, defaulting to Lustre's values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SocklndTunables {
    /// `sock_timeout` (50 s): the active hello read, stuck receives and sends, stale ZC requests.
    pub sock_timeout: Duration,
    /// `keepalive` (30 s): peer silence after which a V3/V4 keepalive NOOP is sent; `None`
    /// disables (the kernel's ≤ 0).
    pub keepalive: Option<Duration>,
    /// `keepalive_idle` (30 s): TCP_KEEPIDLE.
    pub keepalive_idle: Duration,
    /// `keepalive_intvl` (5 s): TCP_KEEPINTVL.
    pub keepalive_interval: Duration,
    /// `keepalive_count` (5): TCP_KEEPCNT.
    pub keepalive_count: u32,
    /// `nagle` (off): when off, TCP_NODELAY is set.
    pub nagle: bool,
    /// `typed_conns` (on): separate CONTROL, BULK_IN and BULK_OUT connections. Off dials one
    /// ANY connection per peer, which carries every message (unlike the kernel's V3/V4
    /// protocols, which never send on ANY; see `peer_conns`).
    pub typed_conns: bool,
    /// `min_bulk` (1024): messages of at least this many bytes on the wire prefer bulk
    /// connections.
    pub min_bulk: u32,
    /// `zc_min_payload` (16 KiB): payload size from which the kernel requests zero-copy ACKs.
    /// ulnet never requests them (see [`super::conn`]); kept for configuration round trips.
    pub zc_min_payload: u32,
    /// `conns_per_peer` (0 = auto).
    pub conns_per_peer: ConnsPerPeer,
    /// `min_reconnectms` (1 s): first reconnect delay.
    pub min_reconnect: Duration,
    /// `max_reconnectms` (60 s): the reconnect delay doubles up to this.
    pub max_reconnect: Duration,
    /// `tx_buffer_size` (0 = system default): SO_SNDBUF.
    pub tx_buffer_size: u32,
    /// `rx_buffer_size` (0 = system default): SO_RCVBUF.
    pub rx_buffer_size: u32,
    /// `tos` (-1 = not set): IP type of service.
    pub tos: Option<u8>,
    /// `round_robin` (on): break ties between equally loaded connections by least recent use.
    pub round_robin: bool,
    /// `nonblk_zcack` (on): ZC-ACKs are non-blocking NOOPs.
    pub nonblocking_zc_ack: bool,
    /// `accept` (secure).
    pub accept: AcceptPolicy,
    /// `accept_port` (988).
    pub accept_port: u16,
    /// `accept_port_bulk` (lnet, 2.16.58 and later): the port non-CONTROL connections are
    /// dialled on and a second acceptor listens on. `None`: `accept_port`, as before 2.16.58
    /// (the kernel's default, 988, would put bulk connections on a privileged port whatever
    /// `accept_port` says; ulnet runs without root).
    pub accept_port_bulk: Option<u16>,
    /// `accept_timeout` (5 s): the kernel's bound on each connreq read and on the passive
    /// side's hello read; ulnet's acceptor also bounds the whole passive handshake by it
    /// (decision 0017).
    pub accept_timeout: Duration,
    /// `accept_backlog` (127): listen() backlog.
    pub accept_backlog: u32,
}

impl SocklndTunables {
    /// The port bulk connections (BULK_IN, BULK_OUT, ANY) go to.
    /// lustre: acceptor.c `lnet_acceptor_bulk_port()`.
    pub fn bulk_port(&self) -> u16 {
        self.accept_port_bulk.unwrap_or(self.accept_port)
    }
}

impl Default for SocklndTunables {
    fn default() -> Self {
        Self {
            sock_timeout: Duration::from_secs(50),
            keepalive: Some(Duration::from_secs(30)),
            keepalive_idle: Duration::from_secs(30),
            keepalive_interval: Duration::from_secs(5),
            keepalive_count: 5,
            nagle: false,
            typed_conns: true,
            min_bulk: 1024,
            zc_min_payload: 16 << 10,
            conns_per_peer: ConnsPerPeer::Auto,
            min_reconnect: Duration::from_millis(1000),
            max_reconnect: Duration::from_millis(60_000),
            tx_buffer_size: 0,
            rx_buffer_size: 0,
            tos: None,
            round_robin: true,
            nonblocking_zc_ack: true,
            accept: AcceptPolicy::Secure,
            accept_port: DEFAULT_ACCEPT_PORT,
            accept_port_bulk: None,
            accept_timeout: Duration::from_secs(5),
            accept_backlog: 127,
        }
    }
}

impl SocklndTunables {
    /// `zc_min_payload` with the kernel's 2 KiB floor applied.
    pub fn effective_zc_min_payload(&self) -> u32 {
        self.zc_min_payload.max(MIN_ZC_MIN_PAYLOAD)
    }

    /// The reconnect bounds ordered, so a misconfigured pair still gives a usable range.
    pub fn reconnect_bounds(&self) -> (Duration, Duration) {
        let min = self.min_reconnect.max(Duration::from_millis(1));
        (min, self.max_reconnect.max(min))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_lustres() {
        let t = SocklndTunables::default();
        assert_eq!(t.sock_timeout, Duration::from_secs(50));
        assert_eq!(t.keepalive, Some(Duration::from_secs(30)));
        assert_eq!(
            (t.keepalive_idle, t.keepalive_interval, t.keepalive_count),
            (Duration::from_secs(30), Duration::from_secs(5), 5)
        );
        assert!(!t.nagle);
        assert!(t.typed_conns);
        assert_eq!((t.min_bulk, t.zc_min_payload), (1024, 16384));
        assert_eq!(t.conns_per_peer, ConnsPerPeer::Auto);
        assert_eq!(t.reconnect_bounds(), (Duration::from_secs(1), Duration::from_secs(60)));
        assert_eq!((t.tx_buffer_size, t.rx_buffer_size, t.tos), (0, 0, None));
        assert_eq!(t.accept, AcceptPolicy::Secure);
        assert_eq!((t.accept_port, t.accept_backlog), (988, 127));
        assert_eq!(t.accept_timeout, Duration::from_secs(5));
    }

    #[test]
    fn auto_conns_per_peer_follows_link_speed() {
        let cases = [
            (None, 1),
            (Some(0), 1),
            (Some(100), 1),
            (Some(1_000), 1),
            (Some(10_000), 2),
            (Some(25_000), 3),
            (Some(40_000), 3),
            (Some(100_000), 4),
            (Some(200_000), 4),
            (Some(400_000), 5),
        ];
        for (speed, expected) in cases {
            assert_eq!(auto_conns_per_peer(speed), expected, "speed {speed:?}");
            assert_eq!(ConnsPerPeer::Auto.resolve(speed), expected);
        }
        assert_eq!(ConnsPerPeer::Fixed(7).resolve(Some(100_000)), 7);
    }

    #[test]
    fn conns_per_peer_range() {
        assert_eq!(ConnsPerPeer::new(0), Ok(ConnsPerPeer::Auto));
        assert_eq!(ConnsPerPeer::new(1), Ok(ConnsPerPeer::Fixed(1)));
        assert_eq!(ConnsPerPeer::new(127), Ok(ConnsPerPeer::Fixed(127)));
        assert_eq!(ConnsPerPeer::new(128), Err(ConnsPerPeerError(128)));
        assert_eq!(ConnsPerPeer::new(70_000), Err(ConnsPerPeerError(70_000)));
        assert_eq!(ConnsPerPeer::Fixed(9).value(), 9);
    }

    #[test]
    fn accept_policy_text() {
        for policy in [AcceptPolicy::Secure, AcceptPolicy::All, AcceptPolicy::None] {
            assert_eq!(policy.to_string().parse(), Ok(policy));
        }
        assert_eq!(
            "Secure".parse::<AcceptPolicy>(),
            Err(AcceptPolicyParseError("Secure".to_owned()))
        );
    }

    #[test]
    fn zc_min_payload_floor_and_reconnect_order() {
        let t = SocklndTunables {
            zc_min_payload: 100,
            min_reconnect: Duration::from_secs(5),
            max_reconnect: Duration::from_secs(2),
            ..SocklndTunables::default()
        };
        assert_eq!(t.effective_zc_min_payload(), 2048);
        assert_eq!(t.reconnect_bounds(), (Duration::from_secs(5), Duration::from_secs(5)));
    }
}
