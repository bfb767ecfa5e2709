//! The 160-byte messages on the wire, byte for byte against docs/protocol/wire.md §7, without the codec:
//! a raw ulnet node plays the other side with bytes built and checked by offset.

use std::cell::Cell;
use std::thread;
use std::time::{SystemTime, UNIX_EPOCH};

use ulnet::{
    Event, EventKind, EventQueue, LinkConfig, MdOptions, MdSpec, MemFabric, Memory, Node,
    ProcessId, PutRequest, Threshold, UnlinkMode,
};
use ulnet_selftest::console::NodeState;
use ulnet_selftest::{Console, SelftestService, ServiceConfig};

use crate::common::{HANG_GUARD, KEY};

const MAGIC_LE: [u8; 4] = [0x0d, 0xf0, 0xb0, 0xee];
/// `BRW_MAGIC` 0xEEB0EEB1EEB2EEB3 stored little-endian.
const BRW_MAGIC_LE: [u8; 8] = [0xb3, 0xee, 0xb2, 0xee, 0xb1, 0xee, 0xb0, 0xee];

/// tcp is LND type 2: a nid4 is `2 << 48 | net number << 32 | IPv4 address`.
fn tcp_nid4(a: u8, b: u8, c: u8, d: u8) -> u64 {
    (2 << 48) | u64::from(u32::from_be_bytes([a, b, c, d]))
}

/// A plain ulnet node with hand-made MDs: the far side of the conversation.
struct Raw {
    node: Node,
    events: EventQueue,
    /// Reply match bits for our requests.
    next_bits: Cell<u64>,
}

impl Raw {
    fn new(fabric: &MemFabric, nid: &str) -> Self {
        let node = Node::builder().mem_ni(nid.parse().unwrap(), fabric).build().unwrap();
        let events = node.event_queue(1024);
        Self { node, events, next_bits: Cell::new(0x7700_0000_0000_0000) }
    }

    /// A one-shot receive buffer on `portal` for match bits `bits`.
    fn post(&self, portal: u32, bits: u64, length: usize, options: MdOptions) {
        let spec = MdSpec::new(Memory::new(vec![0; length]))
            .options(options)
            .threshold(Threshold::Count(1));
        self.node.post(portal, bits, spec, &self.events).unwrap();
    }

    /// A one-shot source MD for a GET, holding `data`.
    fn post_source(&self, portal: u32, bits: u64, data: Vec<u8>) {
        let spec = MdSpec::new(Memory::new(data))
            .options(MdOptions::OP_GET)
            .threshold(Threshold::Count(1));
        self.node.post(portal, bits, spec, &self.events).unwrap();
    }

    /// PUTs `bytes` without an ACK, as selftest sends requests and replies.
    fn put(&self, target: ProcessId, portal: u32, bits: u64, bytes: Vec<u8>) {
        let md = self
            .node
            .md_bind(
                MdSpec::new(Memory::new(bytes)).threshold(Threshold::Count(1)),
                UnlinkMode::Unlink,
                Some(&self.events),
            )
            .unwrap();
        self.node
            .put(&PutRequest {
                md,
                ack: false,
                target,
                portal,
                match_bits: bits,
                remote_offset: 0,
                hdr_data: 0,
                source: None,
            })
            .unwrap();
    }

    /// The next event of `kind` (others, like SEND completions, are skipped).
    fn next(&self, kind: EventKind) -> Event {
        loop {
            let event = self.events.recv_timeout(HANG_GUARD).unwrap();
            if event.kind == kind {
                return event;
            }
        }
    }

    /// The bytes of the next PUT that lands here.
    fn received(&self) -> (Event, Vec<u8>) {
        let mut event = self.next(EventKind::Put);
        let mut bytes = event.memory.take().unwrap().to_vec();
        bytes.truncate(event.mlength as usize);
        (event, bytes)
    }

    /// Sends a request to `service` and returns the reply's 160 bytes.
    fn call(
        &self,
        target: ProcessId,
        portal: u32,
        service: u64,
        mut request: [u8; 160],
    ) -> Vec<u8> {
        let reply_bits = self.next_bits.get() + 1;
        self.next_bits.set(reply_bits);
        put_u64(&mut request, 24, reply_bits);
        self.post(52, reply_bits, 160, MdOptions::OP_PUT);
        self.put(target, portal, service, request.to_vec());
        let (event, bytes) = self.received();
        assert_eq!(event.match_bits, reply_bits);
        assert_eq!(bytes.len(), 160, "every selftest reply is 160 bytes");
        bytes
    }
}

fn put_u32(buf: &mut [u8], at: usize, value: u32) {
    buf[at..at + 4].copy_from_slice(&value.to_le_bytes());
}

