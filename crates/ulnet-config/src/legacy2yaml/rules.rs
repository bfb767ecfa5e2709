//! The three legacy syntaxes as `lnet_legacy2yaml` reads them, and the YAML lines it prints
//! for each entry. Its checks are lighter than the kernel's (crate::grammar): IP patterns
//! and gateways are kept as written, never expanded, and a route's net is not checked.
//!
//! lustre: lustre/scripts/lnet_legacy2yaml `parse_rule()`, `parse_networks_body()`,
//! `parse_routes_body()`, `parse_alternative_route()`, the `to_yaml_lines()` methods.

use super::python::{self, is_space, rstrip, split_whitespace, strip};

/// One `ip2nets` rule: a net, its interfaces, its IP patterns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Rule {
    net: String,
    interfaces: Vec<String>,
    ranges: Vec<String>,
}

/// One `networks` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Network {
    net: String,
    interfaces: Vec<String>,
}

/// One route. `hop` and `priority` are decimal text as Python prints the integer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Route {
    net: String,
    gateway: String,
    pub(super) hop: Option<String>,
    priority: Option<String>,
}

/// Backslash-newline becomes a blank, then the text is stripped (`normalize()`).
fn normalize(body: &str) -> String {
    strip(&body.replace("\\\n", " ")).to_string()
}

/// Statements split at `;` and newlines, stripped, empty ones dropped (`split_rules()`).
fn statements(body: &str) -> impl Iterator<Item = &str> {
    body.split([';', '\n']).map(strip).filter(|piece| !piece.is_empty())
}

/// Everything from the first `#` goes (`strip_comment()`).
fn without_comment(statement: &str) -> &str {
    match statement.split_once('#') {
        Some((before, _)) => rstrip(before),
        None => statement,
    }
}

/// The characters of an interface list in parentheses.
fn interface_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | ',' | '.' | ':' | '/' | '-')
}

/// A net name: an ASCII letter, then ASCII letters and digits. Returns its byte length.
fn net_name_len(text: &str) -> Option<usize> {
    let mut chars = text.char_indices();
    chars.next().filter(|(_, c)| c.is_ascii_alphabetic())?;
    Some(chars.find(|(_, c)| !c.is_ascii_alphanumeric()).map_or(text.len(), |(at, _)| at))
}

/// `(<interface chars>+)` at the start of `text`: the list and the byte length taken.
fn interface_group(text: &str) -> Option<(&str, usize)> {
    let inner = text.strip_prefix('(')?;
    let length = inner.find(|c| !interface_char(c)).unwrap_or(inner.len());
    (length > 0 && inner[length..].starts_with(')')).then(|| (&inner[..length], length + 2))
}

/// The interfaces of a list: split at commas, stripped, empty ones dropped.
fn interface_list(list: &str) -> Vec<String> {
    list.split(',').map(strip).filter(|name| !name.is_empty()).map(String::from).collect()
}

pub(super) fn ip2nets(body: &str) -> Result<Vec<Rule>, String> {
    let body = normalize(body);
    let mut rules = Vec::new();
    for statement in statements(&body) {
        let rule = without_comment(statement);
        if !rule.is_empty() {
            rules.push(parse_rule(rule)?);
        }
    }
    Ok(rules)
}

