//! Kernel module parameters from modprobe.d files (`options lnet ...`, `options ksocklnd
//! ...`, `options libcfs ...`) mapped onto what ulnet runs, with the kernel's names,
//! defaults, checks and messages.
//!
//! * **Syntax** (`syntax.rs`): modprobe.d as kmod reads it (comments, backslash
//!   continuations, several `options` lines for one module adding up in file order, `-`
//!   and `_` alike in names), values quoted with `"` or `'`.
//! * **Order**: parameters are set one after the other, as the kernel sets them at module
//!   load, so a later value replaces an earlier one and the setters' cross-checks
//!   (`lnet_retry_count` against `lnet_transaction_timeout`, ...) see the values set
//!   before them.
//! * **What each becomes**: one table (`table.rs`): lnet's global tunables go to
//!   [`GlobalSettings`] through the kernel's setter checks; `accept`/`accept_port` and the
//!   socklnd parameters to the TCP LND's settings; `credits`, `peer_credits`,
//!   `peer_timeout`, `peer_buffer_credits`, `conns_per_peer` and `tos` become the defaults
//!   of every tcp net; `networks=` and `ip2nets=` keep the kernel's syntax and meaning;
//!   `routes=`, `forwarding=` and the router buffers fill the same `route`, `routing` and
//!   `buffers` blocks of the model as lnetctl's YAML, so whatever the daemon does with
//!   those blocks applies to them alike; the router tunables no YAML key carries
//!   (`check_routers_before_use`, `alive_router_check_interval`, ...) fill a `router` block
//!   when given other than their defaults.
//! * **What cannot be honoured is an error naming it**: an unknown parameter (the kernel
//!   ignores it with a warning), a value the kernel refuses, a value of a parameter ulnet
//!   has no behaviour for other than its default (CPU partitions, scheduler threads,
//!   debugging), any parameter of an LND ulnet cannot drive (`ko2iblnd`, `kgnilnd`,
//!   `kkfilnd`, `kptl4lnd`, `kefalnd`, ...). Every problem is reported, not only the first.
//! * Lines for other modules (`options ptlrpc ...`), and the commands that concern loading
//!   kernel modules (`alias`, `blacklist`, `softdep`, ...), are not LNet's: they are listed
//!   as [`Note`]s. `install` and `remove` commands for LNet's modules are errors: they
//!   replace the module load that ulnetd stands for.
//!
//! lustre: the module parameters of lnet/lnet/*.c, lnet/libcfs/*.c,
//! lnet/klnds/socklnd/socklnd_modparams.c and lnet/selftest/*.c (see the table);
//! docs/protocol/semantics.md §10.

use std::fmt;
use std::time::Duration;

use ulnet_proto::socklnd::tunables::{AcceptPolicy, MAX_CONNS_PER_PEER, SocklndTunables};

use crate::grammar::{self, Ip2netsRule, NetSpec};
use crate::model::{Buffers, Config, GlobalKey, GlobalSettings, RouteConfig, Tunables};

mod syntax;
mod table;
mod value;

pub use value::MAX_STRING_PARAM_LEN;

use table::{Kind, Module, NetKey, Param, Pool, RouterKey, SocklndKey, Target};

/// Largest modprobe.d file read (the same bound as a configuration file).
pub const MAX_MODPROBE_LEN: usize = crate::model::MAX_IMPORT_LEN;

/// A file to read: its name (for messages) and text.
#[derive(Clone, Copy, Debug)]
pub struct Source<'a> {
    pub name: &'a str,
    pub text: &'a str,
}

/// Where a parameter was set: `FILE:LINE: options MODULE NAME`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    pub file: String,
    pub line: usize,
    /// `options lnet routes`, `options kptl4lnd`.
    pub what: String,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.line, self.what)
    }
}

/// A parameter or line ulnet cannot honour, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub origin: Origin,
    pub why: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.origin, self.why)
    }
}

/// A line that is not LNet's business, said once in the daemon's log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    pub origin: Origin,
    pub why: &'static str,
}

impl fmt::Display for Note {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.origin, self.why)
    }
}

/// A value with the place that set it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Located<T> {
    pub value: T,
    pub origin: Origin,
}

