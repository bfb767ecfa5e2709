//! The node's internal invariant checker (for tests, the harness and the fuzzer).
//!
//! Checks what Lustre asserts throughout: credit counters equal max minus holders minus
//! waiters and go negative only with waiters (lib-move.c), MD reference counts equal the
//! messages attached (lib-md.c), plus the bounds this implementation promises, the recovery
//! queues, and fast failover's bookkeeping.

use crate::engine::discovery::MAX_DISCOVERY_PENDING;
use crate::engine::msg::{Credit, Phase};
use crate::engine::slab::Key;
use crate::engine::view::Look;

pub(crate) fn check(view: &Look<'_>) -> Result<(), String> {
    check_bounds(view)?;
    check_credits(view)?;
    check_mds(view)?;
    check_messages(view)?;
    check_recovery(view)?;
    view.check_routing()?;
    check_failover(view)
}

fn check_bounds(view: &Look<'_>) -> Result<(), String> {
    let limits = &view.limits;
    // LNet's own MDs: the two targets (and old ones still busy), two per peer, one per ping,
    // one per NI or peer NI in recovery, plus MDs of messages in flight.
    let recovering = view.node.nis.iter().filter(|ni| ni.recovery.md.is_some()).count()
        + view.node.peers.nis(&view.peer_nis).filter(|(_, ni)| ni.recovery.md.is_some()).count();
    let internal_mds =
        2 + 2 * view.node.peers.peer_count() + view.node.pings.len() + recovering + view.msgs.len();
    let checks = [
        // Each partition is held to the limits.
        ("messages", most(view.msgs.iter_shares().map(|(_, msgs)| msgs.len())), limits.messages),
        ("MDs", most(view.mds.iter_shares().map(|(_, mds)| mds.user_count())), limits.mds),
        ("MEs", most(view.mes.iter_shares().map(|(_, mes)| mes.user_count())), limits.mes),
        ("LNet MDs", view.mds.internal_count(), internal_mds),
        ("LNet MEs", view.mes.internal_count(), 2 + view.mds.internal_count()),
        ("peers", view.node.peers.peer_count(), view.node.peers.ni_slots()),
        ("peer NIs", view.node.peers.ni_slots(), limits.peer_nis),
        ("events", view.outputs.most_events(), limits.events),
        ("transmits", view.outputs.transmit_count(), limits.messages),
        ("resumes", view.outputs.resume_count(), limits.messages),
        ("trackers", view.trackers.len(), view.trackers.bound()),
    ];
    for (what, count, bound) in checks {
        if count > bound {
            return Err(format!("{count} {what} exceed the bound {bound}"));
        }
    }
    let entries: usize =
        view.node.portals.iter().map(|portal| portal.entries(&view.match_tables)).sum();
    if entries != view.mes.len() {
        return Err(format!("portals list {entries} MEs but {} exist", view.mes.len()));
    }
    if let Some((key, me)) = view.mes.iter().find(|(_, me)| me.cpt >= view.partitions.count()) {
        return Err(format!("ME {key:?} is in the table of partition {}", me.cpt));
    }
    for (_, peer) in view.node.peers.peers() {
        if peer.discovery.pending.len() > MAX_DISCOVERY_PENDING {
            return Err(format!("peer {:?} holds too many messages", peer.primary_nid));
        }
        if peer.nets.is_empty() {
            return Err(format!("peer {:?} has no NIs", peer.primary_nid));
        }
        for net in &peer.nets {
            for id in &net.nis {
                if view.node.peers.ni(&view.peer_nis, *id).is_some_and(|ni| ni.deleted) {
                    return Err(format!("peer {:?} lists deleted NI {id:?}", peer.primary_nid));
                }
                let owner = view.node.peers.owner(*id);
                if owner.and_then(|owner| view.node.peers.peer(owner)).map(|p| p.primary_nid)
                    != Some(peer.primary_nid)
                {
                    return Err(format!(
                        "peer {:?} lists NI {id:?} it does not own",
                        peer.primary_nid
                    ));
                }
                if view.node.peers.ni(&view.peer_nis, *id).is_none_or(|ni| ni.nid.net() != net.net)
                {
                    return Err(format!(
                        "peer {:?} lists NI {id:?} under the wrong net",
                        peer.primary_nid
                    ));
                }
            }
        }
    }
    for (index, portal) in view.node.portals.iter().enumerate() {
        if portal.delayed().len() > limits.lazy_queue {
            return Err(format!("portal {index} delays {} messages", portal.delayed().len()));
        }
    }
    Ok(())
}

