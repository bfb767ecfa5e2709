//! The kernel's part of `route add|del|show`, `routing show`, `set routing`,
//! `set tiny_buffers|small_buffers|large_buffers`, and the `route:`, `routing:` and `buffers:`
//! blocks of `import` and the configuration file, over [`ulnet::Node`]'s routing API.
//!
//! Routes, the routing state and the buffer counts live in the engine. A rebuild of the node
//! starts a new engine, so they are read from the old one before it stops and given to the
//! new one ([`RoutingSnapshot`]); `lnet unconfigure` drops them, as the kernel deletes every
//! route and frees the pools. The configuration file's blocks are the kernel's module
//! parameters (`routes=`, `forwarding=enabled`, `*_router_buffers`): applied at start, and
//! again when `lnet configure` starts LNet (routes only with `--all`).
//!
//! lustre: lnet/lnet/api-ni.c `lnet_route_cmd()`, `lnet_route_show_start()`,
//! `lnet_scan_route()`, `lnet_routing_cmd()`, `lnet_buffers_cmd()`, `LNetCtl()`
//! (`IOC_LIBCFS_CONFIG_RTR`, `IOC_LIBCFS_ADD_BUF`, `IOC_LIBCFS_GET_BUF`); router.c
//! `lnet_rtrpools_alloc()`, `lnet_rtrpools_enable()`, `lnet_get_rtr_pool_cfg()`.

use std::time::{Duration, Instant};
use ulnet::{
    AdminError, BufferClass, BufferCounts, Node, RouteConfig, RouteError, RouteInfo, RoutingError,
    RoutingState,
};

use ulnet::proto::engine::PeerState;
use ulnet_config::model::{self, Buffers, Config};
use ulnet_config::render;
use ulnet_control::data;
use ulnet_control::message::{RouteSpec, SetParam, errno};
use ulnet_control::{ControlError, Response};
use ulnet_proto::addr::{LndType, Net, Nid};
use ulnet_proto::wire::ping::LNET_NI_STATUS_UP;

use super::{LiveNode, State};
use crate::nets::NetSpec;

/// -ENOMEM: the route or peer table is full.
const ENOMEM: i32 = 12;
/// -EACCES: a route to `lo`.
const EACCES: i32 = 13;
/// -ENXIO: a route to the any-net.
const ENXIO: i32 = 6;

/// The routing part of a configuration file: in the kernel, module parameters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BootRouting {
    /// `route:` items (`routes=`), one per gateway.
    pub routes: Vec<model::RouteConfig>,
    /// `routing: {enable: 0|1}` (`forwarding=enabled|disabled`).
    pub enable: Option<bool>,
    /// `buffers:` (`tiny_router_buffers`, `small_router_buffers`, `large_router_buffers`).
    pub buffers: Option<Buffers>,
}

impl BootRouting {
    /// The routing blocks of a parsed configuration.
    pub fn of(config: &Config) -> Self {
        Self { routes: config.routes.clone(), enable: config.routing, buffers: config.buffers }
    }
}

/// What a rebuild carries from the old engine to the new one.
#[derive(Clone, Debug)]
pub(super) struct RoutingSnapshot {
    routes: Vec<RouteInfo>,
    state: RoutingState,
    counts: BufferCounts,
}

impl LiveNode {
    /// `route add`: one route per gateway, in order; the first refusal stops the rest, the
    /// routes added before it stay (the kernel's `lnet_route_cmd()` loop).
    pub(super) fn route_add(&self, spec: &RouteSpec) -> Result<Response, ControlError> {
        let node = self.running_node()?;
        let (net, gateways) = route_target(spec)?;
        let hops = match spec.hop {
            None | Some(-1) => None,
            Some(hop) => {
                Some(u32::try_from(hop).ok().filter(|hop| (1..=255).contains(hop)).ok_or_else(
                    || refused(errno::EINVAL, "invalid hop count must be between 1 and 255"),
                )?)
            }
        };
        let priority = match spec.priority {
            None => 0,
            Some(priority) if priority < 0 => {
                return Err(refused(errno::EINVAL, "invalid priority, must not be negative"));
            }
            // The kernel keeps the low 32 bits; a priority beyond them is refused here.
            Some(priority) => u32::try_from(priority)
                .map_err(|_| refused(errno::EINVAL, "invalid priority, must fit in 32 bits"))?,
        };
        for gateway in gateways {
            add_route(&node, RouteConfig { net, gateway, hops, priority })?;
        }
        Ok(Response::Done)
    }

