//! The command line of `lnet_legacy2yaml`, read as Python's argparse reads it, so that
//! scripts written for the tool (option abbreviations, `-ifile`, `--opt=value`, `--`,
//! `--default-hop` with or without its value) behave the same, with argparse's messages
//! and exit status 2.
//!
//! lustre: lustre/scripts/lnet_legacy2yaml `main()` (the options); CPython
//! Lib/argparse.py (how they are read, the usage text, for an 80-column screen).

use super::python;

/// The options, as the tool's `args`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Args {
    /// The positional inline string.
    pub inline: Option<String>,
    pub ip2nets: Vec<String>,
    pub routes: Vec<String>,
    pub networks: Vec<String>,
    pub modprobe: Vec<String>,
    pub output: Option<String>,
    /// `--default-hop [HOP]`: the integer as Python prints it; `1` without a value.
    pub default_hop: Option<String>,
}

/// What the command line asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Parsed {
    Run(Args),
    /// `-h`/`--help`: the text for stdout, exit status 0.
    Help(String),
    /// A usage error: the text for stderr, exit status 2.
    Error(String),
}

/// Exit status of a usage error (argparse's).
pub const USAGE_STATUS: u8 = 2;

/// The options: short name, long name, whether they take a file.
const OPTIONS: [(char, &str); 6] = [
    ('h', "--help"),
    ('i', "--ip2nets"),
    ('r', "--routes"),
    ('n', "--networks"),
    ('m', "--modprobe"),
    ('o', "--output"),
];
const DEFAULT_HOP: &str = "--default-hop";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Opt {
    Short(char),
    DefaultHop,
}

impl Opt {
    fn label(self) -> String {
        match self {
            Self::Short(c) => {
                let long = OPTIONS.iter().find(|(s, _)| *s == c).map_or("", |(_, l)| l);
                format!("-{c}/{long}")
            }
            Self::DefaultHop => DEFAULT_HOP.to_string(),
        }
    }
}

/// Reads the arguments after the program name; `prog` is how usage texts name the tool.
pub fn parse(prog: &str, args: &[String]) -> Parsed {
    let reader = Reader { args, parsed: Args::default(), extras: Vec::new() };
    match reader.read() {
        Ok(Outcome::Help) => Parsed::Help(help(prog)),
        Ok(Outcome::Done(parsed)) => Parsed::Run(parsed),
        Err(message) => Parsed::Error(format!("{}{prog}: error: {message}\n", usage(prog))),
    }
}

enum Outcome {
    Done(Args),
    Help,
}

struct Reader<'a> {
    args: &'a [String],
    parsed: Args,
    extras: Vec<String>,
}

/// How argparse sees one argument: an option (with a value written into it) or a value.
enum Kind {
    Option(Opt, Option<String>),
    Unknown,
    Value,
}

