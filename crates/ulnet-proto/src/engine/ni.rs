//! Local nets and network interfaces, and the part that owns them (`Nis`): the NI table
//! (loopback first), the local nets and the round-robin counter selection stamps them with.
//!
//! lustre: include/linux/lnet/lib-types.h (`struct lnet_net`, `struct lnet_ni`),
//! lnet/lnet/api-ni.c (`lnet_startup_lndni`, `lnet_ni_tq_credits`), lo.c (the loopback LND).

use std::time::Duration;

use crate::addr::{Net, Nid};
use crate::engine::cpt::{CptList, NetCpts, Partitions};
use crate::engine::credits::CreditPool;
use crate::engine::health::Health;
use crate::engine::latency::{LatencySlot, LatencyStats};
use crate::engine::recovery::Recovery;
use crate::engine::shares::Shares;
use crate::engine::stamp::Stamp;
use crate::engine::stats::{ElementStats, NiHealthStats};
use crate::engine::tunables::NetTunables;
use crate::engine::tx_queues::TxQueues;
use crate::engine::view::{Access, Exclusive};
use crate::time::Time;
use crate::wire::ping::LNET_NI_STATUS_UP;

/// `LNET_MAX_SELECTION_PRIORITY`: the default (lowest) UDSP priority of NIs, nets, peer NIs
/// and peer nets; lower values are preferred.
pub const MAX_SELECTION_PRIORITY: u32 = u32::MAX;

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
    /// `lnet_lnd_timeout`. Drives the per-transmission deadline (docs/protocol/semantics.md §4.4).
    pub lnd_timeout: Option<Duration>,
    /// The CPTs the NI is bound to (`net add --cpt`, `CPT:`); [`CptList::ALL`] when unbound.
    pub cpts: CptList,
    /// The partition of its device's NUMA node (`ni_dev_cpt`); `None` when unknown.
    pub dev_cpt: Option<u32>,
    /// How its CPTs join its net's CPT set.
    pub cpts_join: CptsJoin,
}

/// How an NI's CPTs join its net's CPT set (`net_cpts`, what `lnet_nid2cpt(nid, NULL)` hashes
/// over), which depends on how the NI came to have them. lustre: config.c `lnet_ni_alloc()`,
/// `lnet_ni_set_default_cpts()`; api-ni.c `lnet_dyn_add_ni()`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CptsJoin {
    /// Given in the `networks=` module parameter: joins as the string is parsed.
    #[default]
    Parsed,
    /// Given to a dynamic add (`net add --cpt`, `CPT:` in an import): joins only a net the NI
    /// creates. The kernel allocates the NI on a net of its own, which it frees when the net
    /// already exists, and the existing net's set never sees the NI's CPTs.
    Explicit,
    /// Given none, and bound when the NI starts (near its device, or to all): always joins.
    Default,
}

impl NiConfig {
    pub fn new(nid: Nid, lnd: LndKind) -> Self {
        Self {
            nid,
            lnd,
            tunables: NetTunables::default(),
            lnd_timeout: None,
            cpts: CptList::ALL,
            dev_cpt: None,
            cpts_join: CptsJoin::Parsed,
        }
    }
}

/// The NUMA distance from each partition's memory to an NI's device, as the driver measured
/// it: one value for every partition, or one per partition. lustre: lib-move.c
/// `lnet_get_best_ni()` compares `cfs_cpt_distance(md_cpt, ni_dev_cpt)`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct NumaDistances(Box<[u32]>);

impl NumaDistances {
    /// `distances[cpt]` from each partition `cpt`, or one value for all.
    pub(crate) fn new(distances: &[u32]) -> Self {
        Self(distances.into())
    }

    /// The distance from partition `cpt`'s memory; 0 when unknown.
    pub(crate) fn seen_from(&self, cpt: u32) -> u32 {
        match &*self.0 {
            [all] => *all,
            each => each.get(cpt as usize).copied().unwrap_or(0),
        }
    }
}

