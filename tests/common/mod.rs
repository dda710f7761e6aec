//! What every end-to-end test needs: the `symbreak` binary under test, and its output as text.

// Each test binary compiles its own copy of this module and uses only part of it.
#![allow(dead_code)]

use std::process::{Command, Output};

/// The `symbreak` binary cargo built for these tests.
pub fn symbreak() -> Command {
    Command::new(env!("CARGO_BIN_EXE_symbreak"))
}

/// Standard output, then standard error: what a failed assertion shows.
pub fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Runs `command`, fails the test (showing its output) unless it succeeds, and returns
/// its output as text.
pub fn succeeds(command: &mut Command) -> String {
    let output = command.output().expect("symbreak runs");
    assert!(output.status.success(), "{}", text(&output));
    text(&output)
}
