//! `lfs getdirstripe` output, byte for byte as Lustre 2.17's lfs prints it (docs/protocol/
//! dirlayouts.md §5), for a layout read from an xattr rather than from a mounted directory.
//! What lfs learns from the mount (the directory's FID, each stripe's MDT) the caller supplies.
// lustre: lustre/utils/liblustreapi.c lmv_dump_user_lmm(), lmv_dump_foreign_lmm();
// lustre/utils/lfs.c lfs_getdirstripe()

use std::io::Write;

use thiserror::Error;

use super::{
    DirLayout, Fid, ForeignLmv, HashTypeField, LMV_MAGIC_V1, LMV_USER_MAGIC, LmvMdsMd, LmvUserMd,
    MdsMdKind,
};

/// Which fields to print: lfs's selector options. [`Fields::DEFAULT`] is lfs's choice when no
/// selector is given; a lone selector prints its bare value, several print `name: value`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fields(u32);

impl Fields {
    /// `-c`/`-T`/`--mdt-count`.
    pub const STRIPE_COUNT: Self = Self(0x1);
    /// `-i`/`-m`/`--mdt-index`.
    pub const STRIPE_OFFSET: Self = Self(0x4);
    /// Part of the default: the pool of a default layout.
    pub const POOL: Self = Self(0x8);
    /// Added by `-v`: `lmv_fid` and `lmv_magic`.
    pub const DETAIL: Self = Self(0x10);
    /// Part of the default: the stripe table.
    pub const OBJECTS: Self = Self(0x20);
    /// `-F`/`--fid`: the directory's FID.
    pub const FID: Self = Self(0x4000);
    /// `-H`/`--mdt-hash`.
    pub const HASH_TYPE: Self = Self(0x8000);
    /// `-X`/`--max-inherit` (default layouts only).
    pub const MAX_INHERIT: Self = Self(0x8_0000);
    /// `--max-inherit-rr` (default layouts only).
    pub const MAX_INHERIT_RR: Self = Self(0x10_0000);
    /// lfs's `VERBOSE_DEFAULT` as far as directories go; it also holds file-layout bits, so
    /// it is never a lone selector.
    pub const DEFAULT: Self = Self(0x1 | 0x2 | 0x4 | 0x8 | 0x20 | 0x8000 | 0x8_0000 | 0x10_0000);
    /// `-v`: the default plus detail.
    pub const VERBOSE: Self = Self(Self::DEFAULT.0 | Self::DETAIL.0);
    /// Nothing selected yet; lfs then uses [`Self::DEFAULT`].
    pub const NONE: Self = Self(0);

    /// Both sets of fields.
    pub fn with(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    fn has(self, field: Self) -> bool {
        self.0 & field.0 != 0
    }

    /// Whether anything besides `field` is selected: then lfs labels the value.
    fn others(self, field: Self) -> bool {
        self.0 & !field.0 != 0
    }
}

/// How to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    pub fields: Fields,
    /// `-y`/`--yaml`.
    pub yaml: bool,
    /// `--hex-idx`: MDT indices in hex.
    pub hex_idx: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self { fields: Fields::DEFAULT, yaml: false, hex_idx: false }
    }
}

/// What lfs would learn from the mounted directory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Context {
    /// The directory's own FID, printed by `-F`, `-v`, and YAML of an unstriped directory.
    pub dir_fid: Option<Fid>,
    /// The MDT of each stripe, in stripe order (lfs asks the FID location database).
    pub stripe_mdts: Vec<u32>,
}

/// Why a layout cannot be printed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PrintError {
    /// The selected output shows the directory's FID, which an xattr does not hold.
    #[error("this output shows the directory's FID: give it")]
    MissingDirFid,
    /// No MDT index was given for this stripe.
    #[error("no MDT index for stripe {0}")]
    MissingStripeMdt(usize),
    /// A stripe's own LMV ([`MdsMdKind::Stripe`]): lfs shows only the master's.
    #[error("this is one stripe's LMV; lfs getdirstripe shows the master's")]
    StripeLmv,
}

/// `lfs getdirstripe` output for `layout`.
pub fn print(
    layout: &DirLayout,
    context: &Context,
    options: Options,
) -> Result<Vec<u8>, PrintError> {
    match layout {
        DirLayout::Striped(md) => print_striped(md, context, options),
        DirLayout::Default(md) => print_default(md, context.dir_fid, options),
        DirLayout::Foreign(md) => Ok(print_foreign(md, options)),
    }
}

