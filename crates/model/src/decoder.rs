//! The whole decoder: embeddings, the layers, the final LayerNorm and the tied output head.

use burn::module::Module;
use burn::nn::{Dropout, DropoutConfig, Embedding, EmbeddingConfig, Initializer, LayerNorm};
use burn::tensor::{Device, Int, Tensor};

use crate::block::{Block, LayerActivations, layer_norm, normalize, project};
use crate::config::{AttentionMask, ConfigError, DecoderConfig, PositionalEncoding};
use crate::dropout::dropout;

#[derive(Module, Debug)]
pub struct Decoder {
    /// Token embedding, also the output head (weight tying).
    wte: Embedding,
    /// Learned absolute positional embedding; absent with NoPE.
    wpe: Option<Embedding>,
    dropout: Dropout,
    blocks: Vec<Block>,
    ln_f: LayerNorm,
    block_size: usize,
    /// Whether attention is causal (each position sees only itself and earlier ones).
    causal: bool,
}

/// What a forward pass with cache returns besides the logits: each layer's named activations,
/// `layers[0]` being layer 1 of the paper's tables (block 0 of its figures).
#[derive(Debug, Clone)]
pub struct ActivationCache {
    pub layers: Vec<LayerActivations>,
}

impl DecoderConfig {
    /// Builds the model with the reference initialisation, after validating the configuration.
    pub fn init(&self, device: &Device) -> Result<Decoder, ConfigError> {
        self.validate()?;
        let embedding = |rows| {
            EmbeddingConfig::new(rows, self.n_embd)
                .with_initializer(Initializer::Normal {
                    mean: 0.0,
                    std: 0.02,
                })
                .init(device)
        };
        Ok(Decoder {
            wte: embedding(self.vocab_size),
            wpe: match self.positional {
                PositionalEncoding::Learned => Some(embedding(self.block_size)),
                PositionalEncoding::None => None,
            },
            dropout: DropoutConfig::new(self.dropout).init(),
            blocks: (0..self.n_layer)
                .map(|index| Block::new(self, index, device))
                .collect(),
            ln_f: layer_norm(self, device),
            block_size: self.block_size,
            causal: self.mask == AttentionMask::Causal,
        })
    }
}

impl Decoder {
    /// `tokens`: `[batch, time]` -> logits `[batch, time, vocab]`.
    pub fn forward(&self, tokens: Tensor<2, Int>) -> Tensor<3> {
        let x = self
            .blocks
            .iter()
            .fold(self.embed(tokens), |x, block| block.forward(x));
        self.head(x)
    }

    /// The forward pass that also returns every layer's named activations.
    pub fn forward_cached(&self, tokens: Tensor<2, Int>) -> (Tensor<3>, ActivationCache) {
        let mut x = self.embed(tokens);
        let mut layers = Vec::with_capacity(self.blocks.len());
        for block in &self.blocks {
            let activations = block.forward_cached(x);
            x = activations.resid_post.clone();
            layers.push(activations);
        }
        (self.head(x), ActivationCache { layers })
    }

    /// Greedy decoding: appends `max_new_tokens` argmax tokens to each of the equal-length
    /// `prompts` (`[batch, time]`) and returns only the new tokens, `[batch, max_new_tokens]`.
    pub fn generate(&self, prompts: Tensor<2, Int>, max_new_tokens: usize) -> Tensor<2, Int> {
        let [batch, prompt_len] = prompts.dims();
        let mut sequence = prompts;
        for _ in 0..max_new_tokens {
            let time = sequence.dims()[1];
            let start = time.saturating_sub(self.block_size);
            let context = sequence.clone().narrow(1, start, time - start);
            let logits = self.forward(context);
            let [_, context_len, vocab] = logits.dims();
            let next = logits
                .narrow(1, context_len - 1, 1)
                .reshape([batch, vocab])
                .argmax(1);
            sequence = Tensor::cat(vec![sequence, next], 1);
        }
        sequence.narrow(1, prompt_len, max_new_tokens)
    }

    pub fn block_size(&self) -> usize {
        self.block_size
    }

    pub fn is_causal(&self) -> bool {
        self.causal
    }

    fn embed(&self, tokens: Tensor<2, Int>) -> Tensor<3> {
        let [_, time] = tokens.dims();
        assert!(
            time <= self.block_size,
            "a sequence of {time} tokens is longer than the block size {}",
            self.block_size
        );
        let device = tokens.device();
        let mut x = self.wte.forward(tokens);
        if let Some(wpe) = &self.wpe {
            let positions = Tensor::<1, Int>::arange(0..time as i64, &device).unsqueeze::<2>();
            x = x + wpe.forward(positions);
        }
        dropout(&self.dropout, x)
    }

    /// Final LayerNorm, then the transposed token embedding as the output projection.
    fn head(&self, x: Tensor<3>) -> Tensor<3> {
        project(normalize(&self.ln_f, x), self.wte.weight.val().transpose())
    }
}
