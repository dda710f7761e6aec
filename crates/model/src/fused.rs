//! GELU (tanh form), LayerNorm and attention's softmax in one pass forward and one backward on
//! the flex backend.
//!
//! Composed of Burn's tensor operations ([`crate::mlp::gelu_tanh_composed`], Burn's
//! `LayerNorm`, [`crate::attention::attention_weights_composed`]), a GELU is seven element-wise
//! operations forward and about a dozen backward, a LayerNorm nine forward and more backward, and
//! the attention weights (scale, causal mask, softmax) six forward; each is a pass over a whole
//! activation with a fresh buffer and its own autodiff record. On flex, the default backend, this module computes each
//! function with one loop forward (keeping what the backward pass needs) and one loop backward,
//! recorded as a single autodiff operation. Without autodiff (evaluation) only the GELU is
//! replaced; flex's own LayerNorm and attention kernels serve there. Other backends get `None`
//! and compose the functions.

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::NoCheckpointing;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind, binary, unary};
use burn::backend::flex::FlexTensor;
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, Flex};
use burn::tensor::{DType, Tensor, TensorData};
use rayon::prelude::*;

use crate::mlp::{CUBIC, TWO_SQRT_2_OVER_PI};

/// The fewest elements one rayon task takes: the loops below use as many threads as Burn's own
/// operations would (RAYON_NUM_THREADS), but not for tensors so small that splitting costs more.
/// Each element or row is computed the same way whatever the split, so results do not depend on
/// the thread count.
const ELEMENTS_PER_TASK: usize = 1 << 14;

/// The fewest rows of `width` elements one rayon task takes.
fn rows_per_task(width: usize) -> usize {
    (ELEMENTS_PER_TASK / width.max(1)).max(1)
}

/// `t`'s primitive when it is an f32 tensor on flex with autodiff.
fn on_autodiff_flex<const D: usize>(t: &Tensor<D>) -> Option<FloatTensor<Autodiff<Flex>>> {
    if t.dtype() != DType::F32 {
        return None;
    }
    t.clone().try_into_primitive::<Autodiff<Flex>>().ok()
}

/// `gelu_tanh(x)` when `x` is an f32 tensor on flex (training or inference); `None` otherwise,
/// for the caller to compose.
pub fn gelu_tanh<const D: usize>(x: &Tensor<D>) -> Option<Tensor<D>> {
    if let Some(tracked) = on_autodiff_flex(x) {
        return Some(Tensor::from_primitive::<Autodiff<Flex>>(gelu_autodiff(
            tracked,
        )));
    }
    if x.dtype() != DType::F32 {
        return None;
    }
    let plain = x.clone().try_into_primitive::<Flex>().ok()?;
    Some(Tensor::from_primitive::<Flex>(gelu_inference(&plain)))
}

#[derive(Debug)]
struct GeluBackward;

impl Backward<Flex, 1> for GeluBackward {
    /// The input and the sigmoid factor `s` of each element, both contiguous.
    type State = (FlexTensor, FlexTensor);

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let (x, s) = ops.state;
        unary::<Flex, _>(ops.parents, ops.node, grads, |grad| {
            gelu_backward(&x, &s, &grad)
        });
    }
}

fn gelu_autodiff(x: FloatTensor<Autodiff<Flex>>) -> FloatTensor<Autodiff<Flex>> {
    match GeluBackward
        .prepare::<NoCheckpointing>([x.node()])
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => {
            let (y, x_contiguous, s) = gelu_forward(x.primitive());
            prep.finish((x_contiguous, s), y)
        }
        OpsKind::UnTracked(prep) => prep.finish(gelu_inference(x.primitive())),
    }
}

/// GELU's sigmoid factor `s = sigmoid(2 sqrt(2/pi) (x + 0.044715 x^3))` (`gelu(x) = x s`), in
/// the order of operations of the composed form, so that the outputs agree bit for bit.
fn gelu_factor(v: f32) -> f32 {
    sigmoid((v + v * v * v * CUBIC) * TWO_SQRT_2_OVER_PI)
}

/// GELU without autodiff: the output only.
fn gelu_inference(x: &FlexTensor) -> FlexTensor {
    let x = x.to_contiguous();
    let values = x.as_slice::<f32>().expect("a contiguous f32 tensor");
    let y: Vec<f32> = values
        .par_iter()
        .with_min_len(ELEMENTS_PER_TASK)
        .map(|&v| v * gelu_factor(v))
        .collect();
    FlexTensor::from_data(TensorData::new(y, x.layout().shape().clone()))
}

