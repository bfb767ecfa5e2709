//! `net add`, `net del`, `net show`, `net set`.
//!
//! lustre: lnet/utils/lnetctl.c `jt_add_ni()`, `jt_del_ni()`, `jt_show_net()`,
//! `yaml_lnet_config_ni()`; liblnetconfig.c `lustre_lnet_parse_interfaces()`,
//! `lustre_lnet_add_intf_descr()`.

use ulnet_config::grammar::{parse_cpt_option, parse_cpts};
use ulnet_config::render::{self, ErrorOp, ShowMode};
use ulnet_control::message::{
    LndTunablesSpec, LocalNiSpec, NetAdd, NetDel, NetSet, TunablesSpec, errno,
};
use ulnet_control::{ControlError, Request, Response};
use ulnet_proto::addr::{LndType, Net};

use super::NET_CMDS;
use super::{print_rendered, split_top_level};
use crate::cnum::parse_long;
use crate::dispatch::{Command, RC_BAD_PARAM, check_cmd, print_help};
use crate::{Ctx, Failure, report};
use ulnet_getopt::{Getopt, HasArg, LongOpt, Opt};

/// `LNET_MAX_STR_LEN` (include/uapi/linux/lnet/lnet-dlc.h): bound of an interface entry and
/// of `--traffic-class`.
const MAX_STR_LEN: usize = 128;

/// The largest `--conns-per-peer` (lnetctl checks `> 127`).
const MAX_CONNS_PER_PEER: i64 = 127;

