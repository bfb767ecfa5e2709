//! The node's internal invariant checker (for tests, the harness and the fuzzer).
//!
//! Checks what Lustre asserts throughout: credit counters equal max minus holders minus
//! waiters and go negative only with waiters (lib-move.c), MD reference counts equal the
//! messages attached (lib-md.c), plus the bounds this implementation promises.

use crate::engine::discovery::MAX_DISCOVERY_PENDING;
use crate::engine::msg::{Credit, Phase};
use crate::engine::node::Node;
use crate::engine::tracker::TrackerQueue;

pub(crate) fn check(node: &Node) -> Result<(), String> {
    check_bounds(node)?;
    check_credits(node)?;
    check_mds(node)?;
    check_messages(node)
}

fn check_bounds(node: &Node) -> Result<(), String> {
    let limits = &node.limits;
    // LNet's own MDs: the two targets (and old ones still busy), two per peer, one per ping,
    // plus MDs of messages in flight.
    let internal_mds = 2 + 2 * node.peers.peers.len() + node.pings.len() + node.msgs.len();
    let checks = [
        ("messages", node.msgs.len(), limits.messages),
        ("MDs", node.md_count(), limits.mds),
        ("MEs", node.me_count(), limits.mes),
        ("LNet MDs", node.internal_mds, internal_mds),
        ("LNet MEs", node.internal_mes, 2 + node.internal_mds),
        ("peers", node.peers.peers.len(), node.peers.nis.len()),
        ("peer NIs", node.peers.nis.len(), limits.peer_nis),
        ("events", node.events.len(), limits.events),
        ("transmits", node.transmits.len(), limits.messages),
        ("resumes", node.resumes.len(), limits.messages),
        ("trackers", node.trackers.len(), TrackerQueue::bound(node.live_trackers)),
    ];
    for (what, count, bound) in checks {
        if count > bound {
            return Err(format!("{count} {what} exceed the bound {bound}"));
        }
    }
    let entries: usize = node.portals.iter().map(|portal| portal.entries()).sum();
    if entries != node.mes.len() {
        return Err(format!("portals list {entries} MEs but {} exist", node.mes.len()));
    }
    for (_, peer) in node.peers.peers.iter() {
        if peer.discovery.pending.len() > MAX_DISCOVERY_PENDING {
            return Err(format!("peer {:?} holds too many messages", peer.primary_nid));
        }
        if peer.nets.is_empty() {
            return Err(format!("peer {:?} has no NIs", peer.primary_nid));
        }
        for net in &peer.nets {
            for id in &net.nis {
                let owner = node.peers.ni(*id).map(|ni| ni.peer);
                if owner.and_then(|owner| node.peers.peer(owner)).map(|p| p.primary_nid)
                    != Some(peer.primary_nid)
                {
                    return Err(format!(
                        "peer {:?} lists NI {id:?} it does not own",
                        peer.primary_nid
                    ));
                }
                if node.peers.ni(*id).is_none_or(|ni| ni.nid.net() != net.net) {
                    return Err(format!(
                        "peer {:?} lists NI {id:?} under the wrong net",
                        peer.primary_nid
                    ));
                }
            }
        }
    }
    for (index, portal) in node.portals.iter().enumerate() {
        if portal.delayed.len() > limits.lazy_queue {
            return Err(format!("portal {index} delays {} messages", portal.delayed.len()));
        }
    }
    Ok(())
}

fn check_credits(node: &Node) -> Result<(), String> {
    for (index, ni) in node.nis.iter().enumerate() {
        let holders = node
            .msgs
            .iter()
            .filter(|(_, m)| usize::from(m.ni.0) == index && m.ni_credit == Credit::Held)
            .count();
        match &ni.credits {
            Some(pool) => {
                pool.check(holders).map_err(|error| format!("NI {:?}: {error}", ni.nid))?
            }
            None if holders > 0 => return Err(format!("loopback NI has {holders} credit holders")),
            None => {}
        }
    }
    for (index, peer) in node.peers.nis.iter().enumerate() {
        let on_peer = || {
            node.msgs
                .iter()
                .filter(move |(_, m)| m.peer_ni.is_some_and(|id| id.0 as usize == index))
        };
        let holders = on_peer().filter(|(_, m)| m.peer_credit == Credit::Held).count();
        peer.credits.check(holders).map_err(|error| format!("peer NI {:?}: {error}", peer.nid))?;
        let charged: u64 = on_peer()
            .filter(|(_, m)| m.peer_credit != Credit::None)
            .map(|(_, m)| u64::from(m.charged_bytes))
            .sum();
        if charged != peer.queued_bytes {
            return Err(format!(
                "peer NI {:?} queued bytes {} != charged {charged}",
                peer.nid, peer.queued_bytes
            ));
        }
    }
    Ok(())
}

fn check_mds(node: &Node) -> Result<(), String> {
    let mut live_trackers = 0;
    for (key, md) in node.mds.iter() {
        let attached = node.msgs.iter().filter(|(_, m)| m.md == Some(key)).count();
        if attached != md.refcount as usize {
            return Err(format!(
                "MD {:?} refcount {} but {attached} messages attached",
                md.handle, md.refcount
            ));
        }
        if md.zombie && md.refcount == 0 {
            return Err(format!("idle zombie MD {:?} was not freed", md.handle));
        }
        if let Some(me) = md.me {
            if node.mes.get(me).and_then(|me| me.md) != Some(key) {
                return Err(format!("MD {:?} and its ME disagree", md.handle));
            }
        }
        live_trackers += usize::from(md.tracker.is_some());
    }
    if live_trackers != node.live_trackers {
        return Err(format!(
            "{live_trackers} trackers attached but {} counted",
            node.live_trackers
        ));
    }
    for (key, me) in node.mes.iter() {
        if let Some(md) = me.md {
            if node.mds.get(md).and_then(|md| md.me) != Some(key) {
                return Err(format!("ME {key:?} and its MD disagree"));
            }
        }
    }
    Ok(())
}

fn check_messages(node: &Node) -> Result<(), String> {
    for (key, message) in node.msgs.iter() {
        let coherent = match message.phase {
            Phase::WaitPeerCredit => message.tx && message.peer_credit == Credit::Waiting,
            Phase::WaitNiCredit => {
                message.tx
                    && message.ni_credit == Credit::Waiting
                    && message.peer_credit == Credit::Held
            }
            Phase::TxReady | Phase::InLnd => {
                message.tx
                    && message.peer_credit == Credit::Held
                    && (message.ni_credit == Credit::Held)
            }
            Phase::LoQueued | Phase::LoHeld => {
                message.tx
                    && message.peer_credit == Credit::None
                    && message.ni_credit == Credit::None
            }
            Phase::ResendQueued => {
                message.tx
                    && message.peer_credit == Credit::None
                    && message.ni_credit == Credit::None
            }
            Phase::Receiving => !message.tx && message.md.is_some(),
            Phase::Delayed => {
                !message.tx
                    && message.md.is_none()
                    && node.portals.iter().any(|portal| portal.delayed.contains(&key))
            }
            Phase::DiscoveryWait => {
                message.tx
                    && message.peer_credit == Credit::None
                    && message.ni_credit == Credit::None
                    && node.is_held_for_discovery(key)
            }
        };
        if !coherent {
            return Err(format!("message {key:?} incoherent: {message:?}"));
        }
    }
    Ok(())
}
