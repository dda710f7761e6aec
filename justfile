# symbreak recipes. Install just with `cargo install just` (or run the cargo commands shown).

# Cargo features that pick the compiled-in backends (ndarray is the default).
features := "ndarray"

default:
    @just --list

# The whole test suite (what CI runs).
test:
    cargo test --release --workspace --locked

# Train one run of a preset (paper, quick or smoke), with extra options, e.g. `just train quick --positional none`.
train preset="quick" *args="":
    cargo run --release --features {{features}} -- train --preset {{preset}} {{args}}

# Print a preset's resolved configuration and parameter count.
model preset="paper":
    cargo run --release --features {{features}} -- model --preset {{preset}}
