//! The kernel's part of lctl's queries that `ulnetctl` carries: `which_nid` (the distance and
//! order of NIDs, `LNetDist()`), `conn_list` (the TCP LND's established connections); and of
//! lnetctl's `debug peer` (the TCP LND's state for a peer, written to the log) and the
//! `enable_sysctl_setup` switch `setup-sysctl` reads.
//!
//! lustre: lnet/lnet/lib-move.c `LNetDist()`; api-ni.c `lnet_peer_dist_show_dump()`;
//! lnet/klnds/socklnd/socklnd.c `ksocknal_ctl()` (`IOC_LIBCFS_GET_CONN`,
//! `IOC_LIBCFS_GET_PEER`), `ksocknal_get_peer_info()`, `ksocknal_dump_peer_debug_info()`.

use ulnet::proto::wire::hello::ConnType;
use ulnet::{Node, RouteInfo, TcpConnection};
use ulnet_control::message::{ConnEntry, ConnKind, MAX_CPT_OF_NID, NidDist, errno};
use ulnet_control::{ControlError, Response};
use ulnet_proto::addr::{Net, Nid};

use super::LiveNode;

/// Orders below this are kept for `0@lo` (0) and a local NID (1), as `LNetDist()` does.
const FIRST_NET_ORDER: u32 = 2;

impl LiveNode {
    /// `which_nid`: the distance and order of each NID the node can reach, in request order;
    /// `0@lo` and unreachable NIDs are left out, as the kernel's dump leaves them.
    pub(super) fn peer_dist(&self, nids: &[String]) -> Result<Response, ControlError> {
        let Some(node) = self.node() else {
            return Err(ControlError::NotConfigured);
        };
        if nids.is_empty() {
            return Err(ControlError::refused(errno::ENOENT, "Missing NID argument(s)"));
        }
        if nids.len() > MAX_CPT_OF_NID {
            return Err(ControlError::refused(errno::EINVAL, "too many NIDs"));
        }
        let local = node.nids();
        let routes = node.routes();
        let mut answers = Vec::new();
        for text in nids {
            let nid: Nid = text
                .trim()
                .parse()
                .map_err(|_| ControlError::refused(errno::EINVAL, "invalid NID"))?;
            if nid == Nid::LO_0 {
                continue;
            }
            if let Some((distance, order)) = distance(&local, &routes, nid) {
                answers.push(NidDist { nid: nid.to_string(), distance, order });
            }
        }
        Ok(Response::PeerDist(answers))
    }

    /// `conn_list [--net NET]`: every established TCP connection, or those of `net`'s NIs.
    pub(super) fn conn_list(&self, net: Option<&str>) -> Result<Response, ControlError> {
        let Some(node) = self.node() else {
            return Err(ControlError::NotConfigured);
        };
        let net: Option<Net> = match net {
            Some(text) => Some(
                text.parse()
                    .map_err(|_| ControlError::refused(errno::EINVAL, "cannot parse net"))?,
            ),
            None => None,
        };
        Ok(Response::Conns(connections(&node, net)))
    }

    /// `debug peer --nid NID`: each TCP connection to the peer with NID `nid`, written to the
    /// log (the kernel dumps socklnd's peer state to its debug log; lnetctl prints nothing).
    /// A NID on no local net is `-EINVAL` (no LND to ask), a peer with no connection
    /// `-ENOENT`.
    pub(super) fn debug_peer(&self, nid: &str) -> Result<Response, ControlError> {
        let Some(node) = self.node() else {
            return Err(ControlError::NotConfigured);
        };
        let nid: Nid =
            nid.trim().parse().map_err(|_| ControlError::refused(errno::EINVAL, "invalid NID"))?;
        if !node.nids().iter().any(|local| local.net() == nid.net()) {
            return Err(ControlError::refused(errno::EINVAL, "no local NI on the peer's net"));
        }
        let conns: Vec<TcpConnection> = node
            .tcp_connections()
            .into_iter()
            .filter(|(_, conn)| conn.peer.nid == nid)
            .map(|(_, conn)| conn)
            .collect();
        if conns.is_empty() {
            return Err(ControlError::refused(errno::ENOENT, "no connection to the peer"));
        }
        for conn in &conns {
            tracing::info!(
                peer = %conn.peer,
                conn_type = conn.conn_type.0,
                local = %conn.local,
                remote = %conn.remote,
                sndbuf = conn.send_buffer,
                rcvbuf = conn.recv_buffer,
                nagle = conn.nagle,
                "debug peer"
            );
        }
        Ok(Response::Done)
    }

    /// `setup-sysctl`: whether `enable_sysctl_setup` is 1.
    pub(super) fn sysctl_setup(&self) -> Response {
        Response::SysctlSetup { enabled: self.enable_sysctl_setup }
    }

    /// `get_param cpu_partition_*`: the partitions, fixed at start. Refused while LNet is
    /// down: the kernel makes the two files when LNet comes up and removes them when it goes
    /// (lnet_debugfs.c, since LU-9859), so lctl finds no such parameter then.
    pub(super) fn cpu_partitions(&self) -> Result<Response, ControlError> {
        drop(self.lock_running()?);
        Ok(Response::CpuPartitions(self.layout.numa.cpu_partitions()))
    }
}

