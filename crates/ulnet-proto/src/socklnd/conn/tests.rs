use super::*;
use crate::addr::{LNET_PID_LUSTRE, Net, Nid};
use crate::socklnd::handshake::{PeerHello, Side};
use crate::time::Time;
use crate::wire::header::{Body, LNET_MTU, MsgType, WireHandle};
use crate::wire::hello::LocalIdentity;
use proptest::prelude::*;
use std::net::{Ipv4Addr, Ipv6Addr};

const TIMEOUT: Duration = Duration::from_secs(50);
const T0: Time = Time::from_secs(1000);

/// docs/protocol/wire.md §10.8: keepalive NOOP.
const VECTOR_10_8: [u8; 24] =
    [0xc0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0, 0, 0, 0, 0, 0, 0];

/// docs/protocol/wire.md §10.10: ping GET, client to server.
const VECTOR_10_10: [u8; 96] = [
    0xc1, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x01, 0xa8, 0xc0, 0x00, 0x00, 0x02, 0x00,
    0x02, 0x01, 0xa8, 0xc0, 0x00, 0x00, 0x02, 0x00, 0x39, 0x30, 0x00, 0x00, 0x39, 0x30, 0x00, 0x00,
    0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x2a, 0x1d, 0x3b, 0xd9, 0xf7, 0x70, 0x18,
    0x09, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
];

/// docs/protocol/wire.md §10.13: ACK, server to client.
const VECTOR_10_13: [u8; 96] = [
    0xc1, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x01, 0xa8, 0xc0, 0x00, 0x00, 0x02, 0x00,
    0x01, 0x01, 0xa8, 0xc0, 0x00, 0x00, 0x02, 0x00, 0x39, 0x30, 0x00, 0x00, 0x39, 0x30, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x2a, 0x1d, 0x3b, 0xd9, 0xf7, 0x70, 0x18,
    0x0d, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80,
    0x30, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
];

const COOKIE: u64 = 0x1870_F7D9_3B1D_2A00;
const PING_BITS: u64 = 0x8000_0000_0000_0000;

fn client_nid() -> Nid {
    Nid::ipv4(Net::TCP, Ipv4Addr::new(192, 168, 1, 2))
}

fn server_nid() -> Nid {
    Nid::ipv4(Net::TCP, Ipv4Addr::new(192, 168, 1, 1))
}

fn established(version: ProtoVersion, peer: ProcessId, userspace: bool) -> Established {
    Established {
        side: Side::Active,
        local: LocalIdentity { nid: server_nid(), pid: LNET_PID_LUSTRE, incarnation: 1 },
        hello: PeerHello {
            peer,
            version,
            incarnation: 2,
            conn_type: ConnType::CONTROL,
            byte_order: ByteOrder::LittleEndian,
            userspace,
        },
    }
}

fn conn(version: ProtoVersion) -> Conn {
    let peer = ProcessId::lustre(client_nid());
    Conn::new(T0, ConnId(1), &established(version, peer, false), TIMEOUT)
}

fn ping_get() -> Header {
    Header {
        dest_nid: server_nid(),
        src_nid: client_nid(),
        dest_pid: LNET_PID_LUSTRE,
        src_pid: LNET_PID_LUSTRE,
        payload_length: 0,
        body: Body::Get {
            return_wmd: WireHandle { interface_cookie: COOKIE, object_cookie: 0x409 },
            match_bits: PING_BITS,
            ptl_index: 0,
            src_offset: 0,
            sink_length: 272,
        },
    }
}

fn ack_message() -> Header {
    Header {
        dest_nid: client_nid(),
        src_nid: server_nid(),
        dest_pid: LNET_PID_LUSTRE,
        src_pid: LNET_PID_LUSTRE,
        payload_length: 0,
        body: Body::Ack {
            dst_wmd: WireHandle { interface_cookie: COOKIE, object_cookie: 0x40d },
            match_bits: PING_BITS,
            mlength: 48,
        },
    }
}