/// ksocklnd's parameters: what every TCP connection runs with, and the defaults of every
/// tcp net.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SocklndModule {
    /// The LND-wide settings. `accept` and `accept_port` are lnet's, kept in
    /// [`ModuleParameters`]; a `sock_timeout` of zero stands for LNet's `lnd_timeout`.
    pub lnd: SocklndTunables,
    /// `credits`, `peer_credits`, `peer_buffer_credits`, `peer_timeout`: what a net whose
    /// configuration leaves them unset gets (`None`: the built-in defaults).
    pub net: Tunables,
    pub conns_per_peer: Option<i64>,
    pub tos: Option<i64>,
}

/// Router tunables without a YAML key (lnetctl sets them through sysfs): `None` unset.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RouterTunables {
    pub peer_buffer_credits: Option<i64>,
    pub auto_down: Option<i64>,
    pub check_routers_before_use: Option<i64>,
    pub avoid_asym_router_failure: Option<i64>,
    pub alive_router_check_interval: Option<i64>,
    pub router_ping_timeout: Option<i64>,
}

/// Everything the files set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModuleParameters {
    /// lnet's global tunables, after each setter ran with the kernel's checks.
    pub settings: GlobalSettings,
    pub accept: Option<AcceptPolicy>,
    pub accept_port: Option<u16>,
    /// `accept_port_bulk` when set (`None`: bulk connections on `accept_port`).
    pub accept_port_bulk: Option<u16>,
    pub socklnd: SocklndModule,
    /// `networks=`: the nets as the kernel parses them (interfaces not resolved).
    pub networks: Option<Located<Vec<NetSpec>>>,
    /// `ip2nets=`: the kernel's rules, matched against the host's addresses at start-up.
    pub ip2nets: Option<Located<Vec<Ip2netsRule>>>,
    /// `routes=`, `forwarding=` and the router buffers, where lnetctl's `route:`,
    /// `routing:` and `buffers:` blocks put them.
    pub routing: Config,
    pub router: RouterTunables,
    /// lnet's `enable_sysctl_setup` is 1: `lnetctl setup-sysctl` applies the host's LNet
    /// sysctl file rather than restoring what it replaced.
    pub enable_sysctl_setup: bool,
    /// libcfs's (and lnet's) `cpu_pattern` and `cpu_npartitions`, the last one given; the
    /// daemon builds the partition table from them over the host's topology
    /// ([`crate::cpu_partitions::build`]).
    pub cpu_pattern: Option<Located<String>>,
    pub cpu_npartitions: Option<Located<i32>>,
    /// Every routing parameter given, with the model block it fills (`route`, `routing`,
    /// `buffers`; `router` for a router tunable off its default), in file order: the daemon
    /// treats each as it treats that block.
    pub blocks: Vec<(&'static str, Origin)>,
    /// Lines that are not LNet's.
    pub notes: Vec<Note>,
}

/// Reads `sources` in order: what they set, and every problem found (the parameters
/// with a problem are left out of what is set, as the kernel leaves a value its setter
/// refused). A configuration with problems must not run; the parameters are returned so
/// that the problems the daemon finds in them are reported together with these.
pub fn parse(sources: &[Source<'_>]) -> (ModuleParameters, Vec<Problem>) {
    let mut reader = Reader { params: ModuleParameters::default(), problems: Vec::new() };
    for source in sources {
        reader.source(source);
    }
    reader.finish()
}

struct Reader {
    params: ModuleParameters,
    problems: Vec<Problem>,
}

/// The LNDs ulnet cannot drive: module, and what their networks need.
fn foreign_lnd(module: &str) -> Option<&'static str> {
    Some(match module {
        "ko2iblnd" => "its o2ib networks need RDMA hardware (InfiniBand, RoCE, iWARP)",
        "kgnilnd" => "its gni networks need a Cray Gemini or Aries interconnect",
        "kkfilnd" => "its kfi networks need a kfabric provider (HPE Slingshot)",
        "kptl4lnd" => "its networks (ptlf, bxi3f) need Portals 4 hardware",
        "kefalnd" => "its efa networks need an AWS Elastic Fabric Adapter",
        other if other.starts_with('k') && other.ends_with("lnd") && other != "ksocklnd" => {
            "ulnet drives TCP (ksocklnd) only"
        }
        _ => return None,
    })
}

