"""The wheel pair built from a real PJRT plugin, installed with real jax 0.10.2 in a fresh venv.

The stand-in library is OpenXLA's CPU PJRT plugin (xla-cpu-pjrt): registered by our
loader under 'rocm' it runs jitted programs, so everything but the GPU is real.
"""

from __future__ import annotations

import subprocess
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from jax_rocm7_build.assemble import source_digest

from tests.support.environment import Combo
from tests.support.native import library_needing_missing_dependency, pjrt_library_with_code_for
from tests.support.snippets import DEVICES, JIT_ON_ROCM, clean_env, our_warnings, pip, run_python
from tests.support.sysroots import bundle_for, make_sysroot
from tests.support.wheels import build

# The detailed end-to-end cases run on 0.10.2/CPython 3.11; tests/e2e/test_matrix.py runs the core ones
# on every release. Same group as the matrix's 0.10.2 cell, so both share its wheels and venv.
pytestmark = pytest.mark.xdist_group("e2e-0.10.2")  # one venv; the folder marks these slow
# The stand-in is a CPU plugin, not a ROCm build: `check` would (rightly) refuse its pjrt wheel.
STANDIN = "--skip-check"
COMBO = Combo("0.10.2", "3.11", "0.10.2")


@pytest.fixture(scope="session")
def wheels(
    tmp_path_factory: pytest.TempPathFactory,
    standin_library: Path,
    standin_wheels: Callable[[str, str], dict[str, Path]],
) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("dist-older")
    # The older release is refused before its library is opened: a small PJRT-shaped one (a fixture) spares
    # compressing the 250 MB stand-in once more.
    small = pjrt_library_with_code_for(out / "lib", bundle_for(["gfx942"]))
    (older,) = build(out / "dist", small, STANDIN, "--only", "pjrt", "--release", "0.10.1")
    wheels = standin_wheels(COMBO.release, COMBO.python)
    wheels["pjrt-0.10.1"] = older
    return wheels


@pytest.fixture(scope="session")
def python(wheels: dict[str, Path], private_venv: Callable[[Combo], Path]) -> Path:
    return private_venv(COMBO)  # these tests reinstall the pjrt wheel in it (their xdist_group: one worker)


@pytest.fixture
def gpu_sysroot(tmp_path: Path) -> Path:
    return make_sysroot(tmp_path / "machine")


@pytest.fixture
def swapped_pjrt(python: Path, wheels: dict[str, Path]) -> Iterator[callable]:  # type: ignore[valid-type]
    def install(name: str) -> None:
        pip(python, "--no-deps", "--force-reinstall", str(wheels[name]))

    yield install
    install("pjrt")


def test_wheel_names_and_tags(wheels: dict[str, Path]) -> None:
    assert wheels["pjrt"].name == "jax_rocm7_pjrt-0.10.2-py3-none-manylinux_2_28_x86_64.whl"
    assert wheels["plugin"].name == "jax_rocm7_plugin-0.10.2-py3-none-any.whl"
    assert wheels["pjrt-post1"].name.startswith("jax_rocm7_pjrt-0.10.2.post1-")


def test_the_installed_package_is_planned_by_the_digest_its_build_stamped(
    python: Path, wheels: dict[str, Path], tmp_path: Path
) -> None:
    """The warm path files its plans under the wheel's stamp (no stat of the package's files at each start)."""
    with zipfile.ZipFile(wheels["plugin"]) as wheel:
        wheel.extractall(tmp_path, [n for n in wheel.namelist() if n.startswith("jax_rocm7_plugin/")])
    done = run_python(python, "from jax_rocm7_plugin._loader import warm; print(warm.own_files())")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"built:{source_digest(tmp_path / 'jax_rocm7_plugin')}"


def test_jit_runs_on_rocm_backend(python: Path, gpu_sysroot: Path) -> None:
    done = run_python(python, JIT_ON_ROCM, JAX_ROCM_SYSROOT=str(gpu_sysroot))
    assert done.returncode == 0, done.stderr
    assert "ROCM_DEVICES 4 RESULT_ON True" in done.stdout  # the CPU plugin exposes 4 devices
    assert our_warnings(done.stderr) == []


def test_locator_reports_build_info(python: Path, standin_library: Path) -> None:
    code = "import jax_rocm7_pjrt as p, json; print(json.dumps([str(p.library_path()), p.build_info()]))"
    done = run_python(python, code)
    import json

    path, info = json.loads(done.stdout)
    assert Path(path).name == "xla_rocm_plugin.so" and Path(path).is_file()
    assert info["version"] == "0.10.2" and info["pjrt_c_api_version"] == "0.81"
    assert info["source"] == {"kind": "path", "path": str(standin_library.resolve())}
    import hashlib

    assert info["library_sha256"] == hashlib.sha256(standin_library.read_bytes()).hexdigest()


