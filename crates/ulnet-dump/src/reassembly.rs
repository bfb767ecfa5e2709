//! Rebuilds each direction of each LNet TCP connection in a capture into one byte stream, with the
//! capture time of every segment's first byte so decoded items can be placed in time.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use ulnet_dump::pcap::{PcapReadError, tcp_segments};

/// Out-of-order segments held per direction while waiting for the gap before them to fill;
/// beyond this the gap is declared lost and skipped.
const MAX_PENDING_SEGMENTS: usize = 4096;

/// One direction of one TCP connection.
#[derive(Debug)]
pub struct Stream {
    pub source: SocketAddr,
    pub destination: SocketAddr,
    /// True for the connector-to-acceptor direction, which starts with the connreq.
    pub to_acceptor: bool,
    /// True when the capture missed the SYN: decoding starts mid-stream and may fail.
    pub missed_start: bool,
    /// Bytes lost to capture gaps (the stream is decoded up to the first gap only).
    pub lost_bytes: u64,
    pub bytes: Vec<u8>,
    /// (stream offset, capture time in ns) at each segment start, ascending.
    pub times: Vec<(usize, u64)>,
    /// Offset of the first gap, where decoding must stop.
    pub first_gap: Option<usize>,
    next_sequence: u32,
    pending: BTreeMap<u32, (u64, Vec<u8>)>,
}

impl Stream {
    /// Capture time of the byte at `offset`.
    pub fn time_at(&self, offset: usize) -> u64 {
        let index = self.times.partition_point(|(start, _)| *start <= offset);
        self.times.get(index.saturating_sub(1)).map_or(0, |(_, time)| *time)
    }

    /// The contiguous bytes that can be decoded.
    pub fn decodable(&self) -> &[u8] {
        let end = self.first_gap.unwrap_or(self.bytes.len());
        self.bytes.get(..end).unwrap_or_default()
    }

    fn push(&mut self, sequence: u32, time_ns: u64, payload: &[u8]) {
        // Signed distance from the next expected byte handles sequence wrap-around.
        let distance = sequence.wrapping_sub(self.next_sequence) as i32;
        if distance > 0 {
            if self.pending.len() >= MAX_PENDING_SEGMENTS {
                self.skip_gap();
            }
            self.pending.insert(sequence, (time_ns, payload.to_vec()));
            return;
        }
        // A retransmission may overlap what we have: keep only the new tail.
        let overlap = distance.unsigned_abs() as usize;
        if let Some(new) = payload.get(overlap..).filter(|new| !new.is_empty()) {
            self.append(time_ns, new);
        }
        self.drain_pending();
    }

    fn append(&mut self, time_ns: u64, data: &[u8]) {
        self.times.push((self.bytes.len(), time_ns));
        self.bytes.extend_from_slice(data);
        self.next_sequence = self.next_sequence.wrapping_add(data.len() as u32);
    }

    fn drain_pending(&mut self) {
        while let Some((&sequence, _)) = self.pending.first_key_value() {
            let distance = sequence.wrapping_sub(self.next_sequence) as i32;
            if distance > 0 {
                return;
            }
            if let Some((_, (time_ns, data))) = self.pending.pop_first() {
                if let Some(new) = data.get(distance.unsigned_abs() as usize..) {
                    let new = new.to_vec();
                    self.append(time_ns, &new);
                }
            }
        }
    }

    /// Gives up on the bytes before the earliest pending segment.
    fn skip_gap(&mut self) {
        if let Some((&sequence, _)) = self.pending.first_key_value() {
            self.lost_bytes += u64::from(sequence.wrapping_sub(self.next_sequence));
            self.first_gap.get_or_insert(self.bytes.len());
            self.next_sequence = sequence;
            self.drain_pending();
        }
    }
}

/// Every direction of every connection to or from `port`, in order of first appearance.
pub fn streams(capture: &[u8], port: u16) -> Result<Vec<Stream>, PcapReadError> {
    let mut streams: Vec<Stream> = Vec::new();
    // Index of the live stream per (source, destination).
    let mut live: BTreeMap<(SocketAddr, SocketAddr), usize> = BTreeMap::new();
    for segment in tcp_segments(capture)? {
        let to_acceptor = segment.destination.port() == port;
        if !to_acceptor && segment.source.port() != port {
            continue;
        }
        let key = (segment.source, segment.destination);
        let index = match live.get(&key) {
            Some(&index) if !segment.is_syn() => index,
            _ => {
                // A SYN, or the first segment seen: a new stream (port reuse starts afresh).
                let start = segment.sequence.wrapping_add(u32::from(segment.is_syn()));
                streams.push(Stream {
                    source: segment.source,
                    destination: segment.destination,
                    to_acceptor,
                    missed_start: !segment.is_syn(),
                    lost_bytes: 0,
                    bytes: Vec::new(),
                    times: Vec::new(),
                    first_gap: None,
                    next_sequence: start,
                    pending: BTreeMap::new(),
                });
                live.insert(key, streams.len() - 1);
                streams.len() - 1
            }
        };
        let Some(stream) = streams.get_mut(index) else { continue };
        let sequence = segment.sequence.wrapping_add(u32::from(segment.is_syn()));
        if !segment.payload.is_empty() {
            stream.push(sequence, segment.time_ns, segment.payload);
        }
    }
    for stream in &mut streams {
        while !stream.pending.is_empty() {
            stream.skip_gap();
        }
    }
    Ok(streams)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, SocketAddrV4};
    use ulnet_dump::pcap::{Direction, PcapWriter, TcpFlow};

    #[test]
    fn both_directions_are_rebuilt_with_times() {
        let mut pcap = PcapWriter::new();
        let client = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 1023);
        let server = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 988);
        let mut flow = TcpFlow::open(&mut pcap, client, server, 0);
        flow.send(&mut pcap, Direction::ClientToServer, b"abc", 10_000);
        flow.send(&mut pcap, Direction::ClientToServer, b"def", 20_000);
        flow.send(&mut pcap, Direction::ServerToClient, b"xyz", 30_000);
        let streams = streams(pcap.as_bytes(), 988).unwrap();
        assert_eq!(streams.len(), 2);
        assert!(streams[0].to_acceptor && !streams[0].missed_start);
        assert_eq!(streams[0].decodable(), b"abcdef");
        assert_eq!(streams[0].time_at(4), 20_000); // pcap keeps microseconds
        assert_eq!(streams[1].decodable(), b"xyz");
        assert!(!streams[1].to_acceptor);
    }

    #[test]
    fn out_of_order_and_retransmitted_segments() {
        let mut stream = Stream {
            source: SocketAddr::from(([1, 1, 1, 1], 1)),
            destination: SocketAddr::from(([1, 1, 1, 1], 988)),
            to_acceptor: true,
            missed_start: false,
            lost_bytes: 0,
            bytes: Vec::new(),
            times: Vec::new(),
            first_gap: None,
            next_sequence: u32::MAX - 1, // exercise wrap-around
            pending: BTreeMap::new(),
        };
        stream.push(1, 3, b"de"); // early
        stream.push(u32::MAX - 1, 1, b"abc"); // fills the gap, wraps
        stream.push(u32::MAX, 2, b"bc"); // pure retransmission
        assert_eq!(stream.decodable(), b"abcde");
        assert_eq!(stream.lost_bytes, 0);
        stream.push(10, 4, b"zz"); // a gap that never fills
        stream.skip_gap();
        assert_eq!(stream.first_gap, Some(5));
        assert_eq!(stream.lost_bytes, 7);
        assert_eq!(stream.decodable(), b"abcde");
    }
}
