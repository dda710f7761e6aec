//! A run's configuration: the model, the data and the training recipe, read from a TOML file
//! (or a built-in preset) with command-line overrides, and checked before anything is written.

use std::fmt;
use std::path::Path;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use symbreak_data::{Batching, LossTargets, TaskConfig};
use symbreak_model::{AttentionMask, DecoderConfig, PositionalEncoding};

use crate::backend::Backend;

/// Everything that defines a run. Written beside its results as `config.toml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    pub model: DecoderConfig,
    pub data: TaskConfig,
    pub train: TrainConfig,
}

/// The optimisation recipe. Defaults are the reference setup's (nanoGPT as Lee et al. ran it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrainConfig {
    /// Seed of the initialisation, the dropout masks and the batches.
    pub seed: u64,
    /// Optimiser steps.
    pub steps: usize,
    /// Rows per batch.
    pub batch_size: usize,
    /// `windows` (the reference: random windows of `model.block_size` tokens of the joined
    /// training lines), `examples` (one training line per row, from position 0, padded) or
    /// `offsets` (one training line per row of `model.block_size` tokens, at a random offset).
    pub batching: Batching,
    /// `all` (the reference: every next token) or `answer` (the answer digits and closing `$`).
    pub loss: LossTargets,
    /// Peak learning rate, reached after the warm-up.
    pub learning_rate: f64,
    /// The learning rate at the end of the cosine decay.
    pub min_learning_rate: f64,
    /// Steps of linear warm-up from 0.
    pub warmup_steps: usize,
    /// The step at which the cosine decay reaches `min_learning_rate` (constant after it).
    pub decay_steps: usize,
    /// AdamW's decoupled weight decay, applied to the weights of Linear layers only.
    pub weight_decay: f64,
    pub beta1: f64,
    pub beta2: f64,
    /// Global gradient norm clipping; 0 turns it off.
    pub grad_clip: f64,
    /// Steps between evaluations (and checkpoints).
    pub eval_every: usize,
    /// Test prompts answered at each evaluation during training (the final one uses them all).
    pub eval_prompts: usize,
    /// The tensor backend (`ndarray`, `flex` or `wgpu`); unset: `--backend` or the build's
    /// default. `symbreak train` records the one it used in the run's `config.toml`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend: Option<Backend>,
}

impl Default for TrainConfig {
    fn default() -> Self {
        Self {
            seed: 1337,
            steps: 5_000,
            batch_size: 256,
            batching: Batching::Windows,
            loss: LossTargets::All,
            learning_rate: 1e-3,
            min_learning_rate: 1e-4,
            warmup_steps: 100,
            decay_steps: 5_000,
            weight_decay: 0.1,
            beta1: 0.9,
            beta2: 0.99,
            grad_clip: 1.0,
            eval_every: 250,
            eval_prompts: 500,
            backend: None,
        }
    }
}

impl TrainConfig {
    /// The learner's passes over the training loader: one per evaluation and checkpoint.
    pub fn passes(&self) -> usize {
        self.steps.div_ceil(self.eval_every)
    }

    /// The optimiser step at which pass `pass` (counted from 1) ends; the last pass is shorter
    /// when `steps` is not a multiple of `eval_every`.
    pub fn step_after_pass(&self, pass: usize) -> usize {
        (pass * self.eval_every).min(self.steps)
    }
}

/// A configuration that cannot be used, with the field that is wrong.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

fn error<T>(message: impl Into<String>) -> Result<T, ConfigError> {
    Err(ConfigError(message.into()))
}

/// The presets shipped in `experiments/`, compiled in so that `--preset` works from any folder.
pub const PRESETS: [(&str, &str); 5] = [
    ("paper", include_str!("../../../experiments/paper.toml")),
    ("quick", include_str!("../../../experiments/quick.toml")),
    (
        "quick-long",
        include_str!("../../../experiments/quick-long.toml"),
    ),
    (
        "quick-offsets",
        include_str!("../../../experiments/quick-offsets.toml"),
    ),
    ("smoke", include_str!("../../../experiments/smoke.toml")),
];

