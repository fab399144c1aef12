"""The loader's decision, in process: its first blocking finding is the doctor's first error."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from jax_rocm7_plugin._findings import Finding
from jax_rocm7_plugin._loader.register import Plan
from tests.support.environment import REPO
from tests.support.inprocess import doctor, loader_plan
from tests.support.native import HIP_RUNTIME
from tests.support.sysroots import Gpu, add_rocm, library_of, make_sysroot

GFX906 = 90006


def loader_and_doctor(environ: dict[str, str], root: Path, library: Path) -> tuple[Plan | Finding, Finding | None]:
    outcome = loader_plan(environ, root, library)
    report = doctor(environ, root, library)
    first_error = next((f for f in report.findings if f.severity == "error"), None)
    return outcome, first_error


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("no-rocm", "rocm-not-found"),
        ("gfx906", "gpu-arch-not-in-library"),
        ("hidden", "visible-devices-hide-all"),
        ("bad-env", "xla-client-env-invalid"),
        ("not-pjrt", "pjrt-library-invalid"),
    ],
)
def test_loader_and_doctor_agree(tmp_path: Path, build: Path, case: str, expected: str) -> None:
    gpus = [Gpu(GFX906)] if case == "gfx906" else None
    root = make_sysroot(tmp_path / "root", gpus)
    if case != "no-rocm":
        add_rocm(root, build)
    environ = {
        "hidden": {"ROCR_VISIBLE_DEVICES": "5"},
        "bad-env": {"XLA_PYTHON_CLIENT_PREALLOCATE": "FALSE"},
    }.get(case, {})
    library = build / "hip" / HIP_RUNTIME if case == "not-pjrt" else library_of(build)
    outcome, first_error = loader_and_doctor(environ, root, library)
    assert isinstance(outcome, Finding) and outcome.id == expected
    assert first_error is not None
    assert (outcome.id, outcome.summary, outcome.fix) == (first_error.id, first_error.summary, first_error.fix)


def test_warnings_reach_the_plan(tmp_path: Path, build: Path) -> None:
    root = make_sysroot(tmp_path / "root", [Gpu(), Gpu(drm_render_minor=129)])
    add_rocm(root, build)
    (root / "proc").mkdir()
    (root / "proc" / "mounts").write_text("shm /dev/shm tmpfs rw,size=65536k 0 0\n")
    environ = {"JAX_ROCM_PJRT_LIBRARY": str(library_of(build)), "CUDA_VISIBLE_DEVICES": "0,1"}
    plan = loader_plan(environ, root, load=False)
    assert isinstance(plan, Plan)
    assert [w.id for w in plan.warnings] == ["cuda-visible-devices-set", "shm-too-small"]


PIP_ROCM_CHILD = """
import ctypes, json, os, sys
from pathlib import Path
from jax_rocm7_plugin._loader.register import Plan, plan_registration
from jax_rocm7_plugin._settings import read_settings
site, library, root = sys.argv[1:]
sys.path.insert(0, site)
# The process already holds the HIP runtime (as after a pip ROCm import), so the library's dlopen resolves it.
ctypes.CDLL(os.path.join(site, "_rocm_sdk_core", "lib", "libamdhip64.so.7"), mode=ctypes.RTLD_GLOBAL)
plan = plan_registration(read_settings({"JAX_ROCM_PJRT_LIBRARY": library, "JAX_ROCM_SYSROOT": root}),
                         apply_environment=True)
assert isinstance(plan, Plan), plan
print(json.dumps({"warnings": [w.id for w in plan.warnings], "changes": list(plan.environment_changes),
                  "ROCM_PATH": os.environ.get("ROCM_PATH"), "c_api": plan.c_api_version}))
"""


def test_pip_rocm_in_use_is_pointed_at_and_its_missing_bitcode_warned(tmp_path: Path, build: Path) -> None:
    """ROCm from pip without ocml.bc: the loader sets ROCM_PATH to it and warns device-bitcode-missing.

    In a child process: loading a HIP runtime into this one would change what later tests resolve.
    """
    site = tmp_path / "site"
    (site / "_rocm_sdk_core" / "lib").mkdir(parents=True)
    (site / "_rocm_sdk_core" / "__init__.py").write_text("")
    shutil.copy(build / "hip" / HIP_RUNTIME, site / "_rocm_sdk_core" / "lib" / HIP_RUNTIME)
    root = make_sysroot(tmp_path / "root")
    environ = {k: v for k, v in os.environ.items() if k not in ("ROCM_PATH", "HIP_DEVICE_LIB_PATH", "LD_LIBRARY_PATH")}
    done = subprocess.run(
        [sys.executable, "-c", PIP_ROCM_CHILD, str(site), str(library_of(build)), str(root)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=environ,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["warnings"] == ["device-bitcode-missing"]
    assert seen["changes"] == [f"ROCM_PATH={site / '_rocm_sdk_core'}"]
    assert seen["ROCM_PATH"] == str(site / "_rocm_sdk_core") and seen["c_api"] == "0.81"
