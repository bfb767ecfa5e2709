//! A control server over a small in-memory node, and a runner for the `ulnetctl` binary.
//!
//! The node keeps nets, peers, global settings (ulnet-config's `GlobalSettings`, so `set`
//! has Lustre's checks) and counters, and answers every request kind the way the kernel's
//! handlers do closely enough to exercise each output and error path of the CLI. It is not
//! the daemon's handler: that one sits on a live node.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)] // Test support.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use ulnet_config::model::{self, ExecCommand, GlobalSettings, ImportMode as ConfigImportMode};
use ulnet_config::render::{
    self, LndTunablesShow, LocalNiEntry, LocalNiHealth, MessageCounts, NetEntry, NetTunables,
    PeerEntry, PeerNiEntry, PeerNiHealth, PeerNiState, Statistics, UdspInfo,
};
use ulnet_control::data::{self, ExportState, ManageReply, PingFailure, PingReply};
use ulnet_control::message::{ConnEntry, ConnKind, CpuPartitions, NidDist, Udsp};
use ulnet_control::message::{
    ExecReply, ImportMode, ImportReply, LocalNiSpec, NetAdd, NetDel, Ping, SetParam, ShownObjects,
    errno,
};
use ulnet_control::{ControlError, Request, Response, Server, listen};
use ulnet_proto::addr::{LndType, Net, Nid};
use ulnet_proto::engine::{UdspRule, UdspRules};

mod process;
use process::run_program;
pub use process::{Run, TempDir};

/// Host interfaces the node pretends to have.
const INTERFACES: &[(&str, [u8; 4])] = &[("eth0", [192, 168, 1, 2]), ("eth1", [192, 168, 2, 2])];

/// Peers that answer pings (their NIDs); anything else times out.
const REACHABLE: &[[u8; 4]] = &[[192, 168, 1, 3], [192, 168, 1, 4]];

#[derive(Debug)]
pub struct State {
    pub configured: bool,
    pub nets: Vec<NetEntry>,
    pub peers: Vec<PeerEntry>,
    pub global: GlobalSettings,
    pub stats: render::StatsShow,
    /// Every request received, in order.
    pub requests: Vec<Request>,
    /// Fault rules, newest first.
    pub faults: Vec<ulnet_control::message::FaultRuleEntry>,
    pub routes: Vec<render::RouteEntry>,
    /// The router buffer pools, once routing was enabled.
    pub routing: render::RoutingShow,
    /// UDSP rules, kept by the engine's rule list (not applied: there are no NIs here).
    pub udsp: UdspRules,
}

fn tcp(octets: [u8; 4]) -> Nid {
    Nid::ipv4(Net::TCP, Ipv4Addr::from(octets))
}

fn local_ni(nid: Nid, interface: Option<&str>, settings: &GlobalSettings) -> LocalNiEntry {
    let lo = nid.net() == Net::LO;
    LocalNiEntry {
        nid,
        up: true,
        interface: interface.map(str::to_string),
        statistics: Statistics {
            send_count: 12,
            recv_count: 10,
            drop_count: 0,
            ..Default::default()
        },
        udsp: UdspInfo::default(),
        sent: MessageCounts { put: 8, get: 4, ..Default::default() },
        received: MessageCounts { put: 6, get: 2, reply: 2, ..Default::default() },
        dropped: MessageCounts::default(),
        health: LocalNiHealth::default(),
        tunables: if lo {
            NetTunables::default()
        } else {
            NetTunables { peer_timeout: 180, peer_credits: 8, peer_buffer_credits: 0, credits: 256 }
        },
        lnd_tunables: (!lo).then(|| LndTunablesShow::Socklnd {
            conns_per_peer: 1,
            timeout: settings.lnd_timeout() as u32,
            tos: -1,
        }),
        dev_cpt: -1,
        cpts: vec![0, 1],
    }
}

fn peer(primary: [u8; 4], others: &[Nid]) -> PeerEntry {
    let nids = std::iter::once(tcp(primary)).chain(others.iter().copied());
    PeerEntry {
        primary_nid: tcp(primary),
        multi_rail: true,
        state: 0x111,
        nis: nids
            .map(|nid| PeerNiEntry {
                nid,
                udsp: UdspInfo::default(),
                state: PeerNiState::NotApplicable,
                max_ni_tx_credits: 8,
                available_tx_credits: 8,
                min_tx_credits: 7,
                tx_q_num_of_buf: 0,
                available_rtr_credits: 8,
                min_rtr_credits: 8,
                refcount: 1,
                statistics: Statistics { send_count: 2, recv_count: 2, ..Default::default() },
                sent: MessageCounts { get: 1, put: 1, ..Default::default() },
                received: MessageCounts { reply: 1, ack: 1, ..Default::default() },
                dropped: MessageCounts::default(),
                health: PeerNiHealth::default(),
            })
            .collect(),
    }
}