    /// `route del`: the route to the net through each gateway's peer. -ENOENT when the net
    /// has no route at all (router.c `lnet_del_route()`).
    pub(super) fn route_del(&self, spec: &RouteSpec) -> Result<Response, ControlError> {
        let node = self.running_node()?;
        let (net, gateways) = route_target(spec)?;
        for gateway in gateways {
            delete_route(&node, net, gateway)?;
        }
        Ok(Response::Done)
    }

    /// `route show`: the routes matching the filter, once per gateway of the filter (the
    /// kernel scans the table for each filter item). A net that does not parse filters
    /// nothing, as `libcfs_str2net()` then gives the any-net; hop and priority filter only
    /// inside an item.
    pub(super) fn route_show(&self, filter: &RouteSpec) -> Result<Response, ControlError> {
        let node = self.running_node()?;
        let routes = route_entries(&node);
        let net = filter.net.as_deref().and_then(|text| text.parse::<Net>().ok());
        let gateways = filter
            .gateways
            .iter()
            .map(|text| {
                text.parse::<Nid>().map_err(|_| refused(errno::ENODEV, "cannot parse gateway"))
            })
            .collect::<Result<Vec<Nid>, _>>()?;
        let items: Vec<Option<Nid>> =
            if gateways.is_empty() { vec![None] } else { gateways.into_iter().map(Some).collect() };
        let mut shown = Vec::new();
        for gateway in items {
            shown.extend(routes.iter().filter(|route| {
                net.is_none_or(|net| route.net == net)
                    && gateway.is_none_or(|gateway| route.gateway == gateway)
                    && filter.hop.is_none_or(|hop| i64::from(route.hop) == hop)
                    && filter.priority.is_none_or(|priority| i64::from(route.priority) == priority)
            }));
        }
        Ok(Response::Routes(shown.iter().map(data::RouteEntry::from).collect()))
    }

    /// `routing show`: no pools until routing was first enabled (`ln_rtrpools == NULL`).
    pub(super) fn routing_show(&self) -> Result<Response, ControlError> {
        let state = self.lock();
        let node = state.node.clone().ok_or(ControlError::NotConfigured)?;
        Ok(Response::Routing(data::RoutingShow::from(&routing_view(&state, &node))))
    }

    /// `set routing 0|1` (delayed, as `lnetctl set routing`) and the buffer counts. A
    /// count of -1 changes nothing (lnetctl's "unchanged"); counts are the kernel's `int`.
    pub(super) fn set_routing_param(
        &self,
        param: SetParam,
        value: i64,
    ) -> Result<Response, ControlError> {
        let class = match param {
            SetParam::Routing => {
                self.enable_routing(value == 1, false)?;
                return Ok(Response::Done);
            }
            SetParam::TinyBuffers => BufferClass::Tiny,
            SetParam::SmallBuffers => BufferClass::Small,
            SetParam::LargeBuffers => BufferClass::Large,
            _ => return Err(ControlError::Internal { reason: "not a routing setting".into() }),
        };
        let node = self.running_node()?;
        if value != -1 {
            set_buffers(&node, class, value)?;
        }
        Ok(Response::Done)
    }

    /// The routing blocks of a configuration file, applied to the running node at start:
    /// buffers, then routing (at once, as `forwarding=enabled`), then the routes. Kept, so
    /// that `lnet configure` applies them again.
    pub fn apply_boot_routing(&self, boot: BootRouting) -> Result<(), ControlError> {
        self.lock().boot_routing = boot.clone();
        self.apply_routing_blocks(&boot.routes, boot.enable, boot.buffers, true)
    }

