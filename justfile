# symbreak recipes. Install just with `cargo install just` (each recipe shows the cargo command).

# The tensor backend of every recipe: ndarray, flex or wgpu, e.g. `just backend=wgpu sweep-residuals`.
# Its cargo feature is compiled in beside the default, flex.
backend := "flex"
# Runs at a time in a sweep (the machine's threads are split between them); `auto`: one per
# thread on the CPU backends, one on wgpu.
jobs := "auto"

default:
    @just --list

# The whole test suite on the default backend (flex): the README's test command.
test *args="":
    cargo test --release --workspace --locked {{args}}

# The backend tests with ndarray, flex and wgpu compiled in, unoptimised (an optimised wgpu build
# takes about an hour on two cores); CI runs both. wgpu needs a Vulkan driver: lavapipe (apt-get install mesa-vulkan-drivers) will do.
test-wgpu *args="":
    cargo test --profile ci-wgpu -p symbreak-train --features ndarray,flex,wgpu --test backends --locked {{args}}

# The paper's residual sweep (160 runs), then its tables: `just sweep-residuals` (CPU preset) or `just sweep-residuals paper`.
sweep-residuals preset="quick":
    cargo run --release --features {{backend}} -- sweep experiments/sweep-residuals.toml --preset {{preset}} --jobs {{jobs}} --backend {{backend}}
    cargo run --release --features {{backend}} -- tables sweeps/sweep-residuals-{{preset}}

# Tables 1 and 2 from whatever runs of a sweep have finished.
tables preset="quick":
    cargo run --release --features {{backend}} -- tables sweeps/sweep-residuals-{{preset}}

# Figures 3-5 (correlation heatmaps, blockiness scores) and training curves from a sweep, into its figures/ folder.
figures preset="quick":
    cargo run --release --features {{backend}} -- figures sweeps/sweep-residuals-{{preset}} --backend {{backend}}

# Copy a sweep's small files (configs, results, metrics, logs, tables, figures; no weights or checkpoints) into results/, to commit.
# Finished runs only (an unfinished one could not resume without its checkpoints); each run's curves.png stays behind too.
save-results preset="quick":
    #!/usr/bin/env bash
    set -euo pipefail
    mkdir -p results
    cd sweeps
    sweep=sweep-residuals-{{preset}}
    { find "$sweep" -mindepth 2 -maxdepth 2 -name result.json -printf '%h\n'; find "$sweep" -maxdepth 1 -type f; find "$sweep" -maxdepth 1 -name figures; } \
        | tar --exclude=learner --exclude='model.*' --exclude=lock --exclude='*.partial' --exclude=curves.png -cf - -T - | tar -C ../results -xf -
    echo "saved $(ls ../results/$sweep/*/result.json | wc -l) finished runs into results/$sweep"

# Put committed results back into sweeps/ (overwriting nothing), so that a sweep skips the runs they finished.
restore-results preset="quick":
    mkdir -p sweeps/sweep-residuals-{{preset}}
    cp -rn results/sweep-residuals-{{preset}}/. sweeps/sweep-residuals-{{preset}}/

# Time training steps and test-set evaluation (bench.json) on every compiled-in backend, e.g. `just bench --cases width128`.
bench *args="":
    cargo run --release --features ndarray,flex,{{backend}} -- bench {{args}}

# Train one run of a preset (a run configuration in experiments/ named without .toml: paper, quick, ...), with extra options, e.g. `just train quick --positional none`.
train preset="quick" *args="":
    cargo run --release --features {{backend}} -- train --preset {{preset}} --backend {{backend}} {{args}}

# Print a preset's resolved configuration and parameter count.
model preset="paper":
    cargo run --release --features {{backend}} -- model --preset {{preset}}
