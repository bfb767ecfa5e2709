//! Building a node and its routing: addresses, engines, routes with their gateways resolved,
//! router buffers and routing on; and the workloads resolved to node indices.

use super::*;

impl World {
    /// Each group's routes with their gateways resolved: a NID as written, or each selected
    /// node's NID on the `@` net, else on the first net of the group it has.
    pub(super) fn resolve_routes(&self) -> Result<Vec<Vec<RouteConfig>>, ScenarioError> {
        let mut all = Vec::with_capacity(self.scenario.nodes.len());
        for group in &self.scenario.nodes {
            let group_nets: Vec<Net> =
                group.nis.iter().map(|ni| parse_net(&ni.net)).collect::<Result<_, _>>()?;
            let mut routes = Vec::new();
            for route in &group.routes {
                let net = parse_net(&route.net)?;
                let config = |gateway| RouteConfig {
                    net,
                    gateway,
                    hops: route.hops,
                    priority: route.priority,
                };
                match Gateway::parse(&route.gateway)? {
                    Gateway::Nid(nid) => routes.push(config(nid)),
                    Gateway::Nodes { selector, net: on } => {
                        let text = match selector.range {
                            Some((low, high)) => format!("{}[{low}-{high}]", selector.group),
                            None => selector.group.clone(),
                        };
                        for gateway in self.select(&text)? {
                            let nid = group_nets
                                .iter()
                                .filter(|net| on.is_none_or(|on| on == **net))
                                .find_map(|net| self.endpoint_on(gateway, *net))
                                .and_then(|e| self.endpoints.get(e as usize))
                                .map(|e| e.nid)
                                .ok_or_else(|| {
                                    ScenarioError::Invalid(format!(
                                        "group {:?}: route to {}: gateway node {gateway} shares \
                                         no net with the group",
                                        group.name, route.net
                                    ))
                                })?;
                            routes.push(config(nid));
                        }
                    }
                }
            }
            all.push(routes);
        }
        Ok(all)
    }

    /// Router buffers, routing and routes on `node`, as its group says (`lnetctl set
    /// *_buffers`, `set routing 1`, `route add`).
    pub(super) fn configure_routing(&mut self, node: u32) -> Result<(), ScenarioError> {
        let now = self.now;
        let Some(sim) = self.nodes.get_mut(node as usize) else { return Ok(()) };
        let group = sim.group as usize;
        let Some(spec) = self.scenario.nodes.get(group) else { return Ok(()) };
        let buffers = self.group_tunables.get(group).map_or([0; 3], |t| t.router_buffers);
        let mut configured = false;
        for (class, count) in BufferClass::ALL.into_iter().zip(buffers) {
            if count > 0 {
                sim.engine.set_router_buffers(now, class, count);
                configured = true;
            }
        }
        if spec.routing {
            sim.engine.set_routing(now, true, true).map_err(|error| {
                ScenarioError::Invalid(format!("group {:?}: routing: {error}", spec.name))
            })?;
            configured = true;
        }
        for route in self.group_routes.get(group).map_or(&[][..], Vec::as_slice) {
            sim.engine.route_add(now, *route).map_err(|error| {
                ScenarioError::Invalid(format!(
                    "group {:?}: route to {} through {}: {error}",
                    spec.name, route.net, route.gateway
                ))
            })?;
            configured = true;
        }
        if configured {
            self.drain(node);
        }
        Ok(())
    }
}

/// Node `index`'s address on rail `rail` of a net: `10.0.0.0 + (rail << 20) + index + 1`
/// (the scenario bounds keep both fields apart: nodes below 2^20, rails below 16).
pub(super) fn node_address(index: u32, rail: u32) -> u32 {
    (10u32 << 24) | (rail << 20) | (index + 1)
}

/// A node's engine: its NIs on `nids`, its group's tunables. A restarted node (`incarnation`
/// above 0) gets a new interface cookie, as a new process would.
pub(super) fn build_engine(
    index: u32,
    incarnation: u32,
    tunables: &NodeTunables,
    nids: &[Nid],
) -> Result<Engine, ScenarioError> {
    let nis = nids
        .iter()
        .map(|nid| NiConfig {
            tunables: tunables.net,
            lnd_timeout: Some(tunables.sock.sock_timeout),
            ..NiConfig::new(*nid, LndKind::Fabric)
        })
        .collect();
    let config = EngineConfig {
        interface_cookie: 0x5100_0000_0000 + u64::from(index) + (u64::from(incarnation) << 24),
        pid: LNET_PID_LUSTRE,
        tunables: tunables.engine,
        nis,
        limits: ulnet_proto::engine::Limits::default(),
        partitions: ulnet_proto::engine::cpt::Partitions::default(),
    };
    Engine::new(config).map_err(|error| ScenarioError::Invalid(format!("node {index}: {error}")))
}

/// Each workload resolved to node indices.
pub(super) fn plans(scenario: &Scenario, end: Time) -> Result<Vec<Plan>, ScenarioError> {
    let mut group_start = HashMap::new();
    let mut first = 0u64;
    for group in &scenario.nodes {
        group_start.insert(group.name.clone(), (first, group.count));
        first += group.count;
    }
    let range = |text: &str| -> Result<std::ops::Range<u32>, ScenarioError> {
        let selector = NodeSelector::parse(text)?;
        let (start, count) = *group_start
            .get(&selector.group)
            .ok_or_else(|| crate::scenario::SelectError::UnknownGroup(selector.group.clone()))?;
        let (low, high) = selector.range.unwrap_or((0, count.saturating_sub(1)));
        Ok((start + low) as u32..(start + high + 1) as u32)
    };
    let mut plans = Vec::new();
    for (index, spec) in scenario.workloads.iter().enumerate() {
        let (kind, workload) = spec.parts();
        let clients = range(&workload.clients)?;
        let servers = range(&workload.servers)?;
        let per_client =
            workload.servers_per_client.unwrap_or(u32::MAX).min(servers.len() as u32).max(1);
        let (bulk_len, bulks) = match kind {
            WorkloadKind::Ping => (0, 0),
            WorkloadKind::Brw => (workload.size.map_or(0, |s| s.0) as u32, 1),
            WorkloadKind::RpcStream => {
                let size = workload.rpc_size.map_or(0, |s| s.0);
                let bulks = size.div_ceil(crate::scenario::MAX_BULK).max(1);
                (size.div_ceil(bulks) as u32, bulks as u8)
            }
        };
        let depth = match kind {
            WorkloadKind::RpcStream => workload.max_rpcs_in_flight.unwrap_or(1),
            _ => workload.concurrency.unwrap_or(1),
        };
        plans.push(Plan {
            label: spec.label(index),
            kind,
            op: workload.op.unwrap_or(crate::scenario::Operation::Write),
            bulk_len,
            bulks,
            clients,
            servers,
            per_client,
            shift: workload.shift,
            depth,
            start: Time::ZERO + workload.start.0,
            stop: workload.stop.map_or(end, |stop| Time::ZERO + stop.0),
            rpc_timeout: workload.rpc_timeout.map_or(DEFAULT_RPC_TIMEOUT, |t| t.0),
        });
    }
    Ok(plans)
}
