use super::*;
use crate::addr::{LNET_PID_LUSTRE, Net};
use crate::time::Time;
use crate::wire::acceptor::{LNET_PROTO_ACCEPTOR_MAGIC, LNET_PROTO_MAGIC, LNET_PROTO_TCP_MAGIC};
use crate::wire::hello::ByteOrder;
use proptest::prelude::*;
use std::net::{Ipv4Addr, Ipv6Addr};

const CLIENT_INCARNATION: u64 = 0x1870_F7D9_3B1D_2A00;
const SERVER_INCARNATION: u64 = 0x1870_F7D0_0000_0000;
const SOCK_TIMEOUT: Duration = Duration::from_secs(50);
const ACCEPT_TIMEOUT: Duration = Duration::from_secs(5);
const T0: Time = Time::from_secs(100);

/// docs/protocol/wire.md §10.1: connreq v1 for 192.168.1.1@tcp.
const VECTOR_10_1: [u8; 16] = [
    0x00, 0x71, 0xce, 0xac, 0x01, 0x00, 0x00, 0x00, 0x01, 0x01, 0xa8, 0xc0, 0x00, 0x00, 0x02, 0x00,
];

/// docs/protocol/wire.md §10.4: the client's V3 hello, CONTROL.
const VECTOR_10_4: [u8; 56] = [
    0x63, 0x69, 0x72, 0x45, 0x03, 0x00, 0x00, 0x00, 0x02, 0x01, 0xa8, 0xc0, 0x00, 0x00, 0x02, 0x00,
    0x01, 0x01, 0xa8, 0xc0, 0x00, 0x00, 0x02, 0x00, 0x39, 0x30, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x2a, 0x1d, 0x3b, 0xd9, 0xf7, 0x70, 0x18, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
];

/// docs/protocol/wire.md §10.5: the server's V3 reply.
const VECTOR_10_5: [u8; 56] = [
    0x63, 0x69, 0x72, 0x45, 0x03, 0x00, 0x00, 0x00, 0x01, 0x01, 0xa8, 0xc0, 0x00, 0x00, 0x02, 0x00,
    0x02, 0x01, 0xa8, 0xc0, 0x00, 0x00, 0x02, 0x00, 0x39, 0x30, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0xd0, 0xf7, 0x70, 0x18, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
];

fn client() -> LocalIdentity {
    LocalIdentity {
        nid: Nid::ipv4(Net::TCP, Ipv4Addr::new(192, 168, 1, 2)),
        pid: LNET_PID_LUSTRE,
        incarnation: CLIENT_INCARNATION,
    }
}

fn server() -> LocalIdentity {
    LocalIdentity {
        nid: Nid::ipv4(Net::TCP, Ipv4Addr::new(192, 168, 1, 1)),
        pid: LNET_PID_LUSTRE,
        incarnation: SERVER_INCARNATION,
    }
}

fn id(local: &LocalIdentity) -> ProcessId {
    ProcessId::new(local.nid, local.pid)
}

fn client_addr(port: u16) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(192, 168, 1, 2)), port)
}

fn accept_config(policy: AcceptPolicy) -> AcceptConfig {
    AcceptConfig { policy, accept_timeout: ACCEPT_TIMEOUT, local_nis: vec![server()] }
}

fn active(conn_type: ConnType, version: ProtoVersion) -> ActiveHandshake {
    ActiveHandshake::new(T0, client(), id(&server()), conn_type, version, SOCK_TIMEOUT).unwrap()
}

fn passive(policy: AcceptPolicy, port: u16) -> PassiveHandshake {
    PassiveHandshake::new(T0, &accept_config(policy), client_addr(port)).unwrap()
}

fn emit(hello: &Hello) -> Vec<u8> {
    let mut bytes = vec![0u8; hello.buffer_len()];
    hello.emit(&mut bytes).unwrap();
    bytes
}

fn emit_ordered(hello: &Hello, order: ByteOrder) -> Vec<u8> {
    let mut bytes = vec![0u8; hello.buffer_len()];
    hello.emit_ordered(&mut bytes, order).unwrap();
    bytes
}

fn connreq_for(target: Nid) -> Vec<u8> {
    let request = ConnReq::new(target);
    let mut bytes = vec![0u8; request.buffer_len()];
    request.emit(&mut bytes).unwrap();
    bytes
}

/// Feeds all of `bytes`, expecting the machine to consume them all and stop at a decision.
fn feed_passive(machine: &mut PassiveHandshake, bytes: &[u8]) -> Result<PassiveStep, PassiveError> {
    let (used, step) = machine.handle_input(T0, bytes)?;
    assert_eq!(used, bytes.len(), "step {step:?}");
    Ok(step)
}

fn decide_candidate(machine: &mut PassiveHandshake, bytes: &[u8]) -> Candidate {
    match feed_passive(machine, bytes) {
        Ok(PassiveStep::Decide(candidate)) => candidate,
        other => panic!("expected a decision, got {other:?}"),
    }
}

