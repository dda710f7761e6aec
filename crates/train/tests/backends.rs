//! Every compiled-in backend computes the same model: the same weights and batch give the same
//! logits and gradients (within float tolerance) on ndarray, flex and wgpu, in training and in
//! inference (which takes each backend's own fused attention), and a tiny model learns on each.
//! A backend that is not compiled in, or wgpu without a Vulkan, Metal or DirectX device, is
//! skipped with a message on standard error that cargo's capture does not swallow.

use std::io::Write;
use std::path::{Path, PathBuf};

use burn::module::{Module, ModuleVisitor, Param};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::optim::{AdamWConfig, GradientsParams};
use burn::tensor::{Device, Int, Tensor, TensorData};
use symbreak_model::{AttentionMask, Decoder, DecoderConfig};
use symbreak_train::Backend;

/// Logits may differ by this much between backends (f32, different summation orders).
const LOGIT_TOLERANCE: f32 = 1e-4;
/// Each gradient entry may differ by this fraction of the largest entry of its tensor.
const GRADIENT_TOLERANCE: f32 = 1e-3;

fn skip(message: &str) {
    // Straight to the process's stderr: libtest captures only the print macros.
    let _ = writeln!(std::io::stderr(), "SKIPPED {message}");
}

/// The backends this build can run here; each missing one is reported as skipped.
fn runnable() -> Vec<(Backend, Device)> {
    let mut found = Vec::new();
    for backend in Backend::ALL {
        match backend.usable_device() {
            Ok(device) => found.push((backend, device)),
            Err(why) => skip(&format!("{backend}: {why}")),
        }
    }
    found
}

fn config() -> DecoderConfig {
    DecoderConfig::new()
        .with_block_size(16)
        .with_n_layer(2)
        .with_n_head(2)
        .with_n_embd(32)
        .with_dropout(0.0)
}

fn batch(device: &Device) -> (Tensor<2, Int>, Tensor<1, Int>) {
    let (rows, time) = (4, 12);
    let tokens: Vec<i64> = (0..rows * (time + 1))
        .map(|i| ((i * 7 + i / 5) % 14) as i64)
        .collect();
    let all = Tensor::<2, Int>::from_data(TensorData::new(tokens, [rows, time + 1]), device);
    let inputs = all.clone().narrow(1, 0, time);
    let targets = all.narrow(1, 1, time).reshape([rows * time]);
    (inputs, targets)
}

fn loss(model: &Decoder, device: &Device) -> (Tensor<3>, Tensor<1>) {
    let (inputs, targets) = batch(device);
    let logits = model.forward(inputs);
    let [rows, time, vocab] = logits.dims();
    let loss = CrossEntropyLossConfig::new()
        .init(device)
        .forward(logits.clone().reshape([rows * time, vocab]), targets);
    (logits, loss)
}

/// Every parameter's gradient, flattened, in the module's visiting order.
fn gradients(model: &Decoder, grads: &burn::tensor::Gradients) -> Vec<Vec<f32>> {
    struct Collect<'a> {
        grads: &'a burn::tensor::Gradients,
        out: Vec<Vec<f32>>,
    }
    impl ModuleVisitor for Collect<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            let grad = param
                .val()
                .grad(self.grads)
                .expect("every parameter has a gradient");
            self.out.push(grad.try_to_vec_as::<f32>().unwrap());
        }
    }
    let mut collect = Collect {
        grads,
        out: Vec::new(),
    };
    model.visit(&mut collect);
    collect.out
}

fn max_abs(values: &[f32]) -> f32 {
    values.iter().fold(0.0, |m, v| m.max(v.abs()))
}

