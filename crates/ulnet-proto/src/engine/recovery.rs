//! Health recovery state: each interface's recovery progress and the monitor thread's two
//! recovery queues (`ln_mt_localNIRecovq`, `ln_mt_peerNIRecovq`) with the instant the next pass
//! is due. The passes themselves, which ping, are in `monitor.rs`.
//!
//! lustre: lib-msg.c (`lnet_ni_add_to_recoveryq_locked`), peer.c
//! (`lnet_peer_ni_add_to_recoveryq_locked`), lib-move.c (`lnet_recover_local_nis`,
//! `lnet_recover_peer_nis`).

use crate::engine::ni::NiId;
use crate::engine::peer::PeerNiId;
use crate::engine::slab::Key;
use crate::time::Time;

/// Recovery state of one NI or peer NI (`ni_recovery`, `ni_ping_count`, `ni_next_ping`,
/// `ni_ping_mdh`, `LNET_NI_RECOVERY_PENDING/FAILED` and their peer NI counterparts).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Recovery {
    /// On its recovery queue.
    pub(crate) queued: bool,
    /// Recovery pings sent since the NI was last heard from (the backoff exponent).
    pub(crate) ping_count: u32,
    /// When the next recovery ping may go.
    pub(crate) next_ping: Time,
    /// The MD of the last recovery ping.
    pub(crate) md: Option<Key>,
    /// A ping is in flight.
    pub(crate) pending: bool,
    /// The last ping failed; its MD is unlinked at the next pass.
    pub(crate) failed: bool,
}

/// Whose recovery a ping serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RecoveryTarget {
    Local(NiId),
    Peer(PeerNiId),
}

/// The recovery queues, in queue order, and when the next pass is due.
#[derive(Debug, Default)]
pub(crate) struct RecoveryQueues {
    local: Vec<NiId>,
    peer: Vec<PeerNiId>,
    deadline: Option<Time>,
}

impl RecoveryQueues {
    pub(crate) fn local(&self) -> impl Iterator<Item = NiId> + '_ {
        self.local.iter().copied()
    }

    pub(crate) fn peer(&self) -> impl Iterator<Item = PeerNiId> + '_ {
        self.peer.iter().copied()
    }

    /// Queues a local NI whose next ping is due at `next`.
    pub(crate) fn push_local(&mut self, ni: NiId, next: Time) {
        self.local.push(ni);
        self.note_deadline(next);
    }

    /// Queues a peer NI whose next ping is due at `next`.
    pub(crate) fn push_peer(&mut self, id: PeerNiId, next: Time) {
        self.peer.push(id);
        self.note_deadline(next);
    }

    /// Empties the local queue for a pass; [`Self::requeue_local`] puts the survivors back.
    pub(crate) fn take_local(&mut self) -> Vec<NiId> {
        std::mem::take(&mut self.local)
    }

    pub(crate) fn take_peer(&mut self) -> Vec<PeerNiId> {
        std::mem::take(&mut self.peer)
    }

    /// Lustre splices the pinged entries first, then the rest, then any queued meanwhile.
    pub(crate) fn requeue_local(&mut self, pinged: Vec<NiId>, waiting: Vec<NiId>) {
        let added = std::mem::replace(&mut self.local, pinged);
        self.local.extend(waiting);
        self.local.extend(added);
    }

    pub(crate) fn requeue_peer(&mut self, pinged: Vec<PeerNiId>, waiting: Vec<PeerNiId>) {
        let added = std::mem::replace(&mut self.peer, pinged);
        self.peer.extend(waiting);
        self.peer.extend(added);
    }

    pub(crate) fn remove_local(&mut self, ni: NiId) {
        self.local.retain(|queued| *queued != ni);
    }

    pub(crate) fn remove_peer(&mut self, id: PeerNiId) {
        self.peer.retain(|queued| *queued != id);
    }

    /// When the next recovery pass is due.
    pub(crate) fn deadline(&self) -> Option<Time> {
        self.deadline
    }

    /// Brings the next pass forward to `at` if it is earlier.
    pub(crate) fn note_deadline(&mut self, at: Time) {
        self.deadline = Some(self.deadline.map_or(at, |current| current.min(at)));
    }

    pub(crate) fn set_deadline(&mut self, deadline: Option<Time>) {
        self.deadline = deadline;
    }
}
