"""Which TheRock native package (amdrocm-*) ships a ROCm library (data: rocm_packages.json, generated from TheRock's
package list by `build.py packages`), and how a package is named for a release and a GPU. Stdlib only; the doctor's.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "rocm_packages.json"
_STEM = re.compile(r"lib(.+?)\.so(?:\.\d+)*$")


@cache
def _data() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DATA.read_text(encoding="utf-8"))
    return data


def stem(soname: str) -> str | None:
    """libamdhip64.so.7 -> amdhip64; librocm_sysdeps_drm.so.2 -> rocm_sysdeps."""
    match = _STEM.match(soname)
    if match is None:
        return None
    name = match.group(1)
    return "rocm_sysdeps" if name.startswith("rocm_sysdeps_") else name


def native_package(soname: str, suffix: str, gpus: list[str]) -> list[str] | None:
    """The names of the native packages to install for `soname`: NAME<suffix> (suffix: the release, "7.15", as the
    installed packages carry it), one per GPU processor for a package TheRock builds per GPU; None: not known."""
    name = stem(soname)
    entry = _data()["libraries"].get(name) if name is not None else None
    if entry is None:
        return None
    base = f"{entry['package']}{suffix}"
    if entry["per_gpu"] and gpus:
        return [f"{base}-{gfx}" for gfx in dict.fromkeys(gpus)]
    return [base]
