//! `drive_arbitrary`: arbitrary bytes as a sequence of API calls, LND inputs, fabric changes
//! and timer advances against a small harness, with every invariant checked after each one.
//!
//! Any input must run to completion; a panic means a real bug (an invariant violation or a
//! livelock), which is what the fuzz target looks for. API errors are expected and ignored.

use std::time::Duration;

use super::{Frame, Harness, HarnessConfig, node_nid};
use crate::addr::{LndType, Net, Nid};
use crate::engine::health::HealthStatus;
use crate::engine::md::{MdHandle, MdOptions, MdSpec, Threshold, UnlinkMode};
use crate::engine::me::{InsertPosition, LNET_PID_ANY, LNET_PID_LUSTRE, MeHandle, ProcessId};
use crate::engine::memory::Memory;
use crate::engine::ni::NiId;
use crate::engine::node::{GetRequest, Limits, PutRequest};
use crate::engine::tunables::{NetTunables, ResponseTracking, Tunables};
use crate::link_model::LinkConfig;
use crate::wire::header::{Body, Header, WireHandle};
use crate::wire::ping::{LNET_PROTO_PING_MATCHBITS, LNET_RESERVED_PORTAL};

/// Most operations interpreted from one input.
const MAX_OPERATIONS: usize = 256;

/// Operation codes with repetition as weights: attach 0, bind 1, put 2, get 3, unlink 4,
/// set lazy 5, clear lazy 6, advance time 7, step 8, link change 9, partition 10, send
/// failure 11, ME unlink 12, forged header 13, ping 14, discover 15, link down or up 16,
/// black hole 17, configured peer 18, health 19, tunables 20.
const OPERATIONS: [u8; 39] = [
    0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 3, 3, 3, 4, 5, 6, 7, 7, 7, 8, 8, 9, 10, 11, 12,
    13, 14, 15, 16, 17, 18, 19, 20,
];

/// Runs `data` as a scenario; panics only on an invariant violation or livelock.
pub fn drive_arbitrary(data: &[u8]) {
    let mut input = Input(data);
    let nodes = 2 + usize::from(input.byte() % 2);
    let seed = input.u64();
    let link =
        LinkConfig { latency: Duration::from_micros(u64::from(input.byte())), ..LinkConfig::IDEAL };
    let config = HarnessConfig {
        nodes,
        seed,
        link,
        tunables: Tunables {
            transaction_timeout: Duration::from_secs(10),
            retry_count: u32::from(input.byte() % 3),
            response_tracking: match input.byte() % 4 {
                0 => ResponseTracking::InternalOnly,
                1 => ResponseTracking::Get,
                2 => ResponseTracking::PutWithAck,
                _ => ResponseTracking::Both,
            },
            health_sensitivity: 100,
            discovery: input.byte() % 4 != 0,
            // Recovery of a peer NI that is gone for good would go on forever (as in Lustre);
            // bounded here so every input reaches quiescence.
            recovery_limit: Duration::from_secs(60),
            ..Tunables::default()
        },
        net_tunables: NetTunables {
            credits: 1 + u32::from(input.byte() % 4),
            peer_credits: 1 + u32::from(input.byte() % 3),
            ..NetTunables::SOCKLND
        },
        // Room for every harness NID, our own (local recovery pings need them) and forged ones;
        // with a full peer table an unhealthy NI could never be pinged back to health.
        limits: Limits {
            messages: 24,
            mds: 16,
            mes: 16,
            peer_nis: 24,
            events: 1024,
            lazy_queue: 3,
        },
        max_steps: 200_000,
        check_invariants: true,
        keep_events: false,
        second_ni: false,
        // From the seed, not the input, so existing corpora keep their meaning.
        partitions: crate::engine::cpt::Partitions::new(1 + (seed % 3) as u32)
            .expect("1..=3 partitions"),
        // With 3 partitions, every other seed binds the NIs to two of them, so a peer NI's
        // owner and its tx partition differ for some peers.
        ni_cpts: if seed % 6 == 5 {
            crate::engine::cpt::CptList::new(&[2, 0]).expect("two partitions")
        } else {
            crate::engine::cpt::CptList::ALL
        },
        node_nids: Vec::new(),
        rails: 1 + usize::from(input.byte() % 3),
    };
    let mut fuzz = Fuzz {
        harness: Harness::new(config),
        bound: Vec::new(),
        attached: Vec::new(),
        mes: Vec::new(),
    };
    for _ in 0..MAX_OPERATIONS {
        if input.is_empty() {
            break;
        }
        fuzz.operation(&mut input);
        fuzz.harness.settle();
    }
    // Heal the fabric first: over a link that stays lossy, health recovery (like Lustre's)
    // never ends, and the run would not reach quiescence.
    fuzz.harness.heal(link);
    fuzz.harness.drive();
    fuzz.harness.assert_quiescent();
}

