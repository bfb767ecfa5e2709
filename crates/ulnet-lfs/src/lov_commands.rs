//! `getstripe`, `setstripe --print-xattr` and `map` over `lustre.lov` xattrs.

use std::process::ExitCode;

use anyhow::{Context, bail};
use ulnet_layout::lov::getstripe::{GetstripeOptions, getstripe};
use ulnet_layout::lov::map::{Mapping, map_offset};
use ulnet_layout::lov::setstripe::Setstripe;
use ulnet_layout::lov::size::parse_size;
use ulnet_layout::lov::{LOV_ALL_STRIPES_WIDE, Layout};

use crate::xattr;

/// lfs's exit status for usage errors (`CMD_HELP`).
const USAGE_ERROR: u8 = 4;

const GETSTRIPE_USAGE: &str = "usage: ulnet-lfs getstripe [-c|-S|-i|-p|-L|-g|-N|-z|-I[ID]|-E[END]|--component-count|--component-start[=N]|--component-flags[=F]] [-v] [-y] [-R] [-d] [--hex-idx]\n       [--dir] [--path=NAME] [--fs-stripe-size=SIZE] [--fs-stripe-count=N] XATTR";
const SETSTRIPE_USAGE: &str = "usage: ulnet-lfs setstripe [-E END] [-c COUNT|-C COUNT] [-S SIZE] [-i IDX] [-o OSTS] [-p POOL] [-L mdt|raid0] [-z SIZE] [--comp-flags F] ... --print-xattr";
const MAP_USAGE: &str = "usage: ulnet-lfs map XATTR OFFSET [--ost-count N]";

pub fn run(command: &str, args: &[String]) -> anyhow::Result<ExitCode> {
    match command {
        "getstripe" => run_getstripe(args),
        "setstripe" => run_setstripe(args),
        "map" => run_map(args),
        other => bail!("'{other}' is not a layout command"),
    }
}

fn usage(message: &str, text: &str) -> ExitCode {
    if !message.is_empty() {
        eprintln!("{message}");
    }
    println!("{text}");
    ExitCode::from(USAGE_ERROR)
}

/// Splits off one of this tool's own options (not lfs's), `--name=V` or `--name V`.
fn take_option<'a>(args: &mut Vec<&'a str>, name: &str) -> Option<&'a str> {
    let flag = format!("--{name}");
    let index = args
        .iter()
        .position(|a| *a == flag || a.strip_prefix(&flag).is_some_and(|r| r.starts_with('=')))?;
    let arg = args.remove(index);
    match arg.strip_prefix(&flag).and_then(|r| r.strip_prefix('=')) {
        Some(value) => Some(value),
        None => (index < args.len()).then(|| args.remove(index)),
    }
}

fn take_flag(args: &mut Vec<&str>, name: &str) -> bool {
    let flag = format!("--{name}");
    let before = args.len();
    args.retain(|a| *a != flag);
    args.len() != before
}

fn run_getstripe(args: &[String]) -> anyhow::Result<ExitCode> {
    let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
    let path = take_option(&mut args, "path").map(str::to_string);
    let directory = take_flag(&mut args, "dir");
    let fs_size = take_option(&mut args, "fs-stripe-size")
        .map(parse_size)
        .transpose()
        .context("--fs-stripe-size")?;
    let fs_count = take_option(&mut args, "fs-stripe-count")
        .map(str::parse::<u32>)
        .transpose()
        .context("--fs-stripe-count")?;
    let (mut options, operands) = match GetstripeOptions::parse(&args) {
        Ok(parsed) => parsed,
        Err(error) => return Ok(usage(&error.to_string(), GETSTRIPE_USAGE)),
    };
    let [operand] = operands.as_slice() else {
        return Ok(usage("ulnet-lfs getstripe: give one XATTR", GETSTRIPE_USAGE));
    };
    options.directory |= directory;
    options.path = Some(path.unwrap_or_else(|| operand.clone()));
    if let Some(size) = fs_size {
        options.defaults.stripe_size = u32::try_from(size).context("--fs-stripe-size")?;
    }
    if let Some(count) = fs_count {
        options.defaults.stripe_count = count;
    }
    let layout = decode(operand)?;
    print!("{}", getstripe(&layout, &options));
    Ok(ExitCode::SUCCESS)
}

