//! Tables 1 and 2 of the paper from a folder of finished runs: per positional encoding and set
//! of layers without residuals, the mean (table 1) or the min and max (table 2) of the seeds'
//! exact-match accuracy, beside the paper's numbers; then the same cells seed by seed, and
//! every finished run. Unfinished runs are not counted; a cell without a finished run says
//! `missing`, never 0.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use symbreak_model::{AttentionMask, DecoderConfig, PositionalEncoding};
use symbreak_train::RunConfig;
use symbreak_train::run::{RunPaths, RunResult};

use crate::paper;

/// One finished run.
#[derive(Debug, Clone)]
pub struct FinishedRun {
    pub name: String,
    pub config: RunConfig,
    pub result: RunResult,
}

/// Reads every finished run (a folder with `result.json`) directly under `dir`, sorted by name.
/// Folders without a result are unfinished and left out.
pub fn read_runs(dir: &Path) -> Result<Vec<FinishedRun>, String> {
    let entries = fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    let mut folders: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    folders.sort();
    let mut runs = Vec::new();
    for folder in folders {
        let paths = RunPaths::new(&folder);
        let Ok(text) = fs::read_to_string(paths.result()) else {
            continue;
        };
        let result: RunResult = serde_json::from_str(&text)
            .map_err(|e| format!("{} is corrupt: {e}", paths.result().display()))?;
        let config = RunConfig::from_file(&paths.config(), &[]).map_err(|e| e.0)?;
        let name = folder
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        runs.push(FinishedRun {
            name,
            config,
            result,
        });
    }
    Ok(runs)
}

/// The finished runs of one configuration, one per seed (or more, if a seed was run twice).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cell {
    /// (seed, exact-match accuracy in %), in the order of the runs' names.
    pub accuracies: Vec<(u64, f64)>,
    pub diverged: usize,
}

impl Cell {
    fn values(&self) -> impl Iterator<Item = f64> + '_ {
        self.accuracies.iter().map(|&(_, accuracy)| accuracy)
    }
    pub fn mean(&self) -> Option<f64> {
        (!self.accuracies.is_empty())
            .then(|| self.values().sum::<f64>() / self.accuracies.len() as f64)
    }
    pub fn min(&self) -> Option<f64> {
        self.values().reduce(f64::min)
    }
    pub fn max(&self) -> Option<f64> {
        self.values().reduce(f64::max)
    }
    /// The accuracies of one seed's runs.
    pub fn of_seed(&self, seed: u64) -> impl Iterator<Item = f64> + '_ {
        self.accuracies
            .iter()
            .filter(move |&&(s, _)| s == seed)
            .map(|&(_, accuracy)| accuracy)
    }
}

/// Cells by (positional encoding, attention mask, sorted layers without residuals).
type Key = (String, String, Vec<usize>);

pub(crate) fn encoding_name(p: PositionalEncoding) -> &'static str {
    match p {
        PositionalEncoding::Learned => "learned",
        PositionalEncoding::None => "nope",
    }
}

/// How tables and figures name an encoding for readers.
pub(crate) fn encoding_label(p: PositionalEncoding) -> &'static str {
    match p {
        PositionalEncoding::Learned => "learned PE",
        PositionalEncoding::None => "NoPE",
    }
}

pub(crate) fn mask_name(m: AttentionMask) -> &'static str {
    match m {
        AttentionMask::Causal => "causal",
        AttentionMask::Bidirectional => "bidirectional",
    }
}

pub fn cells(runs: &[FinishedRun]) -> BTreeMap<Key, Cell> {
    let mut cells: BTreeMap<Key, Cell> = BTreeMap::new();
    for run in runs {
        let ablate = removed_residuals(&run.config.model);
        let key = (
            encoding_name(run.config.model.positional).to_string(),
            mask_name(run.config.model.mask).to_string(),
            ablate,
        );
        let cell = cells.entry(key).or_default();
        cell.accuracies
            .push((run.config.train.seed, run.result.exact_match));
        cell.diverged += usize::from(run.result.diverged);
    }
    cells
}

