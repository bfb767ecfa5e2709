//! lst's command line over a [`Backend`]: the same command words, options (GNU
//! `getopt_long`), messages, output and exit codes as `lnet/utils/lst.c`.
//!
//! Beyond lst: `--json` (before the command, or as an option of `stat`, `show_error` and
//! `query`) prints results as JSON lines, and `stat` on a terminal redraws its report in
//! place with latency percentiles when the nodes are ulnet nodes.
//!
//! lustre: lnet/utils/lst.c (`jt_lst_*()`, `lst_print_*()`, `lst_cmdlist`),
//! lib/libcfs/parser.c (the dispatcher).

mod backend;
pub mod nids;
pub mod stat;

use std::io::Write;
use std::time::{Duration, Instant};

use ulnet::proto::wire::selftest::{
    BrwCheck, BrwDirection, LST_FEATS_MASK, LST_NAME_SIZE, SrpcBody,
};
use ulnet::{Nid, ProcessId};
use ulnet_getopt::{Getopt, HasArg, LongOpt, Opt};

pub use backend::{Backend, NoConsole};

use crate::console::{
    BrwSpec, ConsoleError, DEFAULT_BATCH, GroupUpdate, NodeCounts, NodeState, RpcEntry, Target,
    TestKind, TestSpec, TransResult,
};
use stat::{StatFormat, compare, render};

use crate::ext::LatencySummary;

/// `LNET_MTU`.
const LNET_MTU: i64 = 1 << 20;

/// The process's surroundings, injectable for tests and for the console server.
pub struct Io<'a> {
    pub stdout: &'a mut dyn Write,
    pub stderr: &'a mut dyn Write,
    /// Standard output is a terminal: `stat` redraws in place.
    pub terminal: bool,
    /// Polled while commands wait (`stat`'s delay, `stop`'s polling): true stops them.
    pub cancelled: &'a dyn Fn() -> bool,
}

impl std::fmt::Debug for Io<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Io").field("terminal", &self.terminal).finish_non_exhaustive()
    }
}

/// The environment lst reads.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Env {
    /// `LST_SESSION`.
    pub session: Option<String>,
    /// `LST_FEATURES`.
    pub features: Option<String>,
}

impl Env {
    /// Reads `LST_SESSION` and `LST_FEATURES` from the process environment.
    pub fn from_process() -> Self {
        Self {
            session: std::env::var("LST_SESSION").ok(),
            features: std::env::var("LST_FEATURES").ok(),
        }
    }
}

/// One `command_t` of `lst_cmdlist`.
struct Command {
    name: &'static str,
    handler: fn(&mut Ctx<'_, '_>, Vec<String>) -> i32,
    help: &'static str,
}

/// lst's command table, with its help texts.
static COMMANDS: &[Command] = &[
    Command {
        name: "new_session",
        handler: new_session,
        help: "Usage: lst new_session [--timeout TIME] [--force] [NAME]",
    },
    Command { name: "end_session", handler: end_session, help: "Usage: lst end_session" },
    Command { name: "show_session", handler: show_session, help: "Usage: lst show_session" },
    Command {
        name: "ping",
        handler: ping,
        help: "Usage: lst ping  [--group NAME] [--batch NAME] [--session]  [--nodes IDS]",
    },
    Command { name: "add_group", handler: add_group, help: "Usage: lst group NAME IDs [IDs]..." },
    Command { name: "del_group", handler: del_group, help: "Usage: lst del_group NAME" },
    Command {
        name: "update_group",
        handler: update_group,
        help: "Usage: lst update_group NAME [--clean] [--refresh] [--remove IDs]",
    },
    Command {
        name: "list_group",
        handler: list_group,
        help: "Usage: lst list_group [--active] [--busy] [--down] [--unknown] GROUP ...",
    },
    Command {
        name: "stat",
        handler: stat_command,
        help: "Usage: lst stat [--bw] [--rate] [--read] [--write] [--max] [--min]  [--avg] \
               [--mbs] [--timeout #] [--delay #] [--count #] GROUP [GROUP]",
    },
    Command {
        name: "show_error",
        handler: show_error,
        help: "Usage: lst show_error NAME | IDS ...",
    },
    Command { name: "add_batch", handler: add_batch, help: "Usage: lst add_batch NAME" },
    Command { name: "run", handler: run_batch, help: "Usage: lst run [--timeout TIME] [NAME]" },
    Command { name: "stop", handler: stop_batch, help: "Usage: lst stop [--force] BATCH_NAME" },
    Command {
        name: "list_batch",
        handler: list_batch,
        help: "Usage: lst list_batch NAME [--test ID] [--server]",
    },
    Command {
        name: "query",
        handler: query_batch,
        help: "Usage: lst query [--test ID] [--server] [--timeout TIME] NAME",
    },
    Command {
        name: "add_test",
        handler: add_test,
        help: "Usage: lst add_test [--batch BATCH] [--loop #] [--concurrency #]  \
               [--distribute #:#] [--from GROUP] [--to GROUP] TEST...",
    },
];

/// What a handler works with.
struct Ctx<'a, 'b> {
    io: &'b mut Io<'a>,
    backend: &'b dyn Backend,
    program: String,
    /// `session_key`: `LST_SESSION` read with `atoi()`; 0 is none.
    key: u32,
    /// `session_features`.
    features: u32,
    json: bool,
}

impl Ctx<'_, '_> {
    fn out(&mut self, text: &str) {
        let _ = self.io.stdout.write_all(text.as_bytes());
        let _ = self.io.stdout.flush();
    }

    fn err(&mut self, text: &str) {
        let _ = self.io.stderr.write_all(text.as_bytes());
        let _ = self.io.stderr.flush();
    }

    /// The check every command but `new_session`/`show_session` starts with.
    fn need_key(&mut self) -> bool {
        if self.key == 0 {
            self.err("Can't find env LST_SESSION or value is not valid\n");
            return false;
        }
        true
    }

    /// `lst_print_usage()`: the command's help on stderr; lst returns 0.
    fn usage(&mut self, command: &str) -> i32 {
        match COMMANDS.iter().find(|c| c.name == command) {
            Some(c) => self.err(&format!("{command}: {}\n", c.help)),
            None => {
                let program = self.program.clone();
                self.err(&format!(
                    "{program}: '{command}' is not a valid command. See '{program} --list-commands'.\n"
                ));
            }
        }
        0
    }

    /// `lst_print_error()`.
    fn print_error(&mut self, sub: &str, error: ConsoleError, default: &str) {
        let text = match error.errno() {
            3 => "No session exists\n".to_string(),
            108 => "Session is shutting down\n".to_string(),
            13 => "Unmatched session key or not root\n".to_string(),
            2 => format!("Can't find {sub} in current session\n"),
            22 => "Invalid parameters list in command line\n".to_string(),
            14 => "Bad parameter address\n".to_string(),
            17 => format!("{sub} already exists\n"),
            errno => default.replace("%s", &strerror(errno)),
        };
        self.err(&text);
    }

    /// `lst_print_transerr()`.
    fn print_transerr(&mut self, result: &TransResult, what: &str) {
        for entry in &result.entries {
            if entry.rpc_errno != 0 {
                self.err(&format!(
                    "{what} RPC failed on {}: {}\n",
                    entry.peer,
                    strerror(entry.rpc_errno as i32)
                ));
            } else if entry.framework_errno != 0 {
                self.err(&format!(
                    "operation {what} failed on {}: {}\n",
                    entry.peer,
                    strerror(entry.framework_errno as i32)
                ));
            }
        }
    }

    /// Sleeps `duration`, waking early when cancelled; false when cancelled.
    fn sleep(&self, duration: Duration) -> bool {
        let deadline = Instant::now() + duration;
        loop {
            if (self.io.cancelled)() {
                return false;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return true;
            }
            std::thread::sleep(left.min(Duration::from_millis(100)));
        }
    }
}

