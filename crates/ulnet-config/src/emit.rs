//! A YAML tree and two emitters reproducing lnetctl's output byte for byte.
//!
//! lnetctl prints YAML through two unrelated printers (docs/protocol/cli.md §0.1):
//!
//! - **Dialect N**: libyaml's block emitter (`yaml_emitter_dump`/`yaml_emitter_emit`), used
//!   with `best_indent = 6` for the netlink-backed commands and with libyaml's default indent 2
//!   for `ping`/`discover`. [`Yaml::to_string_n`] and [`Yaml::to_string_libyaml`] reimplement
//!   the parts of libyaml 0.2.5's emitter that those outputs exercise: block mappings and
//!   sequences (indentless sequences under mapping keys), `[]`/`{}` for empty collections,
//!   scalar analysis and style choice, quoting, escaping, line folding at column 80, the
//!   non-specific `!` tag lnetctl's hand-built quoted events get, and explicit `---`/`...`.
//! - **Dialect C**: cYAML's printer (`lnet/utils/lnetconfig/cyaml.c` `print_value()` and
//!   friends), 4 spaces per level with sequence items' later keys at +2. [`Yaml::to_string_c`]
//!   reproduces it, including its quirk of dropping the `- ` of a sequence item whose first
//!   key holds a sequence. cYAML never quotes: a scalar's text is printed as is, so the callers
//!   put literal quotes in the text where lnetctl does (error `descr` strings).
//!
//! lustre: lnet/utils/lnetconfig/cyaml.c; lnet/utils/lnetctl.c `yaml_lnet_print_error()`;
//! libyaml: src/emitter.c (0.2.5, the behaviour of the shipped library).

use std::fmt::Write as _;

/// A YAML node: scalar, block sequence or block mapping. Mapping keys keep the caller's order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Yaml {
    Scalar(Scalar),
    Seq(Vec<Yaml>),
    Map(Vec<(String, Yaml)>),
}

/// A scalar with the presentation the YAML source asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scalar {
    pub text: String,
    /// The requested style; dialect N falls back to a quoted style where libyaml must.
    pub style: ScalarStyle,
    /// libyaml's `quoted_implicit`. `true` for scalars of a loaded document (what `net show`,
    /// `peer show`, `route show` print); `false` for the scalar events lnetctl builds itself
    /// (`yaml_scalar_event_initialize(.., 1, 0, ..)`), for which libyaml writes a `!` tag in
    /// front of any quoted form, e.g. `descr: ! "Network is down"`.
    pub quoted_implicit: bool,
}

/// Scalar presentation styles (libyaml's plain, single- and double-quoted).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScalarStyle {
    Plain,
    SingleQuoted,
    DoubleQuoted,
}

/// Document framing and indentation for the libyaml emitter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LibyamlStyle {
    /// `yaml_emitter_set_indent()`; libyaml only honours 2..=9 and uses 2 otherwise.
    pub indent: usize,
    /// Write `---` before the document (`implicit = 0` on DOCUMENT-START).
    pub explicit_start: bool,
    /// Write `...` after the document (`implicit = 0` on DOCUMENT-END).
    pub explicit_end: bool,
}

impl LibyamlStyle {
    /// lnetctl's `LNET_DEFAULT_INDENT` (lustre: lnet/utils/lnetconfig/liblnetconfig.h), with
    /// the implicit document of `yaml_emitter_dump()` on a loaded netlink reply.
    pub const DIALECT_N: Self = Self { indent: 6, explicit_start: false, explicit_end: false };
    /// libyaml's default indent, used by `ping`/`discover` (lustre: lnetctl.c
    /// `yaml_lnet_ping_display()` never calls `yaml_emitter_set_indent()`).
    pub const DEFAULT_INDENT: Self = Self { indent: 2, explicit_start: false, explicit_end: false };
    /// `yaml_lnet_print_error()`: indent 6 with explicit `---` and `...`.
    pub const ERROR_N: Self = Self { indent: 6, explicit_start: true, explicit_end: true };
}

/// libyaml's default `best_width`; plain and quoted scalars fold at spaces past this column.
pub const LIBYAML_BEST_WIDTH: usize = 80;

/// libyaml refuses to write a key longer than this as a simple `key:` and uses `? key`.
const LIBYAML_MAX_SIMPLE_KEY_LEN: usize = 128;

impl Scalar {
    /// A scalar of a loaded document in the given style.
    pub fn new(text: impl Into<String>, style: ScalarStyle) -> Self {
        Self { text: text.into(), style, quoted_implicit: true }
    }

