"""On a real AMD GPU host with ROCm 7 and the pair installed (`pytest -m rocm`); skipped elsewhere."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.rocm


def run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_rocm_devices_listed() -> None:
    out = run("import jax; print(jax.devices(), jax.default_backend())")
    assert "RocmDevice(id=0)" in out
    assert out.strip().endswith("gpu")


def test_jitted_matmul_matches_numpy() -> None:
    run(
        "import jax, jax.numpy as jnp, numpy as np\n"
        "x = np.random.default_rng(0).standard_normal((256, 256), dtype=np.float32)\n"
        "y = jax.jit(lambda a: a @ a.T)(jax.device_put(x, jax.devices('rocm')[0]))\n"
        "np.testing.assert_allclose(np.asarray(y), x @ x.T, rtol=1e-3, atol=1e-3)\n"
    )


def test_rocm_version_reported() -> None:
    out = run("import jax\nbackend = jax.extend.backend.get_backend('rocm')\nprint(backend.platform_version)\n")
    assert "rocm" in out.lower()


def test_doctor_says_ok() -> None:
    done = subprocess.run([sys.executable, "-m", "jax_rocm7_plugin", "doctor"], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout
