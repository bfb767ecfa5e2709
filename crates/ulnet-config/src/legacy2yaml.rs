//! `lnet_legacy2yaml`: the legacy `ip2nets=`, `routes=` and `networks=` module parameter
//! syntaxes converted to the YAML `lnetctl import` (and `ulnetd --config`) reads, with the
//! same options, inputs, output bytes, messages and exit statuses as Lustre's Python tool,
//! so that migration scripts written for it work with the name changed. No I/O here: the
//! `ulnet-legacy2yaml` binary (crate `ulnetd`) reads the files and writes the result.
//!
//! The tool prints its YAML line by line, not through a YAML emitter: a `net:` item starts
//! with `-     net type:`, ip2nets items are indented two columns, interface and range
//! lists are numbered maps, values are written as given (a pattern starting with `*` is
//! double-quoted). The bytes here are the tool's. Its man page shows other indentation,
//! which the tool does not print; and like the tool, a value YAML cannot read back (a
//! gateway written `[1,2,3,4,5]@ptlf`) is printed as is.
//!
//! Order, as in the tool: `-m` files, then `-i`, `-r` and `-n` files, then the inline
//! string (or stdin when there is none and stdin is not a terminal). Within each source,
//! ip2nets values come first, then routes, then networks. The output holds `net:`, then
//! `ip2nets:`, then `route:`. The first malformed entry stops the conversion.
//!
//! lustre: lustre/scripts/lnet_legacy2yaml, Documentation/man8/lnet_legacy2yaml.8,
//! lustre/tests/sanity-lnet.sh tests 600-629.

mod args;
mod params;
mod python;
mod rules;

pub use args::{Args, Parsed, USAGE_STATUS, parse as parse_args, usage};
pub use python::{decode as decode_text, os_error, repr as python_repr};

use rules::{Network, Route, Rule};

/// Largest source read (a file, stdin): the tool has no limit; this bounds what one
/// conversion holds.
pub const MAX_INPUT_LEN: usize = 1 << 20;

/// Exit status of a malformed entry, an unreadable file or an unwritable output.
pub const ERROR_STATUS: u8 = 2;
/// Exit status when no source held any entry.
pub const NO_DATA_STATUS: u8 = 1;

/// Why the conversion stopped: the message for stderr and the exit status.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Failure {
    pub message: String,
    pub status: u8,
}

impl Failure {
    fn new(message: String) -> Self {
        Self { message, status: ERROR_STATUS }
    }
}

/// The entries gathered so far, in the order the sources were added.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Converter {
    networks: Vec<Network>,
    ip2nets: Vec<Rule>,
    routes: Vec<Route>,
}

impl Converter {
    pub fn new() -> Self {
        Self::default()
    }

    /// A `-m` file's text: the values of its `options` lines that mention `lnet`.
    pub fn add_modprobe(&mut self, file: &str, text: &str) -> Result<(), Failure> {
        let found = params::extract_modprobe(text);
        self.add_found(&found)
            .map_err(|e| Failure::new(format!("Error in modprobe file {file}: {e}")))
    }

    /// A `-i` file's text.
    pub fn add_ip2nets(&mut self, file: &str, text: &str) -> Result<(), Failure> {
        let rules = rules::ip2nets(text)
            .map_err(|e| Failure::new(format!("Error in ip2nets file {file}: {e}")))?;
        self.ip2nets.extend(rules);
        Ok(())
    }

    /// A `-r` file's text.
    pub fn add_routes(&mut self, file: &str, text: &str) -> Result<(), Failure> {
        let routes = rules::routes(text)
            .map_err(|e| Failure::new(format!("Error in routes file {file}: {e}")))?;
        self.routes.extend(routes);
        Ok(())
    }

    /// A `-n` file's text.
    pub fn add_networks(&mut self, file: &str, text: &str) -> Result<(), Failure> {
        let networks = rules::networks(text)
            .map_err(|e| Failure::new(format!("Error in networks file {file}: {e}")))?;
        self.networks.extend(networks);
        Ok(())
    }

    /// The inline string (or stdin): its `ip2nets=`/`routes=`/`networks=` values, or, when
    /// it has none, the whole text as ip2nets rules. Empty text adds nothing.
    pub fn add_inline(&mut self, text: &str) -> Result<(), Failure> {
        if text.is_empty() {
            return Ok(());
        }
        let found = params::extract(text);
        let result = if found.is_empty() {
            rules::ip2nets(text).map(|rules| self.ip2nets.extend(rules))
        } else {
            self.add_found(&found)
        };
        result.map_err(|e| Failure::new(format!("Error: {e}")))
    }

    fn add_found(&mut self, found: &params::Found) -> Result<(), String> {
        let [ip2nets, routes, networks] = &found.values;
        for body in ip2nets {
            self.ip2nets.extend(rules::ip2nets(body)?);
        }
        for body in routes {
            self.routes.extend(rules::routes(body)?);
        }
        for body in networks {
            self.networks.extend(rules::networks(body)?);
        }
        Ok(())
    }

    /// The YAML, after `--default-hop` (the value from [`Args::default_hop`]) is applied to
    /// the routes without a hop count.
    pub fn finish(mut self, default_hop: Option<&str>) -> Result<String, Failure> {
        if self.networks.is_empty() && self.ip2nets.is_empty() && self.routes.is_empty() {
            return Err(Failure {
                message: "Error: no ip2nets, routes, or networks data provided (use -m/-i/-r, \
                          inline arg, or stdin)"
                    .into(),
                status: NO_DATA_STATUS,
            });
        }
        if let Some(hop) = default_hop {
            if !python::int_in_range(hop, 1, 255) {
                return Err(Failure::new(format!(
                    "Error: --default-hop value {hop} out of range (1-255)"
                )));
            }
            for route in self.routes.iter_mut().filter(|route| route.hop.is_none()) {
                route.hop = Some(hop.to_string());
            }
        }
        Ok(self.yaml())
    }

    fn yaml(&self) -> String {
        let mut lines = Vec::new();
        if !self.networks.is_empty() {
            lines.push("net:".to_string());
            self.networks.iter().for_each(|network| network.yaml(&mut lines));
        }
        if !self.ip2nets.is_empty() {
            lines.push("ip2nets:".to_string());
            self.ip2nets.iter().for_each(|rule| rule.yaml(&mut lines));
        }
        if !self.routes.is_empty() {
            lines.push("route:".to_string());
            self.routes.iter().for_each(|route| route.yaml(&mut lines));
        }
        let mut text = lines.join("\n");
        text.push('\n');
        text
    }
}

#[cfg(test)]
mod tests;