/// `LNetDist()` with `local_nid_dist_zero` on (ulnet's only value): 0 for a local NID, 1 for
/// one on a local net (the order of the first NI on it), the shortest route's hops + 1 for a
/// routed one (an undefined hop count counts 1), `None` when unreachable. The order of a
/// remote net is its place among the remote nets of the route table, after the NIs' orders
/// (the kernel counts its place in a hash chain).
fn distance(local: &[Nid], routes: &[RouteInfo], nid: Nid) -> Option<(u32, u32)> {
    if local.contains(&nid) {
        return Some((0, u32::from(nid != Nid::LO_0)));
    }
    let mut order = FIRST_NET_ORDER;
    let mut same_net = None;
    for ni in local {
        if same_net.is_none() && ni.net() == nid.net() {
            same_net = Some(order);
        }
        order = order.saturating_add(1);
    }
    if let Some(order) = same_net {
        return Some((1, order));
    }
    let mut remote_nets: Vec<Net> = Vec::new();
    for route in routes {
        if !remote_nets.contains(&route.net) {
            remote_nets.push(route.net);
        }
    }
    let place = remote_nets.iter().position(|net| *net == nid.net())?;
    let hops = routes
        .iter()
        .filter(|route| route.net == nid.net())
        .map(|route| route.hops.unwrap_or(1))
        .min()?;
    let place = u32::try_from(place).unwrap_or(u32::MAX);
    Some((hops.saturating_add(1), order.saturating_add(place)))
}

/// The node's TCP connections as `conn_list` shows them, by NI then peer.
fn connections(node: &Node, net: Option<Net>) -> Vec<ConnEntry> {
    let mut list: Vec<(Nid, TcpConnection)> = node
        .tcp_connections()
        .into_iter()
        .filter(|(ni, _)| net.is_none_or(|net| ni.net() == net))
        .collect();
    list.sort_by_key(|(ni, conn)| (ni.to_string(), conn.peer.to_string(), conn.conn_type));
    list.into_iter()
        .map(|(_, conn)| ConnEntry {
            peer_nid: conn.peer.nid.to_string(),
            peer_pid: conn.peer.pid,
            kind: match conn.conn_type {
                ConnType::CONTROL => ConnKind::Control,
                ConnType::BULK_IN => ConnKind::BulkIn,
                ConnType::BULK_OUT => ConnKind::BulkOut,
                _ => ConnKind::Any,
            },
            // The partition whose I/O thread runs it, as socklnd prints its scheduler's CPT.
            scheduler: conn.partition,
            local_ip: conn.local.ip(),
            remote_ip: conn.remote.ip(),
            remote_port: conn.remote.port(),
            tx_buffer: conn.send_buffer,
            rx_buffer: conn.recv_buffer,
            nagle: conn.nagle,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nid(text: &str) -> Nid {
        text.parse().unwrap()
    }

    fn route(net: &str, gateway: &str, hops: Option<u32>) -> RouteInfo {
        RouteInfo {
            net: net.parse().unwrap(),
            gateway: nid(gateway),
            hops,
            priority: 0,
            alive: true,
            multi_hop: false,
        }
    }

    #[test]
    fn local_nids_are_distance_zero_order_one() {
        let local = [Nid::LO_0, nid("10.0.0.1@tcp"), nid("10.0.1.1@tcp")];
        assert_eq!(distance(&local, &[], nid("10.0.1.1@tcp")), Some((0, 1)));
        assert_eq!(distance(&local, &[], nid("10.0.0.1@tcp")), Some((0, 1)));
        assert_eq!(distance(&local, &[], Nid::LO_0), Some((0, 0)));
    }

    #[test]
    fn a_local_net_is_distance_one_ordered_by_its_first_ni() {
        let local = [Nid::LO_0, nid("10.0.0.1@tcp"), nid("10.0.1.1@tcp1"), nid("10.0.2.1@tcp1")];
        assert_eq!(distance(&local, &[], nid("10.0.0.9@tcp")), Some((1, 3)));
        assert_eq!(distance(&local, &[], nid("10.0.9.9@tcp1")), Some((1, 4)));
    }

    #[test]
    fn routed_nets_count_the_shortest_route_and_follow_the_nis() {
        let local = [Nid::LO_0, nid("10.0.0.1@tcp")];
        let routes = [
            route("tcp5", "10.0.0.2@tcp", Some(3)),
            route("tcp7", "10.0.0.2@tcp", None),
            route("tcp5", "10.0.0.3@tcp", Some(2)),
        ];
        assert_eq!(distance(&local, &routes, nid("1.2.3.4@tcp5")), Some((3, 4)));
        assert_eq!(distance(&local, &routes, nid("1.2.3.4@tcp7")), Some((2, 5)));
        assert_eq!(distance(&local, &routes, nid("1.2.3.4@tcp9")), None);
    }
}
