//! Net changes on the running node: the NIs a change adds are added and the ones it drops
//! removed in place ([`Node::add_tcp_ni`], [`Node::remove_ni`]), as the kernel's
//! `lnet_dyn_add_ni()` / `lnet_dyn_del_ni()` do (lustre: lnet/lnet/api-ni.c). Everything else
//! about the node stays: its other NIs' connections, its peers, its counters, its selftest
//! service.

use std::thread;

use ulnet::{AddNiError, LndKind, NiConfig, Node, RemoveNiError};
use ulnet_control::ControlError;
use ulnet_control::message::errno;
use ulnet_proto::addr::Nid;

use super::{LiveNode, LndChoice, State, nid_list, tcp_tunables};
use crate::nets::NetSpec;

impl LiveNode {
    /// Moves the running node from `state.nets` to `nets`: in place when it can, else by a
    /// rebuild (see [`in_place`]). On failure nothing changed.
    pub(super) fn change_nets(
        &self,
        state: &mut State,
        nets: Vec<NetSpec>,
    ) -> Result<(), ControlError> {
        let (Some(node), LndChoice::Tcp(tcp)) = (state.node.clone(), &self.lnd) else {
            // In-process fabric NIs are attached at build only; LNet down: a build starts it.
            return self.rebuild(state, nets);
        };
        let Some(change) = in_place(&state.nets, &nets) else {
            return self.rebuild(state, nets);
        };
        let mut added = Vec::new();
        for (nid, net) in &change.added {
            let spec = net.nis.iter().find(|ni| ni.nid == *nid);
            let config = NiConfig {
                nid: *nid,
                lnd: LndKind::Tcp,
                tunables: net.tunables,
                lnd_timeout: None,
                cpts: crate::nets::cpt_list(spec.and_then(|ni| ni.cpts.as_deref())),
                dev_cpt: spec.and_then(|ni| ni.dev_cpt),
                cpts_join: spec.map_or(ulnet_proto::engine::CptsJoin::Default, |ni| ni.cpts_join),
            };
            match node.add_tcp_ni(config, tcp_tunables(net.socklnd, *tcp)) {
                Ok(nid) => added.push(nid),
                Err(error) => {
                    tracing::warn!(%error, "net add failed; the NIs it added go again");
                    remove_all(&node, &added);
                    return Err(add_error(&error));
                }
            }
        }
        remove_all(&node, &change.removed);
        state.nets = nets;
        tracing::info!(nids = %nid_list(&node.nids()), "NIs changed in place");
        Ok(())
    }
}

/// What an in-place change does.
#[derive(Debug, Default, PartialEq, Eq)]
struct Change {
    /// New NIs, each with the net it joins (for its tunables).
    added: Vec<(Nid, NetSpec)>,
    removed: Vec<Nid>,
}

/// The NIs to add and remove to go from `old` to `new`, or `None` when an NI in both would
/// change its net's tunables: the NI was started with them (credits are sized at NI
/// start-up, as in the kernel, where changing them means `net del` then `net add`), so that
/// takes a rebuild.
fn in_place(old: &[NetSpec], new: &[NetSpec]) -> Option<Change> {
    let settings = |net: &NetSpec| (net.tunables, net.socklnd);
    let find = |nets: &[NetSpec], nid: Nid| {
        nets.iter().find(|net| net.nis.iter().any(|ni| ni.nid == nid)).cloned()
    };
    let mut change = Change::default();
    for net in new {
        for ni in &net.nis {
            match find(old, ni.nid) {
                Some(before) if settings(&before) != settings(net) => return None,
                Some(_) => {}
                None => change.added.push((ni.nid, net.clone())),
            }
        }
    }
    for net in old {
        change
            .removed
            .extend(net.nis.iter().map(|ni| ni.nid).filter(|nid| find(new, *nid).is_none()));
    }
    Some(change)
}

/// Removes `nids` from `node`, side by side (each removal drains its NI for
/// [`ulnet::NI_DRAIN_TIME`] first).
fn remove_all(node: &Node, nids: &[Nid]) {
    thread::scope(|scope| {
        for nid in nids {
            scope.spawn(move || match node.remove_ni(*nid) {
                Ok(()) => {}
                // Gone already (a concurrent change) is what was wanted.
                Err(RemoveNiError::UnknownNid(_)) => {}
                Err(error) => tracing::warn!(%nid, %error, "cannot remove the NI"),
            });
        }
    });
}

/// How a failed NI addition is reported to `ulnetctl`: as a failed build of that NI was.
fn add_error(error: &AddNiError) -> ControlError {
    let code = match error {
        AddNiError::DuplicateNid(_) => errno::EEXIST,
        AddNiError::Config(_) | AddNiError::NotIp(_) => errno::EINVAL,
        // The kernel's acceptor failing to bind: socklnd startup fails with the socket error.
        AddNiError::Listen { source, .. } => source.raw_os_error().unwrap_or(errno::EIO),
        AddNiError::ShutDown | AddNiError::NoRuntime => errno::EIO,
    };
    ControlError::refused(code, format!("cannot add LNet NI: {error}"))
}

#[cfg(test)]
mod tests {
    use ulnet::NetTunables;
    use ulnet_proto::addr::Net;

    use super::*;
    use crate::nets::{NiSpec, SocklndTunables};

    fn net(name: &str, nids: &[&str], credits: u32) -> NetSpec {
        let net: Net = name.parse().unwrap();
        NetSpec {
            net,
            nis: nids.iter().map(|nid| NiSpec::new(nid.parse().unwrap(), None)).collect(),
            tunables: NetTunables { credits, ..NetTunables::default() },
            socklnd: SocklndTunables::default(),
        }
    }

    fn nid(text: &str) -> Nid {
        text.parse().unwrap()
    }

    #[test]
    fn added_and_removed_nis_change_in_place() {
        let old = [net("tcp", &["10.0.0.1@tcp", "10.0.0.2@tcp"], 256)];
        let new = [net("tcp", &["10.0.0.1@tcp"], 256), net("tcp1", &["10.1.0.1@tcp1"], 8)];
        let change = in_place(&old, &new).unwrap();
        assert_eq!(change.removed, [nid("10.0.0.2@tcp")]);
        assert_eq!(change.added.len(), 1);
        assert_eq!(change.added[0].0, nid("10.1.0.1@tcp1"));
        assert_eq!(change.added[0].1.tunables.credits, 8);
        assert_eq!(in_place(&old, &old), Some(Change::default()));
    }

    #[test]
    fn changed_tunables_of_a_kept_ni_need_a_rebuild() {
        let old = [net("tcp", &["10.0.0.1@tcp"], 256)];
        let new = [net("tcp", &["10.0.0.1@tcp"], 128)];
        assert_eq!(in_place(&old, &new), None);
    }
}