impl State {
    /// A configured node: `lo`, `tcp` on eth0, two peers.
    pub fn configured() -> Self {
        let global = GlobalSettings::default();
        let mut state = Self::unconfigured();
        state.configure(false);
        state.nets.push(NetEntry {
            net: Net::TCP,
            nis: vec![local_ni(tcp([192, 168, 1, 2]), Some("eth0"), &global)],
        });
        state.peers = vec![
            peer(
                [192, 168, 1, 3],
                &[Nid::ipv4(Net::new(LndType::SOCK, 1), Ipv4Addr::new(10, 1, 0, 3))],
            ),
            peer([192, 168, 1, 4], &[]),
        ];
        state
    }

    pub fn unconfigured() -> Self {
        Self {
            configured: false,
            nets: Vec::new(),
            peers: Vec::new(),
            global: GlobalSettings::default(),
            stats: render::StatsShow {
                msgs_alloc: 1,
                msgs_max: 16,
                send_count: 120,
                recv_count: 118,
                drop_count: 2,
                send_length: 1 << 20,
                recv_length: 1 << 19,
                ..Default::default()
            },
            requests: Vec::new(),
            faults: Vec::new(),
            routes: Vec::new(),
            routing: render::RoutingShow::default(),
            udsp: UdspRules::default(),
        }
    }

    fn configure(&mut self, all: bool) {
        if !self.configured {
            self.configured = true;
            self.nets =
                vec![NetEntry { net: Net::LO, nis: vec![local_ni(Nid::LO_0, None, &self.global)] }];
        }
        if all && !self.nets.iter().any(|net| net.net == Net::TCP) {
            let ni = local_ni(tcp([192, 168, 1, 2]), Some("eth0"), &self.global);
            self.nets.push(NetEntry { net: Net::TCP, nis: vec![ni] });
        }
    }

    /// A kernel-like fault rule table: no validation beyond the kernel's rate/interval check.
    fn fault(&mut self, fault: ulnet_control::message::Fault) -> Result<Response, ControlError> {
        use ulnet_control::message::{FaultOp, FaultRuleEntry, errno};
        let kind = fault.kind;
        match fault.op {
            FaultOp::Add(spec) => {
                if (spec.rate == 0) == (spec.interval == 0) {
                    return Err(ControlError::refused(errno::EINVAL, ""));
                }
                let entry = FaultRuleEntry {
                    kind,
                    source: spec.source,
                    destination: spec.destination,
                    portal_mask: spec.portal_mask,
                    message_mask: if spec.message_mask == 0 { 15 } else { spec.message_mask },
                    rate: spec.rate,
                    interval: spec.interval,
                    latency: spec.latency,
                    hits: 0,
                    count: 0,
                    put: 0,
                    ack: 0,
                    get: 0,
                    reply: 0,
                };
                self.faults.insert(0, entry);
                Ok(Response::Done)
            }
            FaultOp::Del { source, destination } => {
                let before = self.faults.len();
                self.faults.retain(|rule| {
                    rule.kind != kind
                        || !(source == "<?>" || rule.source == source)
                        || !(destination == "<?>" || rule.destination == destination)
                });
                if self.faults.len() == before {
                    return Err(ControlError::refused(errno::ENOENT, ""));
                }
                Ok(Response::Done)
            }
            FaultOp::Reset => Ok(Response::Done),
            FaultOp::Show => Ok(Response::Faults(
                self.faults.iter().filter(|rule| rule.kind == kind).cloned().collect(),
            )),
        }
    }

