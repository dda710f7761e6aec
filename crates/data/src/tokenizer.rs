//! Character-level tokenizer over the symbols that occur in the task.

use std::fmt;

/// The vocabulary, in token-id order: newline, `$`, `+`, `=`, then the digits.
///
/// The reference code uses all printable ASCII characters, but only these 14 ever occur; the
/// smaller vocabulary changes nothing about the task and keeps the embedding small.
pub const VOCAB: [char; 14] = [
    '\n', '$', '+', '=', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9',
];

/// A character or token id outside the vocabulary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenError {
    UnknownChar { ch: char, position: usize },
    UnknownId { id: usize, position: usize },
}

impl fmt::Display for TokenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenError::UnknownChar { ch, position } => write!(
                f,
                "character {ch:?} at position {position} is not in the vocabulary (digits, '+', '=', '$' and newline)"
            ),
            TokenError::UnknownId { id, position } => write!(
                f,
                "token id {id} at position {position} is outside the vocabulary of {} symbols",
                VOCAB.len()
            ),
        }
    }
}

impl std::error::Error for TokenError {}

#[derive(Debug, Clone, Copy, Default)]
pub struct Tokenizer;

impl Tokenizer {
    pub const fn vocab_size() -> usize {
        VOCAB.len()
    }

    /// The id of one character, if it is in the vocabulary.
    pub fn id(ch: char) -> Option<usize> {
        match ch {
            '\n' => Some(0),
            '$' => Some(1),
            '+' => Some(2),
            '=' => Some(3),
            '0'..='9' => Some(4 + (ch as usize - '0' as usize)),
            _ => None,
        }
    }

    pub fn encode(text: &str) -> Result<Vec<usize>, TokenError> {
        text.chars()
            .enumerate()
            .map(|(position, ch)| Self::id(ch).ok_or(TokenError::UnknownChar { ch, position }))
            .collect()
    }

    pub fn decode(ids: &[usize]) -> Result<String, TokenError> {
        ids.iter()
            .enumerate()
            .map(|(position, &id)| {
                VOCAB
                    .get(id)
                    .copied()
                    .ok_or(TokenError::UnknownId { id, position })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_symbol() {
        let text: String = VOCAB.iter().collect();
        let ids = Tokenizer::encode(&text).unwrap();
        assert_eq!(ids, (0..14).collect::<Vec<_>>());
        assert_eq!(Tokenizer::decode(&ids).unwrap(), text);
    }

    #[test]
    fn unknown_characters_and_ids_are_named() {
        let err = Tokenizer::encode("$12-3").unwrap_err();
        assert_eq!(
            err,
            TokenError::UnknownChar {
                ch: '-',
                position: 3
            }
        );
        assert!(err.to_string().contains("'-'"));
        let err = Tokenizer::decode(&[4, 14]).unwrap_err();
        assert_eq!(
            err,
            TokenError::UnknownId {
                id: 14,
                position: 1
            }
        );
    }
}
