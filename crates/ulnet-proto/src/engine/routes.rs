//! Routing state (`Routes`): the route table, whether this node forwards, and the router
//! buffer pools that forwarded messages are received into: one set of tiny, small and large
//! pools per CPU partition, each sized with the partition's share of the node-wide counts,
//! and a message takes its buffer from the set of the partition it was received on.
//!
//! lustre: lnet/lnet/router.c (`lnet_add_route`, `lnet_add_route_to_rnet`, `lnet_del_route`,
//! `lnet_get_route`, `lnet_rtrpools_alloc`, `lnet_rtrpool_adjust_bufs`, `lnet_rtrpools_enable`,
//! `lnet_rtrpools_disable`, `lnet_nrb_*_calculate`), lib-move.c (`lnet_msg2bufpool`,
//! `lnet_return_rx_credits_locked`), docs/protocol/semantics.md §5.1, §5.5.
//!
//! The flows that read this part (route choice, forwarding, the router checker) live in
//! `routing.rs`; this file owns the tables and their bounds.

use std::collections::VecDeque;

use crate::addr::{LndType, Net, Nid};
use crate::engine::shares::Shares;
use crate::engine::slab::Key;
use crate::engine::stamp::Stamp;
use crate::engine::view::{Access, Exclusive};
use crate::rng::Rng;
use crate::time::Time;
use crate::wire::header::LNET_MTU;

/// Most routes a node holds (Lustre has no bound; each costs a few dozen bytes here).
pub const MAX_ROUTES: usize = 16_384;
/// The largest hop count a route may have (`lnet_add_route`: 1..255, or undefined).
pub const MAX_HOPS: u32 = 255;
/// The page size router buffers are counted in (`PAGE_SIZE` on the kernels Lustre runs on).
pub const ROUTER_PAGE_SIZE: u32 = 4096;
/// Default buffer counts when the parameter is 0 (`LNET_NRB_TINY`, `_SMALL`, `_LARGE`), and
/// the per-partition minimums below which the kernel warns.
pub const DEFAULT_TINY_BUFFERS: u32 = 2048;
pub const DEFAULT_SMALL_BUFFERS: u32 = 16_384;
pub const DEFAULT_LARGE_BUFFERS: u32 = 1024;
pub const MIN_TINY_BUFFERS: u32 = 512;
pub const MIN_SMALL_BUFFERS: u32 = 4096;
pub const MIN_LARGE_BUFFERS: u32 = 256;

/// `ln_routing`: whether this node forwards messages between its nets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum RoutingState {
    #[default]
    Disabled,
    /// `set routing 1`: forwarding works, but the ping buffer still says RTE_DISABLED until
    /// `alive_router_check_interval + router_ping_timeout` has passed.
    Starting {
        since: Time,
    },
    Enabled,
    /// `set routing 0`: RTE_DISABLED is advertised at once; buffers are freed once they are all
    /// back (after at least the same delay, at most three times it).
    Stopping {
        since: Time,
    },
}

impl RoutingState {
    /// Forwarding works in every state but Disabled (`lnet_routing_disabled`).
    pub fn forwards(self) -> bool {
        self != Self::Disabled
    }

    /// What `routing show` prints as `enable`: 1 only once routing is Enabled.
    pub fn enabled(self) -> bool {
        self == Self::Enabled
    }
}

/// A route as configured: `lnetctl route add --net NET --gateway NID [--hop N] [--priority P]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RouteConfig {
    /// The remote net the route reaches.
    pub net: Net,
    /// The next hop: a NID on a local net.
    pub gateway: Nid,
    /// 1..=255, or `None` for undefined (counted as 1 when comparing).
    pub hops: Option<u32>,
    /// 0 is the highest priority.
    pub priority: u32,
}

