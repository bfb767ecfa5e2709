//! The kernel's part of `peer add|del|set`, `net set --health`, `debug recovery`, and the
//! `peer:` items of `import` and the configuration file, over [`ulnet::Node`]'s admin API.
//!
//! Configured peers live in the engine. A rebuild of the node (`net add`, `net del`) starts a
//! new engine, so the configured peers of the old one are read before it stops and added to
//! the new one ([`configured_peers`], [`restore_peers`]); their health and counters start
//! afresh, as every NI's do.
//!
//! lustre: lnet/lnet/api-ni.c `lnet_peer_ni_cmd()`, `lnet_parse_peer_nis()`,
//! `lnet_net_cmd()` (the `NLM_F_REPLACE` health case), the `dbg-recov` dump
//! (`lnet_dbg_recov_show_dump()`); peer.c `lnet_user_add_peer_ni()`, `lnet_del_peer_ni()`,
//! `lnet_peer_ni_set_healthv()`; api-ni.c `lnet_ni_set_healthv()`.

use ulnet::proto::engine::{MAX_HEALTH, NiSetError, PeerAddError, PeerDelError, PeerState};
use ulnet::{AdminError, ConnsPerPeer, Node, ShutDown};
use ulnet_config::model::PeerConfig;
use ulnet_control::message::{NetSet, PeerAdd, PeerDel, PeerSet, RecoveryQueue, errno};
use ulnet_control::{ControlError, Response};
use ulnet_proto::addr::Nid;

use super::LiveNode;

/// -ECHILD: a NID to delete belongs to another peer (peer.c `lnet_peer_del_nid()`).
const ECHILD: i32 = 10;
/// -E2BIG: more NIDs than a peer may have.
const E2BIG: i32 = 7;
/// -ENOTUNIQ: a non-multi-rail peer already has a NID on that net.
const ENOTUNIQ: i32 = 76;
/// -ENOMEM: the peer table is full.
const ENOMEM: i32 = 12;

/// A configured peer as `peer add` made it, kept across node rebuilds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct ConfiguredPeer {
    primary: Nid,
    nids: Vec<Nid>,
    multi_rail: bool,
    lock_primary: bool,
}

impl LiveNode {
    /// `peer add`: the primary is created first (lnet_peer_ni_cmd() with `NLM_F_CREATE`),
    /// then each NID; if a NID fails, a peer this request created is removed again, as the
    /// kernel's `report_err` path does.
    pub(super) fn peer_add(&self, add: &PeerAdd) -> Result<Response, ControlError> {
        let node = self.running_node()?;
        let primary = primary_nid(add.primary_nid.as_deref())?;
        let nids = secondary_nids(&add.nids)?;
        let existed = node.peer_info(primary).is_some_and(|peer| peer.primary_nid == primary);
        let result = node.peer_add(primary, &nids, add.multi_rail, add.lock_primary);
        match result {
            Ok(()) => Ok(Response::Done),
            Err(AdminError::ShutDown) => Err(ControlError::NotConfigured),
            Err(AdminError::Refused(error)) => {
                if !existed && node.peer_info(primary).is_some() {
                    let _ = node.peer_del(primary, &[], true);
                }
                let about_primary = nids.is_empty() || add_error_nid(&error) == Some(primary);
                let descr =
                    if about_primary { "failed to add primary peer" } else { "failed to add peer" };
                tracing::debug!(%error, "peer add refused");
                Err(ControlError::Refused { errno: add_errno(&error), descr: descr.into() })
            }
        }
    }

    /// `peer del`: the whole peer without NIDs, else the NIDs named.
    pub(super) fn peer_del(&self, del: &PeerDel) -> Result<Response, ControlError> {
        let node = self.running_node()?;
        let primary = primary_nid(del.primary_nid.as_deref())?;
        let nids = secondary_nids(&del.nids)?;
        match node.peer_del(primary, &nids, del.force) {
            Ok(()) => Ok(Response::Done),
            Err(AdminError::ShutDown) => Err(ControlError::NotConfigured),
            Err(AdminError::Refused(error)) => {
                tracing::debug!(%error, "peer del refused");
                let descr = if nids.is_empty() {
                    "failed to del primary peer"
                } else {
                    "failed to del peer"
                };
                Err(ControlError::Refused { errno: del_errno(&error), descr: descr.into() })
            }
        }
    }

