"""`build.py release-row X.Y.Z`: the row of jax_rocm7_plugin/releases.json for a new release.

Read from the package index (PyPI's JSON API): the published jax-rocm7-pjrt wheels of
the release (with their .postN fixes) and jax-rocm7-plugin wheels per CPython, with
sha256; the jax versions of the release (jax-only bumps such as 0.12.0.1); the JAX
commit, from the `_git_hash` of the published jaxlib wheel; the ROCm version, from the
library wheel's summary; what the first compile needs outside the library (device bitcode, ld.lld),
from the library's own strings (first_compile.py). XLA's pin comes from JAX's MODULE.bazel at that commit when a
JAX checkout is given (`--jax-source`); otherwise the row says it was not read and the
Bazel path reads it when it builds. The PJRT C API major is carried over from the
previous minor release: confirm it against pjrt_c_api.h at the XLA commit.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request
import zipfile
from pathlib import Path
from typing import Any

from packaging.utils import parse_wheel_filename
from packaging.version import Version

from jax_rocm7_plugin._names import LIBRARY_FILE, PJRT_DISTRIBUTION, PJRT_PACKAGE, PLUGIN_DISTRIBUTION

PYPI_JSON = os.environ.get("JAX_ROCM_PYPI_JSON", "https://pypi.org/pypi/{name}/json")
_ROCM_SUMMARY = re.compile(r"ROCm:(\d+\.\d+(?:\.\d+)?)")


def pypi_releases(name: str) -> dict[str, list[dict[str, Any]]]:
    with urllib.request.urlopen(PYPI_JSON.format(name=name), timeout=60) as response:
        data: dict[str, Any] = json.load(response)
    releases: dict[str, list[dict[str, Any]]] = data["releases"]
    return releases


def of_release(releases: dict[str, list[dict[str, Any]]], release: str) -> list[str]:
    """Versions X.Y.Z, X.Y.Z.postN and X.Y.Z.N (final releases only), oldest first."""
    wanted = Version(release).release
    found = []
    for text in releases:
        version = Version(text)
        if version.is_prerelease or version.is_devrelease or version.local:
            continue
        if version.release[:3] == wanted and releases[text]:
            found.append(version)
    return [str(v) for v in sorted(found)]


def linux_wheels(files: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [f for f in files if f["filename"].endswith(".whl") and "x86_64" in f["filename"]]


def artifact(file: dict[str, Any]) -> dict[str, str]:
    _name, version, _build, _tags = parse_wheel_filename(file["filename"])
    return {"version": str(version), "filename": file["filename"], "sha256": file["digests"]["sha256"]}


def plugin_wheels(files_by_version: dict[str, list[dict[str, Any]]], versions: list[str]) -> dict[str, dict[str, str]]:
    """cpXY -> the newest plugin wheel (of the release's versions) built for that CPython."""
    newest: dict[str, dict[str, str]] = {}
    for version in versions:  # oldest first: later ones replace earlier ones
        for file in linux_wheels(files_by_version[version]):
            _name, _version, _build, tags = parse_wheel_filename(file["filename"])
            interpreters = {t.interpreter for t in tags if t.interpreter == t.abi}
            for interpreter in interpreters:
                newest[interpreter] = artifact(file)
    return dict(sorted(newest.items(), key=lambda item: int(item[0][3:])))


def python_versions(plugin: dict[str, dict[str, str]]) -> list[str]:
    return [f"{tag[2]}.{tag[3:]}" for tag in plugin]


def jaxlib_git_hash(release: str, python: str) -> str:
    """`_git_hash` of the published jaxlib wheel (downloaded for one CPython; the hash is the same)."""
    with tempfile.TemporaryDirectory() as directory:
        abi = "cp" + python.replace(".", "")
        command = [
            sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "-d", directory,
            "--python-version", python, "--implementation", "cp", "--abi", abi,
            "--platform", "manylinux_2_27_x86_64", f"jaxlib=={release}",
        ]  # fmt: skip
        subprocess.run(command, check=True)
        (wheel,) = Path(directory).glob("jaxlib-*.whl")
        with zipfile.ZipFile(wheel) as archive:
            return git_hash_of(archive.read("jaxlib/version.py").decode())


def git_hash_of(version_py: str) -> str:
    for node in ast.parse(version_py).body:
        target = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        value = getattr(node, "value", None)
        named = isinstance(target, ast.Name) and target.id == "_git_hash"
        text = value.value if isinstance(value, ast.Constant) else None
        if named and isinstance(text, str) and re.fullmatch(r"[0-9a-f]{40}", text):
            return text
    raise ValueError("jaxlib/version.py has no _git_hash (not a release build)")


def rocm_of(summary: str) -> dict[str, str | None]:
    match = _ROCM_SUMMARY.search(summary)
    if match:
        return {"version": match.group(1), "evidence": f"the published wheel's summary: {summary!r}"}
    return {"version": None, "evidence": f"not stated by the published wheel (summary {summary!r})"}


def xla_pin_from_jax(jax_source: Path, commit: str) -> dict[str, str | None]:
    from jax_rocm7_build.bazel import jax_module_pins, read_jax_module

    text = read_jax_module(commit, jax_source)
    if text is None:
        return {"commit": None, "evidence": f"not read: {jax_source} lacks JAX commit {commit[:8]}"}
    return {**jax_module_pins(text), "evidence": f"JAX's MODULE.bazel at {commit[:8]}, read from a jax-ml/jax checkout"}


def release_row(release: str, previous: dict[str, Any] | None, jax_source: Path | None, cache: Path) -> dict[str, Any]:
    pjrt_files = pypi_releases(PJRT_DISTRIBUTION)
    plugin_files = pypi_releases(PLUGIN_DISTRIBUTION)
    jax_files = pypi_releases("jax")
    pjrt_versions = of_release(pjrt_files, release)
    if not pjrt_versions:
        raise SystemExit(f"release-row: {PJRT_DISTRIBUTION} {release} is not published")
    pjrt = [artifact(f) for v in pjrt_versions for f in linux_wheels(pjrt_files[v])]
    summary, first_compile = _published_library(pjrt[-1]["version"], cache)
    plugin = plugin_wheels(plugin_files, of_release(plugin_files, release))
    python = python_versions(plugin)
    commit = jaxlib_git_hash(release, python[0])
    if jax_source is not None:
        xla: dict[str, str | None] = xla_pin_from_jax(jax_source, commit)
    else:
        xla = {
            "commit": None,
            "evidence": f"not read: pass --jax-source (a jax-ml/jax checkout holding {commit[:8]}); "
            "until then the Bazel path reads JAX's MODULE.bazel when it builds",
        }
    return {
        "release": release,
        "jax": of_release(jax_files, release),
        "python": python,
        "jax_commit": commit,
        "xla": xla,
        "pjrt_c_api_major": previous["pjrt_c_api_major"] if previous else 0,
        "rocm": rocm_of(summary),
        "first_compile": first_compile,
        "pjrt": pjrt,
        "plugin": plugin,
    }


def _published_library(artifact_version: str, cache: Path) -> tuple[str, dict[str, Any]]:
    """The library wheel's summary (from its METADATA) and what its library needs for a first compile (from
    its strings); the wheel is downloaded into the build cache, which `wheels` reuses."""
    from jax_rocm7_build.first_compile import first_compile_needs

    cache.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "-d", str(cache),
        f"{PJRT_DISTRIBUTION}=={artifact_version}",
    ]  # fmt: skip
    subprocess.run(command, check=True)
    (wheel,) = cache.glob(f"{PJRT_PACKAGE}-{artifact_version}-*.whl")
    with zipfile.ZipFile(wheel) as archive, tempfile.TemporaryDirectory() as work:
        metadata = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        text = archive.read(metadata).decode()
        member = next(n for n in archive.namelist() if n.endswith(f"/{LIBRARY_FILE}"))
        library = Path(work) / LIBRARY_FILE
        with archive.open(member) as source, open(library, "wb") as sink:
            shutil.copyfileobj(source, sink, 16 * 1024 * 1024)
        needs = first_compile_needs(library)
    return next((line[9:] for line in text.splitlines() if line.startswith("Summary: ")), ""), needs