/// A route as `route show` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RouteInfo {
    pub net: Net,
    pub gateway: Nid,
    pub hops: Option<u32>,
    pub priority: u32,
    /// `lnet_is_route_alive` now.
    pub alive: bool,
    /// The gateway's ping buffer listed no NID on the remote net (`LNET_RT_MULTI_HOP`).
    pub multi_hop: bool,
}

/// Why a route was refused (`lnet_add_route`'s errors).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    /// `-EINVAL`: a bad net, gateway or hop count.
    #[error("invalid route")]
    Invalid,
    /// `-EEXIST`: the net is local, or the route already exists.
    #[error("route exists or the net is local")]
    Exists,
    /// `-EHOSTUNREACH`: no local NI on the gateway's net.
    #[error("no local interface on the gateway's net")]
    GatewayUnreachable,
    /// `-ENOMEM`: the route table or the peer table is full.
    #[error("route table full")]
    TableFull,
    /// `-ENOENT`: no such route (delete).
    #[error("no such route")]
    NotFound,
}

/// One route (`struct lnet_route`).
#[derive(Clone, Debug)]
pub(crate) struct Route {
    /// `lr_net`: the remote net.
    pub(crate) net: Net,
    /// `lr_nid`: the gateway NID as configured; its net is the route's local net (`lr_lnet`).
    pub(crate) gateway: Nid,
    pub(crate) hops: Option<u32>,
    pub(crate) priority: u32,
    /// `lr_seq`: the round robin among routes that tie.
    pub(crate) seq: Stamp,
    /// `lr_alive`: the cached aliveness, used when discovery is off toward the gateway.
    pub(crate) cached_alive: bool,
    /// `lr_single_hop`: the gateway's ping buffer lists a NID on the remote net.
    pub(crate) single_hop: bool,
}

/// The three size classes of router buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BufferClass {
    Tiny,
    Small,
    Large,
}

impl BufferClass {
    pub const ALL: [Self; 3] = [Self::Tiny, Self::Small, Self::Large];

    /// Pages per buffer: 0, 1, and `LNET_MTU` in pages.
    pub fn pages(self) -> u32 {
        match self {
            Self::Tiny => 0,
            Self::Small => 1,
            Self::Large => LNET_MTU.div_ceil(ROUTER_PAGE_SIZE),
        }
    }

    /// The smallest class that holds `length` bytes (`lnet_msg2bufpool`); `None` beyond the MTU.
    pub fn for_length(length: u32) -> Option<Self> {
        Self::ALL.into_iter().find(|class| class.pages() * ROUTER_PAGE_SIZE >= length)
    }
}

/// What `routing show` prints for one pool of one partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferPoolStats {
    pub pages: u32,
    pub buffers: u32,
    pub credits: i32,
    pub min_credits: i32,
}

/// Requested buffer counts (`tiny_router_buffers` etc.); 0 means the default.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct BufferCounts {
    pub tiny: u32,
    pub small: u32,
    pub large: u32,
}

impl BufferCounts {
    fn get(self, class: BufferClass) -> u32 {
        match class {
            BufferClass::Tiny => self.tiny,
            BufferClass::Small => self.small,
            BufferClass::Large => self.large,
        }
    }

    pub(crate) fn set(&mut self, class: BufferClass, value: u32) {
        match class {
            BufferClass::Tiny => self.tiny = value,
            BufferClass::Small => self.small = value,
            BufferClass::Large => self.large = value,
        }
    }

    /// The node-wide count: the parameter, or the default when it is 0.
    pub fn effective(self, class: BufferClass) -> u32 {
        let requested = self.get(class);
        let count = if requested > 0 {
            requested
        } else {
            match class {
                BufferClass::Tiny => DEFAULT_TINY_BUFFERS,
                BufferClass::Small => DEFAULT_SMALL_BUFFERS,
                BufferClass::Large => DEFAULT_LARGE_BUFFERS,
            }
        };
        count.max(1)
    }

    /// The count each of `partitions` partitions gets (`lnet_nrb_*_calculate`): the
    /// node-wide count divided among them, at least 1.
    pub fn per_partition(self, class: BufferClass, partitions: u32) -> u32 {
        (self.effective(class) / partitions.max(1)).max(1)
    }
}