/// Runs one `ulst` invocation against `backend` and returns lst's return code (the process
/// exits with it truncated to 8 bits). `args[0]` is the program; no further argument runs
/// the commands read from `input`, one per line.
pub fn run(args: Vec<String>, env: &Env, backend: &dyn Backend, io: &mut Io<'_>) -> i32 {
    let program = args
        .first()
        .map(|path| path.rsplit('/').next().unwrap_or(path).to_string())
        .unwrap_or_else(|| "ulst".to_string());
    let mut args: Vec<String> = args.into_iter().skip(1).collect();
    let mut json = false;
    while args.first().is_some_and(|arg| arg == "--json") {
        args.remove(0);
        json = true;
    }
    let key = env.session.as_deref().map_or(0, |text| atoi(text) as u32);
    let features = env.features.as_deref().map_or(LST_FEATS_MASK, |text| strtol(text, 16).0 as u32);
    let mut ctx = Ctx { io, backend, program, key, features, json };
    // lustre: lst.c `lst_initialize()`.
    if features & !LST_FEATS_MASK != 0 {
        ctx.err(&format!(
            "Unsupported session features {:x}, only support these features so far: {:x}\n",
            features & !LST_FEATS_MASK,
            LST_FEATS_MASK
        ));
        return -1;
    }
    execute(&mut ctx, args)
}

/// Runs the command `line` (split at white space, after the program name `lst`) against
/// `backend` with its output captured and nothing cancelling it: lst's return code, standard
/// output and standard error. `terminal` says whether standard output counts as a terminal.
pub fn run_captured(
    line: &str,
    env: &Env,
    backend: &dyn Backend,
    terminal: bool,
) -> (i32, String, String) {
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    let never = || false;
    let mut io = Io { stdout: &mut stdout, stderr: &mut stderr, terminal, cancelled: &never };
    let args = std::iter::once("lst").chain(line.split_whitespace()).map(str::to_string).collect();
    let status = run(args, env, backend, &mut io);
    // Both streams hold only what was written from `&str`s.
    let text = |bytes: Vec<u8>| String::from_utf8_lossy(&bytes).into_owned();
    (status, text(stdout), text(stderr))
}

/// Runs one command line (`cfs_parser_execarg()`).
fn execute(ctx: &mut Ctx<'_, '_>, args: Vec<String>) -> i32 {
    let Some(word) = args.first().cloned() else {
        help(ctx, &[]);
        return 0;
    };
    match word.as_str() {
        "help" | "--help" => return help(ctx, &args),
        "version" | "--version" => {
            let text = format!("{} {}\n", ctx.program, env!("CARGO_PKG_VERSION"));
            ctx.out(&text);
            return 0;
        }
        "list-commands" | "--list-commands" => {
            list_commands(ctx);
            return 0;
        }
        _ => {}
    }
    match COMMANDS.iter().find(|command| command.name == word) {
        Some(command) => (command.handler)(ctx, args),
        None => {
            let program = ctx.program.clone();
            ctx.err(&format!(
                "{program}: '{word}' is not a valid command. See '{program} --list-commands'.\n"
            ));
            -1
        }
    }
}

/// `cfs_parser_help()`.
fn help(ctx: &mut Ctx<'_, '_>, args: &[String]) -> i32 {
    if args.len() <= 1 {
        let program = ctx.program.clone();
        ctx.out(&format!("usage: {program} [COMMAND] [OPTIONS]... [ARGS]\n"));
        ctx.out("Without any parameters, interactive mode is invoked\n");
        ctx.out(&format!(
            "Try '{program} help <COMMAND>', or '{program} --list-commands' for a list of commands.\n"
        ));
        return 0;
    }
    let topic: String = args.iter().skip(1).map(String::as_str).collect();
    ctx.usage(&topic)
}

/// `cfs_parser_list_commands()`: four columns of 20.
fn list_commands(ctx: &mut Ctx<'_, '_>) {
    let builtins = ["quit", "exit", "help", "--help", "version", "--version", "list-commands"];
    let names =
        builtins.iter().copied().chain(["--list-commands", "--ignore_errors", "ignore_errors"]);
    let mut text = String::new();
    for (index, name) in names.chain(COMMANDS.iter().map(|c| c.name)).enumerate() {
        text.push_str(&format!("{name:<19} "));
        if index % 4 == 3 {
            text.push('\n');
        }
    }
    if !text.ends_with('\n') {
        text.push('\n');
    }
    ctx.out(&text);
}

/// A handler's command word and its getopt session (diagnostics print through
/// [`next_option`]).
fn options(argv: Vec<String>, shorts: &'static str, longs: &'static [LongOpt]) -> (String, Getopt) {
    (command_word(&argv), Getopt::new(argv, shorts, longs))
}

/// [`options`] for a command that needs a session key: `None` after saying none is set.
fn keyed_options(
    ctx: &mut Ctx<'_, '_>,
    argv: Vec<String>,
    shorts: &'static str,
    longs: &'static [LongOpt],
) -> Option<(String, Getopt)> {
    ctx.need_key().then(|| options(argv, shorts, longs))
}

/// Reads the next option; `Err(())` after printing getopt's diagnostic.
fn next_option(ctx: &mut Ctx<'_, '_>, getopt: &mut Getopt) -> Option<Result<(char, String), ()>> {
    match getopt.next()? {
        Opt::Found { val, arg } => Some(Ok((val, arg.unwrap_or_default()))),
        Opt::Error { message, .. } => {
            if let Some(message) = message {
                ctx.err(&message);
            }
            Some(Err(()))
        }
    }
}

// ------------------------------------------------------------------------ sessions

/// `jt_lst_new_session()`.
fn new_session(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    static LONGS: &[LongOpt] =
        &[LongOpt::new("timeout", HasArg::Required, 't'), LongOpt::new("force", HasArg::No, 'f')];
    let (command, mut getopt) = options(argv, "ft:", LONGS);
    let mut timeout_text = None;
    let mut force = false;
    while let Some(found) = next_option(ctx, &mut getopt) {
        match found {
            Ok(('f', _)) => force = true,
            Ok(('t', value)) => timeout_text = Some(value),
            _ => return ctx.usage(&command),
        }
    }
    let mut timeout = 300;
    if let Some(text) = &timeout_text {
        timeout = atoi(text);
        if timeout <= 0 {
            ctx.err("Invalid timeout value\n");
            return -1;
        }
    }
    let rest = getopt.operands();
    let name = match rest {
        [name] => {
            if name.len() >= LST_NAME_SIZE {
                ctx.err(&format!("Name size is limited to {}\n", LST_NAME_SIZE - 1));
                return -1;
            }
            name.clone()
        }
        [] => default_session_name(),
        _ => return ctx.usage(&command),
    };
    if ctx.key == 0 {
        ctx.err("Can't find env LST_SESSION or value is not valid\n");
        return -1;
    }
    match ctx.backend.new_session(ctx.key, &name, timeout as u32, force, ctx.features) {
        Ok(_) => {
            let text = format!(
                "SESSION: {name} FEATURES: {:x} TIMEOUT: {timeout} FORCE: {}\n",
                ctx.features,
                if force { "Yes" } else { "No" }
            );
            ctx.out(&text);
            0
        }
        Err(error) => {
            ctx.print_error("session", error, "Failed to create session: %s\n");
            -1
        }
    }
}

/// lst's default name: `user@host`.
fn default_session_name() -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| rustix::process::getuid().as_raw().to_string());
    let host = rustix::system::uname().nodename().to_string_lossy().into_owned();
    let host = if host.is_empty() { "unknown_host".to_string() } else { host };
    let mut user: String = user.chars().take(LST_NAME_SIZE - 1).collect();
    let host: String = host.chars().take(LST_NAME_SIZE - 1).collect();
    user.push('@');
    user.push_str(&host);
    user.truncate(LST_NAME_SIZE * 2);
    user
}

/// `jt_lst_end_session()` (the netlink path: nothing printed on success).
fn end_session(ctx: &mut Ctx<'_, '_>, _argv: Vec<String>) -> i32 {
    if !ctx.need_key() {
        return -1;
    }
    match ctx.backend.end_session(ctx.key) {
        Ok(result) => {
            print_session_errors(ctx, &result, "Failed to send", "session RPCs");
            0
        }
        Err(error) => {
            ctx.print_error("session", error, "Failed to end session: %s\n");
            -1
        }
    }
}

fn print_session_errors(ctx: &mut Ctx<'_, '_>, result: &TransResult, rpc_text: &str, noun: &str) {
    if result.stat.rpc_errno != 0 {
        ctx.err(&format!(
            "[RPC] {rpc_text} {} {noun}: {}\n",
            result.stat.rpc_failure,
            strerror(result.stat.rpc_errno as i32)
        ));
    }
    if result.stat.framework_errno != 0 {
        ctx.err(&format!(
            "[FWK] Failed to end session on {} nodes: {}\n",
            result.stat.op_failure(),
            strerror(result.stat.framework_errno as i32)
        ));
    }
}

