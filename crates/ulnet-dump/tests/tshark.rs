//! Independent check of the encoders: a V3 exchange built with ulnet's encoders is written as a
//! pcap and decoded by tshark's LNet dissector, which must report every field as encoded.
//!
//! The dissector's quirks shape the capture and the comparison (docs/protocol/wire.md §9 has
//! the documented ones; the rest were observed with TShark 4.0.17 and are pinned here):
//! * it decodes only V2/V3 framing with nid4 headers; the connreq and hellos are plain TCP data;
//! * each ksock message goes in its own segment: a NOOP leading a segment shared with an LNET
//!   message shreds it, and a segment ending inside the length word is an exception;
//! * `lnet.src_pid` shows the wire's dest_pid and `lnet.dest_pid` its src_pid;
//! * a PUT to a portal without a Lustre sub-dissector (0, 50-52) raises a false
//!   `lnet.bad_buflen` expert error in the Malformed group;
//! * an ACK's `dst_wmd` cookies are shown byte-reversed: the dissector reads them big-endian,
//!   while every LNet header field is little-endian (the bytes here equal docs/protocol/wire.md
//!   §10.13's).
//!
//! Without tshark the tests are skipped, unless the `CI` environment variable is set.

// Helpers of a test: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::process::Command;

use ulnet_dump::pcap::{Direction, PcapWriter, TcpFlow};
use ulnet_proto::addr::{Net, Nid};
use ulnet_proto::wire::acceptor::ConnReq;
use ulnet_proto::wire::header::{Body, Header, HeaderForm, WireHandle};
use ulnet_proto::wire::hello::{ConnType, Hello, LocalIdentity, ProtoVersion, passive_conn_type};
use ulnet_proto::wire::ksock::{KsockHeader, ZcAck};
use ulnet_proto::wire::ping::{
    LNET_PING_FEAT_DISCOVERY, LNET_PING_FEAT_MULTI_RAIL, LNET_PING_FEAT_NI_STATUS,
    LNET_PING_FEAT_RTE_DISABLED, LNET_PROTO_PING_MATCHBITS, LNET_RESERVED_PORTAL, NiStatus,
    PingInfo,
};
use ulnet_proto::wire::selftest::{SRPC_RDMA_PORTAL, SRPC_REQUEST_PORTAL};

const PID: u32 = 12345;
/// A userspace peer's pid, distinct from [`PID`] so the swapped pid labels show.
const USER_PID: u32 = 0x8000_3039;
const CLIENT_INCARNATION: u64 = 0x1870_F7D9_3B1D_2A00;
const SERVER_INCARNATION: u64 = 0x1870_F7D0_0000_0000;
/// Frames of the TCP three-way handshake that precede the data.
const HANDSHAKE_FRAMES: usize = 3;

/// The LNet fields compared, in tshark's output order. `lnet.src_nid` and `lnet.dest_nid` are
/// FT_NONE subtrees that print nothing: their `lnet.nid.*` children carry the values, dest
/// first, joined by ','.
const LNET_FIELDS: &[&str] = &[
    "lnet.ksm_type",
    "lnet.ksm_zc_req_cookie",
    "lnet.ksm_zc_ack_cookie",
    "lnet.msg_type",
    "lnet.nid.addr",
    "lnet.nid.type",
    "lnet.nid.net_interface",
    "lnet.src_pid",
    "lnet.dest_pid",
    "lnet.payload_length",
    "lnet.ptl_index",
    "lnet.msg_dst_match_bits",
    "lnet.msg_dst_interface_cookie",
    "lnet.msg_dst_object_cookie",
    "lnet.msg_hdr_data",
    "lnet.offset",
    "lnet.src_offset",
    "lnet.sink_length",
    "lnet.msg_length",
];

/// Problem markers: an exception in a dissector (`_ws.malformed.expert`), any Malformed-group
/// expert item (`_ws.malformed`), and the known false positive (`lnet.bad_buflen`).
const PROBLEM_FIELDS: &[&str] = &["_ws.malformed.expert", "_ws.malformed", "lnet.bad_buflen"];

