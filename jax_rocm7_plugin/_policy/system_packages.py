"""Which distribution package provides a missing system library (data: system_packages.json), for the fix of
library-dependency-missing. The distribution is told by /etc/os-release's ID and ID_LIKE (os-release(5))."""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "system_packages.json"


@cache
def _data() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DATA.read_text(encoding="utf-8"))
    return data


def family(os_ids: Sequence[str]) -> str | None:
    """ "debian", "rhel" or "suse" for os-release's ID followed by its ID_LIKE words; None when none is known."""
    for os_id in os_ids:
        for name, spec in _data()["families"].items():
            if os_id in spec["ids"]:
                return name
    return None


def install_command(names: Sequence[str], os_ids: Sequence[str]) -> str | None:
    """ "sudo apt-get install libdw1 libnuma1" for these missing sonames on this distribution; None unless every
    name has a known package there."""
    distribution = family(os_ids)
    if distribution is None or not names:
        return None
    table = _data()["libraries"]
    packages = [table.get(name, {}).get(distribution) for name in names]
    if any(p is None for p in packages):
        return None
    return f"{install_verb(distribution)} {' '.join(dict.fromkeys(p for p in packages if p))}"


def install_verb(family_name: str) -> str:
    """ "sudo apt-get install" for a distribution family of the data."""
    return str(_data()["families"][family_name]["install"])


def reinstall_words(family_name: str) -> list[str]:
    """["sudo", "dnf", "reinstall"]: how a distribution family of the data installs a package's files again."""
    return str(_data()["families"][family_name]["reinstall"]).split()


def search_verb(family_name: str) -> str:
    """ "apt-cache search --names-only": how a distribution family of the data finds a package by name."""
    return str(_data()["families"][family_name]["search"])
