//! A pcap writer for LNet-over-TCP byte streams, so independent decoders (tshark's LNet dissector)
//! can check what ulnet puts on the wire, and so traffic can be captured without privileges.
//!
//! It synthesizes the IPv4 and TCP framing around each write: a three-way handshake, then one
//! segment per [`TcpFlow::send`] with correct sequence and acknowledgement numbers. Output goes to
//! memory; the caller decides where the bytes end up (this crate does no I/O).

use std::net::SocketAddrV4;

/// `LINKTYPE_RAW`: packets begin with the IP header, no link layer.
const LINKTYPE_RAW: u32 = 101;
const SNAPLEN: u32 = 262_144;
/// The largest TCP payload one synthesized segment carries; longer writes are split, as a real
/// stack splits them at the MSS (64 KiB minus headers keeps the IPv4 total length in range).
pub const MAX_SEGMENT_PAYLOAD: usize = 65_000;

/// Accumulates a pcap file in memory.
#[derive(Debug)]
pub struct PcapWriter {
    bytes: Vec<u8>,
}

impl Default for PcapWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl PcapWriter {
    pub fn new() -> Self {
        let mut bytes = Vec::with_capacity(4096);
        bytes.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes()); // microsecond timestamps
        bytes.extend_from_slice(&2u16.to_le_bytes());
        bytes.extend_from_slice(&4u16.to_le_bytes());
        bytes.extend_from_slice(&0i32.to_le_bytes()); // thiszone
        bytes.extend_from_slice(&0u32.to_le_bytes()); // sigfigs
        bytes.extend_from_slice(&SNAPLEN.to_le_bytes());
        bytes.extend_from_slice(&LINKTYPE_RAW.to_le_bytes());
        Self { bytes }
    }

    /// The pcap file so far.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    fn record(&mut self, time_ns: u64, packet: &[u8]) {
        let micros = time_ns / 1_000;
        self.bytes.extend_from_slice(&((micros / 1_000_000) as u32).to_le_bytes());
        self.bytes.extend_from_slice(&((micros % 1_000_000) as u32).to_le_bytes());
        let len = packet.len() as u32;
        self.bytes.extend_from_slice(&len.to_le_bytes());
        self.bytes.extend_from_slice(&len.to_le_bytes());
        self.bytes.extend_from_slice(packet);
    }
}

/// Which end of a [`TcpFlow`] sends a segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    ClientToServer,
    ServerToClient,
}

const FLAG_SYN: u8 = 0x02;
const FLAG_PSH: u8 = 0x08;
const FLAG_ACK: u8 = 0x10;

/// One TCP connection's state for synthesizing its segments.
#[derive(Debug)]
pub struct TcpFlow {
    client: SocketAddrV4,
    server: SocketAddrV4,
    client_next_seq: u32,
    server_next_seq: u32,
    ip_id: u16,
}

impl TcpFlow {
    /// Starts a flow and writes its three-way handshake at `time_ns`.
    pub fn open(
        pcap: &mut PcapWriter,
        client: SocketAddrV4,
        server: SocketAddrV4,
        time_ns: u64,
    ) -> Self {
        let mut flow =
            Self { client, server, client_next_seq: 1000, server_next_seq: 5000, ip_id: 1 };
        flow.segment(pcap, Direction::ClientToServer, FLAG_SYN, &[], time_ns);
        flow.client_next_seq = flow.client_next_seq.wrapping_add(1);
        flow.segment(pcap, Direction::ServerToClient, FLAG_SYN | FLAG_ACK, &[], time_ns);
        flow.server_next_seq = flow.server_next_seq.wrapping_add(1);
        flow.segment(pcap, Direction::ClientToServer, FLAG_ACK, &[], time_ns);
        flow
    }

    /// Writes `payload` as one segment per [`MAX_SEGMENT_PAYLOAD`] bytes, as one `write()` with
    /// TCP_NODELAY would appear on the wire.
    pub fn send(
        &mut self,
        pcap: &mut PcapWriter,
        direction: Direction,
        payload: &[u8],
        time_ns: u64,
    ) {
        for chunk in payload.chunks(MAX_SEGMENT_PAYLOAD) {
            self.segment(pcap, direction, FLAG_PSH | FLAG_ACK, chunk, time_ns);
            let len = chunk.len() as u32;
            match direction {
                Direction::ClientToServer => {
                    self.client_next_seq = self.client_next_seq.wrapping_add(len)
                }
                Direction::ServerToClient => {
                    self.server_next_seq = self.server_next_seq.wrapping_add(len)
                }
            }
        }
    }