    /// `peer set --health V (--nid N | --all)` and `peer set --state S --nid N`. As in the
    /// kernel, a NID no peer has is silently ignored for health (peer.c
    /// `lnet_peer_ni_set_healthv()` returns quietly) and refused for the state ("invalid
    /// peer state param", -ENOENT); a health above the maximum is the maximum (api-ni.c
    /// `IOC_LIBCFS_SET_HEALHV`).
    pub(super) fn peer_set(&self, set: &PeerSet) -> Result<Response, ControlError> {
        let node = self.running_node()?;
        let nid =
            match (&set.nid, set.all) {
                (_, true) => None,
                (Some(text), false) => Some(text.trim().parse::<Nid>().map_err(|_| {
                    ControlError::refused(errno::EINVAL, "unsupported primary NID")
                })?),
                // lnetctl sends `<?>` without --all: nothing matches it.
                (None, false) => return Ok(Response::Done),
            };
        if let Some(state) = set.state {
            let target = nid
                .ok_or_else(|| ControlError::refused(errno::EINVAL, "invalid peer state param"))?;
            // Peer state is a u32 bitmask; lnetctl passes the parsed long truncated.
            node.set_peer_state(target, state as u32).map_err(|error| match error {
                AdminError::ShutDown => ControlError::NotConfigured,
                AdminError::Refused(_) => {
                    ControlError::refused(errno::ENOENT, "invalid peer state param")
                }
            })?;
        }
        if let Some(health) = set.health {
            match node.set_peer_ni_health(nid, shown_health(health)) {
                Ok(()) | Err(AdminError::Refused(_)) => {}
                Err(AdminError::ShutDown) => return Err(ControlError::NotConfigured),
            }
        }
        Ok(Response::Done)
    }

    /// `net set --health V | --conns-per-peer N (--nid N | --all)`. A NID that is not ours
    /// is ignored as in api-ni.c `lnet_ni_set_healthv()` and `lnet_ni_set_conns_per_peer()`;
    /// `0@lo` has no health to set, and only socklnd NIs have `conns_per_peer`.
    pub(super) fn net_set(&self, set: &NetSet) -> Result<Response, ControlError> {
        let node = self.running_node()?;
        let nid = match (&set.nid, set.all) {
            (Some(_), true) => return Err(ControlError::refused(errno::EINVAL, "")),
            (_, true) | (None, false) => None,
            (Some(text), false) => Some(
                text.trim()
                    .parse::<Nid>()
                    .map_err(|_| ControlError::refused(errno::EINVAL, "unsupported NID"))?,
            ),
        };
        // lustre: lnetctl.c yaml_lnet_config_ni_value() does only this when it is asked.
        if let Some(timeout) = set.lnd_timeout {
            return self.set_lnd_timeout(&node, set.net.as_deref(), timeout);
        }
        if let Some(value) = set.conns_per_peer {
            // The kernel's ioctl takes a negative value as 1 (api-ni.c, IOC_LIBCFS_SET_CONNS_PER_PEER).
            let value = u32::try_from(value).unwrap_or(1);
            let value = ConnsPerPeer::new(value)
                .map_err(|error| ControlError::refused(errno::EINVAL, error.to_string()))?;
            node.set_conns_per_peer(nid, value).map_err(|ShutDown| ControlError::NotConfigured)?;
        }
        let Some(health) = set.health else {
            return Ok(Response::Done);
        };
        match node.set_ni_health(nid, shown_health(health)) {
            Ok(()) | Err(AdminError::Refused(NiSetError::UnknownNi | NiSetError::Loopback)) => {
                Ok(Response::Done)
            }
            Err(AdminError::Refused(error)) => {
                Err(ControlError::refused(errno::EINVAL, error.to_string()))
            }
            Err(AdminError::ShutDown) => Err(ControlError::NotConfigured),
        }
    }

