//! Reloading the configuration file into a running daemon (SIGHUP, `systemctl reload`).
//!
//! A reload makes the running node what a restart with the file would make it, in place:
//! the file is read and checked exactly as at start-up (`--check`'s checks), then
//!
//! * **nets**: NIs the file adds come up and NIs it no longer lists go down, in place
//!   (other NIs keep their connections, peers and counters); a kept net whose tunables
//!   changed is rebuilt, as `ulnetctl net add` would. NIs added at run time by
//!   `ulnetctl net add` and not in the file go too: the file is the configuration.
//! * **global settings**: every key takes the file's value, or its default when the file
//!   does not set it (reverting `ulnetctl set` changes), and reaches the engine at once.
//! * **routing**: routes the file no longer lists go (also those added by `ulnetctl route
//!   add`), its new ones come, a route whose hop count or priority changed is replaced;
//!   forwarding follows `routing:` (off without the block, as at start, with `set
//!   routing`'s grace period skipped as at start); router buffer counts the file sets are
//!   applied, the others keep their current values.
//! * **peers**: the file's peers are added (re-adding what a peer has changes nothing; NIDs
//!   it lacks are added, a Multi-Rail flag that differs re-creates it); configured peers the
//!   file no longer lists are deleted. Peers discovered from traffic are left alone, and a
//!   configured peer's NIDs are never removed (discovery adds NIDs too; `ulnetctl peer del
//!   --nid` removes one).
//! * **UDSP rules**: when the file's `udsp:` rules (in the order they would be added) are not
//!   the node's, every rule is deleted (reverting what it stamped) and the file's are added
//!   in order, as `udsp del --all` then `import` would: rules added by `ulnetctl udsp add`
//!   and not in the file go too.
//! * **what `lnet configure --all` brings up** becomes the file's nets.
//!
//! The module parameters (`--modprobe`, decision 0020) are read again too, as a restart
//! would. What cannot change on a running node is refused by name and nothing is applied:
//! `accept_port` and `accept` (every TCP NI's acceptor and the port peers are dialled on),
//! ksocklnd's module parameters (every connection's settings, fixed at module load),
//! `lnet_selftest` (restart the daemon), a file that no longer loads, settings the engine
//! refuses together (`retry_count` not below `transaction_timeout`), and a reload while
//! LNet is unconfigured (`ulnetctl lnet configure --all` starts it from the file as it was
//! at start-up). The daemon keeps running as it was; the log says why (decision 0024).

use std::fmt;
use std::path::Path;

use ulnet_control::ControlError;
use ulnet_proto::addr::Nid;

use crate::config::{ConfigError, DaemonConfig, Unsupported};
use crate::daemon::Daemon;

/// What a reload changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReloadReport {
    pub nis_added: Vec<Nid>,
    pub nis_removed: Vec<Nid>,
    /// The `global show` keys whose value changed.
    pub settings_changed: Vec<&'static str>,
    /// Routes the file added or no longer lists (`net via gateway`); a route whose hop count
    /// or priority changed is in both.
    pub routes_added: Vec<String>,
    pub routes_removed: Vec<String>,
    /// Configured peers the file added, by primary NID.
    pub peers_added: Vec<Nid>,
    /// Configured peers no longer in the file, deleted.
    pub peers_removed: Vec<Nid>,
    /// Peers of the file the node refused (`<primary>: <why>`), as a start-up logs them.
    pub peers_refused: Vec<String>,
    /// The number of UDSP rules the node has after replacing its rules with the file's;
    /// `None` when they were the file's already.
    pub udsp_replaced: Option<usize>,
}

impl ReloadReport {
    pub fn changed_nothing(&self) -> bool {
        self.nis_added.is_empty()
            && self.nis_removed.is_empty()
            && self.settings_changed.is_empty()
            && self.routes_added.is_empty()
            && self.routes_removed.is_empty()
            && self.peers_added.is_empty()
            && self.peers_removed.is_empty()
            && self.udsp_replaced.is_none()
    }
}