/// One router buffer pool (`struct lnet_rtrbufpool`). Buffers are credits first: memory is
/// allocated when a credit is first used and kept for reuse, so an idle router holds only what
/// its busiest moment needed, never more than `buffers` of the class size.
#[derive(Debug)]
pub(crate) struct BufferPool {
    class: BufferClass,
    /// `rbp_req_nbuffers`: what configuration asked for.
    requested: u32,
    /// `rbp_nbuffers`: buffers that exist (free or lent).
    buffers: u32,
    /// `rbp_credits`: free buffers; negative is the number of waiters.
    credits: i32,
    min_credits: i32,
    /// Free buffers whose memory exists.
    spare: Vec<Vec<u8>>,
    /// `rbp_msgs`: messages waiting for a buffer.
    waiting: VecDeque<Key>,
}

impl BufferPool {
    fn new(class: BufferClass) -> Self {
        Self {
            class,
            requested: 0,
            buffers: 0,
            credits: 0,
            min_credits: 0,
            spare: Vec::new(),
            waiting: VecDeque::new(),
        }
    }

    fn bytes(&self) -> usize {
        (self.class.pages() * ROUTER_PAGE_SIZE) as usize
    }

    /// `lnet_rtrpool_adjust_bufs`: growing adds buffers (and credits) now; shrinking lowers
    /// the request, and buffers beyond it that are lent are dropped as they come back.
    /// Unlike the kernel, free buffers beyond it go at once (they are only credits until
    /// first used). Returns the waiters the new credits unblock.
    fn adjust(&mut self, count: u32) -> Vec<Key> {
        let grow = count.saturating_sub(self.buffers);
        self.requested = count;
        if grow == 0 {
            let free = u32::try_from(self.credits.max(0)).unwrap_or(0);
            let excess = self.buffers.saturating_sub(count).min(free);
            self.buffers -= excess;
            self.credits -= i32::try_from(excess).unwrap_or(0);
            self.min_credits = self.min_credits.min(self.credits);
            self.spare.truncate(u32::try_from(self.credits.max(0)).unwrap_or(0) as usize);
            return Vec::new();
        }
        self.buffers += grow;
        self.credits += i32::try_from(grow).unwrap_or(i32::MAX);
        self.min_credits = self.credits;
        let mut granted = Vec::new();
        while granted.len() < grow as usize {
            let Some(waiter) = self.waiting.pop_front() else { break };
            granted.push(waiter);
        }
        granted
    }

    /// Charges a buffer to `message`: true when one is free, else it waits.
    pub(crate) fn acquire(&mut self, message: Key) -> bool {
        self.credits -= 1;
        self.min_credits = self.min_credits.min(self.credits);
        if self.credits < 0 {
            self.waiting.push_back(message);
            false
        } else {
            true
        }
    }

    /// The memory of a buffer whose credit is held.
    pub(crate) fn take_memory(&mut self) -> Vec<u8> {
        self.spare.pop().unwrap_or_else(|| vec![0; self.bytes()])
    }

    /// `lnet_return_rx_credits_locked` for the pool: the buffer comes back (or is dropped when
    /// the pool shrank, or routing is off); returns the waiter that now holds it.
    pub(crate) fn release(&mut self, memory: Option<Vec<u8>>, routing: bool) -> Option<Key> {
        if !routing {
            self.buffers = self.buffers.saturating_sub(1);
            return None;
        }
        let current = u32::try_from(self.credits.max(0)).unwrap_or(0);
        if current >= self.requested {
            self.buffers = self.buffers.saturating_sub(1);
            return None;
        }
        if let Some(memory) = memory.filter(|memory| memory.len() == self.bytes()) {
            self.spare.push(memory);
        }
        self.credits += 1;
        if self.credits <= 0 { self.waiting.pop_front() } else { None }
    }