    /// `net set --lnd-timeout S --net NET`: socklnd's `sock_timeout`, module-wide in the
    /// kernel, so every tcp NI takes it whatever the net's number; 0 follows the global
    /// `lnd_timeout`. The CLI has refused other LNDs, negative values and a missing `--net`
    /// as lnetctl does. No tcp NI at all answers `-ENODEV` (the kernel's socklnd module
    /// would not be loaded, and lnetctl's write to its parameter fails).
    /// lustre: liblnetconfig.c `lustre_lnet_config_lnd_timeout()`.
    fn set_lnd_timeout(
        &self,
        node: &Node,
        net: Option<&str>,
        timeout: i64,
    ) -> Result<Response, ControlError> {
        let net = net
            .ok_or_else(|| ControlError::refused(errno::EINVAL, "missing --net"))?
            .parse::<ulnet_proto::addr::Net>()
            .map_err(|_| ControlError::refused(errno::EINVAL, "cannot parse net"))?;
        if net.lnd != ulnet_proto::addr::LndType::SOCK {
            return Err(ControlError::refused(
                errno::EINVAL,
                format!(
                    "Net {} does not accept a LND timeout",
                    ulnet_proto::addr::Net::new(net.lnd, 0)
                ),
            ));
        }
        let seconds = u64::try_from(timeout)
            .map_err(|_| ControlError::refused(errno::EINVAL, "negative LND timeout"))?;
        let timeout = (seconds != 0).then(|| std::time::Duration::from_secs(seconds));
        let changed = node
            .set_lnd_timeout(ulnet::LndKind::Tcp, timeout)
            .map_err(|ShutDown| ControlError::NotConfigured)?;
        if changed == 0 {
            return Err(ControlError::refused(errno::ENODEV, "no socklnd NI"));
        }
        Ok(Response::Done)
    }

    /// `debug recovery --local|--peer`: the queue's NIDs in order.
    pub(super) fn debug_recovery(&self, queue: RecoveryQueue) -> Result<Response, ControlError> {
        let node = self.running_node()?;
        let nids = match queue {
            RecoveryQueue::Local => node.local_recovery_queue(),
            RecoveryQueue::Peer => node.peer_recovery_queue(),
        };
        Ok(Response::Recovery(nids.iter().map(Nid::to_string).collect()))
    }

    /// The `peer:` items of an import or the configuration file, added in order: the
    /// primary, then each `peer ni` NID. `Multi-Rail: false` makes a non-multi-rail peer
    /// (the kernel of this snapshot resets its flag per attribute and ignores it; ulnet does
    /// what the file says, so an exported non-multi-rail peer comes back as it was).
    /// `peer state` is not written raw: only its `LOCK_PRIMARY` bit is honoured (the other
    /// bits are discovery state that the new node must find out itself).
    ///
    /// A gateway that a route created (not configured) and that already has every NID the
    /// item lists is left as the route made it: an export lists routes before peers, and
    /// the kernel's import answers `-EBUSY` for such a peer (peer.c `lnet_peer_add()` must
    /// delete it, `lnet_peer_ni_del_locked()` refuses for a gateway), which would make a
    /// node with routes impossible to restore from its own export.
    pub fn add_peers(&self, peers: &[PeerConfig]) -> Result<(), ControlError> {
        for peer in peers {
            if self.is_route_made_gateway(peer) {
                continue;
            }
            let lock_primary =
                peer.state.is_some_and(|state| PeerState(state).contains(PeerState::LOCK_PRIMARY));
            let add = PeerAdd {
                primary_nid: Some(peer.primary_nid.to_string()),
                nids: peer_ni_nids(peer).iter().map(Nid::to_string).collect(),
                multi_rail: peer.multi_rail.unwrap_or(true),
                lock_primary,
            };
            self.peer_add(&add)?;
        }
        Ok(())
    }

    /// Whether `peer` names a gateway peer that only a route created, NIDs included.
    fn is_route_made_gateway(&self, peer: &PeerConfig) -> bool {
        let Some(node) = self.node() else { return false };
        let Some(info) = node.peer_info(peer.primary_nid) else { return false };
        let routed = node.routes().iter().any(|route| {
            node.peer_info(route.gateway).is_some_and(|gw| gw.primary_nid == info.primary_nid)
        });
        routed
            && info.primary_nid == peer.primary_nid
            && !info.state.contains(PeerState::CONFIGURED)
            && peer_ni_nids(peer).iter().all(|nid| info.nis.iter().any(|ni| ni.nid == *nid))
    }

