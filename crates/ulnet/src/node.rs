//! [`Node`]: one LNet node, its I/O threads, and the public API (LNet's `LNetMEAttach`,
//! `LNetMDAttach`, `LNetMDBind`, `LNetMDUnlink`, `LNetPut`, `LNetGet`, lazy portals, statistics).

use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock};
use std::thread::{self, JoinHandle};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ulnet_proto::addr::{Nid, ProcessId};
use ulnet_proto::engine::PingCompletion;
use ulnet_proto::engine::{
    EngineConfig, GlobalStats, LNET_PID_LUSTRE, Limits, LndKind, MatchTableStats, MdHandle, MdSpec,
    Memory, NiConfig, NiId, NiStats, PeerInfo, PeerNiStats, PingReply, Tunables,
};
use ulnet_proto::socklnd::tunables::SocklndTunables;
use ulnet_proto::time::Time;

use crate::clock;
use crate::driver::{self, CompletionKey, Core, Counters, Doorbell, OutputHold, Shared, Wakes};
use crate::error::{BuildError, DiscoverError, MdError, PingError, ShutDown};
use crate::event_queue::{EqShared, EventHandler, EventQueue};
use crate::lnd::Lnd;
use crate::lnd::mem::{MemFabric, MemLnd};
use crate::lnd::tcp::{Listeners, Placement, TcpLnd, TcpStats};

/// Default time a waiting thread spins before it parks (see [`NodeBuilder::spin`]): none.
/// Measured on a 2-vCPU VM (`cargo bench -p ulnet --bench api`), a 0-byte PUT+ACK between two
/// nodes of one process (three threads) took 7.4 us without spinning, 16 us with 2 us spins and
/// 77 us with 20 us spins: a spinner holds the CPU the next hop needs. Spinning pays only with a
/// spare CPU per spinning thread (e.g. pinned, one node per core); enable it there.
pub const DEFAULT_SPIN: Duration = Duration::ZERO;

/// How long a ping caller polls for its reply, yielding the CPU between looks, before it
/// sleeps. A reply on loopback or a LAN takes about a round trip (10-15 us here); catching it
/// awake saves the futex wake-up of a sleeping caller, often on the other vCPU. Unlike a spin,
/// a yield gives the CPU to any thread that needs it (the I/O thread that will deliver the
/// reply, if it shares this CPU). Measured with `tcp_perf --ping` on 2 vCPUs, unpinned and
/// alternated: 12.4-13.7 us per ping without, 11.3-11.6 us with. Pings are rare, so the CPU
/// spent is bounded and small.
pub const PING_REPLY_POLL: Duration = Duration::from_micros(20);

/// Longest spin [`NodeBuilder::spin`] accepts; longer requests are clamped.
pub const MAX_SPIN: Duration = Duration::from_millis(1);

/// One LNet node: the core, its NIs and LNDs, and an I/O thread per CPU partition.
///
/// A `Node` is a cheap handle (`Clone`, `Send`, `Sync`); every clone drives the same node. API
/// calls run on the caller's thread: they lock the core, make the call, hand whatever it
/// produced to the LNDs and event queues, and return. Each CPU partition's I/O thread runs a
/// tokio current-thread runtime for the LNDs' socket I/O (partition 0's also for the timers),
/// and is woken only when an LND needs it (the crate documentation has the whole threading
/// model).
///
/// The node shuts down on [`shutdown`](Self::shutdown) or when the last handle is dropped:
/// every message in flight is finalized with an error, every MD with an event queue is
/// unlinked (its final event hands the memory back), the event queues close, and the I/O
/// threads are joined.
///
/// # Example
///
/// A PUT with ACK to ourselves over `0@lo`, with the primitives:
///
/// ```
/// use std::time::Duration;
/// use ulnet::*;
///
/// let node = Node::loopback().unwrap();
/// let events = node.event_queue(16);
/// // The target: an ME on portal 4 matching bits 0x11, with a 5-byte MD for one PUT.
/// let me = node
///     .me_attach(4, ProcessId::ANY, 0x11, 0, UnlinkMode::Unlink, InsertPosition::After)
///     .unwrap();
/// let sink = MdSpec::new(Memory::new(vec![0; 5]))
///     .options(MdOptions::OP_PUT)
///     .threshold(Threshold::Count(1));
/// node.md_attach(me, sink, UnlinkMode::Unlink, Some(&events)).unwrap();
/// // The source: a bound MD for the SEND and the ACK.
/// let source = MdSpec::new(Memory::new(b"hello".to_vec())).threshold(Threshold::Count(2));
/// let md = node.md_bind(source, UnlinkMode::Unlink, Some(&events)).unwrap();
/// node.put(&PutRequest {
///     md,
///     ack: true,
///     target: ProcessId::new(Nid::LO_0, LNET_PID_LUSTRE),
///     portal: 4,
///     match_bits: 0x11,
///     remote_offset: 0,
///     hdr_data: 0,
///     source: None,
/// })
/// .unwrap();
/// let kinds: Vec<EventKind> = (0..3)
///     .map(|_| events.recv_timeout(Duration::from_secs(10)).unwrap().kind)
///     .collect();
/// assert_eq!(kinds, [EventKind::Put, EventKind::Send, EventKind::Ack]);
/// ```
#[derive(Clone)]
pub struct Node {
    inner: Arc<Inner>,
}

