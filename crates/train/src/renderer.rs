//! What a run shows and records as it trains: `metrics.csv` (one row per evaluation) and, on a
//! terminal, a progress bar with step, loss, accuracy and time left; without a terminal (CI, a
//! pipe, a cluster job), one plain line per evaluation and nothing else.

use std::collections::HashMap;
use std::fs::File;
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::time::Instant;

use burn::train::LearnerSummary;
use burn::train::logger::{EvaluationProgressLogger, TrainingProgressLogger};
use burn::train::metric::{MetricDefinition, MetricId, NumericEntry};
use burn::train::renderer::{
    EvaluationName, MetricState, MetricsRenderer, MetricsRendererEvaluation,
    MetricsRendererTraining,
};
use indicatif::{ProgressBar, ProgressStyle};

use crate::metrics::EXACT_MATCH;

pub const METRICS_HEADER: &str =
    "step,train_loss,valid_loss,train_accuracy,exact_match,learning_rate,elapsed_seconds";

/// Where the run stands when the renderer starts (non-zero when it resumes).
#[derive(Debug, Clone, Copy)]
pub struct Resumed {
    pub step: usize,
    pub elapsed_seconds: f64,
}

/// A progress bar on standard error when it is a terminal; `None` without one (CI, a pipe, a
/// cluster job), where callers print plain lines instead.
pub fn terminal_bar(len: u64, template: &str) -> Option<ProgressBar> {
    std::io::stderr().is_terminal().then(|| {
        let bar = ProgressBar::new(len);
        bar.set_style(ProgressStyle::with_template(template).expect("a valid template"));
        bar
    })
}

pub struct RunRenderer {
    csv: File,
    names: HashMap<MetricId, String>,
    /// End-of-pass values by split and metric name.
    finals: HashMap<(bool, String), f64>,
    /// Latest per-step training values by metric name.
    latest: HashMap<String, f64>,
    split_is_train: bool,
    rows_per_step: usize,
    steps_per_pass: usize,
    total_steps: usize,
    pass_start: usize,
    started: Instant,
    resumed: Resumed,
    bar: Option<ProgressBar>,
}

impl RunRenderer {
    /// Appends to `metrics_csv` (the caller has trimmed it to the resumed step).
    pub fn new(
        metrics_csv: &Path,
        rows_per_step: usize,
        steps_per_pass: usize,
        total_steps: usize,
        resumed: Resumed,
    ) -> std::io::Result<Self> {
        let fresh = !metrics_csv.exists();
        let mut csv = File::options()
            .create(true)
            .append(true)
            .open(metrics_csv)?;
        if fresh {
            writeln!(csv, "{METRICS_HEADER}")?;
        }
        let bar = terminal_bar(
            total_steps as u64,
            "{bar:30} step {pos}/{len} | {msg} | {elapsed_precise}, {eta} left",
        );
        if let Some(bar) = &bar {
            bar.set_position(resumed.step as u64);
        }
        Ok(Self {
            csv,
            names: HashMap::new(),
            finals: HashMap::new(),
            latest: HashMap::new(),
            split_is_train: true,
            rows_per_step,
            steps_per_pass,
            total_steps,
            pass_start: resumed.step,
            started: Instant::now(),
            resumed,
            bar,
        })
    }

    fn record(&mut self, train: bool, state: MetricState) {
        let MetricState::Numeric(entry, Some(value)) = state else {
            return;
        };
        let Some(name) = self.names.get(&entry.metric_id).cloned() else {
            return;
        };
        match value {
            NumericEntry::Final(v) => {
                self.finals.insert((train, name), v);
            }
            other if train => {
                self.latest.insert(name, other.current());
            }
            _ => {}
        }
    }

    fn final_value(&self, train: bool, name: &str) -> Option<f64> {
        self.finals.get(&(train, name.to_string())).copied()
    }

    fn elapsed(&self) -> f64 {
        self.resumed.elapsed_seconds + self.started.elapsed().as_secs_f64()
    }
}

