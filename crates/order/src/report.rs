//! A whole capture measured and sorted: the per-flow RFC 4737/5236 metrics
//! of its TCP data segments ([`capture_reports`]), their totals
//! ([`Totals`]), and the capture replayed through the sorter
//! ([`replay_capture`]). What `steer reorder stats|sort` report.

use crate::capture::Capture;
use crate::metrics::{flow_reports, FlowReport, MetricsConfig};
use crate::replay::{descriptors, parse_capture, replay, Replay, ReplayConfig};
use crate::sorter::ConfigError;

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

    #[test]
    fn an_empty_capture_has_no_flows() {
        let cap = Capture::read(&write_pcap(1, &[])).unwrap();
        let reports = capture_reports(&cap, &MetricsConfig::default());
        assert!(reports.is_empty());
        assert_eq!(Totals::of(&reports), Totals::default());
    }
}
