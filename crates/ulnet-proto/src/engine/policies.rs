//! User Defined Selection Policies (UDSP): the rules `lnetctl udsp add` installs
//! ([`UdspRules`], a part of the engine) and how they are stamped onto local nets and NIs,
//! peer nets and peer NIs, whose priorities and preferred lists path selection
//! (`select.rs`) reads. Rules are never evaluated per message.
//!
//! What a rule does, by its criteria (the kernel's `lnet_udsp_apply_single_policy()`):
//!
//! | rule | stamps |
//! |---|---|
//! | `--src NET` | the matching local nets' priority (`net_sel_priority`) |
//! | `--src NIDS` | the matching local NIs' priority (`ni_sel_priority`) |
//! | `--dst NET` | the matching peer nets' priority (`lpn_sel_priority`) |
//! | `--dst NIDS` | the matching peer NIs' priority (`lpni_sel_priority`) |
//! | `--src NIDS --dst D` | each peer NI matching D: its preferred local NIDs (`lpni_pref`) become the local NIs matching the source |
//! | `--dst D --rte NIDS` | each peer NI matching D: its preferred routers (`lpni_rtr_pref_nids`) become the primary NIDs of the route gateways matching the router criteria |
//!
//! Priorities: 0 is the highest; untouched constructs keep [`MAX_SELECTION_PRIORITY`].
//! Health always outranks them (select.rs compares it first).
//!
//! When rules are applied, exactly as the kernel does:
//! * after every addition, all rules, from the last to the first, so the rule at index 0
//!   wins where several touch one construct (`lnet_udsp_apply_policies(NULL, false)`);
//! * on a new local net and its NIs (`net add`): the source priority rules only
//!   (`lnet_udsp_apply_policies_on_net()`, `_on_ni()`);
//! * on a peer NI attached to a peer (created, or moved by discovery or configuration), and
//!   on the peer net it creates: the destination rules (`lnet_peer_attach_peer_ni()`). Here a
//!   peer NI is matched by its NID only: a preferred-list rule whose destination is a net
//!   (`--dst tcp`) reaches the peer NIs that exist when a rule is added, not later ones, as
//!   in the kernel (`udi_lpn` is unset on that path);
//! * deleting a rule reverts what it matches, and only that: priorities go back to
//!   [`MAX_SELECTION_PRIORITY`] and the lists it fills are cleared, even where another rule
//!   also matches; the other rules are not applied again until the next addition.
//!
//! Kept from the kernel: a source given as a net (`--src tcp --dst ...`) adds no preferred
//! NID (local NIs are matched by NID, `cfs_match_nid_net()`); a non-multi-rail peer NI takes
//! one preferred NID only (`lnet_peer_add_pref_nid()`'s `-EPERM`); rules the kernel stores
//! but never applies (a priority on a `--src --dst` or `--dst --rte` rule, `--rte` alone) are
//! kept and shown ([`UdspRuleKind::Inert`]).
//!
//! Router rules match the primary NIDs of the route table's gateways
//! (`Engine::route_gateways`); route choice (`routing.rs`) prefers a gateway on the
//! destination peer NI's list before comparing route priorities (`Engine::prefers_router`).
//! As in the kernel, adding a route applies no rule: the next `udsp add`, or a new peer NI,
//! does.
//!
//! lustre: lnet/lnet/udsp.c (`lnet_udsp_add_policy()`, `lnet_udsp_del_policy()`,
//! `lnet_udsp_apply_policies()`, `lnet_udsp_apply_rule_on_ni()`, `_on_nis()`,
//! `_prio_rule_on_net()`, `_rule_on_lpn()`, `_rule_on_lpnis()`, `_rule_on_lpni()`,
//! `lnet_udsp_apply_ni_list()`, `lnet_udsp_apply_rte_list_on_lpni()`,
//! `lnet_udsp_get_construct_info()`), peer.c (`lnet_peer_add_pref_nid()`,
//! `lnet_peer_clr_pref_nids()`, `lnet_peer_add_pref_rtr()`, `lnet_peer_clr_pref_rtrs()`,
//! `lnet_peer_ni_set_non_mr_pref_nid()`), lnet/utils/lnetconfig/liblnetconfig_udsp.c
//! (`lustre_lnet_add_udsp()`: what lnetctl checks before sending a rule).

use crate::engine::node_part::NodePart;
use crate::engine::view::{Access, Exclusive, Flow, NodeAccess, View};
use std::fmt;

use crate::addr::{DescriptorParseError, Net, Nid, NidDescriptor};
use crate::engine::ni::{MAX_SELECTION_PRIORITY, Nis};
use crate::engine::node::Engine;
use crate::engine::peer::{PeerId, PeerNiId, PeerNis, PeerTable};
use crate::engine::shares::Shares;