/// The layers without residuals, sorted (a configuration may list them in any order).
pub(crate) fn removed_residuals(model: &DecoderConfig) -> Vec<usize> {
    let mut layers = model.ablate.clone();
    layers.sort_unstable();
    layers
}

pub(crate) fn set_name(layers: &[usize]) -> String {
    let inner: Vec<String> = layers.iter().map(usize::to_string).collect();
    format!("{{{}}}", inner.join(","))
}

/// One row of `tables.csv`.
struct Row {
    table: u8,
    encoding: &'static str,
    layers: String,
    statistic: &'static str,
    ours: Option<f64>,
    seeds: usize,
    paper: f64,
}

/// `tables.md` and `tables.csv` for the runs in `dir`; returns the Markdown.
pub fn write_tables(dir: &Path) -> Result<String, String> {
    let runs = read_runs(dir)?;
    if runs.is_empty() {
        return Err(format!(
            "{} holds no finished runs (folders with result.json)",
            dir.display()
        ));
    }
    let cells = cells(&runs);
    let (markdown, rows) = render(dir, &runs, &cells);
    let mut csv = String::from("table,encoding,layers,statistic,ours,seeds,paper\n");
    for r in &rows {
        let ours = r.ours.map(|v| format!("{v:.2}")).unwrap_or_default();
        writeln!(
            csv,
            "{},{},\"{}\",{},{ours},{},{:.2}",
            r.table, r.encoding, r.layers, r.statistic, r.seeds, r.paper
        )
        .unwrap();
    }
    let write = |name: &str, text: &str| {
        symbreak_train::run::write_atomic(&dir.join(name), text.as_bytes())
            .map_err(|e| format!("cannot write {name}: {e}"))
    };
    write("tables.csv", &csv)?;
    write("tables.md", &markdown)?;
    Ok(markdown)
}

fn render(dir: &Path, runs: &[FinishedRun], cells: &BTreeMap<Key, Cell>) -> (String, Vec<Row>) {
    let mut md = String::new();
    let mut rows = Vec::new();
    let first = &runs[0].config;
    writeln!(
        md,
        "# Residual sweep: exact-match accuracy (%) on the test set\n"
    )
    .unwrap();
    writeln!(
        md,
        "{} finished runs in `{}`. Model: {} layers, {} heads, width {}, block {}; training: {} steps of {} rows, {} batching, loss on {} tokens (from the runs' `config.toml`{}).\n",
        runs.len(),
        dir.display(),
        first.model.n_layer,
        first.model.n_head,
        first.model.n_embd,
        first.model.block_size,
        first.train.steps,
        first.train.batch_size,
        serde_json::to_value(first.train.batching).unwrap().as_str().unwrap_or_default(),
        serde_json::to_value(first.train.loss).unwrap().as_str().unwrap_or_default(),
        if runs.iter().all(|r| same_recipe(&r.config, first)) { "; all runs share it" } else { "; NOTE: the runs do not all share it" },
    )
    .unwrap();
    writeln!(md, "Each cell: ours, with the number of seeds in parentheses, and the paper's value below it. `missing`: no finished run.\n").unwrap();

    let encodings = [
        PaperRows {
            encoding: encoding_name(PositionalEncoding::Learned),
            label: encoding_label(PositionalEncoding::Learned),
            means: &paper::TABLE1_LEARNED_MEAN,
            mins: &paper::TABLE2_LEARNED_MIN,
            maxes: &paper::TABLE2_LEARNED_MAX,
        },
        PaperRows {
            encoding: encoding_name(PositionalEncoding::None),
            label: encoding_label(PositionalEncoding::None),
            means: &paper::TABLE1_NOPE_MEAN,
            mins: &paper::TABLE2_NOPE_MIN,
            maxes: &paper::TABLE2_NOPE_MAX,
        },
    ];
    writeln!(
        md,
        "## Table 1: mean over seeds, residuals removed from 0 or 1 layers\n"
    )
    .unwrap();
    header(&mut md, &paper::TABLE1_SETS);
    for rows_of in &encodings {
        let line = Line {
            table: 1,
            encoding: rows_of.encoding,
            label: rows_of.label,
            statistic: "mean",
        };
        line.write(
            &mut md,
            &mut rows,
            cells,
            &paper::TABLE1_SETS,
            rows_of.means,
        );
    }

    writeln!(
        md,
        "\n## Table 2: min and max over seeds, residuals removed from 2 or 3 layers\n"
    )
    .unwrap();
    header(&mut md, &paper::TABLE2_SETS);
    for statistic in ["min", "max"] {
        for rows_of in &encodings {
            let paper_values = if statistic == "min" {
                rows_of.mins
            } else {
                rows_of.maxes
            };
            let line = Line {
                table: 2,
                encoding: rows_of.encoding,
                label: rows_of.label,
                statistic,
            };
            line.write(&mut md, &mut rows, cells, &paper::TABLE2_SETS, paper_values);
        }
    }

    by_seed(&mut md, cells);

    let diverged: Vec<&FinishedRun> = runs.iter().filter(|r| r.result.diverged).collect();
    writeln!(md, "\n## Diverged runs\n").unwrap();
    if diverged.is_empty() {
        writeln!(md, "None.").unwrap();
    }
    for run in diverged {
        writeln!(md, "- `{}`: the loss became NaN or infinite after step {}; counted with its accuracy, {:.2}%", run.name, run.result.steps, run.result.exact_match).unwrap();
    }

    every_run(&mut md, runs);

    let in_tables = |key: &Key| {
        key.1 == "causal"
            && (paper::TABLE1_SETS.contains(&key.2.as_slice())
                || paper::TABLE2_SETS.contains(&key.2.as_slice()))
    };
    let others: Vec<(&Key, &Cell)> = cells.iter().filter(|(k, _)| !in_tables(k)).collect();
    if !others.is_empty() {
        writeln!(
            md,
            "\n## Other configurations (not in the paper's tables)\n"
        )
        .unwrap();
        writeln!(md, "| encoding | mask | layers without residuals | seeds | mean | min | max |\n|---|---|---|---|---|---|---|").unwrap();
        for ((encoding, mask, layers), c) in others {
            let f = |v: Option<f64>| v.map(|v| format!("{v:.2}")).unwrap_or_default();
            writeln!(
                md,
                "| {encoding} | {mask} | {} | {} | {} | {} | {} |",
                set_name(layers),
                c.accuracies.len(),
                f(c.mean()),
                f(c.min()),
                f(c.max())
            )
            .unwrap();
        }
    }
    (md, rows)
}

