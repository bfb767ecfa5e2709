//! `ulnetctl`: lnetctl's command line for `ulnetd`. See the library docs.

use std::io::IsTerminal;
use std::process::ExitCode;

fn main() -> ExitCode {
    // Arguments that are not UTF-8 cannot name anything ulnetctl knows; keep them lossily.
    let args: Vec<String> =
        std::env::args_os().map(|arg| arg.to_string_lossy().into_owned()).collect();
    let stdin = std::io::stdin();
    let stdin_is_terminal = stdin.is_terminal();
    let mut stdin = stdin.lock();
    let mut stdout = std::io::stdout().lock();
    let mut stderr = std::io::stderr().lock();
    let mut io = ulnetctl::Io {
        stdout: &mut stdout,
        stderr: &mut stderr,
        stdin: &mut stdin,
        stdin_is_terminal,
    };
    ExitCode::from(ulnetctl::run(args, &mut io))
}
