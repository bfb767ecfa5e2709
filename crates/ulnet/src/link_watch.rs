//! The OS side of an NI's fatal-error flag: a route netlink socket subscribed to link and
//! address changes, and the check that raises the flag on a TCP NI whose interface went down,
//! lost its address or disappeared, and clears it when the interface is back.
//!
//! The kernel's socklnd hears the same news from netdevice and inetaddr notifiers
//! (lustre: lnet/klnds/socklnd/socklnd.c `ksocknal_device_event()`,
//! `ksocknal_handle_link_state_change()`, `ksocknal_inetaddr_event()`,
//! `ksocknal_handle_inetaddr_change()`), and its verdict is the one here: an NI is fatal when
//! its device is not running or has no carrier (`lnet_get_link_status_locked()`), or when the
//! device no longer holds the NI's address ("has no matching IP"). The flag itself is set with
//! the core's [`set_ni_fatal`](ulnet_proto::engine::Engine::set_ni_fatal)
//! (lustre: lnet/lnet/config.c `lnet_set_link_fatal_state()`), which moves the NI's traffic
//! elsewhere and updates the ping buffer peers discover.
//!
//! Netlink messages only say *that* something changed: every relevant one triggers a fresh
//! look at the host's interfaces (`getifaddrs`, itself a netlink dump, so it sees the
//! process's own network namespace), and the verdict comes from that snapshot. A lost
//! notification (the socket's buffer overran) triggers the same look, so nothing is missed.
//! The watcher runs as a task on the node's I/O thread and reacts within a scheduling delay of
//! the kernel's notification.

use std::net::IpAddr;
use std::sync::Arc;

use rustix::net::netlink::SocketAddrNetlink;
use rustix::net::{AddressFamily, SocketFlags, SocketType};
use tokio::net::UnixDatagram;
use ulnet_proto::engine::{LndKind, NiId};

use crate::clock;
use crate::driver::{self, Shared, Wakes};

/// `RTMGRP_LINK`: link state changes (`RTM_NEWLINK`, `RTM_DELLINK`).
const RTMGRP_LINK: u32 = 0x1;
/// `RTMGRP_IPV4_IFADDR`: IPv4 address changes.
const RTMGRP_IPV4_IFADDR: u32 = 0x10;
/// `RTMGRP_IPV6_IFADDR`: IPv6 address changes.
const RTMGRP_IPV6_IFADDR: u32 = 0x100;

/// `struct nlmsghdr` length.
pub(crate) const NLMSG_HEADER_LEN: usize = 16;
/// Netlink message types that concern an NI's interface (linux/rtnetlink.h).
const RTM_NEWLINK: u16 = 16;
const RTM_DELLINK: u16 = 17;
const RTM_NEWADDR: u16 = 20;
const RTM_DELADDR: u16 = 21;
/// `NLMSG_OVERRUN`: the kernel dropped notifications.
const NLMSG_OVERRUN: u16 = 4;

/// Receive buffer: the kernel's notifications are a few hundred bytes each; one datagram
/// holds one message, and anything truncated still counts as a change.
const RECV_BUFFER_LEN: usize = 16 * 1024;

/// Why a netlink datagram could not be walked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NetlinkError {
    /// Fewer bytes left than a message header.
    #[error("truncated netlink header: {0} bytes left")]
    TruncatedHeader(usize),
    /// A message length shorter than its header or beyond the datagram.
    #[error("bad netlink message length {length} with {available} bytes left")]
    BadLength { length: u32, available: usize },
}

/// Whether a datagram from the route netlink socket reports a link or address change (or
/// lost notifications). Walks every message; never reads past `datagram`.
pub(crate) fn reports_change(datagram: &[u8]) -> Result<bool, NetlinkError> {
    let mut rest = datagram;
    let mut change = false;
    while !rest.is_empty() {
        let &[l0, l1, l2, l3, k0, k1, ..] = rest
            .first_chunk::<NLMSG_HEADER_LEN>()
            .ok_or(NetlinkError::TruncatedHeader(rest.len()))?;
        let length = u32::from_ne_bytes([l0, l1, l2, l3]);
        let kind = u16::from_ne_bytes([k0, k1]);
        let bad = NetlinkError::BadLength { length, available: rest.len() };
        let length = usize::try_from(length).map_err(|_| bad)?;
        if length < NLMSG_HEADER_LEN || length > rest.len() {
            return Err(bad);
        }
        change |=
            matches!(kind, RTM_NEWLINK | RTM_DELLINK | RTM_NEWADDR | RTM_DELADDR | NLMSG_OVERRUN);
        // NLMSG_ALIGN: messages start on 4-byte boundaries; the last may end unpadded.
        let aligned = length.next_multiple_of(4).min(rest.len());
        rest = rest.get(aligned..).unwrap_or_default();
    }
    Ok(change)
}