    fn handle(&mut self, request: Request) -> Result<Response, ControlError> {
        self.requests.push(request.clone());
        match request {
            Request::Configure { all, .. } => {
                self.configure(all);
                Ok(Response::Done)
            }
            Request::Unconfigure => {
                if !self.configured {
                    return Err(ControlError::refused(errno::EBUSY, "LNet is not up"));
                }
                self.configured = false;
                self.nets.clear();
                self.peers.clear();
                Ok(Response::Done)
            }
            Request::GlobalShow => Ok(Response::Global(self.global.show().into())),
            Request::Set { param, value } => self.set(param, value),
            _ if !self.configured => Err(ControlError::NotConfigured),
            Request::CpuPartitions => Ok(Response::CpuPartitions(CpuPartitions {
                cpus: vec![vec![0, 1, 4, 5], vec![2, 3, 6, 7]],
                distances: vec![vec![10, 21], vec![21, 10]],
            })),
            Request::NetAdd(add) => self.net_add(&add),
            Request::NetDel(del) => self.net_del(&del),
            Request::NetShow { net, .. } => self.net_show(net.as_deref()),
            Request::PeerShow { nid, .. } => self.peer_show(nid.as_deref()),
            Request::PeerList => {
                if self.peers.is_empty() {
                    return Err(ControlError::refused(errno::ENOENT, "No peers found"));
                }
                Ok(Response::PeerList(
                    self.peers.iter().map(|p| p.primary_nid.to_string()).collect(),
                ))
            }
            Request::Ping(ping) => self.ping(&ping).map(Response::Manage),
            Request::Discover { nids, .. } => {
                let ping = Ping { nids, timeout_ms: None, source: None };
                self.ping(&ping).map(Response::Manage)
            }
            Request::PeerAdd(_)
            | Request::PeerDel(_)
            | Request::PeerSet(_)
            | Request::NetSet(_)
            | Request::StatsReset => Ok(Response::Done),
            Request::DebugRecovery { .. } => {
                Ok(Response::Recovery(vec!["192.168.1.2@tcp".into(), "10.1.0.2@tcp1".into()]))
            }
            Request::StatsShow => Ok(Response::Stats(self.stats)),
            Request::Export { .. } => Ok(Response::Export(self.export())),
            Request::Import { mode, text } => self.import(mode, &text).map(Response::Import),
            Request::Fault(fault) => self.fault(fault),
            Request::RouteAdd(spec) => self.route_add(&spec),
            Request::RouteDel(spec) => self.route_del(&spec),
            Request::RouteShow { filter, .. } => Ok(Response::Routes(
                self.routes
                    .iter()
                    .filter(|route| {
                        filter.net.as_deref().is_none_or(|net| route.net.to_string() == net)
                            && (filter.gateways.is_empty()
                                || filter.gateways.contains(&route.gateway.to_string()))
                            && filter.hop.is_none_or(|hop| i64::from(route.hop) == hop)
                    })
                    .map(data::RouteEntry::from)
                    .collect(),
            )),
            Request::RoutingShow => Ok(Response::Routing((&self.routing).into())),
            Request::Udsp(op) => self.udsp(op),
            // The fake node has two partitions (its NIs show `CPT: "[0,1]"`).
            Request::CptOfNid { nids } => nids
                .iter()
                .map(|text| {
                    let nid: ulnet_proto::addr::Nid = text
                        .parse()
                        .map_err(|_| ControlError::refused(errno::EINVAL, "invalid NID"))?;
                    let cpt = ulnet_proto::engine::cpt::nid_cpt_hash(&nid, 2);
                    Ok(ulnet_control::message::NidCpt { nid: nid.to_string(), cpt })
                })
                .collect::<Result<Vec<_>, ControlError>>()
                .map(Response::CptOfNid),
            Request::PeerDist { nids } => self.peer_dist(&nids),
            Request::ConnList { net } => self.conn_list(net.as_deref()),
            Request::SysctlSetup => Ok(Response::SysctlSetup { enabled: false }),
            // Connections to 192.168.1.3@tcp only (as `conn_list`).
            Request::DebugPeer { nid } => match nid.as_str() {
                _ if !self.configured => Err(ControlError::NotConfigured),
                "192.168.1.3@tcp" => Ok(Response::Done),
                _ => Err(ControlError::refused(errno::ENOENT, "no connection to the peer")),
            },
        }
    }

