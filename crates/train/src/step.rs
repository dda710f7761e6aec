//! One training step and one evaluation step, as Burn's learner calls them, and the optimiser
//! they use (AdamW with weight decay on Linear weights only, global gradient-norm clipping).

use burn::lr_scheduler::module_lr_scheduler::ModuleLearningRate;
use burn::module::{Module, ModuleVisitor, Param, ParamGroup};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::optim::{AdamWConfig, GradientsParams, ModuleOptimizer};
use burn::tensor::{ExecutionError, Int, Tensor};
use burn::train::metric::{AccuracyInput, Adaptor, ItemLazy, LossInput};
use burn::train::{InferenceStep, TrainOutput, TrainStep};
use symbreak_data::{IGNORED, LossTargets, masks_targets};
use symbreak_model::Decoder;

use crate::batches::{EvalBatch, TrainBatch};
use crate::config::{RunConfig, TrainConfig};
use crate::evaluate::{Checking, Score, correct_by_teacher_forcing, correct_rows};
use crate::metrics::StepLoss;

/// The decoder with what its steps need to know besides the weights.
#[derive(Module, Debug)]
pub struct Trainee {
    pub decoder: Decoder,
    grad_clip: f64,
    /// Whether targets equal to `IGNORED` are left out of the loss.
    masked: bool,
    /// Whether the loss counts only answer tokens.
    answer_only: bool,
}

impl Trainee {
    pub fn new(decoder: Decoder, config: &RunConfig) -> Self {
        Self {
            decoder,
            grad_clip: config.train.grad_clip,
            masked: Self::masks_targets(config),
            answer_only: config.train.loss == LossTargets::Answer,
        }
    }

    /// Whether some training targets are `IGNORED` (left out of the loss and the accuracy).
    pub fn masks_targets(config: &RunConfig) -> bool {
        masks_targets(config.train.batching, config.train.loss)
    }

    /// Mean next-token cross-entropy over every position, with the flattened logits and targets.
    pub fn loss(&self, inputs: Tensor<2, Int>, targets: Tensor<2, Int>) -> StepOutput {
        let logits = self.decoder.forward(inputs);
        let [rows, time, vocab] = logits.dims();
        let logits = logits.reshape([rows * time, vocab]);
        let targets = targets.reshape([rows * time]);
        let ignored = self.masked.then(|| vec![IGNORED as usize]);
        let loss = CrossEntropyLossConfig::new()
            .with_pad_tokens(ignored)
            .init(&logits.device())
            .forward(logits.clone(), targets.clone());
        StepOutput {
            loss,
            logits,
            targets,
            exact: Score::default(),
        }
    }
}

/// What a step hands to the metrics.
pub struct StepOutput {
    pub loss: Tensor<1>,
    /// `[positions, vocab]`
    pub logits: Tensor<2>,
    /// `[positions]`
    pub targets: Tensor<1, Int>,
    /// Exact-match answers (evaluation steps only).
    pub exact: Score,
}

impl ItemLazy for StepOutput {
    fn sync(self) -> Result<Self, ExecutionError> {
        self.loss.device().flush()?;
        Ok(Self {
            loss: self.loss.without_autodiff(),
            logits: self.logits.without_autodiff(),
            targets: self.targets.without_autodiff(),
            exact: self.exact,
        })
    }
}

impl Adaptor<LossInput> for StepOutput {
    fn adapt(&self) -> LossInput {
        LossInput::new(self.loss.clone())
    }
}

impl Adaptor<AccuracyInput> for StepOutput {
    fn adapt(&self) -> AccuracyInput {
        AccuracyInput::new(self.logits.clone(), self.targets.clone())
    }
}

impl Adaptor<Score> for StepOutput {
    fn adapt(&self) -> Score {
        self.exact
    }
}

impl Adaptor<StepLoss> for StepOutput {
    fn adapt(&self) -> StepLoss {
        StepLoss(self.loss.clone())
    }
}

impl TrainStep for Trainee {
    type Input = TrainBatch;
    type Output = StepOutput;

    fn step(&self, batch: TrainBatch) -> TrainOutput<StepOutput> {
        let output = self.loss(batch.inputs, batch.targets);
        TrainOutput::new(self, output.loss.backward(), output)
    }