fn feed_active(machine: &mut ActiveHandshake, bytes: &[u8]) -> Result<ActiveOutcome, ActiveError> {
    match machine.handle_input(T0, bytes)? {
        (used, ActiveStep::Finished(outcome)) => {
            assert_eq!(used, bytes.len());
            Ok(outcome)
        }
        other => panic!("expected an outcome, got {other:?}"),
    }
}

/// The hello a peer sends as the acceptor's reply.
fn reply_hello(version: ProtoVersion, conn_type: ConnType) -> Hello {
    let received = Hello::active(version, &client(), server().nid, ConnType::CONTROL);
    Hello::passive_reply(&server(), &received, client().nid, conn_type)
}

// ----- Vectors --------------------------------------------------------------------------------

#[test]
fn active_sends_vectors_10_1_and_10_4() {
    let machine = active(ConnType::CONTROL, ProtoVersion::V3);
    let mut expected = VECTOR_10_1.to_vec();
    expected.extend_from_slice(&VECTOR_10_4);
    assert_eq!(machine.initial_bytes(), expected);
    assert_eq!(machine.read_hint(), 4);
}

#[test]
fn passive_reads_10_1_and_10_4_and_replies_10_5() {
    let mut machine = passive(AcceptPolicy::Secure, 1023);
    assert_eq!(machine.read_hint(), 4);
    let mut bytes = VECTOR_10_1.to_vec();
    bytes.extend_from_slice(&VECTOR_10_4);
    let candidate = decide_candidate(&mut machine, &bytes);
    let expected_hello = PeerHello {
        peer: id(&client()),
        version: ProtoVersion::V3,
        incarnation: CLIENT_INCARNATION,
        conn_type: ConnType::CONTROL,
        byte_order: ByteOrder::LittleEndian,
        userspace: false,
    };
    assert_eq!(
        candidate,
        Candidate { local: server(), hello: expected_hello, connreq: ConnReqVersion::V1 }
    );
    assert_eq!(machine.read_hint(), 0);
    match machine.decide(Admission::Accept) {
        Ok(PassiveStep::Established { established, reply }) => {
            assert_eq!(reply, VECTOR_10_5);
            assert_eq!(established.side, Side::Passive);
            assert_eq!(established.hello, expected_hello);
            assert_eq!(established.header_form(), HeaderForm::Nid4);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn active_accepts_10_5() {
    let mut machine = active(ConnType::CONTROL, ProtoVersion::V3);
    let outcome = feed_active(&mut machine, &VECTOR_10_5).unwrap();
    let ActiveOutcome::Established(established) = outcome else { panic!("{outcome:?}") };
    assert_eq!(established.peer(), id(&server()));
    assert_eq!(established.hello.incarnation, SERVER_INCARNATION);
    assert_eq!(established.hello.conn_type, ConnType::CONTROL);
    assert_eq!(established.hello.version, ProtoVersion::V3);
    assert_eq!(established.local, client());
    assert_eq!(machine.read_hint(), 0);
    assert_eq!(machine.poll_timeout(), None);
    assert_eq!(machine.handle_input(T0, &[0]), Err(ActiveError::Finished));
}

#[test]
fn active_against_passive_for_every_type() {
    for conn_type in [ConnType::ANY, ConnType::CONTROL, ConnType::BULK_IN, ConnType::BULK_OUT] {
        let mut dialler = active(conn_type, ProtoVersion::V3);
        let mut acceptor = passive(AcceptPolicy::Secure, 1000);
        let candidate = decide_candidate(&mut acceptor, dialler.initial_bytes());
        assert_eq!(candidate.hello.conn_type, conn_type.invert());
        let Ok(PassiveStep::Established { established: theirs, reply }) =
            acceptor.decide(Admission::Accept)
        else {
            panic!()
        };
        let ActiveOutcome::Established(ours) = feed_active(&mut dialler, &reply).unwrap() else {
            panic!()
        };
        assert_eq!(ours.hello.conn_type, conn_type);
        assert_eq!(theirs.hello.conn_type, conn_type.invert());
        assert_eq!(ours.hello.incarnation, SERVER_INCARNATION);
        assert_eq!(theirs.hello.incarnation, CLIENT_INCARNATION);
    }
}

#[test]
fn ipv6_uses_connreq_v2_and_hello_v4() {
    let ip6 = |last| Nid::ipv6(Net::TCP, Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, last));
    let server6 = LocalIdentity { nid: ip6(1), ..server() };
    let client6 = LocalIdentity { nid: ip6(2), ..client() };
    let version = ProtoVersion::default_for(true);
    assert_eq!(version, ProtoVersion::V4);
    let mut dialler =
        ActiveHandshake::new(T0, client6, id(&server6), ConnType::BULK_IN, version, SOCK_TIMEOUT)
            .unwrap();
    assert_eq!(dialler.initial_bytes().len(), 28 + 80);
    let config =
        AcceptConfig { local_nis: vec![server(), server6], ..accept_config(AcceptPolicy::Secure) };
    let addr = SocketAddr::new(IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2)), 1022);
    let mut acceptor = PassiveHandshake::new(T0, &config, addr).unwrap();
    let candidate = decide_candidate(&mut acceptor, dialler.initial_bytes());
    assert_eq!(candidate.connreq, ConnReqVersion::V2);
    assert_eq!(candidate.local, server6);
    assert_eq!(candidate.hello.version, ProtoVersion::V4);
    let Ok(PassiveStep::Established { established, reply }) = acceptor.decide(Admission::Accept)
    else {
        panic!()
    };
    assert_eq!(established.header_form(), HeaderForm::Nid16);
    assert_eq!(reply.len(), 80);
    let ActiveOutcome::Established(ours) = feed_active(&mut dialler, &reply).unwrap() else {
        panic!()
    };
    assert_eq!(ours.hello.conn_type, ConnType::BULK_IN);
    assert_eq!(ours.header_form(), HeaderForm::Nid16);
}

