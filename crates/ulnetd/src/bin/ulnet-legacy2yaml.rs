//! `ulnet-legacy2yaml`: Lustre's `lnet_legacy2yaml` (legacy `ip2nets=`/`routes=`/`networks=`
//! module parameters to `lnetctl import` YAML) with the same options, inputs, output,
//! messages and exit statuses. The conversion is `ulnet_config::legacy2yaml`; this file
//! reads the sources in the tool's order and writes the result.
//!
//! ```text
//! ulnet-legacy2yaml [-i FILE] [-r FILE] [-n FILE] [-m FILE] [-o FILE] [--default-hop [HOP]] [inline]
//! ```
//!
//! Exit status: 0 converted; 1 no entries in any source; 2 a usage error, an unreadable
//! source, a malformed entry or an unwritable output. Files and stdin are read as UTF-8
//! text with `\r\n` and `\r` taken for newlines, at most
//! [`MAX_INPUT_LEN`] bytes each.

use std::io::{IsTerminal, Read, Write};
use std::path::Path;
use std::process::ExitCode;

use ulnet_config::legacy2yaml::{
    self, Args, Converter, ERROR_STATUS, Failure, MAX_INPUT_LEN, NO_DATA_STATUS, Parsed,
};

fn main() -> ExitCode {
    let mut argv = std::env::args_os();
    let prog = argv
        .next()
        .and_then(|arg0| Path::new(&arg0).file_name().map(|name| name.to_string_lossy().into()))
        .unwrap_or_else(|| "ulnet-legacy2yaml".to_string());
    let args: Vec<String> = argv.map(|arg| arg.to_string_lossy().into_owned()).collect();
    let status = match legacy2yaml::parse_args(&prog, &args) {
        Parsed::Help(text) => {
            print!("{text}");
            0
        }
        Parsed::Error(text) => {
            eprint!("{text}");
            legacy2yaml::USAGE_STATUS
        }
        Parsed::Run(args) => match run(&args) {
            Ok(()) => 0,
            Err(failure) => {
                eprintln!("{}", failure.message);
                failure.status
            }
        },
    };
    ExitCode::from(status)
}

fn run(args: &Args) -> Result<(), Failure> {
    let mut converter = Converter::new();
    for path in &args.modprobe {
        converter.add_modprobe(path, &read_file(path, "modprobe")?)?;
    }
    for path in &args.ip2nets {
        converter.add_ip2nets(path, &read_file(path, "ip2nets")?)?;
    }
    for path in &args.routes {
        converter.add_routes(path, &read_file(path, "routes")?)?;
    }
    for path in &args.networks {
        converter.add_networks(path, &read_file(path, "networks")?)?;
    }
    match &args.inline {
        Some(text) => converter.add_inline(text)?,
        // Without an inline string, piped or redirected input is read.
        None if !std::io::stdin().is_terminal() => converter.add_inline(&read_stdin()?)?,
        None => {}
    }
    let yaml = converter.finish(args.default_hop.as_deref())?;
    match &args.output {
        Some(path) => std::fs::write(path, yaml).map_err(|error| Failure {
            message: format!(
                "Error: cannot write output file {path}: {}",
                legacy2yaml::os_error(&error, path)
            ),
            status: ERROR_STATUS,
        }),
        None => {
            let mut stdout = std::io::stdout().lock();
            // A closed stdout (a pipe whose reader left) is not the conversion's failure.
            let _ = stdout.write_all(yaml.as_bytes()).and_then(|()| stdout.flush());
            Ok(())
        }
    }
}

/// A source file as text; `kind` names it in a decoding error, as the tool does.
fn read_file(path: &str, kind: &str) -> Result<String, Failure> {
    let failure = |message| Failure { message, status: ERROR_STATUS };
    let cannot_read = |error: &std::io::Error| {
        failure(format!("Error: cannot read {path}: {}", legacy2yaml::os_error(error, path)))
    };
    let file = std::fs::File::open(path).map_err(|error| cannot_read(&error))?;
    let bytes = read_bounded(file).map_err(|error| cannot_read(&error))?;
    let bytes = bytes.ok_or_else(|| {
        failure(format!("Error: cannot read {path}: more than {MAX_INPUT_LEN} bytes"))
    })?;
    legacy2yaml::decode_text(&bytes)
        .map_err(|message| failure(format!("Error in {kind} file {path}: {message}")))
}

/// Standard input as text. A decoding error ends the Python tool with a traceback and
/// status 1; here it is one line with the same status.
fn read_stdin() -> Result<String, Failure> {
    let failure = |message| Failure { message, status: NO_DATA_STATUS };
    let bytes = read_bounded(std::io::stdin().lock())
        .map_err(|error| failure(format!("Error: cannot read stdin: {error}")))?
        .ok_or_else(|| failure(format!("Error: stdin holds more than {MAX_INPUT_LEN} bytes")))?;
    legacy2yaml::decode_text(&bytes).map_err(|message| failure(format!("Error: {message}")))
}

/// Everything `reader` holds, or `None` when that is more than [`MAX_INPUT_LEN`] bytes.
fn read_bounded(reader: impl Read) -> std::io::Result<Option<Vec<u8>>> {
    let mut bytes = Vec::new();
    reader.take(MAX_INPUT_LEN as u64 + 1).read_to_end(&mut bytes)?;
    Ok((bytes.len() <= MAX_INPUT_LEN).then_some(bytes))
}
