//! Exact match by one teacher-forced pass equals exact match by greedy generation, row by row,
//! for a causal model that answers some questions right and some wrong.

use symbreak_data::AdditionTask;
use symbreak_train::batches::eval_groups;
use symbreak_train::evaluate::{correct_by_generation, correct_by_teacher_forcing};
use symbreak_train::run::{self, load_finished};
use symbreak_train::{Backend, Override, RunConfig};

#[test]
fn teacher_forcing_agrees_with_generation_on_a_partly_trained_model() {
    // The smoke preset stopped early: right on some test pairs, wrong on others.
    let stop_early = ["train.steps", "train.decay_steps"]
        .map(|key| Override::new(key, toml::Value::Integer(300)));
    let config = RunConfig::preset_with("smoke", &stop_early).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let backend = Backend::default_compiled();
    run::train(&config, dir.path(), false, backend).unwrap();
    let run = load_finished(dir.path(), backend).unwrap();

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