#[test]
fn byte_swapped_peers_are_understood_and_answered_little_endian() {
    // A big-endian connector: swapped connreq and V3 hello.
    let mut bytes = LNET_PROTO_ACCEPTOR_MAGIC.to_be_bytes().to_vec();
    bytes.extend_from_slice(&1u32.to_be_bytes());
    bytes.extend_from_slice(&server().nid.to_nid4().unwrap().to_be_bytes());
    let hello = Hello::active(ProtoVersion::V3, &client(), server().nid, ConnType::CONTROL);
    bytes.extend_from_slice(&emit_ordered(&hello, ByteOrder::BigEndian));
    let mut machine = passive(AcceptPolicy::Secure, 1023);
    let candidate = decide_candidate(&mut machine, &bytes);
    assert_eq!(candidate.hello.byte_order, ByteOrder::BigEndian);
    assert_eq!(candidate.hello.peer, id(&client()));
    assert_eq!(candidate.hello.incarnation, CLIENT_INCARNATION);
    let Ok(PassiveStep::Established { reply, .. }) = machine.decide(Admission::Accept) else {
        panic!()
    };
    assert_eq!(reply, VECTOR_10_5, "ulnet always answers in its own (little-endian) order");

    // A big-endian acceptor's reply.
    let mut dialler = active(ConnType::CONTROL, ProtoVersion::V3);
    let swapped =
        emit_ordered(&reply_hello(ProtoVersion::V3, ConnType::CONTROL), ByteOrder::BigEndian);
    let ActiveOutcome::Established(established) = feed_active(&mut dialler, &swapped).unwrap()
    else {
        panic!()
    };
    assert_eq!(established.hello.byte_order, ByteOrder::BigEndian);
}

proptest! {
    /// Whatever the TCP segmentation, the acceptor consumes exactly the connreq and the hello,
    /// reaches the same candidate, and the connector the same outcome.
    #[test]
    fn any_segmentation_gives_the_same_result(
        cuts in proptest::collection::vec(0usize..72, 0..6),
        reply_cuts in proptest::collection::vec(0usize..56, 0..4),
        trailing in proptest::collection::vec(any::<u8>(), 0..30),
    ) {
        let mut stream = VECTOR_10_1.to_vec();
        stream.extend_from_slice(&VECTOR_10_4);
        let expected = {
            let mut m = passive(AcceptPolicy::Secure, 1023);
            decide_candidate(&mut m, &stream)
        };
        // Bytes the connector might pipeline after its hello must not be consumed.
        stream.extend_from_slice(&trailing);
        let mut machine = passive(AcceptPolicy::Secure, 1023);
        let mut pieces = cuts.clone();
        pieces.push(stream.len());
        pieces.sort_unstable();
        let (mut start, mut offset) = (0, 0);
        let mut candidate = None;
        for end in pieces {
            let end = end.max(start);
            let piece = &stream[offset.max(start)..end];
            start = end;
            if candidate.is_some() { break; }
            let (used, step) = machine.handle_input(T0, piece).unwrap();
            offset += used;
            match step {
                PassiveStep::NeedMore(_) => prop_assert_eq!(used, piece.len()),
                PassiveStep::Decide(c) => candidate = Some(c),
                other => prop_assert!(false, "{:?}", other),
            }
        }
        prop_assert_eq!(candidate, Some(expected));
        prop_assert_eq!(offset, 72);

        let mut dialler = active(ConnType::CONTROL, ProtoVersion::V3);
        let mut reply = VECTOR_10_5.to_vec();
        reply.extend_from_slice(&trailing);
        let mut pieces = reply_cuts.clone();
        pieces.push(reply.len());
        pieces.sort_unstable();
        let mut offset = 0;
        let mut outcome = None;
        for end in pieces {
            if outcome.is_some() || end < offset { continue; }
            let (used, step) = dialler.handle_input(T0, &reply[offset..end]).unwrap();
            offset += used;
            if let ActiveStep::Finished(o) = step { outcome = Some(o); }
        }
        prop_assert_eq!(offset, 56);
        prop_assert!(matches!(outcome, Some(ActiveOutcome::Established(_))));
    }
}