/// One `section.field = value` change to a configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Override {
    pub key: String,
    pub value: toml::Value,
}

impl Override {
    /// Parses `section.field=value`; the value is read as TOML (`3`, `1e-3`, `[3, 4]`, `true`) and
    /// as a plain string otherwise (`none`).
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        let Some((key, value)) = text.split_once('=') else {
            return error(format!(
                "override {text:?} is not of the form section.field=value (e.g. train.steps=500)"
            ));
        };
        Ok(Self::new(key.trim(), parse_value(value.trim())))
    }

    pub fn new(key: &str, value: toml::Value) -> Self {
        Self {
            key: key.to_string(),
            value,
        }
    }
}

fn parse_value(text: &str) -> toml::Value {
    toml::from_str::<toml::Table>(&format!("v = {text}"))
        .ok()
        .and_then(|mut table| table.remove("v"))
        .unwrap_or_else(|| toml::Value::String(text.to_string()))
}

impl RunConfig {
    pub fn preset(name: &str) -> Result<Self, ConfigError> {
        Self::preset_with(name, &[])
    }

    pub fn preset_with(name: &str, overrides: &[Override]) -> Result<Self, ConfigError> {
        match PRESETS.iter().find(|(preset, _)| *preset == name) {
            Some((_, text)) => Self::from_toml(text, overrides)
                .map_err(|e| ConfigError(format!("preset {name}: {e}"))),
            None => error(format!(
                "unknown preset {name:?}; the presets are {}",
                PRESETS.map(|(n, _)| n).join(", ")
            )),
        }
    }

