//! Fault injection: drop and delay rules (`lnetctl fault`), the `Faults` part (decision 0012).
//!
//! A rule names a source and a destination (a NID, any NID, or every address of a net), a
//! message-type mask and a portal mask, and how often it fires: one match in every `rate`, at a
//! random place in each window of `rate` matches, or one match per `interval` seconds, at a
//! random instant of each window. Rules are kept newest first; the first that fires decides.
//!
//! Where they act (docs/protocol/semantics.md, "Fault injection"):
//!
//! * a drop rule without a health error drops a message on arrival, before it is a message
//!   (the sender learns nothing);
//! * a drop rule with a health error fails a transmit as the LND would, with that health
//!   status, so the health and resend machinery runs exactly as for a real failure;
//! * a delay rule holds an arriving message (its connection stops being read) or a transmit
//!   (with its credits) for `latency` seconds; deleting the rule releases what it holds.
//!
//! Randomness comes from the part's own in-tree generator (seeded from the engine's interface
//! cookie), and time from the `now` the engine is given: runs replay exactly.
//!
//! lustre: lnet/lnet/net_fault.c, lnet/lnet/lib-msg.c `lnet_send_error_simulation()`,
//! include/uapi/linux/lnet/lnetctl.h `struct lnet_fault_attr`, `struct lnet_fault_stat`.

use std::collections::VecDeque;
use std::time::Duration;

use crate::addr::Nid;
use crate::engine::health::HealthStatus;
use crate::engine::slab::Key;
use crate::rng::Rng;
use crate::time::Time;
use crate::wire::header::{Body, Header, MsgType};

/// Most drop rules, and separately most delay rules, a node keeps. The kernel has no limit;
/// each rule is checked for every message, so a bound keeps that cost bounded.
pub const MAX_FAULT_RULES: usize = 256;
/// Most messages delay rules hold at once, all rules together. The kernel has no limit; here a
/// match beyond it is counted in `fs_count` but the message goes on undelayed.
pub const MAX_FAULT_HELD: usize = 4096;

/// `LNET_ACK_BIT` .. `LNET_REPLY_BIT`: one bit per message type (`1 << type`).
pub const MSG_ACK: u32 = 1 << 0;
pub const MSG_PUT: u32 = 1 << 1;
pub const MSG_GET: u32 = 1 << 2;
pub const MSG_REPLY: u32 = 1 << 3;
/// Every message type (`LNET_MSG_MASK`); a rule given 0 gets this.
pub const MSG_ALL: u32 = MSG_ACK | MSG_PUT | MSG_GET | MSG_REPLY;

/// `HSTATUS_RANDOM`: a health error mask that picks any failure status at random.
pub const HEALTH_RANDOM: u32 = u32::MAX;
/// The health error bits a mask may hold: `1 << status` for each failure status
/// (`HSTATUS_LOCAL_INTERRUPT_BIT` .. `HSTATUS_NETWORK_TIMEOUT_BIT`).
pub const HEALTH_BITS: u32 = 0x7fe;
/// `HSTATUS_END`.
const HEALTH_END: u32 = 11;

/// The address of a net-wide wildcard NID (`255.255.255.255@net`, lnetctl's `*@net`).
pub const WILDCARD_ADDRESS: u32 = u32::MAX;

/// What a rule matches (`struct lnet_fault_attr`, the common part).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FaultMatch {
    /// Header source NID; [`Nid::ANY`] matches all, `255.255.255.255@net` all of a net.
    pub source: Nid,
    /// Header destination NID, likewise.
    pub destination: Nid,
    /// The NI a message arrives on ([`Nid::ANY`]: any). As in the kernel, the send-side
    /// health hook and delay rules match with no local NID, so a rule that sets it fires
    /// only as a receive drop.
    pub local_nid: Nid,
    /// Portals (bit per portal); 0: any. With a portal mask only PUT and GET can match.
    pub portal_mask: u64,
    /// Message types ([`MSG_PUT`], ...); 0 means all.
    pub message_mask: u32,
}

impl FaultMatch {
    /// Matches every message from `source` to `destination`.
    pub fn new(source: Nid, destination: Nid) -> Self {
        Self { source, destination, local_nid: Nid::ANY, portal_mask: 0, message_mask: 0 }
    }