/// `jt_lst_show_session()`.
fn show_session(ctx: &mut Ctx<'_, '_>, _argv: Vec<String>) -> i32 {
    match ctx.backend.session_info() {
        Ok(info) => {
            let text = format!(
                "{} ID: {}@{}, KEY: {} FEATURES: {:x} NODES: {}\n",
                info.name,
                info.stamp as u64,
                nid4_str(info.nid),
                info.key,
                info.features,
                info.nodes
            );
            ctx.out(&text);
            0
        }
        Err(error) => {
            ctx.print_error("session", error, "Failed to show session: %s\n");
            -1
        }
    }
}

/// `jt_lst_ping()`.
fn ping(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    static LONGS: &[LongOpt] = &[
        LongOpt::new("session", HasArg::No, 's'),
        LongOpt::new("server", HasArg::No, 'v'),
        LongOpt::new("batch", HasArg::Required, 'b'),
        LongOpt::new("group", HasArg::Required, 'g'),
        LongOpt::new("nodes", HasArg::Required, 'n'),
        LongOpt::new("timeout", HasArg::Required, 't'),
    ];
    let Some((command, mut getopt)) = keyed_options(ctx, argv, "g:b:n:t:sv", LONGS) else {
        return -1;
    };
    #[derive(PartialEq)]
    enum Kind {
        None,
        Session,
        Group,
        Batch,
        Nodes,
    }
    let (mut kind, mut name, mut timeout, mut server) = (Kind::None, None, 5, false);
    while let Some(found) = next_option(ctx, &mut getopt) {
        match found {
            Ok(('s', _)) => kind = Kind::Session,
            Ok(('g', value)) => (kind, name) = (Kind::Group, Some(value)),
            Ok(('b', value)) => (kind, name) = (Kind::Batch, Some(value)),
            Ok(('n', value)) => (kind, name) = (Kind::Nodes, Some(value)),
            Ok(('t', value)) => timeout = atoi(&value),
            Ok(('v', _)) => server = true,
            _ => return ctx.usage(&command),
        }
    }
    if kind == Kind::None || timeout <= 0 || getopt.optind != getopt.argc() {
        return ctx.usage(&command);
    }
    let label = name.clone().unwrap_or_else(|| "session".to_string());
    let target = match kind {
        Kind::Session => Target::Session,
        Kind::Group => Target::Group(label.clone()),
        Kind::Batch => Target::Batch { name: label.clone(), server },
        _ => match nids::parse_nids(&label) {
            Ok(ids) => Target::Nodes(ids),
            Err(error) => {
                ctx.err(&format!("{error}\n"));
                ctx.err(&format!("Failed to get count of nodes from {label}: {}\n", strerror(22)));
                return -1;
            }
        },
    };
    let count = match target_count(ctx, &target) {
        Ok(count) => count,
        Err(error) => {
            ctx.err(&format!(
                "Failed to get count of nodes from {label}: {}\n",
                strerror(error.errno())
            ));
            return -1;
        }
    };
    if count == 0 {
        ctx.out(&format!("Target {label} is empty\n"));
        return 0;
    }
    let result = match ctx.backend.debug(ctx.key, &target, timeout as u32) {
        Ok(result) => result,
        Err(error) => {
            ctx.print_error("debug", error, &format!("Failed to ping {label}: %s\n"));
            return -1;
        }
    };
    // lst ignores RPC and framework errors here but returns them.
    for entry in &result.entries {
        let session = match (entry.state, &entry.reply) {
            (NodeState::Active | NodeState::Busy, Some(SrpcBody::DebugReply(debug)))
                if entry.rpc_errno == 0 =>
            {
                String::from_utf8_lossy(debug.name.as_bytes()).into_owned()
            }
            (NodeState::Active | NodeState::Busy, _) => "Unknown".to_string(),
            _ => "<NULL>".to_string(),
        };
        let line = format!(
            "\t{}: {} [session: {session} id: {}]\n",
            entry.peer,
            entry.state.as_str(),
            nid4_str(entry.session.nid)
        );
        ctx.out(&line);
    }
    result.lst_rc()
}

/// `lst_get_node_count()`.
fn target_count(ctx: &mut Ctx<'_, '_>, target: &Target) -> Result<usize, ConsoleError> {
    match target {
        Target::Session => ctx.backend.session_info().map(|info| info.nodes),
        Target::Group(name) => ctx.backend.group_nodes(ctx.key, name).map(|nodes| nodes.len()),
        Target::Batch { name, server } => ctx.backend.batch_info(ctx.key, name, 0).map(|info| {
            if *server { info.servers.total as usize } else { info.clients.total as usize }
        }),
        Target::Nodes(ids) => Ok(ids.len()),
    }
}

// -------------------------------------------------------------------------- groups

/// `jt_lst_add_group()`.
fn add_group(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    if !ctx.need_key() {
        return -1;
    }
    let [_, name, expressions @ ..] = argv.as_slice() else {
        return ctx.usage(&command_word(&argv));
    };
    if expressions.is_empty() {
        return ctx.usage(&command_word(&argv));
    }
    let name = name.clone();
    if name.len() >= LST_NAME_SIZE {
        ctx.err(&format!("Name length is limited to {}\n", LST_NAME_SIZE - 1));
        return -1;
    }
    if let Err(error) = ctx.backend.add_group(ctx.key, &name) {
        ctx.print_error("group", error, &format!("Failed to add group {name}: %s\n"));
        return -1;
    }
    let mut nodes_added = false;
    let mut rc = 0;
    for expression in expressions {
        let ids = match nids::parse_nids(expression) {
            Ok(ids) => ids,
            Err(error) => {
                ctx.err(&format!("{error}\n"));
                ctx.err(&format!("Ignore invalid id list {expression}\n"));
                rc = -1;
                continue;
            }
        };
        if ids.is_empty() {
            continue;
        }
        match ctx.backend.add_nodes(ctx.key, &name, &ids) {
            Ok(result) if result.lst_rc() == 0 => {
                rc = 0;
                ctx.out(&format!("{expression} are added to session\n"));
                nodes_added = true;
                if result.features & ctx.features != ctx.features {
                    ctx.out(&format!(
                        "Warning, this session will run with compatible mode because some test \
                         nodes might not understand these features: {:x}\n",
                        !result.features & ctx.features
                    ));
                }
                if ctx.json {
                    print_json(
                        ctx,
                        &serde_json::json!({ "added": expression, "nodes": ids.len() }),
                    );
                }
            }
            Ok(result) => {
                if result.stat.framework_errno == ulnet::proto::wire::selftest::errno::EPROTO {
                    ctx.err(
                        "test nodes might have different LST features, please disable some \
                         features by setting LST_FEATURES\n",
                    );
                }
                ctx.print_transerr(&result, "create session");
                rc = result.lst_rc();
                return finish_add_group(ctx, &name, nodes_added, rc);
            }
            Err(error) => {
                ctx.print_error("group", error, &format!("Failed to add nodes {expression}: %s\n"));
                return finish_add_group(ctx, &name, nodes_added, -1);
            }
        }
    }
    if !nodes_added {
        ctx.err(&format!("No nodes added successfully, deleting group {name}\n"));
        rc = del_group_named(ctx, &name);
        if rc != 0 {
            ctx.err(&format!("Failed to delete group {name}. Group is empty.\n"));
        }
    }
    rc
}

/// `jt_lst_add_group()`'s `failed:` path.
fn finish_add_group(ctx: &mut Ctx<'_, '_>, name: &str, nodes_added: bool, rc: i32) -> i32 {
    if !nodes_added {
        ctx.err(&format!("No nodes added successfully, deleting group {name}\n"));
        if del_group_named(ctx, name) != 0 {
            ctx.err(&format!("Failed to delete group {name}. Group is empty.\n"));
        }
    }
    rc
}

/// `lst_del_group()`.
fn del_group_named(ctx: &mut Ctx<'_, '_>, name: &str) -> i32 {
    match ctx.backend.del_group(ctx.key, name) {
        Ok(result) if result.lst_rc() == 0 => {
            ctx.out("Group is deleted\n");
            0
        }
        Ok(result) => {
            ctx.err("Group is deleted with some errors\n");
            print_session_errors(ctx, &result, "Failed to send", "end session RPCs");
            -1
        }
        Err(error) => {
            ctx.print_error("group", error, "Failed to delete group: %s\n");
            -1
        }
    }
}

