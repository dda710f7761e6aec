//! Sweeps: a base configuration plus axes, expanded into a plan of runs, each run a folder under
//! the sweep's folder named from its configuration. Running a plan skips finished runs, resumes
//! unfinished ones, and runs the rest `jobs` at a time, each in its own process (Burn's random
//! seed is global to a process, so parallel runs in one process would not be reproducible).

use std::fmt;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use serde::Deserialize;

use symbreak_data::{AdditionTask, TaskConfig};

use crate::config::{ConfigError, Override, RunConfig};
use crate::renderer::terminal_bar;
use crate::run::{RunPaths, RunResult, write_atomic};

/// A sweep file: `base` (a preset name, or a run config path relative to the sweep file) and
/// `[axes.SECTION]` tables whose fields list the values to sweep.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SweepFile {
    base: String,
    axes: toml::Table,
}

/// One axis: a config field and the values it takes.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    pub key: String,
    pub values: Vec<toml::Value>,
}

#[derive(Debug, Clone)]
pub struct PlannedRun {
    /// The folder name, e.g. `nope-ablate-3_4-seed2`.
    pub name: String,
    pub config: RunConfig,
}

#[derive(Debug, Clone)]
pub struct Sweep {
    pub base: String,
    pub axes: Vec<Axis>,
    pub runs: Vec<PlannedRun>,
}

fn error<T>(message: impl Into<String>) -> Result<T, ConfigError> {
    Err(ConfigError(message.into()))
}

/// Axes named in run folder names by [`RunConfig::run_name`]; other axes with more than one
/// value add `-field=value`.
const NAMED_AXES: [&str; 4] = [
    "model.positional",
    "model.mask",
    "model.ablate",
    "train.seed",
];

impl Sweep {
    /// Reads and expands a sweep file; `base` (e.g. from `--preset`) replaces the file's base.
    /// Every run's configuration is validated here, before anything runs.
    pub fn load(path: &Path, base: Option<&str>) -> Result<Self, ConfigError> {
        let text = fs::read_to_string(path)
            .map_err(|e| ConfigError(format!("cannot read sweep file {}: {e}", path.display())))?;
        let file: SweepFile = toml::from_str(&text)
            .map_err(|e| ConfigError(format!("{}: {}", path.display(), e.message().trim())))?;
        let base = base.map(str::to_string).unwrap_or(file.base);
        let mut axes = Vec::new();
        for (section, fields) in &file.axes {
            let toml::Value::Table(fields) = fields else {
                return error(format!(
                    "axes.{section} must be a table of fields, e.g. [axes.{section}]"
                ));
            };
            for (field, values) in fields {
                let key = format!("{section}.{field}");
                let toml::Value::Array(values) = values else {
                    return error(format!("axis {key} must list its values in [...]"));
                };
                if values.is_empty() {
                    return error(format!("axis {key} has no values: the grid would be empty"));
                }
                axes.push(Axis {
                    key,
                    values: values.clone(),
                });
            }
        }
        if axes.is_empty() {
            return error("the sweep has no axes: add [axes.SECTION] tables");
        }
        let base_dir = path.parent().unwrap_or(Path::new("."));
        let runs = expand(&base, base_dir, &axes)?;
        // Each run builds its training set first; build every distinct one here too, so that a
        // data setting that cannot be balanced stops the sweep before any run folder is written.
        let mut data_checked: Vec<&TaskConfig> = Vec::new();
        for run in &runs {
            if !data_checked.contains(&&run.config.data) {
                AdditionTask::generate(&run.config.data)
                    .map_err(|e| ConfigError(format!("run {}: {e}", run.name)))?;
                data_checked.push(&run.config.data);
            }
        }
        Ok(Self { base, axes, runs })
    }

    /// The runs of shard `index` (from 1) of `count`: every `count`-th run of the plan.
    pub fn shard(&self, index: usize, count: usize) -> Vec<&PlannedRun> {
        self.runs
            .iter()
            .enumerate()
            .filter(|(i, _)| i % count == index - 1)
            .map(|(_, run)| run)
            .collect()
    }
}

