//! Hand-written SVG plots of a [`SimReport`]: the paper's Fig. 2a (variances)
//! and Fig. 2b (packets processed versus offered load).

use std::fmt::Write;

use crate::sim::SimReport;

const W: f64 = 640.0;
const H: f64 = 360.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 60.0;
const COLORS: [&str; 6] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#e15759", "#76b7b2",
];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn header(out: &mut String, title: &str) {
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
<text x="{}" y="20" text-anchor="middle" font-size="14">{}</text>
"#,
        W / 2.0,
        esc(title)
    );
}

/// A "nice" upper bound for an axis.
fn nice_max(v: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return 1.0;
    }
    let mag = 10f64.powf(v.log10().floor());
    for m in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if m * mag >= v {
            return m * mag;
        }
    }
    10.0 * mag
}

fn y_axis(out: &mut String, max: f64, label: &str, fmt: impl Fn(f64) -> String) {
    let plot_h = H - TOP - BOTTOM;
    for i in 0..=5 {
        let v = max * i as f64 / 5.0;
        let y = TOP + plot_h * (1.0 - i as f64 / 5.0);
        let _ = writeln!(
            out,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            W - RIGHT,
            LEFT - 5.0,
            y + 4.0,
            fmt(v)
        );
    }
    let _ = writeln!(
        out,
        r#"<text x="15" y="{:.1}" transform="rotate(-90 15 {:.1})" text-anchor="middle">{}</text>"#,
        TOP + plot_h / 2.0,
        TOP + plot_h / 2.0,
        esc(label)
    );
}

/// Grouped bars: server and per-core variance (in %) per policy.
pub fn variance_plot(report: &SimReport) -> String {
    let mut out = String::new();
    header(
        &mut out,
        &format!(
            "Variance of packets per 1 s window ({} x {}, speedup {}, amplify {})",
            report.config.servers,
            report.config.cores,
            report.config.speedup,
            report.config.amplify
        ),
    );
    let max = report
        .policies
        .iter()
        .flat_map(|p| [p.core_variance, p.server_variance])
        .flatten()
        .map(|v| v * 100.0)
        .fold(0.0, f64::max);
    let max = nice_max(max);
    y_axis(&mut out, max, "variance (%)", |v| format!("{v:.2}"));
    let plot_w = W - LEFT - RIGHT;
    let plot_h = H - TOP - BOTTOM;
    let n = report.policies.len().max(1) as f64;
    let group = plot_w / n;
    let bar = group * 0.35;
    for (i, p) in report.policies.iter().enumerate() {
        let x0 = LEFT + group * i as f64 + group * 0.15;
        for (j, (v, color)) in [(p.server_variance, "#9c9c9c"), (p.core_variance, "#4e79a7")]
            .iter()
            .enumerate()
        {
            let x = x0 + bar * j as f64;
            // Not measured (no window had a packet): no bar, say so.
            let Some(v) = v else {
                let _ = writeln!(
                    out,
                    r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="9">n/a</text>"#,
                    x + bar / 2.0 - 1.0,
                    TOP + plot_h - 3.0
                );
                continue;
            };
            let h = plot_h * (v * 100.0 / max).min(1.0);
            let _ = writeln!(
                out,
                r#"<rect x="{x:.1}" y="{:.1}" width="{:.1}" height="{h:.1}" fill="{color}"><title>{:.3}%</title></rect><text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="9">{:.2}</text>"#,
                TOP + plot_h - h,
                bar - 2.0,
                v * 100.0,
                x + bar / 2.0 - 1.0,
                TOP + plot_h - h - 3.0,
                v * 100.0
            );
        }
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            x0 + bar,
            H - BOTTOM + 16.0,
            esc(p.name)
        );
    }
    let _ = write!(
        out,
        r##"<rect x="{LEFT}" y="{:.1}" width="10" height="10" fill="#9c9c9c"/><text x="{:.1}" y="{:.1}">server variance</text>
<rect x="{:.1}" y="{:.1}" width="10" height="10" fill="#4e79a7"/><text x="{:.1}" y="{:.1}">per-core variance</text>
</svg>
"##,
        H - 25.0,
        LEFT + 14.0,
        H - 16.0,
        LEFT + 150.0,
        H - 25.0,
        LEFT + 164.0,
        H - 16.0
    );
    out
}

/// Lines: packets processed per second versus offered packets per second.
pub fn throughput_plot(report: &SimReport) -> String {
    let mut out = String::new();
    header(
        &mut out,
        "Packets processed vs offered load (fixed capacity per core)",
    );
    let xmax = report
        .policies
        .iter()
        .flat_map(|p| p.throughput.iter().map(|t| t.offered_pps))
        .fold(0.0, f64::max);
    let ymax = nice_max(xmax);
    let xmin = report
        .policies
        .iter()
        .flat_map(|p| p.throughput.iter().map(|t| t.offered_pps))
        .fold(f64::INFINITY, f64::min);
    let xmin = if xmin.is_finite() { xmin } else { 0.0 };
    let xmax = if xmax > xmin { xmax } else { xmin + 1.0 };
    y_axis(&mut out, ymax, "processed (packets/s)", |v| {
        format!("{v:.0}")
    });
    let plot_w = W - LEFT - RIGHT;
    let plot_h = H - TOP - BOTTOM;
    let px = |x: f64| LEFT + plot_w * (x - xmin) / (xmax - xmin);
    let py = |y: f64| TOP + plot_h * (1.0 - y / ymax);
    for i in 0..=4 {
        let x = xmin + (xmax - xmin) * i as f64 / 4.0;
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{x:.0}</text>"#,
            px(x),
            H - BOTTOM + 16.0
        );
    }
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">offered load (packets/s)</text>"#,
        LEFT + plot_w / 2.0,
        H - BOTTOM + 32.0
    );
    for (i, p) in report.policies.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let points: Vec<String> = p
            .throughput
            .iter()
            .map(|t| format!("{:.1},{:.1}", px(t.offered_pps), py(t.processed_pps)))
            .collect();
        let _ = writeln!(
            out,
            r#"<polyline fill="none" stroke="{color}" stroke-width="2" points="{}"/>"#,
            points.join(" ")
        );
        let lx = LEFT + 10.0 + 95.0 * i as f64;
        let _ = writeln!(
            out,
            r#"<rect x="{lx:.1}" y="{:.1}" width="10" height="10" fill="{color}"/><text x="{:.1}" y="{:.1}">{}</text>"#,
            H - 18.0,
            lx + 14.0,
            H - 9.0,
            esc(p.name)
        );
    }
    out.push_str("</svg>\n");
    out
}
