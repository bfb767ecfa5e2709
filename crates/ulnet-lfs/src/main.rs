//! `ulnet-lfs`: Lustre's `lfs` layout commands over layouts given as extended attributes.
//!
//! ```text
//! ulnet-lfs getstripe [OPTIONS] XATTR          # lfs getstripe of a lustre.lov xattr
//! ulnet-lfs setstripe [OPTIONS] --print-xattr   # the lustre.lov xattr these options set
//! ulnet-lfs map XATTR OFFSET                    # file offset -> component, stripe, object, offset
//! ulnet-lfs getdirstripe [OPTIONS] XATTR       # lfs getdirstripe of a lustre.lmv xattr
//! ulnet-lfs hash NAME --count N [--type T]      # the stripe a directory entry lands on
//! ```
//!
//! XATTR is `getfattr -e hex` output (a file or `-` for standard input), a `0x...` hex string,
//! or a file holding the raw xattr bytes (see [`xattr`]).

mod lmv_commands;
mod lov_commands;
mod xattr;

use std::process::ExitCode;

const USAGE: &str = "usage: ulnet-lfs getstripe|setstripe|map|getdirstripe|hash [OPTIONS] ...";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((command, rest)) = args.split_first() else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let result = match command.as_str() {
        "getstripe" | "setstripe" | "map" => lov_commands::run(command, rest),
        "getdirstripe" | "hash" => lmv_commands::run(command, rest),
        "help" | "--help" | "-h" => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        other => {
            eprintln!("ulnet-lfs: unknown command '{other}'\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("ulnet-lfs {command}: {error:#}");
            ExitCode::FAILURE
        }
    }
}
