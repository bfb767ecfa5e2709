//! Parameter sweeps: the same scenario run once per combination of values, each value put
//! into the scenario's YAML at a dotted path before it is read (so every value is checked as
//! if written in the file).
//!
//! A path walks maps by key and sequences by index or by an element's `name` (a workload's
//! name is inside its `brw:`/`ping:`/`rpc_stream:` map, which the path enters by itself):
//! `defaults.tunables.peer_credits`, `nodes.client.tunables.conns_per_peer`,
//! `workloads.stream.max_rpcs_in_flight`, `links.0.link.latency`. Paths joined by `+` take
//! the same value together: `nodes.server.nis.0.rails+nodes.client.count=1,2,4,8` scales a
//! server's rails and its clients in step.

use serde::Serialize;
use yaml_serde::{Mapping, Value};

use crate::results::{RunResults, round};
use crate::scenario::{MAX_SWEEP_POINTS, Scenario, ScenarioError};

/// One `PARAM=V1,V2,...` argument.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parameter {
    /// As written (`a+b` for tied paths).
    pub path: String,
    /// The dotted paths that take each value.
    pub paths: Vec<String>,
    pub values: Vec<String>,
}

/// Why a sweep cannot run.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error("{0:?} is not PARAM=V1,V2,... (a dotted path, then values)")]
    Syntax(String),
    #[error("sweep of {0} points, more than {MAX_SWEEP_POINTS}")]
    TooManyPoints(usize),
    #[error("{path}: {reason}")]
    Path { path: String, reason: String },
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
}

impl Parameter {
    pub fn parse(text: &str) -> Result<Self, SweepError> {
        let syntax = || SweepError::Syntax(text.to_owned());
        let (path, values) = text.split_once('=').ok_or_else(syntax)?;
        let values: Vec<String> = values.split(',').map(|v| v.trim().to_owned()).collect();
        let paths: Vec<String> = path.split('+').map(|p| p.trim().to_owned()).collect();
        if paths.iter().any(String::is_empty) || values.iter().any(String::is_empty) {
            return Err(syntax());
        }
        Ok(Self { path: path.to_owned(), paths, values })
    }
}

/// Every combination of the parameters' values, first parameter slowest.
pub fn points(parameters: &[Parameter]) -> Result<Vec<Vec<String>>, SweepError> {
    let count = parameters.iter().try_fold(1usize, |n, p| n.checked_mul(p.values.len()));
    match count {
        Some(n) if n <= MAX_SWEEP_POINTS => {}
        Some(n) => return Err(SweepError::TooManyPoints(n)),
        None => return Err(SweepError::TooManyPoints(usize::MAX)),
    }
    let mut points = vec![Vec::new()];
    for parameter in parameters {
        points = points
            .into_iter()
            .flat_map(|point| {
                parameter.values.iter().map(move |value| {
                    let mut next = point.clone();
                    next.push(value.clone());
                    next
                })
            })
            .collect();
    }
    Ok(points)
}

/// The scenario text with each parameter set to its value in `point`.
pub fn apply(
    text: &str,
    parameters: &[Parameter],
    point: &[String],
) -> Result<Scenario, SweepError> {
    let mut document: Value =
        yaml_serde::from_str(text).map_err(|error| ScenarioError::Yaml(error.to_string()))?;
    for (parameter, value) in parameters.iter().zip(point) {
        let scalar: Value =
            yaml_serde::from_str(value).unwrap_or_else(|_| Value::String(value.clone()));
        for path in &parameter.paths {
            set(&mut document, path, scalar.clone())?;
        }
    }
    let text =
        yaml_serde::to_string(&document).map_err(|error| ScenarioError::Yaml(error.to_string()))?;
    Ok(Scenario::from_yaml(&text)?)
}

fn set(document: &mut Value, path: &str, value: Value) -> Result<(), SweepError> {
    let error =
        |reason: &str| SweepError::Path { path: path.to_owned(), reason: reason.to_owned() };
    let segments: Vec<&str> = path.split('.').collect();
    let Some((last, walk)) = segments.split_last() else { return Err(error("empty path")) };
    let mut at = document;
    for segment in walk {
        at = step(at, segment).ok_or_else(|| error(&format!("nothing at {segment:?}")))?;
    }
    let at = enter_named(at);
    match at {
        Value::Mapping(map) => {
            map.insert(Value::String((*last).to_owned()), value);
            Ok(())
        }
        Value::Sequence(items) => {
            let index: usize = last.parse().map_err(|_| error("a sequence needs an index"))?;
            let slot = items.get_mut(index).ok_or_else(|| error("index out of range"))?;
            *slot = value;
            Ok(())
        }
        _ => Err(error("cannot set a key inside a scalar")),
    }
}

fn step<'a>(value: &'a mut Value, segment: &str) -> Option<&'a mut Value> {
    match enter_named(value) {
        Value::Mapping(map) => {
            let key = Value::String(segment.to_owned());
            if !map.contains_key(&key) {
                map.insert(key.clone(), Value::Mapping(Mapping::new()));
            }
            map.get_mut(&key)
        }
        Value::Sequence(items) => {
            if let Ok(index) = segment.parse::<usize>() {
                return items.get_mut(index);
            }
            items.iter_mut().find(|item| name_of(item) == Some(segment))
        }
        _ => None,
    }
}