    /// `LNetDist()` without routes: 0 (order 1) for a local NID, 1 for one on a local net
    /// (order 2 + the index of its first NI, `0@lo` counting), unreachable ones left out.
    fn peer_dist(&self, nids: &[String]) -> Result<Response, ControlError> {
        if !self.configured {
            return Err(ControlError::NotConfigured);
        }
        let local = self.local_nids();
        let mut answers = Vec::new();
        for text in nids {
            let nid: Nid =
                text.parse().map_err(|_| ControlError::refused(errno::EINVAL, "invalid NID"))?;
            let found = if local.contains(&nid) {
                Some((0, 1))
            } else {
                local.iter().position(|ni| ni.net() == nid.net()).map(|at| (1, at as u32 + 2))
            };
            if let (Some((distance, order)), false) = (found, nid == Nid::LO_0) {
                answers.push(NidDist { nid: nid.to_string(), distance, order });
            }
        }
        Ok(Response::PeerDist(answers))
    }

    /// Two connections to 192.168.1.3@tcp, on the tcp NI.
    fn conn_list(&self, net: Option<&str>) -> Result<Response, ControlError> {
        if !self.configured {
            return Err(ControlError::NotConfigured);
        }
        let net: Option<Net> = match net {
            Some(text) => Some(
                text.parse()
                    .map_err(|_| ControlError::refused(errno::EINVAL, "cannot parse net"))?,
            ),
            None => None,
        };
        if net.is_some_and(|net| net != Net::TCP) {
            return Ok(Response::Conns(Vec::new()));
        }
        let conn = |kind, remote_port, nagle| ConnEntry {
            peer_nid: "192.168.1.3@tcp".into(),
            peer_pid: 12345,
            kind,
            scheduler: 0,
            local_ip: Ipv4Addr::new(192, 168, 1, 2).into(),
            remote_ip: Ipv4Addr::new(192, 168, 1, 3).into(),
            remote_port,
            tx_buffer: 2_626_560,
            rx_buffer: 1_061_296,
            nagle,
        };
        Ok(Response::Conns(vec![
            conn(ConnKind::Control, 988, false),
            conn(ConnKind::BulkIn, 1022, true),
        ]))
    }

    /// The kernel's rule list: `-EALREADY` for an equal rule, `-ENOENT` for a missing index.
    fn udsp(&mut self, op: Udsp) -> Result<Response, ControlError> {
        match op {
            Udsp::Add(add) => {
                let (src, dst, rte) = (add.src.as_deref(), add.dst.as_deref(), add.rte.as_deref());
                let rule = UdspRule::from_lnetctl(src, dst, rte, add.priority)
                    .map_err(|_| ControlError::refused(errno::EINVAL, ""))?;
                let index = add.idx.map(|idx| idx as usize);
                self.udsp
                    .add(rule, index)
                    .map_err(|_| ControlError::refused(errno::EALREADY, ""))?;
                Ok(Response::Done)
            }
            Udsp::Del { idx: None } => {
                self.udsp.take_all();
                Ok(Response::Done)
            }
            Udsp::Del { idx: Some(idx) } => match self.udsp.remove(idx as usize) {
                Some(_) => Ok(Response::Done),
                None => Err(ControlError::refused(errno::ENOENT, "")),
            },
            Udsp::Show { idx } => {
                let rules = self.udsp.iter().enumerate().filter(|(at, _)| match idx {
                    Some(idx) => *at == idx as usize,
                    None => true,
                });
                let entries = rules.map(|(at, rule)| render::UdspEntry::new(at, rule).into());
                Ok(Response::Udsp(entries.collect()))
            }
        }
    }

    /// Routes as the kernel checks them: a remote net, a gateway on a local net, no twice.
    fn route_add(
        &mut self,
        spec: &ulnet_control::message::RouteSpec,
    ) -> Result<Response, ControlError> {
        let net: Net = spec
            .net
            .as_deref()
            .unwrap_or("")
            .parse()
            .map_err(|_| ControlError::refused(errno::ENODEV, "cannot parse remote net"))?;
        for text in &spec.gateways {
            let gateway: Nid = text.parse().unwrap();
            let local_nets: Vec<Net> = self.nets.iter().map(|entry| entry.net).collect();
            if !local_nets.contains(&gateway.net()) {
                return Err(ControlError::refused(
                    errno::EHOSTUNREACH,
                    "No interface configured on the same net as gateway",
                ));
            }
            let exists = self.routes.iter().any(|r| r.net == net && r.gateway == gateway);
            if local_nets.contains(&net) || exists {
                return Err(ControlError::refused(
                    errno::EEXIST,
                    "Route already exists or the specified network is local",
                ));
            }
            self.routes.push(render::RouteEntry {
                net,
                gateway,
                hop: spec.hop.map_or(-1, |hop| hop as i32),
                priority: spec.priority.unwrap_or(0) as u32,
                up: true,
                multi_hop: false,
            });
        }
        Ok(Response::Done)
    }

