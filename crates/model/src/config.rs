//! The decoder's configuration: one struct that says everything about the model.

use std::fmt;

use burn::config::Config;
use serde::{Deserialize, Serialize};

/// How token positions enter the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PositionalEncoding {
    /// A learned absolute embedding per position, added to the token embedding (the reference).
    Learned,
    /// No positional encoding at all ("NoPE").
    None,
}

/// Which keys a query may attend to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AttentionMask {
    /// Position k sees positions 1..=k (the reference).
    Causal,
    /// Every position sees every position.
    Bidirectional,
}

/// Defaults are the reference setup's model (Lee et al.'s nanoGPT: 6 layers, 6 heads, width 384).
#[derive(Config, Debug, PartialEq)]
pub struct DecoderConfig {
    /// Tokens in the vocabulary (14 for the addition task).
    #[config(default = 14)]
    pub vocab_size: usize,
    /// The longest sequence the model reads (the learned positional table has this many rows).
    #[config(default = 256)]
    pub block_size: usize,
    #[config(default = 6)]
    pub n_layer: usize,
    #[config(default = 6)]
    pub n_head: usize,
    /// Width of the residual stream.
    #[config(default = 384)]
    pub n_embd: usize,
    /// Dropout on the embeddings, the attention weights and each residual branch.
    #[config(default = 0.2)]
    pub dropout: f64,
    /// Biases in Linear layers and LayerNorms (the reference has none).
    #[config(default = false)]
    pub bias: bool,
    #[config(default = "PositionalEncoding::Learned")]
    pub positional: PositionalEncoding,
    #[config(default = "AttentionMask::Causal")]
    pub mask: AttentionMask,
    /// Layers, numbered from 1 as in the paper's tables, whose two residual connections are removed.
    #[config(default = "Vec::new()")]
    pub ablate: Vec<usize>,
}

/// A configuration field with a value the model cannot be built from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub field: &'static str,
    pub reason: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "model.{}: {}", self.field, self.reason)
    }
}

impl std::error::Error for ConfigError {}

impl DecoderConfig {
    /// Checks every field; the first problem found is returned.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let error = |field, reason: String| Err(ConfigError { field, reason });
        for (field, value) in [
            ("vocab_size", self.vocab_size),
            ("block_size", self.block_size),
            ("n_layer", self.n_layer),
            ("n_head", self.n_head),
            ("n_embd", self.n_embd),
        ] {
            if value == 0 {
                return error(field, "must be at least 1".into());
            }
        }
        if !self.n_embd.is_multiple_of(self.n_head) {
            return error(
                "n_head",
                format!(
                    "{} heads do not divide the width n_embd = {}",
                    self.n_head, self.n_embd
                ),
            );
        }
        if !(0.0..1.0).contains(&self.dropout) {
            return error(
                "dropout",
                format!("must be in [0, 1), got {}", self.dropout),
            );
        }
        for &layer in &self.ablate {
            if layer == 0 || layer > self.n_layer {
                return error(
                    "ablate",
                    format!(
                        "layer {layer} is outside 1..={} (layers are numbered from 1)",
                        self.n_layer
                    ),
                );
            }
        }
        let mut sorted = self.ablate.clone();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted.len() != self.ablate.len() {
            return error("ablate", "lists a layer twice".into());
        }
        Ok(())
    }

    /// Whether layer `index` (counted from 0) keeps its residual connections.
    pub fn has_residual(&self, index: usize) -> bool {
        !self.ablate.contains(&(index + 1))
    }

    /// The number of trainable parameters, embeddings included (the tied head counted once).
    pub fn num_params(&self) -> usize {
        let c = self.n_embd;
        let bias = usize::from(self.bias);
        let layer_norm = c + bias * c;
        let attention = 4 * c * c + bias * 4 * c;
        let mlp = 8 * c * c + bias * 5 * c;
        let per_layer = 2 * layer_norm + attention + mlp;
        let positions = match self.positional {
            PositionalEncoding::Learned => self.block_size * c,
            PositionalEncoding::None => 0,
        };
        self.vocab_size * c + positions + self.n_layer * per_layer + layer_norm
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of(config: DecoderConfig) -> &'static str {
        config.validate().unwrap_err().field
    }

    #[test]
    fn reference_configuration_is_valid() {
        assert_eq!(DecoderConfig::new().validate(), Ok(()));
    }

    #[test]
    fn invalid_fields_are_named() {
        assert_eq!(field_of(DecoderConfig::new().with_n_head(5)), "n_head");
        assert_eq!(field_of(DecoderConfig::new().with_n_head(0)), "n_head");
        assert_eq!(field_of(DecoderConfig::new().with_n_embd(0)), "n_embd");
        assert_eq!(
            field_of(DecoderConfig::new().with_block_size(0)),
            "block_size"
        );
        assert_eq!(
            field_of(DecoderConfig::new().with_ablate(vec![7])),
            "ablate"
        );
        assert_eq!(
            field_of(DecoderConfig::new().with_ablate(vec![0])),
            "ablate"
        );
        assert_eq!(
            field_of(DecoderConfig::new().with_ablate(vec![2, 2])),
            "ablate"
        );
        assert_eq!(field_of(DecoderConfig::new().with_dropout(1.0)), "dropout");
        let message = DecoderConfig::new()
            .with_ablate(vec![7])
            .validate()
            .unwrap_err()
            .to_string();
        assert!(message.contains("layer 7 is outside 1..=6"), "{message}");
    }

    #[test]
    fn paper_parameter_count_follows_the_nanogpt_formula() {
        // nanoGPT without biases: wte V*C + wpe T*C + per layer 12*C^2 + 2*C (two LayerNorm
        // weights) + the final LayerNorm C.
        let (v, t, c, l) = (14, 256, 384, 6);
        let expected = v * c + t * c + l * (12 * c * c + 2 * c) + c;
        assert_eq!(DecoderConfig::new().num_params(), expected);
        assert_eq!(expected, 10_725_504);
    }
}
