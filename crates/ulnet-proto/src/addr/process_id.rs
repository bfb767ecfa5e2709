//! Process ids: a NID plus a 32-bit pid, the address of an LNet endpoint.
//!
//! lustre: include/uapi/linux/lnet/lnet-types.h (`struct lnet_process_id`,
//! `struct lnet_processid`, `LNET_PID_*`), lnet/lnet/nidstrings.c `libcfs_idstr()`,
//! `libcfs_strid()`.

use std::fmt;
use std::str::FromStr;

use super::nid::Nid;
use super::text::{NidParseError, NumberError, parse_decimal};

/// The pid every kernel Lustre node uses, and the one kernels address (pings, pushes).
pub const LNET_PID_LUSTRE: u32 = 12345;
/// Wildcard pid, printed `LNET_PID_ANY`.
pub const LNET_PID_ANY: u32 = 0xFFFF_FFFF;
/// Marks a userspace peer; the kernel refuses to dial such a pid.
pub const LNET_PID_USERFLAG: u32 = 0x8000_0000;
/// Reserved pid bits.
pub const LNET_PID_RESERVED: u32 = 0xF000_0000;

/// An LNet process id (`lnet_process_id` / `lnet_processid`), with the NID in its large form.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProcessId {
    pub nid: Nid,
    pub pid: u32,
}

/// Why text is not a process id (`[U]<pid>-<nid>`, `LNET_PID_ANY-<nid>` or `<nid>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProcessIdParseError {
    /// Nothing (or only "U") before the '-'.
    #[error("empty pid before '-'")]
    MissingPid,
    /// The pid has a character that is not a decimal digit.
    #[error("pid is not a decimal number")]
    BadPid,
    #[error("pid does not fit in 32 bits")]
    PidOverflow,
    #[error("bad NID in process id")]
    Nid(#[from] NidParseError),
}

impl ProcessId {
    /// Any NID and any pid: a match id that matches every initiator.
    pub const ANY: Self = Self { nid: Nid::ANY, pid: LNET_PID_ANY };

    pub const fn new(nid: Nid, pid: u32) -> Self {
        Self { nid, pid }
    }

    /// `nid` with the pid of kernel Lustre nodes, [`LNET_PID_LUSTRE`].
    pub const fn lustre(nid: Nid) -> Self {
        Self { nid, pid: LNET_PID_LUSTRE }
    }

    /// True when the pid carries [`LNET_PID_USERFLAG`] (and is not the wildcard).
    pub fn is_userspace(&self) -> bool {
        self.pid != LNET_PID_ANY && self.pid & LNET_PID_USERFLAG != 0
    }
}

/// lustre: nidstrings.c `libcfs_idstr()`.
impl fmt::Display for ProcessId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.pid == LNET_PID_ANY {
            return write!(f, "LNET_PID_ANY-{}", self.nid);
        }
        let user = if self.pid & LNET_PID_USERFLAG != 0 { "U" } else { "" };
        write!(f, "{user}{}-{}", self.pid & !LNET_PID_USERFLAG, self.nid)
    }
}

impl fmt::Debug for ProcessId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ProcessId({self})")
    }
}

/// Parses what `Display` prints. lustre: nidstrings.c `libcfs_strid()`, which defaults the pid
/// to 12345 without a "`<pid>-`" prefix. Lustre's parser does not read the "U" and
/// "LNET_PID_ANY" forms it prints; this one does, so printing round-trips.
impl FromStr for ProcessId {
    type Err = ProcessIdParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        // No NID text contains '-' (IPv4, IPv6, numbers, net names), so the first '-' is the
        // separator; a pid never contains one either.
        let Some((pid_text, nid_text)) = text.split_once('-') else {
            return Ok(Self::lustre(text.parse()?));
        };
        let pid = parse_pid(pid_text)?;
        Ok(Self { nid: nid_text.parse()?, pid })
    }
}

