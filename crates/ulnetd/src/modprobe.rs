//! The modprobe.d files a daemon reads, and what their module parameters give the node
//! (the parameters themselves are `ulnet_config::modprobe`'s).
//!
//! * **Which files**: every `--modprobe FILE`, in order; without any, [`DEFAULT_MODPROBE`]
//!   when it exists. Not `/etc/modprobe.d/`: a host that also runs kernel Lustre keeps its
//!   kernel's parameters there (often for LNDs ulnet cannot drive, or for the same ports),
//!   and ulnetd must not pick them up unasked (decision 0020). To reuse a site's file,
//!   name it (`--modprobe /etc/modprobe.d/lustre.conf`) or link it to the default place;
//!   `--modprobe /dev/null` reads none.
//! * **Nets**: `networks=` and `ip2nets=` with the kernel's meaning (an NI without an
//!   interface takes the first UP non-loopback IPv4 interface; every matching ip2nets rule
//!   adds its nets). Module parameters without a configuration file stand for a kernel
//!   node configured at load: no net named means the kernel's `networks=tcp`.
//! * **Routing**: `routes=`, `forwarding=` and the router buffers join the YAML's
//!   `route:`, `routing:` and `buffers:` (the YAML's `routing` and buffer counts win where
//!   both set them). As in the kernel, a `routes=` gateway that is one of this node's NIDs
//!   adds no route but makes the node a router (forwarding on, unless `forwarding=` or the
//!   YAML says otherwise); a route the node would refuse (to one of its own nets, or through
//!   a gateway on none) is refused by name, where the kernel would skip it without a word.
//! * **Refusals**: the parameters' problems, and every block the daemon refuses
//!   ([`block_refusal`]), as the YAML's blocks are, each named by file, line and parameter.

use std::io::Read;
use std::path::{Path, PathBuf};

use ulnet_config::cpu_partitions::{self, DEFAULT_CPU_PATTERN, Topology};
use ulnet_config::model::{Buffers, Config, HostInterface, NetConfig, RouteConfig};
use ulnet_config::modprobe::{self, MAX_MODPROBE_LEN, ModuleParameters, Problem, Source};
use ulnet_proto::engine::cpt::Partitions;

use crate::cpu_topology::TopologyReadError;
use crate::device_numa::DeviceNuma;

use crate::config::{ConfigError, Unsupported, block_refusal, refused_routes};
use crate::live::BootRouting;
use crate::nets::{NetError, NetSpec, net_configs, resolve_ip2net_rules, resolve_net};

/// The file read when no `--modprobe` is given, if it exists.
pub const DEFAULT_MODPROBE: &str = "/etc/ulnet/modprobe.conf";

/// The files to read: `named`, or the default one when there is none and it exists.
pub fn files_to_read(named: &[PathBuf]) -> Vec<PathBuf> {
    if !named.is_empty() {
        return named.to_vec();
    }
    let default = PathBuf::from(DEFAULT_MODPROBE);
    if default.exists() { vec![default] } else { Vec::new() }
}

/// A modprobe.d file's name and text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModprobeFile {
    pub path: String,
    pub text: String,
}

impl ModprobeFile {
    /// Reads at most one byte more than [`MAX_MODPROBE_LEN`] (the parser refuses more).
    pub fn read(path: &Path) -> Result<Self, ConfigError> {
        let read_error = |source| ConfigError::Read { path: path.display().to_string(), source };
        let file = std::fs::File::open(path).map_err(read_error)?;
        let mut text = String::new();
        file.take(MAX_MODPROBE_LEN as u64 + 1).read_to_string(&mut text).map_err(read_error)?;
        Ok(Self { path: path.display().to_string(), text })
    }
}

/// The CPU partitions a daemon runs with (libcfs's table).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartitionLayout {
    pub partitions: Partitions,
    /// The table as `lctl get_param cpu_partition_table` prints it, for the log.
    pub text: String,
    /// Each partition's CPUs, by CPT.
    pub cpus: Vec<Vec<usize>>,
    /// The partitions' NUMA nodes, which bind NIs given no CPTs near their devices.
    pub numa: DeviceNuma,
}

/// The module parameters of a daemon's files, and the problems found in them.
#[derive(Debug)]
pub(crate) struct Modules {
    pub params: ModuleParameters,
    problems: Vec<Problem>,
}

impl Modules {
    pub fn read(files: &[ModprobeFile]) -> Self {
        let sources: Vec<Source<'_>> =
            files.iter().map(|file| Source { name: &file.path, text: &file.text }).collect();
        let (params, problems) = modprobe::parse(&sources);
        Self { params, problems }
    }