#[test]
fn byte_at_a_time() {
    let mut machine = passive(AcceptPolicy::Secure, 1023);
    let mut bytes = VECTOR_10_1.to_vec();
    bytes.extend_from_slice(&VECTOR_10_4);
    let mut hints = Vec::new();
    for (index, byte) in bytes.iter().enumerate() {
        hints.push(machine.read_hint());
        let (used, step) = machine.handle_input(T0, &[*byte]).unwrap();
        assert_eq!(used, 1);
        if index + 1 < bytes.len() {
            assert!(matches!(step, PassiveStep::NeedMore(_)), "{index}: {step:?}");
        } else {
            assert!(matches!(step, PassiveStep::Decide(_)));
        }
    }
    // The hint counts down to each of the kernel's reads: magic, version, NID, then the hello's
    // magic, version and the rest.
    assert_eq!(&hints[..9], &[4, 3, 2, 1, 4, 3, 2, 1, 8]);
    assert_eq!(&hints[16..25], &[4, 3, 2, 1, 4, 3, 2, 1, 48]);
}

// ----- Acceptor refusals -----------------------------------------------------------------------

#[test]
fn insecure_port_in_secure_mode_is_refused_before_reading() {
    let config = accept_config(AcceptPolicy::Secure);
    assert_eq!(
        PassiveHandshake::new(T0, &config, client_addr(1024)).err(),
        Some(PassiveError::InsecurePort { port: 1024 })
    );
    assert!(PassiveHandshake::new(T0, &config, client_addr(1023)).is_ok());
    assert!(
        PassiveHandshake::new(T0, &accept_config(AcceptPolicy::All), client_addr(1024)).is_ok()
    );
    assert_eq!(
        PassiveHandshake::new(T0, &accept_config(AcceptPolicy::None), client_addr(988)).err(),
        Some(PassiveError::AcceptDisabled)
    );
}

#[test]
fn unknown_connreq_version_gets_the_downgrade_answer() {
    let mut machine = passive(AcceptPolicy::Secure, 1023);
    let mut bytes = LNET_PROTO_ACCEPTOR_MAGIC.to_le_bytes().to_vec();
    bytes.extend_from_slice(&3u32.to_le_bytes());
    let step = feed_passive(&mut machine, &bytes).unwrap();
    assert_eq!(
        step,
        PassiveStep::Rejected(Rejection {
            reason: RejectReason::Downgrade(DowngradeReason::UnknownVersion(3)),
            reply: DOWNGRADE_ANSWER.to_vec(),
        })
    );
    assert_eq!(machine.read_hint(), 0);
    assert_eq!(machine.handle_input(T0, &[0]), Err(PassiveError::OutOfOrder));
}

#[test]
fn unified_protocol_probe_gets_the_downgrade_answer() {
    let mut machine = passive(AcceptPolicy::Secure, 1023);
    let step = feed_passive(&mut machine, &LNET_PROTO_MAGIC.to_be_bytes()).unwrap();
    let PassiveStep::Rejected(rejection) = step else { panic!("{step:?}") };
    assert_eq!(rejection.reason, RejectReason::Downgrade(DowngradeReason::UnifiedProtocolProbe));
    assert_eq!(rejection.reply, DOWNGRADE_ANSWER);
}

#[test]
fn connector_reading_the_downgrade_answer_sees_a_bad_magic() {
    let mut machine = active(ConnType::CONTROL, ProtoVersion::V3);
    assert_eq!(
        machine.handle_input(T0, &DOWNGRADE_ANSWER),
        Err(ActiveError::Hello(HelloError::BadMagic(LNET_PROTO_ACCEPTOR_MAGIC)))
    );
    assert_eq!(machine.handle_input(T0, &[]), Err(ActiveError::Finished));
}

#[test]
fn bad_connreq_magics_close_silently() {
    let mut machine = passive(AcceptPolicy::Secure, 1023);
    assert_eq!(
        machine.handle_input(T0, &LNET_PROTO_TCP_MAGIC.to_le_bytes()),
        Err(PassiveError::ConnReq(AcceptorError::OldSocknalMagic(LNET_PROTO_TCP_MAGIC)))
    );
    let mut machine = passive(AcceptPolicy::Secure, 1023);
    assert_eq!(
        machine.handle_input(T0, b"GET "),
        Err(PassiveError::ConnReq(AcceptorError::UnknownMagic(u32::from_le_bytes(*b"GET "))))
    );
}

