//! NIs added to and removed from a running node (`lnetctl net add` / `net del` without
//! restarting LNet).
//!
//! Both run on the caller's thread with the core locked, so the core's NI table and the
//! runtime's LND list ([`Core::lnds`](crate::driver::Core)) change together: the core never
//! produces a transmit for an NI the runtime has no LND for, and no LND hands the core input
//! for an NI it has removed.
//!
//! * Adding puts the new NI on the node's listener of its address and port first, binding one
//!   if it is the first NI there (a taken address is an error before anything changes; NIs of
//!   other nets on the same address share the listener), then adds the NI to the core, which
//!   rebuilds the ping buffer and pushes it to multi-rail peers, and starts the LND's tasks on
//!   the I/O thread's runtime. The new NI gets its NUMA distance and its link state (fatal
//!   flag) as the NIs built with the node do.
//!   lustre: api-ni.c `lnet_dyn_add_ni()`, `lnet_startup_lndni()`.
//! * Removing drains the NI first, for [`NI_DRAIN_TIME`]: it is marked fatal, so it is
//!   selected last here and shows DOWN in the ping buffer pushed to multi-rail peers, who
//!   move their traffic to our other NIs while what is already on its connections completes.
//!   The kernel removes at once, and a request whose bytes were on a closing connection then
//!   waits for its response until the transaction timeout; the drain avoids that. Then the
//!   core removes the NI (it is no longer selected or advertised, messages waiting for its
//!   credits go elsewhere, the new ping buffer is pushed to peers, who drop the NID), and the
//!   LND leaves its listener (which goes on accepting for the other NIs on its address, and
//!   closes with the last), writes what it had queued and closes every connection. What it
//!   still held fails with `LOCAL_DROPPED`, which the core resends on another NI when it may
//!   (docs/protocol/semantics.md §4); the kernel fails those with `LOCAL_ERROR` and resends nothing, and
//!   the message was never sent, so resending it loses nothing and duplicates nothing. Other
//!   NIs' connections and all peers are untouched. lustre: api-ni.c `lnet_dyn_del_ni()`,
//!   `lnet_shutdown_lndni()`; socklnd.c `ksocknal_shutdown()`.

use std::sync::Arc;
use std::time::Duration;

use ulnet_proto::addr::Nid;
use ulnet_proto::engine::{ConfigError, HealthStatus, LndKind, NiConfig, NiId, TxId};
use ulnet_proto::socklnd::tunables::SocklndTunables;

use crate::clock;
use crate::driver::{self, Lnds, Wakes};
use crate::error::BuildError;
use crate::lnd::Lnd;
use crate::lnd::tcp::{Placement, TcpLnd};
use crate::node::Node;

/// How long [`Node::remove_ni`] drains an NI (marked fatal, advertised DOWN) before removing
/// it: long enough for the push to reach peers and for what they had already sent on it to
/// complete on a LAN.
pub const NI_DRAIN_TIME: Duration = Duration::from_secs(1);

/// [`Node::add_tcp_ni`].
#[derive(Debug, thiserror::Error)]
pub enum AddNiError {
    #[error("the node is shut down")]
    ShutDown,
    /// The node already has an NI with this NID.
    #[error("NI {0} already exists")]
    DuplicateNid(Nid),
    /// The core refused the NI (loopback NID, too many NIs...).
    #[error(transparent)]
    Config(ConfigError),
    /// A TCP NI needs an IP NID (`a.b.c.d@tcpN` or an IPv6 address).
    #[error("NI {0}: a TCP NI needs an IP address NID")]
    NotIp(Nid),
    /// The NI's listener could not be bound (address not local, port in use...), or the
    /// node's listener on its address and port has other acceptor settings.
    #[error("NI {nid}: cannot listen on port {port}: {source}")]
    Listen {
        nid: Nid,
        port: u16,
        #[source]
        source: std::io::Error,
    },
    /// The I/O thread has not started (cannot happen after `build` returned).
    #[error("the I/O thread is not running")]
    NoRuntime,
}

