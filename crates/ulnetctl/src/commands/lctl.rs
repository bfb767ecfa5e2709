//! lctl's LNet queries, which lnetctl lacks and scripts (Lustre's own tests among them) use:
//! `list_nids`, `which_nid` and `conn_list`, with lctl's output and return codes.
//!
//! lctl's `--net NET` (a global option, or the interactive `network NET`) becomes
//! `conn_list`'s own `--net`; without it ulnetctl lists every net's connections where lctl
//! asks for a net first. Addresses are printed as numbers (lctl prints a host name where a
//! reverse lookup finds one, and the number otherwise).
//!
//! lustre: lustre/utils/portals.c `jt_ptl_list_nids()`, `jt_ptl_which_nid()`,
//! `jt_ptl_print_connections()`, `g_net_is_compatible()`.

use ulnet_config::render::strerror;
use ulnet_control::message::{ConnEntry, ConnKind, NidDist};
use ulnet_control::{ControlError, Request, Response};
use ulnet_getopt::{Getopt, HasArg, LongOpt, Opt};
use ulnet_proto::addr::{LndType, Net, Nid, ProcessId};

use crate::dispatch::check_cmd;
use crate::{Ctx, Failure, report};

/// `list_nids [all]`: the node's NIDs, one a line, `0@lo` only with `all`.
pub(crate) fn list_nids(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    if let rc @ 1.. = help(ctx, "list_nids", &argv) {
        return rc;
    }
    let all = argv.len() == 2 && argv.get(1).is_some_and(|word| word == "all");
    if argv.len() > 2 {
        let usage = format!("usage: {} [all]\n", argv.first().map_or("", String::as_str));
        ctx.err(&usage);
        return 0;
    }
    let nets = match ctx.call(&Request::NetShow { net: None, level: 0 }) {
        Ok(response) if ctx.json => {
            ctx.print_json(&response);
            return 0;
        }
        Ok(Response::Nets(nets)) => nets,
        Ok(_) => return report::unexpected(ctx, "not a net list"),
        Err(Failure::Reported(rc)) => return rc,
        Err(Failure::Daemon(error)) => return get_ni_error(ctx, &error),
    };
    let mut text = String::new();
    for ni in nets.iter().flat_map(|net| &net.nis) {
        if all || ni.nid != Nid::LO_0.to_string() {
            text.push_str(&ni.nid);
            text.push('\n');
        }
    }
    ctx.out(&text);
    0
}

/// `-h`/`--help` alone prints the command's help and returns 1, as lnetctl's commands do
/// (lctl has no such option: there they are arguments).
fn help(ctx: &mut Ctx<'_, '_>, name: &str, argv: &[String]) -> i32 {
    check_cmd(ctx, super::CMD_LIST, "", Some(name), 0, argv)
}

/// lctl's report when the node cannot list its NIs (`IOC_LIBCFS_GET_NI` failed).
fn get_ni_error(ctx: &mut Ctx<'_, '_>, error: &ControlError) -> i32 {
    let code = -error.errno();
    ctx.err(&format!("IOC_LIBCFS_GET_NI error {code}: {}\n", strerror(code)));
    -1
}

/// `which_nid NID...`: the NID the node reaches best (least distance, then least order; the
/// first of equals), unreachable ones passed over. `*` stands for `<?>`, which no NID is.
pub(crate) fn which_nid(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    if let rc @ 1.. = help(ctx, "which_nid", &argv) {
        return rc;
    }
    let Some((program, words)) = argv.split_first() else {
        return 0;
    };
    if words.is_empty() {
        ctx.err(&format!("usage: {program} NID [NID...]\n"));
        return 0;
    }
    let mut nids = Vec::with_capacity(words.len());
    for word in words {
        let word = if word == "*" { "<?>" } else { word.as_str() };
        match word.parse::<Nid>() {
            Ok(nid) if nid != Nid::ANY => nids.push(nid.to_string()),
            _ => {
                ctx.err(&format!("Can't parse NID {word}\n"));
                return -1;
            }
        }
    }
    let first = nids.first().cloned().unwrap_or_default();
    let answers = match ctx.call(&Request::PeerDist { nids }) {
        Ok(response) if ctx.json => {
            ctx.print_json(&response);
            return 0;
        }
        Ok(Response::PeerDist(answers)) => answers,
        Ok(_) => return report::unexpected(ctx, "not a distance list"),
        Err(Failure::Reported(rc)) => return rc,
        Err(Failure::Daemon(error)) => {
            let code = -error.errno();
            ctx.err(&format!("Can't get distance to {first}: {}\n", strerror(code)));
            return -1;
        }
    };
    // Strictly less wins, so the first of equal NIDs stays.
    let best = answers.iter().fold(None, |best: Option<&NidDist>, answer| match best {
        Some(kept) if (kept.distance, kept.order) <= (answer.distance, answer.order) => Some(kept),
        _ => Some(answer),
    });
    match best {
        Some(best) => {
            let line = format!("{}\n", best.nid);
            ctx.out(&line);
            0
        }
        None => {
            ctx.err("No reachable NID\n");
            -1
        }
    }
}

