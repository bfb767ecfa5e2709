//! The smallest HTTP/1.1 server a Prometheus scrape needs: `GET /metrics` (and `HEAD`),
//! one request per connection, `Connection: close`.
//!
//! One thread accepts; each connection is answered on a thread of its own, at most
//! [`MAX_CONNECTIONS`] at once (more are answered `503` and closed). A request head larger
//! than [`MAX_REQUEST_BYTES`] is answered `431`, one not complete within
//! [`REQUEST_DEADLINE`] is dropped unanswered, so a slow or hostile client holds a thread
//! for a bounded time. Bodies are never read (a scrape has none).

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 8;
/// The largest request head read (request line and headers).
pub const MAX_REQUEST_BYTES: usize = 8 * 1024;
/// How long a client has to send its request head, and the response to be written.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(10);

/// The path metrics are served on.
pub const METRICS_PATH: &str = "/metrics";

/// What answers a scrape: the body, or an error text (answered `500`).
pub type Source = dyn Fn() -> Result<String, String> + Send + Sync;

/// A running metrics server. Dropping it stops it.
#[derive(Debug)]
pub struct MetricsServer {
    address: SocketAddr,
    stopping: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Serves `source` on `listener` (bound by the caller, so a taken address fails before
    /// the node starts) with `content_type`.
    pub fn start(
        listener: TcpListener,
        content_type: &'static str,
        source: Arc<Source>,
    ) -> io::Result<Self> {
        let address = listener.local_addr()?;
        let stopping = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stopping);
        let acceptor = thread::Builder::new()
            .name("ulnetd-metrics".into())
            .spawn(move || accept_loop(&listener, &flag, content_type, &source))?;
        Ok(Self { address, stopping, acceptor: Some(acceptor) })
    }