#[test]
fn tshark_decodes_a_v3_exchange_as_encoded() {
    if !tshark_available() {
        return;
    }
    let exchange = Exchange::build();
    let rows = decode(&exchange.pcap, "v3-exchange");
    assert_eq!(rows.len(), exchange.frames, "one row per frame");

    let messages: BTreeMap<usize, &Sent> = exchange.sent.iter().map(|s| (s.frame, s)).collect();
    for (index, row) in rows.iter().enumerate() {
        let frame = index + 1;
        assert_eq!(row["frame.number"], frame.to_string());
        let expected = messages.get(&frame).map(|sent| expected_fields(sent)).unwrap_or_default();
        for field in LNET_FIELDS {
            let want = expected.get(field).map_or("", String::as_str);
            assert_eq!(row[*field], want, "frame {frame}: {field}");
        }

        assert_eq!(row["_ws.malformed.expert"], "", "frame {frame}: dissector exception");
        let false_bad_buflen = messages.get(&frame).is_some_and(|sent| sent.has_false_bad_buflen());
        let flag = if false_bad_buflen { "1" } else { "" };
        assert_eq!(row["lnet.bad_buflen"], flag, "frame {frame}: lnet.bad_buflen");
        let malformed = if false_bad_buflen { "_ws.malformed" } else { "" };
        assert_eq!(row["_ws.malformed"], malformed, "frame {frame}: malformed");
    }
    // Every LNET and NOOP message was seen, with the connreq and hellos before them.
    assert_eq!(exchange.sent.len(), 7);
    assert_eq!(exchange.sent[0].frame, HANDSHAKE_FRAMES + 4);
}

/// The control for the malformed check above: a segment ending inside an LNet message's length
/// word is an exception in tshark 4.0.17 (docs/protocol/wire.md §9, "off-by-4"), and the check sees it.
#[test]
fn tshark_exception_is_detected() {
    if !tshark_available() {
        return;
    }
    let mut bytes = KsockHeader::lnet(0, 0).emit().to_vec();
    bytes.extend_from_slice(&ping_get().emit_nid4().unwrap());
    let mut pcap = PcapWriter::new();
    let (client, server) = socket_addresses();
    let mut flow = TcpFlow::open(&mut pcap, client, server, 1_000_000_000);
    flow.send(&mut pcap, Direction::ClientToServer, &bytes[..53], 1_001_000_000);
    flow.send(&mut pcap, Direction::ClientToServer, &bytes[53..], 1_002_000_000);
    let rows = decode(&pcap, "split-length-word");
    assert_eq!(rows.len(), HANDSHAKE_FRAMES + 2);
    assert_eq!(rows[HANDSHAKE_FRAMES]["_ws.malformed.expert"], "1");
}

/// Whether `tshark` can be run. Without it the test is skipped, or fails under CI.
fn tshark_available() -> bool {
    match Command::new("tshark").arg("--version").output() {
        Ok(output) if output.status.success() => true,
        _ if std::env::var_os("CI").is_some() => panic!(
            "tshark is not installed but CI is set: install it (Debian: apt-get install tshark)"
        ),
        _ => {
            eprintln!("SKIPPED: tshark is not installed; the tshark cross-check did not run");
            false
        }
    }
}

/// Writes `pcap` to a temporary file and returns tshark's fields for every frame.
fn decode(pcap: &PcapWriter, name: &str) -> Vec<BTreeMap<&'static str, String>> {
    let path = temp_path(name);
    std::fs::write(&path, pcap.as_bytes()).unwrap();
    let output = run_tshark(&path);
    let _ = std::fs::remove_file(&path);
    let fields: Vec<&'static str> =
        ["frame.number"].iter().chain(LNET_FIELDS).chain(PROBLEM_FIELDS).copied().collect();
    output
        .lines()
        .map(|line| {
            let values: Vec<&str> = line.split('|').collect();
            assert_eq!(values.len(), fields.len(), "tshark row {line:?}");
            fields.iter().zip(values).map(|(field, value)| (*field, value.to_string())).collect()
        })
        .collect()
}

