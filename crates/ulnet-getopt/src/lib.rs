//! GNU `getopt_long()`, as the handlers of lnetctl and lst call it (`ulnetctl` and `ulst`).
//!
//! lnetctl's option handling is glibc's: arguments are permuted so options may come anywhere
//! (non-options end up last, in order), `--opt=value` and `--opt value`, unique prefixes of
//! long options (`--ver` for `--verbose`; two prefixes that differ in argument kind or value
//! are ambiguous), bundled short options (`-ab`), `-xVALUE`, optional arguments that only
//! attach (`-v2`, `--verbose=2`), and `--` ending options. Diagnostics have glibc's exact
//! texts and name `argv[0]`, which for lnetctl is the subcommand word (`show: unrecognized
//! option '--foo'`). clap cannot be bent to this: it has no permutation of this kind, its
//! prefix matching and ambiguity rules differ, and its messages are its own.
//!
//! lustre: lnet/utils/lnetctl.c (every `jt_*()` handler); the behaviour reproduced is glibc's
//! posix/getopt.c (`_getopt_internal_r()`, `process_long_option()`, `exchange()`), versions
//! 2.26 and later.

/// Whether a long option takes an argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HasArg {
    No,
    Required,
    /// Only `--name=value` gives it one.
    Optional,
}

/// One `struct option`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LongOpt {
    pub name: &'static str,
    pub has_arg: HasArg,
    /// What `getopt_long()` returns for it.
    pub val: char,
}

impl LongOpt {
    pub const fn new(name: &'static str, has_arg: HasArg, val: char) -> Self {
        Self { name, has_arg, val }
    }
}

/// One result of [`Getopt::next`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Opt {
    /// An option; `arg` is `optarg`.
    Found { val: char, arg: Option<String> },
    /// getopt's `'?'`: the option is unknown, ambiguous, lacks its argument or has one it
    /// does not take. `message` is the diagnostic glibc prints (when errors are printed).
    Error { kind: ErrorKind, message: Option<String> },
}

