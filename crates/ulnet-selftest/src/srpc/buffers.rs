//! A service's request buffers by CPU partition (lnet_selftest's per-CPT service data,
//! `srpc_service_cd`): what each partition has posted and owns, the requests its buffers took,
//! and when it grows. A test service has one share per partition of the node, each posted in
//! that partition's match table of the request portal (`LNET_INS_LOCAL`), so a request is
//! taken by a buffer of the partition that received it; a framework service has one share,
//! posted with `LNET_INS_AFTER`, as the kernel's.
//!
//! lustre: lnet/selftest/rpc.c `srpc_service_init()` (`sv_ncpts`), `srpc_service_add_buffers()`,
//! `srpc_add_buffer()`, `srpc_service_post_buffer()`, `srpc_lnet_ev_handler()` (`scd_buf_low`,
//! `scd_buf_adjust`).

/// One partition's share of a service's request buffers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PartitionBuffers {
    /// Buffers posted and not yet taken by a request (`scd_buf_nposted`).
    pub posted: usize,
    /// Buffers this partition owns: posted, or held by a request in progress
    /// (`scd_buf_total`).
    pub total: usize,
    /// Requests its buffers took.
    pub received: u64,
}

/// The request buffers of one service, by partition.
#[derive(Debug)]
pub(super) struct ServiceBuffers {
    parts: Vec<PartitionBuffers>,
    /// The most buffers the service owns over all its partitions together (decision 0015:
    /// what peers can make the node hold does not grow with the partition count).
    max: usize,
}

/// The fewest buffers a growing partition adds (`SFW_TEST_WI_MIN`'s role in
/// `srpc_lnet_ev_handler()`).
const GROWTH_MIN: usize = 16;

impl ServiceBuffers {
    /// A service with `partitions` shares (at least one) under a bound of `max` in all.
    pub(super) fn new(partitions: usize, max: usize) -> Self {
        Self { parts: vec![PartitionBuffers::default(); partitions.max(1)], max }
    }

    /// How many of `wanted` buffers each partition starts with: all of them
    /// (`srpc_service_add_buffers()` posts its count on every partition) unless the partitions
    /// together would pass the service's bound.
    pub(super) fn initial(&self, wanted: usize) -> usize {
        wanted.min(self.max / self.parts.len())
    }

    fn part(&mut self, cpt: usize) -> Option<&mut PartitionBuffers> {
        self.parts.get_mut(cpt)
    }

    /// Partition `cpt` posts a buffer (counted before the post is made).
    pub(super) fn posting(&mut self, cpt: usize) {
        if let Some(part) = self.part(cpt) {
            part.posted += 1;
            part.total += 1;
        }
    }

    /// A buffer counted by [`Self::posting`] could not be posted.
    pub(super) fn post_failed(&mut self, cpt: usize) {
        if let Some(part) = self.part(cpt) {
            part.posted = part.posted.saturating_sub(1);
            part.total = part.total.saturating_sub(1);
        }
    }

    /// A buffer of partition `cpt` left the portal: a request took it (`received`), or it was
    /// unlinked.
    pub(super) fn taken(&mut self, cpt: usize, received: bool) {
        if let Some(part) = self.part(cpt) {
            part.posted = part.posted.saturating_sub(1);
            if received {
                part.received += 1;
            }
        }
    }

    /// A buffer of partition `cpt` is free again (its request is handled).
    pub(super) fn released(&mut self, cpt: usize) {
        if let Some(part) = self.part(cpt) {
            part.total = part.total.saturating_sub(1);
        }
    }

    /// How many buffers partition `cpt` adds now: when its posted buffers fall below a
    /// quarter of what it owns (at least 2), half of that (at least [`GROWTH_MIN`]), within
    /// what the service's bound leaves.
    pub(super) fn growth(&self, cpt: usize) -> usize {
        let Some(part) = self.parts.get(cpt) else { return 0 };
        if part.posted >= (part.total / 4).max(2) {
            return 0;
        }
        let owned: usize = self.parts.iter().map(|part| part.total).sum();
        (part.total / 2).max(GROWTH_MIN).min(self.max.saturating_sub(owned))
    }

    pub(super) fn snapshot(&self) -> Vec<PartitionBuffers> {
        self.parts.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_share_the_bound_and_grow_apart() {
        let mut buffers = ServiceBuffers::new(2, 100);
        assert_eq!(buffers.initial(256), 50);
        assert_eq!(ServiceBuffers::new(1, 2048).initial(256), 256);
        for cpt in [0, 1] {
            for _ in 0..4 {
                buffers.posting(cpt);
            }
        }
        // Partition 0 runs low (1 posted of 4 owned): it grows, partition 1 does not.
        for _ in 0..3 {
            buffers.taken(0, true);
        }
        assert_eq!((buffers.growth(0), buffers.growth(1)), (GROWTH_MIN, 0));
        buffers.released(0);
        buffers.taken(1, false);
        let parts = buffers.snapshot();
        assert_eq!(parts[0], PartitionBuffers { posted: 1, total: 3, received: 3 });
        assert_eq!(parts[1], PartitionBuffers { posted: 3, total: 4, received: 0 });
        // Near the bound, growth is what is left of it.
        let mut full = ServiceBuffers::new(2, 10);
        for _ in 0..9 {
            full.posting(1);
        }
        assert_eq!(full.growth(0), 1);
        full.post_failed(1);
        assert_eq!(full.growth(0), 2);
        assert_eq!(full.growth(7), 0);
    }
}
