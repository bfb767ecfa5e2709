//! `debug recovery --local|--peer`, `debug peer --nid NID` and `debug nidlist`.
//!
//! lustre: lnet/utils/lnetctl.c `jt_show_recovery()`, `yaml_debug_recovery()`; api-ni.c
//! `lnet_dbg_recov_show_dump()` (`nid-0`, `nid-1`, ... under `Local NI recovery` or
//! `Peer NI recovery`).

use ulnet_config::render::{self, RecoveryQueue as ShownQueue};
use ulnet_control::message::{RecoveryQueue, errno};
use ulnet_control::{Request, Response};
use ulnet_proto::addr::{Nid, NidList};

use crate::dispatch::RC_BAD_PARAM;

use super::DEBUG_CMDS;
use crate::dispatch::check_cmd;
use crate::{Ctx, Failure, report};
use ulnet_getopt::{Getopt, HasArg, LongOpt, Opt};

/// Without `--local` or `--peer` lnetctl fails with -EINVAL and prints nothing; an unknown
/// option returns 0. An empty queue prints nothing; a failure prints
/// `Operation failed: <descr>` on stdout.
pub(crate) fn recovery(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    static LONGS: &[LongOpt] =
        &[LongOpt::new("local", HasArg::No, 'l'), LongOpt::new("peer", HasArg::No, 'p')];
    let rc = check_cmd(ctx, DEBUG_CMDS, "debug", Some("recovery"), 0, &argv);
    if rc != 0 {
        return rc;
    }
    let mut queue = None;
    let mut getopt = Getopt::new(argv, "lp", LONGS);
    while let Some(opt) = getopt.next() {
        match opt {
            Opt::Found { val: 'l', .. } => queue = Some(RecoveryQueue::Local),
            Opt::Found { val: 'p', .. } => queue = Some(RecoveryQueue::Peer),
            Opt::Found { .. } | Opt::Error { .. } => return 0,
        }
    }
    let Some(queue) = queue else {
        return -errno::EINVAL;
    };
    let nids = match ctx.call(&Request::DebugRecovery { queue }) {
        Ok(response) if ctx.json => {
            ctx.print_json(&response);
            return 0;
        }
        Ok(Response::Recovery(nids)) => nids,
        Ok(_) => return report::unexpected(ctx, "not a recovery queue"),
        Err(Failure::Reported(rc)) => return rc,
        Err(Failure::Daemon(error)) => {
            ctx.out(&format!("Operation failed: {}\n", error.descr()));
            return -errno::EINVAL;
        }
    };
    let nids: Result<Vec<Nid>, _> = nids.iter().map(|text| text.parse::<Nid>()).collect();
    let Ok(nids) = nids else {
        return report::unexpected(ctx, "a recovery NID does not parse");
    };
    let shown = match queue {
        RecoveryQueue::Local => ShownQueue::Local,
        RecoveryQueue::Peer => ShownQueue::Peer,
    };
    let text = render::recovery_show(shown, &nids);
    ctx.out(&text);
    0
}

/// `debug nidlist NIDLIST [NID]`: the nidlist as parsed, and whether NID matches it.
/// lustre: lnetctl.c `jt_debug_nidlist()`; liblnetconfig.c `lustre_lnet_debug_nidlist()`.
pub(crate) fn nidlist(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    let (list_text, match_text) = match argv.as_slice() {
        [_] | [] => {
            ctx.err("Missing nidlist argument\n");
            return -errno::EINVAL;
        }
        [_, list] => (list, None),
        [_, list, nid] => (list, Some(nid)),
        _ => {
            ctx.err("Too many arguments\n");
            return -errno::EINVAL;
        }
    };
    let Ok(list) = NidList::parse(list_text) else {
        ctx.err(&format!("Unable to parse nidlist from: {list_text}\n"));
        return RC_BAD_PARAM;
    };
    let mut text = format!("nidlist parsed to: {list}\n");
    if let Some(nid_text) = match_text {
        let Ok(nid) = nid_text.parse::<Nid>() else {
            ctx.out(&text);
            ctx.err(&format!("Invalid nid for matching {nid_text}\n"));
            return RC_BAD_PARAM;
        };
        let verdict = if list.matches(&nid) { "matches" } else { "does not match" };
        text.push_str(&format!("{nid_text} {verdict} nidlist {list_text}\n"));
    }
    ctx.out(&text);
    0
}

/// `debug peer --nid NID`: the node writes its TCP LND's state for the peer to its log, as the
/// kernel writes socklnd's peer dump to its debug log; nothing is printed on success. Without
/// `--nid`, or with a NID that does not parse, lnetctl's report and -EINVAL; when the node
/// cannot dump the peer, lnetctl's report of a failed ioctl (`errno: -1`, `Error`) and -1.
/// lustre: lnetctl.c `jt_show_peer_debug_info()`; liblnetconfig.c
/// `lustre_lnet_show_peer_debug_info()`.
pub(crate) fn peer(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    static LONGS: &[LongOpt] = &[LongOpt::new("nid", HasArg::Required, 'k')];
    let rc = check_cmd(ctx, DEBUG_CMDS, "debug", Some("peer"), 0, &argv);
    if rc != 0 {
        return rc;
    }
    let mut nid = None;
    let mut getopt = Getopt::new(argv, "k", LONGS);
    while let Some(opt) = getopt.next() {
        match opt {
            Opt::Found { val: 'k', arg } => nid = arg,
            Opt::Found { .. } | Opt::Error { .. } => return 0,
        }
    }
    let Some(text) = nid else {
        report::cyaml(ctx, "debug", "peer", RC_BAD_PARAM, "--nid must be specified");
        return RC_BAD_PARAM;
    };
    let Ok(parsed) = text.parse::<Nid>() else {
        let descr = format!("badly formatted primary NID: {text}");
        report::cyaml_quoted(ctx, "debug", "peer", RC_BAD_PARAM, &descr);
        return RC_BAD_PARAM;
    };
    match ctx.call(&Request::DebugPeer { nid: parsed.to_string() }) {
        Ok(Response::Done) => 0,
        Ok(_) => report::unexpected(ctx, "not an acknowledgement"),
        Err(Failure::Reported(rc)) => rc,
        Err(Failure::Daemon(_)) => {
            // l_ioctl()'s -1; the reason is in the node's log.
            report::cyaml(ctx, "debug", "peer", -1, "Error");
            -1
        }
    }
}
