"""`lg-study slurm` without a cluster: the script it writes (its #SBATCH lines, settings and
the shared body, valid bash), where it keeps it, and each bad option refused with exit 2,
naming the option, before anything is written. tests/test_slurm_jobs.py runs the scripts
on a real Slurm (long tier)."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.cli import app
from orchestrator.slurm.options import SlurmError, slurm_job, time_limit_seconds
from orchestrator.slurm.script import BODY

runner = CliRunner()
STUDY = Path(__file__).parent / "study_files" / "good_two_trials.yaml"
REQUIRED = ["--nodes", "2", "--gpus-per-node", "4", "--cpus-per-node", "16", "--time", "1-00:00:00"]


def write(tmp_path: Path, *options: str) -> tuple[int, str, Path]:
    outcome = runner.invoke(app, ["slurm", str(STUDY), *REQUIRED, "--results", str(tmp_path / "results"), *options])
    return outcome.exit_code, outcome.output, tmp_path / "results"


def sbatch_lines(script: str) -> dict[str, str]:
    found = [line.removeprefix("#SBATCH --").partition("=") for line in script.splitlines()
             if line.startswith("#SBATCH")]
    return {name: value for name, _, value in found}


def settings(script: str) -> dict[str, str]:
    """The settings block: the LG_ variables above the shared body."""
    head = script.removesuffix(BODY.read_text())
    return {name: shlex.split(value)[0] if value != "''" else "" for name, _, value in
            (line.partition("=") for line in head.splitlines() if line.startswith("LG_"))}


def test_the_script_asks_slurm_for_the_allocation_requeue_and_a_warning(tmp_path: Path) -> None:
    code, output, results = write(tmp_path, "--partition", "gpu", "--account", "lab-42")
    assert code == 0, output
    script = (results / "two_trials" / "_slurm" / "job.sbatch").read_text()
    assert output.startswith(script)  # printed whole, then where it is kept
    assert sbatch_lines(script) == {
        "job-name": "lg-two_trials", "nodes": "2", "ntasks-per-node": "1", "cpus-per-task": "16",
        "gpus-per-node": "4", "time": "1-00:00:00", "partition": "gpu", "account": "lab-42",
        "signal": "B:USR1@120", "open-mode": "append",
        "output": f"{results}/two_trials/_slurm/job-%j.log", "requeue": ""}
    assert script.endswith(BODY.read_text())
    assert subprocess.run(["bash", "-n"], input=script, text=True, check=False).returncode == 0


def test_the_settings_are_absolute_and_name_the_profile_tracking_and_setup(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "site.sh").write_text("module load cuda\n")
    code, output, _ = write(tmp_path, "--profile", "longer", "--tracking-uri", "http://10.0.0.5:5000",
                            "--setup", "site.sh", "--grace", "300")
    assert code == 0, output
    script = (tmp_path / "results" / "_profiles" / "longer" / "two_trials" / "_slurm" / "job.sbatch").read_text()
    found = settings(script)
    assert found["LG_STUDY_FILE"] == str(STUDY.absolute()) and found["LG_PROFILE"] == "longer"
    assert found["LG_RESULTS"] == str(tmp_path / "results")
    assert found["LG_TRACKING_URI"] == "http://10.0.0.5:5000" and found["LG_SETUP"] == str(tmp_path / "site.sh")
    assert (found["LG_CPUS"], found["LG_GPUS"]) == ("16", "4")
    assert Path(found["LG_BIN"], "lg-study").exists()
    assert sbatch_lines(script)["signal"] == "B:USR1@300"


def test_a_cpu_job_asks_for_no_gpus(tmp_path: Path) -> None:
    outcome = runner.invoke(app, ["slurm", str(STUDY), "--nodes", "1", "--gpus-per-node", "0", "--cpus-per-node",
                                  "2", "--time", "90", "--results", str(tmp_path)])
    assert outcome.exit_code == 0, outcome.output
    assert "gpus-per-node" not in sbatch_lines(outcome.output)


@pytest.mark.parametrize(("options", "named"), [
    (["--nodes", "0"], "--nodes 0"),
    (["--cpus-per-node", "0"], "--cpus-per-node 0"),
    (["--gpus-per-node", "-1"], "--gpus-per-node -1"),
    (["--time", "soon"], "--time 'soon'"),
    (["--time", "0"], "--time '0'"),
    (["--time", "2", "--grace", "120"], "--grace 120"),
    (["--partition", "gpu; rm -rf ~"], "--partition 'gpu; rm -rf ~'"),
    (["--account", "a b"], "--account 'a b'"),
    (["--setup", "no_such_file.sh"], "--setup"),
    (["--profile", "nope"], "nope"),
])
def test_bad_options_are_refused_naming_the_option(tmp_path: Path, options: list[str], named: str) -> None:
    given = dict(zip(REQUIRED[::2], REQUIRED[1::2]))
    given.update(dict(zip(options[::2], options[1::2])))
    outcome = runner.invoke(app, ["slurm", str(STUDY), *(w for pair in given.items() for w in pair),
                                  "--results", str(tmp_path / "results")])
    assert outcome.exit_code == 2, outcome.output
    assert named in " ".join(outcome.output.split())
    assert not (tmp_path / "results").exists()


def test_a_trial_larger_than_a_node_is_refused(tmp_path: Path) -> None:
    outcome = runner.invoke(app, ["slurm", str(STUDY), "--nodes", "4", "--gpus-per-node", "0", "--cpus-per-node",
                                  "1", "--time", "10", "--results", str(tmp_path)])
    assert outcome.exit_code == 0, outcome.output  # one CPU a trial fits one CPU a node
    big = tmp_path / "big.yaml"
    big.write_text(STUDY.read_text().replace("{cpus_per_trial: 1}", "{cpus_per_trial: 2, gpus_per_trial: 1}"))
    outcome = runner.invoke(app, ["slurm", str(big), "--nodes", "4", "--gpus-per-node", "1", "--cpus-per-node",
                                  "1", "--time", "10", "--results", str(tmp_path)])
    assert outcome.exit_code == 2 and "--cpus-per-node 1" in outcome.output and "cpus_per_trial" in outcome.output


def test_a_results_folder_with_a_space_is_refused(tmp_path: Path) -> None:
    outcome = runner.invoke(app, ["slurm", str(STUDY), *REQUIRED, "--results", str(tmp_path / "my results")])
    assert outcome.exit_code == 2 and "--results" in outcome.output


def test_submit_without_sbatch_keeps_the_script_and_says_so(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    code, output, results = write(tmp_path, "--submit")
    assert code == 2 and "--submit: no sbatch here" in " ".join(output.split())
    assert (results / "two_trials" / "_slurm" / "job.sbatch").exists()


def test_submit_prints_the_job_id_and_how_to_follow_it(tmp_path: Path, monkeypatch) -> None:
    """sbatch here is a stand-in that records its arguments and answers as `sbatch --parsable` does."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "sbatch"
    fake.write_text(f"#!/bin/sh\necho \"$@\" > {tmp_path}/sbatch.args\necho '4242;cluster'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    code, output, results = write(tmp_path, "--submit")
    assert code == 0, output
    script = results / "two_trials" / "_slurm" / "job.sbatch"
    assert (tmp_path / "sbatch.args").read_text().split() == ["--parsable", str(script)]
    said = " ".join(output.split())
    assert "submitted: Slurm job 4242" in said and f"tail -f {script.parent}/job-4242.log" in said
    assert "scancel --batch --signal=USR1 4242" in said and f"sbatch {script}" in said


@pytest.mark.parametrize(("time", "seconds"), [
    ("90", 5400), ("90:30", 5430), ("2:00:00", 7200), ("1-0", 86400), ("1-2:30", 95400), ("1-0:0:5", 86405)])
def test_slurms_time_formats(time: str, seconds: int) -> None:
    assert time_limit_seconds(time) == seconds


def test_the_options_model_names_the_option_it_refuses(tmp_path: Path) -> None:
    with pytest.raises(SlurmError, match="--cpus-per-node"):
        slurm_job(study_file=STUDY, nodes=1, gpus_per_node=0, cpus_per_node=0, time="10", results=tmp_path)


def test_writing_a_script_loads_neither_ray_nor_mlflow() -> None:
    """`lg-study slurm` runs on a login node: the slurm room and its command import neither."""
    code = ("import sys, orchestrator.slurm.options, orchestrator.slurm.script, orchestrator.commands.slurm\n"
            "print(sorted(m for m in ('ray', 'mlflow') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert done.stdout.strip() == "[]"


def test_a_node_that_does_not_see_the_results_folder_stops_the_job_before_ray(tmp_path: Path) -> None:
    """The script run by bash as Slurm runs it, with an `srun` that plays a second node on
    which the marker file is missing (a folder that is not shared): the job names that
    node, says what to do, and exits 2 without starting Ray."""
    code, output, results = write(tmp_path)
    assert code == 0, output
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "srun").write_text('#!/bin/bash\nwhile [[ $1 == --* ]]; do shift; done\n'
                               'rm -f "${@: -2:1}"\nSLURMD_NODENAME=n2 exec "$@"\n')
    (fake / "ray").write_text(f"#!/bin/sh\ntouch {tmp_path}/ray-started\n")
    for tool in ("srun", "ray"):
        (fake / tool).chmod(0o755)
    env = {"PATH": f"{fake}:/usr/bin:/bin", "SLURM_JOB_ID": "7", "SLURM_JOB_NUM_NODES": "2",
           "SLURM_JOB_NODELIST": "n[1-2]", "SLURMD_NODENAME": "n1", "HOME": str(tmp_path)}
    done = subprocess.run(["bash", str(results / "two_trials" / "_slurm" / "job.sbatch")], env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 2, said
    assert "node n2 (" in said and f"does not see {results}" in said
    assert f"the results folder {results} is not on a filesystem every node sees" in said
    assert "give lg-study slurm --results a folder on the cluster's shared filesystem" in said
    assert not (tmp_path / "ray-started").exists() and "starting Ray" not in said
    assert not list(results.glob(".slurm-check-*"))