#[test]
fn connreq_must_name_a_local_nid_exactly() {
    let same_net = Nid::ipv4(Net::TCP, Ipv4Addr::new(192, 168, 1, 9));
    let other_net = server().nid.with_net(Net::new(crate::addr::LndType::SOCK, 1));
    for target in [same_net, other_net] {
        let mut machine = passive(AcceptPolicy::Secure, 1023);
        assert_eq!(
            machine.handle_input(T0, &connreq_for(target)),
            Err(PassiveError::NoMatchingNi(target))
        );
    }
}

#[test]
fn unknown_hello_version_gets_our_default_with_conn_none() {
    let mut bytes = VECTOR_10_1.to_vec();
    bytes.extend_from_slice(&LNET_PROTO_MAGIC.to_le_bytes());
    bytes.extend_from_slice(&5u32.to_le_bytes());
    let mut machine = passive(AcceptPolicy::Secure, 1023);
    let PassiveStep::Rejected(rejection) = feed_passive(&mut machine, &bytes).unwrap() else {
        panic!()
    };
    assert_eq!(
        rejection.reason,
        RejectReason::UnknownHelloVersion(UnknownHelloVersion::LnetMagic {
            byte_order: ByteOrder::LittleEndian,
            version: 5
        })
    );
    // V3 (IPv4 socket), our own NID as destination (the kernel quirk), ctype NONE, 56 bytes.
    let expected: [u8; 56] = [
        0x63, 0x69, 0x72, 0x45, 0x03, 0, 0, 0, 0x01, 0x01, 0xa8, 0xc0, 0, 0, 0x02, 0, 0x01, 0x01,
        0xa8, 0xc0, 0, 0, 0x02, 0, 0x39, 0x30, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xd0, 0xf7, 0x70,
        0x18, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0,
    ];
    assert_eq!(rejection.reply, expected);

    // The same for an old TCP-magic hello with an unknown major.
    let mut bytes = VECTOR_10_1.to_vec();
    bytes.extend_from_slice(&LNET_PROTO_TCP_MAGIC.to_le_bytes());
    bytes.extend_from_slice(&[2, 0, 0, 0]);
    let mut machine = passive(AcceptPolicy::Secure, 1023);
    let PassiveStep::Rejected(rejection) = feed_passive(&mut machine, &bytes).unwrap() else {
        panic!()
    };
    assert_eq!(
        rejection.reason,
        RejectReason::UnknownHelloVersion(UnknownHelloVersion::TcpMagic { major: 2, minor: 0 })
    );
    assert_eq!(rejection.reply, expected);
}

#[test]
fn connector_renegotiates_from_the_unknown_version_answer() {
    // A peer that only speaks V2 answers our V3 hello with its V2 default and NONE.
    let mut machine = active(ConnType::CONTROL, ProtoVersion::V3);
    let answer =
        Hello { version: ProtoVersion::V2, ..Hello::unknown_version_answer(&server(), false) };
    let outcome = feed_active(&mut machine, &emit(&answer)).unwrap();
    assert_eq!(
        outcome,
        ActiveOutcome::Renegotiate(PeerHello {
            peer: id(&server()),
            version: ProtoVersion::V2,
            incarnation: SERVER_INCARNATION,
            conn_type: ConnType::CONTROL,
            byte_order: ByteOrder::LittleEndian,
            userspace: false,
        })
    );
}

#[test]
fn connector_closes_on_an_unknown_version() {
    let mut machine = active(ConnType::CONTROL, ProtoVersion::V3);
    let mut bytes = LNET_PROTO_MAGIC.to_le_bytes().to_vec();
    bytes.extend_from_slice(&9u32.to_le_bytes());
    assert_eq!(
        machine.handle_input(T0, &bytes),
        Err(ActiveError::UnknownVersion(UnknownHelloVersion::LnetMagic {
            byte_order: ByteOrder::LittleEndian,
            version: 9
        }))
    );
}

