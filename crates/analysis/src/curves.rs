//! Training curves from `metrics.csv`: loss and exact-match accuracy against the step, for one
//! run, and for a sweep one panel per set of removed residuals with its seeds overlaid.

use std::fs;
use std::ops::Range;
use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::draw::{FONT, FigureError, SERIES, drawing_failed, ensure_font, write_png};

/// One row of `metrics.csv` (written at every evaluation); a value the run did not record is NaN.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MetricsRow {
    pub step: f64,
    pub train_loss: f64,
    pub valid_loss: f64,
    pub exact_match: f64,
}

/// Reads a run's `metrics.csv`; columns are found by name, so a reordered file still reads.
pub fn read_metrics(path: &Path) -> Result<Vec<MetricsRow>, FigureError> {
    let text = fs::read_to_string(path)
        .map_err(|e| FigureError(format!("cannot read {}: {e}", path.display())))?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
    let column = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .ok_or_else(|| FigureError(format!("{} has no column {name:?}", path.display())))
    };
    let (step, train, valid, exact) = (
        column("step")?,
        column("train_loss")?,
        column("valid_loss")?,
        column("exact_match")?,
    );
    let mut rows = Vec::new();
    for (i, line) in lines.enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let fields: Vec<&str> = line.split(',').collect();
        let value = |c: usize| {
            fields
                .get(c)
                .and_then(|f| f.parse::<f64>().ok())
                .unwrap_or(f64::NAN)
        };
        let row = MetricsRow {
            step: value(step),
            train_loss: value(train),
            valid_loss: value(valid),
            exact_match: value(exact),
        };
        if row.step.is_nan() {
            return Err(FigureError(format!(
                "{} line {} has no step number",
                path.display(),
                i + 2
            )));
        }
        rows.push(row);
    }
    Ok(rows)
}

/// One line of a chart.
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

/// What a chart plots against the step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measure {
    Loss,
    ExactMatch,
}

impl Measure {
    fn axis(self) -> &'static str {
        match self {
            Measure::Loss => "loss",
            Measure::ExactMatch => "exact match (%)",
        }
    }
}

/// A run's two panels, loss (training and validation) and exact match, into `path`.
pub fn render_run(path: &Path, title: &str, rows: &[MetricsRow]) -> Result<(), FigureError> {
    let series = |label: &str, value: fn(&MetricsRow) -> f64| Series {
        label: label.to_string(),
        points: rows
            .iter()
            .map(|r| (r.step, value(r)))
            .filter(|p| p.1.is_finite())
            .collect(),
    };
    let panels = vec![
        (
            "loss".to_string(),
            Measure::Loss,
            vec![
                series("training", |r| r.train_loss),
                series("validation", |r| r.valid_loss),
            ],
        ),
        (
            "exact match on the evaluation prompts".to_string(),
            Measure::ExactMatch,
            vec![series("exact match", |r| r.exact_match)],
        ),
    ];
    render_grid(path, title, &panels, 2)
}

/// Panels of line charts in a grid of `columns`, into `path`: (panel title, measure, series).
pub fn render_grid(
    path: &Path,
    title: &str,
    panels: &[(String, Measure, Vec<Series>)],
    columns: usize,
) -> Result<(), FigureError> {
    ensure_font()?;
    write_png(path, |partial| draw_grid(partial, title, panels, columns))
}

fn draw_grid(
    path: &Path,
    title: &str,
    panels: &[(String, Measure, Vec<Series>)],
    columns: usize,
) -> Result<(), FigureError> {
    let (panel_w, panel_h) = (420u32, 300u32);
    let columns = columns.max(1);
    let rows = panels.len().div_ceil(columns).max(1);
    let size = (panel_w * columns as u32, panel_h * rows as u32 + 44);
    let root = BitMapBackend::new(path, size).into_drawing_area();
    let fail = drawing_failed(path);
    root.fill(&WHITE).map_err(&fail)?;
    let (head, body) = root.split_vertically(44);
    head.draw_text(
        title,
        &TextStyle::from((FONT, 22).into_font()).color(&BLACK),
        (16, 12),
    )
    .map_err(&fail)?;
    let areas = body.split_evenly((rows, columns));
    for ((name, measure, series), area) in panels.iter().zip(&areas) {
        chart(area, name, *measure, series).map_err(&fail)?;
    }
    root.present().map_err(&fail)?;
    Ok(())
}

fn chart(
    area: &DrawingArea<BitMapBackend, Shift>,
    name: &str,
    measure: Measure,
    series: &[Series],
) -> Result<(), DrawingAreaErrorKind<<BitMapBackend<'static> as DrawingBackend>::ErrorType>> {
    let points = || series.iter().flat_map(|s| s.points.iter());
    let last_step = points().map(|p| p.0).fold(1.0, f64::max);
    let y_range: Range<f64> = match measure {
        Measure::ExactMatch => 0.0..100.0,
        Measure::Loss => 0.0..points().map(|p| p.1).fold(0.1, f64::max) * 1.05,
    };
    let mut chart = ChartBuilder::on(area)
        .caption(name, (FONT, 16))
        .margin(10)
        .x_label_area_size(36)
        .y_label_area_size(48)
        .build_cartesian_2d(0.0..last_step, y_range)?;
    chart
        .configure_mesh()
        .x_desc("step")
        .y_desc(measure.axis())
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| match measure {
            Measure::ExactMatch => format!("{y:.0}"),
            Measure::Loss => format!("{y:.2}"),
        })
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 14))
        .light_line_style(RGBColor(240, 240, 240))
        .draw()?;
    for (i, s) in series.iter().enumerate() {
        let colour = SERIES[i % SERIES.len()];
        chart
            .draw_series(LineSeries::new(
                s.points.iter().copied(),
                colour.stroke_width(2),
            ))?
            .label(s.label.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 16, y)], colour.stroke_width(2))
            });
    }
    if series.len() > 1 || series.first().is_some_and(|s| !s.label.is_empty()) {
        chart
            .configure_series_labels()
            .label_font((FONT, 12))
            .background_style(WHITE.mix(0.8))
            .border_style(RGBColor(200, 200, 200))
            .position(match measure {
                Measure::Loss => SeriesLabelPosition::UpperRight,
                Measure::ExactMatch => SeriesLabelPosition::LowerRight,
            })
            .draw()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_metrics_by_column_name_with_gaps() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metrics.csv");
        fs::write(
            &path,
            "step,train_loss,valid_loss,train_accuracy,exact_match,learning_rate,elapsed_seconds\n\
             100,2.5,2.4,0.3,,0.001,10\n200,1.5,1.4,0.5,42.5,0.001,20\n",
        )
        .unwrap();
        let rows = read_metrics(&path).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[1].step, 200.0);
        assert_eq!(rows[1].exact_match, 42.5);
        assert!(rows[0].exact_match.is_nan());
    }
}
