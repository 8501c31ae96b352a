//! A whole capture measured and sorted: the per-flow RFC 4737/5236 metrics
//! of its TCP data segments ([`capture_reports`], [`capture_stats`]), their totals
//! ([`Totals`]), and the capture replayed through the sorter
//! ([`replay_capture`]) and written sorted ([`sort_into`]). What `steer
//! reorder stats|sort` report, and how they read.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::Path;

use plot::text::{Present, Rows, Table, Text};
use serde::Serialize;

use crate::capture::{Capture, CaptureError};
use crate::metrics::{flow_reports, FlowReport, MetricsConfig};
use crate::replay::{descriptors, parse_capture, replay, Replay, ReplayConfig};
use crate::sorter::{ConfigError, SorterStats};

/// The reordering metrics of every TCP flow of `cap`, in arrival order
/// (frames that do not parse are left out), most data segments first.
pub fn capture_reports(cap: &Capture, cfg: &MetricsConfig) -> Vec<FlowReport> {
    let infos = parse_capture(cap);
    flow_reports(
        cap.packets
            .iter()
            .zip(&infos)
            .filter_map(|(p, i)| Some((p.time_ns, i.as_ref()?))),
        cfg,
    )
}

/// What a SRPIC receiver configured as `cfg` would deliver of `cap`
/// (frames that do not parse are delivered at once).
pub fn replay_capture(cap: &Capture, cfg: &ReplayConfig) -> Result<Replay, ConfigError> {
    let infos = parse_capture(cap);
    replay(&descriptors(cap, &infos), cfg)
}

/// Sums over the flows of a capture.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Reordered data segments.
    pub reordered: u64,
    /// Data segments.
    pub data_segments: u64,
}

impl Totals {
    /// The totals of `cap`'s TCP flows under the default metrics: what
    /// `steer reorder sort` counts before and after sorting.
    pub fn of_capture(cap: &Capture) -> Totals {
        Totals::of(&capture_reports(cap, &MetricsConfig::default()))
    }

    pub fn of(reports: &[FlowReport]) -> Totals {
        Totals {
            reordered: reports.iter().map(|f| f.metrics.reordered).sum(),
            data_segments: reports.iter().map(|f| f.metrics.packets).sum(),
        }
    }
}

/// The reordering metrics of a capture file (`steer reorder stats`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StatsResult {
    pub file: String,
    /// Frames in the capture.
    pub packets: usize,
    pub flows: Vec<FlowReport>,
}

/// The metrics of `cap` (read from `file`), keeping only the flows with at
/// least `min_packets` data segments when given.
pub fn capture_stats(
    cap: &Capture,
    file: &Path,
    cfg: &MetricsConfig,
    min_packets: Option<u64>,
) -> StatsResult {
    let mut flows = capture_reports(cap, cfg);
    if let Some(min) = min_packets {
        flows.retain(|f| f.metrics.packets >= min);
    }
    StatsResult {
        file: file.display().to_string(),
        packets: cap.packets.len(),
        flows,
    }
}

/// One row per flow with data segments (a flow of pure ACKs has no
/// reordering to show; the JSON keeps it).
impl Present for StatsResult {
    fn text(&self) -> Text {
        let header = [
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
        ];
        let with_data = self.flows.iter().filter(|f| f.metrics.packets > 0);
        Table::of(&header, with_data, |f| {
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
        })
        .into()
    }
}

/// A capture sorted into a file (`steer reorder sort`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SortResult {
    pub input: String,
    pub output: String,
    pub config: ReplayConfig,
    /// Frames in the capture (and in the sorted file).
    pub packets: usize,
    pub sorter: SorterStats,
    /// Sum over flows of reordered data segments, before and after.
    pub reordered_before: u64,
    pub reordered_after: u64,
    pub data_segments: u64,
}

/// Why [`sort_into`] could not write the sorted capture.
#[derive(Debug, thiserror::Error)]
pub enum SortError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The output file could not be created or written.
    #[error("{path}")]
    Output {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// The sorted capture could not be written, or not read back.
    #[error("{path}")]
    Capture {
        path: String,
        #[source]
        source: CaptureError,
    },
}

impl SortError {
    /// True when the file may not be written or read back (CLI exit 3).
    pub fn is_environment(&self) -> bool {
        match self {
            SortError::Config(e) => e.is_environment(),
            SortError::Output { source, .. } => {
                source.kind() == std::io::ErrorKind::PermissionDenied
            }
            SortError::Capture { source, .. } => source.is_environment(),
        }
    }