fn put_u64(buf: &mut [u8], at: usize, value: u64) {
    buf[at..at + 8].copy_from_slice(&value.to_le_bytes());
}

fn u32_at(buf: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(buf[at..at + 4].try_into().unwrap())
}

fn u64_at(buf: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(buf[at..at + 8].try_into().unwrap())
}

/// `srpc_msg`'s 24-byte header: magic, version 1, type, two reserved words, features.
fn message(msg_type: u32, features: u32) -> [u8; 160] {
    let mut buf = [0u8; 160];
    buf[0..4].copy_from_slice(&MAGIC_LE);
    put_u32(&mut buf, 4, 1);
    put_u32(&mut buf, 8, msg_type);
    put_u32(&mut buf, 20, features);
    buf
}

fn check_header(buf: &[u8], msg_type: u32, features: u32) {
    assert_eq!(&buf[0..4], &MAGIC_LE, "msg_magic");
    assert_eq!(u32_at(buf, 4), 1, "msg_version");
    assert_eq!(u32_at(buf, 8), msg_type, "msg_type");
    assert_eq!(u64_at(buf, 12) & 0xffff_ffff, 0, "msg_reserved0");
    assert_eq!(u32_at(buf, 16), 0, "msg_reserved1");
    assert_eq!(u32_at(buf, 20), features, "msg_ses_feats");
}

fn name_field(name: &str) -> [u8; 32] {
    let mut field = [0u8; 32];
    field[..name.len()].copy_from_slice(name.as_bytes());
    field
}

/// Match bits come from `unix seconds << 48`, plus one per id.
fn check_match_bits(bits: u64) {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let seeded = (bits >> 48) as u16;
    let age = (now as u16).wrapping_sub(seeded);
    assert!(age < 3600, "match bits {bits:#x} not seeded from the clock (now {now})");
}

#[test]
fn console_make_session_request_and_reply_bytes() {
    let fabric = MemFabric::new(LinkConfig::IDEAL);
    let fake = Raw::new(&fabric, "10.0.0.1@tcp");
    fake.node.set_lazy_portal(51).unwrap();
    fake.post(51, 1, 160, MdOptions::OP_PUT);
    let console_node =
        Node::builder().mem_ni("10.0.0.200@tcp".parse().unwrap(), &fabric).build().unwrap();
    let console = Console::new(&console_node).unwrap();
    let session = console.new_session(KEY, "wire", 0, false, 1).unwrap();
    console.add_group(KEY, "g").unwrap();
    let adding = thread::spawn({
        let ids = vec![ProcessId::lustre("10.0.0.1@tcp".parse().unwrap())];
        move || {
            let result = console.add_nodes(KEY, "g", &ids);
            (console, result)
        }
    });

    // The request: PUT, no ACK, portal 51, match bits 1 (MAKE_SESSION), 160 bytes.
    let (event, request) = fake.received();
    assert_eq!((event.portal, event.match_bits, event.rlength), (51, 1, 160));
    assert_eq!(event.initiator.pid, 12345);
    check_header(&request, 0, 1);
    let reply_bits = u64_at(&request, 24);
    check_match_bits(reply_bits);
    assert_eq!(u64_at(&request, 32), tcp_nid4(10, 0, 0, 200), "mksn_sid.ses_nid");
    assert_eq!(u64_at(&request, 40) as i64, session.stamp, "mksn_sid.ses_stamp");
    assert!(session.stamp > 0);
    assert_eq!(u32_at(&request, 48), 0, "mksn_force");
    assert_eq!(request[52..84], name_field("wire"), "mksn_name");
    assert!(request[84..].iter().all(|&b| b == 0), "unused body bytes are zero");

    // Our reply, by hand: status 0, the same sid, timeout 100, our (empty) session name.
    let mut reply = message(1, 1);
    put_u32(&mut reply, 24, 0);
    reply[28..44].copy_from_slice(&request[32..48]);
    put_u32(&mut reply, 44, 100);
    let console_id = ProcessId::lustre("10.0.0.200@tcp".parse().unwrap());
    fake.put(console_id, 52, reply_bits, reply.to_vec());

    let (console, result) = adding.join().unwrap();
    let result = result.unwrap();
    assert_eq!(result.lst_rc(), 0, "{result:?}");
    assert_eq!(result.entries[0].state, NodeState::Active);
    assert_eq!(console.group_nodes(KEY, "g").unwrap()[0].1, NodeState::Active);
}

/// A raw console talking to a real selftest service.
struct ServiceFixture {
    _fabric: MemFabric,
    _service_node: Node,
    service: SelftestService,
    console: Raw,
    target: ProcessId,
}

impl ServiceFixture {
    fn new() -> Self {
        Self::with_config(ServiceConfig::default())
    }

