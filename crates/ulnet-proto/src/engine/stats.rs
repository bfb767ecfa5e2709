//! Statistics as plain structs, named after the keys `lnetctl stats show`, `net show -v` and
//! `peer show -v` print (docs/protocol/cli.md §3.1, §3.2, §3.8).
//!
//! Each shape is declared here once: the engine's counters (64 bits, plus counters of its own)
//! and, beside them, the shapes a kernel node shows them in ([`StatsShow`], [`MessageCounts`],
//! [`Statistics`], [`Latency`], [`LocalNiHealth`], [`PeerNiHealth`]: the kernel's widths, the
//! 32-bit counters wrapped) with the conversions. ulnet-config's renderer prints the shown
//! shapes and ulnet-control carries them over the control socket as they are (serde, under
//! this crate's `serde` feature); the `counters!` macro writes the plain-counter pairs from
//! one field list.
//!
//! lustre: include/uapi/linux/lnet/lnet-types.h (`struct lnet_counters_common`,
//! `struct lnet_counters_health`), include/linux/lnet/lib-types.h (`struct lnet_element_stats`),
//! lnet/lnet/lib-msg.c (`lnet_msg_decommit_tx/rx`, `lnet_incr_hstats`).

use std::time::Duration;

use crate::addr::Nid;
use crate::engine::health::{HealthStatus, MAX_HEALTH};
use crate::engine::latency::{LatencyHistogram, LatencyStats};
use crate::engine::ni::LndKind;
use crate::engine::shares::Shares;
use crate::engine::tunables::NetTunables;
use crate::engine::view::{Access, Exclusive};
use crate::wire::header::MsgType;
use crate::wire::selftest::LnetCountersCommon;

/// A counter's value at the width the kernel keeps it in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counter {
    /// A 32-bit counter (`struct lnet_element_stats` atomics, most `lnet_counters_common`
    /// fields): it wraps at 2^32.
    U32(u32),
    /// A 64-bit counter (the `*_length` byte counts).
    U64(u64),
}

/// The widths a shown counter comes in: the engine counts in 64 bits and a kernel node keeps
/// most counters in 32, which wrap; the low 32 bits are what a kernel node would show.
pub trait CounterWidth: Copy {
    /// The value a kernel counter of this width holds after `count` increments.
    fn wrapped(count: u64) -> Self;
    fn counter(self) -> Counter;
}

impl CounterWidth for u32 {
    fn wrapped(count: u64) -> Self {
        // Truncation is the point: the kernel's counters wrap at 2^32.
        (count & u64::from(u32::MAX)) as u32
    }

    fn counter(self) -> Counter {
        Counter::U32(self)
    }
}

impl CounterWidth for u64 {
    fn wrapped(count: u64) -> Self {
        count
    }

    fn counter(self) -> Counter {
        Counter::U64(self)
    }
}

