//! The paper's figures 3-5 from a sweep folder (or any named runs), their blockiness scores, and
//! training curves.
//!
//! Layers and removed residuals are numbered from 1 here, as in the paper's tables; its figures
//! number blocks from 0 (the paper's "blocks {0,1}" are layers {1,2} here). Every caption says so.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use symbreak_data::AdditionTask;
use symbreak_model::{AttentionMask, PositionalEncoding};
use symbreak_train::run::{RunPaths, load_finished};
use symbreak_train::{Backend, RunConfig};

use crate::activations::{Lines, layer_outputs};
use crate::correlation::{BlockScore, Correlation};
use crate::curves::{Measure, MetricsRow, Series, read_metrics, render_grid, render_run};
use crate::draw::FigureError;
use crate::heatmap::{HeatmapPanel, Resolution, render};
use crate::tables::{
    FinishedRun, encoding_label, encoding_name, mask_name, read_runs, removed_residuals, set_name,
};

/// Test lines behind each correlation matrix, by default.
pub const DEFAULT_PROMPTS: usize = 2_000;

/// One panel to draw: a run and one of its layers.
#[derive(Debug, Clone)]
pub struct PanelSpec {
    pub run: PathBuf,
    pub layer: usize,
}

/// One multi-panel figure.
#[derive(Debug, Clone)]
pub struct FigureSpec {
    /// File stem, e.g. `figure3`.
    pub name: String,
    pub title: String,
    /// What the paper's figure shows, for the caption.
    pub paper: String,
    pub panels: Vec<PanelSpec>,
}

/// What a figure's panel measured, one row of `scores.csv`.
#[derive(Debug, Clone)]
pub struct PanelScore {
    pub figure: String,
    pub panel: char,
    pub run: String,
    pub layer: usize,
    pub lines: usize,
    pub features: usize,
    pub constant_features: usize,
    pub score: BlockScore,
}

/// Layers 1, 3 and 6 of a 6-layer model (first, middle, last for other depths).
pub fn figure_layers(n_layer: usize) -> Vec<usize> {
    let mut layers = vec![1, n_layer.div_ceil(2), n_layer];
    layers.dedup();
    layers
}

/// The paper's figures, chosen from the finished runs of a sweep: causal NoPE models with
/// residuals removed at {}, {1} and {1,2}, the lowest seed of each, and the second-lowest seed
/// of {1,2} for figure 3's last panel. Returns the figures it can draw and, for each one it
/// cannot, why.
///
/// The runs are chosen among all finished runs, with or without their model weights, so that a
/// figure always comes from the same runs: a figure whose runs lack their weights (small files
/// restored from `results/`, say) is skipped, never drawn from another seed instead.
pub fn paper_figures(dir: &Path) -> Result<(Vec<FigureSpec>, Vec<String>), FigureError> {
    let runs = read_runs(dir).map_err(FigureError)?;
    let nope_with = |removed: &[usize]| -> Vec<&FinishedRun> {
        let mut found: Vec<&FinishedRun> = runs
            .iter()
            .filter(|r| {
                let model = &r.config.model;
                model.positional == PositionalEncoding::None
                    && model.mask == AttentionMask::Causal
                    && removed_residuals(model) == removed
            })
            .collect();
        found.sort_by_key(|r| r.config.train.seed);
        found
    };
    let (none, first, first_two) = (nope_with(&[]), nope_with(&[1]), nope_with(&[1, 2]));
    let path = |run: &FinishedRun| dir.join(&run.name);
    let mut figures = Vec::new();
    let mut missing = Vec::new();

    match (none.first(), first.first(), first_two.first(), first_two.get(1)) {
        (Some(a), Some(b), Some(c), Some(d)) => figures.push(FigureSpec {
            name: "figure3".into(),
            title: "Figure 3: |correlation| of layer 1's outputs, NoPE, residuals removed at {}, {1}, {1,2}, {1,2} (another seed)".into(),
            paper: "paper's figure 3: layer 1 of NoPE models with residuals removed at blocks {}, {0}, {0,1} and {0,1} with another seed".into(),
            panels: [a, b, c, d]
                .iter()
                .map(|r| PanelSpec { run: path(r), layer: 1 })
                .collect(),
        }),
        _ => missing.push(format!(
            "figure 3 needs finished causal NoPE runs with residuals removed at {{}}, {{1}} and {{1,2}} (two seeds); found {}, {} and {}",
            none.len(), first.len(), first_two.len()
        )),
    }
    for (name, number, runs_of, removed, paper_removed) in [
        ("figure4", 4, &none, "{}", "no residual connections removed"),
        (
            "figure5",
            5,
            &first_two,
            "{1,2}",
            "residual connections removed at layer 0,1",
        ),
    ] {
        match runs_of.first() {
            Some(run) => {
                let layers = figure_layers(run.config.model.n_layer);
                figures.push(FigureSpec {
                    name: name.into(),
                    title: format!(
                        "Figure {number}: |correlation| of the outputs of layers {}, NoPE, residuals removed at {removed}",
                        join(&layers)
                    ),
                    paper: format!("paper's figure {number}: layers 1, 3 and 6 of NoPE models with {paper_removed}"),
                    panels: layers
                        .into_iter()
                        .map(|layer| PanelSpec { run: path(run), layer })
                        .collect(),
                });
            }
            None => missing.push(format!(
                "figure {number} needs a finished causal NoPE run with residuals removed at {removed}"
            )),
        }
    }
    let mut drawable = Vec::new();
    for figure in figures {
        let absent = runs_without_weights(&figure);
        if absent.is_empty() {
            drawable.push(figure);
            continue;
        }
        let (them, folders) = if absent.len() == 1 {
            ("that run", "its folder")
        } else {
            ("those runs", "their folders")
        };
        missing.push(format!(
            "{} is drawn from {}, whose model weights (model.bpk) are absent; the figure already in the output folder, if any, is kept. To redraw it, train {them} again (`symbreak sweep` retrains nothing that has result.json, so move {folders} away first)",
            figure.name,
            absent.join(", ")
        ));
    }
    Ok((drawable, missing))
}

