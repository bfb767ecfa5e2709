//! One CPU partition's part of the engine: the state a call on that partition changes, which a
//! runtime that locks partitions apart keeps behind the partition's own lock (decision 0029).
//! Flows reach it through the shares a view holds (`shares.rs`).

use crate::engine::call::CallState;
use crate::engine::md::Mds;
use crate::engine::me::Mes;
use crate::engine::msg::Messages;
use crate::engine::ni::{NiShares, Nis};
use crate::engine::outputs::Outputs;
use crate::engine::slab::KeyPartitions;
use crate::engine::stats::GlobalStats;
use crate::engine::tracker::Trackers;

/// Partition `cpt`'s messages, MDs, MEs, response trackers, counters, the driver's queues,
/// the state of a call entering on it, and its share of the local NIs.
#[derive(Debug)]
pub(crate) struct Partition {
    pub(crate) msgs: Messages,
    pub(crate) mds: Mds,
    pub(crate) mes: Mes,
    pub(crate) trackers: Trackers,
    pub(crate) counters: GlobalStats,
    pub(crate) outputs: Outputs,
    pub(crate) call: CallState,
    /// Each local NI's traffic counts and tx credit queue here.
    pub(crate) nis: NiShares,
}

impl Partition {
    /// Partition `cpt`'s part of a node whose local NIs are `nis`.
    pub(crate) fn new(cpt: u32, partitions: KeyPartitions, nis: &Nis) -> Self {
        let mut ni_shares = NiShares::default();
        for ni in nis.iter() {
            ni_shares.push(ni.credits.as_ref().and_then(|queues| queues.new_pool(cpt)));
        }
        Self {
            nis: ni_shares,
            msgs: Messages::new(cpt, partitions),
            mds: Mds::new(cpt, partitions),
            mes: Mes::new(cpt, partitions),
            trackers: Trackers::default(),
            counters: GlobalStats::default(),
            outputs: Outputs::default(),
            call: CallState::default(),
        }
    }
}
