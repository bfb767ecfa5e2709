//! Accepting connections: the listener loop, and the passive handshake of each connection
//! (connreq, then the peer's hello; our reply hello goes out as the connection's first bytes).
//!
//! One loop per [`Listener`]: every TCP NI on the listener's address and port shares it, and
//! the connreq's target NID says which of the node's NIs a connection is for (see
//! [`listener`](super::listener)).
//! The machine ([`PassiveHandshake`]) checks everything the kernel's acceptor checks, in its
//! order: the source port under `accept=secure` before reading anything, the connreq magic and
//! version (answering an unknown version with the downgrade reply), the exact target NID among
//! the node's accepting NIs (none: "No matching NI", closed unanswered), the hello (answering an
//! unknown hello version with our own, type NONE). The verdict on a good hello (the connection
//! race, duplicates, a rebooted peer) needs the node's state and is taken in the target NI's
//! peer table with the core locked.
//!
//! # Bad connections cannot lock good ones out
//!
//! A connection that sends nothing, or trickles its handshake a few bytes at a time, costs us a
//! task and a socket until it ends, so both are bounded:
//!
//! * Before its task starts, a connection needs a handshake slot of its listener
//!   ([`admission`](super::admission)): at most
//!   [`MAX_HANDSHAKES`](super::admission::MAX_HANDSHAKES) in all and
//!   [`MAX_HANDSHAKES_PER_SOURCE`](super::admission::MAX_HANDSHAKES_PER_SOURCE) per source;
//!   when all are taken, a newcomer from a quieter source evicts the oldest handshake of the
//!   busiest one (or, from a source with none, the oldest of all). A connection that gets no
//!   slot is closed at once, unanswered.
//! * The whole handshake, connreq and hello, must end within `accept_timeout` (5 s) of the
//!   accept. The kernel bounds each of its reads by `accept_timeout` instead (three for the
//!   connreq, more for the hello), so a peer sending each piece just before its read's
//!   deadline holds a kernel connection for several times `accept_timeout`; an honest peer
//!   sends the connreq and the hello at once, and the handshake takes one round trip.
//! * Refusals, evictions and connreqs for no NI of ours are warnings, rate limited
//!   ([`crate::log_limit`]); the handshake failures of single connections are debug lines, as
//!   they were.
//!
//! lustre: acceptor.c `lnet_acceptor()`, `lnet_accept()`; socklnd.c `ksocknal_accept()`,
//! `ksocknal_create_conn()`; socklnd_cb.c `ksocknal_recv_hello()` (the passive hello reads
//! use `lnet_acceptor_timeout()`, each); lib-socket.c `lnet_sock_read()` (one timeout per
//! read).

use std::net::SocketAddr;
use std::sync::{Arc, PoisonError, Weak};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use ulnet_proto::socklnd::handshake::{Candidate, PassiveError, PassiveHandshake, PassiveStep};
use ulnet_proto::wire::hello::Hello;

use super::admission::{Granted, Slot};
use super::context::Cx;
use super::listener::Listener;
use super::ni::Inner;
use super::{connection, deadline_instant, socket};
use crate::clock;
use crate::driver::{Shared, Wakes, drain_releasing, partitions};
use crate::log_limit::warn_limited;

/// Pause after an accept error (out of file descriptors...) before trying again.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);

/// Accepts connections on `socket` until the listener closes (its last NI leaves) or the
/// runtime stops.
pub(super) async fn run(listener: Arc<Listener>, node: Weak<Shared>, socket: Arc<TcpListener>) {
    loop {
        match socket.accept().await {
            Ok((stream, peer_addr)) => {
                // Dropping a refused stream closes it: nothing is read or written.
                let Some(granted) = grant_slot(&listener, peer_addr) else {
                    continue;
                };
                tokio::spawn(handshake(
                    Arc::clone(&listener),
                    node.clone(),
                    stream,
                    peer_addr,
                    granted,
                ));
            }
            // Shut down by `Listener::close`, the abort not yet seen.
            Err(_) if listener.is_closed() => return,
            Err(error) => {
                let (limit, address) = (&listener.log_limits.accept, listener.address());
                warn_limited!(limit, clock::now(), %address, %error, "accept failed");
                tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
            }
        }
    }
}

