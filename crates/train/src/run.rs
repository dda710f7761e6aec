//! The run folder: one folder per run, holding
//!
//! - `config.toml`: the resolved configuration, written first;
//! - `metrics.csv`: one row per evaluation (see [`crate::renderer`]);
//! - `learner/`: Burn's learner files, its checkpoints under `learner/checkpoint/`;
//! - `model.bpk` and `model.safetensors`: the final decoder (Burn's format, and one Python reads);
//! - `result.json`: written last and atomically. A folder with a `result.json` is finished.

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use burn::lr_scheduler::LrSchedulerRecord;
use burn::module::Module;
use burn::store::{ModuleSnapshot, RecordError, SafetensorsStore};
use burn::tensor::Device;
use burn::train::metric::{AccuracyMetric, LearningRateMetric, LossMetric};
use burn::train::{Interrupter, Learner, SupervisedTraining};
use serde::{Deserialize, Serialize};
use symbreak_data::{AdditionTask, IGNORED, Pair, Prompt, WindowSampler};
use symbreak_model::Decoder;

use crate::backend::Backend;
use crate::batches::{EvalLoader, WindowLoader, eval_groups};
use crate::config::RunConfig;
use crate::evaluate::{Checking, EVAL_ROWS, Score, exact_match, generate_answers};
use crate::metrics::{DIVERGED, DivergenceGuard, ExactMatchMetric};
use crate::mistakes::{self, Mistake};
use crate::renderer::{METRICS_HEADER, Resumed, RunRenderer};
use crate::schedule::WarmupCosine;
use crate::step::{Trainee, optimizer};

/// Why a command could not do its work.
#[derive(Debug)]
pub enum RunError {
    /// Bad input (config, arguments, folder state): nothing was written. Exit code 2.
    Usage(String),
    /// Something failed while working. Exit code 1.
    Failed(String),
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunError::Usage(message) | RunError::Failed(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for RunError {}

fn usage<T>(message: impl Into<String>) -> Result<T, RunError> {
    Err(RunError::Usage(message.into()))
}

fn failed(context: &str) -> impl Fn(std::io::Error) -> RunError + '_ {
    move |e| RunError::Failed(format!("{context}: {e}"))
}

/// What `result.json` holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// Exact-match accuracy (%) on the whole test set.
    pub exact_match: f64,
    pub correct: usize,
    pub total: usize,
    /// Optimiser steps done: all of them, or for a diverged run the last evaluated step.
    pub steps: usize,
    pub steps_planned: usize,
    /// Whether the training loss became NaN or infinite (training stopped there).
    pub diverged: bool,
    /// Wall time of training and the final evaluation, over all sessions of a resumed run.
    pub wall_seconds: f64,
    pub backend: Backend,
    pub seed: u64,
    pub symbreak_version: String,
    /// The git commit the binary was built from (build.rs); absent in results written before
    /// it was recorded.
    #[serde(default)]
    pub symbreak_commit: Option<String>,
    /// The CPU's widest vector instructions ([`crate::backend::cpu_vectors`]): a CPU run can be
    /// expected to repeat bit for bit only on a CPU of the same kind. Absent in results written
    /// before it was recorded.
    #[serde(default)]
    pub cpu_vectors: Option<String>,
}

/// The files of one run folder.
#[derive(Debug, Clone)]
pub struct RunPaths {
    pub dir: PathBuf,
}

impl RunPaths {
    pub fn new(dir: &Path) -> Self {
        Self {
            dir: dir.to_path_buf(),
        }
    }
    pub fn config(&self) -> PathBuf {
        self.dir.join("config.toml")
    }
    pub fn metrics(&self) -> PathBuf {
        self.dir.join("metrics.csv")
    }
    pub fn learner(&self) -> PathBuf {
        self.dir.join("learner")
    }
    pub fn checkpoints(&self) -> PathBuf {
        self.learner().join("checkpoint")
    }
    /// The learner's checkpoint file of `kind` (`model`, `optim` or `scheduler`) after pass
    /// `pass` (counted from 1).
    pub fn checkpoint(&self, kind: &str, pass: usize) -> PathBuf {
        self.checkpoints().join(format!("{kind}-{pass}.bpk"))
    }
    pub fn model(&self) -> PathBuf {
        self.dir.join("model.bpk")
    }
    pub fn safetensors(&self) -> PathBuf {
        self.dir.join("model.safetensors")
    }
    pub fn result(&self) -> PathBuf {
        self.dir.join("result.json")
    }
}

