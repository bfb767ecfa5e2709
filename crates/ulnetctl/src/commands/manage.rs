//! `ping` and `discover`, and the nidlist arguments both take.
//!
//! lustre: lnet/utils/lnetctl.c `jt_ping()`, `jt_discover()`, `yaml_lnet_ping()`,
//! `yaml_lnet_ping_display()`; liblnetconfig.c `lustre_lnet_parse_nid_range()`,
//! `unroll_nid_range_scan()`.

use std::net::{IpAddr, ToSocketAddrs};

use ulnet_config::render::{self, ErrorOp, ManageCommand};
use ulnet_control::message::{Ping, errno};
use ulnet_control::{Request, Response};
use ulnet_proto::addr::{AddressKind, Net, Nid, NidRange, RangeError, RangeParseError};

use super::split_top_level;
use crate::cnum::atol;
use crate::dispatch::check_cmd;
use crate::{Ctx, Failure, report};
use ulnet_getopt::{Getopt, HasArg, LongOpt, Opt};

/// Most targets one command expands to. lnetctl has no limit but memory; this bounds the
/// request (a /22 of IPv4 addresses fits).
pub(crate) const MAX_TARGETS: usize = 1024;

/// lnetctl's "no timeout given" value (ms): a request carrying it omits the timeout.
const DEFAULT_TIMEOUT_MS: i32 = 1000;

/// `ping --help`.
const PING_HELP: &str = "ping nid[,nid,...]\n\
                         \t --source: source nid\n\
                         \t --timeout: ping timeout\n\
                         \t --help: display this help\n";

/// `discover --help`.
const DISCOVER_HELP: &str = "discover nid[,nid,...]\n\
                             \t --force: force discovery\n\
                             \t --help: display this help\n";

pub(crate) fn ping(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    static LONGS: &[LongOpt] = &[
        LongOpt::new("help", HasArg::No, 'h'),
        LongOpt::new("timeout", HasArg::Required, 't'),
        LongOpt::new("source", HasArg::Required, 's'),
    ];
    let mut getopt = Getopt::new(argv, "hs:t:", LONGS);
    let mut timeout_ms = DEFAULT_TIMEOUT_MS;
    let mut source: Option<Result<Nid, ()>> = None;
    while let Some(opt) = getopt.next() {
        match opt {
            Opt::Found { val: 's', arg } => {
                source = Some(resolve_nid(arg.as_deref().unwrap_or("")))
            }
            // `timeout = 1000 * atol(optarg)` into a C int.
            Opt::Found { val: 't', arg } => {
                timeout_ms = atol(arg.as_deref().unwrap_or("")).wrapping_mul(1000) as i32;
            }
            other => return stop_at(ctx, other, PING_HELP),
        }
    }
    // A source NID that does not parse fails the command silently.
    let source = match source {
        Some(Ok(nid)) => Some(nid.to_string()),
        Some(Err(())) => return -errno::EINVAL,
        None => None,
    };
    let targets = getopt.argv.get(getopt.optind..).unwrap_or_default();
    let nids = match expand_or_report(ctx, targets, ManageCommand::Ping) {
        Ok(nids) => nids,
        Err(rc) => return rc,
    };
    // The timeout goes out as "%u" of the int.
    let timeout_ms = (timeout_ms != DEFAULT_TIMEOUT_MS).then_some(timeout_ms as u32);
    manage(ctx, &Request::Ping(Ping { nids, timeout_ms, source }), ManageCommand::Ping)
}

pub(crate) fn discover(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    static LONGS: &[LongOpt] =
        &[LongOpt::new("force", HasArg::No, 'f'), LongOpt::new("help", HasArg::No, 'h')];
    let mut getopt = Getopt::new(argv, "fh", LONGS);
    let mut force = false;
    while let Some(opt) = getopt.next() {
        match opt {
            Opt::Found { val: 'f', .. } => force = true,
            other => return stop_at(ctx, other, DISCOVER_HELP),
        }
    }
    let targets = getopt.argv.get(getopt.optind..).unwrap_or_default();
    if targets.is_empty() {
        ctx.out("Missing nid argument\n");
        return -1;
    }
    let nids = match expand_or_report(ctx, targets, ManageCommand::Discover) {
        Ok(nids) => nids,
        Err(rc) => return rc,
    };
    manage(ctx, &Request::Discover { nids, force }, ManageCommand::Discover)
}

/// How `ping` and `discover` stop at anything but their own options: `--help` prints `help`,
/// a getopt error its message, and either way the command succeeds (as lnetctl's do).
fn stop_at(ctx: &mut Ctx<'_, '_>, opt: Opt, help: &str) -> i32 {
    match opt {
        Opt::Found { val: 'h', .. } => ctx.out(help),
        Opt::Error { message, .. } => ctx.err(message.as_deref().unwrap_or("")),
        Opt::Found { .. } => {}
    }
    0
}

