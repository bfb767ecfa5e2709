//! `fault drop|delay add|del|reset|show`: lnetctl's fault handlers. Options, checks, messages
//! and exit codes are lnetctl's; the node keeps the rules (the kernel's part).
//!
//! Quirks kept from lnetctl: `check_cmd()` is called with a minimum of two words for `add`,
//! `del` and `reset` (so a bare `fault drop reset` prints the help and fails), the delay
//! table's short options lack `-i` (`--interval` works), an unknown option is reported and
//! skipped, `-a` clears a `-d` given before it, and a bad health error name fails silently.
//!
//! lustre: lnet/utils/lnetctl.c `jt_fault_add()`, `jt_fault_del_common()`,
//! `jt_fault_reset_common()`, `jt_fault_show_common()`, `fault_attr_*_parse()`;
//! liblnetconfig.c `yaml_lnet_fault_rule()`, `fault_attr_parse_nid()`, `fault_opc_to_str()`.

use ulnet_config::render;
use ulnet_control::message::{Fault, FaultKind, FaultOp, FaultRuleSpec, errno};
use ulnet_control::{ControlError, Request, Response};
use ulnet_getopt::{Getopt, HasArg, LongOpt, Opt};
use ulnet_proto::addr::{Net, Nid};

use super::{FAULT_DELAY_CMDS, FAULT_DROP_CMDS};
use crate::dispatch::{Command, check_cmd};
use crate::{Ctx, Failure, report};

/// `HSTATUS_RANDOM`.
const HEALTH_RANDOM: u32 = u32::MAX;
/// The `-e` names and their `HSTATUS_*_BIT`s (include/uapi/linux/lnet/lnetctl.h).
const HEALTH_ERRORS: [(&str, u32); 10] = [
    ("local_interrupt", 1 << 1),
    ("local_dropped", 1 << 2),
    ("local_aborted", 1 << 3),
    ("local_no_route", 1 << 4),
    ("local_error", 1 << 5),
    ("local_timeout", 1 << 6),
    ("remote_error", 1 << 7),
    ("remote_dropped", 1 << 8),
    ("remote_timeout", 1 << 9),
    ("network_timeout", 1 << 10),
];
/// The `-m` names and their `LNET_*_BIT`s.
const MESSAGE_TYPES: [(&str, u32); 4] =
    [("put", 1 << 1), ("ack", 1 << 0), ("get", 1 << 2), ("reply", 1 << 3)];

pub(crate) fn drop_add(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    add(ctx, FaultKind::Drop, argv)
}

pub(crate) fn delay_add(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    add(ctx, FaultKind::Delay, argv)
}

pub(crate) fn drop_del(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    del(ctx, FaultKind::Drop, argv)
}

pub(crate) fn delay_del(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    del(ctx, FaultKind::Delay, argv)
}

pub(crate) fn drop_reset(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    simple(ctx, FaultKind::Drop, FaultOp::Reset, "reset", 2, &argv)
}

pub(crate) fn delay_reset(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    simple(ctx, FaultKind::Delay, FaultOp::Reset, "reset", 2, &argv)
}

pub(crate) fn drop_show(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    simple(ctx, FaultKind::Drop, FaultOp::Show, "show", 1, &argv)
}

pub(crate) fn delay_show(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    simple(ctx, FaultKind::Delay, FaultOp::Show, "show", 1, &argv)
}

fn table(kind: FaultKind) -> (&'static [Command], &'static str) {
    match kind {
        FaultKind::Drop => (FAULT_DROP_CMDS, "drop"),
        FaultKind::Delay => (FAULT_DELAY_CMDS, "delay"),
    }
}

