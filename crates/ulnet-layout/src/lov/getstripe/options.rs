//! `lfs getstripe` options: which fields to print and which components to show.
// lustre: lustre/utils/lfs.c lfs_getstripe_internal(); lustre/include/lustre/lustreapi.h
// enum llapi_layout_verbose

use thiserror::Error;

use super::names::COMP_FLAG_NAMES;
use crate::fid::Fid;
use crate::lov::size::parse_size;
use crate::lov::{DEFAULT_STRIPE_SIZE, LCME_ID_MAX, LUSTRE_EOF};

/// The Lustre release whose text this module reproduces.
pub const EMULATED_VERSION: &str = "2.17.0";

// lustre: lustre/include/lustre/lustreapi.h enum llapi_layout_verbose
pub const VERBOSE_STRIPE_COUNT: u32 = 0x1;
pub const VERBOSE_STRIPE_SIZE: u32 = 0x2;
pub const VERBOSE_STRIPE_OFFSET: u32 = 0x4;
pub const VERBOSE_POOL: u32 = 0x8;
pub const VERBOSE_DETAIL: u32 = 0x10;
pub const VERBOSE_OBJID: u32 = 0x20;
pub const VERBOSE_GENERATION: u32 = 0x40;
pub const VERBOSE_PATTERN: u32 = 0x100;
pub const VERBOSE_COMP_COUNT: u32 = 0x200;
pub const VERBOSE_COMP_FLAGS: u32 = 0x400;
pub const VERBOSE_COMP_START: u32 = 0x800;
pub const VERBOSE_COMP_END: u32 = 0x1000;
pub const VERBOSE_COMP_ID: u32 = 0x2000;
pub const VERBOSE_DFID: u32 = 0x4000;
pub const VERBOSE_MIRROR_COUNT: u32 = 0x10000;
pub const VERBOSE_MIRROR_ID: u32 = 0x20000;
pub const VERBOSE_EXT_SIZE: u32 = 0x40000;
/// Everything `lfs getstripe` prints with no selector (directory-only bits included).
pub const VERBOSE_DEFAULT: u32 = 0x1F_BF6F;
pub(super) const VERBOSE_COMP_OPTS: u32 = VERBOSE_COMP_COUNT
    | VERBOSE_COMP_ID
    | VERBOSE_COMP_START
    | VERBOSE_COMP_END
    | VERBOSE_COMP_FLAGS;

/// File-system defaults shown in place of unset directory-default fields (unless raw).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsDefaults {
    pub stripe_count: u32,
    pub stripe_size: u32,
}

impl Default for FsDefaults {
    fn default() -> Self {
        Self { stripe_count: 1, stripe_size: DEFAULT_STRIPE_SIZE }
    }
}

/// A numeric filter with lfs's `+N`/`-N` signs: `sign` > 0 means "less than" (`-N`),
/// < 0 "greater than" (`+N`), 0 "equal".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bound {
    pub value: u64,
    pub sign: i8,
}

impl Bound {
    pub(super) fn matches(&self, value: u64) -> bool {
        match self.sign {
            0 => value == self.value,
            s if s > 0 => value < self.value,
            _ => value > self.value,
        }
    }
}

/// What to print and how: the state `lfs getstripe` builds from its options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetstripeOptions {
    /// `VERBOSE_*` bits; 0 means [`VERBOSE_DEFAULT`].
    pub verbose: u32,
    /// `-y`.
    pub yaml: bool,
    /// `-R`: no file-system defaults substituted.
    pub raw: bool,
    /// `--hex-idx`.
    pub hex_index: bool,
    /// The layout is a directory's default.
    pub directory: bool,
    /// Printed first, unless a selector, `-d` or `-y` was given.
    pub path: Option<String>,
    /// Whether the path line is printed (lfs's `fp_max_depth != 0`).
    pub print_path: bool,
    /// `-I ID`.
    pub component_id: Option<u32>,
    /// `--component-flags=[^]F,...`: (required, excluded).
    pub component_flags: Option<(u32, u32)>,
    /// `--component-start=[+-]N`.
    pub component_start: Option<Bound>,
    /// `-E [+-]N`.
    pub component_end: Option<Bound>,
    /// Substituted for unset directory fields.
    pub defaults: FsDefaults,
    /// The directory's FID for `lmm_fid` of a directory with `-v` (lfs asks the file system).
    pub directory_fid: Fid,
}

impl Default for GetstripeOptions {
    fn default() -> Self {
        Self {
            verbose: 0,
            yaml: false,
            raw: false,
            hex_index: false,
            directory: false,
            path: None,
            print_path: true,
            component_id: None,
            component_flags: None,
            component_start: None,
            component_end: None,
            defaults: FsDefaults::default(),
            directory_fid: Fid::default(),
        }
    }
}

/// A getstripe option error; `Display` is lfs's text.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum GetstripeError {
    #[error("error: getstripe bad component id '{0}'")]
    ComponentId(String),
    #[error("error: getstripe bad component end '{0}'.")]
    ComponentEnd(String),
    #[error("error: getstripe bad component start '{0}'.")]
    ComponentStart(String),
    #[error("error: getstripe bad component flags '{0}'.")]
    ComponentFlags(String),
    #[error("lfs getstripe: unrecognized option '{0}'")]
    UnknownOption(String),
}