impl Reader {
    fn source(&mut self, source: &Source<'_>) {
        let origin =
            |line: usize, what: String| Origin { file: source.name.to_string(), line, what };
        if source.text.len() > MAX_MODPROBE_LEN {
            self.problems.push(Problem {
                origin: origin(0, "file".into()),
                why: format!("{} bytes, at most {MAX_MODPROBE_LEN} are read", source.text.len()),
            });
            return;
        }
        for (line, text) in syntax::logical_lines(source.text) {
            match syntax::command(&text) {
                None => {}
                Some(Err(syntax::LineError::UnknownCommand(word))) => self.problems.push(Problem {
                    origin: origin(line, word),
                    why: "not a modprobe.d command (options, alias, blacklist, install, remove, \
                          softdep, weakdep)"
                        .into(),
                }),
                Some(Err(syntax::LineError::IncompleteOptions)) => self.problems.push(Problem {
                    origin: origin(line, "options".into()),
                    why: "needs a module name and parameters".into(),
                }),
                Some(Ok(syntax::Command::Other { command, module })) => {
                    self.other_command(origin(line, command.clone()), &command, module.as_deref());
                }
                Some(Ok(syntax::Command::Options { module, params })) => {
                    self.options(source.name, line, &module, &params);
                }
            }
        }
    }

    fn other_command(&mut self, origin: Origin, command: &str, module: Option<&str>) {
        let lnet_module = module.is_some_and(|m| Module::from_name(m).is_some());
        if lnet_module && matches!(command, "install" | "remove") {
            self.problems.push(Problem {
                origin: Origin { what: format!("{command} {}", module.unwrap_or("")), ..origin },
                why: "the command stands in for loading the module, which ulnetd does not run"
                    .into(),
            });
        } else {
            self.params.notes.push(Note {
                origin,
                why: "concerns loading kernel modules, which ulnetd does not do",
            });
        }
    }

    fn options(&mut self, file: &str, line: usize, module_name: &str, text: &str) {
        let origin = |what: String| Origin { file: file.to_string(), line, what };
        let words = match syntax::words(text) {
            Ok(words) => words,
            Err(syntax::WordError::UnterminatedQuote(rest)) => {
                let why = format!("a quote opens in '{rest}' and never closes");
                self.problems
                    .push(Problem { origin: origin(format!("options {module_name}")), why });
                return;
            }
            Err(syntax::WordError::Comment(rest)) => {
                let why = format!(
                    "'{rest}': modprobe passes the rest of the line to the module, which takes \
                     '#' for a parameter; write comments on lines of their own"
                );
                self.problems
                    .push(Problem { origin: origin(format!("options {module_name}")), why });
                return;
            }
        };
        if let Some(needs) = foreign_lnd(module_name) {
            let names: Vec<&str> = words.iter().map(|word| word.name.as_str()).collect();
            self.problems.push(Problem {
                origin: origin(format!("options {module_name} {}", names.join(" "))),
                why: format!("ulnet cannot drive the {module_name} LND: {needs}"),
            });
            return;
        }
        let Some(module) = Module::from_name(module_name) else {
            self.params.notes.push(Note {
                origin: origin(format!("options {module_name}")),
                why: "not an LNet module: left to the kernel",
            });
            return;
        };
        for word in words {
            let shown = match &word.value {
                Some(value) => format!("options {module_name} {}={value}", word.name),
                None => format!("options {module_name} {}", word.name),
            };
            let origin = origin(shown);
            if let Err(why) =
                self.param(module, module_name, &word.name, word.value.as_deref(), &origin)
            {
                self.problems.push(Problem { origin, why });
            }
        }
    }

    /// Sets one parameter; `Err` is why it cannot be honoured.
    fn param(
        &mut self,
        module: Module,
        module_name: &str,
        name: &str,
        value: Option<&str>,
        origin: &Origin,
    ) -> Result<(), String> {
        let Some(param) = table::find(module, name) else {
            if let Some((_, _, build)) =
                table::SPECIAL_BUILDS.iter().find(|(m, n, _)| *m == module && *n == name)
            {
                return Err(format!(
                    "unknown parameter: it exists only in kernels built with {build}"
                ));
            }
            let hint = table::near(module, name)
                .map(|near| format!(" (did you mean {near}?)"))
                .unwrap_or_default();
            return Err(format!(
                "unknown parameter{hint}: {module_name} has no such parameter (the kernel \
                 ignores it with a warning)"
            ));
        };
        let text = read_value(param, value)?;
        self.apply(param, &text, origin)
    }