/// Writes a file so that a reader never sees it half-written: a temporary file, then a rename.
/// A path that exists and is not a regular file (`/dev/null`, `/dev/stdout`, a pipe) is written
/// to directly: a rename would replace the device or pipe with a regular file.
pub fn write_atomic(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    if fs::metadata(path).is_ok_and(|meta| !meta.is_file() && !meta.is_dir()) {
        return fs::write(path, contents);
    }
    let tmp = path.with_extension("partial");
    fs::write(&tmp, contents)?;
    fs::File::open(&tmp)?.sync_all()?;
    fs::rename(&tmp, path)
}

/// Trains the run in `dir` (a new one, or with `resume` the one already there) and writes its result.
pub fn train(
    config: &RunConfig,
    dir: &Path,
    resume: bool,
    backend: Backend,
) -> Result<RunResult, RunError> {
    let paths = RunPaths::new(dir);
    if paths.result().exists() {
        return usage(format!(
            "{} is a finished run (it has result.json); choose another --out, or use `symbreak eval {}`",
            dir.display(),
            dir.display()
        ));
    }
    let has_run = paths.config().exists();
    if has_run && resume {
        let saved = RunConfig::from_file(&paths.config(), &[]).map_err(|e| RunError::Usage(e.0))?;
        if saved != *config {
            return usage(format!(
                "the configuration differs from the one of the run in {}; resume it without changing its settings",
                dir.display()
            ));
        }
    } else if dir.exists()
        && fs::read_dir(dir)
            .map_err(failed("cannot read the run folder"))?
            .next()
            .is_some()
    {
        return usage(format!(
            "{} already holds files; add --resume to continue the run there, or choose another --out",
            dir.display()
        ));
    }
    let device = backend.usable_device().map_err(RunError::Usage)?;
    // The data before the folder: a training set that cannot be built is bad input, and the
    // folder stays as it was.
    let task = AdditionTask::generate(&config.data).map_err(|e| RunError::Usage(e.to_string()))?;
    let train = &config.train;
    let sampler = WindowSampler::with(
        &task.train_lines(),
        train.batching,
        train.loss,
        config.model.block_size,
        train.seed,
    )
    .map_err(|e| RunError::Failed(e.to_string()))?;
    let started = Instant::now();
    println!(
        "run {} on {backend}: {} parameters",
        dir.display(),
        config.model.num_params()
    );

    fs::create_dir_all(dir).map_err(failed("cannot create the run folder"))?;
    let _lock = lock(&paths)?;
    write_atomic(&paths.config(), config.to_toml().as_bytes())
        .map_err(failed("cannot write config.toml"))?;

    let passes = train.passes();
    let first_pass = if has_run {
        latest_checkpoint(&paths, config, passes, &device)
    } else {
        0
    };
    let resumed = prepare_metrics(&paths, train.step_after_pass(first_pass))?;
    if first_pass == 0 && paths.learner().exists() {
        fs::remove_dir_all(paths.learner()).map_err(failed("cannot clear the learner folder"))?;
    }
    if resumed.step > 0 {
        eprintln!("resuming {} at step {}", dir.display(), resumed.step);
    }

    device.seed(train.seed);
    let decoder = config
        .model
        .init(&device.clone().autodiff())
        .map_err(|e| RunError::Usage(e.to_string()))?;
    let trainee = Trainee::new(decoder, config);
    let train_loader = WindowLoader::new(
        sampler,
        train.batch_size,
        train.eval_every,
        train.steps,
        first_pass,
        &device,
    );
    let eval_pairs = &task.test[..train.eval_prompts];
    let valid_loader = EvalLoader::new(eval_groups(&config.data, eval_pairs, EVAL_ROWS), &device);
    let renderer = RunRenderer::new(
        &paths.metrics(),
        train.batch_size,
        train.eval_every,
        train.steps,
        resumed,
    )
    .map_err(failed("cannot open metrics.csv"))?;
    let interrupter = Interrupter::new();
    let mut training = SupervisedTraining::new(
        paths.learner(),
        Arc::new(train_loader),
        Arc::new(valid_loader),
    )
    .metrics((LossMetric::new(), token_accuracy(config)))
    .metric_train_numeric(LearningRateMetric::new())
    .metric_valid_numeric(ExactMatchMetric::new())
    .metric_train(DivergenceGuard::new(interrupter.clone()))
    .with_interrupter(interrupter.clone())
    .with_default_checkpointers()
    .with_application_logger(None)
    .num_epochs(passes)
    .renderer(Box::new(renderer));
    if first_pass > 0 {
        training = training.checkpoint(first_pass);
    }
    let learner = Learner::new(trainee, optimizer(train), WarmupCosine::new(train));
    let outcome = training.launch(learner);
    if let Some(error) = outcome.error {
        return Err(RunError::Failed(format!("training failed: {error}")));
    }
    let diverged = outcome
        .interrupted
        .as_ref()
        .is_some_and(|i| i.reason.as_deref() == Some(DIVERGED));
    let decoder = outcome.model.decoder;

    save_model(&decoder, &paths)?;
    let score = exact_match(
        &decoder,
        &config.data,
        &task.test,
        Checking::Fastest,
        &device,
    );
    let steps = if diverged {
        last_metrics_step(&paths)
    } else {
        train.steps
    };
    let result = RunResult {
        exact_match: score.percent(),
        correct: score.correct,
        total: score.total,
        steps,
        steps_planned: train.steps,
        diverged,
        wall_seconds: resumed.elapsed_seconds + started.elapsed().as_secs_f64(),
        backend,
        seed: train.seed,
        symbreak_version: env!("CARGO_PKG_VERSION").to_string(),
        symbreak_commit: Some(env!("SYMBREAK_COMMIT").to_string()),
        cpu_vectors: Some(crate::backend::cpu_vectors().to_string()),
    };
    let json = serde_json::to_string_pretty(&result).expect("a result serializes");
    write_atomic(&paths.result(), json.as_bytes()).map_err(failed("cannot write result.json"))?;
    Ok(result)
}