pub(crate) fn add(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    static LONGS: &[LongOpt] = &[
        LongOpt::new("auth-key", HasArg::Required, 'a'),
        LongOpt::new("peer-buffer-credits", HasArg::Required, 'b'),
        LongOpt::new("peer-credits", HasArg::Required, 'c'),
        LongOpt::new("if", HasArg::Required, 'i'),
        LongOpt::new("skip-mr-route-setup", HasArg::No, 'k'),
        LongOpt::new("conns-per-peer", HasArg::Required, 'm'),
        LongOpt::new("net", HasArg::Required, 'n'),
        LongOpt::new("nid", HasArg::Required, 'N'),
        LongOpt::new("ip2net", HasArg::Required, 'p'),
        LongOpt::new("credits", HasArg::Required, 'r'),
        LongOpt::new("cpt", HasArg::Required, 's'),
        LongOpt::new("peer-timeout", HasArg::Required, 't'),
        LongOpt::new("traffic-class", HasArg::Required, 'T'),
        LongOpt::new("tos", HasArg::Required, 'S'),
    ];
    let rc = check_cmd(ctx, NET_CMDS, "net", Some("add"), 0, &argv);
    if rc != 0 {
        return rc;
    }
    let mut request = NetAdd::default();
    let mut nis = NiList::default();
    let (mut peer_timeout, mut peer_credits, mut buffer_credits, mut credits) = (-1, -1, -1, -1);
    let (mut conns_per_peer, mut tos, mut auth_key) = (-1, -1, -1);
    let mut nid_request = false;
    let mut getopt = Getopt::new(argv, "a:b:c:i:k:m:n:p:r:s:t:T:", LONGS);
    while let Some(opt) = getopt.next() {
        let (val, arg) = match opt {
            Opt::Found { val, arg } => (val, arg.unwrap_or_default()),
            Opt::Error { message, .. } => {
                ctx.err(message.as_deref().unwrap_or(""));
                print_help(ctx, NET_CMDS, "net", Some("add"));
                return 0;
            }
        };
        // Unparseable numeric tunables are ignored, as lnetctl ignores them.
        match val {
            'a' => auth_key = parse_long(&arg).unwrap_or(auth_key),
            'b' => buffer_credits = parse_long(&arg).unwrap_or(buffer_credits),
            'c' => peer_credits = parse_long(&arg).unwrap_or(peer_credits),
            'r' => credits = parse_long(&arg).unwrap_or(credits),
            't' => peer_timeout = parse_long(&arg).unwrap_or(peer_timeout),
            'i' => {
                if nis.parse(&arg).is_err() {
                    report::cyaml(ctx, "ni", "add", -1, "bad interface list");
                    return RC_BAD_PARAM;
                }
            }
            'N' => {
                if nis.parse(&arg).is_err() {
                    report::cyaml(ctx, "ni", "add", -1, "bad NID list");
                    return RC_BAD_PARAM;
                }
                nid_request = true;
            }
            'k' => {}
            'm' => match parse_long(&arg) {
                Some(value) if value <= MAX_CONNS_PER_PEER => conns_per_peer = value,
                _ => {
                    let descr = "invalid conns-per-peer value (valid range 0-127)";
                    report::cyaml(ctx, "ni", "add", -1, descr);
                    return -1;
                }
            },
            'n' => request.net = Some(arg),
            'p' => request.ip2net = Some(arg),
            // An unparseable CPT list is dropped silently (lnetctl keeps cfs_expr_list_parse's
            // failure code and sends no list); one that parses goes to the node, which refuses
            // a CPT it does not have.
            's' => request.cpts = parse_cpt_option(&arg).is_ok().then_some(arg),
            'T' => {
                if arg.is_empty() || arg.len() >= MAX_STR_LEN {
                    report::cyaml(ctx, "ni", "add", -1, "Invalid traffic-class argument");
                    return RC_BAD_PARAM;
                }
                request.lnd_tunables.traffic_class = Some(arg);
            }
            'S' => match parse_long(&arg) {
                Some(value) if (-1..=0xff).contains(&value) => tos = value,
                _ => {
                    report::cyaml(ctx, "ni", "add", -1, "Invalid ToS argument");
                    return RC_BAD_PARAM;
                }
            },
            _ => return 0,
        }
    }
    if nid_request && request.net.is_some() {
        ctx.out("--net is invalid with --nid option\n");
        return -errno::EINVAL;
    }
    if request.net.is_none() {
        request.net = nis.net.clone();
    }
    if request.ip2net.is_none() && request.net.is_none() {
        ctx.out("missing mandatory parameters in NI config: 'network'\n");
        return -errno::EINVAL;
    }
    if request.ip2net.is_none() && nis.entries.is_empty() {
        ctx.out("creating a local NI needs at least one interface\n");
        return -errno::EINVAL;
    }
    request.nis = nis.entries;
    request.tunables = TunablesSpec {
        peer_timeout: (peer_timeout >= 0).then_some(peer_timeout),
        peer_credits: (peer_credits > 0).then_some(peer_credits),
        peer_buffer_credits: (buffer_credits > 0).then_some(buffer_credits),
        credits: (credits > 0).then_some(credits),
    };
    request.lnd_tunables = LndTunablesSpec {
        conns_per_peer: (conns_per_peer > -1).then_some(conns_per_peer),
        tos: (tos != -1).then_some(tos),
        auth_key: (auth_key > 0).then_some(auth_key),
        traffic_class: request.lnd_tunables.traffic_class.take(),
    };
    // `--skip-mr-route-setup` is accepted and has nothing to skip: ulnetd installs no Linux
    // policy routes (lnetctl's `lustre_lnet_setup_mrrouting()`).
    acknowledge(ctx, &Request::NetAdd(request), ErrorOp::Add)
}

