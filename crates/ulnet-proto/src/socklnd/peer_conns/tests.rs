use super::*;
use crate::addr::{LNET_PID_LUSTRE, LNET_PID_USERFLAG, Net, Nid};
use crate::socklnd::conn::FrameKind;
use crate::socklnd::handshake::{ActiveOutcome, Candidate};
use crate::time::Time;
use crate::wire::acceptor::ConnReqVersion;
use crate::wire::header::{Body, WireHandle};
use crate::wire::hello::ByteOrder;
use std::net::{Ipv4Addr, Ipv6Addr};

const T0: Time = Time::from_secs(1000);
const INCARNATION: u64 = 0x1870_F7D0_0000_0000;

fn local() -> LocalIdentity {
    LocalIdentity {
        nid: Nid::ipv4(Net::TCP, Ipv4Addr::new(192, 168, 1, 2)),
        pid: LNET_PID_LUSTRE,
        incarnation: 1,
    }
}

fn peer_id() -> ProcessId {
    ProcessId::lustre(Nid::ipv4(Net::TCP, Ipv4Addr::new(192, 168, 1, 1)))
}

fn peer(conns_per_peer: u8) -> PeerConns {
    let config = PeerConfig::new(&SocklndTunables::default(), conns_per_peer);
    PeerConns::new(local(), peer_id(), config)
}

fn hello(conn_type: ConnType, version: ProtoVersion, incarnation: u64) -> PeerHello {
    PeerHello {
        peer: peer_id(),
        version,
        incarnation,
        conn_type,
        byte_order: ByteOrder::LittleEndian,
        userspace: false,
    }
}

fn established(conn_type: ConnType) -> Established {
    Established {
        side: Side::Active,
        local: local(),
        hello: hello(conn_type, ProtoVersion::V3, INCARNATION),
    }
}

/// Dials what the peer asks for and completes it.
fn dial_and_connect(peer: &mut PeerConns, now: Time) -> Option<(ConnType, ConnId)> {
    let request = peer.poll_dial(now)?;
    let outcome = ActiveOutcome::Established(established(request.conn_type));
    match peer.on_handshake(now, &outcome, false) {
        ActiveResolution::Added(id) => Some((request.conn_type, id)),
        other => panic!("{other:?}"),
    }
}

fn put(payload_length: u32) -> Header {
    Header {
        dest_nid: peer_id().nid,
        src_nid: local().nid,
        dest_pid: LNET_PID_LUSTRE,
        src_pid: LNET_PID_LUSTRE,
        payload_length,
        body: Body::Put {
            ack_wmd: WireHandle::NONE,
            match_bits: 0,
            hdr_data: 0,
            ptl_index: 4,
            offset: 0,
        },
    }
}

// ----- Dialling ---------------------------------------------------------------------------------

#[test]
fn dial_order_is_control_then_alternating_bulk() {
    let mut p = peer(2);
    let first = p.poll_dial(T0).unwrap();
    assert_eq!(
        first,
        DialRequest { conn_type: ConnType::CONTROL, version: ProtoVersion::V3, control: true }
    );
    assert_eq!(p.poll_dial(T0), None, "one dial at a time");
    p.on_handshake(T0, &ActiveOutcome::Established(established(ConnType::CONTROL)), false);
    let mut order = Vec::new();
    while let Some((conn_type, _)) = dial_and_connect(&mut p, T0) {
        order.push(conn_type);
    }
    use ConnType as C;
    assert_eq!(order, [C::BULK_IN, C::BULK_OUT, C::BULK_IN, C::BULK_OUT]);
    assert_eq!((p.count(C::CONTROL), p.count(C::BULK_IN), p.count(C::BULK_OUT)), (1, 2, 2));
    assert_eq!(
        p.recorded(),
        Some(RecordedHello { version: ProtoVersion::V3, incarnation: INCARNATION })
    );
}

