//! The daemon side: bind the control socket, accept connections, and answer each request
//! through a [`Handler`].
//!
//! Threads, not tasks: each connection gets a std thread (at most [`MAX_CONNECTIONS`]) that
//! reads a request, calls the handler, writes the answer, and waits for the next request.
//! The accept thread never blocks on a client: a connection past [`MAX_CONNECTIONS`] takes the
//! place of the one idle (waiting for a request) the longest, which is closed, so clients that
//! connect and say nothing cannot lock administrators out; only when every connection is in
//! the middle of a request is the newcomer answered [`ControlError::Busy`]. A connection idle
//! for [`IDLE_TIMEOUT`] is closed too.
//! The handler is synchronous and may block (a ping waits for the network). `ulnetd`, which
//! runs its node on tokio, implements it by sending the request into the runtime and waiting
//! for the reply, e.g. with a `tokio::sync::mpsc` channel to the node task carrying a
//! `tokio::sync::oneshot` sender, and `oneshot::Receiver::blocking_recv()` in the handler.
//! This keeps tokio out of this crate (and out of `ulnetctl`), and a slow or stuck control
//! client can never stall the node's runtime. The framing functions of [`crate::frame`] are
//! public, so an async server is a small addition if ever wanted.
//!
//! Authorization is the socket file's mode ([`SOCKET_MODE`]): only its owner (root for the
//! system daemon, as lnetctl needs root) can connect; and, whatever the mode, the peer's
//! credentials (`SO_PEERCRED`): only a process of the daemon's effective uid, or root, is
//! served. Any other is answered `-EACCES` and closed.

use std::fs::{self, DirBuilder};
use std::io::{self, Read};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

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

/// Most connections open at once. A further client takes the place of the connection idle
/// the longest; only when all are busy with a request is it answered [`ControlError::Busy`].
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
        for open in self.shared.connections().open.drain(..) {
            let _ = open.stream.shutdown(std::net::Shutdown::Both);
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
    open: Vec<Connection>,
}

#[derive(Debug)]
struct Connection {
    id: u64,
    /// A clone of the stream, to shut it down on stop or eviction.
    stream: UnixStream,
    /// Since when it has waited for a request; `None` while a request is being served.
    idle_since: Option<Instant>,
}

impl Shared {
    fn connections(&self) -> MutexGuard<'_, Connections> {
        // The lists stay consistent whatever a panicking holder did: each update is one push
        // or one retain.
        self.connections.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records a new connection, closing the one idle the longest when at
    /// [`MAX_CONNECTIONS`]; `None` when all are busy with a request.
    fn register(&self, stream: &UnixStream) -> Option<u64> {
        let mut connections = self.connections();
        if connections.open.len() >= MAX_CONNECTIONS {
            let oldest = connections
                .open
                .iter()
                .enumerate()
                .filter_map(|(index, open)| open.idle_since.map(|since| (since, index)))
                .min()
                .map(|(_, index)| index)?;
            // Its thread sees end-of-file and leaves; its unregister finds nothing to remove.
            let evicted = connections.open.swap_remove(oldest);
            let _ = evicted.stream.shutdown(std::net::Shutdown::Both);
        }
        let clone = stream.try_clone().ok()?;
        let id = connections.next_id;
        connections.next_id += 1;
        connections.open.push(Connection { id, stream: clone, idle_since: Some(Instant::now()) });
        Some(id)
    }

    /// Marks connection `id` busy with a request (`false`) or idle again (`true`).
    fn set_idle(&self, id: u64, idle: bool) {
        let mut connections = self.connections();
        if let Some(open) = connections.open.iter_mut().find(|open| open.id == id) {
            open.idle_since = idle.then(Instant::now);
        }
    }

