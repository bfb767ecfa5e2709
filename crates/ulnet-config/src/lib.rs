//! LNet configuration with no I/O: the model `ulnetd` runs from, the YAML `lnetctl import`
//! accepts and `lnetctl export` writes, the kernel-style `networks=`/`ip2nets=`/`routes=`
//! grammars, and byte-exact renderers for `lnetctl`'s output shapes and error reports.
//!
//! Everything here parses strings and produces strings; the daemon fills the plain input
//! structs of [`render`] from live state. Reference: docs/protocol/cli.md.
//!
//! - [`emit`]: a YAML tree and the two printers lnetctl uses (libyaml's emitter, "dialect N",
//!   and cYAML's, "dialect C"), byte for byte.
//! - [`grammar`]: range expressions, `networks=`, `ip2nets=`, `routes=`.
//! - [`legacy2yaml`]: Lustre's `lnet_legacy2yaml` converter, byte for byte.
//! - [`modprobe`]: kernel module parameters from modprobe.d files, mapped onto the model.
//! - [`model`]: [`model::Config`], the `import` parser, global settings with Lustre's defaults
//!   and checks, interface matching for `net:`/`ip2nets:`, and `export --backup` of a model.
//! - [`render`]: `net show`, `peer show`, `peer list`, `route show`, `ping`/`discover`,
//!   `global show`, `stats show`, `routing show`, `udsp show`, `debug recovery`, `export`, and
//!   the error reports of both dialects with lnetctl's exit statuses.

pub mod emit;
pub mod grammar;
pub mod legacy2yaml;
pub mod model;
pub mod modprobe;
pub mod render;

mod nid_text;