#[derive(Debug)]
pub(crate) struct Ni {
    pub(crate) nid: Nid,
    pub(crate) lnd: LndKind,
    pub(crate) tunables: NetTunables,
    pub(crate) lnd_timeout: Option<Duration>,
    /// The CPTs it is bound to, checked against the node's partitions (`ni_cpts`).
    pub(crate) cpts: CptList,
    /// `ni_dev_cpt`: its device's partition, `None` when unknown.
    pub(crate) dev_cpt: Option<u32>,
    /// How its CPTs joined its net's set.
    pub(crate) cpts_join: CptsJoin,
    /// NI tx credits: the NI-wide count and the CPTs with a queue (`ni_tx_queues`, each in
    /// its partition's part, [`NiShares`]); `None` for loopback.
    pub(crate) credits: Option<TxQueues>,
    pub(crate) health: Health,
    pub(crate) health_stats: NiHealthStats,
    pub(crate) fatal_error: bool,
    /// Removed by [`Engine::remove_ni`](crate::engine::Engine::remove_ni): kept so `NiId`s stay
    /// stable, but no longer selected, advertised or accepted on.
    pub(crate) removed: bool,
    /// `ni_sel_priority` (UDSP; lower is preferred).
    pub(crate) priority: u32,
    /// The NUMA distance from each partition's memory to the NI's device (`cfs_cpt_distance`
    /// of the MD's CPT and `ni_dev_cpt`), supplied by the driver; 0 when unknown.
    pub(crate) numa_distance: NumaDistances,
    /// `ni_seq`: the round-robin stamp of the last commit through this NI.
    pub(crate) seq: Stamp,
    /// `*ni_status`: the health-driven status word the ping buffer shows (DOWN at health 0,
    /// UP again at 1000); the fatal flag overrides it to DOWN.
    pub(crate) status: u32,
    pub(crate) recovery: Recovery,
}

/// A local NI's traffic counts and latency statistics in one partition.
#[derive(Debug, Default)]
pub(crate) struct NiTraffic {
    pub(crate) stats: ElementStats,
    pub(crate) latency: LatencySlot,
}

/// One partition's share of every local NI, by [`NiId`]: what the NI carried in calls on
/// this partition (the kernel keeps these in atomics, `struct lnet_element_stats`; ulnet
/// sums the partitions' to show them) and, where the NI covers this partition, its tx
/// credit queue (`ni_tx_queues[cpt]`).
#[derive(Debug, Default)]
pub(crate) struct NiShares {
    nis: Vec<NiShare>,
    /// Whether a call changed this share since the audit last took it.
    #[cfg(test)]
    touched: bool,
}

/// One NI's state in one partition.
#[derive(Debug, Default)]
struct NiShare {
    traffic: NiTraffic,
    pool: Option<CreditPool>,
}

impl NiShares {
    /// Adds the next NI's share, with its queue here if it has one.
    pub(crate) fn push(&mut self, pool: Option<CreditPool>) {
        self.nis.push(NiShare { traffic: NiTraffic::default(), pool });
    }

    /// NI `ni`'s queue here.
    pub(crate) fn pool(&self, ni: NiId) -> Option<&CreditPool> {
        self.nis.get(usize::from(ni.0))?.pool.as_ref()
    }
}

impl<'a, A: Access> Shares<'a, A, NiShares> {
    /// What NI `ni` carried, summed over the partitions held.
    pub(crate) fn stats(&self, ni: NiId) -> ElementStats {
        let mut total = ElementStats::default();
        for share in self.of_ni(ni) {
            total.absorb(&share.traffic.stats);
        }
        total
    }

    /// NI `ni`'s latency statistics, merged over the partitions held.
    pub(crate) fn latency(&self, ni: NiId) -> LatencyStats {
        let mut total = LatencyStats::default();
        self.of_ni(ni).for_each(|share| share.traffic.latency.add_to(&mut total));
        total
    }

    /// NI `ni`'s queues in the partitions held, in CPT order.
    pub(crate) fn pools(&self, ni: NiId) -> impl Iterator<Item = (u32, &CreditPool)> {
        self.iter_shares().filter_map(move |(cpt, share)| Some((cpt, share.pool(ni)?)))
    }

    fn of_ni(&self, ni: NiId) -> impl Iterator<Item = &NiShare> {
        self.iter_shares().filter_map(move |(_, share)| share.nis.get(usize::from(ni.0)))
    }
}