fn put(payload_length: u32) -> Header {
    Header {
        dest_nid: server_nid(),
        src_nid: client_nid(),
        dest_pid: LNET_PID_LUSTRE,
        src_pid: LNET_PID_LUSTRE,
        payload_length,
        body: Body::Put {
            ack_wmd: WireHandle::NONE,
            match_bits: 42,
            hdr_data: 0,
            ptl_index: 4,
            offset: 0,
        },
    }
}

/// Bytes of an LNET message as a peer sends it: ksock header, nid4 header, payload.
fn lnet_bytes(header: &Header, zc_request: u64, zc_ack: u64, payload: &[u8]) -> Vec<u8> {
    let mut bytes = KsockHeader::lnet(zc_request, zc_ack).emit().to_vec();
    bytes.extend_from_slice(&header.emit_nid4().unwrap());
    bytes.extend_from_slice(payload);
    bytes
}

fn noop_bytes(cookies: [u64; 2]) -> Vec<u8> {
    KsockHeader { msg_type: KsockMsgType::Noop, csum: 0, zc_cookies: cookies }.emit().to_vec()
}

/// What the receiver reported, with payload pieces merged per message.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Seen {
    Noop(ZcAck),
    Message(Header),
    Payload(Vec<u8>),
}

/// Feeds `pieces` one after the other, merging payload events.
fn receive(conn: &mut Conn, zc: &mut ZcRequests, pieces: &[&[u8]]) -> Result<Vec<Seen>, ConnError> {
    let mut seen = Vec::new();
    for piece in pieces {
        let mut offset = 0;
        while offset < piece.len() {
            let (used, event) = conn.handle_input(T0, &piece[offset..], zc)?;
            assert!(used > 0 || event != RecvEvent::NeedMore, "no progress");
            let consumed = &piece[offset..offset + used];
            offset += used;
            match event {
                RecvEvent::NeedMore => assert_eq!(offset, piece.len()),
                RecvEvent::Noop(ack) => seen.push(Seen::Noop(ack)),
                RecvEvent::Message(header) => seen.push(Seen::Message(header)),
                RecvEvent::Payload { len, .. } => {
                    let data = &consumed[consumed.len() - len..];
                    match seen.last_mut() {
                        Some(Seen::Payload(bytes)) => bytes.extend_from_slice(data),
                        _ => seen.push(Seen::Payload(data.to_vec())),
                    }
                }
            }
        }
    }
    Ok(seen)
}

fn payload(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + 3) as u8).collect()
}

/// A stream of several messages: ping GET, keepalive, a PUT with payload asking for a ZC-ACK
/// and piggy-backing an ACK of our cookie 2, a NOOP acknowledging our cookies 3..=5, the ACK
/// message, an empty PUT.
fn stream() -> (Vec<u8>, Vec<Seen>) {
    let data = payload(300);
    let mut bytes = VECTOR_10_10.to_vec();
    bytes.extend_from_slice(&VECTOR_10_8);
    bytes.extend(lnet_bytes(&put(300), 9, 2, &data));
    bytes.extend(noop_bytes([3, 5]));
    bytes.extend_from_slice(&VECTOR_10_13);
    bytes.extend(lnet_bytes(&put(0), 0, 0, &[]));
    let expected = vec![
        Seen::Message(ping_get()),
        Seen::Noop(ZcAck::Keepalive),
        Seen::Message(put(300)),
        Seen::Payload(data),
        Seen::Noop(ZcAck::Range(3, 5)),
        Seen::Message(ack_message()),
        Seen::Message(put(0)),
    ];
    (bytes, expected)
}

/// Our pending requests 2..=5, as if we had sent four messages asking for ZC-ACKs.
fn pending_requests() -> ZcRequests {
    let mut zc = ZcRequests::new();
    for token in 0..4 {
        zc.register(T0, TIMEOUT, ConnId(1), MessageToken(token)).unwrap();
    }
    zc
}

// ----- Receive ----------------------------------------------------------------------------------