    /// Takes `message` off the waiters; false if it was not waiting.
    pub(crate) fn remove_waiter(&mut self, message: Key) -> bool {
        let Some(at) = self.waiting.iter().position(|waiter| *waiter == message) else {
            return false;
        };
        self.waiting.remove(at);
        self.credits += 1;
        true
    }

    fn free_all(&mut self) -> Vec<Key> {
        self.spare.clear();
        self.requested = 0;
        self.buffers = 0;
        self.credits = 0;
        self.min_credits = 0;
        self.waiting.drain(..).collect()
    }

    pub(crate) fn stats(&self) -> BufferPoolStats {
        BufferPoolStats {
            pages: self.class.pages(),
            buffers: self.buffers,
            credits: self.credits,
            min_credits: self.min_credits,
        }
    }

    /// Buffers lent out now.
    pub(crate) fn lent(&self) -> u32 {
        let free = u32::try_from(self.credits.max(0)).unwrap_or(0);
        self.buffers.saturating_sub(free)
    }

    pub(crate) fn spare_bytes(&self) -> usize {
        self.spare.iter().map(Vec::len).sum()
    }

    pub(crate) fn check(&self, holders: usize) -> Result<(), String> {
        let waiters = self.waiting.len() as i64;
        if (self.credits < 0) != (waiters > 0) {
            return Err(format!("router pool credits {} with {waiters} waiters", self.credits));
        }
        let free = i64::from(self.credits.max(0));
        if free + holders as i64 > i64::from(self.buffers) {
            return Err(format!(
                "router pool: {free} free + {holders} lent exceed {} buffers",
                self.buffers
            ));
        }
        Ok(())
    }
}

/// The route table, the routing state and the buffer pools.
#[derive(Debug)]
pub(crate) struct Routes {
    /// Every route; routes to one net keep their relative (randomised) order.
    routes: Vec<Route>,
    pub(crate) state: RoutingState,
    /// When routing last became Enabled: a net's liveness window starts no earlier.
    pub(crate) enabled_at: Time,
    /// When the router checker next has work (`poll_timeout` reads it; recomputed whenever
    /// what it depends on changes, so the per-call path allocates nothing).
    pub(crate) next_check: Option<Time>,
    /// The counts configuration asked for (0: default), node-wide.
    pub(crate) counts: BufferCounts,
    /// Places new routes at a random position among their net's (`lnet_add_route_to_rnet`).
    rng: Rng,
}

