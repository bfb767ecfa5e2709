//! systemd's service notification protocol (sd_notify(3)), spoken directly: one datagram
//! per state change to the Unix socket `$NOTIFY_SOCKET` names, no libsystemd.
//!
//! ulnetd sends `READY=1` once the node is up and the control socket serves (what
//! `Type=notify` waits for), `RELOADING=1` with `MONOTONIC_USEC=` when SIGHUP starts a
//! reload and `READY=1` again when it ends (applied or refused; `STATUS=` says which),
//! and `STOPPING=1` when a shutdown starts. Without `$NOTIFY_SOCKET` nothing is sent.
//!
//! The address is a filesystem path (`/run/systemd/notify`) or, with a leading `@`, a name
//! in Linux's abstract namespace. Other forms (`vsock:`) are refused by name.

use std::io;
use std::os::linux::net::SocketAddrExt as _;
use std::os::unix::net::{SocketAddr, UnixDatagram};

/// The variable naming the service manager's notification socket.
pub const NOTIFY_SOCKET_ENV: &str = "NOTIFY_SOCKET";

/// The longest `STATUS=` text sent; longer ones are cut (the text is for people).
pub const MAX_STATUS_LEN: usize = 1024;

/// Why the notification socket cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    #[error("NOTIFY_SOCKET is empty")]
    Empty,
    #[error(
        "NOTIFY_SOCKET '{0}' is not a path or an abstract socket name (only those are supported)"
    )]
    Unsupported(String),
    #[error("NOTIFY_SOCKET '{address}': {source}")]
    Address { address: String, source: io::Error },
    #[error("cannot create a datagram socket: {0}")]
    Socket(#[source] io::Error),
}

/// A connection to the service manager.
#[derive(Debug)]
pub struct Notifier {
    socket: UnixDatagram,
    address: SocketAddr,
}

impl Notifier {
    /// The notifier `$NOTIFY_SOCKET` asks for; `None` when it is not set (not run by a
    /// service manager, or not `Type=notify`).
    pub fn from_env() -> Result<Option<Self>, NotifyError> {
        match std::env::var_os(NOTIFY_SOCKET_ENV) {
            None => Ok(None),
            Some(value) => Self::new(&value.to_string_lossy()).map(Some),
        }
    }

    /// A notifier sending to `address` (`/path` or `@abstract-name`).
    pub fn new(address: &str) -> Result<Self, NotifyError> {
        let parsed = parse_address(address)?;
        let socket = UnixDatagram::unbound().map_err(NotifyError::Socket)?;
        Ok(Self { socket, address: parsed })
    }

    /// Sends one notification: newline-separated `KEY=value` assignments.
    pub fn send(&self, state: &str) -> io::Result<()> {
        let sent = self.socket.send_to_addr(state.as_bytes(), &self.address)?;
        if sent != state.len() {
            return Err(io::Error::new(io::ErrorKind::WriteZero, "notification cut short"));
        }
        Ok(())
    }

    /// `READY=1` with a status line.
    pub fn ready(&self, status: &str) -> io::Result<()> {
        self.send(&format!("READY=1\nSTATUS={}", status_text(status)))
    }

    /// `RELOADING=1` with the monotonic clock's time, as `Type=notify-reload` requires.
    pub fn reloading(&self) -> io::Result<()> {
        self.send(&format!(
            "RELOADING=1\nMONOTONIC_USEC={}\nSTATUS=reloading the configuration",
            monotonic_usec()
        ))
    }

    /// `STOPPING=1`.
    pub fn stopping(&self) -> io::Result<()> {
        self.send("STOPPING=1\nSTATUS=shutting down")
    }
}

/// The socket address `NOTIFY_SOCKET` names.
fn parse_address(address: &str) -> Result<SocketAddr, NotifyError> {
    let failed = |source| NotifyError::Address { address: address.to_string(), source };
    if let Some(name) = address.strip_prefix('@') {
        return SocketAddr::from_abstract_name(name.as_bytes()).map_err(failed);
    }
    if address.is_empty() {
        return Err(NotifyError::Empty);
    }
    if !address.starts_with('/') {
        return Err(NotifyError::Unsupported(address.to_string()));
    }
    SocketAddr::from_pathname(address).map_err(failed)
}

/// A status on one line, at most [`MAX_STATUS_LEN`] bytes (cut at a character boundary).
pub fn status_text(status: &str) -> String {
    let mut text = status.replace(['\n', '\r'], "; ");
    if text.len() > MAX_STATUS_LEN {
        let mut end = MAX_STATUS_LEN;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

/// `CLOCK_MONOTONIC` in microseconds.
fn monotonic_usec() -> u64 {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    let seconds = u64::try_from(now.tv_sec).unwrap_or(0);
    let micros = u64::try_from(now.tv_nsec).unwrap_or(0) / 1000;
    seconds.saturating_mul(1_000_000).saturating_add(micros)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn receive(socket: &UnixDatagram) -> String {
        let mut buffer = [0u8; 2048];
        let length = socket.recv(&mut buffer).unwrap();
        String::from_utf8(buffer[..length].to_vec()).unwrap()
    }

    #[test]
    fn notifications_reach_a_path_socket() {
        let dir = std::env::temp_dir().join(format!("ulnetd-notify-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("notify");
        let _ = std::fs::remove_file(&path);
        let manager = UnixDatagram::bind(&path).unwrap();
        manager.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let notifier = Notifier::new(path.to_str().unwrap()).unwrap();
        notifier.ready("ready 0@lo,127.0.0.2@tcp\nsecond line").unwrap();
        assert_eq!(receive(&manager), "READY=1\nSTATUS=ready 0@lo,127.0.0.2@tcp; second line");
        notifier.reloading().unwrap();
        let reloading = receive(&manager);
        let lines: Vec<&str> = reloading.lines().collect();
        assert_eq!(lines[0], "RELOADING=1");
        let usec: u64 = lines[1].strip_prefix("MONOTONIC_USEC=").unwrap().parse().unwrap();
        assert!(usec > 0);
        notifier.stopping().unwrap();
        assert_eq!(receive(&manager), "STOPPING=1\nSTATUS=shutting down");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn notifications_reach_an_abstract_socket() {
        let name = format!("ulnetd-notify-test-{}", std::process::id());
        let address = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let manager = UnixDatagram::bind_addr(&address).unwrap();
        manager.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let notifier = Notifier::new(&format!("@{name}")).unwrap();
        notifier.send("READY=1").unwrap();
        assert_eq!(receive(&manager), "READY=1");
    }

    #[test]
    fn unusable_addresses_are_refused_by_name() {
        assert!(matches!(Notifier::new(""), Err(NotifyError::Empty)));
        assert!(matches!(
            Notifier::new("vsock:2:1234"),
            Err(NotifyError::Unsupported(address)) if address == "vsock:2:1234"
        ));
        let long = format!("/{}", "x".repeat(200));
        assert!(matches!(Notifier::new(&long), Err(NotifyError::Address { .. })));
    }

    #[test]
    fn status_lines_are_single_and_bounded() {
        assert_eq!(status_text("a\nb\r\nc"), "a; b; ; c");
        let long = "é".repeat(MAX_STATUS_LEN);
        let cut = status_text(&long);
        assert!(cut.len() <= MAX_STATUS_LEN && cut.len() >= MAX_STATUS_LEN - 1);
        assert!(cut.chars().all(|c| c == 'é'));
    }
}
