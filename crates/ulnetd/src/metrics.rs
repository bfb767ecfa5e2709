//! `ulnetd --metrics ADDR`: the node's statistics for Prometheus on `http://ADDR/metrics`.
//!
//! Each scrape takes one snapshot of the node ([`ulnet::Node::stats`], the same numbers
//! `ulnetctl stats show`, `net show -v` and `peer show -v` print) and encodes it
//! ([`exposition`]: names, labels, histogram buckets); [`http`] is the bounded HTTP/1.1
//! responder, on threads of its own, away from the node's I/O thread and the control
//! socket. A node rebuilt or unconfigured by `ulnetctl` is followed: the scrape reads
//! whichever node runs then (`ulnet_lnet_up 0` while none does). Decision 0024.

pub mod exposition;
pub mod http;

use std::net::TcpListener;
use std::sync::Arc;

pub use exposition::{CONTENT_TYPE, MAX_PEER_NIS, render};
pub use http::{MetricsServer, Source};

use crate::live::LiveNode;

/// Serves `live`'s metrics on `listener`.
pub fn serve(listener: TcpListener, live: Arc<LiveNode>) -> std::io::Result<MetricsServer> {
    let source: Arc<Source> = Arc::new(move || {
        let stats = live.node().map(|node| node.stats());
        let selftest = live.selftest_lock_stats();
        render(stats.as_ref(), selftest.as_ref())
            .map_err(|error| format!("cannot encode the metrics: {error}"))
    });
    MetricsServer::start(listener, CONTENT_TYPE, source)
}
