//! The `lfs setstripe` grammar: options → the layout lfs sends (a `lov_user_md` or a
//! `lov_comp_md_v1` request), with lfs's error texts (docs/protocol/layouts.md §6).
//!
//! Supported: `-E`, `-c`, `-C`, `-S`, `-i`, `-o`, `-p`, `-L raid0|mdt`, `-z`, `--comp-flags`.
//! Mirrors (`-N`), `--yaml`, `--copy`, `--foreign` and `--comp-add/del/set` are not.
// lustre: lustre/utils/lfs.c lfs_setstripe_internal(), comp_args_to_layout(),
// setstripe_args_init_inherit(), lsa_args_stripe_count_check(); liblustreapi_layout.c
// llapi_layout_to_lum(), llapi_layout_sanity().

use super::composite::{Component, CompositeLayout};
use super::layout::Layout;
use super::ostid::OstId;
use super::plain::{ObjectSlot, PlainLayout, PoolName};
use super::size::{format_size, parse_size};
use super::{
    LCME_FL_EXTENSION, LCME_FL_NOSYNC, LCME_FL_PREF_RD, LCME_FL_PREF_RW, LCME_FL_PREF_WR,
    LOV_MAGIC_SPECIFIC, LOV_MAGIC_V1, LOV_MAGIC_V3, LOV_MAX_STRIPE_COUNT, LOV_MIN_STRIPE_SIZE,
    LOV_OFFSET_DEFAULT, LOV_PATTERN_MDT, LOV_PATTERN_OVERSTRIPING, LOV_PATTERN_RAID0,
    LOV_V1_INSANE_STRIPE_INDEX, LUSTRE_EOF, SEL_UNIT_SIZE,
};

mod checks;
mod error;
mod words;

use checks::{check_dom, sanity};
pub use error::SetstripeError;
use words::{canonical, parse_c_long, parse_targets, split_option};

/// Bare `-S`/`-E` values below this are KiB.
const KIB_THRESHOLD: u64 = 4096;
/// DoM components end at or below 1 GiB.
const DOM_MAX_END: u64 = 1 << 30;
/// `LLAPI_OVERSTRIPE_COUNT_MAX`: `-C -32` is the lowest "stripes per OST".
const OVERSTRIPE_COUNT_MIN: i64 = -32;
/// Stripe sizes stay below 4 GiB (`lmm_stripe_size` is a u32).
const STRIPE_SIZE_LIMIT: u64 = 1 << 32;

/// Stripe options of one component, as given (None = not given, lfs's `LLAPI_LAYOUT_DEFAULT`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Args {
    end: u64,
    stripe_size: Option<u64>,
    stripe_count: Option<i64>,
    stripe_offset: Option<i64>,
    pool: Option<String>,
    dom: bool,
    overstriping: bool,
    osts: Vec<u32>,
    extension_size: Option<u64>,
    flags: u32,
}

impl Args {
    /// What the next `-E` starts from: stripe size (not after DoM), count and pool.
    // lustre: lustre/utils/lfs.c setstripe_args_init_inherit()
    fn inherit(&self) -> Self {
        Self {
            stripe_size: if self.dom { None } else { self.stripe_size },
            stripe_count: self.stripe_count,
            pool: self.pool.clone(),
            ..Self::default()
        }
    }
}

/// One component of the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComponentRequest {
    pub start: u64,
    pub end: u64,
    /// `LCME_FL_*` given with `--comp-flags`, plus `extension` for SEL extension space.
    pub flags: u32,
    pub pattern: u32,
    /// Bytes; 0 = default. Extension components: the extension size in bytes.
    pub stripe_size: u64,
    /// As stored: 0 = default, 0xFFFF = -1, 0xFFE0..=0xFFFE = -32..-2.
    pub stripe_count: u16,
    /// 0xFFFF = the MDS chooses.
    pub stripe_offset: u16,
    pub pool: PoolName,
    /// `-o`: the OSTs, in order (a `SPECIFIC` request).
    pub osts: Vec<u32>,
}

