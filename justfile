# symbreak recipes. Install just with `cargo install just` (each recipe shows the cargo command).

# Cargo features that pick the compiled-in backends (ndarray is the default).
features := "ndarray"
# Runs at a time in a sweep (the machine's threads are split between them).
jobs := "1"

default:
    @just --list

# The whole test suite (what CI runs).
test:
    cargo test --release --workspace --locked

# The paper's residual sweep (160 runs), then its tables: `just sweep-residuals` (CPU preset) or `just sweep-residuals paper`.
sweep-residuals preset="quick":
    cargo run --release --features {{features}} -- sweep experiments/sweep-residuals.toml --preset {{preset}} --jobs {{jobs}}
    cargo run --release --features {{features}} -- tables sweeps/sweep-residuals-{{preset}}

# Figures 3-5 (correlation heatmaps, blockiness scores) and training curves from a sweep, into its figures/ folder.
figures preset="quick":
    cargo run --release --features {{features}} -- figures sweeps/sweep-residuals-{{preset}}

# Time training steps and test-set evaluation on every compiled-in backend; writes bench.json.
bench *args="":
    cargo run --release --features {{features}} -- bench {{args}}

# Tables 1 and 2 from whatever runs of a sweep have finished.
tables preset="quick":
    cargo run --release --features {{features}} -- tables sweeps/sweep-residuals-{{preset}}

# Train one run of a preset (paper, quick or smoke), with extra options, e.g. `just train quick --positional none`.
train preset="quick" *args="":
    cargo run --release --features {{features}} -- train --preset {{preset}} {{args}}

# Print a preset's resolved configuration and parameter count.
model preset="paper":
    cargo run --release --features {{features}} -- model --preset {{preset}}