#[test]
fn a_stream_of_several_messages() {
    let (bytes, expected) = stream();
    let mut c = conn(ProtoVersion::V3);
    let mut zc = pending_requests();
    assert_eq!(receive(&mut c, &mut zc, &[&bytes]).unwrap(), expected);
    assert!(zc.is_empty(), "every request acknowledged");
    let acked: Vec<_> = std::iter::from_fn(|| zc.poll_acked()).collect();
    assert_eq!(acked, [0, 1, 2, 3].map(MessageToken));
    assert_eq!(c.recv_need(), RecvNeed::KsockHeader(24));
    assert_eq!(c.handle_eof(), Ok(()));
    assert_eq!(c.poll_timeout(), Some(T0 + TIMEOUT), "the owed ZC-ACK is pending");
    let stats = c.stats();
    assert_eq!((stats.messages_received, stats.noops_received), (4, 2));
    assert_eq!(stats.payload_bytes_received, 300);
    // The PUT asked for a ZC-ACK of cookie 9.
    let frame = c.poll_transmit().unwrap();
    assert_eq!(frame.kind, FrameKind::ZcAck(ZcAck::Single(9)));
    assert_eq!(frame.header_bytes(), noop_bytes([0, 9]));
    assert_eq!(c.poll_transmit(), None);
}

proptest! {
    #[test]
    fn any_segmentation_gives_the_same_events(cuts in proptest::collection::vec(0usize..800, 0..12)) {
        let (bytes, expected) = stream();
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (bytes.len() + 1)).collect();
        cuts.push(0);
        cuts.push(bytes.len());
        cuts.sort_unstable();
        let pieces: Vec<&[u8]> = cuts.windows(2).map(|w| &bytes[w[0]..w[1]]).collect();
        let mut c = conn(ProtoVersion::V3);
        let mut zc = pending_requests();
        prop_assert_eq!(receive(&mut c, &mut zc, &pieces).unwrap(), expected);
        prop_assert!(zc.is_empty());
    }
}

#[test]
fn payload_split_at_every_byte() {
    let data = payload(40);
    let bytes = lnet_bytes(&put(40), 0, 0, &data);
    for split in 0..=bytes.len() {
        let mut c = conn(ProtoVersion::V3);
        let seen = receive(&mut c, &mut ZcRequests::new(), &[&bytes[..split], &bytes[split..]]);
        assert_eq!(seen.unwrap(), [Seen::Message(put(40)), Seen::Payload(data.clone())], "{split}");
        assert_eq!(c.handle_eof(), Ok(()));
    }
}

#[test]
fn payload_read_straight_into_memory() {
    let mut c = conn(ProtoVersion::V3);
    let mut zc = ZcRequests::new();
    let bytes = lnet_bytes(&put(1000), 0, 0, &[]);
    assert_eq!(c.recv_need(), RecvNeed::KsockHeader(24));
    let (used, event) = c.handle_input(T0, &bytes[..24], &mut zc).unwrap();
    assert_eq!((used, event), (24, RecvEvent::NeedMore));
    assert_eq!(c.recv_need(), RecvNeed::LnetHeader(72));
    let (used, event) = c.handle_input(T0, &bytes[24..], &mut zc).unwrap();
    assert_eq!((used, event), (72, RecvEvent::Message(put(1000))));
    assert_eq!(c.recv_need(), RecvNeed::Payload { remaining: 1000 });
    // The driver reads into the MD and reports the counts.
    assert_eq!(c.handle_payload(T0, 600), Ok(400));
    assert_eq!(c.handle_eof(), Err(ConnError::EofMidMessage));
    assert_eq!(
        c.handle_payload(T0, 401),
        Err(ConnError::PayloadOverrun { given: 401, remaining: 400 })
    );
    assert_eq!(c.handle_payload(T0, 400), Ok(0));
    assert_eq!(c.recv_need(), RecvNeed::KsockHeader(24));
    assert_eq!(c.handle_payload(T0, 1), Err(ConnError::NotReceivingPayload));
}

#[test]
fn unknown_ksock_message_type() {
    let mut c = conn(ProtoVersion::V3);
    let mut bytes = noop_bytes([0, 0]);
    bytes[0] = 0xc2;
    assert_eq!(
        c.handle_input(T0, &bytes, &mut ZcRequests::new()),
        Err(ConnError::KsockHeader(KsockError::UnknownMsgType(0xc2)))
    );
}