/// Declares a set of counters once: the engine's struct (every counter a `u64`, plus the
/// engine's own counters lnetctl does not show), the shown struct (the kernel's widths, with
/// `serde` under the `serde` feature, which is what crosses the control socket and what the
/// renderer prints), the conversion between them and the shown struct's `fields()` in order.
macro_rules! counters {
    (
        $(#[$engine_meta:meta])*
        pub struct $engine:ident;
        $(#[$shown_meta:meta])*
        pub struct $shown:ident {
            $( $(#[$field_meta:meta])* pub $field:ident : $width:ty, )*
        }
        $( engine only { $( $(#[$own_meta:meta])* pub $own:ident, )* } )?
    ) => {
        $(#[$engine_meta])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct $engine {
            $( $(#[$field_meta])* pub $field: u64, )*
            $( $( $(#[$own_meta])* pub $own: u64, )* )?
        }

        $(#[$shown_meta])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        #[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
        pub struct $shown {
            $( $(#[$field_meta])* pub $field: $width, )*
        }

        impl $shown {
            /// The counters' keys and values, in the order lnetctl prints them.
            pub fn fields(&self) -> impl Iterator<Item = (&'static str, Counter)> + use<> {
                [$( (stringify!($field), CounterWidth::counter(self.$field)) ),*].into_iter()
            }
        }

        impl $engine {
            /// Adds `other`'s counters to these (wrapping, as the kernel's do).
            #[allow(dead_code, reason = "not every set of counters is kept per partition")]
            pub(crate) fn accumulate(&mut self, other: &Self) {
                $( self.$field = self.$field.wrapping_add(other.$field); )*
                $( $( self.$own = self.$own.wrapping_add(other.$own); )* )?
            }
        }

        impl From<&$engine> for $shown {
            fn from(counts: &$engine) -> Self {
                Self { $( $field: CounterWidth::wrapped(counts.$field), )* }
            }
        }
    };
}

counters! {
    /// Counts per message type: the `put`, `get`, `reply`, `ack`, `hello` keys of
    /// `sent_stats` / `received_stats` / `dropped_stats`.
    pub struct MsgTypeCounts;
    /// [`MsgTypeCounts`] as a kernel node shows them (32-bit counters).
    pub struct MessageCounts {
        pub put: u32,
        pub get: u32,
        pub reply: u32,
        pub ack: u32,
        pub hello: u32,
    }
}

impl MsgTypeCounts {
    pub(crate) fn add(&mut self, msg_type: MsgType, amount: u64) {
        let slot = match msg_type {
            MsgType::Put => &mut self.put,
            MsgType::Get => &mut self.get,
            MsgType::Reply => &mut self.reply,
            MsgType::Ack => &mut self.ack,
            MsgType::Hello => &mut self.hello,
        };
        *slot = slot.saturating_add(amount);
    }

    pub fn total(&self) -> u64 {
        self.put + self.get + self.reply + self.ack + self.hello
    }

    fn absorb(&mut self, other: &Self) {
        for (slot, amount) in [
            (&mut self.put, other.put),
            (&mut self.get, other.get),
            (&mut self.reply, other.reply),
            (&mut self.ack, other.ack),
            (&mut self.hello, other.hello),
        ] {
            *slot = slot.saturating_add(amount);
        }
    }
}

/// `struct lnet_element_stats` plus bytes: the `statistics` block and the per-type blocks of
/// `net show -v` / `peer show -v`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ElementStats {
    pub send_count: u64,
    pub recv_count: u64,
    pub drop_count: u64,
    pub sent_stats: MsgTypeCounts,
    pub received_stats: MsgTypeCounts,
    pub dropped_stats: MsgTypeCounts,
    pub sent_bytes: MsgTypeCounts,
    pub received_bytes: MsgTypeCounts,
    pub dropped_bytes: MsgTypeCounts,
}

impl ElementStats {
    pub(crate) fn sent(&mut self, msg_type: MsgType, bytes: u32) {
        self.send_count += 1;
        self.sent_stats.add(msg_type, 1);
        self.sent_bytes.add(msg_type, u64::from(bytes));
    }

    pub(crate) fn received(&mut self, msg_type: MsgType, bytes: u32) {
        self.recv_count += 1;
        self.received_stats.add(msg_type, 1);
        self.received_bytes.add(msg_type, u64::from(bytes));
    }

    pub(crate) fn dropped(&mut self, msg_type: MsgType, bytes: u32) {
        self.drop_count += 1;
        self.dropped_stats.add(msg_type, 1);
        self.dropped_bytes.add(msg_type, u64::from(bytes));
    }

    /// Adds `other`'s counts to these (partitions' shares summed for display).
    pub(crate) fn absorb(&mut self, other: &Self) {
        self.send_count = self.send_count.saturating_add(other.send_count);
        self.recv_count = self.recv_count.saturating_add(other.recv_count);
        self.drop_count = self.drop_count.saturating_add(other.drop_count);
        self.sent_stats.absorb(&other.sent_stats);
        self.received_stats.absorb(&other.received_stats);
        self.dropped_stats.absorb(&other.dropped_stats);
        self.sent_bytes.absorb(&other.sent_bytes);
        self.received_bytes.absorb(&other.received_bytes);
        self.dropped_bytes.absorb(&other.dropped_bytes);
    }
}

/// The `health stats` block of a local NI in `net show -v 2`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NiHealthStats {
    pub fatal_error: bool,
    pub health_value: u32,
    pub interrupts: u64,
    pub dropped: u64,
    pub aborted: u64,
    pub no_route: u64,
    pub timeouts: u64,
    pub error: u64,
    pub ping_count: u64,
    pub next_ping: u64,
}

impl NiHealthStats {
    pub(crate) fn count(&mut self, status: HealthStatus) {
        match status {
            HealthStatus::LocalInterrupt => self.interrupts += 1,
            HealthStatus::LocalDropped => self.dropped += 1,
            HealthStatus::LocalAborted => self.aborted += 1,
            HealthStatus::LocalNoRoute => self.no_route += 1,
            HealthStatus::LocalTimeout => self.timeouts += 1,
            HealthStatus::LocalError => self.error += 1,
            _ => {}
        }
    }
}

/// The `statistics:` block of `net show -v` / `peer show -v` as a kernel node shows it: the
/// counters' low 32 bits and the latency summaries. What the renderer prints and what crosses
/// the control socket.
/// lustre: api-ni.c `lnet_fill_ni_info()` / peer.c latency attributes (`<op>_*_nsec`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Statistics {
    pub send_count: u32,
    pub recv_count: u32,
    pub drop_count: u32,
    pub put_egress: Latency,
    pub get_rtt: Latency,
    pub put_ack: Latency,
}

impl Statistics {
    /// The counters of `stats` and the summaries of `latency`.
    pub fn new(stats: &ElementStats, latency: &LatencyStats) -> Self {
        Self {
            send_count: CounterWidth::wrapped(stats.send_count),
            recv_count: CounterWidth::wrapped(stats.recv_count),
            drop_count: CounterWidth::wrapped(stats.drop_count),
            put_egress: Latency::from(&latency.put_egress),
            get_rtt: Latency::from(&latency.get_rtt),
            put_ack: Latency::from(&latency.put_ack),
        }
    }
}

/// One latency summary: what Lustre keeps (samples, min, max, mean) plus ulnet's percentiles
/// from the engine's histograms; all zero without samples.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Latency {
    pub samples: u32,
    pub min_nsec: u64,
    pub max_nsec: u64,
    pub avg_nsec: u64,
    /// Percentiles from ulnet's latency histograms (not in Lustre); shown only by
    /// `peer show -v 4` under `latency percentiles`.
    #[cfg_attr(feature = "serde", serde(default))]
    pub p50_nsec: u64,
    #[cfg_attr(feature = "serde", serde(default))]
    pub p90_nsec: u64,
    #[cfg_attr(feature = "serde", serde(default))]
    pub p99_nsec: u64,
}

impl From<&LatencyHistogram> for Latency {
    fn from(histogram: &LatencyHistogram) -> Self {
        let nanos = |duration: Duration| u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
        let percentile = |per_mille| histogram.percentile(per_mille).map_or(0, nanos);
        Self {
            samples: CounterWidth::wrapped(histogram.samples()),
            min_nsec: nanos(histogram.min()),
            max_nsec: nanos(histogram.max()),
            avg_nsec: nanos(histogram.mean()),
            p50_nsec: percentile(500),
            p90_nsec: percentile(900),
            p99_nsec: percentile(990),
        }
    }
}

/// A local NI's `health stats` as a kernel node shows them (`net show -v 2`): the kernel's
/// widths and signs, the counters' low 32 bits. What `net show` renders and what crosses the
/// control socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct LocalNiHealth {
    pub fatal_error: i32,
    pub value: i32,
    pub interrupts: u32,
    pub dropped: u32,
    pub aborted: u32,
    pub no_route: u32,
    pub timeouts: u32,
    pub error: u32,
    pub ping_count: u32,
    pub next_ping: u64,
}

/// A healthy NI: `LNET_MAX_HEALTH_VALUE`, nothing counted.
impl Default for LocalNiHealth {
    fn default() -> Self {
        Self::from(&NiHealthStats { health_value: MAX_HEALTH, ..NiHealthStats::default() })
    }
}

impl From<&NiHealthStats> for LocalNiHealth {
    fn from(health: &NiHealthStats) -> Self {
        Self {
            fatal_error: i32::from(health.fatal_error),
            value: i32::try_from(health.health_value).unwrap_or(i32::MAX),
            interrupts: CounterWidth::wrapped(health.interrupts),
            dropped: CounterWidth::wrapped(health.dropped),
            aborted: CounterWidth::wrapped(health.aborted),
            no_route: CounterWidth::wrapped(health.no_route),
            timeouts: CounterWidth::wrapped(health.timeouts),
            error: CounterWidth::wrapped(health.error),
            ping_count: CounterWidth::wrapped(health.ping_count),
            next_ping: health.next_ping,
        }
    }
}

/// The `health stats` block of a peer NI in `peer show -v 2`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PeerNiHealthStats {
    pub health_value: u32,
    pub dropped: u64,
    pub timeout: u64,
    pub error: u64,
    pub network_timeout: u64,
    pub ping_count: u64,
    pub next_ping: u64,
    /// Times fast failover suspected this peer NI of black-holing traffic (not in lnetctl).
    pub suspicions: u64,
}

impl PeerNiHealthStats {
    pub(crate) fn count(&mut self, status: HealthStatus) {
        match status {
            HealthStatus::RemoteDropped => self.dropped += 1,
            HealthStatus::RemoteTimeout => self.timeout += 1,
            HealthStatus::RemoteError => self.error += 1,
            HealthStatus::NetworkTimeout => self.network_timeout += 1,
            _ => {}
        }
    }
}

/// A peer NI's `health stats` as a kernel node shows them (`peer show -v 2`); see
/// [`LocalNiHealth`]. Fast failover's suspicions are not shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct PeerNiHealth {
    pub value: i32,
    pub dropped: u32,
    pub timeout: u32,
    pub error: u32,
    pub network_timeout: u32,
    pub ping_count: u32,
    pub next_ping: i64,
}

/// A healthy peer NI: `LNET_MAX_HEALTH_VALUE`, nothing counted.
impl Default for PeerNiHealth {
    fn default() -> Self {
        Self::from(&PeerNiHealthStats { health_value: MAX_HEALTH, ..PeerNiHealthStats::default() })
    }
}

impl From<&PeerNiHealthStats> for PeerNiHealth {
    fn from(health: &PeerNiHealthStats) -> Self {
        Self {
            value: i32::try_from(health.health_value).unwrap_or(i32::MAX),
            dropped: CounterWidth::wrapped(health.dropped),
            timeout: CounterWidth::wrapped(health.timeout),
            error: CounterWidth::wrapped(health.error),
            network_timeout: CounterWidth::wrapped(health.network_timeout),
            ping_count: CounterWidth::wrapped(health.ping_count),
            next_ping: i64::try_from(health.next_ping).unwrap_or(i64::MAX),
        }
    }
}

counters! {
    /// Node-wide counters, in the order `lnetctl stats show` prints them, plus the engine's own.
    pub struct GlobalStats;
    /// The global counters of `stats show` as a kernel node keeps them, in its order
    /// (docs/protocol/cli.md §3.8): `struct lnet_counters_common` and
    /// `struct lnet_counters_health`.
    pub struct StatsShow {
        /// Messages alive now.
        pub msgs_alloc: u32,
        /// Most messages ever alive at once.
        pub msgs_max: u32,
        /// Response trackers alive now.
        pub rst_alloc: u32,
        pub errors: u32,
        pub send_count: u32,
        pub resend_count: u32,
        pub response_timeout_count: u32,
        pub local_interrupt_count: u32,
        pub local_dropped_count: u32,
        pub local_aborted_count: u32,
        pub local_no_route_count: u32,
        pub local_timeout_count: u32,
        pub local_error_count: u32,
        pub remote_dropped_count: u32,
        pub remote_error_count: u32,
        pub remote_timeout_count: u32,
        pub network_timeout_count: u32,
        pub failed_resends: u32,
        pub successful_resends: u32,
        pub recv_count: u32,
        pub route_count: u32,
        pub drop_count: u32,
        pub send_length: u64,
        pub recv_length: u64,
        pub route_length: u64,
        pub drop_length: u64,
    }
    engine only {
        /// ACKs and REPLYs dropped for a stale, unknown or inactive wire handle (not in lnetctl).
        pub stale_responses,
        /// Headers refused as protocol errors (the LND closes the connection).
        pub protocol_errors,
        /// Events dropped because the event queue was full (EQ overflow).
        pub events_dropped,
        /// Peer NIs fast failover suspected of black-holing traffic (not in lnetctl).
        pub blackhole_suspicions,
        /// Messages fast failover moved or copied to another path (not in lnetctl).
        pub fast_resends,
        /// Source-specified sends and responses to a multi-rail peer that left their broken
        /// path for another (not in lnetctl; docs/decisions/0008).
        pub pins_released,
        /// PUTs and REPLYs cut off in transit whose MD waited for them again instead of
        /// failing (not in lnetctl; docs/decisions/0008).
        pub receives_awaited_again,
        /// Copies of PUTs and GETs recognised and not delivered again (not in lnetctl).
        pub duplicates_dropped,
        /// NIDs a ping reply or push listed that discovery did not attach to the peer: one of
        /// ours (or a buffer naming one of ours primary, refused whole), or another peer's
        /// that configuration keeps (not in lnetctl; docs/decisions/0016).
        pub discovery_nids_refused,
    }
}

/// The node's counters as lnet_selftest's QUERY_STAT reply carries them
/// (`lnet_counters_get_common()`): the kernel's widths, as `stats show` shows them.
impl From<&GlobalStats> for LnetCountersCommon {
    fn from(stats: &GlobalStats) -> Self {
        let shown = StatsShow::from(stats);
        Self {
            messages_allocated: shown.msgs_alloc,
            messages_max: shown.msgs_max,
            errors: shown.errors,
            send_count: shown.send_count,
            receive_count: shown.recv_count,
            route_count: shown.route_count,
            drop_count: shown.drop_count,
            send_length: shown.send_length,
            receive_length: shown.recv_length,
            route_length: shown.route_length,
            drop_length: shown.drop_length,
        }
    }
}

impl GlobalStats {
    pub(crate) fn count_health(&mut self, status: HealthStatus) {
        let slot = match status {
            HealthStatus::Ok => return,
            HealthStatus::LocalInterrupt => &mut self.local_interrupt_count,
            HealthStatus::LocalDropped => &mut self.local_dropped_count,
            HealthStatus::LocalAborted => &mut self.local_aborted_count,
            HealthStatus::LocalNoRoute => &mut self.local_no_route_count,
            HealthStatus::LocalError => &mut self.local_error_count,
            HealthStatus::LocalTimeout => &mut self.local_timeout_count,
            HealthStatus::RemoteError => &mut self.remote_error_count,
            HealthStatus::RemoteDropped => &mut self.remote_dropped_count,
            HealthStatus::RemoteTimeout => &mut self.remote_timeout_count,
            HealthStatus::NetworkTimeout => &mut self.network_timeout_count,
        };
        *slot += 1;
    }
}

/// The node's counters are kept per CPU partition (each partition's part holds its
/// `GlobalStats`), as the kernel keeps `the_lnet.ln_counters[cpt]`: a call counts in the
/// partition it runs on, and `stats show` shows the sum (api-ni.c
/// `lnet_counters_get_common()`), `msgs_max` included, which is thus the sum of each
/// partition's own peak.
impl<'a, A: Access> Shares<'a, A, GlobalStats> {
    /// The counters of the partitions held: every partition's summed.
    pub(crate) fn sum(&self) -> GlobalStats {
        let mut sum = GlobalStats::default();
        for (_, counters) in self.iter_shares() {
            sum.accumulate(counters);
        }
        sum
    }
}

impl<'a> Shares<'a, Exclusive, GlobalStats> {
    /// `stats reset`: every counter back to zero but the gauges (messages and trackers alive,
    /// the peak of messages).
    pub(crate) fn reset(&mut self) {
        for (_, counters) in self.iter_shares_mut() {
            *counters = GlobalStats {
                msgs_alloc: counters.msgs_alloc,
                msgs_max: counters.msgs_max,
                rst_alloc: counters.rst_alloc,
                ..GlobalStats::default()
            };
        }
    }
}

/// A credit pool as statistics show it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CreditStats {
    pub max: i32,
    pub available: i32,
    pub min: i32,
}

/// One local NI, as `net show -v` reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NiStats {
    pub nid: Nid,
    pub lnd: LndKind,
    /// `status: up|down`.
    pub up: bool,
    pub statistics: ElementStats,
    pub health: NiHealthStats,
    pub tunables: NetTunables,
    /// NI tx credits over all its partitions: `max` and `available` as the kernel's
    /// `ni_tx_credits` counts them (what selection compares), `min` the sum of the
    /// partitions' low-water marks; `None` for loopback, which has none.
    pub tx_credits: Option<CreditStats>,
    /// The tx credits of each partition the NI covers, in CPT order (the kernel's `nis`
    /// file: one line per NI and CPT); empty for loopback.
    pub tx_queues: Vec<crate::engine::tx_queues::CptCredits>,
    /// `ni_sel_priority` (UDSP `net priority`/`nid priority` material).
    pub priority: u32,
    /// The NUMA distance the driver reported from partition 0's memory to the NI's device.
    pub numa_distance: u32,
    /// `ni_dev_cpt`: the partition of its device's NUMA node, `None` when unknown.
    pub dev_cpt: Option<u32>,
    /// PUT egress, GET and PUT-ACK round trips through this NI.
    pub latency: LatencyStats,
}

/// One peer NI, as `peer show -v` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerNiStats {
    pub nid: Nid,
    pub primary_nid: Nid,
    pub multi_rail: bool,
    /// `max_ni_tx_credits`, `available_tx_credits`, `min_tx_credits`.
    pub tx_credits: CreditStats,
    /// `tx_q_num_of_buf`: bytes charged to messages holding a peer credit.
    pub tx_q_num_of_buf: u64,
    /// `available_rtr_credits`, `min_rtr_credits` (no routing yet: equal to the max).
    pub rtr_credits: CreditStats,
    pub statistics: ElementStats,
    pub health: PeerNiHealthStats,
    /// `state`: `LNET_NI_STATUS_UP` or `_DOWN` as the peer last reported it.
    pub status: u32,
    /// `lpni_sel_priority`.
    pub priority: u32,
    /// The first of its preferred local NIDs (`lpni_pref`): the one a non-multi-rail peer NI
    /// is pinned to. `Engine::udsp_info` lists them all.
    pub preferred: Option<crate::addr::Nid>,
    /// PUT egress, GET and PUT-ACK round trips to this peer NI, with percentiles.
    pub latency: LatencyStats,
    /// Fast failover's smoothed round trip to this peer NI (zero until measured).
    pub srtt: std::time::Duration,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shown_counters_wrap_like_the_kernels() {
        let stats =
            GlobalStats { send_count: (1 << 32) + 1, send_length: 1 << 40, ..Default::default() };
        let shown = StatsShow::from(&stats);
        assert_eq!((shown.send_count, shown.send_length), (1, 1 << 40));
        let counts = MsgTypeCounts { hello: (1 << 32) + 7, ..Default::default() };
        assert_eq!(MessageCounts::from(&counts).hello, 7);
    }

    #[test]
    fn latency_summaries_carry_percentiles() {
        assert_eq!(Latency::from(&LatencyHistogram::default()), Latency::default());
        let mut histogram = LatencyHistogram::default();
        for micros in 1..=100u64 {
            histogram.record(Duration::from_micros(micros));
        }
        let shown = Latency::from(&histogram);
        assert_eq!((shown.samples, shown.min_nsec, shown.max_nsec), (100, 1_000, 100_000));
        assert_eq!(shown.avg_nsec, 50_500);
        // Histogram precision: within a bucket (about 19%) above the exact value.
        assert!((50_000..=60_000).contains(&shown.p50_nsec), "{shown:?}");
        assert!((90_000..=100_000).contains(&shown.p90_nsec), "{shown:?}");
        assert!(shown.p99_nsec <= 100_000 && shown.p99_nsec >= shown.p90_nsec, "{shown:?}");
    }

    #[test]
    fn health_is_shown_with_the_kernels_widths() {
        assert_eq!(LocalNiHealth::default().value, 1000);
        assert_eq!(PeerNiHealth::default().value, 1000);
        let ni = NiHealthStats {
            fatal_error: true,
            health_value: u32::MAX,
            interrupts: (1 << 32) + 3,
            next_ping: u64::MAX,
            ..Default::default()
        };
        let shown = LocalNiHealth::from(&ni);
        assert_eq!(
            (shown.fatal_error, shown.value, shown.interrupts, shown.next_ping),
            (1, i32::MAX, 3, u64::MAX)
        );
        let peer =
            PeerNiHealthStats { dropped: 1 << 32, next_ping: u64::MAX, ..Default::default() };
        let shown = PeerNiHealth::from(&peer);
        assert_eq!((shown.value, shown.dropped, shown.next_ping), (0, 0, i64::MAX));
    }

    #[test]
    fn fields_come_in_lnetctl_order_with_their_widths() {
        let shown = StatsShow { msgs_alloc: 3, drop_length: 1 << 40, ..Default::default() };
        let fields: Vec<_> = shown.fields().collect();
        assert_eq!(fields.len(), 26);
        assert_eq!(fields.first(), Some(&("msgs_alloc", Counter::U32(3))));
        assert_eq!(fields.last(), Some(&("drop_length", Counter::U64(1 << 40))));
        let keys: Vec<_> = MessageCounts::default().fields().map(|(key, _)| key).collect();
        assert_eq!(keys, ["put", "get", "reply", "ack", "hello"]);
    }

    #[test]
    fn element_stats_add_up_field_by_field() {
        let mut one = ElementStats::default();
        one.sent(MsgType::Put, 4096);
        one.received(MsgType::Ack, 0);
        let mut other = ElementStats::default();
        other.sent(MsgType::Put, 10);
        other.dropped(MsgType::Get, 7);
        let mut total = one;
        total.absorb(&other);
        assert_eq!((total.send_count, total.recv_count, total.drop_count), (2, 1, 1));
        assert_eq!((total.sent_stats.put, total.sent_bytes.put), (2, 4106));
        assert_eq!((total.received_stats.ack, total.dropped_bytes.get), (1, 7));
    }

    #[test]
    fn partition_counters_sum_as_the_kernels() {
        use crate::engine::shares::Owned;
        use crate::engine::slab::KeyPartitions;
        let mut owned = Owned::new(KeyPartitions::new(3), |_, _| GlobalStats::default());
        let mut counters = owned.exclusive();
        let mut count = |cpt, count: fn(&mut GlobalStats)| count(counters.share_mut(cpt).unwrap());
        count(0, |c| c.send_count = 2);
        count(2, |c| c.send_count = 5);
        count(2, |c| c.msgs_max = 4);
        count(1, |c| c.msgs_max = 3);
        count(1, |c| c.drop_count = 1);
        let sum = counters.sum();
        assert_eq!((sum.send_count, sum.msgs_max, sum.drop_count), (7, 7, 1));
        let sends: Vec<_> = counters.iter_shares().map(|(_, c)| c.send_count).collect();
        assert_eq!(sends, [2, 0, 5]);
        counters.reset();
        let sum = counters.sum();
        assert_eq!((sum.send_count, sum.msgs_max, sum.drop_count), (0, 7, 0));
    }
}
