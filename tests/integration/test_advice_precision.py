"""Advice is a warning only where it changes what the process gets (the GPUs it uses, the code they run);
where it changes nothing it is info. Synthetic sysroots, the doctor in process."""

from __future__ import annotations

from pathlib import Path

import pytest

from jax_rocm7_plugin._doctor.report import Report
from jax_rocm7_plugin._findings import Finding
from tests.support.inprocess import doctor
from tests.support.sysroots import Gpu, add_rocm, library_of, make_sysroot

AVOIDS_KNOWN_ISSUES = {
    "ROCPROFILER_QUEUE_INTERPOSITION": "0",
    "DEBUG_HIP_DYNAMIC_QUEUES": "0",
    "HSA_NO_SCRATCH_RECLAIM": "1",
}


def one(report: Report, finding_id: str) -> Finding:
    (found,) = [f for f in report.findings if f.id == finding_id]
    return found


def machine(tmp_path: Path, build: Path, gpus: list[Gpu]) -> Path:
    root = make_sysroot(tmp_path / "root", gpus)
    add_rocm(root, build, "7.2.3")
    return root


TWO = [Gpu(90010, drm_render_minor=128), Gpu(90010, drm_render_minor=129)]


@pytest.mark.parametrize(
    ("environ", "severity"),
    [
        ({"CUDA_VISIBLE_DEVICES": "0,1"}, "info"),  # both GPUs, in order: nothing changes
        ({"CUDA_VISIBLE_DEVICES": "1"}, "warning"),  # HIP uses one GPU of two
        ({"CUDA_VISIBLE_DEVICES": "1,0"}, "warning"),  # HIP reorders them
        ({"CUDA_VISIBLE_DEVICES": "1", "HIP_VISIBLE_DEVICES": "0,1"}, "info"),  # HIP's own variable wins
    ],
)
def test_cuda_visible_devices_warns_only_where_it_changes_the_gpus(
    environ: dict[str, str], severity: str, tmp_path: Path, build: Path
) -> None:
    report = doctor({**AVOIDS_KNOWN_ISSUES, **environ}, machine(tmp_path, build, TWO), library_of(build))
    assert one(report, "cuda-visible-devices-set").severity == severity


@pytest.mark.parametrize(
    ("gpus", "severity"),
    [([Gpu(110000)], "info"), ([Gpu(110003)], "warning")],
    ids=["the-gpus-own-processor", "another-processor"],
)
def test_an_override_warns_only_where_it_changes_the_processor(
    gpus: list[Gpu], severity: str, tmp_path: Path, build: Path
) -> None:
    environ = {**AVOIDS_KNOWN_ISSUES, "HSA_OVERRIDE_GFX_VERSION": "11.0.0"}
    found = one(doctor(environ, machine(tmp_path, build, gpus), library_of(build)), "hsa-override-gfx-version")
    assert found.severity == severity


def test_what_the_loader_works_around_is_info() -> None:
    from jax_rocm7_plugin import _findings as catalog

    preloaded = catalog.library_dependency_preloaded(["libdrm.so.2"], ["/opt/rocm/lib/rocm_sysdeps/lib"], ())
    assert preloaded.severity == "info" and preloaded.fix.startswith("nothing to do")
