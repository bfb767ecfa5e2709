//! `lst stat`: rates and bandwidth from two consecutive QUERY_STAT samples of each node, the
//! per-node average, minimum and maximum over a group, printed in lst's exact layout.
//! lustre: lnet/utils/lst.c `lst_print_stat()`, `lst_cal_lnet_stat()`,
//! `lst_print_lnet_stat()`.
//!
//! The arithmetic is lst's, in single precision, so the printed digits match.

use std::fmt::Write as _;

use ulnet::proto::wire::selftest::{SrpcBody, StatReply};

use crate::console::RpcEntry;

/// Which parts of the report to print (`--bw`/`--rate`, `--read`/`--write`,
/// `--avg`/`--min`/`--max`, `--mbs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatFormat {
    /// 1: bandwidth only, 2: rates only, anything else both.
    pub sections: u32,
    /// 1: receive only, 2: send only, anything else both.
    pub directions: u32,
    /// Bits 1 avg, 2 min, 4 max; -1 for all.
    pub columns: i32,
    /// MB/s (10^6) instead of MiB/s.
    pub megabytes: bool,
}

impl Default for StatFormat {
    fn default() -> Self {
        Self { sections: 0, directions: 0, columns: -1, megabytes: false }
    }
}

/// `lst_lnet_stat_result_t`: per-node figures folded over a group.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct LnetStat {
    pub send_rate: Spread,
    pub receive_rate: Spread,
    pub send_bandwidth: Spread,
    pub receive_bandwidth: Spread,
    /// Nodes with two good samples.
    pub count: u32,
}

/// Average, minimum and maximum of one figure.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Spread {
    pub avg: f32,
    pub min: f32,
    pub max: f32,
    #[serde(skip)]
    total: f32,
}

impl Spread {
    /// lst's folding, quirks included: a minimum of 0 is replaced by the next value.
    fn add(&mut self, value: f32, count: u32) {
        self.total += value;
        if self.min > value || self.min == 0.0 {
            self.min = value;
        }
        if self.max < value {
            self.max = value;
        }
        self.avg = self.total / count as f32;
    }
}

/// One sample compared with the previous one.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Comparison {
    pub stat: LnetStat,
    /// Nodes whose stat RPC failed in either sample.
    pub failed: u32,
    /// The two samples do not list the same nodes.
    pub group_changed: bool,
}

/// `lst_print_stat()`'s loop: `previous` and `current` list the same nodes in order.
pub fn compare(previous: &[RpcEntry], current: &[RpcEntry], megabytes: bool) -> Comparison {
    let mut out = Comparison::default();
    for (index, new) in current.iter().enumerate() {
        let Some(old) = previous.get(index) else {
            out.group_changed = true;
            break;
        };
        if old.peer != new.peer {
            break;
        }
        let (Some(new_stat), Some(old_stat)) = (stat_reply(new), stat_reply(old)) else {
            out.failed += 1;
            continue;
        };
        let delta_ms = new_stat.framework.running_ms.wrapping_sub(old_stat.framework.running_ms);
        let delta = delta_ms as f32 / 1000.0;
        fold(&mut out.stat, delta, new_stat, old_stat, megabytes);
    }
    out
}

/// The stat reply of an entry whose RPC and framework status are both good.
fn stat_reply(entry: &RpcEntry) -> Option<&StatReply> {
    if entry.rpc_errno != 0 || entry.framework_errno != 0 {
        return None;
    }
    match &entry.reply {
        Some(SrpcBody::StatReply(stat)) => Some(stat),
        _ => None,
    }
}

/// `lst_cal_lnet_stat()`.
fn fold(stat: &mut LnetStat, delta: f32, new: &StatReply, old: &StatReply, megabytes: bool) {
    let unit = if megabytes { 1_000_000u32 } else { 1024 * 1024 } as f32;
    let (new, old) = (&new.lnet, &old.lnet);
    stat.count += 1;
    let count = stat.count;
    let bandwidth = |now: u64, before: u64| now.wrapping_sub(before) as f32 / unit / delta;
    stat.send_bandwidth.add(bandwidth(new.send_length, old.send_length), count);
    stat.receive_bandwidth.add(bandwidth(new.receive_length, old.receive_length), count);
    let rate = |now: u32, before: u32| now.wrapping_sub(before) as f32 / delta;
    stat.send_rate.add(rate(new.send_count, old.send_count), count);
    stat.receive_rate.add(rate(new.receive_count, old.receive_count), count);
}

