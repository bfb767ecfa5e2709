//! A scripted kernel-side peer: socklnd bytes built by hand from docs/protocol/wire.md (§1-§4), over plain
//! blocking sockets, so the tests check ulnet against the reference rather than against its own
//! encoders. The builders are themselves checked against the §10 test vectors below.

use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};

/// `LNET_PID_LUSTRE`.
pub const PID: u32 = 12345;
/// `LNET_PID_USERFLAG`.
pub const USERFLAG: u32 = 0x8000_0000;
/// The §10 server incarnation; the scripted kernel uses it.
pub const KERNEL_INCARNATION: u64 = 0x1870_F7D0_0000_0000;
/// The §10 client interface cookie; the scripted kernel's wire handles use it.
pub const KERNEL_COOKIE: u64 = 0x1870_F7D9_3B1D_2A00;

pub const KSOCK_NOOP: u32 = 0xc0;
pub const KSOCK_LNET: u32 = 0xc1;
pub const CONTROL: u32 = 1;
pub const BULK_IN: u32 = 2;
pub const BULK_OUT: u32 = 3;
pub const CONN_NONE: u32 = 0xffff_ffff;

pub const ACK: u32 = 0;
pub const PUT: u32 = 1;
pub const GET: u32 = 2;
pub const REPLY: u32 = 3;

/// How long a scripted read waits before the test fails.
pub const READ_GUARD: Duration = Duration::from_secs(20);

/// The nid4 of `ip@tcp` (§5.1): `(net << 32) | addr`, net = SOCK (2) << 16.
pub fn nid4(ip: Ipv4Addr) -> u64 {
    (0x0002_0000u64 << 32) | u64::from(u32::from(ip))
}

/// The 20-byte large NID of `ip@tcp` (§5.2): size 0, type 2, num 0 (BE), address BE.
pub fn large_nid(ip: Ipv4Addr) -> [u8; 20] {
    let mut bytes = [0u8; 20];
    bytes[1] = 2;
    bytes[4..8].copy_from_slice(&ip.octets());
    bytes
}

/// The 20-byte large NID of `ip@tcp` for an IPv6 address (§5.2): size 12, type 2, num 0,
/// the 16 address bytes.
pub fn large_nid6(ip: Ipv6Addr) -> [u8; 20] {
    let mut bytes = [0u8; 20];
    bytes[0] = 12;
    bytes[1] = 2;
    bytes[4..].copy_from_slice(&ip.octets());
    bytes
}

/// Connreq v2 (§1.2): magic, version 2, the target's large NID.
pub fn connreq_v2(target: [u8; 20]) -> Vec<u8> {
    let mut bytes = Vec::new();
    bytes.extend_from_slice(&0xacce_7100u32.to_le_bytes());
    bytes.extend_from_slice(&2u32.to_le_bytes());
    bytes.extend_from_slice(&target);
    bytes
}

/// A V4 hello (§2.4) between large NIDs; nips 0.
pub fn hello_v4(
    src: [u8; 20],
    dst: [u8; 20],
    pids: (u32, u32),
    incarnations: (u64, u64),
    ctype: u32,
) -> Vec<u8> {
    let mut bytes = Vec::new();
    bytes.extend_from_slice(&0x4572_6963u32.to_le_bytes());
    bytes.extend_from_slice(&4u32.to_le_bytes());
    bytes.extend_from_slice(&src);
    bytes.extend_from_slice(&dst);
    bytes.extend_from_slice(&pids.0.to_le_bytes());
    bytes.extend_from_slice(&pids.1.to_le_bytes());
    bytes.extend_from_slice(&incarnations.0.to_le_bytes());
    bytes.extend_from_slice(&incarnations.1.to_le_bytes());
    bytes.extend_from_slice(&ctype.to_le_bytes());
    bytes.extend_from_slice(&0u32.to_le_bytes());
    bytes
}

/// A 96-byte large-NID LNet header (§4.2) between arbitrary large NIDs.
pub fn nid16_header(dest: [u8; 20], src: [u8; 20], header: &Lnet) -> Vec<u8> {
    let mut bytes = Vec::new();
    bytes.extend_from_slice(&dest);
    bytes.extend_from_slice(&src);
    header.tail(&mut bytes);
    bytes
}

/// Connreq v1 (§1.2): magic, version 1, the target's nid4.
pub fn connreq_v1(target: Ipv4Addr) -> Vec<u8> {
    let mut bytes = Vec::new();
    bytes.extend_from_slice(&0xacce_7100u32.to_le_bytes());
    bytes.extend_from_slice(&1u32.to_le_bytes());
    bytes.extend_from_slice(&nid4(target).to_le_bytes());
    bytes
}

