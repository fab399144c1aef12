"""The file systems mounted in this process's view: /proc/self/mountinfo (proc(5): `id parent major:minor root
mount-point options [optional fields] - type source super-options`, the mount point with spaces and other bytes
written as octal escapes), and which one holds a path (the longest mount point above it; the last mounted where
two share a point). Read where a reader's behaviour turns on the file system's type (MIOpen leaves a folder on a
network file system for the temporary folder)."""

from __future__ import annotations

import re
from pathlib import Path

from jax_rocm7_plugin._machine import text_under
from jax_rocm7_plugin._record import NamedTuple

MOUNTINFO = "/proc/self/mountinfo"
MAX_MOUNTINFO_BYTES = 4 * 1024 * 1024  # thousands of mounts (a container host) stay far below
_ESCAPE = re.compile(r"\\([0-7]{3})")


class Mount(NamedTuple):
    point: str
    fstype: str
    source: str


def _unescape(text: str) -> str:
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), text)


def read_mounts(root: Path) -> tuple[Mount, ...]:
    """Every well-formed line of mountinfo, in its order; () where it is missing or unreadable."""
    text = text_under(root, MOUNTINFO, MAX_MOUNTINFO_BYTES) or ""
    mounts = []
    for line in text.splitlines():
        fields = line.split()
        if " - " not in line or len(fields) < 7:
            continue
        after = line.split(" - ", 1)[1].split()
        if len(after) < 2 or not fields[4].startswith("/"):
            continue
        mounts.append(Mount(_unescape(fields[4]), after[0], _unescape(after[1])))
    return tuple(mounts)


def mount_of(mounts: tuple[Mount, ...], path: str) -> Mount | None:
    """The mount holding absolute `path`: the longest mount point at or above it, the later where two are equal."""
    best: Mount | None = None
    longest = -1
    for mount in mounts:
        point = mount.point.rstrip("/") or "/"
        holds = point == "/" or path == point or path.startswith(point + "/")
        if holds and len(point) >= longest:
            best, longest = mount, len(point)
    return best