#[test]
fn unknown_zc_cookies() {
    let unknown = |ack, n| Err(ConnError::UnknownZcCookie(UnknownZcCookie { ack, unknown: n }));
    // In a NOOP.
    let mut c = conn(ProtoVersion::V3);
    let mut zc = ZcRequests::new();
    assert_eq!(c.handle_input(T0, &noop_bytes([0, 7]), &mut zc), unknown(ZcAck::Single(7), 1));
    // Piggy-backed on a message.
    let mut c = conn(ProtoVersion::V3);
    let bytes = lnet_bytes(&put(0), 0, 7, &[]);
    assert_eq!(c.handle_input(T0, &bytes, &mut zc), unknown(ZcAck::Single(7), 1));
    // A range reaching past what is pending.
    let mut c = conn(ProtoVersion::V4);
    let mut zc = pending_requests(); // 2..=5
    assert_eq!(c.handle_input(T0, &noop_bytes([4, 8]), &mut zc), unknown(ZcAck::Range(4, 8), 3));
    // V2 has no keepalive: cookie 1 is simply unknown.
    let mut c = conn(ProtoVersion::V2);
    assert_eq!(c.handle_input(T0, &VECTOR_10_8, &mut zc), unknown(ZcAck::Single(1), 1));
}

#[test]
fn malformed_zc_acks() {
    let mut c = conn(ProtoVersion::V3);
    assert_eq!(
        c.handle_input(T0, &noop_bytes([3, 1]), &mut ZcRequests::new()),
        Err(ConnError::MalformedZcAck(ZcAckError::MalformedKeepalive { low: 3 }))
    );
}

#[test]
fn keepalives_and_piggy_backed_keepalive_cookies_are_ignored_on_v3_v4() {
    for version in [ProtoVersion::V3, ProtoVersion::V4] {
        let mut c = conn(version);
        let mut zc = ZcRequests::new();
        let (used, event) = c.handle_input(T0, &VECTOR_10_8, &mut zc).unwrap();
        assert_eq!((used, event), (24, RecvEvent::Noop(ZcAck::Keepalive)));
        assert_eq!(c.recv_need(), RecvNeed::KsockHeader(24));
        assert_eq!(c.poll_timeout(), None, "a NOOP leaves the connection at a boundary");
    }
}

#[test]
fn header_validation_errors() {
    let cases = [
        (
            Header { payload_length: 8, ..ping_get() },
            ConnError::InvalidMessage(HeaderReceiveError::PayloadNotAllowed {
                msg_type: MsgType::Get,
                payload_length: 8,
            }),
        ),
        (
            put(LNET_MTU + 1),
            ConnError::InvalidMessage(HeaderReceiveError::PayloadTooLarge {
                msg_type: MsgType::Put,
                payload_length: LNET_MTU + 1,
            }),
        ),
        (
            Header { body: Body::Hello { incarnation: 1, conn_type: 1 }, ..put(0) },
            ConnError::InvalidMessage(HeaderReceiveError::Hello),
        ),
        (
            Header { src_nid: Nid::ANY, ..put(0) },
            ConnError::InvalidMessage(HeaderReceiveError::SrcNidAny),
        ),
    ];
    for (header, error) in cases {
        let mut c = conn(ProtoVersion::V3);
        let bytes = lnet_bytes(&header, 0, 0, &[]);
        assert_eq!(c.handle_input(T0, &bytes, &mut ZcRequests::new()), Err(error));
    }
    // An unknown LNet type does not even decode.
    let mut bytes = lnet_bytes(&put(0), 0, 0, &[]);
    bytes[24 + 24] = 9;
    let mut c = conn(ProtoVersion::V3);
    assert_eq!(
        c.handle_input(T0, &bytes, &mut ZcRequests::new()),
        Err(ConnError::LnetHeader(HeaderError::UnknownType(9)))
    );
}

