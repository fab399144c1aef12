"""Which shared objects are ROCm's and where a ROCm install keeps them (data: rocm_policy.json).

Shared by `build.py check` (a wheel must not bundle them; the library's RUNPATH
must reach them) and the doctor (where an install has the libraries the loader
cannot find). Stdlib only.
"""

from __future__ import annotations

import fnmatch
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

POLICY = Path(__file__).resolve().parent / "rocm_policy.json"
BITCODE_FILE = "ocml.bc"  # one of the device libraries every kernel links
LLD_FILE = "ld.lld"


@cache
def _policy() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(POLICY.read_text(encoding="utf-8"))
    return data


@cache
def _library_pattern() -> re.Pattern[str]:
    stems = "|".join(
        fnmatch.translate(stem).removeprefix("(?s:").removesuffix(")\\Z") for stem in _policy()["library_stems"]
    )
    return re.compile(rf"lib(?:{stems})\.so(?:\.\d+)*")


def is_rocm_library(soname: str) -> bool:
    """libamdhip64.so.7, librocm_sysdeps_drm.so.2, libamd_smi.so.26 ... (a file name, no directory)."""
    return _library_pattern().fullmatch(soname) is not None


def library_dirs() -> tuple[str, ...]:
    """Directories of a ROCm root that hold its libraries, relative to the root ("lib", "lib/rocm_sysdeps/lib")."""
    return tuple(_policy()["library_dirs"])


def private_library_dirs() -> tuple[str, ...]:
    """Directories of a ROCm root that hold the system libraries it ships for itself ("lib/rocm_sysdeps/lib")."""
    return tuple(_policy()["private_library_dirs"])


def bitcode_dirs() -> tuple[str, ...]:
    """Directories of a ROCm root that may hold its device bitcode (BITCODE_FILE ...), most specific first."""
    return tuple(_policy()["bitcode_dirs"])


def lld_dirs() -> tuple[str, ...]:
    """Directories of a ROCm root that may hold its LLD_FILE linker."""
    return tuple(_policy()["lld_dirs"])


def sysdeps_dir() -> str:
    return next(d for d in library_dirs() if "rocm_sysdeps" in d)


def elsewhere_roots() -> tuple[str, ...]:
    """Machine globs of install roots the doctor looks under when the loader finds no ROCm (about_elsewhere)."""
    return tuple(_policy()["elsewhere_roots"])


def elsewhere_sites() -> tuple[str, ...]:
    """Machine globs of Python site-packages folders that may hold ROCm from pip in another environment."""
    return tuple(_policy()["elsewhere_sites"])


def elsewhere_package_databases() -> dict[str, str]:
    return dict(_policy()["elsewhere_package_databases"])


def elsewhere_limits() -> dict[str, int]:
    """How much the search may read at most (candidates, files, bytes): a big machine never makes the doctor slow."""
    return dict(_policy()["elsewhere_limits"])
