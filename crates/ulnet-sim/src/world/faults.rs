//! The fault timeline: links, black holes, partitions, drop and delay rules, nodes that lose
//! every link or stop and start again; and the selectors faults name nodes with.

use super::*;

impl World {
    pub(super) fn apply_fault(&mut self, index: usize) -> Result<(), RunError> {
        let Some(fault) = self.faults.get(index).cloned() else { return Ok(()) };
        self.totals.faults_applied += 1;
        let now = self.now;
        match fault {
            FaultSpec::LinkDown(spec) | FaultSpec::LinkUp(spec) => {
                let down = matches!(self.faults.get(index), Some(FaultSpec::LinkDown(_)));
                let net = parse_net(&spec.net)?;
                for node in self.select(&spec.node)? {
                    let Some(endpoint) = self.endpoint_on(node, net) else { continue };
                    let (ni, _) = match self.endpoints.get_mut(endpoint as usize) {
                        Some(entry) => {
                            entry.down = down;
                            (entry.ni, entry.nid)
                        }
                        None => continue,
                    };
                    if let Some(sim) = self.nodes.get_mut(node as usize) {
                        // The OS reports the link: the driver raises the NI's fatal flag.
                        let _ = sim.engine.set_ni_fatal(now, ni, down);
                    }
                    self.drain(node);
                }
            }
            FaultSpec::Blackhole(spec) | FaultSpec::Partition(spec) | FaultSpec::Heal(spec) => {
                let kind = match self.faults.get(index) {
                    Some(FaultSpec::Blackhole(_)) => 0,
                    Some(FaultSpec::Partition(_)) => 1,
                    _ => 2,
                };
                let net = spec.net.as_deref().map(parse_net).transpose()?;
                let left = self.select(&spec.between[0])?;
                let right = self.select(&spec.between[1])?;
                for &a in &left {
                    for &b in &right {
                        for (x, y) in self.endpoint_pairs(a, b, net) {
                            let key = (x.min(y), x.max(y));
                            match kind {
                                0 => {
                                    self.blackholes.insert(key);
                                }
                                1 => {
                                    self.partitions.insert(key);
                                }
                                _ => {
                                    self.blackholes.remove(&key);
                                    self.partitions.remove(&key);
                                }
                            }
                        }
                    }
                }
            }
            FaultSpec::DropRule(spec) => {
                for node in self.select(&spec.node)? {
                    let matching = self.fault_match(&spec.source, &spec.destination)?;
                    let rule = DropRule {
                        matching,
                        rate: spec.rate,
                        interval: spec.interval,
                        health_mask: 0,
                        random: false,
                        drop_all: spec.all,
                    };
                    if let Some(sim) = self.nodes.get_mut(node as usize) {
                        if let Err(error) = sim.engine.fault_drop_add(now, rule) {
                            return Err(RunError::Scenario(ScenarioError::Invalid(format!(
                                "drop_rule: {error}"
                            ))));
                        }
                    }
                    self.drain(node);
                }
            }
            FaultSpec::DelayRule(spec) => {
                for node in self.select(&spec.node)? {
                    let matching = self.fault_match(&spec.source, &spec.destination)?;
                    let rule = DelayRule {
                        matching,
                        rate: spec.rate,
                        interval: spec.interval,
                        latency: spec.latency,
                    };
                    if let Some(sim) = self.nodes.get_mut(node as usize) {
                        if let Err(error) = sim.engine.fault_delay_add(now, rule) {
                            return Err(RunError::Scenario(ScenarioError::Invalid(format!(
                                "delay_rule: {error}"
                            ))));
                        }
                    }
                    self.drain(node);
                }
            }
            FaultSpec::NodeDown(spec) | FaultSpec::NodeUp(spec) => {
                let down = matches!(self.faults.get(index), Some(FaultSpec::NodeDown(_)));
                for node in self.select(&spec.node)? {
                    self.set_node_links(node, down);
                }
            }
            FaultSpec::NodeStop(spec) => {
                for node in self.select(&spec.node)? {
                    self.stop_node(node);
                }
            }
            FaultSpec::NodeStart(spec) => {
                for node in self.select(&spec.node)? {
                    self.start_node(node)?;
                }
            }
        }
        Ok(())
    }