    /// `check_routers_before_use`: the node is not ready until the router checker has heard
    /// from, or given up on, every gateway once, so that the first routed send knows which
    /// routes are alive. The kernel waits without a limit, polling every second; ulnetd
    /// polls faster and stops waiting after `router_ping_timeout + alive_router_check_interval`
    /// (when a gateway the checker cannot reach is dead anyway), with a warning. With the
    /// checker off (`alive_router_check_interval` <= 0) nothing would ever answer, so
    /// there is no wait. lustre: router.c `lnet_wait_router_start()`,
    /// `lnet_wait_known_routerstate()`.
    pub fn wait_router_start(&self) {
        let router = self.lock().settings.router;
        if !router.check_routers_before_use || router.alive_router_check_interval <= 0 {
            return;
        }
        let Some(node) = self.node() else { return };
        let limit = router.router_ping_timeout.max(0) + router.alive_router_check_interval;
        let deadline = Instant::now() + Duration::from_secs(limit.unsigned_abs());
        loop {
            let unknown: Vec<Nid> = node
                .routes()
                .iter()
                .map(|route| route.gateway)
                .filter(|gateway| {
                    !node
                        .peer_info(*gateway)
                        .is_some_and(|peer| peer.state.contains(PeerState::RTR_DISCOVERED))
                })
                .collect();
            if unknown.is_empty() {
                return;
            }
            if Instant::now() >= deadline {
                tracing::warn!(
                    gateways = ?unknown,
                    "check_routers_before_use: gateways still unchecked after {limit} s; starting"
                );
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `route:`, `routing:` and `buffers:` of an import (`import --del` deletes the routes;
    /// the kernel's routing and buffers handlers ignore the operation, so both apply the
    /// same way). `routing:` goes through the delayed path of `lnetctl set routing`.
    pub(super) fn import_routing(&self, config: &Config, delete: bool) -> Result<(), ControlError> {
        if delete {
            let node = self.running_node()?;
            for route in &config.routes {
                delete_route(&node, route.net, route.gateway)?;
            }
            return self.apply_routing_blocks(&[], config.routing, config.buffers, false);
        }
        self.apply_routing_blocks(&config.routes, config.routing, config.buffers, false)
    }

    pub(super) fn apply_routing_blocks(
        &self,
        routes: &[model::RouteConfig],
        enable: Option<bool>,
        buffers: Option<Buffers>,
        immediate: bool,
    ) -> Result<(), ControlError> {
        if routes.is_empty() && enable.is_none() && buffers.is_none() {
            return Ok(());
        }
        let node = self.running_node()?;
        if let Some(buffers) = buffers {
            for (class, value) in [
                (BufferClass::Tiny, buffers.tiny),
                (BufferClass::Small, buffers.small),
                (BufferClass::Large, buffers.large),
            ] {
                match value {
                    Some(value) if value < -1 => {
                        return Err(refused(errno::ERANGE, "tiny, small and large must be >= 0"));
                    }
                    Some(value) if value != -1 => set_buffers(&node, class, value)?,
                    _ => {}
                }
            }
        }
        if let Some(enable) = enable {
            self.enable_routing(enable, immediate)?;
        }
        for route in routes {
            let config = RouteConfig {
                net: route.net,
                gateway: route.gateway,
                hops: route.hops.map(u32::from),
                priority: route.priority,
            };
            add_route(&node, config)?;
        }
        Ok(())
    }

    /// Turns forwarding on or off; enabling allocates the pools `routing show` reports.
    fn enable_routing(&self, enable: bool, immediate: bool) -> Result<(), ControlError> {
        let mut state = self.lock_running()?;
        let node = state.node.clone().ok_or(ControlError::NotConfigured)?;
        match node.set_routing(enable, immediate) {
            Ok(()) => {}
            Err(AdminError::ShutDown) => return Err(ControlError::NotConfigured),
            Err(AdminError::Refused(RoutingError::Stopping)) => {
                return Err(refused(
                    errno::EBUSY,
                    "Cannot enable routing while it is being stopped",
                ));
            }
        }
        if enable {
            state.pools_allocated = true;
        }
        tracing::info!(enable, immediate, "routing changed");
        Ok(())
    }
}

/// The routes `route show` and `export` list.
pub(super) fn route_entries(node: &Node) -> Vec<render::RouteEntry> {
    node.routes()
        .iter()
        .map(|route| render::RouteEntry {
            net: route.net,
            gateway: route.gateway,
            // `LNET_UNDEFINED_HOPS` is shown as -1.
            hop: route.hops.and_then(|hops| i32::try_from(hops).ok()).unwrap_or(-1),
            priority: route.priority,
            up: route.alive,
            multi_hop: route.multi_hop,
        })
        .collect()
}

/// The pools and switch `routing show` and `export` print: one `cpt[N]` set per partition,
/// or none when the pools were never allocated.
pub(super) fn routing_view(state: &State, node: &Node) -> render::RoutingShow {
    let cpts = if state.pools_allocated {
        node.router_pools()
            .into_iter()
            .map(|set| {
                set.map(|pool| render::BufferPool {
                    npages: pool.pages,
                    nbuffers: pool.buffers,
                    credits: pool.credits,
                    mincredits: pool.min_credits,
                })
            })
            .collect()
    } else {
        Vec::new()
    };
    render::RoutingShow { cpts, enabled: node.routing_state().enabled() }
}

/// `peer show`'s `state` of each peer NI: `up` or `down` (the status the peer NI last
/// reported, `lnet_is_peer_ni_alive()`) for the NIs of a route's gateway, and for every peer
/// NI while this node forwards on a net whose `peer_timeout` is set
/// (`lnet_peer_aliveness_enabled()`); `NA` otherwise.
/// lustre: api-ni.c `lnet_peer_ni_show_dump()`, lib-lnet.h `lnet_is_peer_ni_alive()`.
pub(super) fn set_peer_states(node: &Node, nets: &[NetSpec], peers: &mut [render::PeerEntry]) {
    let forwards = node.routing_state().forwards();
    let aliveness = |net: Net| {
        forwards && nets.iter().any(|spec| spec.net == net && spec.tunables.peer_timeout > 0)
    };
    for peer in peers {
        let gateway = node.gateway_alive(peer.primary_nid).is_some();
        let info = node.peer_info(peer.primary_nid);
        for ni in &mut peer.nis {
            if !gateway && !aliveness(ni.nid.net()) {
                continue;
            }
            let status = info
                .as_ref()
                .and_then(|info| info.nis.iter().find(|known| known.nid == ni.nid))
                .map(|known| known.status);
            ni.state = if status == Some(LNET_NI_STATUS_UP) {
                render::PeerNiState::Up
            } else {
                render::PeerNiState::Down
            };
        }
    }
}

impl RoutingSnapshot {
    /// What `node` has configured, before a rebuild stops it.
    pub(super) fn of(node: &Node) -> Self {
        Self {
            routes: node.routes(),
            state: node.routing_state(),
            counts: node.router_buffer_counts(),
        }
    }

    /// Gives a freshly built node what the old one had. Forwarding that was starting or
    /// stopping is settled at once; a route the new NI set refuses (its gateway's net is
    /// gone) is logged and left out.
    pub(super) fn restore(&self, node: &Node) {
        let counts = [
            (BufferClass::Tiny, self.counts.tiny),
            (BufferClass::Small, self.counts.small),
            (BufferClass::Large, self.counts.large),
        ];
        for (class, count) in counts {
            if count != 0 {
                let _ = node.set_router_buffers(class, count);
            }
        }
        let forwards = matches!(self.state, RoutingState::Enabled | RoutingState::Starting { .. });
        if forwards {
            let _ = node.set_routing(true, true);
        }
        for route in &self.routes {
            let config = RouteConfig {
                net: route.net,
                gateway: route.gateway,
                hops: route.hops,
                priority: route.priority,
            };
            if let Err(error) = node.route_add(config) {
                tracing::warn!(net = %route.net, gateway = %route.gateway, %error, "route not restored");
            }
        }
    }
}

/// The net and gateways of an add or delete, checked as `lnet_route_cmd()` checks them.
fn route_target(spec: &RouteSpec) -> Result<(Net, Vec<Nid>), ControlError> {
    let Some(text) = spec.net.as_deref() else {
        return Err(refused(errno::ENODEV, "missing mandatory parameter: network"));
    };
    let net: Net =
        text.trim().parse().map_err(|_| refused(errno::ENODEV, "cannot parse remote net"))?;
    if net.lnd == LndType::LO {
        return Err(refused(EACCES, "setting @lo not allowed"));
    }
    if net == Net::ANY {
        return Err(refused(ENXIO, "setting LNET_NET_ANY not allowed"));
    }
    let gateways = spec
        .gateways
        .iter()
        .map(|text| {
            text.trim().parse::<Nid>().map_err(|_| refused(errno::ENODEV, "cannot parse gateway"))
        })
        .collect::<Result<Vec<Nid>, _>>()?;
    if gateways.is_empty() {
        return Err(refused(errno::ENODEV, "missing mandatory parameter: gateway"));
    }
    Ok((net, gateways))
}

/// Adds one route, with the kernel's messages for its refusals.
fn add_route(node: &Node, config: RouteConfig) -> Result<(), ControlError> {
    match node.route_add(config) {
        Ok(()) => {
            tracing::info!(net = %config.net, gateway = %config.gateway, "route added");
            Ok(())
        }
        Err(AdminError::ShutDown) => Err(ControlError::NotConfigured),
        Err(AdminError::Refused(error)) => Err(add_error(error)),
    }
}

/// Deletes the route to `net` through `gateway`'s peer.
fn delete_route(node: &Node, net: Net, gateway: Nid) -> Result<(), ControlError> {
    match node.route_del(Some(net), Some(gateway)) {
        Ok(removed) => {
            tracing::info!(%net, %gateway, removed, "route deleted");
            Ok(())
        }
        Err(AdminError::ShutDown) => Err(ControlError::NotConfigured),
        Err(AdminError::Refused(error)) => Err(ControlError::Refused {
            errno: route_errno(error),
            descr: "failed to delete route".into(),
        }),
    }
}

/// Sets one class's buffer count (the kernel's parameters are `int`).
fn set_buffers(node: &Node, class: BufferClass, value: i64) -> Result<(), ControlError> {
    let count = i32::try_from(value)
        .ok()
        .and_then(|count| u32::try_from(count).ok())
        .ok_or_else(|| refused(errno::EINVAL, "buffer count out of range"))?;
    node.set_router_buffers(class, count).map_err(|_| ControlError::NotConfigured)?;
    tracing::info!(?class, count, "router buffers changed");
    Ok(())
}

/// lustre: api-ni.c `lnet_route_cmd()`, the `NLM_F_CREATE` messages.
fn add_error(error: RouteError) -> ControlError {
    let descr = match error {
        RouteError::Invalid => "invalid settings for route creation",
        RouteError::GatewayUnreachable => "No interface configured on the same net as gateway",
        RouteError::Exists => "Route already exists or the specified network is local",
        RouteError::TableFull | RouteError::NotFound => "failed to create route",
    };
    ControlError::Refused { errno: route_errno(error), descr: descr.into() }
}

/// The negative errno of a refusal (router.c `lnet_add_route()`, `lnet_del_route()`).
fn route_errno(error: RouteError) -> i32 {
    -match error {
        RouteError::Invalid => errno::EINVAL,
        RouteError::Exists => errno::EEXIST,
        RouteError::GatewayUnreachable => errno::EHOSTUNREACH,
        RouteError::TableFull => ENOMEM,
        RouteError::NotFound => errno::ENOENT,
    }
}

fn refused(positive_errno: i32, descr: &str) -> ControlError {
    ControlError::refused(positive_errno, descr)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(net: Option<&str>, gateways: &[&str]) -> RouteSpec {
        RouteSpec {
            net: net.map(Into::into),
            gateways: gateways.iter().map(|gateway| gateway.to_string()).collect(),
            ..RouteSpec::default()
        }
    }

    #[test]
    fn route_targets_are_checked_as_the_kernel_checks_them() {
        let (net, gateways) = route_target(&spec(Some("tcp1"), &["10.0.0.1@tcp"])).unwrap();
        assert_eq!((net.to_string(), gateways.len()), ("tcp1".to_string(), 1));
        let cases = [
            (spec(None, &["10.0.0.1@tcp"]), -19, "missing mandatory parameter: network"),
            (spec(Some("nonet"), &["10.0.0.1@tcp"]), -19, "cannot parse remote net"),
            (spec(Some("lo"), &["10.0.0.1@tcp"]), -13, "setting @lo not allowed"),
            (spec(Some("tcp1"), &[]), -19, "missing mandatory parameter: gateway"),
            (spec(Some("tcp1"), &["10.0.0@tcp"]), -19, "cannot parse gateway"),
        ];
        for (spec, errno, descr) in cases {
            let error = route_target(&spec).unwrap_err();
            assert_eq!((error.errno(), error.descr().as_str()), (errno, descr), "{spec:?}");
        }
    }

    #[test]
    fn engine_refusals_carry_the_kernels_errnos_and_texts() {
        let error = add_error(RouteError::GatewayUnreachable);
        assert_eq!(error.errno(), -113);
        assert_eq!(error.descr(), "No interface configured on the same net as gateway");
        assert_eq!(add_error(RouteError::Exists).errno(), -17);
        assert_eq!(add_error(RouteError::Invalid).errno(), -22);
        assert_eq!(add_error(RouteError::TableFull).errno(), -12);
        assert_eq!(route_errno(RouteError::NotFound), -2);
    }
}
