//! `peer show` and `peer list`.
//!
//! lustre: lnet/utils/lnetctl.c `jt_show_peer()`, `jt_list_peer()`, `yaml_lnet_peer()`,
//! `yaml_lnet_peer_display()`.

use ulnet_config::render::{self, ErrorOp, ShowMode};
use ulnet_control::{ControlError, Request, Response};
use ulnet_proto::addr::Nid;

use super::PEER_CMDS;
use super::net::verbosity;
use crate::dispatch::{check_cmd, print_help};
use crate::getopt::{Getopt, HasArg, LongOpt, Opt};
use crate::{Ctx, Failure, report};

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
    let mut nid = None;
    let mut level = 0;
    let mut getopt = Getopt::new(argv, "hn:v::", LONGS);
    while let Some(opt) = getopt.next() {
        match opt {
            Opt::Found { val: 'n', arg } => nid = arg,
            Opt::Found { val: 'v', arg } => level = verbosity(&mut getopt, arg.as_deref()),
            Opt::Error { message, .. } => {
                ctx.err(message.as_deref().unwrap_or(""));
                print_help(ctx, PEER_CMDS, "peer", Some("show"));
                return 0;
            }
            // Including 'h', which lnetctl's switch does not handle.
            Opt::Found { .. } => return 0,
        }
    }
    let peers = match peer_request(ctx, &Request::PeerShow { nid, level }) {
        Ok(Some(Response::Peers(peers))) => peers,
        Ok(Some(_)) => return report::unexpected(ctx, "not a peer list"),
        Ok(None) => return 0,
        Err(rc) => return rc,
    };
    let peers: Result<Vec<render::PeerEntry>, _> =
        peers.iter().map(render::PeerEntry::try_from).collect();
    match peers {
        Ok(peers) => {
            let text = render::peer_show(&peers, ShowMode::Show(level));
            ctx.out(&text);
            0
        }
        Err(error) => report::unexpected(ctx, &error.to_string()),
    }
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
