//! One CPU partition's part of the engine: the state a call on that partition changes, which a
//! runtime that locks partitions apart keeps behind the partition's own lock (decision 0029).
//! Flows reach it through the shares a view holds (`shares.rs`).

use crate::engine::call::CallState;
use crate::engine::md::Mds;
use crate::engine::me::Mes;
use crate::engine::msg::Messages;
use crate::engine::ni::{NiShares, Nis};
use crate::engine::outputs::Outputs;
use crate::engine::peer::PeerNis;
use crate::engine::portal::MatchTables;
use crate::engine::routes::RouterPools;
use crate::engine::slab::KeyPartitions;
use crate::engine::stats::GlobalStats;
use crate::engine::tracker::Trackers;

/// Partition `cpt`'s part: the state of a call entering on it, and its shares of the
/// partitioned parts.
#[derive(Debug)]
pub(crate) struct Partition {
    pub(crate) call: CallState,
    pub(crate) shares: PartitionShares,
}

/// A partition's shares: what the view of a call holding the partition reaches.
#[derive(Debug)]
pub(crate) struct PartitionShares {
    pub(crate) msgs: Messages,
    pub(crate) mds: Mds,
    pub(crate) mes: Mes,
    pub(crate) trackers: Trackers,
    pub(crate) counters: GlobalStats,
    /// Its share of the driver's queues.
    pub(crate) outputs: Outputs,
    /// Each local NI's traffic counts and tx credit queue here.
    pub(crate) nis: NiShares,
    /// Each portal's match table here.
    pub(crate) portals: MatchTables,
    /// The router buffer pools here.
    pub(crate) router_pools: RouterPools,
    /// The peer NIs whose NIDs hash here.
    pub(crate) peer_nis: PeerNis,
}

impl Partition {
    /// Partition `cpt`'s part of a node whose local NIs are `nis`.
    pub(crate) fn new(cpt: u32, partitions: KeyPartitions, nis: &Nis) -> Self {
        let mut ni_shares = NiShares::default();
        for ni in nis.iter() {
            ni_shares.push(ni.credits.as_ref().and_then(|queues| queues.new_pool(cpt)));
        }
        let shares = PartitionShares {
            msgs: Messages::new(cpt, partitions),
            mds: Mds::new(cpt, partitions),
            mes: Mes::new(cpt, partitions),
            trackers: Trackers::default(),
            counters: GlobalStats::default(),
            outputs: Outputs::default(),
            nis: ni_shares,
            portals: MatchTables::default(),
            router_pools: RouterPools::default(),
            peer_nis: PeerNis::new(cpt, partitions),
        };
        Self { call: CallState::default(), shares }
    }
}
