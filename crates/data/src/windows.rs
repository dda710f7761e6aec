//! Training batches, cut in one of two ways:
//!
//! - [`Batching::Windows`], the reference: the shuffled training lines joined into one character
//!   stream, each row a random window of `block` characters (rows begin and end mid-example),
//!   the target the same window shifted by one.
//! - [`Batching::Examples`]: each row one random training line from position 0, padded with
//!   newlines to the longest line; fewer wasted tokens, faster learning on a CPU budget.
//! - [`Batching::Offsets`]: each row one random training line at a random offset in a row of
//!   `block` tokens, newlines before and after: every line is whole (as with examples) and seen at
//!   many positions (as with windows).
//!
//! Either way the loss can count every next token, or only the answer tokens (the answer and its
//! closing `$`); uncounted targets are set to [`IGNORED`]. A batch is a pure function of the
//! sampler's seed and the index of its first row, so a resumed run sees exactly the batches an
//! uninterrupted run would have seen.

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::tokenizer::{TokenError, Tokenizer};

/// How training rows are cut from the training lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Batching {
    Windows,
    Examples,
    Offsets,
}

/// Which next-token targets the loss counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LossTargets {
    /// Every position (the reference).
    All,
    /// Only the answer digits and the closing `$`.
    Answer,
}

/// The target id of positions the loss skips: the newline, which no answer contains.
pub const IGNORED: i64 = 0;

#[derive(Debug, Clone)]
pub struct WindowSampler {
    batching: Batching,
    targets: LossTargets,
    /// Windows: the joined stream. Examples and offsets: the lines, each padded with newlines
    /// to the longest line's length.
    tokens: Vec<i64>,
    /// Whether each token of `tokens` is part of an answer (digits after `=`, closing `$`).
    in_answer: Vec<bool>,
    width: usize,
    /// Examples and offsets: tokens per padded line in `tokens`.
    line_len: usize,
    seed: u64,
}

/// `rows` rows of `width` tokens, row-major.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowBatch {
    pub rows: usize,
    pub block: usize,
    pub inputs: Vec<i64>,
    pub targets: Vec<i64>,
}

/// Whether batches cut this way hold [`IGNORED`] targets: with answer-only loss, or with the
/// padding of whole lines.
pub fn masks_targets(batching: Batching, targets: LossTargets) -> bool {
    targets == LossTargets::Answer || batching != Batching::Windows
}

/// Marks the answer tokens of a token sequence: those after `=` up to and including the next `$`.
pub fn answer_tokens(tokens: &[i64]) -> Vec<bool> {
    let (equals, dollar) = (
        Tokenizer::id('=').unwrap() as i64,
        Tokenizer::id('$').unwrap() as i64,
    );
    let mut inside = false;
    tokens
        .iter()
        .map(|&t| {
            if inside {
                inside = t != dollar;
                true
            } else {
                inside = t == equals;
                false
            }
        })
        .collect()
}

impl WindowSampler {
    /// Windows of `block` tokens over the lines shuffled with `seed` (the reference batching).
    pub fn new(lines: &[String], block: usize, seed: u64) -> Result<Self, TokenError> {
        Self::with(lines, Batching::Windows, LossTargets::All, block, seed)
    }

    pub fn with(
        lines: &[String],
        batching: Batching,
        targets: LossTargets,
        block: usize,
        seed: u64,
    ) -> Result<Self, TokenError> {
        let mut order: Vec<&String> = lines.iter().collect();
        order.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
        let encoded: Vec<Vec<i64>> = order
            .iter()
            .map(|line| {
                Ok(Tokenizer::encode(line)?
                    .into_iter()
                    .map(|id| id as i64)
                    .collect())
            })
            .collect::<Result<_, TokenError>>()?;
        let longest = encoded.iter().map(Vec::len).max().unwrap_or(1);
        let padded = || {
            encoded
                .iter()
                .flat_map(|line| {
                    line.iter()
                        .copied()
                        .chain(std::iter::repeat(IGNORED))
                        .take(longest)
                })
                .collect()
        };
        let (tokens, width) = match batching {
            Batching::Windows => (encoded.concat(), block),
            Batching::Examples => (padded(), (longest - 1).min(block)),
            Batching::Offsets => {
                assert!(
                    block + 1 >= longest,
                    "a row of {block} tokens cannot hold a line of {longest} and its target"
                );
                (padded(), block)
            }
        };
        assert!(
            tokens.len() > width,
            "the training lines ({} tokens) must be longer than a row ({width})",
            tokens.len()
        );
        let in_answer = answer_tokens(&tokens);
        Ok(Self {
            batching,
            targets,
            tokens,
            in_answer,
            width,
            line_len: longest,
            seed,
        })
    }