    fn route_del(
        &mut self,
        spec: &ulnet_control::message::RouteSpec,
    ) -> Result<Response, ControlError> {
        let net = spec.net.as_deref().unwrap_or("");
        if !self.routes.iter().any(|route| route.net.to_string() == net) {
            return Err(ControlError::refused(errno::ENOENT, "failed to delete route"));
        }
        self.routes.retain(|route| {
            route.net.to_string() != net || !spec.gateways.contains(&route.gateway.to_string())
        });
        Ok(Response::Done)
    }

    fn set(&mut self, param: SetParam, value: i64) -> Result<Response, ControlError> {
        let Some(key) = param.global_key() else {
            return self.set_routing(param, value);
        };
        self.global.set(key, value).map_err(|error| ControlError::from(&error))?;
        Ok(Response::Done)
    }

    /// Routing allocates one CPT's pools; buffer counts resize them while it is on.
    fn set_routing(&mut self, param: SetParam, value: i64) -> Result<Response, ControlError> {
        if !self.configured {
            return Err(ControlError::NotConfigured);
        }
        let index = match param {
            SetParam::Routing => {
                if self.routing.cpts.is_empty() {
                    let pool = |npages, nbuffers: u32| render::BufferPool {
                        npages,
                        nbuffers,
                        credits: nbuffers as i32,
                        mincredits: nbuffers as i32,
                    };
                    self.routing.cpts = vec![[pool(0, 2048), pool(1, 16384), pool(256, 1024)]];
                }
                self.routing.enabled = value == 1;
                return Ok(Response::Done);
            }
            SetParam::TinyBuffers => 0,
            SetParam::SmallBuffers => 1,
            _ => 2,
        };
        if value > 0 && self.routing.enabled {
            let pool = &mut self.routing.cpts[0][index];
            pool.nbuffers = value as u32;
            pool.credits = value as i32;
            pool.mincredits = value as i32;
        }
        Ok(Response::Done)
    }

    fn local_nids(&self) -> Vec<Nid> {
        self.nets.iter().flat_map(|net| net.nis.iter().map(|ni| ni.nid)).collect()
    }

    fn net_add(&mut self, add: &NetAdd) -> Result<Response, ControlError> {
        let net_text = add.net.as_deref().unwrap_or("");
        let net: Net = net_text
            .parse()
            .map_err(|_| ControlError::refused(errno::EINVAL, "cannot parse net"))?;
        let mut new_nis = Vec::new();
        for spec in &add.nis {
            let (nid, interface) = match spec {
                LocalNiSpec::Interface { name, .. } => {
                    let Some((_, address)) = INTERFACES.iter().find(|(n, _)| n == name) else {
                        return Err(ControlError::refused(errno::ENODEV, "cannot find interface"));
                    };
                    (Nid::ipv4(net, Ipv4Addr::from(*address)), Some(name.as_str()))
                }
                LocalNiSpec::Nid { nid } => {
                    let nid: Nid = nid
                        .parse()
                        .map_err(|_| ControlError::refused(errno::EINVAL, "cannot parse nid"))?;
                    (nid, None)
                }
            };
            if self.local_nids().contains(&nid) {
                return Err(ControlError::refused(errno::EEXIST, "NI already exists"));
            }
            let mut ni = local_ni(nid, interface, &self.global);
            if let Some(credits) = add.tunables.peer_credits {
                ni.tunables.peer_credits = credits as i32;
            }
            if let Some(LndTunablesShow::Socklnd { conns_per_peer, tos, .. }) =
                ni.lnd_tunables.as_mut()
            {
                if let Some(value) = add.lnd_tunables.conns_per_peer {
                    *conns_per_peer = value as u16;
                }
                if let Some(value) = add.lnd_tunables.tos {
                    *tos = value as i16;
                }
            }
            new_nis.push(ni);
        }
        match self.nets.iter_mut().find(|entry| entry.net == net) {
            Some(entry) => entry.nis.extend(new_nis),
            None => self.nets.push(NetEntry { net, nis: new_nis }),
        }
        Ok(Response::Done)
    }

