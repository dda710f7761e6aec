//! The feed-forward branch: width -> 4 x width -> GELU (tanh approximation) -> width.

use burn::module::Module;
use burn::nn::{Dropout, DropoutConfig, Linear};
use burn::tensor::Tensor;
use burn::tensor::activation::gelu_approximate;

use crate::attention::projection_std;
use crate::block::linear;
use crate::config::DecoderConfig;

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
        let hidden = gelu_approximate(self.c_fc.forward(x));
        self.dropout.forward(self.c_proj.forward(hidden))
    }
}
