//! The samples behind a correlation figure: whole test lines of one shape, run through a trained
//! model, each line's output activations of a layer flattened to one vector.

use std::collections::BTreeMap;

use burn::tensor::{Device, Int, Tensor, TensorData};
use symbreak_data::{Pair, TaskConfig, Tokenizer, digit_count};
use symbreak_model::Decoder;

/// Lines run through the model at a time (bounds the memory of the activation cache).
const CHUNK: usize = 250;

/// Test lines `$a+b=answer$` whose operands and answer all have the same number of digits, so
/// that every token position means the same thing in every line.
#[derive(Debug, Clone)]
pub struct Lines {
    pub pairs: Vec<Pair>,
    /// Token ids, `pairs.len() x len`, row-major.
    pub tokens: Vec<i64>,
    pub len: usize,
    /// What stands at each position: `$`, `a`, `+`, `b`, `=`, `s` (a digit of the sum) or `$`.
    pub symbols: Vec<char>,
}

impl Lines {
    /// The first `count` test pairs of the most common shape (digits of a, of b, of the sum).
    pub fn most_common_shape(task: &TaskConfig, test: &[Pair], count: usize) -> Lines {
        let shape = |p: &Pair| (digit_count(p.a), digit_count(p.b), digit_count(p.sum()));
        let mut counts: BTreeMap<(usize, usize, usize), usize> = BTreeMap::new();
        for pair in test {
            *counts.entry(shape(pair)).or_default() += 1;
        }
        let common = counts
            .iter()
            .max_by_key(|&(shape, n)| (*n, std::cmp::Reverse(*shape)))
            .map(|(shape, _)| *shape)
            .expect("the test set is not empty");
        let pairs: Vec<Pair> = test
            .iter()
            .filter(|p| shape(p) == common)
            .take(count)
            .copied()
            .collect();
        let (a, b, s) = common;
        let symbols: Vec<char> = std::iter::once('$')
            .chain(std::iter::repeat_n('a', a))
            .chain(['+'])
            .chain(std::iter::repeat_n('b', b))
            .chain(['='])
            .chain(std::iter::repeat_n('s', s))
            .chain(['$'])
            .collect();
        let tokens = pairs
            .iter()
            .flat_map(|&pair| {
                Tokenizer::encode(&task.line(pair))
                    .expect("test lines use only vocabulary symbols")
                    .into_iter()
                    .map(|t| t as i64)
            })
            .collect();
        Lines {
            pairs,
            tokens,
            len: symbols.len(),
            symbols,
        }
    }
}

/// The output activations (`resid_post`) of each of `layers` (from 1, as in the tables) for
/// every line: one `[lines, len * width]` tensor per layer, features position-major.
pub fn layer_outputs(
    decoder: &Decoder,
    lines: &Lines,
    layers: &[usize],
    device: &Device,
) -> Vec<Tensor<2>> {
    let rows = lines.pairs.len();
    let mut chunks: Vec<Vec<Tensor<2>>> = vec![Vec::new(); layers.len()];
    for start in (0..rows).step_by(CHUNK) {
        let end = (start + CHUNK).min(rows);
        let tokens = lines.tokens[start * lines.len..end * lines.len].to_vec();
        let tokens =
            Tensor::<2, Int>::from_data(TensorData::new(tokens, [end - start, lines.len]), device);
        let (_, cache) = decoder.forward_cached(tokens);
        for (i, &layer) in layers.iter().enumerate() {
            let output = cache.layers[layer - 1].resid_post.clone();
            let [n, time, width] = output.dims();
            chunks[i].push(output.reshape([n, time * width]));
        }
    }
    chunks.into_iter().map(|c| Tensor::cat(c, 0)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use symbreak_data::AdditionTask;

    #[test]
    fn lines_share_one_shape() {
        let task = TaskConfig::default();
        let test = AdditionTask::generate(&task).unwrap().test;
        let lines = Lines::most_common_shape(&task, &test, 300);
        assert_eq!(lines.pairs.len(), 300);
        assert_eq!(lines.tokens.len(), 300 * lines.len);
        let symbols: String = lines.symbols.iter().collect();
        assert!(symbols.starts_with("$aaa+bbb="), "{symbols}");
        for (row, pair) in lines.pairs.iter().enumerate() {
            let ids: Vec<usize> = lines.tokens[row * lines.len..(row + 1) * lines.len]
                .iter()
                .map(|&t| t as usize)
                .collect();
            assert_eq!(Tokenizer::decode(&ids).unwrap(), task.line(*pair));
        }
    }
}
