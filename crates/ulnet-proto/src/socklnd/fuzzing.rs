//! Entry points for fuzzers and property tests: each drives a socklnd machine from arbitrary
//! bytes and asserts what must hold for any input (no panic, input consumption bounded by what
//! was offered, replies that decode). A failed assertion here is a bug in the machine.
//!
//! Input layout: the first bytes pick a configuration, the rest is cut into chunks, each a
//! length byte (1 to 64) followed by that many bytes, fed in order.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use crate::addr::{Net, Nid, ProcessId};
use crate::time::Time;
use crate::wire::acceptor::{ConnReq, ConnReqVersion, DOWNGRADE_ANSWER, LNET_PROTO_MAGIC};
use crate::wire::hello::{ConnType, Hello, HelloParse, LocalIdentity, ProtoVersion};
use crate::wire::ksock::KsockHeader;

use super::ConnId;
use super::conn::{Conn, RecvEvent, RecvNeed};
use super::handshake::{
    AcceptConfig, ActiveHandshake, ActiveOutcome, ActiveStep, Admission, Candidate, Established,
    PassiveHandshake, PassiveStep, PeerHello, RefuseReason, RejectReason, Side,
};
use super::peer_conns::{Outgoing, PeerConfig, PeerConns, TimeoutAction};
use super::tunables::{AcceptPolicy, SocklndTunables};
use super::zc::ZcRequests;

const TIMEOUT: Duration = Duration::from_secs(5);

/// Feeds arbitrary bytes to an acceptor (policy `all`, privileged or not, IPv4 or IPv6).
pub fn drive_passive_handshake(data: &[u8]) {
    let mut input = Input::new(data);
    let flags = input.byte();
    let port = if flags & 1 == 0 { 1023 } else { 40_000 };
    let ip = if flags & 2 == 0 {
        IpAddr::V4(Ipv4Addr::new(192, 168, 1, 2))
    } else {
        IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2))
    };
    let config = AcceptConfig {
        policy: AcceptPolicy::All,
        accept_timeout: TIMEOUT,
        local_nis: vec![fuzz_local_ipv4(), fuzz_local_ipv6()],
    };
    let Ok(mut machine) = PassiveHandshake::new(Time::ZERO, &config, SocketAddr::new(ip, port))
    else {
        return;
    };
    // Optional valid prefixes, so random bytes also reach the hello's body.
    let mut prefix = Vec::new();
    if flags & 4 != 0 {
        let mut connreq = [0u8; ConnReq::V1_LEN];
        let written = ConnReq::new(fuzz_local_ipv4().nid).emit(&mut connreq);
        assert_eq!(written, Ok(ConnReq::V1_LEN));
        prefix.extend_from_slice(&connreq);
        if flags & 8 != 0 {
            prefix.extend_from_slice(&LNET_PROTO_MAGIC.to_le_bytes());
            prefix.extend_from_slice(&u32::from(flags >> 4 & 3 | 2).to_le_bytes());
        }
    }
    let mut now = Time::ZERO;
    let mut total = 0;
    let mut prefix = Some(prefix.as_slice()).filter(|p| !p.is_empty());
    while let Some(chunk) = prefix.take().or_else(|| input.chunk()) {
        now += Duration::from_millis(u64::from(input.byte()));
        if machine.handle_timeout(now).is_err() {
            return;
        }
        let Ok((used, step)) = machine.handle_input(now, chunk) else {
            return;
        };
        assert!(used <= chunk.len());
        total += used;
        assert!(total <= ConnReq::V2_LEN + Hello::MAX_LEN, "never reads past connreq and hello");
        match step {
            PassiveStep::NeedMore(need) => {
                assert_eq!(used, chunk.len());
                assert!(need > 0);
            }
            PassiveStep::Decide(candidate) => {
                let admission = match input.byte() % 3 {
                    0 => Admission::Accept,
                    1 => Admission::Refuse(RefuseReason::Duplicate),
                    _ => Admission::Refuse(RefuseReason::PeerClosing),
                };
                if let Ok(step) = machine.decide(admission) {
                    check_passive_end(&step, Some(candidate.hello.version));
                }
                return;
            }
            other => {
                check_passive_end(&other, None);
                return;
            }
        }
    }
}

