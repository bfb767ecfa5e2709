//! `udsp add|del|show` over the live node, and the `udsp:` items of `import` and of the
//! configuration file: the kernel's part of lnetctl's UDSP commands (api-ni.c
//! `IOC_LIBCFS_ADD_UDSP`, `IOC_LIBCFS_DEL_UDSP`, `IOC_LIBCFS_GET_UDSP`).
//!
//! The rules live in the running node's engine, which applies them. The kernel keeps them
//! while LNet runs and drops them when it goes down (`lnet_udsp_destroy()` at shutdown): so
//! does `lnet unconfigure` here. A rebuild of the node (see the module documentation of
//! `live`) is not something the kernel does: the rules of the old node are read before it
//! stops and added to the new one in order, so they apply to the new node as a full
//! application would ([`node_rules`], [`restore_rules`]).

use ulnet::{AdminError, Node, UdspAddError, UdspNotFound, UdspRule};
use ulnet_config::model::UdspConfig;
use ulnet_config::render;
use ulnet_control::message::{Udsp, UdspAdd, errno};
use ulnet_control::{ControlError, Response};

use super::LiveNode;

impl LiveNode {
    pub(super) fn udsp(&self, request: &Udsp) -> Result<Response, ControlError> {
        let node = self.running_node()?;
        match request {
            Udsp::Add(add) => {
                let rule = rule_of(add)?;
                let index = add.idx.map(|idx| usize::try_from(idx).unwrap_or(usize::MAX));
                add_rule(&node, rule, index)?;
                Ok(Response::Done)
            }
            Udsp::Del { idx } => {
                let index = idx.map(|idx| usize::try_from(idx).unwrap_or(usize::MAX));
                delete_rule(&node, index)?;
                Ok(Response::Done)
            }
            Udsp::Show { idx } => Ok(Response::Udsp(shown_rules(&node, *idx))),
        }
    }

    /// The `udsp:` items of an import (`--add`): each rule added in order (checked first by
    /// [`check_udsp_items`]). lustre: lnetctl.c `handle_udsp_sequences()`.
    pub(super) fn import_udsp(&self, items: &[UdspConfig]) -> Result<(), ControlError> {
        let rules = check_udsp_items(items)?;
        let node = self.running_node()?;
        for (rule, index) in rules {
            add_rule(&node, rule, Some(index))?;
        }
        Ok(())
    }

    /// The configuration file's rules (checked when it was read), in order.
    pub fn add_udsp_rules(&self, rules: &[(UdspRule, usize)]) -> Result<(), ControlError> {
        let node = self.running_node()?;
        for (rule, index) in rules {
            add_rule(&node, rule.clone(), Some(*index))?;
        }
        Ok(())
    }

    /// `import --del` of `udsp:` items: the rule at each `idx`, in order.
    pub(super) fn import_del_udsp(&self, items: &[UdspConfig]) -> Result<(), ControlError> {
        let node = self.running_node()?;
        for item in items {
            let index = usize::try_from(item.idx)
                .map_err(|_| ControlError::refused(errno::EINVAL, "negative udsp idx"))?;
            delete_rule(&node, Some(index))?;
        }
        Ok(())
    }
}

/// The rules `udsp:` items add, with their indexes: refused as a whole if one item is not a
/// rule, before anything is applied.
pub(super) fn check_udsp_items(
    items: &[UdspConfig],
) -> Result<Vec<(UdspRule, usize)>, ControlError> {
    items.iter().map(|item| item.rule().map_err(|error| item_error(item, &error))).collect()
}

/// The rules as `udsp show` lists them: all, or the one at `idx`.
pub(super) fn shown_rules(node: &Node, idx: Option<u32>) -> Vec<ulnet_control::data::UdspEntry> {
    let rules = node.udsp_rules();
    let wanted = |at: usize| idx.is_none_or(|idx| usize::try_from(idx).is_ok_and(|idx| idx == at));
    let shown = rules.iter().enumerate().filter(|(at, _)| wanted(*at));
    shown.map(|(at, rule)| render::UdspEntry::new(at, rule).into()).collect()
}

/// Adds `rules` to a new node, in order. A refusal (which a node built from a valid
/// configuration cannot give) is logged and the rule left out.
pub(super) fn restore_rules(node: &Node, rules: &[UdspRule]) {
    for rule in rules {
        if let Err(error) = add_rule(node, rule.clone(), None) {
            tracing::warn!(%rule, %error, "udsp rule not restored");
        }
    }
}

/// The rule an `udsp add` request names, parsed as lnetctl parsed it before sending it.
fn rule_of(add: &UdspAdd) -> Result<UdspRule, ControlError> {
    let (src, dst, rte) = (add.src.as_deref(), add.dst.as_deref(), add.rte.as_deref());
    UdspRule::from_lnetctl(src, dst, rte, add.priority)
        .map_err(|error| ControlError::refused(errno::EINVAL, error.to_string()))
}

fn add_rule(node: &Node, rule: UdspRule, index: Option<usize>) -> Result<(), ControlError> {
    let kind = rule.kind();
    let shown = rule.to_string();
    match node.udsp_add(rule, index) {
        Ok(at) => {
            // lustre: the kernel accepts such a rule and logs why it never applies it.
            if let ulnet::UdspRuleKind::Inert(why) = kind {
                tracing::warn!(index = at, rule = %shown, "udsp rule kept but never applied: {why}");
            }
            Ok(())
        }
        Err(AdminError::ShutDown) => Err(ControlError::NotConfigured),
        Err(AdminError::Refused(UdspAddError::Exists)) => {
            Err(ControlError::refused(errno::EALREADY, format!("udsp rule '{shown}' exists")))
        }
        Err(AdminError::Refused(error @ UdspAddError::TooMany)) => {
            Err(ControlError::refused(errno::ENOSPC, error.to_string()))
        }
    }
}

fn delete_rule(node: &Node, index: Option<usize>) -> Result<(), ControlError> {
    match node.udsp_del(index) {
        Ok(()) => Ok(()),
        Err(AdminError::ShutDown) => Err(ControlError::NotConfigured),
        Err(AdminError::Refused(UdspNotFound(at))) => {
            Err(ControlError::refused(errno::ENOENT, format!("no udsp rule at index {at}")))
        }
    }
}

fn item_error(item: &UdspConfig, error: &ulnet_config::model::UdspItemError) -> ControlError {
    ControlError::refused(errno::EINVAL, format!("udsp idx {}: {error}", item.idx))
}
