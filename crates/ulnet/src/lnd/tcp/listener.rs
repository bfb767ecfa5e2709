//! One listening socket per address and port, shared by every TCP NI of the node on that
//! address ([`Listener`]), and the node's table of them ([`Listeners`]).
//!
//! The kernel runs one acceptor for the whole node: `lnet_acceptor()` accepts on
//! `accept_port`, `lnet_accept()` reads the connreq and looks up the local NI by the connreq's
//! *destination* NID (`lnet_nid2ni_addref()`, then `nid_same`); no such NI (or one whose LND
//! takes no IP connections) is refused with "Refusing connection from IP for NID: No
//! matching NI" and the socket is released: closed, nothing written. Otherwise the socket goes
//! to that NI's LND (`lnd_accept`, socklnd's `ksocknal_accept()`). ulnet binds each NI's own
//! address rather than the wildcard (so several nodes fit on one host's 127.0.0.x), so it has
//! one listening socket per address and port: the NIs on that address join it, whatever their
//! net (`10.0.0.1@tcp` and `10.0.0.1@tcp1` share one socket). The connreq's target picks the
//! NI among all the node's accepting NIs, as the kernel's lookup does, whichever of the node's
//! addresses the connection came to
//! ([`PassiveHandshake`](ulnet_proto::socklnd::handshake::PassiveHandshake) is given their
//! identities). A connreq for none of them is refused as the kernel refuses it, with a
//! rate-limited warning ([`acceptor`](super::acceptor)).
//!
//! # Lifetime
//!
//! The first NI on an address binds the socket (so a taken port fails that NI's creation, as
//! before); the first `start` serves it. Later NIs on the address join it. An NI leaves when it
//! is retired (`net del`), shut down, or dropped without either (a failed `net add`): the
//! others keep accepting. The last to leave closes it there and then: the accept task is
//! aborted and the socket shut down at once, so the address can be bound again right away
//! (a listening socket shut down stops listening; the aborted task closes its descriptor
//! later). The table lock is held across a join or a leave, so a join never finds a listener
//! that is closing.
//!
//! # Settings
//!
//! `accept`, `accept_timeout` and `accept_backlog` belong to the acceptor (in the kernel they
//! are lnet module parameters, one value per node); the NIs sharing a listener must agree on
//! them, and one that does not is refused when it is created. A listener hands connections
//! only to NIs with its settings (one on another address with other settings is not offered:
//! a connection accepted under `all` must not reach an NI that wants `secure`). An NI with
//! `accept=none` has no listener and is offered by none: a connreq naming it is refused (no
//! matching NI).
//! The per-connection socket options (`nagle`, keepalive, buffer sizes, `tos`) are those of the
//! NI the connreq names, set once it is known.
//!
//! # Admission
//!
//! The handshake slots ([`admission`](super::admission)) are the listener's: a slot is taken at
//! accept, before the connreq says which NI the connection is for, so they cannot be the NI's.
//! Two NIs on one address share [`MAX_HANDSHAKES`] and the per-source cap, as the kernel's NIs
//! share its one acceptor thread.
//!
//! lustre: lnet/lnet/acceptor.c `lnet_acceptor()`, `lnet_accept()`, `lnet_acceptor_start()`,
//! `lnet_acceptor_stop()`; api-ni.c `lnet_nid2ni_addref()`; socklnd.c `ksocknal_accept()`.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use socket2::SockRef;
use ulnet_proto::socklnd::handshake::AcceptConfig;
use ulnet_proto::socklnd::tunables::{AcceptPolicy, SocklndTunables};
use ulnet_proto::wire::hello::LocalIdentity;

use super::admission::{MAX_HANDSHAKES, MAX_HANDSHAKES_PER_SOURCE, Slots};
use super::ni::Inner;
use super::{TcpStats, acceptor, socket};
use crate::driver::Shared;
use crate::log_limit::LogLimit;

/// The node's listeners, by address and port. Cheap to clone: every clone is the same table.
#[derive(Clone, Default)]
pub(crate) struct Listeners {
    table: Arc<Table>,
}