/// Output for a master LMV, as lfs shows it after the client turned it into an
/// `lmv_user_md` with magic `LMV_MAGIC_V1`, no pool, and each stripe's MDT; an insane FID
/// ([`Fid::is_sane`]) is shown as the client leaves it, zero with MDT 0.
// lustre: lustre/llite/dir.c ll_dir_ioctl() LL_IOC_LMV_GETSTRIPE
pub fn print_striped(
    md: &LmvMdsMd,
    context: &Context,
    options: Options,
) -> Result<Vec<u8>, PrintError> {
    if md.kind == MdsMdKind::Stripe {
        return Err(PrintError::StripeLmv);
    }
    let objects = md
        .stripe_fids
        .iter()
        .enumerate()
        .map(|(i, fid)| match (fid.is_sane(), context.stripe_mdts.get(i)) {
            (false, _) => Ok((0, Fid::default())),
            (true, Some(&mdt)) => Ok((mdt, *fid)),
            (true, None) => Err(PrintError::MissingStripeMdt(i)),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let view = View {
        magic: LMV_MAGIC_V1,
        stripe_count: i32::try_from(objects.len()).unwrap_or(i32::MAX),
        stripe_offset: md.master_mdt_index,
        hash_type: md.hash_type,
        max_inherit: 0,
        max_inherit_rr: 0,
        pool: &[],
        objects,
    };
    view.print(context.dir_fid, options)
}

/// Output for a default layout (`lfs getdirstripe -D`).
pub fn print_default(
    md: &LmvUserMd,
    dir_fid: Option<Fid>,
    options: Options,
) -> Result<Vec<u8>, PrintError> {
    let view = View {
        magic: LMV_USER_MAGIC,
        stripe_count: md.stripe_count,
        stripe_offset: md.stripe_offset,
        hash_type: md.hash_type,
        max_inherit: md.max_inherit,
        max_inherit_rr: md.max_inherit_rr,
        pool: md.pool_name.as_bytes(),
        objects: Vec::new(),
    };
    view.print(dir_fid, options)
}

/// Output for a foreign LMV: its value, and with `-v` its header. The value stops at its first
/// NUL, as C's `%.*s` does.
// lustre: lustre/utils/liblustreapi.c lmv_dump_foreign_lmm()
pub fn print_foreign(md: &ForeignLmv, options: Options) -> Vec<u8> {
    let mut out = Vec::new();
    if options.fields.has(Fields::DETAIL) {
        let _ = writeln!(out, "lfm_magic:         0x{:08X}", super::LMV_MAGIC_FOREIGN);
        let _ = writeln!(out, "lfm_length:          {}", md.value.len());
        let _ = write!(out, "lfm_type:          0x{:08X}", md.foreign_type);
        match foreign_type_name(md.foreign_type) {
            Some(name) => {
                let _ = writeln!(out, " ({name})");
            }
            None => out.extend_from_slice(b" (unknown)\n"),
        }
        let _ = writeln!(out, "lfm_flags:          0x{:08X}", md.flags);
    }
    let value = md.value.split(|&b| b == 0).next().unwrap_or(&[]);
    out.extend_from_slice(b"lfm_value:     '");
    out.extend_from_slice(value);
    out.extend_from_slice(b"'\n\n");
    out
}

/// `lu_foreign_types[]` names.
// lustre: lustre/utils/liblustreapi.c lu_foreign_types[]
fn foreign_type_name(foreign_type: u32) -> Option<&'static str> {
    Some(match foreign_type {
        0 => "none",
        1 => "posix",
        2 => "pccrw",
        3 => "pccro",
        4 => "S3",
        0xda05 => "symlink",
        _ => return None,
    })
}

/// The `lmv_user_md` lfs prints from.
struct View<'a> {
    magic: u32,
    stripe_count: i32,
    stripe_offset: u32,
    hash_type: HashTypeField,
    max_inherit: u8,
    max_inherit_rr: u8,
    pool: &'a [u8],
    /// (MDT index, FID) per stripe.
    objects: Vec<(u32, Fid)>,
}