#[test]
fn connector_checks_identity_none_and_types() {
    // Another NID.
    let mut machine = active(ConnType::CONTROL, ProtoVersion::V3);
    let impostor =
        LocalIdentity { nid: Nid::ipv4(Net::TCP, Ipv4Addr::new(10, 0, 0, 1)), ..server() };
    let received = Hello::active(ProtoVersion::V3, &client(), server().nid, ConnType::CONTROL);
    let reply = Hello::passive_reply(&impostor, &received, client().nid, ConnType::CONTROL);
    assert_eq!(
        feed_active(&mut machine, &emit(&reply)),
        Err(ActiveError::IdentityMismatch { claimed: id(&impostor) })
    );
    // Another pid.
    let mut machine = active(ConnType::CONTROL, ProtoVersion::V3);
    let reply = Hello { src_pid: 7, ..reply_hello(ProtoVersion::V3, ConnType::CONTROL) };
    assert_eq!(
        feed_active(&mut machine, &emit(&reply)),
        Err(ActiveError::IdentityMismatch { claimed: ProcessId::new(server().nid, 7) })
    );
    // NONE in our version: refused (EALREADY).
    let mut machine = active(ConnType::BULK_IN, ProtoVersion::V3);
    let reply = reply_hello(ProtoVersion::V3, ConnType::NONE);
    let outcome = feed_active(&mut machine, &emit(&reply)).unwrap();
    assert!(matches!(outcome, ActiveOutcome::Refused(h) if h.conn_type == ConnType::BULK_IN));
    // Mismatched types.
    let mut machine = active(ConnType::BULK_IN, ProtoVersion::V3);
    let reply = reply_hello(ProtoVersion::V3, ConnType::BULK_IN);
    assert_eq!(
        feed_active(&mut machine, &emit(&reply)),
        Err(ActiveError::MismatchedTypes { own: ConnType::BULK_IN, peer: ConnType::BULK_IN })
    );
    // A reply in another version with a proper type is adopted.
    let mut machine = active(ConnType::CONTROL, ProtoVersion::V3);
    let reply = reply_hello(ProtoVersion::V2, ConnType::CONTROL);
    let ActiveOutcome::Established(established) = feed_active(&mut machine, &emit(&reply)).unwrap()
    else {
        panic!()
    };
    assert_eq!(established.hello.version, ProtoVersion::V2);
}

#[test]
fn acceptor_refuses_bad_conn_types_in_hellos() {
    for (conn_type, error) in [
        (ConnType::NONE, PassiveHelloError::PeerSentNone),
        (ConnType(7), PassiveHelloError::UnknownConnType(7)),
    ] {
        let mut bytes = VECTOR_10_1.to_vec();
        bytes.extend(emit(&Hello::active(ProtoVersion::V3, &client(), server().nid, conn_type)));
        let mut machine = passive(AcceptPolicy::Secure, 1023);
        assert_eq!(machine.handle_input(T0, &bytes), Err(PassiveError::ConnType(error)));
    }
}

#[test]
fn acceptor_refuses_bad_hellos() {
    let mut bytes = VECTOR_10_1.to_vec();
    bytes.extend_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
    let mut machine = passive(AcceptPolicy::Secure, 1023);
    assert_eq!(
        machine.handle_input(T0, &bytes),
        Err(PassiveError::Hello(HelloError::BadMagic(0xefbe_adde)))
    );
    assert_eq!(machine.read_hint(), 0);
}

#[test]
fn userspace_peer_identity_is_substituted_in_all_mode() {
    let mut machine = passive(AcceptPolicy::All, 40_000);
    let mut bytes = VECTOR_10_1.to_vec();
    bytes.extend_from_slice(&VECTOR_10_4);
    let candidate = decide_candidate(&mut machine, &bytes);
    let expected = ProcessId::new(
        Nid::ipv4(server().nid.net(), Ipv4Addr::new(192, 168, 1, 2)),
        40_000 | LNET_PID_USERFLAG,
    );
    assert_eq!(candidate.hello.peer, expected);
    assert!(candidate.hello.userspace);
    assert!(candidate.hello.peer.is_userspace());
    let Ok(PassiveStep::Established { reply, .. }) = machine.decide(Admission::Accept) else {
        panic!()
    };
    let Ok(HelloParse::Complete { hello, .. }) = Hello::parse(&reply) else { panic!() };
    assert_eq!(hello.dst_nid, expected.nid);
}

#[test]
fn userspace_peers_over_ipv6_are_refused() {
    let config = AcceptConfig { policy: AcceptPolicy::All, ..accept_config(AcceptPolicy::All) };
    let addr = SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), 40_000);
    let mut machine = PassiveHandshake::new(T0, &config, addr).unwrap();
    let mut bytes = VECTOR_10_1.to_vec();
    bytes.extend_from_slice(&VECTOR_10_4);
    assert_eq!(machine.handle_input(T0, &bytes), Err(PassiveError::UserspacePeerOverIpv6));
    // A v4-mapped address is an IPv4 peer.
    let mapped =
        SocketAddr::new(IpAddr::V6(Ipv4Addr::new(192, 168, 1, 2).to_ipv6_mapped()), 40_000);
    let mut machine = PassiveHandshake::new(T0, &config, mapped).unwrap();
    assert!(matches!(feed_passive(&mut machine, &bytes), Ok(PassiveStep::Decide(_))));
}

#[test]
fn a_connector_cannot_dial_userspace_peers_or_undialable_types() {
    let user = ProcessId::new(server().nid, 40_000 | LNET_PID_USERFLAG);
    assert_eq!(
        ActiveHandshake::new(T0, client(), user, ConnType::CONTROL, ProtoVersion::V3, SOCK_TIMEOUT)
            .err(),
        Some(ActiveSetupError::UserspacePeer(user))
    );
    assert_eq!(
        ActiveHandshake::new(
            T0,
            client(),
            id(&server()),
            ConnType::NONE,
            ProtoVersion::V3,
            SOCK_TIMEOUT
        )
        .err(),
        Some(ActiveSetupError::UndialableConnType(ConnType::NONE))
    );
    let server6 = ProcessId::lustre(Nid::ipv6(Net::TCP, Ipv6Addr::LOCALHOST));
    assert_eq!(
        ActiveHandshake::new(
            T0,
            client(),
            server6,
            ConnType::CONTROL,
            ProtoVersion::V3,
            SOCK_TIMEOUT
        )
        .err(),
        Some(ActiveSetupError::Hello(HelloEmitError::DstNidNotNid4))
    );
}

