"""Facts read from the published jax-rocm7-pjrt 0.10.0 library (a real 520 MB ROCm build)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from jax_rocm7_plugin._binary.elf_dynamic import read_dynamic
from jax_rocm7_plugin._binary.offload_bundles import scan_library
from tests.support.environment import REPO
from tests.support.snippets import clean_env
from tests.support.sysroots import Gpu, make_sysroot


def test_offload_targets(upstream_library: Path) -> None:
    scan = scan_library(upstream_library)
    assert scan is not None and not scan.problems
    assert sorted(scan.targets) == sorted(
        ["gfx908", "gfx90a", "gfx9-4-generic", "gfx10-3-generic", "gfx11-generic", "gfx12-generic"]
    )
    assert scan.compressed_bundles == 41 and scan.plain_bundles == 0


def test_dynamic_section(upstream_library: Path) -> None:
    facts = read_dynamic(upstream_library)
    assert facts.exports == ("GetPjrtApi", "__start_pb_defaults", "__stop_pb_defaults")
    assert {"libamdhip64.so.7", "librccl.so.1", "libhipblaslt.so.1", "libMIOpen.so.1"} <= set(facts.needed)
    assert "/opt/rocm/lib" in facts.runpath


@pytest.mark.parametrize(
    ("target_version", "expected"),
    [(90402, None), (110501, None), (100306, None), (90006, "gpu-arch-not-in-library")],
    ids=["gfx942", "gfx1151", "gfx1036", "gfx906"],
)
def test_doctor_on_the_upstream_library(
    tmp_path: Path, upstream_library: Path, target_version: int, expected: str | None
) -> None:
    root = make_sysroot(tmp_path, [Gpu(target_version)])
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "jax_rocm7_plugin",
            "doctor",
            "--json",
            "--sysroot",
            str(root),
            "--library",
            str(upstream_library),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=clean_env(),
    )
    report = json.loads(done.stdout)
    found = [f["id"] for f in report["findings"]]
    # No ROCm in the sysroot: the runtime findings are always there; coverage depends on the GPU.
    assert {"rocm-not-found", "library-dependency-missing"} <= set(found)
    assert ("gpu-arch-not-in-library" in found) == (expected is not None)
    assert done.returncode == 1


def test_doctor_binary_on_the_upstream_library(tmp_path: Path, upstream_library: Path) -> None:
    """Its generic code objects run on a gfx942 and a gfx1151; nothing in it runs on a gfx906."""
    gpus = [Gpu(90402, drm_render_minor=128), Gpu(110501, drm_render_minor=129), Gpu(90006, drm_render_minor=130)]
    root = make_sysroot(tmp_path, gpus)
    command = [sys.executable, "-m", "jax_rocm7_plugin", "doctor", "--sysroot", str(root), "--binary"]
    done = subprocess.run([*command, str(upstream_library)], capture_output=True, text=True, cwd=REPO, env=clean_env())
    assert done.returncode == 1, done.stderr
    carried = "gfx10-3-generic, gfx11-generic, gfx12-generic, gfx9-4-generic, gfx908, gfx90a"
    assert done.stdout.splitlines()[1] == (
        f"{upstream_library}: offload bundles for {carried} -> NOT on KFD node 3 (no code for gfx906 (it carries "
        f"{carried})); runs on KFD nodes 1, 2: gfx1151, gfx942"
    )
