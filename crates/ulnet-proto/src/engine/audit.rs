//! The partition audit (tests only): which message-path calls reached state that another
//! partition owns.
//!
//! Splitting the engine's lock by partition (docs/decisions/0029) needs every message-path
//! call to reach only the partitioned state of the partitions its lock plan names
//! (`plan.rs`, the kernel's `lnet_net_lock(cpt)` / `lnet_res_lock(cpt)` discipline). The
//! partitioned structures (MDs, MEs, messages, tracker heaps) note each partition they are
//! reached in by key; the peer NIs note their owner's partition when read or changed, the
//! NIs' credit pools and traffic counts and the portals' match tables the partition owning
//! what changed, and node-wide state (a peer, an NI's
//! health, a portal's rotor or delayed list) notes every partition when changed. A call that
//! named its partition (`Engine::enter_partition`) and reached one its plan did not name is
//! recorded as a crossing, with the place it entered the engine, and the test harness fails
//! on it. Taking a transmit or a resumed receive out of the
//! outputs counts as a call on that message's partition, as a runtime with a lock per
//! partition would drain each partition's outputs under its own lock. Calls that name no
//! partition (timers, configuration) and calls planned on the whole node are node-wide, as
//! the kernel's `LNET_LOCK_EX` ones, and are not checked.

use std::panic::Location;

use crate::engine::plan::CallScope;

/// A message-path call that reached another partition's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Crossing {
    /// Where the call entered the engine.
    pub(crate) call: &'static Location<'static>,
    /// The partition it ran on.
    pub(crate) cpt: u32,
    /// Every partition it reached, one bit each.
    pub(crate) touched: u64,
    /// The partitions its plan named.
    pub(crate) planned: u64,
    /// What of the node part it changed, if it did.
    pub(crate) node: Option<&'static str>,
}

/// A call whose plan settled from its own partition (first) differs from the whole
/// engine's (second).
pub(crate) type Unsettled = (&'static Location<'static>, CallScope, CallScope);

/// What the audit found since it was last read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct AuditReport {
    /// Calls that reached a partition their plan did not name.
    pub(crate) crossings: Vec<Crossing>,
    /// Message-path calls planned on one partition, on several, and on the whole node.
    pub(crate) plans: [u64; 3],
    /// Calls whose plan, settled from their own partition as a runtime locking partitions
    /// apart settles it (`View::settle_plan`), differed from the plan of the whole engine:
    /// where, the settled plan and the whole one.
    pub(crate) unsettled: Vec<Unsettled>,
    /// Calls made through `&self` on the partitions their plan named (`partition_call.rs`).
    pub(crate) made_on_partitions: u64,
}

/// The current call and what the audit found so far.
#[derive(Debug, Default)]
pub(crate) struct PartitionAudit {
    call: Option<&'static Location<'static>>,
    /// The call named its partition: it is on the message path.
    entered: bool,
    /// The partitions its plan gave it, one bit each (its own when it has no plan); `None`
    /// for a plan of the whole node.
    planned: Option<u64>,
    /// What of the node part the call reached to change (`View::on_node`), if anything:
    /// the whole node's.
    node_reached: Option<&'static str>,
    report: AuditReport,
}

impl PartitionAudit {
    /// A call ends, having reached `touched` on partition `cpt`.
    pub(crate) fn close(&mut self, cpt: u32, touched: u64) {
        let node = self.node_reached.take();
        let touched = if node.is_some() { u64::MAX } else { touched };
        if let Some(call) = self.call.take().filter(|_| self.entered) {
            if let Some(planned) = self.planned.filter(|planned| touched & !planned != 0) {
                self.report.crossings.push(Crossing { call, cpt, touched, planned, node });
            }
            let width = match self.planned {
                Some(planned) if planned.count_ones() <= 1 => 0,
                Some(_) => 1,
                None => 2,
            };
            if let Some(count) = self.report.plans.get_mut(width) {
                *count += 1;
            }
        }
        self.entered = false;
    }

