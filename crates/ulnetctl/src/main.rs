//! `ulnetctl`: lnetctl's command line for `ulnetd`. See the library docs.

use std::process::ExitCode;

fn main() -> ExitCode {
    ExitCode::from(ulnetctl::run_process())
}
