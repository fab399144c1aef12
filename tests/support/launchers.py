"""Real launchers for multi-process tests (test fixtures, never shipped): a one-node Slurm cluster on this host
and Open MPI's mpirun, each task of a job given its own machine (sysroot) by rank.

Slurm: Debian's slurmctld, slurmd, slurm-client and munge (ci/run_tests.sh installs them as root). The cluster
lives in a temporary folder: its own munged (a private socket and pid file), a generated slurm.conf (free ports,
state, spool, pid and log files there, one node of this host's name, a partition that oversubscribes), and
slurmctld and slurmd in the foreground as child processes. It is ready when `sinfo` says the node is idle, and
`stop()` ends all three and checks that none is left. Every wait has a deadline.

Open MPI: Debian's openmpi-bin (4.1), the release whose variables jax's own Open MPI detection reads
(OMPI_MCA_orte_hnp_uri; Open MPI 5 reaches jax only through mpi4py). As root it needs --allow-run-as-root.

Tasks run `launch_task.py`, which takes the rank from the launcher (SLURM_PROCID, OMPI_COMM_WORLD_RANK), points
JAX_ROCM_SYSROOT at `<machines>/p<rank>`, and plays the part a test asks of that rank.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from tests.support.cluster import Outcome, free_port
from tests.support.snippets import clean_env

TASK = Path(__file__).resolve().parent / "launch_task.py"
SLURM_PROGRAMS = ("slurmctld", "slurmd", "srun", "sinfo", "munged")
READY_SECONDS = 30.0
STOP_SECONDS = 10.0


class LauncherMissing(Exception):
    """The launcher cannot run on this machine (not installed, not root); the message says which."""


def _program(name: str) -> str:
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")
    if found is None:
        raise LauncherMissing(f"{name} is not installed (apt-get install slurmctld slurmd slurm-client munge)")
    return found


class SlurmCluster:
    """A one-node Slurm cluster in a folder of its own, started by `start()` and ended (and removed) by `stop()`.

    The folder is made in the system's temporary directory, readable by all: munged runs as user munge and
    must reach its socket there (pytest's own temporary folders are private to root)."""

    def __init__(self) -> None:
        import tempfile

        self.home = Path(tempfile.mkdtemp(prefix="jax-rocm7-slurm-"))
        self.conf = self.home / "slurm.conf"
        self.daemons: list[subprocess.Popen[bytes]] = []
        self.munged_pid: Path = self.home / "munge" / "munged.pid"

    def environ(self, **extra: str) -> dict[str, str]:
        """The daemons' and Slurm commands' environment: the caller's without jax/ROCm settings (an earlier test
        in this worker may have left some in os.environ), with this cluster's slurm.conf."""
        return clean_env(SLURM_CONF=str(self.conf), **extra)

    def start(self) -> SlurmCluster:
        if os.geteuid() != 0:
            raise LauncherMissing("Slurm's daemons run as root here, and this is not root")
        paths = {name: _program(name) for name in SLURM_PROGRAMS}
        host = socket.gethostname().split(".")[0]
        munge_dir = self.home / "munge"
        for sub in ("state", "spool", "munge"):
            (self.home / sub).mkdir(parents=True, exist_ok=True)
        shutil.chown(munge_dir, "munge", "munge")
        os.chmod(self.home, 0o755)
        socket_path = munge_dir / "munge.socket"
        subprocess.run(
            [
                "runuser", "-u", "munge", "--", paths["munged"], f"--socket={socket_path}",
                f"--pid-file={self.munged_pid}", f"--log-file={munge_dir / 'munged.log'}",
                f"--seed-file={munge_dir / 'munged.seed'}",
            ],
            check=True, capture_output=True, timeout=STOP_SECONDS,
        )  # fmt: skip
        self.conf.write_text(
            "\n".join(
                [
                    "ClusterName=jaxrocmtest",
                    # jax's Slurm detection takes the coordinator's port from the job id (61440 + id % 4096):
                    # clusters that number from different ids keep their jobs' coordinators apart (two test
                    # sessions on one machine), within the 256 ports test_cluster.py's imitated jobs leave.
                    f"FirstJobId={random.randrange(1, 192)}",
                    f"SlurmctldHost={host}",
                    f"SlurmctldPort={free_port()}",
                    f"SlurmdPort={free_port()}",
                    "AuthType=auth/munge",
                    "CredType=cred/munge",
                    f"AuthInfo=socket={socket_path}",
                    "SlurmUser=root",
                    "SlurmdUser=root",
                    "ProctrackType=proctrack/linuxproc",
                    "TaskPlugin=task/none",
                    "SelectType=select/cons_tres",
                    "SelectTypeParameters=CR_Core",
                    "MpiDefault=none",
                    "ReturnToService=2",
                    f"StateSaveLocation={self.home / 'state'}",
                    f"SlurmdSpoolDir={self.home / 'spool'}",
                    f"SlurmctldPidFile={self.home / 'slurmctld.pid'}",
                    f"SlurmdPidFile={self.home / 'slurmd.pid'}",
                    f"SlurmctldLogFile={self.home / 'slurmctld.log'}",
                    f"SlurmdLogFile={self.home / 'slurmd.log'}",
                    f"NodeName={host} CPUs={os.cpu_count() or 2} State=UNKNOWN",
                    f"PartitionName=test Nodes={host} Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:16",
                ]
            )
            + "\n"
        )
        for daemon in ("slurmctld", "slurmd"):
            self.daemons.append(
                subprocess.Popen(
                    [paths[daemon], "-D", "-f", str(self.conf)],
                    env=self.environ(),
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline:
            state = subprocess.run(
                [paths["sinfo"], "-h", "-o", "%T"], env=self.environ(), capture_output=True, text=True, timeout=10
            ).stdout.strip()
            if state == "idle":
                self._first_job()
                return self
            time.sleep(0.3)
        tail = self.log_tails(400)
        self.stop()
        raise LauncherMissing(f"Slurm did not come up within {READY_SECONDS:g} s: {tail}")

    def _first_job(self) -> None:
        """One trivial job before any test's: slurmd registers, and the first step's set-up, off the clock."""
        done = subprocess.run(
            ["srun", "-n", "1", "true"], env=self.environ(), capture_output=True, text=True, timeout=READY_SECONDS
        )
        if done.returncode != 0:
            tail = done.stderr[-400:]
            self.stop()
            raise LauncherMissing(f"Slurm came up but its first job failed ({done.returncode}): {tail}")

    def srun(self, tasks: int, argv: Sequence[str], environ: Mapping[str, str], limit: float, cwd: Path) -> Outcome:
        """`srun --overcommit -n TASKS argv...` in `cwd` with exactly `environ` (and SLURM_CONF), ended (its
        process group killed) at `limit` seconds."""
        command = ["srun", "--overcommit", "-n", str(tasks), "--kill-on-bad-exit=0", *argv]
        return run_launcher(command, {**environ, "SLURM_CONF": str(self.conf)}, limit, cwd)

    def log_tails(self, chars: int = 3000) -> str:
        """The end of slurmctld's and slurmd's logs: what a failing test prints."""
        logs = (self.home / "slurmctld.log", self.home / "slurmd.log")
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-chars:]}" for p in logs if p.exists())

    def stop(self) -> None:
        """End slurmd, slurmctld and munged; LauncherMissing if any is still there after STOP_SECONDS."""
        for daemon in self.daemons:
            if daemon.poll() is None:
                os.killpg(daemon.pid, signal.SIGTERM)
        for daemon in self.daemons:
            try:
                daemon.wait(timeout=STOP_SECONDS)
            except subprocess.TimeoutExpired:
                os.killpg(daemon.pid, signal.SIGKILL)
                daemon.wait(timeout=STOP_SECONDS)
        if self.munged_pid.exists():
            pid = int(self.munged_pid.read_text().split()[0])
            _end(pid)
        left = self.leftovers()
        if left:
            raise AssertionError(f"processes left after the Slurm cluster stopped: {left}")
        shutil.rmtree(self.home, ignore_errors=True)

    def leftovers(self) -> list[str]:
        """Processes still running that belong to this cluster (their command line names its folder)."""
        return [f"{pid}: {line}" for pid, line in _processes() if str(self.home) in line]


def _end(pid: int) -> None:
    """SIGTERM, then SIGKILL after STOP_SECONDS; waits (by polling: it is no child of ours) for it to go."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + STOP_SECONDS
        while time.monotonic() < deadline:
            if not Path(f"/proc/{pid}").exists() or _zombie(pid):
                return
            time.sleep(0.05)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except (OSError, IndexError):
        return True


def _processes() -> list[tuple[int, str]]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            except OSError:
                continue
            if line:
                found.append((int(entry.name), line))
    return found


def mpirun() -> str:
    """Open MPI's mpirun (Debian's openmpi-bin); LauncherMissing when it is not installed."""
    found = shutil.which("mpirun")
    if found is None:
        raise LauncherMissing("mpirun is not installed (apt-get install openmpi-bin)")
    return found


def mpirun_command(tasks: int, argv: Sequence[str], environ: Mapping[str, str]) -> list[str]:
    """`mpirun -np TASKS` with each variable of `environ` passed on (-x), as root where we are root."""
    command = [mpirun(), "--oversubscribe", "-np", str(tasks)]
    if os.geteuid() == 0:
        command.append("--allow-run-as-root")
    for name in environ:
        command += ["-x", name]
    return [*command, *argv]


def run_launcher(command: Sequence[str], environ: Mapping[str, str], limit: float, cwd: Path) -> Outcome:
    """One launcher command with its own process group, killed whole at `limit` seconds. `cwd`: where the tasks
    run (never the checkout: `python -m` would import the package from there)."""
    started = time.monotonic()
    process = subprocess.Popen(
        list(command),
        env=dict(environ),
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(timeout=limit)
        return Outcome(process.returncode, out.decode(), err.decode(), time.monotonic() - started)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        return Outcome(None, out.decode(), err.decode(), time.monotonic() - started)


def task_argv(python: Path, machines: Path, *preflight: str) -> list[str]:
    """What each task of a job runs: launch_task.py (under `python`), then the preflight with `preflight` args."""
    return [str(python), str(TASK), str(machines), str(python), "-m", "jax_rocm7_plugin", "cluster", *preflight]


def python_for_tasks() -> str:
    return sys.executable