    /// A scalar event built by lnetctl itself (`plain_implicit = 1, quoted_implicit = 0`).
    pub fn event(text: impl Into<String>, style: ScalarStyle) -> Self {
        Self { text: text.into(), style, quoted_implicit: false }
    }
}

impl Yaml {
    /// A plain scalar (libyaml quotes it if it cannot be plain).
    pub fn plain(text: impl Into<String>) -> Self {
        Self::Scalar(Scalar::new(text, ScalarStyle::Plain))
    }

    /// A double-quoted scalar, e.g. `CPT: "[0,1]"`.
    pub fn double_quoted(text: impl Into<String>) -> Self {
        Self::Scalar(Scalar::new(text, ScalarStyle::DoubleQuoted))
    }

    /// An integer as a plain scalar.
    pub fn int(value: impl Into<i128>) -> Self {
        Self::plain(value.into().to_string())
    }

    /// A boolean the way the netlink bridge prints flags: `true`/`false`.
    pub fn bool(value: bool) -> Self {
        Self::plain(if value { "true" } else { "false" })
    }

    /// A number as cYAML prints it (`cYAML_create_number()` takes a `double`): integers that
    /// fit a C `int` print exactly, larger ones through `%.0f` of the double, so values above
    /// 2^53 are rounded as lnetctl rounds them.
    pub fn c_number(value: impl Into<f64>) -> Self {
        Self::plain(cyaml_number_text(value.into()))
    }

