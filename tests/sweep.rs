//! End-to-end tests of `symbreak sweep` and `symbreak tables`: a tiny grid runs, resumes after
//! the sweep is killed without re-running finished runs, shards cover the plan once, and bad
//! sweep files are refused before anything runs.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime};

mod common;
use common::{succeeds, symbreak, text};

/// Smoke runs cut to 40 steps: two ablation sets x two seeds.
const TINY: &str = r#"
base = "smoke"
[axes.train]
seed = [1, 2]
steps = [40]
eval_every = [20]
eval_prompts = [20]
[axes.model]
ablate = [[], [1]]
"#;

const RUNS: [&str; 4] = [
    "learned-ablate-none-seed1",
    "learned-ablate-1-seed1",
    "learned-ablate-none-seed2",
    "learned-ablate-1-seed2",
];

fn sweep_file(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("sweep.toml");
    fs::write(&path, text).unwrap();
    path
}

fn sweep_command(file: &Path, out: &Path, extra: &[&str]) -> Command {
    let mut command = symbreak();
    command
        .arg("sweep")
        .arg(file)
        .arg("--out")
        .arg(out)
        .args(extra);
    command
}

fn sweep(file: &Path, out: &Path, extra: &[&str]) -> Output {
    sweep_command(file, out, extra).output().unwrap()
}

fn tables(out: &Path) -> String {
    succeeds(symbreak().arg("tables").arg(out));
    fs::read_to_string(out.join("tables.csv")).unwrap()
}

fn csv_cell<'a>(
    csv: &'a str,
    table: &str,
    encoding: &str,
    layers: &str,
    statistic: &str,
) -> Vec<&'a str> {
    let prefix = format!("{table},{encoding},\"{layers}\",{statistic},");
    let row = csv
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no row {prefix}"));
    row[prefix.len()..].split(',').collect()
}

fn modified(path: &Path) -> SystemTime {
    fs::metadata(path).unwrap().modified().unwrap()
}

#[test]
fn a_tiny_sweep_runs_and_tabulates() {
    let tmp = tempfile::tempdir().unwrap();
    let file = sweep_file(tmp.path(), TINY);
    let out = tmp.path().join("sweep");
    let output = sweep(&file, &out, &["--jobs", "2"]);
    assert!(output.status.success(), "{}", text(&output));
    assert!(
        text(&output).contains("4 runs, 0 finished"),
        "{}",
        text(&output)
    );
    for run in RUNS {
        assert!(
            out.join(run).join("result.json").exists(),
            "{run} did not finish"
        );
    }
    let csv = tables(&out);
    let empty = csv_cell(&csv, "1", "learned", "{}", "mean");
    assert_eq!(empty[1], "2", "two seeds in the {{}} cell: {empty:?}");
    assert!(!empty[0].is_empty());
    assert_eq!(csv_cell(&csv, "1", "learned", "{1}", "mean")[1], "2");
    assert_eq!(
        csv_cell(&csv, "1", "learned", "{2}", "mean")[..2],
        ["", "0"],
        "a missing cell is empty, not 0"
    );
    assert_eq!(csv_cell(&csv, "1", "nope", "{}", "mean")[..2], ["", "0"]);
    assert_eq!(
        csv_cell(&csv, "2", "learned", "{1,2}", "min")[2],
        "98.53",
        "the paper's value is beside ours"
    );
    let markdown = fs::read_to_string(out.join("tables.md")).unwrap();
    assert!(
        markdown.contains("| learned PE, ours |") && markdown.contains("missing"),
        "{markdown}"
    );

    let again = sweep(&file, &out, &[]);
    assert!(again.status.success(), "{}", text(&again));
    assert!(
        text(&again).contains("4 finished"),
        "a finished sweep runs nothing: {}",
        text(&again)
    );
    assert!(
        text(&again).contains("4 were already done"),
        "{}",
        text(&again)
    );

    // The same folder with a changed plan: refused, naming the field, before anything runs.
    let changed = sweep_file(tmp.path(), &TINY.replace("steps = [40]", "steps = [30]"));
    let results_before = fs::read_to_string(out.join(RUNS[0]).join("result.json")).unwrap();
    for extra in [&["--dry-run"][..], &[]] {
        let refused = sweep(&changed, &out, extra);
        assert!(!refused.status.success(), "{}", text(&refused));
        assert!(
            text(&refused).contains("4 run folders")
                && text(&refused).contains("train.steps: recorded 40, planned 30")
                && text(&refused).contains("--out"),
            "{}",
            text(&refused)
        );
    }
    assert_eq!(
        fs::read_to_string(out.join(RUNS[0]).join("result.json")).unwrap(),
        results_before
    );
}

#[test]
fn a_killed_sweep_continues_without_rerunning_finished_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let file = sweep_file(tmp.path(), TINY);
    let whole = tmp.path().join("whole");
    assert!(sweep(&file, &whole, &[]).status.success());

    let out = tmp.path().join("killed");
    // One run at a time, so that three runs are still to do when the first one finishes, on a
    // machine of any size (with `auto`, a machine with four threads would run all four at once).
    let mut child = sweep_command(&file, &out, &["--jobs", "1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let first = out.join(RUNS[0]).join("result.json");
    let start = Instant::now();
    while !first.exists() && start.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert!(first.exists(), "the first run finished before the kill");
    let finished_at = modified(&first);
    let finished_before = RUNS
        .iter()
        .filter(|r| out.join(r).join("result.json").exists())
        .count();
    assert!(
        finished_before < RUNS.len(),
        "the sweep was killed before its end"
    );

    let resumed = sweep(&file, &out, &[]);
    assert!(resumed.status.success(), "{}", text(&resumed));
    assert!(
        text(&resumed).contains(&format!("{finished_before} were already done")),
        "{}",
        text(&resumed)
    );
    assert_eq!(
        modified(&first),
        finished_at,
        "the finished run was not run again"
    );
    assert_eq!(
        tables(&out),
        tables(&whole).replace(whole.to_str().unwrap(), out.to_str().unwrap())
    );
}

fn planned(file: &Path, out: &Path, shard: &str) -> Vec<String> {
    let output = sweep(file, out, &["--dry-run", "--shard", shard]);
    assert!(output.status.success(), "{}", text(&output));
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix("  new      ").map(str::to_string))
        .collect()
}

