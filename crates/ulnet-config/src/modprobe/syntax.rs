//! The text of modprobe.d files: logical lines, commands, and an `options` line's
//! parameters.
//!
//! Lines are read as kmod reads them: a backslash takes the next character literally, a
//! backslash at the end of a line joins the next one, a line starting with `#` is a
//! comment. Each line is a command and its words, separated by blanks; `options MODULE
//! ...` hands the rest of the line to the module, where the kernel splits it into
//! `name[=value]` words at blanks outside double quotes and removes the quotes around a
//! whole word or around its value. ulnet reads single quotes the same way (the kernel
//! keeps them, which breaks values written `routes='...'` as shells and Lustre's manuals
//! write them), and takes a line whose first non-blank character is `#` for a comment
//! (kmod ignores it as a bad line). A `#` word on an `options` line is not a comment to
//! modprobe: the kernel would take it for a parameter.
//!
//! lustre: none (kmod shared/util.c `freadline_wrapped()`, libkmod/libkmod-config.c
//! `kmod_config_parse()`, `underscores()`; Linux lib/cmdline.c `next_arg()`,
//! kernel/params.c `parameq()`).

/// One logical line: the number of its first physical line, and its text.
pub(super) fn logical_lines(text: &str) -> Vec<(usize, String)> {
    let mut lines = Vec::new();
    let mut current = String::new();
    let mut first = 1;
    let mut number = 1;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\n' => {
                lines.push((first, std::mem::take(&mut current)));
                number += 1;
                first = number;
            }
            '\\' => match chars.next() {
                Some('\n') => number += 1,
                Some(escaped) => current.push(escaped),
                None => {}
            },
            c => current.push(c),
        }
    }
    if !current.is_empty() {
        lines.push((first, current));
    }
    lines
}

/// A modprobe.d command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Command {
    /// `options MODULE PARAMS`: the module name with `-` read as `_`, the rest of the line.
    Options { module: String, params: String },
    /// `alias`, `blacklist`, `install`, `remove`, `softdep`, `weakdep`, and the deprecated
    /// `include` and `config`: the command and its first argument, when there is one.
    Other { command: String, module: Option<String> },
}

/// Why a line is no modprobe.d command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum LineError {
    /// The first word is no command kmod knows.
    UnknownCommand(String),
    /// `options` without a module, or without parameters.
    IncompleteOptions,
}

const BLANKS: &[char] = &[' ', '\t'];

/// The command on a logical line; `None` for a blank line or a comment.
pub(super) fn command(line: &str) -> Option<Result<Command, LineError>> {
    let text = line.trim_start_matches(BLANKS);
    if text.is_empty() || text.starts_with('#') {
        return None;
    }
    let (word, rest) = split_word(text);
    Some(match word {
        "options" => {
            let (module, params) = split_word(rest);
            if module.is_empty() || params.trim_matches(BLANKS).is_empty() {
                Err(LineError::IncompleteOptions)
            } else {
                Ok(Command::Options {
                    module: module_name(module),
                    params: params.replace('\t', " "),
                })
            }
        }
        "alias" | "blacklist" | "install" | "remove" | "softdep" | "weakdep" | "include"
        | "config" => {
            let (module, _) = split_word(rest);
            let module = (!module.is_empty()).then(|| module_name(module));
            Ok(Command::Other { command: word.to_string(), module })
        }
        other => Err(LineError::UnknownCommand(other.to_string())),
    })
}

/// The first blank-separated word and what follows it (after one blank, as strtok leaves).
fn split_word(text: &str) -> (&str, &str) {
    let text = text.trim_start_matches(BLANKS);
    match text.find(BLANKS) {
        Some(end) => (&text[..end], &text[end + 1..]),
        None => (text, ""),
    }
}

/// A module name as kmod compares them: `-` and `_` are the same.
pub(super) fn module_name(text: &str) -> String {
    text.replace('-', "_")
}

/// A parameter name as the kernel compares them (`parameq()`): `-` and `_` are the same.
pub(super) fn param_name(text: &str) -> String {
    text.replace('-', "_")
}

/// One `name[=value]` word of an `options` line, quotes removed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Word {
    pub name: String,
    /// `None` without `=`.
    pub value: Option<String>,
}

/// Why an `options` line's parameters did not split.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum WordError {
    /// A quote opened and never closed; the text from the word's start.
    UnterminatedQuote(String),
    /// A `#` where a parameter should be: modprobe has no comments there.
    Comment(String),
}

/// Whitespace as the kernel's `isspace()` sees ASCII.
fn kernel_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\u{b}' | '\u{c}' | '\r')
}

