//! Steer's figures and tables. Figures: grouped bar charts and line charts written as
//! self-contained SVG 1.1, all in one style: a title, a y axis and an x
//! axis each labelled with its unit, light grid lines, one palette, and a
//! legend under the plot. Every text is escaped ([`esc`]).
//!
//! A value that was not measured is `None`: it gets no bar or point, an
//! "n/a" in its place, and the legend says what "n/a" means. Nothing is
//! drawn as 0.
//!
//! Tables: [`text`] writes results as a terminal shows them (aligned
//! tables, labelled rows), each result saying how it reads ([`text::Present`]).
//!
//! [`outline`] reads a figure back (title, axis labels, legend, how many
//! bars and points), so tests can check what a figure shows without
//! comparing pixels.

#[macro_use]
mod canvas;
mod bar;
mod line;
mod outline;
pub mod text;
mod value;

pub use bar::BarChart;
pub use line::{LineChart, XAxis};
pub use outline::{outline, Outline, PlotError};
pub use value::{Point, Value};

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
    fn garbage_is_not_a_figure() {
        assert!(matches!(outline("<svg"), Err(PlotError::Xml(_))));
        assert!(matches!(
            outline("<svg xmlns=\"http://www.w3.org/2000/svg\"/>"),
            Err(PlotError::Missing(_))
        ));
    }
}
