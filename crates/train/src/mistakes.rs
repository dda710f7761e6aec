//! The test pairs a model answers wrong, what it writes for each, and how the mistakes spread
//! over the pairs' carries, the operands' and the answer's lengths and the answer's characters
//! (`symbreak eval --mistakes FILE`).

use std::fmt::Write as _;

use burn::tensor::Device;
use symbreak_data::{Pair, TaskConfig, carries, digit_count};
use symbreak_model::Decoder;

use crate::batches::eval_groups;
use crate::evaluate::{Checking, EVAL_ROWS, correct_rows, generate_answers};

/// One test pair answered wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mistake {
    pub pair: Pair,
    /// The answer text and its closing `$`, as the task writes it (`"001$"` for 50+50).
    pub expected: String,
    /// What the model writes after `=`, up to and including its first `$`.
    pub written: String,
}

impl Mistake {
    /// The first character, counted from 0 in writing order, where the model departs from the
    /// expected answer (with reversed answers, 0 is the ones digit).
    pub fn first_wrong(&self) -> usize {
        self.expected
            .chars()
            .zip(self.written.chars())
            .take_while(|(expected, written)| expected == written)
            .count()
    }
}

/// Every pair of `pairs` the model answers wrong (judged as `checking` says), with what greedy
/// decoding writes for it, sorted by operands.
pub fn find(
    model: &Decoder,
    task: &TaskConfig,
    pairs: &[Pair],
    checking: Checking,
    device: &Device,
) -> Vec<Mistake> {
    let mut wrong: Vec<Pair> = Vec::new();
    for group in eval_groups(task, pairs, EVAL_ROWS) {
        let correct = correct_rows(model, &group.to_batch(device), checking);
        wrong.extend(
            group
                .pairs
                .iter()
                .zip(correct)
                .filter(|(_, correct)| !correct)
                .map(|(pair, _)| *pair),
        );
    }
    wrong.sort_by_key(|pair| (pair.a, pair.b));
    let written = generate_answers(model, task, &wrong, device);
    wrong
        .into_iter()
        .zip(written)
        .map(|(pair, written)| Mistake {
            pair,
            expected: task.written_answer(pair.sum()),
            written,
        })
        .collect()
}

/// The mistakes as CSV, one line each: operands, sum, carries, the expected and the written
/// answer, and the first wrong character (from 1). A newline the model writes shows as `\n`.
pub fn to_csv(mistakes: &[Mistake]) -> String {
    let mut csv = String::from("a,b,sum,carries,expected,written,first_wrong\n");
    for m in mistakes {
        let _ = writeln!(
            csv,
            "{},{},{},{},{},{},{}",
            m.pair.a,
            m.pair.b,
            m.pair.sum(),
            carries(m.pair.a, m.pair.b),
            m.expected,
            m.written.replace('\n', "\\n"),
            m.first_wrong() + 1
        );
    }
    csv
}

/// A readable account of where the mistakes fall among `pairs` (the pairs they were drawn
/// from): the share wrong per number of carries, per operand lengths (`3+2`: a three-digit
/// plus a two-digit number) and per answer length, and how many mistakes first go wrong at
/// each character of the answer.
pub fn summary(mistakes: &[Mistake], pairs: &[Pair], task: &TaskConfig) -> String {
    let mut text = String::new();
    let share = |label: String, of: &dyn Fn(Pair) -> bool| {
        let total = pairs.iter().filter(|&&p| of(p)).count();
        let wrong = mistakes.iter().filter(|m| of(m.pair)).count();
        let percent = if total == 0 {
            0.0
        } else {
            100.0 * wrong as f64 / total as f64
        };
        format!("  {label:<22} {wrong:>5} of {total:>5} wrong ({percent:.2}%)\n")
    };
    text.push_str("by carries:\n");
    for count in 0..=task.digits {
        text += &share(format!("{count} carries"), &|p| carries(p.a, p.b) == count);
    }
    text.push_str("by operand lengths:\n");
    for a_len in 1..=task.digits as usize {
        for b_len in 1..=task.digits as usize {
            let lengths = |p: Pair| digit_count(p.a) == a_len && digit_count(p.b) == b_len;
            if pairs.iter().any(|&p| lengths(p)) {
                text += &share(format!("{a_len}+{b_len} digits"), &lengths);
            }
        }
    }
    text.push_str("by answer length:\n");
    let longest = task.digits as usize + 1;
    for answer_len in 1..=longest {
        let digits = |p: Pair| digit_count(p.sum()) == answer_len;
        if pairs.iter().any(|&p| digits(p)) {
            text += &share(format!("{answer_len} digits"), &digits);
        }
    }
    let order = if task.reverse {
        "written order: the ones digit first"
    } else {
        "written order: the leading digit first"
    };
    let _ = writeln!(text, "first wrong character ({order}):");
    for position in 0..=longest {
        let count = mistakes
            .iter()
            .filter(|m| m.first_wrong() == position)
            .count();
        if count > 0 {
            let _ = writeln!(text, "  character {:<12} {count:>5}", position + 1);
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mistake(a: u64, b: u64, written: &str) -> Mistake {
        let task = TaskConfig::default();
        Mistake {
            pair: Pair { a, b },
            expected: task.answer_text(a + b) + "$",
            written: written.to_string(),
        }
    }

    #[test]
    fn first_wrong_counts_the_characters_written_right() {
        assert_eq!(mistake(50, 50, "002$").first_wrong(), 2);
        assert_eq!(mistake(50, 50, "901$").first_wrong(), 0);
        assert_eq!(mistake(50, 50, "001").first_wrong(), 3, "no closing $");
        assert_eq!(
            mistake(999, 1, "00010$").first_wrong(),
            4,
            "one digit too many"
        );
    }

    #[test]
    fn csv_has_one_line_per_mistake_and_escapes_newlines() {
        let csv = to_csv(&[mistake(50, 50, "00\n$"), mistake(999, 1, "000$")]);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines[0], "a,b,sum,carries,expected,written,first_wrong");
        assert_eq!(lines[1], "50,50,100,1,001$,00\\n$,3");
        assert_eq!(lines[2], "999,1,1000,3,0001$,000$,4");
        assert_eq!(lines.len(), 3);
    }

    #[test]
    fn summary_shares_are_of_the_pairs_in_each_group() {
        let pairs = [
            Pair { a: 1, b: 2 },
            Pair { a: 10, b: 20 },
            Pair { a: 50, b: 50 },
            Pair { a: 999, b: 1 },
        ];
        let text = summary(
            &[mistake(50, 50, "002$"), mistake(999, 1, "000$")],
            &pairs,
            &TaskConfig::default(),
        );
        for line in [
            "0 carries                  0 of     2 wrong (0.00%)",
            "1 carries                  1 of     1 wrong (100.00%)",
            "4 digits                   1 of     1 wrong (100.00%)",
            "3+1 digits                 1 of     1 wrong (100.00%)",
            "2+2 digits                 1 of     2 wrong (50.00%)",
            "character 3                1",
            "character 4                1",
        ] {
            assert!(text.contains(line), "{line:?} is missing from:\n{text}");
        }
    }
}