/// The N of "N threads each" (or "1 thread each") in a dry run's first line, with `RAYON_NUM_THREADS` set or not.
fn threads_each(file: &Path, out: &Path, jobs: &str, rayon: Option<&str>) -> String {
    let mut command = sweep_command(file, out, &["--dry-run", "--jobs", jobs]);
    match rayon {
        Some(n) => command.env("RAYON_NUM_THREADS", n),
        None => command.env_remove("RAYON_NUM_THREADS"),
    };
    let output = command.output().unwrap();
    assert!(output.status.success(), "{}", text(&output));
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    let (_, after) = stdout
        .split_once(" at a time with ")
        .expect("the plan line");
    after.split(" thread").next().unwrap().to_string()
}

#[test]
fn a_set_rayon_num_threads_is_the_sweeps_thread_budget() {
    let tmp = tempfile::tempdir().unwrap();
    let file = sweep_file(tmp.path(), TINY);
    let out = tmp.path().join("plan");
    assert_eq!(threads_each(&file, &out, "1", Some("6")), "6");
    assert_eq!(threads_each(&file, &out, "2", Some("6")), "3");
    assert_eq!(threads_each(&file, &out, "4", Some("2")), "1");
    let machine = std::thread::available_parallelism().unwrap().get();
    assert_eq!(
        threads_each(&file, &out, "1", None),
        machine.to_string(),
        "unset: every thread of the machine"
    );
}

/// The first line of a dry run without `--jobs`, under `RAYON_NUM_THREADS`.
fn auto_plan(file: &Path, out: &Path, rayon: &str) -> String {
    let output = sweep_command(file, out, &["--dry-run"])
        .env("RAYON_NUM_THREADS", rayon)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", text(&output));
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .next()
        .unwrap()
        .to_string()
}

#[test]
fn by_default_a_cpu_sweep_runs_one_run_per_thread() {
    let tmp = tempfile::tempdir().unwrap();
    let file = sweep_file(tmp.path(), TINY);
    let out = tmp.path().join("plan");
    let two = auto_plan(&file, &out, "2");
    assert!(two.contains("2 at a time with 1 thread each"), "{two}");
    // Never more at a time than runs to do (TINY has 4); the threads go to the runs.
    let eight = auto_plan(&file, &out, "8");
    assert!(eight.contains("4 at a time with 2 threads each"), "{eight}");
    // The runs' own backends are the ones named (and checked), not only the build's default.
    let mixed = sweep_file(
        tmp.path(),
        "base = \"smoke\"\n[axes.train]\nbackend = [\"ndarray\", \"flex\"]\n",
    );
    if cfg!(feature = "ndarray") {
        let plan = auto_plan(&mixed, &out, "2");
        assert!(plan.contains("on smoke (ndarray, flex): 2 runs"), "{plan}");
    } else {
        let output = sweep_command(&mixed, &out, &["--dry-run"])
            .output()
            .unwrap();
        assert!(!output.status.success());
        let said = text(&output);
        assert!(said.contains("rebuild with `--features ndarray`"), "{said}");
        assert!(!out.exists(), "a refused sweep writes nothing");
    }
}

#[test]
fn two_shards_cover_the_plan_once() {
    let tmp = tempfile::tempdir().unwrap();
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("experiments/sweep-residuals.toml");
    let out = tmp.path().join("plan");
    let mut all = planned(&file, &out, "1/1");
    assert_eq!(all.len(), 160);
    let (first, second) = (planned(&file, &out, "1/2"), planned(&file, &out, "2/2"));
    assert_eq!(first.len(), 80);
    let mut both: Vec<String> = first.into_iter().chain(second).collect();
    both.sort();
    all.sort();
    assert_eq!(both, all);
    assert!(!out.exists(), "a dry run writes nothing");
}

#[test]
fn bad_sweep_files_stop_before_any_run() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("never");
    for (text_of_file, expected) in [
        (
            "base = \"smoke\"\n[axes.model]\ndepth = [1, 2]\n",
            "model.depth: unknown field",
        ),
        (
            "base = \"smoke\"\n[axes.model]\nablate = [[1], [3]]\n",
            "model.ablate",
        ),
        ("base = \"smoke\"\n[axes.model]\nablate = []\n", "empty"),
        (
            "base = \"smoke\"\n[axes.data]\ntrain_size = [6000, 8000]\n",
            "data.train_size: cannot find",
        ),
    ] {
        let file = sweep_file(tmp.path(), text_of_file);
        let output = sweep(&file, &out, &[]);
        assert_eq!(output.status.code(), Some(2), "{}", text(&output));
        assert!(
            text(&output).contains(expected),
            "{:?} lacks {expected:?}",
            text(&output)
        );
        assert!(!out.exists(), "nothing is written");
    }
    let file = sweep_file(tmp.path(), TINY);
    let output = sweep(&file, &out, &["--shard", "3/2"]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
}
