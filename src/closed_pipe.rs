//! What happens when the reader of `symbreak`'s output goes away (`symbreak sweep ... --dry-run |
//! head`): the process ends quietly, as Unix tools do, instead of panicking in `println!`.
//!
//! Rust ignores SIGPIPE, so a write to a closed pipe returns an error that `println!` turns into
//! a panic with a backtrace hint. Restoring the default action ends the process at that write
//! instead. Either way it stops there; what it finished before (checkpoints, results) stays.

/// Lets a write to a closed pipe end the process quietly (Unix; elsewhere nothing changes).
pub fn end_quietly_on_closed_pipe() {
    #[cfg(unix)]
    // SAFETY: sets a signal's action to the system default; called before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
