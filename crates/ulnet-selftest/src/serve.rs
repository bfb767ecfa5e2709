//! Where the console lives between `ulst` invocations: a small console server process
//! (`ulst --serve`) that owns the console's LNet node and session, and runs each command it is
//! sent; the `ulst` a user types is a thin relay to it. lst keeps this state in the kernel;
//! docs/decisions/0006-ulst-console-server.md says why a process rather than a file.
//!
//! The protocol is JSON lines on a Unix stream socket: the client sends one [`Request`]; the
//! server answers with [`Frame`]s of standard output and error text as the command runs and a
//! final exit code. A client that goes away (`^C` on `ulst stat`) cancels its command.
//!
//! The socket is `--socket PATH`, else `$ULST_SOCKET`, else `$XDG_RUNTIME_DIR/ulst/console.sock`
//! (falling back to `<temp dir>/ulst-<uid>/console.sock`); its directory is private (0700).

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use crate::cli::{self, Env, Io};
use crate::console::Console;

/// The environment variable naming the socket.
pub const SOCKET_ENV: &str = "ULST_SOCKET";
/// Protocol version in every request.
pub const PROTOCOL_VERSION: u32 = 1;
/// The longest request line accepted (arguments of one command).
pub const MAX_REQUEST_BYTES: usize = 1 << 20;
/// The longest frame line accepted by the client.
pub const MAX_FRAME_BYTES: usize = 16 << 20;
/// How long a server without a session lingers before it exits (the command that created it
/// may still be on its way, or a new session follow).
pub const IDLE_EXIT: Duration = Duration::from_secs(2);

/// One command for the console server.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Request {
    pub version: u32,
    /// The command line, program name first.
    pub argv: Vec<String>,
    pub env: Env,
    /// The client's standard output is a terminal.
    pub terminal: bool,
}

/// What the server sends back.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Frame {
    Stdout(String),
    Stderr(String),
    Exit(i32),
}

/// The socket path: `option`, else `$ULST_SOCKET`, else the per-user default.
pub fn socket_path(option: Option<PathBuf>) -> PathBuf {
    if let Some(path) = option {
        return path;
    }
    if let Some(path) = std::env::var_os(SOCKET_ENV).filter(|value| !value.is_empty()) {
        return PathBuf::from(path);
    }
    let base = match std::env::var_os("XDG_RUNTIME_DIR").filter(|value| !value.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => std::env::temp_dir().join(format!("ulst-{}", rustix::process::geteuid().as_raw())),
    };
    base.join("ulst").join("console.sock")
}

/// Serves `console` on `path` until no session is left and no client is connected for
/// [`IDLE_EXIT`], or `stop` is set. Removes the socket on the way out.
pub fn serve(console: Console, path: &Path, stop: &AtomicBool) -> io::Result<()> {
    if let Some(dir) = path.parent() {
        create_private_dir(dir)?;
    }
    // A socket file left by a dead server: nobody answers on it, so take it over.
    if path.exists() && UnixStream::connect(path).is_err() {
        let _ = std::fs::remove_file(path);
    }
    let listener = UnixListener::bind(path)?;
    listener.set_nonblocking(true)?;
    let console = Arc::new(console);
    let active = Arc::new(AtomicUsize::new(0));
    let mut idle_since = Instant::now();
    while !stop.load(Ordering::Acquire) {
        match listener.accept() {
            Ok((stream, _)) => {
                let _ = stream.set_nonblocking(false);
                active.fetch_add(1, Ordering::AcqRel);
                let console = Arc::clone(&console);
                let counter = Arc::clone(&active);
                let spawned = thread::Builder::new().name("ulst-command".into()).spawn(move || {
                    if let Err(error) = handle(&console, stream) {
                        tracing::debug!(%error, "ulst client connection");
                    }
                    counter.fetch_sub(1, Ordering::AcqRel);
                });
                if spawned.is_err() {
                    active.fetch_sub(1, Ordering::AcqRel);
                }
                idle_since = Instant::now();
            }
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                thread::sleep(Duration::from_millis(20));
            }
            Err(error) => return Err(error),
        }
        let busy = active.load(Ordering::Acquire) > 0 || console.session_info().is_ok();
        if busy {
            idle_since = Instant::now();
        } else if idle_since.elapsed() >= IDLE_EXIT {
            break;
        }
    }
    let _ = std::fs::remove_file(path);
    Ok(())
}