/// The cartesian product of the axes over the base, the first axis outermost.
fn expand(base: &str, base_dir: &Path, axes: &[Axis]) -> Result<Vec<PlannedRun>, ConfigError> {
    let mut combinations: Vec<Vec<Override>> = vec![Vec::new()];
    for axis in axes {
        combinations = combinations
            .into_iter()
            .flat_map(|prefix| {
                axis.values.iter().map(move |value| {
                    let mut overrides = prefix.clone();
                    overrides.push(Override::new(&axis.key, value.clone()));
                    overrides
                })
            })
            .collect();
    }
    let mut runs = Vec::with_capacity(combinations.len());
    for overrides in combinations {
        let config = base_config(base, base_dir, &overrides).map_err(|e| {
            let point: Vec<String> = overrides
                .iter()
                .map(|o| format!("{}={}", o.key, o.value))
                .collect();
            ConfigError(format!("run {}: {}", point.join(" "), e.0))
        })?;
        let mut name = config.run_name();
        let varied = |key: &str| axes.iter().any(|a| a.key == key && a.values.len() > 1);
        for o in overrides
            .iter()
            .filter(|o| !NAMED_AXES.contains(&o.key.as_str()) && varied(&o.key))
        {
            let field = o.key.rsplit('.').next().unwrap_or(&o.key);
            let value = o.value.to_string().replace(['"', ' ', '[', ']', ','], "");
            name.push_str(&format!("-{field}={value}"));
        }
        runs.push(PlannedRun { name, config });
    }
    let mut names: Vec<&str> = runs.iter().map(|r| r.name.as_str()).collect();
    names.sort_unstable();
    if let Some(pair) = names.windows(2).find(|w| w[0] == w[1]) {
        return error(format!(
            "two runs of the grid are the same run ({}): an axis repeats a value",
            pair[0]
        ));
    }
    Ok(runs)
}

fn base_config(
    base: &str,
    base_dir: &Path,
    overrides: &[Override],
) -> Result<RunConfig, ConfigError> {
    if base.ends_with(".toml") {
        RunConfig::from_file(&base_dir.join(base), overrides)
    } else {
        RunConfig::preset_with(base, overrides)
    }
}

/// Where a planned run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Finished,
    /// Started before (it has files) but has no result yet: it resumes.
    Unfinished,
    New,
}

pub fn status(dir: &Path) -> Status {
    let paths = RunPaths::new(dir);
    if paths.result().exists() {
        Status::Finished
    } else if paths.config().exists() {
        Status::Unfinished
    } else {
        Status::New
    }
}

/// How a started run's recorded `config.toml` differs from the plan's configuration for it, one
/// `section.field: recorded ..., planned ...` line per field; empty when they agree. The
/// backend is left out: a run resumes on the backend it started on.
pub fn recorded_differences(dir: &Path, planned: &RunConfig) -> Vec<String> {
    let path = RunPaths::new(dir).config();
    let recorded = match RunConfig::from_file(&path, &[]) {
        Ok(config) => config,
        Err(e) => return vec![format!("unreadable: {e}")],
    };
    let fields = |config: &RunConfig| {
        let mut config = config.clone();
        config.train.backend = None;
        let table: toml::Table =
            toml::from_str(&config.to_toml()).expect("our own TOML reads back");
        table
            .into_iter()
            .flat_map(|(section, fields)| match fields {
                toml::Value::Table(fields) => fields
                    .into_iter()
                    .map(|(field, value)| (format!("{section}.{field}"), value.to_string()))
                    .collect::<Vec<_>>(),
                value => vec![(section, value.to_string())],
            })
            .collect::<std::collections::BTreeMap<String, String>>()
    };
    let (recorded, planned) = (fields(&recorded), fields(planned));
    let keys: std::collections::BTreeSet<&String> = recorded.keys().chain(planned.keys()).collect();
    let absent = "(absent)".to_string();
    keys.into_iter()
        .filter_map(|key| {
            let (was, wanted) = (
                recorded.get(key).unwrap_or(&absent),
                planned.get(key).unwrap_or(&absent),
            );
            (was != wanted).then(|| format!("{key}: recorded {was}, planned {wanted}"))
        })
        .collect()
}