/// Most rules a node keeps. The kernel has no limit; every addition applies every rule to
/// every construct, so a bound keeps that work in check. Real configurations use a handful.
pub const MAX_UDSP_RULES: usize = 128;

/// Most NIDs of one preferred list `udsp info` shows (`LNET_MAX_SHOW_NUM_NID`,
/// include/uapi/linux/lnet/lnet-dlc.h).
pub const MAX_SHOWN_PREFERRED: usize = 128;

/// What a rule does (`enum lnet_udsp_action_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UdspAction {
    /// `EN_LNET_UDSP_ACTION_PRIORITY`: stamp this priority (0 is the highest).
    Priority(u32),
    /// `EN_LNET_UDSP_ACTION_PREFERRED_LIST`: fill preferred lists.
    Preferred,
}

/// One rule (`struct lnet_udsp`): up to three criteria and an action.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UdspRule {
    pub src: Option<NidDescriptor>,
    pub dst: Option<NidDescriptor>,
    pub rte: Option<NidDescriptor>,
    pub action: UdspAction,
}

/// How the kernel reads a rule (`lnet_udsp_apply_single_policy()`'s branches).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UdspRuleKind {
    /// `--src`: local net or NI priorities.
    LocalPriority,
    /// `--dst`: peer net or peer NI priorities.
    PeerPriority,
    /// `--src --dst` (a "NID pair"): preferred local NIDs of peer NIs.
    PreferredSources,
    /// `--dst --rte`: preferred routers of peer NIs.
    PreferredRouters,
    /// Stored and shown, never applied; the reason is the kernel's console message.
    Inert(&'static str),
}

/// Why lnetctl refuses to send a rule (`lustre_lnet_add_udsp()`); the texts are its.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UdspSpecError {
    #[error("Missing required argument(s)")]
    Missing,
    #[error("The combination of src, dst and rte is not supported")]
    AllThree,
    #[error("src and rte cannot be combined")]
    SourceAndRouter,
    #[error("failed to parse src parameter")]
    Source(DescriptorParseError),
    #[error("failed to parse dst parameter")]
    Destination(DescriptorParseError),
    #[error("failed to parse rte parameter")]
    Router(DescriptorParseError),
}

/// Why the node refuses a rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UdspAddError {
    /// `-EALREADY`: a rule with the same criteria exists (and is not a priority rule whose
    /// priority this one would change).
    #[error("an equal rule exists")]
    Exists,
    /// Beyond [`MAX_UDSP_RULES`] (ulnet's bound).
    #[error("more than {MAX_UDSP_RULES} rules")]
    TooMany,
}

/// `-ENOENT`: no rule at that index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("no rule at index {0}")]
pub struct UdspNotFound(pub u32);

/// What `udsp info` shows of one construct (`struct lnet_ioctl_construct_udsp_info`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UdspConstructInfo {
    /// The local net's or the peer net's priority.
    pub net_priority: u32,
    /// The NI's or the peer NI's priority.
    pub nid_priority: u32,
    /// A local NI: its net's preferred routers (no rule fills them); a peer NI: its own.
    pub preferred_gateways: Vec<Nid>,
    /// A peer NI's preferred local NIDs (rules, or the first NI a non-multi-rail peer was
    /// reached from); empty for a local NI.
    pub preferred_sources: Vec<Nid>,
}

/// A peer NI's preferred local NIDs (`lpni_pref`, `lpni_pref_nnids`) and whether the one it
/// holds was set by traffic to a non-multi-rail peer (`LNET_PEER_NI_NON_MR_PREF`). At most
/// one NID per local NI (duplicates are refused), so bounded by the NI table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct PreferredNids {
    nids: Vec<Nid>,
    from_traffic: bool,
}

/// The rules, in index order (`ln_udsp_list`; a rule's `udsp_idx` is its position).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UdspRules {
    rules: Vec<UdspRule>,
}

impl UdspRule {
    /// The rule lnetctl sends for these arguments, with its checks: the allowed
    /// combinations, the descriptors parsed, and the default action (a lone `--src` or
    /// `--dst` without a priority is a priority-0 rule, anything else without one a
    /// preferred-list rule). lustre: liblnetconfig_udsp.c `lustre_lnet_add_udsp()`,
    /// lnetctl.c `jt_add_udsp()`.
    pub fn from_lnetctl(
        src: Option<&str>,
        dst: Option<&str>,
        rte: Option<&str>,
        priority: Option<u32>,
    ) -> Result<Self, UdspSpecError> {
        match (src, dst, rte) {
            (None, None, None) => return Err(UdspSpecError::Missing),
            (Some(_), Some(_), Some(_)) => return Err(UdspSpecError::AllThree),
            (Some(_), _, Some(_)) => return Err(UdspSpecError::SourceAndRouter),
            _ => {}
        }
        let mut action = priority.map_or(UdspAction::Preferred, UdspAction::Priority);
        if rte.is_none() && src.is_some() != dst.is_some() && priority.is_none() {
            action = UdspAction::Priority(0);
        }
        Ok(Self {
            src: src.map(NidDescriptor::parse).transpose().map_err(UdspSpecError::Source)?,
            dst: dst.map(NidDescriptor::parse).transpose().map_err(UdspSpecError::Destination)?,
            rte: rte.map(NidDescriptor::parse).transpose().map_err(UdspSpecError::Router)?,
            action,
        })
    }

