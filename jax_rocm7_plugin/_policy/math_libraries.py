"""The ROCm math libraries whose GPU kernels live in files beside them, one set per processor (data:
math_libraries.json). Read by the doctor's `_machine/gpu_kernels.py`; stdlib only, read on first use."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any, Literal

from jax_rocm7_plugin._record import NamedTuple

DATA = Path(__file__).resolve().parent / "math_libraries.json"
Without = Literal["abort", "fail", "slower"]
_WITHOUT = ("abort", "fail", "slower")


class MathLibrary(NamedTuple):
    name: str  # rocBLAS
    soname: str  # librocblas.so.5
    folder: str  # relative to the shared object's directory
    look_in: tuple[str, ...]  # subfolders, in the library's order ("{gfx}" per processor, "." the folder)
    look_in_source: str | None  # who shows where the library looks
    variable: str  # the environment variable that names another folder
    files: str  # a regular expression over file names, with {gfx}
    any_files: str  # a file of this kind for any processor: the folder is laid out as expected
    xla_uses_on: frozenset[str] | None  # None: every processor
    used_for: str
    first_use: str
    without: Without
    fix_flag: str | None  # an XLA flag that keeps XLA off this library
    symptom: str
    sources: tuple[str, ...]

    def used_on(self, gfx: str) -> bool:
        return self.xla_uses_on is None or gfx in self.xla_uses_on

    def file_pattern(self, gfx: str) -> re.Pattern[str]:
        return re.compile(self.files.replace("{gfx}", re.escape(gfx)))


@cache
def libraries() -> tuple[MathLibrary, ...]:
    """Every entry of math_libraries.json, validated (ValueError names the entry and what is wrong)."""
    data = json.loads(DATA.read_text(encoding="utf-8"))
    return tuple(_entry(raw) for raw in data["libraries"])


def _entry(raw: dict[str, Any]) -> MathLibrary:
    name = raw.get("name", "?")
    if raw.get("without") not in _WITHOUT:
        raise ValueError(f"math library {name!r}: 'without' is one of {_WITHOUT}")
    if "{gfx}" not in raw.get("files", ""):
        raise ValueError(f"math library {name!r}: 'files' names the processor as {{gfx}}")
    sources = tuple(raw.get("sources") or ())
    if not sources or not all(s.startswith("https://github.com/") for s in sources):
        raise ValueError(f"math library {name!r}: cite the public threads that show its failure")
    uses = raw["xla_uses_on"]
    re.compile(raw["files"].replace("{gfx}", "gfx942"))  # a bad expression fails here, not on a user's machine
    return MathLibrary(
        name,
        raw["soname"],
        raw["folder"],
        tuple(raw.get("look_in") or (".",)),
        raw.get("look_in_source"),
        raw["variable"],
        raw["files"],
        raw["any_files"],
        None if uses == "all" else frozenset(uses),
        raw["used_for"],
        raw["first_use"],
        raw["without"],
        raw.get("fix_flag"),
        raw["symptom"],
        sources,
    )