/// A hello's fields (§2.3, §2.4).
#[derive(Clone, Copy, Debug)]
pub struct Hello {
    pub version: u32,
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub src_pid: u32,
    pub dst_pid: u32,
    pub src_incarnation: u64,
    pub dst_incarnation: u64,
    pub ctype: u32,
}

impl Hello {
    /// A kernel connector's V3 hello (dst pid and incarnation 0).
    pub fn active(src: Ipv4Addr, dst: Ipv4Addr, incarnation: u64, ctype: u32) -> Self {
        Hello {
            version: 3,
            src,
            dst,
            src_pid: PID,
            dst_pid: 0,
            src_incarnation: incarnation,
            dst_incarnation: 0,
            ctype,
        }
    }

    /// The bytes: V2/V3 (56 bytes, nid4s) or V4 (80 bytes, large NIDs); nips 0.
    pub fn bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&0x4572_6963u32.to_le_bytes());
        bytes.extend_from_slice(&self.version.to_le_bytes());
        if self.version == 4 {
            let pids = (self.src_pid, self.dst_pid);
            let incarnations = (self.src_incarnation, self.dst_incarnation);
            return hello_v4(
                large_nid(self.src),
                large_nid(self.dst),
                pids,
                incarnations,
                self.ctype,
            );
        } else {
            bytes.extend_from_slice(&nid4(self.src).to_le_bytes());
            bytes.extend_from_slice(&nid4(self.dst).to_le_bytes());
        }
        bytes.extend_from_slice(&self.src_pid.to_le_bytes());
        bytes.extend_from_slice(&self.dst_pid.to_le_bytes());
        bytes.extend_from_slice(&self.src_incarnation.to_le_bytes());
        bytes.extend_from_slice(&self.dst_incarnation.to_le_bytes());
        bytes.extend_from_slice(&self.ctype.to_le_bytes());
        bytes.extend_from_slice(&0u32.to_le_bytes());
        bytes
    }
}

/// A 24-byte ksock header (§3.1), checksum 0.
pub fn ksock(msg_type: u32, cookie0: u64, cookie1: u64) -> Vec<u8> {
    let mut bytes = Vec::new();
    bytes.extend_from_slice(&msg_type.to_le_bytes());
    bytes.extend_from_slice(&0u32.to_le_bytes());
    bytes.extend_from_slice(&cookie0.to_le_bytes());
    bytes.extend_from_slice(&cookie1.to_le_bytes());
    bytes
}

/// A wire handle (§4.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wmd {
    pub interface: u64,
    pub object: u64,
}

impl Wmd {
    pub const NONE: Wmd = Wmd { interface: u64::MAX, object: u64::MAX };

    fn bytes(&self) -> [u8; 16] {
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&self.interface.to_le_bytes());
        bytes[8..].copy_from_slice(&self.object.to_le_bytes());
        bytes
    }
}

/// An LNet header's fields (§4.1, §4.2); `body` is the 40-byte per-type union.
#[derive(Clone, Copy, Debug)]
pub struct Lnet {
    pub dest: Ipv4Addr,
    pub src: Ipv4Addr,
    pub dest_pid: u32,
    pub src_pid: u32,
    pub msg_type: u32,
    pub payload_length: u32,
    pub body: [u8; 40],
}

impl Lnet {
    /// A header between two processes of pid [`PID`].
    pub fn new(
        dest: Ipv4Addr,
        src: Ipv4Addr,
        msg_type: u32,
        payload_length: u32,
        body: [u8; 40],
    ) -> Lnet {
        Lnet { dest, src, dest_pid: PID, src_pid: PID, msg_type, payload_length, body }
    }

    /// The 72-byte nid4 form (V2/V3).
    pub fn nid4_bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&nid4(self.dest).to_le_bytes());
        bytes.extend_from_slice(&nid4(self.src).to_le_bytes());
        self.tail(&mut bytes);
        bytes
    }

    /// The 96-byte large-NID form (V4).
    pub fn nid16_bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&large_nid(self.dest));
        bytes.extend_from_slice(&large_nid(self.src));
        self.tail(&mut bytes);
        bytes
    }

    /// A whole frame: a KSOCK_LNET header with no checksum and no ZC cookies, this header in
    /// nid4 form, then `payload`.
    pub fn frame(&self, payload: &[u8]) -> Vec<u8> {
        [ksock(KSOCK_LNET, 0, 0), self.nid4_bytes(), payload.to_vec()].concat()
    }

    pub fn tail(&self, bytes: &mut Vec<u8>) {
        bytes.extend_from_slice(&self.dest_pid.to_le_bytes());
        bytes.extend_from_slice(&self.src_pid.to_le_bytes());
        bytes.extend_from_slice(&self.msg_type.to_le_bytes());
        bytes.extend_from_slice(&self.payload_length.to_le_bytes());
        bytes.extend_from_slice(&self.body);
    }
}