/// A one-key map whose value is a map (`brw: {...}`) is entered: paths name workloads by
/// their `name`, not their kind.
fn enter_named(value: &mut Value) -> &mut Value {
    let single = matches!(value, Value::Mapping(map) if map.len() == 1
        && map.values().next().is_some_and(|inner| matches!(inner, Value::Mapping(_)))
        && map.keys().next().and_then(Value::as_str).is_some_and(|k| ["brw", "ping", "rpc_stream"].contains(&k)));
    if !single {
        return value;
    }
    match value {
        Value::Mapping(map) =>
        {
            #[expect(clippy::expect_used, reason = "`single` says the map holds exactly one value")]
            map.values_mut().next().expect("one value")
        }
        other => other,
    }
}

fn name_of(value: &Value) -> Option<&str> {
    let map = value.as_mapping()?;
    if let Some(name) = map.get(Value::String("name".to_owned())).and_then(Value::as_str) {
        return Some(name);
    }
    let inner = map.values().next()?.as_mapping()?;
    (map.len() == 1).then_some(())?;
    inner.get(Value::String("name".to_owned())).and_then(Value::as_str)
}

/// One point's results.
#[derive(Clone, Debug, Serialize)]
pub struct SweepPoint {
    pub values: Vec<String>,
    pub total_bandwidth_mb_per_s: f64,
    pub results: RunResults,
}

/// A sweep's results.
#[derive(Clone, Debug, Serialize)]
pub struct SweepResults {
    pub scenario: String,
    pub seed: u64,
    pub parameters: Vec<String>,
    pub points: Vec<SweepPoint>,
}

impl SweepResults {
    /// Lines to plot: per workload (and per value of the other parameters), bandwidth
    /// against the first parameter (its values where numeric, else their position).
    pub fn plot_series(&self) -> Vec<(String, Vec<(f64, f64)>)> {
        let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
        for (position, point) in self.points.iter().enumerate() {
            let Some(first) = point.values.first() else { continue };
            let x = first.parse::<f64>().unwrap_or(position as f64);
            let others: Vec<String> = self
                .parameters
                .iter()
                .zip(&point.values)
                .skip(1)
                .map(|(name, value)| format!("{}={value}", name.rsplit('.').next().unwrap_or(name)))
                .collect();
            for workload in &point.results.workloads {
                let mut label = workload.name.clone();
                if !others.is_empty() {
                    label = format!("{label} {}", others.join(" "));
                }
                match series.iter_mut().find(|(name, _)| *name == label) {
                    Some((_, points)) => points.push((x, workload.bandwidth_mb_per_s)),
                    None => series.push((label, vec![(x, workload.bandwidth_mb_per_s)])),
                }
            }
        }
        series
    }

    pub fn summary(&self) -> String {
        let mut text = format!(
            "{}: sweep of {} (seed {})\n",
            self.scenario,
            self.parameters.join(", "),
            self.seed
        );
        for point in &self.points {
            text.push_str(&format!(
                "  {}: {:.1} MB/s\n",
                point.values.join(", "),
                round(point.total_bandwidth_mb_per_s)
            ));
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "
duration: 1s
nodes:
  - name: client
    nis: [{net: tcp}]
workloads:
  - rpc_stream: {name: stream, clients: client, servers: client, op: write, rpc_size: 1MiB, max_rpcs_in_flight: 8}
";

    #[test]
    fn parameters_and_points() {
        let a = Parameter::parse("defaults.tunables.peer_credits=8,16").unwrap();
        let b = Parameter::parse("workloads.stream.max_rpcs_in_flight=1,2,4").unwrap();
        assert_eq!(a.values, ["8", "16"]);
        let all = points(&[a, b]).unwrap();
        assert_eq!(all.len(), 6);
        assert_eq!(all[0], ["8", "1"]);
        assert_eq!(all[5], ["16", "4"]);
        assert!(Parameter::parse("nothing").is_err());
        assert!(Parameter::parse("a=1,,2").is_err());
        assert!(Parameter::parse("a+=1").is_err());
        let tied = Parameter::parse("a.b+c.d=1,2").unwrap();
        assert_eq!(tied.paths, ["a.b", "c.d"]);
    }

    #[test]
    fn values_land_where_the_path_says() {
        let parameters = [
            Parameter::parse("defaults.tunables.peer_credits=32").unwrap(),
            Parameter::parse("workloads.stream.max_rpcs_in_flight=4").unwrap(),
            Parameter::parse("nodes.client.tunables.conns_per_peer=2").unwrap(),
        ];
        let scenario = apply(TEXT, &parameters, &["32".into(), "4".into(), "2".into()]).unwrap();
        assert_eq!(scenario.defaults.tunables.peer_credits, Some(32));
        assert_eq!(scenario.workloads[0].parts().1.max_rpcs_in_flight, Some(4));
        assert_eq!(scenario.nodes[0].tunables.conns_per_peer, Some(2));
        // Tied paths take one value: a server's rails and its clients' count in step.
        let tied = [Parameter::parse("nodes.client.nis.0.rails+nodes.client.count=4").unwrap()];
        let scenario = apply(TEXT, &tied, &["4".into()]).unwrap();
        assert_eq!((scenario.nodes[0].nis[0].rails, scenario.nodes[0].count), (4, 4));
        // A misspelt key is refused by the scenario reader, naming it.
        let bad = [Parameter::parse("defaults.tunables.peer_credit=32").unwrap()];
        let error = apply(TEXT, &bad, &["32".into()]).unwrap_err().to_string();
        assert!(error.contains("peer_credit"), "{error}");
    }
}
