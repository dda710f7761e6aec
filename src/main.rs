//! `symbreak`: train and evaluate small decoders on 3-digit addition, with and without the
//! mechanisms that break the transformer's permutation symmetry.

mod closed_pipe;
mod memory;

use std::path::PathBuf;
use std::process::ExitCode;

use burn::module::Module;
use clap::{Args, Parser, Subcommand};
use symbreak_train::bench;
use symbreak_train::config::PRESETS;
use symbreak_train::evaluate::Checking;
use symbreak_train::run::{self, RunError};
use symbreak_train::sweep;
use symbreak_train::{Backend, Override, RunConfig};

#[derive(Parser)]
#[command(
    name = "symbreak",
    version,
    about = "Breaking Symmetry When Training Transformers: experiments on 3-digit addition"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Train one run (a folder with its config, metrics, checkpoints, model and result).
    Train {
        #[command(flatten)]
        config: ConfigArgs,
        /// The run folder (default: runs/<preset>/<run name>).
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
    Bench {
        /// Backends to time, e.g. flex,ndarray (default: every compiled-in backend).
        #[arg(long = "backend", value_delimiter = ',')]
        backends: Vec<String>,
        /// Cases to time: quick, width128, width384 (default: all three).
        #[arg(long, value_delimiter = ',')]
        cases: Vec<String>,
        /// One tiny model, two steps and 200 prompts: checks that the benchmark works.
        #[arg(long)]
        tiny: bool,
        /// Timed steps per case (after the warm-up steps).
        #[arg(long, default_value_t = 5)]
        steps: usize,
        /// Untimed steps first.
        #[arg(long, default_value_t = 2)]
        warmup: usize,
        /// Test prompts scored in the evaluation timing (the first case's model); 0 skips it.
        #[arg(long, default_value_t = 10_000)]
        eval_prompts: usize,
        /// Where to write the JSON report.
        #[arg(long, default_value = "bench.json")]
        out: PathBuf,
    },
    /// Print the resolved configuration and the model's parameter count.
    Model {
        #[command(flatten)]
        config: ConfigArgs,
    },
}

/// `symbreak sweep --jobs`: a count, or chosen for the backend and the machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Jobs {
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
    fn resolve(self, backend: Backend, pending: usize, threads: usize) -> usize {
        match self {
            Jobs::Count(count) => count,
            Jobs::Auto if backend == Backend::Wgpu => 1,
            Jobs::Auto => threads.min(pending).max(1),
        }
    }
}

#[derive(Args)]
struct ConfigArgs {
    /// A run configuration file (TOML), e.g. experiments/quick.toml.
    #[arg(long, conflicts_with = "preset")]
    config: Option<PathBuf>,
    /// A built-in preset: paper, quick or smoke (the files in experiments/).
    #[arg(long)]
    preset: Option<String>,
    /// Positional encoding: learned or none.
    #[arg(long)]
    positional: Option<String>,
    /// Attention mask: causal or bidirectional.
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
struct BackendArg {
    /// Tensor backend: ndarray, flex or wgpu (each needs its cargo feature).
    #[arg(long)]
    backend: Option<String>,
}

impl BackendArg {
    fn resolve(&self) -> Result<Backend, RunError> {
        self.resolve_over(None)
    }

