"""The xdist GPU-isolation plugin, in real `pytest -n 4` runs whose workers report what they see."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jax_rocm7_plugin.pytest_gpu_isolation import IsolationError, assignment
from tests.support.environment import REPO

# A conftest records the variables at import time, before any test runs: by then HIP must
# already be pointed at the worker's GPU, since a conftest may import jax.
CONFTEST = """
import os
SEEN_AT_IMPORT = {k: os.environ.get(k) for k in ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")}
"""
TEST = """
import json, os, pathlib
import conftest

def test_report():
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    (pathlib.Path(os.environ["REPORT_DIR"]) / f"{worker}.json").write_text(json.dumps(conftest.SEEN_AT_IMPORT))
"""


def run_suite(tmp_path: Path, *pytest_args: str, **env: str) -> dict[str, dict[str, str | None]]:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text(CONFTEST)
    for index in range(8):  # enough tests that every worker runs at least one
        (suite / f"test_{index}.py").write_text(TEST)
    reports = tmp_path / "reports"
    reports.mkdir()
    # Not inherited: our own xdist worker's id (when this suite runs under -n) and GPU settings.
    environ = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith("VISIBLE_DEVICES") and k != "JAX_ENABLE_ROCM_XDIST" and not k.startswith("PYTEST_XDIST")
    }
    environ.update(REPORT_DIR=str(reports), PYTHONPATH=str(REPO), **env)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *pytest_args, str(suite)],
        capture_output=True,
        text=True,
        env=environ,
        cwd=suite,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return {p.stem: json.loads(p.read_text()) for p in reports.glob("*.json")}


def test_each_worker_gets_gpu_k_mod_n(tmp_path: Path) -> None:
    # Three workers on two GPUs: the third wraps around to GPU 0.
    seen = run_suite(tmp_path, "-n", "3", "-p", "jax_rocm7_plugin.pytest_gpu_isolation", JAX_ENABLE_ROCM_XDIST="2")
    assert seen == {
        "gw0": {"ROCR_VISIBLE_DEVICES": "0", "HIP_VISIBLE_DEVICES": "0"},
        "gw1": {"ROCR_VISIBLE_DEVICES": "1", "HIP_VISIBLE_DEVICES": "0"},
        "gw2": {"ROCR_VISIBLE_DEVICES": "0", "HIP_VISIBLE_DEVICES": "0"},
    }


def test_without_the_switch_workers_are_untouched(tmp_path: Path) -> None:
    seen = run_suite(tmp_path, "-n", "2", "-p", "jax_rocm7_plugin.pytest_gpu_isolation")
    assert set(seen) == {"gw0", "gw1"}
    assert all(v == {"ROCR_VISIBLE_DEVICES": None, "HIP_VISIBLE_DEVICES": None} for v in seen.values())


def test_without_xdist_nothing_changes(tmp_path: Path) -> None:
    seen = run_suite(tmp_path, "-p", "jax_rocm7_plugin.pytest_gpu_isolation", JAX_ENABLE_ROCM_XDIST="8")
    assert seen == {"main": {"ROCR_VISIBLE_DEVICES": None, "HIP_VISIBLE_DEVICES": None}}


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        (
            {"JAX_ENABLE_ROCM_XDIST": "8", "PYTEST_XDIST_WORKER": "gw11"},
            {"ROCR_VISIBLE_DEVICES": "3", "HIP_VISIBLE_DEVICES": "0"},
        ),
        ({"JAX_ENABLE_ROCM_XDIST": "", "PYTEST_XDIST_WORKER": "gw1"}, None),
        ({"JAX_ENABLE_ROCM_XDIST": "2"}, None),  # the controller process
    ],
)
def test_assignment(environ: dict[str, str], expected: dict[str, str] | None) -> None:
    assert assignment(environ) == expected


@pytest.mark.parametrize("count", ["0", "-1", "two"])
def test_bad_gpu_count(count: str) -> None:
    with pytest.raises(IsolationError, match="JAX_ENABLE_ROCM_XDIST"):
        assignment({"JAX_ENABLE_ROCM_XDIST": count, "PYTEST_XDIST_WORKER": "gw0"})