/// How a sweep ended.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    pub skipped: usize,
    pub finished: usize,
    pub diverged: usize,
    pub failed: usize,
}

impl fmt::Display for Tally {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} finished now ({} diverged), {} failed, {} were already done",
            self.finished, self.diverged, self.failed, self.skipped
        )
    }
}

/// How to start one run: the `symbreak` executable and threads per run (the backend is in each
/// run's `config.toml`).
pub struct Launcher {
    pub program: PathBuf,
    pub threads: usize,
}

impl Launcher {
    /// Starts `symbreak train` on the run folder (its `config.toml` already written), with its
    /// output in `train.log` there. The child's stdin is a pipe from this process: when this
    /// process dies, the child sees it closed and stops too (see `--exit-with-parent`).
    fn start(&self, dir: &Path) -> std::io::Result<Child> {
        let log = fs::File::options()
            .create(true)
            .append(true)
            .open(dir.join("train.log"))?;
        Command::new(&self.program)
            .arg("train")
            .arg("--config")
            .arg(dir.join("config.toml"))
            .arg("--out")
            .arg(dir)
            .args(["--resume", "--exit-with-parent"])
            .env("RAYON_NUM_THREADS", self.threads.to_string())
            .env("MATMUL_NUM_THREADS", self.threads.to_string())
            .stdin(Stdio::piped())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
    }
}

/// Runs the runs that are not finished, `jobs` at a time, and says how it went.
pub fn execute(
    runs: &[&PlannedRun],
    out: &Path,
    jobs: usize,
    launcher: &Launcher,
) -> std::io::Result<Tally> {
    let mut tally = Tally::default();
    let mut queue = Vec::new();
    for run in runs {
        let dir = out.join(&run.name);
        let status = status(&dir);
        if status == Status::Finished {
            tally.skipped += 1;
            continue;
        }
        if status == Status::New {
            fs::create_dir_all(&dir)?;
            write_atomic(&dir.join("config.toml"), run.config.to_toml().as_bytes())?;
        }
        queue.push((run.name.clone(), dir));
    }
    let total = queue.len();
    let progress = Progress::new(total);
    let started = Instant::now();
    let mut running: Vec<(String, PathBuf, Child, Instant)> = Vec::new();
    let mut queue = queue.into_iter();
    loop {
        while running.len() < jobs.max(1) {
            let Some((name, dir)) = queue.next() else {
                break;
            };
            wait_until_free(&dir, Duration::from_secs(30));
            let child = launcher.start(&dir)?;
            running.push((name, dir, child, Instant::now()));
        }
        if running.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
        let mut index = 0;
        while index < running.len() {
            let Some(exit) = running[index].2.try_wait()? else {
                index += 1;
                continue;
            };
            let (name, dir, _, run_started) = running.swap_remove(index);
            let outcome = match read_result(&dir) {
                Some(result) if exit.success() => {
                    tally.finished += 1;
                    if result.diverged {
                        tally.diverged += 1;
                    }
                    format!(
                        "{name}: {:.2}% exact match{}",
                        result.exact_match,
                        if result.diverged { ", diverged" } else { "" }
                    )
                }
                _ => {
                    tally.failed += 1;
                    format!(
                        "{name}: FAILED ({exit}); see {}",
                        dir.join("train.log").display()
                    )
                }
            };
            let done = tally.finished + tally.failed;
            let seconds = run_started.elapsed().as_secs_f64();
            progress.report(
                done,
                &tally,
                &format!("{outcome} in {seconds:.0}s"),
                started,
            );
        }
    }
    progress.finish();
    Ok(tally)
}

