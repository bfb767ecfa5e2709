//! Accepting connections: the listener loop, and the passive handshake of each connection
//! (connreq, then the peer's hello; our reply hello goes out as the connection's first bytes).
//!
//! The machine ([`PassiveHandshake`]) checks everything the kernel's acceptor checks, in its
//! order: the source port under `accept=secure` before reading anything, the connreq magic and
//! version (answering an unknown version with the downgrade reply), the exact target NID, the
//! hello (answering an unknown hello version with our own, type NONE). The verdict on a good
//! hello (the connection race, duplicates, a rebooted peer) needs the node's state and is taken
//! in the peer table with the core locked.
//!
//! lustre: acceptor.c `lnet_acceptor()`, `lnet_accept()`; socklnd.c `ksocknal_accept()`,
//! `ksocknal_create_conn()`; socklnd_cb.c `ksocknal_recv_hello()`.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use ulnet_proto::socklnd::handshake::{PassiveHandshake, PassiveStep};
use ulnet_proto::wire::hello::Hello;

use super::context::Cx;
use super::ni::{Inner, MAX_HANDSHAKES};
use super::{connection, deadline_instant, socket};
use crate::clock;
use crate::driver::{Shared, Wakes, drain};

/// Pause after an accept error (out of file descriptors...) before trying again.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);

/// Accepts connections until the runtime stops.
pub(super) async fn run(inner: Arc<Inner>, node: Weak<Shared>, listener: TcpListener) {
    loop {
        match listener.accept().await {
            Ok((stream, peer_addr)) => {
                let busy = inner.handshakes.fetch_add(1, Ordering::Relaxed);
                if busy >= MAX_HANDSHAKES {
                    inner.handshakes.fetch_sub(1, Ordering::Relaxed);
                    inner.count(|c| &c.handshakes_failed);
                    tracing::warn!(%peer_addr, "too many handshakes under way: connection closed");
                    continue;
                }
                tokio::spawn(handshake(Arc::clone(&inner), node.clone(), stream, peer_addr));
            }
            Err(error) => {
                tracing::warn!(nid = %inner.identity.nid, %error, "accept failed");
                tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
            }
        }
    }
}

/// One incoming connection, from accept to established (or closed).
async fn handshake(
    inner: Arc<Inner>,
    node: Weak<Shared>,
    stream: TcpStream,
    peer_addr: SocketAddr,
) {
    let refusal = admit(&inner, &node, stream, peer_addr).await;
    inner.handshakes.fetch_sub(1, Ordering::Relaxed);
    let Some((mut stream, reply)) = refusal else {
        return;
    };
    inner.count(|c| &c.handshakes_failed);
    if !reply.is_empty() {
        // The answer tells the peer what to retry with; it gets accept_timeout to take it.
        let write = stream.write_all(&reply);
        let _ = tokio::time::timeout(inner.tunables.accept_timeout, write).await;
    }
    socket::shut_down(&stream);
}

/// Runs the handshake; returns the socket and the bytes to write before closing when the
/// connection is refused, `None` when it was established (or is already closed).
async fn admit(
    inner: &Arc<Inner>,
    node: &Weak<Shared>,
    mut stream: TcpStream,
    peer_addr: SocketAddr,
) -> Option<(TcpStream, Vec<u8>)> {
    let now = clock::now();
    let mut handshake = match PassiveHandshake::new(now, &inner.accept, peer_addr) {
        Ok(handshake) => handshake,
        Err(error) => {
            tracing::debug!(%peer_addr, %error, "connection refused");
            return Some((stream, Vec::new()));
        }
    };
    if let Err(error) = socket::configure(&stream, &inner.tunables) {
        tracing::debug!(%peer_addr, %error, "cannot set socket options");
        return Some((stream, Vec::new()));
    }
    let mut buffer = [0u8; Hello::MAX_LEN];
    let candidate = loop {
        let hint = handshake.read_hint().clamp(1, buffer.len());
        let deadline = handshake.poll_timeout()?;
        let read = buffer.get_mut(..hint).unwrap_or(&mut []);
        let read = tokio::time::timeout_at(deadline_instant(deadline), stream.read(read)).await;
        let now = clock::now();
        let count = match read {
            Err(_) => match handshake.handle_timeout(now) {
                Ok(()) => continue,
                Err(error) => {
                    tracing::debug!(%peer_addr, %error, "handshake failed");
                    return Some((stream, Vec::new()));
                }
            },
            Ok(Err(error)) => {
                tracing::debug!(%peer_addr, %error, "handshake failed");
                return Some((stream, Vec::new()));
            }
            Ok(Ok(0)) => {
                let error = handshake.handle_eof();
                tracing::debug!(%peer_addr, %error, "handshake failed");
                return Some((stream, Vec::new()));
            }
            Ok(Ok(count)) => count,
        };
        let input = buffer.get(..count).unwrap_or(&[]);
        match handshake.handle_input(now, input) {
            Ok((_, PassiveStep::NeedMore(_))) => {}
            Ok((_, PassiveStep::Decide(candidate))) => break candidate,
            Ok((_, PassiveStep::Rejected(rejection))) => {
                tracing::debug!(%peer_addr, reason = ?rejection.reason, "connection refused");
                return Some((stream, rejection.reply));
            }
            // Only `decide` establishes.
            Ok((_, PassiveStep::Established { .. })) => return Some((stream, Vec::new())),
            Err(error) => {
                tracing::debug!(%peer_addr, %error, "handshake failed");
                return Some((stream, Vec::new()));
            }
        }
    };
    let loopback = stream.local_addr().is_ok_and(|local| local.ip() == peer_addr.ip());
    let node = node.upgrade()?;
    let now = clock::now();
    let mut wakes = Wakes::default();
    let refusal = {
        let mut core = node.lock();
        if core.closed {
            return None;
        }
        let refusal = {
            let mut cx = Cx { inner, node: &node, core: &mut core, now, wakes: &mut wakes };
            cx.with_table(|table, cx| table.admit(cx, &mut handshake, &candidate, stream, loopback))
        };
        let refusal = match refusal {
            Ok(new) => {
                if let Some(new) = new {
                    connection::start(inner, &node, new);
                }
                None
            }
            Err(refused) => Some(refused),
        };
        drain(&node, &mut core, now, &mut wakes);
        refusal
    };
    wakes.finish();
    refusal
}
