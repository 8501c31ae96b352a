//! `steer reorder`: reordering metrics of a capture, and a capture sorted as
//! a SRPIC receiver would deliver it (crate `order`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::{Args, Subcommand};
use order::capture::Capture;
use order::metrics::{FlowReport, MetricsConfig};
use order::replay::ReplayConfig;
use order::report::{capture_reports, replay_capture, Totals};
use order::sorter::{SorterConfig, SorterStats, Variant};
use serde::Serialize;

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

#[derive(Serialize)]
struct StatsResult {
    file: String,
    packets: usize,
    flows: Vec<FlowReport>,
}

fn read(path: &Path) -> anyhow::Result<Capture> {
    Capture::read_file(path).map_err(|e| match e {
        order::CaptureError::Io { .. } => anyhow::Error::new(e),
        other => anyhow::Error::new(other).context(path.display().to_string()),
    })
}

fn stats(args: StatsArgs, json: bool) -> anyhow::Result<i32> {
    let cap = read(&args.file)?;
    let mut flows = capture_reports(&cap, &args.metrics);
    if let Some(min) = args.min_packets {
        flows.retain(|f| f.metrics.packets >= min);
    }
    let result = StatsResult {
        file: args.file.display().to_string(),
        packets: cap.packets.len(),
        flows,
    };
    if json {
        output::json(&result)?;
        return Ok(exit::OK);
    }
    output::table_of(
        &[
            "src",
            "dst",
            "data segs",
            "dups",
            "reordered",
            "ratio",
            "max extent",
            "max late ms",
            "max bytes",
            "max RBD",
        ],
        result.flows.iter().filter(|f| f.metrics.packets > 0),
        |f| {
            let m = &f.metrics;
            vec![
                SocketAddr::new(f.src, f.sport).to_string(),
                SocketAddr::new(f.dst, f.dport).to_string(),
                m.packets.to_string(),
                m.duplicates.to_string(),
                m.reordered.to_string(),
                format!("{:.2}%", m.reordered_ratio * 100.0),
                m.max_extent.to_string(),
                format!("{:.3}", m.max_late_time_ns as f64 / 1e6),
                m.max_byte_offset.to_string(),
                m.max_buffer_occupancy.to_string(),
            ]
        },
    )?;
    Ok(exit::OK)
}

#[derive(Serialize)]
struct SortResult {
    input: String,
    output: String,
    config: ReplayConfig,
    packets: usize,
    sorter: SorterStats,
    /// Sum over flows of reordered data segments, before and after.
    reordered_before: u64,
    reordered_after: u64,
    data_segments: u64,
}

fn sort(args: SortArgs, json: bool) -> anyhow::Result<i32> {
    let cap = read(&args.file)?;
    anyhow::ensure!(args.batch > 0, "--batch must be at least 1");
    let cfg = ReplayConfig {
        sorter: args.sorter.with_variant(args.variant),
        batch: args.batch,
        gap_ns: args.gap_us.map(|us| us.saturating_mul(1000)),
    };
    let result = replay_capture(&cap, &cfg)?;
    let file = std::fs::File::create(&args.output)
        .with_context(|| format!("{}", args.output.display()))?;
    let mut w = std::io::BufWriter::new(file);
    cap.write(&mut w, &result.order, Some(&result.released_by))?;
    std::io::Write::flush(&mut w)?;

    let before = Totals::of_capture(&cap);
    let after = Totals::of_capture(&read(&args.output)?);
    let out = SortResult {
        input: args.file.display().to_string(),
        output: args.output.display().to_string(),
        config: cfg,
        packets: cap.packets.len(),
        sorter: result.stats,
        reordered_before: before.reordered,
        reordered_after: after.reordered,
        data_segments: before.data_segments,
    };
    if json {
        output::json(&out)?;
    } else {
        let s = &out.sorter;
        output::rows(&[
            ("wrote", format!("{} ({} packets)", out.output, out.packets)),
            (
                "block / ring / batch",
                format!(
                    "{} / {} / {}",
                    cfg.sorter.block_size, cfg.sorter.ring_size, cfg.batch
                ),
            ),
            (
                "held",
                format!("{} ({} out of sequence)", s.held, s.out_of_sequence),
            ),
            (
                "passed at once",
                format!(
                    "{} unsuitable ({} flushed their flow first), {} table full",
                    s.passed_unsuitable, s.unsuitable_flushes, s.passed_table_full
                ),
            ),
            (
                "blocks",
                format!("{} (mean {:.1} packets)", s.blocks, s.mean_block()),
            ),
            (
                "flushes",
                format!(
                    "{} block, {} ring, {} batch",
                    s.block_flushes, s.ring_flushes, s.batches
                ),
            ),
            (
                "reordered data segments",
                format!(
                    "{} before, {} after (of {})",
                    out.reordered_before, out.reordered_after, out.data_segments
                ),
            ),
        ])?;
    }
    Ok(exit::OK)
}