    fn apply(&mut self, param: &Param, text: &str, origin: &Origin) -> Result<(), String> {
        match param.target {
            Target::Global(key) => self.global(param, key, text),
            Target::DiscoveryDisabled => {
                let value = number(param, text)?;
                set_global(&mut self.params.settings, GlobalKey::Discovery, i64::from(value == 0))
            }
            Target::Accept => {
                let policy =
                    text.parse().map_err(|_| format!("Can't parse 'accept=\"{text}\"'"))?;
                self.params.accept = Some(policy);
                Ok(())
            }
            Target::AcceptPort => {
                let port = number(param, text)?;
                let port = u16::try_from(port)
                    .ok()
                    .filter(|p| *p > 0)
                    .ok_or_else(|| format!("{port} is not a port number (1-65535)"))?;
                self.params.accept_port = Some(port);
                Ok(())
            }
            Target::EnableSysctlSetup => {
                // An int parameter; the setup script acts on 1 alone.
                self.params.enable_sysctl_setup = number(param, text)? == 1;
                Ok(())
            }
            Target::AcceptPortBulk => {
                let port = number(param, text)?;
                let port = u16::try_from(port)
                    .ok()
                    .filter(|p| *p > 0)
                    .ok_or_else(|| format!("{port} is not a port number (1-65535)"))?;
                self.params.accept_port_bulk = Some(port);
                Ok(())
            }
            Target::Networks => {
                self.params.networks = if text.is_empty() {
                    None
                } else {
                    let nets = grammar::parse_networks(text).map_err(|e| e.to_string())?;
                    Some(Located { value: nets, origin: origin.clone() })
                };
                Ok(())
            }
            Target::Ip2nets => {
                self.params.ip2nets = if text.is_empty() {
                    None
                } else {
                    let rules = grammar::parse_ip2nets(text).map_err(|e| e.to_string())?;
                    Some(Located { value: rules, origin: origin.clone() })
                };
                Ok(())
            }
            Target::Routes => self.routes(text, origin),
            Target::Forwarding => self.forwarding(text, origin),
            Target::Buffers(pool) => {
                let count = number(param, text)?;
                // lustre: router.c lnet_nrb_*_calculate().
                if count < 0 {
                    return Err(format!("{}={count} invalid when routing enabled", param.name));
                }
                let count = Some(i64::from(count));
                let buffers = self.params.routing.buffers.get_or_insert_with(Buffers::default);
                match pool {
                    Pool::Tiny => buffers.tiny = count,
                    Pool::Small => buffers.small = count,
                    Pool::Large => buffers.large = count,
                }
                self.params.blocks.push(("buffers", origin.clone()));
                Ok(())
            }
            Target::Router(key) => {
                let value = number(param, text)?;
                let router = &mut self.params.router;
                *match key {
                    RouterKey::PeerBufferCredits => &mut router.peer_buffer_credits,
                    RouterKey::AutoDown => &mut router.auto_down,
                    RouterKey::CheckRoutersBeforeUse => &mut router.check_routers_before_use,
                    RouterKey::AvoidAsymRouterFailure => &mut router.avoid_asym_router_failure,
                    RouterKey::AliveRouterCheckInterval => &mut router.alive_router_check_interval,
                    RouterKey::RouterPingTimeout => &mut router.router_ping_timeout,
                } = Some(i64::from(value));
                let value = i64::from(value);
                let settings = &mut self.params.settings.router;
                match key {
                    RouterKey::CheckRoutersBeforeUse => {
                        settings.check_routers_before_use = value != 0
                    }
                    RouterKey::AvoidAsymRouterFailure => {
                        settings.avoid_asym_router_failure = value != 0
                    }
                    RouterKey::AliveRouterCheckInterval => {
                        settings.alive_router_check_interval = value
                    }
                    RouterKey::RouterPingTimeout => settings.router_ping_timeout = value,
                    // Not honoured: refused below unless at the default.
                    RouterKey::PeerBufferCredits | RouterKey::AutoDown => {
                        if !same_value(param, text, param.default) {
                            self.params.blocks.push(("router", origin.clone()));
                        }
                    }
                }
                Ok(())
            }
            Target::CpuPattern => {
                if text.len() > crate::cpu_partitions::MAX_PATTERN_LEN {
                    return Err(format!(
                        "cpu_pattern is {} bytes, at most {} are read",
                        text.len(),
                        crate::cpu_partitions::MAX_PATTERN_LEN
                    ));
                }
                self.params.cpu_pattern =
                    Some(Located { value: text.to_string(), origin: origin.clone() });
                Ok(())
            }
            Target::PortalRotor => {
                let value = number(param, text)?;
                // lustre: lib-ptl.c lnet_mt_of_match() reads the value without a check; only
                // LNET_PTL_ROTOR_OFF..LNET_PTL_ROTOR_HASH_RT mean something.
                if !(0..=3).contains(&value) {
                    return Err(format!(
                        "portal_rotor={value} is none of the kernel's rotor modes: 0 (off), \
                         1 (on), 2 (routed messages round robin), 3 (routed messages by hash)"
                    ));
                }
                self.params.settings.portal_rotor = i64::from(value);
                Ok(())
            }
            Target::CpuNpartitions => {
                let value = number(param, text)?;
                self.params.cpu_npartitions = Some(Located { value, origin: origin.clone() });
                Ok(())
            }
            Target::Socklnd(key) => self.socklnd(param, key, text),
            Target::NetDefault(key) => self.net_default(param, key, text),
            Target::NoEffect(_) => {
                if matches!(param.kind, Kind::Text | Kind::Any) {
                    Ok(())
                } else {
                    number(param, text).map(|_| ())
                }
            }
            Target::Only(values, why) => {
                let accepted = values.iter().any(|accepted| same_value(param, text, accepted));
                if accepted {
                    Ok(())
                } else {
                    number_if_numeric(param, text)?;
                    Err(format!("{why} (only {} is accepted)", quoted_list(values)))
                }
            }
            Target::Refused(why) => {
                number_if_numeric(param, text)?;
                Err(why.to_string())
            }
        }
    }