/// How to build a [`Node`]: its NIs, pid, tunables and runtime options.
///
/// ```
/// use ulnet::{LinkConfig, MemFabric, Node};
///
/// let fabric = MemFabric::new(LinkConfig::IDEAL);
/// let node = Node::builder()
///     .mem_ni("10.0.0.1@tcp".parse().unwrap(), &fabric)
///     .build()
///     .unwrap();
/// assert_eq!(node.nids().len(), 2); // 0@lo and 10.0.0.1@tcp
/// ```
#[derive(Debug)]
pub struct NodeBuilder {
    pid: u32,
    interface_cookie: Option<u64>,
    tunables: Tunables,
    limits: Limits,
    partitions: ulnet_proto::engine::cpt::Partitions,
    nis: Vec<(NiConfig, LndSpec)>,
    io_cpu: Option<usize>,
    /// Each partition's CPUs, by CPT, for pinning its I/O thread; empty: unpinned.
    partition_cpus: Vec<Vec<usize>>,
    /// Each partition's NUMA nodes, by CPT, for NUMA distances; empty: not known.
    partition_nodes: Vec<Vec<u32>>,
    spin: Duration,
    privileged_ports: bool,
}

/// Which LND serves a configured NI.
#[derive(Debug)]
enum LndSpec {
    Mem(MemFabric),
    Tcp(Box<SocklndTunables>),
}

/// A snapshot of a node's statistics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeStats {
    /// `lnetctl stats show`.
    pub global: GlobalStats,
    /// `lnetctl net show -v`, loopback first.
    pub nis: Vec<NiStats>,
    /// `lnetctl peer show -v`, per peer NI.
    pub peer_nis: Vec<PeerNiStats>,
    /// Messages alive in the core (sends, receives, PUTs delayed on lazy portals).
    pub messages: usize,
    pub mds: usize,
    pub mes: usize,
    pub runtime: RuntimeStats,
    /// The TCP connection tasks running now, by the CPU partition whose I/O thread runs
    /// them (index = CPT), as [`Node::connections_by_partition`] gives them.
    pub connections_by_partition: Vec<u64>,
}

/// The runtime's own counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RuntimeStats {
    /// Times the I/O thread had to be woken from a park.
    pub io_wakeups: u64,
    /// Events for an MD whose event queue no longer exists (dropped).
    pub events_unrouted: u64,
    /// Transmits failed inside the runtime (the node was shutting down).
    pub transmits_failed_locally: u64,
    /// Transmits held by an LND now.
    pub transmits_in_flight: usize,
    /// Write system calls on LND sockets: against the messages sent, how well output is
    /// batched.
    pub socket_writes: u64,
    /// Those of `socket_writes` made without the core lock held: small frames copied into a
    /// connection's outbox and written after the unlock (decision 0029).
    pub socket_writes_unlocked: u64,
    /// Read system calls on LND sockets' established connections.
    pub socket_reads: u64,
    /// Those of `socket_reads` a connection's task made before taking the core lock: the
    /// share of reads that no longer hold up other threads (decision 0029).
    pub socket_reads_unlocked: u64,
    /// Times a thread (an API caller, an I/O thread) found the node's core lock held and had
    /// to wait for it exclusively: how much the partitions' I/O threads and the callers contend
    /// for the node-wide lock (decision 0029).
    pub core_lock_waits: u64,
    /// Nanoseconds the node's core lock was held, and the times it was taken, estimated from
    /// one acquisition in 16 on each thread: against the CPU the node spends, the share of
    /// its work that one lock serialises, whatever the number of partitions (decision 0029).
    pub core_lock_held_ns: u64,
    pub core_lock_holds: u64,
    /// Times the core was taken shared, by a node of several partitions whose message path
    /// calls the engine on the partitions a call's plan names (decision 0029), and of those,
    /// times something the engine declined there (a call that needs the whole node) made the
    /// thread take the core exclusively.
    pub core_shared_holds: u64,
    pub core_shared_declined: u64,
}

impl Node {
    pub fn builder() -> NodeBuilder {
        NodeBuilder::new()
    }

    /// A node with only `0@lo`: everything completes on the caller's thread.
    pub fn loopback() -> Result<Node, BuildError> {
        NodeBuilder::new().build()
    }

    /// The node's NIDs now, `0@lo` first (NIs come and go with
    /// [`add_tcp_ni`](Self::add_tcp_ni) and [`remove_ni`](Self::remove_ni)).
    pub fn nids(&self) -> Vec<Nid> {
        self.locked(|core, _| {
            core.engine.ni_ids().filter_map(|ni| core.engine.ni_nid(ni)).collect()
        })
    }

    pub fn pid(&self) -> u32 {
        self.inner.pid
    }