    fn net_del(&mut self, del: &NetDel) -> Result<Response, ControlError> {
        let net: Net = del
            .net
            .as_deref()
            .unwrap_or("")
            .parse()
            .map_err(|_| ControlError::refused(errno::EINVAL, "cannot parse net"))?;
        let Some(index) = self.nets.iter().position(|entry| entry.net == net) else {
            return Err(ControlError::refused(errno::ENOENT, "net doesn't exist"));
        };
        if del.nis.is_empty() {
            self.nets.remove(index);
            return Ok(Response::Done);
        }
        for spec in &del.nis {
            let entry = &mut self.nets[index];
            let before = entry.nis.len();
            entry.nis.retain(|ni| match spec {
                LocalNiSpec::Interface { name, .. } => ni.interface.as_deref() != Some(name),
                LocalNiSpec::Nid { nid } => ni.nid.to_string() != *nid,
            });
            if entry.nis.len() == before {
                return Err(ControlError::refused(errno::ENOENT, "NI doesn't exist"));
            }
        }
        // A net goes with its last NI.
        if self.nets[index].nis.is_empty() {
            self.nets.remove(index);
        }
        Ok(Response::Done)
    }

    fn net_show(&self, filter: Option<&str>) -> Result<Response, ControlError> {
        let nets: Vec<&NetEntry> = match filter {
            None => self.nets.iter().collect(),
            Some(text) => {
                let net: Net = text
                    .parse()
                    .map_err(|_| ControlError::refused(errno::EINVAL, "cannot parse net"))?;
                let found: Vec<&NetEntry> = self.nets.iter().filter(|n| n.net == net).collect();
                if found.is_empty() {
                    return Err(ControlError::refused(errno::ENETDOWN, "Network is down"));
                }
                found
            }
        };
        Ok(Response::Nets(nets.into_iter().map(data::NetEntry::from).collect()))
    }

    fn peer_show(&self, filter: Option<&str>) -> Result<Response, ControlError> {
        let peers: Vec<&PeerEntry> = match filter {
            None => self.peers.iter().collect(),
            Some(text) => {
                let nid: Nid = text
                    .parse()
                    .map_err(|_| ControlError::refused(errno::EINVAL, "cannot parse NID"))?;
                let found: Vec<&PeerEntry> =
                    self.peers.iter().filter(|p| p.nis.iter().any(|ni| ni.nid == nid)).collect();
                if found.is_empty() {
                    return Err(ControlError::refused(errno::ENOENT, "failed to find peer"));
                }
                found
            }
        };
        if peers.is_empty() {
            return Err(ControlError::refused(errno::ENOENT, "No peers found"));
        }
        Ok(Response::Peers(peers.into_iter().map(data::PeerEntry::from).collect()))
    }

    fn ping(&self, ping: &Ping) -> Result<ManageReply, ControlError> {
        let local = self.local_nids();
        if let Some(source) = &ping.source {
            let nid: Nid =
                source.parse().map_err(|_| ControlError::refused(errno::EINVAL, "bad source"))?;
            if !local.contains(&nid) {
                return Err(ControlError::refused(errno::EINVAL, "source NID is not local"));
            }
        }
        let mut reply = ManageReply::default();
        for text in &ping.nids {
            let nid: Nid =
                text.parse().map_err(|_| ControlError::refused(errno::EINVAL, "bad NID"))?;
            if local.contains(&nid) {
                let nids: Vec<String> =
                    local.iter().filter(|n| n.net() != Net::LO).map(Nid::to_string).collect();
                reply.replies.push(PingReply {
                    primary_nid: nids.first().cloned().unwrap_or_else(|| nid.to_string()),
                    multi_rail: true,
                    nids,
                });
            } else if let Some(peer) =
                self.peers.iter().find(|p| p.nis.iter().any(|ni| ni.nid == nid))
            {
                reply.replies.push(PingReply {
                    primary_nid: peer.primary_nid.to_string(),
                    multi_rail: peer.multi_rail,
                    nids: peer.nis.iter().map(|ni| ni.nid.to_string()).collect(),
                });
            } else if REACHABLE.iter().any(|address| tcp(*address) == nid) {
                reply.replies.push(PingReply {
                    primary_nid: nid.to_string(),
                    multi_rail: false,
                    nids: vec![nid.to_string()],
                });
            } else {
                reply
                    .failures
                    .push(PingFailure { target: nid.to_string(), errno: -errno::ETIMEDOUT });
            }
        }
        Ok(reply)
    }