#[test]
fn an_ipv6_ni_cannot_answer_v3() {
    let server6 = LocalIdentity { nid: Nid::ipv6(Net::TCP, Ipv6Addr::LOCALHOST), ..server() };
    let config = AcceptConfig { local_nis: vec![server6], ..accept_config(AcceptPolicy::Secure) };
    let mut machine = PassiveHandshake::new(T0, &config, client_addr(1023)).unwrap();
    let mut bytes = connreq_for(server6.nid);
    bytes.extend_from_slice(&VECTOR_10_4);
    decide_candidate(&mut machine, &bytes);
    assert_eq!(
        machine.decide(Admission::Accept),
        Err(PassiveError::Reply(HelloEmitError::SrcNidNotNid4))
    );
}

// ----- Decisions -------------------------------------------------------------------------------

fn hello_from(nid: Nid) -> PeerHello {
    PeerHello {
        peer: ProcessId::lustre(nid),
        version: ProtoVersion::V3,
        incarnation: 7,
        conn_type: ConnType::CONTROL,
        byte_order: ByteOrder::LittleEndian,
        userspace: false,
    }
}

fn view() -> PeerView {
    PeerView { max_conns_per_type: 1, ..PeerView::default() }
}

#[test]
fn race_rule_higher_nid_wins_both_ways() {
    let me = server().nid; // 192.168.1.1
    let lower = Nid::ipv4(Net::TCP, Ipv4Addr::new(192, 168, 1, 0));
    let higher = client().nid; // 192.168.1.2
    assert_eq!(lower.cmp_wire(&me), Ordering::Less);
    let racing = PeerView { dialling_peer: true, ..view() };
    // The lower peer loses: its connection is refused while ours is in progress.
    assert_eq!(
        admit(Side::Passive, &me, &hello_from(lower), &racing),
        Admission::Refuse(RefuseReason::LostRace)
    );
    // The higher peer wins: its connection is accepted (and it will refuse ours).
    assert_eq!(admit(Side::Passive, &me, &hello_from(higher), &racing), Admission::Accept);
    // No race without our own dial, and never on the active side.
    assert_eq!(admit(Side::Passive, &me, &hello_from(lower), &view()), Admission::Accept);
    assert_eq!(admit(Side::Active, &me, &hello_from(lower), &racing), Admission::Accept);
    // The comparison is over the 20-byte form: net before address.
    let other_net = Nid::ipv4(Net::new(crate::addr::LndType::SOCK, 1), Ipv4Addr::new(1, 1, 1, 1));
    assert_eq!(admit(Side::Passive, &me, &hello_from(other_net), &racing), Admission::Accept);
}

#[test]
fn lost_race_is_answered_with_conn_none() {
    let mut machine = passive(AcceptPolicy::Secure, 1023);
    let mut bytes = VECTOR_10_1.to_vec();
    bytes.extend_from_slice(&VECTOR_10_4);
    let candidate = decide_candidate(&mut machine, &bytes);
    let racing = PeerView { dialling_peer: true, ..view() };
    // The client (192.168.1.2) is higher than the server: it wins.
    assert_eq!(admit(Side::Passive, &server().nid, &candidate.hello, &racing), Admission::Accept);
    let step = machine.decide(Admission::Refuse(RefuseReason::LostRace)).unwrap();
    let PassiveStep::Rejected(rejection) = step else { panic!() };
    assert_eq!(rejection.reason, RejectReason::Refused(RefuseReason::LostRace));
    let mut expected = VECTOR_10_5;
    expected[48..52].copy_from_slice(&[0xff; 4]);
    assert_eq!(rejection.reply, expected);
    // The connector reads it as "refused, retry later".
    let mut dialler = active(ConnType::CONTROL, ProtoVersion::V3);
    assert!(matches!(feed_active(&mut dialler, &expected), Ok(ActiveOutcome::Refused(_))));
    assert_eq!(machine.decide(Admission::Accept), Err(PassiveError::OutOfOrder));
}

#[test]
fn a_closing_peer_is_closed_without_a_reply() {
    let closing = PeerView { closing: true, ..view() };
    let me = server().nid;
    let verdict = admit(Side::Passive, &me, &hello_from(client().nid), &closing);
    assert_eq!(verdict, Admission::Refuse(RefuseReason::PeerClosing));
    let mut machine = passive(AcceptPolicy::Secure, 1023);
    let mut bytes = VECTOR_10_1.to_vec();
    bytes.extend_from_slice(&VECTOR_10_4);
    decide_candidate(&mut machine, &bytes);
    let Ok(PassiveStep::Rejected(rejection)) = machine.decide(verdict) else { panic!() };
    assert!(rejection.reply.is_empty());
}