pub fn put_body(ack: Wmd, match_bits: u64, hdr_data: u64, portal: u32, offset: u32) -> [u8; 40] {
    let mut body = [0u8; 40];
    body[..16].copy_from_slice(&ack.bytes());
    body[16..24].copy_from_slice(&match_bits.to_le_bytes());
    body[24..32].copy_from_slice(&hdr_data.to_le_bytes());
    body[32..36].copy_from_slice(&portal.to_le_bytes());
    body[36..40].copy_from_slice(&offset.to_le_bytes());
    body
}

pub fn get_body(reply: Wmd, match_bits: u64, portal: u32, offset: u32, sink: u32) -> [u8; 40] {
    let mut body = [0u8; 40];
    body[..16].copy_from_slice(&reply.bytes());
    body[16..24].copy_from_slice(&match_bits.to_le_bytes());
    body[24..28].copy_from_slice(&portal.to_le_bytes());
    body[28..32].copy_from_slice(&offset.to_le_bytes());
    body[32..36].copy_from_slice(&sink.to_le_bytes());
    body
}

pub fn ack_body(ack: Wmd, match_bits: u64, mlength: u32) -> [u8; 40] {
    let mut body = [0u8; 40];
    body[..16].copy_from_slice(&ack.bytes());
    body[16..24].copy_from_slice(&match_bits.to_le_bytes());
    body[24..28].copy_from_slice(&mlength.to_le_bytes());
    body
}

pub fn reply_body(reply: Wmd) -> [u8; 40] {
    let mut body = [0u8; 40];
    body[..16].copy_from_slice(&reply.bytes());
    body
}

/// `LNET_PROTO_PING_MATCHBITS` (§6.1).
pub const PING_BITS: u64 = 0x8000_0000_0000_0000;
/// `LNET_PING_INFO_MIN_SIZE`: what a discovery ping asks for.
pub const PING_SINK: u32 = 272;
/// `LNET_NI_STATUS_UP`.
pub const NI_STATUS_UP: u32 = 0x15aa_c0de;

/// A ping buffer (§6.2) for a node with `0@lo` and `ip@tcp`: header, then the two nid4
/// entries, `sequence` in entry 0's status.
pub fn ping_buffer(ip: Ipv4Addr, features: u32, sequence: u32) -> Vec<u8> {
    let mut bytes = Vec::new();
    bytes.extend_from_slice(&0x7069_6e67u32.to_le_bytes());
    bytes.extend_from_slice(&features.to_le_bytes());
    bytes.extend_from_slice(&PID.to_le_bytes());
    bytes.extend_from_slice(&2u32.to_le_bytes());
    bytes.extend_from_slice(&0x0009_0000_0000_0000u64.to_le_bytes());
    bytes.extend_from_slice(&sequence.to_le_bytes());
    bytes.extend_from_slice(&0u32.to_le_bytes());
    bytes.extend_from_slice(&nid4(ip).to_le_bytes());
    bytes.extend_from_slice(&NI_STATUS_UP.to_le_bytes());
    bytes.extend_from_slice(&0u32.to_le_bytes());
    bytes
}

/// A wire handle read back from a body (the first 16 bytes).
pub fn body_wmd(body: &[u8]) -> Wmd {
    Wmd {
        interface: u64::from_le_bytes(body[..8].try_into().unwrap()),
        object: u64::from_le_bytes(body[8..16].try_into().unwrap()),
    }
}

/// One frame as ulnet sent it: the ksock header, the LNet header (empty for a NOOP) and the
/// payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    pub ksock: Vec<u8>,
    pub lnet: Vec<u8>,
    pub payload: Vec<u8>,
}

impl Frame {
    pub fn msg_type(&self) -> u32 {
        u32::from_le_bytes(self.ksock[..4].try_into().unwrap())
    }

    pub fn cookies(&self) -> (u64, u64) {
        (
            u64::from_le_bytes(self.ksock[8..16].try_into().unwrap()),
            u64::from_le_bytes(self.ksock[16..24].try_into().unwrap()),
        )
    }