/// `jt_fault_add()`.
fn add(ctx: &mut Ctx<'_, '_>, kind: FaultKind, argv: Vec<String>) -> i32 {
    static LONGS: &[LongOpt] = &[
        LongOpt::new("dest", HasArg::Required, 'd'),
        LongOpt::new("health_error", HasArg::Required, 'e'),
        LongOpt::new("interval", HasArg::Required, 'i'),
        LongOpt::new("latency", HasArg::Required, 'l'),
        LongOpt::new("message", HasArg::Required, 'm'),
        LongOpt::new("random", HasArg::No, 'n'),
        LongOpt::new("local_nid", HasArg::Required, 'o'),
        LongOpt::new("portal", HasArg::Required, 'p'),
        LongOpt::new("rate", HasArg::Required, 'r'),
        LongOpt::new("source", HasArg::Required, 's'),
        LongOpt::new("rule_type", HasArg::Required, 't'),
        LongOpt::new("drop_all", HasArg::No, 'x'),
    ];
    let (commands, word) = table(kind);
    let rc = check_cmd(ctx, commands, word, Some("add"), 2, &argv);
    if rc != 0 {
        return rc;
    }
    let drop = kind == FaultKind::Drop;
    let short = if drop { "d:e:i:m:no:p:r:s:t:x" } else { "d:l:m:o:p:r:s:" };
    let mut spec = FaultRuleSpec::default();
    let (mut source, mut destination, mut local_nid) = (None, None, None);
    let mut getopt = Getopt::new(argv, short, LONGS);
    while let Some(opt) = getopt.next() {
        let (val, arg) = match opt {
            Opt::Found { val, arg } => (val, arg.unwrap_or_default()),
            Opt::Error { message, .. } => {
                ctx.err(message.as_deref().unwrap_or(""));
                ctx.err("Unrecognized option ?\n");
                continue;
            }
        };
        match val {
            'd' => destination = Some(arg),
            'e' if drop => match health_error(&arg, spec.health_error_mask) {
                Some(mask) => spec.health_error_mask = mask,
                None => return -1,
            },
            'i' => spec.interval = c_strtoul(&arg),
            'l' => spec.latency = c_strtoul(&arg),
            'm' => match message_type(&arg) {
                Some(bit) => spec.message_mask |= bit,
                None => {
                    ctx.err(&format!("unknown message type {arg}\n"));
                    return -1;
                }
            },
            'n' if drop => spec.random = true,
            'o' => local_nid = Some(arg),
            'p' => {
                // lnetctl parses the portal with strtoul(optarg, NULL, 0), unchecked.
                let portal = c_strtoul_long(&arg);
                if portal >= 64 {
                    ctx.err(&format!("invalid portal: {portal}\n"));
                    return -1;
                }
                spec.portal_mask |= 1 << portal;
            }
            'r' => spec.rate = c_strtoul(&arg),
            's' => source = Some(arg),
            'x' if drop => spec.drop_all = true,
            // `-t` is its caller's, and the drop-only options do nothing for delay rules.
            _ => {}
        }
    }
    if drop {
        if (spec.rate == 0) == (spec.interval == 0) {
            ctx.err("please provide either drop rate or interval but not both at the same time.\n");
            return -1;
        }
        if spec.random && spec.interval == 0 {
            ctx.err("please provide an interval to randomize\n");
            return -1;
        }
    } else {
        if (spec.rate == 0) == (spec.interval == 0) {
            ctx.err(
                "please provide either delay rate or interval but not both at the same time.\n",
            );
            return -1;
        }
        if spec.latency == 0 {
            ctx.err("latency cannot be zero\n");
            return -1;
        }
    }
    let (Some(source), Some(destination)) = (source, destination) else {
        ctx.err(&format!("Please provide both source and destination of {word} rule\n"));
        return -1;
    };
    for (slot, text) in [
        (&mut spec.source, Some(source)),
        (&mut spec.destination, Some(destination)),
        (&mut spec.local_nid, local_nid),
    ] {
        match parse_nid(text.as_deref()) {
            Some(nid) => *slot = nid.to_string(),
            None => {
                ctx.err(&format!("Invalid NID: {}\n", text.unwrap_or_default()));
                return -errno::EINVAL;
            }
        }
    }
    request(ctx, kind, FaultOp::Add(spec))
}

