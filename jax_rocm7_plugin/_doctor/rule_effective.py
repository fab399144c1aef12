"""The effective value is judged: what the configuration asks of a GPU stack module's parameter
(_policy/machine_needs.json) against the value in effect, which is what runs (an option added after the module was
loaded, or kept out of the initramfs, asks in vain); and the folder a reader takes where its variable is unset,
after its own fallbacks (MIOpen's temporary folder where its default is on a network file system)."""

from __future__ import annotations

import stat
from collections.abc import Mapping
from typing import Any

from jax_rocm7_plugin import _findings as catalog
from jax_rocm7_plugin._engine import RuleSet
from jax_rocm7_plugin._findings import Finding
from jax_rocm7_plugin._machine.kernel import KernelFacts
from jax_rocm7_plugin._machine.write_dirs import WriteDirs
from jax_rocm7_plugin._policy.machine_needs import miopen_network_fallback, stack_modules

RULES = RuleSet("effective")
_TRUE, _FALSE = frozenset({"1", "y", "yes", "on", "true"}), frozenset({"0", "n", "no", "off", "false"})


def _same(asked: str, shown: str) -> bool | None:
    """Whether a parameter shows the value asked (booleans as the kernel prints them, Y/N; numbers by value); None
    where the two cannot be compared (strings, lists)."""
    a, b = asked.strip().lower(), shown.strip().lower()
    if a == b:
        return True
    if a in _TRUE | _FALSE and b in ("y", "n"):
        return (a in _TRUE) == (b == "y")
    try:
        return int(a, 0) == int(b, 0)
    except ValueError:
        return None


@RULES.rule("find", reads=("kernel",))
def _options_in_effect(facts: Mapping[str, Any]) -> list[Finding]:
    kernel: KernelFacts | None = facts["kernel"]
    if kernel is None:
        return []
    asked: dict[tuple[str, str], list[Any]] = {}
    stack = stack_modules()
    for option in kernel.options:
        if option.module not in stack:
            continue  # another module may clamp what it is asked (page_reporting's order): not the stack's to judge
        asked.setdefault((option.module, option.parameter), []).append(option)
    found = []
    for (module, parameter), options in asked.items():
        shown = kernel.in_effect.get(module, {}).get(parameter)
        if shown is None or len({o.value for o in options}) != 1:
            continue  # not shown, or asked two ways (which wins depends on where the module is loaded from)
        if _same(options[0].value, shown) is False:
            first = options[0]
            found.append(catalog.module_option_not_in_effect(module, parameter, first.value, shown, first.source))
    return found


@RULES.rule("find", reads=("write-dirs", "checked"))
def _moved_to_a_shared_folder(facts: Mapping[str, Any]) -> list[Finding]:
    """MIOpen's folders, where a default on a network file system moved them to the temporary folder and that one is
    shared by every user (sticky and world-writable): named once, with a folder of this user's for each variable."""
    dirs: WriteDirs | None = facts["write-dirs"]
    machine = facts["checked"].facts.machine
    if dirs is None or machine is None or not machine.usable_gpus:
        return []
    moved = [d for d in dirs.dirs if d.moved_from is not None and d.exists and d.mode is not None]
    shared = [d for d in moved if d.mode & stat.S_ISVTX and d.mode & stat.S_IWOTH]
    if not shared:
        return []
    from jax_rocm7_plugin._machine.identity import read_identity

    uid = (machine.identity or read_identity(machine.root)).uid
    first = shared[0]
    fallback = miopen_network_fallback()
    folders = [(v, f"{first.path.rstrip('/')}/miopen-{uid}/{name}") for v, name in fallback.folders.items()]
    return [catalog.write_dir_shared(first.purpose, first.path, first.named_by, folders, fallback.sources)]
