//! Exact-match accuracy: greedy answers to `$a+b=` prompts, read back and compared with a + b.

use burn::tensor::Device;
use symbreak_data::{Pair, TaskConfig, Tokenizer, parse_answer};
use symbreak_model::Decoder;

use crate::batches::{EvalBatch, eval_groups};

/// Rows decoded together in one evaluation batch.
pub const EVAL_ROWS: usize = 1_000;

/// Correct answers out of a number of questions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Score {
    pub correct: usize,
    pub total: usize,
}

impl Score {
    pub fn percent(self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            100.0 * self.correct as f64 / self.total as f64
        }
    }

    pub fn add(self, other: Score) -> Score {
        Score {
            correct: self.correct + other.correct,
            total: self.total + other.total,
        }
    }
}

/// Greedily decodes `max_new_tokens` after each prompt of the batch and counts exact answers.
pub fn score_batch(
    model: &Decoder,
    task: &TaskConfig,
    batch: &EvalBatch,
    max_new_tokens: usize,
) -> Score {
    let prompts = batch.lines.clone().narrow(1, 0, batch.prompt_len);
    let generated = model.generate(prompts, max_new_tokens);
    let ids = generated
        .try_into_vec_as::<i64>()
        .expect("generated tokens can be read back");
    let correct = ids
        .chunks(max_new_tokens)
        .zip(&batch.pairs)
        .filter(|(row, pair)| answers(task, row, **pair))
        .count();
    Score {
        correct,
        total: batch.pairs.len(),
    }
}

/// Whether generated token ids spell the right answer (up to the closing `$`).
pub fn answers(task: &TaskConfig, generated: &[i64], pair: Pair) -> bool {
    decode(generated).is_some_and(|text| parse_answer(&text, task.reverse) == Some(pair.sum()))
}

/// Generated token ids as text; `None` if an id is outside the vocabulary.
pub fn decode(generated: &[i64]) -> Option<String> {
    let ids: Vec<usize> = generated.iter().map(|&t| t as usize).collect();
    Tokenizer::decode(&ids).ok()
}

/// Exact-match score over `pairs`, in batches of equal-length prompts.
pub fn exact_match(
    model: &Decoder,
    task: &TaskConfig,
    pairs: &[Pair],
    max_new_tokens: usize,
    device: &Device,
) -> Score {
    eval_groups(task, pairs, EVAL_ROWS)
        .iter()
        .map(|group| score_batch(model, task, &group.to_batch(device), max_new_tokens))
        .fold(Score::default(), Score::add)
}
