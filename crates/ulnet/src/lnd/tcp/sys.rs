//! The socket system calls of the data path, made straight through rustix rather than libc.
//!
//! glibc's `sendmsg`, `recv` and `readv` are thread cancellation points: each call flips the
//! thread's cancellation state twice with atomic compare-and-swaps (2.3% of a daemon's sampled
//! cycles on small RPCs, though removing such atomics gained less than their share: BENCHMARKS.md,
//! "Findings"). ulnet never cancels threads, so the raw calls lose nothing. Each goes through
//! tokio's readiness tracking (`try_io`): a WouldBlock clears the socket's readiness so
//! the task waits for the next edge, exactly as tokio's own `try_read`/`try_write` do.

use std::io::{self, IoSlice, IoSliceMut};

use rustix::net::{RecvFlags, SendAncillaryBuffer, SendFlags};
use tokio::io::Interest;
use tokio::net::TcpStream;

/// A non-blocking `sendmsg` of `slices`. `MSG_NOSIGNAL`: a write to a connection the peer
/// reset fails with EPIPE instead of raising SIGPIPE, which would kill a host program that
/// does not ignore it.
pub(super) fn send_vectored(stream: &TcpStream, slices: &[IoSlice<'_>]) -> io::Result<usize> {
    stream.try_io(Interest::WRITABLE, || {
        let mut control = SendAncillaryBuffer::default();
        Ok(rustix::net::sendmsg(stream, slices, &mut control, SendFlags::NOSIGNAL)?)
    })
}

/// A non-blocking `recv` into `buffer`.
pub(super) fn recv(stream: &TcpStream, buffer: &mut [u8]) -> io::Result<usize> {
    stream.try_io(Interest::READABLE, || {
        let (read, _) = rustix::net::recv(stream, &mut *buffer, RecvFlags::empty())?;
        Ok(read)
    })
}

/// A non-blocking `readv` into `slices`.
pub(super) fn read_vectored(
    stream: &TcpStream,
    slices: &mut [IoSliceMut<'_>],
) -> io::Result<usize> {
    stream.try_io(Interest::READABLE, || Ok(rustix::io::readv(stream, slices)?))
}
