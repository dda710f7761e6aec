//! What each subcommand does, once its options are parsed (`cli`).

use std::path::{Path, PathBuf};

use burn::module::Module;
use symbreak_analysis::draw::FigureError;
use symbreak_analysis::figures::{draw_curves, draw_figures, paper_figures, run_figures};
use symbreak_train::bench;
use symbreak_train::evaluate::Checking;
use symbreak_train::run::{self, RunError};
use symbreak_train::sweep;
use symbreak_train::{Backend, Score};

use crate::cli::{BackendArg, BenchArgs, ConfigArgs, Jobs, parse_shard};

/// `symbreak train`: one run, new or resumed.
pub fn train(
    config: &ConfigArgs,
    out: Option<PathBuf>,
    resume: bool,
    backend: &BackendArg,
    exit_with_parent: bool,
) -> Result<(), RunError> {
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
            let out =
                out.unwrap_or_else(|| PathBuf::from("runs").join(source).join(config.run_name()));
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

/// `symbreak sweep`: the plan, checked against the folder, then every run not finished.
pub fn sweep(
    file: &Path,
    preset: Option<&str>,
    jobs: Jobs,
    shard: Option<&str>,
    out: Option<PathBuf>,
    dry_run: bool,
    backend: &BackendArg,
) -> Result<(), RunError> {
    let (index, count) = shard.map(parse_shard).transpose()?.unwrap_or((1, 1));
    let backend_arg = backend;
    let mut plan = sweep::Sweep::load(file, preset).map_err(|e| RunError::Usage(e.0))?;
    // Each new run's config.toml records its backend: --backend, else the sweep file's, else
    // the build's default. Started runs resume on the backend their config.toml names.
    let mut backends: Vec<Backend> = Vec::new();
    for run in &mut plan.runs {
        let backend = backend_arg.resolve_over(run.config.train.backend)?;
        run.config.train.backend = Some(backend);
        if !backends.contains(&backend) {
            backend.device().map_err(RunError::Usage)?;
            backends.push(backend);
        }
    }
    // The job count follows the runs' backends: one at a time if any of them is on the GPU.
    let backend = if backends.contains(&Backend::Wgpu) {
        Backend::Wgpu
    } else {
        backends[0]
    };
    let backend_names: Vec<String> = backends.iter().map(Backend::to_string).collect();
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
        "sweep {} on {} ({}): {} runs{}, {done} finished, {unfinished} to resume, {} to start; {jobs} at a time with {} each; folder {}",
        file.display(),
        plan.base,
        backend_names.join(", "),
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

/// `symbreak tables`: tables 1 and 2 of a sweep folder, printed and written.
pub fn tables(dir: &Path) -> Result<(), RunError> {
    let markdown = symbreak_analysis::tables::write_tables(dir).map_err(RunError::Usage)?;
    print!("{markdown}");
    println!(
        "\nwrote {} and {}",
        dir.join("tables.md").display(),
        dir.join("tables.csv").display()
    );
    Ok(())
}

/// `symbreak figures`: the paper's figures (and a sweep's curves), reporting what it skipped.
pub fn figures(
    sweep: Option<&Path>,
    runs: &[PathBuf],
    out: Option<PathBuf>,
    prompts: usize,
    backend: &BackendArg,
) -> Result<(), RunError> {
    let backend = backend.resolve()?;
    backend.device().map_err(RunError::Usage)?;
    if prompts < 2 {
        return Err(RunError::Usage(format!(
            "--prompts {prompts}: a correlation needs at least 2 test lines"
        )));
    }
    let usage = |e: FigureError| RunError::Usage(e.0);
    let (specs, missing, out) = match sweep {
        Some(dir) => {
            if !dir.is_dir() {
                return Err(RunError::Usage(format!(
                    "no sweep folder at {}",
                    dir.display()
                )));
            }
            let (specs, missing) = paper_figures(dir).map_err(usage)?;
            (specs, missing, out.unwrap_or_else(|| dir.join("figures")))
        }
        None => {
            let specs = run_figures(runs).map_err(usage)?;
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
        draw_figures(&specs, &out, prompts, backend, &mut progress)
            .map_err(|e| RunError::Failed(e.0))?;
        for spec in &specs {
            println!("wrote {}", out.join(format!("{}.png", spec.name)).display());
        }
        println!("wrote {}", out.join("scores.csv").display());
    }
    let mut curves = 0;
    if let Some(dir) = sweep {
        let written = draw_curves(dir, &out).map_err(|e| RunError::Failed(e.0))?;
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

/// `symbreak eval`: a finished run's score on its whole test set, and its mistakes if asked.
pub fn eval(
    run_dir: &Path,
    generate: bool,
    mistakes: Option<&Path>,
    step: Option<usize>,
    backend: &BackendArg,
) -> Result<(), RunError> {
    if let Some(path) = mistakes {
        check_writable(path)?;
    }
    let backend = backend.resolve()?;
    let run = match step {
        None => run::load_finished(run_dir, backend)?,
        Some(step) => run::load_checkpoint(run_dir, step, backend)?,
    };
    let which = step.map_or(String::new(), |step| {
        format!(" (checkpoint at step {step})")
    });
    let checking = if generate {
        Checking::Generation
    } else {
        Checking::Fastest
    };
    let score = match mistakes {
        None => run::evaluate(&run, checking)?,
        Some(path) => {
            let (found, test) = run::find_mistakes(&run, checking)?;
            run::write_atomic(path, symbreak_train::mistakes::to_csv(&found).as_bytes())
                .map_err(|e| RunError::Failed(format!("cannot write {}: {e}", path.display())))?;
            print!(
                "{}",
                symbreak_train::mistakes::summary(&found, &test, &run.config.data)
            );
            println!("{} mistakes written to {}", found.len(), path.display());
            Score {
                correct: test.len() - found.len(),
                total: test.len(),
            }
        }
    };
    println!(
        "{}{which}: exact match {:.2}% ({}/{})",
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

/// `symbreak predict`: one question to a finished run.
pub fn predict(run_dir: &Path, question: &str, backend: &BackendArg) -> Result<(), RunError> {
    let run = run::load_finished(run_dir, backend.resolve()?)?;
    let p = run::predict(&run, question)?;
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

/// `symbreak bench`: the named (or all compiled-in) backends on the named (or all) cases; `--tiny`
/// replaces both the cases and the step counts with a quick check that the benchmark works.
pub fn bench(args: &BenchArgs) -> Result<(), RunError> {
    let backends = if args.backends.is_empty() {
        Backend::ALL
            .into_iter()
            .filter(|b| b.is_compiled())
            .collect()
    } else {
        args.backends
            .iter()
            .map(|name| Backend::parse(name).map_err(RunError::Usage))
            .collect::<Result<Vec<_>, _>>()?
    };
    let (all_cases, plan) = if args.tiny {
        (bench::Case::tiny(), bench::Plan::TINY)
    } else {
        let plan = bench::Plan {
            warmup_steps: args.warmup,
            timed_steps: args.steps.max(1),
            eval_prompts: args.eval_prompts,
        };
        (bench::Case::standard(), plan)
    };
    let chosen: Vec<bench::Case> = if args.cases.is_empty() || args.tiny {
        all_cases
    } else {
        args.cases
            .iter()
            .map(|name| {
                all_cases
                    .iter()
                    .find(|c| c.name == name)
                    .cloned()
                    .ok_or_else(|| {
                        RunError::Usage(format!(
                            "unknown case {name:?}; the cases are quick, width128 and width384"
                        ))
                    })
            })
            .collect::<Result<_, _>>()?
    };
    run_bench(&chosen, &backends, plan, &args.out)
}

/// Times every case on every backend, printing each result as it comes, then writes the report.
fn run_bench(
    cases: &[bench::Case],
    backends: &[Backend],
    plan: bench::Plan,
    out: &Path,
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

/// `symbreak model`: the resolved configuration and the parameter count.
pub fn model(config: &ConfigArgs) -> Result<(), RunError> {
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
fn check_writable(path: &Path) -> Result<(), RunError> {
    let folder = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
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