/// A parsed `lfs setstripe` command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setstripe {
    /// Whether `-E` was given: a composite request.
    pub composite: bool,
    pub components: Vec<ComponentRequest>,
    /// Arguments that are not options (file names).
    pub operands: Vec<String>,
}

impl Setstripe {
    /// Parses options as `lfs setstripe` does; `args` excludes the command name.
    pub fn parse<S: AsRef<str>>(args: &[S]) -> Result<Self, SetstripeError> {
        Parser::default().run(args)
    }

    /// The layout lfs would send: a `lov_user_md` (v1, v3 with a pool, `SPECIFIC` with `-o`)
    /// or a `lov_comp_md_v1` of those.
    // lustre: lustre/utils/liblustreapi_layout.c llapi_layout_to_lum()
    pub fn to_layout(&self) -> Layout {
        let subs = self.components.iter().map(sub_layout);
        if self.composite {
            let components = self
                .components
                .iter()
                .zip(subs)
                .map(|(c, sub)| Component::request(c.start, c.end, c.flags, sub))
                .collect();
            Layout::Composite(CompositeLayout::request(components))
        } else {
            let plain = subs.into_iter().next().unwrap_or_else(|| {
                PlainLayout::request(LOV_PATTERN_RAID0, 0, 0, LOV_OFFSET_DEFAULT)
            });
            Layout::Plain(plain)
        }
    }

    /// Options that parse back to the same request, every value explicit.
    pub fn to_args(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut components = self.components.iter().peekable();
        while let Some(component) = components.next() {
            let extension =
                components.peek().filter(|next| next.flags & LCME_FL_EXTENSION != 0).copied();
            let dom = component.pattern == LOV_PATTERN_MDT;
            if dom {
                // Before its -E (both sides of the first -E belong to the first component):
                // lfs checks a DoM component's size at -L against the end known so far, so
                // `-L mdt -E 2G` passes where `-E 2G -L mdt` is refused, and the order that
                // made the request must be the one that remakes it.
                // lustre: lustre/utils/lfs.c lfs_setstripe_internal() case 'L'
                out.extend(["-L".into(), "mdt".into()]);
            }
            if self.composite {
                let end = extension.map_or(component.end, |e| e.end);
                out.push("-E".into());
                out.push(if end == LUSTRE_EOF { "-1".into() } else { format_size(end) });
            }
            if dom {
                push_flags(&mut out, component.flags);
                continue;
            }
            out.extend(["-S".into(), format_size(component.stripe_size)]);
            let count = i64::from(i16::from_le_bytes(component.stripe_count.to_le_bytes()));
            let count = if count < 0 { count } else { i64::from(component.stripe_count) };
            let overstriped = component.pattern & LOV_PATTERN_OVERSTRIPING != 0;
            out.extend([if overstriped { "-C" } else { "-c" }.into(), count.to_string()]);
            if !component.osts.is_empty() {
                let list: Vec<String> = component.osts.iter().map(u32::to_string).collect();
                out.extend(["-o".into(), list.join(",")]);
            }
            if component.stripe_offset != LOV_OFFSET_DEFAULT {
                out.extend(["-i".into(), component.stripe_offset.to_string()]);
            } else if !component.osts.is_empty() {
                // -o alone would make its first OST the index.
                out.extend(["-i".into(), "-1".into()]);
            }
            out.extend(["-p".into(), component.pool.as_str().to_string()]);
            push_flags(&mut out, component.flags);
            if let Some(extension) = extension {
                out.extend(["-z".into(), format_size(extension.stripe_size)]);
                components.next();
            }
        }
        out
    }
}

