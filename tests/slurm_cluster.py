"""A real Slurm cluster on this machine for the tests of `lg-study slurm` (tests/test_slurm_jobs.py):
Debian's slurm-wlm daemons (munged, slurmctld, and one slurmd per node: Slurm runs several
on one host when each has a port of its own), configured in a temporary folder and run in
the foreground as this test's children, stopped through their own processes.

They need root (slurmd starts jobs as their user) and the packages (`apt-get install
slurm-wlm munge`, as .ci/run does); where either is missing the tests are skipped with the
reason.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "scontrol", "sinfo")
NODES = ("n1", "n2")


def missing_reason() -> str | None:
    """Why no Slurm cluster can be started here, or None."""
    absent = [name for name in DAEMONS if shutil.which(name) is None]
    if absent:
        return f"no {', '.join(absent)} here (apt-get install slurm-wlm munge, as .ci/run --long does as root)"
    if os.geteuid() != 0:
        return "Slurm's daemons must run as root here (slurmd starts each job as its user)"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class SlurmCluster:
    folder: Path
    env: dict[str, str]  # SLURM_CONF set: Slurm's commands (sbatch, scontrol) find this cluster

    def scontrol(self, *words: str) -> str:
        done = subprocess.run(["scontrol", *words], env=self.env, capture_output=True, text=True, timeout=30,
                              check=True)
        return done.stdout

    def job(self, job_id: str) -> dict[str, str]:
        """The job's fields as `scontrol show job` gives them (JobState, Restarts, ExitCode, ...)."""
        fields = {}
        for word in self.scontrol("show", "job", "-o", job_id).split():
            name, _, value = word.partition("=")
            fields.setdefault(name, value)
        return fields

    def wait_for_end(self, job_id: str, seconds: float) -> dict[str, str]:
        """The job's fields once it ended (not pending, running, requeued or completing)."""
        deadline = time.monotonic() + seconds
        while (job := self.job(job_id))["JobState"] in {"PENDING", "RUNNING", "REQUEUED", "COMPLETING",
                                                          "CONFIGURING", "REQUEUE_HOLD"}:
            assert time.monotonic() < deadline, f"job {job_id} still {job['JobState']} after {seconds} s"
            time.sleep(1)
        return job


def _config(folder: Path, hostname: str) -> str:
    nodes = "\n".join(f"NodeName={name} NodeHostname={hostname} NodeAddr=127.0.0.1 Port={free_port()} CPUs=1 "
                      "State=UNKNOWN" for name in NODES)
    return f"""\
ClusterName=lgtest{secrets.token_hex(3)}
SlurmctldHost={hostname}
SlurmctldPort={free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={folder}/munge.socket
CredType=cred/munge
# no cgroups in a container: processes tracked by parentage, tasks not bound to CPUs
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
# each node has the one CPU named here, whatever the machine has
SlurmdParameters=config_overrides
JobRequeue=1
# SIGKILL 10 s after a job's SIGTERM (Slurm's default 30 s): a requeue's test waits less
KillWait=10
ReturnToService=2
MpiDefault=none
StateSaveLocation={folder}/state
SlurmdSpoolDir={folder}/spool/%n
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/slurmd-%n.pid
SlurmctldLogFile={folder}/slurmctld.log
SlurmdLogFile={folder}/slurmd-%n.log
{nodes}
PartitionName=test Nodes={','.join(NODES)} Default=YES MaxTime=INFINITE State=UP
"""


def start_cluster() -> Iterator[SlurmCluster]:
    """A two-node Slurm cluster (one CPU a node) until the generator is closed."""
    folder = Path(tempfile.mkdtemp(prefix="lgslurm", dir="/tmp"))
    (folder / "state").mkdir()
    (folder / "spool").mkdir()
    key = folder / "munge.key"
    key.write_bytes(secrets.token_bytes(1024))
    key.chmod(0o400)
    (folder / "slurm.conf").write_text(_config(folder, socket.gethostname()))
    env = {**os.environ, "SLURM_CONF": str(folder / "slurm.conf")}
    daemons: list[subprocess.Popen] = []
    with open(folder / "daemons.log", "w") as log:
        try:
            start = [["munged", "--foreground", "--force", f"--key-file={key}", f"--socket={folder}/munge.socket",
                      f"--pid-file={folder}/munged.pid", f"--log-file={folder}/munged.log",
                      f"--seed-file={folder}/munged.seed"],
                     ["slurmctld", "-D", "-i"], *(["slurmd", "-D", "-N", name] for name in NODES)]
            for command in start:
                daemons.append(subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                                start_new_session=True))
                time.sleep(1)  # munged's socket before slurmctld, slurmctld before the nodes register
            cluster = SlurmCluster(folder, env)
            _wait_idle(cluster, daemons, folder)
            yield cluster
        finally:
            _cancel_jobs(env)
            for daemon in reversed(daemons):
                _stop(daemon)
    shutil.rmtree(folder, ignore_errors=True)


def _wait_idle(cluster: SlurmCluster, daemons: list[subprocess.Popen], folder: Path) -> None:
    deadline = time.monotonic() + 60
    while True:
        states = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T"], env=cluster.env, capture_output=True,
                                text=True, check=False).stdout.split()
        if states.count("idle") == len(NODES):
            return
        dead = [d.args[0] for d in daemons if d.poll() is not None]
        assert not dead and time.monotonic() < deadline, (
            f"Slurm did not come up (dead: {dead}, sinfo: {states}):\n" + (folder / "daemons.log").read_text()
            + "".join(p.read_text() for p in folder.glob("*.log") if p.name != "daemons.log"))
        time.sleep(1)


def _cancel_jobs(env: dict[str, str]) -> None:
    """Every job of this cluster cancelled and gone (its steps' processes, Ray's, ended by Slurm)."""
    if subprocess.run(["scancel", "--user", "root"], env=env, capture_output=True, check=False).returncode != 0:
        return  # slurmctld is not up: no job runs
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and subprocess.run(
            ["squeue", "-h"], env=env, capture_output=True, text=True, check=False).stdout.strip():
        time.sleep(1)


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
