//! End-to-end tests of the `symbreak` command: training, evaluation, prediction, resuming after
//! a kill, determinism, and the errors for bad input.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;
use common::{symbreak, text};

fn run(args: &[&str]) -> Output {
    symbreak().args(args).output().expect("symbreak runs")
}

fn result(dir: &Path) -> Value {
    serde_json::from_str(&fs::read_to_string(dir.join("result.json")).unwrap()).unwrap()
}

/// `metrics.csv` without its wall-time column, which differs between runs.
fn metrics_without_time(dir: &Path) -> Vec<String> {
    fs::read_to_string(dir.join("metrics.csv"))
        .unwrap()
        .lines()
        .map(|row| row.rsplit_once(',').unwrap().0.to_string())
        .collect()
}

/// A smoke run of `steps` steps, evaluated and checkpointed every 20.
fn smoke(steps: &str) -> [&str; 8] {
    [
        "--preset",
        "smoke",
        "--steps",
        steps,
        "--set",
        "train.eval_every=20",
        "--set",
        "train.eval_prompts=20",
    ]
}

fn train_args<'a>(schedule: &[&'a str], dir: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["train"];
    args.extend(schedule);
    args.extend(["--out", dir.to_str().unwrap()]);
    args.extend(extra);
    args
}

/// The arguments of a 100-step smoke run (five checkpoints), so that a kill after the second
/// checkpoint still leaves most of the run to do, with dropout, whose masks a resumed run must
/// draw as the uninterrupted run did.
fn longer<'a>(dir: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = train_args(&smoke("100"), dir, &["--set", "model.dropout=0.1"]);
    args.extend(extra);
    args
}

/// A 60-step smoke run.
fn train_short(dir: &Path, extra: &[&str]) -> Output {
    run(&train_args(&smoke("60"), dir, extra))
}

#[test]
fn the_smoke_preset_learns_addition_and_eval_reproduces_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("smoke");
    let out = run(&["train", "--preset", "smoke", "--out", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    for file in [
        "config.toml",
        "metrics.csv",
        "model.bpk",
        "model.safetensors",
        "result.json",
    ] {
        assert!(dir.join(file).exists(), "{file} is missing");
    }
    let result = result(&dir);
    let accuracy = result["exact_match"].as_f64().unwrap();
    assert!(
        accuracy >= 90.0,
        "the smoke model reached only {accuracy}% exact match"
    );
    assert_eq!(result["total"], 500);
    assert_eq!(result["steps"], 1000);
    assert_eq!(result["diverged"], false);
    assert_eq!(
        result["backend"],
        symbreak_train::Backend::default_compiled().name()
    );
    // The commit this test binary's symbreak was built from, as `git` reports it here.
    let head = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map_or("unknown".into(), |out| {
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        });
    assert_eq!(result["symbreak_commit"], head.as_str());
    let cpu = result["cpu_vectors"].as_str().unwrap_or_default();
    assert_eq!(
        cpu,
        symbreak_train::backend::cpu_vectors(),
        "result.json names the CPU's vector instructions"
    );

    let rows = fs::read_to_string(dir.join("metrics.csv")).unwrap();
    assert_eq!(
        rows.lines().count(),
        1 + 10,
        "a header and one row per evaluation"
    );
    assert!(rows.lines().nth(10).unwrap().starts_with("1000,"));

    let eval = run(&["eval", dir.to_str().unwrap()]);
    assert!(eval.status.success(), "{}", text(&eval));
    let expected = format!("exact match {accuracy:.2}%");
    assert!(
        text(&eval).contains(&expected),
        "eval printed {:?}, expected {expected}",
        text(&eval)
    );
    // Token-by-token generation agrees with the one-pass teacher-forced check.
    let generated = run(&["eval", "--generate", dir.to_str().unwrap()]);
    assert!(
        text(&generated).contains(&expected),
        "eval --generate printed {:?}, expected {expected}",
        text(&generated)
    );

    // The mistakes file lists exactly the pairs the score counts wrong.
    let mistakes = tmp.path().join("mistakes.csv");
    let listed = run(&[
        "eval",
        dir.to_str().unwrap(),
        "--mistakes",
        mistakes.to_str().unwrap(),
    ]);
    assert!(listed.status.success(), "{}", text(&listed));
    assert!(text(&listed).contains(&expected), "{}", text(&listed));
    assert!(
        text(&listed).contains("by operand lengths:"),
        "{}",
        text(&listed)
    );
    let wrong = (500.0 * (100.0 - accuracy) / 100.0).round() as usize;
    let csv = fs::read_to_string(&mistakes).unwrap();
    assert_eq!(csv.lines().count(), 1 + wrong, "{csv}");
    assert!(
        text(&listed).contains(&format!("{wrong} mistakes written to")),
        "{}",
        text(&listed)
    );

    // The learner's last checkpoint holds the final model; the one before it can be scored
    // too, and a step it no longer keeps is a usage error that names the steps it does keep.
    let last = run(&["eval", dir.to_str().unwrap(), "--step", "1000"]);
    assert!(last.status.success(), "{}", text(&last));
    assert!(
        text(&last).contains(&format!("(checkpoint at step 1000): {expected}")),
        "{}",
        text(&last)
    );
    let before = run(&["eval", dir.to_str().unwrap(), "--step", "900"]);
    assert!(before.status.success(), "{}", text(&before));
    assert!(
        text(&before).contains("(checkpoint at step 900): exact match"),
        "{}",
        text(&before)
    );
    let gone = run(&["eval", dir.to_str().unwrap(), "--step", "100"]);
    assert_eq!(gone.status.code(), Some(2), "{}", text(&gone));
    assert!(
        text(&gone).contains("no checkpoint at step 100")
            && text(&gone).contains("it keeps steps 900, 1000"),
        "{}",
        text(&gone)
    );

    let predict = run(&["predict", dir.to_str().unwrap(), "12+34"]);
    assert!(predict.status.success(), "{}", text(&predict));
    assert!(text(&predict).starts_with("12+34 = "), "{}", text(&predict));
    let bad = run(&["predict", dir.to_str().unwrap(), "123+4"]);
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad));
    assert!(text(&bad).contains("below 100"), "{}", text(&bad));
}

