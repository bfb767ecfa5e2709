//! The daemon side: bind the control socket, accept connections, and answer each request
//! through a [`Handler`].
//!
//! Threads, not tasks: each connection gets a std thread (at most [`MAX_CONNECTIONS`]) that
//! reads a request, calls the handler, writes the answer, and waits for the next request.
//! The handler is synchronous and may block (a ping waits for the network). `ulnetd`, which
//! runs its node on tokio, implements it by sending the request into the runtime and waiting
//! for the reply, e.g. with a `tokio::sync::mpsc` channel to the node task carrying a
//! `tokio::sync::oneshot` sender, and `oneshot::Receiver::blocking_recv()` in the handler.
//! This keeps tokio out of this crate (and out of `ulnetctl`), and a slow or stuck control
//! client can never stall the node's runtime. The framing functions of [`crate::frame`] are
//! public, so an async server is a small addition if ever wanted.
//!
//! Authorization is the socket file's mode ([`SOCKET_MODE`]): only its owner (root for the
//! system daemon, as lnetctl needs root) can connect.

use std::fs::{self, DirBuilder};
use std::io::{self, Read};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use crate::frame::{
    DecodeError, FrameError, MAX_REQUEST_LEN, decode_request, encode_response, read_frame,
    write_frame,
};
use crate::message::{ControlError, Request, Response};

/// Answers control requests. Called concurrently from connection threads.
pub trait Handler: Send + Sync + 'static {
    /// Carries out one request. May block; must not panic (a panic is caught and answered
    /// with [`ControlError::Internal`], but the handler's state may be left half-updated).
    fn handle(&self, request: Request) -> Result<Response, ControlError>;
}

impl<F> Handler for F
where
    F: Fn(Request) -> Result<Response, ControlError> + Send + Sync + 'static,
{
    fn handle(&self, request: Request) -> Result<Response, ControlError> {
        self(request)
    }
}

/// Most connections served at once; further clients are answered [`ControlError::Busy`].
/// lnetctl runs one command per process, so this only bounds misbehaving clients.
pub const MAX_CONNECTIONS: usize = 64;

/// A connection without a request for this long is closed.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// A client that does not read its answer for this long is dropped.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// Mode of the socket file [`listen`] creates: owner only.
pub const SOCKET_MODE: u32 = 0o600;

/// Mode of a socket directory [`listen`] has to create.
pub const DIRECTORY_MODE: u32 = 0o755;

/// How long [`refuse`] waits for a refused client's remaining input.
const DRAIN_TIMEOUT: Duration = Duration::from_millis(100);

/// How long a refused (busy) client is given to send its request before the refusal.
const BUSY_READ_TIMEOUT: Duration = Duration::from_millis(200);

/// Why [`listen`] failed.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    #[error("cannot create {}: {source}", dir.display())]
    CreateDirectory { dir: PathBuf, source: io::Error },
    /// A live daemon answers on the path.
    #[error("another ulnetd is listening on {}", path.display())]
    InUse { path: PathBuf },
    /// Something other than a socket is in the way; it is never removed.
    #[error("{} exists and is not a socket", path.display())]
    NotASocket { path: PathBuf },
    #[error("cannot remove the stale socket {}: {source}", path.display())]
    RemoveStale { path: PathBuf, source: io::Error },
    #[error("cannot bind {}: {source}", path.display())]
    Bind { path: PathBuf, source: io::Error },
    #[error("cannot set the mode of {}: {source}", path.display())]
    Permissions { path: PathBuf, source: io::Error },
}