/// `jt_lst_del_group()`.
fn del_group(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    if !ctx.need_key() {
        return -1;
    }
    let [_, name] = argv.as_slice() else {
        return ctx.usage(&command_word(&argv));
    };
    del_group_named(ctx, name)
}

/// `jt_lst_update_group()`.
fn update_group(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    static LONGS: &[LongOpt] = &[
        LongOpt::new("refresh", HasArg::No, 'f'),
        LongOpt::new("clean", HasArg::Required, 'c'),
        LongOpt::new("remove", HasArg::Required, 'r'),
    ];
    let Some((command, mut getopt)) = keyed_options(ctx, argv, "fc:r:", LONGS) else {
        return -1;
    };
    let mut update = None;
    let mut remove_text = String::new();
    while let Some(found) = next_option(ctx, &mut getopt) {
        match found {
            Ok(('f', _)) if update.is_none() => update = Some(GroupUpdate::Refresh),
            Ok(('r', value)) if update.is_none() => {
                remove_text = value;
                update = Some(GroupUpdate::Remove(Vec::new()));
            }
            Ok(('c', value)) => match node_state_flags(&value) {
                Some(states) if update.is_none() => update = Some(GroupUpdate::Clean(states)),
                _ => return ctx.usage(&command),
            },
            _ => return ctx.usage(&command),
        }
    }
    let Some(mut update) = update else { return ctx.usage(&command) };
    if getopt.optind + 1 != getopt.argc() {
        return ctx.usage(&command);
    }
    let group = getopt.arg(getopt.optind).to_string();
    match &mut update {
        GroupUpdate::Remove(ids) => match nids::parse_nids(&remove_text) {
            Ok(parsed) => *ids = parsed,
            Err(error) => {
                ctx.err(&format!("{error}\n"));
                ctx.err(&format!(
                    "Can't get count of nodes from {remove_text}: {}\n",
                    strerror(22)
                ));
                return -1;
            }
        },
        GroupUpdate::Refresh => {
            if let Err(error) = ctx.backend.group_nodes(ctx.key, &group) {
                ctx.err(&format!(
                    "Can't get count of nodes from {group}: {}\n",
                    strerror(error.errno())
                ));
                return -1;
            }
        }
        GroupUpdate::Clean(_) => {}
    }
    match ctx.backend.update_group(ctx.key, &group, &update) {
        Ok(result) if result.lst_rc() == 0 => 0,
        Ok(result) => {
            ctx.print_transerr(&result, "Updating group");
            result.lst_rc()
        }
        Err(error) => {
            ctx.print_error("group", error, "Failed to update group: %s\n");
            -1
        }
    }
}

/// `lst_node_str2state()`.
fn node_state_flags(text: &str) -> Option<u32> {
    match text.to_ascii_lowercase().as_str() {
        "active" => Some(NodeState::Active.flag()),
        "busy" => Some(NodeState::Busy.flag()),
        "down" => Some(NodeState::Down.flag()),
        "unknown" => Some(NodeState::Unknown.flag()),
        "invalid" => {
            Some(NodeState::Unknown.flag() | NodeState::Down.flag() | NodeState::Busy.flag())
        }
        _ => None,
    }
}

const NODES_TITLE: &str = "\tACTIVE\tBUSY\tDOWN\tUNKNOWN\tTOTAL\n";

/// `jt_lst_list_group()`. An unknown group is skipped without failing.
fn list_group(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    static LONGS: &[LongOpt] = &[
        LongOpt::new("active", HasArg::No, 'a'),
        LongOpt::new("busy", HasArg::No, 'b'),
        LongOpt::new("down", HasArg::No, 'd'),
        LongOpt::new("unknown", HasArg::No, 'u'),
        LongOpt::new("all", HasArg::No, 'l'),
    ];
    let Some((command, mut getopt)) = keyed_options(ctx, argv, "abdul", LONGS) else {
        return -1;
    };
    let (mut verbose, mut all, mut states) = (false, false, 0u32);
    while let Some(found) = next_option(ctx, &mut getopt) {
        let flag = match found {
            Ok(('a', _)) => NodeState::Active.flag(),
            Ok(('b', _)) => NodeState::Busy.flag(),
            Ok(('d', _)) => NodeState::Down.flag(),
            Ok(('u', _)) => NodeState::Unknown.flag(),
            Ok(('l', _)) => {
                verbose = true;
                all = true;
                continue;
            }
            _ => return ctx.usage(&command),
        };
        verbose = true;
        all = false;
        states |= flag;
    }
    let names: Vec<String> = getopt.operands().to_vec();
    if names.is_empty() {
        let groups = ctx.backend.groups(ctx.key);
        return print_names(ctx, groups, "group", "groups");
    }
    if !verbose {
        ctx.out(NODES_TITLE);
    }
    for name in &names {
        let nodes = match ctx.backend.group_nodes(ctx.key, name) {
            Ok(nodes) => nodes,
            Err(ConsoleError::NotFound) => continue,
            Err(error) => {
                ctx.print_error("group", error, "Failed to list group: %s\n");
                return -1;
            }
        };
        if !verbose {
            let counts = counts(&nodes);
            ctx.out(&format!(
                "\t{}\t{}\t{}\t{}\t{}\t{name}\n",
                counts.active, counts.busy, counts.down, counts.unknown, counts.total
            ));
            continue;
        }
        ctx.out(&format!("Group [ {name} ]\n"));
        if nodes.is_empty() {
            ctx.out(&format!("No nodes found [ {name} ]\n"));
            continue;
        }
        let mut shown = 0;
        for (id, state) in &nodes {
            if all || states & state.flag() != 0 {
                ctx.out(&format!("\t{id}: {}\n", state.as_str()));
                shown += 1;
            }
        }
        ctx.out(&format!("Total {shown} nodes [ {name} ]\n"));
    }
    0
}

fn counts(nodes: &[(ProcessId, NodeState)]) -> NodeCounts {
    let mut counts = NodeCounts::default();
    for (_, state) in nodes {
        counts.count(*state);
    }
    counts
}

// ------------------------------------------------------------------- stat, errors

/// One `stat`/`show_error` argument: a group, else NIDs of the session.
struct StatTarget {
    name: String,
    target: Target,
    previous: Option<Vec<RpcEntry>>,
}

/// `lst_stat_req_param_alloc()`.
fn stat_target(ctx: &mut Ctx<'_, '_>, name: &str) -> Result<StatTarget, ()> {
    let target = match ctx.backend.group_nodes(ctx.key, name) {
        Ok(_) => Target::Group(name.to_string()),
        Err(ConsoleError::NotFound) => match nids::parse_nids(name) {
            Ok(ids) => Target::Nodes(ids),
            Err(error) => {
                ctx.err(&format!("{error}\n"));
                ctx.err(&format!("Failed to get count of nodes from {name}: {}\n", strerror(22)));
                return Err(());
            }
        },
        Err(error) => {
            ctx.err(&format!(
                "Failed to get count of nodes from {name}: {}\n",
                strerror(error.errno())
            ));
            return Err(());
        }
    };
    Ok(StatTarget { name: name.to_string(), target, previous: None })
}

/// [`stat_target`] of each operand left after the options, stopping at the first that fails.
fn stat_targets(ctx: &mut Ctx<'_, '_>, getopt: &mut Getopt) -> Result<Vec<StatTarget>, ()> {
    let names = getopt.argv.split_off(getopt.optind);
    names.iter().map(|name| stat_target(ctx, name)).collect()
}