/// Feeds arbitrary bytes to a connector as the peer's reply.
pub fn drive_active_handshake(data: &[u8]) {
    let mut input = Input::new(data);
    let flags = input.byte();
    let version = match flags % 3 {
        0 => ProtoVersion::V3,
        1 => ProtoVersion::V2,
        _ => ProtoVersion::V1,
    };
    let conn_type = ConnType(u32::from(flags >> 2) % 4);
    let peer = ProcessId::lustre(Nid::ipv4(Net::TCP, Ipv4Addr::new(192, 168, 1, 1)));
    let Ok(mut machine) =
        ActiveHandshake::new(Time::ZERO, fuzz_local_ipv4(), peer, conn_type, version, TIMEOUT)
    else {
        return;
    };
    while let Some(chunk) = input.chunk() {
        let Ok((used, step)) = machine.handle_input(Time::ZERO, chunk) else {
            return;
        };
        assert!(used <= chunk.len());
        match step {
            ActiveStep::NeedMore(_) => assert_eq!(used, chunk.len()),
            ActiveStep::Finished(outcome) => {
                assert_eq!(outcome.hello().peer, peer);
                assert_eq!(machine.read_hint(), 0);
                return;
            }
        }
    }
}

/// Runs a connector against an acceptor, delivering each side's bytes in chunks sized by the
/// input; both must agree on the outcome.
pub fn drive_handshake_pair(data: &[u8]) {
    let mut input = Input::new(data);
    let flags = input.byte();
    let conn_type = ConnType(u32::from(flags % 4));
    let version = if flags & 4 == 0 { ProtoVersion::V3 } else { ProtoVersion::V2 };
    let server = fuzz_local_ipv4();
    let client =
        LocalIdentity { nid: Nid::ipv4(Net::TCP, Ipv4Addr::new(192, 168, 1, 2)), ..server };
    let Ok(mut active) = ActiveHandshake::new(
        Time::ZERO,
        client,
        ProcessId::new(server.nid, server.pid),
        conn_type,
        version,
        TIMEOUT,
    ) else {
        return;
    };
    let config = AcceptConfig {
        policy: AcceptPolicy::Secure,
        accept_timeout: TIMEOUT,
        local_nis: vec![server],
    };
    let peer_addr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(192, 168, 1, 2)), 1023);
    let Ok(mut passive) = PassiveHandshake::new(Time::ZERO, &config, peer_addr) else {
        return;
    };
    let to_passive = active.initial_bytes().to_vec();
    let mut offset = 0;
    let candidate = loop {
        let size = usize::from(input.byte() % 32) + 1;
        let end = (offset + size).min(to_passive.len());
        let chunk = to_passive.get(offset..end).unwrap_or(&[]);
        let result = passive.handle_input(Time::ZERO, chunk);
        let Ok((used, step)) = result else {
            panic!("acceptor refused a connector's bytes: {result:?}");
        };
        offset += used;
        match step {
            PassiveStep::NeedMore(_) => assert!(offset < to_passive.len()),
            PassiveStep::Decide(candidate) => break candidate,
            other => panic!("acceptor ended early: {other:?}"),
        }
    };
    assert_eq!(offset, to_passive.len(), "the acceptor consumed exactly connreq and hello");
    assert_eq!(candidate.hello.peer, ProcessId::new(client.nid, client.pid));
    let accept = input.byte() % 2 == 0;
    let admission =
        if accept { Admission::Accept } else { Admission::Refuse(RefuseReason::LostRace) };
    let reply = match passive.decide(admission) {
        Ok(PassiveStep::Established { reply, .. }) => reply,
        Ok(PassiveStep::Rejected(rejection)) => rejection.reply,
        other => panic!("unexpected decision result {other:?}"),
    };
    let mut offset = 0;
    loop {
        let size = usize::from(input.byte() % 32) + 1;
        let end = (offset + size).min(reply.len());
        let chunk = reply.get(offset..end).unwrap_or(&[]);
        let result = active.handle_input(Time::ZERO, chunk);
        let Ok((used, step)) = result else {
            panic!("connector refused the acceptor's reply: {result:?}");
        };
        offset += used;
        if let ActiveStep::Finished(outcome) = step {
            assert_eq!(offset, reply.len());
            let established = matches!(outcome, ActiveOutcome::Established(_));
            assert_eq!(established, accept);
            return;
        }
    }
}

