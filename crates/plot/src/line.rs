//! Line charts over a linear or a categorical x axis.

use std::fmt::Write as _;

use crate::canvas::{Canvas, Frame, Ticks, LEFT};
use crate::value::{Point, Series};
use crate::{color, esc, num};

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
