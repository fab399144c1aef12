"""The doctor reads the kernel files of rocBLAS, hipBLASLt and MIOpen beside the copies the dynamic loader would
take, per GPU the process uses, in each layout ROCm ships (AMD's packages and TheRock's tarball: flat
lib/rocblas/library; TheRock's pip wheels: one wheel per GPU family, rocBLAS's files in library/<gfx>/).

Machines are synthetic sysroots; the libraries are link stubs with the real sonames, their kernel files empty
stand-ins named as the libraries name them (tests/support/sysroots.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jax_rocm7_plugin._doctor.report import Report
from jax_rocm7_plugin._findings import Finding
from tests.support.inprocess import doctor
from tests.support.sysroots import Gpu, add_math_libraries, add_rocm, library_of, make_sysroot

GFX = {"gfx908": 90008, "gfx90a": 90010, "gfx942": 90402, "gfx1100": 110000, "gfx1103": 110003}


def kernels(report: Report) -> list[Finding]:
    return [f for f in report.findings if f.id == "math-library-gpu-unsupported"]


def machine(
    tmp_path: Path, build: Path, gpus: list[str], rocm_has: list[str], *, therock: bool = False, **options: object
) -> Path:
    root = make_sysroot(
        tmp_path / "root", [Gpu(gfx_target_version=GFX[g], drm_render_minor=128 + i) for i, g in enumerate(gpus)]
    )
    home = add_rocm(root, build, "7.2.0", toolchain=not therock)
    if therock:  # TheRock's tarball: LLVM and the device bitcode under lib/llvm
        (home / "lib" / "llvm" / "amdgcn" / "bitcode").mkdir(parents=True)
    add_math_libraries(home / "lib", build, rocm_has, **options)  # type: ignore[arg-type]
    return root


@pytest.mark.parametrize("layout", ["AMD's packages", "TheRock's tarball"])
def test_a_gpu_rocblas_has_no_kernels_for_is_an_error_naming_the_library_the_gpu_and_the_release_list(
    tmp_path: Path, build: Path, layout: str
) -> None:
    """Radeon 780M (gfx1103) on a ROCm whose rocBLAS carries gfx1100 only: the PJRT library has gfx11-generic
    code, so jax starts, and the first matmul aborts ('Cannot read TensileLibrary.dat ... for GPU arch: gfx1103')."""
    root = machine(tmp_path, build, ["gfx1103"], ["gfx1100", "gfx942"], therock=layout == "TheRock's tarball")
    report = doctor({}, root, library_of(build))
    (finding,) = [f for f in kernels(report) if "rocBLAS" in f.summary]
    assert finding.severity == "error" and not report.ok
    assert "rocBLAS has no kernels for gfx1103" in finding.summary and "aborts the process" in finding.summary
    assert "system-requirements" in finding.fix
    assert any("librocblas.so.5 (the copy the dynamic loader takes)" in e for e in finding.evidence)
    assert any(e.startswith("gfx1103: no file matching") for e in finding.evidence)
    from jax_rocm7_plugin._doctor.render import render_text

    assert render_text(report).splitlines()[0].startswith("ROCm backend: comes up (1 GPU(s): gfx1103), but programs")


def test_the_override_makes_the_libraries_read_the_files_of_the_processor_it_names(tmp_path: Path, build: Path) -> None:
    root = machine(tmp_path, build, ["gfx1103"], ["gfx1100"])
    report = doctor({"HSA_OVERRIDE_GFX_VERSION": "11.0.0"}, root, library_of(build))
    assert kernels(report) == []


def test_therocks_pip_wheel_of_another_family_is_named_with_the_wheel_to_install(tmp_path: Path, build: Path) -> None:
    """TheRock's pip ROCm: each GPU family has its own libraries wheel; the one found has no files for this GPU."""
    root = make_sysroot(tmp_path / "root", [Gpu(gfx_target_version=GFX["gfx1100"])])
    add_rocm(root, build, "7.14.0")
    site = "/venv/lib/python3.12/site-packages/_rocm_sdk_libraries_gfx94X_dcgpu/lib"
    add_math_libraries(root / site.lstrip("/"), build, ["gfx942"], per_processor=True)
    report = doctor({"LD_LIBRARY_PATH": site}, root, library_of(build))
    (finding,) = [f for f in kernels(report) if "rocBLAS" in f.summary]
    assert finding.severity == "error" and "gfx94X_dcgpu" in finding.fix and "gfx1100" in finding.fix


def test_therocks_per_processor_folders_count_for_rocblas(tmp_path: Path, build: Path) -> None:
    root = make_sysroot(tmp_path / "root", [Gpu(gfx_target_version=GFX["gfx942"])])
    add_rocm(root, build, "7.14.0")
    site = "/venv/lib/python3.12/site-packages/_rocm_sdk_libraries_gfx94X_dcgpu/lib"
    add_math_libraries(root / site.lstrip("/"), build, ["gfx942"], per_processor=True)
    assert kernels(doctor({"LD_LIBRARY_PATH": site}, root, library_of(build))) == []


