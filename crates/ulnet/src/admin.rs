//! The node's administration API: what `lnetctl peer add|del|set`, `net set --health`,
//! `debug recovery` and `peer show -v` reach in the kernel. The calls that change the node are
//! declared with [`api_calls!`](crate::calls::api_calls), like every other such [`Node`] call
//! (and so can also be made in a [`Node::batch`]): lock the core, run the engine's admin call
//! with the current time, carry out what it produced (pings, pushes, resends).
//!
//! lustre: lnet/lnet/peer.c (`lnet_user_add_peer_ni`, `lnet_del_peer_ni`,
//! `lnet_peer_ni_set_healthv`), api-ni.c (`lnet_ni_set_healthv`, the `dbg-recov` dump),
//! docs/protocol/semantics.md §4.

use ulnet_proto::addr::Nid;
use ulnet_proto::engine::{
    NiSetError, NiStats, PeerAddError, PeerDelError, PeerInfo, PeerNiStats, PeerSetError, PeerState,
};

use ulnet_proto::socklnd::tunables::ConnsPerPeer;

use crate::calls::api_calls;
use crate::error::ShutDown;
use crate::node::Node;

/// An administration call that failed: the node is gone, or the engine refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AdminError<E: std::error::Error + 'static> {
    #[error("the node is shut down")]
    ShutDown,
    #[error(transparent)]
    Refused(E),
}

api_calls! {
    /// `lnetctl peer add --prim_nid P [--nid N,...] [--non_mr] [--lock_prim]`: creates the
    /// configured peer (or extends it); re-adding what it has succeeds.
    fn peer_add(
        &mut self,
        primary: Nid,
        nids: &[Nid],
        multi_rail: bool,
        lock_primary: bool,
    ) -> Result<(), AdminError<PeerAddError>> {
        let now = self.exclusive_now();
        let engine = &mut self.core().engine;
        engine.peer_add(now, primary, nids, multi_rail, lock_primary).map_err(refused)
    }
    shut_down => Err(AdminError::ShutDown);

    /// `lnetctl peer del --prim_nid P [--nid N,...] [--force]`: the whole peer without NIDs
    /// (or when they name the primary; a locked primary stays unless `force`), else the NIDs.
    fn peer_del(
        &mut self,
        primary: Nid,
        nids: &[Nid],
        force: bool,
    ) -> Result<(), AdminError<PeerDelError>> {
        let now = self.exclusive_now();
        self.core().engine.peer_del(now, primary, nids, force).map_err(refused)
    }
    shut_down => Err(AdminError::ShutDown);

    /// `lnetctl peer set --health V --nid N` (`Some`) or `--all` (`None`): the peer NI's
    /// health is set and, below the maximum, the peer NI is queued for recovery.
    fn set_peer_ni_health(
        &mut self,
        nid: Option<Nid>,
        value: u32,
    ) -> Result<(), AdminError<PeerSetError>> {
        let now = self.exclusive_now();
        self.core().engine.set_peer_ni_health(now, nid, value).map_err(refused)
    }
    shut_down => Err(AdminError::ShutDown);

    /// `lnetctl peer set --state N --nid P` (debug only): the raw peer state bits.
    fn set_peer_state(&mut self, nid: Nid, state: u32) -> Result<(), AdminError<PeerSetError>> {
        self.core().engine.set_peer_state(nid, PeerState(state)).map_err(refused)
    }
    shut_down => Err(AdminError::ShutDown);

    /// UDSP material: a peer NI's selection priority (lower is preferred).
    fn set_peer_ni_priority(
        &mut self,
        nid: Nid,
        priority: u32,
    ) -> Result<(), AdminError<PeerSetError>> {
        self.core().engine.set_peer_ni_priority(nid, priority).map_err(refused)
    }
    shut_down => Err(AdminError::ShutDown);

    /// `lnetctl net set --health V --nid N` (`Some`) or `--all` (`None`, every NI but
    /// `0@lo`): health 0 shows the NI DOWN, 1000 UP; below the maximum it is queued for
    /// recovery. A NID that is not one of the node's is [`NiSetError::UnknownNi`].
    fn set_ni_health(
        &mut self,
        nid: Option<Nid>,
        value: u32,
    ) -> Result<(), AdminError<NiSetError>> {
        let now = self.exclusive_now();
        let engine = &mut self.core().engine;
        let ni = match nid {
            Some(nid) => Some(engine.ni_for_nid(nid).ok_or(refused(NiSetError::UnknownNi))?),
            None => None,
        };
        engine.set_ni_health(now, ni, value).map_err(refused)
    }
    shut_down => Err(AdminError::ShutDown);

    /// UDSP material: a local NI's selection priority (lower is preferred).
    fn set_ni_priority(&mut self, nid: Nid, priority: u32) -> Result<(), AdminError<NiSetError>> {
        let engine = &mut self.core().engine;
        let ni = engine.ni_for_nid(nid).ok_or(refused(NiSetError::UnknownNi))?;
        engine.set_ni_priority(ni, priority).map_err(refused)
    }
    shut_down => Err(AdminError::ShutDown);

    /// `lnetctl stats reset`: global counters and latency statistics back to zero.
    fn reset_stats(&mut self) -> Result<(), ShutDown> {
        self.core().engine.reset_stats();
        Ok(())
    }
    shut_down => Err(ShutDown);
}

