//! `symbreak bench`: the median time of a whole training step (forward with loss, backward,
//! clipping and AdamW) and of evaluating the test set, per backend, as numbers and JSON.

use std::time::Instant;

use burn::optim::GradientsParams;
use serde::Serialize;
use symbreak_data::AdditionTask;
use symbreak_model::DecoderConfig;

use crate::backend::Backend;
use crate::batches::WindowLoader;
use crate::config::{Override, RunConfig};
use crate::evaluate::{Checking, exact_match};
use crate::run::RunError;
use crate::step::{Trainee, optimizer};

/// One model shape and batch to time.
#[derive(Debug, Clone)]
pub struct Case {
    pub name: &'static str,
    pub config: RunConfig,
}

impl Case {
    /// The default cases: the quick preset as it trains, and the two shapes of the PyTorch
    /// comparison in docs/performance.md (6 layers, windows of 16 tokens): width 128 with 4 heads
    /// at 64 rows, and the paper's width 384 with 6 heads at 256 rows.
    pub fn standard() -> Vec<Case> {
        vec![
            Case::new("quick", "quick", &[]),
            Case::new(
                "width128",
                "paper",
                &[
                    ("model.n_embd", 128),
                    ("model.n_head", 4),
                    ("model.block_size", 16),
                    ("train.batch_size", 64),
                ],
            ),
            Case::new(
                "width384",
                "paper",
                &[("model.block_size", 16), ("train.batch_size", 256)],
            ),
        ]
    }

    /// A case small enough for a test: 2 layers of width 32, 8 rows of 16 tokens (run it with
    /// [`Plan::TINY`]).
    pub fn tiny() -> Vec<Case> {
        vec![Case::new(
            "tiny",
            "paper",
            &[
                ("model.n_layer", 2),
                ("model.n_head", 2),
                ("model.n_embd", 32),
                ("model.block_size", 16),
                ("train.batch_size", 8),
            ],
        )]
    }

    fn new(name: &'static str, preset: &str, overrides: &[(&str, i64)]) -> Case {
        let overrides: Vec<Override> = overrides
            .iter()
            .map(|&(key, value)| Override::new(key, toml::Value::Integer(value)))
            .collect();
        let config = RunConfig::preset_with(preset, &overrides)
            .expect("the benchmark cases are valid configurations");
        Case { name, config }
    }
}

/// How many steps to run before and while timing, and how many test prompts to evaluate.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    pub warmup_steps: usize,
    pub timed_steps: usize,
    pub eval_prompts: usize,
}

impl Plan {
    /// With [`Case::tiny`]: enough to check that the benchmark runs and reports, not to time
    /// anything.
    pub const TINY: Plan = Plan {
        warmup_steps: 1,
        timed_steps: 2,
        eval_prompts: 200,
    };
}

/// The timing of one case's training step on one backend.
#[derive(Debug, Clone, Serialize)]
pub struct StepTiming {
    pub case: String,
    pub backend: Backend,
    pub n_layer: usize,
    pub n_head: usize,
    pub n_embd: usize,
    pub rows: usize,
    pub tokens_per_step: usize,
    pub dropout: f64,
    pub params: usize,
    pub steps_timed: usize,
    /// Medians over the timed steps.
    pub median_ms: f64,
    pub forward_ms: f64,
    pub backward_ms: f64,
    pub optimizer_ms: f64,
    pub min_ms: f64,
    pub tokens_per_second: f64,
    /// 6 x parameters x tokens per step, divided by the median step time.
    pub gflops: f64,
}

/// The time to score test prompts by exact match on one backend.
#[derive(Debug, Clone, Serialize)]
pub struct EvalTiming {
    pub case: String,
    pub backend: Backend,
    /// `teacher-forced` (one pass, causal models) or `generation` (token by token).
    pub method: &'static str,
    pub prompts: usize,
    pub ms: f64,
    pub prompts_per_second: f64,
}

/// Everything one `symbreak bench` measured, with what it ran on.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub symbreak_version: &'static str,
    pub burn_version: &'static str,
    pub cpus: usize,
    /// The CPU's widest vector instructions ([`crate::backend::cpu_vectors`]).
    pub cpu_vectors: &'static str,
    pub rayon_threads: Option<String>,
    pub steps: Vec<StepTiming>,
    pub eval: Vec<EvalTiming>,
}

impl Report {
    pub fn new() -> Self {
        Report {
            symbreak_version: env!("CARGO_PKG_VERSION"),
            burn_version: "0.22.1",
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cpu_vectors: crate::backend::cpu_vectors(),
            rayon_threads: std::env::var("RAYON_NUM_THREADS").ok(),
            steps: Vec::new(),
            eval: Vec::new(),
        }
    }
}

impl Default for Report {
    fn default() -> Self {
        Self::new()
    }
}

