//! LNet's global tunables and per-net tunables, with Lustre's defaults.
//!
//! lustre: lnet/lnet/api-ni.c (module parameters and their setters), lib-move.c
//! (`lnet_get_lnd_timeout`), docs/protocol/semantics.md §10.1.

use std::time::Duration;

/// `lnet_response_tracking`: which initiator operations get a response tracker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum ResponseTracking {
    /// 0: only LNet's own pings and pushes.
    InternalOnly = 0,
    /// 1: GETs.
    Get = 1,
    /// 2: PUTs that ask for an ACK.
    PutWithAck = 2,
    /// 3: both (the default).
    Both = 3,
}

impl ResponseTracking {
    pub fn tracks_get(self) -> bool {
        matches!(self, Self::Get | Self::Both)
    }

    pub fn tracks_put_with_ack(self) -> bool {
        matches!(self, Self::PutWithAck | Self::Both)
    }
}

/// `portal_rotor`: which partition's match table an incoming PUT or GET on a wildcard portal
/// tries first when the node has several partitions (one partition: no choice to make).
/// lustre: include/linux/lnet/lib-types.h (`LNET_PTL_ROTOR_*`), lib-ptl.c `lnet_mt_of_match()`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(u8)]
pub enum PortalRotor {
    /// 0 (`LNET_PTL_ROTOR_OFF`): the receiving partition's table while it has a usable
    /// buffer, else round robin over the tables that have one.
    Off = 0,
    /// 1 (`LNET_PTL_ROTOR_ON`): round robin over every message.
    On = 1,
    /// 2 (`LNET_PTL_ROTOR_RR_RT`): routed messages round robin, others as [`Self::Off`].
    RoutedRoundRobin = 2,
    /// 3 (`LNET_PTL_ROTOR_HASH_RT`, the default): routed messages by the hash of their
    /// initiator's NID on the receiving NI, others as [`Self::Off`].
    #[default]
    RoutedHash = 3,
}

impl PortalRotor {
    /// The module parameter's value (0-3); others have no meaning.
    pub fn from_value(value: i64) -> Option<Self> {
        match value {
            0 => Some(Self::Off),
            1 => Some(Self::On),
            2 => Some(Self::RoutedRoundRobin),
            3 => Some(Self::RoutedHash),
            _ => None,
        }
    }

    /// The module parameter's value.
    pub fn value(self) -> u8 {
        self as u8
    }
}

/// Node-wide tunables (`lnet.ko` module parameters that the engine uses).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tunables {
    /// `lnet_transaction_timeout`: end-to-end response timeout.
    pub transaction_timeout: Duration,
    /// `lnet_retry_count`: most resends of one message.
    pub retry_count: u32,
    /// `lnet_response_tracking`.
    pub response_tracking: ResponseTracking,
    /// `lnet_health_sensitivity`: health step down on failure and up on success; 0 disables
    /// health (and resends).
    pub health_sensitivity: u32,
    /// Dynamic discovery (`lnet_peer_discovery_disabled` inverted, lnetctl's `discovery`):
    /// advertise `DISCOVERY`, promote peers to multi-rail, push our buffer. Off, first contact
    /// still pings once (docs/protocol/semantics.md §6.7).
    pub discovery: bool,
    /// `lnet_numa_range`: NUMA distances below it count as equal in NI selection.
    pub numa_range: u32,
    /// `lnet_recovery_limit`: how long after a peer NI was last heard from it is still
    /// recovered (pinged); zero means forever.
    pub recovery_limit: Duration,
    /// `lnet_max_recovery_ping_interval`: the cap on the recovery ping backoff (1, 2, 4, ...
    /// seconds); must be positive.
    pub max_recovery_ping_interval: Duration,
    /// Fast failover (not in Lustre; docs/decisions/0008-fast-failover.md): a peer NI with
    /// work outstanding that shows no progress (no send completion, no message received) for
    /// this long, or for a multiple of its measured round trip if longer, is suspected of
    /// black-holing traffic: its health drops, it is probed at once, and its messages move to
    /// other paths. Zero restores the kernel's behaviour exactly (failures are noticed only
    /// through the LND's and the transaction timeouts).
    pub blackhole_timeout: Duration,
    /// The router tunables (`router.c` module parameters).
    pub router: RouterTunables,
    /// `portal_rotor` (lib-ptl.c): how wildcard portals spread incoming messages over the
    /// partitions' match tables.
    pub portal_rotor: PortalRotor,
}

