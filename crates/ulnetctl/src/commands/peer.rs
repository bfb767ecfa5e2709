//! `peer add`, `peer del`, `peer set`, `peer show` and `peer list`.
//!
//! lustre: lnet/utils/lnetctl.c `jt_peer_nid_common()`, `jt_set_peer_ni_value()`,
//! `set_value_helper()`, `jt_show_peer()`, `jt_list_peer()`, `yaml_lnet_peer()`,
//! `yaml_lnet_peer_display()`.

use ulnet_config::render::{self, ErrorOp, ShowMode};
use ulnet_control::message::{PeerAdd, PeerDel, PeerSet, errno};
use ulnet_control::{ControlError, Request, Response};
use ulnet_proto::addr::Nid;

use super::manage::expand_nidlist;
use super::net::{SetOptions, set_failed, set_options, show_options};
use super::{PEER_CMDS, print_rendered};
use crate::dispatch::{RC_BAD_PARAM, check_cmd, print_help};
use crate::{Ctx, Failure, report};
use ulnet_getopt::{Getopt, HasArg, LongOpt, Opt};

/// The kernel's answer to a dump with no peers, which lnetctl turns into silence.
const NO_PEERS: &str = "No peers found";

pub(crate) fn show(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    static LONGS: &[LongOpt] = &[
        LongOpt::new("help", HasArg::No, 'h'),
        LongOpt::new("nid", HasArg::Required, 'n'),
        LongOpt::new("verbose", HasArg::Optional, 'v'),
    ];
    let rc = check_cmd(ctx, PEER_CMDS, "peer", Some("show"), 1, &argv);
    if rc != 0 {
        return rc;
    }
    let mut getopt = Getopt::new(argv, "hn:v::", LONGS);
    let (nid, level) = match show_options(ctx, &mut getopt, PEER_CMDS, "peer") {
        Ok(options) => options,
        Err(rc) => return rc,
    };
    let peers = match peer_request(ctx, &Request::PeerShow { nid, level }) {
        Ok(Some(Response::Peers(peers))) => peers,
        Ok(Some(_)) => return report::unexpected(ctx, "not a peer list"),
        Ok(None) => return 0,
        Err(rc) => return rc,
    };
    print_rendered(ctx, &peers, |peers: &[render::PeerEntry]| {
        render::peer_show(peers, ShowMode::Show(level))
    })
}

pub(crate) fn list(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    let rc = check_cmd(ctx, PEER_CMDS, "peer", Some("list"), 0, &argv);
    if rc != 0 {
        return rc;
    }
    let nids = match peer_request(ctx, &Request::PeerList) {
        Ok(Some(Response::PeerList(nids))) => nids,
        Ok(Some(_)) => return report::unexpected(ctx, "not a peer list"),
        Ok(None) => return 0,
        Err(rc) => return rc,
    };
    let nids: Result<Vec<Nid>, _> = nids.iter().map(|text| text.parse::<Nid>()).collect();
    match nids {
        Ok(nids) => {
            let text = render::peer_list(&nids);
            ctx.out(&text);
            0
        }
        Err(_) => report::unexpected(ctx, "a peer NID does not parse"),
    }
}

/// `LNET_MAX_NIDS_PER_PEER`: most NIDs one `--nid` list may expand to.
const MAX_NIDS_PER_PEER: usize = 128;

/// `peer add --prim_nid P [--nid LIST] [--non_mr] [--lock_prim]`.
pub(crate) fn add(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    add_or_del(ctx, argv, true)
}

/// `peer del --prim_nid P [--nid LIST] [--force]`.
pub(crate) fn del(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    add_or_del(ctx, argv, false)
}

