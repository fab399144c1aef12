"""`build.py wheels`: build the jax-rocm7-pjrt and jax-rocm7-plugin wheels (then `check` them).

Which release: the newest of the release table that the target CPython (--python-version,
else the running one) runs, unless --release names one. Where the native library comes
from: --pjrt-library PATH (an existing .so), `released` (the published jax-rocm7-pjrt
wheel, re-packaged with that provenance recorded in build_info()), or `bazel` (XLA and JAX
at the pinned commits, built on a ROCm 7 host with bazelisk; it also builds the extension
modules the plugin wheel then carries). Without the option: `bazel` where bazelisk and
ROCm 7 are found, else `released`. --dry-run prints the commands and runs nothing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from jax_rocm7_build import arguments
from jax_rocm7_build._checkout import REPO
from jax_rocm7_plugin._names import PJRT_DISTRIBUTION, PLUGIN_DISTRIBUTION, ROCM
from jax_rocm7_plugin._policy import RELEASES_TABLE

if TYPE_CHECKING:
    from jax_rocm7_build.sources import Source
    from jax_rocm7_plugin._policy.releases import Release

NAME = "wheels"
HELP = f"build {PJRT_DISTRIBUTION} and {PLUGIN_DISTRIBUTION} wheels"


def configure_parser(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from jax_rocm7_build.bazel import DEFAULT_AMDGPU_TARGETS

    wheels = commands.add_parser(NAME, help=HELP, description=__doc__)
    wheels.add_argument(
        "--pjrt-library",
        metavar="PATH|released|bazel",
        help=f"the PJRT .so to package, 'released' for the published {PJRT_DISTRIBUTION} library, or 'bazel' "
        f"to build it (default: bazel where bazelisk and {ROCM} are found, else released)",
    )
    wheels.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    wheels.add_argument(
        "--skip-check",
        action="store_true",
        help="do not run `check` on the built wheels (for stand-in libraries that are not ROCm builds)",
    )
    wheels.add_argument(
        "--amdgpu-targets",
        type=arguments.amdgpu_targets,
        default=DEFAULT_AMDGPU_TARGETS,
        metavar="gfxA,gfxB",
        help="GPU targets the Bazel build compiles for (default: " + ", ".join(DEFAULT_AMDGPU_TARGETS) + ")",
    )
    wheels.add_argument(
        "--python-version",
        type=arguments.python_version,
        help="CPython the wheels serve: picks the default release and the extension modules' ABI "
        "(default: this interpreter's); 'all': one plugin wheel per CPython of the release",
    )
    wheels.add_argument(
        "--extension-modules",
        metavar="DIR|released|none",
        help="jaxlib's ROCm extension modules for the plugin wheel: a folder of built modules, 'released' "
        f"(from the published {PLUGIN_DISTRIBUTION} wheel for the target CPython), or 'none' (default: released "
        "with --pjrt-library released, Bazel's with bazel, none with a library PATH)",
    )
    wheels.add_argument("--xla-source", type=arguments.directory, metavar="DIR", help="build XLA from this checkout")
    wheels.add_argument("--jax-source", type=arguments.directory, metavar="DIR", help="build JAX from this checkout")
    wheels.add_argument("--rocm-clang", action="store_true", help="compile host code with ROCm's clang")
    wheels.add_argument("--output-dir", default=str(REPO / "dist"), help="where wheels go (default: dist/)")
    wheels.add_argument("--post", type=int, metavar="N", help="version the wheels X.Y.Z.postN")
    wheels.add_argument("--only", choices=("pjrt", "plugin"), help="build just one of the two wheels")
    wheels.add_argument(
        "--release",
        metavar="X.Y.Z",
        help="jax release the wheels serve (default: the newest in the release table "
        f"({RELEASES_TABLE.relative_to(REPO)}) that the target CPython runs)",
    )


def validate(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """Checks across options, and the release row chosen (args.row, args.pythons); parser.error on bad input."""
    from packaging.version import InvalidVersion, Version

    from jax_rocm7_plugin._policy import releases

    if args.post is not None and args.post < 0:
        parser.error("--post must be a non-negative integer")
    try:
        if args.release is not None and (
            len(Version(args.release).release) != 3 or str(Version(args.release)) != args.release
        ):
            raise InvalidVersion(args.release)
    except InvalidVersion:
        parser.error(f"--release must be X.Y.Z, got {args.release!r}")
    explicit_library = args.pjrt_library not in (None, "released", "bazel")
    every_python = args.python_version == "all"
    try:
        if every_python:
            args.row = releases.get(args.release) if args.release else releases.newest()
            if args.row is None:
                raise ValueError(f"--python-version all needs a release of releases.json; {args.release} is not one")
        else:
            args.row = choose_release(args.release, args.python_version, explicit_library)
    except ValueError as error:
        parser.error(str(error))
    if every_python and args.extension_modules not in (None, "released", "none"):
        parser.error("--python-version all takes modules per CPython: use --extension-modules released or none")
    if args.extension_modules not in (None, "released", "none") and not Path(args.extension_modules).is_dir():
        parser.error(f"--extension-modules {args.extension_modules}: not a directory (or 'released', 'none')")
    args.pythons = list(args.row.python) if every_python else [args.python_version or running_python()]
    args.python_version = args.pythons[0]
    args.release = args.row.release if args.row is not None else args.release


def running_python() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def served() -> str:
    from jax_rocm7_plugin._policy import releases

    return "; ".join(f"{r.release} on CPython {', '.join(r.python)}" for r in releases.table())


def choose_release(release: str | None, python: str | None, explicit_library: bool) -> Release | None:
    """The row of the release to build: the one asked for, else the newest the target CPython runs.

    None only for a release outside the table with an explicit library (packaging what is given).
    ValueError says why no release fits.
    """
    from jax_rocm7_plugin._policy import releases

    target = python or running_python()
    if release is None:
        row = releases.newest_for_python(target)
        if row is None:
            raise ValueError(f"no release of releases.json runs on CPython {target} (served: {served()})")
        return row
    row = releases.get(release)
    if row is None:
        if explicit_library:
            return None
        raise ValueError(
            f"release {release} is not in {RELEASES_TABLE.relative_to(REPO)} (served: {served()}); "
            f"add its row with `build.py release-row {release} --write`"
        )
    if not row.supports(target):
        newest = releases.newest_for_python(target)
        other = f", or leave out --release to build {newest.release} for {target}" if newest else ""
        raise ValueError(
            f"jax {release} runs on CPython {', '.join(row.python)}, not {target}: "
            f"pass --python-version {row.python[0]}{other}"
        )
    return row


def execute(args: argparse.Namespace) -> int:
    import tempfile

    from jax_rocm7_build import assemble, main_check, sources
    from jax_rocm7_build.progress import BuildError, Progress

    progress = Progress()
    version = args.release + (f".post{args.post}" if args.post is not None else "")
    output_dir = Path(args.output_dir).resolve()
    output_dir.mkdir(parents=True, exist_ok=True)
    source = sources.resolve_source(args, progress)
    if args.dry_run:
        return dry_run(args, source, version, output_dir)
    if source.kind == "bazel":
        if len(args.pythons) > 1 and args.extension_modules is None and args.only != "pjrt":
            raise BuildError("Bazel builds the extension modules for one CPython per run: pass --python-version X.Y")
        source = sources.run_bazel(source, args, progress)
    built = []
    if args.only in (None, "pjrt"):
        built.append(assemble.build_pjrt_wheel(args, source, version, output_dir, progress))
    if args.only in (None, "plugin"):
        with tempfile.TemporaryDirectory(prefix=f"{PLUGIN_DISTRIBUTION}-modules-") as work:
            for python in args.pythons:
                modules = sources.module_set(args, source, python, Path(work), progress)
                built.append(assemble.build_plugin_wheel(args, modules, version, output_dir, progress))
    status = 0
    if not args.skip_check:
        progress.step("checking the wheels (build.py check)")
        status = main_check.check_wheels(built)
    for wheel in built:
        print(wheel)
    return status


def dry_run(args: argparse.Namespace, source: Source, version: str, output_dir: Path) -> int:
    """Print what `wheels` would run, one command per line, and run none of it."""
    from jax_rocm7_build import bazel, extension_modules, sources
    from jax_rocm7_build._checkout import CACHE_DIR
    from jax_rocm7_build.assemble import setup_command
    from jax_rocm7_build.downloads import released_download_command

    python = f"CPython {args.python_version}"
    print(f"# source: {source.kind}; wheels {version} for {python} into {output_dir}")
    if source.kind == "bazel":
        assert source.toolchain is not None
        options = sources.bazel_options(args)
        print(f"# ROCm {source.toolchain.rocm_version} at {source.toolchain.rocm_path}")
        pins = sources.bazel_pins(args)
        workspace = sources.bazel_workspace(args, pins)
        print(f"# in {workspace}: MODULE.bazel pins " + " ".join(f"{k}={v}" for k, v in pins.items()))
        print("$ " + bazel.shell_line(bazel.build_command(source.toolchain, options)))
        print("$ " + bazel.shell_line(bazel.outputs_command(source.toolchain, options)))
    elif source.kind == "released":
        artifact = args.row.published_pjrt
        print("$ " + bazel.shell_line(released_download_command(artifact.version, CACHE_DIR / "released")))
        print(f"# then: sha256 of {artifact.filename} must be {artifact.sha256}")
    if args.extension_modules == "released" or (args.extension_modules is None and source.kind == "released"):
        for python in args.pythons:
            plugin = args.row.plugin.get(extension_modules.python_tag(python)) if args.row else None
            if plugin is None:
                print(f"# no published extension modules for CPython {python}")
                continue
            command = released_download_command(plugin.version, CACHE_DIR / "released", PLUGIN_DISTRIBUTION, python)
            print("$ " + bazel.shell_line(command))
            print(f"# then: sha256 of {plugin.filename} must be {plugin.sha256}")
    for script, wanted in (("setup_pjrt.py", "pjrt"), ("setup_plugin.py", "plugin")):
        if args.only in (None, wanted):
            work = Path("<tmp>")
            command = ["env", f"JAX_ROCM_STAGING={work / 'staging'}", *setup_command(script, work, output_dir)]
            print("$ " + bazel.shell_line(command))
    return 0
