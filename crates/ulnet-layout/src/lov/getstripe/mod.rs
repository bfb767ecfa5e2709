//! `lfs getstripe` output of a layout, byte for byte as Lustre 2.17.0 prints it: default
//! text, `-v`, `-y` and the field selectors (docs/protocol/layouts.md §7).
// lustre: lustre/utils/liblustreapi.c llapi_lov_dump_user_lmm(), lov_dump_plain_user_lmm(),
// lov_dump_comp_v1(), lov_dump_comp_v1_header(), lov_dump_comp_v1_entry(),
// lov_dump_user_lmm_v1v3(), lov_dump_user_lmm_header(), lov_dump_foreign_lmm(),
// lcme_flags2str(); liblustreapi_layout.c llapi_lov_pattern_string(),
// llapi_layout_flags_string(); lustre/utils/lfs.c lfs_getstripe_internal() (options).

use std::fmt::Write as _;

use super::composite::{Component, CompositeLayout, SubLayout};
use super::foreign::ForeignLayout;
use super::layout::Layout;
use super::ostid::{FID_SEQ_LOV_DEFAULT, seq_prints_decimal};
use super::plain::PlainLayout;
use super::{
    LCME_FL_INIT, LCME_FL_NOSYNC, LOV_MAGIC_COMP_V1, LOV_MAGIC_SPECIFIC, LOV_OFFSET_DEFAULT,
    LOV_PATTERN_F_RELEASED, LOV_PATTERN_MDT, LUSTRE_EOF,
};
use crate::fid::{Fid, alt_hex};

mod names;
mod options;

pub use names::{ctime_utc, flags_string, layout_flags_string, pattern_string};
pub use options::*;

/// Dump flags, as lfs threads them through its printers.
#[derive(Debug, Clone, Copy, Default)]
struct Flags {
    indent: bool,
    skip_objects: bool,
    extension: bool,
}

/// The `lfs getstripe` output for `layout`.
pub fn getstripe(layout: &Layout, options: &GetstripeOptions) -> String {
    let mut options = options.clone();
    if options.verbose == 0 {
        options.verbose = VERBOSE_DEFAULT;
    }
    let mut p = Printer { o: &options, out: String::new() };
    match layout {
        Layout::Plain(plain) if p.has_component_options() => {
            p.composite(&forge_composite(plain, options.directory))
        }
        Layout::Plain(plain) => p.plain(plain, Flags::default()),
        Layout::Composite(composite) => p.composite(composite),
        Layout::Foreign(foreign) => p.foreign(foreign, true),
    }
    p.out
}

/// A plain layout seen as one component over the whole file, as lfs shows it for component
/// options (its magic stays the plain one, so counts print as for a non-composite file).
fn forge_composite(plain: &PlainLayout, directory: bool) -> CompositeLayout {
    let mut sub = plain.clone();
    if directory {
        sub.objects.clear();
    }
    CompositeLayout {
        magic: plain.magic,
        layout_gen: if directory { 0 } else { u32::from(plain.offset_or_gen) },
        flags: 0,
        mirror_count: 0,
        ec_count: 0,
        components: vec![Component {
            flags: if directory { 0 } else { LCME_FL_INIT },
            ..Component::request(0, LUSTRE_EOF, 0, sub)
        }],
    }
}

struct Printer<'a> {
    o: &'a GetstripeOptions,
    out: String,
}