/// Binds the control socket at `path`: creates the directory if needed, replaces a stale
/// socket left by a daemon that died (nothing answers on it), refuses to take over a live
/// one, and restricts the socket to its owner.
pub fn listen(path: &Path) -> Result<UnixListener, ListenError> {
    if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        if !dir.exists() {
            DirBuilder::new().recursive(true).mode(DIRECTORY_MODE).create(dir).map_err(
                |source| ListenError::CreateDirectory { dir: dir.to_path_buf(), source },
            )?;
        }
    }
    if let Ok(metadata) = fs::symlink_metadata(path) {
        if !metadata.file_type().is_socket() {
            return Err(ListenError::NotASocket { path: path.to_path_buf() });
        }
        if UnixStream::connect(path).is_ok() {
            return Err(ListenError::InUse { path: path.to_path_buf() });
        }
        fs::remove_file(path)
            .map_err(|source| ListenError::RemoveStale { path: path.to_path_buf(), source })?;
    }
    let listener = UnixListener::bind(path)
        .map_err(|source| ListenError::Bind { path: path.to_path_buf(), source })?;
    fs::set_permissions(path, fs::Permissions::from_mode(SOCKET_MODE))
        .map_err(|source| ListenError::Permissions { path: path.to_path_buf(), source })?;
    Ok(listener)
}

/// Serves `listener` in the calling thread until accepting fails for good.
pub fn serve(listener: UnixListener, handler: impl Handler) -> io::Result<()> {
    accept_loop(&listener, Arc::new(handler), &Arc::new(Shared::default()))
}

/// A server running on its own threads. Dropping it shuts it down.
#[derive(Debug)]
pub struct Server {
    path: Option<PathBuf>,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<io::Result<()>>>,
}

impl Server {
    /// Starts serving `listener` on a new thread.
    pub fn spawn(listener: UnixListener, handler: impl Handler) -> io::Result<Self> {
        let path = listener.local_addr()?.as_pathname().map(Path::to_path_buf);
        let shared = Arc::new(Shared::default());
        let handler: Arc<dyn Handler> = Arc::new(handler);
        let thread_shared = Arc::clone(&shared);
        let accept = thread::Builder::new()
            .name("ulnet-control-accept".into())
            .spawn(move || accept_loop(&listener, handler, &thread_shared))?;
        Ok(Self { path, shared, accept: Some(accept) })
    }

    /// The socket path, when the listener has one.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Number of connections being served.
    pub fn connection_count(&self) -> usize {
        self.shared.connections().open.len()
    }

    /// Stops accepting, closes every connection (requests in a handler finish, their answers
    /// are lost), and waits for the accept thread. The socket file stays; the daemon
    /// removes it.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        for (_, stream) in self.shared.connections().open.drain(..) {
            let _ = stream.shutdown(std::net::Shutdown::Both);
        }
        let Some(accept) = self.accept.take() else { return };
        // Wake the blocked accept() with a connection of our own. If the socket file is
        // gone that is impossible: the accept thread is then left behind, parked.
        let woken = self.path.as_ref().is_some_and(|path| UnixStream::connect(path).is_ok());
        if woken {
            let _ = accept.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

#[derive(Debug, Default)]
struct Shared {
    stopping: AtomicBool,
    connections: Mutex<Connections>,
}

#[derive(Debug, Default)]
struct Connections {
    next_id: u64,
    /// A clone of each open stream, to shut it down on stop.
    open: Vec<(u64, UnixStream)>,
}

impl Shared {
    fn connections(&self) -> MutexGuard<'_, Connections> {
        // The lists stay consistent whatever a panicking holder did: each update is one push
        // or one retain.
        self.connections.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records a new connection, or `None` when at [`MAX_CONNECTIONS`].
    fn register(&self, stream: &UnixStream) -> Option<u64> {
        let mut connections = self.connections();
        if connections.open.len() >= MAX_CONNECTIONS {
            return None;
        }
        let clone = stream.try_clone().ok()?;
        let id = connections.next_id;
        connections.next_id += 1;
        connections.open.push((id, clone));
        Some(id)
    }

    fn unregister(&self, id: u64) {
        self.connections().open.retain(|(open, _)| *open != id);
    }
}

fn accept_loop(
    listener: &UnixListener,
    handler: Arc<dyn Handler>,
    shared: &Arc<Shared>,
) -> io::Result<()> {
    loop {
        let accepted = listener.accept();
        if shared.stopping.load(Ordering::SeqCst) {
            return Ok(());
        }
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(error) => match error.kind() {
                io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted => continue,
                _ if is_resource_shortage(&error) => {
                    // Out of descriptors or memory: wait for connections to finish.
                    thread::sleep(Duration::from_millis(100));
                    continue;
                }
                _ => return Err(error),
            },
        };
        let Some(id) = shared.register(&stream) else {
            refuse_busy(stream);
            continue;
        };
        let handler = Arc::clone(&handler);
        let thread_shared = Arc::clone(shared);
        let spawned = thread::Builder::new().name("ulnet-control".into()).spawn(move || {
            serve_connection(stream, handler.as_ref());
            thread_shared.unregister(id);
        });
        if spawned.is_err() {
            shared.unregister(id);
        }
    }
}