/// The routing module parameters the engine uses (lustre: lnet/lnet/router.c).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RouterTunables {
    /// `alive_router_check_interval` (60 s): how often each gateway is pinged on each of its
    /// local nets; zero turns the router checker off (gateways are then discovered when a
    /// message first uses them).
    pub alive_router_check_interval: Duration,
    /// `router_ping_timeout` (50 s): with the check interval, how long a router's net may go
    /// without an incoming ping before its NIs are reported DOWN, and the delay before
    /// `set routing` takes effect.
    pub router_ping_timeout: Duration,
    /// `check_routers_before_use` (off): gateways start dead and routes unusable until the
    /// gateway answers a ping.
    pub check_routers_before_use: bool,
    /// `avoid_asym_router_failure` (on): a single-hop route is alive only while its gateway
    /// has an NI UP on the remote net.
    pub avoid_asym_router_failure: bool,
    /// `lnet_drop_asym_route` (off): drop messages for this node that came through a gateway
    /// we would not use to reach their source's net.
    pub drop_asym_route: bool,
}

impl Default for RouterTunables {
    fn default() -> Self {
        Self {
            alive_router_check_interval: Duration::from_secs(60),
            router_ping_timeout: Duration::from_secs(50),
            check_routers_before_use: false,
            avoid_asym_router_failure: true,
            drop_asym_route: false,
        }
    }
}

impl RouterTunables {
    /// The delay before `set routing 1|0` takes effect (`alive_router_check_interval +
    /// router_ping_timeout`, 110 s by default).
    pub fn routing_transition(&self) -> Duration {
        self.alive_router_check_interval + self.router_ping_timeout
    }
}

impl Default for Tunables {
    fn default() -> Self {
        Self {
            transaction_timeout: Duration::from_secs(150),
            retry_count: 2,
            response_tracking: ResponseTracking::Both,
            health_sensitivity: 100,
            discovery: true,
            numa_range: 0,
            recovery_limit: Duration::ZERO,
            max_recovery_ping_interval: Duration::from_secs(900),
            blackhole_timeout: DEFAULT_BLACKHOLE_TIMEOUT,
            router: RouterTunables::default(),
            portal_rotor: PortalRotor::default(),
        }
    }
}

/// The default [`Tunables::blackhole_timeout`]: long enough that a loaded but healthy link
/// (a few megabytes of socket buffers per connection, a lazy portal waiting for a buffer)
/// rarely looks dead, short enough that a black hole is left within the 5 s the seeds ask.
pub const DEFAULT_BLACKHOLE_TIMEOUT: Duration = Duration::from_secs(2);

impl Tunables {
    /// `lnet_lnd_timeout = max((transaction_timeout - 1) / (retry_count + 1), 1)`, whole
    /// seconds as Lustre computes it (49 s by default).
    /// lustre: lnet/lnet/api-ni.c `lnet_set_lnd_timeout()`.
    pub fn lnd_timeout(&self) -> Duration {
        let seconds = self.transaction_timeout.as_secs().saturating_sub(1)
            / (u64::from(self.effective_retry_count()) + 1);
        Duration::from_secs(seconds.max(1))
    }

    /// The retry count in force: 0 when health is disabled, which forces it
    /// (lustre: api-ni.c `sensitivity_set()`).
    pub fn effective_retry_count(&self) -> u32 {
        if self.health_sensitivity == 0 { 0 } else { self.retry_count }
    }

    /// Lustre's constraints (api-ni.c `transaction_to_set()`, `retry_count_set()`): the timeout
    /// must exceed the retry count and sensitivity must be at most the maximum health.
    pub fn validate(&self) -> Result<(), TunablesError> {
        if self.transaction_timeout.as_secs() <= u64::from(self.retry_count) {
            return Err(TunablesError::TimeoutNotAboveRetryCount);
        }
        if self.health_sensitivity > super::health::MAX_HEALTH {
            return Err(TunablesError::SensitivityTooLarge(self.health_sensitivity));
        }
        // lustre: api-ni.c max_recovery_ping_interval_set(): "must be strictly positive".
        if self.max_recovery_ping_interval.as_secs() == 0 {
            return Err(TunablesError::ZeroRecoveryPingInterval);
        }
        Ok(())
    }

    /// The recovery ping interval after `ping_count` pings: 1, 2, 4, ... seconds, then the
    /// maximum once the count exceeds log2 of it.
    /// lustre: include/linux/lnet/lib-lnet.h `lnet_get_next_recovery_ping()`, api-ni.c
    /// `max_recovery_ping_interval_set()` (`lnet_max_recovery_ping_count`).
    pub fn recovery_ping_interval(&self, ping_count: u32) -> Duration {
        let max = self.max_recovery_ping_interval.as_secs().max(1);
        let max_count = 63 - max.leading_zeros();
        if ping_count > max_count {
            Duration::from_secs(max)
        } else {
            Duration::from_secs(1u64 << ping_count)
        }
    }
}