    /// lustre: net_fault.c `lnet_fault_attr_match()`.
    fn matches(&self, header: &Header, local_nid: Option<Nid>) -> bool {
        if !nid_matches(self.source, Some(header.src_nid))
            || !nid_matches(self.destination, Some(header.dest_nid))
            || !nid_matches(self.local_nid, local_nid)
        {
            return false;
        }
        let msg_type = header.msg_type();
        if self.message_mask & type_bit(msg_type) == 0 {
            return false;
        }
        if self.portal_mask == 0 {
            return true;
        }
        // ACK and REPLY carry no portal; the validated message mask already excludes them.
        match portal_of(header) {
            Some(portal) => portal < 64 && self.portal_mask & (1u64 << portal) != 0,
            None => false,
        }
    }

    /// `lnet_fault_attr_validate()`: 0 becomes "all types"; a portal mask keeps only PUT and
    /// GET, and leaving nothing is an error.
    fn validate(&mut self) -> Result<(), FaultRuleError> {
        if self.message_mask & !MSG_ALL != 0 {
            return Err(FaultRuleError::UnknownMessageType(self.message_mask));
        }
        if self.message_mask == 0 {
            self.message_mask = MSG_ALL;
        }
        if self.portal_mask == 0 {
            return Ok(());
        }
        self.message_mask &= MSG_PUT | MSG_GET;
        if self.message_mask == 0 {
            return Err(FaultRuleError::NoPortalMessageType);
        }
        Ok(())
    }
}

/// A drop rule (`lnetctl fault drop add`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DropRule {
    pub matching: FaultMatch,
    /// Drop one match in every `rate` (exclusive with `interval`).
    pub rate: u32,
    /// Drop one match per `interval` seconds (exclusive with `rate`).
    pub interval: u32,
    /// Health errors to simulate on send (`1 << status` bits, or [`HEALTH_RANDOM`]); 0: a
    /// silent drop on receive.
    pub health_mask: u32,
    /// With an interval: drop each match with probability one half instead.
    pub random: bool,
    /// Drop every match, whatever rate or interval say.
    pub drop_all: bool,
}

/// A delay rule (`lnetctl fault delay add`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DelayRule {
    pub matching: FaultMatch,
    pub rate: u32,
    pub interval: u32,
    /// Seconds a delayed message is held; not 0.
    pub latency: u32,
}

/// A rule's counters (`struct lnet_fault_stat`): matches counted for rate and interval
/// (`fs_count`), messages dropped or delayed by type, and in all.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultStats {
    pub count: u64,
    pub put: u64,
    pub ack: u64,
    pub get: u64,
    pub reply: u64,
    /// `ds_dropped` or `ls_delayed`.
    pub hits: u64,
}

/// Why a rule was refused (the kernel answers `-EINVAL` to each).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FaultRuleError {
    #[error("exactly one of rate and interval must be set (rate {rate}, interval {interval})")]
    RateAndInterval { rate: u32, interval: u32 },
    #[error("a portal filter leaves only PUT and GET, and the message mask has neither")]
    NoPortalMessageType,
    #[error("unknown message type bits {0:#x}")]
    UnknownMessageType(u32),
    #[error("unknown health error bits {0:#x}")]
    UnknownHealthError(u32),
    #[error("random drops need an interval")]
    RandomWithoutInterval,
    #[error("delay latency cannot be zero")]
    ZeroLatency,
    #[error("too many fault rules (at most {MAX_FAULT_RULES} of each kind)")]
    TooManyRules,
}

/// A message a delay rule holds until `due`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Held {
    pub(crate) key: Key,
    /// A transmit (held with its credits) rather than a receive.
    pub(crate) tx: bool,
    pub(crate) due: Time,
}

/// When the next window fires: a match number or a second.
#[derive(Clone, Copy, Debug, Default)]
struct Window {
    /// Rate: the match number (counted from 0) that fires.
    at: u64,
    /// Interval: the second from which the next match fires.
    time: u64,
    /// Interval: the start of the next window.
    base: u64,
}