/// Accuracy of the argmax next token over the targets the loss counts.
fn token_accuracy(config: &RunConfig) -> AccuracyMetric {
    let metric = AccuracyMetric::new();
    if Trainee::masks_targets(config) {
        metric.with_pad_token(IGNORED as usize)
    } else {
        metric
    }
}

/// Holds the run folder for this process while it trains: a second `train` on the same folder
/// (another sweep, a second terminal) is refused instead of writing into it too.
fn lock(paths: &RunPaths) -> Result<fs::File, RunError> {
    let file =
        fs::File::create(paths.dir.join("lock")).map_err(failed("cannot create the lock file"))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(fs::TryLockError::WouldBlock) => usage(format!(
            "{} is being trained by another process; wait for it or stop it",
            paths.dir.display()
        )),
        Err(fs::TryLockError::Error(e)) => {
            Err(RunError::Failed(format!("cannot lock the run folder: {e}")))
        }
    }
}

fn save_model(decoder: &Decoder, paths: &RunPaths) -> Result<(), RunError> {
    let tmp = paths.dir.join("model.partial.bpk");
    decoder
        .clone()
        .save_file(&tmp)
        .map_err(|e| RunError::Failed(format!("cannot save the model: {e}")))?;
    fs::rename(&tmp, paths.model()).map_err(failed("cannot save the model"))?;
    let tmp = paths.dir.join("model.partial.safetensors");
    let mut store = SafetensorsStore::from_file(&tmp).overwrite(true);
    decoder
        .save_into(&mut store)
        .map_err(|e| RunError::Failed(format!("cannot save model.safetensors: {e}")))?;
    fs::rename(&tmp, paths.safetensors()).map_err(failed("cannot save model.safetensors"))
}

/// The last pass whose checkpoint files are all present and readable (0: none). A checkpoint
/// cut short by a kill is skipped in favour of the one before it.
fn latest_checkpoint(
    paths: &RunPaths,
    config: &RunConfig,
    passes: usize,
    device: &Device,
) -> usize {
    for pass in (1..=passes).rev() {
        let files = ["model", "optim", "scheduler"].map(|kind| paths.checkpoint(kind, pass));
        if !files.iter().all(|f| f.exists()) {
            continue;
        }
        let readable = load_trainee(&files[0], config, device).is_ok()
            && optimizer(&config.train).load(&files[1]).is_ok()
            && LrSchedulerRecord::load(&files[2]).is_ok();
        if readable {
            return pass;
        }
        eprintln!(
            "warning: checkpoint {pass} is unreadable (cut short?); resuming from an earlier one"
        );
    }
    0
}