/// `jt_fault_del_common()`.
fn del(ctx: &mut Ctx<'_, '_>, kind: FaultKind, argv: Vec<String>) -> i32 {
    static LONGS: &[LongOpt] = &[
        LongOpt::new("all", HasArg::No, 'a'),
        LongOpt::new("dest", HasArg::Required, 'd'),
        LongOpt::new("source", HasArg::Required, 's'),
    ];
    let (commands, word) = table(kind);
    let rc = check_cmd(ctx, commands, word, Some("del"), 2, &argv);
    if rc != 0 {
        return rc;
    }
    let (mut all, mut source, mut destination) = (false, None, None);
    let mut getopt = Getopt::new(argv, "ad:s:", LONGS);
    while let Some(opt) = getopt.next() {
        match opt {
            // lnetctl's 'a' falls through to 'd': it clears a destination given before it.
            Opt::Found { val: 'a', .. } => {
                all = true;
                destination = None;
            }
            Opt::Found { val: 'd', arg } => destination = arg,
            Opt::Found { val: 's', arg } => source = arg,
            Opt::Found { .. } => return 0,
            Opt::Error { message, .. } => {
                ctx.err(message.as_deref().unwrap_or(""));
                return 0;
            }
        }
    }
    if !all && (source.is_none() || destination.is_none()) {
        ctx.err("Failed, please provide source and destination of rule\n");
        return -1;
    }
    if all && (source.is_some() || destination.is_some()) {
        ctx.err("'-s' or '-d' cannot be combined with '-a'\n");
        return -1;
    }
    let mut nids = [Nid::ANY; 2];
    for (slot, text) in nids.iter_mut().zip([source, destination]) {
        match parse_nid(text.as_deref()) {
            Some(nid) => *slot = nid,
            None => {
                ctx.err(&format!("Invalid NID: {}\n", text.unwrap_or_default()));
                return -errno::EINVAL;
            }
        }
    }
    let [source, destination] = nids;
    let op = FaultOp::Del { source: source.to_string(), destination: destination.to_string() };
    request(ctx, kind, op)
}

/// `jt_fault_reset_common()` and `jt_fault_show_common()`.
fn simple(
    ctx: &mut Ctx<'_, '_>,
    kind: FaultKind,
    op: FaultOp,
    name: &str,
    min_args: usize,
    argv: &[String],
) -> i32 {
    let (commands, word) = table(kind);
    let rc = check_cmd(ctx, commands, word, Some(name), min_args, argv);
    if rc != 0 {
        return rc;
    }
    request(ctx, kind, op)
}

/// Sends the request; `show` prints the rules, the others print nothing on success. A
/// failure prints `failed to <op>: <message>` on stdout and returns the errno.
fn request(ctx: &mut Ctx<'_, '_>, kind: FaultKind, op: FaultOp) -> i32 {
    let what = operation(kind, &op);
    match ctx.call(&Request::Fault(Fault { kind, op })) {
        Ok(Response::Faults(rules)) => {
            ctx.out(&render::fault_show(&rules));
            0
        }
        Ok(Response::Done) => 0,
        Ok(_) => report::unexpected(ctx, "not a fault answer"),
        Err(Failure::Reported(rc)) => rc,
        Err(Failure::Daemon(error)) => {
            ctx.out(&format!("failed to {what}: {}\n", message(&error)));
            error.errno()
        }
    }
}

/// liblnetconfig.c `fault_opc_to_str()`.
fn operation(kind: FaultKind, op: &FaultOp) -> &'static str {
    match (kind, op) {
        (FaultKind::Drop, FaultOp::Add(_)) => "add drop rule",
        (FaultKind::Delay, FaultOp::Add(_)) => "add delay rule",
        (FaultKind::Drop, FaultOp::Show) => "list drop rule",
        (FaultKind::Delay, FaultOp::Show) => "list delay rules",
        (FaultKind::Drop, FaultOp::Del { .. }) => "delete drop rule",
        (FaultKind::Delay, FaultOp::Del { .. }) => "delete delay rule",
        (FaultKind::Drop, FaultOp::Reset) => "drop_reset rule",
        (FaultKind::Delay, FaultOp::Reset) => "delay reset_rule",
    }
}

/// The node's extended ACK message, or, without one, libnl's text for the errno
/// (`nl_geterror(nl_syserr2nlerr())`), which is what lnetctl prints then.
fn message(error: &ControlError) -> String {
    let descr = error.descr();
    if !descr.is_empty() {
        return descr;
    }
    match -error.errno() {
        errno::EINVAL => "Invalid input data or parameter".into(),
        errno::ENOENT => "Object not found".into(),
        errno::EEXIST => "Object exists".into(),
        errno::EBUSY => "Device or resource busy".into(),
        errno::EOPNOTSUPP => "Operation not supported".into(),
        code => format!("Unknown error {}", -code),
    }
}

