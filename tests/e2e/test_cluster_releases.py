"""The cluster preflight and the job check at backend start on every release of the table, from our built
wheels in each combo's venv: a consistent job exits 0 everywhere (and runs jitted programs on 'rocm'); a
process on another GPU architecture stops the backend in every process with one verdict; on jax 0.12 the
preflight names the odd processes and a process that never starts ends nobody's run in an abort."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.cluster import (
    ODD_EXPECTED,
    Job,
    consistent_job,
    findings_by_id,
    free_port,
    gpus_with_ids,
    host_sysroot,
    odd_job,
    report_of,
)
from tests.support.deep_job import DeepJob
from tests.support.deep_job import report_of as deep_report_of
from tests.support.environment import Combo
from tests.support.job_check import refused_everywhere, run_job

COMBOS = [
    Combo("0.10.2", "3.11", "0.10.2"),
    Combo("0.11.2", "3.12", "0.11.2"),
    Combo("0.12.0", "3.12", "0.12.0"),
    Combo("0.12.0", "3.13", "0.12.0"),
    Combo("0.12.0", "3.12", "0.12.0.1"),
]
JAX_012 = Combo("0.12.0", "3.12", "0.12.0")
# Each release's coordination-service calls are its jaxlib's: one combo per jaxlib runs in the suite. CPython 3.13
# and jax 0.12.0.1 share jaxlib 0.12.0 with JAX_012 (tests/e2e/test_matrix.py runs jax on each): --sweeps.
SWEPT = {Combo("0.12.0", "3.13", "0.12.0"), Combo("0.12.0", "3.12", "0.12.0.1")}
PER_JAXLIB = [pytest.param(c, id=c.id, marks=[pytest.mark.sweep] if c in SWEPT else []) for c in COMBOS]


def _job(python: Path, standin_library: Path, tmp_path: Path) -> Job:
    return Job(python, standin_library, tmp_path)


@pytest.mark.parametrize("combo", PER_JAXLIB)
def test_a_consistent_job_on_every_release(
    combo: Combo, e2e_venv: Callable[[Combo], Path], standin_library: Path, tmp_path: Path, build: Path
) -> None:
    job = _job(e2e_venv(combo), standin_library, tmp_path)
    outcomes = consistent_job(job, tmp_path, build, free_port())
    assert [o.returncode for o in outcomes] == [0, 0, 0, 0], [o.stderr[-1500:] for o in outcomes]
    report = report_of(outcomes[0])
    assert report["verdict"] == "consistent" and report["findings"] == [] and report["reported"] == [0, 1, 2, 3]


@pytest.mark.parametrize("combo", PER_JAXLIB)
def test_the_job_check_at_backend_start_on_every_release(
    combo: Combo, e2e_venv: Callable[[Combo], Path], standin_library: Path, tmp_path: Path
) -> None:
    """Every jaxlib of the table has the coordination-service calls the check makes (none steps aside)."""
    python = e2e_venv(combo)
    agreed = run_job(tmp_path / "agree", standin_library, 2, python=python, pythonpath=None)
    assert agreed.codes == [0, 0] and all(r["rocm"] for r in agreed.results), [
        o.stderr[-1500:] for o in agreed.outcomes
    ]
    assert agreed.lines(0) == agreed.lines(1) == []
    odd = run_job(tmp_path / "odd", standin_library, 2, gfx={1: 90010}, python=python, pythonpath=None)
    refused_everywhere(odd, "cluster-gpu-arch-mismatch", [1])


def test_odd_processes_are_named_on_jax_012(
    e2e_venv: Callable[[Combo], Path], standin_library: Path, tmp_path: Path, build: Path
) -> None:
    python = e2e_venv(JAX_012)
    package = subprocess.run(
        [str(python), "-c", "import jax_rocm7_plugin, os; print(os.path.dirname(jax_rocm7_plugin.__file__))"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    ).stdout.strip()
    outcomes = odd_job(_job(python, standin_library, tmp_path), tmp_path, build, free_port(), Path(package))
    assert [o.returncode for o in outcomes] == [1] * 8, [o.stderr[-1500:] for o in outcomes]
    found = findings_by_id(report_of(outcomes[0]))
    assert {k: v["processes"] for k, v in found.items()} == ODD_EXPECTED


def test_a_process_that_never_starts_on_jax_012(
    e2e_venv: Callable[[Combo], Path], standin_library: Path, tmp_path: Path
) -> None:
    job = _job(e2e_venv(JAX_012), standin_library, tmp_path)
    port, timeout = free_port(), 20.0  # as tests/integration/test_cluster.py's: seven processes start at once
    commands = []
    for process in range(7):  # of 8: process 5 never starts
        index = process if process < 5 else process + 1
        root = host_sysroot(tmp_path / f"p{index}", f"node-{index // 4}", gpus_with_ids(4))
        argv = job.explicit(index, 8, port, timeout, "--local-device-ids", str(index % 4))
        commands.append((argv, job.env(root)))
    outcomes = job.run(commands, timeout + 30)
    assert [o.returncode for o in outcomes] == [1] * 7, [o.stderr[-1500:] for o in outcomes]
    assert max(o.seconds for o in outcomes) <= timeout + 5
    assert all("Abort" not in o.stderr and "Traceback" not in o.stderr for o in outcomes)
    report = report_of(outcomes[0])
    assert report["missing"] == [5] and findings_by_id(report)["cluster-incomplete"]["processes"] == [5]


def test_the_deep_preflight_on_jax_012(
    e2e_venv: Callable[[Combo], Path], standin_library: Path, tmp_path: Path
) -> None:
    """`cluster --deep --platform cpu` from our wheels on jax 0.12.0/3.12, four processes on two host names:
    every collective measured, right, in the job and within each host."""
    job = DeepJob(tmp_path, standin_library, 4, python=e2e_venv(JAX_012), pythonpath="")
    results = job.run()
    report = deep_report_of(results)
    # Four processes on two cores beside the other worker: one starved during its local work is named as slow
    # (a warning, exit 1 everywhere). Nothing else.
    others = [f for f in report["findings"] if f["id"] not in ("cluster-process-slow", "cluster-link-slow")]
    assert others == [], others
    expected = 1 if report["findings"] else 0
    assert [r[0] for r in results] == [expected] * 4, ["".join(s[-20:]) for s in job.stderr]
    groups = [c["group"] for c in report["collectives"]]
    assert groups == ["job"] * 6 + ["host:node-0", "host:node-1"]
    assert all(c["ranks"] == (4 if c["group"] == "job" else 2) and c["seconds"] > 0 for c in report["collectives"])


def test_a_process_killed_mid_step_is_named_on_jax_012(
    e2e_venv: Callable[[Combo], Path], standin_library: Path, tmp_path: Path
) -> None:
    job = DeepJob(tmp_path, standin_library, 2, python=e2e_venv(JAX_012), pythonpath="")
    results = job.run(fault=(1, "all-gather/4096", "kill"))
    assert job.faulted_at is not None and [r[0] for r in results] == [1, 1]
    hung = {f["id"]: f for f in deep_report_of(results)["findings"]}["cluster-collective-hung"]
    assert hung["processes"] == [1] and hung["hosts"] == ["node-0"] and "never reported" in hung["summary"]


def test_open_mpi_5_without_mpi4py_is_named_on_jax_012(
    e2e_venv: Callable[[Combo], Path], standin_library: Path, tmp_path: Path
) -> None:
    """jax 0.12 joins an Open MPI 5 job through mpi4py (jax-ml/jax#40512) and raises without it: the preflight
    says so, with `pip install mpi4py` as the fix, instead of "fix the launcher's variables"."""
    from tests.integration.test_cluster import OPEN_MPI_5

    job = _job(e2e_venv(JAX_012), standin_library, tmp_path)
    root = host_sysroot(tmp_path / "p", "node-0", gpus_with_ids(1))
    (outcome,) = job.run([(job.argv("--timeout", "30"), job.env(root, **OPEN_MPI_5))], 40)
    assert outcome.returncode == 2, outcome.stderr[-1500:]
    (finding,) = report_of(outcome)["findings"]
    assert "Open MPI 5" in finding["summary"] and "through mpi4py, which is not installed" in finding["summary"]
    assert finding["fix"].startswith("pip install mpi4py")
