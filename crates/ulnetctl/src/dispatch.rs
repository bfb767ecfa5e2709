//! The command dispatcher lnetctl shares with lst: exact command words on the command line,
//! abbreviations in the interactive shell, the built-in words (`help`, `--list-commands`,
//! `version`, ...), group commands that print their subcommands' help, and `check_cmd()`'s
//! `-h` handling.
//!
//! lustre: lib/libcfs/parser.c (`cfs_parser()`, `cfs_parser_execarg()`, `find_cmd()`,
//! `process()`, `execute_line()`, `cfs_parser_commands()`, `cfs_parser_help()`,
//! `cfs_parser_list_commands()`); lnet/utils/lnetctl.c `check_cmd()`, `print_help()`,
//! `jt_net()` and the other group handlers.

use crate::Ctx;
use crate::commands::CMD_LIST;
use ulnet_getopt::{Getopt, HasArg, LongOpt, Opt};

/// A handler: `argv[0]` is the command word as typed; returns lnetctl's `rc`.
pub(crate) type Handler = fn(&mut Ctx<'_, '_>, Vec<String>) -> i32;

/// One `command_t`.
pub(crate) struct Command {
    pub name: &'static str,
    pub action: Action,
    pub help: &'static str,
}

pub(crate) enum Action {
    Run(Handler),
    /// A command with subcommands (`jt_net()` and friends).
    Group(&'static [Command]),
    Builtin(Builtin),
}

#[derive(Clone, Copy)]
pub(crate) enum Builtin {
    Quit,
    Help,
    Version,
    List,
    IgnoreErrors,
}

/// lnetctl's `LUSTRE_CFG_RC_BAD_PARAM`.
pub(crate) const RC_BAD_PARAM: i32 = -22;

/// parser.c `MAXARGS`: words per interactive line.
const MAX_ARGS: usize = 512;

/// The size of `cfs_parser_help()`'s line buffer.
const HELP_LINE_LEN: usize = 1024;

/// -E2BIG.
const RC_TOO_BIG: i32 = -7;

/// parser.c `override_cmdlist`: built-in words, looked up before the command table.
static OVERRIDES: &[Command] = &[
    Command { name: "quit", action: Action::Builtin(Builtin::Quit), help: "quit" },
    Command { name: "exit", action: Action::Builtin(Builtin::Quit), help: "exit" },
    Command {
        name: "help",
        action: Action::Builtin(Builtin::Help),
        help: "provide useful information about a command",
    },
    Command {
        name: "--help",
        action: Action::Builtin(Builtin::Help),
        help: "provide useful information about a command",
    },
    Command {
        name: "version",
        action: Action::Builtin(Builtin::Version),
        help: "show program version",
    },
    Command {
        name: "--version",
        action: Action::Builtin(Builtin::Version),
        help: "show program version",
    },
    Command {
        name: "list-commands",
        action: Action::Builtin(Builtin::List),
        help: "list available commands",
    },
    Command {
        name: "--list-commands",
        action: Action::Builtin(Builtin::List),
        help: "list available commands",
    },
    Command {
        name: "--ignore_errors",
        action: Action::Builtin(Builtin::IgnoreErrors),
        help: "ignore errors that occur during script processing",
    },
    Command {
        name: "ignore_errors",
        action: Action::Builtin(Builtin::IgnoreErrors),
        help: "ignore errors that occur during script processing",
    },
];

/// `cfs_parser(argc, argv, cmd_list)` from `main()`: run the command on the command line, or
/// the interactive shell without one.
pub(crate) fn main(ctx: &mut Ctx<'_, '_>, args: Vec<String>) -> i32 {
    parser(ctx, args, CMD_LIST)
}

fn parser(ctx: &mut Ctx<'_, '_>, argv: Vec<String>, table: &'static [Command]) -> i32 {
    if argv.len() > 1 {
        execarg(ctx, argv.into_iter().skip(1).collect(), table)
    } else {
        shell(ctx, table)
    }
}

/// The current level's words: built-ins first, then the table (parser.c `top_level`).
fn level(table: &'static [Command]) -> impl Iterator<Item = &'static Command> + Clone {
    OVERRIDES.iter().chain(table.iter())
}

/// `cfs_parser_execarg()`: exact command words only.
fn execarg(ctx: &mut Ctx<'_, '_>, argv: Vec<String>, table: &'static [Command]) -> i32 {
    let word = argv.first().map_or("", String::as_str);
    match level(table).find(|command| command.name == word) {
        Some(command) => run(ctx, command, argv, table),
        None => {
            let message = format!(
                "{program}: '{word}' is not a valid command. See '{program} --list-commands'.\n",
                program = ctx.program
            );
            ctx.err(&message);
            -1
        }
    }
}

fn run(
    ctx: &mut Ctx<'_, '_>,
    command: &'static Command,
    argv: Vec<String>,
    table: &'static [Command],
) -> i32 {
    match command.action {
        Action::Run(handler) => handler(ctx, argv),
        Action::Group(subcommands) => {
            let rc = check_cmd(ctx, subcommands, command.name, None, 2, &argv);
            if rc != 0 {
                return rc;
            }
            parser(ctx, argv, subcommands)
        }
        Action::Builtin(builtin) => match builtin {
            Builtin::Quit => {
                ctx.done = true;
                0
            }
            Builtin::Help => help(ctx, &argv, table),
            Builtin::Version => {
                let text = format!("{} {}\n", ctx.program, env!("CARGO_PKG_VERSION"));
                ctx.out(&text);
                0
            }
            Builtin::List => {
                list_commands(ctx, table);
                0
            }
            Builtin::IgnoreErrors => {
                ctx.ignore_errors = true;
                0
            }
        },
    }
}

/// lnetctl's `check_cmd()`: too few words print the help of `subcommand` (or of the whole
/// group) and fail; exactly one argument that is `-h`/`--help` prints it and returns 1.
pub(crate) fn check_cmd(
    ctx: &mut Ctx<'_, '_>,
    table: &[Command],
    group: &str,
    subcommand: Option<&str>,
    min_args: usize,
    argv: &[String],
) -> i32 {
    static HELP: &[LongOpt] = &[LongOpt::new("help", HasArg::No, 'h')];
    if argv.len() < min_args {
        print_help(ctx, table, group, subcommand);
        return RC_BAD_PARAM;
    }
    if argv.len() > 2 {
        return 0;
    }
    let mut getopt = Getopt::new(argv.to_vec(), "h", HELP);
    getopt.print_errors = false;
    let mut rc = 0;
    while let Some(opt) = getopt.next() {
        rc = match opt {
            Opt::Found { val: 'h', .. } => {
                print_help(ctx, table, group, subcommand);
                1
            }
            _ => 0,
        };
    }
    rc
}

/// lnetctl's `print_help()`: `"<group> <name>: <help>"` for one subcommand, or all.
pub(crate) fn print_help(
    ctx: &mut Ctx<'_, '_>,
    table: &[Command],
    group: &str,
    subcommand: Option<&str>,
) {
    for command in table {
        match subcommand {
            Some(name) if name != command.name => continue,
            _ => {}
        }
        let text = format!("{group} {}: {}\n", command.name, command.help);
        ctx.out(&text);
        if subcommand.is_some() {
            return;
        }
    }
}

/// `cfs_parser_help()`.
fn help(ctx: &mut Ctx<'_, '_>, argv: &[String], table: &'static [Command]) -> i32 {
    if argv.len() <= 1 {
        let program = ctx.program.clone();
        ctx.out(&format!("usage: {program} [COMMAND] [OPTIONS]... [ARGS]\n"));
        ctx.out("Without any parameters, interactive mode is invoked\n");
        ctx.out(&format!(
            "Try '{program} help <COMMAND>', or '{program} --list-commands' for a list of commands.\n"
        ));
        return 0;
    }
    // The topic words are joined without spaces, as parser.c joins them.
    let mut line = String::new();
    for word in argv.iter().skip(1) {
        if word.len() >= HELP_LINE_LEN.saturating_sub(line.len() + 1) {
            return RC_TOO_BIG;
        }
        line.push_str(word);
    }
    match process(&line, table) {
        Lookup::Complete(command) => {
            let text = format!("{line}: {}\n", command.help);
            ctx.err(&text);
        }
        Lookup::None => {
            let text = format!(
                "{program}: '{line}' is not a valid command. See '{program} --list-commands'.\n",
                program = ctx.program
            );
            ctx.err(&text);
        }
        Lookup::Ambiguous(names) => ambiguous(ctx, &line, &names),
    }
    0
}

fn ambiguous(ctx: &mut Ctx<'_, '_>, line: &str, names: &[&str]) {
    let mut text = format!("Ambiguous command '{line}'\nOptions: ");
    for name in names {
        text.push_str(name);
        text.push(' ');
    }
    text.push('\n');
    ctx.err(&text);
}

/// `cfs_parser_list()`: every word of the level in rows of four 20-column cells; a wide name
/// pushes the rest of its row right.
fn list_commands(ctx: &mut Ctx<'_, '_>, table: &'static [Command]) {
    const CELL: i64 = 80 / 4;
    let mut text = String::new();
    let mut column = 0;
    let mut offset: i64 = 0;
    for command in level(table) {
        // printf("%-*s ", width, name); a negative width is left-justification too.
        let width = (CELL - offset - 1).unsigned_abs() as usize;
        let cell = format!("{:<width$} ", command.name);
        offset = (offset + cell.len() as i64 - CELL).max(0);
        text.push_str(&cell);
        column += 1;
        if column >= 4 {
            text.push('\n');
            column = 0;
            offset = 0;
        }
    }
    if column != 0 {
        text.push('\n');
    }
    ctx.out(&text);
}

/// What `process()` found for a line.
enum Lookup {
    Complete(&'static Command),
    None,
    Ambiguous(Vec<&'static str>),
}

/// parser.c `process()` for tables whose entries all have handlers: the first word names a
/// command by case-insensitive prefix; a prefix of several names is ambiguous unless the
/// line starts with one of the names in full.
fn process(line: &str, table: &'static [Command]) -> Lookup {
    let line = line.trim_start();
    let token = line.split(char::is_whitespace).next().unwrap_or("");
    if token.is_empty() {
        return Lookup::None;
    }
    let matches: Vec<&'static Command> =
        level(table).filter(|command| has_prefix_ignore_case(command.name, token)).collect();
    let Some(&first) = matches.first() else { return Lookup::None };
    if has_prefix_ignore_case(line, first.name) {
        return Lookup::Complete(first);
    }
    if let Some(&full) = matches.iter().skip(1).find(|c| has_prefix_ignore_case(line, c.name)) {
        return Lookup::Complete(full);
    }
    if matches.len() > 1 {
        return Lookup::Ambiguous(matches.iter().map(|command| command.name).collect());
    }
    Lookup::Complete(first)
}

/// `strncasecmp(text, prefix, strlen(prefix)) == 0`.
fn has_prefix_ignore_case(text: &str, prefix: &str) -> bool {
    text.as_bytes()
        .get(..prefix.len())
        .is_some_and(|head| head.eq_ignore_ascii_case(prefix.as_bytes()))
}

/// `cfs_parser_commands()`: read lines from stdin and run them; with a terminal, prompt and
/// carry on after errors, otherwise stop at the first error unless `ignore_errors` was given.
/// (lnetctl also lets each group's dispatch replace the shell's word list for the rest of
/// the session; here the shell always resolves the top-level words.)
fn shell(ctx: &mut Ctx<'_, '_>, table: &'static [Command]) -> i32 {
    let interactive = ctx.io.stdin_is_terminal;
    let mut rc = 0;
    let mut saved_error = 0;
    while !ctx.done {
        if interactive {
            ctx.out("> ");
            let _ = ctx.io.stdout.flush();
        }
        let mut line = String::new();
        match ctx.io.stdin.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let line = line.strip_suffix('\n').unwrap_or(&line);
        let line = line.trim_start();
        if !line.is_empty() {
            rc = execute_line(ctx, line, table);
        }
        if rc != 0 && !interactive {
            if saved_error == 0 {
                saved_error = rc;
            }
            if !ctx.ignore_errors {
                break;
            }
        }
    }
    if saved_error != 0 { saved_error } else { rc }
}

/// `execute_line()`.
fn execute_line(ctx: &mut Ctx<'_, '_>, line: &str, table: &'static [Command]) -> i32 {
    match process(line, table) {
        Lookup::Ambiguous(names) => {
            ambiguous(ctx, line, &names);
            0
        }
        Lookup::None => help(ctx, &[], table),
        Lookup::Complete(command) => {
            let argv: Vec<String> = line
                .split([' ', '\t'])
                .filter(|word| !word.is_empty())
                .take(MAX_ARGS)
                .map(str::to_string)
                .collect();
            run(ctx, command, argv, table)
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::Io;

    /// Runs `args` in process with `stdin`; no daemon is involved.
    fn run(args: &[&str], stdin: &str, terminal: bool) -> (u8, String, String) {
        let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
        let mut input = stdin.as_bytes();
        let mut io = Io {
            stdout: &mut stdout,
            stderr: &mut stderr,
            stdin: &mut input,
            stdin_is_terminal: terminal,
        };
        let args = args.iter().map(|a| a.to_string()).collect();
        let code = crate::run(args, &mut io);
        (code, String::from_utf8(stdout).unwrap(), String::from_utf8(stderr).unwrap())
    }

    #[test]
    fn the_interactive_shell_prompts_and_carries_on_after_errors() {
        let (code, stdout, stderr) = run(&["ulnetctl"], "frobnicate x\nnet\nhelp ne\nexit\n", true);
        assert_eq!(code, 0);
        assert!(stdout.starts_with("> usage: ulnetctl"), "{stdout}");
        // `net` alone fails (help of every subcommand) and the shell prompts again.
        assert!(stdout.contains("net add: add a network"), "{stdout}");
        assert_eq!(stdout.matches("> ").count(), 4, "{stdout}");
        assert_eq!(stderr, "ne: net {add | del | show | set | help}\n");
    }

    #[test]
    fn a_script_stops_at_the_first_error_and_returns_it() {
        let (code, stdout, _) = run(&["ulnetctl"], "net\nversion\n", false);
        assert_eq!(code, 234);
        assert!(!stdout.contains("ulnetctl 0"), "{stdout}");
        assert!(!stdout.contains("> "), "{stdout}");
    }

    #[test]
    fn the_program_name_is_the_invocation_name() {
        let (code, _, stderr) = run(&["/usr/sbin/lnetctl", "frobnicate"], "", false);
        assert_eq!(code, 255);
        assert_eq!(
            stderr,
            "lnetctl: 'frobnicate' is not a valid command. See 'lnetctl --list-commands'.\n"
        );
    }

    #[test]
    fn help_topics_too_long_are_refused() {
        let long = "x".repeat(2000);
        let (code, _, _) = run(&["ulnetctl", "help", &long], "", false);
        assert_eq!(code, 249);
    }

    #[test]
    fn abbreviations_resolve_only_in_the_shell() {
        let (code, stdout, _) = run(&["ulnetctl", "vers"], "", false);
        assert_eq!((code, stdout.as_str()), (255, ""));
        let (code, stdout, _) = run(&["ulnetctl"], "vers\n", false);
        assert_eq!(code, 0);
        assert_eq!(stdout, format!("ulnetctl {}\n", env!("CARGO_PKG_VERSION")));
    }
}
