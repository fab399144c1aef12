"""Which Linux kernels carry the amdgpu/KFD fixes a GPU needs (data: linux_kernels.json, with sources), judged from
the release string /proc/version names. Stdlib only; the doctor's (the loader reads none of this)."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

from jax_rocm7_plugin._policy.grammar import loose_version
from jax_rocm7_plugin._record import NamedTuple

DATA = Path(__file__).resolve().parent / "linux_kernels.json"
# '<sysname> version <release> (<builder>) ...' (init/version.c's banner): the release is the third word.
_BANNER = re.compile(r"\S+ version (\S+)")
_RELEASE = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?(.*)")
# Ubuntu's kernels: <upstream>-<ABI>-<flavour> (6.14.0-1018-oem, 6.8.0-45-generic).
_UBUNTU = re.compile(r"-(\d+)-(generic|oem|lowlatency)$")
# Distributions whose kernels carry backports the data cannot judge by number (RHEL and its rebuilds, SUSE).
_BACKPORTED = re.compile(r"\.el\d|-default$|\.x86_64$")


class Kernel(NamedTuple):
    release: str  # 6.14.0-1018-oem
    version: tuple[int, int, int]
    ubuntu: tuple[int, str] | None  # (ABI, flavour) of an Ubuntu kernel


class Requirement(NamedTuple):
    gfx: tuple[str, ...]
    product: str
    needs: str
    first_fixed: tuple[dict[str, Any], ...]
    sources: tuple[str, ...]


@cache
def requirements() -> tuple[Requirement, ...]:
    data = json.loads(DATA.read_text(encoding="utf-8"))
    found = []
    for raw in data["gpus"]:
        if not raw.get("sources") or not all(s.startswith("https://") for s in raw["sources"]):
            raise ValueError(f"linux kernels {raw.get('gfx')}: cite AMD's page or the thread")
        found.append(
            Requirement(
                tuple(raw["gfx"]), raw["product"], raw["needs"], tuple(raw["first_fixed"]), tuple(raw["sources"])
            )
        )
    return tuple(found)


class Oldest(NamedTuple):
    version: tuple[int, int, int]
    not_judged: re.Pattern[str]
    names: str
    why: str
    sources: tuple[str, ...]


@cache
def oldest_for_rocm_7() -> Oldest:
    """The oldest kernel of any distribution AMD supports ROCm 7 on (distribution kernels it cannot judge aside)."""
    raw = json.loads(DATA.read_text(encoding="utf-8"))["rocm_7"]
    return Oldest(
        _version(raw["oldest"]), re.compile(raw["not_judged"]), raw["oldest_names"], raw["why"], tuple(raw["sources"])
    )


def older_than_any_supported(kernel: Kernel) -> bool:
    oldest = oldest_for_rocm_7()
    return kernel.version < oldest.version and not oldest.not_judged.search(kernel.release)


def parse(banner: str) -> Kernel | None:
    """The kernel of a /proc/version line (None: not that format)."""
    match = _BANNER.match(banner.strip())
    release = match.group(1) if match else None
    numbers = _RELEASE.match(release) if release else None
    if release is None or numbers is None:
        return None
    version = (int(numbers.group(1)), int(numbers.group(2)), int(numbers.group(3) or 0))
    ubuntu = _UBUNTU.search(release)
    return Kernel(release, version, (int(ubuntu.group(1)), ubuntu.group(2)) if ubuntu else None)


def has_fixes(kernel: Kernel, requirement: Requirement) -> bool | None:
    """True where the kernel is one of the fixed kinds or newer, False where it is older, None where the data cannot
    judge it (a distribution kernel with backports it does not name)."""
    for fixed in requirement.first_fixed:
        if fixed["kind"] == "upstream" and kernel.version >= _version(fixed["version"]):
            return True
        if fixed["kind"] == "ubuntu" and kernel.ubuntu is not None:
            abi, flavour = kernel.ubuntu
            series = _version(fixed["series"])[:2]
            if flavour == fixed["flavour"] and kernel.version[:2] == series and abi >= fixed["abi"]:
                return True
    if kernel.ubuntu is None and _BACKPORTED.search(kernel.release):
        return None
    return False


def _version(text: str) -> tuple[int, int, int]:
    """A version of the data file (linux_kernels.json): a loose version (_policy/grammar.py) it must hold."""
    parsed = loose_version(text)
    if parsed is None:
        raise ValueError(f"linux_kernels.json: {text!r} is not a kernel version")
    return parsed