pub(crate) fn del(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    static LONGS: &[LongOpt] = &[
        LongOpt::new("net", HasArg::Required, 'n'),
        LongOpt::new("if", HasArg::Required, 'i'),
        LongOpt::new("nid", HasArg::Required, 'N'),
    ];
    let rc = check_cmd(ctx, NET_CMDS, "net", Some("del"), 0, &argv);
    if rc != 0 {
        return rc;
    }
    let mut request = NetDel::default();
    let mut nis = NiList::default();
    let mut nid_request = false;
    let mut getopt = Getopt::new(argv, "n:i:", LONGS);
    while let Some(opt) = getopt.next() {
        match opt {
            Opt::Found { val: 'n', arg } => request.net = arg,
            Opt::Found { val: 'N', arg } => {
                if nis.parse(arg.as_deref().unwrap_or("")).is_err() {
                    report::cyaml(ctx, "ni", "del", -1, "bad NID list");
                    return RC_BAD_PARAM;
                }
                nid_request = true;
            }
            Opt::Found { val: 'i', arg } => {
                if nis.parse(arg.as_deref().unwrap_or("")).is_err() {
                    // lnetctl reports this one under "add".
                    report::cyaml(ctx, "ni", "add", -1, "bad interface list");
                    return RC_BAD_PARAM;
                }
            }
            Opt::Error { message, .. } => {
                ctx.err(message.as_deref().unwrap_or(""));
                print_help(ctx, NET_CMDS, "net", Some("del"));
                return 0;
            }
            Opt::Found { .. } => return 0,
        }
    }
    if nid_request && request.net.is_some() {
        ctx.out("--net is invalid with --nid option\n");
        return -errno::EINVAL;
    }
    if request.net.is_none() {
        request.net = nis.net.clone();
    }
    if request.net.is_none() {
        ctx.out("missing mandatory parameters in NI config: 'network'\n");
        return -errno::EINVAL;
    }
    request.nis = nis.entries;
    acknowledge(ctx, &Request::NetDel(request), ErrorOp::Del)
}

pub(crate) fn show(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    static LONGS: &[LongOpt] = &[
        LongOpt::new("net", HasArg::Required, 'n'),
        LongOpt::new("verbose", HasArg::Optional, 'v'),
    ];
    let rc = check_cmd(ctx, NET_CMDS, "net", Some("show"), 0, &argv);
    if rc != 0 {
        return rc;
    }
    let mut getopt = Getopt::new(argv, "n:v", LONGS);
    let (net, level) = match show_options(ctx, &mut getopt, NET_CMDS, "net") {
        Ok(options) => options,
        Err(rc) => return rc,
    };
    let nets = match ctx.call(&Request::NetShow { net, level }) {
        Ok(response) if ctx.json => {
            ctx.print_json(&response);
            return 0;
        }
        Ok(Response::Nets(nets)) => nets,
        Ok(_) => return report::unexpected(ctx, "not a net list"),
        Err(Failure::Reported(rc)) => return rc,
        Err(Failure::Daemon(error)) => return report::netlink(ctx, ErrorOp::Show, "net", &error),
    };
    print_rendered(ctx, &nets, |nets: &[render::NetEntry]| {
        render::net_show(nets, ShowMode::Show(level))
    })
}

/// The `-n` filter and `-v` level of `net show` and `peer show` (`group`'s, in `table`).
/// `Err` is the command's status when an option stops it: getopt's message and the command's
/// help after an error, nothing for an option the command ignores; 0 either way.
pub(crate) fn show_options(
    ctx: &mut Ctx<'_, '_>,
    getopt: &mut Getopt,
    table: &'static [Command],
    group: &str,
) -> Result<(Option<String>, u32), i32> {
    let (mut filter, mut level) = (None, 0);
    while let Some(opt) = getopt.next() {
        match opt {
            Opt::Found { val: 'n', arg } => filter = arg,
            Opt::Found { val: 'v', arg } => level = verbosity(getopt, arg.as_deref()),
            Opt::Error { message, .. } => {
                ctx.err(message.as_deref().unwrap_or(""));
                print_help(ctx, table, group, Some("show"));
                return Err(0);
            }
            // Including `peer show`'s 'h', which lnetctl's switch does not handle.
            Opt::Found { .. } => return Err(0),
        }
    }
    Ok((filter, level))
}

/// lnetctl's `-v`/`--verbose` level: `--verbose=N` (or `-vN` where `v::`) gives 1; otherwise
/// the next word is taken as the level when it does not start with '-', and consumed even
/// when it is not a number (level 1 then).
pub(crate) fn verbosity(getopt: &mut Getopt, attached: Option<&str>) -> u32 {
    if attached.is_some()
        || getopt.optind >= getopt.argc()
        || getopt.arg(getopt.optind).starts_with('-')
    {
        return 1;
    }
    let word = getopt.arg(getopt.optind).to_string();
    getopt.optind += 1;
    match parse_long(&word) {
        // The level is the netlink request version; negative levels show the basics.
        Some(level) => u32::try_from(level.max(0)).unwrap_or(u32::MAX),
        None => 1,
    }
}

