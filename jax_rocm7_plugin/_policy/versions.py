"""One compatibility policy for plugin, pjrt library and jaxlib versions.

Rule: all three share the release X.Y.Z. Whatever follows it -- a 4th release
component (0.10.2.1), a post release (0.10.2.post1), a local label
(0.10.2+rocm7.1) or a dev/pre tag -- does not matter. That is what lets a
`.postN` fix of either wheel install without a jax bump; the wheels' metadata
pins (`jax-rocm7-pjrt==X.Y.Z.*`) encode the same rule for pip.

The PJRT C API: a plugin must be built against the major version the installed
jaxlib speaks (XLA bumps the major on ABI breaks; minors are negotiated at run
time through struct sizes).
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from jax_rocm7_plugin._names import JAX_EXTRA_REQUIREMENT, PJRT_DISTRIBUTION, PLUGIN_DISTRIBUTION

if TYPE_CHECKING:
    from jax_rocm7_plugin._findings import Finding

PLUGIN = PLUGIN_DISTRIBUTION
PJRT = PJRT_DISTRIBUTION


def release(version: str) -> tuple[int, int, int]:
    """X.Y.Z of a PEP 440 version string; raises ValueError (packaging's InvalidVersion) if it is not one.

    Plain releases (0.10.2, 0.12.0.1), what every process of a healthy install compares, are read
    without packaging, whose import and regex cost ~2.5 ms inside `import jax`.
    """
    parts: tuple[int, ...]
    plain = version.split(".")
    if version.isascii() and all(p.isdigit() for p in plain):
        parts = tuple(int(p) for p in plain)
    else:
        from packaging.version import Version

        parts = Version(version).release
    padded = (*parts, 0, 0)[:3]
    return (padded[0], padded[1], padded[2])


def release_str(version: str) -> str:
    return ".".join(str(p) for p in release(version))


def same_release(a: str, b: str) -> bool:
    return release(a) == release(b)


def pin_for(version: str) -> str:
    """The requirement a wheel of `version` puts on its partner: ==X.Y.Z.*."""
    return f"=={release_str(version)}.*"


def check_jaxlib(plugin_version: str, jaxlib_version: str) -> Finding | None:
    """version-skew-jaxlib when the plugin and jaxlib are not of one release."""
    from jax_rocm7_plugin import _findings as catalog

    try:
        ok = same_release(plugin_version, jaxlib_version)
    except ValueError as error:  # packaging's InvalidVersion
        return catalog.version_skew("jaxlib", f"cannot compare versions: {error}", "reinstall jax and the plugin", ())
    if ok:
        return None
    plugin_rel, jaxlib_rel = release_str(plugin_version), release_str(jaxlib_version)
    return catalog.version_skew(
        "jaxlib",
        f"{PLUGIN} {plugin_version} serves jaxlib {plugin_rel}.*, but jaxlib {jaxlib_version} is installed",
        f'pip install "{PLUGIN}{pin_for(jaxlib_rel)}" "{PJRT}{pin_for(jaxlib_rel)}" '
        f'(keeps jaxlib {jaxlib_version}), or pip install "{JAX_EXTRA_REQUIREMENT}=={plugin_rel}"',
        (f"{PLUGIN}=={plugin_version}", f"jaxlib=={jaxlib_version}"),
    )


def check_pjrt(plugin_version: str, pjrt_version: str) -> Finding | None:
    """version-skew-pjrt when the plugin and the library's wheel are not of one release."""
    from jax_rocm7_plugin import _findings as catalog

    try:
        ok = same_release(plugin_version, pjrt_version)
    except ValueError as error:  # packaging's InvalidVersion
        return catalog.version_skew("pjrt", f"cannot compare versions: {error}", "reinstall both ROCm wheels", ())
    if ok:
        return None
    plugin_rel = release_str(plugin_version)
    return catalog.version_skew(
        "pjrt",
        f"{PLUGIN} {plugin_version} needs {PJRT} {plugin_rel}.*, but {PJRT} {pjrt_version} is installed",
        f'pip install "{PJRT}{pin_for(plugin_rel)}"',
        (f"{PLUGIN}=={plugin_version}", f"{PJRT}=={pjrt_version}"),
    )


def version_findings(plugin_version: str, jaxlib_version: str | None, pjrt_version: str | None) -> list[Finding]:
    """Every conflict among the installed versions, as findings (loader and doctor share this).

    pjrt_version is None when the library does not come from the jax-rocm7-pjrt wheel.
    """
    from jax_rocm7_plugin import _findings as catalog

    if jaxlib_version is None:
        return [catalog.jaxlib_missing()]
    found = [check_jaxlib(plugin_version, jaxlib_version)]
    if pjrt_version is not None:
        found.append(check_pjrt(plugin_version, pjrt_version))
    return [finding for finding in found if finding is not None]


def expected_pjrt_c_api_major(jaxlib_version: str) -> int | None:
    """The PJRT C API major the given jaxlib speaks, when a served release of its X.Y says (and they agree).

    Read straight from the table's JSON, without building its rows (`releases`): the loader asks
    this once inside every `import jax`.
    """
    major, minor, _ = release(jaxlib_version)
    majors = {c_api for row_release, c_api in _c_api_majors() if release(row_release)[:2] == (major, minor)}
    return majors.pop() if len(majors) == 1 else None


@cache
def _c_api_majors() -> tuple[tuple[str, int], ...]:
    """(release, PJRT C API major) of every row of the release table."""
    import json

    from jax_rocm7_plugin._policy import RELEASES_TABLE

    rows = json.loads(RELEASES_TABLE.read_text(encoding="utf-8"))["releases"]
    return tuple((row["release"], row["pjrt_c_api_major"]) for row in rows)


def pinned(requirement: str) -> tuple[str, str] | None:
    """(name as written, version) of NAME==VERSION where both keep their grammar (PEP 508 names, PEP 440 versions):
    what may enter a printed pip command. The name's case is kept (TheRock's index folders are named with it,
    gfx94X-dcgpu)."""
    from packaging.utils import InvalidName, canonicalize_name
    from packaging.version import InvalidVersion, Version

    name, separator, version = requirement.partition("==")
    try:
        if not separator or canonicalize_name(name, validate=True) is None:
            return None
        return name, str(Version(version))
    except (InvalidName, InvalidVersion):
        return None
