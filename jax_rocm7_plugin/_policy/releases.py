"""The releases this wheel pair serves, read from releases.json (the one home of per-release data).

Each row names the jax/jaxlib release, the CPythons it runs on, the commits it is
built from (JAX, and XLA as JAX pins it), the PJRT C API major its jaxlib speaks,
the ROCm of the published library, and the sha256 of every upstream artifact that
`build.py wheels --pjrt-library released` uses. Adding a release is one row:
`python build/build.py release-row X.Y.Z` prints it (README).

Stdlib only, loaded on first use: the loader reads it after the machine probe.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from jax_rocm7_plugin._policy import RELEASES_TABLE as TABLE
from jax_rocm7_plugin._record import NamedTuple


class Artifact(NamedTuple):
    """One published wheel: its version (X.Y.Z[.postN]), file name and sha256."""

    version: str
    filename: str
    sha256: str


class XlaPin(NamedTuple):
    """XLA (and the toolchain rules) as JAX's MODULE.bazel pins them at the JAX commit."""

    commit: str | None  # None: not read yet; the Bazel path reads JAX's MODULE.bazel then
    integrity: str | None
    rules_ml_toolchain_commit: str | None
    rules_ml_toolchain_integrity: str | None
    evidence: str


class FirstCompile(NamedTuple):
    """What the release's published library needs outside itself for its first compile (read from its strings
    by `build.py release-row`): ROCm's device bitcode (amdgcn/bitcode/ocml.bc ...), and ld.lld on PATH."""

    device_bitcode: bool
    external_ld_lld: bool
    evidence: str
    # Where that library looks, in its order, as its strings say: "$VARIABLE" (a folder a variable names, or the
    # folders of PATH), "{rocm}/suffix" (under the ROCm root: ROCM_PATH, else /opt/rocm). Empty: nothing to find.
    bitcode_search: tuple[str, ...] = ()
    lld_search: tuple[str, ...] = ()
    search_evidence: str = ""


class Release(NamedTuple):
    release: str  # X.Y.Z, the jaxlib release
    jax: tuple[str, ...]  # jax versions of this release (0.12.0, 0.12.0.1: jax-only bumps)
    python: tuple[str, ...]  # CPythons ("3.12", ...) jaxlib and the published plugin serve
    jax_commit: str  # jaxlib's version._git_hash
    xla: XlaPin
    pjrt_c_api_major: int
    rocm_version: str | None  # of the published library, when it says so
    rocm_evidence: str
    first_compile: FirstCompile
    pjrt: tuple[Artifact, ...]  # the published jax-rocm7-pjrt wheels, oldest first (X.Y.Z, .post1, ...)
    plugin: dict[str, Artifact]  # cpXY -> the newest published jax-rocm7-plugin wheel for that CPython

    @property
    def published_pjrt(self) -> Artifact:
        """The newest published library of this release (its latest .postN fix)."""
        return self.pjrt[-1]

    @property
    def requires_python(self) -> str:
        lowest = min(self.python, key=lambda v: tuple(int(p) for p in v.split(".")))
        return f">={lowest}"

    def supports(self, python: str) -> bool:
        return python in self.python


def _artifact(data: dict[str, Any]) -> Artifact:
    return Artifact(data["version"], data["filename"], data["sha256"])


def _release(row: dict[str, Any]) -> Release:
    xla = row["xla"]
    return Release(
        release=row["release"],
        jax=tuple(row["jax"]),
        python=tuple(row["python"]),
        jax_commit=row["jax_commit"],
        xla=XlaPin(
            xla.get("commit"),
            xla.get("integrity"),
            xla.get("rules_ml_toolchain_commit"),
            xla.get("rules_ml_toolchain_integrity"),
            xla["evidence"],
        ),
        pjrt_c_api_major=row["pjrt_c_api_major"],
        rocm_version=row["rocm"]["version"],
        rocm_evidence=row["rocm"]["evidence"],
        first_compile=FirstCompile(
            **{k: tuple(v) if isinstance(v, list) else v for k, v in row["first_compile"].items()}
        ),
        pjrt=tuple(_artifact(a) for a in row["pjrt"]),
        plugin={tag: _artifact(a) for tag, a in row["plugin"].items()},
    )


@cache
def table() -> tuple[Release, ...]:
    """Every release served, newest first."""
    data = json.loads(TABLE.read_text(encoding="utf-8"))
    rows = tuple(_release(row) for row in data["releases"])
    return tuple(sorted(rows, key=lambda r: version_key(r.release), reverse=True))


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


def get(release: str) -> Release | None:
    return next((r for r in table() if r.release == release), None)


def newest() -> Release:
    return table()[0]


def newest_for_python(python: str) -> Release | None:
    """The newest release whose jaxlib runs on CPython `python` ("3.12")."""
    return next((r for r in table() if r.supports(python)), None)
