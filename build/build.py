#!/usr/bin/env python3
"""One CLI for building the jax-rocm7 wheel pair.

    python build/build.py wheels [--pjrt-library PATH|released|bazel] [--output-dir DIR]
                                 [--post N] [--only pjrt|plugin] [--dry-run]
                                 [--amdgpu-targets gfx942,...] [--python-version 3.11]
                                 [--xla-source DIR] [--jax-source DIR] [--rocm-clang]

Where the native library comes from: --pjrt-library PATH (an existing .so),
`released` (the published jax-rocm7-pjrt==X.Y.Z wheel from the package index,
re-packaged with that provenance recorded in build_info()), or `bazel` (XLA and
JAX at the pinned commits, built on a ROCm 7 host with bazelisk; it also builds
the extension modules the plugin wheel then carries). Without the option: `bazel`
where bazelisk and ROCm 7 are found, else `released`. --dry-run prints the
commands and runs nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from build import bazel_build  # noqa: E402
from jax_rocm7_plugin.elf_header import shared_object_problem  # noqa: E402
from jax_rocm7_plugin.version import JAX_RELEASE  # noqa: E402

LIBRARY_NAME = "xla_rocm_plugin.so"
CACHE_DIR = Path(os.environ.get("JAX_ROCM_BUILD_CACHE", Path.home() / ".cache" / "jax-rocm7-build"))
_CHUNK = 8 * 1024 * 1024


class BuildError(Exception):
    """A problem the user can fix; printed as one line, exit status 1."""


# ---------------------------------------------------------------- progress


class Progress:
    """Step lines with elapsed time, and a byte counter for long copies."""

    def __init__(self) -> None:
        self.start = time.monotonic()

    def step(self, message: str) -> None:
        print(f"[{time.monotonic() - self.start:6.1f}s] {message}", flush=True)

    def bytes_callback(self, label: str, total: int) -> Callable[[int], None]:
        marks = {total * k // 10 for k in range(1, 11)} if total else set()
        tty = sys.stdout.isatty()
        state = {"next": 1}

        def report(done: int) -> None:
            decile = done * 10 // total if total else 10
            if decile >= state["next"] or done in marks:
                state["next"] = decile + 1
                line = f"    {label}: {done / 1e6:8.1f} / {total / 1e6:.1f} MB ({decile * 10}%)"
                print(("\r" + line) if tty else line, end="" if tty and done < total else "\n", flush=True)

        return report


def copy_and_hash(source: BinaryIO, destination: Path, size: int, report: Callable[[int], None]) -> str:
    digest = hashlib.sha256()
    done = 0
    with open(destination, "wb") as out:
        while chunk := source.read(_CHUNK):
            out.write(chunk)
            digest.update(chunk)
            done += len(chunk)
            report(done)
    return digest.hexdigest()


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


# ---------------------------------------------------------------- library sources


def released_download_command(release: str, cache: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--dest",
        str(cache),
        f"jax-rocm7-pjrt=={release}",
    ]


def fetch_released(release: str, progress: Progress) -> tuple[zipfile.ZipFile, str, dict[str, Any]]:
    """The published jax-rocm7-pjrt==release wheel (cached), its library member, provenance."""
    cache = CACHE_DIR / "released"
    cache.mkdir(parents=True, exist_ok=True)
    pattern = f"jax_rocm7_pjrt-{release}-*.whl"
    wheels = sorted(cache.glob(pattern))
    if not wheels:
        progress.step(f"downloading jax-rocm7-pjrt=={release} from the package index into {cache}")
        if subprocess.run(released_download_command(release, cache)).returncode != 0:
            raise BuildError(
                f"could not download jax-rocm7-pjrt=={release}; check the package index or pass --pjrt-library PATH"
            )
        wheels = sorted(cache.glob(pattern))
        if not wheels:
            raise BuildError(f"pip reported success but no {pattern} is in {cache}")
    else:
        progress.step(f"using cached {wheels[0].name}")
    wheel = wheels[0]
    archive = zipfile.ZipFile(wheel)
    members = [n for n in archive.namelist() if n.endswith("/" + LIBRARY_NAME)]
    if len(members) != 1:
        raise BuildError(f"{wheel.name} holds {len(members)} copies of {LIBRARY_NAME}, expected 1")
    provenance = {
        "kind": "released",
        "distribution": f"jax-rocm7-pjrt=={release}",
        "wheel": wheel.name,
        "wheel_sha256": sha256_file(wheel),
        "member": members[0],
    }
    return archive, members[0], provenance


# ---------------------------------------------------------------- build_info


def library_c_api_version(path: Path) -> tuple[str | None, str | None]:
    """(version, None) read by loading the library in a child process, or (None, why not)."""
    probe = (
        "import sys; from pathlib import Path; from jax_rocm7_plugin import pjrt_api; "
        "print(pjrt_api.read_c_api_version(pjrt_api.load_library(Path(sys.argv[1]))))"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", probe, str(path)],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=REPO,
        )
    except subprocess.TimeoutExpired:
        return None, "loading the library took over 120 s"
    if done.returncode == 0:
        return done.stdout.strip(), None
    last = (done.stderr.strip().splitlines() or ["unknown error"])[-1]
    return None, f"not loadable on the build machine: {last}"


def library_build_info(path: Path, progress: Progress) -> dict[str, Any]:
    from jax_rocm7_plugin.elf_facts import read_elf_facts

    progress.step("reading ELF facts and offload targets")
    facts = read_elf_facts(path)
    c_api, c_api_why = library_c_api_version(path)
    major = facts.hip_runtime_major
    return {
        "rocm_version": f"{major}.x" if major is not None else None,
        "rocm_version_evidence": (
            f"NEEDED libamdhip64.so.{major}" if major is not None else "the library does not link libamdhip64"
        ),
        "amdgpu_targets": facts.offload_targets or None,
        "offload_bundles": facts.offload_bundles,
        "pjrt_c_api_version": c_api,
        "pjrt_c_api_version_unknown_because": c_api_why,
        "needed": facts.needed,
        "runpath": facts.runpath,
        "exports": facts.exports,
    }


# ---------------------------------------------------------------- wheels


def setup_command(script: str, work: Path, output_dir: Path) -> list[str]:
    return [
        sys.executable,
        str(REPO / script),
        "--quiet",
        "egg_info",
        "--egg-base",
        str(work),
        "build",
        "--build-base",
        str(work / "build"),
        "bdist_wheel",
        "--bdist-dir",
        str(work / "bdist"),
        "--dist-dir",
        str(output_dir),
    ]


def source_date_epoch() -> str | None:
    """SOURCE_DATE_EPOCH as given, else the time of the checkout's HEAD commit (same source, same wheel)."""
    given = os.environ.get("SOURCE_DATE_EPOCH")
    if given:
        return given
    done = subprocess.run(["git", "log", "-1", "--format=%ct"], cwd=REPO, capture_output=True, text=True)
    stamp = done.stdout.strip()
    return stamp if done.returncode == 0 and stamp.isdigit() else None


