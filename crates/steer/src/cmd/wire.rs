//! `steer wire up|down|run|srpic`: the impairment wire between the lab's
//! hosts and the SRPIC receive path in the receiver (crate `wire`).

use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use lab::{Lab, LabSpec, WiredStatus};
use wire::{DriverArgs, DriverRun, WireConfig, WireRun, WireSpecs};

use crate::{exit, output};

#[derive(Debug, Subcommand)]
pub enum WireCommand {
    /// Build a lab whose two hosts are joined through a wire namespace
    /// (snd —veth— NAME-wire —veth— rcv; IPv6 off, no software RSS).
    ///
    /// Example: steer wire up --lab wt1
    Up(WireLab),
    /// Tear the lab down (same as `steer lab down`).
    Down(WireLab),
    /// Forward between the wire namespace's two devices, applying delay,
    /// loss and a rate limit per direction; prints the counters at the end.
    Run(RunArgs),
    /// Run the SRPIC receive path in the lab's receiver: poll its veth in
    /// batches, sort each batch (or not, with --no-sort), inject through a
    /// TAP carrying the receiver's address.
    Srpic(SrpicArgs),
}

/// The lab `wire up` and `wire down` work on: `--lab NAME` (a bare NAME is
/// the older spelling, still accepted).
#[derive(Debug, Args)]
pub struct WireLab {
    /// Name of the lab; its namespaces are NAME-snd, NAME-wire, NAME-rcv.
    #[arg(
        long = "lab",
        value_name = "NAME",
        required_unless_present = "lab_positional"
    )]
    lab: Option<String>,
    /// The lab name as a bare argument (`steer wire up wt1`).
    #[arg(value_name = "NAME", hide = true, conflicts_with = "lab")]
    lab_positional: Option<String>,
}

impl WireLab {
    /// The lab name, however it was given.
    pub fn name(&self) -> &str {
        self.lab
            .as_deref()
            .or(self.lab_positional.as_deref())
            .unwrap_or_default()
    }
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The lab (built with `steer wire up`).
    #[arg(long, value_name = "NAME")]
    pub lab: String,
    #[command(flatten)]
    pub specs: WireSpecs,
    /// Seed of the delay and loss draws.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Seconds to run.
    #[arg(long, default_value_t = 10)]
    pub seconds: u64,
}

#[derive(Debug, Args)]
pub struct SrpicArgs {
    /// The lab (built with `steer wire up`).
    #[arg(long, value_name = "NAME")]
    pub lab: String,
    #[command(flatten)]
    pub driver: DriverArgs,
    /// Seconds to run.
    #[arg(long, default_value_t = 10)]
    pub seconds: u64,
}

pub fn run(cmd: WireCommand, json: bool) -> anyhow::Result<i32> {
    match cmd {
        WireCommand::Up(lab) => up(lab.name(), json),
        WireCommand::Down(lab) => super::lab::down(lab.name(), json),
        WireCommand::Run(args) => forward(args, json),
        WireCommand::Srpic(args) => srpic(args, json),
    }
}

fn up(name: &str, json: bool) -> anyhow::Result<i32> {
    let lab = Lab::up(&LabSpec::wired(name))?;
    output::print(json, &WiredStatus::of(&lab)?)?;
    Ok(exit::OK)
}

fn forward(args: RunArgs, json: bool) -> anyhow::Result<i32> {
    // Bad specs are refused before anything is touched.
    let (a_to_b, b_to_a) = args.specs.impairments()?;
    let lab = Lab::open(&args.lab)?;
    let w = lab.wire().with_context(|| {
        format!(
            "lab {} has no wire (build it with `steer wire up`)",
            args.lab
        )
    })?;
    let mut cfg = WireConfig::new(Some(&w.netns), &w.sender_dev, &w.receiver_dev);
    cfg.a_to_b = a_to_b;
    cfg.b_to_a = b_to_a;
    cfg.seed = args.seed;
    let mut wire = wire::Wire::open(&cfg)?;
    let duration = Duration::from_secs(args.seconds);
    output::note!("{}", cfg.start_line(&args.lab, duration));
    let stats = wire.run_for(duration)?;
    output::print(json, &WireRun { config: cfg, stats })?;
    Ok(exit::OK)
}

fn srpic(args: SrpicArgs, json: bool) -> anyhow::Result<i32> {
    let lab = Lab::open(&args.lab)?;
    let rcv = lab.receiver();
    let cfg = args.driver.config(&rcv.netns, &rcv.dev, rcv.ipv4, 24);
    let mut driver = wire::Driver::open(&cfg)?;
    let duration = Duration::from_secs(args.seconds);
    output::note!("{}", cfg.start_line(duration));
    let stats = driver.run_for(duration)?;
    output::print(json, &DriverRun { config: cfg, stats })?;
    Ok(exit::OK)
}
