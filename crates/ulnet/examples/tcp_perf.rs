//! PUT throughput and message rate between two processes over the TCP LND, in the manner of
//! iperf3's server and client (`scripts/bench-tcp.sh` runs it next to iperf3).
//!
//! ```text
//! tcp_perf server <ip> <port>
//! tcp_perf client <ip> <server-ip> <port> [--size BYTES] [--inflight N] [--time SECONDS]
//!                 [--no-ack | --ping]
//! ```
//!
//! The server takes any number of PUTs into one 1 MiB buffer on portal 20 (no events). The
//! client keeps `--inflight` PUTs of `--size` bytes (with ACK) outstanding for `--time` seconds
//! and prints one line: `size=.. inflight=.. puts=.. seconds=.. puts_per_sec=.. bytes_per_sec=..
//! gbit_per_sec=.. rtt_us=..` (`rtt_us`: inflight / rate, the round trip when one is in flight).
//! Both accept any source port (`accept=all`), so no root is needed.
//!
//! `--no-ack`: the PUTs ask for no ACK, and a PUT stops counting as in flight once its SEND
//! event says it left. The client's rate then includes what still sits in socket buffers, so the
//! server counts what it received: it samples the node's received-message count every 10 ms and,
//! whenever 500 ms pass without a new message, prints `received=.. seconds=.. received_per_sec=..
//! longest_gap_ms=..`: the messages since the first sample that saw traffic, over the time from
//! that sample to the last that saw one, and the longest pause in between. Start one server per
//! run: the figures cover the server's lifetime.
//!
//! `--ping`: `Node::ping` (a GET of the server's ping buffer, as `lnetctl ping`) back to back for
//! `--time` seconds, one at a time; prints `pings=.. seconds=.. pings_per_sec=.. rtt_us=..`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)] // Test, bench and example code outside #[test] functions.

use std::net::Ipv4Addr;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use ulnet::*;

#[path = "../tests/support/requests.rs"]
mod requests;
use requests::acked_put;

const PORTAL: u32 = 20;
const TIMEOUT: Duration = Duration::from_secs(30);
/// How often the server samples its received-message count.
const SAMPLE_INTERVAL: Duration = Duration::from_millis(10);
/// Quiet time after which the server reports what it received so far.
const QUIET: Duration = Duration::from_millis(500);

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("server") => server(&args[1..]),
        Some("client") => client(&args[1..]),
        _ => Err(usage()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("tcp_perf: {message}");
            ExitCode::FAILURE
        }
    }
}

fn usage() -> String {
    "usage: tcp_perf server <ip> <port> | tcp_perf client <ip> <server-ip> <port> \
     [--size BYTES] [--inflight N] [--time SECONDS] [--no-ack | --ping]"
        .to_owned()
}

fn node(ip: &str, port: &str) -> Result<Node, String> {
    let ip: Ipv4Addr = ip.parse().map_err(|e| format!("bad IP {ip}: {e}"))?;
    let port: u16 = port.parse().map_err(|e| format!("bad port {port}: {e}"))?;
    let tunables =
        SocklndTunables { accept_port: port, accept: AcceptPolicy::All, ..Default::default() };
    Node::builder()
        .tcp_ni(Nid::ipv4(Net::TCP, ip), tunables)
        .build()
        .map_err(|e| format!("cannot start the node: {e}"))
}

fn server(args: &[String]) -> Result<(), String> {
    let [ip, port] = args else { return Err(usage()) };
    let node = node(ip, port)?;
    let me = node
        .me_attach(PORTAL, ProcessId::ANY, 0, u64::MAX, UnlinkMode::Retain, InsertPosition::After)
        .map_err(|e| e.to_string())?;
    let sink = MdSpec::new(Memory::new(vec![0; 1 << 20]))
        .options(MdOptions::OP_PUT | MdOptions::MANAGE_REMOTE | MdOptions::TRUNCATE)
        .threshold(Threshold::Infinite);
    node.md_attach(me, sink, UnlinkMode::Retain, None).map_err(|e| e.error.to_string())?;
    println!("ready");
    // Received messages since the first, for `--no-ack` clients (see the module comment).
    let received = || node.stats().global.recv_count;
    let mut last = received();
    // (time, count) of the first sample that saw traffic.
    let mut first: Option<(Instant, u64)> = None;
    let (mut last_change, mut longest_gap, mut reported) = (Instant::now(), Duration::ZERO, true);
    loop {
        std::thread::sleep(SAMPLE_INTERVAL);
        let now = Instant::now();
        let count = received();
        if count != last {
            match first {
                None => first = Some((now, count)),
                Some(_) => longest_gap = longest_gap.max(now.duration_since(last_change)),
            }
            last = count;
            last_change = now;
            reported = false;
        } else if let (Some((start, start_count)), false) = (first, reported) {
            if now.duration_since(last_change) >= QUIET {
                let seconds = last_change.duration_since(start).as_secs_f64();
                let messages = last - start_count;
                let rate = if seconds > 0.0 { messages as f64 / seconds } else { 0.0 };
                println!(
                    "received={messages} seconds={seconds:.3} received_per_sec={rate:.0} \
                     longest_gap_ms={}",
                    longest_gap.as_millis()
                );
                reported = true;
            }
        }
    }
}