impl fmt::Display for ReloadReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nids = |nids: &[Nid]| nids.iter().map(Nid::to_string).collect::<Vec<_>>().join(",");
        let mut parts = Vec::new();
        if !self.nis_added.is_empty() {
            parts.push(format!("NIs added {}", nids(&self.nis_added)));
        }
        if !self.nis_removed.is_empty() {
            parts.push(format!("NIs removed {}", nids(&self.nis_removed)));
        }
        if !self.settings_changed.is_empty() {
            parts.push(format!("settings changed {}", self.settings_changed.join(",")));
        }
        if !self.routes_removed.is_empty() {
            parts.push(format!("routes removed {}", self.routes_removed.join(",")));
        }
        if !self.routes_added.is_empty() {
            parts.push(format!("routes added {}", self.routes_added.join(",")));
        }
        if !self.peers_added.is_empty() {
            parts.push(format!("peers added {}", nids(&self.peers_added)));
        }
        if !self.peers_removed.is_empty() {
            parts.push(format!("peers removed {}", nids(&self.peers_removed)));
        }
        if !self.peers_refused.is_empty() {
            parts.push(format!("peers refused {}", self.peers_refused.join(", ")));
        }
        if let Some(count) = self.udsp_replaced {
            parts.push(format!("udsp rules replaced ({count} now)"));
        }
        if parts.is_empty() {
            return f.write_str("no change");
        }
        f.write_str(&parts.join("; "))
    }
}

/// Why a reload applied nothing, or stopped part way.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The file does not load (the same errors as at start-up).
    #[error("{0}")]
    Config(#[from] ConfigError),
    /// Changes a running node cannot take, one line each; nothing was applied.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Refused(Vec<Unsupported>),
    #[error(
        "LNet is not configured: nothing to reload into (`ulnetctl lnet configure --all` starts it)"
    )]
    NotConfigured,
    #[error("the daemon is shutting down")]
    Stopping,
    /// The node refused the new nets (an address is taken, ...); the previous nets are
    /// back and nothing else changed.
    #[error("nets not changed: {}", .0.descr())]
    Nets(ControlError),
    /// The engine refused the new settings after the nets changed.
    #[error("settings not applied: {}", .0.descr())]
    Settings(ControlError),
    /// The node refused a route or the routing settings after the nets and settings
    /// changed; the routes before it are applied.
    #[error("routing not applied: {0}")]
    Routing(String),
    /// The node refused one of the file's UDSP rules (checked when the file was read, so not
    /// expected); the rules before it are in place.
    #[error("udsp rules not applied: {}", .0.descr())]
    Udsp(ControlError),
}

impl Daemon {
    /// Reads `path` again, on top of the modprobe.d files `modprobe` as at start-up, and
    /// applies it (see the module documentation). `no_selftest` is the command line's
    /// `--no-selftest`, which overrides the file as at start-up.
    pub fn reload(
        &self,
        path: &Path,
        modprobe: &[&Path],
        root: bool,
        no_selftest: bool,
    ) -> Result<ReloadReport, ReloadError> {
        let mut config = DaemonConfig::load_all(Some(path), modprobe, root)?;
        if no_selftest {
            config.selftest = false;
        }
        self.live().reload(&config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_names_each_change() {
        let nid = |text: &str| text.parse::<Nid>().unwrap();
        assert_eq!(ReloadReport::default().to_string(), "no change");
        assert!(ReloadReport::default().changed_nothing());
        let report = ReloadReport {
            nis_added: vec![nid("127.0.0.3@tcp"), nid("127.0.1.3@tcp1")],
            nis_removed: vec![nid("127.0.0.2@tcp")],
            settings_changed: vec!["retry_count", "discovery"],
            routes_added: vec!["tcp1 via 127.0.0.9@tcp".into()],
            routes_removed: vec![],
            peers_added: vec![nid("127.0.0.9@tcp")],
            peers_removed: vec![],
            peers_refused: vec!["127.0.0.3@tcp: failed to add primary peer".into()],
            udsp_replaced: Some(2),
        };
        assert!(!report.changed_nothing());
        assert_eq!(
            report.to_string(),
            "NIs added 127.0.0.3@tcp,127.0.1.3@tcp1; NIs removed 127.0.0.2@tcp; \
             settings changed retry_count,discovery; routes added tcp1 via 127.0.0.9@tcp; \
             peers added 127.0.0.9@tcp; \
             peers refused 127.0.0.3@tcp: failed to add primary peer; \
             udsp rules replaced (2 now)"
        );
    }
}
