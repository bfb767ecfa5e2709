//! Stories about multi-rail: path selection over many rails, health and recovery, the
//! fatal-error flag, fast failover from black holes, configured peers, and latency
//! statistics (docs/protocol/semantics.md §3, §4, §6; docs/decisions/0008-fast-failover.md).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::{Harness, HarnessConfig, rail_nid};
use crate::addr::{Net, Nid};
use crate::engine::config::{NiSetError, PeerAddError, PeerDelError, PeerSetError};
use crate::engine::event::{EventKind, EventStatus};
use crate::engine::health::HealthStatus;
use crate::engine::md::{MdHandle, MdOptions, MdSpec, Threshold, UnlinkMode};
use crate::engine::me::{InsertPosition, LNET_PID_LUSTRE, ProcessId};
use crate::engine::memory::Memory;
use crate::engine::ni::NiId;
use crate::engine::node::{GetRequest, PutRequest};
use crate::engine::peer::PeerState;
use crate::engine::tunables::{NetTunables, Tunables};
use crate::link_model::LinkConfig;
use crate::time::Time;
use crate::wire::header::{Body, Header};
use crate::wire::ping::{LNET_NI_STATUS_DOWN, LNET_NI_STATUS_UP};

pub(super) const PORTAL: u32 = 9;
/// GETs read from one wildcard MD on its own portal, which serves any offset any number of
/// times (a copy of a GET whose REPLY was lost is served again).
const GET_PORTAL: u32 = 10;
/// The size of the GET source.
const GET_SOURCE: usize = 1 << 20;

/// Match bits are unique per operation (across stories too, which is harmless).
static NEXT_BITS: AtomicU64 = AtomicU64::new(1);

/// 100 MB/s rails with 10 us of latency.
const RAIL: LinkConfig = LinkConfig {
    latency: Duration::from_micros(10),
    bandwidth_bytes_per_sec: Some(100_000_000),
    loss_per_million: 0,
    duplicate_per_million: 0,
};

/// Two nodes with `rails` rails, discovered, node 1 serving GETs.
fn harness(rails: usize, link: LinkConfig) -> Harness {
    let mut h = Harness::new(HarnessConfig { rails, link, ..HarnessConfig::default() });
    h.discover_all();
    add_get_source(&mut h, 1);
    h
}

/// A wildcard MD on [`GET_PORTAL`] serving any GET.
fn add_get_source(h: &mut Harness, node: usize) {
    let me = h
        .me_attach(
            node,
            GET_PORTAL,
            ProcessId::ANY,
            0,
            u64::MAX,
            UnlinkMode::Retain,
            InsertPosition::After,
        )
        .unwrap();
    let source = MdSpec::new(Memory::new(vec![0x5a; GET_SOURCE]))
        .options(MdOptions::OP_GET | MdOptions::MANAGE_REMOTE);
    h.md_attach(node, me, source, UnlinkMode::Retain).unwrap();
}

pub(super) fn tcp_nid(address: u32) -> Nid {
    Nid::new4(Net::TCP, address)
}

/// A batch of operations from one node to another, each with its own match bits and MDs.
pub(super) struct Batch {
    from: usize,
    to: usize,
    /// The initiator's MD of each operation, by match bits.
    mds: BTreeMap<u64, MdHandle>,
    get: bool,
}

/// Sends `count` PUTs with ACK of `size` bytes (each into a one-shot buffer posted on `to`)
/// or GETs (from `to`'s GET source) from `from`, each with match bits of its own.
pub(super) fn start(
    h: &mut Harness,
    from: usize,
    to: usize,
    count: u64,
    size: usize,
    get: bool,
) -> Batch {
    start_on(h, (from, None), to, count, size, get)
}

/// [`start`] with the initiator's MDs bound on partition `cpt` of `from` (where the calling
/// thread's is taken when `None`).
pub(super) fn start_on(
    h: &mut Harness,
    (from, cpt): (usize, Option<u32>),
    to: usize,
    count: u64,
    size: usize,
    get: bool,
) -> Batch {
    let on = |spec: MdSpec| match cpt {
        Some(cpt) => spec.on_partition(cpt),
        None => spec,
    };
    let first = NEXT_BITS.fetch_add(count, Ordering::Relaxed);
    let mut batch = Batch { from, to, mds: BTreeMap::new(), get };
    let target = h.process(to);
    for bits in first..first + count {
        if get {
            assert!(size <= GET_SOURCE);
            let md = h.bind(
                from,
                on(MdSpec::new(Memory::new(vec![0; size])).threshold(Threshold::Count(2))),
            );
            let request = GetRequest {
                md,
                target,
                portal: GET_PORTAL,
                match_bits: bits,
                remote_offset: 0,
                source: None,
            };
            h.get(from, &request).unwrap();
            batch.mds.insert(bits, md);
        } else {
            let served = MdSpec::new(Memory::new(vec![0; size]))
                .threshold(Threshold::Count(1))
                .options(MdOptions::OP_PUT);
            h.post(to, PORTAL, bits, served);
            let md = h.bind(
                from,
                on(MdSpec::new(Memory::new(vec![bits as u8; size])).threshold(Threshold::Count(2))),
            );
            let request = PutRequest {
                md,
                ack: true,
                target,
                portal: PORTAL,
                match_bits: bits,
                remote_offset: 0,
                hdr_data: 0,
                source: None,
            };
            h.put(from, &request).unwrap();
            batch.mds.insert(bits, md);
        }
    }
    batch
}

/// An event as the stories check it: kind, status, unlinked.
type Seen = (EventKind, EventStatus, bool);

/// Every event the harness delivered, indexed (taking events is destructive; stories keep
/// them here to check batches one at a time).
#[derive(Default)]
pub(super) struct EventLog {
    /// (node, MD) -> (kind, status, unlinked) in order.
    by_md: std::collections::HashMap<(usize, u64), Vec<Seen>>,
    /// (node, kind, match bits) -> how many.
    by_bits: std::collections::HashMap<(usize, u8, u64), usize>,
}

impl EventLog {
    fn collect(&mut self, h: &mut Harness) {
        for node in 0..h.node_count() {
            for event in h.take_events(node) {
                self.by_md.entry((node, event.md.0)).or_default().push((
                    event.kind,
                    event.status,
                    event.unlinked,
                ));
                *self.by_bits.entry((node, event.kind as u8, event.match_bits)).or_default() += 1;
            }
        }
    }

    /// The events of one MD.
    fn of(&self, node: usize, md: MdHandle) -> Vec<Seen> {
        self.by_md.get(&(node, md.0)).cloned().unwrap_or_default()
    }

    fn delivered(&self, node: usize, kind: EventKind, bits: u64) -> usize {
        self.by_bits.get(&(node, kind as u8, bits)).copied().unwrap_or(0)
    }

    fn done(&self, batch: &Batch) -> bool {
        batch.mds.values().all(|md| {
            self.by_md.get(&(batch.from, md.0)).is_some_and(|events| events.iter().any(|e| e.2))
        })
    }
}

/// Steps until every operation of `batches` has its final event; returns when that was.
fn run_until_done(h: &mut Harness, log: &mut EventLog, batches: &[&Batch]) -> Time {
    let mut pending: Vec<&Batch> = batches.to_vec();
    loop {
        log.collect(h);
        pending.retain(|batch| !log.done(batch));
        if pending.is_empty() {
            return h.now();
        }
        assert!(h.step(), "the operations never finished");
    }
}

