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

from typing import TYPE_CHECKING, NamedTuple

from jax_rocm7_plugin._names import PJRT_DISTRIBUTION, PLUGIN_DISTRIBUTION

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


class Skew(NamedTuple):
    """A version conflict, phrased for the user."""

    kind: str  # "jaxlib" or "pjrt"
    summary: str
    fix: str
    evidence: tuple[str, ...]


def check_jaxlib(plugin_version: str, jaxlib_version: str) -> Skew | None:
    try:
        ok = same_release(plugin_version, jaxlib_version)
    except ValueError as error:  # packaging's InvalidVersion
        return Skew("jaxlib", f"cannot compare versions: {error}", "reinstall jax and the plugin", ())
    if ok:
        return None
    plugin_rel, jaxlib_rel = release_str(plugin_version), release_str(jaxlib_version)
    return Skew(
        "jaxlib",
        f"{PLUGIN} {plugin_version} serves jaxlib {plugin_rel}.*, but jaxlib {jaxlib_version} is installed",
        f'pip install "{PLUGIN}=={jaxlib_rel}.*" "{PJRT}=={jaxlib_rel}.*" '
        f'(keeps jaxlib {jaxlib_version}), or pip install "jax[rocm7-local]=={plugin_rel}"',
        (f"{PLUGIN}=={plugin_version}", f"jaxlib=={jaxlib_version}"),
    )


def check_pjrt(plugin_version: str, pjrt_version: str) -> Skew | None:
    try:
        ok = same_release(plugin_version, pjrt_version)
    except ValueError as error:  # packaging's InvalidVersion
        return Skew("pjrt", f"cannot compare versions: {error}", "reinstall both ROCm wheels", ())
    if ok:
        return None
    plugin_rel = release_str(plugin_version)
    return Skew(
        "pjrt",
        f"{PLUGIN} {plugin_version} needs {PJRT} {plugin_rel}.*, but {PJRT} {pjrt_version} is installed",
        f'pip install "{PJRT}=={plugin_rel}.*"',
        (f"{PLUGIN}=={plugin_version}", f"{PJRT}=={pjrt_version}"),
    )


def version_findings(plugin_version: str, jaxlib_version: str | None, pjrt_version: str | None) -> list[Finding]:
    """Every conflict among the installed versions, as findings (loader and doctor share this).

    pjrt_version is None when the library does not come from the jax-rocm7-pjrt wheel.
    """
    from jax_rocm7_plugin import _findings as catalog

    if jaxlib_version is None:
        return [catalog.jaxlib_missing()]
    skews = [check_jaxlib(plugin_version, jaxlib_version)]
    if pjrt_version is not None:
        skews.append(check_pjrt(plugin_version, pjrt_version))
    return [catalog.version_skew(s.kind, s.summary, s.fix, s.evidence) for s in skews if s is not None]


def expected_pjrt_c_api_major(jaxlib_version: str) -> int | None:
    """The PJRT C API major the given jaxlib speaks, when this policy knows it."""
    from jax_rocm7_plugin._policy import releases

    major, minor, _ = release(jaxlib_version)
    return releases.pjrt_c_api_major(major, minor)
