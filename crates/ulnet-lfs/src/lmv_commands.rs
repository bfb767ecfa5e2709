//! `getdirstripe` and `hash`: directory layouts (docs/protocol/dirlayouts.md §3, §5).
//!
//! ```text
//! ulnet-lfs getdirstripe [-c|-T] [-D] [-F] [-H] [--hex-idx] [-i|-m] [-R] [-v] [-X]
//!                        [--max-inherit-rr] [-y] [--dir-fid FID] [--mdts LIST] XATTR...
//! ulnet-lfs hash NAME... --count N [--type all_char|fnv_1a_64|crush|crush2] [--mdts LIST]
//! ulnet-lfs hash NAME... --layout XATTR [--mdts LIST]
//! ```
//!
//! `getdirstripe` prints what `lfs getdirstripe` (Lustre 2.17) prints for a directory whose
//! `trusted.lmv` (or, with `-D`, `trusted.dmv`) is XATTR. What lfs learns from the mount is
//! given instead: `--dir-fid` for `-F`, `-v` and YAML of an unstriped directory; `--mdts`
//! lists each stripe's MDT (default: the sequence convention of a freshly formatted file
//! system, see [`mdt_by_sequence_convention`]).
//!
//! `hash` prints, per name, `NAME<TAB>STRIPE`, then `<TAB>MDT` when `--mdts` is given. Under
//! a layout change (`--layout`) STRIPE is `NEW/OLD`; under a bad hash type it is `any`.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use ulnet_layout::lmv::getdirstripe::{self, Context, Fields, Options};
use ulnet_layout::lmv::{
    DirLayout, Fid, HashType, LMV_MAX_STRIPE_COUNT, Placement, place_name, stripe_index,
};

use crate::xattr;

const GETDIRSTRIPE_USAGE: &str = "usage: ulnet-lfs getdirstripe [--mdt-count|-c|-T] \
[--default|-D] [--fid|-F] [--mdt-hash|-H] [--hex-idx] [--mdt-index|-m|-i] [--raw|-R] \
[--verbose|-v] [--max-inherit|-X] [--max-inherit-rr] [--yaml|-y] [--dir-fid FID] \
[--mdts MDT,...] XATTR...";
const HASH_USAGE: &str = "usage: ulnet-lfs hash NAME... (--count N [--type \
all_char|fnv_1a_64|crush|crush2] | --layout XATTR) [--mdts MDT,...]";

pub fn run(command: &str, args: &[String]) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    match command {
        "getdirstripe" => getdirstripe_command(args, &mut out),
        "hash" => hash_command(args, &mut out),
        other => bail!("'{other}' is not a directory-layout command"),
    }
}

