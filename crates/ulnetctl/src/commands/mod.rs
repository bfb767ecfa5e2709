//! lnetctl's command tables with their help texts, and the handlers behind them, with lctl's
//! LNet queries (`list_nids`, `which_nid`, `conn_list`, `get_param`) added at the end of the
//! top level.
//!
//! lustre: lnet/utils/lnetctl.c `cmd_list`, `lnet_cmds`, `route_cmds`, `net_cmds`,
//! `routing_cmds`, `stats_cmds`, `debug_cmds`, `global_cmds`, `set_cmds`, `peer_cmds`,
//! `udsp_cmds`, `fault_cmds`, `fault_drop_cmds`, `fault_delay_cmds`.

use crate::Ctx;
use crate::dispatch::Action::{Group, Run};
use crate::dispatch::Command;

mod debug;
mod fault;
mod host;
mod lctl;
mod lnet;
mod manage;
mod net;
mod peer;
mod route;
mod settings;
mod transfer;
mod udsp;

/// The top-level words.
pub(crate) static CMD_LIST: &[Command] = &[
    Command {
        name: "lnet",
        action: Group(LNET_CMDS),
        help: "lnet {configure | unconfigure} [--all|--large]",
    },
    Command { name: "route", action: Group(ROUTE_CMDS), help: "route {add | del | show | help}" },
    Command { name: "net", action: Group(NET_CMDS), help: "net {add | del | show | set | help}" },
    Command { name: "routing", action: Group(ROUTING_CMDS), help: "routing {show | help}" },
    Command {
        name: "set",
        action: Group(SET_CMDS),
        help: "set {tiny_buffers | small_buffers | large_buffers | routing | numa_range | \
               max_interfaces | discovery | drop_asym_route | retry_count | \
               transaction_timeout | health_sensitivity | recovery_interval | \
               router_sensitivity | response_tracking | recovery_limit}",
    },
    Command { name: "import", action: Run(transfer::import), help: "import FILE.yaml" },
    Command { name: "export", action: Run(transfer::export), help: "export FILE.yaml" },
    Command { name: "stats", action: Group(STATS_CMDS), help: "stats {show | help}" },
    Command {
        name: "debug",
        action: Group(DEBUG_CMDS),
        help: "debug {recovery {local | peer} | peer}",
    },
    Command { name: "global", action: Group(GLOBAL_CMDS), help: "global {show | help}" },
    Command {
        name: "peer",
        action: Group(PEER_CMDS),
        help: "peer {add | del | show | list | set | help}",
    },
    Command { name: "ping", action: Run(manage::ping), help: "ping nid,[nid,...]" },
    Command { name: "discover", action: Run(manage::discover), help: "discover nid[,nid,...]" },
    Command {
        name: "service-id",
        action: Run(host::service_id),
        help: "Calculate IB Lustre service ID\n",
    },
    Command { name: "udsp", action: Group(UDSP_CMDS), help: "udsp {add | del | help}" },
    Command { name: "fault", action: Group(FAULT_CMDS), help: "{drop | delay | help}" },
    Command {
        name: "setup-mrrouting",
        action: Run(host::setup_mrrouting),
        help: "setup linux routing tables\n",
    },
    Command {
        name: "setup-sysctl",
        action: Run(host::setup_sysctl),
        help: "setup linux sysctl parameter for large systems\n",
    },
    Command {
        name: "cpt-of-nid",
        action: Run(manage::cpt_of_nid),
        help: "Calculate the CPTs associated with NIDs\n usage:\n\tlnetctl cpt-of-nid nid[ nid ...]\n",
    },
    // lctl's LNet queries (lustre/utils/lctl.c `cmdlist`), which lnetctl lacks.
    Command {
        name: "list_nids",
        action: Run(lctl::list_nids),
        help: "list local NIDs\nusage: list_nids [all]",
    },
    Command {
        name: "which_nid",
        action: Run(lctl::which_nid),
        help: "choose a NID\nusage: which_nid NID [NID...]",
    },
    Command {
        name: "conn_list",
        action: Run(lctl::conn_list),
        help: "print all the remote LNet connections\nusage: conn_list [--net NET]",
    },
    Command {
        name: "get_param",
        action: Run(lctl::get_param),
        help: "get the CPU partition table or distances\n\
               usage: get_param [--no-name] [--only-name] PARAM1 [PARAM2 ...]\n\
               \t-n, --no-name: print the values alone\n\
               \t-N, --only-name: print the names alone",
    },
];