/// [`expand_targets`] for `command`; a bad target is reported as lnetctl reports it, and the
/// error is the command's status.
fn expand_or_report(
    ctx: &mut Ctx<'_, '_>,
    targets: &[String],
    command: ManageCommand,
) -> Result<Vec<String>, i32> {
    expand_targets(targets).map_err(|error| {
        report::netlink_raw(ctx, ErrorOp::Manage, command.name(), error.errno, error.descr);
        -errno::EINVAL
    })
}

/// Sends a ping or discovery and prints the answers and failures (stdout, libyaml indent 2).
/// Any failed target makes the command fail with -1.
fn manage(ctx: &mut Ctx<'_, '_>, request: &Request, command: ManageCommand) -> i32 {
    let reply = match ctx.call(request) {
        Ok(Response::Manage(reply)) if ctx.json => {
            ctx.print_json(&Response::Manage(reply.clone()));
            return if reply.failures.is_empty() { 0 } else { -1 };
        }
        Ok(Response::Manage(reply)) => reply,
        Ok(_) => return report::unexpected(ctx, "not a ping reply"),
        Err(Failure::Reported(rc)) => return rc,
        Err(Failure::Daemon(error)) => {
            return report::netlink(ctx, ErrorOp::Manage, command.name(), &error);
        }
    };
    let (replies, failures) = match reply.to_render() {
        Ok(parts) => parts,
        Err(error) => return report::unexpected(ctx, &error.to_string()),
    };
    let text = render::ping_show(command, &replies, &failures);
    ctx.out(&text);
    if failures.is_empty() { 0 } else { -1 }
}

/// Why a target list was refused: lnetctl's message (with its literal quotes) and code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TargetError {
    pub errno: i32,
    pub descr: &'static str,
}

const fn target_error(positive_errno: i32, descr: &'static str) -> TargetError {
    TargetError { errno: -positive_errno, descr }
}

/// Expands `ping`/`discover` arguments: each is a comma-separated list of NIDs whose address
/// fields may hold `[a-b/s,c]` ranges (fields expand leftmost outermost), or a hostname on
/// an IP net. Returns canonical NID texts.
pub(crate) fn expand_targets(args: &[String]) -> Result<Vec<String>, TargetError> {
    expand_nidlist(args, MAX_TARGETS)
}

/// [`expand_targets`] with another bound: `peer add --nid` allows `LNET_MAX_NIDS_PER_PEER`.
/// lustre: liblnetconfig.c `lustre_lnet_parse_nid_range()`.
pub(crate) fn expand_nidlist(args: &[String], max: usize) -> Result<Vec<String>, TargetError> {
    let mut nids = Vec::new();
    for arg in args {
        if arg.contains('*') {
            return Err(target_error(errno::EINVAL, "asterisk not allowed in nidstring"));
        }
        if arg.contains("<?>") {
            return Err(target_error(
                errno::EINVAL,
                "\"Unable to parse nidlist: LNET_ANY_NID is unsupported\"",
            ));
        }
        if !arg.contains('@') {
            return Err(target_error(
                errno::EINVAL,
                "\"Unable to parse nidlist: no valid NIDs in string\"",
            ));
        }
        for entry in split_top_level(arg).into_iter().filter(|entry| !entry.is_empty()) {
            let limit = max.saturating_sub(nids.len());
            for nid in expand_entry(entry, limit)? {
                nids.push(nid.to_string());
            }
        }
    }
    Ok(nids)
}

fn expand_entry(entry: &str, limit: usize) -> Result<Vec<Nid>, TargetError> {
    let too_many =
        || target_error(7, "\"Unable to parse nidlist: specifies more NIDs than allowed\"");
    if !entry.contains(['[', ']']) {
        let nid = resolve_nid(entry).map_err(|()| {
            target_error(errno::EINVAL, "\"Unable to parse nidlist: invalid NID in nidstr\"")
        })?;
        return if limit == 0 { Err(too_many()) } else { Ok(vec![nid]) };
    }
    let range = NidRange::parse(entry).map_err(|error| match error {
        RangeParseError::ReversedRange => {
            target_error(errno::ERANGE, "\"Unable to parse nidlist: range is wrong order\"")
        }
        RangeParseError::BadBracket => {
            target_error(errno::EINVAL, "\"Unable to parse nidlist: incomplete bracket set\"")
        }
        _ => target_error(errno::EINVAL, "\"Unable to parse nidlist: invalid character in range\""),
    })?;
    range.expand(limit).map_err(|error| match error {
        RangeError::TooManyNids { .. } | RangeError::WildcardNotExpandable => too_many(),
    })
}