impl Window {
    /// A fresh window, as at add and reset.
    /// lustre: net_fault.c `lnet_drop_rule_add()`, `lnet_drop_rule_reset()`.
    fn start(rate: u32, interval: u32, now_secs: u64, rng: &mut Rng) -> Self {
        if interval != 0 {
            let interval = u64::from(interval);
            Self { at: 0, time: now_secs + rng.below(interval), base: now_secs + interval }
        } else {
            Self { at: rng.below(u64::from(rate)), time: 0, base: 0 }
        }
    }

    /// Counts a match and says whether it fires.
    /// lustre: net_fault.c `drop_rule_match()`, `delay_rule_match()` (rate and time parts).
    fn fires(
        &mut self,
        rate: u32,
        interval: u32,
        count: &mut u64,
        now_secs: u64,
        rng: &mut Rng,
    ) -> bool {
        if interval != 0 {
            *count += 1;
            let fire = now_secs >= self.time;
            if fire {
                let interval = u64::from(interval);
                self.base = self.base.max(now_secs);
                self.time = self.base + rng.below(interval);
                self.base += interval;
            }
            return fire;
        }
        let fire = *count == self.at;
        *count += 1;
        let rate = u64::from(rate.max(1));
        if *count % rate == 0 {
            self.at = *count + rng.below(rate);
        }
        fire
    }
}

#[derive(Debug)]
struct DropState {
    rule: DropRule,
    window: Window,
    stats: FaultStats,
}

#[derive(Debug)]
struct DelayState {
    rule: DelayRule,
    window: Window,
    stats: FaultStats,
    /// Held messages in arrival order; with one latency per rule, also in `due` order.
    held: VecDeque<Held>,
}

/// The node's fault rules and what delay rules hold.
#[derive(Debug)]
pub(crate) struct Faults {
    /// Newest first (`list_add` at the head).
    drops: Vec<DropState>,
    delays: Vec<DelayState>,
    held: usize,
    rng: Rng,
}

impl Faults {
    pub(crate) fn new(seed: u64) -> Self {
        Self { drops: Vec::new(), delays: Vec::new(), held: 0, rng: Rng::new(seed) }
    }

    /// lustre: net_fault.c `lnet_drop_rule_add()`.
    pub(crate) fn add_drop(&mut self, mut rule: DropRule, now: Time) -> Result<(), FaultRuleError> {
        if (rule.rate == 0) == (rule.interval == 0) {
            return Err(FaultRuleError::RateAndInterval {
                rate: rule.rate,
                interval: rule.interval,
            });
        }
        if rule.random && rule.interval == 0 {
            return Err(FaultRuleError::RandomWithoutInterval);
        }
        if rule.health_mask != HEALTH_RANDOM && rule.health_mask & !HEALTH_BITS != 0 {
            return Err(FaultRuleError::UnknownHealthError(rule.health_mask));
        }
        rule.matching.validate()?;
        if self.drops.len() >= MAX_FAULT_RULES {
            return Err(FaultRuleError::TooManyRules);
        }
        let window = Window::start(rule.rate, rule.interval, secs(now), &mut self.rng);
        self.drops.insert(0, DropState { rule, window, stats: FaultStats::default() });
        Ok(())
    }

    /// lustre: net_fault.c `lnet_delay_rule_add()`.
    pub(crate) fn add_delay(
        &mut self,
        mut rule: DelayRule,
        now: Time,
    ) -> Result<(), FaultRuleError> {
        if (rule.rate == 0) == (rule.interval == 0) {
            return Err(FaultRuleError::RateAndInterval {
                rate: rule.rate,
                interval: rule.interval,
            });
        }
        if rule.latency == 0 {
            return Err(FaultRuleError::ZeroLatency);
        }
        rule.matching.validate()?;
        if self.delays.len() >= MAX_FAULT_RULES {
            return Err(FaultRuleError::TooManyRules);
        }
        let window = Window::start(rule.rate, rule.interval, secs(now), &mut self.rng);
        let state =
            DelayState { rule, window, stats: FaultStats::default(), held: VecDeque::new() };
        self.delays.insert(0, state);
        Ok(())
    }

