//! `ulnetd demo`: the whole thing in one unprivileged command. Two daemons in this process,
//! `127.0.0.2@tcp` and `127.0.0.3@tcp`, each with its own control socket in a temporary
//! directory; `ulnetctl` commands against them (the CLI's own code, output as it prints it);
//! a ping; a 1 MiB PUT and a 4 KiB GET through the public API with the data checked; the
//! statistics; a short lnet_selftest run (an lst console on a third node drives `brw write`
//! between the two and prints the bandwidth as `lst stat` does); a graceful stop.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ulnet::{EventKind, LinkConfig, MdOptions, MdSpec, MemFabric, Memory, Node, Threshold};
use ulnet_config::model::GlobalSettings;

use crate::config::{AcceptPolicy, DaemonConfig, TcpSettings};
use crate::daemon::{Daemon, StartError};
use crate::nets::{NetSpec, NiSpec, SocklndTunables};

/// Which LND carries the demo's traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DemoLnd {
    /// Real TCP on 127.0.0.2 and 127.0.0.3.
    Tcp,
    /// The in-process fabric: the same demo without sockets.
    Mem,
}

/// The demo's LND: the one line to change between TCP and the in-process fabric.
pub const DEMO_LND: DemoLnd = DemoLnd::Tcp;

/// The demo's TCP port: unprivileged, and not the default daemon's 7988, so the demo runs
/// next to a default `ulnetd`.
pub const DEMO_PORT: u16 = 7989;

/// The two nodes.
pub const DEMO_NIDS: [&str; 2] = ["127.0.0.2@tcp", "127.0.0.3@tcp"];

/// Where the demo's data lands on the second node.
const PORTAL: u32 = 42;
const PUT_BITS: u64 = 0x1;
const GET_BITS: u64 = 0x2;
const PUT_SIZE: usize = 1 << 20;
const GET_SIZE: usize = 4096;
const TRANSFER_TIMEOUT: Duration = Duration::from_secs(30);

