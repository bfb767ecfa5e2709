//! `ulnetd`: one LNet node as a daemon, configured like a kernel node and driven by
//! `ulnetctl` (lnetctl's commands) over a control socket.
//!
//! ```text
//! ulnetd [--config FILE] [--modprobe FILE]... [--socket PATH] [--no-selftest] [--no-cpu-bind]
//!        [--metrics ADDR]                          run one node
//! ulnetd --check [FILE] [--modprobe FILE]...       validate a configuration, run nothing
//! ulnetd demo                                      two nodes, ping, PUT/GET, stats, stop
//! ```
//!
//! * **Configuration**: the YAML `lnetctl import` accepts, plus `accept_port`, `accept` and
//!   `lnet_selftest` in `global:` ([`config`] has the keys; `--no-selftest` is the last's flag). A `nid:` key on a local NI brings the NI up on
//!   exactly that address, so many nodes share one host on 127.0.0.2, 127.0.0.3, ...
//!   Without `--config`, the embedded [`config::DEFAULT_CONFIG`]: one TCP NI on
//!   `127.0.0.2@tcp`, port 7988, no root needed. The file is read strictly: a block or key
//!   ulnetd cannot honour (`udsp:`, unknown keys) is an error naming it, before anything starts; `--check FILE` runs the same checks only.
//! * **Module parameters**: modprobe.d files (`--modprobe FILE`, else
//!   `/etc/ulnet/modprobe.conf` when it exists; [`modprobe`]) with `options lnet`,
//!   `options ksocklnd` and `options libcfs` lines, set first as the kernel sets them at
//!   load; the configuration file then applies on top, as `lnetctl import` after load. A
//!   parameter ulnetd cannot honour is an error naming its file, line and name (decision 0020).
//! * **Control socket**: `--socket`, else `$ULNET_SOCKET`, else `/run/ulnet/ulnetd.sock` for
//!   root and `$XDG_RUNTIME_DIR/ulnet/ulnetd.sock` otherwise (`ulnet_control::path`).
//!   `ulnetctl` finds it by the same rules.
//! * **Readiness**: once the node is up and the socket serves, one line on stdout:
//!   `ulnetd: ready <nid>,<nid>,... control <socket>` (then `metrics <address>` with
//!   `--metrics`); the startup time is logged; under systemd (`$NOTIFY_SOCKET`), `READY=1`
//!   ([`notify`]).
//! * **Signals**: SIGTERM or SIGINT shut down gracefully ([`daemon`] has the order): messages
//!   in flight finalized with an error, connections closed, the socket file removed; exit 0.
//!   SIGHUP reloads the `--config` file into the running node ([`reload`]).
//! * **Metrics**: `--metrics ADDR` serves Prometheus's text format on `http://ADDR/metrics`
//!   ([`metrics`]).
//! * **Logs**: `tracing` to stderr, filtered by `$ULNET_LOG` (`info` by default; e.g.
//!   `ULNET_LOG=ulnetd=debug,ulnet=trace`); in the systemd journal's shape when stderr is
//!   the journal ([`logging`]).
//! * **Exit status**: 0 after a signal; 2 bad arguments; 66 a configuration or modprobe.d
//!   file unreadable; 78 configuration invalid; 73 control socket in use or not creatable; 1 the node failed
//!   to start (e.g. its address is taken).
//! * Linked or invoked as `ulnetctl`, the binary is `ulnetctl` (one binary can serve both,
//!   and tests run the CLI from it).
//!
//! Modules: [`config`] (the file), [`modprobe`] (module parameters), [`cpu_topology`] and
//! [`device_numa`] (partitions and where devices sit), [`nets`] (NIs resolved to exact NIDs
//! and bound to partitions), [`live`] (the node and every control request), [`daemon`] (socket,
//! server, shutdown order), [`reload`], [`metrics`], [`notify`], [`logging`], [`demo`]. The
//! package also builds `ulnet-legacy2yaml` (`src/bin/`), Lustre's `lnet_legacy2yaml` over
//! `ulnet_config::legacy2yaml`.

pub mod config;
pub mod cpu_topology;
pub mod daemon;
pub mod demo;
pub mod device_numa;
pub mod interfaces;
pub mod live;
pub mod logging;
pub mod metrics;
pub mod modprobe;
pub mod nets;
pub mod notify;
pub mod reload;
mod view;

pub use config::{AcceptPolicy, ConfigError, DaemonConfig, TcpSettings};
pub use daemon::{Daemon, StartError};
pub use live::{LiveNode, LndChoice};

/// Exit statuses (sysexits.h values where one fits).
pub mod exit {
    /// Clean shutdown after SIGTERM or SIGINT.
    pub const OK: u8 = 0;
    /// The node failed to start (its address is taken, the LND is missing, ...).
    pub const NODE: u8 = 1;
    /// Bad command line (clap's usage status).
    pub const USAGE: u8 = 2;
    /// `EX_NOINPUT`: the configuration file cannot be read.
    pub const NO_INPUT: u8 = 66;
    /// `EX_CANTCREAT`: the control socket (or the `--metrics` address) is in use or cannot
    /// be created.
    pub const SOCKET: u8 = 73;
    /// `EX_CONFIG`: the configuration is invalid.
    pub const CONFIG: u8 = 78;
}