pub(crate) static LNET_CMDS: &[Command] = &[
    Command {
        name: "configure",
        action: Run(lnet::configure),
        help: "configure lnet\n\
               \t--all: load NI configuration from module parameters\n\
               \t--large: start LNet with large NIDs\n",
    },
    Command { name: "unconfigure", action: Run(lnet::unconfigure), help: "unconfigure lnet\n" },
];

static ROUTE_CMDS: &[Command] = &[
    Command {
        name: "add",
        action: Run(route::add),
        help: "add a route\n\
               \t--net: net name (e.g. tcp0)\n\
               \t--gateway: gateway nid (e.g. 10.1.1.2@tcp)\n\
               \t--hop|hop-count: number to final destination (1 <= hops <= 255)\n\
               \t--priority: priority of route (0 - highest prio\n\
               \t--health_sensitivity: gateway health sensitivity (>= 1)\n",
    },
    Command {
        name: "del",
        action: Run(route::del),
        help: "delete a route\n\
               \t--net: net name (e.g. tcp0)\n\
               \t--gateway: gateway nid (e.g. 10.1.1.2@tcp)\n",
    },
    Command {
        name: "show",
        action: Run(route::show),
        help: "show routes\n\
               \t--net: net name (e.g. tcp0) to filter on\n\
               \t--gateway: gateway nid (e.g. 10.1.1.2@tcp) to filter on\n\
               \t--hop|hop-count: number to final destination (1 <= hops <= 255) to filter on\n\
               \t--priority: priority of route (0 - highest prio to filter on\n\
               \t--verbose: display detailed output per route\n",
    },
];

pub(crate) static NET_CMDS: &[Command] = &[
    Command {
        name: "add",
        action: Run(net::add),
        help: "add a network\n\
               \t--net: net name (e.g. tcp0)\n\
               \t--if: physical interface (e.g. eth0)\n\
               \t--nid: bring up NI based on the address of the specified LNet NID\n\
               \t--ip2net: specify networks based on IP address patterns\n\
               \t--peer-timeout: time to wait before declaring a peer dead\n\
               \t--peer-credits: define the max number of inflight messages\n\
               \t--peer-buffer-credits: the number of buffer credits per peer\n\
               \t--credits: Network Interface credits\n\
               \t--cpt: CPU Partitions configured net uses (e.g. [0,1]\n\
               \t--conns-per-peer: number of connections per peer\n\
               \t--skip-mr-route-setup: do not add linux route for the ni\n\
               \t--auth-key: Network authorization key (kfilnd only)\n\
               \t--traffic-class: Traffic class (kfilnd only)\n\
               \t--tos: IP's Type of Service\n",
    },
    Command {
        name: "del",
        action: Run(net::del),
        help: "delete a network\n\
               \t--net: net name (e.g. tcp0)\n\
               \t--nid: shutdown NI based on the address of the specified LNet NID\n\
               \t--if: physical interface (e.g. eth0)\n",
    },
    Command {
        name: "show",
        action: Run(net::show),
        help: "show networks\n\
               \t--net: net name (e.g. tcp0) to filter on\n\
               \t--verbose: display detailed output per network. Optional argument of '2' \
               outputs more stats\n",
    },
    Command {
        name: "set",
        action: Run(net::set),
        help: "set local NI specific parameter\n\
               \t--nid: NI NID to set the value on\n\
               \t--net: network to set the value on (e.g. tcp, o2ib, kfi)\n\
               \t--lnd-timeout: set LND timeout (seconds) for LND used by --net argument\n\
               \t--health: specify health value to set\n\
               \t--conns-per-peer: number of connections per peer\n\
               \t--all: set all NIs value to the one specified\n",
    },
];