/// [`Node::remove_ni`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RemoveNiError {
    #[error("the node is shut down")]
    ShutDown,
    /// `0@lo` is always present.
    #[error("the loopback NI cannot be removed")]
    Loopback,
    /// No NI of this node has the NID.
    #[error("no NI {0}")]
    UnknownNid(Nid),
    /// The NI is not served by the TCP LND (in-process fabric NIs are fixed at build).
    #[error("NI {0} is not a TCP NI")]
    NotTcp(Nid),
}

impl Node {
    /// Adds a TCP NI to the running node (`lnetctl net add`), with its net tunables in
    /// `config` (the LND kind is set to `Tcp` and, when unset, the LND timeout to
    /// `tunables.sock_timeout`, as [`NodeBuilder::tcp_ni_config`](crate::NodeBuilder::tcp_ni_config)
    /// does) and its socklnd `tunables`. The NI accepts on its own address at
    /// `tunables.accept_port`, on the listener already there if another NI of the node has the
    /// same address and port (it must then have the same `accept`, `accept_timeout` and
    /// `accept_backlog`); its peers learn it from the push of the new ping buffer.
    pub fn add_tcp_ni(
        &self,
        config: NiConfig,
        tunables: SocklndTunables,
    ) -> Result<Nid, AddNiError> {
        let lnd_timeout = config.lnd_timeout.or(Some(tunables.sock_timeout));
        let config = NiConfig { lnd: LndKind::Tcp, lnd_timeout, ..config };
        let nid = config.nid;
        if nid == Nid::LO_0 {
            return Err(AddNiError::Config(ConfigError::LoopbackConfigured));
        }
        let shared = self.shared();
        let runtime = shared.runtime(0).ok_or(AddNiError::NoRuntime)?;
        let mut wakes = Wakes::default();
        let lnd = {
            let mut core = shared.lock();
            if core.closed {
                return Err(AddNiError::ShutDown);
            }
            if core.engine.ni_for_nid(nid).is_some() {
                return Err(AddNiError::DuplicateNid(nid));
            }
            // The core numbers NIs in order and never reuses a number; the LND list has one
            // entry per number, so its length is the number the core will give.
            let id = NiId(u16::try_from(core.lnds.len()).unwrap_or(u16::MAX));
            let pid = core.engine.pid();
            let inner = self.inner();
            let listeners = &inner.tcp_listeners;
            let placement = Placement::new(core.engine.partitions(), config.cpts);
            let privileged = inner.privileged_ports;
            let lnd = TcpLnd::new(id, nid, pid, tunables, privileged, listeners, placement)
                .map_err(|error| match error {
                    BuildError::TcpListen { nid, port, source } => {
                        AddNiError::Listen { nid, port, source }
                    }
                    _ => AddNiError::NotIp(nid),
                })?;
            let now = clock::now();
            let added = core.engine.add_ni(now, config).map_err(|error| match error {
                ConfigError::DuplicateNid(nid) => AddNiError::DuplicateNid(nid),
                error => AddNiError::Config(error),
            })?;
            if added != id {
                // Only if the two lists ever disagreed: undo rather than serve the wrong NI.
                tracing::error!(?added, ?id, "NI numbering out of step with the LNDs");
                let _ = core.engine.remove_ni(now, added);
                driver::drain(shared, &mut core, now, &mut wakes);
                drop(core);
                wakes.finish();
                return Err(AddNiError::Config(ConfigError::TooManyNis));
            }
            let lnd = Arc::new(lnd);
            let mut lnds: Vec<_> = core.lnds.iter().cloned().collect();
            lnds.push(Some(Arc::clone(&lnd) as Arc<dyn Lnd>));
            core.lnds = Lnds::from(lnds);
            {
                // `start` spawns onto the I/O runtime; entering it makes that work from here.
                let _entered = runtime.enter();
                lnd.start(shared);
            }
            crate::numa::apply(&mut core.engine, &self.inner().placement);
            driver::drain(shared, &mut core, now, &mut wakes);
            lnd
        };
        wakes.finish();
        self.inner().tcps().push(lnd);
        // The fatal flag from the interface's state now, as at start-up.
        crate::link_watch::refresh(shared);
        tracing::info!(%nid, "NI added");
        Ok(nid)
    }

