//! Reference levels for the answer-only training loss: the lowest cross-entropy (in nats) and the
//! highest next-token accuracy that a model can reach on the training lines when it sees only part
//! of each line. A run whose loss sits on one of these levels does no better than a model that sees
//! only that much.
//!
//! Each training line counts once and each of its answer tokens (the answer digits and the
//! closing `$`) counts once, as with `batching = "offsets"` or `"examples"` and `loss = "answer"`.
//!
//! Run: `cargo run --release -p symbreak-data --example answer_entropy`

use std::collections::HashMap;

use symbreak_data::{AdditionTask, Pair, TaskConfig, digit_count};

/// One answer token of a training line: the operands, the answer written so far, and the token.
struct AnswerToken {
    pair: Pair,
    written: String,
    next: char,
}

impl AnswerToken {
    fn index(&self) -> usize {
        self.written.len()
    }

    fn lengths(&self) -> (usize, usize) {
        (digit_count(self.pair.a), digit_count(self.pair.b))
    }

    fn ones_digits(&self) -> (u64, u64) {
        (self.pair.a % 10, self.pair.b % 10)
    }
}

fn main() {
    let task = AdditionTask::generate(&TaskConfig::default()).expect("the default task is valid");
    let tokens: Vec<AnswerToken> = task
        .train
        .iter()
        .flat_map(|&pair| answer_tokens(&task.config, pair))
        .collect();

    // Each level groups the answer tokens by what the model sees (a key written as text).
    type Key = fn(&AnswerToken) -> String;
    let levels: [(&str, Key); 5] = [
        ("nothing (the same prediction everywhere)", |_| {
            String::new()
        }),
        ("the answer token's index", |t| format!("{:?}", t.index())),
        ("its index and the operands' lengths", |t| {
            format!("{:?}", (t.index(), t.lengths()))
        }),
        ("its index, the operands' lengths, the answer so far", |t| {
            format!("{:?}", (t.index(), t.lengths(), &t.written))
        }),
        ("its index, the operands' lengths and ones digits", |t| {
            format!("{:?}", (t.index(), t.lengths(), t.ones_digits()))
        }),
    ];

    println!(
        "{} training lines, {} answer tokens; ln 11 = {:.4}",
        task.train.len(),
        tokens.len(),
        11f64.ln()
    );
    println!("| the model sees | loss (nats) | accuracy (%) |");
    println!("|---|---|---|");
    for (name, key) in levels {
        let (entropy, accuracy) = conditional_entropy(&tokens, key);
        println!("| {name} | {entropy:.4} | {:.2} |", 100.0 * accuracy);
    }
}

/// The answer tokens of one training line: what a correct model writes after `=`.
fn answer_tokens(config: &TaskConfig, pair: Pair) -> Vec<AnswerToken> {
    let answer = config.written_answer(pair.sum());
    answer
        .char_indices()
        .map(|(i, next)| AnswerToken {
            pair,
            written: answer[..i].to_string(),
            next,
        })
        .collect()
}

/// H(next token | key) over all tokens, and the accuracy of predicting each key's most common
/// next token.
fn conditional_entropy(tokens: &[AnswerToken], key: fn(&AnswerToken) -> String) -> (f64, f64) {
    let mut counts: HashMap<String, HashMap<char, usize>> = HashMap::new();
    for token in tokens {
        *counts
            .entry(key(token))
            .or_default()
            .entry(token.next)
            .or_default() += 1;
    }
    let total = tokens.len() as f64;
    let mut entropy = 0.0;
    let mut correct = 0;
    for next_counts in counts.values() {
        let group: usize = next_counts.values().sum();
        for &n in next_counts.values() {
            entropy -= n as f64 * (n as f64 / group as f64).ln();
        }
        correct += next_counts.values().max().copied().unwrap_or(0);
    }
    (entropy / total, correct as f64 / total)
}