    /// The joined (windows) or padded (examples) training tokens.
    pub fn stream(&self) -> &[i64] {
        &self.tokens
    }

    /// The seed of the line order and the row placements.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Tokens per row.
    pub fn block(&self) -> usize {
        self.width
    }

    /// Whether some targets are [`IGNORED`] (the loss must skip that id).
    pub fn masks_targets(&self) -> bool {
        masks_targets(self.batching, self.targets)
    }

    /// Where row number `index` starts in [`Self::stream`].
    pub fn start(&self, index: u64) -> usize {
        self.placement(index).0
    }

    /// Row number `index`'s start in [`Self::stream`] and, for offsets, the newlines before it.
    fn placement(&self, index: u64) -> (usize, usize) {
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        rng.set_stream(index);
        match self.batching {
            Batching::Windows => (rng.random_range(0..self.tokens.len() - self.width), 0),
            Batching::Examples => {
                let lines = self.tokens.len() / self.line_len;
                (rng.random_range(0..lines) * self.line_len, 0)
            }
            Batching::Offsets => {
                let lines = self.tokens.len() / self.line_len;
                let start = rng.random_range(0..lines) * self.line_len;
                (start, rng.random_range(0..=self.width + 1 - self.line_len))
            }
        }
    }

    /// Inputs and targets of row number `index`.
    pub fn window(&self, index: u64) -> (Vec<i64>, Vec<i64>) {
        let (start, offset) = self.placement(index);
        let taken = match self.batching {
            Batching::Windows => self.width + 1,
            Batching::Examples | Batching::Offsets => self.line_len,
        };
        // Where slot `i` of the row (0..=width) comes from in `tokens`; None: a padding newline.
        let source = |i: usize| {
            i.checked_sub(offset)
                .filter(|&k| k < taken)
                .map(|k| start + k)
        };
        let inputs = (0..self.width)
            .map(|i| source(i).map_or(IGNORED, |p| self.tokens[p]))
            .collect();
        let targets = (1..=self.width)
            .map(|i| match source(i) {
                Some(p) if self.targets == LossTargets::All || self.in_answer[p] => self.tokens[p],
                _ => IGNORED,
            })
            .collect();
        (inputs, targets)
    }