    fn with_config(config: ServiceConfig) -> Self {
        let fabric = MemFabric::new(LinkConfig::IDEAL);
        let service_node =
            Node::builder().mem_ni("10.0.0.1@tcp".parse().unwrap(), &fabric).build().unwrap();
        let service = SelftestService::start_with(&service_node, config).unwrap();
        let console = Raw::new(&fabric, "10.0.0.200@tcp");
        let target = ProcessId::lustre("10.0.0.1@tcp".parse().unwrap());
        Self { _fabric: fabric, _service_node: service_node, service, console, target }
    }

    fn framework(&self, service: u64, request: [u8; 160]) -> Vec<u8> {
        self.console.call(self.target, 51, service, request)
    }
}

/// A session id of our console: its nid4 and a stamp.
const STAMP: i64 = 0x0102_0304_0506;

fn with_sid(mut request: [u8; 160], at: usize) -> [u8; 160] {
    put_u64(&mut request, at, tcp_nid4(10, 0, 0, 200));
    put_u64(&mut request, at + 8, STAMP as u64);
    request
}

fn make_session(name: &str, stamp: i64, force: bool) -> [u8; 160] {
    let mut request = with_sid(message(0, 1), 32);
    put_u64(&mut request, 40, stamp as u64);
    put_u32(&mut request, 48, u32::from(force));
    request[52..84].copy_from_slice(&name_field(name));
    request
}

fn check_sid(reply: &[u8], at: usize, stamp: i64) {
    assert_eq!(u64_at(reply, at), tcp_nid4(10, 0, 0, 200), "sid.ses_nid");
    assert_eq!(u64_at(reply, at + 8) as i64, stamp, "sid.ses_stamp");
}

#[test]
fn service_session_replies_bytes() {
    let fixture = ServiceFixture::new();
    // REMOVE_SESSION without a session: ESRCH (3) and LST_INVALID_SID.
    let reply = fixture.framework(2, with_sid(message(2, 1), 32));
    check_header(&reply, 3, 1);
    assert_eq!(u32_at(&reply, 24), 3);
    assert_eq!(u64_at(&reply, 28), u64::MAX);
    assert_eq!(u64_at(&reply, 36) as i64, -1);

    // MAKE_SESSION: status 0, our sid, timeout 100.
    let reply = fixture.framework(1, make_session("wire", STAMP, false));
    check_header(&reply, 1, 1);
    assert_eq!(u32_at(&reply, 24), 0, "mksn_status");
    check_sid(&reply, 28, STAMP);
    assert_eq!(u32_at(&reply, 44), 100, "mksn_timeout");
    assert!(reply[48..].iter().all(|&b| b == 0));
    assert_eq!(fixture.service.session().unwrap().name, "wire");

    // Another session without force: EBUSY (16) and the current session's name.
    let reply = fixture.framework(1, make_session("other", STAMP + 1, false));
    assert_eq!(u32_at(&reply, 24), 16);
    check_sid(&reply, 28, STAMP);
    assert_eq!(reply[48..80], name_field("wire"));

    // DEBUG: status 0, sid, timeout, dbg_nbatch 0, name.
    let mut debug = with_sid(message(10, 1), 32);
    put_u32(&mut debug, 48, 0);
    let reply = fixture.framework(0, debug);
    check_header(&reply, 11, 1);
    assert_eq!(u32_at(&reply, 24), 0);
    check_sid(&reply, 28, STAMP);
    assert_eq!(u32_at(&reply, 44), 100, "dbg_timeout");
    assert_eq!(u32_at(&reply, 48), 0, "dbg_nbatch");
    assert_eq!(reply[52..84], name_field("wire"));

    // ulnet's probe: dbg_flags 0x756c6e74 and a latency query at 52; the node echoes the
    // flags in dbg_nbatch and puts a latency summary (version 1) at 84.
    let mut probe = with_sid(message(10, 1), 32);
    put_u32(&mut probe, 48, 0x756c_6e74);
    put_u32(&mut probe, 52, 1);
    let reply = fixture.framework(0, probe);
    assert_eq!(u32_at(&reply, 48), 0x756c_6e74, "dbg_nbatch echoes the probe");
    assert_eq!(u32_at(&reply, 84), 1, "extension version");
    assert_eq!(u64_at(&reply, 92), 0, "no client RPCs measured yet");

    // A framework RPC whose features differ from the session's: EPROTO (71) with the sid.
    let reply = fixture.framework(5, with_sid(message(6, 0), 32));
    check_header(&reply, 7, 1);
    assert_eq!(u32_at(&reply, 24), 71);
    check_sid(&reply, 28, STAMP);

    // REMOVE_SESSION with LNET_NID_ANY: EINVAL (22); with another sid: EBUSY.
    let mut remove = message(2, 1);
    put_u64(&mut remove, 32, u64::MAX);
    assert_eq!(u32_at(&fixture.framework(2, remove), 24), 22);
    let mut remove = with_sid(message(2, 1), 32);
    put_u64(&mut remove, 40, 99);
    assert_eq!(u32_at(&fixture.framework(2, remove), 24), 16);

    // The right sid: 0, and LST_INVALID_SID since the session is gone.
    let reply = fixture.framework(2, with_sid(message(2, 1), 32));
    assert_eq!(u32_at(&reply, 24), 0);
    assert_eq!(u64_at(&reply, 28), u64::MAX);
    assert!(fixture.service.session().is_none());

    // A wrong version is answered EPROTO in a reply of the service's type.
    let mut old = make_session("v2", STAMP, false);
    put_u32(&mut old, 4, 2);
    let reply = fixture.framework(1, old);
    assert_eq!(u32_at(&reply, 8), 1);
    assert_eq!(u32_at(&reply, 24), 71);
}

