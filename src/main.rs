//! `symbreak`: train and evaluate small decoders on 3-digit addition, with and without the
//! mechanisms that break the transformer's permutation symmetry.

use std::path::PathBuf;
use std::process::ExitCode;

use burn::module::Module;
use clap::{Args, Parser, Subcommand};
use symbreak_train::config::PRESETS;
use symbreak_train::run::{self, RunError};
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
    },
    /// Evaluate a finished run on its whole test set.
    Eval {
        run_dir: PathBuf,
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
    /// Print the resolved configuration and the model's parameter count.
    Model {
        #[command(flatten)]
        config: ConfigArgs,
    },
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
        match &self.backend {
            Some(name) => Backend::parse(name).map_err(RunError::Usage),
            None => Ok(Backend::default_compiled()),
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

fn main() -> ExitCode {
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
        } => {
            let backend = backend.resolve()?;
            let (config, source) = config.resolve()?;
            let out =
                out.unwrap_or_else(|| PathBuf::from("runs").join(source).join(config.run_name()));
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
        Command::Eval { run_dir, backend } => {
            let run = run::load_finished(&run_dir, backend.resolve()?)?;
            let score = run::evaluate(&run)?;
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