/// A handshake slot for a new connection from `peer_addr`, or `None` (counted and logged)
/// when it gets none.
fn grant_slot(listener: &Listener, peer_addr: SocketAddr) -> Option<Granted> {
    let admitted =
        listener.handshakes.lock().unwrap_or_else(PoisonError::into_inner).admit(peer_addr.ip());
    let limit = &listener.log_limits.admission;
    match admitted {
        Ok(granted) => {
            if let Some((source, held)) = granted.evicted_from {
                listener.count(|c| &c.handshakes_failed);
                listener.count(|c| &c.handshakes_refused);
                warn_limited!(
                    limit,
                    clock::now(),
                    %source,
                    held,
                    for_peer = %peer_addr,
                    "handshake slots full: an older handshake closed to make room"
                );
            }
            Some(granted)
        }
        Err(refused) => {
            listener.count(|c| &c.handshakes_failed);
            listener.count(|c| &c.handshakes_refused);
            let message = "connection closed before its handshake";
            warn_limited!(limit, clock::now(), %peer_addr, %refused, "{message}");
            None
        }
    }
}

/// A connection refused during its handshake: the bytes to write before closing it, and the
/// NI it was for when the handshake got that far (it counts the failure; else the listener).
struct Refusal {
    stream: TcpStream,
    reply: Vec<u8>,
    ni: Option<Arc<Inner>>,
}

impl Refusal {
    fn silent(stream: TcpStream) -> Self {
        Self { stream, reply: Vec::new(), ni: None }
    }
}

/// One incoming connection, from accept to established (or closed).
async fn handshake(
    listener: Arc<Listener>,
    node: Weak<Shared>,
    stream: TcpStream,
    peer_addr: SocketAddr,
    granted: Granted,
) {
    let refusal = {
        // Held until the verdict; released however this ends.
        let _slot = Slot::new(&listener.handshakes, &granted);
        tokio::select! {
            // Eviction drops the handshake, and with it the socket: closed unanswered. It
            // only happens while the handshake waits for input; the verdict takes no await.
            () = granted.evicted.notified() => {
                tracing::debug!(%peer_addr, "handshake evicted");
                return;
            }
            refusal = admit(&listener, &node, stream, peer_addr) => refusal,
        }
    };
    if let Some(refusal) = refusal {
        close_refused(&listener, refusal).await;
    }
}

/// Counts a refused connection, writes its answer (bounded by `accept_timeout`) and closes it.
async fn close_refused(listener: &Listener, refusal: Refusal) {
    let Refusal { mut stream, reply, ni } = refusal;
    match &ni {
        Some(ni) => ni.count(|c| &c.handshakes_failed),
        None => listener.count(|c| &c.handshakes_failed),
    }
    if !reply.is_empty() {
        // The answer tells the peer what to retry with; it gets accept_timeout to take it.
        let write = stream.write_all(&reply);
        let _ = tokio::time::timeout(listener.accept_timeout(), write).await;
    }
    socket::shut_down(&stream);
}