impl Reader<'_> {
    fn read(mut self) -> Result<Outcome, String> {
        let mut index = 0;
        // The first `--` makes every later argument a value.
        let mut after_marker = false;
        // `inline` takes one value, and the first `--` when it comes right before or after
        // that value; a `--` it does not take is an unrecognized argument.
        let mut inline_taken = false;
        let mut last_was_inline = false;
        let mut help = false;
        while let Some(arg) = self.args.get(index) {
            index += 1;
            let was_inline = std::mem::take(&mut last_was_inline);
            if after_marker {
                self.value(arg, &mut inline_taken, &mut last_was_inline);
                continue;
            }
            if arg == "--" {
                after_marker = true;
                if !inline_taken {
                    inline_taken = true;
                    if let Some(next) = self.args.get(index) {
                        index += 1;
                        self.parsed.inline = Some(next.clone());
                    }
                } else if !was_inline {
                    self.extras.push(arg.clone());
                }
                continue;
            }
            match classify(arg)? {
                Kind::Value => self.value(arg, &mut inline_taken, &mut last_was_inline),
                Kind::Unknown => self.extras.push(arg.clone()),
                Kind::Option(Opt::Short('h'), Some(attached)) => {
                    // `-hX`: X must be more short options, which run after the help.
                    let next = attached.chars().next();
                    if arg.starts_with("--") || !next.is_some_and(short_option) {
                        return Err(format!(
                            "argument -h/--help: ignored explicit argument {}",
                            python::repr(&attached)
                        ));
                    }
                    help = true;
                }
                Kind::Option(Opt::Short('h'), None) => help = true,
                Kind::Option(opt @ Opt::Short(_), attached) => {
                    let value = match attached {
                        Some(value) => value,
                        None => match self.args.get(index).filter(takes_as_value) {
                            Some(next) => {
                                index += 1;
                                next.clone()
                            }
                            None => {
                                return Err(format!(
                                    "argument {}: expected one argument",
                                    opt.label()
                                ));
                            }
                        },
                    };
                    self.file_option(opt, value);
                }
                Kind::Option(Opt::DefaultHop, attached) => {
                    let value = match attached {
                        Some(value) => Some(value),
                        None => match self.args.get(index).filter(takes_as_value) {
                            Some(next) => {
                                index += 1;
                                Some(next.clone())
                            }
                            None => None,
                        },
                    };
                    self.parsed.default_hop = Some(match value {
                        None => "1".to_string(),
                        Some(text) => python::int(&text).ok_or_else(|| {
                            format!(
                                "argument --default-hop: invalid int value: {}",
                                python::repr(&text)
                            )
                        })?,
                    });
                }
            }
            if help {
                return Ok(Outcome::Help);
            }
        }
        if !self.extras.is_empty() {
            return Err(format!("unrecognized arguments: {}", self.extras.join(" ")));
        }
        Ok(Outcome::Done(self.parsed))
    }

    /// A value: the inline string if that is still free, else an unrecognized argument.
    fn value(&mut self, arg: &str, inline_taken: &mut bool, last_was_inline: &mut bool) {
        if *inline_taken {
            self.extras.push(arg.to_string());
        } else {
            *inline_taken = true;
            *last_was_inline = true;
            self.parsed.inline = Some(arg.to_string());
        }
    }

    fn file_option(&mut self, opt: Opt, value: String) {
        match opt {
            Opt::Short('i') => self.parsed.ip2nets.push(value),
            Opt::Short('r') => self.parsed.routes.push(value),
            Opt::Short('n') => self.parsed.networks.push(value),
            Opt::Short('m') => self.parsed.modprobe.push(value),
            Opt::Short('o') => self.parsed.output = Some(value),
            Opt::Short(_) | Opt::DefaultHop => {}
        }
    }
}

fn short_option(c: char) -> bool {
    OPTIONS.iter().any(|(short, _)| *short == c)
}

/// argparse's `_parse_optional()`: which option an argument names, if any.
fn classify(arg: &str) -> Result<Kind, String> {
    if !arg.starts_with('-') || arg.len() == 1 {
        return Ok(Kind::Value);
    }
    if let Some(opt) = exact(arg) {
        return Ok(Kind::Option(opt, None));
    }
    if let Some((name, value)) = arg.split_once('=') {
        if let Some(opt) = exact(name) {
            return Ok(Kind::Option(opt, Some(value.to_string())));
        }
    }
    if let Some(long) = arg.strip_prefix("--") {
        // A unique prefix of a long option (every long option starts with its own letter).
        let (name, value) = match long.split_once('=') {
            Some((name, value)) => (name, Some(value.to_string())),
            None => (long, None),
        };
        let mut matches = long_options().filter(|(_, full)| full[2..].starts_with(name));
        if let (Some((opt, _)), None) = (matches.next(), matches.next()) {
            return Ok(Kind::Option(opt, value));
        }
    } else if let Some(c) = arg.chars().nth(1).filter(|c| short_option(*c)) {
        // `-ifile`: a short option with its value attached.
        return Ok(Kind::Option(Opt::Short(c), Some(arg[2..].to_string())));
    }
    if is_negative_number(arg) || arg.contains(' ') {
        return Ok(Kind::Value);
    }
    Ok(Kind::Unknown)
}

fn exact(name: &str) -> Option<Opt> {
    long_options().find(|(_, full)| *full == name).map(|(opt, _)| opt).or_else(|| {
        let mut chars = name.chars();
        match (chars.next(), chars.next(), chars.next()) {
            (Some('-'), Some(c), None) if short_option(c) => Some(Opt::Short(c)),
            _ => None,
        }
    })
}

fn long_options() -> impl Iterator<Item = (Opt, &'static str)> {
    OPTIONS
        .iter()
        .map(|(short, long)| (Opt::Short(*short), *long))
        .chain(std::iter::once((Opt::DefaultHop, DEFAULT_HOP)))
}

/// Whether the argument after an option is taken as its value: anything argparse does not
/// read as an option.
fn takes_as_value(arg: &&String) -> bool {
    arg.as_str() != "--" && matches!(classify(arg), Ok(Kind::Value))
}

