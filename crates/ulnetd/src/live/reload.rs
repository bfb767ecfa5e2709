//! The running node moved to a reloaded configuration file: what may change live is
//! applied in place, what may not is refused before anything changes (`crate::reload` has
//! the rules).

use ulnet::proto::engine::PeerState;
use ulnet::proto::engine::{UdspRule, UdspRules};
use ulnet::{BufferCounts, Node, RouteInfo, RoutingState};
use ulnet_config::model::{self, Buffers, GlobalKey, GlobalSettings, PeerConfig};
use ulnet_proto::addr::Nid;

use super::{BootRouting, LiveNode, LndChoice, engine_tunables};
use crate::config::{DaemonConfig, Unsupported};
use crate::nets::NetSpec;
use crate::reload::{ReloadError, ReloadReport};

/// Why a key cannot change on a running node.
const RESTART: &str = "cannot change on a running node (restart ulnetd to change it)";

impl LiveNode {
    /// Applies `config`, read again from the daemon's file: nets, global settings, routing,
    /// peers, UDSP rules, and the nets `lnet configure --all` brings up.
    pub fn reload(&self, config: &DaemonConfig) -> Result<ReloadReport, ReloadError> {
        let mut state = self.lock();
        if state.stopping {
            return Err(ReloadError::Stopping);
        }
        let refused = self.unchangeable(config);
        if !refused.is_empty() {
            return Err(ReloadError::Refused(refused));
        }
        if state.node.is_none() {
            return Err(ReloadError::NotConfigured);
        }
        let mut report = ReloadReport {
            nis_added: nids_missing_from(&config.nets, &state.nets),
            nis_removed: nids_missing_from(&state.nets, &config.nets),
            settings_changed: changed_keys(&state.settings, &config.settings),
            ..ReloadReport::default()
        };
        if state.nets != config.nets {
            // On failure the previous nets are back up (a failed rebuild restores them).
            self.change_nets(&mut state, config.nets.clone()).map_err(ReloadError::Nets)?;
        }
        let node = state.node.clone().ok_or(ReloadError::NotConfigured)?;
        if !report.settings_changed.is_empty() {
            node.set_tunables(engine_tunables(&config.settings)).map_err(|error| {
                ReloadError::Settings(ulnet_control::ControlError::refused(
                    ulnet_control::message::errno::EINVAL,
                    error.to_string(),
                ))
            })?;
            state.settings = config.settings;
        }
        *self.boot_nets.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
            config.nets.clone();
        state.boot_routing = config.routing.clone();
        // Routing and peer calls take the node handle themselves, as an import's do; routes
        // go before peers, as in an import (a gateway's peer is not deleted under a route).
        drop(state);
        self.reload_routing(&node, &config.routing, &mut report)?;
        self.reload_peers(&node, &config.peers, &mut report);
        // Last, as at start: rules reach the peers and routes just set up.
        self.reload_udsp(&node, &config.udsp, &mut report)?;
        Ok(report)
    }

    /// The node's UDSP rules become the file's: replaced as a whole when they differ.
    fn reload_udsp(
        &self,
        node: &Node,
        wanted: &[(UdspRule, usize)],
        report: &mut ReloadReport,
    ) -> Result<(), ReloadError> {
        let mut expected = UdspRules::default();
        for (rule, index) in wanted {
            // Checked when the file was read: every rule goes in.
            let _ = expected.add(rule.clone(), Some(*index));
        }
        if expected.iter().eq(node.udsp_rules().iter()) {
            return Ok(());
        }
        let _ = node.udsp_del(None);
        self.add_udsp_rules(wanted).map_err(ReloadError::Udsp)?;
        report.udsp_replaced = Some(expected.len());
        Ok(())
    }