/// lnetctl's `jt_peer_nid_common()`: the short options declare `m:` and `f:` with
/// arguments (only the long forms are safe); `--non_mr` on del is refused; `--force` on add
/// and `--lock_prim` on del both just set the request's exclusive flag, so they act as
/// `--lock_prim` and `--force` respectively.
fn add_or_del(ctx: &mut Ctx<'_, '_>, argv: Vec<String>, adding: bool) -> i32 {
    static LONGS: &[LongOpt] = &[
        LongOpt::new("prim_nid", HasArg::Required, 'k'),
        LongOpt::new("non_mr", HasArg::No, 'm'),
        LongOpt::new("nid", HasArg::Required, 'n'),
        LongOpt::new("force", HasArg::No, 'f'),
        LongOpt::new("lock_prim", HasArg::No, 'l'),
    ];
    let word = if adding { "add" } else { "del" };
    let rc = check_cmd(ctx, PEER_CMDS, "peer", Some(word), 2, &argv);
    if rc != 0 {
        return rc;
    }
    let (mut primary, mut nidstr, mut multi_rail, mut exclusive) = (None, None, true, false);
    let mut getopt = Getopt::new(argv, "k:m:n:f:l", LONGS);
    while let Some(opt) = getopt.next() {
        match opt {
            Opt::Found { val: 'k', arg } => primary = arg,
            Opt::Found { val: 'n', arg } => nidstr = arg,
            Opt::Found { val: 'm', .. } if !adding => {
                report::cyaml(ctx, "peer", word, RC_BAD_PARAM, "Unrecognized option '-m'");
                return RC_BAD_PARAM;
            }
            Opt::Found { val: 'm', .. } => multi_rail = false,
            Opt::Found { val: 'f' | 'l', .. } => exclusive = true,
            Opt::Error { message, .. } => {
                ctx.err(message.as_deref().unwrap_or(""));
                print_help(ctx, PEER_CMDS, "peer", Some(word));
                return 0;
            }
            Opt::Found { .. } => return 0,
        }
    }
    let op = if adding { ErrorOp::Add } else { ErrorOp::Del };
    let nids = match nidstr {
        Some(text) => match expand_nidlist(std::slice::from_ref(&text), MAX_NIDS_PER_PEER) {
            Ok(nids) if nids.is_empty() => {
                let descr = "Unable to parse nidlist: did not expand to any nids";
                report::netlink_raw(ctx, op, "peer", -errno::ENOENT, descr);
                return -errno::EINVAL;
            }
            Ok(nids) => nids,
            Err(error) => {
                ctx.out(&format!("can't parse nidrange: \"{text}\"\n"));
                report::netlink_raw(ctx, op, "peer", error.errno, error.descr);
                return -errno::EINVAL;
            }
        },
        None => Vec::new(),
    };
    let request = if adding {
        Request::PeerAdd(PeerAdd {
            primary_nid: primary,
            nids,
            multi_rail,
            lock_primary: exclusive,
        })
    } else {
        Request::PeerDel(PeerDel { primary_nid: primary, nids, force: exclusive })
    };
    acknowledge(ctx, &request, op)
}

/// `peer set --health V (--nid N | --all)` or `--state S --nid N`: lnetctl's
/// `set_value_helper()`. A value that does not parse, or a negative one, sends nothing.
pub(crate) fn set(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    let rc = check_cmd(ctx, PEER_CMDS, "peer", Some("set"), 0, &argv);
    if rc != 0 {
        return rc;
    }
    let options = match set_options(ctx, argv, true) {
        Ok(options) => options,
        Err(rc) => return rc,
    };
    let SetOptions { nid, all, health, state, .. } = options;
    if health.is_none() && state.is_none() {
        return 0;
    }
    match acknowledge(ctx, &Request::PeerSet(PeerSet { nid, all, health, state }), ErrorOp::Set) {
        0 => 0,
        rc => set_failed(ctx, rc),
    }
}

/// Sends a request whose success is silent; errors in dialect N under `op: - peer:`, then
/// -EINVAL as lnetctl's `yaml_lnet_peer()` returns.
fn acknowledge(ctx: &mut Ctx<'_, '_>, request: &Request, op: ErrorOp) -> i32 {
    match ctx.call(request) {
        Ok(Response::Done) => 0,
        Ok(_) => report::unexpected(ctx, "not an acknowledgement"),
        Err(Failure::Reported(rc)) => rc,
        Err(Failure::Daemon(error)) => report::netlink(ctx, op, "peer", &error),
    }
}

/// Sends a peer dump: the response to render, `None` when it is already handled (printed as
/// JSON, or "No peers found"), or the return code of a reported failure.
fn peer_request(ctx: &mut Ctx<'_, '_>, request: &Request) -> Result<Option<Response>, i32> {
    match ctx.call(request) {
        Ok(response) if ctx.json => {
            ctx.print_json(&response);
            Ok(None)
        }
        Ok(response) => Ok(Some(response)),
        Err(Failure::Reported(rc)) => Err(rc),
        Err(Failure::Daemon(ControlError::Refused { descr, .. })) if descr == NO_PEERS => Ok(None),
        Err(Failure::Daemon(error)) => Err(report::netlink(ctx, ErrorOp::Show, "peer", &error)),
    }
}
