//! PUT throughput and message rate between two processes over the TCP LND, in the manner of
//! iperf3's server and client (`scripts/bench-tcp.sh` runs it next to iperf3).
//!
//! ```text
//! tcp_perf server <ip> <port>
//! tcp_perf client <ip> <server-ip> <port> [--size BYTES] [--inflight N] [--time SECONDS]
//! ```
//!
//! The server takes any number of PUTs into one 1 MiB buffer on portal 20 (no events). The
//! client keeps `--inflight` PUTs of `--size` bytes (with ACK) outstanding for `--time` seconds
//! and prints one line: `size=.. inflight=.. puts=.. seconds=.. puts_per_sec=.. bytes_per_sec=..
//! gbit_per_sec=..`. Both accept any source port (`accept=all`), so no root is needed.

use std::net::Ipv4Addr;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use ulnet::*;

const PORTAL: u32 = 20;
const TIMEOUT: Duration = Duration::from_secs(30);

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
     [--size BYTES] [--inflight N] [--time SECONDS]"
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
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

fn client(args: &[String]) -> Result<(), String> {
    let [ip, server_ip, port, options @ ..] = args else { return Err(usage()) };
    let (mut size, mut inflight, mut seconds) = (1usize << 20, 8usize, 5u64);
    let mut options = options.iter();
    while let Some(option) = options.next() {
        let value = options.next().ok_or_else(usage)?;
        let number: u64 = value.parse().map_err(|e| format!("bad {option} {value}: {e}"))?;
        match option.as_str() {
            "--size" => size = number as usize,
            "--inflight" => inflight = (number as usize).max(1),
            "--time" => seconds = number,
            _ => return Err(usage()),
        }
    }
    let node = node(ip, port)?;
    let server_ip: Ipv4Addr = server_ip.parse().map_err(|e| format!("bad IP: {e}"))?;
    let target = ProcessId::new(Nid::ipv4(Net::TCP, server_ip), LNET_PID_LUSTRE);
    let queue = node.event_queue(4 * inflight + 4);
    let source = MdSpec::new(Memory::new(vec![0xa5; size])).threshold(Threshold::Infinite);
    let md =
        node.md_bind(source, UnlinkMode::Retain, Some(&queue)).map_err(|e| e.error.to_string())?;
    let request = PutRequest {
        md,
        ack: true,
        target,
        portal: PORTAL,
        match_bits: 0,
        remote_offset: 0,
        hdr_data: 0,
        source: None,
    };
    let put = || node.put(&request).map_err(|e| e.to_string());
    // Waits for the next ACK; SEND events only say the bytes left.
    let ack = || -> Result<(), String> {
        loop {
            let event = queue.recv_timeout(TIMEOUT).map_err(|e| e.to_string())?;
            if event.status != EventStatus::Ok {
                return Err(format!("{:?} event failed: {:?}", event.kind, event.status));
            }
            if event.kind == EventKind::Ack {
                return Ok(());
            }
        }
    };
    // Warm-up: connections, discovery.
    for _ in 0..inflight {
        put()?;
        ack()?;
    }
    let duration = Duration::from_secs(seconds);
    let start = Instant::now();
    let (mut outstanding, mut done) = (0usize, 0u64);
    while start.elapsed() < duration {
        while outstanding < inflight {
            put()?;
            outstanding += 1;
        }
        ack()?;
        outstanding -= 1;
        done += 1;
    }
    let elapsed = start.elapsed().as_secs_f64();
    for _ in 0..outstanding {
        ack()?;
    }
    let rate = done as f64 / elapsed;
    let bytes = rate * size as f64;
    println!(
        "size={size} inflight={inflight} puts={done} seconds={elapsed:.3} puts_per_sec={rate:.0} \
         bytes_per_sec={bytes:.0} gbit_per_sec={:.3}",
        bytes * 8.0 / 1e9
    );
    Ok(())
}
