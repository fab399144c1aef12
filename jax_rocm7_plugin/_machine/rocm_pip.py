"""ROCm installed from pip (TheRock's `rocm-sdk-core` wheel, package `_rocm_sdk_core`).

XLA compiles kernels at run time: it links the device bitcode libraries (ocml.bc,
ockl.bc, ...) and calls ld.lld. A system ROCm has them under /opt/rocm; a pip
ROCm has them inside site-packages, where nothing looks by default. When (and
only when) the pip ROCm is the runtime the PJRT library will load, the loader points
HIP and XLA at it, never overriding a variable the user set.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import MutableMapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from jax_rocm7_plugin._environment import is_set, read
from jax_rocm7_plugin._machine import resolved
from jax_rocm7_plugin._names import HIP_SONAME, PIP_ROCM_PACKAGE
from jax_rocm7_plugin._record import NamedTuple

if TYPE_CHECKING:
    from jax_rocm7_plugin._findings import Finding


class PipRocm(NamedTuple):
    root: Path
    bitcode_dir: Path | None  # holds ocml.bc
    lld_dir: Path | None  # holds ld.lld

    @property
    def complete(self) -> bool:
        return self.bitcode_dir is not None and self.lld_dir is not None


def find_pip_rocm(root: Path | None = None) -> PipRocm | None:
    """The pip ROCm root (from the import system unless given), if it has a HIP runtime."""
    if root is None:
        spec = importlib.util.find_spec(PIP_ROCM_PACKAGE)
        if spec is None or not spec.submodule_search_locations:
            return None
        root = Path(next(iter(spec.submodule_search_locations)))
    if not (root / "lib" / HIP_SONAME).exists():
        return None
    from jax_rocm7_plugin._policy.rocm_policy import BITCODE_FILE, LLD_FILE, bitcode_dirs, lld_dirs

    bitcode = next((root / d for d in bitcode_dirs() if (root / d / BITCODE_FILE).is_file()), None)
    # Also the pip ROCm's own bin/: the loader puts whichever folder holds ld.lld on PATH.
    lld = next((root / d for d in (*lld_dirs(), "bin") if (root / d / LLD_FILE).is_file()), None)
    return PipRocm(root, bitcode, lld)


def pip_rocm_in_use(pip_rocm: PipRocm, rocm_path: str | None, ld_library_path: Sequence[str]) -> bool:
    """Will the dynamic loader take HIP from the pip ROCm?

    LD_LIBRARY_PATH wins over the library's RUNPATH, and ROCM_PATH names the
    ROCm the user chose; either pointing at another HIP runtime means a system
    ROCm is in use.
    """
    if rocm_path and resolved(Path(rocm_path)) != resolved(pip_rocm.root):
        return False
    for entry in ld_library_path:
        if entry and (Path(entry) / HIP_SONAME).exists():
            return resolved(Path(entry)) == resolved(pip_rocm.root / "lib")
    return True


def pip_rocm_used(rocm_path: str | None, ld_library_path: Sequence[str]) -> PipRocm | None:
    """The pip ROCm the PJRT library will take its HIP from, if there is one."""
    found = find_pip_rocm()
    return found if found is not None and pip_rocm_in_use(found, rocm_path, ld_library_path) else None


def bitcode_findings(pip_rocm: PipRocm) -> list[Finding]:
    """device-bitcode-missing when the pip ROCm in use lacks ocml.bc or ld.lld."""
    from jax_rocm7_plugin import _findings as catalog

    return [] if pip_rocm.complete else [catalog.device_bitcode_missing((f"pip ROCm at {pip_rocm.root}",))]


def point_at_pip_rocm(pip_rocm: PipRocm, environ: MutableMapping[str, str]) -> list[str]:
    """Set the variables HIP and XLA read to find bitcode and ld.lld, never overriding the user's; say what was set."""
    changed: list[str] = []

    def set_default(name: str, value: str) -> None:
        if not is_set(name, environ):
            environ[name] = value
            changed.append(f"{name}={value}")

    set_default("ROCM_PATH", str(pip_rocm.root))
    if pip_rocm.bitcode_dir is not None:
        set_default("HIP_DEVICE_LIB_PATH", str(pip_rocm.bitcode_dir))
    if pip_rocm.lld_dir is not None:
        path_entries = (read("PATH", environ) or "").split(os.pathsep)
        if str(pip_rocm.lld_dir) not in path_entries:
            environ["PATH"] = os.pathsep.join([str(pip_rocm.lld_dir), *filter(None, path_entries)])
            changed.append(f"PATH+={pip_rocm.lld_dir}")
    return changed