#[derive(Default)]
struct Table {
    /// Leaf lock but for `accepting` and a listener's state, taken inside it.
    by_address: Mutex<HashMap<SocketAddr, Arc<Listener>>>,
    /// Every NI of the node on a listener, whatever its address: a connreq may name any of
    /// them, as the kernel looks the target up among all the node's NIs.
    accepting: Arc<Mutex<Vec<Arc<Inner>>>>,
    /// What the listeners count before a connection's NI is known, for the node's whole life
    /// (a closed listener's counts stay).
    counters: Arc<Counters>,
}

/// What a listener counts before a connection's NI is known (the NIs count the rest).
#[derive(Debug, Default)]
pub(super) struct Counters {
    /// Connections closed during the handshake, before its verdict.
    pub(super) handshakes_failed: AtomicU64,
    /// Of those, the ones refused or evicted by the handshake slots.
    pub(super) handshakes_refused: AtomicU64,
}

/// The settings of an acceptor, which the NIs sharing it must agree on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Settings {
    policy: AcceptPolicy,
    accept_timeout: Duration,
    backlog: u32,
}

impl Settings {
    fn of(tunables: &SocklndTunables) -> Self {
        Self {
            policy: tunables.accept,
            accept_timeout: tunables.accept_timeout,
            backlog: tunables.accept_backlog,
        }
    }
}

/// One listening socket and the NIs it accepts for.
pub(super) struct Listener {
    address: SocketAddr,
    settings: Settings,
    /// How many NIs are on this listener; changed with the table locked.
    members: AtomicUsize,
    /// The node's NIs on any listener (the table's); leaf lock.
    accepting: Arc<Mutex<Vec<Arc<Inner>>>>,
    state: Mutex<State>,
    /// Leaf lock: the passive handshakes under way, bounded in all and per source.
    pub(super) handshakes: Mutex<Slots>,
    counters: Arc<Counters>,
    /// Rate limits of the warnings a peer can cause at will.
    pub(super) log_limits: LogLimits,
}

enum State {
    /// Bound when the first NI joined (so a taken port is that NI's error), not served yet.
    Bound(std::net::TcpListener),
    /// Served by an accept task; the socket is kept to shut it down on close.
    Serving {
        socket: Arc<tokio::net::TcpListener>,
        task: tokio::task::AbortHandle,
    },
    Closed,
}

/// One rate limit per kind of warning an acceptor's connections can cause.
#[derive(Debug)]
pub(super) struct LogLimits {
    /// Incoming connections refused or evicted by the handshake slots.
    pub(super) admission: LogLimit,
    /// `accept()` failing (out of file descriptors...).
    pub(super) accept: LogLimit,
    /// Connection requests naming no NI of this listener.
    pub(super) no_matching_ni: LogLimit,
}

impl Default for LogLimits {
    fn default() -> Self {
        Self {
            admission: LogLimit::new("handshake refused"),
            accept: LogLimit::new("accept failed"),
            no_matching_ni: LogLimit::new("no matching NI"),
        }
    }
}

/// An NI's place in a listener; leaves it when dropped (closing it if the NI was the last).
pub(super) struct Membership {
    table: Arc<Table>,
    listener: Arc<Listener>,
    ni: Arc<Inner>,
}

impl Listeners {
    /// What the listeners counted, for [`Node::tcp_stats`](crate::Node::tcp_stats).
    pub(crate) fn stats(&self) -> TcpStats {
        let counters = &self.table.counters;
        TcpStats {
            handshakes_failed: counters.handshakes_failed.load(Ordering::Relaxed),
            handshakes_refused: counters.handshakes_refused.load(Ordering::Relaxed),
            ..TcpStats::default()
        }
    }