/// `<net>[(<interfaces>)] <ip-pattern>...` (`RULE_HEADER_RE` then the pattern checks).
fn parse_rule(rule: &str) -> Result<Rule, String> {
    let header_error = || format!("Cannot parse rule header: '{rule}'");
    let text = rule.trim_start_matches(is_space);
    let net_len = net_name_len(text).ok_or_else(header_error)?;
    let (net, after_net) = text.split_at(net_len);
    // The interface group is optional: where it does not match, the blank must come at '('.
    let (interfaces, rest) = match interface_group(after_net) {
        Some((list, taken)) if after_net[taken..].starts_with(is_space) => {
            (Some(list), &after_net[taken..])
        }
        _ => (None, after_net),
    };
    let after_blanks = rest.trim_start_matches(is_space);
    let blanks = rest.chars().count() - after_blanks.chars().count();
    if blanks == 0 || (after_blanks.is_empty() && blanks < 2) {
        return Err(header_error());
    }
    let tokens: Vec<&str> = split_whitespace(after_blanks).collect();
    if tokens.is_empty() {
        return Err(format!("No IP patterns found for network '{net}' in rule: '{rule}'"));
    }
    let mut ranges = Vec::new();
    for token in tokens {
        if !looks_like_ip_pattern(token) {
            if looks_like_net_spec(token) {
                return Err(format!(
                    "Detected what looks like a second network specification '{token}' in \
                     rule: '{rule}'. Multiple network rules must be separated by semicolons (;)."
                ));
            }
            return Err(format!("Invalid-looking IP pattern token '{token}' in rule: '{rule}'"));
        }
        ranges.push(token.to_string());
    }
    let interfaces = match interfaces {
        Some(list) => {
            let names = interface_list(list);
            if names.is_empty() {
                return Err(format!("Empty interface list in rule: '{rule}'"));
            }
            names
        }
        None => Vec::new(),
    };
    Ok(Rule { net: net.to_string(), interfaces, ranges })
}

/// Four non-empty dot-separated parts of `[A-Za-z0-9[*].,/-]` (the parts may hold dots too).
fn looks_like_ip_pattern(token: &str) -> bool {
    let allowed =
        |c: char| c.is_ascii_alphanumeric() || matches!(c, '[' | '*' | ']' | '.' | ',' | '/' | '-');
    if !token.chars().all(allowed) {
        return false;
    }
    // Earliest dots with at least one character before each and after the last.
    let bytes = token.as_bytes();
    let mut next = 1;
    for _ in 0..3 {
        match bytes.iter().skip(next).position(|b| *b == b'.') {
            Some(offset) => next += offset + 2,
            None => return false,
        }
    }
    next <= bytes.len()
}

/// `<net>[(<anything but ')'>)]`: a token that is a net spec rather than a pattern.
fn looks_like_net_spec(token: &str) -> bool {
    let Some(net_len) = net_name_len(token) else { return false };
    let rest = &token[net_len..];
    if rest.is_empty() {
        return true;
    }
    rest.strip_prefix('(')
        .and_then(|inner| inner.strip_suffix(')'))
        .is_some_and(|inner| !inner.is_empty() && !inner.contains(')'))
}

pub(super) fn networks(body: &str) -> Result<Vec<Network>, String> {
    let body = normalize(body);
    let mut specs = Vec::new();
    let mut current = String::new();
    let mut depth = 0i64;
    for c in body.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                specs.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    specs.push(current);
    let mut entries = Vec::new();
    for spec in specs.iter().map(|spec| strip(spec)).filter(|spec| !spec.is_empty()) {
        entries.push(parse_network(spec)?);
    }
    Ok(entries)
}

/// `<net>[(<interfaces>)]` and nothing else (`NETWORK_SPEC_RE`).
fn parse_network(spec: &str) -> Result<Network, String> {
    let error = || format!("Invalid network specification: '{spec}'");
    let text = spec.trim_start_matches(is_space);
    let net_len = net_name_len(text).ok_or_else(error)?;
    let (net, rest) = text.split_at(net_len);
    let (list, rest) = match interface_group(rest) {
        Some((list, taken)) if rest[taken..].chars().all(is_space) => (Some(list), ""),
        _ => (None, rest),
    };
    if !rest.chars().all(is_space) {
        return Err(error());
    }
    let interfaces = match list {
        Some(list) => {
            let names = interface_list(list);
            if names.is_empty() {
                return Err(format!("Empty interface list in network spec: '{spec}'"));
            }
            names
        }
        None => Vec::new(),
    };
    Ok(Network { net: net.to_string(), interfaces })
}

