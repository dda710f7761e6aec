//! Pearson correlation between all the features of a layer's activations, and the blockiness
//! score of its absolute value.
//!
//! Features are ordered position-major: feature `p * width + i` is unit `i` at token position
//! `p`, so the matrix is made of `positions x positions` blocks of `width x width` entries, the
//! diagonal blocks holding the correlations within one position.

use burn::tensor::{Tensor, TensorData};

/// A feature is constant when its values across the samples span at most this fraction of
/// their magnitude (or of 1e-6 for values near zero): float noise from identical computations,
/// such as position 0 of a causal model, which always sees `$`. The span, not the spread around
/// the computed mean: the mean of many equal floats is rarely that float exactly, and the
/// offset would pass for variation.
pub const CONSTANT_RELATIVE_SPAN: f32 = 1e-5;

/// The correlation matrix of `features` features, row-major, with constant features' rows and
/// columns set to zero (their correlation is undefined; never NaN here).
#[derive(Debug, Clone)]
pub struct Correlation {
    pub features: usize,
    pub values: Vec<f32>,
    /// Indices of the constant features.
    pub constant: Vec<usize>,
}

impl Correlation {
    pub fn get(&self, row: usize, column: usize) -> f32 {
        self.values[row * self.features + column]
    }

    /// Pearson correlation of the columns of `samples` (`[samples, features]`), on the tensor's
    /// device. Memory: the samples three times over (centred, scaled) plus the `features^2`
    /// result on the device and once more on the host.
    pub fn of(samples: Tensor<2>) -> Correlation {
        let [n, features] = samples.dims();
        assert!(n >= 2, "a correlation needs at least two samples, got {n}");
        let device = samples.device();
        let highest = to_vec(samples.clone().max_dim(0));
        let lowest = to_vec(samples.clone().min_dim(0));
        let mean = samples.clone().mean_dim(0);
        let centred = samples - mean;
        let sum_squares = to_vec(centred.clone().square().sum_dim(0));
        let mut constant = Vec::new();
        let scale: Vec<f32> = (0..features)
            .map(|i| {
                let magnitude = highest[i].abs().max(lowest[i].abs()).max(1e-6);
                if highest[i] - lowest[i] <= CONSTANT_RELATIVE_SPAN * magnitude {
                    constant.push(i);
                    0.0
                } else {
                    1.0 / sum_squares[i].sqrt()
                }
            })
            .collect();
        let scale = Tensor::<1>::from_data(TensorData::new(scale, [features]), &device);
        let z = centred * scale.unsqueeze::<2>();
        let product = z.clone().transpose().matmul(z);
        let mut values = to_vec(product);
        for v in &mut values {
            *v = v.clamp(-1.0, 1.0);
        }
        Correlation {
            features,
            values,
            constant,
        }
    }
}

/// How much of the absolute correlation lies within positions.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockScore {
    /// Sum of |r| over pairs of distinct features at the same position, divided by the sum of
    /// |r| over all pairs of distinct features.
    pub share: f64,
    /// The share a matrix without structure would have: the fraction of pairs of distinct
    /// varying features that lie at the same position, `sum_p m_p (m_p - 1) / (M (M - 1))` with
    /// `m_p` varying features at position `p` and `M` in all. Constant features are left out:
    /// their correlations are 0 and count in neither sum of `share`. With every feature varying
    /// this is `(width - 1) / (positions * width - 1)`.
    pub chance: f64,
    /// `(share - chance) / (1 - chance)`: 0 without structure, 1 when all the correlation lies
    /// within positions.
    pub blockiness: f64,
}

impl BlockScore {
    /// Scores `|correlation|` with blocks of `width` features (one block per token position).
    pub fn of(correlation: &Correlation, width: usize) -> BlockScore {
        let n = correlation.features;
        assert!(
            width > 0 && n.is_multiple_of(width),
            "{n} features do not split into positions of width {width}"
        );
        let (mut inside, mut total) = (0.0f64, 0.0f64);
        for row in 0..n {
            let values = &correlation.values[row * n..(row + 1) * n];
            let block = row / width;
            for (column, &v) in values.iter().enumerate() {
                if column != row {
                    let v = f64::from(v.abs());
                    total += v;
                    if column / width == block {
                        inside += v;
                    }
                }
            }
        }
        let mut varying = vec![width; n / width];
        for &feature in &correlation.constant {
            varying[feature / width] -= 1;
        }
        let all: usize = varying.iter().sum();
        let same_position: usize = varying.iter().map(|&m| m * m.saturating_sub(1)).sum();
        let chance = same_position as f64 / (all * all.saturating_sub(1)).max(1) as f64;
        let share = if total > 0.0 { inside / total } else { 0.0 };
        BlockScore {
            share,
            chance,
            blockiness: (share - chance) / (1.0 - chance),
        }
    }
}

