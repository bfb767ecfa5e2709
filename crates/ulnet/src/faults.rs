//! Fault injection on a running node: what `lnetctl fault drop|delay add|del|reset|show`
//! reaches in the kernel. The rules live in the engine (`ulnet_proto::engine::faults`); these
//! calls change them with the core locked, at the current time, and carry out what a change
//! produced (deleting a delay rule lets what it held go on at once).
//!
//! lustre: lnet/lnet/net_fault.c `lnet_fault_ctl()`, api-ni.c `lnet_fault_cmd()`.

use ulnet_proto::addr::Nid;
use ulnet_proto::engine::{DelayRule, DropRule, FaultRuleError, FaultStats};

use crate::admin::AdminError;
use crate::calls::api_calls;
use crate::error::ShutDown;
use crate::node::Node;

api_calls! {
    /// `lnetctl fault drop add`: a drop rule, first in the list.
    fn fault_drop_add(&mut self, rule: DropRule) -> Result<(), AdminError<FaultRuleError>> {
        let now = self.exclusive_now();
        self.core().engine.fault_drop_add(now, rule).map_err(AdminError::Refused)
    }
    shut_down => Err(AdminError::ShutDown);

    /// `lnetctl fault drop del`: removes the drop rules with this source and destination
    /// (`Nid::ANY` for any); returns how many went.
    fn fault_drop_del(&mut self, source: Nid, destination: Nid) -> Result<usize, ShutDown> {
        Ok(self.core().engine.fault_drop_del(source, destination))
    }
    shut_down => Err(ShutDown);

    /// `lnetctl fault drop reset`: zeroes every drop rule's counters.
    fn fault_drop_reset(&mut self) -> Result<(), ShutDown> {
        let now = self.exclusive_now();
        self.core().engine.fault_drop_reset(now);
        Ok(())
    }
    shut_down => Err(ShutDown);

    /// `lnetctl fault delay add`: a delay rule, first in the list.
    fn fault_delay_add(&mut self, rule: DelayRule) -> Result<(), AdminError<FaultRuleError>> {
        let now = self.exclusive_now();
        self.core().engine.fault_delay_add(now, rule).map_err(AdminError::Refused)
    }
    shut_down => Err(AdminError::ShutDown);

    /// `lnetctl fault delay del`: removes delay rules as
    /// [`fault_drop_del`](Self::fault_drop_del) does; what they held goes on at once.
    fn fault_delay_del(&mut self, source: Nid, destination: Nid) -> Result<usize, ShutDown> {
        let now = self.exclusive_now();
        Ok(self.core().engine.fault_delay_del(now, source, destination))
    }
    shut_down => Err(ShutDown);

    /// `lnetctl fault delay reset`: zeroes every delay rule's counters.
    fn fault_delay_reset(&mut self) -> Result<(), ShutDown> {
        let now = self.exclusive_now();
        self.core().engine.fault_delay_reset(now);
        Ok(())
    }
    shut_down => Err(ShutDown);
}

impl Node {
    /// `lnetctl fault drop show`: the drop rules, newest first, with their counters.
    pub fn fault_drop_rules(&self) -> Vec<(DropRule, FaultStats)> {
        self.locked(|core, _| core.engine.fault_drop_rules().collect())
    }

    /// `lnetctl fault delay show`: the delay rules, newest first, with their counters.
    pub fn fault_delay_rules(&self) -> Vec<(DelayRule, FaultStats)> {
        self.locked(|core, _| core.engine.fault_delay_rules().collect())
    }
}
