//! `steer wire up|down|run|srpic`: the impairment wire between the lab's
//! hosts and the SRPIC receive path in the receiver (crate `wire`).

use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use lab::{Lab, LabSpec};
use wire::{DirectionStats, DriverConfig, WireConfig, WireSpecs};

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
    /// Deliver in ring order (the control: same path, no sorting).
    #[arg(long)]
    pub no_sort: bool,
    /// Most frames per poll (NAPI weight).
    #[arg(long, default_value_t = 64)]
    pub budget: usize,
    /// Interrupt coalescing interval, µs.
    #[arg(long, default_value_t = 50)]
    pub coalesce_us: u64,
    /// SRPIC BlockSize.
    #[arg(long, default_value_t = 32)]
    pub block: u32,
    /// The GRO path: an IFF_NAPI TAP with GRO on and threaded NAPI, its
    /// poll thread and the driver on one CPU, so GRO merges each delivered
    /// batch (default: the plain TAP path, no GRO).
    #[arg(long)]
    pub gro: bool,
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
    let status = Lab::status(lab.name())?;
    if json {
        output::json(&serde_json::json!({ "lab": status, "wire": lab.wire() }))?;
    } else {
        println!("{status}");
        if let Some(w) = lab.wire() {
            println!(
                "wire netns: {} ({} <-> {})",
                w.netns, w.sender_dev, w.receiver_dev
            );
        }
    }
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
    let seconds = args.seconds;
    output::note!(
        "wire {}: forward {} loss {:?}, reverse {} loss {:?}, rate {} bit/s, {} s",
        args.lab,
        cfg.a_to_b.delay,
        cfg.a_to_b.loss,
        cfg.b_to_a.delay,
        cfg.b_to_a.loss,
        cfg.a_to_b.rate_bps,
        seconds
    );
    let st = wire.run_for(Duration::from_secs(seconds))?;
    if json {
        output::json(&serde_json::json!({ "config": cfg, "stats": st }))?;
        return Ok(exit::OK);
    }
    output::table_of(
        &[
            "direction",
            "in",
            "out",
            "drop policy",
            "drop overload",
            "queued",
            "reordered",
            "CE marked",
            "mean queue frames",
            "dup ACKs",
            "err p50 us",
            "err p99 us",
        ],
        [("snd->rcv", &st.a_to_b), ("rcv->snd", &st.b_to_a)],
        |(name, d): (&str, &DirectionStats)| {
            let c = d.counters;
            vec![
                name.to_string(),
                c.packets_in.to_string(),
                c.packets_out.to_string(),
                c.dropped_policy.to_string(),
                c.dropped_overload.to_string(),
                c.queued.to_string(),
                c.reordered.to_string(),
                c.ce_marked.to_string(),
                output::measured(c.mean_queue_frames(), 1),
                d.dup_acks.to_string(),
                output::measured(d.delay_error.map(|e| e.p50_us), 0),
                output::measured(d.delay_error.map(|e| e.p99_us), 0),
            ]
        },
    )?;
    Ok(exit::OK)
}

fn srpic(args: SrpicArgs, json: bool) -> anyhow::Result<i32> {
    let lab = Lab::open(&args.lab)?;
    let rcv = lab.receiver().clone();
    let mut cfg = DriverConfig::new(&rcv.netns, &rcv.dev, rcv.ipv4, 24);
    cfg.sort = !args.no_sort;
    cfg.budget = args.budget;
    cfg.coalesce_us = args.coalesce_us;
    cfg.sorter.block_size = args.block;
    cfg.gro = args.gro;
    let mut driver = wire::Driver::open(&cfg)?;
    let seconds = args.seconds;
    output::note!(
        "srpic driver in {} ({} -> {}, {}): budget {}, coalesce {} us, block {}, {} s",
        rcv.netns,
        rcv.dev,
        cfg.tap,
        if cfg.sort { "sorting" } else { "no sort" },
        cfg.budget,
        cfg.coalesce_us,
        args.block,
        seconds
    );
    let st = driver.run_for(Duration::from_secs(seconds))?;
    if json {
        output::json(&serde_json::json!({ "config": cfg, "stats": st }))?;
        return Ok(exit::OK);
    }
    output::rows(&[
        ("packets in", st.packets_in.to_string()),
        ("packets out", st.packets_out.to_string()),
        ("inject errors", st.inject_errors.to_string()),
        (
            "ring drops",
            output::or_na(st.ring_drops, |n| n.to_string()),
        ),
        ("ACKs out", st.acks_out.to_string()),
        ("batches", st.batches.to_string()),
        ("mean batch", output::measured(st.mean_batch, 1)),
        ("mean per-flow block", output::measured(st.mean_block, 1)),
        ("held", st.sorter.held.to_string()),
        ("out of sequence", st.sorter.out_of_sequence.to_string()),
        (
            "added delay p50 / p99 us",
            format!(
                "{} / {}",
                output::measured(st.added_delay.map(|d| d.p50_us), 0),
                output::measured(st.added_delay.map(|d| d.p99_us), 0)
            ),
        ),
    ])?;
    Ok(exit::OK)
}