    /// The process id peers know this node by: its first network NID (or `0@lo`) and pid.
    pub fn process_id(&self) -> ProcessId {
        let nids = self.nids();
        let nid = nids.get(1).or(nids.first()).copied();
        ProcessId::new(nid.unwrap_or(Nid::LO_0), self.inner.pid)
    }

    /// The interface cookie in this node's wire handles (its start time in ns, as Lustre does).
    pub fn interface_cookie(&self) -> u64 {
        self.inner.interface_cookie
    }

    /// A new event queue of `capacity` events (clamped to
    /// [`MAX_EVENT_QUEUE_CAPACITY`](crate::MAX_EVENT_QUEUE_CAPACITY)), for this node's MDs.
    pub fn event_queue(&self, capacity: usize) -> EventQueue {
        self.new_event_queue(capacity, None)
    }

    /// [`event_queue`](Self::event_queue) with a handler that the node calls on the thread
    /// that produced the queue's events (an I/O thread, or a caller whose operation completed),
    /// once the node's lock is released: Lustre's `md.handler`, which lets a service answer a
    /// request without first waking a thread of its own. The handler takes what it wants from
    /// the queue; what it leaves wakes the queue's other consumers as usual. It must not block,
    /// and it may call the node; events its own calls produce are left for it to take before
    /// it returns, not handled re-entrantly.
    pub fn event_queue_with_handler(
        &self,
        capacity: usize,
        handler: impl Fn(&EventQueue) + Send + Sync + 'static,
    ) -> EventQueue {
        self.new_event_queue(capacity, Some(Box::new(handler)))
    }

    fn new_event_queue(&self, capacity: usize, handler: Option<EventHandler>) -> EventQueue {
        let shared = &self.inner.shared;
        let queue = EqShared::new(shared, capacity, handler);
        {
            let mut queues = shared.queues.lock().unwrap_or_else(PoisonError::into_inner);
            queues.retain(|queue| queue.strong_count() > 0);
            queues.push(Arc::downgrade(&queue));
        }
        if shared.lock().finished {
            queue.close();
        }
        EventQueue { shared: queue }
    }

    /// Runs `read` on a live MD's memory (e.g. to look at PUT data the MD keeps). The core is
    /// locked meanwhile: keep it short.
    pub fn with_md_memory<R>(
        &self,
        md: MdHandle,
        read: impl FnOnce(&Memory) -> R,
    ) -> Result<R, MdError> {
        self.call(|core, _| core.engine.md_memory(md).map(read))
            .map_err(|ShutDown| MdError::ShutDown)?
            .map_err(MdError::Core)
    }

    /// Runs `write` on a live MD's memory (e.g. to refill a send buffer between PUTs). Writing
    /// while a PUT from it is in flight changes what the peer receives.
    pub fn with_md_memory_mut<R>(
        &self,
        md: MdHandle,
        write: impl FnOnce(&mut Memory) -> R,
    ) -> Result<R, MdError> {
        self.call(|core, _| core.engine.md_memory_mut(md).map(write))
            .map_err(|ShutDown| MdError::ShutDown)?
            .map_err(MdError::Core)
    }

    /// The global tunables in force.
    pub fn tunables(&self) -> Tunables {
        self.locked(|core, _| *core.engine.tunables())
    }

    /// The node's CPU partitions, fixed when it was built.
    pub fn partitions(&self) -> ulnet_proto::engine::cpt::Partitions {
        self.locked(|core, _| core.engine.partitions())
    }

    /// The partition `nid` maps to with no NI given (the kernel's `lnet_nid2cpt(nid, NULL)`):
    /// through its net's partitions when the net is local and bound to some only, else over
    /// all of them. Takes the core's lock shared.
    pub fn cpt_of_nid(&self, nid: &Nid) -> u32 {
        self.inner.shared.read().engine.cpt_of_nid_without_ni(nid)
    }

    /// The calling thread's CPU partition on this node, what the kernel's `lnet_cpt_current()`
    /// answers, for [`InsertPosition::Local`](crate::InsertPosition::Local): an I/O thread's
    /// own partition; off the I/O threads, the partition whose CPUs include the one the thread
    /// runs on now (when the node was given its partitions' CPUs), else partition 0.
    pub fn current_partition(&self) -> u32 {
        if let Some(cpt) = driver::partitions::current_on(self.inner.shared.id) {
            return cpt;
        }
        let cpu = rustix::thread::sched_getcpu();
        let found = self.inner.partition_cpus.iter().position(|cpus| cpus.contains(&cpu));
        found.and_then(|cpt| u32::try_from(cpt).ok()).unwrap_or(0)
    }

    /// The CPU partition a live MD was made on, as its cookie says (the kernel's
    /// `lnet_cpt_of_cookie()`): see [`md_bind`](Self::md_bind).
    pub fn md_partition(&self, md: MdHandle) -> Result<u32, MdError> {
        self.locked(|core, _| core.engine.md_partition(md)).map_err(MdError::Core)
    }