#[test]
fn one_conn_per_type_by_default_and_one_untyped_conn_for_everything_when_configured() {
    let mut p = peer(1);
    let order: Vec<_> =
        std::iter::from_fn(|| dial_and_connect(&mut p, T0)).map(|(t, _)| t).collect();
    assert_eq!(order, [ConnType::CONTROL, ConnType::BULK_IN, ConnType::BULK_OUT]);

    let tunables = SocklndTunables { typed_conns: false, ..SocklndTunables::default() };
    let mut p = PeerConns::new(local(), peer_id(), PeerConfig::new(&tunables, 1));
    let dialled: Vec<_> = std::iter::from_fn(|| dial_and_connect(&mut p, T0)).collect();
    assert_eq!(dialled.iter().map(|&(t, _)| t).collect::<Vec<_>>(), [ConnType::ANY]);
    // The one connection (V3) carries small and bulk messages alike; the kernel's V3 matcher
    // would refuse both and strand them.
    let any = dialled[0].1;
    assert_eq!(p.queue_message(T0, &put(0), MessageToken(1)), Ok(any));
    assert_eq!(p.queue_message(T0, &put(1 << 20), MessageToken(2)), Ok(any));
}

#[test]
fn dial_version_follows_the_address_family_then_the_peer() {
    let ip6 = ProcessId::lustre(Nid::ipv6(Net::TCP, Ipv6Addr::LOCALHOST));
    let mut p = PeerConns::new(local(), ip6, PeerConfig::new(&SocklndTunables::default(), 1));
    assert_eq!(p.poll_dial(T0).map(|r| r.version), Some(ProtoVersion::V4));

    // A peer answering CONN_NONE in V2 is redialled at once in V2.
    let mut p = peer(1);
    p.poll_dial(T0).unwrap();
    let renegotiate = ActiveOutcome::Renegotiate(hello(ConnType::CONTROL, ProtoVersion::V2, 5));
    let resolution = p.on_handshake(T0, &renegotiate, false);
    assert!(matches!(
        resolution,
        ActiveResolution::Closed { reason: ActiveCloseReason::Renegotiate(ProtoVersion::V2), .. }
    ));
    assert_eq!(p.poll_dial(T0).map(|r| r.version), Some(ProtoVersion::V2));
}

#[test]
fn userspace_and_closing_peers_are_never_dialled() {
    let user = ProcessId::new(peer_id().nid, 40_000 | LNET_PID_USERFLAG);
    let mut p = PeerConns::new(local(), user, PeerConfig::new(&SocklndTunables::default(), 1));
    assert_eq!(p.poll_dial(T0), None);
    let mut p = peer(1);
    p.set_closing();
    assert_eq!(p.poll_dial(T0), None);
}

#[test]
fn refusals_wait_min_reconnect_and_give_up_after_three() {
    let mut p = peer(1);
    let refused = ActiveOutcome::Refused(hello(ConnType::CONTROL, ProtoVersion::V3, INCARNATION));
    let mut now = T0;
    for attempt in 1..=2 {
        assert_eq!(p.poll_dial(now).map(|r| r.conn_type), Some(ConnType::CONTROL));
        let resolution = p.on_handshake(now, &refused, false);
        assert!(matches!(
            resolution,
            ActiveResolution::Closed { reason: ActiveCloseReason::PeerRefused, .. }
        ));
        assert_eq!(p.poll_dial(now + Duration::from_millis(999)), None, "attempt {attempt}");
        assert_eq!(p.poll_timeout(), Some(now + Duration::from_secs(1)));
        now += Duration::from_secs(1);
    }
    // The third refusal without one connection of each type is a failure: back off (2 s).
    p.poll_dial(now).unwrap();
    p.on_handshake(now, &refused, false);
    assert_eq!(p.poll_dial(now + Duration::from_millis(1999)), None);
    assert!(p.poll_dial(now + Duration::from_secs(2)).is_some());
}

