//! The embedded example capture, built with ulnet's own encoders: two conversations a ulnet node
//! has with a peer. Over IPv4 (socklnd V3, 72-byte headers): connreq and hellos, a discovery ping
//! and its reply, a 4 KiB PUT and its ACK, a GET and its REPLY, a keepalive, and an lnet_selftest
//! session request and reply. Over IPv6 (V4, 96-byte large-NID headers): connreq v2, hellos, a
//! ping whose reply carries a large-address entry.

use std::net::{Ipv6Addr, SocketAddr};

use ulnet_dump::pcap::{Direction, PcapWriter, TcpFlow};
use ulnet_proto::addr::{Net, Nid};
use ulnet_proto::wire::acceptor::ConnReq;
use ulnet_proto::wire::header::{Body, Header, WireHandle};
use ulnet_proto::wire::hello::{ConnType, Hello, LocalIdentity, ProtoVersion};
use ulnet_proto::wire::ksock::KsockHeader;
use ulnet_proto::wire::ping::{
    LNET_PING_FEAT_DISCOVERY, LNET_PING_FEAT_MULTI_RAIL, LNET_PING_FEAT_NI_STATUS,
    LNET_PING_FEAT_PRIMARY_LARGE, LNET_PING_FEAT_RTE_DISABLED, LNET_PING_INFO_MIN_SIZE,
    LNET_PROTO_PING_MATCHBITS, LNET_RESERVED_PORTAL, NiStatus, PingInfo,
};
use ulnet_proto::wire::selftest::{
    LstName, MakeSessionReply, MakeSessionRequest, SRPC_FRAMEWORK_REQUEST_PORTAL, SRPC_RDMA_PORTAL,
    SessionId, SrpcBody, SrpcMsg,
};

const PID: u32 = 12345;
const CLIENT_COOKIE: u64 = 0x1870_f7d9_3b1d_2a00;
const SERVER_COOKIE: u64 = 0x1870_f7d0_0000_0000;

/// One side of a demo conversation.
struct Side {
    nid: Nid,
    address: SocketAddr,
    cookie: u64,
}

/// The pcap bytes of the example.
pub fn capture() -> Vec<u8> {
    let mut pcap = PcapWriter::new();
    let client = Side {
        nid: Nid::ipv4(Net::TCP, [127, 0, 0, 2].into()),
        address: SocketAddr::from(([127, 0, 0, 2], 1023)),
        cookie: CLIENT_COOKIE,
    };
    let server = Side {
        nid: Nid::ipv4(Net::TCP, [127, 0, 0, 3].into()),
        address: SocketAddr::from(([127, 0, 0, 3], 988)),
        cookie: SERVER_COOKIE,
    };
    ipv4_conversation(&mut pcap, &client, &server);
    let v6 = |last: u16| Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, last);
    let client6 = Side {
        nid: Nid::ipv6(Net::TCP, v6(2)),
        address: SocketAddr::from((v6(2), 1023)),
        cookie: CLIENT_COOKIE + 1,
    };
    let server6 = Side {
        nid: Nid::ipv6(Net::TCP, v6(3)),
        address: SocketAddr::from((v6(3), 988)),
        cookie: SERVER_COOKIE + 1,
    };
    ipv6_conversation(&mut pcap, &client6, &server6);
    pcap.into_bytes()
}

/// A conversation in progress: the flow plus the protocol version that frames its messages.
struct Conversation {
    flow: TcpFlow,
    version: ProtoVersion,
    time_ns: u64,
}

