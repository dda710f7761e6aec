//! What the user types: the subcommands, their options, and how the options become a run
//! configuration, a backend and a number of runs at a time.

use std::path::{Path, PathBuf};

use clap::{Args, Parser, Subcommand};
use symbreak_train::config::PRESETS;
use symbreak_train::run::RunError;
use symbreak_train::{Backend, Override, RunConfig};

#[derive(Parser)]
#[command(
    name = "symbreak",
    version,
    about = "Breaking Symmetry When Training Transformers: experiments on 3-digit addition"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Train one run (a folder with its config, metrics, checkpoints, model and result).
    Train {
        #[command(flatten)]
        config: ConfigArgs,
        /// The run folder (default: runs/PRESET/RUN_NAME, e.g. runs/quick/nope-ablate-1_2-seed2).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Continue the unfinished run in the folder from its last checkpoint.
        #[arg(long)]
        resume: bool,
        #[command(flatten)]
        backend: BackendArg,
        /// Stop when standard input closes (a sweep's child runs end with the sweep).
        #[arg(long, hide = true)]
        exit_with_parent: bool,
    },
    /// Run a sweep: every run of a grid not yet finished, N at a time; then `tables`.
    Sweep {
        /// The sweep file, e.g. experiments/sweep-residuals.toml.
        file: PathBuf,
        /// Replace the sweep's base preset (quick, paper, ...).
        #[arg(long)]
        preset: Option<String>,
        /// Runs at a time, the machine's threads split between them: a number, or `auto`, one
        /// run per thread on the CPU backends (a run of the CPU preset gains nothing from a
        /// second thread; docs/performance.md) and one on wgpu; never more than the runs to do.
        #[arg(long, default_value = "auto")]
        jobs: Jobs,
        /// Run only slice I of N of the plan (for a cluster's job array), e.g. 2/4.
        #[arg(long)]
        shard: Option<String>,
        /// The sweep folder (default: sweeps/<file name>-<base>).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Print the plan and stop.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        backend: BackendArg,
    },
    /// Write tables.md and tables.csv (the paper's tables 1 and 2) from a sweep folder.
    Tables { dir: PathBuf },
    /// Draw the paper's figures 3-5 (correlation heatmaps with blockiness scores, into
    /// DIR/figures) and training curves, from a sweep folder or from named runs.
    Figures {
        /// A sweep folder, e.g. sweeps/sweep-residuals-quick.
        #[arg(required_unless_present = "runs")]
        dir: Option<PathBuf>,
        /// Instead of a sweep: a run folder to draw (layers 1, 3 and 6); repeatable.
        #[arg(long = "run", conflicts_with = "dir")]
        runs: Vec<PathBuf>,
        /// Where the PNG files and scores.csv go (default: DIR/figures, or figures/ for --run).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Test lines behind each correlation matrix.
        #[arg(long, default_value_t = symbreak_analysis::figures::DEFAULT_PROMPTS)]
        prompts: usize,
        #[command(flatten)]
        backend: BackendArg,
    },
    /// Evaluate a finished run on its whole test set.
    Eval {
        run_dir: PathBuf,
        /// Check every answer by token-by-token greedy generation, also for causal models
        /// (which are otherwise checked in one teacher-forced pass, with the same result).
        #[arg(long)]
        generate: bool,
        /// Also write every test pair answered wrong, with what the model wrote, to this CSV
        /// file, and print how the mistakes fall by carries, operand and answer lengths and
        /// the first wrong character.
        #[arg(long, value_name = "FILE")]
        mistakes: Option<PathBuf>,
        /// Score the learner's checkpoint at this step instead of the final model (the learner
        /// writes one at every evaluation and keeps the last two; the run need not be finished).
        #[arg(long)]
        step: Option<usize>,
        #[command(flatten)]
        backend: BackendArg,
    },
    /// Ask a finished run one question, e.g. `symbreak predict RUN 123+456`.
    Predict {
        run_dir: PathBuf,
        question: String,
        #[command(flatten)]
        backend: BackendArg,
    },
    /// Time training steps and test-set evaluation on each backend; print them and write JSON.
    Bench(BenchArgs),
    /// Print the resolved configuration and the model's parameter count.
    Model {
        #[command(flatten)]
        config: ConfigArgs,
    },
}

