//! Reading a figure back from its SVG, for tests.

use thiserror::Error;

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
