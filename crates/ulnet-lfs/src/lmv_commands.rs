//! `getdirstripe` and `hash`.

use std::process::ExitCode;

pub fn run(command: &str, _args: &[String]) -> anyhow::Result<ExitCode> {
    anyhow::bail!("'{command}' is not implemented yet")
}