struct Fuzz {
    harness: Harness,
    bound: Vec<(usize, MdHandle)>,
    attached: Vec<(usize, MdHandle)>,
    mes: Vec<(usize, MeHandle)>,
}

impl Fuzz {
    fn operation(&mut self, input: &mut Input<'_>) {
        let nodes = self.harness.node_count();
        let node = usize::from(input.byte()) % nodes;
        // Weighted so random bytes mostly make working traffic (index into OPERATIONS).
        let operation = OPERATIONS[usize::from(input.byte()) % OPERATIONS.len()];
        match operation {
            0 => self.attach(input, node),
            1 => {
                let spec = md_spec(input, false);
                if let Ok(md) = self.harness.md_bind(node, spec, unlink_mode(input)) {
                    self.bound.push((node, md));
                }
            }
            2 => {
                let request = PutRequest {
                    md: self.pick_md(input, node),
                    ack: input.byte() % 2 == 0,
                    target: self.target(input),
                    portal: portal(input),
                    match_bits: u64::from(input.byte() % 4 / 3),
                    remote_offset: u32::from(input.byte() % 16),
                    hdr_data: input.u64(),
                    source: None,
                };
                let _ = self.harness.put(node, &request);
            }
            3 => {
                let request = GetRequest {
                    md: self.pick_md(input, node),
                    target: self.target(input),
                    portal: portal(input),
                    match_bits: u64::from(input.byte() % 4 / 3),
                    remote_offset: u32::from(input.byte() % 16),
                    source: None,
                };
                let _ = self.harness.get(node, &request);
            }
            4 => {
                let md = self.pick_md(input, node);
                let _ = self.harness.md_unlink(node, md);
            }
            5 => {
                let _ = self.harness.set_lazy_portal(node, portal(input));
            }
            6 => {
                let _ = self.harness.clear_lazy_portal(node, portal(input));
            }
            7 => {
                let span = match input.byte() % 8 {
                    0 => Duration::from_secs(20),
                    _ => Duration::from_micros(u64::from(input.byte()) * 10),
                };
                self.harness.run_for(span);
            }
            8 => {
                for _ in 0..input.byte() % 8 {
                    self.harness.step();
                }
            }
            9 => {
                let other = usize::from(input.byte()) % nodes;
                let link = LinkConfig {
                    latency: Duration::from_micros(u64::from(input.byte())),
                    bandwidth_bytes_per_sec: (input.byte() % 2 == 0).then_some(1_000_000),
                    loss_per_million: u32::from(input.byte() % 4 / 3) * 300_000,
                    duplicate_per_million: u32::from(input.byte() % 4 / 3) * 300_000,
                };
                self.harness.fabric.model.set_link(node, other, link);
            }
            10 => {
                let other = usize::from(input.byte()) % nodes;
                let cut = input.byte() % 2 == 0;
                self.harness.fabric.model.set_partitioned(node, other, cut);
            }
            11 => {
                let status = HealthStatus::ALL[usize::from(input.byte()) % HealthStatus::ALL.len()];
                self.harness.fail_next_send(node, status);
            }
            12 => {
                if let Some((owner, me)) = pick(&self.mes, input) {
                    let _ = self.harness.node_mut(owner).me_unlink(me);
                }
            }
            14 => {
                let target = self.target(input);
                let timeout = Duration::from_millis(u64::from(input.byte()) * 50);
                let _ = self.harness.ping(node, target, timeout, None);
            }
            15 => {
                let target = self.target(input);
                let force = input.byte() % 2 == 0;
                let _ = self.harness.discover(node, target.nid, force);
            }
            16 => {
                if let Some(nid) = self.rail(input, node) {
                    self.harness.set_link_down(node, nid, input.byte() % 2 == 0);
                }
            }
            17 => {
                let other = usize::from(input.byte()) % nodes;
                if let (Some(a), Some(b)) = (self.rail(input, node), self.rail(input, other)) {
                    let on = input.byte() % 2 == 0;
                    if input.byte() % 2 == 0 {
                        self.harness.set_blackhole(a, b, on);
                    } else {
                        self.harness.set_blackhole_one_way(a, b, on);
                    }
                }
            }
            18 => self.configure_peer(input, node),
            19 => {
                let value = [0, 100, 500, 1000, 1001][usize::from(input.byte()) % 5];
                if input.byte() % 2 == 0 {
                    let ni = NiId(u16::from(input.byte() % 4));
                    let all = input.byte() % 4 == 0;
                    let _ = self.harness.with_node(node, |node, now| {
                        node.set_ni_health(now, (!all).then_some(ni), value)
                    });
                } else {
                    let nid = self.target(input).nid;
                    let all = input.byte() % 4 == 0;
                    let _ = self.harness.with_node(node, |node, now| {
                        node.set_peer_ni_health(now, (!all).then_some(nid), value)
                    });
                }
            }
            20 => {
                let mut tunables = *self.harness.node(node).tunables();
                match input.byte() % 3 {
                    0 => {
                        tunables.blackhole_timeout =
                            Duration::from_millis(u64::from(input.byte()) * 20)
                    }
                    1 => tunables.discovery = !tunables.discovery,
                    _ => tunables.numa_range = u32::from(input.byte()),
                }
                let _ = self.harness.with_node(node, |node, now| node.set_tunables(now, tunables));
            }
            _ => self.inject(input, node),
        }
    }