    /// A mapping from `(key, value)` pairs, in order.
    pub fn map<K: Into<String>>(entries: impl IntoIterator<Item = (K, Yaml)>) -> Self {
        Self::Map(entries.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }

    /// A sequence.
    pub fn seq(items: impl IntoIterator<Item = Yaml>) -> Self {
        Self::Seq(items.into_iter().collect())
    }

    /// Dialect N: libyaml with indent 6, implicit document (`net show`, `peer show`, ...).
    pub fn to_string_n(&self) -> String {
        self.to_string_libyaml(LibyamlStyle::DIALECT_N)
    }

    /// The libyaml block emitter with explicit framing options.
    pub fn to_string_libyaml(&self, style: LibyamlStyle) -> String {
        let mut emitter = Libyaml::new(style);
        emitter.document(self);
        emitter.out
    }

    /// Dialect C: the cYAML printer. The root is printed as cYAML's unnamed root object, so a
    /// root mapping's keys start in column 0.
    pub fn to_string_c(&self) -> String {
        let mut out = String::new();
        cyaml_print(
            &mut out,
            None,
            self,
            CyamlPosition { level: 0, first_in_seq: false, extra: 0 },
        );
        out
    }
}

/// Formats a number like cYAML's `print_number()`: `%d` when the value is an integer in C
/// `int` range, otherwise `%.0f` for integral values below 1e60, `%e` for tiny or huge ones and
/// `%f` for the rest.
pub fn cyaml_number_text(value: f64) -> String {
    let int_range = f64::from(i32::MIN)..=f64::from(i32::MAX);
    if value.fract() == 0.0 && int_range.contains(&value) {
        // Exact: the value is integral and inside i32.
        return format!("{}", value as i64);
    }
    if value.is_finite() && value.fract() == 0.0 && value.abs() < 1.0e60 {
        return format!("{value:.0}");
    }
    if value.abs() < 1.0e-6 || value.abs() > 1.0e9 {
        return c_exponent(value);
    }
    format!("{value:.6}")
}

/// C's `%e`: one digit, six decimals, a sign and at least two exponent digits.
fn c_exponent(value: f64) -> String {
    let text = format!("{value:.6e}");
    match text.split_once('e') {
        Some((mantissa, exponent)) => {
            let (sign, digits) = match exponent.strip_prefix('-') {
                Some(digits) => ('-', digits),
                None => ('+', exponent),
            };
            format!("{mantissa}e{sign}{digits:0>2}")
        }
        None => text,
    }
}

// ---------------------------------------------------------------------------------------------
// Dialect C: cYAML's printer.

/// cYAML's `struct cYAML_print_info`.
#[derive(Clone, Copy)]
struct CyamlPosition {
    level: usize,
    /// `array_first_elem`: this node starts a sequence item, so it carries the `- `.
    first_in_seq: bool,
    /// `extra_ind`: +2 for the later keys of a sequence item.
    extra: usize,
}

const CYAML_INDENT: usize = 4;
const CYAML_EXTRA_INDENT: usize = 2;

/// lustre: cyaml.c `print_value()`, `print_string()`, `print_object()`, `print_array()`.
fn cyaml_print(out: &mut String, name: Option<&str>, node: &Yaml, at: CyamlPosition) {
    let base = CYAML_INDENT * at.level;
    match node {
        Yaml::Scalar(scalar) => {
            let indent = if at.first_in_seq {
                pad(out, base);
                out.push_str("- ");
                0
            } else {
                base + at.extra
            };
            pad(out, indent);
            let text = cyaml_scalar_text(scalar);
            if let Some(name) = name {
                out.push_str(name);
                out.push_str(": ");
            }
            // Continuation lines of a multi-line string line up after "key: ".
            let continuation = base + at.extra + name.map_or(0, |n| n.len() + 2);
            for (i, line) in text.split('\n').enumerate() {
                if i > 0 {
                    pad(out, continuation);
                }
                out.push_str(line);
                out.push('\n');
            }
        }
        Yaml::Map(entries) => {
            if let Some(name) = name {
                if at.first_in_seq {
                    pad(out, base);
                    out.push_str("- ");
                } else {
                    pad(out, base + at.extra);
                }
                out.push_str(name);
                out.push_str(":\n");
            }
            let mut child = CyamlPosition {
                level: if name.is_some() { at.level + 1 } else { at.level },
                first_in_seq: name.is_none() && at.first_in_seq,
                extra: if at.first_in_seq { CYAML_EXTRA_INDENT } else { at.extra },
            };
            for (key, value) in entries {
                cyaml_print(out, Some(key), value, child);
                child.first_in_seq = false;
            }
        }
        Yaml::Seq(items) => {
            if let Some(name) = name {
                // cYAML ignores `array_first_elem` here: a sequence that opens a sequence item
                // loses its "- " (print_array()); reproduced as lnetctl prints it.
                pad(out, base + at.extra);
                out.push_str(name);
                out.push_str(":\n");
            }
            let child = CyamlPosition {
                level: if name.is_some() { at.level + 1 } else { at.level },
                first_in_seq: true,
                extra: CYAML_EXTRA_INDENT,
            };
            for item in items {
                cyaml_print(out, None, item, child);
            }
        }
    }
}

fn cyaml_scalar_text(scalar: &Scalar) -> String {
    match scalar.style {
        ScalarStyle::Plain => scalar.text.clone(),
        ScalarStyle::SingleQuoted => format!("'{}'", scalar.text),
        ScalarStyle::DoubleQuoted => format!("\"{}\"", scalar.text),
    }
}

fn pad(out: &mut String, columns: usize) {
    out.extend(std::iter::repeat_n(' ', columns));
}

// ---------------------------------------------------------------------------------------------
// Dialect N: libyaml's emitter.

/// Where a node sits, as libyaml's `root/sequence/mapping/simple_key` context flags.
#[derive(Clone, Copy, Default)]
struct Context {
    mapping: bool,
    simple_key: bool,
}

/// libyaml's emitter state restricted to what block output needs.
struct Libyaml {
    out: String,
    style: LibyamlStyle,
    best_indent: usize,
    /// Current indentation; `None` is libyaml's -1 (before the root node).
    indent: Option<usize>,
    indents: Vec<Option<usize>>,
    column: usize,
    /// The last character written is whitespace (or nothing was written on this line).
    whitespace: bool,
    /// Only indentation has been written on this line so far.
    indention: bool,
}

/// The outcome of libyaml's `yaml_emitter_analyze_scalar()`.
struct Analysis {
    multiline: bool,
    block_plain_allowed: bool,
    single_quoted_allowed: bool,
}

impl Libyaml {
    fn new(style: LibyamlStyle) -> Self {
        // lustre/libyaml: yaml_emitter_emit_stream_start() resets out-of-range indents to 2.
        let best_indent = if (2..=9).contains(&style.indent) { style.indent } else { 2 };
        Self {
            out: String::new(),
            style,
            best_indent,
            indent: None,
            indents: Vec::new(),
            column: 0,
            whitespace: true,
            indention: true,
        }
    }

    fn document(&mut self, root: &Yaml) {
        if self.style.explicit_start {
            self.write_indent();
            self.write_indicator("---", true, false, false);
        }
        self.node(root, Context::default());
        self.write_indent();
        if self.style.explicit_end {
            self.write_indicator("...", true, false, false);
            self.write_indent();
        }
    }

