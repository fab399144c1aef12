"""This machine, read under a sysroot: KFD topology, /dev nodes, /dev/shm, ROCm installs, pip ROCm, ld.so, packages.
May import _binary, _policy, _settings (typed fields) and the foundation; never _pipeline or above."""

import os
from pathlib import Path


def host_path(root: Path, absolute: str | os.PathLike[str]) -> Path:
    """`absolute` (a path as seen on the host, e.g. /dev/kfd) under `root` (Settings.sysroot: "/" on a real
    machine, a synthetic tree in tests). Every machine fact is read through it."""
    return root / os.fspath(absolute).lstrip("/")