fn check_credits(view: &Look<'_>) -> Result<(), String> {
    // One pass over the messages: holders per (NI, CPT), holders and charged bytes per peer
    // NI.
    let mut ni_holders = vec![Vec::<(u32, usize)>::new(); view.node.nis.len()];
    let mut peer_holders = vec![0usize; view.node.peers.ni_slots()];
    let mut peer_charged = vec![0u64; view.node.peers.ni_slots()];
    for (_, message) in view.msgs.iter() {
        if message.ni_credit == Credit::Held {
            if let Some(counts) = ni_holders.get_mut(usize::from(message.ni.0)) {
                match counts.iter_mut().find(|(cpt, _)| *cpt == message.tx_cpt) {
                    Some((_, count)) => *count += 1,
                    None => counts.push((message.tx_cpt, 1)),
                }
            }
        }
        if let Some(index) = message.peer_ni.map(|id| id.0 as usize) {
            if message.peer_credit == Credit::Held {
                if let Some(count) = peer_holders.get_mut(index) {
                    *count += 1;
                }
            }
            if message.peer_credit != Credit::None {
                if let Some(charged) = peer_charged.get_mut(index) {
                    *charged += u64::from(message.charged_bytes);
                }
            }
        }
    }
    for ((index, ni), holders) in view.node.nis.iter().enumerate().zip(ni_holders) {
        let id = crate::engine::ni::NiId(index as u16);
        match &ni.credits {
            Some(queues) => {
                let pools = || view.ni_shares.pools(id);
                if let Some((cpt, _)) =
                    holders.iter().find(|(cpt, _)| pools().all(|(at, _)| at != *cpt))
                {
                    return Err(format!("NI {:?}: a credit held on CPT {cpt} it lacks", ni.nid));
                }
                for (cpt, pool) in pools() {
                    let held = holders.iter().find(|(at, _)| *at == cpt).map_or(0, |(_, n)| *n);
                    pool.check(held)
                        .map_err(|error| format!("NI {:?} CPT {cpt}: {error}", ni.nid))?;
                }
                queues
                    .check(pools().map(|(_, pool)| pool))
                    .map_err(|error| format!("NI {:?}: {error}", ni.nid))?;
            }
            None if !holders.is_empty() => {
                return Err(format!("loopback NI has {} credit holders", holders.len()));
            }
            None => {}
        }
    }
    for ((peer, holders), charged) in
        view.node.peers.nis(&view.peer_nis).map(|(_, ni)| ni).zip(peer_holders).zip(peer_charged)
    {
        peer.credits.check(holders).map_err(|error| format!("peer NI {:?}: {error}", peer.nid))?;
        if charged != peer.queued_bytes {
            return Err(format!(
                "peer NI {:?} queued bytes {} != charged {charged}",
                peer.nid, peer.queued_bytes
            ));
        }
    }
    Ok(())
}

fn check_mds(view: &Look<'_>) -> Result<(), String> {
    let mut attached: std::collections::HashMap<Key, usize> = std::collections::HashMap::new();
    for (_, message) in view.msgs.iter() {
        if let Some(md) = message.md {
            *attached.entry(md).or_insert(0) += 1;
        }
    }
    let mut live_trackers = 0;
    for (key, md) in view.mds.iter() {
        let attached = attached.get(&key).copied().unwrap_or(0);
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
            let me = view.mes.get(me);
            if me.and_then(|me| me.md) != Some(key) {
                return Err(format!("MD {:?} and its ME disagree", md.handle));
            }
            // lustre: lib-md.c `LNetMDAttach()`: an MD is made in its ME's partition.
            if me.map(|me| me.cpt) != view.mds.partition_of(key) {
                return Err(format!("MD {:?} is not in its ME's partition", md.handle));
            }
        }
        live_trackers += usize::from(md.tracker.is_some());
    }
    if live_trackers != view.trackers.live() {
        return Err(format!(
            "{live_trackers} trackers attached but {} counted",
            view.trackers.live()
        ));
    }
    for (key, me) in view.mes.iter() {
        if view.mes.partition_of(key) != Some(me.cpt) {
            return Err(format!("ME {key:?} of partition {} is filed elsewhere", me.cpt));
        }
        if let Some(md) = me.md {
            if view.mds.get(md).and_then(|md| md.me) != Some(key) {
                return Err(format!("ME {key:?} and its MD disagree"));
            }
        }
    }
    Ok(())
}