/// `conn_list [--net NET]`: one line per connection,
/// `<peer id> <type>[<scheduler>]<local ip>-><remote ip>:<remote port> <tx>/<rx> <nagle>`, or
/// `<no connections>`.
pub(crate) fn conn_list(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    static LONGS: &[LongOpt] = &[LongOpt::new("net", HasArg::Required, 'n')];
    if let rc @ 1.. = help(ctx, "conn_list", &argv) {
        return rc;
    }
    let command = argv.first().cloned().unwrap_or_default();
    let mut net = None;
    let mut getopt = Getopt::new(argv, "n:", LONGS);
    while let Some(opt) = getopt.next() {
        match opt {
            Opt::Found { val: 'n', arg, .. } => net = arg,
            Opt::Found { .. } | Opt::Error { .. } => {
                ctx.err(&format!("usage: {command} [--net NET]\n"));
                return 0;
            }
        }
    }
    if let Some(text) = &net {
        let Ok(parsed) = text.parse::<Net>() else {
            ctx.err(&format!("Can't parse net {text}\n"));
            return -1;
        };
        if ![LndType::SOCK, LndType::O2IB, LndType::GNI].contains(&parsed.lnd) {
            let lnd = parsed.lnd.name().unwrap_or("?");
            ctx.err(&format!("Command {command} not compatible with {lnd} NAL\n"));
            return -1;
        }
    }
    let conns = match ctx.call(&Request::ConnList { net }) {
        Ok(response) if ctx.json => {
            ctx.print_json(&response);
            return 0;
        }
        Ok(Response::Conns(conns)) => conns,
        Ok(_) => return report::unexpected(ctx, "not a connection list"),
        Err(Failure::Reported(rc)) => return rc,
        Err(Failure::Daemon(error)) => {
            let code = -error.errno();
            let text = format!("Error getting connection list: {}: check dmesg.\n", strerror(code));
            ctx.err(&text);
            return 0;
        }
    };
    if conns.is_empty() {
        ctx.out("<no connections>\n");
        return 0;
    }
    let mut text = String::new();
    for conn in &conns {
        match conn_line(conn) {
            Some(line) => text.push_str(&line),
            None => return report::unexpected(ctx, "a peer NID of the answer does not parse"),
        }
    }
    ctx.out(&text);
    0
}

/// One connection in lctl's socklnd format.
fn conn_line(conn: &ConnEntry) -> Option<String> {
    let peer = ProcessId::new(conn.peer_nid.parse().ok()?, conn.peer_pid);
    let kind = match conn.kind {
        ConnKind::Any => "A",
        ConnKind::Control => "C",
        ConnKind::BulkIn => "I",
        ConnKind::BulkOut => "O",
    };
    Some(format!(
        "{:<20} {kind}[{}]{}->{}:{} {}/{} {}\n",
        peer.to_string(),
        conn.scheduler,
        conn.local_ip,
        conn.remote_ip,
        conn.remote_port,
        conn.tx_buffer,
        conn.rx_buffer,
        if conn.nagle { "nagle" } else { "nonagle" },
    ))
}

/// The parameters `get_param` reads: libcfs's partition table, in the order `glob()` lists
/// them. lustre: lnet_debugfs.c (`cpu_partition_table`, `cpu_partition_distance`).
const PARAMS: [&str; 2] = ["cpu_partition_distance", "cpu_partition_table"];