    /// A global setting with the checks of its kernel setter, then lnetctl's.
    /// lustre: api-ni.c `sensitivity_set()`, `max_recovery_ping_interval_set()`,
    /// `transaction_to_set()`, `retry_count_set()`, `response_tracking_set()`,
    /// `intf_max_set()`; router.c `rtr_sensitivity_set()`.
    fn global(&mut self, param: &Param, key: GlobalKey, text: &str) -> Result<(), String> {
        let settings = &mut self.params.settings;
        if key == GlobalKey::RecoveryInterval {
            return Ok(());
        }
        let value = i64::from(number(param, text)?);
        match key {
            GlobalKey::HealthSensitivity if value > 1000 => {
                return Err(format!("Invalid health value. Maximum: 1000 value = {value}"));
            }
            GlobalKey::MaxRecoveryPingInterval if value == 0 => {
                return Err("Invalid max ping timeout. Must be strictly positive".into());
            }
            GlobalKey::TransactionTimeout if value <= settings.retry_count || value == 0 => {
                return Err(format!(
                    "Invalid value for lnet_transaction_timeout ({value}). Has to be greater \
                     than lnet_retry_count ({})",
                    settings.retry_count
                ));
            }
            GlobalKey::RetryCount if settings.health_sensitivity == 0 && value > 0 => {
                return Err("Can not set lnet_retry_count when health feature is turned off".into());
            }
            GlobalKey::RetryCount if value > settings.transaction_timeout => {
                return Err(format!(
                    "Invalid value for lnet_retry_count ({value}). Has to be smaller than \
                     lnet_transaction_timeout ({})",
                    settings.transaction_timeout
                ));
            }
            GlobalKey::ResponseTracking if value > 3 => {
                return Err(format!("Invalid value ({value}) for 'lnet_response_tracking'"));
            }
            GlobalKey::RouterSensitivity if value > 100 => {
                return Err(format!("Invalid value: {value} for 'router_sensitivity_percentage'"));
            }
            _ => {}
        }
        set_global(settings, key, value)
    }

