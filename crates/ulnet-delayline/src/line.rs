//! The running line: per direction, a reader thread that timestamps each packet and asks the
//! [`Link`] model what to do with it, and a writer thread that holds each admitted packet
//! until its delivery time and writes it out. Packets of one direction stay in order (the
//! model's delivery times never go backwards).

use std::io;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::link::{Link, LinkConfig, LinkStats, Verdict};

/// Largest packet read (a TUN device's MTU is at most 65,535).
pub const MAX_PACKET: usize = 65_536;

/// One end of the line: a device packets are read from and written to, whole.
pub trait Port: Send + Sync + 'static {
    fn recv(&self, buf: &mut [u8]) -> io::Result<usize>;
    fn send(&self, packet: &[u8]) -> io::Result<usize>;
}

/// A started line: its two directions' models, for their counters.
#[derive(Debug)]
pub struct Line {
    /// `a` to `b`, then `b` to `a`.
    links: [Arc<Mutex<Link>>; 2],
    threads: Vec<JoinHandle<()>>,
}

impl Line {
    /// Starts moving packets between `a` and `b`, both directions shaped by `config`; the
    /// seeds of the two directions' loss draws derive from `seed`.
    pub fn start<P: Port>(a: Arc<P>, b: Arc<P>, config: LinkConfig, seed: u64) -> io::Result<Self> {
        let start = Instant::now();
        let links = [
            Arc::new(Mutex::new(Link::new(config, seed))),
            Arc::new(Mutex::new(Link::new(config, seed ^ 0x9e37_79b9_7f4a_7c15))),
        ];
        let mut threads = Vec::new();
        for (index, (from, to)) in [(a.clone(), b.clone()), (b, a)].into_iter().enumerate() {
            let (sender, receiver) = mpsc::channel::<(Duration, Vec<u8>)>();
            let link = Arc::clone(if index == 0 { &links[0] } else { &links[1] });
            let name = if index == 0 { "a-to-b" } else { "b-to-a" };
            threads.push(
                std::thread::Builder::new()
                    .name(format!("{name}-read"))
                    .spawn(move || read_loop(&*from, &link, start, &sender))?,
            );
            threads.push(
                std::thread::Builder::new()
                    .name(format!("{name}-write"))
                    .spawn(move || write_loop(&*to, start, &receiver))?,
            );
        }
        Ok(Self { links, threads })
    }

    /// The counters of `a` to `b` and of `b` to `a`.
    pub fn stats(&self) -> [LinkStats; 2] {
        self.links.each_ref().map(|link| link.lock().map(|l| l.stats).unwrap_or_default())
    }

    /// Whether every thread is still running (a device error ends its thread).
    pub fn running(&self) -> bool {
        self.threads.iter().all(|thread| !thread.is_finished())
    }
}

fn read_loop(
    from: &dyn Port,
    link: &Mutex<Link>,
    start: Instant,
    out: &mpsc::Sender<(Duration, Vec<u8>)>,
) {
    let mut buf = vec![0u8; MAX_PACKET];
    loop {
        let length = match from.recv(&mut buf) {
            Ok(length) => length,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => {
                eprintln!("ulnet-delayline: read: {error}");
                return;
            }
        };
        let now = start.elapsed();
        let verdict = match link.lock() {
            Ok(mut link) => link.admit(now, length),
            Err(_) => return,
        };
        if let (Verdict::Deliver(at), Some(packet)) = (verdict, buf.get(..length)) {
            if out.send((at, packet.to_vec())).is_err() {
                return;
            }
        }
    }
}

fn write_loop(to: &dyn Port, start: Instant, input: &mpsc::Receiver<(Duration, Vec<u8>)>) {
    while let Ok((at, packet)) = input.recv() {
        let wait = at.saturating_sub(start.elapsed());
        if !wait.is_zero() {
            std::thread::sleep(wait);
        }
        // A full device, or one not up yet (EIO), drops the packet, as a wire would.
        if let Err(error) = to.send(&packet) {
            let quiet =
                error.kind() == io::ErrorKind::WouldBlock || error.raw_os_error() == Some(5);
            if !quiet {
                eprintln!("ulnet-delayline: write: {error}");
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)] // Test code.
mod tests {
    use super::*;

    /// An in-memory port: what the test injects is read, what the line writes is kept.
    struct Fake {
        incoming: Mutex<mpsc::Receiver<Vec<u8>>>,
        written: Mutex<Vec<(Instant, Vec<u8>)>>,
    }

    impl Port for Fake {
        fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
            let packet = self
                .incoming
                .lock()
                .map_err(|_| io::Error::other("poisoned"))?
                .recv()
                .map_err(|_| io::Error::other("closed"))?;
            let length = packet.len().min(buf.len());
            buf[..length].copy_from_slice(&packet[..length]);
            Ok(length)
        }

        fn send(&self, packet: &[u8]) -> io::Result<usize> {
            self.written
                .lock()
                .map_err(|_| io::Error::other("poisoned"))?
                .push((Instant::now(), packet.to_vec()));
            Ok(packet.len())
        }
    }

    fn fake() -> (Arc<Fake>, mpsc::Sender<Vec<u8>>) {
        let (sender, receiver) = mpsc::channel();
        let port = Fake { incoming: Mutex::new(receiver), written: Mutex::new(Vec::new()) };
        (Arc::new(port), sender)
    }

    #[test]
    fn packets_cross_both_ways_in_order_and_no_sooner_than_the_delay() {
        let (a, to_a) = fake();
        let (b, to_b) = fake();
        let config = LinkConfig {
            delay: Duration::from_millis(30),
            rate_bytes_per_sec: Some(10_000_000),
            overhead_bytes: 38,
            loss_per_million: 0,
            queue_bytes: 1 << 20,
        };
        let line = Line::start(Arc::clone(&a), Arc::clone(&b), config, 1).unwrap();
        let sent = Instant::now();
        for index in 0..20u8 {
            to_a.send(vec![index; 100 + usize::from(index)]).unwrap();
        }
        to_b.send(vec![0xbb; 60]).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while (b.written.lock().unwrap().len() < 20 || a.written.lock().unwrap().is_empty())
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(5));
        }
        let at_b = b.written.lock().unwrap().clone();
        let at_a = a.written.lock().unwrap().clone();
        assert_eq!(at_b.iter().map(|(_, p)| p[0]).collect::<Vec<_>>(), (0..20).collect::<Vec<_>>());
        assert!(at_b.iter().all(|(when, _)| *when >= sent + Duration::from_millis(30)));
        assert_eq!(at_a.len(), 1);
        assert_eq!(at_a[0].1, vec![0xbb; 60]);
        let [forward, backward] = line.stats();
        assert_eq!((forward.packets, forward.delivered, backward.delivered), (20, 20, 1));
        assert!(line.running());
    }
}