/// `next_arg()` over the whole parameter text, with `'` quoting like `"`.
pub(super) fn words(params: &str) -> Result<Vec<Word>, WordError> {
    let mut words = Vec::new();
    let mut rest = params.trim_start_matches(kernel_space);
    while !rest.is_empty() {
        if rest.starts_with('#') {
            return Err(WordError::Comment(rest.to_string()));
        }
        let (word, after) = next_word(rest)?;
        words.push(word);
        rest = after.trim_start_matches(kernel_space);
    }
    Ok(words)
}

/// One word: up to a blank outside quotes. A quote opens at `"` or `'` and closes at the
/// same character; the `=` is the first one in the word, quoted or not.
fn next_word(text: &str) -> Result<(Word, &str), WordError> {
    let mut quote: Option<char> = None;
    let mut end = text.len();
    for (at, c) in text.char_indices() {
        match quote {
            None if kernel_space(c) => {
                end = at;
                break;
            }
            None if c == '"' || c == '\'' => quote = Some(c),
            Some(open) if c == open => quote = None,
            _ => {}
        }
    }
    if quote.is_some() {
        return Err(WordError::UnterminatedQuote(text.to_string()));
    }
    let raw = &text[..end];
    // A word quoted whole (`"name=value"`) loses its outer quotes first.
    let word = strip_quotes(raw);
    let (name, value) = match word.split_once('=') {
        Some((name, value)) => (name, Some(strip_quotes(value).to_string())),
        None => (word, None),
    };
    Ok((Word { name: param_name(name), value }, &text[end..]))
}

/// The text inside one pair of quotes of the same kind around it, or the text itself.
fn strip_quotes(text: &str) -> &str {
    for quote in ['"', '\''] {
        if let Some(inner) = text.strip_prefix(quote).and_then(|t| t.strip_suffix(quote)) {
            return inner;
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn word(name: &str, value: Option<&str>) -> Word {
        Word { name: name.into(), value: value.map(Into::into) }
    }

    #[test]
    fn lines_join_and_escape_as_kmod_reads_them() {
        let text = "options lnet \\\n  networks=tcp\n# c\\\nstill comment\na\\bc\nlast";
        assert_eq!(
            logical_lines(text),
            [
                (1, "options lnet   networks=tcp".to_string()),
                (3, "# cstill comment".to_string()),
                (5, "abc".to_string()),
                (6, "last".to_string()),
            ]
        );
    }

    #[test]
    fn commands() {
        assert_eq!(command("  # indented comment"), None);
        assert_eq!(command("   "), None);
        assert_eq!(
            command("options\tko2ib-lnd  peer_credits=8\tx=1"),
            Some(Ok(Command::Options {
                module: "ko2ib_lnd".into(),
                params: " peer_credits=8 x=1".into()
            }))
        );
        assert_eq!(command("options lnet"), Some(Err(LineError::IncompleteOptions)));
        assert_eq!(command("options lnet   "), Some(Err(LineError::IncompleteOptions)));
        assert_eq!(
            command("softdep lnet pre: libcfs"),
            Some(Ok(Command::Other { command: "softdep".into(), module: Some("lnet".into()) }))
        );
        assert_eq!(
            command("option lnet x=1"),
            Some(Err(LineError::UnknownCommand("option".into())))
        );
    }

    #[test]
    fn words_split_outside_quotes_and_lose_them() {
        assert_eq!(
            words(
                "networks=ptlf(0) routes='o2ib [1,2,3,4,5]@ptlf' \
                 cpu_pattern=\"0[0-15] 1[18-33]\" 'ip2nets=\"tcp0 10.0.0.*\"' \"a=b c\" flag"
            )
            .unwrap(),
            [
                word("networks", Some("ptlf(0)")),
                word("routes", Some("o2ib [1,2,3,4,5]@ptlf")),
                word("cpu_pattern", Some("0[0-15] 1[18-33]")),
                word("ip2nets", Some("tcp0 10.0.0.*")),
                word("a", Some("b c")),
                word("flag", None),
            ]
        );
        // A quote inside the other kind is text; names read `-` as `_`.
        assert_eq!(
            words("lnet-retry-count=\"it's\" x=").unwrap(),
            [word("lnet_retry_count", Some("it's")), word("x", Some(""))]
        );
        assert_eq!(
            words("routes='o2ib 1@ptlf"),
            Err(WordError::UnterminatedQuote("routes='o2ib 1@ptlf".into()))
        );
        assert_eq!(
            words("networks=tcp # the client"),
            Err(WordError::Comment("# the client".into()))
        );
    }
}
