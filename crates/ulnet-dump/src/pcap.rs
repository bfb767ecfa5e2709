//! A pcap writer for LNet-over-TCP byte streams, so independent decoders (tshark's LNet dissector)
//! can check what ulnet puts on the wire, and so traffic can be captured without privileges.
//!
//! It synthesizes the IPv4 and TCP framing around each write: a three-way handshake, then one
//! segment per [`TcpFlow::send`] with correct sequence and acknowledgement numbers. Output goes to
//! memory; the caller decides where the bytes end up (this module does no I/O). [`tcp_segments`]
//! reads them back, and real captures.
//!
//! The pcap file and record framing and the link layers are written here; the IP and TCP
//! headers are etherparse's, both ways (decision 0014 says why pcap-file is not used).

use std::net::{IpAddr, SocketAddr};

use etherparse::{
    EtherType, IpHeaders, IpNumber, Ipv4Extensions, Ipv4Header, NetSlice, PacketBuilder,
    SlicedPacket, TransportSlice,
};

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
    client: SocketAddr,
    server: SocketAddr,
    client_next_seq: u32,
    server_next_seq: u32,
    ip_id: u16,
}

impl TcpFlow {
    /// Starts a flow and writes its three-way handshake at `time_ns`. Both ends must be of the
    /// same address family.
    pub fn open(
        pcap: &mut PcapWriter,
        client: impl Into<SocketAddr>,
        server: impl Into<SocketAddr>,
        time_ns: u64,
    ) -> Self {
        let (client, server) = (client.into(), server.into());
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
        let builder = match (src.ip(), dst.ip()) {
            (IpAddr::V4(source), IpAddr::V4(destination)) => {
                // DF set, TTL 64, numbered datagrams; etherparse sets the lengths and checksums.
                let Ok(mut ip) =
                    Ipv4Header::new(0, 64, IpNumber::TCP, source.octets(), destination.octets())
                else {
                    return; // unreachable: a zero payload length is in range
                };
                ip.identification = self.ip_id;
                self.ip_id = self.ip_id.wrapping_add(1);
                PacketBuilder::ip(IpHeaders::Ipv4(ip, Ipv4Extensions::default()))
            }
            (source, destination) => {
                // IPv6 (a mixed pair is a caller bug; both are written as IPv6 then).
                let to_v6 = |ip: IpAddr| match ip {
                    IpAddr::V4(v4) => v4.to_ipv6_mapped(),
                    IpAddr::V6(v6) => v6,
                };
                PacketBuilder::ipv6(to_v6(source).octets(), to_v6(destination).octets(), 64)
            }
        };
        // TCP header without options, window 65535.
        let mut tcp = builder.tcp(src.port(), dst.port(), seq, 65_535);
        if flags & FLAG_SYN != 0 {
            tcp = tcp.syn();
        }
        if flags & FLAG_PSH != 0 {
            tcp = tcp.psh();
        }
        if flags & FLAG_ACK != 0 {
            tcp = tcp.ack(ack);
        }
        let mut packet = Vec::with_capacity(tcp.size(payload.len()));
        // Cannot fail: MAX_SEGMENT_PAYLOAD keeps the lengths in range and a Vec takes any write.
        if tcp.write(&mut packet, payload).is_ok() {
            pcap.record(time_ns, &packet);
        }
    }
}

/// Why bytes are not a pcap file this reader understands.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PcapReadError {
    #[error("pcap file shorter than its 24-byte global header")]
    TruncatedGlobalHeader,
    #[error(
        "not a pcap file (magic {0:#010x}); pcapng is not supported, convert with editcap -F pcap"
    )]
    BadMagic(u32),
    #[error(
        "unsupported pcap link type {0} (supported: 0 null, 1 ethernet, 101 raw IP, 113 linux cooked)"
    )]
    UnsupportedLinkType(u32),
    #[error("record {index} claims {claimed} bytes, more than the {max}-byte bound")]
    RecordTooLarge { index: usize, claimed: u32, max: u32 },
}

/// The largest captured record accepted; bigger claims are corrupt files (snaplen is 262144 at most
/// in libpcap).
pub const MAX_RECORD_LEN: u32 = 262_144;