/// Checks a finished batch: every operation completed once at the initiator (SEND then the
/// ACK or REPLY, all OK, the last unlinked) and every PUT was delivered exactly once at the
/// target (a GET at least once: a copy of one whose REPLY was lost is served again).
pub(super) fn assert_complete(h: &mut Harness, log: &mut EventLog, batch: &Batch) {
    log.collect(h);
    let response = if batch.get { EventKind::Reply } else { EventKind::Ack };
    for (bits, md) in &batch.mds {
        assert_eq!(
            log.of(batch.from, *md),
            [(EventKind::Send, EventStatus::Ok, false), (response, EventStatus::Ok, true)],
            "operation {bits:#x}"
        );
    }
    let kind = if batch.get { EventKind::Get } else { EventKind::Put };
    for bits in batch.mds.keys() {
        let count = log.delivered(batch.to, kind, *bits);
        let expected = if batch.get { 1..=2 } else { 1..=1 };
        assert!(expected.contains(&count), "operation {bits:#x} delivered {count} times");
    }
}

/// How many PUTs went from (or to, with `to`) each NID, in first-seen order.
pub(super) fn tally(headers: &[Header], to: bool) -> Vec<(Nid, usize)> {
    let mut counts: Vec<(Nid, usize)> = Vec::new();
    for header in headers.iter().filter(|header| matches!(header.body, Body::Put { .. })) {
        let nid = if to { header.dest_nid } else { header.src_nid };
        match counts.iter_mut().find(|(seen, _)| *seen == nid) {
            Some((_, count)) => *count += 1,
            None => counts.push((nid, 1)),
        }
    }
    counts
}

pub(super) fn nids_of(counts: &[(Nid, usize)]) -> Vec<Nid> {
    counts.iter().map(|(nid, _)| *nid).collect()
}

/// Payload-plus-header bytes node 0 sent to node 1 over each rail.
fn rail_bytes(h: &Harness, rails: usize) -> Vec<u64> {
    (0..rails).map(|rail| h.rail_traffic(rail_nid(0, rail), rail_nid(1, rail)).1).collect()
}

// ------------------------------------------------------------------ selection

#[test]
fn traffic_spreads_evenly_over_every_rail() {
    for rails in [1usize, 2, 4] {
        let mut h = harness(rails, RAIL);
        let mut log = EventLog::default();
        let before = rail_bytes(&h, rails);
        let start_time = h.now();
        let batch = start(&mut h, 0, 1, 256, 64 << 10, false);
        let finished = run_until_done(&mut h, &mut log, &[&batch]);
        let elapsed = finished.saturating_duration_since(start_time);
        h.drive();
        assert_complete(&mut h, &mut log, &batch);
        let sent: Vec<u64> = rail_bytes(&h, rails)
            .iter()
            .zip(&before)
            .map(|(after, before)| after - before)
            .collect();
        let total: u64 = sent.iter().sum();
        for (rail, bytes) in sent.iter().enumerate() {
            // Round robin over equal rails: each carries its share within one message.
            let share = total / rails as u64;
            assert!(
                bytes.abs_diff(share) <= (64 << 10) + 72,
                "{rails} rails: rail {rail} carried {bytes} of {total}"
            );
        }
        // The rails run in parallel: the transfer takes N times less (within 10%).
        let ideal = Duration::from_nanos(total * 1_000_000_000 / (100_000_000 * rails as u64));
        assert!(elapsed < ideal * 11 / 10, "{rails} rails: {elapsed:?} for {ideal:?} of data");
    }
}

#[test]
fn responses_leave_from_the_ni_their_request_came_in_on() {
    let mut h = harness(3, RAIL);
    let mut log = EventLog::default();
    h.take_transmitted(0);
    h.take_transmitted(1);
    let gets = start(&mut h, 0, 1, 12, 100, true);
    let puts = start(&mut h, 0, 1, 12, 100, false);
    h.drive();
    assert_complete(&mut h, &mut log, &gets);
    assert_complete(&mut h, &mut log, &puts);
    let requests: Vec<Header> = h.take_transmitted(0);
    let responses: Vec<Header> = h.take_transmitted(1);
    let mut rails_used = std::collections::BTreeSet::new();
    let net_number = |nid: Nid| nid.net().number;
    for response in &responses {
        let request = requests.iter().find(|request| match (request.body, response.body) {
            (Body::Get { return_wmd, .. }, Body::Reply { dst_wmd }) => return_wmd == dst_wmd,
            (Body::Put { ack_wmd, .. }, Body::Ack { dst_wmd, .. }) => ack_wmd == dst_wmd,
            _ => false,
        });
        let request = request.expect("every response answers a request");
        assert_eq!((response.src_nid, response.dest_nid), (request.dest_nid, request.src_nid));
        rails_used.insert(net_number(request.src_nid));
    }
    assert_eq!(responses.len(), 24);
    assert_eq!(rails_used.len(), 3, "requests went over every rail");
}

#[test]
fn a_source_specified_send_uses_exactly_that_source_and_destination() {
    let mut h = harness(2, RAIL);
    h.take_transmitted(0);
    let target = ProcessId::new(rail_nid(1, 1), LNET_PID_LUSTRE);
    for _ in 0..4 {
        h.post(
            1,
            PORTAL,
            7,
            MdSpec::new(Memory::new(vec![0; 8]))
                .threshold(Threshold::Count(1))
                .options(MdOptions::OP_PUT),
        );
        let md = h.bind(0, MdSpec::new(Memory::new(vec![1; 8])));
        let request = PutRequest {
            md,
            ack: false,
            target,
            portal: PORTAL,
            match_bits: 7,
            remote_offset: 0,
            hdr_data: 0,
            source: Some(rail_nid(0, 1)),
        };
        h.put(0, &request).unwrap();
    }
    h.drive();
    let sent = h.take_transmitted(0);
    assert_eq!(sent.len(), 4);
    assert!(
        sent.iter()
            .all(|header| (header.src_nid, header.dest_nid) == (rail_nid(0, 1), rail_nid(1, 1)))
    );
    // A source on another net than the destination needs a route: -EHOSTUNREACH.
    let md = h.bind(0, MdSpec::new(Memory::new(vec![1; 8])));
    let request = PutRequest {
        md,
        ack: false,
        target,
        portal: PORTAL,
        match_bits: 7,
        remote_offset: 0,
        hdr_data: 0,
        source: Some(rail_nid(0, 0)),
    };
    h.put(0, &request).unwrap();
    h.drive();
    let events = h.take_events(0);
    assert_eq!(events.last().map(|event| event.status), Some(EventStatus::HostUnreachable));
}

/// Two NIs on one net talking to a peer with discovery off (so not multi-rail): every
/// message leaves from the NI first used, which the peer NI records as preferred.
#[test]
fn a_non_multi_rail_peer_is_always_reached_from_the_same_ni() {
    let a = vec![tcp_nid(0x0a00_0001), tcp_nid(0x0a00_0101)];
    let b = vec![tcp_nid(0x0a00_0002)];
    let config =
        HarnessConfig { node_nids: vec![a.clone(), b.clone()], ..HarnessConfig::default() };
    let mut h = Harness::new(config);
    let mut log = EventLog::default();
    let mut quiet = *h.node(1).tunables();
    quiet.discovery = false;
    h.with_node(1, |node, now| node.set_tunables(now, quiet)).unwrap();
    h.discover_all();
    let peer = h.node(0).peer_info(b[0]).unwrap();
    assert!(!peer.multi_rail());
    h.take_transmitted(0);
    let batch = start(&mut h, 0, 1, 10, 16, false);
    h.drive();
    assert_complete(&mut h, &mut log, &batch);
    let sources = tally(&h.take_transmitted(0), false);
    assert_eq!(sources.len(), 1);
    let preferred = h.node(0).peer_ni_stats(b[0]).unwrap().preferred;
    assert_eq!(preferred, sources.first().map(|(nid, _)| *nid));
}

