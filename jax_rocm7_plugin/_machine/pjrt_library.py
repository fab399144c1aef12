"""Which PJRT library the loader uses, in order of precedence.

1. `JAX_ROCM_PJRT_LIBRARY`: an explicit path (must be a regular file).
2. The installed `jax_rocm7_pjrt` package (the jax-rocm7-pjrt wheel).
3. Bazel runfiles, during development (`bazel run`/`bazel test` of this repo).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from pathlib import Path
from typing import TYPE_CHECKING

from jax_rocm7_plugin import _findings as catalog
from jax_rocm7_plugin._findings import Finding
from jax_rocm7_plugin._machine import resolved
from jax_rocm7_plugin._names import LIBRARY_FILE, PJRT_DISTRIBUTION, PJRT_ENTRY_SYMBOL, PJRT_PACKAGE
from jax_rocm7_plugin._record import NamedTuple
from jax_rocm7_plugin._settings import PJRT_LIBRARY as LIBRARY_ENV

if TYPE_CHECKING:
    from collections.abc import Callable

    from jax_rocm7_plugin._binary.elf_dynamic import DynamicInfo
# Workspace names under which the runfiles tree holds our targets (bzlmod: _main).
_RUNFILES_WORKSPACES = ("_main", "jax_rocm7")


class LibraryChoice(NamedTuple):
    path: Path
    source: str
    pjrt_version: str | None  # None when not from the jax-rocm7-pjrt wheel
    # Its NEEDED, RUNPATH and exports, read once when it was chosen (None: a load test vouches for it).
    dynamic: DynamicInfo | None = None


def locate_library(
    explicit: Path | None,
    runfiles_dir: str | None = None,
    runfiles_manifest: str | None = None,
    known_good: Callable[[Path], bool] | None = None,
    named_by: str = LIBRARY_ENV,
) -> LibraryChoice | Finding:
    """`explicit`: JAX_ROCM_PJRT_LIBRARY (absolute), or the CLI's --library (`named_by` says which, so that a
    problem names what the user gave); the runfiles variables come from a `bazel run`.

    `known_good(path)`: True when a load test has already shown this very file to be a working PJRT
    plugin; its dynamic section is then not read (`dynamic` stays None).
    """
    if explicit is not None:
        path = explicit
        if not path.is_file():
            what = "does not exist" if not path.exists() else "is not a regular file"
            given = _given(named_by, explicit)
            return catalog.pjrt_library_invalid(f"{given} {what}", (given,), named_by=named_by)
        return _checked(LibraryChoice(resolved(path), named_by, None), known_good)

    from_wheel = _from_pjrt_wheel(known_good) if importlib.util.find_spec(PJRT_PACKAGE) is not None else None
    if isinstance(from_wheel, LibraryChoice):
        return from_wheel
    # No wheel, or an unbuilt jax_rocm7_pjrt source tree on sys.path: a development run under Bazel.
    runfile = _runfiles_library(runfiles_dir, runfiles_manifest)
    if runfile is not None:
        return _checked(LibraryChoice(runfile, "bazel runfiles", None), known_good)
    if from_wheel is not None:
        return from_wheel
    return catalog.pjrt_wheel_missing((f"no module {PJRT_PACKAGE}", f"{LIBRARY_ENV} is not set"))


def _given(named_by: str, path: Path) -> str:
    """How the user gave the library: `--library PATH` or `JAX_ROCM_PJRT_LIBRARY=PATH`."""
    return f"{named_by} {path}" if named_by.startswith("--") else f"{named_by}={path}"


def _from_pjrt_wheel(known_good: Callable[[Path], bool] | None) -> LibraryChoice | Finding:
    pjrt = importlib.import_module(PJRT_PACKAGE)
    path = Path(pjrt.library_path())
    try:
        version = str(pjrt.build_info()["version"])
    except (OSError, ValueError, KeyError) as error:
        return catalog.pjrt_library_invalid(
            f"{PJRT_DISTRIBUTION} at {path.parent} has no usable build_info.json", (str(error),)
        )
    if not path.is_file():
        return catalog.pjrt_library_invalid(
            f"{PJRT_DISTRIBUTION} {version} is installed but its library {path} is missing",
            (f"{path} does not exist",),
        )
    return _checked(LibraryChoice(path, PJRT_DISTRIBUTION, version), known_good)


def _checked(choice: LibraryChoice, known_good: Callable[[Path], bool] | None) -> LibraryChoice | Finding:
    if known_good is not None and known_good(choice.path):
        return choice  # this very file loaded as a PJRT plugin in a child: an x86-64 shared object exporting it
    from jax_rocm7_plugin._binary.elf_header import shared_object_problem

    problem = shared_object_problem(choice.path)
    if problem is not None:
        return catalog.pjrt_library_invalid(problem, (f"library chosen from {choice.source}",), choice.source)
    from jax_rocm7_plugin._binary.elf_dynamic import ElfError, read_dynamic

    try:
        dynamic = read_dynamic(choice.path)
    except (ElfError, OSError) as error:
        return catalog.pjrt_library_invalid(
            f"{choice.path} is not a readable ELF object: {error}",
            (f"library chosen from {choice.source}",),
            choice.source,
        )
    if PJRT_ENTRY_SYMBOL not in dynamic.exports:
        return catalog.pjrt_library_invalid(
            f"{choice.path} is not a PJRT plugin: it exports no {PJRT_ENTRY_SYMBOL}",
            (f"exports: {', '.join(dynamic.exports[:8]) or 'none'}", f"library chosen from {choice.source}"),
            choice.source,
        )
    return choice._replace(dynamic=dynamic)


def library_targets(choice: LibraryChoice) -> list[str] | None:
    """GPU targets the library carries code for: recorded in the wheel's build_info, else read from it.

    None when the library has no offload bundles (e.g. a CPU stand-in) or they cannot be read.
    """
    if choice.source == PJRT_DISTRIBUTION:
        try:
            pjrt = importlib.import_module(PJRT_PACKAGE)
            recorded = pjrt.build_info().get("amdgpu_targets")
            return sorted(recorded) if recorded else None
        except (ImportError, OSError, ValueError):
            pass
    from jax_rocm7_plugin._binary.elf_dynamic import ElfError
    from jax_rocm7_plugin._binary.offload_bundles import scan_library

    try:
        scan = scan_library(choice.path)
    except (ElfError, OSError):
        return None
    return sorted(scan.targets) if scan is not None and scan.targets else None


def _runfiles_library(runfiles_dir: str | None, manifest: str | None) -> Path | None:
    wanted = [f"{ws}/pjrt/{LIBRARY_FILE}" for ws in _RUNFILES_WORKSPACES]
    if runfiles_dir:
        for relative in wanted:
            candidate = Path(runfiles_dir) / relative
            if candidate.is_file():
                return candidate
    if manifest:
        from jax_rocm7_plugin._safe_io import read_text

        try:  # non-blocking and bounded: the variable may name a FIFO or a huge file
            lines = read_text(manifest, 64 * 1024 * 1024).splitlines()
        except (OSError, ValueError):
            return None
        for line in lines:
            logical, _, actual = line.partition(" ")
            if logical in wanted and actual and os.path.isfile(actual):
                return Path(actual)
    return None
