"""The cluster preflight with the real engine: processes joining jax.distributed on localhost (jax 0.10.2,
CPython 3.11, the plugin from this checkout), each with its own synthetic sysroot. tests/e2e repeats the
main cases on jax 0.12 from built wheels."""

from __future__ import annotations

import json
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.cluster import (
    JOIN_THEN_DIE,
    ODD_EXPECTED,
    ODD_NODES,
    Job,
    consistent_job,
    findings_by_id,
    free_port,
    gpus_with_ids,
    host_sysroot,
    odd_commands,
    odd_job,
    report_of,
)
from tests.support.environment import REPO

SLURM_PORT_BASE = 65535 - 2**12 + 1  # jax's Slurm and Open MPI modules pick ports from here


@pytest.fixture
def job(tmp_path: Path, standin_library: Path) -> Job:
    return Job(Path(sys.executable), standin_library, tmp_path, pythonpath=str(REPO))


def test_consistent_cluster_exits_0_everywhere(job: Job, tmp_path: Path, build: Path) -> None:
    outcomes = consistent_job(job, tmp_path, build, free_port())
    assert [o.returncode for o in outcomes] == [0, 0, 0, 0], [o.stderr[-1500:] for o in outcomes]
    report = report_of(outcomes[0])
    assert report["verdict"] == "consistent" and report["findings"] == []
    assert report["reported"] == [0, 1, 2, 3] and report["missing"] == []
    assert report["hosts"] == ["node-0", "node-1"] and report["method"] == "arguments"
    assert all(o.stdout == "" and o.stderr == "" for o in outcomes[1:]), "only process 0 speaks"


def test_odd_processes_are_named(job: Job, tmp_path: Path, build: Path) -> None:
    outcomes = odd_job(job, tmp_path, build, free_port(), REPO / "jax_rocm7_plugin")
    assert [o.returncode for o in outcomes] == [1] * 8, [o.stderr[-1500:] for o in outcomes]
    report = report_of(outcomes[0])
    found = findings_by_id(report)
    assert {k: v["processes"] for k, v in found.items()} == ODD_EXPECTED, report
    assert found["cluster-gpu-arch-mismatch"]["hosts"] == ["node-3"]
    assert "ROCm 7.1.1" in str(found["cluster-rocm-mismatch"]["summary"])
    assert "kfd-device-missing" in str(found["cluster-backend-unavailable"]["summary"])
    assert ".post9" in str(found["cluster-version-mismatch"]["summary"])
    assert "eth0 down" in str(found["cluster-socket-ifname-missing"]["summary"])
    degraded = found["cluster-gpu-degraded"]  # before the job: the preflight names the GPU, its address, its host
    pci = ODD_NODES["node-1"].boards[1].pci
    assert degraded["hosts"] == ["node-1"]
    assert str(degraded["summary"]).startswith(f"node-1: GPU 1 (gfx942 at {pci}) has had 4 uncorrectable"), degraded
    unlike = found["cluster-node-unlike-peers"]
    assert unlike["hosts"] == ["node-2"] and "power cap" in str(unlike["summary"]) and "600 W" in str(unlike["summary"])


def test_no_process_exits_before_process_0_has_printed_its_report(job: Job, tmp_path: Path, build: Path) -> None:
    """Under mpirun the first process to exit non-zero ends the job, process 0 with it: its report must be out
    before anyone takes the job's code. Process 0's stdout here is a one-page pipe the test leaves unread for a
    while, so its report (larger than a page) cannot be written: nobody may exit meanwhile."""
    import fcntl
    import subprocess

    commands = odd_commands(job, tmp_path, build, free_port(), REPO / "jax_rocm7_plugin")
    started = []
    for process, (argv, env) in enumerate(commands):
        out = subprocess.PIPE if process == 0 else subprocess.DEVNULL
        started.append(subprocess.Popen(argv, env=env, cwd=tmp_path, stdout=out, stderr=subprocess.DEVNULL))
    assert started[0].stdout is not None
    fcntl.fcntl(started[0].stdout.fileno(), fcntl.F_SETPIPE_SZ, 4096)
    try:
        # Held 9 s: the verdict comes within a few seconds, then the report blocks on the pipe. Taking the code,
        # the others wait up to 10 s after the verdict for process 0's final one before they go with the verdict's.
        deadline = time.monotonic() + 9
        while time.monotonic() < deadline and all(p.poll() is None for p in started[1:]):
            time.sleep(0.2)
        early = [p for p, proc in enumerate(started) if proc.poll() is not None]
        report = started[0].stdout.read().decode()
        codes = [proc.wait(timeout=60) for proc in started]
    finally:
        for proc in started:
            if proc.poll() is None:
                proc.kill()
    assert len(report.encode()) > 4096, "the report fits the pipe: the test proves nothing"
    assert early == [], f"processes {early} exited while process 0 could not print its report"
    assert codes == [1] * 8 and json.loads(report)["verdict"] != "consistent"


