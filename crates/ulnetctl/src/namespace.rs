//! Interface names and network namespaces.
//!
//! The kernel resolves the interfaces `lnetctl net add --if`, `--ip2net` and an import's
//! `interfaces:`/`ip2nets:` name in the network namespace of the lnetctl process, and the NI
//! lives there (its sockets are made in that namespace). ulnetd makes every socket in its
//! own namespace, so it resolves names there; a ulnetctl in another namespace would have an
//! interface of the same name in ulnetd's namespace configured, a different one. Such a
//! request is refused before it is sent, naming both namespaces.
//!
//! lustre: lnet/lnet/api-ni.c `lnet_dyn_add_ni()` (`current->nsproxy->net_ns`),
//! lnet/lnet/config.c `lnet_inet_enumerate()`.

use ulnet_config::model::import as parse_import;
use ulnet_control::message::{LocalNiSpec, errno};
use ulnet_control::{ControlError, Request};

/// Whether `request` names host interfaces the node would resolve.
pub(crate) fn names_interfaces(request: &Request) -> bool {
    let interface = |ni: &LocalNiSpec| matches!(ni, LocalNiSpec::Interface { .. });
    match request {
        Request::NetAdd(add) => add.ip2net.is_some() || add.nis.iter().any(interface),
        Request::NetDel(del) => del.nis.iter().any(interface),
        Request::Import { mode, text } => {
            parse_import(text, (*mode).into()).is_ok_and(|imported| {
                !imported.config.ip2nets.is_empty()
                    || imported
                        .config
                        .nets
                        .iter()
                        .flat_map(|net| &net.nis)
                        .any(|ni| !ni.interfaces.is_empty())
            })
        }
        _ => false,
    }
}

/// The refusal when this process and the daemon `daemon_pid` are in different network
/// namespaces; `None` when they share one, or when either cannot be told (no `/proc`).
pub(crate) fn mismatch(daemon_pid: u32) -> Option<ControlError> {
    let ours = std::fs::read_link("/proc/self/ns/net").ok()?;
    let theirs = std::fs::read_link(format!("/proc/{daemon_pid}/ns/net")).ok()?;
    (ours != theirs).then(|| {
        ControlError::refused(
            errno::EINVAL,
            format!(
                "ulnetd resolves interfaces in its network namespace ({}), not in this \
                 process's ({}): run ulnetctl in ulnetd's namespace",
                theirs.display(),
                ours.display()
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ulnet_control::message::{ImportMode, NetAdd, NetDel};

    #[test]
    fn interface_names_are_found_where_requests_carry_them() {
        let by_name = LocalNiSpec::Interface { name: "eth0".into(), cpts: None };
        let by_nid = LocalNiSpec::Nid { nid: "10.0.0.1@tcp".into() };
        let add = |nis: Vec<LocalNiSpec>, ip2net: Option<&str>| {
            Request::NetAdd(NetAdd { nis, ip2net: ip2net.map(str::to_string), ..NetAdd::default() })
        };
        assert!(names_interfaces(&add(vec![by_name.clone()], None)));
        assert!(names_interfaces(&add(Vec::new(), Some("tcp 10.0.0.*"))));
        assert!(!names_interfaces(&add(vec![by_nid.clone()], None)));
        assert!(names_interfaces(&Request::NetDel(NetDel { net: None, nis: vec![by_name] })));
        assert!(!names_interfaces(&Request::NetDel(NetDel { net: None, nis: vec![by_nid] })));
        let import = |text: &str| Request::Import { mode: ImportMode::Add, text: text.into() };
        assert!(names_interfaces(&import(
            "net:\n  - net type: tcp\n    local NI(s):\n      - interfaces:\n          0: eth0\n"
        )));
        assert!(names_interfaces(&import(
            "ip2nets:\n  - net-spec: tcp\n    ip-range:\n      0: 10.*.*.*\n"
        )));
        assert!(!names_interfaces(&import(
            "net:\n  - net type: tcp\n    local NI(s):\n      - nid: 10.0.0.1@tcp\n"
        )));
        assert!(!names_interfaces(&Request::PeerList));
    }

    #[test]
    fn this_process_shares_its_own_namespace() {
        assert!(mismatch(std::process::id()).is_none());
    }
}