    pub fn from_file(path: &Path, overrides: &[Override]) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError(format!("cannot read config {}: {e}", path.display())))?;
        Self::from_toml(&text, overrides)
            .map_err(|e| ConfigError(format!("{}: {e}", path.display())))
    }

    /// Reads a configuration: missing fields take the reference defaults, unknown sections or
    /// fields are errors, the overrides apply last, and the result is validated.
    pub fn from_toml(text: &str, overrides: &[Override]) -> Result<Self, ConfigError> {
        let mut table: toml::Table = toml::from_str(text).map_err(|e| malformed(text, &e))?;
        for change in overrides {
            apply(&mut table, change)?;
        }
        for key in table.keys() {
            if !["model", "data", "train"].contains(&key.as_str()) {
                return error(format!(
                    "unknown section [{key}]; the sections are [model], [data] and [train]"
                ));
            }
        }
        let config = Self {
            model: section(&table, "model", DecoderConfig::new())?,
            data: section(&table, "data", TaskConfig::default())?,
            train: section(&table, "train", TrainConfig::default())?,
        };
        config.validate()?;
        Ok(config)
    }

    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("a run configuration is always representable in TOML")
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        self.model
            .validate()
            .map_err(|e| ConfigError(e.to_string()))?;
        self.data
            .validate()
            .map_err(|e| ConfigError(e.to_string()))?;
        if self.model.mask == AttentionMask::Bidirectional {
            // Training is next-token prediction over whole windows: without the causal mask every
            // position attends to the token it is asked to predict, so the model learns to copy.
            return error(
                "model.mask: a bidirectional model cannot be trained by next-token prediction \
                 (every position would see the token it must predict); train with \
                 `mask = \"causal\"`. The bidirectional mask is for the section-4 symmetry \
                 checks of untrained models (crates/model/tests/symmetry.rs)",
            );
        }
        let t = &self.train;
        for (field, value) in [
            ("steps", t.steps),
            ("batch_size", t.batch_size),
            ("eval_every", t.eval_every),
            ("eval_prompts", t.eval_prompts),
        ] {
            if value == 0 {
                return error(format!("train.{field}: must be at least 1"));
            }
        }
        if t.eval_prompts > self.data.test_size {
            return error(format!(
                "train.eval_prompts: {} is more than the {} test pairs (data.test_size)",
                t.eval_prompts, self.data.test_size
            ));
        }
        if !(t.learning_rate > 0.0 && t.learning_rate.is_finite()) {
            return error("train.learning_rate: must be a positive number");
        }
        if !(0.0..=t.learning_rate).contains(&t.min_learning_rate) {
            return error("train.min_learning_rate: must be between 0 and train.learning_rate");
        }
        if t.decay_steps <= t.warmup_steps {
            return error(format!(
                "train.decay_steps: must be larger than train.warmup_steps ({})",
                t.warmup_steps
            ));
        }
        for (field, value) in [("beta1", t.beta1), ("beta2", t.beta2)] {
            if !(0.0..1.0).contains(&value) {
                return error(format!("train.{field}: must be in [0, 1), got {value}"));
            }
        }
        if t.weight_decay < 0.0 || t.grad_clip < 0.0 {
            return error("train.weight_decay and train.grad_clip must not be negative");
        }
        let longest_line = self.data.line(symbreak_data::Pair {
            a: self.data.limit() - 1,
            b: self.data.limit() - 1,
        });
        if self.model.block_size < longest_line.len() + 1 {
            return error(format!(
                "model.block_size: {} is shorter than the longest example line ({} tokens with its newline)",
                self.model.block_size,
                longest_line.len() + 1
            ));
        }
        // A window must fit in the joined training text, whose lines are at least as long as
        // the shortest (`$0+0=0$` and its newline).
        let shortest_line = self.data.line(symbreak_data::Pair { a: 0, b: 0 });
        if self.model.block_size >= (shortest_line.len() + 1) * self.data.train_size {
            return error(format!(
                "model.block_size: {} is too long for a training text of {} lines; use a shorter \
                 block or a larger data.train_size",
                self.model.block_size, self.data.train_size
            ));
        }
        Ok(())
    }

    /// A readable folder name for this run, e.g. `nope-ablate-3_4-seed2`.
    pub fn run_name(&self) -> String {
        let encoding = match self.model.positional {
            PositionalEncoding::Learned => "learned",
            PositionalEncoding::None => "nope",
        };
        let mask = match self.model.mask {
            AttentionMask::Causal => "",
            AttentionMask::Bidirectional => "-bidir",
        };
        let ablate = if self.model.ablate.is_empty() {
            "none".to_string()
        } else {
            // In increasing order whatever the order given, so that [2, 1] and [1, 2] are one
            // run (a sweep refuses two runs of one name; the tables would count them twice).
            let mut layers = self.model.ablate.clone();
            layers.sort_unstable();
            let layers: Vec<String> = layers.iter().map(usize::to_string).collect();
            layers.join("_")
        };
        format!("{encoding}{mask}-ablate-{ablate}-seed{}", self.train.seed)
    }
}

/// A TOML syntax error on one line: where it is and what is wrong.
fn malformed(text: &str, error: &toml::de::Error) -> ConfigError {
    let line = error
        .span()
        .map(|span| text[..span.start.min(text.len())].matches('\n').count() + 1);
    let what = error.message().trim().replace('\n', "; ");
    match line {
        Some(line) => ConfigError(format!("malformed TOML at line {line}: {what}")),
        None => ConfigError(format!("malformed TOML: {what}")),
    }
}

fn apply(table: &mut toml::Table, change: &Override) -> Result<(), ConfigError> {
    let Some((section, field)) = change.key.split_once('.') else {
        return error(format!(
            "override key {:?} must name a section and a field, e.g. train.steps",
            change.key
        ));
    };
    let entry = table
        .entry(section.to_string())
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    match entry {
        toml::Value::Table(fields) => {
            fields.insert(field.to_string(), change.value.clone());
            Ok(())
        }
        _ => error(format!("{section} is not a section")),
    }
}

/// Fields that are unset by default, so that the serialized defaults do not show them.
const OPTIONAL_FIELDS: [(&str, &str); 1] = [("train", "backend")];