/// Why a [`Tunables`] value is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TunablesError {
    #[error("transaction_timeout must be greater than retry_count")]
    TimeoutNotAboveRetryCount,
    #[error("health_sensitivity {0} exceeds the maximum health 1000")]
    SensitivityTooLarge(u32),
    #[error("max_recovery_ping_interval must be at least one second")]
    ZeroRecoveryPingInterval,
}

/// Per-net tunables (`struct lnet_ioctl_config_lnd_cmn_tunables`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NetTunables {
    /// `credits` (`lct_max_tx_credits`): NI tx credits.
    pub credits: u32,
    /// `peer_credits` (`lct_peer_tx_credits`): per peer NI tx credits.
    pub peer_credits: u32,
    /// `peer_buffer_credits`: router credits (unused until routing).
    pub peer_buffer_credits: u32,
    /// `peer_timeout` in seconds (router peer aliveness; unused until routing).
    pub peer_timeout: u32,
}

impl NetTunables {
    /// socklnd's defaults (docs/protocol/semantics.md §10.2): credits 256, peer_credits 8, peer_timeout 180.
    pub const SOCKLND: Self =
        Self { credits: 256, peer_credits: 8, peer_buffer_credits: 0, peer_timeout: 180 };
    /// The loopback net reports all zeros and bypasses credits.
    pub const LO: Self =
        Self { credits: 0, peer_credits: 0, peer_buffer_credits: 0, peer_timeout: 0 };
}

impl Default for NetTunables {
    fn default() -> Self {
        Self::SOCKLND
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_lustre() {
        let tunables = Tunables::default();
        assert_eq!(tunables.transaction_timeout, Duration::from_secs(150));
        assert_eq!(tunables.retry_count, 2);
        assert_eq!(tunables.response_tracking, ResponseTracking::Both);
        assert_eq!(tunables.health_sensitivity, 100);
        assert!(tunables.discovery);
        assert_eq!(tunables.lnd_timeout(), Duration::from_secs(49));
        assert_eq!(tunables.validate(), Ok(()));
        assert_eq!(
            (tunables.numa_range, tunables.recovery_limit, tunables.max_recovery_ping_interval),
            (0, Duration::ZERO, Duration::from_secs(900))
        );
    }

    #[test]
    fn lnd_timeout_floors_at_one_second() {
        let tunables = Tunables {
            transaction_timeout: Duration::from_secs(3),
            retry_count: 2,
            ..Tunables::default()
        };
        assert_eq!(tunables.lnd_timeout(), Duration::from_secs(1));
    }

    #[test]
    fn bad_tunables_are_refused() {
        let slow = Tunables { transaction_timeout: Duration::from_secs(2), ..Tunables::default() };
        assert_eq!(slow.validate(), Err(TunablesError::TimeoutNotAboveRetryCount));
        let sensitive = Tunables { health_sensitivity: 1001, ..Tunables::default() };
        assert_eq!(sensitive.validate(), Err(TunablesError::SensitivityTooLarge(1001)));
        let zero = Tunables { max_recovery_ping_interval: Duration::ZERO, ..Tunables::default() };
        assert_eq!(zero.validate(), Err(TunablesError::ZeroRecoveryPingInterval));
    }

    #[test]
    fn recovery_pings_back_off_to_the_maximum() {
        let tunables = Tunables::default();
        let intervals: Vec<u64> =
            (0..12).map(|count| tunables.recovery_ping_interval(count).as_secs()).collect();
        // 900 s: lnet_max_recovery_ping_count = 9, so 2^9 = 512 is the last power used.
        assert_eq!(intervals, [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 900, 900]);
        let short = Tunables { max_recovery_ping_interval: Duration::from_secs(5), ..tunables };
        let intervals: Vec<u64> =
            (0..5).map(|count| short.recovery_ping_interval(count).as_secs()).collect();
        assert_eq!(intervals, [1, 2, 4, 5, 5]);
    }

    #[test]
    fn zero_sensitivity_forces_no_retries() {
        let tunables = Tunables { health_sensitivity: 0, ..Tunables::default() };
        assert_eq!(tunables.effective_retry_count(), 0);
        assert_eq!(tunables.lnd_timeout(), Duration::from_secs(149));
    }
}