    /// `--backend`, else the run configuration's `train.backend`, else the build's default.
    fn resolve_over(&self, configured: Option<Backend>) -> Result<Backend, RunError> {
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

    fn names_a_base(&self) -> bool {
        self.config.is_some() || self.preset.is_some()
    }

    /// A saved run configuration with these overrides (which must change nothing to resume).
    fn resolve_from(&self, path: &std::path::Path) -> Result<RunConfig, RunError> {
        RunConfig::from_file(path, &self.overrides()?).map_err(|e| RunError::Usage(e.0))
    }

    /// The configuration, and the name of where it came from (for the default run folder).
    fn resolve(&self) -> Result<(RunConfig, String), RunError> {
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

/// Ends the process when standard input reaches its end: a sweep gives each child a pipe, which
/// closes when the sweep dies, however it dies.
fn exit_when_stdin_closes() {
    std::thread::spawn(|| {
        let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
        eprintln!("the sweep that started this run has ended; stopping (resume with --resume)");
        std::process::exit(130);
    });
}

/// A file can be written at `path`: its folder exists and it is not a folder itself.
fn check_writable(path: &std::path::Path) -> Result<(), RunError> {
    let folder = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => std::path::Path::new("."),
    };
    if !folder.is_dir() {
        return Err(RunError::Usage(format!(
            "cannot write {}: the folder {} does not exist; create it or name another file",
            path.display(),
            folder.display()
        )));
    }
    if path.is_dir() {
        return Err(RunError::Usage(format!(
            "{} is a folder; name a file in it",
            path.display()
        )));
    }
    Ok(())
}

fn parse_shard(text: &str) -> Result<(usize, usize), RunError> {
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

fn run_sweep(
    file: &std::path::Path,
    preset: Option<&str>,
    jobs: Jobs,
    shard: Option<&str>,
    out: Option<PathBuf>,
    dry_run: bool,
    backend: &BackendArg,
) -> Result<(), RunError> {
    let (index, count) = shard.map(parse_shard).transpose()?.unwrap_or((1, 1));
    let backend_arg = backend;
    let backend = backend_arg.resolve()?;
    backend.device().map_err(RunError::Usage)?;
    let mut plan = sweep::Sweep::load(file, preset).map_err(|e| RunError::Usage(e.0))?;
    // Each new run's config.toml records its backend: --backend, else the sweep file's, else
    // the build's default. Started runs resume on the backend their config.toml names.
    for run in &mut plan.runs {
        run.config.train.backend = Some(backend_arg.resolve_over(run.config.train.backend)?);
    }
    let out = out.unwrap_or_else(|| {
        let stem = file.file_stem().unwrap_or_default().to_string_lossy();
        PathBuf::from("sweeps").join(format!("{stem}-{}", plan.base.trim_end_matches(".toml")))
    });
    let runs = plan.shard(index, count);
    let statuses: Vec<sweep::Status> = runs
        .iter()
        .map(|r| sweep::status(&out.join(&r.name)))
        .collect();
    let conflicts: Vec<String> = runs
        .iter()
        .zip(&statuses)
        .filter(|(_, status)| **status != sweep::Status::New)
        .filter_map(|(run, _)| {
            let differences = sweep::recorded_differences(&out.join(&run.name), &run.config);
            (!differences.is_empty()).then(|| format!("  {}: {}", run.name, differences.join("; ")))
        })
        .collect();
    if !conflicts.is_empty() {
        return Err(RunError::Usage(format!(
            "{} run folders in {} were started with another configuration than this sweep plans \
             for them (another preset or sweep file?), so the sweep would skip or resume them as \
             they are:\n{}\nMove them away, or give this sweep its own folder with --out.",
            conflicts.len(),
            out.display(),
            conflicts.join("\n")
        )));
    }
    let with_status = |wanted| statuses.iter().filter(|&&s| s == wanted).count();
    let (done, unfinished) = (
        with_status(sweep::Status::Finished),
        with_status(sweep::Status::Unfinished),
    );
    let threads = thread_budget();
    let jobs = jobs.resolve(backend, runs.len() - done, threads);
    let threads_per_run = (threads / jobs).max(1);
    println!(
        "sweep {} on {} ({backend}): {} runs{}, {done} finished, {unfinished} to resume, {} to start; {jobs} at a time with {} each; folder {}",
        file.display(),
        plan.base,
        runs.len(),
        if count > 1 {
            format!(" in shard {index}/{count} (of {})", plan.runs.len())
        } else {
            String::new()
        },
        runs.len() - done - unfinished,
        if threads_per_run == 1 {
            "1 thread".to_string()
        } else {
            format!("{threads_per_run} threads")
        },
        out.display()
    );
    if dry_run {
        for (run, status) in runs.iter().zip(&statuses) {
            let status = match status {
                sweep::Status::Finished => "finished",
                sweep::Status::Unfinished => "resume",
                sweep::Status::New => "new",
            };
            println!("  {status:8} {}", run.name);
        }
        return Ok(());
    }
    let launcher = sweep::Launcher {
        program: std::env::current_exe()
            .map_err(|e| RunError::Failed(format!("cannot find this program: {e}")))?,
        threads: threads_per_run,
    };
    let tally = sweep::execute(&runs, &out, jobs, &launcher)
        .map_err(|e| RunError::Failed(format!("sweep: {e}")))?;
    println!("sweep done: {tally}");
    if tally.failed > 0 {
        return Err(RunError::Failed(format!(
            "{} runs failed (see train.log in their folders); run the same command again to retry them",
            tally.failed
        )));
    }
    Ok(())
}

/// The threads a sweep splits between its runs: `RAYON_NUM_THREADS` when the user set it (to
/// leave part of a shared machine free), else every thread of the machine.
fn thread_budget() -> usize {
    std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

fn main() -> ExitCode {
    memory::keep_freed_memory();
    closed_pipe::end_quietly_on_closed_pipe();
    match execute(Cli::parse().command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            match error {
                RunError::Usage(_) => ExitCode::from(2),
                RunError::Failed(_) => ExitCode::from(1),
            }
        }
    }
}

fn execute(command: Command) -> Result<(), RunError> {
    match command {
        Command::Train {
            config,
            out,
            resume,
            backend,
            exit_with_parent,
        } => {
            if exit_with_parent {
                exit_when_stdin_closes();
            }
            let (mut config, out) = match (&out, config.names_a_base()) {
                // `--resume --out DIR` alone: the run's own configuration.
                (Some(dir), false) if resume => {
                    let saved = dir.join("config.toml");
                    if !saved.exists() {
                        return Err(RunError::Usage(format!(
                            "{} holds no run to resume (no config.toml)",
                            dir.display()
                        )));
                    }
                    (config.resolve_from(&saved)?, dir.clone())
                }
                _ => {
                    let (config, source) = config.resolve()?;
                    let out = out.unwrap_or_else(|| {
                        PathBuf::from("runs").join(source).join(config.run_name())
                    });
                    (config, out)
                }
            };
            // Recorded in config.toml, so that a resumed run continues on the same backend.
            let backend = backend.resolve_over(config.train.backend)?;
            config.train.backend = Some(backend);
            let result = run::train(&config, &out, resume, backend)?;
            println!(
                "finished {}: exact match {:.2}% ({}/{}){} in {:.0}s",
                out.display(),
                result.exact_match,
                result.correct,
                result.total,
                if result.diverged { ", diverged" } else { "" },
                result.wall_seconds
            );
            Ok(())
        }
        Command::Sweep {
            file,
            preset,
            jobs,
            shard,
            out,
            dry_run,
            backend,
        } => run_sweep(
            &file,
            preset.as_deref(),
            jobs,
            shard.as_deref(),
            out,
            dry_run,
            &backend,
        ),
        Command::Figures {
            dir,
            runs,
            out,
            prompts,
            backend,
        } => {
            let backend = backend.resolve()?;
            backend.device().map_err(RunError::Usage)?;
            if prompts < 2 {
                return Err(RunError::Usage(format!(
                    "--prompts {prompts}: a correlation needs at least 2 test lines"
                )));
            }
            draw_figures(dir.as_deref(), &runs, out, prompts, backend)
        }
        Command::Tables { dir } => {
            let markdown =
                symbreak_analysis::tables::write_tables(&dir).map_err(RunError::Usage)?;
            print!("{markdown}");
            println!(
                "\nwrote {} and {}",
                dir.join("tables.md").display(),
                dir.join("tables.csv").display()
            );
            Ok(())
        }
        Command::Eval {
            run_dir,
            generate,
            mistakes,
            backend,
        } => {
            if let Some(path) = &mistakes {
                check_writable(path)?;
            }
            let run = run::load_finished(&run_dir, backend.resolve()?)?;
            let checking = if generate {
                Checking::Generation
            } else {
                Checking::Fastest
            };
            let score = match &mistakes {
                None => run::evaluate(&run, checking)?,
                Some(path) => {
                    let (found, test) = run::find_mistakes(&run, checking)?;
                    run::write_atomic(path, symbreak_train::mistakes::to_csv(&found).as_bytes())
                        .map_err(|e| {
                            RunError::Failed(format!("cannot write {}: {e}", path.display()))
                        })?;
                    print!(
                        "{}",
                        symbreak_train::mistakes::summary(&found, &test, &run.config.data)
                    );
                    println!("{} mistakes written to {}", found.len(), path.display());
                    symbreak_train::Score {
                        correct: test.len() - found.len(),
                        total: test.len(),
                    }
                }
            };
            println!(
                "{}: exact match {:.2}% ({}/{})",
                run_dir.display(),
                score.percent(),
                score.correct,
                score.total
            );
            if let Some(recorded) = &run.result {
                println!("recorded in result.json: {:.2}%", recorded.exact_match);
            }
            Ok(())
        }
        Command::Predict {
            run_dir,
            question,
            backend,
        } => {
            let run = run::load_finished(&run_dir, backend.resolve()?)?;
            let p = run::predict(&run, &question)?;
            let answer = p
                .answer
                .map(|a| a.to_string())
                .unwrap_or_else(|| "no answer".into());
            let verdict = if p.correct { "correct" } else { "wrong" };
            println!(
                "{}+{} = {answer} (model wrote {:?}; {verdict}, the sum is {})",
                p.pair.a,
                p.pair.b,
                p.generated,
                p.pair.sum()
            );
            Ok(())
        }
        Command::Bench {
            backends,
            cases,
            tiny,
            steps,
            warmup,
            eval_prompts,
            out,
        } => {
            let backends = if backends.is_empty() {
                Backend::ALL
                    .into_iter()
                    .filter(|b| b.is_compiled())
                    .collect()
            } else {
                backends
                    .iter()
                    .map(|name| Backend::parse(name).map_err(RunError::Usage))
                    .collect::<Result<Vec<_>, _>>()?
            };
            let (all_cases, plan) = if tiny {
                let plan = bench::Plan {
                    warmup_steps: 1,
                    timed_steps: 2,
                    eval_prompts: 200,
                };
                (bench::Case::tiny(), plan)
            } else {
                let plan = bench::Plan {
                    warmup_steps: warmup,
                    timed_steps: steps.max(1),
                    eval_prompts,
                };
                (bench::Case::standard(), plan)
            };
            let chosen: Vec<bench::Case> = if cases.is_empty() || tiny {
                all_cases
            } else {
                cases
                    .iter()
                    .map(|name| {
                        all_cases.iter().find(|c| c.name == name).cloned().ok_or_else(|| {
                            RunError::Usage(format!(
                                "unknown case {name:?}; the cases are quick, width128 and width384"
                            ))
                        })
                    })
                    .collect::<Result<_, _>>()?
            };
            run_bench(&chosen, &backends, plan, &out)
        }
        Command::Model { config } => {
            let (config, _) = config.resolve()?;
            print!("{}", config.to_toml());
            let device = Backend::default_compiled()
                .device()
                .map_err(RunError::Usage)?;
            let model = config
                .model
                .init(&device)
                .map_err(|e| RunError::Usage(e.to_string()))?;
            println!("\nparameters: {}", model.num_params());
            Ok(())
        }
    }
}

/// Times every case on every backend, printing each result as it comes, then writes the report.
fn run_bench(
    cases: &[bench::Case],
    backends: &[Backend],
    plan: bench::Plan,
    out: &std::path::Path,
) -> Result<(), RunError> {
    check_writable(out)?;
    for backend in backends {
        backend.usable_device().map_err(RunError::Usage)?;
    }
    let mut report = bench::Report::new();
    for case in cases {
        println!(
            "{}: {}, {} rows, dropout {}",
            case.name,
            bench::shape(&case.config.model),
            case.config.train.batch_size,
            case.config.model.dropout
        );
        for &backend in backends {
            let t = bench::time_steps(case, backend, plan)?;
            println!(
                "  {backend:<8} step {:>8.1} ms (forward {:.1}, backward {:.1}, optimiser {:.1}), {:>8.0} tokens/s, {:>6.1} GFLOP/s",
                t.median_ms,
                t.forward_ms,
                t.backward_ms,
                t.optimizer_ms,
                t.tokens_per_second,
                t.gflops
            );
            report.steps.push(t);
        }
    }
    if let Some(case) = cases.first().filter(|_| plan.eval_prompts > 0) {
        println!(
            "evaluation of {} test prompts ({} model):",
            plan.eval_prompts, case.name
        );
        for &backend in backends {
            for t in bench::time_eval(case, backend, plan.eval_prompts)? {
                println!(
                    "  {backend:<8} {:<15} {:>9.0} ms, {:>7.0} prompts/s",
                    t.method, t.ms, t.prompts_per_second
                );
                report.eval.push(t);
            }
        }
    }
    let json = serde_json::to_string_pretty(&report).expect("a report serializes");
    run::write_atomic(out, json.as_bytes())
        .map_err(|e| RunError::Failed(format!("cannot write {}: {e}", out.display())))?;
    println!("wrote {}", out.display());
    Ok(())
}

/// `symbreak figures`: the paper's figures (and a sweep's curves), reporting what it skipped.
fn draw_figures(
    sweep: Option<&std::path::Path>,
    runs: &[PathBuf],
    out: Option<PathBuf>,
    prompts: usize,
    backend: Backend,
) -> Result<(), RunError> {
    use symbreak_analysis::figures;
    let usage = |e: symbreak_analysis::draw::FigureError| RunError::Usage(e.0);
    let (specs, missing, out) = match sweep {
        Some(dir) => {
            if !dir.is_dir() {
                return Err(RunError::Usage(format!(
                    "no sweep folder at {}",
                    dir.display()
                )));
            }
            let (specs, missing) = figures::paper_figures(dir).map_err(usage)?;
            (specs, missing, out.unwrap_or_else(|| dir.join("figures")))
        }
        None => {
            let specs = figures::run_figures(runs).map_err(usage)?;
            (
                specs,
                Vec::new(),
                out.unwrap_or_else(|| PathBuf::from("figures")),
            )
        }
    };
    for reason in &missing {
        eprintln!("skipped: {reason}");
    }
    if !specs.is_empty() {
        let mut progress = |line: &str| eprintln!("{line}");
        figures::draw_figures(&specs, &out, prompts, backend, &mut progress)
            .map_err(|e| RunError::Failed(e.0))?;
        for spec in &specs {
            println!("wrote {}", out.join(format!("{}.png", spec.name)).display());
        }
        println!("wrote {}", out.join("scores.csv").display());
    }
    let mut curves = 0;
    if let Some(dir) = sweep {
        let written = figures::draw_curves(dir, &out).map_err(|e| RunError::Failed(e.0))?;
        curves = written.len();
        println!(
            "wrote {curves} curve figures (each run's curves.png, and the sweep's in {})",
            out.display()
        );
    }
    if specs.is_empty() && curves == 0 {
        return Err(RunError::Usage(
            "nothing to draw: the sweep has no finished runs the figures need (see above)".into(),
        ));
    }
    Ok(())
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