/// GELU for training: returns the output, `x` made contiguous and the factor `s`.
fn gelu_forward(x: &FlexTensor) -> (FlexTensor, FlexTensor, FlexTensor) {
    let x = x.to_contiguous();
    let values = x.as_slice::<f32>().expect("a contiguous f32 tensor");
    let s: Vec<f32> = values
        .par_iter()
        .with_min_len(ELEMENTS_PER_TASK)
        .map(|&v| gelu_factor(v))
        .collect();
    let y: Vec<f32> = values
        .par_iter()
        .zip(&s)
        .with_min_len(ELEMENTS_PER_TASK)
        .map(|(&v, &s)| v * s)
        .collect();
    let shape = x.layout().shape().clone();
    (
        FlexTensor::from_data(TensorData::new(y, shape.clone())),
        x,
        FlexTensor::from_data(TensorData::new(s, shape)),
    )
}

/// `dL/dx = g (s + x s (1 - s) 2 sqrt(2/pi) (1 + 3 * 0.044715 x^2))`.
fn gelu_backward(x: &FlexTensor, s: &FlexTensor, grad: &FlexTensor) -> FlexTensor {
    let grad = grad.to_contiguous();
    let (x, s) = (x.as_slice::<f32>().unwrap(), s.as_slice::<f32>().unwrap());
    let g = grad.as_slice::<f32>().expect("a contiguous f32 gradient");
    let out: Vec<f32> = x
        .par_iter()
        .zip(s)
        .zip(g)
        .with_min_len(ELEMENTS_PER_TASK)
        .map(|((&x, &s), &g)| {
            let slope = TWO_SQRT_2_OVER_PI * (1.0 + 3.0 * CUBIC * x * x);
            g * (s + x * s * (1.0 - s) * slope)
        })
        .collect();
    FlexTensor::from_data(TensorData::new(out, grad.layout().shape().clone()))
}

/// `layer_norm(x) * gamma` over the last dimension when `x` and `gamma` are f32 tensors on
/// flex with autodiff; `None` otherwise. (Without autodiff, Burn's LayerNorm on flex already runs
/// flex's own vectorised kernel, which is faster than this one.)
pub fn layer_norm<const D: usize>(
    x: &Tensor<D>,
    gamma: &Tensor<1>,
    epsilon: f32,
) -> Option<Tensor<D>> {
    let (x, gamma) = (on_autodiff_flex(x)?, on_autodiff_flex(gamma)?);
    let y = layer_norm_autodiff(x, gamma, epsilon);
    Some(Tensor::from_primitive::<Autodiff<Flex>>(y))
}

#[derive(Debug)]
struct LayerNormBackward;

impl Backward<Flex, 2> for LayerNormBackward {
    /// The normalised input, each row's `sqrt(variance + epsilon)`, and `gamma`; contiguous.
    type State = (FlexTensor, FlexTensor, FlexTensor);

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let (normalized, denominators, gamma) = ops.state;
        binary::<Flex, _, _>(
            ops.parents,
            ops.node,
            grads,
            |grad| layer_norm_input_grad(&normalized, &denominators, &gamma, &grad),
            |grad| layer_norm_gamma_grad(&normalized, &grad),
        );
    }
}

fn layer_norm_autodiff(
    x: FloatTensor<Autodiff<Flex>>,
    gamma: FloatTensor<Autodiff<Flex>>,
    epsilon: f32,
) -> FloatTensor<Autodiff<Flex>> {
    let (y, normalized, denominators) =
        layer_norm_forward(x.primitive(), gamma.primitive(), epsilon);
    match LayerNormBackward
        .prepare::<NoCheckpointing>([x.node(), gamma.node()])
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => {
            let gamma = gamma.primitive().to_contiguous();
            prep.finish((normalized, denominators, gamma), y)
        }
        OpsKind::UnTracked(prep) => prep.finish(y),
    }
}