#[test]
fn userspace_peers_get_their_identity_substituted() {
    let user = ProcessId::new(client_nid(), 0x8000_9c40);
    let mut c = Conn::new(T0, ConnId(0), &established(ProtoVersion::V3, user, true), TIMEOUT);
    let claimed =
        Header { src_nid: Nid::ipv4(Net::TCP, Ipv4Addr::new(10, 9, 9, 9)), src_pid: 1, ..put(0) };
    let bytes = lnet_bytes(&claimed, 0, 0, &[]);
    let (_, event) = c.handle_input(T0, &bytes, &mut ZcRequests::new()).unwrap();
    assert_eq!(
        event,
        RecvEvent::Message(Header { src_nid: user.nid, src_pid: user.pid, ..put(0) })
    );
}

#[test]
fn byte_swapped_ksock_headers_with_little_endian_lnet_headers() {
    let peer = ProcessId::lustre(client_nid());
    let mut e = established(ProtoVersion::V3, peer, false);
    e.hello.byte_order = ByteOrder::BigEndian;
    let mut c = Conn::new(T0, ConnId(0), &e, TIMEOUT);
    let mut bytes = KsockHeader::lnet(0, 0).emit_ordered(ByteOrder::BigEndian).to_vec();
    bytes.extend_from_slice(&ping_get().emit_nid4().unwrap());
    let (used, event) = c.handle_input(T0, &bytes, &mut ZcRequests::new()).unwrap();
    assert_eq!((used, event), (96, RecvEvent::Message(ping_get())));
}

#[test]
fn v1_frames_have_no_ksock_header() {
    let mut c = conn(ProtoVersion::V1);
    assert_eq!(c.recv_need(), RecvNeed::LnetHeader(72));
    let data = payload(5);
    let mut bytes = put(5).emit_nid4().unwrap().to_vec();
    bytes.extend_from_slice(&data);
    let seen = receive(&mut c, &mut ZcRequests::new(), &[&bytes]).unwrap();
    assert_eq!(seen, [Seen::Message(put(5)), Seen::Payload(data)]);
    assert_eq!(c.recv_need(), RecvNeed::LnetHeader(72));
    c.queue_message(T0, &put(5), MessageToken(1)).unwrap();
    let frame = c.poll_transmit().unwrap();
    assert_eq!(frame.header_bytes(), put(5).emit_nid4().unwrap());
    assert!(!c.queue_keepalive(T0));
}

#[test]
fn v4_frames_carry_the_large_header() {
    let ip6 = Nid::ipv6(Net::TCP, Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2));
    let mut c = Conn::new(
        T0,
        ConnId(0),
        &established(ProtoVersion::V4, ProcessId::lustre(ip6), false),
        TIMEOUT,
    );
    let header = Header { src_nid: ip6, ..put(3) };
    let mut bytes = KsockHeader::lnet(0, 0).emit().to_vec();
    bytes.extend_from_slice(&header.emit_nid16());
    bytes.extend_from_slice(&[1, 2, 3]);
    let seen = receive(&mut c, &mut ZcRequests::new(), &[&bytes]).unwrap();
    assert_eq!(seen, [Seen::Message(header), Seen::Payload(vec![1, 2, 3])]);
    c.queue_message(T0, &header, MessageToken(0)).unwrap();
    let frame = c.poll_transmit().unwrap();
    assert_eq!(frame.header_bytes(), &bytes[..120]);
    assert_eq!(frame.wire_len(), 123);
}

// ----- ZC requests from the peer ---------------------------------------------------------------

#[test]
fn zc_requests_are_acknowledged_only_after_the_payload() {
    let mut c = conn(ProtoVersion::V3);
    let mut zc = ZcRequests::new();
    let bytes = lnet_bytes(&put(10), 9, 0, &payload(10));
    receive(&mut c, &mut zc, &[&bytes[..100]]).unwrap();
    assert_eq!(c.recv_need(), RecvNeed::Payload { remaining: 6 });
    assert!(!c.wants_to_transmit(), "not before the whole payload is in");
    receive(&mut c, &mut zc, &[&bytes[100..]]).unwrap();
    assert!(c.wants_to_transmit());
    let frame = c.poll_transmit().unwrap();
    assert_eq!(frame.kind, FrameKind::ZcAck(ZcAck::Single(9)));
    assert_eq!(frame.token, None);
    assert!(!c.wants_to_transmit(), "never acknowledged twice");
    assert_eq!(c.stats().zc_acks_sent, 1);
}