/// `getdirstripe`, writing to `out`.
fn getdirstripe_command(args: &[String], out: &mut impl Write) -> anyhow::Result<ExitCode> {
    let mut fields = Fields::NONE;
    let mut options = Options { fields, yaml: false, hex_idx: false };
    let mut default_layout = false;
    let mut dir_fid = None;
    let mut mdts = None;
    let mut paths = Vec::new();
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let flag = |fields: &mut Fields, field| *fields = fields.with(field);
        match arg.as_str() {
            "--mdt-count" => flag(&mut fields, Fields::STRIPE_COUNT),
            "--default" => default_layout = true,
            "--fid" => flag(&mut fields, Fields::FID),
            "--mdt-hash" => flag(&mut fields, Fields::HASH_TYPE),
            "--hex-idx" => options.hex_idx = true,
            "--mdt-index" => flag(&mut fields, Fields::STRIPE_OFFSET),
            "--raw" => {}
            "--verbose" => flag(&mut fields, Fields::VERBOSE),
            "--max-inherit" => flag(&mut fields, Fields::MAX_INHERIT),
            "--max-inherit-rr" => flag(&mut fields, Fields::MAX_INHERIT_RR),
            "--yaml" => options.yaml = true,
            "--help" => return usage(out, GETDIRSTRIPE_USAGE),
            "--dir-fid" => dir_fid = Some(parse_fid(value(&mut args, arg)?)?),
            "--mdts" => mdts = Some(parse_mdts(value(&mut args, arg)?)?),
            "--recursive" | "--obd" => bail!("'{arg}' needs a mounted file system"),
            short if short.starts_with('-') && short.len() > 1 => {
                for letter in short.chars().skip(1) {
                    match letter {
                        'c' | 'T' => flag(&mut fields, Fields::STRIPE_COUNT),
                        'D' => default_layout = true,
                        'F' => flag(&mut fields, Fields::FID),
                        'H' => flag(&mut fields, Fields::HASH_TYPE),
                        'i' | 'm' => flag(&mut fields, Fields::STRIPE_OFFSET),
                        'R' => {}
                        'v' => flag(&mut fields, Fields::VERBOSE),
                        'X' => flag(&mut fields, Fields::MAX_INHERIT),
                        'y' => options.yaml = true,
                        'h' => return usage(out, GETDIRSTRIPE_USAGE),
                        'r' | 'O' => bail!("'-{letter}' needs a mounted file system"),
                        _ => bail!("unrecognized option '{short}'\n{GETDIRSTRIPE_USAGE}"),
                    }
                }
            }
            path => paths.push(path),
        }
    }
    if paths.is_empty() {
        bail!("no XATTR given\n{GETDIRSTRIPE_USAGE}");
    }
    options.fields = fields;
    let suffix = if default_layout { "dmv" } else { "lmv" };
    for path in paths {
        let bytes = xattr::read(path, suffix)?;
        let layout = DirLayout::parse(&bytes).with_context(|| format!("decoding '{path}'"))?;
        if default_layout && !matches!(layout, DirLayout::Default(_)) {
            bail!("'{path}' is not a default directory layout (lmv_user_md)");
        }
        let stripe_mdts = match (&mdts, &layout) {
            (Some(list), _) => Vec::clone(list),
            (None, DirLayout::Striped(md)) => md
                .stripe_fids
                .iter()
                .map(|fid| {
                    // The client shows an insane FID on MDT 0 whatever the list says.
                    let insane = (!fid.is_sane()).then_some(0);
                    insane.or_else(|| mdt_by_sequence_convention(fid)).with_context(|| {
                        format!("stripe FID {fid} is outside the convention: give --mdts")
                    })
                })
                .collect::<anyhow::Result<_>>()?,
            (None, _) => Vec::new(),
        };
        let context = Context { dir_fid, stripe_mdts };
        let text = getdirstripe::print(&layout, &context, options)
            .with_context(|| format!("printing '{path}'"))?;
        out.write_all(&text)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `hash`, writing to `out`.
fn hash_command(args: &[String], out: &mut impl Write) -> anyhow::Result<ExitCode> {
    let mut count = None;
    let mut hash = HashType::DEFAULT;
    let mut layout_path = None;
    let mut mdts = None;
    let mut names = Vec::new();
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--count" | "-c" => {
                let text = value(&mut args, arg)?;
                let n: u32 = text.parse().with_context(|| format!("bad count '{text}'"))?;
                if n > LMV_MAX_STRIPE_COUNT {
                    bail!("count {n} is above the limit {LMV_MAX_STRIPE_COUNT}");
                }
                count = Some(n);
            }
            "--type" | "-H" => {
                let text = value(&mut args, arg)?;
                hash = HashType::from_name(text).with_context(|| {
                    format!("unknown hash type '{text}' (all_char, fnv_1a_64, crush, crush2)")
                })?;
            }
            "--layout" => layout_path = Some(value(&mut args, arg)?),
            "--mdts" => mdts = Some(parse_mdts(value(&mut args, arg)?)?),
            "--help" | "-h" => return usage(out, HASH_USAGE),
            "--" => names.extend(args.by_ref().map(String::as_str)),
            option if option.starts_with('-') && option.len() > 1 => {
                bail!("unrecognized option '{option}'\n{HASH_USAGE}")
            }
            name => names.push(name),
        }
    }
    if names.is_empty() {
        bail!("no NAME given\n{HASH_USAGE}");
    }
    let layout = match layout_path {
        Some(path) => match DirLayout::parse(&xattr::read(path, "lmv")?) {
            Ok(DirLayout::Striped(md)) => Some(md),
            Ok(_) => bail!("'{path}' is not a striped directory's layout"),
            Err(error) => return Err(error).with_context(|| format!("decoding '{path}'")),
        },
        None => None,
    };
    for name in names {
        let placement = match (&layout, count) {
            (Some(md), _) => place_name(md, name.as_bytes())?,
            (None, Some(n)) => Placement::Stripe(stripe_index(hash, n, name.as_bytes())?),
            (None, None) => bail!("give --count or --layout\n{HASH_USAGE}"),
        };
        let mdt = |stripe: u32| -> anyhow::Result<String> {
            let list = mdts.as_deref().unwrap_or(&[]);
            let mdt = list
                .get(stripe as usize)
                .with_context(|| format!("--mdts has no stripe {stripe}"))?;
            Ok(mdt.to_string())
        };
        let (stripe, mdt) = match placement {
            Placement::Stripe(i) => (i.to_string(), mdts.is_some().then(|| mdt(i)).transpose()?),
            Placement::Changing { new, old } => {
                let both =
                    || -> anyhow::Result<String> { Ok(format!("{}/{}", mdt(new)?, mdt(old)?)) };
                (format!("{new}/{old}"), mdts.is_some().then(both).transpose()?)
            }
            Placement::AnyStripe => ("any".to_owned(), mdts.is_some().then(|| "any".to_owned())),
        };
        match mdt {
            Some(mdt) => writeln!(out, "{name}\t{stripe}\t{mdt}")?,
            None => writeln!(out, "{name}\t{stripe}")?,
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The MDT a stripe FID's sequence suggests on a freshly formatted file system: MDT *k* was
/// granted the *k*-th super-sequence (2^30 sequences) after `FID_SEQ_NORMAL`. Lustre itself
/// asks the FID location database; this convention does not hold after MDTs were added out of
/// order, so `--mdts` overrides it.
// lustre: include/uapi/linux/lustre/lustre_idl.h FID_SEQ_NORMAL; lustre/include/lustre_fid.h
// LUSTRE_SEQ_SUPER_WIDTH
pub fn mdt_by_sequence_convention(fid: &Fid) -> Option<u32> {
    const FID_SEQ_NORMAL: u64 = 0x2_0000_0400;
    const SUPER_SEQUENCE_WIDTH: u64 = 1 << 30;
    let k = fid.seq.checked_sub(FID_SEQ_NORMAL)? / SUPER_SEQUENCE_WIDTH;
    u32::try_from(k).ok()
}

fn value<'a>(args: &mut std::slice::Iter<'a, String>, option: &str) -> anyhow::Result<&'a str> {
    args.next().map(String::as_str).with_context(|| format!("'{option}' needs a value"))
}