def test_a_process_that_never_starts_is_named_and_nobody_waits_past_the_deadline(job: Job, tmp_path: Path) -> None:
    # 20 s: each process joins within its own deadline less the exchange's reserve (5 s), and on a loaded machine
    # process 0 was seen starting its service in the last moments of the others' 15 s.
    port, timeout = free_port(), 20.0
    commands = []
    for process in range(3):  # of 4: process 3 never starts
        root = host_sysroot(tmp_path / f"p{process}", "node-0", gpus_with_ids(4))
        commands.append((job.explicit(process, 4, port, timeout, "--local-device-ids", str(process)), job.env(root)))
    outcomes = job.run(commands, timeout + 30)
    assert [o.returncode for o in outcomes] == [1, 1, 1], [o.stderr[-1500:] for o in outcomes]
    assert max(o.seconds for o in outcomes) <= timeout + 5
    assert all("Abort" not in o.stderr and "Traceback" not in o.stderr for o in outcomes)
    report = report_of(outcomes[0])
    assert report["missing"] == [3]
    (finding,) = report["findings"]
    assert finding["id"] == "cluster-incomplete" and finding["processes"] == [3]
    assert "3 of 4 processes joined" in finding["summary"]
    for other in outcomes[1:]:
        assert other.stdout == "" and "not all 4 processes joined" in other.stderr


def test_a_process_that_dies_after_joining_is_named(job: Job, tmp_path: Path) -> None:
    port, timeout = free_port(), 20.0
    commands = []
    for process in range(3):
        root = host_sysroot(tmp_path / f"p{process}", "node-0", gpus_with_ids(4))
        commands.append((job.explicit(process, 4, port, timeout, "--local-device-ids", str(process)), job.env(root)))
    dying = [sys.executable, "-c", JOIN_THEN_DIE, f"127.0.0.1:{port}", "3"]
    outcomes = job.run([*commands, (dying, job.env(tmp_path))], timeout + 30)
    assert outcomes[3].returncode == -9 and "joined" in outcomes[3].stdout, outcomes[3].stderr[-1500:]
    assert [o.returncode for o in outcomes[:3]] == [1, 1, 1], [o.stderr[-1500:] for o in outcomes]
    assert max(o.seconds for o in outcomes[:3]) <= timeout + 5
    report = report_of(outcomes[0])
    assert report["missing"] == [3] and report["reported"] == [0, 1, 2]
    found = findings_by_id(report)
    assert found["cluster-incomplete"]["processes"] == [3]
    assert "died or hung after joining" in str(found["cluster-incomplete"]["summary"])


def _launcher_port() -> int:
    """A free port where jax's Slurm and Open MPI modules can be made to pick it (61440-65535), above the first
    256: the real Slurm cluster of tests/e2e/test_launchers.py numbers its jobs from 1, so its jobs' coordinators
    take 61441 and up, maybe at the same time on the other worker."""
    for port in range(SLURM_PORT_BASE + 256 + (free_port() % 2000), 65536):
        with socket.socket(socket.AF_INET6) as probe:
            try:
                probe.bind(("::", port))
            except OSError:
                continue
            return port
    raise AssertionError("no free port in 61440-65535")


def _launched(job: Job, tmp_path: Path, host: str, launcher: Callable[[int], dict[str, str]]) -> dict[str, object]:
    """Four processes with a launcher's variables and no join options; all exit 0; process 0's report."""
    commands = []
    for process in range(4):
        root = host_sysroot(tmp_path / f"p{process}", host, gpus_with_ids(4))
        commands.append((job.argv("--timeout", "60"), job.env(root, **launcher(process))))
    outcomes = job.run(commands, 90)
    assert [o.returncode for o in outcomes] == [0, 0, 0, 0], [o.stderr[-1500:] for o in outcomes]
    report = report_of(outcomes[0])
    assert report["findings"] == [] and report["reported"] == [0, 1, 2, 3]
    return report


def test_slurm_detection_from_the_variables_srun_sets(job: Job, tmp_path: Path) -> None:
    port = _launcher_port()

    def srun(process: int) -> dict[str, str]:
        return {
            "SLURM_JOB_ID": str(port - SLURM_PORT_BASE + 4096 * 7),
            "SLURM_STEP_NODELIST": "localhost",
            "SLURM_STEP_NUM_NODES": "1",
            "SLURM_STEP_TASKS_PER_NODE": "4",
            "SLURM_NTASKS": "4",
            "SLURM_PROCID": str(process),
            "SLURM_LOCALID": str(process),
        }

    report = _launched(job, tmp_path, "localhost", srun)
    assert report["method"] == "slurm" and report["coordinator"] == f"localhost:{port}"