/// Feeds arbitrary bytes to an established connection's receiver, alternating between
/// buffered input and payload "read into an MD", then drains the transmit side.
pub fn drive_conn_receive(data: &[u8]) {
    let mut input = Input::new(data);
    let flags = input.byte();
    let version = match flags % 4 {
        0 => ProtoVersion::V1,
        1 => ProtoVersion::V2,
        2 => ProtoVersion::V3,
        _ => ProtoVersion::V4,
    };
    let userspace = flags & 4 != 0;
    let established = fuzz_established(version, userspace);
    let mut conn = Conn::new(Time::ZERO, ConnId(0), &established, TIMEOUT);
    let mut zc = ZcRequests::new();
    while let Some(chunk) = input.chunk() {
        let need = conn.recv_need();
        if let (RecvNeed::Payload { remaining }, true) = (need, input.byte() & 1 == 1) {
            let len = chunk.len().min(remaining as usize);
            let Ok(left) = conn.handle_payload(Time::ZERO, len) else {
                return;
            };
            assert_eq!(left as usize, remaining as usize - len);
            continue;
        }
        let mut offset = 0;
        while offset < chunk.len() {
            let rest = chunk.get(offset..).unwrap_or(&[]);
            let Ok((used, event)) = conn.handle_input(Time::ZERO, rest, &mut zc) else {
                return;
            };
            assert!(used <= rest.len());
            match event {
                RecvEvent::NeedMore => {
                    assert_eq!(used, rest.len());
                    assert!(!conn.recv_need().is_empty());
                }
                RecvEvent::Payload { len, .. } => assert!(len <= used && len > 0),
                RecvEvent::Message(header) => {
                    assert!(header.validate_received().is_ok());
                    if userspace {
                        assert_eq!(header.src_nid, established.hello.peer.nid);
                    }
                }
                RecvEvent::Noop(_) => {}
            }
            offset += used;
        }
    }
    while let Some(frame) = conn.poll_transmit() {
        let bytes = frame.header_bytes();
        if version.has_ksock_header() {
            let parsed = KsockHeader::parse(bytes, established.hello.byte_order);
            assert!(parsed.is_ok_and(|h| h.zc_ack().is_ok()));
        }
        assert!(conn.on_transmitted(Time::ZERO, bytes.len()).is_ok());
    }
}

/// Runs a peer's connection set through arbitrary dials, verdicts, closes, choices and timers,
/// checking its bookkeeping.
pub fn drive_peer_conns(data: &[u8]) {
    let mut input = Input::new(data);
    let max = input.byte() % 3 + 1;
    let tunables = SocklndTunables::default();
    let peer = ProcessId::lustre(Nid::ipv4(Net::TCP, Ipv4Addr::new(192, 168, 1, 1)));
    let mut conns = PeerConns::new(fuzz_local_ipv4(), peer, PeerConfig::new(&tunables, max));
    let mut now = Time::ZERO;
    while !input.data.is_empty() {
        let op = input.byte();
        let arg = input.byte();
        let hello = PeerHello {
            peer,
            version: if arg & 1 == 0 { ProtoVersion::V3 } else { ProtoVersion::V2 },
            incarnation: u64::from(arg >> 6),
            conn_type: ConnType(u32::from(arg >> 1) % 4),
            byte_order: Default::default(),
            userspace: false,
        };
        match op % 6 {
            0 => {
                if let Some(request) = conns.poll_dial(now) {
                    let hello = PeerHello { conn_type: request.conn_type, ..hello };
                    let local = fuzz_local_ipv4();
                    let outcome = match arg >> 4 & 3 {
                        0 => ActiveOutcome::Refused(hello),
                        1 => ActiveOutcome::Renegotiate(hello),
                        _ => ActiveOutcome::Established(Established {
                            side: Side::Active,
                            local,
                            hello,
                        }),
                    };
                    conns.on_handshake(now, &outcome, false);
                }
            }
            1 => conns.on_dial_failed(now),
            2 => {
                let id = conns.conns().nth(usize::from(arg)).map(Conn::id);
                if let Some(id) = id {
                    assert!(conns.remove_conn(id).is_some());
                }
            }
            3 => {
                let outgoing = Outgoing::Message { payload_len: u32::from(arg) * 16 };
                if let Some(id) = conns.choose_conn(outgoing) {
                    assert!(conns.conn(id).is_some());
                }
            }
            4 => {
                now += Duration::from_secs(u64::from(arg));
                for action in conns.handle_timeout(now) {
                    if let TimeoutAction::KeepaliveQueued(id) = action {
                        assert!(conns.conn(id).is_some_and(Conn::wants_to_transmit));
                    }
                }
            }
            _ => {
                let candidate =
                    Candidate { local: fuzz_local_ipv4(), hello, connreq: ConnReqVersion::V1 };
                let verdict = conns.admit_passive(&candidate, false);
                if verdict.admission == Admission::Accept && hello.conn_type.is_known() {
                    let local = fuzz_local_ipv4();
                    conns.add_conn(now, &Established { side: Side::Passive, local, hello });
                }
            }
        }
        for conn_type in [ConnType::ANY, ConnType::CONTROL, ConnType::BULK_IN, ConnType::BULK_OUT] {
            assert!(conns.count(conn_type) <= u32::from(max), "duplicate limit holds");
        }
        if conns.conns().next().is_some() {
            let recorded = conns.recorded();
            assert!(recorded.is_some(), "a peer with connections has a recorded hello");
        }
    }
}

