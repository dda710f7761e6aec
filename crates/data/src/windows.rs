//! Training batches as the reference cuts them: the shuffled training lines joined into one
//! character stream, each row a random window of `block` characters (rows begin and end
//! mid-example), the target the same window shifted by one.
//!
//! A window is a pure function of the sampler's seed and the window's index, so a run that
//! resumes at step `s` sees exactly the batches an uninterrupted run would have seen.

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::tokenizer::{TokenError, Tokenizer};

#[derive(Debug, Clone)]
pub struct WindowSampler {
    stream: Vec<i64>,
    block: usize,
    seed: u64,
}

/// `rows` windows of `block` tokens, row-major.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowBatch {
    pub rows: usize,
    pub block: usize,
    pub inputs: Vec<i64>,
    pub targets: Vec<i64>,
}

impl WindowSampler {
    /// Shuffles `lines` with `seed`, joins them and tokenizes the stream.
    pub fn new(lines: &[String], block: usize, seed: u64) -> Result<Self, TokenError> {
        let mut order: Vec<&String> = lines.iter().collect();
        order.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
        let text: String = order.into_iter().map(String::as_str).collect();
        let stream = Tokenizer::encode(&text)?
            .into_iter()
            .map(|id| id as i64)
            .collect::<Vec<_>>();
        assert!(
            stream.len() > block,
            "the training stream ({} characters) must be longer than a block ({block})",
            stream.len()
        );
        Ok(Self {
            stream,
            block,
            seed,
        })
    }

    pub fn stream(&self) -> &[i64] {
        &self.stream
    }

    pub fn block(&self) -> usize {
        self.block
    }

    /// The start of window number `index` in the stream.
    pub fn start(&self, index: u64) -> usize {
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        rng.set_stream(index);
        rng.random_range(0..self.stream.len() - self.block)
    }

    /// Inputs and targets of window number `index`.
    pub fn window(&self, index: u64) -> (&[i64], &[i64]) {
        let start = self.start(index);
        (
            &self.stream[start..start + self.block],
            &self.stream[start + 1..start + self.block + 1],
        )
    }

    /// The windows `first..first + rows` as one batch.
    pub fn batch(&self, first: u64, rows: usize) -> WindowBatch {
        let mut inputs = Vec::with_capacity(rows * self.block);
        let mut targets = Vec::with_capacity(rows * self.block);
        for index in first..first + rows as u64 {
            let (x, y) = self.window(index);
            inputs.extend_from_slice(x);
            targets.extend_from_slice(y);
        }
        WindowBatch {
            rows,
            block: self.block,
            inputs,
            targets,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::{AdditionTask, TaskConfig};

    fn sampler(seed: u64) -> WindowSampler {
        let task = AdditionTask::generate(&TaskConfig::default()).unwrap();
        WindowSampler::new(&task.train_lines(), 32, seed).unwrap()
    }

    #[test]
    fn stream_holds_every_line_once() {
        let task = AdditionTask::generate(&TaskConfig::default()).unwrap();
        let lines = task.train_lines();
        let sampler = WindowSampler::new(&lines, 32, 7).unwrap();
        let text = Tokenizer::decode(
            &sampler.stream().iter().map(|&t| t as usize).collect::<Vec<_>>(),
        )
        .unwrap();
        let mut from_stream: Vec<&str> = text.split_terminator('\n').collect();
        let mut original: Vec<&str> = lines.iter().map(|l| l.trim_end()).collect();
        assert_ne!(from_stream, original, "the lines are shuffled");
        from_stream.sort_unstable();
        original.sort_unstable();
        assert_eq!(from_stream, original);
    }

    #[test]
    fn targets_are_inputs_shifted_by_one() {
        let s = sampler(3);
        let batch = s.batch(10, 4);
        assert_eq!(batch.inputs.len(), 4 * 32);
        for row in 0..4 {
            let x = &batch.inputs[row * 32..(row + 1) * 32];
            let y = &batch.targets[row * 32..(row + 1) * 32];
            assert_eq!(&x[1..], &y[..31]);
            let start = s.start(10 + row as u64);
            assert_eq!(y[31], s.stream()[start + 32]);
        }
    }

    #[test]
    fn windows_depend_only_on_seed_and_index() {
        let (a, b) = (sampler(3), sampler(3));
        assert_eq!(a.batch(100, 8), b.batch(100, 8));
        assert_eq!(a.batch(100, 8).inputs[32..64], b.batch(101, 1).inputs[..]);
        assert_ne!(a.batch(100, 8), sampler(4).batch(100, 8));
        let starts: std::collections::HashSet<_> = (0..200).map(|i| a.start(i)).collect();
        assert!(starts.len() > 190, "windows start at varied places");
    }
}