/// lctl's `get_param` options ulnetctl does not carry (it reads no parameter tree).
const GET_PARAM_UNSUPPORTED: &str = "bcFHlLmMoprRtwyD";

/// `get_param [-n] [-N] PARAM...`: libcfs's CPU partition table (`0\t: 0 1 2 3`, a line per
/// partition) and the NUMA distances between partitions (`0\t: 0:10 1:21`), each PARAM a
/// shell pattern; any other parameter is not found, as lctl reports it. lustre:
/// lustre_param.c `jt_lcfg_getparam()`, `print_param_internal()`; lib-cpt.c
/// `cfs_cpt_table_print()`, `cfs_cpt_distance_print()`.
pub(crate) fn get_param(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    static LONGS: &[LongOpt] = &[
        LongOpt::new("no-name", HasArg::No, 'n'),
        LongOpt::new("only-name", HasArg::No, 'N'),
        LongOpt::new("name-only", HasArg::No, 'N'),
        LongOpt::new("dshbak", HasArg::No, 'b'),
        LongOpt::new("color", HasArg::Optional, 'c'),
        LongOpt::new("dir-only", HasArg::No, 'D'),
        LongOpt::new("directory-only", HasArg::No, 'D'),
        LongOpt::new("classify", HasArg::No, 'F'),
        LongOpt::new("header", HasArg::No, 'H'),
        LongOpt::new("links", HasArg::No, 'l'),
        LongOpt::new("no-links", HasArg::No, 'L'),
        LongOpt::new("merge", HasArg::No, 'm'),
        LongOpt::new("no-merge", HasArg::No, 'M'),
        LongOpt::new("module", HasArg::No, 'o'),
        LongOpt::new("path", HasArg::No, 'p'),
        LongOpt::new("readable", HasArg::No, 'r'),
        LongOpt::new("recursive", HasArg::No, 'R'),
        LongOpt::new("tunable", HasArg::No, 't'),
        LongOpt::new("writable", HasArg::No, 'w'),
        LongOpt::new("yaml", HasArg::No, 'y'),
    ];
    const CMD_HELP: i32 = 4;
    const ENOENT: i32 = 2;
    let (mut show_name, mut only_name) = (true, false);
    let mut getopt = Getopt::new(argv, "bc:FHlLmMnNoprRtwy", LONGS);
    while let Some(opt) = getopt.next() {
        match opt {
            Opt::Found { val: 'n', .. } => show_name = false,
            Opt::Found { val: 'N', .. } => only_name = true,
            Opt::Found { val, .. } if GET_PARAM_UNSUPPORTED.contains(val) => {
                ctx.err(&format!(
                    "get_param: option '-{val}' is not supported: ulnetctl reads \
                     {} only\n",
                    PARAMS.join(" and ")
                ));
                return 1;
            }
            Opt::Found { .. } | Opt::Error { .. } => {
                if let Opt::Error { message: Some(message), .. } = &opt {
                    ctx.err(message);
                }
                ctx.out(&format!("{}\n", GET_PARAM_HELP));
                return CMD_HELP;
            }
        }
    }
    let patterns = getopt.operands().to_vec();
    if patterns.is_empty() {
        ctx.out(&format!("{}\n", GET_PARAM_HELP));
        return CMD_HELP;
    }
    // With LNet down the kernel has no such files: every pattern is not found.
    let table = match ctx.call(&Request::CpuPartitions) {
        Ok(response) if ctx.json => {
            ctx.print_json(&response);
            return 0;
        }
        Ok(Response::CpuPartitions(table)) => Some(table),
        Ok(_) => return report::unexpected(ctx, "not a partition table"),
        Err(Failure::Reported(rc)) => return rc,
        Err(Failure::Daemon(ControlError::NotConfigured)) => None,
        Err(Failure::Daemon(error)) => {
            ctx.err(&format!("error: get_param: {}\n", strerror(-error.errno())));
            return -error.errno();
        }
    };
    let mut rc = 0;
    for pattern in &patterns {
        let names: Vec<&str> = PARAMS
            .into_iter()
            .filter(|name| table.is_some() && glob_match(pattern, name))
            .collect();
        if names.is_empty() {
            ctx.err(&format!(
                "error: get_param: param_path '{pattern}': No such file or directory\n"
            ));
            if rc == 0 {
                rc = ENOENT;
            }
        }
        // Each pattern's values before the next pattern's errors, as lctl prints them.
        let Some(table) = &table else { continue };
        let mut text = String::new();
        for name in names {
            let value = match name {
                "cpu_partition_table" => partition_table(&table.cpus),
                _ => partition_distances(&table.distances),
            };
            text.push_str(&param_line(name, value.trim_end_matches('\n'), show_name, only_name));
        }
        ctx.out(&text);
    }
    rc
}