#[test]
fn the_same_seed_gives_the_same_metrics() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b, c) = (
        tmp.path().join("a"),
        tmp.path().join("b"),
        tmp.path().join("c"),
    );
    assert!(train_short(&a, &[]).status.success());
    assert!(train_short(&b, &[]).status.success());
    assert!(train_short(&c, &["--seed", "2"]).status.success());
    assert_eq!(metrics_without_time(&a), metrics_without_time(&b));
    assert_eq!(result(&a)["correct"], result(&b)["correct"]);
    assert_ne!(
        metrics_without_time(&a),
        metrics_without_time(&c),
        "another seed, other metrics"
    );
}

#[test]
fn a_killed_run_resumes_to_the_same_end() {
    let tmp = tempfile::tempdir().unwrap();
    let whole = tmp.path().join("whole");
    assert!(run(&longer(&whole, &[])).status.success());

    let killed = tmp.path().join("killed");
    let mut child = symbreak()
        .args(longer(&killed, &[]))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Burn writes a checkpoint's three files on three threads, in no fixed order, each thread
    // one file after another. Once every file of checkpoint 2 exists, checkpoint 1 is complete.
    let checkpoint = killed.join("learner/checkpoint");
    let second =
        ["model", "optim", "scheduler"].map(|kind| checkpoint.join(format!("{kind}-2.bpk")));
    let start = Instant::now();
    while !second.iter().all(|file| file.exists()) {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no second checkpoint appeared"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL: no chance to clean up
    child.wait().unwrap();
    assert!(
        !killed.join("result.json").exists(),
        "the run was killed before it finished"
    );

    let again = run(&longer(&killed, &[]));
    assert_eq!(
        again.status.code(),
        Some(2),
        "an unfinished folder needs --resume: {}",
        text(&again)
    );

    let resumed = run(&longer(&killed, &["--resume"]));
    assert!(resumed.status.success(), "{}", text(&resumed));
    assert!(text(&resumed).contains("resuming"), "{}", text(&resumed));
    assert_eq!(result(&killed)["steps"], 100);
    // A resumed run repeats the uninterrupted one exactly, dropout masks included.
    assert_eq!(metrics_without_time(&killed), metrics_without_time(&whole));
    assert_eq!(result(&killed)["correct"], result(&whole)["correct"]);

    let finished = run(&["train", "--resume", "--out", killed.to_str().unwrap()]);
    assert_eq!(
        finished.status.code(),
        Some(2),
        "a finished run is not trained twice"
    );
    assert!(
        text(&finished).contains("finished run"),
        "{}",
        text(&finished)
    );
}

#[test]
fn a_diverging_run_is_recorded_not_a_crash() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("nan");
    let out = train_short(
        &dir,
        &[
            "--set",
            "train.learning_rate=1e30",
            "--set",
            "train.min_learning_rate=1e29",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let result = result(&dir);
    assert_eq!(result["diverged"], true, "{result}");
    assert!(result["steps"].as_u64().unwrap() < 60);
}

fn assert_usage_error(args: &[&str], expected: &str) {
    let out = run(args);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
    let message = text(&out);
    assert!(
        message.contains(expected),
        "{args:?}: {message:?} does not mention {expected:?}"
    );
    assert_eq!(
        message.trim().lines().count(),
        1,
        "one error line: {message:?}"
    );
}

#[test]
fn bad_input_is_one_clear_error_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let out: PathBuf = tmp.path().join("never");
    let out_arg = out.to_str().unwrap();

    let malformed = tmp.path().join("malformed.toml");
    fs::write(&malformed, "[model\nn_layer = 2").unwrap();
    assert_usage_error(
        &[
            "train",
            "--config",
            malformed.to_str().unwrap(),
            "--out",
            out_arg,
        ],
        "malformed TOML",
    );
    let contradictory = tmp.path().join("contradictory.toml");
    fs::write(&contradictory, "[model]\nn_layer = 2\nablate = [3]").unwrap();
    assert_usage_error(
        &[
            "train",
            "--config",
            contradictory.to_str().unwrap(),
            "--out",
            out_arg,
        ],
        "model.ablate",
    );
    assert_usage_error(
        &[
            "train",
            "--preset",
            "smoke",
            "--set",
            "train.speed=2",
            "--out",
            out_arg,
        ],
        "train.speed: unknown field",
    );
    assert_usage_error(
        &[
            "train",
            "--preset",
            "smoke",
            "--positional",
            "rope",
            "--out",
            out_arg,
        ],
        "positional",
    );
    assert_usage_error(
        &[
            "train", "--preset", "smoke", "--ablate", "x", "--out", out_arg,
        ],
        "--ablate",
    );
    assert_usage_error(
        &["train", "--preset", "huge", "--out", out_arg],
        "unknown preset",
    );
    assert_usage_error(
        &[
            "train",
            "--preset",
            "smoke",
            "--backend",
            "wgpu",
            "--out",
            out_arg,
        ],
        "--features wgpu",
    );
    assert_usage_error(
        &[
            "train",
            "--preset",
            "smoke",
            "--mask",
            "bidirectional",
            "--out",
            out_arg,
        ],
        "model.mask: a bidirectional model cannot be trained",
    );
    // Valid on its own, but only 2,475 two-digit pairs have two carries, not the 2,666 a
    // balanced set of 8,000 needs: found out while building the training set.
    assert_usage_error(
        &[
            "train",
            "--preset",
            "smoke",
            "--set",
            "data.train_size=8000",
            "--out",
            out_arg,
        ],
        "cannot find",
    );
    assert_usage_error(
        &[
            "train",
            "--preset",
            "smoke",
            "--set",
            "model.block_size=50000",
            "--out",
            out_arg,
        ],
        "model.block_size: 50000 is too long",
    );
    assert!(!out.exists(), "nothing is written for bad input");

    assert_usage_error(&["eval", out_arg], "no run folder");
    assert_usage_error(&["predict", out_arg, "1+2"], "no run folder");

    // A run folder whose model file is corrupt.
    let corrupt = tmp.path().join("corrupt");
    assert!(train_short(&corrupt, &[]).status.success());
    fs::write(corrupt.join("model.bpk"), b"not a model").unwrap();
    assert_usage_error(&["eval", corrupt.to_str().unwrap()], "corrupt");
    let nowhere = tmp.path().join("missing").join("mistakes.csv");
    assert_usage_error(
        &[
            "eval",
            corrupt.to_str().unwrap(),
            "--mistakes",
            nowhere.to_str().unwrap(),
        ],
        "does not exist",
    );
}

/// With 50 steps and a checkpoint every 20, the last pass is 10 steps long and ends at step 50.
#[test]
fn eval_step_finds_a_short_last_pass_at_the_run_s_last_step() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("uneven");
    let out = run(&train_args(&smoke("50"), &dir, &[]));
    assert!(out.status.success(), "{}", text(&out));
    for (step, kept) in [("50", true), ("40", true), ("60", false)] {
        let eval = run(&["eval", dir.to_str().unwrap(), "--step", step]);
        assert_eq!(eval.status.success(), kept, "step {step}: {}", text(&eval));
        if kept {
            let scored = format!("(checkpoint at step {step}): exact match");
            assert!(text(&eval).contains(&scored), "{}", text(&eval));
        } else {
            assert!(
                text(&eval).contains("it keeps steps 40, 50"),
                "{}",
                text(&eval)
            );
        }
    }
}