/// Selection among NIs on one net: the fatal flag, then health, then priority, then NUMA
/// distance (rounded up to `numa_range`), then credits and round robin.
#[test]
fn local_nis_are_ordered_as_lustre_orders_them() {
    let a = vec![tcp_nid(0x0a00_0001), tcp_nid(0x0a00_0101), tcp_nid(0x0a00_0201)];
    let b = vec![tcp_nid(0x0a00_0002), tcp_nid(0x0a00_0102)];
    let config = HarnessConfig { node_nids: vec![a.clone(), b], ..HarnessConfig::default() };
    let mut h = Harness::new(config);
    let mut log = EventLog::default();
    h.discover_all();
    let sources = |h: &mut Harness, log: &mut EventLog| -> Vec<(Nid, usize)> {
        h.take_transmitted(0);
        let batch = start(h, 0, 1, 12, 16, false);
        h.drive();
        assert_complete(h, log, &batch);
        tally(&h.take_transmitted(0), false)
    };
    let ni = |h: &Harness, index: usize| h.node(0).ni_for_nid(a[index]).unwrap();
    // All equal: round robin over the three.
    let counts = sources(&mut h, &mut log);
    assert_eq!(counts.iter().map(|(_, count)| *count).collect::<Vec<_>>(), [4, 4, 4]);
    // NUMA: the closest wins, unless numa_range makes them equal.
    let (n0, n1, n2) = (ni(&h, 0), ni(&h, 1), ni(&h, 2));
    h.with_node(0, |node, _| {
        node.set_ni_numa_distance(n0, 21).unwrap();
        node.set_ni_numa_distance(n1, 10).unwrap();
        node.set_ni_numa_distance(n2, 21).unwrap();
    });
    assert_eq!(nids_of(&sources(&mut h, &mut log)), [a[1]]);
    let mut tunables = *h.node(0).tunables();
    tunables.numa_range = 30;
    h.with_node(0, |node, now| node.set_tunables(now, tunables)).unwrap();
    assert_eq!(sources(&mut h, &mut log).len(), 3);
    // Priority beats distance.
    h.with_node(0, |node, _| node.set_ni_priority(n2, 1)).unwrap();
    assert_eq!(nids_of(&sources(&mut h, &mut log)), [a[2]]);
    // Health beats priority.
    h.with_node(0, |node, now| node.set_ni_health(now, Some(n2), 500)).unwrap();
    assert!(!nids_of(&sources(&mut h, &mut log)).contains(&a[2]));
    // The fatal flag beats everything: the NI is the last choice.
    h.with_node(0, |node, now| node.set_ni_health(now, None, 1000)).unwrap();
    h.with_node(0, |node, now| node.set_ni_fatal(now, n2, true)).unwrap();
    h.with_node(0, |node, _| node.set_ni_priority(n2, 0)).unwrap();
    assert!(!nids_of(&sources(&mut h, &mut log)).contains(&a[2]));
    assert_eq!(
        h.with_node(0, |node, _| node.set_ni_priority(NiId::LOOPBACK, 0)),
        Err(NiSetError::Loopback)
    );
    assert_eq!(
        h.with_node(0, |node, now| node.set_ni_health(now, Some(n0), 1001)),
        Err(NiSetError::HealthOutOfRange(1001))
    );
    assert_eq!(
        h.with_node(0, |node, now| node.set_ni_fatal(now, NiId(99), true)),
        Err(NiSetError::UnknownNi)
    );
}

/// NUMA distance is compared from the message's partition, as the kernel compares
/// `cfs_cpt_distance(md_cpt, ni_dev_cpt)`: two partitions, each near one of two NIs; a PUT
/// from an MD bound on partition 0 leaves by the NI near partition 0, one from partition 1 by
/// the other, and with one distance for every partition the two NIs alternate again.
#[test]
fn each_partition_sends_from_the_ni_nearest_it() {
    let a = vec![tcp_nid(0x0a00_0001), tcp_nid(0x0a00_0101)];
    let b = vec![tcp_nid(0x0a00_0002), tcp_nid(0x0a00_0102)];
    let config = HarnessConfig {
        node_nids: vec![a.clone(), b],
        partitions: crate::engine::cpt::Partitions::new(2).unwrap(),
        ..HarnessConfig::default()
    };
    let mut h = Harness::new(config);
    let mut log = EventLog::default();
    h.discover_all();
    let (n0, n1) = (h.node(0).ni_for_nid(a[0]).unwrap(), h.node(0).ni_for_nid(a[1]).unwrap());
    h.with_node(0, |node, _| {
        assert_eq!(
            node.set_ni_numa_distances(n0, &[10]),
            Err(NiSetError::DistanceCount { given: 1, partitions: 2 })
        );
        node.set_ni_numa_distances(n0, &[10, 21]).unwrap();
        node.set_ni_numa_distances(n1, &[21, 10]).unwrap();
    });
    let mut sources_from = |h: &mut Harness, cpt: u32| -> Vec<(Nid, usize)> {
        h.take_transmitted(0);
        let batch = start_on(h, (0, Some(cpt)), 1, 4, 8, false);
        h.drive();
        assert_complete(h, &mut log, &batch);
        tally(&h.take_transmitted(0), false)
    };
    assert_eq!(sources_from(&mut h, 0), [(a[0], 4)]);
    assert_eq!(sources_from(&mut h, 1), [(a[1], 4)]);
    // The stats show partition 0's distance.
    assert_eq!(h.node(0).ni_stats(n1).map(|stats| stats.numa_distance), Some(21));
    h.with_node(0, |node, _| node.set_ni_numa_distance(n1, 10)).unwrap();
    h.with_node(0, |node, _| node.set_ni_numa_distance(n0, 10)).unwrap();
    let spread = sources_from(&mut h, 1);
    assert_eq!((spread.len(), spread.iter().map(|(_, count)| count).sum::<usize>()), (2, 4));
    h.check();
}

/// Peer NIs: health first, then priority, then credits and round robin.
#[test]
fn peer_nis_are_ordered_by_health_then_priority() {
    let mut h = harness(1, RAIL);
    let mut log = EventLog::default();
    // A second NI for node 1 on the same net, learned through its push.
    let extra = tcp_nid(0x0a00_0102);
    h.add_ni(1, extra);
    h.drive();
    assert_eq!(h.node(0).peer_info(h.nid(1)).unwrap().nis.len(), 2);
    let destinations = |h: &mut Harness, log: &mut EventLog| -> Vec<(Nid, usize)> {
        h.take_transmitted(0);
        let batch = start(h, 0, 1, 10, 16, false);
        h.drive();
        assert_complete(h, log, &batch);
        tally(&h.take_transmitted(0), true)
    };
    assert_eq!(
        destinations(&mut h, &mut log).iter().map(|(_, count)| *count).collect::<Vec<_>>(),
        [5, 5]
    );
    let primary = h.nid(1);
    h.with_node(0, |node, _| node.set_peer_ni_priority(extra, 1)).unwrap();
    assert_eq!(nids_of(&destinations(&mut h, &mut log)), [extra]);
    h.with_node(0, |node, now| node.set_peer_ni_health(now, Some(extra), 800)).unwrap();
    assert_eq!(nids_of(&destinations(&mut h, &mut log)), [primary]);
    assert_eq!(
        h.with_node(0, |node, now| node.set_peer_ni_health(now, Some(tcp_nid(9)), 10)),
        Err(PeerSetError::NoSuchPeerNi(tcp_nid(9)))
    );
}

