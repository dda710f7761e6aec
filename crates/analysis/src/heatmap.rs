//! Absolute correlation matrices as heatmaps: one PNG with a row of panels, a shared colour bar,
//! grid lines between token positions and the position symbols along both axes.

use std::path::Path;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::correlation::Correlation;
use crate::draw::{FONT, FigureError, drawing_failed, ensure_font, viridis, write_png};

/// Side of each heatmap in pixels (at most; a small matrix is drawn at a whole-number scale).
pub const HEATMAP_PX: usize = 560;

const LEFT: i32 = 40;
const PANEL_GAP: i32 = 40;
const FIGURE_TITLE_H: i32 = 44;
const PANEL_TITLE_H: i32 = 48;
const AXIS_LABEL_H: i32 = 20;
const COLOUR_BAR_W: i32 = 120;
const CAPTION_LINE_H: i32 = 20;

/// One heatmap: a correlation matrix of `positions x width` features.
pub struct HeatmapPanel<'a> {
    /// One or two short lines above the heatmap.
    pub title: Vec<String>,
    pub correlation: &'a Correlation,
    /// Features per token position (the model's width).
    pub width: usize,
    /// The symbol at each position (`$`, `a`, `+`, ...), shown along the axes.
    pub symbols: &'a [char],
}

/// How a matrix of `features x features` entries maps onto the heatmap's pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    /// Each entry drawn as a square of this many pixels on a side.
    Scaled(usize),
    /// More entries than pixels: this many pixels on a side, each the mean |r| of the entries it
    /// covers (entry `e` falls in pixel `e * side / features`).
    Averaged(usize),
}

impl Resolution {
    pub fn for_features(features: usize) -> Resolution {
        if features <= HEATMAP_PX {
            Resolution::Scaled((HEATMAP_PX / features.max(1)).max(1))
        } else {
            Resolution::Averaged(HEATMAP_PX)
        }
    }

    /// Pixels on a side for `features` entries.
    pub fn side(self, features: usize) -> usize {
        match self {
            Resolution::Scaled(s) => features * s,
            Resolution::Averaged(side) => side,
        }
    }

    /// A sentence for the caption.
    pub fn describe(self, features: usize) -> String {
        match self {
            Resolution::Scaled(1) => "one matrix entry per pixel".to_string(),
            Resolution::Scaled(s) => format!("each matrix entry drawn as {s} x {s} pixels"),
            Resolution::Averaged(side) => {
                let k = features as f64 / side as f64;
                format!(
                    "each pixel is the mean |r| of the {k:.1} x {k:.1} matrix entries it covers"
                )
            }
        }
    }
}

/// `|r|` at the heatmap's resolution, `side x side`, row-major.
pub fn pixels(correlation: &Correlation, resolution: Resolution) -> Vec<f32> {
    let n = correlation.features;
    match resolution {
        Resolution::Scaled(s) => {
            let side = n * s;
            let mut out = vec![0.0; side * side];
            for (y, row) in out.chunks_mut(side).enumerate() {
                for (x, v) in row.iter_mut().enumerate() {
                    *v = correlation.get(y / s, x / s).abs();
                }
            }
            out
        }
        Resolution::Averaged(side) => {
            assert!(side <= n, "averaging needs at least one entry per pixel");
            let pixel: Vec<usize> = (0..n).map(|e| e * side / n).collect();
            let mut sums = vec![0.0f64; side * side];
            let mut counts = vec![0u32; side * side];
            for r in 0..n {
                let row = &correlation.values[r * n..(r + 1) * n];
                let base = pixel[r] * side;
                for (c, v) in row.iter().enumerate() {
                    sums[base + pixel[c]] += f64::from(v.abs());
                    counts[base + pixel[c]] += 1;
                }
            }
            sums.iter()
                .zip(&counts)
                .map(|(&s, &c)| (s / f64::from(c.max(1))) as f32)
                .collect()
        }
    }
}

/// Draws `panels` side by side into `path`, with `title` above and `caption` lines below.
pub fn render(
    path: &Path,
    title: &str,
    panels: &[HeatmapPanel],
    caption: &[String],
) -> Result<(), FigureError> {
    ensure_font()?;
    write_png(path, |partial| draw_panels(partial, title, panels, caption))
}

