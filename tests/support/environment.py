"""Where things are and what the test machine has: the checkout, the caches, interpreters, combos' venvs."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

import pytest

REPO = Path(__file__).resolve().parents[2]
DEBIAN_HIP = Path("/usr/lib/x86_64-linux-gnu/libamdhip64.so.5")
UPSTREAM_RELEASE = "0.10.0"
TEST_CACHE = Path(os.environ.get("JAX_ROCM_TEST_CACHE", Path.home() / ".cache" / "jax-rocm7-tests"))


# Variables of the test's own environment that would steer the plugin or the runtime under test.
_STEERING = ("JAX_", "XLA_", "ROCPROFILER_", "HSA_", "HIP_", "DEBUG_")


def plugin_environment(
    root: Path, library: Path, cache: Path, *, python_path: tuple[str, ...] = (), **variables: str
) -> dict[str, str]:
    """This environment without the variables that steer the plugin, and the checkout's plugin on a synthetic
    machine (`root`) with `library` as its PJRT library and `cache` for its verdicts."""
    keep = {k: v for k, v in os.environ.items() if not k.startswith(_STEERING)}
    return {
        **keep,
        "PYTHONPATH": os.pathsep.join([str(REPO), *python_path]),
        "JAX_ROCM_SYSROOT": str(root),
        "JAX_ROCM_PJRT_LIBRARY": str(library),
        "XDG_CACHE_HOME": str(cache),
        **variables,
    }


def require(condition: bool, what: str) -> None:
    """Skip on a developer machine without `what`; fail in CI, whose script installs it."""
    if condition:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what} is missing; ci/run_tests.sh installs it")
    pytest.skip(f"{what} is not installed")


class Combo(NamedTuple):
    """One cell of the end-to-end matrix: a release of the table, a CPython, and the jax version."""

    release: str
    python: str
    jax: str

    @property
    def id(self) -> str:
        return f"jax{self.jax}-py{self.python}"


def interpreter_for(combo: Combo) -> Path:
    """The combo's CPython; skipped without it here, a failure in CI."""
    from tests.support.snippets import find_interpreter

    interpreter = find_interpreter(combo.python)
    require(interpreter is not None, f"CPython {combo.python} (on PATH or under pyenv)")
    assert interpreter is not None
    return interpreter


def combo_venv(combo: Combo, directory: Path, plugin: Path, pjrt: Path) -> Path:
    """A venv of the combo's CPython with its jax/jaxlib and the given wheel pair."""
    from tests.support.snippets import fast_venv

    # Resolution through the plugin's metadata: its jax-rocm7-pjrt==X.Y.Z.* pin takes our local pjrt wheel.
    return fast_venv(directory, interpreter_for(combo), f"jax=={combo.jax}", f"jaxlib=={combo.release}", plugin, pjrt)
