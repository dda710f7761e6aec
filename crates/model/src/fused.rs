//! GELU (tanh form), LayerNorm and the whole of attention (heads split, scores, mask, softmax,
//! dropout, weighted values, heads merged) in one pass forward and one backward on the flex
//! backend.
//!
//! Composed of Burn's tensor operations ([`crate::mlp::gelu_tanh_composed`], Burn's
//! `LayerNorm`, the attention of [`crate::attention::SelfAttention`] on other backends), a GELU
//! is seven element-wise operations forward and about a dozen backward, a LayerNorm nine forward
//! and more backward, and attention about fifteen, copies for the head split and merge among
//! them; each is a pass over a whole activation with a fresh buffer and its own autodiff record.
//! On flex, the default backend, this module computes each function with one loop forward
//! (keeping what the backward pass needs) and one loop backward, recorded as a single autodiff
//! operation. Without autodiff (evaluation) the GELU and attention are replaced, and flex's own
//! LayerNorm kernel serves. Other backends get `None` and compose the functions. The products of
//! bias-free linear layers ([`project`]) are here too: one gemm call each way, without the
//! second allocation and copy of every output that flex's matmul makes.

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
use crate::simd::{add_scaled, dot, exp_nonpositive, lane_sum, widest};

/// The fewest elements one rayon task takes: the loops below use as many threads as Burn's own
/// operations would (RAYON_NUM_THREADS), but not for tensors so small that splitting costs more.
/// Each element or row is computed the same way whatever the split, so results do not depend on
/// the thread count.
const ELEMENTS_PER_TASK: usize = 1 << 14;

/// The fewest rows of `width` elements one rayon task takes.
fn rows_per_task(width: usize) -> usize {
    (ELEMENTS_PER_TASK / width.max(1)).max(1)
}

/// Whether `t` is an f32 tensor on flex with autodiff (the training path of this module).
pub(crate) fn is_autodiff_flex<const D: usize>(t: &Tensor<D>) -> bool {
    on_autodiff_flex(t).is_some()
}

/// `t`'s primitive when it is an f32 tensor on flex with autodiff.
fn on_autodiff_flex<const D: usize>(t: &Tensor<D>) -> Option<FloatTensor<Autodiff<Flex>>> {
    if t.dtype() != DType::F32 {
        return None;
    }
    t.clone().try_into_primitive::<Autodiff<Flex>>().ok()
}

/// `t`'s primitive when it is an f32 tensor on flex without autodiff.
fn on_plain_flex<const D: usize>(t: &Tensor<D>) -> Option<FlexTensor> {
    if t.dtype() != DType::F32 {
        return None;
    }
    t.clone().try_into_primitive::<Flex>().ok()
}