impl Routes {
    /// No routes, routing off.
    pub(crate) fn new(seed: u64) -> Self {
        Self {
            routes: Vec::new(),
            state: RoutingState::Disabled,
            enabled_at: Time::ZERO,
            next_check: None,
            counts: BufferCounts::default(),
            rng: Rng::new(seed),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Route> {
        self.routes.iter()
    }

    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut Route> {
        self.routes.iter_mut()
    }

    /// Indexes of the routes to `net`, in table order.
    pub(crate) fn to_net(&self, net: Net) -> impl Iterator<Item = usize> + '_ {
        self.routes.iter().enumerate().filter(move |(_, route)| route.net == net).map(|(i, _)| i)
    }

    pub(crate) fn get(&self, index: usize) -> Option<&Route> {
        self.routes.get(index)
    }

    pub(crate) fn get_mut(&mut self, index: usize) -> Option<&mut Route> {
        self.routes.get_mut(index)
    }

    /// Whether any route reaches `net` (`lnet_find_rnet_locked`).
    pub(crate) fn reaches(&self, net: Net) -> bool {
        self.routes.iter().any(|route| route.net == net)
    }

    /// `lnet_add_route`'s checks that need nothing but the arguments.
    pub(crate) fn validate(config: &RouteConfig) -> Result<(), RouteError> {
        let hops_ok = config.hops.is_none_or(|hops| (1..=MAX_HOPS).contains(&hops));
        if config.gateway.is_any()
            || config.gateway == Nid::LO_0
            || config.net == Net::ANY
            || config.net.lnd == LndType::LO
            || config.gateway.net() == config.net
            || !hops_ok
        {
            return Err(RouteError::Invalid);
        }
        Ok(())
    }

    /// Inserts a route at a random position among the routes to its net (different nodes
    /// then prefer different routers). `same_gateway` says whether an existing route's
    /// gateway is the new one's peer (a duplicate, `-EEXIST`).
    pub(crate) fn insert(
        &mut self,
        config: &RouteConfig,
        alive: bool,
        same_gateway: impl Fn(Nid) -> bool,
    ) -> Result<(), RouteError> {
        if self.routes.iter().any(|route| route.net == config.net && same_gateway(route.gateway)) {
            return Err(RouteError::Exists);
        }
        if self.routes.len() >= MAX_ROUTES {
            return Err(RouteError::TableFull);
        }
        let positions: Vec<usize> = self.to_net(config.net).collect();
        let offset = self.rng.below(positions.len() as u64 + 1) as usize;
        let at = positions.get(offset).copied().unwrap_or(self.routes.len());
        let route = Route {
            net: config.net,
            gateway: config.gateway,
            hops: config.hops,
            priority: config.priority,
            seq: Stamp::default(),
            cached_alive: alive,
            single_hop: false,
        };
        self.routes.insert(at, route);
        Ok(())
    }

    /// Deletes the routes to `net` (any net when `None`) through the gateway for which
    /// `through` holds; returns how many went.
    pub(crate) fn remove(&mut self, net: Option<Net>, through: impl Fn(Nid) -> bool) -> usize {
        let before = self.routes.len();
        self.routes
            .retain(|route| !(net.is_none_or(|net| route.net == net) && through(route.gateway)));
        before - self.routes.len()
    }
}

/// One partition's router buffer pools (`ln_rtrpools[cpt]`): tiny, small and large.
#[derive(Debug)]
pub(crate) struct RouterPools {
    pools: [BufferPool; 3],
}

impl Default for RouterPools {
    fn default() -> Self {
        Self { pools: BufferClass::ALL.map(BufferPool::new) }
    }
}

impl RouterPools {
    fn pool_mut(&mut self, class: BufferClass) -> Option<&mut BufferPool> {
        self.pools.iter_mut().find(|pool| pool.class == class)
    }
}

impl<'a, A: Access> Shares<'a, A, RouterPools> {
    /// Partition `cpt`'s pool of `class`.
    pub(crate) fn pool(&self, cpt: u32, class: BufferClass) -> Option<&BufferPool> {
        self.share(cpt)?.pools.iter().find(|pool| pool.class == class)
    }

    /// Whether every buffer is back (`lnet_rtrpools_are_free`).
    pub(crate) fn idle(&self) -> bool {
        self.iter_shares().flat_map(|(_, set)| &set.pools).all(|pool| pool.lent() == 0)
    }

    /// Each partition's tiny, small and large pools, in CPT order.
    pub(crate) fn stats(&self) -> Vec<[BufferPoolStats; 3]> {
        self.iter_shares().map(|(_, set)| set.pools.each_ref().map(BufferPool::stats)).collect()
    }

    /// Bytes of buffer memory held free for reuse.
    pub(crate) fn spare_bytes(&self) -> usize {
        self.iter_shares().flat_map(|(_, set)| &set.pools).map(BufferPool::spare_bytes).sum()
    }
}

impl<'a> Shares<'a, Exclusive, RouterPools> {
    /// Partition `cpt`'s pool of `class`, to change.
    pub(crate) fn pool_mut(&mut self, cpt: u32, class: BufferClass) -> Option<&mut BufferPool> {
        self.share_mut(cpt)?.pool_mut(class)
    }