    fn routes(&mut self, text: &str, origin: &Origin) -> Result<(), String> {
        let routes = grammar::parse_routes(text).map_err(|e| e.to_string())?;
        self.params.routing.routes = routes
            .into_iter()
            .map(|route| RouteConfig {
                net: route.net,
                gateway: route.gateway,
                hops: route.hops,
                priority: route.priority,
                alive: None,
                notify_time: None,
            })
            .collect();
        if !text.is_empty() {
            self.params.blocks.push(("route", origin.clone()));
        }
        Ok(())
    }

    /// lustre: router.c `lnet_rtrpools_alloc()` ("forwarding=... not set to either
    /// 'enabled' or 'disabled'").
    fn forwarding(&mut self, text: &str, origin: &Origin) -> Result<(), String> {
        self.params.routing.routing = match text {
            "" => None,
            "enabled" => Some(true),
            "disabled" => Some(false),
            other => {
                return Err(format!(
                    "forwarding='{other}' not set to either 'enabled' or 'disabled'"
                ));
            }
        };
        if !text.is_empty() {
            self.params.blocks.push(("routing", origin.clone()));
        }
        Ok(())
    }

    fn socklnd(&mut self, param: &Param, key: SocklndKey, text: &str) -> Result<(), String> {
        let value = number(param, text)?;
        let lnd = &mut self.params.socklnd.lnd;
        let non_negative = || {
            u32::try_from(value)
                .map_err(|_| format!("{value} is negative: {} counts from 0", param.name))
        };
        let seconds = |v: i32| Duration::from_secs(u64::try_from(v).unwrap_or(0));
        match key {
            // 0: LNet's lnd_timeout (lustre: socklnd.h ksocknal_timeout()).
            SocklndKey::SockTimeout => {
                lnd.sock_timeout = Duration::from_secs(u64::from(non_negative()?))
            }
            SocklndKey::MinReconnectMs => {
                lnd.min_reconnect = Duration::from_millis(u64::from(non_negative()?))
            }
            SocklndKey::MaxReconnectMs => {
                lnd.max_reconnect = Duration::from_millis(u64::from(non_negative()?))
            }
            SocklndKey::TypedConns => lnd.typed_conns = value != 0,
            SocklndKey::MinBulk => lnd.min_bulk = non_negative()?,
            SocklndKey::TxBufferSize => lnd.tx_buffer_size = non_negative()?,
            SocklndKey::RxBufferSize => lnd.rx_buffer_size = non_negative()?,
            SocklndKey::Nagle => lnd.nagle = value != 0,
            SocklndKey::RoundRobin => lnd.round_robin = value != 0,
            // <= 0 disables (lustre: socklnd_cb.c ksocknal_send_keepalive_locked()).
            SocklndKey::Keepalive => lnd.keepalive = (value > 0).then(|| seconds(value)),
            // TCP keepalive is on only when the three are positive (socklnd_lib.c).
            SocklndKey::KeepaliveIdle => lnd.keepalive_idle = seconds(value),
            SocklndKey::KeepaliveCount => lnd.keepalive_count = u32::try_from(value).unwrap_or(0),
            SocklndKey::KeepaliveInterval => lnd.keepalive_interval = seconds(value),
            SocklndKey::ZcMinPayload => lnd.zc_min_payload = non_negative()?,
            SocklndKey::AcceptBacklog => lnd.accept_backlog = non_negative()?,
            SocklndKey::AcceptTimeout => {
                if value <= 0 {
                    return Err(format!(
                        "{value}: the acceptor's timeout must be at least 1 second"
                    ));
                }
                lnd.accept_timeout = seconds(value);
            }
        }
        Ok(())
    }

