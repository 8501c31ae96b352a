//! `steer reorder`: reordering metrics of a capture, and a capture sorted as
//! a SRPIC receiver would deliver it (crate `order`).

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use order::capture::Capture;
use order::metrics::MetricsConfig;
use order::replay::ReplayConfig;
use order::report::{capture_stats, sort_into};
use order::sorter::{SorterConfig, Variant};

use crate::{exit, output};

#[derive(Debug, Subcommand)]
pub enum ReorderCommand {
    /// Per-flow reordering metrics of a pcap/pcapng capture: RFC 4737
    /// (reordered ratio, extent, n-reordering, late time, byte offset) and
    /// RFC 5236 (RD, RBD), from TCP sequence numbers of data segments.
    Stats(StatsArgs),
    /// Write the capture as a SRPIC receiver would deliver it upward.
    ///
    /// Batches (one interrupt's worth) are --batch packets, or end earlier at
    /// an arrival gap over --gap-us. Delivered packets carry the time of the
    /// arrival that released them.
    ///
    /// Example: steer reorder sort in.pcap --block 32 -o sorted.pcap
    Sort(SortArgs),
}

#[derive(Debug, Args)]
pub struct StatsArgs {
    /// The capture (pcap or pcapng; Ethernet, raw IP, Linux cooked, loopback).
    pub file: PathBuf,
    #[command(flatten)]
    pub metrics: MetricsConfig,
    /// Show only flows with at least this many data segments (table and
    /// --json). Default: the table shows every flow with data, --json every
    /// flow.
    #[arg(long, value_name = "N")]
    pub min_packets: Option<u64>,
}

#[derive(Debug, Args)]
pub struct SortArgs {
    /// The capture to sort.
    pub file: PathBuf,
    #[command(flatten)]
    pub sorter: SorterConfig,
    /// Packets per batch (the NAPI budget of one poll).
    #[arg(long, default_value_t = 64)]
    pub batch: usize,
    /// Also end a batch at an inter-arrival gap longer than this (µs);
    /// default: batches end at --batch packets only.
    #[arg(long)]
    pub gap_us: Option<u64>,
    /// Which reading of Listing 1 the sorter follows (docs/srpic.md).
    #[arg(long, value_enum, default_value_t = Variant::Paper)]
    pub variant: Variant,
    /// Where to write the sorted capture (same format as the input).
    #[arg(long, short = 'o')]
    pub output: PathBuf,
}

pub fn run(cmd: ReorderCommand, json: bool) -> anyhow::Result<i32> {
    match cmd {
        ReorderCommand::Stats(args) => stats(args, json),
        ReorderCommand::Sort(args) => sort(args, json),
    }
}

fn read(path: &Path) -> anyhow::Result<Capture> {
    Capture::read_file(path).map_err(|e| match e {
        order::CaptureError::Io { .. } => anyhow::Error::new(e),
        other => anyhow::Error::new(other).context(path.display().to_string()),
    })
}

fn stats(args: StatsArgs, json: bool) -> anyhow::Result<i32> {
    let cap = read(&args.file)?;
    let result = capture_stats(&cap, &args.file, &args.metrics, args.min_packets);
    output::print(json, &result)?;
    Ok(exit::OK)
}

fn sort(args: SortArgs, json: bool) -> anyhow::Result<i32> {
    let cap = read(&args.file)?;
    anyhow::ensure!(args.batch > 0, "--batch must be at least 1");
    let cfg = ReplayConfig {
        sorter: args.sorter.with_variant(args.variant),
        batch: args.batch,
        gap_ns: args.gap_us.map(|us| us.saturating_mul(1000)),
    };
    let result = sort_into(&cap, &args.file, cfg, &args.output)?;
    output::print(json, &result)?;
    Ok(exit::OK)
}