    /// Every NI of `node` loses its link (`down`) or gets it back; the node is told, as
    /// netlink would tell it.
    pub(super) fn set_node_links(&mut self, node: u32, down: bool) {
        let now = self.now;
        let endpoints = self.nodes.get(node as usize).map(|n| n.endpoints.clone());
        for endpoint in endpoints.unwrap_or_default() {
            let Some(entry) = self.endpoints.get_mut(endpoint as usize) else { continue };
            entry.down = down;
            let ni = entry.ni;
            if let Some(sim) = self.nodes.get_mut(node as usize).filter(|n| !n.stopped) {
                let _ = sim.engine.set_ni_fatal(now, ni, down);
            }
        }
        if !self.nodes.get(node as usize).is_some_and(|n| n.stopped) {
            self.drain(node);
        }
    }

    /// `node`'s process stops: it does nothing more, what it was reading is lost, and its
    /// connections are reset, which each peer's LND reports to its engine (`lnet_notify`).
    pub(super) fn stop_node(&mut self, node: u32) {
        let Some(sim) = self.nodes.get_mut(node as usize).filter(|n| !n.stopped) else { return };
        sim.stopped = true;
        sim.timer = None;
        let endpoints = sim.endpoints.clone();
        self.stopped_nodes += 1;
        let dropped = self.lanes.forget_node(node);
        self.drop_frames(dropped);
        self.forward_bytes.retain(|(owner, _), _| *owner != node);
        // The resets reach the peers at once; their LNDs report the connections gone.
        for endpoint in endpoints {
            let pairs: Vec<PairId> = self.pairs.pairs_of(endpoint).collect();
            for pair in pairs {
                self.reset_pair(pair, endpoint);
            }
        }
    }

    /// A stopped node starts again: a fresh engine (a new process) with its group's
    /// configuration; NIs whose link is down are reported so.
    pub(super) fn start_node(&mut self, node: u32) -> Result<(), RunError> {
        let now = self.now;
        let Some(sim) = self.nodes.get(node as usize).filter(|n| n.stopped) else { return Ok(()) };
        let incarnation = sim.incarnation + 1;
        let tunables = self
            .group_tunables
            .get(sim.group as usize)
            .copied()
            .ok_or_else(|| self.violation(format!("node {node} has no group")))?;
        let links: Vec<(Nid, bool)> = sim
            .endpoints
            .iter()
            .filter_map(|e| self.endpoints.get(*e as usize))
            .map(|e| (e.nid, e.down))
            .collect();
        let nids: Vec<Nid> = links.iter().map(|(nid, _)| *nid).collect();
        let mut engine = build_engine(node, incarnation, &tunables, &nids)?;
        for (nid, down) in links {
            if let Some(ni) = engine.ni_for_nid(nid).filter(|_| down) {
                let _ = engine.set_ni_fatal(now, ni, true);
            }
        }
        if let Some(sim) = self.nodes.get_mut(node as usize) {
            sim.engine = engine;
            sim.stopped = false;
            sim.incarnation = incarnation;
            sim.timer = None;
        }
        self.stopped_nodes -= 1;
        self.configure_routing(node)?;
        self.drain(node);
        Ok(())
    }

