"""The sbatch script `lg-study slurm` writes: #SBATCH lines and settings from the job's
options, then the fixed body every such script shares (job.sh beside this module: the
results folder checked on every node, one Ray cluster over the allocation, `lg-study
run` on its head, Ray stopped at the end); and its submission with sbatch."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from orchestrator.slurm.options import SlurmError, SlurmJob

BODY = Path(__file__).with_name("job.sh")
#: the folder, under the study's results folder, holding the script and the job's logs
JOB_FOLDER = "_slurm"
SCRIPT_NAME = "job.sbatch"
#: the signal Slurm sends the batch shell `grace` seconds before the time limit; the
#: shell turns it into one SIGTERM for `lg-study run` (job.sh says why not TERM itself)
WARNING_SIGNAL = "USR1"


@dataclass(frozen=True)
class JobFiles:
    """Where a job's script and logs live (the study's results folder, seen by every node)."""

    folder: Path

    @property
    def script(self) -> Path:
        return self.folder / SCRIPT_NAME

    @property
    def log(self) -> Path:
        """The job's log as Slurm names it (%j: the job id); every run of a requeued job appends."""
        return self.folder / "job-%j.log"

    def log_of(self, job_id: str) -> Path:
        return self.folder / f"job-{job_id}.log"


def render(job: SlurmJob, study_name: str, files: JobFiles, lg_bin: Path) -> str:
    """The whole script: header, settings, and the fixed body."""
    return "\n".join([*_header(job, study_name, files), "", *_settings(job, files, lg_bin), "", BODY.read_text()])


def _header(job: SlurmJob, study_name: str, files: JobFiles) -> list[str]:
    profile = f" --profile {job.profile}" if job.profile else ""
    options = {
        "job-name": f"lg-{study_name}",
        "nodes": job.nodes,
        "ntasks-per-node": 1,
        "cpus-per-task": job.cpus_per_node,
        "gpus-per-node": job.gpus_per_node or None,
        "time": job.time,
        "partition": job.partition,
        "account": job.account,
        "signal": f"B:{WARNING_SIGNAL}@{job.grace}",
        "open-mode": "append",
        "output": files.log,
    }
    return ["#!/bin/bash",
            f"# lg-study run {job.study_file}{profile} as one Slurm job, written by `lg-study slurm`;",
            "# its options: `lg-study slurm --help`; the part below the settings is the same in every such script.",
            "# One task a node (one Ray node each) with --cpus-per-node cores; USR1 to this batch shell",
            "# alone, --grace seconds before the time limit, for a clean stop; a requeued job appends to",
            "# its log; preempted or on a failed node, the job goes back in the queue.",
            *(f"#SBATCH --{name}={value}" for name, value in options.items() if value is not None),
            "#SBATCH --requeue"]


def _settings(job: SlurmJob, files: JobFiles, lg_bin: Path) -> list[str]:
    values = {
        "LG_STUDY_FILE": job.study_file,
        "LG_PROFILE": job.profile or "",
        "LG_RESULTS": job.results,
        "LG_TRACKING_URI": job.tracking_uri or "",
        "LG_SETUP": job.setup or "",
        "LG_BIN": lg_bin,
        "LG_CPUS": job.cpus_per_node,
        "LG_GPUS": job.gpus_per_node,
        "LG_SCRIPT": files.script,
    }
    return ["# settings (from lg-study slurm's options): the study file and results absolute, since",
            "# the job starts elsewhere; LG_BIN the bin folder of the lg-study that wrote this script",
            "# (its ray and python too); LG_TRACKING_URI empty: SQLite in LG_RESULTS; LG_CPUS and",
            "# LG_GPUS what each node gives Ray",
            *(f"{name}={shlex.quote(str(value))}" for name, value in values.items())]


def write_script(text: str, files: JobFiles) -> Path:
    files.folder.mkdir(parents=True, exist_ok=True)
    files.script.write_text(text)
    files.script.chmod(0o755)
    return files.script


def submit(script: Path) -> str:
    """Submit the script with sbatch; the job id. SlurmError when sbatch is missing or refuses."""
    sbatch = shutil.which("sbatch")
    if sbatch is None:
        raise SlurmError(f"--submit: no sbatch here (run it on the cluster's login node); the script is {script}")
    done = subprocess.run([sbatch, "--parsable", str(script)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SlurmError(f"--submit: sbatch refused {script}: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout.strip().split(";")[0]  # --parsable: "id" or "id;cluster"