    /// One of `node`'s rails.
    fn rail(&self, input: &mut Input<'_>, node: usize) -> Option<Nid> {
        let nids = self.harness.nids(node);
        nids.get(usize::from(input.byte()) % nids.len().max(1)).copied()
    }

    /// `peer add` or `peer del` with NIDs of the harness, forged ones, or our own.
    fn configure_peer(&mut self, input: &mut Input<'_>, node: usize) {
        let nodes = self.harness.node_count();
        let pick = |input: &mut Input<'_>| -> Nid {
            let owner = usize::from(input.byte()) % (nodes + 1);
            match self.harness.nids(owner.min(nodes - 1)).get(usize::from(input.byte()) % 3) {
                Some(nid) if owner < nodes => *nid,
                _ => node_nid(owner + 4),
            }
        };
        let primary = pick(input);
        let nids: Vec<Nid> = (0..input.byte() % 3).map(|_| pick(input)).collect();
        let flags = input.byte();
        let _ = self.harness.with_node(node, |node, now| {
            if flags % 3 == 0 {
                node.peer_del(now, primary, &nids, flags & 4 != 0).map_err(|_| ())
            } else {
                node.peer_add(now, primary, &nids, flags & 8 != 0, flags & 16 != 0).map_err(|_| ())
            }
        });
    }

    fn attach(&mut self, input: &mut Input<'_>, node: usize) {
        let match_id = match input.byte() % 8 {
            0 => self.harness.process(usize::from(input.byte()) % self.harness.node_count()),
            1 => ProcessId::new(Nid::ANY, LNET_PID_LUSTRE),
            _ => ProcessId::ANY,
        };
        // Bytes 0 to 2 (mod 4) decode as before `Local` was added (even `Before`, odd
        // `After`), so most of the corpus keeps its meaning.
        let position = match input.byte() % 4 {
            0 | 2 => InsertPosition::Before,
            1 => InsertPosition::After,
            // Partition 1 on a one-partition node: refused (BadCpt).
            _ => InsertPosition::Local { cpt: u32::from(input.byte() % 2) },
        };
        let ignore_bits = if input.byte() % 4 == 0 { 0x1 } else { 0 };
        let portal = portal(input);
        // No `Local` ME on LNet's own portal: it would enable that partition's table there,
        // and a ping GET matched in it misses the ping target and is dropped, as in the
        // kernel. That loss outlives `heal`, so peers recovering this node would ping it
        // forever, as Lustre's do (portal_stories.rs shows the drop). `Before`/`After` go to
        // the targets' own table there.
        // lustre: lnet/lnet/lib-ptl.c lnet_mt_of_match(), lnet_mt_match_md()
        let position = match position {
            InsertPosition::Local { .. } if portal == LNET_RESERVED_PORTAL => InsertPosition::After,
            position => position,
        };
        let Ok(me) = self.harness.me_attach(
            node,
            portal,
            match_id,
            u64::from(input.byte() % 4 / 3),
            ignore_bits,
            unlink_mode(input),
            position,
        ) else {
            return;
        };
        self.mes.push((node, me));
        if input.byte() % 8 == 0 {
            return;
        }
        let spec = md_spec(input, true);
        if let Ok(md) = self.harness.md_attach(node, me, spec, unlink_mode(input)) {
            self.attached.push((node, md));
        }
    }

    /// Mostly one of `node`'s bound MDs; sometimes anything, including other nodes' handles.
    fn pick_md(&self, input: &mut Input<'_>, node: usize) -> MdHandle {
        let choice = input.byte();
        let own: Vec<MdHandle> =
            self.bound.iter().filter(|(owner, _)| *owner == node).map(|(_, md)| *md).collect();
        let any = match choice % 8 {
            0 => pick(&self.attached, input),
            1 => pick(&self.bound, input),
            _ => pick(&own, input).map(|md| (node, md)),
        };
        any.map_or(MdHandle(u64::from(input.byte())), |(_, md)| md)
    }

    fn target(&self, input: &mut Input<'_>) -> ProcessId {
        match input.byte() % 16 {
            0 => ProcessId::new(Nid::LO_0, LNET_PID_LUSTRE),
            1 => ProcessId::new(node_nid(7), LNET_PID_LUSTRE),
            2 => ProcessId::new(Nid::new4(Net::new(LndType::O2IB, 0), 1), LNET_PID_LUSTRE),
            _ => self.harness.process(usize::from(input.byte()) % self.harness.node_count()),
        }
    }

    /// A header from nowhere: forged, stale, malformed or misaddressed.
    fn inject(&mut self, input: &mut Input<'_>, node: usize) {
        let dest_nid = match input.byte() % 4 {
            0 => Nid::new4(Net::TCP, 0x0a00_00ff),
            1 => Nid::new4(Net::new(LndType::O2IB, 0), 5),
            _ => node_nid(node),
        };
        let from = node_nid(usize::from(input.byte()) % (self.harness.node_count() + 1));
        let handle = match input.byte() % 3 {
            0 => WireHandle::NONE,
            1 => WireHandle {
                interface_cookie: 0x1000 + node as u64,
                object_cookie: self.pick_md(input, node).0,
            },
            _ => WireHandle { interface_cookie: input.u64(), object_cookie: input.u64() },
        };
        // Sometimes a real ping buffer (a forged push or REPLY), maybe with other features.
        let buffer = (input.byte() % 4 == 0).then(|| {
            let owner = usize::from(input.byte()) % self.harness.node_count();
            let mut bytes = self.harness.node(owner).local_ping_buffer().to_vec();
            if input.byte() % 2 == 0 {
                if let Some(features) = bytes.get_mut(4) {
                    *features = input.byte();
                }
            }
            bytes
        });
        let payload_length = match (&buffer, input.byte() % 8) {
            (Some(bytes), _) => bytes.len() as u32,
            (None, 0) => input.u32(),
            (None, 1) => 1 << 20,
            (None, _) => u32::from(input.byte() % 32),
        };
        let push = buffer.is_some();
        let body = match input.byte() % 5 {
            0 => Body::Ack {
                dst_wmd: handle,
                match_bits: u64::from(input.byte() % 4 / 3),
                mlength: u32::from(input.byte()),
            },
            1 if push => Body::Put {
                ack_wmd: handle,
                match_bits: LNET_PROTO_PING_MATCHBITS,
                hdr_data: 0,
                ptl_index: LNET_RESERVED_PORTAL,
                offset: 0,
            },
            1 => Body::Put {
                ack_wmd: handle,
                match_bits: u64::from(input.byte() % 4 / 3),
                hdr_data: 0,
                ptl_index: portal(input),
                offset: u32::from(input.byte()),
            },
            2 => Body::Get {
                return_wmd: handle,
                match_bits: u64::from(input.byte() % 4 / 3),
                ptl_index: portal(input),
                src_offset: 0,
                sink_length: u32::from(input.byte()),
            },
            3 => Body::Reply { dst_wmd: handle },
            _ => Body::Hello { incarnation: 0, conn_type: 0 },
        };
        let header = Header {
            dest_nid,
            src_nid: from,
            dest_pid: LNET_PID_LUSTRE,
            src_pid: if input.byte() % 2 == 0 { LNET_PID_LUSTRE } else { LNET_PID_ANY },
            payload_length,
            body,
        };
        let payload = buffer.unwrap_or_else(|| vec![0xa5; (payload_length as usize).min(64)]);
        self.harness.deliver(from, node, Frame { header, payload });
        self.harness.settle();
    }
}

