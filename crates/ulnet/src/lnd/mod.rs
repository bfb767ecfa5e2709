//! LNDs hosted by the runtime, behind one small trait.
//!
//! * **Loopback** (`0@lo`, and sends to our own NIDs) lives inside the core and never reaches
//!   this module.
//! * **mem** ([`mem`]): nodes of one process wired through a shared [`MemFabric`](mem::MemFabric)
//!   and the core's link model (latency, bandwidth, loss, partitions) on real time. The payload
//!   is copied once, from the sender's MD straight into the receiver's.
//! * **tcp** ([`tcp`]): socklnd over real sockets, byte-compatible with the kernel's `ksocklnd`;
//!   NIs are added with [`NodeBuilder::tcp_ni`](crate::NodeBuilder::tcp_ni).
//!
//! # Contract between the runtime and an LND
//!
//! The runtime gives every network NI one `Arc<dyn Lnd>`. All methods but [`Lnd::start`] and
//! [`Lnd::poll`] may run on any thread (an API caller's, the I/O thread, another node's I/O
//! thread delivering to us), always with this node's [`Core`] locked, so they must not block
//! and must not lock another node's core (lock order, see [`crate::driver`]). Work that needs
//! more (socket I/O, another core) is queued and the I/O thread rung through
//! [`Wakes::ring`].
//!
//! * Transmit: [`drain`](fn@crate::driver::drain) calls [`Lnd::transmit`] with what
//!   `core.engine.poll_transmit()` handed out. The LND later (or at once) calls
//!   [`Core::complete_send`] with a [`HealthStatus`](ulnet_proto::engine::HealthStatus); it
//!   reads the payload with `core.engine.tx_payload(tx)` while the core is locked (slices of
//!   MD memory, valid until the send completes), or holds it with
//!   `core.engine.tx_payload_pinned(tx)` to write it after the unlock.
//! * Receive: with the core locked, call `core.engine.handle_header(now, ni, peer_nid, &header)`.
//!   `Deliver`: read the payload into `core.engine.rx_segments_mut(rx)`, or into what
//!   `core.engine.rx_lend(rx)` lends (without the lock; given back with `rx_give_back` under
//!   it), then [`Core::complete_recv`]. `Discard`: skip the bytes. `Delay`: record the
//!   receive in `core.delayed` and stop reading that connection; the answer comes back through
//!   [`Lnd::resume`]. `ProtocolError`: close the connection. Then call
//!   [`drain`](fn@crate::driver::drain) before unlocking, and [`Wakes::finish`] after.
//! * With the core shared (a node of several partitions): the same calls through
//!   [`CoreRef`](crate::driver::CoreRef) (the engine's `try_*`), each of which may decline
//!   having changed nothing; the LND then keeps its place and makes the call again with the
//!   core exclusive. [`Lnd::transmit_shared`] takes a transmit that way, or gives it back.
//! * Shutdown ([`crate::driver::finish`]): the core is marked closed first (API calls fail, and
//!   no new transmit or resume reaches an LND), then [`Lnd::shutdown`] runs with no lock held:
//!   stop accepting input, fail with [`Core::complete_recv`] every receive the core told the LND
//!   to fill (`Deliver`, including resumed ones), and stop tasks. Transmits the LND still holds
//!   need nothing: the runtime fails whatever the core still counts as handed out right after
//!   (`engine.transmits_in_lnd()`), and a later `complete_send` for them is ignored.
//!
//! The TCP LND ([`tcp`]) follows this contract with tasks of its own; its module
//! documentation walks through the I/O shell.

pub(crate) mod mem;
pub(crate) mod tcp;

use std::fmt;
use std::sync::Arc;

use ulnet_proto::engine::{Resume, Transmit};
use ulnet_proto::socklnd::tunables::ConnsPerPeer;
use ulnet_proto::time::Time;

use crate::driver::{Core, Shared, Wakes};

/// What [`Lnd::flush`] did with the queued output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Output {
    /// There was none.
    None,
    /// Written (or handed to the I/O thread): sends may have completed.
    Written,
    /// Kept for a later flush, as asked.
    Held,
}

/// One LND instance, serving one NI.
pub(crate) trait Lnd: Send + Sync + fmt::Debug {
    /// Called once on the I/O thread, inside its runtime, before the loop starts: spawn tasks.
    fn start(&self, _node: &Arc<Shared>) {}

    /// Take charge of one transmit. Core locked; must not block.
    fn transmit(
        &self,
        node: &Arc<Shared>,
        core: &mut Core,
        now: Time,
        transmit: Transmit,
        wakes: &mut Wakes,
    );

    /// [`transmit`](Self::transmit) with the core shared (a node of several partitions, its
    /// engine called on partitions only): a transmit given back (`Some`) was not taken; the
    /// drain hands it over with the core exclusive.
    fn transmit_shared(
        &self,
        _node: &Arc<Shared>,
        _core: &Core,
        _now: Time,
        transmit: Transmit,
        _wakes: &mut Wakes,
    ) -> Option<Transmit> {
        Some(transmit)
    }

    /// Write the output queued by transmits since the last flush, or, if `hold`, keep it for a
    /// later flush (an API caller is streaming; see "Batching" in [`crate::driver::hold`]).
    /// `api_call`: the drain is an API call's. Called at the end of every drain, with the core
    /// held (exclusive or shared); must not block. An LND that writes later (the TCP LND frames transmits once the
    /// lock is released) tells the [`OutputHold`](crate::driver::OutputHold) itself.
    fn flush(
        &self,
        _node: &Arc<Shared>,
        _now: Time,
        _wakes: &mut Wakes,
        _hold: bool,
        _api_call: bool,
    ) -> Output {
        Output::None
    }

    /// A receive this LND delayed may proceed (`resume.action` is `Deliver` or `Discard`).
    /// Core locked; must not block.
    fn resume(
        &self,
        node: &Arc<Shared>,
        core: &mut Core,
        now: Time,
        resume: Resume,
        wakes: &mut Wakes,
    );

    /// Close the connections to `peer` (every connection when `None`), failing what they
    /// hold back to the core: the core gave up on that path or the NI's link went down
    /// ([`PathReset`](ulnet_proto::engine::PathReset)). Core locked; must not block.
    fn reset(
        &self,
        _node: &Arc<Shared>,
        _core: &mut Core,
        _now: Time,
        _peer: Option<ulnet_proto::addr::Nid>,
        _wakes: &mut Wakes,
    ) {
    }

    /// Called by the I/O loop on every turn, with no lock held: do due work, and say when to
    /// be called again (`None`: only when the doorbell rings).
    fn poll(&self, _node: &Arc<Shared>, _now: Time) -> Option<Time> {
        None
    }

    /// The node is shutting down (its core is already closed and its transmits failed); no
    /// lock held. Drop everything held and stop tasks.
    fn shutdown(&self, node: &Arc<Shared>, now: Time);

    /// socklnd's `conns_per_peer` in force on this NI; `None` for LNDs without it.
    fn conns_per_peer(&self) -> Option<u8> {
        None
    }

    /// Sets `conns_per_peer` for the peers this NI meets from now on (`lnetctl net set
    /// --conns-per-peer`); false for LNDs without it.
    fn set_conns_per_peer(&self, _value: ConnsPerPeer) -> bool {
        false
    }

    /// Sets the LND's timeout (socklnd's `sock_timeout`, `lnetctl net set --lnd-timeout`);
    /// false for LNDs without one.
    fn set_timeout(&self, _timeout: std::time::Duration) -> bool {
        false
    }
}