    /// The address it listens on (the port chosen when asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.address
    }

    /// Stops accepting; connections being answered finish on their own threads.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        let Some(acceptor) = self.acceptor.take() else { return };
        self.stopping.store(true, Ordering::SeqCst);
        // Wake the blocked accept() with a connection of our own.
        match TcpStream::connect_timeout(&wake_address(self.address), Duration::from_secs(1)) {
            Ok(_) => {
                let _ = acceptor.join();
            }
            Err(error) => {
                tracing::warn!(%error, "metrics server: cannot wake the acceptor; left to exit with the process");
            }
        }
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Where to connect to reach a listener bound to `address` (an unspecified address is
/// reached on loopback).
fn wake_address(address: SocketAddr) -> SocketAddr {
    let mut target = address;
    if address.ip().is_unspecified() {
        target.set_ip(match address {
            SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    target
}

fn accept_loop(
    listener: &TcpListener,
    stopping: &AtomicBool,
    content_type: &'static str,
    source: &Arc<Source>,
) {
    let active = Arc::new(AtomicUsize::new(0));
    for stream in listener.incoming() {
        if stopping.load(Ordering::SeqCst) {
            break;
        }
        let Ok(mut stream) = stream else { continue };
        if active.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            active.fetch_sub(1, Ordering::SeqCst);
            let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
            let _ = respond(
                &mut stream,
                Status::Busy,
                "text/plain",
                b"too many scrapes at once\n",
                true,
            );
            continue;
        }
        let guard = ActiveGuard(Arc::clone(&active));
        let source = Arc::clone(source);
        let spawned = thread::Builder::new().name("ulnetd-scrape".into()).spawn(move || {
            let _guard = guard;
            serve(stream, content_type, &*source);
        });
        if let Err(error) = spawned {
            tracing::warn!(%error, "metrics server: cannot start a thread for a scrape");
        }
    }
}

/// Releases a connection slot when its thread ends, however it ends.
struct ActiveGuard(Arc<AtomicUsize>);

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Answers one connection.
fn serve(mut stream: TcpStream, content_type: &'static str, source: &Source) {
    let deadline = Instant::now() + REQUEST_DEADLINE;
    let _ = stream.set_write_timeout(Some(REQUEST_DEADLINE));
    let head = match read_head(&mut stream, deadline) {
        Ok(head) => head,
        Err(HeadError::TooLarge) => {
            let _ = respond(
                &mut stream,
                Status::HeaderTooLarge,
                "text/plain",
                b"request too large\n",
                true,
            );
            close(stream);
            return;
        }
        // Closed, timed out or broken: nobody to answer.
        Err(HeadError::Io(error)) => {
            tracing::debug!(%error, "metrics: no request read");
            return;
        }
    };
    let request = parse_request(&head);
    let (status, kind, body, with_body) = match request {
        Err(MalformedRequest) => {
            (Status::BadRequest, "text/plain", b"bad request\n".to_vec(), true)
        }
        Ok(Request { method, path }) if method != "GET" && method != "HEAD" => {
            let _ = path;
            (Status::MethodNotAllowed, "text/plain", b"only GET and HEAD\n".to_vec(), true)
        }
        Ok(Request { method, path }) if path == METRICS_PATH => match source() {
            Ok(text) => (Status::Ok, content_type, text.into_bytes(), method == "GET"),
            Err(error) => {
                tracing::warn!(%error, "metrics: scrape failed");
                (Status::Error, "text/plain", format!("{error}\n").into_bytes(), method == "GET")
            }
        },
        Ok(Request { method, .. }) => {
            (Status::NotFound, "text/plain", b"metrics are at /metrics\n".to_vec(), method == "GET")
        }
    };
    let _ = respond(&mut stream, status, kind, &body, with_body);
    close(stream);
}

/// Ends the response, then reads (a bounded amount, briefly) what the client still sends:
/// closing with unread input would reset the connection and could lose the response.
fn close(mut stream: TcpStream) {
    let _ = stream.shutdown(Shutdown::Write);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
    let mut sink = [0u8; 4096];
    let mut left = 16 * MAX_REQUEST_BYTES;
    while left > 0 {
        match stream.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(read) => left = left.saturating_sub(read),
        }
    }
}

#[derive(Debug)]
enum HeadError {
    TooLarge,
    Io(io::Error),
}

/// Reads until the blank line that ends a request head, within `deadline`.
fn read_head(stream: &mut TcpStream, deadline: Instant) -> Result<Vec<u8>, HeadError> {
    let mut head = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(HeadError::Io(io::ErrorKind::TimedOut.into()));
        }
        stream.set_read_timeout(Some(left)).map_err(HeadError::Io)?;
        let read = stream.read(&mut chunk).map_err(HeadError::Io)?;
        if read == 0 {
            return Err(HeadError::Io(io::ErrorKind::UnexpectedEof.into()));
        }
        head.extend_from_slice(chunk.get(..read).unwrap_or_default());
        if let Some(end) = find_head_end(&head) {
            head.truncate(end);
            return Ok(head);
        }
        if head.len() > MAX_REQUEST_BYTES {
            return Err(HeadError::TooLarge);
        }
    }
}

/// Where the head ends (before `\r\n\r\n`, or a bare `\n\n` as lenient servers accept).
fn find_head_end(bytes: &[u8]) -> Option<usize> {
    let crlf = bytes.windows(4).position(|window| window == b"\r\n\r\n");
    let lf = bytes.windows(2).position(|window| window == b"\n\n");
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// A request line's method and path (the query string dropped).
#[derive(Debug, PartialEq, Eq)]
pub struct Request<'a> {
    pub method: &'a str,
    pub path: &'a str,
}

/// A request line that is not `METHOD /TARGET HTTP/1.x` (answered `400`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("malformed HTTP request line")]
pub struct MalformedRequest;

/// Parses the request line of `head`: `METHOD TARGET HTTP/1.x`.
pub fn parse_request(head: &[u8]) -> Result<Request<'_>, MalformedRequest> {
    let text = std::str::from_utf8(head).map_err(|_| MalformedRequest)?;
    let line = text.lines().next().ok_or(MalformedRequest)?;
    let mut words = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        return Err(MalformedRequest);
    };
    let token = |word: &str| !word.is_empty() && word.bytes().all(|b| b.is_ascii_uppercase());
    if !token(method) || !target.starts_with('/') || !version.starts_with("HTTP/1.") {
        return Err(MalformedRequest);
    }
    let path = target.split_once('?').map_or(target, |(path, _)| path);
    Ok(Request { method, path })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    Ok,
    BadRequest,
    NotFound,
    MethodNotAllowed,
    HeaderTooLarge,
    Error,
    Busy,
}

