"""Other jax plugins installed beside ours: conflicting ROCm loaders, and CUDA plugins.

Read from the installed distributions' metadata directories (`*.dist-info`, and
`*.egg-info` of development installs) on sys.path, and from the `jax_plugins`
namespace package: exactly what jax's plugin discovery will see. Nothing is
imported. importlib.metadata would give the same answers, but importing it
costs ~43 ms (email, zipfile, inspect) and parsing every METADATA file ~40 ms
more; the doctor's budget is 100 ms. Names and versions come from the directory
names, as the wheel spec defines them ({name}-{version}.dist-info).
"""

from __future__ import annotations

import configparser
import importlib.util
import os
import pkgutil
import re
import sys
from functools import cache
from pathlib import Path

from jax_rocm7_plugin import _findings as catalog
from jax_rocm7_plugin._findings import Finding
from jax_rocm7_plugin._machine import resolved
from jax_rocm7_plugin._names import (
    ENTRY_POINT_MODULE,
    ENTRY_POINT_NAME,
    PJRT_DISTRIBUTION,
    PLUGIN_DISTRIBUTION,
    PLUGIN_PACKAGE,
)
from jax_rocm7_plugin._record import NamedTuple

OUR_DISTRIBUTIONS = frozenset({PLUGIN_DISTRIBUTION, PJRT_DISTRIBUTION})
_ROCM_DISTRIBUTION = re.compile(r"jax-rocm\d+-(plugin|pjrt)|jaxlib-rocm")
_CUDA_DISTRIBUTION = re.compile(r"jax-cuda\d+-(plugin|pjrt)")
_METADATA_DIR = re.compile(r"(?P<name>[^-]+)-(?P<version>[^-]+?)(?:-py\d[\d.]*)?\.(?:dist|egg)-info")


class Distribution(NamedTuple):
    name: str  # normalized: lower case, runs of -_. as "-"
    version: str
    path: Path  # its metadata directory


class PluginInventory(NamedTuple):
    distributions: dict[str, tuple[str, str]]  # normalized name -> (version, location)
    entry_points: tuple[tuple[str, str, str], ...]  # (name, value, distribution)
    namespace_modules: tuple[str, ...]  # module names under jax_plugins
    upstream_pjrt_files: tuple[str, ...]  # files of jax-rocm7-pjrt under jax_plugins/ (upstream's layout)


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _egg_info_version(path: Path) -> str | None:
    try:
        for line in (path / "PKG-INFO").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("Version:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def installed_distributions() -> dict[str, Distribution]:
    """Every distribution on sys.path; the first one found per name wins, as for imports."""
    return _scan(tuple(sys.path))


@cache
def _scan(search_path: tuple[str, ...]) -> dict[str, Distribution]:
    found: dict[str, Distribution] = {}
    for entry in search_path:
        try:
            names = sorted(os.listdir(entry or "."))
        except OSError:
            continue
        for name in names:
            if not name.endswith((".dist-info", ".egg-info")):
                continue
            path = Path(entry or ".") / name
            match = _METADATA_DIR.fullmatch(name)
            if match is not None:
                distribution, version = normalize(match["name"]), match["version"]
            else:  # name.egg-info without a version in its name
                distribution, version = normalize(name.rsplit(".", 1)[0]), _egg_info_version(path) or "unknown"
            found.setdefault(distribution, Distribution(distribution, version, path))
    return found


def shadowed_install(package_dir: Path) -> tuple[Path, str] | None:
    """Where this plugin's package (at `package_dir`) is not the one its installed distribution holds: (the installed
    package's folder, the installed version). None where no wheel of it is installed, or it is this very folder (an
    install in place)."""
    found = installed_distributions().get(normalize(PLUGIN_DISTRIBUTION))
    if found is None:
        return None
    there = found.path.parent / PLUGIN_PACKAGE
    if not (there / "version.py").is_file():
        return None  # metadata without its package: a damaged install, another finding's
    if resolved(there) == resolved(package_dir):
        return None
    return there, found.version


def installed_version(distribution: str) -> str | None:
    found = installed_distributions().get(normalize(distribution))
    return found.version if found is not None else None


def jax_plugin_entry_points(text: str) -> list[tuple[str, str]]:
    """(name, value) of the `jax_plugins` group in an entry_points.txt; a malformed file has none."""
    parser = configparser.ConfigParser(delimiters=("=",), interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keep names' case
    try:
        parser.read_string(text)
    except configparser.Error:
        return []
    if not parser.has_section("jax_plugins"):
        return []
    return [(name, value.strip()) for name, value in parser.items("jax_plugins")]


def _entry_points(path: Path) -> list[tuple[str, str]]:
    try:
        text = (path / "entry_points.txt").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    return jax_plugin_entry_points(text)


def _record_files(path: Path) -> list[str]:
    try:
        lines = (path / "RECORD").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    return [line.split(",", 1)[0] for line in lines if line]


def inventory() -> PluginInventory:
    distributions = installed_distributions()
    entry_points: list[tuple[str, str, str]] = []
    for dist in distributions.values():
        entry_points.extend((name, value, dist.name) for name, value in _entry_points(dist.path))
    upstream_files: list[str] = []
    pjrt = distributions.get(PJRT_DISTRIBUTION)
    if pjrt is not None:
        upstream_files = [f for f in _record_files(pjrt.path) if f.startswith("jax_plugins/")]
    spec = importlib.util.find_spec("jax_plugins")
    modules: list[str] = []
    if spec is not None and spec.submodule_search_locations:
        modules = sorted({m.name for m in pkgutil.iter_modules(list(spec.submodule_search_locations))})
    return PluginInventory(
        {d.name: (d.version, str(d.path.parent)) for d in distributions.values()},
        tuple(entry_points),
        tuple(modules),
        tuple(upstream_files),
    )


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
            f"the installed {PJRT_DISTRIBUTION} is another build (it ships "
            f"{found.upstream_pjrt_files[0]} and registers its own loader)"
        )
        to_remove.append(PJRT_DISTRIBUTION)
    rocm_modules = [m for m in found.namespace_modules if "rocm" in m.lower() and m != ENTRY_POINT_NAME]
    conflicts.extend(f"module jax_plugins.{m} would also register a 'rocm' backend" for m in rocm_modules)
    rocm_entries = [e for e in found.entry_points if "rocm" in (e[0] + e[1]).lower() and e[1] != ENTRY_POINT_MODULE]
    conflicts.extend(f"entry point jax_plugins:{n} = {v} (from {d})" for n, v, d in rocm_entries)
    if conflicts:
        uninstall = " ".join(dict.fromkeys(to_remove)) or "the package that provides it"
        fix = f"pip uninstall {uninstall}"
        if PJRT_DISTRIBUTION in to_remove:
            fix += f', then pip install "{PJRT_DISTRIBUTION}" from the same place as {PLUGIN_DISTRIBUTION}'
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