#[test]
fn help_and_model_describe_the_tool() {
    let help = run(&["--help"]);
    assert!(help.status.success());
    for command in ["train", "eval", "predict", "model"] {
        assert!(text(&help).contains(command), "--help lacks {command}");
    }
    let model = run(&["model", "--preset", "paper"]);
    assert!(model.status.success(), "{}", text(&model));
    assert!(
        text(&model).contains("parameters: 10725504"),
        "{}",
        text(&model)
    );
    assert!(text(&model).contains("n_embd = 384"), "{}", text(&model));
    let nope = run(&[
        "model",
        "--preset",
        "paper",
        "--positional",
        "none",
        "--ablate",
        "1,2",
    ]);
    assert!(
        text(&nope).contains("parameters: 10627200"),
        "{}",
        text(&nope)
    );
}

#[test]
fn bench_writes_a_json_report() {
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("bench.json");
    let out = run(&[
        "bench",
        "--tiny",
        "--backend",
        "flex",
        "--out",
        json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let report: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&json).unwrap()).unwrap();
    let steps = report["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 1, "one tiny case on one backend");
    let step = &steps[0];
    assert_eq!(step["case"], "tiny");
    assert_eq!(step["tokens_per_step"], 8 * 16);
    for key in ["median_ms", "tokens_per_second", "gflops", "forward_ms"] {
        assert!(step[key].as_f64().unwrap() > 0.0, "{key}: {step}");
    }
    let methods: Vec<&str> = report["eval"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["method"].as_str().unwrap())
        .collect();
    assert_eq!(methods, ["teacher-forced", "generation"]);
    assert_eq!(report["eval"][0]["prompts"], 200);

    // `--eval-prompts 0` times the step only.
    let out = run(&[
        "bench",
        "--cases",
        "quick",
        "--warmup",
        "0",
        "--steps",
        "1",
        "--eval-prompts",
        "0",
        "--backend",
        "flex",
        "--out",
        json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(!text(&out).contains("evaluation of"), "{}", text(&out));
    let report: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["steps"][0]["case"], "quick");
    assert!(report["eval"].as_array().unwrap().is_empty(), "{report}");

    let bad = run(&["bench", "--cases", "huge"]);
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad));
    assert!(text(&bad).contains("unknown case"), "{}", text(&bad));
}

/// `symbreak model | head`, with head gone before the first line: the process ends at its first
/// write (killed by SIGPIPE, as Unix tools are), not with a panic about a broken pipe.
#[cfg(unix)]
#[test]
fn a_closed_pipe_ends_the_output_quietly() {
    use std::os::unix::process::ExitStatusExt;

    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = symbreak()
        .args(["model", "--preset", "smoke"])
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    const SIGPIPE: i32 = 13; // on Linux and macOS alike
    assert_eq!(out.status.signal(), Some(SIGPIPE), "{stderr}");
    assert!(stderr.is_empty(), "{stderr}");
}