    /// `import --del` of `peer:` items: the whole peer when no `peer ni` list is given or it
    /// names the primary, else the NIDs listed (docs/protocol/cli.md §4.3).
    pub(super) fn delete_peers(&self, peers: &[PeerConfig]) -> Result<(), ControlError> {
        for peer in peers {
            let nids: Vec<String> = match &peer.nis {
                Some(_) => {
                    let nids = peer_ni_nids(peer);
                    if nids.contains(&peer.primary_nid) { Vec::new() } else { nids }
                }
                None => Vec::new(),
            }
            .iter()
            .map(Nid::to_string)
            .collect();
            let del =
                PeerDel { primary_nid: Some(peer.primary_nid.to_string()), nids, force: true };
            self.peer_del(&del)?;
        }
        Ok(())
    }
}

/// The configured peers of `node` (peer state `CONFIGURED`), to add to its replacement.
pub(super) fn configured_peers(node: &Node) -> Vec<ConfiguredPeer> {
    node.peers()
        .into_iter()
        .filter(|peer| peer.state.contains(PeerState::CONFIGURED))
        .map(|peer| ConfiguredPeer {
            primary: peer.primary_nid,
            nids: peer.nis.iter().map(|ni| ni.nid).filter(|nid| *nid != peer.primary_nid).collect(),
            multi_rail: peer.multi_rail(),
            lock_primary: peer.state.contains(PeerState::LOCK_PRIMARY),
        })
        .collect()
}

/// Adds `peers` to a freshly built node; a peer the new NI set refuses (one of its NIDs is
/// now local) is logged and left out.
pub(super) fn restore_peers(node: &Node, peers: &[ConfiguredPeer]) {
    for peer in peers {
        if let Err(error) =
            node.peer_add(peer.primary, &peer.nids, peer.multi_rail, peer.lock_primary)
        {
            tracing::warn!(primary = %peer.primary, %error, "configured peer not restored");
        }
    }
}

/// The `peer ni` NIDs of an import item, without repeats.
fn peer_ni_nids(peer: &PeerConfig) -> Vec<Nid> {
    let mut nids: Vec<Nid> = Vec::new();
    for nid in peer.nis.iter().flatten().filter_map(|ni| ni.nid) {
        if !nids.contains(&nid) {
            nids.push(nid);
        }
    }
    nids
}

/// lustre: api-ni.c `lnet_peer_ni_cmd()`: "missing primary NID" and "unsupported primary
/// NID" (`libcfs_strnid()` failing, -EINVAL).
fn primary_nid(text: Option<&str>) -> Result<Nid, ControlError> {
    let text = text.ok_or_else(|| ControlError::refused(errno::EINVAL, "missing primary NID"))?;
    text.trim().parse().map_err(|_| ControlError::refused(errno::EINVAL, "unsupported primary NID"))
}

/// lustre: api-ni.c `lnet_parse_peer_nis()`: "unsupported secondary NID".
fn secondary_nids(texts: &[String]) -> Result<Vec<Nid>, ControlError> {
    texts
        .iter()
        .map(|text| {
            text.trim()
                .parse()
                .map_err(|_| ControlError::refused(errno::EINVAL, "unsupported secondary NID"))
        })
        .collect()
}

/// A requested health as the kernel stores it: above the maximum is the maximum.
fn shown_health(value: i64) -> u32 {
    u32::try_from(value.clamp(0, i64::from(MAX_HEALTH))).unwrap_or(MAX_HEALTH)
}

/// The NID an add error is about, when it names one.
fn add_error_nid(error: &PeerAddError) -> Option<Nid> {
    match error {
        PeerAddError::PrimaryMismatch { nid, .. }
        | PeerAddError::PrimaryLocked { nid, .. }
        | PeerAddError::MultiRailMismatch(nid)
        | PeerAddError::NidConfiguredElsewhere(nid)
        | PeerAddError::NotUnique(nid)
        | PeerAddError::Gateway(nid) => Some(*nid),
        PeerAddError::AnyNid
        | PeerAddError::LoopbackNid
        | PeerAddError::TooManyNids(_)
        | PeerAddError::TooManyPeers => None,
    }
}