#[test]
fn zc_acks_are_batched_into_ranges_and_pairs() {
    let mut c = conn(ProtoVersion::V3);
    let mut zc = ZcRequests::new();
    for cookie in [2, 3, 4, 9, 11] {
        receive(&mut c, &mut zc, &[&lnet_bytes(&put(0), cookie, 0, &[])]).unwrap();
    }
    let frames: Vec<_> = std::iter::from_fn(|| c.poll_transmit()).collect();
    assert_eq!(frames.len(), 2);
    assert_eq!(frames[0].header_bytes(), noop_bytes([2, 4]));
    assert_eq!(frames[1].header_bytes(), noop_bytes([11, 9]));
    assert_eq!(c.stats().zc_acks_sent, 5);
    // V2 returns one cookie per NOOP.
    let mut c = conn(ProtoVersion::V2);
    for cookie in [2, 3] {
        receive(&mut c, &mut zc, &[&lnet_bytes(&put(0), cookie, 0, &[])]).unwrap();
    }
    let frames: Vec<_> = std::iter::from_fn(|| c.poll_transmit()).collect();
    assert_eq!(
        frames.iter().map(|f| f.kind).collect::<Vec<_>>(),
        [FrameKind::ZcAck(ZcAck::Single(2)), FrameKind::ZcAck(ZcAck::Single(3))]
    );
}

#[test]
fn zc_acks_piggy_back_on_queued_messages() {
    let mut c = conn(ProtoVersion::V3);
    let mut zc = ZcRequests::new();
    for cookie in [5, 6] {
        receive(&mut c, &mut zc, &[&lnet_bytes(&put(0), cookie, 0, &[])]).unwrap();
    }
    c.queue_message(T0, &ack_message(), MessageToken(1)).unwrap();
    let frame = c.poll_transmit().unwrap();
    assert_eq!(frame.kind, FrameKind::Message { zc_ack: 5, zc_request: 0 });
    assert_eq!(&frame.header_bytes()[..24], KsockHeader::lnet(0, 5).emit());
    assert_eq!(frame.header_bytes()[24..], VECTOR_10_13[24..]);
    let frame = c.poll_transmit().unwrap();
    assert_eq!(frame.kind, FrameKind::ZcAck(ZcAck::Single(6)));
    assert_eq!(c.poll_transmit(), None);
}

#[test]
fn zc_request_round_trip_between_two_connections() {
    let mut sender = conn(ProtoVersion::V3);
    let mut sender_zc = ZcRequests::new();
    let cookie = sender
        .queue_message_with_zc_request(T0, &put(4), MessageToken(77), &mut sender_zc)
        .unwrap();
    assert_eq!(cookie, 2);
    let frame = sender.poll_transmit().unwrap();
    let mut wire = frame.header_bytes().to_vec();
    wire.extend_from_slice(&[1, 2, 3, 4]);
    sender.on_transmitted(T0, wire.len()).unwrap();
    // Written is not sent: the message completes on the peer's ACK.
    assert_eq!(sender.poll_sent(), None);
    assert_eq!(sender_zc.len(), 1);

    let mut receiver = conn(ProtoVersion::V3);
    let mut receiver_zc = ZcRequests::new();
    receive(&mut receiver, &mut receiver_zc, &[&wire]).unwrap();
    let ack = receiver.poll_transmit().unwrap();
    let seen = receive(&mut sender, &mut sender_zc, &[ack.header_bytes()]).unwrap();
    assert_eq!(seen, [Seen::Noop(ZcAck::Single(2))]);
    assert_eq!(sender_zc.poll_acked(), Some(MessageToken(77)));
    assert!(sender_zc.is_empty());
}