/// `jt_lst_stat()`.
fn stat_command(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    static LONGS: &[LongOpt] = &[
        LongOpt::new("timeout", HasArg::Required, 't'),
        LongOpt::new("delay", HasArg::Required, 'd'),
        LongOpt::new("count", HasArg::Required, 'o'),
        LongOpt::new("lnet", HasArg::No, 'l'),
        LongOpt::new("rpc", HasArg::No, 'c'),
        LongOpt::new("bw", HasArg::No, 'b'),
        LongOpt::new("rate", HasArg::No, 'a'),
        LongOpt::new("read", HasArg::No, 'r'),
        LongOpt::new("write", HasArg::No, 'w'),
        LongOpt::new("avg", HasArg::No, 'g'),
        LongOpt::new("min", HasArg::No, 'n'),
        LongOpt::new("max", HasArg::No, 'x'),
        LongOpt::new("mbs", HasArg::No, 'm'),
        LongOpt::new("json", HasArg::No, 'J'),
    ];
    let Some((command, mut getopt)) = keyed_options(ctx, argv, "t:d:lcbarwgnxm", LONGS) else {
        return -1;
    };
    let (mut timeout, mut delay, mut count, mut lnet) = (5, 5, -1, true);
    let mut format = StatFormat::default();
    while let Some(found) = next_option(ctx, &mut getopt) {
        match found {
            Ok(('t', value)) => timeout = atoi(&value),
            Ok(('d', value)) => delay = atoi(&value),
            Ok(('o', value)) => count = atoi(&value),
            Ok(('l', _)) => lnet = true,
            Ok(('c', _)) => lnet = false,
            Ok(('b', _)) => format.sections |= 1,
            Ok(('a', _)) => format.sections |= 2,
            Ok(('r', _)) => format.directions |= 1,
            Ok(('w', _)) => format.directions |= 2,
            Ok(('g', _)) => {
                format.columns = if format.columns == -1 { 1 } else { format.columns | 1 }
            }
            Ok(('n', _)) => {
                format.columns = if format.columns == -1 { 2 } else { format.columns | 2 }
            }
            Ok(('x', _)) => {
                format.columns = if format.columns == -1 { 4 } else { format.columns | 4 }
            }
            Ok(('m', _)) => format.megabytes = true,
            Ok(('J', _)) => ctx.json = true,
            _ => return ctx.usage(&command),
        }
    }
    if getopt.optind == getopt.argc() {
        return ctx.usage(&command);
    }
    if timeout <= 0 || delay <= 0 {
        ctx.err("Invalid timeout or delay value\n");
        return -1;
    }
    if count < -1 {
        ctx.err("Invalid count value\n");
        return -1;
    }
    // One extra sample primes the first data point.
    if count != -1 {
        count += 1;
    }
    let Ok(mut targets) = stat_targets(ctx, &mut getopt) else { return -1 };
    let live = ctx.io.terminal && !ctx.json;
    let started = Instant::now();
    let mut drawn_lines = 0usize;
    let mut last: Option<Instant> = None;
    let mut rc = 0;
    let mut sample = 0u64;
    loop {
        if let Some(last) = last {
            let wait = Duration::from_secs(delay as u64).saturating_sub(last.elapsed());
            if !ctx.sleep(wait) {
                break;
            }
        }
        last = Some(Instant::now());
        let mut block = String::new();
        for target in &mut targets {
            let result = match ctx.backend.stat(ctx.key, &target.target, timeout as u32) {
                Ok(result) => result,
                Err(error) => {
                    let name = target.name.clone();
                    ctx.print_error("stat", error, &format!("Failed to stat {name}: %s\n"));
                    return -1;
                }
            };
            rc = result.lst_rc();
            let latency = if live || ctx.json {
                latency_of(ctx, &target.target, timeout as u32)
            } else {
                Vec::new()
            };
            let text = stat_sample(ctx, target, &result, lnet, format, sample, &latency);
            block.push_str(&text);
            target.previous = Some(result.entries);
        }
        if live && !block.is_empty() {
            // Redraw the previous report in place, with a status line.
            let mut screen = String::new();
            if drawn_lines > 0 {
                screen.push_str(&format!("\x1b[{drawn_lines}A\x1b[J"));
            }
            screen.push_str(&block);
            screen.push_str(&format!(
                "-- sample {sample}, {:.0} s; ^C to stop\n",
                started.elapsed().as_secs_f64()
            ));
            drawn_lines = screen.matches('\n').count();
            ctx.out(&screen);
        } else if !block.is_empty() {
            ctx.out(&block);
        }
        sample += 1;
        if count > 0 {
            count -= 1;
        }
        if count == 0 {
            break;
        }
    }
    rc
}

/// One target's part of a `stat` sample: lst's text, or a JSON line.
fn stat_sample(
    ctx: &mut Ctx<'_, '_>,
    target: &StatTarget,
    result: &TransResult,
    lnet: bool,
    format: StatFormat,
    sample: u64,
    latency: &[(ProcessId, LatencySummary)],
) -> String {
    let Some(previous) = &target.previous else { return String::new() };
    let worst = worst_latency(latency);
    let comparison = compare(previous, &result.entries, format.megabytes);
    if comparison.group_changed {
        ctx.err("Group is changed, re-run stat\n");
    }
    if ctx.json {
        let errors: u32 = result
            .entries
            .iter()
            .map(|entry| match &entry.reply {
                Some(SrpcBody::StatReply(stat)) => {
                    stat.framework.brw_errors + stat.framework.ping_errors
                }
                _ => 0,
            })
            .sum();
        let value = serde_json::json!({
            "group": target.name,
            "sample": sample,
            "nodes": comparison.stat.count,
            "failed_nodes": comparison.failed,
            "unit": if format.megabytes { "MB/s" } else { "MiB/s" },
            "rpc_rate": { "read": comparison.stat.receive_rate, "write": comparison.stat.send_rate },
            "bandwidth": {
                "read": comparison.stat.receive_bandwidth,
                "write": comparison.stat.send_bandwidth,
            },
            "test_errors": errors,
            "latency_us": {
                "worst": worst,
                "nodes": latency
                    .iter()
                    .map(|(id, summary)| serde_json::json!({ "node": id.to_string(), "latency": summary }))
                    .collect::<Vec<_>>(),
            },
        });
        return format!("{value}\n");
    }
    let mut text = String::new();
    if comparison.failed > 0 {
        text.push_str(&format!("Failed to stat on {} nodes\n", comparison.failed));
    }
    if lnet {
        text.push_str(&render(&target.name, &comparison.stat, format));
    }
    if let Some(worst) = worst {
        text.push_str(&format!(
            "[Latency of {}] p50: {} us p90: {} us p99: {} us p99.9: {} us max: {} us ({} RPCs)\n",
            target.name,
            worst.p50_us,
            worst.p90_us,
            worst.p99_us,
            worst.p999_us,
            worst.max_us,
            worst.count
        ));
    }
    text
}

/// The latency summaries of a target's ulnet nodes that ran client tests (beyond lst).
fn latency_of(
    ctx: &mut Ctx<'_, '_>,
    target: &Target,
    timeout: u32,
) -> Vec<(ProcessId, LatencySummary)> {
    let Ok(result) = ctx.backend.debug(ctx.key, target, timeout) else { return Vec::new() };
    result
        .entries
        .iter()
        .filter_map(|entry| {
            entry.latency.filter(|summary| summary.count > 0).map(|s| (entry.peer, s))
        })
        .collect()
}

/// Each percentile's worst value over the nodes, with the RPCs of all of them.
fn worst_latency(latency: &[(ProcessId, LatencySummary)]) -> Option<LatencySummary> {
    let mut iter = latency.iter().map(|(_, summary)| *summary);
    let first = iter.next()?;
    Some(iter.fold(first, |worst, next| LatencySummary {
        tests: worst.tests + next.tests,
        count: worst.count + next.count,
        errors: worst.errors + next.errors,
        min_us: worst.min_us.min(next.min_us),
        p50_us: worst.p50_us.max(next.p50_us),
        p90_us: worst.p90_us.max(next.p90_us),
        p99_us: worst.p99_us.max(next.p99_us),
        p999_us: worst.p999_us.max(next.p999_us),
        max_us: worst.max_us.max(next.max_us),
    }))
}