/// An engine refusal as an administration error.
fn refused<E: std::error::Error + 'static>(error: E) -> AdminError<E> {
    AdminError::Refused(error)
}

impl Node {
    /// `lnetctl net set --conns-per-peer`: socklnd's connections of each type per peer, on
    /// the NI with `nid` or on every NI (`None`); 0 is auto (from the link speed). It applies
    /// to peers met from now on; existing peers keep their connections. NIs whose LND has no
    /// such setting, and a NID that is not ours, are skipped, as the kernel skips them.
    /// Returns how many NIs changed. lustre: api-ni.c `lnet_ni_set_conns_per_peer()`.
    pub fn set_conns_per_peer(
        &self,
        nid: Option<Nid>,
        value: ConnsPerPeer,
    ) -> Result<usize, ShutDown> {
        let lnds = self.locked(|core, _| {
            if core.closed {
                return Err(ShutDown);
            }
            let nis: Vec<_> = match nid {
                Some(nid) => core.engine.ni_for_nid(nid).into_iter().collect(),
                None => core.engine.ni_ids().collect(),
            };
            Ok(nis.into_iter().filter_map(|ni| core.lnd(ni)).collect::<Vec<_>>())
        })?;
        Ok(lnds.iter().filter(|lnd| lnd.set_conns_per_peer(value)).count())
    }

    /// `lnetctl net set --lnd-timeout S --net NET`: the LND's timeout for every NI of `lnd`
    /// (socklnd's `sock_timeout` is module-wide in the kernel: it applies to all its nets).
    /// `None` (`0` on the command line) takes the global `lnd_timeout`. The TCP LND uses it
    /// for connection timeouts from now on, the engine for transmission deadlines from the
    /// next send on. Returns how many NIs changed.
    /// lustre: liblnetconfig.c `lustre_lnet_config_lnd_timeout()`, socklnd.h
    /// `ksocknal_timeout()`.
    pub fn set_lnd_timeout(
        &self,
        lnd: ulnet_proto::engine::LndKind,
        timeout: Option<std::time::Duration>,
    ) -> Result<usize, ShutDown> {
        let lnds = self.locked(|core, _| {
            if core.closed {
                return Err(ShutDown);
            }
            // 0 takes the global lnd_timeout as it is now (socklnd reads it at each use; here
            // a later change of transaction_timeout does not reach it).
            let timeout = timeout.unwrap_or_else(|| core.engine.tunables().lnd_timeout());
            let changed = core.engine.set_lnd_timeout(lnd, Some(timeout));
            let nis: Vec<_> = core
                .engine
                .ni_ids()
                .filter(|ni| core.engine.ni_stats(*ni).is_some_and(|stats| stats.lnd == lnd))
                .collect();
            let lnds = nis.into_iter().filter_map(|ni| core.lnd(ni)).collect::<Vec<_>>();
            Ok((lnds, timeout, changed))
        })?;
        let (lnds, timeout, changed) = lnds;
        // The LND's own timeout, where it has one (the in-process fabric has none).
        for lnd in &lnds {
            lnd.set_timeout(timeout);
        }
        Ok(changed)
    }

    /// The LND timeout the NI with `nid` was given (what `net show -v` prints as the LND
    /// tunable `timeout`); `None` for a NID that is not ours or an NI without one of its own.
    pub fn lnd_timeout(&self, nid: Nid) -> Option<std::time::Duration> {
        self.locked(|core, _| {
            let ni = core.engine.ni_for_nid(nid)?;
            core.engine.ni_lnd_timeout(ni)
        })
    }

    /// socklnd's `conns_per_peer` in force on the NI with `nid`; `None` for other LNDs and
    /// NIDs that are not ours.
    pub fn conns_per_peer(&self, nid: Nid) -> Option<u8> {
        let lnd = self.locked(|core, _| core.engine.ni_for_nid(nid).and_then(|ni| core.lnd(ni)))?;
        lnd.conns_per_peer()
    }

    /// `lnetctl debug recovery --local`: the local NIs on the recovery queue, in order.
    pub fn local_recovery_queue(&self) -> Vec<Nid> {
        self.locked(|core, _| core.engine.local_recovery_queue().collect())
    }

    /// `lnetctl debug recovery --peer`: the peer NIs on the recovery queue, in order.
    pub fn peer_recovery_queue(&self) -> Vec<Nid> {
        self.locked(|core, _| core.engine.peer_recovery_queue().collect())
    }

