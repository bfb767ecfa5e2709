//! Routing on a running node: what `lnetctl route add|del|show`, `set routing` and
//! `set tiny_buffers|small_buffers|large_buffers` reach in the kernel. Routes, the routing
//! state and the router buffer pools live in the engine (`ulnet_proto::engine::routing`);
//! these calls change them with the core locked, at the current time, and carry out what a
//! change produced (a new route's gateway is pinged at once by the router checker).
//!
//! lustre: lnet/lnet/router.c (`lnet_add_route`, `lnet_del_route`, `lnet_rtrpools_enable`,
//! `lnet_rtrpools_disable`, `lnet_rtrpools_adjust`), api-ni.c `LNetCtl()`
//! (`IOC_LIBCFS_ADD_ROUTE`, `IOC_LIBCFS_DEL_ROUTE`, `IOC_LIBCFS_CONFIG_RTR`,
//! `IOC_LIBCFS_ADD_BUF`).

use ulnet_proto::addr::{Net, Nid};
use ulnet_proto::engine::{
    BufferClass, BufferCounts, BufferPoolStats, RouteConfig, RouteError, RouteInfo, RoutingError,
    RoutingState,
};

use crate::admin::AdminError;
use crate::calls::api_calls;
use crate::error::ShutDown;
use crate::node::Node;

api_calls! {
    /// `lnetctl route add`: a route to `config.net` through `config.gateway` (a NID on a local
    /// net). The gateway becomes a peer and is checked by the router checker at once.
    fn route_add(&mut self, config: RouteConfig) -> Result<(), AdminError<RouteError>> {
        let now = self.exclusive_now();
        self.core().engine.route_add(now, config).map_err(AdminError::Refused)
    }
    shut_down => Err(AdminError::ShutDown);

    /// `lnetctl route del`: the routes to `net` (every net when `None`) through the peer that
    /// owns `gateway` (every gateway when `None`); returns how many went.
    /// [`RouteError::NotFound`] when `net` has no route at all.
    fn route_del(
        &mut self,
        net: Option<Net>,
        gateway: Option<Nid>,
    ) -> Result<usize, AdminError<RouteError>> {
        let now = self.exclusive_now();
        self.core().engine.route_del(now, net, gateway).map_err(AdminError::Refused)
    }
    shut_down => Err(AdminError::ShutDown);

    /// `lnetctl set routing 1|0` (`immediate` false: the node advertises the change only
    /// after `alive_router_check_interval + router_ping_timeout`), or the configuration
    /// file's `routing: enable` and the module parameter `forwarding=enabled` (`immediate`
    /// true: at once).
    fn set_routing(
        &mut self,
        enable: bool,
        immediate: bool,
    ) -> Result<(), AdminError<RoutingError>> {
        let now = self.exclusive_now();
        self.core().engine.set_routing(now, enable, immediate).map_err(AdminError::Refused)
    }
    shut_down => Err(AdminError::ShutDown);

    /// `lnetctl set tiny_buffers|small_buffers|large_buffers`: the number of router buffers
    /// of one class (0: the default); a live pool grows at once and shrinks as buffers come
    /// back.
    fn set_router_buffers(&mut self, class: BufferClass, count: u32) -> Result<(), ShutDown> {
        let now = self.exclusive_now();
        self.core().engine.set_router_buffers(now, class, count);
        Ok(())
    }
    shut_down => Err(ShutDown);
}

impl Node {
    /// `lnetctl route show`: every route, with whether it is alive now.
    pub fn routes(&self) -> Vec<RouteInfo> {
        self.locked(|core, _| core.engine.routes())
    }

    /// The routing state; `routing show`'s `enable` is [`RoutingState::enabled`].
    pub fn routing_state(&self) -> RoutingState {
        self.locked(|core, _| core.engine.routing_state())
    }

    /// The router buffer counts requested (0: default), as `buffers:` exports them.
    pub fn router_buffer_counts(&self) -> BufferCounts {
        self.locked(|core, _| core.engine.router_buffer_counts())
    }

    /// `lnetctl routing show`: the tiny, small and large pools of each partition, in CPT
    /// order.
    pub fn router_pools(&self) -> Vec<[BufferPoolStats; 3]> {
        self.locked(|core, _| core.engine.router_pools())
    }

    /// Whether the peer owning `nid` is a gateway of some route and, if so, whether it is
    /// alive.
    pub fn gateway_alive(&self, nid: Nid) -> Option<bool> {
        self.locked(|core, _| core.engine.gateway_alive(nid))
    }
}

#[cfg(test)]
mod tests {
    use ulnet_proto::engine::{LndKind, NiConfig};

    use super::*;
    use crate::MemFabric;

    fn nid(text: &str) -> Nid {
        text.parse().unwrap()
    }

    #[test]
    fn routes_are_added_listed_and_deleted() {
        let fabric = MemFabric::new(Default::default());
        let node = Node::builder()
            .mem_ni_config(NiConfig::new(nid("10.0.0.1@tcp"), LndKind::Tcp), &fabric)
            .build()
            .unwrap();
        let remote: Net = "tcp1".parse().unwrap();
        let gateway = nid("10.0.0.2@tcp");
        let config = RouteConfig { net: remote, gateway, hops: Some(2), priority: 3 };
        node.route_add(config).unwrap();
        assert_eq!(node.route_add(config), Err(AdminError::Refused(RouteError::Exists)));
        let unreachable = RouteConfig { gateway: nid("10.0.9.2@tcp9"), ..config };
        assert_eq!(
            node.route_add(unreachable),
            Err(AdminError::Refused(RouteError::GatewayUnreachable))
        );
        let routes = node.routes();
        assert_eq!(routes.len(), 1);
        assert_eq!((routes[0].net, routes[0].gateway), (remote, gateway));
        assert_eq!((routes[0].hops, routes[0].priority), (Some(2), 3));
        assert!(node.gateway_alive(gateway).is_some());
        assert_eq!(node.route_del(Some(remote), None), Ok(1));
        assert_eq!(
            node.route_del(Some(remote), None),
            Err(AdminError::Refused(RouteError::NotFound))
        );
        assert!(node.routes().is_empty());
    }

    #[test]
    fn routing_and_buffers_change_the_pools() {
        let node = Node::loopback().unwrap();
        assert!(node.router_pools().iter().flatten().all(|pool| pool.buffers == 0));
        node.set_router_buffers(BufferClass::Tiny, 600).unwrap();
        assert_eq!(node.router_buffer_counts().tiny, 600);
        node.set_routing(true, true).unwrap();
        assert!(node.routing_state().enabled());
        assert_eq!(node.router_pools()[0][0].buffers, 600);
        node.set_routing(false, true).unwrap();
        assert_eq!(node.routing_state(), RoutingState::Disabled);
        node.shutdown();
        assert_eq!(node.set_routing(true, true), Err(AdminError::ShutDown));
    }
}
