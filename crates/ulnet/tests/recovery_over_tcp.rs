//! A TCP NI recovers by pinging its own NID through the TCP LND, as the kernel's does: the
//! LND connects to itself (socklnd allows this loopback connection, lustre:
//! lnet/klnds/socklnd/socklnd.c `ksocknal_create_conn()` "unless this is a loopback
//! connection", and keeps both ends, `ksocknal_incr_conn_count()` "two in case of loopback").

#![allow(clippy::unwrap_used)]

use std::net::TcpListener;
use std::time::{Duration, Instant};

use ulnet::{AcceptPolicy, Node, SocklndTunables};

#[test]
fn a_tcp_ni_at_zero_health_recovers_by_pinging_itself() {
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let tunables =
        SocklndTunables { accept_port: port, accept: AcceptPolicy::All, ..Default::default() };
    let nid = "127.61.0.1@tcp".parse().unwrap();
    let node = Node::builder().tcp_ni(nid, tunables).build().unwrap();
    node.set_ni_health(Some(nid), 0).unwrap();
    let health = |node: &Node| node.stats().nis.iter().find(|ni| ni.nid == nid).unwrap().health;
    assert_eq!(health(&node).health_value, 0);
    let deadline = Instant::now() + Duration::from_secs(60);
    while health(&node).health_value < 1000 {
        assert!(
            Instant::now() < deadline,
            "no recovery: {:?} {:?}",
            health(&node),
            node.tcp_stats()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let stats = node.tcp_stats();
    // The recovery ping went over a connection to ourselves: both ends are ours.
    assert!(stats.conns_dialled >= 1 && stats.conns_accepted >= 1, "{stats:?}");
    node.shutdown();
}