fn client(args: &[String]) -> Result<(), String> {
    let [ip, server_ip, port, options @ ..] = args else { return Err(usage()) };
    let (mut size, mut inflight, mut seconds) = (1usize << 20, 8usize, 5u64);
    let (mut ack, mut ping) = (true, false);
    let mut options = options.iter();
    while let Some(option) = options.next() {
        match option.as_str() {
            "--no-ack" => ack = false,
            "--ping" => ping = true,
            "--size" | "--inflight" | "--time" => {
                let value = options.next().ok_or_else(usage)?;
                let number: u64 =
                    value.parse().map_err(|e| format!("bad {option} {value}: {e}"))?;
                match option.as_str() {
                    "--size" => size = number as usize,
                    "--inflight" => inflight = (number as usize).max(1),
                    _ => seconds = number,
                }
            }
            _ => return Err(usage()),
        }
    }
    let node = node(ip, port)?;
    let server_ip: Ipv4Addr = server_ip.parse().map_err(|e| format!("bad IP: {e}"))?;
    let target = ProcessId::new(Nid::ipv4(Net::TCP, server_ip), LNET_PID_LUSTRE);
    let duration = Duration::from_secs(seconds);
    if ping {
        return ping_loop(&node, target, duration);
    }
    let queue = node.event_queue(4 * inflight + 4);
    let source = MdSpec::new(Memory::new(vec![0xa5; size])).threshold(Threshold::Infinite);
    let md =
        node.md_bind(source, UnlinkMode::Retain, Some(&queue)).map_err(|e| e.error.to_string())?;
    let mut request = acked_put(md, target, PORTAL);
    let put = |request: &PutRequest| node.put(request).map_err(|e| e.to_string());
    // Waits for the next event of `kind` (ACK: the PUT arrived; SEND: its bytes left).
    let wait = |kind: EventKind| -> Result<(), String> {
        loop {
            let event = queue.recv_timeout(TIMEOUT).map_err(|e| e.to_string())?;
            if event.status != EventStatus::Ok {
                return Err(format!("{:?} event failed: {:?}", event.kind, event.status));
            }
            if event.kind == kind {
                return Ok(());
            }
        }
    };
    // Warm-up with ACKs whatever the mode: connections, discovery.
    for _ in 0..inflight {
        put(&request)?;
        wait(EventKind::Ack)?;
    }
    request.ack = ack;
    let done_kind = if ack { EventKind::Ack } else { EventKind::Send };
    let start = Instant::now();
    let (mut outstanding, mut done) = (0usize, 0u64);
    while start.elapsed() < duration {
        while outstanding < inflight {
            put(&request)?;
            outstanding += 1;
        }
        wait(done_kind)?;
        outstanding -= 1;
        done += 1;
    }
    let elapsed = start.elapsed().as_secs_f64();
    for _ in 0..outstanding {
        wait(done_kind)?;
    }
    let rate = done as f64 / elapsed;
    let bytes = rate * size as f64;
    println!(
        "size={size} inflight={inflight} ack={ack} puts={done} seconds={elapsed:.3} \
         puts_per_sec={rate:.0} bytes_per_sec={bytes:.0} gbit_per_sec={:.3} rtt_us={:.2}",
        bytes * 8.0 / 1e9,
        inflight as f64 * 1e6 / rate
    );
    Ok(())
}

/// `--ping`: back-to-back pings, one at a time.
fn ping_loop(node: &Node, target: ProcessId, duration: Duration) -> Result<(), String> {
    let ping = || node.ping(target, TIMEOUT, None).map(drop).map_err(|e| e.to_string());
    // Warm-up: the connections.
    for _ in 0..10 {
        ping()?;
    }
    let start = Instant::now();
    let mut done = 0u64;
    while start.elapsed() < duration {
        ping()?;
        done += 1;
    }
    let elapsed = start.elapsed().as_secs_f64();
    let rate = done as f64 / elapsed;
    println!("pings={done} seconds={elapsed:.3} pings_per_sec={rate:.0} rtt_us={:.2}", 1e6 / rate);
    Ok(())
}
