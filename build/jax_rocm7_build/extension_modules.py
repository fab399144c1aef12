"""The ROCm extension modules a plugin wheel carries: where they come from, how they are staged.

Sources: the published jax-rocm7-plugin wheel of the release for the target CPython
(`released`, sha256-checked against releases.json), a folder of built modules (`DIR`), or
Bazel's outputs. Staged as jax_rocm7_plugin/_native/<module>.so behind public stubs (written
by `stage`; they call jax_rocm7_plugin/_loader/extensions.py), with per-module provenance in
_native/build_info.json and a NOTICE for the re-packaged binaries.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import zipfile
from pathlib import Path
from typing import Any, NamedTuple

from jax_rocm7_plugin._names import (
    EXTENSION_CAPABILITIES,
    EXTENSION_MODULES,
    NATIVE_DIR,
    PLUGIN_DISTRIBUTION,
    PLUGIN_PACKAGE,
)
from jax_rocm7_plugin._names import NATIVE_BUILD_INFO as BUILD_INFO


class ModuleSet(NamedTuple):
    """Extension modules for one CPython, each with where it came from."""

    python: str  # "3.12"
    paths: dict[str, Path]  # module name -> file
    sources: dict[str, dict[str, Any]]  # module name -> provenance

    @property
    def tag(self) -> str:
        return python_tag(self.python)


def python_tag(python: str) -> str:
    return "cp" + python.replace(".", "")


def public_stub_source(module: str) -> str:
    """The module the build writes under the public name of each native module it ships."""
    return (
        f'"""{EXTENSION_CAPABILITIES[module]}: the ROCm extension {module} lives in {NATIVE_DIR}/ '
        '(see _loader/extensions.py)."""\n\n'
        "try:\n"
        f"    from {PLUGIN_PACKAGE}._loader.extensions import load_native\n"
        "except Exception as error:  # a damaged install: jaxlib skips ImportError, and only that\n"
        '    raise ImportError(f"{__name__}: the plugin package cannot be imported: {error!r}") from error\n\n'
        "load_native(__name__)\n"
    )


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def module_name(path: Path) -> str:
    """`_solver.so` or `_solver.cpython-312-x86_64-linux-gnu.so` -> `_solver`."""
    return path.name.split(".", 1)[0]


def from_directory(directory: Path, python: str) -> ModuleSet:
    """Every extension module in `directory` (built elsewhere); ValueError for a name jaxlib never imports."""
    found = {module_name(p): p for p in sorted(directory.glob("*.so"))}
    unknown = sorted(set(found) - set(EXTENSION_MODULES))
    if unknown:
        raise ValueError(f"{directory} holds {', '.join(unknown)}, which jaxlib does not import from a ROCm plugin")
    if not found:
        raise ValueError(f"{directory} holds no extension modules (*.so)")
    sources = {m: {"kind": "path", "path": str(p.resolve()), "sha256": _sha256(p)} for m, p in found.items()}
    return ModuleSet(python, found, sources)


def from_bazel(outputs: tuple[Path, ...], python: str, provenance: dict[str, Any]) -> ModuleSet:
    found = {module_name(p): p for p in outputs}
    sources = {m: {"kind": "bazel", "sha256": _sha256(p), **provenance} for m, p in found.items()}
    return ModuleSet(python, found, sources)


def from_published_wheel(wheel: Path, wheel_sha256: str, python: str, into: Path) -> ModuleSet:
    """The modules of a published jax-rocm7-plugin wheel, extracted into `into`."""
    into.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    sources: dict[str, dict[str, Any]] = {}
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.namelist():
            top, _, name = member.partition("/")
            if top != PLUGIN_PACKAGE or "/" in name or not name.endswith(".so"):
                continue
            module = module_name(Path(name))
            if module not in EXTENSION_MODULES:
                continue
            target = into / f"{module}.so"
            with archive.open(member) as source, open(target, "wb") as sink:
                shutil.copyfileobj(source, sink)
            paths[module] = target
            sources[module] = {
                "kind": "released",
                "wheel": wheel.name,
                "wheel_sha256": wheel_sha256,
                "member": member,
                "sha256": _sha256(target),
            }
    if not paths:
        raise ValueError(f"{wheel.name} holds none of jaxlib's ROCm extension modules")
    return ModuleSet(python, paths, sources)


NOTICE = """Extension modules re-packaged in {distribution} {version}
================================================================

{native}/ holds jaxlib's ROCm extension modules ({modules}),
built for CPython {python} and jaxlib {release}. They are compiled from JAX's sources
(https://github.com/jax-ml/jax, jaxlib/rocm and jaxlib/gpu; Copyright The JAX Authors),
which are licensed under the Apache License, Version 2.0
(https://www.apache.org/licenses/LICENSE-2.0). This wheel ships them unchanged; where
each came from (the wheel and its sha256, or the build) is recorded in
{native}/{build_info}. They link against ROCm's libraries
(HIP, hipBLAS, hipSOLVER, rocSOLVER, hipSPARSE, MIOpen), which are not included: ROCm
comes from the host or from pip.
"""


def stage(modules: ModuleSet, package: Path, staging_root: Path, *, version: str, release: str) -> None:
    """Copy the modules into package/_native/, write the public stubs, build_info.json and NOTICE."""
    native = package / NATIVE_DIR
    native.mkdir(parents=True, exist_ok=True)
    for module, path in sorted(modules.paths.items()):
        shutil.copy2(path, native / f"{module}.so")
        (package / f"{module}.py").write_text(public_stub_source(module), encoding="utf-8")
    info = {
        "python": modules.python,
        "python_tag": modules.tag,
        "jaxlib": release,
        "modules": {m: modules.sources[m] for m in sorted(modules.paths)},
    }
    (native / BUILD_INFO).write_text(json.dumps(info, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    notice = NOTICE.format(
        distribution=PLUGIN_DISTRIBUTION,
        native=f"{PLUGIN_PACKAGE}/{NATIVE_DIR}",
        build_info=BUILD_INFO,
        version=version,
        modules=", ".join(sorted(modules.paths)),
        python=modules.python,
        release=release,
    )
    (staging_root / "NOTICE").write_text(notice, encoding="utf-8")
