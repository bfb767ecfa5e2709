//! Sockets: the listener, outgoing connections from privileged ports, and the options socklnd
//! sets on every connection.
//!
//! lustre: lnet/lnet/lib-socket.c (`lnet_sock_listen()`, `lnet_sock_create()`), acceptor.c
//! `lnet_connect()`, socklnd_lib.c `ksocknal_lib_setup_sock()`.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use socket2::{Domain, Protocol, SockRef, Socket, TcpKeepalive, Type};
use tokio::net::{TcpSocket, TcpStream};
use ulnet_proto::socklnd::tunables::{MAX_RESERVED_PORT, MIN_RESERVED_PORT, SocklndTunables};

/// A listening socket on `ip:port` (`accept_port`, or `accept_port_bulk`), non-blocking, ready
/// for tokio. The NI's own address, not the wildcard the kernel's one acceptor binds, so several
/// nodes fit on one host; the node's NIs on one address share it
/// ([`listener`](super::listener)).
pub(super) fn listen(
    ip: IpAddr,
    port: u16,
    tunables: &SocklndTunables,
) -> io::Result<std::net::TcpListener> {
    let address = SocketAddr::new(ip, port);
    let socket = Socket::new(Domain::for_address(address), Type::STREAM, Some(Protocol::TCP))?;
    // lustre: lib-socket.c `lnet_sock_create()` sets SO_REUSEADDR on every socket.
    socket.set_reuse_address(true)?;
    if ip.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    // Accepted sockets inherit the buffer sizes; setting them before the handshake lets TCP
    // pick a matching window scale.
    set_buffer_sizes(&socket, tunables)?;
    socket.bind(&address.into())?;
    let backlog = i32::try_from(tunables.accept_backlog).unwrap_or(i32::MAX);
    socket.listen(backlog)?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// Connects from `local_ip` to `remote`: from the highest free privileged port when allowed,
/// else from any port. `privileged` is cleared for good when the system refuses (EACCES), so
/// an unprivileged process pays for the attempt once.
/// lustre: acceptor.c `lnet_connect()` (ports 1023 down to 512; next port on EADDRINUSE or
/// EADDRNOTAVAIL, from bind or from connect).
pub(super) async fn connect(
    local_ip: IpAddr,
    remote: SocketAddr,
    privileged: &AtomicBool,
    tunables: &SocklndTunables,
) -> io::Result<TcpStream> {
    if privileged.load(Ordering::Relaxed) {
        for port in (MIN_RESERVED_PORT..=MAX_RESERVED_PORT).rev() {
            let socket = new_socket(remote, tunables)?;
            match socket.bind(SocketAddr::new(local_ip, port)) {
                Ok(()) => {}
                Err(error) if error.kind() == io::ErrorKind::PermissionDenied => {
                    tracing::info!(
                        %local_ip,
                        "no privilege to bind ports {MIN_RESERVED_PORT}-{MAX_RESERVED_PORT}: \
                         connecting from unprivileged ports (peers with accept=secure refuse them)"
                    );
                    privileged.store(false, Ordering::Relaxed);
                    break;
                }
                Err(error) if port_taken(&error) => continue,
                Err(error) => return Err(error),
            }
            match socket.connect(remote).await {
                Ok(stream) => return Ok(stream),
                Err(error) if port_taken(&error) => continue,
                Err(error) => return Err(error),
            }
        }
        if privileged.load(Ordering::Relaxed) {
            // Every privileged port is in use towards this peer: the kernel gives up too.
            return Err(io::Error::new(io::ErrorKind::AddrInUse, "no free privileged port"));
        }
    }
    let socket = new_socket(remote, tunables)?;
    // Bind the NI's address so the peer sees the connection come from our NID's IP.
    socket.bind(SocketAddr::new(local_ip, 0))?;
    socket.connect(remote).await
}

/// The per-connection options: no Nagle (unless `nagle`), TCP keepalive, buffer sizes, ToS,
/// and the send timeout (`sock_timeout`, see [`set_send_timeout`]).
/// lustre: socklnd_lib.c `ksocknal_lib_setup_sock()`.
pub(super) fn configure(
    stream: &TcpStream,
    tunables: &SocklndTunables,
    sock_timeout: Duration,
) -> io::Result<()> {
    let socket = SockRef::from(stream);
    set_send_timeout(stream, sock_timeout)?;
    socket.set_tcp_nodelay(!tunables.nagle)?;
    let keepalive = tunables.keepalive_idle;
    let interval = tunables.keepalive_interval;
    let count = tunables.keepalive_count;
    // The kernel turns TCP keepalive on only when all three are positive.
    if !keepalive.is_zero() && !interval.is_zero() && count > 0 {
        let params =
            TcpKeepalive::new().with_time(keepalive).with_interval(interval).with_retries(count);
        socket.set_tcp_keepalive(&params)?;
    } else {
        socket.set_keepalive(false)?;
    }
    set_buffer_sizes(&socket, tunables)?;
    if let Some(tos) = tunables.tos {
        match stream.local_addr()?.ip() {
            IpAddr::V4(_) => socket.set_tos_v4(u32::from(tos))?,
            IpAddr::V6(_) => socket.set_tclass_v6(u32::from(tos))?,
        }
    }
    Ok(())
}

/// Bytes the socket holds unacknowledged, or cannot send into a zero window, for `timeout`
/// make the kernel abort the connection (`TCP_USER_TIMEOUT`); the next read or write then
/// fails with `TimedOut`, which closes it as a send timeout. This is socklnd's check of a
/// connection whose socket buffer holds bytes with no ACK progress for `sock_timeout`
/// (socklnd_cb.c `ksocknal_find_timed_out_conn()`, `sk_wmem_queued`): bytes the socket took
/// complete their messages, so the framing's own send deadline no longer sees them. 0 leaves
/// the system's default.
pub(super) fn set_send_timeout(stream: &TcpStream, timeout: Duration) -> io::Result<()> {
    let timeout = (!timeout.is_zero()).then_some(timeout);
    SockRef::from(stream).set_tcp_user_timeout(timeout)
}

/// Closes both directions now, so the peer sees the end at once and our connection task (still
/// holding the socket) wakes up and leaves.
pub(super) fn shut_down(stream: &TcpStream) {
    // The peer may have gone already; nothing to do about an error here.
    let _ = SockRef::from(stream).shutdown(std::net::Shutdown::Both);
}

fn new_socket(remote: SocketAddr, tunables: &SocklndTunables) -> io::Result<TcpSocket> {
    let socket = if remote.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
    socket.set_reuseaddr(true)?;
    set_buffer_sizes(&SockRef::from(&socket), tunables)?;
    Ok(socket)
}

fn set_buffer_sizes(socket: &Socket, tunables: &SocklndTunables) -> io::Result<()> {
    if tunables.tx_buffer_size > 0 {
        socket.set_send_buffer_size(tunables.tx_buffer_size as usize)?;
    }
    if tunables.rx_buffer_size > 0 {
        socket.set_recv_buffer_size(tunables.rx_buffer_size as usize)?;
    }
    Ok(())
}

fn port_taken(error: &io::Error) -> bool {
    matches!(error.kind(), io::ErrorKind::AddrInUse | io::ErrorKind::AddrNotAvailable)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn configure_sets_the_socklnd_options() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let stream = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
            let tunables = SocklndTunables {
                keepalive_idle: Duration::from_secs(7),
                keepalive_interval: Duration::from_secs(3),
                keepalive_count: 4,
                tx_buffer_size: 256 << 10,
                tos: Some(0x10),
                ..SocklndTunables::default()
            };
            configure(&stream, &tunables, Duration::from_secs(50)).unwrap();
            let socket = SockRef::from(&stream);
            assert_eq!(socket.tcp_user_timeout().unwrap(), Some(Duration::from_secs(50)));
            assert!(socket.tcp_nodelay().unwrap(), "nagle off: TCP_NODELAY");
            assert!(socket.keepalive().unwrap());
            assert_eq!(socket.tcp_keepalive_time().unwrap(), Duration::from_secs(7));
            assert_eq!(socket.tcp_keepalive_interval().unwrap(), Duration::from_secs(3));
            assert_eq!(socket.tcp_keepalive_retries().unwrap(), 4);
            assert_eq!(socket.tos_v4().unwrap(), 0x10);
            // Linux doubles the value asked for (room for its bookkeeping).
            assert!(socket.send_buffer_size().unwrap() >= 256 << 10);

            let nagle = SocklndTunables {
                nagle: true,
                keepalive_idle: Duration::ZERO,
                ..SocklndTunables::default()
            };
            configure(&stream, &nagle, Duration::ZERO).unwrap();
            assert!(!socket.tcp_nodelay().unwrap());
            assert_eq!(socket.tcp_user_timeout().unwrap(), None, "0: the system's default");
            assert!(!socket.keepalive().unwrap(), "keepalive off unless all three are positive");
        });
    }

    #[tokio::test]
    async fn unprivileged_connect_binds_the_local_address() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let privileged = AtomicBool::new(false);
        let local = IpAddr::from([127, 0, 0, 1]);
        let stream =
            connect(local, address, &privileged, &SocklndTunables::default()).await.unwrap();
        assert_eq!(stream.local_addr().unwrap().ip(), local);
        assert!(stream.local_addr().unwrap().port() > MAX_RESERVED_PORT);
    }
}