/// `gelu_tanh(x)` when `x` is an f32 tensor on flex (training or inference); `None` otherwise,
/// for the caller to compose.
pub fn gelu_tanh<const D: usize>(x: &Tensor<D>) -> Option<Tensor<D>> {
    if let Some(tracked) = on_autodiff_flex(x) {
        return Some(Tensor::from_primitive::<Autodiff<Flex>>(gelu_autodiff(
            tracked,
        )));
    }
    let plain = on_plain_flex(x)?;
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
/// the order of operations of the composed form.
#[inline(always)]
fn gelu_factor(v: f32) -> f32 {
    sigmoid((v + v * v * v * CUBIC) * TWO_SQRT_2_OVER_PI)
}

/// GELU without autodiff: the output only.
fn gelu_inference(x: &FlexTensor) -> FlexTensor {
    let x = x.to_contiguous();
    let values = x.as_slice::<f32>().expect("a contiguous f32 tensor");
    let mut y = vec![0.0f32; values.len()];
    y.par_chunks_mut(ELEMENTS_PER_TASK)
        .zip(values.par_chunks(ELEMENTS_PER_TASK))
        .for_each(|(y, x)| gelu_values(x, y));
    FlexTensor::from_data(TensorData::new(y, x.layout().shape().clone()))
}

widest! {
    /// `y = gelu(x)`.
    fn gelu_values(x: &[f32], y: &mut [f32]) {
        for (y, &v) in y.iter_mut().zip(x) {
            *y = v * gelu_factor(v);
        }
    }
}

/// GELU for training: returns the output, `x` made contiguous and the factor `s`.
fn gelu_forward(x: &FlexTensor) -> (FlexTensor, FlexTensor, FlexTensor) {
    let x = x.to_contiguous();
    let values = x.as_slice::<f32>().expect("a contiguous f32 tensor");
    let mut y = vec![0.0f32; values.len()];
    let mut s = vec![0.0f32; values.len()];
    y.par_chunks_mut(ELEMENTS_PER_TASK)
        .zip(s.par_chunks_mut(ELEMENTS_PER_TASK))
        .zip(values.par_chunks(ELEMENTS_PER_TASK))
        .for_each(|((y, s), x)| gelu_values_and_factors(x, y, s));
    let shape = x.layout().shape().clone();
    (
        FlexTensor::from_data(TensorData::new(y, shape.clone())),
        x,
        FlexTensor::from_data(TensorData::new(s, shape)),
    )
}

widest! {
    /// `s = gelu_factor(x)` and `y = x s`.
    fn gelu_values_and_factors(x: &[f32], y: &mut [f32], s: &mut [f32]) {
        for ((y, s), &v) in y.iter_mut().zip(s.iter_mut()).zip(x) {
            *s = gelu_factor(v);
            *y = v * *s;
        }
    }
}

/// `dL/dx = g (s + x s (1 - s) 2 sqrt(2/pi) (1 + 3 * 0.044715 x^2))`.
fn gelu_backward(x: &FlexTensor, s: &FlexTensor, grad: &FlexTensor) -> FlexTensor {
    let grad = grad.to_contiguous();
    let (x, s) = (x.as_slice::<f32>().unwrap(), s.as_slice::<f32>().unwrap());
    let g = grad.as_slice::<f32>().expect("a contiguous f32 gradient");
    let mut out = vec![0.0f32; g.len()];
    out.par_chunks_mut(ELEMENTS_PER_TASK)
        .zip(x.par_chunks(ELEMENTS_PER_TASK))
        .zip(s.par_chunks(ELEMENTS_PER_TASK))
        .zip(g.par_chunks(ELEMENTS_PER_TASK))
        .for_each(|(((out, x), s), g)| gelu_gradient(x, s, g, out));
    FlexTensor::from_data(TensorData::new(out, grad.layout().shape().clone()))
}

widest! {
    /// `out = dL/dx` from `x`, the factors `s` and the output's gradient `g`.
    fn gelu_gradient(x: &[f32], s: &[f32], g: &[f32], out: &mut [f32]) {
        for (((out, &x), &s), &g) in out.iter_mut().zip(x).zip(s).zip(g) {
            let slope = TWO_SQRT_2_OVER_PI * (1.0 + 3.0 * CUBIC * x * x);
            *out = g * (s + x * s * (1.0 - s) * slope);
        }
    }
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
    let task = rows_per_task(width);
    y.par_chunks_mut(task * width)
        .zip(normalized.par_chunks_mut(task * width))
        .zip(values.par_chunks(task * width))
        .zip(denominators.par_chunks_mut(task))
        .for_each(|(((y, normalized), x), denominators)| {
            layer_norm_rows(x, gamma, epsilon, y, normalized, denominators)
        });
    let shape = x.layout().shape().clone();
    (
        FlexTensor::from_data(TensorData::new(y, shape.clone())),
        FlexTensor::from_data(TensorData::new(normalized, shape)),
        FlexTensor::from_data(TensorData::new(denominators, [rows])),
    )
}

widest! {
    /// [`layer_norm_forward`] for the rows of `x`, writing `y`, `normalized` and `denominators`.
    fn layer_norm_rows(
        x: &[f32],
        gamma: &[f32],
        epsilon: f32,
        y: &mut [f32],
        normalized: &mut [f32],
        denominators: &mut [f32],
    ) {
        let width = gamma.len();
        let rows = x
            .chunks_exact(width)
            .zip(y.chunks_exact_mut(width))
            .zip(normalized.chunks_exact_mut(width));
        for (((row, y), normalized), denominator) in rows.zip(denominators) {
            let mean = lane_sum(row, row, |v, _| v) / width as f32;
            let variance = lane_sum(row, row, |v, _| (v - mean) * (v - mean)) / width as f32;
            *denominator = (variance + epsilon).sqrt();
            for (((y, n), &v), &g) in y.iter_mut().zip(normalized.iter_mut()).zip(row).zip(gamma) {
                *n = (v - mean) / *denominator;
                *y = *n * g;
            }
        }
    }
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
    let task = rows_per_task(width);
    out.par_chunks_mut(task * width)
        .zip(g.par_chunks(task * width))
        .zip(normalized.par_chunks(task * width))
        .zip(denominators.par_chunks(task))
        .for_each(|(((out, g), n), denominators)| {
            layer_norm_input_grad_rows(g, n, denominators, gamma, out)
        });
    FlexTensor::from_data(TensorData::new(out, grad.layout().shape().clone()))
}

widest! {
    /// [`layer_norm_input_grad`] for the rows of `g`, writing `out`.
    fn layer_norm_input_grad_rows(
        g: &[f32],
        normalized: &[f32],
        denominators: &[f32],
        gamma: &[f32],
        out: &mut [f32],
    ) {
        let width = gamma.len();
        let mut d = vec![0.0f32; width];
        let rows = g
            .chunks_exact(width)
            .zip(normalized.chunks_exact(width))
            .zip(out.chunks_exact_mut(width));
        for (((g, n), out), denominator) in rows.zip(denominators) {
            for ((d, &g), &w) in d.iter_mut().zip(g).zip(gamma) {
                *d = g * w;
            }
            let mean_d = lane_sum(&d, &d, |d, _| d) / width as f32;
            let mean_dn = lane_sum(&d, n, |d, n| d * n) / width as f32;
            for ((o, &d), &n) in out.iter_mut().zip(&d).zip(n) {
                *o = (d - mean_d - n * mean_dn) / denominator;
            }
        }
    }
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

/// `x W` for `x` `[.., d_in]` and a weight `W` `[d_in, d_out]`, both f32 on flex, with autodiff
/// (training) or without (evaluation); `None` otherwise. Burn's `linear` computes the same
/// product through flex's matmul, whose every output is a zero-filled buffer that is then
/// allocated again at 16-byte alignment and copied (about 13% of a quick step,
/// docs/performance.md); here the gemm crate (the one flex calls) writes into a vector allocated
/// once and never zero-filled, forward and in both backward products.
pub fn project<const D: usize>(x: &Tensor<D>, weight: &Tensor<2>) -> Option<Tensor<D>> {
    if let (Some(x), Some(weight)) = (on_plain_flex(x), on_plain_flex(weight)) {
        let y = project_forward(&x.to_contiguous(), &weight.to_contiguous());
        return Some(Tensor::from_primitive::<Flex>(y));
    }
    let (x, weight) = (on_autodiff_flex(x)?, on_autodiff_flex(weight)?);
    let inputs = x.primitive().to_contiguous();
    let weights = weight.primitive().to_contiguous();
    let y = project_forward(&inputs, &weights);
    let y = match ProjectBackward
        .prepare::<NoCheckpointing>([x.node(), weight.node()])
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => prep.finish((inputs, weights), y),
        OpsKind::UnTracked(prep) => prep.finish(y),
    };
    Some(Tensor::from_primitive::<Autodiff<Flex>>(y))
}

/// `x W` for contiguous `x` `[.., d_in]` and `W` `[d_in, d_out]`.
fn project_forward(inputs: &FlexTensor, weights: &FlexTensor) -> FlexTensor {
    let mut shape = inputs.layout().shape().clone();
    let [d_in, d_out] = [weights.layout().shape()[0], weights.layout().shape()[1]];
    let last = shape.num_dims() - 1;
    assert_eq!(
        shape[last], d_in,
        "x's last dimension is the weight's first"
    );
    let rows = shape.num_elements() / d_in;
    let y = product(
        Matrix::rows(inputs, rows, d_in),
        Matrix::rows(weights, d_in, d_out),
    );
    shape[last] = d_out;
    FlexTensor::from_data(TensorData::new(y, shape))
}

#[derive(Debug)]
struct ProjectBackward;

impl Backward<Flex, 2> for ProjectBackward {
    /// `x` and `W`, contiguous.
    type State = (FlexTensor, FlexTensor);

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let (inputs, weights) = ops.state;
        let [d_in, d_out] = [weights.layout().shape()[0], weights.layout().shape()[1]];
        let rows = inputs.layout().num_elements() / d_in;
        binary::<Flex, _, _>(
            ops.parents,
            ops.node,
            grads,
            // dL/dx = g W^T, in x's shape.
            |grad| {
                let grad = grad.to_contiguous();
                let dx = product(
                    Matrix::rows(&grad, rows, d_out),
                    Matrix::rows(&weights, d_in, d_out).transposed(),
                );
                FlexTensor::from_data(TensorData::new(dx, inputs.layout().shape().clone()))
            },
            // dL/dW = x^T g, summed over every row.
            |grad| {
                let grad = grad.to_contiguous();
                let dw = product(
                    Matrix::rows(&inputs, rows, d_in).transposed(),
                    Matrix::rows(&grad, rows, d_out),
                );
                FlexTensor::from_data(TensorData::new(dw, [d_in, d_out]))
            },
        );
    }
}