#[test]
fn too_many_owed_zc_acks_close_the_connection() {
    let mut c = conn(ProtoVersion::V3);
    let mut zc = ZcRequests::new();
    let mut stream = Vec::new();
    for cookie in 0..=crate::socklnd::zc::MAX_PENDING_ZC_ACKS as u64 {
        stream.extend(lnet_bytes(&put(0), cookie + 2, 0, &[]));
    }
    assert_eq!(receive(&mut c, &mut zc, &[&stream]), Err(ConnError::TooManyZcAcks(TooManyZcAcks)));
}

// ----- Transmit ---------------------------------------------------------------------------------

#[test]
fn transmit_reproduces_vector_10_10() {
    let mut c = conn(ProtoVersion::V3);
    c.queue_message(T0, &ping_get(), MessageToken(3)).unwrap();
    assert_eq!(c.queued_bytes(), 96);
    let frame = c.poll_transmit().unwrap();
    assert_eq!(frame.header_bytes(), VECTOR_10_10);
    assert_eq!((frame.payload_len, frame.token), (0, Some(MessageToken(3))));
    assert_eq!(c.queued_bytes(), 96, "handed out, not yet written");
    c.on_transmitted(T0, 50).unwrap();
    assert_eq!(c.poll_sent(), None);
    c.on_transmitted(T0, 46).unwrap();
    assert_eq!(c.poll_sent(), Some(MessageToken(3)));
    assert_eq!(c.queued_bytes(), 0);
    assert_eq!(c.on_transmitted(T0, 1), Err(ConnError::TransmitOverrun { excess: 1 }));
    assert_eq!(c.stats().messages_sent, 1);
}

#[test]
fn frames_are_written_in_order_with_payloads() {
    let mut c = conn(ProtoVersion::V3);
    c.queue_message(T0, &put(1000), MessageToken(1)).unwrap();
    c.queue_message(T0, &put(0), MessageToken(2)).unwrap();
    assert_eq!(c.queued_bytes(), 1096 + 96);
    let first = c.poll_transmit().unwrap();
    let second = c.poll_transmit().unwrap();
    assert_eq!((first.wire_len(), second.wire_len()), (1096, 96));
    // One vectored write covering the first frame and part of the second.
    c.on_transmitted(T0, 1100).unwrap();
    assert_eq!(c.poll_sent(), Some(MessageToken(1)));
    assert_eq!(c.poll_sent(), None);
    assert_eq!(c.queued_bytes(), 92);
    c.on_transmitted(T0, 92).unwrap();
    assert_eq!(c.poll_sent(), Some(MessageToken(2)));
}

#[test]
fn queue_errors() {
    let mut c = conn(ProtoVersion::V3);
    let ip6 = Nid::ipv6(Net::TCP, Ipv6Addr::LOCALHOST);
    assert_eq!(
        c.queue_message(T0, &Header { dest_nid: ip6, ..put(0) }, MessageToken(0)),
        Err(QueueError::Header(HeaderEmitError::DestNidNotNid4(ip6)))
    );
    assert_eq!(
        c.queue_message(T0, &Header { payload_length: 1, ..ping_get() }, MessageToken(0)),
        Err(QueueError::Invalid(HeaderReceiveError::PayloadNotAllowed {
            msg_type: MsgType::Get,
            payload_length: 1
        }))
    );
    for token in 0..MAX_QUEUED_MESSAGES as u64 {
        c.queue_message(T0, &put(0), MessageToken(token)).unwrap();
    }
    assert_eq!(c.queue_message(T0, &put(0), MessageToken(0)), Err(QueueError::Full));
    let mut v1 = conn(ProtoVersion::V1);
    assert_eq!(
        v1.queue_message_with_zc_request(T0, &put(0), MessageToken(0), &mut ZcRequests::new()),
        Err(QueueError::ZcUnsupported)
    );
}