/// `lst_print_lnet_stat()`: nothing when no node had two good samples.
pub fn render(name: &str, stat: &LnetStat, format: StatFormat) -> String {
    let mut out = String::new();
    if stat.count == 0 {
        return out;
    }
    let units = if format.megabytes { "MB/s  " } else { "MiB/s " };
    let sections: &[usize] = match format.sections {
        1 => &[1],
        2 => &[0],
        _ => &[0, 1],
    };
    let directions: &[usize] = match format.directions {
        1 => &[0],
        2 => &[1],
        _ => &[0, 1],
    };
    for &section in sections {
        let title = if section == 0 { "Rates" } else { "Bandwidth" };
        let _ = writeln!(out, "[LNet {title} of {name}]");
        for &direction in directions {
            let spread = match (section, direction) {
                (0, 0) => stat.receive_rate,
                (0, _) => stat.send_rate,
                (_, 0) => stat.receive_bandwidth,
                (_, _) => stat.send_bandwidth,
            };
            out.push_str(if direction == 0 { "[R] " } else { "[W] " });
            let columns = [("Avg", spread.avg, 1), ("Min", spread.min, 2), ("Max", spread.max, 4)];
            for (label, value, bit) in columns {
                if format.columns & bit == 0 {
                    continue;
                }
                let value = f64::from(value);
                if section == 0 {
                    let tail = if bit == 4 { "" } else { " " };
                    let _ = write!(out, "{label}: {value:<8.0} RPC/s{tail}");
                } else {
                    let _ = write!(out, "{label}: {value:<8.2} {units}");
                }
            }
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ulnet::ProcessId;
    use ulnet::proto::wire::selftest::{LnetCountersCommon, SessionId, SfwCounters};

    use crate::console::NodeState;

    fn sample(peer: u8, running_ms: u32, sent: u64, received: u64, rpcs: u32) -> RpcEntry {
        let lnet = LnetCountersCommon {
            send_count: rpcs,
            receive_count: rpcs * 2,
            send_length: sent,
            receive_length: received,
            ..Default::default()
        };
        RpcEntry {
            peer: ProcessId::lustre(format!("10.0.0.{peer}@tcp").parse().unwrap()),
            state: NodeState::Active,
            rpc_errno: 0,
            framework_errno: 0,
            session: SessionId::NONE,
            reply: Some(SrpcBody::StatReply(StatReply {
                status: 0,
                session: SessionId::NONE,
                framework: SfwCounters { running_ms, ..Default::default() },
                rpc: Default::default(),
                lnet,
            })),
            ulnet: true,
            latency: None,
        }
    }

    #[test]
    fn average_min_max_over_nodes_in_lst_layout() {
        let before = [sample(1, 1000, 0, 0, 0), sample(2, 1000, 0, 0, 0)];
        let after =
            [sample(1, 2000, 100 << 20, 50 << 20, 3000), sample(2, 3000, 100 << 20, 0, 3000)];
        let comparison = compare(&before, &after, false);
        assert_eq!((comparison.failed, comparison.group_changed), (0, false));
        let text = render("servers", &comparison.stat, StatFormat::default());
        let expected = "[LNet Rates of servers]\n\
            [R] Avg: 4500     RPC/s Min: 3000     RPC/s Max: 6000     RPC/s\n\
            [W] Avg: 2250     RPC/s Min: 1500     RPC/s Max: 3000     RPC/s\n\
            [LNet Bandwidth of servers]\n\
            [R] Avg: 25.00    MiB/s Min: 0.00     MiB/s Max: 50.00    MiB/s \n\
            [W] Avg: 75.00    MiB/s Min: 50.00    MiB/s Max: 100.00   MiB/s \n";
        assert_eq!(text, expected);
    }

    #[test]
    fn selections_and_megabytes() {
        let before = [sample(1, 0, 0, 0, 0)];
        let after = [sample(1, 1000, 2_000_000, 0, 10)];
        let comparison = compare(&before, &after, true);
        let format = StatFormat { sections: 1, directions: 2, columns: 1, megabytes: true };
        assert_eq!(
            render("g", &comparison.stat, format),
            "[LNet Bandwidth of g]\n[W] Avg: 2.00     MB/s  \n"
        );
    }

    #[test]
    fn failed_nodes_are_counted_and_skipped() {
        let before = [sample(1, 0, 0, 0, 0), sample(2, 0, 0, 0, 0)];
        let mut broken = sample(2, 1000, 0, 0, 0);
        broken.rpc_errno = 110;
        let after = [sample(1, 1000, 0, 0, 5), broken];
        let comparison = compare(&before, &after, false);
        assert_eq!(comparison.failed, 1);
        assert_eq!(comparison.stat.count, 1);
    }

    #[test]
    fn nothing_is_printed_without_two_samples() {
        let comparison = compare(&[], &[sample(1, 0, 0, 0, 0)], false);
        assert!(comparison.group_changed);
        assert_eq!(render("g", &comparison.stat, StatFormat::default()), "");
    }
}
