//! Exact-match accuracy: a greedy answer to `$a+b=` is right when its text, up to and including
//! the closing `$`, is exactly the task's answer text (`"001$"` for 50+50, reversed); a
//! non-canonical spelling of the right number (`"0010$"`) is wrong.
//!
//! Two ways to find out, with the same result for causal models:
//! - by generation: decode the answer token by token, feeding back each argmax;
//! - by teacher forcing: one forward pass over the whole line `$a+b=answer$`. With the causal
//!   mask the logits at a position depend only on the tokens up to it, so greedy decoding writes
//!   the true answer exactly when, with the true answer fed in, the argmax at every answer
//!   position (the closing `$` included) is the true next token. Bidirectional models see the
//!   answer from every position, so for them only generation counts.

use std::collections::HashMap;

use burn::tensor::{Device, Int, Tensor};
use symbreak_data::{Pair, TaskConfig, Tokenizer};
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

    pub fn of(correct_rows: &[bool]) -> Score {
        Score {
            correct: correct_rows.iter().filter(|&&ok| ok).count(),
            total: correct_rows.len(),
        }
    }
}

impl std::ops::Add for Score {
    type Output = Score;

    fn add(self, other: Score) -> Score {
        Score {
            correct: self.correct + other.correct,
            total: self.total + other.total,
        }
    }
}

/// How exact-match answers are checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checking {
    /// Teacher forcing for causal models, generation for bidirectional ones.
    Fastest,
    /// Token-by-token greedy generation for every model.
    Generation,
}

/// Which rows of the batch the model answers exactly.
pub fn correct_rows(model: &Decoder, batch: &EvalBatch, checking: Checking) -> Vec<bool> {
    if model.is_causal() && checking == Checking::Fastest {
        let [_, line_len] = batch.lines.dims();
        let logits = model.forward(batch.lines.clone().narrow(1, 0, line_len - 1));
        correct_by_teacher_forcing(logits, batch)
    } else {
        correct_by_generation(model, batch)
    }
}

/// Greedily decodes each prompt's answer length and compares it with the true answer.
pub fn correct_by_generation(model: &Decoder, batch: &EvalBatch) -> Vec<bool> {
    let answer_len = batch.answer_len();
    let prompts = batch.lines.clone().narrow(1, 0, batch.prompt_len);
    let generated = model.generate(prompts, answer_len);
    rows_equal(generated, batch.answers())
}

/// `logits`: the causal model's `[rows, line_len - 1, vocab]` output for the lines without their
/// last token. A row is right when the argmax at every answer position is the true next token.
pub fn correct_by_teacher_forcing(logits: Tensor<3>, batch: &EvalBatch) -> Vec<bool> {
    let [rows, _, _] = logits.dims();
    let answer_len = batch.answer_len();
    let predicted = logits
        .narrow(1, batch.prompt_len - 1, answer_len)
        .argmax(2)
        .reshape([rows, answer_len]);
    rows_equal(predicted, batch.answers())
}

/// Row-wise equality of two `[rows, n]` token tensors.
fn rows_equal(tokens: Tensor<2, Int>, expected: Tensor<2, Int>) -> Vec<bool> {
    let [rows, n] = tokens.dims();
    let tokens = read_ids(tokens);
    let expected = read_ids(expected);
    (0..rows)
        .map(|row| tokens[row * n..(row + 1) * n] == expected[row * n..(row + 1) * n])
        .collect()
}

/// Token ids read back to the host.
pub fn read_ids(tokens: Tensor<2, Int>) -> Vec<i64> {
    tokens
        .try_into_vec_as::<i64>()
        .expect("token ids can be read back from the device")
}

/// Token ids as text; `None` if an id is outside the vocabulary.
pub fn decode(ids: &[i64]) -> Option<String> {
    let ids: Vec<usize> = ids.iter().map(|&t| t as usize).collect();
    Tokenizer::decode(&ids).ok()
}

/// What the model writes after each pair's prompt, in the order of `pairs`: greedy decoding of
/// the longest answer's length, cut after the first `$` (an answer that never closes is kept
/// whole).
pub fn generate_answers(
    model: &Decoder,
    task: &TaskConfig,
    pairs: &[Pair],
    device: &Device,
) -> Vec<String> {
    let max_new_tokens = task.max_answer_tokens();
    let mut written: HashMap<Pair, String> = HashMap::with_capacity(pairs.len());
    for group in eval_groups(task, pairs, EVAL_ROWS) {
        let batch = group.to_batch(device);
        let prompts = batch.lines.narrow(1, 0, batch.prompt_len);
        let ids = read_ids(model.generate(prompts, max_new_tokens));
        for (row, pair) in group.pairs.iter().enumerate() {
            let text =
                decode(&ids[row * max_new_tokens..(row + 1) * max_new_tokens]).unwrap_or_default();
            let answer = match text.find('$') {
                Some(end) => text[..=end].to_string(),
                None => text,
            };
            written.insert(*pair, answer);
        }
    }
    pairs.iter().map(|pair| written[pair].clone()).collect()
}

/// Exact-match score over `pairs`, in batches of equal-length lines.
pub fn exact_match(
    model: &Decoder,
    task: &TaskConfig,
    pairs: &[Pair],
    checking: Checking,
    device: &Device,
) -> Score {
    eval_groups(task, pairs, EVAL_ROWS)
        .iter()
        .map(|group| Score::of(&correct_rows(model, &group.to_batch(device), checking)))
        .fold(Score::default(), std::ops::Add::add)
}