pub(super) fn routes(body: &str) -> Result<Vec<Route>, String> {
    let body = normalize(body);
    let mut entries = Vec::new();
    for statement in statements(&body) {
        let line = without_comment(statement);
        if line.is_empty() {
            continue;
        }
        match alternative_route(line)? {
            Some(route) => entries.push(route),
            None => entries.push(legacy_route(line)?),
        }
    }
    Ok(entries)
}

/// `<net> [<hop>] <gateway>[:<priority>]`, one gateway.
fn legacy_route(line: &str) -> Result<Route, String> {
    let tokens: Vec<&str> = split_whitespace(line).collect();
    let [net, rest @ ..] = tokens.as_slice() else {
        return Err(format!("routes: incomplete route specification '{line}'"));
    };
    if rest.is_empty() {
        return Err(format!("routes: incomplete route specification '{line}'"));
    }
    let mut gateways = rest;
    let mut hop = None;
    if let Some((first, after)) = rest.split_first() {
        if is_hop_token(first) {
            if !python::int_in_range(first, 1, 255) {
                return Err(format!("routes: hopcount {first} out of range 1-255 in '{line}'"));
            }
            hop = Some(first.to_string());
            gateways = after;
        }
    }
    let gateway = match gateways {
        [] => return Err(format!("routes: missing gateway specs in '{line}'")),
        [one] => *one,
        more => {
            return Err(format!(
                "routes: multiple gateway specifications found in single rule '{line}'. If you \
                 intended multiple routes, separate them with semicolons (;). Found gateways: {}",
                more.join(", ")
            ));
        }
    };
    let (gateway, priority) = match gateway.rsplit_once(':') {
        Some((head, tail))
            if gateway.contains('@')
                && !tail.is_empty()
                && tail.bytes().all(|b| b.is_ascii_digit()) =>
        {
            (head, python::int(tail))
        }
        _ => (gateway, None),
    };
    Ok(Route { net: net.to_string(), gateway: gateway.to_string(), hop, priority })
}

/// `^(?:[1-9][0-9]{0,2}|0)$`: up to three digits without a leading zero, or `0`.
fn is_hop_token(token: &str) -> bool {
    let bytes = token.as_bytes();
    match bytes {
        [b'0'] => true,
        [b'1'..=b'9', rest @ ..] => rest.len() <= 2 && rest.iter().all(u8::is_ascii_digit),
        _ => false,
    }
}

/// `<net>: { gateway: <gateway>[, hop: <hop>][, priority: <priority>] }` (the syntax of
/// `lustre_routes_config`); `None` when the line is not in that form.
fn alternative_route(line: &str) -> Result<Option<Route>, String> {
    let Some((net, gateway, params)) = alternative_parts(line) else { return Ok(None) };
    let mut hop = None;
    let mut priority = None;
    for param in params.unwrap_or("").split(',') {
        let param = strip(param);
        let Some((key, value)) = param.split_once(':') else { continue };
        let value = strip(value);
        match strip(key) {
            "hop" => {
                let parsed = python::int(value)
                    .ok_or_else(|| format!("routes: invalid hop value '{value}' in '{line}'"))?;
                if !python::int_in_range(&parsed, 1, 255) {
                    return Err(format!(
                        "routes: hopcount {parsed} out of range 1-255 in '{line}'"
                    ));
                }
                hop = Some(parsed);
            }
            "priority" => {
                let parsed = python::int(value).ok_or_else(|| {
                    format!("routes: invalid priority value '{value}' in '{line}'")
                })?;
                priority = Some(parsed);
            }
            _ => {}
        }
    }
    Ok(Some(Route { net: net.to_string(), gateway: gateway.to_string(), hop, priority }))
}

/// The net, the gateway and the text of the other parameters of an alternative route
/// (`ALT_ROUTE_RE`).
fn alternative_parts(line: &str) -> Option<(&str, &str, Option<&str>)> {
    let text = line.trim_start_matches(is_space);
    let net_len = net_name_len(text)?;
    let (net, rest) = text.split_at(net_len);
    let rest = rest.trim_start_matches(is_space).strip_prefix(':')?;
    let rest = rest.trim_start_matches(is_space).strip_prefix('{')?;
    let rest = rest.trim_start_matches(is_space).strip_prefix("gateway:")?;
    let rest = rest.trim_start_matches(is_space);
    let gateway_len =
        rest.find(|c: char| is_space(c) || c == ',' || c == '}').unwrap_or(rest.len());
    if gateway_len == 0 {
        return None;
    }
    let (gateway, rest) = rest.split_at(gateway_len);
    // With parameters: `, <params> }` where the '}' is the last non-blank character and the
    // parameters stop before the blanks ahead of it.
    if let Some(params) = rest.trim_start_matches(is_space).strip_prefix(',') {
        let params = params.trim_start_matches(is_space);
        let closed = rstrip(params).strip_suffix('}').map(rstrip);
        if let Some(inner) = closed {
            return Some((net, gateway, Some(inner)));
        }
    }
    let tail = rest.trim_start_matches(is_space).strip_prefix('}')?;
    tail.chars().all(is_space).then_some((net, gateway, None))
}

impl Rule {
    pub(super) fn yaml(&self, lines: &mut Vec<String>) {
        lines.push(format!("  - net-spec: {}", self.net));
        if !self.interfaces.is_empty() {
            lines.push("    interfaces:".into());
            for (index, name) in self.interfaces.iter().enumerate() {
                lines.push(format!("         {index}: {name}"));
            }
        }
        lines.push("    ip-range:".into());
        for (index, range) in self.ranges.iter().enumerate() {
            lines.push(format!("         {index}: {}", quote_leading_star(range)));
        }
    }
}

/// A pattern starting with `*` would read as a YAML alias: it is double-quoted.
fn quote_leading_star(token: &str) -> String {
    if token.starts_with('*') {
        format!("\"{}\"", token.replace('"', "\\\""))
    } else {
        token.into()
    }
}

impl Network {
    pub(super) fn yaml(&self, lines: &mut Vec<String>) {
        lines.push(format!("-     net type: {}", self.net));
        if !self.interfaces.is_empty() {
            lines.push("      local NI(s):".into());
            lines.push("      -     interfaces:".into());
            for (index, name) in self.interfaces.iter().enumerate() {
                lines.push(format!("                  {index}: {name}"));
            }
        }
    }
}

impl Route {
    pub(super) fn yaml(&self, lines: &mut Vec<String>) {
        lines.push(format!("  - net: {}", self.net));
        lines.push(format!("    gateway: {}", self.gateway));
        if let Some(hop) = &self.hop {
            lines.push(format!("    hop: {hop}"));
        }
        if let Some(priority) = &self.priority {
            lines.push(format!("    priority: {priority}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ip_patterns_need_four_parts() {
        for token in ["10.0.0.*", "192.168.[1-2].*", "*.*.*.*", "a.b.c.d", "1.2.3.4.5", "1..2.3.4"]
        {
            assert!(looks_like_ip_pattern(token), "{token}");
        }
        for token in ["10.0.0", "10.0.0.", ".1.2.3", "1.2.3.4:5", "1..2.3", "(eth0)"] {
            assert!(!looks_like_ip_pattern(token), "{token}");
        }
    }

    #[test]
    fn net_spec_tokens() {
        for token in ["tcp1", "tcp1(eth1)", "o2ib(a b"] {
            assert_eq!(looks_like_net_spec(token), !token.contains(' '), "{token}");
        }
        assert!(!looks_like_net_spec("tcp()"));
        assert!(!looks_like_net_spec("tcp(a)b"));
        assert!(!looks_like_net_spec("1tcp"));
    }

    #[test]
    fn hop_tokens() {
        for token in ["0", "1", "99", "255", "256", "999"] {
            assert!(is_hop_token(token), "{token}");
        }
        for token in ["01", "1000", "", "x", "-1"] {
            assert!(!is_hop_token(token), "{token}");
        }
    }
}
