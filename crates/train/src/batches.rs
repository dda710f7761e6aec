//! What the learner iterates over: training batches of random windows, and evaluation batches of
//! whole test lines grouped so that every row in a batch has the same prompt and answer length
//! (greedy decoding of a batch then needs no padding).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use burn::data::dataloader::{DataLoader, DataLoaderIterator, Progress};
use burn::data::dataset::DatasetError;
use burn::tensor::{Device, Int, Tensor, TensorData};
use symbreak_data::{Pair, Prompt, TaskConfig, WindowSampler};

/// `rows` windows and the same windows shifted by one.
#[derive(Debug, Clone)]
pub struct TrainBatch {
    pub inputs: Tensor<2, Int>,
    pub targets: Tensor<2, Int>,
}

/// Test lines `$a+b=answer$` of one shape, `[rows, prompt_len + answer_len]`.
#[derive(Debug, Clone)]
pub struct EvalBatch {
    pub lines: Tensor<2, Int>,
    pub prompt_len: usize,
    pub pairs: Vec<Pair>,
}

impl EvalBatch {
    /// Tokens of each answer, the closing `$` included.
    pub fn answer_len(&self) -> usize {
        self.lines.dims()[1] - self.prompt_len
    }

    /// The true answers, `[rows, answer_len]`.
    pub fn answers(&self) -> Tensor<2, Int> {
        self.lines
            .clone()
            .narrow(1, self.prompt_len, self.answer_len())
    }
}

/// The training loader: pass `p` over it yields optimiser steps `p * steps_per_pass ..`, step
/// `s` being the windows `s * rows .. (s + 1) * rows` of the sampler. A pass is one learner
/// "epoch", so the learner evaluates and checkpoints after every `steps_per_pass` steps, and a
/// resumed run continues with exactly the batches it would have seen. Each pass also reseeds the
/// backend from the seed and the pass number: Burn's checkpoints do not hold the random state,
/// so without this a resumed run would draw other dropout masks than the uninterrupted one.
#[derive(Clone)]
pub struct WindowLoader {
    sampler: Arc<WindowSampler>,
    rows: usize,
    steps_per_pass: usize,
    total_steps: usize,
    next_pass: Arc<AtomicUsize>,
    device: Device,
}

impl WindowLoader {
    pub fn new(
        sampler: WindowSampler,
        rows: usize,
        steps_per_pass: usize,
        total_steps: usize,
        first_pass: usize,
        device: &Device,
    ) -> Self {
        Self {
            sampler: Arc::new(sampler),
            rows,
            steps_per_pass,
            total_steps,
            next_pass: Arc::new(AtomicUsize::new(first_pass)),
            device: device.clone(),
        }
    }

    pub fn batch(&self, step: usize) -> TrainBatch {
        let windows = self.sampler.batch((step * self.rows) as u64, self.rows);
        let shape = [windows.rows, windows.block];
        TrainBatch {
            inputs: Tensor::from_data(TensorData::new(windows.inputs, shape), &self.device),
            targets: Tensor::from_data(TensorData::new(windows.targets, shape), &self.device),
        }
    }
}

struct WindowIter<'a> {
    loader: &'a WindowLoader,
    first: usize,
    next: usize,
    end: usize,
}

impl Iterator for WindowIter<'_> {
    type Item = Result<TrainBatch, DatasetError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.next >= self.end {
            return None;
        }
        let batch = self.loader.batch(self.next);
        self.next += 1;
        Some(Ok(batch))
    }
}

impl DataLoaderIterator<TrainBatch> for WindowIter<'_> {
    fn progress(&self) -> Progress {
        Progress::new(
            (self.next - self.first) * self.loader.rows,
            (self.end - self.first) * self.loader.rows,
            Some("rows".into()),
        )
    }
}

impl DataLoader<TrainBatch> for WindowLoader {
    fn iter<'a>(&'a self) -> Box<dyn DataLoaderIterator<TrainBatch> + 'a> {
        let pass = self.next_pass.fetch_add(1, Ordering::SeqCst);
        self.device.seed(pass_seed(self.sampler.seed(), pass));
        let first = (pass * self.steps_per_pass).min(self.total_steps);
        let end = (first + self.steps_per_pass).min(self.total_steps);
        Box::new(WindowIter {
            loader: self,
            first,
            next: first,
            end,
        })
    }

    fn num_items(&self) -> usize {
        self.steps_per_pass * self.rows
    }

    fn to_device(&self, device: &Device) -> Arc<dyn DataLoader<TrainBatch>> {
        Arc::new(Self {
            device: device.clone(),
            ..self.clone()
        })
    }

    fn slice(&self, start: usize, end: usize) -> Arc<dyn DataLoader<TrainBatch>> {
        // Items are rows; a slice keeps the whole steps it covers.
        Arc::new(Self {
            steps_per_pass: (end - start).div_ceil(self.rows).min(self.steps_per_pass),
            ..self.clone()
        })
    }
}

