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
}
