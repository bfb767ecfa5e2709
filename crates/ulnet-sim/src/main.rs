//! `ulnet-sim`: run a scenario, sweep its parameters, or measure the simulator.
//!
//! Exit codes: 0 done, 1 the run broke an invariant (or livelocked), 2 a bad command line or
//! scenario.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use ulnet_proto::time::Time;
use ulnet_sim::bench::{self, BenchOptions};
use ulnet_sim::plot;
use ulnet_sim::results::RunResults;
use ulnet_sim::scenario::Scenario;
use ulnet_sim::sweep::{self, Parameter, SweepPoint, SweepResults};
use ulnet_sim::world::{RunError, RunOptions, World};

#[derive(Parser)]
#[command(
    name = "ulnet-sim",
    version,
    about = "Whole LNet clusters on virtual time, running ulnet's real engines"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a scenario: results as JSON and a bandwidth plot (SVG) in the output directory.
    Run {
        file: PathBuf,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Print the results as JSON on stdout (instead of a summary).
        #[arg(long)]
        json: bool,
        /// Where results and plots go.
        #[arg(long, default_value = "sim-results")]
        out: PathBuf,
        /// Skip the invariant checks after every step (faster; the final checks still run).
        #[arg(long)]
        no_check: bool,
    },
    /// Run a scenario once per combination of values: PARAM=V1,V2,... with PARAM a dotted
    /// path into the scenario (defaults.tunables.peer_credits, workloads.NAME.concurrency).
    Sweep {
        file: PathBuf,
        #[arg(required = true)]
        parameters: Vec<String>,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[arg(long)]
        json: bool,
        #[arg(long, default_value = "sim-results")]
        out: PathBuf,
        #[arg(long)]
        no_check: bool,
    },
    /// Tunables for a long fat link, checked by simulating one client and one server.
    Advise {
        /// Bandwidth of each rail (100Gbit, 12.5GB/s).
        #[arg(long)]
        bandwidth: String,
        /// Round trip time (50.5ms).
        #[arg(long)]
        rtt: String,
        #[arg(long, default_value_t = 1)]
        rails: u32,
        #[arg(long, default_value_t = 9000)]
        mtu: u32,
        /// A router between client and server (one rail): its credits and buffers too.
        #[arg(long)]
        routers: bool,
        /// Only compute the advice, do not simulate it.
        #[arg(long)]
        no_check: bool,
        #[arg(long)]
        json: bool,
    },
    /// Measure the simulator: NODES nodes pinging their neighbours.
    Bench {
        #[arg(long)]
        nodes: u64,
        /// Stop after this many simulated LNet messages.
        #[arg(long, default_value_t = 2_000_000)]
        messages: u64,
        /// Ping RPCs each node keeps in flight.
        #[arg(long, default_value_t = 4)]
        concurrency: u32,
        /// Run the invariant checkers after every step too.
        #[arg(long)]
        check: bool,
        /// Only build the nodes: the memory of idle nodes.
        #[arg(long)]
        idle: bool,
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Run { file, seed, json, out, no_check } => run(&file, seed, json, &out, !no_check),
        Command::Sweep { file, parameters, seed, json, out, no_check } => {
            sweep_command(&file, &parameters, seed, json, &out, !no_check)
        }
        Command::Advise { bandwidth, rtt, rails, mtu, routers, no_check, json } => {
            advise_command(&bandwidth, &rtt, rails, mtu, routers, !no_check, json)
        }
        Command::Bench { nodes, messages, concurrency, check, idle, json } => bench_command(
            BenchOptions { nodes, messages, concurrency, check_invariants: check, idle },
            json,
        ),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("ulnet-sim: {error:#}");
            let violation = error.chain().any(|cause| {
                matches!(
                    cause.downcast_ref::<RunError>(),
                    Some(RunError::Violation { .. } | RunError::Livelock { .. })
                )
            });
            ExitCode::from(if violation { 1 } else { 2 })
        }
    }
}

fn read(file: &Path) -> anyhow::Result<(String, String)> {
    let metadata = std::fs::metadata(file).with_context(|| format!("{}", file.display()))?;
    if metadata.len() > ulnet_sim::scenario::MAX_SCENARIO_BYTES as u64 {
        anyhow::bail!(
            "{}: larger than {} bytes",
            file.display(),
            ulnet_sim::scenario::MAX_SCENARIO_BYTES
        );
    }
    let text = std::fs::read_to_string(file).with_context(|| format!("{}", file.display()))?;
    let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("scenario").to_owned();
    Ok((text, stem))
}

/// Runs one scenario with a progress bar on stderr when stdout is a terminal.
fn simulate(scenario: &Scenario, name: &str, seed: u64, check: bool) -> anyhow::Result<RunResults> {
    let mut world = World::new(scenario, RunOptions { seed, check_invariants: check })?;
    let end = world.end().as_nanos();
    let bar = if std::io::stdout().is_terminal() {
        let bar =
            ProgressBar::with_draw_target(Some(end / 1_000_000), ProgressDrawTarget::stderr());
        if let Ok(style) =
            ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} ms virtual, {elapsed} wall")
        {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(name.to_owned());
        bar
    } else {
        ProgressBar::hidden()
    };
    let mut progress = |now: Time| bar.set_position(now.as_nanos() / 1_000_000);
    let outcome = world.run(&mut progress);
    bar.finish_and_clear();
    outcome?;
    Ok(RunResults::from_world(&world, name, seed))
}