fn to_vec<const D: usize>(tensor: Tensor<D>) -> Vec<f32> {
    tensor
        .into_data()
        .try_to_vec::<f32>()
        .expect("float activations read back as f32")
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::Device;
    use rand::{Rng, SeedableRng, rngs::StdRng};

    fn samples(rows: Vec<Vec<f32>>) -> Tensor<2> {
        let features = rows[0].len();
        let shape = [rows.len(), features];
        let flat: Vec<f32> = rows.into_iter().flatten().collect();
        Tensor::from_data(TensorData::new(flat, shape), &Device::default())
    }

    fn noise(rng: &mut StdRng) -> f32 {
        rng.random::<f32>() - 0.5
    }

    #[test]
    fn identical_features_correlate_exactly_and_independent_ones_barely() {
        let mut rng = StdRng::seed_from_u64(1);
        let rows = (0..4000)
            .map(|_| {
                let a = noise(&mut rng);
                vec![a, a, 3.0 * a - 2.0, -a, noise(&mut rng)]
            })
            .collect();
        let c = Correlation::of(samples(rows));
        for column in 0..3 {
            assert!(
                (c.get(0, column) - 1.0).abs() < 1e-5,
                "{}",
                c.get(0, column)
            );
        }
        assert!((c.get(0, 3) + 1.0).abs() < 1e-5);
        assert!(c.get(0, 4).abs() < 0.05, "independent: {}", c.get(0, 4));
        assert!(c.constant.is_empty());
    }

    /// Columns that hold one value in every row, as position 0 of a causal model does: the mean
    /// of 2,000 equal floats is rarely that float exactly, so a test on the spread around the
    /// computed mean would find a small "variation" in many of them and correlate them with each
    /// other at |r| = 1.
    #[test]
    fn every_column_of_repeated_values_is_constant() {
        let mut rng = StdRng::seed_from_u64(4);
        let values: Vec<f32> = (0..64).map(|_| 10.0 * noise(&mut rng)).collect();
        let rows = (0..2000)
            .map(|_| {
                let mut row = values.clone();
                row.push(noise(&mut rng));
                row
            })
            .collect();
        let c = Correlation::of(samples(rows));
        assert_eq!(c.constant, (0..64).collect::<Vec<_>>());
        assert!(c.values[..64 * 65].iter().all(|&v| v == 0.0));
        assert!((c.get(64, 64) - 1.0).abs() < 1e-5);
    }

    /// A causal model's position 0 is constant; without structure elsewhere the score must be
    /// 0, so chance counts only the varying features.
    #[test]
    fn a_constant_position_does_not_raise_the_score_of_noise() {
        let mut rng = StdRng::seed_from_u64(5);
        let (positions, width) = (5, 8);
        let rows = (0..4000)
            .map(|_| {
                let mut row = vec![3.0; width];
                row.extend((width..positions * width).map(|_| noise(&mut rng)));
                row
            })
            .collect();
        let correlation = Correlation::of(samples(rows));
        assert_eq!(correlation.constant.len(), width);
        let score = BlockScore::of(&correlation, width);
        assert!((score.chance - 7.0 / 31.0).abs() < 1e-12, "{score:?}");
        assert!(score.blockiness.abs() < 0.01, "{score:?}");
    }

    #[test]
    fn constant_features_are_reported_and_zero() {
        let mut rng = StdRng::seed_from_u64(2);
        let rows = (0..100)
            .map(|_| vec![noise(&mut rng), 7.0, noise(&mut rng)])
            .collect();
        let c = Correlation::of(samples(rows));
        assert_eq!(c.constant, vec![1]);
        for i in 0..3 {
            assert_eq!(c.get(1, i), 0.0);
            assert_eq!(c.get(i, 1), 0.0);
        }
        assert!(c.values.iter().all(|v| v.is_finite()));
    }

    /// `positions` blocks of `width` features; each position's features are noisy copies of one
    /// hidden value of that position (block-diagonal correlation).
    fn blocky(positions: usize, width: usize, rng: &mut StdRng) -> Vec<Vec<f32>> {
        (0..2000)
            .map(|_| {
                let hidden: Vec<f32> = (0..positions).map(|_| noise(rng)).collect();
                (0..positions * width)
                    .map(|f| hidden[f / width] + 0.1 * noise(rng))
                    .collect()
            })
            .collect()
    }

    #[test]
    fn block_diagonal_structure_scores_near_one_and_shuffled_clearly_lower() {
        let mut rng = StdRng::seed_from_u64(3);
        let (positions, width) = (6, 8);
        let rows = blocky(positions, width, &mut rng);
        let score = BlockScore::of(&Correlation::of(samples(rows.clone())), width);
        assert!(score.blockiness > 0.9, "{score:?}");

        // The same features in a random order: the blocks are spread over all positions.
        let mut order: Vec<usize> = (0..positions * width).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, rng.random_range(0..=i));
        }
        let shuffled = rows
            .iter()
            .map(|row| order.iter().map(|&f| row[f]).collect())
            .collect();
        let mixed = BlockScore::of(&Correlation::of(samples(shuffled)), width);
        assert!(mixed.blockiness < 0.4, "{mixed:?}");
        assert!((score.chance - 7.0 / 47.0).abs() < 1e-12);
    }
}