#[test]
fn service_test_stat_ping_and_brw_bytes() {
    let fixture = ServiceFixture::new();
    assert_eq!(u32_at(&fixture.framework(1, make_session("w", STAMP, false)), 24), 0);

    // TEST (server side): sid at 40, bid at 56, service 11 at 64, loop at 68, concur at 72,
    // is_client at 76, stop_onerr at 77, ndest (unaligned) at 78, params at 82.
    let mut test = with_sid(message(8, 1), 40);
    put_u64(&mut test, 56, 7);
    put_u32(&mut test, 64, 11);
    put_u32(&mut test, 68, 8);
    put_u32(&mut test, 72, 2);
    test[77] = 1;
    test[82..84].copy_from_slice(&2u16.to_le_bytes()); // blk_opc WRITE
    test[84..86].copy_from_slice(&3u16.to_le_bytes()); // blk_flags FULL
    put_u32(&mut test, 86, 4096); // blk_len
    let reply = fixture.framework(4, test);
    check_header(&reply, 9, 1);
    assert_eq!(u32_at(&reply, 24), 0, "tsr_status");
    check_sid(&reply, 28, STAMP);
    // A PING server test too: a test service answers only while one of its server tests is
    // loaded, as the kernel's has request buffers only then.
    let mut ping_server = test;
    put_u32(&mut ping_server, 64, 12);
    ping_server[82..94].fill(0);
    assert_eq!(u32_at(&fixture.framework(4, ping_server), 24), 0);
    // A client test needs destinations; ndest 0 is EINVAL.
    test[76] = 1;
    assert_eq!(u32_at(&fixture.framework(4, test), 24), 22);

    // BATCH QUERY of batch 7: status 0, bar_active 0 at 44.
    let mut query = with_sid(message(4, 1), 32);
    put_u64(&mut query, 48, 7);
    put_u32(&mut query, 56, 3);
    let reply = fixture.framework(3, query);
    check_header(&reply, 5, 1);
    assert_eq!((u32_at(&reply, 24), u32_at(&reply, 44)), (0, 0));
    // An unknown batch: ENOENT.
    put_u64(&mut query, 48, 8);
    assert_eq!(u32_at(&fixture.framework(3, query), 24), 2);

    // PING: magic 0xBABEFACE at 32, seq at 36; the reply echoes both.
    let mut ping = message(14, 1);
    put_u32(&mut ping, 32, 0xBABE_FACE);
    put_u32(&mut ping, 36, 77);
    put_u64(&mut ping, 40, 1_700_000_000);
    let reply = fixture.console.call(fixture.target, 50, 12, ping);
    check_header(&reply, 15, 1);
    assert_eq!((u32_at(&reply, 24), u32_at(&reply, 28), u32_at(&reply, 32)), (0, 0xBABE_FACE, 77));
    // Unknown feature bits: EPROTO, and the reply says which features we know.
    put_u32(&mut ping, 20, 3);
    let reply = fixture.console.call(fixture.target, 50, 12, ping);
    check_header(&reply, 15, 1);
    assert_eq!(u32_at(&reply, 24), 71);

    // BRW WRITE: the service GETs our 4096 bytes (bulkid at 32), checks them, replies.
    let write = |data: Vec<u8>, bulk_bits: u64| {
        fixture.console.post_source(52, bulk_bits, data);
        let mut brw = message(12, 1);
        put_u64(&mut brw, 32, bulk_bits);
        put_u32(&mut brw, 40, 2);
        put_u32(&mut brw, 44, 4096);
        put_u32(&mut brw, 48, 3);
        fixture.console.call(fixture.target, 50, 11, brw)
    };
    let good: Vec<u8> = BRW_MAGIC_LE.repeat(512);
    let reply = write(good.clone(), 0x5500_0000_0000_0001);
    check_header(&reply, 13, 1);
    assert_eq!(u32_at(&reply, 24), 0, "brw_status");
    let mut bad = good;
    bad[4000] ^= 0xff;
    assert_eq!(u32_at(&write(bad, 0x5500_0000_0000_0002), 24), 74, "EBADMSG");

    // BRW READ: the service PUTs 4096 bytes of the pattern into our sink, then replies.
    let bulk_bits = 0x5500_0000_0000_0003;
    fixture.console.post(52, bulk_bits, 4096, MdOptions::OP_PUT);
    let mut brw = message(12, 1);
    put_u64(&mut brw, 24, 0x6600_0000_0000_0099);
    put_u64(&mut brw, 32, bulk_bits);
    put_u32(&mut brw, 40, 1);
    put_u32(&mut brw, 44, 4096);
    put_u32(&mut brw, 48, 3);
    fixture.console.post(52, 0x6600_0000_0000_0099, 160, MdOptions::OP_PUT);
    fixture.console.put(fixture.target, 50, 11, brw.to_vec());
    let (first, first_bytes) = fixture.console.received();
    let (_, second_bytes) = fixture.console.received();
    let (data, reply) = if first.match_bits == bulk_bits {
        (first_bytes, second_bytes)
    } else {
        (second_bytes, first_bytes)
    };
    assert_eq!(data, BRW_MAGIC_LE.repeat(512));
    check_header(&reply, 13, 1);
    assert_eq!(u32_at(&reply, 24), 0);
    // Invalid: length 0 is EINVAL; a length past 1 MiB too.
    for length in [0, (1 << 20) + 8] {
        let mut brw = message(12, 1);
        put_u32(&mut brw, 40, 1);
        put_u32(&mut brw, 44, length);
        put_u32(&mut brw, 48, 1);
        assert_eq!(u32_at(&fixture.console.call(fixture.target, 50, 11, brw), 24), 22);
    }

    // QUERY_STAT: sfw_counters at 44, srpc_counters at 64, lnet counters at 100.
    let reply = fixture.framework(5, with_sid(message(6, 1), 32));
    check_header(&reply, 7, 1);
    assert_eq!(u32_at(&reply, 24), 0);
    check_sid(&reply, 28, STAMP);
    let received = u32_at(&reply, 72);
    assert!(received >= 10, "rpcs_rcvd {received}");
    assert_eq!(u64_at(&reply, 84), 2 * 4096, "bulk_get: two WRITEs");
    assert_eq!(u64_at(&reply, 92), 4096, "bulk_put: one READ");
    let lnet_received = u32_at(&reply, 100 + 16);
    assert!(lnet_received >= received, "lcc_recv_count {lnet_received}");
}