def normalize_modes(staging: Path) -> None:
    """Modes as a fresh checkout would have them, whatever the umask: 755 for .so, 644 else."""
    for path in staging.rglob("*"):
        if path.is_file():
            path.chmod(0o755 if path.suffix == ".so" else 0o644)


def run_setup(script: str, staging: Path, output_dir: Path, work: Path) -> Path:
    before = set(output_dir.glob("*.whl"))
    command = setup_command(script, work, output_dir)
    normalize_modes(staging)
    env = {**os.environ, "JAX_ROCM_STAGING": str(staging)}
    epoch = source_date_epoch()
    if epoch is not None:  # zip entry times (setuptools reads it); order is sorted already
        env["SOURCE_DATE_EPOCH"] = epoch
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise BuildError(f"{script} failed:\n{done.stdout[-4000:]}{done.stderr[-4000:]}")
    made = sorted(set(output_dir.glob("*.whl")) - before) or _newest_wheel(output_dir, script)
    return made[-1]


def _newest_wheel(output_dir: Path, script: str) -> list[Path]:
    prefix = "jax_rocm7_pjrt-" if "pjrt" in script else "jax_rocm7_plugin-"
    return sorted(output_dir.glob(prefix + "*.whl"), key=lambda p: p.stat().st_mtime)


def stage_common(staging: Path, readme_name: str, readme: str) -> None:
    shutil.copy2(REPO / "LICENSE", staging / "LICENSE")
    (staging / readme_name).write_text(readme, encoding="utf-8")


