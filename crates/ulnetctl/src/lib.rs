//! `ulnetctl`: lnetctl's command line for a `ulnetd` node.
//!
//! The command words, options, help texts, output and error reports are lnetctl's; the
//! difference is the back end: where lnetctl talks netlink and ioctls to the kernel, this
//! talks to `ulnetd` over its control socket (crate `ulnet-control`). The userspace half of
//! each lnetctl command (option parsing with GNU getopt rules, nidlist expansion, the checks
//! lnetctl makes before calling the kernel) happens here; the node does the rest and answers
//! with data rendered by `ulnet_config::render` in the dialect lnetctl uses for that command.
//!
//! Extras over lnetctl, accepted anywhere before a `--`: `--socket PATH` (or
//! `--socket=PATH`), which overrides `$ULNET_SOCKET` and the default path, and `--json`,
//! which prints show results as JSON (the protocol's data) instead of YAML. `import -` reads
//! standard input.
//!
//! lustre: lnet/utils/lnetctl.c (command tables and `jt_*()` handlers), lib/libcfs/parser.c
//! (the dispatcher).

use std::io::{BufRead, Write};
use std::path::PathBuf;

mod cnum;
mod commands;
mod dispatch;
mod namespace;
mod report;

use ulnet_control::client::CallError;
use ulnet_control::{Client, ControlError, Request, Response};

/// The process's standard streams, injectable for tests.
pub struct Io<'a> {
    pub stdout: &'a mut dyn Write,
    pub stderr: &'a mut dyn Write,
    pub stdin: &'a mut dyn BufRead,
    /// Whether standard input is a terminal: the interactive shell then prompts and keeps
    /// going after errors.
    pub stdin_is_terminal: bool,
}

impl std::fmt::Debug for Io<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Io").field("stdin_is_terminal", &self.stdin_is_terminal).finish()
    }
}

/// [`run`] on this process's arguments and standard streams: the `main` of the `ulnetctl`
/// binary, and of `ulnetd` run under that name.
pub fn run_process() -> u8 {
    use std::io::IsTerminal;
    // Arguments that are not UTF-8 cannot name anything ulnetctl knows; keep them lossily.
    let args: Vec<String> =
        std::env::args_os().map(|arg| arg.to_string_lossy().into_owned()).collect();
    let stdin = std::io::stdin();
    let stdin_is_terminal = stdin.is_terminal();
    let mut stdin = stdin.lock();
    let mut stdout = std::io::stdout().lock();
    let mut stderr = std::io::stderr().lock();
    let mut io =
        Io { stdout: &mut stdout, stderr: &mut stderr, stdin: &mut stdin, stdin_is_terminal };
    run(args, &mut io)
}

/// Runs one `ulnetctl` invocation (`args[0]` is the program path) and returns its exit
/// status: the handler's return value truncated to 8 bits, as lnetctl's `exit(rc)`.
pub fn run(args: Vec<String>, io: &mut Io<'_>) -> u8 {
    let (args, options) = extract_options(args);
    let program = args
        .first()
        .map(|path| path.rsplit('/').next().unwrap_or(path).to_string())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "ulnetctl".to_string());
    let program_path = args.first().cloned().unwrap_or_default();
    let mut ctx = Ctx {
        io,
        program,
        program_path,
        socket: options.socket,
        json: options.json,
        client: None,
        done: false,
        ignore_errors: false,
    };
    let rc = dispatch::main(&mut ctx, args);
    ulnet_config::render::exit_status(rc)
}

/// ulnetctl's own options, taken out of argv before lnetctl's parsing sees it.
#[derive(Debug, Default, PartialEq, Eq)]
struct Options {
    socket: Option<PathBuf>,
    json: bool,
}

/// Removes `--socket PATH`, `--socket=PATH` and `--json` (exact spellings, before any `--`).
fn extract_options(args: Vec<String>) -> (Vec<String>, Options) {
    let mut options = Options::default();
    let mut kept = Vec::with_capacity(args.len());
    let mut iter = args.into_iter().enumerate();
    let mut ended = false;
    while let Some((index, arg)) = iter.next() {
        if index == 0 || ended {
            kept.push(arg);
            continue;
        }
        match arg.as_str() {
            "--" => {
                ended = true;
                kept.push(arg);
            }
            "--json" => options.json = true,
            "--socket" => match iter.next() {
                Some((_, path)) => options.socket = Some(PathBuf::from(path)),
                // A dangling --socket is left to lnetctl's parsing, which rejects it.
                None => kept.push(arg),
            },
            _ => match arg.strip_prefix("--socket=") {
                Some(path) => options.socket = Some(PathBuf::from(path)),
                None => kept.push(arg),
            },
        }
    }
    (kept, options)
}

