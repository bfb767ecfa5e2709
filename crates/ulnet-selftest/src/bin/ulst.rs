//! `ulst`: the lst-compatible LNet self-test console.
//!
//! ```text
//! ulst [--nid NID] [--socket PATH] [--json] COMMAND [ARGS]...
//! ```
//!
//! Commands, options, output and exit codes are lst's (see `ulnet_selftest::cli`). The console
//! itself is an LNet node owned by a console server process that `new_session` starts and
//! `end_session` (or an idle console timeout) stops; every `ulst` invocation relays its
//! command to it (see `ulnet_selftest::serve`).
//!
//! * `--nid NID` (or `$ULST_NID`): the console's own NID, used when `new_session` starts the
//!   console server. `0@lo` gives a loopback-only console whose node also runs the selftest
//!   service (a self-contained test of the tool).
//! * `--port PORT` (or `$ULST_PORT`): the TCP port of the network's acceptors (988, as the
//!   kernel's `accept_port`); the console listens on it too and dials nodes on it.
//! * `--socket PATH` (or `$ULST_SOCKET`): the console server's socket.
//! * `--config FILE` (or `$ULST_CONFIG`): the console's node is configured by FILE, in
//!   ulnetd's YAML (NIs, routes, settings), instead of `--nid`: `new_session` then starts
//!   `ulnetd --config FILE --lst-console SOCKET` (the `ulnetd` beside `ulst`, or `$ULNETD`),
//!   so a console on one net reaches test nodes on others through routers. The node's
//!   control socket is `ulnetd.sock` beside the console's socket, for `ulnetctl --socket`.
//! * `--json`: results as JSON lines.

use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use ulnet::{AcceptPolicy, Nid, Node, SocklndTunables};
use ulnet_selftest::cli::{self, Env, Io, NoConsole};
use ulnet_selftest::serve::{self, PROTOCOL_VERSION, Request};
use ulnet_selftest::{Console, SelftestService};

/// The environment variable naming the console's NID.
const NID_ENV: &str = "ULST_NID";
/// The environment variable naming the network's TCP port.
const PORT_ENV: &str = "ULST_PORT";
/// The environment variable naming the console node's configuration file.
const CONFIG_ENV: &str = "ULST_CONFIG";
/// How long `new_session` waits for a console server it started.
const SERVER_START: Duration = Duration::from_secs(10);

struct Options {
    serve: bool,
    nid: Option<String>,
    port: Option<String>,
    socket: Option<PathBuf>,
    config: Option<PathBuf>,
    /// The command line for the command layer: program, then `--json` and the command.
    args: Vec<String>,
}

fn main() -> ExitCode {
    let options = match parse_options(std::env::args().collect()) {
        Ok(options) => options,
        Err(message) => {
            eprintln!("ulst: {message}");
            return ExitCode::from(255);
        }
    };
    let code = if options.serve { run_server(&options) } else { run_client(&options) };
    // lst's return code, truncated to 8 bits as the shell sees it.
    ExitCode::from((code & 0xff) as u8)
}

/// Splits ulst's own options (before the command word) from the command line.
fn parse_options(argv: Vec<String>) -> Result<Options, String> {
    let mut iter = argv.into_iter();
    let program = iter.next().unwrap_or_else(|| "ulst".to_string());
    let mut options = Options {
        serve: false,
        nid: None,
        port: None,
        socket: None,
        config: None,
        args: vec![program],
    };
    let mut rest: Vec<String> = iter.collect();
    while let Some(first) = rest.first().cloned() {
        let (name, inline) = match first.split_once('=') {
            Some((name, value)) if name.starts_with("--") => {
                (name.to_string(), Some(value.to_string()))
            }
            _ => (first.clone(), None),
        };
        match name.as_str() {
            "--serve" => {
                options.serve = true;
                rest.remove(0);
            }
            "--json" => {
                options.args.push(rest.remove(0));
            }
            "--nid" | "--port" | "--socket" | "--config" => {
                rest.remove(0);
                let value = match inline {
                    Some(value) => value,
                    None if !rest.is_empty() => rest.remove(0),
                    None => return Err(format!("option '{name}' requires an argument")),
                };
                match name.as_str() {
                    "--nid" => options.nid = Some(value),
                    "--port" => options.port = Some(value),
                    "--config" => options.config = Some(PathBuf::from(value)),
                    _ => options.socket = Some(PathBuf::from(value)),
                }
            }
            _ => break,
        }
    }
    options.args.extend(rest);
    if options.nid.is_none() {
        options.nid = std::env::var(NID_ENV).ok().filter(|value| !value.is_empty());
    }
    if options.port.is_none() {
        options.port = std::env::var(PORT_ENV).ok().filter(|value| !value.is_empty());
    }
    if options.config.is_none() {
        options.config =
            std::env::var_os(CONFIG_ENV).filter(|value| !value.is_empty()).map(PathBuf::from);
    }
    Ok(options)
}

