//! `ulnetd`: see the library documentation.

use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, Subcommand};
use ulnetd::config::{ConfigError, DaemonConfig};
use ulnetd::notify::Notifier;
use ulnetd::{Daemon, StartError, exit};

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
    /// Applied on top of the module parameters. Without it and without module parameters:
    /// one TCP NI on 127.0.0.2@tcp, port 7988.
    #[arg(long, value_name = "FILE", conflicts_with = "check")]
    config: Option<PathBuf>,
    /// Kernel module parameters in a modprobe.d file (`options lnet ...`, `options ksocklnd
    /// ...`, `options libcfs ...`), set before the configuration file is applied. May be
    /// repeated. Without it: /etc/ulnet/modprobe.conf when it exists (`--modprobe
    /// /dev/null` reads none). A parameter ulnetd cannot honour is an error.
    #[arg(long, value_name = "FILE")]
    modprobe: Vec<PathBuf>,
    /// Check the configuration FILE (and the module parameters) and exit: nothing printed
    /// and status 0 when the daemon would start with them; otherwise every problem found
    /// (including blocks, keys and parameters ulnetd cannot honour, such as `udsp:`) on
    /// stderr and status 78 (66 when a file cannot be read). Without FILE, the module
    /// parameters alone. Nothing is started and no socket is bound; interfaces are looked
    /// up as at start-up.
    #[arg(long, value_name = "FILE", num_args = 0..=1)]
    check: Option<Option<PathBuf>>,
    /// Do not host the selftest service (as `lnet_selftest: false` in the configuration).
    #[arg(long)]
    no_selftest: bool,
    /// Leave the CPU partitions' I/O threads unpinned: they run on any CPU the process may
    /// use, instead of each on its partition's CPUs.
    #[arg(long)]
    no_cpu_bind: bool,
    /// The control socket (default: $ULNET_SOCKET, /run/ulnet/ulnetd.sock as root,
    /// $XDG_RUNTIME_DIR/ulnet/ulnetd.sock otherwise).
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Serve Prometheus metrics on http://ADDR/metrics (e.g. 127.0.0.1:9109; port 0 picks
    /// a free port, named in the ready line).
    #[arg(long, value_name = "ADDR", conflicts_with = "check")]
    metrics: Option<SocketAddr>,
    /// Serve an lst console on PATH over this node instead of waiting for signals, and stop
    /// when the console server does (`ulst --config FILE` starts ulnetd so; the console then
    /// has the file's NIs, routes and settings).
    #[arg(long, value_name = "PATH", conflicts_with_all = ["check", "metrics"])]
    lst_console: Option<PathBuf>,
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
        Some(Command::Demo) => ulnetd::logging::init("warn"),
        None => ulnetd::logging::init("info"),
    }
    match (&cli.command, &cli.check) {
        (Some(Command::Demo), _) => ExitCode::from(ulnetd::demo::run(&mut std::io::stdout())),
        (None, Some(path)) => ExitCode::from(check(path.as_deref(), &cli.modprobe)),
        (None, None) => ExitCode::from(run(&cli, started)),
    }
}