    /// Routes the file no longer lists (or lists with another hop count or priority) go,
    /// its new ones come; forwarding follows `routing:` (off without it, as at start);
    /// buffer counts the file sets are applied, the others keep their values.
    fn reload_routing(
        &self,
        node: &Node,
        wanted: &BootRouting,
        report: &mut ReloadReport,
    ) -> Result<(), ReloadError> {
        let current = node.routes();
        for route in
            current.iter().filter(|route| !wanted.routes.iter().any(|w| same_route(w, route)))
        {
            node.route_del(Some(route.net), Some(route.gateway)).map_err(|error| {
                ReloadError::Routing(format!("route {} via {}: {error}", route.net, route.gateway))
            })?;
            report.routes_removed.push(format!("{} via {}", route.net, route.gateway));
        }
        let added: Vec<model::RouteConfig> = wanted
            .routes
            .iter()
            .filter(|route| !current.iter().any(|known| same_route(route, known)))
            .copied()
            .collect();
        let buffers =
            wanted.buffers.filter(|buffers| buffers_differ(buffers, node.router_buffer_counts()));
        self.apply_routing_blocks(&added, None, buffers, true)
            .map_err(|error| ReloadError::Routing(error.descr()))?;
        report
            .routes_added
            .extend(added.iter().map(|route| format!("{} via {}", route.net, route.gateway)));
        let forwarding =
            matches!(node.routing_state(), RoutingState::Starting { .. } | RoutingState::Enabled);
        let enable = wanted.enable.unwrap_or(false);
        if forwarding != enable {
            self.apply_routing_blocks(&[], Some(enable), None, true)
                .map_err(|error| ReloadError::Routing(error.descr()))?;
            report.settings_changed.push("routing");
        }
        if buffers.is_some() {
            report.settings_changed.push("buffers");
        }
        Ok(())
    }

    /// What `config` would change that a running node cannot take.
    fn unchangeable(&self, config: &DaemonConfig) -> Vec<Unsupported> {
        let mut refused = Vec::new();
        let mut refuse =
            |what: &str| refused.push(Unsupported { what: what.into(), why: RESTART.into() });
        if let LndChoice::Tcp(tcp) = &self.lnd {
            if tcp.accept_port != config.tcp.accept_port {
                refuse("global accept_port");
            }
            if tcp.accept_port_bulk != config.tcp.accept_port_bulk {
                refuse("lnet accept_port_bulk");
            }
            if tcp.accept != config.tcp.accept {
                refuse("global accept");
            }
            if tcp.socklnd != config.tcp.socklnd {
                refuse("ksocklnd module parameters");
            }
        }
        if self.selftest != config.selftest {
            refuse("global lnet_selftest");
        }
        // GlobalSettings checked each key; the engine also checks them together.
        if let Err(error) = engine_tunables(&config.settings).validate() {
            refused.push(Unsupported { what: "global".to_string(), why: error.to_string() });
        }
        refused
    }

    /// Configured peers the file no longer lists go; the file's are added (idempotent), a
    /// peer whose Multi-Rail flag changed is re-created.
    fn reload_peers(&self, node: &Node, wanted: &[PeerConfig], report: &mut ReloadReport) {
        let configured: Vec<_> = node
            .peers()
            .into_iter()
            .filter(|peer| peer.state.contains(PeerState::CONFIGURED))
            .collect();
        for peer in &configured {
            let listed = wanted.iter().find(|item| item.primary_nid == peer.primary_nid);
            let recreate =
                listed.is_some_and(|item| item.multi_rail.unwrap_or(true) != peer.multi_rail());
            if listed.is_some() && !recreate {
                continue;
            }
            match node.peer_del(peer.primary_nid, &[], true) {
                Ok(()) if listed.is_none() => report.peers_removed.push(peer.primary_nid),
                Ok(()) => {}
                Err(error) => {
                    tracing::warn!(primary = %peer.primary_nid, %error, "reload: peer not deleted");
                }
            }
        }
        for item in wanted {
            let existed = configured.iter().any(|peer| peer.primary_nid == item.primary_nid);
            match self.add_peers(std::slice::from_ref(item)) {
                Ok(()) if !existed => report.peers_added.push(item.primary_nid),
                Ok(()) => {}
                Err(error) => {
                    report.peers_refused.push(format!("{}: {}", item.primary_nid, error.descr()));
                }
            }
        }
    }
}

