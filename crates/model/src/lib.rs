//! A nanoGPT-style decoder whose symmetry breakers can be switched off one by one:
//! the positional encoding (learned or none), the attention mask (causal or bidirectional) and
//! the two residual connections of chosen layers.
//!
//! - [`config`]: [`DecoderConfig`], everything that defines a model, validated.
//! - [`attention`], [`mlp`], [`block`]: the parts of one layer; [`dropout`], as Burn's layer
//!   with a faster mask on flex.
//! - [`decoder`]: the whole model, its forward pass with an activation cache, and greedy decoding.
//! - `fused` (feature `flex`): GELU, LayerNorm, attention and the linear layers' products in one
//!   pass each way on the flex backend; `simd`, the helper that compiles their loops for AVX-512
//!   or AVX2 where the CPU has them.

pub mod attention;
pub mod block;
pub mod config;
pub mod decoder;
pub mod dropout;
#[cfg(feature = "flex")]
pub mod fused;
pub mod mlp;
#[cfg(feature = "flex")]
mod simd;

pub use block::LayerActivations;
pub use config::{AttentionMask, ConfigError, DecoderConfig, PositionalEncoding};
pub use decoder::{ActivationCache, Decoder};
