//! The model's other promises: residual ablation is what the config says, the parameter count
//! is nanoGPT's, and greedy generation follows the logits.

use burn::module::Module;
use burn::tensor::{Device, Int, Tensor, TensorData};
use symbreak_model::{Decoder, DecoderConfig, PositionalEncoding};

fn device() -> Device {
    Device::flex()
}

fn small(ablate: Vec<usize>) -> Decoder {
    let device = device();
    device.seed(11);
    DecoderConfig::new()
        .with_block_size(16)
        .with_n_layer(4)
        .with_n_head(2)
        .with_n_embd(16)
        .with_ablate(ablate)
        .init(&device)
        .unwrap()
}

fn tokens(batch: usize, time: usize) -> Tensor<2, Int> {
    let data: Vec<i64> = (0..batch * time)
        .map(|i| ((i * 7 + 3) % 14) as i64)
        .collect();
    Tensor::from_data(TensorData::new(data, [batch, time]), &device())
}

fn values(t: Tensor<3>) -> Vec<f32> {
    t.try_to_vec_as::<f32>().unwrap()
}

#[test]
fn ablated_layers_drop_both_residual_connections() {
    let model = small(vec![2, 3]);
    let (logits, cache) = model.forward_cached(tokens(2, 10));
    assert_eq!(cache.layers.len(), 4);
    for (index, layer) in cache.layers.iter().enumerate() {
        let ablated = [2, 3].contains(&(index + 1));
        let post = values(layer.resid_post.clone());
        let mid = values(layer.resid_mid.clone());
        if ablated {
            assert_eq!(post, values(layer.mlp_out.clone()), "layer {}", index + 1);
            assert_eq!(mid, values(layer.attn_out.clone()), "layer {}", index + 1);
        } else {
            let sum = values(layer.resid_mid.clone() + layer.mlp_out.clone());
            assert_eq!(post, sum, "layer {}", index + 1);
            let sum = values(layer.resid_pre.clone() + layer.attn_out.clone());
            assert_eq!(mid, sum, "layer {}", index + 1);
            assert_ne!(
                post,
                values(layer.mlp_out.clone()),
                "layer {} keeps its residual",
                index + 1
            );
        }
        if index > 0 {
            assert_eq!(
                values(layer.resid_pre.clone()),
                values(cache.layers[index - 1].resid_post.clone())
            );
        }
    }
    assert_eq!(values(logits), values(model.forward(tokens(2, 10))));
}

#[test]
fn parameter_count_matches_the_formula() {
    let paper = DecoderConfig::new();
    let model = paper.init(&device()).unwrap();
    assert_eq!(model.num_params(), paper.num_params());
    assert_eq!(model.num_params(), 10_725_504);
    let nope = DecoderConfig::new()
        .with_positional(PositionalEncoding::None)
        .with_bias(true);
    assert_eq!(
        nope.init(&device()).unwrap().num_params(),
        nope.num_params()
    );
}

#[test]
fn generation_appends_the_argmax_tokens() {
    let model = small(vec![]);
    let prompt = tokens(3, 5);
    let generated = model.generate(prompt.clone(), 4);
    assert_eq!(generated.dims(), [3, 4]);
    // The first new token is the argmax of the prompt's last position.
    let first = model
        .forward(prompt)
        .narrow(1, 4, 1)
        .reshape([3, 14])
        .argmax(1)
        .try_into_vec_as::<i64>()
        .unwrap();
    let got = generated.narrow(1, 0, 1).try_into_vec_as::<i64>().unwrap();
    assert_eq!(got, first);
}

#[test]
fn fused_inference_attention_equals_the_written_out_training_attention() {
    use symbreak_model::AttentionMask;
    for mask in [AttentionMask::Causal, AttentionMask::Bidirectional] {
        let autodiff = device().autodiff();
        autodiff.seed(5);
        let model = DecoderConfig::new()
            .with_block_size(16)
            .with_n_layer(2)
            .with_n_head(2)
            .with_n_embd(16)
            .with_dropout(0.0)
            .with_mask(mask)
            .init(&autodiff)
            .unwrap();
        let data: Vec<i64> = (0..3 * 9).map(|i| ((i * 5 + 1) % 14) as i64).collect();
        let training = model.forward(Tensor::from_data(
            TensorData::new(data.clone(), [3, 9]),
            &autodiff,
        ));
        let inference = model
            .valid()
            .forward(Tensor::from_data(TensorData::new(data, [3, 9]), &device()));
        let (a, b) = (values(training), values(inference));
        let worst = a
            .iter()
            .zip(&b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f32::max);
        assert!(worst < 1e-5, "{mask:?}: paths differ by {worst}");
    }
}