/// `symbreak bench`'s options.
#[derive(Args)]
pub struct BenchArgs {
    /// Backends to time, e.g. flex,ndarray (default: every compiled-in backend).
    #[arg(long = "backend", value_delimiter = ',')]
    pub backends: Vec<String>,
    /// Cases to time: quick, width128, width384 (default: all three).
    #[arg(long, value_delimiter = ',')]
    pub cases: Vec<String>,
    /// One tiny model, two steps and 200 prompts: checks that the benchmark works (the
    /// options below and --cases are then ignored).
    #[arg(long)]
    pub tiny: bool,
    /// Timed steps per case (after the warm-up steps).
    #[arg(long, default_value_t = 5)]
    pub steps: usize,
    /// Untimed steps first.
    #[arg(long, default_value_t = 2)]
    pub warmup: usize,
    /// Test prompts scored in the evaluation timing (the first case's model); 0 skips it.
    #[arg(long, default_value_t = 10_000)]
    pub eval_prompts: usize,
    /// Where to write the JSON report.
    #[arg(long, default_value = "bench.json")]
    pub out: PathBuf,
}

/// `symbreak sweep --jobs`: a count, or chosen for the backend and the machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Jobs {
    Auto,
    Count(usize),
}

impl std::str::FromStr for Jobs {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text.trim() {
            "auto" => Ok(Jobs::Auto),
            n => match n.parse::<usize>() {
                Ok(0) | Err(_) => Err(format!(
                    "expected a number of runs at a time (1 or more) or `auto`, got {text:?}"
                )),
                Ok(count) => Ok(Jobs::Count(count)),
            },
        }
    }
}

impl Jobs {
    /// Runs at a time for `pending` runs to start or resume on `backend`, with `threads` to share.
    pub fn resolve(self, backend: Backend, pending: usize, threads: usize) -> usize {
        match self {
            Jobs::Count(count) => count,
            Jobs::Auto if backend == Backend::Wgpu => 1,
            Jobs::Auto => threads.min(pending).max(1),
        }
    }
}

#[derive(Args)]
pub struct ConfigArgs {
    /// A run configuration file (TOML), e.g. experiments/quick.toml.
    #[arg(long, conflicts_with = "preset")]
    config: Option<PathBuf>,
    /// A built-in preset, one of the run configurations in experiments/ named without `.toml`
    /// (paper, quick, ...; an unknown name lists them all).
    #[arg(long)]
    preset: Option<String>,
    /// Positional encoding: learned or none.
    #[arg(long)]
    positional: Option<String>,
    /// Attention mask: causal (bidirectional is for the model's symmetry tests; training
    /// refuses it, since every position would see the token it must predict).
    #[arg(long)]
    mask: Option<String>,
    /// Layers (from 1) whose residual connections are removed, e.g. 3,4 (or "none").
    #[arg(long)]
    ablate: Option<String>,
    /// Training seed.
    #[arg(long)]
    seed: Option<u64>,
    /// Optimiser steps.
    #[arg(long)]
    steps: Option<usize>,
    /// Any field, as section.field=value (e.g. --set train.learning_rate=3e-3); repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
}

#[derive(Args)]
pub struct BackendArg {
    /// Tensor backend: ndarray, flex or wgpu (each needs its cargo feature).
    #[arg(long)]
    backend: Option<String>,
}

impl BackendArg {
    pub fn resolve(&self) -> Result<Backend, RunError> {
        self.resolve_over(None)
    }

    /// `--backend`, else the run configuration's `train.backend`, else the build's default.
    pub fn resolve_over(&self, configured: Option<Backend>) -> Result<Backend, RunError> {
        match (&self.backend, configured) {
            (Some(name), _) => Backend::parse(name).map_err(RunError::Usage),
            (None, Some(backend)) => Ok(backend),
            (None, None) => Ok(Backend::default_compiled()),
        }
    }
}