    fn optimize(
        self,
        optim: &mut ModuleOptimizer,
        lr: ModuleLearningRate,
        grads: GradientsParams,
    ) -> Self {
        self.clip_and_step(optim, lr, grads)
    }
}

impl Trainee {
    /// Clips the gradients' global norm, then takes one optimiser step.
    pub fn clip_and_step(
        self,
        optim: &mut ModuleOptimizer,
        lr: impl Into<ModuleLearningRate>,
        grads: GradientsParams,
    ) -> Self {
        let grads = clip_global_norm(&self, grads, self.grad_clip);
        optim.step(lr, self, grads)
    }
}

impl InferenceStep for Trainee {
    type Input = EvalBatch;
    type Output = StepOutput;

    fn step(&self, batch: EvalBatch) -> StepOutput {
        let [rows, line_len] = batch.lines.dims();
        let inputs = batch.lines.clone().narrow(1, 0, line_len - 1);
        let mut targets = batch.lines.clone().narrow(1, 1, line_len - 1);
        if self.answer_only {
            // Targets before the answer (predicting prompt tokens) are left out.
            let skipped = batch.prompt_len - 1;
            let answer = targets.clone().narrow(1, skipped, line_len - 1 - skipped);
            let ignored = Tensor::<2, Int>::full([rows, skipped], IGNORED, &answer.device());
            targets = Tensor::cat(vec![ignored, answer], 1);
        }
        let mut output = self.loss(inputs, targets);
        let correct = if self.decoder.is_causal() {
            // The loss's forward pass was already teacher-forced: read the answers off it.
            let [_, vocab] = output.logits.dims();
            let logits = output.logits.clone().reshape([rows, line_len - 1, vocab]);
            correct_by_teacher_forcing(logits, &batch)
        } else {
            correct_rows(&self.decoder, &batch, Checking::Generation)
        };
        output.exact = Score::of(&correct);
        output
    }
}

/// Linear weights: the matrices of attention and MLP projections (not embeddings, LayerNorms
/// or biases), the parameters the reference decays.
const LINEAR_WEIGHTS: &str = r"\.(c_attn|c_proj|c_fc)\.weight$";

/// AdamW as the reference configures it: weight decay on Linear weights only.
pub fn optimizer(config: &TrainConfig) -> ModuleOptimizer {
    let adamw = AdamWConfig::new()
        .with_beta_1(config.beta1 as f32)
        .with_beta_2(config.beta2 as f32)
        .with_epsilon(1e-8);
    let decayed = ParamGroup::from_regex(LINEAR_WEIGHTS).expect("a valid pattern");
    adamw.clone().with_weight_decay(0.0).init().with_group(
        decayed,
        adamw.with_weight_decay(config.weight_decay as f32).build(),
        None,
    )
}

/// Scales all gradients together so that their global L2 norm is at most `max_norm`
/// (PyTorch's `clip_grad_norm_`; Burn's own norm clipping works per tensor).
pub fn clip_global_norm<M: Module>(
    module: &M,
    mut grads: GradientsParams,
    max_norm: f64,
) -> GradientsParams {
    if max_norm <= 0.0 {
        return grads;
    }
    struct SquaredNorm<'a> {
        grads: &'a GradientsParams,
        sum: Option<Tensor<1>>,
    }
    impl ModuleVisitor for SquaredNorm<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            if let Some(grad) = self.grads.get::<D>(param.id) {
                let square = grad.square().sum();
                self.sum = Some(match self.sum.take() {
                    Some(sum) => sum + square,
                    None => square,
                });
            }
        }
    }
    struct Scale<'a> {
        grads: &'a mut GradientsParams,
        factor: f64,
    }
    impl ModuleVisitor for Scale<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            if let Some(grad) = self.grads.remove::<D>(param.id) {
                self.grads
                    .register::<D>(param.id, grad.mul_scalar(self.factor));
            }
        }
    }
    let mut norm = SquaredNorm {
        grads: &grads,
        sum: None,
    };
    module.visit(&mut norm);
    let Some(sum) = norm.sum else {
        return grads;
    };
    let total = sum.into_scalar::<f64>().sqrt();
    if total > max_norm {
        module.visit(&mut Scale {
            grads: &mut grads,
            factor: max_norm / (total + 1e-6),
        });
    }
    grads
}