#[test]
fn reboots_protocol_changes_and_duplicates() {
    let me = server().nid;
    let hello = hello_from(client().nid);
    let recorded = |version, incarnation| PeerView {
        recorded: Some(RecordedHello { version, incarnation }),
        ..view()
    };
    assert_eq!(admit(Side::Active, &me, &hello, &recorded(ProtoVersion::V3, 7)), Admission::Accept);
    let rebooted = admit(Side::Active, &me, &hello, &recorded(ProtoVersion::V3, 6));
    assert_eq!(rebooted, Admission::Refuse(RefuseReason::PeerRebooted));
    let wrong = admit(Side::Passive, &me, &hello, &recorded(ProtoVersion::V2, 7));
    assert_eq!(wrong, Admission::Refuse(RefuseReason::WrongProtoVersion));
    assert!(RefuseReason::PeerRebooted.tears_down_peer());
    assert!(RefuseReason::WrongProtoVersion.tears_down_peer());
    assert!(!RefuseReason::Duplicate.tears_down_peer());

    let full = PeerView { same_type_conns: 2, max_conns_per_type: 2, ..view() };
    assert_eq!(
        admit(Side::Passive, &me, &hello, &full),
        Admission::Refuse(RefuseReason::Duplicate)
    );
    assert_eq!(
        admit(Side::Passive, &me, &hello, &PeerView { same_type_conns: 1, ..full }),
        Admission::Accept
    );
    assert_eq!(
        admit(Side::Passive, &me, &hello, &PeerView { loopback: true, ..full }),
        Admission::Accept
    );
}

// ----- Timers and end of stream ------------------------------------------------------------------

#[test]
fn passive_reads_time_out_per_read() {
    let mut machine = passive(AcceptPolicy::Secure, 1023);
    assert_eq!(machine.poll_timeout(), Some(T0 + ACCEPT_TIMEOUT));
    assert_eq!(machine.handle_timeout(T0 + ACCEPT_TIMEOUT - Duration::from_millis(1)), Ok(()));
    // The magic arrives at +3 s: the version read gets its own 5 s.
    let later = T0 + Duration::from_secs(3);
    machine.handle_input(later, &VECTOR_10_1[..4]).unwrap();
    machine.handle_input(later, &VECTOR_10_1[4..5]).unwrap();
    assert_eq!(machine.poll_timeout(), Some(later + ACCEPT_TIMEOUT));
    assert_eq!(
        machine.handle_timeout(later + ACCEPT_TIMEOUT),
        Err(PassiveError::Timeout { received: 5 })
    );
    assert_eq!(machine.poll_timeout(), None);
}

#[test]
fn active_reply_times_out_after_sock_timeout() {
    let mut machine = active(ConnType::CONTROL, ProtoVersion::V3);
    assert_eq!(machine.poll_timeout(), Some(T0 + SOCK_TIMEOUT));
    assert_eq!(
        machine.handle_timeout(T0 + SOCK_TIMEOUT),
        Err(ActiveError::Timeout { received: 0 })
    );
    assert_eq!(machine.handle_timeout(T0 + SOCK_TIMEOUT), Ok(()));
}

#[test]
fn end_of_stream_mid_handshake() {
    let mut machine = active(ConnType::CONTROL, ProtoVersion::V3);
    machine.handle_input(T0, &VECTOR_10_5[..10]).unwrap();
    assert_eq!(machine.handle_eof(), ActiveError::ClosedByPeer { received: 10 });
    let mut machine = passive(AcceptPolicy::Secure, 1023);
    machine.handle_input(T0, &VECTOR_10_1[..3]).unwrap();
    assert_eq!(machine.handle_eof(), PassiveError::ClosedByPeer { received: 3 });
    assert_eq!(machine.handle_eof(), PassiveError::OutOfOrder);
}

#[test]
fn v1_hellos_are_accepted_and_answered_in_v1() {
    let mut bytes = VECTOR_10_1.to_vec();
    bytes.extend(emit(&Hello::active(
        ProtoVersion::V1,
        &client(),
        server().nid,
        ConnType::BULK_OUT,
    )));
    let mut machine = passive(AcceptPolicy::Secure, 1023);
    let candidate = decide_candidate(&mut machine, &bytes);
    assert_eq!(candidate.hello.version, ProtoVersion::V1);
    assert_eq!(candidate.hello.conn_type, ConnType::BULK_IN);
    let Ok(PassiveStep::Established { reply, .. }) = machine.decide(Admission::Accept) else {
        panic!()
    };
    assert_eq!(reply.len(), 72);
    assert_eq!(reply[..4], LNET_PROTO_TCP_MAGIC.to_le_bytes());
}
