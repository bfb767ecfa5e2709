//! A strict reader of Prometheus's text exposition format (version 0.0.4), to check what
//! `ulnetd --metrics` serves: every sample belongs to a family declared by `# HELP` and
//! `# TYPE` lines before it, a family's lines are together, no series repeats, names and
//! label values are well formed, and each histogram's buckets are sorted and cumulative, end
//! with `+Inf` equal to `_count`, and come with `_sum`. Shared by the unit tests
//! (`src/metrics/exposition.rs`) and the daemon tests.

use std::collections::{BTreeMap, BTreeSet};

/// One sample line.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// One family: its type, help and samples in order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Family {
    pub kind: String,
    pub help: String,
    pub samples: Vec<Sample>,
}

/// A whole exposition, families by name.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Exposition {
    pub families: BTreeMap<String, Family>,
}

impl Exposition {
    /// The samples named `name` whose labels include every pair of `labels`.
    pub fn samples<'a>(
        &'a self,
        name: &'a str,
        labels: &'a [(&'a str, &'a str)],
    ) -> impl Iterator<Item = &'a Sample> + 'a {
        self.families.values().flat_map(|family| &family.samples).filter(move |sample| {
            sample.name == name
                && labels
                    .iter()
                    .all(|(key, value)| sample.labels.get(*key).is_some_and(|found| found == value))
        })
    }

    /// The sum of the samples [`samples`](Self::samples) selects.
    pub fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.samples(name, labels).map(|sample| sample.value).sum()
    }
}

/// Parses and checks `text`.
pub fn parse(text: &str) -> Result<Exposition, String> {
    let mut exposition = Exposition::default();
    let mut closed: BTreeSet<String> = BTreeSet::new();
    let mut current: Option<String> = None;
    let mut series: BTreeSet<String> = BTreeSet::new();
    for (number, line) in text.lines().enumerate() {
        let at = |why: String| format!("line {}: {why}: {line:?}", number + 1);
        if line.trim().is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# ") {
            let mut words = rest.splitn(3, ' ');
            let (keyword, name, tail) = (words.next(), words.next(), words.next());
            let (Some(keyword @ ("HELP" | "TYPE")), Some(name)) = (keyword, name) else {
                continue; // a comment
            };
            check_name(name).map_err(at)?;
            if current.as_deref() != Some(name) {
                if let Some(previous) = current.take() {
                    closed.insert(previous);
                }
                if closed.contains(name) {
                    return Err(at(format!("family {name} declared again after others")));
                }
                current = Some(name.to_string());
            }
            let family = exposition.families.entry(name.to_string()).or_default();
            let tail = tail.unwrap_or("").to_string();
            if keyword == "HELP" {
                if !family.help.is_empty() {
                    return Err(at("second HELP".into()));
                }
                family.help = tail;
            } else {
                if !family.kind.is_empty() || !family.samples.is_empty() {
                    return Err(at("TYPE repeated or after samples".into()));
                }
                if !["counter", "gauge", "histogram", "summary", "untyped"].contains(&&*tail) {
                    return Err(at(format!("unknown type {tail}")));
                }
                family.kind = tail;
            }
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        let sample = parse_sample(line).map_err(at)?;
        let family_name = current.clone().ok_or_else(|| at("sample before any TYPE".into()))?;
        let family = exposition.families.get_mut(&family_name).unwrap_or_else(|| unreachable!());
        if family.help.is_empty() || family.kind.is_empty() {
            return Err(at(format!("family {family_name} lacks HELP or TYPE")));
        }
        let allowed: Vec<String> = match family.kind.as_str() {
            "histogram" => ["_bucket", "_sum", "_count"]
                .iter()
                .map(|suffix| format!("{family_name}{suffix}"))
                .collect(),
            _ => vec![family_name.clone()],
        };
        if !allowed.contains(&sample.name) {
            return Err(at(format!("sample {} outside family {family_name}", sample.name)));
        }
        let key = format!("{}{:?}", sample.name, sample.labels);
        if !series.insert(key) {
            return Err(at("series repeated".into()));
        }
        family.samples.push(sample);
    }
    for (name, family) in &exposition.families {
        if family.kind == "histogram" {
            check_histogram(name, family)?;
        }
        if family.kind == "counter" && family.samples.iter().any(|sample| sample.value < 0.0) {
            return Err(format!("counter {name} is negative"));
        }
    }
    Ok(exposition)
}

fn check_name(name: &str) -> Result<(), String> {
    let mut bytes = name.bytes();
    let first_ok = bytes.next().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_' || b == b':');
    if first_ok && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b':') {
        Ok(())
    } else {
        Err(format!("bad metric name {name:?}"))
    }
}