/// Keeps the rows of `metrics.csv` up to `step` (a run may have logged past its last checkpoint)
/// and returns where the run resumes, with the wall time it had spent by then.
fn prepare_metrics(paths: &RunPaths, step: usize) -> Result<Resumed, RunError> {
    let mut resumed = Resumed {
        step,
        elapsed_seconds: 0.0,
    };
    if !paths.metrics().exists() {
        return Ok(resumed);
    }
    let text = fs::read_to_string(paths.metrics()).map_err(failed("cannot read metrics.csv"))?;
    let mut kept = vec![METRICS_HEADER.to_string()];
    for row in text.lines().skip(1) {
        let cells: Vec<&str> = row.split(',').collect();
        let row_step: usize = cells[0].parse().unwrap_or(usize::MAX);
        if row_step <= step && step > 0 {
            resumed.elapsed_seconds = cells.last().and_then(|c| c.parse().ok()).unwrap_or(0.0);
            kept.push(row.to_string());
        }
    }
    let text = kept.join("\n") + "\n";
    write_atomic(&paths.metrics(), text.as_bytes())
        .map_err(failed("cannot rewrite metrics.csv"))?;
    Ok(resumed)
}

/// The step of the last row of `metrics.csv` (0 without one).
fn last_metrics_step(paths: &RunPaths) -> usize {
    let text = fs::read_to_string(paths.metrics()).unwrap_or_default();
    text.lines()
        .skip(1)
        .filter_map(|row| row.split(',').next()?.parse().ok())
        .last()
        .unwrap_or(0)
}

/// A run loaded back: its configuration and its final decoder ([`load_finished`]) or a
/// checkpoint's ([`load_checkpoint`]).
pub struct FinishedRun {
    pub config: RunConfig,
    pub decoder: Decoder,
    pub device: Device,
    pub result: Option<RunResult>,
}

pub fn load_finished(dir: &Path, backend: Backend) -> Result<FinishedRun, RunError> {
    let paths = RunPaths::new(dir);
    let config = run_config(&paths)?;
    if !paths.model().exists() {
        return usage(format!(
            "{} has no final model yet; finish the run with `symbreak train --resume --out {}`, or score a checkpoint with --step",
            dir.display(),
            dir.display()
        ));
    }
    let device = backend.usable_device().map_err(RunError::Usage)?;
    let decoder = config
        .model
        .init(&device)
        .map_err(|e| RunError::Usage(e.to_string()))?
        .try_load_file(paths.model())
        .map_err(|e| {
            RunError::Usage(format!(
                "{} is corrupt or not this run's model: {e}",
                paths.model().display()
            ))
        })?;
    let result = match fs::read_to_string(paths.result()) {
        Ok(text) => Some(serde_json::from_str(&text).map_err(|e| {
            RunError::Usage(format!("{} is corrupt: {e}", paths.result().display()))
        })?),
        Err(_) => None,
    };
    Ok(FinishedRun {
        config,
        decoder,
        device,
        result,
    })
}

/// The configuration of the run in `paths.dir`, or a usage error if it is not a run folder.
fn run_config(paths: &RunPaths) -> Result<RunConfig, RunError> {
    let dir = &paths.dir;
    if !dir.is_dir() {
        return usage(format!("no run folder at {}", dir.display()));
    }
    if !paths.config().exists() {
        return usage(format!(
            "{} is not a run folder (it has no config.toml)",
            dir.display()
        ));
    }
    RunConfig::from_file(&paths.config(), &[]).map_err(|e| RunError::Usage(e.0))
}

/// A run's model as the learner's checkpoint at `step` holds it, finished run or not. The
/// learner checkpoints after every evaluation and keeps the last two. `result` is `None`: the
/// recorded score is the final model's.
pub fn load_checkpoint(dir: &Path, step: usize, backend: Backend) -> Result<FinishedRun, RunError> {
    let paths = RunPaths::new(dir);
    let config = run_config(&paths)?;
    let train = &config.train;
    let kept: Vec<usize> = (1..=train.passes())
        .filter(|&pass| paths.checkpoint("model", pass).exists())
        .collect();
    let Some(&pass) = kept
        .iter()
        .find(|&&pass| train.step_after_pass(pass) == step)
    else {
        let listed = if kept.is_empty() {
            "it has none".to_string()
        } else {
            let steps: Vec<String> = kept
                .iter()
                .map(|&pass| train.step_after_pass(pass).to_string())
                .collect();
            format!("it keeps steps {}", steps.join(", "))
        };
        return usage(format!(
            "{} has no checkpoint at step {step} (the learner writes one every {} steps and keeps the last two; {listed})",
            dir.display(),
            train.eval_every
        ));
    };
    let file = paths.checkpoint("model", pass);
    let device = backend.usable_device().map_err(RunError::Usage)?;
    let trainee = load_trainee(&file, &config, &device).map_err(|e| {
        RunError::Usage(format!(
            "{} is corrupt or not this run's checkpoint: {e}",
            file.display()
        ))
    })?;
    Ok(FinishedRun {
        config,
        decoder: trainee.decoder,
        device,
        result: None,
    })
}

