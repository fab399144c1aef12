"""Libraries the ROCm runtime opens by name at run time, not through DT_NEEDED (data: opened_libraries.json).
Read by the doctor's `_machine/opened_libraries.py`; stdlib only, read on first use."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from jax_rocm7_plugin._record import NamedTuple

DATA = Path(__file__).resolve().parent / "opened_libraries.json"
WHEN = frozenset({"wsl"})


class OpenedLibrary(NamedTuple):
    name: str
    opener: str  # the soname of the library that calls dlopen
    opener_role: str
    when: str
    names: tuple[str, ...]  # the names it may be opened by
    only_names: tuple[tuple[int, int, int], tuple[str, ...], str] | None  # (ROCm below, names, source)
    needed_for: str
    without: str
    install: str
    evidence: tuple[str, ...]

    def names_for(self, rocm: tuple[int, int, int] | None) -> tuple[str, ...]:
        """The names the opener of this ROCm release asks for (every known name where the release is unknown or
        later than what the sources show)."""
        if self.only_names is not None and rocm is not None and rocm < self.only_names[0]:
            return self.only_names[1]
        return self.names


@cache
def libraries() -> tuple[OpenedLibrary, ...]:
    from jax_rocm7_plugin._policy.known_issues import version_tuple

    data = json.loads(DATA.read_text(encoding="utf-8"))
    found = []
    for raw in data["libraries"]:
        if raw["when"] not in WHEN or not raw.get("evidence"):
            raise ValueError(f"opened library {raw.get('name')!r}: 'when' is one of {sorted(WHEN)}, with evidence")
        only: Any = raw.get("only_names")
        below = version_tuple(only["rocm_below"]) if only else None
        found.append(
            OpenedLibrary(
                raw["name"],
                raw["opener"],
                raw["opener_role"],
                raw["when"],
                tuple(raw["names"]),
                (below, tuple(only["names"]), only["source"]) if only and below else None,
                raw["needed_for"],
                raw["without"],
                raw["install"],
                tuple(raw["evidence"]),
            )
        )
    return tuple(found)