    /// The CPU partitions libcfs's `cpu_pattern` and `cpu_npartitions` (defaults "N" and 0)
    /// give over `topology`. A pattern the kernel would refuse is a refusal naming the
    /// parameter, with the kernel's message. A host whose topology cannot be read gets one
    /// partition unless a parameter was given.
    pub fn partitions(
        &self,
        topology: Result<Topology, TopologyReadError>,
    ) -> Result<PartitionLayout, Unsupported> {
        let pattern = self.params.cpu_pattern.as_ref();
        let npartitions = self.params.cpu_npartitions.as_ref();
        let what = || {
            pattern
                .map(|p| p.origin.to_string())
                .or_else(|| npartitions.map(|n| n.origin.to_string()))
                .unwrap_or_else(|| "cpu_pattern=N (the kernel's default)".to_string())
        };
        let topology = match topology {
            Ok(topology) => topology,
            Err(error) if pattern.is_none() && npartitions.is_none() => {
                tracing::warn!(%error, "CPU topology unreadable: one CPU partition");
                return Ok(PartitionLayout::default());
            }
            Err(error) => return Err(Unsupported { what: what(), why: error.to_string() }),
        };
        let pattern_text = pattern.map_or(DEFAULT_CPU_PATTERN, |p| p.value.as_str());
        let count = npartitions.map_or(0, |n| n.value);
        let table = cpu_partitions::build(pattern_text, count, &topology).map_err(|error| {
            Unsupported { what: what(), why: format!("{}: rc = {}", error.message, error.rc) }
        })?;
        if let Some(warning) = table.warning() {
            tracing::warn!("{warning}");
        }
        let partitions = Partitions::new(table.count() as u32)
            .map_err(|error| Unsupported { what: what(), why: error.to_string() })?;
        let cpus = (0..table.count())
            .map(|cpt| {
                let cpus = table.cpus(cpt).into_iter().flatten();
                cpus.filter_map(|&cpu| usize::try_from(cpu).ok()).collect()
            })
            .collect();
        Ok(PartitionLayout {
            partitions,
            text: table.render(),
            cpus,
            numa: DeviceNuma::new(Some(table)),
        })
    }

    /// What ulnetd cannot honour: each problem, and each routing parameter whose block it
    /// refuses.
    pub fn refusals(&self) -> Vec<Unsupported> {
        let mut refusals: Vec<Unsupported> = self
            .problems
            .iter()
            .map(|problem| Unsupported {
                what: problem.origin.to_string(),
                why: problem.why.clone(),
            })
            .collect();
        for (block, origin) in &self.params.blocks {
            if let Some(why) = block_refusal(block) {
                refusals.push(Unsupported { what: origin.to_string(), why: why.to_string() });
            }
        }
        refusals
    }

    /// The nets `networks=` or `ip2nets=` configure (with `kernel_default`, `networks=tcp`
    /// when neither is given), each checked against the host; a net that cannot run is a
    /// refusal named by its parameter.
    pub fn nets(
        &self,
        host: &[HostInterface],
        kernel_default: bool,
        refusals: &mut Vec<Unsupported>,
    ) -> Vec<NetConfig> {
        let (configs, origin) = match (&self.params.networks, &self.params.ip2nets) {
            (Some(networks), _) => {
                (net_configs(networks.value.clone(), host), networks.origin.to_string())
            }
            (None, Some(rules)) => {
                (resolve_ip2net_rules(&rules.value, host), rules.origin.to_string())
            }
            (None, None) if kernel_default => {
                let tcp = ulnet_config::grammar::parse_networks("tcp").unwrap_or_default();
                (net_configs(tcp, host), "networks=tcp (the kernel's default)".to_string())
            }
            (None, None) => return Vec::new(),
        };
        let refuse = |refusals: &mut Vec<Unsupported>, error: NetError| {
            refusals.push(Unsupported { what: origin.clone(), why: error.to_string() });
        };
        match configs {
            Ok(configs) => configs
                .into_iter()
                .filter(|config| match resolve_net(config, host) {
                    Ok(_) => true,
                    Err(error) => {
                        refuse(refusals, error);
                        false
                    }
                })
                .collect(),
            Err(error) => {
                refuse(refusals, error);
                Vec::new()
            }
        }
    }

    /// The routes `routes=` adds on a node running `nets`: those whose gateway is one of
    /// its NIDs add none (lustre: config.c `lnet_parse_route()`, `im_a_router`).
    fn routes(&self, nets: &[NetSpec]) -> (Vec<RouteConfig>, bool) {
        let local = |route: &&RouteConfig| {
            nets.iter().flat_map(|net| net.nis.iter()).any(|ni| ni.nid == route.gateway)
        };
        let routes = &self.params.routing.routes;
        let router = routes.iter().any(|route| local(&route));
        (routes.iter().filter(|route| !local(route)).copied().collect(), router)
    }

    /// The routes of `routes=` the node would refuse, named by the parameter.
    pub fn refused_routes(&self, nets: &[NetSpec]) -> Vec<Unsupported> {
        let Some((_, origin)) =
            self.params.blocks.iter().rev().find(|(block, _)| *block == "route")
        else {
            return Vec::new();
        };
        refused_routes(&self.routes(nets).0, nets, &origin.to_string())
    }

    /// The routing a node running `nets` boots with: the parameters', then the YAML's.
    /// lustre: router.c `lnet_rtrpools_alloc()` (`forwarding`, `im_a_router`).
    pub fn boot_routing(&self, config: &Config, nets: &[NetSpec]) -> BootRouting {
        let (mut routes, router) = self.routes(nets);
        routes.extend(config.routes.iter().copied());
        let forwarding = self.params.routing.routing.or(router.then_some(true));
        let buffers = match (self.params.routing.buffers, config.buffers) {
            (Some(module), Some(file)) => Some(Buffers {
                tiny: file.tiny.or(module.tiny),
                small: file.small.or(module.small),
                large: file.large.or(module.large),
            }),
            (module, file) => file.or(module),
        };
        BootRouting { routes, enable: config.routing.or(forwarding), buffers }
    }
}
