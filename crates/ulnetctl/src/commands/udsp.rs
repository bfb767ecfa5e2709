//! `udsp add|del|show`: lnetctl's UDSP handlers. Options, checks, messages and exit codes
//! are lnetctl's; the node keeps and applies the rules (the kernel's part).
//!
//! Quirks kept from lnetctl: an unknown option prints the subcommand's help (for `show`,
//! `net show`'s help) and succeeds; `add` without any of `--src`, `--dst`, `--rte` prints
//! the help and succeeds; `del --idx -1` deletes every rule, as `--all` does; `show` of an
//! index with no rule prints nothing and succeeds. Errors are cYAML reports under `add:`
//! for both `add` and `del`; `add` returns the node's errno positive, `del` negative.
//! Not kept: lnetctl stores a priority or index beyond 32 bits truncated; ulnetctl refuses
//! a priority above 4294967295 as invalid.
//!
//! lustre: lnet/utils/lnetctl.c `jt_add_udsp()`, `jt_del_udsp()`, `jt_show_udsp()`;
//! liblnetconfig_udsp.c `lustre_lnet_add_udsp()`, `lustre_lnet_del_udsp()`,
//! `lustre_lnet_show_udsp()`.

use ulnet_config::render::{self, strerror};
use ulnet_control::message::{Udsp, UdspAdd, errno};
use ulnet_control::{Request, Response};
use ulnet_getopt::{Getopt, HasArg, LongOpt, Opt};
use ulnet_proto::engine::UdspRule;

use super::{NET_CMDS, UDSP_CMDS};
use crate::cnum::parse_long;
use crate::dispatch::{check_cmd, print_help};
use crate::{Ctx, Failure, report};

/// `jt_add_udsp()`.
pub(crate) fn add(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    static LONGS: &[LongOpt] = &[
        LongOpt::new("src", HasArg::Required, 's'),
        LongOpt::new("dst", HasArg::Required, 'd'),
        LongOpt::new("rte", HasArg::Required, 'r'),
        LongOpt::new("priority", HasArg::Required, 'p'),
        LongOpt::new("idx", HasArg::Required, 'i'),
    ];
    let rc = check_cmd(ctx, UDSP_CMDS, "udsp", Some("add"), 0, &argv);
    if rc != 0 {
        return rc;
    }
    let mut spec = UdspAdd::default();
    let mut getopt = Getopt::new(argv, "s:d:r:p:i:", LONGS);
    while let Some(opt) = getopt.next() {
        let (val, arg) = match opt {
            Opt::Found { val, arg } => (val, arg.unwrap_or_default()),
            Opt::Error { message, .. } => {
                ctx.err(message.as_deref().unwrap_or(""));
                print_help(ctx, UDSP_CMDS, "udsp", Some("add"));
                return 0;
            }
        };
        match val {
            's' => spec.src = Some(arg),
            'd' => spec.dst = Some(arg),
            'r' => spec.rte = Some(arg),
            'p' => match parse_long(&arg).and_then(|value| u32::try_from(value).ok()) {
                Some(priority) => spec.priority = Some(priority),
                None => {
                    ctx.out(&format!("Invalid priority \"{arg}\"\n"));
                    return -errno::EINVAL;
                }
            },
            'i' => match parse_long(&arg).filter(|idx| *idx >= 0) {
                // An index past every rule appends, whatever its size.
                Some(idx) => spec.idx = Some(u32::try_from(idx).unwrap_or(u32::MAX)),
                None => {
                    ctx.out(&format!("Invalid index \"{arg}\"\n"));
                    return -errno::EINVAL;
                }
            },
            _ => return 0,
        }
    }
    if spec.src.is_none() && spec.dst.is_none() && spec.rte.is_none() {
        print_help(ctx, UDSP_CMDS, "udsp", Some("add"));
        return 0;
    }
    // lnetctl's own checks, before anything reaches the node.
    let (src, dst, rte) = (spec.src.as_deref(), spec.dst.as_deref(), spec.rte.as_deref());
    if let Err(error) = UdspRule::from_lnetctl(src, dst, rte, spec.priority) {
        report::cyaml_quoted(ctx, "add", "udsp", -errno::EINVAL, &error.to_string());
        return -errno::EINVAL;
    }
    match ctx.call(&Request::Udsp(Udsp::Add(spec))) {
        Ok(Response::Done) => 0,
        Ok(_) => report::unexpected(ctx, "not a udsp add reply"),
        Err(Failure::Reported(rc)) => rc,
        Err(Failure::Daemon(error)) => {
            // lustre_lnet_add_udsp(): `rc = errno`, positive.
            let code = error.errno().saturating_neg();
            let descr = format!("cannot add udsp: {}", strerror(code));
            report::cyaml_quoted(ctx, "add", "udsp", code, &descr);
            code
        }
    }
}