// ------------------------------------------------------------------ health and recovery

#[test]
fn local_status_follows_health_in_place_without_a_push() {
    let mut h = harness(2, RAIL);
    let sequence = h.node(0).local_ping_info().sequence;
    let ni = h.node(0).ni_for_nid(rail_nid(0, 1)).unwrap();
    let status = |h: &Harness| {
        h.node(0)
            .local_ping_info()
            .nids
            .iter()
            .find(|entry| entry.nid == rail_nid(0, 1))
            .unwrap()
            .status
    };
    h.with_node(0, |node, now| node.set_ni_health(now, Some(ni), 0)).unwrap();
    assert_eq!(status(&h), LNET_NI_STATUS_DOWN);
    assert!(!h.node(0).ni_stats(ni).unwrap().up);
    assert_eq!(h.node(0).local_ping_info().sequence, sequence);
    // Recovery pings (at the NI's own NID, through the fabric) raise it 100 at a time; it
    // shows UP again only at full health.
    assert_eq!(h.node(0).local_recovery_queue().collect::<Vec<_>>(), [rail_nid(0, 1)]);
    h.run_for(Duration::from_millis(1001));
    // The ping goes out and comes back through the NI (+100 each way for the GET and the
    // REPLY, sent and received) and its REPLY counts again for recovery: +500.
    let health = h.node(0).ni_stats(ni).unwrap().health.health_value;
    assert_eq!((health, status(&h)), (500, LNET_NI_STATUS_DOWN));
    h.drive();
    assert_eq!(status(&h), LNET_NI_STATUS_UP);
    assert_eq!(h.node(0).local_ping_info().sequence, sequence);
    assert_eq!(h.node(0).local_recovery_queue().count(), 0);
}

/// The recovery pings sent to a peer NI whose link is gone for good, in seconds since its
/// health was lowered, until `recovery_limit` takes it off the queue.
fn recovery_pings(blackhole_timeout: Duration) -> Vec<u64> {
    let mut h = harness(2, RAIL);
    let mut log = EventLog::default();
    let peer = rail_nid(1, 1);
    // Only NIs once heard from are recovered: talk over both rails first.
    let batch = start(&mut h, 0, 1, 4, 64, false);
    h.drive();
    assert_complete(&mut h, &mut log, &batch);
    h.set_blackhole(rail_nid(0, 1), peer, true);
    let mut tunables = *h.node(0).tunables();
    tunables.recovery_limit = Duration::from_secs(20);
    tunables.blackhole_timeout = blackhole_timeout;
    h.with_node(0, |node, now| node.set_tunables(now, tunables)).unwrap();
    h.with_node(0, |node, now| node.set_peer_ni_health(now, Some(peer), 500)).unwrap();
    let start_time = h.now();
    let mut pings = Vec::new();
    h.take_transmitted(0);
    while h.step() {
        let sent = h.take_transmitted(0);
        if sent.iter().any(|header| header.dest_nid == peer) {
            pings.push(h.now().saturating_duration_since(start_time).as_secs());
        }
        assert!(h.now() < start_time + Duration::from_secs(600), "recovery never stopped");
    }
    assert_eq!(h.node(0).peer_recovery_queue().count(), 0);
    let stats = h.node(0).peer_ni_stats(peer).unwrap();
    assert_eq!((stats.health.ping_count, stats.health.next_ping), (0, 0));
    pings
}

#[test]
fn recovery_pings_back_off_and_respect_the_recovery_limit() {
    // As the kernel: a ping is pending until its tracker expires (150 s), the next one then
    // goes at once (its backoff point passed), and the NI ages out 20 s after it was last
    // heard from.
    assert_eq!(recovery_pings(Duration::ZERO), [1, 151]);
    // With fast failover a probe times out after 2 s: pings at 1, 2, 4, 8, 16 s intervals.
    assert_eq!(recovery_pings(Duration::from_secs(2)), [1, 3, 7, 15, 31]);
}

#[test]
fn local_errors_lower_health_without_resending_and_remote_drops_resend() {
    let mut h = harness(2, RAIL);
    let mut log = EventLog::default();
    h.fail_next_send(0, HealthStatus::LocalError);
    let batch = start(&mut h, 0, 1, 1, 8, false);
    h.settle();
    let events = h.take_events(0);
    assert_eq!(events[0].status, EventStatus::Io);
    assert_eq!(h.node(0).stats().resend_count, 0);
    h.drive();
    h.take_events(1);
    drop(batch);
    // REMOTE_DROPPED goes again on another path (the peer has two NIs).
    h.fail_next_send(0, HealthStatus::RemoteDropped);
    let batch = start(&mut h, 0, 1, 1, 8, false);
    h.drive();
    assert_complete(&mut h, &mut log, &batch);
    assert_eq!(h.node(0).stats().resend_count, 1);
}

// ------------------------------------------------------------------ link loss and black holes

/// Keeps `batches` of 16 PUTs with ACK and 16 GETs going from node 0 to node 1, `gap` apart,
/// starting now; returns them to check once the run is over.
fn steady(h: &mut Harness, rounds: usize, gap: Duration) -> Vec<Batch> {
    let mut batches = Vec::new();
    for _ in 0..rounds {
        batches.push(start(h, 0, 1, 16, 4096, false));
        batches.push(start(h, 0, 1, 16, 4096, true));
        h.run_for(gap);
    }
    batches
}

#[test]
fn a_rail_lost_mid_transfer_moves_everything_to_the_others_at_once() {
    let mut h = harness(2, RAIL);
    let mut log = EventLog::default();
    let first = steady(&mut h, 2, Duration::from_micros(300));
    let lost = h.now();
    h.set_link_down(0, rail_nid(0, 0), true);
    // Within a second everything runs on rail 1 and nothing new goes to rail 0.
    h.run_for(Duration::from_millis(100));
    let rail0 = h.rail_traffic(rail_nid(0, 0), rail_nid(1, 0)).0;
    let later = steady(&mut h, 10, Duration::from_millis(50));
    assert_eq!(h.rail_traffic(rail_nid(0, 0), rail_nid(1, 0)).0, rail0);
    assert!(h.now() < lost + Duration::from_secs(1));
    let batches: Vec<&Batch> = first.iter().chain(&later).collect();
    let done = run_until_done(&mut h, &mut log, &batches);
    assert!(done < lost + Duration::from_secs(3), "all done at {done:?}");
    for batch in batches {
        assert_complete(&mut h, &mut log, batch);
    }
    assert!(h.node(0).stats().fast_resends > 0, "operations stranded on the lost rail moved");
    // The rail comes back: it is used again once its health is back.
    h.set_link_down(0, rail_nid(0, 0), false);
    h.drive();
    let before = h.rail_traffic(rail_nid(0, 0), rail_nid(1, 0)).0;
    let batch = start(&mut h, 0, 1, 8, 64, false);
    h.drive();
    assert_complete(&mut h, &mut log, &batch);
    assert!(h.rail_traffic(rail_nid(0, 0), rail_nid(1, 0)).0 > before);
}