fn check_passive_end(step: &PassiveStep, version: Option<ProtoVersion>) {
    match step {
        PassiveStep::Established { established, reply } => {
            let hello = parse_hello(reply);
            assert_eq!(Some(hello.version), version);
            assert_eq!(hello.conn_type, established.hello.conn_type);
            assert_eq!(hello.src_nid, established.local.nid);
        }
        PassiveStep::Rejected(rejection) => match rejection.reason {
            RejectReason::Downgrade(_) => assert_eq!(rejection.reply, DOWNGRADE_ANSWER),
            RejectReason::UnknownHelloVersion(_) => {
                assert_eq!(parse_hello(&rejection.reply).conn_type, ConnType::NONE);
            }
            RejectReason::Refused(reason) if reason.replies_with_none() => {
                let hello = parse_hello(&rejection.reply);
                assert_eq!(hello.conn_type, ConnType::NONE);
                assert_eq!(Some(hello.version), version);
            }
            RejectReason::Refused(_) => assert!(rejection.reply.is_empty()),
        },
        PassiveStep::NeedMore(_) | PassiveStep::Decide(_) => {}
    }
}

fn parse_hello(bytes: &[u8]) -> Hello {
    match Hello::parse(bytes) {
        Ok(HelloParse::Complete { hello, len, .. }) if len == bytes.len() => hello,
        other => panic!("reply is not exactly one hello: {other:?}"),
    }
}

fn fuzz_local_ipv4() -> LocalIdentity {
    LocalIdentity {
        nid: Nid::ipv4(Net::TCP, Ipv4Addr::new(192, 168, 1, 1)),
        pid: 12345,
        incarnation: 0x1870_F7D0_0000_0000,
    }
}

fn fuzz_local_ipv6() -> LocalIdentity {
    LocalIdentity {
        nid: Nid::ipv6(Net::TCP, Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1)),
        ..fuzz_local_ipv4()
    }
}

fn fuzz_established(version: ProtoVersion, userspace: bool) -> Established {
    let peer = if userspace {
        ProcessId::new(Nid::ipv4(Net::TCP, Ipv4Addr::new(192, 168, 1, 2)), 0x8000_9c40)
    } else {
        ProcessId::lustre(Nid::ipv4(Net::TCP, Ipv4Addr::new(192, 168, 1, 2)))
    };
    Established {
        side: Side::Passive,
        local: fuzz_local_ipv4(),
        hello: PeerHello {
            peer,
            version,
            incarnation: 1,
            conn_type: ConnType::CONTROL,
            byte_order: Default::default(),
            userspace,
        },
    }
}

