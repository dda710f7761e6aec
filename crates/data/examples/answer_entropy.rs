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

use symbreak_data::{AdditionTask, TaskConfig};

/// One answer token in its line: the operands, the answer written so far, and the token itself.
struct AnswerToken<'a> {
    a: &'a str,
    b: &'a str,
    written: &'a str,
    next: char,
}

impl AnswerToken<'_> {
    fn index(&self) -> usize {
        self.written.len()
    }

    fn lengths(&self) -> (usize, usize) {
        (self.a.len(), self.b.len())
    }

    fn ones_digits(&self) -> (Option<char>, Option<char>) {
        (self.a.chars().last(), self.b.chars().last())
    }
}

fn main() {
    let task = AdditionTask::generate(&TaskConfig::default()).expect("the default task is valid");
    let lines = task.train_lines();
    let tokens: Vec<AnswerToken> = lines.iter().flat_map(|line| answer_tokens(line)).collect();

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
            format!("{:?}", (t.index(), t.lengths(), t.written))
        }),
        ("its index, the operands' lengths and ones digits", |t| {
            format!("{:?}", (t.index(), t.lengths(), t.ones_digits()))
        }),
    ];

    println!(
        "{} training lines, {} answer tokens; ln 11 = {:.4}",
        lines.len(),
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

/// The answer tokens of one line `$a+b=answer$`.
fn answer_tokens(line: &str) -> Vec<AnswerToken<'_>> {
    let body = line.trim_end().trim_start_matches('$');
    let (question, answer) = body.split_once('=').expect("a training line has `=`");
    let (a, b) = question.split_once('+').expect("a training line has `+`");
    answer
        .char_indices()
        .map(|(i, next)| AnswerToken {
            a,
            b,
            written: &answer[..i],
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
