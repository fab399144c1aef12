"""Is the ROCm runtime the PJRT library needs installed, and would the dynamic loader find all of it?

Shared by the doctor (always) and the loader (when dlopen fails), so both name
the same cause: rocm-not-found / rocm-major-mismatch first, because they are the
root cause, then library-dependency-missing with every missing name.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from jax_rocm7_plugin import _findings as catalog
from jax_rocm7_plugin._findings import Finding
from jax_rocm7_plugin._machine.ld_resolve import DependencyReport, ld_so_conf_dirs, resolve_dependencies, search_dirs
from jax_rocm7_plugin._machine.native_modules import lost
from jax_rocm7_plugin._machine.rocm_install import (
    RocmInstall,
    find_rocm_installs,
    loaded_install,
    older_rocm_findings,
    rocm_findings,
)
from jax_rocm7_plugin._names import HIP_RUNTIME_PREFIX, HIP_SONAME, ROCM_MAJOR
from jax_rocm7_plugin._record import NamedTuple


class ExtensionState(NamedTuple):
    module: str  # _solver, rocm_plugin_extension, ...
    path: Path
    missing: tuple[str, ...]  # libraries the dynamic loader would not find for it


class RuntimeState(NamedTuple):
    installs: list[RocmInstall]
    dependencies: DependencyReport | None  # None when there is no library to resolve
    findings: list[Finding]
    extensions: tuple[ExtensionState, ...] = ()


def runtime_state(
    library: Path | None,
    needed: Sequence[str] | None,
    extensions: Sequence[Path],
    root: Path,
    rocm_path: str | None,
    ld_library_path: Sequence[str],
    release: tuple[str, str | None] | None = None,
) -> RuntimeState:
    """`needed`: the library's DT_NEEDED names (None when unknown); ROCm is judged only if it needs HIP.
    `rocm_path` and `ld_library_path` as in Settings. `release`: the library's jax release and the ROCm
    version its library was built with (releases.json), for rocm-older-than-library."""
    conf_dirs = ld_so_conf_dirs(root)
    installs = find_rocm_installs(root, rocm_path, search_dirs(ld_library_path, conf_dirs))
    found: list[Finding] = []
    if needed is None or any(name.startswith(HIP_RUNTIME_PREFIX) for name in needed):
        found.extend(rocm_findings(installs, rocm_path))
    dependencies = None
    if library is not None:
        dependencies = resolve_dependencies([library], root, ld_library_path, conf_dirs=conf_dirs)
        found.extend(dependency_findings(dependencies, installs))
        found.extend(rocm_path_findings(rocm_path, dependencies, root))
        if release is not None and needed is not None and any(n.startswith(HIP_RUNTIME_PREFIX) for n in needed):
            install = loaded_install(installs, dependencies.found.get(HIP_SONAME))
            found.extend(older_rocm_findings(install, *release))
    modules = tuple(
        ExtensionState(
            path.stem,
            path,
            tuple(resolve_dependencies([path], root, ld_library_path, conf_dirs=conf_dirs).missing_names),
        )
        for path in extensions
    )
    found.extend(extension_findings(modules))
    return RuntimeState(installs, dependencies, found, modules)


def extension_findings(modules: Sequence[ExtensionState]) -> list[Finding]:
    """A warning per module that cannot load: the backend still comes up, without what it gives."""
    return [
        catalog.extension_module_unavailable(
            lost(m.module, f"{', '.join(m.missing)} not found"), (f"{m.path} needs {', '.join(m.missing)}",)
        )
        for m in modules
        if m.missing
    ]


def dependency_findings(report: DependencyReport, installs: list[RocmInstall]) -> list[Finding]:
    if not report.missing:
        return []
    names = report.missing_names
    evidence = [f"{m.name} (needed by {m.needed_by})" for m in report.missing]
    # A ROCm 7 that holds missing libraries where the loader does not look (its lib directory off the
    # path, or lib/rocm_sysdeps/lib, which the library's RUNPATH may not name): say where they are.
    for install in installs:
        if install.major != ROCM_MAJOR:
            continue
        for lib_dir in install.library_dirs:
            present = [n for n in names if (lib_dir / n).exists()]
            if present:
                evidence.append(
                    f"{install.location} has {', '.join(present)} in {lib_dir}: add that directory to LD_LIBRARY_PATH"
                )
    plural = "y" if len(names) == 1 else "ies"
    summary = f"the dynamic loader cannot find {len(names)} librar{plural} the PJRT library needs: {', '.join(names)}"
    return [catalog.library_dependency_missing(summary, tuple(evidence))]


def rocm_path_findings(rocm_path: str | None, report: DependencyReport, root: Path) -> list[Finding]:
    runtime = report.found.get(HIP_SONAME)
    if not rocm_path or runtime is None:
        return []
    chosen = (root / rocm_path.lstrip("/")).resolve()
    if runtime.resolve().is_relative_to(chosen):
        return []
    return [catalog.rocm_path_mismatch((f"ROCM_PATH={rocm_path}", f"{HIP_SONAME} resolves to {runtime}"))]