fn run_tshark(path: &Path) -> String {
    let mut command = Command::new("tshark");
    // -n: no name resolution; the LNet dissector is bound to the server port explicitly.
    command.arg("-n").arg("-r").arg(path).args(["-d", "tcp.port==988,lnet"]);
    command.args(["-T", "fields", "-E", "separator=|", "-e", "frame.number"]);
    for field in LNET_FIELDS.iter().chain(PROBLEM_FIELDS) {
        command.args(["-e", field]);
    }
    let output = command.output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "tshark failed: {stderr}");
    String::from_utf8(output.stdout).unwrap()
}

/// A unique path in the system temp directory.
fn temp_path(name: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos());
    let file = format!("ulnet-tshark-{name}-{}-{nanos}.pcap", std::process::id());
    std::env::temp_dir().join(file)
}

/// What tshark must show for one sent message; fields absent here must be empty.
fn expected_fields(sent: &Sent) -> BTreeMap<&'static str, String> {
    let hex32 = |value: u32| format!("{value:#010x}");
    let hex64 = |value: u64| format!("{value:#018x}");
    let mut fields = BTreeMap::new();
    fields.insert("lnet.ksm_type", hex32(sent.ksock.msg_type.number()));
    fields.insert("lnet.ksm_zc_req_cookie", hex64(sent.ksock.zc_cookies[0]));
    fields.insert("lnet.ksm_zc_ack_cookie", hex64(sent.ksock.zc_cookies[1]));
    let Some(header) = &sent.header else {
        return fields;
    };
    let nids = [header.dest_nid, header.src_nid];
    let joined = |part: fn(&Nid) -> String| nids.iter().map(part).collect::<Vec<_>>().join(",");
    fields.insert("lnet.msg_type", (header.msg_type() as u32).to_string());
    fields.insert("lnet.nid.addr", joined(|nid| Ipv4Addr::from(nid.addr4()).to_string()));
    fields.insert("lnet.nid.type", joined(|nid| nid.lnd().0.to_string()));
    fields.insert("lnet.nid.net_interface", joined(|nid| nid.net().number.to_string()));
    // The dissector's pid labels are swapped (docs/protocol/wire.md §9 item 5).
    fields.insert("lnet.src_pid", header.dest_pid.to_string());
    fields.insert("lnet.dest_pid", header.src_pid.to_string());
    fields.insert("lnet.payload_length", header.payload_length.to_string());
    let handle = match header.body {
        Body::Put { ack_wmd, match_bits, hdr_data, ptl_index, offset } => {
            fields.insert("lnet.msg_dst_match_bits", hex64(match_bits));
            fields.insert("lnet.msg_hdr_data", hex64(hdr_data));
            fields.insert("lnet.ptl_index", ptl_index.to_string());
            fields.insert("lnet.offset", offset.to_string());
            ack_wmd
        }
        Body::Get { return_wmd, match_bits, ptl_index, src_offset, sink_length } => {
            fields.insert("lnet.msg_dst_match_bits", hex64(match_bits));
            fields.insert("lnet.ptl_index", ptl_index.to_string());
            fields.insert("lnet.src_offset", src_offset.to_string());
            fields.insert("lnet.sink_length", sink_length.to_string());
            return_wmd
        }
        Body::Ack { dst_wmd, match_bits, mlength } => {
            fields.insert("lnet.msg_dst_match_bits", hex64(match_bits));
            fields.insert("lnet.msg_length", mlength.to_string());
            // The dissector reads an ACK's handle big-endian.
            WireHandle {
                interface_cookie: dst_wmd.interface_cookie.swap_bytes(),
                object_cookie: dst_wmd.object_cookie.swap_bytes(),
            }
        }
        Body::Reply { dst_wmd } => dst_wmd,
        Body::Hello { .. } => unreachable!("HELLO is never sent as an LNET message"),
    };
    fields.insert("lnet.msg_dst_interface_cookie", hex64(handle.interface_cookie));
    fields.insert("lnet.msg_dst_object_cookie", hex64(handle.object_cookie));
    fields
}

