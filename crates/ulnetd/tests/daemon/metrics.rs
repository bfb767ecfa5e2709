//! `ulnetd --metrics`: the Prometheus endpoint scraped while two daemons exchange pings and
//! an lst batch runs between them over TCP. Each scrape must parse as the text format
//! (`promtext`), the counters must grow between scrapes and the latency histograms fill.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use ulnet::{AcceptPolicy, Node, SocklndTunables};
use ulnet_selftest::Console;
use ulnet_selftest::cli::{self, Env};

use crate::promtext::{self, Exposition};
use crate::support::{Process, SIGTERM};

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn daemon(nid: &str, port: u16, extra: &[&str]) -> Process {
    let config = format!(
        "global:\n    accept_port: {port}\n    accept: all\n\
         net:\n    - net type: tcp\n      local NI(s):\n        - nid: {nid}\n"
    );
    let process = Process::spawn(Some(&config), extra);
    assert!(process.ready.is_some(), "{nid} did not start: {}", process.log());
    process
}

/// The metrics address the ready line names.
fn metrics_address(process: &Process) -> SocketAddr {
    let ready = process.ready.as_deref().unwrap();
    let (_, address) = ready.rsplit_once(" metrics ").expect("a metrics address");
    address.parse().unwrap()
}

fn scrape(address: SocketAddr) -> Exposition {
    let mut stream = TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(crate::HANG_GUARD)).unwrap();
    stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n").unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert!(head.contains("Content-Type: text/plain; version=0.0.4; charset=utf-8"), "{head}");
    assert!(head.contains(&format!("Content-Length: {}\r\n", body.len())), "{head}");
    promtext::parse(body).unwrap_or_else(|error| panic!("{error}\n{body}"))
}

fn lst(console: &Console, line: &str) -> String {
    let env = Env { session: Some(std::process::id().to_string()), features: None };
    let (status, stdout, stderr) = cli::run_captured(line, &env, console, false);
    assert!(status == 0 && stderr.is_empty(), "{line}: status {status}: {stdout}{stderr}");
    stdout
}

#[test]
fn counters_grow_and_histograms_fill_between_scrapes() {
    let port = free_port();
    let (client_nid, server_nid) = ("127.57.10.2@tcp", "127.57.10.3@tcp");
    let mut client = daemon(client_nid, port, &["--metrics", "127.0.0.1:0"]);
    let mut server = daemon(server_nid, port, &[]);
    let address = metrics_address(&client);

    let before = scrape(address);
    assert_eq!(before.sum("ulnet_lnet_up", &[]), 1.0);
    for family in [
        "ulnet_messages_total",
        "ulnet_ni_messages_total",
        "ulnet_ni_bytes_total",
        "ulnet_ni_health_value",
        "ulnet_ni_tx_credits",
        "ulnet_health_events_total",
    ] {
        assert!(before.families.contains_key(family), "{family} missing");
    }
    assert_eq!(before.families["ulnet_ni_messages_total"].kind, "counter");
    let client_ni = [("nid", client_nid)];
    let health = before.sum("ulnet_ni_health_value", &client_ni);
    assert_eq!(health, 1000.0);

    // Pings: GETs from the client, timed as get_rtt on its NI and on the server's peer NI.
    for _ in 0..3 {
        let run = client.ulnetctl(&["ping", server_nid]);
        assert_eq!(run.code, 0, "{}", run.transcript());
    }
    let after_pings = scrape(address);
    let sent = |scrape: &Exposition| {
        scrape.sum("ulnet_ni_messages_total", &[("nid", client_nid), ("direction", "sent")])
    };
    assert!(sent(&after_pings) >= sent(&before) + 3.0, "sent counts grow");
    let peer = [("peer", server_nid), ("nid", server_nid)];
    let rtt = |scrape: &Exposition| {
        let labels = [peer[0], peer[1], ("op", "get_rtt")];
        scrape.sum("ulnet_peer_ni_latency_seconds_count", &labels)
    };
    assert!(rtt(&after_pings) >= 3.0, "the peer NI's get_rtt histogram fills");
    let labels = [peer[0], peer[1], ("op", "get_rtt"), ("le", "+Inf")];
    assert_eq!(after_pings.sum("ulnet_peer_ni_latency_seconds_bucket", &labels), rtt(&after_pings));
    assert!(after_pings.sum("ulnet_peer_ni_latency_seconds_sum", &peer) > 0.0);
    assert_eq!(after_pings.sum("ulnet_peer_ni_health_value", &peer), 1000.0);
    // The pings opened connections to the server, counted under the partitions running them.
    assert_eq!(before.sum("ulnet_connections", &[]), 0.0);
    assert!(after_pings.sum("ulnet_connections", &[]) >= 1.0, "connections are counted");

    // An lst batch between the two daemons: bulk PUTs and GETs through the client's NI.
    let tunables =
        SocklndTunables { accept_port: port, accept: AcceptPolicy::All, ..Default::default() };
    let console_node =
        Node::builder().tcp_ni("127.57.10.100@tcp".parse().unwrap(), tunables).build().unwrap();
    let console = Console::new(&console_node).unwrap();
    lst(&console, "new_session metrics");
    lst(&console, &format!("add_group c {client_nid}"));
    lst(&console, &format!("add_group s {server_nid}"));
    lst(&console, "add_batch bulk");
    lst(
        &console,
        "add_test --batch bulk --loop 30 --concurrency 4 --from c --to s brw write size=64K",
    );
    lst(
        &console,
        "add_test --batch bulk --loop 30 --concurrency 4 --from c --to s brw read size=64K",
    );
    lst(&console, "run bulk");
    // Scraped while the batch runs, then after it.
    let during = scrape(address);
    let bytes = |scrape: &Exposition| {
        scrape.sum("ulnet_peer_ni_bytes_total", &[("peer", server_nid), ("direction", "sent")])
            + scrape.sum(
                "ulnet_peer_ni_bytes_total",
                &[("peer", server_nid), ("direction", "received")],
            )
    };
    let mut finished = false;
    for _ in 0..600 {
        let out = lst(&console, "query bulk");
        if out.ends_with("is stopped\n") {
            finished = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(finished, "the batch ends");
    let after = scrape(address);
    assert!(bytes(&after) > bytes(&after_pings) + 30.0 * 65536.0, "bulk bytes counted");
    assert!(bytes(&after) >= bytes(&during));
    assert!(sent(&after) > sent(&during) || sent(&during) > sent(&after_pings));
    let histograms: f64 = ["put_egress", "get_rtt", "put_ack"]
        .iter()
        .map(|op| after.sum("ulnet_ni_latency_seconds_count", &[("nid", client_nid), ("op", op)]))
        .sum();
    assert!(histograms > rtt(&after_pings), "the NI's histograms fill with the batch");
    lst(&console, "end_session");
    drop(console);
    console_node.shutdown();

    assert_eq!(client.signal_and_wait(SIGTERM), 0, "{}", client.log());
    assert_eq!(server.signal_and_wait(SIGTERM), 0, "{}", server.log());
}

#[test]
fn a_taken_metrics_address_stops_the_start() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap().to_string();
    let mut process =
        Process::spawn(Some("global:\n    retry_count: 1\n"), &["--metrics", &address]);
    assert!(process.ready.is_none());
    assert_eq!(process.wait(), 73, "{}", process.log());
    assert!(process.log().contains("cannot listen for metrics"), "{}", process.log());
    assert!(!process.socket.exists(), "no control socket was made");
}
