"""One provider per interface in a process: one distribution per Python module, one copy of each runtime a process
may hold once (_policy/machine_needs.json: OpenMP, HIP, HSA), named with each path and who brings it in.

Its reader, `runtime-providers`, looks at what will be mapped beside the PJRT library: the runtimes the Python
environment's distributions ship (vendored copies) or need (their shared objects' NEEDED entries, resolved as the
dynamic loader would from each), and the ones the PJRT library's own closure resolved to."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jax_rocm7_plugin import _findings as catalog
from jax_rocm7_plugin._engine import RuleSet
from jax_rocm7_plugin._findings import Finding
from jax_rocm7_plugin._machine import unrooted
from jax_rocm7_plugin._machine.python_env import PythonEnv, normalized
from jax_rocm7_plugin._policy.machine_needs import runtime_interface
from jax_rocm7_plugin._safe_io import Deadline, real_path, with_deadline

RULES = RuleSet("providers")
MAX_OBJECTS = 3000  # shared objects whose NEEDED entries are read
READ_SECONDS = 5.0

# interface -> {real path (as the machine names it) -> who brings it in}
Providers = dict[str, dict[str, list[str]]]


@RULES.rule("read", reads=("python-env", "checked", "settings"), gives="runtime-providers")
def _runtime_providers(facts: Mapping[str, Any]) -> Providers | None:
    env: PythonEnv | None = facts["python-env"]
    settings = facts["settings"]
    runtime = facts["checked"].facts.runtime
    closure = runtime.dependencies.found if runtime is not None and runtime.dependencies is not None else {}
    try:
        return with_deadline(lambda: _providers(env, closure, settings.sysroot, settings.ld_library_path), READ_SECONDS)
    except Deadline:
        return None


def _providers(env: PythonEnv | None, closure: Mapping[str, Path], root: Path, ld_path: Any) -> Providers:
    from jax_rocm7_plugin._binary.elf_dynamic import ElfError, read_needed
    from jax_rocm7_plugin._machine.ld_resolve import ld_so_conf_dirs, resolve_opened

    found: Providers = {}

    def add(interface: str, path: Path, who: str) -> None:
        shown = unrooted(Path(real_path(path)), root)
        brought = found.setdefault(interface, {}).setdefault(shown, [])
        if who not in brought:
            brought.append(who)

    for soname, path in closure.items():
        interface = runtime_interface(soname)
        if interface is not None:
            add(interface, path, "the PJRT library")
    conf_dirs = ld_so_conf_dirs(root)
    read = 0
    for distribution in env.distributions if env is not None else ():
        for relative in distribution.native:
            path = Path(distribution.location) / relative
            interface = runtime_interface(path.name)
            if interface is not None and path.is_file():
                add(interface, path, f"the distribution {distribution.name}")
                continue
            read += 1
            if read > MAX_OBJECTS:
                return found
            try:
                needed = read_needed(path)
            except (ElfError, OSError, ValueError):
                continue
            for soname in needed:
                interface = runtime_interface(soname)
                if interface is None:
                    continue
                target = resolve_opened(soname, path, root, tuple(ld_path), conf_dirs=conf_dirs)
                if target is not None:
                    add(interface, target, f"the distribution {distribution.name} ({relative} needs {soname})")
    return found


@RULES.rule("find", reads=("runtime-providers",))
def _runtimes_once(facts: Mapping[str, Any]) -> list[Finding]:
    providers: Providers | None = facts["runtime-providers"]
    found = []
    for interface, copies in (providers or {}).items():
        if len(copies) > 1:
            said = [(path, "; ".join(who)) for path, who in sorted(copies.items())]
            found.append(catalog.runtime_provided_twice(interface, said))
    return found


@RULES.rule("find", reads=("python-env",))
def _modules_once(facts: Mapping[str, Any]) -> list[Finding]:
    env: PythonEnv | None = facts["python-env"]
    if env is None:
        return []
    required_by: dict[str, list[str]] = {}
    for distribution in env.distributions:
        for name in distribution.requires:
            required_by.setdefault(name, []).append(distribution.name)
    found = []
    for module, providers in sorted(env.providers().items()):
        if len(providers) < 2:
            continue
        said = [(d.name, d.version, d.location, tuple(required_by.get(normalized(d.name), ()))) for d in providers]
        found.append(catalog.python_module_provided_twice(module, said, _keep(said)))
    return found


def _keep(said: list[tuple[str, str, str, tuple[str, ...]]]) -> str | None:
    """The one to keep: the ROCm build where one alone is, else the one more installed distributions require."""
    rocm = [name for name, *_ in said if "rocm" in name.lower()]
    if len(rocm) == 1:
        return rocm[0]
    ranked = sorted(said, key=lambda s: len(s[3]), reverse=True)
    return ranked[0][0] if len(ranked[0][3]) > len(ranked[1][3]) else None