fn client() -> Nid {
    Nid::ipv4(Net::TCP, Ipv4Addr::new(192, 168, 1, 2))
}

fn server() -> Nid {
    Nid::ipv4(Net::TCP, Ipv4Addr::new(192, 168, 1, 1))
}

/// Client 192.168.1.2:1023 (a privileged port, as kernels require), server port 988.
fn socket_addresses() -> (SocketAddrV4, SocketAddrV4) {
    (
        SocketAddrV4::new(Ipv4Addr::new(192, 168, 1, 2), 1023),
        SocketAddrV4::new(Ipv4Addr::new(192, 168, 1, 1), 988),
    )
}

/// A header between the two nodes; `to_server` picks the direction.
fn header(to_server: bool, payload_length: u32, body: Body) -> Header {
    let (dest_nid, src_nid) = if to_server { (server(), client()) } else { (client(), server()) };
    Header { dest_nid, src_nid, dest_pid: PID, src_pid: PID, payload_length, body }
}

/// docs/protocol/wire.md §10.10's ping GET.
fn ping_get() -> Header {
    header(
        true,
        0,
        Body::Get {
            return_wmd: WireHandle { interface_cookie: CLIENT_INCARNATION, object_cookie: 0x409 },
            match_bits: LNET_PROTO_PING_MATCHBITS,
            ptl_index: LNET_RESERVED_PORTAL,
            src_offset: 0,
            sink_length: 272,
        },
    )
}

/// One LNET or NOOP ksock message as sent.
struct Sent {
    frame: usize,
    ksock: KsockHeader,
    header: Option<Header>,
}

impl Sent {
    /// A PUT to a portal with no Lustre sub-dissector (docs/protocol/wire.md §9 item 8).
    fn has_false_bad_buflen(&self) -> bool {
        matches!(
            self.header.map(|header| header.body),
            Some(Body::Put { ptl_index: 0 | 50..=52, .. })
        )
    }
}

/// The capture and what each of its LNet frames carries.
struct Exchange {
    pcap: PcapWriter,
    flow: TcpFlow,
    /// Frames written so far.
    frames: usize,
    time_ns: u64,
    sent: Vec<Sent>,
}

