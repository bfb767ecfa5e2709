//! One running daemon: the control socket, the live node, the control server, and the
//! shutdown order.
//!
//! Start: bind the control socket first (so a second daemon on the same socket fails
//! before it takes any network address), build the node, serve. Stop: the node goes down
//! first (messages in flight finalized with an error, connections closed, pings waiting in
//! control handlers released), then the control server (its connections closed), then the
//! socket file is removed.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ulnet::{BuildError, Node};
use ulnet_control::{ListenError, Server, listen};
use ulnet_proto::addr::Nid;

use crate::config::DaemonConfig;
use crate::live::{LiveNode, LndChoice, nid_list};

/// A running daemon. Dropping it shuts it down.
#[derive(Debug)]
pub struct Daemon {
    live: Arc<LiveNode>,
    server: Option<Server>,
    socket: PathBuf,
}

/// Why a daemon did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("control socket: {0}")]
    Listen(#[from] ListenError),
    #[error("node: {0}")]
    Node(#[from] BuildError),
    #[error("control server: {0}")]
    Server(#[source] std::io::Error),
    /// The node refused a route, or the routing or buffers settings, of the configuration.
    #[error("configuration: {0}")]
    Routing(ulnet_control::ControlError),
    #[error("udsp: {0}")]
    Udsp(ulnet_control::ControlError),
}

impl Daemon {
    /// Starts a node from `config` with its control socket at `socket`. `fabric` puts the
    /// tcp NIs on an in-process fabric instead of TCP (tests and the demo).
    pub fn start(
        config: &DaemonConfig,
        socket: &Path,
        fabric: Option<ulnet::MemFabric>,
    ) -> Result<Self, StartError> {
        let listener = listen(socket)?;
        let lnd = match fabric {
            Some(fabric) => LndChoice::Mem(fabric),
            None => LndChoice::Tcp(config.tcp),
        };
        if !config.layout.text.is_empty() {
            tracing::info!(
                partitions = config.layout.partitions.count(),
                table = %config.layout.text.trim_end().replace('\n', "; "),
                "CPU partitions"
            );
        }
        let live = match LiveNode::start(
            lnd,
            config.layout.clone(),
            config.nets.clone(),
            config.settings,
            config.selftest,
        ) {
            Ok(live) => Arc::new(live.with_sysctl_setup(config.enable_sysctl_setup)),
            Err(error) => {
                drop(listener);
                remove_socket(socket);
                return Err(error.into());
            }
        };
        // Routes are strict (decision 0019): a node that does not route as its file says
        // does not start. They go first, as `route:` comes before `peer:` in an export.
        if let Err(error) = live.apply_boot_routing(config.routing.clone()) {
            live.shutdown();
            remove_socket(socket);
            return Err(StartError::Routing(error));
        }
        // A peer the node refuses is reported and left out, as `lnetctl import` reports a
        // refused item of `lnet.conf` and the service still starts.
        if let Err(error) = live.add_peers(&config.peers) {
            tracing::warn!(%error, "configuration: peer not added");
        }
        // Checked when the configuration was read: a refusal here is a bug, and the daemon
        // does not serve a node that differs from its file.
        if let Err(error) = live.add_udsp_rules(&config.udsp) {
            live.shutdown();
            remove_socket(socket);
            return Err(StartError::Udsp(error));
        }
        live.wait_router_start();
        let handler_live = Arc::clone(&live);
        let handler = move |request| handler_live.handle(request);
        let server = match Server::spawn(listener, handler) {
            Ok(server) => server,
            Err(error) => {
                live.shutdown();
                remove_socket(socket);
                return Err(StartError::Server(error));
            }
        };
        Ok(Self { live, server: Some(server), socket: socket.to_path_buf() })
    }

    /// The line that tells scripts the daemon serves: `ulnetd: ready <nids> control <socket>`,
    /// NIDs comma-separated, `0@lo` first.
    pub fn ready_line(&self) -> String {
        format!("ulnetd: ready {} control {}", nid_list(&self.nids()), self.socket.display())
    }

    pub fn nids(&self) -> Vec<Nid> {
        self.live.nids()
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// A handle on the running node (`None` after `lnet unconfigure`).
    pub fn node(&self) -> Option<Node> {
        self.live.node()
    }

    pub fn live(&self) -> &Arc<LiveNode> {
        &self.live
    }

    /// Shuts down in the order of the module documentation.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        let Some(server) = self.server.take() else { return };
        self.live.shutdown();
        server.shutdown();
        remove_socket(&self.socket);
        tracing::info!(socket = %self.socket.display(), "control socket removed");
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop();
    }
}

fn remove_socket(socket: &Path) {
    if let Err(error) = std::fs::remove_file(socket) {
        if error.kind() != std::io::ErrorKind::NotFound {
            tracing::warn!(socket = %socket.display(), %error, "cannot remove the control socket");
        }
    }
}
