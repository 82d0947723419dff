"""The HTML of the report: the page, its tables (estimates with their intervals), figures
and the helpers that pick and label rows for them."""

from __future__ import annotations

import base64
import datetime as dt
import html
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ddd; padding: 2px 6px; text-align: right; }
th { background: #f4f4f4; }
td.text { text-align: left; }
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
{n_groups}. Parameters: {html.escape(given)}.</p>
<p>Every number and plot comes from the SQL files in <code>analysis/</code>; run one
yourself with <code>lg-study query --file analysis/variance.sql --study
{html.escape(study)}{option}</code>. Accuracies are exact match at each trial's final evaluation
unless said otherwise; "trained" marks test lengths inside the training range.</p>
<p>{contents}</p>
{"".join(sections)}
</body>
</html>
"""


def figure_html(path: Path, fig: Figure, note: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    sources = " and ".join(f"<code>analysis/{name}</code>" for name in fig.sql)
    return (
        f"<figure><a href='{html.escape(path.name)}'>"
        f"<img src='data:image/png;base64,{data}' alt='{html.escape(fig.title)}'></a>"
        f"<figcaption><b>{html.escape(fig.title)}.</b> {html.escape(fig.caption)}{note} "
        f"Computed by {sources}.</figcaption></figure>"
    )


def table(
    rows: list[dict],
    columns: list[tuple[str, str]],
    caption: str,
    collapsed: bool = False,
) -> str:
    if not rows:
        return f"<p class='empty'>{html.escape(caption)} No rows.</p>"
    shown = rows[:MAX_TABLE_ROWS]
    more = (f" First {MAX_TABLE_ROWS} of {len(rows)} rows; the SQL file gives all."
            if len(rows) > MAX_TABLE_ROWS else "")
    head = "".join(f"<th>{html.escape(title)}</th>" for _, title in columns)
    body = "".join(
        "<tr>" + "".join(cell(row.get(key)) for key, _ in columns) + "</tr>" for row in shown
    )
    table = (f"<table><caption>{html.escape(caption + more)}</caption>"
             f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
    if collapsed:
        return f"<details><summary>{html.escape(caption)}</summary>{table}</details>"
    return table


def cell(value: Any) -> str:
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
    return f"<td class='text'>{html.escape(str(value))}</td>"


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
    "p_success": ("p_success_low", "p_success_high"),
    "accuracy_diff": ("accuracy_diff_boot_low", "accuracy_diff_boot_high"),
    "success_diff": ("success_diff_newcombe_low", "success_diff_newcombe_high"),
}


def with_intervals(row: dict) -> dict:
    """The row plus `<estimate>_ci` text cells, e.g. '0.42 [0.10, 0.80]', and which
    variance components were set to 0."""
    out = dict(row)
    for key, (low, high) in INTERVALS.items():
        if key not in row:
            continue
        value = row[key]
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