    /// Puts the NI `ni` on the listener of its address and `port` (`accept_port`, or
    /// `accept_port_bulk`), binding one if there is none. Fails when the socket cannot be
    /// bound, or when the listener there has other acceptor settings.
    pub(super) fn join(&self, ni: &Arc<Inner>, port: u16) -> io::Result<Membership> {
        let tunables = &ni.tunables;
        let address = SocketAddr::new(ni.ip, port);
        let settings = Settings::of(tunables);
        let mut by_address = lock(&self.table.by_address);
        let listener = match by_address.get(&address) {
            Some(listener) if listener.settings != settings => {
                let message = format!(
                    "the NIs already accepting on {address} have other acceptor settings \
                     ({:?}, these {settings:?})",
                    listener.settings
                );
                return Err(io::Error::new(io::ErrorKind::InvalidInput, message));
            }
            Some(listener) => Arc::clone(listener),
            None => {
                let socket = socket::listen(ni.ip, port, tunables)?;
                let listener = Arc::new(Listener {
                    address,
                    settings,
                    members: AtomicUsize::new(0),
                    accepting: Arc::clone(&self.table.accepting),
                    state: Mutex::new(State::Bound(socket)),
                    handshakes: Mutex::new(Slots::new(MAX_HANDSHAKES, MAX_HANDSHAKES_PER_SOURCE)),
                    counters: Arc::clone(&self.table.counters),
                    log_limits: LogLimits::default(),
                });
                by_address.insert(address, Arc::clone(&listener));
                listener
            }
        };
        listener.members.fetch_add(1, Ordering::Relaxed);
        lock(&self.table.accepting).push(Arc::clone(ni));
        Ok(Membership { table: Arc::clone(&self.table), listener, ni: Arc::clone(ni) })
    }

    /// How many listeners are open (tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        lock(&self.table.by_address).len()
    }
}

impl Membership {
    /// Serves the listener if nobody has yet; inside the I/O runtime (`Lnd::start`).
    pub(super) fn start(&self, node: &Arc<Shared>) {
        let listener = &self.listener;
        let mut state = lock(&listener.state);
        if !matches!(*state, State::Bound(_)) {
            return;
        }
        let State::Bound(socket) = std::mem::replace(&mut *state, State::Closed) else {
            return;
        };
        // We are inside the I/O runtime (the contract of `start`), which `from_std` needs.
        match tokio::net::TcpListener::from_std(socket) {
            Ok(socket) => {
                let socket = Arc::new(socket);
                let task =
                    acceptor::run(Arc::clone(listener), Arc::downgrade(node), Arc::clone(&socket));
                let task = tokio::spawn(task).abort_handle();
                *state = State::Serving { socket, task };
            }
            Err(error) => {
                let address = listener.address;
                tracing::error!(%address, %error, "cannot serve the listener");
            }
        }
    }
}

impl Drop for Membership {
    fn drop(&mut self) {
        let mut by_address = lock(&self.table.by_address);
        lock(&self.table.accepting).retain(|ni| !Arc::ptr_eq(ni, &self.ni));
        if self.listener.members.fetch_sub(1, Ordering::Relaxed) > 1 {
            return;
        }
        let address = self.listener.address;
        if by_address.get(&address).is_some_and(|open| Arc::ptr_eq(open, &self.listener)) {
            by_address.remove(&address);
        }
        self.listener.close();
    }
}

impl Listener {
    /// What a new connection's handshake may accept: the identities of the node's NIs with
    /// this listener's settings (a connection accepted under `accept=all` must not reach an NI
    /// that wants `secure`), on this listener or another.
    pub(super) fn accept_config(&self) -> AcceptConfig {
        let local_nis = lock(&self.accepting)
            .iter()
            .filter(|ni| Settings::of(&ni.tunables) == self.settings)
            .map(|ni| ni.identity)
            .collect();
        AcceptConfig {
            policy: self.settings.policy,
            accept_timeout: self.settings.accept_timeout,
            local_nis,
        }
    }

    /// The NI with exactly this identity (one [`accept_config`](Self::accept_config) offered),
    /// if it is still there (an NI removed, or removed and added back with a new incarnation,
    /// during the handshake is not).
    pub(super) fn member(&self, local: &LocalIdentity) -> Option<Arc<Inner>> {
        lock(&self.accepting).iter().find(|ni| ni.identity == *local).cloned()
    }

    pub(super) fn accept_timeout(&self) -> Duration {
        self.settings.accept_timeout
    }

    pub(super) fn address(&self) -> SocketAddr {
        self.address
    }

    /// Whether the listener was closed (its last NI left).
    pub(super) fn is_closed(&self) -> bool {
        matches!(*lock(&self.state), State::Closed)
    }