    /// Sizes every pool of every partition from `counts` over `partitions` partitions
    /// (`lnet_rtrpools_alloc`, `lnet_rtrpools_adjust`); returns the waiters that now hold a
    /// buffer.
    pub(crate) fn size(&mut self, counts: &BufferCounts, partitions: u32) -> Vec<Key> {
        let mut granted = Vec::new();
        for class in BufferClass::ALL {
            granted.extend(self.resize(class, counts.per_partition(class, partitions)));
        }
        granted
    }

    /// Each partition's `class` pool to `share` buffers.
    pub(crate) fn resize(&mut self, class: BufferClass, share: u32) -> Vec<Key> {
        let mut granted = Vec::new();
        for (_, set) in self.iter_shares_mut() {
            if let Some(pool) = set.pool_mut(class) {
                granted.extend(pool.adjust(share));
            }
        }
        granted
    }

    /// Frees every buffer (`lnet_rtrpools_free`); returns the messages that were waiting.
    pub(crate) fn free(&mut self) -> Vec<Key> {
        let sets = self.iter_shares_mut();
        sets.flat_map(|(_, set)| set.pools.iter_mut().flat_map(BufferPool::free_all)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(index: u32) -> Key {
        Key { index, generation: 0 }
    }

    #[test]
    fn classes_follow_the_message_length() {
        assert_eq!(BufferClass::for_length(0), Some(BufferClass::Tiny));
        assert_eq!(BufferClass::for_length(1), Some(BufferClass::Small));
        assert_eq!(BufferClass::for_length(4096), Some(BufferClass::Small));
        assert_eq!(BufferClass::for_length(4097), Some(BufferClass::Large));
        assert_eq!(BufferClass::for_length(LNET_MTU), Some(BufferClass::Large));
        assert_eq!(BufferClass::for_length(LNET_MTU + 1), None);
        assert_eq!(BufferClass::Large.pages(), 256);
    }

    #[test]
    fn defaults_are_the_kernels_for_one_partition() {
        let counts = BufferCounts::default();
        assert_eq!(counts.effective(BufferClass::Tiny), 2048);
        assert_eq!(counts.effective(BufferClass::Small), 16_384);
        assert_eq!(counts.effective(BufferClass::Large), 1024);
        let set = BufferCounts { tiny: 3, small: 0, large: 1 };
        assert_eq!(set.effective(BufferClass::Tiny), 3);
        assert_eq!(set.effective(BufferClass::Large), 1);
    }

    /// `lnet_nrb_*_calculate()`: the node-wide count (or default) divided among the
    /// partitions, at least one each: 2048 / 3 = 682, 16384 / 3 = 5461, 1024 / 3 = 341.
    #[test]
    fn counts_are_divided_among_partitions() {
        let counts = BufferCounts::default();
        let shares = |partitions| BufferClass::ALL.map(|c| counts.per_partition(c, partitions));
        assert_eq!(shares(1), [2048, 16_384, 1024]);
        assert_eq!(shares(2), [1024, 8192, 512]);
        assert_eq!(shares(3), [682, 5461, 341]);
        assert_eq!(shares(4), [512, 4096, 256]);
        let set = BufferCounts { tiny: 3, small: 0, large: 600 };
        assert_eq!(set.per_partition(BufferClass::Tiny, 4), 1, "3 / 4 = 0, raised to 1");
        assert_eq!(set.per_partition(BufferClass::Large, 4), 150);
    }

    #[test]
    fn each_partition_has_its_own_pools() {
        use crate::engine::shares::Owned;
        use crate::engine::slab::KeyPartitions;
        let mut owned = Owned::new(KeyPartitions::new(2), |_, _| RouterPools::default());
        let mut pools = owned.exclusive();
        assert!(pools.size(&BufferCounts::default(), 2).is_empty());
        let buffers = |pools: &Shares<'_, Exclusive, RouterPools>| {
            pools.stats().iter().map(|set| set.map(|pool| pool.buffers)).collect::<Vec<_>>()
        };
        assert_eq!(buffers(&pools), [[1024, 8192, 512], [1024, 8192, 512]]);
        let counts = BufferCounts { small: 10, ..BufferCounts::default() };
        pools.resize(BufferClass::Small, counts.per_partition(BufferClass::Small, 2));
        assert_eq!(buffers(&pools), [[1024, 5, 512], [1024, 5, 512]]);
        // A buffer lent on partition 1 leaves partition 0's pool whole.
        let mut lend =
            |cpt, index| pools.pool_mut(cpt, BufferClass::Small).unwrap().acquire(key(index));
        for index in 0..5 {
            assert!(lend(1, index));
        }
        assert!(!lend(1, 5), "partition 1 is out of small buffers");
        assert!(lend(0, 6));
        let credits = pools.stats().iter().map(|set| set[1].credits).collect::<Vec<_>>();
        assert_eq!(credits, [4, -1]);
        assert!(!pools.idle());
        assert_eq!(pools.free(), [key(5)]);
    }

    #[test]
    fn a_pool_lends_queues_and_shrinks_lazily() {
        let mut pool = BufferPool::new(BufferClass::Small);
        assert!(pool.adjust(2).is_empty());
        assert!(pool.acquire(key(1)));
        assert!(pool.acquire(key(2)));
        assert!(!pool.acquire(key(3)));
        assert_eq!(pool.stats().credits, -1);
        assert_eq!(pool.stats().min_credits, -1);
        let memory = pool.take_memory();
        assert_eq!(memory.len(), 4096);
        // The returned buffer goes to the waiter.
        assert_eq!(pool.release(Some(memory), true), Some(key(3)));
        pool.check(2).unwrap();
        // Shrinking to one while both are lent: the first return is dropped, the second kept.
        assert!(pool.adjust(1).is_empty());
        assert_eq!(pool.release(None, true), None);
        assert_eq!(pool.stats().buffers, 2);
        assert_eq!(pool.release(None, true), None);
        assert_eq!(pool.stats().buffers, 1);
        assert_eq!(pool.stats().credits, 1);
        pool.check(0).unwrap();
        // Free buffers beyond a smaller request go at once.
        pool.adjust(5);
        assert_eq!(pool.stats().buffers, 5);
        pool.adjust(2);
        assert_eq!((pool.stats().buffers, pool.stats().credits), (2, 2));
        pool.check(0).unwrap();
    }

    #[test]
    fn growing_a_pool_unblocks_its_waiters() {
        let mut pool = BufferPool::new(BufferClass::Tiny);
        pool.adjust(1);
        assert!(pool.acquire(key(1)));
        assert!(!pool.acquire(key(2)));
        assert_eq!(pool.adjust(3), vec![key(2)]);
        assert_eq!(pool.stats().credits, 1);
        pool.check(2).unwrap();
    }

    #[test]
    fn routes_are_checked_and_kept_unique() {
        let tcp1 = Net::new(LndType::SOCK, 1);
        let gateway: Nid = "10.0.0.9@tcp".parse().unwrap();
        let good = RouteConfig { net: tcp1, gateway, hops: Some(1), priority: 0 };
        assert_eq!(Routes::validate(&good), Ok(()));
        for bad in [
            RouteConfig { hops: Some(0), ..good },
            RouteConfig { hops: Some(256), ..good },
            RouteConfig { net: gateway.net(), ..good },
            RouteConfig { gateway: Nid::LO_0, ..good },
            RouteConfig { net: Net::new(LndType::LO, 0), ..good },
        ] {
            assert_eq!(Routes::validate(&bad), Err(RouteError::Invalid), "{bad:?}");
        }
        let mut routes = Routes::new(1);
        routes.insert(&good, true, |_| false).unwrap();
        assert_eq!(routes.insert(&good, true, |nid| nid == gateway), Err(RouteError::Exists));
        assert!(routes.reaches(tcp1));
        assert_eq!(routes.remove(Some(tcp1), |nid| nid == gateway), 1);
        assert!(routes.is_empty());
    }
}