/// The cells of tables 1 and 2 seed by seed: one row per encoding and set of layers, one column
/// per seed, so that what a mean or a min and max stand for (all seeds alike, or some that
/// learned and some that did not) shows at a glance.
fn by_seed(md: &mut String, cells: &BTreeMap<Key, Cell>) {
    let mut seeds: Vec<u64> = cells
        .values()
        .flat_map(|c| c.accuracies.iter().map(|&(seed, _)| seed))
        .collect();
    seeds.sort_unstable();
    seeds.dedup();
    writeln!(md, "\n## Tables 1 and 2 seed by seed\n").unwrap();
    writeln!(md, "Exact match (%) of each run in the tables' cells (causal mask). `missing`: no finished run.\n").unwrap();
    let names: Vec<String> = seeds.iter().map(|s| format!("seed {s}")).collect();
    writeln!(
        md,
        "| encoding | layers without residuals | {} |",
        names.join(" | ")
    )
    .unwrap();
    writeln!(md, "|---|---|{}", "---|".repeat(seeds.len())).unwrap();
    for positional in [PositionalEncoding::Learned, PositionalEncoding::None] {
        for set in paper::TABLE1_SETS.iter().chain(&paper::TABLE2_SETS) {
            let key = (
                encoding_name(positional).to_string(),
                mask_name(AttentionMask::Causal).to_string(),
                set.to_vec(),
            );
            let cell = cells.get(&key);
            let values: Vec<String> = seeds
                .iter()
                .map(|&seed| {
                    let values: Vec<String> = cell
                        .into_iter()
                        .flat_map(|c| c.of_seed(seed))
                        .map(|v| format!("{v:.2}"))
                        .collect();
                    if values.is_empty() {
                        "missing".to_string()
                    } else {
                        values.join(" / ")
                    }
                })
                .collect();
            writeln!(
                md,
                "| {} | {} | {} |",
                encoding_label(positional),
                set_name(set),
                values.join(" | ")
            )
            .unwrap();
        }
    }
}