def test_no_driver_falls_back_to_cpu_with_one_warning(python: Path, tmp_path: Path) -> None:
    done = run_python(python, DEVICES, JAX_ROCM_SYSROOT=str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "PLATFORMS ['cpu']" in done.stdout
    (warning,) = our_warnings(done.stderr)
    assert "[amdgpu-driver-missing]" in warning and "Fix: install the amdgpu driver" in warning


def test_jax_platforms_rocm_reports_the_cause(python: Path, tmp_path: Path) -> None:
    done = run_python(python, DEVICES, JAX_ROCM_SYSROOT=str(tmp_path), JAX_PLATFORMS="rocm")
    assert done.returncode != 0
    assert "Unable to initialize backend 'rocm': no AMD GPU driver" in done.stderr
    assert "not in the list of known backends" not in done.stderr
    assert our_warnings(done.stderr) == []  # the error says it; no duplicate warning


def test_jax_platforms_cpu_means_silence(python: Path, tmp_path: Path) -> None:
    done = run_python(python, DEVICES, JAX_ROCM_SYSROOT=str(tmp_path), JAX_PLATFORMS="cpu")
    assert done.returncode == 0 and our_warnings(done.stderr) == []


def test_container_without_kfd(python: Path, tmp_path: Path) -> None:
    root = make_sysroot(tmp_path, kfd=False)
    done = run_python(python, DEVICES, JAX_ROCM_SYSROOT=str(root))
    (warning,) = our_warnings(done.stderr)
    assert "[kfd-device-missing]" in warning and "--device=/dev/kfd" in warning


def test_pjrt_of_another_release_is_refused(python: Path, gpu_sysroot: Path, swapped_pjrt) -> None:  # type: ignore[no-untyped-def]
    swapped_pjrt("pjrt-0.10.1")
    done = run_python(python, DEVICES, JAX_ROCM_SYSROOT=str(gpu_sysroot))
    assert "PLATFORMS ['cpu']" in done.stdout
    (warning,) = our_warnings(done.stderr)
    assert "[version-skew-pjrt]" in warning
    assert "jax-rocm7-plugin 0.10.2" in warning and "jax-rocm7-pjrt 0.10.1" in warning
    assert 'pip install "jax-rocm7-pjrt==0.10.2.*"' in warning


def test_pjrt_post_release_is_accepted(python: Path, gpu_sysroot: Path, swapped_pjrt) -> None:  # type: ignore[no-untyped-def]
    swapped_pjrt("pjrt-post1")
    done = run_python(python, JIT_ON_ROCM, JAX_ROCM_SYSROOT=str(gpu_sysroot))
    assert done.returncode == 0, done.stderr
    assert "RESULT_ON True" in done.stdout
    version = run_python(python, "import jax_rocm7_pjrt as p; print(p.__version__)")
    assert version.stdout.strip() == "0.10.2.post1"


def test_explicit_library_that_is_a_directory(python: Path, gpu_sysroot: Path, tmp_path: Path) -> None:
    done = run_python(python, DEVICES, JAX_ROCM_SYSROOT=str(gpu_sysroot), JAX_ROCM_PJRT_LIBRARY=str(tmp_path))
    (warning,) = our_warnings(done.stderr)
    assert "[pjrt-library-invalid]" in warning and "is not a regular file" in warning


def test_missing_dependency_is_named(python: Path, gpu_sysroot: Path, tmp_path: Path) -> None:
    library = library_needing_missing_dependency(tmp_path / "lib")
    done = run_python(python, DEVICES, JAX_ROCM_SYSROOT=str(gpu_sysroot), JAX_ROCM_PJRT_LIBRARY=str(library))
    assert "PLATFORMS ['cpu']" in done.stdout
    (warning,) = our_warnings(done.stderr)
    assert "[library-dependency-missing]" in warning and "libgone.so" in warning


def test_bad_client_setting_is_a_message_not_a_traceback(python: Path, gpu_sysroot: Path) -> None:
    done = run_python(python, DEVICES, JAX_ROCM_SYSROOT=str(gpu_sysroot), XLA_PYTHON_CLIENT_ALLOCATOR="nonsense")
    assert "Traceback" not in done.stderr
    (warning,) = our_warnings(done.stderr)
    assert "[xla-client-env-invalid]" in warning and "XLA_PYTHON_CLIENT_ALLOCATOR" in warning


def test_doctor_and_loader_agree(python: Path, tmp_path: Path) -> None:
    import json

    root = make_sysroot(tmp_path, render_nodes=False)
    loader = run_python(python, DEVICES, JAX_ROCM_SYSROOT=str(root))
    (warning,) = our_warnings(loader.stderr)
    doctor = subprocess.run(
        [str(python.parent / "jax-rocm-doctor"), "--json"],
        capture_output=True,
        text=True,
        env=clean_env(JAX_ROCM_SYSROOT=str(root)),
    )
    report = json.loads(doctor.stdout)
    first_error = next(f for f in report["findings"] if f["severity"] == "error")
    assert doctor.returncode == 1
    assert f"{first_error['summary']}. Fix: {first_error['fix']} [{first_error['id']}]" in warning
