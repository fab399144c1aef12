"""Other jax plugins installed beside ours: conflicting ROCm loaders, and CUDA plugins.

Read from the running interpreter's distribution metadata (importlib.metadata)
and the `jax_plugins` namespace package, i.e. exactly what jax's plugin
discovery will see. Nothing is imported.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import pkgutil
import re
from typing import NamedTuple

from jax_rocm7_plugin import findings as catalog
from jax_rocm7_plugin.findings import Finding

OUR_DISTRIBUTIONS = frozenset({"jax-rocm7-plugin", "jax-rocm7-pjrt"})
OUR_PLUGIN_MODULE = "rocm7"  # jax_plugins.rocm7
_ROCM_DISTRIBUTION = re.compile(r"jax-rocm\d+-(plugin|pjrt)|jaxlib-rocm")
_CUDA_DISTRIBUTION = re.compile(r"jax-cuda\d+-(plugin|pjrt)")


class PluginInventory(NamedTuple):
    distributions: dict[str, tuple[str, str]]  # normalized name -> (version, location)
    entry_points: tuple[tuple[str, str, str], ...]  # (name, value, distribution)
    namespace_modules: tuple[str, ...]  # module names under jax_plugins
    upstream_pjrt_files: tuple[str, ...]  # files of jax-rocm7-pjrt under jax_plugins/ (upstream's layout)


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def inventory() -> PluginInventory:
    distributions: dict[str, tuple[str, str]] = {}
    entry_points: list[tuple[str, str, str]] = []
    upstream_files: list[str] = []
    for dist in importlib.metadata.distributions():
        name = _normalize(dist.metadata["Name"] or "")
        if not name or name in distributions:
            continue  # the first on sys.path wins, as for imports
        location = str(getattr(dist, "_path", ""))
        distributions[name] = (dist.version, location)
        for entry in dist.entry_points:
            if entry.group == "jax_plugins":
                entry_points.append((entry.name, entry.value, name))
        if name == "jax-rocm7-pjrt":
            upstream_files.extend(str(f) for f in dist.files or () if str(f).startswith("jax_plugins/"))
    spec = importlib.util.find_spec("jax_plugins")
    modules: list[str] = []
    if spec is not None and spec.submodule_search_locations:
        modules = sorted({m.name for m in pkgutil.iter_modules(list(spec.submodule_search_locations))})
    return PluginInventory(distributions, tuple(entry_points), tuple(modules), tuple(upstream_files))


def plugin_findings(found: PluginInventory) -> list[Finding]:
    results: list[Finding] = []
    conflicts: list[str] = []
    to_remove: list[str] = []
    for name, (version, location) in sorted(found.distributions.items()):
        if _ROCM_DISTRIBUTION.fullmatch(name) and name not in OUR_DISTRIBUTIONS:
            conflicts.append(f"{name} {version} is installed ({location})")
            to_remove.append(name)
    jaxlib = found.distributions.get("jaxlib")
    if jaxlib is not None and "rocm" in jaxlib[0].lower():
        conflicts.append(f"jaxlib {jaxlib[0]} is a ROCm build of jaxlib with its own ROCm backend")
    if found.upstream_pjrt_files:
        conflicts.append(
            "the installed jax-rocm7-pjrt is another build (it ships "
            f"{found.upstream_pjrt_files[0]} and registers its own loader)"
        )
        to_remove.append("jax-rocm7-pjrt")
    rocm_modules = [m for m in found.namespace_modules if "rocm" in m.lower() and m != OUR_PLUGIN_MODULE]
    conflicts.extend(f"module jax_plugins.{m} would also register a 'rocm' backend" for m in rocm_modules)
    rocm_entries = [
        e for e in found.entry_points if "rocm" in (e[0] + e[1]).lower() and e[1] != f"jax_plugins.{OUR_PLUGIN_MODULE}"
    ]
    conflicts.extend(f"entry point jax_plugins:{n} = {v} (from {d})" for n, v, d in rocm_entries)
    if conflicts:
        uninstall = " ".join(dict.fromkeys(to_remove)) or "the package that provides it"
        fix = f"pip uninstall {uninstall}"
        if "jax-rocm7-pjrt" in to_remove:
            fix += ', then pip install "jax-rocm7-pjrt" from the same place as jax-rocm7-plugin'
        results.append(
            catalog.conflicting_rocm_plugin(
                "another ROCm plugin for jax is installed; two loaders race to register 'rocm'",
                fix,
                tuple(conflicts),
            )
        )
    cuda = [f"{n} {v[0]}" for n, v in sorted(found.distributions.items()) if _CUDA_DISTRIBUTION.fullmatch(n)]
    cuda += [f"entry point jax_plugins:{n} = {v}" for n, v, _ in found.entry_points if "cuda" in (n + v).lower()]
    if cuda:
        results.append(catalog.cuda_plugin_present(tuple(dict.fromkeys(cuda))))
    return results
