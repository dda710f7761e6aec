//! The training and test sets of the addition task (Lee et al. 2024, "reverse", balanced).
//!
//! With the default configuration (3 digits, 10,000 lines each) this is the reference setup:
//! a training set of the 100 one-digit pairs, 900 pairs below 100 and the rest from 0-999,
//! chosen so that each carry count 0-3 occurs on exactly 2,500 of the 10,000 lines; a test set of
//! 10,000 pairs from 0-999 that do not occur in the training set. Both depend only on the seed.

use std::collections::HashSet;
use std::fmt;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// How the data sets are made. The defaults are the reference setup's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TaskConfig {
    /// Digits of the largest operands (3: pairs from 0-999).
    pub digits: u32,
    /// Write the answer reversed (least significant digit first), as the reference does.
    pub reverse: bool,
    /// Lines in the training set.
    pub train_size: usize,
    /// Pairs in the test set.
    pub test_size: usize,
    /// Seed of the data sets (fixed across training seeds, as the reference uses one data file).
    pub seed: u64,
}

impl Default for TaskConfig {
    fn default() -> Self {
        Self {
            digits: 3,
            reverse: true,
            train_size: 10_000,
            test_size: 10_000,
            seed: 0,
        }
    }
}

/// Two operands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Pair {
    pub a: u64,
    pub b: u64,
}

impl Pair {
    pub fn sum(self) -> u64 {
        self.a + self.b
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskError {
    Invalid { field: &'static str, reason: String },
    CannotBalance { carries: u32, missing: usize },
}

impl fmt::Display for TaskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TaskError::Invalid { field, reason } => write!(f, "data.{field}: {reason}"),
            TaskError::CannotBalance { carries, missing } => write!(
                f,
                "data.train_size: cannot find {missing} more distinct pairs with {carries} carries; \
                 choose a smaller train_size or more digits"
            ),
        }
    }
}

impl std::error::Error for TaskError {}

/// How many digits `n` is written with (0 is written with one).
pub fn digit_count(n: u64) -> usize {
    n.to_string().len()
}

/// How many column additions of `a + b` carry a one into the next column.
pub fn carries(a: u64, b: u64) -> u32 {
    let (mut a, mut b, mut carry, mut count) = (a, b, 0, 0);
    while a > 0 || b > 0 {
        carry = u64::from((a % 10 + b % 10 + carry) >= 10);
        count += carry as u32;
        a /= 10;
        b /= 10;
    }
    count
}

/// The training and test pairs of one data configuration.
#[derive(Debug, Clone)]
pub struct AdditionTask {
    pub config: TaskConfig,
    pub train: Vec<Pair>,
    pub test: Vec<Pair>,
}

impl TaskConfig {
    pub fn validate(&self) -> Result<(), TaskError> {
        let invalid = |field, reason: &str| {
            Err(TaskError::Invalid {
                field,
                reason: reason.to_string(),
            })
        };
        if !(2..=9).contains(&self.digits) {
            return invalid("digits", "must be between 2 and 9");
        }
        if self.train_size < self.fixed_lines() {
            return invalid(
                "train_size",
                &format!(
                    "must be at least {} (the one-digit pairs{} come first)",
                    self.fixed_lines(),
                    if self.digits >= 3 {
                        " and 900 pairs below 100"
                    } else {
                        ""
                    }
                ),
            );
        }
        if self.test_size == 0 {
            return invalid("test_size", "must be at least 1");
        }
        let all_pairs = self.limit().saturating_mul(self.limit());
        if (self.train_size as u64).saturating_add(self.test_size as u64) > all_pairs {
            return invalid(
                "test_size",
                &format!(
                    "train_size + test_size exceeds the {all_pairs} distinct pairs of {}-digit numbers",
                    self.digits
                ),
            );
        }
        Ok(())
    }

    /// One past the largest operand.
    pub fn limit(&self) -> u64 {
        10u64.pow(self.digits)
    }

    /// Lines that do not depend on the carry balance: one-digit pairs, and pairs below 100.
    fn fixed_lines(&self) -> usize {
        if self.digits >= 3 { 1_000 } else { 100 }
    }