    fn segment(
        &mut self,
        pcap: &mut PcapWriter,
        direction: Direction,
        flags: u8,
        payload: &[u8],
        time_ns: u64,
    ) {
        let (src, dst, seq, ack) = match direction {
            Direction::ClientToServer => {
                (self.client, self.server, self.client_next_seq, self.server_next_seq)
            }
            Direction::ServerToClient => {
                (self.server, self.client, self.server_next_seq, self.client_next_seq)
            }
        };
        let ack = if flags & FLAG_ACK != 0 { ack } else { 0 };
        let total = 20 + 20 + payload.len();
        let mut packet = Vec::with_capacity(total);
        // IPv4 header, no options.
        packet.extend_from_slice(&[0x45, 0]);
        packet.extend_from_slice(&(total as u16).to_be_bytes());
        packet.extend_from_slice(&self.ip_id.to_be_bytes());
        packet.extend_from_slice(&[0x40, 0, 64, 6, 0, 0]); // DF, TTL 64, TCP, checksum below
        packet.extend_from_slice(&src.ip().octets());
        packet.extend_from_slice(&dst.ip().octets());
        let checksum = internet_checksum(&packet[..20], 0);
        packet[10..12].copy_from_slice(&checksum.to_be_bytes());
        self.ip_id = self.ip_id.wrapping_add(1);
        // TCP header, no options.
        let tcp_start = packet.len();
        packet.extend_from_slice(&src.port().to_be_bytes());
        packet.extend_from_slice(&dst.port().to_be_bytes());
        packet.extend_from_slice(&seq.to_be_bytes());
        packet.extend_from_slice(&ack.to_be_bytes());
        packet.extend_from_slice(&[5 << 4, flags]);
        packet.extend_from_slice(&65_535u16.to_be_bytes()); // window
        packet.extend_from_slice(&[0, 0, 0, 0]); // checksum, urgent pointer
        packet.extend_from_slice(payload);
        let mut pseudo = 0u32;
        for word in [src.ip().octets(), dst.ip().octets()] {
            pseudo += u32::from(u16::from_be_bytes([word[0], word[1]]));
            pseudo += u32::from(u16::from_be_bytes([word[2], word[3]]));
        }
        pseudo += 6 + (packet.len() - tcp_start) as u32;
        let checksum = internet_checksum(&packet[tcp_start..], pseudo);
        packet[tcp_start + 16..tcp_start + 18].copy_from_slice(&checksum.to_be_bytes());
        pcap.record(time_ns, &packet);
    }
}

/// RFC 1071 one's-complement checksum, with `initial` already-summed words (the pseudo header).
fn internet_checksum(data: &[u8], initial: u32) -> u16 {
    let mut sum = initial;
    let mut chunks = data.chunks_exact(2);
    for pair in &mut chunks {
        sum += u32::from(u16::from_be_bytes([pair[0], pair[1]]));
    }
    if let [last] = chunks.remainder() {
        sum += u32::from(*last) << 8;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn checksum_matches_rfc1071_example() {
        // RFC 1071 §3: words 0001 f203 f4f5 f6f7 sum to ddf2, checksum 220d.
        assert_eq!(internet_checksum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7], 0), 0x220d);
    }

    #[test]
    fn handshake_and_data_records() {
        let mut pcap = PcapWriter::new();
        let client = SocketAddrV4::new(Ipv4Addr::new(192, 168, 1, 2), 1023);
        let server = SocketAddrV4::new(Ipv4Addr::new(192, 168, 1, 1), 988);
        let mut flow = TcpFlow::open(&mut pcap, client, server, 1_000_000);
        flow.send(&mut pcap, Direction::ClientToServer, &[0xab; 100], 2_000_000);
        let bytes = pcap.into_bytes();
        // Global header + 3 handshake records (16 + 40) + one data record (16 + 140).
        assert_eq!(bytes.len(), 24 + 3 * 56 + 16 + 140);
        let data = &bytes[24 + 3 * 56 + 16..];
        assert_eq!(&data[2..4], &140u16.to_be_bytes());
        // Sequence number continues after the SYN.
        assert_eq!(&data[24..28], &1001u32.to_be_bytes());
        assert_eq!(&data[40..], &[0xab; 100][..]);
        // A correct IPv4 header checksums to zero.
        assert_eq!(internet_checksum(&data[..20], 0), 0);
    }
}