/// The learner's model checkpoint in `file`, loaded into a fresh trainee of `config`.
fn load_trainee(file: &Path, config: &RunConfig, device: &Device) -> Result<Trainee, RecordError> {
    let decoder = config
        .model
        .init(device)
        .expect("a loaded configuration is validated");
    Trainee::new(decoder, config).try_load_file(file)
}

/// The exact-match score of a finished run on its whole test set.
pub fn evaluate(run: &FinishedRun, checking: Checking) -> Result<Score, RunError> {
    let task =
        AdditionTask::generate(&run.config.data).map_err(|e| RunError::Usage(e.to_string()))?;
    Ok(exact_match(
        &run.decoder,
        &run.config.data,
        &task.test,
        checking,
        &run.device,
    ))
}

/// The test pairs a finished run answers wrong (see [`mistakes::find`]), and its test set.
pub fn find_mistakes(
    run: &FinishedRun,
    checking: Checking,
) -> Result<(Vec<Mistake>, Vec<Pair>), RunError> {
    let task =
        AdditionTask::generate(&run.config.data).map_err(|e| RunError::Usage(e.to_string()))?;
    let found = mistakes::find(
        &run.decoder,
        &run.config.data,
        &task.test,
        checking,
        &run.device,
    );
    Ok((found, task.test))
}

/// The model's answer to one question.
#[derive(Debug, Clone, PartialEq)]
pub struct Prediction {
    pub pair: Pair,
    /// What the model wrote after `=`, up to and including the closing `$` if it wrote one.
    pub generated: String,
    pub answer: Option<u64>,
    pub correct: bool,
}

/// Parses `a+b` and asks the model.
pub fn predict(run: &FinishedRun, question: &str) -> Result<Prediction, RunError> {
    let limit = run.config.data.limit();
    let parse = |s: &str| s.trim().parse::<u64>().ok().filter(|&n| n < limit);
    let pair = match question.split_once('+') {
        Some((a, b)) => match (parse(a), parse(b)) {
            (Some(a), Some(b)) => Pair { a, b },
            _ => {
                return usage(format!(
                    "{question:?}: operands must be whole numbers below {limit}"
                ));
            }
        },
        None => {
            return usage(format!(
                "{question:?} is not of the form a+b (e.g. 123+456)"
            ));
        }
    };
    let [generated] = generate_answers(&run.decoder, &run.config.data, &[pair], &run.device)
        .try_into()
        .expect("one answer for one pair");
    let answer = symbreak_data::parse_answer(&generated, run.config.data.reverse);
    Ok(Prediction {
        pair,
        correct: Prompt::new(&run.config.data, pair).is_correct(&generated),
        generated,
        answer,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `eval --mistakes /dev/null` once replaced the machine's /dev/null with a regular file.
    /// A named pipe stands in for a device here, so that a regression cannot harm the machine.
    #[cfg(unix)]
    #[test]
    fn write_atomic_writes_into_a_pipe_instead_of_replacing_it() {
        use std::io::Read;
        use std::os::unix::fs::FileTypeExt;

        let dir = tempfile::tempdir().unwrap();
        let pipe = dir.path().join("out.csv");
        let made = std::process::Command::new("mkfifo")
            .arg(&pipe)
            .status()
            .unwrap();
        assert!(made.success(), "mkfifo failed");
        let reader = {
            let pipe = pipe.clone();
            std::thread::spawn(move || {
                let mut text = String::new();
                fs::File::open(pipe)
                    .unwrap()
                    .read_to_string(&mut text)
                    .unwrap();
                text
            })
        };
        write_atomic(&pipe, b"a,b\n").unwrap();
        assert!(
            fs::metadata(&pipe).unwrap().file_type().is_fifo(),
            "the pipe was replaced"
        );
        assert_eq!(reader.join().unwrap(), "a,b\n");
    }
}