/// Each row of `x` (its last dimension) centred and divided by `sqrt(variance + epsilon)`, then
/// scaled by `gamma`, as Burn's composed LayerNorm does (its sums may round differently);
/// returns the output, the normalised rows and each row's denominator.
fn layer_norm_forward(
    x: &FlexTensor,
    gamma: &FlexTensor,
    epsilon: f32,
) -> (FlexTensor, FlexTensor, FlexTensor) {
    let x = x.to_contiguous();
    let gamma = gamma.to_contiguous();
    let (values, gamma) = (
        x.as_slice::<f32>().expect("a contiguous f32 tensor"),
        gamma.as_slice::<f32>().expect("a contiguous f32 gamma"),
    );
    let width = gamma.len();
    let rows = values.len() / width;
    let mut y = vec![0.0f32; values.len()];
    let mut normalized = vec![0.0f32; values.len()];
    let mut denominators = vec![0.0f32; rows];
    y.par_chunks_mut(width)
        .zip(normalized.par_chunks_mut(width))
        .zip(values.par_chunks(width))
        .zip(&mut denominators)
        .with_min_len(rows_per_task(width))
        .for_each(|(((y, normalized), row), denominator)| {
            let mean = lane_sum(width, |i| row[i]) / width as f32;
            let variance = lane_sum(width, |i| (row[i] - mean) * (row[i] - mean)) / width as f32;
            *denominator = (variance + epsilon).sqrt();
            for (((y, n), &v), &g) in y.iter_mut().zip(normalized.iter_mut()).zip(row).zip(gamma) {
                *n = (v - mean) / *denominator;
                *y = *n * g;
            }
        });
    let shape = x.layout().shape().clone();
    (
        FlexTensor::from_data(TensorData::new(y, shape.clone())),
        FlexTensor::from_data(TensorData::new(normalized, shape)),
        FlexTensor::from_data(TensorData::new(denominators, [rows])),
    )
}

/// `dL/dx = (d - mean(d) - n mean(d n)) / denominator` per row, with `d = grad * gamma` and `n`
/// the normalised row.
fn layer_norm_input_grad(
    normalized: &FlexTensor,
    denominators: &FlexTensor,
    gamma: &FlexTensor,
    grad: &FlexTensor,
) -> FlexTensor {
    let grad = grad.to_contiguous();
    let g = grad.as_slice::<f32>().expect("a contiguous f32 gradient");
    let normalized = normalized.as_slice::<f32>().unwrap();
    let denominators = denominators.as_slice::<f32>().unwrap();
    let gamma = gamma.as_slice::<f32>().unwrap();
    let width = gamma.len();
    let mut out = vec![0.0f32; g.len()];
    out.par_chunks_mut(width)
        .zip(g.par_chunks(width))
        .zip(normalized.par_chunks(width))
        .zip(denominators)
        .with_min_len(rows_per_task(width))
        .for_each(|(((out, g), n), denominator)| {
            let mean_d = lane_sum(width, |i| g[i] * gamma[i]) / width as f32;
            let mean_dn = lane_sum(width, |i| g[i] * gamma[i] * n[i]) / width as f32;
            for (((o, &g), &n), &w) in out.iter_mut().zip(g).zip(n).zip(gamma) {
                *o = (g * w - mean_d - n * mean_dn) / denominator;
            }
        });
    FlexTensor::from_data(TensorData::new(out, grad.layout().shape().clone()))
}

/// `dL/dgamma`: `grad * normalized` summed over every row.
fn layer_norm_gamma_grad(normalized: &FlexTensor, grad: &FlexTensor) -> FlexTensor {
    let grad = grad.to_contiguous();
    let g = grad.as_slice::<f32>().expect("a contiguous f32 gradient");
    let normalized = normalized.as_slice::<f32>().unwrap();
    let width = *grad.layout().shape().last().unwrap();
    let mut sums = vec![0.0f32; width];
    for (g, n) in g.chunks_exact(width).zip(normalized.chunks_exact(width)) {
        for ((sum, &g), &n) in sums.iter_mut().zip(g).zip(n) {
            *sum += g * n;
        }
    }
    FlexTensor::from_data(TensorData::new(sums, [width]))
}

/// `softmax(scores / divisor)` over the last dimension of `[batch, heads, queries, keys]`
/// attention scores on flex with autodiff, with the keys after each query hidden when `causal`;
/// `None` otherwise. (Without autodiff the model calls Burn's fused attention instead.)
pub fn attention_weights(scores: &Tensor<4>, divisor: f32, causal: bool) -> Option<Tensor<4>> {
    let weights = attention_weights_autodiff(on_autodiff_flex(scores)?, divisor, causal);
    Some(Tensor::from_primitive::<Autodiff<Flex>>(weights))
}