fn sub_layout(c: &ComponentRequest) -> PlainLayout {
    let stored_size = if c.flags & LCME_FL_EXTENSION != 0 {
        c.stripe_size / SEL_UNIT_SIZE
    } else {
        c.stripe_size
    };
    let mut plain = PlainLayout::request(
        c.pattern,
        u32::try_from(stored_size).unwrap_or(u32::MAX),
        c.stripe_count,
        c.stripe_offset,
    );
    plain.pool = c.pool.clone();
    plain.magic = if !c.osts.is_empty() {
        LOV_MAGIC_SPECIFIC
    } else if !c.pool.is_empty() {
        LOV_MAGIC_V3
    } else {
        LOV_MAGIC_V1
    };
    plain.objects = c
        .osts
        .iter()
        .map(|&ost_index| ObjectSlot { oi: OstId::default(), generation: 0, ost_index })
        .collect();
    plain
}

/// `--comp-flags NAMES` for the user flags of `flags`, if any.
fn push_flags(out: &mut Vec<String>, flags: u32) {
    if flags & !LCME_FL_EXTENSION != 0 {
        out.extend(["--comp-flags".into(), flag_names(flags & !LCME_FL_EXTENSION)]);
    }
}

/// The `--comp-flags` names of `flags`.
fn flag_names(flags: u32) -> String {
    let mut names = Vec::new();
    let mut rest = flags;
    for (bit, name) in USER_FLAGS {
        if rest & bit == bit {
            names.push(name);
            rest &= !bit;
        }
    }
    names.join(",")
}

/// The flags `--comp-flags` accepts at creation (`LCME_USER_COMP_FLAGS` less `extension`).
const USER_FLAGS: [(u32, &str); 4] = [
    (LCME_FL_PREF_RW, "prefer"),
    (LCME_FL_PREF_RD, "prefrd"),
    (LCME_FL_PREF_WR, "prefwr"),
    (LCME_FL_NOSYNC, "nosync"),
];

#[derive(Debug, Default)]
struct Parser {
    args: Args,
    components: Vec<ComponentRequest>,
    saw_end: bool,
    overstriped: bool,
    operands: Vec<String>,
}

impl Parser {
    fn run<S: AsRef<str>>(mut self, args: &[S]) -> Result<Setstripe, SetstripeError> {
        let mut iter = args.iter().map(AsRef::as_ref);
        while let Some(arg) = iter.next() {
            let Some((name, inline)) = split_option(arg) else {
                self.operands.push(arg.to_string());
                continue;
            };
            let option =
                canonical(name).ok_or_else(|| SetstripeError::UnknownOption(arg.to_string()))?;
            if option == 'U' {
                return Err(SetstripeError::Unsupported(arg.to_string()));
            }
            let value = match inline {
                Some(value) => value.to_string(),
                None => iter
                    .next()
                    .ok_or_else(|| SetstripeError::MissingArgument(option.to_string()))?
                    .to_string(),
            };
            self.option(option, &value)?;
        }
        if self.args.extension_size.is_some() && !self.saw_end {
            return Err(SetstripeError::Unsupported("-z without -E".into()));
        }
        if self.saw_end {
            self.finish_component()?;
            sanity(&self.components)?;
        } else {
            self.args.end = LUSTRE_EOF;
            self.finish_component()?;
        }
        Ok(Setstripe {
            composite: self.saw_end,
            components: self.components,
            operands: self.operands,
        })
    }

    fn option(&mut self, option: char, value: &str) -> Result<(), SetstripeError> {
        match option {
            'E' => self.component_end(value),
            'c' | 'C' => self.stripe_count(option == 'C', value),
            'S' => {
                let size = kib_if_small(
                    parse_size(value).map_err(|_| SetstripeError::StripeSize(value.into()))?,
                );
                if size % LOV_MIN_STRIPE_SIZE != 0 {
                    return Err(SetstripeError::StripeSize(value.into()));
                }
                self.args.stripe_size = Some(size);
                Ok(())
            }
            'i' => {
                let offset = parse_c_long(value)
                    .filter(|&o| (-1..=i64::from(LOV_V1_INSANE_STRIPE_INDEX)).contains(&o));
                let offset = offset.ok_or_else(|| SetstripeError::StripeOffset(value.into()))?;
                self.args.stripe_offset = (offset != -1).then_some(offset);
                Ok(())
            }
            'o' => self.ost_list(value),
            'p' => {
                self.args.pool = (!value.is_empty() && value != "inherit" && value != "none")
                    .then(|| value.to_string());
                Ok(())
            }
            'L' => self.layout(value),
            'z' => {
                let size =
                    parse_size(value).map_err(|_| SetstripeError::ExtensionSize(value.into()))?;
                self.args.extension_size = Some(size);
                Ok(())
            }
            'F' => {
                for name in value.split(',') {
                    let bit = USER_FLAGS.iter().find(|(_, n)| *n == name).map(|(bit, _)| *bit);
                    self.args.flags |=
                        bit.ok_or_else(|| SetstripeError::ComponentFlags(value.into()))?;
                }
                Ok(())
            }
            other => Err(SetstripeError::Unsupported(format!("-{other}"))),
        }
    }