/// Every finished run, one line each (baselines first, then by the layers removed and the seed),
/// and their total run time, so a table's cell can be traced to its runs.
fn every_run(md: &mut String, runs: &[FinishedRun]) {
    let mut sorted: Vec<&FinishedRun> = runs.iter().collect();
    sorted.sort_by_key(|r| {
        let layers = removed_residuals(&r.config.model);
        (
            encoding_name(r.config.model.positional),
            mask_name(r.config.model.mask),
            layers.len(),
            layers,
            r.config.train.seed,
        )
    });
    let seconds: f64 = runs.iter().map(|r| r.result.wall_seconds).sum();
    writeln!(md, "\n## Every finished run\n").unwrap();
    writeln!(
        md,
        "{} runs, {} s of run time in all ({:.1} run-hours, {} s per run on average; runs made side by side overlap in wall time).\n",
        runs.len(),
        thousands(seconds),
        seconds / 3600.0,
        thousands(seconds / runs.len() as f64),
    )
    .unwrap();
    writeln!(md, "| positional | mask | residuals removed | seed | exact match | steps | wall time | backend |\n|---|---|---|---|---|---|---|---|").unwrap();
    for run in sorted {
        let model = &run.config.model;
        writeln!(
            md,
            "| {} | {} | {} | {} | {:.2}% | {} | {} s | {} |",
            encoding_label(model.positional),
            mask_name(model.mask),
            set_name(&removed_residuals(model)),
            run.config.train.seed,
            run.result.exact_match,
            run.result.steps,
            thousands(run.result.wall_seconds),
            run.result.backend,
        )
        .unwrap();
    }
}