    /// The rows `first..first + rows` as one batch.
    pub fn batch(&self, first: u64, rows: usize) -> WindowBatch {
        let mut inputs = Vec::with_capacity(rows * self.width);
        let mut targets = Vec::with_capacity(rows * self.width);
        for index in first..first + rows as u64 {
            let (x, y) = self.window(index);
            inputs.extend(x);
            targets.extend(y);
        }
        WindowBatch {
            rows,
            block: self.width,
            inputs,
            targets,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::{AdditionTask, TaskConfig};

    fn lines() -> Vec<String> {
        AdditionTask::generate(&TaskConfig::default())
            .unwrap()
            .train_lines()
    }

    fn sampler(seed: u64) -> WindowSampler {
        WindowSampler::new(&lines(), 32, seed).unwrap()
    }

    fn text(ids: &[i64]) -> String {
        Tokenizer::decode(&ids.iter().map(|&t| t as usize).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn stream_holds_every_line_once() {
        let lines = lines();
        let sampler = WindowSampler::new(&lines, 32, 7).unwrap();
        let text = text(sampler.stream());
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

    #[test]
    fn answer_tokens_are_the_digits_after_equals_and_the_closing_dollar() {
        let ids: Vec<i64> = Tokenizer::encode("3$12+5=71$\n$1+1=2$\n")
            .unwrap()
            .into_iter()
            .map(|t| t as i64)
            .collect();
        let marked: String = answer_tokens(&ids)
            .iter()
            .zip("3$12+5=71$\n$1+1=2$\n".chars())
            .map(|(&inside, c)| if inside { c } else { '.' })
            .collect();
        assert_eq!(marked, ".......71$......2$.");
    }

    #[test]
    fn answer_only_targets_skip_everything_else() {
        let s =
            WindowSampler::with(&lines(), Batching::Windows, LossTargets::Answer, 32, 1).unwrap();
        assert!(s.masks_targets());
        let all =
            WindowSampler::with(&lines(), Batching::Windows, LossTargets::All, 32, 1).unwrap();
        let (masked, unmasked) = (s.batch(0, 16), all.batch(0, 16));
        assert_eq!(
            masked.inputs, unmasked.inputs,
            "the same windows either way"
        );
        let newline = Tokenizer::id('\n').unwrap() as i64;
        let (mut checked, mut counted) = (0, 0);
        for row in 0..16 {
            let x = &masked.inputs[row * 32..(row + 1) * 32];
            let y = &masked.targets[row * 32..(row + 1) * 32];
            let y_all = &unmasked.targets[row * 32..(row + 1) * 32];
            // The row's 33 tokens. From the first newline on every line is whole, so
            // `answer_tokens` (tested above) says which of them the loss must count.
            let stream: Vec<i64> = x.iter().copied().chain([y_all[31]]).collect();
            let start = stream.iter().position(|&t| t == newline).unwrap() + 1;
            for (k, &answer) in answer_tokens(&stream[start..]).iter().enumerate() {
                // Target `i` is the token after input `i`: stream position `i + 1`.
                let i = start + k - 1;
                let expected = if answer { y_all[i] } else { IGNORED };
                assert_eq!(
                    y[i],
                    expected,
                    "row {row}, target {i} of {:?}",
                    text(&stream)
                );
                checked += 1;
                counted += usize::from(answer);
            }
        }
        assert!(
            checked > 300 && counted > 100,
            "{checked} targets checked, {counted} counted"
        );
    }

    #[test]
    fn examples_start_each_row_at_a_line() {
        let s =
            WindowSampler::with(&lines(), Batching::Examples, LossTargets::Answer, 256, 5).unwrap();
        assert_eq!(
            s.block(),
            14,
            "the longest line, $999+999=8991$ and its newline, has 15 tokens"
        );
        let batch = s.batch(0, 8);
        for row in 0..8 {
            let x = &batch.inputs[row * 14..(row + 1) * 14];
            let y = &batch.targets[row * 14..(row + 1) * 14];
            let line = text(x);
            assert!(line.starts_with('$'), "{line:?}");
            let (question, rest) = line.split_once('=').unwrap();
            let answer: String = rest.chars().take_while(|&c| c != '$').collect();
            let expected: String = y
                .iter()
                .filter(|&&t| t != IGNORED)
                .map(|&t| text(&[t]))
                .collect();
            assert_eq!(expected, format!("{answer}$"), "row {row} ({question})");
        }
    }

    #[test]
    fn offsets_put_one_whole_line_at_varied_positions() {
        let s =
            WindowSampler::with(&lines(), Batching::Offsets, LossTargets::Answer, 24, 5).unwrap();
        assert!(s.masks_targets());
        assert_eq!(s.block(), 24);
        let batch = s.batch(0, 200);
        let mut offsets = std::collections::HashSet::new();
        for row in 0..200 {
            let x = &batch.inputs[row * 24..(row + 1) * 24];
            let y = &batch.targets[row * 24..(row + 1) * 24];
            let row_text = text(x);
            let offset = row_text.find('$').unwrap();
            offsets.insert(offset);
            let line = row_text[offset..].trim_end_matches('\n');
            assert!(
                row_text[..offset].chars().all(|c| c == '\n'),
                "only newlines before the line: {row_text:?}"
            );
            assert_eq!(line.matches('$').count(), 2, "one whole line: {row_text:?}");
            let answer = line.split_once('=').unwrap().1;
            let expected: String = y
                .iter()
                .filter(|&&t| t != IGNORED)
                .map(|&t| text(&[t]))
                .collect();
            assert_eq!(expected, answer, "row {row}: {row_text:?}");
        }
        // A line of up to 15 tokens (with its newline) starts anywhere from 0 to 24 + 1 - 15.
        assert_eq!(offsets, (0..=10).collect());
    }
}