/// `net set --health V | --conns-per-peer N (--nid N | --all)`: lnetctl's
/// `set_value_helper()` and `yaml_lnet_config_ni_value()`. `--lnd-timeout` is checked as
/// lnetctl checks it, then answered as not supported (ulnetd cannot change a running LND's
/// timeout yet).
pub(crate) fn set(ctx: &mut Ctx<'_, '_>, argv: Vec<String>) -> i32 {
    let rc = check_cmd(ctx, NET_CMDS, "net", Some("set"), 0, &argv);
    if rc != 0 {
        return rc;
    }
    let options = match set_options(ctx, argv, false) {
        Ok(options) => options,
        Err(rc) => return rc,
    };
    // lnetctl.c yaml_lnet_config_ni_value(): "you can't have both setting all NIDs and a
    // requested NID", and a NID needs its '@'.
    if options.all && options.nid.is_some()
        || options.nid.as_deref().is_some_and(|nid| !nid.contains('@'))
    {
        return set_failed(ctx, -errno::EINVAL);
    }
    if let (Some(timeout), Some(net)) = (options.lnd_timeout, options.net) {
        return set_lnd_timeout(ctx, timeout, net);
    }
    if options.health.is_none() && options.conns_per_peer.is_none() {
        return 0;
    }
    let request = Request::NetSet(NetSet {
        nid: options.nid,
        all: options.all,
        health: options.health,
        conns_per_peer: options.conns_per_peer,
        lnd_timeout: None,
        net: None,
    });
    match acknowledge(ctx, &request, ErrorOp::Set) {
        0 => 0,
        rc => set_failed(ctx, rc),
    }
}

/// LNDs with a timeout lnetctl can set, and the module parameter it writes.
/// lustre: liblnetconfig.c `lustre_lnet_config_lnd_timeout()`.
const LND_TIMEOUT_TYPES: [(LndType, &str); 4] = [
    (LndType::SOCK, "sock_timeout"),
    (LndType::O2IB, "timeout"),
    (LndType::KFI, "kfi_timeout"),
    (LndType::GNI, "timeout"),
];

/// `LUSTRE_CFG_RC_NO_MATCH` (-ENOMSG): a module parameter file that is not there.
const RC_NO_MATCH: i32 = -42;

/// `net set --lnd-timeout S --net NET` (lnetctl's `lustre_lnet_config_lnd_timeout()`): the
/// timeout belongs to the net's LND, not to the net (socklnd's `sock_timeout` is
/// module-wide). socklnd's goes to the node; the other LNDs with a timeout are not there
/// (their module parameter cannot be written), and the rest have none. A failure is reported
/// under `set: - lnd_timeout:`, then under `net: - set:` as `set_value_helper()` adds.
fn set_lnd_timeout(ctx: &mut Ctx<'_, '_>, timeout: i64, net: Net) -> i32 {
    let lnd = Net::new(net.lnd, 0).to_string();
    let (rc, descr) = if !LND_TIMEOUT_TYPES.iter().any(|(known, _)| *known == net.lnd) {
        (-errno::EINVAL, format!("\"Net {lnd} does not accept a LND timeout\""))
    } else if net.lnd != LndType::SOCK {
        (RC_NO_MATCH, format!("\"Failed to set LND timeout for net {lnd}\""))
    } else {
        let request = Request::NetSet(NetSet {
            lnd_timeout: Some(timeout),
            net: Some(net.to_string()),
            ..NetSet::default()
        });
        match ctx.call(&request) {
            Ok(Response::Done) => return 0,
            Ok(_) => return report::unexpected(ctx, "not an acknowledgement"),
            Err(Failure::Reported(rc)) => return rc,
            Err(Failure::Daemon(ControlError::NotConfigured)) => {
                (RC_NO_MATCH, format!("\"Failed to set LND timeout for net {lnd}\""))
            }
            Err(Failure::Daemon(error)) if error.errno() == -errno::ENODEV => {
                (RC_NO_MATCH, format!("\"Failed to set LND timeout for net {lnd}\""))
            }
            Err(Failure::Daemon(error)) => (error.errno(), format!("\"{}\"", error.descr())),
        }
    };
    report::cyaml(ctx, "set", "lnd_timeout", rc, &descr);
    set_failed(ctx, rc)
}

