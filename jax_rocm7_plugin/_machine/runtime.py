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
from jax_rocm7_plugin._machine import machine_path, resolved
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
from jax_rocm7_plugin._policy.rocm_policy import is_rocm_library
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
    # Libraries to load by absolute path before the PJRT library: what it needs from a ROCm 7 install's private
    # directory (lib/rocm_sysdeps/lib) its RUNPATH misses, when with them nothing else is missing.
    preload: tuple[Path, ...] = ()


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
    preload: tuple[Path, ...] = ()
    if library is not None:
        dependencies = resolve_dependencies([library], root, ld_library_path, conf_dirs=conf_dirs)
        preload = private_preload(dependencies, installs, library, root, ld_library_path, conf_dirs)
        if preload:
            found.append(preload_finding(dependencies, preload, root))
        else:
            found.extend(dependency_findings(dependencies, installs, root))
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
    return RuntimeState(installs, dependencies, found, modules, preload)


def private_preload(
    report: DependencyReport,
    installs: list[RocmInstall],
    library: Path,
    root: Path,
    ld_library_path: Sequence[str],
    conf_dirs: Sequence[str],
) -> tuple[Path, ...]:
    """The libraries to load first so that `library` loads: each missing name taken from a ROCm 7 install's own
    library directories (where ROCm >= 7.14 keeps librocm_sysdeps_*), provided that with them loaded nothing in
    the closure is missing any more; () otherwise. In the order they are named."""
    if not report.missing:
        return ()
    from jax_rocm7_plugin._policy.rocm_policy import private_library_dirs

    private = tuple(f"/{d}" for d in private_library_dirs())
    folders = [d for i in installs if i.major == ROCM_MAJOR for d in i.library_dirs if str(d).endswith(private)]
    chosen: dict[str, Path] = {}
    for name in report.missing_names:
        home = next((d / name for d in folders if (d / name).is_file()), None)
        if home is None:
            return ()
        chosen[name] = home
    from jax_rocm7_plugin._machine.ld_resolve import loaded_in_this_process

    again = resolve_dependencies(
        [*chosen.values(), library],
        root,
        ld_library_path,
        preloaded=loaded_in_this_process() | frozenset(chosen),
        conf_dirs=conf_dirs,
    )
    return tuple(chosen.values()) if not again.missing else ()


def preload_finding(report: DependencyReport, preload: tuple[Path, ...], root: Path) -> Finding:
    """library-dependency-preloaded, naming the folders as the machine knows them (outside any sysroot)."""
    directories = list(dict.fromkeys(machine_path(p.parent, root) for p in preload))
    evidence = tuple(report.chain(m, "the PJRT library") for m in report.missing)
    return catalog.library_dependency_preloaded([p.name for p in preload], directories, evidence)


def extension_findings(modules: Sequence[ExtensionState]) -> list[Finding]:
    """A warning per module that cannot load: the backend still comes up, without what it gives."""
    return [
        catalog.extension_module_unavailable(
            lost(m.module, f"{', '.join(m.missing)} not found"), (f"{m.path} needs {', '.join(m.missing)}",)
        )
        for m in modules
        if m.missing
    ]


def dependency_findings(
    report: DependencyReport, installs: list[RocmInstall], root: Path | None = None
) -> list[Finding]:
    """library-dependency-missing with each missing name's chain up to the PJRT library; where every missing
    name is a system library with a known package on this distribution (os-release), the fix installs it."""
    if not report.missing:
        return []
    names = report.missing_names
    evidence = [report.chain(m, "the PJRT library") for m in report.missing]
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
    fix = None
    if root is not None and not any(is_rocm_library(n) for n in names):
        from jax_rocm7_plugin._machine.host import os_release_ids
        from jax_rocm7_plugin._policy.system_packages import install_command

        command = install_command(names, os_release_ids(root))
        fix = f"install the system package(s) that provide them: {command}" if command else None
    return [catalog.library_dependency_missing(summary, tuple(evidence), fix)]


def rocm_path_findings(rocm_path: str | None, report: DependencyReport, root: Path) -> list[Finding]:
    runtime = report.found.get(HIP_SONAME)
    if not rocm_path or runtime is None:
        return []
    chosen = resolved(root / rocm_path.lstrip("/"))
    if resolved(runtime).is_relative_to(chosen):
        return []
    return [catalog.rocm_path_mismatch((f"ROCM_PATH={rocm_path}", f"{HIP_SONAME} resolves to {runtime}"))]