/// Runs one client's command.
fn handle(console: &Console, stream: UnixStream) -> io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = Vec::new();
    (&mut reader).take(MAX_REQUEST_BYTES as u64 + 1).read_until(b'\n', &mut line)?;
    if line.len() > MAX_REQUEST_BYTES {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "request too long"));
    }
    let request: Request = serde_json::from_slice(&line)
        .map_err(|error| io::Error::new(io::ErrorKind::InvalidData, error))?;
    let sink = Arc::new(FrameSink { stream: Mutex::new(stream), broken: AtomicBool::new(false) });
    if request.version != PROTOCOL_VERSION {
        sink.send(&Frame::Stderr(format!(
            "ulst: console server speaks protocol {PROTOCOL_VERSION}, not {}\n",
            request.version
        )));
        sink.send(&Frame::Exit(-1));
        return Ok(());
    }
    let mut stdout = FrameWriter { sink: Arc::clone(&sink), stderr: false };
    let mut stderr = FrameWriter { sink: Arc::clone(&sink), stderr: true };
    let peer = Arc::clone(&sink);
    let cancelled = move || peer.client_gone();
    let mut io = Io {
        stdout: &mut stdout,
        stderr: &mut stderr,
        terminal: request.terminal,
        cancelled: &cancelled,
    };
    let code = cli::run(request.argv, &request.env, console, &mut io);
    sink.send(&Frame::Exit(code));
    Ok(())
}

/// The connection back to the client, shared by its two writers.
struct FrameSink {
    stream: Mutex<UnixStream>,
    broken: AtomicBool,
}

impl FrameSink {
    fn send(&self, frame: &Frame) {
        let Ok(mut line) = serde_json::to_vec(frame) else { return };
        line.push(b'\n');
        let mut stream = self.stream.lock().unwrap_or_else(PoisonError::into_inner);
        if stream.write_all(&line).is_err() {
            self.broken.store(true, Ordering::Release);
        }
    }

    /// The client hung up (its end reads as closed).
    fn client_gone(&self) -> bool {
        if self.broken.load(Ordering::Acquire) {
            return true;
        }
        let stream = self.stream.lock().unwrap_or_else(PoisonError::into_inner);
        let mut byte = [0u8; 1];
        let flags = rustix::net::RecvFlags::PEEK | rustix::net::RecvFlags::DONTWAIT;
        match rustix::net::recv(&*stream, &mut byte, flags) {
            Ok((0, _)) => {
                self.broken.store(true, Ordering::Release);
                true
            }
            Ok(_) => false,
            Err(error) => error != rustix::io::Errno::AGAIN,
        }
    }
}

struct FrameWriter {
    sink: Arc<FrameSink>,
    stderr: bool,
}

impl Write for FrameWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let text = String::from_utf8_lossy(buf).into_owned();
        self.sink.send(&if self.stderr { Frame::Stderr(text) } else { Frame::Stdout(text) });
        if self.sink.broken.load(Ordering::Acquire) {
            return Err(io::Error::new(io::ErrorKind::BrokenPipe, "client gone"));
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Sends `request` to the server at `path` and copies its output; returns the exit code.
/// `Err` with `NotFound` or `ConnectionRefused` means no server is running; `BrokenPipe`
/// means `stdout` or `stderr` was closed.
pub fn relay(
    path: &Path,
    request: &Request,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> io::Result<i32> {
    let mut stream = UnixStream::connect(path)?;
    let mut line = serde_json::to_vec(request)
        .map_err(|error| io::Error::new(io::ErrorKind::InvalidInput, error))?;
    line.push(b'\n');
    // A broken pipe here is the server's end; keep BrokenPipe for our own output.
    stream.write_all(&line).map_err(|error| match error.kind() {
        io::ErrorKind::BrokenPipe => io::Error::new(io::ErrorKind::ConnectionReset, error),
        _ => error,
    })?;
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = Vec::new();
        let read = (&mut reader).take(MAX_FRAME_BYTES as u64).read_until(b'\n', &mut line)?;
        if read == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "console server went away"));
        }
        let frame: Frame = serde_json::from_slice(&line)
            .map_err(|error| io::Error::new(io::ErrorKind::InvalidData, error))?;
        match frame {
            Frame::Stdout(text) => {
                stdout.write_all(text.as_bytes())?;
                stdout.flush()?;
            }
            Frame::Stderr(text) => {
                stderr.write_all(text.as_bytes())?;
                stderr.flush()?;
            }
            Frame::Exit(code) => return Ok(code),
        }
    }
}

/// Creates `dir` (and parents) readable by its owner only; an existing directory is left
/// as it is (it may be a shared one the user chose).
fn create_private_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    if !dir.exists() {
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    }
    Ok(())
}
