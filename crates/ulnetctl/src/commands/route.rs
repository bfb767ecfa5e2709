//! `route add`, `route del`, `route show` and `routing show`.
//!
//! lustre: lnet/utils/lnetctl.c `jt_add_route()`, `jt_del_route()`, `jt_show_route()`,
//! `yaml_lnet_route()`, `yaml_lnet_router_gateways()`, `jt_show_routing()`;
//! liblnetconfig.c `lustre_lnet_show_routing()`.

use ulnet_config::render::{self, ErrorOp, ShowMode};
use ulnet_control::message::{RouteSpec, errno};
use ulnet_control::{Request, Response};
use ulnet_getopt::{Getopt, HasArg, LongOpt, Opt};

use super::manage::expand_nidlist;
use super::{ROUTE_CMDS, ROUTING_CMDS, print_rendered};
use crate::cnum::parse_long;
use crate::dispatch::{check_cmd, print_help};
use crate::{Ctx, Failure, report};

/// Most routes one `--gateway` nidlist expands to: the bound `route:` blocks of an import
/// have (ulnet-config's `DEFAULT_EXPANSION_LIMIT`, `LNET_MAX_NIDS_PER_PEER` in lnetctl's
/// peer lists); lnetctl itself has none.
pub(crate) const MAX_GATEWAYS: usize = 128;

/// `route add`'s options (lnetctl.c `jt_add_route()`).
static ADD_LONGS: &[LongOpt] = &[
    LongOpt::new("net", HasArg::Required, 'n'),
    LongOpt::new("gateway", HasArg::Required, 'g'),
    LongOpt::new("hop", HasArg::Required, 'c'),
    LongOpt::new("hop-count", HasArg::Required, 'c'),
    LongOpt::new("priority", HasArg::Required, 'p'),
];

/// `route del`'s options (`jt_del_route()`).
static DEL_LONGS: &[LongOpt] =
    &[LongOpt::new("net", HasArg::Required, 'n'), LongOpt::new("gateway", HasArg::Required, 'g')];

/// `route show`'s options (`jt_show_route()`).
static SHOW_LONGS: &[LongOpt] = &[
    LongOpt::new("net", HasArg::Required, 'n'),
    LongOpt::new("gateway", HasArg::Required, 'g'),
    LongOpt::new("hop-count", HasArg::Required, 'c'),
    LongOpt::new("hop", HasArg::Required, 'c'),
    LongOpt::new("priority", HasArg::Required, 'p'),
    LongOpt::new("verbose", HasArg::No, 'v'),
];

/// What the options of one `route` command said.
#[derive(Debug, Default)]
struct RouteOptions {
    net: Option<String>,
    gateway: Option<String>,
    /// -1 (lnetctl's "unset") when not given or not a number.
    hop: i64,
    priority: i64,
    verbose: bool,
}

/// `route add --net NET --gateway NIDLIST [--hop N] [--priority P]`.
pub(crate) fn add(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    let rc = check_cmd(ctx, ROUTE_CMDS, "route", Some("add"), 0, &argv);
    if rc != 0 {
        return rc;
    }
    let options = match route_options(ctx, argv, "add", "n:g:c:p:", ADD_LONGS) {
        Ok(options) => options,
        Err(rc) => return rc,
    };
    change(ctx, options, ErrorOp::Add)
}

/// `route del --net NET --gateway NIDLIST`.
pub(crate) fn del(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    let rc = check_cmd(ctx, ROUTE_CMDS, "route", Some("del"), 0, &argv);
    if rc != 0 {
        return rc;
    }
    let options = match route_options(ctx, argv, "del", "n:g:", DEL_LONGS) {
        Ok(options) => options,
        Err(rc) => return rc,
    };
    // lnetctl sends no hop or priority for a delete.
    let options = RouteOptions { hop: -1, priority: -1, ..options };
    change(ctx, options, ErrorOp::Del)
}

/// `route show [--net] [--gateway] [--hop] [--priority] [--verbose]`. As lnetctl's request
/// carries the hop and priority filters only inside a net or gateway item, they filter
/// nothing on their own.
pub(crate) fn show(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    let rc = check_cmd(ctx, ROUTE_CMDS, "route", Some("show"), 0, &argv);
    if rc != 0 {
        return rc;
    }
    let options = match route_options(ctx, argv, "show", "c:n:g:p:v", SHOW_LONGS) {
        Ok(options) => options,
        Err(rc) => return rc,
    };
    let verbose = options.verbose;
    let mut filter = match route_spec(ctx, &options, ErrorOp::Show) {
        Ok(spec) => spec,
        Err(rc) => return rc,
    };
    if filter.net.is_none() && filter.gateways.is_empty() {
        filter = RouteSpec::default();
    }
    let routes = match ctx.call(&Request::RouteShow { filter, verbose }) {
        Ok(response) if ctx.json => {
            ctx.print_json(&response);
            return 0;
        }
        Ok(Response::Routes(routes)) => routes,
        Ok(_) => return report::unexpected(ctx, "not a route list"),
        Err(Failure::Reported(rc)) => return rc,
        Err(Failure::Daemon(error)) => {
            return report::netlink(ctx, ErrorOp::Show, "route", &error);
        }
    };
    // The request version is the verbosity: 1 adds hop, priority, state and type.
    let mode = ShowMode::Show(u32::from(verbose));
    print_rendered(ctx, &routes, |routes: &[render::RouteEntry]| render::route_show(routes, mode))
}