    /// True for a sorter parameter out of range, or an output path that
    /// names no place to write (CLI exit 2).
    pub fn is_bad_input(&self) -> bool {
        match self {
            SortError::Config(e) => e.is_bad_input(),
            SortError::Output { source, .. } => matches!(
                source.kind(),
                std::io::ErrorKind::NotFound
                    | std::io::ErrorKind::IsADirectory
                    | std::io::ErrorKind::NotADirectory
            ),
            SortError::Capture { source, .. } => source.is_bad_input(),
        }
    }
}

/// Replays `cap` (read from `input`) through the sorter as `cfg` says,
/// writes what the receiver delivers to `output` (same format, each packet
/// stamped with the arrival that released it), and reads that file back:
/// the reordering after sorting is measured on the written capture, not on
/// the replay's order.
pub fn sort_into(
    cap: &Capture,
    input: &Path,
    cfg: ReplayConfig,
    output: &Path,
) -> Result<SortResult, SortError> {
    let replayed = replay_capture(cap, &cfg)?;
    let out_path = output.display().to_string();
    let io_err = |source| SortError::Output {
        path: out_path.clone(),
        source,
    };
    let cap_err = |source| SortError::Capture {
        path: out_path.clone(),
        source,
    };
    let mut w = std::io::BufWriter::new(std::fs::File::create(output).map_err(io_err)?);
    cap.write(&mut w, &replayed.order, Some(&replayed.released_by))
        .map_err(cap_err)?;
    w.flush().map_err(io_err)?;
    drop(w);
    let before = Totals::of_capture(cap);
    let after = Totals::of_capture(&Capture::read_file(output).map_err(cap_err)?);
    Ok(SortResult {
        input: input.display().to_string(),
        output: out_path.clone(),
        config: cfg,
        packets: cap.packets.len(),
        sorter: replayed.stats,
        reordered_before: before.reordered,
        reordered_after: after.reordered,
        data_segments: before.data_segments,
    })
}