/// Runs the handshake; returns the socket and the bytes to write before closing when the
/// connection is refused, `None` when it was established (or is already closed).
async fn admit(
    listener: &Arc<Listener>,
    node: &Weak<Shared>,
    mut stream: TcpStream,
    peer_addr: SocketAddr,
) -> Option<Refusal> {
    let now = clock::now();
    // The node's NIs this listener may hand a connection to: the connreq must name one exactly.
    let config = listener.accept_config();
    let mut handshake = match PassiveHandshake::new(now, &config, peer_addr) {
        Ok(handshake) => handshake,
        Err(error) => {
            tracing::debug!(%peer_addr, %error, "connection refused");
            return Some(Refusal::silent(stream));
        }
    };
    // The whole handshake must end by then, however the bytes trickle in (module
    // documentation); the machine's own deadlines, one per read as the kernel's, come later.
    let give_up = now.saturating_add(listener.accept_timeout());
    let mut buffer = [0u8; Hello::MAX_LEN];
    let candidate = loop {
        let hint = handshake.read_hint().clamp(1, buffer.len());
        let deadline = handshake.poll_timeout()?.min(give_up);
        let read = buffer.get_mut(..hint).unwrap_or(&mut []);
        let read = tokio::time::timeout_at(deadline_instant(deadline), stream.read(read)).await;
        let now = clock::now();
        let count = match read {
            Err(_) if now >= give_up => {
                tracing::debug!(%peer_addr, "handshake not complete within accept_timeout");
                return Some(Refusal::silent(stream));
            }
            Err(_) => match handshake.handle_timeout(now) {
                Ok(()) => continue,
                Err(error) => {
                    tracing::debug!(%peer_addr, %error, "handshake failed");
                    return Some(Refusal::silent(stream));
                }
            },
            Ok(Err(error)) => {
                tracing::debug!(%peer_addr, %error, "handshake failed");
                return Some(Refusal::silent(stream));
            }
            Ok(Ok(0)) => {
                let error = handshake.handle_eof();
                tracing::debug!(%peer_addr, %error, "handshake failed");
                return Some(Refusal::silent(stream));
            }
            Ok(Ok(count)) => count,
        };
        let input = buffer.get(..count).unwrap_or(&[]);
        match handshake.handle_input(now, input) {
            Ok((_, PassiveStep::NeedMore(_))) => {}
            Ok((_, PassiveStep::Decide(candidate))) => break candidate,
            Ok((_, PassiveStep::Rejected(rejection))) => {
                tracing::debug!(%peer_addr, reason = ?rejection.reason, "connection refused");
                return Some(Refusal { stream, reply: rejection.reply, ni: None });
            }
            // Only `decide` establishes.
            Ok((_, PassiveStep::Established { .. })) => return Some(Refusal::silent(stream)),
            Err(PassiveError::NoMatchingNi(target)) => {
                // The kernel's console error, rate limited; closed, nothing written.
                // lustre: acceptor.c `lnet_accept()` ("No matching NI", -EPERM: the
                // acceptor releases the socket).
                let (limit, ip) = (&listener.log_limits.no_matching_ni, peer_addr.ip());
                warn_limited!(
                    limit,
                    now,
                    "Refusing connection from {ip} for {target}: No matching NI"
                );
                return Some(Refusal::silent(stream));
            }
            Err(error) => {
                tracing::debug!(%peer_addr, %error, "handshake failed");
                return Some(Refusal::silent(stream));
            }
        }
    };
    // The NI the connreq named, if it is still there (`net del` may have run meanwhile; it is
    // then refused as if the connreq had come after it).
    let Some(inner) = listener.member(&candidate.local) else {
        let nid = candidate.local.nid;
        tracing::debug!(%peer_addr, %nid, "the connection's NI was removed during its handshake");
        return Some(Refusal::silent(stream));
    };
    // The NI's own socket options, now that the connection is known to be for it.
    if let Err(error) = socket::configure(&stream, &inner.tunables, inner.sock_timeout()) {
        tracing::debug!(%peer_addr, %error, "cannot set socket options");
        return Some(Refusal { stream, reply: Vec::new(), ni: Some(inner) });
    }
    let loopback = stream.local_addr().is_ok_and(|local| local.ip() == peer_addr.ip());
    let node = node.upgrade()?;
    // The connection runs on its peer's partition: take the verdict there, with the socket
    // registered on that thread's runtime (it was this thread's until now).
    let cpt = inner.placement.cpt_of(&candidate.hello.peer.nid);
    if partitions::current().is_none_or(|here| here == cpt) {
        return verdict(&node, &inner, &mut handshake, &candidate, stream, loopback);
    }
    let Some(runtime) = node.runtime(cpt).cloned() else {
        return verdict(&node, &inner, &mut handshake, &candidate, stream, loopback);
    };
    let stream = match stream.into_std() {
        Ok(stream) => stream,
        Err(error) => {
            tracing::debug!(%peer_addr, %error, "cannot move the connection to its partition");
            inner.count(|c| &c.handshakes_failed);
            return None;
        }
    };
    let listener = Arc::clone(listener);
    drop(runtime.spawn(async move {
        let stream = match TcpStream::from_std(stream) {
            Ok(stream) => stream,
            Err(error) => {
                tracing::debug!(%peer_addr, %error, "cannot move the connection to its partition");
                inner.count(|c| &c.handshakes_failed);
                return;
            }
        };
        if let Some(refusal) = verdict(&node, &inner, &mut handshake, &candidate, stream, loopback)
        {
            close_refused(&listener, refusal).await;
        }
    }));
    None
}

/// The peer table's verdict on a connection whose handshake is complete: established (its task
/// started), or refused with the answer to write.
fn verdict(
    node: &Arc<Shared>,
    inner: &Arc<Inner>,
    handshake: &mut PassiveHandshake,
    candidate: &Candidate,
    stream: TcpStream,
    loopback: bool,
) -> Option<Refusal> {
    let mut now = clock::now();
    let mut wakes = Wakes::default();
    let refusal = {
        let mut core = node.lock();
        if core.closed {
            return None;
        }
        let refusal = {
            let mut cx = Cx::locked(inner, node, &mut core, now, &mut wakes);
            let peer = candidate.hello.peer.nid;
            cx.with_table(&peer, |table, cx| {
                table.admit(cx, handshake, candidate, stream, loopback)
            })
        };
        let refusal = match refusal {
            Ok(new) => {
                if let Some(new) = new {
                    connection::start(inner, node, new);
                }
                None
            }
            Err((stream, reply)) => Some(Refusal { stream, reply, ni: Some(Arc::clone(inner)) }),
        };
        drop(drain_releasing(node, core, &mut now, &mut wakes));
        refusal
    };
    wakes.finish();
    refusal
}
