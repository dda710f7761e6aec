//! Times the parts of one training step (forward with loss, backward, optimiser) of a preset's
//! model on a fixed batch, without the learner: where `symbreak train`'s time goes.
//!
//! `cargo run --release -p symbreak-train --features flex --example step_time -- quick flex`
//! (arguments: preset, then `ndarray` or `flex`; `DROPOUT=0` turns dropout off).

use std::time::Instant;

use burn::nn::loss::CrossEntropyLossConfig;
use burn::optim::GradientsParams;
use burn::tensor::{Int, Tensor, TensorData};
use symbreak_train::{Backend, RunConfig};

fn main() {
    let mut args = std::env::args().skip(1);
    let preset = args.next().unwrap_or_else(|| "quick".into());
    let backend = Backend::parse(&args.next().unwrap_or_else(|| "ndarray".into())).unwrap();
    let mut config = RunConfig::preset(&preset).unwrap();
    if let Ok(dropout) = std::env::var("DROPOUT") {
        config.model.dropout = dropout.parse().unwrap();
    }
    let device = backend.device().unwrap().autodiff();
    device.seed(1);
    let mut model = config.model.init(&device).unwrap();
    let (rows, time) = (config.train.batch_size, config.model.block_size);
    let tokens: Vec<i64> = (0..rows * time).map(|i| (i * 7 % 14) as i64).collect();
    let inputs =
        Tensor::<2, Int>::from_data(TensorData::new(tokens.clone(), [rows, time]), &device);
    let targets = Tensor::<1, Int>::from_data(TensorData::new(tokens, [rows * time]), &device);
    let mut optim = symbreak_train::step::optimizer(&config.train);
    let loss_fn = CrossEntropyLossConfig::new().init(&device);
    println!(
        "{preset} on {backend}: {rows} x {time} tokens, dropout {}",
        config.model.dropout
    );
    for step in 0..5 {
        let start = Instant::now();
        let logits = model.forward(inputs.clone());
        let [b, t, v] = logits.dims();
        let loss = loss_fn.forward(logits.reshape([b * t, v]), targets.clone());
        let _ = loss.clone().into_scalar::<f32>();
        let forward = start.elapsed();
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        let backward = start.elapsed() - forward;
        model = optim.step(1e-3, model, grads);
        let total = start.elapsed();
        println!(
            "step {step}: forward and loss {:.0} ms, backward {:.0} ms, whole step {:.0} ms",
            forward.as_secs_f64() * 1e3,
            backward.as_secs_f64() * 1e3,
            total.as_secs_f64() * 1e3
        );
    }
}
