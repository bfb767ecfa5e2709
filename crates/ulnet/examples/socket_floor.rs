//! The kernel-TCP floor under a selftest RPC pattern: how many RPCs per second two plain
//! epoll loops reach when they exchange exactly the frames an lnet_selftest RPC puts on the
//! wire, with no LNet at all (no matching, no MDs, no events, no credits).
//!
//! ```text
//! cargo run --release -p ulnet --example socket_floor -- [brw|ping] [--concurrency N]
//!     [--seconds S] [--pin]
//! ```
//!
//! Two threads, "client" and "server" (CPUs 0 and 1 with `--pin`), joined by two loopback TCP
//! connections with `TCP_NODELAY`, as socklnd's typed connections: a control connection both
//! ways and a bulk connection from client to server. Per RPC, with the sizes of a socklnd V3
//! frame (24-byte socklnd header, 72-byte LNet header):
//!
//! * `brw` (write, 4 KiB): request PUT (96 + 160 B, control) → server's GET (96 B, control) →
//!   client's REPLY (96 + 4096 B, bulk) → reply PUT (96 + 160 B, control);
//! * `ping`: request PUT → reply PUT.
//!
//! Each loop reads every readable socket until it would block, answers every whole frame, then
//! writes each socket's answers in one `write`, the fewest system calls such a loop can make.
//! The client keeps `N` RPCs in flight (default 8) and prints RPCs per second over `S` seconds
//! (default 3) after a 1 s warm-up. scripts/bench-selftest.sh prints it next to ulst's rate, so
//! the share of an RPC's cost that is the kernel's shows in the same run.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rustix::buffer::spare_capacity;
use rustix::event::epoll;

const HEADER: usize = 24 + 72;
const REQUEST: usize = HEADER + 160;
const GET: usize = HEADER;
const BULK: usize = 4096;

/// Frame kinds, in the first byte of each frame (the rest is padding of the real size).
const KIND_REQUEST: u8 = 1;
const KIND_GET: u8 = 2;
const KIND_REPLY_BULK: u8 = 3;
const KIND_REPLY: u8 = 4;

fn frame_len(kind: u8) -> Option<usize> {
    match kind {
        KIND_REQUEST | KIND_REPLY => Some(REQUEST),
        KIND_GET => Some(GET),
        KIND_REPLY_BULK => Some(HEADER + BULK),
        _ => None,
    }
}

fn frame(kind: u8, out: &mut Vec<u8>) {
    let start = out.len();
    out.resize(start + frame_len(kind).unwrap_or(0), 0);
    if let Some(first) = out.get_mut(start) {
        *first = kind;
    }
}

/// One connection's unparsed input and unwritten output.
struct Link {
    stream: TcpStream,
    input: Vec<u8>,
    output: Vec<u8>,
}

impl Link {
    fn new(stream: TcpStream) -> io::Result<Self> {
        stream.set_nodelay(true)?;
        stream.set_nonblocking(true)?;
        Ok(Self { stream, input: Vec::new(), output: Vec::new() })
    }

    /// Reads until the socket would block; false once the peer has closed.
    fn read_all(&mut self, scratch: &mut [u8]) -> io::Result<bool> {
        loop {
            match self.stream.read(scratch) {
                Ok(0) => return Ok(false),
                Ok(read) => self.input.extend_from_slice(scratch.get(..read).unwrap_or(&[])),
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return Ok(true),
                Err(error) => return Err(error),
            }
        }
    }

    /// Whole frames' kinds, consumed from the input.
    fn frames(&mut self) -> io::Result<Vec<u8>> {
        let mut kinds = Vec::new();
        let mut at = 0;
        while let Some(&kind) = self.input.get(at) {
            let len = frame_len(kind).ok_or_else(|| io::Error::other("unknown frame"))?;
            if self.input.len() - at < len {
                break;
            }
            kinds.push(kind);
            at += len;
        }
        self.input.drain(..at);
        Ok(kinds)
    }

    /// Writes all output (retrying while the socket is full: the peer is draining it).
    fn flush(&mut self) -> io::Result<()> {
        let mut at = 0;
        while at < self.output.len() {
            match self.stream.write(self.output.get(at..).unwrap_or(&[])) {
                Ok(written) => at += written,
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => std::thread::yield_now(),
                Err(error) => return Err(error),
            }
        }
        self.output.clear();
        Ok(())
    }
}