/// What every handler gets: the streams, the (lazily opened) daemon connection, options.
pub(crate) struct Ctx<'a, 'io> {
    pub io: &'a mut Io<'io>,
    /// `program_invocation_short_name`.
    pub program: String,
    /// `argv[0]` as given: how to run this program again (its binary may serve other names).
    pub program_path: String,
    pub socket: Option<PathBuf>,
    pub json: bool,
    client: Option<Client>,
    /// Set by `quit`/`exit` in the interactive shell.
    pub done: bool,
    /// Set by `ignore_errors`.
    pub ignore_errors: bool,
}

/// Why a request produced no response.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The node refused: the handler reports it in its command's format.
    Daemon(ControlError),
    /// The node could not be reached or the exchange broke; already reported. The value is
    /// the handler's return code.
    Reported(i32),
}

impl Ctx<'_, '_> {
    /// Writes to stdout. Write errors (a closed pipe) are ignored, as lnetctl ignores
    /// printf's result.
    pub fn out(&mut self, text: &str) {
        let _ = self.io.stdout.write_all(text.as_bytes());
    }

    pub fn err(&mut self, text: &str) {
        let _ = self.io.stderr.write_all(text.as_bytes());
    }

    /// Sends `request` to the node, connecting on first use. Connection and transport
    /// failures are reported here, in the shape of lnetctl's startup error.
    pub fn call(&mut self, request: &Request) -> Result<Response, Failure> {
        let client = match self.client.as_mut() {
            Some(client) => client,
            None => {
                let (path, _) = ulnet_control::path::socket_path(self.socket.clone());
                match Client::connect(&path) {
                    Ok(client) => self.client.insert(client),
                    Err(error) => {
                        let descr = format!(
                            "cannot connect to ulnetd at {}: {}",
                            path.display(),
                            ulnet_config::render::strerror(-error.errno())
                        );
                        return Err(Failure::Reported(report::transport(
                            self,
                            "startup",
                            error.errno(),
                            &descr,
                        )));
                    }
                }
            }
        };
        // Interfaces are the daemon's namespace's: refuse before a different one is named.
        if namespace::names_interfaces(request) {
            if let Some(refusal) = client.server_pid().and_then(namespace::mismatch) {
                return Err(Failure::Daemon(refusal));
            }
        }
        match client.call(request) {
            Ok(response) => Ok(response),
            Err(CallError::Daemon(error)) => Err(Failure::Daemon(error)),
            Err(error) => {
                self.client = None;
                let descr = error.to_string();
                Err(Failure::Reported(report::transport(self, "request", error.errno(), &descr)))
            }
        }
    }

    /// Prints a response as JSON (`--json`).
    pub fn print_json(&mut self, response: &Response) {
        let text = serde_json::to_string_pretty(response).unwrap_or_default();
        self.out(&text);
        self.out("\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn own_options_are_taken_out_anywhere() {
        let (args, options) =
            extract_options(strings(&["ulnetctl", "net", "--json", "show", "--socket", "/s"]));
        assert_eq!(args, strings(&["ulnetctl", "net", "show"]));
        assert_eq!(options, Options { socket: Some("/s".into()), json: true });
        let (args, options) =
            extract_options(strings(&["ulnetctl", "--socket=/t", "peer", "list"]));
        assert_eq!(args, strings(&["ulnetctl", "peer", "list"]));
        assert_eq!(options.socket, Some("/t".into()));
    }

    #[test]
    fn own_options_stop_at_double_dash_and_need_exact_spelling() {
        let (args, options) =
            extract_options(strings(&["ulnetctl", "ping", "--jso", "--", "--json"]));
        assert_eq!(args, strings(&["ulnetctl", "ping", "--jso", "--", "--json"]));
        assert_eq!(options, Options::default());
        let (args, _) = extract_options(strings(&["ulnetctl", "net", "show", "--socket"]));
        assert_eq!(args, strings(&["ulnetctl", "net", "show", "--socket"]));
    }
}
