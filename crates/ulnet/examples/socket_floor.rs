//! The kernel-TCP floor under a selftest RPC pattern: how many RPCs per second two plain
//! epoll loops reach when they exchange exactly the frames an lnet_selftest RPC puts on the
//! wire, with no LNet at all (no matching, no MDs, no events, no credits).
//!
//! ```text
//! cargo run --release -p ulnet --example socket_floor -- [brw|read|ping] [--size BYTES]
//!     [--concurrency N] [--seconds S] [--pin]
//! ```
//!
//! Two threads, "client" and "server" (CPUs 0 and 1 with `--pin`), joined by two loopback TCP
//! connections with `TCP_NODELAY`, as socklnd's typed connections: a control connection and a
//! bulk connection. Per RPC, with the sizes of a socklnd V3 frame (24-byte socklnd header,
//! 72-byte LNet header) and a bulk of `--size` bytes (4 KiB by default; `k`/`M` suffixes):
//!
//! * `brw` (write): request PUT (96 + 160 B, control) → server's GET (96 B, control) →
//!   client's REPLY (96 B + bulk, bulk connection) → reply PUT (96 + 160 B, control);
//! * `read`: request PUT → server's PUT (96 B + bulk, bulk connection) and reply PUT (control);
//!   the RPC ends when the client has both;
//! * `ping`: request PUT → reply PUT.
//!
//! Each loop reads every readable socket until it would block, straight into one buffer per
//! connection (the one copy any receiver makes), answers every whole frame, then writes each
//! socket's answers in one `writev` from prebuilt frames (no copy in user space): the fewest
//! system calls and copies such a loop can make. The client keeps `N` RPCs in flight (default
//! 8) and prints RPCs per second over `S` seconds (default 3) after a 1 s warm-up.
//! scripts/bench-selftest.sh prints it next to ulst's rate, so the share of an RPC's cost that
//! is the kernel's shows in the same run; at 1 MiB and concurrency 1 it is the ceiling any
//! LNet over kernel TCP can reach on this host against `iperf3`.

