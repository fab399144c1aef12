"""A ROCm 7 that lacks one of its own libraries gets the step that installs it the way it was installed, not "install
ROCm 7": TheRock's native package of this release and GPU, AMD's packages' own search, the tarball unpacked again.

Machines are the healthy 8 x MI300X of tests/support/fleet.py (synthetic sysroots) with rocBLAS deleted; the PJRT
library is a PJRT-shaped stub that NEEDs librocblas.so.5 (a test fixture); the package database is dpkg's file list
in its documented format (tests/support/package_dbs.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.fleet import HEALTHY, build_host
from tests.support.inprocess import doctor
from tests.support.native import pjrt_library_with_code_for
from tests.support.package_dbs import write_dpkg_list
from tests.support.sysroots import PUBLISHED_TARGETS, bundle_for

ROCM = "7.14.0"
UBUNTU = 'ID=ubuntu\nID_LIKE=debian\nVERSION_ID="24.04"\n'


def _missing_rocblas(
    tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch, *, layout: str = "amd", owner: str | None = None
) -> tuple[Path, dict[str, str], Path]:
    host = HEALTHY[0].but(
        layout=layout, without_files=(f"opt/rocm-{ROCM}/lib/librocblas.so*",), files={"/etc/os-release": UBUNTU}
    )
    root, environ, _ = build_host(host, ROCM, tmp_path, build, monkeypatch)
    library = pjrt_library_with_code_for(
        tmp_path / "needs-rocblas",
        bundle_for(list(PUBLISHED_TARGETS)),
        hip_dir=build / "hip",
        needs=("librocblas.so.5",),
        link_dirs=(build / "rocm-libs",),
    )
    if owner is not None:
        write_dpkg_list(root, owner, [f"/opt/rocm-{ROCM}/lib/libamdhip64.so.7"])
    return root, environ, library


def _dependency(tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch, **options: str) -> str:
    root, environ, library = _missing_rocblas(tmp_path, build, monkeypatch, **options)
    report = doctor(environ, root, library)
    (finding,) = [f for f in report.findings if f.id == "library-dependency-missing"]
    assert "librocblas.so.5" in finding.summary and finding.severity == "error"
    return finding.fix


def test_therocks_native_packages_get_the_package_of_this_release_and_gpu(
    tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fix = _dependency(tmp_path, build, monkeypatch, owner="amdrocm-runtime7.14")
    assert fix.endswith("ships librocblas.so.5: sudo apt-get install amdrocm-blas7.14-gfx942"), fix


def test_amds_packages_get_their_own_search_for_the_library(
    tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fix = _dependency(tmp_path, build, monkeypatch, owner="hip-runtime-amd7.14.0")
    assert "dpkg's package hip-runtime-amd7.14.0" in fix and "`apt-cache search --names-only rocblas`" in fix, fix
    assert "install ROCm 7" not in fix


def test_therocks_tarball_is_unpacked_again(tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fix = _dependency(tmp_path, build, monkeypatch, layout="therock")
    assert fix.startswith("this ROCm is TheRock's tarball, which ships librocblas.so.5"), fix
    assert fix.endswith("https://repo.amd.com/rocm/tarball-multi-arch/therock-dist-linux-gfx94X-dcgpu-7.14.0.tar.gz")


def test_an_install_of_no_known_kind_keeps_the_general_fix(
    tmp_path: Path, build: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The nearest neighbour: AMD's layout and no package database saying who put it there."""
    fix = _dependency(tmp_path, build, monkeypatch)
    assert fix.startswith("install ROCm 7"), fix
