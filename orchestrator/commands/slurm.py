"""`lg-study slurm`: a study as one Slurm batch job. The script is printed and kept in
the study's results folder (RESULTS/STUDY/_slurm/job.sbatch); with --submit it is
submitted, and the job id and how to follow it are printed."""

from __future__ import annotations

import sys
from pathlib import Path

from orchestrator.cli_support import bad_input, err, load_study_file, out


def write_slurm_job(values: dict, submit: bool) -> None:
    """The script for `lg-study slurm`'s options (``values``: SlurmJob's fields, paths as
    given), printed, kept, and submitted with ``submit``; exit 2 naming the option refused."""
    from orchestrator.slurm.options import SlurmError, check_fits, slurm_job
    from orchestrator.slurm.script import JOB_FOLDER, JobFiles, render, write_script
    from orchestrator.slurm.script import submit as sbatch

    study = load_study_file(values["study_file"], values.get("profile"))
    try:
        job = slurm_job(**{**values, **_absolute(values)})
        check_fits(job, study.spec.resources.cpus_per_trial, study.spec.resources.gpus_per_trial)
    except SlurmError as error:
        raise bad_input(str(error)) from None
    files = JobFiles(study.results_root(job.results) / study.name / JOB_FOLDER)
    # the bin folder of this lg-study (not resolved: a venv's python is a link out of it)
    script = write_script(render(job, study.name, files, Path(sys.executable).parent), files)
    out.print(script.read_text(), highlight=False, markup=False, soft_wrap=True)
    err.print(f"the script is kept at {script}", highlight=False)
    if not submit:
        err.print(f"submit it with: sbatch {script}", highlight=False)
        return
    try:
        job_id = sbatch(script)
    except SlurmError as error:
        raise bad_input(str(error)) from None
    for line in follow_lines(job_id, files):
        err.print(line, highlight=False)


def follow_lines(job_id: str, files) -> list[str]:
    return [f"submitted: Slurm job {job_id}",
            f"  follow it: squeue -j {job_id}; tail -f {files.log_of(job_id)}",
            f"  stop it cleanly (checkpoints kept): scancel --batch --signal=USR1 {job_id}",
            f"  continue it after it stopped: sbatch {files.script}"]


def _absolute(values: dict) -> dict:
    """The paths the job reads, absolute: it does not start in this folder; SlurmError
    for a results path sbatch's #SBATCH lines cannot carry."""
    from orchestrator.slurm.options import SlurmError

    paths = {name: Path(values[name]).expanduser().absolute()
             for name in ("study_file", "results", "setup") if values.get(name) is not None}
    if any(c.isspace() for c in str(paths["results"])):
        raise SlurmError(f"--results {str(paths['results'])!r}: the job's log is named on an #SBATCH line, "
                         "which cannot hold a space: choose a folder without one")
    if "setup" in paths and not paths["setup"].is_file():
        raise SlurmError(f"--setup {str(paths['setup'])!r}: no such file")
    return paths