    /// How the kernel applies this rule. lustre: udsp.c `lnet_udsp_apply_single_policy()`.
    pub fn kind(&self) -> UdspRuleKind {
        let preferred = self.action == UdspAction::Preferred;
        match (&self.src, &self.dst, &self.rte) {
            (Some(_), Some(_), _) if preferred => UdspRuleKind::PreferredSources,
            (None, Some(_), Some(_)) if preferred => UdspRuleKind::PreferredRouters,
            (_, Some(_), Some(_)) | (Some(_), Some(_), None) => {
                UdspRuleKind::Inert("a preferred-list rule with a priority (\"Bad action type\")")
            }
            (None, Some(_), None) if !preferred => UdspRuleKind::PeerPriority,
            (Some(_), None, _) if !preferred => UdspRuleKind::LocalPriority,
            (_, Some(_), None) | (Some(_), None, _) => {
                UdspRuleKind::Inert("a priority rule without a priority (\"Bad action type\")")
            }
            (None, None, _) => {
                UdspRuleKind::Inert("no source or destination (\"Bad UDSP policy\")")
            }
        }
    }

    /// The priority it stamps, `None` for preferred-list rules.
    pub fn priority(&self) -> Option<u32> {
        match self.action {
            UdspAction::Priority(priority) => Some(priority),
            UdspAction::Preferred => None,
        }
    }

    /// Same criteria (`lnet_udsp_equal()`).
    fn same_criteria(&self, other: &Self) -> bool {
        self.src == other.src && self.dst == other.dst && self.rte == other.rte
    }
}

/// `src: ... dst: ... rte: ...` as `udsp show` names the criteria, for logs.
impl fmt::Display for UdspRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut separator = "";
        for (key, value) in [("src", &self.src), ("dst", &self.dst), ("rte", &self.rte)] {
            if let Some(value) = value {
                write!(f, "{separator}{key}: {value}")?;
                separator = " ";
            }
        }
        if let UdspAction::Priority(priority) = self.action {
            write!(f, "{separator}priority: {priority}")?;
        }
        Ok(())
    }
}

impl UdspRules {
    /// Inserts `rule` at `index` (appended when `None` or past the end), or, when a rule with
    /// the same criteria exists and both are priority rules, gives that rule the new priority
    /// instead. Returns the index of the rule added or changed.
    /// lustre: udsp.c `lnet_udsp_add_policy()`.
    pub fn add(&mut self, rule: UdspRule, index: Option<usize>) -> Result<usize, UdspAddError> {
        if let Some(at) = self.rules.iter().position(|existing| existing.same_criteria(&rule)) {
            let existing = self.rules.get_mut(at).ok_or(UdspAddError::Exists)?;
            return match (existing.action, rule.action) {
                (UdspAction::Priority(old), UdspAction::Priority(new)) if old != new => {
                    existing.action = rule.action;
                    Ok(at)
                }
                _ => Err(UdspAddError::Exists),
            };
        }
        if self.rules.len() >= MAX_UDSP_RULES {
            return Err(UdspAddError::TooMany);
        }
        let at = index.filter(|at| *at < self.rules.len()).unwrap_or(self.rules.len());
        self.rules.insert(at, rule);
        Ok(at)
    }

    /// Takes the rule at `index` out; the later ones move up. lustre: `lnet_udsp_del_policy()`.
    pub fn remove(&mut self, index: usize) -> Option<UdspRule> {
        (index < self.rules.len()).then(|| self.rules.remove(index))
    }

    /// Takes every rule out, first to last (`lnet_udsp_destroy()`).
    pub fn take_all(&mut self) -> Vec<UdspRule> {
        std::mem::take(&mut self.rules)
    }

    pub fn get(&self, index: usize) -> Option<&UdspRule> {
        self.rules.get(index)
    }

    /// In index order.
    pub fn iter(&self) -> std::slice::Iter<'_, UdspRule> {
        self.rules.iter()
    }

    pub fn len(&self) -> usize {
        self.rules.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}

impl PreferredNids {
    /// `lnet_peer_is_pref_nid_locked()`.
    pub(crate) fn contains(&self, nid: Nid) -> bool {
        self.nids.contains(&nid)
    }