/// What `set_value_helper()` parsed. Values that do not parse, and negative health, are
/// `None`: lnetctl sends nothing for them.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct SetOptions {
    pub nid: Option<String>,
    pub all: bool,
    pub health: Option<i64>,
    pub state: Option<i64>,
    pub lnd_timeout: Option<i64>,
    pub net: Option<Net>,
    pub conns_per_peer: Option<i64>,
}

/// lnetctl's `set_value_helper()` option loop, shared by `net set` and `peer set`
/// (`peers`: `--state` is read, `--conns-per-peer` ignored). A refusal is reported in
/// cYAML under `net: - set:` and its return code comes back as `Err`.
pub(crate) fn set_options(
    ctx: &mut Ctx<'_, '_>,
    argv: Vec<String>,
    peers: bool,
) -> Result<SetOptions, i32> {
    static LONGS: &[LongOpt] = &[
        LongOpt::new("all", HasArg::No, 'a'),
        LongOpt::new("net", HasArg::Required, 'i'),
        LongOpt::new("lnd-timeout", HasArg::Required, 'l'),
        LongOpt::new("conns-per-peer", HasArg::Required, 'm'),
        LongOpt::new("nid", HasArg::Required, 'n'),
        LongOpt::new("state", HasArg::Required, 's'),
        LongOpt::new("health", HasArg::Required, 't'),
    ];
    let mut options = SetOptions::default();
    let mut getopt = Getopt::new(argv, "ai:l:m:n:s:t:", LONGS);
    while let Some(opt) = getopt.next() {
        let (val, arg) = match opt {
            Opt::Found { val, arg } => (val, arg.unwrap_or_default()),
            Opt::Error { message, .. } => {
                ctx.err(message.as_deref().unwrap_or(""));
                let descr = "\"Invalid option or missing argument\"";
                report::cyaml(ctx, "net", "set", RC_BAD_PARAM, descr);
                return Err(RC_BAD_PARAM);
            }
        };
        match val {
            'a' => options.all = true,
            'i' => match arg.parse::<Net>() {
                Ok(net) => options.net = Some(net),
                Err(_) => {
                    let descr = format!("\"Invalid network type: {arg}\"");
                    report::cyaml(ctx, "net", "set", RC_BAD_PARAM, &descr);
                    return Err(RC_BAD_PARAM);
                }
            },
            'l' => {
                let timeout = c_atoi(&arg);
                if timeout < 0 {
                    let descr = format!("\"Invalid LND timeout value '{arg}', must be >= 0\"");
                    report::cyaml(ctx, "net", "set", RC_BAD_PARAM, &descr);
                    return Err(RC_BAD_PARAM);
                }
                options.lnd_timeout = Some(timeout);
            }
            'm' if peers => options.conns_per_peer = None,
            'm' => match parse_long(&arg) {
                Some(value) if value <= MAX_CONNS_PER_PEER => {
                    options.conns_per_peer = (value != -1).then_some(value);
                }
                _ => {
                    let descr = "invalid conns-per-peer value (valid range 0-127)";
                    report::cyaml(ctx, "net", "set", -1, descr);
                    return Err(-1);
                }
            },
            'n' => options.nid = Some(arg),
            's' if peers => options.state = parse_long(&arg).filter(|state| *state != -1),
            's' => {}
            't' => options.health = parse_long(&arg).filter(|health| *health >= 0),
            _ => return Err(0),
        }
    }
    if options.lnd_timeout.is_some() && options.net.is_none() {
        let descr = "\"Specified --lnd-timeout without --net option\"";
        report::cyaml(ctx, "net", "set", RC_BAD_PARAM, descr);
        return Err(RC_BAD_PARAM);
    }
    Ok(options)
}

/// `set_value_helper()`'s closing report of any failure: `net: - set:` with the code and
/// an empty description (lnetctl's `err_str` is only filled for its own checks).
pub(crate) fn set_failed(ctx: &mut Ctx<'_, '_>, rc: i32) -> i32 {
    report::cyaml(ctx, "net", "set", rc, "");
    rc
}

