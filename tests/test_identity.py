"""A seed kind is added in one place: results_contract.identity.SEED_KINDS. The list
matches lengthgen's SeedConfig, and a fake seed kind added to it (with a column in the
hand-written rows) reaches the trials rows, the groups, the views and every question
whose output lists a trial's seeds."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from analysis_rows import STUDY, build_study, canonical, config

from analysis.query import open_results, run_query, run_sql_file, sql_file
from analysis.sql_layers import sql_files
from lengthgen.config import SeedConfig, TrialConfig
from orchestrator.store.trial_rows import config_columns
from results_contract import groups, identity
from results_contract.identity import SeedKind

FAKE = SeedKind("order", apart=True, listed=True)
#: questions whose outputs name weight_seed and data_seed as the two factors of a crossed
#: design (their statistics, or paired_differences' pilot grid), not as a list of the
#: trial's seeds
CROSSED_FACTORS = {"lucky_tickets", "replicates", "compare", "variance", "success", "seed_counts",
                   "paired_differences"}


def with_fake_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(identity, "SEED_KINDS", (*identity.SEED_KINDS, FAKE))


def test_the_list_is_lengthgens_seed_config() -> None:
    assert [kind.name for kind in identity.SEED_KINDS] == [f.name for f in dataclasses.fields(SeedConfig)]
    assert identity.seeds_apart() == ("weight", "data", "perturb")
    assert identity.listed_columns() == ["weight_seed", "data_seed"]


def test_a_new_seed_kind_names_its_column_in_the_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    tree = TrialConfig().to_dict()
    tree["seeds"]["order"] = 3
    trial = SimpleNamespace(to_dict=lambda: tree, task=TrialConfig().task)
    assert config_columns(trial)["seeds_order"] == 3  # before: any config leaf's column
    with_fake_seed(monkeypatch)
    columns = config_columns(trial)
    assert columns["order_seed"] == 3 and "seeds_order" not in columns
    assert columns["weight_seed"] == 0 and columns["perturb_seed"] == 0


def test_a_new_seed_kind_apart_leaves_the_group_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    def stored(order: int) -> groups.StoredConfig:
        cfg = config("fire", 1, 2)
        cfg["seeds"]["order"] = order
        return groups.StoredConfig(canonical(cfg))

    assert groups.group_id(stored(1)) != groups.group_id(stored(2))
    assert all("seeds.order=" in label for label in groups.group_labels([stored(1), stored(2)]).values())
    with_fake_seed(monkeypatch)
    assert groups.group_id(stored(1)) == groups.group_id(stored(2))
    (label,) = groups.group_labels([stored(1), stored(2)]).values()
    assert "seeds.order" not in label


def add_order_seed(root: Path) -> None:
    """The fake seed's column (and config leaf) in every trials row, as a writer that
    knew it would have written them: the trial's weight seed times 10 plus its data seed."""
    for path in (root / STUDY / "trials").rglob("*.parquet"):
        table = pq.read_table(path)
        rows = table.to_pylist()
        for row in rows:
            row["order_seed"] = 10 * row["weight_seed"] + row["data_seed"]
            cfg = json.loads(row["config_json"])
            cfg["seeds"]["order"] = row["order_seed"]
            row["config_json"] = canonical(cfg)
        schema = table.schema.append(pa.field("order_seed", pa.int64()))
        pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)


def listed_seeds(result: pa.Table) -> set[str]:
    """The seed columns a question's result shows, also inside a list of trials
    (cascade's), by its schema: a question with no rows here still names its columns."""
    names = set()
    for field in result.schema:
        names |= {field.name} if field.name.endswith("_seed") else set()
        if pa.types.is_list(field.type) and pa.types.is_struct(field.type.value_type):
            names |= {f.name for f in field.type.value_type if f.name.endswith("_seed")}
    return names


@pytest.fixture(scope="module")
def study_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("identity")
    build_study(root)
    add_order_seed(root)
    return root


def test_a_new_seed_kind_reaches_the_views_and_the_questions(study_root: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    questions = sorted(name.removesuffix(".sql") for name, sql in sql_files().items() if sql.layer == "questions")
    with open_results(study_root, STUDY) as con:  # the list as it is: no order_seed shown
        before = {name: listed_seeds(run_sql_file(con, sql_file(f"{name}.sql"))) for name in questions}
    with_fake_seed(monkeypatch)
    with open_results(study_root, STUDY) as con:
        for view in ("groups", "finished_eval", "finished_samples", "final_samples"):
            columns = run_query(con, f"select * from {view} limit 0").column_names
            assert "order_seed" in columns, view
        configs = run_query(con, "select distinct group_config_json from groups").column("group_config_json")
        assert all('"order"' not in text for text in configs.to_pylist())
        after = {name: listed_seeds(run_sql_file(con, sql_file(f"{name}.sql"))) for name in questions}
    listing = {name for name, seeds in before.items() if "weight_seed" in seeds} - CROSSED_FACTORS
    assert {"final_accuracy", "coverage", "error_checkpoints", "training", "cascade", "run_trials",
            "failures"} <= listing
    for name in listing:
        assert "order_seed" not in before[name], name
        assert after[name] == before[name] | {"order_seed"}, name
    for name in CROSSED_FACTORS:
        assert after[name] == before[name], name
