//! Evaluation prompts (`$a+b=`) and the parser that turns generated text back into a number.

use crate::task::{Pair, TaskConfig};
use crate::tokenizer::Tokenizer;

/// One evaluation question: the prompt tokens and the answer a correct model writes after them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prompt {
    pub pair: Pair,
    /// `$a+b=` as token ids.
    pub tokens: Vec<usize>,
    /// The answer text followed by the closing `$`, as token ids.
    pub answer: Vec<usize>,
}

impl Prompt {
    pub fn new(config: &TaskConfig, pair: Pair) -> Self {
        let text = format!("${}+{}=", pair.a, pair.b);
        let answer = config.written_answer(pair.sum());
        Self {
            pair,
            tokens: Tokenizer::encode(&text).expect("prompts use only vocabulary symbols"),
            answer: Tokenizer::encode(&answer).expect("answers use only vocabulary symbols"),
        }
    }

    /// Whether `generated` (the text after the prompt) begins with exactly the answer text and
    /// its closing `$`: another spelling of the same number (`"0010$"` for `"001$"`) is wrong.
    pub fn is_correct(&self, generated: &str) -> bool {
        let answer = Tokenizer::decode(&self.answer).expect("answers use only vocabulary symbols");
        generated.starts_with(&answer)
    }
}

/// Reads a number from generated text (for showing what a model wrote; correctness is
/// [`Prompt::is_correct`]): the digits up to the closing `$` (reversed back when the
/// task writes answers reversed). `None` without a closing `$`, with no digits, or with anything
/// but digits before it.
pub fn parse_answer(generated: &str, reversed: bool) -> Option<u64> {
    let (digits, _) = generated.split_once('$')?;
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let ordered: String = if reversed {
        digits.chars().rev().collect()
    } else {
        digits.to_string()
    };
    ordered.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_and_answer_tokens() {
        let config = TaskConfig::default();
        let prompt = Prompt::new(&config, Pair { a: 50, b: 50 });
        assert_eq!(Tokenizer::decode(&prompt.tokens).unwrap(), "$50+50=");
        assert_eq!(Tokenizer::decode(&prompt.answer).unwrap(), "001$");
        assert!(prompt.is_correct("001$\n$1"));
        assert!(!prompt.is_correct("100$"));
        assert!(
            !prompt.is_correct("0010$"),
            "the right number, spelled otherwise"
        );
        assert!(!prompt.is_correct("001"), "no closing $");
    }

    #[test]
    fn parses_only_a_closed_answer() {
        assert_eq!(parse_answer("975$\n", true), Some(579));
        assert_eq!(parse_answer("579$", false), Some(579));
        assert_eq!(parse_answer("001$", true), Some(100));
        assert_eq!(parse_answer("975", true), None);
        assert_eq!(parse_answer("$", true), None);
        assert_eq!(parse_answer("9+5$", true), None);
    }
}