#[derive(Debug)]
struct AttentionWeightsBackward;

impl Backward<Flex, 1> for AttentionWeightsBackward {
    /// The weights and the divisor.
    type State = (FlexTensor, f32);

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let (weights, divisor) = ops.state;
        unary::<Flex, _>(ops.parents, ops.node, grads, |grad| {
            attention_weights_backward(&weights, divisor, &grad)
        });
    }
}

fn attention_weights_autodiff(
    scores: FloatTensor<Autodiff<Flex>>,
    divisor: f32,
    causal: bool,
) -> FloatTensor<Autodiff<Flex>> {
    let weights = attention_weights_forward(scores.primitive(), divisor, causal);
    match AttentionWeightsBackward
        .prepare::<NoCheckpointing>([scores.node()])
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => prep.finish((weights.clone(), divisor), weights),
        OpsKind::UnTracked(prep) => prep.finish(weights),
    }
}

/// Row by row: divide, hide the future keys (weight 0), subtract the row's maximum,
/// exponentiate, normalise.
fn attention_weights_forward(scores: &FlexTensor, divisor: f32, causal: bool) -> FlexTensor {
    let scores = scores.to_contiguous();
    let values = scores.as_slice::<f32>().expect("a contiguous f32 tensor");
    let shape = scores.layout().shape().clone();
    let (queries, keys) = (shape[2], shape[3]);
    let mut out = vec![0.0f32; values.len()];
    let rows = values.par_chunks(keys).zip(out.par_chunks_mut(keys));
    rows.enumerate()
        .with_min_len(rows_per_task(keys))
        .for_each(|(row, (input, output))| {
            // Query `i` sees keys `0..=i`; the rest stay 0.
            let visible = if causal { row % queries + 1 } else { keys };
            let (input, output) = (&input[..visible], &mut output[..visible]);
            for (o, &v) in output.iter_mut().zip(input) {
                *o = v / divisor;
            }
            let max = output.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
            let mut sum = 0.0f32;
            for o in output.iter_mut() {
                *o = (*o - max).exp();
                sum += *o;
            }
            for o in output.iter_mut() {
                *o /= sum;
            }
        });
    FlexTensor::from_data(TensorData::new(out, shape))
}

/// `dL/dscores = w (g - sum(g w)) / divisor` per row: the softmax's backward pass, then the
/// division's; hidden keys have `w = 0` and so get no gradient.
fn attention_weights_backward(weights: &FlexTensor, divisor: f32, grad: &FlexTensor) -> FlexTensor {
    let grad = grad.to_contiguous();
    let g = grad.as_slice::<f32>().expect("a contiguous f32 gradient");
    let w = weights.as_slice::<f32>().unwrap();
    let keys = *grad.layout().shape().last().unwrap();
    let mut out = vec![0.0f32; g.len()];
    out.par_chunks_mut(keys)
        .zip(g.par_chunks(keys))
        .zip(w.par_chunks(keys))
        .with_min_len(rows_per_task(keys))
        .for_each(|((out, g), w)| {
            let dot: f32 = g.iter().zip(w).map(|(g, w)| g * w).sum();
            for ((o, g), w) in out.iter_mut().zip(g).zip(w) {
                *o = w * (g - dot) / divisor;
            }
        });
    FlexTensor::from_data(TensorData::new(out, grad.layout().shape().clone()))
}

/// `f(0) + f(1) + ... + f(len - 1)` in eight running sums, which the compiler can keep in one
/// vector register (it may not reorder a single running sum).
fn lane_sum(len: usize, f: impl Fn(usize) -> f32) -> f32 {
    let mut lanes = [0.0f32; 8];
    let whole = len / 8 * 8;
    for start in (0..whole).step_by(8) {
        for (lane, sum) in lanes.iter_mut().enumerate() {
            *sum += f(start + lane);
        }
    }
    lanes.iter().sum::<f32>() + (whole..len).map(f).sum::<f32>()
}

