//! Grouped bar charts.

use std::fmt::Write as _;

use crate::canvas::{Canvas, Frame, Ticks, LEFT};
use crate::value::{Series, Value};
use crate::{color, esc, num};

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