    /// The match tables of `portal`, by partition: their MEs, the messages matched there and
    /// how many of those were stolen from another partition's first choice. `None` for a
    /// portal out of range.
    pub fn portal_tables(&self, portal: u32) -> Option<Vec<MatchTableStats>> {
        self.locked(|core, _| core.engine.portal_tables(portal))
    }

    /// `lnetctl ping`: GETs `target`'s ping buffer, from `source` or any NI, and blocks until it
    /// answers or `timeout` passes. Never triggers discovery.
    pub fn ping(
        &self,
        target: ProcessId,
        timeout: Duration,
        source: Option<Nid>,
    ) -> Result<PingReply, PingError> {
        let (sender, receiver) = mpsc::sync_channel(1);
        self.call(|core, now| {
            let id = core.engine.ping(now, target, timeout, source)?;
            core.completions.insert(CompletionKey::Ping(id.0), sender);
            Ok::<_, PingError>(())
        })
        .map_err(|ShutDown| PingError::ShutDown)??;
        driver::before_wait(&self.inner.shared);
        // The core always completes a ping by its timeout; a closed channel means shutdown.
        match wait_briefly_then_block(&receiver) {
            Ok(PingCompletion::Ping(result)) => result.outcome.map_err(PingError::Failed),
            Ok(_) | Err(_) => Err(PingError::ShutDown),
        }
    }

    /// `lnetctl discover`: (re)discovers the peer owning `nid` — pinged always, pushed to when
    /// `force` or the protocol asks — and blocks until discovery ends, bounded by the core's
    /// transaction timeout.
    pub fn discover(&self, nid: Nid, force: bool) -> Result<PeerInfo, DiscoverError> {
        let (sender, receiver) = mpsc::sync_channel(1);
        self.call(|core, now| {
            let id = core.engine.discover(now, nid, force)?;
            core.completions.insert(CompletionKey::Discovery(id.0), sender);
            Ok::<_, DiscoverError>(())
        })
        .map_err(|ShutDown| DiscoverError::ShutDown)??;
        driver::before_wait(&self.inner.shared);
        match receiver.recv() {
            Ok(PingCompletion::Discovery(result)) => result.outcome.map_err(DiscoverError::Failed),
            Ok(_) | Err(_) => Err(DiscoverError::ShutDown),
        }
    }

    /// What the node knows of the peer owning `nid` (after discovery or traffic).
    pub fn peer_info(&self, nid: Nid) -> Option<PeerInfo> {
        self.locked(|core, _| core.engine.peer_info(nid))
    }

    /// A snapshot of the statistics; also readable after shutdown.
    pub fn stats(&self) -> NodeStats {
        let counters = &self.inner.shared.counters;
        self.locked(|core, _| {
            let engine = &core.engine;
            NodeStats {
                global: engine.stats(),
                nis: engine.ni_ids().filter_map(|ni| engine.ni_stats(ni)).collect(),
                peer_nis: engine.peer_nis().collect(),
                messages: engine.message_count(),
                mds: engine.md_count(),
                mes: engine.me_count(),
                runtime: RuntimeStats {
                    io_wakeups: counters.io_wakeups.load(Ordering::Relaxed),
                    events_unrouted: counters.events_unrouted.load(Ordering::Relaxed),
                    transmits_failed_locally: counters
                        .transmits_failed_locally
                        .load(Ordering::Relaxed),
                    transmits_in_flight: engine.transmits_in_lnd().count(),
                    socket_writes: counters.socket_writes.load(Ordering::Relaxed),
                    socket_writes_unlocked: counters.socket_writes_unlocked.load(Ordering::Relaxed),
                    socket_reads: counters.socket_reads.load(Ordering::Relaxed),
                    socket_reads_unlocked: counters.socket_reads_unlocked.load(Ordering::Relaxed),
                    core_lock_waits: counters.core_lock_waits.load(Ordering::Relaxed),
                    core_lock_held_ns: counters.core_lock_held_ns.load(Ordering::Relaxed),
                    core_lock_holds: counters.core_lock_holds.load(Ordering::Relaxed),
                    core_shared_holds: counters.core_shared_holds.load(Ordering::Relaxed),
                    core_shared_declined: counters.core_shared_declined.load(Ordering::Relaxed),
                },
                connections_by_partition: self.connections_by_partition(),
            }
        })
    }

    /// The TCP LND's counters, summed over the node's TCP NIs (all zero without one).
    pub fn tcp_stats(&self) -> TcpStats {
        let mut stats: Vec<TcpStats> = self.inner.tcps().iter().map(|lnd| lnd.stats()).collect();
        // What the listeners counted before a connection's NI was known.
        stats.push(self.inner.tcp_listeners.stats());
        TcpStats::sum(&stats)
    }

    /// The TCP connection tasks running now, by the CPU partition whose I/O thread runs them
    /// (index = CPT): each connection runs on the partition its peer's NID hashes to.
    pub fn connections_by_partition(&self) -> Vec<u64> {
        self.inner.shared.conn_tasks.iter().map(|count| count.load(Ordering::Relaxed)).collect()
    }

