//! ulnet-delayline: a userspace delay line between two TUN devices, for real runs over a long
//! fat link on a machine whose kernel has no `tc netem` (issue 22, item 6).
//!
//! Every IP packet read from one device is written to the other after the [`link`] model says
//! so: random loss, a drop-tail queue in front of a rate limit, then a fixed delay, each
//! direction on its own (mahimahi's `mm-loss`, `mm-link`, `mm-delay`). Put each device in a
//! network namespace with an address, and the two namespaces talk over a link with real
//! latency: [`line`](mod@line) runs it over any pair of [`line::Port`]s, the binary over TUN
//! devices.

pub mod line;
pub mod link;