impl View<'_> {
    fn print(&self, dir_fid: Option<Fid>, options: Options) -> Result<Vec<u8>, PrintError> {
        let fields = if options.fields == Fields::NONE { Fields::DEFAULT } else { options.fields };
        let is_default = self.magic == LMV_USER_MAGIC;
        let yaml = options.yaml;
        let shows_dir_fid = fields.has(Fields::DETAIL)
            || fields.has(Fields::FID)
            || (yaml && fields.has(Fields::OBJECTS) && !is_default && self.stripe_count == 0);
        let dir_fid = match (shows_dir_fid, dir_fid) {
            (true, None) => return Err(PrintError::MissingDirFid),
            (_, fid) => fid.unwrap_or_default(),
        };
        let mut out = Line { out: Vec::new(), separator: "", yaml };
        if fields.has(Fields::DETAIL) || fields.has(Fields::FID) {
            if fields.others(Fields::FID) {
                out.label("lmv_fid: ", "          ");
            }
            out.value(format_args!("{}", dir_fid.no_brace()));
        }
        if fields.has(Fields::DETAIL) {
            out.next_field();
            out.label("lmv_magic: ", "        ");
            out.value(format_args!("{:#x}", self.magic));
        }
        if fields.has(Fields::STRIPE_COUNT) {
            out.next_field();
            if fields.others(Fields::STRIPE_COUNT) {
                out.label("lmv_stripe_count: ", " ");
            }
            out.value(format_args!("{}", self.stripe_count));
        }
        if fields.has(Fields::STRIPE_OFFSET) {
            out.next_field();
            if fields.others(Fields::STRIPE_OFFSET) {
                out.label("lmv_stripe_offset: ", "");
            }
            // lfs prints the offset as a C int: 0xffffffff is -1 in decimal.
            let offset = self.stripe_offset as i32;
            if options.hex_idx {
                out.value(format_args!("{}", c_alternate_hex(self.stripe_offset)));
            } else {
                out.value(format_args!("{offset}"));
            }
        }
        if fields.has(Fields::HASH_TYPE) {
            out.next_field();
            if fields.others(Fields::HASH_TYPE) {
                out.label("lmv_hash_type: ", "    ");
            }
            out.value(format_args!("{}", self.hash_type));
        }
        if fields.has(Fields::MAX_INHERIT) && is_default {
            out.next_field();
            if fields.others(Fields::MAX_INHERIT) {
                out.label("lmv_max_inherit: ", "  ");
            }
            // 0 is unlimited (-1), 255 none (0).
            let shown = match self.max_inherit {
                0 => -1,
                255 => 0,
                depth => i32::from(depth),
            };
            out.value(format_args!("{shown}"));
        }
        if fields.has(Fields::MAX_INHERIT_RR) && is_default {
            out.next_field();
            if fields.others(Fields::MAX_INHERIT_RR) {
                out.label("lmv_max_inherit_rr: ", "");
            }
            // 255 is unlimited (-1), 0 none.
            let shown = match self.max_inherit_rr {
                255 => -1,
                depth => i32::from(depth),
            };
            out.value(format_args!("{shown}"));
        }
        if fields.has(Fields::POOL) && !self.pool.is_empty() {
            out.next_field();
            if fields.others(Fields::POOL) {
                let prefix = if is_default { "(Default)" } else { "" };
                out.out.extend_from_slice(prefix.as_bytes());
                out.label("lmv_pool: ", "          ");
            }
            out.out.extend_from_slice(self.pool);
            out.out.extend_from_slice(b"  ");
        }
        let mut out = out.out;
        if fields.has(Fields::OBJECTS) && !is_default {
            self.print_objects(&mut out, dir_fid, options);
        } else {
            out.push(b'\n');
        }
        Ok(out)
    }

    fn print_objects(&self, out: &mut Vec<u8>, dir_fid: Fid, options: Options) {
        out.push(b'\n');
        if options.yaml {
            out.extend_from_slice(b"lmv_objects:\n");
        } else if self.stripe_count > 0 {
            out.extend_from_slice(b"mdtidx\t\t FID[seq:oid:ver]\n");
        }
        let index = |mdt: u32| match (options.hex_idx, options.yaml) {
            (true, true) => c_alternate_hex(mdt),
            (true, false) => format!("{:>6}", c_alternate_hex(mdt)),
            (false, true) => (mdt as i32).to_string(),
            (false, false) => format!("{mdt:6}"),
        };
        let row = |out: &mut Vec<u8>, mdt: u32, fid: Fid| {
            let _ = if options.yaml {
                write!(
                    out,
                    "      - l_mdt_idx: {}\n        l_fid:     {}\n",
                    index(mdt),
                    fid.no_brace()
                )
            } else {
                writeln!(out, "{}\t\t {fid}\t\t", index(mdt))
            };
        };
        if self.stripe_count == 0 && options.yaml {
            row(out, self.stripe_offset, dir_fid);
        }
        for &(mdt, fid) in &self.objects {
            row(out, mdt, fid);
        }
    }
}

/// Fields joined as lfs joins them: one space in text, a newline in YAML.
struct Line {
    out: Vec<u8>,
    separator: &'static str,
    yaml: bool,
}

impl Line {
    fn next_field(&mut self) {
        self.out.extend_from_slice(self.separator.as_bytes());
    }

    /// `name`, then in YAML the padding that aligns values.
    fn label(&mut self, name: &str, yaml_padding: &str) {
        self.out.extend_from_slice(name.as_bytes());
        if self.yaml {
            self.out.extend_from_slice(yaml_padding.as_bytes());
        }
    }

    fn value(&mut self, value: std::fmt::Arguments<'_>) {
        let _ = self.out.write_fmt(value);
        self.separator = if self.yaml { "\n" } else { " " };
    }
}

/// C's `%#x`: `0x` before non-zero values only.
fn c_alternate_hex(value: u32) -> String {
    if value == 0 { "0".to_owned() } else { format!("{value:#x}") }
}

#[cfg(test)]
mod tests;
