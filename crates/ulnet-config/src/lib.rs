//! LNet configuration with no I/O: the model `ulnetd` runs from, the YAML `lnetctl import`
//! accepts and `lnetctl export` writes, the kernel-style `networks=`/`ip2nets=`/`routes=`
//! grammars, and byte-exact renderers for `lnetctl`'s output shapes and error reports.
//!
//! Everything here parses strings and produces strings; the daemon fills the plain input
//! structs of [`render`] from live state. Reference: /work/shared/reference/cli.md.

pub mod emit;
pub mod grammar;
pub mod model;
pub mod render;

mod nid_text;