impl Conversation {
    /// Connreq and both hellos, as a ulnet connector and acceptor exchange them.
    fn open(
        pcap: &mut PcapWriter,
        client: &Side,
        server: &Side,
        version: ProtoVersion,
        start: u64,
    ) -> Self {
        let mut flow = TcpFlow::open(pcap, client.address, server.address, start);
        let connreq = ConnReq::new(server.nid);
        let mut bytes = vec![0; connreq.buffer_len()];
        // The NIDs are built above and are valid targets: emit cannot fail on its own length.
        if connreq.emit(&mut bytes).is_ok() {
            flow.send(pcap, Direction::ClientToServer, &bytes, start + 10_000);
        }
        let local = LocalIdentity { nid: client.nid, pid: PID, incarnation: client.cookie };
        let hello = Hello::active(version, &local, server.nid, ConnType::CONTROL);
        flow.send(pcap, Direction::ClientToServer, &hello_bytes(&hello), start + 20_000);
        let remote = LocalIdentity { nid: server.nid, pid: PID, incarnation: server.cookie };
        let reply = Hello::passive_reply(&remote, &hello, client.nid, ConnType::CONTROL);
        flow.send(pcap, Direction::ServerToClient, &hello_bytes(&reply), start + 60_000);
        Self { flow, version, time_ns: start + 60_000 }
    }

    /// One LNET message in its own segment, 50 us after the previous one.
    fn send(
        &mut self,
        pcap: &mut PcapWriter,
        direction: Direction,
        header: &Header,
        payload: &[u8],
    ) {
        let mut bytes = KsockHeader::lnet(0, 0).emit().to_vec();
        let form = self.version.header_form();
        let mut emitted = vec![0; form.len()];
        if header.emit(form, &mut emitted).is_err() {
            return; // the demo builds only NIDs that fit the form
        }
        bytes.extend_from_slice(&emitted);
        bytes.extend_from_slice(payload);
        self.time_ns += 50_000;
        self.flow.send(pcap, direction, &bytes, self.time_ns);
    }

    fn raw(&mut self, pcap: &mut PcapWriter, direction: Direction, bytes: &[u8]) {
        self.time_ns += 50_000;
        self.flow.send(pcap, direction, bytes, self.time_ns);
    }
}

fn hello_bytes(hello: &Hello) -> Vec<u8> {
    let mut bytes = vec![0; hello.buffer_len()];
    let len = hello.emit(&mut bytes).unwrap_or(0);
    bytes.truncate(len);
    bytes
}

fn header(from: &Side, to: &Side, body: Body, payload_length: usize) -> Header {
    Header {
        dest_nid: to.nid,
        src_nid: from.nid,
        dest_pid: PID,
        src_pid: PID,
        payload_length: payload_length as u32,
        body,
    }
}

fn ping_exchange(
    pcap: &mut PcapWriter,
    conversation: &mut Conversation,
    client: &Side,
    server: &Side,
    info: &PingInfo,
) {
    let return_wmd = WireHandle { interface_cookie: client.cookie, object_cookie: 0x409 };
    let get = Body::Get {
        return_wmd,
        match_bits: LNET_PROTO_PING_MATCHBITS,
        ptl_index: LNET_RESERVED_PORTAL,
        src_offset: 0,
        sink_length: LNET_PING_INFO_MIN_SIZE as u32,
    };
    conversation.send(pcap, Direction::ClientToServer, &header(client, server, get, 0), &[]);
    let buffer = info.to_bytes().unwrap_or_default();
    let reply = Body::Reply { dst_wmd: return_wmd };
    conversation.send(
        pcap,
        Direction::ServerToClient,
        &header(server, client, reply, buffer.len()),
        &buffer,
    );
}