/// `^-\d+$|^-\d*\.\d+$`.
fn is_negative_number(arg: &str) -> bool {
    let Some(rest) = arg.strip_prefix('-') else { return false };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    match rest.split_once('.') {
        None => digits(rest),
        Some((whole, fraction)) => {
            (whole.is_empty() || whole.bytes().all(|b| b.is_ascii_digit())) && digits(fraction)
        }
    }
}

/// Width argparse wraps to: an 80-column screen less 2.
const TEXT_WIDTH: usize = 78;

/// The `usage:` text, wrapped as argparse wraps it, with its newline.
pub fn usage(prog: &str) -> String {
    const PREFIX: &str = "usage: ";
    let options = [
        "[-h]",
        "[-i FILE]",
        "[-r FILE]",
        "[-n FILE]",
        "[-m FILE]",
        "[-o FILE]",
        "[--default-hop [HOP]]",
    ];
    let positionals = ["[inline]"];
    let one_line = format!("{prog} {} {}", options.join(" "), positionals.join(" "));
    if PREFIX.len() + one_line.chars().count() <= TEXT_WIDTH {
        return format!("{PREFIX}{one_line}\n");
    }
    let prog_len = prog.chars().count();
    let lines = if (PREFIX.len() + prog_len) as f64 <= 0.75 * TEXT_WIDTH as f64 {
        let indent = " ".repeat(PREFIX.len() + prog_len + 1);
        let mut parts = vec![prog];
        parts.extend(options);
        let mut lines = wrap(&parts, &indent, Some(PREFIX));
        lines.extend(wrap(&positionals, &indent, None));
        lines
    } else {
        let indent = " ".repeat(PREFIX.len());
        let mut lines = vec![prog.to_string()];
        lines.extend(wrap(&options, &indent, None));
        lines.extend(wrap(&positionals, &indent, None));
        lines
    };
    format!("{PREFIX}{}\n", lines.join("\n"))
}

/// argparse's `get_lines()`: parts packed into lines of [`TEXT_WIDTH`], each line after the
/// first indented; with `prefix`, the first line is not indented (the prefix stands there).
fn wrap(parts: &[&str], indent: &str, prefix: Option<&str>) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line: Vec<&str> = Vec::new();
    let mut length = prefix.map_or(indent.len(), str::len) - 1;
    for part in parts {
        let part_len = part.chars().count();
        if length + 1 + part_len > TEXT_WIDTH && !line.is_empty() {
            lines.push(format!("{indent}{}", line.join(" ")));
            line.clear();
            length = indent.len() - 1;
        }
        line.push(part);
        length += part_len + 1;
    }
    if !line.is_empty() {
        lines.push(format!("{indent}{}", line.join(" ")));
    }
    if prefix.is_some() {
        if let Some(first) = lines.first_mut() {
            *first = first[indent.len()..].to_string();
        }
    }
    lines
}