/// A matrix view of a contiguous f32 tensor: `rows x cols`, with the step between rows and
/// between columns (a transposed view swaps them).
#[derive(Clone, Copy)]
struct Matrix<'a> {
    values: &'a [f32],
    rows: usize,
    cols: usize,
    row_step: isize,
    col_step: isize,
}

impl<'a> Matrix<'a> {
    /// `t` read as `rows x cols`, row after row.
    fn rows(t: &'a FlexTensor, rows: usize, cols: usize) -> Self {
        let values = t.as_slice::<f32>().expect("a contiguous f32 tensor");
        assert_eq!(values.len(), rows * cols, "a {rows} x {cols} matrix");
        Matrix {
            values,
            rows,
            cols,
            row_step: cols as isize,
            col_step: 1,
        }
    }

    fn transposed(self) -> Self {
        Matrix {
            rows: self.cols,
            cols: self.rows,
            row_step: self.col_step,
            col_step: self.row_step,
            ..self
        }
    }
}

/// `a b`, row after row, by the gemm crate: on all of rayon's threads when the product is large
/// (flex's own threshold, 192^3 multiply-adds), else on this one.
fn product(a: Matrix, b: Matrix) -> Vec<f32> {
    assert_eq!(a.cols, b.rows, "inner dimensions");
    let (m, k, n) = (a.rows, a.cols, b.cols);
    if k == 0 {
        return vec![0.0f32; m * n];
    }
    // Not zero-filled: gemm writes every entry without reading it (`read_dst` false below).
    let mut out = Vec::<f32>::with_capacity(m * n);
    let parallelism = if m * n * k >= 192 * 192 * 192 {
        gemm::Parallelism::Rayon(0)
    } else {
        gemm::Parallelism::None
    };
    // SAFETY: `out` has room for m x n values, written with row step n, every one of them (k > 0,
    // `read_dst` false: gemm stores `beta a b` without reading `out` first), so all are
    // initialised before `set_len`; `a` and `b` are slices holding m x k and k x n values at
    // their steps (checked when the views were made).
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            out.as_mut_ptr(),
            1,
            n as isize,
            false,
            a.values.as_ptr(),
            a.col_step,
            a.row_step,
            b.values.as_ptr(),
            b.col_step,
            b.row_step,
            0.0,
            1.0,
            false,
            false,
            false,
            parallelism,
        );
        out.set_len(m * n);
    }
    out
}

