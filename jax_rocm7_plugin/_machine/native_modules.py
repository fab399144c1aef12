"""The ROCm extension modules this plugin wheel carries: where they are, what the build recorded.

A wheel with extension modules keeps the real ones in `_native/` (the public names hold
two-line stubs; see _extensions.py); a pure-Python wheel has none.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jax_rocm7_plugin._names import EXTENSION_CAPABILITIES, NATIVE_BUILD_INFO, NATIVE_DIR

_PACKAGE = Path(__file__).parent.parent  # __file__ is absolute; resolving it costs a stat per component


def native_dir() -> Path:
    return _PACKAGE / NATIVE_DIR


def native_path(module: str) -> Path:
    return native_dir() / f"{module}.so"


def native_modules() -> list[Path]:
    """The extension modules this wheel carries (none in a pure-Python wheel)."""
    return sorted(native_dir().glob("*.so"))


def build_info() -> dict[str, Any] | None:
    """What build.py recorded about the shipped modules, or None for a wheel without them."""
    try:
        data: dict[str, Any] = json.loads((native_dir() / NATIVE_BUILD_INFO).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data


def lost(module: str, cause: str) -> str:
    """One sentence: which capability is gone and why ("GPU linear algebra unavailable: ...")."""
    return f"{EXTENSION_CAPABILITIES.get(module, module)} unavailable: {cause}"