    fn component_end(&mut self, value: &str) -> Result<(), SetstripeError> {
        if self.args.end != 0 {
            self.finish_component()?;
            self.args = self.args.inherit();
        }
        self.saw_end = true;
        // lustre: lustre/utils/lfs.c arg_is_eof(): a prefix match on "-1", "EOF", "eof".
        if ["-1", "EOF", "eof"].iter().any(|eof| value.starts_with(eof)) {
            self.args.end = LUSTRE_EOF;
            return Ok(());
        }
        let end = kib_if_small(
            parse_size(value).map_err(|_| SetstripeError::ComponentEnd(value.into()))?,
        );
        if end % LOV_MIN_STRIPE_SIZE != 0 || end == 0 {
            return Err(SetstripeError::ComponentEnd(value.into()));
        }
        self.args.end = end;
        Ok(())
    }

    fn stripe_count(&mut self, overstripe: bool, value: &str) -> Result<(), SetstripeError> {
        if overstripe {
            if self.args.dom {
                return Err(SetstripeError::OverstripeWithDom);
            }
            self.overstriped = true;
            self.args.overstriping = true;
        }
        let lowest = if self.overstriped { OVERSTRIPE_COUNT_MIN } else { -1 };
        let count = parse_c_long(value)
            .filter(|&c| (lowest..=i64::from(LOV_MAX_STRIPE_COUNT)).contains(&c));
        self.args.stripe_count =
            Some(count.ok_or_else(|| SetstripeError::StripeCount(value.into()))?);
        Ok(())
    }

    fn ost_list(&mut self, value: &str) -> Result<(), SetstripeError> {
        if self.args.dom {
            return Err(SetstripeError::OstWithDom);
        }
        let osts = parse_targets(value).ok_or_else(|| SetstripeError::OstList(value.into()))?;
        let mut seen = std::collections::HashSet::new();
        if osts.iter().chain(self.args.osts.iter()).any(|ost| !seen.insert(*ost)) {
            // Repeated OSTs mean several stripes per OST.
            self.args.overstriping = true;
        }
        self.args.osts.extend(osts);
        if self.args.osts.len() > usize::from(LOV_MAX_STRIPE_COUNT) {
            return Err(SetstripeError::OstList(value.into()));
        }
        if self.args.stripe_offset.is_none() {
            self.args.stripe_offset = self.args.osts.first().map(|&o| i64::from(o));
        }
        Ok(())
    }

    fn layout(&mut self, value: &str) -> Result<(), SetstripeError> {
        match value {
            "mdt" => {
                if !self.components.is_empty() {
                    return Err(SetstripeError::DomNotFirst);
                }
                if self.args.end > DOM_MAX_END {
                    return Err(SetstripeError::DomTooBig);
                }
                self.args.dom = true;
                self.args.stripe_size = None;
                Ok(())
            }
            "raid0" => Ok(()),
            other => Err(SetstripeError::UnknownLayout(other.into())),
        }
    }