impl Status {
    fn line(self) -> &'static str {
        match self {
            Self::Ok => "200 OK",
            Self::BadRequest => "400 Bad Request",
            Self::NotFound => "404 Not Found",
            Self::MethodNotAllowed => "405 Method Not Allowed",
            Self::HeaderTooLarge => "431 Request Header Fields Too Large",
            Self::Error => "500 Internal Server Error",
            Self::Busy => "503 Service Unavailable",
        }
    }
}

fn respond(
    stream: &mut TcpStream,
    status: Status,
    content_type: &str,
    body: &[u8],
    with_body: bool,
) -> io::Result<()> {
    let allow = if status == Status::MethodNotAllowed { "Allow: GET, HEAD\r\n" } else { "" };
    let head = format!(
        "HTTP/1.1 {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{allow}Connection: close\r\n\r\n",
        status.line(),
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    if with_body {
        stream.write_all(body)?;
    }
    stream.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(body: &'static str) -> MetricsServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let source: Arc<Source> = Arc::new(move || Ok(body.to_string()));
        MetricsServer::start(listener, "text/plain; version=0.0.4", source).unwrap()
    }

    fn exchange(address: SocketAddr, request: &[u8]) -> String {
        let mut stream = TcpStream::connect(address).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        stream.write_all(request).unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        answer
    }

    #[test]
    fn metrics_are_served_and_everything_else_refused() {
        let server = server("up 1\n");
        let address = server.local_addr();
        let ok = exchange(address, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(ok.contains("Content-Type: text/plain; version=0.0.4\r\n"), "{ok}");
        assert!(ok.contains("Content-Length: 5\r\n"), "{ok}");
        assert!(ok.ends_with("\r\n\r\nup 1\n"), "{ok}");
        let query = exchange(address, b"GET /metrics?name[]=x HTTP/1.0\r\n\r\n");
        assert!(query.starts_with("HTTP/1.1 200 OK\r\n"), "{query}");
        let head = exchange(address, b"HEAD /metrics HTTP/1.1\r\n\r\n");
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n") && head.ends_with("\r\n\r\n"), "{head}");
        let missing = exchange(address, b"GET / HTTP/1.1\r\n\r\n");
        assert!(missing.starts_with("HTTP/1.1 404 Not Found\r\n"), "{missing}");
        let post = exchange(address, b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
        assert!(post.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"), "{post}");
        assert!(post.contains("Allow: GET, HEAD\r\n"), "{post}");
        let bad = exchange(address, b"GARBAGE\r\n\r\n");
        assert!(bad.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{bad}");
        let mut huge = b"GET /metrics HTTP/1.1\r\n".to_vec();
        huge.extend(std::iter::repeat_n(b'a', MAX_REQUEST_BYTES + 10));
        let large = exchange(address, &huge);
        assert!(large.starts_with("HTTP/1.1 431 "), "{large}");
        server.shutdown();
        assert!(TcpStream::connect(address).is_err(), "the listener is closed");
    }

    #[test]
    fn request_lines_parse_strictly() {
        assert_eq!(
            parse_request(b"GET /metrics?x=1 HTTP/1.1\r\nHost: a"),
            Ok(Request { method: "GET", path: "/metrics" })
        );
        assert_eq!(parse_request(b"HEAD / HTTP/1.0"), Ok(Request { method: "HEAD", path: "/" }));
        for bad in [
            &b""[..],
            b"GET",
            b"GET /metrics",
            b"GET metrics HTTP/1.1",
            b"GET /metrics HTTP/2",
            b"GET  /metrics HTTP/1.1",
            b"get /metrics HTTP/1.1",
            b"GET /metrics HTTP/1.1 extra",
            b"\xff\xfe /metrics HTTP/1.1",
        ] {
            assert_eq!(parse_request(bad), Err(MalformedRequest), "{bad:?}");
        }
    }

    #[test]
    fn heads_end_at_the_first_blank_line() {
        assert_eq!(find_head_end(b"GET / HTTP/1.1\r\n\r\nbody"), Some(14));
        assert_eq!(find_head_end(b"GET / HTTP/1.1\n\n"), Some(14));
        assert_eq!(find_head_end(b"GET / HTTP/1.1\r\nHost: x\r\n"), None);
    }
}