impl ConfigArgs {
    fn overrides(&self) -> Result<Vec<Override>, RunError> {
        let mut overrides = Vec::new();
        let text = |s: &str| toml::Value::String(s.to_string());
        if let Some(p) = &self.positional {
            overrides.push(Override::new("model.positional", text(p)));
        }
        if let Some(m) = &self.mask {
            overrides.push(Override::new("model.mask", text(m)));
        }
        if let Some(a) = &self.ablate {
            overrides.push(Override::new("model.ablate", parse_layers(a)?));
        }
        if let Some(seed) = self.seed {
            overrides.push(Override::new(
                "train.seed",
                toml::Value::Integer(seed as i64),
            ));
        }
        if let Some(steps) = self.steps {
            overrides.push(Override::new(
                "train.steps",
                toml::Value::Integer(steps as i64),
            ));
        }
        for set in &self.set {
            overrides.push(Override::parse(set).map_err(|e| RunError::Usage(e.0))?);
        }
        Ok(overrides)
    }

    pub fn names_a_base(&self) -> bool {
        self.config.is_some() || self.preset.is_some()
    }

    /// A saved run configuration with these overrides (which must change nothing to resume).
    pub fn resolve_from(&self, path: &Path) -> Result<RunConfig, RunError> {
        RunConfig::from_file(path, &self.overrides()?).map_err(|e| RunError::Usage(e.0))
    }

    /// The configuration, and the name of where it came from (for the default run folder).
    pub fn resolve(&self) -> Result<(RunConfig, String), RunError> {
        let overrides = self.overrides()?;
        let usage = |e: symbreak_train::ConfigError| RunError::Usage(e.0);
        match (&self.config, &self.preset) {
            (Some(path), _) => {
                let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned());
                Ok((
                    RunConfig::from_file(path, &overrides).map_err(usage)?,
                    stem.unwrap_or_default(),
                ))
            }
            (None, Some(name)) => Ok((
                RunConfig::preset_with(name, &overrides).map_err(usage)?,
                name.clone(),
            )),
            (None, None) => Err(RunError::Usage(format!(
                "name a configuration: --config FILE or --preset NAME (presets: {})",
                PRESETS.map(|(n, _)| n).join(", ")
            ))),
        }
    }
}

fn parse_layers(text: &str) -> Result<toml::Value, RunError> {
    if text.is_empty() || text == "none" {
        return Ok(toml::Value::Array(Vec::new()));
    }
    text.split(',')
        .map(|layer| {
            layer
                .trim()
                .parse::<i64>()
                .map(toml::Value::Integer)
                .map_err(|_| {
                    RunError::Usage(format!(
                        "--ablate {text:?}: expected layer numbers like 3,4"
                    ))
                })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(toml::Value::Array)
}

/// `--shard I/N`: slice I of N, from 1.
pub fn parse_shard(text: &str) -> Result<(usize, usize), RunError> {
    let bad = || {
        RunError::Usage(format!(
            "--shard {text:?}: expected I/N with 1 <= I <= N, e.g. 2/4"
        ))
    };
    let (i, n) = text.split_once('/').ok_or_else(bad)?;
    let (i, n): (usize, usize) = (
        i.trim().parse().map_err(|_| bad())?,
        n.trim().parse().map_err(|_| bad())?,
    );
    if i == 0 || n == 0 || i > n {
        return Err(bad());
    }
    Ok((i, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_are_a_positive_count_or_auto() {
        assert_eq!("auto".parse::<Jobs>(), Ok(Jobs::Auto));
        assert_eq!("3".parse::<Jobs>(), Ok(Jobs::Count(3)));
        assert!("0".parse::<Jobs>().is_err());
        assert!("two".parse::<Jobs>().is_err());
        assert_eq!(
            Jobs::Count(3).resolve(Backend::Flex, 1, 2),
            3,
            "a count is kept"
        );
        assert_eq!(
            Jobs::Auto.resolve(Backend::Wgpu, 10, 2),
            1,
            "one GPU run at a time"
        );
        assert_eq!(
            Jobs::Auto.resolve(Backend::Flex, 10, 2),
            2,
            "one run per thread"
        );
        assert_eq!(
            Jobs::Auto.resolve(Backend::Flex, 1, 8),
            1,
            "never more than the runs"
        );
        assert_eq!(Jobs::Auto.resolve(Backend::Flex, 0, 2), 1, "nothing to do");
    }
}
