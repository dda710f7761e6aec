//! `symbreak`: train and evaluate small decoders on 3-digit addition, with and without the
//! mechanisms that break the transformer's permutation symmetry.

mod cli;
mod closed_pipe;
mod commands;
mod memory;
mod subnormals;

use std::process::ExitCode;

use clap::Parser;
use symbreak_train::run::RunError;

use cli::{Cli, Command};

fn main() -> ExitCode {
    memory::keep_freed_memory();
    subnormals::flush_subnormals_to_zero();
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

/// Runs one subcommand (each lives in `commands`).
fn execute(command: Command) -> Result<(), RunError> {
    match command {
        Command::Train {
            config,
            out,
            resume,
            backend,
            exit_with_parent,
        } => commands::train(&config, out, resume, &backend, exit_with_parent),
        Command::Sweep {
            file,
            preset,
            jobs,
            shard,
            out,
            dry_run,
            backend,
        } => commands::sweep(
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
        } => commands::figures(dir.as_deref(), &runs, out, prompts, &backend),
        Command::Tables { dir } => commands::tables(&dir),
        Command::Eval {
            run_dir,
            generate,
            mistakes,
            step,
            backend,
        } => commands::eval(&run_dir, generate, mistakes.as_deref(), step, &backend),
        Command::Predict {
            run_dir,
            question,
            backend,
        } => commands::predict(&run_dir, &question, &backend),
        Command::Bench(args) => commands::bench(&args),
        Command::Model { config } => commands::model(&config),
    }
}