    /// Without `-E` lfs checks the options with `llapi_stripe_param_verify()`, whose texts
    /// differ, and leaves the OST list against `-i` to the MDS.
    // lustre: lustre/utils/lfs.c lfs_setstripe_internal() (the `!layout` branch);
    // liblustreapi.c llapi_stripe_param_verify()
    fn check_plain(&self) -> Result<(), SetstripeError> {
        let a = &self.args;
        let count = a.stripe_count.unwrap_or(0);
        if !a.osts.is_empty() && count > 0 && usize::try_from(count).ok() != Some(a.osts.len()) {
            return Err(SetstripeError::PlainCountNotListLength(count, a.osts.len()));
        }
        if let Some(size) = a.stripe_size.filter(|&s| s >= STRIPE_SIZE_LIMIT) {
            return Err(SetstripeError::PlainStripeSizeTooBig(size));
        }
        if a.dom {
            return Err(SetstripeError::PlainDom);
        }
        if let Some(pool) = a.pool.as_ref().filter(|p| PoolName::new(p).is_none()) {
            return Err(SetstripeError::PlainPoolName(pool.clone()));
        }
        Ok(())
    }

    /// Closes the current component (and its SEL extension space).
    // lustre: lustre/utils/lfs.c comp_args_to_layout()
    fn finish_component(&mut self) -> Result<(), SetstripeError> {
        if !self.saw_end {
            self.check_plain()?;
        }
        let start = self.components.last().map_or(0, |c| c.end);
        let composite = self.saw_end;
        let a = &mut self.args;
        let mut pattern = if a.overstriping {
            LOV_PATTERN_RAID0 | LOV_PATTERN_OVERSTRIPING
        } else {
            LOV_PATTERN_RAID0
        };
        if a.dom {
            check_dom(a, start)?;
            pattern = LOV_PATTERN_MDT;
            a.stripe_size = Some(a.end);
            // An index of 0 is accepted for DoM and means "default" like -1.
            a.stripe_offset = None;
        }
        let stripe_size = a.stripe_size.unwrap_or(0);
        if stripe_size % LOV_MIN_STRIPE_SIZE != 0 || stripe_size >= STRIPE_SIZE_LIMIT {
            return Err(SetstripeError::SetStripeSize(stripe_size));
        }
        let pool = match &a.pool {
            Some(name) => {
                PoolName::new(name).ok_or_else(|| SetstripeError::PoolName(name.clone()))?
            }
            None => PoolName::default(),
        };
        let count = a.stripe_count.unwrap_or(0);
        if !a.osts.is_empty() && count > 0 && usize::try_from(count).ok() != Some(a.osts.len()) {
            return Err(SetstripeError::CountNotListLength(count, a.osts.len()));
        }
        // Without -E the MDS, not lfs, refuses an index outside the list.
        if let Some(offset) = a.stripe_offset.filter(|_| composite && !a.osts.is_empty()) {
            if !a.osts.iter().any(|&o| i64::from(o) == offset) {
                return Err(SetstripeError::OffsetNotInList(offset));
            }
        }
        let mut component = ComponentRequest {
            start,
            end: if a.extension_size.is_some() { start } else { a.end },
            flags: a.flags,
            pattern,
            stripe_size,
            stripe_count: stored_count(if a.osts.is_empty() || count != 0 {
                count
            } else {
                i64::try_from(a.osts.len()).unwrap_or(0)
            }),
            stripe_offset: a
                .stripe_offset
                .and_then(|o| u16::try_from(o).ok())
                .unwrap_or(LOV_OFFSET_DEFAULT),
            pool,
            osts: a.osts.clone(),
        };
        if let Some(extension) = a.extension_size {
            self.components.push(component.clone());
            component.start = start;
            component.end = a.end;
            component.flags |= LCME_FL_EXTENSION;
            component.stripe_size = extension;
        }
        self.components.push(component);
        Ok(())
    }
}

fn stored_count(count: i64) -> u16 {
    if count < 0 {
        // -1 → 0xFFFF, -32 → 0xFFE0: the negative value's low 16 bits.
        u16::try_from(0x1_0000 + count).unwrap_or(0)
    } else {
        u16::try_from(count).unwrap_or(0)
    }
}

fn kib_if_small(size: u64) -> u64 {
    if size < KIB_THRESHOLD { size * 1024 } else { size }
}

#[cfg(test)]
mod tests;