    /// The TCP LND's established connections, each with the NID of its NI (`conn_list`).
    pub fn tcp_connections(&self) -> Vec<(Nid, crate::TcpConnection)> {
        let lnds = self.inner.tcps();
        let nids = self.locked(|core, _| {
            lnds.iter().map(|lnd| core.engine.ni_nid(lnd.ni())).collect::<Vec<_>>()
        });
        lnds.iter()
            .zip(nids)
            .filter_map(|(lnd, nid)| Some((lnd, nid?)))
            .flat_map(|(lnd, nid)| lnd.connections().into_iter().map(move |conn| (nid, conn)))
            .collect()
    }

    /// The incarnation of each TCP NI (the `src_incarnation` its hellos carry: wall-clock
    /// nanoseconds when the NI was started, unique in the process), in the order the NIs were
    /// added (removed ones included).
    pub fn tcp_incarnations(&self) -> Vec<u64> {
        self.inner.tcps().iter().map(|lnd| lnd.incarnation()).collect()
    }

    /// Shuts the node down (see the type's documentation) and joins its I/O threads. Blocks
    /// until done; later calls return at once. Other handles stay valid, but their calls fail
    /// with a `ShutDown` error.
    pub fn shutdown(&self) {
        self.inner.shutdown();
    }

    pub fn is_shut_down(&self) -> bool {
        self.inner.shared.read().closed
    }

    // ------------------------------------------------------------------------- internals

    /// Locks the core, runs `call` with `now`, carries out what it produced, unlocks, then
    /// issues the wake-ups. `call` runs even on a closed core (it must check `closed`).
    pub(crate) fn locked<R>(&self, call: impl FnOnce(&mut Core, Time) -> R) -> R {
        let shared = &self.inner.shared;
        let mut wakes = Wakes::default();
        let result = {
            let mut core = shared.lock();
            // Read the clock under the lock so `now` never goes backwards for the core.
            let mut now = clock::now();
            let result = call(&mut core, now);
            drop(driver::drain_call(shared, core, &mut now, &mut wakes));
            result
        };
        wakes.finish();
        result
    }

    /// [`locked`](Self::locked) for calls a closed node refuses.
    fn call<R>(&self, call: impl FnOnce(&mut Core, Time) -> R) -> Result<R, ShutDown> {
        self.locked(|core, now| if core.closed { Err(ShutDown) } else { Ok(call(core, now)) })
    }

    /// Names `events` as the MD's handler (its queue's id), or turns the MD's events off
    /// without one; a queue of another node gives the memory back.
    pub(crate) fn route<'q>(
        &self,
        mut spec: MdSpec,
        events: Option<&'q EventQueue>,
    ) -> Result<(MdSpec, Option<&'q Arc<EqShared>>), Memory> {
        match events {
            Some(queue) if queue.shared.node_id != self.inner.shared.id => Err(spec.memory),
            Some(queue) => {
                spec.handler = queue.shared.id;
                Ok((spec, Some(&queue.shared)))
            }
            None => {
                spec.events = false;
                spec.handler = 0;
                Ok((spec, None))
            }
        }
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.inner.shared
    }

    pub(crate) fn inner(&self) -> &Inner {
        &self.inner
    }
}

impl fmt::Debug for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Node")
            .field("id", &self.inner.shared.id)
            .field("pid", &self.inner.pid)
            .finish_non_exhaustive()
    }
}

impl Default for NodeBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl NodeBuilder {
    /// Pid 12345 (`LNET_PID_LUSTRE`), default tunables and limits, only `0@lo`.
    pub fn new() -> Self {
        Self {
            pid: LNET_PID_LUSTRE,
            interface_cookie: None,
            tunables: Tunables::default(),
            limits: Limits::default(),
            partitions: ulnet_proto::engine::cpt::Partitions::default(),
            nis: Vec::new(),
            io_cpu: None,
            partition_cpus: Vec::new(),
            partition_nodes: Vec::new(),
            spin: DEFAULT_SPIN,
            privileged_ports: true,
        }
    }

    pub fn pid(mut self, pid: u32) -> Self {
        self.pid = pid;
        self
    }

    /// Overrides the interface cookie (by default the wall-clock time at start in ns, as
    /// Lustre's `the_lnet.ln_interface_cookie`, so a restarted node's stale handles are told
    /// apart).
    pub fn interface_cookie(mut self, cookie: u64) -> Self {
        self.interface_cookie = Some(cookie);
        self
    }