#[test]
fn console_destination_list_layout() {
    // Three real test nodes as servers; the client is a raw node that fetches its list.
    let fabric = MemFabric::new(LinkConfig::IDEAL);
    let mut keep = Vec::new();
    for i in 1..=3 {
        let node = Node::builder()
            .mem_ni(format!("10.0.0.{i}@tcp").parse().unwrap(), &fabric)
            .build()
            .unwrap();
        keep.push((SelftestService::start(&node).unwrap(), node));
    }
    let fake = Raw::new(&fabric, "10.0.0.50@tcp");
    fake.node.set_lazy_portal(51).unwrap();
    let console_node =
        Node::builder().mem_ni("10.0.0.200@tcp".parse().unwrap(), &fabric).build().unwrap();
    let console = Console::new(&console_node).unwrap();
    console.new_session(KEY, "list", 0, false, 1).unwrap();
    console.add_group(KEY, "servers").unwrap();
    let servers: Vec<ProcessId> =
        (1..=3).map(|i| ProcessId::lustre(format!("10.0.0.{i}@tcp").parse().unwrap())).collect();
    assert_eq!(console.add_nodes(KEY, "servers", &servers).unwrap().lst_rc(), 0);
    console.add_group(KEY, "client").unwrap();
    let console_id = ProcessId::lustre("10.0.0.200@tcp".parse().unwrap());
    let answer = |fake: &Raw, reply_type: u32, expected: u32| {
        let (event, request) = fake.received();
        assert_eq!(event.portal, 51);
        assert_eq!(u32_at(&request, 8), expected);
        let mut reply = message(reply_type, 1);
        reply[28..44].copy_from_slice(&request[if expected == 8 { 40..56 } else { 32..48 }]);
        (request, reply)
    };
    fake.post(51, 1, 160, MdOptions::OP_PUT);
    thread::scope(|scope| {
        let adding = scope.spawn(|| {
            console.add_nodes(KEY, "client", &[ProcessId::lustre("10.0.0.50@tcp".parse().unwrap())])
        });
        let (request, mut reply) = answer(&fake, 1, 0);
        put_u32(&mut reply, 44, 100);
        fake.put(console_id, 52, u64_at(&request, 24), reply.to_vec());
        assert_eq!(adding.join().unwrap().unwrap().lst_rc(), 0);
    });

    let mut spec =
        ulnet_selftest::TestSpec::new(ulnet_selftest::TestKind::Ping, "client", "servers");
    spec.span = 3;
    spec.loop_count = 5;
    fake.post(51, 4, 160, MdOptions::OP_PUT);
    thread::scope(|scope| {
        let adding = scope.spawn(|| console.add_test(KEY, &spec));
        let (request, reply) = answer(&fake, 9, 8);
        // tsr_bulkid at 32, is_client at 76, ndest at 78 (unaligned), loop 5 at 68.
        assert_eq!((request[76], u32_at(&request, 78), u32_at(&request, 68)), (1, 3, 5));
        assert_eq!(u32_at(&request, 64), 12, "tsr_service PING");
        let bulk_bits = u64_at(&request, 32);
        check_match_bits(bulk_bits);
        // GET the list: 3 packed entries of 12 bytes (nid4 then pid, little-endian).
        let list = fake.node.get_into(console_id, 52, bulk_bits, vec![0; 36], HANG_GUARD).unwrap();
        assert_eq!(list.len(), 36);
        for (i, entry) in list.chunks(12).enumerate() {
            assert_eq!(u64_at(entry, 0), tcp_nid4(10, 0, 0, i as u8 + 1));
            assert_eq!(u32_at(entry, 8), 12345);
        }
        fake.put(console_id, 52, u64_at(&request, 24), reply.to_vec());
        let result = adding.join().unwrap().unwrap();
        assert_eq!(result.lst_rc(), 0, "{result:?}");
    });
    drop(keep);
}