    /// The text of one example line, without its newline: `$a+b=answer$`.
    pub fn line(&self, pair: Pair) -> String {
        format!("${}+{}={}$", pair.a, pair.b, self.answer_text(pair.sum()))
    }

    /// The most tokens a correct answer takes: the longest sum (`digits + 1` digits) and its
    /// closing `$`; greedy decoding writes this many.
    pub fn max_answer_tokens(&self) -> usize {
        self.digits as usize + 2
    }

    /// What a correct model writes after `=`: the answer text and its closing `$`.
    pub fn written_answer(&self, sum: u64) -> String {
        self.answer_text(sum) + "$"
    }

    /// The answer as written after `=`: reversed digits by default.
    pub fn answer_text(&self, sum: u64) -> String {
        let digits = sum.to_string();
        if self.reverse {
            digits.chars().rev().collect()
        } else {
            digits
        }
    }
}

impl AdditionTask {
    pub fn generate(config: &TaskConfig) -> Result<Self, TaskError> {
        config.validate()?;
        let mut rng = ChaCha8Rng::seed_from_u64(config.seed);
        let train = training_pairs(config, &mut rng)?;
        let test = test_pairs(config, &train, &mut rng);
        Ok(Self {
            config: config.clone(),
            train,
            test,
        })
    }

    /// The training lines, each ending in a newline.
    pub fn train_lines(&self) -> Vec<String> {
        self.train
            .iter()
            .map(|&pair| self.config.line(pair) + "\n")
            .collect()
    }
}

fn training_pairs(config: &TaskConfig, rng: &mut ChaCha8Rng) -> Result<Vec<Pair>, TaskError> {
    let mut seen = HashSet::new();
    let mut pairs = Vec::with_capacity(config.train_size);
    for a in 0..10 {
        for b in 0..10 {
            seen.insert(Pair { a, b });
            pairs.push(Pair { a, b });
        }
    }
    if config.digits >= 3 {
        while pairs.len() < 1_000 {
            let pair = random_pair(100, rng);
            if seen.insert(pair) {
                pairs.push(pair);
            }
        }
    }

    // Quotas so that every carry count 0..=digits ends up on an equal share of all lines.
    let classes = config.digits as usize + 1;
    let mut quota: Vec<usize> = (0..classes)
        .map(|c| config.train_size / classes + usize::from(c < config.train_size % classes))
        .collect();
    for pair in &pairs {
        let slot = &mut quota[carries(pair.a, pair.b) as usize];
        *slot = slot.saturating_sub(1);
    }
    let mut attempts_left = 2_000 * config.train_size;
    while pairs.len() < config.train_size && quota.iter().any(|&q| q > 0) {
        if attempts_left == 0 {
            let (carries, &missing) = quota.iter().enumerate().find(|(_, q)| **q > 0).unwrap();
            return Err(TaskError::CannotBalance {
                carries: carries as u32,
                missing,
            });
        }
        attempts_left -= 1;
        let pair = random_pair(config.limit(), rng);
        let slot = &mut quota[carries(pair.a, pair.b) as usize];
        if *slot > 0 && seen.insert(pair) {
            *slot -= 1;
            pairs.push(pair);
        }
    }
    // Only reached when an early stage overfilled a carry class: fill up without a quota.
    while pairs.len() < config.train_size {
        let pair = random_pair(config.limit(), rng);
        if seen.insert(pair) {
            pairs.push(pair);
        }
    }
    Ok(pairs)
}

fn test_pairs(config: &TaskConfig, train: &[Pair], rng: &mut ChaCha8Rng) -> Vec<Pair> {
    let mut seen: HashSet<Pair> = train.iter().copied().collect();
    let mut pairs = Vec::with_capacity(config.test_size);
    while pairs.len() < config.test_size {
        let pair = random_pair(config.limit(), rng);
        if seen.insert(pair) {
            pairs.push(pair);
        }
    }
    pairs
}

