"""The science pins: what a trial id and the science version together promise.

A trial id hashes the config only, and lengthgen.science.SCIENCE_VERSION says which
numbers that config gives with this code. The promise holds only if every change that
moves a number also raises the version. These tests make a silent change impossible:
they recompute the vocabulary, the first training batches of every task, format and
distribution, the test questions of every task and test-question scheme, the initial
weights of every architecture (and model variant), the weight a perturb seed moves and
the first training losses, and compare them with tests/science_pins.json, written
together with the version it pins. Integer data (tokens, masks, questions, the
perturbed site) is pinned exactly, by SHA-256; floats (weights, losses) differ across
machines in their last bits and are compared with a tolerance.

A change that moves a pin fails here until SCIENCE_VERSION is raised and the pins are
written anew (`.venv/bin/python tests/test_science_pins.py --write`; tests/ is not a
package, so not `python -m`). A version raised without new pins fails too: the two
move together.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
import pytest
import torch

from lengthgen import formats, science
from lengthgen.batches import training_batch
from lengthgen.config import (
    DataConfig,
    EvalConfig,
    FormatConfig,
    ModelConfig,
    TaskConfig,
    TrainConfig,
    TrialConfig,
    derive,
)
from lengthgen.distributions import DISTRIBUTIONS, TEST_QUESTIONS
from lengthgen.evaluation import build_eval_sets
from lengthgen.model import ARCHITECTURES, build_model
from lengthgen.model.position.pe import POSITIONAL_ENCODINGS
from lengthgen.tasks import TASKS
from lengthgen.tokenizer import CharTokenizer
from lengthgen.training import train

PINS_FILE = Path(__file__).with_name("science_pins.json")
#: run as a script: tests/ has no __init__.py (it is no regular package)
WRITE_COMMAND = ".venv/bin/python tests/test_science_pins.py --write"

#: the default format, each flag flipped alone, and the fixed-length combinations
#: (fixed_length alone is refused: it needs reverse false)
FORMATS: dict[str, dict[str, bool]] = {
    "default": {},
    "reverse=false": {"reverse": False},
    "reverse_operands": {"reverse_operands": True},
    "pad=false": {"pad": False},
    "index_hints": {"index_hints": True},
    "random_spaces": {"random_spaces": True},
    "interleave": {"interleave": True},
    "shift_zeros": {"shift_zeros": True},
    "fixed_length": {"fixed_length": True, "reverse": False},
    "fixed_length,pad=false": {"fixed_length": True, "reverse": False, "pad": False},
    "fixed_length,shift_zeros": {"fixed_length": True, "reverse": False, "shift_zeros": True},
}
#: the formats whose test questions are pinned (training-only flags change nothing there)
EVAL_FORMATS = ("default", "index_hints", "pad=false", "fixed_length")
#: model variants whose initial weights are pinned besides each architecture's default,
#: built on the decoder (upe only reads the aligned layout: see `_variant_config`)
MODEL_VARIANTS: dict[str, dict[str, object]] = {
    **{f"pe={pe}": {"pe": pe} for pe in POSITIONAL_ENCODINGS if pe != "rope"},
    "ffn=geglu": {"ffn": "geglu"},
    "norm=rmsnorm": {"norm": "rmsnorm"},
    "norm_placement=pre_post": {"norm_placement": "pre_post"},
    "norm_placement=post": {"norm_placement": "post"},
    "abacus": {"abacus": True},
    # McLeish et al. 2024's release: the non-digits' row of the Abacus table, the output
    # layer's Xavier over the release's 19 outputs
    "abacus,abacus_non_digits=row_zero": {"abacus": True, "abacus_non_digits": "row_zero"},
    "init=deepnorm_straight": {"init": "deepnorm_straight"},
    "init=deepnorm_straight,head_init_fan_out=19": {"init": "deepnorm_straight", "head_init_fan_out": 19},
    "embedding_norm": {"embedding_norm": True},
    "loops=2,input_injection=loop": {"loops": 2, "input_injection": "loop"},
    "input_injection=layer": {"input_injection": "layer"},
}
#: McLeish et al. 2024's decoder (lengthgen.model.recurrence): its first losses are pinned too
LOOPED = {"loops": 2, "input_injection": "loop", "embedding_norm": True, "norm_placement": "post",
          "pe": "nope", "abacus": True}
#: key prefix -> pytest.approx tolerance; pins of other kinds compare exactly
TOLERANCES = {
    "initial_weights": {"rel": 1e-5, "abs": 1e-6},
    "first_losses": {"rel": 1e-4, "abs": 1e-6},
}
KINDS = ("vocabulary", "batches", "eval_questions", "initial_weights", "perturbation", "first_losses")


def trial(
    task: str = "addition", fmt: str = "default", distribution: str = "uniform_length",
    questions: str = "uniform", **model: object,
) -> TrialConfig:
    """A small trial; raises ValueError for a combination TrialConfig refuses. The
    architecture is the decoder, the encoder for fixed_length (one output per position)."""
    flags = FORMATS[fmt]
    arch = "encoder" if flags.get("fixed_length") else "decoder"
    return TrialConfig(
        task=TaskConfig(name=task, train_digits=(1, 4)),
        format=FormatConfig(**flags),
        data=DataConfig(distribution=distribution),
        model=ModelConfig(**{"arch": arch, "max_positions": 512, **model}),
        train=TrainConfig(batch_size=16),
        eval=EvalConfig(digits=(3, 6), samples=8, questions=questions),
    )


def valid_trials(cases: Iterable[tuple[str, dict]]) -> dict[str, TrialConfig]:
    """{key: config} of the cases whose config validates (the others are skipped; the
    pinned keys say which were valid, so a newly valid or invalid case moves a pin)."""
    configs = {}
    for key, arguments in cases:
        try:
            configs[key] = trial(**arguments)
        except ValueError:
            continue
    return configs


def digest(arrays: Iterable[np.ndarray | int | bool | None]) -> str:
    """First 16 hex digits of the SHA-256 of integer or boolean arrays, each in a fixed
    dtype (little-endian int64, uint8 for booleans) with its shape; None has a marker."""
    sha = hashlib.sha256()
    for array in arrays:
        if array is None:
            sha.update(b"None;")
            continue
        array = np.asarray(array)
        if array.dtype.kind not in "biu":
            raise TypeError(f"only integer data is hashed, got {array.dtype}")
        fixed = np.ascontiguousarray(array.astype("<u1" if array.dtype.kind == "b" else "<i8"))
        sha.update(f"{fixed.dtype.str}{fixed.shape};".encode())
        sha.update(fixed.tobytes())
    return sha.hexdigest()[:16]


def vocabulary_pins() -> dict[str, object]:
    return {"vocabulary": list(CharTokenizer().vocabulary)}


def batch_pins() -> dict[str, str]:
    """batches/<task>/<format>/<distribution>: the first three training batches."""
    tokenizer = CharTokenizer()
    cases = (
        (f"batches/{task}/{fmt}/{dist}", {"task": task, "fmt": fmt, "distribution": dist})
        for task in TASKS for fmt in FORMATS for dist in DISTRIBUTIONS
    )
    pins = {}
    for key, config in valid_trials(cases).items():
        derived = derive(config)
        batches = [
            training_batch(config, derived.task, derived.distribution, tokenizer, step) for step in range(3)
        ]
        pins[key] = digest(array for batch in batches for array in batch)
    return pins


def eval_question_pins() -> dict[str, str]:
    """eval_questions/<task>/<questions>/<format>/<distribution>: every test set."""
    tokenizer = CharTokenizer()
    cases = (
        (
            f"eval_questions/{task}/{questions}/{fmt}/{dist}",
            {"task": task, "fmt": fmt, "distribution": dist, "questions": questions},
        )
        for task in TASKS for questions in TEST_QUESTIONS for fmt in EVAL_FORMATS
        for dist in DISTRIBUTIONS
    )
    pins = {}
    for key, config in valid_trials(cases).items():
        arrays = []
        for s in build_eval_sets(config, derive(config).task, tokenizer):
            q = s.questions
            arrays += [s.digits, q.tokens, q.prompt_length, q.answer, q.prompt_lengths, q.answer_lengths,
                       q.aligned, s.cascade, s.carry_in, s.lsd_first]
        pins[key] = digest(arrays)
    return pins


def _variant_config(variant: dict[str, object]) -> TrialConfig:
    if variant.get("pe") == "upe":  # its keys act on the multiplier's fixed columns (003 eq. 3.3)
        return trial("multiplication", "fixed_length", **variant)
    return trial(**variant)


def _weight_sums(model: torch.nn.Module) -> dict[str, list[float]]:
    """{parameter: [sum, sum of squares]}, summed in float64."""
    return {
        name: [float(p.detach().double().sum()), float(p.detach().double().square().sum())]
        for name, p in model.named_parameters()
    }


def initial_weight_pins() -> dict[str, dict[str, list[float]]]:
    """initial_weights/<arch> (and /decoder/<variant>): weight seed 0, per parameter."""
    configs = {
        f"initial_weights/{arch}": trial(fmt="fixed_length" if arch == "encoder" else "default", arch=arch)
        for arch in ARCHITECTURES
    }
    configs.update({f"initial_weights/decoder/{name}": _variant_config(variant)
                    for name, variant in MODEL_VARIANTS.items()})
    vocab_size = len(CharTokenizer())
    return {
        key: _weight_sums(build_model(config.model, vocab_size, 0, config.input_layout, 0))
        for key, config in configs.items()
    }


def perturbation_pins() -> dict[str, list[list[object]]]:
    """perturbation/decoder/perturb_seed=1: [name, flat index] of every entry that
    differs from the unperturbed initial weights (one, by design)."""
    config = trial()
    vocab_size = len(CharTokenizer())
    original, moved = (
        dict(build_model(config.model, vocab_size, 0, config.input_layout, seed).named_parameters())
        for seed in (0, 1)
    )
    differing = [
        [name, int(index)]
        for name, weight in original.items()
        for index in torch.nonzero(weight.detach().flatten() != moved[name].detach().flatten())[:, 0]
    ]
    return {"perturbation/decoder/perturb_seed=1": differing}


def first_loss_pins() -> dict[str, list[float]]:
    """first_losses/<arch> (and /decoder/looped, McLeish et al. 2024's decoder): the losses of
    three training steps on the CPU."""
    cases = {"decoder": trial(), "encoder_decoder": trial(arch="encoder_decoder"),
             "encoder": trial(fmt="fixed_length"), "decoder/looped": trial(**LOOPED)}
    pins = {}
    for name, config in cases.items():
        config = dataclasses.replace(
            config,
            train=TrainConfig(steps=3, batch_size=8, log_every=1, warmup=1),
            eval=dataclasses.replace(config.eval, digits=(3,), samples=2),
        )
        pins[f"first_losses/{name}"] = [log.loss for log in train(config, device="cpu").train]
    return pins


COMPUTE: dict[str, Callable[[], dict]] = {
    "vocabulary": vocabulary_pins,
    "batches": batch_pins,
    "eval_questions": eval_question_pins,
    "initial_weights": initial_weight_pins,
    "perturbation": perturbation_pins,
    "first_losses": first_loss_pins,
}


def compute_pins(kinds: Iterable[str] = KINDS) -> dict[str, object]:
    """The pins of `kinds`, as they read back from JSON (lists, not tuples)."""
    pins: dict[str, object] = {}
    for kind in kinds:
        pins.update(COMPUTE[kind]())
    return json.loads(json.dumps(pins))


def _kind(key: str) -> str:
    return key.split("/", 1)[0]


def _same(expected: object, actual: object, tolerance: dict | None) -> bool:
    if isinstance(expected, dict):
        return (isinstance(actual, dict) and expected.keys() == actual.keys()
                and all(_same(expected[k], actual[k], tolerance) for k in expected))
    if isinstance(expected, list):
        return (isinstance(actual, list) and len(expected) == len(actual)
                and all(_same(e, a, tolerance) for e, a in zip(expected, actual)))
    if isinstance(expected, float) and tolerance is not None:
        return isinstance(actual, (int, float)) and actual == pytest.approx(expected, **tolerance)
    return type(expected) is type(actual) and expected == actual


def moved_pins(expected: dict[str, object], actual: dict[str, object]) -> list[str]:
    """The keys whose value differs (within TOLERANCES for float pins), and those only
    one side has (a combination newly valid or no longer valid), sorted."""
    return sorted(
        key for key in expected.keys() | actual.keys()
        if key not in expected or key not in actual
        or not _same(expected[key], actual[key], TOLERANCES.get(_kind(key)))
    )


def _listing(keys: list[str], shown: int = 12) -> str:
    more = f" and {len(keys) - shown} more" if len(keys) > shown else ""
    return ", ".join(keys[:shown]) + more if keys else "none"


def failure_message(expected: dict[str, object], actual: dict[str, object], moved: list[str]) -> str:
    changed = [k for k in moved if k in expected and k in actual]
    new = [k for k in moved if k not in expected]
    gone = [k for k in moved if k not in actual]
    lines = []
    if changed:
        lines.append(
            f"the science moved: {_listing(changed)} changed. If this change is intended, raise "
            f"SCIENCE_VERSION: add a Change to CHANGES in lengthgen/science.py (the next version, "
            f"what changed, and `affects`, the configs whose numbers it moves), then rewrite the "
            f"pins with `{WRITE_COMMAND}`"
        )
    if new or gone:
        lines.append(
            f"the valid combinations changed: new {_listing(new)}; no longer valid {_listing(gone)}. "
            f"If no pin above changed, the configs that ran before give the same numbers: rewrite the "
            f"pins with `{WRITE_COMMAND}` (no new SCIENCE_VERSION needed)"
        )
    return "\n".join(lines)


def load_pins() -> dict:
    return json.loads(PINS_FILE.read_text())


def write_pins() -> dict:
    document = {"science_version": science.SCIENCE_VERSION, "pins": compute_pins()}
    PINS_FILE.write_text(json.dumps(document, sort_keys=True, indent=1, ensure_ascii=False) + "\n")
    return document


# the tests


def test_pins_belong_to_the_science_version():
    pinned = load_pins()["science_version"]
    assert science.SCIENCE_VERSION == pinned, (
        f"SCIENCE_VERSION is {science.SCIENCE_VERSION} but tests/science_pins.json pins version {pinned}: "
        f"the version and the pins move together; rewrite the pins with `{WRITE_COMMAND}`"
    )


def test_every_pin_has_a_kind():
    assert {_kind(key) for key in load_pins()["pins"]} == set(KINDS)


@pytest.mark.parametrize("kind", KINDS)
def test_pins_hold(kind):
    expected = {k: v for k, v in load_pins()["pins"].items() if _kind(k) == kind}
    actual = compute_pins([kind])
    moved = moved_pins(expected, actual)
    assert not moved, failure_message(expected, actual, moved)


def test_moved_pins_reports_the_perturbed_key():
    pins = load_pins()["pins"]
    assert moved_pins(pins, pins) == []
    key = next(k for k in sorted(pins) if k.startswith("batches/"))
    perturbed = {**pins, key: "0" * 16}
    assert moved_pins(pins, perturbed) == [key]
    weights = next(k for k in sorted(pins) if k.startswith("initial_weights/"))
    name = max(pins[weights], key=lambda n: abs(pins[weights][n][0]))  # a weight, not a zero bias
    total, squares = pins[weights][name]
    slightly = {**pins, weights: {**pins[weights], name: [total * (1 + 1e-7), squares]}}
    assert moved_pins(pins, slightly) == []  # last-bit noise of another machine
    clearly = {**pins, weights: {**pins[weights], name: [total, squares * 1.01 + 1e-3]}}
    assert moved_pins(pins, clearly) == [weights]
    fewer = {k: v for k, v in pins.items() if k != key}
    assert moved_pins(pins, fewer) == [key] and moved_pins(fewer, pins) == [key]
    assert "no longer valid" in failure_message(pins, fewer, [key])
    assert "raise SCIENCE_VERSION" in failure_message(pins, perturbed, [key])


def test_pins_catch_a_change_of_the_space_rate(monkeypatch):
    """A real recomputation under a changed augmentation moves exactly its batches."""
    monkeypatch.setattr(formats, "RANDOM_SPACE_RATE", 0.25)
    expected = {k: v for k, v in load_pins()["pins"].items() if _kind(k) == "batches"}
    moved = moved_pins(expected, compute_pins(["batches"]))
    assert moved and moved == sorted(k for k in expected if k.split("/")[2] == "random_spaces")


def test_pins_catch_a_reordered_vocabulary(monkeypatch):
    """"+" and "=" trade ids: the vocabulary moves, and every batch that writes one of them."""
    characters = CharTokenizer.__init__.__defaults__[0]
    swapped = characters.replace("+", "#").replace("=", "+").replace("#", "=")
    monkeypatch.setattr(CharTokenizer.__init__, "__defaults__", (swapped,))
    expected = {k: v for k, v in load_pins()["pins"].items() if _kind(k) in ("vocabulary", "batches")}
    moved = moved_pins(expected, compute_pins(["vocabulary", "batches"]))
    assert {"vocabulary", "batches/addition/default/uniform_length"} <= set(moved)
    assert "batches/successor/fixed_length/uniform_length" not in moved  # no "+", no "="


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true",
                        help=f"rewrite {PINS_FILE.name} with the current numbers and SCIENCE_VERSION")
    args = parser.parse_args(argv)
    if not args.write:
        parser.error("nothing to do: pass --write (run the checks with pytest)")
    document = write_pins()
    pins, version = document["pins"], document["science_version"]
    print(f"wrote {len(pins)} pins for science version {version} to {PINS_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