static ROUTING_CMDS: &[Command] = &[Command {
    name: "show",
    action: Run(route::routing_show),
    help: "show routing information\n",
}];

pub(crate) static STATS_CMDS: &[Command] = &[
    Command { name: "show", action: Run(settings::stats_show), help: "show LNET statistics\n" },
    Command { name: "reset", action: Run(settings::stats_reset), help: "reset LNET statistics\n" },
];

pub(crate) static DEBUG_CMDS: &[Command] = &[
    Command {
        name: "recovery",
        action: Run(debug::recovery),
        help: "list recovery queues\n\
               \t--local : list local recovery queue\n\
               \t--peer : list peer recovery queue\n",
    },
    Command {
        name: "peer",
        action: Run(debug::peer),
        help: "show peer debug info\n\t--nid: peer's NID\n",
    },
    Command { name: "nidlist", action: Run(debug::nidlist), help: "debug nidlist parsing\n" },
];

pub(crate) static GLOBAL_CMDS: &[Command] = &[Command {
    name: "show",
    action: Run(settings::global_show),
    help: "show global variables\n",
}];

pub(crate) static SET_CMDS: &[Command] = &[
    Command {
        name: "tiny_buffers",
        action: Run(settings::set),
        help: "set tiny routing buffers\n\tVALUE must be greater than 0\n",
    },
    Command {
        name: "small_buffers",
        action: Run(settings::set),
        help: "set small routing buffers\n\tVALUE must be greater than 0\n",
    },
    Command {
        name: "large_buffers",
        action: Run(settings::set),
        help: "set large routing buffers\n\tVALUE must be greater than 0\n",
    },
    Command {
        name: "routing",
        action: Run(settings::set),
        help: "enable/disable routing\n\t0 - disable routing\n\t1 - enable routing\n",
    },
    Command {
        name: "numa_range",
        action: Run(settings::set),
        help: "set NUMA range for NI selection\n\tVALUE must be at least 0\n",
    },
    Command {
        name: "max_interfaces",
        action: Run(settings::set),
        help: "set the default value for max interfaces\n\tValue must be greater than 16\n",
    },
    Command {
        name: "discovery",
        action: Run(settings::set),
        help: "enable/disable peer discovery\n\
               \t0 - disable peer discovery\n\
               \t1 - enable peer discovery (default)\n",
    },
    Command {
        name: "drop_asym_route",
        action: Run(settings::set),
        help: "drop/accept asymmetrical route messages\n\
               \t0 - accept asymmetrical route messages (default)\n\
               \t1 - drop asymmetrical route messages\n",
    },
    Command {
        name: "retry_count",
        action: Run(settings::set),
        help: "number of retries\n\t0 - turn of retries\n\t>0 - number of retries\n",
    },
    Command {
        name: "transaction_timeout",
        action: Run(settings::set),
        help: "Message/Response timeout\n\t>0 - timeout in seconds\n",
    },
    Command {
        name: "health_sensitivity",
        action: Run(settings::set),
        help: "sensitivity to failure\n\
               \t0 - turn off health evaluation\n\
               \t>0 - sensitivity value not more than 1000\n",
    },
    Command {
        name: "recovery_interval",
        action: Run(settings::set),
        help: "interval to ping in seconds (at least 1)\n\t>0 - time in seconds between pings\n",
    },
    Command {
        name: "router_sensitivity",
        action: Run(settings::set),
        help: "router sensitivity %\n\
               \t100 - router interfaces need to be fully healthy to be used\n\
               \t<100 - router interfaces can be used even if not healthy\n",
    },
    Command {
        name: "response_tracking",
        action: Run(settings::set),
        help: "Set the behavior of response tracking\n\
               \t0 - Only LNet pings and discovery pushes utilize response tracking\n\
               \t1 - GETs are eligible for response tracking\n\
               \t2 - PUTs are eligible for response tracking\n\
               \t3 - Both PUTs and GETs are eligible for response tracking (default)\n\
               \tNote: Regardless of the value of the response_tracking parameter LNet\n\
               \t      pings and discovery pushes always utilize response tracking\n",
    },
    Command {
        name: "recovery_limit",
        action: Run(settings::set),
        help: "Set how long LNet will attempt to recover unhealthy interfaces.\n\
               \t0 - Recover indefinitely (default)\n\
               \t>0 - Recover for the specified number of seconds.\n",
    },
    Command {
        name: "max_recovery_ping_interval",
        action: Run(settings::set),
        help: "maximum recovery ping interval\n\
               \t>0 - maximum recovery ping interval in seconds\n",
    },
];