fn decode(operand: &str) -> anyhow::Result<Layout> {
    let bytes = xattr::read(operand, "lov")?;
    Layout::decode(&bytes).with_context(|| format!("'{operand}' is not a valid layout"))
}

fn run_setstripe(args: &[String]) -> anyhow::Result<ExitCode> {
    let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
    if !take_flag(&mut args, "print-xattr") {
        return Ok(usage(
            "ulnet-lfs setstripe: only --print-xattr is supported: this tool sets no layouts",
            SETSTRIPE_USAGE,
        ));
    }
    let setstripe = match Setstripe::parse(&args) {
        Ok(setstripe) => setstripe,
        Err(error) => {
            eprintln!("{error}");
            if error.reports_invalid_layout() {
                eprintln!("error: lfs: invalid layout");
            }
            if error.exit_status() == USAGE_ERROR {
                println!("{SETSTRIPE_USAGE}");
            }
            return Ok(ExitCode::from(error.exit_status()));
        }
    };
    if !setstripe.operands.is_empty() {
        return Ok(usage("ulnet-lfs setstripe: --print-xattr takes no FILE", SETSTRIPE_USAGE));
    }
    let bytes = setstripe.to_layout().encode()?;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    println!("lustre.lov=0x{hex}");
    Ok(ExitCode::SUCCESS)
}

fn run_map(args: &[String]) -> anyhow::Result<ExitCode> {
    let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
    let ost_count = take_option(&mut args, "ost-count")
        .map(str::parse::<u32>)
        .transpose()
        .context("--ost-count")?;
    let [xattr_arg, offset_arg] = args.as_slice() else {
        return Ok(usage("", MAP_USAGE));
    };
    let offset = parse_size(offset_arg).with_context(|| format!("bad offset '{offset_arg}'"))?;
    let layout = decode(xattr_arg)?;
    let mapping = map_offset(&layout, offset, ost_count.unwrap_or(1))?;
    if ost_count.is_none() && !mapping.instantiated && needs_ost_count(&layout, mapping.component) {
        bail!(
            "component {} is not instantiated and its stripe count depends on the OSTs: give --ost-count N",
            mapping.component
        );
    }
    print!("{}", describe(&mapping, offset));
    Ok(ExitCode::SUCCESS)
}

/// Whether the component's stored count is -1 or -N per OST.
fn needs_ost_count(layout: &Layout, component: usize) -> bool {
    let plain = match layout {
        Layout::Plain(plain) => Some(plain),
        Layout::Composite(c) => c.components.get(component).and_then(|c| c.sub.plain()),
        Layout::Foreign(_) => None,
    };
    plain.is_some_and(|p| p.stripe_count >= LOV_ALL_STRIPES_WIDE)
}

fn describe(m: &Mapping, offset: u64) -> String {
    let mut out = format!("offset:        {offset}\ncomp_index:    {}", m.component);
    if m.component_id != 0 {
        out.push_str(&format!(" (lcme_id {})", m.component_id));
    }
    out.push_str(&format!(
        "\nstripe_size:   {}\nstripe_count:  {}\nstripe:        {}\n",
        m.geometry.stripe_size, m.geometry.stripe_count, m.stripe
    ));
    if m.dom {
        out.push_str("ost_index:     mdt (data on MDT)\n");
    } else if let Some(object) = &m.object {
        let fid = object.oi.to_fid(object.ost_index);
        out.push_str(&format!(
            "ost_index:     {}\nobject:        {fid} (objid {}, group {})\n",
            object.ost_index,
            object.oi.id(),
            object.oi.seq()
        ));
    } else {
        out.push_str(
            "ost_index:     -1 (not instantiated: reads see a hole, a write instantiates it)\n",
        );
    }
    out.push_str(&format!("object_offset: {}\n", m.object_offset));
    out
}