/// The names of a figure's runs whose model weights are absent, each once.
fn runs_without_weights(figure: &FigureSpec) -> Vec<String> {
    let mut names: Vec<String> = figure
        .panels
        .iter()
        .filter(|panel| !RunPaths::new(&panel.run).model().exists())
        .map(|panel| run_name(&panel.run))
        .collect();
    names.dedup();
    names
}

/// For named runs: one figure per run with layers 1, 3 and 6.
pub fn run_figures(runs: &[PathBuf]) -> Result<Vec<FigureSpec>, FigureError> {
    runs.iter()
        .map(|run| {
            let paths = RunPaths::new(run);
            let config = RunConfig::from_file(&paths.config(), &[])
                .map_err(|e| FigureError(format!("{}: {}", run.display(), e.0)))?;
            let layers = figure_layers(config.model.n_layer);
            let name = run_name(run);
            Ok(FigureSpec {
                name: format!("correlations-{name}"),
                title: format!(
                    "|correlation| of the outputs of layers {} of {name}",
                    join(&layers)
                ),
                paper: "compare with the paper's figures 4 and 5".into(),
                panels: layers
                    .into_iter()
                    .map(|layer| PanelSpec {
                        run: run.clone(),
                        layer,
                    })
                    .collect(),
            })
        })
        .collect()
}