/// `-h`: the usage, then what each argument is, in argparse's layout.
fn help(prog: &str) -> String {
    format!(
        "{}\n\
Convert the legacy ip2nets=, routes= and networks= syntaxes of the lnet module\n\
to the YAML that lnetctl import and ulnetd --config read\n\
\n\
positional arguments:\n\
\x20 inline                A legacy string or an options lnet line (else stdin).\n\
\n\
options:\n\
\x20 -h, --help            show this help message and exit\n\
\x20 -i FILE, --ip2nets FILE\n\
\x20                       File of ip2nets rules (may be repeated).\n\
\x20 -r FILE, --routes FILE\n\
\x20                       File of routes (may be repeated).\n\
\x20 -n FILE, --networks FILE\n\
\x20                       File of networks entries (may be repeated).\n\
\x20 -m FILE, --modprobe FILE\n\
\x20                       modprobe.d file whose options lnet lines are read (may be\n\
\x20                       repeated).\n\
\x20 -o FILE, --output FILE\n\
\x20                       Write the YAML to FILE instead of stdout.\n\
\x20 --default-hop [HOP]   Give routes without a hop count hop HOP (1 when HOP is\n\
\x20                       omitted).\n",
        usage(prog)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Parsed {
        let args: Vec<String> = args.iter().map(ToString::to_string).collect();
        parse("lnet_legacy2yaml", &args)
    }

    fn ok(args: &[&str]) -> Args {
        match run(args) {
            Parsed::Run(args) => args,
            other => panic!("{args:?}: {other:?}"),
        }
    }

    fn error(args: &[&str]) -> String {
        match run(args) {
            Parsed::Error(text) => text.lines().last().unwrap().to_string(),
            other => panic!("{args:?}: {other:?}"),
        }
    }

    #[test]
    fn options_as_argparse_reads_them() {
        let args = ok(&["-i", "a", "-ib", "--ip2nets=c", "-i=d", "--ip", "e", "x"]);
        assert_eq!(args.ip2nets, ["a", "b", "c", "d", "e"]);
        assert_eq!(args.inline.as_deref(), Some("x"));
        assert_eq!(ok(&["--default-hop"]).default_hop.as_deref(), Some("1"));
        assert_eq!(ok(&["--default-hop", "3", "x"]).default_hop.as_deref(), Some("3"));
        assert_eq!(ok(&["--def", "+3", "x"]).default_hop.as_deref(), Some("3"));
        assert_eq!(ok(&["--default-hop=07"]).default_hop.as_deref(), Some("7"));
        // A negative number is a value, an option is not.
        assert_eq!(ok(&["--default-hop", "-1"]).default_hop.as_deref(), Some("-1"));
        assert_eq!(ok(&["--default-hop", "-i", "f"]).default_hop.as_deref(), Some("1"));
        // After `--`, everything is positional; `--` alone leaves no inline string.
        assert_eq!(ok(&["--", "-i"]).inline.as_deref(), Some("-i"));
        assert_eq!(ok(&["--"]).inline, None);
        assert_eq!(ok(&["--", "--"]).inline.as_deref(), Some("--"));
        assert_eq!(ok(&["x", "--"]).inline.as_deref(), Some("x"));
        assert_eq!(ok(&["-"]).inline.as_deref(), Some("-"));
        assert_eq!(ok(&["-tcp 1.2.3.4"]).inline.as_deref(), Some("-tcp 1.2.3.4"));
        assert_eq!(ok(&["-o", "a", "-o", "b"]).output.as_deref(), Some("b"));
    }

    #[test]
    fn usage_errors_are_argparses() {
        assert_eq!(error(&["a", "b"]), "lnet_legacy2yaml: error: unrecognized arguments: b");
        // A `--` the inline string does not take is one more unrecognized argument.
        assert_eq!(
            error(&["a", "b", "--", "c"]),
            "lnet_legacy2yaml: error: unrecognized arguments: b -- c"
        );
        assert_eq!(error(&["a", "--", "c"]), "lnet_legacy2yaml: error: unrecognized arguments: c");
        assert_eq!(
            error(&["--zz", "-x"]),
            "lnet_legacy2yaml: error: unrecognized arguments: --zz -x"
        );
        assert_eq!(
            error(&["-i"]),
            "lnet_legacy2yaml: error: argument -i/--ip2nets: expected one argument"
        );
        assert_eq!(
            error(&["-o", "-i"]),
            "lnet_legacy2yaml: error: argument -o/--output: expected one argument"
        );
        assert_eq!(
            error(&["--default-hop", "x"]),
            "lnet_legacy2yaml: error: argument --default-hop: invalid int value: 'x'"
        );
        assert_eq!(
            error(&["--default-hop="]),
            "lnet_legacy2yaml: error: argument --default-hop: invalid int value: ''"
        );
        assert_eq!(
            error(&["-hx"]),
            "lnet_legacy2yaml: error: argument -h/--help: ignored explicit argument 'x'"
        );
        assert!(matches!(run(&["-hi", "x"]), Parsed::Help(_)));
        assert!(matches!(run(&["-h", "-i"]), Parsed::Help(_)));
    }

    #[test]
    fn usage_wraps_as_argparse_does() {
        assert_eq!(
            usage("lnet_legacy2yaml"),
            "usage: lnet_legacy2yaml [-h] [-i FILE] [-r FILE] [-n FILE] [-m FILE] [-o FILE]\n\
             \x20                       [--default-hop [HOP]]\n\
             \x20                       [inline]\n"
        );
        assert_eq!(
            usage("ulnet-legacy2yaml"),
            "usage: ulnet-legacy2yaml [-h] [-i FILE] [-r FILE] [-n FILE] [-m FILE]\n\
             \x20                        [-o FILE] [--default-hop [HOP]]\n\
             \x20                        [inline]\n"
        );
        assert_eq!(
            usage("a-very-long-program-name-for-legacy2yaml-conversions"),
            "usage: a-very-long-program-name-for-legacy2yaml-conversions\n\
             \x20      [-h] [-i FILE] [-r FILE] [-n FILE] [-m FILE] [-o FILE]\n\
             \x20      [--default-hop [HOP]]\n\
             \x20      [inline]\n"
        );
        assert_eq!(usage("x").lines().count(), 3);
    }
}
