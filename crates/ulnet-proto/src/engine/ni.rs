//! Local nets and network interfaces.
//!
//! lustre: include/linux/lnet/lib-types.h (`struct lnet_net`, `struct lnet_ni`),
//! lnet/lnet/api-ni.c (`lnet_startup_lndni`, `lnet_ni_tq_credits`), lo.c (the loopback LND).

use std::time::Duration;

use crate::addr::Nid;
use crate::engine::credits::CreditPool;
use crate::engine::health::Health;
use crate::engine::stats::{ElementStats, NiHealthStats};
use crate::engine::tunables::NetTunables;

/// Index of a local NI in its node. NI 0 is always the loopback NI `0@lo`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NiId(pub u16);

impl NiId {
    pub const LOOPBACK: Self = Self(0);
}

/// Which LND drives an NI.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LndKind {
    /// The in-core loopback LND (`0@lo` and sends to our own NIDs). No credits.
    Lo,
    /// The emulated fabric of the test harness and simulator.
    Fabric,
    /// The socklnd-compatible TCP driver.
    Tcp,
}

/// Configuration of one network-facing NI.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NiConfig {
    pub nid: Nid,
    pub lnd: LndKind,
    pub tunables: NetTunables,
    /// The LND's own timeout (socklnd `sock_timeout`); `None` to use LNet's derived
    /// `lnet_lnd_timeout`. Drives the per-transmission deadline (semantics.md §4.4).
    pub lnd_timeout: Option<Duration>,
}

impl NiConfig {
    pub fn new(nid: Nid, lnd: LndKind) -> Self {
        Self { nid, lnd, tunables: NetTunables::default(), lnd_timeout: None }
    }
}

#[derive(Debug)]
pub(crate) struct Ni {
    pub(crate) nid: Nid,
    pub(crate) lnd: LndKind,
    pub(crate) tunables: NetTunables,
    pub(crate) lnd_timeout: Option<Duration>,
    /// NI tx credits (one CPT); `None` for loopback.
    pub(crate) credits: Option<CreditPool>,
    pub(crate) health: Health,
    pub(crate) stats: ElementStats,
    pub(crate) health_stats: NiHealthStats,
    pub(crate) fatal_error: bool,
    /// Removed by [`Node::remove_ni`](crate::engine::Node::remove_ni): kept so `NiId`s stay
    /// stable, but no longer selected, advertised or accepted on.
    pub(crate) removed: bool,
}

impl Ni {
    pub(crate) fn loopback() -> Self {
        Self {
            nid: Nid::LO_0,
            lnd: LndKind::Lo,
            tunables: NetTunables::LO,
            lnd_timeout: None,
            credits: None,
            health: Health::FULL,
            stats: ElementStats::default(),
            health_stats: NiHealthStats::default(),
            fatal_error: false,
            removed: false,
        }
    }

    pub(crate) fn from_config(config: &NiConfig) -> Self {
        Self {
            nid: config.nid,
            lnd: config.lnd,
            tunables: config.tunables,
            lnd_timeout: config.lnd_timeout,
            credits: Some(CreditPool::new(config.tunables.credits)),
            health: Health::FULL,
            stats: ElementStats::default(),
            health_stats: NiHealthStats::default(),
            fatal_error: false,
            removed: false,
        }
    }
}
