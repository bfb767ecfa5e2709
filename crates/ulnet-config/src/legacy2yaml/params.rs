//! Finding `ip2nets=`, `routes=` and `networks=` values in an options line, an inline string
//! or a modprobe file, as `lnet_legacy2yaml` does.
//!
//! The tool scans the whole text twice: first for quoted values (`name="..."` or
//! `name='...'`, whitespace allowed around `=`, anything up to the same quote, newlines
//! included), then for unquoted ones (`name=value`, where the value starts with a character
//! other than a quote, `;` or a newline and ends, as early as possible, where the rest of
//! the text is blank, or blank then `;`, or blank then a `word=`). An unquoted value counts
//! only for a name no value was found for yet in the same text. The names need no word
//! boundary before them (`xroutes="..."` is a `routes` value), as in the tool.
//!
//! lustre: lustre/scripts/lnet_legacy2yaml `extract_param_values()`, `parse_modprobe_conf()`.

use super::python::{is_space, is_word, strip};

/// The parameters the tool extracts, in the order it converts them.
pub(super) const NAMES: [&str; 3] = ["ip2nets", "routes", "networks"];

/// The values found for each of [`NAMES`], in the order of appearance.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Found {
    pub values: [Vec<String>; 3],
}

impl Found {
    pub(super) fn is_empty(&self) -> bool {
        self.values.iter().all(Vec::is_empty)
    }

    fn add(&mut self, name: usize, value: String) {
        if let Some(list) = self.values.get_mut(name) {
            list.push(value);
        }
    }

    fn has(&self, name: usize) -> bool {
        self.values.get(name).is_some_and(|list| !list.is_empty())
    }
}

/// The values of one text (an inline string, or one logical line of a modprobe file).
pub(super) fn extract(text: &str) -> Found {
    let chars: Vec<char> = text.chars().collect();
    let mut found = Found::default();
    let mut at = 0;
    while at < chars.len() {
        match quoted_at(&chars, at) {
            Some((name, value, end)) => {
                found.add(name, value);
                at = end;
            }
            None => at += 1,
        }
    }
    let mut at = 0;
    while at < chars.len() {
        match unquoted_at(&chars, at) {
            Some((name, value, end)) => {
                if !found.has(name) {
                    found.add(name, strip(&value).to_string());
                }
                at = end;
            }
            None => at += 1,
        }
    }
    found
}

/// The values of every `options` line of a modprobe file that mentions `lnet` anywhere
/// (`options lnet_selftest ...` and `options foo # lnet` included, as in the tool). Lines
/// are stripped; a trailing backslash joins the next line with a space; lines starting
/// with `#` are skipped.
pub(super) fn extract_modprobe(content: &str) -> Found {
    let lines: Vec<&str> = content.split('\n').collect();
    let mut found = Found::default();
    let mut index = 0;
    while let Some(first) = lines.get(index) {
        let mut line = strip(first).to_string();
        while line.ends_with('\\') && index + 1 < lines.len() {
            line.pop();
            line.push(' ');
            line.push_str(lines.get(index + 1).map_or("", |next| strip(next)));
            index += 1;
        }
        index += 1;
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if line.starts_with("options") && line.contains("lnet") {
            let values = extract(&line);
            for (name, list) in values.values.into_iter().enumerate() {
                for value in list {
                    found.add(name, value);
                }
            }
        }
    }
    found
}

/// The name of [`NAMES`] spelled at `at`, and the index after it.
fn name_at(chars: &[char], at: usize) -> Option<(usize, usize)> {
    NAMES.iter().enumerate().find_map(|(index, name)| {
        let end = at + name.chars().count();
        let spelled = chars.get(at..end)?.iter().copied().eq(name.chars());
        spelled.then_some((index, end))
    })
}

fn skip_spaces(chars: &[char], mut at: usize) -> usize {
    while chars.get(at).is_some_and(|c| is_space(*c)) {
        at += 1;
    }
    at
}

/// `name\s*=\s*(['"])(.*?)\1`: the name, the value and the index after the closing quote.
fn quoted_at(chars: &[char], at: usize) -> Option<(usize, String, usize)> {
    let (name, after_name) = name_at(chars, at)?;
    let equals = skip_spaces(chars, after_name);
    if chars.get(equals) != Some(&'=') {
        return None;
    }
    let open = skip_spaces(chars, equals + 1);
    let quote = *chars.get(open).filter(|c| **c == '\'' || **c == '"')?;
    let body = chars.get(open + 1..)?;
    let close = body.iter().position(|c| *c == quote)?;
    let value = body.get(..close)?.iter().collect();
    Some((name, value, open + 1 + close + 1))
}

