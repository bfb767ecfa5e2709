//! The host's network interfaces, as `getifaddrs()` reports them, and the two lookups NI
//! configuration needs: an interface's address (`interfaces:` / `--if`), and the interface
//! that owns an address (`nid:` / `--nid`).

use std::net::IpAddr;

use ulnet_config::model::HostInterface;

/// Most interfaces read from the host; a host with more is truncated (lnetctl has no bound,
/// but `LNET_INTERFACES_MAX_DEFAULT` NIs is the most a node can use anyway).
pub const MAX_HOST_INTERFACES: usize = 4096;

/// The host's interfaces, one entry per name with all its addresses, in the order
/// `getifaddrs()` lists them. An interface counts as up when it is running
/// (`IFF_RUNNING`), as lnetctl's matcher requires.
/// lustre: liblnetconfig.c `lustre_lnet_intf2nids()` (getifaddrs, `IFF_UP` checks).
pub fn host_interfaces() -> std::io::Result<Vec<HostInterface>> {
    let mut interfaces: Vec<HostInterface> = Vec::new();
    for entry in if_addrs::get_if_addrs()? {
        let up = entry.is_oper_up();
        let address = entry.addr.ip();
        if let Some(known) = interfaces.iter_mut().find(|known| known.name == entry.name) {
            known.up |= up;
            known.addresses.push(address);
        } else if interfaces.len() < MAX_HOST_INTERFACES {
            interfaces.push(HostInterface { name: entry.name, up, addresses: vec![address] });
        } else {
            break;
        }
    }
    Ok(interfaces)
}

/// The address an NI on `name` takes: its first IPv4 address (socklnd's choice for a
/// nid4 NI). lustre: socklnd.c `ksocknal_startup()` via `lnet_inet_enumerate()`.
pub fn interface_address(interfaces: &[HostInterface], name: &str) -> Option<IpAddr> {
    let interface = interfaces.iter().find(|interface| interface.name == name)?;
    interface.addresses.iter().copied().find(IpAddr::is_ipv4)
}

/// The interface owning `address`: the one that has exactly this address, else the
/// loopback interface for any 127.0.0.0/8 address (Linux routes the whole block to `lo`,
/// which is how many nodes share one host on 127.0.0.2, 127.0.0.3, ...).
pub fn interface_of(interfaces: &[HostInterface], address: IpAddr) -> Option<String> {
    let exact = interfaces.iter().find(|interface| interface.addresses.contains(&address));
    if let Some(interface) = exact {
        return Some(interface.name.clone());
    }
    if address.is_loopback() {
        let loopback = interfaces
            .iter()
            .find(|interface| interface.addresses.iter().any(|known| known.is_loopback()));
        return loopback.map(|interface| interface.name.clone());
    }
    None
}

/// An interface that is up with `addresses`, for tests.
#[cfg(test)]
pub(crate) fn up_interface(name: &str, addresses: &[&str]) -> HostInterface {
    let addresses = addresses.iter().map(|address| address.parse().expect("test address"));
    HostInterface { name: name.into(), up: true, addresses: addresses.collect() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn host() -> Vec<HostInterface> {
        vec![
            up_interface("lo", &["127.0.0.1", "::1"]),
            up_interface("eth0", &["fe80::1", "192.168.1.2"]),
        ]
    }

    #[test]
    fn an_interface_gives_its_first_ipv4_address() {
        assert_eq!(
            interface_address(&host(), "eth0"),
            Some(IpAddr::V4(Ipv4Addr::new(192, 168, 1, 2)))
        );
        assert_eq!(interface_address(&host(), "eth9"), None);
    }

    #[test]
    fn an_address_belongs_to_its_interface_and_loopback_addresses_to_lo() {
        let host = host();
        assert_eq!(interface_of(&host, "192.168.1.2".parse().unwrap()).as_deref(), Some("eth0"));
        assert_eq!(interface_of(&host, "127.0.0.3".parse().unwrap()).as_deref(), Some("lo"));
        assert_eq!(interface_of(&host, "10.9.9.9".parse().unwrap()), None);
    }

    #[test]
    fn the_host_has_a_loopback_interface() {
        let interfaces = host_interfaces().unwrap();
        assert!(interface_of(&interfaces, "127.0.0.2".parse().unwrap()).is_some());
    }
}