/// `jt_lst_show_error()`.
fn show_error(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    static LONGS: &[LongOpt] =
        &[LongOpt::new("session", HasArg::No, 's'), LongOpt::new("json", HasArg::No, 'J')];
    let Some((command, mut getopt)) = keyed_options(ctx, argv, "s", LONGS) else {
        return -1;
    };
    let mut show_rpc = true;
    while let Some(found) = next_option(ctx, &mut getopt) {
        match found {
            Ok(('s', _)) => show_rpc = false,
            Ok(('J', _)) => ctx.json = true,
            _ => return ctx.usage(&command),
        }
    }
    if getopt.optind == getopt.argc() {
        return ctx.usage(&command);
    }
    let Ok(targets) = stat_targets(ctx, &mut getopt) else { return -1 };
    let mut rc = 0;
    for target in &targets {
        let result = match ctx.backend.stat(ctx.key, &target.target, 10) {
            Ok(result) => result,
            Err(error) => {
                let name = target.name.clone();
                ctx.print_error(&name, error, &format!("Failed to show errors of {name}: %s\n"));
                return -1;
            }
        };
        rc = result.lst_rc();
        if !ctx.json {
            ctx.out(&format!("{}:\n", target.name));
        }
        let mut error_nodes = 0;
        let mut json_nodes = Vec::new();
        for entry in &result.entries {
            if entry.rpc_errno != 0 {
                error_nodes += 1;
                ctx.err(&format!("RPC failure, can't show error on {}\n", entry.peer));
                json_nodes.push(serde_json::json!({ "node": entry.peer.to_string(), "rpc_errno": entry.rpc_errno }));
                continue;
            }
            if entry.framework_errno != 0 {
                error_nodes += 1;
                ctx.err(&format!("Framework failure, can't show error on {}\n", entry.peer));
                json_nodes.push(serde_json::json!({ "node": entry.peer.to_string(), "framework_errno": entry.framework_errno }));
                continue;
            }
            let Some(SrpcBody::StatReply(stat)) = &entry.reply else { continue };
            let (framework, rpc) = (&stat.framework, &stat.rpc);
            if rpc.errors == 0 && framework.brw_errors == 0 && framework.ping_errors == 0 {
                continue;
            }
            if !show_rpc && framework.brw_errors == 0 && framework.ping_errors == 0 {
                continue;
            }
            error_nodes += 1;
            json_nodes.push(serde_json::json!({
                "node": entry.peer.to_string(),
                "brw_errors": framework.brw_errors,
                "ping_errors": framework.ping_errors,
                "rpc_errors": rpc.errors,
                "rpcs_dropped": rpc.rpcs_dropped,
                "rpcs_expired": rpc.rpcs_expired,
            }));
            let mut text = format!(
                "{}: [Session {} brw errors, {} ping errors]{}",
                entry.peer,
                framework.brw_errors as i32,
                framework.ping_errors as i32,
                if show_rpc { ' ' } else { '\n' }
            );
            if show_rpc {
                text.push_str(&format!(
                    "[RPC: {} errors, {} dropped, {} expired]\n",
                    rpc.errors as i32, rpc.rpcs_dropped as i32, rpc.rpcs_expired as i32
                ));
            }
            ctx.err(&text);
        }
        if ctx.json {
            print_json(
                ctx,
                &serde_json::json!({ "group": target.name, "error_nodes": error_nodes, "nodes": json_nodes }),
            );
        } else {
            ctx.out(&format!("Total {error_nodes} error nodes in {}\n", target.name));
        }
    }
    rc
}

// ------------------------------------------------------------------------- batches

/// `jt_lst_add_batch()`.
fn add_batch(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    if !ctx.need_key() {
        return -1;
    }
    let [_, name] = argv.as_slice() else {
        return ctx.usage(&command_word(&argv));
    };
    if name.len() >= LST_NAME_SIZE {
        ctx.err(&format!("Name length is limited to {}\n", LST_NAME_SIZE - 1));
        return -1;
    }
    match ctx.backend.add_batch(ctx.key, name) {
        Ok(()) => 0,
        Err(error) => {
            ctx.print_error("batch", error, "Failed to create batch: %s\n");
            -1
        }
    }
}

/// The batch argument of `run`, `stop` and `query`: none is `batch`.
fn batch_name(getopt: &Getopt) -> Option<String> {
    match getopt.argc() - getopt.optind {
        0 => Some(DEFAULT_BATCH.to_string()),
        1 => Some(getopt.arg(getopt.optind).to_string()),
        _ => None,
    }
}

/// The node count `run` and `stop` fetch first: `false` after saying why it failed.
fn batch_exists(ctx: &mut Ctx<'_, '_>, batch: &str) -> bool {
    let Err(error) = ctx.backend.batch_info(ctx.key, batch, 0) else { return true };
    ctx.err(&format!("Failed to get count of nodes from {batch}: {}\n", strerror(error.errno())));
    false
}

/// `jt_lst_start_batch()`.
fn run_batch(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    static LONGS: &[LongOpt] = &[LongOpt::new("timeout", HasArg::Required, 't')];
    let Some((command, mut getopt)) = keyed_options(ctx, argv, "t:", LONGS) else {
        return -1;
    };
    let mut timeout = 0;
    while let Some(found) = next_option(ctx, &mut getopt) {
        match found {
            Ok(('t', value)) => timeout = atoi(&value),
            _ => return ctx.usage(&command),
        }
    }
    let Some(batch) = batch_name(&getopt) else { return ctx.usage(&command) };
    if !batch_exists(ctx, &batch) {
        return -1;
    }
    match ctx.backend.run_batch(ctx.key, &batch, timeout as u32) {
        Ok(result) if result.lst_rc() == 0 => {
            ctx.out(&format!("{batch} is running now\n"));
            0
        }
        Ok(result) => {
            ctx.print_transerr(&result, "Run batch");
            result.lst_rc()
        }
        Err(error) => {
            ctx.print_error("batch", error, "Failed to start batch: %s\n");
            -1
        }
    }
}

/// `jt_lst_stop_batch()`: STOP, then query until no client runs the batch.
fn stop_batch(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    static LONGS: &[LongOpt] = &[LongOpt::new("force", HasArg::No, 'f')];
    let Some((command, mut getopt)) = keyed_options(ctx, argv, "f", LONGS) else {
        return -1;
    };
    let mut force = false;
    while let Some(found) = next_option(ctx, &mut getopt) {
        match found {
            Ok(('f', _)) => force = true,
            _ => return ctx.usage(&command),
        }
    }
    let Some(batch) = batch_name(&getopt) else { return ctx.usage(&command) };
    if !batch_exists(ctx, &batch) {
        return -1;
    }
    let mut result = match ctx.backend.stop_batch(ctx.key, &batch, force) {
        Ok(result) => result,
        Err(error) => {
            ctx.print_error("batch", error, "Failed to stop batch: %s\n");
            return -1;
        }
    };
    if result.lst_rc() == 0 {
        loop {
            result = match ctx.backend.query_batch(ctx.key, &batch, 0, false, 30) {
                Ok(result) => result,
                Err(error) => {
                    ctx.print_error("batch", error, "Failed to stop batch: %s\n");
                    return -1;
                }
            };
            if result.lst_rc() != 0 {
                break;
            }
            if result.stat.batch_running() == 0 && result.stat.batch_failure() == 0 {
                ctx.out("Batch is stopped\n");
                return 0;
            }
            ctx.out(&format!("{} batch in stopping\n", result.stat.batch_running()));
            if !ctx.sleep(Duration::from_secs(1)) {
                return -1;
            }
        }
    }
    ctx.print_transerr(&result, "stop batch");
    result.lst_rc()
}

/// `jt_lst_list_batch()`.
fn list_batch(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    static LONGS: &[LongOpt] = &[
        LongOpt::new("test", HasArg::Required, 't'),
        LongOpt::new("invalid", HasArg::No, 'i'),
        LongOpt::new("active", HasArg::No, 'a'),
        LongOpt::new("all", HasArg::No, 'l'),
        LongOpt::new("server", HasArg::No, 's'),
    ];
    let Some((command, mut getopt)) = keyed_options(ctx, argv, "ailst:", LONGS) else {
        return -1;
    };
    let (mut verbose, mut active, mut invalid, mut server) = (false, false, false, false);
    let (mut test, mut test_given) = (0, false);
    while let Some(found) = next_option(ctx, &mut getopt) {
        match found {
            Ok(('a', _)) => (verbose, active) = (true, true),
            Ok(('i', _)) => (verbose, invalid) = (true, true),
            Ok(('l', _)) => (verbose, active, invalid) = (true, true, true),
            Ok(('s', _)) => server = true,
            Ok(('t', value)) => (test, test_given) = (atoi(&value), true),
            _ => return ctx.usage(&command),
        }
    }
    if getopt.optind == getopt.argc() {
        let batches = ctx.backend.batches(ctx.key);
        return print_names(ctx, batches, "batch", "batches");
    }
    if test_given && test <= 0 {
        ctx.err("Invalid test id, test id starts from 1\n");
        return -1;
    }
    if getopt.optind + 1 != getopt.argc() {
        return ctx.usage(&command);
    }
    let batch = getopt.arg(getopt.optind).to_string();
    let mut test = test.max(0) as u32;
    let mut remaining = 0;
    loop {
        let info = match ctx.backend.batch_info(ctx.key, &batch, test) {
            Ok(info) => info,
            Err(error) => {
                let (sub, text) = if test > 0 {
                    ("test", "Failed to query test: %s\n")
                } else {
                    ("batch", "Failed to query batch: %s\n")
                };
                ctx.print_error(sub, error, text);
                return -1;
            }
        };
        if verbose {
            let nodes = match ctx.backend.batch_nodes(ctx.key, &batch, test, server) {
                Ok(nodes) => nodes,
                Err(error) => {
                    ctx.print_error("batch", error, "Failed to query batch: %s\n");
                    return -1;
                }
            };
            let mut shown = 0;
            for (id, state) in nodes {
                let is_active = state == NodeState::Active;
                if (!active && is_active) || (!invalid && !is_active) {
                    continue;
                }
                ctx.out(&format!("\t{id}: {}\n", state.as_str()));
                shown += 1;
            }
            ctx.out(&format!("Total {shown} nodes\n"));
            return 0;
        }
        match info.test {
            None => {
                ctx.out(&format!("Batch: {batch} Tests: {} State: {}\n", info.tests, info.state));
                remaining = info.tests;
                test = 1;
            }
            Some((kind, loop_count, concurrency)) => {
                ctx.out(&format!(
                    "\tTest {test}({kind}) (loop: {loop_count}, concurrency: {concurrency})\n"
                ));
                remaining = remaining.saturating_sub(1);
                test += 1;
            }
        }
        let (c, s) = (info.clients, info.servers);
        ctx.out(NODES_TITLE);
        ctx.out(&format!(
            "client\t{}\t{}\t{}\t{}\t{}\nserver\t{}\t{}\t{}\t{}\t{}\n",
            c.active,
            c.busy,
            c.down,
            c.unknown,
            c.total,
            s.active,
            s.busy,
            s.down,
            s.unknown,
            s.total
        ));
        if remaining == 0 {
            return 0;
        }
    }
}

