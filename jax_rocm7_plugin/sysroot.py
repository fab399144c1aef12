"""Every machine fact is read under a sysroot, so tests can point at synthetic trees."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

SYSROOT_ENV = "JAX_ROCM_SYSROOT"


def sysroot(environ: Mapping[str, str] | None = None) -> Path:
    """The root all machine files are read under: $JAX_ROCM_SYSROOT, else `/`."""
    env = os.environ if environ is None else environ
    return Path(env.get(SYSROOT_ENV) or "/")


def host_path(root: Path, absolute: str | os.PathLike[str]) -> Path:
    """`absolute` (a path as seen on the host, e.g. /dev/kfd) under `root`."""
    return root / os.fspath(absolute).lstrip("/")