    fn node(&mut self, node: &Yaml, context: Context) {
        match node {
            Yaml::Scalar(scalar) => self.scalar(scalar, context),
            Yaml::Seq(items) if items.is_empty() => self.empty_flow("[", "]"),
            Yaml::Map(entries) if entries.is_empty() => self.empty_flow("{", "}"),
            Yaml::Seq(items) => self.block_sequence(items, context),
            Yaml::Map(entries) => self.block_mapping(entries),
        }
    }

    /// libyaml writes empty collections in flow style whatever was asked.
    fn empty_flow(&mut self, open: &str, close: &str) {
        self.write_indicator(open, true, true, false);
        self.increase_indent(true, false);
        self.pop_indent();
        self.write_indicator(close, false, false, false);
    }

    fn block_sequence(&mut self, items: &[Yaml], context: Context) {
        // A sequence that is a mapping value and starts on the key's line is indentless.
        self.increase_indent(false, context.mapping && !self.indention);
        for item in items {
            self.write_indent();
            self.write_indicator("-", true, false, true);
            self.node(item, Context::default());
        }
        self.pop_indent();
    }

    fn block_mapping(&mut self, entries: &[(String, Yaml)]) {
        self.increase_indent(false, false);
        for (key, value) in entries {
            self.write_indent();
            let key = Scalar::new(key.as_str(), ScalarStyle::Plain);
            let value_context = Context { mapping: true, simple_key: false };
            if Self::is_simple_key(&key) {
                self.scalar(&key, Context { mapping: true, simple_key: true });
                self.write_indicator(":", false, false, false);
            } else {
                self.write_indicator("?", true, false, true);
                self.scalar(&key, value_context);
                self.write_indent();
                self.write_indicator(":", true, false, true);
            }
            self.node(value, value_context);
        }
        self.pop_indent();
    }

    /// libyaml: `yaml_emitter_check_simple_key()` for a scalar key.
    fn is_simple_key(key: &Scalar) -> bool {
        // libyaml counts bytes here.
        !analyze(&key.text).multiline && key.text.len() <= LIBYAML_MAX_SIMPLE_KEY_LEN
    }

    fn scalar(&mut self, scalar: &Scalar, context: Context) {
        let analysis = analyze(&scalar.text);
        let style = Self::select_style(scalar, &analysis, context);
        if !scalar.quoted_implicit && style != ScalarStyle::Plain {
            // The non-specific tag libyaml adds when a quoted scalar may not be implicit.
            if !self.whitespace {
                self.put(' ');
            }
            self.put('!');
            self.whitespace = false;
            self.indention = false;
        }
        self.increase_indent(true, false);
        let allow_breaks = !context.simple_key;
        match style {
            ScalarStyle::Plain => self.write_plain(&scalar.text, allow_breaks),
            ScalarStyle::SingleQuoted => self.write_single_quoted(&scalar.text, allow_breaks),
            ScalarStyle::DoubleQuoted => self.write_double_quoted(&scalar.text, allow_breaks),
        }
        self.pop_indent();
    }

    /// libyaml: `yaml_emitter_select_scalar_style()`.
    fn select_style(scalar: &Scalar, analysis: &Analysis, context: Context) -> ScalarStyle {
        let mut style = scalar.style;
        if context.simple_key && analysis.multiline {
            style = ScalarStyle::DoubleQuoted;
        }
        // Scalars are only ever written in block context here (flow is used for empty
        // collections alone), so the flow rules of libyaml never apply.
        if style == ScalarStyle::Plain
            && (!analysis.block_plain_allowed || (scalar.text.is_empty() && context.simple_key))
        {
            style = ScalarStyle::SingleQuoted;
        }
        if style == ScalarStyle::SingleQuoted && !analysis.single_quoted_allowed {
            style = ScalarStyle::DoubleQuoted;
        }
        style
    }

    fn increase_indent(&mut self, flow: bool, indentless: bool) {
        self.indents.push(self.indent);
        self.indent = match self.indent {
            None => Some(if flow { self.best_indent } else { 0 }),
            Some(indent) if !indentless => Some(indent + self.best_indent),
            Some(indent) => Some(indent),
        };
    }

    fn pop_indent(&mut self) {
        // Pushes and pops are paired by construction in this file.
        self.indent = self.indents.pop().unwrap_or(None);
    }