def test_open_mpi_detection_from_the_variables_mpirun_sets(job: Job, tmp_path: Path) -> None:
    port = _launcher_port()
    job_id = (port - SLURM_PORT_BASE) * 4096  # jax takes (job id // 4096) % 4096 + 61440

    def mpirun(process: int) -> dict[str, str]:
        return {
            "OMPI_MCA_orte_hnp_uri": f"{job_id}.0;tcp://127.0.0.1:34911",
            "OMPI_COMM_WORLD_SIZE": "4",
            "OMPI_COMM_WORLD_RANK": str(process),
            "OMPI_COMM_WORLD_LOCAL_RANK": str(process),
        }

    report = _launched(job, tmp_path, "node-0", mpirun)
    assert report["method"] == "ompi" and report["coordinator"] == f"127.0.0.1:{port}"


def test_the_coordinators_port_in_use_is_one_sentence(job: Job, tmp_path: Path) -> None:
    root = host_sysroot(tmp_path / "p0", "node-0", gpus_with_ids(1))
    with socket.socket(socket.AF_INET6) as holder:
        holder.bind(("::", 0))
        holder.listen()
        port = holder.getsockname()[1]
        (outcome,) = job.run([(job.explicit(0, 2, port, 20), job.env(root))], 40)
    assert outcome.returncode == 1, outcome.stderr[-1500:]
    (finding,) = report_of(outcome)["findings"]
    assert finding["id"] == "cluster-join-failed" and f"port {port} is already in use" in finding["summary"]
    assert "Traceback" not in outcome.stderr and "Segmentation" not in outcome.stderr


def test_a_coordinator_address_that_does_not_resolve_is_one_sentence(job: Job, tmp_path: Path) -> None:
    root = host_sysroot(tmp_path / "p1", "node-0", gpus_with_ids(1))
    argv = job.argv("--coordinator-address", "no-such-host.invalid:1234", "--num-processes", "2", "--process-id", "1")
    (outcome,) = job.run([(argv, job.env(root))], 40)
    assert outcome.returncode == 1 and outcome.stdout == ""
    (line,) = outcome.stderr.splitlines()
    assert "no-such-host.invalid:1234 does not resolve" in line and "Fix:" in line


@pytest.mark.parametrize(
    ("variables", "expected"),
    [
        ({}, "no launcher was detected"),
        (
            {
                "SLURM_JOB_ID": "77",
                "SLURM_STEP_NODELIST": "node-[1-2]",
                "SLURM_NTASKS": "four",
                "SLURM_PROCID": "0",
                "SLURM_LOCALID": "0",
            },
            "SLURM_NTASKS='four'",
        ),
        # An allocation's shell (salloc): the job, no task. The fix is srun, not the three options.
        (
            {"SLURM_JOB_ID": "78", "SLURM_JOB_NODELIST": "node-[1-2]", "SLURM_NNODES": "2"},
            "this shell is in Slurm job 78's allocation but not in a job step",
        ),
    ],
    ids=["no-launcher", "slurm-garbage", "slurm-allocation-shell"],
)
def test_nothing_to_join_is_a_usage_error(job: Job, tmp_path: Path, variables: dict[str, str], expected: str) -> None:
    root = host_sysroot(tmp_path / "p", "node-0", gpus_with_ids(1))
    (outcome,) = job.run([(job.argv("--timeout", "30"), job.env(root, **variables))], 40)
    assert outcome.returncode == 2, outcome.stderr[-1500:]
    report = report_of(outcome)
    assert report["verdict"] == "usage-error"
    (finding,) = report["findings"]
    assert finding["id"] == "cluster-usage-invalid" and expected in finding["summary"]
    if "SLURM_NNODES" in variables:
        assert finding["fix"].startswith("run it in every task: srun python -m jax_rocm7_plugin cluster")


# What mpirun of Open MPI 5 (PRRTE) sets for a rank: no ORTE URI any more (jax-ml/jax#14576).
OPEN_MPI_5 = {
    "OMPI_COMM_WORLD_SIZE": "1",
    "OMPI_COMM_WORLD_RANK": "0",
    "OMPI_COMM_WORLD_LOCAL_RANK": "0",
    "OMPI_VERSION": "5.0.11",
    "PRTE_LAUNCHED": "1",
}


def test_an_open_mpi_5_job_is_told_what_jax_needs_to_join_it(job: Job, tmp_path: Path) -> None:
    """jax 0.10.2 (this venv) does not detect Open MPI 5 at all: the launcher is named with what to do, not
    "no launcher was detected". (jax 0.12 with and without mpi4py: tests/e2e/test_cluster_releases.py.)"""
    root = host_sysroot(tmp_path / "p", "node-0", gpus_with_ids(1))
    (outcome,) = job.run([(job.argv("--timeout", "30"), job.env(root, **OPEN_MPI_5))], 40)
    assert outcome.returncode == 2, outcome.stderr[-1500:]
    (finding,) = report_of(outcome)["findings"]
    assert "Open MPI 5" in finding["summary"] and "does not detect" in finding["summary"]
    assert "0.11.2" in finding["fix"] and "mpi4py" in finding["fix"]
