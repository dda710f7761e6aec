//! Multi-head self-attention, causal or bidirectional.

use burn::module::Module;
use burn::nn::{Dropout, DropoutConfig, Linear};
use burn::tensor::activation::softmax;
use burn::tensor::module::attention;
use burn::tensor::ops::AttentionModuleOptions;
use burn::tensor::{Bool, Tensor};

use crate::block::{apply, linear};
use crate::config::{AttentionMask, DecoderConfig};
use crate::dropout::dropout;

#[derive(Module, Debug)]
pub struct SelfAttention {
    /// Query, key and value projections in one matrix (width -> 3 x width).
    c_attn: Linear,
    /// Output projection back into the residual stream.
    c_proj: Linear,
    attn_dropout: Dropout,
    resid_dropout: Dropout,
    n_head: usize,
    causal: bool,
}

impl SelfAttention {
    pub fn new(config: &DecoderConfig, device: &burn::tensor::Device) -> Self {
        let c = config.n_embd;
        Self {
            c_attn: linear(c, 3 * c, 0.02, config.bias, device),
            c_proj: linear(c, c, projection_std(config), config.bias, device),
            attn_dropout: DropoutConfig::new(config.dropout).init(),
            resid_dropout: DropoutConfig::new(config.dropout).init(),
            n_head: config.n_head,
            causal: config.mask == AttentionMask::Causal,
        }
    }

    /// `x`: `[batch, time, width]` -> `[batch, time, width]`.
    pub fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        let qkv = apply(&self.c_attn, x);
        let y = self
            .attend_fused(&qkv)
            .unwrap_or_else(|| self.attend_by_heads(qkv));
        dropout(&self.resid_dropout, apply(&self.c_proj, y))
    }

    /// On flex: all of attention, from `qkv` to the merged heads, as one operation
    /// ([`crate::fused::attention`] in training, [`crate::fused::attention_inference`] without
    /// autodiff); `None` elsewhere.
    fn attend_fused(&self, qkv: &Tensor<3>) -> Option<Tensor<3>> {
        #[cfg(feature = "flex")]
        return crate::fused::attention(qkv, self.n_head, self.causal, &self.attn_dropout)
            .or_else(|| crate::fused::attention_inference(qkv, self.n_head, self.causal));
        #[cfg(not(feature = "flex"))]
        {
            let _ = qkv;
            None
        }
    }

    /// `qkv`: `[batch, time, 3 x width]` -> the heads' outputs side by side, `[batch, time,
    /// width]`, by tensor operations.
    fn attend_by_heads(&self, qkv: Tensor<3>) -> Tensor<3> {
        let [batch, time, three_width] = qkv.dims();
        let width = three_width / 3;
        let head_dim = width / self.n_head;
        let split_heads = |t: Tensor<3>| {
            t.reshape([batch, time, self.n_head, head_dim])
                .swap_dims(1, 2)
        };
        let training = qkv.device().is_autodiff();
        let mut qkv = qkv.chunk(3, 2).into_iter().map(split_heads);
        let (q, k, v) = (
            qkv.next().unwrap(),
            qkv.next().unwrap(),
            qkv.next().unwrap(),
        );

        let y = if training {
            self.attend(q, k, v)
        } else {
            // Inference: the backend's own attention operation (some fuse it, others decompose it).
            let options = AttentionModuleOptions {
                is_causal: self.causal,
                ..Default::default()
            };
            attention(q, k, v, None, None, options)
        };
        y.swap_dims(1, 2).reshape([batch, time, width])
    }

    /// Attention of `[batch, heads, time, head_dim]` queries, keys and values, written out so
    /// that autodiff differentiates it and dropout can act on the attention weights (Burn's
    /// fused attention has neither).
    fn attend(&self, q: Tensor<4>, k: Tensor<4>, v: Tensor<4>) -> Tensor<4> {
        let divisor = (q.dims()[3] as f32).sqrt();
        let weights = attention_weights(q.matmul(k.swap_dims(2, 3)), divisor, self.causal);
        dropout(&self.attn_dropout, weights).matmul(v)
    }
}

/// `softmax(scores / divisor)` over the keys of `[batch, heads, queries, keys]` scores, each
/// query's later keys hidden when `causal`.
pub fn attention_weights(scores: Tensor<4>, divisor: f32, causal: bool) -> Tensor<4> {
    let mut scores = scores.div_scalar(divisor);
    if causal {
        // `tril_mask` is true strictly above the diagonal: the future keys to hide.
        let time = scores.dims()[2];
        let future = Tensor::<2, Bool>::tril_mask([time, time], 0, &scores.device());
        scores = scores.mask_fill(future.unsqueeze::<4>(), f32::NEG_INFINITY);
    }
    softmax(scores, 3)
}

/// nanoGPT's scaled initialisation of the projections that write into the residual stream.
pub fn projection_std(config: &DecoderConfig) -> f64 {
    0.02 / (2.0 * config.n_layer as f64).sqrt()
}
