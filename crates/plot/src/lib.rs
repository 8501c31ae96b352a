//! Steer's figures: grouped bar charts and line charts written as
//! self-contained SVG 1.1, all in one style: a title, a y axis and an x
//! axis each labelled with its unit, light grid lines, one palette, and a
//! legend under the plot. Every text is escaped ([`esc`]).
//!
//! A value that was not measured is `None`: it gets no bar or point, an
//! "n/a" in its place, and the legend says what "n/a" means. Nothing is
//! drawn as 0.
//!
//! [`outline`] reads a figure back (title, axis labels, legend, how many
//! bars and points), so tests can check what a figure shows without
//! comparing pixels.

use std::fmt::Write as _;

use thiserror::Error;

/// The series colours, in order (Tableau 10, colour-blind friendly).
pub const PALETTE: [&str; 6] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#e15759", "#76b7b2",
];

/// The colour of series `i`.
pub fn color(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

/// What the legend says when a value is absent.
pub const NOT_MEASURED: &str = "n/a: not measured";

/// `s` escaped for SVG/XML/HTML text and attribute values: `&`, `<`, `>`,
/// `"` and `'` (XML 1.0, section 2.4).
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A number for a label: three decimals below 100, one up to 100 000,
/// scientific beyond (or below 0.01).
pub fn num(v: f64) -> String {
    let a = v.abs();
    if a != 0.0 && !(0.01..100_000.0).contains(&a) {
        format!("{v:.3e}")
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

/// One measured value, with an optional range drawn as a whisker (a
/// confidence interval, or min..max of the samples).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Value {
    pub y: f64,
    pub range: Option<(f64, f64)>,
}

impl Value {
    pub fn new(y: f64) -> Self {
        Value { y, range: None }
    }

    /// `y` with the whisker `low..high`.
    pub fn with_range(y: f64, low: f64, high: f64) -> Self {
        Value {
            y,
            range: Some((low, high)),
        }
    }

    /// `y ± half` (a confidence interval); no whisker when `half` is `None`
    /// (one sample has no interval).
    pub fn with_ci(y: f64, half: Option<f64>) -> Self {
        Value {
            y,
            range: half.map(|h| (y - h, y + h)),
        }
    }

    fn low(&self) -> f64 {
        self.range.map_or(self.y, |(l, _)| l.min(self.y))
    }

    fn high(&self) -> f64 {
        self.range.map_or(self.y, |(_, h)| h.max(self.y))
    }
}

/// A point of a line chart: `x` on a linear axis, or the category index.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub x: f64,
    pub value: Value,
}

/// A named series; one value per group (bar chart) or a list of points.
#[derive(Debug, Clone)]
struct Series<T> {
    name: String,
    data: Vec<T>,
}

/// The frame every figure shares.
#[derive(Debug, Clone)]
struct Frame {
    title: String,
    x_label: String,
    y_label: String,
    note: Option<String>,
    width: f64,
    height: f64,
}

impl Frame {
    fn new(title: &str) -> Self {
        Frame {
            title: title.into(),
            x_label: String::new(),
            y_label: String::new(),
            note: None,
            width: 640.0,
            height: 360.0,
        }
    }
}

const LEFT: f64 = 72.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 40.0;
const LINE: f64 = 13.0;

/// Sets the frame's fields; shared by both chart kinds.
macro_rules! frame_setters {
    () => {
        /// The x axis label, with its unit, e.g. "offered load (packets/s)".
        pub fn x_label(mut self, label: &str) -> Self {
            self.frame.x_label = label.into();
            self
        }

        /// The y axis label, with its unit, e.g. "variance (%)".
        pub fn y_label(mut self, label: &str) -> Self {
            self.frame.y_label = label.into();
            self
        }

        /// A line after the legend, e.g. what the whiskers show.
        pub fn note(mut self, note: &str) -> Self {
            self.frame.note = Some(note.into());
            self
        }

        /// The figure's size in pixels (640 x 360 unless set).
        pub fn size(mut self, width: f64, height: f64) -> Self {
            self.frame.width = width;
            self.frame.height = height;
            self
        }
    };
}

/// Grouped bars from zero: one group per category, one bar per series.
#[derive(Debug, Clone)]
pub struct BarChart {
    frame: Frame,
    groups: Vec<String>,
    series: Vec<Series<Option<Value>>>,
}

impl BarChart {
    pub fn new(title: &str) -> Self {
        BarChart {
            frame: Frame::new(title),
            groups: Vec::new(),
            series: Vec::new(),
        }
    }

    frame_setters!();

    /// The categories, left to right; a `\n` in a label starts a new line.
    pub fn groups<S: AsRef<str>>(mut self, labels: impl IntoIterator<Item = S>) -> Self {
        self.groups = labels.into_iter().map(|s| s.as_ref().into()).collect();
        self
    }

    /// A series: one value per group, `None` where it was not measured.
    pub fn series(mut self, name: &str, values: Vec<Option<Value>>) -> Self {
        self.series.push(Series {
            name: name.into(),
            data: values,
        });
        self
    }

    pub fn svg(&self) -> String {
        let lines = self
            .groups
            .iter()
            .map(|g| g.lines().count().max(1))
            .max()
            .unwrap_or(1);
        let values = || self.series.iter().flat_map(|s| s.data.iter().flatten());
        let lo = values().map(Value::low).fold(0.0, f64::min);
        let hi = values().map(Value::high).fold(0.0, f64::max);
        let absent = self
            .series
            .iter()
            .any(|s| (0..self.groups.len()).any(|g| s.data.get(g).copied().flatten().is_none()));
        let mut c = Canvas::new(&self.frame, lines, Ticks::new(lo, hi));
        let n = self.groups.len().max(1) as f64;
        let slot = c.plot_w() / n;
        let k = self.series.len().max(1) as f64;
        let bar = slot * 0.7 / k;
        c.open("x-axis");
        for (g, label) in self.groups.iter().enumerate() {
            c.category_label(LEFT + slot * (g as f64 + 0.5), label);
        }
        c.close();
        c.open("plot");
        for (g, label) in self.groups.iter().enumerate() {
            for (i, s) in self.series.iter().enumerate() {
                let x = LEFT + slot * (g as f64 + 0.15) + bar * i as f64;
                let xc = x + bar / 2.0;
                let Some(v) = s.data.get(g).copied().flatten() else {
                    c.na(xc, c.y(0.0) - 3.0);
                    continue;
                };
                let (top, base) = (c.y(v.y.max(0.0)), c.y(v.y.min(0.0)));
                let _ = write!(
                    c.out,
                    r#"<rect class="bar" x="{x:.1}" y="{top:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>{}, {}: {}</title></rect>"#,
                    (bar - 2.0).max(1.0),
                    base - top,
                    color(i),
                    esc(&s.name),
                    esc(&label.replace('\n', " ")),
                    num(v.y)
                );
                c.out.push('\n');
                c.whisker(xc, &v);
                c.value_label(xc, c.y(v.high()) - 4.0, v.y);
            }
        }
        c.close();
        let names: Vec<(&str, bool)> = self
            .series
            .iter()
            .map(|s| (s.name.as_str(), true))
            .collect();
        c.legend(&names, absent, &self.frame.note);
        c.finish()
    }
}

/// The x axis of a line chart.
#[derive(Debug, Clone)]
pub enum XAxis {
    /// Numbers; ticks at round values.
    Linear,
    /// Named positions, left to right; a point's `x` is the index.
    Categories(Vec<String>),
}

/// Lines (with a dot per point and its whisker): one per series.
#[derive(Debug, Clone)]
pub struct LineChart {
    frame: Frame,
    x: XAxis,
    y_from_zero: bool,
    series: Vec<Series<Point>>,
}

impl LineChart {
    pub fn new(title: &str, x: XAxis) -> Self {
        LineChart {
            frame: Frame::new(title),
            x,
            y_from_zero: true,
            series: Vec::new(),
        }
    }

    frame_setters!();

    /// The y axis spans the data only (not from zero): for a metric whose
    /// changes matter more than its size.
    pub fn fit_y(mut self) -> Self {
        self.y_from_zero = false;
        self
    }

    /// A series; a series without points is listed in the legend as n/a,
    /// and a category without any point gets an "n/a" mark.
    pub fn series(mut self, name: &str, points: Vec<Point>) -> Self {
        self.series.push(Series {
            name: name.into(),
            data: points,
        });
        self
    }

    pub fn svg(&self) -> String {
        let points = || self.series.iter().flat_map(|s| s.data.iter());
        let mut lo = points()
            .map(|p| p.value.low())
            .fold(f64::INFINITY, f64::min);
        let mut hi = points()
            .map(|p| p.value.high())
            .fold(f64::NEG_INFINITY, f64::max);
        if self.y_from_zero {
            lo = lo.min(0.0);
            hi = hi.max(0.0);
        }
        if !lo.is_finite() || !hi.is_finite() {
            (lo, hi) = (0.0, 1.0);
        }
        let mut c = Canvas::new(&self.frame, 1, Ticks::new(lo, hi));
        let plot_w = c.plot_w();
        // x position of a point.
        let px: Box<dyn Fn(f64) -> f64> = match &self.x {
            XAxis::Categories(names) => {
                let slot = plot_w / names.len().max(1) as f64;
                c.open("x-axis");
                let every = names.len().div_ceil(12).max(1);
                for (i, name) in names.iter().enumerate() {
                    if i % every == 0 {
                        c.category_label(LEFT + slot * (i as f64 + 0.5), name);
                    }
                }
                c.close();
                Box::new(move |x| LEFT + slot * (x + 0.5))
            }
            XAxis::Linear => {
                let xlo = points().map(|p| p.x).fold(f64::INFINITY, f64::min);
                let xhi = points().map(|p| p.x).fold(f64::NEG_INFINITY, f64::max);
                let t = if xlo.is_finite() {
                    Ticks::new(xlo, xhi)
                } else {
                    Ticks::new(0.0, 1.0)
                };
                let x = move |v: f64| LEFT + plot_w * (v - t.lo) / (t.hi - t.lo);
                c.open("x-axis");
                for v in t.values() {
                    c.category_label(x(v), &t.label(v));
                }
                c.close();
                Box::new(x)
            }
        };
        c.open("plot");
        for (i, s) in self.series.iter().enumerate() {
            let path: Vec<String> = s
                .data
                .iter()
                .map(|p| format!("{:.1},{:.1}", px(p.x), c.y(p.value.y)))
                .collect();
            if path.len() > 1 {
                let _ = writeln!(
                    c.out,
                    r#"<polyline class="line" fill="none" stroke="{}" stroke-width="2" points="{}"/>"#,
                    color(i),
                    path.join(" ")
                );
            }
            for p in &s.data {
                let x = px(p.x);
                c.whisker(x, &p.value);
                let _ = writeln!(
                    c.out,
                    r#"<circle class="point" cx="{x:.1}" cy="{:.1}" r="3" fill="{}"><title>{}: {}</title></circle>"#,
                    c.y(p.value.y),
                    color(i),
                    esc(&s.name),
                    num(p.value.y)
                );
            }
        }
        // A category no series has a point for: "n/a" in its place.
        let mut empty_category = false;
        if let XAxis::Categories(names) = &self.x {
            for i in 0..names.len() {
                if !points().any(|p| p.x == i as f64) {
                    c.na(px(i as f64), c.plot_bottom() - 3.0);
                    empty_category = true;
                }
            }
        }
        c.close();
        let names: Vec<(&str, bool)> = self
            .series
            .iter()
            .map(|s| (s.name.as_str(), !s.data.is_empty()))
            .collect();
        let absent = empty_category || names.iter().any(|(_, has)| !has);
        c.legend(&names, absent, &self.frame.note);
        c.finish()
    }
}

/// Round tick values covering lo..hi (Heckbert, "Nice numbers for graph
/// labels", Graphics Gems, 1990).
#[derive(Debug, Clone, Copy)]
struct Ticks {
    lo: f64,
    hi: f64,
    step: f64,
}

impl Ticks {
    fn new(lo: f64, hi: f64) -> Self {
        let (lo, hi) = if hi - lo > f64::EPSILON * hi.abs().max(1.0) {
            (lo, hi)
        } else {
            // One value: 10% around it (so the axis keeps its sign), or
            // ±0.5 around zero.
            let pad = if lo == 0.0 { 0.5 } else { lo.abs() * 0.1 };
            (lo - pad, hi + pad)
        };
        let step = nice((hi - lo) / 5.0);
        Ticks {
            lo: (lo / step).floor() * step,
            hi: (hi / step).ceil() * step,
            step,
        }
    }

    fn values(&self) -> impl Iterator<Item = f64> + '_ {
        let n = ((self.hi - self.lo) / self.step).round() as usize;
        (0..=n).map(move |i| self.lo + self.step * i as f64)
    }

    fn label(&self, v: f64) -> String {
        let big = self.lo.abs().max(self.hi.abs());
        if big >= 1e9 || (self.step < 1e-3 && big > 0.0) {
            format!("{v:.2e}")
        } else {
            let decimals = (-self.step.log10().floor()).max(0.0) as usize;
            format!("{v:.decimals$}")
        }
    }
}

