"""TheRock's GPU families and the pip command of the build of a ROCm release that carries a GPU (data:
rocm_families.json, with sources). Stdlib only; the doctor's."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "rocm_families.json"


@cache
def _data() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DATA.read_text(encoding="utf-8"))
    return data


def _line(version: str) -> tuple[int, int] | None:
    parts = version.split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return None


def _within(spec: str | None, line: tuple[int, int]) -> bool:
    """'7.9-7.13', '7.12-' (no end), None (every release)."""
    if not spec:
        return True
    low, _, high = spec.partition("-")
    start, end = _line(low), _line(high) if high else None
    return (start is None or line >= start) and (end is None or line <= end)


def family_of(gfx: str, version: str) -> str | None:
    """The family of ROCm `version` whose build carries `gfx` (None: none the data knows)."""
    line = _line(version)
    if line is None:
        return None
    return next(
        (f["name"] for f in _data()["families"] if gfx in f["targets"] and _within(f.get("releases"), line)), None
    )


def install_command(gfx: str, version: str) -> str | None:
    """The pip command that installs ROCm `version`'s libraries for `gfx` (AMD's index of that release line)."""
    line = _line(version)
    if line is None:
        return None
    release = ".".join(version.split(".")[:3]).split("+")[0]
    for key in ("per_family_index", "multi_arch_index"):
        index = _data()[key]
        if _within(index["releases"], line):
            family = family_of(gfx, version)
            if "{family}" in index["command"] and family is None:
                return None
            return str(index["command"]).format(family=family, gfx=gfx, version=release)
    return None


def pip_family(gfx_targets: list[str]) -> str | None:
    """The one family whose per-family index (the newest release line that has one) serves every GPU of
    `gfx_targets`; None where they need different families or one the data does not know."""
    newest = _data()["per_family_index"]["releases"].partition("-")[2] or "7.13"
    return one_family(gfx_targets, newest)


def tarball_url(gfx: str, version: str) -> str | None:
    """Where TheRock's tarball of ROCm `version` for `gfx`'s family is (None: no tarball the data knows)."""
    line = _line(version)
    family = family_of(gfx, version)
    if line is None or family is None:
        return None
    release = ".".join(version.split(".")[:3]).split("+")[0].split("-")[0]
    for index in _data()["tarball_indexes"]:
        if _within(index["releases"], line):
            return str(index["url"]).format(family=family, version=release)
    return None


def one_family(processors: list[str], version: str) -> str | None:
    """The one family of ROCm `version` holding every one of `processors` (a tarball's, by the processors its kernel
    files name; a pip index's); None where they span several or none is known."""
    families = {family_of(gfx, version) for gfx in processors}
    if len(families) != 1 or None in families:
        return None
    return families.pop()
