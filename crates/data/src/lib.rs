//! The 3-digit addition task of Lee et al. (2024) as the paper uses it.
//!
//! - [`tokenizer`]: the 14-symbol character vocabulary.
//! - [`task`]: the training and test sets, deterministic from a seed.
//! - [`windows`]: training batches: random windows of the joined stream, or whole examples.
//! - [`prompt`]: evaluation prompts and the parser that reads an answer back.

pub mod prompt;
pub mod task;
pub mod tokenizer;
pub mod windows;

pub use prompt::{Prompt, parse_answer};
pub use task::{AdditionTask, Pair, TaskConfig, TaskError, carries, digit_count};
pub use tokenizer::{TokenError, Tokenizer};
pub use windows::{
    Batching, IGNORED, LossTargets, WindowBatch, WindowSampler, answer_tokens, masks_targets,
};