    /// Removes a drop or delay rule at its `until` (`lnetctl fault drop del`).
    pub(super) fn end_fault(&mut self, index: usize) -> Result<(), RunError> {
        let Some(fault) = self.faults.get(index).cloned() else { return Ok(()) };
        let now = self.now;
        let (node, source, destination, drop) = match &fault {
            FaultSpec::DropRule(rule) => (&rule.node, &rule.source, &rule.destination, true),
            FaultSpec::DelayRule(rule) => (&rule.node, &rule.source, &rule.destination, false),
            _ => return Ok(()),
        };
        let matching = self.fault_match(source, destination)?;
        for node in self.select(node)? {
            if let Some(sim) = self.nodes.get_mut(node as usize) {
                if drop {
                    sim.engine.fault_drop_del(matching.source, matching.destination);
                } else {
                    // Held messages are released as the kernel's `fault delay del` does.
                    sim.engine.fault_delay_del(now, matching.source, matching.destination);
                }
            }
            self.drain(node);
        }
        Ok(())
    }

    /// The nodes a selector names.
    pub(super) fn select(&self, text: &str) -> Result<Vec<u32>, ScenarioError> {
        let selector = NodeSelector::parse(text)?;
        let mut first = 0u64;
        for group in &self.scenario.nodes {
            if group.name == selector.group {
                let (low, high) = selector.range.unwrap_or((0, group.count.saturating_sub(1)));
                return Ok((first + low..=first + high).map(|n| n as u32).collect());
            }
            first += group.count;
        }
        Err(ScenarioError::Select(crate::scenario::SelectError::UnknownGroup(selector.group)))
    }

    pub(super) fn endpoint_on(&self, node: u32, net: Net) -> Option<EndpointId> {
        let sim = self.nodes.get(node as usize)?;
        sim.endpoints
            .iter()
            .copied()
            .find(|e| self.endpoints.get(*e as usize).is_some_and(|e| e.nid.net() == net))
    }

    pub(super) fn endpoint_pairs(
        &self,
        a: u32,
        b: u32,
        net: Option<Net>,
    ) -> Vec<(EndpointId, EndpointId)> {
        let mut pairs = Vec::new();
        let nets: Vec<Net> = match net {
            Some(net) => vec![net],
            None => self.nets.clone(),
        };
        for net in nets {
            if let (Some(x), Some(y)) = (self.endpoint_on(a, net), self.endpoint_on(b, net)) {
                pairs.push((x, y));
            }
        }
        pairs
    }

    /// A fault rule's NIDs: `*`, a NID, or a selector naming one node (its first NID).
    pub(super) fn fault_match(
        &self,
        source: &str,
        destination: &str,
    ) -> Result<FaultMatch, ScenarioError> {
        let nid = |text: &str| -> Result<Nid, ScenarioError> {
            if text == "*" {
                return Ok(Nid::ANY);
            }
            if let Ok(nid) = text.parse::<Nid>() {
                return Ok(nid);
            }
            let nodes = self.select(text)?;
            match nodes.as_slice() {
                [node] => Ok(self.first_nids.get(*node as usize).copied().unwrap_or(Nid::ANY)),
                _ => Err(ScenarioError::Invalid(format!(
                    "fault rule: {text:?} names more than one node"
                ))),
            }
        };
        Ok(FaultMatch {
            source: nid(source)?,
            destination: nid(destination)?,
            local_nid: Nid::ANY,
            portal_mask: 0,
            message_mask: 0,
        })
    }
}

pub(super) fn fault_time(fault: &FaultSpec) -> Duration {
    match fault {
        FaultSpec::LinkDown(spec) | FaultSpec::LinkUp(spec) => spec.at.0,
        FaultSpec::Blackhole(spec) | FaultSpec::Partition(spec) | FaultSpec::Heal(spec) => {
            spec.at.0
        }
        FaultSpec::DropRule(spec) => spec.at.0,
        FaultSpec::DelayRule(spec) => spec.at.0,
        FaultSpec::NodeDown(spec)
        | FaultSpec::NodeUp(spec)
        | FaultSpec::NodeStop(spec)
        | FaultSpec::NodeStart(spec) => spec.at.0,
    }
}