/// The logistic function with the same rounding as flex's: `1 / (1 + e)` for `v >= 0` and
/// `e / (1 + e)` below, with `e = exp(-|v|)`. Written without a branch, since the signs of GELU's
/// inputs are random and a mispredicted branch per element cost more than the arithmetic.
fn sigmoid(v: f32) -> f32 {
    let e = (-v.abs()).exp();
    let numerator = if v >= 0.0 { 1.0 } else { e };
    numerator / (1.0 + e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::attention_weights_composed;
    use crate::mlp::gelu_tanh_composed;
    use burn::tensor::Device;

    /// Every 0.01 from -8 to 8.01, as a `[2, 801]` tensor.
    fn inputs(device: &Device) -> Tensor<2> {
        let values: Vec<f32> = (-800..=801).map(|i| i as f32 / 100.0).collect();
        Tensor::from_data(TensorData::new(values, [2, 801]), device)
    }

    fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
        t.try_to_vec_as::<f32>().unwrap()
    }

    #[test]
    fn fused_forward_equals_the_composed_form_bit_for_bit() {
        for device in [Device::flex(), Device::flex().autodiff()] {
            let x = inputs(&device);
            let fused = gelu_tanh(&x).expect("flex takes the fused path");
            assert_eq!(values(fused), values(gelu_tanh_composed(x)));
        }
    }

    #[test]
    fn fused_gradient_equals_the_composed_forms() {
        let device = Device::flex().autodiff();
        // Weights that differ per element, so a gradient mixed up between elements shows.
        let weights = inputs(&device).mul_scalar(0.3).sin();
        let grad = |fused: bool| {
            let x = inputs(&device).require_grad();
            let y = if fused {
                gelu_tanh(&x).unwrap()
            } else {
                gelu_tanh_composed(x.clone())
            };
            let grads = (y * weights.clone()).sum().backward();
            values(x.grad(&grads).unwrap())
        };
        let (fused, composed) = (grad(true), grad(false));
        assert_eq!(fused.len(), 1602);
        for (i, (a, b)) in fused.iter().zip(&composed).enumerate() {
            assert!(
                (a - b).abs() <= 1e-5 * (1.0 + b.abs()),
                "element {i}: {a} vs {b}"
            );
        }
    }

    #[test]
    fn other_backends_and_plain_flex_get_none() {
        #[allow(deprecated)]
        let device = Device::ndarray();
        assert!(gelu_tanh(&inputs(&device)).is_none());
        assert!(gelu_tanh(&inputs(&device.clone().autodiff())).is_none());
        let (x, gamma) = layer_norm_inputs(&device);
        assert!(layer_norm(&x, &gamma, 1e-5).is_none());
        assert!(attention_weights(&scores(&device), 2.0, true).is_none());
        // Plain flex: Burn's own fused LayerNorm and attention are used there.
        let (x, gamma) = layer_norm_inputs(&Device::flex());
        assert!(layer_norm(&x, &gamma, 1e-5).is_none());
        assert!(attention_weights(&scores(&Device::flex()), 2.0, true).is_none());
    }

    /// A `[3, 5, 64]` input whose rows have different means and spreads, and a `gamma` far from 1.
    fn layer_norm_inputs(device: &Device) -> (Tensor<3>, Tensor<1>) {
        let values: Vec<f32> = (0..960)
            .map(|i| (i as f32 * 0.37).sin() * (1.0 + (i / 64) as f32) + (i / 64) as f32)
            .collect();
        let gamma: Vec<f32> = (0..64).map(|i| 0.5 + (i as f32 * 0.9).cos()).collect();
        (
            Tensor::from_data(TensorData::new(values, [3, 5, 64]), device),
            Tensor::from_data(TensorData::new(gamma, [64]), device),
        )
    }

    fn close(fused: &[f32], burns: &[f32], tolerance: f32, what: &str) {
        assert_eq!(fused.len(), burns.len(), "{what}");
        for (i, (a, b)) in fused.iter().zip(burns).enumerate() {
            assert!(
                (a - b).abs() <= tolerance * (1.0 + b.abs()),
                "{what}, element {i}: {a} vs {b}"
            );
        }
    }

    #[test]
    fn fused_layer_norm_equals_burns() {
        use burn::nn::LayerNormConfig;
        let device = Device::flex().autodiff();
        let (x, gamma) = layer_norm_inputs(&device);
        let mut norm = LayerNormConfig::new(64).with_bias(false).init(&device);
        norm.gamma = burn::module::Param::from_tensor(gamma.clone());
        let fused = layer_norm(&x, &gamma, 1e-5).expect("flex takes the fused path");
        close(&values(fused), &values(norm.forward(x)), 1e-5, "output");
    }

    #[test]
    fn fused_layer_norm_gradients_equal_burns() {
        use burn::nn::LayerNormConfig;
        let device = Device::flex().autodiff();
        let weights = layer_norm_inputs(&device).0.mul_scalar(0.7).cos();
        let grads = |fused: bool| {
            let (x, gamma) = layer_norm_inputs(&device);
            let (x, gamma) = (x.require_grad(), gamma.require_grad());
            let y = if fused {
                layer_norm(&x, &gamma, 1e-5).unwrap()
            } else {
                let mut norm = LayerNormConfig::new(64).with_bias(false).init(&device);
                norm.gamma = burn::module::Param::from_tensor(gamma.clone());
                norm.forward(x.clone())
            };
            let grads = (y * weights.clone()).sum().backward();
            (
                values(x.grad(&grads).unwrap()),
                values(gamma.grad(&grads).unwrap()),
            )
        };
        let ((fused_x, fused_gamma), (burns_x, burns_gamma)) = (grads(true), grads(false));
        close(&fused_x, &burns_x, 1e-4, "gradient of x");
        close(&fused_gamma, &burns_gamma, 1e-4, "gradient of gamma");
    }

    /// `[2, 3, 6, 6]` scores spread wide enough that the softmax is far from uniform.
    fn scores(device: &Device) -> Tensor<4> {
        let values: Vec<f32> = (0..216).map(|i| (i as f32 * 1.3).sin() * 6.0).collect();
        Tensor::from_data(TensorData::new(values, [2, 3, 6, 6]), device)
    }

    #[test]
    fn fused_attention_weights_equal_the_composed_ones() {
        let device = Device::flex().autodiff();
        for causal in [true, false] {
            let fused = attention_weights(&scores(&device), 2.0, causal).unwrap();
            let composed = attention_weights_composed(scores(&device), 2.0, causal);
            close(&values(fused), &values(composed), 1e-6, "weights");
        }
    }

    #[test]
    fn fused_attention_weights_gradients_equal_the_composed_ones() {
        let device = Device::flex().autodiff();
        let upstream = scores(&device).mul_scalar(0.4).cos();
        for causal in [true, false] {
            let grad = |fused: bool| {
                let x = scores(&device).require_grad();
                let y = if fused {
                    attention_weights(&x, 2.0, causal).unwrap()
                } else {
                    attention_weights_composed(x.clone(), 2.0, causal)
                };
                let grads = (y * upstream.clone()).sum().backward();
                values(x.grad(&grads).unwrap())
            };
            close(&grad(true), &grad(false), 1e-5, "gradient of the scores");
        }
    }

    /// Inputs big enough to be split over threads: `[20, 2048]` for GELU and LayerNorm (3 tasks
    /// each), `[4, 4, 64, 64]` attention scores (4 tasks).
    fn outputs_and_gradients() -> Vec<Vec<f32>> {
        let device = Device::flex().autodiff();
        let wave = |n: usize, scale: f32| -> Vec<f32> {
            (0..n).map(|i| (i as f32 * 0.61).sin() * scale).collect()
        };
        let x = Tensor::<2>::from_data(TensorData::new(wave(40_960, 3.0), [20, 2048]), &device)
            .require_grad();
        let gamma = Tensor::<1>::from_data(TensorData::new(wave(2048, 1.0), [2048]), &device)
            .require_grad();
        let scores =
            Tensor::<4>::from_data(TensorData::new(wave(65_536, 5.0), [4, 4, 64, 64]), &device)
                .require_grad();
        let y = gelu_tanh(&x).unwrap();
        let z = layer_norm(&x, &gamma, 1e-5).unwrap();
        let w = attention_weights(&scores, 4.0, true).unwrap();
        let loss = (y.clone() * z.clone()).sum() + (w.clone() * scores.clone().cos()).sum();
        let grads = loss.backward();
        vec![
            values(y),
            values(z),
            values(w),
            values(x.grad(&grads).unwrap()),
            values(gamma.grad(&grads).unwrap()),
            values(scores.grad(&grads).unwrap()),
        ]
    }

    #[test]
    fn results_do_not_depend_on_the_number_of_threads() {
        let on = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            pool.install(outputs_and_gradients)
        };
        let (one, three) = (on(1), on(3));
        for (i, (a, b)) in one.iter().zip(&three).enumerate() {
            assert!(
                a == b,
                "output or gradient {i} differs between 1 and 3 threads"
            );
        }
    }
}