    /// Removes the drop rules whose source and destination equal `source` and `destination`
    /// ([`Nid::ANY`] standing for any); returns how many.
    /// lustre: net_fault.c `lnet_drop_rule_del()`.
    pub(crate) fn delete_drops(&mut self, source: Nid, destination: Nid) -> usize {
        let before = self.drops.len();
        self.drops.retain(|state| !same_endpoints(&state.rule.matching, source, destination));
        before - self.drops.len()
    }

    /// Removes delay rules as [`delete_drops`](Self::delete_drops) does, moving what they
    /// held to `released` (in each rule's order); returns how many rules went.
    /// lustre: net_fault.c `lnet_delay_rule_del()`.
    pub(crate) fn delete_delays(
        &mut self,
        source: Nid,
        destination: Nid,
        released: &mut Vec<Held>,
    ) -> usize {
        let mut removed = 0;
        let mut index = 0;
        while let Some(state) = self.delays.get(index) {
            if !same_endpoints(&state.rule.matching, source, destination) {
                index += 1;
                continue;
            }
            let state = self.delays.remove(index);
            self.held -= state.held.len();
            released.extend(state.held);
            removed += 1;
        }
        removed
    }

    /// Zeroes every drop rule's counters and starts new windows.
    /// lustre: net_fault.c `lnet_drop_rule_reset()`.
    pub(crate) fn reset_drops(&mut self, now: Time) {
        for state in &mut self.drops {
            state.stats = FaultStats::default();
            state.window =
                Window::start(state.rule.rate, state.rule.interval, secs(now), &mut self.rng);
        }
    }

    /// lustre: net_fault.c `lnet_delay_rule_reset()`.
    pub(crate) fn reset_delays(&mut self, now: Time) {
        for state in &mut self.delays {
            state.stats = FaultStats::default();
            state.window =
                Window::start(state.rule.rate, state.rule.interval, secs(now), &mut self.rng);
        }
    }