fn parse_fid(text: &str) -> anyhow::Result<Fid> {
    Fid::from_text(text).with_context(|| format!("bad FID '{text}' (want SEQ:OID:VER in hex)"))
}

fn parse_mdts(text: &str) -> anyhow::Result<Vec<u32>> {
    text.split(',')
        .map(|part| part.trim().parse().with_context(|| format!("bad MDT index '{part}'")))
        .collect()
}

fn usage(out: &mut impl Write, text: &str) -> anyhow::Result<ExitCode> {
    writeln!(out, "{text}")?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_to_string(command: &str, args: &[&str]) -> anyhow::Result<String> {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let mut out = Vec::new();
        match command {
            "hash" => hash_command(&args, &mut out)?,
            _ => getdirstripe_command(&args, &mut out)?,
        };
        Ok(String::from_utf8(out)?)
    }

    #[test]
    fn hash_by_count_and_type() {
        let out =
            run_to_string("hash", &["file.mdtest.12.12345", "--count", "4", "--type", "crush"]);
        assert_eq!(out.ok().as_deref(), Some("file.mdtest.12.12345\t3\n"));
        let out = run_to_string("hash", &["a", "abc", "--count", "4", "--mdts", "2,3,0,1"]);
        assert_eq!(out.ok().as_deref(), Some("a\t0\t2\nabc\t3\t1\n"));
        assert!(run_to_string("hash", &["a", "--count", "2001"]).is_err());
        assert!(run_to_string("hash", &["a", "--count", "4", "--type", "md5"]).is_err());
        assert!(run_to_string("hash", &["a"]).is_err());
    }

    #[test]
    fn sequence_convention() {
        let mdt = |seq| mdt_by_sequence_convention(&Fid { seq, oid: 1, ver: 0 });
        assert_eq!(mdt(0x2_0000_0400), Some(0));
        assert_eq!(mdt(0x2_4000_0400), Some(1));
        assert_eq!(mdt(0x2_c000_0407), Some(3));
        assert_eq!(mdt(0x1), None);
    }

    #[test]
    fn getdirstripe_options_combine_like_getopt() {
        // Master on MDT2, one stripe on MDT1, crush2.
        let hex = "0xd00cd20c01000000020000000400000000000000000000000000000000000000\
                   000000000000000000000000000000000000000000000000\
                   00040040020000000200000000000000";
        let out = run_to_string("getdirstripe", &["-cH", hex]);
        assert_eq!(out.ok().as_deref(), Some("lmv_stripe_count: 1 lmv_hash_type: crush2\n"));
        let out = run_to_string("getdirstripe", &["-D", hex]);
        assert!(out.is_err());
        assert!(run_to_string("getdirstripe", &["-r", hex]).is_err());
        assert!(run_to_string("getdirstripe", &["-q", hex]).is_err());
    }
}