def test_hipblaslt_is_judged_only_on_gpus_xla_hands_it_work(tmp_path: Path, build: Path) -> None:
    """XLA calls hipBLASLt on MI200/MI300 and gfx11/gfx12 only: gfx908 without its files is fine, gfx942 not."""
    # A hipBLASLt that is there, with another GPU's files only: the rule (not its absence) keeps gfx908 quiet.
    root = machine(tmp_path, build, ["gfx908"], ["gfx908"], libraries=("rocBLAS", "MIOpen"))
    add_math_libraries(root / "opt/rocm-7.2.0/lib", build, ["gfx90a"], libraries=("hipBLASLt",))
    assert (root / "opt/rocm-7.2.0/lib/hipblaslt/library").is_dir()
    assert kernels(doctor({}, root, library_of(build))) == []
    (tmp_path / "b").mkdir()
    root = machine(tmp_path / "b", build, ["gfx942"], ["gfx942"], libraries=("rocBLAS", "MIOpen"))
    add_math_libraries(root / "opt/rocm-7.2.0/lib", build, ["gfx90a"], libraries=("hipBLASLt",))
    (finding,) = kernels(doctor({}, root, library_of(build)))
    assert finding.severity == "warning" and "hipBLASLt has no kernels for gfx942" in finding.summary
    assert "--xla_gpu_enable_cublaslt=false" in finding.fix


def test_a_missing_miopen_database_only_slows_convolutions(tmp_path: Path, build: Path) -> None:
    root = machine(tmp_path, build, ["gfx942"], ["gfx942"], libraries=("rocBLAS", "hipBLASLt"))
    add_math_libraries(root / "opt/rocm-7.2.0/lib", build, ["gfx90a"], libraries=("MIOpen",))
    (finding,) = kernels(doctor({}, root, library_of(build)))
    assert finding.severity == "info" and "MIOpen" in finding.summary and "but it runs" in finding.summary


def test_a_layout_the_doctor_does_not_know_claims_nothing(tmp_path: Path, build: Path) -> None:
    root = machine(tmp_path, build, ["gfx942"], [], libraries=("rocBLAS",))
    folder = root / "opt/rocm-7.2.0/lib/rocblas/library"
    folder.mkdir(parents=True)
    (folder / "kernels_gfx942.bin").write_bytes(b"")
    (finding,) = kernels(doctor({}, root, library_of(build)))
    assert finding.severity == "info" and "not known" in finding.summary


def test_the_folder_a_variable_names_is_the_one_read(tmp_path: Path, build: Path) -> None:
    root = machine(tmp_path, build, ["gfx1103"], ["gfx1100"], libraries=("rocBLAS",))
    own = root / "home/me/rocblas-gfx1103"
    own.mkdir(parents=True)
    (own / "TensileLibrary_lazy_gfx1103.dat").write_bytes(b"")
    assert kernels(doctor({"ROCBLAS_TENSILE_LIBPATH": "/home/me/rocblas-gfx1103"}, root, library_of(build))) == []


@pytest.mark.parametrize(
    ("version", "url"),
    [
        ("7.12.0", "https://repo.amd.com/rocm/tarball/therock-dist-linux-gfx110X-all-7.12.0.tar.gz"),
        ("7.14.0", "https://repo.amd.com/rocm/tarball-multi-arch/therock-dist-linux-gfx110X-all-7.14.0.tar.gz"),
    ],
)
def test_therocks_tarball_of_another_family_is_named_with_the_tarball_of_this_gpus_family(
    tmp_path: Path, build: Path, version: str, url: str
) -> None:
    """A tarball names no family on disk, but its kernel files name the processors it carries (rocBLAS's files;
    the multi-arch tarball's .kpack/ files): gfx942 only is the gfx94X-dcgpu tarball, and an RX 7900 (gfx1100)
    needs the same release's gfx110X-all tarball, not "a ROCm release that supports it"."""
    root = make_sysroot(tmp_path / "root", [Gpu(gfx_target_version=GFX["gfx1100"])])
    home = add_rocm(root, build, version, toolchain=False)
    (home / "lib" / "llvm" / "amdgcn" / "bitcode").mkdir(parents=True)
    (home / ".kpack").mkdir()
    (home / ".kpack" / "blas_lib_gfx942.kpack").write_bytes(b"")  # named as TheRock's RELEASES.md shows them
    add_math_libraries(home / "lib", build, ["gfx942"])
    report = doctor({}, root, library_of(build))
    (finding,) = [f for f in kernels(report) if "rocBLAS" in f.summary]
    assert f"TheRock's tarball of ROCm {version}-56 for gfx94X-dcgpu" in finding.fix, finding.fix
    assert finding.fix.endswith(f"tarball for gfx110X-all in its place: {url}"), finding.fix
    assert "supported-GPU list" not in finding.fix