#[test]
fn service_survives_garbage_requests() {
    let fixture = ServiceFixture::new();
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for round in 0..600u64 {
        let service = [0u64, 1, 2, 3, 4, 5, 6, 11, 12][(next() % 9) as usize];
        let portal = if service < 10 { 51 } else { 50 };
        let mut bytes: Vec<u8> = (0..160).map(|_| next() as u8).collect();
        match round % 4 {
            // Valid header for the service, random body.
            0 | 1 => {
                let request_type = match service {
                    0 => 10,
                    1 => 0,
                    2 => 2,
                    3 => 4,
                    4 => 8,
                    5 => 6,
                    6 => 16,
                    11 => 12,
                    _ => 14,
                };
                bytes[..24].copy_from_slice(&message(request_type, (next() % 3) as u32)[..24]);
                bytes[24..32].copy_from_slice(&(0x4400_0000_0000_0000 | round).to_le_bytes());
            }
            // A short message.
            2 => bytes.truncate((next() % 160) as usize),
            // Pure noise.
            _ => {}
        }
        fixture.console.put(fixture.target, portal, service, bytes);
    }
    // Still serving: a DEBUG gets an answer (a random MAKE_SESSION may have made a session).
    let reply = fixture.framework(0, with_sid(message(10, 1), 32));
    assert_eq!(&reply[0..4], &MAGIC_LE);
    assert_eq!(u32_at(&reply, 8), 11);
    assert!(matches!(u32_at(&reply, 24), 0 | 3), "{reply:?}");
    let counters = fixture.service.rpc_counters();
    assert!(counters.rpcs_received >= 1, "{counters:?}");
}

// ---------------------------------------------------------------- bounds (issue 20, item 3)

const ENOMEM: u32 = 12;
const EINVAL: u32 = 22;

/// A TEST request of our session: batch `batch`, service 11 (BRW) or 12 (PING), concurrency,
/// client or server, `dest_count` destinations, BRW WRITE params of 4 KiB.
fn test_request(batch: u64, service: u32, concurrency: u32, client: bool, dests: u32) -> [u8; 160] {
    let mut test = with_sid(message(8, 1), 40);
    put_u64(&mut test, 56, batch);
    put_u32(&mut test, 64, service);
    put_u32(&mut test, 68, 1);
    put_u32(&mut test, 72, concurrency);
    test[76] = u8::from(client);
    test[77] = 1;
    test[78..82].copy_from_slice(&dests.to_le_bytes());
    if service == 11 {
        test[82..84].copy_from_slice(&2u16.to_le_bytes());
        test[84..86].copy_from_slice(&1u16.to_le_bytes());
        put_u32(&mut test, 86, 4096);
    }
    test
}