fn md_spec(input: &mut Input<'_>, passive: bool) -> MdSpec {
    let longest = if passive { 24 } else { 8 };
    let segments =
        (0..1 + input.byte() % 3).map(|_| vec![0u8; usize::from(input.byte() % longest)]).collect();
    let mut memory = Memory::from_segments(segments).unwrap_or_default();
    let flags = input.byte();
    let rare = input.byte();
    if rare % 16 == 4 && memory.segments().len() == 1 {
        // Shared memory: read in place, made its own by a write.
        let buffer = memory.into_segments().next().unwrap_or_default();
        memory = Memory::shared(std::sync::Arc::new(buffer));
    }
    let mut options = MdOptions::NONE;
    for (bit, option) in [
        (0x01, MdOptions::TRUNCATE),
        (0x02, MdOptions::MANAGE_REMOTE),
        (0x04, MdOptions::ACK_DISABLE),
        (0x08, MdOptions::TRACK_RESPONSE),
        (0x10, MdOptions::NO_TRACK_RESPONSE),
    ] {
        if flags & bit != 0 && (bit == 0x01 || rare % 8 == 0) {
            options = options | option;
        }
    }
    if passive {
        options = options
            | [MdOptions::OP_PUT, MdOptions::OP_GET, MdOptions::OP_PUT | MdOptions::OP_GET]
                [usize::from(flags >> 5) % 3];
    } else if rare % 16 == 1 {
        options = options | MdOptions::OP_PUT;
    }
    let threshold = match input.byte() % 8 {
        0 => Threshold::Infinite,
        1 => Threshold::Count(0),
        count => Threshold::Count(u32::from(count / 2)),
    };
    let mut spec =
        MdSpec::new(memory).threshold(threshold).options(options).user_ptr(u64::from(flags));
    if rare % 16 == 2 {
        spec = spec.max_size(u32::from(input.byte() % 8));
    }
    if rare % 16 == 3 {
        spec = spec.without_events();
    }
    spec
}

