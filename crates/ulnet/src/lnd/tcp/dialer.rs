//! Opening a typed connection to a peer: TCP connect from a privileged port, the connreq and
//! our hello in one write, then the peer's hello, read no further than its end (what follows
//! is the connection's framing). The verdict (reboot, duplicates) is the peer table's, with the
//! core locked.
//!
//! lustre: socklnd_cb.c `ksocknal_connect()`, socklnd.c `ksocknal_create_conn()` (active),
//! acceptor.c `lnet_connect()`.

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Weak};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use ulnet_proto::addr::ProcessId;
use ulnet_proto::socklnd::handshake::{ActiveError, ActiveHandshake, ActiveStep};
use ulnet_proto::socklnd::peer_conns::DialRequest;
use ulnet_proto::wire::hello::{ConnType, Hello};

use super::context::{Cx, DialError, Dialled};
use super::ni::Inner;
use super::{connection, deadline_instant, socket};
use crate::clock;
use crate::driver::{Shared, Wakes, drain_releasing};

/// Dials `peer` as `request` asks, then hands the result to the peer table.
pub(super) async fn run(
    inner: Arc<Inner>,
    node: Weak<Shared>,
    peer: ProcessId,
    request: DialRequest,
) {
    let result = dial(&inner, peer, request).await;
    let Some(node) = node.upgrade() else {
        return;
    };
    let mut now = clock::now();
    let mut wakes = Wakes::default();
    {
        let mut core = node.lock();
        if core.closed {
            return;
        }
        {
            let mut cx = Cx::locked(&inner, &node, &mut core, now, &mut wakes);
            if let Some(new) =
                cx.with_table(&peer.nid, |table, cx| table.on_dialled(cx, peer, result))
            {
                connection::start(&inner, &node, new);
            }
        }
        drop(drain_releasing(&node, core, &mut now, &mut wakes));
    }
    wakes.finish();
}

async fn dial(inner: &Inner, peer: ProcessId, request: DialRequest) -> Result<Dialled, DialError> {
    let tunables = &inner.tunables;
    let ip = peer.nid.ip().ok_or(DialError::NoAddress(peer))?;
    // lustre: socklnd_cb.c `ksocknal_connect()`: CONTROL connections go to accept_port, the
    // others to `accept_port_bulk` (the same port unless set).
    let port = if request.conn_type == ConnType::CONTROL {
        tunables.accept_port
    } else {
        tunables.bulk_port()
    };
    let address = SocketAddr::new(ip, port);
    let connect = socket::connect(inner.ip, address, &inner.privileged_ports, tunables);
    let stream = match tokio::time::timeout(inner.sock_timeout(), connect).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(source)) => return Err(DialError::Connect { address, source }),
        Err(_) => return Err(DialError::ConnectTimeout(address)),
    };
    socket::configure(&stream, tunables, inner.sock_timeout())?;
    let loopback = stream.local_addr()?.ip() == address.ip();
    let mut handshake = ActiveHandshake::new(
        clock::now(),
        inner.identity,
        peer,
        request.conn_type,
        request.version,
        inner.sock_timeout(),
    )?;
    let mut stream = stream;
    let write = stream.write_all(handshake.initial_bytes());
    match tokio::time::timeout(inner.sock_timeout(), write).await {
        Ok(result) => result?,
        Err(_) => return Err(io::Error::from(io::ErrorKind::TimedOut).into()),
    }
    let mut buffer = [0u8; Hello::MAX_LEN];
    loop {
        let hint = handshake.read_hint().clamp(1, buffer.len());
        let Some(deadline) = handshake.poll_timeout() else {
            return Err(ActiveError::Finished.into());
        };
        let read = buffer.get_mut(..hint).unwrap_or(&mut []);
        let read = tokio::time::timeout_at(deadline_instant(deadline), stream.read(read)).await;
        let now = clock::now();
        let count = match read {
            Err(_) => {
                handshake.handle_timeout(now)?;
                continue;
            }
            Ok(Err(error)) => return Err(error.into()),
            Ok(Ok(0)) => return Err(handshake.handle_eof().into()),
            Ok(Ok(count)) => count,
        };
        let input = buffer.get(..count).unwrap_or(&[]);
        match handshake.handle_input(now, input)? {
            (_, ActiveStep::NeedMore(_)) => {}
            (_, ActiveStep::Finished(outcome)) => return Ok(Dialled { stream, outcome, loopback }),
        }
    }
}