    /// All the frame's bytes, as on the wire.
    pub fn bytes(&self) -> Vec<u8> {
        [self.ksock.as_slice(), &self.lnet, &self.payload].concat()
    }
}

/// One end of a TCP connection played by the script.
pub struct Link {
    pub stream: TcpStream,
    /// The connection came from a port below 1024.
    pub privileged: bool,
}

impl Link {
    /// Connects from `from` to `to`, from the highest free privileged port when `privileged`
    /// (the process must be allowed), else from any port.
    pub fn connect(from: Ipv4Addr, to: SocketAddrV4, privileged: bool) -> Link {
        Link::connect_any(from.into(), to.into(), privileged)
    }

    /// As [`Link::connect`], IPv4 or IPv6.
    pub fn connect_any(from: std::net::IpAddr, to: SocketAddr, privileged: bool) -> Link {
        let domain = Domain::for_address(to);
        if privileged {
            for port in (512..1024u16).rev() {
                let socket = Socket::new(domain, Type::STREAM, Some(Protocol::TCP)).unwrap();
                socket.set_reuse_address(true).unwrap();
                if socket.bind(&SocketAddr::from((from, port)).into()).is_err() {
                    continue;
                }
                if socket.connect(&to.into()).is_ok() {
                    return Link::new(socket.into(), true);
                }
            }
            panic!("no free privileged port on {from}");
        }
        let socket = Socket::new(domain, Type::STREAM, Some(Protocol::TCP)).unwrap();
        socket.bind(&SocketAddr::from((from, 0)).into()).unwrap();
        socket.connect(&to.into()).unwrap();
        Link::new(socket.into(), false)
    }

    /// Accepts the next connection on `listener`.
    pub fn accept(listener: &TcpListener) -> Link {
        let (stream, peer) = listener.accept().unwrap();
        Link::new(stream, peer.port() < 1024)
    }

    fn new(stream: TcpStream, privileged: bool) -> Link {
        stream.set_read_timeout(Some(READ_GUARD)).unwrap();
        stream.set_nodelay(true).unwrap();
        Link { stream, privileged }
    }

    pub fn local_port(&self) -> u16 {
        self.stream.local_addr().unwrap().port()
    }

    pub fn peer_port(&self) -> u16 {
        self.stream.peer_addr().unwrap().port()
    }

    /// The pid ulnet's acceptor gives this link's peer: 12345 from a privileged port, else the
    /// userspace identity `port | USERFLAG` (§1.1).
    pub fn pid_seen_by_acceptor(&self) -> u32 {
        if self.privileged { PID } else { u32::from(self.local_port()) | USERFLAG }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
    }

    pub fn read_exact(&mut self, len: usize) -> Vec<u8> {
        let mut bytes = vec![0; len];
        self.stream.read_exact(&mut bytes).unwrap_or_else(|error| {
            panic!("reading {len} bytes: {error}");
        });
        bytes
    }

    /// Reads `expected.len()` bytes and checks them, byte for byte.
    pub fn expect(&mut self, expected: &[u8], what: &str) {
        let got = self.read_exact(expected.len());
        assert_eq!(hex(&got), hex(expected), "{what}");
    }

    /// Reads one frame: the ksock header, then for an LNET message the 72- (or, with `nid16`,
    /// 96-) byte LNet header and its payload.
    pub fn read_frame_form(&mut self, nid16: bool) -> Frame {
        let ksock = self.read_exact(24);
        let msg_type = u32::from_le_bytes(ksock[..4].try_into().unwrap());
        if msg_type == KSOCK_NOOP {
            return Frame { ksock, lnet: Vec::new(), payload: Vec::new() };
        }
        assert_eq!(msg_type, KSOCK_LNET, "ksock type");
        let (len, at) = if nid16 { (96, 52) } else { (72, 28) };
        let lnet = self.read_exact(len);
        let payload_length = u32::from_le_bytes(lnet[at..at + 4].try_into().unwrap());
        let payload = self.read_exact(payload_length as usize);
        Frame { ksock, lnet, payload }
    }

    pub fn read_frame(&mut self) -> Frame {
        self.read_frame_form(false)
    }

    /// Waits for the other end to close (end of stream or reset), ignoring any bytes first.
    pub fn expect_closed(&mut self, what: &str) {
        let mut buffer = [0u8; 4096];
        loop {
            match self.stream.read(&mut buffer) {
                Ok(0) => return,
                Ok(_) => continue,
                Err(error) if error.kind() == ErrorKind::ConnectionReset => return,
                Err(error) => panic!("{what}: expected the connection closed, got {error}"),
            }
        }
    }