/// lustre: peer.c `lnet_user_add_peer_ni()`, `lnet_add_peer_ni()`, `lnet_peer_add_nid()`.
fn add_errno(error: &PeerAddError) -> i32 {
    -match error {
        PeerAddError::AnyNid | PeerAddError::LoopbackNid => errno::EINVAL,
        PeerAddError::TooManyNids(_) => E2BIG,
        PeerAddError::PrimaryMismatch { .. }
        | PeerAddError::PrimaryLocked { .. }
        | PeerAddError::NidConfiguredElsewhere(_) => errno::EEXIST,
        PeerAddError::MultiRailMismatch(_) => errno::EPERM,
        PeerAddError::NotUnique(_) => ENOTUNIQ,
        PeerAddError::TooManyPeers => ENOMEM,
        PeerAddError::Gateway(_) => errno::EBUSY,
    }
}

/// lustre: peer.c `lnet_del_peer_ni()`, `lnet_peer_del_nid()`.
fn del_errno(error: &PeerDelError) -> i32 {
    -match error {
        PeerDelError::AnyNid => errno::EINVAL,
        PeerDelError::NoSuchPeer(_) | PeerDelError::NoSuchNid(_) => errno::ENOENT,
        PeerDelError::NotPrimary { .. } => errno::ENODEV,
        PeerDelError::NotOwned(_) => ECHILD,
        PeerDelError::Gateway(_) => errno::EBUSY,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nid(text: &str) -> Nid {
        text.parse().unwrap()
    }

    #[test]
    fn health_values_are_capped_like_the_kernel() {
        assert_eq!(shown_health(0), 0);
        assert_eq!(shown_health(500), 500);
        assert_eq!(shown_health(5000), 1000);
        assert_eq!(shown_health(-3), 0);
    }

    #[test]
    fn nid_errors_carry_the_kernels_texts() {
        assert_eq!(
            primary_nid(None),
            Err(ControlError::refused(errno::EINVAL, "missing primary NID"))
        );
        assert_eq!(
            primary_nid(Some("10.0.0.300@tcp")),
            Err(ControlError::refused(errno::EINVAL, "unsupported primary NID"))
        );
        assert_eq!(primary_nid(Some(" 10.0.0.3@tcp")), Ok(nid("10.0.0.3@tcp")));
        assert_eq!(
            secondary_nids(&["x@tcp".into()]),
            Err(ControlError::refused(errno::EINVAL, "unsupported secondary NID"))
        );
    }

    #[test]
    fn engine_errors_map_to_the_kernels_errnos() {
        let a = nid("10.0.0.1@tcp");
        assert_eq!(del_errno(&PeerDelError::NoSuchPeer(a)), -2);
        assert_eq!(del_errno(&PeerDelError::NotPrimary { nid: a, primary: a }), -19);
        assert_eq!(del_errno(&PeerDelError::NotOwned(a)), -10);
        assert_eq!(del_errno(&PeerDelError::AnyNid), -22);
        assert_eq!(del_errno(&PeerDelError::Gateway(a)), -16);
        assert_eq!(add_errno(&PeerAddError::Gateway(a)), -16);
        assert_eq!(add_errno(&PeerAddError::TooManyNids(200)), -7);
        assert_eq!(add_errno(&PeerAddError::NidConfiguredElsewhere(a)), -17);
        assert_eq!(add_errno(&PeerAddError::MultiRailMismatch(a)), -1);
        assert_eq!(add_errno(&PeerAddError::NotUnique(a)), -76);
        assert_eq!(add_errno(&PeerAddError::TooManyPeers), -12);
        assert_eq!(add_error_nid(&PeerAddError::NotUnique(a)), Some(a));
        assert_eq!(add_error_nid(&PeerAddError::TooManyPeers), None);
    }

    #[test]
    fn import_items_list_each_nid_once() {
        let peer = PeerConfig {
            primary_nid: nid("10.0.0.1@tcp"),
            multi_rail: None,
            state: None,
            nis: Some(vec![
                ulnet_config::model::PeerNiConfig {
                    nid: Some(nid("10.0.0.1@tcp")),
                    health_value: None,
                },
                ulnet_config::model::PeerNiConfig {
                    nid: Some(nid("10.0.0.2@tcp")),
                    health_value: None,
                },
                ulnet_config::model::PeerNiConfig {
                    nid: Some(nid("10.0.0.2@tcp")),
                    health_value: None,
                },
                ulnet_config::model::PeerNiConfig { nid: None, health_value: Some(3) },
            ]),
        };
        assert_eq!(peer_ni_nids(&peer), [nid("10.0.0.1@tcp"), nid("10.0.0.2@tcp")]);
    }
}
