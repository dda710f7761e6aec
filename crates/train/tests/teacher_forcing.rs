//! On a causal model that answers some questions right and some wrong:
//! - exact match by one teacher-forced pass equals exact match by greedy generation, row by row;
//! - the mistakes listed by `symbreak eval --mistakes` are exactly the pairs generation gets
//!   wrong, with what generation writes for them.

use std::path::Path;
use std::sync::OnceLock;

use symbreak_data::{AdditionTask, Prompt};
use symbreak_train::batches::eval_groups;
use symbreak_train::evaluate::{
    Checking, correct_by_generation, correct_by_teacher_forcing, generate_answers,
};
use symbreak_train::run::{self, FinishedRun, load_finished};
use symbreak_train::{Backend, Override, RunConfig};

/// The smoke preset stopped early, trained once for every test of this file.
fn partly_trained() -> FinishedRun {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    let backend = Backend::default_compiled();
    let dir: &Path = DIR
        .get_or_init(|| {
            let stop_early = ["train.steps", "train.decay_steps"]
                .map(|key| Override::new(key, toml::Value::Integer(300)));
            let config = RunConfig::preset_with("smoke", &stop_early).unwrap();
            let dir = tempfile::tempdir().unwrap();
            run::train(&config, dir.path(), false, backend).unwrap();
            dir
        })
        .path();
    load_finished(dir, backend).unwrap()
}

#[test]
fn teacher_forcing_agrees_with_generation_on_a_partly_trained_model() {
    let run = partly_trained();
    let task = AdditionTask::generate(&run.config.data).unwrap();
    let (mut right, mut wrong) = (0, 0);
    for group in eval_groups(&run.config.data, &task.test, 200) {
        let batch = group.to_batch(&run.device);
        let by_generation = correct_by_generation(&run.decoder, &batch);
        let [_, line_len] = batch.lines.dims();
        let logits = run
            .decoder
            .forward(batch.lines.clone().narrow(1, 0, line_len - 1));
        let by_teacher_forcing = correct_by_teacher_forcing(logits, &batch);
        assert_eq!(by_generation, by_teacher_forcing, "pairs {:?}", group.pairs);
        right += by_generation.iter().filter(|&&ok| ok).count();
        wrong += by_generation.iter().filter(|&&ok| !ok).count();
    }
    eprintln!("{right} right and {wrong} wrong, both ways alike");
    assert!(
        right >= 25 && wrong >= 25,
        "the check needs both outcomes: {right} right, {wrong} wrong"
    );
}

#[test]
fn mistakes_are_the_pairs_generation_gets_wrong() {
    let run = partly_trained();
    let (mistakes, test) = run::find_mistakes(&run, Checking::Fastest).unwrap();
    let data = &run.config.data;
    let written = generate_answers(&run.decoder, data, &test, &run.device);
    let mut expected_mistakes = Vec::new();
    for (pair, written) in test.iter().zip(written) {
        if !Prompt::new(data, *pair).is_correct(&written) {
            expected_mistakes.push((*pair, written));
        }
    }
    expected_mistakes.sort_by_key(|(pair, _)| (pair.a, pair.b));
    let listed: Vec<_> = mistakes
        .iter()
        .map(|m| (m.pair, m.written.clone()))
        .collect();
    assert_eq!(listed, expected_mistakes);
    assert!(
        mistakes.len() >= 25 && mistakes.len() + 25 <= test.len(),
        "the check needs both outcomes: {} of {} wrong",
        mistakes.len(),
        test.len()
    );
    for m in &mistakes {
        assert_eq!(m.expected, data.answer_text(m.pair.sum()) + "$");
        assert!(m.first_wrong() < m.expected.len(), "{m:?}");
    }
}