/// Multi-head attention from the QKV projection's output when it is an f32 tensor on flex with
/// autodiff; `None` otherwise. `qkv` is `[batch, time, 3 x width]` (queries, keys, values side by
/// side, each split into `n_head` heads); the result is `[batch, time, width]`, the heads'
/// outputs side by side, ready for the output projection. `dropout` acts on the attention weights
/// as [`crate::dropout::dropout`] would (same condition, same mask).
///
/// Composed, this is a chunk into three, a copy per head split, two batched matrix products with
/// their transposes, the weights, and a copy to merge the heads, forward; twice as many products
/// and a zero-filled buffer per third backward. Here it is one loop over the batch forward and
/// one backward, with the scores and weighted sums computed directly from `qkv`.
pub fn attention(
    qkv: &Tensor<3>,
    n_head: usize,
    causal: bool,
    dropout: &burn::nn::Dropout,
) -> Option<Tensor<3>> {
    let tracked = on_autodiff_flex(qkv)?;
    let heads = Heads::of(qkv, n_head, causal);
    let [batch, time, _] = qkv.dims();
    let shape = [batch, n_head, time, time].into();
    let mask = crate::dropout::layer_mask(dropout, shape, &qkv.device());
    Some(attention_with_mask(tracked, heads, mask))
}

/// [`attention`] without autodiff (evaluation, no dropout) when `qkv` is an f32 tensor on plain
/// flex; `None` otherwise. It replaces flex's own attention kernel, which needs the heads split
/// and merged by copies around it (10,000 test pairs teacher-forced: about 10% faster, measured
/// in docs/performance.md).
pub fn attention_inference(qkv: &Tensor<3>, n_head: usize, causal: bool) -> Option<Tensor<3>> {
    let plain = on_plain_flex(qkv)?;
    let (y, _, _) = attention_forward(&plain, Heads::of(qkv, n_head, causal), None);
    Some(Tensor::from_primitive::<Flex>(y))
}

/// [`attention`] with the dropout mask given: `[batch, heads, time, time]`, each entry 0 or
/// `1 / keep`, multiplied into the attention weights.
fn attention_with_mask(
    qkv: FloatTensor<Autodiff<Flex>>,
    heads: Heads,
    mask: Option<Tensor<4>>,
) -> Tensor<3> {
    let mask = mask.map(|m| {
        let m = on_autodiff_flex(&m).expect("the mask is made on qkv's device");
        m.primitive().to_contiguous()
    });
    let (y, qkv_contiguous, weights) = attention_forward(qkv.primitive(), heads, mask.as_ref());
    let y = match AttentionBackward
        .prepare::<NoCheckpointing>([qkv.node()])
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => prep.finish((qkv_contiguous, weights, mask, heads), y),
        OpsKind::UnTracked(prep) => prep.finish(y),
    };
    Tensor::from_primitive::<Autodiff<Flex>>(y)
}

/// The geometry of one attention layer's input.
#[derive(Debug, Clone, Copy)]
struct Heads {
    time: usize,
    /// The model's width: each of queries, keys and values.
    width: usize,
    n_head: usize,
    causal: bool,
}

impl Heads {
    /// The geometry of a `[batch, time, 3 x width]` QKV projection output.
    fn of(qkv: &Tensor<3>, n_head: usize, causal: bool) -> Self {
        let [_, time, three_width] = qkv.dims();
        Self {
            time,
            width: three_width / 3,
            n_head,
            causal,
        }
    }

    #[inline(always)]
    fn head_dim(&self) -> usize {
        self.width / self.n_head
    }

    /// How many keys query `i` sees.
    #[inline(always)]
    fn visible(&self, query: usize) -> usize {
        if self.causal { query + 1 } else { self.time }
    }

    /// `head`'s keys or values (`part` 1 or 2) of one batch row, transposed into `out`:
    /// `[head_dim, time]`, each dimension's values along the positions.
    #[inline(always)]
    fn transpose(&self, x: &[f32], part: usize, head: usize, out: &mut [f32]) {
        for position in 0..self.time {
            for (d, &v) in x[self.range(part, head, position)].iter().enumerate() {
                out[d * self.time + position] = v;
            }
        }
    }