    pub(crate) fn drop_rules(&self) -> impl Iterator<Item = (DropRule, FaultStats)> + '_ {
        self.drops.iter().map(|state| (state.rule, state.stats))
    }

    pub(crate) fn delay_rules(&self) -> impl Iterator<Item = (DelayRule, FaultStats)> + '_ {
        self.delays.iter().map(|state| (state.rule, state.stats))
    }

    /// Whether any rule is set: the message path then changes the rules' counts and draws.
    pub(crate) fn has_rules(&self) -> bool {
        self.has_drop_rules() || self.has_delay_rules()
    }

    pub(crate) fn has_drop_rules(&self) -> bool {
        !self.drops.is_empty()
    }

    pub(crate) fn has_delay_rules(&self) -> bool {
        !self.delays.is_empty()
    }

    /// The receive hook: whether a silent drop rule drops this arriving message.
    /// lustre: lib-move.c `lnet_parse()` calling net_fault.c `lnet_drop_rule_match()` with
    /// the receiving NI and no health status.
    pub(crate) fn drop_on_receive(&mut self, header: &Header, local_nid: Nid, now: Time) -> bool {
        self.match_drop(header, Some(local_nid), false, now).is_some()
    }

    /// The send hook: the health status a health rule fails this transmit with.
    /// lustre: lib-msg.c `lnet_send_error_simulation()`, called by socklnd's
    /// `ksocknal_process_transmit()` with no local NID.
    pub(crate) fn fail_on_send(&mut self, header: &Header, now: Time) -> Option<HealthStatus> {
        self.match_drop(header, None, true, now)
    }

    /// The first rule (newest first) that drops the message; with `health`, the status.
    /// lustre: net_fault.c `drop_rule_match()`.
    fn match_drop(
        &mut self,
        header: &Header,
        local_nid: Option<Nid>,
        health: bool,
        now: Time,
    ) -> Option<HealthStatus> {
        let now_secs = secs(now);
        let rng = &mut self.rng;
        for state in &mut self.drops {
            let rule = state.rule;
            if !rule.matching.matches(header, local_nid) {
                continue;
            }
            let fire = if rule.drop_all {
                true
            } else if health != (rule.health_mask != 0) {
                // Health rules act only on send, silent ones only on receive.
                continue;
            } else if rule.random {
                // lustre: a draw in [0, interval) against interval / 2; fs_count untouched.
                let interval = u64::from(rule.interval);
                rng.below(interval) >= interval / 2
            } else {
                state.window.fires(rule.rate, rule.interval, &mut state.stats.count, now_secs, rng)
            };
            if !fire {
                continue;
            }
            count_hit(&mut state.stats, header.msg_type());
            // A receive drop carries no status; Ok stands for "none" here.
            return Some(if health {
                choose_health(rule.health_mask, rng)
            } else {
                HealthStatus::Ok
            });
        }
        None
    }

    /// The delay hook: holds message `key` if a delay rule fires for it; returns whether.
    /// lustre: net_fault.c `lnet_delay_rule_match_locked()`, `delay_rule_match()` (no local
    /// NID: a delay rule with one never fires).
    pub(crate) fn delay(&mut self, header: &Header, key: Key, tx: bool, now: Time) -> bool {
        let now_secs = secs(now);
        let rng = &mut self.rng;
        for state in &mut self.delays {
            let rule = state.rule;
            if !rule.matching.matches(header, None) {
                continue;
            }
            if !state.window.fires(rule.rate, rule.interval, &mut state.stats.count, now_secs, rng)
            {
                continue;
            }
            if self.held >= MAX_FAULT_HELD {
                return false;
            }
            count_hit(&mut state.stats, header.msg_type());
            let due = now.saturating_add(Duration::from_secs(u64::from(rule.latency)));
            state.held.push_back(Held { key, tx, due });
            self.held += 1;
            return true;
        }
        false
    }

    /// The earliest instant a held message is due.
    pub(crate) fn deadline(&self) -> Option<Time> {
        if self.held == 0 {
            return None;
        }
        self.delays.iter().filter_map(|state| state.held.front().map(|held| held.due)).min()
    }

    /// Moves the held messages due by `now` to `released`, rule by rule.
    /// lustre: net_fault.c `delayed_msg_check()`.
    pub(crate) fn take_due(&mut self, now: Time, released: &mut Vec<Held>) {
        if self.held == 0 {
            return;
        }
        for state in &mut self.delays {
            while let Some(held) = state.held.front().filter(|held| held.due <= now).copied() {
                state.held.pop_front();
                self.held -= 1;
                released.push(held);
            }
        }
    }

    /// Whether a delay rule holds receive `key` (for the invariant checks).
    pub(crate) fn holds(&self, key: Key) -> bool {
        self.delays.iter().any(|state| state.held.iter().any(|held| held.key == key))
    }

    pub(crate) fn held_count(&self) -> usize {
        self.held
    }
}

/// lustre: net_fault.c `lnet_fault_nid_match()`.
fn nid_matches(rule: Nid, message: Option<Nid>) -> bool {
    if rule.is_any() {
        return true;
    }
    let Some(message) = message else {
        return false;
    };
    if rule == message {
        return true;
    }
    rule.net() == message.net() && rule.addr4() == WILDCARD_ADDRESS
}

/// Rule deletion's test: equal NIDs, [`Nid::ANY`] in the request matching any.
fn same_endpoints(matching: &FaultMatch, source: Nid, destination: Nid) -> bool {
    (source.is_any() || matching.source == source)
        && (destination.is_any() || matching.destination == destination)
}

fn type_bit(msg_type: MsgType) -> u32 {
    match msg_type {
        MsgType::Ack => MSG_ACK,
        MsgType::Put => MSG_PUT,
        MsgType::Get => MSG_GET,
        MsgType::Reply => MSG_REPLY,
        MsgType::Hello => 0,
    }
}

fn portal_of(header: &Header) -> Option<u32> {
    match header.body {
        Body::Put { ptl_index, .. } | Body::Get { ptl_index, .. } => Some(ptl_index),
        _ => None,
    }
}

/// lustre: net_fault.c `lnet_fault_stat_inc()` and the total.
fn count_hit(stats: &mut FaultStats, msg_type: MsgType) {
    match msg_type {
        MsgType::Put => stats.put += 1,
        MsgType::Ack => stats.ack += 1,
        MsgType::Get => stats.get += 1,
        MsgType::Reply => stats.reply += 1,
        MsgType::Hello => {}
    }
    stats.hits += 1;
}

