//! Dropout as Burn's layer applies it (in training, on the autodiff device, with a probability
//! above 0), with the mask drawn here on flex.
//!
//! Burn 0.22.1 draws each mask entry through a fresh Bernoulli sampler from its ChaCha12
//! generator: about a tenth of a width-128 training step with dropout 0.2 (docs/performance.md).
//! Here one seed per mask comes from Burn's generator, so `device.seed(n)` still decides every
//! mask, and entry `i` keeps or drops by one 32-bit half of the `i / 2`-th output of SplitMix64
//! from that seed: the same mask whatever the thread count, at about a nanosecond an entry.
//! Other backends keep Burn's layer: on wgpu a mask made on the host would have to be uploaded.

// Without flex compiled in, only `dropout` (Burn's layer) is reached.
#![cfg_attr(not(feature = "flex"), allow(dead_code))]

use burn::nn::Dropout;
use burn::tensor::{Device, Distribution, Int, Shape, Tensor, TensorData};

/// `layer` applied to `x`: on flex (f32, with autodiff) with this module's mask, elsewhere by
/// Burn's own layer. Either way each entry is kept with probability `1 - layer.prob` and scaled
/// by `1 / (1 - layer.prob)`, and only where Burn's layer would act.
pub fn dropout<const D: usize>(layer: &Dropout, x: Tensor<D>) -> Tensor<D> {
    #[cfg(feature = "flex")]
    if crate::fused::is_autodiff_flex(&x)
        && let Some(mask) = layer_mask(layer, x.shape(), &x.device())
    {
        return x * mask;
    }
    layer.forward(x)
}

/// `layer`'s mask of `shape` on `device` when it drops anything where the device allows it
/// (Burn's condition, less the device's autodiff, which the caller checks): each entry
/// `1 / keep` with probability `keep = 1 - layer.prob`, else 0, from a fresh seed drawn from the
/// device's generator. `None` when the layer is frozen or its probability is 0.
pub(crate) fn layer_mask<const D: usize>(
    layer: &Dropout,
    shape: Shape,
    device: &Device,
) -> Option<Tensor<D>> {
    if !(layer.prob > 0.0 && layer.training.is_enabled()) {
        return None;
    }
    let keep = 1.0 - layer.prob;
    let values = mask_values(shape.num_elements(), keep, draw_seed(device));
    Some(Tensor::from_data(TensorData::new(values, shape), device))
}

/// 64 bits from the device's generator (four draws of 16 bits, whatever the integer type).
fn draw_seed(device: &Device) -> u64 {
    let draws = Tensor::<1, Int>::random([4], Distribution::Uniform(0.0, 65_536.0), device);
    let draws = draws
        .try_to_vec_as::<i64>()
        .expect("four integers read back from the device");
    draws
        .iter()
        .fold(0, |seed, &d| (seed << 16) | (d as u64 & 0xffff))
}

/// `len` mask entries: entry `i` is `1 / keep` when the `i % 2`-th 32-bit half of SplitMix64's
/// `i / 2`-th output from `seed` is below `keep x 2^32`, else 0.
fn mask_values(len: usize, keep: f64, seed: u64) -> Vec<f32> {
    let threshold = (keep * 4_294_967_296.0).round() as u64;
    let scale = (1.0 / keep) as f32;
    let entry = |bits: u64| if bits < threshold { scale } else { 0.0 };
    let mut values = vec![0.0; len];
    for (k, pair) in values.chunks_mut(2).enumerate() {
        let bits = splitmix64(seed, k as u64);
        pair[0] = entry(bits & 0xffff_ffff);
        if let Some(second) = pair.get_mut(1) {
            *second = entry(bits >> 32);
        }
    }
    values
}

