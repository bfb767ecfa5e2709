//! `export [--backup] [FILE]` and `import [--add|--del|--show|--exec] [FILE]`.
//!
//! lustre: lnet/utils/lnetctl.c `jt_export()`, `jt_import()`.

use std::fs::File;
use std::io::{Read, Write};

use ulnet_config::model::{MAX_IMPORT_LEN, import as parse_import};
use ulnet_config::render::{self, ErrorOp, ShowMode, strerror};
use ulnet_control::message::{ImportMode, ImportReply, errno};
use ulnet_control::{ControlError, Request, Response};

use crate::{Ctx, Failure, report};
use ulnet_getopt::{Getopt, HasArg, LongOpt, Opt};

pub(crate) fn export(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    static LONGS: &[LongOpt] =
        &[LongOpt::new("backup", HasArg::No, 'b'), LongOpt::new("help", HasArg::No, 'h')];
    let mut getopt = Getopt::new(argv, "bh", LONGS);
    let mut backup = false;
    while let Some(opt) = getopt.next() {
        match opt {
            Opt::Found { val: 'b', .. } => backup = true,
            other => {
                if let Opt::Error { message: Some(message), .. } = other {
                    ctx.err(&message);
                }
                ctx.out(
                    "export > FILE.yaml : export configuration\n\
                     \t--backup: export only what's necessary for reconfig\n\
                     \t--help: display this help\n",
                );
                return 0;
            }
        }
    }
    // lnetctl takes the file from a fixed position of the permuted argv.
    let argc = getopt.argc();
    let path = match (backup, argc) {
        (true, 3..) => Some(getopt.arg(2).to_string()),
        (false, 2..) => Some(getopt.arg(1).to_string()),
        _ => None,
    };
    let mut file = match path.as_deref().map(File::create) {
        Some(Ok(file)) => Some(file),
        // lnetctl fails silently when it cannot open the file.
        Some(Err(_)) => return -1,
        None => None,
    };
    let state = match ctx.call(&Request::Export { backup }) {
        Ok(Response::Export(state)) => state,
        Ok(_) => return report::unexpected(ctx, "not an export"),
        // lnetctl's jt_export() prints each part's error and goes on, with status 0, LNet
        // not running included (issue 21). No node to ask, or a node with LNet down, is the
        // same: the report is printed, the status is 0.
        Err(Failure::Reported(_)) => return 0,
        Err(Failure::Daemon(error)) => {
            report::netlink(ctx, ErrorOp::Show, "net", &error);
            return 0;
        }
    };
    let text = if ctx.json {
        let mut json = serde_json::to_string_pretty(&Response::Export(state)).unwrap_or_default();
        json.push('\n');
        json
    } else {
        match render::ExportState::try_from(&state) {
            Ok(state) => render::export(&state, backup),
            Err(error) => return report::unexpected(ctx, &error.to_string()),
        }
    };
    match file.as_mut() {
        Some(file) => {
            if file.write_all(text.as_bytes()).is_err() {
                return -1;
            }
        }
        None => ctx.out(&text),
    }
    0
}