impl Printer<'_> {
    fn has(&self, bits: u32) -> bool {
        self.o.verbose & bits != 0
    }

    /// Whether a label is printed: something besides `bit` was asked for.
    fn labelled(&self, bit: u32) -> bool {
        self.o.verbose & !bit != 0
    }

    fn filters_components(&self) -> bool {
        self.o.component_id.is_some()
            || self.o.component_flags.is_some()
            || self.o.component_start.is_some()
            || self.o.component_end.is_some()
    }

    fn has_component_options(&self) -> bool {
        if self.filters_components() {
            return true;
        }
        if self.o.verbose & !VERBOSE_DETAIL == VERBOSE_DEFAULT {
            return false;
        }
        self.has(VERBOSE_COMP_OPTS)
    }

    /// A single-field query of a composite layout shows only the last instantiated component.
    fn last_instantiated_only(&self) -> bool {
        self.o.verbose & VERBOSE_DEFAULT != VERBOSE_DEFAULT && !self.filters_components()
    }

    fn path_line(&mut self) {
        if let Some(path) = self.o.path.as_deref().filter(|_| self.o.print_path && !self.o.yaml) {
            self.out.push_str(path);
            self.out.push('\n');
        }
    }

    fn composite(&mut self, c: &CompositeLayout) {
        if self.o.print_path && (self.o.verbose != VERBOSE_OBJID || !self.o.directory) {
            self.path_line();
        }
        self.composite_header(c);
        let flags = Flags { indent: true, ..Flags::default() };
        let placements = c.placements();
        if self.last_instantiated_only() {
            let chosen = self.last_instantiated(c);
            if let Some(component) = c.components.get(chosen) {
                let placement = placements.get(chosen).copied();
                self.component(component, placement, Flags { skip_objects: false, ..flags });
            }
            return;
        }
        for (component, placement) in c.components.iter().zip(placements) {
            if !self.selected(component) {
                continue;
            }
            let skip_objects = !component.is_instantiated();
            self.component(component, Some(placement), Flags { skip_objects, ..flags });
        }
    }

    /// The component lfs picks for single-field queries: the last of the leading
    /// instantiated ones, the last component if none is, or the first uninstantiated
    /// extension component for `-z`.
    fn last_instantiated(&self, c: &CompositeLayout) -> usize {
        let count = c.components.len();
        let mut index = count;
        for (i, component) in c.components.iter().enumerate() {
            if component.is_instantiated() {
                continue;
            }
            if self.has(VERBOSE_EXT_SIZE) && !component.is_extension() {
                continue;
            }
            index = if self.has(VERBOSE_EXT_SIZE) { i + 1 } else { i };
            break;
        }
        if index == 0 { count.saturating_sub(1) } else { index - 1 }
    }

    fn selected(&self, component: &Component) -> bool {
        let o = self.o;
        if let Some((set, neg)) = o.component_flags {
            if component.flags & set != set || component.flags & neg != 0 {
                return false;
            }
        }
        if o.component_id.is_some_and(|id| id != component.id) {
            return false;
        }
        if o.component_start.is_some_and(|b| !b.matches(component.start)) {
            return false;
        }
        o.component_end.is_none_or(|b| b.matches(component.end))
    }

    fn composite_header(&mut self, c: &CompositeLayout) {
        let indent = if self.o.yaml { "" } else { "  " };
        let out = &mut self.out;
        if self.o.verbose & VERBOSE_DETAIL != 0 {
            let _ = writeln!(out, "composite_header:");
            let _ = writeln!(out, "  lcm_magic:         0x{:08X}", c.magic);
            let _ = writeln!(out, "  lcm_size:          {}", c.encoded_len());
            let flags = if self.o.directory {
                if c.mirror_count > 0 { "mirrored" } else { "" }
            } else {
                layout_flags_string(c.flags)
            };
            let _ = writeln!(out, "  lcm_flags:         {flags}");
        }
        let composite = c.magic == LOV_MAGIC_COMP_V1;
        let fields = [
            (VERBOSE_GENERATION, "lcm_layout_gen:    ", u64::from(c.layout_gen)),
            (
                VERBOSE_MIRROR_COUNT,
                "lcm_mirror_count:  ",
                if composite { u64::from(c.mirror_count) + 1 } else { 1 },
            ),
            (
                VERBOSE_COMP_COUNT,
                "lcm_entry_count:   ",
                if composite { c.components.len() as u64 } else { 0 },
            ),
        ];
        for (bit, label, value) in fields {
            if self.o.verbose & bit != 0 {
                if self.o.verbose & !bit != 0 {
                    let _ = write!(self.out, "{indent}{label}");
                }
                let _ = writeln!(self.out, "{value}");
            }
        }
        if self.has(VERBOSE_DETAIL) || self.o.yaml {
            self.out.push_str("components:\n");
        }
    }

    fn component(
        &mut self,
        c: &Component,
        placement: Option<super::composite::Placement>,
        flags: Flags,
    ) {
        self.component_entry(c, placement);
        match &c.sub {
            SubLayout::Plain(plain) => {
                let extension = c.is_extension();
                self.plain(plain, Flags { extension, ..flags });
            }
            SubLayout::Foreign(foreign) => self.foreign(foreign, false),
        }
    }

    fn component_entry(&mut self, c: &Component, placement: Option<super::composite::Placement>) {
        let yaml = self.o.yaml;
        let mut separator = "";
        if self.has(VERBOSE_COMP_ID) || yaml {
            if self.has(VERBOSE_DETAIL) || yaml {
                self.out.push_str("  - lcme_id:             ");
            } else if self.labelled(VERBOSE_COMP_ID) {
                self.out.push_str("    lcme_id:             ");
            }
            self.out.push_str(&id_or_na(c.id, c.id));
            separator = "\n";
        }
        if self.has(VERBOSE_MIRROR_ID) {
            self.field(
                separator,
                VERBOSE_MIRROR_ID,
                "    lcme_mirror_id:      ",
                &id_or_na(c.id, u32::from(c.mirror_id())),
            );
            separator = "\n";
        }
        if self.has(VERBOSE_COMP_FLAGS) {
            self.field(
                separator,
                VERBOSE_COMP_FLAGS,
                "    lcme_flags:          ",
                &flags_string(c.flags),
            );
            separator = "\n";
            if c.flags & LCME_FL_NOSYNC != 0 {
                let stamp = if yaml {
                    c.timestamp.to_string()
                } else {
                    format!("'{}'", ctime_utc(c.timestamp))
                };
                self.field(separator, VERBOSE_COMP_FLAGS, "    lcme_timestamp:      ", &stamp);
            }
        }
        if self.has(VERBOSE_COMP_START) {
            self.field(
                separator,
                VERBOSE_COMP_START,
                "    lcme_extent.e_start: ",
                &c.start.to_string(),
            );
            separator = "\n";
        }
        if self.has(VERBOSE_COMP_END) {
            let end = if c.end == LUSTRE_EOF { "EOF".to_string() } else { c.end.to_string() };
            self.field(separator, VERBOSE_COMP_END, "    lcme_extent.e_end:   ", &end);
            separator = "\n";
        }
        self.out.push_str(separator);
        if yaml {
            self.out.push_str("    sub_layout:\n");
        } else if self.has(VERBOSE_DETAIL) {
            let placement = placement.unwrap_or(super::composite::Placement { offset: 0, size: 0 });
            let _ = writeln!(self.out, "    lcme_offset:         {}", placement.offset);
            let _ = writeln!(self.out, "    lcme_size:           {}", placement.size);
            self.out.push_str("    sub_layout:\n");
        }
    }

    fn field(&mut self, separator: &str, bit: u32, label: &str, value: &str) {
        self.out.push_str(separator);
        if self.labelled(bit) {
            self.out.push_str(label);
        }
        self.out.push_str(value);
    }

    fn index(&self, value: u32) -> String {
        if self.o.hex_index {
            alt_hex(u64::from(value))
        } else {
            i32::from_le_bytes(value.to_le_bytes()).to_string()
        }
    }

    fn plain(&mut self, l: &PlainLayout, flags: Flags) {
        self.plain_header(l, flags);
        let o = self.o;
        let dom_or_released = l.is_dom() || l.pattern & LOV_PATTERN_F_RELEASED != 0;
        let shows_objects =
            if o.directory { l.magic == LOV_MAGIC_SPECIFIC } else { !dom_or_released };
        if !flags.skip_objects && self.has(VERBOSE_OBJID) && shows_objects {
            if flags.indent {
                self.out.push_str("      lmm_objects:\n");
            } else if o.yaml {
                self.out.push_str("lmm_objects:\n");
            } else {
                self.out.push_str("\tobdidx\t\t objid\t\t objid\t\t group\n");
            }
            for (i, object) in l.objects.iter().take(usize::from(l.stripe_count)).enumerate() {
                let index = object.ost_index;
                if o.yaml {
                    let _ = writeln!(self.out, "      - l_ost_idx: {}", self.index(index));
                    let _ = writeln!(
                        self.out,
                        "        l_fid:     {}",
                        object.oi.to_fid(index).no_brace()
                    );
                } else if flags.indent {
                    let idx = if o.hex_index {
                        format!("{:>5}", alt_hex(u64::from(index)))
                    } else {
                        format!("{:>3}", i32::from_le_bytes(index.to_le_bytes()))
                    };
                    let _ = writeln!(
                        self.out,
                        "      - {i:>3}: {{ l_ost_idx: {idx}, l_fid: {} }}",
                        object.oi.to_fid(index)
                    );
                } else if o.directory {
                    let _ = writeln!(
                        self.out,
                        "\t{index:>6}\t{:>14}\t{:>13}\t{:>14}",
                        "N/A", "N/A", "N/A"
                    );
                } else {
                    let id = object.oi.id();
                    let group = object.oi.seq();
                    let group = if seq_prints_decimal(group) {
                        format!("{group:>14}")
                    } else {
                        format!("{:>14}", alt_hex(group))
                    };
                    let idx = if o.hex_index {
                        format!("{:>6}", alt_hex(u64::from(index)))
                    } else {
                        format!("{index:>6}")
                    };
                    let _ = writeln!(self.out, "\t{idx}\t{id:>14}\t{:>13}\t{group}", alt_hex(id));
                }
            }
        }
        if !o.yaml {
            self.out.push('\n');
        }
    }

    fn plain_header(&mut self, l: &PlainLayout, flags: Flags) {
        let o = self.o;
        let dir = o.directory;
        let prefix = if dir { "" } else { "lmm_" };
        let space = if flags.indent { "      " } else { "" };
        let dir_separator = if !o.yaml && dir { " " } else { "\n" };
        let mut oi = l.oi;
        if dir && oi.second == FID_SEQ_LOV_DEFAULT {
            oi.second = 0;
            if !flags.indent && self.has(VERBOSE_DETAIL) {
                self.out.push_str("(Default) ");
            }
        }
        if !o.yaml && !flags.indent && o.print_path && (o.verbose != VERBOSE_OBJID || !dir) {
            self.path_line();
        }
        if self.has(VERBOSE_DETAIL) && !dir {
            let _ = writeln!(self.out, "{space}{prefix}magic:         0x{:08X}", l.magic);
            let _ = writeln!(self.out, "{space}{prefix}seq:           {}", alt_hex(oi.second));
            let _ = writeln!(self.out, "{space}{prefix}object_id:     {}", alt_hex(oi.first));
        }
        if self.has(VERBOSE_DETAIL | VERBOSE_DFID) {
            if self.labelled(VERBOSE_DFID) {
                let _ = write!(self.out, "{space}lmm_fid:           ");
            }
            let fid = if dir {
                o.directory_fid
            } else if oi.second == 0 {
                Fid { seq: oi.first, oid: 0, ver: super::ostid::low32(oi.first >> 32) }
            } else {
                Fid {
                    seq: oi.second,
                    oid: super::ostid::low32(oi.first),
                    ver: super::ostid::low32(oi.first >> 32),
                }
            };
            let text = if o.yaml { fid.no_brace() } else { fid.to_string() };
            let _ = writeln!(self.out, "{text}");
        }
        let mut separator = "";
        if self.has(VERBOSE_STRIPE_COUNT) {
            if self.labelled(VERBOSE_STRIPE_COUNT) {
                let _ = write!(self.out, "{space}{prefix}stripe_count:  ");
            }
            let count = if dir && !o.raw && l.stripe_count == 0 && l.pattern & LOV_PATTERN_MDT == 0
            {
                i64::from(o.defaults.stripe_count)
            } else if flags.extension {
                0
            } else {
                i64::from(l.signed_stripe_count())
            };
            let _ = write!(self.out, "{count}");
            separator = dir_separator;
        }
        let size_field = if flags.extension { VERBOSE_EXT_SIZE } else { VERBOSE_STRIPE_SIZE };
        if self.has(size_field) {
            self.out.push_str(separator);
            if flags.extension && self.labelled(VERBOSE_EXT_SIZE) {
                let _ = write!(self.out, "{space}{prefix}extension_size: ");
            }
            if !flags.extension && self.labelled(VERBOSE_STRIPE_SIZE) {
                let _ = write!(self.out, "{space}{prefix}stripe_size:   ");
            }
            let size = if dir && !o.raw && l.stripe_size == 0 {
                u64::from(o.defaults.stripe_size)
            } else if flags.extension {
                u64::from(l.stripe_size) * super::SEL_UNIT_SIZE
            } else {
                u64::from(l.stripe_size)
            };
            let _ = write!(self.out, "{size}");
            separator = dir_separator;
        }
        if self.has(VERBOSE_PATTERN) {
            self.out.push_str(separator);
            if self.labelled(VERBOSE_PATTERN) {
                let _ = write!(self.out, "{space}{prefix}pattern:       ");
            }
            self.out.push_str(&pattern_string(l.pattern));
            separator = dir_separator;
        }
        if self.has(VERBOSE_GENERATION) && !dir {
            self.out.push_str(separator);
            if self.labelled(VERBOSE_GENERATION) {
                let _ = write!(self.out, "{space}{prefix}layout_gen:    ");
            }
            let generation = if flags.skip_objects { 0 } else { l.offset_or_gen };
            let _ = write!(self.out, "{generation}");
            separator = "\n";
        }
        if self.has(VERBOSE_STRIPE_OFFSET) {
            self.out.push_str(separator);
            let dom = l.is_dom();
            if self.labelled(VERBOSE_STRIPE_OFFSET) {
                let label = if dom { "mdt_index:     " } else { "stripe_offset: " };
                let _ = write!(self.out, "{space}{prefix}{label}");
            }
            let requested = dir || flags.skip_objects || dom;
            let value = match l.objects.first() {
                Some(object) if !requested => self.index(object.ost_index),
                _ if l.offset_or_gen == LOV_OFFSET_DEFAULT => "-1".into(),
                _ => self.index(u32::from(l.offset_or_gen)),
            };
            self.out.push_str(&value);
            separator = dir_separator;
        }
        let pool = l.pool.as_str();
        if self.has(VERBOSE_POOL) && !pool.is_empty() && (pool != "ignore" || o.raw) {
            self.out.push_str(separator);
            if self.labelled(VERBOSE_POOL) {
                let _ = write!(self.out, "{space}{prefix}pool:          ");
            }
            self.out.push_str(pool);
            separator = dir_separator;
        }
        if !separator.is_empty() {
            self.out.push('\n');
        }
    }

    /// `top`: the whole layout (with its path line), not a component's sub-layout.
    fn foreign(&mut self, f: &ForeignLayout, top: bool) {
        if top && !self.o.yaml && self.o.print_path {
            self.path_line();
        }
        if self.has(VERBOSE_DETAIL) {
            let _ = writeln!(self.out, "lfm_magic:         0x{:08X}", super::LOV_MAGIC_FOREIGN);
            let _ = writeln!(self.out, "lfm_length:          {}", f.value.len());
            let kind = match f.foreign_type {
                0 => "none",
                0xDA05 => "daos",
                _ => "unknown",
            };
            let _ = writeln!(self.out, "lfm_type:          0x{:08X} ({kind})", f.foreign_type);
            let _ = writeln!(self.out, "lfm_flags:          0x{:08X}", f.flags);
        }
        let value = f.value.split(|&b| b == 0).next().unwrap_or(&[]);
        let _ = writeln!(self.out, "lfm_value:     '{}'", String::from_utf8_lossy(value));
        self.out.push('\n');
    }
}

/// The id (or what is derived from it), `N/A` for templates (id 0).
fn id_or_na(id: u32, value: u32) -> String {
    if id == 0 { "N/A".into() } else { value.to_string() }
}

#[cfg(test)]
mod tests;
