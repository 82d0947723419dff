"""A quiet terminal: `lg-study run` shows lg-study's own lines only, with and without a
terminal; what Ray, Tune, MLflow and SQLAlchemy print goes to the run's log file, and a
warning the user must act on is said again in lg-study's words."""

from __future__ import annotations

import fcntl
import io
import logging
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
from rich.console import Console

from orchestrator.console.terminal import ACTIONABLE, quiet_terminal
from results_contract.layout import LOGS

STUDY = Path(__file__).parent / "study_files" / "good_two_trials.yaml"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
#: a line another library printed: its timestamp (Ray "2026-11-23 13:41:57,040",
#: MLflow "2026/11/23 13:42:14", glog "[2026-11-23 ..." or "I1123 13:41:57") or level first
FOREIGN = re.compile(r"\s*(\[?\d{4}[-/]\d\d[-/]\d\d|[IWEF]\d{4} \d\d:|WARNING|INFO|ERROR|DEBUG|\(raylet\))")


@pytest.fixture(autouse=True)
def ray_logging_as_in_a_driver():
    """The "ray" logger as lg-study's ray.init leaves it in a driver: a handler bound to
    the sys.stderr of that moment, propagation off, level WARNING (start_ray). Earlier
    tests in the same pytest process leave it otherwise: a run inside CliRunner leaves
    the handler on CliRunner's closed stream, test_tracking's ray.init the level ERROR."""
    ray_logger = logging.getLogger("ray")
    kept = ray_logger.handlers[:], ray_logger.propagate, ray_logger.level
    ray_logger.handlers, ray_logger.propagate = [logging.StreamHandler(sys.stderr)], False
    ray_logger.setLevel(logging.WARNING)
    yield
    ray_logger.handlers, ray_logger.propagate = kept[:2]
    ray_logger.setLevel(kept[2])


def few_steps_study(folder: Path) -> Path:
    study = folder / "two_trials.yaml"
    study.write_text(STUDY.read_text()
                     .replace("steps: 30", "steps: 6").replace("log_every: 10", "log_every: 3")
                     .replace("every: 15", "every: 3"))
    return study