    /// The call reached what changes the node part.
    pub(crate) fn reach_node(&mut self, what: &'static str) {
        self.node_reached.get_or_insert(what);
    }

    /// A call starts at `call`.
    pub(crate) fn open(&mut self, call: &'static Location<'static>) {
        self.call = Some(call);
    }

    /// The call named its partition, `cpt`: until it shows a plan, that is all it may reach.
    pub(crate) fn enter(&mut self, cpt: u32) {
        self.entered = true;
        self.planned = Some(1 << cpt.min(63));
    }

    /// The call's plan as the whole engine makes it, and as a call holding its own partition
    /// settles it: they must agree.
    pub(crate) fn plan_settled(&mut self, scope: CallScope, settled: CallScope) {
        if scope != settled {
            if let Some(call) = self.call {
                self.report.unsettled.push((call, settled, scope));
            }
        }
        self.plan(scope);
    }

    /// The call's plan: what it may reach.
    pub(crate) fn plan(&mut self, scope: CallScope) {
        self.planned = match scope {
            CallScope::Partitions(mask) => Some(mask),
            CallScope::Node => None,
        };
    }

    /// The current call, if it is on the message path, was made on the partitions its plan
    /// named.
    pub(crate) fn made_on_partitions(&mut self) {
        if self.call.is_some() && self.entered {
            self.report.made_on_partitions += 1;
        }
    }

    pub(crate) fn unsettled(&self) -> &[Unsettled] {
        &self.report.unsettled
    }

    pub(crate) fn crossings(&self) -> &[Crossing] {
        &self.report.crossings
    }

    pub(crate) fn take(&mut self) -> AuditReport {
        std::mem::take(&mut self.report)
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
        assert_eq!(audit.take(), AuditReport::default(), "a call naming no partition is node-wide");
        audit.open(here);
        audit.enter(1);
        audit.close(1, 0b010);
        assert_eq!(
            audit.take(),
            AuditReport {
                crossings: vec![],
                plans: [1, 0, 0],
                unsettled: vec![],
                made_on_partitions: 0
            }
        );
        audit.open(here);
        audit.enter(1);
        audit.close(1, 0b011);
        let crossing = Crossing { call: here, cpt: 1, touched: 0b011, planned: 0b010, node: None };
        assert_eq!(
            audit.take(),
            AuditReport {
                crossings: vec![crossing],
                plans: [1, 0, 0],
                unsettled: vec![],
                made_on_partitions: 0
            }
        );
        audit.open(here);
        audit.enter(1);
        audit.plan(CallScope::Partitions(0b011));
        audit.close(1, 0b011);
        assert_eq!(
            audit.take(),
            AuditReport {
                crossings: vec![],
                plans: [0, 1, 0],
                unsettled: vec![],
                made_on_partitions: 0
            }
        );
        audit.open(here);
        audit.enter(1);
        audit.plan(CallScope::Node);
        audit.close(1, 0b111);
        assert_eq!(
            audit.take(),
            AuditReport {
                crossings: vec![],
                plans: [0, 0, 1],
                unsettled: vec![],
                made_on_partitions: 0
            }
        );
        // A call planned on partitions that changed the node part reached every partition.
        audit.open(here);
        audit.enter(1);
        audit.reach_node("a peer");
        audit.close(1, 0b010);
        let crossing = Crossing {
            call: here,
            cpt: 1,
            touched: u64::MAX,
            planned: 0b010,
            node: Some("a peer"),
        };
        assert_eq!(
            audit.take(),
            AuditReport {
                crossings: vec![crossing],
                plans: [1, 0, 0],
                unsettled: vec![],
                made_on_partitions: 0
            }
        );
        audit.open(here);
        audit.enter(1);
        audit.plan(CallScope::Node);
        audit.reach_node("a peer");
        audit.close(1, 0b010);
        assert_eq!(
            audit.take(),
            AuditReport {
                crossings: vec![],
                plans: [0, 0, 1],
                unsettled: vec![],
                made_on_partitions: 0
            }
        );
    }
}
