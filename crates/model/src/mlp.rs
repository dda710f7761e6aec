//! The feed-forward branch: width -> 4 x width -> GELU (tanh approximation) -> width.

use burn::module::Module;
use burn::nn::{Dropout, DropoutConfig, Linear};
use burn::tensor::Tensor;
use burn::tensor::activation::sigmoid;

use crate::attention::projection_std;
use crate::block::{apply, linear};
use crate::config::DecoderConfig;
use crate::dropout::dropout;

#[derive(Module, Debug)]
pub struct Mlp {
    c_fc: Linear,
    c_proj: Linear,
    dropout: Dropout,
}

impl Mlp {
    pub fn new(config: &DecoderConfig, device: &burn::tensor::Device) -> Self {
        let c = config.n_embd;
        Self {
            c_fc: linear(c, 4 * c, 0.02, config.bias, device),
            c_proj: linear(4 * c, c, projection_std(config), config.bias, device),
            dropout: DropoutConfig::new(config.dropout).init(),
        }
    }

    pub fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        let hidden = gelu_tanh(apply(&self.c_fc, x));
        dropout(&self.dropout, apply(&self.c_proj, hidden))
    }
}

/// `2 sqrt(2 / pi)`: GELU's `tanh(a)` is `2 sigmoid(2a) - 1`.
pub const TWO_SQRT_2_OVER_PI: f32 = 1.595_769;
/// The coefficient of GELU's cubic term.
pub const CUBIC: f32 = 0.044_715;

/// GELU with the tanh approximation, `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`: fused
/// into one pass each way on flex ([`crate::fused`]), composed of tensor operations elsewhere.
pub fn gelu_tanh<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    #[cfg(feature = "flex")]
    if let Some(y) = crate::fused::gelu_tanh(&x) {
        return y;
    }
    gelu_tanh_composed(x)
}

/// The same GELU from Burn's tensor operations, computed as the equal
/// `x * sigmoid(2 sqrt(2/pi) (x + 0.044715 x^3))`: on the CPU backends this avoids per-element
/// `tanh` and `powf` calls, which took a quarter of a training step.
pub fn gelu_tanh_composed<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    let cube = x.clone() * x.clone() * x.clone();
    let inner = (x.clone() + cube.mul_scalar(CUBIC)).mul_scalar(TWO_SQRT_2_OVER_PI);
    x * sigmoid(inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::activation::gelu_approximate;
    use burn::tensor::{Device, TensorData};

    #[test]
    fn equals_burns_tanh_gelu() {
        let device = Device::flex();
        let values: Vec<f32> = (-80..=80).map(|i| i as f32 / 10.0).collect();
        let x = Tensor::<1>::from_data(TensorData::new(values, [161]), &device);
        let ours = gelu_tanh(x.clone()).try_to_vec_as::<f32>().unwrap();
        let burns = gelu_approximate(x).try_to_vec_as::<f32>().unwrap();
        for (a, b) in ours.iter().zip(&burns) {
            assert!((a - b).abs() < 1e-5, "{a} vs {b}");
        }
    }
}
