"""argparse types shared by the verbs: each turns a bad value into one usage error."""

from __future__ import annotations

import argparse
from pathlib import Path


def directory(text: str) -> Path:
    path = Path(text).resolve()
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: not a directory")
    return path


def amdgpu_targets(text: str) -> tuple[str, ...]:
    from jax_rocm7_build import bazel

    try:
        return bazel.parse_targets(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def python_version(text: str) -> str:
    """X.Y of a CPython, or 'all' (every CPython of the release)."""
    if text == "all":
        return text
    from jax_rocm7_build import bazel

    try:
        return bazel.check_python_version(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
