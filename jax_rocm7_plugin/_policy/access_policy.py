"""What a fix may never tell a user to do to reach the GPU (data: access_policy.json, each entry with why and where
it is said): join a group that gives far more than the device node, or widen access where a narrower step repairs the
machine. Stdlib only; the doctor's."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "access_policy.json"


@cache
def _data() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DATA.read_text(encoding="utf-8"))
    for group in data["privileged_groups"]:
        if not str(group.get("source", "")).startswith("https://") or not group.get("why"):
            raise ValueError(f"access policy group {group.get('name')!r}: say why, and cite where it is said")
    return data


def privileged_group(gid: int, names: Mapping[int, str]) -> str | None:
    """Why group `gid` (named by `names`, this machine's group database) is no group to join for a device node
    (None: it may be)."""
    name = names.get(gid)
    for group in _data()["privileged_groups"]:
        if group.get("gid") == gid or (name is not None and group["name"] == name):
            return f"{group['name']} (gid {gid}): {group['why']}"
    return None


@cache
def _steps() -> tuple[tuple[re.Pattern[str], str], ...]:
    return tuple((re.compile(step["pattern"]), step["why"]) for step in _data()["widening_steps"])


def widening(fix: str) -> str | None:
    """What in `fix` widens access or turns protection off (None: nothing): the step and why."""
    for pattern, why in _steps():
        match = pattern.search(fix)
        if match is not None:
            return f"{match.group(0)!r} {why}"
    return None
