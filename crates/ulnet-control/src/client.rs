//! The blocking client `ulnetctl` uses: connect, send a request, wait for its answer.

use std::io;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::frame::{
    DecodeError, FrameError, MAX_RESPONSE_LEN, decode_response, encode_request, read_frame,
    write_frame,
};
use crate::message::{ControlError, Request, Response, errno};

/// How long a call waits for an ordinary answer. Pings and discoveries add the time the
/// request itself allows ([`Request::expected_duration`]).
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// A connection to `ulnetd`'s control socket. One call at a time; calls may repeat.
#[derive(Debug)]
pub struct Client {
    stream: UnixStream,
    path: PathBuf,
    timeout: Duration,
}

/// The control socket could not be reached (daemon not running, wrong path, no permission).
#[derive(Debug, thiserror::Error)]
#[error("cannot connect to ulnetd at {}: {source}", path.display())]
pub struct ConnectError {
    pub path: PathBuf,
    #[source]
    pub source: io::Error,
}

impl ConnectError {
    /// The negative errno of the failure (`-ENOENT` when no socket exists, `-ECONNREFUSED`
    /// when nothing listens on it), or `-EIO` when the OS gave none.
    pub fn errno(&self) -> i32 {
        -self.source.raw_os_error().unwrap_or(errno::EIO)
    }
}

/// Why a call did not produce a response.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The daemon answered with an error.
    #[error(transparent)]
    Daemon(ControlError),
    /// The request could not be written (the daemon went away).
    #[error("cannot send the request: {0}")]
    Send(#[source] io::Error),
    /// The daemon closed the connection without answering.
    #[error("ulnetd closed the connection before answering")]
    Closed,
    /// No answer within the call's timeout.
    #[error("no answer from ulnetd within {0:?}")]
    TimedOut(Duration),
    /// The answer was not a frame of this protocol.
    #[error("bad answer from ulnetd: {0}")]
    Receive(#[source] FrameError),
    /// The answer's body was not a response of this protocol.
    #[error("bad answer from ulnetd: {0}")]
    Decode(#[source] DecodeError),
}

impl CallError {
    /// The negative errno a report of this failure carries.
    pub fn errno(&self) -> i32 {
        match self {
            Self::Daemon(error) => error.errno(),
            Self::Send(error) => -error.raw_os_error().unwrap_or(errno::EIO),
            Self::Closed => -errno::ECONNRESET,
            Self::TimedOut(_) => -errno::ETIMEDOUT,
            Self::Receive(FrameError::TooLarge { .. }) => -errno::EMSGSIZE,
            Self::Receive(_) | Self::Decode(_) => -errno::EPROTO,
        }
    }
}

impl Client {
    /// Connects to the socket at `path` with [`DEFAULT_CALL_TIMEOUT`].
    pub fn connect(path: impl AsRef<Path>) -> Result<Self, ConnectError> {
        let path = path.as_ref().to_path_buf();
        match UnixStream::connect(&path) {
            Ok(stream) => Ok(Self { stream, path, timeout: DEFAULT_CALL_TIMEOUT }),
            Err(source) => Err(ConnectError { path, source }),
        }
    }

    /// Sets how long a call waits for an ordinary answer.
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The pid of the process serving the socket (`SO_PEERCRED`), when the kernel tells.
    pub fn server_pid(&self) -> Option<u32> {
        let credentials = rustix::net::sockopt::socket_peercred(&self.stream).ok()?;
        u32::try_from(credentials.pid.as_raw_nonzero().get()).ok()
    }

    /// Sends `request` and waits for the answer: the response, or the daemon's error as
    /// [`CallError::Daemon`].
    pub fn call(&mut self, request: &Request) -> Result<Response, CallError> {
        let timeout = self.timeout.saturating_add(request.expected_duration());
        // A zero timeout means "block forever" to set_*_timeout; never pass it.
        let socket_timeout = Some(timeout.max(Duration::from_millis(1)));
        self.stream.set_write_timeout(socket_timeout).map_err(CallError::Send)?;
        self.stream.set_read_timeout(socket_timeout).map_err(CallError::Send)?;
        write_frame(&mut self.stream, &encode_request(request)).map_err(CallError::Send)?;
        let body = match read_frame(&mut self.stream, MAX_RESPONSE_LEN) {
            Ok(body) => body,
            Err(FrameError::Closed | FrameError::Truncated { .. }) => {
                return Err(CallError::Closed);
            }
            Err(FrameError::Io(error)) if error.kind() == io::ErrorKind::ConnectionReset => {
                return Err(CallError::Closed);
            }
            Err(FrameError::TimedOut) => return Err(CallError::TimedOut(timeout)),
            Err(error) => return Err(CallError::Receive(error)),
        };
        decode_response(&body).map_err(CallError::Decode)?.map_err(CallError::Daemon)
    }
}
