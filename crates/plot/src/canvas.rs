//! What both chart kinds share: the frame (title, axis labels, note,
//! size), round ticks, and the canvas that writes axes, labels, whiskers
//! and the legend in the one style.

use std::fmt::Write as _;

use crate::value::Value;
use crate::{color, esc, num, NOT_MEASURED};

/// The frame every figure shares.
#[derive(Debug, Clone)]
pub(crate) struct Frame {
    pub(crate) title: String,
    pub(crate) x_label: String,
    pub(crate) y_label: String,
    pub(crate) note: Option<String>,
    pub(crate) width: f64,
    pub(crate) height: f64,
}

impl Frame {
    pub(crate) fn new(title: &str) -> Self {
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

pub(crate) const LEFT: f64 = 72.0;
pub(crate) const RIGHT: f64 = 20.0;
pub(crate) const TOP: f64 = 40.0;
pub(crate) const LINE: f64 = 13.0;

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

/// Round tick values covering lo..hi (Heckbert, "Nice numbers for graph
/// labels", Graphics Gems, 1990).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ticks {
    pub(crate) lo: f64,
    pub(crate) hi: f64,
    pub(crate) step: f64,
}

impl Ticks {
    pub(crate) fn new(lo: f64, hi: f64) -> Self {
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

    pub(crate) fn values(&self) -> impl Iterator<Item = f64> + '_ {
        let n = ((self.hi - self.lo) / self.step).round() as usize;
        (0..=n).map(move |i| self.lo + self.step * i as f64)
    }

    pub(crate) fn label(&self, v: f64) -> String {
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
pub(crate) fn nice(x: f64) -> f64 {
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
pub(crate) struct Canvas<'a> {
    pub(crate) frame: &'a Frame,
    pub(crate) out: String,
    pub(crate) y: Ticks,
    pub(crate) bottom: f64,
}

impl<'a> Canvas<'a> {
    pub(crate) fn new(frame: &'a Frame, label_lines: usize, y: Ticks) -> Self {
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

    pub(crate) fn plot_w(&self) -> f64 {
        self.frame.width - LEFT - RIGHT
    }

    pub(crate) fn plot_bottom(&self) -> f64 {
        self.frame.height - self.bottom
    }

    /// The y pixel of value `v`.
    pub(crate) fn y(&self, v: f64) -> f64 {
        let b = self.plot_bottom();
        b - (b - TOP) * (v - self.y.lo) / (self.y.hi - self.y.lo)
    }

    pub(crate) fn open(&mut self, class: &str) {
        let _ = writeln!(self.out, r#"<g class="{class}">"#);
    }

    pub(crate) fn close(&mut self) {
        self.out.push_str("</g>\n");
    }

    pub(crate) fn category_label(&mut self, x: f64, label: &str) {
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

    pub(crate) fn na(&mut self, x: f64, y: f64) {
        let _ = writeln!(
            self.out,
            r##"<text class="na" x="{x:.1}" y="{y:.1}" text-anchor="middle" font-size="10" fill="#555">n/a</text>"##
        );
    }

    pub(crate) fn value_label(&mut self, x: f64, y: f64, v: f64) {
        let _ = writeln!(
            self.out,
            r#"<text class="value" x="{x:.1}" y="{y:.1}" text-anchor="middle" font-size="10">{}</text>"#,
            esc(&num(v))
        );
    }

    pub(crate) fn whisker(&mut self, x: f64, v: &Value) {
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
    pub(crate) fn legend(&mut self, names: &[(&str, bool)], absent: bool, note: &Option<String>) {
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

    pub(crate) fn finish(mut self) -> String {
        self.out.push_str("</svg>\n");
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
