//! `ulnet-delayline`: two TUN devices joined by an emulated link (see the library's doc).
//!
//! It creates the devices, prints `ready` on stdout, and moves packets until it is killed, or
//! with `--exit-on-eof` until its standard input closes, when it prints each direction's
//! counters as JSON. Addresses, namespaces and MTUs are set with `ip`, for example:
//!
//! ```text
//! ulnet-delayline --a dl-a --b dl-b --delay 25ms --rate 2Gbit --queue 16MiB &
//! ip link set dl-a netns left; ip -n left addr add 10.250.0.1/24 dev dl-a; ip -n left link set dl-a up
//! ip link set dl-b netns right; ip -n right addr add 10.250.0.2/24 dev dl-b; ip -n right link set dl-b up
//! ```
//!
//! Exit codes: 0 done, 1 a device could not be made or failed, 2 a bad command line.

use std::io::{Read, Write};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use ulnet_delayline::line::{Line, Port};
use ulnet_delayline::link::LinkConfig;
use ulnet_sim::scenario::units::{Bandwidth, Size, Span};

#[derive(Parser)]
#[command(
    name = "ulnet-delayline",
    version,
    about = "Two TUN devices joined by a link with delay, rate, loss and a queue"
)]
struct Cli {
    /// Name of the first TUN device (created).
    #[arg(long)]
    a: String,
    /// Name of the second TUN device (created).
    #[arg(long)]
    b: String,
    /// One-way delay, each direction (25ms).
    #[arg(long, default_value = "0ms")]
    delay: String,
    /// Rate each direction (2Gbit, 250MB/s); unlimited when not given.
    #[arg(long)]
    rate: Option<String>,
    /// Packets lost at random, as a fraction (0.001).
    #[arg(long, default_value_t = 0.0)]
    loss: f64,
    /// Bytes the queue before the rate limit holds (drop-tail).
    #[arg(long, default_value = "4MiB")]
    queue: String,
    /// Bytes charged per packet on top of its length (38: Ethernet framing).
    #[arg(long, default_value_t = 0)]
    overhead: u64,
    /// Seed of the loss draws.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Stop when standard input closes, printing the counters as JSON.
    #[arg(long)]
    exit_on_eof: bool,
}

/// A TUN device as a line's port.
struct Tun(tun::Device);

impl Port for Tun {
    fn recv(&self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.recv(buf)
    }

    fn send(&self, packet: &[u8]) -> std::io::Result<usize> {
        self.0.send(packet)
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let config = match link_config(&cli) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("ulnet-delayline: {error:#}");
            return ExitCode::from(2);
        }
    };
    match run(&cli, config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("ulnet-delayline: {error:#}");
            ExitCode::from(1)
        }
    }
}

fn link_config(cli: &Cli) -> anyhow::Result<LinkConfig> {
    if !(0.0..1.0).contains(&cli.loss) {
        anyhow::bail!("--loss {} is not in [0, 1)", cli.loss);
    }
    Ok(LinkConfig {
        delay: Span::parse(&cli.delay)?.0,
        rate_bytes_per_sec: cli.rate.as_deref().map(Bandwidth::parse).transpose()?.map(|b| b.0),
        overhead_bytes: cli.overhead,
        loss_per_million: (cli.loss * 1e6).round() as u32,
        queue_bytes: Size::parse(&cli.queue)?.0,
    })
}

fn device(name: &str) -> anyhow::Result<Arc<Tun>> {
    let mut config = tun::Configuration::default();
    config.tun_name(name).layer(tun::Layer::L3).platform_config(|platform| {
        // Addresses and the link state are `ip`'s job, in whatever namespace the device goes.
        platform.ensure_root_privileges(false);
    });
    let device = tun::create(&config).with_context(|| format!("TUN device {name}"))?;
    Ok(Arc::new(Tun(device)))
}

fn run(cli: &Cli, config: LinkConfig) -> anyhow::Result<()> {
    let a = device(&cli.a)?;
    let b = device(&cli.b)?;
    let line = Line::start(a, b, config, cli.seed).context("starting the line")?;
    let mut stdout = std::io::stdout();
    writeln!(stdout, "ready")?;
    stdout.flush()?;
    if !cli.exit_on_eof {
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
    let mut sink = Vec::new();
    std::io::stdin().read_to_end(&mut sink)?;
    let [a_to_b, b_to_a] = line.stats();
    let report = serde_json::json!({ "a_to_b": a_to_b, "b_to_a": b_to_a });
    writeln!(stdout, "{report}")?;
    stdout.flush()?;
    if !line.running() {
        anyhow::bail!("a device failed while the line ran");
    }
    Ok(())
}