fn unlink_mode(input: &mut Input<'_>) -> UnlinkMode {
    if input.byte() % 2 == 0 { UnlinkMode::Unlink } else { UnlinkMode::Retain }
}

fn portal(input: &mut Input<'_>) -> u32 {
    match input.byte() % 16 {
        0 => 64,
        1 => 0,
        2 => 2,
        _ => 1,
    }
}

fn pick<T: Copy>(items: &[T], input: &mut Input<'_>) -> Option<T> {
    if items.is_empty() {
        return None;
    }
    items.get(usize::from(input.byte()) % items.len()).copied()
}

/// A cursor over fuzz bytes that yields zeros once exhausted.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((first, rest)) => {
                self.0 = rest;
                *first
            }
            None => 0,
        }
    }

    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.byte(), self.byte(), self.byte(), self.byte()])
    }

    fn u64(&mut self) -> u64 {
        u64::from(self.u32()) | (u64::from(self.u32()) << 32)
    }
}

#[cfg(test)]
mod regressions {
    /// libFuzzer input: a forced discovery overtook one still pinging, leaving two live
    /// discovery-ping MDs for one peer (the internal-MD bound caught it). Fixed by abandoning
    /// the outstanding ping (and push) before sending the next.
    #[test]
    fn one_discovery_ping_per_peer() {
        super::drive_arbitrary(include_bytes!("regressions/two-discovery-pings.bin"));
    }

    /// libFuzzer input: a peer NI's recovery ping failed at SEND (its MD still alive), then
    /// the NI healed; leaving recovery dropped the MD key without unlinking it (the
    /// internal-MD bound caught the orphan). Fixed by unlinking whatever MD recovery holds.
    #[test]
    fn recovery_md_unlinked_when_healed() {
        super::drive_arbitrary(include_bytes!("regressions/mr-internal-md-bound.bin"));
    }

    /// libFuzzer input: peer NIs deleted while messages still referred to them were only
    /// reclaimed on admin paths, so the table filled with deleted slots and a local NI's
    /// recovery ping to itself failed with NoMemory forever (a livelock). Fixed by reclaiming
    /// when a new peer NI would not fit, and by deleting NIDs a peer stops listing.
    #[test]
    fn deleted_peer_nis_reclaimed_when_the_table_is_full() {
        super::drive_arbitrary(include_bytes!("regressions/deleted-peer-nis-fill-table.bin"));
    }

    /// libFuzzer input: an MD's tracker re-armed at the same instant pushed identical queue
    /// entries, which compaction kept as live, so the queue outgrew its bound. Fixed by not
    /// pushing an entry the queue already holds and by dropping repeats when compacting.
    #[test]
    fn tracker_queue_holds_no_repeats() {
        super::drive_arbitrary(include_bytes!("regressions/repeated-tracker-entries.bin"));
    }

    /// libFuzzer input: a fast-failover copy of a PUT (payload held privately, no MD) was
    /// resent to a peer NI whose NID is one of our own (a configured peer listing it), so it
    /// took the loopback LND, which only copied from MDs. Fixed by copying from the private
    /// payload there too.
    #[test]
    fn a_failover_copy_can_go_through_loopback() {
        super::drive_arbitrary(include_bytes!("regressions/resend-to-own-nid.bin"));
    }
}
