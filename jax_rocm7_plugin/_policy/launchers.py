"""What jax.distributed needs to join through each launcher (data: launchers.json, with sources): the launcher
recognised from its variables, and the Python module jax joins through. Stdlib only."""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from jax_rocm7_plugin._environment import is_set
from jax_rocm7_plugin._record import NamedTuple

DATA = Path(__file__).resolve().parent / "launchers.json"


class Launcher(NamedTuple):
    name: str
    all_of: tuple[str, ...]  # every one set
    any_of: tuple[str, ...]  # at least one set
    none_of: tuple[str, ...]  # none set
    module: str | None  # what jax joins through
    jax_detects_from: str | None  # the first jax release that detects it by itself (None: only when asked)
    fix: str
    older_jax_fix: str | None
    sources: tuple[str, ...]

    def present(self, environ: Mapping[str, str]) -> bool:
        return (
            all(is_set(n, environ) for n in self.all_of)
            and (not self.any_of or any(is_set(n, environ) for n in self.any_of))
            and not any(is_set(n, environ) for n in self.none_of)
        )


@cache
def launchers() -> tuple[Launcher, ...]:
    data: dict[str, Any] = json.loads(DATA.read_text(encoding="utf-8"))
    found = []
    for raw in data["launchers"]:
        if not raw.get("sources"):
            raise ValueError(f"launcher {raw.get('name')!r}: cite where jax's need is shown")
        found.append(
            Launcher(
                raw["name"],
                tuple(raw.get("all", ())),
                tuple(raw.get("any", ())),
                tuple(raw.get("none", ())),
                raw.get("module"),
                raw.get("jax_detects_from"),
                raw["fix"],
                raw.get("older_jax_fix"),
                tuple(raw["sources"]),
            )
        )
    return tuple(found)


def missing_prerequisite(
    environ: Mapping[str, str], has_module: Any, jax_version: str | None
) -> tuple[str, str] | None:
    """(summary, fix) where a launcher jax joins through a module is present and the module is not (`has_module`:
    name -> bool), or where this jax does not detect the launcher at all; None otherwise."""
    from jax_rocm7_plugin._policy.known_issues import version_tuple

    for launcher in launchers():
        if not launcher.present(environ):
            continue
        jax = version_tuple(jax_version)
        if launcher.jax_detects_from and jax is not None and jax < (version_tuple(launcher.jax_detects_from) or ()):
            return (
                f"this is an {launcher.name} job, which jax {jax_version} does not detect ({launcher.sources[0]})",
                launcher.older_jax_fix or launcher.fix,
            )
        if launcher.module and not has_module(launcher.module):
            return (
                f"this is an {launcher.name} job, and jax joins it through {launcher.module}, which is not installed "
                f"here ({launcher.sources[0]})",
                launcher.fix,
            )
    return None
