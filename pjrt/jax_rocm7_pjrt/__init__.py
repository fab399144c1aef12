"""Locator for the ROCm PJRT C-API plugin library shipped in this wheel.

`library_path()` says where `xla_rocm_plugin.so` is; `build_info()` says how it
was built and where it came from (written by build/build.py at wheel build
time). Importing this package loads nothing native.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

LIBRARY_NAME = "xla_rocm_plugin.so"
BUILD_INFO_NAME = "build_info.json"
_HERE = Path(__file__).resolve().parent


def library_path() -> Path:
    """Absolute path of the PJRT library (it may be absent in a broken install)."""
    return _HERE / LIBRARY_NAME


@cache
def build_info() -> dict[str, Any]:
    """Version, provenance (source, sha256), ROCm version, amdgpu targets, PJRT C API version.

    Raises FileNotFoundError when this is a source tree that no wheel build stamped.
    """
    path = _HERE / BUILD_INFO_NAME
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"{path} is missing: this jax_rocm7_pjrt was not built by build/build.py") from None
    info: dict[str, Any] = json.loads(text)
    return info


def __getattr__(name: str) -> Any:
    if name == "__version__":
        return build_info()["version"]
    raise AttributeError(name)
