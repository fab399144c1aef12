"""Does the first compile find ROCm's device bitcode and ld.lld? For releases whose library needs them.

What a release's published library needs outside itself is data (releases.json "first_compile", read
from the library's strings by `build.py release-row`): the 0.10.x library looks for ROCm's device
libraries and for ld.lld; 0.11.0 and later link LLD and the device libraries in and need neither.
Where a release needs them, they are looked for where that release's library looks (releases.json
"bitcode_search"/"lld_search", read from its strings: the 0.10.2 library takes HIP_DEVICE_LIB_PATH, then
<ROCM_PATH or /opt/rocm>/amdgcn/bitcode; ld.lld from <root>/llvm/bin, then PATH). ROCm from pip counts too:
the loader points HIP_DEVICE_LIB_PATH and PATH at it. Files the library will not find, in a layout it does not
search (TheRock's lib/llvm/...), are named in the fix, with the variable that makes it look there. A row
without search data falls back to every layout this plugin knows. The doctor only: the loader does not pay
for these stats inside `import jax`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from jax_rocm7_plugin._machine import host_path, machine_path

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


def searched_places(search: Sequence[str], settings: Settings, extra: Sequence[Path] = ()) -> list[Path]:
    """The folders a release's library looks in, from its search data: "$HIP_DEVICE_LIB_PATH", "$PATH",
    "{rocm}/suffix" (under ROCM_PATH, else /opt/rocm); `extra`: what the loader adds (pip ROCm's folders)."""
    root = settings.rocm_path or "/opt/rocm"
    places: list[Path] = []
    for place in search:
        if place == "$PATH":
            places.extend(host_path(settings.sysroot, p) for p in settings.search_path)
        elif place == "$HIP_DEVICE_LIB_PATH":
            places.extend([host_path(settings.sysroot, settings.device_lib_path)] if settings.device_lib_path else [])
        elif place.startswith("{rocm}/"):
            places.append(host_path(settings.sysroot, root) / place.removeprefix("{rocm}/"))
    return [*places, *extra]


def toolchain_findings(
    needs: FirstCompile,
    installs: Sequence[RocmInstall],
    settings: Settings,
    release: str,
    pip_folders: Sequence[Path] = (),
) -> list[Finding]:
    """device-bitcode-missing when the release's first compile needs bitcode or ld.lld that it will not find.
    `pip_folders`: the pip ROCm's bitcode and ld.lld folders, which the loader points the library at."""
    if not (needs.device_bitcode or needs.external_ld_lld) or not installs:
        return []  # nothing needed, or no ROCm at all (rocm-not-found says that)
    if needs.bitcode_search or needs.lld_search:
        return _where_it_looks(needs, installs, settings, release, pip_folders)
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


def _where_it_looks(
    needs: FirstCompile, installs: Sequence[RocmInstall], settings: Settings, release: str, pip: Sequence[Path]
) -> list[Finding]:
    """The places the release's library searches; where they lack the files, the folders that have them."""
    from jax_rocm7_plugin import _findings as catalog
    from jax_rocm7_plugin._policy.rocm_policy import BITCODE_FILE, LLD_FILE, bitcode_dirs, lld_dirs

    roots = rocm_roots(installs, settings.sysroot)
    missing: list[str] = []
    looked: list[str] = []
    fixes: list[str] = []
    for wanted, file, search, layouts, fix in (
        (needs.device_bitcode, BITCODE_FILE, needs.bitcode_search, bitcode_dirs(), "export HIP_DEVICE_LIB_PATH={}"),
        (needs.external_ld_lld, LLD_FILE, needs.lld_search, lld_dirs(), "export PATH={}:$PATH"),
    ):
        if not wanted:
            continue
        places = searched_places(search, settings, pip)
        if any((p / file).is_file() for p in places):
            continue
        what = f"ROCm's device bitcode ({file} and the other device libraries)" if file == BITCODE_FILE else file
        missing.append(what)
        looked.append(f"{file}: the library looks in " + (", ".join(machine_path(p, settings.sysroot) for p in places)))
        elsewhere = next((r / d for r in roots for d in layouts if (r / d / file).is_file()), None)
        if elsewhere is not None:
            fixes.append(fix.format(machine_path(elsewhere, settings.sysroot)))
            looked.append(f"{file} is in {machine_path(elsewhere, settings.sysroot)}, where it does not look")
    if not missing:
        return []
    found_elsewhere = len(fixes) == len(missing)
    summary = (
        f"the library of release {release} looks for {' and '.join(missing)} where this machine's ROCm does not "
        "keep them, so the first jit will fail"
        if found_elsewhere
        else f"the library of release {release} compiles kernels with {' and '.join(missing)} from a ROCm install, "
        "and no ROCm here has it, so the first jit will fail"
    )
    return [
        catalog.device_bitcode_missing(
            (*looked, f"release {release}: {needs.search_evidence or needs.evidence}"),
            summary=summary,
            fix=f"point it at them: {'; '.join(fixes)}" if found_elsewhere else None,
        )
    ]