    /// The first preferred NID: the one a non-multi-rail peer NI is reached from
    /// (`lnet_find_existing_preferred_best_ni()`).
    pub(crate) fn first(&self) -> Option<Nid> {
        self.nids.first().copied()
    }

    pub(crate) fn nids(&self) -> &[Nid] {
        &self.nids
    }

    /// `lnet_peer_ni_set_non_mr_pref_nid()`: the first local NI a request to a
    /// non-multi-rail peer NI used, unless one is preferred already.
    pub(crate) fn set_from_traffic(&mut self, nid: Nid) {
        if self.nids.is_empty() {
            self.nids.push(nid);
            self.from_traffic = true;
        }
    }

    /// `lnet_peer_ni_clr_non_mr_pref_nid()`: forgets a NID traffic set, not one a rule set.
    pub(crate) fn clear_from_traffic(&mut self) {
        if self.from_traffic {
            self.nids.clear();
            self.from_traffic = false;
        }
    }

    /// `lnet_peer_clr_pref_nids()` (the traffic flag stays, as in the kernel).
    fn clear(&mut self) {
        self.nids.clear();
    }

    /// `lnet_peer_add_pref_nid()`: false when refused (`-EPERM`: a non-multi-rail peer NI
    /// has one already). A NID already there is success (`-EEXIST`, which the caller
    /// ignores); either way the NID is now a rule's, not traffic's.
    fn add(&mut self, nid: Nid, multi_rail: bool) -> bool {
        if self.nids.contains(&nid) {
            self.from_traffic = false;
            return true;
        }
        if !self.nids.is_empty() && !multi_rail {
            return false;
        }
        self.nids.push(nid);
        self.from_traffic = false;
        true
    }
}

impl Engine {
    /// `lnetctl udsp show`: the rules in index order.
    pub fn udsp_rules(&self) -> &UdspRules {
        &self.node.policies
    }
    /// `lnetctl udsp add`: the rule goes in at `index` (appended by default), then every
    /// rule is applied again, last to first.
    /// lustre: api-ni.c `IOC_LIBCFS_ADD_UDSP`, udsp.c `lnet_udsp_add_policy()`,
    /// `lnet_udsp_apply_policies()`.
    pub fn udsp_add(
        &mut self,
        rule: UdspRule,
        index: Option<usize>,
    ) -> Result<usize, UdspAddError> {
        self.flow().udsp_add(rule, index)
    }

    /// `lnetctl udsp del --idx N` (`Some`) or `--all` (`None`): what each rule removed
    /// matches is reverted. lustre: udsp.c `lnet_udsp_del_policy()`, `lnet_udsp_destroy()`.
    pub fn udsp_del(&mut self, index: Option<usize>) -> Result<(), UdspNotFound> {
        self.flow().udsp_del(index)
    }

    /// `udsp info` of the local NI (`remote` false) or peer NI owning `nid`; `None` when
    /// there is none. lustre: udsp.c `lnet_udsp_get_construct_info()`.
    pub fn udsp_info(&self, nid: Nid, remote: bool) -> Option<UdspConstructInfo> {
        self.with_look(|look| look.udsp_info(nid, remote))
    }
}

impl<A: Access, N: NodeAccess> View<'_, A, N> {
    /// See [`Engine::udsp_info`].
    pub(crate) fn udsp_info(&self, nid: Nid, remote: bool) -> Option<UdspConstructInfo> {
        if !remote {
            let ni = self.node.nis.get(self.node.nis.for_nid(nid)?)?;
            return Some(UdspConstructInfo {
                net_priority: self
                    .node
                    .nis
                    .net(nid.net())
                    .map_or(MAX_SELECTION_PRIORITY, |net| net.priority),
                nid_priority: ni.priority,
                // `net_rtr_pref_nids`: no rule fills a local net's list.
                preferred_gateways: Vec::new(),
                preferred_sources: Vec::new(),
            });
        }
        let id = self.node.peers.find(nid)?;
        let lpni = self.node.peers.ni(&self.peer_nis, id).filter(|lpni| !lpni.deleted)?;
        let peer = self.node.peers.peer_of(id)?;
        let net_priority = peer
            .nets
            .iter()
            .find(|peer_net| peer_net.net == nid.net())
            .map_or(MAX_SELECTION_PRIORITY, |peer_net| peer_net.priority);
        let shown = |nids: &[Nid]| nids.iter().take(MAX_SHOWN_PREFERRED).copied().collect();
        Some(UdspConstructInfo {
            net_priority,
            nid_priority: lpni.priority,
            preferred_gateways: shown(&lpni.preferred_routers),
            preferred_sources: shown(lpni.preferred.nids()),
        })
    }

    /// The primary NIDs of the gateways of every route (`lr_gateway->lp_primary_nid`), in
    /// route-table order (the kernel walks its remote-net hash: the same set, so the same
    /// lists but for their order): what a `--rte` criterion is matched against.
    pub(super) fn route_gateways(&self) -> Vec<Nid> {
        self.node.routes.iter().map(|route| self.node.peers.primary_nid(route.gateway)).collect()
    }

    /// Whether the peer NI `destination` prefers the gateway whose NID is `gateway` (by its
    /// peer's primary NID): route choice compares this first.
    /// lustre: peer.c `lnet_peer_is_pref_rtr_locked()`, lib-move.c `lnet_find_route_locked()`.
    pub(super) fn prefers_router(&self, destination: PeerNiId, gateway: Nid) -> bool {
        let Some(lpni) = self.node.peers.ni(&self.peer_nis, destination) else { return false };
        !lpni.preferred_routers.is_empty()
            && lpni.preferred_routers.contains(&self.node.peers.primary_nid(gateway))
    }

    /// Whether `peer` has a peer net for `net` (to tell if attaching a NID creates one).
    pub(super) fn peer_has_net(&self, peer: PeerId, net: Net) -> bool {
        self.node.peers.peer(peer).is_some_and(|entry| entry.nets.iter().any(|n| n.net == net))
    }
}