fn draw_panels(
    path: &Path,
    title: &str,
    panels: &[HeatmapPanel],
    caption: &[String],
) -> Result<(), FigureError> {
    let side = HEATMAP_PX as i32;
    let panel_w = LEFT + side + PANEL_GAP;
    let width = panels.len() as i32 * panel_w + COLOUR_BAR_W;
    let heatmap_top = FIGURE_TITLE_H + PANEL_TITLE_H + AXIS_LABEL_H;
    let height = heatmap_top + side + 16 + caption.len() as i32 * CAPTION_LINE_H + 12;
    let root = BitMapBackend::new(path, (width as u32, height as u32)).into_drawing_area();
    let fail = drawing_failed(path);
    root.fill(&WHITE).map_err(&fail)?;
    let text = |size: i32| TextStyle::from((FONT, size).into_font()).color(&BLACK);
    let centred = |size: i32| text(size).pos(Pos::new(HPos::Center, VPos::Center));

    root.draw_text(title, &text(22), (LEFT, 12))
        .map_err(&fail)?;
    for (i, panel) in panels.iter().enumerate() {
        let x0 = i as i32 * panel_w + LEFT;
        for (line, words) in panel.title.iter().enumerate() {
            let y = FIGURE_TITLE_H + line as i32 * 20;
            root.draw_text(words, &text(16), (x0, y)).map_err(&fail)?;
        }
        let n = panel.correlation.features;
        let resolution = Resolution::for_features(n);
        let drawn = resolution.side(n) as i32;
        let values = pixels(panel.correlation, resolution);
        for (y, row) in values.chunks(drawn as usize).enumerate() {
            for (x, &v) in row.iter().enumerate() {
                root.draw_pixel((x0 + x as i32, heatmap_top + y as i32), &viridis(v))
                    .map_err(&fail)?;
            }
        }
        // Grid lines between positions, and each position's symbol at its block's centre.
        let positions = n / panel.width.max(1);
        let at = |p: usize| (p * panel.width) as f64 * drawn as f64 / n as f64;
        let grid = ShapeStyle::from(&RGBColor(235, 235, 235).mix(0.55)).stroke_width(1);
        for p in 1..positions {
            let b = at(p).round() as i32;
            for line in [
                [(x0 + b, heatmap_top), (x0 + b, heatmap_top + drawn)],
                [(x0, heatmap_top + b), (x0 + drawn, heatmap_top + b)],
            ] {
                root.draw(&PathElement::new(line.to_vec(), grid))
                    .map_err(&fail)?;
            }
        }
        for (p, symbol) in panel.symbols.iter().enumerate().take(positions) {
            let centre = ((at(p) + at(p + 1)) / 2.0).round() as i32;
            let label = symbol.to_string();
            root.draw_text(&label, &centred(14), (x0 + centre, heatmap_top - 10))
                .map_err(&fail)?;
            root.draw_text(&label, &centred(14), (x0 - 12, heatmap_top + centre))
                .map_err(&fail)?;
        }
    }

    // The colour bar: |r| from 0 (bottom) to 1 (top).
    let bar_x = panels.len() as i32 * panel_w + 10;
    for y in 0..side {
        let v = 1.0 - y as f32 / (side - 1) as f32;
        root.draw(&Rectangle::new(
            [(bar_x, heatmap_top + y), (bar_x + 24, heatmap_top + y + 1)],
            viridis(v).filled(),
        ))
        .map_err(&fail)?;
    }
    for tick in 0..=4 {
        let v = tick as f64 / 4.0;
        let y = heatmap_top + ((1.0 - v) * (side - 1) as f64).round() as i32;
        root.draw(&PathElement::new(
            vec![(bar_x + 24, y), (bar_x + 30, y)],
            BLACK.stroke_width(1),
        ))
        .map_err(&fail)?;
        root.draw_text(
            &format!("{v:.2}"),
            &text(14).pos(Pos::new(HPos::Left, VPos::Center)),
            (bar_x + 34, y),
        )
        .map_err(&fail)?;
    }
    root.draw_text("|r|", &text(16), (bar_x, heatmap_top - 28))
        .map_err(&fail)?;

    let caption_top = heatmap_top + side + 16;
    for (i, line) in caption.iter().enumerate() {
        root.draw_text(
            line,
            &text(15),
            (LEFT, caption_top + i as i32 * CAPTION_LINE_H),
        )
        .map_err(&fail)?;
    }
    root.present().map_err(&fail)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matrix(features: usize, value: impl Fn(usize, usize) -> f32) -> Correlation {
        let values = (0..features * features)
            .map(|i| value(i / features, i % features))
            .collect();
        Correlation {
            features,
            values,
            constant: Vec::new(),
        }
    }

    #[test]
    fn small_matrices_scale_up_and_large_ones_average() {
        assert_eq!(Resolution::for_features(13 * 16), Resolution::Scaled(2));
        assert_eq!(
            Resolution::for_features(13 * 384),
            Resolution::Averaged(HEATMAP_PX)
        );
        assert_eq!(
            Resolution::for_features(13 * 384).side(13 * 384),
            HEATMAP_PX
        );
        assert_eq!(Resolution::for_features(HEATMAP_PX), Resolution::Scaled(1));
    }

    #[test]
    fn averaged_pixels_are_means_of_absolute_values() {
        // 4 x 4 entries averaged 2 x 2: the top-left square holds 1, -1, 0, 0.
        let c = matrix(4, |r, col| match (r, col) {
            (0, 0) => 1.0,
            (0, 1) => -1.0,
            (2..4, 2..4) => -0.5,
            _ => 0.0,
        });
        assert_eq!(
            pixels(&c, Resolution::Averaged(2)),
            vec![0.5, 0.0, 0.0, 0.5]
        );
        let scaled = pixels(&c, Resolution::Scaled(2));
        assert_eq!(scaled.len(), 64);
        assert_eq!(scaled[0..4], [1.0, 1.0, 1.0, 1.0]);
    }
}
