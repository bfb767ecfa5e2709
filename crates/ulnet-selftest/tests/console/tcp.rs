//! Over the TCP LND on loopback addresses: the typical script, and the wire as tshark sees it.

use ulnet::{AcceptPolicy, Node, SocklndTunables};
use ulnet_selftest::{Console, SelftestService};

use crate::common::ulst_with;

/// A port of our own for this test binary's nodes (every NI of a network shares it).
fn port(offset: u16) -> u16 {
    20000 + (std::process::id() % 20000) as u16 + offset
}

fn tcp_node(address: &str, port: u16) -> Node {
    let tunables =
        SocklndTunables { accept_port: port, accept: AcceptPolicy::All, ..Default::default() };
    Node::builder().tcp_ni(format!("{address}@tcp").parse().unwrap(), tunables).build().unwrap()
}

#[test]
fn typical_script_over_tcp() {
    let port = port(0);
    let a = tcp_node("127.0.0.2", port);
    let b = tcp_node("127.0.0.3", port);
    let _services = [SelftestService::start(&a).unwrap(), SelftestService::start(&b).unwrap()];
    let console_node = tcp_node("127.0.0.4", port);
    let console = Console::new(&console_node).unwrap();
    let ok = |line: &str| {
        let (rc, out, err) = ulst_with(&console, line);
        assert_eq!((rc, err.as_str()), (0, ""), "{line}: {out}");
        out
    };
    ok("new_session tcp");
    assert_eq!(ok("add_group c 127.0.0.2@tcp"), "127.0.0.2@tcp are added to session\n");
    assert_eq!(ok("add_group s 127.0.0.3@tcp"), "127.0.0.3@tcp are added to session\n");
    ok("add_batch b");
    for test in [
        "brw write size=1M check=full",
        "brw read size=1M check=full",
        "brw write size=4k check=simple",
        "ping",
    ] {
        ok(&format!("add_test --batch b --loop 100 --concurrency 4 --from c --to s {test}"));
    }
    ok("run b");
    let stat = ok("stat --delay 1 --count 1 s");
    assert!(stat.contains("[LNet Bandwidth of s]"), "{stat}");
    assert!(ok("stop b").ends_with("Batch is stopped\n"));
    assert_eq!(
        ok("show_error c s"),
        "c:\nTotal 0 error nodes in c\ns:\nTotal 0 error nodes in s\n"
    );
    ok("end_session");
}