impl Flow<'_> {
    /// See [`Engine::udsp_add`].
    pub(crate) fn udsp_add(
        &mut self,
        rule: UdspRule,
        index: Option<usize>,
    ) -> Result<usize, UdspAddError> {
        let at = self.node.policies.add(rule, index)?;
        let gateways = self.route_gateways();
        let NodePart { policies, nis, peers, .. } = &mut *self.node;
        let peers = &mut (peers, &mut self.peer_nis);
        for rule in policies.iter().rev() {
            apply_everywhere(rule, false, nis, peers, &gateways);
        }
        Ok(at)
    }

    /// See [`Engine::udsp_del`].
    pub(crate) fn udsp_del(&mut self, index: Option<usize>) -> Result<(), UdspNotFound> {
        let removed = match index {
            None => self.node.policies.take_all(),
            Some(at) => {
                let shown = u32::try_from(at).unwrap_or(u32::MAX);
                vec![self.node.policies.remove(at).ok_or(UdspNotFound(shown))?]
            }
        };
        let gateways = self.route_gateways();
        for rule in &removed {
            let NodePart { nis, peers, .. } = &mut *self.node;
            apply_everywhere(rule, true, nis, &mut (peers, &mut self.peer_nis), &gateways);
        }
        Ok(())
    }

    /// A local NI came up (`net add`): its net, if new, takes the source net rules, and
    /// every NI of the net the source NID rules. lustre: api-ni.c `lnet_add_net_common()`,
    /// udsp.c `lnet_udsp_apply_policies_on_net()`, `lnet_udsp_apply_policies_on_ni()`.
    pub(super) fn apply_policies_on_new_ni(&mut self, net: Net) {
        let NodePart { policies, nis, .. } = &mut *self.node;
        for rule in policies.iter().rev() {
            let Some(src) =
                rule.src.as_ref().filter(|_| rule.kind() == UdspRuleKind::LocalPriority)
            else {
                continue;
            };
            let priority = stamped(rule, false);
            if src.is_net() {
                if src.matches_net(net) {
                    nis.set_net_priority(net, priority);
                }
                continue;
            }
            for ni in nis.iter_mut().filter(|ni| !ni.removed && ni.nid.net() == net) {
                if src.matches_nid(&ni.nid) {
                    ni.priority = priority;
                }
            }
        }
    }

    /// A peer NI was attached to a peer (created, or moved to another peer): the
    /// destination rules, on the peer net it created (`new_net`) and on it.
    /// lustre: peer.c `lnet_peer_attach_peer_ni()`, udsp.c
    /// `lnet_udsp_apply_policies_on_lpn()`, `lnet_udsp_apply_policies_on_lpni()`.
    pub(super) fn apply_policies_on_attached(&mut self, id: PeerNiId, new_net: bool) {
        if self.node.policies.is_empty() {
            return;
        }
        let gateways = self.route_gateways();
        let NodePart { policies, nis, peers, .. } = &mut *self.node;
        let (Some(nid), Some(peer)) = (peers.nid(id), peers.owner(id)) else {
            return;
        };
        if new_net {
            for rule in policies.iter().rev() {
                let kind = rule.kind();
                if let Some(dst) = rule.dst.as_ref().filter(|_| kind == UdspRuleKind::PeerPriority)
                {
                    if dst.is_net() && dst.matches_net(nid.net()) {
                        set_peer_net_priority(peers, peer, nid.net(), stamped(rule, false));
                    }
                }
            }
        }
        for rule in policies.iter().rev() {
            let locals = local_nids_for(rule, nis);
            apply_on_peer_ni(
                rule,
                false,
                id,
                None,
                &locals,
                &mut (peers, &mut self.peer_nis),
                &gateways,
            );
        }
    }
}