    /// Query, key or value (`part` 0, 1, 2) of `head` at `position`, within one batch row's
    /// `[time, 3 x width]` slice.
    #[inline(always)]
    fn range(&self, part: usize, head: usize, position: usize) -> std::ops::Range<usize> {
        let start = position * 3 * self.width + part * self.width + head * self.head_dim();
        start..start + self.head_dim()
    }
}

const QUERY: usize = 0;
const KEY: usize = 1;
const VALUE: usize = 2;

#[derive(Debug)]
struct AttentionBackward;

impl Backward<Flex, 1> for AttentionBackward {
    /// `qkv` (contiguous), the attention weights before dropout, the dropout mask, the geometry.
    type State = (FlexTensor, FlexTensor, Option<FlexTensor>, Heads);

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let (qkv, weights, mask, heads) = ops.state;
        unary::<Flex, _>(ops.parents, ops.node, grads, |grad| {
            attention_backward(&qkv, &weights, mask.as_ref(), heads, &grad)
        });
    }
}

/// Returns the output, `qkv` made contiguous, and the weights `softmax(q k^T / sqrt(head_dim))`
/// (`[batch, heads, time, time]`, 0 for hidden keys) before dropout.
fn attention_forward(
    qkv: &FlexTensor,
    heads: Heads,
    mask: Option<&FlexTensor>,
) -> (FlexTensor, FlexTensor, FlexTensor) {
    let qkv = qkv.to_contiguous();
    let x = qkv.as_slice::<f32>().expect("a contiguous f32 tensor");
    let mask = mask.map(|m| m.as_slice::<f32>().expect("a contiguous f32 mask"));
    let Heads {
        time,
        width,
        n_head,
        ..
    } = heads;
    let batch = x.len() / (time * 3 * width);
    let per_row = n_head * time * time;
    let mut y = vec![0.0f32; batch * time * width];
    let mut weights = vec![0.0f32; batch * per_row];
    y.par_chunks_mut(time * width)
        .zip(weights.par_chunks_mut(per_row))
        .zip(x.par_chunks(time * 3 * width))
        .enumerate()
        .with_min_len(rows_per_task(time * 3 * width))
        .for_each(|(b, ((y, weights), x))| {
            let mask = mask.map(|m| &m[b * per_row..(b + 1) * per_row]);
            attention_forward_row(heads, x, mask, y, weights)
        });
    (
        FlexTensor::from_data(TensorData::new(y, [batch, time, width])),
        qkv,
        FlexTensor::from_data(TensorData::new(weights, [batch, n_head, time, time])),
    )
}

widest! {
    /// [`attention_forward`] for one batch row: its `qkv` `x` (`[time, 3 x width]`) and dropout mask
    /// (`[heads, time, time]`), writing its output `y` and weights.
    fn attention_forward_row(
        heads: Heads,
        x: &[f32],
        mask: Option<&[f32]>,
        y: &mut [f32],
        weights: &mut [f32],
    ) {
        let Heads {
            time,
            width,
            n_head,
            ..
        } = heads;
        let divisor = (heads.head_dim() as f32).sqrt();
        let mut keys = vec![0.0f32; heads.head_dim() * time];
        for head in 0..n_head {
            heads.transpose(x, KEY, head, &mut keys);
            for i in 0..time {
                let start = (head * time + i) * time;
                let row = &mut weights[start..start + heads.visible(i)];
                // The scores `q_i . k_j` for every visible key at once, one dimension at a time:
                // loops along the keys, which the compiler vectorises.
                let query = &x[heads.range(QUERY, head, i)];
                for (&q, keys) in query.iter().zip(keys.chunks_exact(time)) {
                    add_scaled(row, q, keys);
                }
                for score in row.iter_mut() {
                    *score /= divisor;
                }
                softmax(row);
                let out = &mut y[i * width + head * heads.head_dim()..][..heads.head_dim()];
                for (j, &w) in row.iter().enumerate() {
                    let w = mask.map_or(w, |m| w * m[start + j]);
                    add_scaled(out, w, &x[heads.range(VALUE, head, j)]);
                }
            }
        }
    }
}

/// The gradient with respect to `qkv`, from the output's `g`: for each query `i` and visible key
/// `j`, with `w` the weights, `m` the dropout mask and `s_ij = q_i . k_j / divisor` the scores,
/// - `dL/dv_j += w_ij m_ij g_i` and `dL/dw_ij = (g_i . v_j) m_ij`;
/// - `dL/ds_ij = w_ij (dL/dw_ij - sum over j of w_ij dL/dw_ij)` (the softmax);
/// - `dL/dq_i += dL/ds_ij k_j / divisor` and `dL/dk_j += dL/ds_ij q_i / divisor`.
fn attention_backward(
    qkv: &FlexTensor,
    weights: &FlexTensor,
    mask: Option<&FlexTensor>,
    heads: Heads,
    grad: &FlexTensor,
) -> FlexTensor {
    let grad = grad.to_contiguous();
    let g = grad.as_slice::<f32>().expect("a contiguous f32 gradient");
    let x = qkv.as_slice::<f32>().unwrap();
    let weights = weights.as_slice::<f32>().unwrap();
    let mask = mask.map(|m| m.as_slice::<f32>().unwrap());
    let Heads {
        time,
        width,
        n_head,
        ..
    } = heads;
    let per_row = n_head * time * time;
    let mut out = vec![0.0f32; x.len()];
    out.par_chunks_mut(time * 3 * width)
        .zip(g.par_chunks(time * width))
        .zip(x.par_chunks(time * 3 * width))
        .zip(weights.par_chunks(per_row))
        .enumerate()
        .with_min_len(rows_per_task(time * 3 * width))
        .for_each(|(b, (((dx, g), x), weights))| {
            let mask = mask.map(|m| &m[b * per_row..(b + 1) * per_row]);
            attention_backward_row(heads, x, weights, mask, g, dx)
        });
    FlexTensor::from_data(TensorData::new(out, qkv.layout().shape().clone()))
}

