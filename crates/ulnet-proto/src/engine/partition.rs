//! One CPU partition's part of the engine: the state a call on that partition changes, which a
//! runtime that locks partitions apart keeps behind the partition's own lock (decision 0029).
//! Flows reach it through the shares a view holds (`shares.rs`).

use crate::engine::call::CallState;
use crate::engine::md::Mds;
use crate::engine::me::Mes;
use crate::engine::msg::Messages;
use crate::engine::outputs::Outputs;
use crate::engine::slab::KeyPartitions;
use crate::engine::stats::GlobalStats;
use crate::engine::tracker::Trackers;

/// Partition `cpt`'s messages, MDs, MEs, response trackers, counters, the driver's queues,
/// and the state of a call entering on it.
#[derive(Debug)]
pub(crate) struct Partition {
    pub(crate) msgs: Messages,
    pub(crate) mds: Mds,
    pub(crate) mes: Mes,
    pub(crate) trackers: Trackers,
    pub(crate) counters: GlobalStats,
    pub(crate) outputs: Outputs,
    pub(crate) call: CallState,
}

impl Partition {
    pub(crate) fn new(cpt: u32, partitions: KeyPartitions) -> Self {
        Self {
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