/// Computes each distinct (run, layer) correlation once, draws every figure into `out`, writes
/// `scores.csv`, and returns the scores. `progress` hears one line per step of the work.
pub fn draw_figures(
    figures: &[FigureSpec],
    out: &Path,
    prompts: usize,
    backend: Backend,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<PanelScore>, FigureError> {
    fs::create_dir_all(out)
        .map_err(|e| FigureError(format!("cannot create {}: {e}", out.display())))?;
    // Which layers each run needs, so that each model is loaded and run once.
    let mut needed: BTreeMap<PathBuf, Vec<usize>> = BTreeMap::new();
    for panel in figures.iter().flat_map(|f| &f.panels) {
        let layers = needed.entry(panel.run.clone()).or_default();
        if !layers.contains(&panel.layer) {
            layers.push(panel.layer);
        }
    }
    let mut matrices: HashMap<(PathBuf, usize), Measured> = HashMap::new();
    for (run, layers) in &needed {
        let finished = load_finished(run, backend).map_err(|e| FigureError(e.to_string()))?;
        let task = AdditionTask::generate(&finished.config.data)
            .map_err(|e| FigureError(e.to_string()))?;
        let lines = Lines::most_common_shape(&finished.config.data, &task.test, prompts);
        progress(&format!(
            "{}: correlations of layers {} on {} test lines",
            run_name(run),
            join(layers),
            lines.pairs.len()
        ));
        if lines.pairs.len() < 2 {
            return Err(FigureError(format!(
                "{}: fewer than two test lines of one shape",
                run.display()
            )));
        }
        let width = finished.config.model.n_embd;
        for layer in layers {
            if *layer > finished.config.model.n_layer {
                return Err(FigureError(format!(
                    "{} has {} layers, not {layer}",
                    run.display(),
                    finished.config.model.n_layer
                )));
            }
        }
        let outputs = layer_outputs(&finished.decoder, &lines, layers, &finished.device);
        for (&layer, samples) in layers.iter().zip(outputs) {
            let measured = Measured {
                correlation: Correlation::of(samples),
                width,
                lines: lines.clone(),
                description: describe(&finished.config),
            };
            matrices.insert((run.clone(), layer), measured);
        }
    }

    let mut scores = Vec::new();
    for figure in figures {
        let mut panels = Vec::new();
        let mut caption = Vec::new();
        let mut score_line = String::from("Blockiness (docs/figures.md):");
        for (i, spec) in figure.panels.iter().enumerate() {
            let letter = (b'a' + i as u8) as char;
            let Measured {
                correlation,
                width,
                lines,
                description,
            } = &matrices[&(spec.run.clone(), spec.layer)];
            let score = BlockScore::of(correlation, *width);
            let name = run_name(&spec.run);
            write!(
                score_line,
                " ({letter}) {:.3} [share {:.3}, chance {:.3}]",
                score.blockiness, score.share, score.chance
            )
            .unwrap();
            panels.push(HeatmapPanel {
                title: vec![
                    format!("({letter}) {description}"),
                    format!("layer {} output, {name}", spec.layer),
                ],
                correlation,
                width: *width,
                symbols: &lines.symbols,
            });
            scores.push(PanelScore {
                figure: figure.name.clone(),
                panel: letter,
                run: name,
                layer: spec.layer,
                lines: lines.pairs.len(),
                features: correlation.features,
                constant_features: correlation.constant.len(),
                score,
            });
        }
        let first = &matrices[&(figure.panels[0].run.clone(), figure.panels[0].layer)];
        let constant: Vec<String> = scores[scores.len() - panels.len()..]
            .iter()
            .map(|s| format!("({}) {}", s.panel, s.constant_features))
            .collect();
        caption.push(format!(
            "Pearson correlation between all positions x width features of a layer's output (resid_post) over {} test lines \"{}\"; absolute value shown.",
            first.lines.pairs.len(),
            first.lines.symbols.iter().collect::<String>()
        ));
        caption.push(format!(
            "Grid lines separate token positions; {}. Constant features (one value on every line) are drawn as 0: {}.",
            Resolution::for_features(first.correlation.features).describe(first.correlation.features),
            constant.join(", ")
        ));
        caption.push(score_line);
        caption.push(format!(
            "Layers and removed residuals are numbered from 1, as in the paper's tables; its figures number blocks from 0. Compare: {}.",
            figure.paper
        ));
        let path = out.join(format!("{}.png", figure.name));
        progress(&format!("drawing {}", path.display()));
        render(&path, &figure.title, &panels, &caption)?;
    }
    write_scores(&out.join("scores.csv"), &scores)?;
    Ok(scores)
}

/// Writes `scores.csv`: the rows of the figures just drawn, and the rows already in the file of
/// figures not drawn this time whose PNG files are still beside it, so that every figure in the
/// folder keeps its scores and a figure deleted by hand loses them.
fn write_scores(path: &Path, scores: &[PanelScore]) -> Result<(), FigureError> {
    const HEADER: &str =
        "figure,panel,run,layer,lines,features,constant_features,block_share,chance,blockiness";
    let drawn: Vec<&str> = scores.iter().map(|s| s.figure.as_str()).collect();
    let kept = |figure: &str| {
        !drawn.contains(&figure) && path.with_file_name(format!("{figure}.png")).exists()
    };
    let mut rows: Vec<String> = match fs::read_to_string(path) {
        Ok(old) if old.lines().next() == Some(HEADER) => old
            .lines()
            .skip(1)
            .filter(|row| kept(figure_of(row)))
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    };
    for s in scores {
        rows.push(format!(
            "{},{},{},{},{},{},{},{:.4},{:.4},{:.4}",
            s.figure,
            s.panel,
            s.run,
            s.layer,
            s.lines,
            s.features,
            s.constant_features,
            s.score.share,
            s.score.chance,
            s.score.blockiness
        ));
    }
    // By figure; a stable sort keeps each figure's rows in panel order.
    rows.sort_by(|a, b| figure_of(a).cmp(figure_of(b)));
    let mut csv = format!("{HEADER}\n");
    for row in rows {
        writeln!(csv, "{row}").unwrap();
    }
    symbreak_train::run::write_atomic(path, csv.as_bytes())
        .map_err(|e| FigureError(format!("cannot write {}: {e}", path.display())))
}

/// The figure a `scores.csv` row belongs to: its first field.
fn figure_of(row: &str) -> &str {
    row.split(',').next().unwrap_or_default()
}

/// Each finished run's curves into its own folder (`curves.png`), and for the sweep one figure
/// per encoding and measure with a panel per set of removed residuals, seeds overlaid.
pub fn draw_curves(dir: &Path, out: &Path) -> Result<Vec<PathBuf>, FigureError> {
    let runs = read_runs(dir).map_err(FigureError)?;
    let mut written = Vec::new();
    // Each run's metrics, read once, by (encoding, mask, encoding's label) and set of removed
    // residuals.
    type Seeds = Vec<(u64, Vec<MetricsRow>)>;
    let mut groups: BTreeMap<(&str, &str, &str), BTreeMap<Vec<usize>, Seeds>> = BTreeMap::new();
    for run in &runs {
        let folder = dir.join(&run.name);
        let metrics = RunPaths::new(&folder).metrics();
        let rows = read_metrics(&metrics)?;
        let path = folder.join("curves.png");
        render_run(
            &path,
            &format!("{}: {}", run.name, describe(&run.config)),
            &rows,
        )?;
        written.push(path);
        let model = &run.config.model;
        groups
            .entry((
                encoding_name(model.positional),
                mask_name(model.mask),
                encoding_label(model.positional),
            ))
            .or_default()
            .entry(removed_residuals(model))
            .or_default()
            .push((run.config.train.seed, rows));
    }
    if !groups.is_empty() {
        fs::create_dir_all(out)
            .map_err(|e| FigureError(format!("cannot create {}: {e}", out.display())))?;
    }
    for ((encoding, mask, label), sets) in &groups {
        let mut sets: Vec<_> = sets.iter().collect();
        sets.sort_by_key(|(set, _)| (set.len(), (*set).clone()));
        for (measure, stem) in [
            (Measure::ExactMatch, "exact-match"),
            (Measure::Loss, "loss"),
        ] {
            let mut panels = Vec::new();
            for (set, seeds) in &sets {
                let mut series = Vec::new();
                for (seed, rows) in seeds.iter() {
                    series.push(Series {
                        label: format!("seed {seed}"),
                        points: rows
                            .iter()
                            .map(|r| match measure {
                                Measure::ExactMatch => (r.step, r.exact_match),
                                Measure::Loss => (r.step, r.valid_loss),
                            })
                            .filter(|p| p.1.is_finite())
                            .collect(),
                    });
                }
                panels.push((format!("removed {}", set_name(set)), measure, series));
            }
            let what = match measure {
                Measure::ExactMatch => "exact match on the evaluation prompts",
                Measure::Loss => "validation loss",
            };
            let path = out.join(format!("curves-{encoding}-{mask}-{stem}.png"));
            render_grid(
                &path,
                &format!(
                    "{what} against step, {label}, {mask} mask: one panel per set of layers without residuals (from 1)"
                ),
                &panels,
                4,
            )?;
            written.push(path);
        }
    }
    Ok(written)
}

/// One layer's correlation matrix and what it was measured on.
struct Measured {
    correlation: Correlation,
    width: usize,
    lines: Lines,
    description: String,
}

/// "NoPE, causal, residuals removed at {1,2}, seed 3".
fn describe(config: &RunConfig) -> String {
    let model = &config.model;
    format!(
        "{}, {}, residuals removed at {}, seed {}",
        encoding_label(model.positional),
        mask_name(model.mask),
        set_name(&removed_residuals(model)),
        config.train.seed
    )
}

fn run_name(run: &Path) -> String {
    run.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| run.display().to_string())
}

fn join(layers: &[usize]) -> String {
    let names: Vec<String> = layers.iter().map(usize::to_string).collect();
    match names.len() {
        0 | 1 => names.concat(),
        n => format!("{} and {}", names[..n - 1].join(", "), names[n - 1]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figure_layers_are_first_middle_last() {
        assert_eq!(figure_layers(6), vec![1, 3, 6]);
        assert_eq!(figure_layers(2), vec![1, 2]);
        assert_eq!(figure_layers(1), vec![1]);
        assert_eq!(join(&[1, 3, 6]), "1, 3 and 6");
    }
}
