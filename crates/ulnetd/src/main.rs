//! `ulnetd`: see the library documentation.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;
use ulnetd::config::{ConfigError, DaemonConfig};
use ulnetd::{Daemon, StartError, exit};

/// The environment variable holding the log filter.
const LOG_ENV: &str = "ULNET_LOG";

#[derive(Debug, Parser)]
#[command(
    name = "ulnetd",
    version,
    about = "The ulnet node daemon: one LNet node, driven by ulnetctl"
)]
#[command(args_conflicts_with_subcommands = true)]
struct Cli {
    /// Configuration in lnetctl's import YAML (plus `accept_port`, `accept` and
    /// `lnet_selftest` in `global:`); a block or key ulnetd cannot honour is an error.
    /// Without it: one TCP NI on 127.0.0.2@tcp, port 7988.
    #[arg(long, value_name = "FILE", conflicts_with = "check")]
    config: Option<PathBuf>,
    /// Check the configuration FILE and exit: nothing printed and status 0 when the daemon
    /// would start with it; otherwise every problem found (including blocks and keys ulnetd
    /// cannot honour, such as `udsp:`) on stderr and status 78 (66 when FILE cannot be
    /// read). Nothing is started and no socket is bound; interfaces are looked up as at
    /// start-up.
    #[arg(long, value_name = "FILE")]
    check: Option<PathBuf>,
    /// Do not host the selftest service (as `lnet_selftest: false` in the configuration).
    #[arg(long)]
    no_selftest: bool,
    /// The control socket (default: $ULNET_SOCKET, /run/ulnet/ulnetd.sock as root,
    /// $XDG_RUNTIME_DIR/ulnet/ulnetd.sock otherwise).
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Two nodes on 127.0.0.2 and 127.0.0.3: ping, PUT and GET, statistics, stop.
    Demo,
}

fn main() -> ExitCode {
    let started = Instant::now();
    if invoked_as_ulnetctl() {
        return ulnetctl_main();
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            let _ = error.print();
            return ExitCode::from(if error.use_stderr() { exit::USAGE } else { exit::OK });
        }
    };
    match cli.command {
        // The demo's own output is the point: only warnings from the nodes by default.
        Some(Command::Demo) => init_logging("warn"),
        None => init_logging("info"),
    }
    match (&cli.command, &cli.check) {
        (Some(Command::Demo), _) => ExitCode::from(ulnetd::demo::run(&mut std::io::stdout())),
        (None, Some(path)) => ExitCode::from(check(path)),
        (None, None) => ExitCode::from(run(&cli, started)),
    }
}

/// Runs one daemon until SIGTERM or SIGINT; returns the exit status.
fn run(cli: &Cli, started: Instant) -> u8 {
    let root = ulnet_control::path::effective_uid() == Some(0);
    let mut config = match load_config(cli.config.as_deref(), root) {
        Ok(config) => config,
        Err(error) => return config_failure(&error, true),
    };
    for warning in &config.warnings {
        tracing::warn!("{warning}");
    }
    if cli.no_selftest {
        config.selftest = false;
    }
    tracing::info!(
        accept_port = config.tcp.accept_port,
        accept = %config.tcp.accept,
        "TCP settings"
    );
    if !config.selftest {
        tracing::info!("lnet_selftest service not hosted");
    }
    let (socket, _) = ulnet_control::path::socket_path(cli.socket.clone());
    let daemon = match Daemon::start(&config, &socket, None) {
        Ok(daemon) => daemon,
        Err(error) => {
            tracing::error!("{error}");
            eprintln!("ulnetd: {error}");
            return match error {
                StartError::Listen(_) => exit::SOCKET,
                StartError::Node(_) | StartError::Server(_) => exit::NODE,
                StartError::Routing(_) | StartError::Udsp(_) => exit::CONFIG,
            };
        }
    };
    let signal = wait_for_signal(|| {
        let line = daemon.ready_line();
        // Logged first, so whoever sees the ready line finds it in the log too.
        tracing::info!(
            startup_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
            "{}",
            line.strip_prefix("ulnetd: ").unwrap_or(&line)
        );
        let mut stdout = std::io::stdout().lock();
        // A closed stdout must not stop the daemon; the log has the same facts.
        let _ = writeln!(stdout, "{line}");
        let _ = stdout.flush();
    });
    match signal {
        Ok(name) => tracing::info!(signal = name, "shutting down"),
        Err(error) => tracing::error!(%error, "cannot wait for signals; shutting down"),
    }
    daemon.shutdown();
    tracing::info!("stopped");
    exit::OK
}

/// `--check FILE`: the start-up checks, nothing started.
fn check(path: &Path) -> u8 {
    let root = ulnet_control::path::effective_uid() == Some(0);
    match DaemonConfig::load(path, root) {
        Ok(_) => exit::OK,
        Err(error) => config_failure(&error, false),
    }
}

/// Reports a refused configuration, one line per problem, and returns the exit status.
fn config_failure(error: &ConfigError, log: bool) -> u8 {
    for line in error.to_string().lines() {
        if log {
            tracing::error!("{line}");
        }
        eprintln!("ulnetd: {line}");
    }
    match error {
        ConfigError::Read { .. } => exit::NO_INPUT,
        _ => exit::CONFIG,
    }
}

fn load_config(path: Option<&Path>, root: bool) -> Result<DaemonConfig, ConfigError> {
    match path {
        Some(path) => DaemonConfig::load(path, root),
        None => {
            let host = ulnetd::interfaces::host_interfaces().unwrap_or_default();
            DaemonConfig::embedded_default(root, &host)
        }
    }
}

/// Registers the SIGTERM and SIGINT handlers, calls `ready` (so a signal sent as soon as
/// the ready line is seen is caught, not fatal), and waits for one of them.
fn wait_for_signal(ready: impl FnOnce()) -> std::io::Result<&'static str> {
    use tokio::signal::unix::{SignalKind, signal};
    let runtime = tokio::runtime::Builder::new_current_thread().enable_io().build()?;
    runtime.block_on(async {
        let mut terminate = signal(SignalKind::terminate())?;
        let mut interrupt = signal(SignalKind::interrupt())?;
        ready();
        tokio::select! {
            _ = terminate.recv() => Ok("SIGTERM"),
            _ = interrupt.recv() => Ok("SIGINT"),
        }
    })
}

/// Logs to stderr, filtered by `$ULNET_LOG`, else by `default`.
fn init_logging(default: &str) {
    let filter = EnvFilter::try_from_env(LOG_ENV).unwrap_or_else(|_| EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}

/// True when the program was run under the name `ulnetctl` (a link to this binary).
fn invoked_as_ulnetctl() -> bool {
    std::env::args_os()
        .next()
        .is_some_and(|arg0| Path::new(&arg0).file_name().is_some_and(|name| name == "ulnetctl"))
}

/// `ulnetctl`'s main, as the ulnetctl binary has it.
fn ulnetctl_main() -> ExitCode {
    ExitCode::from(ulnetctl::run_process())
}
