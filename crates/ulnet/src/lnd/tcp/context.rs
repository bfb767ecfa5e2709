//! What the TCP LND's parts pass between them: the context of a call made with the core
//! locked ([`Cx`]), how a connection is named ([`ConnKey`]) and why it closes
//! ([`CloseCause`]), what its task waits for ([`Interest`], [`Turn`]), what a dial hands the
//! peer table ([`Dialled`], [`DialError`]) and what the table hands back ([`NewConn`]).
//!
//! It sits below every other file of the LND but `ni`, so they form no circle: `reader` and
//! `writer` use it; `table` uses them; `connection` uses the table; `dialer` and `acceptor` use
//! the table and start connections; `mod.rs` (the [`Lnd`](crate::lnd::Lnd) itself) uses them
//! all.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpStream;
use tokio::sync::Notify;
use ulnet_proto::addr::ProcessId;
use ulnet_proto::engine::{HealthStatus, ParseError, TxId};
use ulnet_proto::socklnd::conn::ConnError;
use ulnet_proto::socklnd::handshake::{ActiveError, ActiveOutcome, ActiveSetupError};
use ulnet_proto::socklnd::peer_conns::CloseReason;
use ulnet_proto::time::Time;

use super::ni::Inner;
use crate::driver::{Core, Shared, Wakes};

/// Most buffers in one vectored read or write (Linux's `UIO_MAXIOV`).
pub const MAX_IOVECS: usize = 1024;

/// What the table's methods work with besides the table: the core (locked, unless the call
/// frames transmits with it released, [`super::deferred`]), the time, and where to post
/// wake-ups.
pub(super) struct Cx<'a> {
    pub(super) inner: &'a Arc<Inner>,
    pub(super) node: &'a Arc<Shared>,
    /// `None` while the core lock is released or shared: sends completed meanwhile wait in
    /// `done`.
    pub(super) core: Option<&'a mut Core>,
    /// The core, held shared (a receive turn on a node of several partitions).
    pub(super) shared: Option<&'a Core>,
    pub(super) now: Time,
    pub(super) wakes: &'a mut Wakes,
    /// Sends completed with the core lock released, to complete once it is taken again.
    pub(super) done: Vec<(TxId, HealthStatus)>,
}

impl<'a> Cx<'a> {
    /// A call made with the core locked.
    pub(super) fn locked(
        inner: &'a Arc<Inner>,
        node: &'a Arc<Shared>,
        core: &'a mut Core,
        now: Time,
        wakes: &'a mut Wakes,
    ) -> Self {
        Self { inner, node, core: Some(core), shared: None, now, wakes, done: Vec::new() }
    }

    /// A call made with the core lock released.
    pub(super) fn released(
        inner: &'a Arc<Inner>,
        node: &'a Arc<Shared>,
        now: Time,
        wakes: &'a mut Wakes,
    ) -> Self {
        Self { inner, node, core: None, shared: None, now, wakes, done: Vec::new() }
    }

    /// A receive turn made with the core shared: sends completed wait in `done`, as with it
    /// released.
    pub(super) fn shared(
        inner: &'a Arc<Inner>,
        node: &'a Arc<Shared>,
        core: &'a Core,
        now: Time,
        wakes: &'a mut Wakes,
    ) -> Self {
        Self { inner, node, core: None, shared: Some(core), now, wakes, done: Vec::new() }
    }

    /// Completes what `done` holds, if the core is locked.
    pub(super) fn complete_done(&mut self) {
        let Some(core) = self.core.as_deref_mut() else { return };
        for (tx, status) in self.done.drain(..) {
            core.complete_send(self.now, tx, status);
        }
    }

    /// Completes a send the table held: at once with the core locked, else once it is.
    pub(super) fn send_done(&mut self, tx: TxId, status: HealthStatus) {
        match self.core.as_deref_mut() {
            Some(core) => {
                core.complete_send(self.now, tx, status);
            }
            None => self.done.push((tx, status)),
        }
    }
}

