//! `fault drop|delay add|del|reset|show` over the live node: the kernel's part of lnetctl's
//! fault commands (api-ni.c `lnet_fault_cmd()`, `lnet_fault_show_dump()`).
//!
//! The rules live in the running node's engine. As in the kernel, where they go away with
//! LNet (`lnet_fault_fini()` at `lnet unconfigure`), they do not outlive the node: a rebuild
//! (see the module documentation of `live`) starts without rules.

use ulnet::{AdminError, DelayRule, DropRule, FaultMatch, FaultStats, Nid, ShutDown};
use ulnet_control::message::{Fault, FaultKind, FaultOp, FaultRuleEntry, FaultRuleSpec, errno};
use ulnet_control::{ControlError, Response};

use super::LiveNode;

impl LiveNode {
    pub(super) fn fault(&self, fault: &Fault) -> Result<Response, ControlError> {
        let node = self.running_node()?;
        let shut_down = |ShutDown| ControlError::NotConfigured;
        match (&fault.op, fault.kind) {
            (FaultOp::Add(spec), kind) => {
                let matching = fault_match(spec)?;
                let added = match kind {
                    FaultKind::Drop => node.fault_drop_add(DropRule {
                        matching,
                        rate: spec.rate,
                        interval: spec.interval,
                        health_mask: spec.health_error_mask,
                        random: spec.random,
                        drop_all: spec.drop_all,
                    }),
                    FaultKind::Delay => node.fault_delay_add(DelayRule {
                        matching,
                        rate: spec.rate,
                        interval: spec.interval,
                        latency: spec.latency,
                    }),
                };
                match added {
                    Ok(()) => Ok(Response::Done),
                    Err(AdminError::ShutDown) => Err(ControlError::NotConfigured),
                    // The kernel sets no extended ACK message here: lnetctl prints libnl's
                    // text for the errno.
                    Err(AdminError::Refused(error)) => {
                        tracing::debug!(%error, "fault rule refused");
                        Err(ControlError::refused(errno::EINVAL, ""))
                    }
                }
            }
            (FaultOp::Del { source, destination }, kind) => {
                let (source, destination) = (nid(source)?, nid(destination)?);
                let removed = match kind {
                    FaultKind::Drop => node.fault_drop_del(source, destination),
                    FaultKind::Delay => node.fault_delay_del(source, destination),
                }
                .map_err(shut_down)?;
                // lustre: api-ni.c lnet_fault_cmd(): nothing removed is -ENOENT.
                if removed == 0 {
                    return Err(ControlError::refused(errno::ENOENT, ""));
                }
                Ok(Response::Done)
            }
            (FaultOp::Reset, FaultKind::Drop) => {
                node.fault_drop_reset().map_err(shut_down)?;
                Ok(Response::Done)
            }
            (FaultOp::Reset, FaultKind::Delay) => {
                node.fault_delay_reset().map_err(shut_down)?;
                Ok(Response::Done)
            }
            (FaultOp::Show, FaultKind::Drop) => {
                let rules = node.fault_drop_rules().into_iter().map(|(rule, stats)| {
                    entry(FaultKind::Drop, &rule.matching, rule.rate, rule.interval, 0, &stats)
                });
                Ok(Response::Faults(rules.collect()))
            }
            (FaultOp::Show, FaultKind::Delay) => {
                let rules = node.fault_delay_rules().into_iter().map(|(rule, stats)| {
                    let (rate, interval, latency) = (rule.rate, rule.interval, rule.latency);
                    entry(FaultKind::Delay, &rule.matching, rate, interval, latency, &stats)
                });
                Ok(Response::Faults(rules.collect()))
            }
        }
    }
}

fn fault_match(spec: &FaultRuleSpec) -> Result<FaultMatch, ControlError> {
    Ok(FaultMatch {
        source: nid(&spec.source)?,
        destination: nid(&spec.destination)?,
        local_nid: nid(&spec.local_nid)?,
        portal_mask: spec.portal_mask,
        message_mask: spec.message_mask,
    })
}

/// A NID as lnetctl sends it: `<?>` (or nothing) is any NID.
/// lustre: api-ni.c `nla_strnid()`.
fn nid(text: &str) -> Result<Nid, ControlError> {
    let text = text.trim();
    if text.is_empty() || text == "<?>" || text == "*" {
        return Ok(Nid::ANY);
    }
    text.parse::<Nid>()
        .map_err(|_| ControlError::refused(errno::EINVAL, format!("cannot parse NID '{text}'")))
}

fn entry(
    kind: FaultKind,
    matching: &FaultMatch,
    rate: u32,
    interval: u32,
    latency: u32,
    stats: &FaultStats,
) -> FaultRuleEntry {
    FaultRuleEntry {
        kind,
        source: matching.source.to_string(),
        destination: matching.destination.to_string(),
        portal_mask: matching.portal_mask,
        message_mask: matching.message_mask,
        rate,
        interval,
        latency,
        hits: stats.hits,
        count: stats.count,
        put: stats.put,
        ack: stats.ack,
        get: stats.get,
        reply: stats.reply,
    }
}