    /// Reads until the other end closes; returns what came first.
    pub fn read_to_close(&mut self) -> Vec<u8> {
        let mut bytes = Vec::new();
        let mut buffer = [0u8; 4096];
        loop {
            match self.stream.read(&mut buffer) {
                Ok(0) => return bytes,
                Ok(count) => bytes.extend_from_slice(&buffer[..count]),
                Err(error) if error.kind() == ErrorKind::ConnectionReset => return bytes,
                Err(error) => panic!("expected the connection closed, got {error}"),
            }
        }
    }
}

pub fn hex(bytes: &[u8]) -> String {
    bytes
        .chunks(16)
        .map(|line| line.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Parses the hex of a docs/protocol/wire.md vector (whitespace separated).
pub fn unhex(text: &str) -> Vec<u8> {
    text.split_whitespace().map(|byte| u8::from_str_radix(byte, 16).unwrap()).collect()
}

// ------------------------------------------------------------------- the builders vs §10

const CLIENT: Ipv4Addr = Ipv4Addr::new(192, 168, 1, 2);
const SERVER: Ipv4Addr = Ipv4Addr::new(192, 168, 1, 1);

#[test]
fn builders_reproduce_wire_md_vectors() {
    let ping_get =
        get_body(Wmd { interface: KERNEL_COOKIE, object: 0x409 }, 0x8000_0000_0000_0000, 0, 0, 272);
    let ack_48 =
        ack_body(Wmd { interface: KERNEL_COOKIE, object: 0x40d }, 0x8000_0000_0000_0000, 48);
    let vectors = [
        (
            "10.1 connreq v1 to the server",
            connreq_v1(SERVER),
            "00 71 ce ac 01 00 00 00 01 01 a8 c0 00 00 02 00",
        ),
        (
            "10.4 V3 hello, active, CONTROL",
            Hello::active(CLIENT, SERVER, KERNEL_COOKIE, CONTROL).bytes(),
            "63 69 72 45 03 00 00 00 02 01 a8 c0 00 00 02 00
             01 01 a8 c0 00 00 02 00 39 30 00 00 00 00 00 00
             00 2a 1d 3b d9 f7 70 18 00 00 00 00 00 00 00 00
             01 00 00 00 00 00 00 00",
        ),
        (
            "10.5 V3 hello, passive reply",
            Hello::active(SERVER, CLIENT, KERNEL_INCARNATION, CONTROL).bytes(),
            "63 69 72 45 03 00 00 00 01 01 a8 c0 00 00 02 00
             02 01 a8 c0 00 00 02 00 39 30 00 00 00 00 00 00
             00 00 00 00 d0 f7 70 18 00 00 00 00 00 00 00 00
             01 00 00 00 00 00 00 00",
        ),
        (
            "10.8 keepalive NOOP",
            ksock(KSOCK_NOOP, 0, 1),
            "c0 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 01 00 00 00 00 00 00 00",
        ),
        (
            "10.10 ping GET",
            Lnet::new(SERVER, CLIENT, GET, 0, ping_get).frame(&[]),
            "c1 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
             00 00 00 00 00 00 00 00 01 01 a8 c0 00 00 02 00
             02 01 a8 c0 00 00 02 00 39 30 00 00 39 30 00 00
             02 00 00 00 00 00 00 00 00 2a 1d 3b d9 f7 70 18
             09 04 00 00 00 00 00 00 00 00 00 00 00 00 00 80
             00 00 00 00 00 00 00 00 10 01 00 00 00 00 00 00",
        ),
        (
            "10.13 ACK",
            Lnet::new(CLIENT, SERVER, ACK, 0, ack_48).frame(&[]),
            "c1 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
             00 00 00 00 00 00 00 00 02 01 a8 c0 00 00 02 00
             01 01 a8 c0 00 00 02 00 39 30 00 00 39 30 00 00
             00 00 00 00 00 00 00 00 00 2a 1d 3b d9 f7 70 18
             0d 04 00 00 00 00 00 00 00 00 00 00 00 00 00 80
             30 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00",
        ),
        (
            "§5.2: the large form of 192.168.1.2@tcp",
            large_nid(CLIENT)[..8].to_vec(),
            "00 02 00 00 c0 a8 01 02",
        ),
    ];
    for (what, built, expected) in vectors {
        assert_eq!(built, unhex(expected), "{what}");
    }
}