    fn unregister(&self, id: u64) {
        self.connections().open.retain(|open| open.id != id);
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
            if authorized(&stream) {
                serve_connection(stream, handler.as_ref(), &thread_shared, id);
            }
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

/// Whether the peer may issue commands: a process of the daemon's effective uid, or root
/// (`SO_PEERCRED`). Anyone else is answered `-EACCES` and the connection closed.
fn authorized(stream: &UnixStream) -> bool {
    let ours = rustix::process::geteuid();
    match rustix::net::sockopt::socket_peercred(stream) {
        Ok(peer) if peer_allowed(peer.uid, ours) => true,
        Ok(peer) => {
            let descr = format!(
                "permission denied: uid {} may not control this ulnetd (uid {})",
                peer.uid.as_raw(),
                ours.as_raw()
            );
            if let Ok(clone) = stream.try_clone() {
                refuse(clone, ControlError::Refused { errno: -EACCES, descr });
            }
            false
        }
        // No credentials, no service.
        Err(_) => false,
    }
}

/// Linux's `EACCES` (the refusal carries it negated, as the kernel's handlers return it).
const EACCES: i32 = 13;

/// Root, or the daemon's own effective uid.
fn peer_allowed(peer: rustix::process::Uid, ours: rustix::process::Uid) -> bool {
    peer.is_root() || peer == ours
}

/// Answers one client until it closes, goes idle, is evicted, or sends something unreadable.
fn serve_connection(mut stream: UnixStream, handler: &dyn Handler, shared: &Shared, id: u64) {
    let _ = stream.set_read_timeout(Some(IDLE_TIMEOUT));
    let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
    loop {
        let body = match read_frame(&mut stream, MAX_REQUEST_LEN) {
            Ok(body) => {
                shared.set_idle(id, false);
                body
            }
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
        shared.set_idle(id, true);
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

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::process::Uid;

    #[test]
    fn root_and_the_daemons_own_uid_may_issue_commands() {
        let daemon = Uid::from_raw(1000);
        assert!(peer_allowed(Uid::ROOT, daemon));
        assert!(peer_allowed(Uid::from_raw(1000), daemon));
        assert!(!peer_allowed(Uid::from_raw(1001), daemon));
        assert!(peer_allowed(Uid::ROOT, Uid::ROOT));
        assert!(!peer_allowed(Uid::from_raw(65534), Uid::ROOT));
    }

    #[test]
    fn a_peer_of_the_same_uid_is_authorized() {
        let (ours, theirs) = UnixStream::pair().unwrap();
        assert!(authorized(&ours));
        assert!(authorized(&theirs));
    }

    #[test]
    fn the_longest_idle_connection_makes_room_and_busy_ones_never_do() {
        let shared = Shared::default();
        let mut peers = Vec::new();
        let mut ids = Vec::new();
        for _ in 0..MAX_CONNECTIONS {
            let (ours, theirs) = UnixStream::pair().unwrap();
            ids.push(shared.register(&ours).unwrap());
            peers.push((ours, theirs));
        }
        // All but the first two are busy; the second has been idle longer than the first.
        for id in &ids[2..] {
            shared.set_idle(*id, false);
        }
        shared.set_idle(ids[0], true);
        let (extra, _extra_peer) = UnixStream::pair().unwrap();
        let newcomer = shared.register(&extra).unwrap();
        let open: Vec<u64> = shared.connections().open.iter().map(|open| open.id).collect();
        assert_eq!(open.len(), MAX_CONNECTIONS);
        assert!(!open.contains(&ids[1]), "the longest idle one went");
        assert!(open.contains(&ids[0]) && open.contains(&newcomer));
        // Its peer sees the connection closed.
        let mut byte = [0u8; 1];
        assert_eq!(peers[1].1.read(&mut byte).unwrap(), 0);
        // With every connection busy, a newcomer is refused.
        for id in [ids[0], newcomer] {
            shared.set_idle(id, false);
        }
        let (late, _late_peer) = UnixStream::pair().unwrap();
        assert_eq!(shared.register(&late), None);
    }
}