/// The serving side loses a rail under GETs: the REPLYs Lustre pins to the NI their GET came
/// in on leave by the other rail instead (docs/decisions/0008), so every GET completes within
/// seconds rather than at its transaction timeout.
#[test]
fn responses_pinned_to_a_lost_rail_leave_by_another() {
    let mut h = harness(2, RAIL);
    let mut log = EventLog::default();
    let first: Vec<Batch> = (0..4).map(|_| start(&mut h, 0, 1, 16, 4096, true)).collect();
    h.run_for(Duration::from_micros(200));
    let lost = h.now();
    h.set_link_down(1, rail_nid(1, 0), true);
    let batches: Vec<&Batch> = first.iter().collect();
    let done = run_until_done(&mut h, &mut log, &batches);
    assert!(done < lost + Duration::from_secs(3), "all done at {done:?}");
    for batch in batches {
        assert_complete(&mut h, &mut log, batch);
    }
    assert!(h.node(1).stats().pins_released > 0, "REPLYs pinned to the lost rail moved");
}

#[test]
fn a_flapping_rail_loses_nothing() {
    let mut h = harness(2, RAIL);
    let mut log = EventLog::default();
    let mut batches = Vec::new();
    for round in 0..12 {
        batches.extend(steady(&mut h, 1, Duration::from_millis(1)));
        h.set_link_down(0, rail_nid(0, 1), round % 2 == 0);
        h.run_for(Duration::from_millis(300));
    }
    h.set_link_down(0, rail_nid(0, 1), false);
    h.drive();
    for batch in &batches {
        assert_complete(&mut h, &mut log, batch);
    }
    h.assert_quiescent();
}

#[test]
fn a_black_hole_is_left_within_seconds_and_nothing_is_lost_or_doubled() {
    let mut h = harness(2, RAIL);
    let mut log = EventLog::default();
    let mut batches = steady(&mut h, 2, Duration::from_millis(10));
    let start_time = h.now();
    h.set_blackhole(rail_nid(0, 0), rail_nid(1, 0), true);
    batches.extend(steady(&mut h, 101, Duration::from_millis(50)));
    // Detected (suspected), and rail 0 carries nothing but probes after 5 s.
    assert!(h.node(0).stats().blackhole_suspicions > 0);
    let after_five = h.rail_traffic(rail_nid(0, 0), rail_nid(1, 0));
    assert!(h.now() > start_time + Duration::from_secs(5));
    batches.extend(steady(&mut h, 20, Duration::from_millis(50)));
    let probes = h.rail_traffic(rail_nid(0, 0), rail_nid(1, 0)).0 - after_five.0;
    assert!(probes <= 4, "{probes} frames went into the black hole after 5 s");
    let all: Vec<&Batch> = batches.iter().collect();
    run_until_done(&mut h, &mut log, &all);
    for batch in &batches {
        assert_complete(&mut h, &mut log, batch);
    }
    // Recovery: the hole closes, probes get through, and the rail is used again.
    h.set_blackhole(rail_nid(0, 0), rail_nid(1, 0), false);
    h.run_for(Duration::from_secs(60));
    h.drive();
    let before = h.rail_traffic(rail_nid(0, 0), rail_nid(1, 0)).0;
    let batch = start(&mut h, 0, 1, 16, 64, false);
    h.drive();
    assert_complete(&mut h, &mut log, &batch);
    let used = h.rail_traffic(rail_nid(0, 0), rail_nid(1, 0)).0 - before;
    assert!(used >= 7, "rail 0 back in service ({used} frames)");
    assert_eq!(h.node(0).peer_ni_stats(rail_nid(1, 0)).unwrap().health.health_value, 1000);
}

/// Rails on separate subnets: a connection between rail 0's address on one node and rail 1's
/// on the other crosses both rails, so a hole in rail 1 swallows every path but rail 0 to rail
/// 0, while each peer NI stays reachable over one path. Suspicion, selection and probes work
/// per path: traffic settles on the one good path within seconds, nothing is lost or doubled,
/// and every path is used again once the hole closes. (A per-peer-NI watch never suspected the
/// cross paths, whose peer NI kept answering on the good one, and stalled on them.)
#[test]
fn a_black_hole_across_rails_is_left_path_by_path() {
    // Two rails on one net, as in the namespace tests: rail r is 10.0.r.x.
    let nid = |node: u32, rail: u32| tcp_nid(0x0a00_0001 + (rail << 8) + node);
    let config = HarnessConfig {
        node_nids: vec![vec![nid(0, 0), nid(0, 1)], vec![nid(1, 0), nid(1, 1)]],
        link: RAIL,
        ..HarnessConfig::default()
    };
    let mut h = Harness::new(config);
    h.discover_all();
    add_get_source(&mut h, 1);
    let mut log = EventLog::default();
    let mut batches = steady(&mut h, 2, Duration::from_millis(10));
    let start_time = h.now();
    let broken = [(0, 1), (1, 0), (1, 1)];
    for (a, b) in broken {
        h.set_blackhole(nid(0, a), nid(1, b), true);
    }
    batches.extend(steady(&mut h, 101, Duration::from_millis(50)));
    assert!(h.now() > start_time + Duration::from_secs(5));
    let traffic = |h: &Harness, (a, b): (u32, u32)| h.rail_traffic(nid(0, a), nid(1, b)).0;
    let before: Vec<u64> = broken.iter().map(|path| traffic(&h, *path)).collect();
    let good = traffic(&h, (0, 0));
    batches.extend(steady(&mut h, 20, Duration::from_millis(50)));
    for (&path, before) in broken.iter().zip(before) {
        let probes = traffic(&h, path) - before;
        assert!(probes <= 4, "{probes} frames went into the hole on path {path:?} after 5 s");
    }
    assert!(traffic(&h, (0, 0)) - good >= 20 * 32, "the good path carries the load");
    let all: Vec<&Batch> = batches.iter().collect();
    let done = run_until_done(&mut h, &mut log, &all);
    assert!(done < start_time + Duration::from_secs(12), "all done at {done:?}");
    for batch in &batches {
        assert_complete(&mut h, &mut log, batch);
    }
    for (a, b) in broken {
        h.set_blackhole(nid(0, a), nid(1, b), false);
    }
    h.run_for(Duration::from_secs(60));
    h.drive();
    // Probes cleared every path (round robin pairs rail 0 with rail 0 and rail 1 with rail 1
    // here, so the cross paths carry nothing unless selected around a suspect).
    let suspects = h.node(0).with_look(|look| {
        look.node.peers.nis(&look.peer_nis).any(|(_, peer_ni)| peer_ni.watch.any_suspect())
    });
    assert!(!suspects);
    let before = traffic(&h, (1, 1));
    let batch = start(&mut h, 0, 1, 32, 64, false);
    h.drive();
    assert_complete(&mut h, &mut log, &batch);
    assert!(traffic(&h, (1, 1)) >= before + 16, "rail 1 back in service");
}

