//! lnetctl's error reports (docs/protocol/cli.md §2), written to stderr, and the return codes that go
//! with them.

use ulnet_config::render::{CyamlError, CyamlErrorEntry, ErrorOp, NetlinkError};
use ulnet_control::ControlError;
use ulnet_control::message::errno;

use crate::Ctx;

/// A netlink-path failure: `<op>: - <object>: {errno, descr}` in dialect N. lnetctl's
/// netlink helpers then return -EINVAL whatever the errno (lnetctl.c
/// `yaml_lnet_config_ni()`, `yaml_lnet_peer()`, `yaml_lnet_ping()`).
pub fn netlink(ctx: &mut Ctx<'_, '_>, op: ErrorOp, object: &str, error: &ControlError) -> i32 {
    netlink_raw(ctx, op, object, error.errno(), &error.descr());
    -errno::EINVAL
}

/// A dialect-N report with explicit fields; returns nothing, callers pick the code.
pub fn netlink_raw(ctx: &mut Ctx<'_, '_>, op: ErrorOp, object: &str, errno: i32, descr: &str) {
    let text = NetlinkError::new(op, object, errno, descr).render();
    ctx.err(&text);
}

/// A cYAML report (`cYAML_build_error(rc, -1, cmd, entity, descr)`), `descr` printed as is.
pub fn cyaml(ctx: &mut Ctx<'_, '_>, cmd: &str, entity: &str, errno: i32, descr: &str) {
    let entry = CyamlErrorEntry {
        cmd: cmd.to_string(),
        entity: entity.to_string(),
        seq_no: None,
        errno,
        descr: descr.to_string(),
    };
    let text = CyamlError { entries: vec![entry] }.render();
    ctx.err(&text);
}

/// A cYAML report whose description carries lnetctl's literal double quotes.
pub fn cyaml_quoted(ctx: &mut Ctx<'_, '_>, cmd: &str, entity: &str, errno: i32, descr: &str) {
    cyaml(ctx, cmd, entity, errno, &format!("\"{descr}\""));
}

/// The node could not be reached, or the exchange broke. lnetctl's nearest report is its
/// startup failure (`lnetctl: - startup: {errno: -1, descr: cannot register LNet device}`,
/// lnetctl.c `main()`), when it cannot open the LNet device: the same cYAML shape, headed
/// by the program name, with the errno of the failure and what happened. The return code is
/// the errno, as lnetctl's `main()` returns the failure code.
pub fn transport(ctx: &mut Ctx<'_, '_>, entity: &str, errno: i32, descr: &str) -> i32 {
    let program = ctx.program.clone();
    cyaml(ctx, &program, entity, errno, descr);
    errno
}

/// The node's answer does not fit the request (a daemon bug). Reported like a transport
/// failure, with -EPROTO.
pub fn unexpected(ctx: &mut Ctx<'_, '_>, what: &str) -> i32 {
    transport(ctx, "request", -errno::EPROTO, &format!("unexpected answer from ulnetd: {what}"))
}
