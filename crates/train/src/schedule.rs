//! nanoGPT's learning-rate schedule: linear warm-up from 0, cosine decay to a floor, then flat.

use burn::lr_scheduler::{LrScheduler, LrSchedulerRecord};

use crate::config::TrainConfig;

#[derive(Debug, Clone, PartialEq)]
pub struct WarmupCosine {
    peak: f64,
    floor: f64,
    warmup: usize,
    decay_end: usize,
    /// The optimiser step the next call to `step` is for.
    iteration: usize,
}

impl WarmupCosine {
    pub fn new(config: &TrainConfig) -> Self {
        Self {
            peak: config.learning_rate,
            floor: config.min_learning_rate,
            warmup: config.warmup_steps,
            decay_end: config.decay_steps,
            iteration: 0,
        }
    }

    /// The learning rate of optimiser step `it` (counted from 0).
    pub fn rate(&self, it: usize) -> f64 {
        if it < self.warmup {
            return self.peak * it as f64 / self.warmup as f64;
        }
        if it > self.decay_end {
            return self.floor;
        }
        let progress = (it - self.warmup) as f64 / (self.decay_end - self.warmup) as f64;
        let coefficient = 0.5 * (1.0 + (std::f64::consts::PI * progress).cos());
        self.floor + coefficient * (self.peak - self.floor)
    }
}

impl LrScheduler for WarmupCosine {
    fn step(&mut self) -> f64 {
        let rate = self.rate(self.iteration);
        self.iteration += 1;
        rate
    }

    fn to_record(&self) -> LrSchedulerRecord {
        LrSchedulerRecord::new().with_scalar("iteration", self.iteration)
    }

    fn load_record(&mut self, record: LrSchedulerRecord) {
        if let Some(iteration) = record.scalar::<usize>("iteration") {
            self.iteration = iteration;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_the_reference_schedule() {
        let schedule = WarmupCosine::new(&TrainConfig::default());
        assert_eq!(schedule.rate(0), 0.0);
        assert!((schedule.rate(50) - 5e-4).abs() < 1e-12);
        assert!((schedule.rate(100) - 1e-3).abs() < 1e-12);
        let middle = schedule.rate(2_550);
        assert!((middle - 5.5e-4).abs() < 1e-9, "{middle}");
        assert!((schedule.rate(5_000) - 1e-4).abs() < 1e-12);
        assert_eq!(schedule.rate(7_000), 1e-4);
    }

    #[test]
    fn resumes_where_it_stopped() {
        let mut first = WarmupCosine::new(&TrainConfig::default());
        let rates: Vec<f64> = (0..150).map(|_| first.step()).collect();
        let mut resumed = WarmupCosine::new(&TrainConfig::default());
        resumed.load_record(first.to_record());
        assert_eq!(resumed.step(), first.rate(150));
        let expected: Vec<f64> = (0..150).map(|it| first.rate(it)).collect();
        assert_eq!(rates, expected, "step n returns the rate of step n");
    }
}