fn max_difference(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// The backends that can run here, if at least two (else a skip message and `None`).
fn two_or_more(what: &str) -> Option<Vec<(Backend, Device)>> {
    let backends = runnable();
    if backends.len() < 2 {
        skip(&format!(
            "{what}: fewer than two backends can run here, nothing to compare"
        ));
        return None;
    }
    Some(backends)
}

/// One random initialisation of `config`, saved to a file in `dir` that every backend loads.
fn saved_weights(config: &DecoderConfig, device: &Device, dir: &Path) -> PathBuf {
    let weights = dir.join("weights.bpk");
    device.seed(3);
    config.init(device).unwrap().save_file(&weights).unwrap();
    weights
}

/// Logits within [`LOGIT_TOLERANCE`] of the reference backend's; the difference is reported on
/// standard error, labelled with `what` was run.
fn assert_logits_agree(
    what: &str,
    (backend, logits): (Backend, &[f32]),
    (reference, ref_logits): (Backend, &[f32]),
) {
    let worst = max_difference(logits, ref_logits);
    assert!(
        worst <= LOGIT_TOLERANCE,
        "{what}, {backend} vs {reference}: logits differ by {worst}"
    );
    let _ = writeln!(
        std::io::stderr(),
        "{what}, {backend} vs {reference}: logits differ by at most {worst:e}"
    );
}

#[test]
fn every_backend_gives_the_same_logits_and_gradients() {
    let Some(backends) = two_or_more("backend agreement") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let weights = saved_weights(&config(), &backends[0].1, dir.path());

    let mut reference: Option<(Backend, Vec<f32>, Vec<Vec<f32>>)> = None;
    for (backend, device) in &backends {
        let autodiff = device.clone().autodiff();
        let model = config()
            .init(&autodiff)
            .unwrap()
            .try_load_file(&weights)
            .unwrap();
        let (logits, loss) = loss(&model, &autodiff);
        let grads = gradients(&model, &loss.backward());
        let logits = logits.try_to_vec_as::<f32>().unwrap();
        match &reference {
            None => reference = Some((*backend, logits, grads)),
            Some((name, ref_logits, ref_grads)) => {
                assert_logits_agree("training", (*backend, &logits), (*name, ref_logits));
                assert_eq!(grads.len(), ref_grads.len());
                for (i, (g, r)) in grads.iter().zip(ref_grads).enumerate() {
                    let scale = max_abs(r).max(1e-6);
                    let worst = max_difference(g, r);
                    assert!(
                        worst <= GRADIENT_TOLERANCE * scale,
                        "{backend} vs {name}: gradient {i} differs by {worst} (largest entry {scale})"
                    );
                }
            }
        }
    }
}

/// Without autodiff the model takes the backend's own attention operation (and on flex the fused
/// inference GELU): the evaluation path, for both masks.
#[test]
fn every_backend_gives_the_same_logits_in_inference() {
    let Some(backends) = two_or_more("backend agreement in inference") else {
        return;
    };
    for mask in [AttentionMask::Causal, AttentionMask::Bidirectional] {
        let config = config().with_mask(mask);
        let dir = tempfile::tempdir().unwrap();
        let weights = saved_weights(&config, &backends[0].1, dir.path());
        let mut reference: Option<(Backend, Vec<f32>)> = None;
        for (backend, device) in &backends {
            let model = config
                .init(device)
                .unwrap()
                .try_load_file(&weights)
                .unwrap();
            let logits = model.forward(batch(device).0);
            let logits = logits.try_to_vec_as::<f32>().unwrap();
            match &reference {
                None => reference = Some((*backend, logits)),
                Some((name, ref_logits)) => assert_logits_agree(
                    &format!("inference, {mask:?}"),
                    (*backend, &logits),
                    (*name, ref_logits),
                ),
            }
        }
    }
}

#[test]
fn a_tiny_model_learns_on_every_backend() {
    for (backend, device) in runnable() {
        let autodiff = device.autodiff();
        autodiff.seed(4);
        let mut model = config().init(&autodiff).unwrap();
        let mut optim = AdamWConfig::new().init();
        let first = loss(&model, &autodiff).1.into_scalar::<f32>();
        let mut last = first;
        for _ in 0..60 {
            let (_, loss) = loss(&model, &autodiff);
            last = loss.clone().into_scalar::<f32>();
            let grads = GradientsParams::from_grads(loss.backward(), &model);
            model = optim.step(3e-3, model, grads);
        }
        // One fixed batch: 60 AdamW steps take the loss well below half its starting value.
        assert!(last < first / 2.0, "{backend}: loss {first} -> {last}");
    }
}