    pub fn tunables(mut self, tunables: Tunables) -> Self {
        self.tunables = tunables;
        self
    }

    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The node's CPU partitions (libcfs's table): NIs are bound to them, every message is
    /// labelled with one, and each has an I/O thread of its own that runs the TCP connections
    /// whose peer hashes to it (decisions 0026, 0029).
    pub fn partitions(mut self, partitions: ulnet_proto::engine::cpt::Partitions) -> Self {
        self.partitions = partitions;
        self
    }

    /// Each partition's CPUs, by CPT (libcfs's `cfs_cpt_cpumask()`): partition `i`'s I/O
    /// thread is pinned to `cpus[i]` as far as the process's own affinity mask allows, as the
    /// kernel binds its schedulers with `cfs_cpt_bind()`. A thread that cannot be pinned is
    /// logged once and runs unpinned. Without this (the default) the threads are not pinned.
    /// [`io_cpu`](Self::io_cpu) overrides partition 0's.
    pub fn partition_cpus(mut self, cpus: Vec<Vec<usize>>) -> Self {
        self.partition_cpus = cpus;
        self
    }

    /// Each partition's NUMA nodes, by CPT (libcfs's `cfs_cpt_nodemask()`): a TCP NI's
    /// distance to its device is then measured from every partition, and a message's NI chosen
    /// by the distance from its home partition, as the kernel's `lnet_get_best_ni()` does.
    /// Without this (the default), or with a list that is not one per partition, the node's
    /// memory is taken to be where the I/O thread runs.
    pub fn partition_nodes(mut self, nodes: Vec<Vec<u32>>) -> Self {
        self.partition_nodes = nodes;
        self
    }

    /// An NI with `nid` on the in-process `fabric`, with default net tunables.
    pub fn mem_ni(self, nid: Nid, fabric: &MemFabric) -> Self {
        self.mem_ni_config(NiConfig::new(nid, LndKind::Fabric), fabric)
    }

    /// An NI on the in-process `fabric` with its own tunables (the LND kind is set to
    /// `Fabric`).
    pub fn mem_ni_config(mut self, config: NiConfig, fabric: &MemFabric) -> Self {
        let config = NiConfig { lnd: LndKind::Fabric, ..config };
        self.nis.push((config, LndSpec::Mem(fabric.clone())));
        self
    }

    /// An NI on the TCP LND (socklnd) with `nid` (`a.b.c.d@tcpN`, or an IPv6 address), default
    /// net tunables, and the socklnd `tunables`. Among them, `accept_port` (988 by default) is
    /// both where this NI listens (on its own IP) and where it dials its peers, so every node
    /// of a network must use the same; `accept` is the policy for incoming connections
    /// (`secure` refuses peers whose source port is above 1023). The listener is bound by
    /// [`build`](Self::build), which fails if it cannot be; NIs of the node on the same address
    /// and port (`10.0.0.1@tcp` and `10.0.0.1@tcp1`) share one, the connreq's target NID
    /// saying which NI a connection is for, as the kernel's one acceptor does (they must then
    /// agree on `accept`, `accept_timeout` and `accept_backlog`).
    ///
    /// ```no_run
    /// use ulnet::{Node, SocklndTunables, AcceptPolicy};
    ///
    /// let tunables = SocklndTunables { accept_port: 7988, accept: AcceptPolicy::All, ..Default::default() };
    /// let node = Node::builder().tcp_ni("127.0.0.2@tcp".parse().unwrap(), tunables).build().unwrap();
    /// # drop(node);
    /// ```
    pub fn tcp_ni(self, nid: Nid, tunables: SocklndTunables) -> Self {
        self.tcp_ni_config(NiConfig::new(nid, LndKind::Tcp), tunables)
    }

    /// A TCP NI with its own net tunables (credits...). The LND kind is set to `Tcp` and, when
    /// unset, the NI's LND timeout to `tunables.sock_timeout`.
    pub fn tcp_ni_config(mut self, config: NiConfig, tunables: SocklndTunables) -> Self {
        let lnd_timeout = config.lnd_timeout.or(Some(tunables.sock_timeout));
        let config = NiConfig { lnd: LndKind::Tcp, lnd_timeout, ..config };
        self.nis.push((config, LndSpec::Tcp(Box::new(tunables))));
        self
    }

    /// Whether outgoing TCP connections try privileged source ports (1023 down to 512) first,
    /// as the kernel does; on by default, and harmless without the privilege (the first
    /// refusal turns it off). Off, connections come from ordinary ports, which peers with
    /// `accept=secure` refuse and peers with `accept=all` treat as a userspace process (see
    /// the TCP LND documentation); mainly for tests of that case under root.
    pub fn privileged_ports(mut self, enabled: bool) -> Self {
        self.privileged_ports = enabled;
        self
    }

    /// Pins the I/O thread to `cpu` (a CPU partition's core, in Lustre's terms).
    pub fn io_cpu(mut self, cpu: usize) -> Self {
        self.io_cpu = Some(cpu);
        self
    }

    /// How long a waiting thread (the I/O thread, a blocked `recv_timeout`) spins before it
    /// parks. A park costs a wake-up (about 30 us across vCPUs on small virtual machines); a
    /// spin costs a CPU, which hurts when threads outnumber CPUs (see [`DEFAULT_SPIN`]).
    /// Clamped to [`MAX_SPIN`]; zero (the default) never spins.
    pub fn spin(mut self, spin: Duration) -> Self {
        self.spin = spin.min(MAX_SPIN);
        self
    }

    /// Builds the node, attaches its NIs and starts its I/O threads.
    pub fn build(self) -> Result<Node, BuildError> {
        if let Some(cpu) = self.io_cpu {
            if cpu >= rustix::thread::CpuSet::MAX_CPU {
                return Err(BuildError::CpuOutOfRange(cpu));
            }
        }
        let interface_cookie = self.interface_cookie.unwrap_or_else(wall_clock_nanos);
        let config = EngineConfig {
            interface_cookie,
            pid: self.pid,
            tunables: self.tunables,
            nis: self.nis.iter().map(|(config, _)| *config).collect(),
            limits: self.limits,
            partitions: self.partitions,
        };
        let mut engine = ulnet_proto::engine::Engine::new(config)?;
        let placement = crate::numa::Placement {
            cpu: self.io_cpu,
            partition_nodes: self.partition_nodes.clone(),
        };
        crate::numa::apply(&mut engine, &placement);

        let mut lnds: Vec<Option<Arc<dyn Lnd>>> = vec![None];
        let mut mems: Vec<Arc<MemLnd>> = Vec::new();
        let mut tcps: Vec<Arc<TcpLnd>> = Vec::new();
        let tcp_listeners = Listeners::default();
        for (index, (config, spec)) in self.nis.iter().enumerate() {
            // At most MAX_NIS (checked by the core above) plus loopback: fits in u16.
            let ni = NiId(u16::try_from(index + 1).unwrap_or(u16::MAX));
            match spec {
                LndSpec::Mem(fabric) => match fabric.attach(config.nid, ni) {
                    Ok(lnd) => {
                        mems.push(Arc::clone(&lnd));
                        lnds.push(Some(lnd as Arc<dyn Lnd>));
                    }
                    Err(error) => {
                        detach(&mems);
                        return Err(error);
                    }
                },
                LndSpec::Tcp(tunables) => {
                    let placement = Placement::new(self.partitions, config.cpts);
                    let tcp = TcpLnd::new(
                        ni,
                        config.nid,
                        self.pid,
                        **tunables,
                        self.privileged_ports,
                        &tcp_listeners,
                        placement,
                    );
                    match tcp {
                        Ok(lnd) => {
                            let lnd = Arc::new(lnd);
                            tcps.push(Arc::clone(&lnd));
                            lnds.push(Some(lnd as Arc<dyn Lnd>));
                        }
                        Err(error) => {
                            detach(&mems);
                            return Err(error);
                        }
                    }
                }
            }
        }

        let shared = Arc::new(Shared {
            id: driver::next_node_id(),
            partitioned: self.partitions.count() > 1,
            core: RwLock::new(Core::new(engine, lnds.into())),
            doorbell: Doorbell::default(),
            closing: Default::default(),
            runtimes: OnceLock::new(),
            conn_tasks: (0..self.partitions.count()).map(|_| Default::default()).collect(),
            queues: Mutex::new(Vec::new()),
            counters: Arc::new(Counters::default()),
            spin: self.spin,
            output_hold: OutputHold::default(),
        });
        for lnd in &mems {
            lnd.set_node(Arc::downgrade(&shared));
        }
        // The other partitions' threads first: partition 0's starts the LNDs, which may place
        // connections on any of them.
        let mut partition_threads = Vec::new();
        let mut runtimes = Vec::new();
        for cpt in 1..self.partitions.count() {
            let cpus = self.partition_cpus.get(cpt as usize).cloned().unwrap_or_default();
            match driver::partitions::start(shared.id, cpt, cpus) {
                Ok((runtime, thread)) => {
                    runtimes.push(runtime);
                    partition_threads.push(thread);
                }
                Err(error) => {
                    drop(partition_threads);
                    driver::finish(&shared);
                    return Err(error);
                }
            }
        }
        let pin = IoPin {
            cpu: self.io_cpu,
            cpus: self.partition_cpus.first().cloned().unwrap_or_default(),
        };
        let thread = match start_io_thread(&shared, pin, runtimes) {
            Ok(thread) => thread,
            Err(error) => {
                drop(partition_threads);
                return Err(error);
            }
        };
        Ok(Node {
            inner: Arc::new(Inner {
                shared,
                thread: Mutex::new(Some(thread)),
                partition_threads: Mutex::new(partition_threads),
                pid: self.pid,
                interface_cookie,
                tcps: Mutex::new(tcps),
                tcp_listeners,
                placement,
                privileged_ports: self.privileged_ports,
                partition_cpus: self.partition_cpus,
            }),
        })
    }
}