/// `routing show`: the pools of each CPT and the routing switch in cYAML; nothing when the
/// pools were never allocated (the kernel answers -ENOENT, which lnetctl keeps quiet).
pub(crate) fn routing_show(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    let rc = check_cmd(ctx, ROUTING_CMDS, "routing", Some("show"), 0, &argv);
    if rc != 0 {
        return rc;
    }
    match ctx.call(&Request::RoutingShow) {
        Ok(response) if ctx.json => {
            ctx.print_json(&response);
            0
        }
        Ok(Response::Routing(routing)) => {
            let text = render::routing_show(&(&routing).into());
            ctx.out(&text);
            0
        }
        Ok(_) => report::unexpected(ctx, "not the routing state"),
        Err(Failure::Reported(rc)) => rc,
        Err(Failure::Daemon(error)) => {
            // lustre: `"cannot get routing information: %s"`.
            let descr = format!(
                "cannot get routing information: {}",
                render::strerror(error.errno().saturating_neg())
            );
            report::cyaml_quoted(ctx, "show", "routing", error.errno(), &descr);
            error.errno()
        }
    }
}

/// Parses a `route` command's options as lnetctl does: a hop or priority that does not
/// parse is ignored; an unknown option prints the help and ends the command with 0.
fn route_options(
    ctx: &mut Ctx<'_, '_>,
    argv: Vec<String>,
    word: &str,
    shorts: &'static str,
    longs: &'static [LongOpt],
) -> Result<RouteOptions, i32> {
    let mut options = RouteOptions { hop: -1, priority: -1, ..RouteOptions::default() };
    let mut getopt = Getopt::new(argv, shorts, longs);
    while let Some(opt) = getopt.next() {
        match opt {
            Opt::Found { val: 'n', arg } => options.net = arg,
            Opt::Found { val: 'g', arg } => options.gateway = arg,
            Opt::Found { val: 'c', arg } => {
                options.hop = arg.as_deref().and_then(parse_long).unwrap_or(-1);
            }
            Opt::Found { val: 'p', arg } => {
                options.priority = arg.as_deref().and_then(parse_long).unwrap_or(-1);
            }
            Opt::Found { val: 'v', .. } => options.verbose = true,
            Opt::Error { message, .. } => {
                ctx.err(message.as_deref().unwrap_or(""));
                print_help(ctx, ROUTE_CMDS, "route", Some(word));
                return Err(0);
            }
            Opt::Found { .. } => return Err(0),
        }
    }
    Ok(options)
}

/// `route add` and `route del`: both parameters are mandatory (checked before anything is
/// sent, on stdout), then the request; its refusal is reported in dialect N.
fn change(ctx: &mut Ctx<'_, '_>, options: RouteOptions, op: ErrorOp) -> i32 {
    let missing = match (&options.net, &options.gateway) {
        (None, None) => Some("net , gateway"),
        (None, Some(_)) => Some("net"),
        (Some(_), None) => Some("gateway"),
        (Some(_), Some(_)) => None,
    };
    if let Some(missing) = missing {
        ctx.out(&format!("missing mandatory parameters:'{missing}'\n"));
        return -errno::EINVAL;
    }
    let spec = match route_spec(ctx, &options, op) {
        Ok(spec) => spec,
        Err(rc) => return rc,
    };
    let request =
        if op == ErrorOp::Add { Request::RouteAdd(spec) } else { Request::RouteDel(spec) };
    match ctx.call(&request) {
        Ok(Response::Done) => 0,
        Ok(_) => report::unexpected(ctx, "not an acknowledgement"),
        Err(Failure::Reported(rc)) => rc,
        Err(Failure::Daemon(error)) => report::netlink(ctx, op, "route", &error),
    }
}

/// The request's routes: the gateway nidlist expanded (one route per NID), hop and priority
/// left out where lnetctl leaves them out (-1).
fn route_spec(
    ctx: &mut Ctx<'_, '_>,
    options: &RouteOptions,
    op: ErrorOp,
) -> Result<RouteSpec, i32> {
    let gateways = match &options.gateway {
        Some(text) => match expand_nidlist(std::slice::from_ref(text), MAX_GATEWAYS) {
            Ok(nids) => nids,
            Err(error) => {
                report::netlink_raw(ctx, op, "route", error.errno, error.descr);
                return Err(-errno::EINVAL);
            }
        },
        None => Vec::new(),
    };
    Ok(RouteSpec {
        net: options.net.clone(),
        gateways,
        hop: (options.hop != -1).then_some(options.hop),
        priority: (options.priority != -1).then_some(options.priority),
    })
}