/// A refused dial leaves a backoff deadline that stays in the past once the messages that
/// wanted the dial went elsewhere: it is reported apart from the timers that always run, so a
/// driver with nothing waiting does not wake for it forever.
#[test]
fn a_backed_off_dial_is_a_deadline_apart_from_the_connection_timers() {
    let mut p = peer(1);
    let refused = ActiveOutcome::Refused(hello(ConnType::CONTROL, ProtoVersion::V3, INCARNATION));
    p.poll_dial(T0).unwrap();
    p.on_handshake(T0, &refused, false);
    let retry = T0 + Duration::from_secs(1);
    assert_eq!(p.poll_dial_timeout(), Some(retry));
    assert_eq!(p.poll_conn_timeout(), None, "no connection, no keepalive");
    assert_eq!(p.poll_timeout(), Some(retry));
    // A closing peer is never dialled: no dial deadline.
    p.set_closing();
    assert_eq!(p.poll_dial_timeout(), None);
    assert_eq!(p.poll_timeout(), None);
}

#[test]
fn a_userspace_peer_has_no_dial_deadline() {
    let user = ProcessId::new(peer_id().nid, 40_000 | LNET_PID_USERFLAG);
    let mut p = PeerConns::new(local(), user, PeerConfig::new(&SocklndTunables::default(), 1));
    p.on_dial_failed(T0);
    assert_eq!(p.poll_dial_timeout(), None);
}

#[test]
fn after_three_refusals_with_every_type_dialling_stops() {
    let mut p = peer(3);
    for _ in 0..3 {
        dial_and_connect(&mut p, T0).unwrap(); // CONTROL, BULK_IN, BULK_OUT
    }
    let refused = ActiveOutcome::Refused(hello(ConnType::BULK_IN, ProtoVersion::V3, INCARNATION));
    let mut now = T0;
    for _ in 0..3 {
        now += Duration::from_secs(1);
        assert_eq!(p.poll_dial(now).map(|r| r.conn_type), Some(ConnType::BULK_IN));
        p.on_handshake(now, &refused, false);
    }
    assert_eq!(p.poll_dial(now + Duration::from_secs(3600)), None);
}