/// Runs one daemon until SIGTERM or SIGINT (SIGHUP reloads); returns the exit status.
fn run(cli: &Cli, started: Instant) -> u8 {
    let root = ulnet_control::path::effective_uid() == Some(0);
    let mut config = match load_config(cli.config.as_deref(), &cli.modprobe, root) {
        Ok(config) => config,
        Err(error) => return config_failure(&error, true),
    };
    for warning in &config.warnings {
        tracing::warn!("{warning}");
    }
    for note in &config.notes {
        tracing::info!("modprobe: {note}");
    }
    if cli.no_selftest {
        config.selftest = false;
    }
    if cli.no_cpu_bind {
        config.layout.cpus.clear();
    }
    tracing::info!(
        accept_port = config.tcp.accept_port,
        accept = %config.tcp.accept,
        "TCP settings"
    );
    if !config.selftest {
        tracing::info!("lnet_selftest service not hosted");
    }
    let notifier = notifier();
    // Bound before the node starts, as the control socket is: a taken address fails first.
    let metrics_listener = match cli.metrics.map(TcpListener::bind).transpose() {
        Ok(listener) => listener,
        Err(error) => {
            let address = cli.metrics.map(|address| address.to_string()).unwrap_or_default();
            tracing::error!(%address, %error, "cannot listen for metrics");
            eprintln!("ulnetd: metrics {address}: {error}");
            return exit::SOCKET;
        }
    };
    let (socket, _) = ulnet_control::path::socket_path(cli.socket.clone());
    let daemon = match Daemon::start(&config, &socket, None) {
        Ok(daemon) if cli.lst_console.is_some() => {
            return serve_console(daemon, cli.lst_console.as_deref().unwrap_or(&socket));
        }
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
    let metrics = match metrics_listener
        .map(|listener| ulnetd::metrics::serve(listener, std::sync::Arc::clone(daemon.live())))
        .transpose()
    {
        Ok(server) => server,
        Err(error) => {
            tracing::error!(%error, "cannot serve metrics");
            eprintln!("ulnetd: metrics: {error}");
            daemon.shutdown();
            return exit::SOCKET;
        }
    };
    let ready = || {
        let mut line = daemon.ready_line();
        if let Some(server) = &metrics {
            line.push_str(&format!(" metrics {}", server.local_addr()));
        }
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
        notify(&notifier, |notifier| {
            notifier.ready(line.strip_prefix("ulnetd: ").unwrap_or(&line))
        });
    };
    let reload = || reload(cli, &daemon, &notifier);
    let signal = wait_for_signal(ready, reload);
    match signal {
        Ok(name) => tracing::info!(signal = name, "shutting down"),
        Err(error) => tracing::error!(%error, "cannot wait for signals; shutting down"),
    }
    notify(&notifier, Notifier::stopping);
    if let Some(server) = metrics {
        server.shutdown();
    }
    daemon.shutdown();
    tracing::info!("stopped");
    exit::OK
}

/// `--lst-console PATH`: an lst console server over the daemon's node, until it stops (its
/// idle timeout or `end_session`); then the daemon stops.
fn serve_console(daemon: Daemon, path: &Path) -> u8 {
    let Some(node) = daemon.node() else {
        eprintln!("ulnetd: the console's node is not up");
        daemon.shutdown();
        return exit::NODE;
    };
    let console = match ulnet_selftest::Console::new(&node) {
        Ok(console) => console,
        Err(error) => {
            eprintln!("ulnetd: starting the console: {error}");
            daemon.shutdown();
            return exit::NODE;
        }
    };
    tracing::info!(console = %path.display(), "{}", daemon.ready_line());
    let stop = std::sync::atomic::AtomicBool::new(false);
    let status = match ulnet_selftest::serve::serve(console, path, &stop) {
        Ok(()) => exit::OK,
        Err(error) => {
            eprintln!("ulnetd: serving the console on {}: {error}", path.display());
            exit::SOCKET
        }
    };
    drop(node);
    daemon.shutdown();
    status
}

/// `--check [FILE]`: the start-up checks, nothing started.
fn check(path: Option<&Path>, modprobe: &[PathBuf]) -> u8 {
    let root = ulnet_control::path::effective_uid() == Some(0);
    let modprobe = ulnetd::modprobe::files_to_read(modprobe);
    let modprobe: Vec<&Path> = modprobe.iter().map(PathBuf::as_path).collect();
    match DaemonConfig::load_all(path, &modprobe, root) {
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

/// The configuration file and the module parameters (`--modprobe`, else the default
/// file); with neither, the embedded default.
fn load_config(
    path: Option<&Path>,
    modprobe: &[PathBuf],
    root: bool,
) -> Result<DaemonConfig, ConfigError> {
    let modprobe = ulnetd::modprobe::files_to_read(modprobe);
    if path.is_none() && modprobe.is_empty() {
        let host = ulnetd::interfaces::host_interfaces().unwrap_or_default();
        return DaemonConfig::embedded_default(root, &host);
    }
    for file in &modprobe {
        tracing::info!(file = %file.display(), "module parameters");
    }
    let modprobe: Vec<&Path> = modprobe.iter().map(PathBuf::as_path).collect();
    DaemonConfig::load_all(path, &modprobe, root)
}

/// Registers the SIGTERM, SIGINT and SIGHUP handlers, calls `ready` (so a signal sent as
/// soon as the ready line is seen is caught, not fatal), calls `reload` for each SIGHUP, and
/// returns at the first SIGTERM or SIGINT.
fn wait_for_signal(
    ready: impl FnOnce(),
    mut reload: impl FnMut(),
) -> std::io::Result<&'static str> {
    use tokio::signal::unix::{SignalKind, signal};
    let runtime = tokio::runtime::Builder::new_current_thread().enable_io().build()?;
    runtime.block_on(async {
        let mut terminate = signal(SignalKind::terminate())?;
        let mut interrupt = signal(SignalKind::interrupt())?;
        let mut hangup = signal(SignalKind::hangup())?;
        ready();
        loop {
            tokio::select! {
                _ = terminate.recv() => return Ok("SIGTERM"),
                _ = interrupt.recv() => return Ok("SIGINT"),
                // Runs on this thread: a stop signal during a reload waits for its end.
                _ = hangup.recv() => reload(),
            }
        }
    })
}

/// SIGHUP: the `--config` file applied again ([`ulnetd::reload`]), bracketed by
/// `RELOADING=1` and `READY=1` for systemd; the outcome is logged and is the new status.
fn reload(cli: &Cli, daemon: &Daemon, notifier: &Option<Notifier>) {
    notify(notifier, Notifier::reloading);
    let status = match &cli.config {
        None => {
            tracing::info!("SIGHUP: no --config file, nothing to reload");
            "ready; nothing to reload (no --config)".to_string()
        }
        Some(path) => {
            let root = ulnet_control::path::effective_uid() == Some(0);
            let modprobe = ulnetd::modprobe::files_to_read(&cli.modprobe);
            let modprobe: Vec<&Path> = modprobe.iter().map(PathBuf::as_path).collect();
            match daemon.reload(path, &modprobe, root, cli.no_selftest) {
                Ok(report) => {
                    tracing::info!(file = %path.display(), "configuration reloaded: {report}");
                    format!("ready; configuration reloaded: {report}")
                }
                Err(error) => {
                    for line in error.to_string().lines() {
                        tracing::error!(file = %path.display(), "reload refused: {line}");
                    }
                    format!("ready; reload refused, running as before: {error}")
                }
            }
        }
    };
    notify(notifier, |notifier| notifier.ready(&status));
}

/// The service manager's notification socket, when there is one (a bad one is logged).
fn notifier() -> Option<Notifier> {
    match Notifier::from_env() {
        Ok(notifier) => notifier,
        Err(error) => {
            tracing::warn!(%error, "systemd notifications off");
            None
        }
    }
}

/// Sends a notification if there is a manager; a failure is logged, never fatal.
fn notify(notifier: &Option<Notifier>, send: impl FnOnce(&Notifier) -> std::io::Result<()>) {
    if let Some(notifier) = notifier {
        if let Err(error) = send(notifier) {
            tracing::warn!(%error, "cannot notify the service manager");
        }
    }
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