/// Whether a configured route is the route the node has (same net, gateway, hops, priority).
fn same_route(wanted: &model::RouteConfig, known: &RouteInfo) -> bool {
    wanted.net == known.net
        && wanted.gateway == known.gateway
        && wanted.hops.map(u32::from) == known.hops
        && wanted.priority == known.priority
}

/// Whether `buffers` sets a count the node does not have (-1 and unset keep the count).
fn buffers_differ(buffers: &Buffers, counts: BufferCounts) -> bool {
    [(buffers.tiny, counts.tiny), (buffers.small, counts.small), (buffers.large, counts.large)]
        .into_iter()
        .any(|(wanted, count)| wanted.is_some_and(|value| value != -1 && value != i64::from(count)))
}

/// The NIDs of `nets` that `other` does not have, in `nets`' order.
fn nids_missing_from(nets: &[NetSpec], other: &[NetSpec]) -> Vec<Nid> {
    let has = |nid: Nid| other.iter().flat_map(|net| net.nis.iter()).any(|ni| ni.nid == nid);
    nets.iter().flat_map(|net| net.nis.iter()).map(|ni| ni.nid).filter(|nid| !has(*nid)).collect()
}

/// The `global show` keys whose value differs.
fn changed_keys(old: &GlobalSettings, new: &GlobalSettings) -> Vec<&'static str> {
    let mut keys: Vec<&'static str> = GlobalKey::ALL
        .into_iter()
        .filter(|key| old.value(*key) != new.value(*key))
        .map(GlobalKey::name)
        .collect();
    // No lnetctl key, but the kernel lets root change it on a running node
    // (/sys/module/lnet/parameters/portal_rotor is rw): a reload of the modprobe.d files
    // applies it.
    if old.portal_rotor != new.portal_rotor {
        keys.push("portal_rotor");
    }
    keys
}

#[cfg(test)]
mod tests {
    use ulnet::NetTunables;
    use ulnet_proto::addr::Net;
    use ulnet_proto::engine::tunables::PortalRotor;

    use super::*;
    use crate::nets::{NiSpec, SocklndTunables};

    fn net(name: &str, nids: &[&str]) -> NetSpec {
        let net: Net = name.parse().unwrap();
        NetSpec {
            net,
            nis: nids.iter().map(|nid| NiSpec::new(nid.parse().unwrap(), None)).collect(),
            tunables: NetTunables::default(),
            socklnd: SocklndTunables::default(),
        }
    }

    #[test]
    fn nis_added_and_removed_are_named_in_order() {
        let old = [net("tcp", &["10.0.0.1@tcp", "10.0.0.2@tcp"])];
        let new = [net("tcp", &["10.0.0.2@tcp"]), net("tcp1", &["10.1.0.1@tcp1"])];
        let shown = |nids: Vec<Nid>| nids.iter().map(Nid::to_string).collect::<Vec<_>>();
        assert_eq!(shown(nids_missing_from(&new, &old)), ["10.1.0.1@tcp1"]);
        assert_eq!(shown(nids_missing_from(&old, &new)), ["10.0.0.1@tcp"]);
        assert!(nids_missing_from(&old, &old).is_empty());
    }

    #[test]
    fn changed_settings_are_named_by_their_keys() {
        let old = GlobalSettings::default();
        let mut new = old;
        assert!(changed_keys(&old, &new).is_empty());
        new.set(GlobalKey::RetryCount, 1).unwrap();
        new.set(GlobalKey::Discovery, 0).unwrap();
        // lnd_timeout follows retry_count (transaction_timeout / (retry_count + 1)).
        assert_eq!(changed_keys(&old, &new), ["discovery", "retry_count", "lnd_timeout"]);
    }

    #[test]
    fn a_new_portal_rotor_is_a_changed_setting() {
        let old = GlobalSettings::default();
        let new = GlobalSettings { portal_rotor: 0, ..old };
        assert_eq!(changed_keys(&old, &new), ["portal_rotor"]);
        assert!(changed_keys(&old, &old).is_empty());
        assert_eq!(engine_tunables(&new).portal_rotor, PortalRotor::Off);
    }
}