    /// Every peer (configured, discovered or met through traffic), in table order.
    pub fn peers(&self) -> Vec<PeerInfo> {
        self.locked(|core, _| core.engine.peers().collect())
    }

    /// One local NI's statistics, health and latency histograms (`net show -v`).
    pub fn ni_stats(&self, nid: Nid) -> Option<NiStats> {
        self.locked(|core, _| {
            let ni = core.engine.ni_for_nid(nid)?;
            core.engine.ni_stats(ni)
        })
    }

    /// One peer NI's statistics, health and latency histograms (`peer show -v`).
    pub fn peer_ni_stats(&self, nid: Nid) -> Option<PeerNiStats> {
        self.locked(|core, _| core.engine.peer_ni_stats(nid))
    }
}

#[cfg(test)]
mod tests {
    use ulnet_proto::engine::{MAX_HEALTH, NiConfig};

    use super::*;
    use crate::MemFabric;

    fn nid(text: &str) -> Nid {
        text.parse().unwrap()
    }

    fn node(fabric: &MemFabric, nids: &[&str]) -> Node {
        let mut builder = Node::builder();
        for text in nids {
            builder = builder
                .mem_ni_config(NiConfig::new(nid(text), ulnet_proto::engine::LndKind::Tcp), fabric);
        }
        builder.build().unwrap()
    }

    #[test]
    fn configured_peers_round_trip() {
        let fabric = MemFabric::new(Default::default());
        let node = node(&fabric, &["10.0.0.1@tcp"]);
        let (primary, second) = (nid("10.0.0.9@tcp"), nid("10.0.0.10@tcp"));
        node.peer_add(primary, &[second], true, false).unwrap();
        let peers = node.peers();
        assert_eq!(peers.len(), 1);
        assert_eq!(peers[0].primary_nid, primary);
        assert!(peers[0].multi_rail());
        let nis: Vec<Nid> = peers[0].nis.iter().map(|ni| ni.nid).collect();
        assert_eq!(nis, [primary, second]);
        assert_eq!(node.peer_ni_stats(second).map(|ni| ni.primary_nid), Some(primary));
        node.peer_del(primary, &[second], false).unwrap();
        assert_eq!(node.peers()[0].nis.len(), 1);
        node.peer_del(primary, &[], false).unwrap();
        assert!(node.peers().is_empty());
        assert_eq!(
            node.peer_del(primary, &[], false),
            Err(AdminError::Refused(PeerDelError::NoSuchPeer(primary)))
        );
    }

    #[test]
    fn bad_peers_are_refused() {
        let fabric = MemFabric::new(Default::default());
        let local = nid("10.0.1.1@tcp");
        let node = node(&fabric, &["10.0.1.1@tcp"]);
        assert_eq!(
            node.peer_add(Nid::LO_0, &[], true, false),
            Err(AdminError::Refused(PeerAddError::LoopbackNid))
        );
        // One of the node's own NIDs is a peer like any other (a self peer).
        assert_eq!(node.peer_add(local, &[], true, false), Ok(()));
        assert_eq!(
            node.set_peer_ni_health(Some(nid("10.0.1.7@tcp")), 5),
            Err(AdminError::Refused(PeerSetError::NoSuchPeerNi(nid("10.0.1.7@tcp"))))
        );
    }

    #[test]
    fn health_set_queues_for_recovery() {
        let fabric = MemFabric::new(Default::default());
        let (first, second) = (nid("10.0.2.1@tcp"), nid("10.0.2.2@tcp"));
        let node = node(&fabric, &["10.0.2.1@tcp", "10.0.2.2@tcp"]);
        node.set_ni_health(Some(second), 300).unwrap();
        assert_eq!(node.local_recovery_queue(), [second]);
        let stats = node.ni_stats(second).unwrap();
        assert_eq!(stats.health.health_value, 300);
        assert_eq!(node.ni_stats(first).unwrap().health.health_value, MAX_HEALTH);
        assert_eq!(
            node.set_ni_health(Some(nid("10.0.2.9@tcp")), 300),
            Err(AdminError::Refused(NiSetError::UnknownNi))
        );
        assert_eq!(
            node.set_ni_health(None, 1001),
            Err(AdminError::Refused(NiSetError::HealthOutOfRange(1001)))
        );
        let peer = nid("10.0.2.9@tcp");
        node.peer_add(peer, &[], true, false).unwrap();
        node.set_peer_ni_health(None, 0).unwrap();
        assert_eq!(node.peer_ni_stats(peer).unwrap().health.health_value, 0);
        node.set_peer_state(peer, 1).unwrap();
        assert_eq!(node.peers()[0].state, PeerState(1));
        node.reset_stats().unwrap();
        node.shutdown();
        assert_eq!(node.peer_add(peer, &[], true, false), Err(AdminError::ShutDown));
        assert_eq!(node.reset_stats(), Err(ShutDown));
        // Queries still answer after shutdown.
        assert!(node.local_recovery_queue().len() <= 1);
    }
}
