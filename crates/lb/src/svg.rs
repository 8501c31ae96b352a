//! The simulator's figures, drawn with [`plot`]: the paper's Fig. 2a
//! (variances), Fig. 2b (packets processed versus offered load), and the
//! per-core variance against the window length (docs/crossrss.md, "What
//! limits the margin").

use plot::{BarChart, LineChart, Point, Value, XAxis};

use crate::limits::{SweepReport, WindowPoint};
use crate::sim::SimReport;

/// Grouped bars: server and per-core variance (in %) per policy; a policy
/// whose variance was not measured (no window had a packet) has no bar.
pub fn variance_plot(report: &SimReport) -> String {
    let percent = |v: Option<f64>| v.map(|v| Value::new(v * 100.0));
    let c = &report.config;
    BarChart::new(&format!(
        "Variance of packets per {} s window ({} x {}, speedup {}, amplify {})",
        c.window_s, c.servers, c.cores, c.speedup, c.amplify
    ))
    .x_label("policy")
    .y_label("variance (%)")
    .groups(report.policies.iter().map(|p| p.name))
    .series(
        "server variance",
        report
            .policies
            .iter()
            .map(|p| percent(p.server_variance))
            .collect(),
    )
    .series(
        "per-core variance",
        report
            .policies
            .iter()
            .map(|p| percent(p.core_variance))
            .collect(),
    )
    .svg()
}

/// Lines: packets processed per second versus offered packets per second,
/// one per policy.
pub fn throughput_plot(report: &SimReport) -> String {
    report
        .policies
        .iter()
        .fold(
            LineChart::new(
                "Packets processed vs offered load (fixed capacity per core)",
                XAxis::Linear,
            )
            .x_label("offered load (packets/s)")
            .y_label("processed (packets/s)"),
            |chart, p| {
                let points = p
                    .throughput
                    .iter()
                    .map(|t| Point {
                        x: t.offered_pps,
                        value: Value::new(t.processed_pps),
                    })
                    .collect();
                chart.series(p.name, points)
            },
        )
        .svg()
}

/// Reads one reference value (oracle, floor) of a sweep point.
type Reference = fn(&WindowPoint) -> Option<f64>;

/// Lines: per-core variance (in %) against the window length, one per
/// policy, then the clairvoyant online placement, the offline oracle and the
/// indivisibility floor. A value that was not measured has no point.
pub fn window_sweep_plot(report: &SweepReport) -> String {
    let labels = report.points.iter().map(|p| format!("{} s", p.window_s));
    let c = &report.config;
    let mut chart = LineChart::new(
        &format!(
            "Per-core variance vs window length ({} x {}, speedup {}, amplify {})",
            c.servers, c.cores, c.speedup, c.amplify
        ),
        XAxis::Categories(labels.collect()),
    )
    .x_label("measurement window")
    .y_label("per-core variance (%)");
    let line = |values: &mut dyn Iterator<Item = Option<f64>>| -> Vec<Point> {
        values
            .enumerate()
            .filter_map(|(i, v)| {
                v.map(|v| Point {
                    x: i as f64,
                    value: Value::new(v * 100.0),
                })
            })
            .collect()
    };
    let names: Vec<&str> = report
        .points
        .first()
        .map(|p| p.policies.iter().map(|v| v.name).collect())
        .unwrap_or_default();
    for (k, name) in names.iter().enumerate() {
        let mut values = report.points.iter().map(|p| p.policies[k].core_variance);
        chart = chart.series(name, line(&mut values));
    }
    let extra: [(&str, Reference); 3] = [
        ("clairvoyant online", |p| p.clairvoyant_online),
        ("offline oracle", |p| p.oracle),
        ("floor", |p| p.stats.map(|s| s.floor)),
    ];
    for (name, get) in extra {
        chart = chart.series(name, line(&mut report.points.iter().map(get)));
    }
    chart.svg()
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};

    use super::*;
    use crate::sim::{simulate, Policy, SimConfig};
    use crate::trace::{Trace, TracePacket, TraceStats};

    /// Three seconds of 40 flows.
    fn trace() -> Trace {
        let packets = (0..3000u64)
            .map(|i| TracePacket {
                ts_ns: i * 1_000_000,
                tuple: rss::FlowTuple::new(
                    IpAddr::V4(Ipv4Addr::new(10, 0, 0, (i % 40) as u8 + 1)),
                    1000 + (i % 40) as u16,
                    IpAddr::V4(Ipv4Addr::new(10, 0, 1, 1)),
                    80,
                    rss::L4Proto::Tcp,
                ),
            })
            .collect();
        Trace {
            link_type: 101,
            packets,
            stats: TraceStats::default(),
        }
    }

    /// [`trace`] simulated under two policies.
    fn report() -> SimReport {
        simulate(
            "synthetic",
            &trace(),
            SimConfig::default(),
            &[Policy::Rr, Policy::Hash],
            |_, _| {},
        )
        .unwrap()
    }

    #[test]
    fn variance_figure() {
        let r = report();
        let o = plot::outline(&variance_plot(&r)).unwrap();
        assert!(o.title.starts_with("Variance of packets per 1 s window"));
        assert_eq!(o.y_label, "variance (%)");
        assert_eq!(o.x_label, "policy");
        assert_eq!(o.legend, vec!["server variance", "per-core variance"]);
        let names: Vec<&str> = r.policies.iter().map(|p| p.name).collect();
        assert_eq!(o.x_ticks, names);
        assert_eq!((o.bars, o.not_available, o.note), (4, 0, None));
    }

    #[test]
    fn variance_figure_without_a_measured_variance() {
        let mut r = report();
        r.policies[0].core_variance = None;
        r.policies[0].server_variance = None;
        let o = plot::outline(&variance_plot(&r)).unwrap();
        assert_eq!((o.bars, o.not_available), (2, 2));
        assert_eq!(o.note.as_deref(), Some(plot::NOT_MEASURED));
    }

    #[test]
    fn window_sweep_figure() {
        let policies = [Policy::Rr, Policy::Hash];
        let sweep = crate::limits::sweep(
            "synthetic",
            &trace(),
            SimConfig::default(),
            &[0.5, 1.0],
            &policies,
        )
        .unwrap();
        let o = plot::outline(&window_sweep_plot(&sweep)).unwrap();
        assert!(o.title.starts_with("Per-core variance vs window length"));
        assert_eq!(o.x_ticks, vec!["0.5 s", "1 s"]);
        assert_eq!(
            o.legend,
            vec![
                "rr",
                "hash",
                "clairvoyant online",
                "offline oracle",
                "floor"
            ]
        );
        assert_eq!(o.points, 10);
    }

    #[test]
    fn throughput_figure() {
        let mut r = report();
        let o = plot::outline(&throughput_plot(&r)).unwrap();
        assert!(o.title.starts_with("Packets processed vs offered load"));
        assert_eq!(o.x_label, "offered load (packets/s)");
        assert_eq!(o.y_label, "processed (packets/s)");
        let names: Vec<&str> = r.policies.iter().map(|p| p.name).collect();
        assert_eq!(o.legend, names);
        let n: usize = r.policies.iter().map(|p| p.throughput.len()).sum();
        assert!(n > 0);
        assert_eq!(o.points, n);
        // A policy without a curve: listed as n/a, nothing drawn for it.
        r.policies[1].throughput.clear();
        let o = plot::outline(&throughput_plot(&r)).unwrap();
        assert_eq!(o.legend[1], format!("{} (n/a)", r.policies[1].name));
        assert_eq!(o.points, r.policies[0].throughput.len());
    }
}