use std::collections::VecDeque;
use std::io::{self, IoSlice, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rustix::buffer::spare_capacity;
use rustix::event::epoll;

const HEADER: usize = 24 + 72;
const SMALL: usize = HEADER + 160;
/// Buffer space offered to each read when no long frame is pending.
const READ_CHUNK: usize = 64 << 10;

/// Frame kinds, in the first byte of each frame (the rest is padding of the real size).
const KIND_REQUEST: u8 = 1;
const KIND_GET: u8 = 2;
const KIND_BULK: u8 = 3;
const KIND_REPLY: u8 = 4;

/// Every frame kind's bytes, built once: sends are `writev`s of these.
struct Frames {
    request: Vec<u8>,
    get: Vec<u8>,
    bulk: Vec<u8>,
    reply: Vec<u8>,
}

impl Frames {
    fn new(bulk: usize) -> Self {
        let build = |kind: u8, len: usize| {
            let mut frame = vec![0u8; len];
            if let Some(first) = frame.first_mut() {
                *first = kind;
            }
            frame
        };
        Self {
            request: build(KIND_REQUEST, SMALL),
            get: build(KIND_GET, HEADER),
            bulk: build(KIND_BULK, HEADER + bulk),
            reply: build(KIND_REPLY, SMALL),
        }
    }

    fn get(&self, kind: u8) -> Option<&[u8]> {
        match kind {
            KIND_REQUEST => Some(&self.request),
            KIND_GET => Some(&self.get),
            KIND_BULK => Some(&self.bulk),
            KIND_REPLY => Some(&self.reply),
            _ => None,
        }
    }
}

/// One connection's unparsed input and unwritten output.
struct Link {
    stream: TcpStream,
    input: Vec<u8>,
    /// Frames to send, and how much of the first one is already sent.
    output: VecDeque<u8>,
    sent: usize,
}

impl Link {
    fn new(stream: TcpStream) -> io::Result<Self> {
        stream.set_nodelay(true)?;
        stream.set_nonblocking(true)?;
        Ok(Self { stream, input: Vec::new(), output: VecDeque::new(), sent: 0 })
    }

    /// Reads until the socket would block; false once the peer has gone (closed, or reset when
    /// it stopped with a bulk unread). Each read may fill
    /// the rest of a pending long frame, so a bulk arrives in few reads and one copy.
    fn read_all(&mut self, frames: &Frames) -> io::Result<bool> {
        loop {
            let pending = self
                .input
                .first()
                .and_then(|&kind| frames.get(kind))
                .map_or(0, |frame| frame.len().saturating_sub(self.input.len()));
            self.input.reserve(pending.max(READ_CHUNK));
            match rustix::io::read(&self.stream, spare_capacity(&mut self.input)) {
                Ok(0) => return Ok(false),
                Ok(_) => {}
                Err(rustix::io::Errno::AGAIN) => return Ok(true),
                Err(rustix::io::Errno::CONNRESET) => return Ok(false),
                Err(error) => return Err(error.into()),
            }
        }
    }

    /// Whole frames' kinds, consumed from the input.
    fn frames(&mut self, frames: &Frames) -> io::Result<Vec<u8>> {
        let mut kinds = Vec::new();
        let mut at = 0;
        while let Some(&kind) = self.input.get(at) {
            let len = frames.get(kind).ok_or_else(|| io::Error::other("unknown frame"))?.len();
            if self.input.len() - at < len {
                break;
            }
            kinds.push(kind);
            at += len;
        }
        self.input.drain(..at);
        Ok(kinds)
    }

    /// Writes as much output as the socket takes in one `writev`; the rest waits for EPOLLOUT.
    fn flush(&mut self, frames: &Frames) -> io::Result<()> {
        while !self.output.is_empty() {
            let slices: Vec<IoSlice<'_>> = self
                .output
                .iter()
                .take(64)
                .enumerate()
                .filter_map(|(index, &kind)| {
                    let frame = frames.get(kind)?;
                    let skip = if index == 0 { self.sent } else { 0 };
                    Some(IoSlice::new(frame.get(skip..).unwrap_or(&[])))
                })
                .collect();
            let mut written = match self.stream.write_vectored(&slices) {
                Ok(written) => written,
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                // The peer stopped first: its loop has ended, so must this one.
                Err(error) if error.kind() == io::ErrorKind::ConnectionReset => return Ok(()),
                Err(error) if error.kind() == io::ErrorKind::BrokenPipe => return Ok(()),
                Err(error) => return Err(error),
            };
            while let Some(&kind) = self.output.front() {
                let left = frames.get(kind).map_or(0, <[u8]>::len) - self.sent;
                if written < left {
                    self.sent += written;
                    break;
                }
                written -= left;
                self.sent = 0;
                self.output.pop_front();
            }
        }
        Ok(())
    }
}

/// One side's loop over its two links (0: control, 1: bulk). `answer` turns an arriving frame
/// into frames to send, as (link, kind) pairs.
fn run_loop(
    mut links: [Link; 2],
    frames: &Frames,
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
            epoll::EventFlags::IN | epoll::EventFlags::OUT | epoll::EventFlags::ET,
        )?;
    }
    let mut sends = start.to_vec();
    let mut events: Vec<epoll::Event> = Vec::with_capacity(4);
    while !stop.load(Ordering::Relaxed) {
        for (link, kind) in sends.drain(..) {
            if let Some(link) = links.get_mut(link) {
                link.output.push_back(kind);
            }
        }
        // The bulk link first: a read's data then leaves before its reply.
        for link in links.iter_mut().rev() {
            link.flush(frames)?;
        }
        events.clear();
        let timeout = rustix::event::Timespec { tv_sec: 0, tv_nsec: 100_000_000 };
        epoll::wait(&poller, spare_capacity(&mut events), Some(&timeout))?;
        for event in &events {
            let flags = event.flags;
            if !flags.contains(epoll::EventFlags::IN) {
                continue;
            }
            let index = event.data.u64() as usize;
            let Some(link) = links.get_mut(index) else { continue };
            if !link.read_all(frames)? {
                return Ok(());
            }
            for kind in link.frames(frames)? {
                answer(kind, &mut sends);
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

/// Which RPC the loops exchange.
#[derive(Clone, Copy, PartialEq)]
enum Test {
    Write,
    Read,
    Ping,
}

/// `4096`, `4k`, `1M`: a bulk size in bytes.
fn parse_size(text: &str) -> Option<usize> {
    let (digits, unit) = match text.strip_suffix(['k', 'K']) {
        Some(digits) => (digits, 1 << 10),
        None => match text.strip_suffix(['m', 'M']) {
            Some(digits) => (digits, 1 << 20),
            None => (text, 1),
        },
    };
    digits.parse::<usize>().ok()?.checked_mul(unit)
}

fn usage() -> ! {
    eprintln!(
        "usage: socket_floor [brw|read|ping] [--size BYTES] [--concurrency N] [--seconds S] [--pin]"
    );
    std::process::exit(2);
}

fn main() -> io::Result<()> {
    let mut test = Test::Write;
    let mut size = 4096usize;
    let mut concurrency = 8usize;
    let mut seconds = 3u64;
    let mut pinned = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "brw" | "write" => test = Test::Write,
            "read" => test = Test::Read,
            "ping" => test = Test::Ping,
            "--pin" => pinned = true,
            "--size" => {
                size = args.next().as_deref().and_then(parse_size).unwrap_or_else(|| usage())
            }
            "--concurrency" => {
                concurrency = args.next().and_then(|v| v.parse().ok()).unwrap_or_else(|| usage())
            }
            "--seconds" => {
                seconds = args.next().and_then(|v| v.parse().ok()).unwrap_or_else(|| usage())
            }
            _ => usage(),
        }
    }
    let listener = TcpListener::bind("127.0.0.3:0")?;
    let address = listener.local_addr()?;
    let client_control = TcpStream::connect(address)?;
    let (server_control, _) = listener.accept()?;
    let client_bulk = TcpStream::connect(address)?;
    let (server_bulk, _) = listener.accept()?;
    let frames = Arc::new(Frames::new(size));

    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let server = {
        let (stop, frames) = (Arc::clone(&stop), Arc::clone(&frames));
        let links = [Link::new(server_control)?, Link::new(server_bulk)?];
        std::thread::spawn(move || {
            if pinned {
                pin(1);
            }
            run_loop(
                links,
                &frames,
                &stop,
                |kind, sends| match (kind, test) {
                    (KIND_REQUEST, Test::Write) => sends.push((0, KIND_GET)),
                    (KIND_REQUEST, Test::Read) => sends.extend([(1, KIND_BULK), (0, KIND_REPLY)]),
                    (KIND_REQUEST, Test::Ping) | (KIND_BULK, _) => sends.push((0, KIND_REPLY)),
                    _ => {}
                },
                &[],
            )
        })
    };
    let client = {
        let (stop, frames, done) = (Arc::clone(&stop), Arc::clone(&frames), Arc::clone(&done));
        let links = [Link::new(client_control)?, Link::new(client_bulk)?];
        // A read ends when both its bulk and its reply are in: count each, finish the fewer.
        let (mut bulks, mut replies) = (0u64, 0u64);
        std::thread::spawn(move || {
            if pinned {
                pin(0);
            }
            let start = vec![(0, KIND_REQUEST); concurrency];
            run_loop(
                links,
                &frames,
                &stop,
                |kind, sends| {
                    match kind {
                        KIND_GET => sends.push((1, KIND_BULK)),
                        KIND_BULK => bulks += 1,
                        KIND_REPLY => replies += 1,
                        _ => {}
                    }
                    let finished = if test == Test::Read { bulks.min(replies) } else { replies };
                    let before = done.load(Ordering::Relaxed);
                    for _ in before..finished {
                        sends.push((0, KIND_REQUEST));
                    }
                    done.store(finished.max(before), Ordering::Relaxed);
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