/// Why getopt returned `'?'`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    UnknownShort(char),
    UnknownLong(String),
    Ambiguous(String),
    MissingArgument(String),
    UnexpectedArgument(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ordering {
    /// GNU default: permute.
    Permute,
    /// `POSIXLY_CORRECT` or a leading `+`: stop at the first non-option.
    RequireOrder,
    /// A leading `-`: non-options are returned as the argument of option `'\u{1}'`.
    ReturnInOrder,
}

/// A `getopt_long()` session over one argument vector (`optind = 0` restarts one in C).
#[derive(Debug)]
pub struct Getopt {
    /// The arguments; permuted in place as options are found, as glibc does.
    pub argv: Vec<String>,
    /// Index of the next element to scan; after the last option, the first non-option.
    /// Handlers may advance it to consume an argument (lnetctl's `-v N`).
    pub optind: usize,
    /// glibc's `opterr`.
    pub print_errors: bool,
    shorts: &'static str,
    longs: &'static [LongOpt],
    ordering: Ordering,
    /// The unscanned rest of a short-option cluster.
    nextchar: String,
    first_nonopt: usize,
    last_nonopt: usize,
}

impl Getopt {
    /// A session over `argv` (element 0 is the command name, used in messages) with glibc's
    /// option string syntax for `shorts`.
    pub fn new(argv: Vec<String>, shorts: &'static str, longs: &'static [LongOpt]) -> Self {
        let posixly_correct = std::env::var_os("POSIXLY_CORRECT").is_some();
        Self::with_posixly_correct(argv, shorts, longs, posixly_correct)
    }

    /// As [`Getopt::new`] with the `POSIXLY_CORRECT` environment given explicitly.
    pub fn with_posixly_correct(
        argv: Vec<String>,
        shorts: &'static str,
        longs: &'static [LongOpt],
        posixly_correct: bool,
    ) -> Self {
        // The first byte is checked to be ASCII before slicing past it.
        let (ordering, shorts) = match shorts.as_bytes().first() {
            Some(b'-') => (Ordering::ReturnInOrder, &shorts[1..]),
            Some(b'+') => (Ordering::RequireOrder, &shorts[1..]),
            _ if posixly_correct => (Ordering::RequireOrder, shorts),
            _ => (Ordering::Permute, shorts),
        };
        let print_errors = !shorts.starts_with(':');
        Self {
            argv,
            optind: 1,
            print_errors,
            shorts,
            longs,
            ordering,
            nextchar: String::new(),
            first_nonopt: 1,
            last_nonopt: 1,
        }
    }

    pub fn argc(&self) -> usize {
        self.argv.len()
    }

    /// The operands: what is left once options are exhausted (`argv[optind..]`).
    pub fn operands(&self) -> &[String] {
        self.argv.get(self.optind..).unwrap_or_default()
    }

    /// The element at `index`, or "" past the end.
    pub fn arg(&self, index: usize) -> &str {
        self.argv.get(index).map_or("", String::as_str)
    }

    /// The next option, or `None` when options are exhausted (`-1`); `optind` then indexes the
    /// first non-option.
    #[allow(clippy::should_implement_trait)] // Not an iterator: optind/argv are read between calls.
    pub fn next(&mut self) -> Option<Opt> {
        let argc = self.argc();
        if self.optind > argc {
            self.optind = argc;
        }
        if self.nextchar.is_empty() {
            if self.last_nonopt > self.optind {
                self.last_nonopt = self.optind;
            }
            if self.first_nonopt > self.optind {
                self.first_nonopt = self.optind;
            }
            if self.ordering == Ordering::Permute {
                if self.first_nonopt != self.last_nonopt && self.last_nonopt != self.optind {
                    self.exchange();
                } else if self.last_nonopt != self.optind {
                    self.first_nonopt = self.optind;
                }
                while self.optind < argc && self.is_nonoption(self.optind) {
                    self.optind += 1;
                }
                self.last_nonopt = self.optind;
            }
            if self.optind != argc && self.arg(self.optind) == "--" {
                self.optind += 1;
                if self.first_nonopt != self.last_nonopt && self.last_nonopt != self.optind {
                    self.exchange();
                } else if self.first_nonopt == self.last_nonopt {
                    self.first_nonopt = self.optind;
                }
                self.last_nonopt = argc;
                self.optind = argc;
            }
            if self.optind == argc {
                if self.first_nonopt != self.last_nonopt {
                    self.optind = self.first_nonopt;
                }
                return None;
            }
            if self.is_nonoption(self.optind) {
                if self.ordering == Ordering::RequireOrder {
                    return None;
                }
                let arg = self.arg(self.optind).to_string();
                self.optind += 1;
                return Some(Opt::Found { val: '\u{1}', arg: Some(arg) });
            }
            let element = self.arg(self.optind).to_string();
            if let Some(long) = element.strip_prefix("--") {
                return Some(self.long_option(long));
            }
            // A non-option is not "-" alone, so element has at least one char after '-'.
            self.nextchar = element.get(1..).unwrap_or_default().to_string();
        }
        Some(self.short_option())
    }

    fn is_nonoption(&self, index: usize) -> bool {
        let arg = self.arg(index);
        !arg.starts_with('-') || arg.len() == 1
    }

    /// Moves the options just scanned (`last_nonopt..optind`) before the non-options skipped
    /// earlier (`first_nonopt..last_nonopt`), keeping both in order.
    fn exchange(&mut self) {
        let (first, last, optind) = (self.first_nonopt, self.last_nonopt, self.optind);
        if let Some(window) = self.argv.get_mut(first..optind) {
            window.rotate_left(last - first);
        }
        self.first_nonopt += optind - last;
        self.last_nonopt = optind;
    }

    fn short_option(&mut self) -> Opt {
        let mut chars = self.nextchar.chars();
        // next() only calls this with a non-empty cluster.
        let c = chars.next().unwrap_or('?');
        let rest: String = chars.collect();
        self.nextchar = rest;
        if self.nextchar.is_empty() {
            self.optind += 1;
        }
        let spec = self.shorts.char_indices().find(|&(_, s)| s == c && c != ':' && c != ';');
        let Some((at, _)) = spec else {
            let message = self.diagnostic(format!("invalid option -- '{c}'"));
            return Opt::Error { kind: ErrorKind::UnknownShort(c), message };
        };
        // `at` is the char's boundary from char_indices, so the slice starts on a boundary.
        let after = &self.shorts[at + c.len_utf8()..];
        if !after.starts_with(':') {
            return Opt::Found { val: c, arg: None };
        }
        let attached = std::mem::take(&mut self.nextchar);
        if after.starts_with("::") {
            if attached.is_empty() {
                return Opt::Found { val: c, arg: None };
            }
            self.optind += 1;
            return Opt::Found { val: c, arg: Some(attached) };
        }
        if !attached.is_empty() {
            self.optind += 1;
            return Opt::Found { val: c, arg: Some(attached) };
        }
        if self.optind == self.argc() {
            let message = self.diagnostic(format!("option requires an argument -- '{c}'"));
            return Opt::Error { kind: ErrorKind::MissingArgument(c.to_string()), message };
        }
        let arg = self.arg(self.optind).to_string();
        self.optind += 1;
        Opt::Found { val: c, arg: Some(arg) }
    }

    /// `text` is the element after "--".
    fn long_option(&mut self, text: &str) -> Opt {
        let (name, value) = match text.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (text, None),
        };
        let found = match self.longs.iter().find(|option| option.name == name) {
            Some(exact) => *exact,
            None => {
                let candidates: Vec<&LongOpt> =
                    self.longs.iter().filter(|option| option.name.starts_with(name)).collect();
                let Some(&&first) = candidates.first() else {
                    self.optind += 1;
                    let message = self.diagnostic(format!("unrecognized option '--{text}'"));
                    return Opt::Error { kind: ErrorKind::UnknownLong(text.to_string()), message };
                };
                // Prefixes of several options are fine when they all mean the same thing.
                let differs =
                    |option: &&&LongOpt| option.has_arg != first.has_arg || option.val != first.val;
                if candidates.iter().skip(1).any(|option| differs(&option)) {
                    self.optind += 1;
                    let possibilities: String = candidates
                        .iter()
                        .enumerate()
                        .filter(|(i, option)| *i == 0 || differs(option))
                        .map(|(_, option)| format!(" '--{}'", option.name))
                        .collect();
                    let message = self.diagnostic(format!(
                        "option '--{text}' is ambiguous; possibilities:{possibilities}"
                    ));
                    return Opt::Error { kind: ErrorKind::Ambiguous(text.to_string()), message };
                }
                first
            }
        };
        self.optind += 1;
        let arg = match (found.has_arg, value) {
            (HasArg::No, Some(_)) => {
                let message =
                    self.diagnostic(format!("option '--{}' doesn't allow an argument", found.name));
                return Opt::Error {
                    kind: ErrorKind::UnexpectedArgument(found.name.to_string()),
                    message,
                };
            }
            (_, Some(value)) => Some(value.to_string()),
            (HasArg::Required, None) => {
                if self.optind >= self.argc() {
                    let message =
                        self.diagnostic(format!("option '--{}' requires an argument", found.name));
                    return Opt::Error {
                        kind: ErrorKind::MissingArgument(found.name.to_string()),
                        message,
                    };
                }
                let arg = self.arg(self.optind).to_string();
                self.optind += 1;
                Some(arg)
            }
            (HasArg::No | HasArg::Optional, None) => None,
        };
        Opt::Found { val: found.val, arg }
    }

    fn diagnostic(&self, text: String) -> Option<String> {
        self.print_errors.then(|| format!("{}: {text}\n", self.arg(0)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LONGS: &[LongOpt] = &[
        LongOpt::new("net", HasArg::Required, 'n'),
        LongOpt::new("nid", HasArg::Required, 'N'),
        LongOpt::new("verbose", HasArg::Optional, 'v'),
        LongOpt::new("hop", HasArg::Required, 'c'),
        LongOpt::new("hop-count", HasArg::Required, 'c'),
        LongOpt::new("all", HasArg::No, 'a'),
    ];

    fn args(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    /// Every result until -1, then the final argv and optind.
    fn run(words: &[&str], shorts: &'static str) -> (Vec<Opt>, Vec<String>, usize) {
        let mut getopt = Getopt::with_posixly_correct(args(words), shorts, LONGS, false);
        let mut found = Vec::new();
        while let Some(opt) = getopt.next() {
            found.push(opt);
        }
        (found, getopt.argv, getopt.optind)
    }

    fn ok(val: char, arg: Option<&str>) -> Opt {
        Opt::Found { val, arg: arg.map(str::to_string) }
    }

    fn error_message(opt: &Opt) -> &str {
        match opt {
            Opt::Error { message: Some(message), .. } => message,
            other => panic!("expected an error, got {other:?}"),
        }
    }

    #[test]
    fn options_anywhere_and_non_options_permuted_last() {
        let (found, argv, optind) =
            run(&["show", "a", "--net", "tcp", "b", "-n", "o2ib", "c"], "n:v");
        assert_eq!(found, vec![ok('n', Some("tcp")), ok('n', Some("o2ib"))]);
        assert_eq!(argv, args(&["show", "--net", "tcp", "-n", "o2ib", "a", "b", "c"]));
        assert_eq!(optind, 5);
    }

    #[test]
    fn equals_and_separate_arguments() {
        let (found, _, _) = run(&["x", "--net=tcp", "--net", "o2ib", "--net="], "n:");
        assert_eq!(found, vec![ok('n', Some("tcp")), ok('n', Some("o2ib")), ok('n', Some(""))]);
    }

    #[test]
    fn unique_prefixes_match() {
        let (found, _, _) = run(&["x", "--ne", "tcp", "--ni=1@gni", "--verb", "--a"], "");
        assert_eq!(
            found,
            vec![ok('n', Some("tcp")), ok('N', Some("1@gni")), ok('v', None), ok('a', None)]
        );
    }

    #[test]
    fn an_exact_name_beats_a_longer_one() {
        let (found, _, _) = run(&["x", "--hop", "3"], "");
        assert_eq!(found, vec![ok('c', Some("3"))]);
    }

    #[test]
    fn prefixes_of_synonyms_are_not_ambiguous() {
        // --hop and --hop-count both mean 'c' with an argument (lnetctl's route options).
        let (found, _, _) = run(&["x", "--ho", "3"], "");
        assert_eq!(found, vec![ok('c', Some("3"))]);
    }

    #[test]
    fn ambiguous_prefixes_list_the_possibilities() {
        let (found, argv, optind) = run(&["show", "--n", "tcp"], "");
        assert_eq!(
            error_message(&found[0]),
            "show: option '--n' is ambiguous; possibilities: '--net' '--nid'\n"
        );
        assert!(
            matches!(&found[0], Opt::Error { kind: ErrorKind::Ambiguous(name), .. } if name == "n")
        );
        // The ambiguous option is skipped; "tcp" is a non-option.
        assert_eq!(found.len(), 1);
        assert_eq!((argv[optind].as_str(), optind), ("tcp", 2));
    }

    #[test]
    fn an_ambiguous_prefix_with_a_value_names_the_whole_word() {
        let (found, _, _) = run(&["show", "--n=tcp"], "");
        assert_eq!(
            error_message(&found[0]),
            "show: option '--n=tcp' is ambiguous; possibilities: '--net' '--nid'\n"
        );
    }

    #[test]
    fn unknown_options() {
        let (found, _, _) = run(&["add", "--foo=1", "-z"], "n:");
        assert_eq!(error_message(&found[0]), "add: unrecognized option '--foo=1'\n");
        assert_eq!(error_message(&found[1]), "add: invalid option -- 'z'\n");
        assert!(matches!(found[1], Opt::Error { kind: ErrorKind::UnknownShort('z'), .. }));
    }

    #[test]
    fn missing_arguments() {
        let (found, _, _) = run(&["add", "--net"], "n:");
        assert_eq!(error_message(&found[0]), "add: option '--net' requires an argument\n");
        let (found, _, _) = run(&["add", "-n"], "n:");
        assert_eq!(error_message(&found[0]), "add: option requires an argument -- 'n'\n");
        // A prefix reports the full name.
        let (found, _, _) = run(&["add", "--ne"], "n:");
        assert_eq!(error_message(&found[0]), "add: option '--net' requires an argument\n");
    }

    #[test]
    fn a_flag_given_a_value() {
        let (found, _, _) = run(&["configure", "--al=1"], "a");
        assert_eq!(
            error_message(&found[0]),
            "configure: option '--all' doesn't allow an argument\n"
        );
    }

    #[test]
    fn a_required_argument_may_look_like_an_option() {
        let (found, _, _) = run(&["x", "--net", "--all", "-n", "-a"], "n:a");
        assert_eq!(found, vec![ok('n', Some("--all")), ok('n', Some("-a"))]);
    }

    #[test]
    fn bundled_short_options_and_attached_arguments() {
        let (found, _, _) = run(&["x", "-avntcp", "-n", "o2ib"], "an:v");
        assert_eq!(
            found,
            vec![ok('a', None), ok('v', None), ok('n', Some("tcp")), ok('n', Some("o2ib"))]
        );
    }

    #[test]
    fn optional_arguments_only_attach() {
        let (found, argv, optind) =
            run(&["x", "-v2", "-v", "3", "--verbose=4", "--verbose", "5"], "v::");
        assert_eq!(
            found,
            vec![ok('v', Some("2")), ok('v', None), ok('v', Some("4")), ok('v', None)]
        );
        assert_eq!(&argv[optind..], &args(&["3", "5"])[..]);
    }

    #[test]
    fn double_dash_ends_options() {
        let (found, argv, optind) = run(&["x", "a", "--all", "--", "--net", "b"], "n:a");
        assert_eq!(found, vec![ok('a', None)]);
        assert_eq!(&argv[optind..], &args(&["a", "--net", "b"])[..]);
    }

    #[test]
    fn a_lone_dash_is_a_non_option() {
        let (found, argv, optind) = run(&["import", "-", "--all"], "a");
        assert_eq!(found, vec![ok('a', None)]);
        assert_eq!(&argv[optind..], &args(&["-"])[..]);
    }

    #[test]
    fn posixly_correct_stops_at_the_first_non_option() {
        let mut getopt = Getopt::with_posixly_correct(args(&["x", "a", "--all"]), "a", LONGS, true);
        assert_eq!(getopt.next(), None);
        assert_eq!(getopt.optind, 1);
    }

    #[test]
    fn a_leading_colon_silences_errors() {
        let (found, _, _) = run(&["x", "--foo"], ":a");
        assert_eq!(
            found,
            vec![Opt::Error { kind: ErrorKind::UnknownLong("foo".into()), message: None }]
        );
    }

    #[test]
    fn handlers_may_consume_the_next_argument() {
        // lnetctl's "-v N": the handler reads argv[optind] and advances optind.
        let mut getopt =
            Getopt::with_posixly_correct(args(&["show", "-v", "2", "x"]), "v", LONGS, false);
        assert_eq!(getopt.next(), Some(ok('v', None)));
        assert_eq!(getopt.arg(getopt.optind), "2");
        getopt.optind += 1;
        assert_eq!(getopt.next(), None);
        assert_eq!(getopt.arg(getopt.optind), "x");
    }

    #[test]
    fn nothing_to_parse() {
        let (found, _, optind) = run(&["x"], "a");
        assert!(found.is_empty());
        assert_eq!(optind, 1);
    }
}