pub(crate) static PEER_CMDS: &[Command] = &[
    Command {
        name: "add",
        action: Run(peer::add),
        help: "add a peer NID\n\
               \t--prim_nid: Primary NID of the peer.\n\
               \t--nid: one or more peer NIDs\n\
               \t--non_mr: create this peer as not Multi-Rail capable\n\
               \t--ip2nets: specify a range of nids per peer\n\
               \t--lock_prim: lock primary nid\n",
    },
    Command {
        name: "del",
        action: Run(peer::del),
        help: "delete a peer NID\n\
               \t--prim_nid: Primary NID of the peer.\n\
               \t--nid: list of NIDs to remove. If none provided,\n\
               \t       peer is deleted\n\
               \t--ip2nets: specify a range of nids per peer\n\
               \t--force: force-delete locked primary NID\n",
    },
    Command {
        name: "show",
        action: Run(peer::show),
        help: "show peer information\n\
               \t--nid: NID of peer to filter on.\n\
               \t--verbose: display detailed output per peer. Optional argument of '2' \
               outputs more stats\n",
    },
    Command { name: "list", action: Run(peer::list), help: "list all peers\n" },
    Command {
        name: "set",
        action: Run(peer::set),
        help: "set peer ni specific parameter\n\
               \t--nid: Peer NI NID to set the\n\
               \t--health: specify health value to set\n\
               \t--all: set all peer_nis values to the one specified\n\
               \t--state: set peer state (DANGEROUS: for test/debug only)",
    },
];

pub(crate) static UDSP_CMDS: &[Command] = &[
    Command {
        name: "add",
        action: Run(udsp::add),
        help: "add a udsp\n\
               \t--src nid|net: ip2nets syntax specifying the local NID or network to match.\n\
               \t--dst nid:     ip2nets syntax specifying the remote NID to match.\n\
               \t--rte nid:     ip2nets syntax specifying the router NID to match.\n\
               \t--priority p:  Assign priority value p where p >= 0.\n\
               \t               Note: 0 is the highest priority.\n\
               \t--idx n:       Insert the rule in the n'th position on the list of rules.\n\
               \t               By default, rules are appended to the end of the rule list.\n",
    },
    Command {
        name: "del",
        action: Run(udsp::del),
        help: "delete a udsp\n\t--all:   Delete all rules.\n\t--idx n: Delete the rule at index n.\n",
    },
    Command {
        name: "show",
        action: Run(udsp::show),
        help: "show udsps\n\
               \t--idx n: Show the rule at at index n.\n\
               \t         By default, all rules are shown.\n",
    },
];

