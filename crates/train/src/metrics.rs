//! The metrics this project adds to Burn's: exact-match accuracy of generated answers, and a
//! guard that ends a run whose loss is no longer finite.

use std::sync::Arc;

use burn::tensor::{Tensor, TensorReadError};
use burn::train::Interrupter;
use burn::train::metric::state::{FormatOptions, NumericMetricState};
use burn::train::metric::{
    Metric, MetricAttributes, MetricMetadata, MetricName, Numeric, NumericAttributes, NumericEntry,
    SerializedEntry,
};

use crate::evaluate::Score;

/// The name under which exact-match accuracy is logged.
pub const EXACT_MATCH: &str = "Exact Match";

/// Exact-match accuracy (%) of greedily generated answers over an evaluation pass.
#[derive(Clone)]
pub struct ExactMatchMetric {
    name: MetricName,
    state: NumericMetricState,
}

impl ExactMatchMetric {
    pub fn new() -> Self {
        Self {
            name: Arc::new(EXACT_MATCH.to_string()),
            state: NumericMetricState::default(),
        }
    }

    fn format(&self) -> FormatOptions {
        FormatOptions::new(self.name()).unit("%").precision(2)
    }
}

impl Default for ExactMatchMetric {
    fn default() -> Self {
        Self::new()
    }
}

impl Metric for ExactMatchMetric {
    type Input = Score;

    fn name(&self) -> MetricName {
        self.name.clone()
    }

    fn attributes(&self) -> MetricAttributes {
        NumericAttributes {
            unit: Some("%".into()),
            higher_is_better: true,
        }
        .into()
    }

    fn update(
        &mut self,
        score: &Score,
        _: &MetricMetadata,
    ) -> Result<SerializedEntry, TensorReadError> {
        self.state.update(score.percent(), score.total);
        Ok(self.state.compute_update(self.format()))
    }

    fn compute(&mut self) -> Result<SerializedEntry, TensorReadError> {
        Ok(self.state.compute_final(self.format()))
    }

    fn clear(&mut self) {
        self.state.reset()
    }
}

impl Numeric for ExactMatchMetric {
    fn value(&self) -> Option<NumericEntry> {
        Some(self.state.current_value())
    }

    fn running_value(&self) -> Option<NumericEntry> {
        Some(self.state.running_value())
    }

    fn final_value(&self) -> NumericEntry {
        self.state.final_value()
    }
}

/// The loss of one step, as the divergence guard sees it.
pub struct StepLoss(pub Tensor<1>);

/// Stops training at the first step whose loss is NaN or infinite (runs with residuals removed
/// may diverge; a sweep must go on). The run then records itself as diverged.
#[derive(Clone)]
pub struct DivergenceGuard {
    interrupter: Interrupter,
}

/// The reason given to the interrupter, by which a run knows it diverged.
pub const DIVERGED: &str = "the training loss is not finite";

impl DivergenceGuard {
    pub fn new(interrupter: Interrupter) -> Self {
        Self { interrupter }
    }
}

impl Metric for DivergenceGuard {
    type Input = StepLoss;

    fn name(&self) -> MetricName {
        Arc::new("Divergence Guard".to_string())
    }

    fn update(
        &mut self,
        loss: &StepLoss,
        _: &MetricMetadata,
    ) -> Result<SerializedEntry, TensorReadError> {
        let value = loss.0.clone().mean().try_into_scalar::<f64>()?;
        if !value.is_finite() {
            self.interrupter.stop(Some(DIVERGED));
        }
        let text = if value.is_finite() { "ok" } else { "diverged" };
        Ok(SerializedEntry::new(text.to_string(), text.to_string()))
    }

    fn compute(&mut self) -> Result<SerializedEntry, TensorReadError> {
        Ok(SerializedEntry::new("ok".to_string(), "ok".to_string()))
    }

    fn clear(&mut self) {}
}