fn run(file: &Path, seed: u64, json: bool, out: &Path, check: bool) -> anyhow::Result<()> {
    let (text, stem) = read(file)?;
    let scenario = Scenario::from_yaml(&text).with_context(|| format!("{}", file.display()))?;
    let name = scenario.name_or(&stem).to_owned();
    let results = simulate(&scenario, &name, seed, check)?;
    let document = serde_json::to_string_pretty(&results)?;
    std::fs::create_dir_all(out).with_context(|| format!("{}", out.display()))?;
    let json_path = out.join(format!("{name}.json"));
    std::fs::write(&json_path, format!("{document}\n"))
        .with_context(|| format!("{}", json_path.display()))?;
    let svg_path = out.join(format!("{name}-bandwidth.svg"));
    std::fs::write(&svg_path, plot::bandwidth_over_time(&results)?)
        .with_context(|| format!("{}", svg_path.display()))?;
    if json {
        println!("{document}");
    } else {
        print!("{}", results.summary());
        println!("results: {}, plot: {}", json_path.display(), svg_path.display());
    }
    Ok(())
}

fn sweep_command(
    file: &Path,
    arguments: &[String],
    seed: u64,
    json: bool,
    out: &Path,
    check: bool,
) -> anyhow::Result<()> {
    let (text, stem) = read(file)?;
    let parameters: Vec<Parameter> =
        arguments.iter().map(|a| Parameter::parse(a)).collect::<Result<_, _>>()?;
    let points = sweep::points(&parameters)?;
    let mut results = Vec::new();
    let mut name = stem.clone();
    for values in points {
        let scenario = sweep::apply(&text, &parameters, &values)
            .with_context(|| format!("{} with {}", file.display(), values.join(", ")))?;
        name = scenario.name_or(&stem).to_owned();
        let label = format!("{name} {}", values.join(","));
        let run = simulate(&scenario, &label, seed, check)?;
        results.push(SweepPoint {
            values,
            total_bandwidth_mb_per_s: run.total_bandwidth(),
            results: run,
        });
    }
    let sweep = SweepResults {
        scenario: name.clone(),
        seed,
        parameters: parameters.iter().map(|p| p.path.clone()).collect(),
        points: results,
    };
    let document = serde_json::to_string_pretty(&sweep)?;
    std::fs::create_dir_all(out).with_context(|| format!("{}", out.display()))?;
    let json_path = out.join(format!("{name}-sweep.json"));
    std::fs::write(&json_path, format!("{document}\n"))
        .with_context(|| format!("{}", json_path.display()))?;
    let svg_path = out.join(format!("{name}-sweep.svg"));
    let title = format!(
        "{name}: bandwidth against {}",
        sweep.parameters.first().map_or("", String::as_str)
    );
    let parameter = sweep.parameters.first().cloned().unwrap_or_default();
    std::fs::write(&svg_path, plot::sweep(&title, &parameter, &sweep.plot_series())?)
        .with_context(|| format!("{}", svg_path.display()))?;
    if json {
        println!("{document}");
    } else {
        print!("{}", sweep.summary());
        println!("results: {}, plot: {}", json_path.display(), svg_path.display());
    }
    Ok(())
}

fn advise_command(
    bandwidth: &str,
    rtt: &str,
    rails: u32,
    mtu: u32,
    routers: bool,
    check: bool,
    json: bool,
) -> anyhow::Result<()> {
    let request = ulnet_sim::advise::AdviseRequest {
        bandwidth: ulnet_sim::scenario::units::Bandwidth::parse(bandwidth)?,
        rtt: ulnet_sim::scenario::units::Span::parse(rtt)?,
        rails,
        mtu,
        routers,
        check,
    };
    let advice = ulnet_sim::advise::advise(request)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&advice)?);
    } else {
        print!("{}", advice.text());
    }
    Ok(())
}

fn bench_command(options: BenchOptions, json: bool) -> anyhow::Result<()> {
    let report = bench::run(options)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "{} nodes: {} LNet messages ({} RPCs, {:.3} s simulated) in {:.2} s wall: {:.0} messages/s; \
             build {:.2} s, RSS after build {} MiB, peak RSS {} MiB{}",
            report.nodes,
            report.messages,
            report.rpcs,
            report.simulated_seconds,
            report.wall_seconds,
            report.messages_per_wall_second,
            report.build_wall_seconds,
            report.rss_after_build_bytes >> 20,
            report.peak_rss_bytes >> 20,
            if report.invariant_checks { ", invariants checked every step" } else { "" }
        );
    }
    Ok(())
}