impl<'a> Shares<'a, Exclusive, NiShares> {
    /// NI `ni`'s traffic counts in partition `cpt`, to add to.
    pub(crate) fn traffic_mut(&mut self, ni: NiId, cpt: u32) -> Option<&mut NiTraffic> {
        let share = self.share_mut(cpt)?;
        #[cfg(test)]
        {
            share.touched = true;
        }
        Some(&mut share.nis.get_mut(usize::from(ni.0))?.traffic)
    }

    /// NI `ni`'s queue in partition `cpt` (`ni_tx_queues[cpt]`); `None` for loopback, which
    /// takes no credits, or a partition the NI does not cover.
    pub(crate) fn pool_mut(&mut self, ni: NiId, cpt: u32) -> Option<&mut CreditPool> {
        let share = self.share_mut(cpt)?;
        #[cfg(test)]
        {
            share.touched = true;
        }
        share.nis.get_mut(usize::from(ni.0))?.pool.as_mut()
    }

    /// `lnetctl stats reset`: NI `ni`'s latency statistics go back to zero.
    pub(crate) fn reset_latency(&mut self, ni: NiId) {
        for (_, share) in self.iter_shares_mut() {
            if let Some(ni) = share.nis.get_mut(usize::from(ni.0)) {
                ni.traffic.latency.reset();
            }
        }
    }

    /// Adds a new NI's share to every partition held (all of them: adding an NI is a call on
    /// the whole node), with a queue where it covers the partition.
    pub(crate) fn push_ni(&mut self, credits: Option<&TxQueues>) {
        for (cpt, share) in self.iter_shares_mut() {
            share.push(credits.and_then(|queues| queues.new_pool(cpt)));
        }
    }

    /// Whether a call changed a partition's share since the audit last took it, one bit
    /// each.
    #[cfg(test)]
    pub(crate) fn take_touched(&mut self) -> u64 {
        self.iter_shares_mut()
            .filter_map(|(cpt, share)| std::mem::take(&mut share.touched).then_some(cpt))
            .fold(0, |bits, cpt| bits | 1 << cpt.min(63))
    }
}
impl Ni {
    pub(crate) fn loopback() -> Self {
        Self {
            nid: Nid::LO_0,
            lnd: LndKind::Lo,
            tunables: NetTunables::LO,
            lnd_timeout: None,
            cpts: CptList::ALL,
            dev_cpt: None,
            cpts_join: CptsJoin::Default,
            credits: None,
            health: Health::FULL,
            health_stats: NiHealthStats::default(),
            fatal_error: false,
            removed: false,
            priority: MAX_SELECTION_PRIORITY,
            numa_distance: NumaDistances::default(),
            seq: Stamp::default(),
            status: LNET_NI_STATUS_UP,
            recovery: Recovery::default(),
        }
    }

    /// A network NI; `config.cpts` is already checked against `partitions`.
    pub(crate) fn from_config(config: &NiConfig, partitions: Partitions) -> Self {
        Self {
            nid: config.nid,
            lnd: config.lnd,
            tunables: config.tunables,
            lnd_timeout: config.lnd_timeout,
            cpts: config.cpts,
            cpts_join: config.cpts_join,
            dev_cpt: config.dev_cpt,
            credits: Some(TxQueues::new(
                config.tunables.credits,
                config.tunables.peer_credits,
                &config.cpts,
                partitions,
            )),
            health: Health::FULL,
            health_stats: NiHealthStats::default(),
            fatal_error: false,
            removed: false,
            priority: MAX_SELECTION_PRIORITY,
            numa_distance: NumaDistances::default(),
            seq: Stamp::default(),
            status: LNET_NI_STATUS_UP,
            recovery: Recovery::default(),
        }
    }

    /// A network NI that can be selected (not loopback, not removed).
    pub(crate) fn usable(&self) -> bool {
        self.lnd != LndKind::Lo && !self.removed
    }

    /// `lnet_ni_get_status_locked`: what the ping buffer says of this NI.
    pub(crate) fn ping_status(&self) -> u32 {
        if self.fatal_error { crate::wire::ping::LNET_NI_STATUS_DOWN } else { self.status }
    }
}

/// A local net: its round-robin stamp and UDSP priority (`struct lnet_net`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LocalNet {
    pub(crate) net: Net,
    /// `net_seq`.
    pub(crate) seq: Stamp,
    /// `net_sel_priority`.
    pub(crate) priority: u32,
    /// `net_last_alive`: when a router last received an LNet ping on this net (or the net
    /// came up); a router's NIs on a net nobody pings go DOWN (routing.rs).
    pub(crate) last_alive: Time,
    /// `net_cpts`: the partitions a NID of this net maps to when no NI is given.
    pub(crate) cpts: NetCpts,
}

