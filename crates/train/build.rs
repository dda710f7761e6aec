//! Puts the git commit this crate is built from into `SYMBREAK_COMMIT`, which every run writes
//! into its result.json beside the seed, config and backend. Outside a git checkout (or without
//! git) it is "unknown". Uncommitted changes are not detected: the commit is the one HEAD pointed
//! to at the last build.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(output.stdout).ok()?;
    (output.status.success() && !text.trim().is_empty()).then(|| text.trim().to_string())
}

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=SYMBREAK_COMMIT={commit}");
    // Build again when HEAD moves: a commit, a checkout, a pull.
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        for path in ["HEAD", "refs/heads", "packed-refs"] {
            println!("cargo:rerun-if-changed={dir}/{path}");
        }
    } else {
        println!("cargo:rerun-if-changed=build.rs");
    }
}