def run_in_terminal(command: list[str], env: dict) -> tuple[int, str]:
    """Run `command` with stdout and stderr on a pseudo-terminal of 120 x 40; its output."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=follower, stderr=follower, env=env)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: every holder of the terminal has closed it
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    return process.wait(timeout=60), b"".join(chunks).decode("utf-8", errors="replace")


def check_quiet(code: int, output: str, results: Path, terminal: bool) -> None:
    plain = ANSI.sub("", output)
    assert code == 0, plain
    lines = [line for line in re.split(r"[\r\n]+", plain) if line.strip()]
    foreign = [line for line in lines if FOREIGN.match(line)]
    assert foreign == [], "\n".join(foreign)
    text = " ".join(plain.split())
    assert "study two_trials: 2 trials" in text and "ran 2 trials" in text
    assert "accuracy by test length" in text  # the final table
    assert ("2/2" if terminal else "[2/2] trial") in text  # the live bar, or a line per finished trial
    logs = list((results / "two_trials" / LOGS).glob("run-*.log"))
    assert len(logs) == 1 and f"messages: {logs[0]}" in text  # named in the output
    logged = logs[0].read_text()
    assert re.search(r"^\d{4}[-/]\d\d[-/]\d\d.*(WARNING|INFO)", logged, re.MULTILINE), logged  # Ray's and MLflow's
    assert "mlflow" in logged


@pytest.mark.slow  # two `lg-study run` processes: about 40 s
@pytest.mark.long
def test_run_prints_only_lg_study_lines_and_logs_the_rest(tmp_path):
    """Two runs at once, one with a terminal and one writing to files."""
    study = few_steps_study(tmp_path)
    env = {**os.environ, "RAY_ADDRESS": "", "COLUMNS": "120"}
    # an empty cache folder each: the run builds MLflow's empty store itself, so MLflow
    # prints its lines (its migrations'), which must reach the log and not the terminal
    cached = {name: {**env, "XDG_CACHE_HOME": str(tmp_path / f"cache_{name}")} for name in ("piped", "tty")}
    command = [sys.executable, "-m", "orchestrator.cli", "run", str(study), "--results"]
    with open(tmp_path / "out.txt", "w+") as out, open(tmp_path / "err.txt", "w+") as err:
        piped = subprocess.Popen([*command, str(tmp_path / "piped")], stdout=out, stderr=err,
                                 stdin=subprocess.DEVNULL, env=cached["piped"])
        code, output = run_in_terminal([*command, str(tmp_path / "tty")], cached["tty"])
        piped_code = piped.wait(timeout=600)
        out.seek(0), err.seek(0)
        piped_output = out.read() + err.read()
    check_quiet(code, output, tmp_path / "tty", terminal=True)
    check_quiet(piped_code, piped_output, tmp_path / "piped", terminal=False)


def test_what_libraries_print_goes_to_the_log_and_lg_study_lines_to_the_terminal(tmp_path):
    import ray  # noqa: F401 (sets Ray's log handler up: it writes to sys.stderr)

    terminal = io.StringIO()
    console = Console(file=terminal, width=200)
    log = tmp_path / "results" / "s" / LOGS / "run.log"
    with quiet_terminal(log, [console], say_on=console):
        console.print("lg-study line")
        print("a print to stdout")
        print("a library writing to sys.stderr", file=sys.stderr)
        os.write(2, b"C++ writing to descriptor 2\n")
        subprocess.run([sys.executable, "-c", "import sys; sys.stderr.write('a child process\\n')"], check=True)
        logging.getLogger("ray.tune.utils.util").warning("process_trial_result operation took 0.654 s")
    assert terminal.getvalue() == "lg-study line\n"
    logged = log.read_text()
    for line in ("a print to stdout", "a library writing to sys.stderr", "C++ writing to descriptor 2",
                 "a child process", "process_trial_result operation took 0.654 s"):
        assert line in logged


def test_a_warning_to_act_on_is_said_again_in_lg_study_words(tmp_path):
    terminal = io.StringIO()
    console = Console(file=terminal, width=300)
    log = tmp_path / "run.log"
    stuck = ACTIONABLE[0]
    with quiet_terminal(log, [console], say_on=console):
        logging.getLogger("ray.tune.execution.insufficient_resources_manager").warning(
            "Ignore this message if the cluster is autoscaling. No trial is running and no new trial has "
            "been started within the last 60 seconds. You asked for 2.0 CPUs and 1.0 GPUs per trial")
        logging.getLogger("ray.tune.execution.insufficient_resources_manager").warning(
            "No trial is running and no new trial has been started within the last 120 seconds.")
        logging.getLogger("ray.tune.utils.util").warning("process_trial_result operation took 0.654 s")
    said = terminal.getvalue()
    assert said.count(stuck.says) == 1 and str(log) in said  # once, naming the log
    assert "process_trial_result" not in said
    assert said.startswith("warning: no trial has started")


def test_a_refused_run_leaves_no_log_and_a_deleted_folder_keeps_it(tmp_path):
    console = Console(file=io.StringIO())
    refused = tmp_path / "results" / "s" / LOGS / "run.log"
    with quiet_terminal(refused, [console], say_on=console) as run:
        print("refused")
        run.discard = True
    assert not (tmp_path / "results").exists()

    kept = tmp_path / "results" / "s" / LOGS / "run.log"
    with quiet_terminal(kept, [console], say_on=console):
        print("before --restart deletes the study folder")
        for path in sorted(kept.parent.parent.rglob("*"), reverse=True):
            path.rmdir() if path.is_dir() else path.unlink()
        kept.parent.parent.rmdir()
        time.sleep(0.01)
        print("after")
    assert kept.read_text() == "before --restart deletes the study folder\nafter\n"


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here (every write to it: ENOSPC)")
def test_a_log_that_cannot_take_a_byte_adds_nothing_to_how_the_run_ends():
    """The log on a disk too full for any of it (/dev/full fails every write with
    ENOSPC): a library's line to it fails, and the teardown that flushes the log and
    gives the logging handlers their streams back neither raises over the run's own
    exit (a full disk's exit 74) nor leaves a handler on the log."""
    import typer

    terminal = io.StringIO()
    console = Console(file=terminal, width=200)
    library = logging.getLogger("a_library_writing_to_stderr")
    handler = logging.StreamHandler(sys.stderr)
    library.addHandler(handler)
    try:
        with pytest.raises(typer.Exit) as raised, quiet_terminal(Path("/dev/full"), [console], say_on=console):
            library.warning("a line the log cannot take")
            console.print("stopped: the disk holding the results is full")
            raise typer.Exit(74)
        assert raised.value.exit_code == 74 and raised.value.__context__ is None
        assert handler.stream is sys.stderr
        assert terminal.getvalue() == "stopped: the disk holding the results is full\n"
    finally:
        library.removeHandler(handler)