impl Present for SortResult {
    fn text(&self) -> Text {
        let s = &self.sorter;
        let c = &self.config;
        Rows::new()
            .row(
                "wrote",
                format!("{} ({} packets)", self.output, self.packets),
            )
            .row(
                "block / ring / batch",
                format!(
                    "{} / {} / {}",
                    c.sorter.block_size, c.sorter.ring_size, c.batch
                ),
            )
            .row(
                "held",
                format!("{} ({} out of sequence)", s.held, s.out_of_sequence),
            )
            .row(
                "passed at once",
                format!(
                    "{} unsuitable ({} flushed their flow first), {} table full",
                    s.passed_unsuitable, s.unsuitable_flushes, s.passed_table_full
                ),
            )
            .row(
                "blocks",
                format!("{} (mean {:.1} packets)", s.blocks, s.mean_block()),
            )
            .row(
                "flushes",
                format!(
                    "{} block, {} ring, {} batch",
                    s.block_flushes, s.ring_flushes, s.batches
                ),
            )
            .row(
                "reordered data segments",
                format!(
                    "{} before, {} after (of {})",
                    self.reordered_before, self.reordered_after, self.data_segments
                ),
            )
            .into()
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;
    use crate::capture::write_pcap;
    use crate::sorter::SorterConfig;

    const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
    const ACK: u8 = 0x10;

    /// Segments of 100 bytes of one flow, in the order `order` (segment k
    /// starts at byte 100 k), 1 ms apart.
    fn capture(order: &[u32]) -> Capture {
        let records: Vec<(u64, Vec<u8>)> = order
            .iter()
            .enumerate()
            .map(|(i, &k)| {
                (
                    i as u64 * 1_000_000,
                    testkit::tcp_frame(A, 5000, B, 80, 1000 + k * 100, ACK, 100),
                )
            })
            .collect();
        Capture::read(&write_pcap(1, &records)).unwrap()
    }

    #[test]
    fn one_late_segment_is_one_reordered_of_five() {
        let cap = capture(&[0, 1, 3, 2, 4]);
        let reports = capture_reports(&cap, &MetricsConfig::default());
        assert_eq!(reports.len(), 1);
        assert_eq!((reports[0].sport, reports[0].dport), (5000, 80));
        assert_eq!(
            Totals::of(&reports),
            Totals {
                reordered: 1,
                data_segments: 5
            }
        );
    }

    #[test]
    fn a_replay_in_one_block_delivers_in_sequence() {
        let cap = capture(&[0, 1, 3, 2, 4]);
        let cfg = ReplayConfig {
            sorter: SorterConfig {
                block_size: 8,
                ..SorterConfig::paper()
            },
            batch: 64,
            gap_ns: None,
        };
        let r = replay_capture(&cap, &cfg).unwrap();
        assert_eq!(r.order, [0, 1, 3, 2, 4]);
        assert_eq!(r.stats.held, 5);
    }

    #[test]
    fn totals_of_a_capture_before_and_after_sorting() {
        let late = Totals::of_capture(&capture(&[0, 1, 3, 2, 4, 6, 5]));
        assert_eq!(
            late,
            Totals {
                reordered: 2,
                data_segments: 7
            }
        );
        assert_eq!(
            Totals::of_capture(&capture(&[0, 1, 2, 3, 4, 5, 6])),
            Totals {
                reordered: 0,
                data_segments: 7
            }
        );
    }

    /// The capture of [`capture`] plus the pure ACKs going back.
    fn capture_with_acks(order: &[u32]) -> Capture {
        let mut records: Vec<(u64, Vec<u8>)> = Vec::new();
        for (i, &k) in order.iter().enumerate() {
            let t = i as u64 * 1_000_000;
            records.push((
                t,
                testkit::tcp_frame(A, 5000, B, 80, 1000 + k * 100, ACK, 100),
            ));
            records.push((t + 1, testkit::tcp_frame(B, 80, A, 5000, 1, ACK, 0)));
        }
        Capture::read(&write_pcap(1, &records)).unwrap()
    }

    #[test]
    fn stats_keep_flows_of_at_least_min_packets_and_the_table_shows_flows_with_data() {
        let cap = capture_with_acks(&[0, 1, 3, 2, 4]);
        let file = Path::new("in.pcap");
        let all = capture_stats(&cap, file, &MetricsConfig::default(), None);
        assert_eq!(
            (all.file.as_str(), all.packets, all.flows.len()),
            ("in.pcap", 10, 2)
        );
        let text = all.text().to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(lines[0].starts_with("src") && lines[0].ends_with("max RBD"));
        assert!(lines[1].starts_with("10.0.0.1:5000  10.0.0.2:80"), "{text}");
        assert!(lines[1].contains("20.00%"), "{text}");
        let some = capture_stats(&cap, file, &MetricsConfig::default(), Some(1));
        assert_eq!(some.flows.len(), 1);
        assert_eq!(some.flows[0].metrics.reordered, 1);
        let none = capture_stats(&cap, file, &MetricsConfig::default(), Some(6));
        assert!(none.flows.is_empty());
        assert_eq!(none.text().to_string().lines().count(), 1);
    }

    fn replay_config(block_size: u32) -> ReplayConfig {
        ReplayConfig {
            sorter: SorterConfig {
                block_size,
                ..SorterConfig::paper()
            },
            batch: 64,
            gap_ns: None,
        }
    }

    #[test]
    fn sorting_into_a_file_measures_the_written_capture() {
        let dir = testkit::TempDir::new("order-sort");
        let cap = capture(&[0, 2, 1, 3, 5, 4, 6, 7]);
        let out = dir.join("sorted.pcap");
        let r = sort_into(&cap, Path::new("in.pcap"), replay_config(8), &out).unwrap();
        assert_eq!(
            (
                r.reordered_before,
                r.reordered_after,
                r.data_segments,
                r.packets
            ),
            (2, 0, 8, 8)
        );
        assert_eq!(r.sorter.held, 8);
        let written = Capture::read_file(&out).unwrap();
        assert_eq!(Totals::of_capture(&written).reordered, 0);
        let text = r.text().to_string();
        assert!(
            text.starts_with(&format!(
                "wrote                    {} (8 packets)\n",
                r.output
            )),
            "{text}"
        );
        assert!(text.contains("block / ring / batch     8 / "), "{text}");
        assert!(
            text.ends_with("reordered data segments  2 before, 0 after (of 8)\n"),
            "{text}"
        );
    }

    #[test]
    fn sorting_into_a_missing_directory_or_with_no_block_is_bad_input() {
        let dir = testkit::TempDir::new("order-sort");
        let cap = capture(&[0, 1]);
        let nowhere = dir.join("missing").join("sorted.pcap");
        let err = sort_into(&cap, Path::new("in"), replay_config(8), &nowhere).unwrap_err();
        assert!(matches!(err, SortError::Output { .. }), "{err:?}");
        assert!(err.is_bad_input() && !err.is_environment());
        assert_eq!(err.to_string(), nowhere.display().to_string());
        let err = sort_into(&cap, Path::new("in"), replay_config(0), &dir.join("x")).unwrap_err();
        assert!(matches!(err, SortError::Config(ConfigError::ZeroBlockSize)));
        assert!(err.is_bad_input());
        assert!(!dir.join("x").exists(), "nothing written for a bad config");
    }

    #[test]
    fn an_empty_capture_has_no_flows() {
        let cap = Capture::read(&write_pcap(1, &[])).unwrap();
        let reports = capture_reports(&cap, &MetricsConfig::default());
        assert!(reports.is_empty());
        assert_eq!(Totals::of(&reports), Totals::default());
    }
}
