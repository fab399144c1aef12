"""Staging and wheel assembly: the trees setup_pjrt.py / setup_plugin.py turn into wheels, reproducibly."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from jax_rocm7_build import extension_modules
from jax_rocm7_build._checkout import REPO
from jax_rocm7_build.downloads import copy_and_hash, fetch_released
from jax_rocm7_build.library_info import library_build_info
from jax_rocm7_build.progress import BuildError, Progress
from jax_rocm7_build.sources import Source
from jax_rocm7_plugin._names import (
    JAX_EXTRA_REQUIREMENT,
    LIBRARY_FILE,
    PJRT_DISTRIBUTION,
    PJRT_PACKAGE,
    PLUGIN_DISTRIBUTION,
    PLUGIN_PACKAGE,
    ROCM_MAJOR,
)
from jax_rocm7_plugin._policy import releases
from jax_rocm7_plugin._policy.versions import pin_for


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
    prefix = f"{PJRT_PACKAGE}-" if "pjrt" in script else f"{PLUGIN_PACKAGE}-"
    return sorted(output_dir.glob(prefix + "*.whl"), key=lambda p: p.stat().st_mtime)


def stage_common(staging: Path, readme_name: str, readme: str) -> None:
    shutil.copy2(REPO / "LICENSE", staging / "LICENSE")
    (staging / readme_name).write_text(readme, encoding="utf-8")


def build_pjrt_wheel(
    args: argparse.Namespace, source: Source, version: str, output_dir: Path, progress: Progress
) -> Path:
    with tempfile.TemporaryDirectory(prefix=f"{PJRT_DISTRIBUTION}-") as tmp:
        staging = Path(tmp) / "staging"
        package = staging / PJRT_PACKAGE
        package.mkdir(parents=True)
        shutil.copy2(REPO / "pjrt" / PJRT_PACKAGE / "__init__.py", package / "__init__.py")
        library = package / LIBRARY_FILE

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
            "library": LIBRARY_FILE,
            "library_sha256": digest,
            "library_size": size,
            "source": provenance,
            **library_build_info(library, progress, args.row if source.kind == "released" else None),
            "built_by": "build/build.py",
        }
        (package / "build_info.json").write_text(json.dumps(info, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        stage_common(
            staging, "README.pjrt.md", _PJRT_README.format(**info, **_NAMES, rocm=info["rocm_version"] or "unknown")
        )
        progress.step(f"writing the {PJRT_DISTRIBUTION} {version} wheel (compressing {size / 1e6:.0f} MB)")
        wheel = run_setup("setup_pjrt.py", staging, output_dir, Path(tmp))
    progress.step(f"built {wheel} ({wheel.stat().st_size / 1e6:.1f} MB)")
    return wheel


def _plugin_sources() -> Iterator[tuple[Path, Path]]:
    for top in (PLUGIN_PACKAGE, "jax_plugins"):
        for path in sorted((REPO / top).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix in (".py", ".typed", ".so", ".json"):
                yield path, path.relative_to(REPO)


def build_plugin_wheel(
    args: argparse.Namespace,
    modules: extension_modules.ModuleSet | None,
    version: str,
    output_dir: Path,
    progress: Progress,
) -> Path:
    with tempfile.TemporaryDirectory(prefix=f"{PLUGIN_DISTRIBUTION}-") as tmp:
        staging = Path(tmp) / "staging"
        for source, relative in _plugin_sources():
            (staging / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, staging / relative)
        if modules is not None:  # the wheel becomes cpXY-cpXY-manylinux_2_28 for that CPython
            progress.step(f"adding extension modules for CPython {modules.python}: {', '.join(sorted(modules.paths))}")
            extension_modules.stage(modules, staging / PLUGIN_PACKAGE, staging, version=version, release=args.release)
        stamp_version(
            staging / PLUGIN_PACKAGE / "version.py", version, args.release, source_digest(staging / PLUGIN_PACKAGE)
        )
        row: releases.Release | None = args.row
        build = {
            "version": version,
            "release": args.release,
            "rocm_version": f"{ROCM_MAJOR}.x",
            # Modules: one CPython, and the exact jaxlib they were built for (jaxlib imports them before
            # our loader runs, so the pin is their only guard). Without: the CPythons of the release.
            "python_tag": modules.tag if modules is not None else None,
            "requires_python": (
                f"=={modules.python}.*" if modules is not None else row.requires_python if row is not None else ">=3.11"
            ),
            "jaxlib_pin": f"jaxlib=={args.release}" if modules is not None else None,
            # Any .postN (or 4th component) of the library for this release installs beside the plugin.
            "pjrt_requirement": f"{PJRT_DISTRIBUTION}{pin_for(args.release)}",
        }
        (staging / "plugin_build.json").write_text(json.dumps(build, indent=2) + "\n", encoding="utf-8")
        stage_common(staging, "README.plugin.md", _PLUGIN_README.format(**build, **_NAMES))
        progress.step(f"writing the {PLUGIN_DISTRIBUTION} {version} wheel")
        wheel = run_setup("setup_plugin.py", staging, output_dir, Path(tmp))
    progress.step(f"built {wheel}")
    return wheel


def source_digest(package: Path) -> str:
    """A sha256 of every file of a staged package but version.py (which carries it), by path and content: the
    loader files its start-up plans under it (_loader/warm.own_files), so a different build is never planned for
    by another's plan, and a reinstall of the same build keeps its plans."""
    digest = hashlib.sha256()
    for path in sorted(p for p in package.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        relative = path.relative_to(package).as_posix()
        if relative != "version.py":
            digest.update(f"{relative}\0{path.stat().st_size}\0".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def stamp_version(version_py: Path, version: str, release: str, digest: str) -> None:
    """Write the wheel's version, release and source digest into its copy of version.py."""
    lines = version_py.read_text(encoding="utf-8").splitlines(keepends=True)
    values = {"__version__": version, "JAX_RELEASE": release, "SOURCE_DIGEST": digest}
    stamped = []
    for line in lines:
        name = line.split(" = ", 1)[0]
        if name in values and " = " in line:
            line = f'{name} = "{values.pop(name)}"\n'
        stamped.append(line)
    if values:
        raise BuildError(f"{version_py} has no `{' = ..., '.join(values)} = ...` line to stamp")
    version_py.write_text("".join(stamped), encoding="utf-8")


# The names in the READMEs come from _names (a rename is one edit there).
_NAMES = {
    "pjrt": PJRT_DISTRIBUTION,
    "plugin": PLUGIN_DISTRIBUTION,
    "extra": JAX_EXTRA_REQUIREMENT,
    "package": PJRT_PACKAGE,
}

_PJRT_README = """# {pjrt} {version}

The PJRT C-API plugin library that gives JAX its 'rocm' backend on AMD GPUs
(ROCm {rocm}). Installed by `pip install "{extra}"` through
{plugin}; `{package}.build_info()` says how it was built.
"""

_PLUGIN_README = """# {plugin} {version}

Registers the 'rocm' backend with JAX {release} when this machine can run it, and
says in one line why not when it cannot. Needs {pjrt_requirement} and
ROCm {rocm_version} (from /opt/rocm, or `{plugin}[with-rocm]` from pip).
"""