    /// A tcp net's defaults, with ulnet's bounds where the kernel has none that would make
    /// a working net (credits of 0 would let nothing be sent).
    fn net_default(&mut self, param: &Param, key: NetKey, text: &str) -> Result<(), String> {
        let module = &mut self.params.socklnd;
        if key == NetKey::Tos {
            // lustre: socklnd_modparams.c param_set_tos(): -ERANGE outside -1..=255.
            let tos = value::int(text)
                .ok()
                .filter(|tos| (-1..=255).contains(tos))
                .ok_or_else(|| invalid(param, text))?;
            module.tos = Some(i64::from(tos));
            return Ok(());
        }
        let value = i64::from(number(param, text)?);
        match key {
            NetKey::Credits | NetKey::PeerCredits if value < 1 => {
                return Err(format!("{value}: {} must be at least 1", param.name));
            }
            NetKey::PeerBufferCredits if value < 0 => {
                return Err(format!("{value}: {} must not be negative", param.name));
            }
            NetKey::ConnsPerPeer if value > i64::from(MAX_CONNS_PER_PEER) => {
                return Err(format!(
                    "{value}: ulnet opens at most {MAX_CONNS_PER_PEER} connections per peer \
                     (lnetctl's range 0-{MAX_CONNS_PER_PEER})"
                ));
            }
            _ => {}
        }
        match key {
            NetKey::Credits => module.net.credits = Some(value),
            NetKey::PeerCredits => module.net.peer_credits = Some(value),
            NetKey::PeerBufferCredits => module.net.peer_buffer_credits = Some(value),
            // <= 0 disables the aliveness check.
            NetKey::PeerTimeout => module.net.peer_timeout = Some(value.max(0)),
            NetKey::ConnsPerPeer => module.conns_per_peer = Some(value),
            NetKey::Tos => {}
        }
        Ok(())
    }

    fn finish(mut self) -> (ModuleParameters, Vec<Problem>) {
        if let (Some(networks), Some(_)) = (&self.params.networks, &self.params.ip2nets) {
            // lustre: api-ni.c lnet_get_networks().
            self.problems.push(Problem {
                origin: networks.origin.clone(),
                why: "Please specify EITHER 'networks' or 'ip2nets' but not both at once".into(),
            });
        }
        (self.params, self.problems)
    }
}

/// The value text, or the kernel's refusal: a missing `=value` for anything but a setter
/// that ignores it, a string longer than the kernel takes.
fn read_value(param: &Param, value: Option<&str>) -> Result<String, String> {
    match (value, param.kind) {
        (None, Kind::Any) => Ok(String::new()),
        (None, _) => Err(format!("`' invalid for parameter `{}'", param.name)),
        (Some(text), Kind::Text) if text.len() > MAX_STRING_PARAM_LEN => Err(format!(
            "string parameter too long ({} bytes, at most {MAX_STRING_PARAM_LEN})",
            text.len()
        )),
        (Some(text), _) => Ok(text.to_string()),
    }
}

/// The kernel's message for a value its parser refused.
fn invalid(param: &Param, text: &str) -> String {
    match param.kind {
        Kind::Ulong(message) | Kind::Long(message) => message.to_string(),
        _ => format!("`{text}' invalid for parameter `{}'", param.name),
    }
}

/// A numeric value read as the parameter's kernel type, within `int` (what the settings
/// hold; an `unsigned long` beyond it would be cut to 32 bits by the kernel).
fn number(param: &Param, text: &str) -> Result<i32, String> {
    match param.kind {
        Kind::Int | Kind::Long(_) => value::int(text).map_err(|_| invalid(param, text)),
        Kind::Uint => value::uint(text).map_err(|_| invalid(param, text)).and_then(|v| {
            i32::try_from(v).map_err(|_| format!("{v} is too large (at most {})", i32::MAX))
        }),
        Kind::Ulong(_) => value::unsigned(text).map_err(|_| invalid(param, text)).and_then(|v| {
            i32::try_from(v).map_err(|_| format!("{v} is too large (at most {})", i32::MAX))
        }),
        Kind::Text | Kind::Any => Err(invalid(param, text)),
    }
}

/// For numeric parameters, the kernel's parse error before anything else.
fn number_if_numeric(param: &Param, text: &str) -> Result<(), String> {
    match param.kind {
        Kind::Text | Kind::Any => Ok(()),
        _ => number(param, text).map(|_| ()),
    }
}

/// Whether `text` means `accepted`: the same number for numeric kinds, the same text else.
fn same_value(param: &Param, text: &str, accepted: &str) -> bool {
    match param.kind {
        Kind::Text | Kind::Any => text == accepted,
        _ => match (number(param, text), number(param, accepted)) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        },
    }
}

fn quoted_list(values: &[&str]) -> String {
    let quoted: Vec<String> = values.iter().map(|v| format!("\"{v}\"")).collect();
    quoted.join(" or ")
}

fn set_global(settings: &mut GlobalSettings, key: GlobalKey, value: i64) -> Result<(), String> {
    settings.set(key, value).map_err(|error| error.descr)
}

#[cfg(test)]
mod tests;
