"""The loader's decision, in process: its first blocking finding is the doctor's first error."""

from __future__ import annotations

from pathlib import Path

import pytest

from jax_rocm7_plugin.doctor import diagnose
from jax_rocm7_plugin.findings import Finding
from jax_rocm7_plugin.loader import Plan, plan_registration
from tests.native import HIP_RUNTIME
from tests.sysroots import Gpu, add_rocm, library_of, make_sysroot

GFX906 = 90006


def loader_and_doctor(environ: dict[str, str], root: Path, library: Path) -> tuple[Plan | Finding, Finding | None]:
    outcome = plan_registration({**environ, "JAX_ROCM_PJRT_LIBRARY": str(library)}, root)
    report = diagnose(environ, root, library)
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
    plan = plan_registration(environ, root, load=False)
    assert isinstance(plan, Plan)
    assert [w.id for w in plan.warnings] == ["cuda-visible-devices-set", "shm-too-small"]
