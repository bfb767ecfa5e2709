//! The partition audit (tests only): which message-path calls reached state that another
//! partition owns.
//!
//! Splitting the engine's lock by partition (docs/decisions/0029) needs every message-path
//! call to touch only the partitioned state of its own partition (the kernel's
//! `lnet_net_lock(cpt)` / `lnet_res_lock(cpt)` discipline), or to know beforehand which others
//! it needs. The partitioned structures (MDs, MEs, messages, tracker heaps) note each
//! partition they are reached in by key; a call that named its partition
//! (`Engine::enter_partition`) and reached another's is recorded as a crossing, with the
//! place it entered the engine. Calls that name no partition (timers, configuration) are
//! node-wide, as the kernel's `LNET_LOCK_EX` ones, and are not audited.

use std::panic::Location;

/// A message-path call that reached another partition's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Crossing {
    /// Where the call entered the engine.
    pub(crate) call: &'static Location<'static>,
    /// The partition it ran on.
    pub(crate) cpt: u32,
    /// Every partition it reached, one bit each.
    pub(crate) touched: u64,
}

/// The current call and the crossings found so far.
#[derive(Debug, Default)]
pub(crate) struct PartitionAudit {
    call: Option<&'static Location<'static>>,
    /// The call named its partition: it is on the message path.
    entered: bool,
    crossings: Vec<Crossing>,
}

impl PartitionAudit {
    /// A call ends, having reached `touched` on partition `cpt`.
    pub(crate) fn close(&mut self, cpt: u32, touched: u64) {
        let own = 1u64 << cpt.min(63);
        if let Some(call) = self.call.take().filter(|_| self.entered) {
            if touched & !own != 0 {
                self.crossings.push(Crossing { call, cpt, touched });
            }
        }
        self.entered = false;
    }

    /// A call starts at `call`.
    pub(crate) fn open(&mut self, call: &'static Location<'static>) {
        self.call = Some(call);
    }

    /// The call named its partition.
    pub(crate) fn enter(&mut self) {
        self.entered = true;
    }

    pub(crate) fn take(&mut self) -> Vec<Crossing> {
        std::mem::take(&mut self.crossings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_entered_calls_that_reach_elsewhere_are_crossings() {
        let mut audit = PartitionAudit::default();
        let here = Location::caller();
        audit.open(here);
        audit.close(1, 0b111);
        assert!(audit.take().is_empty(), "a call that named no partition is node-wide");
        audit.open(here);
        audit.enter();
        audit.close(1, 0b010);
        assert!(audit.take().is_empty(), "its own partition only");
        audit.open(here);
        audit.enter();
        audit.close(1, 0b011);
        assert_eq!(audit.take(), [Crossing { call: here, cpt: 1, touched: 0b011 }]);
    }
}