    pub(super) fn count(&self, counter: impl Fn(&Counters) -> &AtomicU64) {
        counter(&self.counters).fetch_add(1, Ordering::Relaxed);
    }

    /// Stops accepting now. Handshakes under way go on, and find no member to hand their
    /// connection to.
    fn close(&self) {
        let state = std::mem::replace(&mut *lock(&self.state), State::Closed);
        if let State::Serving { socket, task } = state {
            task.abort();
            // A listening socket shut down leaves the listen state at once (Linux), so the
            // address is free for a new listener before the aborted task drops its descriptor.
            // An error only means there is nothing to stop.
            let _ = SockRef::from(&*socket).shutdown(std::net::Shutdown::Both);
        }
        tracing::debug!(address = %self.address, "listener closed");
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use ulnet_proto::addr::Nid;
    use ulnet_proto::engine::NiId;

    use super::super::TcpLnd;
    use super::*;

    fn tunables(port: u16, accept: AcceptPolicy) -> SocklndTunables {
        SocklndTunables { accept_port: port, accept, ..SocklndTunables::default() }
    }

    fn nid(text: &str) -> Nid {
        text.parse().unwrap()
    }

    /// The NIs a connection accepted on `lnd`'s listener may name.
    fn offered(lnd: &TcpLnd) -> Vec<Nid> {
        let membership = lnd.lock_membership();
        let listener = &membership.as_ref().unwrap().listener;
        listener.accept_config().local_nis.iter().map(|ni| ni.nid).collect()
    }

    #[test]
    fn nis_on_one_address_share_a_listener_until_the_last_leaves() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let listeners = Listeners::default();
        let all = tunables(port, AcceptPolicy::All);
        let new = |ni: u16, text: &str, tunables: SocklndTunables| {
            let placement = super::super::Placement::new(Default::default(), Default::default());
            TcpLnd::new(NiId(ni), nid(text), 12345, tunables, false, &listeners, placement)
        };
        let tcp = new(1, "127.0.0.1@tcp", all).unwrap();
        let tcp1 = new(2, "127.0.0.1@tcp1", all).unwrap();
        assert_eq!(listeners.len(), 1, "one socket for both nets");
        assert_eq!(offered(&tcp), [nid("127.0.0.1@tcp"), nid("127.0.0.1@tcp1")]);
        // Another acceptor policy cannot share it; nothing changes.
        let Err(crate::error::BuildError::TcpListen { source, .. }) =
            new(3, "127.0.0.1@tcp2", tunables(port, AcceptPolicy::Secure))
        else {
            panic!("other acceptor settings joined the listener");
        };
        assert_eq!(source.kind(), io::ErrorKind::InvalidInput);
        // accept=none takes no part.
        let none = new(4, "127.0.0.1@tcp3", tunables(port, AcceptPolicy::None)).unwrap();
        assert!(none.lock_membership().is_none());
        assert_eq!(offered(&tcp1).len(), 2);
        // Another address has its own socket; a connreq may name its NI on either (as the
        // kernel's lookup over all NIs), but not one with other settings.
        let other = new(5, "127.0.0.2@tcp", all).unwrap();
        let secure = new(6, "127.0.0.3@tcp", tunables(port, AcceptPolicy::Secure)).unwrap();
        assert_eq!(listeners.len(), 3);
        assert_eq!(offered(&tcp1).len(), 3);
        assert_eq!(offered(&secure), [nid("127.0.0.3@tcp")]);
        drop((other, secure));
        // One leaves: the other stays on the listener; leaving twice changes nothing.
        tcp.leave_listener();
        tcp.leave_listener();
        assert_eq!(listeners.len(), 1);
        assert_eq!(offered(&tcp1), [nid("127.0.0.1@tcp1")]);
        // The last one leaves (dropped without retiring, as after a failed `net add`): closed,
        // and the port is free again at once.
        drop(tcp1);
        assert_eq!(listeners.len(), 0);
        let again = new(7, "127.0.0.1@tcp", tunables(port, AcceptPolicy::Secure)).unwrap();
        assert_eq!(offered(&again), [nid("127.0.0.1@tcp")]);
        assert_eq!(listeners.len(), 1);
    }
}