    fn put(&mut self, c: char) {
        self.out.push(c);
        self.column += 1;
    }

    fn put_break(&mut self) {
        self.out.push('\n');
        self.column = 0;
    }

    /// libyaml: `yaml_emitter_write_indent()`.
    fn write_indent(&mut self) {
        let indent = self.indent.unwrap_or(0);
        if !self.indention || self.column > indent || (self.column == indent && !self.whitespace) {
            self.put_break();
        }
        while self.column < indent {
            self.put(' ');
        }
        self.whitespace = true;
        self.indention = true;
    }

    /// libyaml: `yaml_emitter_write_indicator()`.
    fn write_indicator(
        &mut self,
        indicator: &str,
        need_whitespace: bool,
        is_whitespace: bool,
        is_indention: bool,
    ) {
        if need_whitespace && !self.whitespace {
            self.put(' ');
        }
        for c in indicator.chars() {
            self.put(c);
        }
        self.whitespace = is_whitespace;
        self.indention = self.indention && is_indention;
    }

    /// libyaml: `yaml_emitter_write_plain_scalar()` (0.2.5: no space before an empty value).
    fn write_plain(&mut self, text: &str, allow_breaks: bool) {
        if !self.whitespace && !text.is_empty() {
            self.put(' ');
        }
        let chars: Vec<char> = text.chars().collect();
        let mut spaces = false;
        let mut breaks = false;
        for (i, &c) in chars.iter().enumerate() {
            if c == ' ' {
                let next_is_space = chars.get(i + 1) == Some(&' ');
                if allow_breaks && !spaces && self.column > LIBYAML_BEST_WIDTH && !next_is_space {
                    self.write_indent();
                } else {
                    self.put(c);
                }
                spaces = true;
            } else if is_break(c) {
                if !breaks && c == '\n' {
                    self.put_break();
                }
                self.write_break(c);
                self.indention = true;
                breaks = true;
            } else {
                if breaks {
                    self.write_indent();
                }
                self.put(c);
                self.indention = false;
                spaces = false;
                breaks = false;
            }
        }
        self.whitespace = false;
        self.indention = false;
    }

    /// libyaml: `yaml_emitter_write_single_quoted_scalar()`.
    fn write_single_quoted(&mut self, text: &str, allow_breaks: bool) {
        self.write_indicator("'", true, false, false);
        let chars: Vec<char> = text.chars().collect();
        let last = chars.len().saturating_sub(1);
        let mut spaces = false;
        let mut breaks = false;
        for (i, &c) in chars.iter().enumerate() {
            if c == ' ' {
                let next_is_space = chars.get(i + 1) == Some(&' ');
                if allow_breaks
                    && !spaces
                    && self.column > LIBYAML_BEST_WIDTH
                    && i != 0
                    && i != last
                    && !next_is_space
                {
                    self.write_indent();
                } else {
                    self.put(c);
                }
                spaces = true;
            } else if is_break(c) {
                if !breaks && c == '\n' {
                    self.put_break();
                }
                self.write_break(c);
                self.indention = true;
                breaks = true;
            } else {
                if breaks {
                    self.write_indent();
                }
                if c == '\'' {
                    self.put('\'');
                }
                self.put(c);
                self.indention = false;
                spaces = false;
                breaks = false;
            }
        }
        if breaks {
            self.write_indent();
        }
        self.write_indicator("'", false, false, false);
        self.whitespace = false;
        self.indention = false;
    }