/// Names a connection for its task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct ConnKey {
    pub(super) peer: ProcessId,
    pub(super) serial: u64,
}

/// What a connection's task should wait for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Interest {
    pub(super) read: bool,
    pub(super) write: bool,
    /// The next input goes through the task's read buffer, so the task may read it before it
    /// takes the core lock ([`Input::preread`](super::reader::Input::preread)).
    pub(super) preread: bool,
}

/// How a receive turn left the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Turn {
    Closed,
    /// Made with the core shared, the turn needs it exclusive to go on.
    Exclusive,
    /// Still open; `more`: the turn's budget ran out with input possibly waiting.
    Open {
        more: bool,
    },
}

/// Why an established connection closes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(super) enum CloseCause {
    #[error("closed by the peer")]
    PeerClosed,
    #[error("socket error: {0}")]
    Io(io::ErrorKind),
    /// The stream ended inside a message.
    #[error("stream ended inside a message")]
    Truncated,
    /// Framing the peer got wrong: bad ksock header, bad LNet header, an unknown ZC cookie...
    #[error("malformed stream: {0}")]
    Malformed(ConnError),
    /// The core refused a well-framed header (wrong destination, GET with payload...).
    #[error("message refused: {0}")]
    Refused(ParseError),
    /// Nothing moved for `sock_timeout`.
    #[error("{0}")]
    Timeout(ConnError),
    #[error("ZC requests unacknowledged for sock_timeout")]
    StaleZcRequests,
    /// The peer came back with a new incarnation (or protocol): its old connections go.
    #[error("the peer rebooted")]
    PeerRebooted,
    /// The core gave up on the path (fast failover suspects a black hole) or the NI's link
    /// went down: what the connection holds fails back to be resent elsewhere.
    #[error("path reset (black hole suspected or link down)")]
    Reset,
    /// A bug of ours; the connection cannot be trusted any more.
    #[error("internal error: {0}")]
    Internal(&'static str),
}

impl CloseCause {
    /// A socket error. `TimedOut` is the kernel giving up on bytes the peer would not take
    /// (`socket::set_send_timeout`): a send timeout, as socklnd counts it.
    pub(super) fn from_io(kind: io::ErrorKind) -> Self {
        match kind {
            io::ErrorKind::TimedOut => Self::Timeout(ConnError::SendTimeout),
            kind => Self::Io(kind),
        }
    }

    pub(super) fn from_conn_error(error: ConnError) -> Self {
        match error {
            ConnError::ReceiveTimeout | ConnError::SendTimeout => Self::Timeout(error),
            ConnError::EofMidMessage => Self::Truncated,
            ConnError::NotReceivingPayload
            | ConnError::PayloadOverrun { .. }
            | ConnError::TransmitOverrun { .. } => Self::Internal("socklnd framing misused"),
            ConnError::KsockHeader(_)
            | ConnError::MalformedZcAck(_)
            | ConnError::UnknownZcCookie(_)
            | ConnError::LnetHeader(_)
            | ConnError::InvalidMessage(_)
            | ConnError::TooManyZcAcks(_) => Self::Malformed(error),
        }
    }

    /// The health status of the messages the connection still held.
    /// lustre: socklnd_cb.c `ksocknal_txlist_done()` (timeouts are local timeouts; a peer that
    /// went away or reset drops them; anything else is a local error).
    pub(super) fn status(self) -> HealthStatus {
        match self {
            Self::Timeout(_) | Self::StaleZcRequests => HealthStatus::LocalTimeout,
            Self::PeerClosed | Self::Io(_) | Self::Truncated | Self::PeerRebooted | Self::Reset => {
                HealthStatus::RemoteDropped
            }
            Self::Malformed(_) | Self::Refused(_) => HealthStatus::RemoteError,
            Self::Internal(_) => HealthStatus::LocalError,
        }
    }

