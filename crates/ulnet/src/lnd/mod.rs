//! LNDs hosted by the runtime, behind one small trait.
//!
//! * **Loopback** (`0@lo`, and sends to our own NIDs) lives inside the core and never reaches
//!   this module.
//! * **mem** ([`mem`]): nodes of one process wired through a shared [`MemFabric`](mem::MemFabric)
//!   and the core's link model (latency, bandwidth, loss, partitions) on real time. The payload
//!   is copied once, from the sender's MD straight into the receiver's.
//! * **tcp** (socklnd): the slot below. Not in this build; `NodeBuilder` refuses `LndKind::Tcp`
//!   with [`BuildError::TcpUnavailable`](crate::BuildError::TcpUnavailable).
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
//! * Transmit: [`drain`](crate::driver::drain) records the transmit in `core.in_flight`, then
//!   calls [`Lnd::transmit`]. The LND later (or at once) calls
//!   [`Core::complete_send`] with a [`HealthStatus`](ulnet_proto::engine::HealthStatus); it
//!   reads the payload with `core.engine.tx_payload(tx)` while the core is locked (slices of
//!   MD memory, valid until the send completes).
//! * Receive: with the core locked, call `core.engine.handle_header(now, ni, peer_nid, &header)`.
//!   `Deliver`: read the payload into `core.engine.rx_segments_mut(rx)`, then
//!   [`Core::complete_recv`]. `Discard`: skip the bytes. `Delay`: record
//!   `core.delayed.insert(rx, ni)` and stop reading that connection; the answer comes back through
//!   [`Lnd::resume`]. `ProtocolError`: close the connection. Then call
//!   [`drain`](crate::driver::drain) before unlocking, and [`Wakes::finish`] after.
//! * Shutdown ([`crate::driver::finish`]): the core is marked closed first (API calls fail, and
//!   no new transmit or resume reaches an LND), then [`Lnd::shutdown`] runs with no lock held:
//!   stop accepting input, fail with [`Core::complete_recv`] every receive the core told the LND
//!   to fill (`Deliver`, including resumed ones), and stop tasks. Transmits the LND still holds
//!   need nothing: the runtime fails whatever remains in `core.in_flight` right after, and a
//!   later `complete_send` for them is ignored.
//!
//! # Slot for the TCP LND
//!
//! Add `mod tcp;` here with a `TcpLnd: Lnd`; give `LndSpec::Tcp` (in `node.rs`) the LND's
//! configuration (listen address, socklnd tunables) through `NodeBuilder::tcp_ni`, and construct
//! the `TcpLnd` in `NodeBuilder::build` where the `TcpUnavailable` arms are (they then go, with
//! the variant). The TCP LND:
//!
//! * spawns its acceptor and connection tasks in [`Lnd::start`] (`tokio::spawn` works: it runs
//!   inside the I/O thread's current-thread runtime), keeping a `Weak<Shared>` to reach the core;
//! * in [`Lnd::transmit`], queues `(tx, header)` on the peer's connection (creating it if
//!   needed) and rings the I/O thread with [`Wakes::ring`]; the connection's writer later locks
//!   the core, writes the header and the `tx_payload(tx)` slices with a non-blocking vectored
//!   write (keeping its position across partial writes), and calls `complete_send` when done;
//! * reads a header, then, under one short lock: `handle_header`, payload read straight into
//!   `rx_segments_mut(rx)` (non-blocking reads; finish partial payloads on later turns, locking
//!   again each time), `complete_recv`, `drain`; a `Delay` parks that connection's reader until
//!   [`Lnd::resume`] hands it the answer;
//! * tells the core about connections with `core.engine.handle_connection(now, ni, peer, up)`;
//! * uses [`Lnd::poll`] only if it wants the I/O loop's timer (its own tasks can use tokio's).

pub(crate) mod mem;

use std::fmt;
use std::sync::Arc;

use ulnet_proto::engine::{Resume, Transmit};
use ulnet_proto::time::Time;

use crate::driver::{Core, Shared, Wakes};

/// One LND instance, serving one NI.
pub(crate) trait Lnd: Send + Sync + fmt::Debug {
    /// Called once on the I/O thread, inside its runtime, before the loop starts: spawn tasks.
    fn start(&self, _node: &Arc<Shared>) {}

    /// Take charge of one transmit (already in `core.in_flight`). Core locked; must not block.
    fn transmit(
        &self,
        node: &Arc<Shared>,
        core: &mut Core,
        now: Time,
        transmit: Transmit,
        wakes: &mut Wakes,
    );

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

    /// Called by the I/O loop on every turn, with no lock held: do due work, and say when to
    /// be called again (`None`: only when the doorbell rings).
    fn poll(&self, _node: &Arc<Shared>, _now: Time) -> Option<Time> {
        None
    }

    /// The node is shutting down (its core is already closed and its transmits failed); no
    /// lock held. Drop everything held and stop tasks.
    fn shutdown(&self, node: &Arc<Shared>, now: Time);
}