/// `jt_lst_query_batch()`.
fn query_batch(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    static LONGS: &[LongOpt] = &[
        LongOpt::new("timeout", HasArg::Required, 'o'),
        LongOpt::new("delay", HasArg::Required, 'd'),
        LongOpt::new("loop", HasArg::Required, 'c'),
        LongOpt::new("test", HasArg::Required, 't'),
        LongOpt::new("server", HasArg::No, 's'),
        LongOpt::new("active", HasArg::No, 'a'),
        LongOpt::new("idle", HasArg::No, 'i'),
        LongOpt::new("error", HasArg::No, 'e'),
        LongOpt::new("all", HasArg::No, 'l'),
        LongOpt::new("json", HasArg::No, 'J'),
    ];
    let Some((command, mut getopt)) = keyed_options(ctx, argv, "o:d:c:t:saiel", LONGS) else {
        return -1;
    };
    let (mut timeout, mut delay, mut loops, mut test) = (5, 5, 1, 0);
    let (mut server, mut verbose, mut active, mut idle, mut error) =
        (false, false, false, false, false);
    while let Some(found) = next_option(ctx, &mut getopt) {
        match found {
            Ok(('o', value)) => timeout = atoi(&value),
            Ok(('d', value)) => delay = atoi(&value),
            Ok(('c', value)) => loops = atoi(&value),
            Ok(('t', value)) => test = atoi(&value),
            Ok(('s', _)) => server = true,
            Ok(('a', _)) => (active, verbose) = (true, true),
            Ok(('i', _)) => (idle, verbose) = (true, true),
            Ok(('e', _)) => (error, verbose) = (true, true),
            Ok(('l', _)) => verbose = true,
            Ok(('J', _)) => ctx.json = true,
            _ => return ctx.usage(&command),
        }
    }
    if test < 0 || timeout <= 0 || delay <= 0 || loops <= 0 {
        return ctx.usage(&command);
    }
    let Some(batch) = batch_name(&getopt) else { return ctx.usage(&command) };
    if verbose {
        match ctx.backend.batch_info(ctx.key, &batch, test as u32) {
            Ok(info) => {
                let count = if server { info.servers.total } else { info.clients.total };
                if count == 0 {
                    ctx.out("Batch or test is empty\n");
                    return 0;
                }
            }
            Err(failure) => {
                ctx.err(&format!(
                    "Failed to query {batch} [{test}]: {}\n",
                    strerror(failure.errno())
                ));
                return -1;
            }
        }
    }
    let mut rc = 0;
    let mut last: Option<Instant> = None;
    for _ in 0..loops {
        if let Some(last) = last {
            let wait = Duration::from_secs(delay as u64).saturating_sub(last.elapsed());
            if !ctx.sleep(wait) {
                break;
            }
        }
        last = Some(Instant::now());
        let result =
            match ctx.backend.query_batch(ctx.key, &batch, test as u32, server, timeout as u32) {
                Ok(result) => result,
                Err(failure) => {
                    ctx.err(&format!("Failed to query batch: {}\n", strerror(failure.errno())));
                    rc = -1;
                    break;
                }
            };
        rc = result.lst_rc();
        let stat = result.stat;
        if ctx.json {
            print_json(
                ctx,
                &serde_json::json!({
                    "batch": batch,
                    "test": test,
                    "nodes": stat.rpc_total,
                    "unknown": stat.rpc_failure,
                    "running": stat.batch_running(),
                    "stopped": stat.batch_idle(),
                    "failed": stat.batch_failure(),
                }),
            );
            continue;
        }
        if verbose {
            for entry in &result.entries {
                let running = match &entry.reply {
                    Some(SrpcBody::BatchReply(reply)) => reply.active,
                    _ => 0,
                };
                if (running == 0 && active)
                    || (running != 0 && idle)
                    || (entry.framework_errno == 0 && error)
                {
                    continue;
                }
                let status = if entry.rpc_errno != 0 {
                    strerror(entry.rpc_errno as i32)
                } else if running > 0 {
                    "Running".to_string()
                } else {
                    "Idle".to_string()
                };
                ctx.out(&format!("{} [{}]: {status}\n", entry.peer, entry.state.as_str()));
            }
            continue;
        }
        let mut line = format!("{batch} [{test}] ");
        if stat.rpc_failure != 0 {
            line.push_str(&format!(
                "{} of {} nodes are unknown, ",
                stat.rpc_failure, stat.rpc_total
            ));
        }
        if stat.rpc_failure == 0 && stat.batch_running() == 0 && stat.batch_failure() == 0 {
            line.push_str("is stopped\n");
        } else if stat.rpc_failure == 0 && stat.batch_idle() == 0 && stat.batch_failure() == 0 {
            line.push_str("is running\n");
        } else {
            line.push_str(&format!(
                "stopped: {} , running: {}, failed: {}\n",
                stat.batch_idle(),
                stat.batch_running(),
                stat.batch_failure()
            ));
        }
        ctx.out(&line);
    }
    rc
}

// ---------------------------------------------------------------------------- tests

/// `jt_lst_add_test()`.
fn add_test(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    static LONGS: &[LongOpt] = &[
        LongOpt::new("batch", HasArg::Required, 'b'),
        LongOpt::new("concurrency", HasArg::Required, 'c'),
        LongOpt::new("distribute", HasArg::Required, 'd'),
        LongOpt::new("from", HasArg::Required, 'f'),
        LongOpt::new("to", HasArg::Required, 't'),
        LongOpt::new("loop", HasArg::Required, 'l'),
    ];
    let Some((command, mut getopt)) = keyed_options(ctx, argv, "b:c:d:f:l:t:", LONGS) else {
        return -1;
    };
    let (mut batch, mut distribute, mut from, mut to) = (None, None, None, None);
    let (mut concurrency, mut loops) = (1, -1);
    while let Some(found) = next_option(ctx, &mut getopt) {
        match found {
            Ok(('b', value)) => batch = Some(value),
            Ok(('c', value)) => concurrency = atoi(&value),
            Ok(('d', value)) => distribute = Some(value),
            Ok(('f', value)) => from = Some(value),
            Ok(('l', value)) => loops = atoi(&value),
            Ok(('t', value)) => to = Some(value),
            _ => return ctx.usage(&command),
        }
    }
    let (Some(from), Some(to)) = (from, to) else { return ctx.usage(&command) };
    if getopt.optind == getopt.argc() {
        return ctx.usage(&command);
    }
    if concurrency <= 0 || concurrency > 1024 {
        ctx.err(&format!("Invalid concurrency of test: {concurrency}\n"));
        return -1;
    }
    let batch = batch.unwrap_or_else(|| DEFAULT_BATCH.to_string());
    let (mut dist, mut span) = (1, 1);
    if let Some(text) = &distribute {
        match parse_distribute(text) {
            Some((d, s)) => (dist, span) = (d, s),
            None => {
                ctx.err(&format!("Invalid distribution: {text}\n"));
                return -1;
            }
        }
    }
    let test = getopt.arg(getopt.optind).to_string();
    let params = getopt.operands().get(1..).unwrap_or_default().to_vec();
    let kind = match test.to_ascii_lowercase().as_str() {
        "ping" => TestKind::Ping,
        "brw" => match bulk_params(ctx, &params) {
            Some(brw) => TestKind::Brw(brw),
            None => {
                ctx.err(&format!("Failed to add test ({test})\n"));
                return -1;
            }
        },
        _ => {
            ctx.err(&format!("Unknow test name {test}\n"));
            ctx.err(&format!("Failed to add test ({test})\n"));
            return -1;
        }
    };
    for group in [&from, &to] {
        if let Err(error) = ctx.backend.group_nodes(ctx.key, group) {
            ctx.err(&format!(
                "Can't get count of nodes from {group}: {}\n",
                strerror(error.errno())
            ));
            return -1;
        }
    }
    let spec = TestSpec {
        batch,
        kind,
        loop_count: loops,
        concurrency: concurrency as u32,
        distribute: dist,
        span,
        from,
        to,
    };
    match ctx.backend.add_test(ctx.key, &spec) {
        Ok(result) if result.lst_rc() == 0 => {
            ctx.out("Test was added successfully\n");
            0
        }
        Ok(result) => {
            ctx.print_transerr(&result, "add test");
            result.lst_rc()
        }
        Err(error) => {
            ctx.print_error("test", error, "Failed to add test: %s\n");
            -1
        }
    }
}