fn ipv4_conversation(pcap: &mut PcapWriter, client: &Side, server: &Side) {
    let mut conversation = Conversation::open(pcap, client, server, ProtoVersion::V3, 0);
    let info = PingInfo {
        features: LNET_PING_FEAT_NI_STATUS
            | LNET_PING_FEAT_RTE_DISABLED
            | LNET_PING_FEAT_MULTI_RAIL
            | LNET_PING_FEAT_DISCOVERY,
        pid: PID,
        sequence: 1,
        nids: vec![NiStatus::up(server.nid)],
        large: Vec::new(),
        metadata: Vec::new(),
    };
    ping_exchange(pcap, &mut conversation, client, server, &info);

    // A 4 KiB PUT with an ACK requested, then a GET of the same bytes.
    let payload: Vec<u8> = (0..4096u32).map(|i| i as u8).collect();
    let ack_wmd = WireHandle { interface_cookie: client.cookie, object_cookie: 0x40d };
    let put = Body::Put { ack_wmd, match_bits: 0x1234, hdr_data: 0x77, ptl_index: 4, offset: 0 };
    conversation.send(
        pcap,
        Direction::ClientToServer,
        &header(client, server, put, payload.len()),
        &payload,
    );
    let ack = Body::Ack { dst_wmd: ack_wmd, match_bits: 0x1234, mlength: payload.len() as u32 };
    conversation.send(pcap, Direction::ServerToClient, &header(server, client, ack, 0), &[]);
    let return_wmd = WireHandle { interface_cookie: client.cookie, object_cookie: 0x411 };
    let get = Body::Get {
        return_wmd,
        match_bits: 0x1234,
        ptl_index: 4,
        src_offset: 0,
        sink_length: 4096,
    };
    conversation.send(pcap, Direction::ClientToServer, &header(client, server, get, 0), &[]);
    let reply = Body::Reply { dst_wmd: return_wmd };
    conversation.send(
        pcap,
        Direction::ServerToClient,
        &header(server, client, reply, payload.len()),
        &payload,
    );
    conversation.raw(pcap, Direction::ServerToClient, &KsockHeader::keepalive().emit());

    // lnet_selftest: the console asks the node to join its session; the node answers.
    let session = SessionId { nid: client.nid.to_nid4_lossy(), stamp: 1_234_567 };
    let name = LstName::new(b"demo").unwrap_or_default();
    let request = SrpcMsg::new(
        1,
        SrpcBody::MakeSessionRequest(MakeSessionRequest {
            reply_match_bits: 0x0001_0000_0000_0001,
            session,
            force: false,
            name,
        }),
    );
    let put = Body::Put {
        ack_wmd: WireHandle::NONE,
        match_bits: 1, // MAKE_SESSION service
        hdr_data: 0,
        ptl_index: SRPC_FRAMEWORK_REQUEST_PORTAL,
        offset: 0,
    };
    let bytes = request.emit();
    conversation.send(
        pcap,
        Direction::ClientToServer,
        &header(client, server, put, bytes.len()),
        &bytes,
    );
    let reply = SrpcMsg::new(
        1,
        SrpcBody::MakeSessionReply(MakeSessionReply {
            status: 0,
            session,
            timeout_seconds: 100,
            name,
        }),
    );
    let put = Body::Put {
        ack_wmd: WireHandle::NONE,
        match_bits: 0x0001_0000_0000_0001,
        hdr_data: 0,
        ptl_index: SRPC_RDMA_PORTAL,
        offset: 0,
    };
    let bytes = reply.emit();
    conversation.send(
        pcap,
        Direction::ServerToClient,
        &header(server, client, put, bytes.len()),
        &bytes,
    );
}

fn ipv6_conversation(pcap: &mut PcapWriter, client: &Side, server: &Side) {
    let mut conversation = Conversation::open(pcap, client, server, ProtoVersion::V4, 2_000_000);
    let info = PingInfo {
        features: LNET_PING_FEAT_NI_STATUS
            | LNET_PING_FEAT_RTE_DISABLED
            | LNET_PING_FEAT_MULTI_RAIL
            | LNET_PING_FEAT_DISCOVERY
            | LNET_PING_FEAT_PRIMARY_LARGE,
        pid: PID,
        sequence: 1,
        nids: Vec::new(),
        large: vec![NiStatus::up(server.nid)],
        metadata: Vec::new(),
    };
    ping_exchange(pcap, &mut conversation, client, server, &info);
}