/// One address the host holds: which interface, and whether that interface runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct HostAddress {
    pub(crate) interface: String,
    pub(crate) ip: IpAddr,
    /// `IFF_RUNNING`: administratively up with carrier.
    pub(crate) running: bool,
    /// The address's netmask: the directly connected subnet the kernel routes through it.
    pub(crate) netmask: IpAddr,
}

impl HostAddress {
    /// Whether `ip` is in this address's directly connected subnet.
    pub(crate) fn covers(&self, ip: IpAddr) -> bool {
        match (self.ip, self.netmask, ip) {
            (IpAddr::V4(own), IpAddr::V4(mask), IpAddr::V4(ip)) => {
                let mask = u32::from(mask);
                u32::from(own) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(own), IpAddr::V6(mask), IpAddr::V6(ip)) => {
                let mask = u128::from(mask);
                u128::from(own) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

/// Whether a peer at `ip` sits behind the link of `down` (a local address whose interface
/// stopped running): in `down`'s subnet, and in no subnet of a running interface, so the
/// kernel has no other way to it. Every connection to it, from whichever local address,
/// went through that link (with rails on separate subnets, the cross paths too).
pub(crate) fn behind_lost_link(ip: IpAddr, down: &HostAddress, host: &[HostAddress]) -> bool {
    !ip.is_loopback()
        && down.covers(ip)
        && !host.iter().any(|address| address.running && address.covers(ip))
}

/// Whether an NI on `ip` is fatal on this host: no interface holds its address, or the one
/// that does is not running (lustre: socklnd.c `ksocknal_handle_link_state_change()`). Every
/// address of 127.0.0.0/8 is local through a running loopback interface, though only
/// 127.0.0.1 is listed on it.
pub(crate) fn is_fatal(ip: IpAddr, host: &[HostAddress]) -> bool {
    !host.iter().any(|address| {
        address.running && (address.ip == ip || (ip.is_loopback() && address.ip.is_loopback()))
    })
}

/// The host's addresses now (in this process's network namespace).
pub(crate) fn host_addresses() -> std::io::Result<Vec<HostAddress>> {
    Ok(if_addrs::get_if_addrs()?
        .into_iter()
        .map(|interface| HostAddress {
            ip: interface.ip(),
            running: interface.is_oper_up(),
            netmask: match &interface.addr {
                if_addrs::IfAddr::V4(v4) => IpAddr::V4(v4.netmask),
                if_addrs::IfAddr::V6(v6) => IpAddr::V6(v6.netmask),
            },
            interface: interface.name,
        })
        .collect())
}

/// Starts the watcher on the current (I/O) runtime. Without a netlink socket (a sandbox
/// refusing one) the node runs without link events, as the kernel would without notifiers.
pub(crate) fn start(shared: &Arc<Shared>) {
    let socket = match open() {
        Ok(socket) => socket,
        Err(error) => {
            tracing::warn!(%error, "no link events: cannot open a route netlink socket");
            return;
        }
    };
    let node = Arc::downgrade(shared);
    tokio::spawn(async move {
        // The state may have changed between the NIs' start and the subscription.
        if let Some(shared) = node.upgrade() {
            refresh(&shared);
        }
        let mut buffer = vec![0; RECV_BUFFER_LEN];
        loop {
            if socket.readable().await.is_err() {
                return;
            }
            let mut changed = false;
            loop {
                match socket.try_recv(&mut buffer) {
                    Ok(0) => break,
                    Ok(received) => {
                        let datagram = buffer.get(..received).unwrap_or_default();
                        // A datagram we cannot walk still means something happened.
                        changed |= reports_change(datagram).unwrap_or(true);
                    }
                    Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => break,
                    // ENOBUFS: the kernel dropped notifications; look at everything again.
                    Err(error)
                        if error.raw_os_error()
                            == Some(rustix::io::Errno::NOBUFS.raw_os_error()) =>
                    {
                        changed = true;
                    }
                    Err(error) => {
                        tracing::warn!(%error, "link events stopped: netlink receive failed");
                        return;
                    }
                }
            }
            if changed {
                let Some(shared) = node.upgrade() else { return };
                refresh(&shared);
            }
        }
    });
}

/// Re-evaluates every TCP NI against the host's interfaces and raises or clears its fatal
/// flag where that changed.
pub(crate) fn refresh(shared: &Arc<Shared>) {
    let host = match host_addresses() {
        Ok(host) => host,
        Err(error) => {
            tracing::warn!(%error, "cannot list the host's interfaces");
            return;
        }
    };
    let mut wakes = Wakes::default();
    {
        let mut core = shared.lock();
        if core.closed {
            return;
        }
        let now = clock::now();
        let changes: Vec<(NiId, bool)> = core
            .engine
            .ni_ids()
            .filter_map(|ni| core.engine.ni_stats(ni).map(|stats| (ni, stats)))
            .filter(|(_, stats)| stats.lnd == LndKind::Tcp)
            // A draining NI is fatal on purpose (`crate::ni_live`): clearing its flag would
            // advertise it UP and let it carry traffic again until its removal.
            .filter(|(ni, _)| !core.draining.contains(ni))
            .filter_map(|(ni, stats)| {
                let fatal = is_fatal(stats.nid.ip()?, &host);
                (fatal != stats.health.fatal_error).then_some((ni, fatal))
            })
            .collect();
        for (ni, fatal) in changes {
            let nid = core.engine.ni_nid(ni);
            match core.engine.set_ni_fatal(now, ni, fatal) {
                Ok(()) if fatal => tracing::warn!(?nid, "interface down or address gone: NI fatal"),
                Ok(()) => tracing::info!(?nid, "interface back: NI fatal flag cleared"),
                Err(error) => tracing::error!(%error, ?nid, "core refused the link state"),
            }
            // Peers behind the lost link are unreachable from every NI, not only this one.
            let down = nid
                .and_then(|nid| nid.ip())
                .and_then(|ip| host.iter().find(|address| address.ip == ip && !address.running));
            if let Some(down) = down.filter(|_| fatal) {
                core.engine.links_lost(now, |peer| {
                    peer.ip().is_some_and(|ip| behind_lost_link(ip, down, &host))
                });
            }
        }
        driver::drain(shared, &mut core, now, &mut wakes);
    }
    wakes.finish();
}

/// A route netlink socket subscribed to link and address changes, registered with the
/// runtime. It travels as a `UnixDatagram` because that is the std datagram socket type a
/// file descriptor converts into safely (tokio's `AsyncFd::register` is `unsafe`, and this
/// crate forbids unsafe code); only readiness and `recv(2)` are used on it, which mean the
/// same for any datagram socket.
fn open() -> std::io::Result<UnixDatagram> {
    let socket = rustix::net::socket_with(
        AddressFamily::NETLINK,
        SocketType::RAW,
        SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
        // Protocol 0 is NETLINK_ROUTE.
        None,
    )?;
    let groups = RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR;
    rustix::net::bind(&socket, &SocketAddrNetlink::new(0, groups))?;
    UnixDatagram::from_std(std::os::unix::net::UnixDatagram::from(socket))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(kind: u16, payload: usize) -> Vec<u8> {
        let length = u32::try_from(NLMSG_HEADER_LEN + payload).unwrap();
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&length.to_ne_bytes());
        bytes.extend_from_slice(&kind.to_ne_bytes());
        bytes.extend_from_slice(&[0; 10]);
        bytes.resize(NLMSG_HEADER_LEN + payload, 0xaa);
        bytes
    }

    fn padded(mut bytes: Vec<u8>) -> Vec<u8> {
        bytes.resize(bytes.len().next_multiple_of(4), 0);
        bytes
    }

    #[test]
    fn link_and_address_messages_are_changes() {
        for kind in [RTM_NEWLINK, RTM_DELLINK, RTM_NEWADDR, RTM_DELADDR, NLMSG_OVERRUN] {
            assert_eq!(reports_change(&message(kind, 16)), Ok(true), "type {kind}");
        }
    }

    #[test]
    fn other_messages_are_not_changes() {
        // RTM_NEWROUTE, RTM_NEWNEIGH, NLMSG_DONE.
        for kind in [24, 28, 3] {
            assert_eq!(reports_change(&message(kind, 8)), Ok(false), "type {kind}");
        }
        assert_eq!(reports_change(&[]), Ok(false));
    }

    #[test]
    fn every_message_of_a_datagram_is_walked() {
        let mut datagram = padded(message(24, 5));
        datagram.extend(padded(message(28, 3)));
        datagram.extend(message(RTM_DELADDR, 1));
        assert_eq!(reports_change(&datagram), Ok(true));
    }

    #[test]
    fn a_truncated_header_is_refused() {
        let datagram = message(RTM_NEWLINK, 0);
        assert_eq!(reports_change(&datagram[..7]), Err(NetlinkError::TruncatedHeader(7)));
    }

    #[test]
    fn a_length_below_the_header_is_refused() {
        let mut datagram = message(RTM_NEWLINK, 4);
        datagram[..4].copy_from_slice(&8u32.to_ne_bytes());
        assert_eq!(
            reports_change(&datagram),
            Err(NetlinkError::BadLength { length: 8, available: 20 })
        );
    }

    #[test]
    fn a_length_beyond_the_datagram_is_refused() {
        let mut datagram = message(RTM_NEWLINK, 4);
        datagram[..4].copy_from_slice(&4096u32.to_ne_bytes());
        assert_eq!(
            reports_change(&datagram),
            Err(NetlinkError::BadLength { length: 4096, available: 20 })
        );
    }

    #[test]
    fn any_bytes_are_walked_without_panicking() {
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        for length in 0..512 {
            let bytes: Vec<u8> = (0..length)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state as u8
                })
                .collect();
            let _ = reports_change(&bytes);
        }
    }

    fn address(interface: &str, ip: &str, running: bool) -> HostAddress {
        let netmask = if ip.contains(':') { "ffff:ffff:ffff:ffff::" } else { "255.255.255.0" };
        HostAddress {
            interface: interface.into(),
            ip: ip.parse().unwrap(),
            running,
            netmask: netmask.parse().unwrap(),
        }
    }

    #[test]
    fn an_ni_is_fatal_unless_a_running_interface_holds_its_address() {
        let host = [address("eth0", "10.1.1.1", true), address("eth1", "10.1.2.1", false)];
        assert!(!is_fatal("10.1.1.1".parse().unwrap(), &host));
        // Down or without carrier.
        assert!(is_fatal("10.1.2.1".parse().unwrap(), &host));
        // Address removed, or the interface is gone.
        assert!(is_fatal("10.1.3.1".parse().unwrap(), &host));
        assert!(is_fatal("10.1.1.1".parse().unwrap(), &[]));
    }

    #[test]
    fn peers_behind_a_lost_link_are_those_only_its_subnet_reaches() {
        let down = address("rail2", "10.1.2.1", false);
        let host = [address("rail1", "10.1.1.1", true), down.clone()];
        let behind = |ip: &str| behind_lost_link(ip.parse().unwrap(), &down, &host);
        // The peer's rail-2 address: every path to it crossed the lost link.
        assert!(behind("10.1.2.2"));
        // Its rail-1 address, another subnet, loopback: not behind it.
        assert!(!behind("10.1.1.2"));
        assert!(!behind("10.9.0.1"));
        assert!(!behind("127.0.0.1"));
        // Both rails on one subnet: the kernel still reaches the peer through the other.
        let shared = [address("rail1", "10.1.2.9", true), down.clone()];
        assert!(!behind_lost_link("10.1.2.2".parse().unwrap(), &down, &shared));
    }

    #[test]
    fn any_loopback_address_is_held_by_a_running_loopback_interface() {
        let up = [address("lo", "127.0.0.1", true)];
        assert!(!is_fatal("127.53.1.2".parse().unwrap(), &up));
        assert!(is_fatal("127.53.1.2".parse().unwrap(), &[address("lo", "127.0.0.1", false)]));
        assert!(is_fatal("10.1.1.1".parse().unwrap(), &up));
    }

    #[test]
    fn the_host_lists_loopback_as_running() {
        let host = host_addresses().unwrap();
        assert!(!is_fatal("127.0.0.1".parse().unwrap(), &host), "{host:?}");
    }
}
