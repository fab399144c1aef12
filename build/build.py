#!/usr/bin/env python3
"""One CLI for building the jax-rocm7 wheel pair.

    python build/build.py wheels [--pjrt-library PATH|released|bazel] [--output-dir DIR]
                                 [--release X.Y.Z] [--python-version 3.12]
                                 [--post N] [--only pjrt|plugin] [--dry-run]
                                 [--amdgpu-targets gfx942,...]
                                 [--xla-source DIR] [--jax-source DIR] [--rocm-clang]
    python build/build.py release-row X.Y.Z [--jax-source DIR] [--write]
    python build/build.py check WHEEL...

Which release: the newest of jax_rocm7_plugin/releases.json that the target
CPython (--python-version, else the running one) runs, unless --release names one.

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

from build import bazel_build, extension_modules  # noqa: E402
from jax_rocm7_plugin._policy import releases  # noqa: E402
from jax_rocm7_plugin._binary.elf_header import shared_object_problem  # noqa: E402

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


def released_download_command(
    version: str, cache: Path, distribution: str = "jax-rocm7-pjrt", python: str | None = None
) -> list[str]:
    """pip download of one published wheel; `python` ("3.12"): a CPython wheel for that target,
    whatever Python runs the build (the tag comes from the target)."""
    target = []
    if python is not None:
        abi = "cp" + python.replace(".", "")
        target = ["--python-version", python, "--implementation", "cp", "--abi", abi]
        target += ["--platform", "manylinux_2_27_x86_64", "--platform", "manylinux_2_28_x86_64"]
    return [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        *target,
        "--dest",
        str(cache),
        f"{distribution}=={version}",
    ]


def verified_download(
    artifact: releases.Artifact, distribution: str, progress: Progress, python: str | None = None
) -> Path:
    """The published wheel `artifact` names, from the cache or the package index, with the sha256 the
    release table records. A file whose hash differs stops the build (and is set aside, not deleted)."""
    cache = CACHE_DIR / "released"
    cache.mkdir(parents=True, exist_ok=True)
    wheel = cache / artifact.filename
    if wheel.is_file():
        progress.step(f"using cached {wheel.name}")
        _check_sha256(wheel, artifact, wheel)
        return wheel
    progress.step(f"downloading {distribution}=={artifact.version} from the package index into {cache}")
    # Into a private folder first, checked there, then renamed into the cache: a build running beside
    # this one sees either no file or a whole, checked one.
    with tempfile.TemporaryDirectory(prefix=".download-", dir=cache) as private:
        command = released_download_command(artifact.version, Path(private), distribution, python)
        if subprocess.run(command).returncode != 0:
            raise BuildError(
                f"could not download {distribution}=={artifact.version}; check the package index "
                "or pass --pjrt-library PATH"
            )
        fetched = Path(private) / artifact.filename
        if not fetched.is_file():
            got = ", ".join(p.name for p in Path(private).iterdir()) or "nothing"
            raise BuildError(f"the package index gave {got}, not {artifact.filename} (releases.json)")
        _check_sha256(fetched, artifact, wheel)
        os.replace(fetched, wheel)
    return wheel


def _check_sha256(path: Path, artifact: releases.Artifact, cached_as: Path) -> None:
    """Stop unless `path` has the sha256 the release table records; a bad file is set aside, not deleted."""
    digest = sha256_file(path)
    if digest != artifact.sha256:
        aside = cached_as.with_name(cached_as.name + ".sha256-mismatch")
        path.replace(aside)
        raise BuildError(
            f"{artifact.filename} has sha256 {digest}, but releases.json records {artifact.sha256}: "
            f"not using it (moved to {aside})"
        )


def fetch_released(row: releases.Release, progress: Progress) -> tuple[zipfile.ZipFile, str, dict[str, Any]]:
    """The published library of the release (its newest .postN), verified, its library member, provenance."""
    wheel = verified_download(row.published_pjrt, "jax-rocm7-pjrt", progress)
    archive = zipfile.ZipFile(wheel)
    members = [n for n in archive.namelist() if n.endswith("/" + LIBRARY_NAME)]
    if len(members) != 1:
        raise BuildError(f"{wheel.name} holds {len(members)} copies of {LIBRARY_NAME}, expected 1")
    provenance = {
        "kind": "released",
        "distribution": f"jax-rocm7-pjrt=={row.published_pjrt.version}",
        "wheel": wheel.name,
        "wheel_sha256": row.published_pjrt.sha256,
        "sha256_checked_against": "jax_rocm7_plugin/releases.json",
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


def library_build_info(path: Path, progress: Progress, row: releases.Release | None) -> dict[str, Any]:
    """`row`: the release table's row when the library is the published one (it knows the ROCm version)."""
    from jax_rocm7_plugin.elf_facts import read_elf_facts

    progress.step("reading ELF facts and offload targets")
    facts = read_elf_facts(path)
    c_api, c_api_why = library_c_api_version(path)
    major = facts.hip_runtime_major
    rocm, evidence = (f"{major}.x", f"NEEDED libamdhip64.so.{major}") if major is not None else (None, None)
    if row is not None and row.rocm_version is not None and (major is None or row.rocm_version.startswith(f"{major}.")):
        rocm, evidence = row.rocm_version, f"releases.json: {row.rocm_evidence}"
    return {
        "rocm_version": rocm,
        "rocm_version_evidence": evidence or "the library does not link libamdhip64",
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


def bazel_pins(args: argparse.Namespace) -> dict[str, str]:
    """The release's source pins (releases.json, checked against or completed from JAX's MODULE.bazel)."""
    row: releases.Release | None = args.row
    if row is None:
        raise BuildError(f"--pjrt-library bazel builds releases of releases.json; {args.release} is not one")
    complete = all(row.xla) and args.jax_source is None
    jax_module = None if complete else bazel_build.read_jax_module(row.jax_commit, args.jax_source)
    try:
        return bazel_build.release_pins(row, jax_module)
    except ValueError as error:
        raise BuildError(str(error)) from None


def bazel_workspace(args: argparse.Namespace, pins: dict[str, str]) -> Path:
    """Where Bazel runs for this release: the repository's Bazel files with MODULE.bazel pinned to it."""
    return bazel_build.stage_workspace(CACHE_DIR / "bazel-workspaces" / args.release, pins, args.release)


def run_bazel(source: Source, args: argparse.Namespace, progress: Progress) -> Source:
    """Build the targets in the release's workspace, then ask Bazel where the outputs are."""
    assert source.toolchain is not None
    options = bazel_options(args)
    pins = bazel_pins(args)
    workspace = bazel_workspace(args, pins)
    progress.step(
        f"Bazel workspace for {args.release}: {workspace} (JAX {pins['JAX_COMMIT'][:8]}, XLA {pins['XLA_COMMIT'][:8]})"
    )
    command = bazel_build.build_command(source.toolchain, options)
    progress.step("$ " + bazel_build.shell_line(command))
    if subprocess.run(command, cwd=workspace, check=False).returncode != 0:
        raise BuildError("the Bazel build failed (its output is above)")
    query = bazel_build.outputs_command(source.toolchain, options)
    done = subprocess.run(query, cwd=workspace, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise BuildError(f"bazel cquery failed: {done.stderr.strip().splitlines()[-1:]}")
    library, extensions = bazel_build.split_outputs(done.stdout.splitlines(), workspace)
    if library is None or not library.is_file():
        raise BuildError(f"Bazel reported no {LIBRARY_NAME} among its outputs")
    return source._replace(
        path=library,
        extensions=tuple(extensions),
        provenance=bazel_build.provenance(source.toolchain, options, pins),
    )


def dry_run(args: argparse.Namespace, source: Source, version: str, output_dir: Path) -> int:
    """Print what `wheels` would run, one command per line, and run none of it."""
    python = f"CPython {args.python_version}"
    print(f"# source: {source.kind}; wheels {version} for {python} into {output_dir}")
    if source.kind == "bazel":
        assert source.toolchain is not None
        options = bazel_options(args)
        print(f"# ROCm {source.toolchain.rocm_version} at {source.toolchain.rocm_path}")
        pins = bazel_pins(args)
        print(f"# in {bazel_workspace(args, pins)}: MODULE.bazel pins " + " ".join(f"{k}={v}" for k, v in pins.items()))
        print("$ " + bazel_build.shell_line(bazel_build.build_command(source.toolchain, options)))
        print("$ " + bazel_build.shell_line(bazel_build.outputs_command(source.toolchain, options)))
    elif source.kind == "released":
        artifact = args.row.published_pjrt
        print("$ " + bazel_build.shell_line(released_download_command(artifact.version, CACHE_DIR / "released")))
        print(f"# then: sha256 of {artifact.filename} must be {artifact.sha256}")
    if args.extension_modules == "released" or (args.extension_modules is None and source.kind == "released"):
        for python in args.pythons:
            plugin = args.row.plugin.get(extension_modules.python_tag(python)) if args.row else None
            if plugin is None:
                print(f"# no published extension modules for CPython {python}")
                continue
            command = released_download_command(plugin.version, CACHE_DIR / "released", "jax-rocm7-plugin", python)
            print("$ " + bazel_build.shell_line(command))
            print(f"# then: sha256 of {plugin.filename} must be {plugin.sha256}")
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
            archive, member, provenance = fetch_released(args.row, progress)
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
            **library_build_info(library, progress, args.row if source.kind == "released" else None),
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
            if path.is_file() and "__pycache__" not in path.parts and path.suffix in (".py", ".typed", ".so", ".json"):
                yield path, path.relative_to(REPO)


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
                f"jax-rocm7-plugin {row.release} is published for {', '.join(row.plugin)}, not {tag}: "
                "no extension modules for that CPython"
            )
        wheel = verified_download(artifact, "jax-rocm7-plugin", progress, python)
        progress.step(f"taking the extension modules from {wheel.name}")
        try:
            return extension_modules.from_published_wheel(wheel, artifact.sha256, python, work / tag)
        except ValueError as error:
            raise BuildError(str(error)) from None
    try:
        return extension_modules.from_directory(Path(choice), python)
    except ValueError as error:
        raise BuildError(f"--extension-modules {choice}: {error}") from None


def build_plugin_wheel(
    args: argparse.Namespace,
    modules: extension_modules.ModuleSet | None,
    version: str,
    output_dir: Path,
    progress: Progress,
) -> Path:
    with tempfile.TemporaryDirectory(prefix="jax-rocm7-plugin-") as tmp:
        staging = Path(tmp) / "staging"
        for source, relative in _plugin_sources():
            (staging / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, staging / relative)
        if modules is not None:  # the wheel becomes cpXY-cpXY-manylinux_2_28 for that CPython
            progress.step(f"adding extension modules for CPython {modules.python}: {', '.join(sorted(modules.paths))}")
            extension_modules.stage(
                modules, staging / "jax_rocm7_plugin", staging, version=version, release=args.release
            )
        stamp_version(staging / "jax_rocm7_plugin" / "version.py", version, args.release)
        row: releases.Release | None = args.row
        build = {
            "version": version,
            "release": args.release,
            "rocm_version": "7.x",
            # Modules: one CPython, and the exact jaxlib they were built for (jaxlib imports them before
            # our loader runs, so the pin is their only guard). Without: the CPythons of the release.
            "python_tag": modules.tag if modules is not None else None,
            "requires_python": (
                f"=={modules.python}.*" if modules is not None else row.requires_python if row is not None else ">=3.11"
            ),
            "jaxlib_pin": f"jaxlib=={args.release}" if modules is not None else None,
        }
        (staging / "plugin_build.json").write_text(json.dumps(build, indent=2) + "\n", encoding="utf-8")
        stage_common(staging, "README.plugin.md", _PLUGIN_README.format(**build))
        progress.step(f"writing the jax-rocm7-plugin {version} wheel")
        wheel = run_setup("setup_plugin.py", staging, output_dir, Path(tmp))
    progress.step(f"built {wheel}")
    return wheel


def stamp_version(version_py: Path, version: str, release: str) -> None:
    """Write the wheel's version and release into its copy of version.py."""
    lines = version_py.read_text(encoding="utf-8").splitlines(keepends=True)
    values = {"__version__": version, "JAX_RELEASE": release}
    stamped = []
    for line in lines:
        name = line.split(" = ", 1)[0]
        if name in values and " = " in line:
            line = f'{name} = "{values.pop(name)}"\n'
        stamped.append(line)
    if values:
        raise BuildError(f"{version_py} has no `{' = ..., '.join(values)} = ...` line to stamp")
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
        if len(args.pythons) > 1 and args.extension_modules is None and args.only != "pjrt":
            raise BuildError("Bazel builds the extension modules for one CPython per run: pass --python-version X.Y")
        source = run_bazel(source, args, progress)
    built = []
    if args.only in (None, "pjrt"):
        built.append(build_pjrt_wheel(args, source, version, output_dir, progress))
    if args.only in (None, "plugin"):
        with tempfile.TemporaryDirectory(prefix="jax-rocm7-modules-") as work:
            for python in args.pythons:
                modules = module_set(args, source, python, Path(work), progress)
                built.append(build_plugin_wheel(args, modules, version, output_dir, progress))
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
    if text == "all":
        return text
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
        help="CPython the wheels serve: picks the default release and the extension modules' ABI "
        "(default: this interpreter's); 'all': one plugin wheel per CPython of the release",
    )
    wheels.add_argument(
        "--extension-modules",
        metavar="DIR|released|none",
        help="jaxlib's ROCm extension modules for the plugin wheel: a folder of built modules, 'released' "
        "(from the published jax-rocm7-plugin wheel for the target CPython), or 'none' (default: released "
        "with --pjrt-library released, Bazel's with bazel, none with a library PATH)",
    )
    wheels.add_argument("--xla-source", type=_directory, metavar="DIR", help="build XLA from this checkout")
    wheels.add_argument("--jax-source", type=_directory, metavar="DIR", help="build JAX from this checkout")
    wheels.add_argument("--rocm-clang", action="store_true", help="compile host code with ROCm's clang")
    wheels.add_argument("--output-dir", default=str(REPO / "dist"), help="where wheels go (default: dist/)")
    wheels.add_argument("--post", type=int, metavar="N", help="version the wheels X.Y.Z.postN")
    wheels.add_argument("--only", choices=("pjrt", "plugin"), help="build just one of the two wheels")
    wheels.add_argument(
        "--release",
        metavar="X.Y.Z",
        help="jax release the wheels serve (default: the newest in jax_rocm7_plugin/releases.json "
        "that the target CPython runs)",
    )
    row = commands.add_parser("release-row", help="print the releases.json row of a published release")
    row.add_argument("release", metavar="X.Y.Z")
    row.add_argument("--jax-source", type=_directory, metavar="DIR", help="a jax-ml/jax checkout: read XLA's pin")
    row.add_argument("--write", action="store_true", help="add (or replace) the row in releases.json")
    args = parser.parse_args(argv)
    if args.command in ("check", "release-row"):
        return args
    if args.post is not None and args.post < 0:
        parser.error("--post must be a non-negative integer")
    from packaging.version import InvalidVersion, Version

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
    return args