/// Waits (up to `limit`) while another process holds the run's lock: a run of a killed sweep
/// takes a moment to notice and stop. If it is still busy after that, the run's own lock check
/// reports it.
fn wait_until_free(dir: &Path, limit: Duration) {
    let start = Instant::now();
    while start.elapsed() < limit {
        let Ok(file) = fs::File::options().read(true).open(dir.join("lock")) else {
            return;
        };
        if file.try_lock().is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn read_result(dir: &Path) -> Option<RunResult> {
    let text = fs::read_to_string(RunPaths::new(dir).result()).ok()?;
    serde_json::from_str(&text).ok()
}

/// The sweep's overall progress: a bar on a terminal, one line per finished run otherwise.
struct Progress {
    bar: Option<ProgressBar>,
    total: usize,
}

impl Progress {
    fn new(total: usize) -> Self {
        let bar = terminal_bar(
            total as u64,
            "{bar:30} {pos}/{len} runs | {msg} | {elapsed_precise}, {eta} left",
        );
        Self { bar, total }
    }

    fn report(&self, done: usize, tally: &Tally, line: &str, started: Instant) {
        match &self.bar {
            Some(bar) => {
                bar.set_position(done as u64);
                bar.set_message(format!(
                    "{} diverged, {} failed",
                    tally.diverged, tally.failed
                ));
                bar.println(line);
            }
            None => {
                let elapsed = started.elapsed().as_secs_f64();
                let left = elapsed / done as f64 * (self.total - done) as f64;
                println!(
                    "[{done}/{}] {line} | {:.0} min left",
                    self.total,
                    left / 60.0
                );
                std::io::stdout().flush().ok();
            }
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sweep.toml");
        fs::write(&path, text).unwrap();
        (dir, path)
    }

    #[test]
    fn expands_the_grid_with_readable_names() {
        let (_dir, path) = write(
            "base = \"smoke\"\n[axes.model]\npositional = [\"learned\", \"none\"]\nablate = [[], [1], [1, 2]]\n[axes.train]\nseed = [1, 2]\n",
        );
        let sweep = Sweep::load(&path, None).unwrap();
        assert_eq!(sweep.runs.len(), 12);
        assert_eq!(sweep.runs[0].name, "learned-ablate-none-seed1");
        assert_eq!(sweep.runs[11].name, "nope-ablate-1_2-seed2");
        assert_eq!(sweep.runs[11].config.model.ablate, vec![1, 2]);
        let first: Vec<_> = sweep.shard(1, 2).iter().map(|r| r.name.clone()).collect();
        let second: Vec<_> = sweep.shard(2, 2).iter().map(|r| r.name.clone()).collect();
        assert_eq!(first.len() + second.len(), 12);
        assert!(first.iter().all(|n| !second.contains(n)));
    }

    #[test]
    fn other_axes_join_the_name() {
        let (_dir, path) =
            write("base = \"smoke\"\n[axes.train]\nlearning_rate = [1e-3, 3e-3]\nsteps = [40]\n");
        let names: Vec<_> = Sweep::load(&path, None)
            .unwrap()
            .runs
            .into_iter()
            .map(|r| r.name)
            .collect();
        assert_eq!(
            names,
            [
                "learned-ablate-none-seed1337-learning_rate=0.001",
                "learned-ablate-none-seed1337-learning_rate=0.003"
            ]
        );
    }

    #[test]
    fn bad_sweeps_are_refused_before_running() {
        let message = |text: &str| Sweep::load(&write(text).1, None).unwrap_err().0;
        assert!(
            message("base = \"smoke\"\n[axes.model]\nlayers = [1]\n")
                .contains("model.layers: unknown field")
        );
        assert!(
            message("base = \"smoke\"\n[axes.model]\nablate = [[3]]\n").contains("model.ablate")
        );
        assert!(message("base = \"smoke\"\n[axes.model]\nablate = []\n").contains("empty"));
        assert!(message("base = \"smoke\"\n[axes]\n").contains("no axes"));
        assert!(message("base = \"huge\"\n[axes.train]\nseed = [1]\n").contains("unknown preset"));
        assert!(message("base = \"smoke\"\n[axes.train]\nseed = [1, 1]\n").contains("same run"));
        assert!(
            message("base = \"smoke\"\n[axes.model]\nablate = [[1, 2], [2, 1]]\n")
                .contains("same run")
        );
        assert!(
            message("base = \"smoke\"\ngrid = 1\n[axes.train]\nseed = [1]\n")
                .contains("unknown field")
        );
    }
}