fn parse_pid(text: &str) -> Result<u32, ProcessIdParseError> {
    if text == "LNET_PID_ANY" {
        return Ok(LNET_PID_ANY);
    }
    let (flag, digits) = match text.strip_prefix('U') {
        Some(digits) => (LNET_PID_USERFLAG, digits),
        None => (0, text),
    };
    if digits.is_empty() {
        return Err(ProcessIdParseError::MissingPid);
    }
    let pid = parse_decimal(digits).map_err(|error| match error {
        NumberError::Invalid => ProcessIdParseError::BadPid,
        NumberError::Overflow => ProcessIdParseError::PidOverflow,
    })?;
    Ok(pid | flag)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::{LndType, Net};
    use proptest::prelude::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn tcp(a: u8, b: u8, c: u8, d: u8) -> Nid {
        Nid::ipv4(Net::TCP, Ipv4Addr::new(a, b, c, d))
    }

    #[test]
    fn prints_like_libcfs_idstr() {
        let nid = tcp(192, 168, 1, 2);
        assert_eq!(ProcessId::lustre(nid).to_string(), "12345-192.168.1.2@tcp");
        assert_eq!(ProcessId::new(nid, LNET_PID_ANY).to_string(), "LNET_PID_ANY-192.168.1.2@tcp");
        let user = ProcessId::new(nid, LNET_PID_USERFLAG | 7);
        assert_eq!(user.to_string(), "U7-192.168.1.2@tcp");
        assert!(user.is_userspace());
        assert!(!ProcessId::new(nid, LNET_PID_ANY).is_userspace());
        let v6 = ProcessId::lustre(Nid::ipv6(Net::TCP, Ipv6Addr::LOCALHOST));
        assert_eq!(v6.to_string(), "12345-::1@tcp");
    }

    #[test]
    fn parses_every_printed_form() {
        let nid = tcp(10, 0, 0, 1);
        assert_eq!("10.0.0.1@tcp".parse(), Ok(ProcessId::lustre(nid)));
        assert_eq!("10.0.0.1".parse(), Ok(ProcessId::lustre(nid)));
        assert_eq!("12345-10.0.0.1@tcp".parse(), Ok(ProcessId::lustre(nid)));
        assert_eq!("0-10.0.0.1@tcp".parse(), Ok(ProcessId::new(nid, 0)));
        assert_eq!("U7-10.0.0.1@tcp".parse(), Ok(ProcessId::new(nid, LNET_PID_USERFLAG | 7)));
        assert_eq!("LNET_PID_ANY-10.0.0.1@tcp".parse(), Ok(ProcessId::new(nid, LNET_PID_ANY)));
        assert_eq!("4294967295-<?>".parse(), Ok(ProcessId::new(Nid::ANY, LNET_PID_ANY)));
        let v6 = Nid::ipv6(Net::new(LndType::O2IB, 2), "2001:db8::5".parse().expect("IPv6"));
        assert_eq!("99-2001:db8::5@o2ib2".parse(), Ok(ProcessId::new(v6, 99)));
        assert_eq!("::1".parse(), Ok(ProcessId::lustre(Nid::ipv6(Net::TCP, Ipv6Addr::LOCALHOST))));
    }

    #[test]
    fn parse_errors() {
        use ProcessIdParseError as E;
        assert_eq!("-10.0.0.1@tcp".parse::<ProcessId>(), Err(E::MissingPid));
        assert_eq!("U-10.0.0.1@tcp".parse::<ProcessId>(), Err(E::MissingPid));
        assert_eq!("12a-10.0.0.1@tcp".parse::<ProcessId>(), Err(E::BadPid));
        assert_eq!("+5-10.0.0.1@tcp".parse::<ProcessId>(), Err(E::BadPid));
        assert_eq!("4294967296-10.0.0.1@tcp".parse::<ProcessId>(), Err(E::PidOverflow));
        assert_eq!("5-".parse::<ProcessId>(), Err(E::Nid(NidParseError::Empty)));
        assert_eq!("5-my-host@tcp".parse::<ProcessId>(), Err(E::Nid(NidParseError::Hostname)));
        assert_eq!(
            "10.0.0.256@tcp".parse::<ProcessId>(),
            Err(E::Nid(NidParseError::OctetOutOfRange))
        );
    }

    proptest! {
        #[test]
        fn print_then_parse_is_identity(pid in any::<u32>(), addr in any::<u32>(), v6 in any::<[u8; 16]>(), large in any::<bool>()) {
            let nid = if large {
                Nid::ipv6(Net::TCP, Ipv6Addr::from(v6))
            } else {
                Nid::new4(Net::new(LndType::O2IB, 1), addr)
            };
            let id = ProcessId::new(nid, pid);
            prop_assert_eq!(id.to_string().parse::<ProcessId>(), Ok(id));
        }

        #[test]
        fn parse_never_panics(text in any::<String>()) {
            let _ = text.parse::<ProcessId>();
        }
    }
}