impl LocalNet {
    pub(crate) fn new(net: Net) -> Self {
        Self {
            net,
            seq: Stamp::default(),
            priority: MAX_SELECTION_PRIORITY,
            last_alive: Time::ZERO,
            cpts: NetCpts::default(),
        }
    }
}

/// The local NIs, indexed by [`NiId`] (NI 0 is loopback; removed NIs keep their slot so ids
/// stay stable), their nets (`ln_nets`, `lo` first), and the round-robin counter stamping
/// both (`ln_net_seq`).
#[derive(Debug)]
pub(crate) struct Nis {
    nis: Vec<Ni>,
    nets: Vec<LocalNet>,
    net_seq: Stamp,
    #[cfg(test)]
    touched: std::cell::Cell<u64>,
}

impl Nis {
    /// Just loopback.
    pub(crate) fn new() -> Self {
        Self {
            nis: vec![Ni::loopback()],
            nets: vec![LocalNet::new(Net::LO)],
            net_seq: Stamp::default(),
            #[cfg(test)]
            touched: std::cell::Cell::new(0),
        }
    }

    pub(crate) fn get(&self, id: NiId) -> Option<&Ni> {
        self.nis.get(usize::from(id.0))
    }

    pub(crate) fn get_mut(&mut self, id: NiId) -> Option<&mut Ni> {
        #[cfg(test)]
        self.touched.set(u64::MAX);
        self.nis.get_mut(usize::from(id.0))
    }

    /// Whether a call since the audit last took it changed an NI's node-wide state:
    /// `u64::MAX` if so (what each partition changes is its part's, [`NiShares`]).
    #[cfg(test)]
    pub(crate) fn touched(&self) -> &std::cell::Cell<u64> {
        &self.touched
    }