/// Waits (at most [`HANG_GUARD`]) until `done` holds.
fn wait_until(mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + HANG_GUARD;
    while !done() {
        assert!(std::time::Instant::now() < deadline, "condition never came true");
        thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// A BRW request: direction 1 READ / 2 WRITE, `length` bytes, check NONE, bulk bits `bits`.
fn brw_request(direction: u32, length: u32, bits: u64) -> [u8; 160] {
    let mut brw = message(12, 1);
    put_u64(&mut brw, 32, bits);
    put_u32(&mut brw, 40, direction);
    put_u32(&mut brw, 44, length);
    put_u32(&mut brw, 48, 1);
    brw
}

#[test]
fn test_requests_past_their_bounds_are_refused_and_nothing_is_made() {
    use ulnet_selftest::limits::{
        MAX_BATCHES_PER_SESSION, MAX_CONCURRENCY, MAX_DESTINATIONS, MAX_TESTS_PER_BATCH, MAX_UNITS,
    };
    let fixture = ServiceFixture::new();
    assert_eq!(u32_at(&fixture.framework(1, make_session("b", STAMP, false)), 24), 0);
    let status = |request| u32_at(&fixture.framework(4, request), 24);

    // The kernel's field limits: EINVAL.
    assert_eq!(status(test_request(1, 11, MAX_CONCURRENCY + 1, true, 1)), EINVAL);
    assert_eq!(status(test_request(1, 11, 1, true, MAX_DESTINATIONS as u32 + 1)), EINVAL);

    // The hostile trial's request: concurrency 1024 to 87,296 destinations. Answered ENOMEM at
    // once; the destination list is never fetched (no source is posted: a GET would leave the
    // request unanswered) and no bulk is charged.
    let reply =
        fixture.framework(4, test_request(1, 11, MAX_CONCURRENCY, true, MAX_DESTINATIONS as u32));
    assert_eq!(u32_at(&reply, 24), ENOMEM);
    check_sid(&reply, 28, STAMP);
    assert_eq!(fixture.service.buffer_usage().charged, 0);
    let session = fixture.service.session().unwrap();
    assert_eq!(session.batches, 1, "the batch is made, as sfw_bid2batch() does, with no test");

    // Exactly MAX_UNITS in one client test is fine (its list served); one more unit is not.
    let dests = (MAX_UNITS / MAX_CONCURRENCY as usize) as u32;
    let bulk_bits = 0x5500_0000_0000_0100;
    let mut list = Vec::new();
    for index in 0..dests {
        list.extend_from_slice(&tcp_nid4(10, 0, 1, index as u8).to_le_bytes());
        list.extend_from_slice(&12345u32.to_le_bytes());
    }
    fixture.console.post_source(52, bulk_bits, list);
    let mut full = test_request(2, 11, MAX_CONCURRENCY, true, dests);
    put_u64(&mut full, 32, bulk_bits);
    assert_eq!(status(full), 0);
    assert_eq!(status(test_request(2, 11, 1, true, 1)), ENOMEM, "past MAX_UNITS");
    assert_eq!(status(test_request(3, 12, 1, true, 1)), ENOMEM, "in any batch");

    // Tests per batch: server tests up to the bound, then ENOMEM.
    for _ in 0..MAX_TESTS_PER_BATCH {
        assert_eq!(status(test_request(4, 12, 1, false, 0)), 0);
    }
    assert_eq!(status(test_request(4, 12, 1, false, 0)), ENOMEM);

    // Batches per session: new batch ids up to the bound, then ENOMEM.
    let mut batches = fixture.service.session().unwrap().batches;
    while batches < MAX_BATCHES_PER_SESSION {
        assert_eq!(status(test_request(100 + batches as u64, 12, 1, false, 0)), 0);
        batches += 1;
    }
    assert_eq!(status(test_request(10_000, 12, 1, false, 0)), ENOMEM);
    assert_eq!(fixture.service.session().unwrap().batches, MAX_BATCHES_PER_SESSION);

    // The node is healthy: it still answers.
    let mut query = with_sid(message(4, 1), 32);
    put_u64(&mut query, 48, 4);
    put_u32(&mut query, 56, 3);
    assert_eq!(u32_at(&fixture.framework(3, query), 24), 0);
}

#[test]
fn test_service_requests_without_a_server_test_are_dropped_unserved() {
    let fixture = ServiceFixture::new();
    let dropped = || fixture.service.rpc_counters().rpcs_dropped;
    // No session at all: a 1 MiB WRITE (whose source we do offer) and a PING get no reply,
    // no bulk is made for them.
    fixture.console.post_source(52, 0x5500_0000_0000_0200, vec![0; 1 << 20]);
    fixture.console.put(
        fixture.target,
        50,
        11,
        brw_request(2, 1 << 20, 0x5500_0000_0000_0200).to_vec(),
    );
    wait_until(|| dropped() == 1);
    let mut ping = message(14, 1);
    put_u32(&mut ping, 32, 0xBABE_FACE);
    fixture.console.put(fixture.target, 50, 12, ping.to_vec());
    wait_until(|| dropped() == 2);
    assert_eq!(fixture.service.buffer_usage().charged, 0);
    assert_eq!(fixture.service.buffer_usage().spare, 0, "no 1 MiB sink was made");

    // A session with only client tests serves neither.
    assert_eq!(u32_at(&fixture.framework(1, make_session("c", STAMP, false)), 24), 0);
    fixture.console.put(fixture.target, 50, 12, ping.to_vec());
    wait_until(|| dropped() == 3);
    // A PING server test opens PING, not BRW.
    assert_eq!(u32_at(&fixture.framework(4, test_request(1, 12, 1, false, 0)), 24), 0);
    let reply = fixture.console.call(fixture.target, 50, 12, ping);
    assert_eq!(u32_at(&reply, 28), 0xBABE_FACE);
    fixture.console.put(
        fixture.target,
        50,
        11,
        brw_request(2, 4096, 0x5500_0000_0000_0201).to_vec(),
    );
    wait_until(|| dropped() == 4);
    assert_eq!(fixture.service.buffer_usage().charged, 0);
}

#[test]
fn brw_bulk_stays_within_the_budget_and_spares_go_when_idle() {
    use ulnet_selftest::limits::SPARE_IDLE;
    const MIB: u32 = 1 << 20;
    let budget = 4 * MIB as usize;
    let fixture = ServiceFixture::with_config(ServiceConfig::default().with_bulk_budget(budget));
    assert_eq!(u32_at(&fixture.framework(1, make_session("m", STAMP, false)), 24), 0);
    assert_eq!(u32_at(&fixture.framework(4, test_request(1, 11, 1, false, 0)), 24), 0);

    // 1 MiB WRITEs whose data never comes (no source posted: the service's GETs stay
    // unanswered) hold their sinks; once the budget is spent, further ones are answered
    // ENOMEM at once, with no sink made.
    for index in 0..4 {
        fixture.console.put(
            fixture.target,
            50,
            11,
            brw_request(2, MIB, 0x5500_0000_0000_0300 + index).to_vec(),
        );
    }
    wait_until(|| fixture.service.buffer_usage().charged == budget);
    for index in 0..16 {
        let reply = fixture.console.call(
            fixture.target,
            50,
            11,
            brw_request(2, MIB, 0x5500_0000_0000_0400 + index),
        );
        assert_eq!(u32_at(&reply, 24), ENOMEM, "brw_status");
        // A READ (a shared source) is charged alike.
        let reply = fixture.console.call(
            fixture.target,
            50,
            11,
            brw_request(1, MIB, 0x5500_0000_0000_0500 + index),
        );
        assert_eq!(u32_at(&reply, 24), ENOMEM, "brw_status");
        let usage = fixture.service.buffer_usage();
        assert!(usage.charged + usage.spare <= budget, "{usage:?}");
    }
    assert!(fixture.service.buffer_usage().refused >= 32);

    // On another node, WRITEs that complete, each of a new length, as in the trial: the
    // spares they leave stay within the budget, and go once idle.
    let fixture = ServiceFixture::with_config(ServiceConfig::default().with_bulk_budget(budget));
    assert_eq!(u32_at(&fixture.framework(1, make_session("n", STAMP, false)), 24), 0);
    assert_eq!(u32_at(&fixture.framework(4, test_request(1, 11, 1, false, 0)), 24), 0);
    for index in 0..64u32 {
        let length = 512 * 1024 + index * 8;
        let bits = 0x5500_0000_0000_0600 + u64::from(index);
        fixture.console.post_source(52, bits, vec![0; length as usize]);
        let reply = fixture.console.call(fixture.target, 50, 11, brw_request(2, length, bits));
        assert_eq!(u32_at(&reply, 24), 0, "brw_status");
        let usage = fixture.service.buffer_usage();
        assert!(usage.charged + usage.spare <= budget, "{usage:?}");
    }
    assert!(fixture.service.buffer_usage().spare > 0, "completed sinks are kept for reuse");
    fixture.service.trim_buffers_at(std::time::Instant::now() + SPARE_IDLE * 2);
    assert_eq!(fixture.service.buffer_usage().spare, 0, "idle spares are freed");
    // And the node still serves.
    fixture.console.post_source(52, 0x5500_0000_0000_0700, vec![0; 4096]);
    let reply =
        fixture.console.call(fixture.target, 50, 11, brw_request(2, 4096, 0x5500_0000_0000_0700));
    assert_eq!(u32_at(&reply, 24), 0);
}
