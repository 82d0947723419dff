"""eval.select best_long_loss: the held-out long-length validation set, its loss at every
evaluation, the step it selects, and the refusals of settings it cannot serve."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from lengthgen import TrialConfig, train
from lengthgen.batches import batch_tensors
from lengthgen.config import EvalConfig, SeedConfig, TaskConfig, TrainConfig, derive
from lengthgen.evaluation import build_eval_sets
from lengthgen.model import build_model
from lengthgen.model.position.samplers import build_position_sampler
from lengthgen.tokenizer import CharTokenizer
from lengthgen.training import selected_step
from lengthgen.validation import validation_batch, validation_generator, validation_loss
from orchestrator.studies.config_paths import TRIAL_CONFIG

TOKENS = CharTokenizer()
SELECTING = TrialConfig(
    task=TaskConfig(name="successor", train_digits=(1, 3)),
    train=TrainConfig(steps=6, batch_size=8, log_every=2, warmup=2),
    eval=EvalConfig(digits=(2, 5), samples=5, every=2, select="best_long_loss",
                    validation_digits=(5, 6), validation_samples=7),
)


def test_the_validation_questions_are_not_the_test_questions_and_follow_the_eval_seed_alone():
    batch = validation_batch(SELECTING, TOKENS)
    assert len(batch.tokens) == 2 * 7  # 7 questions of each validation length
    test_five = build_eval_sets(SELECTING, derive(SELECTING).task, TOKENS)[1].questions.tokens
    valid_five = batch.tokens[:7, : test_five.shape[1]]
    assert not any((row == test).all() for row in valid_five for test in test_five)
    other_seeds = replace(SELECTING, seeds=SeedConfig(weight=3, data=4))
    assert (validation_batch(other_seeds, TOKENS).tokens == batch.tokens).all()
    other_eval = replace(SELECTING, seeds=SeedConfig(eval=1))
    assert not (validation_batch(other_eval, TOKENS).tokens == batch.tokens).all()
    assert validation_batch(replace(SELECTING, eval=EvalConfig(digits=(2, 5))), TOKENS) is None


@pytest.mark.parametrize("chunk", [1, 3, 500])
def test_the_loss_is_the_mean_cross_entropy_over_every_supervised_token(chunk):
    config = replace(SELECTING, eval=replace(SELECTING.eval, batch_size=chunk))
    model = build_model(config.model, len(TOKENS), 0, config.input_layout)
    batch, sampler = validation_batch(config, TOKENS), build_position_sampler(config.model)
    tensors = batch_tensors(batch, torch.device("cpu"))
    with torch.no_grad():
        placed = model.sample_positions(tensors.tokens, tensors.prompt_lengths, sampler,
                                        validation_generator(config), training=False)
        logits, targets = model.forward_batch(
            tensors, model.trim_positions(placed, tensors.tokens, tensors.prompt_lengths))
        expected = float(F.cross_entropy(logits.float(), targets))
    assert validation_loss(model, batch, config, sampler, torch.device("cpu")) == pytest.approx(expected, rel=1e-6)


def test_every_evaluation_reports_its_loss_and_the_lowest_is_selected_without_changing_training():
    reports = []
    result = train(SELECTING, on_report=reports.append)
    assert [s for s, _ in result.long_loss] == [2, 4, 6]
    assert [r.long_loss for r in reports if r.eval] == [loss for _, loss in result.long_loss]
    assert result.selected_step == min(result.long_loss, key=lambda pair: pair[1])[0]
    plain = train(replace(SELECTING, eval=EvalConfig(digits=(2, 5), samples=5, every=2)))
    assert [t.loss for t in plain.train] == [t.loss for t in result.train]  # the same training
    assert [(s, r.correct) for s, r in plain.eval] == [(s, r.correct) for s, r in result.eval]
    assert plain.long_loss == [] and plain.selected_step is None


def test_a_resumed_trial_keeps_its_validation_history():
    uninterrupted, saved = train(SELECTING), {}

    def stop_at_second_checkpoint(report):
        if report.checkpoint is not None and report.step == 4:
            saved.update(report.checkpoint())
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(SELECTING, on_report=stop_at_second_checkpoint)
    resumed = train(SELECTING, resume_state=saved)
    assert resumed.long_loss == uninterrupted.long_loss
    assert resumed.selected_step == uninterrupted.selected_step


def test_ties_select_the_earliest_step():
    assert selected_step([(2, 0.5), (4, 0.25), (6, 0.25)]) == 4
    assert selected_step([]) is None


REFUSED = [
    ({"select": "best_long_loss", "every": 2}, (r"eval.select best_long_loss chooses the checkpoint by the loss "
                                               r"on eval.validation_digits, got \[\]")),
    ({"select": "best_long_loss", "validation_digits": (6,)}, "eval.every 0 evaluates the final step only"),
    ({"validation_digits": (6,), "every": 2}, r"eval.validation_digits \[6\] is read by eval.select best_long_loss"),
]


@pytest.mark.parametrize("fields, message", REFUSED)
def test_settings_it_cannot_serve_are_refused_naming_the_field(fields, message):
    with pytest.raises(ValueError, match=message):
        EvalConfig(digits=(5,), **fields)


def test_validation_lengths_inside_training_and_unknown_selections_are_refused():
    with pytest.raises(ValueError, match=r"eval.validation_digits \[3, 6\].*task.train_digits \[1, 3\]"):
        replace(SELECTING, eval=replace(SELECTING.eval, validation_digits=(3, 6)))
    with pytest.raises(ValueError, match="final.*best_long_loss"):
        TRIAL_CONFIG.validate_python({"eval": {"select": "lowest_loss"}})
    with pytest.raises(ValueError, match="needs model.max_positions|shorter than"):
        TrialConfig(task=TaskConfig(train_digits=(1, 3)),
                    eval=EvalConfig(digits=(5,), every=2, select="best_long_loss", validation_digits=(400,)))


def test_the_rows_carry_the_loss_of_their_step_and_give_it_back_to_a_resumed_trial():
    from orchestrator.store.trial_rows import result_rows, rows_history

    result = train(SELECTING)
    rows = result_rows(result)
    by_step = {row["step"]: row["long_loss"] for row in rows["eval"]}
    assert by_step == dict(result.long_loss)
    history = rows_history(rows["train"], rows["eval"], step=4)
    assert history["long_loss"] == [pair for pair in result.long_loss if pair[0] <= 4]
    plain = result_rows(train(replace(SELECTING, eval=EvalConfig(digits=(2, 5), samples=5, every=2))))
    assert {row["long_loss"] for row in plain["eval"]} == {None}


def test_the_analysis_reports_the_checkpoint_of_the_lowest_long_loss_beside_the_final(tmp_path):
    """A selecting trial's rows carry long_loss: final_eval takes its lowest (the earliest
    of equals), final_accuracy says so and shows the last step beside it, and variance
    measures the chosen step; a trial without long_loss reports its last step."""
    from analysis_rows import config, write_trial

    from analysis.query import open_results, run_sql_file, sql_file
    from orchestrator.store.results_store import write_trial_table

    selecting = write_trial(tmp_path, "s", config("rope", 0, 0), {6: 0.5})
    plain = write_trial(tmp_path, "s", config("rope", 1, 0), {6: 0.5})
    losses, accuracies = {10: 0.9, 20: 0.4, 30: 0.4, 40: 0.7}, {10: 0.1, 20: 0.8, 30: 0.6, 40: 0.3}
    write_trial_table(tmp_path, "s", "eval", selecting, [
        {"step": s, "digits": 6, "n": 10, "correct": round(10 * accuracies[s]), "accuracy": accuracies[s],
         "in_distribution": False, "long_loss": losses[s]} for s in losses])
    with open_results(tmp_path, "s") as con:
        rows = {r["trial_id"]: r for r in run_sql_file(con, sql_file("final_accuracy.sql")).to_pylist()}
        variance = run_sql_file(con, sql_file("variance.sql")).to_pylist()
    chosen = rows[selecting]
    assert (chosen["checkpoint"], chosen["step"], chosen["accuracy"]) == ("lowest long-length loss", 20, 0.8)
    assert (chosen["last_step"], chosen["last_step_accuracy"]) == (40, 0.3)
    assert (rows[plain]["checkpoint"], rows[plain]["step"], rows[plain]["last_step"]) == ("final", 100, 100)
    assert [r["mean"] for r in variance if r["digits"] == 6] == [pytest.approx((0.8 + 0.5) / 2)]
    from analysis.report import build_report

    page = build_report(tmp_path, "s", tmp_path / "report").page.read_text()
    assert "1 trials report the checkpoint with the lowest loss" in page and "chosen on long" in page
