"""Does the first compile find ROCm's device bitcode and ld.lld? For releases whose library needs them.

What a release's published library needs outside itself is data (releases.json "first_compile", read
from the library's strings by `build.py release-row`): the 0.10.x library looks for ROCm's device
libraries and for ld.lld; 0.11.0 and later link LLD and the device libraries in and need neither.
Where a release needs them, every ROCm layout this plugin knows is looked at: AMD's packages
(/opt/rocm[-X.Y.Z]: amdgcn/bitcode, llvm/bin/ld.lld), TheRock's tarballs and ROCm from pip
(lib/llvm/amdgcn/bitcode, lib/llvm/bin/ld.lld), HIP_DEVICE_LIB_PATH, and PATH for ld.lld. The doctor
only: the loader does not pay for these stats inside `import jax`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from jax_rocm7_plugin._machine import host_path

if TYPE_CHECKING:
    from jax_rocm7_plugin._findings import Finding
    from jax_rocm7_plugin._machine.rocm_install import RocmInstall
    from jax_rocm7_plugin._policy.releases import FirstCompile
    from jax_rocm7_plugin._settings import Settings


def rocm_roots(installs: Sequence[RocmInstall], root: Path) -> list[Path]:
    """The top folder of each ROCm install (a loader-path install's is its library folder's parent)."""
    roots: list[Path] = []
    for install in installs:
        if install.location.startswith("pip: "):
            top = Path(install.location[len("pip: ") :])
        elif install.source == "loader path":
            top = host_path(root, install.location).parent
        else:
            top = host_path(root, install.location)
        if top not in roots:
            roots.append(top)
    return roots


def toolchain_findings(
    needs: FirstCompile, installs: Sequence[RocmInstall], settings: Settings, release: str
) -> list[Finding]:
    """device-bitcode-missing when the release's first compile needs bitcode or ld.lld that nothing here has."""
    if not (needs.device_bitcode or needs.external_ld_lld) or not installs:
        return []  # nothing needed, or no ROCm at all (rocm-not-found says that)
    from jax_rocm7_plugin._policy.rocm_policy import BITCODE_FILE, LLD_FILE, bitcode_dirs, lld_dirs

    roots = rocm_roots(installs, settings.sysroot)
    missing: list[str] = []
    looked: list[str] = []
    if needs.device_bitcode:
        places = [r / d for r in roots for d in bitcode_dirs()]
        if settings.device_lib_path:
            places.insert(0, host_path(settings.sysroot, settings.device_lib_path))
        if not any((p / BITCODE_FILE).is_file() for p in places):
            missing.append(f"ROCm's device bitcode ({BITCODE_FILE} and the other device libraries)")
            looked.append("device bitcode looked for in: " + ", ".join(str(p) for p in places))
    if needs.external_ld_lld:
        places = [r / d for r in roots for d in lld_dirs()] + [
            host_path(settings.sysroot, p) for p in settings.search_path
        ]
        if not any((p / LLD_FILE).is_file() for p in places):
            missing.append(f"the {LLD_FILE} linker")
            looked.append(f"{LLD_FILE} looked for in: " + ", ".join(str(p) for p in places))
    if not missing:
        return []
    from jax_rocm7_plugin import _findings as catalog

    return [
        catalog.device_bitcode_missing(
            (*looked, f"release {release}: {needs.evidence}"),
            summary=f"the library of release {release} compiles kernels with {' and '.join(missing)} from a "
            "ROCm install, and no ROCm here has it, so the first jit will fail",
        )
    ]