/// The `k`-th output of SplitMix64 started at `seed` (Steele, Lea and Flood, 2014): the state
/// advances by a fixed odd constant, and each state is mixed into the output.
fn splitmix64(seed: u64, k: u64) -> u64 {
    const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut z = seed.wrapping_add(GAMMA.wrapping_mul(k.wrapping_add(1)));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_gives_the_published_sequence() {
        // The published test values for seed 1234567 (as in Vigna's C reference code).
        let expected = [
            6_457_827_717_110_365_317,
            3_203_168_211_198_807_973,
            9_817_491_932_198_370_423,
        ];
        for (k, want) in expected.into_iter().enumerate() {
            assert_eq!(splitmix64(1_234_567, k as u64), want, "output {k}");
        }
    }

    #[test]
    fn a_mask_keeps_the_share_asked_for_and_keeps_the_mean() {
        let (len, keep) = (200_001, 0.8);
        let values = mask_values(len, keep, 42);
        assert_eq!(values.len(), len);
        let scale = (1.0 / keep) as f32;
        assert!(values.iter().all(|&v| v == 0.0 || v == scale));
        let kept = values.iter().filter(|&&v| v != 0.0).count() as f64 / len as f64;
        // The share's standard deviation is 0.0009 here: 5 of them.
        assert!((kept - keep).abs() < 0.0045, "kept {kept}");
        let mean = values.iter().map(|&v| v as f64).sum::<f64>() / len as f64;
        assert!((mean - 1.0).abs() < 0.006, "mean {mean}");
        // Neighbours (the two halves of one output, and across outputs) are independent.
        let both = |offset: usize| {
            let pairs =
                (0..len - offset).filter(|&i| values[i] != 0.0 && values[i + offset] != 0.0);
            pairs.count() as f64 / (len - offset) as f64
        };
        for offset in [1, 2, 3] {
            assert!(
                (both(offset) - keep * keep).abs() < 0.005,
                "offset {offset}"
            );
        }
    }

    #[test]
    fn a_mask_follows_its_seed() {
        assert_eq!(mask_values(1_001, 0.5, 7), mask_values(1_001, 0.5, 7));
        assert_ne!(mask_values(1_001, 0.5, 7), mask_values(1_001, 0.5, 8));
        // A longer mask starts as the shorter one: entries depend on their index only.
        assert_eq!(
            mask_values(2_000, 0.5, 7)[..1_001],
            mask_values(1_001, 0.5, 7)
        );
    }

    #[cfg(feature = "flex")]
    mod on_flex {
        use super::super::*;
        use burn::module::Module;
        use burn::nn::DropoutConfig;

        fn ones(device: &Device) -> Tensor<2> {
            Tensor::ones([64, 100], device)
        }

        fn values(t: Tensor<2>) -> Vec<f32> {
            t.try_to_vec_as::<f32>().unwrap()
        }

        #[test]
        fn dropout_on_flex_follows_the_device_seed_and_passes_the_mask_to_the_gradient() {
            let device = Device::flex().autodiff();
            let layer = DropoutConfig::new(0.25).init();
            let run = |seed: u64| {
                device.seed(seed);
                let x = ones(&device).require_grad();
                let y = dropout(&layer, x.clone());
                let grads = y.clone().sum().backward();
                (values(y), values(x.grad(&grads).unwrap()))
            };
            let (y, grad) = run(3);
            assert_eq!(run(3), (y.clone(), grad.clone()), "same seed, same mask");
            assert_ne!(run(4).0, y, "another seed, another mask");
            let kept = y.iter().filter(|&&v| v != 0.0).count();
            assert!(
                (4_400..=5_200).contains(&kept),
                "about 75% of 6,400 kept: {kept}"
            );
            assert!(y.iter().all(|&v| v == 0.0 || (v - 4.0 / 3.0).abs() < 1e-6));
            // With x all ones the output is the mask, and so is d(sum y)/dx.
            assert_eq!(grad, y);
        }

        #[test]
        fn dropout_acts_only_where_burns_layer_would() {
            let training = Device::flex().autodiff();
            let layer = DropoutConfig::new(0.5).init();
            let all_kept = vec![1.0; 6_400];
            assert_eq!(values(dropout(&layer, ones(&Device::flex()))), all_kept);
            assert_eq!(
                values(dropout(&layer.clone().freeze(), ones(&training))),
                all_kept
            );
            let none = DropoutConfig::new(0.0).init();
            assert_eq!(values(dropout(&none, ones(&training))), all_kept);
            assert_ne!(values(dropout(&layer, ones(&training))), all_kept);
        }
    }
}
