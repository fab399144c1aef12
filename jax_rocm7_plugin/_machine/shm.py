"""Is /dev/shm large enough for RCCL's collectives? (Containers default to 64 MB.)"""

from __future__ import annotations

import os
from pathlib import Path

from jax_rocm7_plugin import _findings as catalog
from jax_rocm7_plugin._findings import Finding
from jax_rocm7_plugin._machine import host_path

SHM_DIR = "/dev/shm"
PROC_MOUNTS = "/proc/mounts"
MEMINFO = "/proc/meminfo"
# Docker's default (size=65536k); RCCL's shared-memory transport needs more for 2+ GPUs.
SHM_MIN_BYTES = 64 * 1024 * 1024


def _tmpfs_size(option: str, root: Path) -> int | None:
    """Bytes of a tmpfs `size=` option: 65536k, 2g, 50% (of RAM), or plain bytes."""
    value = option.strip().lower()
    if value.endswith("%"):
        total = _mem_total(root)
        try:
            return None if total is None else total * int(value[:-1]) // 100
        except ValueError:
            return None
    from jax_rocm7_plugin._policy.grammar import parse_size

    return parse_size(value)


# /proc/mounts of a busy host is ~100 KB; /proc/meminfo ~1.5 KB.
MAX_PROC_BYTES = 4 * 1024 * 1024


def _mem_total(root: Path) -> int | None:
    from jax_rocm7_plugin._safe_io import read_text

    try:
        for line in read_text(host_path(root, MEMINFO), MAX_PROC_BYTES).splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def shm_size(root: Path) -> tuple[int | None, str]:
    """Size of /dev/shm and where it was read: the last tmpfs mount on it, else statvfs."""
    size: int | None = None
    source = ""
    from jax_rocm7_plugin._safe_io import read_text

    try:
        lines = read_text(host_path(root, PROC_MOUNTS), MAX_PROC_BYTES).splitlines()
    except (OSError, ValueError):
        lines = []
    for line in lines:
        fields = line.split()
        if len(fields) >= 4 and fields[1] == SHM_DIR and fields[2] == "tmpfs":
            options = dict(o.partition("=")[::2] for o in fields[3].split(","))
            if "size" in options:
                size, source = _tmpfs_size(options["size"], root), f"{PROC_MOUNTS}: {line.strip()}"
            else:
                size, source = None, ""  # tmpfs default: half of RAM; ask statvfs below
    if size is None:
        try:
            stats = os.statvfs(host_path(root, SHM_DIR))
        except OSError as error:
            return 0, f"{host_path(root, SHM_DIR)}: {error.strerror or error}"
        size, source = stats.f_blocks * stats.f_frsize, f"statvfs({SHM_DIR})"
    return size, source


def shm_findings(root: Path, gpu_count: int) -> list[Finding]:
    if gpu_count < 2:
        return []
    size, source = shm_size(root)
    if size is None or size > SHM_MIN_BYTES:
        return []
    return [catalog.shm_too_small(f"{size / 1024**2:.0f} MiB", gpu_count, (source, f"{gpu_count} GPUs"))]