/// `jt_del_udsp()`.
pub(crate) fn del(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    static LONGS: &[LongOpt] =
        &[LongOpt::new("all", HasArg::No, 'a'), LongOpt::new("idx", HasArg::Required, 'i')];
    let rc = check_cmd(ctx, UDSP_CMDS, "udsp", Some("del"), 0, &argv);
    if rc != 0 {
        return rc;
    }
    // lnetctl's sentinels: -2 nothing given, -1 every rule.
    let (mut all, mut idx) = (false, -2_i64);
    let mut getopt = Getopt::new(argv, "ai:", LONGS);
    while let Some(opt) = getopt.next() {
        match opt {
            Opt::Found { val: 'a', .. } => all = true,
            Opt::Found { val: 'i', arg } => {
                let arg = arg.unwrap_or_default();
                match parse_long(&arg).filter(|value| *value >= -1) {
                    Some(value) => idx = value,
                    None => {
                        ctx.out(&format!("Invalid index \"{arg}\"\n"));
                        return -errno::EINVAL;
                    }
                }
            }
            Opt::Error { message, .. } => {
                ctx.err(message.as_deref().unwrap_or(""));
                print_help(ctx, UDSP_CMDS, "udsp", Some("del"));
                return 0;
            }
            Opt::Found { .. } => return 0,
        }
    }
    if all && idx != -2 {
        ctx.out("Cannot combine --all with --idx\n");
        return -errno::EINVAL;
    }
    if !all && idx == -2 {
        ctx.out("Must specify --idx or --all\n");
        return -errno::EINVAL;
    }
    let idx = match idx {
        -2 | -1 => None,
        index => Some(u32::try_from(index).unwrap_or(u32::MAX)),
    };
    match ctx.call(&Request::Udsp(Udsp::Del { idx })) {
        Ok(Response::Done) => 0,
        Ok(_) => report::unexpected(ctx, "not a udsp del reply"),
        Err(Failure::Reported(rc)) => rc,
        Err(Failure::Daemon(error)) => {
            // lustre_lnet_del_udsp(): l_ioctl()'s -errno, reported under ADD_CMD.
            let code = error.errno();
            let descr = format!("cannot del udsp: {}", strerror(code.saturating_neg()));
            report::cyaml_quoted(ctx, "add", "udsp", code, &descr);
            code
        }
    }
}

/// `jt_show_udsp()`.
pub(crate) fn show(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    static LONGS: &[LongOpt] = &[LongOpt::new("idx", HasArg::Required, 'i')];
    let rc = check_cmd(ctx, UDSP_CMDS, "udsp", Some("show"), 0, &argv);
    if rc != 0 {
        return rc;
    }
    let mut idx = None;
    let mut getopt = Getopt::new(argv, "i:", LONGS);
    while let Some(opt) = getopt.next() {
        match opt {
            Opt::Found { val: 'i', arg } => {
                let arg = arg.unwrap_or_default();
                match parse_long(&arg).filter(|value| *value >= -1) {
                    Some(value) => idx = u32::try_from(value).ok(),
                    None => {
                        ctx.out(&format!("Invalid index \"{arg}\"\n"));
                        return -errno::EINVAL;
                    }
                }
            }
            Opt::Error { message, .. } => {
                ctx.err(message.as_deref().unwrap_or(""));
                // lnetctl prints `net show`'s help here.
                print_help(ctx, NET_CMDS, "net", Some("show"));
                return 0;
            }
            Opt::Found { .. } => return 0,
        }
    }
    let rules = match ctx.call(&Request::Udsp(Udsp::Show { idx })) {
        Ok(response) if ctx.json => {
            ctx.print_json(&response);
            return 0;
        }
        Ok(Response::Udsp(rules)) => rules,
        Ok(_) => return report::unexpected(ctx, "not a udsp list"),
        Err(Failure::Reported(rc)) => return rc,
        Err(Failure::Daemon(error)) => {
            // lustre_lnet_show_udsp(): `rc = -l_errno`, reported under SHOW_CMD.
            let code = error.errno();
            let descr = format!("cannot get udsp: {}", strerror(code.saturating_neg()));
            report::cyaml_quoted(ctx, "show", "udsp", code, &descr);
            return code;
        }
    };
    let rules: Vec<render::UdspEntry> = rules.into_iter().map(render::UdspEntry::from).collect();
    ctx.out(&render::udsp_show(&rules));
    0
}