/// A whole number of seconds with thousands separated by commas: 43805.2 -> "43,805".
fn thousands(value: f64) -> String {
    let digits = format!("{:.0}", value);
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn header(md: &mut String, sets: &[&[usize]]) {
    let names: Vec<String> = sets.iter().map(|s| set_name(s)).collect();
    writeln!(md, "| layers without residuals | {} |", names.join(" | ")).unwrap();
    writeln!(md, "|---|{}", "---|".repeat(names.len())).unwrap();
}

/// One encoding's values in the paper: table 1's means, table 2's minima and maxima.
struct PaperRows {
    encoding: &'static str,
    label: &'static str,
    means: &'static [f64; 7],
    mins: &'static [f64; 9],
    maxes: &'static [f64; 9],
}

/// One statistic of one encoding across a table's sets: our row and the paper's row below it.
struct Line {
    table: u8,
    encoding: &'static str,
    label: &'static str,
    statistic: &'static str,
}

impl Line {
    fn write(
        &self,
        md: &mut String,
        rows: &mut Vec<Row>,
        cells: &BTreeMap<Key, Cell>,
        sets: &[&[usize]],
        paper: &[f64],
    ) {
        let mut ours = Vec::new();
        for (set, &paper) in sets.iter().zip(paper) {
            let cell = cells.get(&(
                self.encoding.to_string(),
                "causal".to_string(),
                set.to_vec(),
            ));
            let seeds = cell.map_or(0, |c| c.accuracies.len());
            let value = cell.and_then(match self.statistic {
                "mean" => Cell::mean,
                "min" => Cell::min,
                _ => Cell::max,
            });
            ours.push(match value {
                Some(v) => format!("{v:.2} ({seeds})"),
                None => "missing".to_string(),
            });
            rows.push(Row {
                table: self.table,
                encoding: self.encoding,
                layers: set_name(set),
                statistic: self.statistic,
                ours: value,
                seeds,
                paper,
            });
        }
        let name = match self.statistic {
            "mean" => self.label.to_string(),
            statistic => format!("{} {statistic}", self.label),
        };
        writeln!(md, "| {name}, ours | {} |", ours.join(" | ")).unwrap();
        let theirs: Vec<String> = paper.iter().map(|v| format!("{v:.2}")).collect();
        writeln!(md, "| {name}, paper | {} |", theirs.join(" | ")).unwrap();
    }
}

/// Whether two runs differ only in what the tables group by or average over.
fn same_recipe(a: &RunConfig, b: &RunConfig) -> bool {
    let strip = |c: &RunConfig| {
        let mut c = c.clone();
        c.model.positional = PositionalEncoding::Learned;
        c.model.mask = AttentionMask::Causal;
        c.model.ablate.clear();
        c.train.seed = 0;
        c
    };
    strip(a) == strip(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(
        name: &str,
        positional: PositionalEncoding,
        ablate: Vec<usize>,
        accuracy: f64,
    ) -> FinishedRun {
        let mut config = RunConfig::preset("smoke").unwrap();
        config.model.positional = positional;
        config.model.ablate = ablate;
        FinishedRun {
            name: name.into(),
            config,
            result: RunResult {
                exact_match: accuracy,
                correct: 0,
                total: 500,
                steps: 10,
                steps_planned: 10,
                diverged: false,
                wall_seconds: 1.0,
                backend: symbreak_train::Backend::Ndarray,
                seed: 1,
                symbreak_version: "test".into(),
                symbreak_commit: None,
                cpu_vectors: None,
            },
        }
    }

    #[test]
    fn statistics_over_seeds_and_missing_cells() {
        let runs = vec![
            run("a", PositionalEncoding::Learned, vec![], 90.0),
            run("b", PositionalEncoding::Learned, vec![], 100.0),
            run("c", PositionalEncoding::None, vec![2, 1], 10.0),
            run("d", PositionalEncoding::None, vec![1, 2], 30.0),
        ];
        // Seeds 2, 1, 2, 1: the list of runs sorts them.
        let mut runs = runs;
        for (i, run) in runs.iter_mut().enumerate() {
            run.config.train.seed = 2 - (i as u64 % 2);
        }
        let cells = cells(&runs);
        let empty = &cells[&("learned".into(), "causal".into(), vec![])];
        assert_eq!((empty.mean(), empty.accuracies.len()), (Some(95.0), 2));
        let pair = &cells[&("nope".into(), "causal".into(), vec![1, 2])];
        assert_eq!((pair.min(), pair.max()), (Some(10.0), Some(30.0)));
        let (md, rows) = render(Path::new("x"), &runs, &cells);
        assert!(
            md.contains("| learned PE, ours | 95.00 (2) | missing |"),
            "{md}"
        );
        assert!(
            md.contains("| NoPE min, ours | 10.00 (2) | missing |"),
            "{md}"
        );
        assert!(md.contains("| NoPE max, ours | 30.00 (2) |"), "{md}");
        assert!(
            md.contains("| learned PE, paper | 100.00 | 99.97 |"),
            "{md}"
        );
        assert!(
            md.contains("4 runs, 4 s of run time in all (0.0 run-hours, 1 s per run on average;"),
            "{md}"
        );
        let listed: Vec<&str> = md.lines().filter(|l| l.ends_with("| ndarray |")).collect();
        assert_eq!(
            listed,
            [
                "| learned PE | causal | {} | 1 | 100.00% | 10 | 1 s | ndarray |",
                "| learned PE | causal | {} | 2 | 90.00% | 10 | 1 s | ndarray |",
                "| NoPE | causal | {1,2} | 1 | 30.00% | 10 | 1 s | ndarray |",
                "| NoPE | causal | {1,2} | 2 | 10.00% | 10 | 1 s | ndarray |",
            ]
        );
        assert!(
            md.contains("| encoding | layers without residuals | seed 1 | seed 2 |\n"),
            "{md}"
        );
        assert!(
            md.contains("| learned PE | {} | 100.00 | 90.00 |\n"),
            "{md}"
        );
        assert!(
            md.contains("| learned PE | {1} | missing | missing |\n"),
            "{md}"
        );
        assert!(md.contains("| NoPE | {1,2} | 30.00 | 10.00 |\n"), "{md}");
        let missing = rows
            .iter()
            .find(|r| r.table == 1 && r.encoding == "nope" && r.layers == "{}")
            .unwrap();
        assert_eq!((missing.ours, missing.seeds), (None, 0));
    }
}
