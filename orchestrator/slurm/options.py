"""The options of `lg-study slurm`, checked before any script is written: each refusal
names the option it is about."""

from __future__ import annotations

import re
from pathlib import Path

import pydantic
from pydantic import BaseModel, ConfigDict, Field

#: Slurm's time formats (sbatch --time): minutes, minutes:seconds, hours:minutes:seconds,
#: days-hours, days-hours:minutes, days-hours:minutes:seconds
_TIME = re.compile(r"(?:(?P<days>\d+)-(?P<dh>\d+)(?::(?P<dm>\d+)(?::(?P<ds>\d+))?)?"
                   r"|(?P<a>\d+)(?::(?P<b>\d+)(?::(?P<c>\d+))?)?)")
#: what a partition or account name may hold: it goes on an #SBATCH line as it is
_SLURM_NAME = re.compile(r"[A-Za-z0-9_.,:+-]+")


class SlurmError(ValueError):
    """A `lg-study slurm` option that cannot make a job (the message names the option)."""


def time_limit_seconds(time: str) -> int:
    """Seconds in a Slurm time limit (`--time`); SlurmError when it is none of Slurm's formats."""
    found = _TIME.fullmatch(time.strip())
    if found is None:
        raise SlurmError(f"--time {time!r}: not a Slurm time limit (minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM "
                         "or D-HH:MM:SS)")
    parts = {key: int(value) for key, value in found.groupdict().items() if value is not None}
    if "days" in parts:
        return (parts["days"] * 24 + parts["dh"]) * 3600 + parts.get("dm", 0) * 60 + parts.get("ds", 0)
    if "c" in parts:
        return parts["a"] * 3600 + parts["b"] * 60 + parts["c"]
    return parts["a"] * 60 + parts.get("b", 0)


class SlurmJob(BaseModel):
    """One batch job running one study: what `lg-study slurm` was given, checked."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    #: the study file the job runs (absolute: the job does not start where it was written)
    study_file: Path
    #: the study file's profile, or None
    profile: str | None = None
    #: nodes of the allocation; one Ray node on each
    nodes: int = Field(ge=1, le=10_000)
    #: GPUs each node gives Ray (0: a CPU-only job)
    gpus_per_node: int = Field(ge=0, le=64)
    #: CPU cores each node gives Ray (the driver shares the first node's)
    cpus_per_node: int = Field(ge=1, le=4096)
    #: Slurm's time limit, in one of its formats
    time: str
    #: seconds before the time limit at which Slurm asks the study to stop
    grace: int = Field(120, ge=10)
    partition: str | None = None
    account: str | None = None
    #: the results root on the filesystem every node sees (absolute)
    results: Path
    #: an MLflow tracking server, or None for the SQLite store beside the results
    tracking_uri: str | None = None
    #: a file sourced on every node before Ray starts (modules, conda or venv activation)
    setup: Path | None = None

    @pydantic.field_validator("time")
    @classmethod
    def _slurm_time(cls, time: str) -> str:
        if time_limit_seconds(time) <= 0:
            raise SlurmError(f"--time {time!r}: the time limit must be longer than zero")
        return time.strip()

    @pydantic.field_validator("partition", "account")
    @classmethod
    def _one_word(cls, value: str | None, info: pydantic.ValidationInfo) -> str | None:
        if value is not None and not _SLURM_NAME.fullmatch(value):
            raise SlurmError(f"--{info.field_name} {value!r}: a Slurm name holds letters, digits and _.,:+- only")
        return value

    @pydantic.model_validator(mode="after")
    def _grace_within_the_limit(self) -> SlurmJob:
        limit = time_limit_seconds(self.time)
        if self.grace >= limit:
            raise SlurmError(f"--grace {self.grace}: the stop signal would come before the job starts; give "
                             f"fewer seconds than --time {self.time} ({limit} s)")
        return self


def slurm_job(**values) -> SlurmJob:
    """A SlurmJob from `lg-study slurm`'s options; SlurmError naming the first option refused."""
    try:
        return SlurmJob(**values)
    except pydantic.ValidationError as error:
        first = error.errors()[0]
        cause = first.get("ctx", {}).get("error")
        if isinstance(cause, SlurmError):
            raise cause from None
        option = f"--{str(first['loc'][0]).replace('_', '-')}" if first["loc"] else "options"
        raise SlurmError(f"{option} {first.get('input')!r}: {first['msg'].lower()}") from None


def check_fits(job: SlurmJob, cpus_per_trial: float, gpus_per_trial: float) -> None:
    """SlurmError when one trial asks more than one node gives Ray (Tune never splits a trial)."""
    if cpus_per_trial > job.cpus_per_node:
        raise SlurmError(f"--cpus-per-node {job.cpus_per_node}: the study's trials ask for {cpus_per_trial:g} CPUs "
                         "each (resources.cpus_per_trial), more than a node gives")
    if gpus_per_trial > job.gpus_per_node:
        raise SlurmError(f"--gpus-per-node {job.gpus_per_node}: the study's trials ask for {gpus_per_trial:g} GPUs "
                         "each (resources.gpus_per_trial), more than a node gives")
