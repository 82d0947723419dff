"""The HTML of the report: the page, its tables (estimates with their intervals), figures
and the helpers that pick and label rows for them."""

from __future__ import annotations

import base64
import datetime as dt
import html
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.sql_layers import shown_path

MAX_GROUPS = 24  # panels per figure; the caption says when groups were left out
MAX_TABLE_ROWS = 300


@dataclass
class Figure:
    file: str  # PNG name beside the page
    title: str
    caption: str
    sql: tuple[str, ...]


STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px;
       padding: 0 1em; color: #222; }
h1 { margin-bottom: 0.2em; }
h2 { margin-top: 2em; border-bottom: 1px solid #ccc; }
figure { margin: 1em 0; }
figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-size: 0.9em; color: #444; max-width: 70em; }
div.table { overflow-x: auto; max-width: 100%; margin: 0.5em 0 1.5em; }
table { border-collapse: collapse; font-size: 0.85em; }
details > summary { cursor: pointer; color: #444; font-size: 0.9em; }
th, td { border: 1px solid #ddd; padding: 2px 6px; text-align: right; }
th { background: #f4f4f4; }
td.text { text-align: left; }
td.ci { white-space: nowrap; }
caption { text-align: left; font-size: 0.9em; color: #444; padding-bottom: 4px; }
code { background: #f4f4f4; padding: 0 3px; }
.empty { color: #666; font-style: italic; }
.warning { color: #8a4b00; }
"""


def page(study: str, root: Path, tables: dict, sections: list[str], params: dict,
         profile: str | None = None, nav: Iterable[tuple[str, str]] = ()) -> str:
    """The whole page; ``nav``: (anchor, name) of the sections its contents line lists."""
    contents = " · ".join(f'<a href="#{anchor}">{html.escape(name)}</a>' for anchor, name in nav)
    counts = ", ".join(f"{r['status']} {r['trials']}" for r in tables["status_counts"])
    pruned = sum(r["trials"] for r in tables["status_counts"] if r["status"] == "pruned")
    # a seed a search's pruner stopped early is no sample of the final accuracy
    left_out = (f" The {pruned} pruned trials (stopped early by the search's pruner) are left out of every "
                "comparison below.") if pruned else ""
    n_groups = len({r["group_id"] for r in tables["final_accuracy"]})
    given = ", ".join(f"{k}={v}" for k, v in sorted(params.items())) or "none (defaults)"
    generated = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    profiled = f", profile <code>{html.escape(profile)}</code>" if profile else ""
    option = f" --profile {html.escape(profile)}" if profile else ""
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>lg-study report: {html.escape(study)}</title>
<style>{STYLE}</style>
</head>
<body>
<h1>Study <code>{html.escape(study)}</code>{profiled}</h1>
<p>Results: <code>{html.escape(str(Path(root).resolve() / study))}</code>; generated
{generated}.<br>
Trials: {html.escape(counts or "none")}; configuration groups with finished trials:
{n_groups}. Parameters: {html.escape(given)}.{left_out}</p>
<p>Every number and plot comes from the SQL files in <code>analysis/</code>; run one
yourself with <code>lg-study query --file variance.sql --study
{html.escape(study)}{option}</code>. Accuracies are exact match at each trial's final evaluation
unless said otherwise; "trained" marks test lengths inside the training range.</p>
<p class='contents'>{contents}</p>
{"".join(sections)}
</body>
</html>
"""


#: row columns that hold a full group label, and where a row keeps it when shown short
LABEL_COLUMNS = ("group_label", "label_a", "label_b")
FULL = "_full"


def short_labelled(tables: dict[str, list[dict]]) -> tuple[dict[str, list[dict]], dict[str, str]]:
    """The tables as the page shows them: every group label short (results_contract.groups.
    short_labels over every label of the page), the full label kept beside it (``<column>_full``)
    for the key and the tables' hover; and that key, full label -> short. The SQL files'
    rows themselves are not changed."""
    from results_contract.groups import short_labels

    found = [row[c] for rows in tables.values() for row in rows for c in LABEL_COLUMNS if row.get(c)]
    key = short_labels(sorted(set(found)))
    shown = {name: [_relabelled(row, key) for row in rows] for name, rows in tables.items()}
    return shown, key


def _relabelled(row: dict, key: dict[str, str]) -> dict:
    out = dict(row)
    for column in LABEL_COLUMNS:
        if row.get(column) in key:
            out[column], out[column + FULL] = key[row[column]], row[column]
    return out


def label_key(key: dict[str, str]) -> str:
    """The table at the top of the page: each group's short label and its full one."""
    rows = [{"short": short, "full": full} for full, short in sorted(key.items(), key=lambda kv: kv[1])]
    # The page's words are pinned (tests/test_output_pins.py), so they still name the groups'
    # module by its path before it moved to results_contract/groups.py.
    return ("<h2 id='groups'>Configuration groups</h2>" + table(
        rows, [("short", "short label"), ("full", "full label (task/pe/size/distribution, then its settings)")],
        "Each group's short label, used in every figure and table below (the settings that tell the "
        "groups apart; results_contract/groups.py), and the full label its trials rows and MLflow runs carry "
        "(group_label); a table's group cell shows the full label on hover."))


def figure_html(path: Path, fig: Figure, note: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    sources = " and ".join(f"<code>{shown_path(name)}</code>" for name in fig.sql)
    svg = path.with_suffix(".svg")
    vector = f" <a href='{html.escape(svg.name)}'>SVG</a> for print." if svg.exists() else ""
    return (
        f"<figure><a href='{html.escape(path.name)}'>"
        f"<img src='data:image/png;base64,{data}' alt='{html.escape(fig.title)}'></a>"
        f"<figcaption><b>{html.escape(fig.title)}.</b> {html.escape(fig.caption)}{note} "
        f"Computed by {sources}.{vector}</figcaption></figure>"
    )


#: the most columns a table shows on the page; the rest go behind a <details> ("all columns")
MAX_COLUMNS = 10


def table(
    rows: list[dict],
    columns: list[tuple[str, str]],
    caption: str,
    collapsed: bool = False,
    more: Iterable[tuple[str, str]] = (),
) -> str:
    """A table of ``rows``: ``columns`` on the page, with ``more`` (and any column past
    MAX_COLUMNS) in a second, complete table behind a <details>. A column with the same value
    of the same text on every row moves to the caption. ``collapsed``: the whole table behind a <details>."""
    if not rows:
        return f"<p class='empty'>{html.escape(caption)} No rows.</p>"
    shown = rows[:MAX_TABLE_ROWS]
    cut = (f" First {MAX_TABLE_ROWS} of {len(rows)} rows; the SQL file gives all."
           if len(rows) > MAX_TABLE_ROWS else "")
    every = [*columns, *more]
    constant = [(key, title) for key, title in columns  # text only: equal numbers stay numbers
                if len(shown) > 1 and key not in LABEL_COLUMNS and isinstance(shown[0].get(key), str)
                and len({row.get(key) for row in shown}) == 1]
    varying = [c for c in columns if c not in constant]
    said = "".join(f" {title[:1].upper()}{title[1:]}: {_text(shown[0].get(key))} on every row."
                   for key, title in constant)
    main = _html_table(shown, varying[:MAX_COLUMNS], caption + said + cut)
    rest = ""
    if len(varying) > MAX_COLUMNS or list(more):
        rest = (f"<details><summary>All {len(every)} columns</summary>"
                f"{_html_table(shown, every, caption + cut)}</details>")
    if collapsed:
        return f"<details><summary>{html.escape(caption)}</summary>{main}{rest}</details>"
    return main + rest


def _html_table(rows: list[dict], columns: list[tuple[str, str]], caption: str) -> str:
    head = "".join(f"<th>{html.escape(title)}</th>" for _, title in columns)
    body = "".join(
        "<tr>" + "".join(cell(row.get(key), row.get(key + FULL)) for key, _ in columns) + "</tr>"
        for row in rows
    )
    return (f"<div class='table'><table><caption>{html.escape(caption)}</caption>"
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>")


def _text(value: Any) -> str:
    """A cell's text, as `cell` writes it (for the caption of a constant column)."""
    return html.unescape(re.sub(r"<[^>]+>", "", cell(value)))


def cell(value: Any, full: str | None = None) -> str:
    """A table cell; ``full``: a short group label's full label, shown on hover."""
    if full is not None:
        return f"<td class='text' title='{html.escape(full)}'>{html.escape(str(value))}</td>"
    if value is None:
        return "<td></td>"
    if isinstance(value, bool):
        return f"<td class='text'>{'yes' if value else 'no'}</td>"
    if isinstance(value, float):
        return f"<td>{value:.3f}</td>"
    if isinstance(value, int):
        return f"<td>{value}</td>"
    if isinstance(value, (list, tuple)):
        text = ", ".join(f"{v:.2f}" if isinstance(v, float) else str(v) for v in value)
        return f"<td class='text'>{html.escape(text)}</td>"
    if INTERVAL_CELL.fullmatch(str(value)):
        return f"<td class='text ci'>{html.escape(str(value))}</td>"  # one line: estimate [low, high]
    return f"<td class='text'>{html.escape(str(value))}</td>"


#: a cell of `with_intervals`: "0.964 [0.929, 0.998]"
INTERVAL_CELL = re.compile(r"-?[\d.]+ \[-?[\d.]+, -?[\d.]+\]")


def level(rows: list[dict]) -> str:
    """'95 %': the level the rows' intervals were computed at."""
    level = rows[0]["level"] if rows else 0.95
    return f"{100 * level:g} %"


def resamples(rows: list[dict]) -> str:
    return f"{rows[0]['resamples']:,}" if rows else "1,000"


INTERVALS = {  # estimate -> (low, high) columns, shown as "estimate [low, high]"
    # the shares' generalized confidence intervals and the success probability's interval over
    # seeds (coverage measured and printed beside them; docs/analysis.md)
    **{f"component_share_{part}": (f"component_share_{part}_low", f"component_share_{part}_high")
       for part in ("weight", "data", "residual")},
    # the components' modified large-sample intervals (coverage measured; docs/analysis.md)
    **{f"sigma2_{part}": (f"sigma2_{part}_low", f"sigma2_{part}_high") for part in ("weight", "data", "residual")},
    # lucky_tickets.sql's test-set noise has no interval (no such columns): its estimate alone,
    # at the digits of the other components
    "sigma2_test_noise": ("sigma2_test_noise_low", "sigma2_test_noise_high"),
    "p_success": ("p_success_low", "p_success_high"),
    "accuracy_diff": ("accuracy_diff_low", "accuracy_diff_high"),
    "success_diff": ("success_diff_low", "success_diff_high"),
    "p_improvement": ("p_improvement_low", "p_improvement_high"),
    # variance.sql: the mean's interval over seeds, and the bootstrap kept for comparison
    "mean": ("mean_low", "mean_high"),
    "mean_boot": ("mean_boot_low", "mean_boot_high"),
    # final_accuracy.sql: a trial's accuracy with its Wilson interval over its questions;
    # cascade.sql: the mean over trials with its interval over seeds
    "accuracy_wilson": ("wilson_low", "wilson_high"),
    "accuracy_seeds": ("mean_low", "mean_high"),
    "wilson95": ("wilson95_low", "wilson95_high"),
}
#: cells whose estimate is another column: cell -> estimate (shown only where its interval is)
SHARED_INTERVALS = {"mean_boot": "mean", "accuracy_wilson": "accuracy", "accuracy_seeds": "accuracy",
                    "wilson95": "accuracy"}


def with_intervals(row: dict) -> dict:
    """The row plus `<estimate>_ci` text cells, e.g. '0.42 [0.10, 0.80]', and which
    variance components were set to 0."""
    out = dict(row)
    for key, (low, high) in INTERVALS.items():
        estimate = SHARED_INTERVALS.get(key, key)
        if estimate not in row or (key in SHARED_INTERVALS and low not in row):
            continue
        value = row[estimate]
        digits = 4 if key.startswith("sigma2") else 3
        if value is None:
            out[f"{key}_ci"] = "n/a"
        elif row.get(low) is None:
            out[f"{key}_ci"] = f"{value:.{digits}f}"
        else:
            out[f"{key}_ci"] = f"{value:.{digits}f} [{row[low]:.{digits}f}, {row[high]:.{digits}f}]"
    if "sigma2_weight_truncated" in row:
        out["truncated"] = ", ".join(
            name for name in ("weight", "data") if row.get(f"sigma2_{name}_truncated")) or "none"
    return out


def measured_words(row: dict) -> str:
    """What lucky_tickets.sql measured, e.g. 'out-of-distribution exact match (mean over
    the test lengths 6, 8)'."""
    lengths = ", ".join(str(d) for d in row["measured_digits"] or [])
    kind = {"out-of-distribution": "out-of-distribution exact match",
            "in-distribution": "in-distribution exact match",
            "mixed": "exact match"}[row["measured_kind"]]
    where = {"out-of-distribution": "", "in-distribution": ", inside the training range",
             "mixed": ", inside and outside the training range"}[row["measured_kind"]]
    return f"{kind} (mean over the test lengths {lengths}{where})"


def first_groups(rows: Iterable[dict], limit: int = MAX_GROUPS) -> list[dict]:
    """The rows of the first ``limit`` groups, in the SQL's order."""
    keep: dict[str, None] = {}
    out = []
    for row in rows:
        gid = row["group_id"]
        if gid not in keep and len(keep) >= limit:
            continue
        keep.setdefault(gid, None)
        out.append(row)
    return out