/// The priority a rule stamps, or the default when reverting.
fn stamped(rule: &UdspRule, revert: bool) -> u32 {
    match (revert, rule.action) {
        (false, UdspAction::Priority(priority)) => priority,
        _ => MAX_SELECTION_PRIORITY,
    }
}

/// The peer table with the peer NI shares a call holds.
type Peers<'s, 'a> = (&'s mut PeerTable, &'s mut Shares<'a, Exclusive, PeerNis>);

/// One rule on every construct (`lnet_udsp_apply_policies()` for one rule).
fn apply_everywhere(
    rule: &UdspRule,
    revert: bool,
    nis: &mut Nis,
    peers: &mut Peers<'_, '_>,
    gateways: &[Nid],
) {
    match (rule.kind(), &rule.src) {
        (UdspRuleKind::LocalPriority, Some(src)) => {
            apply_on_local(src, stamped(rule, revert), nis);
        }
        (UdspRuleKind::LocalPriority | UdspRuleKind::Inert(_), _) => {}
        _ => apply_on_peers(rule, revert, nis, peers, gateways),
    }
}

/// A source priority rule on the local nets (a net criterion) or on the NIs of the nets of
/// its LND (a NID criterion). lustre: udsp.c `lnet_udsp_apply_rule_on_nis()`,
/// `lnet_udsp_apply_prio_rule_on_net()`, `lnet_udsp_apply_rule_on_ni()`.
fn apply_on_local(src: &NidDescriptor, priority: u32, nis: &mut Nis) {
    if src.is_net() {
        for net in nis.live_nets() {
            if src.matches_net(net) {
                nis.set_net_priority(net, priority);
            }
        }
        return;
    }
    for ni in nis.iter_mut().filter(|ni| !ni.removed) {
        if src.matches_nid(&ni.nid) {
            ni.priority = priority;
        }
    }
}

/// A destination rule on every peer: peer nets for a net priority rule, else each peer NI
/// of the peer nets of the criterion's LND. lustre: udsp.c `lnet_udsp_apply_rule_on_lpnis()`,
/// `lnet_udsp_apply_rule_on_lpn()`.
fn apply_on_peers(
    rule: &UdspRule,
    revert: bool,
    nis: &Nis,
    peers: &mut Peers<'_, '_>,
    gateways: &[Nid],
) {
    let Some(dst) = &rule.dst else { return };
    let net_priority = rule.kind() == UdspRuleKind::PeerPriority && dst.is_net();
    let locals = local_nids_for(rule, nis);
    let targets: Vec<(PeerId, Net, Vec<PeerNiId>)> = peers
        .0
        .peers()
        .flat_map(|(id, peer)| {
            peer.nets
                .iter()
                .filter(|peer_net| peer_net.net.lnd == dst.lnd())
                .map(move |peer_net| (id, peer_net.net, peer_net.nis.clone()))
        })
        .collect();
    for (peer, net, peer_nis) in targets {
        if net_priority {
            if dst.matches_net(net) {
                set_peer_net_priority(peers.0, peer, net, stamped(rule, revert));
            }
            continue;
        }
        for id in peer_nis {
            apply_on_peer_ni(rule, revert, id, Some(net), &locals, peers, gateways);
        }
    }
}

/// The local NIDs a preferred-sources rule draws from, in the kernel's order (nets in the
/// order they came up, NIs in each net likewise); empty for other rules.
fn local_nids_for(rule: &UdspRule, nis: &Nis) -> Vec<Nid> {
    if rule.kind() == UdspRuleKind::PreferredSources { nis.local_nids() } else { Vec::new() }
}

fn set_peer_net_priority(peers: &mut PeerTable, peer: PeerId, net: Net, priority: u32) {
    let Some(entry) = peers.peer_mut(peer) else { return };
    if let Some(peer_net) = entry.nets.iter_mut().find(|peer_net| peer_net.net == net) {
        peer_net.priority = priority;
    }
}

/// A destination rule on one peer NI, matched by NID or, given its peer net (`lpn`), by a
/// net criterion. lustre: udsp.c `lnet_udsp_apply_rule_on_lpni()`.
fn apply_on_peer_ni(
    rule: &UdspRule,
    revert: bool,
    id: PeerNiId,
    lpn: Option<Net>,
    locals: &[Nid],
    peers: &mut Peers<'_, '_>,
    gateways: &[Nid],
) {
    let kind = rule.kind();
    let (Some(dst), true) = (
        &rule.dst,
        matches!(
            kind,
            UdspRuleKind::PeerPriority
                | UdspRuleKind::PreferredSources
                | UdspRuleKind::PreferredRouters
        ),
    ) else {
        return;
    };
    let (table, peer_nis) = peers;
    let (Some(nid), Some(peer)) = (table.nid(id), table.owner(id)) else { return };
    let by_net = lpn.is_some_and(|net| dst.is_net() && dst.matches_net(net));
    if !dst.matches_nid(&nid) && !by_net {
        return;
    }
    let multi_rail = table.peer(peer).is_some_and(|entry| entry.multi_rail());
    let Some(lpni) = table.ni_mut(peer_nis, id) else { return };
    match kind {
        UdspRuleKind::PreferredSources => {
            let Some(src) = &rule.src else { return };
            // lustre: lnet_udsp_apply_ni_list(): the list is cleared at the first local NI
            // that matches, then filled in net order; reverting clears it.
            let mut cleared = false;
            for local in locals {
                if !src.matches_nid(local) {
                    continue;
                }
                if !cleared || revert {
                    lpni.preferred.clear();
                    cleared = true;
                    if revert {
                        continue;
                    }
                }
                if !lpni.preferred.add(*local, multi_rail) {
                    break;
                }
            }
        }
        UdspRuleKind::PreferredRouters => {
            let Some(rte) = &rule.rte else { return };
            // lustre: lnet_udsp_apply_rte_list_on_lpni(): gateways by primary NID, each
            // added in front of the list once.
            let mut cleared = false;
            for gateway in gateways.iter().filter(|gateway| rte.matches_nid(gateway)) {
                if !cleared || revert {
                    lpni.preferred_routers.clear();
                    cleared = true;
                    if revert {
                        continue;
                    }
                }
                if !lpni.preferred_routers.contains(gateway) {
                    lpni.preferred_routers.insert(0, *gateway);
                }
            }
        }
        _ => lpni.priority = stamped(rule, revert),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::LndType;

    fn rule(src: Option<&str>, dst: Option<&str>, rte: Option<&str>, p: Option<u32>) -> UdspRule {
        UdspRule::from_lnetctl(src, dst, rte, p).unwrap()
    }

    #[test]
    fn lnetctl_checks_and_default_actions() {
        use UdspSpecError::*;
        assert_eq!(UdspRule::from_lnetctl(None, None, None, Some(1)), Err(Missing));
        assert_eq!(
            UdspRule::from_lnetctl(Some("tcp"), Some("tcp"), Some("tcp"), None),
            Err(AllThree)
        );
        assert_eq!(
            UdspRule::from_lnetctl(Some("tcp"), None, Some("tcp"), None),
            Err(SourceAndRouter)
        );
        assert!(matches!(UdspRule::from_lnetctl(Some("x"), None, None, None), Err(Source(_))));
        assert!(matches!(UdspRule::from_lnetctl(None, Some("x"), None, None), Err(Destination(_))));
        assert!(matches!(
            UdspRule::from_lnetctl(None, Some("tcp"), Some("x"), None),
            Err(Router(_))
        ));
        // A lone src or dst without a priority is a priority-0 rule.
        assert_eq!(rule(Some("tcp"), None, None, None).action, UdspAction::Priority(0));
        assert_eq!(rule(None, Some("tcp"), None, None).action, UdspAction::Priority(0));
        assert_eq!(
            rule(Some("1.1.1.1@tcp"), Some("tcp"), None, None).action,
            UdspAction::Preferred
        );
        assert_eq!(rule(None, None, Some("tcp"), None).action, UdspAction::Preferred);
    }

    #[test]
    fn kinds_follow_the_kernels_branches() {
        use UdspRuleKind::*;
        assert_eq!(rule(Some("tcp"), None, None, Some(3)).kind(), LocalPriority);
        assert_eq!(rule(None, Some("tcp"), None, Some(3)).kind(), PeerPriority);
        assert_eq!(rule(Some("1.1.1.1@tcp"), Some("tcp"), None, None).kind(), PreferredSources);
        assert_eq!(rule(None, Some("tcp"), Some("*.*.*.*@tcp"), None).kind(), PreferredRouters);
        for inert in [
            rule(Some("1.1.1.1@tcp"), Some("tcp"), None, Some(1)),
            rule(None, Some("tcp"), Some("*.*.*.*@tcp"), Some(1)),
            rule(None, None, Some("tcp"), None),
        ] {
            assert!(matches!(inert.kind(), Inert(_)), "{inert}");
        }
    }

    #[test]
    fn indexes_insertion_and_priority_updates() {
        let mut rules = UdspRules::default();
        let a = rule(Some("tcp"), None, None, Some(1));
        let b = rule(Some("tcp1"), None, None, Some(1));
        let c = rule(None, Some("tcp"), None, Some(1));
        assert_eq!(rules.add(a.clone(), None), Ok(0));
        assert_eq!(rules.add(b.clone(), Some(7)), Ok(1));
        assert_eq!(rules.add(c.clone(), Some(0)), Ok(0));
        assert_eq!(rules.iter().cloned().collect::<Vec<_>>(), [c.clone(), a.clone(), b.clone()]);
        // The same criteria: a new priority updates in place, the same one is -EALREADY.
        assert_eq!(rules.add(rule(Some("tcp"), None, None, Some(5)), Some(0)), Ok(1));
        assert_eq!(rules.get(1).and_then(UdspRule::priority), Some(5));
        assert_eq!(
            rules.add(rule(Some("tcp"), None, None, Some(5)), None),
            Err(UdspAddError::Exists)
        );
        let pair = rule(Some("1.1.1.1@tcp"), Some("tcp"), None, None);
        assert_eq!(rules.add(pair.clone(), None), Ok(3));
        assert_eq!(rules.add(pair, None), Err(UdspAddError::Exists));
        assert_eq!(rules.remove(0), Some(c));
        assert_eq!(rules.remove(9), None);
        assert_eq!(rules.len(), 3);
        let mut full = UdspRules::default();
        for number in 0..MAX_UDSP_RULES {
            full.add(rule(Some(&format!("tcp{number}")), None, None, None), None).unwrap();
        }
        assert_eq!(
            full.add(rule(Some("o2ib"), None, None, None), None),
            Err(UdspAddError::TooMany)
        );
    }

    /// Router rules, given gateways (the route table routing will supply): each matching
    /// gateway's primary NID once, newest first; non-matching gateways leave the list alone;
    /// reverting clears it.
    #[test]
    fn router_rules_fill_preferred_routers_from_gateways() {
        let mut table = PeerTable::default();
        let mut nis = crate::engine::shares::Owned::new(
            crate::engine::slab::KeyPartitions::new(1),
            PeerNis::new,
        );
        let mut nis = nis.exclusive();
        let remote = Nid::new4(Net::new(LndType::O2IB, 0), 0x0a00_0007);
        let id = table.find_or_create(&mut nis, remote, 8, 16).unwrap();
        let mut peers = (&mut table, &mut nis);
        let rule = rule(None, Some("*.*.*.*@o2ib"), Some("10.9.0.*@tcp"), None);
        assert_eq!(rule.kind(), UdspRuleKind::PreferredRouters);
        let (g1, g2) = (Nid::new4(Net::TCP, 0x0a09_0001), Nid::new4(Net::TCP, 0x0a09_0002));
        let elsewhere = Nid::new4(Net::TCP, 0x0a08_0001);
        let routers =
            |peers: &Peers<'_, '_>| peers.0.ni(&*peers.1, id).unwrap().preferred_routers.clone();
        apply_on_peer_ni(&rule, false, id, None, &[], &mut peers, &[elsewhere]);
        assert!(routers(&peers).is_empty());
        apply_on_peer_ni(&rule, false, id, None, &[], &mut peers, &[g1, elsewhere, g2, g1]);
        assert_eq!(routers(&peers), [g2, g1]);
        // Applied again: cleared at the first match and filled the same way.
        apply_on_peer_ni(&rule, false, id, None, &[], &mut peers, &[g2]);
        assert_eq!(routers(&peers), [g2]);
        apply_on_peer_ni(&rule, true, id, None, &[], &mut peers, &[g2]);
        assert!(routers(&peers).is_empty());
        // A peer NI the destination does not name is left alone.
        let other = peers.0.find_or_create(peers.1, Nid::new4(Net::TCP, 5), 8, 16).unwrap();
        apply_on_peer_ni(&rule, false, other, None, &[], &mut peers, &[g1]);
        assert!(peers.0.ni(&*peers.1, other).unwrap().preferred_routers.is_empty());
    }

    #[test]
    fn preferred_nids_follow_the_kernels_rules() {
        let (a, b) = (Nid::new4(Net::TCP, 1), Nid::new4(Net::new(LndType::SOCK, 1), 1));
        let mut preferred = PreferredNids::default();
        preferred.set_from_traffic(a);
        preferred.set_from_traffic(b);
        assert_eq!(preferred.nids(), [a]);
        // A rule's NID is not traffic's: clearing traffic's keeps it.
        assert!(preferred.add(a, false));
        preferred.clear_from_traffic();
        assert_eq!(preferred.first(), Some(a));
        // Non-multi-rail: one NID only; multi-rail: a list.
        assert!(!preferred.add(b, false));
        assert!(preferred.add(b, true));
        assert!(preferred.contains(b));
        preferred.clear();
        assert!(preferred.nids().is_empty());
    }
}
