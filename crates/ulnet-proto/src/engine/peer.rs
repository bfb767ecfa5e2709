//! Peers as Lustre models them: peer -> peer nets -> peer NIs, with a primary NID and a
//! multi-rail flag. Only one NI per peer is used until multi-rail lands.
//!
//! lustre: lnet/lnet/peer.c (`lnet_peer_ni_alloc`, `lnet_nid2peerni_locked`,
//! `lnet_peer_primary_nid_locked`), include/linux/lnet/lib-types.h (`struct lnet_peer`,
//! `struct lnet_peer_net`, `struct lnet_peer_ni`).

use std::collections::HashMap;

use crate::addr::{Net, Nid};
use crate::engine::credits::CreditPool;
use crate::engine::health::Health;
use crate::engine::stats::{ElementStats, PeerNiHealthStats};
use crate::time::Time;

/// Index of a peer NI in the node's peer table. Peer NIs are never removed yet, so ids stay
/// valid for the node's lifetime.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PeerNiId(pub u32);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct PeerId(pub(crate) u32);

/// `struct lnet_peer`.
#[derive(Debug)]
pub(crate) struct Peer {
    pub(crate) primary_nid: Nid,
    pub(crate) multi_rail: bool,
    /// In creation order, the primary's net first.
    pub(crate) nets: Vec<PeerNet>,
}

/// `struct lnet_peer_net`.
#[derive(Debug)]
pub(crate) struct PeerNet {
    pub(crate) net: Net,
    pub(crate) nis: Vec<PeerNiId>,
}

/// `struct lnet_peer_ni`.
#[derive(Debug)]
pub(crate) struct PeerNi {
    pub(crate) nid: Nid,
    pub(crate) peer: PeerId,
    /// Peer tx credits (`lpni_txcredits`, `lpni_mintxcredits`, `lpni_txq`).
    pub(crate) credits: CreditPool,
    /// `lpni_txqnob`: bytes of messages holding a peer credit (length + header).
    pub(crate) queued_bytes: u64,
    pub(crate) health: Health,
    /// `lpni_last_alive`: when we last heard from it.
    pub(crate) last_alive: Option<Time>,
    /// Connection state the LND reported (`auto_down`).
    pub(crate) alive: bool,
    pub(crate) stats: ElementStats,
    pub(crate) health_stats: PeerNiHealthStats,
}

/// The peer table was full.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PeerTableFull;

#[derive(Debug, Default)]
pub(crate) struct PeerTable {
    pub(crate) peers: Vec<Peer>,
    pub(crate) nis: Vec<PeerNi>,
    by_nid: HashMap<Nid, PeerNiId>,
}

impl PeerTable {
    pub(crate) fn find(&self, nid: Nid) -> Option<PeerNiId> {
        self.by_nid.get(&nid).copied()
    }

    pub(crate) fn ni(&self, id: PeerNiId) -> Option<&PeerNi> {
        self.nis.get(id.0 as usize)
    }

    pub(crate) fn ni_mut(&mut self, id: PeerNiId) -> Option<&mut PeerNi> {
        self.nis.get_mut(id.0 as usize)
    }

    pub(crate) fn peer_of(&self, id: PeerNiId) -> Option<&Peer> {
        let ni = self.ni(id)?;
        self.peers.get(ni.peer.0 as usize)
    }

    /// How many NIs the peer owning `id` has (gates remote resends, semantics.md §4.2).
    pub(crate) fn peer_ni_count(&self, id: PeerNiId) -> usize {
        self.peer_of(id).map_or(0, |peer| peer.nets.iter().map(|net| net.nis.len()).sum())
    }

    /// The primary NID of the peer owning `nid`, or `nid` itself for an unknown NID.
    /// lustre: peer.c `lnet_peer_primary_nid_locked()`.
    pub(crate) fn primary_nid(&self, nid: Nid) -> Nid {
        self.find(nid).and_then(|id| self.peer_of(id)).map_or(nid, |peer| peer.primary_nid)
    }

    /// Finds the peer NI for `nid`, creating a non-multi-rail peer with it as primary on first
    /// use. `peer_credits` comes from the local net's tunables.
    /// lustre: peer.c `lnet_nid2peerni_locked()` / `lnet_peer_ni_alloc()`.
    pub(crate) fn find_or_create(
        &mut self,
        nid: Nid,
        peer_credits: u32,
        limit: usize,
    ) -> Result<PeerNiId, PeerTableFull> {
        if let Some(id) = self.find(nid) {
            return Ok(id);
        }
        if self.nis.len() >= limit {
            return Err(PeerTableFull);
        }
        let id = PeerNiId(u32::try_from(self.nis.len()).map_err(|_| PeerTableFull)?);
        let peer = PeerId(u32::try_from(self.peers.len()).map_err(|_| PeerTableFull)?);
        self.peers.push(Peer {
            primary_nid: nid,
            multi_rail: false,
            nets: vec![PeerNet { net: nid.net(), nis: vec![id] }],
        });
        self.nis.push(PeerNi {
            nid,
            peer,
            credits: CreditPool::new(peer_credits),
            queued_bytes: 0,
            health: Health::FULL,
            last_alive: None,
            alive: true,
            stats: ElementStats::default(),
            health_stats: PeerNiHealthStats::default(),
        });
        self.by_nid.insert(nid, id);
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_are_created_once_with_their_nid_as_primary() {
        let mut table = PeerTable::default();
        let nid = Nid::new4(Net::TCP, 7);
        let id = table.find_or_create(nid, 8, 4).unwrap();
        assert_eq!(table.find_or_create(nid, 8, 4), Ok(id));
        assert_eq!(table.primary_nid(nid), nid);
        assert_eq!(table.peer_ni_count(id), 1);
        assert_eq!(table.ni(id).map(|ni| ni.credits.max()), Some(8));
        let other = Nid::new4(Net::TCP, 8);
        assert_eq!(table.primary_nid(other), other);
        assert_eq!(table.find_or_create(other, 8, 1), Err(PeerTableFull));
    }
}