    /// Every slot, removed NIs included, in id order.
    /// The ids of the NIs not removed, loopback first.
    pub(crate) fn live_ids(&self) -> impl Iterator<Item = NiId> + '_ {
        self.iter().enumerate().filter(|(_, ni)| !ni.removed).map(|(index, _)| NiId(index as u16))
    }

    pub(crate) fn iter(&self) -> std::slice::Iter<'_, Ni> {
        self.nis.iter()
    }

    pub(crate) fn iter_mut(&mut self) -> std::slice::IterMut<'_, Ni> {
        self.nis.iter_mut()
    }

    /// Slots, removed NIs included.
    pub(crate) fn len(&self) -> usize {
        self.nis.len()
    }

    /// Appends a network NI, and its net if new; `None` when ids are exhausted. A net whose
    /// NIs were all removed comes back with the default priority, as the kernel's net is
    /// freed with its last NI and allocated afresh (`lnet_net_alloc()`).
    /// Adds `ni` on a node of `partitions` partitions; its net's CPT set takes its binding
    /// as [`CptsJoin`] says.
    pub(crate) fn push(&mut self, ni: Ni, partitions: u32) -> Option<NiId> {
        let id = NiId(u16::try_from(self.nis.len()).ok()?);
        let net = ni.nid.net();
        let revived = !self.nis.iter().any(|other| !other.removed && other.nid.net() == net);
        let joins = revived || ni.cpts_join != CptsJoin::Explicit;
        let bound = (!ni.cpts.is_all()).then(|| ni.cpts.values());
        self.nis.push(ni);
        let local = match self.nets.iter().position(|local| local.net == net) {
            Some(index) => self.nets.get_mut(index),
            None => {
                self.nets.push(LocalNet::new(net));
                self.nets.last_mut()
            }
        };
        if let Some(local) = local {
            if revived {
                // The kernel frees a net with its last NI and makes a new one.
                local.priority = MAX_SELECTION_PRIORITY;
                local.cpts = NetCpts::default();
            }
            if joins {
                local.cpts.append(bound.as_deref(), partitions);
            }
        }
        Some(id)
    }

    /// Marks NI `id` removed and rebuilds its net's CPT set from the NIs left
    /// (`lnet_ni_free()`'s `lnet_net_remove_cpts()`).
    pub(crate) fn remove(&mut self, id: NiId, partitions: u32) {
        let Some(ni) = self.nis.get_mut(usize::from(id.0)) else { return };
        ni.removed = true;
        let net = ni.nid.net();
        let removed = (!ni.cpts.is_all()).then(|| ni.cpts.values());
        let remaining: Vec<Option<Vec<u32>>> = self
            .nis
            .iter()
            .filter(|other| !other.removed && other.nid.net() == net)
            .map(|other| (!other.cpts.is_all()).then(|| other.cpts.values()))
            .collect();
        if let Some(local) = self.nets.iter_mut().find(|local| local.net == net) {
            let remaining = remaining.iter().map(Option::as_deref);
            local.cpts.remove(removed.as_deref(), remaining, partitions);
        }
    }

    /// `lnet_nid2cpt(nid, NULL)`: `nid`'s partition with no NI given, through the CPT set of
    /// its net when that net is local and restricted (lustre: api-ni.c
    /// `lnet_cpt_of_nid_locked()`).
    pub(crate) fn cpt_of_nid_any(&self, partitions: &Partitions, nid: &Nid) -> u32 {
        // Every received message asks: one partition looks nothing up.
        if partitions.count() == 1 {
            return 0;
        }
        let net = self.net(nid.net()).map(|local| &local.cpts);
        crate::engine::cpt::cpt_of_nid_on_net(partitions, nid, net)
    }

    /// The local net `net`, if an NI was ever configured on it.
    pub(crate) fn net(&self, net: Net) -> Option<&LocalNet> {
        self.nets.iter().find(|local| local.net == net)
    }

    /// The nets with an NI up, `lo` first, in the order they came up.
    pub(crate) fn live_nets(&self) -> Vec<Net> {
        let live = |net: Net| self.nis.iter().any(|ni| !ni.removed && ni.nid.net() == net);
        self.nets.iter().map(|local| local.net).filter(|net| live(*net)).collect()
    }

    /// The NIDs of the NIs up, net by net in [`live_nets`](Self::live_nets) order, each
    /// net's NIs in the order they came up (`ln_nets`, `net_ni_list`).
    pub(crate) fn local_nids(&self) -> Vec<Nid> {
        self.live_nets()
            .into_iter()
            .flat_map(|net| {
                self.nis
                    .iter()
                    .filter(move |ni| !ni.removed && ni.nid.net() == net)
                    .map(|ni| ni.nid)
            })
            .collect()
    }

    /// Sets a local net's UDSP priority (`net_sel_priority`).
    pub(crate) fn set_net_priority(&mut self, net: Net, priority: u32) {
        if let Some(local) = self.nets.iter_mut().find(|local| local.net == net) {
            local.priority = priority;
        }
    }

    /// Every local net ever configured.
    pub(crate) fn nets(&self) -> &[LocalNet] {
        &self.nets
    }

    /// Records that net `net` is alive at `now` (`net_last_alive`).
    pub(crate) fn touch_net(&mut self, net: Net, now: Time) {
        if let Some(local) = self.nets.iter_mut().find(|local| local.net == net) {
            local.last_alive = local.last_alive.max(now);
        }
    }

    /// Stamps NI `id` and its net with the next round-robin sequence number (the NI just sent).
    pub(crate) fn stamp(&self, id: NiId) {
        let seq = self.net_seq.advance();
        if let Some(local) = self.nis.get(usize::from(id.0)) {
            local.seq.set(seq);
            let net = local.nid.net();
            if let Some(entry) = self.nets.iter().find(|entry| entry.net == net) {
                entry.seq.set(seq);
            }
        }
    }

    /// The live NI owning `nid`.
    pub(crate) fn for_nid(&self, nid: Nid) -> Option<NiId> {
        self.nis.iter().position(|ni| ni.nid == nid && !ni.removed).map(|index| NiId(index as u16))
    }

    /// Peer credits for a peer NI of `nid`: the local net's, else socklnd's default.
    pub(crate) fn peer_credits_for(&self, nid: Nid) -> u32 {
        self.nis
            .iter()
            .find(|ni| !ni.removed && ni.nid.net() == nid.net())
            .map_or(NetTunables::default().peer_credits, |ni| ni.tunables.peer_credits)
    }
}
