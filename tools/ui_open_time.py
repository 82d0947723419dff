"""How long `lg-study ui`'s runs page takes to show a study's groups (issue 54, item 4;
docs/performance.md, "Group parents at 10,000 trials"): the MLflow server `lg-study ui`
starts over DIR/mlflow.db (tools/group_scale_store.py writes one of 10,000 nested
trial runs under 500 parents), and a headless Chromium (tests/chromium_pipe.py)
already running, as a user's browser is, that opens the printed address with an empty
profile each time (nothing cached) and waits until the table shows a parent's row.
The seconds are from the address asked to that row on screen; the browser's own start
is timed apart.

    PYTHONPATH=. python tools/ui_open_time.py DIR STUDY [REPEATS]
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))
from chromium_pipe import Chromium, browser_path  # the tests' helper: tests/ is no package

LG_STUDY = Path(sys.executable).parent / "lg-study"


def parent_names(store: Path, study: str) -> list[str]:
    from mlflow import MlflowClient

    from orchestrator.mlflow_tracking.group_runs import GROUP_KIND, KIND_TAG
    from results_contract.experiments import default_store_uri

    client = MlflowClient(default_store_uri(store))
    experiment = client.get_experiment_by_name(study).experiment_id
    found = client.search_runs([experiment], f"tags.`{KIND_TAG}` = '{GROUP_KIND}'", max_results=1000)
    return [run.info.run_name for run in found]


def open_once(url: str, names: list[str]) -> tuple[float, list[float], int]:
    """(browser start s, [address to a parent's row s: cold, then warm], rows shown): a
    fresh profile opens the page (nothing cached), then a new tab of it again (the
    browser's cache of MLflow's scripts warm, as for a user who opened it before)."""
    shown = (f"(() => {{ const names = {json.dumps(names)}; "
             "return Array.from(document.querySelectorAll('.ag-row')).filter("
             "r => names.some(n => r.innerText.includes(n))).length; })()")
    opened = []
    with tempfile.TemporaryDirectory(prefix="ui-open-") as profile:
        started = time.perf_counter()
        page = Chromium(browser_path(), Path(profile))
        browser_s = time.perf_counter() - started
        try:
            for _ in ("cold", "warm"):
                page.go("about:blank")
                asked = time.perf_counter()
                page.go(url)
                rows = page.wait_for(shown, 120, "a parent's row on the runs page")
                opened.append(time.perf_counter() - asked)
        finally:
            page.close()
    return browser_s, opened, rows


def main(store: Path, study: str, repeats: int) -> None:
    names = parent_names(store, study)
    print(f"{len(names)} parents", flush=True)
    ui = subprocess.Popen([str(LG_STUDY), "ui", "--study", study, "--port", str(_free_port()),
                           "--results", str(store)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          text=True, start_new_session=True)
    try:
        url = next(line.split(": ", 1)[1].strip() for line in ui.stdout if line.startswith("experiment "))
        for _ in range(repeats):
            start, (cold, warm), rows = open_once(url, names)
            print(f"browser start {start:.2f} s; the runs page to a parent's row: {cold:.2f} s with nothing "
                  f"cached, {warm:.2f} s opened again ({rows} parents' rows)", flush=True)
    finally:
        os.killpg(ui.pid, signal.SIGINT)
        ui.wait(60)


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 3)