widest! {
    /// [`attention_backward`] for one batch row: its `qkv` `x`, weights, dropout mask and output
    /// gradient `g`, writing its part `dx` of the gradient.
    fn attention_backward_row(
        heads: Heads,
        x: &[f32],
        weights: &[f32],
        mask: Option<&[f32]>,
        g: &[f32],
        dx: &mut [f32],
    ) {
        let Heads {
            time,
            width,
            n_head,
            ..
        } = heads;
        let head_dim = heads.head_dim();
        let divisor = (head_dim as f32).sqrt();
        let mut d_weights = vec![0.0f32; time];
        let mut d_query = vec![0.0f32; head_dim];
        let mut values = vec![0.0f32; head_dim * time];
        for head in 0..n_head {
            heads.transpose(x, VALUE, head, &mut values);
            for i in 0..time {
                let start = (head * time + i) * time;
                let row = &weights[start..start + heads.visible(i)];
                let g = &g[i * width + head * head_dim..][..head_dim];
                // `g_i . v_j` for every visible key, one dimension at a time (as the scores).
                let d_weights = &mut d_weights[..row.len()];
                d_weights.fill(0.0);
                for (&g, values) in g.iter().zip(values.chunks_exact(time)) {
                    add_scaled(d_weights, g, values);
                }
                for (j, (&w, dw)) in row.iter().zip(d_weights.iter_mut()).enumerate() {
                    let m = mask.map_or(1.0, |m| m[start + j]);
                    *dw *= m;
                    add_scaled(&mut dx[heads.range(VALUE, head, j)], w * m, g);
                }
                let d_weights = &*d_weights;
                let through = dot(row, d_weights);
                d_query.fill(0.0);
                let query = &x[heads.range(QUERY, head, i)];
                for (j, (&w, &dw)) in row.iter().zip(d_weights).enumerate() {
                    let d_score = w * (dw - through) / divisor;
                    add_scaled(&mut d_query, d_score, &x[heads.range(KEY, head, j)]);
                    add_scaled(&mut dx[heads.range(KEY, head, j)], d_score, query);
                }
                add_scaled(&mut dx[heads.range(QUERY, head, i)], 1.0, &d_query);
            }
        }
    }
}

/// In place: subtract the maximum, exponentiate, normalise.
#[inline(always)]
fn softmax(row: &mut [f32]) {
    let max = row.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
    for v in row.iter_mut() {
        *v = exp_nonpositive(*v - max);
    }
    let sum = lane_sum(row, row, |v, _| v);
    for v in row.iter_mut() {
        *v /= sum;
    }
}