/// `name\s*=\s*([^'";\n][^\n;]*?)(?=\s+\w+\s*=|\s*;|\s*$)`: the name, the value (not yet
/// stripped) and the index after it. The blanks after `=` are given back one at a time
/// when the value cannot start after all of them, as the regular expression backtracks.
fn unquoted_at(chars: &[char], at: usize) -> Option<(usize, String, usize)> {
    let (name, after_name) = name_at(chars, at)?;
    let equals = skip_spaces(chars, after_name);
    if chars.get(equals) != Some(&'=') {
        return None;
    }
    let blanks_end = skip_spaces(chars, equals + 1);
    for start in (equals + 1..=blanks_end).rev() {
        let Some(first) = chars.get(start) else { continue };
        if matches!(first, '\'' | '"' | ';' | '\n') {
            continue;
        }
        let mut end = start + 1;
        loop {
            if value_ends_at(chars, end) {
                let value = chars.get(start..end)?.iter().collect();
                return Some((name, value, end));
            }
            match chars.get(end) {
                None | Some('\n' | ';') => break,
                Some(_) => end += 1,
            }
        }
    }
    None
}

/// The look-ahead that ends an unquoted value: blanks then `word=`, blanks then `;`, or
/// only blanks to the end.
fn value_ends_at(chars: &[char], at: usize) -> bool {
    let blanks_end = skip_spaces(chars, at);
    if blanks_end == chars.len() || chars.get(blanks_end) == Some(&';') {
        return true;
    }
    if blanks_end == at {
        return false;
    }
    let mut word_end = blanks_end;
    while chars.get(word_end).is_some_and(|c| is_word(*c)) {
        word_end += 1;
    }
    word_end > blanks_end && chars.get(skip_spaces(chars, word_end)) == Some(&'=')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(text: &str) -> Vec<Vec<String>> {
        extract(text).values.to_vec()
    }

    fn v(items: &[&str]) -> Vec<String> {
        items.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn quoted_and_unquoted_values() {
        assert_eq!(
            values("options lnet 'ip2nets=\"tcp0 10.0.0.*\" routes=\"tcp0 1 10.0.0.2@o2ib0\"'"),
            [v(&["tcp0 10.0.0.*"]), v(&["tcp0 1 10.0.0.2@o2ib0"]), v(&[])]
        );
        assert_eq!(
            values("options lnet networks=tcp0(eth0),o2ib(ib0)"),
            [v(&[]), v(&[]), v(&["tcp0(eth0),o2ib(ib0)"])]
        );
        // The seeds' client line: a quoted routes value, an unquoted networks value that
        // ends before the next `word=`.
        assert_eq!(
            values(
                "options lnet networks=ptlf(0) routes='o2ib [1,2,3,4,5]@ptlf' \
                 lnet_peer_discovery_disabled=1"
            ),
            [v(&[]), v(&["o2ib [1,2,3,4,5]@ptlf"]), v(&["ptlf(0)"])]
        );
    }

    #[test]
    fn an_unquoted_value_runs_to_a_blank_then_word_equals() {
        assert_eq!(values("routes=tcp 1 a@b x=1"), [v(&[]), v(&["tcp 1 a@b"]), v(&[])]);
        assert_eq!(values("routes=tcp 1 a@b ; z"), [v(&[]), v(&["tcp 1 a@b"]), v(&[])]);
        // The end of the text ends it too.
        assert_eq!(values("routes=tcp 1 a@b z"), [v(&[]), v(&["tcp 1 a@b z"]), v(&[])]);
        // A newline does not: `x` is neither blank, `;` nor `word=`.
        assert_eq!(values("routes=a\nx"), [v(&[]), v(&[]), v(&[])]);
        // A value before only blanks, including newlines.
        assert_eq!(values("routes=tcp 1 a@b \n \n"), [v(&[]), v(&["tcp 1 a@b"]), v(&[])]);
        // Given back blanks: `routes=  ;` finds one blank, stripped to nothing.
        assert_eq!(values("routes=  ;"), [v(&[]), v(&[""]), v(&[])]);
    }

    #[test]
    fn an_unquoted_value_counts_only_without_a_quoted_one() {
        assert_eq!(values("routes=\"a\" routes=b"), [v(&[]), v(&["a"]), v(&[])]);
        assert_eq!(values("routes=a routes=b"), [v(&[]), v(&["a"]), v(&[])]);
        assert_eq!(values("routes=\"a\" routes='b'"), [v(&[]), v(&["a", "b"]), v(&[])]);
        // No word boundary is needed before the name.
        assert_eq!(values("xroutes='a'"), [v(&[]), v(&["a"]), v(&[])]);
        // An unterminated quote is no quoted value.
        assert_eq!(values("routes='a"), [v(&[]), v(&[]), v(&[])]);
    }

    #[test]
    fn modprobe_lines_join_skip_and_filter() {
        let file = "# routes='commented'\noptions lnet \\\n  ip2nets=\"o2ib0 192.168.1.*\"\n\
                    options ksocklnd routes='not lnet'\noptions lnet_selftest routes='x'\n\
                    options lnet networks=tcp\noptions lnet networks=tcp1\n";
        let found = extract_modprobe(file);
        assert_eq!(found.values[0], v(&["o2ib0 192.168.1.*"]));
        // `lnet` anywhere in the line counts, in a value too.
        assert_eq!(found.values[1], v(&["not lnet", "x"]));
        // One unquoted value per line, every line's kept.
        assert_eq!(found.values[2], v(&["tcp", "tcp1"]));
    }
}