/// Reads one section over the defaults, refusing fields the defaults do not have.
fn section<T: Serialize + DeserializeOwned>(
    table: &toml::Table,
    name: &str,
    defaults: T,
) -> Result<T, ConfigError> {
    let toml::Value::Table(mut merged) =
        toml::Value::try_from(&defaults).expect("defaults serialize to a table")
    else {
        unreachable!("a config section is a struct");
    };
    let defaults = merged.clone();
    match table.get(name) {
        None => {}
        Some(toml::Value::Table(given)) => {
            let optional = OPTIONAL_FIELDS
                .iter()
                .filter(|(section, _)| *section == name)
                .map(|(_, field)| *field);
            for (key, value) in given {
                if !defaults.contains_key(key) && !optional.clone().any(|field| field == key) {
                    let mut known: Vec<&str> = defaults.keys().map(String::as_str).collect();
                    known.extend(optional.clone());
                    return error(format!(
                        "{name}.{key}: unknown field; the fields of [{name}] are {}",
                        known.join(", ")
                    ));
                }
                // Each field alone over the defaults, so that a wrong value is named by its field.
                let mut alone = defaults.clone();
                alone.insert(key.clone(), value.clone());
                if let Err(e) = toml::Value::Table(alone).try_into::<T>() {
                    return error(format!("{name}.{key}: {}", e.message()));
                }
                merged.insert(key.clone(), value.clone());
            }
        }
        Some(_) => return error(format!("{name} must be a section ([{name}])")),
    }
    toml::Value::Table(merged)
        .try_into()
        .map_err(|e: toml::de::Error| ConfigError(format!("[{name}]: {}", e.message())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_is_valid_and_paper_is_the_reference() {
        for (name, _) in PRESETS {
            RunConfig::preset(name).unwrap();
        }
        let paper = RunConfig::preset("paper").unwrap();
        assert_eq!(paper.model, DecoderConfig::new());
        assert_eq!(paper.data, TaskConfig::default());
        assert_eq!(paper.train, TrainConfig::default());
    }

    #[test]
    fn overrides_apply_and_round_trip() {
        let mut config = RunConfig::preset_with(
            "smoke",
            &[
                Override::parse("model.positional=none").unwrap(),
                Override::parse("model.ablate=[1, 2]").unwrap(),
                Override::parse("train.seed=7").unwrap(),
                Override::parse("train.backend=flex").unwrap(),
            ],
        )
        .unwrap();
        assert_eq!(config.train.backend, Some(Backend::Flex));
        assert_eq!(config.model.positional, PositionalEncoding::None);
        assert_eq!(config.model.ablate, vec![1, 2]);
        assert_eq!(config.train.seed, 7);
        assert_eq!(
            RunConfig::from_toml(&config.to_toml(), &[]).unwrap(),
            config
        );
        assert_eq!(config.run_name(), "nope-ablate-1_2-seed7");
        config.model.ablate = vec![2, 1];
        assert_eq!(config.run_name(), "nope-ablate-1_2-seed7");
    }

    #[test]
    fn bad_configs_name_the_problem() {
        let message = |text: &str| RunConfig::from_toml(text, &[]).unwrap_err().0;
        assert!(message("[model]\nn_layers = 3").contains("model.n_layers: unknown field"));
        assert!(message("[optimizer]\nlr = 1").contains("unknown section [optimizer]"));
        assert!(message("[model]\nn_head = 5").contains("model.n_head"));
        assert!(message("[model]\nablate = [9]").contains("model.ablate"));
        assert!(message("[train]\nbackend = \"cuda\"").contains("train.backend: unknown variant"));
        assert!(
            message("[model]\npositional = \"rope\"").contains("model.positional: unknown variant")
        );
        assert!(message("[train]\nwarmup_steps = 6000").contains("train.decay_steps"));
        assert!(message("[model]\nblock_size = 8").contains("model.block_size"));
        assert!(message("not toml").contains("malformed TOML"));
        assert!(Override::parse("train.steps").is_err());
        assert!(
            RunConfig::preset("huge")
                .unwrap_err()
                .0
                .contains("unknown preset")
        );
    }
}
