"""Libraries the ROCm runtime opens by name at run time (_policy/opened_libraries.json): under WSL, ROCr opens
librocdxg with dlopen, so an install whose copy sits where the dynamic loader does not look passes the
dependency walk and still gets no GPU (ROCm/librocdxg#35, #46). The doctor resolves it as dlopen would from ROCr.

Machines are synthetic WSL sysroots (/dev/dxg, no KFD); ROCr and librocdxg are link stubs with the real sonames.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from jax_rocm7_plugin._doctor.report import Report
from jax_rocm7_plugin._findings import Finding
from tests.support.inprocess import doctor
from tests.support.sysroots import add_rocm, library_of, make_sysroot


def wsl(tmp_path: Path, build: Path, rocm: str, *, conf: bool = True) -> tuple[Path, Path]:
    """A WSL machine with ROCm `rocm` and its ROCr (RUNPATH $ORIGIN); `conf`: /opt/rocm/lib in ld.so.conf.d, as
    AMD's packages register it."""
    root = make_sysroot(tmp_path / "root", [], topology=False, amdgpu_module=False, kfd=False, dxg=True)
    home = add_rocm(root, build, rocm)
    shutil.copy(build / "rocm-libs" / "libhsa-runtime64.so.1", home / "lib")
    if conf:
        (root / "etc" / "ld.so.conf.d").mkdir(parents=True)
        (root / "etc" / "ld.so.conf").write_text("include /etc/ld.so.conf.d/*.conf\n")
        (root / "etc" / "ld.so.conf.d" / "10-rocm.conf").write_text("/opt/rocm/lib\n")
    return root, home


def put_rocdxg(build: Path, folder: Path, name: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(build / "rocm-libs" / "librocdxg.so.1", folder / name)


def missing(report: Report) -> list[Finding]:
    return [f for f in report.findings if f.id == "runtime-library-missing"]


def test_librocdxg_beside_rocr_is_found(tmp_path: Path, build: Path) -> None:
    root, home = wsl(tmp_path, build, "7.2.3")
    put_rocdxg(build, home / "lib", "librocdxg.so")
    report = doctor({}, root, library_of(build))
    assert missing(report) == [] and "install it if it is missing" not in str(report.to_json())


def test_a_copy_where_the_loader_does_not_look_is_an_error_naming_the_folder_to_register(
    tmp_path: Path, build: Path
) -> None:
    """Built and installed into /usr/local/lib without ldconfig (what ROCm/librocdxg#47 fixed in its install)."""
    root, _ = wsl(tmp_path, build, "7.13.0")
    put_rocdxg(build, root / "usr" / "local" / "lib", "librocdxg.so")
    report = doctor({}, root, library_of(build))
    (finding,) = missing(report)
    assert finding.severity == "error" and not report.ok
    assert "libhsa-runtime64.so.1" in finding.summary and "librocdxg.so" in finding.summary
    assert "jax will see no GPU" in finding.summary
    assert "/usr/local/lib" in finding.fix and "ldconfig" in finding.fix
    assert any("a copy at /usr/local/lib/librocdxg.so" in e for e in finding.evidence)


def test_ld_library_path_is_searched_as_dlopen_does(tmp_path: Path, build: Path) -> None:
    root, _ = wsl(tmp_path, build, "7.13.0")
    put_rocdxg(build, root / "usr" / "local" / "lib", "librocdxg.so")
    assert missing(doctor({"LD_LIBRARY_PATH": "/usr/local/lib"}, root, library_of(build))) == []


def test_absent_everywhere_says_to_install_it(tmp_path: Path, build: Path) -> None:
    root, _ = wsl(tmp_path, build, "7.2.3")
    (finding,) = missing(doctor({}, root, library_of(build)))
    assert finding.fix.startswith("install librocdxg")


def test_a_release_that_asks_for_the_unversioned_name_misses_the_versioned_file(tmp_path: Path, build: Path) -> None:
    """ROCr up to 7.14 opens librocdxg.so; TheRock's wheels shipped only librocdxg.so.1 (rocm-systems#11241)."""
    root, home = wsl(tmp_path, build, "7.13.0")
    put_rocdxg(build, home / "lib", "librocdxg.so.1")
    (finding,) = missing(doctor({}, root, library_of(build)))
    assert "ln -s librocdxg.so.1" in finding.fix


def test_a_later_release_takes_either_name(tmp_path: Path, build: Path) -> None:
    root, home = wsl(tmp_path, build, "7.15.0")
    put_rocdxg(build, home / "lib", "librocdxg.so.1")
    assert missing(doctor({}, root, library_of(build))) == []


def test_not_looked_for_off_wsl(tmp_path: Path, build: Path) -> None:
    root = make_sysroot(tmp_path / "root")
    add_rocm(root, build, "7.2.3")
    assert missing(doctor({}, root, library_of(build))) == []