/// `ulst COMMAND...`: relay to the console server, starting it for `new_session`.
fn run_client(options: &Options) -> i32 {
    let socket = serve::socket_path(options.socket.clone());
    let has_command = options.args.iter().skip(1).any(|arg| arg != "--json");
    if has_command {
        return run_command(options, &socket, options.args.clone());
    }
    // No command: lst's interactive shell, one command per line.
    let terminal = rustix::termios::isatty(rustix::stdio::stdin());
    let program = options
        .args
        .first()
        .map_or("ulst", |arg0| arg0.as_str())
        .rsplit('/')
        .next()
        .unwrap_or("ulst")
        .to_string();
    let stdin = io::stdin();
    let mut rc = 0;
    loop {
        if terminal {
            print!("{program} > ");
            let _ = io::stdout().flush();
        }
        let mut line = String::new();
        match stdin.lock().read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let words: Vec<String> = line.split_whitespace().map(str::to_string).collect();
        match words.first().map(String::as_str) {
            None => continue,
            Some("quit" | "exit") => break,
            Some(_) => {}
        }
        let mut args = options.args.clone();
        args.extend(words);
        rc = run_command(options, &socket, args);
        if rc != 0 && !terminal {
            break;
        }
    }
    rc
}

fn run_command(options: &Options, socket: &Path, args: Vec<String>) -> i32 {
    let terminal = rustix::termios::isatty(rustix::stdio::stdout());
    let request =
        Request { version: PROTOCOL_VERSION, argv: args, env: Env::from_process(), terminal };
    let command = request.argv.iter().skip(1).find(|arg| *arg != "--json").cloned();
    let (mut stdout, mut stderr) = (io::stdout(), io::stderr());
    match serve::relay(socket, &request, &mut stdout, &mut stderr) {
        Ok(code) => return code,
        // Our reader went away (`ulst stat | head`): leave quietly, as SIGPIPE would.
        Err(error) if error.kind() == io::ErrorKind::BrokenPipe => return 141,
        Err(error) if !no_server(&error) => {
            eprintln!("ulst: console server at {}: {error}", socket.display());
            return -1;
        }
        Err(_) => {}
    }
    if command.as_deref() == Some("new_session") && needs_server(&request) {
        if let Err(message) = start_server(options, socket) {
            eprintln!("ulst: {message}");
            return -1;
        }
        return match serve::relay(socket, &request, &mut stdout, &mut stderr) {
            Ok(code) => code,
            Err(error) => {
                eprintln!("ulst: console server at {}: {error}", socket.display());
                -1
            }
        };
    }
    // No console server: no session (as before lst's first new_session).
    let never = || false;
    let mut io = Io { stdout: &mut stdout, stderr: &mut stderr, terminal, cancelled: &never };
    cli::run(request.argv, &request.env, &NoConsole, &mut io)
}

/// Whether `new_session` gets far enough to need a console (its argument checks and the
/// session key check come first, and print the same with or without one).
fn needs_server(request: &Request) -> bool {
    let mut sink = Vec::new();
    let mut errors = Vec::new();
    let never = || false;
    let mut io = Io { stdout: &mut sink, stderr: &mut errors, terminal: false, cancelled: &never };
    // NoConsole refuses to create a session with ENOMEM: reaching it means the checks passed.
    let code = cli::run(request.argv.clone(), &request.env, &NoConsole, &mut io);
    code == -1 && String::from_utf8_lossy(&errors).starts_with("Failed to create session")
}

fn no_server(error: &io::Error) -> bool {
    matches!(error.kind(), io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused)
}