fn check_messages(view: &Look<'_>) -> Result<(), String> {
    for (key, message) in view.msgs.iter() {
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
            Phase::Receiving => {
                !message.tx && (message.md.is_some() || message.router_buffer.is_some())
            }
            Phase::RouterWait => {
                !message.tx
                    && message.routing
                    && (message.router_credit == Credit::Waiting
                        || message.buffer_credit == Credit::Waiting)
            }
            Phase::Delayed => {
                !message.tx
                    && message.md.is_none()
                    && view.node.portals.iter().any(|portal| portal.delayed().contains(&key))
            }
            Phase::FaultHeld => !message.tx && message.md.is_none() && view.node.faults.holds(key),
            Phase::DiscoveryWait => {
                message.tx
                    && message.peer_credit == Credit::None
                    && message.ni_credit == Credit::None
                    && view.is_held_for_discovery(key)
            }
        };
        if !coherent {
            return Err(format!("message {key:?} incoherent: {message:?}"));
        }
    }
    Ok(())
}

fn check_recovery(view: &Look<'_>) -> Result<(), String> {
    for (index, ni) in view.node.nis.iter().enumerate() {
        let listed = view.node.recovery.local().filter(|id| usize::from(id.0) == index).count();
        if listed != usize::from(ni.recovery.queued) {
            return Err(format!(
                "NI {:?} queued {} but listed {listed} times",
                ni.nid, ni.recovery.queued
            ));
        }
    }
    for (index, ni) in view.node.peers.nis(&view.peer_nis) {
        let listed = view.node.recovery.peer().filter(|id| *id == index).count();
        if listed != usize::from(ni.recovery.queued) {
            return Err(format!(
                "peer NI {:?} queued {} but listed {listed} times",
                ni.nid, ni.recovery.queued
            ));
        }
    }
    Ok(())
}

fn check_failover(view: &Look<'_>) -> Result<(), String> {
    let orphan_bytes: u64 = view
        .msgs
        .iter()
        .filter_map(|(_, m)| m.orphan.as_ref())
        .map(|orphan| orphan.len() as u64)
        .sum();
    if orphan_bytes != view.node.failover.held_bytes() {
        return Err(format!(
            "private payload copies hold {orphan_bytes} bytes, {} counted",
            view.node.failover.held_bytes()
        ));
    }
    for (key, message) in view.msgs.iter() {
        if message.abandoned
            && (message.phase != Phase::InLnd || message.event.is_some() || message.md.is_some())
        {
            return Err(format!("abandoned message {key:?} incoherent: {message:?}"));
        }
    }
    if !view.failover_enabled() {
        return Ok(());
    }
    // Per path (peer NI, local NI): transmits in the LND and requests awaited.
    let mut counts: std::collections::BTreeMap<(u32, u16), (usize, usize)> =
        std::collections::BTreeMap::new();
    for (_, message) in view.msgs.iter() {
        if message.tx && message.phase == Phase::InLnd {
            if let Some(id) = message.peer_ni {
                counts.entry((id.0, message.ni.0)).or_default().0 += 1;
            }
        }
    }
    for (_, md) in view.mds.iter() {
        if let Some((id, ni)) = md.tracker.as_ref().and_then(|tracker| tracker.awaiting) {
            counts.entry((id.0, ni.0)).or_default().1 += 1;
        }
    }
    let armed: usize = view
        .node
        .peers
        .nis(&view.peer_nis)
        .map(|(_, ni)| ni.watch.paths.iter().filter(|path| path.armed.is_some()).count())
        .sum();
    if armed != view.peer_nis.armed_count() {
        return Err(format!(
            "{armed} paths armed but {} watch entries",
            view.peer_nis.armed_count()
        ));
    }
    for (id, peer_ni) in view.node.peers.nis(&view.peer_nis) {
        for path in &peer_ni.watch.paths {
            if path.armed.is_some_and(|at| !view.peer_nis.is_armed(at, id, path.ni)) {
                return Err(format!("path to {:?} armed without a watch entry", peer_ni.nid));
            }
            let (in_lnd, awaiting) = counts.remove(&(id.0, path.ni.0)).unwrap_or_default();
            if in_lnd != path.in_lnd as usize || awaiting != path.awaiting as usize {
                return Err(format!(
                    "path {:?} -> {:?} watch counts {}/{} but {in_lnd} in the LND and {awaiting} awaited",
                    path.ni, peer_ni.nid, path.in_lnd, path.awaiting
                ));
            }
        }
    }
    if let Some(((id, ni), (in_lnd, awaiting))) = counts.into_iter().find(|(_, c)| *c != (0, 0)) {
        return Err(format!(
            "path NI {ni} -> peer NI {id} unwatched with {in_lnd} in the LND and {awaiting} awaited"
        ));
    }
    Ok(())
}

/// The largest of `counts`, 0 for none.
fn most(counts: impl Iterator<Item = usize>) -> usize {
    counts.max().unwrap_or(0)
}