pub(crate) fn import(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    static LONGS: &[LongOpt] = &[
        LongOpt::new("add", HasArg::No, 'a'),
        LongOpt::new("del", HasArg::No, 'd'),
        LongOpt::new("show", HasArg::No, 's'),
        LongOpt::new("exec", HasArg::No, 'e'),
        LongOpt::new("old-api", HasArg::No, 'o'),
        LongOpt::new("help", HasArg::No, 'h'),
    ];
    let mut getopt = Getopt::new(argv, "adseoh", LONGS);
    let mut mode = ImportMode::Add;
    let mut option_found = false;
    while let Some(opt) = getopt.next() {
        option_found = true;
        match opt {
            Opt::Found { val: 'a', .. } => mode = ImportMode::Add,
            Opt::Found { val: 'd', .. } => mode = ImportMode::Del,
            Opt::Found { val: 's', .. } => mode = ImportMode::Show,
            Opt::Found { val: 'e', .. } => mode = ImportMode::Exec,
            // There is one back end: --old-api changes nothing.
            Opt::Found { val: 'o', .. } => {}
            Opt::Found { val: 'h', .. } => {
                ctx.out(
                    "import FILE\n\
                     import < FILE : import a file\n\
                     \t--add: add configuration\n\
                     \t--del: delete configuration\n\
                     \t--show: show configuration\n\
                     \t--exec: execute command\n\
                     \t--old-api: do not use netlink (for tests)\n\
                     \t--help: display this help\n\
                     If no command option is given then --add is assumed by default\n",
                );
                return 0;
            }
            Opt::Error { message, .. } => {
                ctx.err(message.as_deref().unwrap_or(""));
                return 0;
            }
            Opt::Found { .. } => return 0,
        }
    }
    // lnetctl's rule: the file is argv[2] after one or more options when there are exactly
    // three words, argv[1] without options when there are two; otherwise stdin.
    let path = match (option_found, getopt.argc()) {
        (true, 3) => Some(getopt.arg(2).to_string()),
        (false, 2) => Some(getopt.arg(1).to_string()),
        _ => None,
    };
    let text = match read_input(ctx, path.as_deref()) {
        Ok(text) => text,
        Err(rc) => return rc,
    };
    // Parse here first: malformed input is reported exactly as lnetctl reports it, without
    // needing the node.
    let imported = match parse_import(&text, mode.into()) {
        Ok(imported) => imported,
        Err(error) => {
            ctx.err(&error.report(mode.into()));
            return -errno::EINVAL;
        }
    };
    for warning in &imported.warnings {
        ctx.err(&format!("{warning}\n"));
    }
    let reply = match ctx.call(&Request::Import { mode, text }) {
        Ok(Response::Import(reply)) => reply,
        Ok(_) => return report::unexpected(ctx, "not an import reply"),
        Err(Failure::Reported(rc)) => return rc,
        Err(Failure::Daemon(ControlError::Global { entity, errno, descr })) => {
            report::cyaml_quoted(ctx, "add", &entity, errno, &descr);
            return errno;
        }
        Err(Failure::Daemon(error)) => {
            let op = ulnet_config::model::ImportMode::from(mode).error_op();
            return report::netlink(ctx, op, "import", &error);
        }
    };
    if ctx.json {
        ctx.print_json(&Response::Import(reply.clone()));
        return exec_rc(&reply);
    }
    for warning in &reply.warnings {
        ctx.err(&format!("{warning}\n"));
    }
    match render_reply(&reply) {
        Ok(text) => {
            ctx.out(&text);
            exec_rc(&reply)
        }
        Err(error) => report::unexpected(ctx, &error.to_string()),
    }
}

/// -1 when an executed ping or discovery had a failed target.
fn exec_rc(reply: &ImportReply) -> i32 {
    if reply.exec.iter().any(|exec| !exec.reply.failures.is_empty()) { -1 } else { 0 }
}

/// `--show` objects (dialect N, basic level; rules as `udsp show` prints them) and `--exec`
/// results, in that order.
fn render_reply(reply: &ImportReply) -> Result<String, ulnet_control::data::DataError> {
    let shown = &reply.shown;
    let nets: Vec<render::NetEntry> =
        shown.nets.iter().map(render::NetEntry::try_from).collect::<Result<_, _>>()?;
    let routes: Vec<render::RouteEntry> =
        shown.routes.iter().map(render::RouteEntry::try_from).collect::<Result<_, _>>()?;
    let peers: Vec<render::PeerEntry> =
        shown.peers.iter().map(render::PeerEntry::try_from).collect::<Result<_, _>>()?;
    let udsp: Vec<render::UdspEntry> =
        shown.udsp.iter().cloned().map(render::UdspEntry::from).collect();
    let mut text = render::net_show(&nets, ShowMode::Show(0));
    text.push_str(&render::route_show(&routes, ShowMode::Show(0)));
    text.push_str(&render::peer_show(&peers, ShowMode::Show(0)));
    text.push_str(&render::udsp_show(&udsp));
    for exec in &reply.exec {
        let (replies, failures) = exec.reply.to_render()?;
        text.push_str(&render::ping_show(exec.command.into(), &replies, &failures));
    }
    Ok(text)
}

/// The input text: the file, or stdin without one (or with `-`). At most
/// [`MAX_IMPORT_LEN`] bytes are read; more is reported by the parser as too large.
fn read_input(ctx: &mut Ctx<'_, '_>, path: Option<&str>) -> Result<String, i32> {
    let limit = (MAX_IMPORT_LEN + 1) as u64;
    let mut bytes = Vec::new();
    let read = match path {
        Some(path) if path != "-" => match File::open(path) {
            Ok(file) => file.take(limit).read_to_end(&mut bytes),
            Err(error) => {
                let code = error.raw_os_error().unwrap_or(errno::EIO);
                let descr = format!("cannot open '{path}': {}", strerror(code));
                report::cyaml(ctx, "yaml", "builder", -code, &descr);
                return Err(-code);
            }
        },
        _ => (&mut *ctx.io.stdin).take(limit).read_to_end(&mut bytes),
    };
    if let Err(error) = read {
        let code = error.raw_os_error().unwrap_or(errno::EIO);
        let descr = format!("cannot read '{}': {}", path.unwrap_or("stdin"), strerror(code));
        report::cyaml(ctx, "yaml", "builder", -code, &descr);
        return Err(-code);
    }
    // YAML is UTF-8; invalid bytes become U+FFFD rather than failing the whole read.
    Ok(String::from_utf8(bytes)
        .unwrap_or_else(|error| String::from_utf8_lossy(error.as_bytes()).into_owned()))
}