fn random_pair(limit: u64, rng: &mut ChaCha8Rng) -> Pair {
    Pair {
        a: rng.random_range(0..limit),
        b: rng.random_range(0..limit),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_carries_by_column() {
        assert_eq!(carries(123, 456), 0);
        assert_eq!(carries(5, 5), 1);
        assert_eq!(carries(50, 50), 1);
        assert_eq!(carries(99, 1), 2);
        assert_eq!(carries(999, 1), 3);
        assert_eq!(carries(555, 555), 3);
        assert_eq!(carries(0, 0), 0);
    }

    #[test]
    fn counts_the_digits_a_number_is_written_with() {
        assert_eq!(digit_count(0), 1);
        assert_eq!(digit_count(7), 1);
        assert_eq!(digit_count(10), 2);
        assert_eq!(digit_count(999), 3);
        assert_eq!(digit_count(1000), 4);
    }

    #[test]
    fn reference_training_set_has_the_reference_shape() {
        let task = AdditionTask::generate(&TaskConfig::default()).unwrap();
        assert_eq!(task.train.len(), 10_000);
        let one_digit = task.train.iter().filter(|p| p.a < 10 && p.b < 10).count();
        assert_eq!(one_digit, 100);
        assert!(task.train[..100].iter().all(|p| p.a < 10 && p.b < 10));
        assert!(
            task.train[100..1_000]
                .iter()
                .all(|p| p.a < 100 && p.b < 100)
        );
        assert!(task.train.iter().all(|p| p.a < 1_000 && p.b < 1_000));
        let mut per_carry = [0usize; 4];
        for p in &task.train {
            per_carry[carries(p.a, p.b) as usize] += 1;
        }
        assert_eq!(per_carry, [2_500; 4]);
        let distinct: HashSet<_> = task.train.iter().collect();
        assert_eq!(distinct.len(), 10_000);
    }

    #[test]
    fn test_set_is_disjoint_and_deterministic() {
        let config = TaskConfig::default();
        let task = AdditionTask::generate(&config).unwrap();
        assert_eq!(task.test.len(), 10_000);
        let train: HashSet<_> = task.train.iter().collect();
        let test: HashSet<_> = task.test.iter().collect();
        assert_eq!(test.len(), 10_000, "test pairs are distinct");
        assert!(train.is_disjoint(&test));
        let again = AdditionTask::generate(&config).unwrap();
        assert_eq!(again.train, task.train);
        assert_eq!(again.test, task.test);
        let other = AdditionTask::generate(&TaskConfig { seed: 1, ..config }).unwrap();
        assert_ne!(other.test, task.test);
    }

    #[test]
    fn lines_follow_the_reference_format() {
        let config = TaskConfig::default();
        assert_eq!(config.line(Pair { a: 123, b: 456 }), "$123+456=975$");
        assert_eq!(config.line(Pair { a: 50, b: 50 }), "$50+50=001$");
        assert_eq!(config.line(Pair { a: 0, b: 7 }), "$0+7=7$");
        let plain = TaskConfig {
            reverse: false,
            ..config
        };
        assert_eq!(plain.line(Pair { a: 50, b: 50 }), "$50+50=100$");
    }

    #[test]
    fn two_digit_variant_balances_three_carry_classes() {
        let config = TaskConfig {
            digits: 2,
            train_size: 3_000,
            test_size: 1_000,
            ..TaskConfig::default()
        };
        let task = AdditionTask::generate(&config).unwrap();
        let mut per_carry = [0usize; 3];
        for p in &task.train {
            assert!(p.a < 100 && p.b < 100);
            per_carry[carries(p.a, p.b) as usize] += 1;
        }
        assert_eq!(per_carry, [1_000; 3]);
    }

    #[test]
    fn impossible_sizes_are_rejected_with_the_field_name() {
        let err = TaskConfig {
            digits: 2,
            ..TaskConfig::default()
        }
        .validate()
        .unwrap_err();
        assert!(err.to_string().starts_with("data.test_size"), "{err}");
        let err = TaskConfig {
            train_size: 500,
            ..TaskConfig::default()
        }
        .validate()
        .unwrap_err();
        assert!(err.to_string().starts_with("data.train_size"), "{err}");
        let err = TaskConfig {
            digits: 12,
            ..TaskConfig::default()
        }
        .validate()
        .unwrap_err();
        assert!(err.to_string().starts_with("data.digits"), "{err}");
    }
}