    /// Removes the NI with `nid` from the running node (`lnetctl net del`): after a drain of
    /// [`NI_DRAIN_TIME`] (advertised DOWN; this call blocks meanwhile) it stops being
    /// selected and advertised (peers get the new ping buffer by push), it leaves its listener
    /// (closed if no other NI of the node is on its address), its connections close, and what
    /// it still held is failed for the core to resend on another
    /// NI where it may. Every other NI's connections, and all peers, are untouched.
    pub fn remove_ni(&self, nid: Nid) -> Result<(), RemoveNiError> {
        self.drain_ni(nid)?;
        std::thread::sleep(NI_DRAIN_TIME);
        self.retire_ni(nid)
    }

    /// The first half of [`remove_ni`](Self::remove_ni): the NI is marked fatal, so peers
    /// learn it is DOWN and stop choosing it. The link watcher leaves a draining NI's flag
    /// alone: an unrelated netlink event (an IPv6 address finishing DAD, say) used to clear
    /// it, so the NI was advertised UP and carried traffic again in its last moments, and a
    /// discovery push caught on it at removal failed with no NI left to resend it on.
    fn drain_ni(&self, nid: Nid) -> Result<(), RemoveNiError> {
        if nid == Nid::LO_0 {
            return Err(RemoveNiError::Loopback);
        }
        let shared = self.shared();
        let mut wakes = Wakes::default();
        {
            let mut core = shared.lock();
            if core.closed {
                return Err(RemoveNiError::ShutDown);
            }
            let ni = core.engine.ni_for_nid(nid).ok_or(RemoveNiError::UnknownNid(nid))?;
            if !self.inner().tcps().iter().any(|lnd| lnd.ni() == ni) {
                return Err(RemoveNiError::NotTcp(nid));
            }
            let now = clock::now();
            if let Err(error) = core.engine.set_ni_fatal(now, ni, true) {
                tracing::warn!(%nid, %error, "cannot drain the NI; removing it at once");
            }
            if !core.draining.contains(&ni) {
                core.draining.push(ni);
            }
            driver::drain(shared, &mut core, now, &mut wakes);
        }
        wakes.finish();
        Ok(())
    }

    /// The second half of [`remove_ni`](Self::remove_ni): the core and the LND let it go.
    fn retire_ni(&self, nid: Nid) -> Result<(), RemoveNiError> {
        let shared = self.shared();
        let mut wakes = Wakes::default();
        let retired = {
            let mut core = shared.lock();
            if core.closed {
                return Err(RemoveNiError::ShutDown);
            }
            let ni = core.engine.ni_for_nid(nid).ok_or(RemoveNiError::UnknownNid(nid))?;
            let tcp = self.inner().tcps().iter().find(|lnd| lnd.ni() == ni).cloned();
            let Some(tcp) = tcp else {
                return Err(RemoveNiError::NotTcp(nid));
            };
            let now = clock::now();
            core.draining.retain(|draining| *draining != ni);
            if core.engine.remove_ni(now, ni).is_err() {
                // Listed by `ni_for_nid` just above, under the same lock.
                return Err(RemoveNiError::UnknownNid(nid));
            }
            let mut lnds: Vec<_> = core.lnds.iter().cloned().collect();
            if let Some(slot) = lnds.get_mut(usize::from(ni.0)) {
                *slot = None;
            }
            core.lnds = Lnds::from(lnds);
            tcp.retire(shared, &mut core, now, &mut wakes);
            let held: Vec<TxId> = core
                .engine
                .transmits_in_lnd()
                .filter(|(_, on)| *on == ni)
                .map(|(tx, _)| tx)
                .collect();
            for tx in held {
                core.complete_send(now, tx, HealthStatus::LocalDropped);
            }
            driver::drain(shared, &mut core, now, &mut wakes);
            tcp
        };
        wakes.finish();
        retired.finish_retire(shared);
        tracing::info!(%nid, "NI removed");
        Ok(())
    }
}