fn is_resource_shortage(error: &io::Error) -> bool {
    // EMFILE, ENFILE, ENOBUFS, ENOMEM.
    matches!(error.raw_os_error(), Some(24 | 23 | 105 | 12))
}

/// Answers one client until it closes, goes idle, or sends something unreadable.
fn serve_connection(mut stream: UnixStream, handler: &dyn Handler) {
    let _ = stream.set_read_timeout(Some(IDLE_TIMEOUT));
    let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
    loop {
        let body = match read_frame(&mut stream, MAX_REQUEST_LEN) {
            Ok(body) => body,
            Err(FrameError::TooLarge { len, max }) => {
                // The rest of the stream cannot be framed any more: answer and close.
                let reason = format!("request of {len} bytes exceeds the limit of {max}");
                refuse(stream, ControlError::BadRequest { reason });
                return;
            }
            // Closed, cut short, idle or broken: nobody to answer.
            Err(_) => return,
        };
        let result = match decode_request(&body) {
            Ok(request) => call_handler(handler, request),
            Err(DecodeError::VersionMismatch { ours, theirs }) => {
                refuse(stream, ControlError::VersionMismatch { server: ours, client: theirs });
                return;
            }
            Err(DecodeError::Malformed(reason)) => {
                refuse(stream, ControlError::BadRequest { reason });
                return;
            }
        };
        if reply(&mut stream, &result).is_err() {
            return;
        }
    }
}

fn call_handler(handler: &dyn Handler, request: Request) -> Result<Response, ControlError> {
    catch_unwind(AssertUnwindSafe(|| handler.handle(request))).unwrap_or_else(|_| {
        Err(ControlError::Internal { reason: "the request handler panicked".into() })
    })
}

fn reply(stream: &mut UnixStream, result: &Result<Response, ControlError>) -> io::Result<()> {
    write_frame(stream, &encode_response(result))
}

/// Answers `error` and closes. Whatever the client still sends is read and dropped first
/// (within bounds): closing a Unix socket with unread input resets the connection, and the
/// client would get the reset instead of the answer.
fn refuse(mut stream: UnixStream, error: ControlError) {
    if reply(&mut stream, &Err(error)).is_err() {
        return;
    }
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let _ = stream.set_read_timeout(Some(DRAIN_TIMEOUT));
    let mut scratch = [0u8; 4096];
    let mut drained = 0;
    while drained < MAX_REQUEST_LEN {
        match stream.read(&mut scratch) {
            Ok(0) | Err(_) => break,
            Ok(n) => drained += n,
        }
    }
}

/// Tells a client over the connection limit to come back later. Its request is read first
/// (briefly) so the answer is not lost to a reset.
fn refuse_busy(mut stream: UnixStream) {
    let _ = stream.set_read_timeout(Some(BUSY_READ_TIMEOUT));
    let _ = stream.set_write_timeout(Some(BUSY_READ_TIMEOUT));
    let _ = read_frame(&mut stream, MAX_REQUEST_LEN);
    refuse(stream, ControlError::Busy);
}