/// Starts `ulst --serve` (or, with a configuration, `ulnetd --lst-console`) in the background
/// and waits until it answers.
fn start_server(options: &Options, socket: &Path) -> Result<(), String> {
    let dir = socket.parent().map(Path::to_path_buf).unwrap_or_else(std::env::temp_dir);
    if !dir.exists() {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|error| format!("creating {}: {error}", dir.display()))?;
    }
    let log_path = dir.join("console.log");
    let log = std::fs::File::create(&log_path)
        .map_err(|error| format!("creating {}: {error}", log_path.display()))?;
    let exe = std::env::current_exe().map_err(|error| format!("finding ulst: {error}"))?;
    let mut command = match (&options.config, &options.nid) {
        (Some(config), _) => {
            let ulnetd = std::env::var_os("ULNETD")
                .map(PathBuf::from)
                .unwrap_or_else(|| exe.with_file_name("ulnetd"));
            let mut command = Command::new(ulnetd);
            command
                .arg("--config")
                .arg(config)
                .arg("--socket")
                .arg(dir.join("ulnetd.sock"))
                .arg("--lst-console")
                .arg(socket);
            command
        }
        (None, Some(nid)) => {
            let mut command = Command::new(exe);
            command.arg("--serve").arg("--socket").arg(socket).arg("--nid").arg(nid);
            if let Some(port) = &options.port {
                command.arg("--port").arg(port);
            }
            command
        }
        (None, None) => {
            return Err(format!(
                "no NID for the console: set {NID_ENV} or give --nid (a NID of this host, e.g. \
                 192.168.1.5@tcp; 0@lo runs a loopback console with its own test node), or a \
                 configuration with {CONFIG_ENV} or --config"
            ));
        }
    };
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .map_err(|error| format!("starting the console server: {error}"))?;
    let deadline = Instant::now() + SERVER_START;
    while Instant::now() < deadline {
        if std::os::unix::net::UnixStream::connect(socket).is_ok() {
            return Ok(());
        }
        if let Ok(Some(_)) = child.try_wait() {
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            return Err(format!("the console server did not start: {}", log.trim_end()));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err("the console server did not answer in time".to_string())
}

/// `ulst --serve`: the console server.
fn run_server(options: &Options) -> i32 {
    // Leave the terminal's session, so a ^C in the shell that started us does not stop us.
    let _ = rustix::process::setsid();
    let socket = serve::socket_path(options.socket.clone());
    let Some(nid) = options.nid.as_deref() else {
        eprintln!("ulst: no NID for the console ({NID_ENV} or --nid)");
        return -1;
    };
    let port = match options.port.as_deref().map(str::parse::<u16>) {
        None => DEFAULT_PORT,
        Some(Ok(port)) if port > 0 => port,
        Some(_) => {
            eprintln!("ulst: bad port {:?}", options.port.as_deref().unwrap_or_default());
            return -1;
        }
    };
    let (node, _service) = match console_node(nid, port) {
        Ok(built) => built,
        Err(message) => {
            eprintln!("ulst: {message}");
            return -1;
        }
    };
    let console = match Console::new(&node) {
        Ok(console) => console,
        Err(error) => {
            eprintln!("ulst: starting the console: {error}");
            return -1;
        }
    };
    let stop = AtomicBool::new(false);
    if let Err(error) = serve::serve(console, &socket, &stop) {
        eprintln!("ulst: serving {}: {error}", socket.display());
        return -1;
    }
    node.shutdown();
    0
}

/// `accept_port`'s default, the LNet port. lustre: lnet/lnet/acceptor.c.
const DEFAULT_PORT: u16 = 988;

/// The console's node: `0@lo` is a loopback-only node that also runs the selftest service;
/// any other NID gets a TCP NI on `port`, accepting connections from any source port (a
/// console without root dials from ordinary ports, and test nodes may call it back).
fn console_node(nid: &str, port: u16) -> Result<(Node, Option<SelftestService>), String> {
    let parsed: Nid = nid.parse().map_err(|error| format!("bad console NID {nid}: {error}"))?;
    if parsed == Nid::LO_0 {
        let node =
            Node::loopback().map_err(|error| format!("building the console node: {error}"))?;
        let service = SelftestService::start(&node)
            .map_err(|error| format!("starting the selftest service: {error}"))?;
        return Ok((node, Some(service)));
    }
    let tunables =
        SocklndTunables { accept_port: port, accept: AcceptPolicy::All, ..Default::default() };
    let node = Node::builder()
        .tcp_ni(parsed, tunables)
        .build()
        .map_err(|error| format!("building the console node: {error}"))?;
    Ok((node, None))
}