impl GetstripeOptions {
    /// Parses lfs getstripe options; returns the operands too. Options with an optional
    /// argument (`-I`, `-E`, `--component-start`, `--component-flags`) take it inline only
    /// (`-I2`, `--component-id=2`), as getopt does.
    pub fn parse<S: AsRef<str>>(args: &[S]) -> Result<(Self, Vec<String>), GetstripeError> {
        let mut o = Self::default();
        let mut operands = Vec::new();
        for arg in args.iter().map(AsRef::as_ref) {
            let (name, value) = match arg.strip_prefix("--") {
                Some(long) => long.split_once('=').map_or((long, None), |(n, v)| (n, Some(v))),
                None => match arg.strip_prefix('-').filter(|s| !s.is_empty()) {
                    Some(short) => {
                        let split = short.char_indices().nth(1).map_or(short.len(), |(i, _)| i);
                        let (name, rest) = short.split_at(split);
                        (name, (!rest.is_empty()).then_some(rest))
                    }
                    None => {
                        operands.push(arg.to_string());
                        continue;
                    }
                },
            };
            o.option(name, value, arg)?;
        }
        if o.verbose & VERBOSE_DETAIL != 0 {
            o.print_path = true;
        }
        if o.verbose == 0 {
            o.verbose = VERBOSE_DEFAULT;
        }
        Ok((o, operands))
    }

    fn select(&mut self, bit: u32) {
        if self.verbose & VERBOSE_DETAIL == 0 {
            self.verbose |= bit;
            self.print_path = false;
        }
    }

    fn option(&mut self, name: &str, value: Option<&str>, arg: &str) -> Result<(), GetstripeError> {
        match (name, value) {
            ("c" | "stripe-count", None) => self.select(VERBOSE_STRIPE_COUNT),
            ("S" | "stripe-size", None) => self.select(VERBOSE_STRIPE_SIZE),
            ("i" | "stripe-index", None) => self.select(VERBOSE_STRIPE_OFFSET),
            ("p" | "pool", None) => self.select(VERBOSE_POOL),
            ("L" | "layout", None) => self.select(VERBOSE_PATTERN),
            ("g" | "generation", None) => self.select(VERBOSE_GENERATION),
            ("N" | "mirror-count", None) => self.select(VERBOSE_MIRROR_COUNT),
            ("z" | "extension-size", None) => self.select(VERBOSE_EXT_SIZE),
            ("F" | "fid", None) => self.select(VERBOSE_DFID),
            ("component-count", None) => {
                self.verbose |= VERBOSE_COMP_COUNT;
                self.print_path = false;
            }
            ("v" | "verbose", None) => self.verbose = VERBOSE_DEFAULT | VERBOSE_DETAIL,
            ("y" | "yaml", None) => self.yaml = true,
            ("R" | "raw", None) => self.raw = true,
            ("d" | "directory", None) => {
                self.directory = true;
                self.print_path = false;
            }
            ("hex-idx", None) => self.hex_index = true,
            ("I" | "component-id" | "comp-id", None) => {
                self.verbose |= VERBOSE_COMP_ID;
                self.print_path = false;
            }
            ("I" | "component-id" | "comp-id", Some(v)) => {
                let id = v.parse::<u32>().ok().filter(|&id| id != 0 && id <= LCME_ID_MAX);
                self.component_id = Some(id.ok_or_else(|| GetstripeError::ComponentId(v.into()))?);
            }
            ("E" | "component-end" | "comp-end", None) => {
                self.verbose |= VERBOSE_COMP_END;
                self.print_path = false;
            }
            ("E" | "component-end" | "comp-end", Some(v)) => {
                self.component_end =
                    Some(bound(v, true).ok_or_else(|| GetstripeError::ComponentEnd(v.into()))?);
            }
            ("component-start" | "comp-start", None) => {
                self.verbose |= VERBOSE_COMP_START;
                self.print_path = false;
            }
            ("component-start" | "comp-start", Some(v)) => {
                self.component_start =
                    Some(bound(v, false).ok_or_else(|| GetstripeError::ComponentStart(v.into()))?);
            }
            ("component-flags" | "comp-flags", None) => {
                self.verbose |= VERBOSE_COMP_FLAGS;
                self.print_path = false;
            }
            ("component-flags" | "comp-flags", Some(v)) => {
                self.component_flags =
                    Some(parse_flags(v).ok_or_else(|| GetstripeError::ComponentFlags(v.into()))?);
            }
            _ => return Err(GetstripeError::UnknownOption(arg.into())),
        }
        Ok(())
    }
}

/// `[+-]N[KMG...]` (or `EOF` for ends); bare values below 4096 are KiB.
fn bound(text: &str, end: bool) -> Option<Bound> {
    let (sign, rest) = match text.as_bytes().first() {
        Some(b'+') => (-1, text.get(1..)?),
        Some(b'-') => (1, text.get(1..)?),
        _ => (0, text),
    };
    if end && ["-1", "EOF", "eof"].iter().any(|eof| rest.starts_with(eof)) {
        return Some(Bound { value: LUSTRE_EOF, sign });
    }
    let value = parse_size(rest).ok()?;
    Some(Bound { value: if value < 4096 { value * 1024 } else { value }, sign })
}

/// `[^]name,...` → (required, excluded) flag bits.
fn parse_flags(text: &str) -> Option<(u32, u32)> {
    let (mut set, mut neg) = (0, 0);
    for name in text.split(',') {
        let (negated, name) = name.strip_prefix('^').map_or((false, name), |n| (true, n));
        let bit = COMP_FLAG_NAMES.iter().find(|(_, n)| *n == name)?.0;
        if negated { neg |= bit } else { set |= bit }
    }
    Some((set, neg))
}