/// A peer starts with one NI's link not up yet (fatal, advertised DOWN), then the link comes
/// up and the peer pushes it UP: the NI gets its health back and is used.
#[test]
fn a_peer_ni_first_advertised_down_is_used_once_reported_up() {
    let a = vec![tcp_nid(0x0a00_0001), tcp_nid(0x0a00_0101)];
    let b = vec![tcp_nid(0x0a00_0002), tcp_nid(0x0a00_0102)];
    let config = HarnessConfig { node_nids: vec![a, b.clone()], ..HarnessConfig::default() };
    let mut h = Harness::new(config);
    let late = h.node(1).ni_for_nid(b[1]).unwrap();
    h.with_node(1, |node, now| node.set_ni_fatal(now, late, true)).unwrap();
    h.discover_all();
    assert!(h.node(0).peer_ni_stats(b[1]).unwrap().health.health_value < 1000);
    h.with_node(1, |node, now| node.set_ni_fatal(now, late, false)).unwrap();
    h.drive();
    assert_eq!(h.node(0).peer_ni_stats(b[1]).unwrap().health.health_value, 1000);
    let mut log = EventLog::default();
    h.take_transmitted(0);
    let batch = start(&mut h, 0, 1, 8, 16, false);
    h.drive();
    assert_complete(&mut h, &mut log, &batch);
    let to = tally(&h.take_transmitted(0), true);
    assert!(to.iter().any(|(nid, count)| *nid == b[1] && *count > 0), "{to:?}");
}

/// Only the answers are lost: the PUTs arrive, their ACKs do not. The copies sent on the
/// other rail are recognised by the target, which ACKs them again without delivering twice.
#[test]
fn a_one_way_black_hole_is_survived_without_double_delivery() {
    let mut h = harness(2, RAIL);
    let mut log = EventLog::default();
    h.set_blackhole_one_way(rail_nid(1, 0), rail_nid(0, 0), true);
    let batches = steady(&mut h, 20, Duration::from_millis(100));
    let all: Vec<&Batch> = batches.iter().collect();
    run_until_done(&mut h, &mut log, &all);
    for batch in &batches {
        assert_complete(&mut h, &mut log, batch);
    }
    assert!(h.node(1).stats().duplicates_dropped > 0);
    h.set_blackhole_one_way(rail_nid(1, 0), rail_nid(0, 0), false);
    h.drive();
    h.assert_quiescent();
}

/// With `blackhole_timeout` 0 the kernel's behaviour is back: the operations caught in the
/// hole wait for their response trackers (150 s) and fail.
#[test]
fn without_fast_failover_a_black_hole_costs_the_transaction_timeout() {
    let config = HarnessConfig {
        rails: 2,
        link: RAIL,
        tunables: Tunables { blackhole_timeout: Duration::ZERO, ..Tunables::default() },
        ..HarnessConfig::default()
    };
    let mut h = Harness::new(config);
    h.discover_all();
    h.set_blackhole(rail_nid(0, 0), rail_nid(1, 0), true);
    let start_time = h.now();
    let batch = start(&mut h, 0, 1, 8, 1024, false);
    h.run_for(Duration::from_secs(149));
    let events = h.take_events(0);
    // Half went into the hole and are still waiting.
    let acks = events.iter().filter(|event| event.kind == EventKind::Ack).count();
    assert_eq!(acks, 4);
    h.run_for(Duration::from_secs(2));
    let failed: Vec<EventKind> = h.take_events(0).iter().map(|event| event.kind).collect();
    assert_eq!(failed, [EventKind::Unlink; 4]);
    assert!(h.now() >= start_time + Duration::from_secs(150));
    assert_eq!(h.node(0).stats().blackhole_suspicions, 0);
    drop(batch);
}

// ------------------------------------------------------------------ the peer's side changes

#[test]
fn a_remote_ni_going_down_is_pushed_and_avoided() {
    let mut h = harness(2, RAIL);
    let mut log = EventLog::default();
    let sequence = h.node(1).local_ping_info().sequence;
    h.set_link_down(1, rail_nid(1, 1), true);
    h.drive();
    assert!(h.node(1).local_ping_info().sequence > sequence);
    let peer = h.node(0).peer_ni_stats(rail_nid(1, 1)).unwrap();
    assert_eq!(peer.status, LNET_NI_STATUS_DOWN);
    assert!(peer.health.health_value < 1000);
    let before = h.rail_traffic(rail_nid(0, 1), rail_nid(1, 1)).0;
    let batch = start(&mut h, 0, 1, 10, 64, false);
    h.drive();
    assert_complete(&mut h, &mut log, &batch);
    assert_eq!(h.rail_traffic(rail_nid(0, 1), rail_nid(1, 1)).0, before);
    // Back up at full health: everyone is pushed and the NI shows UP.
    h.set_link_down(1, rail_nid(1, 1), false);
    h.drive();
    assert_eq!(h.node(0).peer_ni_stats(rail_nid(1, 1)).unwrap().status, LNET_NI_STATUS_UP);
}

#[test]
fn a_peer_whose_nis_change_pushes_the_change() {
    let mut h = harness(1, RAIL);
    let mut log = EventLog::default();
    let added = rail_nid(1, 3);
    h.add_ni(0, rail_nid(0, 3));
    h.add_ni(1, added);
    h.drive();
    let nids: Vec<Nid> =
        h.node(0).peer_info(h.nid(1)).unwrap().nis.iter().map(|ni| ni.nid).collect();
    assert_eq!(nids, [h.nid(1), added]);
    let batch = start(&mut h, 0, 1, 10, 64, false);
    h.drive();
    assert_complete(&mut h, &mut log, &batch);
    assert!(h.rail_traffic(rail_nid(0, 3), added).0 >= 5);
    // Removed: deleted from the peer (lnet_peer_merge_data) and never selected again.
    h.remove_ni(1, added);
    h.drive();
    let info = h.node(0).peer_info(h.nid(1)).unwrap();
    assert!(info.nis.iter().all(|ni| ni.nid != added));
    let before = h.rail_traffic(rail_nid(0, 3), added).0;
    let batch = start(&mut h, 0, 1, 10, 64, false);
    h.drive();
    assert_complete(&mut h, &mut log, &batch);
    assert_eq!(h.rail_traffic(rail_nid(0, 3), added).0, before);
}

/// The peer removes an NI while GETs to it await their REPLY (its connections, here its
/// link, are gone with it): once the push says so, they are reissued to the peer's other NI
/// instead of waiting out the transaction timeout.
#[test]
fn gets_awaiting_a_removed_peer_ni_are_reissued_elsewhere() {
    let mut h = harness(1, RAIL);
    let mut log = EventLog::default();
    let added = rail_nid(1, 3);
    h.add_ni(0, rail_nid(0, 3));
    h.add_ni(1, added);
    h.drive();
    let batch = start(&mut h, 0, 1, 32, 64, true);
    // Until some GETs went to the added NI and none of their REPLYs came back.
    while h.rail_traffic(rail_nid(0, 3), added).0 == 0 {
        assert!(h.step(), "the added NI was never used");
    }
    h.remove_ni(1, added);
    let removed_at = h.now();
    h.drive();
    assert_complete(&mut h, &mut log, &batch);
    assert!(h.node(0).stats().fast_resends > 0);
    assert!(h.now() < removed_at + h.node(0).tunables().transaction_timeout);
}