fn cell(value: Option<f64>) -> String {
    value.map(|v| format!("{v:.6}")).unwrap_or_default()
}

impl MetricsRendererTraining for RunRenderer {
    fn update_train(&mut self, state: MetricState) {
        self.record(true, state);
    }

    fn update_valid(&mut self, state: MetricState) {
        self.record(false, state);
    }

    fn on_train_end(
        &mut self,
        _: Option<LearnerSummary>,
    ) -> Result<(), Box<dyn std::error::Error>> {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
        Ok(())
    }
}

impl MetricsRendererEvaluation for RunRenderer {
    fn update_test(&mut self, _: EvaluationName, _: MetricState) {}
}

impl TrainingProgressLogger for RunRenderer {
    fn start(&mut self, _: usize, _: usize, _: Option<usize>, _: Option<&str>) {}

    /// The end of a pass: one row in `metrics.csv`, one line or a new bar message.
    fn update_epoch(&mut self, _epoch: usize) {
        let step = (self.pass_start + self.steps_per_pass).min(self.total_steps);
        self.pass_start = step;
        let train_loss = self.final_value(true, "Loss");
        let valid_loss = self.final_value(false, "Loss");
        let accuracy = self.final_value(true, "Accuracy");
        let exact = self.final_value(false, EXACT_MATCH);
        let lr = self.latest.get("Learning Rate").copied();
        let elapsed = self.elapsed();
        let row = format!(
            "{step},{},{},{},{},{},{elapsed:.1}",
            cell(train_loss),
            cell(valid_loss),
            cell(accuracy),
            cell(exact),
            lr.map(|v| format!("{v:e}")).unwrap_or_default(),
        );
        // A metrics file that cannot be written is reported, but does not stop training.
        if let Err(error) = writeln!(self.csv, "{row}").and_then(|_| self.csv.flush()) {
            eprintln!("warning: cannot append to metrics.csv: {error}");
        }
        let show = |v: Option<f64>| v.map(|v| format!("{v:.4}")).unwrap_or_else(|| "-".into());
        let line = format!(
            "step {step}/{} | train loss {} | valid loss {} | token acc {}% | exact match {}% | {elapsed:.0}s",
            self.total_steps,
            show(train_loss),
            show(valid_loss),
            accuracy
                .map(|v| format!("{v:.1}"))
                .unwrap_or_else(|| "-".into()),
            exact
                .map(|v| format!("{v:.1}"))
                .unwrap_or_else(|| "-".into()),
        );
        match &self.bar {
            Some(bar) => bar.println(line),
            None => println!("{line}"),
        }
    }

    fn start_split(&mut self, split: &str, _: usize) {
        self.split_is_train = split.eq_ignore_ascii_case("train");
    }

    fn update_split(&mut self, items_processed: usize) {
        if !self.split_is_train {
            return;
        }
        if let Some(bar) = &self.bar {
            let step = self.pass_start + items_processed / self.rows_per_step;
            bar.set_position(step as u64);
            let loss = self.latest.get("Loss").copied().unwrap_or(f64::NAN);
            let accuracy = self.latest.get("Accuracy").copied().unwrap_or(f64::NAN);
            bar.set_message(format!("loss {loss:.4} | token acc {accuracy:.1}%"));
        }
    }

    fn end_split(&mut self) {}

    fn end(&mut self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }

    fn log_event_training(&mut self, _: String) {}
}

impl EvaluationProgressLogger for RunRenderer {
    fn start_global_progress(&mut self, _: usize) {}
    fn start_test(&mut self, _: &str, _: usize) {}
    fn update_test_progress(&mut self, _: usize) {}
    fn end_test(&mut self) {}
    fn end_global_progress(&mut self) {}
    fn log_event_evaluation(&mut self, _: String) {}
}

impl MetricsRenderer for RunRenderer {
    fn manual_close(&mut self) {}

    fn register_metric(&mut self, definition: MetricDefinition) {
        self.names
            .insert(definition.metric_id, definition.name.to_string());
    }
}