const GET_PARAM_HELP: &str = "get the Lustre or LNET parameter\n\
     get value of Lustre or LNet parameter(s) from specified path,\n\
     which can contain shell-style filename patterns.\n\
     usage: get_param [--no-name] [--only-name] PARAM1 [PARAM2 ...]\n\
     \t-n, --no-name: print the values alone\n\
     \t-N, --only-name: print the names alone";

/// `cfs_cpt_table_print()`: `<cpt>\t: <cpu> <cpu>...`, a line per partition.
fn partition_table(cpus: &[Vec<u32>]) -> String {
    let mut text = String::new();
    for (cpt, cpus) in cpus.iter().enumerate() {
        text.push_str(&format!("{cpt}\t:"));
        for cpu in cpus {
            text.push_str(&format!(" {cpu}"));
        }
        text.push('\n');
    }
    text
}

/// `cfs_cpt_distance_print()`: `<cpt>\t: <cpt>:<distance>...`, a line per partition.
fn partition_distances(distances: &[Vec<u32>]) -> String {
    let mut text = String::new();
    for (from, row) in distances.iter().enumerate() {
        text.push_str(&format!("{from}\t:"));
        for (to, distance) in row.iter().enumerate() {
            text.push_str(&format!(" {to}:{distance}"));
        }
        text.push('\n');
    }
    text
}

/// One parameter as lctl prints it (`print_param_internal()`, no YAML, header or colour):
/// `name=value`, the value on the next line when it has several; the value alone with
/// `-n`; the name alone with `-N`.
fn param_line(name: &str, value: &str, show_name: bool, only_name: bool) -> String {
    if !show_name && value.is_empty() {
        return String::new();
    }
    let mut line = String::new();
    if show_name {
        line.push_str(name);
        if !only_name {
            line.push('=');
            if value.contains('\n') {
                line.push('\n');
            }
        }
    }
    if !only_name {
        line.push_str(value);
    }
    line.push('\n');
    line
}

/// Whether `name` matches the shell pattern `pattern` (`*`, `?`, `[...]` with ranges and
/// `!`/`^`), as `glob()` matches a parameter's file name.
fn glob_match(pattern: &str, name: &str) -> bool {
    let (pattern, name): (Vec<char>, Vec<char>) =
        (pattern.chars().collect(), name.chars().collect());
    // The last `*` seen and where the name stood then: on a mismatch, that star takes one more
    // character (linear in practice, quadratic at worst, and both are short).
    let (mut p, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        let here = name.get(n).copied().unwrap_or_default();
        match pattern.get(p) {
            Some('*') => {
                star = Some((p, n));
                p += 1;
                continue;
            }
            Some('?') => {
                p += 1;
                n += 1;
                continue;
            }
            Some('[') => {
                if let Some((matched, next)) = class_match(&pattern, p, here) {
                    if matched {
                        p = next;
                        n += 1;
                        continue;
                    }
                } else if here == '[' {
                    p += 1;
                    n += 1;
                    continue;
                }
            }
            Some(&c) if c == here => {
                p += 1;
                n += 1;
                continue;
            }
            _ => {}
        }
        match star {
            Some((at, from)) => {
                p = at + 1;
                n = from + 1;
                star = Some((at, from + 1));
            }
            None => return false,
        }
    }
    pattern.get(p..).is_some_and(|rest| rest.iter().all(|&c| c == '*'))
}