/// One TCP segment found in a capture.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcpSegment<'a> {
    pub time_ns: u64,
    pub source: std::net::SocketAddr,
    pub destination: std::net::SocketAddr,
    pub sequence: u32,
    pub flags: u8,
    pub payload: &'a [u8],
}

impl TcpSegment<'_> {
    pub fn is_syn(&self) -> bool {
        self.flags & FLAG_SYN != 0
    }
}

/// The 32-bit word at `offset` of a header or record already checked to be long enough (0 if
/// it is not, which those checks rule out).
fn word_at(bytes: &[u8], offset: usize, big_endian: bool) -> u32 {
    let Some(&[a, b, c, d]) = bytes.get(offset..).and_then(|rest| rest.first_chunk::<4>()) else {
        return 0;
    };
    if big_endian { u32::from_be_bytes([a, b, c, d]) } else { u32::from_le_bytes([a, b, c, d]) }
}

/// Reads the TCP segments of a classic pcap file. Non-TCP packets, fragments and packets cut
/// short by the snap length are skipped; a record that overruns the file ends the iteration.
pub fn tcp_segments(file: &[u8]) -> Result<impl Iterator<Item = TcpSegment<'_>>, PcapReadError> {
    let header = file.get(..24).ok_or(PcapReadError::TruncatedGlobalHeader)?;
    let magic = word_at(header, 0, false);
    let (big_endian, nanos) = match magic {
        0xa1b2_c3d4 => (false, false),
        0xa1b2_3c4d => (false, true),
        0xd4c3_b2a1 => (true, false),
        0x4d3c_b2a1 => (true, true),
        other => return Err(PcapReadError::BadMagic(other)),
    };
    let read_u32 = move |bytes: &[u8], offset: usize| word_at(bytes, offset, big_endian);
    let link_type = read_u32(header, 20) & 0x0fff_ffff;
    if !matches!(link_type, 0 | 1 | 101 | 113) {
        return Err(PcapReadError::UnsupportedLinkType(link_type));
    }
    // Validate record lengths up front so the iterator itself cannot fail.
    let mut at = 24;
    let mut index = 0;
    while let Some(record) = file.get(at..at + 16) {
        let claimed = read_u32(record, 8);
        if claimed > MAX_RECORD_LEN {
            return Err(PcapReadError::RecordTooLarge { index, claimed, max: MAX_RECORD_LEN });
        }
        at += 16 + claimed as usize;
        index += 1;
    }
    let mut at = 24;
    Ok(std::iter::from_fn(move || {
        loop {
            let record = file.get(at..at + 16)?;
            let seconds = u64::from(read_u32(record, 0));
            let fraction = u64::from(read_u32(record, 4));
            let captured = read_u32(record, 8) as usize;
            let original = read_u32(record, 12) as usize;
            let data = file.get(at + 16..at + 16 + captured)?;
            at += 16 + captured;
            if captured < original {
                continue; // cut by the snap length: the payload is incomplete
            }
            let time_ns = seconds * 1_000_000_000 + if nanos { fraction } else { fraction * 1_000 };
            if let Some(segment) = parse_packet(link_type, data, time_ns) {
                return Some(segment);
            }
        }
    }))
}

