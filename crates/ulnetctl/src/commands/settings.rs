//! `global show`, `stats show` and `set <param> <value>`: the cYAML-dialect commands.
//!
//! lustre: lnet/utils/lnetctl.c `jt_show_global()`, `jt_show_stats()`, `jt_set_*()`;
//! liblnetconfig.c `lustre_lnet_show_stats()`, `lustre_lnet_config_*()`.

use ulnet_config::render::{self, strerror};
use ulnet_control::message::{SetParam, errno};
use ulnet_control::{ControlError, Request, Response};

use super::{GLOBAL_CMDS, SET_CMDS, STATS_CMDS};
use crate::cnum::parse_long;
use crate::dispatch::check_cmd;
use crate::{Ctx, Failure, report};

pub(crate) fn global_show(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    let rc = check_cmd(ctx, GLOBAL_CMDS, "global", Some("show"), 0, &argv);
    if rc != 0 {
        return rc;
    }
    match ctx.call(&Request::GlobalShow) {
        Ok(response) if ctx.json => {
            ctx.print_json(&response);
            0
        }
        Ok(Response::Global(global)) => {
            let text = render::global_show(&global.into());
            ctx.out(&text);
            0
        }
        Ok(_) => report::unexpected(ctx, "not the global settings"),
        Err(Failure::Reported(rc)) => rc,
        Err(Failure::Daemon(error)) => {
            report::cyaml_quoted(ctx, "show", "global", error.errno(), &error.descr());
            error.errno()
        }
    }
}

pub(crate) fn stats_show(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    let rc = check_cmd(ctx, STATS_CMDS, "stats", Some("show"), 0, &argv);
    if rc != 0 {
        return rc;
    }
    match ctx.call(&Request::StatsShow) {
        Ok(response) if ctx.json => {
            ctx.print_json(&response);
            0
        }
        Ok(Response::Stats(stats)) => {
            let text = render::stats_show(&stats);
            ctx.out(&text);
            0
        }
        Ok(_) => report::unexpected(ctx, "not the statistics"),
        Err(Failure::Reported(rc)) => rc,
        Err(Failure::Daemon(error)) => {
            // lustre: `"cannot get lnet statistics: %s", strerror(-rc)`.
            let descr =
                format!("cannot get lnet statistics: {}", strerror(error.errno().saturating_neg()));
            report::cyaml_quoted(ctx, "show", "statistics", error.errno(), &descr);
            error.errno()
        }
    }
}

/// `stats reset`: lnetctl.c `jt_reset_stats()`, liblnetconfig.c `lustre_lnet_reset_stats()`
/// (a failure reports under `show`/`statistics`, as lnetctl does).
pub(crate) fn stats_reset(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    let rc = check_cmd(ctx, STATS_CMDS, "stats", Some("reset"), 0, &argv);
    if rc != 0 {
        return rc;
    }
    match ctx.call(&Request::StatsReset) {
        Ok(Response::Done) => 0,
        Ok(_) => report::unexpected(ctx, "not an acknowledgement"),
        Err(Failure::Reported(rc)) => rc,
        Err(Failure::Daemon(error)) => {
            let descr = format!(
                "cannot reset lnet statistics: {}",
                strerror(error.errno().saturating_neg())
            );
            report::cyaml_quoted(ctx, "show", "statistics", error.errno(), &descr);
            error.errno()
        }
    }
}

/// Every `set <param>` subcommand: `argv[0]` is the parameter.
pub(crate) fn set(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    let word = argv.first().map_or("", String::as_str);
    let Some(param) = SetParam::from_name(word) else {
        // The dispatcher only routes the table's words here.
        return report::unexpected(ctx, "unknown set parameter");
    };
    // lnetctl looks its help up under this name, finds none, and prints nothing.
    let help_name = match param {
        SetParam::MaxRecoveryPingInterval => "maximum recovery_interval",
        other => other.name(),
    };
    let rc = check_cmd(ctx, SET_CMDS, "set", Some(help_name), 2, &argv);
    if rc != 0 {
        return rc;
    }
    let text = argv.get(1).map_or("", String::as_str);
    let value = match parse_long(text) {
        Some(value) if param != SetParam::Routing || value == 0 || value == 1 => value,
        _ => {
            report::cyaml(ctx, "parser", "set", -1, parse_error(param));
            return -1;
        }
    };
    let buffers =
        matches!(param, SetParam::TinyBuffers | SetParam::SmallBuffers | SetParam::LargeBuffers);
    if buffers && value < -1 {
        // lustre: liblnetconfig.c `lustre_lnet_config_buffers()`, -1 meaning "unchanged".
        let descr = "tiny, small and large must be >= 0";
        report::cyaml_quoted(ctx, "add", "buf", -errno::ERANGE, descr);
        return -errno::ERANGE;
    }
    match ctx.call(&Request::Set { param, value }) {
        Ok(Response::Done) => 0,
        Ok(_) => report::unexpected(ctx, "not an acknowledgement"),
        Err(Failure::Reported(rc)) => rc,
        Err(Failure::Daemon(error)) if param == SetParam::Routing => {
            // lustre: `lustre_lnet_config_routing()`: "cannot %s routing %s", under `add` or
            // `del` as it enables or disables.
            let (cmd, verb) = if value == 1 { ("add", "enable") } else { ("del", "disable") };
            let descr =
                format!("cannot {verb} routing {}", strerror(error.errno().saturating_neg()));
            report::cyaml_quoted(ctx, cmd, "routing", error.errno(), &descr);
            error.errno()
        }
        Err(Failure::Daemon(error)) if buffers => {
            let descr =
                format!("cannot configure buffers: {}", strerror(error.errno().saturating_neg()));
            report::cyaml_quoted(ctx, "add", "buf", error.errno(), &descr);
            error.errno()
        }
        Err(Failure::Daemon(error)) => {
            let entity = match &error {
                ControlError::Global { entity, .. } => entity.clone(),
                _ => param.name().to_string(),
            };
            report::cyaml_quoted(ctx, "add", &entity, error.errno(), &error.descr());
            error.errno()
        }
    }
}

/// lnetctl's description when the value does not parse (printed without quotes).
fn parse_error(param: SetParam) -> &'static str {
    match param {
        SetParam::TinyBuffers => "cannot parse tiny_buffers value",
        SetParam::SmallBuffers => "cannot parse small_buffers value",
        SetParam::LargeBuffers => "cannot parse large_buffers value",
        SetParam::Routing => "cannot parse routing value.\nmust be 0 for disable or 1 for enable",
        SetParam::NumaRange => "cannot parse numa_range value",
        SetParam::MaxInterfaces => "cannot parse max_interfaces value",
        SetParam::Discovery => "cannot parse discovery value",
        SetParam::DropAsymRoute => "cannot parse drop_asym_route value",
        SetParam::RetryCount => "cannot parse retry_count value",
        SetParam::TransactionTimeout => "cannot parse transaction timeout value",
        SetParam::HealthSensitivity => "cannot parse health sensitivity value",
        SetParam::RecoveryInterval => "cannot parse recovery interval value",
        SetParam::RouterSensitivity => "cannot parse router sensitivity value",
        SetParam::ResponseTracking => "cannot parse response_tracking value",
        SetParam::RecoveryLimit => "cannot parse recovery_limit value",
        SetParam::MaxRecoveryPingInterval => "cannot parse maximum recovery interval value",
    }
}
