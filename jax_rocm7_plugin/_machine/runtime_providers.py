"""What will be mapped into a process beside the PJRT library, for the runtimes a process may hold once
(_policy/machine_needs.json: OpenMP, HIP, HSA): the copies the Python environment's distributions ship (vendored) or
need (their shared objects' NEEDED entries, resolved as the dynamic loader would from each), and the ones the PJRT
library's own closure resolved to. Bounded: at most MAX_OBJECTS objects read, each through its program headers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from jax_rocm7_plugin._machine import unrooted
from jax_rocm7_plugin._machine.python_env import PythonEnv
from jax_rocm7_plugin._policy.machine_needs import runtime_interface
from jax_rocm7_plugin._safe_io import real_path

MAX_OBJECTS = 3000  # shared objects whose NEEDED entries are read

# interface -> {real path (as the machine names it) -> who brings it in}
Providers = dict[str, dict[str, list[str]]]


def read_runtime_providers(
    env: PythonEnv | None, closure: Mapping[str, Path], root: Path, ld_path: Sequence[str]
) -> Providers:
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