/// One side's loop over its two links (0: control, 1: bulk). `answer` turns an arriving frame
/// into frames to send, as (link, kind) pairs.
fn run_loop(
    mut links: [Link; 2],
    stop: &AtomicBool,
    mut answer: impl FnMut(u8, &mut Vec<(usize, u8)>),
    start: &[(usize, u8)],
) -> io::Result<()> {
    let poller = epoll::create(epoll::CreateFlags::CLOEXEC)?;
    for (index, link) in links.iter().enumerate() {
        epoll::add(
            &poller,
            link.stream.as_fd(),
            epoll::EventData::new_u64(index as u64),
            epoll::EventFlags::IN | epoll::EventFlags::ET,
        )?;
    }
    for &(link, kind) in start {
        if let Some(link) = links.get_mut(link) {
            frame(kind, &mut link.output);
        }
    }
    let mut scratch = vec![0u8; 64 << 10];
    let mut sends = Vec::new();
    let mut events: Vec<epoll::Event> = Vec::with_capacity(4);
    while !stop.load(Ordering::Relaxed) {
        for link in &mut links {
            link.flush()?;
        }
        events.clear();
        let timeout = rustix::event::Timespec { tv_sec: 0, tv_nsec: 100_000_000 };
        epoll::wait(&poller, spare_capacity(&mut events), Some(&timeout))?;
        for event in &events {
            let index = event.data.u64() as usize;
            let Some(link) = links.get_mut(index) else { continue };
            if !link.read_all(&mut scratch)? {
                return Ok(());
            }
            for kind in link.frames()? {
                answer(kind, &mut sends);
            }
        }
        for (link, kind) in sends.drain(..) {
            if let Some(link) = links.get_mut(link) {
                frame(kind, &mut link.output);
            }
        }
    }
    Ok(())
}

fn pin(cpu: usize) {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    let _ = rustix::thread::sched_setaffinity(None, &set);
}

fn main() -> io::Result<()> {
    let mut brw = true;
    let mut concurrency = 8usize;
    let mut seconds = 3u64;
    let mut pinned = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "brw" => brw = true,
            "ping" => brw = false,
            "--pin" => pinned = true,
            "--concurrency" => concurrency = args.next().and_then(|v| v.parse().ok()).unwrap_or(8),
            "--seconds" => seconds = args.next().and_then(|v| v.parse().ok()).unwrap_or(3),
            _ => {
                eprintln!("usage: socket_floor [brw|ping] [--concurrency N] [--seconds S] [--pin]");
                std::process::exit(2);
            }
        }
    }
    let listener = TcpListener::bind("127.0.0.3:0")?;
    let address = listener.local_addr()?;
    let client_control = TcpStream::connect(address)?;
    let (server_control, _) = listener.accept()?;
    let client_bulk = TcpStream::connect(address)?;
    let (server_bulk, _) = listener.accept()?;

    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let server = {
        let stop = Arc::clone(&stop);
        let links = [Link::new(server_control)?, Link::new(server_bulk)?];
        std::thread::spawn(move || {
            if pinned {
                pin(1);
            }
            run_loop(
                links,
                &stop,
                |kind, sends| match kind {
                    KIND_REQUEST if brw => sends.push((0, KIND_GET)),
                    KIND_REQUEST | KIND_REPLY_BULK => sends.push((0, KIND_REPLY)),
                    _ => {}
                },
                &[],
            )
        })
    };
    let client = {
        let stop = Arc::clone(&stop);
        let done = Arc::clone(&done);
        let links = [Link::new(client_control)?, Link::new(client_bulk)?];
        std::thread::spawn(move || {
            if pinned {
                pin(0);
            }
            let start = vec![(0, KIND_REQUEST); concurrency];
            run_loop(
                links,
                &stop,
                |kind, sends| match kind {
                    KIND_GET => sends.push((1, KIND_REPLY_BULK)),
                    KIND_REPLY => {
                        done.fetch_add(1, Ordering::Relaxed);
                        sends.push((0, KIND_REQUEST));
                    }
                    _ => {}
                },
                &start,
            )
        })
    };
    std::thread::sleep(Duration::from_secs(1));
    let (first, began) = (done.load(Ordering::Relaxed), Instant::now());
    std::thread::sleep(Duration::from_secs(seconds));
    let rpcs = done.load(Ordering::Relaxed) - first;
    let rate = rpcs as f64 / began.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for side in [client, server] {
        side.join().map_err(|_| io::Error::other("a loop panicked"))??;
    }
    println!("{rate:.0}");
    Ok(())
}
