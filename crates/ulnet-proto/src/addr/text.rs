//! NIDs and nets as text: printing here; parsing (`FromStr`) is added beside it.
//!
//! lustre: lnet/lnet/nidstrings.c `libcfs_net2str_r()`, `libcfs_nidstr_r()`,
//! `libcfs_netstrfns[]`.

use std::fmt;
use std::net::Ipv6Addr;

use super::nid::{AddressKind, LndType, Net, Nid};

/// LND names in Lustre's table order, which is also the prefix-match order for parsing.
pub const LND_NAMES: &[(LndType, &str)] = &[
    (LndType::LO, "lo"),
    (LndType::SOCK, "tcp"),
    (LndType::O2IB, "o2ib"),
    (LndType::GNI, "gni"),
    (LndType::GNIIP, "gip"),
    (LndType::PTL4, "ptlf"),
    (LndType::KFI, "kfi"),
    (LndType::EFA, "efa"),
    (LndType::BXI3, "bxi3f"),
];

impl LndType {
    /// The name Lustre prints for this LND, or `None` for removed and unknown types.
    pub fn name(self) -> Option<&'static str> {
        LND_NAMES.iter().find(|(lnd, _)| *lnd == self).map(|(_, name)| *name)
    }
}

impl fmt::Display for Net {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if *self == Net::ANY {
            return f.write_str("<?>");
        }
        match self.lnd.name() {
            Some(name) if self.number == 0 => f.write_str(name),
            Some(name) => write!(f, "{name}{}", self.number),
            None => write!(f, "<{}:{}>", self.lnd.0, self.number),
        }
    }
}

impl fmt::Display for Nid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_any() {
            return f.write_str("<?>");
        }
        let known = self.lnd().name().is_some();
        match (self.size(), self.lnd().address_kind()) {
            (0, AddressKind::Ip) => write!(f, "{}", std::net::Ipv4Addr::from(self.addr4()))?,
            (0, AddressKind::Numeric | AddressKind::Loopback) => write!(f, "{}", self.addr4())?,
            (12, AddressKind::Ip) if known => {
                let mut octets = [0u8; 16];
                octets.copy_from_slice(self.addr_bytes());
                write!(f, "{}", Ipv6Addr::from(octets))?;
            }
            _ => {
                // Unknown large form: each 32-bit word in hex, joined by ':'.
                for (i, word) in self.addr_bytes().chunks(4).enumerate() {
                    let mut w = [0u8; 4];
                    w[..word.len()].copy_from_slice(word);
                    if i > 0 {
                        f.write_str(":")?;
                    }
                    write!(f, "{:x}", u32::from_be_bytes(w))?;
                }
            }
        }
        write!(f, "@{}", self.net())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn prints_like_libcfs_nidstr() {
        assert_eq!(
            Nid::ipv4(Net::TCP, Ipv4Addr::new(192, 168, 1, 2)).to_string(),
            "192.168.1.2@tcp"
        );
        assert_eq!(Nid::LO_0.to_string(), "0@lo");
        assert_eq!(Nid::new4(Net::new(LndType::PTL4, 2), 42).to_string(), "42@ptlf2");
        let o2ib3 = Nid::ipv4(Net::new(LndType::O2IB, 3), Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(o2ib3.to_string(), "10.0.0.1@o2ib3");
        let v6 = Nid::ipv6(Net::TCP, "2001:db8::1".parse().unwrap());
        assert_eq!(v6.to_string(), "2001:db8::1@tcp");
        assert_eq!(Nid::ANY.to_string(), "<?>");
        assert_eq!(Nid::new4(Net::new(LndType::TOFU, 1), 7).to_string(), "7@<17:1>");
        assert_eq!(Net::new(LndType::SOCK, 1).to_string(), "tcp1");
    }
}
