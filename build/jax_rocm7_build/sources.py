"""Where the native parts come from: a library PATH, the released wheels, or a Bazel build (and its modules)."""

from __future__ import annotations

import argparse
import os
import subprocess
from pathlib import Path
from typing import Any, NamedTuple

from jax_rocm7_build import bazel, extension_modules
from jax_rocm7_build._checkout import CACHE_DIR
from jax_rocm7_build.downloads import verified_download
from jax_rocm7_build.progress import BuildError, Progress
from jax_rocm7_plugin._binary.elf_header import shared_object_problem
from jax_rocm7_plugin._names import LIBRARY_FILE, PJRT_DISTRIBUTION, PLUGIN_DISTRIBUTION
from jax_rocm7_plugin._policy import releases


class Source(NamedTuple):
    """Where the PJRT library (and the extension modules) come from."""

    kind: str  # "path", "released" or "bazel"
    path: Path | None = None  # the library, for "path" (and "bazel" once built)
    toolchain: bazel.Toolchain | None = None
    extensions: tuple[Path, ...] = ()
    provenance: dict[str, Any] | None = None


def resolve_source(args: argparse.Namespace, progress: Progress) -> Source:
    choice = args.pjrt_library
    if choice in (None, "bazel"):
        toolchain = bazel.find_toolchain(os.environ)
        if isinstance(toolchain, bazel.Toolchain):
            return Source("bazel", toolchain=toolchain)
        if choice == "bazel":
            raise BuildError(
                f"{toolchain}. Without them, package an existing library: --pjrt-library PATH, "
                f"or --pjrt-library released for the published {PJRT_DISTRIBUTION} library"
            )
        progress.step(f"not a Bazel build host ({toolchain}): using the released library")
        return Source("released")
    if choice == "released":
        return Source("released")
    path = Path(choice)
    if not path.is_file():
        raise BuildError(f"--pjrt-library {choice}: no such file")
    problem = shared_object_problem(path)
    if problem is not None:
        raise BuildError(f"--pjrt-library {choice}: {problem}")
    return Source("path", path=path)


def bazel_options(args: argparse.Namespace) -> bazel.BazelOptions:
    return bazel.BazelOptions(
        amdgpu_targets=args.amdgpu_targets,
        python_version=args.python_version,
        xla_source=args.xla_source,
        jax_source=args.jax_source,
        extensions=args.only != "pjrt",
        rocm_clang=args.rocm_clang,
    )


def bazel_pins(args: argparse.Namespace) -> dict[str, str]:
    """The release's source pins (releases.json, checked against or completed from JAX's MODULE.bazel)."""
    row: releases.Release | None = args.row
    if row is None:
        raise BuildError(f"--pjrt-library bazel builds releases of releases.json; {args.release} is not one")
    complete = all(row.xla) and args.jax_source is None
    jax_module = None if complete else bazel.read_jax_module(row.jax_commit, args.jax_source)
    try:
        return bazel.release_pins(row, jax_module)
    except ValueError as error:
        raise BuildError(str(error)) from None


def bazel_workspace(args: argparse.Namespace, pins: dict[str, str]) -> Path:
    """Where Bazel runs for this release: the repository's Bazel files with MODULE.bazel pinned to it."""
    return bazel.stage_workspace(CACHE_DIR / "bazel-workspaces" / args.release, pins, args.release)


def run_bazel(source: Source, args: argparse.Namespace, progress: Progress) -> Source:
    """Build the targets in the release's workspace, then ask Bazel where the outputs are."""
    assert source.toolchain is not None
    options = bazel_options(args)
    pins = bazel_pins(args)
    workspace = bazel_workspace(args, pins)
    progress.step(
        f"Bazel workspace for {args.release}: {workspace} (JAX {pins['JAX_COMMIT'][:8]}, XLA {pins['XLA_COMMIT'][:8]})"
    )
    command = bazel.build_command(source.toolchain, options)
    progress.step("$ " + bazel.shell_line(command))
    if subprocess.run(command, cwd=workspace, check=False).returncode != 0:
        raise BuildError("the Bazel build failed (its output is above)")
    query = bazel.outputs_command(source.toolchain, options)
    done = subprocess.run(query, cwd=workspace, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise BuildError(f"bazel cquery failed: {done.stderr.strip().splitlines()[-1:]}")
    library, extensions = bazel.split_outputs(done.stdout.splitlines(), workspace)
    if library is None or not library.is_file():
        raise BuildError(f"Bazel reported no {LIBRARY_FILE} among its outputs")
    return source._replace(
        path=library,
        extensions=tuple(extensions),
        provenance=bazel.provenance(source.toolchain, options, pins),
    )


def module_set(
    args: argparse.Namespace, source: Source, python: str, work: Path, progress: Progress
) -> extension_modules.ModuleSet | None:
    """The extension modules the plugin wheel for CPython `python` carries (None: a pure-Python wheel).

    --extension-modules decides; without it, the modules come with the library's source: the
    published plugin wheel for `released`, Bazel's outputs for `bazel`, none for a library PATH.
    """
    choice = args.extension_modules
    if choice is None:
        choice = {"released": "released", "bazel": "bazel"}.get(source.kind, "none")
    if choice == "none":
        return None
    if choice == "bazel":  # one CPython: wheels_command refuses more before Bazel runs
        if not source.extensions:
            return None
        return extension_modules.from_bazel(source.extensions, python, source.provenance or {"kind": "bazel"})
    if choice == "released":
        row: releases.Release | None = args.row
        if row is None:
            raise BuildError(
                f"--extension-modules released needs a release of releases.json; {args.release} is not one"
            )
        tag = extension_modules.python_tag(python)
        artifact = row.plugin.get(tag)
        if artifact is None:
            raise BuildError(
                f"{PLUGIN_DISTRIBUTION} {row.release} is published for {', '.join(row.plugin)}, not {tag}: "
                "no extension modules for that CPython"
            )
        wheel = verified_download(artifact, PLUGIN_DISTRIBUTION, progress, python)
        progress.step(f"taking the extension modules from {wheel.name}")
        try:
            return extension_modules.from_published_wheel(wheel, artifact.sha256, python, work / tag)
        except ValueError as error:
            raise BuildError(str(error)) from None
    try:
        return extension_modules.from_directory(Path(choice), python)
    except ValueError as error:
        raise BuildError(f"--extension-modules {choice}: {error}") from None
