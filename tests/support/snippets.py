"""Helpers for end-to-end tests: install wheels into a fresh venv, run jax there (tests/support/wheels.py builds)."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import venv
from pathlib import Path

# What the end-to-end tests run: a jitted program on the 'rocm' devices, checked against NumPy.
JIT_ON_ROCM = """
import jax, jax.numpy as jnp, numpy as np
devices = jax.devices("rocm")
x = np.arange(12.0, dtype=np.float32).reshape(3, 4) / 10
y = jax.jit(lambda a: jnp.tanh(a @ a.T))(jax.device_put(x, devices[0]))
np.testing.assert_allclose(np.asarray(y), np.tanh(x @ x.T), rtol=1e-5)
print("ROCM_DEVICES", len(devices), "RESULT_ON", list(y.devices())[0] in devices)
"""
DEVICES = "import jax; print('PLATFORMS', sorted({d.platform for d in jax.devices()}))"


def make_venv(path: Path, interpreter: Path | None = None) -> Path:
    """A fresh venv, of this interpreter or of `interpreter` (another CPython)."""
    if interpreter is None:
        venv.EnvBuilder(with_pip=True, clear=True).create(path)
    else:
        subprocess.run([str(interpreter), "-m", "venv", "--clear", str(path)], check=True, capture_output=True)
    return path / "bin" / "python"


def fast_venv(path: Path, interpreter: Path, *requirements: str | Path) -> Path:
    """A fresh venv of `interpreter` with `requirements` installed by uv (pinned in requirements/test.txt): the
    same wheels pip would resolve, linked from uv's cache (~2 s, where pip takes ~35 s for jax and jaxlib). pip is
    seeded into it for the tests that reinstall a wheel the way users do. The install routes users take (pip, the
    jax extra) are tested with pip itself (tests/e2e/test_release.py).

    Byte-compiled is what the tests' processes import: the environment may forbid writing bytecode
    (PYTHONDONTWRITEBYTECODE), and then every child would compile it again. Our packages whole (every command's
    path); of jax, jaxlib and numpy what a jitted program, jax.distributed, sharding and sparse import, by one
    process that imports them and may write bytecode (a third of their modules: compileall of the whole packages
    took ~12 s of CPU per venv, this ~4 s)."""
    import sys

    from tests.support.environment import TEST_CACHE

    uv = Path(sys.executable).parent / "uv"
    # One cache for every worker and session (uv's cache takes concurrent installs): not under XDG_CACHE_HOME,
    # which the suite points at a fresh folder per process (tests/conftest.py).
    environ = {**os.environ, "VIRTUAL_ENV": "", "UV_CACHE_DIR": str(TEST_CACHE / "uv")}
    python = path / "bin" / "python"
    for argv in (
        [str(uv), "venv", "--quiet", "--seed", "--python", str(interpreter), str(path)],
        [str(uv), "pip", "install", "--quiet", "--python", str(python), *map(str, requirements)],
    ):
        done = subprocess.run(argv, capture_output=True, text=True, env=environ)
        assert done.returncode == 0, done.stdout + done.stderr
    (site,) = path.glob("lib/python3.*/site-packages")
    ours = sorted(str(p) for p in site.iterdir() if p.is_dir() and p.name.startswith(_OURS))
    done = subprocess.run([str(python), "-m", "compileall", "-q", *ours], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    writable = {k: v for k, v in clean_env(JAX_PLATFORMS="cpu").items() if k != "PYTHONDONTWRITEBYTECODE"}
    done = subprocess.run([str(python), "-c", _WARM], capture_output=True, text=True, env=writable, cwd="/")
    assert done.returncode == 0, done.stdout + done.stderr
    return python


_OURS = ("jax_rocm7_", "jax_plugins")
# What the tests' processes import of jax, jaxlib and numpy (imported once by fast_venv, bytecode written).
_WARM = """
import contextlib
import jax, jax.numpy as jnp, numpy as np
import jax.experimental.sparse, jax.sharding
from jax._src import clusters, distributed
with contextlib.suppress(ImportError):
    from jax import shard_map
with contextlib.suppress(ImportError):
    from jax.experimental import shard_map
jax.jit(lambda x: x + 1)(jnp.ones(3)).block_until_ready()
"""


def _runs_as(candidate: str, version: str) -> bool:
    try:
        done = subprocess.run(
            [candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
            env={k: v for k, v in os.environ.items() if k != "PYENV_VERSION"},
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and done.stdout.strip() == version


def find_interpreter(version: str) -> Path | None:
    """CPython `version` ("3.12"): pyenv's install of it (newest patch), else python3.12 on PATH."""
    pyenv_root = os.environ.get("PYENV_ROOT") or str(Path.home() / ".pyenv")
    installed = sorted(
        glob.glob(f"{pyenv_root}/versions/{version}.*/bin/python{version}"),
        key=lambda p: int(p.split("/versions/")[1].split("/")[0].split(".")[2].split("-")[0] or 0),
    )
    for candidate in [*reversed(installed), shutil.which(f"python{version}") or ""]:
        if candidate and _runs_as(candidate, version):
            return Path(candidate)
    return None


def pip(python: Path, *args: str) -> None:
    done = subprocess.run(
        [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q", *args],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def clean_env(**extra: str) -> dict[str, str]:
    """The caller's environment without jax/ROCm settings that would change the outcome."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "XLA_", "PJRT_", "HIP_", "ROCR_"))}
    env.update(extra)
    return env


def run_python(python: Path, code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, env=clean_env(**env), cwd="/", timeout=300
    )


def our_warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("ROCm backend")]