/// What the handles share; dropping the last one shuts the node down.
pub(crate) struct Inner {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// The I/O threads of partitions 1 and up.
    partition_threads: Mutex<Vec<driver::partitions::PartitionThread>>,
    pid: u32,
    interface_cookie: u64,
    /// The TCP NIs' LNDs, for their statistics (removed NIs' too: counters only grow). Leaf
    /// lock.
    pub(crate) tcps: Mutex<Vec<Arc<TcpLnd>>>,
    /// The TCP NIs' listening sockets, one per address and port, shared by the NIs on it.
    pub(crate) tcp_listeners: Listeners,
    /// What NIs added live need: where the node's memory is (NUMA distances) and the
    /// source-port policy.
    pub(crate) placement: crate::numa::Placement,
    pub(crate) privileged_ports: bool,
    /// Each partition's CPUs, as the builder was given them (empty: not known).
    partition_cpus: Vec<Vec<usize>>,
}

impl Inner {
    pub(crate) fn tcps(&self) -> std::sync::MutexGuard<'_, Vec<Arc<TcpLnd>>> {
        self.tcps.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn shutdown(&self) {
        let shared = &self.shared;
        shared.closing.store(true, Ordering::Release);
        shared.doorbell.ring(&shared.counters.io_wakeups);
        // The other partitions' threads first, as partition 0's runtime is dropped before the
        // shutdown sequence: their connection tasks go with their runtimes.
        let partition_threads = std::mem::take(
            &mut *self.partition_threads.lock().unwrap_or_else(PoisonError::into_inner),
        );
        drop(partition_threads);
        let thread = self.thread.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(thread) = thread {
            // The I/O thread runs `finish` itself as it leaves its loop.
            if thread.join().is_err() {
                tracing::error!("the I/O thread panicked");
            }
        }
        // Covers an I/O thread that died early; a no-op after a normal exit.
        driver::finish(shared);
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Where partition 0's I/O thread runs: `cpu` (an error if it cannot) or else `cpus` (a
/// warning if it cannot).
struct IoPin {
    cpu: Option<usize>,
    cpus: Vec<usize>,
}

/// Starts the I/O thread and waits until it runs (or reports why it cannot). `others` are the
/// runtimes of partitions 1 and up.
fn start_io_thread(
    shared: &Arc<Shared>,
    pin: IoPin,
    others: Vec<tokio::runtime::Handle>,
) -> Result<JoinHandle<()>, BuildError> {
    let (ready, started) = mpsc::sync_channel(1);
    let thread_shared = Arc::clone(shared);
    let spawned = thread::Builder::new()
        .name(format!("ulnet-io-{}", shared.id))
        .spawn(move || io_thread(&thread_shared, &pin, others, &ready));
    let thread = match spawned {
        Ok(thread) => thread,
        Err(error) => {
            driver::finish(shared);
            return Err(BuildError::Thread(error));
        }
    };
    let outcome = started.recv().unwrap_or(Err(BuildError::ThreadExited));
    if let Err(error) = outcome {
        let _ = thread.join();
        driver::finish(shared);
        return Err(error);
    }
    Ok(thread)
}

/// The I/O thread: pin, build the runtime, start the LNDs, loop, then shut down.
fn io_thread(
    shared: &Arc<Shared>,
    pin: &IoPin,
    others: Vec<tokio::runtime::Handle>,
    ready: &mpsc::SyncSender<Result<(), BuildError>>,
) {
    driver::partitions::enter(shared.id, 0);
    if let Some(cpu) = pin.cpu {
        let mut set = rustix::thread::CpuSet::new();
        set.set(cpu);
        if let Err(errno) = rustix::thread::sched_setaffinity(None, &set) {
            let _ = ready.send(Err(BuildError::Pin { cpu, source: errno.into() }));
            return;
        }
    } else {
        driver::partitions::pin(0, &pin.cpus);
    }
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            let _ = ready.send(Err(BuildError::Runtime(error)));
            return;
        }
    };
    let runtimes: Box<[tokio::runtime::Handle]> =
        std::iter::once(runtime.handle().clone()).chain(others).collect();
    let _ = shared.runtimes.set(runtimes);
    runtime.block_on(async {
        for lnd in shared.lnds().iter().flatten() {
            lnd.start(shared);
        }
        crate::link_watch::start(shared);
        let _ = ready.send(Ok(()));
        driver::run(shared).await;
    });
    // Tasks the LNDs spawned are dropped with the runtime, before the shutdown sequence.
    drop(runtime);
    driver::finish(shared);
}

fn detach(mems: &[Arc<MemLnd>]) {
    for lnd in mems {
        // Unregisters the NID; nothing can be in flight yet.
        drop(lnd.detach());
    }
}

/// Takes the completion from `receiver`, looking for it (and yielding) for
/// [`PING_REPLY_POLL`] before blocking.
fn wait_briefly_then_block<T>(receiver: &mpsc::Receiver<T>) -> Result<T, mpsc::RecvError> {
    let until = std::time::Instant::now() + PING_REPLY_POLL;
    loop {
        match receiver.try_recv() {
            Ok(value) => return Ok(value),
            Err(mpsc::TryRecvError::Disconnected) => return Err(mpsc::RecvError),
            Err(mpsc::TryRecvError::Empty) if std::time::Instant::now() < until => {
                thread::yield_now();
            }
            Err(mpsc::TryRecvError::Empty) => return receiver.recv(),
        }
    }
}

/// Wall-clock nanoseconds since the Unix epoch (Lustre's interface cookie at startup).
fn wall_clock_nanos() -> u64 {
    let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    u64::try_from(since_epoch.as_nanos()).unwrap_or(u64::MAX)
}
