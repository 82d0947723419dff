"""eval.grid: test questions over the first operand's length by the second's (McLeish et
al. 2024), from the trainer to the eval rows, the SQL and the report's heatmap."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from lengthgen import TrialConfig, digits, train
from lengthgen.config import EvalConfig, FormatConfig, SeedConfig, TaskConfig, TrainConfig, derive
from lengthgen.evaluation import build_eval_sets
from lengthgen.grid import build_grid
from lengthgen.tokenizer import CharTokenizer
from orchestrator.studies.config_paths import TRIAL_CONFIG

TOKENS = CharTokenizer()
GRIDDED = TrialConfig(
    task=TaskConfig(name="addition", train_digits=(1, 3)),
    format=FormatConfig(pad=False, reverse_operands=True),
    train=TrainConfig(steps=4, batch_size=8, log_every=2, warmup=1),
    eval=EvalConfig(digits=(2, 4), samples=5, every=2, grid=((1, 2, 4), (1, 3)), grid_samples=6),
)


def written_lengths(cell) -> set[tuple[int, int]]:
    text = [TOKENS.decode(row.tolist()) for row in cell.questions.questions.tokens]
    return {tuple(len(number) for number in row.split("=")[0].split("+")) for row in text}


def test_a_cell_holds_questions_of_exactly_its_two_lengths_from_the_eval_seed_alone():
    cells = build_grid(GRIDDED, TOKENS)
    assert [(c.first, c.second) for c in cells] == [(i, j) for i in (1, 2, 4) for j in (1, 3)]
    for cell in cells:
        assert written_lengths(cell) == {(cell.first, cell.second)}
        assert len(cell.questions.questions.tokens) == 6 and cell.questions.digits == max(cell.first, cell.second)
    again = build_grid(replace(GRIDDED, seeds=SeedConfig(weight=5, data=7)), TOKENS)
    assert all((a.questions.questions.tokens == b.questions.questions.tokens).all() for a, b in zip(cells, again))
    other = build_grid(replace(GRIDDED, seeds=SeedConfig(eval=1)), TOKENS)
    assert any((a.questions.questions.tokens != b.questions.questions.tokens).any() for a, b in zip(cells, other))
    diagonal = replace(GRIDDED, eval=replace(GRIDDED.eval, grid=((4,), (4,))))
    cell = build_grid(diagonal, TOKENS)[0].questions.questions.tokens
    test_four = build_eval_sets(diagonal, derive(diagonal).task, TOKENS)[1].questions.tokens
    assert cell.shape[1] == test_four.shape[1] and not (cell[:, None] == test_four[None]).all(axis=2).any()


def test_one_digit_operands_of_a_cell_are_1_to_9_and_the_shorter_is_padded_with_pad():
    padded = replace(GRIDDED, format=FormatConfig(pad=True, reverse_operands=True))
    cell = next(c for c in build_grid(padded, TOKENS) if (c.first, c.second) == (1, 3))
    assert written_lengths(cell) == {(3, 3)}  # zero-padded to the question's length
    values = [digits.to_int(row) for row in build_grid(GRIDDED, TOKENS)[0].questions.questions.tokens[:, 1:2]]
    assert np.all(np.array(values) >= TOKENS.digit_offset + 1)  # no 0 at one digit


def test_a_trial_scores_every_cell_at_its_final_evaluation_only():
    reports = []
    result = train(GRIDDED, on_report=reports.append)
    assert [bool(r.grid) for r in reports if r.eval] == [False, True]
    assert [(g.first, g.second, g.n) for g in result.grid] == [(i, j, 6) for i in (1, 2, 4) for j in (1, 3)]
    assert all(g.accuracy == g.correct / g.n for g in result.grid)


def test_grids_it_cannot_serve_are_refused_naming_the_field():
    with pytest.raises(ValueError, match="eval.grid crosses the lengths of two operands; task.name successor"):
        TrialConfig(task=TaskConfig(name="successor"), eval=EvalConfig(grid=((1,), (2,))))
    with pytest.raises(ValueError, match=r"eval.grid must be two non-empty lists of lengths >= 1.*\[\[1\], \[\]\]"):
        EvalConfig(grid=((1,), ()))
    with pytest.raises(ValueError, match="shorter than"):  # beyond the positions the model has
        TrialConfig(model=replace(TrialConfig().model, pe="learned", max_positions=32),
                    eval=EvalConfig(grid=((1,), (40,))))
    checked = TRIAL_CONFIG.validate_python({"eval": {"grid": [[1, 2], [3]], "grid_samples": 4}})
    assert checked.eval.grid == ((1, 2), (3,))


def test_the_cells_reach_grid_sql_and_stay_out_of_every_file_that_reads_eval(tmp_path):
    from analysis_rows import STARTED

    from analysis.query import open_results, run_sql_file, sql_file
    from orchestrator.store.results_store import write_trial_table
    from orchestrator.store.trial_rows import result_rows, rows_history, trials_row

    result = train(GRIDDED)
    rows = result_rows(result)
    write_trial_table(tmp_path, "g", "trials", GRIDDED.trial_id, [trials_row("g", GRIDDED, "done", "cpu", STARTED)])
    write_trial_table(tmp_path, "g", "eval", GRIDDED.trial_id, rows["eval"])
    with open_results(tmp_path, "g") as con:
        cells = run_sql_file(con, sql_file("grid.sql")).to_pylist()
        lengths = {r["digits"] for r in run_sql_file(con, sql_file("final_accuracy.sql")).to_pylist()}
    assert [(c["first_digits"], c["second_digits"], c["n_trials"], c["questions"]) for c in cells] == [
        (i, j, 1, 6) for i in (1, 2, 4) for j in (1, 3)]
    assert [c["mean_accuracy"] for c in cells] == [g.accuracy for g in result.grid]
    assert [c["in_distribution"] for c in cells] == [max(i, j) <= 3 for i in (1, 2, 4) for j in (1, 3)]
    assert lengths == {2, 4}  # eval.digits only
    assert len(rows_history(rows["train"], rows["eval"], step=4)["eval"]) == 2 * 2  # 2 steps x 2 lengths, no cell