def running_python() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def served() -> str:
    return "; ".join(f"{r.release} on CPython {', '.join(r.python)}" for r in releases.table())


def choose_release(release: str | None, python: str | None, explicit_library: bool) -> releases.Release | None:
    """The row of the release to build: the one asked for, else the newest the target CPython runs.

    None only for a release outside the table with an explicit library (packaging what is given).
    ValueError says why no release fits.
    """
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
            f"release {release} is not in jax_rocm7_plugin/releases.json (served: {served()}); "
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


def release_row_command(args: argparse.Namespace) -> int:
    """Print the row (JSON) of a published release; --write puts it into releases.json, newest first."""
    from build.release_row import release_row

    table = json.loads(releases.TABLE.read_text(encoding="utf-8"))
    rows = [r for r in table["releases"] if r["release"] != args.release]
    previous = max(rows, key=lambda r: releases.version_key(r["release"]), default=None)
    row = release_row(args.release, previous, args.jax_source, CACHE_DIR / "released")
    print(json.dumps(row, indent=2))
    if args.write:
        table["releases"] = sorted([*rows, row], key=lambda r: releases.version_key(r["release"]), reverse=True)
        releases.TABLE.write_text(json.dumps(table, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {releases.TABLE}: review the row (ROCm version, PJRT C API major) before committing")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.command == "check":
        missing = [str(w) for w in args.wheels if not w.is_file()]
        if missing:
            print(f"build.py: error: no such wheel: {', '.join(missing)}", file=sys.stderr)
            return 2
        return check_command(args.wheels)
    try:
        if args.command == "release-row":
            return release_row_command(args)
        return wheels_command(args)
    except BuildError as error:
        print(f"build.py: error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