/// The simulated failure: a uniform pick among the failure statuses (the first counted
/// twice, as the kernel's draw of 0 becomes 1), kept if the mask allows it, else the allowed
/// status nearest to it (the higher one on a tie).
/// lustre: net_fault.c `lnet_fault_match_health()`.
fn choose_health(mask: u32, rng: &mut Rng) -> HealthStatus {
    let mut choice = rng.below(u64::from(HEALTH_END)).max(1) as u32;
    if mask != HEALTH_RANDOM && mask & (1 << choice) == 0 {
        let mut best = HEALTH_END;
        for bit in (1..=HEALTH_END).rev() {
            if mask & (1 << bit) != 0 {
                let delta = choice.abs_diff(bit);
                if delta < best {
                    best = delta;
                    choice = bit;
                }
            }
        }
    }
    HealthStatus::ALL.get(choice as usize).copied().unwrap_or(HealthStatus::LocalError)
}

/// The kernel's clock for rules: whole seconds (`ktime_get_seconds()`).
fn secs(now: Time) -> u64 {
    now.as_nanos() / 1_000_000_000
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::Net;
    use crate::wire::header::WireHandle;

    fn nid(addr: u32) -> Nid {
        Nid::new4(Net::TCP, addr)
    }

    fn put(source: Nid, destination: Nid, portal: u32) -> Header {
        Header {
            dest_nid: destination,
            src_nid: source,
            dest_pid: 12345,
            src_pid: 12345,
            payload_length: 0,
            body: Body::Put {
                ack_wmd: WireHandle::NONE,
                match_bits: 0,
                hdr_data: 0,
                ptl_index: portal,
                offset: 0,
            },
        }
    }

    fn ack(source: Nid, destination: Nid) -> Header {
        Header {
            body: Body::Ack { dst_wmd: WireHandle::NONE, match_bits: 0, mlength: 0 },
            ..put(source, destination, 0)
        }
    }

    fn drop_rule(source: Nid, destination: Nid, rate: u32) -> DropRule {
        DropRule {
            matching: FaultMatch::new(source, destination),
            rate,
            interval: 0,
            health_mask: 0,
            random: false,
            drop_all: false,
        }
    }

    #[test]
    fn nids_match_exactly_by_wildcard_and_by_net() {
        let wildcard = Nid::new4(Net::TCP, WILDCARD_ADDRESS);
        assert!(nid_matches(Nid::ANY, Some(nid(1))));
        assert!(nid_matches(nid(1), Some(nid(1))));
        assert!(!nid_matches(nid(1), Some(nid(2))));
        assert!(nid_matches(wildcard, Some(nid(2))));
        assert!(!nid_matches(wildcard, Some(Nid::new4(Net::new(Net::TCP.lnd, 1), 2))));
        assert!(!nid_matches(nid(1), None));
        assert!(nid_matches(Nid::ANY, None));
    }

    #[test]
    fn validation_follows_the_kernel() {
        let mut faults = Faults::new(1);
        let mut rule = drop_rule(Nid::ANY, Nid::ANY, 0);
        assert!(matches!(
            faults.add_drop(rule, Time::ZERO),
            Err(FaultRuleError::RateAndInterval { .. })
        ));
        rule.rate = 2;
        rule.interval = 3;
        assert!(faults.add_drop(rule, Time::ZERO).is_err());
        rule.interval = 0;
        rule.matching.portal_mask = 1 << 4;
        rule.matching.message_mask = MSG_ACK;
        assert_eq!(faults.add_drop(rule, Time::ZERO), Err(FaultRuleError::NoPortalMessageType));
        rule.matching.message_mask = 0;
        faults.add_drop(rule, Time::ZERO).unwrap();
        // The stored mask is what the kernel keeps: PUT|GET under a portal filter.
        assert_eq!(faults.drop_rules().next().unwrap().0.matching.message_mask, MSG_PUT | MSG_GET);
        let delay = DelayRule {
            matching: FaultMatch::new(Nid::ANY, Nid::ANY),
            rate: 1,
            interval: 0,
            latency: 0,
        };
        assert_eq!(faults.add_delay(delay, Time::ZERO), Err(FaultRuleError::ZeroLatency));
    }

    #[test]
    fn rate_drops_exactly_one_per_window() {
        for seed in 0..50 {
            let mut faults = Faults::new(seed);
            faults.add_drop(drop_rule(Nid::ANY, Nid::ANY, 5), Time::ZERO).unwrap();
            let header = put(nid(1), nid(2), 4);
            let drops: Vec<bool> =
                (0..50).map(|_| faults.drop_on_receive(&header, nid(2), Time::ZERO)).collect();
            for window in drops.chunks(5) {
                assert_eq!(window.iter().filter(|dropped| **dropped).count(), 1, "seed {seed}");
            }
            let (_, stats) = faults.drop_rules().next().unwrap();
            assert_eq!((stats.count, stats.hits, stats.put), (50, 10, 10));
        }
    }

    #[test]
    fn interval_drops_at_most_one_per_window() {
        let mut faults = Faults::new(7);
        let mut rule = drop_rule(Nid::ANY, Nid::ANY, 0);
        rule.interval = 10;
        faults.add_drop(rule, Time::ZERO).unwrap();
        let header = put(nid(1), nid(2), 4);
        let mut dropped_per_window = [0u32; 10];
        for second in 0..100u64 {
            for _ in 0..3 {
                if faults.drop_on_receive(&header, nid(2), Time::from_secs(second)) {
                    dropped_per_window[(second / 10) as usize] += 1;
                }
            }
        }
        // Matches arrive every second, so every window drops exactly one.
        assert_eq!(dropped_per_window, [1; 10]);
    }

    #[test]
    fn type_and_portal_masks_filter() {
        let mut faults = Faults::new(3);
        let mut rule = drop_rule(Nid::ANY, Nid::ANY, 1);
        rule.matching.portal_mask = 1 << 4;
        faults.add_drop(rule, Time::ZERO).unwrap();
        assert!(faults.drop_on_receive(&put(nid(1), nid(2), 4), nid(2), Time::ZERO));
        assert!(!faults.drop_on_receive(&put(nid(1), nid(2), 5), nid(2), Time::ZERO));
        assert!(!faults.drop_on_receive(&ack(nid(1), nid(2)), nid(2), Time::ZERO));
    }

    #[test]
    fn health_rules_act_only_on_send_and_silent_ones_only_on_receive() {
        let mut faults = Faults::new(3);
        let mut rule = drop_rule(Nid::ANY, Nid::ANY, 1);
        rule.health_mask = 1 << HealthStatus::RemoteDropped as u32;
        faults.add_drop(rule, Time::ZERO).unwrap();
        let header = put(nid(1), nid(2), 4);
        assert!(!faults.drop_on_receive(&header, nid(2), Time::ZERO));
        assert_eq!(faults.fail_on_send(&header, Time::ZERO), Some(HealthStatus::RemoteDropped));
        assert_eq!(faults.delete_drops(Nid::ANY, Nid::ANY), 1);
        faults.add_drop(drop_rule(Nid::ANY, Nid::ANY, 1), Time::ZERO).unwrap();
        assert_eq!(faults.fail_on_send(&header, Time::ZERO), None);
        assert!(faults.drop_on_receive(&header, nid(2), Time::ZERO));
    }

    #[test]
    fn health_choice_rounds_to_the_nearest_allowed_status() {
        let mut rng = Rng::new(9);
        let mask = (1 << 2) | (1 << 9);
        for _ in 0..200 {
            let status = choose_health(mask, &mut rng);
            assert!(matches!(status, HealthStatus::LocalDropped | HealthStatus::RemoteTimeout));
        }
        for _ in 0..200 {
            assert_ne!(choose_health(HEALTH_RANDOM, &mut rng), HealthStatus::Ok);
        }
    }

    #[test]
    fn deletion_matches_endpoints_with_any() {
        let mut faults = Faults::new(3);
        faults.add_drop(drop_rule(nid(1), nid(2), 1), Time::ZERO).unwrap();
        faults.add_drop(drop_rule(nid(1), nid(3), 1), Time::ZERO).unwrap();
        assert_eq!(faults.delete_drops(nid(9), Nid::ANY), 0);
        assert_eq!(faults.delete_drops(nid(1), nid(3)), 1);
        assert_eq!(faults.delete_drops(Nid::ANY, Nid::ANY), 1);
    }
}