/// The round number (1, 2, 2.5, 5 times a power of ten) at or above `x`.
fn nice(x: f64) -> f64 {
    if !x.is_finite() || x <= 0.0 {
        return 1.0;
    }
    let mag = 10f64.powf(x.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|&v| v >= x * (1.0 - 1e-9))
        .unwrap_or(10.0 * mag)
}

/// The figure being written: frame, axes and legend in the shared style.
struct Canvas<'a> {
    frame: &'a Frame,
    out: String,
    y: Ticks,
    bottom: f64,
}

impl<'a> Canvas<'a> {
    fn new(frame: &'a Frame, label_lines: usize, y: Ticks) -> Self {
        let (w, h) = (frame.width, frame.height);
        // Tick labels, the axis label, the legend and the note.
        let bottom = 16.0 + LINE * label_lines as f64 + 20.0 + 20.0;
        let mut c = Canvas {
            frame,
            out: String::new(),
            y,
            bottom,
        };
        let title = esc(&frame.title);
        let _ = write!(
            c.out,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">
<title>{title}</title>
<rect width="100%" height="100%" fill="white"/>
<text class="title" x="{:.1}" y="22" text-anchor="middle" font-size="14">{title}</text>
"#,
            w / 2.0
        );
        let (x0, x1, yb) = (LEFT, w - RIGHT, h - bottom);
        c.open("y-axis");
        for v in y.values() {
            let py = c.y(v);
            let _ = writeln!(
                c.out,
                r##"<line x1="{x0}" y1="{py:.1}" x2="{x1:.1}" y2="{py:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                x0 - 5.0,
                py + 4.0,
                esc(&y.label(v))
            );
        }
        let mid = TOP + (yb - TOP) / 2.0;
        let _ = writeln!(
            c.out,
            r#"<text class="axis-label" x="16" y="{mid:.1}" transform="rotate(-90 16 {mid:.1})" text-anchor="middle">{}</text>"#,
            esc(&frame.y_label)
        );
        c.close();
        let _ = writeln!(
            c.out,
            r#"<line x1="{x0}" y1="{TOP}" x2="{x0}" y2="{yb:.1}" stroke="black"/><line x1="{x0}" y1="{yb:.1}" x2="{x1:.1}" y2="{yb:.1}" stroke="black"/>"#
        );
        let _ = writeln!(
            c.out,
            r#"<text class="axis-label x-label" x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            LEFT + c.plot_w() / 2.0,
            yb + 16.0 + LINE * label_lines as f64 + 4.0,
            esc(&frame.x_label)
        );
        c
    }

