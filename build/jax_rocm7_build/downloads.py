"""Published wheels, downloaded and checked: the sha256 the release table records, or the build stops."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from jax_rocm7_build._checkout import CACHE_DIR
from jax_rocm7_build.progress import BuildError, Progress
from jax_rocm7_plugin._names import LIBRARY_FILE, PJRT_DISTRIBUTION, PLUGIN_PACKAGE
from jax_rocm7_plugin._policy import releases

_CHUNK = 8 * 1024 * 1024


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


def released_download_command(
    version: str, cache: Path, distribution: str = PJRT_DISTRIBUTION, python: str | None = None
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
    wheel = verified_download(row.published_pjrt, PJRT_DISTRIBUTION, progress)
    archive = zipfile.ZipFile(wheel)
    members = [n for n in archive.namelist() if n.endswith("/" + LIBRARY_FILE)]
    if len(members) != 1:
        raise BuildError(f"{wheel.name} holds {len(members)} copies of {LIBRARY_FILE}, expected 1")
    provenance = {
        "kind": "released",
        "distribution": f"{PJRT_DISTRIBUTION}=={row.published_pjrt.version}",
        "wheel": wheel.name,
        "wheel_sha256": row.published_pjrt.sha256,
        "sha256_checked_against": f"{PLUGIN_PACKAGE}/_policy/releases.json",
        "member": members[0],
    }
    return archive, members[0], provenance
