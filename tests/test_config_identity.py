"""Trial identity: the id hashes the fields that differ from their defaults, so a
field added later leaves existing ids (and the resumption of existing studies) as
they were; and eval.questions, the first such field."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from lengthgen.config import EvalConfig, TaskConfig, TrialConfig
from lengthgen.evaluation import build_eval_sets
from lengthgen.tasks import build_task
from lengthgen.tokenizer import CharTokenizer

QUICKSTART_FIRST_TRIAL = TrialConfig(
    task=TaskConfig(name="successor", train_digits=(1, 3)),
    eval=EvalConfig(digits=(1, 2, 3, 4, 6, 8), samples=200, every=500),
)


def test_the_defaults_hash_to_an_empty_identity():
    assert TrialConfig().identity_json() == "{}"


def test_ids_are_pinned():
    """A changed default, or a changed identity scheme, would silently re-run every
    finished trial of every study: these ids must never change."""
    assert TrialConfig().trial_id == "44136fa355b3"
    full = dataclasses.replace(
        QUICKSTART_FIRST_TRIAL,
        format=dataclasses.replace(QUICKSTART_FIRST_TRIAL.format, reverse_operands=True),
        model=dataclasses.replace(QUICKSTART_FIRST_TRIAL.model, pe="nope"),
        train=dataclasses.replace(QUICKSTART_FIRST_TRIAL.train, steps=3000, lr=3e-3, log_every=100),
    )
    assert full.trial_id == "4cd23c9bf545"


def test_the_identity_names_exactly_the_changed_fields():
    config = dataclasses.replace(TrialConfig(), eval=EvalConfig(samples=7))
    assert json.loads(config.identity_json()) == {"eval": {"samples": 7}}
    # the results keep the whole config
    assert json.loads(config.canonical_json())["eval"]["questions"] == "uniform"


def test_a_field_added_at_its_default_keeps_the_id():
    """eval.questions was added after studies had run: at its default the id is the
    id the config had before the field existed."""
    before = dataclasses.replace(TrialConfig(), eval=EvalConfig(digits=(5, 10)))
    assert "questions" not in before.identity_json()
    changed = dataclasses.replace(before, eval=EvalConfig(digits=(5, 10), questions="cascade_uniform"))
    assert changed.trial_id != before.trial_id


def test_cascade_uniform_test_questions_cover_every_cascade_length_equally():
    config = TrialConfig(
        task=TaskConfig(name="addition", train_digits=(1, 5)),
        eval=EvalConfig(digits=(12,), samples=1300, questions="cascade_uniform"),
    )
    (test_set,) = build_eval_sets(config, build_task(config.task), CharTokenizer())
    levels = np.bincount(test_set.cascade, minlength=13)
    assert len(levels) == 13 and levels.min() >= 60  # 0..12, about 100 each
    uniform = build_eval_sets(dataclasses.replace(config, eval=EvalConfig(digits=(12,), samples=1300)),
                              build_task(config.task), CharTokenizer())[0]
    assert np.bincount(uniform.cascade).argmax() <= 2 and (uniform.cascade >= 6).sum() < 20


@pytest.mark.parametrize("changes, message", [
    ({"task": TaskConfig(name="n_by_1")}, "cannot build"),
    ({"data": dataclasses.replace(TrialConfig().data, distribution="uniform_operands"),
      "task": TaskConfig(train_digits=(1, 6))}, "training pool"),
    ({"eval": EvalConfig(digits=(80,), questions="cascade_uniform")}, "at most 64 digits"),
])
def test_cascade_uniform_test_questions_refuse_what_they_cannot_serve(changes, message):
    changes.setdefault("eval", EvalConfig(questions="cascade_uniform"))
    with pytest.raises(ValueError, match=message):
        TrialConfig(**changes)