    /// libyaml: `yaml_emitter_write_double_quoted_scalar()` (ASCII output: `unicode` is off).
    fn write_double_quoted(&mut self, text: &str, allow_breaks: bool) {
        self.write_indicator("\"", true, false, false);
        let chars: Vec<char> = text.chars().collect();
        let last = chars.len().saturating_sub(1);
        let mut spaces = false;
        for (i, &c) in chars.iter().enumerate() {
            if !is_printable_ascii(c) || is_break(c) || c == '"' || c == '\\' || c == '\u{feff}' {
                self.put('\\');
                match c {
                    '\0' => self.put('0'),
                    '\u{7}' => self.put('a'),
                    '\u{8}' => self.put('b'),
                    '\t' => self.put('t'),
                    '\n' => self.put('n'),
                    '\u{b}' => self.put('v'),
                    '\u{c}' => self.put('f'),
                    '\r' => self.put('r'),
                    '\u{1b}' => self.put('e'),
                    '"' => self.put('"'),
                    '\\' => self.put('\\'),
                    '\u{85}' => self.put('N'),
                    '\u{a0}' => self.put('_'),
                    '\u{2028}' => self.put('L'),
                    '\u{2029}' => self.put('P'),
                    _ => {
                        let value = u32::from(c);
                        let (prefix, width) = match value {
                            0..=0xff => ('x', 2),
                            0x100..=0xffff => ('u', 4),
                            _ => ('U', 8),
                        };
                        self.put(prefix);
                        let mut hex = String::new();
                        // Writing into a String cannot fail.
                        let _ = write!(hex, "{value:0width$X}");
                        for h in hex.chars() {
                            self.put(h);
                        }
                    }
                }
                spaces = false;
            } else if c == ' ' {
                if allow_breaks
                    && !spaces
                    && self.column > LIBYAML_BEST_WIDTH
                    && i != 0
                    && i != last
                {
                    self.write_indent();
                    if chars.get(i + 1) == Some(&' ') {
                        self.put('\\');
                    }
                } else {
                    self.put(c);
                }
                spaces = true;
            } else {
                self.put(c);
                spaces = false;
            }
        }
        self.write_indicator("\"", false, false, false);
        self.whitespace = false;
        self.indention = false;
    }

    /// libyaml: `WRITE_BREAK`: a line feed becomes a newline, other breaks are copied.
    fn write_break(&mut self, c: char) {
        if c == '\n' {
            self.put_break();
        } else {
            self.out.push(c);
            self.column = 0;
        }
    }
}

fn is_break(c: char) -> bool {
    matches!(c, '\r' | '\n' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

fn is_blank_or_end(c: Option<&char>) -> bool {
    match c {
        None => true,
        Some(&c) => c == ' ' || c == '\t' || is_break(c),
    }
}

/// Printable and ASCII: with `unicode` off libyaml treats anything else as special.
fn is_printable_ascii(c: char) -> bool {
    c == '\n' || (' '..='~').contains(&c)
}

/// libyaml: `yaml_emitter_analyze_scalar()`.
fn analyze(text: &str) -> Analysis {
    if text.is_empty() {
        return Analysis {
            multiline: false,
            block_plain_allowed: true,
            single_quoted_allowed: true,
        };
    }
    let chars: Vec<char> = text.chars().collect();
    let mut block_indicators = text.starts_with("---") || text.starts_with("...");
    let mut line_breaks = false;
    let mut special_characters = false;
    let mut leading_space = false;
    let mut leading_break = false;
    let mut trailing_space = false;
    let mut trailing_break = false;
    let mut break_space = false;
    let mut space_break = false;
    let mut preceded_by_whitespace = true;
    let mut previous_space = false;
    let mut previous_break = false;
    let last = chars.len() - 1;

    for (i, &c) in chars.iter().enumerate() {
        let followed_by_whitespace = is_blank_or_end(chars.get(i + 1));
        if i == 0 {
            if matches!(
                c,
                '#' | ','
                    | '['
                    | ']'
                    | '{'
                    | '}'
                    | '&'
                    | '*'
                    | '!'
                    | '|'
                    | '>'
                    | '\''
                    | '"'
                    | '%'
                    | '@'
                    | '`'
            ) {
                block_indicators = true;
            }
            if (c == '?' || c == ':' || c == '-') && followed_by_whitespace {
                block_indicators = true;
            }
        } else if (c == ':' && followed_by_whitespace) || (c == '#' && preceded_by_whitespace) {
            block_indicators = true;
        }
        if !is_printable_ascii(c) {
            special_characters = true;
        }
        if is_break(c) {
            line_breaks = true;
        }
        if c == ' ' {
            leading_space |= i == 0;
            trailing_space |= i == last;
            break_space |= previous_break;
            previous_space = true;
            previous_break = false;
        } else if is_break(c) {
            leading_break |= i == 0;
            trailing_break |= i == last;
            space_break |= previous_space;
            previous_space = false;
            previous_break = true;
        } else {
            previous_space = false;
            previous_break = false;
        }
        preceded_by_whitespace = c == ' ' || c == '\t' || is_break(c);
    }

    let quotes_needed = break_space || space_break || special_characters;
    Analysis {
        multiline: line_breaks,
        block_plain_allowed: !(leading_space
            || leading_break
            || trailing_space
            || trailing_break
            || line_breaks
            || quotes_needed
            || block_indicators),
        single_quoted_allowed: !quotes_needed,
    }
}

#[cfg(test)]
mod tests;