/// The backend's seed for pass `pass` of a run seeded with `seed`: SplitMix64 of the two, so that
/// no pass replays the stream the initialisation drew from `seed`.
fn pass_seed(seed: u64, pass: usize) -> u64 {
    let mut z = seed ^ (pass as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Host-side evaluation batches: token rows of equal shape and their pairs.
#[derive(Debug, Clone)]
pub struct EvalGroup {
    pub prompt_len: usize,
    pub line_len: usize,
    pub tokens: Vec<i64>,
    pub pairs: Vec<Pair>,
}

impl EvalGroup {
    pub fn to_batch(&self, device: &Device) -> EvalBatch {
        let shape = [self.pairs.len(), self.line_len];
        EvalBatch {
            lines: Tensor::from_data(TensorData::new(self.tokens.clone(), shape), device),
            prompt_len: self.prompt_len,
            pairs: self.pairs.clone(),
        }
    }
}

/// Groups `pairs` by prompt and answer length, in batches of at most `max_rows`.
pub fn eval_groups(task: &TaskConfig, pairs: &[Pair], max_rows: usize) -> Vec<EvalGroup> {
    let mut by_shape: BTreeMap<(usize, usize), Vec<Prompt>> = BTreeMap::new();
    for &pair in pairs {
        let prompt = Prompt::new(task, pair);
        by_shape
            .entry((prompt.tokens.len(), prompt.answer.len()))
            .or_default()
            .push(prompt);
    }
    let mut groups = Vec::new();
    for ((prompt_len, answer_len), prompts) in by_shape {
        for chunk in prompts.chunks(max_rows) {
            groups.push(EvalGroup {
                prompt_len,
                line_len: prompt_len + answer_len,
                tokens: chunk
                    .iter()
                    .flat_map(|p| p.tokens.iter().chain(&p.answer).map(|&t| t as i64))
                    .collect(),
                pairs: chunk.iter().map(|p| p.pair).collect(),
            });
        }
    }
    groups
}

/// The validation loader: the same evaluation batches at every pass.
#[derive(Clone)]
pub struct EvalLoader {
    groups: Arc<Vec<EvalGroup>>,
    device: Device,
}

impl EvalLoader {
    pub fn new(groups: Vec<EvalGroup>, device: &Device) -> Self {
        Self {
            groups: Arc::new(groups),
            device: device.clone(),
        }
    }
}

struct EvalIter<'a> {
    loader: &'a EvalLoader,
    next: usize,
    rows_done: usize,
}

impl Iterator for EvalIter<'_> {
    type Item = Result<EvalBatch, DatasetError>;

    fn next(&mut self) -> Option<Self::Item> {
        let group = self.loader.groups.get(self.next)?;
        self.next += 1;
        self.rows_done += group.pairs.len();
        Some(Ok(group.to_batch(&self.loader.device)))
    }
}

impl DataLoaderIterator<EvalBatch> for EvalIter<'_> {
    fn progress(&self) -> Progress {
        Progress::new(
            self.rows_done,
            self.loader.num_items(),
            Some("prompts".into()),
        )
    }
}

impl DataLoader<EvalBatch> for EvalLoader {
    fn iter<'a>(&'a self) -> Box<dyn DataLoaderIterator<EvalBatch> + 'a> {
        Box::new(EvalIter {
            loader: self,
            next: 0,
            rows_done: 0,
        })
    }

    fn num_items(&self) -> usize {
        self.groups.iter().map(|g| g.pairs.len()).sum()
    }

    fn to_device(&self, device: &Device) -> Arc<dyn DataLoader<EvalBatch>> {
        Arc::new(Self {
            device: device.clone(),
            ..self.clone()
        })
    }

    fn slice(&self, start: usize, end: usize) -> Arc<dyn DataLoader<EvalBatch>> {
        // Items are prompts; a slice keeps the groups that start inside it.
        let mut first_row = 0;
        let mut kept = Vec::new();
        for group in self.groups.iter() {
            if (start..end).contains(&first_row) {
                kept.push(group.clone());
            }
            first_row += group.pairs.len();
        }
        Arc::new(Self::new(kept, &self.device))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use symbreak_data::Tokenizer;

    #[test]
    fn eval_groups_hold_whole_lines_of_one_shape() {
        let task = TaskConfig::default();
        let pairs = [
            Pair { a: 1, b: 2 },
            Pair { a: 123, b: 456 },
            Pair { a: 999, b: 1 },
            Pair { a: 321, b: 654 },
        ];
        let groups = eval_groups(&task, &pairs, 8);
        let rows: usize = groups.iter().map(|g| g.pairs.len()).sum();
        assert_eq!(rows, 4);
        for group in &groups {
            assert_eq!(group.tokens.len(), group.pairs.len() * group.line_len);
            for (row, pair) in group.pairs.iter().enumerate() {
                let ids: Vec<usize> = group.tokens
                    [row * group.line_len..(row + 1) * group.line_len]
                    .iter()
                    .map(|&t| t as usize)
                    .collect();
                assert_eq!(Tokenizer::decode(&ids).unwrap(), task.line(*pair));
            }
        }
        let together = groups.iter().find(|g| g.pairs.len() == 2).unwrap();
        assert_eq!(together.prompt_len, 9);
        assert_eq!(eval_groups(&task, &pairs[1..2], 8)[0].line_len, 13);
        assert_eq!(
            eval_groups(&task, &[pairs[1]; 5], 2).len(),
            3,
            "at most max_rows per batch"
        );
    }
}