    fn export(&self) -> ExportState {
        let state = render::ExportState {
            nets: self.nets.clone(),
            routes: self.routes.clone(),
            peers: self.peers.clone(),
            routing: self.routing.clone(),
            global: self.global.show(),
            udsp: self
                .udsp
                .iter()
                .enumerate()
                .map(|(at, rule)| render::UdspEntry::new(at, rule))
                .collect(),
        };
        ExportState::from(&state)
    }

    fn import(&mut self, mode: ImportMode, text: &str) -> Result<ImportReply, ControlError> {
        let imported = model::import(text, ConfigImportMode::from(mode))
            .map_err(|error| ControlError::from(&error))?;
        let config = imported.config;
        let mut reply = ImportReply::default();
        match mode {
            ImportMode::Add => {
                self.global.apply(&config).map_err(|error| ControlError::from(&error))?;
                for net in &config.nets {
                    let mut nis = Vec::new();
                    for ni in &net.nis {
                        match ni.nid {
                            Some(nid) => nis.push(LocalNiSpec::Nid { nid: nid.to_string() }),
                            None => nis.extend(ni.interfaces.iter().map(|interface| {
                                LocalNiSpec::Interface { name: interface.name.clone(), cpts: None }
                            })),
                        }
                    }
                    let add = NetAdd { net: Some(net.net.to_string()), nis, ..NetAdd::default() };
                    self.net_add(&add).map_err(|error| ControlError::Import {
                        errno: error.errno(),
                        descr: error.descr(),
                    })?;
                }
            }
            ImportMode::Del => {
                for net in &config.nets {
                    self.nets.retain(|entry| entry.net != net.net);
                }
                for global in &config.global {
                    if let Some(value) = global.0.deleted_value() {
                        let _ = self.global.set(global.0, value);
                    }
                }
            }
            ImportMode::Show => {
                let nets =
                    self.nets.iter().filter(|entry| config.nets.iter().any(|n| n.net == entry.net));
                let peers = self
                    .peers
                    .iter()
                    .filter(|peer| config.peers.iter().any(|p| p.primary_nid == peer.primary_nid));
                reply.shown = ShownObjects {
                    nets: nets.map(data::NetEntry::from).collect(),
                    routes: Vec::new(),
                    peers: peers.map(data::PeerEntry::from).collect(),
                    udsp: Vec::new(),
                };
            }
            ImportMode::Exec => {
                for command in &config.exec {
                    let (kind, nids) = match command {
                        ExecCommand::Ping { nids, .. } => (data::ManageCommand::Ping, nids),
                        ExecCommand::Discover { nids } => (data::ManageCommand::Discover, nids),
                    };
                    let ping = Ping { nids: nids.clone(), timeout_ms: None, source: None };
                    reply.exec.push(ExecReply { command: kind, reply: self.ping(&ping)? });
                }
            }
        }
        Ok(reply)
    }
}

/// A control server over a [`State`] on a socket of its own.
pub struct Daemon {
    pub dir: TempDir,
    pub state: Arc<Mutex<State>>,
    _server: Server,
}

impl Daemon {
    pub fn start(state: State) -> Self {
        let dir = TempDir::named("ulnetctl", "d");
        let state = Arc::new(Mutex::new(state));
        let handler_state = Arc::clone(&state);
        let handler = move |request: Request| handler_state.lock().unwrap().handle(request);
        let server = Server::spawn(listen(&dir.0.join("ulnetd.sock")).unwrap(), handler).unwrap();
        Self { dir, state, _server: server }
    }

    pub fn socket(&self) -> PathBuf {
        self.dir.0.join("ulnetd.sock")
    }

    /// Runs `ulnetctl` with `args` against this daemon (through `$ULNET_SOCKET`).
    pub fn run(&self, args: &[&str]) -> Run {
        self.run_with_stdin(args, "")
    }

    pub fn run_with_stdin(&self, args: &[&str], stdin: &str) -> Run {
        run_ulnetctl(args, Some(&self.socket()), stdin)
    }
}

impl Run {
    /// What a snapshot records: the command line, exit status, stdout and stderr.
    pub fn transcript(&self) -> String {
        self.transcript_of(&self.stdout)
    }
}

pub fn run_ulnetctl(args: &[&str], socket: Option<&std::path::Path>, stdin: &str) -> Run {
    run_program(Path::new(env!("CARGO_BIN_EXE_ulnetctl")), args, socket, stdin)
}