/// `fault_attr_health_error_parse()`: a name adds its bit, `random` sets every bit.
fn health_error(name: &str, mask: u32) -> Option<u32> {
    if name.eq_ignore_ascii_case("random") {
        return Some(HEALTH_RANDOM);
    }
    HEALTH_ERRORS
        .iter()
        .find(|(known, _)| name.eq_ignore_ascii_case(known))
        .map(|(_, bit)| mask | bit)
}

/// `fault_attr_msg_parse()`.
fn message_type(name: &str) -> Option<u32> {
    MESSAGE_TYPES.iter().find(|(known, _)| name.eq_ignore_ascii_case(known)).map(|(_, bit)| *bit)
}

/// `fault_attr_parse_nid()`: nothing is any NID, `*@NET` every address of a net, else
/// `libcfs_stranynid()` (`*` is any NID).
pub(crate) fn parse_nid(text: Option<&str>) -> Option<Nid> {
    let Some(text) = text else {
        return Some(Nid::ANY);
    };
    if let Some(net) = text.strip_prefix("*@").filter(|net| !net.is_empty()) {
        let net = net.parse::<Net>().ok()?;
        return Some(Nid::new4(net, u32::MAX)).filter(|nid| !nid.is_any());
    }
    if text == "*" {
        return Some(Nid::ANY);
    }
    text.parse::<Nid>().ok()
}

/// C `strtoul(text, NULL, 0)` stored in a 32-bit field.
fn c_strtoul(text: &str) -> u32 {
    c_strtoul_long(text) as u32
}

/// C `strtoul(text, NULL, 0)`: blanks, a sign, `0x` hex or `0` octal or decimal digits up to
/// the first that is not one; a minus negates modulo 2^64; overflow gives `ULONG_MAX`.
fn c_strtoul_long(text: &str) -> u64 {
    let text = text.trim_start();
    let (negative, text) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let (radix, digits) = if let Some(hex) = text
        .strip_prefix("0x")
        .or_else(|| text.strip_prefix("0X"))
        .filter(|rest| rest.chars().next().is_some_and(|c| c.is_ascii_hexdigit()))
    {
        (16, hex)
    } else if text.starts_with('0') {
        (8, text)
    } else {
        (10, text)
    };
    let mut value: u64 = 0;
    for digit in digits.chars().map_while(|c| c.to_digit(radix)) {
        match value.checked_mul(u64::from(radix)).and_then(|v| v.checked_add(u64::from(digit))) {
            Some(next) => value = next,
            None => return u64::MAX,
        }
    }
    if negative { value.wrapping_neg() } else { value }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strtoul_as_c() {
        assert_eq!(c_strtoul("10"), 10);
        assert_eq!(c_strtoul("0x10"), 16);
        assert_eq!(c_strtoul("010"), 8);
        assert_eq!(c_strtoul("12abc"), 12);
        assert_eq!(c_strtoul("abc"), 0);
        assert_eq!(c_strtoul("-1"), u32::MAX);
        assert_eq!(c_strtoul_long("99999999999999999999999"), u64::MAX);
    }

    #[test]
    fn nids_as_lnetctl_reads_them() {
        assert_eq!(parse_nid(None), Some(Nid::ANY));
        assert_eq!(parse_nid(Some("*")), Some(Nid::ANY));
        assert_eq!(parse_nid(Some("*@tcp")).unwrap().to_string(), "255.255.255.255@tcp");
        assert_eq!(parse_nid(Some("10.0.0.1@tcp1")).unwrap().to_string(), "10.0.0.1@tcp1");
        assert_eq!(parse_nid(Some("*@")), None);
        assert_eq!(parse_nid(Some("*@bogus")), None);
        assert_eq!(parse_nid(Some("tcp")), None);
    }

    #[test]
    fn health_errors_accumulate_and_random_takes_all() {
        assert_eq!(health_error("local_timeout", 0), Some(1 << 6));
        assert_eq!(health_error("REMOTE_DROPPED", 1 << 6), Some((1 << 6) | (1 << 8)));
        assert_eq!(health_error("random", 1 << 6), Some(u32::MAX));
        assert_eq!(health_error("bogus", 0), None);
    }
}