#[test]
fn failures_back_off_doubling_up_to_max_reconnect() {
    let mut p = peer(1);
    let mut now = T0;
    let mut waits = Vec::new();
    for _ in 0..9 {
        p.poll_dial(now).unwrap();
        p.on_dial_failed(now);
        let next = p.poll_timeout().unwrap();
        assert_eq!(p.poll_dial(next - Duration::from_millis(1)), None);
        waits.push(next.saturating_duration_since(now).as_secs());
        now = next;
    }
    assert_eq!(waits, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
    // A connection resets the backoff: the next type is dialled at once.
    dial_and_connect(&mut p, now).unwrap();
    assert!(p.poll_dial(now).is_some());
}

// ----- Reboots and admission --------------------------------------------------------------------

#[test]
fn a_new_incarnation_tears_everything_down() {
    let mut p = peer(1);
    let ids: Vec<_> =
        std::iter::from_fn(|| dial_and_connect(&mut p, T0)).map(|(_, id)| id).collect();
    assert_eq!(ids.len(), 3);
    // The peer restarted: its next connection shows another incarnation.
    p.remove_conn(ids[1]).unwrap(); // a BULK_IN dropped, to be redialled
    p.poll_dial(T0).unwrap();
    let rebooted = Established {
        hello: hello(ConnType::BULK_IN, ProtoVersion::V3, INCARNATION + 1),
        ..established(ConnType::BULK_IN)
    };
    match p.on_handshake(T0, &ActiveOutcome::Established(rebooted), false) {
        ActiveResolution::Closed {
            reason: ActiveCloseReason::LocalRefusal(RefuseReason::PeerRebooted),
            torn_down,
        } => {
            let mut closed: Vec<_> = torn_down.iter().map(|c| c.conn.id()).collect();
            closed.sort();
            assert_eq!(closed, [ids[0], ids[2]]);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(p.conns().count(), 0);
    assert_eq!(p.recorded(), None);
    // Redialled at once, and the new incarnation is accepted.
    let (conn_type, _) = dial_and_connect(&mut p, T0).unwrap();
    assert_eq!(conn_type, ConnType::CONTROL);
}

#[test]
fn passive_admission_records_races_and_limits() {
    let candidate = |conn_type, incarnation| Candidate {
        local: local(),
        hello: hello(conn_type, ProtoVersion::V3, incarnation),
        connreq: ConnReqVersion::V1,
    };
    let mut p = peer(1);
    let verdict = p.admit_passive(&candidate(ConnType::CONTROL, INCARNATION), false);
    assert_eq!(verdict.admission, Admission::Accept);
    assert!(verdict.torn_down.is_empty());
    assert_eq!(p.recorded().map(|r| r.incarnation), Some(INCARNATION));
    let mut accepted = established(ConnType::CONTROL);
    accepted.side = Side::Passive;
    p.add_conn(T0, &accepted);
    // A second CONTROL is a duplicate, unless both ends share an IP.
    let verdict = p.admit_passive(&candidate(ConnType::CONTROL, INCARNATION), false);
    assert_eq!(verdict.admission, Admission::Refuse(RefuseReason::Duplicate));
    let verdict = p.admit_passive(&candidate(ConnType::CONTROL, INCARNATION), true);
    assert_eq!(verdict.admission, Admission::Accept);
    // The peer (192.168.1.1) is lower than us (192.168.1.2): while we dial, it loses the race.
    p.poll_dial(T0).unwrap();
    let verdict = p.admit_passive(&candidate(ConnType::BULK_IN, INCARNATION), false);
    assert_eq!(verdict.admission, Admission::Refuse(RefuseReason::LostRace));
    // A new incarnation closes what we have.
    let verdict = p.admit_passive(&candidate(ConnType::BULK_OUT, INCARNATION + 1), false);
    assert_eq!(verdict.admission, Admission::Refuse(RefuseReason::LostRace));
    p.on_dial_failed(T0);
    let verdict = p.admit_passive(&candidate(ConnType::BULK_OUT, INCARNATION + 1), false);
    assert_eq!(verdict.admission, Admission::Refuse(RefuseReason::PeerRebooted));
    assert_eq!(verdict.torn_down.len(), 1);
    assert_eq!(p.recorded(), None);
}

#[test]
fn closing_connections_reopens_their_type() {
    let mut p = peer(2);
    let conns: Vec<_> = std::iter::from_fn(|| dial_and_connect(&mut p, T0)).collect();
    assert_eq!(conns.len(), 5);
    let bulk_in: Vec<_> =
        conns.iter().filter(|(t, _)| *t == ConnType::BULK_IN).map(|&(_, id)| id).collect();
    // One BULK_IN of two gone: the type stays satisfied, as in the kernel.
    p.remove_conn(bulk_in[0]).unwrap();
    assert_eq!(p.poll_dial(T0), None);
    // Both gone: wanted again.
    p.remove_conn(bulk_in[1]).unwrap();
    assert_eq!(p.poll_dial(T0).map(|r| r.conn_type), Some(ConnType::BULK_IN));
    p.on_dial_failed(T0);
    assert_eq!(p.close_all().len(), 3);
    assert_eq!(p.recorded(), None);
    assert!(p.remove_conn(bulk_in[0]).is_none());
}

// ----- Choosing a connection --------------------------------------------------------------------

/// A peer with the given connection types, all V3 unless said otherwise.
fn peer_with(types: &[ConnType], version: ProtoVersion) -> (PeerConns, Vec<ConnId>) {
    let mut p = peer(4);
    let ids = types
        .iter()
        .map(|&conn_type| {
            let mut e = established(conn_type);
            e.hello.version = version;
            p.add_conn(T0, &e)
        })
        .collect();
    (p, ids)
}

fn message(payload_len: u32) -> Outgoing {
    Outgoing::Message { payload_len }
}

#[test]
fn conn_choice_table_v3() {
    use ConnType as C;
    let (mut p, ids) = peer_with(&[C::CONTROL, C::BULK_IN, C::BULK_OUT], ProtoVersion::V3);
    let (control, bulk_in, bulk_out) = (ids[0], ids[1], ids[2]);
    // nob = 24 + 72 + payload against min_bulk 1024.
    assert_eq!(p.choose_conn(message(0)), Some(control));
    assert_eq!(p.choose_conn(message(927)), Some(control));
    assert_eq!(p.choose_conn(message(928)), Some(bulk_out));
    assert_eq!(p.choose_conn(message(1 << 20)), Some(bulk_out));
    assert_eq!(p.choose_conn(Outgoing::Noop { nonblocking: true }), Some(bulk_in));
    assert_eq!(p.choose_conn(Outgoing::Noop { nonblocking: false }), Some(control));

    // Fallbacks.
    let (mut p, ids) = peer_with(&[C::CONTROL, C::BULK_IN], ProtoVersion::V3);
    assert_eq!(p.choose_conn(message(5000)), Some(ids[0]), "large falls back to CONTROL");
    let (mut p, ids) = peer_with(&[C::BULK_OUT, C::BULK_IN], ProtoVersion::V3);
    assert_eq!(p.choose_conn(message(0)), Some(ids[0]), "small falls back to BULK_OUT");
    // A blocking NOOP may use either; round robin picks the one not just used.
    assert_eq!(p.choose_conn(Outgoing::Noop { nonblocking: false }), Some(ids[1]));
    let (mut p, ids) = peer_with(&[C::BULK_IN], ProtoVersion::V3);
    assert_eq!(p.choose_conn(message(0)), None, "never LNet messages on BULK_IN");
    assert_eq!(p.choose_conn(message(5000)), None);
    assert_eq!(p.choose_conn(Outgoing::Noop { nonblocking: false }), Some(ids[0]));
    let (mut p, _) = peer_with(&[C::CONTROL, C::BULK_OUT], ProtoVersion::V3);
    assert_eq!(p.choose_conn(Outgoing::Noop { nonblocking: true }), None);
    // The kernel's V3 matcher sends nothing on ANY (typed_conns=0 then strands every
    // message); ulnet sends everything on it, as V1/V2 do.
    let (mut p, ids) = peer_with(&[C::ANY], ProtoVersion::V3);
    assert_eq!(p.choose_conn(message(0)), Some(ids[0]));
    assert_eq!(p.choose_conn(message(1 << 20)), Some(ids[0]));
    assert_eq!(p.choose_conn(Outgoing::Noop { nonblocking: true }), Some(ids[0]));
}

#[test]
fn conn_choice_v4_counts_the_large_header_and_v2_uses_any() {
    use ConnType as C;
    let (mut p, ids) = peer_with(&[C::CONTROL, C::BULK_OUT], ProtoVersion::V4);
    assert_eq!(p.choose_conn(message(903)), Some(ids[0]));
    assert_eq!(p.choose_conn(message(904)), Some(ids[1]));
    let (mut p, ids) = peer_with(&[C::ANY], ProtoVersion::V2);
    assert_eq!(p.choose_conn(message(0)), Some(ids[0]));
    assert_eq!(p.choose_conn(message(5000)), Some(ids[0]));
    let (mut p, ids) = peer_with(&[C::BULK_IN], ProtoVersion::V2);
    assert_eq!(p.choose_conn(message(0)), Some(ids[0]), "V2 may fall back to BULK_IN");
}

#[test]
fn least_loaded_then_round_robin() {
    use ConnType as C;
    let (mut p, ids) = peer_with(&[C::BULK_OUT, C::BULK_OUT, C::BULK_OUT], ProtoVersion::V3);
    let picks: Vec<_> = (0..6).map(|_| p.choose_conn(message(4096)).unwrap()).collect();
    assert_eq!(picks, [ids[0], ids[1], ids[2], ids[0], ids[1], ids[2]]);
    // Load beats recency.
    p.conn_mut(ids[0]).unwrap().queue_message(T0, &put(4096), MessageToken(1)).unwrap();
    p.conn_mut(ids[1]).unwrap().queue_message(T0, &put(100), MessageToken(2)).unwrap();
    assert_eq!(p.choose_conn(message(4096)), Some(ids[2]));
    assert_eq!(p.choose_conn(message(4096)), Some(ids[2]));
    // Through the convenience: the message lands on the chosen connection.
    let id = p.queue_message(T0, &put(0), MessageToken(3)).unwrap();
    assert!(p.conn(id).unwrap().wants_to_transmit());
    let (mut empty, _) = peer_with(&[], ProtoVersion::V3);
    assert_eq!(
        empty.queue_message(T0, &put(0), MessageToken(4)),
        Err(PeerQueueError::NoConnection)
    );
}

// ----- Timers -----------------------------------------------------------------------------------

#[test]
fn keepalive_after_idle_then_every_retry() {
    use ConnType as C;
    let mut p = peer(1);
    let ids: Vec<_> =
        std::iter::from_fn(|| dial_and_connect(&mut p, T0)).map(|(_, id)| id).collect();
    let bulk_in = ids[1];
    assert_eq!(p.conn(bulk_in).map(Conn::conn_type), Some(C::BULK_IN));
    let keepalive = T0 + Duration::from_secs(30);
    assert_eq!(p.poll_timeout(), Some(keepalive));
    assert_eq!(p.handle_timeout(keepalive - Duration::from_millis(1)), []);
    assert_eq!(p.handle_timeout(keepalive), [TimeoutAction::KeepaliveQueued(bulk_in)]);
    let frame = p.conn_mut(bulk_in).unwrap().poll_transmit().unwrap();
    assert_eq!(frame.kind, FrameKind::Keepalive);
    // Still silent: retried 10 s later (the NOOP queued is now in flight, so the send
    // deadline is armed too).
    assert_eq!(p.handle_timeout(keepalive + Duration::from_secs(5)), []);
    let retry = keepalive + Duration::from_secs(10);
    assert_eq!(p.handle_timeout(retry), [TimeoutAction::KeepaliveQueued(bulk_in)]);
    // Bytes from the peer on any connection push the next one out.
    let heard = retry + Duration::from_secs(2);
    let control = ids[0];
    let (conn, zc) = p.conn_and_zc(control).unwrap();
    conn.handle_input(heard, &[0xc0], zc).unwrap();
    assert_eq!(p.conns().map(Conn::last_alive).max(), Some(heard));
}

#[test]
fn no_keepalive_without_an_ack_connection_v3_or_the_tunable() {
    use ConnType as C;
    let (mut p, _) = peer_with(&[C::CONTROL, C::BULK_OUT], ProtoVersion::V3);
    let at = T0 + Duration::from_secs(30);
    assert_eq!(p.poll_timeout(), Some(at));
    assert_eq!(p.handle_timeout(at), []);
    assert_eq!(p.poll_timeout(), Some(at + Duration::from_secs(10)), "retried later");

    let (p, _) = peer_with(&[C::CONTROL, C::BULK_IN], ProtoVersion::V2);
    assert_eq!(p.poll_timeout(), None, "V2 has no keepalive");

    let tunables = SocklndTunables { keepalive: None, ..SocklndTunables::default() };
    let mut p = PeerConns::new(local(), peer_id(), PeerConfig::new(&tunables, 1));
    p.add_conn(T0, &established(C::BULK_IN));
    assert_eq!(p.poll_timeout(), None);
}

#[test]
fn stuck_connections_and_stale_zc_requests_are_closed() {
    use ConnType as C;
    let (mut p, ids) = peer_with(&[C::CONTROL, C::BULK_IN], ProtoVersion::V3);
    let timeout = SocklndTunables::default().sock_timeout;
    let (conn, zc) = p.conn_and_zc(ids[0]).unwrap();
    conn.handle_input(T0, &[0xc1, 0, 0], zc).unwrap(); // half a ksock header
    zc.register(T0, timeout, ids[1], MessageToken(9)).unwrap();
    let at = T0 + timeout;
    let actions = p.handle_timeout(at);
    assert!(actions.contains(&TimeoutAction::Close {
        conn: ids[0],
        reason: CloseReason::Conn(ConnError::ReceiveTimeout)
    }));
    assert!(
        actions
            .contains(&TimeoutAction::Close { conn: ids[1], reason: CloseReason::StaleZcRequests })
    );
    let closed = p.remove_conn(ids[1]).unwrap();
    assert_eq!(closed.zc_aborted, [MessageToken(9)]);
}
