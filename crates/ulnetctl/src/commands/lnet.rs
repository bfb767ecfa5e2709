//! `lnet configure` and `lnet unconfigure`.
//!
//! lustre: lnet/utils/lnetctl.c `jt_config_lnet()`, `jt_unconfig_lnet()`.

use ulnet_config::render::ErrorOp;
use ulnet_control::{Request, Response};

use super::LNET_CMDS;
use crate::dispatch::check_cmd;
use crate::{Ctx, Failure, report};
use ulnet_getopt::{Getopt, HasArg, LongOpt, Opt};

pub(crate) fn configure(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    static LONGS: &[LongOpt] =
        &[LongOpt::new("all", HasArg::No, 'a'), LongOpt::new("large", HasArg::No, 'l')];
    let rc = check_cmd(ctx, LNET_CMDS, "lnet", Some("configure"), 0, &argv);
    if rc != 0 {
        return rc;
    }
    let mut getopt = Getopt::new(argv, "al", LONGS);
    let (mut all, mut large_nids) = (false, false);
    while let Some(opt) = getopt.next() {
        match opt {
            Opt::Found { val: 'a', .. } => all = true,
            Opt::Found { val: 'l', .. } => large_nids = true,
            Opt::Error { message, .. } => {
                ctx.err(message.as_deref().unwrap_or(""));
                return 0;
            }
            Opt::Found { .. } => return 0,
        }
    }
    lnet_request(ctx, &Request::Configure { all, large_nids })
}

pub(crate) fn unconfigure(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    let rc = check_cmd(ctx, LNET_CMDS, "lnet", Some("unconfigure"), 0, &argv);
    if rc != 0 {
        return rc;
    }
    lnet_request(ctx, &Request::Unconfigure)
}

/// Errors read `configure: - lnet: {errno, descr: "LNet configure error: <msg>"}` for both
/// commands, and the errno is the return code (`yaml_lnet_configure()` returns it).
fn lnet_request(ctx: &mut Ctx<'_, '_>, request: &Request) -> i32 {
    match ctx.call(request) {
        Ok(Response::Done) => 0,
        Ok(_) => report::unexpected(ctx, "not an acknowledgement"),
        Err(Failure::Reported(rc)) => rc,
        Err(Failure::Daemon(error)) => {
            let descr = format!("LNet configure error: {}", error.descr());
            report::netlink_raw(ctx, ErrorOp::Configure, "lnet", error.errno(), &descr);
            error.errno()
        }
    }
}