/// `lst_parse_distribute()`: `D:S`, both positive.
fn parse_distribute(text: &str) -> Option<(u32, u32)> {
    let dist = atoi(text);
    let (_, span) = text.split_once(':')?;
    let span = atoi(span);
    (dist > 0 && span > 0).then_some((dist as u32, span as u32))
}

/// `lst_get_bulk_param()`.
fn bulk_params(ctx: &mut Ctx<'_, '_>, params: &[String]) -> Option<BrwSpec> {
    let mut spec = BrwSpec::default();
    let (mut check_seen, mut skip_seen) = (false, false);
    for param in params {
        let lower = param.to_ascii_lowercase();
        let value = param.split_once('=').map(|(_, value)| value).unwrap_or_default();
        if lower.starts_with("check=") || lower.starts_with("c=") {
            spec.check = match value.to_ascii_lowercase().as_str() {
                "full" => BrwCheck::Full,
                "simple" => BrwCheck::Simple,
                "discard" => BrwCheck::Discard,
                _ => {
                    ctx.err(&format!("Unknow flag {value}\n"));
                    return None;
                }
            };
            if skip_seen && spec.check != BrwCheck::Discard {
                ctx.err(&format!("check={value} conflicts with skip_rx_copy\n"));
                return None;
            }
            check_seen = true;
        } else if lower.starts_with("size=") || lower.starts_with("s=") {
            let (number, rest) = strtol(value, 0);
            // The C code keeps the size in an int.
            let mut size = number as i32 as i64;
            if size <= 0 {
                ctx.err(&format!("Invalid size {value}\n"));
                return None;
            }
            match rest.chars().next() {
                Some('k' | 'K') => size = (size * 1024) as i32 as i64,
                Some('m' | 'M') => size = (size * 1024 * 1024) as i32 as i64,
                _ => {}
            }
            if size > LNET_MTU || size <= 0 {
                ctx.err(&format!("Size exceed limitation: {size} bytes\n"));
                return None;
            }
            spec.size = size as u32;
        } else if lower.starts_with("off=") {
            let offset = strtol(value, 0).0 as i32;
            if offset < 0 || offset % 8 != 0 {
                ctx.err(&format!(
                    "Invalid offset {value}/{offset}, it should be postive value and multiple of 8\n"
                ));
                return None;
            }
            spec.offset = offset as u32;
        } else if lower == "read" || lower == "r" {
            spec.direction = BrwDirection::Read;
        } else if lower == "write" || lower == "w" {
            spec.direction = BrwDirection::Write;
        } else if lower == "skip_rx_copy" || lower == "skip-rx-copy" {
            if check_seen && spec.check != BrwCheck::Discard {
                ctx.err("skip_rx_copy conflicts with check=\n");
                return None;
            }
            spec.check = BrwCheck::Discard;
            skip_seen = true;
        } else {
            ctx.err(&format!("Unknow parameter: {param}\n"));
            return None;
        }
    }
    Some(spec)
}

// -------------------------------------------------------------------------- helpers

/// `list_group`'s and `list_batch`'s answer without a name: the name of every group or batch
/// (`noun`, `plural`), numbered, then their count.
fn print_names(
    ctx: &mut Ctx<'_, '_>,
    names: Result<Vec<String>, ConsoleError>,
    noun: &str,
    plural: &str,
) -> i32 {
    let names = match names {
        Ok(names) => names,
        Err(error) => {
            ctx.print_error(noun, error, &format!("Failed to list {noun}: %s\n"));
            return -1;
        }
    };
    for (index, name) in names.iter().enumerate() {
        ctx.out(&format!("{}) {name}\n", index + 1));
    }
    ctx.out(&format!("Total {} {plural}\n", names.len()));
    0
}

/// A handler's `argv[0]`: the command word it was dispatched by.
fn command_word(argv: &[String]) -> String {
    argv.first().cloned().unwrap_or_default()
}

fn print_json(ctx: &mut Ctx<'_, '_>, value: &serde_json::Value) {
    let text = format!("{value}\n");
    ctx.out(&text);
}

/// `libcfs_nid2str()` of a nid4.
fn nid4_str(nid: u64) -> String {
    if nid == u64::MAX {
        return "LNET_NID_ANY".to_string();
    }
    Nid::from_nid4(nid).to_string()
}

/// C's `atoi()`: leading blanks, a sign, digits; anything else ends the number.
pub fn atoi(text: &str) -> i32 {
    strtol(text, 10).0 as i32
}

/// C's `strtol()` for bases 0, 10 and 16; returns the value (saturated) and the rest.
pub fn strtol(text: &str, base: u32) -> (i64, &str) {
    let trimmed = text.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (negative, unsigned) = match trimmed.as_bytes().first() {
        Some(b'-') => (true, &trimmed[1..]),
        Some(b'+') => (false, &trimmed[1..]),
        _ => (false, trimmed),
    };
    let lower = unsigned.to_ascii_lowercase();
    let (radix, digits) = match base {
        16 | 0
            if lower.starts_with("0x")
                && unsigned[2..].chars().next().is_some_and(|c| c.is_ascii_hexdigit()) =>
        {
            (16, &unsigned[2..])
        }
        0 if unsigned.starts_with('0') && unsigned.len() > 1 => (8, &unsigned[1..]),
        0 => (10, unsigned),
        base => (base, unsigned),
    };
    let end = digits.find(|c: char| !c.is_digit(radix)).unwrap_or(digits.len());
    if end == 0 {
        // No digits: the value is 0 and nothing is consumed (an octal "0" consumed its zero).
        return if radix == 8 { (0, digits) } else { (0, text) };
    }
    let mut value: i64 = 0;
    for c in digits[..end].chars() {
        let digit = i64::from(c.to_digit(radix).unwrap_or(0));
        value = value.saturating_mul(i64::from(radix)).saturating_add(digit);
    }
    (if negative { -value } else { value }, &digits[end..])
}

/// `strerror()` for the errnos selftest and its console produce.
pub fn strerror(errno: i32) -> String {
    let text = match errno {
        1 => "Operation not permitted",
        2 => "No such file or directory",
        3 => "No such process",
        4 => "Interrupted system call",
        5 => "Input/output error",
        7 => "Argument list too long",
        12 => "Cannot allocate memory",
        13 => "Permission denied",
        14 => "Bad address",
        16 => "Device or resource busy",
        17 => "File exists",
        22 => "Invalid argument",
        71 => "Protocol error",
        74 => "Bad message",
        95 => "Operation not supported",
        100 => "Network is down",
        103 => "Software caused connection abort",
        104 => "Connection reset by peer",
        108 => "Cannot send after transport endpoint shutdown",
        110 => "Connection timed out",
        111 => "Connection refused",
        113 => "No route to host",
        125 => "Operation canceled",
        _ => return format!("Unknown error {errno}"),
    };
    text.to_string()
}

#[cfg(test)]
mod tests;
