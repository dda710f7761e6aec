//! One pre-LayerNorm transformer layer, with or without its two residual connections.

use burn::module::Module;
use burn::nn::{Initializer, LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::tensor::{Device, Tensor};

use crate::attention::SelfAttention;
use crate::config::DecoderConfig;
use crate::mlp::Mlp;

/// The named activations of one layer (TransformerLens's hook points), each `[batch, time, width]`.
#[derive(Debug, Clone)]
pub struct LayerActivations {
    /// The layer's input.
    pub resid_pre: Tensor<3>,
    /// The attention branch's output.
    pub attn_out: Tensor<3>,
    /// After the attention branch: `resid_pre + attn_out`, or `attn_out` in an ablated layer.
    pub resid_mid: Tensor<3>,
    /// The MLP branch's output.
    pub mlp_out: Tensor<3>,
    /// The layer's output: `resid_mid + mlp_out`, or `mlp_out` in an ablated layer.
    pub resid_post: Tensor<3>,
}

#[derive(Module, Debug)]
pub struct Block {
    ln_1: LayerNorm,
    attn: SelfAttention,
    ln_2: LayerNorm,
    mlp: Mlp,
    /// False in an ablated layer: `x = attn(ln_1(x))`, then `x = mlp(ln_2(x))`.
    residual: bool,
}

impl Block {
    pub fn new(config: &DecoderConfig, index: usize, device: &Device) -> Self {
        Self {
            ln_1: layer_norm(config, device),
            attn: SelfAttention::new(config, device),
            ln_2: layer_norm(config, device),
            mlp: Mlp::new(config, device),
            residual: config.has_residual(index),
        }
    }

    pub fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        self.forward_cached(x).resid_post
    }

    /// The forward pass, keeping every named activation.
    pub fn forward_cached(&self, resid_pre: Tensor<3>) -> LayerActivations {
        let attn_out = self.attn.forward(normalize(&self.ln_1, resid_pre.clone()));
        let resid_mid = self.join(resid_pre.clone(), attn_out.clone());
        let mlp_out = self.mlp.forward(normalize(&self.ln_2, resid_mid.clone()));
        let resid_post = self.join(resid_mid.clone(), mlp_out.clone());
        LayerActivations {
            resid_pre,
            attn_out,
            resid_mid,
            mlp_out,
            resid_post,
        }
    }

    fn join(&self, stream: Tensor<3>, branch: Tensor<3>) -> Tensor<3> {
        if self.residual {
            stream + branch
        } else {
            branch
        }
    }
}

/// `norm(x)`: one fused operation on flex ([`crate::fused`]), Burn's composed LayerNorm elsewhere.
/// Every LayerNorm of the model goes through here.
pub fn normalize(norm: &LayerNorm, x: Tensor<3>) -> Tensor<3> {
    #[cfg(feature = "flex")]
    if let Some(scaled) = crate::fused::layer_norm(&x, &norm.gamma.val(), LAYER_NORM_EPSILON as f32)
    {
        return match &norm.beta {
            Some(beta) => scaled + beta.val().unsqueeze::<3>(),
            None => scaled,
        };
    }
    norm.forward(x)
}

/// A Linear layer with nanoGPT's initialisation: weights normal(0, `std`), biases zero.
pub fn linear(d_in: usize, d_out: usize, std: f64, bias: bool, device: &Device) -> Linear {
    let mut layer = LinearConfig::new(d_in, d_out)
        .with_bias(false)
        .with_initializer(Initializer::Normal { mean: 0.0, std })
        .init(device);
    if bias {
        layer.bias = Some(Initializer::Zeros.init([d_out], device));
    }
    layer
}

/// `x W` for a weight `[d_in, d_out]`: `fused::project` on flex, else Burn's `linear`.
pub fn project<const D: usize>(x: Tensor<D>, weight: Tensor<2>) -> Tensor<D> {
    #[cfg(feature = "flex")]
    if let Some(y) = crate::fused::project(&x, &weight) {
        return y;
    }
    burn::tensor::module::linear(x, weight, None)
}

/// `layer` applied to `x`: through [`project`] when it has no bias (every preset), else by
/// Burn's layer.
pub fn apply<const D: usize>(layer: &Linear, x: Tensor<D>) -> Tensor<D> {
    match layer.bias {
        None => project(x, layer.weight.val()),
        Some(_) => layer.forward(x),
    }
}

/// The epsilon under the square root of every LayerNorm, PyTorch's and nanoGPT's default.
const LAYER_NORM_EPSILON: f64 = 1e-5;

pub fn layer_norm(config: &DecoderConfig, device: &Device) -> LayerNorm {
    LayerNormConfig::new(config.n_embd)
        .with_epsilon(LAYER_NORM_EPSILON)
        .with_bias(config.bias)
        .init(device)
}

#[cfg(all(test, feature = "flex"))]
mod tests {
    use super::*;
    use burn::tensor::TensorData;

    #[test]
    fn normalize_with_a_bias_equals_burns_layer_norm() {
        let device = Device::flex().autodiff();
        let mut norm = LayerNormConfig::new(16).with_bias(true).init(&device);
        let ramp =
            |n: usize, f: fn(f32) -> f32| -> Vec<f32> { (0..n).map(|i| f(i as f32)).collect() };
        norm.gamma = burn::module::Param::from_tensor(Tensor::from_data(
            TensorData::new(ramp(16, |i| 0.5 + (i * 0.7).cos()), [16]),
            &device,
        ));
        norm.beta = Some(burn::module::Param::from_tensor(Tensor::from_data(
            TensorData::new(ramp(16, |i| (i * 0.3).sin()), [16]),
            &device,
        )));
        let x = Tensor::<3>::from_data(
            TensorData::new(
                ramp(96, |i| (i * 0.37).sin() * (1.0 + i / 16.0)),
                [2, 3, 16],
            ),
            &device,
        );
        let fused = normalize(&norm, x.clone()).try_to_vec_as::<f32>().unwrap();
        let burns = norm.forward(x).try_to_vec_as::<f32>().unwrap();
        for (a, b) in fused.iter().zip(&burns) {
            assert!((a - b).abs() <= 1e-5 * (1.0 + b.abs()), "{a} vs {b}");
        }
    }
}