static FAULT_CMDS: &[Command] = &[
    Command {
        name: "drop",
        action: Group(FAULT_DROP_CMDS),
        help: "Manage drop rules\n\
               usage: lnetctl fault drop add [<options>] -r <rate>|-i <interval> -s <src> -d <dest>\n   \
               or: lnetctl fault drop del -s <src> -d <dest>\n   \
               or: lnetctl fault drop show\n   \
               or: lnetctl fault drop reset\n",
    },
    Command {
        name: "delay",
        action: Group(FAULT_DELAY_CMDS),
        help: "Manage delay rules\n\
               usage: lnetctl fault delay add [<options>] -r <rate>|-i <interval> -s <src> -d <dest>\n   \
               or: lnetctl fault delay del -s <src> -d <dest>\n   \
               or: lnetctl fault delay show\n   \
               or: lnetctl fault delay reset\n",
    },
];

pub(crate) static FAULT_DROP_CMDS: &[Command] = &[
    Command {
        name: "add",
        action: Run(fault::drop_add),
        help: "add LNet drop rule\n\
               \t--source nid:  Drop messages originating from <nid>.\n\
               \t--dest nid:    Drop messages destined for <nid>.\n\
               \t--rate r:      Drop messages at specified rate (1/<r>).\n\
               \t--interval i:  Drop messages at specified time interval (seconds).\n\
               \t--portal p:    Drop messages on specified portal.\n\
               \t--message m:   Drop messages of specified type <PUT|ACK|GET|REPLY>.\n\
               \t--health_error: Dropped messages simulate the specified health status\n\
               \t                <local_timeout|remote_dropped|network_timeout|...>.\n",
    },
    Command {
        name: "del",
        action: Run(fault::drop_del),
        help: "delete LNet drop rules\n\
               \t--all:         Delete all drop rules\n\
               \t--source nid:  Delete drop rule with specified source NID\n\
               \t--dest nid:    Delete drop rule with specified destination NID\n",
    },
    Command {
        name: "reset",
        action: Run(fault::drop_reset),
        help: "reset counters for all drop rules\n",
    },
    Command { name: "show", action: Run(fault::drop_show), help: "show drop rules\n" },
];

pub(crate) static FAULT_DELAY_CMDS: &[Command] = &[
    Command {
        name: "add",
        action: Run(fault::delay_add),
        help: "add LNet delay rule\n\
               \t--source nid:  Delay messages originating from <nid>.\n\
               \t--dest nid:    Delay messages destined for <nid>.\n\
               \t--rate r:      Delay messages at specified rate (1/<r>).\n\
               \t--interval i:  Delay messages at specified time interval (seconds).\n\
               \t--portal p:    Delay messages on specified portal.\n\
               \t--message m:   Delay messages of specified type <PUT|ACK|GET|REPLY>.\n\
               \t--latency:     Delay sending a message (delay only).\n",
    },
    Command {
        name: "del",
        action: Run(fault::delay_del),
        help: "delete LNet delay rules\n\
               \t--all:         Delete all delay rules\n\
               \t--source nid:  Delete delay rule with specified source NID\n\
               \t--dest nid:    Delete delay rule with specified destination NID\n",
    },
    Command {
        name: "reset",
        action: Run(fault::delay_reset),
        help: "reset counters for all delay rules\n",
    },
    Command { name: "show", action: Run(fault::delay_show), help: "show delay rules\n" },
];

/// Prints `show`'s text of what the daemon sent, each item converted for rendering first; an
/// item that does not convert is reported as an unexpected answer.
pub(crate) fn print_rendered<'a, S, T>(
    ctx: &mut Ctx<'_, '_>,
    items: &'a [S],
    show: impl FnOnce(&[T]) -> String,
) -> i32
where
    T: TryFrom<&'a S>,
    T::Error: std::fmt::Display,
{
    match items.iter().map(T::try_from).collect::<Result<Vec<T>, _>>() {
        Ok(items) => {
            ctx.out(&show(&items));
            0
        }
        Err(error) => crate::report::unexpected(ctx, &error.to_string()),
    }
}

/// Splits a comma-separated list at commas outside square brackets (`eth0[0,1],eth1`).
pub(crate) fn split_top_level(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (at, c) in text.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                // `at` is a char boundary and ',' is one byte, so both slices are in bounds.
                parts.push(&text[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}