/// Times `plan.timed_steps` training steps of `case` on `backend` after `plan.warmup_steps`.
pub fn time_steps(case: &Case, backend: Backend, plan: Plan) -> Result<StepTiming, RunError> {
    let config = &case.config;
    let device = backend.device().map_err(RunError::Usage)?;
    device.seed(config.train.seed);
    let decoder = config
        .model
        .init(&device.clone().autodiff())
        .map_err(|e| RunError::Usage(e.to_string()))?;
    let mut trainee = Trainee::new(decoder, config);
    let mut optim = optimizer(&config.train);
    let loader = loader(config, &device)?;

    let mut phases = Vec::new();
    let mut tokens = 0;
    for step in 0..plan.warmup_steps + plan.timed_steps {
        let batch = loader.batch(step);
        tokens = batch.inputs.dims().iter().product();
        let start = Instant::now();
        let output = trainee.loss(batch.inputs, batch.targets);
        let loss = output.loss.clone().into_scalar::<f32>();
        if !loss.is_finite() {
            return Err(RunError::Failed(format!(
                "{}: the loss became {loss} at step {step}",
                case.name
            )));
        }
        let forward = start.elapsed();
        let grads = GradientsParams::from_grads(output.loss.backward(), &trainee);
        let backward = start.elapsed();
        trainee = trainee.clip_and_step(&mut optim, config.train.learning_rate, grads);
        let whole = start.elapsed();
        if step >= plan.warmup_steps {
            phases.push([
                whole.as_secs_f64(),
                forward.as_secs_f64(),
                (backward - forward).as_secs_f64(),
                (whole - backward).as_secs_f64(),
            ]);
        }
    }
    let median_of = |i: usize| 1e3 * median(phases.iter().map(|p| p[i]).collect());
    let median_ms = median_of(0);
    let params = config.model.num_params();
    Ok(StepTiming {
        case: case.name.to_string(),
        backend,
        n_layer: config.model.n_layer,
        n_head: config.model.n_head,
        n_embd: config.model.n_embd,
        rows: config.train.batch_size,
        tokens_per_step: tokens,
        dropout: config.model.dropout,
        params,
        steps_timed: phases.len(),
        median_ms,
        forward_ms: median_of(1),
        backward_ms: median_of(2),
        optimizer_ms: median_of(3),
        min_ms: 1e3 * phases.iter().map(|p| p[0]).fold(f64::INFINITY, f64::min),
        tokens_per_second: tokens as f64 / (median_ms / 1e3),
        gflops: 6.0 * params as f64 * tokens as f64 / (median_ms / 1e3) / 1e9,
    })
}

/// Times the exact-match evaluation of the first `prompts` test pairs with `case`'s freshly
/// initialised model (the time does not depend on the weights), both ways.
pub fn time_eval(
    case: &Case,
    backend: Backend,
    prompts: usize,
) -> Result<Vec<EvalTiming>, RunError> {
    let config = &case.config;
    let device = backend.device().map_err(RunError::Usage)?;
    device.seed(config.train.seed);
    let decoder = config
        .model
        .init(&device)
        .map_err(|e| RunError::Usage(e.to_string()))?;
    let task = AdditionTask::generate(&config.data).map_err(|e| RunError::Usage(e.to_string()))?;
    let pairs = &task.test[..prompts.min(task.test.len())];
    let mut timings = Vec::new();
    for (method, checking) in [
        ("teacher-forced", Checking::Fastest),
        ("generation", Checking::Generation),
    ] {
        if checking == Checking::Fastest && !decoder.is_causal() {
            continue;
        }
        let start = Instant::now();
        let score = exact_match(&decoder, &config.data, pairs, checking, &device);
        let seconds = start.elapsed().as_secs_f64();
        timings.push(EvalTiming {
            case: case.name.to_string(),
            backend,
            method,
            prompts: score.total,
            ms: seconds * 1e3,
            prompts_per_second: score.total as f64 / seconds,
        });
    }
    Ok(timings)
}

fn loader(config: &RunConfig, device: &burn::tensor::Device) -> Result<WindowLoader, RunError> {
    let task = AdditionTask::generate(&config.data).map_err(|e| RunError::Usage(e.to_string()))?;
    let sampler = symbreak_data::WindowSampler::with(
        &task.train_lines(),
        config.train.batching,
        config.train.loss,
        config.model.block_size,
        config.train.seed,
    )
    .map_err(|e| RunError::Failed(e.to_string()))?;
    let steps = config.train.steps;
    Ok(WindowLoader::new(
        sampler,
        config.train.batch_size,
        steps,
        steps,
        0,
        device,
    ))
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// The model shape of a case, for printing.
pub fn shape(model: &DecoderConfig) -> String {
    format!(
        "{} layers, {} heads, width {}",
        model.n_layer, model.n_head, model.n_embd
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
    }

    #[test]
    fn cases_have_the_promised_shapes() {
        let cases = Case::standard();
        let shape = |c: &Case| (c.config.train.batch_size, c.config.model.block_size);
        assert_eq!(shape(&cases[1]), (64, 16));
        assert_eq!(shape(&cases[2]), (256, 16));
        assert_eq!(cases[2].config.model.n_embd, 384);
        assert!(cases.iter().all(|c| c.config.model.n_layer == 6));
    }
}