/// C `atoi()`: optional blanks and sign, then digits; anything else ends the number.
fn c_atoi(text: &str) -> i64 {
    let text = text.trim_start();
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let value = digits.chars().take_while(char::is_ascii_digit).fold(0i64, |value, digit| {
        value.saturating_mul(10).saturating_add(i64::from(digit.to_digit(10).unwrap_or(0)))
    });
    if negative { -value } else { value }
}

/// Sends a request whose success is silent; errors in dialect N under `op: - net:`.
fn acknowledge(ctx: &mut Ctx<'_, '_>, request: &Request, op: ErrorOp) -> i32 {
    match ctx.call(request) {
        Ok(Response::Done) => 0,
        Ok(_) => report::unexpected(ctx, "not an acknowledgement"),
        Err(Failure::Reported(rc)) => rc,
        Err(Failure::Daemon(error)) => report::netlink(ctx, op, "net", &error),
    }
}

/// The NIs of `--if`/`--nid` lists and the net their NIDs name.
#[derive(Debug, Default)]
struct NiList {
    entries: Vec<LocalNiSpec>,
    /// The net after the last '@' seen.
    net: Option<String>,
}

/// A list entry lnetctl refuses.
#[derive(Debug, PartialEq, Eq)]
enum NiListError {
    UnclosedBracket,
    BadCpts,
    TooLong,
}

impl NiList {
    /// Appends the entries of a comma-separated list; each is `name[cpts]` or a NID.
    /// Commas inside brackets belong to the CPT list (lnetctl splits `eth0[0,1],eth1` at the
    /// first comma whatever the brackets, which makes such lists unusable there), and empty
    /// entries are skipped.
    fn parse(&mut self, text: &str) -> Result<(), NiListError> {
        for entry in split_top_level(text) {
            if entry.is_empty() {
                continue;
            }
            if entry.len() >= MAX_STR_LEN {
                return Err(NiListError::TooLong);
            }
            if let Some((_, net)) = entry.rsplit_once('@') {
                self.net = Some(net.to_string());
                self.entries.push(LocalNiSpec::Nid { nid: entry.to_string() });
                continue;
            }
            let (name, cpts) = match entry.find('[') {
                // `open` comes from find(), a char boundary.
                Some(open) => {
                    let cpts = &entry[open..];
                    if !cpts.contains(']') {
                        return Err(NiListError::UnclosedBracket);
                    }
                    parse_cpts(cpts).map_err(|_| NiListError::BadCpts)?;
                    (&entry[..open], Some(cpts.to_string()))
                }
                None => (entry, None),
            };
            self.entries.push(LocalNiSpec::Interface { name: name.to_string(), cpts });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Result<NiList, NiListError> {
        let mut list = NiList::default();
        list.parse(text).map(|()| list)
    }

    #[test]
    fn interfaces_with_cpts() {
        let list = parsed("eth0[0,1],eth1[2],eth2").unwrap();
        assert_eq!(
            list.entries,
            vec![
                LocalNiSpec::Interface { name: "eth0".into(), cpts: Some("[0,1]".into()) },
                LocalNiSpec::Interface { name: "eth1".into(), cpts: Some("[2]".into()) },
                LocalNiSpec::Interface { name: "eth2".into(), cpts: None },
            ]
        );
        assert_eq!(list.net, None);
    }

    #[test]
    fn nids_name_their_net() {
        let list = parsed("127.0.0.2@tcp1,").unwrap();
        assert_eq!(list.entries, vec![LocalNiSpec::Nid { nid: "127.0.0.2@tcp1".into() }]);
        assert_eq!(list.net.as_deref(), Some("tcp1"));
    }

    #[test]
    fn bad_entries() {
        assert_eq!(parsed("eth0[0").unwrap_err(), NiListError::UnclosedBracket);
        assert_eq!(parsed("eth0[x]").unwrap_err(), NiListError::BadCpts);
        assert_eq!(parsed(&"e".repeat(MAX_STR_LEN)).unwrap_err(), NiListError::TooLong);
    }
}
