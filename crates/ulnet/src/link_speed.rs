//! The link speed of the interface holding a TCP NI's address, for socklnd's automatic
//! `conns_per_peer`.
//!
//! The kernel asks ethtool for the NI interface's speed when `conns_per_peer` is 0 and derives
//! the count from it (lustre: lnet/klnds/socklnd/socklnd_modparams.c
//! `ksocklnd_ni_get_eth_intf_speed()`, `ksocklnd_lookup_conns_per_peer()`). In userspace the
//! same ethtool figure is `/sys/class/net/<if>/speed` in Mb/s; reading it fails (EINVAL) for
//! interfaces without one, such as loopback, and shows -1 for a link that is down. Either
//! way the speed is unknown and the rule gives one connection of each type.

use std::io::Read;
use std::net::IpAddr;
use std::path::Path;

use crate::link_watch;

/// Bound on the sysfs attribute read (a decimal number).
const MAX_SPEED_LEN: u64 = 32;

/// The speed in Mb/s of the interface that holds `ip`, when the host knows one.
pub fn link_speed_mbps(ip: IpAddr) -> Option<u32> {
    let host = link_watch::host_addresses().ok()?;
    let address = host.iter().find(|address| address.ip == ip)?;
    interface_speed(Path::new("/sys"), &address.interface)
}

/// `interface`'s speed from `sysfs` (normally `/sys`); `None` when missing, unreadable, or not
/// a positive number.
pub(crate) fn interface_speed(sysfs: &Path, interface: &str) -> Option<u32> {
    // A name with a slash or a dot path would leave /sys/class/net.
    if interface.is_empty() || interface.contains('/') || interface.starts_with('.') {
        return None;
    }
    let file = std::fs::File::open(sysfs.join("class/net").join(interface).join("speed")).ok()?;
    let mut text = String::new();
    file.take(MAX_SPEED_LEN).read_to_string(&mut text).ok()?;
    let speed: i64 = text.trim().parse().ok()?;
    u32::try_from(speed).ok().filter(|&speed| speed > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_sysfs(tag: &str, speeds: &[(&str, &str)]) -> std::path::PathBuf {
        let root = std::env::temp_dir().join(format!("ulnet-speed-{tag}-{}", std::process::id()));
        for (interface, speed) in speeds {
            let dir = root.join("class/net").join(interface);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("speed"), speed).unwrap();
        }
        root
    }

    #[test]
    fn speed_is_read_in_megabits() {
        let sysfs = fake_sysfs("read", &[("eth0", "25000\n"), ("veth1", "10000")]);
        assert_eq!(interface_speed(&sysfs, "eth0"), Some(25_000));
        assert_eq!(interface_speed(&sysfs, "veth1"), Some(10_000));
    }

    #[test]
    fn unknown_down_or_malformed_speeds_are_none() {
        let sysfs = fake_sysfs(
            "bad",
            &[("down0", "-1\n"), ("zero0", "0"), ("junk0", "fast"), ("huge0", "99999999999")],
        );
        for interface in ["down0", "zero0", "junk0", "huge0", "missing0", "", "../x", ".hidden"] {
            assert_eq!(interface_speed(&sysfs, interface), None, "{interface}");
        }
    }

    #[test]
    fn loopback_has_no_speed() {
        // lo has no ethtool speed (its sysfs attribute fails to read), so auto gives 1.
        assert_eq!(link_speed_mbps("127.0.0.1".parse().unwrap()), None);
    }
}
