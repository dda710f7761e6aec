//! The paper's section 4, proved on randomly initialised models: without the causal mask and
//! without positional encoding the prediction at position n is invariant to permutations of
//! tokens 1..n-1 (and the other outputs are permuted alike); either symmetry breaker breaks it.

use burn::tensor::{Device, Int, Tensor, TensorData};
use symbreak_model::{AttentionMask, Decoder, DecoderConfig, PositionalEncoding};

const SEQ: usize = 12;
const VOCAB: usize = 14;
const TOLERANCE: f32 = 1e-4;
/// With the reference initialisation (std 0.02) logits are about 0.1 in size; a broken symmetry
/// moves them by several 1e-3 (measured: 3e-3 to 1e-2), the invariant case by under 2e-7.
const BROKEN: f32 = 20.0 * TOLERANCE;

fn device() -> Device {
    Device::flex()
}

fn model(positional: PositionalEncoding, mask: AttentionMask, seed: u64) -> Decoder {
    let device = device();
    device.seed(seed);
    DecoderConfig::new()
        .with_block_size(16)
        .with_n_layer(3)
        .with_n_head(4)
        .with_n_embd(32)
        .with_positional(positional)
        .with_mask(mask)
        .init(&device)
        .unwrap()
}

/// A small deterministic generator, so that the tests need no extra dependency.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as usize
    }

    /// A random permutation of 0..n that is not the identity.
    fn permutation(&mut self, n: usize) -> Vec<usize> {
        loop {
            let mut p: Vec<usize> = (0..n).collect();
            for i in (1..n).rev() {
                p.swap(i, self.below(i + 1));
            }
            if p.iter().enumerate().any(|(i, &v)| i != v) {
                return p;
            }
        }
    }
}

fn logits(model: &Decoder, tokens: &[usize]) -> Vec<f32> {
    let data: Vec<i64> = tokens.iter().map(|&t| t as i64).collect();
    let input = Tensor::<2, Int>::from_data(TensorData::new(data, [1, tokens.len()]), &device());
    model.forward(input).try_to_vec_as::<f32>().unwrap()
}

fn position(logits: &[f32], pos: usize) -> &[f32] {
    &logits[pos * VOCAB..(pos + 1) * VOCAB]
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// The sequence with its first n-1 tokens reordered: `permuted[i] = tokens[p[i]]` for i < n-1.
fn permute(tokens: &[usize], p: &[usize]) -> Vec<usize> {
    let mut out: Vec<usize> = p.iter().map(|&i| tokens[i]).collect();
    out.push(tokens[tokens.len() - 1]);
    out
}

fn random_tokens(rng: &mut Lcg) -> Vec<usize> {
    // Tokens may repeat, so a permutation can leave the sequence as it was;
    // `last_position_change` skips those.
    (0..SEQ).map(|_| rng.below(VOCAB)).collect()
}

/// Largest change of the last position's logits over several permutations.
fn last_position_change(model: &Decoder, rng: &mut Lcg) -> f32 {
    let mut largest: f32 = 0.0;
    for _ in 0..4 {
        let tokens = random_tokens(rng);
        let p = rng.permutation(SEQ - 1);
        let permuted = permute(&tokens, &p);
        if permuted == tokens {
            continue;
        }
        let (a, b) = (logits(model, &tokens), logits(model, &permuted));
        largest = largest.max(max_diff(position(&a, SEQ - 1), position(&b, SEQ - 1)));
    }
    largest
}

#[test]
fn bidirectional_nope_is_invariant_at_the_last_position_and_equivariant_elsewhere() {
    let mut rng = Lcg(1);
    for seed in [0, 1, 2] {
        let model = model(PositionalEncoding::None, AttentionMask::Bidirectional, seed);
        for _ in 0..4 {
            let tokens = random_tokens(&mut rng);
            let p = rng.permutation(SEQ - 1);
            let (original, permuted) = (
                logits(&model, &tokens),
                logits(&model, &permute(&tokens, &p)),
            );
            let last = max_diff(position(&original, SEQ - 1), position(&permuted, SEQ - 1));
            assert!(
                last < TOLERANCE,
                "seed {seed}: last position moved by {last}"
            );
            for (i, &source) in p.iter().enumerate() {
                let moved = max_diff(position(&permuted, i), position(&original, source));
                assert!(
                    moved < TOLERANCE,
                    "seed {seed}: output {i} is not output {source} ({moved})"
                );
            }
        }
    }
}

#[test]
fn the_causal_mask_breaks_the_symmetry() {
    let mut rng = Lcg(2);
    for seed in [0, 1, 2] {
        let model = model(PositionalEncoding::None, AttentionMask::Causal, seed);
        let change = last_position_change(&model, &mut rng);
        assert!(
            change > BROKEN,
            "seed {seed}: causal model changed only {change}"
        );
    }
}

#[test]
fn learned_positions_break_the_symmetry() {
    let mut rng = Lcg(3);
    for seed in [0, 1, 2] {
        let model = model(
            PositionalEncoding::Learned,
            AttentionMask::Bidirectional,
            seed,
        );
        let change = last_position_change(&model, &mut rng);
        assert!(
            change > BROKEN,
            "seed {seed}: learned-PE model changed only {change}"
        );
    }
}

#[test]
fn causal_outputs_never_see_later_tokens() {
    let mut rng = Lcg(4);
    for positional in [PositionalEncoding::None, PositionalEncoding::Learned] {
        let model = model(positional, AttentionMask::Causal, 5);
        let tokens = random_tokens(&mut rng);
        let original = logits(&model, &tokens);
        for k in [1, 5, SEQ - 1] {
            let mut changed = tokens.clone();
            changed[k] = (changed[k] + 1) % VOCAB;
            let after = logits(&model, &changed);
            assert_eq!(
                &after[..k * VOCAB],
                &original[..k * VOCAB],
                "positions before {k} moved"
            );
            assert_ne!(
                position(&after, k),
                position(&original, k),
                "position {k} itself must see its token"
            );
        }
    }
}

#[test]
fn bidirectional_outputs_see_later_tokens() {
    let model = model(PositionalEncoding::Learned, AttentionMask::Bidirectional, 6);
    let tokens = random_tokens(&mut Lcg(5));
    let mut changed = tokens.clone();
    changed[SEQ - 1] = (changed[SEQ - 1] + 1) % VOCAB;
    let (a, b) = (logits(&model, &tokens), logits(&model, &changed));
    assert!(max_diff(position(&a, 0), position(&b, 0)) > 0.0);
}