/// A bracket expression at `pattern[open]`: whether `c` is in it, and the index past its `]`;
/// `None` when it never closes (the `[` is then literal).
fn class_match(pattern: &[char], open: usize, c: char) -> Option<(bool, usize)> {
    let mut i = open + 1;
    let negated = matches!(pattern.get(i), Some('!' | '^'));
    if negated {
        i += 1;
    }
    let mut matched = false;
    let mut first = true;
    loop {
        let &item = pattern.get(i)?;
        if item == ']' && !first {
            return Some((matched != negated, i + 1));
        }
        first = false;
        match (pattern.get(i + 1), pattern.get(i + 2)) {
            (Some('-'), Some(&hi)) if hi != ']' => {
                matched |= item <= c && c <= hi;
                i += 3;
            }
            _ => {
                matched |= item == c;
                i += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_line_is_lctls() {
        let conn = ConnEntry {
            peer_nid: "1.1.1.1@tcp".into(),
            peer_pid: 12345,
            kind: ConnKind::BulkIn,
            scheduler: 0,
            local_ip: "1.1.1.1".parse().unwrap(),
            remote_ip: "1.1.1.2".parse().unwrap(),
            remote_port: 988,
            tx_buffer: 2_626_560,
            rx_buffer: 1_061_296,
            nagle: false,
        };
        assert_eq!(
            conn_line(&conn).unwrap(),
            "12345-1.1.1.1@tcp    I[0]1.1.1.1->1.1.1.2:988 2626560/1061296 nonagle\n"
        );
        let user = ConnEntry { peer_pid: 0x8000_0000 | 4242, nagle: true, ..conn };
        assert!(conn_line(&user).unwrap().starts_with("U4242-1.1.1.1@tcp    I[0]"));
        assert!(conn_line(&user).unwrap().ends_with(" nagle\n"));
    }

    #[test]
    fn a_peer_nid_that_does_not_parse_is_refused() {
        let conn = ConnEntry {
            peer_nid: "nonsense".into(),
            peer_pid: 1,
            kind: ConnKind::Any,
            scheduler: 0,
            local_ip: "1.1.1.1".parse().unwrap(),
            remote_ip: "1.1.1.2".parse().unwrap(),
            remote_port: 1,
            tx_buffer: 0,
            rx_buffer: 0,
            nagle: false,
        };
        assert_eq!(conn_line(&conn), None);
    }

    #[test]
    fn patterns_match_as_glob_does() {
        for (pattern, name, matched) in [
            ("cpu_partition_table", "cpu_partition_table", true),
            ("cpu_partition_*", "cpu_partition_distance", true),
            ("*", "cpu_partition_table", true),
            ("cpu*table", "cpu_partition_table", true),
            ("cpu*table", "cpu_partition_tables", false),
            ("cpu_partition_?able", "cpu_partition_table", true),
            ("cpu_partition_[dt]*", "cpu_partition_distance", true),
            ("cpu_partition_[!t]*", "cpu_partition_table", false),
            ("cpu_partition_[a-e]istance", "cpu_partition_distance", true),
            ("cpu_partition_[", "cpu_partition_[", true),
            ("peers", "cpu_partition_table", false),
            ("", "cpu_partition_table", false),
            ("**", "", true),
        ] {
            assert_eq!(glob_match(pattern, name), matched, "{pattern} {name}");
        }
    }

    /// lctl's shapes: one line inline, several on the next line, `-n` the value alone, `-N`
    /// the name alone.
    #[test]
    fn parameters_print_as_lctl_prints_them() {
        let table = partition_table(&[vec![0, 1], vec![2, 3]]);
        assert_eq!(table, "0\t: 0 1\n1\t: 2 3\n");
        let value = table.trim_end_matches('\n');
        assert_eq!(
            param_line("cpu_partition_table", value, true, false),
            "cpu_partition_table=\n0\t: 0 1\n1\t: 2 3\n"
        );
        assert_eq!(
            param_line("cpu_partition_table", "0\t: 0", true, false),
            "cpu_partition_table=0\t: 0\n"
        );
        assert_eq!(param_line("cpu_partition_table", value, false, false), "0\t: 0 1\n1\t: 2 3\n");
        assert_eq!(param_line("cpu_partition_table", value, true, true), "cpu_partition_table\n");
        assert_eq!(
            partition_distances(&[vec![10, 21], vec![21, 10]]),
            "0\t: 0:10 1:21\n1\t: 0:21 1:10\n"
        );
    }
}