#[test]
fn discovery_of_a_non_multi_rail_peer_uses_only_the_nid_given() {
    let config = HarnessConfig { rails: 2, link: RAIL, ..HarnessConfig::default() };
    let mut h = Harness::new(config);
    let mut log = EventLog::default();
    let mut quiet = *h.node(1).tunables();
    quiet.discovery = false;
    h.with_node(1, |node, now| node.set_tunables(now, quiet)).unwrap();
    h.discover_all();
    let info = h.node(0).peer_info(h.nid(1)).unwrap();
    assert!(!info.multi_rail() && info.state.contains(PeerState::NO_DISCOVERY));
    let batch = start(&mut h, 0, 1, 10, 64, false);
    h.drive();
    assert_complete(&mut h, &mut log, &batch);
    assert_eq!(h.rail_traffic(rail_nid(0, 1), rail_nid(1, 1)).0, 0);
}

// ------------------------------------------------------------------ configured peers

#[test]
fn configured_peers_are_added_shown_and_deleted() {
    let mut h = harness(2, RAIL);
    let (p, n1, n2) = (
        tcp_nid(0x0b00_0001),
        tcp_nid(0x0b00_0002),
        Nid::new4(Net::new(crate::addr::LndType::SOCK, 1), 0x0b00_0003),
    );
    let now = h.now();
    let node = h.node_mut(0);
    node.peer_add(now, p, &[n1, n2], true, true).unwrap();
    // Adding again is fine and does not duplicate.
    node.peer_add(now, p, &[n1, p], true, false).unwrap();
    let info = node.peer_info(n2).unwrap();
    assert_eq!(info.primary_nid, p);
    assert_eq!(info.nis.iter().map(|ni| ni.nid).collect::<Vec<_>>(), [p, n1, n2]);
    // lnetctl's test 304: LOCK_PRIMARY | CONFIGURED | MULTI_RAIL.
    assert_eq!(info.state.0, 1_048_585);
    assert_eq!(node.peer_add(now, p, &[], false, false), Err(PeerAddError::MultiRailMismatch(p)));
    assert_eq!(
        node.peer_add(now, n1, &[], true, false),
        Err(PeerAddError::PrimaryMismatch { nid: n1, primary: p })
    );
    assert_eq!(node.peer_add(now, Nid::ANY, &[], true, false), Err(PeerAddError::AnyNid));
    assert_eq!(node.peer_add(now, Nid::LO_0, &[], true, false), Err(PeerAddError::LoopbackNid));
    // lustre: one of the node's own NIDs makes a (configured) self peer.
    let own = rail_nid(0, 0);
    assert_eq!(node.peer_add(now, own, &[], true, false), Ok(()));
    assert_eq!(node.peer_del(now, own, &[], false), Ok(()));
    let many: Vec<Nid> = (0..129).map(|i| tcp_nid(0x0d00_0000 + i)).collect();
    assert_eq!(
        node.peer_add(now, tcp_nid(0x0e00_0001), &many, true, false),
        Err(PeerAddError::TooManyNids(129))
    );
    // A non-multi-rail peer has one NID per net.
    let q = tcp_nid(0x0f00_0001);
    assert_eq!(
        node.peer_add(now, q, &[tcp_nid(0x0f00_0002)], false, false),
        Err(PeerAddError::NotUnique(tcp_nid(0x0f00_0002)))
    );
    // Deleting: a NID, then the locked peer without force keeps its primary, then with force.
    assert_eq!(
        node.peer_del(now, n1, &[], false),
        Err(PeerDelError::NotPrimary { nid: n1, primary: p })
    );
    assert_eq!(
        node.peer_del(now, tcp_nid(0x0a0a_0a0a), &[], false),
        Err(PeerDelError::NoSuchPeer(tcp_nid(0x0a0a_0a0a)))
    );
    node.peer_del(now, p, &[n2], false).unwrap();
    assert_eq!(node.peer_info(p).unwrap().nis.len(), 2);
    assert!(node.peer_info(n2).is_none());
    node.peer_del(now, p, &[], false).unwrap();
    assert_eq!(node.peer_info(p).unwrap().nis.iter().map(|ni| ni.nid).collect::<Vec<_>>(), [p]);
    node.peer_del(now, p, &[], true).unwrap();
    assert!(node.peer_info(p).is_none());
    assert!(node.peer_nis().all(|ni| ni.nid != p && ni.nid != n1));
    h.check();
}

#[test]
fn a_configured_multi_rail_peer_is_used_on_all_its_rails() {
    let config = HarnessConfig { rails: 2, link: RAIL, ..HarnessConfig::default() };
    let mut h = Harness::new(config);
    let mut log = EventLog::default();
    let nids = [rail_nid(1, 0), rail_nid(1, 1)];
    h.with_node(0, |node, now| node.peer_add(now, nids[0], &nids[1..], true, false)).unwrap();
    h.discover_all();
    let info = h.node(0).peer_info(nids[0]).unwrap();
    assert!(info.multi_rail() && info.state.contains(PeerState::CONFIGURED));
    let batch = start(&mut h, 0, 1, 10, 64, false);
    h.drive();
    assert_complete(&mut h, &mut log, &batch);
    for rail in 0..2 {
        assert!(h.rail_traffic(rail_nid(0, rail), rail_nid(1, rail)).0 >= 5);
    }
}

#[test]
fn a_configured_non_multi_rail_peer_stays_non_multi_rail() {
    let config = HarnessConfig { rails: 2, link: RAIL, ..HarnessConfig::default() };
    let mut h = Harness::new(config);
    h.with_node(0, |node, now| node.peer_add(now, rail_nid(1, 0), &[], false, false)).unwrap();
    h.discover_all();
    let info = h.node(0).peer_info(rail_nid(1, 0)).unwrap();
    assert!(!info.multi_rail());
    // Discovery may not add NIDs to a configured peer.
    assert_eq!(info.nis.len(), 1);
}

// ------------------------------------------------------------------ statistics

#[test]
fn round_trips_are_recorded_per_peer_ni_with_percentiles() {
    let link = LinkConfig { latency: Duration::from_micros(100), ..RAIL };
    let mut h = harness(2, link);
    let mut log = EventLog::default();
    // Discovery already timed a ping and a push on rail 0.
    h.node_mut(0).reset_stats();
    let puts = start(&mut h, 0, 1, 20, 64, false);
    let gets = start(&mut h, 0, 1, 20, 64, true);
    h.drive();
    assert_complete(&mut h, &mut log, &puts);
    assert_complete(&mut h, &mut log, &gets);
    let mut samples = (0, 0);
    for rail in 0..2 {
        let stats = h.node(0).peer_ni_stats(rail_nid(1, rail)).unwrap().latency;
        samples.0 += stats.put_ack.samples();
        samples.1 += stats.get_rtt.samples();
        let median = stats.put_ack.percentile(500).unwrap();
        assert!(
            median >= Duration::from_micros(200) && median < Duration::from_micros(300),
            "{median:?}"
        );
        assert!(stats.put_egress.samples() > 0);
    }
    assert_eq!(samples, (20, 20));
    let ni = h.node(0).ni_stats(NiId(1)).unwrap().latency;
    assert!(ni.put_ack.samples() > 0);
    h.node_mut(0).reset_stats();
    assert_eq!(h.node(0).peer_ni_stats(rail_nid(1, 0)).unwrap().latency.put_ack.samples(), 0);
    assert_eq!(h.node(0).stats().send_count, 0);
}