#[test]
fn keepalives() {
    let mut c = conn(ProtoVersion::V3);
    assert!(c.queue_keepalive(T0));
    assert!(c.queue_keepalive(T0), "idempotent");
    let frame = c.poll_transmit().unwrap();
    assert_eq!(frame.header_bytes(), VECTOR_10_8);
    assert_eq!(frame.kind, FrameKind::Keepalive);
    assert_eq!(c.poll_transmit(), None);
    assert_eq!(c.stats().keepalives_sent, 1);
    // Not when something else is queued, and never on V2.
    c.queue_message(T0, &put(0), MessageToken(0)).unwrap();
    assert!(!c.queue_keepalive(T0));
    assert!(!conn(ProtoVersion::V2).queue_keepalive(T0));
}

#[test]
fn an_owed_ack_replaces_a_queued_keepalive() {
    let mut c = conn(ProtoVersion::V3);
    assert!(c.queue_keepalive(T0));
    receive(&mut c, &mut ZcRequests::new(), &[&lnet_bytes(&put(0), 3, 0, &[])]).unwrap();
    let frames: Vec<_> = std::iter::from_fn(|| c.poll_transmit()).collect();
    assert_eq!(
        frames.iter().map(|f| f.kind).collect::<Vec<_>>(),
        [FrameKind::ZcAck(ZcAck::Single(3))]
    );
}

#[test]
fn abort_returns_unsent_messages() {
    let mut c = conn(ProtoVersion::V3);
    for token in 0..3 {
        c.queue_message(T0, &put(10), MessageToken(token)).unwrap();
    }
    c.poll_transmit().unwrap();
    c.poll_transmit().unwrap();
    c.on_transmitted(T0, 106).unwrap();
    assert_eq!(c.poll_sent(), Some(MessageToken(0)));
    assert_eq!(c.abort(), [MessageToken(1), MessageToken(2)]);
}

// ----- Timers -----------------------------------------------------------------------------------

#[test]
fn stuck_receive_times_out() {
    let mut c = conn(ProtoVersion::V3);
    let mut zc = ZcRequests::new();
    assert_eq!(c.poll_timeout(), None);
    let t = T0 + Duration::from_secs(7);
    c.handle_input(t, &VECTOR_10_10[..30], &mut zc).unwrap();
    assert_eq!(c.poll_timeout(), Some(t + TIMEOUT));
    assert_eq!(c.last_alive(), t);
    assert_eq!(c.handle_timeout(t + TIMEOUT - Duration::from_nanos(1)), Ok(()));
    // Progress pushes the deadline.
    let later = t + Duration::from_secs(20);
    c.handle_input(later, &VECTOR_10_10[30..40], &mut zc).unwrap();
    assert_eq!(c.handle_timeout(t + TIMEOUT), Ok(()));
    assert_eq!(c.handle_timeout(later + TIMEOUT), Err(ConnError::ReceiveTimeout));
    // A completed message clears it.
    c.handle_input(later, &VECTOR_10_10[40..], &mut zc).unwrap();
    assert_eq!(c.poll_timeout(), None);
}

#[test]
fn stuck_send_times_out() {
    let mut c = conn(ProtoVersion::V3);
    c.queue_message(T0, &put(100), MessageToken(0)).unwrap();
    assert_eq!(c.poll_timeout(), Some(T0 + TIMEOUT));
    c.poll_transmit().unwrap();
    let t = T0 + Duration::from_secs(30);
    c.on_transmitted(t, 10).unwrap();
    assert_eq!(c.poll_timeout(), Some(t + TIMEOUT));
    assert_eq!(c.handle_timeout(t + TIMEOUT), Err(ConnError::SendTimeout));
    c.on_transmitted(t, 186).unwrap();
    assert_eq!(c.poll_timeout(), None);
    // Bytes left in the socket keep it armed; their draining is liveness.
    c.set_socket_unsent(t, 4000);
    assert_eq!(c.poll_timeout(), Some(t + TIMEOUT));
    assert_eq!(c.queued_bytes(), 4000);
    let later = t + Duration::from_secs(5);
    c.set_socket_unsent(later, 1000);
    assert_eq!(c.last_alive(), later);
    assert_eq!(c.poll_timeout(), Some(later + TIMEOUT));
    c.set_socket_unsent(later, 0);
    assert_eq!(c.poll_timeout(), None);
}