/// The logistic function in flex's form: `1 / (1 + e)` for `v >= 0` and `e / (1 + e)` below,
/// with `e = exp(-|v|)` (from [`exp_nonpositive`], so within a few units in the last place of
/// flex's). Written without a branch, since the signs of GELU's inputs are random and a
/// mispredicted branch per element cost more than the arithmetic.
#[inline(always)]
fn sigmoid(v: f32) -> f32 {
    let e = exp_nonpositive(-v.abs());
    let numerator = if v >= 0.0 { 1.0 } else { e };
    numerator / (1.0 + e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::attention_weights;
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
    fn fused_forward_equals_the_composed_form() {
        for device in [Device::flex(), Device::flex().autodiff()] {
            let x = inputs(&device);
            let fused = values(gelu_tanh(&x).expect("flex takes the fused path"));
            let composed = values(gelu_tanh_composed(x));
            // The same formula; only the exponential's rounding differs (a few units in the last
            // place of the sigmoid).
            for (i, (a, b)) in fused.iter().zip(&composed).enumerate() {
                assert!(
                    (a - b).abs() <= 1e-6 * (1.0 + b.abs()),
                    "element {i}: {a} vs {b}"
                );
            }
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
    fn the_fused_product_and_its_gradients_equal_burns_linear() {
        let device = Device::flex().autodiff();
        let wave = |n: usize, f: f32| (0..n).map(|i| (i as f32 * f).sin()).collect::<Vec<f32>>();
        let x =
            || Tensor::<3>::from_data(TensorData::new(wave(5 * 7 * 24, 0.37), [5, 7, 24]), &device);
        // A weight used as stored, and one used transposed (as the tied output head uses its
        // embedding): a non-contiguous view.
        let stored =
            || Tensor::<2>::from_data(TensorData::new(wave(24 * 40, 0.91), [24, 40]), &device);
        let transposed = || {
            Tensor::<2>::from_data(TensorData::new(wave(40 * 24, 0.53), [40, 24]), &device)
                .transpose()
        };
        // Output weights that differ per element, so a gradient mixed up between entries shows.
        let weights =
            Tensor::<3>::from_data(TensorData::new(wave(5 * 7 * 40, 1.3), [5, 7, 40]), &device);
        for weight in [&stored as &dyn Fn() -> Tensor<2>, &transposed] {
            let run = |fused: bool| {
                let (x, w) = (x().require_grad(), weight().require_grad());
                let y = if fused {
                    project(&x, &w).expect("autodiff flex takes the fused path")
                } else {
                    burn::tensor::module::linear(x.clone(), w.clone(), None)
                };
                let grads = (y.clone() * weights.clone()).sum().backward();
                [
                    values(y),
                    values(x.grad(&grads).unwrap()),
                    values(w.grad(&grads).unwrap()),
                ]
            };
            let (fused, burns) = (run(true), run(false));
            for (what, (a, b)) in ["output", "dx", "dW"].iter().zip(fused.iter().zip(&burns)) {
                assert_eq!(a.len(), b.len(), "{what}");
                close(a, b, 1e-5, what);
            }
        }
        assert!(project(&x().cast(DType::F64), &stored()).is_none());
        // Without autodiff (evaluation): the same product.
        let plain = Device::flex();
        let x = Tensor::<3>::from_data(x().into_data(), &plain);
        let w = Tensor::<2>::from_data(stored().into_data(), &plain);
        let fused = values(project(&x, &w).expect("plain flex takes the fused path"));
        let burns = values(burn::tensor::module::linear(x, w, None));
        close(&fused, &burns, 1e-5, "without autodiff");
    }

    #[test]
    fn other_element_types_and_the_other_flex_mode_get_none() {
        // Other backends fail the same downcast as another mode of flex does; the backend tests
        // (`just test-wgpu`, in CI) run ndarray and wgpu through the model and these functions.
        let (flex, training) = (Device::flex(), Device::flex().autodiff());
        let f64 = |t: Tensor<2>| t.cast(DType::F64);
        assert!(gelu_tanh(&f64(inputs(&flex))).is_none());
        assert!(gelu_tanh(&f64(inputs(&training))).is_none());
        let (x, gamma) = layer_norm_inputs(&training);
        assert!(layer_norm(&x.cast(DType::F64), &gamma, 1e-5).is_none());
        let no_dropout = burn::nn::DropoutConfig::new(0.0).init();
        assert!(attention(&qkv(&flex), 2, true, &no_dropout).is_none());
        assert!(attention(&qkv(&training).cast(DType::F64), 2, true, &no_dropout).is_none());
        assert!(attention_inference(&qkv(&training), 2, true).is_none());
        assert!(attention_inference(&qkv(&flex).cast(DType::F64), 2, true).is_none());
        // Plain flex: Burn's own fused LayerNorm is used there.
        let (x, gamma) = layer_norm_inputs(&flex);
        assert!(layer_norm(&x, &gamma, 1e-5).is_none());
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

    /// A `[2, 6, 3 x 8]` QKV projection output (two heads of 4), spread wide enough that the
    /// attention weights are far from uniform.
    fn qkv(device: &Device) -> Tensor<3> {
        let values: Vec<f32> = (0..288).map(|i| (i as f32 * 0.77).sin() * 2.5).collect();
        Tensor::from_data(TensorData::new(values, [2, 6, 24]), device)
    }

    fn heads(causal: bool) -> Heads {
        Heads {
            time: 6,
            width: 8,
            n_head: 2,
            causal,
        }
    }

    /// A dropout mask for [`qkv`]'s weights: about a third of the entries 0, the rest 1.5.
    fn mask(device: &Device) -> Tensor<4> {
        let values: Vec<f32> = (0..144)
            .map(|i| if i * 7 % 3 == 0 { 0.0 } else { 1.5 })
            .collect();
        Tensor::from_data(TensorData::new(values, [2, 2, 6, 6]), device)
    }

    /// The same attention by tensor operations, as the model computes it on other backends.
    fn composed_attention(qkv: Tensor<3>, heads: Heads, mask: Option<Tensor<4>>) -> Tensor<3> {
        let [batch, time, _] = qkv.dims();
        let split = |t: Tensor<3>| {
            t.reshape([batch, time, heads.n_head, heads.head_dim()])
                .swap_dims(1, 2)
        };
        let mut parts = qkv.chunk(3, 2).into_iter().map(split);
        let (q, k, v) = (
            parts.next().unwrap(),
            parts.next().unwrap(),
            parts.next().unwrap(),
        );
        let divisor = (heads.head_dim() as f32).sqrt();
        let mut weights = attention_weights(q.matmul(k.swap_dims(2, 3)), divisor, heads.causal);
        if let Some(mask) = mask {
            weights = weights * mask;
        }
        weights
            .matmul(v)
            .swap_dims(1, 2)
            .reshape([batch, time, heads.width])
    }

    fn fused_attention(qkv: &Tensor<3>, heads: Heads, mask: Option<Tensor<4>>) -> Tensor<3> {
        attention_with_mask(on_autodiff_flex(qkv).unwrap(), heads, mask)
    }

    #[test]
    fn fused_attention_equals_the_composed_one_with_and_without_dropout() {
        let device = Device::flex().autodiff();
        for causal in [true, false] {
            for mask in [None, Some(mask(&device))] {
                let what = format!("causal {causal}, mask {}", mask.is_some());
                let fused = fused_attention(&qkv(&device), heads(causal), mask.clone());
                let composed = composed_attention(qkv(&device), heads(causal), mask);
                close(&values(fused), &values(composed), 1e-5, &what);
            }
        }
    }

    #[test]
    fn fused_attention_gradients_equal_the_composed_ones() {
        let device = Device::flex().autodiff();
        let upstream = qkv(&device).narrow(2, 0, 8).mul_scalar(0.9).cos();
        for causal in [true, false] {
            for mask in [None, Some(mask(&device))] {
                let grad = |fused: bool| {
                    let x = qkv(&device).require_grad();
                    let y = if fused {
                        fused_attention(&x, heads(causal), mask.clone())
                    } else {
                        composed_attention(x.clone(), heads(causal), mask.clone())
                    };
                    let grads = (y * upstream.clone()).sum().backward();
                    values(x.grad(&grads).unwrap())
                };
                let what = format!("gradient of qkv, causal {causal}, mask {}", mask.is_some());
                close(&grad(true), &grad(false), 1e-5, &what);
            }
        }
    }

    #[test]
    fn fused_inference_attention_equals_the_composed_one() {
        let device = Device::flex();
        for causal in [true, false] {
            let fused = attention_inference(&qkv(&device), 2, causal).unwrap();
            let composed = composed_attention(qkv(&device), heads(causal), None);
            close(
                &values(fused),
                &values(composed),
                1e-5,
                &format!("causal {causal}"),
            );
        }
    }

    #[test]
    fn attention_dropout_acts_only_in_training() {
        use burn::module::Module;
        use burn::nn::DropoutConfig;
        let device = Device::flex().autodiff();
        device.seed(1);
        let plain = values(fused_attention(&qkv(&device), heads(true), None));
        let dropped = DropoutConfig::new(0.5).init();
        let with = values(attention(&qkv(&device), 2, true, &dropped).unwrap());
        assert_ne!(with, plain, "dropout 0.5 changes the output");
        let none = DropoutConfig::new(0.0).init();
        assert_eq!(
            values(attention(&qkv(&device), 2, true, &none).unwrap()),
            plain
        );
        let frozen = dropped.freeze();
        assert_eq!(
            values(attention(&qkv(&device), 2, true, &frozen).unwrap()),
            plain
        );
    }

    /// Inputs big enough to be split over threads: `[20, 2048]` for GELU and LayerNorm (3 tasks
    /// each), a `[16, 32, 3 x 64]` QKV output (up to 8 tasks) with a dropout mask, and a product
    /// with a `[2048, 256]` weight.
    fn outputs_and_gradients() -> Vec<Vec<f32>> {
        let device = Device::flex().autodiff();
        let wave = |n: usize, scale: f32| -> Vec<f32> {
            (0..n).map(|i| (i as f32 * 0.61).sin() * scale).collect()
        };
        let x = Tensor::<2>::from_data(TensorData::new(wave(40_960, 3.0), [20, 2048]), &device)
            .require_grad();
        let gamma = Tensor::<1>::from_data(TensorData::new(wave(2048, 1.0), [2048]), &device)
            .require_grad();
        let qkv =
            Tensor::<3>::from_data(TensorData::new(wave(98_304, 2.0), [16, 32, 192]), &device)
                .require_grad();
        let mask =
            Tensor::<4>::from_data(TensorData::new(wave(65_536, 1.0), [16, 4, 32, 32]), &device)
                .greater_elem(0.0)
                .float()
                .mul_scalar(2.0);
        let heads = Heads {
            time: 32,
            width: 64,
            n_head: 4,
            causal: true,
        };
        // 20 x 2048 x 256 multiply-adds per product: past the threshold for several threads.
        let w = Tensor::<2>::from_data(TensorData::new(wave(524_288, 0.5), [2048, 256]), &device)
            .require_grad();
        let y = gelu_tanh(&x).unwrap();
        let z = layer_norm(&x, &gamma, 1e-5).unwrap();
        let a = fused_attention(&qkv, heads, Some(mask));
        let p = project(&x, &w).unwrap();
        let loss = (y.clone() * z.clone()).sum()
            + (a.clone() * a.clone().sin()).sum()
            + (p.clone() * p.clone().sin()).sum();
        let grads = loss.backward();
        vec![
            values(y),
            values(z),
            values(a),
            values(p),
            values(x.grad(&grads).unwrap()),
            values(gamma.grad(&grads).unwrap()),
            values(qkv.grad(&grads).unwrap()),
            values(w.grad(&grads).unwrap()),
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