/// Why the demo stopped early.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error("cannot create {}: {source}", path.display())]
    TempDir { path: PathBuf, source: std::io::Error },
    #[error("starting {nid}: {source}")]
    Start { nid: &'static str, source: StartError },
    #[error("node {0} is down")]
    NodeDown(&'static str),
    #[error("{what}: {reason}")]
    Transfer { what: &'static str, reason: String },
    #[error("writing the output: {0}")]
    Output(#[from] std::io::Error),
}

/// Runs the demo, writing to `out`; returns the exit status.
pub fn run(out: &mut dyn Write) -> u8 {
    match demo(out, DEMO_LND) {
        Ok(()) => 0,
        Err(error) => {
            let _ = writeln!(out, "ulnetd demo failed: {error}");
            1
        }
    }
}

/// The demo over `lnd`.
pub fn demo(out: &mut dyn Write, lnd: DemoLnd) -> Result<(), DemoError> {
    let dir = TempDir::new()?;
    let fabric = match lnd {
        DemoLnd::Tcp => None,
        DemoLnd::Mem => Some(MemFabric::new(LinkConfig::IDEAL)),
    };
    let transport = match lnd {
        DemoLnd::Tcp => format!("TCP, port {DEMO_PORT}"),
        DemoLnd::Mem => "the in-process fabric".to_string(),
    };
    writeln!(out, "# ulnetd demo: two nodes over {transport}, no root needed\n")?;
    let [a_nid, b_nid] = DEMO_NIDS;
    let a = start(a_nid, &dir.0.join("a.sock"), fabric.clone())?;
    let b = start(b_nid, &dir.0.join("b.sock"), fabric.clone())?;
    writeln!(out, "{}\n{}\n", a.ready_line(), b.ready_line())?;

    ulnetctl(out, "a", &a, &["net", "show"])?;
    ulnetctl(out, "a", &a, &["ping", b_nid])?;
    ulnetctl(out, "a", &a, &["discover", b_nid])?;

    let (node_a, node_b) = (node(&a, a_nid)?, node(&b, b_nid)?);
    put(out, &node_a, &node_b)?;
    get(out, &node_a, &node_b)?;

    ulnetctl(out, "a", &a, &["stats", "show"])?;
    ulnetctl(out, "a", &a, &["peer", "show"])?;
    ulnetctl(out, "b", &b, &["net", "show", "-v", "2", "--net", "tcp"])?;
    selftest(out, fabric.as_ref())?;

    let sockets = [a.socket().to_path_buf(), b.socket().to_path_buf()];
    a.shutdown();
    b.shutdown();
    let gone = sockets.iter().all(|socket| !socket.exists());
    writeln!(out, "# stopped both nodes; control sockets removed: {gone}")?;
    Ok(())
}

/// The lst console's node, beside the two daemons.
pub const CONSOLE_NID: &str = "127.0.0.4@tcp";

/// lnet_selftest between the two daemons (each hosts the service), driven by a console node
/// through `ulst`'s command layer, exactly as `lst` would be typed.
fn selftest(out: &mut dyn Write, fabric: Option<&MemFabric>) -> Result<(), DemoError> {
    let [a_nid, b_nid] = DEMO_NIDS;
    let nid: ulnet::Nid = CONSOLE_NID.parse().unwrap_or(ulnet::Nid::LO_0);
    let builder = match fabric {
        Some(fabric) => Node::builder().mem_ni(nid, fabric),
        None => {
            let tunables = ulnet::SocklndTunables {
                accept_port: DEMO_PORT,
                accept: ulnet::AcceptPolicy::All,
                ..Default::default()
            };
            Node::builder().tcp_ni(nid, tunables)
        }
    };
    let failed = |reason: String| DemoError::Transfer { what: "lnet_selftest", reason };
    let node = builder.build().map_err(|error| failed(error.to_string()))?;
    let console = ulnet_selftest::Console::new(&node).map_err(|error| failed(error.to_string()))?;
    writeln!(out, "# lnet_selftest: an lst console on {CONSOLE_NID} tests {a_nid} -> {b_nid}\n")?;
    let script = [
        "new_session demo".to_string(),
        format!("add_group clients {a_nid}"),
        format!("add_group servers {b_nid}"),
        "add_batch bulk".to_string(),
        "add_test --batch bulk --concurrency 8 --from clients --to servers brw write size=1M"
            .to_string(),
        "run bulk".to_string(),
        "stat --delay 2 --count 1 servers".to_string(),
        "stop bulk".to_string(),
        "show_error clients servers".to_string(),
        "end_session".to_string(),
    ];
    let env =
        ulnet_selftest::cli::Env { session: Some(std::process::id().to_string()), features: None };
    let mut result = Ok(());
    for line in &script {
        writeln!(out, "[console]$ lst {line}")?;
        let (status, stdout, stderr) =
            ulnet_selftest::cli::run_captured(line, &env, &console, false);
        out.write_all(stdout.as_bytes())?;
        out.write_all(stderr.as_bytes())?;
        if status != 0 {
            result = Err(failed(format!("`lst {line}` exited with {status}")));
            break;
        }
    }
    writeln!(out)?;
    drop(console);
    node.shutdown();
    result
}

fn start(nid: &'static str, socket: &Path, fabric: Option<MemFabric>) -> Result<Daemon, DemoError> {
    let config = node_config(nid);
    Daemon::start(&config, socket, fabric).map_err(|source| DemoError::Start { nid, source })
}

/// One node: a tcp NI on `nid`, the demo port, connections from any port.
fn node_config(nid: &str) -> DaemonConfig {
    let nid = nid.parse().unwrap_or(ulnet::Nid::LO_0);
    let host = crate::interfaces::host_interfaces().unwrap_or_default();
    let interface = nid.ip().and_then(|address| crate::interfaces::interface_of(&host, address));
    DaemonConfig {
        nets: vec![NetSpec {
            net: nid.net(),
            nis: vec![NiSpec::new(nid, interface)],
            tunables: ulnet::NetTunables::SOCKLND,
            socklnd: SocklndTunables::default(),
        }],
        settings: GlobalSettings::default(),
        tcp: TcpSettings::new(DEMO_PORT, AcceptPolicy::All),
        selftest: true,
        peers: Vec::new(),
        routing: crate::live::BootRouting::default(),
        udsp: Vec::new(),
        warnings: Vec::new(),
        notes: Vec::new(),
        layout: crate::modprobe::PartitionLayout::default(),
        enable_sysctl_setup: false,
    }
}

fn node(daemon: &Daemon, nid: &'static str) -> Result<Node, DemoError> {
    daemon.node().ok_or(DemoError::NodeDown(nid))
}

/// Runs `ulnetctl ARGS` against `daemon` in this process and prints what it prints.
fn ulnetctl(
    out: &mut dyn Write,
    name: &str,
    daemon: &Daemon,
    args: &[&str],
) -> Result<(), DemoError> {
    writeln!(out, "[{name}]$ ulnetctl {}", args.join(" "))?;
    let mut argv = vec!["ulnetctl".to_string(), "--socket".to_string()];
    argv.push(daemon.socket().display().to_string());
    argv.extend(args.iter().map(|arg| arg.to_string()));
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    let mut stdin = std::io::empty();
    let mut input = std::io::BufReader::new(&mut stdin);
    let mut io = ulnetctl::Io {
        stdout: &mut stdout,
        stderr: &mut stderr,
        stdin: &mut input,
        stdin_is_terminal: false,
    };
    let status = ulnetctl::run(argv, &mut io);
    out.write_all(&stdout)?;
    out.write_all(&stderr)?;
    if status != 0 {
        writeln!(out, "(exit status {status})")?;
    }
    writeln!(out)?;
    Ok(())
}

/// a PUTs 1 MiB to b, waits for the ACK, and b checks every byte.
fn put(out: &mut dyn Write, a: &Node, b: &Node) -> Result<(), DemoError> {
    let failed = |reason: String| DemoError::Transfer { what: "PUT", reason };
    let inbox = b.event_queue(8);
    let sink = MdSpec::new(Memory::new(vec![0; PUT_SIZE]))
        .options(MdOptions::OP_PUT)
        .threshold(Threshold::Count(1));
    b.post(PORTAL, PUT_BITS, sink, &inbox)
        .map_err(|rejected| failed(rejected.error.to_string()))?;
    let data = pattern(PUT_SIZE, 7);
    let started = Instant::now();
    let done = a
        .put_and_wait_ack(
            b.process_id(),
            PORTAL,
            PUT_BITS,
            Memory::new(data.clone()),
            TRANSFER_TIMEOUT,
        )
        .map_err(|error| failed(error.to_string()))?;
    let elapsed = started.elapsed();
    let event = inbox.recv_timeout(TRANSFER_TIMEOUT).map_err(|error| failed(error.to_string()))?;
    let landed = event.memory.map(|memory| memory.to_vec()).unwrap_or_default();
    if event.kind != EventKind::Put || landed != data {
        return Err(failed("the data that landed differs from the data sent".into()));
    }
    writeln!(
        out,
        "# a PUT {} bytes to {} (portal {PORTAL}): ACK after {:.2} ms, {} bytes accepted, data verified on b\n",
        PUT_SIZE,
        b.process_id(),
        elapsed.as_secs_f64() * 1e3,
        done.event.mlength,
    )?;
    Ok(())
}

/// b serves 4 KiB; a GETs them and checks every byte.
fn get(out: &mut dyn Write, a: &Node, b: &Node) -> Result<(), DemoError> {
    let failed = |reason: String| DemoError::Transfer { what: "GET", reason };
    let served = pattern(GET_SIZE, 99);
    let inbox = b.event_queue(8);
    let source = MdSpec::new(Memory::new(served.clone()))
        .options(MdOptions::OP_GET)
        .threshold(Threshold::Count(1));
    b.post(PORTAL, GET_BITS, source, &inbox)
        .map_err(|rejected| failed(rejected.error.to_string()))?;
    let started = Instant::now();
    let data = a
        .get_into(b.process_id(), PORTAL, GET_BITS, vec![0; GET_SIZE], TRANSFER_TIMEOUT)
        .map_err(|error| failed(error.to_string()))?;
    let elapsed = started.elapsed();
    if data != served {
        return Err(failed("the REPLY differs from the data served".into()));
    }
    writeln!(
        out,
        "# a GET {} bytes from {} (portal {PORTAL}): REPLY after {:.2} ms, data verified\n",
        data.len(),
        b.process_id(),
        elapsed.as_secs_f64() * 1e3,
    )?;
    Ok(())
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|index| (index as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

/// A private directory for the demo's sockets, removed at the end.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Result<Self, DemoError> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let run = NEXT.fetch_add(1, Ordering::Relaxed);
        let name = format!("ulnetd-demo-{}-{run}", std::process::id());
        let path = std::env::temp_dir().join(name);
        std::fs::create_dir_all(&path)
            .map_err(|source| DemoError::TempDir { path: path.clone(), source })?;
        Ok(Self(path))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