    pub(super) fn is_protocol_error(self) -> bool {
        matches!(self, Self::Malformed(_) | Self::Refused(_))
    }
}

impl From<CloseReason> for CloseCause {
    fn from(reason: CloseReason) -> Self {
        match reason {
            CloseReason::Conn(error) => Self::from_conn_error(error),
            CloseReason::StaleZcRequests => Self::StaleZcRequests,
        }
    }
}

/// A connection whose handshake completed, waiting for the peer table's verdict.
pub(super) struct Dialled {
    pub(super) stream: TcpStream,
    pub(super) outcome: ActiveOutcome,
    /// Both ends have the same IP (duplicates are then allowed).
    pub(super) loopback: bool,
}

/// Why a dial produced no handshake outcome.
#[derive(Debug, thiserror::Error)]
pub(super) enum DialError {
    #[error("peer NID {0} has no IP address")]
    NoAddress(ProcessId),
    #[error("connecting to {address}: {source}")]
    Connect {
        address: SocketAddr,
        #[source]
        source: io::Error,
    },
    #[error("connecting to {0}: timed out")]
    ConnectTimeout(SocketAddr),
    #[error("cannot start the handshake: {0}")]
    Setup(#[from] ActiveSetupError),
    #[error("socket error during the handshake: {0}")]
    Io(#[from] io::Error),
    #[error("handshake failed: {0}")]
    Handshake(#[from] ActiveError),
}

/// A connection the peer table just added: its task is the caller's to start
/// ([`connection::start`](super::connection::start)), which keeps the table below the task
/// that calls it.
#[must_use = "the connection has no task until it is started"]
pub(super) struct NewConn {
    pub(super) key: ConnKey,
    pub(super) stream: Arc<TcpStream>,
    /// Wakes the connection's task.
    pub(super) nudge: Arc<Notify>,
    /// Its staged output, which the task writes at the start of each turn.
    pub(super) outbox: Arc<super::outbox::Outbox>,
    /// The payload destination the core lends it, which the task fills without the lock.
    pub(super) lent: Arc<super::reader::LentSlot>,
}

#[cfg(test)]
mod tests {
    use ulnet_proto::socklnd::zc::UnknownZcCookie;
    use ulnet_proto::wire::ksock::{KsockError, ZcAck};

    use super::*;

    #[test]
    fn close_causes_are_classified_as_the_kernel_does() {
        let unknown =
            ConnError::UnknownZcCookie(UnknownZcCookie { ack: ZcAck::Single(9), unknown: 1 });
        let malformed = CloseCause::from_conn_error(unknown);
        assert_eq!(malformed, CloseCause::Malformed(unknown));
        assert!(malformed.is_protocol_error());
        assert_eq!(malformed.status(), HealthStatus::RemoteError);
        let bad_type =
            CloseCause::from_conn_error(ConnError::KsockHeader(KsockError::UnknownMsgType(7)));
        assert!(bad_type.is_protocol_error());

        let timeout = CloseCause::from_conn_error(ConnError::SendTimeout);
        assert_eq!(timeout, CloseCause::Timeout(ConnError::SendTimeout));
        assert!(!timeout.is_protocol_error());
        assert_eq!(timeout.status(), HealthStatus::LocalTimeout);

        assert_eq!(CloseCause::from_conn_error(ConnError::EofMidMessage), CloseCause::Truncated);
        assert_eq!(CloseCause::Truncated.status(), HealthStatus::RemoteDropped);
        assert_eq!(CloseCause::PeerRebooted.status(), HealthStatus::RemoteDropped);
        assert!(matches!(
            CloseCause::from_conn_error(ConnError::TransmitOverrun { excess: 1 }),
            CloseCause::Internal(_)
        ));
        assert_eq!(
            CloseCause::from(CloseReason::StaleZcRequests).status(),
            HealthStatus::LocalTimeout
        );
    }
}