/// Splits fuzz input into configuration bytes and length-prefixed chunks.
struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    fn new(data: &'a [u8]) -> Self {
        Self { data }
    }

    /// The next byte, 0 once the input is exhausted.
    fn byte(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&first, rest)) => {
                self.data = rest;
                first
            }
            None => 0,
        }
    }

    /// The next chunk of 1 to 64 bytes, `None` once the input is exhausted.
    fn chunk(&mut self) -> Option<&'a [u8]> {
        let (&len, rest) = self.data.split_first()?;
        let len = (usize::from(len) % 64 + 1).min(rest.len());
        let (chunk, rest) = rest.split_at(len);
        self.data = rest;
        (!chunk.is_empty()).then_some(chunk)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn passive_handshake_survives_anything(data in proptest::collection::vec(any::<u8>(), 0..300)) {
            drive_passive_handshake(&data);
        }

        #[test]
        fn active_handshake_survives_anything(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            drive_active_handshake(&data);
        }

        #[test]
        fn handshake_pairs_always_agree(data in proptest::collection::vec(any::<u8>(), 0..64)) {
            drive_handshake_pair(&data);
        }

        #[test]
        fn peer_conns_bookkeeping_holds(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            drive_peer_conns(&data);
        }

        #[test]
        fn conn_receive_survives_anything(data in proptest::collection::vec(any::<u8>(), 0..600)) {
            drive_conn_receive(&data);
        }
    }

    /// libFuzzer found that a peer requesting ZC-ACKs for cookies 1 and 9 got them back as the
    /// pair (9, 1), which reads as a malformed keepalive.
    const CONN_RECEIVE_RESERVED_COOKIE: [u8; 368] = [
        0x3a, 0x00, 0xc1, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xf8, 0x24, 0x00, 0xde, 0x00, 0x01,
        0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x44, 0xff, 0xff, 0x07, 0x07, 0x00, 0x00,
        0x01, 0xca, 0x9a, 0x3b, 0x00, 0x00, 0x00, 0xf0, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x04,
        0x01, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xf7,
        0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0xbb, 0x00, 0x00, 0x00, 0x0a, 0x00, 0x00, 0x00, 0x0a,
        0x00, 0x00, 0x00, 0xff, 0xe4, 0x00, 0xff, 0xff, 0x0a, 0xf9, 0x00, 0x00, 0xbb, 0x00, 0x00,
        0x00, 0x0a, 0x00, 0x00, 0x00, 0x0a, 0x00, 0x00, 0xff, 0x0a, 0x00, 0x00, 0x53, 0x40, 0x00,
        0x8a, 0x3a, 0x00, 0xc1, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xf8, 0x24, 0x00, 0xde, 0x00,
        0x01, 0xca, 0x9a, 0x3b, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x44, 0xff, 0xff, 0x07, 0x07, 0x00,
        0x00, 0x01, 0xca, 0x9a, 0x3b, 0x00, 0x00, 0x00, 0xf0, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00,
        0x00, 0x01, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xbb, 0x00, 0x00, 0x00, 0x0a, 0x00, 0x00, 0x00,
        0x0a, 0x00, 0x00, 0x00, 0xff, 0xe4, 0x00, 0xff, 0xff, 0x0a, 0xf9, 0x00, 0x00, 0xbb, 0x00,
        0x00, 0x00, 0x0a, 0x00, 0x00, 0x00, 0x0a, 0x00, 0x00, 0xff, 0x0a, 0x00, 0x00, 0x53, 0x40,
        0x00, 0x8a, 0x3a, 0x00, 0xc1, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xf8, 0x24, 0x00, 0xde,
        0x00, 0x01, 0xca, 0x9a, 0x3b, 0x25, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x44, 0xff, 0xff, 0xff, 0x06,
        0x00, 0x00, 0x01, 0xca, 0x9a, 0x3b, 0x00, 0x00, 0x00, 0xf0, 0x00, 0x00, 0x00, 0x00, 0x04,
        0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x44, 0xff, 0xff, 0xff, 0x06, 0x00, 0x00, 0x01, 0xca, 0x9a, 0x3b, 0x00, 0x00, 0x00,
        0xf0, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x01, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00, 0x00,
        0x00, 0xbb, 0x00, 0xbb, 0x00, 0x00, 0xff, 0xff,
    ];

    #[test]
    fn regression_conn_receive_reserved_cookie() {
        drive_conn_receive(&CONN_RECEIVE_RESERVED_COOKIE);
    }

    #[test]
    fn empty_inputs_are_fine() {
        drive_passive_handshake(&[]);
        drive_active_handshake(&[]);
        drive_handshake_pair(&[]);
        drive_conn_receive(&[]);
        drive_peer_conns(&[]);
    }
}
