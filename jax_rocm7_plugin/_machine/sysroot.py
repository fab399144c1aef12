"""Every machine fact is read under a sysroot (Settings.sysroot), so tests can point at synthetic trees."""

from __future__ import annotations

import os
from pathlib import Path


def host_path(root: Path, absolute: str | os.PathLike[str]) -> Path:
    """`absolute` (a path as seen on the host, e.g. /dev/kfd) under `root`."""
    return root / os.fspath(absolute).lstrip("/")
