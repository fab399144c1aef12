"""The release matrix end to end: for each jax release users run, on each CPython it serves here, our
pair built from the stand-in library (OpenXLA's CPU PJRT plugin) and installed with that release's
real jax/jaxlib in a fresh venv of that CPython.

Each combo's tests share one venv, made once per session for every worker (tests/support/shared.py).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from jax_rocm7_plugin._policy import releases
from tests.support.environment import Combo, combo_venv
from tests.support.snippets import DEVICES, JIT_ON_ROCM, our_warnings, run_python
from tests.support.sysroots import make_sysroot

COMBOS = [
    Combo("0.10.2", "3.11", "0.10.2"),
    Combo("0.11.2", "3.12", "0.11.2"),
    Combo("0.12.0", "3.12", "0.12.0"),
    Combo("0.12.0", "3.13", "0.12.0"),
    Combo("0.12.0", "3.12", "0.12.0.1"),  # a jax-only bump beside jaxlib 0.12.0
]

VERSIONS = (
    "import sys, jax, jaxlib.version as v, jax_rocm7_plugin as p, jax_rocm7_pjrt as q; "
    "print(sys.version_info[0], sys.version_info[1], jax.__version__, v.__version__, v._git_hash, "
    "p.__version__, q.__version__)"
)


@pytest.fixture(params=[pytest.param(c, id=c.id) for c in COMBOS])
def combo(request: pytest.FixtureRequest) -> Combo:
    combo: Combo = request.param
    return combo


@pytest.fixture
def python(combo: Combo, e2e_venv: Callable[[Combo], Path]) -> Path:
    return e2e_venv(combo)


def test_the_venv_runs_the_release_it_asked_for(combo: Combo, python: Path) -> None:
    done = run_python(python, VERSIONS)
    assert done.returncode == 0, done.stderr
    major, minor, jax, jaxlib, git_hash, plugin, pjrt = done.stdout.split()
    assert f"{major}.{minor}" == combo.python and jax == combo.jax and jaxlib == combo.release
    row = releases.get(combo.release)
    assert row is not None and git_hash == row.jax_commit  # the row's JAX commit is this jaxlib's
    assert plugin == pjrt == combo.release


def test_jit_runs_on_the_rocm_backend(python: Path, tmp_path: Path) -> None:
    done = run_python(python, JIT_ON_ROCM, JAX_ROCM_SYSROOT=str(make_sysroot(tmp_path / "machine")))
    assert done.returncode == 0, done.stderr
    assert "ROCM_DEVICES 4 RESULT_ON True" in done.stdout  # the CPU plugin exposes 4 devices
    assert our_warnings(done.stderr) == []


def test_a_bare_machine_is_one_warning_line(python: Path, tmp_path: Path) -> None:
    done = run_python(python, DEVICES, JAX_ROCM_SYSROOT=str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "PLATFORMS ['cpu']" in done.stdout
    (warning,) = our_warnings(done.stderr)
    assert "[amdgpu-driver-missing]" in warning
    assert "Traceback" not in done.stderr


def test_jax_platforms_rocm_names_the_cause(python: Path, tmp_path: Path) -> None:
    done = run_python(python, DEVICES, JAX_ROCM_SYSROOT=str(tmp_path), JAX_PLATFORMS="rocm")
    assert done.returncode != 0
    assert "Unable to initialize backend 'rocm': no AMD GPU driver" in done.stderr
    assert "not in the list of known backends" not in done.stderr


# A .postN of the pjrt wheel in a fresh venv of each combo, with --sweeps (each builds the pjrt wheel once more,
# from a 250 MB library). The suite keeps the class twice: the .post1 reinstalled over a venv's pjrt wheel
# (tests/e2e/test_e2e.py) and the plugin's pin resolving to the newest .postN through the jax extra with pip
# (tests/e2e/test_release.py).
@pytest.mark.parametrize("combo", [pytest.param(c, id=c.id, marks=pytest.mark.sweep) for c in COMBOS])
def test_a_pjrt_post_release_is_accepted(
    combo: Combo, tmp_path: Path, standin_wheels: Callable[[str, str], dict[str, Path]]
) -> None:
    """A venv of its own with the pjrt wheel's .post1 (the plugin's pin resolves to it): jit runs, no warning."""
    wheels = standin_wheels(combo.release, combo.python)
    python = combo_venv(combo, tmp_path / "env", wheels["plugin"], wheels["pjrt-post1"])
    done = run_python(python, JIT_ON_ROCM, JAX_ROCM_SYSROOT=str(make_sysroot(tmp_path / "machine")))
    assert done.returncode == 0, done.stderr
    assert "RESULT_ON True" in done.stdout and our_warnings(done.stderr) == []
    version = run_python(python, "import jax_rocm7_pjrt as p; print(p.__version__)")
    assert version.stdout.strip() == f"{combo.release}.post1"