fn parse_packet(link_type: u32, data: &[u8], time_ns: u64) -> Option<TcpSegment<'_>> {
    let (ethertype, ip) = match link_type {
        0 => {
            // BSD loopback: a 4-byte address family in host order; 2 is IPv4, 24/28/30 IPv6.
            let family = u32::from_le_bytes(data.get(..4)?.try_into().ok()?);
            (if family == 2 { 0x0800 } else { 0x86dd }, data.get(4..)?)
        }
        1 => (u16::from_be_bytes([*data.get(12)?, *data.get(13)?]), data.get(14..)?),
        113 => (u16::from_be_bytes([*data.get(14)?, *data.get(15)?]), data.get(16..)?),
        _ => (if data.first()? >> 4 == 6 { 0x86dd } else { 0x0800 }, data),
    };
    // IPv4 fragments come back without a transport layer and are skipped; IPv6 extension
    // headers are followed.
    let packet = SlicedPacket::from_ether_type(EtherType(ethertype), ip).ok()?;
    let (source_ip, destination_ip): (IpAddr, IpAddr) = match packet.net? {
        NetSlice::Ipv4(ip) => {
            (ip.header().source_addr().into(), ip.header().destination_addr().into())
        }
        NetSlice::Ipv6(ip) => {
            (ip.header().source_addr().into(), ip.header().destination_addr().into())
        }
        NetSlice::Arp(_) => return None,
    };
    let Some(TransportSlice::Tcp(tcp)) = packet.transport else {
        return None;
    };
    Some(TcpSegment {
        time_ns,
        source: (source_ip, tcp.source_port()).into(),
        destination: (destination_ip, tcp.destination_port()).into(),
        sequence: tcp.sequence_number(),
        flags: *tcp.slice().get(13)?,
        payload: tcp.payload(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr, SocketAddrV4, SocketAddrV6};

    /// RFC 1071 one's-complement checksum: an oracle independent of the packet builder.
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

    #[test]
    fn checksum_oracle_matches_rfc1071_example() {
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

    #[test]
    fn reader_returns_what_the_writer_wrote() {
        let mut pcap = PcapWriter::new();
        let client = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 1022);
        let server = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 988);
        let mut flow = TcpFlow::open(&mut pcap, client, server, 0);
        flow.send(&mut pcap, Direction::ClientToServer, b"hello", 5_000);
        flow.send(&mut pcap, Direction::ServerToClient, b"world!", 7_000);
        let bytes = pcap.into_bytes();
        let segments: Vec<_> = tcp_segments(&bytes).unwrap().collect();
        assert_eq!(segments.len(), 5);
        assert!(segments[0].is_syn());
        assert_eq!(segments[3].payload, b"hello");
        assert_eq!(segments[3].source, client.into());
        assert_eq!(segments[3].sequence, 1001);
        assert_eq!(segments[4].payload, b"world!");
        assert_eq!(segments[4].destination, client.into());
        assert_eq!(segments[4].time_ns, 7_000);
    }

    #[test]
    fn ipv6_segments_round_trip() {
        let mut pcap = PcapWriter::new();
        let client = SocketAddrV6::new(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2), 1023, 0, 0);
        let server = SocketAddrV6::new(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1), 988, 0, 0);
        let mut flow = TcpFlow::open(&mut pcap, client, server, 0);
        flow.send(&mut pcap, Direction::ServerToClient, b"v6", 9);
        let bytes = pcap.into_bytes();
        let segments: Vec<_> = tcp_segments(&bytes).unwrap().collect();
        assert_eq!(segments.len(), 4);
        assert_eq!(segments[3].payload, b"v6");
        assert_eq!(segments[3].source, server.into());
    }

    #[test]
    fn packets_of_an_unknown_ip_version_are_skipped() {
        let mut pcap = PcapWriter::new();
        let a = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 1);
        let mut flow = TcpFlow::open(&mut pcap, a, a, 0);
        flow.send(&mut pcap, Direction::ClientToServer, b"data", 0);
        let mut bytes = pcap.into_bytes();
        assert_eq!(tcp_segments(&bytes).unwrap().count(), 4);
        // The data segment's version nibble: 4 becomes 5.
        bytes[24 + 3 * 56 + 16] = 0x55;
        assert_eq!(tcp_segments(&bytes).unwrap().count(), 3);
    }

    #[test]
    fn reader_rejects_bad_files_and_survives_truncation() {
        assert_eq!(tcp_segments(&[0; 10]).err(), Some(PcapReadError::TruncatedGlobalHeader));
        assert_eq!(tcp_segments(&[0; 24]).err(), Some(PcapReadError::BadMagic(0)));
        let mut pcap = PcapWriter::new();
        let a = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 1);
        let mut flow = TcpFlow::open(&mut pcap, a, a, 0);
        flow.send(&mut pcap, Direction::ClientToServer, &[1; 300], 0);
        let bytes = pcap.into_bytes();
        for cut in 0..bytes.len() {
            if let Ok(segments) = tcp_segments(&bytes[..cut]) {
                assert!(segments.count() <= 4);
            }
        }
        let mut huge = bytes.clone();
        huge[24 + 8..24 + 12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(tcp_segments(&huge).err(), Some(PcapReadError::RecordTooLarge { .. })));
    }
}