impl Exchange {
    /// connreq, both hellos, a ping GET and its REPLY, a PUT asking for an ACK and a ZC-ACK,
    /// the ACK, the ZC-ACK NOOP, a GET with a sink length and its REPLY.
    fn build() -> Self {
        let (client_addr, server_addr) = socket_addresses();
        let mut pcap = PcapWriter::new();
        let time_ns = 1_000_000_000;
        let flow = TcpFlow::open(&mut pcap, client_addr, server_addr, time_ns);
        let mut exchange =
            Exchange { pcap, flow, frames: HANDSHAKE_FRAMES, time_ns, sent: Vec::new() };
        let to_server = Direction::ClientToServer;
        let to_client = Direction::ServerToClient;

        let mut connreq = [0u8; ConnReq::V1_LEN];
        ConnReq::new(server()).emit(&mut connreq).unwrap();
        exchange.send(to_server, &connreq);
        let client_identity =
            LocalIdentity { nid: client(), pid: PID, incarnation: CLIENT_INCARNATION };
        let server_identity =
            LocalIdentity { nid: server(), pid: PID, incarnation: SERVER_INCARNATION };
        let hello = Hello::active(ProtoVersion::V3, &client_identity, server(), ConnType::CONTROL);
        exchange.send(to_server, &emit_hello(&hello));
        let own = passive_conn_type(hello.conn_type).unwrap();
        let reply = Hello::passive_reply(&server_identity, &hello, client(), own);
        exchange.send(to_client, &emit_hello(&reply));

        let ping_get = ping_get();
        exchange.message(to_server, KsockHeader::lnet(0, 0), ping_get, &[]);
        let ping = PingInfo {
            features: LNET_PING_FEAT_NI_STATUS
                | LNET_PING_FEAT_RTE_DISABLED
                | LNET_PING_FEAT_MULTI_RAIL
                | LNET_PING_FEAT_DISCOVERY,
            pid: PID,
            sequence: 7,
            nids: vec![NiStatus::up(server())],
            large: Vec::new(),
            metadata: Vec::new(),
        }
        .to_bytes()
        .unwrap();
        let Body::Get { return_wmd: ping_wmd, .. } = ping_get.body else { unreachable!() };
        let ping_reply = header(false, ping.len() as u32, Body::Reply { dst_wmd: ping_wmd });
        exchange.message(to_client, KsockHeader::lnet(0, 0), ping_reply, &ping);

        // A PUT asking for an LNet ACK and, with ZC cookie 2, for a ZC-ACK.
        let ack_wmd = WireHandle { interface_cookie: CLIENT_INCARNATION, object_cookie: 0x40d };
        let match_bits = 0x0000_1234_5678_9abc;
        let put_payload: Vec<u8> = (0..48).collect();
        let put = header(
            true,
            put_payload.len() as u32,
            Body::Put {
                ack_wmd,
                match_bits,
                hdr_data: 0x1122_3344_5566_7788,
                ptl_index: SRPC_REQUEST_PORTAL,
                offset: 0,
            },
        );
        exchange.message(to_server, KsockHeader::lnet(2, 0), put, &put_payload);
        let ack = header(false, 0, Body::Ack { dst_wmd: ack_wmd, match_bits, mlength: 48 });
        exchange.message(to_client, KsockHeader::lnet(0, 0), ack, &[]);
        // The ZC-ACK in a segment of its own, never leading one shared with an LNET message.
        let noop = KsockHeader::noop(ZcAck::Single(2));
        exchange.send(to_client, &noop.emit());
        exchange.sent.push(Sent { frame: exchange.frames, ksock: noop, header: None });

        let get_wmd = WireHandle { interface_cookie: CLIENT_INCARNATION, object_cookie: 0x411 };
        let get = Header {
            src_pid: USER_PID,
            ..header(
                true,
                0,
                Body::Get {
                    return_wmd: get_wmd,
                    match_bits: 0xfeed_0000_0000_0001,
                    ptl_index: SRPC_RDMA_PORTAL,
                    src_offset: 4096,
                    sink_length: 512,
                },
            )
        };
        exchange.message(to_server, KsockHeader::lnet(0, 0), get, &[]);
        let data = vec![0xa5; 512];
        let reply = Header {
            dest_pid: USER_PID,
            ..header(false, data.len() as u32, Body::Reply { dst_wmd: get_wmd })
        };
        exchange.message(to_client, KsockHeader::lnet(0, 0), reply, &data);
        exchange
    }

    /// Writes `bytes` as one segment, 1 ms after the previous one.
    fn send(&mut self, direction: Direction, bytes: &[u8]) {
        self.time_ns += 1_000_000;
        self.flow.send(&mut self.pcap, direction, bytes, self.time_ns);
        self.frames += 1;
    }

    /// Sends one LNET ksock message as one segment and records it.
    fn message(
        &mut self,
        direction: Direction,
        ksock: KsockHeader,
        header: Header,
        payload: &[u8],
    ) {
        let mut bytes = ksock.emit().to_vec();
        let at = bytes.len();
        bytes.resize(at + HeaderForm::Nid4.len(), 0);
        header.emit(HeaderForm::Nid4, &mut bytes[at..]).unwrap();
        bytes.extend_from_slice(payload);
        self.send(direction, &bytes);
        self.sent.push(Sent { frame: self.frames, ksock, header: Some(header) });
    }
}

fn emit_hello(hello: &Hello) -> Vec<u8> {
    let mut bytes = vec![0u8; hello.buffer_len()];
    hello.emit(&mut bytes).unwrap();
    bytes
}
