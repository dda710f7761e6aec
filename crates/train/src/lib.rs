//! Training and evaluation runs of the symbreak decoder with Burn's learner.
//!
//! - [`config`]: a run's configuration (TOML presets and overrides).
//! - [`batches`]: the loaders the learner iterates over.
//! - [`step`]: the training and evaluation steps, the optimiser and gradient clipping.
//! - [`schedule`]: the learning-rate schedule.
//! - [`metrics`], [`renderer`]: exact-match accuracy, divergence, `metrics.csv` and progress.
//! - [`evaluate`]: exact-match accuracy of greedy answers (teacher-forced for causal models).
//! - [`mistakes`]: the test pairs a model answers wrong, and where they fall.
//! - [`run`]: the run folder: training, resuming, finishing, evaluating and predicting.
//! - [`bench`](mod@bench): timings of training steps and evaluation (`symbreak bench`).
//! - [`sweep`]: grids of runs, planned, sharded and run in parallel processes.

pub mod backend;
pub mod batches;
pub mod bench;
pub mod config;
pub mod evaluate;
pub mod metrics;
pub mod mistakes;
pub mod renderer;
pub mod run;
pub mod schedule;
pub mod step;
pub mod sweep;

pub use backend::Backend;
pub use config::{ConfigError, Override, RunConfig, TrainConfig};
pub use evaluate::Score;
pub use run::{RunError, RunResult};