class Source(NamedTuple):
    """Where the PJRT library (and the extension modules) come from."""

    kind: str  # "path", "released" or "bazel"
    path: Path | None = None  # the library, for "path" (and "bazel" once built)
    toolchain: bazel_build.Toolchain | None = None
    extensions: tuple[Path, ...] = ()
    provenance: dict[str, Any] | None = None


def resolve_source(args: argparse.Namespace, progress: Progress) -> Source:
    choice = args.pjrt_library
    if choice in (None, "bazel"):
        toolchain = bazel_build.find_toolchain(os.environ)
        if isinstance(toolchain, bazel_build.Toolchain):
            return Source("bazel", toolchain=toolchain)
        if choice == "bazel":
            raise BuildError(
                f"{toolchain}. Without them, package an existing library: --pjrt-library PATH, "
                "or --pjrt-library released for the published jax-rocm7-pjrt library"
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


def bazel_options(args: argparse.Namespace) -> bazel_build.BazelOptions:
    return bazel_build.BazelOptions(
        amdgpu_targets=args.amdgpu_targets,
        python_version=args.python_version,
        xla_source=args.xla_source,
        jax_source=args.jax_source,
        extensions=args.only != "pjrt",
        rocm_clang=args.rocm_clang,
    )


def run_bazel(source: Source, options: bazel_build.BazelOptions, progress: Progress) -> Source:
    """Build the targets, then ask Bazel where the outputs are."""
    assert source.toolchain is not None
    command = bazel_build.build_command(source.toolchain, options)
    progress.step("$ " + bazel_build.shell_line(command))
    if subprocess.run(command, cwd=REPO, check=False).returncode != 0:
        raise BuildError("the Bazel build failed (its output is above)")
    query = bazel_build.outputs_command(source.toolchain, options)
    done = subprocess.run(query, cwd=REPO, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise BuildError(f"bazel cquery failed: {done.stderr.strip().splitlines()[-1:]}")
    library, extensions = bazel_build.split_outputs(done.stdout.splitlines())
    if library is None or not library.is_file():
        raise BuildError(f"Bazel reported no {LIBRARY_NAME} among its outputs")
    return source._replace(
        path=library,
        extensions=tuple(extensions),
        provenance=bazel_build.provenance(source.toolchain, options),
    )


def dry_run(args: argparse.Namespace, source: Source, version: str, output_dir: Path) -> int:
    """Print what `wheels` would run, one command per line, and run none of it."""
    print(f"# source: {source.kind}; wheels {version} into {output_dir}")
    if source.kind == "bazel":
        assert source.toolchain is not None
        options = bazel_options(args)
        print(f"# ROCm {source.toolchain.rocm_version} at {source.toolchain.rocm_path}")
        print("$ " + bazel_build.shell_line(bazel_build.build_command(source.toolchain, options)))
        print("$ " + bazel_build.shell_line(bazel_build.outputs_command(source.toolchain, options)))
    elif source.kind == "released":
        print("$ " + bazel_build.shell_line(released_download_command(args.release, CACHE_DIR / "released")))
    for script, wanted in (("setup_pjrt.py", "pjrt"), ("setup_plugin.py", "plugin")):
        if args.only in (None, wanted):
            work = Path("<tmp>")
            command = ["env", f"JAX_ROCM_STAGING={work / 'staging'}", *setup_command(script, work, output_dir)]
            print("$ " + bazel_build.shell_line(command))
    return 0


def build_pjrt_wheel(
    args: argparse.Namespace, source: Source, version: str, output_dir: Path, progress: Progress
) -> Path:
    with tempfile.TemporaryDirectory(prefix="jax-rocm7-pjrt-") as tmp:
        staging = Path(tmp) / "staging"
        package = staging / "jax_rocm7_pjrt"
        package.mkdir(parents=True)
        shutil.copy2(REPO / "pjrt" / "jax_rocm7_pjrt" / "__init__.py", package / "__init__.py")
        library = package / LIBRARY_NAME

        if source.kind == "released":
            archive, member, provenance = fetch_released(args.release, progress)
            with archive, archive.open(member) as handle:
                size = archive.getinfo(member).file_size
                progress.step(f"extracting {member} ({size / 1e6:.0f} MB)")
                digest = copy_and_hash(handle, library, size, progress.bytes_callback("extract", size))
        else:
            path = source.path
            assert path is not None
            size = path.stat().st_size
            progress.step(f"copying {path} ({size / 1e6:.0f} MB)")
            with open(path, "rb") as handle:
                digest = copy_and_hash(handle, library, size, progress.bytes_callback("copy", size))
            provenance = source.provenance or {"kind": "path", "path": str(path.resolve())}
        os.chmod(library, 0o755)

        info = {
            "version": version,
            "release": args.release,
            "library": LIBRARY_NAME,
            "library_sha256": digest,
            "library_size": size,
            "source": provenance,
            **library_build_info(library, progress),
            "built_by": "build/build.py",
        }
        (package / "build_info.json").write_text(json.dumps(info, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        stage_common(staging, "README.pjrt.md", _PJRT_README.format(**info, rocm=info["rocm_version"] or "unknown"))
        progress.step(f"writing the jax-rocm7-pjrt {version} wheel (compressing {size / 1e6:.0f} MB)")
        wheel = run_setup("setup_pjrt.py", staging, output_dir, Path(tmp))
    progress.step(f"built {wheel} ({wheel.stat().st_size / 1e6:.1f} MB)")
    return wheel


def _plugin_sources() -> Iterator[tuple[Path, Path]]:
    for top in ("jax_rocm7_plugin", "jax_plugins"):
        for path in sorted((REPO / top).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix in (".py", ".typed", ".so"):
                yield path, path.relative_to(REPO)


def build_plugin_wheel(
    args: argparse.Namespace, extensions: tuple[Path, ...], version: str, output_dir: Path, progress: Progress
) -> Path:
    with tempfile.TemporaryDirectory(prefix="jax-rocm7-plugin-") as tmp:
        staging = Path(tmp) / "staging"
        for source, relative in _plugin_sources():
            (staging / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, staging / relative)
        for module in extensions:  # built by Bazel: the wheel becomes cpXY-cpXY-manylinux
            progress.step(f"adding extension module {module.name}")
            shutil.copy2(module, staging / "jax_rocm7_plugin" / module.name)
        stamp_version(staging / "jax_rocm7_plugin" / "version.py", version)
        build = {"version": version, "release": args.release, "rocm_version": "7.x"}
        (staging / "plugin_build.json").write_text(json.dumps(build, indent=2) + "\n", encoding="utf-8")
        stage_common(staging, "README.plugin.md", _PLUGIN_README.format(**build))
        progress.step(f"writing the jax-rocm7-plugin {version} wheel")
        wheel = run_setup("setup_plugin.py", staging, output_dir, Path(tmp))
    progress.step(f"built {wheel}")
    return wheel


def stamp_version(version_py: Path, version: str) -> None:
    lines = version_py.read_text(encoding="utf-8").splitlines(keepends=True)
    stamped = [f'__version__ = "{version}"\n' if line.startswith("__version__ =") else line for line in lines]
    if stamped == lines and f'__version__ = "{version}"\n' not in lines:
        raise BuildError(f"{version_py} has no `__version__ =` line to stamp")
    version_py.write_text("".join(stamped), encoding="utf-8")


_PJRT_README = """# jax-rocm7-pjrt {version}

The PJRT C-API plugin library that gives JAX its 'rocm' backend on AMD GPUs
(ROCm {rocm}). Installed by `pip install "jax[rocm7-local]"` through
jax-rocm7-plugin; `jax_rocm7_pjrt.build_info()` says how it was built.
"""

_PLUGIN_README = """# jax-rocm7-plugin {version}

Registers the 'rocm' backend with JAX {release} when this machine can run it, and
says in one line why not when it cannot. Needs jax-rocm7-pjrt {release}.* and
ROCm {rocm_version} (from /opt/rocm, or `jax-rocm7-plugin[with-rocm]` from pip).
"""


def wheels_command(args: argparse.Namespace) -> int:
    progress = Progress()
    version = args.release + (f".post{args.post}" if args.post is not None else "")
    output_dir = Path(args.output_dir).resolve()
    output_dir.mkdir(parents=True, exist_ok=True)
    source = resolve_source(args, progress)
    if args.dry_run:
        return dry_run(args, source, version, output_dir)
    if source.kind == "bazel":
        source = run_bazel(source, bazel_options(args), progress)
    built = []
    if args.only in (None, "pjrt"):
        built.append(build_pjrt_wheel(args, source, version, output_dir, progress))
    if args.only in (None, "plugin"):
        built.append(build_plugin_wheel(args, source.extensions, version, output_dir, progress))
    status = 0
    if not args.skip_check:
        progress.step("checking the wheels (build.py check)")
        status = check_command(built)
    for wheel in built:
        print(wheel)
    return status


def _targets(text: str) -> tuple[str, ...]:
    try:
        return bazel_build.parse_targets(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _python_version(text: str) -> str:
    try:
        return bazel_build.check_python_version(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _directory(text: str) -> Path:
    path = Path(text).resolve()
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: not a directory")
    return path


def check_command(wheels: list[Path]) -> int:
    """One line per problem (`WHEEL: problem`), or `WHEEL: ok`; exit 1 when any wheel has a problem."""
    from build.wheel_check import check_wheel

    bad = 0
    for wheel in wheels:
        problems = check_wheel(wheel)
        for problem in problems:
            print(f"{wheel.name}: {problem}")
        if problems:
            bad += 1
        else:
            print(f"{wheel.name}: ok")
    return 1 if bad else 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="build/build.py", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check", help="check wheels: tags, RECORD, policy, exports, RUNPATH, pins")
    check.add_argument("wheels", nargs="+", type=Path, metavar="WHEEL")
    wheels = commands.add_parser("wheels", help="build jax-rocm7-pjrt and jax-rocm7-plugin wheels")
    wheels.add_argument(
        "--pjrt-library",
        metavar="PATH|released|bazel",
        help="the PJRT .so to package, 'released' for the published jax-rocm7-pjrt library, or 'bazel' "
        "to build it (default: bazel where bazelisk and ROCm 7 are found, else released)",
    )
    wheels.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    wheels.add_argument(
        "--skip-check",
        action="store_true",
        help="do not run `check` on the built wheels (for stand-in libraries that are not ROCm builds)",
    )
    wheels.add_argument(
        "--amdgpu-targets",
        type=_targets,
        default=bazel_build.DEFAULT_AMDGPU_TARGETS,
        metavar="gfxA,gfxB",
        help="GPU targets the Bazel build compiles for (default: " + ",".join(bazel_build.DEFAULT_AMDGPU_TARGETS) + ")",
    )
    wheels.add_argument(
        "--python-version",
        type=_python_version,
        default=f"{sys.version_info.major}.{sys.version_info.minor}",
        help="Python the extension modules are built for (default: this interpreter's)",
    )
    wheels.add_argument("--xla-source", type=_directory, metavar="DIR", help="build XLA from this checkout")
    wheels.add_argument("--jax-source", type=_directory, metavar="DIR", help="build JAX from this checkout")
    wheels.add_argument("--rocm-clang", action="store_true", help="compile host code with ROCm's clang")
    wheels.add_argument("--output-dir", default=str(REPO / "dist"), help="where wheels go (default: dist/)")
    wheels.add_argument("--post", type=int, metavar="N", help="version the wheels X.Y.Z.postN")
    wheels.add_argument("--only", choices=("pjrt", "plugin"), help="build just one of the two wheels")
    wheels.add_argument(
        "--release",
        default=JAX_RELEASE,
        metavar="X.Y.Z",
        help=f"jax release the wheels serve (default {JAX_RELEASE}, from jax_rocm7_plugin/version.py)",
    )
    args = parser.parse_args(argv)
    if args.command == "check":
        return args
    if args.post is not None and args.post < 0:
        parser.error("--post must be a non-negative integer")
    from packaging.version import InvalidVersion, Version

    try:
        if len(Version(args.release).release) != 3 or str(Version(args.release)) != args.release:
            raise InvalidVersion(args.release)
    except InvalidVersion:
        parser.error(f"--release must be X.Y.Z, got {args.release!r}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.command == "check":
        missing = [str(w) for w in args.wheels if not w.is_file()]
        if missing:
            print(f"build.py: error: no such wheel: {', '.join(missing)}", file=sys.stderr)
            return 2
        return check_command(args.wheels)
    try:
        return wheels_command(args)
    except BuildError as error:
        print(f"build.py: error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