    fn plot_w(&self) -> f64 {
        self.frame.width - LEFT - RIGHT
    }

    fn plot_bottom(&self) -> f64 {
        self.frame.height - self.bottom
    }

    /// The y pixel of value `v`.
    fn y(&self, v: f64) -> f64 {
        let b = self.plot_bottom();
        b - (b - TOP) * (v - self.y.lo) / (self.y.hi - self.y.lo)
    }

    fn open(&mut self, class: &str) {
        let _ = writeln!(self.out, r#"<g class="{class}">"#);
    }

    fn close(&mut self) {
        self.out.push_str("</g>\n");
    }

    fn category_label(&mut self, x: f64, label: &str) {
        let y0 = self.plot_bottom() + 16.0;
        let _ = write!(
            self.out,
            r#"<text class="tick" x="{x:.1}" y="{y0:.1}" text-anchor="middle">"#
        );
        for (i, line) in label.lines().enumerate() {
            let _ = write!(
                self.out,
                r#"<tspan x="{x:.1}" dy="{}">{}</tspan>"#,
                if i == 0 { 0.0 } else { LINE },
                esc(line)
            );
        }
        self.out.push_str("</text>\n");
    }

    fn na(&mut self, x: f64, y: f64) {
        let _ = writeln!(
            self.out,
            r##"<text class="na" x="{x:.1}" y="{y:.1}" text-anchor="middle" font-size="10" fill="#555">n/a</text>"##
        );
    }

    fn value_label(&mut self, x: f64, y: f64, v: f64) {
        let _ = writeln!(
            self.out,
            r#"<text class="value" x="{x:.1}" y="{y:.1}" text-anchor="middle" font-size="10">{}</text>"#,
            esc(&num(v))
        );
    }

    fn whisker(&mut self, x: f64, v: &Value) {
        let Some((lo, hi)) = v.range else {
            return;
        };
        let (ylo, yhi) = (self.y(lo), self.y(hi));
        let _ = writeln!(
            self.out,
            r#"<path class="range" d="M{x:.1},{ylo:.1}V{yhi:.1}M{:.1},{ylo:.1}h8M{:.1},{yhi:.1}h8" stroke="black" fill="none"/>"#,
            x - 4.0,
            x - 4.0
        );
    }

    /// One row under the x label: a swatch and name per series ("(n/a)"
    /// after a series without data), then what n/a means and the note.
    fn legend(&mut self, names: &[(&str, bool)], absent: bool, note: &Option<String>) {
        let y = self.frame.height - 14.0;
        let mut x = LEFT;
        self.open("legend");
        for (i, (name, has)) in names.iter().enumerate() {
            let text = if *has {
                name.to_string()
            } else {
                format!("{name} (n/a)")
            };
            let _ = writeln!(
                self.out,
                r#"<rect x="{x:.1}" y="{:.1}" width="10" height="10" fill="{}"/><text class="legend-entry" x="{:.1}" y="{y:.1}">{}</text>"#,
                y - 9.0,
                color(i),
                x + 14.0,
                esc(&text)
            );
            x += 24.0 + 7.0 * text.chars().count() as f64;
        }
        let mut notes: Vec<&str> = Vec::new();
        if absent {
            notes.push(NOT_MEASURED);
        }
        if let Some(n) = note {
            notes.push(n);
        }
        if !notes.is_empty() {
            let _ = writeln!(
                self.out,
                r##"<text class="note" x="{x:.1}" y="{y:.1}" fill="#555">{}</text>"##,
                esc(&notes.join("; "))
            );
        }
        self.close();
    }

    fn finish(mut self) -> String {
        self.out.push_str("</svg>\n");
        self.out
    }
}

/// Why a figure could not be read back.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum PlotError {
    #[error("not well-formed XML: {0}")]
    Xml(String),
    #[error("the figure has no {0}")]
    Missing(&'static str),
}

/// What a figure shows, read back from its SVG.
#[derive(Debug, Clone, PartialEq)]
pub struct Outline {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    /// Legend entries, in order.
    pub legend: Vec<String>,
    /// The legend's note (what n/a means, what the whiskers show).
    pub note: Option<String>,
    /// Tick and category labels under the x axis.
    pub x_ticks: Vec<String>,
    pub bars: usize,
    pub points: usize,
    pub whiskers: usize,
    /// "n/a" marks in the plot.
    pub not_available: usize,
}

/// Parses `svg` as XML and reads back what a figure of this crate shows.
pub fn outline(svg: &str) -> Result<Outline, PlotError> {
    let doc = roxmltree::Document::parse(svg).map_err(|e| PlotError::Xml(e.to_string()))?;
    let root = doc.root_element();
    if root.tag_name().name() != "svg" {
        return Err(PlotError::Missing("<svg> root"));
    }
    let text = |n: roxmltree::Node| -> String {
        n.descendants()
            .filter(|d| d.is_text())
            .filter_map(|d| d.text())
            .collect::<Vec<_>>()
            .join("\n")
    };
    let class_has = |n: &roxmltree::Node, c: &str| {
        n.attribute("class")
            .is_some_and(|v| v.split_whitespace().any(|w| w == c))
    };
    let all: Vec<roxmltree::Node> = root.descendants().collect();
    let with = |c: &'static str| all.iter().filter(move |n| class_has(n, c));
    let group = |c: &'static str| with(c).next().ok_or(PlotError::Missing(c));
    let title = root
        .children()
        .find(|n| n.has_tag_name("title"))
        .map(text)
        .ok_or(PlotError::Missing("title"))?;
    let y_axis = group("y-axis")?;
    let y_label = y_axis
        .descendants()
        .find(|n| class_has(n, "axis-label"))
        .map(text)
        .ok_or(PlotError::Missing("y axis label"))?;
    let x_label = group("x-label").map(|n| text(*n))?;
    let x_ticks = match group("x-axis") {
        Ok(g) => g
            .descendants()
            .filter(|n| class_has(n, "tick"))
            .map(text)
            .collect(),
        Err(_) => Vec::new(),
    };
    let legend = group("legend")?;
    Ok(Outline {
        title,
        x_label,
        y_label,
        legend: legend
            .descendants()
            .filter(|n| class_has(n, "legend-entry"))
            .map(text)
            .collect(),
        note: legend
            .descendants()
            .find(|n| class_has(n, "note"))
            .map(text),
        x_ticks,
        bars: with("bar").count(),
        points: with("point").count(),
        whiskers: with("range").count(),
        not_available: with("na").count(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_covers_the_five_xml_specials() {
        assert_eq!(
            esc(r#"a & b < c > d "e" 'f'"#),
            "a &amp; b &lt; c &gt; d &quot;e&quot; &#39;f&#39;"
        );
        assert_eq!(esc("plain"), "plain");
        assert_eq!(esc("&amp;"), "&amp;amp;");
    }

    #[test]
    fn hostile_names_survive_as_text() {
        let name = r#"<b>"x" & 'y'</b>"#;
        let svg = BarChart::new(name)
            .x_label("policy <p>")
            .y_label("v \"%\"")
            .groups([name])
            .series(name, vec![Some(Value::new(1.0))])
            .svg();
        let o = outline(&svg).unwrap();
        assert_eq!(o.title, name);
        assert_eq!(o.legend, vec![name.to_string()]);
        assert_eq!(o.x_ticks, vec![name.to_string()]);
        assert_eq!(o.x_label, "policy <p>");
        assert_eq!(o.y_label, "v \"%\"");
    }

    #[test]
    fn bars_with_whiskers_and_absent_values() {
        let svg = BarChart::new("t")
            .x_label("policy")
            .y_label("variance (%)")
            .groups(["a", "b\nsecond line"])
            .series(
                "one",
                vec![Some(Value::with_ci(2.0, Some(0.5))), Some(Value::new(3.0))],
            )
            .series("two", vec![None, Some(Value::with_ci(1.0, None))])
            .note("whiskers: 95% CI")
            .svg();
        let o = outline(&svg).unwrap();
        assert_eq!(o.bars, 3);
        assert_eq!(o.whiskers, 1);
        assert_eq!(o.not_available, 1);
        assert_eq!(o.legend, vec!["one", "two"]);
        assert_eq!(
            o.note.as_deref(),
            Some("n/a: not measured; whiskers: 95% CI")
        );
        assert_eq!(o.x_ticks, vec!["a", "b\nsecond line"]);
    }

    #[test]
    fn everything_measured_needs_no_na_note() {
        let svg = BarChart::new("t")
            .groups(["a"])
            .series("s", vec![Some(Value::new(0.0))])
            .svg();
        let o = outline(&svg).unwrap();
        assert_eq!((o.bars, o.not_available, o.note), (1, 0, None));
    }

    #[test]
    fn nothing_measured_is_all_na() {
        let svg = BarChart::new("t")
            .groups(["a", "b"])
            .series("s", vec![None, None])
            .svg();
        let o = outline(&svg).unwrap();
        assert_eq!((o.bars, o.not_available), (0, 2));
        assert_eq!(o.note.as_deref(), Some(NOT_MEASURED));
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
    }

    #[test]
    fn lines_on_a_linear_axis() {
        let pts = |k: f64| {
            (1..=4)
                .map(|i| Point {
                    x: f64::from(i) * 1000.0,
                    value: Value::new(k * f64::from(i)),
                })
                .collect()
        };
        let svg = LineChart::new("t", XAxis::Linear)
            .x_label("offered (packets/s)")
            .y_label("processed (packets/s)")
            .series("a", pts(1.0))
            .series("b", pts(2.0))
            .series("c", Vec::new())
            .svg();
        let o = outline(&svg).unwrap();
        assert_eq!(o.points, 8);
        assert_eq!(o.legend, vec!["a", "b", "c (n/a)"]);
        assert_eq!(o.note.as_deref(), Some(NOT_MEASURED));
        assert!(o.x_ticks.contains(&"1000".to_string()));
        assert!(o.x_ticks.contains(&"4000".to_string()));
    }

    #[test]
    fn lines_over_categories_fit_the_data() {
        let svg = LineChart::new("m (ms)", XAxis::Categories(vec!["1".into(), "2".into()]))
            .fit_y()
            .series(
                "mean",
                vec![
                    Point {
                        x: 0.0,
                        value: Value::with_range(100.0, 99.0, 101.0),
                    },
                    Point {
                        x: 1.0,
                        value: Value::new(100.0),
                    },
                ],
            )
            .svg();
        let o = outline(&svg).unwrap();
        assert_eq!((o.points, o.whiskers, o.not_available), (2, 1, 0));
        assert_eq!(o.x_ticks, vec!["1", "2"]);
        assert_eq!(o.note, None);
        // The axis does not start at zero.
        assert!(!svg.contains(">0</text>"));
    }

    #[test]
    fn a_category_without_a_point_is_na() {
        let names = vec!["1".into(), "2".into(), "3".into()];
        let p = |x: f64| Point {
            x,
            value: Value::new(5.0),
        };
        let svg = LineChart::new("t", XAxis::Categories(names))
            .series("s", vec![p(0.0), p(2.0)])
            .svg();
        let o = outline(&svg).unwrap();
        assert_eq!((o.points, o.not_available), (2, 1));
        assert_eq!(o.note.as_deref(), Some(NOT_MEASURED));
    }

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        let t = Ticks::new(0.0, 7.3);
        assert_eq!((t.lo, t.hi, t.step), (0.0, 8.0, 2.0));
        let t = Ticks::new(3.0, 3.0);
        assert!(t.lo < 3.0 && t.hi > 3.0);
        let t = Ticks::new(0.49, 0.49);
        assert!(t.lo > 0.0 && t.lo < 0.49 && t.hi > 0.49, "{t:?}");
        let t = Ticks::new(0.0, 0.0);
        assert!(t.lo < 0.0 && t.hi > 0.0);
        assert_eq!(nice(0.0), 1.0);
        assert_eq!(nice(3.0), 5.0);
        assert_eq!(nice(0.2), 0.2);
    }

    #[test]
    fn garbage_is_not_a_figure() {
        assert!(matches!(outline("<svg"), Err(PlotError::Xml(_))));
        assert!(matches!(
            outline("<svg xmlns=\"http://www.w3.org/2000/svg\"/>"),
            Err(PlotError::Missing(_))
        ));
    }
}
