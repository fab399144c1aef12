"""One provider per interface in a process: one distribution per Python module, one copy of each runtime a process
may hold once (_policy/machine_needs.json: OpenMP, HIP, HSA), named with each path and who brings it in (their
readers: sources.py, _machine/runtime_providers.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jax_rocm7_plugin import _findings as catalog
from jax_rocm7_plugin._engine import RuleSet
from jax_rocm7_plugin._findings import Finding
from jax_rocm7_plugin._machine.packages import normalize
from jax_rocm7_plugin._machine.python_env import PythonEnv
from jax_rocm7_plugin._machine.runtime_providers import Providers

RULES = RuleSet("providers")


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
        said = [(d.name, d.version, d.location, tuple(required_by.get(normalize(d.name), ()))) for d in providers]
        found.append(catalog.python_module_provided_twice(module, said, _keep(said)))
    return found


def _keep(said: list[tuple[str, str, str, tuple[str, ...]]]) -> str | None:
    """The one to keep: the ROCm build where one alone is, else the one more installed distributions require."""
    rocm = [name for name, *_ in said if "rocm" in name.lower()]
    if len(rocm) == 1:
        return rocm[0]
    ranked = sorted(said, key=lambda s: len(s[3]), reverse=True)
    return ranked[0][0] if len(ranked[0][3]) > len(ranked[1][3]) else None
