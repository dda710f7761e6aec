//! End-to-end test of `symbreak figures`: a tiny NoPE sweep gives the paper's three figures,
//! their scores and the training curves, as PNG files of the promised size; bad input is refused.

use std::fs;
use std::path::Path;

mod common;
use common::{succeeds, symbreak, text};

/// Smoke-sized NoPE runs, 30 steps: residuals removed at {}, {1} and {1,2}, two seeds.
const NOPE_SWEEP: &str = r#"
base = "smoke"
[axes.train]
seed = [1, 2]
steps = [30]
eval_every = [15]
eval_prompts = [20]
[axes.model]
positional = ["none"]
ablate = [[], [1], [1, 2]]
"#;

fn png_size(path: &Path) -> (u32, u32) {
    let image =
        image::open(path).unwrap_or_else(|e| panic!("{} is not a PNG: {e}", path.display()));
    (image.width(), image.height())
}

#[test]
fn a_sweep_gives_figures_3_to_5_scores_and_curves() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sweep.toml");
    fs::write(&file, NOPE_SWEEP).unwrap();
    let sweep = dir.path().join("sweep");
    succeeds(symbreak().arg("sweep").arg(&file).arg("--out").arg(&sweep));

    succeeds(symbreak().args(["figures", "--prompts", "300"]).arg(&sweep));
    let figures = sweep.join("figures");

    // Smoke models have 2 layers of width 64: figure 3 has 4 panels, figures 4 and 5 show
    // layers 1 and 2.
    let heatmap_figure = |panels: u32| {
        (
            panels * (40 + 560 + 40) + 120,
            44 + 48 + 20 + 560 + 16 + 4 * 20 + 12,
        )
    };
    assert_eq!(png_size(&figures.join("figure3.png")), heatmap_figure(4));
    assert_eq!(png_size(&figures.join("figure4.png")), heatmap_figure(2));
    assert_eq!(png_size(&figures.join("figure5.png")), heatmap_figure(2));

    let scores = fs::read_to_string(figures.join("scores.csv")).unwrap();
    let rows: Vec<&str> = scores.lines().skip(1).collect();
    assert_eq!(rows.len(), 4 + 2 + 2, "{scores}");
    for row in &rows {
        let fields: Vec<&str> = row.split(',').collect();
        // Two-digit lines of one shape ($ab+cd=ss$ or $ab+cd=sss$), all positions x width 64.
        let lines: usize = fields[4].parse().unwrap();
        assert!((100..=300).contains(&lines), "{row}");
        assert!(["640", "704"].contains(&fields[5]), "{row}");
        let blockiness: f64 = fields[9].parse().unwrap();
        assert!(blockiness.is_finite() && blockiness <= 1.0, "{row}");
        // Position 0 always holds `$` and a causal model sees nothing else there.
        assert_eq!(fields[6], "64", "constant features: {row}");
    }
    assert!(
        rows[0].starts_with("figure3,a,nope-ablate-none-seed1,1,"),
        "{}",
        rows[0]
    );
    assert!(
        rows[3].starts_with("figure3,d,nope-ablate-1_2-seed2,1,"),
        "{}",
        rows[3]
    );
    assert!(
        rows[7].starts_with("figure5,b,nope-ablate-1_2-seed1,2,"),
        "{}",
        rows[7]
    );

    // Curves: one per run, and exact match and loss per encoding and mask.
    for run in ["nope-ablate-none-seed1", "nope-ablate-1_2-seed2"] {
        assert_eq!(png_size(&sweep.join(run).join("curves.png")), (840, 344));
    }
    let overlay = figures.join("curves-nope-causal-exact-match.png");
    assert_eq!(png_size(&overlay), (4 * 420, 300 + 44));
    assert!(figures.join("curves-nope-causal-loss.png").exists());
    let leftovers: Vec<_> = fs::read_dir(&figures)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains("partial"))
        .collect();
    assert!(leftovers.is_empty(), "half-written files: {leftovers:?}");

    // A run whose weights are gone (restored from committed small files): the figures that need
    // it are skipped, never drawn from the next seed instead, and keep their PNG files and their
    // rows in scores.csv; the figure that does not need it is redrawn. A skipped figure whose PNG
    // was deleted by hand loses its rows.
    let figure5 = fs::read(figures.join("figure5.png")).unwrap();
    fs::remove_file(sweep.join("nope-ablate-1_2-seed1").join("model.bpk")).unwrap();
    fs::remove_file(figures.join("figure3.png")).unwrap();
    let rows: Vec<&str> = rows
        .into_iter()
        .filter(|row| !row.starts_with("figure3,"))
        .collect();
    assert!(rows.iter().any(|row| row.starts_with("figure5,")));
    let printed = succeeds(symbreak().args(["figures", "--prompts", "300"]).arg(&sweep));
    for figure in ["figure3", "figure5"] {
        assert!(
            printed.contains(&format!(
                "skipped: {figure} is drawn from nope-ablate-1_2-seed1, whose model weights (model.bpk) are absent"
            )),
            "{printed}"
        );
    }
    assert!(!printed.contains("figure5.png"), "{printed}");
    assert_eq!(fs::read(figures.join("figure5.png")).unwrap(), figure5);
    let after = fs::read_to_string(figures.join("scores.csv")).unwrap();
    let after: Vec<&str> = after.lines().skip(1).collect();
    assert_eq!(after.len(), rows.len(), "{after:?}");
    for (old, new) in rows.iter().zip(&after) {
        if old.starts_with("figure4,") {
            assert_eq!(
                old.split(',').take(4).collect::<Vec<_>>(),
                new.split(',').take(4).collect::<Vec<_>>()
            );
        } else {
            assert_eq!(old, new, "a kept figure's row changed");
        }
    }

    // Into a new folder, only figure 4 is drawn.
    let partial = dir.path().join("partial");
    succeeds(
        symbreak()
            .args(["figures", "--prompts", "100", "--out"])
            .arg(&partial)
            .arg(&sweep),
    );
    assert!(partial.join("figure4.png").exists());
    assert!(!partial.join("figure3.png").exists() && !partial.join("figure5.png").exists());
    let partial_scores = fs::read_to_string(partial.join("scores.csv")).unwrap();
    assert_eq!(partial_scores.lines().count(), 1 + 2, "{partial_scores}");

    // Named runs: layers 1 and 2 of one run.
    let out = dir.path().join("named");
    succeeds(
        symbreak()
            .args(["figures", "--prompts", "100", "--out"])
            .arg(&out)
            .arg("--run")
            .arg(sweep.join("nope-ablate-1-seed2")),
    );
    assert_eq!(
        png_size(&out.join("correlations-nope-ablate-1-seed2.png")),
        heatmap_figure(2)
    );
}

#[test]
fn figures_refuse_bad_input_with_one_clear_line() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nowhere");
    let output = symbreak().arg("figures").arg(&missing).output().unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(
        text(&output).contains("no sweep folder"),
        "{}",
        text(&output)
    );

    let empty = dir.path().join("empty");
    fs::create_dir(&empty).unwrap();
    let output = symbreak().arg("figures").arg(&empty).output().unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(
        text(&output).contains("skipped: figure 3 needs"),
        "{}",
        text(&output)
    );
    assert!(!empty.join("figures").join("scores.csv").exists());

    let output = symbreak()
        .args(["figures", "--prompts", "1"])
        .arg(&empty)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(text(&output).contains("at least 2"), "{}", text(&output));
}
