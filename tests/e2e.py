"""Helpers for end-to-end tests: install wheels into a fresh venv, run jax there (tests/wheels.py builds them)."""

from __future__ import annotations

import os
import subprocess
import venv
from pathlib import Path

PINS = ["jax==0.10.2", "jaxlib==0.10.2"]


def make_venv(path: Path) -> Path:
    venv.EnvBuilder(with_pip=True, clear=True).create(path)
    return path / "bin" / "python"


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