fn parse_sample(line: &str) -> Result<Sample, String> {
    let name_end = line.find(['{', ' ']).ok_or("no value")?;
    let name = &line[..name_end];
    check_name(name)?;
    let mut rest = &line[name_end..];
    let mut labels = BTreeMap::new();
    if let Some(inner) = rest.strip_prefix('{') {
        let mut chars = inner.char_indices().peekable();
        loop {
            let start = chars.peek().map(|(index, _)| *index).ok_or("unterminated labels")?;
            if inner[start..].starts_with('}') {
                rest = &inner[start + 1..];
                break;
            }
            let eq = inner[start..].find('=').ok_or("label without =")? + start;
            let key = &inner[start..eq];
            let key_ok = key.bytes().next().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
                && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
            if !key_ok {
                return Err(format!("bad label name {key:?}"));
            }
            while chars.peek().is_some_and(|(index, _)| *index <= eq) {
                chars.next();
            }
            if chars.next().map(|(_, c)| c) != Some('"') {
                return Err("label value not quoted".into());
            }
            let mut value = String::new();
            loop {
                match chars.next().ok_or("unterminated label value")?.1 {
                    '"' => break,
                    '\\' => match chars.next().ok_or("dangling escape")?.1 {
                        'n' => value.push('\n'),
                        '\\' => value.push('\\'),
                        '"' => value.push('"'),
                        other => return Err(format!("bad escape \\{other}")),
                    },
                    '\n' => return Err("newline in label value".into()),
                    other => value.push(other),
                }
            }
            if labels.insert(key.to_string(), value).is_some() {
                return Err(format!("label {key} twice"));
            }
            match chars.peek().map(|(_, c)| *c) {
                Some(',') => {
                    chars.next();
                }
                Some('}') => {}
                _ => return Err("expected , or } after a label".into()),
            }
        }
    }
    let mut words = rest.split(' ').filter(|word| !word.is_empty());
    let value = parse_value(words.next().ok_or("no value")?)?;
    if let Some(timestamp) = words.next() {
        timestamp.parse::<i64>().map_err(|_| format!("bad timestamp {timestamp:?}"))?;
    }
    if words.next().is_some() {
        return Err("trailing words".into());
    }
    Ok(Sample { name: name.to_string(), labels, value })
}

fn parse_value(word: &str) -> Result<f64, String> {
    match word {
        "+Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        "NaN" => Ok(f64::NAN),
        _ => word.parse().map_err(|_| format!("bad value {word:?}")),
    }
}

/// One labelled histogram's (le, count) buckets, `_sum` and `_count`.
type HistogramSeries = (Vec<(f64, f64)>, Option<f64>, Option<f64>);

fn check_histogram(name: &str, family: &Family) -> Result<(), String> {
    let mut groups: BTreeMap<String, HistogramSeries> = BTreeMap::new();
    for sample in &family.samples {
        let mut labels = sample.labels.clone();
        let le = labels.remove("le");
        let group = groups.entry(format!("{labels:?}")).or_default();
        if sample.name.ends_with("_bucket") {
            let le = le.ok_or_else(|| format!("{name}: bucket without le"))?;
            group.0.push((parse_value(&le)?, sample.value));
        } else if sample.name.ends_with("_sum") {
            group.1 = Some(sample.value);
        } else {
            group.2 = Some(sample.value);
        }
    }
    for (labels, (buckets, sum, count)) in groups {
        let fail = |why: &str| Err(format!("histogram {name}{labels}: {why}"));
        if sum.is_none() {
            return fail("no _sum");
        }
        let Some(count) = count else { return fail("no _count") };
        if buckets.windows(2).any(|pair| pair[0].0 >= pair[1].0) {
            return fail("le not increasing");
        }
        if buckets.windows(2).any(|pair| pair[0].1 > pair[1].1) {
            return fail("buckets not cumulative");
        }
        match buckets.last() {
            Some((le, last)) if le.is_infinite() && *last == count => {}
            _ => return fail("last bucket is not +Inf equal to _count"),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_well_formed_exposition_parses() {
        let text = "# HELP a_total A.\n# TYPE a_total counter\na_total{x=\"1\",y=\"q\\\"\"} 3\n\
                    # HELP h H.\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\n\
                    h_sum 3.5\nh_count 2\n";
        let parsed = parse(text).unwrap();
        assert_eq!(parsed.sum("a_total", &[("y", "q\"")]), 3.0);
        assert_eq!(parsed.families["h"].samples.len(), 4);
    }

    #[test]
    fn malformed_expositions_are_refused() {
        for bad in [
            "a 1\n",
            "# TYPE a counter\na 1\n",
            "# HELP a x\n# TYPE a counter\nb 1\n",
            "# HELP a x\n# TYPE a counter\na 1\na 2\n",
            "# HELP a x\n# TYPE a gauge\na{x=1} 1\n",
            "# HELP a x\n# TYPE a gauge\na one\n",
            "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n",
            "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n",
            "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 1\n",
            "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"+Inf\"} 1\nh_count 1\n",
            "# HELP a x\n# TYPE a gauge\na 1\n# HELP b x\n# TYPE b gauge\nb 1\n# HELP a x\n",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}