/// `libcfs_strnid()` as userspace builds it: a NID, or a hostname (starting with a letter) on
/// an IP net, resolved to its first IPv4 address.
fn resolve_nid(text: &str) -> Result<Nid, ()> {
    if let Ok(nid) = text.parse::<Nid>() {
        return Ok(nid);
    }
    let (host, net) = text.rsplit_once('@').ok_or(())?;
    let net: Net = net.parse().map_err(|_| ())?;
    if !host.starts_with(|c: char| c.is_ascii_alphabetic())
        || net.lnd.address_kind() != AddressKind::Ip
    {
        return Err(());
    }
    let addresses = (host, 0u16).to_socket_addrs().map_err(|_| ())?;
    addresses
        .map(|address| address.ip())
        .find_map(|ip| match ip {
            IpAddr::V4(ip) => Some(Nid::ipv4(net, ip)),
            IpAddr::V6(_) => None,
        })
        .ok_or(())
}

/// `cpt-of-nid NID...`: the partition the node's hash gives each NID (no NI involved).
/// lustre: lnetctl.c `jt_calc_cpt_of_nid()`, `yaml_lnet_cpt_of_nid()`.
pub(crate) fn cpt_of_nid(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    static LONGS: &[LongOpt] = &[LongOpt::new("help", HasArg::No, 'h')];
    let rc = check_cmd(ctx, super::CMD_LIST, "", Some("cpt-of-nid"), 2, &argv);
    if rc != 0 {
        return rc;
    }
    let mut getopt = Getopt::new(argv, "h", LONGS);
    if getopt.next().is_some() {
        // lnetctl prints the help for -h and for an unknown option, then returns 0.
        crate::dispatch::print_help(ctx, super::CMD_LIST, "", Some("cpt-of-nid"));
        return 0;
    }
    let nids = getopt.argv.get(getopt.optind..).unwrap_or_default().to_vec();
    match ctx.call(&Request::CptOfNid { nids }) {
        Ok(response) if ctx.json => {
            ctx.print_json(&response);
            0
        }
        Ok(Response::CptOfNid(answers)) => {
            let parsed: Result<Vec<(Nid, u32)>, _> =
                answers.iter().map(|a| a.nid.parse::<Nid>().map(|nid| (nid, a.cpt))).collect();
            let Ok(parsed) = parsed else {
                return report::unexpected(ctx, "a NID of the answer does not parse");
            };
            ctx.out(&render::cpt_of_nid_show(&parsed));
            0
        }
        Ok(_) => report::unexpected(ctx, "not a CPT list"),
        Err(Failure::Reported(rc)) => rc,
        Err(Failure::Daemon(error)) => report::netlink(ctx, ErrorOp::Show, "cpt-of-nid", &error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expand(args: &[&str]) -> Result<Vec<String>, TargetError> {
        expand_targets(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn lists_and_ranges_expand_in_order() {
        assert_eq!(
            expand(&["10.0.0.[1-2]@tcp,10.0.[0,1].9@tcp", "[6-12/4]@gni"]).unwrap(),
            vec!["10.0.0.1@tcp", "10.0.0.2@tcp", "10.0.0.9@tcp", "10.0.1.9@tcp", "6@gni", "10@gni"]
        );
    }

    #[test]
    fn nids_are_canonical() {
        assert_eq!(expand(&["10.0.0.1@tcp0"]).unwrap(), vec!["10.0.0.1@tcp"]);
    }

    #[test]
    fn refused_lists() {
        let descr = |args: &[&str]| expand(args).unwrap_err().descr;
        assert_eq!(descr(&["*@tcp"]), "asterisk not allowed in nidstring");
        assert_eq!(descr(&["<?>@tcp"]), "\"Unable to parse nidlist: LNET_ANY_NID is unsupported\"");
        assert_eq!(descr(&["10.0.0.1"]), "\"Unable to parse nidlist: no valid NIDs in string\"");
        assert_eq!(descr(&["1@tcp"]), "\"Unable to parse nidlist: invalid NID in nidstr\"");
        assert_eq!(
            descr(&["10.0.0.[5-1]@tcp"]),
            "\"Unable to parse nidlist: range is wrong order\""
        );
        assert_eq!(
            descr(&["10.0.0.[1-5@tcp"]),
            "\"Unable to parse nidlist: incomplete bracket set\""
        );
        assert_eq!(
            descr(&["10.0.0.[a]@tcp"]),
            "\"Unable to parse nidlist: invalid character in range\""
        );
        assert_eq!(
            descr(&["10.0.[0-255].[0-255]@tcp"]),
            "\"Unable to parse nidlist: specifies more NIDs than allowed\""
        );
        assert_eq!(expand(&["10.0.0.[5-1]@tcp"]).unwrap_err().errno, -34);
    }

    #[test]
    fn localhost_resolves() {
        assert_eq!(resolve_nid("localhost@tcp"), Ok("127.0.0.1@tcp".parse().unwrap()));
        assert_eq!(resolve_nid("localhost@gni"), Err(()));
        assert_eq!(resolve_nid("1localhost@tcp"), Err(()));
    }
}