#[test]
fn net_tunables_give_each_peer_ni_its_own_credits() {
    let config = HarnessConfig {
        rails: 2,
        link: RAIL,
        net_tunables: NetTunables { peer_credits: 2, ..NetTunables::SOCKLND },
        ..HarnessConfig::default()
    };
    let mut h = Harness::new(config);
    let mut log = EventLog::default();
    h.discover_all();
    let batch = start(&mut h, 0, 1, 8, 1024, false);
    for rail in 0..2 {
        let credits = h.node(0).peer_ni_stats(rail_nid(1, rail)).unwrap().tx_credits;
        assert_eq!(credits.max, 2);
        assert!(credits.available < 0, "messages queue on every rail");
    }
    h.drive();
    assert_complete(&mut h, &mut log, &batch);
    let _ = Time::ZERO;
}

#[test]
fn every_configuration_error_is_its_own_variant() {
    let config = HarnessConfig {
        rails: 2,
        limits: crate::engine::node::Limits { peer_nis: 8, ..Default::default() },
        ..HarnessConfig::default()
    };
    let mut h = Harness::new(config);
    h.discover_all();
    let now = h.now();
    let (p, n1) = (tcp_nid(0x0b00_0001), tcp_nid(0x0b00_0002));
    let node = h.node_mut(0);
    node.peer_add(now, p, &[n1], true, false).unwrap();
    let q = tcp_nid(0x0c00_0001);
    assert_eq!(
        node.peer_add(now, q, &[n1], true, false),
        Err(PeerAddError::NidConfiguredElsewhere(n1))
    );
    // A primary locked by the upper layer (LNetAddPeer) without configuration.
    let r = tcp_nid(0x0d00_0001);
    node.peer_add(now, r, &[], true, false).unwrap();
    node.set_peer_state(r, PeerState::LOCK_PRIMARY | PeerState::MULTI_RAIL).unwrap();
    assert_eq!(
        node.peer_add(now, r, &[], true, false),
        Err(PeerAddError::PrimaryLocked { nid: r, primary: r })
    );
    let many: Vec<Nid> = (1..=8).map(|i| tcp_nid(0x0e00_0000 + i)).collect();
    assert_eq!(
        node.peer_add(now, tcp_nid(0x0e00_0000), &many, true, false),
        Err(PeerAddError::TooManyPeers)
    );
    assert_eq!(node.peer_del(now, Nid::ANY, &[], false), Err(PeerDelError::AnyNid));
    assert_eq!(
        node.peer_del(now, p, &[tcp_nid(0x0f0f_0f0f)], false),
        Err(PeerDelError::NoSuchNid(tcp_nid(0x0f0f_0f0f)))
    );
    assert_eq!(node.peer_del(now, p, &[r], false), Err(PeerDelError::NotOwned(r)));
    assert_eq!(
        node.set_peer_ni_health(now, Some(p), 1001),
        Err(PeerSetError::HealthOutOfRange(1001))
    );
    assert_eq!(
        node.set_peer_state(tcp_nid(0x0f0f_0f0f), PeerState::default()),
        Err(PeerSetError::NoSuchPeerNi(tcp_nid(0x0f0f_0f0f)))
    );
    let ni = node.ni_for_nid(rail_nid(0, 1)).unwrap();
    node.remove_ni(now, ni).unwrap();
    assert_eq!(node.set_ni_numa_distance(ni, 10), Err(NiSetError::RemovedNi));
    h.check();
}

/// lnetctl's sanity test 304: a locked, configured peer, its CONFIGURED bit cleared by hand,
/// then discovered.
#[test]
fn a_locked_peer_discovered_shows_the_states_lnetctl_expects() {
    let mut h = Harness::new(HarnessConfig::default());
    let primary = h.nid(1);
    h.with_node(0, |node, now| node.peer_add(now, primary, &[], true, true)).unwrap();
    assert_eq!(h.node(0).peer_info(primary).unwrap().state.0, 1_048_585);
    h.with_node(0, |node, _| node.set_peer_state(primary, PeerState(1_048_577))).unwrap();
    h.discover(0, primary, false).unwrap();
    h.drive();
    assert_eq!(h.node(0).peer_info(primary).unwrap().state.0, 1_048_849);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(32))]

    /// Whatever the health values and fatal flags, a fresh PUT leaves from a non-fatal NI of
    /// the best health (when there is one) to a peer NI of the best health.
    #[test]
    fn selection_picks_the_healthiest_usable_path(
        local in proptest::collection::vec(0u32..=10, 3),
        remote in proptest::collection::vec(0u32..=10, 2),
        fatal in proptest::collection::vec(proptest::prelude::any::<bool>(), 3),
    ) {
        let a: Vec<Nid> = (0..3).map(|i| tcp_nid(0x0a00_0001 + (i << 8))).collect();
        let b: Vec<Nid> = (0..2).map(|i| tcp_nid(0x0a00_0002 + (i << 8))).collect();
        let config = HarnessConfig { node_nids: vec![a.clone(), b.clone()], ..HarnessConfig::default() };
        let mut h = Harness::new(config);
        h.discover_all();
        // Fatal flags first: they rebuild the ping buffer, which is pushed to the peer.
        for (index, nid) in a.iter().enumerate() {
            let ni = h.node(0).ni_for_nid(*nid).unwrap();
            h.with_node(0, |node, now| node.set_ni_fatal(now, ni, fatal[index])).unwrap();
        }
        h.drive();
        // Health changes show in place, without traffic (recovery pings wait a second).
        for (index, nid) in a.iter().enumerate() {
            let ni = h.node(0).ni_for_nid(*nid).unwrap();
            h.with_node(0, |node, now| node.set_ni_health(now, Some(ni), local[index] * 100)).unwrap();
        }
        for (index, nid) in b.iter().enumerate() {
            h.with_node(0, |node, now| node.set_peer_ni_health(now, Some(*nid), remote[index] * 100)).unwrap();
        }
        h.settle();
        h.take_transmitted(0);
        h.post(1, PORTAL, 1, MdSpec::new(Memory::new(vec![0; 8])).threshold(Threshold::Count(1)).options(MdOptions::OP_PUT));
        let md = h.bind(0, MdSpec::new(Memory::new(vec![1; 8])));
        let target = h.process(1);
        let request = PutRequest { md, ack: false, target, portal: PORTAL, match_bits: 1, remote_offset: 0, hdr_data: 0, source: None };
        h.put(0, &request).unwrap();
        h.settle();
        let sent: Vec<Header> = h
            .take_transmitted(0)
            .into_iter()
            .filter(|header| matches!(header.body, Body::Put { ptl_index: PORTAL, .. }))
            .collect();
        proptest::prop_assert_eq!(sent.len(), 1);
        let source = a.iter().position(|nid| *nid == sent[0].src_nid).unwrap();
        let destination = b.iter().position(|nid| *nid == sent[0].dest_nid).unwrap();
        let usable: Vec<usize> = (0..3).filter(|i| !fatal[*i]).collect();
        let candidates = if usable.is_empty() { vec![0, 1, 2] } else { usable };
        let best_local = candidates.iter().map(|i| local[*i]).max().unwrap();
        proptest::prop_assert!(candidates.contains(&source) && local[source] == best_local);
        proptest::prop_assert_eq!(remote[destination], *remote.iter().max().unwrap());
    }
}
